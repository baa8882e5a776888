/* The sending side of a transfer.
 *
 *   readers (1 for pipes, --io-threads for files)  claim chunk seq, fill it
 *   stream threads (one per connection)            take chunks in order
 *                                                  (hash), compress, seal,
 *                                                  send, release
 *   control thread                                 reads stream 0: keepalives,
 *                                                  the receiver's ERROR / DONE
 *   main thread                                    keepalives, progress,
 *                                                  signals; EOS once every
 *                                                  stream thread is finished
 */
#include "core/xfer_int.h"

#include "core/err.h"
#include "core/fileio.h"
#include "core/log.h"
#include "core/tree/tree.h"
#include "core/units.h"
#include "core/zpack.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct sender {
	struct rdx_session s;
	struct rdx_source *src;
	struct rdx_tree_pack *pack; /* -r: the thread writing src's pipe */
	const char *src_name;
	uint64_t nchunks; /* seekable sources: known up front */
	_Atomic uint64_t next_seq;
	pthread_t readers[64];
	unsigned nreaders;
	pthread_t ctrl;
	bool ctrl_started;
	atomic_uint streams_done;
	uint64_t pace_start;		/* --limit-rate: when reading began */
	_Atomic uint64_t paced;		/* bytes read so far */
	bool done;	   /* DONE received; s.lock */
	struct rdx_done done_msg;
};

static struct sender *sender_of(struct rdx_session *s)
{
	return (struct sender *)s;
}

static int read_fail(struct sender *x, int err)
{
	if (err == -ECANCELED)
		return err;
	if (err == -ESTALE)
		return sess_fail(&x->s, -RDX_ELOCAL,
				 "'%s' shrank while being read", x->src_name);
	return sess_fail(&x->s, -RDX_ELOCAL, "cannot read '%s': %s", x->src_name,
			 rdx_strerror(err));
}

/* In order, as the readers publish: offsets and the end-to-end hash, on
 * the reader threads rather than on the sending streams, which then only
 * send (one stream's thread that hashed and sent was busy all the time,
 * at 3.7 GB/s over loopback on a 16-core Xeon). */
static int hash_hook(void *arg, struct rdx_slot *slot)
{
	struct rdx_session *s = arg;

	slot->offset = s->total;
	s->total += slot->len;
	rdx_hash_update(s->hash, slot->data, slot->len);
	return 0;
}

/* Hashes a filled slot in turn and publishes it; after a failure elsewhere
 * (the ring aborted) gives it back and returns non-zero. */
/* --limit-rate: holds len more bytes back until the rate allows them.
 * Returns 0, or -ECANCELED once the session stops. */
static int pace(struct sender *x, size_t len)
{
	uint64_t bps = x->s.o->rate_limit_bps, total, due;

	if (!bps)
		return 0;
	total = atomic_fetch_add(&x->paced, len) + len;
	due = x->pace_start + (uint64_t)((double)total * 8 * 1e9 / (double)bps);
	for (;;) {
		uint64_t now = rdx_now_ns();

		if (now >= due)
			return 0;
		if (atomic_load(&x->s.stop))
			return -ECANCELED;
		usleep((useconds_t)((due - now) / 1000 < 50000 ? (due - now) / 1000 + 1 : 50000));
	}
}

static int publish(struct sender *x, struct rdx_slot *slot)
{
	int ret = pace(x, slot->len);

	if (ret) {
		rdx_ring_unclaim(x->s.ring, slot);
		return ret;
	}
	ret = rdx_ring_publish_ordered(x->s.ring, slot, hash_hook, &x->s);

	if (ret)
		rdx_ring_unclaim(x->s.ring, slot);
	return ret;
}

/* Reader for seekable sources: chunks in any order, several threads. */
static void *reader_file(void *arg)
{
	struct sender *x = arg;
	size_t cap = rdx_ring_slot_size(x->s.ring);

	rdx_thread_name("rdx-read");
	for (;;) {
		uint64_t seq = atomic_fetch_add(&x->next_seq, 1);
		struct rdx_slot *slot;
		ssize_t n;

		if (seq >= x->nchunks)
			break;
		if (rdx_ring_claim(x->s.ring, seq, &slot))
			break;
		n = rdx_source_read(x->src, slot->data, cap, seq);
		if (n <= 0) {
			read_fail(x, n < 0 ? (int)n : -ESTALE);
			rdx_ring_unclaim(x->s.ring, slot);
			break;
		}
		slot->len = (size_t)n;
		if (publish(x, slot))
			break;
	}
	return NULL;
}

