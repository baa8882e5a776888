/* rdsend: send a file or stdin to a waiting rdrecv. */
#include "cli.h"

#include "../core/err.h"
#include "../core/log.h"
#include "../core/units.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct rdx_opt rdsend_opts[] = {
	CLI_COMMON_HEAD,
	{ "streams", OPT_STREAMS, RDX_ARG_REQUIRED, "N",
	  "parallel connections, 1..64 (default 1)", NULL },
	{ "qps", OPT_STREAMS, RDX_ARG_REQUIRED, "N",
	  "the same as --streams, in RDMA terms: queue pairs", NULL },
	{ "compress", OPT_COMPRESS, RDX_ARG_OPTIONAL, "LEVEL",
	  "zstd-compress each slot (level 1..19, default 1)", NULL },
	{ "encrypt", OPT_ENCRYPT, RDX_ARG_NONE, NULL,
	  "encrypt and authenticate the data (AES-256-GCM)", NULL },
	{ "connect-timeout", OPT_CONNECT_TIMEOUT, RDX_ARG_REQUIRED, "SECS",
	  "keep retrying the connection this long; with --server, wait this long for the receiver (default 10)",
	  NULL },
	CLI_SERVER_ROWS,
	CLI_COMMON_TAIL,
};

static const struct rdx_cli rdsend_cli = {
	.tool = "rdsend",
	.usage = "[OPTIONS] HOST PORT [KEY] [FILE]",
	.summary = "Send FILE (or standard input) to an rdrecv waiting on HOST PORT;\n"
		   "with --server [FILE], listen and let the receiver dial in instead.",
	.opts = rdsend_opts,
};

static int handle(int key, const char *arg, void *ctx)
{
	struct cli_state *c = ctx;
	uint64_t v;
	int ret = cli_common_opt(c, key, arg);

	if (ret <= 0)
		return ret;
	switch (key) {
	case OPT_COMPRESS:
		c->o.compress = 1;
		if (arg) {
			if (rdx_parse_uint(arg, 1, 19, &v)) {
				rdx_error("invalid value '%s' for --compress: expected a level from 1 to 19", arg);
				return -1;
			}
			c->o.compress = (int)v;
		}
		return 0;
	case OPT_CONNECT_TIMEOUT:
		if (rdx_parse_seconds(arg, &c->o.connect_timeout_ms)) {
			rdx_error("invalid value '%s' for --connect-timeout: expected seconds", arg);
			return -1;
		}
		return 0;
	default:
		return -1;
	}
}

int main(int argc, char **argv)
{
	struct cli_state c = { .cli = &rdsend_cli };
	struct rdx_xfer_stats st = { 0 };
	char *key = NULL;
	int optind_, npos, ret;
	uint64_t port;

	rdx_log_init("rdsend", 0);
	rdx_xfer_opts_init(&c.o);
	optind_ = rdx_opt_parse(&rdsend_cli, argc, argv, handle, &c);
	if (optind_ < 0)
		return RDX_EXIT_USAGE;
	if (c.done)
		return RDX_EXIT_OK;
	rdx_log_init("rdsend", c.verbose);
	npos = argc - optind_;
	if (c.server) {
		/* --server [FILE]: the receiver dials us; the key comes on
		 * stdin, and the data after it when there is no FILE. */
		if (npos > 1) {
			rdx_error("usage: rdsend --server [OPTIONS] [FILE] (see --help)");
			return RDX_EXIT_USAGE;
		}
		c.o.path = npos ? argv[optind_] : NULL;
		c.o.wait_ms = c.o.connect_timeout_ms;
		if (c.stop_on_eof && (!c.o.path || !strcmp(c.o.path, "-"))) {
			rdx_error("--stop-on-eof needs FILE: standard input carries the data");
			return RDX_EXIT_USAGE;
		}
		ret = cli_server_setup(&c);
		if (ret)
			return ret;
		goto run;
	}
	ret = cli_server_setup(&c);
	if (ret)
		return ret;
	/* HOST PORT [KEY] [FILE]; KEY is left out when it comes from
	 * --key-file or RDX_KEY. */
	if (npos < 2 || npos > 4 || (npos == 2 && !cli_key_elsewhere(&c))) {
		rdx_error("usage: rdsend %s (see --help)", rdsend_cli.usage);
		return RDX_EXIT_USAGE;
	}
	c.o.host = argv[optind_];
	c.o.port = argv[optind_ + 1];
	if (rdx_parse_uint(c.o.port, 1, 65535, &port)) {
		rdx_error("invalid port '%s'", c.o.port);
		return RDX_EXIT_USAGE;
	}
	if (npos == 4 || (npos == 3 && !cli_key_elsewhere(&c)))
		key = argv[optind_ + 2];
	if (npos == 4 || (npos == 3 && cli_key_elsewhere(&c)))
		c.o.path = argv[argc - 1];
	ret = cli_load_key(&c, key);
	if (ret)
		return ret;
run:
	cli_signals(&c.o);
	ret = rdx_send(&c.o, &st);
	rdx_key_release(&c.o.key);
	if (ret)
		return rdx_exit_code(ret);
	cli_report(&c, &st, false);
	return RDX_EXIT_OK;
}
