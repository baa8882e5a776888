/* rds3's commands (rds3_run), also what rdcp runs for s3:// addresses.
 * One command per run:
 *
 *   rds3 put FILE|- s3://BUCKET/KEY     rds3 get s3://BUCKET/KEY [FILE|-]
 *   rds3 cat s3://BUCKET/KEY            rds3 ls [s3://BUCKET[/PREFIX]]
 *   rds3 rm s3://BUCKET/KEY...          rds3 stat|head s3://BUCKET/KEY
 *   rds3 mb s3://BUCKET                 rds3 rb s3://BUCKET
 *   rds3 cp SRC DST (either may be s3://) rds3 presign s3://BUCKET/KEY
 *
 * Data goes to stdout only for cat and get -, listings and stat for the
 * rest; everything human goes to stderr.  Files are written under a
 * temporary name next to the target and renamed when complete. */
#include "cmd/s3cmd.h"

#include "cmd/cli.h"

#include "core/err.h"
#include "core/log.h"
#include "core/progress.h"
#include "core/units.h"
#include "s3/config.h"
#include "s3/local.h"
#include "s3/multipart.h"
#include "s3/pool.h"
#include "s3/s3.h"
#include "s3/serve/serve.h"
#include "s3/sigv4.h"
#include "s3/sync.h"

#include <errno.h>
#include <inttypes.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define PUT_MAX ((uint64_t)5 << 30) /* S3's limit for one PutObject */
#define KEY_MAX 1024
#define RULES_MAX 256

enum s3_key {
	OPT_RECURSIVE = 'r',
	OPT_PROFILE = 300,
	OPT_ENDPOINT,
	OPT_REGION,
	OPT_NO_SIGN,
	OPT_PATH_STYLE,
	OPT_VIRTUAL_HOST,
	OPT_RETRIES,
	OPT_INSECURE,
	OPT_S3_CONNECT_TIMEOUT,
	OPT_PART_SIZE,
	OPT_CONCURRENCY,
	OPT_EXPIRES,
	OPT_RESUME,
	OPT_DELETE,
	OPT_DRY_RUN,
	OPT_CHECKSUM,
	OPT_INCLUDE,
	OPT_EXCLUDE,
	OPT_JOBS,
	OPT_LISTEN,
	OPT_SERVE_PORT,
	OPT_MAX_CONNS,
	OPT_EXPIRE_UPLOADS,
	OPT_MAX_PER_ADDR,
	OPT_HEADER_TIMEOUT,
};

static const struct rdx_opt s3_opts[] = {
	{ "verbose", 'v', RDX_ARG_NONE, NULL,
	  "more detail on stderr (-vv: each request, -vvv: libcurl's trace)", NULL },
	{ "quiet", 'q', RDX_ARG_NONE, NULL,
	  "no warnings, only errors (and no progress line)", NULL },
	{ "progress", OPT_PROGRESS, RDX_ARG_NONE, NULL,
	  "put, get, cp, sync: a progress line on stderr (bytes, rate; percent and ETA for put) when it is a terminal",
	  NULL },
	{ "json", OPT_JSON, RDX_ARG_NONE, NULL,
	  "ls and stat print JSON, one object per line", NULL },
	{ "recursive", 'r', RDX_ARG_NONE, NULL,
	  "ls: every key under the prefix; rm: delete every key under it (1000 per request); cp: a directory or prefix", NULL },
	{ "delete", OPT_DELETE, RDX_ARG_NONE, NULL,
	  "sync: remove what the destination has and the source does not", NULL },
	{ "dry-run", OPT_DRY_RUN, RDX_ARG_NONE, NULL,
	  "sync, cp -r: print '(dryrun) ACTION: ...' lines on stdout and change nothing", NULL },
	{ "checksum", OPT_CHECKSUM, RDX_ARG_NONE, NULL,
	  "sync: compare contents (MD5 against the ETag), not sizes and times", NULL },
	{ "include", OPT_INCLUDE, RDX_ARG_REQUIRED, "PATTERN",
	  "sync, cp -r: take names matching PATTERN again (repeatable; the last match wins)", NULL },
	{ "exclude", OPT_EXCLUDE, RDX_ARG_REQUIRED, "PATTERN",
	  "sync, cp -r: leave out names matching PATTERN (repeatable; the last match wins)", NULL },
	{ "jobs", OPT_JOBS, RDX_ARG_REQUIRED, "N",
	  "sync, cp -r: objects in flight at once, 1..64 (default 8)", NULL },
	{ "resume", OPT_RESUME, RDX_ARG_NONE, NULL,
	  "get: continue an interrupted download from its partial .NAME.rdx-part", NULL },
	{ "expires", OPT_EXPIRES, RDX_ARG_REQUIRED, "SECS",
	  "presign: the URL's lifetime, 1..604800 (default 3600)", NULL },
	{ "listen", OPT_LISTEN, RDX_ARG_REQUIRED, "ADDR",
	  "serve: the numeric address to listen on (default 127.0.0.1; :: for every one)", NULL },
	{ "port", OPT_SERVE_PORT, RDX_ARG_REQUIRED, "N",
	  "serve: the port (default 0: any free one; the URL goes to stdout)", NULL },
	{ "max-connections", OPT_MAX_CONNS, RDX_ARG_REQUIRED, "N",
	  "serve: connections served at once, 1..1024 (default 64)", NULL },
	{ "max-per-address", OPT_MAX_PER_ADDR, RDX_ARG_REQUIRED, "N",
	  "serve: connections one client address may hold (default: three quarters of --max-connections); more get 503",
	  NULL },
	{ "header-timeout", OPT_HEADER_TIMEOUT, RDX_ARG_REQUIRED, "SECS",
	  "serve: a request's header must be in whole SECS after its first byte (default 10)", NULL },
	{ "expire-uploads", OPT_EXPIRE_UPLOADS, RDX_ARG_REQUIRED, "DAYS",
	  "serve: remove incomplete multipart uploads begun DAYS ago, at the start and hourly (default 7; 0: never)",
	  NULL },
	{ "profile", OPT_PROFILE, RDX_ARG_REQUIRED, "NAME",
	  "use this profile of ~/.aws/credentials and ~/.aws/config", NULL },
	{ "endpoint", OPT_ENDPOINT, RDX_ARG_REQUIRED, "URL",
	  "S3 endpoint, http[s]://host[:port] (default: AWS)", NULL },
	{ "region", OPT_REGION, RDX_ARG_REQUIRED, "REGION",
	  "region to sign for (default: from the environment or profile)", NULL },
	{ "no-sign-request", OPT_NO_SIGN, RDX_ARG_NONE, NULL,
	  "send requests unsigned (public buckets)", NULL },
	{ "path-style", OPT_PATH_STYLE, RDX_ARG_NONE, NULL,
	  "address buckets as http://host/bucket/key", NULL },
	{ "virtual-host", OPT_VIRTUAL_HOST, RDX_ARG_NONE, NULL,
	  "address buckets as http://bucket.host/key", NULL },
	{ "retries", OPT_RETRIES, RDX_ARG_REQUIRED, "N",
	  "retries of a failed request, 0..20 (default 4)", NULL },
	{ "part-size", OPT_PART_SIZE, RDX_ARG_REQUIRED, "SIZE",
	  "multipart part and download range size, 5M..5G (default 8M; grown to fit 10000 parts)", NULL },
	{ "concurrency", OPT_CONCURRENCY, RDX_ARG_REQUIRED, "N",
	  "parts or ranges in flight at once, 1..64 (default 4)", NULL },
	{ "insecure", OPT_INSECURE, RDX_ARG_NONE, NULL,
	  "do not verify the server's TLS certificate", NULL },
	{ "connect-timeout", OPT_S3_CONNECT_TIMEOUT, RDX_ARG_REQUIRED, "SECS",
	  "give up connecting after SECS (default 10)", NULL },
	{ "timeout", OPT_TIMEOUT, RDX_ARG_REQUIRED, "SECS",
	  "give up on a request stalled for SECS (default 60)", NULL },
	CLI_COMMON_TAIL,
};

