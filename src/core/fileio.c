#include "core/fileio.h"

#include "core/direct.h"
#include "core/io.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define DIO_ALIGN RDX_DIO_ALIGN

struct rdx_source {
	int fd;		 /* buffered */
	int dfd;	 /* O_DIRECT, or -1 */
	bool seekable;
	bool own;	 /* we opened it (not stdin) */
	atomic_bool direct_ok;
	uint64_t base;	 /* where reading starts: stdin's current offset */
	uint64_t size;	 /* bytes from base to the end at open time */
	const atomic_int *stop;
	ssize_t (*cb_read)(void *arg, void *buf, size_t cap); /* rdx_source_open_cb */
	void (*cb_close)(void *arg);
	void *cb_arg;
};

/* A pipe holds 64 KiB by default, so every read or write of a 1 MiB slot
 * would take 16 trips through the kernel and as many wakeups of the other
 * end.  Ask for a pipe as large as a slot (the kernel caps it at
 * /proc/sys/fs/pipe-max-size for unprivileged users; halve until it fits). */
static void grow_pipe(int fd, size_t want)
{
	struct stat st;

	if (fstat(fd, &st) || !S_ISFIFO(st.st_mode))
		return;
	for (; want >= 65536; want /= 2)
		if (fcntl(fd, F_GETPIPE_SZ) >= (int)want ||
		    fcntl(fd, F_SETPIPE_SZ, (int)want) >= 0)
			return;
}

/* Whether most of the file already sits in the page cache.  O_DIRECT is
 * for data on its way from the device: for cached data it is slower than
 * a copy from the cache, and it forces dirty pages to be written first.
 * Looks at up to 64 windows spread over the file. */
static bool mostly_cached(int fd, uint64_t size)
{
	const size_t page = (size_t)sysconf(_SC_PAGESIZE);
	const size_t win = 64 * page;
	unsigned char vec[64];
	unsigned i, hits = 0, seen = 0;
	void *map;

	if (size < win)
		return false;
	map = mmap(NULL, size, PROT_READ, MAP_SHARED, fd, 0);
	if (map == MAP_FAILED)
		return false;
	for (i = 0; i < 64; i++) {
		uint64_t off = (size - win) / 63 * i / page * page;
		unsigned j;

		if (mincore((char *)map + off, win, vec))
			break;
		for (j = 0; j < 64; j++, seen++)
			hits += vec[j] & 1;
	}
	munmap(map, size);
	return seen && hits * 4 >= seen * 3;
}

int rdx_source_open(struct rdx_source **out, const char *path,
		    const atomic_int *stop)
{
	struct rdx_source *s = calloc(1, sizeof(*s));
	struct stat st;
	int err;

	if (!s)
		return -ENOMEM;
	s->dfd = -1;
	s->stop = stop;
	if (!path || strcmp(path, "-") == 0) {
		s->fd = STDIN_FILENO;
	} else {
		s->fd = open(path, O_RDONLY | O_CLOEXEC);
		if (s->fd < 0)
			goto err_free;
		s->own = true;
	}
	if (fstat(s->fd, &st))
		goto err_close;
	if (S_ISDIR(st.st_mode)) {
		errno = EISDIR;
		goto err_close;
	}
	s->seekable = S_ISREG(st.st_mode);
	if (S_ISFIFO(st.st_mode))
		grow_pipe(s->fd, 1u << 20);
	if (s->seekable) {
		/* `rdsend h p k < file` after a partial read of the file by
		 * the caller: send what is left, as cat would. */
		off_t pos = s->own ? 0 : lseek(s->fd, 0, SEEK_CUR);

		s->base = pos > 0 && pos < st.st_size ? (uint64_t)pos : 0;
		if (pos >= st.st_size && pos > 0)
			s->base = (uint64_t)st.st_size;
		s->size = (uint64_t)st.st_size - s->base;
		/* Reopen rather than fcntl(F_SETFL): stdin's open file
		 * description is shared with whoever gave it to us. */
		if (s->own && !mostly_cached(s->fd, s->size))
			s->dfd = open(path, O_RDONLY | O_CLOEXEC | O_DIRECT);
		atomic_init(&s->direct_ok, s->dfd >= 0);
		posix_fadvise(s->fd, 0, 0, POSIX_FADV_SEQUENTIAL);
	}
	*out = s;
	return 0;

err_close:
	err = errno;
	if (s->own)
		close(s->fd);
	errno = err;
err_free:
	err = errno;
	free(s);
	return -err;
}

