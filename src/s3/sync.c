#include "s3/sync.h"

#include "core/err.h"
#include "core/log.h"
#include "s3/local.h"
#include "s3/pool.h"
#include "s3/s3_int.h"
#include "s3/sigv4.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define PUT_MAX	 ((uint64_t)5 << 30) /* one PutObject, one CopyObject */
#define KEY_MAX	 1024
#define PATH_BUF 8192
#define NAME_BUF (PATH_BUF + 300)

enum act { ACT_UPLOAD, ACT_DOWNLOAD, ACT_COPY, ACT_DEL_S3, ACT_DEL_LOCAL };

struct action {
	enum act kind;
	bool check; /* sizes equal: the worker decides (HEAD or MD5) */
	const struct s3_item *src; /* NULL for a delete */
	const struct s3_item *dst; /* NULL when the destination has none */
};

struct run {
	const struct s3_sync_opts *o;
	const struct s3_loc *src, *dst;
	struct action *cur; /* the pass the pool runs: deletes, then transfers */
	pthread_mutex_t lock; /* guards st and err */
	struct s3_sync_stats *st;
	int err;	     /* the first failure's code */
	pthread_mutex_t big; /* objects over one part go one at a time */
};

/* ------------------------------------------------------------ names */

/* "DIR/rel" or "s3://bucket/prefix/rel", for messages. */
static void loc_name(const struct s3_loc *l, const char *rel, char *out,
		     size_t n)
{
	if (l->is_s3)
		snprintf(out, n, "s3://%s/%s%s", l->bucket, l->prefix, rel);
	else
		snprintf(out, n, "%s/%s", l->dir, rel);
}

static int key_of(const struct s3_loc *l, const char *rel, char *key)
{
	size_t a = strlen(l->prefix), b = strlen(rel);

	if (a + b > KEY_MAX)
		return -ENAMETOOLONG;
	memcpy(key, l->prefix, a);
	memcpy(key + a, rel, b + 1);
	return 0;
}

static int path_of(const struct s3_loc *l, const char *rel, char *path)
{
	if ((size_t)snprintf(path, PATH_BUF, "%s/%s", l->dir, rel) >= PATH_BUF)
		return -ENAMETOOLONG;
	return 0;
}

/* --------------------------------------------------------- outcomes */

enum outcome { DONE, UNCHANGED, DELETED, REFUSED };

static void count(struct run *r, enum outcome what)
{
	pthread_mutex_lock(&r->lock);
	switch (what) {
	case DONE:
		r->st->transferred++;
		break;
	case UNCHANGED:
		r->st->unchanged++;
		break;
	case DELETED:
		r->st->deleted++;
		break;
	case REFUSED:
		r->st->refused++;
		break;
	}
	pthread_mutex_unlock(&r->lock);
}

static void failed(struct run *r, int ret)
{
	pthread_mutex_lock(&r->lock);
	r->st->failed++;
	if (!r->err)
		r->err = ret;
	pthread_mutex_unlock(&r->lock);
}

/* "rds3: upload d/a to s3://b/a: InvalidRequest: message", as rds3's
 * single-object commands say it. */
static void s3_failed(struct run *r, struct s3_client *c, const char *what,
		      int ret)
{
	const struct s3_error *e = s3_last_error(c);
	char msg[sizeof(e->message)];
	size_t n;

	snprintf(msg, sizeof(msg), "%s", e->message);
	n = strlen(msg);
	while (n &&
	       (msg[n - 1] == '.' || msg[n - 1] == ' ' || msg[n - 1] == '\n'))
		msg[--n] = '\0';
	/* Interrupted: the caller says so once, not once per worker. */
	if (ret == -RDX_EINTR) {
		failed(r, ret);
		return;
	}
	if (e->code[0])
		rdx_error("%s: %s: %s", what, e->code,
			  msg[0] ? msg : "(no message)");
	else if (msg[0])
		rdx_error("%s: %s: %s", what, rdx_strerror(ret), msg);
	else
		rdx_error("%s: %s", what, rdx_strerror(ret));
	failed(r, ret);
}

