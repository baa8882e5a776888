/* The parallel ranged download of s3_download() (see multipart.h): the
 * first range by the caller's client, the rest by workers with If-Match on
 * its ETag, into the file at their offsets or to stdout in order; then
 * what came is checked against the ETag (s3_check_download).  For
 * --resume the ranges may start past byte 0, and the bytes complete from
 * the start (ranges finish out of order) are recorded as they grow. */
#include "s3/multipart.h"
#include "s3/multipart_int.h"

#include "core/err.h"
#include "core/io.h"
#include "core/log.h"
#include "core/wpool.h"

#include <errno.h>
#include <inttypes.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* A range's bytes into the file at off, at most len of them.  With a
 * write pool (the file takes O_DIRECT), they are gathered into the pool's
 * aligned buffers, which its threads write through O_DIRECT while more
 * comes; what comes before the range's first block boundary, and the
 * unaligned rest at its end (file_finish), go through the page cache
 * here.  Without a pool, every write does. */
struct file_sink {
	struct s3_out *out;
	uint64_t off, len, pos;
	struct rdx_wpool *pool; /* or NULL */
	struct rdx_wtag tag;	/* this range's writes in the pool */
	char *stage;		/* the pool's buffer being filled, or NULL */
	size_t fill;		/* bytes in it, for the file from stage_off */
	uint64_t stage_off;
};

#define STAGE_BYTES ((size_t)4 << 20) /* the write pool's buffers */
#define WRITERS_MAX 8u			/* its threads */

/* The staged bytes (fill of them, all whole blocks) go to the pool. */
static void stage_out(struct file_sink *f)
{
	rdx_wpool_put(f->pool, f->stage, f->fill, f->stage_off, &f->tag);
	f->stage = NULL;
	f->fill = 0;
}

static int file_write(void *ctx, const void *p, size_t n)
{
	struct file_sink *f = ctx;
	const char *c = p;
	int ret;

	if (f->out->stop && atomic_load(f->out->stop))
		return -RDX_EINTR;
	if (n > f->len - f->pos)
		return -RDX_EINTEGRITY; /* more than the range holds */
	while (n) {
		uint64_t at = f->off + f->pos;
		size_t k = n;

		if (!f->pool || (!f->fill && at % RDX_DIO_ALIGN)) {
			/* No pool, or the head before a block boundary. */
			if (f->pool && k > RDX_DIO_ALIGN - at % RDX_DIO_ALIGN)
				k = RDX_DIO_ALIGN - at % RDX_DIO_ALIGN;
			if ((ret = s3_out_pwrite(f->out, c, k, at)))
				return ret;
		} else {
			size_t cap = rdx_wpool_size(f->pool);

			if (!f->stage)
				f->stage = rdx_wpool_get(f->pool);
			if (!f->fill)
				f->stage_off = at;
			if (k > cap - f->fill)
				k = cap - f->fill;
			memcpy(f->stage + f->fill, c, k);
			f->fill += k;
			if (f->fill == cap)
				stage_out(f);
		}
		f->pos += k;
		c += k;
		n -= k;
	}
	return 0;
}

/* No more bytes for this range (all in, or it failed): the staged whole
 * blocks go to the pool, the unaligned rest through the page cache, and
 * the range's writes are waited for.  Returns 0 or -errno. */
static int file_finish(struct file_sink *f)
{
	size_t whole = f->fill & ~(size_t)(RDX_DIO_ALIGN - 1);
	int ret = 0, wret;

	if (f->fill > whole)
		ret = s3_out_pwrite(f->out, f->stage + whole, f->fill - whole,
				    f->stage_off + whole);
	f->fill = whole;
	if (whole)
		stage_out(f);
	else if (f->stage)
		rdx_wpool_drop(f->pool, f->stage);
	f->stage = NULL;
	f->fill = 0;
	wret = f->pool ? rdx_wpool_wait(f->pool, &f->tag) : 0;
	return ret ? ret : wret;
}

/* A retry starts the range over: the writes of its first try land
 * before those of the second. */
static int file_rewind(void *ctx)
{
	struct file_sink *f = ctx;

	f->pos = 0;
	f->fill = 0;
	return f->pool ? rdx_wpool_wait(f->pool, &f->tag) : 0;
}

/* The page-cache policy for an object of size bytes (o->direct, counted
 * over the session's downloads), into out's writes from now on: its
 * first range is written, through the cache, before the size is known,
 * and leaves it after the fsync where the rest goes around it.  why gets
 * the plan in words.  Returns whether it goes around the cache. */
