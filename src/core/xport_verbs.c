/* The verbs transport: RDMA over InfiniBand or RoCE through rdma_cm and
 * libibverbs.  One RC queue pair per stream; the ladder is in docs/RDMA.md.
 *
 *   control frames   SEND from a registered bounce buffer into one of the
 *                    peer's posted receive buffers (HELLO ... EOS, DONE)
 *   DATA             RDMA WRITE of the 24-byte header into the receiver's
 *                    header table, then RDMA WRITE_WITH_IMM of the payload
 *                    straight from the sender's slot into the receiver's
 *                    slot (seq % nslots); the immediate is the slot index
 *   transport msgs   SEND_WITH_IMM (the immediate says which): the
 *                    receiver's POOL (where its ring is, its rkeys, the
 *                    first grant) after authentication, and GRANTs as its
 *                    writers free slots
 *
 * A progress thread per connection owns the completion queue and the CM
 * event channel: it polls, arms, polls again and only then sleeps, so no
 * completion is missed; it checks every completion's status and opcode,
 * turns receives into a queue that recv() serves as a byte stream, runs the
 * send_data callbacks, and records the first failure in words (c->why).
 */
#include "verbs.h"
#include "verbs_probe.h"
#include "xport.h"

#include "err.h"
#include "log.h"
#include "ring.h"
#include "units.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <rdma/rdma_cma.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

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
 * that one registration of a ring serves all its queue pairs. */
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

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static struct vb_dev *devices;
static struct vb_mr *regions;

struct vb_conn {
	struct rdx_conn base;
	struct rdma_event_channel *ch;
	struct rdma_cm_id *id;
	struct vb_dev *dev;
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
	struct ibv_wc onesided; /* result of the last one-sided operation */
	bool onesided_done;
};

struct vb_listener {
	struct rdx_listener base;
	struct rdma_event_channel *ch;
	struct rdma_cm_id *id;
	unsigned port;
};

/* aligned_alloc wants a size that is a multiple of the alignment. */
static size_t round_page(size_t n)
{
	return (n + 4095) & ~(size_t)4095;
}

static struct vb_conn *vb_of(struct rdx_conn *c)
{
	return (struct vb_conn *)c;
}

static void put32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

static void put64(uint8_t *p, uint64_t v)
{
	put32(p, (uint32_t)(v >> 32));
	put32(p + 4, (uint32_t)v);
}

static uint32_t get32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static uint64_t get64(const uint8_t *p)
{
	return (uint64_t)get32(p) << 32 | get32(p + 4);
}

const char *rdx_verbs_unavailable(void)
{
	struct ibv_device **list;
	int n = 0, i, usable = 0;

	if (access("/dev/infiniband/rdma_cm", R_OK | W_OK) != 0)
		return errno == ENOENT ? "no RDMA device (/dev/infiniband/rdma_cm is missing)"
				       : "no access to /dev/infiniband/rdma_cm";
	list = ibv_get_device_list(&n);
	for (i = 0; list && i < n; i++)
		if (list[i]->transport_type != IBV_TRANSPORT_IWARP)
			usable++;
	if (list)
		ibv_free_device_list(list);
	if (n <= 0)
		return "no RDMA device found";
	/* iWARP has no RDMA WRITE with immediate. */
	if (!usable)
		return "only iWARP devices, which the verbs transport does not support";
	return NULL;
}

/* Records the first failure, in words, and wakes every waiter.  Lock held. */
static int fail_locked(struct vb_conn *c, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static int fail_locked(struct vb_conn *c, int err, const char *fmt, ...)
{
	va_list ap;

	if (!c->err) {
		c->err = err;
		va_start(ap, fmt);
		vsnprintf(c->base.why, sizeof(c->base.why), fmt, ap);
		va_end(ap);
	}
	pthread_cond_broadcast(&c->cond);
	return c->err;
}

static void addr_text(const struct sockaddr *sa, char *out, size_t len)
{
	char host[64] = "?";
	unsigned port = 0;

	if (sa && sa->sa_family == AF_INET) {
		const struct sockaddr_in *s4 = (const void *)sa;

		inet_ntop(AF_INET, &s4->sin_addr, host, sizeof(host));
		port = ntohs(s4->sin_port);
		snprintf(out, len, "%s:%u", host, port);
	} else if (sa && sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *s6 = (const void *)sa;

		if (IN6_IS_ADDR_V4MAPPED(&s6->sin6_addr))
			inet_ntop(AF_INET, &s6->sin6_addr.s6_addr[12], host, sizeof(host));
		else
			inet_ntop(AF_INET6, &s6->sin6_addr, host, sizeof(host));
		port = ntohs(s6->sin6_port);
		snprintf(out, len, IN6_IS_ADDR_V4MAPPED(&s6->sin6_addr) ? "%s:%u" : "[%s]:%u",
			 host, port);
	} else {
		snprintf(out, len, "?");
	}
}

/* ---- devices and registrations ---------------------------------------- */

static struct vb_dev *dev_get(struct ibv_context *ctx)
{
	struct vb_dev *d;

	pthread_mutex_lock(&registry_lock);
	for (d = devices; d; d = d->next)
		if (d->ctx == ctx)
			break;
	if (!d) {
		d = calloc(1, sizeof(*d));
		if (d) {
			d->ctx = ctx;
			d->pd = ibv_alloc_pd(ctx);
			if (!d->pd) {
				free(d);
				d = NULL;
			} else {
				d->next = devices;
				devices = d;
			}
		}
	}
	if (d)
		d->refs++;
	pthread_mutex_unlock(&registry_lock);
	return d;
}

static void dev_put(struct vb_dev *d)
{
	struct vb_dev **pp;

	if (!d)
		return;
	pthread_mutex_lock(&registry_lock);
	if (--d->refs == 0) {
		for (pp = &devices; *pp; pp = &(*pp)->next)
			if (*pp == d) {
				*pp = d->next;
				break;
			}
		ibv_dealloc_pd(d->pd);
		free(d);
	}
	pthread_mutex_unlock(&registry_lock);
}

/* Registers [addr, addr+len) once per protection domain and access. */
static struct vb_mr *mr_get(struct ibv_pd *pd, void *addr, size_t len,
			    int access, int *err)
{
	struct vb_mr *m;

	pthread_mutex_lock(&registry_lock);
	for (m = regions; m; m = m->next)
		if (m->pd == pd && m->addr == addr && m->len == len && m->access == access)
			break;
	if (!m) {
		m = calloc(1, sizeof(*m));
		if (!m) {
			*err = ENOMEM;
		} else {
			m->mr = ibv_reg_mr(pd, addr, len, access);
			if (!m->mr) {
				*err = errno ? errno : ENOMEM;
				free(m);
				m = NULL;
			} else {
				m->pd = pd;
				m->addr = addr;
				m->len = len;
				m->access = access;
				m->next = regions;
				regions = m;
			}
		}
	}
	if (m)
		m->refs++;
	pthread_mutex_unlock(&registry_lock);
	return m;
}

static void mr_put(struct vb_mr *m)
{
	struct vb_mr **pp;

	if (!m)
		return;
	pthread_mutex_lock(&registry_lock);
	if (--m->refs == 0) {
		for (pp = &regions; *pp; pp = &(*pp)->next)
			if (*pp == m) {
				*pp = m->next;
				break;
			}
		ibv_dereg_mr(m->mr);
		free(m);
	}
	pthread_mutex_unlock(&registry_lock);
}

/* Says why a registration failed, with the memlock limit when it is the
 * likely cause. */
static void reg_failed(struct vb_conn *c, const char *what, size_t len, int err)
{
	char lim[32];

	pthread_mutex_lock(&c->lock);
	if (err == ENOMEM || err == EPERM || err == EAGAIN) {
		rdx_memlock_limit(lim, sizeof(lim), NULL);
		fail_locked(c, -RDX_ENOTSUP,
			    "cannot register %zu KiB of %s with %s: %s (memlock limit %s; raise it with ulimit -l or /etc/security/limits.d)",
			    len >> 10, what, ibv_get_device_name(c->dev->ctx->device),
			    strerror(err), lim);
	} else {
		fail_locked(c, -RDX_ENOTSUP, "cannot register %s with %s: %s", what,
			    ibv_get_device_name(c->dev->ctx->device), strerror(err));
	}
	pthread_mutex_unlock(&c->lock);
}

/* ---- CM events ---------------------------------------------------------- */

static int set_nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);

	return fl < 0 ? -errno : fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0 ? -errno : 0;
}

