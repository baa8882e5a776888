/* rdpipe: a shell pipeline across hosts.  Each SEGMENT runs where it
 * says, as "rdpipe --far" started over SSH (src/cp/remote.c), or on a
 * thread here for a local one; each hop between two segments is an
 * rdxfer transfer of its own, directly between their hosts, with a fresh
 * key handed to both ends on the SSH channel (src/pipe/plan.h says who
 * listens).  This process only logs in, starts, relays stderr, and
 * decides: the data passes through it only where a segment (or its own
 * stdin or stdout) is here.
 *
 *   rdpipe (here)                 a                          b
 *     │ ── SSH: rdpipe --far ... -- 'CMD' ──────────────────▶ │ listens (in)
 *     │ ◀─ RDX-PORT Nb ────────────────────────────────────── │
 *     │ ── SSH: rdpipe --far --far-dial b Nb -- 'CMD' ▶ │      │
 *     │                                  │ ═══ hop a→b ══════▶ │
 *     │ ◀─ stderr ("a: ..."), RDX-DONE, exit status ── both ── │
 *
 * The far side's stdout carries lines for us (RDX-PORT, RDX-OUT-PORT,
 * RDX-DONE); its stdin the keys, then nothing until its end, which stops
 * it (the pipeline is torn down, or this process went away). */
#include "cmd/cli.h"

#include "core/auth.h"
#include "core/err.h"
#include "core/log.h"
#include "core/progress.h"
#include "core/units.h"
#include "cp/copy_int.h"
#include "cp/remote.h"
#include "pipe/plan.h"
#include "pipe/seg.h"

#include <errno.h>
#include <openssl/crypto.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

enum {
	OPT_REMOTE_PATH = 512,
	OPT_RDMA_ADDR,
	OPT_DRY_RUN,
	OPT_NO_PREFIX,
	/* The far side's (hidden): what rdpipe runs over SSH. */
	OPT_FAR,
	OPT_FAR_IN,
	OPT_FAR_OUT,
	OPT_FAR_DIAL,
	OPT_FAR_PORT,
	OPT_FAR_OP,
	OPT_FAR_DRAIN,
};

static const struct rdx_opt rdpipe_opts[] = {
	{ "verbose", 'v', RDX_ARG_NONE, NULL,
	  "more detail on stderr; each hop's bytes and rate at the end", NULL },
	{ "progress", OPT_PROGRESS, RDX_ARG_NONE, NULL,
	  "progress bar of the data reaching the last segment (when stderr is a terminal)", NULL },
	{ "dry-run", OPT_DRY_RUN, RDX_ARG_NONE, NULL,
	  "print what would run where, and exit", NULL },
	{ "no-prefix", OPT_NO_PREFIX, RDX_ARG_NONE, NULL,
	  "print the far segments' stderr lines without their 'host: ' prefix", NULL },
	CLI_SSH_ROWS,
	{ "remote-path", OPT_REMOTE_PATH, RDX_ARG_REQUIRED, "DIR",
	  "directory of rdpipe on the remote hosts (default: their PATH)", NULL },
	{ "rdma-addr", OPT_RDMA_ADDR, RDX_ARG_REQUIRED, "HOST=ADDR",
	  "the data address of HOST (as the SEGMENT names it) for the hosts that dial it (default: its SSH host name); repeatable",
	  NULL },
	{ "transport", OPT_TRANSPORT, RDX_ARG_REQUIRED, "MODE",
	  "auto, tcp or rdma, for every hop (default auto)", "auto tcp rdma" },
	{ "streams", OPT_STREAMS, RDX_ARG_REQUIRED, "N",
	  "parallel connections or RDMA queue pairs per hop, 1..64 (default 1)", NULL },
	CLI_ACK_TIMEOUT_ROW,
	{ "compress", 'C', RDX_ARG_OPTIONAL, "LEVEL",
	  "zstd-compress each hop (level 1..19, default 1)", NULL },
	{ "encrypt", OPT_ENCRYPT, RDX_ARG_NONE, NULL,
	  "encrypt and authenticate each hop (AES-256-GCM)", NULL },
	{ "timeout", OPT_TIMEOUT, RDX_ARG_REQUIRED, "SECS",
	  "a hop gives up after SECS of silence or stall (default 60)", NULL },
	{ "connect-timeout", OPT_CONNECT_TIMEOUT, RDX_ARG_REQUIRED, "SECS",
	  "give up connecting (SSH, then each hop) after SECS (default 10)", NULL },
	{ "far", OPT_FAR, RDX_ARG_NONE, NULL, NULL, NULL },
	{ "far-in", OPT_FAR_IN, RDX_ARG_REQUIRED, "HOW", NULL, NULL },
	{ "far-out", OPT_FAR_OUT, RDX_ARG_REQUIRED, "HOW", NULL, NULL },
	{ "far-dial", OPT_FAR_DIAL, RDX_ARG_REQUIRED, "HOST", NULL, NULL },
	{ "far-port", OPT_FAR_PORT, RDX_ARG_REQUIRED, "PORT", NULL, NULL },
	{ "far-op", OPT_FAR_OP, RDX_ARG_REQUIRED, "OP", NULL, NULL },
	{ "far-drain", OPT_FAR_DRAIN, RDX_ARG_NONE, NULL, NULL, NULL },
	{ "progress-lines", OPT_PROGRESS_LINES, RDX_ARG_NONE, NULL, NULL, NULL },
	CLI_COMMON_TAIL,
};

