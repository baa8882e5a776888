/* Slot ring accounting: ownership by seq, order, duplicates, end, abort;
 * the in-order hooks, on publish and on take. */
#include "core/err.h"
#include "core/ring.h"
#include "tap.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

static int hook_seen;

static int count_hook(void *arg, struct rdx_slot *slot)
{
	(void)arg;
	slot->offset = (uint64_t)hook_seen++;
	return 0;
}

static void test_basic(void)
{
	struct rdx_ring *r;
	struct rdx_slot *a, *b, *t;
	bool locked;

	CHECK(rdx_ring_new(&r, 4, 1000, 0, false, &locked) == -EINVAL,
	      "slot size must be a multiple of 4096");
	CHECK(rdx_ring_new(&r, 4, 8192, 100, false, &locked) == 0, "ring of 4 slots");
	CHECK(((uintptr_t)rdx_ring_slot(r, 1)->data & 4095) == 0 &&
		      ((uintptr_t)rdx_ring_slot(r, 3)->wire & 4095) == 0,
	      "slots and wire buffers are 4 KiB aligned");

	/* Fill out of order: 1 before 0. */
	CHECK(rdx_ring_claim(r, 1, &b) == 0 && b->index == 1, "chunk 1 lives in slot 1");
	CHECK(rdx_ring_claim(r, 0, &a) == 0 && a->index == 0, "chunk 0 lives in slot 0");
	CHECK(rdx_ring_claim(r, 1, &t) == -RDX_EPROTO, "claiming a chunk twice is a duplicate");
	b->len = 10;
	rdx_ring_publish(r, b);
	a->len = 20;
	rdx_ring_publish(r, a);
	CHECK(rdx_ring_take(r, count_hook, NULL, &t) == 1 && t->seq == 0 && t->offset == 0,
	      "take returns chunk 0 first");
	rdx_ring_release(r, t);
	CHECK(rdx_ring_claim(r, 0, &t) == -RDX_EPROTO, "a released chunk cannot be replayed");
	CHECK(rdx_ring_take(r, count_hook, NULL, &t) == 1 && t->seq == 1 && t->offset == 1,
	      "then chunk 1, hook in order");
	rdx_ring_release(r, t);
	CHECK(rdx_ring_claim(r, 4, &t) == 0 && t->index == 0, "chunk 4 reuses slot 0");
	rdx_ring_unclaim(r, t);
	CHECK(rdx_ring_set_end(r, 4) == 0, "end after chunk 3");
	CHECK(rdx_ring_claim(r, 4, &t) == -RDX_EPROTO, "claim past the end rejected");
	CHECK(rdx_ring_set_end(r, 5) == -RDX_EPROTO, "end cannot be set twice");
	rdx_ring_free(r);
}

static void test_end_and_close(void)
{
	struct rdx_ring *r;
	struct rdx_slot *t;

	rdx_ring_new(&r, 2, 4096, 0, false, NULL);
	CHECK(rdx_ring_set_end(r, 0) == 0 && rdx_ring_take(r, NULL, NULL, &t) == 0,
	      "an empty stream ends at once");
	rdx_ring_free(r);

	rdx_ring_new(&r, 2, 4096, 0, false, NULL);
	rdx_ring_claim(r, 1, &t);
	CHECK(rdx_ring_set_end(r, 1) == -RDX_EPROTO, "end below a held chunk is a lie");
	rdx_ring_free(r);

	rdx_ring_new(&r, 2, 4096, 0, false, NULL);
	rdx_ring_close_producers(r);
	CHECK(rdx_ring_take(r, NULL, NULL, &t) == -ENODATA,
	      "take fails instead of waiting when no producer is left");
	rdx_ring_free(r);
}

static void test_stall(void)
{
	struct rdx_ring *r;
	struct rdx_slot *t;

	rdx_ring_new(&r, 2, 4096, 0, false, NULL);
	rdx_ring_set_stall(r, 100);
	CHECK(rdx_ring_claim(r, 0, &t) == 0, "claim chunk 0");
	CHECK(rdx_ring_claim(r, 2, &t) == -RDX_ETIMEOUT,
	      "claim of a still-busy slot times out after the stall bound");
	rdx_ring_abort(r, -RDX_EINTR);
	CHECK(rdx_ring_claim(r, 1, &t) == -RDX_EINTR && rdx_ring_error(r) == -RDX_EINTR,
	      "abort wakes claimers with the error");
	rdx_ring_free(r);
}

struct prod {
	struct rdx_ring *r;
	uint64_t first, step, n;
};

static void *producer(void *arg)
{
	struct prod *p = arg;
	uint64_t s;

	for (s = p->first; s < p->n; s += p->step) {
		struct rdx_slot *slot;

		if (rdx_ring_claim(p->r, s, &slot))
			break;
		memcpy(slot->data, &s, sizeof(s));
		slot->len = sizeof(s);
		rdx_ring_publish(p->r, slot);
	}
	return NULL;
}

static int order_hook(void *arg, struct rdx_slot *slot)
{
	uint64_t *want = arg, got;

	memcpy(&got, slot->data, sizeof(got));
	return got == (*want)++ ? 0 : -EPROTO;
}

