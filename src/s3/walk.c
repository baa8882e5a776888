#include "s3/walk.h"

#include "core/err.h"
#include "core/io.h"
#include "core/log.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define REL_MAX 4000 /* a relative name: PATH_MAX less room for the root */

static int tree_add(struct s3_tree *t, const char *rel, uint64_t size,
		    int64_t mtime, const char *etag)
{
	struct s3_item *it;

	if (t->n == t->cap) {
		size_t cap = t->cap ? t->cap * 2 : 256;
		struct s3_item *v = realloc(t->v, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		t->v = v;
		t->cap = cap;
	}
	it = &t->v[t->n];
	memset(it, 0, sizeof(*it));
	it->rel = strdup(rel);
	it->etag = etag ? strdup(etag) : NULL;
	if (!it->rel || (etag && !it->etag)) {
		free(it->rel);
		free(it->etag);
		return -ENOMEM;
	}
	it->size = size;
	it->mtime = mtime;
	t->n++;
	return 0;
}

static int cmp_item(const void *a, const void *b)
{
	return strcmp(((const struct s3_item *)a)->rel,
		      ((const struct s3_item *)b)->rel);
}

static void tree_sort(struct s3_tree *t)
{
	if (t->n)
		qsort(t->v, t->n, sizeof(*t->v), cmp_item);
}

const struct s3_item *s3_tree_find(const struct s3_tree *t, const char *rel)
{
	struct s3_item k = {.rel = (char *)rel};

	if (!t->n)
		return NULL;
	return bsearch(&k, t->v, t->n, sizeof(*t->v), cmp_item);
}

void s3_tree_release(struct s3_tree *t)
{
	size_t i;

	for (i = 0; i < t->n; i++) {
		free(t->v[i].rel);
		free(t->v[i].etag);
	}
	free(t->v);
	memset(t, 0, sizeof(*t));
}

static bool ends_with(const char *s, size_t n, const char *suffix)
{
	size_t k = strlen(suffix);

	return n > k && !memcmp(s + n - k, suffix, k);
}

/* What rds3 leaves beside a file while it downloads one: .NAME.rdx-XXXXXX
 * (s3_out_open), .NAME.rdx-XXXXXXXX (s3_out_open_at), .NAME.rdx-part and
 * its .meta (get --resume). */
static bool is_temp(const char *name)
{
	size_t n = strlen(name);

	if (name[0] != '.')
		return false;
	return (n > 12 && !memcmp(name + n - 11, ".rdx-", 5)) ||
	       (n > 14 && !memcmp(name + n - 13, ".rdx-", 5)) ||
	       ends_with(name, n, ".rdx-part") ||
	       ends_with(name, n, ".rdx-part.meta");
}

struct walk {
	const struct rdx_rule *rules;
	size_t nrules;
	struct s3_tree *t;
	size_t *unreadable;
	const char *root;
};

static void cannot_read(struct walk *w, const char *rel, int err)
{
	rdx_error("cannot read '%s%s%s': %s", w->root, *rel ? "/" : "", rel,
		  strerror(err));
	(*w->unreadable)++;
}

/* Walks the directory open as dfd, whose name relative to the root is
 * rel ("" for the root itself); takes dfd.  What cannot be read is
 * reported and counted, and the walk goes on; only -ENOMEM stops it. */
static int walk_dir(struct walk *w, int dfd, const char *rel)
{
	DIR *d = fdopendir(dfd);
	struct dirent *de;
	char sub[REL_MAX + 256];
	int ret = 0;

	if (!d) {
		cannot_read(w, rel, errno);
		close(dfd);
		return 0;
	}
	for (;;) {
		struct stat st;

		errno = 0;
		de = readdir(d);
		if (!de) {
			if (errno)
				cannot_read(w, rel, errno);
			break;
		}
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if ((size_t)snprintf(sub, sizeof(sub), "%s%s%s", rel,
				     *rel ? "/" : "", de->d_name) > REL_MAX) {
			rdx_warn("skipping '%s/%s': the name is too long",
				 w->root, sub);
			continue;
		}
		if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW)) {
			cannot_read(w, sub, errno);
			continue;
		}
		if (S_ISDIR(st.st_mode)) {
			int fd = openat(dirfd(d), de->d_name,
					O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
						O_CLOEXEC);

			if (fd < 0) {
				cannot_read(w, sub, errno);
				continue;
			}
			if ((ret = walk_dir(w, fd, sub)))
				break;
			continue;
		}
		if (!S_ISREG(st.st_mode)) {
			rdx_warn("skipping '%s/%s': %s", w->root, sub,
				 S_ISLNK(st.st_mode) ? "a symlink (not "
						       "followed)"
						     : "not a regular file");
			continue;
		}
		if (is_temp(de->d_name)) {
			rdx_info(1, "skipping '%s/%s': an unfinished download",
				 w->root, sub);
			continue;
		}
		if (!rdx_rules_pass(w->rules, w->nrules, sub))
			continue;
		if ((ret = tree_add(w->t, sub, (uint64_t)st.st_size,
				    st.st_mtim.tv_sec, NULL)))
			break;
	}
	closedir(d);
	return ret;
}

