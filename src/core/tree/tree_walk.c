/* The walker thread of a tree's sender: libarchive's walk of the
 * sources, every entry queued in order. */
#include "core/tree/tree_pack_int.h"

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
	return tp_queue_put(p, it);
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
	if (p->plan && tp_plan_walked(p->plan, e)) {
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
			tp_item_free(it);
			return -ENOMEM;
		}
		if (!size) { /* nothing to read: not even opened, as before */
			it->hash = XXH3_128bits(NULL, 0);
			it->read = true;
		} else if (!p->q.nreaders) {
			tp_read_ahead(it); /* no reader to do it */
			it->read = true;
		}
	}
	return tp_queue_put(p, it);
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
		tp_queue_put(p, end);
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
int tp_ahead_start(struct rdx_tree_pack *p)
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
		if (pthread_create(&q->readers[q->nreaders], NULL, tp_reader_main, q))
			break;
	ret = -pthread_create(&q->walker, NULL, walk_main, p);
	q->walking = !ret;
	return ret;
}

void tp_ahead_destroy(struct ahead *q)
{
	pthread_cond_destroy(&q->room);
	pthread_cond_destroy(&q->ready);
	pthread_cond_destroy(&q->work);
	pthread_mutex_destroy(&q->lock);
}

/* Stops and joins the walker and the readers, and frees what is queued. */
void tp_ahead_stop(struct rdx_tree_pack *p)
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
		tp_item_free(it);
	}
	q->tail = NULL;
}
