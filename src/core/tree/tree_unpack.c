/* The receiver's side of a tree: parse the pax stream and make what it
 * holds under the destination, every received name checked and every
 * regular file published only once its hash matched. */
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
#define STAGE (1u << 20) /* aligned staging for O_DIRECT */
/* Smaller files are verified whole in memory and handed to writer
 * threads, at most this many bytes of them at a time. */
#define WRITE_QUEUE (16u << 20)
/* The unpacker is woken with half the queue free: any file fits then. */
_Static_assert(BIG_FILE <= WRITE_QUEUE / 2 && STAGE <= WRITE_QUEUE / 2,
	       "a file or a stage fits in half the write queue");
/* Stages kept for reuse: a fresh 1 MiB buffer is a fresh mapping, and
 * faulting in and zeroing its pages cost more than the copy into it. */
#define SPARE_STAGES (WRITE_QUEUE / STAGE + 2)
#define MAX_WRITERS 64

/* ---- receiver: unpack ------------------------------------------------- */

/* A directory descriptor shared by the unpacking thread and the writes
 * queued into it. */
struct dirref {
	int fd;
	atomic_uint refs;
};

static struct dirref *dir_hold(struct dirref *d)
{
	atomic_fetch_add(&d->refs, 1);
	return d;
}

static void dir_drop(struct dirref *d)
{
	if (d && atomic_fetch_sub(&d->refs, 1) == 1) {
		close(d->fd);
		free(d);
	}
}

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
	uint8_t want[16]; /* the XXH3-128 the writer checks */
	struct rdx_sink *sink; /* a big file's: stage holds len bytes at off */
	char *stage;
	uint64_t off;
	uint64_t name_hash; /* of final (name_hash()) */
	char data[];
};

/* The writer threads.  Each has its own queue, and a file goes to the
 * queue its name hashes to, so two files of one name are written in the
 * stream's order.  The stream goes on from directory to directory while
 * they write (each file holds its directory's descriptor); a directory,
 * symlink or fifo waits for them only when a file of its name may be
 * among theirs (IN_FLIGHT counts by name hash), and a hard link, a big
 * or sparse file and a removal wait for all of them (writers_wait). */
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
	unsigned n;	 /* started; 0: the unpacking thread writes */
	uint64_t bytes;	 /* queued or being written */
	unsigned busy;	 /* files queued or being written */
	unsigned in_flight[IN_FLIGHT]; /* of busy, by name_hash() % IN_FLIGHT */
	unsigned turn;	 /* the writer of the next stage */
	char *spare[SPARE_STAGES]; /* stages written, for reuse */
	unsigned nspare;
	bool quit;
	atomic_bool anon_ok; /* O_TMPFILE works here (until it fails) */
	atomic_bool corrupt; /* a writer found a file that fails its hash */
	char *corrupt_name;  /* the first one */
};

struct rdx_tree_unpack {
	pthread_t thread;
	int fd;		  /* the stream's read end (the thread's), or -1: fed */
	struct feed feed;
	char *root;	  /* realpath of the extraction root: no symlink */
	size_t rootlen;
	int root_fd;	  /* the root, opened (O_PATH) */
	char *checked;	  /* the directory checked last: no symlink in it */
	struct dirref *checked_dir; /* ... opened from root_fd, not following one */
	char *rename_top; /* dst's name when it is created, else NULL */
	bool over_file;	  /* ... and a file of that name is there to replace */
	char *top_seen;	  /* the first entry's first component */
	/* What the receiving side asked for (rdx_tree_unpack_opts): the
	 * names allowed at the top, each NULL one taken by the first name
	 * the sender picks for it (tops_taken[i]); ntops 0: any. */
	char **tops;
	char **tops_taken;
	unsigned ntops;
	bool files_only;
	bool allow_delete;
	bool keep_setid;
	bool as_root;
	const atomic_int *stop;
	void *buf;
	XXH3_state_t *hash;
	/* The regular file waiting for its hash entry. */
	char *pend_final; /* NULL: none */
	char *pend_tmp;	  /* a sparse file's temporary in pend_dir; NULL: see below */
	struct dirref *pend_dir;
	struct rdx_sink *pend_sink; /* a big file */
	struct job *pend_job; /* a small file; none of the three: it failed */
	struct writers w;
	unsigned nwriters; /* wanted */
	atomic_int stage_err; /* the first failed write of pend_sink's stages */
	_Atomic uint64_t files, bytes;
	atomic_uint failed; /* entries named in a warning */
	unsigned missing;   /* ... of them the sender could not read */
	int err; /* fatal: the first one (the unpacking thread's) */
	char why[256];
	/* Directories whose mode and times wait for the end, the last one
	 * received first.  libarchive's walk sends a directory's entry when
	 * it lists the parent and what it holds later, after its siblings,
	 * so no directory is known to be complete before the end. */
	struct dirfix *dirs;
};

/* A received directory's metadata, set at the end (dirs_finish): about
 * 60 bytes and its name per directory, as libarchive's own list was. */
struct dirfix {
	struct dirfix *next;
	struct tree_meta m;
	uint64_t seq; /* received as the seq-th directory */
	size_t len;
	char full[]; /* its absolute name, no trailing slash */
};

