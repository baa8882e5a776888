/* aws-chunked decoding and chunk signatures (src/s3/serve/aws_chunked.c)
 * against AWS's published examples:
 *
 *   "Signature Calculations for the Authorization Header: Transferring
 *   Payload in Multiple Chunks (Chunked Upload)", section "Example: PUT
 *   Object" -- docs.aws.amazon.com/AmazonS3/latest/API/sigv4-streaming.html
 *   "Signature calculations for trailing headers (chunked uploads)",
 *   docs.aws.amazon.com/AmazonS3/latest/API/sigv4-streaming-trailers.html
 *
 * Both upload 66560 bytes of 'a' in a 64 KiB chunk, a 1 KiB one and the
 * empty last one, as AKIAIOSFODNN7EXAMPLE on 20130524T000000Z in
 * us-east-1; the second ends with the trailer x-amz-checksum-crc32c.
 * Then the framing as AWS's SDKs send it unsigned (x-amz-content-sha256:
 * STREAMING-UNSIGNED-PAYLOAD-TRAILER), malformed bodies, and a 5 GiB
 * chunk passing through in bounded memory. */
#include "s3/checksum.h"
#include "s3/serve/aws_chunked.h"
#include "s3/sigv4.h"
#include "tap.h"

#include <errno.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DATE "20130524T000000Z"
#define SCOPE "20130524/us-east-1/s3/aws4_request"
#define SECRET "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"

/* The example's seed (the Authorization's signature) and chunk signatures. */
static const char doc_seed[] = "4f232c4386841ef735655705268965c44a0e4690baa4adea153f7db9fa80a0a9";
static const char *const doc_sigs[3] = {
	"ad80c730a21e5b8d04586a2213dd63b9a0e99e0e2307b0ade35a65485a288648",
	"0055627c9e194cb4542bae2aa5492e3c1575bbb81b612b7d234b86a503ef5497",
	"b6c6ea8a5354eaf15b3cb7646744f4275b71ea724fed81ceb9323e279d449df9",
};
/* The trailer example's. */
static const char tr_seed[] = "106e2a8a18243abcf37539882f36619c00e2dfc72633413f02d3b74544bfeb8e";
static const char *const tr_sigs[3] = {
	"b474d8862b1487a5145d686f57f013e54db672cee1c953b3010fb58501ef5aa2",
	"1c1344b170168f8e65b41376b44b20fe354e373826ccbbe2c1d40a8cae51e5c7",
	"2ca2aba2005185cf7159c6277faf83795951dd77a3a99e6e65d5c9f85863f992",
};
static const char tr_crc32c[] = "sOO8/Q==";
static const char tr_sig[] = "d81f82fc3505edab99d459891051a732e8730629a2e4a59689829ca17fe2e435";

struct body {
	unsigned char *p;
	size_t n, cap;
};

static void add(struct body *b, const void *p, size_t n)
{
	if (b->n + n > b->cap) {
		b->cap = (b->n + n) * 2;
		b->p = realloc(b->p, b->cap);
		if (!b->p)
			abort();
	}
	memcpy(b->p + b->n, p, n);
	b->n += n;
}

static void adds(struct body *b, const char *s)
{
	add(b, s, strlen(s));
}

/* One chunk of n 'a's; sig NULL: unsigned. */
static void chunk(struct body *b, size_t n, const char *sig)
{
	char head[128];

	snprintf(head, sizeof(head), "%zx%s%s\r\n", n, sig ? ";chunk-signature=" : "", sig ? sig : "");
	adds(b, head);
	for (size_t i = 0; i < n; i++)
		add(b, "a", 1);
	if (n)
		adds(b, "\r\n");
}

/* The example's body: 64 KiB, 1 KiB, the last chunk; trailer lines after. */
static struct body example(const char *const sigs[3], const char *trailer)
{
	struct body b = { 0 };

	chunk(&b, 65536, sigs ? sigs[0] : NULL);
	chunk(&b, 1024, sigs ? sigs[1] : NULL);
	chunk(&b, 0, sigs ? sigs[2] : NULL);
	adds(&b, trailer ? trailer : "");
	adds(&b, "\r\n");
	return b;
}

