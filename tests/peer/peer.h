/*
 * What the hand-made peers (badpeer, evilpeer) share: byte order, full
 * socket I/O, and a sender's half of the version 2 handshake written out
 * from docs/PROTOCOL.md.  The only project code it uses is the SPAKE2
 * module (src/core/pake.c, libcrypto only), so the peers keep working
 * whatever state the rest of the code is in.
 *
 *   sender   -> HELLO "RDXF" | version u16 = 2 | 0 u16 | nonce_s[32] | pA[65]
 *   receiver -> HELLO "RDXF" | 2 | 0 | nonce_r[32] | pB[65] | cB[32]
 *   sender   -> AUTH  cA[32] | HMAC(Ke, "rdxfer-2 sender" | ns | nr | opts)[32] | opts[24]
 *
 * SPAKE2 runs with the identities "rdxfer-2 sender" / "rdxfer-2 receiver"
 * and nonce_s | nonce_r as associated data; Ke keys every MAC after it.
 */
#ifndef RDX_TEST_PEER_H
#define RDX_TEST_PEER_H

#include "core/pake.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PEER_HDR_LEN	 24
#define PEER_VERSION	 2
#define PEER_NONCE_LEN	 32
#define PEER_HELLO_S_LEN (8 + PEER_NONCE_LEN + RDX_PAKE_SHARE_LEN)
#define PEER_HELLO_R_LEN (PEER_HELLO_S_LEN + RDX_PAKE_CONFIRM_LEN)
#define PEER_OPTS_LEN	 24
#define PEER_AUTH_LEN	 (RDX_PAKE_CONFIRM_LEN + 32 + PEER_OPTS_LEN)
#define PEER_ACCEPT_LEN	 40

void put_be16(unsigned char *p, uint16_t v);
void put_be32(unsigned char *p, uint32_t v);
void put_be64(unsigned char *p, uint64_t v);
uint16_t get_be16(const unsigned char *p);
uint32_t get_be32(const unsigned char *p);

/* Sends all n bytes (no SIGPIPE); 0, or -1 with errno set. */
int send_full(int fd, const void *buf, size_t n);
/* Reads exactly n bytes; 0, or -1 on error, timeout or EOF. */
int recv_full(int fd, void *buf, size_t n);

/* One run of the handshake as one side sees it. */
struct peer_hs {
	uint8_t ns[PEER_NONCE_LEN];
	uint8_t nr[PEER_NONCE_LEN];
	struct rdx_pake pake;			/* this side's half */
	uint8_t peer_share[RDX_PAKE_SHARE_LEN]; /* the other side's */
	struct rdx_pake_result r;		/* after the peer's share */
};

/* The associated data and identities rdxfer runs SPAKE2 with. */
void peer_hs_ctx(const struct peer_hs *h, uint8_t aad[2 * PEER_NONCE_LEN],
		 struct rdx_pake_ctx *ctx);

/* A sender's HELLO payload (PEER_HELLO_S_LEN bytes) with a fresh nonce
 * and a SPAKE2 share for key.  0 or -1. */
int peer_hello(struct peer_hs *h, const char *key, uint8_t *out);

/* Takes the receiver's HELLO payload: its nonce and share, then runs the
 * exchange to its end.  Returns 1 when its confirmation verifies (the
 * key was right), 0 when not, -1 for a malformed HELLO. */
int peer_hello_reply(struct peer_hs *h, const uint8_t *p, size_t len);

/* HMAC-SHA256(Ke, label | ns | nr | extra) into out.  0 or -1. */
int peer_mac(const struct peer_hs *h, const char *label, const void *extra,
	     size_t extra_len, uint8_t out[32]);

/* An AUTH payload (PEER_AUTH_LEN bytes): cA, the MAC over opts, opts. */
int peer_auth(const struct peer_hs *h, const uint8_t opts[PEER_OPTS_LEN],
	      uint8_t *out);

#endif
