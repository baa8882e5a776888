/* What the multipart upload (multipart.c) and the ranged download
 * (ranged.c) share: their workers and how the main thread waits for them. */
#ifndef RDS3_MULTIPART_INT_H
#define RDS3_MULTIPART_INT_H

#include "s3/multipart.h"

#include <openssl/evp.h>
#include <pthread.h>
#include <signal.h>

#define S3_XFER_POLL_MS 100 /* how often a waiting main thread looks at stop */

/* Blocks SIGINT and SIGTERM (the old mask into old) for the threads made
 * while it is in force, so a signal interrupts the main thread's read()
 * and waits, never a worker's transfer halfway through a callback. */
void s3_xfer_block_signals(sigset_t *old);

/* pthread_cond_wait for at most S3_XFER_POLL_MS, so the caller can look at
 * its stop flag, which a signal handler cannot broadcast. */
void s3_xfer_wait(pthread_cond_t *cond, pthread_mutex_t *lock);

/* A worker's own client (own libcurl handle), stopping on cancel rather
 * than on the signal flag.  Returns 0 or -ENOMEM. */
int s3_xfer_client(struct s3_client **c, const struct s3_xfer_opts *o,
		   const atomic_int *cancel);

/* s3_download from byte start of the object (> 0: a resumed download,
 * the file's bytes before it already in), every range with If-Match on
 * if_match (NULL: the first range's ETag pins the rest).  The result is
 * checked as s3_download_verify does. */
int s3_download_at(struct s3_client *c, const struct s3_xfer_opts *o,
		   const char *bucket, const char *key, struct s3_out *out,
		   uint64_t start, const char *if_match,
		   struct s3_object_info *info);

/* The MD5s of consecutive parts of part bytes (the last may be shorter)
 * of data fed in order, into out (n of them, the caller's). */
struct s3_parts_md5 {
	EVP_MD_CTX *md;		  /* the caller's; s3_parts_md5_adopt replaces it */
	uint64_t part, left;	  /* the parts' size; bytes left in this one */
	unsigned i, n;		  /* this part, how many */
	unsigned char (*out)[16];
};

/* Starts over at the first part. */
void s3_parts_md5_start(struct s3_parts_md5 *p);

/* Starts with len bytes (at most a part) already hashed into state, which
 * p takes over (freeing its own md). */
void s3_parts_md5_adopt(struct s3_parts_md5 *p, EVP_MD_CTX *state, uint64_t len);

void s3_parts_md5_feed(struct s3_parts_md5 *p, const void *buf, size_t len);

/* Finishes the last part; returns how many parts the data made. */
unsigned s3_parts_md5_end(struct s3_parts_md5 *p);

/* Checks a finished download of bucket/key against info (size, ETag):
 * the file's size and, for a plain-MD5 ETag, the MD5 of its data
 * (file_md5 when the data was hashed on its way in, else read back), or
 * for stdout of md (the MD5 of what was written; NULL: none); for a
 * multipart ETag the MD5s of its parts, read back unless parts_checked
 * (the ranges checked them, or found that they cannot be).  Returns 0,
 * -RDX_EINTEGRITY with c's error filled, or -errno. */
int s3_download_verify(struct s3_client *c, const struct s3_xfer_opts *o,
		       const char *bucket, const char *key, struct s3_out *out,
		       EVP_MD_CTX *md, const unsigned char *file_md5,
		       bool parts_checked, const struct s3_object_info *info);

#endif