static const struct rdx_cli rdpipe_cli = {
	.tool = "rdpipe",
	.usage = "[OPTIONS] SEGMENT...",
	.summary = "Run a pipeline across hosts: each SEGMENT is [user@]host:CMD (or :CMD here), its\n"
		   "standard output the next one's standard input, the data going directly from\n"
		   "host to host.  rdpipe's stdin (unless a terminal) feeds the first segment, the\n"
		   "last one's output comes to its stdout.  CMD may be an operator instead: <FILE\n"
		   "sends FILE (after the input before it ends), >FILE and >>FILE write the input\n"
		   "to FILE and send nothing on.  rdpipe must be installed on every host.",
	.opts = rdpipe_opts,
	.args = "scp",
	.exits = "Exit status: 0 when every segment and every hop succeeded; else the first failed\n"
		 "segment's command status (128+N for signal N), or 2 usage, 3 SSH or data\n"
		 "connection/authentication/timeout, 4 local I/O, 5 rdpipe missing or failing on a\n"
		 "host, 6 integrity, 130 interrupted.",
};

struct opts {
	struct cli_state c; /* first: cli_common_opt gets it */
	struct cp_opts cp;  /* SSH options, --remote-path, xo */
	bool dry_run;
	bool no_prefix;
	const char *addr[64]; /* --rdma-addr HOST=ADDR */
	unsigned naddr;
	/* --far */
	bool far;
	enum pp_end far_in, far_out;
	const char *far_dial, *far_port;
	enum pp_op far_op;
	bool far_drain;
};

static int bad(const char *opt, const char *arg, const char *want)
{
	rdx_error("invalid value '%s' for %s: expected %s", arg, opt, want);
	return -1;
}

static const char *const op_names[] = { "cmd", "in", "out", "append" };
static const char *const end_names[] = { "none", "fd", "listen", "dial" };

static int pick(const char *opt, const char *arg, const char *const *names, int n, int *out)
{
	for (int i = 0; i < n; i++)
		if (!strcmp(arg, names[i])) {
			*out = i;
			return 0;
		}
	return bad(opt, arg, "a far mode rdpipe itself passes");
}

static int handle(int key, const char *arg, void *ctx)
{
	struct opts *o = ctx;
	uint64_t v;
	int ret = cli_common_opt(&o->c, key, arg), e = 0;

	if (ret <= 0)
		return ret;
	switch (key) {
	case OPT_DRY_RUN:
		o->dry_run = true;
		return 0;
	case OPT_NO_PREFIX:
		o->no_prefix = true;
		return 0;
	case 'P':
	case 'i':
	case 'F':
	case 'o':
	case 'B':
	case 'c':
	case 'J':
		return cp_ssh_cli(&o->cp.ssh, &o->c.o.connect_timeout_ms, "rdpipe", key, arg);
	case OPT_REMOTE_PATH:
		if (!*arg)
			return bad("--remote-path", arg, "a directory");
		o->cp.remote_path = arg;
		return 0;
	case OPT_RDMA_ADDR: {
		const char *eq = strchr(arg, '=');

		if (!eq || eq == arg || !eq[1])
			return bad("--rdma-addr", arg, "HOST=ADDR");
		if (o->naddr == sizeof(o->addr) / sizeof(o->addr[0])) {
			rdx_error("too many --rdma-addr options");
			return -1;
		}
		o->addr[o->naddr++] = arg;
		return 0;
	}
	case 'C':
		return cli_compress(&o->c, arg);
	case OPT_CONNECT_TIMEOUT:
		return cp_ssh_connect_timeout(&o->cp.ssh, &o->c.o.connect_timeout_ms,
					      "--connect-timeout", arg);
	case OPT_FAR:
		o->far = true;
		return 0;
	case OPT_FAR_IN:
		ret = pick("--far-in", arg, end_names, 4, &e);
		o->far_in = (enum pp_end)e;
		return ret;
	case OPT_FAR_OUT:
		ret = pick("--far-out", arg, end_names, 4, &e);
		o->far_out = (enum pp_end)e;
		return ret;
	case OPT_FAR_DIAL:
		o->far_dial = arg;
		return 0;
	case OPT_FAR_PORT:
		if (rdx_parse_uint(arg, 1, 65535, &v))
			return bad("--far-port", arg, "a port from 1 to 65535");
		o->far_port = arg;
		return 0;
	case OPT_FAR_OP:
		ret = pick("--far-op", arg, op_names, 4, &e);
		o->far_op = (enum pp_op)e;
		return ret;
	case OPT_FAR_DRAIN:
		o->far_drain = true;
		return 0;
	default:
		return -1;
	}
}

