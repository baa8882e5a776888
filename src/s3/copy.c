#include "s3/copy.h"

#include "core/err.h"
#include "core/log.h"
#include "core/progress.h"
#include "core/units.h"
#include "s3/local.h"
#include "s3/pool.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define PUT_MAX ((uint64_t)5 << 30) /* S3's limit for one PutObject */
/* Each client's registered buffer: its part size, up to this. */
#define RDMA_BUF_MAX ((uint64_t)256 << 20)

void s3_copy_opts_init(struct s3_copy_opts *o)
{
	*o = (struct s3_copy_opts){
		.retries = 4,
		.connect_timeout_ms = 10000,
		.stall_ms = 60000,
		.part_size = (uint64_t)8 << 20,
		.concurrency = 4,
		.jobs = 8,
		.rdma = S3_RDMA_AUTO,
	};
}

int s3_copy_opts_check(const struct s3_copy_opts *o, const char *cmd, const char *src,
		       const char *dst)
{
	bool cp = !strcmp(cmd, "cp");

	if ((o->del || o->checksum || o->dry_run || o->nrules) && strcmp(cmd, "sync") &&
	    !(o->recursive && cp)) {
		rdx_error("--delete, --dry-run, --checksum, --include and --exclude are for sync and cp -r");
		return RDX_EXIT_USAGE;
	}
	if (o->direct_set && strcmp(cmd, "get") && strcmp(cmd, "cp") && strcmp(cmd, "sync")) {
		rdx_error("--direct is for get, cp and sync (what they write into files)");
		return RDX_EXIT_USAGE;
	}
	if (o->resume && strcmp(cmd, "get") && strcmp(cmd, "cat") &&
	    !(cp && !o->recursive && src && dst && !strncmp(src, "s3://", 5) &&
	      strncmp(dst, "s3://", 5))) {
		rdx_error("--resume is for get (and cp s3://BUCKET/KEY FILE)");
		return RDX_EXIT_USAGE;
	}
	return 0;
}

int s3_session_open(struct s3_session *s, const struct s3_copy_opts *o,
		    const atomic_int *stop)
{
	char err[512];

	memset(s, 0, sizeof(*s));
	s->o = *o;
	s->stop = stop;
	s->cmd = "";
	if (s3_config_load(&s->cfg, &s->o.co, err, sizeof(err))) {
		rdx_error("%s", err);
		return RDX_EXIT_USAGE;
	}
	rdx_info(2, "endpoint %s://%s%s (%s), region %s, %s-style, credentials from %s",
		 s->cfg.https ? "https" : "http", s->cfg.host, s->cfg.base_path,
		 s->cfg.endpoint_source, s->cfg.region,
		 s->cfg.addressing == S3_ADDR_PATH ? "path" : "virtual-host",
		 s->cfg.no_sign ? "nowhere (unsigned)" : s->cfg.cred_source);
	if (!o->rdma_set && getenv("RDS3_RDMA") &&
	    s3_rdma_mode_parse(getenv("RDS3_RDMA"), &s->o.rdma)) {
		rdx_error("invalid RDS3_RDMA '%s': expected auto, on or off", getenv("RDS3_RDMA"));
		s3_config_release(&s->cfg);
		return RDX_EXIT_USAGE;
	}
	s->client = (struct s3_client_opts){
		.cfg = &s->cfg,
		.retries = o->retries,
		.insecure = o->insecure,
		.connect_timeout_ms = (long)o->connect_timeout_ms,
		.stall_secs = (long)((o->stall_ms + 999) / 1000),
		.verbose = o->verbose,
		.stop = stop,
		.moved = o->progress ? &s->moved : NULL,
		.rdma = s->o.rdma,
		.rdma_how = { .dc = o->rdma_dc, .dc_key = o->rdma_dc_key },
		.rdma_buf = (size_t)(o->part_size < RDMA_BUF_MAX ? o->part_size : RDMA_BUF_MAX),
		.rdma_stats = &s->rdma,
	};
	s->xfer = (struct s3_xfer_opts){
		.client = &s->client,
		.part_size = o->part_size,
		.concurrency = o->concurrency,
		.stop = stop,
		.direct = o->direct,
		.mem_avail = rdx_mem_available(),
		.cached = &s->cached,
	};
	s->sync = (struct s3_sync_opts){
		.client = &s->client,
		.xfer = &s->xfer,
		.jobs = o->jobs,
		.del = o->del,
		.dry_run = o->dry_run,
		.checksum = o->checksum,
		.rules = s->o.rules,
		.nrules = o->nrules,
		.stop = stop,
	};
	if (s3_client_new(&s->c, &s->client)) {
		rdx_error("out of memory");
		s3_config_release(&s->cfg);
		return RDX_EXIT_FAIL;
	}
	return 0;
}

