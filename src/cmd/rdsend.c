/* rdsend: send a file or stdin to a waiting rdrecv. */
#include "cmd/cli.h"

#include "core/err.h"
#include "core/log.h"
#include "core/units.h"

#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const struct rdx_opt rdsend_opts[] = {
	CLI_COMMON_HEAD,
	{ "streams", OPT_STREAMS, RDX_ARG_REQUIRED, "N",
	  "parallel connections, 1..64 (default 1)", NULL },
	{ "qps", OPT_STREAMS, RDX_ARG_REQUIRED, "N",
	  "the same as --streams, in RDMA terms: queue pairs", NULL },
	/* rdcp's remote globs: -r's PATHs are glob(3) patterns (hidden) */
	{ "glob", OPT_GLOB, RDX_ARG_NONE, NULL, NULL, NULL },
	/* rdcp -p's: access times too (hidden) */
	{ "atime", OPT_ATIME, RDX_ARG_NONE, NULL, NULL, NULL },
	{ "limit-rate", OPT_LIMIT_RATE, RDX_ARG_REQUIRED, "KBITS",
	  "send at most KBITS kilobits of data a second (counted before --compress)", NULL },
	{ "compress", OPT_COMPRESS, RDX_ARG_OPTIONAL, "LEVEL",
	  "zstd-compress each slot (level 1..19, default 1)", NULL },
	{ "encrypt", OPT_ENCRYPT, RDX_ARG_NONE, NULL,
	  "encrypt and authenticate the data (AES-256-GCM)", NULL },
	{ "connect-timeout", OPT_CONNECT_TIMEOUT, RDX_ARG_REQUIRED, "SECS",
	  "keep retrying the connection this long; with --server, wait this long for the receiver (default 10)",
	  NULL },
	{ "resume", OPT_FILE_RESUME, RDX_ARG_NONE, NULL,
	  "continue the receiver's partial copy of FILE (kept from an earlier --resume that failed); both ends hash what it has",
	  NULL },
	{ "recursive", 'r', RDX_ARG_NONE, NULL,
	  "send the FILEs and directories as one tree (rdrecv -r extracts it)", NULL },
	{ "dereference", 'L', RDX_ARG_NONE, NULL,
	  "with -r, follow every symlink instead of sending it", NULL },
	{ "sync", OPT_SYNC, RDX_ARG_NONE, NULL,
	  "with -r, skip files the receiver has with the same size and mtime", NULL },
	{ "delete", OPT_TREE_DELETE, RDX_ARG_NONE, NULL,
	  "with -r, implies --sync: remove what the receiver has under the trees and we do not",
	  NULL },
	{ "dry-run", OPT_TREE_DRY_RUN, RDX_ARG_NONE, NULL,
	  "with -r, implies --sync: only say what would be sent and deleted", NULL },
	{ "checksum", OPT_TREE_CHECKSUM, RDX_ARG_NONE, NULL,
	  "with -r, implies --sync: same size and content (XXH3-128, both ends read their files) instead of size and mtime",
	  NULL },
	{ "include", OPT_TREE_INCLUDE, RDX_ARG_REQUIRED, "PATTERN",
	  "with -r, send names below the PATHs that match (after an --exclude; the last match wins)",
	  NULL },
	{ "exclude", OPT_TREE_EXCLUDE, RDX_ARG_REQUIRED, "PATTERN",
	  "with -r, leave out names below the PATHs that match (fnmatch; '*' matches '/' too)",
	  NULL },
	CLI_SERVER_ROWS,
	CLI_COMMON_TAIL,
};

static const struct rdx_cli rdsend_cli = {
	.tool = "rdsend",
	.usage = "[OPTIONS] HOST PORT [KEY] [FILE]\n"
		 "       rdsend -r [OPTIONS] HOST PORT [KEY] PATH...",
	.summary = "Send FILE (or standard input) to an rdrecv waiting on HOST PORT;\n"
		   "with -r, send files and directories as one tree;\n"
		   "with --server [FILE], listen and let the receiver dial in instead.",
	.opts = rdsend_opts,
};

static bool use_glob; /* --glob */
static glob_t globbed;

/* --glob: the PATHs expanded as a shell would, but by glob(3), with no
 * shell: what rdcp 'host:*.log' asks for, as scp expands it.
 * A pattern nothing matches is an error naming it.  Returns 0 or the
 * exit status (printed). */
static int expand(char **pat, int n)
{
	for (int i = 0; i < n; i++) {
		size_t before = globbed.gl_pathc;
		int ret = glob(pat[i], i ? GLOB_APPEND : 0, NULL, &globbed);

		if (ret == GLOB_NOSPACE) {
			rdx_error("out of memory");
			return RDX_EXIT_FAIL;
		}
		if (ret == GLOB_ABORTED) {
			rdx_error("cannot read a directory for '%s'", pat[i]);
			return RDX_EXIT_IO;
		}
		if (ret == GLOB_NOMATCH || globbed.gl_pathc == before) {
			rdx_error("no file matches '%s'", pat[i]);
			return RDX_EXIT_FAIL;
		}
	}
	return 0;
}

