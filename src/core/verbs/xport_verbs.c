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
 * This file is the vtable and the data path; connections and their
 * progress thread are in verbs_conn.c, rdma_cm in verbs_cm.c.
 */
#include "core/verbs/verbs_int.h"

#include "core/err.h"
#include "core/log.h"
#include "core/units.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>

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
		ret = vb_wait_tick(c, since, false);
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
	ret = ibv_post_send(c->qp, &wr, &bad);
	if (ret) {
		c->sfree[i] = true;
		ret = vb_fail(c, -RDX_ECONNECT, "cannot post a send: %s", strerror(ret));
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
	    h.seq >= c->last_grant || /* written before it was granted */
	    h.len > ((h.flags & (RDX_FL_SEALED | RDX_FL_COMPRESSED))
			     ? rdx_ring_wire_size(c->ring)
			     : rdx_ring_slot_size(c->ring)))
		return vb_fail(c, -RDX_EPROTO, "peer's RDMA write does not match its header");
	c->cur = c->cur_hdr; /* a copy: the peer could write the table again */
	c->cur_left = RDX_HDR_LEN;
	c->cur_buf = -1;
	c->cur_next = landing(c, a.idx, h.flags);
	c->cur_next_left = a.len;
	return 0;
}

/* Before the handshake, for the listener's gate: every SEND is one whole
 * frame, so one arrival is the first frame in whole. */
