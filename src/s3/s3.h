/* S3 operations over one HTTP handle: each request is addressed
 * (path-style or virtual-hosted), signed with SigV4 afresh for every
 * attempt, and retried with exponential backoff and full jitter when no
 * response came (connection refused/reset, timeout) or the server says so
 * (5xx, 429, SlowDown, RequestTimeout); never on another 4xx, but for a
 * body that arrived other than it was sent (BadDigest,
 * XAmzContentSHA256Mismatch), which is retried once, then -RDX_EINTEGRITY.
 *
 * Operations return 0, or a negative code whose details are in
 * s3_last_error(): -RDX_EAUTH for 403 (access denied, bad signature, bad
 * key id), -RDX_EREMOTE for any other S3 error, -RDX_ECONNECT /
 * -RDX_ETIMEOUT when no response came, -RDX_EPROTO for a response that
 * makes no sense, -RDX_EINTR when stopped, or the sink's -errno. */
#ifndef RDS3_S3_H
#define RDS3_S3_H

#include "s3/buf.h"
#include "s3/config.h"
#include "s3/rdma.h"
#include "s3/sigv4.h"
#include "s3/xml.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

struct s3_client;

struct s3_client_opts {
	const struct s3_config *cfg; /* must outlive the client */
	unsigned retries;	     /* attempts after the first */
	unsigned backoff_ms;	     /* first backoff (default 100), doubled each time */
	unsigned backoff_max_ms;     /* cap (default 5000) */
	bool insecure;
	long connect_timeout_ms;
	long stall_secs;
	int verbose;
	const atomic_int *stop;
	_Atomic uint64_t *moved; /* --progress (s3_http_opts) */
	/* S3 over RDMA (rdma.h): each client opens its own connection and
	 * buffer of rdma_buf bytes at its first object or part that fits;
	 * what does not fit, or is declined, goes over HTTP. */
	enum s3_rdma_mode rdma;
	struct s3_rdma_how rdma_how; /* rc, or a dc target */
	size_t rdma_buf;
	struct s3_rdma_stats *rdma_stats; /* shared by a session's clients, or NULL */
};

/* What a session's clients moved, and whether RDMA is worth trying. */
struct s3_rdma_stats {
	_Atomic uint64_t rdma, http; /* object bytes, each way */
	atomic_int unusable;	     /* auto: a client found it cannot be had */
	atomic_int opened;	     /* a client opened a connection */
};

struct s3_error {
	long status;	   /* HTTP status; 0 when no response came */
	char code[64];	   /* S3's Code ("NoSuchKey"), "" if none */
	char message[512]; /* S3's Message, or why no response came */
	unsigned attempts; /* tries made */
};

#define S3_ETAG_MAX 128
#define S3_UPLOAD_ID_MAX 1024

struct s3_object_info {
	uint64_t size;
	char etag[S3_ETAG_MAX];
	char last_modified[64];
	char content_type[128];
	bool encrypted; /* SSE-KMS or SSE-C: the ETag is no MD5 of the data */
};

/* An upload body's digests: the SHA-256 signed as x-amz-content-sha256
 * and the MD5 sent as Content-MD5, which S3 checks against what arrived
 * (400 BadDigest). */
struct s3_body_sum {
	char sha256_hex[S3_SHA256_HEX_LEN + 1];
	unsigned char md5[16];
};

/* Both digests of n bytes at p; with md5_only (a body that will go by
 * RDMA, which signs no payload: s3_rdma_wanted), the SHA-256 is left ""
 * and computed only if the request goes over HTTP after all. */
void s3_body_sum(const void *p, size_t n, struct s3_body_sum *out);
void s3_body_sum_md5(const void *p, size_t n, struct s3_body_sum *out);

/* The SHA-256 (hex) of len bytes of p, or of fd from off when p is NULL. */
int s3_body_sha256(const void *p, int fd, uint64_t off, uint64_t len,
		   const atomic_int *stop, char *hex);

/* Whether a body of len bytes is likely to go by RDMA on c (so its
 * SHA-256 can wait: s3_body_sum_md5). */
bool s3_rdma_wanted(const struct s3_client *c, uint64_t len);

/* Whether etag (quotes included or not) is a plain MD5, 32 hex digits,
 * hex (33 bytes, may be NULL) getting them without quotes. */
bool s3_etag_md5(const char *etag, char *hex);

/* Where GetObject's body goes.  rewind (may be NULL) starts the sink over
 * for a retry; without it a failure after the first byte is final. */
struct s3_sink {
	int (*write)(void *ctx, const void *p, size_t n);
	int (*rewind)(void *ctx);
	void *ctx;
};

int s3_client_new(struct s3_client **out, const struct s3_client_opts *o);
void s3_client_free(struct s3_client *c);

/* The error of the last failed operation. */
const struct s3_error *s3_last_error(const struct s3_client *c);

/* Makes e (another client's, say a worker's) c's last error. */
void s3_set_error(struct s3_client *c, const struct s3_error *e);