int rdx_source_open_file(struct rdx_source **out, int fd, const atomic_int *stop)
{
	struct rdx_source *s;
	struct stat st;

	if (fstat(fd, &st))
		return -errno;
	if (!S_ISREG(st.st_mode))
		return -EINVAL;
	if (!(s = calloc(1, sizeof(*s))))
		return -ENOMEM;
	s->fd = fd;
	s->own = true;
	s->seekable = true;
	s->stop = stop;
	s->size = (uint64_t)st.st_size;
	/* A second open file description of the same inode (not of a name,
	 * which may be another file by now), for O_DIRECT. */
	s->dfd = mostly_cached(fd, s->size) ? -1 : rdx_reopen(fd, O_RDONLY | O_DIRECT);
	if (s->dfd < 0)
		s->dfd = -1;
	posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
	atomic_init(&s->direct_ok, s->dfd >= 0);
	*out = s;
	return 0;
}

int rdx_source_open_fd(struct rdx_source **out, int fd, const atomic_int *stop)
{
	struct rdx_source *s = calloc(1, sizeof(*s));

	if (!s)
		return -ENOMEM;
	s->fd = fd;
	s->dfd = -1;
	s->own = true;
	s->stop = stop;
	*out = s;
	return 0;
}

bool rdx_source_seekable(const struct rdx_source *s)
{
	return s->seekable;
}

uint64_t rdx_source_size(const struct rdx_source *s)
{
	return s->size;
}

bool rdx_source_direct(const struct rdx_source *s)
{
	return atomic_load(&s->direct_ok);
}

ssize_t rdx_source_read(struct rdx_source *s, void *buf, size_t cap,
			uint64_t seq)
{
	uint64_t off, want;
	size_t done = 0;
	ssize_t n;

	if (!s->seekable)
		return s->cb_read ? s->cb_read(s->cb_arg, buf, cap)
				  : rdx_read_full(s->fd, buf, cap, s->stop);

	off = seq * cap;
	if (off >= s->size)
		return 0;
	want = s->size - off < cap ? s->size - off : cap;
	off += s->base;
	if (atomic_load(&s->direct_ok)) {
		/* Ask for whole blocks: O_DIRECT returns the short tail at
		 * end of file by itself. */
		n = pread(s->dfd, buf, (want + DIO_ALIGN - 1) & ~(uint64_t)(DIO_ALIGN - 1),
			  (off_t)off);
		if (n < 0 && errno == EINVAL)
			atomic_store(&s->direct_ok, false);
		else if (n < 0 && errno != EINTR)
			return -errno;
		else if (n > 0)
			done = (size_t)n;
	}
	if (done < want) {
		/* Buffered for what O_DIRECT left (an unaligned rest). */
		n = rdx_pread_full(s->fd, (char *)buf + done, want - done,
				   (off_t)(off + done));
		if (n < 0)
			return n;
		done += (size_t)n;
	}
	if (done < want)
		return -ESTALE;
	return (ssize_t)want;
}

int rdx_read_through(int fd, uint64_t off, uint64_t len, rdx_prefix_fn fn, void *arg,
		     const atomic_int *stop)
{
	enum { BUF = 1 << 20 };
	char *buf = malloc(BUF);
	int ret = 0;

	if (!buf)
		return -ENOMEM;
	while (len && !ret) {
		size_t want = len < BUF ? (size_t)len : BUF;
		ssize_t n;

		if (stop && atomic_load(stop)) {
			ret = -ECANCELED;
			break;
		}
		n = rdx_pread_full(fd, buf, want, (off_t)off);
		if (n < 0) {
			ret = (int)n;
		} else if ((size_t)n < want) {
			ret = -ESTALE;
		} else {
			fn(arg, buf, want);
			off += want;
			len -= want;
		}
	}
	free(buf);
	return ret;
}

