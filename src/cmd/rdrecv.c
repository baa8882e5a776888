/* rdrecv: receive one stream from rdsend into a file or stdout. */
#include "cmd/cli.h"

#include "core/err.h"
#include "core/log.h"
#include "core/units.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct rdx_opt rdrecv_opts[] = {
	CLI_COMMON_HEAD,
	{ "streams", OPT_STREAMS, RDX_ARG_REQUIRED, "N",
	  "accept at most N parallel connections, 1..64 (default 64)", NULL },
	{ "encrypt", OPT_ENCRYPT, RDX_ARG_NONE, NULL,
	  "always encrypt (AES-256-GCM), whatever the sender asked", NULL },
	{ "wait", OPT_WAIT, RDX_ARG_REQUIRED, "SECS",
	  "give up when no authenticated sender came within SECS (default: wait forever)",
	  NULL },
	{ "fsync", OPT_FSYNC, RDX_ARG_NONE, NULL,
	  "fsync the file and its directory before the final rename (with -r, each file before it gets its name)",
	  NULL },
	CLI_DIRECT_ROW("how the file (or a tree's files) is written"),
	{ "connect", OPT_CONNECT, RDX_ARG_REQUIRED, "HOST",
	  "dial an rdsend --server on HOST PORT instead of listening on PORT", "host" },
	{ "recursive", 'r', RDX_ARG_NONE, NULL,
	  "receive a tree (rdsend -r) into the directory FILE (default: .)", NULL },
	{ "sync", OPT_SYNC, RDX_ARG_NONE, NULL,
	  "with -r, let the sender list what is here (names, sizes, mtimes, content hashes keyed with the session's key) to skip what is unchanged",
	  NULL },
	{ "delete", OPT_TREE_DELETE, RDX_ARG_NONE, NULL,
	  "with -r, implies --sync: let the sender remove what is here under its trees and not there",
	  NULL },
	{ "expect", OPT_EXPECT, RDX_ARG_REQUIRED, "NAME",
	  "with -r, take only a tree named NAME, and nothing else (repeatable; '' for one name the sender picks)",
	  NULL },
	{ "files-only", OPT_FILES_ONLY, RDX_ARG_NONE, NULL,
	  "with -r, take only regular files, each at the top (rdcp -p)", NULL },
	{ "keep-setid", OPT_KEEP_SETID, RDX_ARG_NONE, NULL,
	  "with -r as root, keep files' set-user-ID and set-group-ID bits (dropped otherwise)", NULL },
	/* rdcp's: a new file's permission bits, as the source has them
	 * (the umask still applies; hidden) */
	{ "new-mode", OPT_NEW_MODE, RDX_ARG_REQUIRED, "MODE", NULL, NULL },
	CLI_SERVER_ROWS,
	CLI_COMMON_TAIL,
};

static const struct rdx_cli rdrecv_cli = {
	.tool = "rdrecv",
	.usage = "[OPTIONS] PORT [KEY] [FILE]",
	.summary = "Receive one stream from rdsend on PORT into FILE (or standard output);\n"
		   "with -r, a tree into the directory FILE;\n"
		   "with --connect HOST, fetch it from an rdsend --server on HOST PORT.",
	.opts = rdrecv_opts,
};

static int handle(int key, const char *arg, void *ctx)
{
	struct cli_state *c = ctx;
	int ret = cli_common_opt(c, key, arg);

	if (ret <= 0)
		return ret;
	switch (key) {
	case 'r':
		c->tree = c->o.tree = true;
		return 0;
	/* What a sender may do here only when asked for on this side. */
	case OPT_SYNC:
		c->o.tree_allow_list = true;
		return 0;
	case OPT_TREE_DELETE:
		c->o.tree_allow_list = c->o.tree_allow_delete = true;
		return 0;
	case OPT_EXPECT:
		if (c->o.ntree_tops == CLI_EXPECT_MAX) {
			rdx_error("--expect: at most %d names", CLI_EXPECT_MAX);
			return -1;
		}
		if (*arg && (strchr(arg, '/') || !strcmp(arg, ".") || !strcmp(arg, ".."))) {
			rdx_error("invalid value '%s' for --expect: expected a name, not a path", arg);
			return -1;
		}
		c->tops[c->o.ntree_tops++] = *arg ? arg : NULL;
		c->o.tree_tops = c->tops;
		return 0;
	case OPT_FILES_ONLY:
		c->o.tree_files_only = true;
		return 0;
	case OPT_NEW_MODE: {
		char *end;
		unsigned long m = strtoul(arg, &end, 8);

		if (!*arg || *end || m > 0777) {
			rdx_error("invalid value '%s' for --new-mode: expected octal permission bits", arg);
			return -1;
		}
		c->o.new_mode = (unsigned)m | RDX_NEW_MODE_SET;
		return 0;
	}
	case OPT_KEEP_SETID:
		c->o.tree_keep_setid = true;
		return 0;
	case OPT_WAIT:
		if (rdx_parse_seconds(arg, &c->o.wait_ms)) {
			rdx_error("invalid value '%s' for --wait: expected seconds", arg);
			return -1;
		}
		return 0;
	case OPT_FSYNC:
		c->o.fsync = true;
		return 0;
	case OPT_CONNECT:
		if (!*arg) {
			rdx_error("invalid value '' for --connect: expected a host");
			return -1;
		}
		c->o.host = arg;
		return 0;
	default:
		return -1;
	}
}