static bool plan_writes(const struct s3_xfer_opts *o, struct s3_out *out, uint64_t size,
			char *why, size_t len)
{
	struct rdx_wneed n = { .policy = o->direct, .size_known = true, .size = size,
			       .before = o->cached ? atomic_load(o->cached) : 0,
			       .avail = o->mem_avail };
	struct rdx_wplan p = rdx_wplan_choose(&n);

	s3_out_plan(out, &p);
	if (p.direct_from && o->cached)
		atomic_fetch_add(o->cached, size);
	rdx_wplan_say(&p, &n, why, len);
	return p.direct_from == 0;
}

/* A range's bytes into memory, for stdout, which takes them in order. */
struct mem_sink {
	char *buf;
	uint64_t cap, pos;
};

static int mem_write(void *ctx, const void *p, size_t n)
{
	struct mem_sink *m = ctx;

	if (n > m->cap - m->pos)
		return -RDX_EINTEGRITY;
	memcpy(m->buf + m->pos, p, n);
	m->pos += n;
	return 0;
}

static int mem_rewind(void *ctx)
{
	((struct mem_sink *)ctx)->pos = 0;
	return 0;
}

/* A sink that passes its bytes on and keeps their MD5: a range's, which
 * is a part's when the ranges are the parts (see plan_parts). */
struct md5_sink {
	const struct s3_sink *inner;
	EVP_MD_CTX *md;
};

static int md5_write(void *ctx, const void *p, size_t n)
{
	struct md5_sink *m = ctx;
	int ret = m->inner->write(m->inner->ctx, p, n);

	if (!ret)
		EVP_DigestUpdate(m->md, p, n);
	return ret;
}

static int md5_rewind(void *ctx)
{
	struct md5_sink *m = ctx;

	EVP_DigestInit_ex(m->md, EVP_md5(), NULL);
	return m->inner->rewind ? m->inner->rewind(m->inner->ctx) : -RDX_EPROTO;
}

/* inner, hashed into m (whose md is ready) when md is not NULL. */
static struct s3_sink md5_wrap(struct md5_sink *m, const struct s3_sink *inner)
{
	if (!m->md)
		return *inner;
	m->inner = inner;
	return (struct s3_sink){.write = md5_write,
				.rewind = inner->rewind ? md5_rewind : NULL,
				.ctx = m};
}

struct down {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	/* under lock */
	uint64_t next;	  /* next range to claim */
	uint64_t written; /* stdout: ranges written, in order */
	unsigned running;
	int err;
	struct s3_error e;
	unsigned char *done; /* resume: ranges complete */
	uint64_t prefix;     /* resume: ranges complete from the first */
	atomic_int cancel;
	/* stdout: the data's MD5 (NULL: not wanted), updated only by the
	 * range whose turn it is to write */
	EVP_MD_CTX *md;
	/* read-only while workers run */
	uint64_t base; /* the first range's offset (resume) */
	uint64_t total, part_size, nranges;
	char etag[S3_ETAG_MAX];
	struct s3_out *out;
	const char *bucket, *key;
	struct rdx_wpool *pool; /* a file that takes O_DIRECT, else NULL */
	/* The ranges are the object's parts: each range's MD5, set by the
	 * worker that has it, for the whole check (NULL: not made). */
	unsigned char (*part_md5)[16];
	/* stdout, when they are not: the parts' MD5s made from the stream,
	 * fed by the range whose turn it is to write (NULL: not made). */
	struct s3_parts_md5 *pm;
};

struct down_worker {
	struct down *d;
	struct s3_client *c;
	char *buf; /* stdout only */
	pthread_t t;
};

static void down_fail(struct down *d, int err, const struct s3_error *e)
{
	if (!d->err) {
		d->err = err;
		if (e)
			d->e = *e;
	}
	atomic_store(&d->cancel, 1);
	pthread_cond_broadcast(&d->cond);
}

