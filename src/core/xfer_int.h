/* Internals shared by the sending and receiving sides of a transfer. */
#ifndef RDX_XFER_INT_H
#define RDX_XFER_INT_H

#include "core/auth.h"
#include "core/progress.h"
#include "core/proto.h"
#include "core/ring.h"
#include "core/seal.h"
#include "core/xfer.h"
#include "core/xport.h"
#include "core/xxh.h"

#include <pthread.h>
#include <stdarg.h>
#include <string.h>

struct rdx_stream {
	struct rdx_conn *conn;
	pthread_mutex_t send_lock; /* one frame at a time on conn */
	_Atomic uint64_t last_tx_ns;
	unsigned index;
	pthread_t thread;
	bool started;
	struct rdx_session *s;
};

struct rdx_session {
	const struct rdx_xfer_opts *o;
	const struct rdx_xport_ops *xp;
	struct rdx_net_opts net;
	char bind_buf[64]; /* net.bind when --rdma-dev chose it */
	const char *peer_role; /* "sender" or "receiver": prefixes its errors */
	struct rdx_listener *lis; /* listening side only (link.c) */
	struct link_gate *gate;	  /* ... and its strays (gate.c) */

	/* Settled by the handshake, then read-only.  Every MAC and key of
	 * the session comes from sk (SPAKE2's Ke), none from the shared
	 * key: a peer that does not know it learns nothing to test a
	 * guess against. */
	uint8_t nonce_s[RDX_NONCE_LEN];
	uint8_t nonce_r[RDX_NONCE_LEN];
	uint8_t w[RDX_PAKE_SCALAR_LEN]; /* the key as SPAKE2's scalar, derived once */
	struct rdx_pake pake; /* this side's half, until the peer's share is in */
	uint8_t ke[RDX_PAKE_KEY_LEN];
	struct rdx_key sk; /* ke, as a key */
	uint8_t key_tx[32];
	uint8_t key_rx[32];
	struct rdx_opts_wire opts; /* as the sender proposed them */
	bool encrypt;
	unsigned nstreams;
	uint32_t data_max;
	struct rdx_stream streams[RDX_MAX_STREAMS];
	struct rdx_ring *ring;
	bool mem_locked;
	pthread_mutex_t grant_lock;
	uint64_t granted; /* grant_lock */

	/* Sealed control frames, one counter and context per direction;
	 * each is used by one thread only (see send.c / recv.c). */
	struct rdx_seal *ctrl_tx;
	struct rdx_seal *ctrl_rx;
	uint64_t ctrl_tx_seq;
	uint64_t ctrl_rx_seq;

	/* In-order state, touched only from ring take hooks (ring lock). */
	XXH3_state_t *hash;
	uint64_t total;

	atomic_int stop;	   /* ends poll-sliced I/O loops */
	bool quiet;		   /* main thread: no more keepalives */
	_Atomic uint64_t moved;	   /* plain bytes through the pipeline */

	pthread_mutex_t lock;
	pthread_cond_t cond; /* signalled on failure and on progress events */
	int err;	     /* first failure; lock */
	bool err_weak;	     /* err may be explained better by the peer */
	bool err_from_peer;  /* do not echo it back as an ERROR frame */
	bool final;	     /* the result is in place: failures no longer count */
	char errmsg[768];

	struct rdx_progress progress;
	uint64_t t_start_ns;
};

/* Records a failure (the first one wins, except that a weak one, such as a
 * connection reset, gives way to a later explained one) and stops every
 * stage.  fmt gives the one-line message.  Returns err for convenience. */