/* With PORT 0 the kernel picked the port: the user needs to know it. */
static void on_listen(unsigned port, void *arg)
{
	bool picked = arg != NULL;

	if (picked)
		rdx_error("listening on port %u", port);
	else
		rdx_info(2, "listening on port %u", port);
}

int main(int argc, char **argv)
{
	struct cli_state c = { .cli = &rdrecv_cli };
	struct rdx_xfer_stats st = { 0 };
	char *key = NULL;
	int optind_, npos, ret;
	uint64_t port;

	rdx_log_init("rdrecv", 0);
	rdx_xfer_opts_init(&c.o);
	c.o.streams = 64;
	optind_ = rdx_opt_parse(&rdrecv_cli, argc, argv, handle, &c);
	if (optind_ < 0)
		return RDX_EXIT_USAGE;
	if (c.done)
		return RDX_EXIT_OK;
	rdx_log_init("rdrecv", c.verbose);
	npos = argc - optind_;
	if ((c.o.tree_allow_list || c.o.ntree_tops || c.o.tree_files_only ||
	     c.o.tree_keep_setid) && !c.tree) {
		rdx_error("%s is for trees: use it with -r",
			  c.o.tree_allow_delete ? "--delete" : c.o.tree_allow_list ? "--sync"
			  : c.o.ntree_tops ? "--expect" : c.o.tree_files_only ? "--files-only"
			  : "--keep-setid");
		return RDX_EXIT_USAGE;
	}
	if (c.server && c.o.host) {
		rdx_error("--server and --connect exclude each other (see --help)");
		return RDX_EXIT_USAGE;
	}
	if (c.server) {
		/* --server [FILE]: the key comes on stdin. */
		if (npos > 1) {
			rdx_error("usage: rdrecv --server [OPTIONS] [FILE] (see --help)");
			return RDX_EXIT_USAGE;
		}
		c.o.path = npos ? argv[optind_] : NULL;
		ret = cli_server_setup(&c);
		if (ret)
			return ret;
		goto run;
	}
	ret = cli_server_setup(&c);
	if (ret)
		return ret;
	/* PORT [KEY] [FILE]; KEY is left out when it comes from --key-file
	 * or RDX_KEY. */
	if (npos < 1 || npos > 3 || (npos == 1 && !cli_key_elsewhere(&c))) {
		rdx_error("usage: rdrecv %s (see --help)", rdrecv_cli.usage);
		return RDX_EXIT_USAGE;
	}
	c.o.port = argv[optind_];
	if (rdx_parse_uint(c.o.port, c.o.host ? 1 : 0, 65535, &port)) {
		rdx_error("invalid port '%s'", c.o.port);
		return RDX_EXIT_USAGE;
	}
	if (npos == 3 || (npos == 2 && !cli_key_elsewhere(&c)))
		key = argv[optind_ + 1];
	if (npos == 3 || (npos == 2 && cli_key_elsewhere(&c)))
		c.o.path = argv[argc - 1];
	if (c.tree && c.o.path && !strcmp(c.o.path, "-")) {
		rdx_error("-r extracts into a directory, not standard output");
		return RDX_EXIT_USAGE;
	}
	ret = cli_load_key(&c, key);
	if (ret)
		return ret;
	c.o.on_listen = on_listen;
	c.o.on_listen_arg = port == 0 ? &c : NULL;
	/* Dialing, --wait bounds the retries as --connect-timeout does
	 * rdsend's. */
	if (c.o.host && c.o.wait_ms)
		c.o.connect_timeout_ms = c.o.wait_ms;
run:
	cli_signals(&c.o);
	cli_heap_keep();
	ret = rdx_recv(&c.o, &st);
	rdx_key_release(&c.o.key);
	if (ret)
		return rdx_exit_code(ret);
	cli_report(&c, &st, !c.tree && (!c.o.path || !strcmp(c.o.path, "-")));
	return RDX_EXIT_OK;
}