static int unpack_fail(struct rdx_tree_unpack *u, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int unpack_fail(struct rdx_tree_unpack *u, int err, const char *fmt, ...)
{
	va_list ap;

	if (!u->err) {
		u->err = err;
		va_start(ap, fmt);
		vsnprintf(u->why, sizeof(u->why), fmt, ap);
		va_end(ap);
	}
	return err;
}

/* Fed mode: gives back the buffer read last, then waits for the next
 * one (or the end, or a stop). */
static la_ssize_t feed_read(struct rdx_tree_unpack *u, struct archive *a, const void **buf)
{
	struct feed *f = &u->feed;
	la_ssize_t n = 0;

	pthread_mutex_lock(&f->lock);
	if (f->held) {
		f->held = false;
		f->buf = NULL;
		pthread_cond_broadcast(&f->cond);
	}
	while (!f->buf && !f->eof && !atomic_load(u->stop))
		tree_feed_wait(f);
	if (f->buf) {
		f->held = true;
		*buf = f->buf;
		n = (la_ssize_t)f->len;
	} else if (!f->eof) {
		archive_set_error(a, ECANCELED, "stopped");
		n = -1;
	}
	pthread_mutex_unlock(&f->lock);
	return n;
}

/* The unpacker reads no more: a writer waiting in feed returns. */
static void feed_gone(struct rdx_tree_unpack *u)
{
	pthread_mutex_lock(&u->feed.lock);
	u->feed.gone = true;
	u->feed.held = false;
	u->feed.buf = NULL;
	pthread_cond_broadcast(&u->feed.cond);
	pthread_mutex_unlock(&u->feed.lock);
}

int rdx_tree_unpack_feed(struct rdx_tree_unpack *u, const void *buf, size_t len)
{
	struct feed *f = &u->feed;
	int ret = 0;

	if (!len)
		return 0;
	pthread_mutex_lock(&f->lock);
	while ((f->buf || f->held) && !f->gone)
		pthread_cond_wait(&f->cond, &f->lock);
	if (f->gone) {
		pthread_mutex_unlock(&f->lock);
		return -EPIPE;
	}
	f->buf = buf;
	f->len = len;
	pthread_cond_broadcast(&f->cond);
	/* Until the unpacker gives it back: libarchive may point into it. */
	while (f->buf == buf && !f->gone)
		pthread_cond_wait(&f->cond, &f->lock);
	if (f->buf == buf) { /* it stopped without reading it all */
		f->buf = NULL;
		f->held = false;
		ret = -EPIPE;
	}
	pthread_mutex_unlock(&f->lock);
	return ret;
}

void rdx_tree_unpack_end_feed(struct rdx_tree_unpack *u)
{
	tree_feed_mark(&u->feed, &u->feed.eof);
}

static la_ssize_t unpack_read(struct archive *a, void *arg, const void **buf)
{
	struct rdx_tree_unpack *u = arg;
	ssize_t n;

	if (u->fd < 0)
		return feed_read(u, a, buf);
	do
		n = read(u->fd, u->buf, UNPACK_BUF);
	while (n < 0 && errno == EINTR);
	if (n < 0) {
		archive_set_error(a, errno, "%s", strerror(errno));
		return -1;
	}
	*buf = u->buf;
	return n;
}

/* A local name as the user sees it: relative to the root. */
static const char *shown(const struct rdx_tree_unpack *u, const char *full)
{
	if (!strncmp(full, u->root, u->rootlen) && full[u->rootlen] == '/')
		return full + u->rootlen + 1;
	return full;
}

static void writers_wait(struct rdx_tree_unpack *u);
static void writers_submit(struct rdx_tree_unpack *u, struct job *j);
static int writers_failed(struct rdx_tree_unpack *u);

/* Leaves the directory checked last; files the writers still have for
 * it hold its descriptor. */
static void drop_checked(struct rdx_tree_unpack *u)
{
	dir_drop(u->checked_dir);
	u->checked_dir = NULL;
	free(u->checked);
	u->checked = NULL;
}

/* Leaves it once every write is done: after a removal, what was checked
 * may be gone. */
static void forget_checked(struct rdx_tree_unpack *u)
{
	writers_wait(u);
	drop_checked(u);
}

/* rdx_dir_beneath(), kept for the directory opened last: entries come
 * directory by directory.  Only a symlink or a removal made since can
 * change the answer, and those forget it (unpack_entry, take_delete); an
 * entry inside the directory cannot replace the directory itself.  While
 * a file waits for its hash nothing else is mapped, so it keeps its
 * directory. */
static int parents_checked(struct rdx_tree_unpack *u, const char *full, bool make)
{
	const char *slash = strrchr(full, '/');
	size_t len = slash ? (size_t)(slash - full) : 0;
	int err, fd;

	if (u->checked && strlen(u->checked) == len && !memcmp(u->checked, full, len))
		return 0;
	drop_checked(u);
	err = rdx_dir_beneath(u->root_fd, full + u->rootlen + 1, make, &fd);
	if (err || fd < 0)
		return err;
	u->checked = strndup(full, len);
	u->checked_dir = malloc(sizeof(*u->checked_dir));
	if (!u->checked || !u->checked_dir) {
		close(fd);
		free(u->checked_dir);
		u->checked_dir = NULL;
		free(u->checked);
		u->checked = NULL;
		return -ENOMEM;
	}
	*u->checked_dir = (struct dirref){ .fd = fd, .refs = 1 };
	return 0;
}

/* Whether the sender may send under the top-level name in[0..len): one
 * the receiving side asked for.  A name the sender picks for a source
 * that did not say it (a NULL top) is kept, and holds for later entries. */
static bool top_allowed(struct rdx_tree_unpack *u, const char *in, size_t len)
{
	unsigned i;

	if (!u->ntops)
		return true;
	for (i = 0; i < u->ntops; i++) {
		const char *t = u->tops[i] ? u->tops[i] : u->tops_taken[i];

		if (t && strlen(t) == len && !memcmp(t, in, len))
			return true;
	}
	for (i = 0; i < u->ntops; i++) {
		if (u->tops[i] || u->tops_taken[i])
			continue;
		u->tops_taken[i] = strndup(in, len);
		return u->tops_taken[i] != NULL;
	}
	return false;
}

/* The local name for a received one: checked, and with the top component
 * replaced by dst's name when dst is created.  Returns a new string (the
 * absolute name), or NULL with the failure recorded. */
static char *full_name(struct rdx_tree_unpack *u, const char *in)
{
	const char *slash;
	size_t toplen;
	char *out;

	if (!in || !tree_name_safe(in) || in[strlen(in) - 1] == '/') {
		unpack_fail(u, -RDX_EPROTO, "refused an unsafe name from the sender: '%s'",
			    in ? in : "");
		return NULL;
	}
	slash = strchrnul(in, '/');
	toplen = (size_t)(slash - in);
	if (!top_allowed(u, in, toplen)) {
		unpack_fail(u, -RDX_EPROTO, "refused '%s' from the sender: not what was asked for",
			    in);
		return NULL;
	}
	if (!u->top_seen) {
		u->top_seen = strndup(in, toplen);
		if (!u->top_seen) {
			unpack_fail(u, -ENOMEM, "out of memory");
			return NULL;
		}
	} else if (u->rename_top &&
		   (strlen(u->top_seen) != toplen || memcmp(in, u->top_seen, toplen))) {
		unpack_fail(u, -RDX_ELOCAL,
			    "several trees were sent but '%s' is not a directory",
			    u->rename_top);
		return NULL;
	}
	if (asprintf(&out, "%s/%s%s", u->root, u->rename_top ? u->rename_top : "",
		     u->rename_top ? slash : in) < 0) {
		unpack_fail(u, -ENOMEM, "out of memory");
		return NULL;
	}
	return out;
}

/* Records why a directory on the way to the received name in could not
 * be opened (err, -errno), and returns u->err. */
static int dir_failed(struct rdx_tree_unpack *u, const char *in, int err)
{
	if (err == -ELOOP)
		return unpack_fail(u, -RDX_EPROTO, "refused to write through a symlink: '%s'", in);
	return unpack_fail(u, -RDX_ELOCAL, "cannot check '%s': %s", in, strerror(-err));
}

/* full_name(), with the directory it is in opened as u->checked_dir:
 * made when make is set, else possibly absent (checked_dir NULL).  NULL
 * with the failure recorded. */
static char *map_name(struct rdx_tree_unpack *u, const char *in, bool make)
{
	char *out = full_name(u, in);
	int err;

	if (!out)
		return NULL;
	err = parents_checked(u, out, make);
	if (err) {
		dir_failed(u, in, err);
		free(out);
		return NULL;
	}
	return out;
}

/* The last component of a name. */
static const char *base_name(const char *name)
{
	const char *slash = strrchr(name, '/');

	return slash ? slash + 1 : name;
}

static void job_free(struct job *j)
{
	if (j) {
		dir_drop(j->dir);
		free(j->final);
		free(j->stage);
		free(j);
	}
}

static void drop_pending(struct rdx_tree_unpack *u)
{
	rdx_sink_close(u->pend_sink); /* removes its temporary unless published */
	u->pend_sink = NULL;
	job_free(u->pend_job);
	u->pend_job = NULL;
	if (u->pend_tmp)
		unlinkat(u->pend_dir->fd, u->pend_tmp, 0);
	dir_drop(u->pend_dir);
	u->pend_dir = NULL;
	free(u->pend_tmp);
	free(u->pend_final);
	u->pend_tmp = u->pend_final = NULL;
}

/* The hash entry after a regular file: publish the file or drop it. */
static int take_hash(struct rdx_tree_unpack *u, struct archive *rd,
		     struct archive_entry *e)
{
	XXH128_canonical_t got;
	uint8_t want[sizeof(got.digest) + 1];
	la_ssize_t n;

	if (!u->pend_final)
		return unpack_fail(u, -RDX_EPROTO, "malformed tree stream: a hash with no file");
	if (archive_entry_size(e) != 0 && archive_entry_size(e) != (la_int64_t)sizeof(got.digest))
		return unpack_fail(u, -RDX_EPROTO, "malformed tree stream: hash of %lld bytes",
				   (long long)archive_entry_size(e));
	n = archive_read_data(rd, want, sizeof(want));
	if (n < 0)
		return unpack_fail(u, -RDX_EPROTO, "malformed tree stream: %s",
				   archive_error_string(rd));
	if (n == 0) {
		rdx_warn("'%s' was not sent: the sender could not read it", shown(u, u->pend_final));
		u->failed++;
		u->missing++;
	} else if (!u->pend_tmp && !u->pend_sink && !u->pend_job) {
		/* failed here; named already */
	} else if (u->pend_job) {
		if (n != (la_ssize_t)sizeof(got.digest))
			return unpack_fail(u, -RDX_EPROTO, "malformed tree stream: a short hash");
		memcpy(u->pend_job->want, want, sizeof(u->pend_job->want));
		writers_submit(u, u->pend_job); /* checked, then counted, when written */
		u->pend_job = NULL;
	} else {
		int ret;

		XXH128_canonicalFromHash(&got, XXH3_128bits_digest(u->hash));
		if (n != (la_ssize_t)sizeof(got.digest) || memcmp(want, got.digest, sizeof(got.digest))) {
			unpack_fail(u, -RDX_EINTEGRITY,
				    "data of '%s' corrupted in transit (xxh3-128 mismatch)",
				    shown(u, u->pend_final));
			drop_pending(u);
			return u->err;
		}
		if (u->pend_sink) {
			ret = rdx_sink_publish(u->pend_sink);
		} else {
			ret = tree_place(u->pend_dir->fd, u->pend_tmp, base_name(u->pend_final));
			free(u->pend_tmp); /* renamed, or removed */
			u->pend_tmp = NULL;
		}
		if (ret) {
			rdx_warn("cannot create '%s': %s", shown(u, u->pend_final), strerror(-ret));
			u->failed++;
		} else {
			atomic_fetch_add(&u->files, 1);
		}
	}
	drop_pending(u);
	return 0;
}

/* What the sender could not read (RDX_TREE_MISSING_NAME: its name and
 * why, as the sender said it): shown with anything unprintable as '?',
 * and counted as a failure. */
static int take_missing(struct rdx_tree_unpack *u, struct archive *rd,
			struct archive_entry *e)
{
	la_int64_t size = archive_entry_size(e);
	char name[4097];
	la_ssize_t n;

	if (u->pend_final)
		return unpack_fail(u, -RDX_EPROTO, "malformed tree stream: no hash after '%s'",
				   shown(u, u->pend_final));
	if (size <= 0 || size >= (la_int64_t)sizeof(name))
		return unpack_fail(u, -RDX_EPROTO, "malformed tree stream: a missing entry of %lld bytes",
				   (long long)size);
	n = archive_read_data(rd, name, sizeof(name) - 1);
	if (n != size)
		return unpack_fail(u, -RDX_EPROTO, "malformed tree stream: a bad missing entry");
	for (la_ssize_t i = 0; i < n; i++)
		if ((unsigned char)name[i] < 0x20 || name[i] == 0x7f)
			name[i] = '?';
	name[n] = '\0';
	rdx_warn("not sent, the sender could not read it: %s", name);
	u->failed++;
	u->missing++;
	return 0;
}

/* Removes base_name(full) from dir.  A failure is named and counted. */
static void delete_in(struct rdx_tree_unpack *u, int dir, const char *full)
{
	struct stat st;

	if (fstatat(dir, base_name(full), &st, AT_SYMLINK_NOFOLLOW))
		return; /* not there: nothing to do */
	if (unlinkat(dir, base_name(full), S_ISDIR(st.st_mode) ? AT_REMOVEDIR : 0)) {
		rdx_warn("cannot delete '%s': %s", shown(u, full), strerror(errno));
		u->failed++;
		return;
	}
	rdx_info(1, "deleted '%s'", shown(u, full));
}

/* A removal entry (--delete): the receiver's own entry, named as the
 * sender names it, checked like any other name. */
static int take_delete(struct rdx_tree_unpack *u, struct archive *rd,
		       struct archive_entry *e)
{
	la_int64_t size = archive_entry_size(e);
	char name[4097], *full;
	la_ssize_t n;

	if (u->pend_final)
		return unpack_fail(u, -RDX_EPROTO, "malformed tree stream: no hash after '%s'",
				   shown(u, u->pend_final));
	if (!u->allow_delete)
		return unpack_fail(u, -RDX_EPROTO,
				   "the sender asked to delete files, but --delete was not given here");
	writers_wait(u); /* the name may be one being written */
	if (writers_failed(u))
		return u->err; /* a stream that corrupted a file deletes nothing */
	if (size <= 0 || size >= (la_int64_t)sizeof(name))
		return unpack_fail(u, -RDX_EPROTO, "malformed tree stream: a removal of %lld bytes",
				   (long long)size);
	n = archive_read_data(rd, name, sizeof(name) - 1);
	if (n != size || memchr(name, '\0', (size_t)n))
		return unpack_fail(u, -RDX_EPROTO, "malformed tree stream: a bad removal");
	name[n] = '\0';
	full = map_name(u, name, false);
	if (!full)
		return u->err;
	if (u->checked_dir)
		delete_in(u, u->checked_dir->fd, full);
	free(full);
	forget_checked(u); /* what was checked may be gone */
	return 0;
}

/* Where copy_data() puts an entry's data: returns 0 or -errno. */
typedef int (*put_fn)(void *arg, const void *buf, size_t len, uint64_t off);

/* Reads an entry's data block by block, hashing it into h (unless NULL)
 * and counting it, into put().  Blocks must follow each other unless
 * holes are allowed (a sparse file, unpack_sparse).  Returns 0 or a fatal
 * code; when put() fails the rest of the data is skipped and *put_err is
 * its error. */
static int copy_data(struct rdx_tree_unpack *u, struct archive *rd, bool holes,
		     XXH3_state_t *h, put_fn put, void *arg, int *put_err)
{
	const void *buf;
	size_t size;
	la_int64_t off;
	uint64_t next = 0;
	int r;

	*put_err = 0;
	if (h)
		XXH3_128bits_reset(h);
	for (;;) {
		if (atomic_load(u->stop))
			return unpack_fail(u, -ECANCELED, "stopped");
		r = archive_read_data_block(rd, &buf, &size, &off);
		if (r == ARCHIVE_EOF)
			return 0;
		if (r < ARCHIVE_WARN)
			return unpack_fail(u, -RDX_EPROTO, "malformed tree stream: %s",
					   archive_error_string(rd));
		if (!holes && (uint64_t)off != next)
			return unpack_fail(u, -RDX_EPROTO, "malformed tree stream: a hole in '%s'",
					   shown(u, u->pend_final));
		next = (uint64_t)off + size;
		if (h)
			XXH3_128bits_update(h, buf, size);
		atomic_fetch_add(&u->bytes, size);
		*put_err = put(arg, buf, size, (uint64_t)off);
		if (*put_err) {
			archive_read_data_skip(rd);
			return 0;
		}
	}
}

static void file_meta(const struct rdx_tree_unpack *u, struct archive *wd,
		      struct archive_entry *e, struct tree_meta *m)
{
	m->uid = (uid_t)archive_write_disk_uid(wd, archive_entry_uname(e), archive_entry_uid(e));
	m->gid = (gid_t)archive_write_disk_gid(wd, archive_entry_gname(e), archive_entry_gid(e));
	m->mode = archive_entry_perm(e) & (u->as_root && u->keep_setid ? 07777 : 01777);
	m->times[1] = (struct timespec){ archive_entry_mtime(e), archive_entry_mtime_nsec(e) };
	m->times[0] = archive_entry_atime_is_set(e)
		? (struct timespec){ archive_entry_atime(e), archive_entry_atime_nsec(e) }
		: m->times[1];
}

/* A file's owner, mode and times, then its data, through fd. */
static int write_fd(struct rdx_tree_unpack *u, struct job *j, int fd)
{
	ssize_t n = j->len ? rdx_pwrite_full(fd, j->data, j->len, 0) : 0;

	return n < 0 ? (int)n : tree_set_meta(fd, &j->m, u->as_root);
}

/* Written under a temporary name, then renamed over the final one.
 * Returns 0 or -errno; *what says which step failed. */
static int write_named(struct rdx_tree_unpack *u, struct job *j, const char **what)
{
	char *tmp = NULL;
	int fd = rdx_temp_create(j->dir->fd, base_name(j->final), O_WRONLY, &tmp), err;

	if (fd < 0)
		return fd;
	err = write_fd(u, j, fd);
	if (close(fd) && !err)
		err = -errno;
	if (err) {
		unlinkat(j->dir->fd, tmp, 0);
	} else {
		*what = "create";
		err = tree_place(j->dir->fd, tmp, base_name(j->final));
	}
	free(tmp);
	return err;
}

/* Written as an unnamed file (O_TMPFILE) that is linked under its final
 * name once complete: one change to the directory instead of a create and
 * a rename, which is what writers queue for on the directory's lock.  A
 * name that is taken is replaced through a temporary link and a rename.
 * Returns 0, -errno (*what says which step), or 1 when the file system or
 * the system cannot do it (the caller writes it with write_named()). */
static int write_anon(struct rdx_tree_unpack *u, struct job *j, const char **what)
{
	struct rdx_tmpfile t = { .name = NULL };
	int err;

	/* Made with its permission bits (no one can open it before it is
	 * linked), so that the umask and a default ACL aside, its mode
	 * needs no change of its own (tree_set_meta). */
	t.fd = openat(j->dir->fd, ".", O_TMPFILE | O_WRONLY | O_CLOEXEC, j->m.mode & 0777);
	if (t.fd < 0)
		return errno == EOPNOTSUPP || errno == EISDIR || errno == EINVAL ? 1 : -errno;
	err = write_fd(u, j, t.fd);
	if (!err) {
		*what = "create";
		err = rdx_tmpfile_publish(&t, j->dir->fd, base_name(j->final), true);
		if (err == -ENOENT || err == -EPERM)
			err = 1; /* neither /proc nor the capability to link it */
	}
	close(t.fd); /* unlinked, it goes with its descriptor */
	return err;
}

/* Writes a big file's stage, or a small file once it matches its hash:
 * through its directory's descriptor, unnamed and then linked, or under a
 * temporary name and then renamed.  Any thread; nothing once stopped (a
 * stage left out fails its file). */
static void write_job(struct rdx_tree_unpack *u, struct job *j)
{
	const char *what = "write";
	XXH128_canonical_t got;
	int err = 1, none = 0;

	if (j->sink) {
		err = atomic_load(u->stop) ? -ECANCELED
					   : rdx_sink_write(j->sink, j->stage, j->len, j->off);
		if (err)
			atomic_compare_exchange_strong(&u->stage_err, &none, err);
		return;
	}

	XXH128_canonicalFromHash(&got, XXH3_128bits(j->data, j->len));
	if (memcmp(got.digest, j->want, sizeof(got.digest))) {
		struct writers *w = &u->w;

		pthread_mutex_lock(&w->lock);
		if (!w->corrupt_name)
			w->corrupt_name = strdup(j->final);
		atomic_store(&w->corrupt, true);
		pthread_mutex_unlock(&w->lock);
		return;
	}
	if (atomic_load(&u->w.anon_ok)) {
		err = write_anon(u, j, &what);
		if (err == 1)
			atomic_store(&u->w.anon_ok, false);
	}
	if (err == 1) {
		what = "write";
		err = write_named(u, j, &what);
	}
	if (err) {
		rdx_warn("cannot %s '%s': %s", what, shown(u, j->final), strerror(-err));
		atomic_fetch_add(&u->failed, 1);
	} else {
		atomic_fetch_add(&u->files, 1);
	}
}

static void *writer_main(void *arg)
{
	struct writer *me = arg;
	struct rdx_tree_unpack *u = me->u;
	struct writers *w = &u->w;
	struct job *j;

	rdx_thread_name("rdx-twrite");
	pthread_mutex_lock(&w->lock);
	for (;;) {
		while (!me->head && !w->quit)
			pthread_cond_wait(&me->cond, &w->lock);
		j = me->head;
		if (!j)
			break;
		me->head = j->next;
		if (!me->head)
			me->tail = NULL;
		pthread_mutex_unlock(&w->lock);
		if (j->sink || !atomic_load(u->stop))
			write_job(u, j);
		pthread_mutex_lock(&w->lock);
		if (j->stage && w->nspare < SPARE_STAGES) {
			w->spare[w->nspare++] = j->stage;
			j->stage = NULL;
		}
		w->bytes -= j->len;
		w->busy--;
		w->in_flight[j->name_hash % IN_FLIGHT]--;
		/* The unpacker, once half the queue is free (a file's end
		 * woke it for each file, to queue one more and sleep). */
		if (w->bytes <= WRITE_QUEUE / 2 || !w->busy)
			pthread_cond_signal(&w->room);
		if (!w->busy)
			pthread_cond_broadcast(&w->idle);
		pthread_mutex_unlock(&w->lock);
		job_free(j);
		pthread_mutex_lock(&w->lock);
	}
	pthread_mutex_unlock(&w->lock);
	return NULL;
}

/* Starts up to n writers, no more than there are CPUs: their work is the
 * kernel's (creating, copying into the page cache, renaming), and more
 * threads than CPUs only spin on the directory's lock.  With none, the
 * unpacking thread writes. */
static void writers_start(struct rdx_tree_unpack *u, unsigned n)
{
	struct writers *w = &u->w;
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);

	if (cpus > 0 && n > (unsigned long)cpus)
		n = (unsigned)cpus;
	if (n > MAX_WRITERS)
		n = MAX_WRITERS;
	w->one = n ? calloc(n, sizeof(*w->one)) : NULL;
	if (!w->one)
		return;
	for (w->n = 0; w->n < n; w->n++) {
		struct writer *one = &w->one[w->n];

		one->u = u;
		pthread_cond_init(&one->cond, NULL);
		if (pthread_create(&one->thread, NULL, writer_main, one)) {
			pthread_cond_destroy(&one->cond);
			break;
		}
	}
}