static void local_failed(struct run *r, const char *verb, const char *path,
			 int ret)
{
	rdx_error("cannot %s '%s': %s", verb, path, strerror(-ret));
	failed(r, ret);
}

/* An error of a transfer: the local file's (-errno) or S3's. */
static bool is_local(int ret)
{
	return ret < 0 && -ret < RDX_EBASE && ret != -ENOMEM && ret != -EAGAIN;
}

/* "(dryrun) upload: d/a to s3://b/a" on stdout, or the same at -v. */
static void say(struct run *r, const char *verb, const char *a, const char *b)
{
	if (r->o->dry_run) {
		flockfile(stdout);
		printf("(dryrun) %s: %s%s%s\n", verb, a, b ? " to " : "",
		       b ? b : "");
		funlockfile(stdout);
	} else {
		rdx_info(1, "%s: %s%s%s", verb, a, b ? " to " : "", b ? b : "");
	}
}

/* x-amz-meta-mtime as seconds; false when absent or not a number. */
static bool meta_mtime(const struct s3_client *c, int64_t *t)
{
	const char *s = c->resp.meta_mtime;
	char *end;
	long long v;

	if (!*s)
		return false;
	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno || *end || end == s)
		return false;
	*t = v;
	return true;
}

/* HEAD of bucket/key for its x-amz-meta-mtime: *has false without one;
 * a 404 (gone since the listing) is no error, *gone set. */
static int head_mtime(struct s3_client *c, const char *bucket, const char *key,
		      bool *gone, bool *has, int64_t *t)
{
	int ret = s3_head_object(c, bucket, key, NULL);

	*gone = *has = false;
	if (ret == -RDX_EREMOTE && s3_last_error(c)->status == 404) {
		*gone = true;
		return 0;
	}
	if (!ret)
		*has = meta_mtime(c, t);
	return ret;
}

/* --------------------------------------------------------- uploads */

/* One PutObject of a file within one part, hashed first (SHA-256 signed,
 * MD5 as Content-MD5 and checked against the ETag, as s3_put_object
 * does), with its mtime. */
static int put_small(struct run *r, struct s3_client *c, const char *key,
		     int fd, const struct s3_kv *meta)
{
	struct s3_body_sum sum;
	struct stat st;
	uint64_t size = 0;
	int ret = s3_local_hash(fd, PUT_MAX, r->o->stop, &size, &sum,
				fstat(fd, &st) || !s3_rdma_wanted(c, (uint64_t)st.st_size));

	if (ret)
		return ret == -EFBIG ? -ENODATA : ret;
	return s3_put_object_h(c, r->dst->bucket, key, fd, 0, size, &sum, meta, 1, NULL);
}

static int put_large(struct run *r, struct s3_client *c, const char *key,
		     int fd, uint64_t size, const struct s3_kv *meta)
{
	struct s3_xfer_opts xo = *r->o->xfer;
	uint64_t ps;
	int ret;

	if ((ret = s3_part_size_for(size, xo.part_size, &ps)))
		return ret;
	xo.part_size = ps;
	xo.headers = meta;
	xo.nheaders = 1;
	pthread_mutex_lock(&r->big);
	ret = s3_upload_file(c, &xo, r->dst->bucket, key, fd, size, NULL);
	pthread_mutex_unlock(&r->big);
	return ret;
}

/* Whether the file open as fd (st) is what the object already holds. */
static int upload_same(struct run *r, struct s3_client *c,
		       const struct action *a, int fd, const struct stat *st,
		       const char *key, bool *same)
{
	bool gone, has;
	int64_t t;
	int ret;

	if (r->o->checksum)
		return s3_sync_etag_match(fd, (uint64_t)st->st_size,
					  a->dst->etag, r->o->xfer->part_size,
					  r->o->stop, same);
	/* The plan saw a file not newer than the object: the same unless
	 * the object says it came from a file of another mtime. */
	ret = head_mtime(c, r->dst->bucket, key, &gone, &has, &t);
	*same = !ret && !gone && (!has || t == st->st_mtim.tv_sec);
	return ret;
}