/* Reader for pipes: one thread, full slots (short reads merged). */
static void *reader_stream(void *arg)
{
	struct sender *x = arg;
	size_t cap = rdx_ring_slot_size(x->s.ring);
	uint64_t seq;

	rdx_thread_name("rdx-read");
	for (seq = 0;; seq++) {
		struct rdx_slot *slot;
		ssize_t n;

		if (rdx_ring_claim(x->s.ring, seq, &slot))
			break;
		n = rdx_source_read(x->src, slot->data, cap, seq);
		if (n <= 0) {
			rdx_ring_unclaim(x->s.ring, slot);
			if (n < 0)
				read_fail(x, (int)n);
			else if (rdx_ring_set_end(x->s.ring, seq))
				sess_fail(&x->s, -RDX_EPROTO, "internal: bad end");
			break;
		}
		slot->len = (size_t)n;
		if (publish(x, slot))
			break;
	}
	return NULL;
}

struct stream_ctx {
	struct rdx_zpack *z;
	struct rdx_seal *seal;
	unsigned zskip;	   /* chunks left to send without trying zstd */
	unsigned zbackoff; /* next skip after another incompressible chunk */
};

/* Data that did not compress (media, ciphertext, already compressed) will
 * not compress in the next chunk either: back off exponentially, up to 64
 * chunks, and try again; one success resets it. */
#define ZSKIP_MAX 64

/* Compresses and seals the slot as needed; fills h and returns the
 * payload to send. */
static const void *transform(struct rdx_session *s, struct stream_ctx *c,
			     struct rdx_slot *slot, struct rdx_frame_hdr *h,
			     int *err)
{
	const uint8_t *payload = slot->data;
	size_t len = slot->len;
	uint8_t aad[RDX_HDR_LEN];

	/* h->stream is set by the caller: it is part of the sealed AAD. */
	h->type = RDX_F_DATA;
	h->flags = 0;
	h->seq = slot->seq;
	h->plain_len = (uint32_t)slot->len;
	if (c->z && c->zskip) {
		c->zskip--;
	} else if (c->z) {
		ssize_t n = rdx_zpack_compress(c->z, slot->data, slot->len,
					       slot->wire, s->data_max - RDX_TAG_LEN);

		if (n < 0) {
			*err = (int)n;
			return NULL;
		}
		if (n > 0) {
			payload = slot->wire;
			len = (size_t)n;
			h->flags |= RDX_FL_COMPRESSED;
			c->zbackoff = 1;
		} else {
			c->zskip = c->zbackoff;
			if (c->zbackoff < ZSKIP_MAX)
				c->zbackoff *= 2;
		}
	}
	h->len = (uint32_t)len;
	if (c->seal) {
		h->flags |= RDX_FL_SEALED;
		h->len += RDX_TAG_LEN;
		rdx_hdr_encode(h, aad);
		*err = rdx_seal(c->seal, RDX_SEAL_DATA, h->seq, aad, sizeof(aad),
				payload, len, slot->wire);
		if (*err)
			return NULL;
		payload = slot->wire;
	}
	return payload;
}

static void *stream_main(void *arg)
{
	struct rdx_stream *st = arg;
	struct rdx_session *s = st->s;
	struct sender *x = sender_of(s);
	struct stream_ctx c = { .zbackoff = 1 };
	struct rdx_slot *slot;
	int ret = 0;

	rdx_thread_name("rdx-send%u", st->index);
	if (s->opts.compress)
		ret = rdx_zpack_new(&c.z, s->opts.compress);
	if (!ret && s->encrypt)
		ret = rdx_seal_new(&c.seal, s->key_tx);
	if (ret)
		sess_fail(s, ret, "cannot set up stream: %s", rdx_strerror(ret));
	while (!ret && rdx_ring_take(s->ring, NULL, NULL, &slot) == 1) {
		struct rdx_frame_hdr h = { .stream = (uint16_t)st->index };
		const void *payload = transform(s, &c, slot, &h, &ret);

		if (!payload) {
			sess_fail(s, ret, "cannot encode chunk: %s", rdx_strerror(ret));
			break;
		}
		/* The slot goes back to the ring once the transport is done
		 * with it: at once for tcp, at the write's completion for rdma. */
		ret = sess_send_data(st, &h, payload, slot);
		if (ret) {
			sess_fail_conn(s, st->conn, ret, "lost the connection to the receiver");
			rdx_ring_release(s->ring, slot);
			break;
		}
	}
	rdx_zpack_free(c.z);
	rdx_seal_free(c.seal);
	atomic_fetch_add(&x->streams_done, 1);
	pthread_mutex_lock(&s->lock);
	pthread_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->lock);
	return NULL;
}

