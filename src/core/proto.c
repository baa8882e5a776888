#include "core/proto.h"

#include "core/be.h"
#include "core/err.h"

#include <string.h>
#include <zstd.h>

uint32_t rdx_data_max(uint32_t slot_size)
{
	return (uint32_t)ZSTD_COMPRESSBOUND(slot_size) + RDX_TAG_LEN;
}

void rdx_hdr_encode(const struct rdx_frame_hdr *h, uint8_t out[RDX_HDR_LEN])
{
	out[0] = h->type;
	out[1] = h->flags;
	rdx_put16(out + 2, h->stream);
	rdx_put32(out + 4, h->len);
	rdx_put32(out + 8, h->plain_len);
	rdx_put32(out + 12, 0);
	rdx_put64(out + 16, h->seq);
}

int rdx_hdr_decode(const uint8_t in[RDX_HDR_LEN], uint32_t max_data,
		   struct rdx_frame_hdr *h)
{
	h->type = in[0];
	h->flags = in[1];
	h->stream = rdx_get16(in + 2);
	h->len = rdx_get32(in + 4);
	h->plain_len = rdx_get32(in + 8);
	h->seq = rdx_get64(in + 16);
	if (h->type == 0 || h->type >= RDX_F_MAX)
		return -RDX_EPROTO;
	if (h->flags & ~(unsigned)(RDX_FL_COMPRESSED | RDX_FL_SEALED))
		return -RDX_EPROTO;
	if (rdx_get32(in + 12) != 0)
		return -RDX_EPROTO;
	if (h->type == RDX_F_DATA) {
		if (h->len > max_data)
			return -RDX_EPROTO;
	} else {
		if (h->len > RDX_CTRL_MAX || h->plain_len != 0 ||
		    (h->flags & RDX_FL_COMPRESSED))
			return -RDX_EPROTO;
	}
	if (h->type == RDX_F_KEEPALIVE && h->len != 0)
		return -RDX_EPROTO;
	return 0;
}

bool rdx_list_encode(const struct rdx_list_entry *e, uint8_t *out, size_t cap,
		     size_t *used)
{
	uint8_t *p = out + *used;
	size_t extra = e->type == RDX_LIST_HASHED ? sizeof(e->hash) : 0;

	if (cap - *used < RDX_LIST_FIXED + (size_t)e->len + extra)
		return false;
	p[0] = e->type;
	rdx_put64(p + 1, e->size);
	rdx_put64(p + 9, (uint64_t)e->mtime);
	rdx_put16(p + 17, e->len);
	memcpy(p + RDX_LIST_FIXED, e->name, e->len);
	memcpy(p + RDX_LIST_FIXED + e->len, e->hash, extra);
	*used += RDX_LIST_FIXED + e->len + extra;
	return true;
}

/* A name as the tree format allows it: relative, no empty, "." or ".."
 * component, no NUL. */
static bool list_name_ok(const char *n, size_t len)
{
	size_t i = 0;

	if (!len || n[0] == '/' || memchr(n, '\0', len))
		return false;
	while (i < len) {
		const char *c = n + i, *slash = memchr(c, '/', len - i);
		size_t clen = slash ? (size_t)(slash - c) : len - i;

		if (!clen || (clen == 1 && c[0] == '.') ||
		    (clen == 2 && c[0] == '.' && c[1] == '.'))
			return false;
		i += clen + (slash ? 1 : 0);
		if (slash && i == len)
			return false; /* trailing slash */
	}
	return true;
}

int rdx_list_decode(const uint8_t *in, size_t len, size_t *off,
		    struct rdx_list_entry *e)
{
	const uint8_t *p = in + *off;
	size_t extra;

	if (len - *off < RDX_LIST_FIXED)
		return -RDX_EPROTO;
	e->type = p[0];
	e->size = rdx_get64(p + 1);
	e->mtime = (int64_t)rdx_get64(p + 9);
	e->len = rdx_get16(p + 17);
	extra = e->type == RDX_LIST_HASHED ? sizeof(e->hash) : 0;
	if (len - *off - RDX_LIST_FIXED < (size_t)e->len + extra || e->size > (uint64_t)INT64_MAX ||
	    (e->type != RDX_LIST_FILE && e->type != RDX_LIST_HASHED && e->type != RDX_LIST_DIR &&
	     e->type != RDX_LIST_OTHER))
		return -RDX_EPROTO;
	e->name = (const char *)p + RDX_LIST_FIXED;
	if (!list_name_ok(e->name, e->len))
		return -RDX_EPROTO;
	memcpy(e->hash, p + RDX_LIST_FIXED + e->len, extra);
	*off += RDX_LIST_FIXED + e->len + extra;
	return 0;
}

