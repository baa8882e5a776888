/* What rds3 checks of the bytes themselves: the digests an upload sends
 * (Content-MD5, which S3 verifies, and the signed SHA-256), the ETag a
 * single PutObject answers (the body's MD5), and on a download the MD5 of
 * what came against a plain-MD5 ETag, or, for a multipart ETag ("MD5-N",
 * whose MD5 covers the parts' MD5s, which a GET does not give), that N
 * parts can make the size at all. */
#include "s3/s3.h"

#include "core/hex.h"
#include "core/err.h"
#include "core/io.h"
#include "core/log.h"
#include "s3/multipart.h"
#include "s3/multipart_int.h"
#include "s3/s3_int.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

void s3_body_sum(const void *p, size_t n, struct s3_body_sum *out)
{
	unsigned int dl;

	s3_sha256_hex(p, n, out->sha256_hex);
	EVP_Digest(p, n, out->md5, &dl, EVP_md5(), NULL);
}

void s3_body_sum_md5(const void *p, size_t n, struct s3_body_sum *out)
{
	unsigned int dl;

	out->sha256_hex[0] = '\0';
	EVP_Digest(p, n, out->md5, &dl, EVP_md5(), NULL);
}

int s3_body_sha256(const void *p, int fd, uint64_t off, uint64_t len,
		   const atomic_int *stop, char *hex)
{
	EVP_MD_CTX *md;
	unsigned char d[32];
	unsigned int dl;
	size_t cap = 1 << 20;
	char *buf;
	uint64_t done = 0;
	int ret = 0;

	if (p) {
		s3_sha256_hex(p, (size_t)len, hex);
		return 0;
	}
	md = EVP_MD_CTX_new();
	buf = malloc(cap);
	if (!md || !buf || !EVP_DigestInit_ex(md, EVP_sha256(), NULL)) {
		ret = -ENOMEM;
		goto out;
	}
	while (done < len) {
		size_t k = len - done < cap ? (size_t)(len - done) : cap;
		ssize_t n = rdx_pread_full(fd, buf, k, (off_t)(off + done));

		if (stop && atomic_load(stop)) {
			ret = -RDX_EINTR;
			goto out;
		}
		if (n != (ssize_t)k) {
			ret = n < 0 ? (int)n : -ENODATA;
			goto out;
		}
		EVP_DigestUpdate(md, buf, k);
		done += k;
	}
	EVP_DigestFinal_ex(md, d, &dl);
	rdx_hex_encode(d, 32, hex);
out:
	EVP_MD_CTX_free(md);
	free(buf);
	return ret;
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
	rdx_hex_encode(sum->md5, 16, want);
	if (s3_etag_md5(c->resp.etag, got) && !strcasecmp(got, want))
		return 0;
	return s3_bad_response(c, -RDX_EINTEGRITY, "",
			       "the object's ETag is %s, the data's MD5 is \"%s\"",
			       c->resp.etag[0] ? c->resp.etag : "missing", want);
}

/* The reads behind s3_fd_md5: the file in order, into two buffers in
 * turn, by a thread of its own, so that the disk reads one while the
 * caller hashes the other. */
struct ahead {
	int fd;
	bool direct;
	uint64_t size;
	size_t cap;
	char *buf[2];
	ssize_t len[2]; /* bytes read into buf[i], 0 at the end, or -errno */
	sem_t filled[2], empty[2];
	atomic_bool quit;
};

#define AHEAD_BYTES ((size_t)4 << 20)

static void *ahead_main(void *arg)
{
	struct ahead *a = arg;
	uint64_t off = 0;

	for (unsigned i = 0;; i ^= 1) {
		size_t want;
		ssize_t n;

		while (sem_wait(&a->empty[i]) && errno == EINTR)
			;
		if (atomic_load(&a->quit))
			break;
		want = off >= a->size ? 0
		       : a->size - off < a->cap ? (size_t)(a->size - off)
						: a->cap;
		if (a->direct) /* whole blocks: the last comes back short */
			want = (want + RDX_DIO_ALIGN - 1) & ~(size_t)(RDX_DIO_ALIGN - 1);
		n = want ? rdx_pread_full(a->fd, a->buf[i], want, (off_t)off) : 0;
		a->len[i] = n;
		sem_post(&a->filled[i]);
		if (n <= 0)
			break;
		off += (uint64_t)n;
	}
	return NULL;
}

