/* rdx-diag: what this host offers for RDMA, and which transport rdsend
 * would get to HOST.  The report goes to stdout (text, or one JSON object
 * with --json); the verdict, when it is bad, is one line on stderr. */
#include "cmd/cli.h"

#include "core/err.h"
#include "core/log.h"
#include "core/units.h"
#include "core/verbs/verbs_probe.h"
#include "core/xport.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef RDX_VERSION
#define RDX_VERSION "0.0.0"
#endif

/* Exit statuses, as documented in rdx-diag(1). */
enum {
	DIAG_EXIT_NO_RDMA = RDX_EXIT_FAIL,  /* no device, or no ACTIVE port */
	DIAG_EXIT_NO_ROUTE = RDX_EXIT_CONN, /* HOST not reachable over RDMA */
};

#define DIAG_TIMEOUT_MS 2000

static const struct rdx_opt diag_opts[] = {
	{ "verbose", 'v', RDX_ARG_NONE, NULL,
	  "also firmware, MTU limits, LIDs, GID table sizes, route timing", NULL },
	{ "json", OPT_JSON, RDX_ARG_NONE, NULL,
	  "print the report as one JSON object", NULL },
	{ "timeout", OPT_TIMEOUT, RDX_ARG_REQUIRED, "SECS",
	  "give up resolving HOST after SECS (default 2)", NULL },
	{ "bind", OPT_BIND, RDX_ARG_REQUIRED, "ADDR",
	  "local address to reach HOST from, as rdsend --bind", "host" },
	{ "ipv4", '4', RDX_ARG_NONE, NULL, "use IPv4 only", NULL },
	{ "ipv6", '6', RDX_ARG_NONE, NULL, "use IPv6 only", NULL },
	CLI_COMMON_TAIL,
};

static const struct rdx_cli diag_cli = {
	.tool = "rdx-diag",
	.usage = "[OPTIONS] [HOST]",
	.summary = "Show RDMA devices, ports, GIDs and the memory-lock limit, and which\n"
		   "transport rdsend would use to reach HOST.",
	.opts = diag_opts,
	.exits = "Exit status: 0 RDMA usable (and HOST reachable through it), 1 RDMA not\n"
		 "usable here (no device, no ACTIVE port, memory-lock limit too low),\n"
		 "2 usage, 3 HOST not reachable over RDMA.",
	.args = "host",
};

struct diag {
	struct rdx_verbs_dev *devs;
	size_t ndevs;
	int devs_err;	     /* what rdx_verbs_devices() returned */
	unsigned active;     /* ACTIVE ports over all devices */
	const char *host;    /* NULL: no HOST given */
	struct rdx_verbs_route route;
	int route_err;
	char route_why[256];
	char memlock[32];
	uint64_t memlock_soft, memlock_hard;
	uint64_t memlock_need; /* what rdsend's default ring pins */
	bool memlock_exempt;   /* root: CAP_IPC_LOCK passes the limit */
	bool memlock_short;
	char memlock_hint[256]; /* "" when the limit is no obstacle */
	char reason[320];	/* why rdsend would use TCP; "" when it would not */
	int exit;
};

static int handle(int key, const char *arg, void *ctx)
{
	/* Every key in the table is one the transfer tools share. */
	return cli_common_opt(ctx, key, arg) ? -1 : 0;
}

/* ------------------------------------------------------------ findings */

static void why_no_port(struct diag *d)
{
	size_t i;

	if (d->devs_err || !d->ndevs) {
		rdx_verbs_none_reason(d->devs_err, d->reason, sizeof(d->reason));
		return;
	}
	for (i = 0; i < d->ndevs && d->devs[i].err; i++)
		;
	if (i == d->ndevs)
		snprintf(d->reason, sizeof(d->reason),
			 "cannot open any RDMA device (%s: %s)", d->devs[0].name,
			 rdx_strerror(d->devs[0].err));
	else
		snprintf(d->reason, sizeof(d->reason), "no RDMA port is ACTIVE");
}

/* The limit against what rdsend pins with its default ring: every slot,
 * plus 1 MiB for queues, as the transport counts it before choosing RDMA
 * (session.c); root is exempt, as the kernel's CAP_IPC_LOCK check is. */
