/* The x-amz-checksum-* arithmetic rds3 serve keeps objects' checksums
 * with (src/s3/checksum.c): CRCs of a whole made of its parts' CRCs
 * (FULL_OBJECT), a COMPOSITE checksum (the digest of the parts' digests)
 * and the base64 forms, against direct computation and the values
 * ceph/s3-tests expects of S3. */
#include "s3/checksum.h"
#include "tap.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t be(const unsigned char *d, size_t n)
{
	uint64_t v = 0;

	for (size_t i = 0; i < n; i++)
		v = v << 8 | d[i];
	return v;
}

static uint64_t crc_of(enum s3_ck alg, const void *p, size_t n)
{
	unsigned char d[S3_CK_MAX];
	size_t len = s3_cksum_buf(alg, p, n, d);

	return be(d, len);
}

/* Every split of a buffer: the combined CRC is the whole one's. */
static void test_combine_splits(void)
{
	static const enum s3_ck crcs[] = { S3_CK_CRC32, S3_CK_CRC32C, S3_CK_CRC64NVME };
	unsigned char buf[300];
	unsigned seed = 7;

	for (size_t i = 0; i < sizeof(buf); i++) {
		seed = seed * 1103515245u + 12345u;
		buf[i] = (unsigned char)(seed >> 16);
	}
	for (size_t a = 0; a < 3; a++) {
		enum s3_ck alg = crcs[a];
		uint64_t whole = crc_of(alg, buf, sizeof(buf));
		bool all = true;

		for (size_t cut = 0; cut <= sizeof(buf); cut++) {
			uint64_t c1 = crc_of(alg, buf, cut), c2 = crc_of(alg, buf + cut, sizeof(buf) - cut);

			if (s3_crc_combine(alg, c1, c2, sizeof(buf) - cut) != whole)
				all = false;
		}
		CHECK(all, "%s: every split of 300 bytes combines to the whole's CRC",
		      s3_cksum_name(alg));
	}
}

/* Three parts of 5 MiB ('A's, 'B's, 'C's): S3's FULL_OBJECT values as
 * s3-tests has them, from the parts' values alone. */
static void test_combine_s3(void)
{
	static const struct {
		enum s3_ck alg;
		const char *part[3], *whole;
	} v[] = {
		{ S3_CK_CRC64NVME, { "L/E4WYn8v98=", "xW1l19VobYM=", "cK5MnNaWrW4=" }, "i+6LR0y3eFo=" },
		{ S3_CK_CRC32, { "JRTCyQ==", "QoZTGg==", "YAgjqw==" }, "WgDhBQ==" },
		{ S3_CK_CRC32C, { "MDaLrw==", "TH4EZg==", "Z7mBIQ==" }, "xU+Krw==" },
	};
	size_t len = 5u << 20;
	unsigned char *big = malloc(len);

	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		unsigned char d[S3_CK_MAX];
		size_t n = s3_cksum_len(v[i].alg);
		uint64_t acc = 0;
		char b64[48];

		for (int p = 0; p < 3; p++) {
			uint64_t c;

			CHECK(!s3_cksum_unb64(v[i].part[p], v[i].alg, d), "%s decodes", v[i].part[p]);
			c = be(d, n);
			if (big && p == 0) {
				memset(big, 'A', len);
				CHECK(crc_of(v[i].alg, big, len) == c, "%s of 5 MiB of A is %s",
				      s3_cksum_name(v[i].alg), v[i].part[p]);
			}
			acc = p ? s3_crc_combine(v[i].alg, acc, c, len) : c;
		}
		for (size_t b = 0; b < n; b++)
			d[b] = (unsigned char)(acc >> (8 * (n - 1 - b)));
		s3_cksum_b64(d, n, b64);
		CHECK(!strcmp(b64, v[i].whole), "%s FULL_OBJECT of three parts: %s (want %s)",
		      s3_cksum_name(v[i].alg), b64, v[i].whole);
	}
	free(big);
}

/* COMPOSITE: the digest of the parts' digests, one part of 1024 'A's. */
static void test_composite(void)
{
	unsigned char a[1024], d[S3_CK_MAX], c[S3_CK_MAX];
	char b64[48];
	size_t n;

	memset(a, 'A', sizeof(a));
	n = s3_cksum_buf(S3_CK_SHA256, a, sizeof(a), d);
	s3_cksum_b64(d, n, b64);
	CHECK(!strcmp(b64, "arcu6553sHVAiX4MjW0j7I7vD4w6R+Gz9Ok0Q9lTa+0="), "SHA256 of 1024 A: %s", b64);
	n = s3_cksum_buf(S3_CK_SHA256, d, n, c);
	s3_cksum_b64(c, n, b64);
	CHECK(!strcmp(b64, "Ok6Cs5b96ux6+MWQkJO7UBT5sKPBeXBLwvj/hK89smg="), "its composite: %s", b64);
	n = s3_cksum_buf(S3_CK_CRC64NVME, a, sizeof(a), d);
	s3_cksum_b64(d, n, b64);
	CHECK(!strcmp(b64, "Qeh8oXvGiSo="), "CRC64NVME of 1024 A: %s", b64);
}

static void test_names_b64(void)
{
	unsigned char d[S3_CK_MAX];

	CHECK(s3_cksum_alg("sha256") == S3_CK_SHA256 && s3_cksum_alg("CRC64NVME") == S3_CK_CRC64NVME,
	      "algorithm names in any case");
	CHECK(s3_cksum_alg("MD5") == S3_CK_NONE && s3_cksum_alg("") == S3_CK_NONE,
	      "other names are none");
	CHECK(s3_cksum_unb64("bad", S3_CK_SHA256, d) == -EINVAL, "a short value is refused");
	CHECK(s3_cksum_unb64("MDaLrw==", S3_CK_CRC64NVME, d) == -EINVAL,
	      "a CRC32C's value is not a CRC64NVME's");
	CHECK(s3_cksum_unb64("MDaLrx==", S3_CK_CRC32C, d) == -EINVAL,
	      "bits in the padding: not canonical, refused");
	CHECK(s3_cksum_len(S3_CK_SHA1) == 20 && s3_cksum_len(S3_CK_NONE) == 0, "lengths");
	CHECK(s3_crc_combine(S3_CK_SHA256, 1, 2, 3) == 0, "no combining a hash");
}

int main(void)
{
	test_combine_splits();
	test_combine_s3();
	test_composite();
	test_names_b64();
	return TAP_DONE();
}