/* ---- The far side: rdpipe --far, on a host of the pipeline ---------- */

static struct pp_seg far_seg;

static void far_on_signal(int sig)
{
	(void)sig;
	atomic_store(&far_seg.stop, 1);
}

/* The rest of stdin, after the keys: its end means rdpipe is gone or
 * tears the pipeline down. */
static void *far_watch(void *arg)
{
	char buf[256];
	ssize_t n;

	(void)arg;
	do
		n = read(0, buf, sizeof(buf));
	while (n > 0 || (n < 0 && errno == EINTR));
	pp_seg_stop(&far_seg);
	return NULL;
}

static void far_on_port(void *arg, bool in, unsigned port)
{
	(void)arg;
	dprintf(STDOUT_FILENO, "%s %u\n", in ? "RDX-PORT" : "RDX-OUT-PORT", port);
}

static int far_key(struct rdx_key *k)
{
	int ret = rdx_key_read_line(k, 0);

	if (ret)
		rdx_error("--far: no key on standard input");
	return ret;
}

static int far_main(struct opts *o, char *arg)
{
	struct pp_seg *s = &far_seg;
	struct pp_result r;
	struct sigaction sa = { .sa_handler = far_on_signal };
	const char *shell = getenv("SHELL");
	pthread_t t;

	if ((o->far_in != PP_NONE && o->far_in != PP_LISTEN) ||
	    (o->far_out == PP_FD) || (o->far_out == PP_DIAL && (!o->far_dial || !o->far_port))) {
		rdx_error("--far: inconsistent hops (this is rdpipe's own far mode)");
		return RDX_EXIT_USAGE;
	}
	pp_seg_init(s);
	s->op = o->far_op;
	s->arg = arg;
	s->shell = shell && *shell == '/' ? shell : "/bin/sh";
	s->drain = o->far_drain;
	s->in.how = o->far_in;
	s->out.how = o->far_out;
	s->out.host = o->far_dial;
	if (o->far_port)
		snprintf(s->out.port, sizeof(s->out.port), "%s", o->far_port);
	s->xo = o->c.o;
	s->in_progress = o->c.o.progress_lines;
	s->on_port = far_on_port;
	if ((s->in.how != PP_NONE && far_key(&s->in.key)) ||
	    (s->out.how != PP_NONE && far_key(&s->out.key)))
		return RDX_EXIT_USAGE;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	if (pthread_create(&t, NULL, far_watch, NULL) == 0)
		pthread_detach(t);
	pp_seg_run(s, &r);
	dprintf(STDOUT_FILENO, "RDX-DONE %d %d %d %d %llu %.6f %d %llu %.6f %s\n", r.status, r.sig,
		r.killed, r.in_ret, (unsigned long long)r.in.bytes, r.in.seconds, r.out_ret,
		(unsigned long long)r.out.bytes, r.out.seconds,
		r.in.transport ? r.in.transport : r.out.transport ? r.out.transport : "none");
	return pp_result_exit(&r);
}

/* ---- Here: the pipeline ------------------------------------------------ */

struct node {
	struct pp_node *p;
	struct opts *o;
	char key_in[65], key_out[65]; /* the hops' keys, hex */
	const char *data_host; /* where its neighbours dial it */
	/* far */
	struct cp_remote *r;
	char eline[1024]; /* its stderr line being read */
	size_t elen;
	bool execd; /* its command was started */
	bool over, stopped;
	/* local */
	struct pp_seg seg;
	pthread_t t;
	bool started;
	atomic_bool finished;
	/* both: the ports it listens on, 0 until known */
	atomic_uint in_port, out_port;
	bool out_told; /* out_port passed to the local node after it */
	bool done;     /* its result is known */
	struct pp_result res;
};

