/* The receiver's side of a tree, in three files: tree_unpack.c (the
 * stream and its entries), tree_writers.c (the writer pool that makes
 * small files and writes big ones' stages) and tree_dest.c (the
 * destination: names checked and mapped, directories' metadata at the
 * end, the listing for --sync).  What they share is here. */
#ifndef RDX_TREE_UNPACK_INT_H
#define RDX_TREE_UNPACK_INT_H

#include "core/tree/tree_int.h"

#include "core/direct.h"
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
#include <dirent.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#define UNPACK_BUF (1u << 20) /* one read from the stream pipe */
#define STAGE	   (1u << 20) /* aligned staging for O_DIRECT */
/* Smaller files are verified whole in memory and handed to writer
 * threads, at most this many bytes of them at a time. */
#define WRITE_QUEUE (16u << 20)
/* The unpacker is woken with half the queue free: any file fits then. */
_Static_assert(BIG_FILE <= WRITE_QUEUE / 2 && STAGE <= WRITE_QUEUE / 2,
	       "a file or a stage fits in half the write queue");
/* Stages kept for reuse: a fresh 1 MiB buffer is a fresh mapping, and
 * faulting in and zeroing its pages cost more than the copy into it. */
#define SPARE_STAGES (WRITE_QUEUE / STAGE + 2)
#define MAX_WRITERS  64

/* A directory descriptor shared by the unpacking thread and the writes
 * queued into it. */
struct dirref {
	int fd;
	atomic_uint refs;
};

/* What a writer writes while the unpacker goes on: a small regular file,
 * received whole, whose hash the writer checks before it makes the file
 * (unnamed, then linked under its name); or (sink set) a stage of a big
 * file, len bytes at off. */
struct job {
	struct job *next;
	struct dirref *dir;
	char *final; /* the full name, for messages */
	uint64_t len, got;
	struct tree_meta m;
	uint8_t want[16];      /* the XXH3-128 the writer checks */
	struct rdx_sink *sink; /* a big file's: stage holds len bytes at off */
	char *stage;
	uint64_t off;
	uint64_t name_hash; /* of final (tu_name_hash()) */
	char data[];
};

/* The writer threads.  Each has its own queue, and a file goes to the
 * queue its name hashes to, so two files of one name are written in the
 * stream's order.  The stream goes on from directory to directory while
 * they write (each file holds its directory's descriptor); a directory,
 * symlink or fifo waits for them only when a file of its name may be
 * among theirs (IN_FLIGHT counts by name hash), and a hard link, a big
 * or sparse file and a removal wait for all of them (tu_writers_wait). */
#define IN_FLIGHT 256
struct writer {
	struct rdx_tree_unpack *u;
	pthread_t thread;
	pthread_cond_t cond;
	struct job *head, *tail;
};

struct writers {
	pthread_mutex_t lock;
	pthread_cond_t room, idle;
	struct writer *one;
	unsigned n;	/* started; 0: the unpacking thread writes */
	uint64_t bytes; /* queued or being written */
	unsigned busy;	/* files queued or being written */
	unsigned in_flight[IN_FLIGHT]; /* of busy, by tu_name_hash() % IN_FLIGHT */
	unsigned turn;		       /* the writer of the next stage */
	char *spare[SPARE_STAGES];     /* stages written, for reuse */
	unsigned nspare;
	bool quit;
	atomic_bool anon_ok; /* O_TMPFILE works here (until it fails) */
	atomic_bool corrupt; /* a writer found a file that fails its hash */
	char *corrupt_name;  /* the first one */
};

struct rdx_tree_unpack {
	pthread_t thread;
	int fd; /* the stream's read end (the thread's), or -1: fed */
	struct feed feed;
	char *root; /* realpath of the extraction root: no symlink */
	size_t rootlen;
	int root_fd;   /* the root, opened (O_PATH) */
	char *checked; /* the directory checked last: no symlink in it */
	struct dirref
		*checked_dir; /* ... opened from root_fd, not following one */
	char *rename_top;     /* dst's name when it is created, else NULL */
	bool over_file; /* ... and a file of that name is there to replace */
	char *top_seen; /* the first entry's first component */
	/* What the receiving side asked for (rdx_tree_unpack_opts): the
	 * names allowed at the top, each NULL one taken by the first name
	 * the sender picks for it (tops_taken[i]); ntops 0: any. */
	char **tops;
	char **tops_taken;
	unsigned ntops;
	bool files_only;
	bool tops_glob;
	bool allow_delete;
	bool keep_setid;
	bool as_root;
	enum rdx_direct direct;
	bool fsync;
	uint64_t avail;	 /* memory available at the start (rdx_mem_available) */
	uint64_t cached; /* bytes written through the page cache (the unpacking
			  * thread's) */
	const atomic_int *stop;
	void *buf;
	XXH3_state_t *hash;
	/* The regular file waiting for its hash entry. */
	char *pend_final; /* NULL: none */
	char *pend_tmp; /* a sparse file's temporary in pend_dir; NULL: see below */
	struct dirref *pend_dir;
	struct rdx_sink *pend_sink; /* a big file */
	struct job *pend_job; /* a small file; none of the three: it failed */
	struct writers w;
	unsigned nwriters;    /* wanted */
	atomic_int stage_err; /* the first failed write of pend_sink's stages */
	_Atomic uint64_t files, bytes;
	atomic_uint failed; /* entries named in a warning */
	unsigned missing;   /* ... of them the sender could not read */
	int err;	    /* fatal: the first one (the unpacking thread's) */
	char why[256];
	/* Directories whose mode and times wait for the end, the last one
	 * received first.  libarchive's walk sends a directory's entry when
	 * it lists the parent and what it holds later, after its siblings,
	 * so no directory is known to be complete before the end. */
	struct dirfix *dirs;
};

