/* sync --checksum: whether a file's content is what an object's ETag
 * says, without downloading it.  A plain ETag is the MD5; a multipart
 * one is the MD5 of the parts' MD5s, which depends on the part size, so
 * the likely ones are tried (see sync.h). */
#include "s3/sync.h"

#include "core/err.h"

#include <errno.h>
#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* MD5 of the first size bytes of fd into md, or (part > 0) the multipart
 * ETag's digest: the MD5 of each part's MD5; *nparts gets the count. */
static int md5_file(int fd, uint64_t size, uint64_t part, unsigned char md[16],
		    unsigned *nparts, const atomic_int *stop)
{
	EVP_MD_CTX *whole = EVP_MD_CTX_new(), *one = EVP_MD_CTX_new();
	size_t cap = 1 << 20;
	char *buf = malloc(cap);
	unsigned char d[16];
	unsigned int dl;
	uint64_t off = 0, left;
	int ret = 0;

	*nparts = 0;
	if (!whole || !one || !buf ||
	    !EVP_DigestInit_ex(whole, EVP_md5(), NULL)) {
		ret = -ENOMEM;
		goto out;
	}
	do {
		left = part ? (size - off < part ? size - off : part) : size;
		if (!EVP_DigestInit_ex(one, EVP_md5(), NULL)) {
			ret = -ENOMEM;
			goto out;
		}
		while (left) {
			ssize_t n = pread(fd, buf,
					  left < cap ? (size_t)left : cap,
					  (off_t)off);

			if (n < 0 && errno == EINTR)
				continue;
			if (n < 0) {
				ret = -errno;
				goto out;
			}
			if (!n) { /* shrank since it was listed */
				ret = -ENODATA;
				goto out;
			}
			if (stop && atomic_load(stop)) {
				ret = -RDX_EINTR;
				goto out;
			}
			EVP_DigestUpdate(one, buf, (size_t)n);
			off += (uint64_t)n;
			left -= (uint64_t)n;
		}
		EVP_DigestFinal_ex(one, d, &dl);
		EVP_DigestUpdate(whole, d, 16);
		(*nparts)++;
	} while (part && off < size);
	if (part)
		EVP_DigestFinal_ex(whole, md, &dl);
	else
		memcpy(md, d, 16);
out:
	EVP_MD_CTX_free(whole);
	EVP_MD_CTX_free(one);
	free(buf);
	return ret;
}

static int unhex(const char *s, size_t n, unsigned char *out)
{
	size_t i;

	for (i = 0; i < n; i++) {
		int hi, lo;
		char a = s[2 * i], b = s[2 * i + 1];

		hi = a >= '0' && a <= '9'   ? a - '0'
		     : a >= 'a' && a <= 'f' ? a - 'a' + 10
					    : -1;
		lo = b >= '0' && b <= '9'   ? b - '0'
		     : b >= 'a' && b <= 'f' ? b - 'a' + 10
					    : -1;
		if (hi < 0 || lo < 0)
			return -1;
		out[i] = (unsigned char)(hi << 4 | lo);
	}
	return 0;
}

int s3_sync_etag_match(int fd, uint64_t size, const char *etag,
		       uint64_t part_size, const atomic_int *stop, bool *same)
{
	unsigned char want[16], got[16];
	uint64_t tries[2], p;
	unsigned long n;
	unsigned parts;
	const char *e = etag ? etag : "";
	char *end;
	size_t len, i;
	int ret;

	*same = false;
	if (*e == '"')
		e++;
	len = strlen(e);
	if (len && e[len - 1] == '"')
		len--;
	if (len < 32 || unhex(e, 16, want))
		return 0;
	if (len == 32) {
		ret = md5_file(fd, size, 0, got, &parts, stop);
		*same = !ret && !memcmp(got, want, 16);
		return ret;
	}
	if (e[32] != '-')
		return 0;
	n = strtoul(e + 33, &end, 10);
	if (end != e + len || !n || n > S3_PARTS_MAX || !size)
		return 0;
	if (s3_part_size_for(size, part_size, &tries[0]))
		return 0;
	p = (size + n - 1) / n;
	tries[1] = (p + (1 << 20) - 1) / (1 << 20) * (1 << 20);
	for (i = 0; i < 2; i++) {
		if ((size + tries[i] - 1) / tries[i] != n ||
		    (i && tries[1] == tries[0]))
			continue;
		ret = md5_file(fd, size, tries[i], got, &parts, stop);
		if (ret)
			return ret;
		if (!memcmp(got, want, 16)) {
			*same = true;
			return 0;
		}
	}
	return 0;
}