/* PutObject: len bytes of fd from off, whose digests are sum (signed as
 * x-amz-content-sha256, sent as Content-MD5).  info (may be NULL) gets
 * the ETag.  An ETag other than the MD5 is -RDX_EINTEGRITY, unless S3
 * said the object is encrypted with KMS or a customer key. */
int s3_put_object(struct s3_client *c, const char *bucket, const char *key,
		  int fd, uint64_t off, uint64_t len,
		  const struct s3_body_sum *sum, struct s3_object_info *info);

/* s3_put_object with nheaders extra headers (x-amz-meta-*; at most 7). */
int s3_put_object_h(struct s3_client *c, const char *bucket, const char *key,
		    int fd, uint64_t off, uint64_t len, const struct s3_body_sum *sum,
		    const struct s3_kv *headers, size_t nheaders,
		    struct s3_object_info *info);

/* PutObject of len bytes from memory (see s3_put_object). */
int s3_put_buffer(struct s3_client *c, const char *bucket, const char *key,
		  const void *p, uint64_t len, const struct s3_body_sum *sum,
		  struct s3_object_info *info);

/* CreateMultipartUpload with nheaders extra headers for the new object
 * (x-amz-meta-*; may be none): the new upload's id into upload_id
 * (S3_UPLOAD_ID_MAX bytes). */
int s3_mpu_create(struct s3_client *c, const char *bucket, const char *key,
		  const struct s3_kv *headers, size_t nheaders, char *upload_id);

/* UploadPart number part (1..10000) of len bytes at p, whose digests are
 * sum (as s3_put_object); the part's ETag (as sent, quotes included) into
 * etag (S3_ETAG_MAX bytes).  No ETag is -RDX_EPROTO. */
int s3_mpu_part(struct s3_client *c, const char *bucket, const char *key,
		const char *upload_id, unsigned part, const void *p, uint64_t len,
		const struct s3_body_sum *sum, char *etag);

/* CompleteMultipartUpload of parts 1..n with these ETags, in order; the
 * object's ETag into etag, and md5_etag false when S3 said the object is
 * encrypted with KMS or a customer key (its ETag is then no MD5).  An
 * Error document in a 200 (S3 sends one when the assembly fails late) is
 * -RDX_EREMOTE with its Code. */
int s3_mpu_complete(struct s3_client *c, const char *bucket, const char *key,
		    const char *upload_id, const char (*etags)[S3_ETAG_MAX],
		    unsigned n, char *etag, bool *md5_etag);

/* AbortMultipartUpload: the parts are dropped. */
int s3_mpu_abort(struct s3_client *c, const char *bucket, const char *key,
		 const char *upload_id);

/* A ranged GetObject's request (start, len, if_match) and what came. */
struct s3_range {
	uint64_t start, len;  /* bytes asked for; len > 0 */
	const char *if_match; /* NULL: any version */
	uint64_t total;	      /* the object's size */
	uint64_t got;	      /* bytes received */
	bool whole;	      /* 200: the server sent the whole object */
	bool encrypted;	      /* SSE-KMS or SSE-C: the ETag is no MD5 */
	char etag[S3_ETAG_MAX];
};

/* GetObject of r->start .. r->start + r->len - 1 (clamped to the object's
 * end) into sink.  A 206 must carry a Content-Range of exactly those bytes
 * and exactly that many bytes; a 200 (Range ignored) is accepted only for
 * start 0, with whole set.  A body or range that disagrees is
 * -RDX_EINTEGRITY; an ETag other than if_match is -RDX_EREMOTE
 * (PreconditionFailed). */
int s3_get_range(struct s3_client *c, const char *bucket, const char *key,
		 const struct s3_sink *sink, struct s3_range *r);

/* GetObject into sink; info (may be NULL) gets size, ETag, dates.  A body
 * shorter or longer than its Content-Length is -RDX_EINTEGRITY. */
int s3_get_object(struct s3_client *c, const char *bucket, const char *key,
		  const struct s3_sink *sink, struct s3_object_info *info);

/* HeadObject. */
int s3_head_object(struct s3_client *c, const char *bucket, const char *key,
		   struct s3_object_info *info);

/* DeleteObject (S3 answers 204 for a key that is not there, too). */
int s3_delete_object(struct s3_client *c, const char *bucket, const char *key);

/* One page of ListObjectsV2, appended to out; token NULL for the first
 * page, then out->next_token while out->truncated. */
int s3_list_objects(struct s3_client *c, const char *bucket, const char *prefix,
		    const char *delimiter, const char *token, struct s3_list *out);

/* ListBuckets, appended to out. */
int s3_list_buckets(struct s3_client *c, struct s3_list *out);

/* CreateBucket (with a LocationConstraint outside us-east-1) and
 * DeleteBucket. */
int s3_create_bucket(struct s3_client *c, const char *bucket);
int s3_delete_bucket(struct s3_client *c, const char *bucket);

/* A presigned GetObject URL of bucket/key, valid expires seconds
 * (1..604800) from now, appended to out.  Returns 0, -EINVAL (no
 * credentials, or expires out of range), or the buffer's error. */
