#include "core/ring.h"

#include "core/err.h"
#include "core/units.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

enum slot_state { SLOT_FREE, SLOT_FILLING, SLOT_READY, SLOT_BUSY };

struct ring_entry {
	struct rdx_slot slot;
	enum slot_state state; /* guarded by lock */
	uint64_t next_seq;     /* the only seq this slot may take next; lock */
};

struct rdx_ring {
	pthread_mutex_t lock;
	pthread_cond_t space; /* a slot became free (claimers wait), or abort */
	pthread_cond_t ready; /* a chunk was published or the end is known
			       * (takers wait), or abort */
	pthread_cond_t turn;  /* the in-order work moved on (ordered
			       * publishers and hooked takers wait), or abort */
	struct ring_entry *e;
	unsigned n;
	size_t slot_size;
	size_t wire_size;
	void *mem;	  /* one mapping for every buffer */
	size_t mem_len;
	bool locked;
	uint64_t stall_ms;
	uint64_t tail;	  /* next seq to take; lock */
	uint64_t pub_turn;  /* next seq rdx_ring_publish_ordered() lets by; lock */
	uint64_t hook_turn; /* next seq whose take hook runs; lock */
	uint64_t low;	  /* lowest seq not yet released; lock */
	uint64_t end;	  /* total chunks, UINT64_MAX while unknown; lock */
	bool closed;	  /* no more publishes will come; lock */
	int err;	  /* first abort error; lock */
};

static size_t round_page(size_t n)
{
	return (n + 4095) & ~(size_t)4095;
}

