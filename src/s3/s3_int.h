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

#endif
