/* Probing for RDMA: devices, ports and GIDs through libibverbs (sysfs for
 * what verbs does not say), reachability through rdma_cm, RLIMIT_MEMLOCK.
 *
 * Route ladder, on one fresh id with its own event channel:
 *   getaddrinfo(host) → rdma_resolve_addr → ADDR_RESOLVED | ADDR_ERROR
 *                     → rdma_resolve_route → ROUTE_RESOLVED | ROUTE_ERROR
 * Every wait is a poll() on the channel bounded by the caller's deadline,
 * so a silent neighbour or a wedged kernel cannot hang us. */
#include "core/verbs/verbs_probe.h"

#include "core/addr.h"

#include "core/units.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <endian.h>
#include <errno.h>
#include <infiniband/verbs.h>
#include <net/if.h>
#include <netdb.h>
#include <poll.h>
#include <rdma/rdma_cma.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ifaddrs.h>
#include <sys/resource.h>
#include <unistd.h>

/* Gives a route step at least this long, even when the caller's budget is
 * nearly spent: the kernel answers a local route in microseconds. */
#define STEP_MIN_MS 100
/* How long past the kernel's own timeout we wait for its error event. */
#define GRACE_MS 250

/* ------------------------------------------------------------- devices */

static unsigned mtu_bytes(enum ibv_mtu mtu)
{
	return mtu >= IBV_MTU_256 && mtu <= IBV_MTU_4096 ? 128u << mtu : 0;
}

static void speed_text(char *buf, size_t len, uint8_t width, uint8_t speed)
{
	static const struct {
		uint8_t code;
		const char *name;
		double gbps; /* per lane */
	} speeds[] = {
		{ 1, "SDR", 2.5 },  { 2, "DDR", 5 },   { 4, "QDR", 10 },
		{ 8, "FDR10", 10 }, { 16, "FDR", 14 }, { 32, "EDR", 25 },
		{ 64, "HDR", 50 },  { 128, "NDR", 100 },
	};
	static const struct {
		uint8_t code;
		unsigned lanes;
	} widths[] = { { 1, 1 }, { 2, 4 }, { 4, 8 }, { 8, 12 }, { 16, 2 } };
	size_t s, w;

	buf[0] = '\0';
	for (s = 0; s < sizeof(speeds) / sizeof(speeds[0]); s++)
		if (speeds[s].code == speed)
			break;
	for (w = 0; w < sizeof(widths) / sizeof(widths[0]); w++)
		if (widths[w].code == width)
			break;
	if (s == sizeof(speeds) / sizeof(speeds[0]) ||
	    w == sizeof(widths) / sizeof(widths[0]))
		return;
	snprintf(buf, len, "%g Gb/s (%uX %s)", widths[w].lanes * speeds[s].gbps,
		 widths[w].lanes, speeds[s].name);
}

/* Reads the first line of a sysfs file into buf without its newline.
 * Returns 0 or -errno (an unused GID slot reads as EINVAL). */
static int read_line(const char *path, char *buf, size_t len)
{
	FILE *f = fopen(path, "re");
	int ret = 0;

	if (!f)
		return -errno;
	if (!fgets(buf, (int)len, f))
		ret = ferror(f) ? -EIO : -ENODATA;
	fclose(f);
	if (ret)
		return ret;
	buf[strcspn(buf, "\n")] = '\0';
	return buf[0] ? 0 : -ENODATA;
}

/* Type and netdev of one GID: from sysfs as the kernel names them, else
 * from the verbs GID entry (sysfs hidden, as in some containers). */
