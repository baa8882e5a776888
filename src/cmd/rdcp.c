/* rdcp: scp-style copies of files to or from a host, the far end started
 * over SSH, the data moved by the rdxfer core (src/cp); between two remote
 * hosts, both ends started over SSH (src/cp/relay.c); both ends local, a
 * local copy (src/cp/local.c). */
#include "cmd/cli.h"
#include "cmd/s3opts.h"

#include "core/err.h"
#include "core/log.h"
#include "core/units.h"
#include "cp/copy.h"
#include "cp/local.h"
#include "cp/relay.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

enum {
	OPT_REMOTE_PATH = 512,
	OPT_RDMA_ADDR,
	OPT_CP_SYNC,
	OPT_CP_DELETE,
	OPT_CP_DRY_RUN,
};

static const struct rdx_opt rdcp_opts[] = {
	{ "recursive", 'r', RDX_ARG_NONE, NULL,
	  "copy directories and everything in them (modes, times, symlinks, hard links, sparse files)",
	  NULL },
	{ "preserve", 'p', RDX_ARG_NONE, NULL,
	  "keep modes, modification and access times of files (they go the way trees do); -r always keeps modes and mtimes",
	  NULL },
	{ "dereference", 'L', RDX_ARG_NONE, NULL,
	  "with -r, follow every symlink instead of copying it", NULL },
	{ "keep-setid", OPT_KEEP_SETID, RDX_ARG_NONE, NULL,
	  "with -r or -p, where the receiving end runs as root: keep files' set-user-ID and set-group-ID bits (dropped otherwise)",
	  NULL },
	{ "sync", OPT_CP_SYNC, RDX_ARG_NONE, NULL,
	  "implies -r; skip files the destination has with the same size and mtime (and resume an interrupted tree)",
	  NULL },
	{ "delete", OPT_CP_DELETE, RDX_ARG_NONE, NULL,
	  "implies --sync; remove what the destination has under the trees and the source does not",
	  NULL },
	{ "dry-run", OPT_CP_DRY_RUN, RDX_ARG_NONE, NULL,
	  "implies --sync; only say what would be copied and deleted", NULL },
	{ "checksum", OPT_TREE_CHECKSUM, RDX_ARG_NONE, NULL,
	  "implies --sync; compare size and content (XXH3-128, both ends read their files) instead of size and mtime",
	  NULL },
	{ "resume", OPT_FILE_RESUME, RDX_ARG_NONE, NULL,
	  "files: keep what a failed copy wrote (.NAME.rdx-part), and copy only the rest when run again with --resume (both ends hash that part)",
	  NULL },
	{ "include", OPT_TREE_INCLUDE, RDX_ARG_REQUIRED, "PATTERN",
	  "with -r, copy names below the SRCs that match (after an --exclude; the last match wins)",
	  NULL },
	{ "exclude", OPT_TREE_EXCLUDE, RDX_ARG_REQUIRED, "PATTERN",
	  "with -r, leave out (and never --delete) names below the SRCs that match (fnmatch; '*' matches '/' too)",
	  NULL },
	{ "verbose", 'v', RDX_ARG_NONE, NULL,
	  "more detail on stderr, the far side's too; a bandwidth line at the end", NULL },
	{ "quiet", 'q', RDX_ARG_NONE, NULL,
	  "no progress bar, and the far side's stderr only when something failed", NULL },
	{ "progress", OPT_PROGRESS, RDX_ARG_NONE, NULL,
	  "progress bar with rate and ETA (when stderr is a terminal)", NULL },
	{ "json", OPT_JSON, RDX_ARG_NONE, NULL,
	  "print the final statistics as one JSON object", NULL },
	CLI_SSH_ROWS,
	{ "remote-path", OPT_REMOTE_PATH, RDX_ARG_REQUIRED, "DIR",
	  "directory of rdsend and rdrecv on the remote host (default: its PATH)", NULL },
	{ "rdma-addr", OPT_RDMA_ADDR, RDX_ARG_REQUIRED, "HOST",
	  "address of the remote host for the data (default: the SSH host); between two remote hosts, the source's as the destination dials it",
	  "host" },
	{ "transport", OPT_TRANSPORT, RDX_ARG_REQUIRED, "MODE",
	  "auto, tcp or rdma (default auto)", "auto tcp rdma" },
	{ "streams", OPT_STREAMS, RDX_ARG_REQUIRED, "N",
	  "parallel connections or RDMA queue pairs, 1..64 (default 1)", NULL },
	CLI_ACK_TIMEOUT_ROW,
	{ "compress", 'C', RDX_ARG_OPTIONAL, "LEVEL",
	  "zstd-compress each slot (level 1..19, default 1)", NULL },
	{ "encrypt", OPT_ENCRYPT, RDX_ARG_NONE, NULL,
	  "encrypt and authenticate the data (AES-256-GCM)", NULL },
	CLI_DIRECT_ROW("how the receiving end writes the files (a same-host copy of a file: the kernel's, through the page cache)"),
	{ "relay", '3', RDX_ARG_NONE, NULL,
	  "between two remote hosts, move the data through this host (as scp -3), for hosts that cannot reach each other; files only",
	  NULL },
	{ "limit-rate", 'l', RDX_ARG_REQUIRED, "KBITS",
	  "send at most KBITS kilobits of data a second, as scp -l (counted before --compress)", NULL },
	{ "timeout", OPT_TIMEOUT, RDX_ARG_REQUIRED, "SECS",
	  "give up after SECS of silence or stall (default 60)", NULL },
	{ "connect-timeout", OPT_CONNECT_TIMEOUT, RDX_ARG_REQUIRED, "SECS",
	  "give up connecting (SSH, then the data) after SECS (default 10)", NULL },
	S3OPT_ENTRIES,
	CLI_COMMON_TAIL,
};