/* Reads what the receiver says on stream 0 until DONE or failure. */
static void *ctrl_main(void *arg)
{
	struct sender *x = arg;
	struct rdx_session *s = &x->s;
	uint8_t buf[RDX_CTRL_MAX + RDX_TAG_LEN];
	struct rdx_frame_hdr h;
	struct rdx_errmsg em;
	int ret;


	ret = sess_recv_ctrl(s, s->streams[0].conn, &h, buf, s->encrypt, &em);
	if (ret == -RDX_EREMOTE) {
		sess_peer_failure(s, &em);
		return NULL;
	}
	if (ret == -RDX_EPROTO || ret == -RDX_EINTEGRITY) {
		sess_fail(s, ret, "receiver's confirmation %s",
			  ret == -RDX_EPROTO ? "is malformed" : "failed authentication");
		return NULL;
	}
	if (ret) {
		sess_fail_conn(s, s->streams[0].conn, ret, "lost the connection to the receiver");
		return NULL;
	}
	if (h.type != RDX_F_DONE || rdx_done_decode(buf, h.len, &x->done_msg)) {
		sess_fail(s, -RDX_EPROTO, "receiver sent an unexpected message");
		return NULL;
	}
	pthread_mutex_lock(&s->lock);
	x->done = true;
	pthread_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->lock);
	return NULL;
}

/* Why a handshake with the receiver failed: the caller records it (this
 * side dialed) or logs it and waits for the next receiver (it listened). */
struct hs_err {
	int err;
	bool from_peer; /* em holds the receiver's ERROR */
	struct rdx_errmsg em;
	char why[768];
};

/* The peer's name for messages: what we dialed, or where it came from. */
static const char *peer_name(const struct rdx_session *s)
{
	return link_dials(s) ? s->o->host : s->streams[0].conn->peer;
}

/* Fills e for a failed handshake step; returns e->err. */
static int hs_failed(struct rdx_session *s, struct hs_err *e, int ret,
		     const char *step)
{
	struct rdx_conn *c = s->streams[0].conn;
	char why[96];

	if (ret == RDX_XPORT_EOF)
		ret = -RDX_ECONNECT;
	e->err = ret;
	if (ret == -RDX_EREMOTE) {
		e->from_peer = true;
		snprintf(e->why, sizeof(e->why), "%s: %s", s->peer_role, e->em.text);
	} else if (ret == -RDX_EINTR) {
		snprintf(e->why, sizeof(e->why), "interrupted");
	} else if (ret == -RDX_EVERSION) {
		snprintf(e->why, sizeof(e->why),
			 "receiver speaks an incompatible protocol version");
	} else if (ret == -RDX_EPROTO) {
		snprintf(e->why, sizeof(e->why),
			 "receiver broke the protocol during %s", step);
	} else if (ret == -RDX_EAUTH) {
		snprintf(e->why, sizeof(e->why), "%s", step);
	} else {
		snprintf(e->why, sizeof(e->why), "handshake with %s failed: %s",
			 peer_name(s), c->why[0] ? c->why :
			 sess_conn_reason(s, ret, why, sizeof(why)));
	}
	return ret;
}

/* HELLO both ways: our nonce and SPAKE2 share out (unless the gate sent
 * them: sent), the receiver's nonce, share and confirmation back; r gets
 * the exchange's result. */
static int exchange_hello(struct rdx_session *s, uint8_t *buf, struct hs_err *e,
			  bool sent, struct rdx_pake_result *r)
{
	struct rdx_conn *c = s->streams[0].conn;
	struct rdx_hello hello;
	struct rdx_frame_hdr h;
	int ret = 0;

	if (!sent) {
		ret = link_hello(s->w, s->nonce_s, &s->pake, buf, &h);
		if (ret)
			return sess_fail(s, ret, "no randomness available");
		ret = sess_send(&s->streams[0], &h, buf);
	}
	if (!ret)
		ret = sess_recv_ctrl(s, c, &h, buf, false, &e->em);
	if (!ret && h.type != RDX_F_HELLO)
		ret = -RDX_EPROTO;
	if (!ret)
		ret = rdx_hello_decode(buf, h.len, true, &hello);
	if (ret)
		return hs_failed(s, e, ret, "hello");
	memcpy(s->nonce_r, hello.nonce, RDX_NONCE_LEN);
	ret = sess_pake_finish(s, hello.share, r);
	if (ret)
		return sess_error(s) ? ret : hs_failed(s, e, ret, "hello");
	/* The one guess this connection allows: the receiver's. */
	if (!rdx_pake_confirm_ok(r->conf_b, hello.confirm))
		return hs_failed(s, e, -RDX_EAUTH, "authentication failed (wrong key?)");
	return 0;
}