static void memlock_check(struct diag *d, const struct rdx_xfer_opts *defaults)
{
	static const char forever[] =
		"for every login with '* - memlock unlimited' in /etc/security/limits.d/rdxfer.conf";
	char need[32];

	d->memlock_soft = rdx_memlock_limit(d->memlock, sizeof(d->memlock),
					    &d->memlock_hard);
	d->memlock_need = rdx_rdma_lock_need(defaults);
	d->memlock_exempt = geteuid() == 0;
	if (d->memlock_soft == RDX_MEMLOCK_UNLIMITED || d->memlock_exempt)
		return;
	d->memlock_short = d->memlock_soft < d->memlock_need;
	if (!d->memlock_short)
		return;
	rdx_fmt_bytes(need, sizeof(need), d->memlock_need);
	if (d->memlock_hard == RDX_MEMLOCK_UNLIMITED) {
		snprintf(d->memlock_hint, sizeof(d->memlock_hint),
			 "rdsend pins %s by default: raise the limit with 'ulimit -l unlimited', or %s",
			 need, forever);
	} else if (d->memlock_hard >= d->memlock_need) {
		/* ulimit -l counts KiB. */
		snprintf(d->memlock_hint, sizeof(d->memlock_hint),
			 "rdsend pins %s by default: raise the limit with 'ulimit -l %llu' (the hard limit), or %s",
			 need, (unsigned long long)d->memlock_hard / 1024, forever);
	} else {
		char hard[32];

		rdx_fmt_bytes(hard, sizeof(hard), d->memlock_hard);
		snprintf(d->memlock_hint, sizeof(d->memlock_hint),
			 "rdsend pins %s by default, more than the hard limit (%s) lets 'ulimit -l' raise it to: raise it %s",
			 need, hard, forever);
	}
}

/* Decides as rdsend --transport auto does: devices, rdma_cm, the memory
 * lock, then the route to HOST; the first obstacle is the reason. */
static void diagnose(struct diag *d, const struct cli_state *c)
{
	const char *unavailable;
	size_t i, p;

	d->devs_err = rdx_verbs_devices(&d->devs, &d->ndevs);
	for (i = 0; i < d->ndevs; i++)
		for (p = 0; p < d->devs[i].nports; p++)
			d->active += d->devs[i].ports[p].active;
	memlock_check(d, &c->o);
	if (d->host) {
		uint64_t ms = c->o.timeout_ms, t0 = rdx_now_ns();

		rdx_info(1, "asking rdma_cm for a route to %s (timeout %llu ms)",
			 d->host, (unsigned long long)ms);
		d->route_err = rdx_verbs_route(d->host, c->o.bind, c->o.family,
					       ms > 3600000 ? 3600000 : (unsigned)ms,
					       &d->route, d->route_why,
					       sizeof(d->route_why));
		rdx_info(1, "rdma_cm answered in %.0f ms: %s",
			 (double)(rdx_now_ns() - t0) / 1e6,
			 d->route_err ? rdx_strerror(d->route_err) : "resolved");
	}
	d->exit = DIAG_EXIT_NO_RDMA;
	if (!d->active) {
		why_no_port(d);
	} else if ((unavailable = rdx_verbs_unavailable())) {
		snprintf(d->reason, sizeof(d->reason), "%s", unavailable);
	} else if (d->memlock_short) {
		char need[32];

		rdx_fmt_bytes(need, sizeof(need), d->memlock_need);
		snprintf(d->reason, sizeof(d->reason),
			 "RDMA needs %s of locked memory but RLIMIT_MEMLOCK is %s",
			 need, d->memlock);
	} else if (d->host && d->route_err) {
		snprintf(d->reason, sizeof(d->reason), "%s", d->route_why);
		d->exit = DIAG_EXIT_NO_ROUTE;
	} else {
		d->exit = RDX_EXIT_OK;
	}
}

/* ---------------------------------------------------------------- text */

