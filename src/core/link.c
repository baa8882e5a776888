/* How a session's connections come to be, whichever side dials.
 *
 * Role and direction are independent: the sender dials (rdsend HOST PORT)
 * or listens (rdsend --server), and so does the receiver (rdrecv PORT,
 * rdrecv --connect HOST PORT).  On stream 0 the sender always speaks first
 * (HELLO), whoever dialed.  On every extra stream the side that dialed
 * proves the stream belongs to the session (JOIN) and the side that
 * listened checks it:
 *
 *   dialer                                         listener
 *     │ ── connect stream 0 ─────────────────────▶ │  (nothing created yet)
 *     │ ══ HELLO / HELLO / AUTH / ACCEPT ════════▶ │  send.c, recv.c
 *     │ ── connect stream i, JOIN {i, mac_j} ────▶ │  for i = 1..N-1
 *
 * A listener treats a connection that fails the handshake as a stray: it
 * is logged and dropped and the next one awaited.  A dialer has nobody
 * else to wait for: every failure ends it.
 */
#include "core/xfer_int.h"

#include "core/err.h"
#include "core/log.h"
#include "core/units.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

bool link_dials(const struct rdx_session *s)
{
	return s->o->host != NULL;
}

/* ---- listening: one transport, or both ---- */

struct dual_listener {
	struct rdx_listener base;
	struct rdx_listener *tcp;
	struct rdx_listener *rdma;
	bool turn; /* alternate which one is asked first */
};

static unsigned dual_port(struct rdx_listener *l)
{
	struct dual_listener *d = (struct dual_listener *)l;

	return d->tcp->ops->listen_port(d->tcp);
}

static int dual_accept(struct rdx_listener *l, const struct rdx_net_opts *o,
		       int wait_ms, struct rdx_conn **out)
{
	struct dual_listener *d = (struct dual_listener *)l;
	struct rdx_listener *first = d->turn ? d->rdma : d->tcp;
	struct rdx_listener *second = d->turn ? d->tcp : d->rdma;
	int ret;

	d->turn = !d->turn;
	ret = first->ops->accept(first, o, wait_ms / 2, out);
	if (ret != -EAGAIN)
		return ret;
	return second->ops->accept(second, o, wait_ms - wait_ms / 2, out);
}

static void dual_close(struct rdx_listener *l)
{
	struct dual_listener *d = (struct dual_listener *)l;

	d->tcp->ops->close_listener(d->tcp);
	d->rdma->ops->close_listener(d->rdma);
	free(d);
}

static const struct rdx_xport_ops dual_ops = {
	.name = "tcp+rdma",
	.listen_port = dual_port,
	.accept = dual_accept,
	.close_listener = dual_close,
};

/* Listens as sess_pick_transport decided: s->xp, or (auto on a host with
 * RDMA) TCP and rdma_cm on the same port number. */
static int listen_any(struct rdx_session *s, struct rdx_listener **out)
{
	struct dual_listener *d;
	char port[8];
	int ret;

	if (s->xp)
		return s->xp->listen(&s->net, s->o->port, out);
	/* TCP first (it picks the port when asked for 0), then rdma_cm on
	 * the same number; a peer of either kind finds us. */
	d = calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	d->base.ops = &dual_ops;
	ret = rdx_xport_tcp.listen(&s->net, s->o->port, &d->tcp);
	if (ret) {
		free(d);
		return ret;
	}
	snprintf(port, sizeof(port), "%u", d->tcp->ops->listen_port(d->tcp));
	ret = rdx_xport_verbs.listen(&s->net, port, &d->rdma);
	if (ret) {
		rdx_info(1, "transport: tcp only (cannot listen for RDMA on port %s: %s)",
			 port, rdx_strerror(ret));
		*out = d->tcp;
		free(d);
		return 0;
	}
	rdx_info(2, "listening for tcp and rdma on port %s", port);
	*out = &d->base;
	return 0;
}