static void far_line(void *arg, const char *line)
{
	struct node *n = arg;
	struct pp_result *r = &n->res;
	unsigned long long ib, ob;
	char tr[16];
	uint64_t v;
	int killed;

	if (!strncmp(line, "RDX-PORT ", 9) && !rdx_parse_uint(line + 9, 1, 65535, &v)) {
		atomic_store(&n->in_port, (unsigned)v);
	} else if (!strncmp(line, "RDX-OUT-PORT ", 13) &&
		   !rdx_parse_uint(line + 13, 1, 65535, &v)) {
		atomic_store(&n->out_port, (unsigned)v);
	} else if (sscanf(line, "RDX-DONE %d %d %d %d %llu %lf %d %llu %lf %15s", &r->status,
			  &r->sig, &killed, &r->in_ret, &ib, &r->in.seconds, &r->out_ret, &ob,
			  &r->out.seconds, tr) == 10) {
		r->killed = killed != 0;
		r->in.bytes = ib;
		r->out.bytes = ob;
		r->in.transport = r->out.transport = !strcmp(tr, "rdma") ? "rdma" : !strcmp(tr, "tcp") ? "tcp" : "none";
		n->done = true;
	}
	/* Anything else is a login script's chatter. */
}

static void err_line(struct node *n, const char *buf, size_t len)
{
	char line[1100];

	rdx_printable(line, sizeof(line), buf, len);
	if (n->o->no_prefix)
		dprintf(STDERR_FILENO, "%s\n", line);
	else
		dprintf(STDERR_FILENO, "%s: %s\n", n->p->label, line);
}

static void far_err(void *arg, const char *buf, size_t len)
{
	struct node *n = arg;

	for (size_t i = 0; i < len; i++) {
		if (buf[i] == '\n' || n->elen == sizeof(n->eline)) {
			err_line(n, n->eline, n->elen);
			n->elen = 0;
			if (buf[i] == '\n')
				continue;
		}
		n->eline[n->elen++] = buf[i];
	}
}

static void local_on_port(void *arg, bool in, unsigned port)
{
	struct node *n = arg;

	atomic_store(in ? &n->in_port : &n->out_port, port);
}

static void *local_main(void *arg)
{
	struct node *n = arg;

	pp_seg_run(&n->seg, &n->res);
	n->done = true;
	atomic_store(&n->finished, true);
	return NULL;
}

/* The far command line of node n: rdpipe --far with its hops and the
 * options every hop shares; the command or file last, quoted. */
static void far_cmd(struct cp_cmd *c, const struct opts *o, const struct node *n,
		    const struct node *next, bool progress)
{
	const struct rdx_xfer_opts *x = &o->c.o;
	char buf[96];

	cp_far_tool(c, &o->cp, "rdpipe");
	snprintf(buf, sizeof(buf), " --far --far-op %s --far-in %s --far-out %s",
		 op_names[n->p->op], end_names[n->p->in], end_names[n->p->out]);
	cp_cmd_raw(c, buf);
	if (n->p->out == PP_DIAL) {
		cp_cmd_raw(c, " --far-dial ");
		cp_cmd_quoted(c, next->data_host ? next->data_host : "HOST");
		snprintf(buf, sizeof(buf), " --far-port %u", atomic_load(&next->in_port));
		cp_cmd_raw(c, buf);
	}
	if (n->p->drain)
		cp_cmd_raw(c, " --far-drain");
	if (progress)
		cp_cmd_raw(c, " --progress-lines");
	snprintf(buf, sizeof(buf), " --timeout %llu.%03llu --connect-timeout %llu.%03llu",
		 (unsigned long long)(x->timeout_ms / 1000),
		 (unsigned long long)(x->timeout_ms % 1000),
		 (unsigned long long)(x->connect_timeout_ms / 1000),
		 (unsigned long long)(x->connect_timeout_ms % 1000));
	cp_cmd_raw(c, buf);
	cp_cmd_net_opts(c, x, o->c.verbose);
	if (x->streams > 1) {
		snprintf(buf, sizeof(buf), " --streams %u", x->streams);
		cp_cmd_raw(c, buf);
	}
	if (x->compress) {
		snprintf(buf, sizeof(buf), " --compress=%d", x->compress);
		cp_cmd_raw(c, buf);
	}
	cp_cmd_raw(c, " -- ");
	cp_cmd_quoted(c, n->p->arg);
}