/* AUTH with our confirmation and options, ACCEPT with what the receiver
 * settled on. */
static int exchange_auth(struct rdx_session *s, uint8_t *buf, struct hs_err *e,
			 const struct rdx_pake_result *r)
{
	struct rdx_conn *c = s->streams[0].conn;
	struct rdx_frame_hdr h = { .type = RDX_F_AUTH };
	struct rdx_auth auth;
	struct rdx_accept acc;
	int ret;

	auth.opts = s->opts;
	rdx_opts_encode(&auth.opts, auth.opts_raw);
	memcpy(auth.confirm, r->conf_a, RDX_PAKE_CONFIRM_LEN);
	ret = rdx_mac(&s->sk, RDX_LABEL_SENDER, s->nonce_s, s->nonce_r,
		      auth.opts_raw, RDX_OPTS_LEN, auth.mac);
	if (ret)
		return sess_fail(s, ret, "cannot compute MAC");
	h.len = (uint32_t)rdx_auth_encode(&auth, buf);
	ret = sess_send(&s->streams[0], &h, buf);
	if (!ret)
		ret = sess_recv_ctrl(s, c, &h, buf, false, &e->em);
	/* The receiver proved the key in its HELLO: if it cannot verify
	 * our AUTH, the options were changed on the way, not the key. */
	if (ret == -RDX_EREMOTE && e->em.code == RDX_EAUTH)
		return hs_failed(s, e, -RDX_EAUTH, s->opts.encrypt
				 ? "the peers disagree about encryption: the receiver proved the key "
				   "but not our options, which asked for --encrypt (altered on the way?)"
				 : "the receiver proved the key but not our options (altered on the way?)");
	if (!ret && (h.type != RDX_F_ACCEPT || rdx_accept_decode(buf, h.len, &acc)))
		ret = -RDX_EPROTO;
	if (ret)
		return hs_failed(s, e, ret, "authentication");
	if (!rdx_mac_check(&s->sk, RDX_LABEL_ACCEPT, s->nonce_s, s->nonce_r,
			   acc.raw, RDX_ACCEPT_LEN, acc.mac) ||
	    acc.acc.streams > s->opts.streams)
		return hs_failed(s, e, -RDX_EAUTH,
				 "authentication failed: receiver's answer does not verify");
	if (s->opts.encrypt && !acc.acc.encrypt)
		return hs_failed(s, e, -RDX_EAUTH,
				 "the peers disagree about encryption: the receiver answered without it");
	s->nstreams = acc.acc.streams;
	s->encrypt = acc.acc.encrypt;
	s->opts.encrypt = acc.acc.encrypt;
	return s->encrypt ? sess_setup_crypto(s, true) : 0;
}

/* Finds the receiver and runs HELLO and AUTH with it on stream 0.  A
 * dialer connects once and any failure ends it; a listener logs and drops
 * a connection that fails the handshake (a stray, a wrong key) and waits
 * for the next, until --connect-timeout.  Returns 0 or a recorded error. */
static int meet_receiver(struct sender *x, uint8_t *buf)
{
	struct rdx_session *s = &x->s;
	uint64_t wait = link_wait_deadline(s);

	/* Listening, the gate greets every connection with our HELLO and
	 * hands over one whose answer is in (s->nonce_s and s->pake its
	 * HELLO's). */
	link_greet(s, !link_dials(s));
	for (;;) {
		struct hs_err e = { 0 };
		struct rdx_pake_result r;
		struct rdx_conn *c;
		int ret;

		ret = link_dials(s) ? link_dial(s, 0, &c) : link_accept(s, wait, true, &c);
		if (ret == -RDX_ETIMEOUT)
			return sess_fail(s, ret, "no authenticated receiver within %g s (--connect-timeout)",
					 (double)s->o->wait_ms / 1000);
		if (ret)
			return ret;
		s->streams[0].conn = c;
		s->nstreams = 1;
		/* The whole exchange on stream 0 gets a deadline and answers
		 * Ctrl-C; the data phase relies on socket timeouts and
		 * shutdown instead. */
		c->ops->set_deadline(c, link_hs_deadline(s, wait), s->o->interrupted);
		ret = exchange_hello(s, buf, &e, !link_dials(s), &r);
		if (!ret)
			ret = exchange_auth(s, buf, &e, &r);
		rdx_pake_result_clear(&r);
		if (!ret) {
			link_greet(s, false); /* the JOINs speak first */
			link_succeeded(s, c->peer);
		}
		if (!ret || sess_error(s))
			return sess_error(s);
		if (e.from_peer && link_dials(s))
			return sess_peer_failure(s, &e.em);
		if (link_dials(s) || ret == -RDX_EINTR)
			return sess_fail(s, ret, "%s", e.why);
		link_failed(s, c->peer, e.why);
		if (ret == -RDX_EAUTH)
			link_reject(c, RDX_EAUTH, e.why);
		else
			c->ops->close(c);
		s->streams[0].conn = NULL;
		s->nstreams = 0;
	}
}

