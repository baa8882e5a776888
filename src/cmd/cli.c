#include "cmd/cli.h"

#include "core/err.h"
#include "core/log.h"
#include "core/units.h"
#include "core/xport.h"

#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#ifndef RDX_VERSION
#define RDX_VERSION "0.0.0"
#endif

static atomic_int cli_interrupted;

static void on_signal(int sig)
{
	(void)sig;
	atomic_store(&cli_interrupted, 1);
}

void cli_signals(struct rdx_xfer_opts *o)
{
	struct sigaction sa = { .sa_handler = on_signal };

	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	o->interrupted = &cli_interrupted;
}

/* A tree's receiver allocates every small file's buffer on one thread
 * and frees it on a writer thread.  glibc gave the freed top of that
 * arena back to the kernel whenever it passed 128 KiB (the threshold
 * only grows once a chunk big enough to be mmap()ed is freed, which a
 * tree of small files never has), so the next files faulted the same
 * pages in again: 20000 files of 4-64 KiB took 18000-29000 page faults
 * and 1.3-2.0 s of rdrecv's CPU; with up to 64 MiB kept, 8900 faults
 * and 1.0-1.3 s (its peak RSS went from 34 to 43 MiB).  The queues still
 * bound what is in use.  Setting the trim threshold fixes the mmap
 * threshold too: 8 MiB, above the biggest buffer a tree receiver holds
 * (a 4 MiB file). */
void cli_heap_keep(void)
{
	mallopt(M_MMAP_THRESHOLD, 8 << 20);
	mallopt(M_TRIM_THRESHOLD, 64 << 20);
}

static int bad_value(const char *opt, const char *arg, const char *want)
{
	rdx_error("invalid value '%s' for --%s: expected %s", arg, opt, want);
	return -1;
}

static int parse_count(const char *opt, const char *arg, uint64_t min,
		       uint64_t max, unsigned *out)
{
	uint64_t v;
	char want[64];

	if (rdx_parse_uint(arg, min, max, &v)) {
		snprintf(want, sizeof(want), "a number from %llu to %llu",
			 (unsigned long long)min, (unsigned long long)max);
		return bad_value(opt, arg, want);
	}
	*out = (unsigned)v;
	return 0;
}

static int parse_secs(const char *opt, const char *arg, uint64_t *ms)
{
	if (rdx_parse_seconds(arg, ms))
		return bad_value(opt, arg, "seconds");
	return 0;
}

int cli_compress(struct cli_state *c, const char *arg)
{
	uint64_t v = 1;

	if (arg && rdx_parse_uint(arg, 1, 19, &v)) {
		rdx_error("invalid value '%s' for --compress: expected a level from 1 to 19", arg);
		return -1;
	}
	c->o.compress = (int)v;
	return 0;
}

int cli_limit_rate(struct cli_state *c, const char *opt, const char *arg)
{
	uint64_t v;

	if (rdx_parse_uint(arg, 1, 100000000, &v)) {
		rdx_error("invalid value '%s' for %s: expected kilobits a second, 1 to 100000000",
			  arg, opt);
		return -1;
	}
	c->o.rate_limit_bps = v * 1000;
	return 0;
}