static void gid_attrs(struct ibv_context *ctx, const char *ibdev_path,
		      unsigned port, struct rdx_verbs_gid *g, bool eth)
{
	struct ibv_gid_entry e;
	char path[512], buf[64];

	snprintf(path, sizeof(path), "%s/ports/%u/gid_attrs/types/%u",
		 ibdev_path, port, g->index);
	if (read_line(path, buf, sizeof(buf)) == 0) {
		/* "IB/RoCE v1" names both; the link layer tells which. */
		snprintf(g->type, sizeof(g->type), "%.15s",
			 strcmp(buf, "IB/RoCE v1") ? buf : eth ? "RoCE v1" : "IB");
		snprintf(path, sizeof(path), "%s/ports/%u/gid_attrs/ndevs/%u",
			 ibdev_path, port, g->index);
		if (read_line(path, buf, sizeof(buf)) == 0)
			snprintf(g->netdev, sizeof(g->netdev), "%s", buf);
		return;
	}
	if (ibv_query_gid_ex(ctx, port, g->index, &e, 0))
		return;
	snprintf(g->type, sizeof(g->type), "%s",
		 e.gid_type == IBV_GID_TYPE_IB	    ? "IB" :
		 e.gid_type == IBV_GID_TYPE_ROCE_V1 ? "RoCE v1" :
		 e.gid_type == IBV_GID_TYPE_ROCE_V2 ? "RoCE v2" :
						      "");
	if (e.ndev_ifindex && !if_indextoname(e.ndev_ifindex, buf))
		buf[0] = '\0';
	if (e.ndev_ifindex)
		snprintf(g->netdev, sizeof(g->netdev), "%s", buf);
}

static bool gid_is_zero(const union ibv_gid *gid)
{
	static const union ibv_gid zero;

	return !memcmp(gid, &zero, sizeof(zero));
}

/* Collects the port's non-zero GIDs.  Returns 0 or -ENOMEM; an entry that
 * cannot be read is skipped like an empty one. */
static int probe_gids(struct ibv_context *ctx, const char *ibdev_path,
		      struct rdx_verbs_port *pt, bool eth)
{
	size_t cap = 0;
	unsigned i;

	for (i = 0; i < pt->gid_tbl_len; i++) {
		struct rdx_verbs_gid *g;
		union ibv_gid gid;

		if (ibv_query_gid(ctx, (uint8_t)pt->num, (int)i, &gid) ||
		    gid_is_zero(&gid))
			continue;
		if (pt->ngids == cap) {
			size_t ncap = cap ? 2 * cap : 8;
			struct rdx_verbs_gid *n =
				realloc(pt->gids, ncap * sizeof(*n));

			if (!n)
				return -ENOMEM;
			pt->gids = n;
			cap = ncap;
		}
		g = &pt->gids[pt->ngids++];
		memset(g, 0, sizeof(*g));
		g->index = i;
		inet_ntop(AF_INET6, gid.raw, g->gid, sizeof(g->gid));
		gid_attrs(ctx, ibdev_path, pt->num, g, eth);
	}
	return 0;
}

static int probe_port(struct ibv_context *ctx, const char *ibdev_path,
		      unsigned num, struct rdx_verbs_port *pt)
{
	struct ibv_port_attr pa;
	const char *s;
	size_t i;
	bool eth;

	pt->num = num;
	if (ibv_query_port(ctx, (uint8_t)num, &pa)) {
		snprintf(pt->state, sizeof(pt->state), "unknown");
		snprintf(pt->link_layer, sizeof(pt->link_layer), "unknown");
		return 0;
	}
	/* "active" here, "PORT_ACTIVE" in older rdma-core: say "ACTIVE" as
	 * ibv_devinfo and sysfs do. */
	s = ibv_port_state_str(pa.state);
	if (!strncmp(s, "PORT_", 5))
		s += 5;
	snprintf(pt->state, sizeof(pt->state), "%s", s);
	for (i = 0; pt->state[i]; i++)
		pt->state[i] = (char)toupper((unsigned char)pt->state[i]);
	pt->active = pa.state == IBV_PORT_ACTIVE;
	eth = pa.link_layer == IBV_LINK_LAYER_ETHERNET;
	/* Unspecified is what drivers older than RoCE report for IB. */
	snprintf(pt->link_layer, sizeof(pt->link_layer), "%s",
		 eth ? "Ethernet" :
		 pa.link_layer == IBV_LINK_LAYER_INFINIBAND ||
				 pa.link_layer == IBV_LINK_LAYER_UNSPECIFIED ?
		       "InfiniBand" :
		       "unknown");
	pt->active_mtu = mtu_bytes(pa.active_mtu);
	pt->max_mtu = mtu_bytes(pa.max_mtu);
	speed_text(pt->speed, sizeof(pt->speed), pa.active_width,
		   pa.active_speed);
	pt->lid = eth ? 0 : pa.lid;
	pt->gid_tbl_len = (unsigned)pa.gid_tbl_len;
	return probe_gids(ctx, ibdev_path, pt, eth);
}

