/* The parallel multipart upload (see multipart.h for the ladder) and what
 * it shares with the ranged download in ranged.c (multipart_int.h). */
#include "s3/multipart.h"
#include "s3/multipart_int.h"

#include "core/hex.h"
#include "core/err.h"
#include "core/io.h"
#include "core/log.h"
#include "core/units.h"
#include "s3/http.h"
#include "s3/s3_int.h"
#include "s3/sigv4.h"

#include <errno.h>
#include <inttypes.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int s3_part_size_for(uint64_t size, uint64_t want, uint64_t *out)
{
	uint64_t ps = want;

	if (size > S3_OBJECT_MAX)
		return -EFBIG;
	if ((size + ps - 1) / ps > S3_PARTS_MAX) {
		ps = (size + S3_PARTS_MAX - 1) / S3_PARTS_MAX;
		ps = (ps + (1u << 20) - 1) & ~(uint64_t)((1u << 20) - 1);
	}
	if (ps > S3_PART_MAX)
		return -EFBIG;
	*out = ps;
	return 0;
}

void s3_xfer_block_signals(sigset_t *old)
{
	sigset_t set;

	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &set, old);
}

void s3_xfer_wait(pthread_cond_t *cond, pthread_mutex_t *lock)
{
	struct timespec ts;

	rdx_deadline_in(&ts, S3_XFER_POLL_MS);
	pthread_cond_timedwait(cond, lock, &ts);
}

int s3_xfer_client(struct s3_client **c, const struct s3_xfer_opts *o,
			     const atomic_int *cancel)
{
	struct s3_client_opts co = *o->client;

	co.stop = cancel;
	return s3_client_new(c, &co);
}

/* Reads up to n bytes; fewer only at end of input.  A stop is
 * -RDX_EINTR. */
static ssize_t read_full(int fd, void *p, size_t n, const atomic_int *stop)
{
	ssize_t r = rdx_read_full(fd, p, n, stop);

	return r == -ECANCELED ? -RDX_EINTR : r;
}

/* Exactly n bytes at off: the file shrinking under us is -ENODATA. */
static int pread_full(int fd, void *p, size_t n, uint64_t off)
{
	ssize_t r = rdx_pread_full(fd, p, n, (off_t)off);

	if (r < 0)
		return (int)r;
	return (size_t)r < n ? -ENODATA : 0;
}

/* ------------------------------------------------------------- upload */

struct job {
	unsigned part; /* 1-based */
	char *buf;
	size_t len;
};

struct up {
	pthread_mutex_t lock;
	pthread_cond_t cond; /* broadcast on every change below */
	/* under lock */
	struct job *ready; /* ring of concurrency jobs */
	unsigned head, nready, cap;
	char **free_bufs;
	unsigned nfree;
	unsigned running; /* workers not yet finished */
	uint64_t bytes;	  /* handed out so far */
	bool done;	  /* the producer has handed out its last part */
	int err;	  /* the first failure */
	struct s3_error e;
	/* slot part-1: written by the worker that has the part, read after
	 * every worker is joined */
	char (*etags)[S3_ETAG_MAX];
	unsigned char (*md5)[16];
	atomic_int cancel; /* the workers' clients stop on it */
	const char *bucket, *key;
	char upload_id[S3_UPLOAD_ID_MAX];
	/* a copy's (s3_copy_multipart): the source, pinned by its ETag, and
	 * the next part to claim (under lock) */
	const char *src_bucket, *src_key, *src_etag;
	uint64_t src_size, part_size;
	unsigned next, nparts;
	bool unhashed; /* a part's ETag is no MD5: the object's is not checked */
};

struct up_worker {
	struct up *u;
	struct s3_client *c;
	pthread_t t;
};

/* Records the first failure (err, and e when S3 explained it) and stops
 * every transfer in flight.  Called with the lock held. */
static void up_fail(struct up *u, int err, const struct s3_error *e)
{
	if (!u->err) {
		u->err = err;
		if (e)
			u->e = *e;
	}
	atomic_store(&u->cancel, 1);
	pthread_cond_broadcast(&u->cond);
}

/* up_fail for part number part, which c failed: the message says which.
 * Called with the lock held. */
static void part_failed(struct up *u, struct s3_client *c, unsigned part, int ret)
{
	struct s3_error e = *s3_last_error(c);
	char msg[sizeof(e.message)];

	snprintf(msg, sizeof(msg), "%s", e.message);
	snprintf(e.message, sizeof(e.message), "part %u: %.480s", part, msg);
	up_fail(u, ret, &e);
}

