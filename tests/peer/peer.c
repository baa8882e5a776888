#include "peer.h"

#include <errno.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>

void put_be16(unsigned char *p, uint16_t v)
{
	p[0] = (unsigned char)(v >> 8);
	p[1] = (unsigned char)v;
}

void put_be32(unsigned char *p, uint32_t v)
{
	put_be16(p, (uint16_t)(v >> 16));
	put_be16(p + 2, (uint16_t)v);
}

void put_be64(unsigned char *p, uint64_t v)
{
	put_be32(p, (uint32_t)(v >> 32));
	put_be32(p + 4, (uint32_t)v);
}

uint16_t get_be16(const unsigned char *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

uint32_t get_be32(const unsigned char *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
	       (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

int send_full(int fd, const void *buf, size_t n)
{
	const unsigned char *b = buf;

	while (n > 0) {
		ssize_t w = send(fd, b, n, MSG_NOSIGNAL);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -1;
		b += w;
		n -= (size_t)w;
	}
	return 0;
}

int recv_full(int fd, void *buf, size_t n)
{
	unsigned char *b = buf;

	while (n > 0) {
		ssize_t r = recv(fd, b, n, 0);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		b += r;
		n -= (size_t)r;
	}
	return 0;
}

void peer_hs_ctx(const struct peer_hs *h, uint8_t aad[2 * PEER_NONCE_LEN],
		 struct rdx_pake_ctx *ctx)
{
	memcpy(aad, h->ns, PEER_NONCE_LEN);
	memcpy(aad + PEER_NONCE_LEN, h->nr, PEER_NONCE_LEN);
	*ctx = (struct rdx_pake_ctx){
		.id_a = "rdxfer-2 sender",
		.id_a_len = 15,
		.id_b = "rdxfer-2 receiver",
		.id_b_len = 17,
		.aad = aad,
		.aad_len = 2 * PEER_NONCE_LEN,
	};
}

int peer_hello(struct peer_hs *h, const char *key, uint8_t *out)
{
	if (RAND_bytes(h->ns, PEER_NONCE_LEN) != 1 ||
	    rdx_pake_start(&h->pake, RDX_PAKE_A, key, strlen(key)))
		return -1;
	memcpy(out, "RDXF", 4);
	put_be16(out + 4, PEER_VERSION);
	put_be16(out + 6, 0);
	memcpy(out + 8, h->ns, PEER_NONCE_LEN);
	memcpy(out + 8 + PEER_NONCE_LEN, h->pake.share, RDX_PAKE_SHARE_LEN);
	return 0;
}

int peer_hello_reply(struct peer_hs *h, const uint8_t *p, size_t len)
{
	uint8_t aad[2 * PEER_NONCE_LEN];
	struct rdx_pake_ctx ctx;

	if (len != PEER_HELLO_R_LEN || memcmp(p, "RDXF", 4) ||
	    get_be16(p + 4) != PEER_VERSION)
		return -1;
	memcpy(h->nr, p + 8, PEER_NONCE_LEN);
	memcpy(h->peer_share, p + 8 + PEER_NONCE_LEN, RDX_PAKE_SHARE_LEN);
	peer_hs_ctx(h, aad, &ctx);
	if (rdx_pake_finish(&h->pake, &ctx, h->peer_share, &h->r))
		return -1;
	return rdx_pake_confirm_ok(h->r.conf_b, p + PEER_HELLO_S_LEN);
}

int peer_mac(const struct peer_hs *h, const char *label, const void *extra,
	     size_t extra_len, uint8_t out[32])
{
	unsigned char msg[64 + 2 * PEER_NONCE_LEN + 4096];
	size_t ll = strlen(label);
	unsigned int olen = 0;

	if (ll > 64 || extra_len > 4096)
		return -1;
	memcpy(msg, label, ll);
	memcpy(msg + ll, h->ns, PEER_NONCE_LEN);
	memcpy(msg + ll + PEER_NONCE_LEN, h->nr, PEER_NONCE_LEN);
	if (extra_len)
		memcpy(msg + ll + 2 * PEER_NONCE_LEN, extra, extra_len);
	if (!HMAC(EVP_sha256(), h->r.ke, RDX_PAKE_KEY_LEN, msg,
		  ll + 2 * PEER_NONCE_LEN + extra_len, out, &olen) ||
	    olen != 32)
		return -1;
	return 0;
}

int peer_auth(const struct peer_hs *h, const uint8_t opts[PEER_OPTS_LEN],
	      uint8_t *out)
{
	memcpy(out, h->r.conf_a, RDX_PAKE_CONFIRM_LEN);
	if (peer_mac(h, "rdxfer-2 sender", opts, PEER_OPTS_LEN,
		     out + RDX_PAKE_CONFIRM_LEN))
		return -1;
	memcpy(out + RDX_PAKE_CONFIRM_LEN + 32, opts, PEER_OPTS_LEN);
	return 0;
}