/* Fills v from device d.  Returns 0 (failures to open or query land in
 * v->err) or -ENOMEM. */
static int probe_dev(struct ibv_device *d, struct rdx_verbs_dev *v)
{
	struct ibv_device_attr da;
	struct ibv_context *ctx;
	uint64_t guid;
	unsigned p;
	int ret;

	snprintf(v->name, sizeof(v->name), "%s", ibv_get_device_name(d));
	guid = be64toh(ibv_get_device_guid(d));
	snprintf(v->node_guid, sizeof(v->node_guid), "%04x:%04x:%04x:%04x",
		 (unsigned)(guid >> 48) & 0xffff, (unsigned)(guid >> 32) & 0xffff,
		 (unsigned)(guid >> 16) & 0xffff, (unsigned)guid & 0xffff);
	ctx = ibv_open_device(d);
	if (!ctx) {
		v->err = errno ? -errno : -ENODEV;
		return 0;
	}
	ret = ibv_query_device(ctx, &da);
	if (ret) {
		v->err = -ret;
		ret = 0;
		goto out_close;
	}
	snprintf(v->fw_ver, sizeof(v->fw_ver), "%s", da.fw_ver);
	if (da.phys_port_cnt) {
		v->ports = calloc(da.phys_port_cnt, sizeof(*v->ports));
		if (!v->ports) {
			ret = -ENOMEM;
			goto out_close;
		}
	}
	v->nports = da.phys_port_cnt;
	for (p = 0; p < v->nports; p++) {
		ret = probe_port(ctx, d->ibdev_path, p + 1, &v->ports[p]);
		if (ret)
			goto out_close;
		v->any_active |= v->ports[p].active;
	}
out_close:
	ibv_close_device(ctx);
	return ret;
}

int rdx_verbs_devices(struct rdx_verbs_dev **out, size_t *n)
{
	struct rdx_verbs_dev *devs;
	struct ibv_device **list;
	int num = 0, i, ret = 0;

	*out = NULL;
	*n = 0;
	errno = 0;
	list = ibv_get_device_list(&num);
	if (!list)
		return errno ? -errno : -ENOSYS;
	if (num <= 0)
		goto out_free_list;
	devs = calloc((size_t)num, sizeof(*devs));
	if (!devs) {
		ret = -ENOMEM;
		goto out_free_list;
	}
	for (i = 0; i < num; i++) {
		ret = probe_dev(list[i], &devs[i]);
		if (ret) {
			rdx_verbs_devices_free(devs, (size_t)i + 1);
			goto out_free_list;
		}
	}
	*out = devs;
	*n = (size_t)num;
out_free_list:
	ibv_free_device_list(list);
	return ret;
}

void rdx_verbs_devices_free(struct rdx_verbs_dev *devs, size_t n)
{
	size_t i, p;

	if (!devs)
		return;
	for (i = 0; i < n; i++) {
		for (p = 0; p < devs[i].nports; p++)
			free(devs[i].ports[p].gids);
		free(devs[i].ports);
	}
	free(devs);
}

bool rdx_verbs_any_active(const struct rdx_verbs_dev *devs, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (devs[i].any_active)
			return true;
	return false;
}

void rdx_verbs_none_reason(int err, char *why, size_t whylen)
{
	if (err == -ENOSYS)
		snprintf(why, whylen, "no RDMA devices (this kernel has no RDMA support)");
	else if (err)
		snprintf(why, whylen, "no RDMA devices (ibv_get_device_list: %s)",
			 strerror(-err));
	else
		snprintf(why, whylen, "no RDMA devices");
}

/* --------------------------------------------------------------- route */

