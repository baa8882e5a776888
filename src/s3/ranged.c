/* The parallel ranged download of s3_download() (see multipart.h): the
 * first range by the caller's client, the rest by workers with If-Match on
 * its ETag, into the file at their offsets or to stdout in order. */
#include "multipart.h"
#include "multipart_int.h"

#include "../core/err.h"
#include "../core/log.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* A range's bytes into the file at off (pwrite), at most len of them. */
struct file_sink {
	int fd;
	uint64_t off, len, pos;
	const atomic_int *stop;
};

static int file_write(void *ctx, const void *p, size_t n)
{
	struct file_sink *f = ctx;
	size_t done = 0;

	if (f->stop && atomic_load(f->stop))
		return -RDX_EINTR;
	if (n > f->len - f->pos)
		return -RDX_EINTEGRITY; /* more than the range holds */
	while (done < n) {
		ssize_t w = pwrite(f->fd, (const char *)p + done, n - done,
				   (off_t)(f->off + f->pos + done));

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -errno;
		done += (size_t)w;
	}
	f->pos += n;
	return 0;
}

static int file_rewind(void *ctx)
{
	((struct file_sink *)ctx)->pos = 0;
	return 0;
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

struct down {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	/* under lock */
	uint64_t next;	  /* next range to claim */
	uint64_t written; /* stdout: ranges written, in order */
	unsigned running;
	int err;
	struct s3_error e;
	atomic_int cancel;
	/* read-only while workers run */
	uint64_t total, part_size, nranges;
	char etag[S3_ETAG_MAX];
	struct s3_out *out;
	const char *bucket, *key;
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
	struct s3_range rg = {.start = idx * d->part_size, .if_match = d->etag};
	struct file_sink fs = {.fd = d->out->fd, .stop = &d->cancel};
	struct mem_sink ms = {.buf = w->buf};
	struct s3_sink sink;
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
	ret = s3_get_range(w->c, d->bucket, d->key, &sink, &rg);
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
	pthread_mutex_lock(&d->lock);
	d->written++;
	pthread_cond_broadcast(&d->cond);
	pthread_mutex_unlock(&d->lock);
	return 0;
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

	if (d->nranges - 1 < nw)
		nw = (unsigned)(d->nranges - 1);
	w = calloc(nw, sizeof(*w));
	if (!w)
		return -ENOMEM;
	for (i = 0; i < nw; i++) {
		w[i].d = d;
		if (d->out->is_stdout &&
		    !(w[i].buf = malloc((size_t)d->part_size)))
			goto out;
		if ((ret = s3_xfer_client(&w[i].c, o, &d->cancel)))
			goto out;
	}
	s3_xfer_block_signals(&old);
	for (i = 0; i < nw; i++) {
		if (pthread_create(&w[i].t, NULL, down_work, &w[i]))
			break;
		started++;
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_mutex_lock(&d->lock);
	d->running = started;
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

int s3_download(struct s3_client *c, const struct s3_xfer_opts *o,
		const char *bucket, const char *key, struct s3_out *out,
		struct s3_object_info *info)
{
	struct s3_range rg = {.start = 0, .len = o->part_size};
	struct file_sink fs = {
		.fd = out->fd, .len = UINT64_MAX, .stop = o->stop};
	struct s3_sink sink = {
		.write = file_write, .rewind = file_rewind, .ctx = &fs};
	struct down *d;
	struct stat st;
	int ret;

	if (out->is_stdout) /* what went out cannot be taken back */
		sink = (struct s3_sink){.write = s3_out_write, .ctx = out};
	ret = s3_get_range(c, bucket, key, &sink, &rg);
	if (ret == -RDX_EREMOTE && s3_last_error(c)->status == 416) {
		/* No byte 0: an empty object.  A plain GET says so. */
		sink = (struct s3_sink){.write = s3_out_write, .ctx = out};
		if (!out->is_stdout)
			sink.rewind = s3_out_rewind;
		return s3_get_object(c, bucket, key, &sink, info);
	}
	if (ret)
		return ret;
	if (info) {
		memset(info, 0, sizeof(*info));
		info->size = rg.total;
		snprintf(info->etag, sizeof(info->etag), "%s", rg.etag);
	}
	if (rg.whole || rg.total <= o->part_size)
		return 0;
	d = calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	pthread_mutex_init(&d->lock, NULL);
	pthread_cond_init(&d->cond, NULL);
	d->total = rg.total;
	d->part_size = o->part_size;
	d->nranges = (rg.total + o->part_size - 1) / o->part_size;
	d->next = d->written = 1;
	d->out = out;
	d->bucket = bucket;
	d->key = key;
	snprintf(d->etag, sizeof(d->etag), "%s", rg.etag);
	if (!d->etag[0])
		rdx_info(1,
			 "get s3://%s/%s: no ETag: a change between ranges would go unseen",
			 bucket, key);
	rdx_info(1,
		 "get s3://%s/%s: %" PRIu64 " bytes in %" PRIu64 " ranges, %u at a time",
		 bucket, key, d->total, d->nranges, o->concurrency);
	ret = download_rest(c, o, d);
	if (!ret && !out->is_stdout &&
	    (fstat(out->fd, &st) || (uint64_t)st.st_size != d->total)) {
		struct s3_error e = {.attempts = 1};

		snprintf(e.message, sizeof(e.message),
			 "the file has %lld bytes of %" PRIu64,
			 (long long)st.st_size, d->total);
		s3_set_error(c, &e);
		ret = -RDX_EINTEGRITY;
	}
	pthread_cond_destroy(&d->cond);
	pthread_mutex_destroy(&d->lock);
	free(d);
	return ret;
}