static const struct rdx_cli s3_cli = {
	.tool = "rds3",
	.usage = "[OPTIONS] COMMAND ARGS...",
	.summary =
		"Put, get and list objects on S3 endpoints.  Commands:\n"
		"  put FILE|- s3://BUCKET/KEY     upload (KEY ending in / gets FILE's name)\n"
		"  get s3://BUCKET/KEY [FILE|-]   download (default: the key's last part)\n"
		"  cat s3://BUCKET/KEY            write an object to stdout\n"
		"  ls [s3://BUCKET[/PREFIX]]      list buckets, or keys and prefixes\n"
		"  rm s3://BUCKET/KEY...          delete objects (-r: every key under a prefix)\n"
		"  cp SRC DST                     copy one object: FILE to s3://, s3:// to FILE,\n"
		"                                 s3:// to s3:// (server side, in parts above\n"
		"                                 --part-size);\n"
		"                                 -r: a directory or prefix, every object\n"
		"  sync SRC DST                   make DST a copy of SRC (DIR or s3://BUCKET/PREFIX),\n"
		"                                 sending only what differs\n"
		"  presign s3://BUCKET/KEY        print a presigned GET URL (--expires)\n"
		"  stat|head s3://BUCKET/KEY      show an object's size, ETag and date\n"
		"  mb s3://BUCKET, rb s3://BUCKET make, remove a bucket\n"
		"  serve DIR                      serve DIR as an S3 endpoint (buckets are its\n"
		"                                 directories) to clients signing with this\n"
		"                                 profile's keys, until SIGINT/SIGTERM",
	.opts = s3_opts,
	.exits = "Exit status: 0 ok, 1 failure, 2 usage, 3 connection, timeout or access denied\n"
		 "(credentials, signature), 4 local I/O, 5 error reported by S3 (no such\n"
		 "bucket or key, ...), 6 integrity (short body), 130 interrupted.",
};

struct s3_cmd {
	struct cli_state c;
	struct s3_config_opts co;
	struct s3_config cfg;
	struct s3_client *s3;
	struct s3_client_opts client;
	struct s3_xfer_opts xfer;
	unsigned retries;
	uint64_t connect_timeout_ms;
	bool recursive;
	bool insecure;
	bool resume;
	unsigned expires;
	const char *cmd;
	struct s3_sync_opts sync;
	struct rdx_rule rules[RULES_MAX];
	size_t nrules;
	bool sync_opt; /* a sync-only option was given */
	bool quiet;
	const char *listen;
	unsigned port, max_conns;
	unsigned expire_days; /* serve --expire-uploads */
	unsigned max_per_addr, header_secs; /* serve: 0 for the defaults */
	bool expire_set;
	bool serve_opt; /* a serve-only option was given */
};

/* --progress: bytes of finished requests' bodies (s3_client_opts.moved),
 * and the total when a command knows it (put of a file). */
static _Atomic uint64_t moved, progress_total;

static atomic_int interrupted;

static void on_signal(int sig)
{
	(void)sig;
	atomic_store(&interrupted, 1);
}

