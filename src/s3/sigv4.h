/* AWS Signature Version 4, as S3 and AWS's published test suite define it.
 *
 *   canonical request = METHOD \n URI \n QUERY \n HEADERS \n SIGNED \n HASH
 *   string to sign    = AWS4-HMAC-SHA256 \n DATE \n SCOPE \n hex(sha256(creq))
 *   signing key       = HMAC(HMAC(HMAC(HMAC("AWS4" secret, yyyymmdd),
 *                            region), service), "aws4_request")
 *   signature         = hex(HMAC(signing key, string to sign))
 *
 * Paths and query parameters are given decoded and encoded here, once, so
 * the URL a request is sent to is built from the same bytes that were
 * signed (s3_sigv4_path / s3_sigv4_query) and cannot disagree with them. */
#ifndef RDS3_SIGV4_H
#define RDS3_SIGV4_H

#include "s3/buf.h"

#include <stdbool.h>
#include <stddef.h>

#define S3_SHA256_HEX_LEN 64
#define S3_EMPTY_SHA256 "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
#define S3_UNSIGNED_PAYLOAD "UNSIGNED-PAYLOAD"

struct s3_kv {
	const char *name;
	const char *value; /* a query parameter without '=' has NULL */
};

struct s3_creds {
	const char *access_key;
	const char *secret_key;
	const char *session_token; /* NULL: none */
};

struct s3_sign {
	const char *method;
	const char *path; /* decoded, starts with '/' */
	const struct s3_kv *query; /* decoded */
	size_t nquery;
	const struct s3_kv *headers; /* the headers to sign, as sent */
	size_t nheaders;
	const char *payload_hash; /* hex SHA-256, or S3_UNSIGNED_PAYLOAD */
	const char *region;
	const char *service;
	const char *amz_date; /* "20150830T123600Z" */
	/* Other services remove dot segments and empty segments from the
	 * path; S3 signs the path as it is ("a//b/../c" is a key). */
	bool normalize_path;
};

struct s3_sigv4 {
	struct s3_buf creq;	   /* the canonical request */
	struct s3_buf sts;	   /* the string to sign */
	struct s3_buf authz;	   /* the Authorization header's value */
	struct s3_buf signed_hdrs; /* "host;x-amz-date" */
	char signature[S3_SHA256_HEX_LEN + 1];
};

/* Appends s[0..n) URI-encoded as AWS specifies: A-Z a-z 0-9 - . _ ~ as
 * they are, '/' as it is when keep_slash, every other byte as %XX (upper
 * case hex).  Returns 0 or the buffer's error. */
int s3_uri_encode(struct s3_buf *b, const char *s, size_t n, bool keep_slash);

/* Decodes %XX escapes of s[0..n) into b (a '+' stays a '+').  Returns 0,
 * -EINVAL for a malformed escape, or the buffer's error. */
int s3_uri_decode(struct s3_buf *b, const char *s, size_t n);

/* Appends the canonical URI of a decoded path (encoded, normalized when
 * asked).  Returns 0, -EINVAL for a path not starting with '/', or the
 * buffer's error. */
int s3_sigv4_path(struct s3_buf *b, const char *path, bool normalize);

/* Appends the canonical query string: each name and value encoded, sorted
 * by name then value, joined with '&'.  Valid as the URL's query too.
 * Returns 0, -ENOMEM, or the buffer's error. */
int s3_sigv4_query(struct s3_buf *b, const struct s3_kv *q, size_t n);

/* Hex SHA-256 of p[0..n) into out (65 bytes with the NUL). */
void s3_sha256_hex(const void *p, size_t n, char *out);

/* The signing key of secret for day ("20150830"), region and service
 * (also what chains a streaming upload's chunks).  Returns 0 or -ENOMEM. */
int s3_sigv4_key(const char *secret, const char *day, const char *region,
		 const char *service, unsigned char key[32]);

/* Starts an empty result; s3_sigv4_release() frees it. */
void s3_sigv4_init(struct s3_sigv4 *sig);
void s3_sigv4_release(struct s3_sigv4 *sig);

/* Computes the canonical request, string to sign, signature and the
 * Authorization header of s with c.  Returns 0, -EINVAL for a request that
 * cannot be signed (no header, a header name that is not a token, CR or
 * LF in a value, a malformed date), -ENOMEM, or -E2BIG. */
int s3_sigv4_sign(const struct s3_creds *c, const struct s3_sign *s,
		  struct s3_sigv4 *sig);

/* Presigns s (headers: host only, usually) for expires seconds: appends
 * to url_query the query string to send, the X-Amz-* parameters and
 * X-Amz-Signature included; the payload is UNSIGNED-PAYLOAD.  Returns 0,
 * -EINVAL (as s3_sigv4_sign, or expires outside 1..604800), -ENOMEM. */
int s3_sigv4_presign(const struct s3_creds *c, const struct s3_sign *s,
		     unsigned expires, struct s3_sigv4 *sig,
		     struct s3_buf *url_query);

#endif