/* Waits until every queued file is written. */
static void writers_wait(struct rdx_tree_unpack *u)
{
	struct writers *w = &u->w;

	pthread_mutex_lock(&w->lock);
	while (w->busy)
		pthread_cond_wait(&w->idle, &w->lock);
	pthread_mutex_unlock(&w->lock);
}

/* FNV-1a of a full name: which writer takes the file, and where it is
 * counted in flight. */
static uint64_t name_hash(const char *name)
{
	uint64_t h = 1469598103934665603ull;

	for (const char *c = name; c && *c; c++)
		h = (h ^ (unsigned char)*c) * 1099511628211ull;
	return h;
}

/* Waits, before full is made as something else than a file, until no
 * file of that name can be with the writers: when one may be (or one of
 * a name that shares its count), until they are all done. */
static void writers_wait_name(struct rdx_tree_unpack *u, const char *full)
{
	struct writers *w = &u->w;
	unsigned slot = (unsigned)(name_hash(full) % IN_FLIGHT);

	pthread_mutex_lock(&w->lock);
	while (w->in_flight[slot])
		pthread_cond_wait(&w->idle, &w->lock);
	pthread_mutex_unlock(&w->lock);
}

/* A file a writer found to differ from its hash fails the stream (the
 * file itself was not written).  Returns that fatal code, or 0. */
