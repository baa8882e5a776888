/* Internals shared by the tree modules: tree.c (names, hashes, the
 * feed), tree_pack.c (the sender) and tree_unpack.c (the receiver). */
#ifndef RDX_TREE_INT_H
#define RDX_TREE_INT_H

#include "tree.h"

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Regular files this large (and not sparse) are read by the packing
 * thread and written with O_DIRECT through fileio's sink; smaller ones
 * are read and written whole by reader and writer threads. */
#define BIG_FILE (4u << 20)

/* A pipe for the stream, as large as a slot where the system lets it.
 * Returns 0 or -errno. */
int tree_new_pipe(int fds[2]);

/* The XXH3-128 of a file's content (--checksum), read through a 1 MiB
 * buffer.  Returns 0 or -errno. */
int tree_hash_file(const char *path, uint8_t out[16]);

/* Whether a received name is relative, with real names for components
 * (no empty one, no ".", no ".."); one trailing slash is allowed. */
bool tree_name_safe(const char *p);

/* The stream handed over in place between a tree's thread and the core,
 * without a pipe: one side offers a buffer and waits until the other is
 * done with it.  Receiving (rdx_tree_unpack_feed), the core offers a
 * slot and libarchive reads straight from it; sending
 * (rdx_tree_pack_read), the packer offers libarchive's block and the
 * core copies it into slots. */
struct feed {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	const void *buf; /* offered, or held by the unpacker; NULL: none */
	size_t len, off; /* off: what the core took of a packer's block */
	bool held;	 /* the unpacker reads from buf until its next read */
	bool eof;	 /* no more will come */
	bool gone;	 /* the side taking buffers takes no more */
};

void tree_feed_init(struct feed *f);
void tree_feed_destroy(struct feed *f);
/* Sets eof or gone (flag), and wakes whoever waits. */
void tree_feed_mark(struct feed *f, bool *flag);
/* Waits on f for at most 100 ms (the caller rechecks a stop flag). */
void tree_feed_wait(struct feed *f);

#endif
