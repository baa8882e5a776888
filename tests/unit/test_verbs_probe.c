/* The RDMA probe: argument checks, the memlock limit, the device list's
 * invariants, and routes.  Without RDMA devices (the build machines) every
 * route must fail at once with "no RDMA devices".  With them, and RXE_ADDR
 * set as in a scripts/rxe-vm.sh guest (tests/rxe/diag.sh runs this there),
 * the address must resolve through RXE_DEV and the failures must come
 * back with a reason, within their timeout. */
#include "core/units.h"
#include "core/verbs/verbs_probe.h"
#include "tap.h"

#include <errno.h>
#include <netdb.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#define SKIP(...)                                                              \
	do {                                                                   \
		tap_n++;                                                       \
		printf("ok %d - # skip ", tap_n);                              \
		printf(__VA_ARGS__);                                           \
		printf("\n");                                                  \
	} while (0)

static struct rdx_verbs_route r;
static char why[256];
static double took_ms;

static int route(const char *host, const char *bind, int family, unsigned ms)
{
	uint64_t t0 = rdx_now_ns();
	int ret;

	memset(&r, 0xa5, sizeof(r));
	strcpy(why, "untouched");
	ret = rdx_verbs_route(host, bind, family, ms, &r, why, sizeof(why));
	took_ms = (double)(rdx_now_ns() - t0) / 1e6;
	printf("# route %s%s%s: %d (%s) in %.0f ms: %s\n", host ? host : "(null)",
	       bind ? " from " : "", bind ? bind : "", ret,
	       ret ? strerror(-ret) : "ok", took_ms, ret ? why : r.dev);
	return ret;
}

static bool one_line(const char *s)
{
	return s[0] && !strchr(s, '\n') && strcmp(s, "untouched");
}

static void check_args(void)
{
	CHECK(route(NULL, NULL, AF_UNSPEC, 1000) == -EINVAL && one_line(why),
	      "no host: -EINVAL with a reason");
	CHECK(route("", NULL, AF_UNSPEC, 1000) == -EINVAL && one_line(why),
	      "empty host: -EINVAL with a reason");
	CHECK(route("[::1", NULL, AF_UNSPEC, 1000) == -EINVAL &&
		      strstr(why, "[::1"),
	      "unclosed bracket: -EINVAL naming the host");
	CHECK(route("::1", "[::1", AF_UNSPEC, 1000) == -EINVAL &&
		      strstr(why, "local address"),
	      "bad bind: -EINVAL naming the local address");
	CHECK(route("::1", NULL, 12345, 1000) == -EINVAL && one_line(why),
	      "unknown family: -EINVAL");
}

static void check_memlock(void)
{
	struct rlimit rl;
	uint64_t soft, hard;
	char text[32];

	CHECK(getrlimit(RLIMIT_MEMLOCK, &rl) == 0, "getrlimit");
	soft = rdx_memlock_limit(text, sizeof(text), &hard);
	printf("# memlock %s (%llu, hard %llu)\n", text,
	       (unsigned long long)soft, (unsigned long long)hard);
	if (rl.rlim_cur == RLIM_INFINITY)
		CHECK(soft == RDX_MEMLOCK_UNLIMITED && !strcmp(text, "unlimited"),
		      "unlimited soft limit");
	else
		CHECK(soft == rl.rlim_cur && strstr(text, "B") &&
			      strcmp(text, "unlimited"),
		      "soft limit in bytes and as a size");
	CHECK(rl.rlim_max == RLIM_INFINITY ? hard == RDX_MEMLOCK_UNLIMITED :
					     hard == rl.rlim_max,
	      "hard limit");
	CHECK(rdx_memlock_limit(text, sizeof(text), NULL) == soft,
	      "hard may be NULL");
	/* Lowering the soft limit shows at once. */
	if (rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur > 65536) {
		struct rlimit low = { .rlim_cur = 65536, .rlim_max = rl.rlim_max };

		CHECK(setrlimit(RLIMIT_MEMLOCK, &low) == 0 &&
			      rdx_memlock_limit(text, sizeof(text), NULL) == 65536 &&
			      !strcmp(text, "64.00 KiB"),
		      "a lowered limit reads back as 64.00 KiB (%s)", text);
		setrlimit(RLIMIT_MEMLOCK, &rl);
	}
}

