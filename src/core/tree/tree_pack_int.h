/* The sender's side of a tree, in four files: tree_plan.c (--sync: the
 * receiver's listing and the plan of what to send), tree_walk.c (the
 * walker thread), tree_queue.c (the queue between the walker, the readers
 * and the packer) and tree_pack.c (the readers, the packer and the
 * stream).  What they share is here. */
#ifndef RDX_TREE_PACK_INT_H
#define RDX_TREE_PACK_INT_H

#include "core/tree/tree_int.h"

#include "core/err.h"
#include "core/fileio.h"
#include "core/proto.h"
#include "core/tree/rules.h"
#include "core/io.h"
#include "core/log.h"
#include "core/units.h"

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <fts.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#define PACK_BLOCK  (1u << 20)	/* a block offered to the core, at least */
#define PACK_DIRECT (64u << 10) /* a write this large is not gathered */
#define PACK_SEGS   256u	/* pieces of one block */

struct plan_slot {
	char *name; /* NULL: free */
	uint64_t size;
	int64_t mtime;
	uint8_t type;
	bool seen;	  /* the walk has it too */
	uint8_t hash[16]; /* type RDX_LIST_HASHED */
};

struct rdx_tree_plan {
	struct plan_slot *slots;
	size_t cap; /* a power of two */
	size_t used;
	bool delete, dry_run;
	uint8_t key[RDX_LIST_KEY_LEN]; /* the listing's hashes are keyed with it */
};

/* The walk, the reading of files and the writing of the stream are three
 * stages.  A walker thread runs libarchive's walk and queues what it
 * finds (an item per entry, in the walk's order); reader threads read
 * small regular files whole ahead and hash them; the packing thread takes
 * the items in order and writes the stream.  The queue holds at most
 * AHEAD_ITEMS entries and READ_AHEAD bytes of data read ahead.
 *
 * A big file is read by the readers too when its turn comes: in CHUNK
 * pieces, O_DIRECT where it is not cached, at most WINDOW of them ahead
 * of the packing thread, which hashes and sends them in order (before the
 * small files queued after it: the packer waits for those chunks).  A
 * small file with hard links, or a sparse one, is read by the packing
 * thread itself. */
#define READ_AHEAD  (16u << 20)
#define AHEAD_ITEMS 4096u
#define MAX_READERS 64
#define READ_BLOCK  (1u << 20) /* the packing thread's own reads */
#define CHUNK	    (1u << 20)
#define WINDOW	    8u
/* A walker woken with half the room free can queue any file read ahead. */
_Static_assert(BIG_FILE <= READ_AHEAD / 2, "read-ahead files fit in half the "
					   "room");

enum item_kind {
	ITEM_ENTRY,   /* a walked entry */
	ITEM_MISSING, /* a source or entry the walk could not read */
	ITEM_END,     /* the walk is over */
};

struct item {
	struct item *next;
	enum item_kind kind;
	struct archive_entry *e; /* ITEM_ENTRY */
	char *text;		 /* ITEM_MISSING: "NAME: why" */
	/* A small regular file read ahead by a reader: */
	bool ahead;
	bool read; /* the reader is done with it */
	char *buf;
	size_t size; /* from the walk */
	size_t got;
	int err; /* -errno; -ESTALE: not the walked file any more */
	XXH128_hash_t hash;
};

/* One piece of a big file, read by a reader for the packing thread: the
 * reader that claimed it writes buf and got without a lock, then sets
 * done under the queue's lock; the packer reads them once it saw done,
 * and clears done (the lock again) when it is through with them. */
struct chunk {
	char *buf;   /* CHUNK bytes, 4 KiB-aligned; the packer's, fixed */
	ssize_t got; /* bytes, or -errno */
	bool done;
};

/* The big file the packing thread sends now (tp_pack_big), on its stack; the
 * counters are under the queue's lock.  A reader touches it only while
 * counted in busy, and tp_pack_big() returns only once busy is 0. */
struct bigread {
	struct rdx_source *src;
	uint64_t size; /* as walked: what is sent */
	uint64_t nchunks;
	uint64_t claimed;  /* chunks handed to readers (the queue's lock) */
	uint64_t consumed; /* chunks the packer is done with */
	unsigned busy;	   /* readers reading one now */
	struct chunk w[WINDOW]; /* chunk k in w[k % WINDOW] */
};

struct ahead {
	pthread_mutex_t lock;
	pthread_cond_t work;  /* readers: an item to read, or the end */
	pthread_cond_t ready; /* the packer: an item queued or read */
	pthread_cond_t room;  /* the walker: the packer took an item */
	struct item *head, *tail;
	struct item *unread; /* the first item no reader took yet */
	struct bigread *cur; /* a big file being read, or NULL */
	unsigned items;
	size_t bytes; /* of the items read ahead, queued */
	bool ended;   /* ITEM_END queued */
	bool quit;    /* the packer stopped: walker and readers end */
	pthread_t walker;
	bool walking;
	pthread_t readers[MAX_READERS];
	unsigned nreaders;
};

/* What the packing thread offers the core at once: pieces of the stream
 * in order, each either gathered here (headers, padding, the hash
 * entries) or lent from a file read ahead, which stays allocated (on the
 * items list) until the core took the block. */
struct block {
	struct iovec v[PACK_SEGS];
	unsigned n;
	size_t bytes;
	char *gather; /* PACK_BLOCK */
	size_t fill;
	struct item *items, **tail;
};