/* Counts the devices without opening them.  Returns the count (> 0) or a
 * negative error with the reason in why. */
static int count_devices(char *why, size_t whylen)
{
	struct ibv_device **list;
	int num = 0;

	errno = 0;
	list = ibv_get_device_list(&num);
	if (!list) {
		int err = errno ? -errno : -ENOSYS;

		rdx_verbs_none_reason(err, why, whylen);
		return err == -ENOMEM ? err : -ENODEV;
	}
	ibv_free_device_list(list);
	if (num <= 0) {
		rdx_verbs_none_reason(0, why, whylen);
		return -ENODEV;
	}
	return num;
}

static void addr_text(const struct sockaddr *sa, char *buf, size_t len)
{
	socklen_t sl = sa->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6) :
						   sizeof(struct sockaddr_in);

	if (getnameinfo(sa, sl, buf, (socklen_t)len, NULL, 0, NI_NUMERICHOST))
		snprintf(buf, len, "?");
}

static int resolve(const char *what, const char *name, int family,
		   struct addrinfo **res, char *why, size_t whylen)
{
	struct addrinfo hints = { .ai_family = family,
				  .ai_socktype = SOCK_STREAM };
	int ret = getaddrinfo(name, NULL, &hints, res);

	if (ret == 0)
		return 0;
	snprintf(why, whylen, "cannot resolve %s'%s': %s", what, name,
		 ret == EAI_SYSTEM ? strerror(errno) : gai_strerror(ret));
	return ret == EAI_SYSTEM && errno ? -errno : -ENOENT;
}

static int ms_left(uint64_t deadline_ns)
{
	uint64_t now = rdx_now_ns();
	uint64_t ms = now < deadline_ns ? (deadline_ns - now) / 1000000 : 0;

	return ms < STEP_MIN_MS ? STEP_MIN_MS : ms > INT32_MAX ? INT32_MAX : (int)ms;
}

/* Waits until step_ms + GRACE_MS for the next event on ch, acknowledges
 * it and returns 0 with its type and status, or -ETIMEDOUT / -errno. */
static int next_event(struct rdma_event_channel *ch, int step_ms,
		      enum rdma_cm_event_type *type, int *status)
{
	uint64_t until = rdx_now_ns() + (uint64_t)(step_ms + GRACE_MS) * 1000000;
	struct pollfd p = { .fd = ch->fd, .events = POLLIN };
	struct rdma_cm_event *ev;
	int ret;

	for (;;) {
		uint64_t now = rdx_now_ns();

		if (now >= until)
			return -ETIMEDOUT;
		ret = poll(&p, 1, (int)((until - now + 999999) / 1000000));
		if (ret > 0)
			break;
		if (ret < 0 && errno != EINTR)
			return -errno;
	}
	if (rdma_get_cm_event(ch, &ev))
		return -errno;
	*type = ev->event;
	*status = ev->status;
	rdma_ack_cm_event(ev);
	return 0;
}

/* One rdma_cm step: start it, wait for ok or its error.  Returns 0, or a
 * negative error with "(STEP: reason)" in why. */
static int cm_step(struct rdma_event_channel *ch, struct rdma_cm_id *id,
		   const struct sockaddr *src, const struct sockaddr *dst,
		   uint64_t deadline_ns, char *why, size_t whylen)
{
	const char *step = dst ? "rdma_resolve_addr" : "rdma_resolve_route";
	enum rdma_cm_event_type want = dst ? RDMA_CM_EVENT_ADDR_RESOLVED :
					     RDMA_CM_EVENT_ROUTE_RESOLVED;
	enum rdma_cm_event_type type = RDMA_CM_EVENT_ADDR_ERROR;
	int ms = ms_left(deadline_ns), status = 0, ret;

	if (dst)
		ret = rdma_resolve_addr(id, (struct sockaddr *)src,
					(struct sockaddr *)dst, ms);
	else
		ret = rdma_resolve_route(id, ms);
	if (ret) {
		ret = -errno;
		snprintf(why, whylen, "(%s: %s)", step, strerror(-ret));
		return ret;
	}
	ret = next_event(ch, ms, &type, &status);
	if (ret == -ETIMEDOUT) {
		snprintf(why, whylen, "(%s: no answer within %d ms)", step, ms);
		return ret;
	}
	if (ret) {
		snprintf(why, whylen, "(%s: rdma_get_cm_event: %s)", step,
			 strerror(-ret));
		return ret;
	}
	if (type == want)
		return 0;
	if (status < 0) {
		snprintf(why, whylen, "(%s: %s)", step, strerror(-status));
		return status;
	}
	snprintf(why, whylen, "(%s: %s)", step, rdma_event_str(type));
	return -EPROTO;
}

