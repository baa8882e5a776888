/* The receiver's side of a tree: parse the pax stream and make what it
 * holds under the destination, every received name checked and every
 * regular file published only once its hash matched. */
#include "core/tree/tree_unpack_int.h"

/* ---- receiver: unpack ------------------------------------------------- */

static struct dirref *dir_hold(struct dirref *d)
{
	atomic_fetch_add(&d->refs, 1);
	return d;
}

void tu_dir_drop(struct dirref *d)
{
	if (d && atomic_fetch_sub(&d->refs, 1) == 1) {
		close(d->fd);
		free(d);
	}
}

int tu_unpack_fail(struct rdx_tree_unpack *u, int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	rdx_fail_record(&u->err, u->why, sizeof(u->why), false, err, fmt, ap);
	va_end(ap);
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

static void drop_pending(struct rdx_tree_unpack *u)
{
	rdx_sink_close(u->pend_sink); /* removes its temporary unless published */
	u->pend_sink = NULL;
	tu_job_free(u->pend_job);
	u->pend_job = NULL;
	if (u->pend_tmp)
		unlinkat(u->pend_dir->fd, u->pend_tmp, 0);
	tu_dir_drop(u->pend_dir);
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
		return tu_unpack_fail(u, -RDX_EPROTO, "malformed tree stream: a hash with no file");
	if (archive_entry_size(e) != 0 && archive_entry_size(e) != (la_int64_t)sizeof(got.digest))
		return tu_unpack_fail(u, -RDX_EPROTO, "malformed tree stream: hash of %lld bytes",
				   (long long)archive_entry_size(e));
	n = archive_read_data(rd, want, sizeof(want));
	if (n < 0)
		return tu_unpack_fail(u, -RDX_EPROTO, "malformed tree stream: %s",
				   archive_error_string(rd));
	if (n == 0) {
		rdx_warn("'%s' was not sent: the sender could not read it", tu_shown(u, u->pend_final));
		u->failed++;
		u->missing++;
	} else if (!u->pend_tmp && !u->pend_sink && !u->pend_job) {
		/* failed here; named already */
	} else if (u->pend_job) {
		if (n != (la_ssize_t)sizeof(got.digest))
			return tu_unpack_fail(u, -RDX_EPROTO, "malformed tree stream: a short hash");
		memcpy(u->pend_job->want, want, sizeof(u->pend_job->want));
		tu_writers_submit(u, u->pend_job); /* checked, then counted, when written */
		u->pend_job = NULL;
	} else {
		int ret;

		XXH128_canonicalFromHash(&got, XXH3_128bits_digest(u->hash));
		if (n != (la_ssize_t)sizeof(got.digest) || memcmp(want, got.digest, sizeof(got.digest))) {
			tu_unpack_fail(u, -RDX_EINTEGRITY,
				    "data of '%s' corrupted in transit (xxh3-128 mismatch)",
				    tu_shown(u, u->pend_final));
			drop_pending(u);
			return u->err;
		}
		if (u->pend_sink) {
			ret = rdx_sink_publish(u->pend_sink);
		} else {
			ret = tree_place(u->pend_dir->fd, u->pend_tmp, tu_base_name(u->pend_final));
			free(u->pend_tmp); /* renamed, or removed */
			u->pend_tmp = NULL;
		}
		if (ret) {
			rdx_warn("cannot create '%s': %s", tu_shown(u, u->pend_final), strerror(-ret));
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
		return tu_unpack_fail(u, -RDX_EPROTO, "malformed tree stream: no hash after '%s'",
				   tu_shown(u, u->pend_final));
	if (size <= 0 || size >= (la_int64_t)sizeof(name))
		return tu_unpack_fail(u, -RDX_EPROTO, "malformed tree stream: a missing entry of %lld bytes",
				   (long long)size);
	n = archive_read_data(rd, name, sizeof(name) - 1);
	if (n != size)
		return tu_unpack_fail(u, -RDX_EPROTO, "malformed tree stream: a bad missing entry");
	for (la_ssize_t i = 0; i < n; i++)
		if ((unsigned char)name[i] < 0x20 || name[i] == 0x7f)
			name[i] = '?';
	name[n] = '\0';
	rdx_warn("not sent, the sender could not read it: %s", name);
	u->failed++;
	u->missing++;
	return 0;
}

/* Removes tu_base_name(full) from dir.  A failure is named and counted. */
static void delete_in(struct rdx_tree_unpack *u, int dir, const char *full)
{
	struct stat st;

	if (fstatat(dir, tu_base_name(full), &st, AT_SYMLINK_NOFOLLOW))
		return; /* not there: nothing to do */
	if (unlinkat(dir, tu_base_name(full), S_ISDIR(st.st_mode) ? AT_REMOVEDIR : 0)) {
		rdx_warn("cannot delete '%s': %s", tu_shown(u, full), strerror(errno));
		u->failed++;
		return;
	}
	rdx_info(1, "deleted '%s'", tu_shown(u, full));
}

/* A removal entry (--delete): the receiver's own entry, named as the
 * sender names it, checked like any other name. */
int tu_take_delete(struct rdx_tree_unpack *u, struct archive *rd,
		       struct archive_entry *e)
{
	la_int64_t size = archive_entry_size(e);
	char name[4097], *full;
	la_ssize_t n;

	if (u->pend_final)
		return tu_unpack_fail(u, -RDX_EPROTO, "malformed tree stream: no hash after '%s'",
				   tu_shown(u, u->pend_final));
	if (!u->allow_delete)
		return tu_unpack_fail(u, -RDX_EPROTO,
				   "the sender asked to delete files, but --delete was not given here");
	tu_writers_wait(u); /* the name may be one being written */
	if (tu_writers_failed(u))
		return u->err; /* a stream that corrupted a file deletes nothing */
	if (size <= 0 || size >= (la_int64_t)sizeof(name))
		return tu_unpack_fail(u, -RDX_EPROTO, "malformed tree stream: a removal of %lld bytes",
				   (long long)size);
	n = archive_read_data(rd, name, sizeof(name) - 1);
	if (n != size || memchr(name, '\0', (size_t)n))
		return tu_unpack_fail(u, -RDX_EPROTO, "malformed tree stream: a bad removal");
	name[n] = '\0';
	full = tu_map_name(u, name, false);
	if (!full)
		return u->err;
	if (u->checked_dir)
		delete_in(u, u->checked_dir->fd, full);
	free(full);
	tu_forget_checked(u); /* what was checked may be gone */
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
			return tu_unpack_fail(u, -ECANCELED, "stopped");
		r = archive_read_data_block(rd, &buf, &size, &off);
		if (r == ARCHIVE_EOF)
			return 0;
		if (r < ARCHIVE_WARN)
			return tu_unpack_fail(u, -RDX_EPROTO, "malformed tree stream: %s",
					   archive_error_string(rd));
		if (!holes && (uint64_t)off != next)
			return tu_unpack_fail(u, -RDX_EPROTO, "malformed tree stream: a hole in '%s'",
					   tu_shown(u, u->pend_final));
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
		return tu_unpack_fail(u, -ENOMEM, "out of memory");
	*j = (struct job){ .dir = dir_hold(u->checked_dir), .final = strdup(u->pend_final),
			   .len = size };
	tu_file_meta(u, wd, e, &j->m);
	u->pend_job = j;
	if (!j->final)
		return tu_unpack_fail(u, -ENOMEM, "out of memory");
	u->cached += size;
	ret = copy_data(u, rd, false, NULL, put_job, j, &err);
	if (ret)
		return ret;
	if (err || j->got != size)
		return tu_unpack_fail(u, -RDX_EPROTO, "malformed tree stream: '%s' %s its size",
				   tu_shown(u, u->pend_final), err ? "exceeds" : "is short of");
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
	tu_writers_submit(st->u, j);
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

		if (!st->stage && !(st->stage = tu_stage_get(st->u)))
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

/* A big file's data, hashed, into a temporary (fileio's sink, written
 * around the page cache or through it and paced, as the tree's policy has
 * it) with its metadata; take_hash() publishes it.  Returns 0 (a local failure is named and counted) or a
 * fatal code; either way no stage of it is left with the writers. */
static int unpack_big(struct rdx_tree_unpack *u, struct archive *rd,
		      struct archive *wd, struct archive_entry *e)
{
	uint64_t size = (uint64_t)archive_entry_size(e);
	struct staged st = { .u = u };
	struct rdx_wneed need = { .policy = u->direct, .size_known = true, .size = size,
				  .before = u->cached, .avail = u->avail, .fsync = u->fsync };
	struct rdx_wplan plan = rdx_wplan_choose(&need);
	struct tree_meta m;
	char why[256];
	int err, ret;

	tu_file_meta(u, wd, e, &m);
	atomic_store(&u->stage_err, 0);
	if (plan.direct_from)
		u->cached += size;
	/* One line per big file: a tree of small ones says nothing more. */
	rdx_info(size >= RDX_PACE_MIN ? 1 : 2, "tree: '%s': %s", tu_shown(u, u->pend_final),
		 rdx_wplan_say(&plan, &need, why, sizeof(why)));
	err = rdx_sink_open_at(&u->pend_sink, u->checked_dir->fd, tu_base_name(u->pend_final),
			       u->pend_final, size, &plan, u->stop);
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
	tu_stage_put(u, st.stage);
	if (st.queued)
		tu_writers_wait(u);
	if (ret)
		return ret;
	if (!err)
		err = atomic_load(&u->stage_err);
	if (!err && st.off != size)
		return tu_unpack_fail(u, -RDX_EPROTO, "malformed tree stream: '%s' is short",
				   tu_shown(u, u->pend_final));
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
	rdx_warn("cannot write '%s': %s", tu_shown(u, u->pend_final), strerror(-err));
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

	tu_file_meta(u, wd, e, &m);
	s.fd = rdx_temp_create(dir, tu_base_name(u->pend_final), O_WRONLY, &tmp);
	if (s.fd < 0) {
		err = s.fd;
		goto failed;
	}
	ret = copy_data(u, rd, true, u->hash, put_sparse, &s, &err);
	if (!ret && !err && ftruncate(s.fd, (off_t)s.size))
		err = -errno;
	if (!ret && !err && u->fsync && fsync(s.fd))
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
	rdx_warn("cannot write '%s': %s", tu_shown(u, u->pend_final), strerror(-err));
	u->failed++;
	return 0;
}

/* ---- entries ---- */

/* A directory: made (or kept), its metadata set at the end.  Returns 0
 * or a fatal code. */
static int unpack_dir(struct rdx_tree_unpack *u, struct archive *wd,
		      struct archive_entry *e, const char *final)
{
	struct tree_meta m;
	int err = tree_make_dir(u->checked_dir->fd, tu_base_name(final));

	if (err == -ELOOP)
		return tu_unpack_fail(u, -RDX_EPROTO, "refused to write through a symlink: '%s'",
				   tu_shown(u, final));
	if (err) {
		rdx_warn("cannot create '%s': %s", tu_shown(u, final), strerror(-err));
		u->failed++;
		return 0;
	}
	tu_file_meta(u, wd, e, &m);
	/* Set-id bits kept when their group (or owner) is already the
	 * directory's, as tar keeps a shared group's setgid directories
	 * (tree_set_meta). */
	m.mode = archive_entry_perm(e) & 07777;
	return tu_dir_enter(u, final, &m);
}

/* A hard link to a name sent before.  Returns 0 or a fatal code. */
static int unpack_link(struct rdx_tree_unpack *u, const char *final, const char *link)
{
	char *target = tu_full_name(u, link);
	int tdir = -1, err;

	if (!target)
		return u->err;
	err = rdx_dir_beneath(u->root_fd, target + u->rootlen + 1, false, &tdir);
	if (err) {
		free(target);
		return tu_dir_failed(u, link, err);
	}
	err = tdir < 0 ? -ENOENT
		       : tree_make_link(tdir, tu_base_name(target), u->checked_dir->fd,
					tu_base_name(final));
	if (err) {
		rdx_warn("cannot create '%s': %s", tu_shown(u, final), strerror(-err));
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

	tu_file_meta(u, wd, e, &m);
	if (archive_entry_filetype(e) == AE_IFLNK)
		err = archive_entry_symlink(e)
			? tree_make_symlink(u->checked_dir->fd, tu_base_name(final),
					    archive_entry_symlink(e), &m, u->as_root)
			: -EINVAL;
	else
		err = tree_make_fifo(u->checked_dir->fd, tu_base_name(final), &m, u->as_root);
	if (err) {
		rdx_warn("cannot create '%s': %s", tu_shown(u, final), strerror(-err));
		u->failed++;
	} else {
		atomic_fetch_add(&u->files, 1);
	}
	return 0;
}

/* Extracts one entry (not a hash, removal or missing mark), everything
 * made through its directory's descriptor (tree_disk.c).  Returns 0 or a
 * fatal code. */
int tu_unpack_entry(struct rdx_tree_unpack *u, struct archive *rd,
			struct archive *wd, struct archive_entry *e)
{
	mode_t type = archive_entry_filetype(e);
	const char *name = archive_entry_pathname(e);
	const char *link = archive_entry_hardlink(e);
	char *final = NULL, *dir_name = NULL;
	int ret = 0;

	if (u->pend_final)
		return tu_unpack_fail(u, -RDX_EPROTO,
				   "malformed tree stream: no hash after '%s'", tu_shown(u, u->pend_final));
	if (u->files_only && name && (type != AE_IFREG || strchr(name, '/')))
		return tu_unpack_fail(u, -RDX_EPROTO,
				   "refused '%s' from the sender: a file was asked for, not a tree",
				   name);
	if (u->over_file && type != AE_IFREG && name &&
	    (!strchr(name, '/') || !strchr(name, '/')[1]))
		return tu_unpack_fail(u, -RDX_ELOCAL, "cannot replace the file '%s' with a directory",
				   u->rename_top);
	if (type == AE_IFDIR && name && *name && name[strlen(name) - 1] == '/') {
		/* libarchive's mark of a directory */
		dir_name = strndup(name, strlen(name) - 1);
		if (!dir_name)
			return tu_unpack_fail(u, -ENOMEM, "out of memory");
		name = dir_name;
	}
	final = tu_map_name(u, name, true);
	if (!final) {
		ret = u->err;
		goto out;
	}
	if (link) {
		/* A link carries no data of its own: data here would rewrite
		 * a file already published under its hash; it is skipped. */
		tu_writers_wait(u); /* its target may be being written */
		ret = unpack_link(u, final, link);
	} else if (type == AE_IFREG) {
		u->pend_final = final;
		final = NULL;
		if (archive_entry_sparse_count(e) > 0) {
			tu_writers_wait(u); /* one may be writing this name */
			ret = unpack_sparse(u, rd, wd, e);
		} else if (archive_entry_size(e) < (la_int64_t)BIG_FILE) {
			ret = unpack_small(u, rd, wd, e);
		} else {
			tu_writers_wait(u);
			ret = unpack_big(u, rd, wd, e);
		}
	} else if (type == AE_IFDIR || type == AE_IFLNK || type == AE_IFIFO) {
		tu_writers_wait_name(u, final); /* a file of that name may be being written */
		ret = type == AE_IFDIR ? unpack_dir(u, wd, e, final)
				       : unpack_special(u, wd, e, final);
	} else {
		rdx_warn("skipping '%s': not a file, directory, symlink or fifo", tu_shown(u, final));
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
		tu_unpack_fail(u, -ENOMEM, "out of memory");
		goto out;
	}
	/* wd only maps owners' names (as tar does, tu_file_meta): entries are
	 * made by tree_disk.c, never by libarchive's by-path writer. */
	if (u->as_root)
		archive_write_disk_set_standard_lookup(wd);
	archive_read_support_format_tar(rd);
	tu_writers_start(u, u->nwriters);
	if (archive_read_open(rd, u, NULL, unpack_read, NULL) != ARCHIVE_OK) {
		tu_unpack_fail(u, -RDX_EPROTO, "malformed tree stream: %s",
			    archive_error_string(rd));
		goto out;
	}
	for (;;) {
		if (tu_writers_failed(u))
			break;
		r = archive_read_next_header(rd, &e);
		if (r == ARCHIVE_EOF)
			break;
		if (r < ARCHIVE_WARN) {
			tu_unpack_fail(u, -RDX_EPROTO, "malformed tree stream: %s",
				    archive_error_string(rd));
			break;
		}
		if (archive_entry_pathname(e) &&
		    strcmp(archive_entry_pathname(e), RDX_TREE_HASH_NAME) == 0) {
			if (take_hash(u, rd, e))
				break;
		} else if (archive_entry_pathname(e) &&
			   strcmp(archive_entry_pathname(e), RDX_TREE_DELETE_NAME) == 0) {
			if (tu_take_delete(u, rd, e))
				break;
		} else if (archive_entry_pathname(e) &&
			   strcmp(archive_entry_pathname(e), RDX_TREE_MISSING_NAME) == 0) {
			if (take_missing(u, rd, e))
				break;
		} else if (tu_unpack_entry(u, rd, wd, e)) {
			break;
		}
	}
	if (!u->err && u->pend_final)
		tu_unpack_fail(u, -RDX_EPROTO, "tree stream ended before the hash of '%s'",
			    tu_shown(u, u->pend_final));
out:
	/* Unblock the core's writer at once; what it sends now is moot. */
	if (u->fd >= 0)
		close(u->fd);
	u->fd = -1;
	feed_gone(u);
	tu_writers_stop(u); /* every verified file written */
	tu_writers_failed(u);
	drop_pending(u);
	tu_dirs_finish(u);
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

/* -v, once per tree: the policy its files get. */
static void say_policy(const struct rdx_tree_unpack *u)
{
	struct rdx_wneed n = { .policy = u->direct, .size_known = true, .avail = u->avail };
	struct rdx_wplan p = rdx_wplan_choose(&n);
	char share[32], avail[32], big[32];

	if (u->direct != RDX_DIRECT_AUTO) {
		rdx_info(1, "tree: --direct %s: files of %s and more %s", rdx_direct_name(u->direct),
			 rdx_fmt_bytes(share, sizeof(share), BIG_FILE),
			 u->direct == RDX_DIRECT_ALWAYS ? "with O_DIRECT, smaller ones through the page cache"
							: "through the page cache too");
		return;
	}
	rdx_info(1,
		 "tree: --direct auto: files through the page cache while the tree stays within "
		 "%s (a quarter of %s available), files of %s and more with O_DIRECT, one write at a time, past that",
		 rdx_fmt_bytes(share, sizeof(share), p.share),
		 u->avail ? rdx_fmt_bytes(avail, sizeof(avail), u->avail) : "the unknown memory",
		 rdx_fmt_bytes(big, sizeof(big), BIG_FILE));
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
	u->tops_glob = o->tops_glob;
	u->allow_delete = o->allow_delete;
	u->keep_setid = o->keep_setid;
	u->direct = o->direct;
	u->fsync = o->fsync;
	u->avail = rdx_mem_available();
	u->stop = stop;
	say_policy(u);
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
		tu_writers_destroy(u);
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
	tu_forget_checked(u); /* waits on the writers' lock: before it goes */
	tu_writers_destroy(u);
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
