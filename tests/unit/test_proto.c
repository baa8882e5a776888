/* Frame header and message codecs: round trips, and every malformed length
 * or field a hostile peer could send. */
#include "core/err.h"
#include "core/proto.h"
#include "tap.h"

#include <string.h>

static void test_hdr(void)
{
	struct rdx_frame_hdr h = { .type = RDX_F_DATA, .flags = RDX_FL_SEALED,
				   .stream = 7, .len = 4096 + RDX_TAG_LEN,
				   .plain_len = 4096, .seq = 0x0102030405060708ull };
	struct rdx_frame_hdr d;
	uint8_t raw[RDX_HDR_LEN];
	uint32_t max = rdx_data_max(1 << 20);

	_Static_assert(RDX_HDR_LEN == 24, "wire size");
	rdx_hdr_encode(&h, raw);
	CHECK(raw[0] == RDX_F_DATA && raw[2] == 0 && raw[3] == 7, "header is big-endian");
	CHECK(raw[16] == 1 && raw[23] == 8, "seq is big-endian");
	CHECK(rdx_hdr_decode(raw, max, &d) == 0 && d.seq == h.seq &&
		      d.len == h.len && d.plain_len == h.plain_len && d.stream == 7,
	      "header round trip");

	raw[0] = 0;
	CHECK(rdx_hdr_decode(raw, max, &d) == -RDX_EPROTO, "type 0 rejected");
	raw[0] = RDX_F_MAX;
	CHECK(rdx_hdr_decode(raw, max, &d) == -RDX_EPROTO, "unknown type rejected");
	rdx_hdr_encode(&h, raw);
	raw[1] = 0x80;
	CHECK(rdx_hdr_decode(raw, max, &d) == -RDX_EPROTO, "unknown flag rejected");
	rdx_hdr_encode(&h, raw);
	raw[13] = 1;
	CHECK(rdx_hdr_decode(raw, max, &d) == -RDX_EPROTO, "non-zero reserved rejected");

	h.len = max + 1;
	rdx_hdr_encode(&h, raw);
	CHECK(rdx_hdr_decode(raw, max, &d) == -RDX_EPROTO, "DATA longer than the slot bound rejected");
	h.len = max;
	rdx_hdr_encode(&h, raw);
	CHECK(rdx_hdr_decode(raw, max, &d) == 0, "DATA at the bound accepted");
	h.len = 0xffffffffu;
	rdx_hdr_encode(&h, raw);
	CHECK(rdx_hdr_decode(raw, max, &d) == -RDX_EPROTO, "4 GiB length rejected");

	h = (struct rdx_frame_hdr){ .type = RDX_F_HELLO, .len = RDX_CTRL_MAX + 1 };
	rdx_hdr_encode(&h, raw);
	CHECK(rdx_hdr_decode(raw, max, &d) == -RDX_EPROTO, "oversized control frame rejected");
	h.len = 40;
	h.plain_len = 1;
	rdx_hdr_encode(&h, raw);
	CHECK(rdx_hdr_decode(raw, max, &d) == -RDX_EPROTO, "control frame with plain_len rejected");
	h = (struct rdx_frame_hdr){ .type = RDX_F_EOS, .flags = RDX_FL_COMPRESSED, .len = 32 };
	rdx_hdr_encode(&h, raw);
	CHECK(rdx_hdr_decode(raw, max, &d) == -RDX_EPROTO, "compressed control frame rejected");
	h = (struct rdx_frame_hdr){ .type = RDX_F_KEEPALIVE, .len = 1 };
	rdx_hdr_encode(&h, raw);
	CHECK(rdx_hdr_decode(raw, max, &d) == -RDX_EPROTO, "keepalive with payload rejected");
}