/* Waits for the next CM event on ch until deadline (rdx_now_ns clock) or
 * *stop; the caller acks it.  Returns 0, -RDX_ETIMEOUT or -RDX_EINTR. */
static int cm_wait(struct rdma_event_channel *ch, uint64_t deadline,
		   const atomic_int *stop, struct rdma_cm_event **ev)
{
	for (;;) {
		struct pollfd p = { .fd = ch->fd, .events = POLLIN };
		uint64_t now = rdx_now_ns();
		int ms;

		if (rdma_get_cm_event(ch, ev) == 0)
			return 0;
		if (errno != EAGAIN && errno != EWOULDBLOCK)
			return -errno;
		if (stop && atomic_load(stop))
			return -RDX_EINTR;
		if (now >= deadline)
			return -RDX_ETIMEOUT;
		ms = (int)((deadline - now) / 1000000) + 1;
		poll(&p, 1, ms > 100 ? 100 : ms);
	}
}

static const char *cm_reject_reason(const struct rdma_cm_event *ev)
{
	/* On RoCE and IB, a port nobody listens on is rejected by the CM
	 * with "invalid service ID" (8) or consumer-defined (28). */
	switch (ev->status) {
	case 8:
		return "nothing listening on that port";
	case 28:
		return "rejected by the receiver";
	default:
		return "rejected";
	}
}

/* ---- connection resources ----------------------------------------------- */

static int post_recv(struct vb_conn *c, unsigned i)
{
	struct ibv_sge sge = { .addr = (uintptr_t)(c->rbuf + (size_t)i * MSG_SIZE),
			       .length = MSG_SIZE,
			       .lkey = c->rmr->lkey };
	struct ibv_recv_wr wr = { .wr_id = WR_ID(WR_RECV, i), .sg_list = &sge,
				  .num_sge = 1 };
	struct ibv_recv_wr *bad;

	return ibv_post_recv(c->qp, &wr, &bad) ? -errno : 0;
}

static struct vb_conn *conn_alloc(void)
{
	struct vb_conn *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->base.ops = &rdx_xport_verbs;
	c->cur_buf = -1;
	c->timeout_ms = 60000;
	pthread_mutex_init(&c->lock, NULL);
	pthread_cond_init(&c->cond, NULL);
	return c;
}

/* Creates the PD (shared), CQ, QP and buffers on c->id and posts every
 * receive.  Explicit caps, never zero: some providers reject those. */
static int conn_setup_qp(struct vb_conn *c, unsigned nslots_hint)
{
	struct ibv_device_attr da;
	struct ibv_qp_init_attr qa = { 0 };
	unsigned i, cqe;
	int err;

	c->dev = dev_get(c->id->verbs);
	if (!c->dev)
		return -errno ? -errno : -ENOMEM;
	if (ibv_query_device(c->id->verbs, &da))
		return -errno;
	c->rq_depth = NRECV_BASE + nslots_hint;
	c->sq_depth = 2 * nslots_hint + NSEND + 8;
	if ((int)c->rq_depth > da.max_qp_wr)
		c->rq_depth = (unsigned)da.max_qp_wr;
	if ((int)c->sq_depth > da.max_qp_wr)
		c->sq_depth = (unsigned)da.max_qp_wr;
	cqe = c->rq_depth + c->sq_depth;
	if ((int)cqe > da.max_cqe) {
		c->rq_depth = (unsigned)da.max_cqe / 3;
		c->sq_depth = (unsigned)da.max_cqe - c->rq_depth;
		cqe = (unsigned)da.max_cqe;
	}
	if (c->rq_depth < NRECV_BASE + 8 || c->sq_depth < NSEND + 8)
		return -ENOSPC; /* a device this small cannot carry a session */
	c->remote_rd = da.max_qp_init_rd_atom < 4 ? (unsigned)da.max_qp_init_rd_atom : 4;
	c->cc = ibv_create_comp_channel(c->id->verbs);
	if (!c->cc)
		return -errno;
	c->cq = ibv_create_cq(c->id->verbs, (int)cqe, c, c->cc, 0);
	if (!c->cq)
		return -errno;
	qa.send_cq = c->cq;
	qa.recv_cq = c->cq;
	qa.qp_type = IBV_QPT_RC;
	qa.sq_sig_all = 0;
	qa.cap.max_send_wr = c->sq_depth;
	qa.cap.max_recv_wr = c->rq_depth;
	qa.cap.max_send_sge = 1;
	qa.cap.max_recv_sge = 1;
	qa.cap.max_inline_data = 0;
	if (rdma_create_qp(c->id, c->dev->pd, &qa))
		return -errno;
	c->qp = c->id->qp;
	c->rbuf = aligned_alloc(4096, round_page((size_t)c->rq_depth * MSG_SIZE));
	c->sbuf = aligned_alloc(4096, round_page((size_t)NSEND * MSG_SIZE));
	if (!c->rbuf || !c->sbuf)
		return -ENOMEM;
	/* The NIC writes receives behind the CPU's back: start from defined
	 * bytes, so that memory checkers (valgrind) see what it wrote as such. */
	memset(c->rbuf, 0, round_page((size_t)c->rq_depth * MSG_SIZE));
	c->rmr = ibv_reg_mr(c->dev->pd, c->rbuf, (size_t)c->rq_depth * MSG_SIZE,
			    IBV_ACCESS_LOCAL_WRITE);
	if (!c->rmr)
		return -errno;
	c->smr = ibv_reg_mr(c->dev->pd, c->sbuf, (size_t)NSEND * MSG_SIZE, 0);
	if (!c->smr)
		return -errno;
	for (i = 0; i < NSEND; i++)
		c->sfree[i] = true;
	for (i = 0; i < c->rq_depth; i++) {
		err = post_recv(c, i);
		if (err)
			return err;
	}
	err = set_nonblock(c->cc->fd);
	return err ? err : set_nonblock(c->ch->fd);
}

static void conn_destroy(struct vb_conn *c)
{
	if (!c)
		return;
	if (c->progress_started) {
		pthread_mutex_lock(&c->lock);
		c->quit = true;
		pthread_mutex_unlock(&c->lock);
		pthread_join(c->progress, NULL);
	}
	if (c->qp)
		rdma_destroy_qp(c->id);
	if (c->cq)
		ibv_destroy_cq(c->cq);
	if (c->cc)
		ibv_destroy_comp_channel(c->cc);
	if (c->rmr)
		ibv_dereg_mr(c->rmr);
	if (c->smr)
		ibv_dereg_mr(c->smr);
	if (c->hdr_mr)
		ibv_dereg_mr(c->hdr_mr);
	mr_put(c->ring_mr);
	dev_put(c->dev);
	if (c->id)
		rdma_destroy_id(c->id);
	if (c->ch)
		rdma_destroy_event_channel(c->ch);
	/* Writes that never completed are forgotten: their slots belong to a
	 * ring its owner is tearing down. */
	free(c->pend);
	free(c->hdrs);
	free(c->rbuf);
	free(c->sbuf);
	pthread_cond_destroy(&c->cond);
	pthread_mutex_destroy(&c->lock);
	free(c);
}

/* ---- the progress thread ------------------------------------------------- */