static const struct rdx_cli rdcp_cli = {
	.tool = "rdcp",
	.usage = "[OPTIONS] [-r] SRC... DST",
	.summary = "Copy files (with -r, trees) to or from a remote host: SRC and DST are local paths or\n"
		   "[user@]host:path ([user@][v6addr]:path); with several SRCs, DST is a\n"
		   "directory.  A local '-' is standard input or output.  The far end is started\n"
		   "over SSH; the data goes directly between the two hosts.  SRC and DST both\n"
		   "remote: both ends are started over SSH and the data goes from one host to\n"
		   "the other, not through this one.  Both local: a plain local copy.\n"
		   "SRC or DST s3://BUCKET/KEY: rds3's cp (with --sync and what implies it, sync).",
	.opts = rdcp_opts,
	.args = "scp",
	.exits = "Exit status: 0 ok, 1 failure, 2 usage, 3 SSH or data connection/authentication/timeout,\n"
		 "4 local I/O, 5 remote side failed (or rdsend/rdrecv missing there), 6 integrity,\n"
		 "130 interrupted.",
};

struct rdcp {
	struct cli_state c; /* first: cli_common_opt gets it */
	struct cp_opts cp;
	bool preserve_only; /* -p without -r: files as one-file trees */
	int s3_opt;	    /* the last s3://-only option given, or 0 */
	/* Every option as given, for s3:// copies (s3_options). */
	struct given {
		int key;
		const char *arg;
	} given[CLI_RULES_MAX + 64];
	unsigned ngiven;
};

static int bad(const char *opt, const char *arg, const char *want)
{
	rdx_error("invalid value '%s' for %s: expected %s", arg, opt, want);
	return -1;
}

