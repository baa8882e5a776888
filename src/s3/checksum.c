/* x-amz-checksum-*: the three CRCs S3 names (reflected, all bits set
 * before and after; no library the project uses has CRC32C or CRC64NVME)
 * and OpenSSL's SHA-1 and SHA-256.  The CRCs take eight bytes a step
 * ("slicing by 8": table k holds a byte's effect followed by k zero
 * bytes), which works for either width as long as a 32-bit CRC's upper
 * half stays zero. */
#include "s3/checksum.h"

#include <endian.h>
#include <errno.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <string.h>
#include <strings.h>

static const struct {
	const char *name;  /* the header */
	const char *shown;
	uint64_t poly;	   /* reflected; 0 for a hash */
	unsigned bytes;
} algs[] = {
	[S3_CK_CRC32] = { "x-amz-checksum-crc32", "CRC32", 0xEDB88320u, 4 },
	[S3_CK_CRC32C] = { "x-amz-checksum-crc32c", "CRC32C", 0x82F63B78u, 4 },
	[S3_CK_CRC64NVME] = { "x-amz-checksum-crc64nvme", "CRC64NVME", 0x9A6C9329AC4BC9B5u, 8 },
	[S3_CK_SHA1] = { "x-amz-checksum-sha1", "SHA1", 0, 20 },
	[S3_CK_SHA256] = { "x-amz-checksum-sha256", "SHA256", 0, 32 },
};

static uint64_t tables[S3_CK_CRC64NVME + 1][8][256];
static pthread_once_t tables_once = PTHREAD_ONCE_INIT;

static void tables_make(void)
{
	for (int a = S3_CK_CRC32; a <= S3_CK_CRC64NVME; a++)
		for (unsigned i = 0; i < 256; i++) {
			uint64_t c = i;

			for (int b = 0; b < 8; b++)
				c = c & 1 ? (c >> 1) ^ algs[a].poly : c >> 1;
			tables[a][0][i] = c;
		}
	for (int a = S3_CK_CRC32; a <= S3_CK_CRC64NVME; a++)
		for (int k = 1; k < 8; k++)
			for (unsigned i = 0; i < 256; i++) {
				uint64_t c = tables[a][k - 1][i];

				tables[a][k][i] = (c >> 8) ^ tables[a][0][c & 0xff];
			}
}

/* All of a CRC's bits: where it starts, and what it ends xored with. */
static uint64_t crc_mask(enum s3_ck alg)
{
	return alg == S3_CK_CRC64NVME ? ~(uint64_t)0 : 0xFFFFFFFFu;
}

enum s3_ck s3_cksum_named(const char *header)
{
	for (int a = S3_CK_CRC32; a <= S3_CK_SHA256; a++)
		if (!strcasecmp(header, algs[a].name))
			return (enum s3_ck)a;
	return S3_CK_NONE;
}

const char *s3_cksum_name(enum s3_ck alg)
{
	return alg > S3_CK_NONE && alg <= S3_CK_SHA256 ? algs[alg].shown : "?";
}

const char *s3_cksum_header(enum s3_ck alg)
{
	return alg > S3_CK_NONE && alg <= S3_CK_SHA256 ? algs[alg].name : "?";
}

enum s3_ck s3_cksum_alg(const char *name)
{
	for (int a = S3_CK_CRC32; a <= S3_CK_SHA256; a++)
		if (!strcasecmp(name, algs[a].shown))
			return (enum s3_ck)a;
	return S3_CK_NONE;
}

size_t s3_cksum_len(enum s3_ck alg)
{
	return alg > S3_CK_NONE && alg <= S3_CK_SHA256 ? algs[alg].bytes : 0;
}

bool s3_cksum_is_crc(enum s3_ck alg)
{
	return alg >= S3_CK_CRC32 && alg <= S3_CK_CRC64NVME;
}

int s3_cksum_init(struct s3_cksum *c, enum s3_ck alg)
{
	*c = (struct s3_cksum){ .alg = alg, .crc = crc_mask(alg) };
	if (alg == S3_CK_SHA1 || alg == S3_CK_SHA256) {
		c->md = EVP_MD_CTX_new();
		if (!c->md || !EVP_DigestInit_ex(c->md, alg == S3_CK_SHA1 ? EVP_sha1() : EVP_sha256(),
						 NULL)) {
			s3_cksum_release(c);
			return -ENOMEM;
		}
	} else {
		pthread_once(&tables_once, tables_make);
	}
	return 0;
}

