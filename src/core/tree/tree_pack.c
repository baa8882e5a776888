/* The sender's side of a tree: walk the sources (libarchive's walk),
 * read the files, and write them as one pax stream with a hash after
 * each; --sync's plan of what the receiver already has. */
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

#define PACK_BLOCK (1u << 20)  /* a block offered to the core, at least */
#define PACK_DIRECT (64u << 10) /* a write this large is not gathered */
#define PACK_SEGS 256u		/* pieces of one block */

/* ---- --sync: the receiver's listing ----------------------------------- */

struct plan_slot {
	char *name; /* NULL: free */
	uint64_t size;
	int64_t mtime;
	uint8_t type;
	bool seen; /* the walk has it too */
	uint8_t hash[16]; /* type RDX_LIST_HASHED */
};

struct rdx_tree_plan {
	struct plan_slot *slots;
	size_t cap; /* a power of two */
	size_t used;
	bool delete, dry_run;
	uint8_t key[RDX_LIST_KEY_LEN]; /* the listing's hashes are keyed with it */
};

void rdx_tree_plan_options(struct rdx_tree_plan *p, bool delete, bool dry_run)
{
	p->delete = delete;
	p->dry_run = dry_run;
}

int rdx_tree_plan_new(struct rdx_tree_plan **out, const uint8_t key[RDX_LIST_KEY_LEN])
{
	struct rdx_tree_plan *p = calloc(1, sizeof(*p));

	if (!p)
		return -ENOMEM;
	memcpy(p->key, key, sizeof(p->key));
	p->cap = 1024;
	p->slots = calloc(p->cap, sizeof(*p->slots));
	if (!p->slots) {
		free(p);
		return -ENOMEM;
	}
	*out = p;
	return 0;
}

static struct plan_slot *plan_find(const struct rdx_tree_plan *p, const char *name,
				   size_t len)
{
	size_t i = (size_t)XXH3_64bits(name, len) & (p->cap - 1);

	while (p->slots[i].name &&
	       (strlen(p->slots[i].name) != len || memcmp(p->slots[i].name, name, len)))
		i = (i + 1) & (p->cap - 1);
	return &p->slots[i];
}

static int plan_grow(struct rdx_tree_plan *p)
{
	struct rdx_tree_plan bigger = { .cap = p->cap * 2 };
	size_t i;

	bigger.slots = calloc(bigger.cap, sizeof(*bigger.slots));
	if (!bigger.slots)
		return -ENOMEM;
	for (i = 0; i < p->cap; i++)
		if (p->slots[i].name)
			*plan_find(&bigger, p->slots[i].name, strlen(p->slots[i].name)) = p->slots[i];
	free(p->slots);
	p->slots = bigger.slots;
	p->cap = bigger.cap;
	return 0;
}

int rdx_tree_plan_add(struct rdx_tree_plan *p, const struct rdx_list_entry *e)
{
	struct plan_slot *slot;

	if ((p->used + 1) * 2 > p->cap && plan_grow(p))
		return -ENOMEM;
	slot = plan_find(p, e->name, e->len);
	if (!slot->name) {
		slot->name = strndup(e->name, e->len);
		if (!slot->name)
			return -ENOMEM;
		p->used++;
	}
	slot->size = e->size;
	slot->mtime = e->mtime;
	slot->type = e->type;
	memcpy(slot->hash, e->hash, sizeof(slot->hash));
	return 0;
}

void rdx_tree_plan_free(struct rdx_tree_plan *p)
{
	size_t i;

	if (!p)
		return;
	for (i = 0; i < p->cap; i++)
		free(p->slots[i].name);
	free(p->slots);
	explicit_bzero(p->key, sizeof(p->key));
	free(p);
}

/* Notes that the walk has e; returns true when the receiver has it as a
 * regular file as it is here: same size, and same mtime or (--checksum)
 * same content.  e's source path is absolute (rdx_tree_pack_start). */
static bool plan_walked(const struct rdx_tree_plan *p, struct archive_entry *e)
{
	const char *name = archive_entry_pathname(e);
	struct plan_slot *slot = plan_find(p, name, strlen(name));

	uint8_t mine[16];

	if (!slot->name)
		return false;
	slot->seen = true;
	if (archive_entry_filetype(e) != AE_IFREG || slot->size != (uint64_t)archive_entry_size(e))
		return false;
	/* --checksum: the same bytes, whatever the times say. */
	if (slot->type == RDX_LIST_HASHED)
		return tree_hash_file(archive_entry_sourcepath(e), p->key, mine) == 0 &&
		       !memcmp(mine, slot->hash, sizeof(mine));
	return slot->type == RDX_LIST_FILE && slot->mtime == (int64_t)archive_entry_mtime(e);
}

static int by_name_desc(const void *a, const void *b)
{
	return -strcmp(*(char *const *)a, *(char *const *)b);
}

/* A marker entry (RDX_TREE_DELETE_NAME, RDX_TREE_MISSING_NAME) whose
 * data is a name.  Returns 0, -ENOMEM or -EPIPE. */
static int pack_marker(struct archive *w, const char *marker, const char *name)
{
	struct archive_entry *e = archive_entry_new();
	size_t len = strlen(name);
	int ret = 0;

	if (!e)
		return -ENOMEM;
	archive_entry_set_pathname(e, marker);
	archive_entry_set_filetype(e, AE_IFREG);
	archive_entry_set_perm(e, 0400);
	archive_entry_set_size(e, (la_int64_t)len);
	if (archive_write_header(w, e) < ARCHIVE_WARN ||
	    archive_write_data(w, name, len) != (la_ssize_t)len)
		ret = -EPIPE;
	archive_entry_free(e);
	return ret;
}

/* --delete: the removal entries for what the receiver listed and the walk
 * did not see, children first (names in descending order put "d/x"
 * before "d").  Returns 0, -ENOMEM or -EPIPE. */