static int writers_failed(struct rdx_tree_unpack *u)
{
	struct writers *w = &u->w;
	int ret;

	if (!atomic_load(&w->corrupt))
		return 0;
	pthread_mutex_lock(&w->lock);
	ret = unpack_fail(u, -RDX_EINTEGRITY, "data of '%s' corrupted in transit (xxh3-128 mismatch)",
			  w->corrupt_name ? shown(u, w->corrupt_name) : "a file");
	pthread_mutex_unlock(&w->lock);
	return ret;
}

/* A STAGE-sized, 4 KiB-aligned buffer, a spare one if there is one. */
static char *stage_get(struct rdx_tree_unpack *u)
{
	struct writers *w = &u->w;
	char *stage = NULL;

	pthread_mutex_lock(&w->lock);
	if (w->nspare)
		stage = w->spare[--w->nspare];
	pthread_mutex_unlock(&w->lock);
	return stage ? stage : aligned_alloc(4096, STAGE);
}

static void stage_put(struct rdx_tree_unpack *u, char *stage)
{
	struct writers *w = &u->w;

	if (!stage)
		return;
	pthread_mutex_lock(&w->lock);
	if (w->nspare < SPARE_STAGES) {
		w->spare[w->nspare++] = stage;
		stage = NULL;
	}
	pthread_mutex_unlock(&w->lock);
	free(stage);
}

