/* rdxfer wire protocol, version 2: frame header and message codecs.
 * The full ladder and field tables are in docs/PROTOCOL.md.  The MACs
 * are keyed with the session key Ke that SPAKE2 (pake.h) yields, never
 * with the shared key itself.
 *
 *   sender   -> HELLO(version, nonce_s, pA)
 *   receiver -> HELLO(version, nonce_r, pB, cB)       sender checks cB
 *   sender   -> AUTH(cA, mac_s, opts)                 receiver checks cA, mac_s
 *   receiver -> ACCEPT(accept, mac_a)                 sender checks mac_a
 *   sender   -> JOIN(index, nonce_r, mac_j)           on streams 1..N-1
 *   receiver -> RESUME(bytes, xxh3-128)               --resume: what its partial has
 *   sender   -> RESUME_FROM(bytes, xxh3-128)          where the data starts
 *   sender   -> LIST_REQ(tops)                        --sync: the receiver's files?
 *   receiver -> LIST(records)... LIST_END             each RDX_LIST_WINDOW acked by
 *   sender   -> LIST_ACK                                the sender
 *   sender   -> DATA(seq, payload)...                 on any stream
 *   sender   -> EOS(total, nchunks, xxh3-128)         on stream 0, after all DATA
 *   receiver -> DONE(total, xxh3-128)                 after everything is written
 *   either   -> ERROR(code, text)                     at any time
 *   either   -> KEEPALIVE                             when idle
 *
 * Decoders never trust a length: every one checks the payload size first.
 */
#ifndef RDX_PROTO_H
#define RDX_PROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/pake.h"

#define RDX_PROTO_VERSION 2
#define RDX_MAGIC "RDXF"
#define RDX_NONCE_LEN 32
#define RDX_MAC_LEN 32
#define RDX_HASH_LEN 16
#define RDX_TAG_LEN 16
#define RDX_HDR_LEN 24
#define RDX_CTRL_MAX 4096 /* largest control payload */
#define RDX_ERRTEXT_MAX 512
#define RDX_MAX_STREAMS 64
#define RDX_MIN_SLOT (4u << 10)
#define RDX_MAX_SLOT (64u << 20)

enum rdx_ftype {
	RDX_F_HELLO = 1,
	RDX_F_AUTH,
	RDX_F_ACCEPT,
	RDX_F_JOIN,
	RDX_F_DATA,
	RDX_F_EOS,
	RDX_F_DONE,
	RDX_F_ERROR,
	RDX_F_KEEPALIVE,
	RDX_F_LIST_REQ, /* --sync: sender asks for the receiver's files under its tops */
	RDX_F_LIST,	/* receiver: some of them (rdx_list_entry records) */
	RDX_F_LIST_ACK, /* sender: every RDX_LIST_WINDOW LISTs read */
	RDX_F_LIST_END, /* receiver: that was all */
	RDX_F_RESUME,	   /* --resume, receiver: what its partial has (rdx_done) */
	RDX_F_RESUME_FROM, /* sender: where the data starts (rdx_done) */
	RDX_F_MAX
};

enum rdx_fflags {
	RDX_FL_COMPRESSED = 1u << 0,
	RDX_FL_SEALED = 1u << 1,
};

/* Host-order view of the 24-byte header. */
struct rdx_frame_hdr {
	uint8_t type;
	uint8_t flags;
	uint16_t stream;
	uint32_t len;	    /* payload bytes that follow */
	uint32_t plain_len; /* DATA: bytes after open/decompress */
	uint64_t seq;	    /* DATA: chunk number; sealed control: counter */
};

/* Options the sender proposes in AUTH. */
struct rdx_opts_wire {
	uint32_t slot_size;
	uint32_t slots;
	uint16_t streams;
	uint8_t compress; /* zstd level, 0 = off */
	uint8_t encrypt;  /* 1 = AES-256-GCM on every frame */
	uint32_t flags;	  /* RDX_OPT_* */
	uint64_t size;	  /* stream length when known */
};
#define RDX_OPT_SIZE_KNOWN 1u
#define RDX_OPT_TREE 2u /* the stream is a directory tree (src/core/tree.h) */
#define RDX_OPT_SYNC 4u /* with TREE: the sender wants the receiver's listing first */
#define RDX_OPT_CHECKSUM 8u /* with SYNC: files listed with their XXH3-128 */
#define RDX_OPT_RESUME 16u /* with SIZE_KNOWN, not TREE: continue a partial */
#define RDX_OPTS_LEN 24

/* What the receiver settles on, in ACCEPT. */
struct rdx_accept_wire {
	uint16_t streams;
	uint8_t encrypt;
	uint8_t reserved;
	uint32_t reserved2;
};
#define RDX_ACCEPT_LEN 8

struct rdx_hello {
	uint16_t version;
	uint8_t nonce[RDX_NONCE_LEN];
	uint8_t share[RDX_PAKE_SHARE_LEN];     /* pA or pB */
	uint8_t confirm[RDX_PAKE_CONFIRM_LEN]; /* receiver's HELLO only: cB */
	bool has_confirm;
};
#define RDX_HELLO_S_LEN (8 + RDX_NONCE_LEN + RDX_PAKE_SHARE_LEN)
#define RDX_HELLO_R_LEN (RDX_HELLO_S_LEN + RDX_PAKE_CONFIRM_LEN)

struct rdx_auth {
	uint8_t confirm[RDX_PAKE_CONFIRM_LEN]; /* cA */
	uint8_t mac[RDX_MAC_LEN];
	uint8_t opts_raw[RDX_OPTS_LEN]; /* the bytes the MAC covers */
	struct rdx_opts_wire opts;
};
#define RDX_AUTH_LEN (RDX_PAKE_CONFIRM_LEN + RDX_MAC_LEN + RDX_OPTS_LEN)