/* What decoding a body gave. */
struct result {
	int err;	   /* 0, or the step's error */
	const char *why;
	size_t data;	   /* decoded bytes */
	bool all_a;	   /* every one an 'a' */
	unsigned chunks;   /* chunk ends */
	unsigned good;	   /* of them, signed as the chain says */
	char name[64], value[128];
	bool trailer_sig_ok;
	bool ended;
	char crc32c[16];   /* the decoded bytes' CRC32C, base64 */
};

/* Decodes b fed in pieces of step bytes; with seed, checks each chunk's
 * signature in a chain from it with the example's key. */
static struct result decode(const struct body *b, size_t step, bool signed_chunks,
			    bool trailers, const char *seed)
{
	struct result r = { 0 };
	struct sv_awsc d;
	unsigned char key[32], ck[S3_CK_MAX];
	char prev[65], sig[65], hash[65];
	EVP_MD_CTX *sha = EVP_MD_CTX_new();
	struct s3_cksum crc;
	size_t off = 0;

	s3_sigv4_key(SECRET, "20130524", "us-east-1", "s3", key);
	snprintf(prev, sizeof(prev), "%s", seed ? seed : "");
	sv_awsc_init(&d, signed_chunks, trailers);
	EVP_DigestInit_ex(sha, EVP_sha256(), NULL);
	s3_cksum_init(&crc, S3_CK_CRC32C);
	r.all_a = true;
	while (!r.ended && !r.err) {
		size_t n = b->n - off < step ? b->n - off : step, used;
		const unsigned char *data;
		size_t len;
		int ev = sv_awsc_step(&d, b->p + off, n, &used, &data, &len);

		off += used;
		switch (ev) {
		case SV_AWSC_NEED:
			if (off == b->n)
				r.err = -ENODATA; /* the body ended first */
			break;
		case SV_AWSC_DATA:
			for (size_t i = 0; i < len; i++)
				r.all_a &= data[i] == 'a';
			r.data += len;
			EVP_DigestUpdate(sha, data, len);
			s3_cksum_update(&crc, data, len);
			break;
		case SV_AWSC_CHUNK_END: {
			unsigned char md[32];

			r.chunks++;
			EVP_DigestFinal_ex(sha, md, NULL);
			EVP_DigestInit_ex(sha, EVP_sha256(), NULL);
			for (int i = 0; i < 32; i++)
				snprintf(hash + 2 * i, 3, "%02x", md[i]);
			if (seed && !sv_awsc_sign(key, DATE, SCOPE, prev, hash, false, sig) &&
			    !strcmp(sig, d.sig))
				r.good++;
			snprintf(prev, sizeof(prev), "%s", d.sig);
			break;
		}
		case SV_AWSC_TRAILER: {
			char canon[256];

			snprintf(r.name, sizeof(r.name), "%s", d.name);
			snprintf(r.value, sizeof(r.value), "%s", d.value);
			snprintf(canon, sizeof(canon), "%s:%s\n", d.name, d.value);
			s3_sha256_hex(canon, strlen(canon), hash);
			break;
		}
		case SV_AWSC_TRAILER_SIG:
			r.trailer_sig_ok = seed && !sv_awsc_sign(key, DATE, SCOPE, prev, hash, true, sig) &&
					   !strcmp(sig, d.sig);
			break;
		case SV_AWSC_END:
			r.ended = true;
			break;
		default:
			r.err = ev;
			r.why = d.why;
		}
	}
	if (r.ended && off != b->n) { /* the decoder is asked about the rest */
		const unsigned char *data;
		size_t used, len;

		r.err = sv_awsc_step(&d, b->p + off, b->n - off, &used, &data, &len);
		r.why = d.why;
	}
	{
		size_t n = s3_cksum_final(&crc, ck);

		EVP_EncodeBlock((unsigned char *)r.crc32c, ck, (int)n);
	}
	EVP_MD_CTX_free(sha);
	return r;
}