static void writers_destroy(struct rdx_tree_unpack *u)
{
	while (u->w.nspare)
		free(u->w.spare[--u->w.nspare]);
	free(u->w.corrupt_name);
	pthread_cond_destroy(&u->w.idle);
	pthread_cond_destroy(&u->w.room);
	pthread_mutex_destroy(&u->w.lock);
}

static void writers_stop(struct rdx_tree_unpack *u)
{
	struct writers *w = &u->w;

	pthread_mutex_lock(&w->lock);
	w->quit = true;
	for (unsigned i = 0; i < w->n; i++)
		pthread_cond_signal(&w->one[i].cond);
	pthread_mutex_unlock(&w->lock);
	for (unsigned i = 0; i < w->n; i++) {
		pthread_join(w->one[i].thread, NULL);
		pthread_cond_destroy(&w->one[i].cond);
	}
	free(w->one);
	w->one = NULL;
	w->n = 0;
}

/* Queues a verified file (taking it), once WRITE_QUEUE has room. */
static void writers_submit(struct rdx_tree_unpack *u, struct job *j)
{
	struct writers *w = &u->w;
	struct writer *one;
	uint64_t h = j->name_hash = name_hash(j->final);

	if (!w->n) {
		write_job(u, j);
		stage_put(u, j->stage);
		j->stage = NULL;
		job_free(j);
		return;
	}
	pthread_mutex_lock(&w->lock);
	/* A big file's stages go round the writers; a name to its own. */
	one = &w->one[j->sink ? w->turn++ % w->n : h % w->n];
	while (w->busy && w->bytes + j->len > WRITE_QUEUE)
		pthread_cond_wait(&w->room, &w->lock);
	j->next = NULL;
	if (one->tail)
		one->tail->next = j;
	else
		one->head = j;
	one->tail = j;
	w->bytes += j->len;
	w->busy++;
	w->in_flight[h % IN_FLIGHT]++;
	pthread_cond_signal(&one->cond);
	pthread_mutex_unlock(&w->lock);
}

static int put_job(void *arg, const void *buf, size_t len, uint64_t off)
{
	struct job *j = arg;

	(void)off; /* blocks follow each other (copy_data) */
	if (len > j->len - j->got)
		return -EFBIG;
	memcpy(j->data + j->got, buf, len);
	j->got += len;
	return 0;
}

/* A small file's data into memory; take_hash() hands it to a writer,
 * which checks it against the hash (on a thread of its own, as hashing
 * every byte here would make this thread the slowest).  Returns 0 or a
 * fatal code. */
static int unpack_small(struct rdx_tree_unpack *u, struct archive *rd,
			struct archive *wd, struct archive_entry *e)
{
	uint64_t size = (uint64_t)archive_entry_size(e);
	struct job *j = malloc(sizeof(*j) + size);
	int err, ret;

	if (!j)
		return unpack_fail(u, -ENOMEM, "out of memory");
	*j = (struct job){ .dir = dir_hold(u->checked_dir), .final = strdup(u->pend_final),
			   .len = size };
	file_meta(u, wd, e, &j->m);
	u->pend_job = j;
	if (!j->final)
		return unpack_fail(u, -ENOMEM, "out of memory");
	ret = copy_data(u, rd, false, NULL, put_job, j, &err);
	if (ret)
		return ret;
	if (err || j->got != size)
		return unpack_fail(u, -RDX_EPROTO, "malformed tree stream: '%s' %s its size",
				   shown(u, u->pend_final), err ? "exceeds" : "is short of");
	return 0;
}

/* A big file's stream blocks, gathered into aligned STAGE-sized writes
 * for fileio's O_DIRECT sink, each written by a writer thread (at most
 * WRITE_QUEUE bytes of them queued) while the stream goes on. */
struct staged {
	struct rdx_tree_unpack *u;
	struct rdx_sink *sink;
	char *stage;  /* STAGE bytes, 4 KiB-aligned, or NULL */
	size_t fill;
	uint64_t off; /* of stage[0] */
	bool queued;  /* a stage went to the writers */
};

/* Queues the filled part of the stage.  Returns 0 or -errno (a stage
 * written earlier failed, or out of memory). */
static int stage_out(struct staged *st)
{
	struct job *j = calloc(1, sizeof(*j));
	int err = atomic_load(&st->u->stage_err);

	if (err || !j) {
		free(j);
		return err ? err : -ENOMEM;
	}
	j->sink = st->sink;
	j->stage = st->stage;
	j->len = st->fill;
	j->off = st->off;
	st->stage = NULL;
	st->off += st->fill;
	st->fill = 0;
	st->queued = true;
	writers_submit(st->u, j);
	return 0;
}

static int put_staged(void *arg, const void *buf, size_t len, uint64_t off)
{
	struct staged *st = arg;
	const char *p = buf;
	int ret;

	(void)off; /* blocks follow each other (copy_data) */
	while (len) {
		size_t n = len < STAGE - st->fill ? len : STAGE - st->fill;

		if (!st->stage && !(st->stage = stage_get(st->u)))
			return -ENOMEM;
		memcpy(st->stage + st->fill, p, n);
		st->fill += n;
		p += n;
		len -= n;
		if (st->fill == STAGE && (ret = stage_out(st)))
			return ret;
	}
	return 0;
}

/* A big file's data, hashed, into an O_DIRECT temporary (fileio's sink:
 * buffered writes of big files are throttled by dirty page writeback to
 * a fraction of what the disk takes) with its metadata; take_hash()
 * publishes it.  Returns 0 (a local failure is named and counted) or a
 * fatal code; either way no stage of it is left with the writers. */
static int unpack_big(struct rdx_tree_unpack *u, struct archive *rd,
		      struct archive *wd, struct archive_entry *e)
{
	uint64_t size = (uint64_t)archive_entry_size(e);
	struct staged st = { .u = u };
	struct tree_meta m;
	int err, ret;

	file_meta(u, wd, e, &m);
	atomic_store(&u->stage_err, 0);
	err = rdx_sink_open_at(&u->pend_sink, u->checked_dir->fd, base_name(u->pend_final),
			       u->pend_final, size, u->stop);
	if (err) {
		u->pend_sink = NULL;
		archive_read_data_skip(rd);
		goto failed;
	}
	st.sink = u->pend_sink;
	/* Stages are written out of order, which only a file of our own
	 * (the temporary) can take. */
	if (!rdx_sink_parallel(st.sink)) {
		err = -EINVAL;
		archive_read_data_skip(rd);
		goto close;
	}
	ret = copy_data(u, rd, false, u->hash, put_staged, &st, &err);
	if (!ret && !err && st.fill)
		err = stage_out(&st);
	stage_put(u, st.stage);
	if (st.queued)
		writers_wait(u);
	if (ret)
		return ret;
	if (!err)
		err = atomic_load(&u->stage_err);
	if (!err && st.off != size)
		return unpack_fail(u, -RDX_EPROTO, "malformed tree stream: '%s' is short",
				   shown(u, u->pend_final));
	if (!err)
		err = rdx_sink_flush(st.sink, size);
	if (!err)
		err = rdx_sink_set_meta(st.sink, m.mode, u->as_root, m.uid, m.gid, m.times);
	if (!err)
		return 0;
close:
	rdx_sink_close(u->pend_sink);
	u->pend_sink = NULL;
failed:
	rdx_warn("cannot write '%s': %s", shown(u, u->pend_final), strerror(-err));
	u->failed++;
	return 0;
}