static void fill_route(struct rdma_cm_id *id, struct rdx_verbs_route *r)
{
	const union ibv_gid *sgid = id->route.num_paths ?
					    &id->route.path_rec[0].sgid :
					    &id->route.addr.addr.ibaddr.sgid;

	memset(r, 0, sizeof(*r));
	snprintf(r->dev, sizeof(r->dev), "%s",
		 ibv_get_device_name(id->verbs->device));
	r->port = id->port_num;
	addr_text(rdma_get_local_addr(id), r->local, sizeof(r->local));
	addr_text(rdma_get_peer_addr(id), r->remote, sizeof(r->remote));
	if (!gid_is_zero(sgid))
		inet_ntop(AF_INET6, sgid->raw, r->sgid, sizeof(r->sgid));
}

/* Resolves one destination address on a fresh id.  Returns 0 with *r
 * filled, or a negative error with the step's reason in why. */
static int route_one(struct rdma_event_channel *ch, const struct sockaddr *src,
		     const struct sockaddr *dst, uint64_t deadline_ns,
		     struct rdx_verbs_route *r, char *why, size_t whylen)
{
	struct rdma_cm_id *id;
	int ret;

	if (rdma_create_id(ch, &id, NULL, RDMA_PS_TCP)) {
		ret = -errno;
		snprintf(why, whylen, "(rdma_create_id: %s)", strerror(-ret));
		return ret;
	}
	ret = cm_step(ch, id, src, dst, deadline_ns, why, whylen);
	if (!ret)
		ret = cm_step(ch, id, NULL, NULL, deadline_ns, why, whylen);
	if (!ret)
		fill_route(id, r);
	/* Every event read was acknowledged, so this cannot wait. */
	rdma_destroy_id(id);
	return ret;
}

static const struct addrinfo *same_family(const struct addrinfo *list,
					  int family)
{
	for (; list; list = list->ai_next)
		if (list->ai_family == family)
			return list;
	return NULL;
}