int rdx_ring_new(struct rdx_ring **out, unsigned nslots, size_t slot_size,
		 size_t wire_size, bool lock, bool *locked)
{
	struct rdx_ring *r;
	size_t per;
	char *p;
	unsigned i;

	if (nslots == 0 || slot_size == 0 || slot_size % 4096)
		return -EINVAL;
	r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	r->e = calloc(nslots, sizeof(*r->e));
	if (!r->e)
		goto err_free;
	r->n = nslots;
	r->slot_size = slot_size;
	r->wire_size = round_page(wire_size);
	r->end = UINT64_MAX;
	per = slot_size + r->wire_size;
	r->mem_len = per * nslots;
	r->mem = mmap(NULL, r->mem_len, PROT_READ | PROT_WRITE,
		      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (r->mem == MAP_FAILED)
		goto err_entries;
	if (lock)
		r->locked = mlock(r->mem, r->mem_len) == 0;
	if (locked)
		*locked = r->locked;
	p = r->mem;
	for (i = 0; i < nslots; i++, p += per) {
		r->e[i].slot.data = p;
		r->e[i].slot.wire = r->wire_size ? p + slot_size : NULL;
		r->e[i].slot.index = i;
		r->e[i].next_seq = i;
	}
	pthread_mutex_init(&r->lock, NULL);
	pthread_cond_init(&r->space, NULL);
	pthread_cond_init(&r->ready, NULL);
	pthread_cond_init(&r->turn, NULL);
	*out = r;
	return 0;

err_entries:
	free(r->e);
err_free:
	free(r);
	return -ENOMEM;
}

void rdx_ring_free(struct rdx_ring *r)
{
	if (!r)
		return;
	if (r->locked)
		munlock(r->mem, r->mem_len);
	munmap(r->mem, r->mem_len);
	pthread_cond_destroy(&r->space);
	pthread_cond_destroy(&r->ready);
	pthread_cond_destroy(&r->turn);
	pthread_mutex_destroy(&r->lock);
	free(r->e);
	free(r);
}

unsigned rdx_ring_nslots(const struct rdx_ring *r)
{
	return r->n;
}

size_t rdx_ring_slot_size(const struct rdx_ring *r)
{
	return r->slot_size;
}

struct rdx_slot *rdx_ring_slot(struct rdx_ring *r, unsigned index)
{
	return index < r->n ? &r->e[index].slot : NULL;
}

size_t rdx_ring_wire_size(const struct rdx_ring *r)
{
	return r->wire_size;
}

void *rdx_ring_mem(const struct rdx_ring *r, size_t *len)
{
	*len = r->mem_len;
	return r->mem;
}

void rdx_ring_set_stall(struct rdx_ring *r, uint64_t ms)
{
	pthread_mutex_lock(&r->lock);
	r->stall_ms = ms;
	pthread_mutex_unlock(&r->lock);
}

static struct ring_entry *entry_of(struct rdx_slot *s)
{
	return (struct ring_entry *)((char *)s - offsetof(struct ring_entry, slot));
}

/* Waits for a free slot with an optional absolute deadline
 * (CLOCK_REALTIME, as pthread_cond_timedwait wants).  0 or -RDX_ETIMEOUT. */
static int wait_space(struct rdx_ring *r, const struct timespec *deadline)
{
	if (!deadline) {
		pthread_cond_wait(&r->space, &r->lock);
		return 0;
	}
	if (pthread_cond_timedwait(&r->space, &r->lock, deadline) == ETIMEDOUT)
		return -RDX_ETIMEOUT;
	return 0;
}

static void wake_all(struct rdx_ring *r)
{
	pthread_cond_broadcast(&r->space);
	pthread_cond_broadcast(&r->ready);
	pthread_cond_broadcast(&r->turn);
}

int rdx_ring_claim(struct rdx_ring *r, uint64_t seq, struct rdx_slot **out)
{
	struct ring_entry *e = &r->e[seq % r->n];
	struct timespec deadline, *dl = NULL;
	int ret = 0;

	pthread_mutex_lock(&r->lock);
	if (r->stall_ms) {
		rdx_deadline_in(&deadline, r->stall_ms);
		dl = &deadline;
	}
	for (;;) {
		if (r->err) {
			ret = r->err;
			break;
		}
		if (seq < e->next_seq || seq >= r->end ||
		    (seq == e->next_seq && e->state != SLOT_FREE &&
		     e->slot.seq == seq)) {
			ret = -RDX_EPROTO;
			break;
		}
		if (seq == e->next_seq && e->state == SLOT_FREE)
			break;
		ret = wait_space(r, dl);
		if (ret)
			break;
	}
	if (!ret) {
		e->state = SLOT_FILLING;
		e->slot.seq = seq;
		e->slot.len = 0;
		*out = &e->slot;
	}
	pthread_mutex_unlock(&r->lock);
	return ret;
}

void rdx_ring_publish(struct rdx_ring *r, struct rdx_slot *slot)
{
	pthread_mutex_lock(&r->lock);
	entry_of(slot)->state = SLOT_READY;
	pthread_cond_broadcast(&r->ready);
	pthread_mutex_unlock(&r->lock);
}

/* Waits, under the lock, until *turn reaches seq; 0 or the abort error. */
static int wait_turn(struct rdx_ring *r, const uint64_t *turn, uint64_t seq)
{
	while (*turn != seq && !r->err)
		pthread_cond_wait(&r->turn, &r->lock);
	return r->err;
}

/* Runs hook on slot outside the lock (the caller holds it, and has the
 * turn), then passes the turn on; a hook's error aborts the ring. */
static int run_hook(struct rdx_ring *r, uint64_t *turn, rdx_ring_hook hook,
		    void *arg, struct rdx_slot *slot)
{
	int ret;

	pthread_mutex_unlock(&r->lock);
	ret = hook(arg, slot);
	pthread_mutex_lock(&r->lock);
	if (ret) {
		if (!r->err)
			r->err = ret;
		wake_all(r);
		return ret;
	}
	(*turn)++;
	pthread_cond_broadcast(&r->turn);
	return 0;
}

int rdx_ring_publish_ordered(struct rdx_ring *r, struct rdx_slot *slot,
			     rdx_ring_hook hook, void *arg)
{
	int ret;

	pthread_mutex_lock(&r->lock);
	ret = wait_turn(r, &r->pub_turn, slot->seq);
	if (!ret)
		ret = run_hook(r, &r->pub_turn, hook, arg, slot);
	if (!ret) {
		entry_of(slot)->state = SLOT_READY;
		pthread_cond_broadcast(&r->ready);
	}
	pthread_mutex_unlock(&r->lock);
	return ret;
}

void rdx_ring_unclaim(struct rdx_ring *r, struct rdx_slot *slot)
{
	pthread_mutex_lock(&r->lock);
	entry_of(slot)->state = SLOT_FREE;
	pthread_cond_broadcast(&r->space);
	pthread_mutex_unlock(&r->lock);
}

int rdx_ring_set_end(struct rdx_ring *r, uint64_t nchunks)
{
	int ret = 0;
	unsigned i;

	pthread_mutex_lock(&r->lock);
	/* A chunk at or past the end that is held (not merely claimed and
	 * given back) means the peer lied about the total. */
	for (i = 0; i < r->n; i++) {
		struct ring_entry *e = &r->e[i];

		if (e->state != SLOT_FREE && e->slot.seq >= nchunks)
			ret = -RDX_EPROTO;
	}
	if (nchunks < r->tail || r->end != UINT64_MAX)
		ret = -RDX_EPROTO;
	if (!ret)
		r->end = nchunks;
	wake_all(r);
	pthread_mutex_unlock(&r->lock);
	return ret;
}

int rdx_ring_take(struct rdx_ring *r, rdx_ring_hook hook, void *arg,
		  struct rdx_slot **out)
{
	struct ring_entry *e;
	int ret;

	pthread_mutex_lock(&r->lock);
	for (;;) {
		if (r->err) {
			ret = r->err;
			goto out;
		}
		if (r->tail >= r->end) {
			ret = 0;
			goto out;
		}
		e = &r->e[r->tail % r->n];
		if (e->state == SLOT_READY && e->slot.seq == r->tail)
			break;
		if (r->closed) {
			ret = -ENODATA;
			goto out;
		}
		pthread_cond_wait(&r->ready, &r->lock);
	}
	e->state = SLOT_BUSY;
	r->tail++;
	pthread_cond_broadcast(&r->ready); /* the next taker's turn */
	/* The hook runs outside the lock, so that producers go on claiming
	 * and publishing while it hashes, and in order: after the hook of
	 * every chunk below this one.  After a failure the chunk stays BUSY:
	 * the ring is aborted and nothing more is taken or released. */
	if (hook) {
		ret = wait_turn(r, &r->hook_turn, e->slot.seq);
		if (!ret)
			ret = run_hook(r, &r->hook_turn, hook, arg, &e->slot);
		if (ret)
			goto out;
	}
	*out = &e->slot;
	ret = 1;
out:
	pthread_mutex_unlock(&r->lock);
	return ret;
}

void rdx_ring_release(struct rdx_ring *r, struct rdx_slot *slot)
{
	struct ring_entry *e = entry_of(slot);

	pthread_mutex_lock(&r->lock);
	e->state = SLOT_FREE;
	e->next_seq = slot->seq + r->n;
	/* Chunk s is released once its slot's next_seq has passed it. */
	while (r->e[r->low % r->n].next_seq > r->low)
		r->low++;
	pthread_cond_broadcast(&r->space);
	pthread_mutex_unlock(&r->lock);
}

void rdx_ring_close_producers(struct rdx_ring *r)
{
	pthread_mutex_lock(&r->lock);
	r->closed = true;
	wake_all(r);
	pthread_mutex_unlock(&r->lock);
}

void rdx_ring_abort(struct rdx_ring *r, int err)
{
	pthread_mutex_lock(&r->lock);
	if (!r->err)
		r->err = err < 0 ? err : -err;
	wake_all(r);
	pthread_mutex_unlock(&r->lock);
}

int rdx_ring_error(struct rdx_ring *r)
{
	int err;

	pthread_mutex_lock(&r->lock);
	err = r->err;
	pthread_mutex_unlock(&r->lock);
	return err;
}

uint64_t rdx_ring_taken(struct rdx_ring *r)
{
	uint64_t t;

	pthread_mutex_lock(&r->lock);
	t = r->tail;
	pthread_mutex_unlock(&r->lock);
	return t;
}

uint64_t rdx_ring_released_below(struct rdx_ring *r)
{
	uint64_t low;

	pthread_mutex_lock(&r->lock);
	low = r->low;
	pthread_mutex_unlock(&r->lock);
	return low;
}

uint64_t rdx_ring_writable_below(struct rdx_ring *r)
{
	uint64_t w;

	/* Every chunk below low is released; from there on, up to nslots of
	 * them, each finds its slot free when it comes. */
	pthread_mutex_lock(&r->lock);
	w = r->low + r->n;
	pthread_mutex_unlock(&r->lock);
	return w;
}
