/* The sender's side of a tree: walk the sources (libarchive's walk),
 * read the files, and write them as one pax stream with a hash after
 * each; --sync's plan of what the receiver already has. */
#include "core/tree/tree_pack_int.h"

/* ---- sender: walk and pack -------------------------------------------- */

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

/* Empties a block the core took: the files it lent from are freed. */
static void block_reset(struct block *b)
{
	struct item *it;

	while ((it = b->items)) {
		b->items = it->next;
		tp_item_free(it);
	}
	b->tail = &b->items;
	b->n = 0;
	b->bytes = 0;
	b->fill = 0;
}

/* Offers the block tp_pack_write() filled, and goes on in the other one,
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
la_ssize_t tp_pack_write(struct archive *a, void *arg, const void *buf,
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
int tp_open_walked(struct archive_entry *e, struct stat *st)
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
void tp_sparse_map(int fd, const struct stat *st, struct archive_entry *e)
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
int tp_pack_ahead(struct rdx_tree_pack *p, struct archive *w, struct item *it)
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
 * readers (tp_read_chunk), chunk by chunk in order, and its hash.  Returns 0
 * (a read failure is only counted), -EPIPE, or the walk's failure when it
 * stopped everything. */
int tp_pack_big(struct rdx_tree_pack *p, struct archive *w,
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

/* Whether a file goes through tp_pack_big(): big, not sparse (whose holes
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

/* Sends one walked entry.  Returns 0, -EPIPE, or (tp_pack_big) the walk's
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

		fd = tp_open_walked(e, &st);
		if (fd >= 0 && !it->ahead)
			tp_sparse_map(fd, &st, e);
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
		return tp_pack_ahead(p, w, it);
	return use_big(p, e) ? tp_pack_big(p, w, e, h, fd) : pack_read(p, w, e, h, fd);
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
	/* Restricted pax writes access times only where an entry needs a pax
	 * header anyway; full pax always (a header block each). */
	if (p->atime)
		archive_write_set_format_pax(w);
	else
		archive_write_set_format_pax_restricted(w);
	/* Names are bytes, as on disk: no translation through the locale
	 * (which fails for non-ASCII under LANG=C). */
	archive_write_set_format_option(w, "pax", "hdrcharset", "BINARY");
	archive_write_set_bytes_per_block(w, 0); /* tp_pack_write() gathers */
	archive_entry_linkresolver_set_strategy(lr, archive_format(w));
	if (archive_write_open2(w, p, NULL, tp_pack_write, NULL, NULL) != ARCHIVE_OK) {
		ret = -EPIPE;
		goto out;
	}
	ret = tp_ahead_start(p);
	while (!ret && (it = tp_queue_take(p)) && it->kind != ITEM_END) {
		if (it->kind == ITEM_MISSING)
			ret = tp_pack_marker(w, RDX_TREE_MISSING_NAME, it->text);
		else
			ret = pack_entry(p, w, lr, it, h);
		if (p->lent) { /* kept until the core took the current block */
			struct block *b = &p->blk[p->cur];

			p->lent = false;
			it->next = NULL;
			*b->tail = it;
			b->tail = &it->next;
		} else {
			tp_item_free(it);
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
			ret = tp_pack_deletes(p->plan, p->rules, p->nrules, w);
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
	tp_item_free(it);
	tp_ahead_stop(p);
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
	p->atime = o->atime;
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
		tp_ahead_destroy(&p->q);
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
	tp_ahead_destroy(&p->q);
	tree_feed_destroy(&p->out);
	free(p);
	return ret;
}