static int handle(int key, const char *arg, void *ctx)
{
	struct rdcp *r = ctx;
	int ret;

	if (r->ngiven == sizeof(r->given) / sizeof(r->given[0])) {
		rdx_error("too many options");
		return -1;
	}
	r->given[r->ngiven++] = (struct given){ key, arg };
	ret = cli_common_opt(&r->c, key, arg);

	if (ret <= 0)
		return ret;
	switch (key) {
	case 'q':
		r->cp.quiet = true;
		return 0;
	case 'l':
		return cli_limit_rate(&r->c, "-l", arg);
	case '3':
		r->cp.via_here = true;
		return 0;
	case 'r':
		r->cp.recursive = true;
		r->preserve_only = false;
		return 0;
	case 'p':
		r->preserve_only = !r->cp.recursive;
		r->c.o.tree_atime = true; /* and times and modes, as trees do */
		return 0;
	case 'L':
		r->c.o.tree_follow = true;
		return 0;
	case OPT_KEEP_SETID:
		r->c.o.tree_keep_setid = true;
		return 0;
	case OPT_TREE_INCLUDE:
	case OPT_TREE_EXCLUDE:
		return cli_add_rule(&r->c, arg, key == OPT_TREE_INCLUDE);
	case OPT_CP_SYNC:
	case OPT_CP_DELETE:
	case OPT_CP_DRY_RUN:
	case OPT_TREE_CHECKSUM:
		r->c.o.tree_checksum |= key == OPT_TREE_CHECKSUM;
		r->c.o.tree_sync = true;
		r->c.o.tree_delete |= key == OPT_CP_DELETE;
		r->c.o.tree_dry_run |= key == OPT_CP_DRY_RUN;
		r->cp.recursive = true;
		return 0;
	case OPT_FILE_RESUME:
		r->c.o.resume = true;
		return 0;
	case 'P':
	case 'i':
	case 'F':
	case 'o':
	case 'B':
	case 'c':
	case 'J':
		return cp_ssh_cli(&r->cp.ssh, &r->c.o.connect_timeout_ms, "rdcp", key, arg);
	case OPT_REMOTE_PATH:
		if (!*arg)
			return bad("--remote-path", arg, "a directory");
		r->cp.remote_path = arg;
		return 0;
	case OPT_RDMA_ADDR:
		if (!*arg)
			return bad("--rdma-addr", arg, "a host");
		r->cp.rdma_addr = arg;
		return 0;
	case 'C':
		return cli_compress(&r->c, arg);
	case OPT_CONNECT_TIMEOUT:
		return cp_ssh_connect_timeout(&r->cp.ssh, &r->c.o.connect_timeout_ms,
					      "--connect-timeout", arg);
	default:
		if (!s3opts_name(key))
			return -1;
		r->s3_opt = key; /* taken by s3_options, refused without s3:// */
		return 0;
	}
}

static int parse_addr(const char *arg, struct cp_addr *a)
{
	int ret = cp_addr_parse(arg, a);

	if (ret == -EINVAL)
		rdx_error("invalid address '%s': expected a path or [user@]host:path", arg);
	else if (ret)
		rdx_error("out of memory");
	else if (!a->remote && !*a->path)
		rdx_error("invalid address '': expected a path or [user@]host:path");
	else
		return 0;
	return -1;
}

/* The checks on the whole command line before any copy: every address
 * well formed, and with several sources no '-' and a DST that is a
 * directory (a local one checked here, a remote one by the far shell).
 * Returns 0 or -RDX_EUSAGE, the error printed. */
static int check_args(struct rdcp *r, struct cp_addr *srcs, int nsrc,
		      struct cp_addr *dst, char **argv)
{
	struct stat sb;
	int i;

	if (parse_addr(argv[nsrc], dst))
		return -RDX_EUSAGE;
	for (i = 0; i < nsrc; i++)
		if (parse_addr(argv[i], &srcs[i]))
			return -RDX_EUSAGE;
	for (i = 0; i <= nsrc && r->cp.recursive; i++)
		if (!strcmp(i < nsrc ? srcs[i].path : dst->path, "-")) {
			rdx_error("'-' cannot be used with -r: trees go to and from directories");
			return -RDX_EUSAGE;
		}
	for (i = 0; i < nsrc; i++) {
		if (!srcs[i].remote || !cp_is_glob(srcs[i].path))
			continue;
		if (dst->remote) {
			rdx_error("'%s': a remote pattern copies to this host only", argv[i]);
			return -RDX_EUSAGE;
		}
		if (r->c.o.resume || r->c.o.tree_sync) {
			rdx_error("%s is for named sources, not a pattern ('%s')",
				  r->c.o.resume ? "--resume" : "--sync", argv[i]);
			return -RDX_EUSAGE;
		}
		if (stat(dst->path, &sb) || !S_ISDIR(sb.st_mode)) {
			rdx_error("target '%s' is not a directory (a remote pattern needs one)",
				  dst->path);
			return -RDX_EUSAGE;
		}
	}
	if (nsrc == 1)
		return 0;
	for (i = 0; i <= nsrc; i++)
		if (!strcmp(i < nsrc ? srcs[i].path : dst->path, "-")) {
			rdx_error("'-' cannot be one of several sources or their destination");
			return -RDX_EUSAGE;
		}
	if (!dst->remote && (stat(dst->path, &sb) || !S_ISDIR(sb.st_mode))) {
		rdx_error("target '%s' is not a directory (several sources need one)",
			  dst->path);
		return -RDX_EUSAGE;
	}
	r->cp.dst_dir = true;
	return 0;
}