static void test_seed(void)
{
	static const struct s3_creds creds = { "AKIAIOSFODNN7EXAMPLE", SECRET, NULL };
	const struct s3_kv h[] = {
		{ "Host", "s3.amazonaws.com" },
		{ "x-amz-date", DATE },
		{ "x-amz-storage-class", "REDUCED_REDUNDANCY" },
		{ "x-amz-content-sha256", "STREAMING-AWS4-HMAC-SHA256-PAYLOAD" },
		{ "Content-Encoding", "aws-chunked" },
		{ "x-amz-decoded-content-length", "66560" },
		{ "Content-Length", "66824" },
	};
	struct s3_sign s = { .method = "PUT", .path = "/examplebucket/chunkObject.txt",
			     .headers = h, .nheaders = 7,
			     .payload_hash = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD",
			     .region = "us-east-1", .service = "s3", .amz_date = DATE };
	struct s3_sigv4 sig;

	s3_sigv4_init(&sig);
	CHECK(!s3_sigv4_sign(&creds, &s, &sig) && !strcmp(sig.signature, doc_seed),
	      "sigv4-streaming example: the seed signature is the documented one (%s)", sig.signature);
	s3_sigv4_release(&sig);
}

static void test_example(void)
{
	static const size_t steps[] = { 1, 7, 100, 4096, 65537, 1 << 20 };
	struct body b = example(doc_sigs, NULL);

	CHECK(b.n == 66824, "sigv4-streaming example: the body is the documented Content-Length 66824 (%zu)", b.n);
	for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
		struct result r = decode(&b, steps[i], true, false, doc_seed);

		CHECK(!r.err && r.ended && r.data == 66560 && r.all_a,
		      "sigv4-streaming example in pieces of %zu: 66560 a's (err %d %s)", steps[i], r.err,
		      r.why ? r.why : "");
		CHECK(r.chunks == 3 && r.good == 3,
		      "sigv4-streaming example in pieces of %zu: the three documented chunk signatures chain from the seed",
		      steps[i]);
	}
	/* A flipped signature, a flipped data byte: the chain breaks there. */
	{
		struct body f = example(doc_sigs, NULL);
		char *at = memmem(f.p, f.n, doc_sigs[1], 64);
		struct result r;

		at[10] ^= 1;
		r = decode(&f, 4096, true, false, doc_seed);
		CHECK(!r.err && r.chunks == 3 && r.good == 1,
		      "a flipped second chunk signature does not verify (and the last chains from the flipped one)");
		free(f.p);
		f = example(doc_sigs, NULL);
		f.p[66000] = 'b'; /* the second chunk's data: 65712..66735 */
		r = decode(&f, 4096, true, false, doc_seed);
		CHECK(!r.err && r.good == 2, "a flipped byte of the second chunk's data breaks its signature only");
		free(f.p);
	}
	free(b.p);
}

static void test_trailer_example(void)
{
	char trailer[256];
	struct body b;
	struct result r;

	snprintf(trailer, sizeof(trailer), "x-amz-checksum-crc32c:%s\r\nx-amz-trailer-signature:%s\r\n",
		 tr_crc32c, tr_sig);
	b = example(tr_sigs, trailer);
	r = decode(&b, 1000, true, true, tr_seed);
	CHECK(!r.err && r.ended && r.data == 66560 && r.good == 3,
	      "sigv4-streaming-trailers example: data and the three chunk signatures (err %d %s)", r.err,
	      r.why ? r.why : "");
	CHECK(!strcmp(r.name, "x-amz-checksum-crc32c") && !strcmp(r.value, tr_crc32c) &&
		      !strcmp(r.crc32c, tr_crc32c),
	      "sigv4-streaming-trailers example: the trailer is the data's CRC32C (%s)", r.crc32c);
	CHECK(r.trailer_sig_ok, "sigv4-streaming-trailers example: the trailer signature is the documented one");
	free(b.p);
	/* Its name in capitals is the same trailer. */
	snprintf(trailer, sizeof(trailer), "X-Amz-Checksum-CRC32C: %s\r\nx-amz-trailer-signature:%s\r\n",
		 tr_crc32c, tr_sig);
	b = example(tr_sigs, trailer);
	r = decode(&b, 3, true, true, tr_seed);
	CHECK(!r.err && r.trailer_sig_ok, "a trailer's name in any case, a space before its value: same signature");
	free(b.p);
}

