#include "s3/pool.h"

#include "s3/multipart_int.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

struct pool {
	const struct s3_client_opts *co;
	size_t n;
	atomic_size_t next; /* the next job index; taken with fetch_add */
	int (*fn)(void *ctx, struct s3_client *c, size_t i);
	void *ctx;
};

struct worker {
	struct pool *p;
	struct s3_client *c; /* this worker's only */
	pthread_t t;
};

static void *work(void *arg)
{
	struct worker *w = arg;
	struct pool *p = w->p;

	for (;;) {
		size_t i = atomic_fetch_add(&p->next, 1);

		if (i >= p->n || (p->co->stop && atomic_load(p->co->stop)))
			break;
		p->fn(p->ctx, w->c, i);
	}
	return NULL;
}

int s3_pool_run(const struct s3_client_opts *co, unsigned jobs, size_t n,
		int (*fn)(void *ctx, struct s3_client *c, size_t i), void *ctx)
{
	struct pool p = {.co = co, .n = n, .fn = fn, .ctx = ctx};
	struct worker *w;
	unsigned nw, i, started = 0;
	sigset_t old;
	int ret = 0;

	if (!n)
		return 0;
	if (jobs < 1)
		jobs = 1;
	if (jobs > S3_JOBS_MAX)
		jobs = S3_JOBS_MAX;
	nw = n < jobs ? (unsigned)n : jobs;
	atomic_init(&p.next, 0);
	w = calloc(nw, sizeof(*w));
	if (!w)
		return -ENOMEM;
	for (i = 0; i < nw; i++) {
		w[i].p = &p;
		if ((ret = s3_client_new(&w[i].c, co)))
			goto out;
	}
	s3_xfer_block_signals(&old);
	for (i = 0; i < nw; i++) {
		if (pthread_create(&w[i].t, NULL, work, &w[i]))
			break;
		started++;
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	/* The signal handler only sets the stop flag, which the workers'
	 * clients watch: joining cannot hang past the transfers in flight. */
	for (i = 0; i < started; i++)
		pthread_join(w[i].t, NULL);
	if (!started)
		ret = -EAGAIN;
out:
	for (i = 0; i < nw; i++)
		s3_client_free(w[i].c);
	free(w);
	return ret;
}