int link_open(struct rdx_session *s)
{
	const struct rdx_xfer_opts *o = s->o;
	int ret;

	if (sess_pick_transport(s, !link_dials(s)))
		return sess_error(s);
	if (link_dials(s))
		return 0;
	ret = link_gate_new(&s->gate);
	if (ret)
		return sess_fail(s, ret, "out of memory");
	ret = listen_any(s, &s->lis);
	if (ret == -ENOENT)
		return sess_fail(s, -RDX_EUSAGE, "cannot listen on '%s': unknown address",
				 o->bind ? o->bind : "any");
	if (ret)
		return sess_fail(s, -RDX_ECONNECT, "cannot listen on port %s: %s",
				 o->port, rdx_strerror(ret));
	if (o->on_listen)
		o->on_listen(s->lis->ops->listen_port(s->lis), o->on_listen_arg);
	return 0;
}

void link_close(struct rdx_session *s)
{
	link_gate_free(s->gate);
	s->gate = NULL;
	if (s->lis)
		s->lis->ops->close_listener(s->lis);
	s->lis = NULL;
}

/* ---- dialing ---- */

/* --transport auto chose RDMA, but the peer may listen on TCP only (its
 * own choice, or its memlock limit): one attempt each way per round, until
 * one connects or the deadline passes.  Extra streams then follow stream
 * 0's transport. */
static int connect_either(struct rdx_session *s, uint64_t deadline, int *last,
			  struct rdx_conn **out)
{
	const struct rdx_xfer_opts *o = s->o;
	int ret;

	for (;;) {
		/* One attempt each (a deadline in the past means one), but a
		 * TCP handshake across a real link needs its round trip. */
		uint64_t step = rdx_now_ns() + 3000000000ull;

		if (step > deadline)
			step = deadline;
		ret = rdx_xport_verbs.connect(&s->net, o->host, o->port, 0,
					      o->interrupted, last, out);
		/* Refused, unreachable, unanswered, or an iWARP route: maybe
		 * TCP answers. */
		if (ret != -RDX_ECONNECT && ret != -RDX_ENOTSUP)
			return ret;
		ret = rdx_xport_tcp.connect(&s->net, o->host, o->port, step,
					    o->interrupted, last, out);
		if (ret == 0) {
			rdx_info(1, "transport: tcp: the %s does not answer over RDMA",
				 s->peer_role);
			s->xp = &rdx_xport_tcp;
			return 0;
		}
		if (ret != -RDX_ECONNECT || rdx_now_ns() >= deadline)
			return ret;
		usleep(100000);
	}
}

int link_dial(struct rdx_session *s, unsigned i, struct rdx_conn **out)
{
	const struct rdx_xfer_opts *o = s->o;
	uint64_t deadline = rdx_now_ns() + o->connect_timeout_ms * 1000000;
	int ret, last = 0;

	if (i == 0 && o->transport == RDX_TRANSPORT_AUTO && s->xp == &rdx_xport_verbs)
		ret = connect_either(s, deadline, &last, out);
	else
		ret = s->xp->connect(&s->net, o->host, o->port, deadline, o->interrupted,
				     &last, out);
	if (ret == -RDX_EINTR)
		return sess_fail(s, ret, "interrupted");
	if (ret == -RDX_ECONNECT && o->bind && (last == ENOENT || last == EADDRNOTAVAIL ||
						 last == EINVAL || last == EAFNOSUPPORT))
		return sess_fail(s, ret, "cannot bind to '%s': %s", o->bind,
				 last == ENOENT ? "unknown address" : rdx_strerror(last));
	if (ret == -RDX_ENOTSUP)
		return sess_fail(s, ret, "cannot connect to %s over RDMA: the route goes through an iWARP device, which is not supported",
				 o->host);
	if (ret == -RDX_ECONNECT)
		return sess_fail(s, ret, "cannot connect to %s port %s%s: %s",
				 o->host, o->port, i ? " (extra stream)" : "",
				 rdx_strerror(last));
	if (ret)
		return sess_fail(s, -RDX_ECONNECT, "cannot resolve '%s': %s",
				 o->host, ret == -ENOENT ? "unknown host" : rdx_strerror(ret));
	return 0;
}