/* Copies each source in turn; a failed one (its error printed, naming
 * it) does not stop the others, an interruption does.  Returns the first
 * failure's error, else 0; *sum adds up what was copied. */
/* With -r, sources all local (DST remote), or all on one remote host and
 * login (DST local), go as one tree: one SSH login, one transfer. */
static bool one_tree(const struct rdcp *r, const struct cp_addr *srcs, int nsrc,
		     const struct cp_addr *dst)
{
	int i;

	if (!r->cp.recursive || nsrc < 2)
		return false;
	for (i = 0; i < nsrc; i++) {
		if (srcs[i].remote && cp_is_glob(srcs[i].path))
			return false;
		if (srcs[i].remote == dst->remote)
			return false;
		if (srcs[i].remote && (strcmp(srcs[i].host, srcs[0].host) ||
				       !srcs[i].user != !srcs[0].user ||
				       (srcs[i].user && strcmp(srcs[i].user, srcs[0].user)) ||
				       !srcs[i].port != !srcs[0].port ||
				       (srcs[i].port && strcmp(srcs[i].port, srcs[0].port))))
			return false;
	}
	return true;
}

static int copy_all(struct rdcp *r, const struct cp_addr *srcs, int nsrc,
		    const struct cp_addr *dst, struct rdx_xfer_stats *sum)
{
	int i, ret, first = 0;

	if (one_tree(r, srcs, nsrc, dst))
		return cp_copy(&r->cp, srcs, nsrc, dst, sum);
	for (i = 0; i < nsrc; i++) {
		struct rdx_xfer_stats st = { 0 };

		if (!srcs[i].remote && !dst->remote && r->cp.recursive)
			ret = cp_local_tree(&r->cp, srcs[i].path, dst->path, &st);
		else if (!srcs[i].remote && !dst->remote)
			ret = cp_local_copy(&r->cp, srcs[i].path, dst->path, &st);
		else if (srcs[i].remote && dst->remote)
			ret = cp_relay(&r->cp, &srcs[i], dst, &st);
		else if (srcs[i].remote && cp_is_glob(srcs[i].path)) {
			/* The far side expands it; without -r, its files come as
			 * -p sends them (a matching directory is refused). */
			struct cp_opts g = r->cp;

			g.glob = true;
			g.files_only |= !g.recursive;
			g.recursive = true;
			ret = cp_copy(&g, &srcs[i], 1, dst, &st);
		} else
			ret = cp_copy(&r->cp, &srcs[i], 1, dst, &st);
		if (!ret) {
			uint64_t bytes = sum->bytes + st.bytes;
			double secs = sum->seconds + st.seconds;

			*sum = st;
			sum->bytes = bytes;
			sum->seconds = secs;
		} else if (!first) {
			first = ret;
		}
		if (ret == -RDX_EINTR || (r->cp.xo.interrupted && atomic_load(r->cp.xo.interrupted)))
			return -RDX_EINTR;
	}
	return first;
}

/* The long name of an option key, for messages. */
static const char *opt_name(int key)
{
	for (const struct rdx_opt *o = rdcp_opts; o->name; o++)
		if (o->key == key)
			return o->name;
	return "?";
}

static bool is_s3(const char *arg)
{
	return !strncmp(arg, "s3://", 5);
}

/* Whether a DST takes several sources: an s3:// prefix ending in '/' (or
 * a bucket), or an existing local directory. */
static bool s3_dst_is_dir(const char *dst)
{
	struct stat sb;

	if (is_s3(dst))
		return dst[strlen(dst) - 1] == '/' || !strchr(dst + 5, '/');
	return !stat(dst, &sb) && S_ISDIR(sb.st_mode);
}


/* rdcp's options for an s3:// copy, into what rds3 fills too: the meaning
 * is the same ("rds3 cp", or "rds3 sync" for --sync and what implies it).
 * The endpoint, credentials and region come from the S3OPT_ENTRIES, the
 * environment and ~/.aws as for rds3.  Options of SSH and of the data path
 * have no meaning here and are refused.  Returns 0 or RDX_EXIT_USAGE. */