/* A sparse file's blocks, at their offsets. */
struct sparse {
	int fd;
	uint64_t size;
};

static int put_sparse(void *arg, const void *buf, size_t len, uint64_t off)
{
	struct sparse *s = arg;
	ssize_t n;

	if (off > s->size || len > s->size - off)
		return -EFBIG; /* past the size the entry gave */
	n = rdx_pwrite_full(s->fd, buf, len, (off_t)off);
	return n < 0 ? (int)n : 0;
}

/* A sparse file: its blocks written at their offsets into a temporary in
 * its directory, the holes left as holes; take_hash() publishes it.
 * Returns 0 (a local failure is named and counted) or a fatal code. */
static int unpack_sparse(struct rdx_tree_unpack *u, struct archive *rd,
			 struct archive *wd, struct archive_entry *e)
{
	struct sparse s = { .size = (uint64_t)archive_entry_size(e) };
	int dir = u->checked_dir->fd, err, ret;
	struct tree_meta m;
	char *tmp = NULL;

	file_meta(u, wd, e, &m);
	s.fd = rdx_temp_create(dir, base_name(u->pend_final), O_WRONLY, &tmp);
	if (s.fd < 0) {
		err = s.fd;
		goto failed;
	}
	ret = copy_data(u, rd, true, u->hash, put_sparse, &s, &err);
	if (!ret && !err && ftruncate(s.fd, (off_t)s.size))
		err = -errno;
	if (!ret && !err)
		err = tree_set_meta(s.fd, &m, u->as_root);
	if (close(s.fd) && !ret && !err)
		err = -errno;
	if (ret || err) {
		unlinkat(dir, tmp, 0);
		free(tmp);
		if (ret)
			return ret;
		goto failed;
	}
	u->pend_tmp = tmp;
	u->pend_dir = dir_hold(u->checked_dir);
	return 0;
failed:
	rdx_warn("cannot write '%s': %s", shown(u, u->pend_final), strerror(-err));
	u->failed++;
	return 0;
}

/* ---- directories' metadata, set at the end ---- */

static int dir_enter(struct rdx_tree_unpack *u, const char *full, const struct tree_meta *m)
{
	size_t len = strlen(full);
	struct dirfix *d = malloc(sizeof(*d) + len + 1);

	if (!d)
		return unpack_fail(u, -ENOMEM, "out of memory");
	d->m = *m;
	d->seq = u->dirs ? u->dirs->seq + 1 : 0;
	d->len = len;
	memcpy(d->full, full, len + 1);
	d->next = u->dirs;
	u->dirs = d;
	return 0;
}

static void dir_fix(struct rdx_tree_unpack *u, struct dirfix *d)
{
	int err = tree_set_dir_meta(u->root_fd, d->full + u->rootlen + 1, &d->m, u->as_root);

	if (err && err != -ENOENT) { /* gone: removed since */
		rdx_warn("cannot set the mode and times of '%s': %s", shown(u, d->full),
			 strerror(-err));
		atomic_fetch_add(&u->failed, 1);
	}
}

/* Deepest first (a name sorts after its parent's), and of one name the
 * last received first. */
static int by_name_desc(const void *a, const void *b)
{
	const struct dirfix *x = *(struct dirfix *const *)a, *y = *(struct dirfix *const *)b;
	int c = strcmp(y->full, x->full);

	return c ? c : x->seq < y->seq ? 1 : x->seq > y->seq ? -1 : 0;
}

/* The end: every directory's metadata, once nothing more goes into it,
 * children before their parent (whose mode may keep us out of it), and
 * of a directory received twice (two trees of one name) the last
 * entry's. */
static void dirs_finish(struct rdx_tree_unpack *u)
{
	struct dirfix *d, **all;
	size_t n = 0, i;

	for (d = u->dirs; d; d = d->next)
		n++;
	all = n ? malloc(n * sizeof(*all)) : NULL;
	if (!all) { /* out of memory: in the reverse of the stream's order */
		while ((d = u->dirs)) {
			u->dirs = d->next;
			dir_fix(u, d);
			free(d);
		}
		return;
	}
	for (d = u->dirs, i = 0; d; d = d->next)
		all[i++] = d;
	u->dirs = NULL;
	qsort(all, n, sizeof(*all), by_name_desc);
	for (i = 0; i < n; i++) /* not an earlier entry of the same name */
		if (!i || strcmp(all[i]->full, all[i - 1]->full))
			dir_fix(u, all[i]);
	for (i = 0; i < n; i++)
		free(all[i]);
	free(all);
}

/* ---- entries ---- */

/* A directory: made (or kept), its metadata set at the end.  Returns 0
 * or a fatal code. */
static int unpack_dir(struct rdx_tree_unpack *u, struct archive *wd,
		      struct archive_entry *e, const char *final)
{
	struct tree_meta m;
	int err = tree_make_dir(u->checked_dir->fd, base_name(final));

	if (err == -ELOOP)
		return unpack_fail(u, -RDX_EPROTO, "refused to write through a symlink: '%s'",
				   shown(u, final));
	if (err) {
		rdx_warn("cannot create '%s': %s", shown(u, final), strerror(-err));
		u->failed++;
		return 0;
	}
	file_meta(u, wd, e, &m);
	/* Set-id bits kept when their group (or owner) is already the
	 * directory's, as tar keeps a shared group's setgid directories
	 * (tree_set_meta). */
	m.mode = archive_entry_perm(e) & 07777;
	return dir_enter(u, final, &m);
}

/* A hard link to a name sent before.  Returns 0 or a fatal code. */
static int unpack_link(struct rdx_tree_unpack *u, const char *final, const char *link)
{
	char *target = full_name(u, link);
	int tdir = -1, err;

	if (!target)
		return u->err;
	err = rdx_dir_beneath(u->root_fd, target + u->rootlen + 1, false, &tdir);
	if (err) {
		free(target);
		return dir_failed(u, link, err);
	}
	err = tdir < 0 ? -ENOENT
		       : tree_make_link(tdir, base_name(target), u->checked_dir->fd,
					base_name(final));
	if (err) {
		rdx_warn("cannot create '%s': %s", shown(u, final), strerror(-err));
		u->failed++;
	} else {
		atomic_fetch_add(&u->files, 1);
	}
	if (tdir >= 0)
		close(tdir);
	free(target);
	return 0;
}

/* A symlink or a fifo.  Returns 0. */
static int unpack_special(struct rdx_tree_unpack *u, struct archive *wd,
			  struct archive_entry *e, const char *final)
{
	struct tree_meta m;
	int err;

	file_meta(u, wd, e, &m);
	if (archive_entry_filetype(e) == AE_IFLNK)
		err = archive_entry_symlink(e)
			? tree_make_symlink(u->checked_dir->fd, base_name(final),
					    archive_entry_symlink(e), &m, u->as_root)
			: -EINVAL;
	else
		err = tree_make_fifo(u->checked_dir->fd, base_name(final), &m, u->as_root);
	if (err) {
		rdx_warn("cannot create '%s': %s", shown(u, final), strerror(-err));
		u->failed++;
	} else {
		atomic_fetch_add(&u->files, 1);
	}
	return 0;
}

/* Extracts one entry (not a hash, removal or missing mark), everything
 * made through its directory's descriptor (tree_disk.c).  Returns 0 or a
 * fatal code. */