static int handle(int key, const char *arg, void *ctx)
{
	struct s3_cmd *s = ctx;
	uint64_t v;

	switch (key) {
	case OPT_RECURSIVE:
		s->recursive = true;
		return 0;
	case 'q':
		s->quiet = true;
		return 0;
	case OPT_RESUME:
		s->resume = true;
		return 0;
	case OPT_DELETE:
	case OPT_CHECKSUM:
		s->sync_opt = true;
		*(key == OPT_DELETE ? &s->sync.del : &s->sync.checksum) = true;
		return 0;
	case OPT_DRY_RUN:
		s->sync.dry_run = true;
		return 0;
	case OPT_INCLUDE:
	case OPT_EXCLUDE:
		if (s->nrules == RULES_MAX) {
			rdx_error("at most %d --include and --exclude patterns", RULES_MAX);
			return -1;
		}
		s->rules[s->nrules++] = (struct rdx_rule){ arg, key == OPT_INCLUDE };
		return 0;
	case OPT_JOBS:
		if (rdx_parse_uint(arg, 1, S3_JOBS_MAX, &v)) {
			rdx_error("invalid value '%s' for --jobs: expected a number from 1 to %u",
				  arg, S3_JOBS_MAX);
			return -1;
		}
		s->sync.jobs = (unsigned)v;
		return 0;
	case OPT_EXPIRES:
		if (rdx_parse_uint(arg, 1, 604800, &v)) {
			rdx_error("invalid value '%s' for --expires: expected seconds from 1 to 604800", arg);
			return -1;
		}
		s->expires = (unsigned)v;
		return 0;
	case OPT_LISTEN:
		s->listen = arg;
		s->serve_opt = true;
		return 0;
	case OPT_SERVE_PORT:
		if (rdx_parse_uint(arg, 0, 65535, &v)) {
			rdx_error("invalid value '%s' for --port: expected a number from 0 to 65535", arg);
			return -1;
		}
		s->port = (unsigned)v;
		s->serve_opt = true;
		return 0;
	case OPT_MAX_PER_ADDR:
		if (rdx_parse_uint(arg, 1, 1024, &v)) {
			rdx_error("invalid value '%s' for --max-per-address: expected a number from 1 to 1024", arg);
			return -1;
		}
		s->max_per_addr = (unsigned)v;
		s->serve_opt = true;
		return 0;
	case OPT_HEADER_TIMEOUT:
		if (rdx_parse_uint(arg, 1, 3600, &v)) {
			rdx_error("invalid value '%s' for --header-timeout: expected seconds from 1 to 3600", arg);
			return -1;
		}
		s->header_secs = (unsigned)v;
		s->serve_opt = true;
		return 0;
	case OPT_EXPIRE_UPLOADS:
		if (rdx_parse_uint(arg, 0, 36500, &v)) {
			rdx_error("invalid value '%s' for --expire-uploads: expected days from 0 to 36500", arg);
			return -1;
		}
		s->expire_days = (unsigned)v;
		s->expire_set = true;
		s->serve_opt = true;
		return 0;
	case OPT_MAX_CONNS:
		if (rdx_parse_uint(arg, 1, 1024, &v)) {
			rdx_error("invalid value '%s' for --max-connections: expected a number from 1 to 1024", arg);
			return -1;
		}
		s->max_conns = (unsigned)v;
		s->serve_opt = true;
		return 0;
	case OPT_PROFILE:
		s->co.profile = arg;
		return 0;
	case OPT_ENDPOINT:
		s->co.endpoint = arg;
		return 0;
	case OPT_REGION:
		s->co.region = arg;
		return 0;
	case OPT_NO_SIGN:
		s->co.no_sign = true;
		return 0;
	case OPT_PATH_STYLE:
		s->co.addressing = S3_ADDR_PATH;
		return 0;
	case OPT_VIRTUAL_HOST:
		s->co.addressing = S3_ADDR_VIRTUAL;
		return 0;
	case OPT_INSECURE:
		s->insecure = true;
		return 0;
	case OPT_RETRIES:
		if (rdx_parse_uint(arg, 0, 20, &v)) {
			rdx_error("invalid value '%s' for --retries: expected a number from 0 to 20", arg);
			return -1;
		}
		s->retries = (unsigned)v;
		return 0;
	case OPT_PART_SIZE:
		if (rdx_parse_size(arg, &v) || v < S3_PART_MIN || v > S3_PART_MAX) {
			rdx_error("invalid value '%s' for --part-size: expected a size from 5M to 5G", arg);
			return -1;
		}
		s->xfer.part_size = v;
		return 0;
	case OPT_CONCURRENCY:
		if (rdx_parse_uint(arg, 1, S3_CONCURRENCY_MAX, &v)) {
			rdx_error("invalid value '%s' for --concurrency: expected a number from 1 to %u",
				  arg, S3_CONCURRENCY_MAX);
			return -1;
		}
		s->xfer.concurrency = (unsigned)v;
		return 0;
	case OPT_S3_CONNECT_TIMEOUT:
		if (rdx_parse_seconds(arg, &v) || v < 100) {
			rdx_error("invalid value '%s' for --connect-timeout: expected at least 0.1 seconds", arg);
			return -1;
		}
		s->connect_timeout_ms = v;
		return 0;
	default:
		return cli_common_opt(&s->c, key, arg) ? -1 : 0;
	}
}

/* ------------------------------------------------------------- s3 URLs */

struct s3_url {
	char bucket[256];
	char key[KEY_MAX + 1];
};

/* Parses "s3://BUCKET[/KEY]".  Bucket names are what S3 and the common
 * servers accept (letters, digits, '.', '-', '_'), so they are safe in a
 * Host header as in a path; keys are any bytes up to 1024. */
static int parse_url(const char *arg, struct s3_url *u)
{
	const char *b, *slash;
	size_t bl;

	memset(u, 0, sizeof(*u));
	if (strncmp(arg, "s3://", 5)) {
		rdx_error("'%s' is not an S3 URL (s3://BUCKET/KEY)", arg);
		return -1;
	}
	b = arg + 5;
	slash = strchr(b, '/');
	bl = slash ? (size_t)(slash - b) : strlen(b);
	if (!bl || bl >= sizeof(u->bucket) || strspn(b, "abcdefghijklmnopqrstuvwxyz"
						     "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_") < bl) {
		rdx_error("'%s': invalid bucket name", arg);
		return -1;
	}
	memcpy(u->bucket, b, bl);
	if (slash) {
		if (strlen(slash + 1) > KEY_MAX) {
			rdx_error("'%s': keys are at most %d bytes", arg, KEY_MAX);
			return -1;
		}
		strcpy(u->key, slash + 1);
	}
	return 0;
}

static int need_key(const char *arg, const struct s3_url *u)
{
	size_t n = strlen(u->key);

	if (!n || u->key[n - 1] == '/') {
		rdx_error("'%s' names no object (s3://BUCKET/KEY)", arg);
		return -1;
	}
	return 0;
}

/* "rds3: put s3://b/k: AccessDenied: Access Denied", and the exit status. */
static int s3_fail(struct s3_cmd *s, const char *what, int ret)
{
	const struct s3_error *e = s3_last_error(s->s3);
	char msg[sizeof(e->message)];
	size_t n;

	/* S3's messages are sentences; ours end without a full stop. */
	snprintf(msg, sizeof(msg), "%s", e->message);
	n = strlen(msg);
	while (n && (msg[n - 1] == '.' || msg[n - 1] == ' ' || msg[n - 1] == '\n'))
		msg[--n] = '\0';
	if (ret == -RDX_EINTR || atomic_load(&interrupted)) {
		rdx_error("%s %s: interrupted", s->cmd, what);
		return RDX_EXIT_INTR;
	}
	if (e->code[0])
		rdx_error("%s %s: %s: %s", s->cmd, what, e->code,
			  msg[0] ? msg : "(no message)");
	else if (msg[0])
		rdx_error("%s %s: %s: %s", s->cmd, what, rdx_strerror(ret), msg);
	else
		rdx_error("%s %s: %s", s->cmd, what, rdx_strerror(ret));
	return rdx_exit_code(ret);
}

/* ------------------------------------------------------ local data */

/* A failed upload: the source's fault (exit 4) or S3's. */
static int put_fail(struct s3_cmd *s, const char *src, const char *what, int ret)
{
	if (ret == -EFBIG) {
		rdx_error("cannot upload '%s': more than %u parts of %llu bytes (use a larger --part-size)",
			  src, S3_PARTS_MAX, (unsigned long long)s->xfer.part_size);
		return RDX_EXIT_IO;
	}
	if (ret == -ENODATA) {
		rdx_error("cannot read '%s': the file shrank during the upload", src);
		return RDX_EXIT_IO;
	}
	if (ret < 0 && -ret < RDX_EBASE && ret != -ENOMEM && ret != -EAGAIN) {
		rdx_error("cannot read '%s': %s", src, strerror(-ret));
		return RDX_EXIT_IO;
	}
	return s3_fail(s, what, ret);
}

