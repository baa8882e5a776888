/* The one full-length read/write loop for files and pipes. */
#ifndef RDX_IO_H
#define RDX_IO_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

/* Reads until len bytes arrived or EOF, retrying on EINTR and short counts.
 * With stop non-NULL the wait is sliced by poll(2) so that a set *stop ends
 * it with -ECANCELED.  Returns the bytes read (less than len only at EOF) or
 * -errno. */
ssize_t rdx_read_full(int fd, void *buf, size_t len, const atomic_int *stop);

/* Writes all len bytes, same conventions as rdx_read_full(); returns len or
 * -errno. */
ssize_t rdx_write_full(int fd, const void *buf, size_t len,
		       const atomic_int *stop);

/* Writes the n pieces v whole (v is used up on the way), retrying on
 * EINTR and short counts; returns the bytes or -errno. */
ssize_t rdx_writev_full(int fd, struct iovec *v, unsigned n);

/* pread(2) until len bytes or EOF; returns bytes read or -errno. */
ssize_t rdx_pread_full(int fd, void *buf, size_t len, off_t off);

/* pwrite(2) all len bytes; returns len or -errno. */
ssize_t rdx_pwrite_full(int fd, const void *buf, size_t len, off_t off);

/* The block size O_DIRECT buffers, offsets and lengths are aligned to. */
#define RDX_DIO_ALIGN 4096u

/* Reserves len bytes of fd from off (fallocate(2), which also sets the
 * size), so that parallel writes fill it in place and a full disk shows
 * now; on tmpfs only its free room is checked (no size set), and file
 * systems without fallocate are left alone.  Returns 0 or -errno. */
int rdx_prealloc(int fd, uint64_t off, uint64_t len);

/* Opens the directory rel is in (everything before its last component)
 * from the directory root, one component at a time, never following a
 * symlink: what is checked is what is used, and no name swapped later for
 * a symlink can send what follows elsewhere.  Missing components are made
 * when make is set (mode 0777 less the umask), else *fd is -1 with 0
 * returned.  Returns 0 and *fd (O_PATH), or -errno: -ELOOP for a symlink
 * on the way, -ENOTDIR for anything else that is not a directory. */
int rdx_dir_beneath(int root, const char *rel, bool make, int *fd);

/* Whether /proc/self/fd is procfs's: not a chroot's directory or a mount
 * over /proc, where /proc/self/fd/N could name another file.  Every use
 * of those names asks first, and does without them where the answer is
 * no, as where there is no /proc. */
bool rdx_proc_ok(void);

/* The file fd is open on, opened again with flags (O_DIRECT, say)
 * through /proc/self/fd: the same inode, never a name someone could have
 * swapped since.  Returns the new descriptor or -errno: -ENOENT without
 * /proc, -ESTALE when what /proc gave is another file (a /proc that is
 * not procfs). */
int rdx_reopen(int fd, int flags);

/* A fresh name beside base in the same directory, ".BASE.rdx-XXXXXXXX"
 * (BASE cut at 200 bytes, so that it fits NAME_MAX), malloc'ed; NULL when
 * out of memory.  Creating it is the caller's (O_EXCL, symlinkat, ...). */
char *rdx_temp_name(const char *base);

/* The name of a --resume partial beside base: ".BASE.rdx-part", with a
 * BASE longer than 200 bytes cut there and told apart by a hash of the
 * whole name, so that the name and its ".meta" record fit NAME_MAX.
 * malloc'ed; NULL when out of memory. */
char *rdx_part_name(const char *base);

/* Creates a temporary beside base in dir (openat(2) with O_CREAT | O_EXCL
 * | O_NOFOLLOW, mode 0600, plus flags), trying another name when one is
 * taken.  Returns the descriptor with *tmp its name (malloc'ed), or
 * -errno. */
int rdx_temp_create(int dir, const char *base, int flags, char **tmp);

/* Gives an unnamed (O_TMPFILE) file fd the name name in dir, through
 * /proc (or AT_EMPTY_PATH, which needs privilege).  Returns 0 or -errno
 * (-EEXIST when the name is taken). */
int rdx_link_anon(int fd, int dir, const char *name);

/* A file written before it has its name: unnamed (O_TMPFILE) where the
 * file system and /proc allow, so that a process killed while it writes
 * leaves nothing behind; else a temporary beside it (rdx_temp_create).
 * Either way no name of it is ever longer than NAME_MAX. */
struct rdx_tmpfile {
	int fd;
	char *name; /* the temporary's name in its directory; NULL: unnamed */
};

/* Creates it in dir for base (mode 0600, plus flags: O_RDWR or
 * O_WRONLY).  Returns 0 or -errno. */
int rdx_tmpfile_open(struct rdx_tmpfile *t, int dir, const char *base, int flags);

/* renameat(2) of from to to in dir; with over_empty_dir an empty
 * directory in the way is removed first, as tar does.  Returns 0 or
 * -errno (from is left where it was). */
int rdx_rename_over(int dir, const char *from, const char *to, bool over_empty_dir);

/* Gives it the name final in dir, replacing a file of that name as
 * rename(2) would (rdx_rename_over: with over_empty_dir an empty
 * directory too), and failing as it would (-EISDIR, -ENOTEMPTY...).  On
 * success a named temporary's name is gone (t->name NULL).  Returns 0 or
 * -errno; nothing of it is left under another name either way. */
int rdx_tmpfile_publish(struct rdx_tmpfile *t, int dir, const char *final, bool over_empty_dir);

/* Removes a named temporary that was not published and frees its name;
 * the descriptor stays the caller's. */
void rdx_tmpfile_discard(struct rdx_tmpfile *t, int dir);

#endif
