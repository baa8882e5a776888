/* Slot ring accounting: ownership by seq, order, duplicates, end, abort. */
#include "../../src/core/err.h"
#include "../../src/core/ring.h"
#include "tap.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>

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

int main(void)
{
	test_basic();
	test_end_and_close();
	test_stall();
	test_threads();
	test_writable_below();
	return TAP_DONE();
}