static int handshake(struct sender *x)
{
	struct rdx_session *s = &x->s;
	uint8_t buf[RDX_CTRL_MAX + RDX_TAG_LEN];
	unsigned i;
	int ret;

	ret = meet_receiver(x, buf);
	if (!ret)
		ret = link_join_streams(s);
	if (ret)
		return ret;
	/* Accepted streams came with the handshake's short limits: the data
	 * phase has --timeout and no deadline, on every stream. */
	for (i = 0; i < s->nstreams; i++) {
		struct rdx_conn *c = s->streams[i].conn;

		c->ops->set_timeout(c, s->o->timeout_ms);
		c->ops->set_deadline(c, 0, NULL);
	}
	sess_log_settled(s, s->streams[0].conn->peer);
	return 0;
}

static bool send_done(struct rdx_session *s)
{
	return sender_of(s)->done;
}

/* Every stream thread is through and the transport is done with every
 * slot (RDMA writes complete asynchronously): only then is EOS true. */
static bool streams_finished(struct rdx_session *s)
{
	return atomic_load(&sender_of(s)->streams_done) == s->nstreams &&
	       rdx_ring_writable_below(s->ring) - rdx_ring_nslots(s->ring) ==
		       rdx_ring_taken(s->ring);
}

static int send_eos(struct sender *x)
{
	struct rdx_session *s = &x->s;
	struct rdx_eos eos = { .total = s->total,
			       .nchunks = rdx_ring_taken(s->ring) };
	XXH128_hash_t hv = XXH3_128bits_digest(s->hash);
	XXH128_canonical_t canon;
	uint8_t buf[RDX_EOS_LEN];
	int ret;

	XXH128_canonicalFromHash(&canon, hv);
	memcpy(eos.hash, canon.digest, RDX_HASH_LEN);
	rdx_eos_encode(&eos, buf);
	ret = sess_send_ctrl(s, RDX_F_EOS, buf, sizeof(buf));
	if (ret)
		return sess_fail_conn(s, s->streams[0].conn, ret,
				      "lost the connection to the receiver");
	return 0;
}

static int check_done(struct sender *x)
{
	struct rdx_session *s = &x->s;
	XXH128_hash_t hv = XXH3_128bits_digest(s->hash);
	XXH128_canonical_t canon;

	XXH128_canonicalFromHash(&canon, hv);
	if (x->done_msg.total != s->total ||
	    memcmp(x->done_msg.hash, canon.digest, RDX_HASH_LEN))
		return sess_fail(s, -RDX_EINTEGRITY,
				 "receiver confirmed different data (%llu bytes, hash mismatch)",
				 (unsigned long long)x->done_msg.total);
	return 0;
}

/* The slot size: --slot-size, or under --limit-rate one that takes about
 * 1/16 s at the rate (4 KiB at least), so that the pace is even rather
 * than a slot now and a long wait. */
static uint32_t paced_slot(const struct rdx_xfer_opts *o)
{
	uint64_t want;

	if (!o->rate_limit_bps)
		return o->slot_size;
	want = o->rate_limit_bps / 8 / 16 / RDX_MIN_SLOT * RDX_MIN_SLOT;
	if (want < RDX_MIN_SLOT)
		want = RDX_MIN_SLOT;
	return want < o->slot_size ? (uint32_t)want : o->slot_size;
}

