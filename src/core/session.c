/* What the sending and receiving sides share: failure recording, control
 * frames, keepalives, the main thread's tick loop and the final report. */
#include "core/xfer_int.h"

#include "core/err.h"
#include "core/log.h"
#include "core/units.h"
#include "core/verbs/verbs_probe.h"

#include <errno.h>
#include <openssl/crypto.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

void rdx_xfer_opts_init(struct rdx_xfer_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->transport = RDX_TRANSPORT_AUTO;
	o->gid_index = -1;
	o->slot_size = 1u << 20;
	o->slots = 16;
	o->streams = 1;
	o->io_threads = 4;
	o->timeout_ms = 60000;
	o->connect_timeout_ms = 10000;
}

int sess_init(struct rdx_session *s, const struct rdx_xfer_opts *o,
	      const char *peer_role)
{
	unsigned i;

	memset(s, 0, sizeof(*s));
	s->o = o;
	s->peer_role = peer_role;
	s->net.family = o->family;
	s->net.bind = o->bind;
	s->net.timeout_ms = o->timeout_ms;
	s->net.ack_timeout = o->ack_timeout;
	pthread_mutex_init(&s->lock, NULL);
	pthread_mutex_init(&s->grant_lock, NULL);
	pthread_cond_init(&s->cond, NULL);
	for (i = 0; i < RDX_MAX_STREAMS; i++) {
		pthread_mutex_init(&s->streams[i].send_lock, NULL);
		s->streams[i].index = i;
		s->streams[i].s = s;
	}
	s->hash = XXH3_createState();
	if (!s->hash)
		return -ENOMEM;
	XXH3_128bits_reset(s->hash);
	/* Once per session, not per connection a listener greets. */
	return rdx_pake_w(o->key.bytes, o->key.len, s->w);
}

void sess_release(struct rdx_session *s)
{
	unsigned i;

	for (i = 0; i < RDX_MAX_STREAMS; i++) {
		if (s->streams[i].conn)
			s->streams[i].conn->ops->close(s->streams[i].conn);
		pthread_mutex_destroy(&s->streams[i].send_lock);
	}
	rdx_ring_free(s->ring);
	rdx_seal_free(s->ctrl_tx);
	rdx_seal_free(s->ctrl_rx);
	XXH3_freeState(s->hash);
	rdx_pake_clear(&s->pake);
	OPENSSL_cleanse(s->w, sizeof(s->w));
	OPENSSL_cleanse(s->ke, sizeof(s->ke));
	OPENSSL_cleanse(s->key_tx, sizeof(s->key_tx));
	OPENSSL_cleanse(s->key_rx, sizeof(s->key_rx));
	pthread_cond_destroy(&s->cond);
	pthread_mutex_destroy(&s->grant_lock);
	pthread_mutex_destroy(&s->lock);
}

static int fail_v(struct rdx_session *s, int err, bool weak, bool from_peer,
		  const char *fmt, va_list ap)
{
	if (err > 0)
		err = -err;
	pthread_mutex_lock(&s->lock);
	if (s->final) {
		pthread_mutex_unlock(&s->lock);
		return err;
	}
	if (rdx_fail_record(&s->err, s->errmsg, sizeof(s->errmsg), s->err && s->err_weak && !weak,
			    err, fmt, ap)) {
		s->err_weak = weak;
		s->err_from_peer = from_peer;
	}
	pthread_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->lock);
	atomic_store(&s->stop, 1);
	if (s->ring)
		rdx_ring_abort(s->ring, err);
	return err;
}

int sess_fail(struct rdx_session *s, int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	err = fail_v(s, err, false, false, fmt, ap);
	va_end(ap);
	return err;
}

int sess_fail_peer(struct rdx_session *s, int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	err = fail_v(s, err, false, true, fmt, ap);
	va_end(ap);
	return err;
}

