/* Internals of the verbs transport, shared by its three files:
 *
 *   verbs_conn.c   a connection's resources (PD, CQ, QP, buffers), the
 *                  progress thread that owns its completions and CM events,
 *                  waiting, registrations
 *   verbs_cm.c     rdma_cm: connect, listen, accept
 *   xport_verbs.c  the vtable: control frames, the data path (POOL, DATA,
 *                  GRANT), shutdown, and one-sided access
 *
 * The design is in docs/RDMA.md.
 */
#ifndef RDX_VERBS_INT_H
#define RDX_VERBS_INT_H

#include "core/be.h"
#include "core/ring.h"
#include "core/verbs/verbs.h"
#include "core/xport.h"

#include <infiniband/verbs.h>
#include <pthread.h>
#include <rdma/rdma_cma.h>
#include <stdbool.h>
#include <stdint.h>

#define MSG_SIZE 4224		 /* header + largest control payload + tag */
#define NSEND 16		 /* bounce buffers for control frames */
#define NRECV_BASE 32		 /* receives for control frames and grants */
#define MAX_EVENTS 4096		 /* arrived frames not yet read */
#define HDR_STRIDE 32		 /* header table entry */
#define CM_TIMEOUT_MS 3000	 /* address and route resolution */
#define ESTABLISH_MS 10000	 /* connect/accept to ESTABLISHED (slow hosts) */
#define RNR_RETRY 6		 /* finite: a peer that stops receiving fails */
#define RETRY_COUNT 7		 /* transport retries before IBV_WC_RETRY_EXC_ERR */
#define PRIV_MAGIC 0x52445831u	 /* "RDX1" in CM private data */
#define POOL_MAGIC 0x52445850u	 /* "RDXP" */

enum imm_kind { IMM_POOL = 1, IMM_GRANT = 2 };
enum wr_kind { WR_RECV = 1, WR_CTRL, WR_HDR, WR_DATA, WR_ONESIDED };

#define WR_ID(kind, idx) (((uint64_t)(kind) << 32) | (uint32_t)(idx))
#define WR_KIND(id) ((unsigned)((id) >> 32))
#define WR_IDX(id) ((uint32_t)(id))

/* Where the receiver's ring is: sent once, after authentication. */
struct pool_desc {
	uint64_t addr;	    /* slot 0's data */
	uint64_t hdr_addr;  /* header table */
	uint64_t grant;	    /* chunks below this may be written */
	uint32_t rkey;
	uint32_t hdr_rkey;
	uint32_t nslots;
	uint32_t stride;    /* bytes from one slot to the next */
	uint32_t data_cap;  /* slot size */
	uint32_t wire_cap;  /* wire buffer after the data, 0: none */
};
#define POOL_LEN 56

struct arrival {
	bool data;    /* a placed DATA payload (else a SEND) */
	uint32_t idx; /* receive buffer, or slot index for data */
	uint32_t len;
};

struct pending {
	rdx_sent_fn done;
	void *arg;
	struct rdx_slot *slot;
	int err; /* when handed to the callback */
};

/* One protection domain per device, shared by every connection on it, so
 * that one registration of a ring serves all its queue pairs; or one of a
 * connection's own (own_pd), never in the shared list. */
struct vb_dev {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	unsigned refs;
	struct vb_dev *next;
};

struct vb_mr {
	struct ibv_pd *pd;
	void *addr;
	size_t len;
	int access;
	struct ibv_mr *mr;
	unsigned refs;
	struct vb_mr *next;
};


struct vb_conn {
	struct rdx_conn base;
	struct rdma_event_channel *ch;
	struct rdma_cm_id *id;
	struct vb_dev *dev;
	bool own_pd;	 /* dev is this connection's alone (rdx_net_opts) */
	unsigned ack_timeout; /* rdx_net_opts's */
	struct ibv_comp_channel *cc;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	unsigned sq_depth, rq_depth;

	uint8_t *rbuf; /* rq_depth receive buffers */
	struct ibv_mr *rmr;
	uint8_t *sbuf; /* NSEND bounce buffers */
	struct ibv_mr *smr;
	bool sfree[NSEND];

	pthread_mutex_t lock;
	pthread_cond_t cond;
	pthread_t progress;
	bool progress_started;
	bool quit;	 /* progress thread: stop */
	int quit_fd;	 /* eventfd: wakes the progress thread out of poll() */
	bool shut;	 /* shutdown() was called */
	bool disconnected;
	int err;	 /* first failure; lock */
	unsigned sq_used;
	unsigned ctrl_out;  /* control SENDs not yet completed */
	bool peer_left;	    /* DISCONNECTED seen: the QP was moved to error */
	uint64_t last_grant; /* receiver: what the sender was last told */