static int verbs_frame_ready(struct rdx_conn *cb, int *fd)
{
	struct vb_conn *c = vb_of(cb);
	eventfd_t drained;
	int ret;

	pthread_mutex_lock(&c->lock);
	if (c->ready_fd < 0) {
		c->ready_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
		if (c->ready_fd < 0) {
			pthread_mutex_unlock(&c->lock);
			return -errno;
		}
		c->ready_watch = true;
	}
	eventfd_read(c->ready_fd, &drained); /* stale wake-ups: nothing */
	*fd = c->ready_fd;
	if (c->qcount)
		ret = 1;
	else if (c->err)
		ret = c->err;
	else if (c->disconnected || c->shut)
		ret = -RDX_ECONNECT;
	else
		ret = 0;
	pthread_mutex_unlock(&c->lock);
	return ret;
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
	c->ready_watch = false; /* the handshake reads: the gate is done */
	while (len) {
		size_t k;

		if (!c->cur_left && c->cur_next_left) {
			c->cur = c->cur_next;
			c->cur_left = c->cur_next_left;
			c->cur_next_left = 0;
		}
		if (!c->cur_left) {
			if (c->cur_buf >= 0) {
				ret = vb_post_recv(c, (unsigned)c->cur_buf);
				if (ret) {
					ret = vb_fail(c, -RDX_ECONNECT,
						      "cannot post a receive: %s",
						      strerror(-ret));
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
			ret = vb_wait_tick(c, since, !started);
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

	/* vb_setup_qp guarantees rq_depth > NRECV_BASE. */

	return n > window ? below - (n - window) : below;
}

/* Sends the receiver's ring description with its first grant. */
static int send_pool(struct vb_conn *c, uint64_t grant)
{
	struct rdx_ring *r = c->ring;
	struct rdx_slot *s0 = rdx_ring_slot(r, 0);
	struct rdx_slot *s1 = rdx_ring_slot(r, rdx_ring_nslots(r) > 1 ? 1 : 0);
	uint8_t m[POOL_LEN] = { 0 };

	rdx_put32(m, POOL_MAGIC);
	rdx_put64(m + 8, (uintptr_t)s0->data);
	rdx_put64(m + 16, (uintptr_t)c->hdrs);
	rdx_put64(m + 24, grant);
	rdx_put32(m + 32, c->ring_mr->mr->rkey);
	rdx_put32(m + 36, c->hdr_mr->rkey);
	rdx_put32(m + 40, rdx_ring_nslots(r));
	rdx_put32(m + 44, rdx_ring_nslots(r) > 1
			      ? (uint32_t)((uint8_t *)s1->data - (uint8_t *)s0->data)
			      : (uint32_t)(rdx_ring_slot_size(r) + rdx_ring_wire_size(r)));
	rdx_put32(m + 48, (uint32_t)rdx_ring_slot_size(r));
	rdx_put32(m + 52, (uint32_t)rdx_ring_wire_size(r));
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
	uint64_t t0 = rdx_now_ns();

	c->ring = r;
	c->receiver = receiver;
	c->ring_mr = vb_mr_get(c->dev->pd, mem, len, access, &err);
	if (!c->ring_mr) {
		vb_reg_failed(c, "slots", len, err);
		return -RDX_ENOTSUP;
	}
	rdx_phase("rdma: %zu KiB of slots registered in %.1f ms", len >> 10,
		  (double)(rdx_now_ns() - t0) / 1e6);
	c->hdrs = aligned_alloc(4096, round_page(hlen));
	if (!c->hdrs)
		return -ENOMEM;
	memset(c->hdrs, 0, hlen);
	c->hdr_mr = ibv_reg_mr(c->dev->pd, c->hdrs, hlen, access);
	if (!c->hdr_mr) {
		vb_reg_failed(c, "the header table", hlen, errno);
		return -RDX_ENOTSUP;
	}
	if (receiver) {
		c->last_grant = clamp_grant(c, rdx_ring_writable_below(r));
		ret = send_pool(c, c->last_grant);
		rdx_phase("rdma: slot pool sent");
		return ret;
	}
	c->pend = calloc(n, sizeof(*c->pend));
	if (!c->pend)
		return -ENOMEM;
	pthread_mutex_lock(&c->lock);
	while (!c->have_pool) {
		uint64_t saved = c->deadline_ns;

		/* A frame instead of the pool: the receiver failed (its ERROR)
		 * before it could describe its ring.  The caller reads it. */
		if (c->qcount) {
			ret = -ENOMSG;
			break;
		}
		c->deadline_ns = deadline_ns;
		ret = vb_wait_tick(c, rdx_now_ns(), false);
		c->deadline_ns = saved;
		if (ret)
			break;
	}
	pthread_mutex_unlock(&c->lock);
	rdx_phase("rdma: slot pool received");
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
		ret = vb_wait_tick(c, since, false);
		if (ret)
			break;
	}
	if (!ret && (c->err || c->shut))
		ret = c->err ? c->err : -RDX_ECONNECT;
	if (ret == -RDX_ETIMEOUT)
		vb_fail(c, ret, "receiver granted no room for %.0f s",
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
	ret = ibv_post_send(c->qp, &wh, &bad);
	if (ret) {
		/* Even if the header write went out, nothing completes it
		 * (it is unsignaled): the connection is done for. */
		c->pend[slot->index].done = NULL;
		ret = vb_fail(c, -RDX_ECONNECT, "cannot post an RDMA write: %s",
			      strerror(ret));
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
	uint64_t g = clamp_grant(c, below), prev;
	uint8_t m[8];

	/* One grant per eighth of what may be in flight: few messages, and
	 * progress is certain, since once everything granted is released the
	 * new grant is a whole window ahead. */
	pthread_mutex_lock(&c->lock);
	if (g < c->last_grant + (step ? step : 1)) {
		pthread_mutex_unlock(&c->lock);
		return;
	}
	prev = c->last_grant;
	c->last_grant = g;
	pthread_mutex_unlock(&c->lock);
	rdx_put64(m, g);
	if (post_ctrl(c, m, sizeof(m), NULL, 0, IMM_GRANT)) {
		/* Not told: the next release tries again. */
		pthread_mutex_lock(&c->lock);
		if (c->last_grant == g)
			c->last_grant = prev;
		pthread_mutex_unlock(&c->lock);
	}
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
		vb_nap(c, 20);
	pthread_mutex_unlock(&c->lock);
	/* The peer sees DISCONNECTED, as a TCP peer would see the FIN. */
	rdma_disconnect(c->id);
	rdx_phase("rdma: disconnected");
}

static void verbs_close_gently(struct rdx_conn *cb, int wait_ms)
{
	struct vb_conn *c = vb_of(cb);
	uint64_t until = rdx_now_ns() + (uint64_t)wait_ms * 1000000;

	/* Let our last sends complete (acknowledged: the peer has them),
	 * then give the peer a moment to hang up first. */
	pthread_mutex_lock(&c->lock);
	while (c->sq_used && !c->err && rdx_now_ns() < until)
		if (vb_wait_tick(c, rdx_now_ns(), true))
			break;
	while (!c->disconnected && !c->err && rdx_now_ns() < until)
		if (vb_wait_tick(c, rdx_now_ns(), true))
			break;
	pthread_mutex_unlock(&c->lock);
	rdx_phase("rdma: closing");
	rdma_disconnect(c->id);
	vb_conn_destroy(c);
	rdx_phase("rdma: closed");
}

static void verbs_close(struct rdx_conn *cb)
{
	struct vb_conn *c = vb_of(cb);

	rdx_phase("rdma: closing");
	rdma_disconnect(c->id);
	vb_conn_destroy(c);
	rdx_phase("rdma: closed");
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
		vb_reg_failed(c, "a buffer", len, errno);
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

int rdx_verbs_qpaddr(struct rdx_conn *cb, bool peer, struct rdx_verbs_qpaddr *a)
{
	struct vb_conn *c = vb_of(cb);
	struct ibv_qp_attr qa;
	struct ibv_qp_init_attr ia;
	struct ibv_port_attr pa;
	union ibv_gid g;

	if (cb->ops != &rdx_xport_verbs)
		return -RDX_ENOTSUP;
	memset(a, 0, sizeof(*a));
	if (ibv_query_qp(c->qp, &qa, IBV_QP_AV | IBV_QP_DEST_QPN, &ia))
		return -RDX_ENOTSUP;
	if (peer) {
		a->qpn = qa.dest_qp_num;
		a->lid = qa.ah_attr.dlid;
		a->has_gid = qa.ah_attr.is_global;
		if (a->has_gid)
			memcpy(a->gid, qa.ah_attr.grh.dgid.raw, 16);
		return 0;
	}
	a->qpn = c->qp->qp_num;
	if (ibv_query_port(c->id->verbs, c->id->port_num, &pa))
		return -RDX_ENOTSUP;
	a->lid = pa.lid;
	a->has_gid = qa.ah_attr.is_global;
	if (a->has_gid) {
		if (ibv_query_gid(c->id->verbs, c->id->port_num, qa.ah_attr.grh.sgid_index, &g))
			return -RDX_ENOTSUP;
		memcpy(a->gid, g.raw, 16);
	}
	return 0;
}

bool rdx_verbs_wait_gone(struct rdx_conn *cb, unsigned ms)
{
	struct vb_conn *c = vb_of(cb);
	uint64_t until = rdx_now_ns() + (uint64_t)ms * 1000000;
	bool gone;

	if (cb->ops != &rdx_xport_verbs)
		return true;
	pthread_mutex_lock(&c->lock);
	while (!(gone = c->err || c->shut || c->disconnected || c->peer_left) &&
	       rdx_now_ns() < until)
		vb_nap(c, 100);
	pthread_mutex_unlock(&c->lock);
	return gone;
}

int rdx_verbs_post(struct rdx_conn *cb, unsigned slot, bool write, struct rdx_verbs_mr *m,
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
	if (slot >= RDX_VERBS_SLOTS || len > UINT32_MAX || (uint8_t *)local < (uint8_t *)mr->addr ||
	    (uint8_t *)local + len > (uint8_t *)mr->addr + mr->length)
		return -EINVAL;
	if (!write && c->remote_rd == 0)
		return -RDX_ENOTSUP;
	wr.wr_id = WR_ID(WR_ONESIDED, slot);
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = write ? IBV_WR_RDMA_WRITE : IBV_WR_RDMA_READ;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.wr.rdma.remote_addr = r->addr + offset;
	wr.wr.rdma.rkey = r->rkey;
	pthread_mutex_lock(&c->lock);
	if (c->onesided_busy[slot]) {
		pthread_mutex_unlock(&c->lock);
		return -EBUSY;
	}
	while (!c->err && c->sq_used >= c->sq_depth && !(ret = vb_wait_tick(c, since, false)))
		;
	if (!ret && c->err)
		ret = c->err;
	if (!ret) {
		c->onesided_done[slot] = false;
		ret = ibv_post_send(c->qp, &wr, &bad);
		if (ret) {
			ret = vb_fail(c, -RDX_ECONNECT, "cannot post an RDMA %s: %s",
				      write ? "write" : "read", strerror(ret));
		} else {
			c->sq_used++;
			c->onesided_busy[slot] = true;
			c->onesided_write[slot] = write;
		}
	}
	pthread_mutex_unlock(&c->lock);
	return ret;
}

int rdx_verbs_wait(struct rdx_conn *cb, unsigned slot)
{
	struct vb_conn *c = vb_of(cb);
	uint64_t since = rdx_now_ns();
	unsigned i;
	int ret = 0;

	if (cb->ops != &rdx_xport_verbs || slot >= RDX_VERBS_SLOTS)
		return -EINVAL;
	pthread_mutex_lock(&c->lock);
	if (!c->onesided_busy[slot]) {
		pthread_mutex_unlock(&c->lock);
		return -EINVAL;
	}
	while (!ret && !c->onesided_done[slot])
		ret = c->err ? c->err : vb_wait_tick(c, since, false);
	if (ret && !c->onesided_done[slot]) {
		/* Never return while the hardware may still touch local
		 * memory: kill the QP and wait (bounded) for every slot's
		 * flush. */
		struct ibv_qp_attr a = { .qp_state = IBV_QPS_ERR };
		uint64_t until = rdx_now_ns() + 2000000000ull;
		bool left;

		vb_fail(c, ret, "RDMA %s did not complete", c->onesided_write[slot] ? "write" : "read");
		ibv_modify_qp(c->qp, &a, IBV_QP_STATE);
		do {
			left = false;
			for (i = 0; i < RDX_VERBS_SLOTS; i++)
				left |= c->onesided_busy[i] && !c->onesided_done[i];
			if (left)
				vb_nap(c, 20);
		} while (left && rdx_now_ns() < until);
		for (i = 0; i < RDX_VERBS_SLOTS; i++)
			if (c->onesided_done[i])
				c->onesided_busy[i] = false;
	}
	if (c->onesided_done[slot]) {
		c->onesided_busy[slot] = false;
		if (c->onesided[slot].status != IBV_WC_SUCCESS)
			ret = -RDX_ECONNECT;
	}
	pthread_mutex_unlock(&c->lock);
	return ret;
}

int rdx_verbs_rw(struct rdx_conn *cb, bool write, struct rdx_verbs_mr *m,
		 void *local, size_t len, const struct rdx_verbs_remote *r,
		 uint64_t offset)
{
	int ret = rdx_verbs_post(cb, 0, write, m, local, len, r, offset);

	return ret ? ret : rdx_verbs_wait(cb, 0);
}

const struct rdx_xport_ops rdx_xport_verbs = {
	.name = "rdma",
	.connect = vb_connect,
	.listen = vb_listen,
	.listen_port = vb_listen_port,
	.accept = vb_accept,
	.close_listener = vb_close_listener,
	.send = verbs_send,
	.recv = verbs_recv,
	.attach = verbs_attach,
	.send_data = verbs_send_data,
	.grant = verbs_grant,
	.frame_ready = verbs_frame_ready,
	.set_timeout = verbs_set_timeout,
	.set_deadline = verbs_set_deadline,
	.shutdown = verbs_shutdown,
	.close_gently = verbs_close_gently,
	.close = verbs_close,
};