/* One PutObject of a whole file, hashed first. */
static int put_single(struct s3_cmd *s, const struct s3_url *u,
		      int fd, struct s3_object_info *info)
{
	struct s3_body_sum sum;
	uint64_t size = 0;
	int ret;

	ret = s3_local_hash(fd, PUT_MAX, &interrupted, &size, &sum);
	if (ret == -RDX_EINTR)
		return ret;
	if (ret) /* -EFBIG: the file grew past one part since fstat */
		return ret == -EFBIG ? -ENODATA : ret;
	return s3_put_object(s->s3, u->bucket, u->key, fd, 0, size, &sum, info);
}

static int cmd_put(struct s3_cmd *s, char **args, int n)
{
	struct s3_url u;
	struct s3_object_info info = { 0 };
	const char *src = args[0];
	char what[KEY_MAX + 300];
	uint64_t ps;
	struct stat st;
	int fd, ret;

	if (n != 2) {
		rdx_error("usage: rds3 put FILE|- s3://BUCKET/KEY");
		return RDX_EXIT_USAGE;
	}
	if (parse_url(args[1], &u))
		return RDX_EXIT_USAGE;
	if (!u.key[0] || u.key[strlen(u.key) - 1] == '/') {
		if (!strcmp(src, "-") || strlen(u.key) + strlen(s3_last_part(src)) > KEY_MAX ||
		    !*s3_last_part(src)) {
			rdx_error("'%s' names no object (s3://BUCKET/KEY)", args[1]);
			return RDX_EXIT_USAGE;
		}
		strcat(u.key, s3_last_part(src));
	}
	snprintf(what, sizeof(what), "s3://%s/%s", u.bucket, u.key);
	if (!strcmp(src, "-")) {
		fd = STDIN_FILENO;
	} else {
		fd = open(src, O_RDONLY | O_CLOEXEC);
		if (fd < 0) {
			rdx_error("cannot open '%s': %s", src, strerror(errno));
			return RDX_EXIT_IO;
		}
	}
	if (fstat(fd, &st)) {
		rdx_error("cannot read '%s': %s", src, strerror(errno));
		ret = RDX_EXIT_IO;
		goto out;
	}
	if (S_ISDIR(st.st_mode)) {
		rdx_error("cannot upload '%s': Is a directory", src);
		ret = RDX_EXIT_IO;
		goto out;
	}
	if (S_ISREG(st.st_mode))
		atomic_store(&progress_total, (uint64_t)st.st_size);
	if (!S_ISREG(st.st_mode)) {
		/* A pipe, FIFO or device: read in parts, memory bounded. */
		ret = s3_upload_stream(s->s3, &s->xfer, u.bucket, u.key, fd, &info);
	} else if ((ret = s3_part_size_for((uint64_t)st.st_size, s->xfer.part_size, &ps))) {
		rdx_error("cannot upload '%s': larger than S3's 5 TiB", src);
		ret = RDX_EXIT_IO;
		goto out;
	} else if ((uint64_t)st.st_size <= ps) {
		ret = put_single(s, &u, fd, &info);
	} else {
		struct s3_xfer_opts xo = s->xfer;

		if (ps != xo.part_size)
			rdx_info(1, "put %s: part size %llu bytes, not %llu: S3 takes at most %u parts",
				 src, (unsigned long long)ps,
				 (unsigned long long)xo.part_size, S3_PARTS_MAX);
		xo.part_size = ps;
		ret = s3_upload_file(s->s3, &xo, u.bucket, u.key, fd, (uint64_t)st.st_size,
				     &info);
	}
	if (ret) {
		ret = put_fail(s, src, what, ret);
		goto out;
	}
	rdx_info(1, "put %s %s: %llu bytes, ETag %s", src, what,
		 (unsigned long long)info.size, info.etag);
out:
	if (fd != STDIN_FILENO)
		close(fd);
	return ret;
}

static int cmd_get(struct s3_cmd *s, char **args, int n, bool cat)
{
	struct s3_url u;
	struct s3_object_info info;
	struct s3_out o;
	char what[KEY_MAX + 300];
	const char *dst;
	int ret;

	if (cat ? n != 1 : (n < 1 || n > 2)) {
		rdx_error(cat ? "usage: rds3 cat s3://BUCKET/KEY" :
				"usage: rds3 get s3://BUCKET/KEY [FILE|-]");
		return RDX_EXIT_USAGE;
	}
	if (parse_url(args[0], &u) || need_key(args[0], &u))
		return RDX_EXIT_USAGE;
	snprintf(what, sizeof(what), "s3://%s/%s", u.bucket, u.key);
	dst = cat ? "-" : n == 2 ? args[1] : s3_last_part(u.key);
	if (s->resume && !strcmp(dst, "-")) {
		rdx_error("--resume needs a file to write, not stdout");
		return RDX_EXIT_USAGE;
	}
	ret = s->resume ? s3_out_open_resume(&o, dst, u.key, &interrupted)
			: s3_out_open(&o, dst, u.key, &interrupted);
	if (ret) {
		s3_out_abort(&o);
		rdx_error("cannot write '%s': %s", o.final[0] ? o.final : dst, strerror(-ret));
		return RDX_EXIT_IO;
	}
	ret = s->resume ? s3_download_resume(s->s3, &s->xfer, u.bucket, u.key, &o, &info)
			: s3_download(s->s3, &s->xfer, u.bucket, u.key, &o, &info);
	if (!ret && (ret = s3_out_publish(&o))) {
		s3_out_abort(&o);
		rdx_error("cannot write '%s': %s", o.final, strerror(-ret));
		return RDX_EXIT_IO;
	}
	if (ret) {
		/* A resume partial stays for the next try, unless its data
		 * proved bad. */
		if (ret == -RDX_EINTEGRITY)
			s3_out_discard(&o);
		else
			s3_out_abort(&o);
		if (o.resume && ret != -RDX_EINTEGRITY)
			rdx_info(1, "get %s: %llu bytes kept in '%s' for --resume", what,
				 (unsigned long long)o.have, o.tmp);
		if (ret != -RDX_EINTR && ret < 0 && -ret < RDX_EBASE) {
			rdx_error("cannot write '%s': %s", o.is_stdout ? "stdout" : o.final,
				  strerror(-ret));
			return RDX_EXIT_IO;
		}
		return s3_fail(s, what, ret);
	}
	rdx_info(1, "get %s: %llu bytes, ETag %s", what, (unsigned long long)info.size,
		 info.etag);
	return 0;
}

