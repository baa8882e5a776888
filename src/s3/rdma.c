/* S3 over RDMA: the login both ends share, how a client reads an answer,
 * and the client's connection (see rdma.h). */
#include "s3/rdma.h"

#include "core/be.h"
#include "core/err.h"
#include "core/io.h"
#include "core/proto.h"
#include "core/units.h"
#include "core/verbs/verbs.h"

#include <errno.h>
#include <inttypes.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

int s3_rdma_mode_parse(const char *s, enum s3_rdma_mode *out)
{
	if (!strcmp(s, "auto"))
		*out = S3_RDMA_AUTO;
	else if (!strcmp(s, "on"))
		*out = S3_RDMA_ON;
	else if (!strcmp(s, "off"))
		*out = S3_RDMA_OFF;
	else
		return -EINVAL;
	return 0;
}

/* ------------------------------------------------------------- login */

#define HELLO_FIXED (4 + 2 + 2 + S3_RDMA_NONCE + 8 + 8 + 4)

size_t s3_rdma_hello_encode(const struct s3_rdma_hello *h, uint8_t *out)
{
	size_t kl = strlen(h->access_key);

	memcpy(out, "RDS3", 4);
	rdx_put16(out + 4, h->version);
	rdx_put16(out + 6, (uint16_t)kl);
	memcpy(out + 8, h->nonce, S3_RDMA_NONCE);
	rdx_put64(out + 8 + S3_RDMA_NONCE, h->addr);
	rdx_put64(out + 16 + S3_RDMA_NONCE, h->len);
	rdx_put32(out + 24 + S3_RDMA_NONCE, h->rkey);
	memcpy(out + HELLO_FIXED, h->access_key, kl);
	return HELLO_FIXED + kl;
}

int s3_rdma_hello_decode(const uint8_t *in, size_t n, struct s3_rdma_hello *h)
{
	struct s3_rdma_hello r = { 0 };
	size_t kl, i;

	if (n < HELLO_FIXED || memcmp(in, "RDS3", 4))
		return -RDX_EPROTO;
	r.version = rdx_get16(in + 4);
	if (r.version != S3_RDMA_VERSION)
		return -RDX_EVERSION;
	kl = rdx_get16(in + 6);
	if (kl > S3_RDMA_KEY_MAX || n != HELLO_FIXED + kl)
		return -RDX_EPROTO;
	memcpy(r.nonce, in + 8, S3_RDMA_NONCE);
	r.addr = rdx_get64(in + 8 + S3_RDMA_NONCE);
	r.len = rdx_get64(in + 16 + S3_RDMA_NONCE);
	r.rkey = rdx_get32(in + 24 + S3_RDMA_NONCE);
	if (!r.len || r.addr > UINT64_MAX - r.len)
		return -RDX_EPROTO;
	for (i = 0; i < kl; i++) {
		uint8_t c = in[HELLO_FIXED + i];

		if (c <= 0x20 || c >= 0x7f)
			return -RDX_EPROTO;
		r.access_key[i] = (char)c;
	}
	*h = r;
	return 0;
}

void s3_rdma_proof(const char *secret, const char *role, const uint8_t *hello,
		   size_t hlen, const uint8_t nonce[S3_RDMA_NONCE],
		   uint8_t out[S3_RDMA_MAC])
{
	static const char label[] = "rds3-rdma-login-1";
	size_t sl = strlen(secret);
	unsigned char k[32];
	unsigned kl = sizeof(k), ol = S3_RDMA_MAC;
	char *aws4 = malloc(sl + 5);

	/* Out of memory: a proof nobody can match, never a weak one. */
	memset(out, 0, S3_RDMA_MAC);
	if (!aws4)
		return;
	memcpy(aws4, "AWS4", 4);
	memcpy(aws4 + 4, secret, sl + 1);
	if (!HMAC(EVP_sha256(), aws4, (int)(sl + 4), (const unsigned char *)label,
		  sizeof(label) - 1, k, &kl)) {
		OPENSSL_cleanse(aws4, sl + 4);
		free(aws4);
		return;
	}
	OPENSSL_cleanse(aws4, sl + 4);
	free(aws4);
	{
		/* role, its NUL, the HELLO, the nonce: one message. */
		uint8_t msg[16 + S3_RDMA_HELLO_MAX + S3_RDMA_NONCE];
		size_t rl = strlen(role) + 1;

		if (rl <= 16 && hlen <= S3_RDMA_HELLO_MAX) {
			memcpy(msg, role, rl);
			memcpy(msg + rl, hello, hlen);
			memcpy(msg + rl + hlen, nonce, S3_RDMA_NONCE);
			HMAC(EVP_sha256(), k, (int)kl, msg, rl + hlen + S3_RDMA_NONCE, out, &ol);
		}
	}
	OPENSSL_cleanse(k, sizeof(k));
}