int s3_presign(struct s3_client *c, const char *bucket, const char *key,
	       unsigned expires, struct s3_buf *out);

/* CopyObject (server side, up to 5 GiB): src_bucket/src_key to
 * bucket/key; info (may be NULL) gets the new ETag.  A 200 whose body is
 * an Error (S3 sends one when the copy fails late) is -RDX_EREMOTE with
 * its Code; a body that is neither is -RDX_EPROTO. */
int s3_copy_object(struct s3_client *c, const char *src_bucket,
		   const char *src_key, const char *bucket, const char *key,
		   struct s3_object_info *info);

/* UploadPartCopy: bytes first..last of src_bucket/src_key (as they are
 * while its ETag is src_etag, when not NULL: else 412
 * PreconditionFailed) become part number part of the multipart upload
 * upload_id of bucket/key; the part's ETag into etag (S3_ETAG_MAX).  A
 * 200 with an Error body is -RDX_EREMOTE with its Code, as CopyObject. */
int s3_mpu_part_copy(struct s3_client *c, const char *bucket, const char *key,
		     const char *upload_id, unsigned part, const char *src_bucket,
		     const char *src_key, const char *src_etag, uint64_t first,
		     uint64_t last, char *etag);

/* HeadObject, and what a copy carries over to a new object (Content-Type,
 * Cache-Control, Content-Disposition, Content-Encoding, Content-Language,
 * Expires, x-amz-meta-*) into carry as "Name: value\n" lines, NUL-ended.
 * More than cap (or than S3_HTTP_CARRY_MAX) is -RDX_EPROTO. */
int s3_head_carry(struct s3_client *c, const char *bucket, const char *key,
		  struct s3_object_info *info, char *carry, size_t cap);


/* The MD5 of the file fd's first size bytes into md5[16]; read through
 * dfd instead (the same file opened with O_DIRECT) unless it is -1, so
 * that none of it enters the page cache.  Returns 0, -ENODATA when it is
 * shorter, -RDX_EINTR when stopped, or -errno. */
int s3_fd_md5(int fd, int dfd, uint64_t size, const atomic_int *stop,
	      unsigned char *md5);

/* As s3_fd_md5, one MD5 for each part of part bytes (the last may be
 * shorter: ceil(size / part) of them, one for nothing) into md5. */
int s3_fd_md5_parts(int fd, int dfd, uint64_t size, uint64_t part,
		    const atomic_int *stop, unsigned char (*md5)[16]);

/* Checks what a download received (info: size, ETag, encryption) against
 * its ETag: a plain MD5 must equal md5 (the data's; NULL: not computed),
 * "MD5-1" the MD5 of md5;
 * a multipart "MD5-N" must be N parts that can make the size; another
 * ETag, or that of an encrypted object, is not checked.  Returns 0 or
 * -RDX_EINTEGRITY with the error filled. */
int s3_check_download(struct s3_client *c, const struct s3_object_info *info,
		      const unsigned char *md5);

/* Whether etag can be checked from the MD5 of the data alone: a plain
 * MD5, or a multipart one of one part ("MD5-1", the MD5 of that MD5). */
bool s3_etag_of_data(const char *etag);

/* Whether etag is a multipart one, "MD5-N" (quotes or not): N into parts. */
bool s3_etag_parts(const char *etag, unsigned *parts);

/* Whether the n parts whose MD5s are md5 make etag ("MD5-N": the MD5 of
 * the MD5s); made gets the ETag they make, quoted. */
int s3_parts_etag_match(const char *etag, const unsigned char (*md5)[16], unsigned n,
			char *made, size_t len);

/* HeadObject ?partNumber=part: that part's size into len and the
 * object's part count into count (0 when the answer gives none, as for
 * an object that was not a multipart upload, which is then "part 1").
 * Returns 0 or an error as s3_head_object. */
int s3_head_part(struct s3_client *c, const char *bucket, const char *key,
		 unsigned part, uint64_t *len, unsigned *count);

#define S3_DELETE_MAX 1000 /* keys per DeleteObjects request */

/* Whether key can go into DeleteObjects' XML: not empty, and no control
 * character XML 1.0 cannot carry (tab, LF and CR can). */
bool s3_delete_key_ok(const char *key);

/* Appends DeleteObjects' quiet request body for keys[0..n): 1..1000 keys,
 * each s3_delete_key_ok.  Returns 0, -EINVAL, or the buffer's error. */
int s3_delete_xml(struct s3_buf *b, const char *const *keys, size_t n);

/* DeleteObjects (POST ?delete, with Content-MD5) of keys[0..n) in bucket;
 * keys S3 could not delete are appended to errors (name: key, etag: Code,
 * mtime: Message).  Returns 0 when the request succeeded, whatever errors
 * holds; -EINVAL for keys s3_delete_xml refuses; or as the other
 * operations. */
int s3_delete_objects(struct s3_client *c, const char *bucket,
		      const char *const *keys, size_t n, struct s3_list *errors);

#endif
