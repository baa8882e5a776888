/* rds3 serve's objects on disk: bucket B is ROOT/B, key K the file
 * ROOT/B/K.  Every name is reached from the bucket's descriptor one
 * component at a time without following a symlink (rdx_dir_beneath), so
 * nothing a key says, and no symlink planted inside ROOT, reaches outside
 * it.  An object is written to a temporary beside its name and renamed
 * there when complete; what the server knows of it (ETag, parts, headers)
 * is the extended attribute "user.rds3", kept with the file's size and
 * mtime so that a file changed by another hand is hashed again.
 *
 * A key ending in '/' (a folder marker, as s3fs, rclone and the AWS
 * console make for an empty "folder", or any object of such a name) is
 * the file SV_FOLDER_NAME inside the directory of that name: an object
 * as any other, its bytes, record and tags included, which no key can
 * name.  A directory that is there only because keys live under it, or
 * was made by hand, holds none and is no key; one that holds it is never
 * empty, so it is not pruned while the key is there. */
#include "s3/serve/serve_int.h"

#include "core/hex.h"
#include "core/io.h"
#include "s3/s3.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#define XATTR "user.rds3"
#define XATTR_MAX 4096

/* Held by every commit and delete of an object, and while emptied
 * directories are pruned: a conditional write's check and its rename see
 * no other writer of this server between them. */
static pthread_mutex_t store_lock = PTHREAD_MUTEX_INITIALIZER;

void sv_meta_release(struct sv_meta *m)
{
	free(m->headers);
	m->headers = NULL;
}

/* Whether name has the form of an IPv4 address (four dotted numbers). */
static bool is_ipv4(const char *name)
{
	unsigned a, b, c, d;
	char end;

	return sscanf(name, "%3u.%3u.%3u.%3u%c", &a, &b, &c, &d, &end) == 4;
}

static bool ends_with(const char *s, const char *tail)
{
	size_t n = strlen(s), t = strlen(tail);

	return n >= t && !strcmp(s + n - t, tail);
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
		/* No "..", ".-" or "-." (S3's rules for DNS names). */
		if (c == '.' && (name[i - 1] == '.' || name[i - 1] == '-' || name[i + 1] == '-'))
			return false;
	}
	return !is_ipv4(name) && strncmp(name, "xn--", 4) && strncmp(name, "sthree-", 7) &&
	       !ends_with(name, "-s3alias") && !ends_with(name, "--ol-s3");
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
		    !strcmp(part, SV_OWNER_NAME) || !strcmp(part, SV_FOLDER_NAME))
			return -EINVAL;
		if (!slash || !slash[1])
			return 0; /* a final '/': a folder marker */
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

/* The optional line after "parts": "cksum ALG TYPE BASE64\n" (a record
 * from before it has none).  Returns its length, 0 when it is not one. */
static int cksum_parse(const char *v, struct sv_meta *m)
{
	char alg[16], type[16], b64[64];
	int used = 0;

	if (sscanf(v, "cksum %15s %15s %63s%n", alg, type, b64, &used) != 3 || !used ||
	    v[used] != '\n')
		return 0;
	m->ck = s3_cksum_alg(alg);
	m->ck_composite = !strcmp(type, "COMPOSITE");
	if (m->ck == S3_CK_NONE || (!m->ck_composite && strcmp(type, "FULL_OBJECT")) ||
	    (m->ck_composite && !m->parts) || s3_cksum_unb64(b64, m->ck, m->ck_sum)) {
		m->ck = S3_CK_NONE;
		return 0;
	}
	return used + 1;
}

/* Parses the attribute: "rds3 1\netag E\nsize N\nmtime N\nparts N S\n",
 * maybe a "cksum" line (cksum_parse), "\n", then the header lines.
 * Anything else is no record. */
