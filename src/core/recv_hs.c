/* The receiving side's handshake: a listener takes connections until one
 * passes (strays and wrong keys logged and dropped, the gate in front) or
 * --wait runs out; a dialer connects once.  Then the session is settled
 * with that sender (ACCEPT). */
#include "core/recv_int.h"

/* Why a sender's handshake was rejected: logged by a listener, which then
 * waits for the next sender; recorded by a dialer, which has no other. */
struct hs_err {
	int err;
	bool wrong_key; /* the sender refused our proof, or we its */
	char why[600];
};

static int hs_reject(struct hs_err *e, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int hs_reject(struct hs_err *e, int err, const char *fmt, ...)
{
	va_list ap;

	e->err = err;
	va_start(ap, fmt);
	vsnprintf(e->why, sizeof(e->why), fmt, ap);
	va_end(ap);
	return 1;
}

/* HELLO in, HELLO with our SPAKE2 share and confirmation out, AUTH in and
 * checked: its confirmation is the one guess the connection gets, its MAC
 * (keyed with the session key) covers the options.  Returns 0 when the
 * sender proved the key (auth filled), 1 when the connection was rejected
 * (closed, e says why), or a recorded error that ends rdrecv (the
 * connection closed). */
static int check_sender(struct rdx_session *s, struct rdx_conn *c,
			struct rdx_auth *auth, struct hs_err *e)
{
	struct rdx_hello hello;
	struct rdx_pake_result r = { 0 };
	uint8_t peer[RDX_PAKE_SHARE_LEN];
	struct rdx_errmsg em;
	struct rdx_frame_hdr h;
	uint8_t buf[RDX_CTRL_MAX + RDX_TAG_LEN];
	const char *why = NULL;
	bool ok;
	int ret;

	ret = sess_recv_ctrl(s, c, &h, buf, false, &em);
	if (!ret && h.type != RDX_F_HELLO)
		ret = -RDX_EPROTO;
	if (!ret)
		ret = rdx_hello_decode(buf, h.len, false, &hello);
	if (ret == -RDX_EVERSION) {
		char text[96];

		snprintf(text, sizeof(text), "unsupported protocol version %u (this rdrecv speaks %u)",
			 hello.version, RDX_PROTO_VERSION);
		link_reject(c, RDX_EVERSION, text);
		return hs_reject(e, -RDX_EVERSION, "%s", text);
	}
	if (ret)
		why = ret == -RDX_EPROTO ? "not an rdxfer sender" : link_hs_reason(ret);
	if (!ret) {
		memcpy(s->nonce_s, hello.nonce, RDX_NONCE_LEN);
		if (rdx_random(s->nonce_r, RDX_NONCE_LEN) ||
		    rdx_pake_start_w(&s->pake, RDX_PAKE_B, s->w)) {
			c->ops->close(c);
			return sess_fail(s, -EIO, "cannot start the key exchange");
		}
		/* Our HELLO is built in the sender's: its share goes to
		 * the exchange first. */
		memcpy(hello.nonce, s->nonce_r, RDX_NONCE_LEN);
		memcpy(peer, hello.share, RDX_PAKE_SHARE_LEN);
		memcpy(hello.share, s->pake.share, RDX_PAKE_SHARE_LEN);
		ret = sess_pake_finish(s, peer, &r);
		if (ret && sess_error(s)) {
			c->ops->close(c);
			return ret;
		}
		if (ret)
			why = "not an rdxfer sender";
	}
	if (!ret) {
		memcpy(hello.confirm, r.conf_b, RDX_PAKE_CONFIRM_LEN);
		hello.has_confirm = true;
		h = (struct rdx_frame_hdr){ .type = RDX_F_HELLO };
		h.len = (uint32_t)rdx_hello_encode(&hello, buf);
		ret = c->ops->send(c, &h, buf);
		if (!ret)
			ret = sess_recv_ctrl(s, c, &h, buf, false, &em);
		if (!ret && (h.type != RDX_F_AUTH || rdx_auth_decode(buf, h.len, auth)))
			ret = -RDX_EPROTO;
		if (ret)
			why = ret == -RDX_EPROTO ? "malformed authentication" : link_hs_reason(ret);
	}
	if (ret)
		rdx_pake_result_clear(&r);
	if (ret == -RDX_EINTR) {
		c->ops->close(c);
		return sess_fail(s, -RDX_EINTR, "interrupted");
	}
	if (ret == -RDX_EREMOTE) {
		/* The sender refused us (a wrong key shows up here). */
		c->ops->close(c);
		e->wrong_key = em.code == RDX_EAUTH;
		return hs_reject(e, -RDX_EREMOTE, "sender: %s", em.text);
	}
	if (ret) {
		c->ops->close(c);
		return hs_reject(e, ret == RDX_XPORT_EOF ? -RDX_ECONNECT : ret, "%s", why);
	}
	ok = rdx_pake_confirm_ok(r.conf_a, auth->confirm);
	rdx_pake_result_clear(&r);
	if (!ok) {
		link_reject(c, RDX_EAUTH, "authentication failed (wrong key?)");
		e->wrong_key = true;
		return hs_reject(e, -RDX_EAUTH, "authentication failed (wrong key?)");
	}
	/* The key is proven: a MAC that fails now means the options were
	 * changed on the way. */
	if (!rdx_mac_check(&s->sk, RDX_LABEL_SENDER, s->nonce_s, s->nonce_r,
			   auth->opts_raw, RDX_OPTS_LEN, auth->mac)) {
		link_reject(c, RDX_EAUTH, "authentication failed: options altered on the way");
		return hs_reject(e, -RDX_EAUTH,
				 "authentication failed: the sender proved the key but its options "
				 "were altered on the way");
	}
	return 0;
}

/* The sender is authenticated: settle the options, create the output and
 * the slots, and answer ACCEPT.  From here on failures end rdrecv. */
static int accept_sender(struct receiver *x, struct rdx_conn *c,
			 const struct rdx_auth *auth)
{
	struct rdx_session *s = &x->s;
	const struct rdx_xfer_opts *o = s->o;
	struct rdx_accept acc = { 0 };
	struct rdx_frame_hdr h = { .type = RDX_F_ACCEPT };
	uint8_t buf[RDX_ACCEPT_MSG_LEN];
	int ret;

	s->streams[0].conn = c;
	s->nstreams = 1;
	s->opts = auth->opts;
	s->encrypt = auth->opts.encrypt || o->encrypt;
	acc.acc.streams = auth->opts.streams < o->streams ? auth->opts.streams
							  : (uint16_t)o->streams;
	acc.acc.encrypt = s->encrypt;
	ret = rx_prepare(x);
	if (ret)
		return ret;
	rdx_accept_wire_encode(&acc.acc, acc.raw);
	if (rdx_mac(&s->sk, RDX_LABEL_ACCEPT, s->nonce_s, s->nonce_r, acc.raw,
		    RDX_ACCEPT_LEN, acc.mac))
		return sess_fail(s, -EIO, "cannot compute MAC");
	h.len = (uint32_t)rdx_accept_encode(&acc, buf);
	ret = sess_send(&s->streams[0], &h, buf);
	if (ret)
		return sess_fail_conn(s, c, ret, "lost the connection to the sender");
	s->nstreams = acc.acc.streams;
	sess_log_settled(s, c->peer);
	return 0;
}

/* Finds the sender: a listener takes connections until one passes the
 * handshake (strays and wrong keys are logged and dropped) or --wait runs
 * out; a dialer connects once, and any failure ends it.  Then settles the
 * session with it (accept_sender).  Returns 0 or an error (recorded). */
int rx_meet_sender(struct receiver *x)
{
	struct rdx_session *s = &x->s;
	uint64_t wait = link_wait_deadline(s);

	for (;;) {
		struct hs_err e = { 0 };
		struct rdx_auth auth;
		struct rdx_conn *c;
		char peer[sizeof(c->peer)];
		int ret;

		ret = link_dials(s) ? link_dial(s, 0, &c) : link_accept(s, wait, true, &c);
		if (ret == -RDX_ETIMEOUT)
			return sess_fail(s, ret, "no authenticated sender within %g s (--wait)",
					 (double)s->o->wait_ms / 1000);
		if (ret)
			return ret;
		/* A rejected connection is gone by the time we say so. */
		memcpy(peer, c->peer, sizeof(peer));
		c->ops->set_deadline(c, link_hs_deadline(s, wait), s->o->interrupted);
		ret = check_sender(s, c, &auth, &e);
		if (ret == 0) {
			link_succeeded(s, peer);
			return accept_sender(x, c, &auth);
		}
		if (ret < 0)
			return ret;
		if (!link_dials(s)) {
			link_failed(s, peer, e.why);
			continue;
		}
		if (e.wrong_key)
			return sess_fail(s, -RDX_EAUTH, "authentication failed (wrong key?)");
		if (e.err == -RDX_EREMOTE)
			return sess_fail_peer(s, -RDX_EREMOTE, "%s", e.why);
		return sess_fail(s, e.err, "handshake with %s failed: %s", s->o->host, e.why);
	}
}