size_t rdx_hello_encode(const struct rdx_hello *m, uint8_t *out)
{
	memcpy(out, RDX_MAGIC, 4);
	rdx_put16(out + 4, m->version);
	rdx_put16(out + 6, 0);
	memcpy(out + 8, m->nonce, RDX_NONCE_LEN);
	memcpy(out + 8 + RDX_NONCE_LEN, m->share, RDX_PAKE_SHARE_LEN);
	if (!m->has_confirm)
		return RDX_HELLO_S_LEN;
	memcpy(out + RDX_HELLO_S_LEN, m->confirm, RDX_PAKE_CONFIRM_LEN);
	return RDX_HELLO_R_LEN;
}

int rdx_hello_decode(const uint8_t *in, size_t len, bool want_confirm,
		     struct rdx_hello *m)
{
	/* Check the magic and version before the length so that a future
	 * version with a longer HELLO is reported as such. */
	if (len < 8 || memcmp(in, RDX_MAGIC, 4) != 0)
		return -RDX_EPROTO;
	m->version = rdx_get16(in + 4);
	if (m->version != RDX_PROTO_VERSION)
		return -RDX_EVERSION;
	if (len != (want_confirm ? RDX_HELLO_R_LEN : RDX_HELLO_S_LEN) ||
	    rdx_get16(in + 6) != 0)
		return -RDX_EPROTO;
	memcpy(m->nonce, in + 8, RDX_NONCE_LEN);
	memcpy(m->share, in + 8 + RDX_NONCE_LEN, RDX_PAKE_SHARE_LEN);
	m->has_confirm = want_confirm;
	if (want_confirm)
		memcpy(m->confirm, in + RDX_HELLO_S_LEN, RDX_PAKE_CONFIRM_LEN);
	return 0;
}

void rdx_opts_encode(const struct rdx_opts_wire *o, uint8_t out[RDX_OPTS_LEN])
{
	rdx_put32(out, o->slot_size);
	rdx_put32(out + 4, o->slots);
	rdx_put16(out + 8, o->streams);
	out[10] = o->compress;
	out[11] = o->encrypt;
	rdx_put32(out + 12, o->flags);
	rdx_put64(out + 16, o->size);
}

size_t rdx_auth_encode(const struct rdx_auth *m, uint8_t *out)
{
	memcpy(out, m->confirm, RDX_PAKE_CONFIRM_LEN);
	memcpy(out + RDX_PAKE_CONFIRM_LEN, m->mac, RDX_MAC_LEN);
	rdx_opts_encode(&m->opts, out + RDX_PAKE_CONFIRM_LEN + RDX_MAC_LEN);
	return RDX_AUTH_LEN;
}

int rdx_auth_decode(const uint8_t *in, size_t len, struct rdx_auth *m)
{
	const uint8_t *o = in + RDX_PAKE_CONFIRM_LEN + RDX_MAC_LEN;

	if (len != RDX_AUTH_LEN)
		return -RDX_EPROTO;
	memcpy(m->confirm, in, RDX_PAKE_CONFIRM_LEN);
	memcpy(m->mac, in + RDX_PAKE_CONFIRM_LEN, RDX_MAC_LEN);
	memcpy(m->opts_raw, o, RDX_OPTS_LEN);
	m->opts.slot_size = rdx_get32(o);
	m->opts.slots = rdx_get32(o + 4);
	m->opts.streams = rdx_get16(o + 8);
	m->opts.compress = o[10];
	m->opts.encrypt = o[11];
	m->opts.flags = rdx_get32(o + 12);
	m->opts.size = rdx_get64(o + 16);
	if (m->opts.slot_size < RDX_MIN_SLOT || m->opts.slot_size > RDX_MAX_SLOT ||
	    m->opts.slot_size % RDX_MIN_SLOT || m->opts.streams == 0 ||
	    m->opts.streams > RDX_MAX_STREAMS || m->opts.encrypt > 1 ||
	    m->opts.compress > 22 ||
	    (m->opts.flags & ~(RDX_OPT_SIZE_KNOWN | RDX_OPT_TREE | RDX_OPT_SYNC | RDX_OPT_CHECKSUM |
				RDX_OPT_RESUME)) ||
	    ((m->opts.flags & RDX_OPT_SYNC) && !(m->opts.flags & RDX_OPT_TREE)) ||
	    ((m->opts.flags & RDX_OPT_RESUME) &&
	     (!(m->opts.flags & RDX_OPT_SIZE_KNOWN) || (m->opts.flags & RDX_OPT_TREE))) ||
	    ((m->opts.flags & RDX_OPT_CHECKSUM) && !(m->opts.flags & RDX_OPT_SYNC)) ||
	    (!(m->opts.flags & RDX_OPT_SIZE_KNOWN) && m->opts.size) ||
	    m->opts.size > (uint64_t)INT64_MAX)
		return -RDX_EPROTO;
	return 0;
}

