/* rds3's commands (rds3_run): the options, the listings and the
 * commands on buckets and objects; what copies (put, get, cat, cp, sync)
 * is the S3 library's (s3/copy.h), which rdcp's s3:// copies run too.
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
#include "cmd/s3opts.h"

#include "core/err.h"
#include "core/log.h"
#include "core/xport.h"
#include "core/units.h"
#include "s3/config.h"
#include "s3/pool.h"
#include "s3/s3.h"
#include "s3/serve/serve.h"

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>


enum s3_key {
	OPT_RECURSIVE = 'r',
	OPT_RETRIES = 300,
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
	OPT_RDMA_CONNS,
	OPT_USERS,
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
	{ "rdma-connections", OPT_RDMA_CONNS, RDX_ARG_REQUIRED, "N",
	  "serve --rdma: RDMA connections at once, 1..1024 (default 32; each pins 1 MiB and its queues)",
	  NULL },
	{ "users", OPT_USERS, RDX_ARG_REQUIRED, "FILE",
	  "serve: the access keys of several users, each owning the buckets it makes: ACCESS_KEY SECRET lines, or an AWS credentials file (mode 600)",
	  NULL },
	{ "expire-uploads", OPT_EXPIRE_UPLOADS, RDX_ARG_REQUIRED, "DAYS",
	  "serve: remove incomplete multipart uploads begun DAYS ago, at the start and hourly (default 7; 0: never)",
	  NULL },
	CLI_DIRECT_ROW("get, cp and sync: how downloads are written into files"),
	S3OPT_ENTRIES,
	{ "retries", OPT_RETRIES, RDX_ARG_REQUIRED, "N",
	  "retries of a failed request, 0..20 (default 4)", NULL },
	{ "part-size", OPT_PART_SIZE, RDX_ARG_REQUIRED, "SIZE",
	  "multipart part and download range size, 5M..5G (default 8M; grown to fit 10000 parts)", NULL },
	{ "concurrency", OPT_CONCURRENCY, RDX_ARG_REQUIRED, "N",
	  "parts or ranges in flight at once, 1..64 (default 4)", NULL },
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
		"                                 profile's keys (or --users FILE's), until\n"
		"                                 SIGINT/SIGTERM",
	.opts = s3_opts,
	.exits = "Exit status: 0 ok, 1 failure, 2 usage, 3 connection, timeout or access denied\n"
		 "(credentials, signature), 4 local I/O, 5 error reported by S3 (no such\n"
		 "bucket or key, ...), 6 integrity (short body), 130 interrupted.",
};

struct s3_cmd {
	struct cli_state c;
	struct s3_copy_opts o;	/* what rdcp's s3:// copies fill too */
	struct s3_session ss;
	unsigned expires;
	const char *cmd;
	const char *listen;
	unsigned port, max_conns;
	unsigned expire_days; /* serve --expire-uploads */
	unsigned max_per_addr, header_secs; /* serve: 0 for the defaults */
	unsigned rdma_conns;		    /* serve: 0 for the default */
	const char *users;		    /* serve --users FILE */
	bool no_sign;			    /* --no-sign-request was given */
	bool expire_set;
	bool serve_opt; /* a serve-only option was given */
};

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
	int known = s3opts_handle(&s->o, key, arg);

	if (known <= 0)
		return known;
	switch (key) {
	case OPT_RECURSIVE:
		s->o.recursive = true;
		return 0;
	case 'q':
		s->o.quiet = true;
		return 0;
	case OPT_RESUME:
		s->o.resume = true;
		return 0;
	case OPT_DIRECT:
		if (rdx_direct_parse(arg, &s->o.direct)) {
			rdx_error("invalid value '%s' for --direct: expected auto, always or never", arg);
			return -1;
		}
		s->o.direct_set = true;
		return 0;
	case OPT_DELETE:
	case OPT_CHECKSUM:
		*(key == OPT_DELETE ? &s->o.del : &s->o.checksum) = true;
		return 0;
	case OPT_DRY_RUN:
		s->o.dry_run = true;
		return 0;
	case OPT_INCLUDE:
	case OPT_EXCLUDE:
		if (s->o.nrules == S3_RULES_MAX) {
			rdx_error("at most %d --include and --exclude patterns", S3_RULES_MAX);
			return -1;
		}
		s->o.rules[s->o.nrules++] = (struct rdx_rule){ arg, key == OPT_INCLUDE };
		return 0;
	case OPT_JOBS:
		if (rdx_parse_uint(arg, 1, S3_JOBS_MAX, &v)) {
			rdx_error("invalid value '%s' for --jobs: expected a number from 1 to %u",
				  arg, S3_JOBS_MAX);
			return -1;
		}
		s->o.jobs = (unsigned)v;
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
	case OPT_USERS:
		s->users = arg;
		s->serve_opt = true;
		return 0;
	case OPT_RDMA_CONNS:
		if (rdx_parse_uint(arg, 1, 1024, &v)) {
			rdx_error("invalid value '%s' for --rdma-connections: expected a number from 1 to 1024", arg);
			return -1;
		}
		s->rdma_conns = (unsigned)v;
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
	case OPT_RETRIES:
		if (rdx_parse_uint(arg, 0, 20, &v)) {
			rdx_error("invalid value '%s' for --retries: expected a number from 0 to 20", arg);
			return -1;
		}
		s->o.retries = (unsigned)v;
		return 0;
	case OPT_PART_SIZE:
		if (rdx_parse_size(arg, &v) || v < S3_PART_MIN || v > S3_PART_MAX) {
			rdx_error("invalid value '%s' for --part-size: expected a size from 5M to 5G", arg);
			return -1;
		}
		s->o.part_size = v;
		return 0;
	case OPT_CONCURRENCY:
		if (rdx_parse_uint(arg, 1, S3_CONCURRENCY_MAX, &v)) {
			rdx_error("invalid value '%s' for --concurrency: expected a number from 1 to %u",
				  arg, S3_CONCURRENCY_MAX);
			return -1;
		}
		s->o.concurrency = (unsigned)v;
		return 0;
	case OPT_S3_CONNECT_TIMEOUT:
		if (rdx_parse_seconds(arg, &v) || v < 100) {
			rdx_error("invalid value '%s' for --connect-timeout: expected at least 0.1 seconds", arg);
			return -1;
		}
		s->o.connect_timeout_ms = v;
		return 0;
	default:
		return cli_common_opt(&s->c, key, arg) ? -1 : 0;
	}
}