/* The worker's end: one fewer running. */
static void *worker_done(struct up *u)
{
	pthread_mutex_lock(&u->lock);
	u->running--;
	pthread_cond_broadcast(&u->cond);
	pthread_mutex_unlock(&u->lock);
	return NULL;
}

static void *up_work(void *arg)
{
	struct up_worker *w = arg;
	struct up *u = w->u;
	struct s3_body_sum sum;
	struct job j;
	int ret;

	for (;;) {
		pthread_mutex_lock(&u->lock);
		while (!u->nready && !u->done && !u->err)
			pthread_cond_wait(&u->cond, &u->lock);
		if (u->err || !u->nready) {
			pthread_mutex_unlock(&u->lock);
			break;
		}
		j = u->ready[u->head];
		u->head = (u->head + 1) % u->cap;
		u->nready--;
		pthread_mutex_unlock(&u->lock);

		/* Both digests while the part is in memory: SHA-256 for the
		 * signature (not for RDMA, which signs no payload), MD5 for
		 * Content-MD5 and the final ETag. */
		if (s3_rdma_wanted(w->c, j.len))
			s3_body_sum_md5(j.buf, j.len, &sum);
		else
			s3_body_sum(j.buf, j.len, &sum);
		memcpy(u->md5[j.part - 1], sum.md5, 16);
		ret = s3_mpu_part(w->c, u->bucket, u->key, u->upload_id, j.part,
				  j.buf, j.len, &sum, u->etags[j.part - 1]);
		if (!ret)
			rdx_info(2, "part %u: %zu bytes, ETag %s", j.part,
				 j.len, u->etags[j.part - 1]);
		pthread_mutex_lock(&u->lock);
		if (ret)
			part_failed(u, w->c, j.part, ret);
		u->free_bufs[u->nfree++] = j.buf;
		pthread_cond_broadcast(&u->cond);
		pthread_mutex_unlock(&u->lock);
		if (ret)
			break;
	}
	return worker_done(u);
}

/* Where the parts come from: a file at offsets, or a stream in order (with
 * the byte read to learn that it had more than one part). */
struct source {
	int fd;
	bool stream;
	uint64_t size; /* file */
	int carry;     /* stream: a byte read ahead, or -1 */
	uint64_t part_size;
	const atomic_int *stop;
};

/* Fills buf with part number part; *len 0 at the end of a stream. */
static int read_part(struct source *s, unsigned part, char *buf, size_t *len)
{
	uint64_t off = (uint64_t)(part - 1) * s->part_size;
	size_t n = 0;
	ssize_t r;

	if (!s->stream) {
		*len = (size_t)(s->size - off < s->part_size ? s->size - off
							     : s->part_size);
		return pread_full(s->fd, buf, *len, off);
	}
	if (s->carry >= 0) {
		buf[n++] = (char)s->carry;
		s->carry = -1;
	}
	r = read_full(s->fd, buf + n, (size_t)s->part_size - n, s->stop);
	if (r < 0)
		return (int)r;
	*len = n + (size_t)r;
	return 0;
}

/* Hands parts first.. to the workers until the source ends or something
 * fails.  Returns the number of parts, or 0 after a failure (in u->err). */
static unsigned produce(struct up *u, struct source *s, unsigned first,
			char *first_buf, size_t first_len,
			const atomic_int *stop)
{
	unsigned part = first;
	char *buf = first_buf;
	size_t len = first_len;
	int ret;

	for (;;) {
		if (!s->stream &&
		    (uint64_t)(part - 1) * s->part_size >= s->size)
			return part - 1;
		if (!buf) {
			pthread_mutex_lock(&u->lock);
			while (!u->nfree && !u->err && !atomic_load(stop))
				s3_xfer_wait(&u->cond, &u->lock);
			if (!u->err && atomic_load(stop))
				up_fail(u, -RDX_EINTR, NULL);
			if (u->err) {
				pthread_mutex_unlock(&u->lock);
				return 0;
			}
			buf = u->free_bufs[--u->nfree];
			pthread_mutex_unlock(&u->lock);
			if ((ret = read_part(s, part, buf, &len)))
				goto fail;
			if (len && part > S3_PARTS_MAX) {
				ret = -EFBIG;
				goto fail;
			}
		}
		pthread_mutex_lock(&u->lock);
		if (!len) {
			u->free_bufs[u->nfree++] = buf;
			pthread_mutex_unlock(&u->lock);
			return part - 1;
		}
		u->ready[(u->head + u->nready) % u->cap] =
			(struct job){.part = part, .buf = buf, .len = len};
		u->nready++;
		u->bytes += len;
		pthread_cond_broadcast(&u->cond);
		pthread_mutex_unlock(&u->lock);
		part++;
		buf = NULL;
	}
fail:
	pthread_mutex_lock(&u->lock);
	u->free_bufs[u->nfree++] = buf;
	up_fail(u, ret, NULL);
	pthread_mutex_unlock(&u->lock);
	return 0;
}