/* As the SDKs send STREAMING-UNSIGNED-PAYLOAD-TRAILER. */
static void test_unsigned(void)
{
	struct body b = example(NULL, "x-amz-checksum-crc32c:sOO8/Q==\r\n");
	struct result r = decode(&b, 5000, false, true, NULL);

	CHECK(!r.err && r.ended && r.data == 66560 && r.all_a && r.chunks == 3 &&
		      !strcmp(r.value, "sOO8/Q==") && !strcmp(r.crc32c, "sOO8/Q=="),
	      "unsigned with a trailer: data and the checksum trailer (err %d %s)", r.err, r.why ? r.why : "");
	free(b.p);
	b = (struct body){ 0 };
	adds(&b, "0\r\nx-amz-checksum-crc32:AAAAAA==\r\n\r\n");
	r = decode(&b, 1, false, true, NULL);
	CHECK(!r.err && r.ended && !r.data, "an empty body: the last chunk and its trailer");
	free(b.p);
	b = (struct body){ 0 };
	adds(&b, "A\r\naaaaaaaaaa\r\n0\r\n\r\n");
	r = decode(&b, 2, false, true, NULL);
	CHECK(!r.err && r.ended && r.data == 10, "upper-case hex size, no trailer at all");
	free(b.p);
}

static void bad_body(const char *what, const char *text, bool signed_chunks, bool trailers)
{
	struct body b = { 0 };
	struct result r;

	adds(&b, text);
	r = decode(&b, 1, signed_chunks, trailers, NULL);
	CHECK(r.err == -EBADMSG && r.why, "refused: %s (%s)", what, r.why ? r.why : "not refused");
	r = decode(&b, b.n, signed_chunks, trailers, NULL);
	CHECK(r.err == -EBADMSG, "refused in one piece: %s", what);
	free(b.p);
}