void s3_parts_md5_start(struct s3_parts_md5 *p)
{
	EVP_DigestInit_ex(p->md, EVP_md5(), NULL);
	p->i = 0;
	p->left = p->part;
}

void s3_parts_md5_adopt(struct s3_parts_md5 *p, EVP_MD_CTX *state, uint64_t len)
{
	unsigned int dl;

	EVP_MD_CTX_free(p->md);
	p->md = state;
	p->i = 0;
	p->left = p->part - len;
	if (!p->left && p->n > 1) {
		EVP_DigestFinal_ex(p->md, p->out[p->i++], &dl);
		EVP_DigestInit_ex(p->md, EVP_md5(), NULL);
		p->left = p->part;
	}
}

void s3_parts_md5_feed(struct s3_parts_md5 *p, const void *buf, size_t len)
{
	const char *b = buf;
	unsigned int dl;

	while (len) {
		/* More than n parts hold: the rest goes into the last one
		 * (and the ETag made will not match). */
		size_t k = len < p->left || !p->left ? len : (size_t)p->left;

		EVP_DigestUpdate(p->md, b, k);
		b += k;
		len -= k;
		p->left -= p->left ? k : 0;
		if (!p->left && p->i + 1 < p->n) {
			EVP_DigestFinal_ex(p->md, p->out[p->i++], &dl);
			EVP_DigestInit_ex(p->md, EVP_md5(), NULL);
			p->left = p->part;
		}
	}
}

/* s3_fd_md5_parts through O_DIRECT (dfd): nothing of it enters the page
 * cache. */
static int md5_direct(struct s3_parts_md5 *pm, int dfd, uint64_t size, const atomic_int *stop)
{
	struct ahead a = {.fd = dfd, .direct = true, .size = size, .cap = AHEAD_BYTES};
	uint64_t done = 0;
	pthread_t t;
	int ret = -ENOMEM, i;

	for (i = 0; i < 2; i++) {
		sem_init(&a.filled[i], 0, 0);
		sem_init(&a.empty[i], 0, 1);
	}
	if (!(a.buf[0] = aligned_alloc(RDX_DIO_ALIGN, a.cap)) ||
	    !(a.buf[1] = aligned_alloc(RDX_DIO_ALIGN, a.cap)))
		goto out;
	if (pthread_create(&t, NULL, ahead_main, &a)) {
		ret = -EAGAIN;
		goto out;
	}
	for (i = 0; done < size; i ^= 1) {
		ssize_t n;

		while (sem_wait(&a.filled[i]) && errno == EINTR)
			;
		n = a.len[i];
		if (n <= 0) {
			ret = n ? (int)n : -ENODATA;
			break;
		}
		if (stop && atomic_load(stop)) {
			ret = -RDX_EINTR;
			break;
		}
		if ((uint64_t)n > size - done)
			n = (ssize_t)(size - done);
		s3_parts_md5_feed(pm, a.buf[i], (size_t)n);
		done += (uint64_t)n;
		sem_post(&a.empty[i]);
	}
	if (done == size)
		ret = 0;
	atomic_store(&a.quit, true);
	sem_post(&a.empty[0]);
	sem_post(&a.empty[1]);
	pthread_join(t, NULL);
out:
	for (i = 0; i < 2; i++) {
		sem_destroy(&a.filled[i]);
		sem_destroy(&a.empty[i]);
		free(a.buf[i]);
	}
	return ret;
}

