/* A pool of workers across objects: many small objects are put, got,
 * copied or deleted at once.  Each worker is a thread with its own S3
 * client, so its own libcurl handle and kept-alive connection; workers
 * take the next job index from a shared counter until none is left or
 * the stop flag is set.  Memory is jobs clients, whatever the count. */
#ifndef RDS3_POOL_H
#define RDS3_POOL_H

#include "s3/s3.h"

#include <stddef.h>

#define S3_JOBS_MAX 64u

/* Calls fn(ctx, c, i) once for each i in 0..n, on min(jobs, n) workers
 * (1..S3_JOBS_MAX), c being the calling worker's client made from co
 * (which must outlive the call; its stop flag ends the run early).  fn
 * runs concurrently with itself and reports its own failures through
 * ctx; SIGINT and SIGTERM are blocked in the workers, so they land on
 * the calling thread.  Returns 0 once every started worker is done, or
 * -ENOMEM / -EAGAIN when not one worker could start. */
int s3_pool_run(const struct s3_client_opts *co, unsigned jobs, size_t n,
		int (*fn)(void *ctx, struct s3_client *c, size_t i), void *ctx);

#endif