static const char *opname(enum ibv_wc_opcode op)
{
	switch (op) {
	case IBV_WC_SEND:
		return "send";
	case IBV_WC_RDMA_WRITE:
		return "RDMA write";
	case IBV_WC_RDMA_READ:
		return "RDMA read";
	case IBV_WC_RECV:
	case IBV_WC_RECV_RDMA_WITH_IMM:
		return "receive";
	default:
		return "operation";
	}
}

static const char *kindname(unsigned kind)
{
	switch (kind) {
	case WR_RECV:
		return "receive";
	case WR_CTRL:
		return "send";
	case WR_HDR:
	case WR_DATA:
		return "RDMA write";
	default:
		return "one-sided RDMA";
	}
}

static void on_pool(struct vb_conn *c, const uint8_t *m, size_t len)
{
	struct pool_desc *p = &c->pool;

	if (len != POOL_LEN || get32(m) != POOL_MAGIC || c->have_pool || c->receiver) {
		fail_locked(c, -RDX_EPROTO, "peer sent a bad slot pool description");
		return;
	}
	p->addr = get64(m + 8);
	p->hdr_addr = get64(m + 16);
	p->grant = get64(m + 24);
	p->rkey = get32(m + 32);
	p->hdr_rkey = get32(m + 36);
	p->nslots = get32(m + 40);
	p->stride = get32(m + 44);
	p->data_cap = get32(m + 48);
	p->wire_cap = get32(m + 52);
	if (p->nslots == 0 || p->nslots > 65536 || p->data_cap == 0 ||
	    p->stride < (uint64_t)p->data_cap + p->wire_cap || p->grant > p->nslots) {
		fail_locked(c, -RDX_EPROTO, "peer sent an impossible slot pool");
		return;
	}
	c->granted = p->grant;
	c->have_pool = true;
	pthread_cond_broadcast(&c->cond);
}

static void on_grant(struct vb_conn *c, const uint8_t *m, size_t len)
{
	uint64_t g;

	if (len != 8 || !c->have_pool) {
		fail_locked(c, -RDX_EPROTO, "peer sent a bad grant");
		return;
	}
	g = get64(m);
	if (g > c->granted) {
		c->granted = g;
		pthread_cond_broadcast(&c->cond);
	}
}

static void queue_arrival(struct vb_conn *c, bool data, uint32_t idx, uint32_t len)
{
	if (c->qcount == MAX_EVENTS) {
		fail_locked(c, -RDX_EPROTO, "peer sent more than it was granted");
		return;
	}
	c->q[(c->qhead + c->qcount) % MAX_EVENTS] =
		(struct arrival){ .data = data, .idx = idx, .len = len };
	c->qcount++;
	pthread_cond_broadcast(&c->cond);
}

/* One completion.  Lock held; callbacks to run after unlocking are
 * collected in done[]. */
static void on_wc(struct vb_conn *c, const struct ibv_wc *wc,
		  struct pending *done, unsigned *ndone)
{
	unsigned kind = WR_KIND(wc->wr_id), idx = WR_IDX(wc->wr_id);

	if (wc->status != IBV_WC_SUCCESS) {
		if (wc->status == IBV_WC_WR_FLUSH_ERR && kind == WR_RECV) {
			/* Idle receives flushed: the queue pair left RTS
			 * because either side disconnected.  An end, not an
			 * error; recv() still serves what arrived before. */
			c->disconnected = true;
			pthread_cond_broadcast(&c->cond);
			return;
		}
		if (wc->status == IBV_WC_WR_FLUSH_ERR)
			fail_locked(c, -RDX_ECONNECT, "connection closed with %s in flight",
				    kind == WR_DATA || kind == WR_HDR ? "RDMA writes" : "sends");
		else
			fail_locked(c, -RDX_ECONNECT, "%s failed: %s (status %d)",
				    kindname(kind), ibv_wc_status_str(wc->status),
				    (int)wc->status);
		if (kind == WR_DATA && c->pend && idx < rdx_ring_nslots(c->ring) &&
		    c->pend[idx].done) {
			c->pend[idx].err = c->err;
			done[(*ndone)++] = c->pend[idx];
			c->pend[idx].done = NULL;
			c->inflight--;
		}
		if (kind == WR_ONESIDED) {
			c->onesided = *wc;
			c->onesided_done = true;
		}
		return;
	}
	switch (kind) {
	case WR_RECV:
		if (idx >= c->rq_depth)
			break;
		if (wc->opcode == IBV_WC_RECV_RDMA_WITH_IMM) {
			uint32_t slot = ntohl(wc->imm_data);

			if (!c->receiver || !c->ring || slot >= rdx_ring_nslots(c->ring)) {
				fail_locked(c, -RDX_EPROTO, "peer wrote into a slot it was not given");
				return;
			}
			queue_arrival(c, true, slot, wc->byte_len);
			if (post_recv(c, idx))
				fail_locked(c, -RDX_ECONNECT, "cannot post a receive: %s",
					    strerror(errno));
			return;
		}
		if (wc->opcode != IBV_WC_RECV) {
			fail_locked(c, -RDX_EPROTO, "unexpected completion (%s)",
				    opname(wc->opcode));
			return;
		}
		if (wc->wc_flags & IBV_WC_WITH_IMM) {
			const uint8_t *m = c->rbuf + (size_t)idx * MSG_SIZE;

			if (ntohl(wc->imm_data) == IMM_POOL)
				on_pool(c, m, wc->byte_len);
			else if (ntohl(wc->imm_data) == IMM_GRANT)
				on_grant(c, m, wc->byte_len);
			else
				fail_locked(c, -RDX_EPROTO, "peer sent an unknown message");
			if (post_recv(c, idx))
				fail_locked(c, -RDX_ECONNECT, "cannot post a receive: %s",
					    strerror(errno));
			return;
		}
		queue_arrival(c, false, idx, wc->byte_len);
		return;
	case WR_CTRL:
		if (idx < NSEND)
			c->sfree[idx] = true;
		c->sq_used--;
		c->ctrl_out--;
		pthread_cond_broadcast(&c->cond);
		return;
	case WR_DATA:
		/* The header write before it was unsignaled: both are done. */
		c->sq_used -= 2;
		if (c->pend && idx < rdx_ring_nslots(c->ring) && c->pend[idx].done) {
			c->pend[idx].err = 0;
			done[(*ndone)++] = c->pend[idx];
			c->pend[idx].done = NULL;
			c->inflight--;
		}
		pthread_cond_broadcast(&c->cond);
		return;
	case WR_ONESIDED:
		c->sq_used--;
		c->onesided = *wc;
		c->onesided_done = true;
		pthread_cond_broadcast(&c->cond);
		return;
	default:
		break;
	}
	fail_locked(c, -RDX_EPROTO, "unexpected completion (%s)", opname(wc->opcode));
}

static void on_cm_event(struct vb_conn *c, const struct rdma_cm_event *ev)
{
	switch (ev->event) {
	case RDMA_CM_EVENT_DISCONNECTED: {
		/* Completions that came before the peer left may still sit in
		 * the CQ (its DONE, say): move the QP to error and let the
		 * flush of our idle receives, or the first empty poll after
		 * it, say "disconnected" once they have been seen. */
		struct ibv_qp_attr a = { .qp_state = IBV_QPS_ERR };

		if (c->qp)
			ibv_modify_qp(c->qp, &a, IBV_QP_STATE);
		c->peer_left = true;
		break;
	}
	case RDMA_CM_EVENT_DEVICE_REMOVAL:
		fail_locked(c, -RDX_ECONNECT, "the RDMA device was removed");
		break;
	case RDMA_CM_EVENT_ADDR_CHANGE:
		fail_locked(c, -RDX_ECONNECT, "the RDMA device's address changed");
		break;
	case RDMA_CM_EVENT_TIMEWAIT_EXIT:
	default:
		break;
	}
}

