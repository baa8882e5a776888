/* rds3 serve's objects on disk: bucket B is ROOT/B, key K the file
 * ROOT/B/K.  Every name is reached from the bucket's descriptor one
 * component at a time without following a symlink (rdx_dir_beneath), so
 * nothing a key says, and no symlink planted inside ROOT, reaches outside
 * it.  An object is written to a temporary beside its name and renamed
 * there when complete; what the server knows of it (ETag, parts, headers)
 * is the extended attribute "user.rds3", kept with the file's size and
 * mtime so that a file changed by another hand is hashed again. */
#include "s3/serve/serve_int.h"

#include "core/hex.h"
#include "core/io.h"
#include "s3/s3.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#define XATTR "user.rds3"
#define XATTR_MAX 4096


void sv_meta_release(struct sv_meta *m)
{
	free(m->headers);
	m->headers = NULL;
}

bool sv_bucket_ok(const char *name)
{
	size_t n = strlen(name), i;

	if (n < 3 || n > 63)
		return false;
	for (i = 0; i < n; i++) {
		char c = name[i];
		bool alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');

		if (!alnum && c != '-' && c != '.')
			return false;
		if (!alnum && (i == 0 || i == n - 1))
			return false;
		if (c == '.' && name[i - 1] == '.')
			return false;
	}
	return true;
}

bool sv_is_temp(const char *name)
{
	size_t n = strlen(name);

	if (name[0] != '.' || n < 15 || memcmp(name + n - 13, ".rdx-", 5))
		return false;
	return rdx_hex_is(name + n - 8, 8);
}

int sv_key_ok(const char *key)
{
	size_t n = strlen(key);
	const char *c = key;

	if (!n)
		return -EINVAL;
	if (n > SV_KEY_MAX)
		return -ENAMETOOLONG;
	for (c = key; *c; c++)
		if ((unsigned char)*c < 0x20 || *c == 0x7f)
			return -EINVAL; /* a listing could not carry it */
	for (c = key;;) {
		const char *slash = strchr(c, '/');
		size_t len = slash ? (size_t)(slash - c) : strlen(c);
		char part[NAME_MAX + 1];

		if (!len || len > NAME_MAX)
			return len ? -ENAMETOOLONG : -EINVAL;
		memcpy(part, c, len);
		part[len] = '\0';
		if (!strcmp(part, ".") || !strcmp(part, "..") || sv_is_temp(part) ||
		    !strcmp(part, SV_OWNER_NAME))
			return -EINVAL;
		if (!slash)
			return 0;
		c = slash + 1;
	}
}

/* ----------------------------------------------------------------- meta */

static int64_t mtime_ns(const struct stat *st)
{
	return (int64_t)st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec;
}

static bool etag_ok(const char *e)
{
	size_t i;

	if (!rdx_hex_is(e, 32))
		return false;
	if (!e[32])
		return true;
	if (e[32] != '-' || !e[33] || strlen(e) > 38)
		return false;
	for (i = 33; e[i]; i++)
		if (e[i] < '0' || e[i] > '9')
			return false;
	return true;
}

/* Parses the attribute: "rds3 1\netag E\nsize N\nmtime N\nparts N S\n\n"
 * then the header lines.  Anything else is no record. */
static bool meta_parse(char *v, struct sv_meta *m)
{
	unsigned long long size, part_size;
	long long mt;
	unsigned parts;
	char etag[40];
	int used = 0;

	if (sscanf(v, "rds3 1\netag %39s\nsize %llu\nmtime %lld\nparts %u %llu%n",
		   etag, &size, &mt, &parts, &part_size, &used) != 5 ||
	    !used || v[used] != '\n' || v[used + 1] != '\n' || !etag_ok(etag) ||
	    parts > SV_PARTS_MAX)
		return false;
	used++;
	snprintf(m->etag, sizeof(m->etag), "%s", etag);
	m->size = size;
	m->mtime_ns = mt;
	m->parts = parts;
	m->part_size = part_size;
	m->headers = v[used + 1] ? strdup(v + used + 1) : NULL;
	if (v[used + 1] && !m->headers)
		return false;
	return true;
}

int sv_meta_get(int fd, struct sv_meta *m)
{
	char v[XATTR_MAX + 1];
	unsigned char md5[16];
	struct stat st;
	ssize_t n;
	int ret;

	memset(m, 0, sizeof(*m));
	if (fstat(fd, &st))
		return -errno;
	n = fgetxattr(fd, XATTR, v, XATTR_MAX);
	if (n > 0) {
		v[n] = '\0';
		if (strlen(v) == (size_t)n && meta_parse(v, m) &&
		    m->size == (uint64_t)st.st_size && m->mtime_ns == mtime_ns(&st))
			return 0;
		sv_meta_release(m);
		memset(m, 0, sizeof(*m));
	}
	/* Put there or changed by another hand: hashed now, recorded when
	 * the file system can keep it. */
	if ((ret = s3_fd_md5(fd, -1, (uint64_t)st.st_size, NULL, md5)))
		return ret == -ENODATA ? -EAGAIN : ret; /* shrank meanwhile */
	rdx_hex_encode(md5, 16, m->etag);
	m->size = (uint64_t)st.st_size;
	m->mtime_ns = mtime_ns(&st);
	if (fstat(fd, &st) == 0 && (uint64_t)st.st_size == m->size &&
	    mtime_ns(&st) == m->mtime_ns)
		sv_meta_set(fd, m);
	return 0;
}