void s3_cksum_update(struct s3_cksum *c, const void *p, size_t n)
{
	const unsigned char *b = p;
	const uint64_t(*t)[256];
	uint64_t crc = c->crc;

	if (c->md) {
		EVP_DigestUpdate(c->md, p, n);
		return;
	}
	if (c->alg < S3_CK_CRC32 || c->alg > S3_CK_CRC64NVME)
		return;
	t = tables[c->alg];
	for (; n >= 8; n -= 8, b += 8) {
		uint64_t w;

		memcpy(&w, b, 8);
		crc ^= le64toh(w);
		crc = t[7][crc & 0xff] ^ t[6][(crc >> 8) & 0xff] ^ t[5][(crc >> 16) & 0xff] ^
		      t[4][(crc >> 24) & 0xff] ^ t[3][(crc >> 32) & 0xff] ^
		      t[2][(crc >> 40) & 0xff] ^ t[1][(crc >> 48) & 0xff] ^ t[0][crc >> 56];
	}
	while (n--)
		crc = t[0][(crc ^ *b++) & 0xff] ^ (crc >> 8);
	c->crc = crc;
}

size_t s3_cksum_final(struct s3_cksum *c, unsigned char out[S3_CK_MAX])
{
	size_t n = c->alg > S3_CK_NONE && c->alg <= S3_CK_SHA256 ? algs[c->alg].bytes : 0;
	uint64_t v = c->crc ^ crc_mask(c->alg);

	if (c->md) {
		unsigned len = 0;

		EVP_DigestFinal_ex(c->md, out, &len);
		n = len;
	} else {
		for (size_t i = 0; i < n; i++)
			out[i] = (unsigned char)(v >> (8 * (n - 1 - i)));
	}
	s3_cksum_release(c);
	return n;
}

void s3_cksum_release(struct s3_cksum *c)
{
	EVP_MD_CTX_free(c->md);
	c->md = NULL;
}

size_t s3_cksum_buf(enum s3_ck alg, const void *p, size_t n, unsigned char out[S3_CK_MAX])
{
	struct s3_cksum c;

	if (s3_cksum_init(&c, alg))
		return 0;
	s3_cksum_update(&c, p, n);
	return s3_cksum_final(&c, out);
}

/* CRC arithmetic on reflected polynomials, as zlib's crc32_combine does
 * it: a * b modulo the polynomial (the top bit is x^0). */
static uint64_t multmodp(enum s3_ck alg, uint64_t a, uint64_t b)
{
	uint64_t top = alg == S3_CK_CRC64NVME ? (uint64_t)1 << 63 : (uint64_t)1 << 31;
	uint64_t m = top, p = 0;

	for (;;) {
		if (a & m) {
			p ^= b;
			if (!(a & (m - 1)))
				break;
		}
		m >>= 1;
		b = b & 1 ? (b >> 1) ^ algs[alg].poly : b >> 1;
		if (!m)
			break;
	}
	return p;
}

/* x^(8 * len) modulo the polynomial: the effect of len zero bytes, by
 * squaring (x^(2^k) for each bit k of 8 * len). */
static uint64_t zeros_op(enum s3_ck alg, uint64_t len)
{
	uint64_t top = alg == S3_CK_CRC64NVME ? (uint64_t)1 << 63 : (uint64_t)1 << 31;
	uint64_t sq = top >> 1; /* x^1 */
	uint64_t p = top;	/* x^0 */
	int k;

	/* 8 * len = len << 3: x^8 first, from x^1 squared three times. */
	for (k = 0; k < 3; k++)
		sq = multmodp(alg, sq, sq);
	for (; len; len >>= 1) {
		if (len & 1)
			p = multmodp(alg, sq, p);
		sq = multmodp(alg, sq, sq);
	}
	return p;
}

uint64_t s3_crc_combine(enum s3_ck alg, uint64_t crc1, uint64_t crc2, uint64_t len2)
{
	if (!s3_cksum_is_crc(alg))
		return 0;
	return multmodp(alg, zeros_op(alg, len2), crc1) ^ crc2;
}

void s3_cksum_b64(const unsigned char *d, size_t n, char out[48])
{
	if (n > S3_CK_MAX)
		n = S3_CK_MAX;
	EVP_EncodeBlock((unsigned char *)out, d, (int)n);
}

int s3_cksum_unb64(const char *b64, enum s3_ck alg, unsigned char out[S3_CK_MAX])
{
	unsigned char buf[S3_CK_MAX + 3];
	size_t n = s3_cksum_len(alg), len = strlen(b64);
	char back[48];

	if (!n || len != (n + 2) / 3 * 4 ||
	    EVP_DecodeBlock(buf, (const unsigned char *)b64, (int)len) != (int)((n + 2) / 3 * 3))
		return -EINVAL;
	/* The padding stands for no bytes: a value with other bits there
	 * is not this digest's base64. */
	s3_cksum_b64(buf, n, back);
	if (strcmp(back, b64))
		return -EINVAL;
	memcpy(out, buf, n);
	return 0;
}
