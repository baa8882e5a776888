/* DeleteObjects (multi-object delete): the quiet request body, sent
 * with the Content-MD5 S3 requires, and the DeleteResult's per-key errors. */
#include "core/err.h"
#include "s3/s3_int.h"

#include <errno.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <string.h>

/* XML 1.0 cannot carry most control characters, even as references. */
bool s3_delete_key_ok(const char *key)
{
	const unsigned char *p = (const unsigned char *)key;

	if (!*p)
		return false;
	for (; *p; p++)
		if (*p < 0x20 && *p != '\t' && *p != '\n' && *p != '\r')
			return false;
	return true;
}

int s3_delete_xml(struct s3_buf *b, const char *const *keys, size_t n)
{
	size_t i;
	const char *k;

	if (!n || n > S3_DELETE_MAX)
		return -EINVAL;
	s3_buf_adds(b, "<Delete xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"><Quiet>true</Quiet>");
	for (i = 0; i < n; i++) {
		if (!s3_delete_key_ok(keys[i]))
			return -EINVAL;
		s3_buf_adds(b, "<Object><Key>");
		for (k = keys[i]; *k; k++) {
			switch (*k) {
			case '&':
				s3_buf_adds(b, "&amp;");
				break;
			case '<':
				s3_buf_adds(b, "&lt;");
				break;
			case '>':
				s3_buf_adds(b, "&gt;");
				break;
			case '\r': /* a parser would fold a raw CR into LF */
				s3_buf_adds(b, "&#13;");
				break;
			case '\n':
				s3_buf_adds(b, "&#10;");
				break;
			case '\t':
				s3_buf_adds(b, "&#9;");
				break;
			default:
				s3_buf_addc(b, *k);
			}
		}
		s3_buf_adds(b, "</Key></Object>");
	}
	s3_buf_adds(b, "</Delete>");
	return s3_buf_err(b);
}

int s3_delete_objects(struct s3_client *c, const char *bucket,
		      const char *const *keys, size_t n, struct s3_list *errors)
{
	struct s3_kv q[] = { { "delete", "" } };
	struct s3_kv h[1];
	char hash[S3_SHA256_HEX_LEN + 1], md5b64[32];
	unsigned char md5[16];
	unsigned mdlen = 0;
	struct s3_buf body;
	struct s3_req r = {
		.method = "POST", .op = "rm", .bucket = bucket, .query = q,
		.nquery = 1, .headers = h, .nheaders = 1, .body_fd = -1,
		.payload_hash = hash,
	};
	size_t deleted = 0;
	int ret;

	s3_buf_init(&body, 0);
	ret = s3_delete_xml(&body, keys, n);
	if (ret)
		goto out;
	s3_sha256_hex(body.p, body.len, hash);
	/* S3 requires Content-MD5 (or a checksum header) on DeleteObjects. */
	if (!EVP_Digest(body.p, body.len, md5, &mdlen, EVP_md5(), NULL) || mdlen != 16) {
		ret = -ENOMEM;
		goto out;
	}
	EVP_EncodeBlock((unsigned char *)md5b64, md5, 16);
	h[0] = (struct s3_kv){ "Content-MD5", md5b64 };
	r.body = body.p;
	r.body_len = body.len;
	ret = s3_do_request(c, &r);
	if (ret)
		goto out;
	ret = s3_xml_delete_result(c->resp.body.p, c->resp.body.len, errors, &deleted);
	if (ret == -RDX_EPROTO && c->resp.body.len &&
	    !s3_xml_error(c->resp.body.p, c->resp.body.len, c->err.code,
			  sizeof(c->err.code), c->err.message, sizeof(c->err.message))) {
		c->err.status = c->resp.status;
		ret = -RDX_EREMOTE; /* an Error document in a 200 */
	} else if (ret == -RDX_EPROTO || ret == -E2BIG) {
		ret = s3_bad_response(c, -RDX_EPROTO, "MalformedResponse",
				   "DeleteObjects' answer is no DeleteResult");
	}
out:
	s3_buf_release(&body);
	return ret;
}