/* A received directory's metadata, set at the end (tu_dirs_finish): about
 * 60 bytes and its name per directory, as libarchive's own list was. */
struct dirfix {
	struct dirfix *next;
	struct tree_meta m;
	uint64_t seq; /* received as the seq-th directory */
	size_t len;
	char full[]; /* its absolute name, no trailing slash */
};

void tu_dir_drop(struct dirref *d);

int tu_unpack_fail(struct rdx_tree_unpack *u, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* A local name as the user sees it: relative to the root. */
const char *tu_shown(const struct rdx_tree_unpack *u, const char *full);

/* Leaves it once every write is done: after a removal, what was checked
 * may be gone. */
void tu_forget_checked(struct rdx_tree_unpack *u);

/* The local name for a received one: checked, and with the top component
 * replaced by dst's name when dst is created.  Returns a new string (the
 * absolute name), or NULL with the failure recorded. */
char *tu_full_name(struct rdx_tree_unpack *u, const char *in);

/* Records why a directory on the way to the received name in could not
 * be opened (err, -errno), and returns u->err. */
int tu_dir_failed(struct rdx_tree_unpack *u, const char *in, int err);

/* tu_full_name(), with the directory it is in opened as u->checked_dir:
 * made when make is set, else possibly absent (checked_dir NULL).  NULL
 * with the failure recorded. */
char *tu_map_name(struct rdx_tree_unpack *u, const char *in, bool make);

/* The last component of a name. */
const char *tu_base_name(const char *name);

void tu_job_free(struct job *j);

/* A removal entry (--delete): the receiver's own entry, named as the
 * sender names it, checked like any other name. */
int tu_take_delete(struct rdx_tree_unpack *u, struct archive *rd,
		   struct archive_entry *e);

void tu_file_meta(const struct rdx_tree_unpack *u, struct archive *wd,
		  struct archive_entry *e, struct tree_meta *m);

/* Starts up to n writers, no more than there are CPUs: their work is the
 * kernel's (creating, copying into the page cache, renaming), and more
 * threads than CPUs only spin on the directory's lock.  With none, the
 * unpacking thread writes. */
void tu_writers_start(struct rdx_tree_unpack *u, unsigned n);

/* Waits until every queued file is written. */
void tu_writers_wait(struct rdx_tree_unpack *u);

/* FNV-1a of a full name: which writer takes the file, and where it is
 * counted in flight. */
uint64_t tu_name_hash(const char *name);

/* Waits, before full is made as something else than a file, until no
 * file of that name can be with the writers: when one may be (or one of
 * a name that shares its count), until they are all done. */
void tu_writers_wait_name(struct rdx_tree_unpack *u, const char *full);

/* A file a writer found to differ from its hash fails the stream (the
 * file itself was not written).  Returns that fatal code, or 0. */
int tu_writers_failed(struct rdx_tree_unpack *u);

/* A STAGE-sized, 4 KiB-aligned buffer, a spare one if there is one. */
char *tu_stage_get(struct rdx_tree_unpack *u);

void tu_stage_put(struct rdx_tree_unpack *u, char *stage);

void tu_writers_destroy(struct rdx_tree_unpack *u);

void tu_writers_stop(struct rdx_tree_unpack *u);

/* Queues a verified file (taking it), once WRITE_QUEUE has room. */
void tu_writers_submit(struct rdx_tree_unpack *u, struct job *j);

int tu_dir_enter(struct rdx_tree_unpack *u, const char *full,
		 const struct tree_meta *m);

/* The end: every directory's metadata, once nothing more goes into it,
 * children before their parent (whose mode may keep us out of it), and
 * of a directory received twice (two trees of one name) the last
 * entry's. */
void tu_dirs_finish(struct rdx_tree_unpack *u);

/* Extracts one entry (not a hash, removal or missing mark), everything
 * made through its directory's descriptor (tree_disk.c).  Returns 0 or a
 * fatal code. */
int tu_unpack_entry(struct rdx_tree_unpack *u, struct archive *rd,
		    struct archive *wd, struct archive_entry *e);

#endif