static int pack_deletes(struct rdx_tree_plan *p, const struct rdx_rule *rules,
			size_t nrules, struct archive *w)
{
	char **names = malloc((p->used ? p->used : 1) * sizeof(*names));
	size_t i, n = 0;
	int ret = 0;

	if (!names)
		return -ENOMEM;
	/* What the rules exclude was not walked, not gone: it stays. */
	for (i = 0; i < p->cap; i++) {
		const char *name = p->slots[i].name, *rel = name ? strchr(name, '/') : NULL;

		if (name && !p->slots[i].seen &&
		    (!rel || rdx_rules_pass_path(rules, nrules, rel + 1)))
			names[n++] = p->slots[i].name;
	}
	qsort(names, n, sizeof(*names), by_name_desc);
	for (i = 0; i < n && !ret; i++) {
		if (p->dry_run)
			rdx_info(0, "would delete '%s'", names[i]);
		else
			ret = pack_marker(w, RDX_TREE_DELETE_NAME, names[i]);
	}
	free(names);
	return ret;
}

/* ---- sender: walk and pack -------------------------------------------- */

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
#define READ_AHEAD (16u << 20)
#define AHEAD_ITEMS 4096u
#define MAX_READERS 64
#define READ_BLOCK (1u << 20) /* the packing thread's own reads */
#define CHUNK (1u << 20)
#define WINDOW 8u
/* A walker woken with half the room free can queue any file read ahead. */
_Static_assert(BIG_FILE <= READ_AHEAD / 2, "read-ahead files fit in half the room");

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
	bool read;	  /* the reader is done with it */
	char *buf;
	size_t size;	  /* from the walk */
	size_t got;
	int err;	  /* -errno; -ESTALE: not the walked file any more */
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

/* The big file the packing thread sends now (pack_big), on its stack; the
 * counters are under the queue's lock.  A reader touches it only while
 * counted in busy, and pack_big() returns only once busy is 0. */
struct bigread {
	struct rdx_source *src;
	uint64_t size;	   /* as walked: what is sent */
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
	struct item *unread;  /* the first item no reader took yet */
	struct bigread *cur;  /* a big file being read, or NULL */
	unsigned items;
	size_t bytes;	      /* of the items read ahead, queued */
	bool ended;	      /* ITEM_END queued */
	bool quit;	      /* the packer stopped: walker and readers end */
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
	char **paths;	     /* as given: the names they are sent under */
	char **abs;	     /* the same, absolute: what the walk opens */
	unsigned n;
	bool follow;
	unsigned nreaders;
	char *rbuf;	     /* READ_BLOCK, the packing thread's reads */
	struct block blk[2]; /* pack_write() fills blk[cur] while the core
			      * takes the other */
	unsigned cur;
	/* The data of the file read ahead that pack_ahead() sends now: what
	 * libarchive writes from it is lent, not copied. */
	const char *lend;
	size_t lend_len;
	bool lent;	     /* the block holds some of it */
	char *win[WINDOW];   /* pack_big()'s chunks, allocated at the first */
	/* Written by the walker until it queues ITEM_END, then read by the
	 * packing thread (the queue's lock orders the two). */
	unsigned unwalkable; /* sources that could not be opened */
	bool incomplete;     /* the walk warned: --delete deletes nothing */
	uint64_t unchanged;  /* files --sync did not send */
	int walk_err;	     /* -ENOMEM */
	/* Written by both, read after the joins. */
	atomic_uint unreadable; /* files skipped or sent empty */
	/* Written by the packing thread, read after its join. */
	int err;	     /* the stream itself failed (-errno) */
	struct rdx_tree_plan *plan; /* --sync, or NULL */
	const struct rdx_rule *rules; /* --include/--exclude; borrowed */
	size_t nrules;
	bool cut;	     /* failed here: nothing more goes out, not even the
			      * end of the archive, so the receiver fails too */
};

/* Hands the n pieces v to the core or writes them into the pipe.  The
 * core takes one block at a time: this waits until it took the one
 * offered before, offers v, and with wait also until it took v; without,
 * v and what it points to must stay as they are until pack_drain() or the
 * next pack_out() returns.  Returns 0 or -errno. */
static int pack_out(struct rdx_tree_pack *p, struct iovec *v, unsigned n, bool wait)
{
	ssize_t ret;

	if (p->fd < 0) {
		struct feed *f = &p->out;

		pthread_mutex_lock(&f->lock);
		while (f->iov && !f->gone)
			pthread_cond_wait(&f->cond, &f->lock);
		if (!f->gone) {
			f->iov = v;
			f->niov = n;
			f->seg = 0;
			f->off = 0;
			pthread_cond_broadcast(&f->cond);
			while (wait && f->iov && !f->gone)
				pthread_cond_wait(&f->cond, &f->lock);
		}
		ret = f->gone ? -EPIPE : 0;
		if (f->gone)
			f->iov = NULL;
		pthread_mutex_unlock(&f->lock);
	} else {
		ret = rdx_writev_full(p->fd, v, n);
	}
	return ret < 0 ? (int)ret : 0;
}

/* Waits until the core took the block offered last (or takes no more),
 * so that nothing of ours is offered any longer. */
static void pack_drain(struct rdx_tree_pack *p)
{
	struct feed *f = &p->out;

	if (p->fd >= 0)
		return;
	pthread_mutex_lock(&f->lock);
	while (f->iov && !f->gone)
		pthread_cond_wait(&f->cond, &f->lock);
	f->iov = NULL;
	pthread_mutex_unlock(&f->lock);
}

static void item_free(struct item *it);

/* Empties a block the core took: the files it lent from are freed. */
static void block_reset(struct block *b)
{
	struct item *it;

	while ((it = b->items)) {
		b->items = it->next;
		item_free(it);
	}
	b->tail = &b->items;
	b->n = 0;
	b->bytes = 0;
	b->fill = 0;
}