int sv_meta_set(int fd, const struct sv_meta *m)
{
	char v[XATTR_MAX + 1];
	struct stat st;
	int n;

	if (fstat(fd, &st))
		return -errno;
	n = snprintf(v, sizeof(v), "rds3 1\netag %s\nsize %llu\nmtime %lld\nparts %u %llu\n\n%s",
		     m->etag, (unsigned long long)st.st_size,
		     (long long)mtime_ns(&st), m->parts,
		     (unsigned long long)m->part_size, m->headers ? m->headers : "");
	if (n < 0 || n >= (int)sizeof(v))
		return -E2BIG;
	if (fsetxattr(fd, XATTR, v, (size_t)n, 0))
		return errno == EOPNOTSUPP ? -ENOTSUP : -errno;
	return 0;
}

/* -------------------------------------------------------------- objects */

int sv_bucket_open(int root, const char *bucket)
{
	int fd = openat(root, bucket, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

	if (fd < 0)
		return errno == ENOTDIR || errno == ELOOP ? -ENOENT : -errno;
	return fd;
}

static const char *last_part(const char *key)
{
	const char *s = strrchr(key, '/');

	return s ? s + 1 : key;
}

int sv_object_open(int bfd, const char *key)
{
	struct stat st;
	int dir, fd, ret;

	ret = rdx_dir_beneath(bfd, key, false, &dir);
	if (ret == -ELOOP || ret == -ENOTDIR || (!ret && dir < 0))
		return -ENOENT;
	if (ret)
		return ret;
	fd = openat(dir, last_part(key), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	ret = fd < 0 ? -errno : 0;
	close(dir);
	if (ret == -ELOOP || ret == -ENOTDIR || ret == -ENXIO)
		return -ENOENT;
	if (ret)
		return ret;
	if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
		close(fd);
		return -ENOENT;
	}
	return fd;
}

int sv_put_begin(int bfd, const char *key, struct sv_put *p)
{
	struct stat st;
	int ret = 0, tries;

	memset(p, 0, sizeof(*p));
	p->dir = p->fd = -1;
	p->name = last_part(key);
	/* A directory made here can be removed by a delete of its last
	 * object before the temporary is in it: then again. */
	for (tries = 0; tries < 3; tries++) {
		ret = rdx_dir_beneath(bfd, key, true, &p->dir);
		if (ret)
			return ret;
		if (!fstatat(p->dir, p->name, &st, AT_SYMLINK_NOFOLLOW) &&
		    S_ISDIR(st.st_mode)) {
			/* Only an empty one can become the object. */
			int d = openat(p->dir, p->name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			DIR *dh = d >= 0 ? fdopendir(d) : NULL;
			struct dirent *de;
			bool empty = true;

			if (!dh) {
				if (d >= 0)
					close(d);
				ret = -EEXIST;
				break;
			}
			while ((de = readdir(dh)))
				if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
					empty = false;
			closedir(dh);
			if (!empty) {
				ret = -EEXIST;
				break;
			}
		}
		ret = rdx_tmpfile_open(&p->stage, p->dir, p->name, O_RDWR);
		if (!ret) {
			p->fd = p->stage.fd;
			return 0;
		}
		close(p->dir);
		p->dir = -1;
		if (ret != -ENOENT)
			return ret;
	}
	if (p->dir >= 0)
		close(p->dir);
	p->dir = -1;
	return ret;
}

int sv_put_begin_at(int dir, const char *name, struct sv_put *p)
{
	int ret;

	memset(p, 0, sizeof(*p));
	p->dir = dir;
	p->fd = -1;
	p->name = name;
	ret = rdx_tmpfile_open(&p->stage, dir, name, O_RDWR);
	if (!ret)
		p->fd = p->stage.fd;
	return ret;
}

int sv_put_commit(struct sv_put *p, mode_t mode)
{
	int ret = 0;

	if (fchmod(p->fd, mode))
		ret = -errno;
	/* An empty directory of that name becomes the object; one with
	 * objects under it is a prefix that stays. */
	if (!ret)
		ret = rdx_tmpfile_publish(&p->stage, p->dir, p->name, true);
	if (ret == -EISDIR || ret == -ENOTEMPTY)
		ret = -EEXIST;
	sv_put_abort(p);
	return ret;
}

void sv_put_abort(struct sv_put *p)
{
	rdx_tmpfile_discard(&p->stage, p->dir); /* an unnamed one goes with its fd */
	if (p->fd >= 0)
		close(p->fd);
	if (p->dir >= 0)
		close(p->dir);
	p->fd = p->dir = -1;
}

int sv_object_delete(int bfd, const char *key)
{
	char path[SV_KEY_MAX + 1];
	int dir, ret;
	char *slash;

	ret = rdx_dir_beneath(bfd, key, false, &dir);
	if (ret == -ELOOP || ret == -ENOTDIR || (!ret && dir < 0))
		return 0;
	if (ret)
		return ret;
	if (unlinkat(dir, last_part(key), 0) && errno != ENOENT &&
	    errno != EISDIR && errno != ENOTDIR) {
		ret = -errno;
		close(dir);
		return ret;
	}
	close(dir);
	/* S3 has no directories: those the key made go when empty. */
	snprintf(path, sizeof(path), "%s", key);
	while ((slash = strrchr(path, '/'))) {
		*slash = '\0';
		if (rdx_dir_beneath(bfd, path, false, &dir) || dir < 0)
			break;
		ret = unlinkat(dir, last_part(path), AT_REMOVEDIR);
		close(dir);
		if (ret)
			break;
	}
	return 0;
}