	/* Arrivals, in order; recv() serves them as bytes. */
	struct arrival q[MAX_EVENTS];
	unsigned qhead, qcount;
	const uint8_t *cur; /* what recv() reads next */
	size_t cur_left;
	uint8_t cur_hdr[RDX_HDR_LEN]; /* data: the header, as validated */
	const uint8_t *cur_next; /* data: the payload, after the header */
	size_t cur_next_left;
	int cur_buf; /* receive buffer to repost when consumed, or -1 */

	uint64_t timeout_ms;
	uint64_t deadline_ns;
	const atomic_int *stop;

	/* A listener's gate waiting for the first frame (frame_ready): an
	 * eventfd written on every arrival, failure or disconnect until the
	 * handshake's first recv() (ready_watch off); -1 until asked for. */
	int ready_fd;
	bool ready_watch;

	/* The data phase. */
	struct rdx_ring *ring;
	struct vb_mr *ring_mr;
	uint8_t *hdrs; /* receiver: header table; sender: header sources */
	struct ibv_mr *hdr_mr;
	bool receiver;
	bool have_pool;
	struct pool_desc pool; /* sender: the receiver's */
	uint64_t granted;      /* sender: chunks below may be written */
	struct pending *pend;  /* sender: per local slot */
	unsigned inflight;
	unsigned remote_rd;    /* RDMA READs the peer lets us have in flight */
	/* One-sided operations, at most RDX_VERBS_SLOTS in flight: each
	 * slot's result, whether it came, whether one is posted. */
	struct ibv_wc onesided[RDX_VERBS_SLOTS];
	bool onesided_done[RDX_VERBS_SLOTS];
	bool onesided_busy[RDX_VERBS_SLOTS];
	bool onesided_write[RDX_VERBS_SLOTS]; /* a WRITE, else a READ */
};

struct vb_listener {
	struct rdx_listener base;
	struct rdma_event_channel *ch;
	struct rdma_cm_id *id;
	unsigned port;
};

/* aligned_alloc wants a size that is a multiple of the alignment. */
static inline size_t round_page(size_t n)
{
	return (n + 4095) & ~(size_t)4095;
}

static inline struct vb_conn *vb_of(struct rdx_conn *c)
{
	return (struct vb_conn *)c;
}

/* verbs_conn.c */
/* A connection taking o's timeout, protection-domain and ACK-timeout
 * choices; NULL without memory. */
struct vb_conn *vb_conn_alloc(const struct rdx_net_opts *o);
/* Wakes whoever waits on c: recv() and the like (c->cond), and the gate
 * (c->ready_fd) while it watches.  Lock held. */
void vb_wake(struct vb_conn *c);
/* Creates the PD (shared), CQ, QP and buffers on c->id and posts every
 * receive; nslots_hint sizes the queues. */
int vb_setup_qp(struct vb_conn *c, unsigned nslots_hint);
/* Frees what vb_setup_qp (and attach) built, and the CM id and channel;
 * c itself stays, ready for another attempt.  No progress thread runs. */
void vb_conn_teardown(struct vb_conn *c);
void vb_conn_destroy(struct vb_conn *c);
int vb_start_progress(struct vb_conn *c);
int vb_post_recv(struct vb_conn *c, unsigned i);
int vb_set_nonblock(int fd);
void vb_dev_put(struct vb_dev *d);
struct vb_mr *vb_mr_get(struct ibv_pd *pd, void *addr, size_t len, int access,
			int *err);
void vb_mr_put(struct vb_mr *m);
void vb_reg_failed(struct vb_conn *c, const char *what, size_t len, int err);
/* Records the first failure, in words, and wakes every waiter.  Lock held. */
int vb_fail(struct vb_conn *c, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
void vb_nap(struct vb_conn *c, unsigned ms);
int vb_wait_tick(struct vb_conn *c, uint64_t since_ns, bool eof_ok);

/* verbs_cm.c */
int vb_connect(const struct rdx_net_opts *o, const char *host, const char *port,
	       uint64_t deadline_ns, const atomic_int *stop, int *last_err,
	       struct rdx_conn **out);
int vb_listen(const struct rdx_net_opts *o, const char *port,
	      struct rdx_listener **out);
unsigned vb_listen_port(struct rdx_listener *l);
int vb_accept(struct rdx_listener *l, const struct rdx_net_opts *o, int wait_ms,
	      struct rdx_conn **out);
void vb_close_listener(struct rdx_listener *l);

#endif