static bool meta_parse(char *v, struct sv_meta *m)
{
	unsigned long long size, part_size;
	long long mt;
	unsigned parts;
	char etag[40];
	int used = 0;

	if (sscanf(v, "rds3 1\netag %39s\nsize %llu\nmtime %lld\nparts %u %llu%n",
		   etag, &size, &mt, &parts, &part_size, &used) != 5 ||
	    !used || v[used] != '\n' || !etag_ok(etag) || parts > SV_PARTS_MAX)
		return false;
	m->parts = parts;
	if (v[used + 1] == 'c') {
		int n = cksum_parse(v + used + 1, m);

		if (!n)
			return false;
		used += n;
	}
	if (v[used + 1] != '\n')
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

/* Reads fd's record into m: 0, or -ENODATA when it has none (or none
 * that parses). */
static int meta_read(int fd, struct sv_meta *m)
{
	char v[XATTR_MAX + 1];
	ssize_t n;

	memset(m, 0, sizeof(*m));
	n = fgetxattr(fd, XATTR, v, XATTR_MAX);
	if (n <= 0)
		return -ENODATA;
	v[n] = '\0';
	if (strlen(v) == (size_t)n && meta_parse(v, m))
		return 0;
	sv_meta_release(m);
	memset(m, 0, sizeof(*m));
	return -ENODATA;
}

int sv_meta_get(int fd, struct sv_meta *m)
{
	unsigned char md5[16];
	struct stat st;
	int ret;

	if (fstat(fd, &st))
		return -errno;
	if (!meta_read(fd, m)) {
		if (m->size == (uint64_t)st.st_size && m->mtime_ns == mtime_ns(&st))
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

/* Records m on fd with that size and mtime. */
static int meta_write(int fd, const struct sv_meta *m, uint64_t size, int64_t mtime)
{
	char v[XATTR_MAX + 1], ck[128] = "";
	int n;

	if (m->ck != S3_CK_NONE) {
		char b64[48];

		s3_cksum_b64(m->ck_sum, s3_cksum_len(m->ck), b64);
		snprintf(ck, sizeof(ck), "cksum %s %s %s\n", s3_cksum_name(m->ck),
			 m->ck_composite ? "COMPOSITE" : "FULL_OBJECT", b64);
	}
	n = snprintf(v, sizeof(v), "rds3 1\netag %s\nsize %llu\nmtime %lld\nparts %u %llu\n%s\n%s",
		     m->etag, (unsigned long long)size, (long long)mtime, m->parts,
		     (unsigned long long)m->part_size, ck, m->headers ? m->headers : "");
	if (n < 0 || n >= (int)sizeof(v))
		return -E2BIG;
	if (fsetxattr(fd, XATTR, v, (size_t)n, 0))
		return errno == EOPNOTSUPP ? -ENOTSUP : -errno;
	return 0;
}

int sv_meta_set(int fd, const struct sv_meta *m)
{
	struct stat st;

	if (fstat(fd, &st))
		return -errno;
	return meta_write(fd, m, (uint64_t)st.st_size, mtime_ns(&st));
}

/* ---------------------------------------------------------------- parts */

#define PARTS_XATTR "user.rds3.parts"
#define PARTS_MAX_BYTES ((size_t)64 << 10) /* Linux's largest attribute */

/* "rds3 parts 1 ETAG ALG SIZES\n" then, per part, its size (8 bytes,
 * big-endian; when SIZES is 1) and its checksum (ALG's length; none
 * for "-"). */
static int parts_head(const struct sv_meta *m, char *out, size_t len)
{
	return snprintf(out, len, "rds3 parts 1 %s %s %d\n", m->etag,
			m->ck != S3_CK_NONE ? s3_cksum_name(m->ck) : "-", m->part_size ? 0 : 1);
}

static size_t parts_rec(const struct sv_meta *m)
{
	return (m->part_size ? 0 : 8) + s3_cksum_len(m->ck);
}

int sv_parts_set(int fd, const struct sv_meta *m, const struct sv_part_info *v)
{
	size_t rec = parts_rec(m), ck = s3_cksum_len(m->ck), len;
	char head[128];
	unsigned char *buf, *p;
	int hn, ret = 0;

	if (!m->parts || !rec)
		return 0; /* the sizes follow from part_size, no checksums */
	hn = parts_head(m, head, sizeof(head));
	len = (size_t)hn + rec * m->parts;
	if (len > PARTS_MAX_BYTES)
		return -E2BIG;
	if (!(buf = malloc(len)))
		return -ENOMEM;
	memcpy(buf, head, (size_t)hn);
	p = buf + hn;
	for (unsigned i = 0; i < m->parts; i++) {
		if (!m->part_size)
			for (int b = 0; b < 8; b++)
				*p++ = (unsigned char)(v[i].size >> (56 - 8 * b));
		memcpy(p, v[i].sum, ck);
		p += ck;
	}
	if (fsetxattr(fd, PARTS_XATTR, buf, len, 0))
		ret = errno == EOPNOTSUPP ? -ENOTSUP : -errno;
	free(buf);
	return ret;
}

int sv_parts_get(int fd, const struct sv_meta *m, struct sv_part_info **out)
{
	size_t rec = parts_rec(m), ck = s3_cksum_len(m->ck);
	struct sv_part_info *v;
	unsigned char *buf = NULL;
	const unsigned char *p;
	char head[128];
	ssize_t n = 0;
	int hn;

	uint64_t total = 0;

	*out = NULL;
	if (!m->parts || (m->part_size && (uint64_t)(m->parts - 1) * m->part_size > m->size))
		return -ENODATA;
	hn = parts_head(m, head, sizeof(head));
	if (rec) {
		size_t want = (size_t)hn + rec * m->parts;

		if (want > PARTS_MAX_BYTES || !(buf = malloc(want)))
			return want > PARTS_MAX_BYTES ? -ENODATA : -ENOMEM;
		n = fgetxattr(fd, PARTS_XATTR, buf, want);
		if (n != (ssize_t)want || memcmp(buf, head, (size_t)hn)) {
			free(buf);
			return -ENODATA;
		}
	}
	if (!(v = calloc(m->parts, sizeof(*v)))) {
		free(buf);
		return -ENOMEM;
	}
	p = buf ? buf + hn : NULL;
	for (unsigned i = 0; i < m->parts; i++) {
		if (m->part_size) {
			v[i].size = i + 1 < m->parts ? m->part_size
						     : m->size - (uint64_t)(m->parts - 1) * m->part_size;
		} else {
			for (int b = 0; b < 8; b++)
				v[i].size = v[i].size << 8 | *p++;
		}
		if (ck) {
			memcpy(v[i].sum, p, ck);
			p += ck;
		}
		total += v[i].size;
	}
	free(buf);
	if (total != m->size) { /* not this object's */
		free(v);
		return -ENODATA;
	}
	*out = v;
	return 0;
}

/* -------------------------------------------------------------- objects */

DIR *sv_opendir(int dir)
{
	int fd = openat(dir, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC), err;
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;

	if (!d && fd >= 0) {
		err = errno;
		close(fd);
		errno = err;
	}
	return d;
}

int sv_bucket_open(int root, const char *bucket)
{
	int fd = openat(root, bucket, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

	if (fd < 0)
		return errno == ENOTDIR || errno == ELOOP ? -ENOENT : -errno;
	return fd;
}

/* The name of key's file in its directory (rdx_dir_beneath's): its last
 * component, or SV_FOLDER_NAME for a key ending in '/'. */
static const char *last_part(const char *key)
{
	const char *s = strrchr(key, '/');

	if (s && !s[1])
		return SV_FOLDER_NAME;
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

int sv_key_open(int bfd, const char *key, struct sv_meta *m, time_t *mtime)
{
	struct stat st;
	int fd, ret;

	fd = sv_object_open(bfd, key);
	if (fd < 0)
		return fd;
	ret = fstat(fd, &st) ? -errno : sv_meta_get(fd, m);
	if (ret) {
		close(fd);
		return ret == -ENOENT ? -EIO : ret;
	}
	*mtime = st.st_mtim.tv_sec;
	return fd;
}

int sv_put_begin(int bfd, const char *key, struct sv_put *p)
{
	struct stat st;
	int ret = 0, tries;

	memset(p, 0, sizeof(*p));
	p->dir = p->fd = -1;
	p->name = last_part(key);
	p->bfd = bfd;
	p->key = key;
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
			/* Nor one holding the folder marker key/: key
			 * and key/ cannot both be. */
			while (empty && (de = readdir(dh)))
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

/* The temporary's name given only where nothing has one: a link, or a
 * rename that does not replace, fails when the name is taken, by this
 * server or another process.  An empty directory or anything but a
 * regular file there is no object (the key reads as absent): it goes,
 * as a plain commit would replace it.  -ECANCELED: an object is there. */
static int publish_new(struct sv_put *p)
{
	struct stat st;
	int ret = 0, tries;

	for (tries = 0; tries < 3; tries++) {
		if (!p->stage.name) {
			ret = rdx_link_anon(p->fd, p->dir, p->name);
		} else if (!renameat2(p->dir, p->stage.name, p->dir, p->name, RENAME_NOREPLACE)) {
			ret = 0;
		} else if (errno == EINVAL || errno == ENOSYS) { /* not on this file system */
			ret = linkat(p->dir, p->stage.name, p->dir, p->name, 0) ? -errno : 0;
			if (!ret)
				unlinkat(p->dir, p->stage.name, 0);
		} else {
			ret = -errno;
		}
		if (!ret && p->stage.name) {
			free(p->stage.name);
			p->stage.name = NULL;
		}
		if (ret != -EEXIST)
			return ret;
		if (fstatat(p->dir, p->name, &st, AT_SYMLINK_NOFOLLOW))
			continue; /* gone meanwhile */
		if (S_ISREG(st.st_mode))
			return -ECANCELED;
		/* Not empty (keys, or the folder marker key/, in it): stays. */
		if (unlinkat(p->dir, p->name, S_ISDIR(st.st_mode) ? AT_REMOVEDIR : 0) &&
		    errno != ENOENT)
			return errno == ENOTEMPTY ? -EEXIST : -errno;
	}
	return ret;
}

/* Removes the directory path, then each one above it, while they are
 * empty (a folder marker's holds its file), up to the bucket: S3 has no
 * directories, those keys made go when they empty.  store_lock held. */
static void prune(int bfd, char *path)
{
	char *slash;
	int dir, ret;

	for (;;) {
		if (rdx_dir_beneath(bfd, path, false, &dir) || dir < 0)
			return;
		ret = unlinkat(dir, last_part(path), AT_REMOVEDIR);
		close(dir);
		if (ret || !(slash = strrchr(path, '/')))
			return;
		*slash = '\0';
	}
}

/* An unnamed temporary is no entry of its directory, so a delete of the
 * last object there may have pruned the directory since sv_put_begin():
 * then it is made again where the key says.  store_lock held, as every
 * prune is.  Returns 0 or -errno. */
static int refind_dir(struct sv_put *p)
{
	struct stat st;
	int dir, ret;

	if (!p->key || p->stage.name || fstat(p->dir, &st) || st.st_nlink)
		return 0;
	ret = rdx_dir_beneath(p->bfd, p->key, true, &dir);
	if (ret)
		return ret;
	close(p->dir);
	p->dir = dir;
	return 0;
}

/* The temporary and descriptors of p, gone. */
static void put_close(struct sv_put *p)
{
	rdx_tmpfile_discard(&p->stage, p->dir); /* an unnamed one goes with its fd */
	if (p->fd >= 0)
		close(p->fd);
	if (p->dir >= 0)
		close(p->dir);
	p->fd = p->dir = -1;
}

int sv_put_commit(struct sv_put *p, mode_t mode)
{
	int ret = 0;

	if (fchmod(p->fd, mode))
		ret = -errno;
	pthread_mutex_lock(&store_lock);
	if (!ret)
		ret = refind_dir(p);
	if (!ret && p->check)
		ret = p->check(p->dir, p->name, p->check_arg);
	/* An empty directory of that name becomes the object; one with
	 * objects under it (the folder marker key/ among them) stays. */
	if (!ret && p->if_absent) {
		ret = publish_new(p);
	} else if (!ret) {
		ret = rdx_tmpfile_publish(&p->stage, p->dir, p->name, false);
		if (ret == -EISDIR)
			ret = rdx_tmpfile_publish(&p->stage, p->dir, p->name, true);
	}
	pthread_mutex_unlock(&store_lock);
	if (ret == -EISDIR || ret == -ENOTEMPTY)
		ret = -EEXIST;
	if (ret) {
		sv_put_abort(p);
	} else {
		put_close(p);
		p->key = NULL; /* an abort after this has nothing to prune */
	}
	return ret;
}

void sv_put_abort(struct sv_put *p)
{
	char path[SV_KEY_MAX + 1];
	char *slash;

	put_close(p);
	/* The directories this put made go again, as a delete's do: a
	 * failed upload leaves no folders behind that hold nothing. */
	if (p->key && strlen(p->key) <= SV_KEY_MAX && strrchr(p->key, '/')) {
		snprintf(path, sizeof(path), "%s", p->key);
		slash = strrchr(path, '/');
		*slash = '\0';
		pthread_mutex_lock(&store_lock);
		prune(p->bfd, path);
		pthread_mutex_unlock(&store_lock);
	}
	p->key = NULL;
}


int sv_object_delete(int bfd, const char *key,
		     int (*check)(int dir, const char *name, void *arg), void *arg)
{
	char path[SV_KEY_MAX + 1];
	int dir, ret;
	char *slash;

	if (strlen(key) > SV_KEY_MAX)
		return -ENAMETOOLONG;
	snprintf(path, sizeof(path), "%s", key);
	ret = rdx_dir_beneath(bfd, key, false, &dir);
	if (ret == -ELOOP || ret == -ENOTDIR || (!ret && dir < 0))
		return check ? -ENOENT : 0;
	if (ret)
		return ret;
	pthread_mutex_lock(&store_lock);
	ret = check ? check(dir, last_part(key), arg) : 0;
	if (!ret)
		ret = unlinkat(dir, last_part(key), 0) ? -errno : 0;
	close(dir);
	if (!check && (ret == -ENOENT || ret == -EISDIR || ret == -ENOTDIR))
		ret = 0;
	if (!ret && (slash = strrchr(path, '/'))) {
		*slash = '\0';
		prune(bfd, path);
	}
	pthread_mutex_unlock(&store_lock);
	return ret;
}