int rdx_source_read_prefix(struct rdx_source *s, uint64_t len, rdx_prefix_fn fn, void *arg)
{
	if (!s->seekable)
		return -ESPIPE;
	if (len > s->size)
		return -ESTALE;
	return rdx_read_through(s->fd, s->base, len, fn, arg, s->stop);
}

void rdx_source_skip(struct rdx_source *s, uint64_t len)
{
	if (len > s->size)
		len = s->size;
	s->base += len;
	s->size -= len;
}

int rdx_source_open_cb(struct rdx_source **out,
		       ssize_t (*read)(void *arg, void *buf, size_t cap),
		       void (*close)(void *arg), void *arg)
{
	struct rdx_source *s = calloc(1, sizeof(*s));

	if (!s)
		return -ENOMEM;
	s->fd = -1;
	s->dfd = -1;
	s->cb_read = read;
	s->cb_close = close;
	s->cb_arg = arg;
	*out = s;
	return 0;
}

void rdx_source_close(struct rdx_source *s)
{
	if (!s)
		return;
	if (s->cb_close)
		s->cb_close(s->cb_arg);
	if (s->dfd >= 0)
		close(s->dfd);
	if (s->own)
		close(s->fd);
	free(s);
}

struct rdx_sink {
	int fd;		  /* buffered */
	int dfd;	  /* O_DIRECT, or -1 */
	struct rdx_wplan plan;
	struct rdx_wfile w; /* a file's writes (parallel): fd and dfd as plan has them */
	bool parallel;	  /* temp file or existing regular file */
	bool do_fsync;
	bool committed;
	bool is_new;	  /* no file had the name when it was opened */
	char *final;	  /* final name, NULL for stdout/devices */
	bool staged;	  /* written as stage, published as final */
	bool prealloc;	  /* staged and fallocated: zero runs are punched out */
	struct rdx_tmpfile stage; /* a new file before its name (fd is its fd) */
	char *tmp;	  /* --resume: the partial's name */
	char *dir;	  /* directory of final, for fsync */
	int at;		  /* what final and tmp are relative to: AT_FDCWD, or
			   * a directory of rdx_sink_open_at() (owned) */
	char *meta;	  /* --resume: the partial's record; tmp is kept */
	uint64_t base;	  /* --resume: where the data written starts */
	uint64_t marked;  /* --resume: what the record says */
	const char *name; /* for messages */
	uint64_t next;	  /* stream sinks: expected offset */
	int (*cb_write)(void *arg, const void *buf, size_t len); /* rdx_sink_open_cb */
	void (*cb_end)(void *arg);
	void *cb_arg;
	const atomic_int *stop;
};

/* The second descriptor, for O_DIRECT, where the plan has any of the
 * file go around the page cache and the file system takes it. */
static void open_direct(struct rdx_sink *k)
{
	k->dfd = -1;
	if (k->plan.direct_from != RDX_NO_DIRECT) {
		k->dfd = rdx_reopen(k->fd, O_WRONLY | O_DIRECT);
		if (k->dfd < 0)
			k->dfd = -1;
	}
}

/* The new file for path, in its directory (k->at, k->final its base
 * name): unnamed until published, or a temporary beside it
 * (rdx_tmpfile).  Returns 0 or -errno. */
