/* rdma_cm for the verbs transport: resolve, connect with private data,
 * listen, accept (see verbs_int.h for the map, docs/RDMA.md for the
 * ladder).  Every CM event a step can get is handled with a message. */
#include "core/verbs/verbs_int.h"

#include "core/addr.h"

#include "core/err.h"
#include "core/log.h"
#include "core/units.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

/* ---- CM events ---------------------------------------------------------- */

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

/* The local ACK timeout (see RDX_ACK_TIMEOUT_ROCE), before the queue pair
 * reaches RTS: librdmacm takes it from the CM id then.  A kernel without
 * the option keeps rdma_cm's default: slower recovery, nothing worse. */
static void set_ack_timeout(struct rdma_cm_id *id, unsigned want)
{
	struct ibv_port_attr pa;
	uint8_t t;

	if (want == RDX_ACK_TIMEOUT_CM)
		return;
	if (!want) {
		if (ibv_query_port(id->verbs, id->port_num, &pa) ||
		    pa.link_layer != IBV_LINK_LAYER_ETHERNET)
			return;
		want = RDX_ACK_TIMEOUT_ROCE;
	}
	t = (uint8_t)want;
	if (rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT, &t, sizeof(t)))
		rdx_info(1, "cannot set the RDMA ACK timeout to %u: %s (rdma_cm's default stays)",
			 want, strerror(errno));
}

/* -vv: what the queue pair got, which rdma_cm decides in the end. */
static void log_connected(struct ibv_qp *qp)
{
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr ia;

	if (ibv_query_qp(qp, &a, IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
			 IBV_QP_PATH_MTU, &ia) == 0)
		rdx_phase("rdma: connected (ACK timeout %u, retries %u, RNR retries %u, MTU %d)",
			  a.timeout, a.retry_cnt, a.rnr_retry, 128 << a.path_mtu);
	else
		rdx_phase("rdma: connected");
}

/* One attempt: resolve, build the queue pair, connect.  Returns 0, a
 * positive errno worth retrying (refused, unreachable), or a negative
 * error that ends connecting. */
/* How long one step of an attempt may wait: its own bound, but not much
 * past the caller's deadline when that is still ahead (a deadline already
 * passed, 0 included, asks for one whole attempt). */
static uint64_t step_bound(unsigned ms, uint64_t deadline)
{
	uint64_t now = rdx_now_ns(), step = now + (uint64_t)ms * 1000000;
	uint64_t floor = now + 1000000000ull; /* a step always gets 1 s */

	if (deadline > now && deadline < step)
		step = deadline > floor ? deadline : floor;
	return step;
}