/* ------------------------------------------------------------- output */

static void jstr(const char *s)
{
	putchar('"');
	for (; s && *s; s++) {
		unsigned char ch = (unsigned char)*s;

		if (ch == '"' || ch == '\\')
			printf("\\%c", ch);
		else if (ch < 0x20 || ch == 0x7f)
			printf("\\u%04x", ch);
		else
			putchar(ch);
	}
	putchar('"');
}

/* "2024-05-01T10:00:00.000Z" as "2024-05-01 10:00:00". */
static void print_date(const char *iso)
{
	char d[20];

	if (iso && strlen(iso) >= 19 && iso[10] == 'T') {
		memcpy(d, iso, 19);
		d[10] = ' ';
		d[19] = '\0';
		printf("%s", d);
	} else {
		printf("%-19s", iso ? iso : "-");
	}
}

static void print_entry(const struct s3_cmd *s, const struct s3_entry *e,
			bool bucket)
{
	if (s->c.json) {
		if (bucket) {
			fputs("{\"bucket\":", stdout);
			jstr(e->name);
			fputs(",\"created\":", stdout);
			jstr(e->mtime);
		} else if (e->is_prefix) {
			fputs("{\"prefix\":", stdout);
			jstr(e->name);
		} else {
			fputs("{\"key\":", stdout);
			jstr(e->name);
			printf(",\"size\":%llu,\"last_modified\":", (unsigned long long)e->size);
			jstr(e->mtime);
			fputs(",\"etag\":", stdout);
			jstr(e->etag);
		}
		fputs("}\n", stdout);
		return;
	}
	if (bucket) {
		print_date(e->mtime);
		printf(" %s\n", e->name);
	} else if (e->is_prefix) {
		printf("%30s %s\n", "PRE", e->name);
	} else {
		print_date(e->mtime);
		printf(" %10llu %s\n", (unsigned long long)e->size, e->name);
	}
}

static int cmd_ls(struct s3_cmd *s, char **args, int n)
{
	struct s3_list l = { 0 };
	struct s3_url u;
	char *token = NULL, what[KEY_MAX + 300];
	size_t i;
	int ret;

	if (n > 1) {
		rdx_error("usage: rds3 ls [s3://BUCKET[/PREFIX]]");
		return RDX_EXIT_USAGE;
	}
	if (!n) {
		ret = s3_list_buckets(s->s3, &l);
		if (ret)
			return s3_fail(s, "buckets", ret);
		for (i = 0; i < l.n; i++)
			print_entry(s, &l.v[i], true);
		s3_list_release(&l);
		return fflush(stdout) ? RDX_EXIT_IO : 0;
	}
	if (parse_url(args[0], &u))
		return RDX_EXIT_USAGE;
	snprintf(what, sizeof(what), "s3://%s%s%s", u.bucket, u.key[0] ? "/" : "", u.key);
	do {
		ret = s3_list_objects(s->s3, u.bucket, u.key, s->recursive ? NULL : "/",
				      token, &l);
		free(token);
		token = NULL;
		if (ret)
			break;
		for (i = 0; i < l.n; i++)
			print_entry(s, &l.v[i], false);
		if (l.truncated && !l.next_token) {
			ret = -RDX_EPROTO;
			break;
		}
		token = l.truncated ? strdup(l.next_token) : NULL;
		s3_list_release(&l);
		if (l.truncated && !token)
			ret = -ENOMEM;
	} while (!ret && token);
	s3_list_release(&l);
	free(token);
	if (ret == -RDX_EPROTO && !s3_last_error(s->s3)->code[0]) {
		rdx_error("ls %s: the listing is truncated but gives no continuation token", what);
		return RDX_EXIT_CONN;
	}
	if (ret)
		return s3_fail(s, what, ret);
	return fflush(stdout) ? RDX_EXIT_IO : 0;
}

static int rm_one(struct s3_cmd *s, const char *bucket, const char *key)
{
	char what[KEY_MAX + 300];
	int ret;

	snprintf(what, sizeof(what), "s3://%s/%s", bucket, key);
	ret = s3_delete_object(s->s3, bucket, key);
	if (ret)
		return s3_fail(s, what, ret);
	rdx_info(1, "deleted %s", what);
	return 0;
}

/* One listed page (up to 1000 keys) in DeleteObjects requests; keys XML
 * cannot carry go one by one.  Each key S3 refused is reported; *failed
 * counts them.  Returns 0 or the exit status of a request that failed. */
static int rm_page(struct s3_cmd *s, const char *bucket, const struct s3_list *l,
		   size_t *failed)
{
	const char **keys = NULL;
	struct s3_list errs = { 0 };
	char what[KEY_MAX + 300];
	size_t i, j, nk = 0;
	int rc = 0, ret;

	if (!l->n)
		return 0;
	keys = calloc(l->n, sizeof(*keys));
	if (!keys) {
		rdx_error("out of memory");
		return RDX_EXIT_FAIL;
	}
	for (i = 0; i < l->n && !rc; i++) {
		if (s3_delete_key_ok(l->v[i].name))
			keys[nk++] = l->v[i].name;
		else
			rc = rm_one(s, bucket, l->v[i].name);
	}
	for (i = 0; i < nk && !rc; i += S3_DELETE_MAX) {
		size_t n = nk - i < S3_DELETE_MAX ? nk - i : S3_DELETE_MAX;

		ret = s3_delete_objects(s->s3, bucket, keys + i, n, &errs);
		if (ret) {
			snprintf(what, sizeof(what), "s3://%s/%s", bucket, keys[i]);
			rc = s3_fail(s, what, ret);
			break;
		}
		rdx_info(1, "deleted %zu keys of s3://%s in one request", n - errs.n, bucket);
		for (j = 0; j < errs.n; j++)
			rdx_error("rm s3://%s/%s: %s: %s", bucket, errs.v[j].name,
				  errs.v[j].etag ? errs.v[j].etag : "(no code)",
				  errs.v[j].mtime ? errs.v[j].mtime : "(no message)");
		*failed += errs.n;
		s3_list_release(&errs);
	}
	s3_list_release(&errs);
	free(keys);
	return rc;
}