int sess_fail(struct rdx_session *s, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Like sess_fail for errors the peer told us about (never echoed back). */
int sess_fail_peer(struct rdx_session *s, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Like sess_fail for broken connections: a weak error.  c (may be NULL)
 * is the connection, whose transport may know the cause in words. */
int sess_fail_conn(struct rdx_session *s, struct rdx_conn *c, int err,
		   const char *what);

int sess_error(struct rdx_session *s);

int sess_init(struct rdx_session *s, const struct rdx_xfer_opts *o,
	      const char *peer_role);
void sess_release(struct rdx_session *s);

/* Runs SPAKE2 to its end with the peer's share (both nonces known, this
 * side's half in s->pake): sets the session key s->sk and fills r with
 * both confirmations.  Returns 0, -RDX_EPROTO for a share that is not a
 * valid point, or a recorded error. */
int sess_pake_finish(struct rdx_session *s,
		     const uint8_t peer[RDX_PAKE_SHARE_LEN],
		     struct rdx_pake_result *r);

/* Derives this session's keys (both nonces are known) and the control
 * frame contexts, the right way round for the sending or receiving side.
 * Returns 0 or a recorded error. */
int sess_setup_crypto(struct rdx_session *s, bool sender);

/* --checksum: the key a listing's content hashes are keyed with, from
 * the session key and both nonces (RDX_LIST_KEY_LEN bytes).  Returns 0 or
 * a recorded error. */
int sess_list_key(struct rdx_session *s, uint8_t *out);

/* Says once, on stderr, that the slots could not be locked in memory and
 * how to raise the limit (TCP works unpinned; RDMA will not). */
void sess_warn_unpinned(struct rdx_session *s);
/* How many slots a ring needs: at most budget, but no more than a stream
 * of size bytes (when known) fills, and never fewer than two.  Every slot
 * is locked, and on RDMA registered, before the first byte moves: a small
 * file should not pay for the memory of a large one. */
unsigned sess_ring_slots(unsigned budget, bool size_known, uint64_t size,
			 uint32_t slot_size);

/* Under -vv: who the peer is and what the handshake settled on. */
void sess_log_settled(const struct rdx_session *s, const char *peer);

/* Transport selection for --transport; logs why under -v.  A receiver
 * (listening) under auto on a host with RDMA gets s->xp NULL: it listens
 * for both.  Returns 0 or an error already recorded. */
int sess_pick_transport(struct rdx_session *s, bool listening);


/* Sends a DATA frame from slot on a stream; the slot is released (and the
 * bytes counted) once the transport is done with it. */
int sess_send_data(struct rdx_stream *st, struct rdx_frame_hdr *h,
		   const void *payload, struct rdx_slot *slot);

/* Receiver: tells every stream's transport how far the sender may write
 * ahead (after writers free slots).  Cheap when nothing changed. */
void sess_grant(struct rdx_session *s);

/* Attaches the ring to every stream's connection (sender or receiver). */
int sess_attach(struct rdx_session *s, bool receiver);

/* Sends one frame on a stream under its send lock. */
int sess_send(struct rdx_stream *st, struct rdx_frame_hdr *h,
	      const void *payload);

/* Sends a control frame on stream 0, sealed when the session encrypts. */
int sess_send_ctrl(struct rdx_session *s, uint8_t type, const uint8_t *msg,
		   size_t len);

/* Receives one control frame (not DATA) into buf (RDX_CTRL_MAX + tag),
 * skipping keepalives.  An ERROR frame is decoded into *em and gives
 * -RDX_EREMOTE.  With sealed true the payload is opened as the next control
 * frame.  Returns 0 (h filled, payload in buf, h->len its length),
 * RDX_XPORT_EOF, or a negative error; nothing is recorded with sess_fail. */
int sess_recv_ctrl(struct rdx_session *s, struct rdx_conn *c,
		   struct rdx_frame_hdr *h, uint8_t *buf, bool sealed,
		   struct rdx_errmsg *em);

/* Records the peer's ERROR (decoded, or as its raw payload) as the
 * session's failure: exit 6 for corruption, else 5. */
int sess_peer_failure(struct rdx_session *s, const struct rdx_errmsg *em);
int sess_peer_error(struct rdx_session *s, const uint8_t *buf, size_t len);

/* Waits until done() holds or ms pass, whichever is first. */
void sess_wait(struct rdx_session *s, bool (*done)(struct rdx_session *s),
	       uint64_t ms);

/* Best effort: tells the peer why we stop, unless the failure came from it. */
void sess_send_error(struct rdx_session *s);

/* Runs the main thread's duties until done() says so or the session fails:
 * signals, keepalives (stream 0 only unless all_streams), progress. */
/* Long local work before the data flows (hashing a partial or a
 * --checksum listing) while the peer waits for a control frame: a thread
 * keeps stream 0 alive meanwhile, so that the peer's --timeout counts
 * silence, not work.  Keepalives are unsealed and skipped by
 * sess_recv_ctrl().  begin/end pair up on one thread. */
struct sess_busy {
	struct rdx_session *s;
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool done, started;
};
void sess_busy_begin(struct rdx_session *s, struct sess_busy *b);
void sess_busy_end(struct sess_busy *b);

/* The progress display of --progress (a bar on a terminal) or of
 * --progress-lines (lines for rdcp), from the data's start. */
void sess_progress_start(struct rdx_session *s);

/* The main thread while the stream threads work: wakes at least every
 * 100 ms (and on every signal of s->cond) to send KEEPALIVEs (on every
 * stream, or stream 0 only) and update the progress display, until
 * done(s) (called with s->lock held), a failure, or an interrupt, which
 * it records. */
void sess_tick_loop(struct rdx_session *s, bool all_streams,
		    bool (*done)(struct rdx_session *s));

/* Shuts every connection down so that blocked threads return, then joins
 * the stream threads. */
void sess_stop_streams(struct rdx_session *s);

/* Fills the stats and, on success, prints the -v summary. */
void sess_stats(struct rdx_session *s, struct rdx_xfer_stats *st,
		const char *verb);

/* Prints the recorded error (once) and returns it. */
int sess_finish(struct rdx_session *s);

/* Describes a transport error for messages ("timed out after 60 s"). */
const char *sess_conn_reason(struct rdx_session *s, int err, char *buf,
			     size_t len);

/* ---- link.c: how the connections come to be, whichever side dials ---- */

/* How long a listener gives one connection to complete the handshake
 * (less when --timeout is less). */
#define LINK_HANDSHAKE_MS 10000u

/* True when this side dials (o->host set), false when it listens. */
bool link_dials(const struct rdx_session *s);

/* Picks the transport (sess_pick_transport); a listener also listens on
 * o->port and reports the bound port through o->on_listen.  Returns 0 or
 * a recorded error. */
int link_open(struct rdx_session *s);

/* Closes the listener, if any. */
void link_close(struct rdx_session *s);

/* Dialer: connects stream i to o->host, retrying until
 * --connect-timeout.  Returns 0 or a recorded error. */
int link_dial(struct rdx_session *s, unsigned i, struct rdx_conn **out);

/* Listener: waits for the next connection until deadline (0: none), with
 * the short handshake timeout on it.  gated: its peer speaks first (a
 * sender dialing a receiver, every JOIN), so it is handed over only once
 * its first frame is in (gate.c).  Returns 0 with *c set, -RDX_ETIMEOUT
 * (not recorded: the caller says what it was waiting for), or a recorded
 * error. */
int link_accept(struct rdx_session *s, uint64_t deadline, bool gated, struct rdx_conn **c);

/* ---- gate.c: the listener's strays ---- */

struct link_gate;

int link_gate_new(struct link_gate **out);

/* Closes the connections still waiting; logs what was left unsaid. */
void link_gate_free(struct link_gate *g);

/* link_accept() through the gate: the next connection whose first frame
 * is in whole, each given first_ms for it.  Same returns. */
int link_gate_accept(struct rdx_session *s, const struct rdx_net_opts *hs,
		     uint64_t deadline, uint64_t first_ms, struct rdx_conn **out);

/* A listener that speaks first (a sender): with on, the gate greets every
 * connection it takes in with a HELLO of its own (a fresh nonce and SPAKE2
 * half each) and hands over one whose answer is in, with its nonce and
 * half in s->nonce_s and s->pake. */
void link_greet(struct rdx_session *s, bool on);

/* A sender's HELLO in buf and *h: a fresh nonce (into nonce) and the
 * share of a fresh SPAKE2 half over the key's scalar w (into pake).
 * Returns 0 or -EIO. */
int link_hello(const uint8_t w[RDX_PAKE_SCALAR_LEN], uint8_t nonce[RDX_NONCE_LEN],
	       struct rdx_pake *pake, uint8_t *buf, struct rdx_frame_hdr *h);

/* A listener rejected peer's handshake (why): logged, one line or in a
 * summary, and peer's address is slowed down after a few. */
void link_failed(struct rdx_session *s, const char *peer, const char *why);

/* peer authenticated: its address is no longer slowed down. */
void link_succeeded(struct rdx_session *s, const char *peer);

/* The listener's deadline for its peer from --wait (0: none). */
uint64_t link_wait_deadline(const struct rdx_session *s);

/* The deadline for one handshake on stream 0: --timeout for a dialer, 10 s
 * or --timeout if less (never past wait_deadline) for a listener. */
uint64_t link_hs_deadline(const struct rdx_session *s, uint64_t wait_deadline);

/* Tells a rejected connection why (an ERROR frame), then drops it. */
void link_reject(struct rdx_conn *c, int code, const char *why);

/* A failed handshake step in words ("handshake timed out"). */
const char *link_hs_reason(int ret);

/* After ACCEPT: the dialer opens streams 1..N-1 with JOIN, the listener
 * accepts and checks them (strays are logged and dropped) within
 * --timeout.  Returns 0 or a recorded error. */
int link_join_streams(struct rdx_session *s);

#endif
