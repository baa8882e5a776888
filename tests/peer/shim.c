/* tests/peer/shim.c -- an LD_PRELOAD fault injector for the tests:
 * what a file system or a concurrent writer would do, on cue.
 *
 *   RDX_SHIM_NO_TMPFILE=1   openat(..., O_TMPFILE) fails with EOPNOTSUPP,
 *                           as on a file system without it (NFS, most
 *                           FUSE file systems)
 *   RDX_SHIM_NO_DIRECT=1    open() or openat() with O_DIRECT fails with
 *                           EINVAL, as on a file system without it (FUSE
 *                           without direct_io, tmpfs before Linux 6.6)
 *   RDX_SHIM_DIRECT_EINVAL=1 pwrite() on a descriptor opened with O_DIRECT
 *                           fails with EINVAL, as on a file system that
 *                           takes the flag at open and refuses it at write
 *   RDX_SHIM_DIRECT_DEPTH=FILE each pwrite() on an O_DIRECT descriptor
 *                           takes 20 ms longer, as a slow disk's would;
 *                           the most of them ever in flight at once goes
 *                           to FILE ("N\n") as the process exits
 *   RDX_SHIM_LOG=FILE       each refusal appends a line to FILE (so a test
 *                           can tell the shim was in the way)
 *   RDX_SHIM_EIO_FROM=BYTES a pwrite() that reaches past BYTES fails with
 *                           EIO, as a failing disk would
 *   RDX_SHIM_READ_EIO_FROM=BYTES a pread() that reaches past BYTES fails
 *                           with EIO, as a failing disk would
 *   RDX_SHIM_SWAP=PATH      the first open() of PATH (absolute, as the tree
 *   RDX_SHIM_SWAP_FROM=FROM sender opens a walked file to read it) first
 *                           renames FROM over PATH: the file was replaced
 *                           after the walk saw it
 *   RDX_SHIM_RACE=NAME      the first call that makes an entry whose last
 *   RDX_SHIM_RACE_DIR=DIR   component contains NAME (mkdir, symlink, link,
 *   RDX_SHIM_RACE_TO=OUT    mkfifo, mknod, mkostemp, open with O_CREAT, or their *at
 *                           forms) first renames DIR to DIR.moved and puts
 *                           a symlink to OUT in its place: a local user
 *                           racing the receiver's checks
 *   RDX_SHIM_RMDIR=NAME     every mkdirat() of NAME is undone at once: a
 *                           local user removing a directory as it comes
 *   RDX_SHIM_LINK_OVER=NAME the first symlinkat() or mknodat() of a name
 *   RDX_SHIM_LINK_FROM=FILE containing NAME is followed by a hard link to
 *                           FILE renamed over what it made
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef int (*open_fn)(const char *, int, ...);
typedef ssize_t (*pwrite_fn)(int, const void *, size_t, off_t);
typedef ssize_t (*pread_fn)(int, void *, size_t, off_t);
typedef int (*openat_fn)(int, const char *, int, ...);

static bool takes_mode(int flags)
{
	return (flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE;
}

static void maybe_swap(const char *path)
{
	static atomic_bool done;
	const char *swap = getenv("RDX_SHIM_SWAP"), *from = getenv("RDX_SHIM_SWAP_FROM");

	if (swap && from && strcmp(path, swap) == 0 && !atomic_exchange(&done, true) &&
	    rename(from, swap))
		perror("shim: rename");
}

/* RDX_SHIM_RACE: called with the name an entry is about to be made
 * under. */
static void maybe_race(const char *path)
{
	static atomic_bool done;
	const char *name = getenv("RDX_SHIM_RACE"), *dir = getenv("RDX_SHIM_RACE_DIR");
	const char *out = getenv("RDX_SHIM_RACE_TO"), *base = strrchr(path, '/');
	char moved[4096];

	base = base ? base + 1 : path;
	if (!name || !dir || !out || !strstr(base, name) || atomic_exchange(&done, true))
		return;
	snprintf(moved, sizeof(moved), "%s.moved", dir);
	if (rename(dir, moved) || symlink(out, dir))
		perror("shim: race");
}