static int cmd_rm(struct s3_cmd *s, char **args, int n)
{
	struct s3_list l = { 0 };
	struct s3_url u;
	char *token = NULL;
	size_t failed = 0;
	int i, rc = 0, ret;

	if (n < 1) {
		rdx_error("usage: rds3 rm [--recursive] s3://BUCKET/KEY...");
		return RDX_EXIT_USAGE;
	}
	for (i = 0; i < n; i++)
		if (parse_url(args[i], &u) || (!s->recursive && need_key(args[i], &u)))
			return RDX_EXIT_USAGE;
	for (i = 0; i < n && !rc; i++) {
		parse_url(args[i], &u);
		if (!s->recursive) {
			rc = rm_one(s, u.bucket, u.key);
			continue;
		}
		/* Page by page: each page is deleted before the next is asked
		 * for, so memory stays at one page. */
		do {
			ret = s3_list_objects(s->s3, u.bucket, u.key, NULL, token, &l);
			free(token);
			token = NULL;
			if (ret) {
				char what[KEY_MAX + 300];

				snprintf(what, sizeof(what), "s3://%s/%s", u.bucket, u.key);
				rc = s3_fail(s, what, ret);
				break;
			}
			rc = rm_page(s, u.bucket, &l, &failed);
			token = l.truncated && l.next_token ? strdup(l.next_token) : NULL;
			if (!rc && l.truncated && !token) {
				rdx_error("rm s3://%s/%s: the listing is truncated but gives no continuation token",
					  u.bucket, u.key);
				rc = RDX_EXIT_CONN;
			}
			s3_list_release(&l);
		} while (!rc && token);
		free(token);
		token = NULL;
	}
	if (!rc && failed) {
		rdx_error("rm: %zu key%s not deleted", failed, failed == 1 ? "" : "s");
		rc = RDX_EXIT_REMOTE;
	}
	return rc;
}

/* cp between two S3 URLs, server side (s3_copy: CopyObject, or
 * UploadPartCopy in parallel for more than a part). */
static int cp_s3(struct s3_cmd *s, const char *src, const char *dst)
{
	struct s3_url a, b;
	struct s3_object_info info;
	char what[2 * KEY_MAX + 600];
	const char *last;
	int ret;

	if (parse_url(src, &a) || need_key(src, &a) || parse_url(dst, &b))
		return RDX_EXIT_USAGE;
	if (!b.key[0] || b.key[strlen(b.key) - 1] == '/') {
		last = s3_last_part(a.key);
		if (strlen(b.key) + strlen(last) > KEY_MAX) {
			rdx_error("'%s%s': keys are at most %d bytes", dst, last, KEY_MAX);
			return RDX_EXIT_USAGE;
		}
		strcat(b.key, last);
	}
	snprintf(what, sizeof(what), "s3://%s/%s to s3://%s/%s", a.bucket, a.key,
		 b.bucket, b.key);
	ret = s3_copy(s->s3, &s->xfer, a.bucket, a.key, b.bucket, b.key, &info);
	if (ret)
		return s3_fail(s, what, ret);
	rdx_info(1, "copied %s: %" PRIu64 " bytes, ETag %s", what, info.size, info.etag);
	return 0;
}

/* One side of sync or cp -r: s3://BUCKET[/PREFIX] (the prefix gets a
 * trailing '/': s3://b/p is everything under p/) or a directory. */
static int sync_side(const char *arg, struct s3_url *u, struct s3_loc *l,
		     char *prefix, char *dir)
{
	size_t n;

	memset(l, 0, sizeof(*l));
	if (!strncmp(arg, "s3://", 5)) {
		if (parse_url(arg, u))
			return -1;
		n = strlen(u->key);
		memcpy(prefix, u->key, n + 1);
		if (n && prefix[n - 1] != '/')
			strcpy(prefix + n, "/");
		l->is_s3 = true;
		l->bucket = u->bucket;
		l->prefix = prefix;
		return 0;
	}
	n = strlen(arg);
	if (!n || n >= PATH_MAX) {
		rdx_error("'%s': not a directory name", arg);
		return -1;
	}
	memcpy(dir, arg, n + 1);
	while (n > 1 && dir[n - 1] == '/')
		dir[--n] = '\0';
	l->dir = dir;
	return 0;
}

/* sync SRC DST, and cp -r SRC DST (copy_all): src/s3/sync.c does the
 * work; here are the arguments and the exit status. */
static int cmd_sync(struct s3_cmd *s, char **args, int n, bool copy_all)
{
	static char pa[KEY_MAX + 2], pb[KEY_MAX + 2], da[PATH_MAX], db[PATH_MAX];
	const char *usage = copy_all ? "usage: rds3 cp -r DIR|s3://BUCKET[/PREFIX] DIR|s3://BUCKET[/PREFIX]" :
				       "usage: rds3 sync DIR|s3://BUCKET[/PREFIX] DIR|s3://BUCKET[/PREFIX]";
	struct s3_url ua, ub;
	struct s3_loc a, b;
	struct s3_sync_stats st;
	struct stat sb;
	int ret;

	if (n != 2) {
		rdx_error("%s", usage);
		return RDX_EXIT_USAGE;
	}
	if (copy_all && s->sync_opt) {
		rdx_error("--delete and --checksum are sync's, not cp -r's");
		return RDX_EXIT_USAGE;
	}
	if (sync_side(args[0], &ua, &a, pa, da) || sync_side(args[1], &ub, &b, pb, db))
		return RDX_EXIT_USAGE;
	if (!a.is_s3 && !b.is_s3) {
		rdx_error("%s: neither '%s' nor '%s' is an S3 URL", s->cmd, args[0], args[1]);
		return RDX_EXIT_USAGE;
	}
	if (!a.is_s3 && (stat(a.dir, &sb) || !S_ISDIR(sb.st_mode))) {
		rdx_error("%s: '%s' is not a directory%s", s->cmd, args[0],
			  copy_all ? "" : " (rds3 put sends one file)");
		return RDX_EXIT_USAGE;
	}
	if (!b.is_s3 && !stat(b.dir, &sb) && !S_ISDIR(sb.st_mode)) {
		rdx_error("%s: '%s' is not a directory", s->cmd, args[1]);
		return RDX_EXIT_USAGE;
	}
	s->sync.copy_all = copy_all;
	s->sync.rules = s->rules;
	s->sync.nrules = s->nrules;
	ret = s3_sync(s->s3, &s->sync, &a, &b, &st);
	rdx_info(1, "%s: %zu sent, %zu unchanged, %zu deleted, %zu failed, %zu refused",
		 s->cmd, st.transferred, st.unchanged, st.deleted, st.failed, st.refused);
	if (ret == -RDX_EINTR || atomic_load(&interrupted)) {
		rdx_error("%s: interrupted", s->cmd);
		return RDX_EXIT_INTR;
	}
	if (st.failed)
		rdx_error("%s: %zu object%s failed", s->cmd, st.failed, st.failed == 1 ? "" : "s");
	if (st.refused)
		rdx_error("%s: %zu key%s refused (no safe local name)", s->cmd, st.refused,
			  st.refused == 1 ? "" : "s");
	if (ret)
		return rdx_exit_code(ret) == RDX_EXIT_OK ? RDX_EXIT_FAIL : rdx_exit_code(ret);
	if (st.refused)
		return RDX_EXIT_FAIL;
	return fflush(stdout) ? RDX_EXIT_IO : 0;
}