static void check_reasons(void)
{
	char t[128];

	rdx_verbs_none_reason(-ENOSYS, t, sizeof(t));
	CHECK(!strcmp(t, "no RDMA devices (this kernel has no RDMA support)"),
	      "reason for no kernel support: %s", t);
	rdx_verbs_none_reason(0, t, sizeof(t));
	CHECK(!strcmp(t, "no RDMA devices"), "reason for an empty list");
	rdx_verbs_none_reason(-EACCES, t, sizeof(t));
	CHECK(!strncmp(t, "no RDMA devices (ibv_get_device_list: ", 38),
	      "reason for another error: %s", t);
}

/* Returns the number of devices, after checking what the list promises. */
static size_t check_devices(void)
{
	struct rdx_verbs_dev *devs = (void *)1;
	size_t n = 99, i, p, g, active = 0;
	bool ok = true;
	int ret;

	ret = rdx_verbs_devices(&devs, &n);
	CHECK(ret == 0 || ret == -ENOSYS, "rdx_verbs_devices: %d", ret);
	CHECK(ret == 0 || (devs == NULL && n == 0), "an error leaves no list");
	CHECK(n > 0 || devs == NULL, "an empty list is NULL");
	for (i = 0; i < n; i++) {
		const struct rdx_verbs_dev *v = &devs[i];
		bool any = false;

		printf("# device %s err %d, %zu ports\n", v->name, v->err,
		       v->nports);
		ok = ok && v->name[0] && (v->err || v->nports > 0);
		for (p = 0; p < v->nports; p++) {
			const struct rdx_verbs_port *pt = &v->ports[p];

			any |= pt->active;
			active += pt->active;
			ok = ok && pt->num == p + 1 &&
			     pt->active == !strcmp(pt->state, "ACTIVE");
			for (g = 0; g < pt->ngids; g++)
				ok = ok && pt->gids[g].index < pt->gid_tbl_len &&
				     (g == 0 || pt->gids[g].index > pt->gids[g - 1].index) &&
				     strcmp(pt->gids[g].gid, "::") != 0;
		}
		ok = ok && any == v->any_active;
	}
	CHECK(ok, "ports numbered from 1, ACTIVE agrees, GIDs non-zero and in order");
	CHECK(rdx_verbs_any_active(devs, n) == (active > 0), "any_active");
	rdx_verbs_devices_free(devs, n);
	rdx_verbs_devices_free(NULL, 0);
	return n;
}

static void check_no_devices(void)
{
	const char *hosts[] = { "127.0.0.1", "::1", "nonexistent.invalid" };
	size_t i;

	for (i = 0; i < sizeof(hosts) / sizeof(hosts[0]); i++)
		CHECK(route(hosts[i], NULL, AF_UNSPEC, 5000) == -ENODEV &&
			      !strncmp(why, "no RDMA devices", 15) && one_line(why) &&
			      took_ms < 1000,
		      "no devices: %s fails at once with \"%s\"", hosts[i], why);
}

/* In a Soft-RoCE guest: RXE_ADDR is ours on RXE_DEV, 192.0.2.0/24 is the
 * subnet, nothing answers at .77, and there is no default route. */
static void check_guest(const char *addr, const char *dev)
{
	char bracketed[80];

	CHECK(route(addr, NULL, AF_UNSPEC, 5000) == 0 && !strcmp(r.dev, dev) &&
		      r.port == 1 && !strcmp(r.local, addr) &&
		      !strcmp(r.remote, addr),
	      "%s resolves through %s port 1", addr, dev);
	CHECK(route(addr, addr, AF_INET, 5000) == 0 && !strcmp(r.dev, dev),
	      "and from --bind %s, IPv4 only", addr);
	snprintf(bracketed, sizeof(bracketed), "[%s]", addr);
	CHECK(route(bracketed, NULL, AF_UNSPEC, 5000) == 0 && !strcmp(r.dev, dev),
	      "bracketed %s", bracketed);
	CHECK(route(addr, NULL, AF_INET6, 5000) == -ENOENT &&
		      strstr(why, "cannot resolve"),
	      "IPv6 only: %s does not resolve", addr);
	CHECK(route(addr, "::1", AF_UNSPEC, 5000) == -EINVAL &&
		      strstr(why, "no address family in common"),
	      "bind of another family: %s", why);
	CHECK(route("198.51.100.1", NULL, AF_UNSPEC, 5000) < 0 &&
		      strstr(why, "198.51.100.1 is not reachable through an RDMA device (rdma_resolve_addr: "),
	      "no route to 198.51.100.1: %s", why);
	/* A neighbour that never answers ARP: bounded by the timeout (plus
	 * grace, plus slack for an emulated machine). */
	CHECK(route("192.0.2.77", NULL, AF_UNSPEC, 1000) < 0 &&
		      strstr(why, "192.0.2.77 is not reachable through an RDMA device") &&
		      took_ms < 6000,
	      "silent neighbour: fails within the timeout (%.0f ms)", took_ms);
}

