/* S3 operations over one HTTP handle: each request is addressed
 * (path-style or virtual-hosted), signed with SigV4 afresh for every
 * attempt, and retried with exponential backoff and full jitter when no
 * response came (connection refused/reset, timeout) or the server says so
 * (5xx, 429, SlowDown, RequestTimeout); never on another 4xx.
 *
 * Operations return 0, or a negative code whose details are in
 * s3_last_error(): -RDX_EAUTH for 403 (access denied, bad signature, bad
 * key id), -RDX_EREMOTE for any other S3 error, -RDX_ECONNECT /
 * -RDX_ETIMEOUT when no response came, -RDX_EPROTO for a response that
 * makes no sense, -RDX_EINTR when stopped, or the sink's -errno. */
#ifndef RDS3_S3_H
#define RDS3_S3_H

#include "config.h"
#include "xml.h"

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
};

struct s3_error {
	long status;	   /* HTTP status; 0 when no response came */
	char code[64];	   /* S3's Code ("NoSuchKey"), "" if none */
	char message[512]; /* S3's Message, or why no response came */
	unsigned attempts; /* tries made */
};

struct s3_object_info {
	uint64_t size;
	char etag[128];
	char last_modified[64];
	char content_type[128];
};

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

/* PutObject: len bytes of fd from off, whose SHA-256 is sha256_hex (hex,
 * signed as x-amz-content-sha256).  info (may be NULL) gets the ETag. */
int s3_put_object(struct s3_client *c, const char *bucket, const char *key,
		  int fd, uint64_t off, uint64_t len, const char *sha256_hex,
		  struct s3_object_info *info);

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

#endif
