/* What the multipart upload (multipart.c) and the ranged download
 * (ranged.c) share: their workers and how the main thread waits for them. */
#ifndef RDS3_MULTIPART_INT_H
#define RDS3_MULTIPART_INT_H

#include "multipart.h"

#include <pthread.h>
#include <signal.h>

#define S3_XFER_POLL_MS 100 /* how often a waiting main thread looks at stop */

/* Blocks SIGINT and SIGTERM (the old mask into old) for the threads made
 * while it is in force, so a signal interrupts the main thread's read()
 * and waits, never a worker's transfer halfway through a callback. */
void s3_xfer_block_signals(sigset_t *old);

/* pthread_cond_wait for at most S3_XFER_POLL_MS, so the caller can look at
 * its stop flag, which a signal handler cannot broadcast. */
void s3_xfer_wait(pthread_cond_t *cond, pthread_mutex_t *lock);

/* A worker's own client (own libcurl handle), stopping on cancel rather
 * than on the signal flag.  Returns 0 or -ENOMEM. */
int s3_xfer_client(struct s3_client **c, const struct s3_xfer_opts *o,
		   const atomic_int *cancel);

#endif