static int start_pipeline(struct sender *x)
{
	struct rdx_session *s = &x->s;
	const struct rdx_xfer_opts *o = s->o;
	size_t wire = 0;
	unsigned i, nslots;
	bool sized;
	int ret;

	x->pace_start = rdx_now_ns();
	s->data_max = rdx_data_max(s->opts.slot_size);
	if (s->opts.compress || s->encrypt)
		wire = s->data_max;
	sized = rdx_source_seekable(x->src);
	nslots = sess_ring_slots(o->slots, sized, sized ? rdx_source_size(x->src) : 0,
				 s->opts.slot_size);
	ret = rdx_ring_new(&s->ring, nslots, s->opts.slot_size, wire, true,
			   &s->mem_locked);
	rdx_phase("ring of %u slots of %u KiB allocated%s", nslots,
		  s->opts.slot_size >> 10, s->mem_locked ? " and locked" : "");
	if (ret)
		return sess_fail(s, ret, "cannot allocate %u slots of %u bytes: %s",
				 nslots, s->opts.slot_size, rdx_strerror(ret));
	if (!s->mem_locked)
		sess_warn_unpinned(s);
	ret = sess_attach(s, false);
	if (ret)
		return ret;
	rdx_info(2, "reading '%s'%s", x->src_name,
		 rdx_source_direct(x->src) ? " with O_DIRECT" : "");
	if (rdx_source_seekable(x->src)) {
		x->nchunks = (rdx_source_size(x->src) + s->opts.slot_size - 1) /
			     s->opts.slot_size;
		rdx_ring_set_end(s->ring, x->nchunks);
		/* Parallel reads keep a device's queue full; data served from
		 * the page cache is a memcpy, and more threads than that only
		 * take CPU from the network stages. */
		x->nreaders = o->io_threads;
		if (!rdx_source_direct(x->src) && x->nreaders > 2)
			x->nreaders = 2;
		if (x->nreaders > x->nchunks)
			x->nreaders = x->nchunks ? (unsigned)x->nchunks : 1;
	} else {
		x->nreaders = 1;
	}
	for (i = 0; i < x->nreaders; i++) {
		ret = pthread_create(&x->readers[i], NULL,
				     rdx_source_seekable(x->src) ? reader_file : reader_stream, x);
		if (ret) {
			x->nreaders = i;
			return sess_fail(s, -ret, "cannot start threads");
		}
	}
	for (i = 0; i < s->nstreams; i++) {
		ret = pthread_create(&s->streams[i].thread, NULL, stream_main,
				     &s->streams[i]);
		if (ret)
			return sess_fail(s, -ret, "cannot start threads");
		s->streams[i].started = true;
	}
	ret = pthread_create(&x->ctrl, NULL, ctrl_main, x);
	if (ret)
		return sess_fail(s, -ret, "cannot start threads");
	x->ctrl_started = true;
	return 0;
}

static void stop_pipeline(struct sender *x)
{
	struct rdx_session *s = &x->s;
	unsigned i;

	if (s->ring && sess_error(s))
		rdx_ring_abort(s->ring, sess_error(s));
	sess_stop_streams(s);
	if (x->ctrl_started)
		pthread_join(x->ctrl, NULL);
	for (i = 0; i < x->nreaders; i++)
		pthread_join(x->readers[i], NULL);
}

/* --sync: asks the receiver for its files under our top-level names and
 * collects them into *plan (LIST frames, acknowledged every
 * RDX_LIST_WINDOW so that they never pile up on the way). */
static int fetch_list(struct sender *x, struct rdx_tree_plan **plan)
{
	struct rdx_session *s = &x->s;
	const struct rdx_xfer_opts *o = s->o;
	struct rdx_conn *c = s->streams[0].conn;
	uint8_t buf[RDX_CTRL_MAX + RDX_TAG_LEN];
	struct rdx_frame_hdr h;
	struct rdx_errmsg em;
	unsigned i, frames = 0;
	size_t used = 0, off;
	uint8_t key[RDX_LIST_KEY_LEN];
	int ret;

	if (sess_list_key(s, key))
		return sess_error(s);
	ret = rdx_tree_plan_new(plan, key);
	explicit_bzero(key, sizeof(key));
	if (ret)
		return sess_fail(s, -ENOMEM, "out of memory");
	for (i = 0; i < o->ntree; i++) {
		char *top = rdx_tree_top_name(o->tree_paths[i]);
		size_t n = top ? strlen(top) + 1 : 0;

		if (used + n > RDX_LIST_MAX) {
			free(top);
			return sess_fail(s, -RDX_EUSAGE, "--sync: the sources' names take more than %u bytes",
					 RDX_LIST_MAX);
		}
		if (top)
			memcpy(buf + used, top, n); /* without one, the packer says why */
		used += n;
		free(top);
	}
	ret = sess_send_ctrl(s, RDX_F_LIST_REQ, buf, used);
	if (ret)
		return sess_fail_conn(s, c, ret, "lost the connection to the receiver");
	for (;;) {
		ret = sess_recv_ctrl(s, c, &h, buf, s->encrypt, &em);
		if (ret == -RDX_EREMOTE)
			return sess_peer_failure(s, &em);
		if (ret)
			return sess_fail_conn(s, c, ret, "lost the connection to the receiver");
		if (h.type == RDX_F_LIST_END && h.len == 0)
			break;
		if (h.type != RDX_F_LIST)
			return sess_fail(s, -RDX_EPROTO, "receiver sent an unexpected message");
		for (off = 0; off < h.len;) {
			struct rdx_list_entry e;

			if (rdx_list_decode(buf, h.len, &off, &e))
				return sess_fail(s, -RDX_EPROTO, "receiver sent a malformed listing");
			if (rdx_tree_plan_add(*plan, &e))
				return sess_fail(s, -ENOMEM, "out of memory");
		}
		if (++frames % RDX_LIST_WINDOW == 0) {
			ret = sess_send_ctrl(s, RDX_F_LIST_ACK, buf, 0);
			if (ret)
				return sess_fail_conn(s, c, ret, "lost the connection to the receiver");
		}
	}
	rdx_info(2, "--sync: the receiver listed %u frame%s of files", frames,
		 frames == 1 ? "" : "s");
	return 0;
}