static void test_malformed(void)
{
	char line[600];
	const char *sig = doc_sigs[0];

	bad_body("a size that is not hex", "zz\r\n", false, true);
	bad_body("no size", "\r\n", false, true);
	bad_body("17 hex digits of size", "10000000000000000\r\n", false, true);
	bad_body("a size line ending in LF alone", "3\naaa\r\n0\r\n\r\n", false, true);
	bad_body("data longer than its size", "3\r\naaaa\r\n0\r\n\r\n", false, true);
	bad_body("data not followed by CRLF", "3\r\naaa\rx0\r\n\r\n", false, true);
	bad_body("an unsigned chunk with an extension", "3;x=y\r\naaa\r\n0\r\n\r\n", false, true);
	bad_body("a signed chunk without its signature", "3\r\naaa\r\n0\r\n\r\n", true, false);
	snprintf(line, sizeof(line), "3;chunk-signature=%.63s\r\naaa\r\n", sig);
	bad_body("a signature one digit short", line, true, false);
	snprintf(line, sizeof(line), "3;chunk-signature=%sA\r\naaa\r\n", sig);
	bad_body("a signature one digit long", line, true, false);
	snprintf(line, sizeof(line), "3;chunk-signature=AD80C730A21E5B8D04586A2213DD63B9A0E99E0E2307B0ADE35A65485A288648\r\n");
	bad_body("an upper-case signature", line, true, false);
	memset(line, '0', 300);
	strcpy(line + 300, "1\r\na\r\n");
	bad_body("a size line of 300 bytes", line, false, true);
	bad_body("a trailer in a body without trailers", "0\r\nx-amz-checksum-crc32:AAAAAA==\r\n\r\n", false, false);
	bad_body("a trailer that is not NAME:VALUE", "0\r\nx-amz-checksum-crc32\r\n\r\n", false, true);
	bad_body("a trailer with an empty name", "0\r\n:AAAA\r\n\r\n", false, true);
	bad_body("a trailer's name with a space", "0\r\nx amz:AAAA\r\n\r\n", false, true);
	bad_body("a trailer's value with a control byte", "0\r\nx-amz-checksum-crc32:AA\x01A\r\n\r\n", false, true);
	bad_body("five trailer lines", "0\r\na:1\r\nb:2\r\nc:3\r\nd:4\r\ne:5\r\n\r\n", false, true);
	snprintf(line, sizeof(line), "0\r\nx-amz-trailer-signature:%s\r\n\r\n", sig);
	bad_body("a trailer signature in an unsigned body", line, false, true);
	snprintf(line, sizeof(line), "0;chunk-signature=%s\r\nx-amz-checksum-crc32:AAAAAA==\r\n\r\n", sig);
	bad_body("signed trailers without their signature", line, true, true);
	snprintf(line, sizeof(line),
		 "0;chunk-signature=%s\r\nx-amz-trailer-signature:%s\r\nx-amz-checksum-crc32:AAAAAA==\r\n\r\n",
		 sig, sig);
	bad_body("a trailer after the trailer signature", line, true, true);
	memset(line, 'x', 300);
	strcpy(line, "0\r\nx-amz-checksum-crc32:");
	line[strlen(line)] = 'A';
	strcpy(line + 300, "\r\n\r\n");
	bad_body("a trailer line of 300 bytes", line, false, true);
	bad_body("bytes after the end", "1\r\na\r\n0\r\n\r\nGET / HTTP/1.1\r\n", false, true);
	bad_body("the last chunk not followed by an empty line", "0\r\nx\r\n", false, false);
	/* A body cut short is no event at all: the caller sees its end first. */
	{
		struct body b = { 0 };
		struct result r;

		adds(&b, "5\r\naa");
		r = decode(&b, 1, false, true, NULL);
		CHECK(r.err == -ENODATA && r.data == 2, "a body cut in a chunk's data waits for more");
		free(b.p);
	}
}

/* A 5 GiB chunk: its data passes through the caller's own buffer in
 * pieces; the decoder keeps a counter. */
static void test_huge_chunk(void)
{
	static const char head[] = "140000000\r\n";
	static const char tail[] = "\r\n0\r\n\r\n";
	const unsigned char *data;
	struct sv_awsc d;
	size_t used, len;
	uint64_t passed = 0;
	int ev;

	sv_awsc_init(&d, false, true);
	ev = sv_awsc_step(&d, (const unsigned char *)head, sizeof(head) - 1, &used, &data, &len);
	CHECK(ev == SV_AWSC_NEED && used == sizeof(head) - 1 && sv_awsc_data_left(&d) == (uint64_t)5 << 30,
	      "a 5 GiB chunk's size line: 5 GiB of data wanted");
	while (sv_awsc_data_left(&d)) {
		uint64_t n = sv_awsc_data_left(&d) < (1u << 20) ? sv_awsc_data_left(&d) : (1u << 20);

		sv_awsc_take(&d, (size_t)n);
		passed += n;
	}
	ev = sv_awsc_step(&d, (const unsigned char *)tail, sizeof(tail) - 1, &used, &data, &len);
	CHECK(ev == SV_AWSC_CHUNK_END && d.size == (uint64_t)5 << 30, "the 5 GiB chunk ends");
	ev = sv_awsc_step(&d, (const unsigned char *)tail + used, sizeof(tail) - 1 - used, &used, &data, &len);
	CHECK(ev == SV_AWSC_CHUNK_END && d.size == 0, "then the last chunk");
	ev = sv_awsc_step(&d, (const unsigned char *)"\r\n", 2, &used, &data, &len);
	CHECK(ev == SV_AWSC_END && passed == (uint64_t)5 << 30, "and the body's end, 5 GiB passed");
}

int main(void)
{
	test_seed();
	test_example();
	test_trailer_example();
	test_unsigned();
	test_malformed();
	test_huge_chunk();
	return TAP_DONE();
}
