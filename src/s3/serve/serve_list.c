/* rds3 serve's listings: a bucket's files as keys in S3's order (bytes,
 * as strcmp), walked depth first with each directory's entries sorted as
 * their keys sort (a directory "a" as "a/", so "a-b" < "a/x" < "a0"), and
 * whole directories passed over when no key in them can be listed (before
 * start_after, outside the prefix, or inside a common prefix already
 * given).  Only the directories on the way down are held in memory.
 * A directory is a key itself only when it holds a folder marker's file
 * (SV_FOLDER_NAME, serve_store.c), which no key names and no listing
 * gives as its own: "a/" sorts before every key inside it. */
#include "s3/serve/serve_int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define DEPTH_MAX (SV_KEY_MAX / 2 + 1)

struct ent {
	char *name;
	size_t len;
	bool dir;
};

struct lw {
	const struct sv_list_args *a;
	size_t plen, dlen;
	char skip[SV_KEY_MAX + 2]; /* the last common prefix given, "" none */
	struct sv_list_result *out;
	size_t cap;
	bool done;
	char key[SV_KEY_MAX + 2];
};

static bool starts(const char *s, const char *p)
{
	return !strncmp(s, p, strlen(p));
}

/* Byte order of the keys the entries stand for: a directory's name is
 * followed by '/'. */
static int ent_cmp(const void *x, const void *y)
{
	const struct ent *a = x, *b = y;
	size_t i;

	for (i = 0;; i++) {
		int ca = i < a->len ? (unsigned char)a->name[i] : i == a->len && a->dir ? '/' : -1;
		int cb = i < b->len ? (unsigned char)b->name[i] : i == b->len && b->dir ? '/' : -1;

		if (ca != cb || ca < 0)
			return ca - cb;
	}
}

/* Adds key: a common prefix when m is NULL. */
static int add(struct lw *w, const char *key, const struct sv_meta *m, time_t mtime)
{
	struct sv_list_result *o = w->out;
	struct sv_list_item *it;

	if (o->n >= w->a->max_keys) {
		o->truncated = true;
		w->done = true;
		return 0;
	}
	if (o->n == w->cap) {
		size_t cap = w->cap ? w->cap * 2 : 64;
		struct sv_list_item *v = realloc(o->v, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		o->v = v;
		w->cap = cap;
	}
	it = &o->v[o->n];
	memset(it, 0, sizeof(*it));
	if (m) {
		it->size = m->size;
		it->mtime = mtime;
		memcpy(it->etag, m->etag, sizeof(it->etag));
	}
	it->key = strdup(key);
	if (!it->key)
		return -ENOMEM;
	it->is_prefix = !m;
	o->n++;
	return 0;
}

/* Where the key w->key goes: 0 nowhere (outside the prefix, not after
 * start_after, or inside a common prefix already given), 1 in the
 * listing as a key; else its common prefix was added (2) or could not
 * be (-ENOMEM). */
static int place(struct lw *w)
{
	const struct sv_list_args *a = w->a;
	const char *key = w->key, *d;
	int ret;

	if (!starts(key, a->prefix) || (a->start_after && strcmp(key, a->start_after) <= 0) ||
	    (w->skip[0] && starts(key, w->skip)))
		return 0;
	if (w->dlen && (d = strstr(key + w->plen, a->delimiter))) {
		size_t n = (size_t)(d - key) + w->dlen;

		memcpy(w->skip, key, n);
		w->skip[n] = '\0';
		if (a->start_after && strcmp(w->skip, a->start_after) <= 0)
			return 0;
		ret = add(w, w->skip, NULL, 0);
		return ret ? ret : 2;
	}
	return 1;
}

/* A file whose key is w->key. */
static int file(struct lw *w, int dir, const char *name)
{
	struct sv_meta m;
	struct stat st;
	int fd, ret = place(w);

	if (ret != 1)
		return ret < 0 ? ret : 0;
	fd = openat(dir, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return 0;
	if (fstat(fd, &st) || !S_ISREG(st.st_mode) || sv_meta_get(fd, &m)) {
		close(fd);
		return 0; /* gone or unreadable meanwhile: not listed */
	}
	close(fd);
	ret = add(w, w->key, &m, st.st_mtim.tv_sec);
	sv_meta_release(&m);
	return ret;
}

/* The directory fd whose key is w->key (ending in '/'): a key itself
 * when it holds a folder marker's file, listed before the keys inside
 * it. */
static int marker(struct lw *w, int fd)
{
	struct stat st;

	if (fstatat(fd, SV_FOLDER_NAME, &st, AT_SYMLINK_NOFOLLOW) || !S_ISREG(st.st_mode))
		return 0; /* a directory only: no key */
	return file(w, fd, SV_FOLDER_NAME);
}

/* Whether the directory whose keys all begin with w->key (ending in
 * '/') can hold a key to list. */
static bool dir_wanted(const struct lw *w)
{
	const char *k = w->key, *p = w->a->prefix, *s = w->a->start_after;

	if (!starts(k, p) && !starts(p, k))
		return false;
	if (w->skip[0] && starts(k, w->skip))
		return false;
	if (s && !starts(s, k) && strcmp(k, s) < 0)
		return false;
	return true;
}

static int read_dir(int fd, struct ent **out, size_t *n)
{
	DIR *d = fdopendir(fd);
	struct ent *v = NULL;
	size_t cap = 0;
	struct dirent *de;
	int ret = 0;

	*n = 0;
	if (!d) {
		close(fd);
		return -errno;
	}
	while ((de = readdir(d))) {
		struct stat st;
		bool dir;

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..") ||
		    sv_key_ok(de->d_name))
			continue; /* a temporary, or no key's part */
		if (de->d_type == DT_DIR || de->d_type == DT_REG) {
			dir = de->d_type == DT_DIR;
		} else if (de->d_type == DT_UNKNOWN &&
			   !fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) &&
			   (S_ISDIR(st.st_mode) || S_ISREG(st.st_mode))) {
			dir = S_ISDIR(st.st_mode);
		} else {
			continue; /* symlinks, devices, fifos: not objects */
		}
		if (*n == cap) {
			struct ent *nv;

			cap = cap ? cap * 2 : 32;
			nv = realloc(v, cap * sizeof(*nv));
			if (!nv) {
				ret = -ENOMEM;
				break;
			}
			v = nv;
		}
		v[*n].name = strdup(de->d_name);
		if (!v[*n].name) {
			ret = -ENOMEM;
			break;
		}
		v[*n].len = strlen(de->d_name);
		v[*n].dir = dir;
		++*n;
	}
	closedir(d);
	if (!ret && *n) /* an empty directory has no array at all */
		qsort(v, *n, sizeof(*v), ent_cmp);
	*out = v;
	return ret;
}

