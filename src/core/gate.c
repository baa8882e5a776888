/* The listener's gate: what keeps strays from locking a listener out.
 *
 * The handshake reads one connection at a time.  So that a silent or
 * trickling connection cannot hold it (rdrecv listening, and every JOIN),
 * a connection whose peer speaks first waits here with the others, all at
 * once, until its first frame has arrived whole; only then is it handed
 * to the handshake.  A real sender sends HELLO with its connect and is
 * handed over at once.
 *
 *   accept ──▶ turned away?  (its address is being slowed down: ERROR, close)
 *          ──▶ a place (GATE_MAX; when full, the oldest of the address
 *              that holds most gives way: a flood from one address
 *              evicts its own, never a peer from elsewhere)
 *          ──▶ first frame whole ──▶ link_accept() returns it
 *          ──▶ nothing whole within the handshake's budget: dropped
 *
 * An address whose handshakes fail (a wrong key, garbage, silence after
 * its HELLO) is slowed down: from its third failure on, its connections
 * are turned away for 100 ms, then twice as long after each failure, up
 * to a minute; a success forgets it.  Rejections are logged one line
 * each, but at most GATE_LOG_LINES per address in GATE_LOG_MS; beyond
 * that a summary line.
 *
 * Where this side speaks first (a listening sender), it greets every new
 * connection with its HELLO, a fresh nonce and SPAKE2 half each
 * (link_greet), and waits for the answer the same way; the nonce and half
 * of the connection handed over become the session's.
 *
 * Both transports can tell whether a first frame is in (frame_ready: TCP
 * peeks at the socket, verbs looks at its arrivals, one SEND being one
 * frame, and gives an eventfd to poll).  One that could not would pass
 * straight through.  A waiting RDMA connection holds its queue pair and
 * about 470 KiB of registered buffers.  One thread: the session's main
 * thread. */
#include "core/xfer_int.h"

#include "core/err.h"
#include "core/log.h"
#include "core/units.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GATE_MAX 64	      /* connections waiting for their first frame */
#define GATE_ADDRS 256	      /* addresses remembered for slowing down */
#define GATE_FREE_FAILS 2     /* failures an address has before it is slowed */
#define GATE_SLOW_MS 100u     /* the first delay, doubled with each failure */
#define GATE_SLOW_MAX_MS 60000u
#define GATE_LOG_LINES 3      /* rejections logged one by one per address */
#define GATE_LOG_MS 10000u    /* ... in this window; then a summary */
#define GATE_ACCEPTS 4096     /* new connections taken in per round, at most */

struct gate_place {
	struct rdx_conn *c;
	char host[72];	  /* its address (peer_host) */
	uint64_t since_ns;
	uint8_t nonce[RDX_NONCE_LEN]; /* the HELLO it was greeted with */
	struct rdx_pake pake;	      /* ... and its secret half */
};

struct gate_addr {
	char host[72];	   /* "" when unused */
	unsigned fails;	   /* failed handshakes, since the last success */
	uint64_t until_ns; /* turned away until then */
	uint64_t used_ns;  /* last seen: the oldest entry is reused */
	uint64_t window_ns; /* start of the logging window */
	unsigned logged;    /* lines logged in the window */
	unsigned unlogged;  /* rejections not logged in the window */
	char last_why[96];  /* the last of those */
};

struct link_gate {
	struct gate_place p[GATE_MAX];
	unsigned n;
	struct gate_addr a[GATE_ADDRS];
	bool greet; /* greet each new one with a sender's HELLO */
};

/* The host part of a peer ("1.2.3.4:5", "[::1]:5"). */
static void peer_host(const char *peer, char *host, size_t len)
{
	const char *colon = strrchr(peer, ':');
	size_t n = colon ? (size_t)(colon - peer) : strlen(peer);

	if (n >= len)
		n = len - 1;
	memcpy(host, peer, n);
	host[n] = '\0';
}

/* The entry of peer's address; with make, a new one (reusing the oldest)
 * when there is none.  NULL without make when there is none. */
static struct gate_addr *addr_of(struct link_gate *g, const char *peer, bool make)
{
	struct gate_addr *oldest = &g->a[0];
	char host[sizeof(oldest->host)];
	unsigned i;

	peer_host(peer, host, sizeof(host));
	for (i = 0; i < GATE_ADDRS; i++) {
		if (!strcmp(g->a[i].host, host)) {
			g->a[i].used_ns = rdx_now_ns();
			return &g->a[i];
		}
		if (g->a[i].used_ns < oldest->used_ns)
			oldest = &g->a[i];
	}
	if (!make)
		return NULL;
	memset(oldest, 0, sizeof(*oldest));
	snprintf(oldest->host, sizeof(oldest->host), "%s", host);
	oldest->used_ns = rdx_now_ns();
	return oldest;
}