/* Four producers striding over the sequence (as four streams do) against
 * a ring of three slots: in-order delivery, no deadlock. */
static void test_threads(void)
{
	struct rdx_ring *r;
	struct prod p[4];
	pthread_t th[4];
	struct rdx_slot *t;
	uint64_t want = 0, n = 20000;
	int i, ret;

	rdx_ring_new(&r, 3, 4096, 0, false, NULL);
	rdx_ring_set_end(r, n);
	for (i = 0; i < 4; i++) {
		p[i] = (struct prod){ .r = r, .first = (uint64_t)i, .step = 4, .n = n };
		pthread_create(&th[i], NULL, producer, &p[i]);
	}
	while ((ret = rdx_ring_take(r, order_hook, &want, &t)) == 1)
		rdx_ring_release(r, t);
	for (i = 0; i < 4; i++)
		pthread_join(th[i], NULL);
	CHECK(ret == 0 && want == n, "20000 chunks from 4 producers through 3 slots, in order");
	rdx_ring_free(r);
}

/* The grant frontier: chunks released out of order move it only once the
 * lowest one is released; an unclaimed (given back) slot never does. */
static void test_writable_below(void)
{
	struct rdx_ring *r;
	struct rdx_slot *s[4];
	unsigned i;

	CHECK(rdx_ring_new(&r, 4, 4096, 0, false, NULL) == 0, "ring of 4");
	CHECK(rdx_ring_writable_below(r) == 4, "a fresh ring lets chunks 0..3 come");
	for (i = 0; i < 4; i++) {
		rdx_ring_claim(r, i, &s[i]);
		s[i]->len = 1;
		rdx_ring_publish(r, s[i]);
	}
	for (i = 0; i < 4; i++)
		rdx_ring_take(r, NULL, NULL, &s[i]);
	rdx_ring_release(r, s[2]);
	rdx_ring_release(r, s[1]);
	CHECK(rdx_ring_writable_below(r) == 4, "releasing 2 and 1 before 0 moves nothing");
	rdx_ring_release(r, s[0]);
	CHECK(rdx_ring_writable_below(r) == 7, "releasing 0 frees 0, 1, 2: chunks below 7");
	rdx_ring_claim(r, 4, &s[0]);
	rdx_ring_unclaim(r, s[0]);
	CHECK(rdx_ring_writable_below(r) == 7, "a claim given back releases nothing");
	rdx_ring_release(r, s[3]);
	CHECK(rdx_ring_writable_below(r) == 8, "releasing 3 frees everything taken");
	rdx_ring_free(r);
}

/* An in-order hook that also checks that no two of its calls overlap. */
struct seq_hook {
	uint64_t want;
	atomic_int inside;
	bool overlap;
};

static int seq_hook(void *arg, struct rdx_slot *slot)
{
	struct seq_hook *h = arg;
	uint64_t got;

	if (atomic_fetch_add(&h->inside, 1))
		h->overlap = true;
	memcpy(&got, slot->data, sizeof(got));
	if (got % 97 == 0)
		usleep(200); /* let another thread try its turn */
	slot->offset = got;
	atomic_fetch_sub(&h->inside, 1);
	return got == h->want++ ? 0 : -EPROTO;
}

struct oprod {
	struct rdx_ring *r;
	struct seq_hook *h;
	_Atomic uint64_t *next;
	uint64_t n;
};

/* A reader thread of rdsend's: the next seq from a shared counter, then
 * publish in order through the hook. */
static void *ordered_producer(void *arg)
{
	struct oprod *p = arg;

	for (;;) {
		uint64_t s = atomic_fetch_add(p->next, 1);
		struct rdx_slot *slot;

		if (s >= p->n || rdx_ring_claim(p->r, s, &slot))
			break;
		memcpy(slot->data, &s, sizeof(s));
		slot->len = sizeof(s);
		if (s % 89 == 0)
			usleep(100); /* publish out of order now and then */
		if (rdx_ring_publish_ordered(p->r, slot, seq_hook, p->h)) {
			rdx_ring_unclaim(p->r, slot);
			break;
		}
	}
	return NULL;
}

struct taker {
	struct rdx_ring *r;
	struct seq_hook *h; /* NULL: take without a hook */
	uint64_t taken;
	int ret;
};

static void *taker(void *arg)
{
	struct taker *t = arg;
	struct rdx_slot *slot;

	while ((t->ret = rdx_ring_take(t->r, t->h ? seq_hook : NULL, t->h, &slot)) == 1) {
		if (slot->offset != slot->seq)
			t->ret = -EPROTO;
		t->taken++;
		rdx_ring_release(t->r, slot);
	}
	return NULL;
}

/* n chunks through a ring of 5 slots: nprod ordered publishers with
 * hook ph, ntake takers with hook th (NULL: none).  True when every taker
 * ended well and n chunks were taken. */
static bool run_ordered(unsigned nprod, unsigned ntake, struct seq_hook *ph,
			struct seq_hook *th, uint64_t n)
{
	struct rdx_ring *r;
	_Atomic uint64_t next = 0;
	struct oprod p[4];
	struct taker t[4];
	pthread_t pt[4], tt[4];
	uint64_t taken = 0;
	bool ok = true;
	unsigned i;