static int unpack_entry(struct rdx_tree_unpack *u, struct archive *rd,
			struct archive *wd, struct archive_entry *e)
{
	mode_t type = archive_entry_filetype(e);
	const char *name = archive_entry_pathname(e);
	const char *link = archive_entry_hardlink(e);
	char *final = NULL, *dir_name = NULL;
	int ret = 0;

	if (u->pend_final)
		return unpack_fail(u, -RDX_EPROTO,
				   "malformed tree stream: no hash after '%s'", shown(u, u->pend_final));
	if (u->files_only && name && (type != AE_IFREG || strchr(name, '/')))
		return unpack_fail(u, -RDX_EPROTO,
				   "refused '%s' from the sender: a file was asked for, not a tree",
				   name);
	if (u->over_file && type != AE_IFREG && name &&
	    (!strchr(name, '/') || !strchr(name, '/')[1]))
		return unpack_fail(u, -RDX_ELOCAL, "cannot replace the file '%s' with a directory",
				   u->rename_top);
	if (type == AE_IFDIR && name && *name && name[strlen(name) - 1] == '/') {
		/* libarchive's mark of a directory */
		dir_name = strndup(name, strlen(name) - 1);
		if (!dir_name)
			return unpack_fail(u, -ENOMEM, "out of memory");
		name = dir_name;
	}
	final = map_name(u, name, true);
	if (!final) {
		ret = u->err;
		goto out;
	}
	if (link) {
		/* A link carries no data of its own: data here would rewrite
		 * a file already published under its hash; it is skipped. */
		writers_wait(u); /* its target may be being written */
		ret = unpack_link(u, final, link);
	} else if (type == AE_IFREG) {
		u->pend_final = final;
		final = NULL;
		if (archive_entry_sparse_count(e) > 0) {
			writers_wait(u); /* one may be writing this name */
			ret = unpack_sparse(u, rd, wd, e);
		} else if (archive_entry_size(e) < (la_int64_t)BIG_FILE) {
			ret = unpack_small(u, rd, wd, e);
		} else {
			writers_wait(u);
			ret = unpack_big(u, rd, wd, e);
		}
	} else if (type == AE_IFDIR || type == AE_IFLNK || type == AE_IFIFO) {
		writers_wait_name(u, final); /* a file of that name may be being written */
		ret = type == AE_IFDIR ? unpack_dir(u, wd, e, final)
				       : unpack_special(u, wd, e, final);
	} else {
		rdx_warn("skipping '%s': not a file, directory, symlink or fifo", shown(u, final));
	}
out:
	free(dir_name);
	free(final);
	return ret;
}

static void *unpack_main(void *arg)
{
	struct rdx_tree_unpack *u = arg;
	struct archive *rd = archive_read_new();
	struct archive *wd = archive_write_disk_new();
	struct archive_entry *e;
	int r;

	rdx_thread_name("rdx-unpack");
	if (!rd || !wd) {
		unpack_fail(u, -ENOMEM, "out of memory");
		goto out;
	}
	/* wd only maps owners' names (as tar does, file_meta): entries are
	 * made by tree_disk.c, never by libarchive's by-path writer. */
	if (u->as_root)
		archive_write_disk_set_standard_lookup(wd);
	archive_read_support_format_tar(rd);
	writers_start(u, u->nwriters);
	if (archive_read_open(rd, u, NULL, unpack_read, NULL) != ARCHIVE_OK) {
		unpack_fail(u, -RDX_EPROTO, "malformed tree stream: %s",
			    archive_error_string(rd));
		goto out;
	}
	for (;;) {
		if (writers_failed(u))
			break;
		r = archive_read_next_header(rd, &e);
		if (r == ARCHIVE_EOF)
			break;
		if (r < ARCHIVE_WARN) {
			unpack_fail(u, -RDX_EPROTO, "malformed tree stream: %s",
				    archive_error_string(rd));
			break;
		}
		if (archive_entry_pathname(e) &&
		    strcmp(archive_entry_pathname(e), RDX_TREE_HASH_NAME) == 0) {
			if (take_hash(u, rd, e))
				break;
		} else if (archive_entry_pathname(e) &&
			   strcmp(archive_entry_pathname(e), RDX_TREE_DELETE_NAME) == 0) {
			if (take_delete(u, rd, e))
				break;
		} else if (archive_entry_pathname(e) &&
			   strcmp(archive_entry_pathname(e), RDX_TREE_MISSING_NAME) == 0) {
			if (take_missing(u, rd, e))
				break;
		} else if (unpack_entry(u, rd, wd, e)) {
			break;
		}
	}
	if (!u->err && u->pend_final)
		unpack_fail(u, -RDX_EPROTO, "tree stream ended before the hash of '%s'",
			    shown(u, u->pend_final));
out:
	/* Unblock the core's writer at once; what it sends now is moot. */
	if (u->fd >= 0)
		close(u->fd);
	u->fd = -1;
	feed_gone(u);
	writers_stop(u); /* every verified file written */
	writers_failed(u);
	drop_pending(u);
	dirs_finish(u);
	if (wd)
		archive_write_free(wd);
	if (rd)
		archive_read_free(rd);
	return NULL;
}

/* Copies the allowed top-level names.  Returns 0 or -ENOMEM. */
static int copy_tops(struct rdx_tree_unpack *u, const struct rdx_tree_unpack_opts *o)
{
	unsigned i;

	if (!o->ntops)
		return 0;
	u->tops = calloc(o->ntops, sizeof(*u->tops));
	u->tops_taken = calloc(o->ntops, sizeof(*u->tops_taken));
	if (!u->tops || !u->tops_taken)
		return -ENOMEM;
	u->ntops = o->ntops;
	for (i = 0; i < o->ntops; i++)
		if (o->tops[i] && !(u->tops[i] = strdup(o->tops[i])))
			return -ENOMEM;
	return 0;
}

static void free_tops(struct rdx_tree_unpack *u)
{
	unsigned i;

	for (i = 0; i < u->ntops; i++) {
		free(u->tops[i]);
		free(u->tops_taken[i]);
	}
	free(u->tops);
	free(u->tops_taken);
}