/* --rdma-dev / --rdma-port / --gid-index → the address to bind. */
static void check_local_addr(const char *addr, const char *dev, int gid)
{
	char a[64] = "", w[256] = "";

	CHECK(rdx_verbs_local_addr(dev, 0, -1, AF_UNSPEC, a, sizeof(a), w, sizeof(w)) == 0 &&
		      !strcmp(a, addr),
	      "%s, first active port, no GID index: %s (%s)", dev, a, w);
	CHECK(rdx_verbs_local_addr(NULL, 1, -1, AF_INET, a, sizeof(a), w, sizeof(w)) == 0 &&
		      !strcmp(a, addr),
	      "the only device, port 1, IPv4: %s", a);
	CHECK(rdx_verbs_local_addr(dev, 1, gid, AF_UNSPEC, a, sizeof(a), w, sizeof(w)) == 0 &&
		      !strcmp(a, addr),
	      "GID %d is %s", gid, a);
	CHECK(rdx_verbs_local_addr(dev, 1, 0, AF_UNSPEC, a, sizeof(a), w, sizeof(w)) == -ENOENT &&
		      strstr(w, "GID 0 (fe80:") && one_line(w),
	      "GID 0 is link-local: %s", w);
	CHECK(rdx_verbs_local_addr(dev, 1, 99, AF_UNSPEC, a, sizeof(a), w, sizeof(w)) == -ENOENT &&
		      strstr(w, "no GID 99"),
	      "no GID 99: %s", w);
	CHECK(rdx_verbs_local_addr(dev, 1, -1, AF_INET6, a, sizeof(a), w, sizeof(w)) == -ENOENT &&
		      strstr(w, "no IP address"),
	      "no IPv6 address on the port: %s", w);
	CHECK(rdx_verbs_local_addr(dev, 7, -1, AF_UNSPEC, a, sizeof(a), w, sizeof(w)) == -ENODEV &&
		      strstr(w, "has no port 7"),
	      "no port 7: %s", w);
	CHECK(rdx_verbs_local_addr("mlx9_9", 0, -1, AF_UNSPEC, a, sizeof(a), w, sizeof(w)) == -ENODEV &&
		      strstr(w, "no RDMA device 'mlx9_9'"),
	      "no such device: %s", w);
}

int main(void)
{
	const char *addr = getenv("RXE_ADDR"), *dev = getenv("RXE_DEV");
	size_t n;

	check_args();
	check_memlock();
	check_reasons();
	n = check_devices();
	if (n == 0)
		check_no_devices();
	else
		SKIP("RDMA devices present: no-device routes");
	if (n > 0 && addr && dev) {
		check_guest(addr, dev);
		check_local_addr(addr, dev, getenv("RXE_GID_INDEX") ? atoi(getenv("RXE_GID_INDEX")) : 1);
	} else {
		char a[64], w[256] = "";

		CHECK(rdx_verbs_local_addr("rxe0", 0, -1, AF_UNSPEC, a, sizeof(a), w, sizeof(w)) == -ENODEV &&
			      !strncmp(w, "no RDMA devices", 15),
		      "no devices: --rdma-dev rxe0 fails with \"%s\"", w);
	}
	if (!(n > 0 && addr && dev))
		SKIP("no RDMA devices or no RXE_ADDR/RXE_DEV: routes through a device");
	return TAP_DONE();
}