/* One range into the file or, in its turn, to stdout. */
static int down_range(struct down_worker *w, uint64_t idx)
{
	struct down *d = w->d;
	struct s3_range rg = {.start = d->base + idx * d->part_size,
			      .if_match = d->etag};
	struct file_sink fs = {.out = d->out, .pool = d->pool};
	struct mem_sink ms = {.buf = w->buf};
	struct md5_sink ps = {.md = d->part_md5 ? EVP_MD_CTX_new() : NULL};
	struct s3_sink sink, hashed;
	unsigned int dl;
	int ret;

	rg.len = d->total - rg.start < d->part_size ? d->total - rg.start
						    : d->part_size;
	if (d->out->is_stdout) {
		ms.cap = rg.len;
		sink = (struct s3_sink){
			.write = mem_write, .rewind = mem_rewind, .ctx = &ms};
	} else {
		fs.off = rg.start;
		fs.len = rg.len;
		sink = (struct s3_sink){
			.write = file_write, .rewind = file_rewind, .ctx = &fs};
	}
	if (!d->etag[0])
		rg.if_match = NULL;
	if (d->part_md5 && (!ps.md || !EVP_DigestInit_ex(ps.md, EVP_md5(), NULL))) {
		EVP_MD_CTX_free(ps.md);
		return -ENOMEM;
	}
	hashed = md5_wrap(&ps, &sink);
	ret = s3_get_range(w->c, d->bucket, d->key, &hashed, &rg);
	if (!ret && ps.md)
		EVP_DigestFinal_ex(ps.md, d->part_md5[idx], &dl);
	EVP_MD_CTX_free(ps.md);
	if (!d->out->is_stdout) {
		int fret = file_finish(&fs); /* even after a failure: the pool's
						writes must not outlive fs */

		ret = ret ? ret : fret;
	}
	if (ret)
		return ret;
	if (rg.total != d->total || rg.got != rg.len) {
		struct s3_error e = {.attempts = 1};

		snprintf(e.message, sizeof(e.message),
			 "range at %" PRIu64 ": %" PRIu64 " of %" PRIu64
			 " bytes, object size %" PRIu64 " (was %" PRIu64 ")",
			 rg.start, rg.got, rg.len, rg.total, d->total);
		s3_set_error(w->c, &e);
		return -RDX_EINTEGRITY;
	}
	if (!d->out->is_stdout)
		return 0;
	pthread_mutex_lock(&d->lock);
	while (d->written != idx && !d->err)
		pthread_cond_wait(&d->cond, &d->lock);
	ret = d->err;
	pthread_mutex_unlock(&d->lock);
	if (ret)
		return ret;
	/* Only the range whose turn it is writes: no lock needed for it. */
	ret = s3_out_write(d->out, w->buf, (size_t)rg.len);
	if (ret)
		return ret;
	if (d->md)
		EVP_DigestUpdate(d->md, w->buf, (size_t)rg.len);
	if (d->pm)
		s3_parts_md5_feed(d->pm, w->buf, (size_t)rg.len);
	pthread_mutex_lock(&d->lock);
	d->written++;
	pthread_cond_broadcast(&d->cond);
	pthread_mutex_unlock(&d->lock);
	return 0;
}

/* Resume: range idx is in the file; when the ranges complete from the
 * first grow, the partial's record says so (after its data is synced). */
static int down_done(struct down *d, uint64_t idx)
{
	uint64_t was, have;
	int ret = 0;

	pthread_mutex_lock(&d->lock);
	d->done[idx] = 1;
	was = d->prefix;
	while (d->prefix < d->nranges && d->done[d->prefix])
		d->prefix++;
	if (d->prefix != was) {
		have = d->base + d->prefix * d->part_size;
		ret = s3_out_mark(d->out, have < d->total ? have : d->total);
	}
	pthread_mutex_unlock(&d->lock);
	return ret;
}

static void *down_work(void *arg)
{
	struct down_worker *w = arg;
	struct down *d = w->d;
	uint64_t idx;
	int ret;

	for (;;) {
		pthread_mutex_lock(&d->lock);
		if (d->err || d->next >= d->nranges) {
			pthread_mutex_unlock(&d->lock);
			break;
		}
		idx = d->next++;
		pthread_mutex_unlock(&d->lock);
		ret = down_range(w, idx);
		if (!ret && d->done)
			ret = down_done(d, idx);
		if (ret) {
			pthread_mutex_lock(&d->lock);
			down_fail(d, ret, s3_last_error(w->c));
			pthread_mutex_unlock(&d->lock);
			break;
		}
	}
	pthread_mutex_lock(&d->lock);
	d->running--;
	pthread_cond_broadcast(&d->cond);
	pthread_mutex_unlock(&d->lock);
	return NULL;
}

/* Ranges 1.. of an object whose range 0 is in. */
static int download_rest(struct s3_client *c, const struct s3_xfer_opts *o,
			 struct down *d)
{
	unsigned nw = o->concurrency, i, started = 0;
	struct down_worker *w;
	sigset_t old;
	int ret = -ENOMEM;