/* The address the others dial node n at: --rdma-addr HOST=ADDR, else the
 * host name SSH connected to. */
static const char *data_host(const struct opts *o, struct node *n)
{
	size_t len;

	if (n->p->local)
		return o->c.o.family == AF_INET6 ? "::1" : "127.0.0.1";
	len = strlen(n->p->host);
	for (unsigned i = 0; i < o->naddr; i++)
		if (!strncmp(o->addr[i], n->p->host, len) && o->addr[i][len] == '=')
			return o->addr[i] + len + 1;
	return n->r ? cp_remote_hostname(n->r) : n->p->host;
}

struct pipeline {
	struct opts *o;
	struct pp_plan plan;
	struct node *n;
	int count;
	int bar_node; /* whose input draws the bar, -1: none */
	const atomic_int *intr;
};

static bool interrupted(const struct pipeline *pl)
{
	return pl->intr && atomic_load(pl->intr);
}

static void node_stop(struct node *n)
{
	if (n->p->local) {
		if (n->started)
			pp_seg_stop(&n->seg);
	} else if (n->execd && !n->over && !n->stopped) {
		cp_remote_terminate(n->r);
	}
	n->stopped = true;
}

static bool node_over(const struct node *n)
{
	return n->p->local ? !n->started || atomic_load(&n->finished) : !n->execd || n->over;
}

/* A node's failure: its command's or a hop's, or a far side that ended
 * without saying how it went. */
static bool node_failed(const struct node *n)
{
	if (!node_over(n) || (n->p->local ? !n->started : !n->execd))
		return false;
	if (!n->done)
		return true;
	return n->res.status > 0 || n->res.in_ret || n->res.out_ret;
}

/* Moves every far channel along once; hands a far node's late output
 * port to the local node after it. */
static void pump_all(struct pipeline *pl, int wait_ms)
{
	int far = 0;

	for (int i = 0; i < pl->count; i++) {
		struct node *n = &pl->n[i];

		if (!n->p->local && n->execd && !n->over) {
			far++;
			if (cp_remote_pump(n->r, wait_ms) != 0)
				n->over = true;
		}
		if (i + 1 < pl->count && n->p->out == PP_LISTEN && !n->out_told &&
		    atomic_load(&n->out_port) && pl->n[i + 1].started) {
			pp_seg_dial(&pl->n[i + 1].seg, atomic_load(&n->out_port));
			n->out_told = true;
		}
	}
	if (!far)
		usleep((useconds_t)wait_ms * 1000);
}

/* Starts node i, whose neighbour downstream runs already (its input port
 * known when it listens).  Returns 0 or an error (printed). */
