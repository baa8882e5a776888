/* S3 over RDMA without a device: the x-amz-rdma-token codec, the login's
 * HELLO and proofs, and how a client reads each kind of answer (the
 * declines of NooBaa and others, and nonsense). */
#include "core/err.h"
#include "core/xport.h"
#include "s3/rdma.h"
#include "s3/rdma_token.h"
#include "tap.h"

#include <errno.h>
#include <string.h>

static const char sample[] =
	"0102030405060708:01020304:0a0b0c0d:0102:010203:1:"
	"fe800000000000000211223344556677";

static void test_token(void)
{
	struct s3_rdma_token t = { 0 }, u;
	char out[S3_RDMA_TOKEN_LEN + 1], bad[S3_RDMA_TOKEN_LEN + 2];
	size_t i;

	CHECK(strlen(sample) == S3_RDMA_TOKEN_LEN, "the sample is 81 characters");
	CHECK(s3_rdma_token_decode(sample, strlen(sample), &t) == 0 &&
	      t.raddr == 0x0102030405060708ull && t.rsize == 0x01020304 &&
	      t.rkey == 0x0a0b0c0d && t.lid == 0x0102 && t.qpn == 0x010203 && t.has_gid &&
	      t.gid[0] == 0xfe && t.gid[15] == 0x77,
	      "token: every field decoded");
	CHECK(s3_rdma_token_encode(&t, out) == 0 && !strcmp(out, sample),
	      "token: encoded back to the same 81 characters");
	memcpy(bad, sample, sizeof(sample));
	for (i = 0; bad[i]; i++)
		if (bad[i] >= 'a' && bad[i] <= 'f')
			bad[i] = (char)(bad[i] - 'a' + 'A');
	CHECK(s3_rdma_token_decode(bad, strlen(bad), &u) == 0 && !memcmp(&u, &t, sizeof(t)),
	      "token: upper-case hex is the same token");
	CHECK(s3_rdma_token_decode(sample, 80, &u) == -EINVAL, "token: 80 characters refused");
	memcpy(bad, sample, sizeof(sample));
	strcat(bad, "0");
	CHECK(s3_rdma_token_decode(bad, strlen(bad), &u) == -EINVAL, "token: 82 characters refused");
	memcpy(bad, sample, sizeof(sample));
	bad[16] = '-';
	CHECK(s3_rdma_token_decode(bad, strlen(bad), &u) == -EINVAL, "token: a wrong separator refused");
	memcpy(bad, sample, sizeof(sample));
	bad[3] = 'g';
	CHECK(s3_rdma_token_decode(bad, strlen(bad), &u) == -EINVAL, "token: a non-hex digit refused");
	memcpy(bad, sample, sizeof(sample));
	bad[5] = ' ';
	CHECK(s3_rdma_token_decode(bad, strlen(bad), &u) == -EINVAL, "token: a space refused");
	memcpy(bad, sample, sizeof(sample));
	bad[48] = '2';
	CHECK(s3_rdma_token_decode(bad, strlen(bad), &u) == -EINVAL, "token: has_gid other than 0 or 1 refused");
	memcpy(bad, "0102030405060708:00000000:", 26);
	memcpy(bad + 26, sample + 26, sizeof(sample) - 26);
	CHECK(s3_rdma_token_decode(bad, strlen(bad), &u) == -EINVAL, "token: a zero rsize refused");
	memcpy(bad, sample, sizeof(sample));
	bad[80] = '\0';
	CHECK(s3_rdma_token_decode(bad, 81, &u) == -EINVAL, "token: a NUL inside refused");
	t.qpn = 0x1000000;
	CHECK(s3_rdma_token_encode(&t, out) == -ERANGE, "token: a qpn past 24 bits is not encoded");
	t = (struct s3_rdma_token){ .raddr = 1, .rsize = 4096, .rkey = 7, .qpn = 17 };
	CHECK(s3_rdma_token_encode(&t, out) == 0 &&
	      !strcmp(out, "0000000000000001:00001000:00000007:0000:000011:0:"
			   "00000000000000000000000000000000"),
	      "token: an InfiniBand token (no GID) as NooBaa reads it");
}