static int open_stage(struct rdx_sink *k, const char *base)
{
	int ret;

	k->at = open(k->dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (k->at < 0) {
		k->at = AT_FDCWD;
		return -errno;
	}
	k->final = strdup(base);
	if (!k->final)
		return -ENOMEM;
	ret = rdx_tmpfile_open(&k->stage, k->at, base, O_RDWR);
	if (ret)
		return ret;
	k->staged = true;
	k->fd = k->stage.fd;
	return 0;
}

/* The file being written for path: a new one (open_stage), or with
 * partial ".NAME.rdx-part" (opened as it is, or created) and its
 * record's name (NAME cut to fit NAME_MAX, then told apart by a hash of
 * the whole name). */
static int open_temp(struct rdx_sink *k, const char *path, mode_t mode, bool partial)
{
	char *copy, *base, *part;
	int ret;

	copy = strdup(path);
	if (!copy)
		return -ENOMEM;
	k->dir = strdup(dirname(copy));
	free(copy);
	copy = strdup(path);
	if (!copy || !k->dir) {
		free(copy);
		return -ENOMEM;
	}
	base = basename(copy);
	if (!partial) {
		ret = open_stage(k, base);
		free(copy);
		if (ret)
			return ret;
		if (fchmod(k->fd, mode))
			return -errno; /* rdx_sink_close() removes the temporary */
		open_direct(k);
		return 0;
	}
	part = rdx_part_name(base);
	free(copy);
	if (!part || asprintf(&k->tmp, "%s/%s", k->dir, part) < 0) {
		free(part);
		k->tmp = NULL;
		return -ENOMEM;
	}
	free(part);
	if (asprintf(&k->meta, "%s.meta", k->tmp) < 0) {
		k->meta = NULL;
		return -ENOMEM;
	}
	k->fd = open(k->tmp, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (k->fd < 0) {
		int err = errno;

		free(k->tmp);
		k->tmp = NULL;
		return -err;
	}
	if (fchmod(k->fd, mode))
		return -errno; /* rdx_sink_close() removes the temporary */
	open_direct(k);
	return 0;
}

/* Opens a pipe or fifo for writing without blocking, so that a writer can
 * always notice a stop request: a blocking write of a whole slot into a pipe
 * whose reader stalled would sit in the kernel for good.  (An inherited
 * pipe, standard output, gets a private non-blocking open file description
 * through rdx_reopen(): O_NONBLOCK on the inherited one would change it for
 * every process sharing it.)  A fifo without a reader yet is retried until
 * wait_ms pass.  Returns the fd or -errno. */
static int open_pipe(const char *path, uint64_t wait_ms,
		     const atomic_int *interrupted)
{
	uint64_t waited = 0;

	for (;;) {
		int fd = open(path, O_WRONLY | O_NONBLOCK | O_CLOEXEC);

		if (fd >= 0 || errno != ENXIO)
			return fd >= 0 ? fd : -errno;
		if (interrupted && atomic_load(interrupted))
			return -EINTR;
		if (waited >= wait_ms)
			return -ENXIO;
		usleep(100000);
		waited += 100;
	}
}

static bool is_fifo(int fd)
{
	struct stat st;

	return fstat(fd, &st) == 0 && S_ISFIFO(st.st_mode);
}

/* A sink with no file yet; NULL when out of memory. */
static struct rdx_sink *sink_new(const char *name, const atomic_int *stop,
				  const struct rdx_wplan *plan)
{
	struct rdx_sink *k = calloc(1, sizeof(*k));

	if (k) {
		k->fd = -1;
		k->dfd = -1;
		k->at = AT_FDCWD;
		k->name = name;
		k->stop = stop;
		/* No plan: a stream's sink, never O_DIRECT. */
		k->plan = plan ? *plan : (struct rdx_wplan){ .direct_from = RDX_NO_DIRECT };
		k->do_fsync = k->plan.fsync;
	}
	return k;
}

/* The process's umask, read without changing it (/proc/self/status):
 * umask(2) can only be read by setting it, which for a moment would give
 * every other thread's new files mode 0666.  The set-and-restore is the
 * fallback where /proc says nothing. */
static mode_t current_umask(void)
{
	FILE *f = fopen("/proc/self/status", "re");
	char line[128];
	unsigned m;
	mode_t mask;

	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "Umask: %o", &m) == 1) {
			fclose(f);
			return (mode_t)m & 0777;
		}
	if (f)
		fclose(f);
	mask = umask(0);
	umask(mask);
	return mask;
}

/* A regular or new file at path: its temporary (or partial) beside it,
 * with the file's mode, or the umask's for a new one. */