void s3_session_close(struct s3_session *s)
{
	uint64_t r = atomic_load(&s->rdma.rdma), h = atomic_load(&s->rdma.http);

	if (atomic_load(&s->rdma.opened) && (r || h))
		rdx_info(1, "%s: %" PRIu64 " bytes by RDMA, %" PRIu64 " by HTTP", s->cmd, r, h);
	s3_client_free(s->c);
	s3_config_release(&s->cfg);
}

/* The progress line's thread: redraws it every 100 ms. */
static void *progress_main(void *arg)
{
	struct s3_session *s = arg;
	struct rdx_progress p;
	struct timespec dl;

	rdx_progress_init(&p, true, false, 0);
	pthread_mutex_lock(&s->line.lock);
	while (!s->line.done) {
		uint64_t total = atomic_load(&s->total);

		if (total && !p.total_known) {
			p.total_known = true;
			p.total = total;
		}
		rdx_progress_update(&p, atomic_load(&s->moved));
		rdx_deadline_in(&dl, 100);
		pthread_cond_timedwait(&s->line.cond, &s->line.lock, &dl);
	}
	pthread_mutex_unlock(&s->line.lock);
	rdx_progress_end(&p);
	return NULL;
}

void s3_session_progress_begin(struct s3_session *s)
{
	if (!s->o.progress || s->o.quiet || !isatty(STDERR_FILENO))
		return;
	pthread_mutex_init(&s->line.lock, NULL);
	pthread_cond_init(&s->line.cond, NULL);
	s->line.done = false;
	s->line.on = pthread_create(&s->line.thread, NULL, progress_main, s) == 0;
	if (!s->line.on) {
		pthread_cond_destroy(&s->line.cond);
		pthread_mutex_destroy(&s->line.lock);
	}
}

void s3_session_progress_end(struct s3_session *s)
{
	if (!s->line.on)
		return;
	pthread_mutex_lock(&s->line.lock);
	s->line.done = true;
	pthread_cond_signal(&s->line.cond);
	pthread_mutex_unlock(&s->line.lock);
	pthread_join(s->line.thread, NULL);
	pthread_cond_destroy(&s->line.cond);
	pthread_mutex_destroy(&s->line.lock);
	s->line.on = false;
}

int s3_session_fail(struct s3_session *s, const char *what, int ret)
{
	const struct s3_error *e = s3_last_error(s->c);
	char msg[sizeof(e->message)];
	size_t n;

	/* S3's messages are sentences; ours end without a full stop. */
	snprintf(msg, sizeof(msg), "%s", e->message);
	n = strlen(msg);
	while (n && (msg[n - 1] == '.' || msg[n - 1] == ' ' || msg[n - 1] == '\n'))
		msg[--n] = '\0';
	if (ret == -RDX_EINTR || atomic_load(s->stop)) {
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

/* Parses "s3://BUCKET[/KEY]".  Bucket names are what S3 and the common
 * servers accept (letters, digits, '.', '-', '_'), so they are safe in a
 * Host header as in a path; keys are any bytes up to 1024. */
int s3_url_parse(const char *arg, struct s3_url *u)
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
		if (strlen(slash + 1) > S3_KEY_MAX) {
			rdx_error("'%s': keys are at most %d bytes", arg, S3_KEY_MAX);
			return -1;
		}
		strcpy(u->key, slash + 1);
	}
	return 0;
}