int s3_walk_local(const char *root, const struct rdx_rule *rules, size_t nrules,
		  struct s3_tree *t, size_t *unreadable)
{
	struct walk w = {
		.rules = rules,
		.nrules = nrules,
		.t = t,
		.unreadable = unreadable,
		.root = root,
	};
	int fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int ret;

	if (fd < 0)
		return -errno;
	ret = walk_dir(&w, fd, "");
	tree_sort(t);
	return ret;
}

int s3_walk_remote(struct s3_client *c, const char *bucket, const char *prefix,
		   const struct rdx_rule *rules, size_t nrules,
		   bool keep_markers, struct s3_tree *t)
{
	struct s3_list l = {0};
	size_t plen = strlen(prefix), i;
	char *token = NULL;
	int ret;

	do {
		ret = s3_list_objects(c, bucket, prefix, NULL, token, &l);
		free(token);
		token = NULL;
		if (ret)
			break;
		for (i = 0; i < l.n && !ret; i++) {
			const struct s3_entry *e = &l.v[i];
			const char *rel;
			size_t n = strlen(e->name);

			if (e->is_prefix || n <= plen ||
			    strncmp(e->name, prefix, plen))
				continue;
			rel = e->name + plen;
			if (rel[strlen(rel) - 1] == '/' && !keep_markers)
				continue;
			if (!rdx_rules_pass(rules, nrules, rel))
				continue;
			ret = tree_add(t, rel, e->size, s3_parse_time(e->mtime),
				       e->etag);
		}
		if (!ret && l.truncated) {
			token = l.next_token ? strdup(l.next_token) : NULL;
			if (!token)
				ret = l.next_token ? -ENOMEM : -RDX_EPROTO;
		}
		s3_list_release(&l);
	} while (!ret && token);
	free(token);
	tree_sort(t);
	return ret;
}

bool s3_rel_path_ok(const char *rel, const char **why)
{
	const char *p = rel, *e;

	if (!*rel) {
		*why = "the key names the prefix itself";
		return false;
	}
	if (*rel == '/') {
		*why = "it would be an absolute path";
		return false;
	}
	if (strlen(rel) > REL_MAX) {
		*why = "the local name would be too long";
		return false;
	}
	for (;;) {
		size_t n;

		e = strchr(p, '/');
		n = e ? (size_t)(e - p) : strlen(p);
		if (n == 2 && !memcmp(p, "..", 2)) {
			*why = "a '..' component would leave the destination";
			return false;
		}
		if (n == 1 && *p == '.') {
			*why = "it has a '.' component";
			return false;
		}
		if (!n) {
			*why = "it has an empty component ('//')";
			return false;
		}
		if (n > 255) {
			*why = "a component is longer than 255 bytes";
			return false;
		}
		if (!e)
			return true;
		p = e + 1;
	}
}

/* Opens the directory holding rel's last component below root, one
 * component at a time with O_NOFOLLOW, so that no symlink (made by anyone,
 * at any time before each open) is ever followed; make: create missing
 * directories.  Sets *last to that component.  Returns the directory fd,
 * or -ELOOP for a symlink on the way, or -errno. */
static int open_parent(const char *root, const char *rel, bool make,
		       const char **last)
{
	const char *slash = strrchr(rel, '/');
	int rfd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC), fd, err;

	if (rfd < 0)
		return -errno;
	err = rdx_dir_beneath(rfd, rel, make, &fd);
	close(rfd);
	if (err)
		return err;
	if (fd < 0)
		return -ENOENT;
	*last = slash ? slash + 1 : rel;
	return fd;
}

int s3_local_prepare(const char *root, const char *rel, int *dir)
{
	const char *name;
	struct stat st;
	int dfd = open_parent(root, rel, true, &name), ret = 0;

	if (dfd < 0)
		return dfd;
	if (!fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW)) {
		if (S_ISLNK(st.st_mode))
			ret = -ELOOP;
		else if (S_ISDIR(st.st_mode))
			ret = -EISDIR;
	}
	if (dir && !ret)
		*dir = dfd;
	else
		close(dfd);
	return ret;
}

int s3_local_unlink(const char *root, const char *rel)
{
	const char *name;
	int dfd = open_parent(root, rel, false, &name), ret = 0;

	if (dfd == -ENOENT)
		return 0; /* a directory on the way is gone: so is the file */
	if (dfd < 0)
		return dfd;
	if (unlinkat(dfd, name, 0) && errno != ENOENT)
		ret = -errno;
	close(dfd);
	return ret;
}

int64_t s3_parse_time(const char *s)
{
	struct tm tm;
	const char *end;

	if (!s)
		return -1;
	memset(&tm, 0, sizeof(tm));
	end = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm);
	if (!end) {
		memset(&tm, 0, sizeof(tm));
		end = strptime(s, "%a, %d %b %Y %H:%M:%S", &tm);
	}
	if (!end)
		return -1;
	return (int64_t)timegm(&tm);
}
