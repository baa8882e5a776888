/* The queue of a tree's sender between the walker, the readers and the
 * packing thread: items in the walk's order, small files read ahead,
 * big files' chunks. */
#include "core/tree/tree_pack_int.h"

/* ---- sender: the queue ----------------------------------------------- */

void tp_item_free(struct item *it)
{
	if (!it)
		return;
	if (it->e)
		archive_entry_free(it->e);
	free(it->text);
	free(it->buf);
	free(it);
}

/* Queues an item, waiting for room.  Returns 0, or -ECANCELED when the
 * packing thread stopped (the item is freed). */
int tp_queue_put(struct rdx_tree_pack *p, struct item *it)
{
	struct ahead *q = &p->q;
	size_t bytes = it->ahead ? it->size : 0;

	pthread_mutex_lock(&q->lock);
	while (!q->quit && q->items &&
	       (q->items >= AHEAD_ITEMS || q->bytes + bytes > READ_AHEAD))
		pthread_cond_wait(&q->room, &q->lock);
	if (q->quit) {
		pthread_mutex_unlock(&q->lock);
		tp_item_free(it);
		return -ECANCELED;
	}
	if (q->tail)
		q->tail->next = it;
	else
		q->head = it;
	q->tail = it;
	q->items++;
	q->bytes += bytes;
	if (it->kind == ITEM_END)
		q->ended = true;
	if (it->ahead && !it->read && !q->unread)
		q->unread = it;
	/* One reader per file to read (a broadcast woke them all for each,
	 * and all but one went back to sleep); the packer only when this
	 * is the item it waits for. */
	if (it->kind == ITEM_END)
		pthread_cond_broadcast(&q->work);
	else if (it->ahead && !it->read)
		pthread_cond_signal(&q->work);
	if (q->head == it && !(it->ahead && !it->read))
		pthread_cond_signal(&q->ready);
	pthread_mutex_unlock(&q->lock);
	return 0;
}

/* The next item in the walk's order, once read if read ahead; NULL when
 * the walk stopped early (only after quit).  The caller frees it. */
struct item *tp_queue_take(struct rdx_tree_pack *p)
{
	struct ahead *q = &p->q;
	struct item *it;

	pthread_mutex_lock(&q->lock);
	while (!q->quit && (!q->head || (q->head->ahead && !q->head->read)))
		pthread_cond_wait(&q->ready, &q->lock);
	it = q->quit ? NULL : q->head;
	if (it) {
		q->head = it->next;
		if (!q->head)
			q->tail = NULL;
		q->items--;
		q->bytes -= it->ahead ? it->size : 0;
		/* The walker, once half the room is free: woken for every
		 * item, it queued one and slept again, a switch per file. */
		if (q->items <= AHEAD_ITEMS / 2 && q->bytes <= READ_AHEAD / 2)
			pthread_cond_signal(&q->room);
	}
	pthread_mutex_unlock(&q->lock);
	return it;
}

/* Reads one small file whole and hashes it. */
void tp_read_ahead(struct item *it)
{
	size_t want = it->size;
	struct stat st;
	ssize_t n;
	int fd;

	fd = tp_open_walked(it->e, &st);
	if (fd < 0) {
		it->err = fd;
		return;
	}
	tp_sparse_map(fd, &st, it->e); /* the item is this reader's until read */
	if (archive_entry_sparse_count(it->e)) {
		close(fd);
		it->err = -EAGAIN; /* the packer sends it, with its holes */
		return;
	}
	n = rdx_pread_full(fd, it->buf, want, 0);
	close(fd);
	if (n < 0) {
		it->err = (int)n;
		return;
	}
	it->got = (size_t)n;
	if (it->got < want)
		it->err = -ENODATA; /* shrank */
	else
		it->hash = XXH3_128bits(it->buf, it->got);
}

/* Reads chunk k of the big file b (without its lock). */
void tp_read_chunk(struct bigread *b, uint64_t k)
{
	uint64_t off = k * CHUNK;
	size_t want = b->size - off < CHUNK ? (size_t)(b->size - off) : CHUNK;
	ssize_t n = rdx_source_read(b->src, b->w[k % WINDOW].buf, CHUNK, k);

	if (n >= 0 && (size_t)n < want)
		n = -ENODATA; /* shrank */
	b->w[k % WINDOW].got = n < 0 ? n : (ssize_t)want;
}

/* The next chunk of the big file being sent, when the window has room:
 * true with *k set, counted as busy. */
static bool claim_chunk(struct bigread *b, uint64_t *k)
{
	if (!b || b->claimed >= b->nchunks || b->claimed >= b->consumed + WINDOW)
		return false;
	*k = b->claimed++;
	b->busy++;
	return true;
}

/* A reader runs until the packer stops it: a big file may come at any
 * time, even after the walk's end. */
void *tp_reader_main(void *arg)
{
	struct ahead *q = arg;

	rdx_thread_name("rdx-tread");
	pthread_mutex_lock(&q->lock);
	for (;;) {
		struct item *it = q->unread, *next;
		struct bigread *b = q->cur;
		uint64_t k;

		if (q->quit)
			break;
		if (claim_chunk(b, &k)) { /* the packer waits for these */
			pthread_mutex_unlock(&q->lock);
			tp_read_chunk(b, k);
			pthread_mutex_lock(&q->lock);
			b->w[k % WINDOW].done = true;
			b->busy--;
			pthread_cond_broadcast(&q->ready);
			continue;
		}
		if (!it) {
			pthread_cond_wait(&q->work, &q->lock);
			continue;
		}
		for (next = it->next; next && !(next->ahead && !next->read); next = next->next)
			;
		q->unread = next;
		pthread_mutex_unlock(&q->lock);
		tp_read_ahead(it);
		pthread_mutex_lock(&q->lock);
		it->read = true;
		if (it == q->head)
			pthread_cond_signal(&q->ready);
	}
	pthread_mutex_unlock(&q->lock);
	return NULL;
}