/* Logs a refusal (RDX_SHIM_LOG) and fails with err. */
static int refuse(const char *what, int err)
{
	const char *log = getenv("RDX_SHIM_LOG");
	FILE *f = log ? fopen(log, "a") : NULL;

	if (f) {
		fprintf(f, "%s refused\n", what);
		fclose(f);
	}
	errno = err;
	return -1;
}

static int shim_open(const char *name, const char *path, int flags, mode_t mode)
{
	open_fn real = (open_fn)dlsym(RTLD_NEXT, name);

	if ((flags & O_DIRECT) && getenv("RDX_SHIM_NO_DIRECT"))
		return refuse("O_DIRECT", EINVAL);
	maybe_swap(path);
	if (flags & O_CREAT)
		maybe_race(path);
	return real(path, flags, mode);
}

static int shim_openat(const char *name, int dir, const char *path, int flags, mode_t mode)
{
	openat_fn real = (openat_fn)dlsym(RTLD_NEXT, name);

	if ((flags & O_TMPFILE) == O_TMPFILE && getenv("RDX_SHIM_NO_TMPFILE"))
		return refuse("O_TMPFILE", EOPNOTSUPP);
	if ((flags & O_DIRECT) && getenv("RDX_SHIM_NO_DIRECT"))
		return refuse("O_DIRECT", EINVAL);
	if (flags & O_CREAT)
		maybe_race(path);
	return real(dir, path, flags, mode);
}

#define MODE(flags)                                                    \
	mode_t mode = 0;                                               \
	if (takes_mode(flags)) {                                       \
		va_list ap;                                            \
		va_start(ap, flags);                                   \
		mode = va_arg(ap, mode_t);                             \
		va_end(ap);                                            \
	}

int open(const char *path, int flags, ...)
{
	MODE(flags)
	return shim_open("open", path, flags, mode);
}

int open64(const char *path, int flags, ...)
{
	MODE(flags)
	return shim_open("open64", path, flags, mode);
}

int openat(int dir, const char *path, int flags, ...)
{
	MODE(flags)
	return shim_openat("openat", dir, path, flags, mode);
}

int openat64(int dir, const char *path, int flags, ...)
{
	MODE(flags)
	return shim_openat("openat64", dir, path, flags, mode);
}

static atomic_int direct_inflight, direct_most;

__attribute__((destructor)) static void direct_depth_report(void)
{
	const char *path = getenv("RDX_SHIM_DIRECT_DEPTH");
	FILE *f = path ? fopen(path, "we") : NULL;

	if (f) {
		fprintf(f, "%d\n", atomic_load(&direct_most));
		fclose(f);
	}
}

static ssize_t direct_slowly(pwrite_fn real, int fd, const void *buf, size_t len, off_t off)
{
	int now = atomic_fetch_add(&direct_inflight, 1) + 1, most = atomic_load(&direct_most);
	ssize_t n;

	while (now > most && !atomic_compare_exchange_weak(&direct_most, &most, now))
		;
	usleep(20000);
	n = real(fd, buf, len, off);
	atomic_fetch_sub(&direct_inflight, 1);
	return n;
}

static ssize_t shim_pwrite(const char *name, int fd, const void *buf, size_t len, off_t off)
{
	pwrite_fn real = (pwrite_fn)dlsym(RTLD_NEXT, name);
	const char *from = getenv("RDX_SHIM_EIO_FROM");

	if (from && off + (off_t)len > (off_t)strtoll(from, NULL, 10)) {
		errno = EIO;
		return -1;
	}
	if (getenv("RDX_SHIM_DIRECT_EINVAL") && (fcntl(fd, F_GETFL) & O_DIRECT))
		return refuse("O_DIRECT write", EINVAL);
	if (getenv("RDX_SHIM_DIRECT_DEPTH") && (fcntl(fd, F_GETFL) & O_DIRECT))
		return direct_slowly(real, fd, buf, len, off);
	return real(fd, buf, len, off);
}