static void test_hello(void)
{
	struct rdx_hello m = { .version = RDX_PROTO_VERSION }, d;
	uint8_t buf[RDX_HELLO_R_LEN];
	size_t n;

	memset(m.nonce, 0xab, sizeof(m.nonce));
	memset(m.share, 0x04, sizeof(m.share));
	m.share[64] = 0xcd;
	memset(m.confirm, 0xef, sizeof(m.confirm));
	n = rdx_hello_encode(&m, buf);
	CHECK(n == RDX_HELLO_S_LEN, "sender hello is 105 bytes");
	CHECK(rdx_hello_decode(buf, n, false, &d) == 0 && d.nonce[31] == 0xab &&
	      !memcmp(d.share, m.share, sizeof(d.share)),
	      "sender hello round trip");
	buf[5] = 1;
	CHECK(rdx_hello_decode(buf, 40, false, &d) == -RDX_EVERSION && d.version == 1,
	      "a version 1 hello (40 bytes) is reported as version 1");
	buf[5] = RDX_PROTO_VERSION;
	CHECK(rdx_hello_decode(buf, n, true, &d) == -RDX_EPROTO,
	      "sender hello where a receiver hello is due rejected");
	CHECK(rdx_hello_decode(buf, n - 1, false, &d) == -RDX_EPROTO, "short hello rejected");
	CHECK(rdx_hello_decode(buf, 3, false, &d) == -RDX_EPROTO, "3-byte hello rejected");
	CHECK(rdx_hello_decode(buf, 0, false, &d) == -RDX_EPROTO, "empty hello rejected");
	buf[0] = 'X';
	CHECK(rdx_hello_decode(buf, n, false, &d) == -RDX_EPROTO, "bad magic rejected");
	buf[0] = 'R';
	buf[5] = 99;
	CHECK(rdx_hello_decode(buf, n, false, &d) == -RDX_EVERSION && d.version == 99,
	      "other version reported as such");
	m.has_confirm = true;
	n = rdx_hello_encode(&m, buf);
	CHECK(n == RDX_HELLO_R_LEN && rdx_hello_decode(buf, n, true, &d) == 0 &&
	      !memcmp(d.confirm, m.confirm, sizeof(d.confirm)) && d.share[64] == 0xcd,
	      "receiver hello round trip");
}

static void test_auth(void)
{
	struct rdx_auth a = { .opts = { .slot_size = 1 << 20, .slots = 16, .streams = 4,
					.compress = 3, .encrypt = 1,
					.flags = RDX_OPT_SIZE_KNOWN, .size = 12345 } };
	struct rdx_auth d;
	uint8_t buf[RDX_AUTH_LEN];

	CHECK(rdx_auth_encode(&a, buf) == RDX_AUTH_LEN, "auth length");
	CHECK(rdx_auth_decode(buf, RDX_AUTH_LEN, &d) == 0 && d.opts.size == 12345 &&
		      d.opts.streams == 4 && d.opts.compress == 3,
	      "auth round trip");
	CHECK(rdx_auth_decode(buf, RDX_AUTH_LEN - 1, &d) == -RDX_EPROTO, "short auth rejected");
	a.opts.slot_size = 1000;
	rdx_auth_encode(&a, buf);
	CHECK(rdx_auth_decode(buf, RDX_AUTH_LEN, &d) == -RDX_EPROTO, "unaligned slot size rejected");
	a.opts.slot_size = 128u << 20;
	rdx_auth_encode(&a, buf);
	CHECK(rdx_auth_decode(buf, RDX_AUTH_LEN, &d) == -RDX_EPROTO, "huge slot size rejected");
	a.opts.slot_size = 1 << 20;
	a.opts.streams = 0;
	rdx_auth_encode(&a, buf);
	CHECK(rdx_auth_decode(buf, RDX_AUTH_LEN, &d) == -RDX_EPROTO, "zero streams rejected");
	a.opts.streams = RDX_MAX_STREAMS + 1;
	rdx_auth_encode(&a, buf);
	CHECK(rdx_auth_decode(buf, RDX_AUTH_LEN, &d) == -RDX_EPROTO, "too many streams rejected");
	a.opts.streams = 1;
	a.opts.flags = 0;
	rdx_auth_encode(&a, buf);
	CHECK(rdx_auth_decode(buf, RDX_AUTH_LEN, &d) == -RDX_EPROTO,
	      "size without the size-known flag rejected");
	a.opts.flags = RDX_OPT_SIZE_KNOWN;
	a.opts.size = (uint64_t)1 << 63;
	rdx_auth_encode(&a, buf);
	CHECK(rdx_auth_decode(buf, RDX_AUTH_LEN, &d) == -RDX_EPROTO, "size beyond off_t rejected");
	a.opts.size = 100;
	a.opts.flags = RDX_OPT_SIZE_KNOWN | RDX_OPT_RESUME;
	rdx_auth_encode(&a, buf);
	CHECK(rdx_auth_decode(buf, RDX_AUTH_LEN, &d) == 0 && (d.opts.flags & RDX_OPT_RESUME),
	      "resume of a file accepted");
	a.opts.flags = RDX_OPT_RESUME;
	a.opts.size = 0;
	rdx_auth_encode(&a, buf);
	CHECK(rdx_auth_decode(buf, RDX_AUTH_LEN, &d) == -RDX_EPROTO,
	      "resume without a known size rejected");
	a.opts.flags = RDX_OPT_TREE | RDX_OPT_RESUME;
	rdx_auth_encode(&a, buf);
	CHECK(rdx_auth_decode(buf, RDX_AUTH_LEN, &d) == -RDX_EPROTO, "resume of a tree rejected");
}

