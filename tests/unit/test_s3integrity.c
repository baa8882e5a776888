/* rds3's integrity checks that need no server (src/s3/integrity.c): the
 * digests an upload sends, which ETags count as a plain MD5, a download's
 * MD5 against its ETag, and the part count a multipart ETag allows. */
#include "core/err.h"
#include "s3/checksum.h"
#include "s3/multipart.h"
#include "s3/s3.h"
#include "s3/s3_int.h"
#include "tap.h"

#include <errno.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MIB ((uint64_t)1 << 20)

static const unsigned char md5_abc[16] = {
	0x90, 0x01, 0x50, 0x98, 0x3c, 0xd2, 0x4f, 0xb0,
	0xd6, 0x96, 0x3f, 0x7d, 0x28, 0xe1, 0x7f, 0x72,
};

static void test_sums(void)
{
	struct s3_body_sum s;
	char b64[32];

	s3_body_sum("", 0, &s);
	CHECK(!strcmp(s.sha256_hex, S3_EMPTY_SHA256), "SHA-256 of nothing");
	s3_md5_b64(s.md5, b64);
	CHECK(!strcmp(b64, "1B2M2Y8AsgTpgAmY7PhCfg=="), "Content-MD5 of nothing: %s", b64);
	s3_body_sum("abc", 3, &s);
	CHECK(!memcmp(s.md5, md5_abc, 16), "MD5 of abc");
	CHECK(!strcmp(s.sha256_hex,
		      "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"),
	      "SHA-256 of abc");
	s3_md5_b64(s.md5, b64);
	CHECK(!strcmp(b64, "kAFQmDzST7DWlj99KOF/cg=="), "Content-MD5 of abc: %s", b64);
}

static void test_etag_forms(void)
{
	char hex[33];

	CHECK(s3_etag_md5("\"900150983cd24fb0d6963f7d28e17f72\"", hex) &&
		      !strcmp(hex, "900150983cd24fb0d6963f7d28e17f72"),
	      "a quoted MD5");
	CHECK(s3_etag_md5("900150983CD24FB0D6963F7D28E17F72", NULL), "an unquoted upper-case MD5");
	CHECK(!s3_etag_md5("\"900150983cd24fb0d6963f7d28e17f72-2\"", NULL), "MD5-N is not a plain MD5");
	CHECK(!s3_etag_md5("\"900150983cd24fb0d6963f7d28e17f7\"", NULL), "31 digits are not");
	CHECK(!s3_etag_md5("W/\"900150983cd24fb0d6963f7d28e17f72\"", NULL), "a weak ETag is not");
	CHECK(!s3_etag_md5("\"900150983cd24fb0d6963f7d28e17f7g\"", NULL), "a non-hex digit is not");
	CHECK(!s3_etag_md5("", NULL), "nothing is not");
}

/* s3_check_download of an object of size bytes with this ETag. */
static int check(struct s3_client *c, const char *etag, uint64_t size,
		 bool encrypted, const unsigned char *md5)
{
	struct s3_object_info info = { .size = size, .encrypted = encrypted };

	snprintf(info.etag, sizeof(info.etag), "%s", etag);
	return s3_check_download(c, &info, md5);
}

static void test_download(struct s3_client *c)
{
	static const unsigned char other[16] = { 1 };
	const char *abc = "\"900150983cd24fb0d6963f7d28e17f72\"";

	CHECK(check(c, abc, 3, false, md5_abc) == 0, "the data's MD5 is the ETag");
	CHECK(check(c, abc, 3, false, other) == -RDX_EINTEGRITY &&
		      strstr(s3_last_error(c)->message, "the object's ETag \"900150983cd24fb0d6963f7d28e17f72\""),
	      "another MD5 is an integrity error naming the ETag: %s", s3_last_error(c)->message);
	CHECK(check(c, abc, 3, true, other) == 0, "an encrypted object's ETag is not checked");
	CHECK(check(c, abc, 3, false, NULL) == 0, "no MD5 computed: nothing to compare");
	CHECK(check(c, "\"0123456789abcdef0123456789abcdef-3\"", 10 * MIB + 1, false, other) == 0,
	      "3 parts make 10 MiB + 1 (the MD5 is not the data's)");
	CHECK(check(c, "\"0123456789abcdef0123456789abcdef-3\"", 10 * MIB, false, NULL) == 0,
	      "3 parts make 10 MiB (an empty last part)");
	CHECK(check(c, "\"0123456789abcdef0123456789abcdef-3\"", 10 * MIB - 1, false, NULL) ==
		      -RDX_EINTEGRITY,
	      "3 parts cannot make less than 2 x 5 MiB");
	CHECK(check(c, "0123456789abcdef0123456789abcdef-1", S3_PART_MAX, false, NULL) == 0,
	      "1 part makes 5 GiB (unquoted)");
	CHECK(check(c, "\"0123456789abcdef0123456789abcdef-1\"", S3_PART_MAX + 1, false, NULL) ==
		      -RDX_EINTEGRITY,
	      "1 part cannot make more than 5 GiB");
	CHECK(check(c, "\"0123456789abcdef0123456789abcdef-0\"", 0, false, NULL) == -RDX_EINTEGRITY,
	      "0 parts are no object");
	CHECK(check(c, "\"0123456789abcdef0123456789abcdef-10001\"", 60000 * MIB, false, NULL) ==
		      -RDX_EINTEGRITY,
	      "more than 10000 parts are none");
	CHECK(check(c, "\"0123456789abcdef0123456789abcdef-3x\"", 1, false, NULL) == 0 &&
		      check(c, "\"opaque\"", 1, false, NULL) == 0 && check(c, "", 1, false, NULL) == 0,
	      "other forms are not checked");
	CHECK(check(c, "\"0123456789abcdef0123456789abcdef-99999999999999999999999\"", 1, false,
		    NULL) == 0,
	      "a part count past unsigned long is no MD5-N");
}