/* Offers the block pack_write() filled, and goes on in the other one,
 * which the core took whole before this one was offered.  Returns 0 or
 * -errno. */
static int pack_flush(struct rdx_tree_pack *p)
{
	struct block *b = &p->blk[p->cur];
	int ret;

	if (!b->n)
		return 0;
	ret = pack_out(p, b->v, b->n, false);
	p->cur ^= 1;
	block_reset(&p->blk[p->cur]);
	return ret;
}

/* Adds len bytes at buf to the block being filled (the caller made room). */
static void block_add(struct block *b, const char *buf, size_t len)
{
	struct iovec *last = b->n ? &b->v[b->n - 1] : NULL;

	if (last && (const char *)last->iov_base + last->iov_len == buf) {
		last->iov_len += len;
	} else {
		b->v[b->n].iov_base = (void *)buf;
		b->v[b->n++].iov_len = len;
	}
	b->bytes += len;
}

/* libarchive's writer, which does no blocking of its own.  The data of a
 * file read ahead is lent to the block (the core copies it once, into its
 * slots); headers and the rest are gathered; a write of PACK_DIRECT or
 * more that is not lent (a big file's chunk) goes on from libarchive's
 * caller's buffer as it is, and is waited for. */
static la_ssize_t pack_write(struct archive *a, void *arg, const void *buf,
			     size_t len)
{
	struct rdx_tree_pack *p = arg;
	struct block *b = &p->blk[p->cur];
	const char *c = buf;
	uintptr_t at = (uintptr_t)c, from = (uintptr_t)p->lend;
	bool lend = p->lend && at >= from && len <= p->lend_len &&
		    at - from <= p->lend_len - len;
	int err = 0;

	if (p->cut) {
		archive_set_error(a, ECANCELED, "the walk failed");
		return -1;
	}
	if (!len)
		return 0;
	if (!lend && len >= PACK_DIRECT) {
		err = pack_flush(p);
		if (!err) /* libarchive's caller reuses buf once we return */
			err = pack_out(p, &(struct iovec){ (void *)buf, len }, 1, true);
	} else {
		if (b->n == PACK_SEGS || (!lend && b->fill + len > PACK_BLOCK)) {
			err = pack_flush(p);
			b = &p->blk[p->cur];
		}
		if (!err && lend) {
			block_add(b, c, len);
			p->lent = true;
		} else if (!err) {
			memcpy(b->gather + b->fill, buf, len);
			block_add(b, b->gather + b->fill, len);
			b->fill += len;
		}
		if (!err && b->bytes >= PACK_BLOCK)
			err = pack_flush(p);
	}
	if (err) {
		archive_set_error(a, -err, "%s", strerror(-err));
		return -1;
	}
	return (la_ssize_t)len;
}

/* The name a source is sent under: its last component ("dir/" and
 * "dir/." give "dir"; "." gives the current directory's name).  NULL for
 * "/", which has none. */
char *rdx_tree_top_name(const char *path)
{
	char *real = NULL, *top;
	const char *base, *end;

	end = path + strlen(path);
	while (end > path + 1 && end[-1] == '/')
		end--;
	base = end;
	while (base > path && base[-1] != '/')
		base--;
	if ((end - base == 1 && base[0] == '.') ||
	    (end - base == 2 && base[0] == '.' && base[1] == '.') ||
	    end == base || (end - base == 1 && base[0] == '/')) {
		real = realpath(path, NULL);
		if (!real || strcmp(real, "/") == 0) {
			free(real);
			return NULL;
		}
		top = strdup(strrchr(real, '/') + 1);
		free(real);
		return top;
	}
	return strndup(base, (size_t)(end - base));
}

/* Whether fd is the walked file e, a regular file; *st is its stat. */
static bool is_walked(int fd, struct archive_entry *e, struct stat *st)
{
	return !fstat(fd, st) && S_ISREG(st->st_mode) &&
	       st->st_ino == (ino_t)archive_entry_ino64(e) && st->st_dev == archive_entry_dev(e);
}

/* Opens the file the walk found, by its (absolute) path, and checks that
 * it is still that file: what is read is what was walked, even if a name
 * on the way was replaced since.  The name is opened O_PATH and checked
 * before the file is opened for reading (through /proc/self/fd), so that
 * a device swapped in is never opened and a fifo never waited for;
 * without a /proc that is procfs, by name again, checked again.  *st is
 * the file's stat.  Returns the descriptor, or -errno (-ESTALE: another
 * file is there now). */