static int s3_options(const struct rdcp *r, struct s3_copy_opts *o)
{
	bool sync = r->c.o.tree_sync;

	s3_copy_opts_init(o);
	o->verbose = r->c.verbose;
	o->quiet = r->cp.quiet;
	o->progress = r->c.o.progress;
	o->stall_ms = r->c.o.timeout_ms;
	o->connect_timeout_ms = r->c.o.connect_timeout_ms;
	for (unsigned i = 0; i < r->ngiven; i++) {
		const struct given *g = &r->given[i];

		switch (g->key) {
		case 'v':
		case 'q':
		case OPT_PROGRESS:
		case OPT_JSON:
		case OPT_TIMEOUT:
		case OPT_CONNECT_TIMEOUT:
		case OPT_CP_SYNC:
			break;
		case OPT_DIRECT:
			o->direct = r->c.o.direct;
			break;
		case 'r':
			o->recursive = !sync;
			break;
		case OPT_CP_DELETE:
			o->del = true;
			break;
		case OPT_CP_DRY_RUN:
			o->dry_run = true;
			break;
		case OPT_TREE_CHECKSUM:
			o->checksum = true;
			break;
		case OPT_FILE_RESUME:
			o->resume = true;
			break;
		case OPT_TREE_INCLUDE:
		case OPT_TREE_EXCLUDE:
			if (o->nrules == S3_RULES_MAX) {
				rdx_error("at most %d --include and --exclude patterns", S3_RULES_MAX);
				return RDX_EXIT_USAGE;
			}
			o->rules[o->nrules++] = (struct rdx_rule){ g->arg, g->key == OPT_TREE_INCLUDE };
			break;
		default: {
			int ret = s3opts_handle(o, g->key, g->arg);

			if (ret < 0)
				return RDX_EXIT_USAGE;
			if (!ret)
				break;
			rdx_error("--%s has no meaning for a copy with s3:// (see rds3(1))",
				  opt_name(g->key));
			return RDX_EXIT_USAGE;
		}
		}
	}
	return 0;
}

/* SRC or DST is s3://BUCKET/KEY: the copy is the S3 library's, as rds3
 * makes it (s3/copy.h), once per SRC when there are several (files into
 * a prefix or a directory), on one session. */
static int copy_with_s3(struct rdcp *r, char **args, int n)
{
	bool sync = r->c.o.tree_sync;
	struct s3_copy_opts *o = malloc(sizeof(*o));
	struct s3_session *ss = malloc(sizeof(*ss));
	int ret = 0;

	if (!o || !ss) {
		rdx_error("out of memory");
		ret = RDX_EXIT_FAIL;
		goto out;
	}
	if (n < 2) {
		rdx_error("usage: rdcp %s (see --help)", rdcp_cli.usage);
		ret = RDX_EXIT_USAGE;
		goto out;
	}
	if (n > 2 && (sync || r->cp.recursive)) {
		rdx_error("a copy with s3:// takes one SRC with -r or --sync (rds3 sync copies trees)");
		ret = RDX_EXIT_USAGE;
		goto out;
	}
	if (n > 2 && !s3_dst_is_dir(args[n - 1])) {
		rdx_error("several SRCs: '%s' is not a directory or an s3:// prefix ending in '/'",
			  args[n - 1]);
		ret = RDX_EXIT_USAGE;
		goto out;
	}
	for (int i = 0; i < n; i++) {
		struct cp_addr a = { 0 };
		bool remote;

		if (is_s3(args[i]) || !strcmp(args[i], "-"))
			continue;
		ret = cp_addr_parse(args[i], &a);
		remote = !ret && a.remote;
		cp_addr_release(&a);
		if (ret || remote) {
			if (ret)
				rdx_error("invalid address '%s'", args[i]);
			else
				rdx_error("cannot copy between s3:// and a remote host ('%s'): run rdcp there",
					  args[i]);
			ret = RDX_EXIT_USAGE;
			goto out;
		}
	}
	ret = s3_options(r, o);
	for (int i = 0; !ret && i < n - 1; i++)
		ret = s3_copy_opts_check(o, sync ? "sync" : "cp", args[i], args[n - 1]);
	if (ret)
		goto out;
	if (o->quiet)
		rdx_log_init("rdcp", -1);
	cli_signals(&r->c.o);
	ret = s3_session_open(ss, o, r->c.o.interrupted);
	if (ret)
		goto out;
	ss->cmd = sync ? "sync" : "cp";
	s3_session_progress_begin(ss);
	/* One copy per SRC; the first failure is the exit status, the
	 * others are still copied (as for hosts). */
	for (int i = 0; i < n - 1; i++) {
		int rc = sync ? s3_run_sync(ss, args[i], args[n - 1], false)
			      : s3_run_cp(ss, args[i], args[n - 1]);

		if (rc && !ret)
			ret = rc;
		if (rc == RDX_EXIT_INTR)
			break;
	}
	s3_session_progress_end(ss);
	s3_session_close(ss);
out:
	free(ss);
	free(o);
	return ret;
}