/* Says what was not logged of a's window, and opens a new one. */
static void flush_window(struct gate_addr *a, uint64_t now)
{
	if (a->unlogged)
		rdx_error("rejected %u more connection%s from %s in the last %u s (the last: %s)",
			  a->unlogged, a->unlogged == 1 ? "" : "s", a->host,
			  (unsigned)((now - a->window_ns) / 1000000000u), a->last_why);
	a->window_ns = now;
	a->logged = a->unlogged = 0;
}

/* Logs one rejection of peer: one line, or counted for a summary. */
static void log_reject(struct link_gate *g, const char *peer, const char *why)
{
	struct gate_addr *a = addr_of(g, peer, true);
	uint64_t now = rdx_now_ns();

	if (now - a->window_ns >= (uint64_t)GATE_LOG_MS * 1000000)
		flush_window(a, now);
	if (a->logged < GATE_LOG_LINES) {
		a->logged++;
		rdx_error("rejected connection from %s: %s", peer, why);
		return;
	}
	a->unlogged++;
	snprintf(a->last_why, sizeof(a->last_why), "%s", why);
}

int link_gate_new(struct link_gate **out)
{
	*out = calloc(1, sizeof(**out));
	return *out ? 0 : -ENOMEM;
}

void link_gate_free(struct link_gate *g)
{
	unsigned i;

	if (!g)
		return;
	for (i = 0; i < g->n; i++) {
		g->p[i].c->ops->close(g->p[i].c);
		rdx_pake_clear(&g->p[i].pake);
	}
	for (i = 0; i < GATE_ADDRS; i++)
		if (g->a[i].host[0])
			flush_window(&g->a[i], rdx_now_ns());
	free(g);
}

void link_greet(struct rdx_session *s, bool on)
{
	if (s->gate)
		s->gate->greet = on;
}

int link_hello(const uint8_t w[RDX_PAKE_SCALAR_LEN], uint8_t nonce[RDX_NONCE_LEN],
	       struct rdx_pake *pake, uint8_t *buf, struct rdx_frame_hdr *h)
{
	struct rdx_hello hello = { .version = RDX_PROTO_VERSION };
	int ret = rdx_random(nonce, RDX_NONCE_LEN);

	if (!ret)
		ret = rdx_pake_start_w(pake, RDX_PAKE_A, w);
	if (ret)
		return ret;
	memcpy(hello.nonce, nonce, RDX_NONCE_LEN);
	memcpy(hello.share, pake->share, RDX_PAKE_SHARE_LEN);
	*h = (struct rdx_frame_hdr){ .type = RDX_F_HELLO };
	h->len = (uint32_t)rdx_hello_encode(&hello, buf);
	return 0;
}

/* Sends c a sender's HELLO of its own, kept in place.  Returns 0 or a
 * negative error. */
static int greet(struct rdx_session *s, struct rdx_conn *c,
		 struct gate_place *place)
{
	struct rdx_frame_hdr h;
	uint8_t buf[RDX_CTRL_MAX];
	int ret = link_hello(s->w, place->nonce, &place->pake, buf, &h);

	return ret ? ret : c->ops->send(c, &h, buf);
}

void link_failed(struct rdx_session *s, const char *peer, const char *why)
{
	struct link_gate *g = s->gate;
	struct gate_addr *a;
	unsigned shift;

	if (!g) {
		rdx_error("rejected connection from %s: %s", peer, why);
		return;
	}
	log_reject(g, peer, why);
	a = addr_of(g, peer, true);
	if (++a->fails <= GATE_FREE_FAILS)
		return;
	shift = a->fails - GATE_FREE_FAILS - 1;
	a->until_ns = rdx_now_ns() +
		      (shift >= 10 ? GATE_SLOW_MAX_MS
				   : (GATE_SLOW_MS << shift) < GATE_SLOW_MAX_MS ? GATE_SLOW_MS << shift
										: GATE_SLOW_MAX_MS) *
			      1000000ull;
}

void link_succeeded(struct rdx_session *s, const char *peer)
{
	struct gate_addr *a = s->gate ? addr_of(s->gate, peer, false) : NULL;

	if (a)
		a->fails = 0, a->until_ns = 0;
}

/* An address being slowed down: its connection gets an ERROR saying for
 * how long, and is closed.  True when c was turned away. */