ssize_t pwrite(int fd, const void *buf, size_t len, off_t off)
{
	return shim_pwrite("pwrite", fd, buf, len, off);
}

ssize_t pwrite64(int fd, const void *buf, size_t len, off_t off)
{
	return shim_pwrite("pwrite64", fd, buf, len, off);
}

static ssize_t shim_pread(const char *name, int fd, void *buf, size_t len, off_t off)
{
	pread_fn real = (pread_fn)dlsym(RTLD_NEXT, name);
	const char *from = getenv("RDX_SHIM_READ_EIO_FROM");

	if (from && off + (off_t)len > (off_t)strtoll(from, NULL, 10)) {
		errno = EIO;
		return -1;
	}
	return real(fd, buf, len, off);
}

ssize_t pread(int fd, void *buf, size_t len, off_t off)
{
	return shim_pread("pread", fd, buf, len, off);
}

ssize_t pread64(int fd, void *buf, size_t len, off_t off)
{
	return shim_pread("pread64", fd, buf, len, off);
}

/* The calls that make entries, for RDX_SHIM_RACE. */
#define REAL(name, type) ((type)dlsym(RTLD_NEXT, name))

int mkdir(const char *path, mode_t mode)
{
	maybe_race(path);
	return REAL("mkdir", int (*)(const char *, mode_t))(path, mode);
}

int mkdirat(int dir, const char *path, mode_t mode)
{
	const char *gone = getenv("RDX_SHIM_RMDIR");
	int ret;

	maybe_race(path);
	ret = REAL("mkdirat", int (*)(int, const char *, mode_t))(dir, path, mode);
	if (!ret && gone && !strcmp(path, gone))
		unlinkat(dir, path, AT_REMOVEDIR);
	return ret;
}

/* RDX_SHIM_LINK_OVER: what was just made as path in dir is replaced by a
 * hard link to another file. */
static void maybe_link_over(int dir, const char *path)
{
	static atomic_bool done;
	const char *name = getenv("RDX_SHIM_LINK_OVER"), *from = getenv("RDX_SHIM_LINK_FROM");

	if (!name || !from || !strstr(path, name) || atomic_exchange(&done, true))
		return;
	unlinkat(dir, ".shim-link", 0);
	if (linkat(AT_FDCWD, from, dir, ".shim-link", 0) ||
	    renameat(dir, ".shim-link", dir, path))
		perror("shim: link over");
}

int symlink(const char *target, const char *path)
{
	maybe_race(path);
	return REAL("symlink", int (*)(const char *, const char *))(target, path);
}

int symlinkat(const char *target, int dir, const char *path)
{
	int ret;

	maybe_race(path);
	ret = REAL("symlinkat", int (*)(const char *, int, const char *))(target, dir, path);
	if (!ret)
		maybe_link_over(dir, path);
	return ret;
}

int link(const char *from, const char *path)
{
	maybe_race(path);
	return REAL("link", int (*)(const char *, const char *))(from, path);
}

int linkat(int fdir, const char *from, int dir, const char *path, int flags)
{
	maybe_race(path);
	return REAL("linkat", int (*)(int, const char *, int, const char *, int))(fdir, from, dir,
										   path, flags);
}

int mkostemp(char *template, int flags)
{
	maybe_race(template);
	return REAL("mkostemp", int (*)(char *, int))(template, flags);
}

int mkfifo(const char *path, mode_t mode)
{
	maybe_race(path);
	return REAL("mkfifo", int (*)(const char *, mode_t))(path, mode);
}

int mknodat(int dir, const char *path, mode_t mode, dev_t dev)
{
	int ret;

	maybe_race(path);
	ret = REAL("mknodat", int (*)(int, const char *, mode_t, dev_t))(dir, path, mode, dev);
	if (!ret)
		maybe_link_over(dir, path);
	return ret;
}
