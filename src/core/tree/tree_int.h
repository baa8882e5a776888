/* Internals shared by the tree modules: tree.c (names, hashes, the
 * feed), tree_pack.c (the sender) and tree_unpack.c (the receiver). */
#ifndef RDX_TREE_INT_H
#define RDX_TREE_INT_H

#include "core/tree/tree.h"
#include "core/xxh.h"

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <time.h>

/* Regular files this large (and not sparse) are read in chunks by the
 * reader threads as their turn comes and written with O_DIRECT through
 * fileio's sink by the writer threads; smaller ones are read and written
 * whole by the same threads. */
#define BIG_FILE (4u << 20)

/* A pipe for the stream, as large as a slot where the system lets it.
 * Returns 0 or -errno. */
int tree_new_pipe(int fds[2]);

/* The XXH3-128 of a file's content (--checksum), read through a 1 MiB
 * buffer from fd (to its end) or path, keyed with key
 * (RDX_LIST_KEY_LEN bytes): the first 16 bytes of HMAC-SHA256(key, the
 * canonical XXH3-128).  Returns 0 or -errno. */
int tree_hash_fd(int fd, const uint8_t *key, uint8_t out[16]);
int tree_hash_file(const char *path, const uint8_t *key, uint8_t out[16]);

/* Whether a received name is relative, with real names for components
 * (no empty one, no ".", no ".."); one trailing slash is allowed. */
bool tree_name_safe(const char *p);

/* The stream handed over in place between a tree's thread and the core,
 * without a pipe: one side offers a buffer and waits until the other is
 * done with it.  Receiving (rdx_tree_unpack_feed), the core offers a
 * slot and libarchive reads straight from it; sending
 * (rdx_tree_pack_read), the packer offers what libarchive wrote (gathered,
 * or a big file's chunk as it is) and the core copies it into slots. */
struct feed {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	const void *buf; /* offered to the unpacker, or held by it; NULL: none */
	size_t len;
	const struct iovec *iov; /* the packer's block offered; NULL: none */
	unsigned niov, seg; /* seg: the piece the core takes next */
	size_t off;	 /* what the core took of that piece */
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

/* ---- making entries on disk (tree_disk.c) ---- */

/* An entry's owner, mode and times as the receiver restores them. */
struct tree_meta {
	uid_t uid;
	gid_t gid;
	mode_t mode;
	struct timespec times[2]; /* atime, mtime */
};

/* Gives fd m's owner (when own), mode and times; the owner first, as
 * chown clears the set-id bits that the mode then restores; an owner or
 * mode fd has already is left as it is.  Returns 0 or -errno. */
int tree_set_meta(int fd, const struct tree_meta *m, bool own);

/* Renames tmp to base within dir, replacing a file, symlink or fifo there
 * (never following one); on failure tmp is removed.  Returns 0 or -errno
 * (-EISDIR: a directory is there). */
int tree_place(int dir, const char *tmp, const char *base);

/* A directory base in dir, mode 0700 until tree_set_dir_meta(): one that
 * is there is kept, a file or fifo there is replaced.  Returns 0 or
 * -errno; -ELOOP for a symlink there, which is left alone. */
int tree_make_dir(int dir, const char *base);

/* A symlink base -> target in dir with m's owner (when own) and times,
 * made under a temporary name and renamed over base.  Returns 0 or
 * -errno. */
int tree_make_symlink(int dir, const char *base, const char *target,
		      const struct tree_meta *m, bool own);

/* A fifo base in dir with m's owner (when own), mode and times, the same
 * way.  Returns 0 or -errno. */
int tree_make_fifo(int dir, const char *base, const struct tree_meta *m, bool own);

/* A hard link base in dir to tbase in tdir, the same way.  Returns 0 or
 * -errno. */
int tree_make_link(int tdir, const char *tbase, int dir, const char *base);

/* Gives the directory rel under root m's owner (when own), mode and times,
 * once what it holds is written.  Returns 0 or -errno. */
int tree_set_dir_meta(int root, const char *rel, const struct tree_meta *m, bool own);

#endif
