/* One HTTP exchange at a time over a libcurl easy handle that is kept for
 * the life of the worker, so its connection is reused (keep-alive).  TLS
 * verifies against the system CAs unless insecure; proxies come from the
 * environment as libcurl reads them (http_proxy, https_proxy, no_proxy).
 *
 * A response body goes to the request's sink only when the status is 2xx;
 * any other status's body is kept (up to S3_HTTP_ERR_MAX bytes) for the
 * error document. */
#ifndef RDS3_HTTP_H
#define RDS3_HTTP_H

#include "s3/buf.h"
#include "s3/sigv4.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#define S3_HTTP_ERR_MAX (64u << 10)
#define S3_HTTP_ERRLEN 256 /* libcurl's CURL_ERROR_SIZE */
#define S3_HTTP_CARRY_MAX 8192 /* S3 allows 2 KB of user metadata */

struct s3_http;

struct s3_http_opts {
	bool insecure;		 /* skip TLS verification (--insecure) */
	long connect_timeout_ms; /* 0: libcurl's default */
	long stall_secs;	 /* give up after this long under 1 byte/s */
	int verbose;		 /* 3: libcurl's own trace on stderr */
	const atomic_int *stop;	 /* set by a signal: abort the transfer */
	/* --progress: the body bytes of each 2xx exchange (uploaded, or
	 * downloaded into a sink), added when it ends; NULL: not counted. */
	_Atomic uint64_t *moved;
};

/* Where a 2xx body goes: write returns 0 or -errno (which ends the
 * transfer and is returned by s3_http_do). */
struct s3_http_sink {
	int (*write)(void *ctx, const void *p, size_t n);
	void *ctx;
};

struct s3_http_req {
	const char *method;
	const char *url;
	const struct s3_kv *headers;
	size_t nheaders;
	/* Body: body_len bytes from memory, or from body_fd at body_off (read
	 * with pread, so a retry re-sends from the start); none when both
	 * are unset. */
	const void *body;
	int body_fd; /* -1: none */
	uint64_t body_off;
	uint64_t body_len;
	struct s3_http_sink sink; /* NULL write: the body goes to resp->body */
	/* Silence allowed before giving up, when longer than the handle's
	 * (an RDMA request: no HTTP byte moves while the server works). */
	long stall_secs;
};

struct s3_http_resp {
	long status;
	struct s3_buf body; /* non-2xx bodies, or 2xx ones without a sink */
	uint64_t content_length;
	bool has_length;
	uint64_t bytes; /* body bytes received */
	uint64_t body_max; /* what its headers allow a 2xx body (UINT64_MAX: any) */
	char etag[128];
	char last_modified[64];
	char content_type[128];
	char content_range[96]; /* "bytes A-B/T" of a 206 */
	char sse[32];		/* x-amz-server-side-encryption */
	char meta_mtime[24];	/* x-amz-meta-mtime (rds3 sync's), "" if none */
	char mp_parts[16];	/* x-amz-mp-parts-count (?partNumber=), "" if none */
	char rdma_reply[16];	/* x-amz-rdma-reply, "" if none */
	char rdma_moved[24];	/* x-amz-rdma-bytes-transferred, "" if none */
	bool sse_c;		/* a customer-provided key was used */
	/* What a copy carries over to a new object: Content-Type and the
	 * other representation headers, and x-amz-meta-*, as lines "Name:
	 * value\n" (S3_HTTP_CARRY_MAX at most; over says more came). */
	char carry[S3_HTTP_CARRY_MAX];
	size_t carry_len;
	bool carry_over;
	char request_id[128];
	char error[S3_HTTP_ERRLEN]; /* why no response came */
};

/* Parses a Content-Range value "bytes A-B/T" (nothing else) into a, b and
 * t.  Returns 0, or -RDX_EPROTO when it is malformed or impossible (B < A,
 * B >= T). */
int s3_http_content_range(const char *s, uint64_t *a, uint64_t *b, uint64_t *t);

/* Makes a handle; returns 0 or -ENOMEM. */
int s3_http_new(struct s3_http **out, const struct s3_http_opts *o);
void s3_http_free(struct s3_http *h);

/* Starts an empty response whose bodies may be up to max bytes (0: the
 * S3_BUF_DEFAULT_MAX); s3_http_resp_release() frees it. */
void s3_http_resp_init(struct s3_http_resp *r, size_t max);
void s3_http_resp_release(struct s3_http_resp *r);

/* Performs r.  Returns 0 when a response came (any status: see
 * resp->status), -RDX_ECONNECT / -RDX_ETIMEOUT / -RDX_EINTR when none did
 * (resp->error says why), -E2BIG for a body past the buffer's limit, the
 * sink's error, or -EIO for a body file that could not be read. */
int s3_http_do(struct s3_http *h, const struct s3_http_req *r,
	       struct s3_http_resp *resp);

#endif