static int fail_weak(struct rdx_session *s, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int fail_weak(struct rdx_session *s, int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	err = fail_v(s, err, true, true, fmt, ap);
	va_end(ap);
	return err;
}

const char *sess_conn_reason(struct rdx_session *s, int err, char *buf,
			     size_t len)
{
	if (err < 0)
		err = -err;
	if (err == RDX_ETIMEOUT)
		snprintf(buf, len, "no response for %.0f s (--timeout)",
			 (double)s->o->timeout_ms / 1000);
	else if (err == RDX_ECONNECT)
		snprintf(buf, len, "connection closed");
	else
		snprintf(buf, len, "%s", rdx_strerror(err));
	return buf;
}

int sess_fail_conn(struct rdx_session *s, struct rdx_conn *c, int err,
		   const char *what)
{
	char why[96];

	/* Once we are stopping, failures of our own shutdown are noise. */
	if (atomic_load(&s->stop) && sess_error(s))
		return sess_error(s);
	if (err == RDX_XPORT_EOF)
		err = -RDX_ECONNECT;
	/* The transport's own words, when it has them, say more ("RDMA
	 * write failed: remote access error"). */
	if (c && c->why[0])
		return fail_weak(s, err, "%s: %s", what, c->why);
	sess_conn_reason(s, err, why, sizeof(why));
	return fail_weak(s, err, "%s: %s", what, why);
}

int sess_error(struct rdx_session *s)
{
	int err;

	pthread_mutex_lock(&s->lock);
	err = s->err;
	pthread_mutex_unlock(&s->lock);
	return err;
}

int sess_pake_finish(struct rdx_session *s,
		     const uint8_t peer[RDX_PAKE_SHARE_LEN],
		     struct rdx_pake_result *r)
{
	static const char id_a[] = "rdxfer-2 sender", id_b[] = "rdxfer-2 receiver";
	uint8_t aad[2 * RDX_NONCE_LEN];
	struct rdx_pake_ctx ctx = {
		.id_a = id_a, .id_a_len = sizeof(id_a) - 1,
		.id_b = id_b, .id_b_len = sizeof(id_b) - 1,
		.aad = aad, .aad_len = sizeof(aad),
	};
	int ret;

	memcpy(aad, s->nonce_s, RDX_NONCE_LEN);
	memcpy(aad + RDX_NONCE_LEN, s->nonce_r, RDX_NONCE_LEN);
	ret = rdx_pake_finish(&s->pake, &ctx, peer, r);
	rdx_pake_clear(&s->pake);
	if (ret == -EINVAL)
		return -RDX_EPROTO;
	if (ret)
		return sess_fail(s, ret, "cannot run the key exchange");
	memcpy(s->ke, r->ke, sizeof(s->ke));
	s->sk.bytes = s->ke;
	s->sk.len = sizeof(s->ke);
	return 0;
}

int sess_setup_crypto(struct rdx_session *s, bool sender)
{
	uint8_t s2r[32], r2s[32];
	int ret;

	ret = rdx_derive_keys(&s->sk, s->nonce_s, s->nonce_r, s2r, r2s);
	memcpy(s->key_tx, sender ? s2r : r2s, 32);
	memcpy(s->key_rx, sender ? r2s : s2r, 32);
	OPENSSL_cleanse(s2r, sizeof(s2r));
	OPENSSL_cleanse(r2s, sizeof(r2s));
	if (!ret)
		ret = rdx_seal_new(&s->ctrl_tx, s->key_tx);
	if (!ret)
		ret = rdx_seal_new(&s->ctrl_rx, s->key_rx);
	if (ret)
		return sess_fail(s, ret, "cannot set up encryption");
	return 0;
}

int sess_list_key(struct rdx_session *s, uint8_t *out)
{
	if (rdx_mac(&s->sk, RDX_LABEL_LIST, s->nonce_s, s->nonce_r, NULL, 0, out))
		return sess_fail(s, -EIO, "cannot derive the listing's key");
	return 0;
}

void sess_warn_unpinned(struct rdx_session *s)
{
	struct rlimit rl;
	char have[32], need[32];
	uint64_t bytes = (uint64_t)rdx_ring_nslots(s->ring) *
			 (rdx_ring_slot_size(s->ring) + (s->opts.compress || s->encrypt ?
							  s->data_max : 0));

	rdx_fmt_bytes(need, sizeof(need), bytes);
	if (getrlimit(RLIMIT_MEMLOCK, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
		rdx_fmt_bytes(have, sizeof(have), (uint64_t)rl.rlim_cur);
	else
		snprintf(have, sizeof(have), "unknown");
	if (s->streams[0].conn && s->streams[0].conn->ops != &rdx_xport_tcp)
		return; /* RDMA registration says it, and fails */
	rdx_warn("cannot lock %s of slots in memory (RLIMIT_MEMLOCK is %s); "
		 "continuing unpinned over TCP (raise it with ulimit -l or in "
		 "/etc/security/limits.d/)", need, have);
}

unsigned sess_ring_slots(unsigned budget, bool size_known, uint64_t size,
			 uint32_t slot_size)
{
	uint64_t chunks = size_known ? (size + slot_size - 1) / slot_size : UINT64_MAX;

	if (chunks < 2)
		chunks = 2;
	return chunks < budget ? (unsigned)chunks : budget;
}

void sess_log_settled(const struct rdx_session *s, const char *peer)
{
	rdx_info(2, "authenticated %s %s; %u stream%s%s%s", s->peer_role, peer,
		 s->nstreams, s->nstreams == 1 ? "" : "s",
		 s->opts.compress ? ", zstd" : "", s->encrypt ? ", AES-256-GCM" : "");
}

uint64_t rdx_rdma_lock_need(const struct rdx_xfer_opts *o)
{
	uint64_t wire = o->compress || o->encrypt ? rdx_data_max(o->slot_size) : 0;

	/* Each queue pair registers ~0.5 MiB of its own (buffers, headers). */
	return (uint64_t)o->slots * (o->slot_size + wire) + (uint64_t)o->streams * (1u << 20);
}

/* Why the slots could not be registered for RDMA, or NULL when they can.
 * Root (CAP_IPC_LOCK) is not bound by the limit. */
static const char *memlock_short(const struct rdx_session *s, bool listening,
				 char *buf, size_t len)
{
	struct rdx_xfer_opts o = *s->o;
	struct rlimit rl;
	char have[32], need[32];

	/* A receiver cannot know how many streams will come: it checks for
	 * one, and registration says so clearly if more do not fit.  (It may
	 * dial, with --connect: what counts is the role.) */
	(void)listening;
	if (!strcmp(s->peer_role, "sender"))
		o.streams = 1;

	if (geteuid() == 0 || getrlimit(RLIMIT_MEMLOCK, &rl) ||
	    rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur >= rdx_rdma_lock_need(&o))
		return NULL;
	rdx_fmt_bytes(need, sizeof(need), rdx_rdma_lock_need(&o));
	rdx_fmt_bytes(have, sizeof(have), (uint64_t)rl.rlim_cur);
	snprintf(buf, len, "RDMA needs %s of locked memory but RLIMIT_MEMLOCK is %s "
		 "(raise it with ulimit -l or in /etc/security/limits.d/, or use "
		 "fewer --slots)", need, have);
	return buf;
}

/* --rdma-dev, --rdma-port, --gid-index: rdma_cm picks device, port and GID
 * from the local address, so they become the address to bind. */
static int pick_rdma_dev(struct rdx_session *s, bool listening)
{
	const struct rdx_xfer_opts *o = s->o;
	const char *why;
	char buf[256];

	if (o->transport == RDX_TRANSPORT_TCP)
		return sess_fail(s, -RDX_EUSAGE,
				 "--rdma-dev, --rdma-port and --gid-index choose an RDMA device: not with --transport tcp");
	if (o->bind)
		return sess_fail(s, -RDX_EUSAGE,
				 "--bind and --rdma-dev/--rdma-port/--gid-index both choose the local address: give one");
	why = rdx_verbs_unavailable();
	if (!why)
		why = memlock_short(s, listening, buf, sizeof(buf));
	if (why)
		return sess_fail(s, -RDX_ENOTSUP, "cannot use RDMA: %s; rdx-diag lists what this host has",
				 why);
	if (rdx_verbs_local_addr(o->rdma_dev, o->rdma_port, o->gid_index, o->family,
				 s->bind_buf, sizeof(s->bind_buf), buf, sizeof(buf)))
		return sess_fail(s, -RDX_ENOTSUP, "cannot use RDMA: %s", buf);
	s->net.bind = s->bind_buf;
	rdx_info(1, "transport: rdma: local address %s (--rdma-dev %s, --rdma-port %u, --gid-index %d)",
		 s->bind_buf, o->rdma_dev ? o->rdma_dev : "-", o->rdma_port, o->gid_index);
	s->xp = &rdx_xport_verbs;
	return 0;
}

int sess_pick_transport(struct rdx_session *s, bool listening)
{
	const char *why;
	char buf[256];
	struct rdx_verbs_route route;

	if (s->o->rdma_dev || s->o->rdma_port || s->o->gid_index >= 0)
		return pick_rdma_dev(s, listening);
	if (s->o->transport == RDX_TRANSPORT_TCP) {
		s->xp = &rdx_xport_tcp;
		return 0;
	}
	why = rdx_verbs_unavailable();
	if (!why)
		why = memlock_short(s, listening, buf, sizeof(buf));
	if (why && s->o->transport == RDX_TRANSPORT_RDMA)
		return sess_fail(s, -RDX_ENOTSUP, "--transport rdma: %s; rdx-diag lists what this host has",
				 why);
	if (why) {
		rdx_info(1, "transport: tcp: %s", why);
		s->xp = &rdx_xport_tcp;
		return 0;
	}
	if (listening) {
		/* Either kind of sender may come: the receiver listens for
		 * both (sess_listen) unless told which. */
		s->xp = s->o->transport == RDX_TRANSPORT_RDMA ? &rdx_xport_verbs : NULL;
		return 0;
	}
	if (s->o->transport == RDX_TRANSPORT_RDMA) {
		s->xp = &rdx_xport_verbs;
		return 0;
	}
	if (rdx_verbs_route(s->o->host, s->o->bind, s->o->family, 2000, &route, buf,
			    sizeof(buf))) {
		rdx_info(1, "transport: tcp: %s", buf);
		s->xp = &rdx_xport_tcp;
		return 0;
	}
	rdx_info(1, "transport: rdma: %s is reached through %s port %u", s->o->host,
		 route.dev, route.port);
	s->xp = &rdx_xport_verbs;
	return 0;
}

int sess_send(struct rdx_stream *st, struct rdx_frame_hdr *h,
	      const void *payload)
{
	int ret;

	h->stream = (uint16_t)st->index;
	pthread_mutex_lock(&st->send_lock);
	ret = st->conn->ops->send(st->conn, h, payload);
	pthread_mutex_unlock(&st->send_lock);
	atomic_store(&st->last_tx_ns, rdx_now_ns());
	return ret;
}

/* Runs when the transport no longer needs a sent slot. */
static void data_sent(void *arg, struct rdx_slot *slot, int err)
{
	struct rdx_stream *st = arg;
	struct rdx_session *s = st->s;

	if (err)
		sess_fail_conn(s, st->conn, err, "lost the connection to the receiver");
	else
		atomic_fetch_add(&s->moved, slot->len);
	rdx_ring_release(s->ring, slot);
}

int sess_send_data(struct rdx_stream *st, struct rdx_frame_hdr *h,
		   const void *payload, struct rdx_slot *slot)
{
	int ret;

	h->stream = (uint16_t)st->index;
	pthread_mutex_lock(&st->send_lock);
	ret = st->conn->ops->send_data(st->conn, h, payload, slot, data_sent, st);
	pthread_mutex_unlock(&st->send_lock);
	atomic_store(&st->last_tx_ns, rdx_now_ns());
	return ret;
}

void sess_grant(struct rdx_session *s)
{
	uint64_t below;
	unsigned i;

	if (s->streams[0].conn->ops->grant == rdx_xport_tcp.grant)
		return;
	/* Each transport decides how often to tell its peer. */
	pthread_mutex_lock(&s->grant_lock);
	below = rdx_ring_writable_below(s->ring);
	if (below > s->granted) {
		s->granted = below;
		for (i = 0; i < s->nstreams; i++)
			s->streams[i].conn->ops->grant(s->streams[i].conn, below);
	}
	pthread_mutex_unlock(&s->grant_lock);
}

int sess_attach(struct rdx_session *s, bool receiver)
{
	uint64_t deadline = rdx_now_ns() + s->o->timeout_ms * 1000000;
	unsigned i;
	int ret;

	s->granted = rdx_ring_nslots(s->ring);
	for (i = 0; i < s->nstreams; i++) {
		struct rdx_conn *c = s->streams[i].conn;

		ret = c->ops->attach(c, s->ring, receiver, deadline);
		if (ret == -ENOMSG) {
			uint8_t buf[RDX_CTRL_MAX + RDX_TAG_LEN];
			struct rdx_frame_hdr h;
			struct rdx_errmsg em;

			ret = sess_recv_ctrl(s, c, &h, buf, false, &em);
			if (ret == -RDX_EREMOTE)
				return sess_peer_failure(s, &em);
			if (!ret)
				ret = -RDX_EPROTO;
		}
		if (ret == -RDX_ETIMEOUT || ret == -RDX_ECONNECT || ret == RDX_XPORT_EOF)
			return sess_fail_conn(s, c, ret, receiver ? "lost the connection to the sender"
								  : "lost the connection to the receiver");
		if (ret)
			return sess_fail(s, ret, "cannot set up the %s data path: %s",
					 c->ops->name, c->why[0] ? c->why : rdx_strerror(ret));
	}
	return 0;
}

int sess_send_ctrl(struct rdx_session *s, uint8_t type, const uint8_t *msg,
		   size_t len)
{
	struct rdx_frame_hdr h = { .type = type, .len = (uint32_t)len };
	uint8_t buf[RDX_CTRL_MAX + RDX_TAG_LEN], aad[RDX_HDR_LEN];
	int ret;

	if (!s->encrypt || !s->ctrl_tx)
		return sess_send(&s->streams[0], &h, msg);
	h.flags = RDX_FL_SEALED;
	h.len = (uint32_t)(len + RDX_TAG_LEN);
	h.seq = s->ctrl_tx_seq++;
	h.stream = 0;
	rdx_hdr_encode(&h, aad);
	ret = rdx_seal(s->ctrl_tx, RDX_SEAL_CTRL, h.seq, aad, sizeof(aad), msg,
		       len, buf);
	if (ret)
		return ret;
	return sess_send(&s->streams[0], &h, buf);
}

int sess_peer_failure(struct rdx_session *s, const struct rdx_errmsg *em)
{
	/* Corrupted data is exit 6 on both ends, whoever noticed it. */
	return sess_fail_peer(s, em->code == RDX_EINTEGRITY ? -RDX_EINTEGRITY
							    : -RDX_EREMOTE,
			      "%s: %s", s->peer_role, em->text);
}

int sess_peer_error(struct rdx_session *s, const uint8_t *buf, size_t len)
{
	struct rdx_errmsg m;

	if (rdx_errmsg_decode(buf, len, &m))
		return sess_fail(s, -RDX_EPROTO, "%s sent a malformed error",
				 s->peer_role);
	return sess_peer_failure(s, &m);
}

int sess_recv_ctrl(struct rdx_session *s, struct rdx_conn *c,
		   struct rdx_frame_hdr *h, uint8_t *buf, bool sealed,
		   struct rdx_errmsg *em)
{
	uint8_t raw[RDX_HDR_LEN];
	int ret;

	for (;;) {
		ret = c->ops->recv(c, raw, sizeof(raw));
		if (ret)
			return ret;
		ret = rdx_hdr_decode(raw, 0, h);
		if (ret)
			return ret;
		if (h->len) {
			ret = c->ops->recv(c, buf, h->len);
			if (ret)
				return ret == RDX_XPORT_EOF ? -RDX_ECONNECT : ret;
		}
		if (h->type == RDX_F_KEEPALIVE)
			continue;
		if (h->type == RDX_F_ERROR)
			return rdx_errmsg_decode(buf, h->len, em) ? -RDX_EPROTO
								   : -RDX_EREMOTE;
		break;
	}
	if (sealed != !!(h->flags & RDX_FL_SEALED))
		return -RDX_EPROTO;
	if (!sealed)
		return 0;
	if (h->seq != s->ctrl_rx_seq)
		return -RDX_EPROTO; /* replayed or reordered control frame */
	ret = rdx_open(s->ctrl_rx, RDX_SEAL_CTRL, h->seq, raw, sizeof(raw), buf,
		       h->len, buf);
	if (ret)
		return ret;
	s->ctrl_rx_seq++;
	h->len -= RDX_TAG_LEN;
	return 0;
}

void sess_send_error(struct rdx_session *s)
{
	struct rdx_stream *st = &s->streams[0];
	struct rdx_frame_hdr h = { .type = RDX_F_ERROR };
	uint8_t buf[4 + RDX_ERRTEXT_MAX];
	struct timespec dl;
	int err;

	pthread_mutex_lock(&s->lock);
	err = s->err;
	if (!err || s->err_from_peer || !st->conn) {
		pthread_mutex_unlock(&s->lock);
		return;
	}
	h.len = (uint32_t)rdx_errmsg_encode((uint32_t)-err, s->errmsg, buf);
	pthread_mutex_unlock(&s->lock);
	/* The data thread of stream 0 may sit in a blocked send holding the
	 * lock; then the peer learns of the failure from the closed socket. */
	rdx_deadline_in(&dl, 1000);
	if (pthread_mutex_timedlock(&st->send_lock, &dl))
		return;
	st->conn->ops->send(st->conn, &h, buf);
	pthread_mutex_unlock(&st->send_lock);
}

static uint64_t keepalive_ns(const struct rdx_session *s)
{
	uint64_t ms = s->o->timeout_ms / 4;

	if (ms < 200)
		ms = 200;
	if (ms > 5000)
		ms = 5000;
	return ms * 1000000;
}

static void send_keepalives(struct rdx_session *s, bool all_streams)
{
	uint64_t now = rdx_now_ns(), every = keepalive_ns(s);
	unsigned i, n = all_streams ? s->nstreams : 1;


	for (i = 0; i < n; i++) {
		struct rdx_stream *st = &s->streams[i];
		struct rdx_frame_hdr h = { .type = RDX_F_KEEPALIVE,
					   .stream = (uint16_t)i };

		if (!st->conn || now - atomic_load(&st->last_tx_ns) < every)
			continue;
		/* After EOS nobody reads stream 0 on the far side; the extra
		 * streams' readers still want to hear from us. */
		if (i == 0 && s->quiet)
			continue;
		/* A busy stream needs no keepalive; never wait for it. */
		if (pthread_mutex_trylock(&st->send_lock))
			continue;
		if (st->conn->ops->send(st->conn, &h, NULL) == 0)
			atomic_store(&st->last_tx_ns, now);
		pthread_mutex_unlock(&st->send_lock);
	}
}

static void *busy_main(void *arg)
{
	struct sess_busy *b = arg;
	struct timespec dl;

	pthread_mutex_lock(&b->lock);
	while (!b->done) {
		rdx_deadline_in(&dl, 100);
		pthread_cond_timedwait(&b->cond, &b->lock, &dl);
		if (!b->done)
			send_keepalives(b->s, false);
	}
	pthread_mutex_unlock(&b->lock);
	return NULL;
}

void sess_busy_begin(struct rdx_session *s, struct sess_busy *b)
{
	*b = (struct sess_busy){ .s = s };
	pthread_mutex_init(&b->lock, NULL);
	pthread_cond_init(&b->cond, NULL);
	/* Without the thread the peer may time out on long work: a
	 * failure we can live with, not one to stop for. */
	b->started = pthread_create(&b->thread, NULL, busy_main, b) == 0;
}

void sess_busy_end(struct sess_busy *b)
{
	pthread_mutex_lock(&b->lock);
	b->done = true;
	pthread_cond_signal(&b->cond);
	pthread_mutex_unlock(&b->lock);
	if (b->started)
		pthread_join(b->thread, NULL);
	pthread_cond_destroy(&b->cond);
	pthread_mutex_destroy(&b->lock);
}

void sess_progress_start(struct rdx_session *s)
{
	bool known = s->opts.flags & RDX_OPT_SIZE_KNOWN;

	if (s->o->progress_lines)
		rdx_progress_init_lines(&s->progress, known, s->opts.size);
	else
		rdx_progress_init(&s->progress, s->o->progress, known, s->opts.size);
}

void sess_tick_loop(struct rdx_session *s, bool all_streams,
		    bool (*done)(struct rdx_session *s))
{
	for (;;) {
		struct timespec dl;

		if (s->o->interrupted && atomic_load(s->o->interrupted))
			sess_fail(s, -RDX_EINTR, "interrupted");
		pthread_mutex_lock(&s->lock);
		if (s->err || done(s)) {
			pthread_mutex_unlock(&s->lock);
			break;
		}
		rdx_deadline_in(&dl, 100);
		pthread_cond_timedwait(&s->cond, &s->lock, &dl);
		pthread_mutex_unlock(&s->lock);
		send_keepalives(s, all_streams);
		rdx_progress_update(&s->progress, atomic_load(&s->moved));
	}
}

void sess_wait(struct rdx_session *s, bool (*done)(struct rdx_session *s),
	       uint64_t ms)
{
	struct timespec dl;

	rdx_deadline_in(&dl, ms);
	pthread_mutex_lock(&s->lock);
	while (!done(s))
		if (pthread_cond_timedwait(&s->cond, &s->lock, &dl) == ETIMEDOUT)
			break;
	pthread_mutex_unlock(&s->lock);
}

void sess_stop_streams(struct rdx_session *s)
{
	unsigned i;

	for (i = 0; i < s->nstreams; i++)
		if (s->streams[i].conn)
			s->streams[i].conn->ops->shutdown(s->streams[i].conn);
	for (i = 0; i < s->nstreams; i++) {
		if (s->streams[i].started)
			pthread_join(s->streams[i].thread, NULL);
		s->streams[i].started = false;
	}
}

void sess_stats(struct rdx_session *s, struct rdx_xfer_stats *st,
		const char *verb)
{
	double secs = (double)(rdx_now_ns() - s->t_start_ns) / 1e9;
	uint64_t bytes = atomic_load(&s->moved);

	rdx_progress_end(&s->progress);
	if (!st)
		return;
	st->bytes = bytes;
	st->seconds = secs;
	st->transport = s->streams[0].conn ? s->streams[0].conn->ops->name
					   : s->xp ? s->xp->name : "none";
	st->streams = s->nstreams;
	st->compress = s->opts.compress != 0;
	st->encrypt = s->encrypt;
	if (!sess_error(s))
		rdx_info(1, "%s %llu bytes in %.3f s, Bandwidth %.3f GB/s (%s, %u stream%s)",
			 verb, (unsigned long long)bytes, secs,
			 secs > 0 ? (double)bytes / secs / 1e9 : 0.0,
			 st->transport, s->nstreams, s->nstreams == 1 ? "" : "s");
}

int sess_finish(struct rdx_session *s)
{
	int err = sess_error(s);

	if (err)
		rdx_error("%s", s->errmsg);
	return err;
}
