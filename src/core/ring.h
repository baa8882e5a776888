/* The slot ring: a fixed pool of 4 KiB-aligned buffers that stages hand to
 * each other.  Slots move, bytes don't.
 *
 * Every chunk of the stream has a sequence number; chunk seq always lives in
 * slot seq % nslots, and a slot takes chunk seq + nslots only after chunk seq
 * was released.  That one rule gives:
 *   - producers may fill chunks out of order (reader threads, receiving
 *     streams), yet can never deadlock the consumer: the chunk it waits for
 *     always has its slot free;
 *   - consumers take chunks strictly in order (rdx_ring_take), and the
 *     in-order work (hashing, offsets) runs in a hook, one chunk after the
 *     other in sequence order, outside the ring lock: either as a chunk is
 *     taken, or as its producer publishes it (rdx_ring_publish_ordered:
 *     the hash then costs the consumer, a sending stream, nothing);
 *   - duplicates and replays are detected (claiming a seq twice).
 *
 * Slot life: FREE -claim-> FILLING -publish-> READY -take-> BUSY -release-> FREE
 */
#ifndef RDX_RING_H
#define RDX_RING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct rdx_slot {
	void *data;	 /* slot_size bytes, plain data; owned by the holder */
	void *wire;	 /* wire_size bytes for transformed frames, or NULL */
	size_t len;	 /* plain bytes in data */
	uint64_t seq;	 /* chunk sequence number */
	uint64_t offset; /* plain offset of data[0] in the stream; set by the hook */
	unsigned index;	 /* position in the ring, for transports that register */
};

struct rdx_ring;

/* Called by rdx_ring_take() or rdx_ring_publish_ordered() in sequence
 * order, one at a time, outside the ring lock: what one hook call writes,
 * the next one reads (the turn passes through the lock).  It reports
 * trouble by returning a negative error, which aborts the ring and is
 * returned. */
typedef int (*rdx_ring_hook)(void *arg, struct rdx_slot *slot);

/* Allocates nslots slots of slot_size bytes (a multiple of 4096), plus a
 * wire buffer of wire_size bytes each when wire_size is non-zero.  With
 * lock true it tries mlock(2); *locked says whether that worked.
 * Returns 0 or -errno. */
int rdx_ring_new(struct rdx_ring **out, unsigned nslots, size_t slot_size,
		 size_t wire_size, bool lock, bool *locked);

void rdx_ring_free(struct rdx_ring *r);

unsigned rdx_ring_nslots(const struct rdx_ring *r);
size_t rdx_ring_slot_size(const struct rdx_ring *r);
struct rdx_slot *rdx_ring_slot(struct rdx_ring *r, unsigned index);
/* Bytes of each slot's wire buffer (0: none). */
size_t rdx_ring_wire_size(const struct rdx_ring *r);
/* The one mapping that holds every buffer, for transports that register it. */
void *rdx_ring_mem(const struct rdx_ring *r, size_t *len);

/* Bounds how long rdx_ring_claim() waits for a slot (0: no bound). */
void rdx_ring_set_stall(struct rdx_ring *r, uint64_t ms);

/* Waits until chunk seq may be filled and hands its slot to the caller.
 * Returns 0, -RDX_EPROTO if seq was already claimed (a duplicate or replay),
 * -RDX_ETIMEOUT after the stall bound, or the abort error. */
int rdx_ring_claim(struct rdx_ring *r, uint64_t seq, struct rdx_slot **out);

/* Makes a filled slot available to rdx_ring_take(). */
void rdx_ring_publish(struct rdx_ring *r, struct rdx_slot *slot);

/* Publishes a filled slot once every chunk below it was published this
 * way, after running hook on it (in sequence order, outside the lock).
 * Returns 0, or the abort error (or the hook's) and the slot stays the
 * caller's.  A ring's producers use either this or rdx_ring_publish(). */
int rdx_ring_publish_ordered(struct rdx_ring *r, struct rdx_slot *slot,
			     rdx_ring_hook hook, void *arg);

/* Gives a claimed slot back unfilled (the producer found end of input). */
void rdx_ring_unclaim(struct rdx_ring *r, struct rdx_slot *slot);

/* Declares that the stream has exactly nchunks chunks.  Returns 0, or
 * -RDX_EPROTO if chunks beyond that were already claimed. */
int rdx_ring_set_end(struct rdx_ring *r, uint64_t nchunks);

/* Declares that no producer will publish anything more: rdx_ring_take()
 * then fails with -ENODATA instead of waiting for a chunk that cannot come. */
void rdx_ring_close_producers(struct rdx_ring *r);

/* Takes the next chunk in sequence order and runs hook (if any) on it,
 * after the hook of every chunk below it.  Returns 1 with *out set, 0 at
 * the end of the stream, or a negative error (the abort error, the hook's,
 * which aborts the ring, or -ENODATA after rdx_ring_close_producers()). */
int rdx_ring_take(struct rdx_ring *r, rdx_ring_hook hook, void *arg,
		  struct rdx_slot **out);

/* Returns a taken slot to the pool. */
void rdx_ring_release(struct rdx_ring *r, struct rdx_slot *slot);

/* Wakes every waiter with err (negative); the first error sticks. */
void rdx_ring_abort(struct rdx_ring *r, int err);

/* The abort error, or 0. */
int rdx_ring_error(struct rdx_ring *r);

/* Every chunk below the returned seq is released or has its slot free and
 * waiting for it: what a receiver may let its sender write ahead. */
uint64_t rdx_ring_writable_below(struct rdx_ring *r);

/* Chunks taken so far (the next seq rdx_ring_take() will hand out). */
uint64_t rdx_ring_taken(struct rdx_ring *r);

/* Every chunk below the returned seq is released (for a receiver:
 * written). */
uint64_t rdx_ring_released_below(struct rdx_ring *r);

#endif
