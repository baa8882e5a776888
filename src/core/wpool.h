/* Write-behind for one file: writer threads that put aligned buffers at
 * their offsets (O_DIRECT where the file's plan has it and the file takes
 * it, see rdx_wfile_pwrite), so that whoever fills the buffers (a network
 * receiver) goes on while the disk writes.  The buffers are the pool's,
 * a fixed number of a fixed size: memory is bufs x size whatever the
 * file's size, and a producer that gets ahead of the disk waits for a
 * free one.
 *
 * A producer counts its writes on a tag of its own, and waits for them
 * with rdx_wpool_wait() before it calls its part of the file done (or
 * writes the same bytes again). */
#ifndef RDX_WPOOL_H
#define RDX_WPOOL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct rdx_wpool;
struct rdx_wfile;

/* One producer's writes in flight; zero-initialise.  Only the pool
 * touches it until rdx_wpool_wait() returns. */
struct rdx_wtag {
	unsigned pending;
	int err; /* the first failed write's -errno */
};

/* threads writers (at least 1) and bufs buffers of size bytes (4 KiB-
 * aligned, size a multiple of 4 KiB) writing into w (rdx_wfile_pwrite;
 * not owned).
 * Producers that hold a buffer each while asking for the next need bufs
 * above their number.  Returns 0, -ENOMEM or -EAGAIN. */
int rdx_wpool_new(struct rdx_wpool **out, unsigned threads, unsigned bufs,
		  size_t size, struct rdx_wfile *w);

/* The buffers' size. */
size_t rdx_wpool_size(const struct rdx_wpool *p);

/* A free buffer, waiting for one if need be; it is the caller's until
 * rdx_wpool_put() or rdx_wpool_drop(). */
void *rdx_wpool_get(struct rdx_wpool *p);

/* Queues the first len bytes of buf (from rdx_wpool_get) for offset off,
 * counted on tag; the buffer goes back to the pool once written. */
void rdx_wpool_put(struct rdx_wpool *p, void *buf, size_t len, uint64_t off,
		   struct rdx_wtag *tag);

/* Gives back a buffer unwritten. */
void rdx_wpool_drop(struct rdx_wpool *p, void *buf);

/* Waits until all of tag's writes are done.  Returns 0 or the first
 * failure's -errno, and clears the tag for reuse. */
int rdx_wpool_wait(struct rdx_wpool *p, struct rdx_wtag *tag);

/* Writes what is queued, stops the threads and frees the buffers (all
 * must be back: every tag waited for, every buffer put or dropped). */
void rdx_wpool_free(struct rdx_wpool *p);

#endif