static void *progress_main(void *arg)
{
	struct vb_conn *c = arg;
	struct ibv_wc wc[16];
	struct pending done[16]; /* at most one per polled completion */
	bool armed = false;

	for (;;) {
		unsigned ndone = 0, i;
		int n;

		pthread_mutex_lock(&c->lock);
		if (c->quit) {
			pthread_mutex_unlock(&c->lock);
			break;
		}
		n = ibv_poll_cq(c->cq, 16, wc);
		if (n == 0 && !armed) {
			/* Arm, then poll again: a completion that came in
			 * between would otherwise wait for the next event. */
			ibv_req_notify_cq(c->cq, 0);
			armed = true;
			n = ibv_poll_cq(c->cq, 16, wc);
		}
		if (n < 0)
			fail_locked(c, -RDX_ECONNECT, "polling the completion queue failed");
		for (i = 0; i < (unsigned)(n > 0 ? n : 0); i++)
			on_wc(c, &wc[i], done, &ndone);
		if (n == 0 && c->peer_left && !c->disconnected) {
			c->disconnected = true;
			pthread_cond_broadcast(&c->cond);
		}
		pthread_mutex_unlock(&c->lock);
		for (i = 0; i < ndone; i++)
			done[i].done(done[i].arg, done[i].slot, done[i].err);
		if (n > 0)
			continue;

		struct pollfd p[2] = { { .fd = c->cc->fd, .events = POLLIN },
				       { .fd = c->ch->fd, .events = POLLIN } };

		poll(p, 2, 100);
		if (p[0].revents & POLLIN) {
			struct ibv_cq *cq;
			void *ctx;

			if (ibv_get_cq_event(c->cc, &cq, &ctx) == 0) {
				ibv_ack_cq_events(cq, 1);
				armed = false;
			}
		}
		if (p[1].revents & POLLIN) {
			struct rdma_cm_event *ev;

			while (rdma_get_cm_event(c->ch, &ev) == 0) {
				pthread_mutex_lock(&c->lock);
				on_cm_event(c, ev);
				pthread_mutex_unlock(&c->lock);
				rdma_ack_cm_event(ev);
			}
		}
	}
	return NULL;
}

static int start_progress(struct vb_conn *c)
{
	int ret = pthread_create(&c->progress, NULL, progress_main, c);

	if (ret)
		return -ret;
	c->progress_started = true;
	return 0;
}

/* ---- waiting ------------------------------------------------------------- */

/* Waits on c->cond for at most ms.  Lock held. */
static void nap(struct vb_conn *c, unsigned ms)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_nsec += (long)ms * 1000000;
	while (ts.tv_nsec >= 1000000000) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000;
	}
	pthread_cond_timedwait(&c->cond, &c->lock, &ts);
}

/* Waits on c->cond for up to 100 ms.  Returns the error that ends the wait
 * (the connection's, shutdown, timeout since since_ns, deadline, stop), or
 * 0 to check again.  Lock held. */
static int wait_tick(struct vb_conn *c, uint64_t since_ns, bool eof_ok)
{
	uint64_t now = rdx_now_ns();

	if (c->err)
		return c->err;
	if (c->shut)
		return -RDX_ECONNECT;
	if (c->disconnected)
		return eof_ok ? RDX_XPORT_EOF : -RDX_ECONNECT;
	if (c->stop && atomic_load(c->stop))
		return -RDX_EINTR;
	if (c->deadline_ns && now >= c->deadline_ns)
		return -RDX_ETIMEOUT;
	if (c->timeout_ms && now - since_ns >= c->timeout_ms * 1000000)
		return -RDX_ETIMEOUT;
	nap(c, 100);
	return 0;
}

/* ---- connect / listen / accept --------------------------------------------- */

static void fill_conn_param(struct rdma_conn_param *p, uint32_t *priv,
			    unsigned rd)
{
	memset(p, 0, sizeof(*p));
	*priv = htonl(PRIV_MAGIC);
	p->private_data = priv;
	p->private_data_len = sizeof(*priv);
	p->responder_resources = (uint8_t)rd;
	p->initiator_depth = (uint8_t)rd;
	p->retry_count = RETRY_COUNT;
	p->rnr_retry_count = RNR_RETRY;
}

static int resolve_host(const char *host, const char *port, int family,
			int flags, struct addrinfo **res)
{
	struct addrinfo hints = { .ai_family = family, .ai_socktype = SOCK_STREAM,
				  .ai_flags = flags };
	char buf[256];
	size_t n;
	int ret;

	if (host && host[0] == '[') {
		n = strlen(host);
		if (n < 3 || host[n - 1] != ']' || n - 2 >= sizeof(buf))
			return -EINVAL;
		memcpy(buf, host + 1, n - 2);
		buf[n - 2] = 0;
		host = buf;
	}
	ret = getaddrinfo(host, port, &hints, res);
	if (ret == EAI_NONAME || ret == EAI_NODATA || ret == EAI_FAMILY)
		return -ENOENT;
	return ret ? -EINVAL : 0;
}

/* One attempt: resolve, build the queue pair, connect.  Returns 0, a
 * positive errno worth retrying (refused, unreachable), or a negative
 * error that ends connecting. */
static int try_connect(struct vb_conn *c, const struct sockaddr *src,
		       const struct sockaddr *dst, uint64_t deadline,
		       const atomic_int *stop)
{
	struct rdma_cm_event *ev;
	struct rdma_conn_param param;
	uint32_t priv;
	enum rdma_cm_event_type type;
	int status, ret;
	/* Each step of one attempt gets its own bound; the caller's deadline
	 * only decides whether to try again. */
	uint64_t step = rdx_now_ns() + (uint64_t)CM_TIMEOUT_MS * 1000000;

	(void)deadline;
	c->ch = rdma_create_event_channel();
	if (!c->ch)
		return errno == ENODEV || errno == ENOENT ? -RDX_ENOTSUP : -errno;
	if (set_nonblock(c->ch->fd) ||
	    rdma_create_id(c->ch, &c->id, c, RDMA_PS_TCP))
		return -errno;
	if (rdma_resolve_addr(c->id, (struct sockaddr *)src, (struct sockaddr *)dst,
			      CM_TIMEOUT_MS))
		return errno == EADDRNOTAVAIL || errno == ENODEV ? ENETUNREACH : -errno;
	ret = cm_wait(c->ch, step, stop, &ev);
	if (ret)
		return ret == -RDX_ETIMEOUT ? ETIMEDOUT : ret;
	type = ev->event;
	status = ev->status;
	rdma_ack_cm_event(ev);
	if (type == RDMA_CM_EVENT_ADDR_ERROR)
		return ENETUNREACH;
	if (type != RDMA_CM_EVENT_ADDR_RESOLVED)
		return -EPROTO;
	if (rdma_resolve_route(c->id, CM_TIMEOUT_MS))
		return -errno;
	ret = cm_wait(c->ch, step, stop, &ev);
	if (ret)
		return ret == -RDX_ETIMEOUT ? ETIMEDOUT : ret;
	type = ev->event;
	rdma_ack_cm_event(ev);
	if (type == RDMA_CM_EVENT_ROUTE_ERROR)
		return EHOSTUNREACH;
	if (type != RDMA_CM_EVENT_ROUTE_RESOLVED)
		return -EPROTO;
	if (c->id->verbs->device->transport_type == IBV_TRANSPORT_IWARP) {
		snprintf(c->base.why, sizeof(c->base.why),
			 "the route goes through an iWARP device (%s), which is not supported",
			 ibv_get_device_name(c->id->verbs->device));
		return -RDX_ENOTSUP;
	}
	ret = conn_setup_qp(c, 64);
	if (ret)
		return ret;
	fill_conn_param(&param, &priv, c->remote_rd);
	if (rdma_connect(c->id, &param))
		return -errno;
	step = rdx_now_ns() + (uint64_t)ESTABLISH_MS * 1000000;
	ret = cm_wait(c->ch, step, stop, &ev);
	if (ret)
		return ret == -RDX_ETIMEOUT ? ETIMEDOUT : ret;
	type = ev->event;
	status = ev->status;
	if (type == RDMA_CM_EVENT_REJECTED)
		snprintf(c->base.why, sizeof(c->base.why), "%s", cm_reject_reason(ev));
	rdma_ack_cm_event(ev);
	switch (type) {
	case RDMA_CM_EVENT_ESTABLISHED:
		return 0;
	case RDMA_CM_EVENT_REJECTED:
		return ECONNREFUSED;
	case RDMA_CM_EVENT_UNREACHABLE:
	case RDMA_CM_EVENT_CONNECT_ERROR:
		(void)status;
		return EHOSTUNREACH;
	default:
		return -EPROTO;
	}
}