static int open_file(struct rdx_sink *k, const char *path, bool partial)
{
	struct stat st;
	mode_t mode;
	int ret;

	if (stat(path, &st) == 0) {
		mode = st.st_mode & 07777;
	} else {
		mode = 0666 & ~current_umask();
		k->is_new = true;
	}
	ret = open_temp(k, path, mode, partial);
	if (ret)
		return ret;
	if (partial && !(k->final = strdup(path)))
		return -ENOMEM;
	k->parallel = true;
	rdx_wfile_init(&k->w, k->fd, k->dfd, &k->plan);
	return 0;
}

/* Reserves len bytes at off (an early, clean ENOSPC); filesystems
 * without fallocate are fine.  0 or -errno. */
int rdx_sink_open(struct rdx_sink **out, const char *path, bool size_known,
		  uint64_t size, const struct rdx_wplan *plan, const atomic_int *stop,
		  uint64_t open_wait_ms, const atomic_int *interrupted)
{
	struct rdx_sink *k = sink_new(path, stop, plan);
	struct stat st;
	int ret;

	if (!k)
		return -ENOMEM;
	if (!path || strcmp(path, "-") == 0) {
		k->fd = STDOUT_FILENO;
		k->name = "standard output";
		if (is_fifo(STDOUT_FILENO)) {
			int fd = rdx_reopen(STDOUT_FILENO, O_WRONLY | O_NONBLOCK);

			if (fd >= 0)
				k->fd = fd;
		}
		grow_pipe(k->fd, 1u << 20);
		*out = k;
		return 0;
	}
	if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
		if (S_ISDIR(st.st_mode)) {
			ret = -EISDIR;
			goto err;
		}
		/* A device or fifo: write into it, as cp does. */
		if (S_ISFIFO(st.st_mode)) {
			ret = open_pipe(path, open_wait_ms, interrupted);
		} else {
			ret = open(path, O_WRONLY | O_CLOEXEC);
			if (ret < 0)
				ret = -errno;
		}
		if (ret < 0)
			goto err;
		k->fd = ret;
		grow_pipe(k->fd, 1u << 20);
		*out = k;
		return 0;
	}
	ret = open_file(k, path, false);
	if (!ret && size_known)
		ret = rdx_prealloc(k->fd, 0, size);
	if (ret)
		goto err;
	k->prealloc = size_known && size;
	*out = k;
	return 0;

err:
	rdx_sink_close(k);
	return ret;
}

int rdx_sink_new_mode(struct rdx_sink *k, mode_t mode)
{
	if (!k->is_new)
		return 0;
	return fchmod(k->fd, mode & 0777 & ~current_umask()) ? -errno : 0;
}

int rdx_sink_open_at(struct rdx_sink **out, int dir, const char *base, const char *name,
		     uint64_t size, const struct rdx_wplan *plan, const atomic_int *stop)
{
	struct rdx_sink *k = sink_new(name, stop, plan);
	int ret;

	if (!k)
		return -ENOMEM;
	/* A descriptor of our own (O_PATH if dir is: there is no fsync). */
	k->at = fcntl(dir, F_DUPFD_CLOEXEC, 0);
	if (k->at < 0) {
		k->at = AT_FDCWD;
		ret = -errno;
		goto err;
	}
	k->final = strdup(base);
	if (!k->final) {
		ret = -ENOMEM;
		goto err;
	}
	ret = rdx_tmpfile_open(&k->stage, k->at, base, O_RDWR);
	if (ret < 0)
		goto err;
	k->staged = true;
	k->fd = k->stage.fd;
	open_direct(k);
	k->parallel = true;
	rdx_wfile_init(&k->w, k->fd, k->dfd, &k->plan);
	ret = rdx_prealloc(k->fd, 0, size);
	if (ret)
		goto err;
	k->prealloc = size != 0;
	*out = k;
	return 0;

err:
	rdx_sink_close(k);
	return ret;
}