	if (d->nranges - d->next < nw) /* the first range may be to fetch again */
		nw = (unsigned)(d->nranges - d->next);
	w = calloc(nw, sizeof(*w));
	if (!w)
		return -ENOMEM;
	for (i = 0; i < nw; i++) {
		w[i].d = d;
		if (d->out->is_stdout &&
		    !(w[i].buf = malloc((size_t)d->part_size))) {
			ret = -ENOMEM;
			goto out;
		}
		if ((ret = s3_xfer_client(&w[i].c, o, &d->cancel)))
			goto out;
	}
	/* Counted before they start: one may be done (and count itself out)
	 * before the next is created. */
	pthread_mutex_lock(&d->lock);
	d->running = nw;
	pthread_mutex_unlock(&d->lock);
	s3_xfer_block_signals(&old);
	for (i = 0; i < nw; i++) {
		if (pthread_create(&w[i].t, NULL, down_work, &w[i]))
			break;
		started++;
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_mutex_lock(&d->lock);
	d->running -= nw - started;
	if (!started)
		down_fail(d, -EAGAIN, NULL);
	while (d->running) {
		if (!d->err && atomic_load(o->stop))
			down_fail(d, -RDX_EINTR, NULL);
		s3_xfer_wait(&d->cond, &d->lock);
	}
	pthread_mutex_unlock(&d->lock);
	for (i = 0; i < started; i++)
		pthread_join(w[i].t, NULL);
	ret = d->err;
	if (!ret && atomic_load(o->stop))
		ret = -RDX_EINTR;
	if (ret && ret != -RDX_EINTR && (d->e.code[0] || d->e.message[0]))
		s3_set_error(c, &d->e);
out:
	for (i = 0; i < nw; i++) {
		s3_client_free(w[i].c);
		free(w[i].buf);
	}
	free(w);
	return ret;
}


/* Stdout's first range: written out and hashed. */
struct md_out {
	struct s3_out *out;
	EVP_MD_CTX *md;
};

static int md_out_write(void *ctx, const void *p, size_t n)
{
	struct md_out *m = ctx;
	int ret = s3_out_write(m->out, p, n);

	if (!ret)
		EVP_DigestUpdate(m->md, p, n);
	return ret;
}

/* A multipart ETag ("MD5-N") is the MD5 of the parts' MD5s, which a
 * whole check can make from the data when the ranges are the parts.  They
 * are when N ranges of the part size make the size (rds3's and aws's
 * default, 8 MiB, for one); else HEAD ?partNumber=1 says the parts' size,
 * and a file's ranges start over with it (the first range is fetched
 * again), while stdout's parts are hashed from the stream in order
 * (stream_parts).  Returns the parts' size, or 0 when no whole check can
 * be made (*asked: the size came from the server). */
static uint64_t plan_parts(struct s3_client *c, const struct s3_xfer_opts *o,
			   const char *bucket, const char *key,
			   const struct s3_out *out, uint64_t total, unsigned n,
			   bool *asked)
{
	uint64_t p;
	unsigned count;

	*asked = false;
	(void)out;
	if ((total + o->part_size - 1) / o->part_size == n)
		return o->part_size;
	if (s3_head_part(c, bucket, key, 1, &p, &count) || count != n || !p ||
	    p > S3_PART_MAX || (total + p - 1) / p != n) {
		rdx_info(2, "get s3://%s/%s: the size of its %u parts is not known: "
			 "its ETag is checked for the part count only", bucket, key, n);
		return 0;
	}
	*asked = true;
	return p;
}

/* The whole check of a multipart object (see plan_parts): the n ranges'
 * MD5s make its ETag.  A mismatch with parts of an assumed size asks the
 * server for the real one first: only data that fails parts of the right
 * size is an error.  Returns 0 or -RDX_EINTEGRITY (the error filled). */
static int check_part_md5s(struct s3_client *c, const char *bucket, const char *key,
			   const char *etag, const unsigned char (*md5)[16], unsigned n,
			   uint64_t part_size, bool asked)
{
	char made[48];
	uint64_t p = 0;
	unsigned count = 0;

	if (s3_parts_etag_match(etag, md5, n, made, sizeof(made))) {
		rdx_info(1, "get s3://%s/%s: ETag %s checked: the MD5s of its %u parts",
			 bucket, key, etag, n);
		return 0;
	}
	if (!asked && !s3_head_part(c, bucket, key, 1, &p, &count) && count == n &&
	    p == part_size)
		asked = true;
	if (asked) {
		struct s3_error e = {.attempts = 1};

		snprintf(e.message, sizeof(e.message),
			 "the data's parts make the ETag %s, the object's is %s", made, etag);
		s3_set_error(c, &e);
		return -RDX_EINTEGRITY;
	}
	rdx_info(1, "get s3://%s/%s: ETag %s is not made by %u parts of %" PRIu64
		 " bytes, and the server does not say its parts' size: checked for the part count only",
		 bucket, key, etag, n, part_size);
	return 0;
}

/* A multipart object's file that its ranges could not check part by
 * part (a resumed download, one that came in its first range): read back
 * in parts, when their size is known (see plan_parts), and checked as
 * the ranges would have been; else for its part count. */
static int check_file_parts(struct s3_client *c, const struct s3_xfer_opts *o,
			    const char *bucket, const char *key, struct s3_out *out,
			    const struct s3_object_info *info, unsigned n)
{
	unsigned char (*md5)[16];
	bool asked;
	uint64_t p = plan_parts(c, o, bucket, key, out, info->size, n, &asked);
	int ret;

	if (!p)
		return s3_check_download(c, info, NULL);
	if (!(md5 = calloc(n, sizeof(*md5))))
		return -ENOMEM;
	ret = s3_fd_md5_parts(out->fd, s3_out_direct(out) ? out->dfd : -1, info->size,
			      p, o->stop, md5);
	if (!ret)
		ret = check_part_md5s(c, bucket, key, info->etag,
				      (const unsigned char (*)[16])md5, n, p, asked);
	else if (ret == -ENODATA)
		ret = -RDX_EINTEGRITY;
	free(md5);
	return ret;
}

/* Checks what came against the object's ETag (s3_check_download): the
 * file's size, and the MD5 of a single-part object's data, streamed for
 * stdout (md), hashed on the way in (file_md5) or read back for a file;
 * a multipart object's parts, read back unless the ranges dealt with
 * them (parts_checked: checked, or found that they cannot be). */
int s3_download_verify(struct s3_client *c, const struct s3_xfer_opts *o,
		       const char *bucket, const char *key, struct s3_out *out,
		       EVP_MD_CTX *md, const unsigned char *file_md5,
		       bool parts_checked, const struct s3_object_info *info)
{
	unsigned char d5[16];
	unsigned int dl;
	unsigned n;
	struct stat st;
	bool plain = !info->encrypted && s3_etag_of_data(info->etag);
	int ret;

	if (out->is_stdout) {
		if (!plain || !md)
			return s3_check_download(c, info, NULL);
		EVP_DigestFinal_ex(md, d5, &dl);
		return s3_check_download(c, info, d5);
	}
	if (fstat(out->fd, &st) || (uint64_t)st.st_size != info->size) {
		struct s3_error e = {.attempts = 1};

		snprintf(e.message, sizeof(e.message),
			 "the file has %lld bytes of %" PRIu64,
			 (long long)st.st_size, info->size);
		s3_set_error(c, &e);
		return -RDX_EINTEGRITY;
	}
	if (!info->encrypted && !parts_checked && s3_etag_parts(info->etag, &n) &&
	    n >= 2 && n <= S3_PARTS_MAX)
		return check_file_parts(c, o, bucket, key, out, info, n);
	if (!plain || file_md5)
		return s3_check_download(c, info, plain ? file_md5 : NULL);
	ret = s3_fd_md5(out->fd, s3_out_direct(out) ? out->dfd : -1, info->size,
			o->stop, d5);
	if (ret)
		return ret == -ENODATA ? -RDX_EINTEGRITY : ret;
	return s3_check_download(c, info, d5);
}

/* The first range again, for stream_parts: hashed in parts and whole. */
struct again {
	struct s3_parts_md5 *pm;
	EVP_MD_CTX *md;
};

static int again_write(void *ctx, const void *p, size_t n)
{
	struct again *a = ctx;

	s3_parts_md5_feed(a->pm, p, n);
	EVP_DigestUpdate(a->md, p, n);
	return 0;
}

static int again_rewind(void *ctx)
{
	struct again *a = ctx;

	s3_parts_md5_start(a->pm);
	return EVP_DigestInit_ex(a->md, EVP_md5(), NULL) ? 0 : -ENOMEM;
}

/* Stdout's parts when they are not its ranges: pm (its part size and
 * count set) is made ready to hash the rest of the stream in parts.  The
 * first range (first_len bytes) is out already: with parts that large or
 * larger, hashing goes on from its MD5's state (state0, taken); with
 * smaller ones it is fetched again and hashed in parts, and must be the
 * bytes that went out (md5_0).  Returns 0, -RDX_EINTEGRITY (the error
 * filled) or another error. */
static int stream_parts(struct s3_client *c, const char *bucket, const char *key,
			const char *etag, struct s3_parts_md5 *pm, EVP_MD_CTX *state0,
			uint64_t first_len, const unsigned char *md5_0)
{
	struct again a = {.pm = pm, .md = EVP_MD_CTX_new()};
	struct s3_sink sink = {.write = again_write, .rewind = again_rewind, .ctx = &a};
	struct s3_range rg = {.start = 0, .len = first_len, .if_match = etag[0] ? etag : NULL};
	unsigned char md5[16];
	unsigned int dl;
	int ret;

	if (pm->part >= first_len) {
		EVP_MD_CTX_free(a.md);
		s3_parts_md5_adopt(pm, state0, first_len);
		return 0;
	}
	EVP_MD_CTX_free(state0);
	if (!a.md || again_rewind(&a)) {
		EVP_MD_CTX_free(a.md);
		return -ENOMEM;
	}
	ret = s3_get_range(c, bucket, key, &sink, &rg);
	EVP_DigestFinal_ex(a.md, md5, &dl);
	EVP_MD_CTX_free(a.md);
	if (ret)
		return ret;
	if (rg.got != first_len || memcmp(md5, md5_0, sizeof(md5))) {
		struct s3_error e = {.attempts = 1};

		snprintf(e.message, sizeof(e.message),
			 "the first %" PRIu64 " bytes came back different when fetched again",
			 first_len);
		s3_set_error(c, &e);
		return -RDX_EINTEGRITY;
	}
	return 0;
}

/* What stdout's whole check of a multipart object may need (see
 * stream_parts), freed by fetch() whatever happens. */
struct stream_check {
	EVP_MD_CTX *state0; /* the first range's MD5, unfinished */
	struct s3_parts_md5 pm;
};

/* Sets sc->pm up for parts of part bytes, n of them.  Returns 0 or
 * -ENOMEM. */
static int stream_check_init(struct stream_check *sc, uint64_t part, unsigned n)
{
	sc->pm = (struct s3_parts_md5){.md = EVP_MD_CTX_new(), .part = part, .n = n,
				       .out = calloc(n, sizeof(*sc->pm.out))};
	if (!sc->pm.md || !sc->pm.out)
		return -ENOMEM;
	s3_parts_md5_start(&sc->pm);
	return 0;
}

/* One download: what it asks for, and what it found out for the check
 * that follows it (s3_download_verify). */
struct fetch_job {
	struct s3_client *c;
	const struct s3_xfer_opts *o;
	const char *bucket, *key;
	struct s3_out *out;
	uint64_t start;		/* where this run's data begins (--resume) */
	const char *if_match;	/* the ETag the object must keep, or NULL */
	EVP_MD_CTX *md;		/* stdout's MD5, or NULL */
	/* found out */
	unsigned char whole_md5[16]; /* the whole object's, when whole */
	bool whole;
	bool parts_checked;	/* each part's MD5 checked, or known impossible */
	struct s3_object_info info;
	struct stream_check sc; /* stdout's whole check of a multipart object */
};

/* The download proper (see fetch). */
static int fetch_ranges(struct fetch_job *f)
{
	struct s3_client *c = f->c;
	const struct s3_xfer_opts *o = f->o;
	const char *bucket = f->bucket, *key = f->key, *if_match = f->if_match;
	struct s3_out *out = f->out;
	uint64_t start = f->start;
	EVP_MD_CTX *md = f->md;
	unsigned char *whole_md5 = f->whole_md5;
	bool *whole = &f->whole, *parts_checked = &f->parts_checked;
	struct s3_object_info *info = &f->info;
	struct stream_check *sc = &f->sc;
	struct s3_range rg = {.start = start, .len = o->part_size,
			      .if_match = if_match};
	struct file_sink fs = {.out = out, .off = start, .len = UINT64_MAX};
	struct s3_sink sink = {
		.write = file_write, .rewind = file_rewind, .ctx = &fs};
	struct md_out mo = {.out = out, .md = md};
	/* The first range's MD5, for a whole check of a multipart object
	 * (not when resuming: the partial's old bytes are not hashed). */
	struct md5_sink m0 = {.md = start || out->resume ? NULL : EVP_MD_CTX_new()};
	unsigned char md5_0[16];
	struct s3_sink first;
	uint64_t ps = o->part_size;
	unsigned nparts = 0, n, dl;
	char why[256] = "";
	bool around = false; /* the plan: O_DIRECT */
	bool asked = false, hashed;
	struct down *d;
	int ret;

	memset(info, 0, sizeof(*info));
	if (out->is_stdout) /* what went out cannot be taken back */
		sink = (struct s3_sink){.write = md_out_write, .ctx = &mo};
	if (m0.md && !EVP_DigestInit_ex(m0.md, EVP_md5(), NULL)) {
		EVP_MD_CTX_free(m0.md);
		m0.md = NULL;
	}
	first = md5_wrap(&m0, &sink);
	ret = s3_get_range(c, bucket, key, &first, &rg);
	hashed = m0.md != NULL;
	if (hashed && out->is_stdout && !ret && (sc->state0 = EVP_MD_CTX_new()) &&
	    !EVP_MD_CTX_copy_ex(sc->state0, m0.md)) {
		EVP_MD_CTX_free(sc->state0);
		sc->state0 = NULL;
	}
	if (hashed)
		EVP_DigestFinal_ex(m0.md, md5_0, &dl);
	EVP_MD_CTX_free(m0.md);
	m0.md = NULL;
	if (ret == -RDX_EREMOTE && s3_last_error(c)->status == 416 && !start) {
		/* No byte 0: an empty object.  A plain GET says so. */
		if (out->is_stdout)
			sink.rewind = NULL;
		else
			sink = (struct s3_sink){.write = s3_out_write,
						.rewind = s3_out_rewind, .ctx = out};
		return s3_get_object(c, bucket, key, &sink, info);
	}
	if (ret)
		return ret;
	info->size = rg.total;
	info->encrypted = rg.encrypted;
	snprintf(info->etag, sizeof(info->etag), "%s", rg.etag);
	if (!out->is_stdout)
		around = plan_writes(o, out, rg.total, why, sizeof(why));
	if (rg.whole || rg.total <= start + o->part_size) {
		/* All of it came in the first range, hashed: a plain MD5 needs
		 * no reading back (a multipart one is read back in parts, by
		 * s3_download_verify). */
		if (hashed && !out->is_stdout) {
			memcpy(whole_md5, md5_0, 16);
			*whole = true;
		}
		return s3_out_mark(out, rg.total);
	}
	/* One part ("MD5-1") is the MD5 of the data's MD5: checked as a
	 * plain one is (s3_download_verify); two or more in parts. */
	if (hashed && !rg.encrypted && s3_etag_parts(rg.etag, &n) && n >= 2 &&
	    n <= S3_PARTS_MAX) {
		ps = plan_parts(c, o, bucket, key, out, rg.total, n, &asked);
		nparts = ps ? n : 0; /* no plan: the part count only */
		ps = ps ? ps : o->part_size;
		*parts_checked = true; /* here, or known to be impossible */
		if (nparts && out->is_stdout && ps != o->part_size &&
		    (sc->state0 || ps < rg.len)) {
			/* Stdout's ranges stay ours; the stream is hashed in
			 * the object's parts as it goes out. */
			EVP_MD_CTX *state0 = sc->state0;

			sc->state0 = NULL; /* stream_parts takes it */
			if ((ret = stream_check_init(sc, ps, n))) {
				EVP_MD_CTX_free(state0);
				return ret;
			}
			ret = stream_parts(c, bucket, key, rg.etag, &sc->pm, state0, rg.len, md5_0);
			if (ret)
				return ret;
			nparts = 0;
			ps = o->part_size;
		} else if (out->is_stdout && ps != o->part_size) {
			nparts = 0; /* out of memory: the part count only */
			ps = o->part_size;
		}
	}
	/* The rest lands in place, written in parallel: room for it now
	 * (and a full disk said now rather than midway). */
	if ((ret = s3_out_reserve(out, rg.total)))
		return ret;
	d = calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	pthread_mutex_init(&d->lock, NULL);
	pthread_cond_init(&d->cond, NULL);
	d->base = start;
	d->total = rg.total;
	d->part_size = ps;
	d->nranges = (rg.total - start + ps - 1) / ps;
	/* Parts of another size than ours: the first is fetched again. */
	d->next = d->written = ps == o->part_size ? 1 : 0;
	d->out = out;
	d->bucket = bucket;
	d->key = key;
	/* The rest of a single-part object's data is hashed for stdout too
	 * (a plain ETag, or "MD5-1"); a multipart ETag's MD5 is not the
	 * data's. */
	if (md && !rg.encrypted && s3_etag_of_data(rg.etag))
		d->md = md;
	if (out->resume) {
		ret = -ENOMEM;
		if (!(d->done = calloc(d->nranges, 1)))
			goto out;
		d->done[0] = 1;
		d->prefix = 1;
		if ((ret = s3_out_mark(out, start + o->part_size)))
			goto out;
	}
	if (sc->pm.out)
		d->pm = &sc->pm;
	if (nparts) {
		ret = -ENOMEM;
		if (!(d->part_md5 = calloc(d->nranges, sizeof(*d->part_md5))))
			goto out;
		memcpy(d->part_md5[0], md5_0, 16); /* again if fetched again */
	}
	snprintf(d->etag, sizeof(d->etag), "%s", rg.etag);
	if (!d->etag[0])
		rdx_info(1,
			 "get s3://%s/%s: no ETag: a change between ranges would go unseen",
			 bucket, key);
	if (!out->is_stdout && s3_out_direct(out)) {
		unsigned nt = o->concurrency < WRITERS_MAX ? o->concurrency : WRITERS_MAX;

		/* Each range worker fills one buffer while the rest queue. */
		ret = rdx_wpool_new(&d->pool, nt, o->concurrency + nt, STAGE_BYTES, &out->w);
		if (ret)
			goto out;
	}
	rdx_info(1, "get s3://%s/%s: %" PRIu64 " bytes in %" PRIu64 " ranges, %u at a time%s%s%s",
		 bucket, key, d->total - start, d->nranges, o->concurrency,
		 out->is_stdout ? "" : ", written: ", out->is_stdout ? "" : why,
		 around && !d->pool ? ", which the file system refuses: through the page cache"
				    : "");
	ret = download_rest(c, o, d);
	if (!ret && d->part_md5)
		ret = check_part_md5s(c, bucket, key, d->etag,
				      (const unsigned char (*)[16])d->part_md5,
				      (unsigned)d->nranges, ps, asked);
	if (!ret && d->pm) {
		s3_parts_md5_end(d->pm);
		ret = check_part_md5s(c, bucket, key, d->etag,
				      (const unsigned char (*)[16])d->pm->out, d->pm->n,
				      d->pm->part, true);
	}
out:
	rdx_wpool_free(d->pool);
	free(d->part_md5);
	free(d->done);
	pthread_cond_destroy(&d->cond);
	pthread_mutex_destroy(&d->lock);
	free(d);
	return ret;
}

/* The download proper (see s3_download_at): fetch_ranges, and what its
 * stream check holds freed whatever happened. */
static int fetch(struct fetch_job *f)
{
	int ret = fetch_ranges(f);

	EVP_MD_CTX_free(f->sc.state0);
	EVP_MD_CTX_free(f->sc.pm.md);
	free(f->sc.pm.out);
	return ret;
}

int s3_download_at(struct s3_client *c, const struct s3_xfer_opts *o,
		   const char *bucket, const char *key, struct s3_out *out,
		   uint64_t start, const char *if_match,
		   struct s3_object_info *info)
{
	struct fetch_job f = { .c = c, .o = o, .bucket = bucket, .key = key, .out = out,
			       .start = start, .if_match = if_match };
	int ret;

	if (out->is_stdout) {
		f.md = EVP_MD_CTX_new();
		if (!f.md || !EVP_DigestInit_ex(f.md, EVP_md5(), NULL)) {
			EVP_MD_CTX_free(f.md);
			return -ENOMEM;
		}
	}
	ret = fetch(&f);
	if (!ret)
		ret = s3_download_verify(c, o, bucket, key, out, f.md,
					 f.whole ? f.whole_md5 : NULL, f.parts_checked, &f.info);
	if (info)
		*info = f.info;
	EVP_MD_CTX_free(f.md);
	return ret;
}

int s3_download(struct s3_client *c, const struct s3_xfer_opts *o,
		const char *bucket, const char *key, struct s3_out *out,
		struct s3_object_info *info)
{
	return s3_download_at(c, o, bucket, key, out, 0, NULL, info);
}