static void conn_reset(struct vb_conn *c)
{
	if (c->qp)
		rdma_destroy_qp(c->id);
	if (c->cq)
		ibv_destroy_cq(c->cq);
	if (c->cc)
		ibv_destroy_comp_channel(c->cc);
	if (c->rmr)
		ibv_dereg_mr(c->rmr);
	if (c->smr)
		ibv_dereg_mr(c->smr);
	dev_put(c->dev);
	if (c->id)
		rdma_destroy_id(c->id);
	if (c->ch)
		rdma_destroy_event_channel(c->ch);
	free(c->rbuf);
	free(c->sbuf);
	c->qp = NULL;
	c->cq = NULL;
	c->cc = NULL;
	c->rmr = c->smr = NULL;
	c->dev = NULL;
	c->id = NULL;
	c->ch = NULL;
	c->rbuf = c->sbuf = NULL;
	c->base.why[0] = 0;
}

static int verbs_connect(const struct rdx_net_opts *o, const char *host,
			 const char *port, uint64_t deadline_ns,
			 const atomic_int *stop, int *last_err,
			 struct rdx_conn **out)
{
	struct addrinfo *dst = NULL, *src = NULL;
	struct vb_conn *c;
	int ret;

	*last_err = 0;
	if (rdx_verbs_unavailable()) {
		*last_err = ENODEV;
		return -RDX_ENOTSUP;
	}
	ret = resolve_host(host, port, o->family, 0, &dst);
	if (ret)
		return ret;
	if (o->bind) {
		ret = resolve_host(o->bind, NULL, dst->ai_family, AI_PASSIVE, &src);
		if (ret) {
			freeaddrinfo(dst);
			*last_err = ENOENT;
			return -RDX_ECONNECT;
		}
	}
	c = conn_alloc();
	if (!c) {
		ret = -ENOMEM;
		goto out;
	}
	c->timeout_ms = o->timeout_ms;
	for (;;) {
		ret = try_connect(c, src ? src->ai_addr : NULL, dst->ai_addr,
				  deadline_ns, stop);
		if (ret <= 0)
			break;
		*last_err = ret;
		conn_reset(c);
		if (stop && atomic_load(stop)) {
			ret = -RDX_EINTR;
			break;
		}
		if (rdx_now_ns() >= deadline_ns) {
			ret = -RDX_ECONNECT;
			break;
		}
		usleep(100000);
	}
	if (ret == -RDX_ENOTSUP)
		*last_err = ENODEV;
	if (ret == 0) {
		addr_text(rdma_get_peer_addr(c->id), c->base.peer, sizeof(c->base.peer));
		ret = start_progress(c);
	}
	if (ret == 0) {
		*out = &c->base;
		c = NULL;
	} else if (ret != -RDX_ECONNECT && ret != -RDX_EINTR && ret != -RDX_ENOTSUP) {
		*last_err = ret < 0 ? -ret : ret;
		ret = -RDX_ECONNECT;
	}
	conn_destroy(c);
out:
	freeaddrinfo(dst);
	if (src)
		freeaddrinfo(src);
	return ret;
}

static int verbs_listen(const struct rdx_net_opts *o, const char *port,
			struct rdx_listener **out)
{
	struct vb_listener *l;
	struct addrinfo *ai = NULL;
	struct sockaddr_in6 any6 = { .sin6_family = AF_INET6 };
	struct sockaddr_in any4 = { .sin_family = AF_INET };
	struct sockaddr *sa;
	uint64_t p;
	int ret;

	if (rdx_verbs_unavailable())
		return -RDX_ENOTSUP;
	if (rdx_parse_uint(port, 0, 65535, &p))
		return -EINVAL;
	l = calloc(1, sizeof(*l));
	if (!l)
		return -ENOMEM;
	l->base.ops = &rdx_xport_verbs;
	if (o->bind) {
		ret = resolve_host(o->bind, port, o->family, AI_PASSIVE, &ai);
		if (ret)
			goto fail;
		sa = ai->ai_addr;
	} else if (o->family == AF_INET) {
		any4.sin_port = htons((uint16_t)p);
		sa = (struct sockaddr *)&any4;
	} else {
		any6.sin6_port = htons((uint16_t)p);
		sa = (struct sockaddr *)&any6;
	}
	l->ch = rdma_create_event_channel();
	if (!l->ch) {
		ret = -errno;
		goto fail;
	}
	if (set_nonblock(l->ch->fd) || rdma_create_id(l->ch, &l->id, l, RDMA_PS_TCP)) {
		ret = -errno;
		goto fail;
	}
	if (o->family == AF_INET6 && !o->bind) {
		int one = 1;

		rdma_set_option(l->id, RDMA_OPTION_ID, RDMA_OPTION_ID_AFONLY, &one,
				sizeof(one));
	}
	if (rdma_bind_addr(l->id, sa) || rdma_listen(l->id, 16)) {
		ret = -errno;
		goto fail;
	}
	l->port = ntohs(rdma_get_src_port(l->id));
	if (ai)
		freeaddrinfo(ai);
	*out = &l->base;
	return 0;
fail:
	if (ai)
		freeaddrinfo(ai);
	if (l->id)
		rdma_destroy_id(l->id);
	if (l->ch)
		rdma_destroy_event_channel(l->ch);
	free(l);
	return ret;
}

static unsigned verbs_listen_port(struct rdx_listener *lb)
{
	return ((struct vb_listener *)lb)->port;
}

/* Takes over a connection request: its own event channel, a queue pair,
 * accept, and wait (briefly) for it to be established. */
static int take_request(struct vb_conn *c, struct rdma_cm_id *id,
			unsigned peer_rd, uint64_t deadline)
{
	struct rdma_conn_param param;
	struct rdma_cm_event *ev;
	uint32_t priv;
	enum rdma_cm_event_type type;
	int ret;

	c->id = id;
	c->ch = rdma_create_event_channel();
	if (!c->ch)
		return -errno;
	if (set_nonblock(c->ch->fd) || rdma_migrate_id(id, c->ch))
		return -errno;
	ret = conn_setup_qp(c, 64);
	if (ret)
		return ret;
	if (peer_rd < c->remote_rd)
		c->remote_rd = peer_rd;
	fill_conn_param(&param, &priv, c->remote_rd);
	param.private_data = NULL;
	param.private_data_len = 0;
	if (rdma_accept(id, &param))
		return -errno;
	ret = cm_wait(c->ch, deadline, NULL, &ev);
	if (ret)
		return ret;
	type = ev->event;
	rdma_ack_cm_event(ev);
	if (type != RDMA_CM_EVENT_ESTABLISHED)
		return -RDX_ECONNECT;
	addr_text(rdma_get_peer_addr(id), c->base.peer, sizeof(c->base.peer));
	return start_progress(c);
}

