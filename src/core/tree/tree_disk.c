/* Making a received tree's entries on disk without following a name twice.
 *
 * Every entry is made relative to a descriptor of its directory, opened
 * from the destination's root one component at a time with O_NOFOLLOW
 * (rdx_dir_beneath), and every call after that is an *at() call on that
 * descriptor that does not follow a symlink either.  A local user who can
 * write inside the destination while a tree arrives can rename or replace
 * what is there, but cannot make us write outside it: the directory we
 * checked is the one we write into, and the final step is always a rename
 * within it (tree_place), which replaces a symlink rather than follow it. */
#include "core/tree/tree_int.h"

#include "core/io.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int tree_place(int dir, const char *tmp, const char *base)
{
	int ret = rdx_rename_over(dir, tmp, base, true);

	if (ret)
		unlinkat(dir, tmp, 0);
	return ret;
}

int tree_make_dir(int dir, const char *base)
{
	struct stat st;

	/* Owner-only until its contents are in (tree_set_dir_meta). */
	if (!mkdirat(dir, base, 0700))
		return 0;
	if (errno != EEXIST)
		return -errno;
	if (fstatat(dir, base, &st, AT_SYMLINK_NOFOLLOW))
		return -errno;
	if (S_ISDIR(st.st_mode))
		return 0;
	if (S_ISLNK(st.st_mode))
		return -ELOOP; /* never made, never followed */
	/* A file where the sender has a directory, as tar and rsync do. */
	if (unlinkat(dir, base, 0) || mkdirat(dir, base, 0700))
		return -errno;
	return 0;
}

/* Makes a fresh name beside base with make(dir, tmp, arg), trying another
 * one when it is taken.  Returns 0 with *tmp (malloc'ed), or -errno. */
static int make_temp(int dir, const char *base, int (*make)(int, const char *, const void *),
		     const void *arg, char **tmp)
{
	for (int tries = 0, err; tries < 100; tries++) {
		char *name = rdx_temp_name(base);

		if (!name)
			return -ENOMEM;
		if (!make(dir, name, arg)) {
			*tmp = name;
			return 0;
		}
		err = errno;
		free(name);
		if (err != EEXIST)
			return -err;
	}
	return -EEXIST;
}

static int make_symlink(int dir, const char *name, const void *target)
{
	return symlinkat(target, dir, name);
}

/* Whether fd is what we just made under a temporary name: of type type
 * and with no other name (not a link to a file elsewhere, renamed over
 * ours by someone who can write dir). */
static bool ours(int fd, mode_t type)
{
	struct stat st;

	return !fstat(fd, &st) && (st.st_mode & S_IFMT) == type && st.st_nlink == 1;
}

/* The end of making tmp beside base: fd (the entry, or -1) closed, then
 * tmp renamed over base unless err (then removed).  Takes tmp.  Returns
 * err or tree_place's result. */
static int place_made(int dir, char *tmp, const char *base, int fd, int err)
{
	if (fd >= 0)
		close(fd);
	if (err)
		unlinkat(dir, tmp, 0);
	else
		err = tree_place(dir, tmp, base);
	free(tmp);
	return err;
}