static void test_hello(void)
{
	struct s3_rdma_hello h = { .version = S3_RDMA_VERSION, .addr = 0x7f0000001000ull,
				   .len = 8 << 20, .rkey = 0x1234 }, g;
	uint8_t b[S3_RDMA_HELLO_MAX + 1], n[S3_RDMA_NONCE] = { 1 }, m1[32], m2[32];
	size_t len;

	strcpy(h.access_key, "AKIAEXAMPLE");
	memset(h.nonce, 0xab, sizeof(h.nonce));
	len = s3_rdma_hello_encode(&h, b);
	CHECK(s3_rdma_hello_decode(b, len, &g) == 0 && !strcmp(g.access_key, "AKIAEXAMPLE") &&
	      g.addr == h.addr && g.len == h.len && g.rkey == h.rkey &&
	      !memcmp(g.nonce, h.nonce, sizeof(h.nonce)),
	      "hello: round trip");
	CHECK(s3_rdma_hello_decode(b, len - 1, &g) == -RDX_EPROTO, "hello: short refused");
	CHECK(s3_rdma_hello_decode(b, len + 1, &g) == -RDX_EPROTO, "hello: trailing byte refused");
	b[5] = 2;
	CHECK(s3_rdma_hello_decode(b, len, &g) == -RDX_EVERSION, "hello: another version refused");
	b[5] = 1;
	b[len - 1] = '\n';
	CHECK(s3_rdma_hello_decode(b, len, &g) == -RDX_EPROTO, "hello: a control character in the key refused");
	h.addr = UINT64_MAX - 10;
	len = s3_rdma_hello_encode(&h, b);
	CHECK(s3_rdma_hello_decode(b, len, &g) == -RDX_EPROTO, "hello: a buffer past the address space refused");
	h.addr = 4096;
	h.len = 0;
	len = s3_rdma_hello_encode(&h, b);
	CHECK(s3_rdma_hello_decode(b, len, &g) == -RDX_EPROTO, "hello: an empty buffer refused");

	s3_rdma_proof("secret", "server", b, len, n, m1);
	s3_rdma_proof("secret", "client", b, len, n, m2);
	CHECK(memcmp(m1, m2, 32), "proof: the two roles differ");
	s3_rdma_proof("Secret", "server", b, len, n, m2);
	CHECK(memcmp(m1, m2, 32), "proof: another secret differs");
	n[0] = 2;
	s3_rdma_proof("secret", "server", b, len, n, m2);
	CHECK(memcmp(m1, m2, 32), "proof: another nonce differs");
	n[0] = 1;
	s3_rdma_proof("secret", "server", b, len, n, m2);
	CHECK(!memcmp(m1, m2, 32), "proof: the same inputs give the same proof");
}