int s3_rdma_send(struct rdx_conn *c, unsigned type, const void *p, size_t n)
{
	struct rdx_frame_hdr h = { .type = (uint8_t)type, .len = (uint32_t)n };

	if (n > RDX_CTRL_MAX)
		return -EINVAL;
	return c->ops->send(c, &h, p);
}

int s3_rdma_recv(struct rdx_conn *c, unsigned *type, void *p, size_t cap,
		 size_t *n)
{
	uint8_t hb[RDX_HDR_LEN];
	struct rdx_frame_hdr h;
	int ret = c->ops->recv(c, hb, sizeof(hb));

	if (ret)
		return ret;
	if (rdx_hdr_decode(hb, 0, &h) || h.type == RDX_F_DATA || h.len > cap)
		return -RDX_EPROTO;
	if (h.len && (ret = c->ops->recv(c, p, h.len)))
		return ret == RDX_XPORT_EOF ? -RDX_ECONNECT : ret;
	*type = h.type;
	*n = h.len;
	return 0;
}

/* ----------------------------------------------------- what came back */

bool s3_rdma_decline_code(const char *code)
{
	return !strcmp(code, "S3InvalidRdmaToken") || !strcmp(code, "S3RdmaNotSupported") ||
	       !strcmp(code, "S3RdmaIoError");
}

/* A decimal count, all of the value: 0, or -1. */
static int count(const char *s, uint64_t *v)
{
	uint64_t x = 0;

	if (!*s)
		return -1;
	for (; *s; s++) {
		if (*s < '0' || *s > '9' || x > (UINT64_MAX - 9) / 10)
			return -1;
		x = x * 10 + (uint64_t)(*s - '0');
	}
	*v = x;
	return 0;
}

enum s3_rdma_verdict s3_rdma_verdict(bool get, long status, const char *code,
				     const char *reply, const char *moved,
				     uint64_t body, uint64_t *bytes)
{
	uint64_t r = 0;

	/* A PUT's Content-MD5 checked against the empty HTTP body: a server
	 * that ignored the token (BadDigest) declined it just the same. */
	if (status < 200 || status > 299)
		return s3_rdma_decline_code(code) || (!get && !strcmp(code, "BadDigest"))
			       ? S3_RDMA_DECLINED
			       : S3_RDMA_FAILED;
	if (reply && count(reply, &r))
		return S3_RDMA_BAD;
	if (reply && r == 501) {
		/* Declined, yet a GET may have come with its body. */
		if (moved)
			return S3_RDMA_BAD;
		return get && body ? S3_RDMA_IGNORED : S3_RDMA_DECLINED;
	}
	if (reply && (r < 200 || r > 299))
		return S3_RDMA_BAD;
	if (moved) {
		if (count(moved, bytes) || body)
			return S3_RDMA_BAD; /* both ways at once, or junk */
		return S3_RDMA_DONE;
	}
	if (reply)
		return S3_RDMA_BAD; /* a success that does not say how much */
	/* No RDMA header at all: a server that ignored the token.  A GET's
	 * body is the data (checked as any other); a PUT stored the empty
	 * body it saw, which the plain request now replaces. */
	return get ? S3_RDMA_IGNORED : S3_RDMA_DECLINED;
}

/* ----------------------------------------------------------- client */

struct s3_rdma {
	struct rdx_conn *conn; /* rc */
	struct rdx_verbs_mr *mr;
	struct s3_rdma_dc *dc; /* dc */
	void *buf;
	size_t cap;
	struct s3_rdma_token base; /* every token's fields but rsize */
};

/* cfg->host ("host", "host:port", "[v6]" or "[v6]:port") into host and
 * port, the scheme's default port when none is given. */