/* --resume: the receiver says how much of the file its partial has and
 * the hash of it; when our first bytes hash the same, the data starts
 * after them, else at 0.  Either way the end-to-end hash has seen the
 * bytes before the start, so EOS and DONE cover the whole file. */
static int fetch_resume(struct sender *x)
{
	struct rdx_session *s = &x->s;
	struct rdx_conn *c = s->streams[0].conn;
	uint8_t buf[RDX_CTRL_MAX + RDX_TAG_LEN], mine[RDX_HASH_LEN];
	struct rdx_done have, from = { 0 };
	struct rdx_frame_hdr h;
	struct rdx_errmsg em;
	int ret;

	ret = sess_recv_ctrl(s, c, &h, buf, s->encrypt, &em);
	if (ret == -RDX_EREMOTE)
		return sess_peer_failure(s, &em);
	if (ret)
		return sess_fail_conn(s, c, ret, "lost the connection to the receiver");
	if (h.type != RDX_F_RESUME || rdx_done_decode(buf, h.len, &have))
		return sess_fail(s, -RDX_EPROTO, "receiver sent a malformed resume offer");
	XXH3_128bits_reset(s->hash);
	if (have.total > s->opts.size) {
		rdx_warn("the receiver's partial is longer than '%s': sending it all", x->src_name);
	} else if (have.total) {
		struct sess_busy busy;

		sess_busy_begin(s, &busy);
		ret = rdx_source_read_prefix(x->src, have.total, rdx_hash_prefix, s->hash);
		sess_busy_end(&busy);
		if (ret)
			return sess_fail(s, -RDX_ELOCAL, "cannot read '%s': %s", x->src_name,
					 rdx_strerror(ret));
		rdx_hash_digest(s->hash, mine);
		if (!memcmp(mine, have.hash, RDX_HASH_LEN)) {
			from.total = have.total;
			memcpy(from.hash, mine, RDX_HASH_LEN);
		} else {
			rdx_warn("the receiver's partial differs from '%s': sending it all",
				 x->src_name);
			XXH3_128bits_reset(s->hash);
		}
	}
	rdx_done_encode(&from, buf);
	ret = sess_send_ctrl(s, RDX_F_RESUME_FROM, buf, RDX_DONE_LEN);
	if (ret)
		return sess_fail_conn(s, c, ret, "lost the connection to the receiver");
	rdx_source_skip(x->src, from.total);
	s->opts.size -= from.total;
	if (from.total)
		rdx_info(1, "resuming: the receiver has the first %llu bytes",
			 (unsigned long long)from.total);
	return 0;
}

static ssize_t tree_read(void *arg, void *buf, size_t cap)
{
	struct sender *x = arg;

	return rdx_tree_pack_read(x->pack, buf, cap, &x->s.stop);
}

static void tree_close(void *arg)
{
	rdx_tree_pack_close_input(((struct sender *)arg)->pack);
}

/* The file, stdin, or a tree's packer handing its stream out (with
 * --sync, the receiver's listing, which the packer takes over). */
