/* A verbs connection's resources and its progress thread (see
 * verbs_int.h for the map and docs/RDMA.md for the design).
 *
 * The progress thread owns the completion queue and the CM event channel:
 * it polls, arms, polls again and only then sleeps, so no completion is
 * missed; it checks every completion's status and opcode, turns receives
 * into a queue that recv() serves as a byte stream, runs the send_data
 * callbacks, and records the first failure in words (c->base.why).
 */
#include "core/verbs/verbs_int.h"
#include "core/verbs/verbs_probe.h"

#include "core/err.h"
#include "core/units.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static struct vb_dev *devices;
static struct vb_mr *regions;

/* Records the first failure, in words, and wakes every waiter.  Lock held. */
int vb_fail(struct vb_conn *c, int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	rdx_fail_record(&c->err, c->base.why, sizeof(c->base.why), false, err, fmt, ap);
	va_end(ap);
	vb_wake(c);
	return c->err;
}

void vb_wake(struct vb_conn *c)
{
	pthread_cond_broadcast(&c->cond);
	if (c->ready_watch && c->ready_fd >= 0)
		eventfd_write(c->ready_fd, 1);
}

/* ---- devices and registrations ---------------------------------------- */

static struct vb_dev *vb_dev_get(struct ibv_context *ctx, bool own)
{
	struct vb_dev *d = NULL;

	pthread_mutex_lock(&registry_lock);
	for (d = own ? NULL : devices; d; d = d->next)
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
			} else if (!own) {
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

void vb_dev_put(struct vb_dev *d)
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
struct vb_mr *vb_mr_get(struct ibv_pd *pd, void *addr, size_t len,
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

void vb_mr_put(struct vb_mr *m)
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
void vb_reg_failed(struct vb_conn *c, const char *what, size_t len, int err)
{
	char lim[32];

	pthread_mutex_lock(&c->lock);
	if (err == ENOMEM || err == EPERM || err == EAGAIN) {
		rdx_memlock_limit(lim, sizeof(lim), NULL);
		vb_fail(c, -RDX_ENOTSUP,
			    "cannot register %zu KiB of %s with %s: %s (memlock limit %s; raise it with ulimit -l or /etc/security/limits.d)",
			    len >> 10, what, ibv_get_device_name(c->dev->ctx->device),
			    strerror(err), lim);
	} else {
		vb_fail(c, -RDX_ENOTSUP, "cannot register %s with %s: %s", what,
			    ibv_get_device_name(c->dev->ctx->device), strerror(err));
	}
	pthread_mutex_unlock(&c->lock);
}

int vb_set_nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);

	return fl < 0 ? -errno : fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0 ? -errno : 0;
}

/* ---- connection resources ----------------------------------------------- */

int vb_post_recv(struct vb_conn *c, unsigned i)
{
	struct ibv_sge sge = { .addr = (uintptr_t)(c->rbuf + (size_t)i * MSG_SIZE),
			       .length = MSG_SIZE,
			       .lkey = c->rmr->lkey };
	struct ibv_recv_wr wr = { .wr_id = WR_ID(WR_RECV, i), .sg_list = &sge,
				  .num_sge = 1 };
	struct ibv_recv_wr *bad;

	/* ibv_post_* return an errno value; errno itself is not set. */
	return -ibv_post_recv(c->qp, &wr, &bad);
}

struct vb_conn *vb_conn_alloc(const struct rdx_net_opts *o)
{
	struct vb_conn *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->base.ops = &rdx_xport_verbs;
	c->cur_buf = -1;
	c->ready_fd = -1;
	c->quit_fd = -1;
	c->timeout_ms = o->timeout_ms;
	c->own_pd = o->own_pd;
	c->ack_timeout = o->ack_timeout;
	pthread_mutex_init(&c->lock, NULL);
	pthread_cond_init(&c->cond, NULL);
	return c;
}

/* Creates the PD (shared), CQ, QP and buffers on c->id and posts every
 * receive.  Explicit caps, never zero: some providers reject those. */