static void print_port(const struct rdx_verbs_port *pt, int verbose)
{
	size_t g;

	printf("  port %u: %s, link layer %s", pt->num, pt->state,
	       pt->link_layer);
	if (pt->active_mtu)
		printf(", active MTU %u", pt->active_mtu);
	if (verbose && pt->max_mtu)
		printf(" (max %u)", pt->max_mtu);
	if (pt->speed[0])
		printf(", %s", pt->speed);
	if (verbose && pt->lid)
		printf(", LID 0x%04x", pt->lid);
	if (verbose)
		printf(", GID table %u", pt->gid_tbl_len);
	printf("\n");
	if (!pt->ngids)
		printf("    no GIDs\n");
	for (g = 0; g < pt->ngids; g++) {
		const struct rdx_verbs_gid *e = &pt->gids[g];

		printf("    GID %-3u %-40s %-8s %s\n", e->index, e->gid,
		       e->type[0] ? e->type : "?", e->netdev);
	}
}

static void print_text(const struct diag *d, int verbose)
{
	size_t i, p;

	if (!d->ndevs) {
		char why[160];

		rdx_verbs_none_reason(d->devs_err, why, sizeof(why));
		printf("%s\n", why);
	}
	for (i = 0; i < d->ndevs; i++) {
		const struct rdx_verbs_dev *v = &d->devs[i];

		printf("device %s: node GUID %s", v->name, v->node_guid);
		if (verbose && v->fw_ver[0])
			printf(", firmware %s", v->fw_ver);
		if (v->err)
			printf(", cannot open: %s", rdx_strerror(v->err));
		printf("\n");
		for (p = 0; p < v->nports; p++)
			print_port(&v->ports[p], verbose);
	}
	printf("memlock limit: %s%s\n", d->memlock,
	       d->memlock_soft == RDX_MEMLOCK_UNLIMITED ? "" :
	       d->memlock_exempt			   ? " (root is exempt)" :
	       d->memlock_short				   ? ", too low for RDMA" :
								     "");
	if (d->memlock_hint[0])
		printf("  %s\n", d->memlock_hint);
	if (!d->host)
		return;
	if (d->exit && d->route_err)
		printf("transport to %s: tcp: %s\n", d->host, d->reason);
	else if (d->exit)
		printf("transport to %s: tcp: %s (rdma_cm reaches it via %s port %u)\n",
		       d->host, d->reason, d->route.dev, d->route.port);
	else
		printf("transport to %s: rdma via %s port %u (local %s%s%s)\n",
		       d->host, d->route.dev, d->route.port, d->route.local,
		       d->route.sgid[0] ? ", GID " : "", d->route.sgid);
}

/* ---------------------------------------------------------------- JSON */

/* Prints s as a JSON string; NULL and "" print null when empty_null. */
static void jstr(const char *s, bool empty_null)
{
	if (!s || (empty_null && !*s)) {
		fputs("null", stdout);
		return;
	}
	putchar('"');
	for (; *s; s++) {
		unsigned char ch = (unsigned char)*s;

		if (ch == '"' || ch == '\\')
			printf("\\%c", ch);
		else if (ch < 0x20)
			printf("\\u%04x", ch);
		else
			putchar(ch);
	}
	putchar('"');
}

static void jkey(const char *sep, const char *key)
{
	printf("%s\"%s\":", sep, key);
}

static void jbytes(uint64_t v)
{
	if (v == RDX_MEMLOCK_UNLIMITED)
		fputs("null", stdout);
	else
		printf("%llu", (unsigned long long)v);
}

static void json_port(const struct rdx_verbs_port *pt)
{
	size_t g;

	printf("{\"port\":%u,\"state\":", pt->num);
	jstr(pt->state, false);
	printf(",\"active\":%s,\"link_layer\":", pt->active ? "true" : "false");
	jstr(pt->link_layer, false);
	printf(",\"active_mtu\":%u,\"max_mtu\":%u,\"speed\":", pt->active_mtu,
	       pt->max_mtu);
	jstr(pt->speed, true);
	printf(",\"lid\":%u,\"gid_tbl_len\":%u,\"gids\":[", pt->lid,
	       pt->gid_tbl_len);
	for (g = 0; g < pt->ngids; g++) {
		const struct rdx_verbs_gid *e = &pt->gids[g];

		printf("%s{\"index\":%u,\"gid\":", g ? "," : "", e->index);
		jstr(e->gid, false);
		jkey(",", "type");
		jstr(e->type, true);
		jkey(",", "netdev");
		jstr(e->netdev, true);
		putchar('}');
	}
	fputs("]}", stdout);
}