static void test_fd_md5(void)
{
	char path[] = "/tmp/rdx-test-md5-XXXXXX";
	unsigned char d[16];
	int fd = mkstemp(path);

	CHECK(fd >= 0 && write(fd, "abcdef", 6) == 6, "a scratch file");
	CHECK(s3_fd_md5(fd, -1, 3, NULL, d) == 0 && !memcmp(d, md5_abc, 16),
	      "the MD5 of the first 3 bytes");
	CHECK(s3_fd_md5(fd, -1, 7, NULL, d) == -ENODATA, "a file shorter than asked is -ENODATA");
	{
		unsigned char parts[2][16], want[2][16];
		unsigned int dl;

		EVP_Digest("abcd", 4, want[0], &dl, EVP_md5(), NULL);
		EVP_Digest("ef", 2, want[1], &dl, EVP_md5(), NULL);
		CHECK(s3_fd_md5_parts(fd, -1, 6, 4, NULL, parts) == 0 &&
			      !memcmp(parts, want, sizeof(want)),
		      "parts of 4 bytes: the MD5s of abcd and of ef");
		EVP_Digest("", 0, want[0], &dl, EVP_md5(), NULL);
		CHECK(s3_fd_md5_parts(fd, -1, 0, 4, NULL, parts) == 0 &&
			      !memcmp(parts[0], want[0], 16),
		      "no bytes: one MD5, of nothing");
	}
	close(fd);
	unlink(path);
}

/* The digest of len bytes of p, split at every split-th byte, in hex. */
static void cksum_hex(enum s3_ck alg, const char *p, size_t len, size_t split, char *hex)
{
	unsigned char out[S3_CK_MAX];
	struct s3_cksum c;
	size_t n, i;

	if (s3_cksum_init(&c, alg)) {
		strcpy(hex, "init failed");
		return;
	}
	for (i = 0; i < len; i += split)
		s3_cksum_update(&c, p + i, len - i < split ? len - i : split);
	n = s3_cksum_final(&c, out);
	for (i = 0; i < n; i++)
		sprintf(hex + 2 * i, "%02x", out[i]);
	hex[2 * n] = '\0';
}

/* x-amz-checksum-*: the CRC catalogue's check values ("123456789"), which
 * a byte-at-a-time or split feed must both give, and the names. */
static void test_checksums(void)
{
	static const struct {
		enum s3_ck alg;
		const char *hex;
	} check[] = {
		{ S3_CK_CRC32, "cbf43926" },
		{ S3_CK_CRC32C, "e3069283" },
		{ S3_CK_CRC64NVME, "ae8b14860a799888" },
		{ S3_CK_SHA1, "f7c3bc1d808e04732adf679965ccc34ca7ae3441" },
		{ S3_CK_SHA256, "15e2b0d3c33891ebb0f1ef609ec419420c20e320ce94c65fbc8c3312448eb225" },
	};
	char hex[2 * S3_CK_MAX + 1];
	size_t i;

	for (i = 0; i < sizeof(check) / sizeof(check[0]); i++) {
		cksum_hex(check[i].alg, "123456789", 9, 9, hex);
		CHECK(!strcmp(hex, check[i].hex), "%s of 123456789: %s", s3_cksum_name(check[i].alg), hex);
		cksum_hex(check[i].alg, "123456789", 9, 2, hex);
		CHECK(!strcmp(hex, check[i].hex), "%s fed in pieces: %s", s3_cksum_name(check[i].alg), hex);
	}
	{
		/* Eight bytes a step agree with one at a time, at any offset. */
		static char data[1001];
		char whole[2 * S3_CK_MAX + 1], bytes[2 * S3_CK_MAX + 1];

		for (i = 0; i < sizeof(data); i++)
			data[i] = (char)(i * 2654435761u >> 13);
		for (enum s3_ck a = S3_CK_CRC32; a <= S3_CK_CRC64NVME; a++) {
			cksum_hex(a, data, sizeof(data), 1001, whole);
			cksum_hex(a, data, sizeof(data), 1, bytes);
			CHECK(!strcmp(whole, bytes), "%s of 1001 bytes, whole and a byte at a time: %s %s",
			      s3_cksum_name(a), whole, bytes);
			cksum_hex(a, data, sizeof(data), 13, bytes);
			CHECK(!strcmp(whole, bytes), "%s in pieces of 13: %s", s3_cksum_name(a), bytes);
		}
	}
	cksum_hex(S3_CK_CRC32, "", 0, 1, hex);
	CHECK(!strcmp(hex, "00000000"), "CRC32 of nothing: %s (AAAAAA== in a header)", hex);
	CHECK(s3_cksum_named("X-Amz-Checksum-CRC32C") == S3_CK_CRC32C, "header names in any case");
	CHECK(s3_cksum_named("x-amz-checksum-crc64nvme") == S3_CK_CRC64NVME, "crc64nvme");
	CHECK(s3_cksum_named("x-amz-checksum-algorithm") == S3_CK_NONE &&
		      s3_cksum_named("x-amz-checksum-md5") == S3_CK_NONE &&
		      s3_cksum_named("x-amz-checksum-") == S3_CK_NONE,
	      "other x-amz-checksum- names are not digests");
}

int main(void)
{
	struct s3_config cfg = { 0 };
	struct s3_client_opts o = { .cfg = &cfg };
	struct s3_client *c;

	test_sums();
	test_etag_forms();
	CHECK(s3_client_new(&c, &o) == 0, "a client for the errors");
	test_download(c);
	s3_client_free(c);
	test_fd_md5();
	test_checksums();
	return TAP_DONE();
}