static int cmd_cp(struct s3_cmd *s, char **args, int n)
{
	bool from, to;

	if (n != 2) {
		rdx_error("usage: rds3 cp SRC DST (FILE|- or s3://BUCKET/KEY on either side)");
		return RDX_EXIT_USAGE;
	}
	if (s->recursive)
		return cmd_sync(s, args, n, true);
	from = !strncmp(args[0], "s3://", 5);
	to = !strncmp(args[1], "s3://", 5);
	if (from && to)
		return cp_s3(s, args[0], args[1]);
	if (to)
		return cmd_put(s, args, 2);
	if (from)
		return cmd_get(s, args, 2, false);
	rdx_error("cp: neither '%s' nor '%s' is an S3 URL (use cp(1) for local files)",
		  args[0], args[1]);
	return RDX_EXIT_USAGE;
}

static int cmd_presign(struct s3_cmd *s, char **args, int n)
{
	struct s3_url u;
	struct s3_buf url;
	int ret;

	if (n != 1) {
		rdx_error("usage: rds3 presign [--expires SECS] s3://BUCKET/KEY");
		return RDX_EXIT_USAGE;
	}
	if (parse_url(args[0], &u) || need_key(args[0], &u))
		return RDX_EXIT_USAGE;
	if (s->cfg.no_sign) {
		rdx_error("presign: a presigned URL needs credentials, not --no-sign-request");
		return RDX_EXIT_USAGE;
	}
	s3_buf_init(&url, 0);
	ret = s3_presign(s->s3, u.bucket, u.key, s->expires, &url);
	if (ret) {
		rdx_error("presign %s: %s", args[0], ret == -EINVAL ? "no credentials to sign with" :
								     strerror(-ret));
		s3_buf_release(&url);
		return ret == -EINVAL ? RDX_EXIT_USAGE : RDX_EXIT_FAIL;
	}
	puts(url.p);
	s3_buf_release(&url);
	return fflush(stdout) ? RDX_EXIT_IO : 0;
}

static int cmd_stat(struct s3_cmd *s, char **args, int n)
{
	struct s3_object_info info;
	struct s3_url u;
	char what[KEY_MAX + 300];
	int ret;

	if (n != 1) {
		rdx_error("usage: rds3 %s s3://BUCKET/KEY", s->cmd);
		return RDX_EXIT_USAGE;
	}
	if (parse_url(args[0], &u) || need_key(args[0], &u))
		return RDX_EXIT_USAGE;
	snprintf(what, sizeof(what), "s3://%s/%s", u.bucket, u.key);
	ret = s3_head_object(s->s3, u.bucket, u.key, &info);
	if (ret)
		return s3_fail(s, what, ret);
	if (s->c.json) {
		fputs("{\"url\":", stdout);
		jstr(what);
		printf(",\"size\":%llu,\"etag\":", (unsigned long long)info.size);
		jstr(info.etag);
		fputs(",\"last_modified\":", stdout);
		jstr(info.last_modified);
		fputs(",\"content_type\":", stdout);
		jstr(info.content_type);
		fputs("}\n", stdout);
	} else {
		printf("url: %s\nsize: %llu\netag: %s\nlast-modified: %s\ncontent-type: %s\n",
		       what, (unsigned long long)info.size, info.etag,
		       info.last_modified, info.content_type);
	}
	return fflush(stdout) ? RDX_EXIT_IO : 0;
}

static int cmd_serve(struct s3_cmd *s, char **args, int n)
{
	struct s3_serve_opts o = {
		.listen = s->listen ? s->listen : "127.0.0.1",
		.port = s->port,
		.access_key = s->cfg.access_key,
		.secret_key = s->cfg.secret_key,
		.no_sign = s->cfg.no_sign,
		.max_conns = s->max_conns ? s->max_conns : 64,
		.upload_expiry_days = s->expire_set ? s->expire_days : 7,
		.header_secs = s->header_secs ? s->header_secs : 10,
		.timeout_secs = (unsigned)((s->c.o.timeout_ms + 999) / 1000),
		.verbose = s->c.verbose,
		.stop = &interrupted,
		.announce = stdout,
	};

	if (n != 1) {
		rdx_error("usage: rds3 serve DIR");
		return RDX_EXIT_USAGE;
	}
	o.root = args[0];
	if (!o.timeout_secs)
		o.timeout_secs = 1;
	/* By default a quarter of the places stay for other addresses. */
	o.max_per_addr = s->max_per_addr ? s->max_per_addr : o.max_conns - o.max_conns / 4;
	if (o.max_per_addr > o.max_conns)
		o.max_per_addr = o.max_conns;
	return s3_serve(&o);
}

static int cmd_bucket(struct s3_cmd *s, char **args, int n, bool make)
{
	struct s3_url u;
	char what[300];
	int ret;

	if (n != 1) {
		rdx_error("usage: rds3 %s s3://BUCKET", s->cmd);
		return RDX_EXIT_USAGE;
	}
	if (parse_url(args[0], &u))
		return RDX_EXIT_USAGE;
	if (u.key[0]) {
		rdx_error("'%s': %s takes a bucket, not a key", args[0], s->cmd);
		return RDX_EXIT_USAGE;
	}
	snprintf(what, sizeof(what), "s3://%s", u.bucket);
	ret = make ? s3_create_bucket(s->s3, u.bucket) : s3_delete_bucket(s->s3, u.bucket);
	if (ret)
		return s3_fail(s, what, ret);
	rdx_info(1, "%s %s", make ? "made" : "removed", what);
	return 0;
}

/* --------------------------------------------------------------- main */

static const char *const commands[] = { "put", "get", "cat", "ls", "rm",
					"stat", "head", "mb", "rb", "cp",
					"presign", "sync", "serve", NULL };

/* The --progress line, redrawn by its own thread while a command runs. */
struct progress_line {
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool done, started;
};