int tree_make_symlink(int dir, const char *base, const char *target,
		      const struct tree_meta *m, bool own)
{
	char *tmp = NULL;
	int fd, err = make_temp(dir, base, make_symlink, target, &tmp);

	if (err)
		return err;
	/* The link itself through a descriptor of it: nothing swapped in
	 * under its name can be changed instead. */
	fd = openat(dir, tmp, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		err = -errno;
	else if (!ours(fd, S_IFLNK))
		err = -EEXIST;
	else if (own && fchownat(fd, "", m->uid, m->gid, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW))
		err = -errno;
	else if (utimensat(fd, "", m->times, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) &&
		 errno != EINVAL && errno != ENOENT)
		err = -errno; /* before Linux 5.8 no AT_EMPTY_PATH: no times */
	return place_made(dir, tmp, base, fd, err);
}

static int make_fifo(int dir, const char *name, const void *arg)
{
	(void)arg;
	return mknodat(dir, name, S_IFIFO | 0600, 0);
}

/* m's mode for fd: without a root owner's set-id bits unless the owner
 * or group they stand for is already fd's (as tar does). */
static int meta_mode(int fd, const struct tree_meta *m, bool own, mode_t *mode)
{
	struct stat st;

	*mode = m->mode;
	if (own || !(m->mode & (S_ISUID | S_ISGID)))
		return 0;
	if (fstat(fd, &st))
		return -errno;
	if (st.st_uid != m->uid)
		*mode &= ~(mode_t)S_ISUID;
	if (st.st_gid != m->gid)
		*mode &= ~(mode_t)S_ISGID;
	return 0;
}

int tree_set_meta(int fd, const struct tree_meta *m, bool own)
{
	struct stat st;
	bool known = !fstat(fd, &st);
	mode_t mode;
	int err;

	/* What the file has already is not set again: each change is a
	 * write to its inode (on ext4 a journal handle), where the stat
	 * only reads it.  A chown can clear set-id bits: the mode is set
	 * after one whatever it was. */
	if (own && !(known && st.st_uid == m->uid && st.st_gid == m->gid)) {
		if (fchown(fd, m->uid, m->gid))
			return -errno;
		known = false;
	}
	if ((err = meta_mode(fd, m, own, &mode)))
		return err;
	if (!(known && (st.st_mode & 07777) == mode) && fchmod(fd, mode))
		return -errno;
	if (futimens(fd, m->times))
		return -errno;
	return 0;
}

/* tree_set_meta for an O_PATH descriptor (a directory we may not read):
 * the mode and times through its /proc name, which is the inode itself. */
static int set_meta_path(int fd, const struct tree_meta *m, bool own)
{
	char proc[40];
	mode_t mode;
	int err;

	if (!rdx_proc_ok())
		return -ENOTSUP; /* no /proc name to reach it by */
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	if (own && fchownat(fd, "", m->uid, m->gid, AT_EMPTY_PATH))
		return -errno;
	if ((err = meta_mode(fd, m, own, &mode)))
		return err;
	if (chmod(proc, mode) || utimensat(AT_FDCWD, proc, m->times, 0))
		return -errno;
	return 0;
}

int tree_make_fifo(int dir, const char *base, const struct tree_meta *m, bool own)
{
	char *tmp = NULL;
	int fd, err = make_temp(dir, base, make_fifo, NULL, &tmp);

	if (err)
		return err;
	/* Opening a fifo to read does not wait for a writer with O_NONBLOCK,
	 * and the descriptor is the fifo made above or nothing. */
	fd = openat(dir, tmp, O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		err = -errno;
	else if (!ours(fd, S_IFIFO))
		err = -EEXIST;
	else
		err = tree_set_meta(fd, m, own);
	return place_made(dir, tmp, base, fd, err);
}

struct link_from {
	int dir;
	const char *base;
};

static int make_link(int dir, const char *name, const void *arg)
{
	const struct link_from *from = arg;

	return linkat(from->dir, from->base, dir, name, 0);
}

int tree_make_link(int tdir, const char *tbase, int dir, const char *base)
{
	struct link_from from = { tdir, tbase };
	char *tmp = NULL;
	int err = make_temp(dir, base, make_link, &from, &tmp);

	if (err)
		return err;
	err = tree_place(dir, tmp, base);
	/* base was this file already: rename(2) then leaves both names. */
	if (!err)
		unlinkat(dir, tmp, 0);
	free(tmp);
	return err;
}

int tree_set_dir_meta(int root, const char *rel, const struct tree_meta *m, bool own)
{
	const char *slash = strrchr(rel, '/');
	int parent, fd, err;

	err = rdx_dir_beneath(root, rel, false, &parent);
	if (err)
		return err;
	if (parent < 0)
		return -ENOENT;
	fd = openat(parent, slash ? slash + 1 : rel,
		    O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd >= 0) {
		err = tree_set_meta(fd, m, own);
	} else if (errno == EACCES) { /* ours, but not readable: -wx */
		fd = openat(parent, slash ? slash + 1 : rel,
			    O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		err = fd < 0 ? -errno : set_meta_path(fd, m, own);
	} else {
		err = -errno;
	}
	if (fd >= 0)
		close(fd);
	close(parent);
	return err;
}