int rdx_sink_open_partial(struct rdx_sink **out, const char *path,
			  const struct rdx_wplan *plan, const atomic_int *stop, uint64_t *have)
{
	struct rdx_sink *k;
	char line[64] = "";
	unsigned long long n;
	struct stat st;
	int fd, ret;

	*have = 0;
	if (!path || strcmp(path, "-") == 0 || (stat(path, &st) == 0 && !S_ISREG(st.st_mode)))
		return -ENOTSUP;
	k = sink_new(path, stop, plan);
	if (!k)
		return -ENOMEM;
	ret = open_file(k, path, true);
	if (ret)
		goto err;
	fd = open(k->meta, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd >= 0) {
		ssize_t got = read(fd, line, sizeof(line) - 1);

		close(fd);
		line[got > 0 ? got : 0] = '\0';
		if (sscanf(line, "have %llu\n", &n) == 1 && fstat(k->fd, &st) == 0)
			*have = n < (uint64_t)st.st_size ? n : (uint64_t)st.st_size;
		k->marked = *have;
	}
	*out = k;
	return 0;
err:
	rdx_sink_close(k);
	return ret;
}

int rdx_sink_read_prefix(struct rdx_sink *k, uint64_t len, rdx_prefix_fn fn, void *arg)
{
	return rdx_read_through(k->fd, 0, len, fn, arg, k->stop);
}

int rdx_sink_start_at(struct rdx_sink *k, uint64_t start, uint64_t size)
{
	int ret;

	if (!k->meta)
		return start ? -EINVAL : 0;
	if (ftruncate(k->fd, (off_t)start))
		return -errno;
	k->base = start;
	ret = rdx_prealloc(k->fd, start, size);
	return ret ? ret : rdx_sink_mark(k, start);
}

int rdx_sink_mark(struct rdx_sink *k, uint64_t have)
{
	char *next = NULL, line[64];
	int fd, n, ret = 0;

	if (!k->meta)
		return 0;
	if (asprintf(&next, "%s.new", k->meta) < 0)
		return -ENOMEM;
	n = snprintf(line, sizeof(line), "have %llu\n", (unsigned long long)have);
	fd = open(next, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0) {
		ret = -errno;
	} else {
		ssize_t w = rdx_write_full(fd, line, (size_t)n, NULL);

		if (w < 0)
			ret = (int)w;
		if (close(fd) && !ret)
			ret = -errno;
		if (!ret && rename(next, k->meta))
			ret = -errno;
		if (ret)
			unlink(next);
		else
			k->marked = have;
	}
	free(next);
	return ret;
}

bool rdx_sink_parallel(const struct rdx_sink *k)
{
	return k->parallel;
}

bool rdx_sink_direct(struct rdx_sink *k)
{
	return k->parallel && rdx_wfile_direct_at(&k->w, 0);
}

const char *rdx_sink_name(const struct rdx_sink *k)
{
	return k->name;
}

/* A new file keeps its all-zero blocks as holes (as cp --sparse=always
 * and qemu-img convert do): a sparse file arrives sparse whatever carried
 * it, and nothing is written for them.  Aligned 4 KiB blocks.  A new file
 * reads zeros where nothing was written (fallocated or not), so a run of
 * them is only punched out of the preallocation, where the file system
 * can.  Returns 0 or -errno. */
#define SPARSE_BLOCK 4096u

static bool zero_block(const uint8_t *p, size_t n)
{
	return !p[0] && !memcmp(p, p + 1, n - 1);
}

static int write_sparse(struct rdx_sink *k, const uint8_t *buf, size_t len, uint64_t off)
{
	size_t i = 0;

	while (i < len) {
		size_t start = i, n = len - i < SPARSE_BLOCK ? len - i : SPARSE_BLOCK;
		bool zero = zero_block(buf + i, n);

		/* The run of blocks that are all zero, or none of them. */
		for (i += n; i < len;) {
			n = len - i < SPARSE_BLOCK ? len - i : SPARSE_BLOCK;
			if (zero_block(buf + i, n) != zero)
				break;
			i += n;
		}
		if (!zero) {
			int ret = rdx_wfile_pwrite(&k->w, buf + start, i - start, off + start);

			if (ret)
				return ret;
		} else if (k->prealloc) {
			(void)fallocate(k->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
					(off_t)(off + start), (off_t)(i - start));
		}
	}
	return 0;
}

