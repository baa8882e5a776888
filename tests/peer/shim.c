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
 *   RDX_SHIM_LOG=FILE       each refusal appends a line to FILE (so a test
 *                           can tell the shim was in the way)
 *   RDX_SHIM_EIO_FROM=BYTES a pwrite() that reaches past BYTES fails with
 *                           EIO, as a failing disk would
 *   RDX_SHIM_SWAP=PATH      the first open() of PATH (absolute, as the tree
 *   RDX_SHIM_SWAP_FROM=FROM sender opens a walked file to read it) first
 *                           renames FROM over PATH: the file was replaced
 *                           after the walk saw it
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

typedef int (*open_fn)(const char *, int, ...);
typedef ssize_t (*pwrite_fn)(int, const void *, size_t, off_t);
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
	return real(path, flags, mode);
}

static int shim_openat(const char *name, int dir, const char *path, int flags, mode_t mode)
{
	openat_fn real = (openat_fn)dlsym(RTLD_NEXT, name);

	if ((flags & O_TMPFILE) == O_TMPFILE && getenv("RDX_SHIM_NO_TMPFILE"))
		return refuse("O_TMPFILE", EOPNOTSUPP);
	if ((flags & O_DIRECT) && getenv("RDX_SHIM_NO_DIRECT"))
		return refuse("O_DIRECT", EINVAL);
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