static int start_node(struct pipeline *pl, int i)
{
	struct opts *o = pl->o;
	struct node *n = &pl->n[i], *next = i + 1 < pl->count ? &pl->n[i + 1] : NULL;
	bool bar = pl->bar_node == i;
	uint64_t deadline = rdx_now_ns() + (uint64_t)CP_FAR_WAIT_S * 1000000000ull;

	if (n->p->local) {
		struct pp_seg *s = &n->seg;
		const char *shell = getenv("SHELL");

		s->op = n->p->op;
		s->arg = n->p->arg;
		s->shell = shell && *shell == '/' ? shell : "/bin/sh";
		s->drain = n->p->drain;
		s->in.how = n->p->in;
		s->in.fd = STDIN_FILENO;
		s->out.how = n->p->out;
		s->out.fd = STDOUT_FILENO;
		s->xo = o->c.o;
		/* Only local segments dial a local one. */
		s->listen_bind = o->c.o.family == AF_INET6 ? "::1" : "127.0.0.1";
		s->in_progress = bar;
		s->xo.progress = bar && o->c.o.progress;
		s->on_port = local_on_port;
		s->cb_arg = n;
		if (s->in.how == PP_DIAL)
			s->in.host = pl->n[i - 1].data_host;
		if (s->out.how == PP_DIAL) {
			s->out.host = next->data_host;
			snprintf(s->out.port, sizeof(s->out.port), "%u", atomic_load(&next->in_port));
		}
		s->in.key.bytes = (uint8_t *)n->key_in;
		s->in.key.len = strlen(n->key_in);
		s->out.key.bytes = (uint8_t *)n->key_out;
		s->out.key.len = strlen(n->key_out);
		if (pthread_create(&n->t, NULL, local_main, n)) {
			rdx_error("cannot start a thread");
			return -ENOMEM;
		}
		n->started = true;
		/* A local listener's port is known at once, from its thread. */
		while (n->p->in == PP_LISTEN && !atomic_load(&n->in_port) &&
		       !atomic_load(&n->finished)) {
			if (interrupted(pl))
				return -RDX_EINTR;
			pump_all(pl, 10);
		}
		return 0;
	} else {
		struct cp_cmd c = { 0 };
		char keys[140];
		int ret;

		far_cmd(&c, o, n, next, bar);
		if (!cp_cmd_str(&c)) {
			cp_cmd_release(&c);
			return -ENOMEM;
		}
		snprintf(keys, sizeof(keys), "%s%s%s", n->key_in, *n->key_in && *n->key_out ? "\n" : "",
			 n->key_out);
		cp_remote_on_output(n->r, far_line, far_err, n);
		ret = cp_remote_exec(n->r, cp_cmd_str(&c), keys);
		OPENSSL_cleanse(keys, sizeof(keys));
		cp_cmd_release(&c);
		if (ret)
			return ret;
		n->execd = true;
		while (n->p->in == PP_LISTEN && !atomic_load(&n->in_port)) {
			if (interrupted(pl))
				return -RDX_EINTR;
			if (n->over) {
				if (cp_remote_status(n->r) == 127)
					rdx_error("rdpipe was not found on '%s' (install it there, or name its directory with --remote-path)",
						  n->p->label);
				else
					rdx_error("rdpipe on '%s' ended before it listened", n->p->label);
				return -RDX_EREMOTE;
			}
			if (rdx_now_ns() > deadline) {
				rdx_error("rdpipe on '%s' did not report a port within %d s",
					  n->p->label, CP_FAR_WAIT_S);
				return -RDX_ETIMEOUT;
			}
			pump_all(pl, 20);
		}
	}
	return 0;
}

/* Keeps everything moving until every node is over.  A failure stops
 * the others a second later (time to end on their own and say why); an
 * interruption at once.  Once stopping, a node gets 10 s to end. */
#define FAIL_GRACE_NS 1000000000ull
#define STOP_GRACE_NS 10000000000ull
static void run_all(struct pipeline *pl)
{
	uint64_t failed_at = 0, stop_at = 0, done, total;
	struct rdx_progress bar = { 0 };
	bool started = false, known, all;
	struct node *bn = pl->bar_node >= 0 ? &pl->n[pl->bar_node] : NULL;

	for (;;) {
		pump_all(pl, 20);
		all = true;
		for (int i = 0; i < pl->count; i++) {
			all &= node_over(&pl->n[i]);
			if (!failed_at && node_failed(&pl->n[i]))
				failed_at = rdx_now_ns();
		}
		if (bn && !bn->p->local && bn->r && pl->o->c.o.progress &&
		    cp_remote_progress(bn->r, &done, &total, &known)) {
			if (!started)
				rdx_progress_init(&bar, true, known, total);
			started = true;
			rdx_progress_update(&bar, done);
		}
		if (all)
			break;
		if (!stop_at && (interrupted(pl) ||
				 (failed_at && rdx_now_ns() - failed_at >= FAIL_GRACE_NS))) {
			stop_at = rdx_now_ns();
			for (int i = 0; i < pl->count; i++)
				node_stop(&pl->n[i]);
		}
		if (stop_at && rdx_now_ns() - stop_at > STOP_GRACE_NS)
			break;
	}
	if (started)
		rdx_progress_end(&bar);
}

/* The cause to name: the first command that failed on its own (not
 * killed by us, not by SIGPIPE for a reader gone), else the first hop
 * that failed, else the first failure of any kind. */
static int first_failure(const struct pipeline *pl)
{
	int i;

	for (i = 0; i < pl->count; i++) {
		const struct node *n = &pl->n[i];

		if (n->done && n->res.status > 0 && !n->res.killed && n->res.sig != SIGPIPE)
			return i;
	}
	for (i = 0; i < pl->count; i++) {
		const struct node *n = &pl->n[i];

		if (n->done && (n->res.in_ret || n->res.out_ret) &&
		    n->res.in_ret != -RDX_EINTR && n->res.out_ret != -RDX_EINTR)
			return i;
	}
	for (i = 0; i < pl->count; i++)
		if (node_failed(&pl->n[i]) || (!pl->n[i].done && pl->n[i].p->seg))
			return i;
	return -1;
}

/* What a node is, for messages: "segment 2 ('sort') on 'b'", or rdpipe's
 * own standard input or output. */