/* ------------------------------------------------------------- s3 URLs */





/* ------------------------------------------------------ local data */





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
	char *token = NULL, what[S3_KEY_MAX + 300];
	size_t i;
	int ret;

	if (n > 1) {
		rdx_error("usage: rds3 ls [s3://BUCKET[/PREFIX]]");
		return RDX_EXIT_USAGE;
	}
	if (!n) {
		ret = s3_list_buckets(s->ss.c, &l);
		if (ret)
			return s3_session_fail(&s->ss, "buckets", ret);
		for (i = 0; i < l.n; i++)
			print_entry(s, &l.v[i], true);
		s3_list_release(&l);
		return fflush(stdout) ? RDX_EXIT_IO : 0;
	}
	if (s3_url_parse(args[0], &u))
		return RDX_EXIT_USAGE;
	snprintf(what, sizeof(what), "s3://%s%s%s", u.bucket, u.key[0] ? "/" : "", u.key);
	do {
		ret = s3_list_objects(s->ss.c, u.bucket, u.key, s->o.recursive ? NULL : "/",
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
	if (ret == -RDX_EPROTO && !s3_last_error(s->ss.c)->code[0]) {
		rdx_error("ls %s: the listing is truncated but gives no continuation token", what);
		return RDX_EXIT_CONN;
	}
	if (ret)
		return s3_session_fail(&s->ss, what, ret);
	return fflush(stdout) ? RDX_EXIT_IO : 0;
}

static int rm_one(struct s3_cmd *s, const char *bucket, const char *key)
{
	char what[S3_KEY_MAX + 300];
	int ret;

	snprintf(what, sizeof(what), "s3://%s/%s", bucket, key);
	ret = s3_delete_object(s->ss.c, bucket, key);
	if (ret)
		return s3_session_fail(&s->ss, what, ret);
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
	char what[S3_KEY_MAX + 300];
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

		ret = s3_delete_objects(s->ss.c, bucket, keys + i, n, &errs);
		if (ret) {
			snprintf(what, sizeof(what), "s3://%s/%s", bucket, keys[i]);
			rc = s3_session_fail(&s->ss, what, ret);
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
		if (s3_url_parse(args[i], &u) || (!s->o.recursive && s3_url_need_key(args[i], &u)))
			return RDX_EXIT_USAGE;
	for (i = 0; i < n && !rc; i++) {
		s3_url_parse(args[i], &u);
		if (!s->o.recursive) {
			rc = rm_one(s, u.bucket, u.key);
			continue;
		}
		/* Page by page: each page is deleted before the next is asked
		 * for, so memory stays at one page. */
		do {
			ret = s3_list_objects(s->ss.c, u.bucket, u.key, NULL, token, &l);
			free(token);
			token = NULL;
			if (ret) {
				char what[S3_KEY_MAX + 300];

				snprintf(what, sizeof(what), "s3://%s/%s", u.bucket, u.key);
				rc = s3_session_fail(&s->ss, what, ret);
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





static int cmd_presign(struct s3_cmd *s, char **args, int n)
{
	struct s3_url u;
	struct s3_buf url;
	int ret;

	if (n != 1) {
		rdx_error("usage: rds3 presign [--expires SECS] s3://BUCKET/KEY");
		return RDX_EXIT_USAGE;
	}
	if (s3_url_parse(args[0], &u) || s3_url_need_key(args[0], &u))
		return RDX_EXIT_USAGE;
	if (s->ss.cfg.no_sign) {
		rdx_error("presign: a presigned URL needs credentials, not --no-sign-request");
		return RDX_EXIT_USAGE;
	}
	s3_buf_init(&url, 0);
	ret = s3_presign(s->ss.c, u.bucket, u.key, s->expires, &url);
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
	char what[S3_KEY_MAX + 300];
	int ret;

	if (n != 1) {
		rdx_error("usage: rds3 %s s3://BUCKET/KEY", s->cmd);
		return RDX_EXIT_USAGE;
	}
	if (s3_url_parse(args[0], &u) || s3_url_need_key(args[0], &u))
		return RDX_EXIT_USAGE;
	snprintf(what, sizeof(what), "s3://%s/%s", u.bucket, u.key);
	ret = s3_head_object(s->ss.c, u.bucket, u.key, &info);
	if (ret)
		return s3_session_fail(&s->ss, what, ret);
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
		.access_key = s->ss.cfg.access_key,
		.secret_key = s->ss.cfg.secret_key,
		.users_file = s->users,
		.no_sign = s->no_sign,
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
	if (s->o.rdma_dc) {
		rdx_error("--rdma-dc is for clients: rds3 serve serves rc tokens (--rdma)");
		return RDX_EXIT_USAGE;
	}
	/* Served only when asked for; auto: where there is a device. */
	o.rdma = s->o.rdma_set && s->o.rdma != S3_RDMA_OFF;
	if (o.rdma && s->o.rdma == S3_RDMA_AUTO && rdx_verbs_unavailable()) {
		rdx_info(1, "--rdma=auto: not serving S3 over RDMA: %s", rdx_verbs_unavailable());
		o.rdma = false;
	}
	o.rdma_conns = s->rdma_conns ? s->rdma_conns : 32;
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
	if (s3_url_parse(args[0], &u))
		return RDX_EXIT_USAGE;
	if (u.key[0]) {
		rdx_error("'%s': %s takes a bucket, not a key", args[0], s->cmd);
		return RDX_EXIT_USAGE;
	}
	snprintf(what, sizeof(what), "s3://%s", u.bucket);
	ret = make ? s3_create_bucket(s->ss.c, u.bucket) : s3_delete_bucket(s->ss.c, u.bucket);
	if (ret)
		return s3_session_fail(&s->ss, what, ret);
	rdx_info(1, "%s %s", make ? "made" : "removed", what);
	return 0;
}

/* --------------------------------------------------------------- main */

static const char *const commands[] = { "put", "get", "cat", "ls", "rm",
					"stat", "head", "mb", "rb", "cp",
					"presign", "sync", "serve", NULL };




/* The commands that copy are the S3 library's (s3/copy.h); here are
 * their arguments. */
static int copy_cmd(struct s3_cmd *s, char **args, int n)
{
	const char *c = s->cmd;

	if (!strcmp(c, "put")) {
		if (n != 2) {
			rdx_error("usage: rds3 put FILE|- s3://BUCKET/KEY");
			return RDX_EXIT_USAGE;
		}
		return s3_run_put(&s->ss, args[0], args[1]);
	}
	if (!strcmp(c, "get") || !strcmp(c, "cat")) {
		bool cat = !strcmp(c, "cat");

		if (cat ? n != 1 : (n < 1 || n > 2)) {
			rdx_error(cat ? "usage: rds3 cat s3://BUCKET/KEY" :
					"usage: rds3 get s3://BUCKET/KEY [FILE|-]");
			return RDX_EXIT_USAGE;
		}
		return s3_run_get(&s->ss, args[0], cat ? "-" : n == 2 ? args[1] : NULL);
	}
	if (n != 2) {
		rdx_error(!strcmp(c, "sync") ? "usage: rds3 sync DIR|s3://BUCKET[/PREFIX] DIR|s3://BUCKET[/PREFIX]" :
			  s->o.recursive ? "usage: rds3 cp -r DIR|s3://BUCKET[/PREFIX] DIR|s3://BUCKET[/PREFIX]" :
					   "usage: rds3 cp SRC DST (FILE|- or s3://BUCKET/KEY on either side)");
		return RDX_EXIT_USAGE;
	}
	if (!strcmp(c, "sync"))
		return s3_run_sync(&s->ss, args[0], args[1], false);
	return s3_run_cp(&s->ss, args[0], args[1]);
}

static int run_cmd(struct s3_cmd *s, char **args, int n)
{
	const char *c = s->cmd;

	if (s3_copy_opts_check(&s->o, c, n == 2 ? args[0] : NULL, n == 2 ? args[1] : NULL))
		return RDX_EXIT_USAGE;
	if (s->serve_opt && strcmp(c, "serve")) {
		rdx_error("--listen, --port, --max-connections, --max-per-address, --header-timeout, --users, --expire-uploads and --rdma-connections are for serve");
		return RDX_EXIT_USAGE;
	}
	if (!strcmp(c, "put") || !strcmp(c, "get") || !strcmp(c, "cat") || !strcmp(c, "cp") ||
	    !strcmp(c, "sync"))
		return copy_cmd(s, args, n);
	if (!strcmp(c, "ls"))
		return cmd_ls(s, args, n);
	if (!strcmp(c, "rm"))
		return cmd_rm(s, args, n);
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
	struct s3_cmd s = { .c.cli = &s3_cli, .expires = 3600 };
	struct sigaction sa = { .sa_handler = on_signal };
	int first, i, rc;

	rdx_log_init(tool, 0);
	rdx_xfer_opts_init(&s.c.o);
	s3_copy_opts_init(&s.o);
	first = rdx_opt_parse(&s3_cli, argc, argv, handle, &s);
	if (first < 0)
		return RDX_EXIT_USAGE;
	if (s.c.done)
		return RDX_EXIT_OK;
	rdx_log_init(tool, s.o.quiet ? -1 : s.c.verbose);
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
	s.no_sign = s.o.co.no_sign;
	if (s.users && s.no_sign) {
		rdx_error("--users and --no-sign-request: a server is signed or not");
		return RDX_EXIT_USAGE;
	}
	/* The users' keys are the file's: no credentials are looked for. */
	if (s.users && !strcmp(s.cmd, "serve"))
		s.o.co.no_sign = true;
	s.o.verbose = s.c.verbose;
	s.o.progress = s.c.o.progress;
	s.o.stall_ms = s.c.o.timeout_ms;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	rc = s3_session_open(&s.ss, &s.o, &interrupted);
	if (rc)
		return rc;
	s.ss.cmd = s.cmd;
	s3_session_progress_begin(&s.ss);
	rc = run_cmd(&s, argv + first + 1, argc - first - 1);
	s3_session_progress_end(&s.ss);
	s3_session_close(&s.ss);
	return rc;
}