static bool turned_away(struct link_gate *g, struct rdx_conn *c)
{
	struct gate_addr *a = addr_of(g, c->peer, false);
	uint64_t now = rdx_now_ns();
	char why[128];

	if (!a || a->until_ns <= now)
		return false;
	/* In tenths, rounded up: never "in 0.0 s". */
	snprintf(why, sizeof(why), "too many failed handshakes from %s: try again in %.1f s",
		 a->host, (double)((a->until_ns - now + 99999999) / 100000000) / 10);
	log_reject(g, c->peer, why);
	link_reject(c, RDX_EAUTH, why);
	return true;
}

static void drop(struct link_gate *g, unsigned i)
{
	g->p[i] = g->p[--g->n];
	rdx_pake_clear(&g->p[g->n].pake);
}

/* Hands place's connection over as the session's: the HELLO it was
 * greeted with becomes the session's own. */
static struct rdx_conn *hand_over(struct rdx_session *s, struct gate_place *place)
{
	if (s->gate->greet) {
		memcpy(s->nonce_s, place->nonce, RDX_NONCE_LEN);
		s->pake = place->pake;
		rdx_pake_clear(&place->pake);
	}
	return place->c;
}

/* Places held by host. */
static unsigned held_by(const struct link_gate *g, const char *host)
{
	unsigned i, n = 0;

	for (i = 0; i < g->n; i++)
		n += !strcmp(g->p[i].host, host);
	return n;
}

/* Makes room: the oldest place of the address that holds most gives
 * way (none holds a whole frame: that would have gone on).  A flood from
 * one address then only ever evicts its own. */
static void evict(struct link_gate *g)
{
	unsigned i, most = 0, victim = 0;

	for (i = 0; i < g->n; i++) {
		unsigned n = held_by(g, g->p[i].host);

		if (n > most || (n == most && g->p[i].since_ns < g->p[victim].since_ns)) {
			most = n;
			victim = i;
		}
	}
	g->p[victim].c->ops->close(g->p[victim].c);
	drop(g, victim);
}

int link_gate_accept(struct rdx_session *s, const struct rdx_net_opts *hs,
		     uint64_t deadline, uint64_t first_ms, struct rdx_conn **out)
{
	struct link_gate *g = s->gate;
	struct pollfd fds[GATE_MAX];

	for (;;) {
		uint64_t now = rdx_now_ns();
		unsigned i, k, nfd = 0;
		int ret;

		if (s->o->interrupted && atomic_load(s->o->interrupted))
			return sess_fail(s, -RDX_EINTR, "interrupted");
		if (deadline && now >= deadline)
			return -RDX_ETIMEOUT;
		/* Every new connection, so that a real peer's is not left at
		 * the end of a queue of strays; waiting for one only when none
		 * is here.  A peer that spoke with its connect goes on at once. */
		for (k = 0; k < GATE_ACCEPTS; k++) {
			struct gate_place *place;
			struct rdx_conn *c;
			int fd;

			ret = s->lis->ops->accept(s->lis, hs, g->n || k ? 0 : 200, &c);
			if (ret == -EAGAIN)
				break;
			if (ret)
				return sess_fail(s, -RDX_ECONNECT, "accept failed: %s",
						 rdx_strerror(ret));
			rdx_info(2, "connection from %s", c->peer);
			if (turned_away(g, c))
				continue;
			if (g->n == GATE_MAX)
				evict(g);
			place = &g->p[g->n];
			*place = (struct gate_place){ .c = c, .since_ns = rdx_now_ns() };
			peer_host(c->peer, place->host, sizeof(place->host));
			if (g->greet && greet(s, c, place)) {
				rdx_pake_clear(&place->pake);
				log_reject(g, c->peer, "closed during the handshake");
				c->ops->close(c);
				continue;
			}
			/* The transport cannot tell, or it is all there. */
			if (!c->ops->frame_ready || c->ops->frame_ready(c, &fd) > 0) {
				*out = hand_over(s, place);
				return 0;
			}
			g->n++;
		}
		/* The first whole frame goes on; the dead and the late go. */
		now = rdx_now_ns();
		for (i = 0; i < g->n;) {
			struct rdx_conn *c = g->p[i].c;
			int fd = -1;

			ret = c->ops->frame_ready(c, &fd);
			if (ret > 0) {
				*out = hand_over(s, &g->p[i]);
				drop(g, i);
				return 0;
			}
			if (ret < 0 || now - g->p[i].since_ns >= first_ms * 1000000) {
				log_reject(g, c->peer, ret < 0 ? link_hs_reason(ret)
							       : link_hs_reason(-RDX_ETIMEOUT));
				c->ops->close(c);
				drop(g, i);
				continue;
			}
			fds[nfd++] = (struct pollfd){ .fd = fd, .events = POLLIN };
			i++;
		}
		if (nfd)
			poll(fds, nfd, 50);
	}
}