static void do_upload(struct run *r, struct s3_client *c,
		      const struct action *a)
{
	const char *rel = a->src->rel;
	char path[PATH_BUF], key[KEY_MAX + 1], what[2 * NAME_BUF], to[NAME_BUF],
		mt[24];
	struct s3_kv meta = {"x-amz-meta-mtime", mt};
	struct stat st;
	bool same = false;
	int fd, ret;

	path_of(r->src, rel, path);
	loc_name(r->dst, rel, to, sizeof(to));
	snprintf(what, sizeof(what), "upload %s to %s", path, to);
	if (key_of(r->dst, rel, key)) {
		rdx_error("%s: keys are at most %d bytes", what, KEY_MAX);
		failed(r, -ENAMETOOLONG);
		return;
	}
	fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		local_failed(r, "read", path, -errno);
		return;
	}
	if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
		local_failed(r, "read", path,
			     S_ISREG(st.st_mode) ? -errno : -EINVAL);
		goto out;
	}
	if (a->check) {
		ret = upload_same(r, c, a, fd, &st, key, &same);
		if (ret && is_local(ret)) {
			local_failed(r, "read", path, ret);
			goto out;
		}
		if (ret) {
			s3_failed(r, c, what, ret);
			goto out;
		}
		if (same) {
			count(r, UNCHANGED);
			goto out;
		}
	}
	if (r->o->dry_run) {
		say(r, "upload", path, to);
		count(r, DONE);
		goto out;
	}
	if ((uint64_t)st.st_size > S3_OBJECT_MAX) {
		rdx_error("cannot upload '%s': larger than S3's 5 TiB", path);
		failed(r, -EFBIG);
		goto out;
	}
	snprintf(mt, sizeof(mt), "%lld", (long long)st.st_mtim.tv_sec);
	if ((uint64_t)st.st_size <= r->o->xfer->part_size)
		ret = put_small(r, c, key, fd, &meta);
	else
		ret = put_large(r, c, key, fd, (uint64_t)st.st_size, &meta);
	if (ret == -ENODATA || ret == -EFBIG) {
		rdx_error("cannot read '%s': the file changed during the "
			  "upload",
			  path);
		failed(r, -ENODATA);
	} else if (ret && is_local(ret)) {
		local_failed(r, "read", path, ret);
	} else if (ret) {
		s3_failed(r, c, what, ret);
	} else {
		say(r, "upload", path, to);
		count(r, DONE);
	}
out:
	close(fd);
}

/* ------------------------------------------------------- downloads */

static int download_same(struct run *r, struct s3_client *c,
			 const struct action *a, const char *path,
			 const char *key, bool *same)
{
	bool gone, has;
	int64_t t;
	int fd, ret;

	*same = false;
	if (r->o->checksum) {
		fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0)
			return -errno;
		ret = s3_sync_etag_match(fd, a->dst->size, a->src->etag,
					 r->o->xfer->part_size, r->o->stop,
					 same);
		close(fd);
		return ret;
	}
	ret = head_mtime(c, r->src->bucket, key, &gone, &has, &t);
	if (!ret && !gone)
		*same = has ? t == a->dst->mtime
			    : a->src->mtime <= a->dst->mtime;
	return ret;
}

/* The file's mtime after a download: the object's x-amz-meta-mtime, else
 * its Last-Modified, else the listing's. */
static int64_t got_mtime(const struct s3_client *c, const struct action *a)
{
	int64_t t;

	if (meta_mtime(c, &t))
		return t;
	t = s3_parse_time(c->resp.last_modified);
	return t >= 0 ? t : a->src->mtime;
}