struct rdx_accept {
	uint8_t raw[RDX_ACCEPT_LEN];
	struct rdx_accept_wire acc;
	uint8_t mac[RDX_MAC_LEN];
};
#define RDX_ACCEPT_MSG_LEN (RDX_ACCEPT_LEN + RDX_MAC_LEN)

struct rdx_join {
	uint16_t version;
	uint16_t index;
	uint8_t nonce_r[RDX_NONCE_LEN];
	uint8_t mac[RDX_MAC_LEN];
};
#define RDX_JOIN_LEN 72

struct rdx_eos {
	uint64_t total;
	uint64_t nchunks;
	uint8_t hash[RDX_HASH_LEN];
};
#define RDX_EOS_LEN 32

/* DONE: the bytes received and their hash.  RESUME and RESUME_FROM
 * (--resume) have the same form: the bytes from the start of the file the
 * receiver's partial has, or the sender starts after (that many or 0), and
 * the XXH3-128 of those bytes as each side read them. */
struct rdx_done {
	uint64_t total;
	uint8_t hash[RDX_HASH_LEN];
};
#define RDX_DONE_LEN 24

struct rdx_errmsg {
	uint32_t code;			/* positive RDX_E* or errno */
	char text[RDX_ERRTEXT_MAX + 1]; /* printable ASCII only, NUL-terminated */
};

/* Encodes h into 24 bytes. */
void rdx_hdr_encode(const struct rdx_frame_hdr *h, uint8_t out[RDX_HDR_LEN]);

/* Decodes and checks a header: known type, known flags, zero reserved
 * field, and len within the limit for its type (max_data for DATA).
 * Returns 0 or -RDX_EPROTO. */
int rdx_hdr_decode(const uint8_t in[RDX_HDR_LEN], uint32_t max_data,
		   struct rdx_frame_hdr *h);

/* Each encoder writes its message into out (sized by the _LEN macros) and
 * returns the length; each decoder returns 0, -RDX_EPROTO for a malformed
 * payload or -RDX_EVERSION for a version it does not speak. */
size_t rdx_hello_encode(const struct rdx_hello *m, uint8_t *out);
int rdx_hello_decode(const uint8_t *in, size_t len, bool want_confirm,
		     struct rdx_hello *m);

void rdx_opts_encode(const struct rdx_opts_wire *o, uint8_t out[RDX_OPTS_LEN]);
size_t rdx_auth_encode(const struct rdx_auth *m, uint8_t *out);
int rdx_auth_decode(const uint8_t *in, size_t len, struct rdx_auth *m);

void rdx_accept_wire_encode(const struct rdx_accept_wire *a,
			    uint8_t out[RDX_ACCEPT_LEN]);
size_t rdx_accept_encode(const struct rdx_accept *m, uint8_t *out);
int rdx_accept_decode(const uint8_t *in, size_t len, struct rdx_accept *m);

size_t rdx_join_encode(const struct rdx_join *m, uint8_t *out);
int rdx_join_decode(const uint8_t *in, size_t len, struct rdx_join *m);

size_t rdx_eos_encode(const struct rdx_eos *m, uint8_t *out);
int rdx_eos_decode(const uint8_t *in, size_t len, struct rdx_eos *m);

size_t rdx_done_encode(const struct rdx_done *m, uint8_t *out);
int rdx_done_decode(const uint8_t *in, size_t len, struct rdx_done *m);

/* Text longer than RDX_ERRTEXT_MAX is cut. */
/* What a receiver has in a LIST frame, named as the sender names it
 * ("top/dir/file"): type u8 (RDX_LIST_FILE, _DIR, _OTHER), size u64,
 * mtime s64 (seconds), name length u16, name (no NUL, no empty, "." or
 * ".." component, not absolute). */
enum {
	RDX_LIST_FILE = 'f',
	RDX_LIST_HASHED = 'F', /* a file, its XXH3-128 (16 bytes) after the name */
	RDX_LIST_DIR = 'd',
	RDX_LIST_OTHER = 'o',
};
struct rdx_list_entry {
	uint8_t type;
	uint8_t hash[16]; /* RDX_LIST_HASHED only */
	uint64_t size;
	int64_t mtime;
	uint16_t len;
	const char *name; /* not NUL-terminated: len bytes */
};
#define RDX_LIST_FIXED 19
#define RDX_LIST_WINDOW 32 /* LISTs in flight before the receiver waits */
/* LIST and LIST_REQ payloads: a control frame, less the tag it may carry. */
#define RDX_LIST_MAX (RDX_CTRL_MAX - RDX_TAG_LEN)

/* Appends e at out[*used..cap); returns false when it does not fit. */
bool rdx_list_encode(const struct rdx_list_entry *e, uint8_t *out, size_t cap,
		     size_t *used);
/* Decodes the record at in[*off..len) and advances *off.  Returns 0, or
 * -RDX_EPROTO for a short or malformed record. */
int rdx_list_decode(const uint8_t *in, size_t len, size_t *off,
		    struct rdx_list_entry *e);

size_t rdx_errmsg_encode(uint32_t code, const char *text, uint8_t *out);
/* Non-printable bytes in the peer's text become '?'. */
int rdx_errmsg_decode(const uint8_t *in, size_t len, struct rdx_errmsg *m);

/* Most bytes a DATA payload may take for a given slot size. */
uint32_t rdx_data_max(uint32_t slot_size);

#endif