/* S3's multipart ETag: the MD5 of the parts' MD5s, "-", their count. */
static int check_etag(struct s3_client *c, const struct up *u, unsigned n,
		      const char *etag)
{
	unsigned char d[16];
	unsigned int dl;
	char want[48], got[S3_ETAG_MAX];
	size_t len = strlen(etag);

	EVP_Digest(u->md5, (size_t)n * 16, d, &dl, EVP_md5(), NULL);
	rdx_hex_encode(d, 16, want);
	snprintf(want + 32, sizeof(want) - 32, "-%u", n);
	if (len >= 2 && etag[0] == '"' && etag[len - 1] == '"')
		snprintf(got, sizeof(got), "%.*s", (int)(len - 2), etag + 1);
	else
		snprintf(got, sizeof(got), "%s", etag);
	if (strlen(got) < 34 || got[32] != '-' || !rdx_hex_is(got, 32)) {
		rdx_info(1,
			 "ETag %s is not an MD5 of parts (encrypted?): not checked",
			 etag);
		return 0;
	}
	if (!strcmp(got, want))
		return 0;
	{
		struct s3_error e = {.attempts = 1};

		snprintf(e.message, sizeof(e.message),
			 "the object's ETag is %s, its parts make \"%s\"", etag,
			 want);
		s3_set_error(c, &e);
	}
	return -RDX_EINTEGRITY;
}

static void up_abort(const struct s3_xfer_opts *o, const struct up *u)
{
	struct s3_client_opts co = *o->client;
	struct s3_client *ac;
	int ret;

	/* Its own client: c's stops when the signal that brought us here
	 * is set, and the abort must still go out. */
	co.stop = NULL;
	if (s3_client_new(&ac, &co)) {
		rdx_warn("cannot abort the multipart upload %s: out of memory",
			 u->upload_id);
		return;
	}
	ret = s3_mpu_abort(ac, u->bucket, u->key, u->upload_id);
	if (ret)
		rdx_warn("cannot abort the multipart upload %s of s3://%s/%s: %s",
			 u->upload_id, u->bucket, u->key,
			 s3_last_error(ac)->code[0]
				 ? s3_last_error(ac)->code
				 : s3_last_error(ac)->message);
	else
		rdx_info(1, "aborted the multipart upload %s", u->upload_id);
	s3_client_free(ac);
}

/* Starts a thread fn(&w[i]) for each of the nw workers, with SIGINT and
 * SIGTERM blocked (they land on the caller).  Returns how many started. */