static void test_others(void)
{
	struct rdx_eos e = { .total = 5, .nchunks = 2 }, ed;
	struct rdx_join j = { .version = RDX_PROTO_VERSION, .index = 3 }, jd;
	struct rdx_errmsg em;
	uint8_t buf[RDX_CTRL_MAX];
	char big[RDX_ERRTEXT_MAX + 50];
	size_t n;

	n = rdx_eos_encode(&e, buf);
	CHECK(rdx_eos_decode(buf, n, &ed) == 0 && ed.total == 5 && ed.nchunks == 2,
	      "eos round trip");
	CHECK(rdx_eos_decode(buf, n + 1, &ed) == -RDX_EPROTO, "long eos rejected");
	e.nchunks = 6;
	rdx_eos_encode(&e, buf);
	CHECK(rdx_eos_decode(buf, n, &ed) == -RDX_EPROTO, "more chunks than bytes rejected");
	e.total = 5;
	e.nchunks = 0;
	rdx_eos_encode(&e, buf);
	CHECK(rdx_eos_decode(buf, n, &ed) == -RDX_EPROTO, "bytes without chunks rejected");

	n = rdx_join_encode(&j, buf);
	CHECK(rdx_join_decode(buf, n, &jd) == 0 && jd.index == 3, "join round trip");
	j.index = 0;
	rdx_join_encode(&j, buf);
	CHECK(rdx_join_decode(buf, n, &jd) == -RDX_EPROTO, "join for stream 0 rejected");

	memset(big, 'a', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	n = rdx_errmsg_encode(7, big, buf);
	CHECK(n == 4 + RDX_ERRTEXT_MAX, "error text cut to the limit");
	buf[5] = '\n';
	buf[6] = 0x1b;
	CHECK(rdx_errmsg_decode(buf, n, &em) == 0 && em.code == 7 && em.text[1] == '?' &&
		      em.text[2] == '?' && strlen(em.text) == RDX_ERRTEXT_MAX,
	      "control characters from the peer neutralised");
	CHECK(rdx_errmsg_decode(buf, 3, &em) == -RDX_EPROTO, "3-byte error rejected");
	CHECK(rdx_errmsg_decode(buf, 4 + RDX_ERRTEXT_MAX + 1, &em) == -RDX_EPROTO,
	      "overlong error rejected");
}

int main(void)
{
	test_hdr();
	test_hello();
	test_auth();
	test_others();
	return TAP_DONE();
}
