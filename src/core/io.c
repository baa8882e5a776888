#include "core/io.h"
#include "core/xxh.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/magic.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/random.h>
#include <sys/vfs.h>
#include <unistd.h>

/* Waits until fd is ready for events or *stop is set. */
static int wait_ready(int fd, short events, const atomic_int *stop)
{
	struct pollfd p = { .fd = fd, .events = events };

	for (;;) {
		int n;

		if (atomic_load(stop))
			return -ECANCELED;
		n = poll(&p, 1, 200);
		if (n > 0)
			return 0;
		if (n < 0 && errno != EINTR)
			return -errno;
	}
}

/* The loop behind rdx_read_full and rdx_write_full, as OpenSSH's atomicio:
 * one place that knows about EINTR, EAGAIN and short counts. */
static ssize_t full_io(int fd, char *p, size_t len, const atomic_int *stop,
		       bool writing)
{
	size_t done = 0;

	while (done < len) {
		ssize_t n;

		if (stop) {
			int ret = wait_ready(fd, writing ? POLLOUT : POLLIN, stop);

			if (ret)
				return ret;
		}
		n = writing ? write(fd, p + done, len - done)
			    : read(fd, p + done, len - done);
		if (n == 0) {
			if (writing)
				return -EIO; /* no progress: never spin */
			break;
		}
		if (n < 0) {
			if (errno == EINTR || (stop && errno == EAGAIN))
				continue;
			return -errno;
		}
		done += (size_t)n;
	}
	return (ssize_t)done;
}

ssize_t rdx_read_full(int fd, void *buf, size_t len, const atomic_int *stop)
{
	return full_io(fd, buf, len, stop, false);
}

ssize_t rdx_write_full(int fd, const void *buf, size_t len,
		       const atomic_int *stop)
{
	return full_io(fd, (char *)buf, len, stop, true);
}

ssize_t rdx_writev_full(int fd, struct iovec *v, unsigned n)
{
	size_t done = 0;

	for (;;) {
		ssize_t w;

		for (; n && !v->iov_len; v++, n--)
			; /* nothing to write: not a reason to fail with -EIO */
		if (!n)
			break;
		w = writev(fd, v, n > IOV_MAX ? IOV_MAX : (int)n);

		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (w == 0)
			return -EIO; /* no progress: never spin */
		done += (size_t)w;
		for (; n && (size_t)w >= v->iov_len; v++, n--)
			w -= (ssize_t)v->iov_len;
		if (n) { /* a short write ended inside *v */
			v->iov_base = (char *)v->iov_base + w;
			v->iov_len -= (size_t)w;
		}
	}
	return (ssize_t)done;
}

ssize_t rdx_pread_full(int fd, void *buf, size_t len, off_t off)
{
	char *p = buf;
	size_t done = 0;

	while (done < len) {
		ssize_t n = pread(fd, p + done, len - done, off + (off_t)done);

		if (n == 0)
			break;
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		done += (size_t)n;
	}
	return (ssize_t)done;
}

ssize_t rdx_pwrite_full(int fd, const void *buf, size_t len, off_t off)
{
	const char *p = buf;
	size_t done = 0;

	while (done < len) {
		ssize_t n = pwrite(fd, p + done, len - done, off + (off_t)done);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			return -EIO;
		done += (size_t)n;
	}
	return (ssize_t)done;
}

int rdx_prealloc(int fd, uint64_t off, uint64_t len)
{
	struct statfs f;

	if (!len)
		return 0;
	/* tmpfs has no blocks to reserve: fallocate would allocate and zero
	 * every page now, a whole pass over memory before the first byte,
	 * that the data then writes over.  Its room is checked instead (a
	 * size-less mount reports none, and has no limit but memory's). */
	if (fstatfs(fd, &f) == 0 && f.f_type == TMPFS_MAGIC) {
		if (f.f_blocks && f.f_bsize &&
		    (len + (uint64_t)f.f_bsize - 1) / (uint64_t)f.f_bsize > (uint64_t)f.f_bavail)
			return -ENOSPC;
		return 0;
	}
	if (fallocate(fd, 0, (off_t)off, (off_t)len) == 0)
		return 0;
	/* Not every file system can (NFS before 4.2, FUSE, ...): fine. */
	return errno == EOPNOTSUPP || errno == EINVAL || errno == ENOSYS ? 0 : -errno;
}

static bool proc_real;
static pthread_once_t proc_once = PTHREAD_ONCE_INIT;

static void proc_check(void)
{
	struct statfs f;

	proc_real = !statfs("/proc/self/fd", &f) && f.f_type == PROC_SUPER_MAGIC;
}

bool rdx_proc_ok(void)
{
	pthread_once(&proc_once, proc_check);
	return proc_real;
}

int rdx_reopen(int fd, int flags)
{
	char proc[40];
	int nfd;

	struct stat a, b;

	if (!rdx_proc_ok())
		return -ENOENT;
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	nfd = open(proc, flags | O_CLOEXEC);
	if (nfd < 0)
		return -errno;
	/* Where /proc is not procfs (a chroot's own, a mount over it) the
	 * name may lead elsewhere. */
	if (fstat(fd, &a) || fstat(nfd, &b) || a.st_dev != b.st_dev || a.st_ino != b.st_ino) {
		close(nfd);
		return -ESTALE;
	}
	return nfd;
}