int s3_url_need_key(const char *arg, const struct s3_url *u)
{
	size_t n = strlen(u->key);

	if (!n || u->key[n - 1] == '/') {
		rdx_error("'%s' names no object (s3://BUCKET/KEY)", arg);
		return -1;
	}
	return 0;
}

/* A failed upload: the source's fault (exit 4) or S3's. */
static int put_fail(struct s3_session *s, const char *src, const char *what, int ret)
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
	return s3_session_fail(s, what, ret);
}

/* One PutObject of a whole file, hashed first. */
static int put_single(struct s3_session *s, const struct s3_url *u,
		      int fd, struct s3_object_info *info)
{
	struct s3_body_sum sum;
	struct stat st;
	uint64_t size = 0;
	int ret;

	ret = s3_local_hash(fd, PUT_MAX, s->stop, &size, &sum,
			    fstat(fd, &st) || !s3_rdma_wanted(s->c, (uint64_t)st.st_size));
	if (ret == -RDX_EINTR)
		return ret;
	if (ret) /* -EFBIG: the file grew past one part since fstat */
		return ret == -EFBIG ? -ENODATA : ret;
	return s3_put_object(s->c, u->bucket, u->key, fd, 0, size, &sum, info);
}

int s3_run_put(struct s3_session *s, const char *src, const char *url)
{
	struct s3_url u;
	struct s3_object_info info = { 0 };
	char what[S3_KEY_MAX + 300];
	uint64_t ps;
	struct stat st;
	int fd, ret;

	if (s3_url_parse(url, &u))
		return RDX_EXIT_USAGE;
	if (!u.key[0] || u.key[strlen(u.key) - 1] == '/') {
		if (!strcmp(src, "-") || strlen(u.key) + strlen(s3_last_part(src)) > S3_KEY_MAX ||
		    !*s3_last_part(src)) {
			rdx_error("'%s' names no object (s3://BUCKET/KEY)", url);
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
		atomic_store(&s->total, (uint64_t)st.st_size);
	if (!S_ISREG(st.st_mode)) {
		/* A pipe, FIFO or device: read in parts, memory bounded. */
		ret = s3_upload_stream(s->c, &s->xfer, u.bucket, u.key, fd, &info);
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
		ret = s3_upload_file(s->c, &xo, u.bucket, u.key, fd, (uint64_t)st.st_size,
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

int s3_run_get(struct s3_session *s, const char *url, const char *dst)
{
	struct s3_url u;
	struct s3_object_info info;
	struct s3_out o;
	char what[S3_KEY_MAX + 300];
	int ret;

	if (s3_url_parse(url, &u) || s3_url_need_key(url, &u))
		return RDX_EXIT_USAGE;
	snprintf(what, sizeof(what), "s3://%s/%s", u.bucket, u.key);
	if (!dst)
		dst = s3_last_part(u.key);
	if (s->o.resume && !strcmp(dst, "-")) {
		rdx_error("--resume needs a file to write, not stdout");
		return RDX_EXIT_USAGE;
	}
	ret = s->o.resume ? s3_out_open_resume(&o, dst, u.key, s->stop)
			: s3_out_open(&o, dst, u.key, s->stop);
	if (ret) {
		s3_out_abort(&o);
		rdx_error("cannot write '%s': %s", o.final[0] ? o.final : dst, strerror(-ret));
		return RDX_EXIT_IO;
	}
	ret = s->o.resume ? s3_download_resume(s->c, &s->xfer, u.bucket, u.key, &o, &info)
			: s3_download(s->c, &s->xfer, u.bucket, u.key, &o, &info);
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
		return s3_session_fail(s, what, ret);
	}
	rdx_info(1, "get %s: %llu bytes, ETag %s", what, (unsigned long long)info.size,
		 info.etag);
	return 0;
}

/* cp between two S3 URLs, server side (s3_copy: CopyObject, or
 * UploadPartCopy in parallel for more than a part). */
static int cp_s3(struct s3_session *s, const char *src, const char *dst)
{
	struct s3_url a, b;
	struct s3_object_info info;
	char what[2 * S3_KEY_MAX + 600];
	const char *last;
	int ret;

	if (s3_url_parse(src, &a) || s3_url_need_key(src, &a) || s3_url_parse(dst, &b))
		return RDX_EXIT_USAGE;
	if (!b.key[0] || b.key[strlen(b.key) - 1] == '/') {
		last = s3_last_part(a.key);
		if (strlen(b.key) + strlen(last) > S3_KEY_MAX) {
			rdx_error("'%s%s': keys are at most %d bytes", dst, last, S3_KEY_MAX);
			return RDX_EXIT_USAGE;
		}
		strcat(b.key, last);
	}
	snprintf(what, sizeof(what), "s3://%s/%s to s3://%s/%s", a.bucket, a.key,
		 b.bucket, b.key);
	ret = s3_copy(s->c, &s->xfer, a.bucket, a.key, b.bucket, b.key, &info);
	if (ret)
		return s3_session_fail(s, what, ret);
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
		if (s3_url_parse(arg, u))
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
int s3_run_sync(struct s3_session *s, const char *src, const char *dst, bool copy_all)
{
	static char pa[S3_KEY_MAX + 2], pb[S3_KEY_MAX + 2], da[PATH_MAX], db[PATH_MAX];
	struct s3_url ua, ub;
	struct s3_loc a, b;
	struct s3_sync_stats st;
	struct stat sb;
	int ret;

	if (copy_all && (s->o.del || s->o.checksum)) {
		rdx_error("--delete and --checksum are sync's, not cp -r's");
		return RDX_EXIT_USAGE;
	}
	if (sync_side(src, &ua, &a, pa, da) || sync_side(dst, &ub, &b, pb, db))
		return RDX_EXIT_USAGE;
	if (!a.is_s3 && !b.is_s3) {
		rdx_error("%s: neither '%s' nor '%s' is an S3 URL", s->cmd, src, dst);
		return RDX_EXIT_USAGE;
	}
	if (!a.is_s3 && (stat(a.dir, &sb) || !S_ISDIR(sb.st_mode))) {
		rdx_error("%s: '%s' is not a directory%s", s->cmd, src,
			  copy_all ? "" : " (rds3 put sends one file)");
		return RDX_EXIT_USAGE;
	}
	if (!b.is_s3 && !stat(b.dir, &sb) && !S_ISDIR(sb.st_mode)) {
		rdx_error("%s: '%s' is not a directory", s->cmd, dst);
		return RDX_EXIT_USAGE;
	}
	s->sync.copy_all = copy_all;
	ret = s3_sync(s->c, &s->sync, &a, &b, &st);
	rdx_info(1, "%s: %zu sent, %zu unchanged, %zu deleted, %zu failed, %zu refused",
		 s->cmd, st.transferred, st.unchanged, st.deleted, st.failed, st.refused);
	if (ret == -RDX_EINTR || atomic_load(s->stop)) {
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

int s3_run_cp(struct s3_session *s, const char *src, const char *dst)
{
	bool from = !strncmp(src, "s3://", 5), to = !strncmp(dst, "s3://", 5);

	if (s->o.recursive)
		return s3_run_sync(s, src, dst, true);
	if (from && to)
		return cp_s3(s, src, dst);
	if (to)
		return s3_run_put(s, src, dst);
	if (from)
		return s3_run_get(s, src, dst);
	rdx_error("cp: neither '%s' nor '%s' is an S3 URL (use cp(1) for local files)", src, dst);
	return RDX_EXIT_USAGE;
}