int rdx_sink_write(struct rdx_sink *k, const void *buf, size_t len,
		   uint64_t off)
{
	ssize_t n;

	off += k->base;
	if (!k->parallel) {
		if (off != k->next)
			return -EINVAL;
		n = k->cb_write ? k->cb_write(k->cb_arg, buf, len) : rdx_write_full(k->fd, buf, len, k->stop);
		if (n < 0)
			return (int)n;
		k->next += len;
		return 0;
	}
	if (k->staged && off % SPARSE_BLOCK == 0)
		return write_sparse(k, buf, len, off);
	return rdx_wfile_pwrite(&k->w, buf, len, off);
}

static int fsync_dir(const char *dir)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int ret = 0;

	if (fd < 0)
		return -errno;
	if (fsync(fd) && errno != EINVAL)
		ret = -errno;
	close(fd);
	return ret;
}

int rdx_sink_open_fd(struct rdx_sink **out, int fd, const char *name,
		     const atomic_int *stop)
{
	struct rdx_sink *k = sink_new(name, stop, NULL);

	if (!k)
		return -ENOMEM;
	k->fd = fd;
	*out = k;
	return 0;
}

int rdx_sink_open_cb(struct rdx_sink **out, const char *name,
		     int (*write)(void *arg, const void *buf, size_t len),
		     void (*end)(void *arg), void *arg)
{
	struct rdx_sink *k = sink_new(name, NULL, NULL);

	if (!k)
		return -ENOMEM;
	k->cb_write = write;
	k->cb_end = end;
	k->cb_arg = arg;
	*out = k;
	return 0;
}

int rdx_sink_flush(struct rdx_sink *k, uint64_t total)
{
	if (!k->tmp && !k->staged) {
		/* Pipes and devices cannot be synced; that is no error. */
		if (k->do_fsync && k->fd >= 0 && fsync(k->fd) && errno != EINVAL &&
		    errno != EROFS)
			return -errno;
		return 0;
	}
	if (ftruncate(k->fd, (off_t)(k->base + total)))
		return -errno;
	if (k->do_fsync && fsync(k->fd))
		return -errno;
	return 0;
}

int rdx_sink_set_meta(struct rdx_sink *k, mode_t mode, bool chown, uid_t uid,
		      gid_t gid, const struct timespec times[2])
{
	/* chown first: it clears set-id bits that fchmod then restores. */
	if (chown && fchown(k->fd, uid, gid))
		return -errno;
	if (fchmod(k->fd, mode & 07777) || futimens(k->fd, times))
		return -errno;
	return 0;
}

int rdx_sink_publish(struct rdx_sink *k)
{
	int err;

	if (k->staged) {
		err = rdx_tmpfile_publish(&k->stage, k->at, k->final, false);
		if (err)
			return err;
		k->committed = true;
		return k->do_fsync && k->dir ? fsync_dir(k->dir) : 0;
	}
	if (!k->tmp)
		return 0;
	if (renameat(k->at, k->tmp, k->at, k->final))
		return -errno;
	k->committed = true;
	if (k->meta)
		unlink(k->meta);
	if (k->do_fsync)
		return fsync_dir(k->dir);
	return 0;
}

void rdx_sink_close(struct rdx_sink *k)
{
	if (!k)
		return;
	if (k->cb_end)
		k->cb_end(k->cb_arg);
	if (k->parallel)
		rdx_wfile_release(&k->w);
	if (k->dfd >= 0)
		close(k->dfd);
	if (k->fd >= 0 && k->fd != STDOUT_FILENO)
		close(k->fd);
	if (k->tmp && !k->committed && k->meta && !k->marked) {
		unlink(k->meta); /* nothing in it worth resuming */
		unlink(k->tmp);
	} else if (k->staged && !k->committed) {
		rdx_tmpfile_discard(&k->stage, k->at); /* an unnamed one goes with its fd */
	}
	if (k->at != AT_FDCWD)
		close(k->at);
	free(k->meta);
	free(k->tmp);
	free(k->final);
	free(k->dir);
	free(k);
}