static void do_download(struct run *r, struct s3_client *c,
			const struct action *a)
{
	const char *rel = a->src->rel;
	char path[PATH_BUF], key[KEY_MAX + 1], what[2 * NAME_BUF],
		from[NAME_BUF];
	struct timespec ts[2] = {{.tv_nsec = UTIME_OMIT}, {0}};
	struct s3_out out;
	bool same = false, big;
	int ret, dir = -1;

	loc_name(r->src, rel, from, sizeof(from));
	if (key_of(r->src, rel, key) || path_of(r->dst, rel, path)) {
		rdx_error("download %s: the name is too long", from);
		failed(r, -ENAMETOOLONG);
		return;
	}
	snprintf(what, sizeof(what), "download %s to %s", from, path);
	if (a->check) {
		ret = download_same(r, c, a, path, key, &same);
		if (ret && is_local(ret)) {
			local_failed(r, "read", path, ret);
			return;
		}
		if (ret) {
			s3_failed(r, c, what, ret);
			return;
		}
		if (same) {
			count(r, UNCHANGED);
			return;
		}
	}
	if (r->o->dry_run) {
		say(r, "download", from, path);
		count(r, DONE);
		return;
	}
	ret = s3_local_prepare(r->dst->dir, rel, &dir);
	if (ret == -ELOOP) {
		rdx_warn("skipping %s: '%s' would be written through a symlink",
			 from, path);
		count(r, REFUSED);
		return;
	}
	if (ret) {
		local_failed(r, "write", path, ret);
		return;
	}
	/* Into the directory just checked, not by its path again. */
	ret = s3_out_open_at(&out, dir, strrchr(rel, '/') ? strrchr(rel, '/') + 1 : rel,
			     r->o->stop);
	close(dir);
	if (ret) {
		s3_out_abort(&out);
		local_failed(r, "write", path, ret);
		return;
	}
	big = a->src->size > r->o->xfer->part_size;
	if (big)
		pthread_mutex_lock(&r->big);
	ret = s3_download(c, r->o->xfer, r->src->bucket, key, &out, NULL);
	if (big)
		pthread_mutex_unlock(&r->big);
	if (!ret) {
		ts[1].tv_sec = (time_t)got_mtime(c, a);
		if (futimens(out.fd, ts) || (ret = s3_out_publish(&out)) != 0) {
			ret = ret ? ret : -errno;
			s3_out_abort(&out);
			local_failed(r, "write", path, ret);
			return;
		}
		say(r, "download", from, path);
		count(r, DONE);
		return;
	}
	s3_out_abort(&out);
	if (ret != -RDX_EINTR && is_local(ret))
		local_failed(r, "write", path, ret);
	else
		s3_failed(r, c, what, ret);
}

/* ---------------------------------------------- copies and deletes */

static void do_copy(struct run *r, struct s3_client *c, const struct action *a)
{
	const char *rel = a->src->rel;
	char skey[KEY_MAX + 1], dkey[KEY_MAX + 1], from[NAME_BUF], to[NAME_BUF];
	char what[2 * NAME_BUF + 16];
	int ret;

	loc_name(r->src, rel, from, sizeof(from));
	loc_name(r->dst, rel, to, sizeof(to));
	snprintf(what, sizeof(what), "copy %s to %s", from, to);
	if (key_of(r->src, rel, skey) || key_of(r->dst, rel, dkey)) {
		rdx_error("%s: keys are at most %d bytes", what, KEY_MAX);
		failed(r, -ENAMETOOLONG);
		return;
	}
	if (r->o->dry_run) {
		say(r, "copy", from, to);
		count(r, DONE);
		return;
	}
	ret = s3_copy(c, r->o->xfer, r->src->bucket, skey, r->dst->bucket, dkey, NULL);
	if (ret) {
		s3_failed(r, c, what, ret);
		return;
	}
	say(r, "copy", from, to);
	count(r, DONE);
}