int vb_setup_qp(struct vb_conn *c, unsigned nslots_hint)
{
	struct ibv_device_attr da;
	struct ibv_qp_init_attr qa = { 0 };
	unsigned i, cqe;
	int err;

	c->dev = vb_dev_get(c->id->verbs, c->own_pd);
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
		if ((int)c->sq_depth > da.max_qp_wr)
			c->sq_depth = (unsigned)da.max_qp_wr;
		cqe = c->rq_depth + c->sq_depth;
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
		err = vb_post_recv(c, i);
		if (err)
			return err;
	}
	err = vb_set_nonblock(c->cc->fd);
	return err ? err : vb_set_nonblock(c->ch->fd);
}

void vb_conn_teardown(struct vb_conn *c)
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
	if (c->hdr_mr)
		ibv_dereg_mr(c->hdr_mr);
	vb_mr_put(c->ring_mr);
	vb_dev_put(c->dev);
	if (c->id)
		rdma_destroy_id(c->id);
	if (c->ch)
		rdma_destroy_event_channel(c->ch);
	free(c->rbuf);
	free(c->sbuf);
	c->qp = NULL;
	c->cq = NULL;
	c->cc = NULL;
	c->rmr = c->smr = c->hdr_mr = NULL;
	c->ring_mr = NULL;
	c->dev = NULL;
	c->id = NULL;
	c->ch = NULL;
	c->rbuf = c->sbuf = NULL;
}

void vb_conn_destroy(struct vb_conn *c)
{
	if (!c)
		return;
	if (c->progress_started) {
		pthread_mutex_lock(&c->lock);
		c->quit = true;
		pthread_mutex_unlock(&c->lock);
		/* Not a 100 ms poll() later: every close would wait for it. */
		eventfd_write(c->quit_fd, 1);
		pthread_join(c->progress, NULL);
	}
	if (c->quit_fd >= 0)
		close(c->quit_fd);
	vb_conn_teardown(c);
	/* Writes that never completed are forgotten: their slots belong to a
	 * ring its owner is tearing down. */
	free(c->pend);
	free(c->hdrs);
	if (c->ready_fd >= 0)
		close(c->ready_fd);
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

	if (len != POOL_LEN || rdx_get32(m) != POOL_MAGIC || c->have_pool || c->receiver) {
		vb_fail(c, -RDX_EPROTO, "peer sent a bad slot pool description");
		return;
	}
	p->addr = rdx_get64(m + 8);
	p->hdr_addr = rdx_get64(m + 16);
	p->grant = rdx_get64(m + 24);
	p->rkey = rdx_get32(m + 32);
	p->hdr_rkey = rdx_get32(m + 36);
	p->nslots = rdx_get32(m + 40);
	p->stride = rdx_get32(m + 44);
	p->data_cap = rdx_get32(m + 48);
	p->wire_cap = rdx_get32(m + 52);
	if (p->nslots == 0 || p->nslots > 65536 || p->data_cap == 0 ||
	    p->stride < (uint64_t)p->data_cap + p->wire_cap || p->grant > p->nslots) {
		vb_fail(c, -RDX_EPROTO, "peer sent an impossible slot pool");
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
		vb_fail(c, -RDX_EPROTO, "peer sent a bad grant");
		return;
	}
	g = rdx_get64(m);
	if (g > c->granted) {
		c->granted = g;
		pthread_cond_broadcast(&c->cond);
	}
}

static void queue_arrival(struct vb_conn *c, bool data, uint32_t idx, uint32_t len)
{
	if (c->qcount == MAX_EVENTS) {
		vb_fail(c, -RDX_EPROTO, "peer sent more than it was granted");
		return;
	}
	c->q[(c->qhead + c->qcount) % MAX_EVENTS] =
		(struct arrival){ .data = data, .idx = idx, .len = len };
	c->qcount++;
	vb_wake(c);
}

/* One completion.  Lock held; callbacks to run after unlocking are
 * collected in done[]. */
static void on_wc(struct vb_conn *c, const struct ibv_wc *wc,
		  struct pending *done, unsigned *ndone)
{
	unsigned kind = WR_KIND(wc->wr_id), idx = WR_IDX(wc->wr_id);
	int err;