char *rdx_temp_name(const char *base)
{
	static atomic_uint calls;
	unsigned rnd = 0;
	char *out;

	if (getrandom(&rnd, sizeof(rnd), 0) != sizeof(rnd)) /* a new one each call */
		rnd = (unsigned)getpid() * 2654435761u + atomic_fetch_add(&calls, 1);
	if (asprintf(&out, ".%.200s.rdx-%08x", base, rnd) < 0)
		return NULL;
	return out;
}

/* Gives an O_TMPFILE file a name in dir.  Returns 0 or -errno. */
int rdx_link_anon(int fd, int dir, const char *name)
{
	char proc[40];

	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	if (rdx_proc_ok()) {
		if (!linkat(AT_FDCWD, proc, dir, name, AT_SYMLINK_FOLLOW))
			return 0;
		if (errno != ENOENT) /* no /proc: try without */
			return -errno;
	}
	return linkat(fd, "", dir, name, AT_EMPTY_PATH) ? -errno : 0;
}

int rdx_tmpfile_open(struct rdx_tmpfile *t, int dir, const char *base, int flags)
{
	int fd;

	t->name = NULL;
	/* Unnamed only where it can be linked later without privilege:
	 * the data is written before that is known to work. */
	if (rdx_proc_ok()) {
		fd = openat(dir, ".", O_TMPFILE | flags | O_CLOEXEC, 0600);
		if (fd >= 0) {
			t->fd = fd;
			return 0;
		}
		if (errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL)
			return -errno;
	}
	fd = rdx_temp_create(dir, base, flags, &t->name);
	if (fd < 0)
		return fd;
	t->fd = fd;
	return 0;
}

int rdx_rename_over(int dir, const char *from, const char *to, bool over_empty_dir)
{
	int err;

	if (!renameat(dir, from, dir, to))
		return 0;
	err = errno;
	/* An empty directory in the way goes, as with tar. */
	if (!over_empty_dir || (err != EISDIR && err != ENOTEMPTY && err != EEXIST) ||
	    unlinkat(dir, to, AT_REMOVEDIR))
		return -err;
	return renameat(dir, from, dir, to) ? -errno : 0;
}

int rdx_tmpfile_publish(struct rdx_tmpfile *t, int dir, const char *final, bool over_empty_dir)
{
	char *tmp;
	int err;

	if (t->name) {
		err = rdx_rename_over(dir, t->name, final, over_empty_dir);
		if (err)
			return err;
		free(t->name);
		t->name = NULL;
		return 0;
	}
	err = rdx_link_anon(t->fd, dir, final);
	if (err != -EEXIST)
		return err;
	/* A name that is taken is replaced, atomically: linked under a
	 * temporary name first, then renamed over it. */
	tmp = rdx_temp_name(final);
	if (!tmp)
		return -ENOMEM;
	err = rdx_link_anon(t->fd, dir, tmp);
	if (!err && (err = rdx_rename_over(dir, tmp, final, over_empty_dir)))
		unlinkat(dir, tmp, 0);
	free(tmp);
	return err;
}

void rdx_tmpfile_discard(struct rdx_tmpfile *t, int dir)
{
	if (t->name) {
		unlinkat(dir, t->name, 0);
		free(t->name);
		t->name = NULL;
	}
}

char *rdx_part_name(const char *base)
{
	size_t n = strlen(base);
	char *out;

	if (n > 200 ? asprintf(&out, ".%.200s~%016llx.rdx-part", base,
			       (unsigned long long)XXH3_64bits(base, n)) < 0
		    : asprintf(&out, ".%s.rdx-part", base) < 0)
		return NULL;
	return out;
}

int rdx_temp_create(int dir, const char *base, int flags, char **tmp)
{
	for (int tries = 0; tries < 100; tries++) {
		char *name = rdx_temp_name(base);
		int fd, err;

		if (!name)
			return -ENOMEM;
		fd = openat(dir, name, flags | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (fd >= 0) {
			*tmp = name;
			return fd;
		}
		err = errno;
		free(name);
		if (err != EEXIST)
			return -err;
	}
	return -EEXIST;
}

int rdx_dir_beneath(int root, const char *rel, bool make, int *fd)
{
	const char *comp = rel, *slash;
	char part[NAME_MAX + 1];
	struct stat st;
	int dir, next, err = 0;

	*fd = -1;
	dir = fcntl(root, F_DUPFD_CLOEXEC, 0);
	if (dir < 0)
		return -errno;
	for (; (slash = strchr(comp, '/')); comp = slash + 1) {
		size_t len = (size_t)(slash - comp);

		if (len > NAME_MAX) {
			err = -ENAMETOOLONG;
			break;
		}
		memcpy(part, comp, len);
		part[len] = '\0';
		next = openat(dir, part, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (next < 0 && errno == ENOENT && make) {
			/* A directory the stream did not send first, as tar
			 * makes it: the umask decides its mode. */
			if (mkdirat(dir, part, 0777) && errno != EEXIST) {
				err = -errno;
				break;
			}
			next = openat(dir, part, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		}
		if (next < 0) {
			/* Absent, unless we were to make it: then it went as
			 * soon as it came (someone else removed it). */
			err = errno == ENOENT && !make ? 0 : -errno;
			if (err == -ENOTDIR && !fstatat(dir, part, &st, AT_SYMLINK_NOFOLLOW) &&
			    S_ISLNK(st.st_mode))
				err = -ELOOP;
			break;
		}
		close(dir);
		dir = next;
	}
	if (slash) {
		close(dir);
		return err;
	}
	*fd = dir;
	return 0;
}