static int verbs_accept(struct rdx_listener *lb, const struct rdx_net_opts *o,
			int wait_ms, struct rdx_conn **out)
{
	struct vb_listener *l = (struct vb_listener *)lb;
	uint64_t deadline = rdx_now_ns() + (uint64_t)wait_ms * 1000000;
	struct rdma_cm_event *ev;
	struct rdma_cm_id *id;
	struct vb_conn *c;
	unsigned peer_rd;
	bool ours;
	int ret;

	for (;;) {
		ret = cm_wait(l->ch, deadline, NULL, &ev);
		if (ret == -RDX_ETIMEOUT)
			return -EAGAIN;
		if (ret)
			return ret;
		if (ev->event == RDMA_CM_EVENT_CONNECT_REQUEST)
			break;
		/* Events of ids not yet migrated (a request we rejected). */
		if (ev->event == RDMA_CM_EVENT_DEVICE_REMOVAL) {
			rdma_ack_cm_event(ev);
			return -ENODEV;
		}
		rdma_ack_cm_event(ev);
	}
	id = ev->id;
	ours = ev->param.conn.private_data_len >= 4 &&
	       get32(ev->param.conn.private_data) == PRIV_MAGIC;
	peer_rd = ev->param.conn.initiator_depth;
	rdma_ack_cm_event(ev);
	if (!ours) {
		char from[96];

		addr_text(rdma_get_peer_addr(id), from, sizeof(from));
		rdx_info(1, "rejected an RDMA connection request from %s: not an rdxfer sender",
			 from);
		rdma_reject(id, NULL, 0);
		rdma_destroy_id(id);
		return -EAGAIN;
	}
	c = conn_alloc();
	if (!c) {
		rdma_reject(id, NULL, 0);
		rdma_destroy_id(id);
		return -ENOMEM;
	}
	c->timeout_ms = o->timeout_ms;
	ret = take_request(c, id, peer_rd,
			   rdx_now_ns() + (uint64_t)ESTABLISH_MS * 1000000);
	if (ret) {
		/* Whatever went wrong with one request (the peer gave up,
		 * rejected our reply, vanished), the listener lives on. */
		char from[96];

		addr_text(rdma_get_peer_addr(id), from, sizeof(from));
		rdx_info(1, "dropped an RDMA connection request from %s: %s", from,
			 rdx_strerror(ret));
		if (!c->qp)
			rdma_reject(id, NULL, 0);
		conn_destroy(c);
		return ret == -ENOMEM ? ret : -EAGAIN;
	}
	*out = &c->base;
	return 0;
}

static void verbs_close_listener(struct rdx_listener *lb)
{
	struct vb_listener *l = (struct vb_listener *)lb;

	rdma_destroy_id(l->id);
	rdma_destroy_event_channel(l->ch);
	free(l);
}

/* ---- sending and receiving ------------------------------------------------ */

/* Posts one SEND (with an immediate when imm != 0) from a bounce buffer.
 * Waits for a free buffer, bounded by the timeout. */
static int post_ctrl(struct vb_conn *c, const void *a, size_t alen,
		     const void *b, size_t blen, uint32_t imm)
{
	uint64_t since = rdx_now_ns();
	struct ibv_send_wr wr = { 0 }, *bad;
	struct ibv_sge sge;
	unsigned i;
	int ret = 0;

	if (alen + blen > MSG_SIZE)
		return -EMSGSIZE;
	pthread_mutex_lock(&c->lock);
	for (;;) {
		for (i = 0; i < NSEND; i++)
			if (c->sfree[i])
				break;
		if (i < NSEND && c->sq_used < c->sq_depth)
			break;
		ret = wait_tick(c, since, false);
		if (ret)
			goto out;
	}
	if (c->err || c->shut) {
		ret = c->err ? c->err : -RDX_ECONNECT;
		goto out;
	}
	c->sfree[i] = false;
	memcpy(c->sbuf + (size_t)i * MSG_SIZE, a, alen);
	if (blen)
		memcpy(c->sbuf + (size_t)i * MSG_SIZE + alen, b, blen);
	sge = (struct ibv_sge){ .addr = (uintptr_t)(c->sbuf + (size_t)i * MSG_SIZE),
				.length = (uint32_t)(alen + blen),
				.lkey = c->smr->lkey };
	wr.wr_id = WR_ID(WR_CTRL, i);
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = imm ? IBV_WR_SEND_WITH_IMM : IBV_WR_SEND;
	wr.imm_data = htonl(imm);
	wr.send_flags = IBV_SEND_SIGNALED;
	if (ibv_post_send(c->qp, &wr, &bad)) {
		c->sfree[i] = true;
		ret = fail_locked(c, -RDX_ECONNECT, "cannot post a send: %s",
				  strerror(errno));
		goto out;
	}
	c->sq_used++;
	c->ctrl_out++;
out:
	pthread_mutex_unlock(&c->lock);
	return ret;
}

static int verbs_send(struct rdx_conn *cb, const struct rdx_frame_hdr *h,
		      const void *payload)
{
	uint8_t raw[RDX_HDR_LEN];

	rdx_hdr_encode(h, raw);
	return post_ctrl(vb_of(cb), raw, sizeof(raw), payload, h->len, 0);
}

/* The landing address of a DATA payload in the receiver's own ring. */
static uint8_t *landing(struct vb_conn *c, uint32_t idx, uint8_t flags)
{
	struct rdx_slot *s = rdx_ring_slot(c->ring, idx);

	return (flags & (RDX_FL_SEALED | RDX_FL_COMPRESSED)) ? s->wire : s->data;
}

/* Makes the next arrival the current one.  Lock held. */
static int next_arrival(struct vb_conn *c)
{
	struct arrival a = c->q[c->qhead];
	struct rdx_frame_hdr h;
	const uint8_t *hdr;

	c->qhead = (c->qhead + 1) % MAX_EVENTS;
	c->qcount--;
	if (!a.data) {
		c->cur = c->rbuf + (size_t)a.idx * MSG_SIZE;
		c->cur_left = a.len;
		c->cur_buf = (int)a.idx;
		c->cur_next = NULL;
		c->cur_next_left = 0;
		return 0;
	}
	/* A placed payload: its header was written just before it, into
	 * the table entry of the same slot.  Checked here so that the bytes
	 * served are exactly one frame that lies where the header says. */
	hdr = c->hdrs + (size_t)a.idx * HDR_STRIDE;
	memcpy(c->cur_hdr, hdr, RDX_HDR_LEN);
	hdr = c->cur_hdr;
	if (rdx_hdr_decode(hdr, UINT32_MAX, &h) || h.type != RDX_F_DATA ||
	    h.len != a.len || h.seq % rdx_ring_nslots(c->ring) != a.idx ||
	    h.len > ((h.flags & (RDX_FL_SEALED | RDX_FL_COMPRESSED))
			     ? rdx_ring_wire_size(c->ring)
			     : rdx_ring_slot_size(c->ring)))
		return fail_locked(c, -RDX_EPROTO, "peer's RDMA write does not match its header");
	c->cur = c->cur_hdr; /* a copy: the peer could write the table again */
	c->cur_left = RDX_HDR_LEN;
	c->cur_buf = -1;
	c->cur_next = landing(c, a.idx, h.flags);
	c->cur_next_left = a.len;
	return 0;
}

/* Serves arrivals as a byte stream.  A DATA payload read into the very
 * place it was written to is not copied. */
static int verbs_recv(struct rdx_conn *cb, void *buf, size_t len)
{
	struct vb_conn *c = vb_of(cb);
	uint8_t *out = buf;
	uint64_t since = rdx_now_ns();
	bool started = false;
	int ret = 0;

	pthread_mutex_lock(&c->lock);
	while (len) {
		size_t k;

		if (!c->cur_left && c->cur_next_left) {
			c->cur = c->cur_next;
			c->cur_left = c->cur_next_left;
			c->cur_next_left = 0;
		}
		if (!c->cur_left) {
			if (c->cur_buf >= 0) {
				if (post_recv(c, (unsigned)c->cur_buf)) {
					ret = fail_locked(c, -RDX_ECONNECT,
							  "cannot post a receive: %s",
							  strerror(errno));
					break;
				}
				c->cur_buf = -1;
			}
			if (c->qcount) {
				ret = next_arrival(c);
				if (ret)
					break;
				continue;
			}
			ret = wait_tick(c, since, !started);
			if (ret == RDX_XPORT_EOF && started)
				ret = -RDX_ECONNECT;
			if (ret)
				break;
			continue;
		}
		k = len < c->cur_left ? len : c->cur_left;
		if (out != c->cur)
			memcpy(out, c->cur, k);
		out += k;
		c->cur += k;
		c->cur_left -= k;
		len -= k;
		started = true;
	}
	pthread_mutex_unlock(&c->lock);
	return ret;
}