static void test_verdict(void)
{
	uint64_t n = 0;

	CHECK(s3_rdma_verdict(true, 200, "", "200", "4096", 0, &n) == S3_RDMA_DONE && n == 4096,
	      "verdict: a GET done by RDMA");
	CHECK(s3_rdma_verdict(true, 206, "", NULL, "17", 0, &n) == S3_RDMA_DONE && n == 17,
	      "verdict: the count alone is enough");
	CHECK(s3_rdma_verdict(false, 200, "", "200", "5", 0, &n) == S3_RDMA_DONE,
	      "verdict: a PUT done by RDMA");
	CHECK(s3_rdma_verdict(true, 400, "S3InvalidRdmaToken", NULL, NULL, 300, &n) == S3_RDMA_DECLINED,
	      "verdict: 400 S3InvalidRdmaToken declines");
	CHECK(s3_rdma_verdict(false, 501, "S3RdmaNotSupported", NULL, NULL, 300, &n) == S3_RDMA_DECLINED,
	      "verdict: 501 S3RdmaNotSupported declines");
	CHECK(s3_rdma_verdict(true, 500, "S3RdmaIoError", NULL, NULL, 300, &n) == S3_RDMA_DECLINED,
	      "verdict: 500 S3RdmaIoError declines");
	CHECK(s3_rdma_verdict(false, 200, "", "501", NULL, 0, &n) == S3_RDMA_DECLINED,
	      "verdict: x-amz-rdma-reply 501 declines a PUT");
	CHECK(s3_rdma_verdict(true, 200, "", "501", NULL, 0, &n) == S3_RDMA_DECLINED,
	      "verdict: x-amz-rdma-reply 501 with no body declines a GET");
	CHECK(s3_rdma_verdict(true, 200, "", "501", NULL, 10, &n) == S3_RDMA_IGNORED,
	      "verdict: x-amz-rdma-reply 501 with the body: the body is the data");
	CHECK(s3_rdma_verdict(true, 200, "", NULL, NULL, 10, &n) == S3_RDMA_IGNORED,
	      "verdict: a GET answered as if no token was sent: its body");
	CHECK(s3_rdma_verdict(false, 200, "", NULL, NULL, 0, &n) == S3_RDMA_DECLINED,
	      "verdict: a PUT answered as if no token was sent goes again over HTTP");
	CHECK(s3_rdma_verdict(true, 200, "", "200", NULL, 0, &n) == S3_RDMA_BAD,
	      "verdict: a success without x-amz-rdma-bytes-transferred is a protocol error");
	CHECK(s3_rdma_verdict(true, 200, "", "200", "4096", 4096, &n) == S3_RDMA_BAD,
	      "verdict: bytes both ways is a protocol error");
	CHECK(s3_rdma_verdict(true, 200, "", "200", "12x", 0, &n) == S3_RDMA_BAD,
	      "verdict: a count that is no number is a protocol error");
	CHECK(s3_rdma_verdict(true, 200, "", "200", "99999999999999999999999", 0, &n) == S3_RDMA_BAD,
	      "verdict: a count past 64 bits is a protocol error");
	CHECK(s3_rdma_verdict(true, 200, "", "oops", "1", 0, &n) == S3_RDMA_BAD,
	      "verdict: a reply that is no number is a protocol error");
	CHECK(s3_rdma_verdict(true, 200, "", "404", "1", 0, &n) == S3_RDMA_BAD,
	      "verdict: a failing reply in a success is a protocol error");
	CHECK(s3_rdma_verdict(false, 400, "BadDigest", NULL, NULL, 200, &n) == S3_RDMA_DECLINED,
	      "verdict: a PUT's BadDigest (Content-MD5 against the empty body) declines");
	CHECK(s3_rdma_verdict(true, 400, "BadDigest", NULL, NULL, 200, &n) == S3_RDMA_FAILED,
	      "verdict: a GET's BadDigest is an error");
	CHECK(s3_rdma_verdict(true, 404, "NoSuchKey", NULL, NULL, 200, &n) == S3_RDMA_FAILED,
	      "verdict: other S3 errors are errors, not declines");
	CHECK(s3_rdma_verdict(false, 403, "AccessDenied", NULL, NULL, 200, &n) == S3_RDMA_FAILED,
	      "verdict: AccessDenied is no decline");
}

/* The dc provider's setup where it cannot run: a one-line reason, no
 * target; on a host with an RDMA device it either works (mlx5) or says why
 * not. */
static void test_dc_setup(void)
{
	static char buf[8192];
	struct s3_rdma_token t;
	struct s3_rdma_dc *d = NULL;
	char why[256] = "";
	int ret = s3_rdma_dc_open("127.0.0.1", buf, sizeof(buf), S3_RDMA_DC_KEY, &d, &t, why,
				  sizeof(why));

	if (rdx_verbs_unavailable()) {
		CHECK(ret == -RDX_ENOTSUP && !d && strstr(why, "RDMA"),
		      "dc: no device: refused, saying why (%s)", why);
	} else {
		CHECK((ret == 0 && d && t.qpn) || (ret < 0 && !d && why[0]),
		      "dc: set up, or refused saying why (%s)", why);
	}
	s3_rdma_dc_close(d);
}

int main(void)
{
	enum s3_rdma_mode m;

	test_token();
	test_hello();
	test_verdict();
	test_dc_setup();
	CHECK(s3_rdma_mode_parse("auto", &m) == 0 && m == S3_RDMA_AUTO &&
	      s3_rdma_mode_parse("on", &m) == 0 && m == S3_RDMA_ON &&
	      s3_rdma_mode_parse("off", &m) == 0 && m == S3_RDMA_OFF &&
	      s3_rdma_mode_parse("yes", &m) == -EINVAL,
	      "--rdma: auto, on and off, nothing else");
	return TAP_DONE();
}