void rdx_accept_wire_encode(const struct rdx_accept_wire *a,
			    uint8_t out[RDX_ACCEPT_LEN])
{
	rdx_put16(out, a->streams);
	out[2] = a->encrypt;
	out[3] = 0;
	rdx_put32(out + 4, 0);
}

size_t rdx_accept_encode(const struct rdx_accept *m, uint8_t *out)
{
	rdx_accept_wire_encode(&m->acc, out);
	memcpy(out + RDX_ACCEPT_LEN, m->mac, RDX_MAC_LEN);
	return RDX_ACCEPT_MSG_LEN;
}

int rdx_accept_decode(const uint8_t *in, size_t len, struct rdx_accept *m)
{
	if (len != RDX_ACCEPT_MSG_LEN)
		return -RDX_EPROTO;
	memcpy(m->raw, in, RDX_ACCEPT_LEN);
	m->acc.streams = rdx_get16(in);
	m->acc.encrypt = in[2];
	m->acc.reserved = in[3];
	m->acc.reserved2 = rdx_get32(in + 4);
	memcpy(m->mac, in + RDX_ACCEPT_LEN, RDX_MAC_LEN);
	if (m->acc.streams == 0 || m->acc.streams > RDX_MAX_STREAMS ||
	    m->acc.encrypt > 1 || m->acc.reserved || m->acc.reserved2)
		return -RDX_EPROTO;
	return 0;
}

size_t rdx_join_encode(const struct rdx_join *m, uint8_t *out)
{
	memcpy(out, RDX_MAGIC, 4);
	rdx_put16(out + 4, m->version);
	rdx_put16(out + 6, m->index);
	memcpy(out + 8, m->nonce_r, RDX_NONCE_LEN);
	memcpy(out + 40, m->mac, RDX_MAC_LEN);
	return RDX_JOIN_LEN;
}

int rdx_join_decode(const uint8_t *in, size_t len, struct rdx_join *m)
{
	if (len != RDX_JOIN_LEN || memcmp(in, RDX_MAGIC, 4) != 0)
		return -RDX_EPROTO;
	m->version = rdx_get16(in + 4);
	if (m->version != RDX_PROTO_VERSION)
		return -RDX_EVERSION;
	m->index = rdx_get16(in + 6);
	if (m->index == 0 || m->index >= RDX_MAX_STREAMS)
		return -RDX_EPROTO;
	memcpy(m->nonce_r, in + 8, RDX_NONCE_LEN);
	memcpy(m->mac, in + 40, RDX_MAC_LEN);
	return 0;
}

size_t rdx_eos_encode(const struct rdx_eos *m, uint8_t *out)
{
	rdx_put64(out, m->total);
	rdx_put64(out + 8, m->nchunks);
	memcpy(out + 16, m->hash, RDX_HASH_LEN);
	return RDX_EOS_LEN;
}

int rdx_eos_decode(const uint8_t *in, size_t len, struct rdx_eos *m)
{
	if (len != RDX_EOS_LEN)
		return -RDX_EPROTO;
	m->total = rdx_get64(in);
	m->nchunks = rdx_get64(in + 8);
	memcpy(m->hash, in + 16, RDX_HASH_LEN);
	/* Every chunk but an empty stream carries at least one byte. */
	if (m->nchunks > m->total || (m->total && !m->nchunks) ||
	    m->total > (uint64_t)INT64_MAX)
		return -RDX_EPROTO;
	return 0;
}

size_t rdx_done_encode(const struct rdx_done *m, uint8_t *out)
{
	rdx_put64(out, m->total);
	memcpy(out + 8, m->hash, RDX_HASH_LEN);
	return RDX_DONE_LEN;
}

int rdx_done_decode(const uint8_t *in, size_t len, struct rdx_done *m)
{
	if (len != RDX_DONE_LEN)
		return -RDX_EPROTO;
	m->total = rdx_get64(in);
	memcpy(m->hash, in + 8, RDX_HASH_LEN);
	return 0;
}

size_t rdx_errmsg_encode(uint32_t code, const char *text, uint8_t *out)
{
	size_t n = strlen(text);

	if (n > RDX_ERRTEXT_MAX)
		n = RDX_ERRTEXT_MAX;
	rdx_put32(out, code);
	memcpy(out + 4, text, n);
	return 4 + n;
}

int rdx_errmsg_decode(const uint8_t *in, size_t len, struct rdx_errmsg *m)
{
	size_t i, n;

	if (len < 4 || len > 4 + RDX_ERRTEXT_MAX)
		return -RDX_EPROTO;
	m->code = rdx_get32(in);
	n = len - 4;
	for (i = 0; i < n; i++) {
		uint8_t c = in[4 + i];

		m->text[i] = (c >= 0x20 && c < 0x7f) ? (char)c : '?';
	}
	m->text[n] = '\0';
	return 0;
}