int main(int argc, char **argv)
{
	struct rdcp r = { .c = { .cli = &rdcp_cli } };
	struct cp_addr *srcs = NULL, dst = { 0 };
	struct rdx_xfer_stats st = { 0 };
	int optind_, nsrc, i, ret;

	rdx_log_init("rdcp", 0);
	rdx_xfer_opts_init(&r.c.o);
	r.cp.ssh.connect_timeout_s = 10;
	optind_ = rdx_opt_parse(&rdcp_cli, argc, argv, handle, &r);
	if (optind_ < 0)
		return RDX_EXIT_USAGE;
	if (r.c.done)
		return RDX_EXIT_OK;
	rdx_log_init("rdcp", r.cp.quiet ? 0 : r.c.verbose);
	for (i = optind_; i < argc; i++)
		if (is_s3(argv[i]))
			return copy_with_s3(&r, argv + optind_, argc - optind_);
	if (r.s3_opt) {
		rdx_error("--%s is for copies with s3:// (see S3 in rdcp(1))", s3opts_name(r.s3_opt));
		return RDX_EXIT_USAGE;
	}
	nsrc = argc - optind_ - 1;
	if (nsrc < 1) {
		rdx_error("usage: rdcp %s (see --help)", rdcp_cli.usage);
		return RDX_EXIT_USAGE;
	}
	srcs = calloc((size_t)nsrc, sizeof(*srcs));
	if (!srcs) {
		rdx_error("out of memory");
		return RDX_EXIT_FAIL;
	}
	ret = check_args(&r, srcs, nsrc, &dst, argv + optind_);
	if (ret) {
		ret = rdx_exit_code(ret);
		goto out;
	}
	if (r.preserve_only) {
		/* Files keep their metadata by going as one-file trees; a
		 * directory still needs -r. */
		for (i = 0; i < nsrc; i++) {
			struct stat sb;

			if (!srcs[i].remote && !strcmp(srcs[i].path, "-")) {
				rdx_error("-p cannot keep the metadata of standard input");
				ret = RDX_EXIT_USAGE;
				goto out;
			}
			if (!srcs[i].remote && !stat(srcs[i].path, &sb) && S_ISDIR(sb.st_mode)) {
				rdx_error("'%s' is a directory (use -r)", srcs[i].path);
				ret = RDX_EXIT_USAGE;
				goto out;
			}
		}
		r.cp.recursive = true;
		r.cp.files_only = true;
	}
	if (r.cp.via_here && r.cp.recursive) {
		rdx_error("-3 relays files: trees (-r, -p) go directly between the hosts");
		ret = RDX_EXIT_USAGE;
		goto out;
	}
	if (r.c.o.resume && r.cp.recursive) {
		rdx_error("--resume is for files: %s", r.preserve_only
			  ? "-p sends them as trees" : "trees resume with --sync");
		ret = RDX_EXIT_USAGE;
		goto out;
	}
	if ((r.c.o.tree_follow || r.c.nrules) && !r.cp.recursive) {
		rdx_error("%s is for trees: use it with -r",
			  r.c.o.tree_follow ? "-L" : "--include/--exclude");
		ret = RDX_EXIT_USAGE;
		goto out;
	}
	r.cp.verbose = r.cp.quiet ? 0 : r.c.verbose;
	if (r.cp.quiet)
		r.c.o.progress = false;
	cli_signals(&r.c.o);
	cli_heap_keep();
	r.cp.xo = r.c.o;
	ret = rdx_exit_code(copy_all(&r, srcs, nsrc, &dst, &st));
	if (ret == RDX_EXIT_OK)
		cli_report(&r.c, &st, !dst.remote && !strcmp(dst.path, "-"));
out:
	for (i = 0; i < nsrc; i++)
		cp_addr_release(&srcs[i]);
	free(srcs);
	cp_addr_release(&dst);
	return ret;
}
