/* What s3.c shares with the other files of the S3 operations
 * (delete.c): the client, one request before addressing and signing, and
 * the request and error helpers. */
#ifndef RDS3_S3_INT_H
#define RDS3_S3_INT_H

#include "s3/http.h"
#include "s3/s3.h"
#include "s3/sigv4.h"

struct s3_client {
	struct s3_client_opts o;
	const struct s3_config *cfg;
	struct s3_http *http;
	struct s3_http_resp resp;
	struct s3_sigv4 sig;
	struct s3_error err;
	struct s3_rdma *rdma; /* opened at the first data request that fits */
	bool rdma_failed;     /* auto: could not be opened; HTTP from now on */
};

/* One S3 request, before addressing and signing. */
struct s3_req {
	const char *method;
	const char *op;	    /* for -v: "PUT", "GET", ... */
	const char *bucket; /* NULL: the service (ListBuckets) */
	const char *key;    /* NULL: the bucket itself */
	const struct s3_kv *query;
	size_t nquery;
	const struct s3_kv *headers; /* extra headers, signed */
	size_t nheaders;
	const void *body; /* or body_fd; NULL and -1: none */
	int body_fd;
	uint64_t body_off, body_len;
	const char *payload_hash; /* NULL: of the empty body */
	const struct s3_sink *sink;
	bool rdma; /* sent with a token: a decline is not retried */
	long stall_secs; /* s3_http_req's: 0 for the client's */
};

/* Addresses, signs and sends r, retrying as s3.h says.  Returns 0 for a
 * 2xx (the body in c->resp unless r->sink), else the error as s3.h says,
 * with c->err filled. */
int s3_do_request(struct s3_client *c, const struct s3_req *r);

/* Fills c->err from c->resp (ret 0 or -RDX_EPROTO) or from ret (no
 * response). */
void s3_fill_error(struct s3_client *c, int ret);

/* An error found in a response accepted at the HTTP level: c->err gets
 * the status, code and message; returns ret. */
int s3_bad_response(struct s3_client *c, int ret, const char *code,
		    const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* Content-MD5's value: the 16-byte md5 in base64 (25 bytes with the
 * NUL). */
void s3_md5_b64(const unsigned char *md5, char out[32]);

/* A single PutObject's answer in c->resp: its ETag must be the body's MD5
 * (sum), unless S3 said the object is encrypted with KMS or a customer
 * key.  Returns 0 or -RDX_EINTEGRITY with c->err filled. */
int s3_check_put_etag(struct s3_client *c, const struct s3_body_sum *sum);

/* ---- data requests over RDMA: rdma_req.c ---- */

/* The client's RDMA connection for an object or part of len bytes: 0 with
 * *out set, or NULL for HTTP (off, empty, too large, or auto and RDMA
 * cannot be had); with --rdma on, the error that keeps it from being
 * set up (c->err says why). */
int s3_rdma_conn(struct s3_client *c, uint64_t len, struct s3_rdma **out);

/* r (a PutObject or UploadPart with its body) sent by RDMA instead.
 * Returns 0 (c->resp is the answer), 1 (declined: send r over HTTP), or
 * an error. */
int s3_rdma_put(struct s3_client *c, struct s3_rdma *rd, const struct s3_req *r);

/* r (a GET, with its sink) sent with a token for up to len bytes.
 * Returns 0 with *moved the bytes now in the buffer, 2 when the answer
 * came over HTTP instead (into the sink, as without a token), 1
 * (declined: send r over HTTP), or an error. */
int s3_rdma_get(struct s3_client *c, struct s3_rdma *rd, const struct s3_req *r,
		uint64_t len, uint64_t *moved);

/* Counts n object bytes moved by RDMA or by HTTP (-v's summary). */
void s3_rdma_count(struct s3_client *c, bool rdma, uint64_t n);

#endif