static int handle(int key, const char *arg, void *ctx)
{
	struct cli_state *c = ctx;
	int ret = cli_common_opt(c, key, arg);

	if (ret <= 0)
		return ret;
	switch (key) {
	case OPT_LIMIT_RATE:
		return cli_limit_rate(c, "--limit-rate", arg);
	case OPT_ATIME:
		c->o.tree_atime = true;
		return 0;
	case OPT_GLOB:
		use_glob = true;
		return 0;
	case 'r':
		c->tree = true;
		return 0;
	case 'L':
		c->o.tree_follow = true;
		return 0;
	case OPT_SYNC:
		c->o.tree_sync = true;
		return 0;
	case OPT_TREE_DELETE:
		c->o.tree_sync = c->o.tree_delete = true;
		return 0;
	case OPT_TREE_DRY_RUN:
		c->o.tree_sync = c->o.tree_dry_run = true;
		return 0;
	case OPT_TREE_CHECKSUM:
		c->o.tree_sync = c->o.tree_checksum = true;
		return 0;
	case OPT_FILE_RESUME:
		c->o.resume = true;
		return 0;
	case OPT_TREE_INCLUDE:
	case OPT_TREE_EXCLUDE:
		return cli_add_rule(c, arg, key == OPT_TREE_INCLUDE);
	case OPT_COMPRESS:
		return cli_compress(c, arg);
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
	int optind_, npos, first, ret;
	uint64_t port;
	struct stat sb;

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
		if (npos > 1 && !c.tree) {
			rdx_error("usage: rdsend --server [OPTIONS] [FILE] (see --help)");
			return RDX_EXIT_USAGE;
		}
		first = optind_;
		c.o.path = npos ? argv[optind_] : NULL;
		c.o.wait_ms = c.o.connect_timeout_ms;
		/* rdcp gives a new copy the file's permission bits (as scp
		 * does): "RDX-MODE NNN" on stdout, before the port line. */
		if (c.o.path && !c.tree && !stat(c.o.path, &sb) && S_ISREG(sb.st_mode)) {
			printf("RDX-MODE %03o\n", (unsigned)(sb.st_mode & 0777));
			fflush(stdout);
		}
	} else {
		/* HOST PORT [KEY] [FILE], or with -r HOST PORT [KEY] PATH...;
		 * KEY is left out when it comes from --key-file or RDX_KEY. */
		bool elsewhere = cli_key_elsewhere(&c);

		if (c.tree ? npos < (elsewhere ? 3 : 4)
			   : npos < 2 || npos > 4 || (npos == 2 && !elsewhere)) {
			rdx_error("usage: rdsend %s (see --help)",
				  c.tree ? "-r HOST PORT [KEY] PATH..." : "HOST PORT [KEY] [FILE]");
			return RDX_EXIT_USAGE;
		}
		c.o.host = argv[optind_];
		c.o.port = argv[optind_ + 1];
		if (rdx_parse_uint(c.o.port, 1, 65535, &port)) {
			rdx_error("invalid port '%s'", c.o.port);
			return RDX_EXIT_USAGE;
		}
		if (c.tree ? !elsewhere : npos == 4 || (npos == 3 && !elsewhere))
			key = argv[optind_ + 2];
		first = optind_ + 2 + (key != NULL);
		if (!c.tree && first < argc)
			c.o.path = argv[argc - 1];
	}
	if (c.stop_on_eof && cli_key_from_stdin(&c) && !c.tree &&
	    (!c.o.path || !strcmp(c.o.path, "-"))) {
		rdx_error("--stop-on-eof needs FILE: standard input carries the data");
		return RDX_EXIT_USAGE;
	}
	if (c.tree && c.o.resume) {
		rdx_error("--resume is for a FILE: trees resume with --sync");
		return RDX_EXIT_USAGE;
	}
	if (c.tree) {
		if (first >= argc) {
			rdx_error("-r needs at least one PATH to send");
			return RDX_EXIT_USAGE;
		}
		c.o.tree_paths = (const char *const *)argv + first;
		c.o.ntree = (unsigned)(argc - first);
		c.o.path = NULL;
		if (use_glob) {
			ret = expand(argv + first, argc - first);
			if (ret)
				return ret;
			c.o.tree_paths = (const char *const *)globbed.gl_pathv;
			c.o.ntree = (unsigned)globbed.gl_pathc;
		}
	} else if (use_glob) {
		rdx_error("--glob is for trees: use it with -r");
		return RDX_EXIT_USAGE;
	} else if (c.o.tree_follow || c.o.tree_sync || c.nrules) {
		rdx_error("%s is for trees: use it with -r",
			  c.o.tree_follow ? "-L" : c.o.tree_delete ? "--delete"
					      : c.o.tree_dry_run ? "--dry-run"
					      : c.nrules	 ? "--include/--exclude" : "--sync");
		return RDX_EXIT_USAGE;
	}
	ret = cli_server_setup(&c);
	if (ret)
		return ret;
	if (!c.server) {
		ret = cli_load_key(&c, key);
		if (ret)
			return ret;
	}
	cli_signals(&c.o);
	cli_heap_keep();
	ret = rdx_send(&c.o, &st);
	rdx_key_release(&c.o.key);
	if (ret)
		return rdx_exit_code(ret);
	cli_report(&c, &st, false);
	return RDX_EXIT_OK;
}