int rdx_verbs_route(const char *host, const char *bind, int family,
		    unsigned timeout_ms, struct rdx_verbs_route *r, char *why,
		    size_t whylen)
{
	uint64_t deadline = rdx_now_ns() + (uint64_t)timeout_ms * 1000000;
	struct addrinfo *dst = NULL, *src = NULL;
	const struct addrinfo *ai, *from;
	struct rdma_event_channel *ch;
	char hbuf[256], bbuf[256], addr[RDX_VERBS_TEXT], step[160] = "";
	const char *name, *bname = NULL;
	int ret, tried = 0;

	why[0] = '\0';
	if (family != AF_UNSPEC && family != AF_INET && family != AF_INET6) {
		snprintf(why, whylen, "unknown address family %d", family);
		return -EINVAL;
	}
	if (!host || !host[0] || !(name = rdx_unbracket(host, hbuf, sizeof(hbuf)))) {
		snprintf(why, whylen, "invalid host '%s'", host ? host : "");
		return -EINVAL;
	}
	if (bind && !(bname = rdx_unbracket(bind, bbuf, sizeof(bbuf)))) {
		snprintf(why, whylen, "invalid local address '%s'", bind);
		return -EINVAL;
	}
	/* No devices: say so before spending a name lookup on it. */
	ret = count_devices(why, whylen);
	if (ret < 0)
		return ret;
	ret = resolve("", name, family, &dst, why, whylen);
	if (ret)
		return ret;
	if (bname) {
		ret = resolve("local address ", bname, family, &src, why, whylen);
		if (ret)
			goto out_free;
	}
	ch = rdma_create_event_channel();
	if (!ch) {
		ret = -errno;
		snprintf(why, whylen,
			 "cannot use rdma_cm (rdma_create_event_channel: %s); is the rdma_ucm module loaded?",
			 strerror(-ret));
		goto out_free;
	}
	ret = -EINVAL;
	for (ai = dst; ai; ai = ai->ai_next) {
		from = src ? same_family(src, ai->ai_family) : NULL;
		if (src && !from)
			continue;
		if (tried++ && rdx_now_ns() >= deadline)
			break;
		addr_text(ai->ai_addr, addr, sizeof(addr));
		ret = route_one(ch, from ? from->ai_addr : NULL, ai->ai_addr,
				deadline, r, step, sizeof(step));
		if (!ret)
			break;
	}
	if (!tried)
		snprintf(why, whylen,
			 "local address '%s' and '%s' have no address family in common",
			 bind, host);
	else if (ret && !strcmp(addr, name))
		snprintf(why, whylen, "%s is not reachable through an RDMA device %s",
			 addr, step);
	else if (ret)
		snprintf(why, whylen,
			 "%s (%s) is not reachable through an RDMA device %s",
			 name, addr, step);
	rdma_destroy_event_channel(ch);
out_free:
	if (src)
		freeaddrinfo(src);
	freeaddrinfo(dst);
	return ret;
}

/* ------------------------------------------------------------- memlock */

uint64_t rdx_memlock_limit(char *text, size_t len, uint64_t *hard)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_MEMLOCK, &rl)) {
		snprintf(text, len, "unknown");
		if (hard)
			*hard = 0;
		return 0;
	}
	if (hard)
		*hard = rl.rlim_max == RLIM_INFINITY ? RDX_MEMLOCK_UNLIMITED :
						       (uint64_t)rl.rlim_max;
	if (rl.rlim_cur == RLIM_INFINITY) {
		snprintf(text, len, "unlimited");
		return RDX_MEMLOCK_UNLIMITED;
	}
	rdx_fmt_bytes(text, len, (uint64_t)rl.rlim_cur);
	return (uint64_t)rl.rlim_cur;
}

/* --------------------------------------------------- device → address */

/* The IP a RoCE GID stands for, if it stands for one that can be bound:
 * ::ffff:a.b.c.d gives a.b.c.d; a global IPv6 GID gives itself; link-local
 * (fe80::, RoCE v1 style) gives nothing. */
static bool gid_ip(const char *gid, int family, char *out, size_t len)
{
	struct in6_addr a;

	if (inet_pton(AF_INET6, gid, &a) != 1)
		return false;
	if (IN6_IS_ADDR_V4MAPPED(&a)) {
		if (family == AF_INET6)
			return false;
		return inet_ntop(AF_INET, &a.s6_addr[12], out, (socklen_t)len) != NULL;
	}
	if (family == AF_INET || IN6_IS_ADDR_LINKLOCAL(&a) || IN6_IS_ADDR_UNSPECIFIED(&a))
		return false;
	return inet_ntop(AF_INET6, &a, out, (socklen_t)len) != NULL;
}

/* An InfiniBand port has no IPs in its GIDs: its IPoIB interface (one
 * whose sysfs device links to the RDMA device) carries them. */
static bool ipoib_addr(const char *dev, int family, char *out, size_t len)
{
	struct ifaddrs *ifa, *i;
	char path[512];
	bool found = false;

	if (getifaddrs(&ifa))
		return false;
	for (i = ifa; i && !found; i = i->ifa_next) {
		int f = i->ifa_addr ? i->ifa_addr->sa_family : AF_UNSPEC;

		if ((f != AF_INET && f != AF_INET6) || (family != AF_UNSPEC && f != family))
			continue;
		snprintf(path, sizeof(path), "/sys/class/net/%s/device/infiniband/%s",
			 i->ifa_name, dev);
		if (access(path, F_OK))
			continue;
		if (f == AF_INET6 &&
		    IN6_IS_ADDR_LINKLOCAL(&((struct sockaddr_in6 *)i->ifa_addr)->sin6_addr))
			continue;
		found = getnameinfo(i->ifa_addr, f == AF_INET ? sizeof(struct sockaddr_in)
							       : sizeof(struct sockaddr_in6),
				    out, (socklen_t)len, NULL, 0, NI_NUMERICHOST) == 0;
	}
	freeifaddrs(ifa);
	return found;
}