struct rdx_tree_pack {
	pthread_t thread;
	int fd; /* the stream's write end: the thread's, closed when it ends;
		 * -1: handed out (rdx_tree_pack_read) */
	struct feed out;
	struct ahead q;
	char **paths; /* as given: the names they are sent under */
	char **abs;   /* the same, absolute: what the walk opens */
	unsigned n;
	bool follow;
	bool atime;
	unsigned nreaders;
	char *rbuf;	     /* READ_BLOCK, the packing thread's reads */
	struct block blk[2]; /* tp_pack_write() fills blk[cur] while the core
			      * takes the other */
	unsigned cur;
	/* The data of the file read ahead that tp_pack_ahead() sends now: what
	 * libarchive writes from it is lent, not copied. */
	const char *lend;
	size_t lend_len;
	bool lent;	   /* the block holds some of it */
	char *win[WINDOW]; /* tp_pack_big()'s chunks, allocated at the first */
	/* Written by the walker until it queues ITEM_END, then read by the
	 * packing thread (the queue's lock orders the two). */
	unsigned unwalkable; /* sources that could not be opened */
	bool incomplete;     /* the walk warned: --delete deletes nothing */
	uint64_t unchanged;  /* files --sync did not send */
	int walk_err;	     /* -ENOMEM */
	/* Written by both, read after the joins. */
	atomic_uint unreadable; /* files skipped or sent empty */
	/* Written by the packing thread, read after its join. */
	int err;		      /* the stream itself failed (-errno) */
	struct rdx_tree_plan *plan;   /* --sync, or NULL */
	const struct rdx_rule *rules; /* --include/--exclude; borrowed */
	size_t nrules;
	bool cut; /* failed here: nothing more goes out, not even the
			      * end of the archive, so the receiver fails too */
};

/* Notes that the walk has e; returns true when the receiver has it as a
 * regular file as it is here: same size, and same mtime or (--checksum)
 * same content.  e's source path is absolute (rdx_tree_pack_start). */
bool tp_plan_walked(const struct rdx_tree_plan *p, struct archive_entry *e);

/* A marker entry (RDX_TREE_DELETE_NAME, RDX_TREE_MISSING_NAME) whose
 * data is a name.  Returns 0, -ENOMEM or -EPIPE. */
int tp_pack_marker(struct archive *w, const char *marker, const char *name);

/* --delete: the removal entries for what the receiver listed and the walk
 * did not see, children first (names in descending order put "d/x"
 * before "d").  Returns 0, -ENOMEM or -EPIPE. */
int tp_pack_deletes(struct rdx_tree_plan *p, const struct rdx_rule *rules,
		    size_t nrules, struct archive *w);

/* libarchive's writer, which does no blocking of its own.  The data of a
 * file read ahead is lent to the block (the core copies it once, into its
 * slots); headers and the rest are gathered; a write of PACK_DIRECT or
 * more that is not lent (a big file's chunk) goes on from libarchive's
 * caller's buffer as it is, and is waited for. */
la_ssize_t tp_pack_write(struct archive *a, void *arg, const void *buf,
			 size_t len);

/* Opens the file the walk found, by its (absolute) path, and checks that
 * it is still that file: what is read is what was walked, even if a name
 * on the way was replaced since.  The name is opened O_PATH and checked
 * before the file is opened for reading (through /proc/self/fd), so that
 * a device swapped in is never opened and a fifo never waited for;
 * without a /proc that is procfs, by name again, checked again.  *st is
 * the file's stat.  Returns the descriptor, or -errno (-ESTALE: another
 * file is there now). */
int tp_open_walked(struct archive_entry *e, struct stat *st);

/* Gives e the data regions of fd (st its stat), when it has holes: the
 * pax writer then sends them as a sparse file.  Asked only of a file
 * short of blocks, which on a compressing file system (ZFS, btrfs) may be
 * most files, with none: two seeks say so.  A file system that cannot say
 * where its holes are has none to keep, and a file that grew past its
 * walked size is sent whole. */
void tp_sparse_map(int fd, const struct stat *st, struct archive_entry *e);

/* Sends a file read ahead.  Returns 0 or -EPIPE. */
int tp_pack_ahead(struct rdx_tree_pack *p, struct archive *w, struct item *it);

/* Sends a big regular file, fd (taken over, or -errno), read by the
 * readers (read_chunk), chunk by chunk in order, and its hash.  Returns 0
 * (a read failure is only counted), -EPIPE, or the walk's failure when it
 * stopped everything. */
int tp_pack_big(struct rdx_tree_pack *p, struct archive *w,
		struct archive_entry *e, XXH3_state_t *h, int fd);

void tp_item_free(struct item *it);

/* Queues an item, waiting for room.  Returns 0, or -ECANCELED when the
 * packing thread stopped (the item is freed). */
int tp_queue_put(struct rdx_tree_pack *p, struct item *it);

/* The next item in the walk's order, once read if read ahead; NULL when
 * the walk stopped early (only after quit).  The caller frees it. */
struct item *tp_queue_take(struct rdx_tree_pack *p);

/* Reads one small file whole and hashes it. */
void tp_read_ahead(struct item *it);

/* Reads chunk k of the big file b (without its lock). */
void tp_read_chunk(struct bigread *b, uint64_t k);

/* A reader runs until the packer stops it: a big file may come at any
 * time, even after the walk's end. */
void *tp_reader_main(void *arg);

/* Starts the walker and the readers.  Returns 0 or -errno. */
int tp_ahead_start(struct rdx_tree_pack *p);

void tp_ahead_destroy(struct ahead *q);

/* Stops and joins the walker and the readers, and frees what is queued. */
void tp_ahead_stop(struct rdx_tree_pack *p);

#endif