int cli_common_opt(struct cli_state *c, int key, const char *arg)
{
	struct rdx_xfer_opts *o = &c->o;
	uint64_t v;

	switch (key) {
	case 'v':
		c->verbose++;
		return 0;
	case OPT_PROGRESS:
		o->progress = true;
		return 0;
	case OPT_PROGRESS_LINES:
		o->progress_lines = true;
		return 0;
	case OPT_JSON:
		c->json = true;
		return 0;
	case OPT_TRANSPORT:
		if (!strcmp(arg, "auto"))
			o->transport = RDX_TRANSPORT_AUTO;
		else if (!strcmp(arg, "tcp"))
			o->transport = RDX_TRANSPORT_TCP;
		else if (!strcmp(arg, "rdma"))
			o->transport = RDX_TRANSPORT_RDMA;
		else
			return bad_value("transport", arg, "auto, tcp or rdma");
		return 0;
	case OPT_RDMA_DEV:
		if (!*arg || strlen(arg) >= 64 || strchr(arg, '/'))
			return bad_value("rdma-dev", arg, "an RDMA device name (rdx-diag lists them)");
		o->rdma_dev = arg;
		return 0;
	case OPT_RDMA_PORT:
		return parse_count("rdma-port", arg, 1, 255, &o->rdma_port);
	case OPT_GID_INDEX:
		if (rdx_parse_uint(arg, 0, 65535, &v))
			return bad_value("gid-index", arg, "a number from 0 to 65535");
		o->gid_index = (int)v;
		return 0;
	case OPT_ACK_TIMEOUT:
		if (parse_count("ack-timeout", arg, 0, 31, &o->ack_timeout))
			return -1;
		if (!o->ack_timeout)
			o->ack_timeout = RDX_ACK_TIMEOUT_CM;
		return 0;
	case OPT_KEY_FILE:
		c->key_file = arg;
		return 0;
	case OPT_SLOT_SIZE:
		if (rdx_parse_size(arg, &v) || v < (4u << 10) || v > (64u << 20) ||
		    v % 4096)
			return bad_value("slot-size", arg,
					 "a size from 4K to 64M in multiples of 4K");
		o->slot_size = (uint32_t)v;
		return 0;
	case OPT_SLOTS:
		return parse_count("slots", arg, 2, 1024, &o->slots);
	case OPT_STREAMS:
		return parse_count("streams", arg, 1, 64, &o->streams);
	case OPT_IO_THREADS:
		return parse_count("io-threads", arg, 1, 64, &o->io_threads);
	case OPT_ENCRYPT:
		o->encrypt = true;
		return 0;
	case OPT_DIRECT:
		if (rdx_direct_parse(arg, &o->direct))
			return bad_value("direct", arg, "auto, always or never");
		return 0;
	case OPT_TIMEOUT:
		if (parse_secs("timeout", arg, &o->timeout_ms))
			return -1;
		if (o->timeout_ms < 100)
			return bad_value("timeout", arg, "at least 0.1 seconds");
		return 0;
	case OPT_HANDSHAKE_TIMEOUT:
		if (parse_secs("handshake-timeout", arg, &o->handshake_ms))
			return -1;
		if (o->handshake_ms < 100)
			return bad_value("handshake-timeout", arg, "at least 0.1 seconds");
		return 0;
	case OPT_BIND:
		o->bind = arg;
		return 0;
	case OPT_SERVER:
		c->server = true;
		return 0;
	case OPT_STOP_ON_EOF:
		c->stop_on_eof = true;
		return 0;
	case OPT_PORT:
		if (rdx_parse_uint(arg, 0, 65535, &v))
			return bad_value("port", arg, "a port from 0 to 65535");
		c->port = arg;
		return 0;
	case '4':
		o->family = AF_INET;
		return 0;
	case '6':
		o->family = AF_INET6;
		return 0;
	case 'h':
		rdx_opt_help(c->cli, stdout);
		c->done = true;
		return 0;
	case 'V':
		printf("%s (rdxfer) %s\n", c->cli->tool, RDX_VERSION);
		c->done = true;
		return 0;
	case OPT_COMPLETION:
		if (rdx_opt_completion(c->cli, arg, stdout))
			return bad_value("completion", arg, "bash or zsh");
		c->done = true;
		return 0;
	default:
		return 1;
	}
}

bool cli_key_elsewhere(const struct cli_state *c)
{
	return c->key_file || getenv("RDX_KEY");
}

bool cli_key_from_stdin(const struct cli_state *c)
{
	return c->server || (c->key_file && !strcmp(c->key_file, "-"));
}

/* Reads stdin to its end, then asks the transfer to stop: whoever holds
 * the other end (rdcp, over SSH) has gone or given up. */
static void *watch_stdin(void *arg)
{
	char buf[256];
	ssize_t n;

	(void)arg;
	do
		n = read(0, buf, sizeof(buf));
	while (n > 0 || (n < 0 && errno == EINTR));
	atomic_store(&cli_interrupted, 1);
	return NULL;
}

/* The key from the first line of stdin (--server, --key-file -); with
 * --stop-on-eof, the rest of stdin is watched for its end. */