static void do_delete(struct run *r, struct s3_client *c,
		      const struct action *a)
{
	const char *rel = a->dst->rel;
	char name[NAME_BUF], key[KEY_MAX + 1], what[NAME_BUF + 16];
	int ret;

	loc_name(r->dst, rel, name, sizeof(name));
	if (r->o->dry_run) {
		say(r, "delete", name, NULL);
		count(r, DELETED);
		return;
	}
	if (a->kind == ACT_DEL_LOCAL) {
		ret = s3_local_unlink(r->dst->dir, rel);
		if (ret) {
			local_failed(r, "remove", name, ret);
			return;
		}
	} else {
		key_of(r->dst, rel, key); /* listed: it fits */
		ret = s3_delete_object(c, r->dst->bucket, key);
		if (ret) {
			snprintf(what, sizeof(what), "delete %s", name);
			s3_failed(r, c, what, ret);
			return;
		}
	}
	say(r, "delete", name, NULL);
	count(r, DELETED);
}

static int run_one(void *ctx, struct s3_client *c, size_t i)
{
	struct run *r = ctx;
	const struct action *a = &r->cur[i];

	switch (a->kind) {
	case ACT_UPLOAD:
		do_upload(r, c, a);
		break;
	case ACT_DOWNLOAD:
		do_download(r, c, a);
		break;
	case ACT_COPY:
		do_copy(r, c, a);
		break;
	default:
		do_delete(r, c, a);
		break;
	}
	return 0;
}

/* ------------------------------------------------------------- plan */

/* Whether the source item needs sending, a worker's check, or nothing. */
static int decide(const struct run *r, enum act kind, const struct s3_item *s,
		  const struct s3_item *d, bool *check)
{
	*check = false;
	if (r->o->copy_all || !d || s->size != d->size)
		return 1;
	if (r->o->checksum) {
		if (kind == ACT_COPY)
			return !s->etag || !d->etag || strcmp(s->etag, d->etag);
		*check = true;
		return 1;
	}
	switch (kind) {
	case ACT_UPLOAD: /* newer than the object: sent; else ask its mtime */
		*check = s->mtime <= d->mtime;
		return 1;
	case ACT_DOWNLOAD:
		*check = true;
		return 1;
	default:
		return d->mtime < s->mtime;
	}
}

static int plan(struct run *r, const struct s3_tree *s, const struct s3_tree *d,
		struct action *xfers, size_t *nx, struct action *dels,
		size_t *nd)
{
	enum act kind = !r->src->is_s3	? ACT_UPLOAD
			: r->dst->is_s3 ? ACT_COPY
					: ACT_DOWNLOAD;
	char name[NAME_BUF];
	const char *why;
	size_t i;

	*nx = *nd = 0;
	for (i = 0; i < s->n; i++) {
		const struct s3_item *it = &s->v[i];
		const struct s3_item *o;
		bool check;

		if (kind == ACT_DOWNLOAD && !s3_rel_path_ok(it->rel, &why)) {
			loc_name(r->src, it->rel, name, sizeof(name));
			rdx_warn("skipping %s: %s", name, why);
			r->st->refused++;
			continue;
		}
		o = s3_tree_find(d, it->rel);
		if (!decide(r, kind, it, o, &check)) {
			r->st->unchanged++;
			continue;
		}
		xfers[(*nx)++] = (struct action){
			.kind = kind, .check = check, .src = it, .dst = o};
	}
	if (!r->o->del)
		return 0;
	for (i = 0; i < d->n; i++)
		if (!s3_tree_find(s, d->v[i].rel))
			dels[(*nd)++] = (struct action){
				.kind = r->dst->is_s3 ? ACT_DEL_S3
						      : ACT_DEL_LOCAL,
				.dst = &d->v[i],
			};
	return 0;
}

/* ------------------------------------------------------------- lists */

static int list_side(struct s3_client *c, const struct s3_sync_opts *o,
		     const struct s3_loc *l, bool is_dst, bool other_local,
		     struct s3_tree *t, size_t *unreadable)
{
	char what[NAME_BUF];
	const struct s3_error *e;
	int ret;