static int open_source(struct sender *x, struct rdx_tree_plan *plan)
{
	struct rdx_session *s = &x->s;
	const struct rdx_xfer_opts *o = s->o;
	int ret;

	if (o->ntree) {
		struct rdx_tree_pack_opts po = {
			.paths = o->tree_paths,
			.n = o->ntree,
			.follow = o->tree_follow,
			.atime = o->tree_atime,
			.rules = o->tree_rules,
			.nrules = o->ntree_rules,
			.plan = plan,
			.readers = o->io_threads,
		};

		x->src_name = "the tree";
		ret = rdx_tree_pack_start(&x->pack, &po, NULL);
		if (!ret) {
			ret = rdx_source_open_cb(&x->src, tree_read, tree_close, x);
			if (ret)
				rdx_tree_pack_close_input(x->pack);
		}
		if (ret)
			return sess_fail(s, -RDX_ELOCAL, "cannot start sending the tree: %s",
					 rdx_strerror(ret));
		return 0;
	}
	if (o->fd > 0) {
		int fd = fcntl(o->fd, F_DUPFD_CLOEXEC, 3);

		x->src_name = o->fd_name ? o->fd_name : "the input";
		ret = fd < 0 ? -errno : rdx_source_open_fd(&x->src, fd, &s->stop);
		if (ret && fd >= 0)
			close(fd);
		if (ret)
			return sess_fail(s, -RDX_ELOCAL, "cannot read %s: %s", x->src_name,
					 rdx_strerror(ret));
		return 0;
	}
	x->src_name = o->path && strcmp(o->path, "-") ? o->path : "standard input";
	ret = rdx_source_open(&x->src, o->path, &s->stop);
	if (ret)
		return sess_fail(s, -RDX_ELOCAL, "cannot open '%s': %s", x->src_name,
				 rdx_strerror(ret));
	return 0;
}

int rdx_send(const struct rdx_xfer_opts *o, struct rdx_xfer_stats *st)
{
	struct sender *x = calloc(1, sizeof(*x));
	struct rdx_session *s;
	int ret;

	if (!x) {
		rdx_error("out of memory");
		return -ENOMEM;
	}
	s = &x->s;
	ret = sess_init(s, o, "receiver");
	if (ret) {
		sess_fail(s, ret, "cannot set up the session: %s", rdx_strerror(ret));
		goto out;
	}
	/* With --sync the packer starts once the receiver's listing is in. */
	if (!o->ntree || !o->tree_sync) {
		ret = open_source(x, NULL);
		if (ret)
			goto out;
	}
	s->opts = (struct rdx_opts_wire){
		.slot_size = paced_slot(o),
		.slots = o->slots,
		.streams = (uint16_t)o->streams,
		.compress = (uint8_t)o->compress,
		.encrypt = o->encrypt,
	};
	if (o->ntree) {
		s->opts.flags = RDX_OPT_TREE | (o->tree_sync ? RDX_OPT_SYNC : 0) |
				(o->tree_sync && o->tree_checksum ? RDX_OPT_CHECKSUM : 0);
	} else if (rdx_source_seekable(x->src)) {
		s->opts.flags = RDX_OPT_SIZE_KNOWN | (o->resume ? RDX_OPT_RESUME : 0);
		s->opts.size = rdx_source_size(x->src);
	} else if (o->resume) {
		ret = sess_fail(s, -RDX_EUSAGE, "--resume needs a file to send, not %s",
				x->src_name);
		goto out;
	}
	rdx_phase("start");
	if (link_open(s) || handshake(x))
		goto out;
	rdx_phase("handshake done, %u stream%s", s->nstreams, s->nstreams == 1 ? "" : "s");
	if (o->ntree && o->tree_sync) {
		struct rdx_tree_plan *plan = NULL;

		if (fetch_list(x, &plan)) {
			rdx_tree_plan_free(plan);
			goto out;
		}
		rdx_tree_plan_options(plan, o->tree_delete, o->tree_dry_run);
		if (open_source(x, plan))
			goto out;
	}
	if ((s->opts.flags & RDX_OPT_RESUME) && fetch_resume(x))
		goto out;
	s->t_start_ns = rdx_now_ns();
	sess_progress_start(s);
	if (start_pipeline(x) == 0) {
		rdx_phase("sending");
		sess_tick_loop(s, true, streams_finished);
		rdx_phase("data sent");
		/* After EOS the receiver reads nothing more on stream 0 but
		 * its own DONE: keepalives from us would only pile up there
		 * (over RDMA they would use up its posted receives). */
		s->quiet = true;
		if (!sess_error(s) && send_eos(x) == 0)
			sess_tick_loop(s, true, send_done);
		rdx_phase("receiver confirmed");
		if (!sess_error(s))
			check_done(x);
	}
out:
	sess_send_error(s);
	if (x->ctrl_started || s->nstreams)
		stop_pipeline(x);
	rdx_phase("streams stopped");
	sess_stats(s, st, "sent");
	ret = sess_finish(s);
	link_close(s);
	rdx_source_close(x->src); /* a packer still writing sees EPIPE */
	if (x->pack) {
		int pret = rdx_tree_pack_finish(x->pack);

		/* What we could not read is why the receiver failed too
		 * (it names the same entries): ours is the exit status. */
		if (!ret || (ret == -RDX_EREMOTE && pret == -RDX_ELOCAL))
			ret = pret;
	}
	sess_release(s);
	rdx_phase("done");
	free(x);
	return ret;
}
