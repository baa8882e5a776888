/* What rds3 checks of the bytes themselves: the digests an upload sends
 * (Content-MD5, which S3 verifies, and the signed SHA-256), the ETag a
 * single PutObject answers (the body's MD5), and on a download the MD5 of
 * what came against a plain-MD5 ETag, or, for a multipart ETag ("MD5-N",
 * whose MD5 covers the parts' MD5s, which a GET does not give), that N
 * parts can make the size at all. */
#include "s3.h"

#include "../core/err.h"
#include "../core/log.h"
#include "multipart.h"
#include "s3_int.h"

#include <errno.h>
#include <inttypes.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

static void hex16(const unsigned char *d, char out[33])
{
	static const char hx[] = "0123456789abcdef";
	int i;

	for (i = 0; i < 16; i++) {
		out[2 * i] = hx[d[i] >> 4];
		out[2 * i + 1] = hx[d[i] & 15];
	}
	out[32] = '\0';
}

void s3_body_sum(const void *p, size_t n, struct s3_body_sum *out)
{
	unsigned int dl;

	s3_sha256_hex(p, n, out->sha256_hex);
	EVP_Digest(p, n, out->md5, &dl, EVP_md5(), NULL);
}

bool s3_etag_md5(const char *etag, char *hex)
{
	size_t n = strlen(etag);

	if (n == 34 && etag[0] == '"' && etag[33] == '"') {
		etag++;
		n -= 2;
	}
	if (n != 32 || strspn(etag, "0123456789abcdefABCDEF") < 32)
		return false;
	if (hex) {
		memcpy(hex, etag, 32);
		hex[32] = '\0';
	}
	return true;
}

void s3_md5_b64(const unsigned char *md5, char out[32])
{
	EVP_EncodeBlock((unsigned char *)out, md5, 16);
}

int s3_check_put_etag(struct s3_client *c, const struct s3_body_sum *sum)
{
	char want[33], got[33];

	if (!strncmp(c->resp.sse, "aws:kms", 7) || c->resp.sse_c) {
		rdx_info(1, "ETag %s of an object encrypted with KMS or a customer key: not checked",
			 c->resp.etag);
		return 0;
	}
	hex16(sum->md5, want);
	if (s3_etag_md5(c->resp.etag, got) && !strcasecmp(got, want))
		return 0;
	return s3_bad_response(c, -RDX_EINTEGRITY, "",
			       "the object's ETag is %s, the data's MD5 is \"%s\"",
			       c->resp.etag[0] ? c->resp.etag : "missing", want);
}

int s3_fd_md5(int fd, uint64_t size, const atomic_int *stop, unsigned char *md5)
{
	EVP_MD_CTX *md = EVP_MD_CTX_new();
	size_t cap = 1 << 20;
	char *buf = malloc(cap);
	uint64_t off = 0;
	unsigned int dl;
	int ret = 0;

	if (!md || !buf || !EVP_DigestInit_ex(md, EVP_md5(), NULL)) {
		ret = -ENOMEM;
		goto out;
	}
	while (off < size) {
		size_t want = size - off < cap ? (size_t)(size - off) : cap;
		ssize_t n = pread(fd, buf, want, (off_t)off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			ret = -errno;
			goto out;
		}
		if (!n) {
			ret = -ENODATA;
			goto out;
		}
		if (stop && atomic_load(stop)) {
			ret = -RDX_EINTR;
			goto out;
		}
		EVP_DigestUpdate(md, buf, (size_t)n);
		off += (uint64_t)n;
	}
	EVP_DigestFinal_ex(md, md5, &dl);
out:
	EVP_MD_CTX_free(md);
	free(buf);
	return ret;
}

/* "MD5-N": N parts of 5 MiB..5 GiB (the last 0..5 GiB) hold at least
 * (N - 1) x 5 MiB and at most N x 5 GiB. */
static int check_parts(struct s3_client *c, const char *etag, uint64_t size)
{
	const char *dash = strrchr(etag, '-');
	char *end;
	unsigned long n;

	if (!dash || dash - etag < 1 || dash[1] < '0' || dash[1] > '9') {
		rdx_info(1, "ETag %s is neither an MD5 nor MD5-N: not checked",
			 etag[0] ? etag : "(none)");
		return 0;
	}
	errno = 0;
	n = strtoul(dash + 1, &end, 10);
	if (*end == '"')
		end++;
	if (*end || errno) {
		rdx_info(1, "ETag %s is neither an MD5 nor MD5-N: not checked", etag);
		return 0;
	}
	if (n >= 1 && n <= S3_PARTS_MAX && size >= (uint64_t)(n - 1) * S3_PART_MIN &&
	    size <= (uint64_t)n * S3_PART_MAX) {
		rdx_info(2, "multipart ETag %s: %lu parts can make %" PRIu64
			 " bytes (the parts' MD5s are not known to a GET)",
			 etag, n, size);
		return 0;
	}
	return s3_bad_response(c, -RDX_EINTEGRITY, "",
			       "the object's ETag %s says %lu parts, which cannot make %" PRIu64
			       " bytes", etag, n, size);
}

int s3_check_download(struct s3_client *c, const struct s3_object_info *info,
		      const unsigned char *md5)
{
	char want[33], got[33];

	if (info->encrypted) {
		rdx_info(1, "ETag %s of an object encrypted with KMS or a customer key: not checked",
			 info->etag);
		return 0;
	}
	if (!s3_etag_md5(info->etag, want))
		return check_parts(c, info->etag, info->size);
	if (!md5)
		return 0;
	hex16(md5, got);
	if (!strcasecmp(got, want))
		return 0;
	return s3_bad_response(c, -RDX_EINTEGRITY, "",
			       "the data's MD5 is \"%s\", the object's ETag %s", got,
			       info->etag);
}
