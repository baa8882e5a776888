/* The destination of a tree's receiver: every received name checked
 * and mapped under the root (through descriptors of checked directories),
 * directories' metadata set at the end, and the listing --sync asks for. */
#include "core/tree/tree_unpack_int.h"

#include <fnmatch.h>

/* A local name as the user sees it: relative to the root. */
const char *tu_shown(const struct rdx_tree_unpack *u, const char *full)
{
	if (!strncmp(full, u->root, u->rootlen) && full[u->rootlen] == '/')
		return full + u->rootlen + 1;
	return full;
}

/* Leaves the directory checked last; files the writers still have for
 * it hold its descriptor. */
static void drop_checked(struct rdx_tree_unpack *u)
{
	tu_dir_drop(u->checked_dir);
	u->checked_dir = NULL;
	free(u->checked);
	u->checked = NULL;
}

/* Leaves it once every write is done: after a removal, what was checked
 * may be gone. */
void tu_forget_checked(struct rdx_tree_unpack *u)
{
	tu_writers_wait(u);
	drop_checked(u);
}

/* rdx_dir_beneath(), kept for the directory opened last: entries come
 * directory by directory.  Only a symlink or a removal made since can
 * change the answer, and those forget it (tu_unpack_entry, tu_take_delete); an
 * entry inside the directory cannot replace the directory itself.  While
 * a file waits for its hash nothing else is mapped, so it keeps its
 * directory. */