static int split_host(const struct s3_config *cfg, char *host, size_t hl, char *port,
		      size_t pl)
{
	const char *h = cfg->host, *colon;
	size_t n;

	if (*h == '[') {
		const char *end = strchr(h, ']');

		if (!end)
			return -EINVAL;
		n = (size_t)(end - h - 1);
		colon = end[1] == ':' ? end + 1 : NULL;
		h++;
	} else {
		colon = strrchr(h, ':');
		n = colon ? (size_t)(colon - h) : strlen(h);
	}
	if (!n || n >= hl)
		return -EINVAL;
	memcpy(host, h, n);
	host[n] = '\0';
	snprintf(port, pl, "%s", colon ? colon + 1 : cfg->https ? "443" : "80");
	/* Behind a proxy or load balancer, the server's RDMA port may be
	 * another number than the one HTTP reaches. */
	if (getenv("RDS3_RDMA_PORT") && *getenv("RDS3_RDMA_PORT"))
		snprintf(port, pl, "%s", getenv("RDS3_RDMA_PORT"));
	return 0;
}

/* The login did not complete: why, from the transport or its error. */
static int lost(struct s3_rdma *r, int ret, char *why, size_t wl)
{
	snprintf(why, wl, "the login did not complete: %s",
		 r->conn->why[0] ? r->conn->why
		 : ret == RDX_XPORT_EOF ? "the server closed the connection"
					: rdx_strerror(ret));
	return ret == RDX_XPORT_EOF ? -RDX_ECONNECT : ret;
}

/* The server's next answer, of type want and n bytes (an ERROR is its
 * refusal, said in why).  Returns 0, or an error with why filled. */
static int answer(struct s3_rdma *r, unsigned want, uint8_t *in, size_t cap, size_t n,
		  char *why, size_t wl)
{
	unsigned type;
	size_t got;
	int ret = s3_rdma_recv(r->conn, &type, in, cap - 1, &got);

	if (ret)
		return lost(r, ret, why, wl);
	if (type == RDX_F_ERROR) {
		in[got] = '\0';
		snprintf(why, wl, "the server refused the login: %s", (char *)in);
		return -RDX_EAUTH;
	}
	if (type != want || got != n) {
		snprintf(why, wl, "the server's answer to the login is malformed");
		return -RDX_EPROTO;
	}
	return 0;
}

static int login(struct s3_rdma *r, const struct s3_config *cfg, char *why, size_t wl)
{
	struct s3_rdma_hello h = { .version = S3_RDMA_VERSION, .addr = r->base.raddr,
				   .len = r->cap, .rkey = r->base.rkey };
	const char *secret = cfg->no_sign ? "" : cfg->secret_key;
	uint8_t hb[S3_RDMA_HELLO_MAX], in[RDX_CTRL_MAX], mac[S3_RDMA_MAC];
	size_t hl;
	int ret;

	if (!cfg->no_sign && strlen(cfg->access_key) > S3_RDMA_KEY_MAX) {
		snprintf(why, wl, "the access key id is longer than %u characters",
			 S3_RDMA_KEY_MAX);
		return -RDX_EAUTH;
	}
	snprintf(h.access_key, sizeof(h.access_key), "%s", cfg->no_sign ? "" : cfg->access_key);
	if (getrandom(h.nonce, sizeof(h.nonce), 0) != (ssize_t)sizeof(h.nonce))
		return -errno;
	hl = s3_rdma_hello_encode(&h, hb);
	if ((ret = s3_rdma_send(r->conn, RDX_F_HELLO, hb, hl)))
		return lost(r, ret, why, wl);
	if ((ret = answer(r, RDX_F_AUTH, in, sizeof(in), S3_RDMA_NONCE + S3_RDMA_MAC, why, wl)))
		return ret;
	s3_rdma_proof(secret, "server", hb, hl, in, mac);
	if (CRYPTO_memcmp(mac, in + S3_RDMA_NONCE, S3_RDMA_MAC)) {
		snprintf(why, wl, "the server could not prove it holds the secret key");
		return -RDX_EAUTH;
	}
	s3_rdma_proof(secret, "client", hb, hl, in, mac);
	if ((ret = s3_rdma_send(r->conn, RDX_F_AUTH, mac, sizeof(mac))))
		return lost(r, ret, why, wl);
	return answer(r, RDX_F_ACCEPT, in, sizeof(in), 0, why, wl);
}