/* Every placed payload consumes a posted receive (for its immediate), so
 * what is granted ahead never exceeds what the receive queue can take. */
static uint64_t clamp_grant(const struct vb_conn *c, uint64_t below)
{
	unsigned n = rdx_ring_nslots(c->ring), window = c->rq_depth - NRECV_BASE;

	/* conn_setup_qp guarantees rq_depth > NRECV_BASE. */

	return n > window ? below - (n - window) : below;
}

/* Sends the receiver's ring description with its first grant. */
static int send_pool(struct vb_conn *c, uint64_t grant)
{
	struct rdx_ring *r = c->ring;
	struct rdx_slot *s0 = rdx_ring_slot(r, 0);
	struct rdx_slot *s1 = rdx_ring_slot(r, rdx_ring_nslots(r) > 1 ? 1 : 0);
	uint8_t m[POOL_LEN] = { 0 };

	put32(m, POOL_MAGIC);
	put64(m + 8, (uintptr_t)s0->data);
	put64(m + 16, (uintptr_t)c->hdrs);
	put64(m + 24, grant);
	put32(m + 32, c->ring_mr->mr->rkey);
	put32(m + 36, c->hdr_mr->rkey);
	put32(m + 40, rdx_ring_nslots(r));
	put32(m + 44, rdx_ring_nslots(r) > 1
			      ? (uint32_t)((uint8_t *)s1->data - (uint8_t *)s0->data)
			      : (uint32_t)(rdx_ring_slot_size(r) + rdx_ring_wire_size(r)));
	put32(m + 48, (uint32_t)rdx_ring_slot_size(r));
	put32(m + 52, (uint32_t)rdx_ring_wire_size(r));
	return post_ctrl(c, m, sizeof(m), NULL, 0, IMM_POOL);
}

static int verbs_attach(struct rdx_conn *cb, struct rdx_ring *r, bool receiver,
			uint64_t deadline_ns)
{
	struct vb_conn *c = vb_of(cb);
	unsigned n = rdx_ring_nslots(r);
	size_t len, hlen = (size_t)n * HDR_STRIDE;
	void *mem = rdx_ring_mem(r, &len);
	int access = receiver ? IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE : 0;
	int err = 0, ret = 0;

	c->ring = r;
	c->receiver = receiver;
	c->ring_mr = mr_get(c->dev->pd, mem, len, access, &err);
	if (!c->ring_mr) {
		reg_failed(c, "slots", len, err);
		return -RDX_ENOTSUP;
	}
	c->hdrs = aligned_alloc(4096, round_page(hlen));
	if (!c->hdrs)
		return -ENOMEM;
	memset(c->hdrs, 0, hlen);
	c->hdr_mr = ibv_reg_mr(c->dev->pd, c->hdrs, hlen, access);
	if (!c->hdr_mr) {
		reg_failed(c, "the header table", hlen, errno);
		return -RDX_ENOTSUP;
	}
	if (receiver) {
		c->last_grant = clamp_grant(c, rdx_ring_writable_below(r));
		return send_pool(c, c->last_grant);
	}
	c->pend = calloc(n, sizeof(*c->pend));
	if (!c->pend)
		return -ENOMEM;
	pthread_mutex_lock(&c->lock);
	while (!c->have_pool) {
		uint64_t saved = c->deadline_ns;

		c->deadline_ns = deadline_ns;
		ret = wait_tick(c, rdx_now_ns(), false);
		c->deadline_ns = saved;
		if (ret)
			break;
	}
	pthread_mutex_unlock(&c->lock);
	return ret;
}

static int verbs_send_data(struct rdx_conn *cb, const struct rdx_frame_hdr *h,
			   const void *payload, struct rdx_slot *slot,
			   rdx_sent_fn done, void *arg)
{
	struct vb_conn *c = vb_of(cb);
	const struct pool_desc *p = &c->pool;
	bool wire = h->flags & (RDX_FL_SEALED | RDX_FL_COMPRESSED);
	uint64_t since = rdx_now_ns();
	size_t len;
	uint8_t *mem = rdx_ring_mem(c->ring, &len);
	uint8_t *hdr = c->hdrs + (size_t)slot->index * HDR_STRIDE;
	const uint8_t *pl = payload;
	struct ibv_sge sh, sd;
	struct ibv_send_wr wh = { 0 }, wd = { 0 }, *bad;
	uint32_t idx;
	int ret = 0;

	if (pl < mem || pl + h->len > mem + len || h->len > (wire ? p->wire_cap : p->data_cap))
		return -EINVAL;
	pthread_mutex_lock(&c->lock);
	/* Credit first: the receiver's slot for this chunk must be free. */
	while (!c->err && !c->shut && (h->seq >= c->granted || c->sq_used + 2 > c->sq_depth)) {
		ret = wait_tick(c, since, false);
		if (ret)
			break;
	}
	if (!ret && (c->err || c->shut))
		ret = c->err ? c->err : -RDX_ECONNECT;
	if (ret == -RDX_ETIMEOUT)
		fail_locked(c, ret, "receiver granted no room for %.0f s",
			    (double)c->timeout_ms / 1000);
	if (ret)
		goto out;
	idx = (uint32_t)(h->seq % p->nslots);
	rdx_hdr_encode(h, hdr);
	sh = (struct ibv_sge){ .addr = (uintptr_t)hdr, .length = RDX_HDR_LEN,
			       .lkey = c->hdr_mr->lkey };
	sd = (struct ibv_sge){ .addr = (uintptr_t)pl, .length = h->len,
			       .lkey = c->ring_mr->mr->lkey };
	wh.wr_id = WR_ID(WR_HDR, slot->index);
	wh.sg_list = &sh;
	wh.num_sge = 1;
	wh.opcode = IBV_WR_RDMA_WRITE;
	wh.wr.rdma.remote_addr = p->hdr_addr + (uint64_t)idx * HDR_STRIDE;
	wh.wr.rdma.rkey = p->hdr_rkey;
	wh.next = &wd;
	wd.wr_id = WR_ID(WR_DATA, slot->index);
	wd.sg_list = &sd;
	wd.num_sge = 1;
	wd.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
	wd.imm_data = htonl(idx);
	wd.send_flags = IBV_SEND_SIGNALED;
	wd.wr.rdma.remote_addr = p->addr + (uint64_t)idx * p->stride + (wire ? p->data_cap : 0);
	wd.wr.rdma.rkey = p->rkey;
	c->pend[slot->index] = (struct pending){ .done = done, .arg = arg, .slot = slot };
	if (ibv_post_send(c->qp, &wh, &bad)) {
		/* Even if the header write went out, nothing completes it
		 * (it is unsignaled): the connection is done for. */
		c->pend[slot->index].done = NULL;
		ret = fail_locked(c, -RDX_ECONNECT, "cannot post an RDMA write: %s",
				  strerror(errno));
		goto out;
	}
	c->sq_used += 2;
	c->inflight++;
out:
	pthread_mutex_unlock(&c->lock);
	return ret;
}