/* ---- accepting ---- */

static bool interrupted(const struct rdx_session *s)
{
	return s->o->interrupted && atomic_load(s->o->interrupted);
}

/* What a listener gives one connection's handshake: --handshake-timeout,
 * else 10 s, or --timeout when that is less, so that strays cannot hold
 * it up for long. */
static uint64_t listen_hs_ms(const struct rdx_session *s)
{
	if (s->o->handshake_ms)
		return s->o->handshake_ms;
	return s->o->timeout_ms < LINK_HANDSHAKE_MS ? s->o->timeout_ms : LINK_HANDSHAKE_MS;
}

int link_accept(struct rdx_session *s, uint64_t deadline, bool gated, struct rdx_conn **c)
{
	struct rdx_net_opts hs = s->net;
	int ret;

	hs.timeout_ms = listen_hs_ms(s);
	if (gated && s->gate)
		return link_gate_accept(s, &hs, deadline, listen_hs_ms(s), c);
	do {
		if (interrupted(s))
			return sess_fail(s, -RDX_EINTR, "interrupted");
		if (deadline && rdx_now_ns() >= deadline)
			return -RDX_ETIMEOUT;
		ret = s->lis->ops->accept(s->lis, &hs, 200, c);
	} while (ret == -EAGAIN);
	if (ret)
		return sess_fail(s, -RDX_ECONNECT, "accept failed: %s", rdx_strerror(ret));
	rdx_info(2, "connection from %s", (*c)->peer);
	return 0;
}

uint64_t link_wait_deadline(const struct rdx_session *s)
{
	return s->o->wait_ms ? rdx_now_ns() + s->o->wait_ms * 1000000 : 0;
}

uint64_t link_hs_deadline(const struct rdx_session *s, uint64_t wait_deadline)
{
	uint64_t now = rdx_now_ns(), dl;

	/* A dialer has one peer and gives it --timeout; a listener gives
	 * each connection listen_hs_ms(), never past what is left of its
	 * wait. */
	if (link_dials(s))
		return now + s->o->timeout_ms * 1000000;
	dl = now + listen_hs_ms(s) * 1000000;
	if (wait_deadline && wait_deadline < dl)
		dl = wait_deadline;
	return dl;
}

void link_reject(struct rdx_conn *c, int code, const char *why)
{
	struct rdx_frame_hdr h = { .type = RDX_F_ERROR };
	uint8_t buf[4 + RDX_ERRTEXT_MAX];

	h.len = (uint32_t)rdx_errmsg_encode((uint32_t)code, why, buf);
	c->ops->send(c, &h, buf);
	c->ops->close_gently(c, 200);
}

const char *link_hs_reason(int ret)
{
	switch (ret) {
	case RDX_XPORT_EOF:
	case -RDX_ECONNECT:
		return "closed during the handshake";
	case -RDX_ETIMEOUT:
		return "handshake timed out";
	case -RDX_EVERSION:
		return "unsupported protocol version";
	default:
		return ret < 0 ? rdx_strerror(ret) : "handshake failed";
	}
}

/* ---- extra streams ---- */

static void join_index(unsigned i, uint8_t idx[2])
{
	idx[0] = (uint8_t)(i >> 8);
	idx[1] = (uint8_t)i;
}