static void *progress_main(void *arg)
{
	struct progress_line *pl = arg;
	struct rdx_progress p;
	struct timespec dl;

	rdx_progress_init(&p, true, false, 0);
	pthread_mutex_lock(&pl->lock);
	while (!pl->done) {
		uint64_t total = atomic_load(&progress_total);

		if (total && !p.total_known) {
			p.total_known = true;
			p.total = total;
		}
		rdx_progress_update(&p, atomic_load(&moved));
		rdx_deadline_in(&dl, 100);
		pthread_cond_timedwait(&pl->cond, &pl->lock, &dl);
	}
	pthread_mutex_unlock(&pl->lock);
	rdx_progress_end(&p);
	return NULL;
}

static int run_cmd(struct s3_cmd *s, char **args, int n);

/* The command, under a progress line when asked for and stderr is a
 * terminal. */
static int run(struct s3_cmd *s, char **args, int n)
{
	struct progress_line pl = { .done = false };
	int rc;

	if (!s->c.o.progress || s->quiet || !isatty(STDERR_FILENO))
		return run_cmd(s, args, n);
	pthread_mutex_init(&pl.lock, NULL);
	pthread_cond_init(&pl.cond, NULL);
	pl.started = pthread_create(&pl.thread, NULL, progress_main, &pl) == 0;
	rc = run_cmd(s, args, n);
	pthread_mutex_lock(&pl.lock);
	pl.done = true;
	pthread_cond_signal(&pl.cond);
	pthread_mutex_unlock(&pl.lock);
	if (pl.started)
		pthread_join(pl.thread, NULL);
	pthread_cond_destroy(&pl.cond);
	pthread_mutex_destroy(&pl.lock);
	return rc;
}

static int run_cmd(struct s3_cmd *s, char **args, int n)
{
	const char *c = s->cmd;

	if ((s->sync_opt || s->sync.dry_run || s->nrules) && strcmp(c, "sync") &&
	    !(s->recursive && !strcmp(c, "cp"))) {
		rdx_error("--delete, --dry-run, --checksum, --include and --exclude are for sync and cp -r");
		return RDX_EXIT_USAGE;
	}
	if (s->resume && strcmp(c, "get") && strcmp(c, "cat") &&
	    !(!strcmp(c, "cp") && !s->recursive && n == 2 &&
	      !strncmp(args[0], "s3://", 5) && strncmp(args[1], "s3://", 5))) {
		rdx_error("--resume is for get (and cp s3://BUCKET/KEY FILE)");
		return RDX_EXIT_USAGE;
	}
	if (s->serve_opt && strcmp(c, "serve")) {
		rdx_error("--listen, --port, --max-connections, --max-per-address, --header-timeout and --expire-uploads are for serve");
		return RDX_EXIT_USAGE;
	}
	if (!strcmp(c, "put"))
		return cmd_put(s, args, n);
	if (!strcmp(c, "get"))
		return cmd_get(s, args, n, false);
	if (!strcmp(c, "cat"))
		return cmd_get(s, args, n, true);
	if (!strcmp(c, "ls"))
		return cmd_ls(s, args, n);
	if (!strcmp(c, "rm"))
		return cmd_rm(s, args, n);
	if (!strcmp(c, "cp"))
		return cmd_cp(s, args, n);
	if (!strcmp(c, "sync"))
		return cmd_sync(s, args, n, false);
	if (!strcmp(c, "presign"))
		return cmd_presign(s, args, n);
	if (!strcmp(c, "serve"))
		return cmd_serve(s, args, n);
	if (!strcmp(c, "stat") || !strcmp(c, "head"))
		return cmd_stat(s, args, n);
	return cmd_bucket(s, args, n, !strcmp(c, "mb"));
}

int rds3_run(const char *tool, int argc, char **argv)
{
	struct s3_cmd s = {
		.c.cli = &s3_cli, .retries = 4, .connect_timeout_ms = 10000,
		.expires = 3600,
		.xfer = { .part_size = (uint64_t)8 << 20, .concurrency = 4 },
		.sync = { .jobs = 8 },
	};
	struct s3_client_opts co = { 0 };
	struct sigaction sa = { .sa_handler = on_signal };
	char err[512];
	int first, i, rc;

	rdx_log_init(tool, 0);
	rdx_xfer_opts_init(&s.c.o);
	first = rdx_opt_parse(&s3_cli, argc, argv, handle, &s);
	if (first < 0)
		return RDX_EXIT_USAGE;
	if (s.c.done)
		return RDX_EXIT_OK;
	rdx_log_init(tool, s.quiet ? -1 : s.c.verbose);
	if (first >= argc) {
		rdx_error("no command: rds3 put|get|cat|ls|rm|cp|sync|stat|mb|rb|presign ... (see --help)");
		return RDX_EXIT_USAGE;
	}
	s.cmd = argv[first];
	for (i = 0; commands[i] && strcmp(commands[i], s.cmd); i++)
		;
	if (!commands[i]) {
		rdx_error("unknown command '%s' (see --help)", s.cmd);
		return RDX_EXIT_USAGE;
	}
	if (s3_config_load(&s.cfg, &s.co, err, sizeof(err))) {
		rdx_error("%s", err);
		return RDX_EXIT_USAGE;
	}
	rdx_info(2, "endpoint %s://%s%s (%s), region %s, %s-style, credentials from %s",
		 s.cfg.https ? "https" : "http", s.cfg.host, s.cfg.base_path,
		 s.cfg.endpoint_source, s.cfg.region,
		 s.cfg.addressing == S3_ADDR_PATH ? "path" : "virtual-host",
		 s.cfg.no_sign ? "nowhere (unsigned)" : s.cfg.cred_source);
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	co.cfg = &s.cfg;
	co.retries = s.retries;
	co.insecure = s.insecure;
	co.connect_timeout_ms = (long)s.connect_timeout_ms;
	co.stall_secs = (long)((s.c.o.timeout_ms + 999) / 1000);
	co.verbose = s.c.verbose;
	co.stop = &interrupted;
	co.moved = s.c.o.progress ? &moved : NULL;
	s.client = co;
	s.xfer.client = &s.client;
	s.xfer.stop = &interrupted;
	s.sync.client = &s.client;
	s.sync.xfer = &s.xfer;
	s.sync.stop = &interrupted;
	if (s3_client_new(&s.s3, &co)) {
		rdx_error("out of memory");
		s3_config_release(&s.cfg);
		return RDX_EXIT_FAIL;
	}
	rc = run(&s, argv + first + 1, argc - first - 1);
	s3_client_free(s.s3);
	s3_config_release(&s.cfg);
	return rc;
}