static void verbs_grant(struct rdx_conn *cb, uint64_t below)
{
	struct vb_conn *c = vb_of(cb);
	unsigned n = rdx_ring_nslots(c->ring), window = c->rq_depth - NRECV_BASE;
	unsigned step = (n < window ? n : window) / 8;
	uint64_t g = clamp_grant(c, below);
	uint8_t m[8];

	/* One grant per eighth of what may be in flight: few messages, and
	 * progress is certain, since once everything granted is released the
	 * new grant is a whole window ahead. */
	pthread_mutex_lock(&c->lock);
	if (g < c->last_grant + (step ? step : 1)) {
		pthread_mutex_unlock(&c->lock);
		return;
	}
	c->last_grant = g;
	pthread_mutex_unlock(&c->lock);
	put64(m, g);
	post_ctrl(c, m, sizeof(m), NULL, 0, IMM_GRANT);
}

static void verbs_set_timeout(struct rdx_conn *cb, uint64_t ms)
{
	struct vb_conn *c = vb_of(cb);

	pthread_mutex_lock(&c->lock);
	c->timeout_ms = ms;
	pthread_mutex_unlock(&c->lock);
}

static void verbs_set_deadline(struct rdx_conn *cb, uint64_t deadline_ns,
			       const atomic_int *stop)
{
	struct vb_conn *c = vb_of(cb);

	pthread_mutex_lock(&c->lock);
	c->deadline_ns = deadline_ns;
	c->stop = stop;
	pthread_mutex_unlock(&c->lock);
}

static void verbs_shutdown(struct rdx_conn *cb)
{
	struct vb_conn *c = vb_of(cb);

	uint64_t ms = c->timeout_ms && c->timeout_ms < 1000 ? c->timeout_ms : 1000;
	uint64_t until = rdx_now_ns() + ms * 1000000;

	pthread_mutex_lock(&c->lock);
	c->shut = true;
	pthread_cond_broadcast(&c->cond);
	/* rdma_disconnect moves the QP to error at once, dropping what is
	 * not yet acknowledged: let the last control frames (DONE, ERROR)
	 * complete first, as TCP would send queued bytes before its FIN. */
	while (c->ctrl_out && !c->err && !c->disconnected && rdx_now_ns() < until)
		nap(c, 20);
	pthread_mutex_unlock(&c->lock);
	/* The peer sees DISCONNECTED, as a TCP peer would see the FIN. */
	rdma_disconnect(c->id);
}

static void verbs_close_gently(struct rdx_conn *cb, int wait_ms)
{
	struct vb_conn *c = vb_of(cb);
	uint64_t until = rdx_now_ns() + (uint64_t)wait_ms * 1000000;

	/* Let our last sends complete (acknowledged: the peer has them),
	 * then give the peer a moment to hang up first. */
	pthread_mutex_lock(&c->lock);
	while (c->sq_used && !c->err && rdx_now_ns() < until)
		if (wait_tick(c, rdx_now_ns(), true))
			break;
	while (!c->disconnected && !c->err && rdx_now_ns() < until)
		if (wait_tick(c, rdx_now_ns(), true))
			break;
	pthread_mutex_unlock(&c->lock);
	rdma_disconnect(c->id);
	conn_destroy(c);
}

static void verbs_close(struct rdx_conn *cb)
{
	struct vb_conn *c = vb_of(cb);

	rdma_disconnect(c->id);
	conn_destroy(c);
}

/* ---- one-sided access ---------------------------------------------------- */

int rdx_verbs_reg(struct rdx_conn *cb, void *buf, size_t len, bool remote_write,
		  bool remote_read, struct rdx_verbs_mr **out)
{
	struct vb_conn *c = vb_of(cb);
	int access = IBV_ACCESS_LOCAL_WRITE;
	struct ibv_mr *mr;

	if (cb->ops != &rdx_xport_verbs)
		return -RDX_ENOTSUP;
	if (remote_write)
		access |= IBV_ACCESS_REMOTE_WRITE;
	if (remote_read)
		access |= IBV_ACCESS_REMOTE_READ;
	mr = ibv_reg_mr(c->dev->pd, buf, len, access);
	if (!mr) {
		reg_failed(c, "a buffer", len, errno);
		return -RDX_ENOTSUP;
	}
	*out = (struct rdx_verbs_mr *)mr;
	return 0;
}

void rdx_verbs_desc(const struct rdx_verbs_mr *m, struct rdx_verbs_remote *d)
{
	const struct ibv_mr *mr = (const struct ibv_mr *)m;

	d->addr = (uintptr_t)mr->addr;
	d->rkey = mr->rkey;
	d->len = mr->length;
}

void rdx_verbs_dereg(struct rdx_verbs_mr *m)
{
	if (m)
		ibv_dereg_mr((struct ibv_mr *)m);
}

int rdx_verbs_rw(struct rdx_conn *cb, bool write, struct rdx_verbs_mr *m,
		 void *local, size_t len, const struct rdx_verbs_remote *r,
		 uint64_t offset)
{
	struct vb_conn *c = vb_of(cb);
	struct ibv_mr *mr = (struct ibv_mr *)m;
	struct ibv_sge sge = { .addr = (uintptr_t)local, .length = (uint32_t)len,
			       .lkey = mr->lkey };
	struct ibv_send_wr wr = { 0 }, *bad;
	uint64_t since = rdx_now_ns();
	int ret = 0;

	if (cb->ops != &rdx_xport_verbs)
		return -RDX_ENOTSUP;
	/* Our own bounds; the peer's are checked by its hardware (rkey). */
	if (len > UINT32_MAX || (uint8_t *)local < (uint8_t *)mr->addr ||
	    (uint8_t *)local + len > (uint8_t *)mr->addr + mr->length)
		return -EINVAL;
	if (!write && c->remote_rd == 0)
		return -RDX_ENOTSUP;
	wr.wr_id = WR_ID(WR_ONESIDED, 0);
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = write ? IBV_WR_RDMA_WRITE : IBV_WR_RDMA_READ;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.wr.rdma.remote_addr = r->addr + offset;
	wr.wr.rdma.rkey = r->rkey;
	pthread_mutex_lock(&c->lock);
	while (!c->err && c->sq_used >= c->sq_depth && !(ret = wait_tick(c, since, false)))
		;
	if (!ret && c->err)
		ret = c->err;
	if (!ret) {
		c->onesided_done = false;
		if (ibv_post_send(c->qp, &wr, &bad))
			ret = fail_locked(c, -RDX_ECONNECT, "cannot post an RDMA %s: %s",
					  write ? "write" : "read", strerror(errno));
		else
			c->sq_used++;
	}
	while (!ret && !c->onesided_done)
		ret = c->err ? c->err : wait_tick(c, since, false);
	if (ret && c->sq_used && !c->onesided_done) {
		/* Never return while the hardware may still write into local:
		 * kill the QP and wait (bounded) for the flush. */
		struct ibv_qp_attr a = { .qp_state = IBV_QPS_ERR };
		uint64_t until = rdx_now_ns() + 2000000000ull;

		fail_locked(c, ret, "RDMA %s did not complete", write ? "write" : "read");
		ibv_modify_qp(c->qp, &a, IBV_QP_STATE);
		while (!c->onesided_done && rdx_now_ns() < until)
			nap(c, 20);
	}
	if (c->onesided_done && c->onesided.status != IBV_WC_SUCCESS)
		ret = -RDX_ECONNECT;
	pthread_mutex_unlock(&c->lock);
	return ret;
}

const struct rdx_xport_ops rdx_xport_verbs = {
	.name = "rdma",
	.connect = verbs_connect,
	.listen = verbs_listen,
	.listen_port = verbs_listen_port,
	.accept = verbs_accept,
	.close_listener = verbs_close_listener,
	.send = verbs_send,
	.recv = verbs_recv,
	.attach = verbs_attach,
	.send_data = verbs_send_data,
	.grant = verbs_grant,
	.set_timeout = verbs_set_timeout,
	.set_deadline = verbs_set_deadline,
	.shutdown = verbs_shutdown,
	.close_gently = verbs_close_gently,
	.close = verbs_close,
};