int s3_fd_md5_parts(int fd, int dfd, uint64_t size, uint64_t part,
		    const atomic_int *stop, unsigned char (*md5)[16])
{
	struct s3_parts_md5 pm = {.md = EVP_MD_CTX_new(), .part = part, .out = md5,
			       .n = size ? (unsigned)((size + part - 1) / part) : 1};
	size_t cap = 1 << 20;
	char *buf = NULL;
	uint64_t off = 0;
	int ret = 0;

	if (!pm.md) {
		ret = -ENOMEM;
		goto out;
	}
	s3_parts_md5_start(&pm);
	if (dfd >= 0) {
		ret = md5_direct(&pm, dfd, size, stop);
		if (ret != -EINVAL) /* EINVAL: O_DIRECT refused after all */
			goto done;
		s3_parts_md5_start(&pm);
		ret = 0;
	}
	if (!(buf = malloc(cap))) {
		ret = -ENOMEM;
		goto out;
	}
	while (off < size) {
		size_t want = size - off < cap ? (size_t)(size - off) : cap;
		ssize_t n = rdx_pread_full(fd, buf, want, (off_t)off);

		if (n < 0) {
			ret = (int)n;
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
		s3_parts_md5_feed(&pm, buf, (size_t)n);
		off += (uint64_t)n;
	}
done:
	if (!ret)
		s3_parts_md5_end(&pm);
out:
	EVP_MD_CTX_free(pm.md);
	free(buf);
	return ret;
}

unsigned s3_parts_md5_end(struct s3_parts_md5 *p)
{
	unsigned int dl;

	EVP_DigestFinal_ex(p->md, p->out[p->i], &dl);
	return p->i + 1;
}

int s3_fd_md5(int fd, int dfd, uint64_t size, const atomic_int *stop,
	      unsigned char *md5)
{
	return s3_fd_md5_parts(fd, dfd, size, size ? size : 1, stop,
			       (unsigned char (*)[16])md5);
}

bool s3_etag_parts(const char *etag, unsigned *parts)
{
	const char *dash = strrchr(etag, '-');
	char *end;
	unsigned long n;

	if (!dash || dash - etag < 1 || dash[1] < '0' || dash[1] > '9')
		return false;
	errno = 0;
	n = strtoul(dash + 1, &end, 10);
	if (*end == '"')
		end++;
	if (*end || errno || n > UINT_MAX)
		return false;
	*parts = (unsigned)n;
	return true;
}

/* "MD5-N": N parts of 5 MiB..5 GiB (the last 0..5 GiB) hold at least
 * (N - 1) x 5 MiB and at most N x 5 GiB. */
static int check_parts(struct s3_client *c, const char *etag, uint64_t size)
{
	unsigned n;

	if (!s3_etag_parts(etag, &n)) {
		rdx_info(1, "ETag %s is neither an MD5 nor MD5-N: not checked",
			 etag[0] ? etag : "(none)");
		return 0;
	}
	if (n >= 1 && n <= S3_PARTS_MAX && size >= (uint64_t)(n - 1) * S3_PART_MIN &&
	    size <= (uint64_t)n * S3_PART_MAX) {
		rdx_info(2, "multipart ETag %s: %u parts can make %" PRIu64
			 " bytes (the parts' MD5s are not known to a GET)",
			 etag, n, size);
		return 0;
	}
	return s3_bad_response(c, -RDX_EINTEGRITY, "",
			       "the object's ETag %s says %u parts, which cannot make %" PRIu64
			       " bytes", etag, n, size);
}

int s3_parts_etag_match(const char *etag, const unsigned char (*md5)[16], unsigned n,
			char *made, size_t len)
{
	unsigned char d[16];
	unsigned int dl;
	char hex[33], want[33];

	EVP_Digest(md5, (size_t)n * 16, d, &dl, EVP_md5(), NULL);
	rdx_hex_encode(d, 16, hex);
	snprintf(made, len, "\"%s-%u\"", hex, n);
	/* The ETag's MD5 part: its first 32 hex digits after any quote. */
	snprintf(want, sizeof(want), "%.32s", etag + (etag[0] == '"'));
	return !strcasecmp(hex, want);
}

bool s3_etag_of_data(const char *etag)
{
	unsigned n;

	return s3_etag_md5(etag, NULL) || (s3_etag_parts(etag, &n) && n == 1);
}

int s3_check_download(struct s3_client *c, const struct s3_object_info *info,
		      const unsigned char *md5)
{
	char want[33], got[33], made[48];
	unsigned n;

	if (info->encrypted) {
		rdx_info(1, "ETag %s of an object encrypted with KMS or a customer key: not checked",
			 info->etag);
		return 0;
	}
	if (md5 && s3_etag_parts(info->etag, &n) && n == 1) {
		/* One part: the MD5 of the data's MD5. */
		if (s3_parts_etag_match(info->etag, (const unsigned char (*)[16])md5, 1,
					made, sizeof(made)))
			return 0;
		return s3_bad_response(c, -RDX_EINTEGRITY, "",
				       "the data makes the ETag %s, the object's is %s",
				       made, info->etag);
	}
	if (!s3_etag_md5(info->etag, want))
		return check_parts(c, info->etag, info->size);
	if (!md5)
		return 0;
	rdx_hex_encode(md5, 16, got);
	if (!strcasecmp(got, want))
		return 0;
	return s3_bad_response(c, -RDX_EINTEGRITY, "",
			       "the data's MD5 is \"%s\", the object's ETag %s", got,
			       info->etag);
}