	rdx_ring_new(&r, 5, 4096, 0, false, NULL);
	rdx_ring_set_end(r, n);
	for (i = 0; i < ntake; i++) {
		t[i] = (struct taker){ .r = r, .h = th };
		pthread_create(&tt[i], NULL, taker, &t[i]);
	}
	for (i = 0; i < nprod; i++) {
		p[i] = (struct oprod){ .r = r, .h = ph, .next = &next, .n = n };
		pthread_create(&pt[i], NULL, ordered_producer, &p[i]);
	}
	for (i = 0; i < nprod; i++)
		pthread_join(pt[i], NULL);
	for (i = 0; i < ntake; i++) {
		pthread_join(tt[i], NULL);
		ok = ok && t[i].ret == 0;
		taken += t[i].taken;
	}
	rdx_ring_free(r);
	return ok && taken == n;
}

/* Readers publishing in order through a hook (rdsend's hash), and takers
 * running a hook of their own (rdrecv's writers): both hooks see every
 * chunk once, in order, never two at a time. */
static void test_ordered(void)
{
	struct seq_hook ph = { 0 }, th = { 0 };
	uint64_t n = 20000;
	bool ok;

	ok = run_ordered(4, 3, &ph, &th, n);
	CHECK(ph.want == n && !ph.overlap,
	      "4 ordered publishers: the hook saw 20000 chunks in order, one at a time");
	CHECK(ok && th.want == n && !th.overlap,
	      "3 takers: their hook saw every chunk in order, one at a time");

	/* Takers without a hook: the publish hook's offsets arrive with the
	 * chunks (each taker checks them). */
	ph = (struct seq_hook){ 0 };
	CHECK(run_ordered(2, 2, &ph, NULL, n) && ph.want == n,
	      "takers without a hook get the publish hook's offsets");
}

static int fail_hook(void *arg, struct rdx_slot *slot)
{
	(void)arg;
	return slot->seq == 1 ? -EIO : 0;
}

/* A publish hook's error aborts the ring: its publisher, a publisher
 * waiting for its turn and the taker all get it. */
static void test_ordered_error(void)
{
	struct rdx_ring *r;
	struct rdx_slot *a, *b, *c, *t;

	rdx_ring_new(&r, 4, 4096, 0, false, NULL);
	rdx_ring_claim(r, 0, &a);
	rdx_ring_claim(r, 1, &b);
	rdx_ring_claim(r, 2, &c);
	CHECK(rdx_ring_publish_ordered(r, a, fail_hook, NULL) == 0, "chunk 0 passes");
	CHECK(rdx_ring_take(r, NULL, NULL, &t) == 1 && t->seq == 0, "and is taken");
	CHECK(rdx_ring_publish_ordered(r, b, fail_hook, NULL) == -EIO &&
		      rdx_ring_error(r) == -EIO,
	      "a failing hook's error is returned and aborts the ring");
	CHECK(rdx_ring_publish_ordered(r, c, fail_hook, NULL) == -EIO,
	      "the next publisher gets the abort error, not its turn");
	CHECK(rdx_ring_take(r, NULL, NULL, &t) == -EIO, "so does the taker");
	rdx_ring_free(r);
}

struct sidekick {
	struct rdx_ring *r;
	atomic_bool done;
};

static void *sidekick(void *arg)
{
	struct sidekick *k = arg;
	struct rdx_slot *slot;

	if (rdx_ring_claim(k->r, 1, &slot) == 0) {
		slot->len = 1;
		rdx_ring_publish(k->r, slot);
		atomic_store(&k->done, true);
	}
	return NULL;
}

static bool published_by_sidekick;

/* Waits up to 2 s for the sidekick to claim and publish chunk 1: it can
 * only while the hook runs outside the ring's lock. */
static int waiting_hook(void *arg, struct rdx_slot *slot)
{
	struct sidekick *k = arg;
	int i;

	(void)slot;
	for (i = 0; i < 2000 && !atomic_load(&k->done); i++)
		usleep(1000);
	published_by_sidekick = atomic_load(&k->done);
	return 0;
}

static void test_hook_unlocked(void)
{
	struct sidekick k = { 0 };
	struct rdx_slot *s, *t;
	pthread_t th;

	rdx_ring_new(&k.r, 4, 4096, 0, false, NULL);
	rdx_ring_claim(k.r, 0, &s);
	s->len = 1;
	rdx_ring_publish(k.r, s);
	pthread_create(&th, NULL, sidekick, &k);
	CHECK(rdx_ring_take(k.r, waiting_hook, &k, &t) == 1 && published_by_sidekick,
	      "a producer claims and publishes while a take hook runs");
	pthread_join(th, NULL);
	rdx_ring_release(k.r, t);
	rdx_ring_free(k.r);
}

int main(void)
{
	test_basic();
	test_end_and_close();
	test_stall();
	test_threads();
	test_writable_below();
	test_ordered();
	test_ordered_error();
	test_hook_unlocked();
	return TAP_DONE();
}