static unsigned start_workers(struct up *u, struct up_worker *w, unsigned nw,
			      void *(*fn)(void *))
{
	unsigned i, started = 0;
	sigset_t old;

	/* Counted before they start: one may be done (and count itself out)
	 * before the next is created. */
	pthread_mutex_lock(&u->lock);
	u->running = nw;
	pthread_mutex_unlock(&u->lock);
	s3_xfer_block_signals(&old);
	for (i = 0; i < nw; i++) {
		if (pthread_create(&w[i].t, NULL, fn, &w[i]))
			break;
		started++;
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_mutex_lock(&u->lock);
	u->running -= nw - started;
	pthread_cond_broadcast(&u->cond);
	pthread_mutex_unlock(&u->lock);
	return started;
}

/* Waits for the started workers, here rather than in pthread_join so
 * that a signal is seen (and stops them). */
static void wait_workers(struct up *u, const struct s3_xfer_opts *o,
			 struct up_worker *w, unsigned started)
{
	pthread_mutex_lock(&u->lock);
	while (u->running) {
		if (!u->err && atomic_load(o->stop))
			up_fail(u, -RDX_EINTR, NULL);
		s3_xfer_wait(&u->cond, &u->lock);
	}
	pthread_mutex_unlock(&u->lock);
	for (unsigned i = 0; i < started; i++)
		pthread_join(w[i].t, NULL);
}

/* After the workers: parts 1..n are in (CompleteMultipartUpload, and the
 * ETag S3 gives checked against the parts' MD5s), or the first failure is
 * c's error and the upload is aborted.  Returns 0 or that error. */
static int finish(struct s3_client *c, const struct s3_xfer_opts *o,
		  struct up *u, unsigned n, struct s3_object_info *info)
{
	char etag[S3_ETAG_MAX];
	bool md5_etag = true;
	int ret = u->err;

	if (!ret && atomic_load(o->stop))
		ret = -RDX_EINTR;
	if (ret) {
		if (ret == -RDX_EINTR) {
			struct s3_error e = {0};

			s3_set_error(c, &e);
		} else if (u->e.attempts || u->e.code[0] || u->e.message[0]) {
			s3_set_error(c, &u->e);
		}
		up_abort(o, u);
		return ret;
	}
	ret = s3_mpu_complete(c, u->bucket, u->key, u->upload_id,
			      (const char(*)[S3_ETAG_MAX])u->etags, n, etag,
			      &md5_etag);
	if (ret) {
		up_abort(o, u);
		return ret;
	}
	if (md5_etag && !u->unhashed)
		ret = check_etag(c, u, n, etag);
	else
		rdx_info(1, "ETag %s of an object encrypted with KMS or a customer key: not checked",
			 etag);
	if (info) {
		memset(info, 0, sizeof(*info));
		snprintf(info->etag, sizeof(info->etag), "%s", etag);
		info->size = u->bytes;
	}
	return ret;
}

/* A multipart upload's (or copy's) state for bucket/key; NULL when out
 * of memory.  up_release() frees it. */
static struct up *up_new(const char *bucket, const char *key)
{
	struct up *u = calloc(1, sizeof(*u));

	if (!u)
		return NULL;
	pthread_mutex_init(&u->lock, NULL);
	pthread_cond_init(&u->cond, NULL);
	u->bucket = bucket;
	u->key = key;
	return u;
}

/* The workers' clients, then CreateMultipartUpload with o's headers. */
static int up_begin(struct s3_client *c, const struct s3_xfer_opts *o,
		    struct up *u, struct up_worker *w, unsigned nw)
{
	int ret;

	for (unsigned i = 0; i < nw; i++) {
		w[i].u = u;
		if ((ret = s3_xfer_client(&w[i].c, o, &u->cancel)))
			return ret;
	}
	return s3_mpu_create(c, u->bucket, u->key, o->headers, o->nheaders, u->upload_id);
}

/* Frees the nw workers' clients, w, and u with its part tables. */
static void up_release(struct up *u, struct up_worker *w, unsigned nw)
{
	for (unsigned i = 0; w && i < nw; i++)
		s3_client_free(w[i].c);
	free(w);
	free(u->etags);
	free(u->md5);
	pthread_cond_destroy(&u->cond);
	pthread_mutex_destroy(&u->lock);
	free(u);
}

/* The multipart upload proper; part 1 may already be in first_buf. */
static int upload(struct s3_client *c, const struct s3_xfer_opts *o,
		  const char *bucket, const char *key, struct source *s,
		  char *first_buf, size_t first_len,
		  struct s3_object_info *info)
{
	unsigned nw = o->concurrency, i, started, n;
	struct up_worker *w = calloc(nw, sizeof(*w));
	struct up *u = up_new(bucket, key);
	char *own_first = first_len ? first_buf : NULL;
	int ret;

	if (!w || !u) {
		free(w);
		free(u);
		free(first_buf);
		return -ENOMEM;
	}
	u->cap = nw;
	u->ready = calloc(nw, sizeof(*u->ready));
	u->free_bufs = calloc(nw, sizeof(*u->free_bufs));
	u->etags = calloc(S3_PARTS_MAX, sizeof(*u->etags));
	u->md5 = calloc(S3_PARTS_MAX, sizeof(*u->md5));
	ret = -ENOMEM;
	if (!u->ready || !u->free_bufs || !u->etags || !u->md5)
		goto out_free;
	/* nw buffers in all, one of them a stream's part 1. */
	for (i = first_len ? 1 : 0; i < nw; i++) {
		if (!(u->free_bufs[u->nfree] = malloc((size_t)s->part_size)))
			goto out_free;
		u->nfree++;
	}
	if ((ret = up_begin(c, o, u, w, nw)))
		goto out_free;
	rdx_info(1,
		 "multipart upload %s: parts of %" PRIu64 " bytes, %u at a time",
		 u->upload_id, s->part_size, nw);
	if (!(started = start_workers(u, w, nw, up_work))) {
		ret = -EAGAIN;
		up_abort(o, u);
		goto out_free;
	}
	own_first = NULL; /* produce() hands it on */
	n = produce(u, s, 1, first_len ? first_buf : NULL, first_len, o->stop);
	pthread_mutex_lock(&u->lock);
	u->done = true;
	pthread_cond_broadcast(&u->cond);
	pthread_mutex_unlock(&u->lock);
	wait_workers(u, o, w, started);
	ret = finish(c, o, u, n, info);
out_free:
	/* Every buffer is free or in a job that no worker took after a
	 * failure. */
	for (i = 0; i < u->nfree; i++)
		free(u->free_bufs[i]);
	for (i = 0; i < u->nready; i++)
		free(u->ready[(u->head + i) % u->cap].buf);
	free(u->free_bufs);
	free(u->ready);
	free(own_first);
	up_release(u, w, nw);
	return ret;
}

/* --------------------------------------------------------------- copy */

/* A part's ETag as the 16 bytes of its MD5; false for another form. */
static bool etag_md5(const char *etag, unsigned char *md5)
{
	char hex[33];

	if (!s3_etag_md5(etag, hex))
		return false;
	for (int i = 0; i < 16; i++) {
		unsigned v;

		sscanf(hex + 2 * i, "%2x", &v); /* 32 hex digits, checked */
		md5[i] = (unsigned char)v;
	}
	return true;
}

static void *copy_work(void *arg)
{
	struct up_worker *w = arg;
	struct up *u = w->u;

	for (;;) {
		uint64_t first, last;
		unsigned part;
		int ret;

		pthread_mutex_lock(&u->lock);
		if (u->err || u->next > u->nparts) {
			pthread_mutex_unlock(&u->lock);
			break;
		}
		part = u->next++;
		pthread_mutex_unlock(&u->lock);
		first = (uint64_t)(part - 1) * u->part_size;
		last = (u->src_size - first < u->part_size ? u->src_size : first + u->part_size) - 1;
		ret = s3_mpu_part_copy(w->c, u->bucket, u->key, u->upload_id, part,
				       u->src_bucket, u->src_key, u->src_etag, first,
				       last, u->etags[part - 1]);
		pthread_mutex_lock(&u->lock);
		if (ret) {
			part_failed(u, w->c, part, ret);
		} else {
			rdx_info(2, "part %u: bytes %" PRIu64 "-%" PRIu64 " copied, ETag %s",
				 part, first, last, u->etags[part - 1]);
			if (!etag_md5(u->etags[part - 1], u->md5[part - 1]))
				u->unhashed = true;
			u->bytes += last - first + 1;
		}
		pthread_mutex_unlock(&u->lock);
		if (ret)
			break;
	}
	return worker_done(u);
}

int s3_copy_multipart(struct s3_client *c, const struct s3_xfer_opts *o,
		      const char *src_bucket, const char *src_key,
		      const struct s3_object_info *src, const char *bucket,
		      const char *key, struct s3_object_info *info)
{
	struct up *u = up_new(bucket, key);
	struct up_worker *w = NULL;
	unsigned nw = o->concurrency, started;
	int ret = -ENOMEM;

	if (!u)
		return -ENOMEM;
	u->src_bucket = src_bucket;
	u->src_key = src_key;
	u->src_etag = src->etag;
	u->src_size = src->size;
	u->next = 1;
	if ((ret = s3_part_size_for(src->size, o->part_size, &u->part_size)))
		goto out;
	u->nparts = (unsigned)((src->size + u->part_size - 1) / u->part_size);
	if (nw > u->nparts)
		nw = u->nparts;
	ret = -ENOMEM;
	w = calloc(nw, sizeof(*w));
	u->etags = calloc(u->nparts, sizeof(*u->etags));
	u->md5 = calloc(u->nparts, sizeof(*u->md5));
	if (!w || !u->etags || !u->md5)
		goto out;
	if ((ret = up_begin(c, o, u, w, nw)))
		goto out;
	rdx_info(1,
		 "multipart copy %s: %u parts of %" PRIu64 " bytes, %u at a time",
		 u->upload_id, u->nparts, u->part_size, nw);
	if (!(started = start_workers(u, w, nw, copy_work))) {
		ret = -EAGAIN;
		up_abort(o, u);
		goto out;
	}
	wait_workers(u, o, w, started);
	ret = finish(c, o, u, u->nparts, info);
out:
	up_release(u, w, nw);
	return ret;
}

#define CARRY_HEADERS_MAX 128

int s3_copy(struct s3_client *c, const struct s3_xfer_opts *o,
	    const char *src_bucket, const char *src_key, const char *bucket,
	    const char *key, struct s3_object_info *info)
{
	struct s3_kv h[CARRY_HEADERS_MAX];
	struct s3_xfer_opts xo = *o;
	struct s3_object_info src;
	char *line, *next, *sep, *buf = malloc(S3_HTTP_CARRY_MAX);
	int ret;

	if (!buf)
		return -ENOMEM;
	ret = s3_head_carry(c, src_bucket, src_key, &src, buf, S3_HTTP_CARRY_MAX);
	if (ret)
		goto out;
	if (src.size <= o->part_size) {
		/* One request does it, metadata and all. */
		ret = s3_copy_object(c, src_bucket, src_key, bucket, key, info);
		if (!ret && info)
			info->size = src.size;
		goto out;
	}
	xo.headers = h;
	xo.nheaders = 0;
	for (line = buf; *line; line = next) {
		next = strchr(line, '\n');
		*next++ = '\0';
		sep = strstr(line, ": ");
		if (!sep)
			continue;
		if (xo.nheaders == CARRY_HEADERS_MAX) {
			ret = s3_bad_response(c, -RDX_EPROTO, "MetadataTooLarge",
					      "more than %d headers to carry over",
					      CARRY_HEADERS_MAX);
			goto out;
		}
		*sep = '\0';
		h[xo.nheaders++] = (struct s3_kv){ line, sep + 2 };
	}
	ret = s3_copy_multipart(c, &xo, src_bucket, src_key, &src, bucket, key, info);
	if (ret == -RDX_EREMOTE && !strcmp(s3_last_error(c)->code, "NotImplemented") &&
	    src.size <= S3_PART_MAX) {
		/* A server without UploadPartCopy (the upload is aborted):
		 * what one CopyObject can do, it does. */
		rdx_info(1, "cp s3://%s/%s: no UploadPartCopy here: one CopyObject",
			 src_bucket, src_key);
		ret = s3_copy_object(c, src_bucket, src_key, bucket, key, info);
		if (!ret && info)
			info->size = src.size;
	}
out:
	free(buf);
	return ret;
}

int s3_upload_file(struct s3_client *c, const struct s3_xfer_opts *o,
		   const char *bucket, const char *key, int fd, uint64_t size,
		   struct s3_object_info *info)
{
	struct source s = {
		.fd = fd,
		.size = size,
		.carry = -1,
		.part_size = o->part_size,
		.stop = o->stop,
	};

	return upload(c, o, bucket, key, &s, NULL, 0, info);
}

int s3_upload_stream(struct s3_client *c, const struct s3_xfer_opts *o,
		     const char *bucket, const char *key, int fd,
		     struct s3_object_info *info)
{
	struct source s = {
		.fd = fd,
		.stream = true,
		.carry = -1,
		.part_size = o->part_size,
		.stop = o->stop,
	};
	struct s3_body_sum sum;
	char *buf = malloc((size_t)o->part_size);
	unsigned char peek;
	size_t len = 0;
	ssize_t r;
	int ret;

	if (!buf)
		return -ENOMEM;
	ret = read_part(&s, 1, buf, &len);
	if (ret)
		goto out;
	r = 0;
	if (len == o->part_size) {
		r = read_full(fd, &peek, 1, o->stop);
		if (r < 0) {
			ret = (int)r;
			goto out;
		}
	}
	if (!r) {
		/* It all fits one part: a single PutObject from memory. */
		if (s3_rdma_wanted(c, len))
			s3_body_sum_md5(buf, len, &sum);
		else
			s3_body_sum(buf, len, &sum);
		ret = s3_put_buffer(c, bucket, key, buf, len, &sum, info);
		goto out;
	}
	s.carry = peek;
	/* upload() owns buf from here; the last part's size is added in. */
	ret = upload(c, o, bucket, key, &s, buf, len, info);
	return ret;
out:
	free(buf);
	return ret;
}