static int open_walked(struct archive_entry *e, struct stat *st)
{
	int pfd = open(archive_entry_sourcepath(e), O_PATH | O_CLOEXEC), fd;

	if (pfd < 0)
		return -errno;
	if (!is_walked(pfd, e, st)) {
		close(pfd);
		return -ESTALE;
	}
	fd = rdx_reopen(pfd, O_RDONLY | O_NONBLOCK | O_NOCTTY);
	close(pfd);
	if (fd != -ENOENT && fd != -ESTALE) /* no /proc, or not procfs */
		return fd;
	/* O_NONBLOCK: a fifo put there must not block the open. */
	fd = open(archive_entry_sourcepath(e), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (!is_walked(fd, e, st)) {
		close(fd);
		return -ESTALE;
	}
	return fd;
}

/* Whether a file may have holes: fewer blocks than its size needs (GNU
 * tar's test).  Only such a file is asked for its holes: the walk does
 * not (ARCHIVE_READDISK_NO_SPARSE), which saved libarchive's open, seeks
 * and close of every file. */
static bool maybe_sparse(const struct stat *st)
{
	return st->st_size > 0 && (uint64_t)st->st_blocks * 512 < (uint64_t)st->st_size;
}

/* Gives e the data regions of fd (st its stat), when it has holes: the
 * pax writer then sends them as a sparse file.  Asked only of a file
 * short of blocks, which on a compressing file system (ZFS, btrfs) may be
 * most files, with none: two seeks say so.  A file system that cannot say
 * where its holes are has none to keep, and a file that grew past its
 * walked size is sent whole. */
static void sparse_map(int fd, const struct stat *st, struct archive_entry *e)
{
	off_t size = (off_t)archive_entry_size(e), data = 0, hole;

	if (!maybe_sparse(st))
		return;
	while (data < size) {
		data = lseek(fd, data, SEEK_DATA);
		if (data < 0 && errno == ENXIO)
			break; /* a hole to the end */
		hole = data < 0 ? -1 : lseek(fd, data, SEEK_HOLE);
		if (hole < 0 || hole > size)
			goto dense; /* EINVAL: no holes here; or it grew */
		if (data == 0 && hole == size)
			return; /* no hole after all (compressed, inline) */
		archive_entry_sparse_add_entry(e, data, hole - data);
		data = hole;
	}
	if (!archive_entry_sparse_count(e))
		archive_entry_sparse_add_entry(e, size, 0); /* all hole */
	return;
dense:
	archive_entry_sparse_clear(e);
}

/* Why a file's data was not sent whole. */
static void unread_warn(struct rdx_tree_pack *p, struct archive_entry *e, int err)
{
	if (err == -ESTALE || err == -ENODATA)
		rdx_warn("'%s' changed while it was read; not sent", archive_entry_sourcepath(e));
	else
		rdx_warn("cannot read '%s': %s", archive_entry_sourcepath(e), strerror(-err));
	atomic_fetch_add(&p->unreadable, 1);
}

/* Writes the hash entry that follows a regular file: its XXH3-128, or no
 * bytes at all when the file could not be read whole. */
static int pack_hash(struct archive *w, XXH128_hash_t hash, bool good)
{
	struct archive_entry *e = archive_entry_new();
	XXH128_canonical_t c;
	int ret = 0;

	if (!e)
		return -ENOMEM;
	archive_entry_set_pathname(e, RDX_TREE_HASH_NAME);
	archive_entry_set_filetype(e, AE_IFREG);
	archive_entry_set_perm(e, 0400);
	archive_entry_set_size(e, good ? (la_int64_t)sizeof(c.digest) : 0);
	XXH128_canonicalFromHash(&c, hash);
	if (archive_write_header(w, e) < ARCHIVE_WARN ||
	    (good && archive_write_data(w, c.digest, sizeof(c.digest)) !=
			     (la_ssize_t)sizeof(c.digest)))
		ret = -EPIPE;
	archive_entry_free(e);
	return ret;
}

/* The end of a regular file's entry and its hash.  A short entry is
 * padded with zeros by libarchive; the empty hash tells the receiver to
 * drop it. */
static int pack_close(struct archive *w, XXH128_hash_t hash, bool good)
{
	if (archive_write_finish_entry(w) < ARCHIVE_WARN)
		return -EPIPE;
	return pack_hash(w, hash, good);
}

/* Sends a file read ahead.  Returns 0 or -EPIPE. */
static int pack_ahead(struct rdx_tree_pack *p, struct archive *w, struct item *it)
{
	if (it->err) {
		unread_warn(p, it->e, it->err);
	} else if (it->got) {
		la_ssize_t n;

		p->lend = it->buf;
		p->lend_len = it->got;
		n = archive_write_data(w, it->buf, it->got);
		p->lend = NULL;
		if (n != (la_ssize_t)it->got)
			return -EPIPE;
	}
	return pack_close(w, it->hash, !it->err);
}

/* Sends a regular file's data, read here from fd (taken over; -errno:
 * it could not be opened), and its hash: the whole file, or a sparse
 * one's data regions (the pax writer takes the content in order and
 * drops what falls in the holes).  Returns 0 (a read failure is only
 * counted) or -EPIPE. */
static int pack_read(struct rdx_tree_pack *p, struct archive *w,
		     struct archive_entry *e, XXH3_state_t *h, int fd)
{
	static const char zeros[64 << 10];
	la_int64_t size = archive_entry_size(e), off = 0, len = size, pos = 0;
	bool sparse = archive_entry_sparse_reset(e) > 0;
	int err = 0;

	XXH3_128bits_reset(h);
	if (size && fd < 0)
		err = fd;
	while (!err && (!sparse || archive_entry_sparse_next(e, &off, &len) == ARCHIVE_OK)) {
		if (off > size || len > size - off) {
			err = -ENODATA;
			break;
		}
		for (; pos < off;) {
			size_t gap = off - pos < (la_int64_t)sizeof(zeros)
					     ? (size_t)(off - pos) : sizeof(zeros);

			if (archive_write_data(w, zeros, gap) != (la_ssize_t)gap)
				goto broken;
			pos += (la_int64_t)gap;
		}
		while (!err && pos < off + len) {
			size_t want = off + len - pos < READ_BLOCK ? (size_t)(off + len - pos)
								   : READ_BLOCK;
			ssize_t n = rdx_pread_full(fd, p->rbuf, want, pos);

			if (n < (ssize_t)want) {
				err = n < 0 ? (int)n : -ENODATA; /* shrank */
				if (n <= 0)
					break;
			}
			XXH3_128bits_update(h, p->rbuf, (size_t)n);
			if (archive_write_data(w, p->rbuf, (size_t)n) != n)
				goto broken;
			pos += n;
		}
		if (!sparse)
			break;
	}
	if (fd >= 0)
		close(fd);
	if (err)
		unread_warn(p, e, err);
	return pack_close(w, XXH3_128bits_digest(h), !err);
broken:
	close(fd);
	return -EPIPE;
}

/* Sends a big regular file, fd (taken over, or -errno), read by the
 * readers (read_chunk), chunk by chunk in order, and its hash.  Returns 0
 * (a read failure is only counted), -EPIPE, or the walk's failure when it
 * stopped everything. */
static int pack_big(struct rdx_tree_pack *p, struct archive *w,
		    struct archive_entry *e, XXH3_state_t *h, int fd)
{
	struct ahead *q = &p->q;
	struct bigread b = { .size = (uint64_t)archive_entry_size(e) };
	int err = 0, ret = 0;
	unsigned i;

	XXH3_128bits_reset(h);
	if (fd < 0)
		err = fd;
	else if ((err = rdx_source_open_file(&b.src, fd, NULL)))
		close(fd);
	b.nchunks = (b.size + CHUNK - 1) / CHUNK;
	for (i = 0; i < WINDOW; i++)
		b.w[i].buf = p->win[i];
	pthread_mutex_lock(&q->lock);
	if (!err) {
		q->cur = &b;
		pthread_cond_broadcast(&q->work);
	}
	for (uint64_t k = 0; !err && k < b.nchunks; k++) {
		struct chunk *c = &b.w[k % WINDOW];

		while (!c->done && !q->quit)
			pthread_cond_wait(&q->ready, &q->lock);
		if (!c->done) { /* the walk failed and stopped the readers */
			ret = p->walk_err ? p->walk_err : -ECANCELED;
			break;
		}
		pthread_mutex_unlock(&q->lock);
		if (c->got < 0) {
			err = (int)c->got;
		} else {
			XXH3_128bits_update(h, c->buf, (size_t)c->got);
			if (archive_write_data(w, c->buf, (size_t)c->got) != c->got)
				ret = -EPIPE;
		}
		pthread_mutex_lock(&q->lock);
		c->done = false;
		b.consumed++;
		pthread_cond_broadcast(&q->work);
		if (ret)
			break;
	}
	/* No more claims, and what readers have in hand ends before b. */
	b.claimed = b.nchunks;
	while (b.busy)
		pthread_cond_wait(&q->ready, &q->lock);
	q->cur = NULL;
	pthread_mutex_unlock(&q->lock);
	rdx_source_close(b.src);
	if (ret)
		return ret;
	if (err)
		unread_warn(p, e, err);
	return pack_close(w, XXH3_128bits_digest(h), !err);
}

/* Whether a file goes through pack_big(): big, not sparse (whose holes
 * pack_read() skips), with readers to read it and the chunks' memory. */
static bool use_big(struct rdx_tree_pack *p, struct archive_entry *e)
{
	unsigned i;

	if (archive_entry_size(e) < (la_int64_t)BIG_FILE || archive_entry_sparse_count(e) ||
	    !p->q.nreaders)
		return false;
	for (i = 0; i < WINDOW; i++)
		if (!p->win[i] && posix_memalign((void **)&p->win[i], RDX_DIO_ALIGN, CHUNK)) {
			p->win[i] = NULL;
			return false;
		}
	return true;
}

/* Sends one walked entry.  Returns 0, -EPIPE, or (pack_big) the walk's
 * failure. */
static int pack_entry(struct rdx_tree_pack *p, struct archive *w,
		      struct archive_entry_linkresolver *lr, struct item *it,
		      XXH3_state_t *h)
{
	struct archive_entry *e = it->e, *spare = NULL;
	mode_t type = archive_entry_filetype(e);
	bool ahead = it->ahead && it->err != -EAGAIN, data;
	int r, fd = -EBADF;

	if (p->plan && p->plan->dry_run) {
		if (type == AE_IFREG)
			rdx_info(0, "would send '%s'", archive_entry_pathname(e));
		return 0;
	}
	archive_entry_linkify(lr, &e, &spare);
	if (!e)
		return 0;
	data = type == AE_IFREG && !archive_entry_hardlink(e);
	/* Read here: opened now, and unless a reader found them, for the
	 * holes the header lists. */
	if (data && !ahead && archive_entry_size(e) > 0) {
		struct stat st;

		fd = open_walked(e, &st);
		if (fd >= 0 && !it->ahead)
			sparse_map(fd, &st, e);
	}
	r = archive_write_header(w, e);
	if (r < ARCHIVE_OK && r != ARCHIVE_FATAL)
		rdx_warn("'%s': %s", archive_entry_sourcepath(e), archive_error_string(w));
	if (r < ARCHIVE_WARN || !data) {
		if (fd >= 0)
			close(fd);
		return r == ARCHIVE_FATAL ? -EPIPE : 0;
	}
	if (ahead)
		return pack_ahead(p, w, it);
	return use_big(p, e) ? pack_big(p, w, e, h, fd) : pack_read(p, w, e, h, fd);
}

/* ---- sender: the queue ----------------------------------------------- */

static void item_free(struct item *it)
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
static int queue_put(struct rdx_tree_pack *p, struct item *it)
{
	struct ahead *q = &p->q;
	size_t bytes = it->ahead ? it->size : 0;

	pthread_mutex_lock(&q->lock);
	while (!q->quit && q->items &&
	       (q->items >= AHEAD_ITEMS || q->bytes + bytes > READ_AHEAD))
		pthread_cond_wait(&q->room, &q->lock);
	if (q->quit) {
		pthread_mutex_unlock(&q->lock);
		item_free(it);
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
static struct item *queue_take(struct rdx_tree_pack *p)
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
static void read_ahead(struct item *it)
{
	size_t want = it->size;
	struct stat st;
	ssize_t n;
	int fd;

	fd = open_walked(it->e, &st);
	if (fd < 0) {
		it->err = fd;
		return;
	}
	sparse_map(fd, &st, it->e); /* the item is this reader's until read */
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
static void read_chunk(struct bigread *b, uint64_t k)
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
static void *reader_main(void *arg)
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
			read_chunk(b, k);
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
		read_ahead(it);
		pthread_mutex_lock(&q->lock);
		it->read = true;
		if (it == q->head)
			pthread_cond_signal(&q->ready);
	}
	pthread_mutex_unlock(&q->lock);
	return NULL;
}

/* ---- sender: the walk ------------------------------------------------ */

/* Something the walk could not read: said here, and to the receiver in a
 * RDX_TREE_MISSING_NAME entry ("NAME: why"), which fails it too.
 * Returns 0, -ENOMEM or -ECANCELED. */
static int walk_failed(struct rdx_tree_pack *p, const char *name, const char *why)
{
	struct item *it = calloc(1, sizeof(*it));

	if (!why)
		why = "unknown error";
	rdx_warn("cannot read '%s': %s", name, why);
	if (!it || asprintf(&it->text, "%s: %s", name, why) < 0) {
		free(it);
		return -ENOMEM;
	}
	it->kind = ITEM_MISSING;
	return queue_put(p, it);
}

/* Queues a walked entry (taken over), to be read ahead when it is a small
 * regular file that is sent whole and only once.  Returns 0, -ENOMEM or
 * -ECANCELED. */
static int walk_entry(struct rdx_tree_pack *p, struct archive_entry *e)
{
	mode_t type = archive_entry_filetype(e);
	la_int64_t size = archive_entry_size(e);
	struct item *it;

	if (type == AE_IFSOCK || type == AE_IFCHR || type == AE_IFBLK) {
		rdx_warn("skipping '%s': not a file, directory or symlink",
			 archive_entry_sourcepath(e));
		archive_entry_free(e);
		return 0;
	}
	if (p->plan && plan_walked(p->plan, e)) {
		p->unchanged++;
		archive_entry_free(e);
		return 0;
	}
	it = calloc(1, sizeof(*it));
	if (!it) {
		archive_entry_free(e);
		return -ENOMEM;
	}
	it->kind = ITEM_ENTRY;
	it->e = e;
	if (type == AE_IFREG && size >= 0 && size < BIG_FILE && archive_entry_nlink(e) <= 1 &&
	    !(p->plan && p->plan->dry_run)) {
		it->ahead = true;
		it->size = (size_t)size;
		if (size && !(it->buf = malloc((size_t)size))) {
			item_free(it);
			return -ENOMEM;
		}
		if (!size) { /* nothing to read: not even opened, as before */
			it->hash = XXH3_128bits(NULL, 0);
			it->read = true;
		} else if (!p->q.nreaders) {
			read_ahead(it); /* no reader to do it */
			it->read = true;
		}
	}
	return queue_put(p, it);
}

/* Walks one source.  Returns 0, -ENOMEM or -ECANCELED. */
static int walk_root(struct rdx_tree_pack *p, const char *path, const char *abs)
{
	struct archive *disk = NULL;
	struct archive_entry *e = NULL;
	char *root = strdup(abs), *top = rdx_tree_top_name(path), *name = NULL;
	size_t rlen, cap = 0;
	int ret = 0, r;

	if (!root || !top) {
		p->unwalkable++;
		ret = walk_failed(p, path, !top && root ? "it has no name to send it under"
							: strerror(errno));
		goto out;
	}
	rlen = strlen(root);
	while (rlen > 1 && root[rlen - 1] == '/')
		root[--rlen] = '\0';
	disk = archive_read_disk_new();
	if (!disk) {
		ret = -ENOMEM;
		goto out;
	}
	if (p->follow)
		archive_read_disk_set_symlink_logical(disk);
	else
		archive_read_disk_set_symlink_hybrid(disk); /* sources followed */
	archive_read_disk_set_standard_lookup(disk);
	archive_read_disk_set_behavior(disk, ARCHIVE_READDISK_NO_XATTR |
						     ARCHIVE_READDISK_NO_ACL |
						     ARCHIVE_READDISK_NO_FFLAGS | ARCHIVE_READDISK_NO_SPARSE);
	if (archive_read_disk_open(disk, root) != ARCHIVE_OK) {
		p->unwalkable++;
		ret = walk_failed(p, path, archive_errno(disk) > 0 ? strerror(archive_errno(disk))
								  : archive_error_string(disk));
		goto out;
	}
	for (;;) {
		const char *src, *rest;
		size_t need;

		if (!e && !(e = archive_entry_new())) {
			ret = -ENOMEM;
			break;
		}
		archive_entry_clear(e);
		r = archive_read_next_header2(disk, e);
		if (r == ARCHIVE_EOF)
			break;
		src = archive_entry_pathname(e);
		if (r < ARCHIVE_OK) {
			p->incomplete = true;
			ret = walk_failed(p, src ? src : path, archive_error_string(disk));
			if (ret)
				break;
		}
		if (r == ARCHIVE_FATAL) {
			p->unwalkable++;
			break;
		}
		if (r == ARCHIVE_FAILED || !src) {
			atomic_fetch_add(&p->unreadable, 1);
			continue;
		}
		/* root/x/y is sent as top/x/y. */
		rest = strncmp(src, root, rlen) == 0 ? src + rlen : "";
		if (rlen == 1 && root[0] == '/')
			rest = src; /* unreachable: "/" has no top */
		/* Excluded: not sent, and a directory not walked. */
		if (*rest == '/' && !rdx_rules_pass(p->rules, p->nrules, rest + 1))
			continue;
		archive_read_disk_descend(disk);
		need = strlen(top) + strlen(rest) + 1;
		if (need > cap) {
			char *bigger = realloc(name, need);

			if (!bigger) {
				ret = -ENOMEM;
				break;
			}
			name = bigger;
			cap = need;
		}
		snprintf(name, cap, "%s%s", top, rest);
		archive_entry_copy_sourcepath(e, src);
		archive_entry_copy_pathname(e, name);
		ret = walk_entry(p, e);
		e = NULL; /* the queue's now */
		if (ret)
			break;
	}
out:
	if (disk)
		archive_read_free(disk);
	if (e)
		archive_entry_free(e);
	free(name);
	free(top);
	free(root);
	return ret;
}

static void *walk_main(void *arg)
{
	struct rdx_tree_pack *p = arg;
	int here = open(".", O_RDONLY | O_CLOEXEC);
	char *back = NULL;
	struct item *end;
	unsigned i;
	int ret = 0;

	rdx_thread_name("rdx-walk");
	/* libarchive's walk starts from a descriptor of the working
	 * directory: one we may not read (a user in someone else's home)
	 * failed every source ("statfs failed").  The paths walked are
	 * absolute: walk from "/" then, and come back. */
	if (here >= 0)
		close(here);
	else if ((back = getcwd(NULL, 0)) && chdir("/"))
		rdx_warn("cannot change to '/': %s", strerror(errno));
	for (i = 0; i < p->n && !ret; i++)
		ret = walk_root(p, p->paths[i], p->abs[i]);
	if (back && chdir(back))
		rdx_warn("cannot change back to '%s': %s", back, strerror(errno));
	free(back);
	if (ret == -ECANCELED)
		return NULL;
	p->walk_err = ret;
	end = calloc(1, sizeof(*end));
	if (end) {
		end->kind = ITEM_END;
		queue_put(p, end);
	} else {
		/* Without the item there is no other word: stop the packer. */
		pthread_mutex_lock(&p->q.lock);
		p->walk_err = -ENOMEM;
		p->q.quit = true;
		pthread_cond_broadcast(&p->q.ready);
		pthread_cond_broadcast(&p->q.work);
		pthread_mutex_unlock(&p->q.lock);
	}
	return NULL;
}

/* Starts the walker and the readers.  Returns 0 or -errno. */
static int ahead_start(struct rdx_tree_pack *p)
{
	struct ahead *q = &p->q;
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	unsigned n = p->nreaders ? p->nreaders : 1;
	int ret;

	if (cpus > 0 && n > (unsigned long)cpus)
		n = (unsigned)cpus;
	if (n > MAX_READERS)
		n = MAX_READERS;
	/* The readers first: the walker reads ahead itself if none started. */
	for (q->nreaders = 0; q->nreaders < n; q->nreaders++)
		if (pthread_create(&q->readers[q->nreaders], NULL, reader_main, q))
			break;
	ret = -pthread_create(&q->walker, NULL, walk_main, p);
	q->walking = !ret;
	return ret;
}

static void ahead_destroy(struct ahead *q)
{
	pthread_cond_destroy(&q->room);
	pthread_cond_destroy(&q->ready);
	pthread_cond_destroy(&q->work);
	pthread_mutex_destroy(&q->lock);
}

/* Stops and joins the walker and the readers, and frees what is queued. */
static void ahead_stop(struct rdx_tree_pack *p)
{
	struct ahead *q = &p->q;
	struct item *it;
	unsigned i;

	pthread_mutex_lock(&q->lock);
	q->quit = true;
	pthread_cond_broadcast(&q->room);
	pthread_cond_broadcast(&q->work);
	pthread_mutex_unlock(&q->lock);
	if (q->walking)
		pthread_join(q->walker, NULL);
	for (i = 0; i < q->nreaders; i++)
		pthread_join(q->readers[i], NULL);
	while ((it = q->head)) {
		q->head = it->next;
		item_free(it);
	}
	q->tail = NULL;
}

/* ---- sender: the stream ---------------------------------------------- */

static void *pack_main(void *arg)
{
	struct rdx_tree_pack *p = arg;
	struct archive *w = archive_write_new();
	struct archive_entry_linkresolver *lr = archive_entry_linkresolver_new();
	XXH3_state_t *h = XXH3_createState();
	struct archive_entry *e = NULL, *spare = NULL;
	struct item *it = NULL;
	int ret = 0;

	rdx_thread_name("rdx-pack");
	p->rbuf = malloc(READ_BLOCK);
	for (unsigned i = 0; i < 2; i++) {
		p->blk[i].gather = malloc(PACK_BLOCK);
		block_reset(&p->blk[i]);
	}
	if (!w || !lr || !h || !p->rbuf || !p->blk[0].gather || !p->blk[1].gather) {
		ret = -ENOMEM;
		goto out;
	}
	archive_write_set_format_pax_restricted(w);
	/* Names are bytes, as on disk: no translation through the locale
	 * (which fails for non-ASCII under LANG=C). */
	archive_write_set_format_option(w, "pax", "hdrcharset", "BINARY");
	archive_write_set_bytes_per_block(w, 0); /* pack_write() gathers */
	archive_entry_linkresolver_set_strategy(lr, archive_format(w));
	if (archive_write_open2(w, p, NULL, pack_write, NULL, NULL) != ARCHIVE_OK) {
		ret = -EPIPE;
		goto out;
	}
	ret = ahead_start(p);
	while (!ret && (it = queue_take(p)) && it->kind != ITEM_END) {
		if (it->kind == ITEM_MISSING)
			ret = pack_marker(w, RDX_TREE_MISSING_NAME, it->text);
		else
			ret = pack_entry(p, w, lr, it, h);
		if (p->lent) { /* kept until the core took the current block */
			struct block *b = &p->blk[p->cur];

			p->lent = false;
			it->next = NULL;
			*b->tail = it;
			b->tail = &it->next;
		} else {
			item_free(it);
		}
		it = NULL;
	}
	if (!ret && !it)
		ret = p->walk_err ? p->walk_err : -ENOMEM;
	if (!ret)
		ret = p->walk_err;
	/* What the walk could not see must not be taken for gone. */
	if (!ret && p->plan && p->plan->delete) {
		if (p->unwalkable || atomic_load(&p->unreadable) || p->incomplete)
			rdx_warn("--delete: nothing deleted, the sources were not all read");
		else
			ret = pack_deletes(p->plan, p->rules, p->nrules, w);
	}
	/* The pax strategy defers nothing, but the contract is to ask. */
	while (!ret) {
		archive_entry_linkify(lr, &e, &spare);
		if (!e)
			break;
		if (archive_write_header(w, e) == ARCHIVE_FATAL)
			ret = -EPIPE;
	}
	/* Closing after a failure only fails again, but frees what
	 * archive_write_fail() would leak.  A failure of ours (not of the
	 * stream) must not end the archive as if it were whole. */
	p->cut = ret && ret != -EPIPE;
	if (w && archive_write_close(w) != ARCHIVE_OK && !ret)
		ret = -EPIPE;
	if (!ret && pack_flush(p))
		ret = -EPIPE;
out:
	pack_drain(p); /* before the buffers go */
	item_free(it);
	ahead_stop(p);
	if (w)
		archive_write_free(w);
	archive_entry_linkresolver_free(lr);
	XXH3_freeState(h);
	free(p->rbuf);
	for (unsigned i = 0; i < 2; i++) {
		block_reset(&p->blk[i]);
		free(p->blk[i].gather);
	}
	for (unsigned i = 0; i < WINDOW; i++)
		free(p->win[i]);
	p->err = ret;
	if (p->fd >= 0)
		close(p->fd); /* the reader sees the end of the stream */
	else
		tree_feed_mark(&p->out, &p->out.eof);
	return NULL;
}

ssize_t rdx_tree_pack_read(struct rdx_tree_pack *p, void *buf, size_t cap,
			   const atomic_int *stop)
{
	struct feed *f = &p->out;
	size_t got = 0;
	ssize_t ret;

	pthread_mutex_lock(&f->lock);
	while (got < cap) {
		const struct iovec *v;
		size_t n;

		while (!f->iov && !f->eof && !(stop && atomic_load(stop)))
			tree_feed_wait(f);
		if (!f->iov)
			break;
		v = &f->iov[f->seg];
		n = v->iov_len - f->off < cap - got ? v->iov_len - f->off : cap - got;
		memcpy((char *)buf + got, (const char *)v->iov_base + f->off, n);
		got += n;
		f->off += n;
		if (f->off == v->iov_len) {
			f->off = 0;
			if (++f->seg == f->niov) {
				f->iov = NULL;
				pthread_cond_broadcast(&f->cond);
			}
		}
	}
	ret = got || f->eof ? (ssize_t)got : -ECANCELED;
	pthread_mutex_unlock(&f->lock);
	return ret;
}

void rdx_tree_pack_close_input(struct rdx_tree_pack *p)
{
	tree_feed_mark(&p->out, &p->out.gone);
}

int rdx_tree_pack_start(struct rdx_tree_pack **out,
			const struct rdx_tree_pack_opts *o, int *fd)
{
	struct rdx_tree_pack *p = calloc(1, sizeof(*p));
	unsigned i, n = o->n;
	int fds[2], ret;

	if (!p) {
		rdx_tree_plan_free(o->plan);
		return -ENOMEM;
	}
	p->plan = o->plan;
	p->rules = o->rules;
	p->nrules = o->nrules;
	p->paths = calloc(n ? n : 1, sizeof(*p->paths));
	if (!p->paths) {
		rdx_tree_plan_free(p->plan);
		free(p);
		return -ENOMEM;
	}
	p->abs = calloc(n ? n : 1, sizeof(*p->abs));
	for (i = 0; i < n && p->abs; i++) {
		char *cwd = o->paths[i][0] == '/' ? NULL : getcwd(NULL, 0);

		p->paths[i] = strdup(o->paths[i]);
		/* The walk moves the working directory: absolute source
		 * paths can be opened again from any thread (--checksum). */
		if (o->paths[i][0] == '/')
			p->abs[i] = strdup(o->paths[i]);
		else if (cwd && asprintf(&p->abs[i], "%s/%s", cwd, o->paths[i]) < 0)
			p->abs[i] = NULL;
		free(cwd);
		if (!p->paths[i] || !p->abs[i]) {
			ret = -ENOMEM;
			goto err;
		}
	}
	if (!p->abs) {
		ret = -ENOMEM;
		goto err;
	}
	p->n = n;
	p->follow = o->follow;
	p->nreaders = o->readers;
	p->fd = -1;
	pthread_mutex_init(&p->q.lock, NULL);
	pthread_cond_init(&p->q.work, NULL);
	pthread_cond_init(&p->q.ready, NULL);
	pthread_cond_init(&p->q.room, NULL);
	if (fd) {
		ret = tree_new_pipe(fds);
		if (ret)
			goto err;
		p->fd = fds[1];
	}
	tree_feed_init(&p->out);
	ret = -pthread_create(&p->thread, NULL, pack_main, p);
	if (ret) {
		ahead_destroy(&p->q);
		tree_feed_destroy(&p->out);
		if (fd) {
			close(fds[0]);
			close(fds[1]);
		}
		goto err;
	}
	if (fd)
		*fd = fds[0];
	*out = p;
	return 0;
err:
	for (i = 0; i < n; i++) {
		free(p->paths[i]);
		if (p->abs)
			free(p->abs[i]);
	}
	free(p->paths);
	free(p->abs);
	rdx_tree_plan_free(p->plan);
	free(p);
	return ret;
}

int rdx_tree_pack_finish(struct rdx_tree_pack *p)
{
	unsigned i, failed;
	int ret;

	pthread_join(p->thread, NULL);
	failed = p->unwalkable + atomic_load(&p->unreadable);
	ret = p->err && p->err != -EPIPE ? p->err : failed ? -RDX_ELOCAL : 0;
	if (p->err && p->err != -EPIPE)
		rdx_error("cannot send the tree: %s", strerror(-p->err));
	if (failed)
		rdx_error("%u file%s could not be read (named above)", failed,
			  failed == 1 ? "" : "s");
	if (p->plan)
		rdx_info(1, "--sync: %llu unchanged file%s not sent",
			 (unsigned long long)p->unchanged, p->unchanged == 1 ? "" : "s");
	for (i = 0; i < p->n; i++) {
		free(p->paths[i]);
		free(p->abs[i]);
	}
	free(p->paths);
	free(p->abs);
	rdx_tree_plan_free(p->plan);
	ahead_destroy(&p->q);
	tree_feed_destroy(&p->out);
	free(p);
	return ret;
}