	if (wc->status != IBV_WC_SUCCESS) {
		if (wc->status == IBV_WC_WR_FLUSH_ERR && kind == WR_RECV) {
			/* Idle receives flushed: the queue pair left RTS
			 * because either side disconnected.  An end, not an
			 * error; recv() still serves what arrived before. */
			c->disconnected = true;
			vb_wake(c);
			return;
		}
		if (wc->status == IBV_WC_WR_FLUSH_ERR)
			vb_fail(c, -RDX_ECONNECT, "connection closed with %s in flight",
				    kind == WR_DATA || kind == WR_HDR ? "RDMA writes" : "sends");
		else
			vb_fail(c, -RDX_ECONNECT, "%s failed: %s (status %d)",
				    kindname(kind), ibv_wc_status_str(wc->status),
				    (int)wc->status);
		if (kind == WR_DATA && c->pend && idx < rdx_ring_nslots(c->ring) &&
		    c->pend[idx].done) {
			c->pend[idx].err = c->err;
			done[(*ndone)++] = c->pend[idx];
			c->pend[idx].done = NULL;
			c->inflight--;
		}
		if (kind == WR_ONESIDED && idx < RDX_VERBS_SLOTS) {
			c->onesided[idx] = *wc;
			c->onesided_done[idx] = true;
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
				vb_fail(c, -RDX_EPROTO, "peer wrote into a slot it was not given");
				return;
			}
			queue_arrival(c, true, slot, wc->byte_len);
			err = vb_post_recv(c, idx);
			if (err)
				vb_fail(c, -RDX_ECONNECT, "cannot post a receive: %s",
					strerror(-err));
			return;
		}
		if (wc->opcode != IBV_WC_RECV) {
			vb_fail(c, -RDX_EPROTO, "unexpected completion (%s)",
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
				vb_fail(c, -RDX_EPROTO, "peer sent an unknown message");
			err = vb_post_recv(c, idx);
			if (err)
				vb_fail(c, -RDX_ECONNECT, "cannot post a receive: %s",
					strerror(-err));
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
		if (idx < RDX_VERBS_SLOTS) {
			c->onesided[idx] = *wc;
			c->onesided_done[idx] = true;
		}
		pthread_cond_broadcast(&c->cond);
		return;
	default:
		break;
	}
	vb_fail(c, -RDX_EPROTO, "unexpected completion (%s)", opname(wc->opcode));
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
		vb_fail(c, -RDX_ECONNECT, "the RDMA device was removed");
		break;
	case RDMA_CM_EVENT_ADDR_CHANGE:
		vb_fail(c, -RDX_ECONNECT, "the RDMA device's address changed");
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
			vb_fail(c, -RDX_ECONNECT, "polling the completion queue failed");
		for (i = 0; i < (unsigned)(n > 0 ? n : 0); i++)
			on_wc(c, &wc[i], done, &ndone);
		if (n == 0 && c->peer_left && !c->disconnected) {
			c->disconnected = true;
			vb_wake(c);
		}
		pthread_mutex_unlock(&c->lock);
		for (i = 0; i < ndone; i++)
			done[i].done(done[i].arg, done[i].slot, done[i].err);
		if (n > 0)
			continue;

		struct pollfd p[3] = { { .fd = c->cc->fd, .events = POLLIN },
				       { .fd = c->ch->fd, .events = POLLIN },
				       { .fd = c->quit_fd, .events = POLLIN } };

		poll(p, 3, 100);
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

int vb_start_progress(struct vb_conn *c)
{
	int ret;

	c->quit_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (c->quit_fd < 0)
		return -errno;
	ret = pthread_create(&c->progress, NULL, progress_main, c);
	if (ret)
		return -ret;
	c->progress_started = true;
	return 0;
}

/* ---- waiting ------------------------------------------------------------- */

/* Waits on c->cond for at most ms.  Lock held. */
void vb_nap(struct vb_conn *c, unsigned ms)
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
int vb_wait_tick(struct vb_conn *c, uint64_t since_ns, bool eof_ok)
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
	vb_nap(c, 100);
	return 0;
}