static void describe(const struct node *n, char *buf, size_t len)
{
	char cmd[80];

	if (!n->p->seg) {
		snprintf(buf, len, "the %s", n->p->op == PP_IN ? "standard input" : "standard output");
		return;
	}
	rdx_printable(cmd, sizeof(cmd), n->p->arg, strlen(n->p->arg));
	snprintf(buf, len, "segment %d (%s%s%s) on '%s'", n->p->seg,
		 n->p->op == PP_IN ? "<" : n->p->op == PP_OUT ? ">" : n->p->op == PP_APPEND ? ">>" : "",
		 cmd, strlen(n->p->arg) >= sizeof(cmd) - 1 ? "..." : "", n->p->label);
}

/* Says what failed first and returns the exit status for it. */
static int verdict(struct pipeline *pl)
{
	char what[256];
	int i = first_failure(pl);
	struct node *n;

	if (interrupted(pl)) {
		rdx_error("interrupted");
		return RDX_EXIT_INTR;
	}
	if (i < 0)
		return RDX_EXIT_OK;
	n = &pl->n[i];
	describe(n, what, sizeof(what));
	if (!n->done) {
		int st = n->r ? cp_remote_status(n->r) : -1;

		if (st == 127)
			rdx_error("%s failed: rdpipe was not found there (install it, or name its directory with --remote-path)",
				  what);
		else if (st >= 0)
			rdx_error("%s failed: rdpipe there ended with status %d before reporting", what, st);
		else
			rdx_error("%s failed: the SSH connection ended before it reported", what);
		return RDX_EXIT_REMOTE;
	}
	if (n->res.status > 0) {
		if (n->res.sig)
			rdx_error("%s failed: killed by signal %d%s", what, n->res.sig,
				  n->res.killed ? " (the pipeline was torn down)" : "");
		else
			rdx_error("%s failed: exit status %d", what, n->res.status);
		return n->res.status;
	}
	if (n->res.in_ret) {
		rdx_error("%s failed: its input (%s)", what, rdx_strerror(n->res.in_ret));
		return rdx_exit_code(n->res.in_ret);
	}
	rdx_error("%s failed: its output (%s)", what, rdx_strerror(n->res.out_ret));
	return rdx_exit_code(n->res.out_ret);
}

/* -v: each hop's bytes and rate, as its receiver counted them. */
static void report(const struct pipeline *pl)
{
	for (int i = 0; i + 1 < pl->count; i++) {
		const struct node *u = &pl->n[i], *d = &pl->n[i + 1];
		const struct rdx_xfer_stats *st = &d->res.in;
		char b[32];

		rdx_fmt_bytes(b, sizeof(b), st->bytes);
		rdx_info(1, "hop %d: %s -> %s: %s in %.2f s, %.1f MB/s (%s)", i + 1, u->p->label,
			 d->p->label, b, st->seconds,
			 st->seconds > 0 ? (double)st->bytes / st->seconds / 1e6 : 0.0,
			 st->transport ? st->transport : "none");
	}
}

static void dry_run(struct pipeline *pl)
{
	for (int i = pl->count - 1; i >= 0; i--) {
		struct node *n = &pl->n[i];

		n->data_host = data_host(pl->o, n);
	}
	for (int i = 0; i < pl->count; i++) {
		struct node *n = &pl->n[i];
		char what[256];

		describe(n, what, sizeof(what));
		if (n->p->local) {
			printf("%s: here%s%s\n", what, n->p->in == PP_FD ? ", reading rdpipe's stdin" : "",
			       n->p->out == PP_FD ? ", writing rdpipe's stdout" : "");
		} else {
			struct cp_cmd c = { 0 };

			far_cmd(&c, pl->o, n, i + 1 < pl->count ? &pl->n[i + 1] : NULL, false);
			printf("%s: ssh %s%s%s %s\n", what, n->p->user ? n->p->user : "",
			       n->p->user ? "@" : "", n->p->host, cp_cmd_str(&c) ? cp_cmd_str(&c) : "?");
			cp_cmd_release(&c);
		}
		if (i + 1 < pl->count)
			printf("  hop %d: %s %s, %s %s\n", i + 1, n->p->label,
			       n->p->out == PP_LISTEN ? "listens" : "dials", pl->n[i + 1].p->label,
			       n->p->out == PP_LISTEN ? "dials it" : "listens");
	}
}

