/* Write-behind for one file (wpool.h): a queue of filled buffers, a list
 * of free ones, and writer threads between them, all under one lock. */
#include "core/wpool.h"

#include "core/direct.h"
#include "core/io.h"
#include "core/log.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>

/* A buffer: free, held by a producer, or queued as a write. */
struct wbuf {
	struct wbuf *next;
	void *data;
	size_t len;
	uint64_t off;
	struct rdx_wtag *tag;
};

struct rdx_wpool {
	pthread_mutex_t lock;
	pthread_cond_t work; /* a write queued, or the end */
	pthread_cond_t done; /* a buffer freed, a write finished */
	struct wbuf *free_list, *head, *tail;
	struct wbuf *bufs;
	unsigned nbufs, nthreads;
	pthread_t *threads;
	bool ending;
	size_t size;
	struct rdx_wfile *w;
};

static struct wbuf *buf_of(struct rdx_wpool *p, void *data)
{
	for (unsigned i = 0; i < p->nbufs; i++)
		if (p->bufs[i].data == data)
			return &p->bufs[i];
	abort(); /* not one of ours: a bug in the caller */
}

static void *writer_main(void *arg)
{
	struct rdx_wpool *p = arg;

	rdx_thread_name("rdx-wpool");
	pthread_mutex_lock(&p->lock);
	for (;;) {
		struct wbuf *b = p->head;
		int ret;

		if (!b) {
			if (p->ending)
				break;
			pthread_cond_wait(&p->work, &p->lock);
			continue;
		}
		p->head = b->next;
		if (!p->head)
			p->tail = NULL;
		pthread_mutex_unlock(&p->lock);
		ret = rdx_wfile_pwrite(p->w, b->data, b->len, b->off);
		pthread_mutex_lock(&p->lock);
		if (ret && !b->tag->err)
			b->tag->err = ret;
		b->tag->pending--;
		b->tag = NULL;
		b->next = p->free_list;
		p->free_list = b;
		pthread_cond_broadcast(&p->done);
	}
	pthread_mutex_unlock(&p->lock);
	return NULL;
}

int rdx_wpool_new(struct rdx_wpool **out, unsigned threads, unsigned bufs,
		  size_t size, struct rdx_wfile *w)
{
	struct rdx_wpool *p = calloc(1, sizeof(*p));
	sigset_t all, old;
	unsigned i;

	*out = NULL;
	if (!p)
		return -ENOMEM;
	pthread_mutex_init(&p->lock, NULL);
	pthread_cond_init(&p->work, NULL);
	pthread_cond_init(&p->done, NULL);
	p->size = size;
	p->w = w;
	p->bufs = calloc(bufs, sizeof(*p->bufs));
	p->threads = calloc(threads ? threads : 1, sizeof(*p->threads));
	if (!p->bufs || !p->threads)
		goto nomem;
	for (i = 0; i < bufs; i++) {
		if (!(p->bufs[i].data = aligned_alloc(RDX_DIO_ALIGN, size)))
			goto nomem;
		p->nbufs++;
		p->bufs[i].next = p->free_list;
		p->free_list = &p->bufs[i];
	}
	/* Signals stay with the threads that handle them. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	for (i = 0; i < (threads ? threads : 1); i++) {
		if (pthread_create(&p->threads[i], NULL, writer_main, p))
			break;
		p->nthreads++;
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (!p->nthreads) {
		rdx_wpool_free(p);
		return -EAGAIN;
	}
	*out = p;
	return 0;
nomem:
	rdx_wpool_free(p);
	return -ENOMEM;
}

size_t rdx_wpool_size(const struct rdx_wpool *p)
{
	return p->size;
}

void *rdx_wpool_get(struct rdx_wpool *p)
{
	struct wbuf *b;

	pthread_mutex_lock(&p->lock);
	while (!(b = p->free_list))
		pthread_cond_wait(&p->done, &p->lock);
	p->free_list = b->next;
	pthread_mutex_unlock(&p->lock);
	return b->data;
}

void rdx_wpool_put(struct rdx_wpool *p, void *data, size_t len, uint64_t off,
		   struct rdx_wtag *tag)
{
	struct wbuf *b = buf_of(p, data);

	b->len = len;
	b->off = off;
	b->tag = tag;
	b->next = NULL;
	pthread_mutex_lock(&p->lock);
	tag->pending++;
	if (p->tail)
		p->tail->next = b;
	else
		p->head = b;
	p->tail = b;
	pthread_cond_signal(&p->work);
	pthread_mutex_unlock(&p->lock);
}

void rdx_wpool_drop(struct rdx_wpool *p, void *data)
{
	struct wbuf *b = buf_of(p, data);

	pthread_mutex_lock(&p->lock);
	b->next = p->free_list;
	p->free_list = b;
	pthread_cond_broadcast(&p->done);
	pthread_mutex_unlock(&p->lock);
}

int rdx_wpool_wait(struct rdx_wpool *p, struct rdx_wtag *tag)
{
	int ret;

	pthread_mutex_lock(&p->lock);
	while (tag->pending)
		pthread_cond_wait(&p->done, &p->lock);
	ret = tag->err;
	tag->err = 0;
	pthread_mutex_unlock(&p->lock);
	return ret;
}

void rdx_wpool_free(struct rdx_wpool *p)
{
	if (!p)
		return;
	pthread_mutex_lock(&p->lock);
	p->ending = true;
	pthread_cond_broadcast(&p->work);
	pthread_mutex_unlock(&p->lock);
	for (unsigned i = 0; i < p->nthreads; i++)
		pthread_join(p->threads[i], NULL);
	for (unsigned i = 0; i < p->nbufs; i++)
		free(p->bufs[i].data);
	free(p->bufs);
	free(p->threads);
	pthread_cond_destroy(&p->done);
	pthread_cond_destroy(&p->work);
	pthread_mutex_destroy(&p->lock);
	free(p);
}