static int try_connect(struct vb_conn *c, const struct sockaddr *src,
		       const struct sockaddr *dst, uint64_t deadline,
		       const atomic_int *stop)
{
	struct rdma_cm_event *ev;
	struct rdma_conn_param param;
	uint32_t priv;
	enum rdma_cm_event_type type;
	int status, ret;
	uint64_t step = step_bound(CM_TIMEOUT_MS, deadline);

	c->ch = rdma_create_event_channel();
	if (!c->ch)
		return errno == ENODEV || errno == ENOENT ? -RDX_ENOTSUP : -errno;
	if (vb_set_nonblock(c->ch->fd) ||
	    rdma_create_id(c->ch, &c->id, c, RDMA_PS_TCP))
		return -errno;
	rdx_phase("rdma: event channel and id created");
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
	rdx_phase("rdma: address resolved");
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
	rdx_phase("rdma: route resolved");
	if (c->id->verbs->device->transport_type == IBV_TRANSPORT_IWARP) {
		snprintf(c->base.why, sizeof(c->base.why),
			 "the route goes through an iWARP device (%s), which is not supported",
			 ibv_get_device_name(c->id->verbs->device));
		return -RDX_ENOTSUP;
	}
	ret = vb_setup_qp(c, 64);
	if (ret)
		return ret;
	rdx_phase("rdma: queue pair ready");
	set_ack_timeout(c->id, c->ack_timeout);
	fill_conn_param(&param, &priv, c->remote_rd);
	if (rdma_connect(c->id, &param))
		return -errno;
	step = step_bound(ESTABLISH_MS, deadline);
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
		log_connected(c->qp);
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

int vb_connect(const struct rdx_net_opts *o, const char *host,
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
	rdx_phase("rdma: devices listed");
	ret = rdx_resolve(host, port, o->family, 0, &dst);
	if (ret)
		return ret;
	if (o->bind) {
		ret = rdx_resolve(o->bind, NULL, dst->ai_family, AI_PASSIVE, &src);
		if (ret) {
			freeaddrinfo(dst);
			*last_err = ENOENT;
			return -RDX_ECONNECT;
		}
	}
	c = vb_conn_alloc(o);
	if (!c) {
		ret = -ENOMEM;
		goto out;
	}
	for (;;) {
		ret = try_connect(c, src ? src->ai_addr : NULL, dst->ai_addr,
				  deadline_ns, stop);
		if (ret <= 0)
			break;
		*last_err = ret;
		/* Nothing of a failed attempt carries over to the next. */
		vb_conn_teardown(c);
		c->base.why[0] = 0;
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
		rdx_addr_text(rdma_get_peer_addr(c->id), c->base.peer, sizeof(c->base.peer));
		ret = vb_start_progress(c);
	}
	if (ret == 0) {
		*out = &c->base;
		c = NULL;
	} else if (ret != -RDX_ECONNECT && ret != -RDX_EINTR && ret != -RDX_ENOTSUP) {
		*last_err = ret < 0 ? -ret : ret;
		ret = -RDX_ECONNECT;
	}
	vb_conn_destroy(c);
out:
	freeaddrinfo(dst);
	if (src)
		freeaddrinfo(src);
	return ret;
}

int vb_listen(const struct rdx_net_opts *o, const char *port,
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
		ret = rdx_resolve(o->bind, port, o->family, AI_PASSIVE, &ai);
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
	if (vb_set_nonblock(l->ch->fd) || rdma_create_id(l->ch, &l->id, l, RDMA_PS_TCP)) {
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

unsigned vb_listen_port(struct rdx_listener *lb)
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
	if (vb_set_nonblock(c->ch->fd) || rdma_migrate_id(id, c->ch))
		return -errno;
	ret = vb_setup_qp(c, 64);
	if (ret)
		return ret;
	rdx_phase("rdma: queue pair ready");
	if (peer_rd < c->remote_rd)
		c->remote_rd = peer_rd;
	set_ack_timeout(id, c->ack_timeout);
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
	log_connected(c->qp);
	rdx_addr_text(rdma_get_peer_addr(id), c->base.peer, sizeof(c->base.peer));
	return vb_start_progress(c);
}

int vb_accept(struct rdx_listener *lb, const struct rdx_net_opts *o,
			int wait_ms, struct rdx_conn **out)
{
	struct vb_listener *l = (struct vb_listener *)lb;
	uint64_t deadline = rdx_now_ns() + (uint64_t)wait_ms * 1000000;
	struct rdma_cm_event *ev;
	struct rdma_cm_id *id;
	struct vb_conn *c;
	unsigned peer_rd;
	const char *why = NULL;
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
	rdx_phase("rdma: connection request");
	if (ev->param.conn.private_data_len < 4 ||
	    rdx_get32(ev->param.conn.private_data) != PRIV_MAGIC)
		why = "not an rdxfer sender";
	else if (id->verbs && id->verbs->device->transport_type == IBV_TRANSPORT_IWARP)
		why = "iWARP is not supported";
	peer_rd = ev->param.conn.initiator_depth;
	rdma_ack_cm_event(ev);
	if (why) {
		char from[96];

		rdx_addr_text(rdma_get_peer_addr(id), from, sizeof(from));
		rdx_info(1, "rejected an RDMA connection request from %s: %s", from, why);
		rdma_reject(id, NULL, 0);
		rdma_destroy_id(id);
		return -EAGAIN;
	}
	c = vb_conn_alloc(o);
	if (!c) {
		rdma_reject(id, NULL, 0);
		rdma_destroy_id(id);
		return -ENOMEM;
	}
	ret = take_request(c, id, peer_rd,
			   rdx_now_ns() + (uint64_t)ESTABLISH_MS * 1000000);
	if (ret) {
		/* Whatever went wrong with one request (the peer gave up,
		 * rejected our reply, vanished), the listener lives on. */
		char from[96];

		rdx_addr_text(rdma_get_peer_addr(id), from, sizeof(from));
		rdx_info(1, "dropped an RDMA connection request from %s: %s", from,
			 rdx_strerror(ret));
		if (!c->qp)
			rdma_reject(id, NULL, 0);
		vb_conn_destroy(c);
		return ret == -ENOMEM ? ret : -EAGAIN;
	}
	*out = &c->base;
	return 0;
}

void vb_close_listener(struct rdx_listener *lb)
{
	struct vb_listener *l = (struct vb_listener *)lb;

	rdma_destroy_id(l->id);
	rdma_destroy_event_channel(l->ch);
	free(l);
}