	if (l->is_s3) {
		/* Folder markers ("dir/") have no file to become. */
		ret = s3_walk_remote(c, l->bucket, l->prefix, o->rules,
				     o->nrules, !other_local, t);
		if (!ret)
			return 0;
		e = s3_last_error(c);
		snprintf(what, sizeof(what), "s3://%s/%s", l->bucket,
			 l->prefix);
		if (e->code[0])
			rdx_error("ls %s: %s: %s", what, e->code, e->message);
		else
			rdx_error("ls %s: %s", what, rdx_strerror(ret));
		return ret;
	}
	ret = s3_walk_local(l->dir, o->rules, o->nrules, t, unreadable);
	if (ret == -ENOENT && is_dst)
		return 0; /* made when the first file comes */
	if (ret)
		rdx_error("cannot read '%s': %s", l->dir, strerror(-ret));
	return ret;
}

/* mkdir -p of a download's destination directory. */
static int make_root(const char *dir)
{
	char p[PATH_BUF];
	size_t i, n = strlen(dir);

	if (n >= sizeof(p))
		return -ENAMETOOLONG;
	memcpy(p, dir, n + 1);
	for (i = 1; i <= n; i++) {
		if (p[i] != '/' && p[i] != '\0')
			continue;
		p[i] = '\0';
		if (mkdir(p, 0777) && errno != EEXIST)
			return -errno;
		p[i] = i < n ? '/' : '\0';
	}
	return 0;
}

int s3_sync(struct s3_client *c, const struct s3_sync_opts *o,
	    const struct s3_loc *src, const struct s3_loc *dst,
	    struct s3_sync_stats *st)
{
	struct s3_tree s = {0}, d = {0};
	struct action *xfers = NULL, *dels = NULL;
	struct run r = {.o = o, .src = src, .dst = dst, .st = st};
	size_t nx = 0, nd = 0, src_bad = 0, dst_bad = 0;
	int ret;

	memset(st, 0, sizeof(*st));
	pthread_mutex_init(&r.lock, NULL);
	pthread_mutex_init(&r.big, NULL);
	ret = list_side(c, o, src, false, !dst->is_s3, &s, &src_bad);
	/* cp -r without --delete needs nothing from the destination. */
	if (!ret && !(o->copy_all && !o->del))
		ret = list_side(c, o, dst, true, !src->is_s3, &d, &dst_bad);
	if (ret)
		goto out;
	/* Unreadable directories fail like objects; the rest goes on. */
	st->failed = src_bad + dst_bad;
	if (st->failed)
		r.err = -EIO;
	xfers = calloc(s.n + 1, sizeof(*xfers));
	dels = calloc(d.n + 1, sizeof(*dels));
	if (!xfers || !dels) {
		ret = -ENOMEM;
		rdx_error("out of memory");
		goto out;
	}
	plan(&r, &s, &d, xfers, &nx, dels, &nd);
	if (nd && src_bad) {
		/* What could not be read is not known to be gone. */
		rdx_warn("not deleting anything: part of '%s' could not be "
			 "read",
			 src->dir);
		nd = 0;
	}
	rdx_info(1,
		 "%zu to send or check, %zu unchanged, %zu to delete, %u at a "
		 "time",
		 nx, st->unchanged, nd, o->jobs);
	if (!o->dry_run && !dst->is_s3 && nx && (ret = make_root(dst->dir))) {
		rdx_error("cannot make '%s': %s", dst->dir, strerror(-ret));
		goto out;
	}
	r.cur = dels;
	ret = s3_pool_run(o->client, o->jobs, nd, run_one, &r);
	if (!ret) {
		r.cur = xfers;
		ret = s3_pool_run(o->client, o->jobs, nx, run_one, &r);
	}
	if (ret) {
		rdx_error("cannot start workers: %s", strerror(-ret));
		goto out;
	}
	ret = r.err;
	if (o->stop && atomic_load(o->stop))
		ret = -RDX_EINTR;
out:
	free(xfers);
	free(dels);
	s3_tree_release(&s);
	s3_tree_release(&d);
	pthread_mutex_destroy(&r.lock);
	pthread_mutex_destroy(&r.big);
	return ret;
}