static void json_route(const struct diag *d)
{
	const struct rdx_verbs_route *r = &d->route;

	jkey(",", "host");
	if (!d->host) {
		fputs("null", stdout);
		return;
	}
	fputs("{\"name\":", stdout);
	jstr(d->host, false);
	printf(",\"transport\":\"%s\"", d->exit ? "tcp" : "rdma");
	jkey(",", "reason");
	jstr(d->exit ? d->reason : NULL, true);
	jkey(",", "route");
	if (d->route_err) {
		fputs("null", stdout);
	} else {
		fputs("{\"device\":", stdout);
		jstr(r->dev, false);
		printf(",\"port\":%u", r->port);
		jkey(",", "local");
		jstr(r->local, true);
		jkey(",", "remote");
		jstr(r->remote, true);
		jkey(",", "sgid");
		jstr(r->sgid, true);
		putchar('}');
	}
	jkey(",", "route_error");
	jstr(d->route_err ? d->route_why : NULL, true);
	putchar('}');
}

static void print_json(const struct diag *d)
{
	char why[160] = "";
	size_t i, p;

	if (!d->ndevs)
		rdx_verbs_none_reason(d->devs_err, why, sizeof(why));
	printf("{\"tool\":\"rdx-diag\",\"version\":\"%s\",\"devices\":[",
	       RDX_VERSION);
	for (i = 0; i < d->ndevs; i++) {
		const struct rdx_verbs_dev *v = &d->devs[i];

		printf("%s{\"name\":", i ? "," : "");
		jstr(v->name, false);
		jkey(",", "node_guid");
		jstr(v->node_guid, false);
		jkey(",", "fw_ver");
		jstr(v->fw_ver, true);
		jkey(",", "error");
		jstr(v->err ? rdx_strerror(v->err) : NULL, true);
		printf(",\"any_active\":%s,\"ports\":[",
		       v->any_active ? "true" : "false");
		for (p = 0; p < v->nports; p++) {
			fputs(p ? "," : "", stdout);
			json_port(&v->ports[p]);
		}
		fputs("]}", stdout);
	}
	fputs("]", stdout);
	jkey(",", "devices_reason");
	jstr(why, true);
	printf(",\"active_ports\":%u,\"memlock\":{\"limit\":", d->active);
	jstr(d->memlock, false);
	jkey(",", "bytes");
	jbytes(d->memlock_soft);
	jkey(",", "hard_bytes");
	jbytes(d->memlock_hard);
	printf(",\"needed_bytes\":%llu,\"root_exempt\":%s,\"too_low\":%s",
	       (unsigned long long)d->memlock_need,
	       d->memlock_exempt ? "true" : "false",
	       d->memlock_short ? "true" : "false");
	jkey(",", "hint");
	jstr(d->memlock_hint, true);
	putchar('}');
	json_route(d);
	printf(",\"usable\":%s,\"exit\":%d", d->exit ? "false" : "true", d->exit);
	jkey(",", "reason");
	jstr(d->reason, true);
	fputs("}\n", stdout);
}

int main(int argc, char **argv)
{
	struct cli_state c = { .cli = &diag_cli };
	struct diag d = { 0 };
	int optind_;

	rdx_log_init("rdx-diag", 0);
	rdx_xfer_opts_init(&c.o);
	c.o.timeout_ms = DIAG_TIMEOUT_MS;
	optind_ = rdx_opt_parse(&diag_cli, argc, argv, handle, &c);
	if (optind_ < 0)
		return RDX_EXIT_USAGE;
	if (c.done)
		return RDX_EXIT_OK;
	rdx_log_init("rdx-diag", c.verbose);
	if (argc - optind_ > 1) {
		rdx_error("usage: rdx-diag %s (see --help)", diag_cli.usage);
		return RDX_EXIT_USAGE;
	}
	if (argc - optind_ == 1)
		d.host = argv[optind_];
	diagnose(&d, &c);
	if (c.json)
		print_json(&d);
	else
		print_text(&d, c.verbose);
	fflush(stdout);
	if (d.exit)
		rdx_error("%s", d.reason);
	rdx_verbs_devices_free(d.devs, d.ndevs);
	return d.exit;
}