int rdx_tree_unpack_start(struct rdx_tree_unpack **out, const char *dst,
			  const struct rdx_tree_unpack_opts *o, const atomic_int *stop,
			  int *fd)
{
	struct rdx_tree_unpack *u = calloc(1, sizeof(*u));
	char *root = NULL;
	struct stat st;
	int fds[2] = { -1, -1 }, ret, sret, serr;

	if (!u)
		return -ENOMEM;
	u->fd = -1;
	u->root_fd = -1;
	u->as_root = o->as_root;
	u->nwriters = o->writers;
	u->files_only = o->files_only;
	u->allow_delete = o->allow_delete;
	u->keep_setid = o->keep_setid;
	u->stop = stop;
	ret = copy_tops(u, o);
	if (ret)
		goto err;
	if (!dst || !*dst)
		dst = ".";
	sret = stat(dst, &st);
	serr = errno;
	if (!sret && S_ISDIR(st.st_mode)) {
		root = strdup(dst);
	} else if ((sret && serr == ENOENT) || (!sret && S_ISREG(st.st_mode))) {
		/* "dir/new": extract in dir, the tree renamed to "new" (a
		 * file of that name is replaced by a file, as cp -r does). */
		u->over_file = !sret;
		char *copy = strdup(dst), *slash;
		size_t n = copy ? strlen(copy) : 0;

		while (n > 1 && copy[n - 1] == '/')
			copy[--n] = '\0';
		slash = copy ? strrchr(copy, '/') : NULL;
		if (copy) {
			u->rename_top = strdup(slash ? slash + 1 : copy);
			root = slash ? strndup(copy, slash == copy ? 1 : (size_t)(slash - copy))
				     : strdup(".");
		}
		free(copy);
		if (u->rename_top && (!tree_name_safe(u->rename_top) ||
				      strcmp(u->rename_top, ".") == 0)) {
			ret = -EINVAL;
			goto err;
		}
		if (!u->rename_top) {
			ret = -ENOMEM;
			goto err;
		}
	} else {
		ret = sret ? -serr : -ENOTDIR;
		goto err;
	}
	u->buf = fd ? malloc(UNPACK_BUF) : NULL; /* fed: libarchive reads the slots */
	u->hash = XXH3_createState();
	if (!root || (fd && !u->buf) || !u->hash) {
		ret = -ENOMEM;
		goto err;
	}
	/* Names are made absolute under the root's real path: no working
	 * directory to change, and no symlink above what we check. */
	u->root = realpath(root, NULL);
	if (!u->root) {
		ret = -errno;
		goto err;
	}
	u->root_fd = open(u->root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (u->root_fd < 0) {
		ret = -errno;
		goto err;
	}
	u->rootlen = strlen(u->root);
	if (u->rootlen == 1) { /* "/": names are "/x" */
		u->root[0] = '\0';
		u->rootlen = 0;
	}
	if (fd) {
		ret = tree_new_pipe(fds);
		if (ret)
			goto err;
		u->fd = fds[0];
	}
	tree_feed_init(&u->feed);
	pthread_mutex_init(&u->w.lock, NULL);
	atomic_init(&u->w.anon_ok, true);
	pthread_cond_init(&u->w.room, NULL);
	pthread_cond_init(&u->w.idle, NULL);
	ret = -pthread_create(&u->thread, NULL, unpack_main, u);
	if (ret) {
		writers_destroy(u);
		tree_feed_destroy(&u->feed);
		if (fd) {
			close(fds[0]);
			close(fds[1]);
		}
		goto err;
	}
	free(root);
	if (fd)
		*fd = fds[1];
	*out = u;
	return 0;
err:
	if (u->root_fd >= 0)
		close(u->root_fd);
	free(u->root);
	free(root);
	free(u->rename_top);
	free_tops(u);
	free(u->buf);
	XXH3_freeState(u->hash);
	free(u);
	return ret;
}

/* The listing's walk goes no deeper than this many directories: each
 * level holds a descriptor.  What lies deeper is not listed, and so is
 * sent again. */
#define LIST_DEPTH 128

/* One directory of the listing's walk: its stream, and the length of its
 * name (as the sender names it) in the name buffer. */
struct list_level {
	DIR *d;
	size_t len;
};

/* Opens name in dir as a directory to list: not through a symlink, and
 * the one fstatat() saw (st).  NULL when it cannot be (not listed). */
static DIR *list_open(int dir, const char *name, const struct stat *st)
{
	int fd = openat(dir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	struct stat now;
	DIR *d;

	if (fd < 0)
		return NULL;
	if (fstat(fd, &now) || now.st_dev != st->st_dev || now.st_ino != st->st_ino ||
	    !(d = fdopendir(fd))) {
		close(fd);
		return NULL;
	}
	return d;
}

int rdx_tree_unpack_list(struct rdx_tree_unpack *u, const char *top,
			 const uint8_t *key,
			 int (*emit)(void *arg, const struct rdx_list_entry *e),
			 void *arg)
{
	struct list_level lv[LIST_DEPTH];
	const size_t max = RDX_LIST_MAX - RDX_LIST_FIXED - 16;
	size_t tlen = strlen(top);
	char *name;
	struct stat st;
	int depth = 0, ret = 0;

	if (!tree_name_safe(top) || strchr(top, '/') || !strcmp(top, ".") ||
	    !top_allowed(u, top, tlen))
		return -RDX_EPROTO;
	/* Every directory from the root's descriptor, never by its name
	 * again: one swapped for a symlink is not followed out. */
	if (fstatat(u->root_fd, u->rename_top ? u->rename_top : top, &st, AT_SYMLINK_NOFOLLOW) ||
	    !S_ISDIR(st.st_mode) ||
	    !(lv[0].d = list_open(u->root_fd, u->rename_top ? u->rename_top : top, &st)))
		return 0; /* nothing there (or not a tree): everything is sent */
	if (tlen > max || !(name = malloc(max + 1))) {
		closedir(lv[0].d);
		return tlen > max ? 0 : -ENOMEM;
	}
	memcpy(name, top, tlen + 1);
	lv[0].len = tlen;
	while (!ret && depth >= 0) {
		struct list_level *l = &lv[depth];
		struct rdx_list_entry e;
		struct dirent *de = readdir(l->d);
		size_t nlen;
		DIR *sub = NULL;

		if (!de) {
			closedir(l->d);
			depth--;
			continue;
		}
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		nlen = l->len + 1 + strlen(de->d_name);
		if (nlen > max || fstatat(dirfd(l->d), de->d_name, &st, AT_SYMLINK_NOFOLLOW))
			continue; /* cannot be listed: it is sent again */
		snprintf(name + l->len, max + 1 - l->len, "/%s", de->d_name);
		e = (struct rdx_list_entry){
			.type = S_ISREG(st.st_mode)   ? RDX_LIST_FILE
				: S_ISDIR(st.st_mode) ? RDX_LIST_DIR
						      : RDX_LIST_OTHER,
			.size = (uint64_t)st.st_size,
			.mtime = (int64_t)st.st_mtime,
			.len = (uint16_t)nlen,
			.name = name,
		};
		if (S_ISDIR(st.st_mode)) {
			/* One it cannot read is not listed (nor deleted). */
			if (!(sub = list_open(dirfd(l->d), de->d_name, &st)))
				continue;
		} else if (key && S_ISREG(st.st_mode)) {
			/* --checksum: a file we cannot read is listed without
			 * its hash, and so sent again. */
			int fd = openat(dirfd(l->d), de->d_name,
					O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
			struct stat now;

			/* (not a fifo swapped in: reading it would wait) */
			if (fd >= 0 && !fstat(fd, &now) && S_ISREG(now.st_mode) &&
			    tree_hash_fd(fd, key, e.hash) == 0)
				e.type = RDX_LIST_HASHED;
			if (fd >= 0)
				close(fd);
		}
		ret = emit(arg, &e);
		if (sub && !ret && depth + 1 < LIST_DEPTH) {
			lv[++depth] = (struct list_level){ .d = sub, .len = nlen };
		} else if (sub) {
			closedir(sub);
		}
	}
	while (depth >= 0)
		closedir(lv[depth--].d);
	free(name);
	return ret;
}

int rdx_tree_unpack_finish(struct rdx_tree_unpack *u, bool ok, char *why,
			   size_t len, struct rdx_tree_counts *counts)
{
	unsigned failed;
	int ret;

	(void)ok; /* a failed stream ends the archive early: same path */
	if (len)
		why[0] = '\0';
	pthread_join(u->thread, NULL);
	if (counts)
		*counts = (struct rdx_tree_counts){ atomic_load(&u->files), atomic_load(&u->bytes) };
	ret = u->err;
	if (ret)
		snprintf(why, len, "%s", u->why);
	else if ((failed = atomic_load(&u->failed)) && u->missing == failed) {
		ret = -RDX_ELOCAL;
		snprintf(why, len, "the sender could not read %u entr%s (named above)", failed,
			 failed == 1 ? "y" : "ies");
	} else if (failed) {
		ret = -RDX_ELOCAL;
		snprintf(why, len, "%u entr%s could not be written (named above)",
			 failed - u->missing, failed - u->missing == 1 ? "y" : "ies");
	}
	forget_checked(u); /* waits on the writers' lock: before it goes */
	writers_destroy(u);
	tree_feed_destroy(&u->feed);
	free(u->top_seen);
	close(u->root_fd);
	free(u->root);
	free(u->rename_top);
	free_tops(u);
	free(u->buf);
	XXH3_freeState(u->hash);
	free(u);
	return ret;
}