static int pick_gid(const struct rdx_verbs_port *pt, int gid_index, int family,
		    char *addr, size_t len, char *why, size_t whylen)
{
	size_t i;
	int pass;

	if (gid_index >= 0) {
		for (i = 0; i < pt->ngids; i++)
			if (pt->gids[i].index == (unsigned)gid_index)
				break;
		if (i == pt->ngids) {
			snprintf(why, whylen, "port %u has no GID %d (rdx-diag lists them)",
				 pt->num, gid_index);
			return -ENOENT;
		}
		if (!strcmp(pt->gids[i].type, "IB") ||
		    !gid_ip(pt->gids[i].gid, family, addr, len)) {
			snprintf(why, whylen, "GID %d (%s) names no %saddress rdma_cm can bind",
				 gid_index, pt->gids[i].gid,
				 family == AF_INET ? "IPv4 " : family == AF_INET6 ? "IPv6 " : "");
			return -ENOENT;
		}
		return 0;
	}
	/* RoCE v2 with IPv4 first (it routes, and most peers are IPv4), then
	 * RoCE v2 with IPv6, then RoCE v1.  InfiniBand GIDs are no IPs at all,
	 * whatever their subnet prefix: the IPoIB address serves those. */
	for (pass = 0; pass < 3; pass++)
		for (i = 0; i < pt->ngids; i++) {
			const struct rdx_verbs_gid *g = &pt->gids[i];
			bool v2 = !strcmp(g->type, "RoCE v2");

			if (!strcmp(g->type, "IB") || (pass < 2 && !v2) ||
			    (pass == 0 && strncmp(g->gid, "::ffff:", 7)))
				continue;
			if (gid_ip(g->gid, family, addr, len))
				return 0;
		}
	return -ENOENT;
}

int rdx_verbs_local_addr(const char *dev, unsigned port, int gid_index,
			 int family, char *addr, size_t len, char *why,
			 size_t whylen)
{
	struct rdx_verbs_dev *devs = NULL, *d = NULL;
	struct rdx_verbs_port *pt = NULL;
	size_t n = 0, i;
	int ret;

	ret = rdx_verbs_devices(&devs, &n);
	if (ret || n == 0) {
		rdx_verbs_none_reason(ret, why, whylen);
		rdx_verbs_devices_free(devs, n);
		return -ENODEV;
	}
	for (i = 0; i < n; i++)
		if (dev ? !strcmp(devs[i].name, dev) : n == 1)
			d = &devs[i];
	ret = -ENODEV;
	if (!d && dev)
		snprintf(why, whylen, "no RDMA device '%s' (rdx-diag lists them)", dev);
	else if (!d)
		snprintf(why, whylen, "%zu RDMA devices: say which with --rdma-dev", n);
	for (i = 0; d && !pt && i < d->nports; i++)
		if (port ? d->ports[i].num == port : d->ports[i].active)
			pt = &d->ports[i];
	if (d && !pt && port)
		snprintf(why, whylen, "%s has no port %u", d->name, port);
	else if (d && !pt)
		snprintf(why, whylen, "%s has no ACTIVE port", d->name);
	if (pt) {
		ret = pick_gid(pt, gid_index, family, addr, len, why, whylen);
		if (ret == -ENOENT && gid_index < 0) {
			if (ipoib_addr(d->name, family, addr, len))
				ret = 0;
			else
				snprintf(why, whylen, "%s port %u has no IP address to bind (no RoCE GID with one, no IPoIB interface)",
					 d->name, pt->num);
		}
	}
	rdx_verbs_devices_free(devs, n);
	return ret;
}