static int key_from_stdin(struct cli_state *c, const char *how)
{
	pthread_t t;
	int ret = rdx_key_read_line(&c->o.key, 0);

	if (ret == -RDX_EUSAGE) {
		rdx_error("%s: no key on the first line of standard input", how);
		return RDX_EXIT_USAGE;
	}
	if (ret) {
		rdx_error("%s: cannot read the key from standard input: %s", how,
			  ret == -E2BIG ? "line too long" : rdx_strerror(ret));
		return RDX_EXIT_IO;
	}
	if (c->stop_on_eof) {
		ret = pthread_create(&t, NULL, watch_stdin, NULL);
		if (ret) {
			rdx_error("cannot start a thread: %s", strerror(ret));
			return RDX_EXIT_FAIL;
		}
		pthread_detach(t);
	}
	return 0;
}

int cli_load_key(struct cli_state *c, char *arg)
{
	int ret;

	if (c->key_file && !strcmp(c->key_file, "-")) {
		if (arg) {
			memset(arg, 'x', strlen(arg));
			rdx_error("key given twice: as an argument and with --key-file");
			return RDX_EXIT_USAGE;
		}
		return key_from_stdin(c, "--key-file -");
	}
	ret = rdx_key_load(&c->o.key, arg, c->key_file);

	if (arg)
		memset(arg, 'x', strlen(arg));
	if (ret == -RDX_EUSAGE) {
		if (arg && c->key_file)
			rdx_error("key given twice: as an argument and with --key-file");
		else if (arg || c->key_file || getenv("RDX_KEY"))
			rdx_error("the key must not be empty");
		else
			rdx_error("no key: give KEY, --key-file FILE or RDX_KEY (see --help)");
		return RDX_EXIT_USAGE;
	}
	if (ret) {
		rdx_error("cannot read key file '%s': %s", c->key_file,
			  rdx_strerror(ret));
		return RDX_EXIT_IO;
	}
	return 0;
}

/* The one line rdcp reads from a server's stdout. */
static void print_port(unsigned port, void *arg)
{
	(void)arg;
	printf("RDX-PORT %u\n", port);
	fflush(stdout);
}

int cli_server_setup(struct cli_state *c)
{
	if (!c->server) {
		if (c->port) {
			rdx_error("--port goes with --server (see --help)");
			return RDX_EXIT_USAGE;
		}
		if (c->stop_on_eof && !cli_key_from_stdin(c)) {
			rdx_error("--stop-on-eof goes with --server or --key-file - (see --help)");
			return RDX_EXIT_USAGE;
		}
		return 0;
	}
	if (c->key_file) {
		rdx_error("--server reads the key from standard input, not --key-file");
		return RDX_EXIT_USAGE;
	}
	c->o.host = NULL;
	c->o.port = c->port ? c->port : "0";
	c->o.on_listen = print_port;
	c->o.on_listen_arg = NULL;
	return key_from_stdin(c, "--server");
}

void cli_report(const struct cli_state *c, const struct rdx_xfer_stats *st,
		bool stdout_is_data)
{
	FILE *f = stdout_is_data ? stderr : stdout;

	if (!c->json)
		return;
	fprintf(f, "{\"tool\":\"%s\",\"bytes\":%llu,\"seconds\":%.6f,"
		   "\"rate_bytes_per_sec\":%.0f,\"transport\":\"%s\",\"streams\":%u,"
		   "\"compress\":%s,\"encrypt\":%s}\n",
		c->cli->tool, (unsigned long long)st->bytes, st->seconds,
		st->seconds > 0 ? (double)st->bytes / st->seconds : 0.0,
		st->transport ? st->transport : "none", st->streams,
		st->compress ? "true" : "false", st->encrypt ? "true" : "false");
	fflush(f);
}

int cli_add_rule(struct cli_state *c, const char *pattern, bool include)
{
	if (c->nrules == CLI_RULES_MAX) {
		rdx_error("too many --include/--exclude patterns (at most %d)", CLI_RULES_MAX);
		return -1;
	}
	c->rules[c->nrules++] = (struct rdx_rule){ pattern, include };
	c->o.tree_rules = c->rules;
	c->o.ntree_rules = c->nrules;
	return 0;
}
