/* Large objects: parallel multipart upload and parallel ranged download,
 * each worker a thread with its own S3 client (its own libcurl handle and
 * connection).  Memory stays at concurrency x part size whatever the
 * object's size, for files and for streams; a download into a file that
 * takes O_DIRECT adds its write pool's (concurrency + writers) x 4 MiB.
 *
 * Upload ladder (S3's):
 *   POST ?uploads                        -> UploadId
 *   PUT  ?partNumber=N&uploadId=ID  x n  -> ETag of each part (parallel)
 *   POST ?uploadId=ID  <ETags in order>  -> the object's ETag "MD5S-n"
 *   DELETE ?uploadId=ID                  on any failure or signal
 *
 * Download: GET Range bytes=0-(part-1) gives the size (Content-Range) and
 * the ETag; the other ranges follow in parallel with If-Match on it. */
#ifndef RDS3_MULTIPART_H
#define RDS3_MULTIPART_H

#include "s3/local.h"
#include "s3/s3.h"

#include <stdatomic.h>
#include <stdint.h>

#define S3_PART_MIN	   ((uint64_t)5 << 20) /* every part but the last */
#define S3_PART_MAX	   ((uint64_t)5 << 30)
#define S3_PARTS_MAX	   10000u
#define S3_OBJECT_MAX	   ((uint64_t)5 << 40)
#define S3_CONCURRENCY_MAX 64u

struct s3_xfer_opts {
	const struct s3_client_opts *client; /* the workers' clients' options */
	uint64_t part_size;		     /* S3_PART_MIN .. S3_PART_MAX */
	unsigned concurrency;		     /* 1 .. S3_CONCURRENCY_MAX */
	const atomic_int *stop;
	const struct s3_kv *headers;	     /* a multipart upload's object's (x-amz-meta-*) */
	size_t nheaders;
	/* Downloads into files: the page-cache policy (core/direct.h), the
	 * memory available at the start, and what the session's downloads
	 * wrote through the cache so far (NULL: nothing counted). */
	enum rdx_direct direct;
	uint64_t mem_avail;
	_Atomic uint64_t *cached;
};

/* The part size for an object of size bytes: want, grown (to a whole MiB)
 * so that the object fits in S3_PARTS_MAX parts.  -EFBIG past 5 TiB. */
int s3_part_size_for(uint64_t size, uint64_t want, uint64_t *out);

/* Uploads size bytes of the file fd (read with pread at part offsets) as
 * a multipart upload; c (the caller's client) creates, completes and
 * aborts.  info gets the object's ETag and size.  Returns 0 or an
 * s3_last_error(c) code; -errno for a file that cannot be read;
 * -RDX_EINTEGRITY when the ETag S3 computed is not the parts' (a
 * "MD5-n" ETag is checked, another form is not). */
int s3_upload_file(struct s3_client *c, const struct s3_xfer_opts *o,
		   const char *bucket, const char *key, int fd, uint64_t size,
		   struct s3_object_info *info);

/* Uploads what fd (a pipe) brings: one PutObject when it ends within one
 * part, else a multipart upload read part by part.  As above. */
int s3_upload_stream(struct s3_client *c, const struct s3_xfer_opts *o,
		     const char *bucket, const char *key, int fd,
		     struct s3_object_info *info);

/* A server-side copy as a multipart upload (UploadPartCopy), for objects
 * over 5 GiB, which CopyObject refuses, and large ones, whose parts are
 * copied in parallel: src_bucket/src_key, whose HEAD gave src (size,
 * ETag: every part asks for that version, so a source replaced midway is
 * 412 PreconditionFailed), to bucket/key with o->headers (what the copy
 * carries over, see s3_head_carry).  o->part_size grows as for uploads.
 * Aborted on any failure or signal; info gets the new ETag and size.
 * Returns 0 or an s3_last_error(c) code; -RDX_EINTEGRITY when the new
 * object's ETag is not the MD5 of its parts' ETags. */
int s3_copy_multipart(struct s3_client *c, const struct s3_xfer_opts *o,
		      const char *src_bucket, const char *src_key,
		      const struct s3_object_info *src, const char *bucket,
		      const char *key, struct s3_object_info *info);

/* cp from S3 to S3, server side: a HEAD of the source, then CopyObject
 * when it fits one part (o->part_size), else s3_copy_multipart with what
 * the HEAD said to carry over.  info gets the new ETag and the size.
 * Returns 0 or an s3_last_error(c) code. */
int s3_copy(struct s3_client *c, const struct s3_xfer_opts *o,
	    const char *src_bucket, const char *src_key, const char *bucket,
	    const char *key, struct s3_object_info *info);

/* Downloads the object into out: a file gets its ranges with pwrite, in
 * any order; stdout gets them in order.  info gets size and ETag.  Returns
 * 0, an s3_last_error(c) code, or -errno for the output. */
int s3_download(struct s3_client *c, const struct s3_xfer_opts *o,
		const char *bucket, const char *key, struct s3_out *out,
		struct s3_object_info *info);

/* s3_download into a --resume target (s3_out_open_resume): continued
 * from the bytes its record says are complete when the object's ETag and
 * size are still the record's, else started over (with a warning when
 * they changed).  Returns as s3_download; on failure the partial and its
 * record stay for the next try. */
int s3_download_resume(struct s3_client *c, const struct s3_xfer_opts *o,
		       const char *bucket, const char *key, struct s3_out *out,
		       struct s3_object_info *info);

#endif
