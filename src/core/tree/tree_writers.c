/* The writer pool of a tree's receiver: threads that check a small
 * file's hash and make it (unnamed, then linked under its name), and write
 * big files' stages (through their sinks, as the tree's page-cache policy
 * has them), while the unpacker goes on. */
#include "core/tree/tree_unpack_int.h"

void tu_job_free(struct job *j)
{
	if (j) {
		tu_dir_drop(j->dir);
		free(j->final);
		free(j->stage);
		free(j);
	}
}
void tu_file_meta(const struct rdx_tree_unpack *u, struct archive *wd,
		  struct archive_entry *e, struct tree_meta *m)
{
	m->uid = (uid_t)archive_write_disk_uid(wd, archive_entry_uname(e),
					       archive_entry_uid(e));
	m->gid = (gid_t)archive_write_disk_gid(wd, archive_entry_gname(e),
					       archive_entry_gid(e));
	m->mode = archive_entry_perm(e) &
		  (u->as_root && u->keep_setid ? 07777 : 01777);
	m->times[1] = (struct timespec){archive_entry_mtime(e),
					archive_entry_mtime_nsec(e)};
	m->times[0] = archive_entry_atime_is_set(e)
			      ? (struct timespec){archive_entry_atime(e),
						  archive_entry_atime_nsec(e)}
			      : m->times[1];
}

/* A file's owner, mode and times, then its data, through fd (synced
 * with --fsync). */
static int write_fd(struct rdx_tree_unpack *u, struct job *j, int fd)
{
	ssize_t n = j->len ? rdx_pwrite_full(fd, j->data, j->len, 0) : 0;
	int err = n < 0 ? (int)n : tree_set_meta(fd, &j->m, u->as_root);

	return !err && u->fsync && fsync(fd) ? -errno : err;
}

/* Written under a temporary name, then renamed over the final one.
 * Returns 0 or -errno; *what says which step failed. */
static int write_named(struct rdx_tree_unpack *u, struct job *j,
		       const char **what)
{
	char *tmp = NULL;
	int fd = rdx_temp_create(j->dir->fd, tu_base_name(j->final), O_WRONLY,
				 &tmp),
	    err;

	if (fd < 0)
		return fd;
	err = write_fd(u, j, fd);
	if (close(fd) && !err)
		err = -errno;
	if (err) {
		unlinkat(j->dir->fd, tmp, 0);
	} else {
		*what = "create";
		err = tree_place(j->dir->fd, tmp, tu_base_name(j->final));
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
static int write_anon(struct rdx_tree_unpack *u, struct job *j,
		      const char **what)
{
	struct rdx_tmpfile t = {.name = NULL};
	int err;

	/* Made with its permission bits (no one can open it before it is
	 * linked), so that the umask and a default ACL aside, its mode
	 * needs no change of its own (tree_set_meta). */
	t.fd = openat(j->dir->fd, ".", O_TMPFILE | O_WRONLY | O_CLOEXEC,
		      j->m.mode & 0777);
	if (t.fd < 0)
		return errno == EOPNOTSUPP || errno == EISDIR || errno == EINVAL
			       ? 1
			       : -errno;
	err = write_fd(u, j, t.fd);
	if (!err) {
		*what = "create";
		err = rdx_tmpfile_publish(&t, j->dir->fd,
					  tu_base_name(j->final), true);
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
					   : rdx_sink_write(j->sink, j->stage,
							    j->len, j->off);
		if (err)
			atomic_compare_exchange_strong(&u->stage_err, &none,
						       err);
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
		rdx_warn("cannot %s '%s': %s", what, tu_shown(u, j->final),
			 strerror(-err));
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
		tu_job_free(j);
		pthread_mutex_lock(&w->lock);
	}
	pthread_mutex_unlock(&w->lock);
	return NULL;
}

/* Starts up to n writers, no more than there are CPUs: their work is the
 * kernel's (creating, copying into the page cache, renaming), and more
 * threads than CPUs only spin on the directory's lock.  With none, the
 * unpacking thread writes. */
void tu_writers_start(struct rdx_tree_unpack *u, unsigned n)
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
void tu_writers_wait(struct rdx_tree_unpack *u)
{
	struct writers *w = &u->w;

	pthread_mutex_lock(&w->lock);
	while (w->busy)
		pthread_cond_wait(&w->idle, &w->lock);
	pthread_mutex_unlock(&w->lock);
}

/* FNV-1a of a full name: which writer takes the file, and where it is
 * counted in flight. */
uint64_t tu_name_hash(const char *name)
{
	uint64_t h = 1469598103934665603ull;

	for (const char *c = name; c && *c; c++)
		h = (h ^ (unsigned char)*c) * 1099511628211ull;
	return h;
}

/* Waits, before full is made as something else than a file, until no
 * file of that name can be with the writers: when one may be (or one of
 * a name that shares its count), until they are all done. */
void tu_writers_wait_name(struct rdx_tree_unpack *u, const char *full)
{
	struct writers *w = &u->w;
	unsigned slot = (unsigned)(tu_name_hash(full) % IN_FLIGHT);

	pthread_mutex_lock(&w->lock);
	while (w->in_flight[slot])
		pthread_cond_wait(&w->idle, &w->lock);
	pthread_mutex_unlock(&w->lock);
}

/* A file a writer found to differ from its hash fails the stream (the
 * file itself was not written).  Returns that fatal code, or 0. */
int tu_writers_failed(struct rdx_tree_unpack *u)
{
	struct writers *w = &u->w;
	int ret;

	if (!atomic_load(&w->corrupt))
		return 0;
	pthread_mutex_lock(&w->lock);
	ret = tu_unpack_fail(u, -RDX_EINTEGRITY,
			     "data of '%s' corrupted in transit (xxh3-128 "
			     "mismatch)",
			     w->corrupt_name ? tu_shown(u, w->corrupt_name)
					     : "a file");
	pthread_mutex_unlock(&w->lock);
	return ret;
}

/* A STAGE-sized, 4 KiB-aligned buffer, a spare one if there is one. */
char *tu_stage_get(struct rdx_tree_unpack *u)
{
	struct writers *w = &u->w;
	char *stage = NULL;

	pthread_mutex_lock(&w->lock);
	if (w->nspare)
		stage = w->spare[--w->nspare];
	pthread_mutex_unlock(&w->lock);
	return stage ? stage : aligned_alloc(4096, STAGE);
}

void tu_stage_put(struct rdx_tree_unpack *u, char *stage)
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

void tu_writers_destroy(struct rdx_tree_unpack *u)
{
	while (u->w.nspare)
		free(u->w.spare[--u->w.nspare]);
	free(u->w.corrupt_name);
	pthread_cond_destroy(&u->w.idle);
	pthread_cond_destroy(&u->w.room);
	pthread_mutex_destroy(&u->w.lock);
}

void tu_writers_stop(struct rdx_tree_unpack *u)
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
void tu_writers_submit(struct rdx_tree_unpack *u, struct job *j)
{
	struct writers *w = &u->w;
	struct writer *one;
	uint64_t h = j->name_hash = tu_name_hash(j->final);

	if (!w->n) {
		write_job(u, j);
		tu_stage_put(u, j->stage);
		j->stage = NULL;
		tu_job_free(j);
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