/* Dialer: opens streams 1..N-1, each proving it belongs to this session. */
static int dial_streams(struct rdx_session *s)
{
	uint8_t buf[RDX_CTRL_MAX + RDX_TAG_LEN];
	unsigned i;
	int ret;

	for (i = 1; i < s->nstreams; i++) {
		struct rdx_join j = { .version = RDX_PROTO_VERSION,
				      .index = (uint16_t)i };
		struct rdx_frame_hdr h = { .type = RDX_F_JOIN };
		char why[96];
		uint8_t idx[2];

		ret = link_dial(s, i, &s->streams[i].conn);
		if (ret)
			return ret;
		join_index(i, idx);
		memcpy(j.nonce_r, s->nonce_r, RDX_NONCE_LEN);
		ret = rdx_mac(&s->sk, RDX_LABEL_JOIN, s->nonce_s, s->nonce_r,
			      idx, sizeof(idx), j.mac);
		if (ret)
			return sess_fail(s, ret, "cannot compute MAC");
		h.len = (uint32_t)rdx_join_encode(&j, buf);
		ret = sess_send(&s->streams[i], &h, buf);
		if (ret == -RDX_EINTR)
			return sess_fail(s, ret, "interrupted");
		if (ret == RDX_XPORT_EOF)
			ret = -RDX_ECONNECT;
		if (ret && s->streams[i].conn->why[0])
			return sess_fail(s, ret, "handshake with %s failed: %s",
					 s->o->host, s->streams[i].conn->why);
		if (ret)
			return sess_fail(s, ret, "handshake with %s failed: %s", s->o->host,
					 sess_conn_reason(s, ret, why, sizeof(why)));
	}
	return 0;
}

/* Listener: accepts the peer's extra streams (JOIN), rejecting anything
 * else, within --timeout. */
static int accept_streams(struct rdx_session *s)
{
	uint64_t deadline = rdx_now_ns() + s->o->timeout_ms * 1000000;
	unsigned joined = 1;

	while (joined < s->nstreams) {
		uint8_t buf[RDX_CTRL_MAX + RDX_TAG_LEN];
		struct rdx_frame_hdr h;
		struct rdx_errmsg em;
		struct rdx_join j;
		struct rdx_conn *c;
		uint8_t idx[2];
		int ret;

		ret = link_accept(s, deadline, true, &c);
		if (ret == -RDX_ETIMEOUT)
			return sess_fail(s, ret, "only %u of %u streams connected",
					 joined, s->nstreams);
		if (ret)
			return ret;
		/* As for stream 0, each connection gets at most 10 s to say
		 * JOIN: a silent stray does not use up the whole join's time
		 * when that is longer. */
		c->ops->set_deadline(c, link_hs_deadline(s, deadline), s->o->interrupted);
		ret = sess_recv_ctrl(s, c, &h, buf, false, &em);
		if (ret == -RDX_EINTR) {
			c->ops->close(c);
			return sess_fail(s, ret, "interrupted");
		}
		if (!ret && (h.type != RDX_F_JOIN || rdx_join_decode(buf, h.len, &j)))
			ret = -RDX_EPROTO;
		if (!ret && c->ops != s->streams[0].conn->ops)
			ret = -RDX_EAUTH; /* every stream on one transport */
		if (!ret) {
			join_index(j.index, idx);
			if (j.index >= s->nstreams || s->streams[j.index].conn ||
			    memcmp(j.nonce_r, s->nonce_r, RDX_NONCE_LEN) ||
			    !rdx_mac_check(&s->sk, RDX_LABEL_JOIN, s->nonce_s,
					   s->nonce_r, idx, sizeof(idx), j.mac))
				ret = -RDX_EAUTH;
		}
		if (ret) {
			link_failed(s, c->peer, ret == -RDX_EAUTH ? "not part of this session"
								  : link_hs_reason(ret));
			c->ops->close(c);
			continue;
		}
		s->streams[j.index].conn = c;
		joined++;
	}
	return 0;
}

int link_join_streams(struct rdx_session *s)
{
	return link_dials(s) ? dial_streams(s) : accept_streams(s);
}
