/* libFuzzer target: everything the peer can send before and after the
 * handshake goes through these decoders.  Beyond "no crash, no
 * out-of-bounds" (ASan), checks that whatever decodes re-encodes to the
 * same bytes, so no decoder accepts more than the format says. */
#include "fuzz.h"
#include "core/err.h"
#include "core/proto.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t out[RDX_CTRL_MAX + 64];
	struct rdx_frame_hdr h;
	struct rdx_hello hello;
	struct rdx_auth auth;
	struct rdx_accept acc;
	struct rdx_join join;
	struct rdx_eos eos;
	struct rdx_done done;
	struct rdx_errmsg em;
	const uint8_t *p = data + (size >= RDX_HDR_LEN ? RDX_HDR_LEN : size);
	size_t n = size - (size_t)(p - data);

	if (size >= RDX_HDR_LEN && rdx_hdr_decode(data, rdx_data_max(1 << 20), &h) == 0) {
		rdx_hdr_encode(&h, out);
		CHECK(memcmp(out, data, RDX_HDR_LEN) == 0);
		CHECK(h.type > 0 && h.type < RDX_F_MAX);
		CHECK(h.type == RDX_F_DATA ? h.len <= rdx_data_max(1 << 20) : h.len <= RDX_CTRL_MAX);
	}
	if (rdx_hello_decode(p, n, false, &hello) == 0) {
		CHECK(rdx_hello_encode(&hello, out) == n && memcmp(out, p, n) == 0);
	}
	if (rdx_hello_decode(p, n, true, &hello) == 0) {
		CHECK(rdx_hello_encode(&hello, out) == n && memcmp(out, p, n) == 0);
	}
	if (rdx_auth_decode(p, n, &auth) == 0) {
		CHECK(rdx_auth_encode(&auth, out) == n && memcmp(out, p, n) == 0);
		CHECK(auth.opts.slot_size >= RDX_MIN_SLOT && auth.opts.slot_size <= RDX_MAX_SLOT);
		CHECK(auth.opts.streams >= 1 && auth.opts.streams <= RDX_MAX_STREAMS);
	}
	if (rdx_accept_decode(p, n, &acc) == 0) {
		CHECK(rdx_accept_encode(&acc, out) == n && memcmp(out, p, n) == 0);
	}
	if (rdx_join_decode(p, n, &join) == 0) {
		CHECK(rdx_join_encode(&join, out) == n && memcmp(out, p, n) == 0);
		CHECK(join.index > 0 && join.index < RDX_MAX_STREAMS);
	}
	if (rdx_eos_decode(p, n, &eos) == 0) {
		CHECK(rdx_eos_encode(&eos, out) == n && memcmp(out, p, n) == 0);
		CHECK(eos.nchunks <= eos.total);
	}
	if (rdx_done_decode(p, n, &done) == 0) {
		CHECK(rdx_done_encode(&done, out) == n && memcmp(out, p, n) == 0);
	}
	if (n <= RDX_CTRL_MAX) {
		/* A LIST frame's records: each decodes to a safe name and
		 * re-encodes to the same bytes; a bad one stops the frame. */
		struct rdx_list_entry le;
		size_t off = 0, used = 0;

		while (off < n && rdx_list_decode(p, n, &off, &le) == 0) {
			size_t i;

			CHECK(le.len > 0 && le.name[0] != '/' && !memchr(le.name, 0, le.len));
			for (i = 0; i + 1 < le.len; i++)
				CHECK(!(le.name[i] == '.' && le.name[i + 1] == '.' &&
					(i == 0 || le.name[i - 1] == '/') &&
					(i + 2 == le.len || le.name[i + 2] == '/')));
			CHECK(rdx_list_encode(&le, out, sizeof(out), &used));
			CHECK(used == off && memcmp(out, p, used) == 0);
		}
	}
	if (rdx_errmsg_decode(p, n, &em) == 0) {
		size_t i, len = strlen(em.text);

		CHECK(len == n - 4 && len <= RDX_ERRTEXT_MAX);
		for (i = 0; i < len; i++)
			CHECK(em.text[i] >= 0x20 && em.text[i] < 0x7f);
	}
	return 0;
}