/* Lists directory fd (consumed), whose keys begin with w->key[0..klen). */
static int walk(struct lw *w, int fd, size_t klen, unsigned depth)
{
	struct ent *v = NULL;
	size_t n = 0, i;
	int ret, rd;

	if (depth > DEPTH_MAX) {
		close(fd);
		return 0;
	}
	rd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	ret = rd < 0 ? -errno : read_dir(rd, &v, &n);
	for (i = 0; i < n && !ret && !w->done; i++) {
		size_t len = klen + v[i].len + v[i].dir;
		int sub;

		w->key[klen] = '\0';
		/* A common prefix given inside this directory covers it all. */
		if (klen && w->skip[0] && starts(w->key, w->skip))
			break;
		if (len > (size_t)SV_KEY_MAX + v[i].dir)
			continue;
		memcpy(w->key + klen, v[i].name, v[i].len);
		w->key[klen + v[i].len] = '\0';
		if (!v[i].dir) {
			ret = file(w, fd, v[i].name);
			continue;
		}
		strcpy(w->key + klen + v[i].len, "/");
		if (!dir_wanted(w))
			continue;
		sub = openat(fd, v[i].name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (sub < 0)
			continue;
		if (len <= SV_KEY_MAX)
			ret = marker(w, sub);
		if (!ret && !w->done)
			ret = walk(w, sub, len, depth + 1);
		else
			close(sub);
	}
	for (i = 0; i < n; i++)
		free(v[i].name);
	free(v);
	close(fd);
	return ret;
}

int sv_list(int bfd, const struct sv_list_args *a, struct sv_list_result *out)
{
	struct lw *w = calloc(1, sizeof(*w));
	int fd, ret;

	memset(out, 0, sizeof(*out));
	if (!w)
		return -ENOMEM;
	w->a = a;
	w->plen = strlen(a->prefix);
	w->dlen = a->delimiter ? strlen(a->delimiter) : 0;
	w->out = out;
	fd = openat(bfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	ret = fd < 0 ? -errno : walk(w, fd, 0, 0);
	free(w);
	if (ret)
		sv_list_release(out);
	return ret;
}

void sv_list_release(struct sv_list_result *r)
{
	size_t i;

	for (i = 0; i < r->n; i++)
		free(r->v[i].key);
	free(r->v);
	memset(r, 0, sizeof(*r));
}