static int run_pipeline(struct pipeline *pl)
{
	struct opts *o = pl->o;
	int i, ret = 0;

	/* Every login first: a password typed slowly for one host must not
	 * time out a segment already waiting for its peer. */
	for (i = 0; i < pl->count && !ret; i++) {
		struct node *n = &pl->n[i];
		struct cp_addr a = { .remote = true, .user = n->p->user, .host = n->p->host };

		if (!n->p->local)
			ret = cp_far_login(&n->r, &o->cp, &a);
	}
	for (i = 0; i + 1 < pl->count && !ret; i++) {
		ret = cp_make_key(pl->n[i].key_out);
		memcpy(pl->n[i + 1].key_in, pl->n[i].key_out, sizeof(pl->n[i].key_out));
	}
	for (i = 0; i < pl->count && !ret; i++)
		pl->n[i].data_host = data_host(o, &pl->n[i]);
	for (i = pl->count - 1; i >= 0 && !ret; i--)
		ret = start_node(pl, i);
	if (!ret && !interrupted(pl)) {
		run_all(pl);
	} else {
		for (i = 0; i < pl->count; i++)
			node_stop(&pl->n[i]);
		run_all(pl);
	}
	for (i = 0; i < pl->count; i++) {
		struct node *n = &pl->n[i];
		size_t len;

		if (n->r) {
			cp_remote_stderr(n->r, &len); /* its last line, unended */
			if (n->elen)
				err_line(n, n->eline, n->elen);
		}
	}
	if (ret)
		return interrupted(pl) ? RDX_EXIT_INTR : rdx_exit_code(ret);
	ret = verdict(pl);
	if (!ret)
		report(pl);
	return ret;
}

static void pipeline_release(struct pipeline *pl)
{
	for (int i = 0; i < pl->count; i++) {
		struct node *n = &pl->n[i];

		if (n->started)
			pthread_join(n->t, NULL);
		/* The keys are ours (n->key_*), not the segment's. */
		n->seg.in.key = n->seg.out.key = (struct rdx_key){ 0 };
		pp_seg_release(&n->seg);
		cp_remote_close(n->r);
		OPENSSL_cleanse(n->key_in, sizeof(n->key_in));
		OPENSSL_cleanse(n->key_out, sizeof(n->key_out));
	}
	free(pl->n);
	pp_plan_release(&pl->plan);
}

int main(int argc, char **argv)
{
	struct opts o = { .c = { .cli = &rdpipe_cli } };
	struct pipeline pl = { .o = &o, .bar_node = -1 };
	int first, ret, i;

	rdx_log_init("rdpipe", 0);
	rdx_xfer_opts_init(&o.c.o);
	o.cp.ssh.connect_timeout_s = 10;
	first = rdx_opt_parse(&rdpipe_cli, argc, argv, handle, &o);
	if (first < 0)
		return RDX_EXIT_USAGE;
	if (o.c.done)
		return RDX_EXIT_OK;
	rdx_log_init("rdpipe", o.c.verbose);
	if (o.far) {
		if (argc - first != 1) {
			rdx_error("--far takes one command or file");
			return RDX_EXIT_USAGE;
		}
		return far_main(&o, argv[first]);
	}
	if (argc - first < 1) {
		rdx_error("usage: rdpipe %s (see --help)", rdpipe_cli.usage);
		return RDX_EXIT_USAGE;
	}
	ret = pp_plan_build(&pl.plan, argv + first, argc - first, !isatty(STDIN_FILENO));
	if (ret)
		return rdx_exit_code(ret);
	pl.count = pl.plan.n;
	pl.n = calloc((size_t)pl.count, sizeof(*pl.n));
	if (!pl.n) {
		rdx_error("out of memory");
		pp_plan_release(&pl.plan);
		return RDX_EXIT_FAIL;
	}
	for (i = 0; i < pl.count; i++) {
		pl.n[i].p = &pl.plan.node[i];
		pl.n[i].o = &o;
		pp_seg_init(&pl.n[i].seg);
		if (pl.n[i].p->in == PP_LISTEN || pl.n[i].p->in == PP_DIAL)
			pl.bar_node = i; /* the last hop's receiver */
	}
	if (o.dry_run) {
		dry_run(&pl);
		pipeline_release(&pl);
		return RDX_EXIT_OK;
	}
	if (!isatty(STDERR_FILENO))
		o.c.o.progress = false;
	cli_signals(&o.c.o);
	cli_heap_keep();
	pl.intr = o.c.o.interrupted;
	o.cp.xo = o.c.o;
	o.cp.verbose = o.c.verbose;
	ret = run_pipeline(&pl);
	pipeline_release(&pl);
	return ret;
}