static int parents_checked(struct rdx_tree_unpack *u, const char *full,
			   bool make)
{
	const char *slash = strrchr(full, '/');
	size_t len = slash ? (size_t)(slash - full) : 0;
	int err, fd;

	if (u->checked && strlen(u->checked) == len &&
	    !memcmp(u->checked, full, len))
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
	*u->checked_dir = (struct dirref){.fd = fd, .refs = 1};
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
	if (u->tops_glob) {
		char *name = strndup(in, len);
		bool ok = false;

		for (i = 0; name && i < u->ntops && !ok; i++)
			ok = u->tops[i] && fnmatch(u->tops[i], name, FNM_PERIOD) == 0;
		free(name);
		return ok;
	}
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
char *tu_full_name(struct rdx_tree_unpack *u, const char *in)
{
	const char *slash;
	size_t toplen;
	char *out;

	if (!in || !tree_name_safe(in) || in[strlen(in) - 1] == '/') {
		tu_unpack_fail(u, -RDX_EPROTO,
			       "refused an unsafe name from the sender: '%s'",
			       in ? in : "");
		return NULL;
	}
	slash = strchrnul(in, '/');
	toplen = (size_t)(slash - in);
	if (!top_allowed(u, in, toplen)) {
		tu_unpack_fail(u, -RDX_EPROTO,
			       "refused '%s' from the sender: not what was "
			       "asked for",
			       in);
		return NULL;
	}
	if (!u->top_seen) {
		u->top_seen = strndup(in, toplen);
		if (!u->top_seen) {
			tu_unpack_fail(u, -ENOMEM, "out of memory");
			return NULL;
		}
	} else if (u->rename_top && (strlen(u->top_seen) != toplen ||
				     memcmp(in, u->top_seen, toplen))) {
		tu_unpack_fail(u, -RDX_ELOCAL,
			       "several trees were sent but '%s' is not a "
			       "directory",
			       u->rename_top);
		return NULL;
	}
	if (asprintf(&out, "%s/%s%s", u->root,
		     u->rename_top ? u->rename_top : "",
		     u->rename_top ? slash : in) < 0) {
		tu_unpack_fail(u, -ENOMEM, "out of memory");
		return NULL;
	}
	return out;
}

/* Records why a directory on the way to the received name in could not
 * be opened (err, -errno), and returns u->err. */
int tu_dir_failed(struct rdx_tree_unpack *u, const char *in, int err)
{
	if (err == -ELOOP)
		return tu_unpack_fail(u, -RDX_EPROTO,
				      "refused to write through a symlink: "
				      "'%s'",
				      in);
	return tu_unpack_fail(u, -RDX_ELOCAL, "cannot check '%s': %s", in,
			      strerror(-err));
}

/* tu_full_name(), with the directory it is in opened as u->checked_dir:
 * made when make is set, else possibly absent (checked_dir NULL).  NULL
 * with the failure recorded. */
char *tu_map_name(struct rdx_tree_unpack *u, const char *in, bool make)
{
	char *out = tu_full_name(u, in);
	int err;

	if (!out)
		return NULL;
	err = parents_checked(u, out, make);
	if (err) {
		tu_dir_failed(u, in, err);
		free(out);
		return NULL;
	}
	return out;
}

/* The last component of a name. */
const char *tu_base_name(const char *name)
{
	const char *slash = strrchr(name, '/');

	return slash ? slash + 1 : name;
}

/* ---- directories' metadata, set at the end ---- */

int tu_dir_enter(struct rdx_tree_unpack *u, const char *full,
		 const struct tree_meta *m)
{
	size_t len = strlen(full);
	struct dirfix *d = malloc(sizeof(*d) + len + 1);

	if (!d)
		return tu_unpack_fail(u, -ENOMEM, "out of memory");
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
	int err = tree_set_dir_meta(u->root_fd, d->full + u->rootlen + 1, &d->m,
				    u->as_root);

	if (err && err != -ENOENT) { /* gone: removed since */
		rdx_warn("cannot set the mode and times of '%s': %s",
			 tu_shown(u, d->full), strerror(-err));
		atomic_fetch_add(&u->failed, 1);
	}
}

/* Deepest first (a name sorts after its parent's), and of one name the
 * last received first. */
static int by_name_desc(const void *a, const void *b)
{
	const struct dirfix *x = *(struct dirfix *const *)a,
			    *y = *(struct dirfix *const *)b;
	int c = strcmp(y->full, x->full);

	return c ? c : x->seq < y->seq ? 1 : x->seq > y->seq ? -1 : 0;
}

/* The end: every directory's metadata, once nothing more goes into it,
 * children before their parent (whose mode may keep us out of it), and
 * of a directory received twice (two trees of one name) the last
 * entry's. */
void tu_dirs_finish(struct rdx_tree_unpack *u)
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
	int fd = openat(dir, name,
			O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	struct stat now;
	DIR *d;

	if (fd < 0)
		return NULL;
	if (fstat(fd, &now) || now.st_dev != st->st_dev ||
	    now.st_ino != st->st_ino || !(d = fdopendir(fd))) {
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
	if (fstatat(u->root_fd, u->rename_top ? u->rename_top : top, &st,
		    AT_SYMLINK_NOFOLLOW) ||
	    !S_ISDIR(st.st_mode) ||
	    !(lv[0].d = list_open(u->root_fd,
				  u->rename_top ? u->rename_top : top, &st)))
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
		if (nlen > max ||
		    fstatat(dirfd(l->d), de->d_name, &st, AT_SYMLINK_NOFOLLOW))
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
					O_RDONLY | O_NOFOLLOW | O_NONBLOCK |
						O_CLOEXEC);
			struct stat now;

			/* (not a fifo swapped in: reading it would wait) */
			if (fd >= 0 && !fstat(fd, &now) &&
			    S_ISREG(now.st_mode) &&
			    tree_hash_fd(fd, key, e.hash) == 0)
				e.type = RDX_LIST_HASHED;
			if (fd >= 0)
				close(fd);
		}
		ret = emit(arg, &e);
		if (sub && !ret && depth + 1 < LIST_DEPTH) {
			lv[++depth] =
				(struct list_level){.d = sub, .len = nlen};
		} else if (sub) {
			closedir(sub);
		}
	}
	while (depth >= 0)
		closedir(lv[depth--].d);
	free(name);
	return ret;
}