int s3_rdma_open(const struct s3_config *cfg, const struct s3_rdma_how *how, size_t cap,
		 uint64_t timeout_ms, const atomic_int *stop, struct s3_rdma **out,
		 char *why, size_t whylen)
{
	struct rdx_net_opts no = { .timeout_ms = timeout_ms };
	const char *nodev = rdx_verbs_unavailable();
	struct s3_rdma *r;
	char host[256], port[16];
	int ret, last = 0;

	*out = NULL;
	if (nodev) {
		snprintf(why, whylen, "%s", nodev);
		return -RDX_ENOTSUP;
	}
	if (split_host(cfg, host, sizeof(host), port, sizeof(port))) {
		snprintf(why, whylen, "cannot tell the endpoint's host from '%s'", cfg->host);
		return -EINVAL;
	}
	r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	r->cap = cap;
	r->buf = aligned_alloc(4096, (cap + 4095) & ~(size_t)4095);
	if (!r->buf) {
		free(r);
		return -ENOMEM;
	}
	if (how && how->dc) {
		ret = s3_rdma_dc_open(host, r->buf, cap, how->dc_key, &r->dc, &r->base, why, whylen);
		if (ret)
			goto fail;
		*out = r;
		return 0;
	}
	ret = rdx_xport_verbs.connect(&no, host, port, rdx_now_ns() + timeout_ms * 1000000,
				      stop, &last, &r->conn);
	if (ret) {
		snprintf(why, whylen, "nothing answers over RDMA at %s port %s%s%s", host, port,
			 last ? ": " : "", last ? strerror(last) : "");
		r->conn = NULL;
		goto fail;
	}
	/* A lossy link can take longer than the connect did (each lost SEND
	 * waits out RC's retransmission timer): the longer bound. */
	rdx_xport_verbs.set_deadline(r->conn, rdx_now_ns() +
				     (timeout_ms > S3_RDMA_LOGIN_MS ? timeout_ms : S3_RDMA_LOGIN_MS) * 1000000,
				     stop);
	ret = rdx_verbs_reg(r->conn, r->buf, cap, true, true, &r->mr);
	if (ret) {
		snprintf(why, whylen, "%s", r->conn->why);
		goto fail;
	}
	{
		struct rdx_verbs_remote d;
		struct rdx_verbs_qpaddr self;

		rdx_verbs_desc(r->mr, &d);
		if ((ret = rdx_verbs_qpaddr(r->conn, false, &self))) {
			snprintf(why, whylen, "the device does not say where this queue pair is");
			goto fail;
		}
		r->base = (struct s3_rdma_token){ .raddr = d.addr, .rkey = d.rkey,
						  .lid = self.lid, .qpn = self.qpn,
						  .has_gid = self.has_gid };
		memcpy(r->base.gid, self.gid, 16);
	}
	if ((ret = login(r, cfg, why, whylen)))
		goto fail;
	rdx_xport_verbs.set_deadline(r->conn, 0, stop);
	*out = r;
	return 0;
fail:
	s3_rdma_close(r);
	return ret;
}

void s3_rdma_close(struct s3_rdma *r)
{
	if (!r)
		return;
	s3_rdma_dc_close(r->dc);
	if (r->conn) {
		/* The MR first: its protection domain goes with the last
		 * connection on the device. */
		r->conn->ops->shutdown(r->conn);
		rdx_verbs_dereg(r->mr);
		r->conn->ops->close(r->conn);
	}
	free(r->buf);
	free(r);
}

void *s3_rdma_buf(const struct s3_rdma *r, size_t *cap)
{
	*cap = r->cap;
	return r->buf;
}

int s3_rdma_token(const struct s3_rdma *r, size_t len,
		  char out[S3_RDMA_TOKEN_LEN + 1])
{
	struct s3_rdma_token t = r->base;

	if (!len || len > r->cap || len > UINT32_MAX)
		return -EINVAL;
	t.rsize = (uint32_t)len;
	return s3_rdma_token_encode(&t, out);
}

const char *s3_rdma_agent(const struct s3_rdma *r)
{
	return r->dc ? S3_RDMA_DC_AGENT : S3_RDMA_AGENT;
}
