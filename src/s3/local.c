#include "s3/local.h"
#include "s3/s3.h"

#include "core/hex.h"
#include "core/err.h"
#include "core/io.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

const char *s3_last_part(const char *path)
{
	const char *s = strrchr(path, '/');

	return s ? s + 1 : path;
}

static int write_full(int fd, const void *p, size_t n)
{
	ssize_t w = rdx_write_full(fd, p, n, NULL);

	return w < 0 ? (int)w : 0;
}

/* Hashes the file fd from its start and gives its size. */
int s3_local_hash(int fd, uint64_t max, const atomic_int *stop, uint64_t *size,
		  struct s3_body_sum *sum, bool sha)
{
	EVP_MD_CTX *md = EVP_MD_CTX_new(), *m5 = EVP_MD_CTX_new();
	char *hex = sum->sha256_hex;
	unsigned char d[32];
	unsigned int dl = 0;
	size_t cap = 1 << 20;
	char *buf = malloc(cap);
	int ret = 0;
	uint64_t off = 0;

	if (!md || !m5 || !buf || !EVP_DigestInit_ex(md, EVP_sha256(), NULL) ||
	    !EVP_DigestInit_ex(m5, EVP_md5(), NULL)) {
		ret = -ENOMEM;
		goto out;
	}
	for (;;) {
		ssize_t n = pread(fd, buf, cap, (off_t)off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			ret = -errno;
			goto out;
		}
		if (!n)
			break;
		if (stop && atomic_load(stop)) {
			ret = -RDX_EINTR;
			goto out;
		}
		if (sha)
			EVP_DigestUpdate(md, buf, (size_t)n);
		EVP_DigestUpdate(m5, buf, (size_t)n);
		off += (uint64_t)n;
		if (off > max) {
			ret = -EFBIG;
			goto out;
		}
	}
	EVP_DigestFinal_ex(md, d, &dl);
	EVP_DigestFinal_ex(m5, sum->md5, &dl);
	rdx_hex_encode(d, 32, hex);
	if (!sha)
		hex[0] = '\0'; /* computed if the upload goes over HTTP (s3_body_sum_md5) */
	*size = off;
out:
	EVP_MD_CTX_free(md);
	EVP_MD_CTX_free(m5);
	free(buf);
	return ret;
}

/* A download target: a temporary next to the final name, renamed into
 * place only when the whole object is in; or stdout. */
int s3_out_write(void *ctx, const void *p, size_t n)
{
	struct s3_out *o = ctx;

	if (o->stop && atomic_load(o->stop))
		return -RDX_EINTR;
	return write_full(o->fd, p, n);
}

int s3_out_rewind(void *ctx)
{
	struct s3_out *o = ctx;

	if (ftruncate(o->fd, 0) || lseek(o->fd, 0, SEEK_SET))
		return -errno;
	return 0;
}

int s3_out_pwrite(struct s3_out *o, const void *buf, size_t len, uint64_t off)
{
	if (o->stop && atomic_load(o->stop))
		return -RDX_EINTR;
	return rdx_wfile_pwrite(&o->w, buf, len, off);
}

void s3_out_plan(struct s3_out *o, const struct rdx_wplan *p)
{
	if (!o->w_set)
		return;
	rdx_wfile_replan(&o->w, p);
	if (p->direct_from != RDX_NO_DIRECT)
		o->uncached = true;
}

bool s3_out_direct(struct s3_out *o)
{
	return o->w_set && rdx_wfile_direct_at(&o->w, 0);
}

int s3_out_reserve(struct s3_out *o, uint64_t size)
{
	return o->is_stdout ? 0 : rdx_prealloc(o->fd, 0, size);
}

/* The second descriptor for O_DIRECT writes (none where the file system
 * refuses it: some FUSE), and the writes through the cache until
 * s3_out_plan() says otherwise: a download's size is known only with its
 * first range. */
static void open_direct(struct s3_out *o)
{
	o->dfd = rdx_reopen(o->fd, O_RDWR | O_DIRECT);
	if (o->dfd < 0)
		o->dfd = -1;
	rdx_wfile_init(&o->w, o->fd, o->dfd, &(struct rdx_wplan){ .direct_from = RDX_NO_DIRECT });
	o->w_set = true;
}

/* A new file's mode: what the umask leaves of 0666 (temporaries are made
 * 0600).  Returns 0 or -errno. */
static int new_file_mode(int fd)
{
	mode_t mask = umask(0);

	umask(mask);
	return fchmod(fd, 0666 & ~mask) ? -errno : 0;
}

static void close_fds(struct s3_out *o)
{
	if (o->w_set)
		rdx_wfile_release(&o->w);
	o->w_set = false;
	if (o->dfd >= 0)
		close(o->dfd);
	o->dfd = -1;
	if (o->fd >= 0)
		close(o->fd);
	o->fd = -1;
}

/* The final name of dst (a directory gets the key's last part), and
 * with resume the partial's beside it (rdx_part_name).  dir gets final's
 * directory. */
static int out_names(struct s3_out *o, const char *dst, const char *key, bool resume,
		     char dir[4096])
{
	struct stat st;
	char *part, *d;
	size_t n;

	if (stat(dst, &st) == 0 && S_ISDIR(st.st_mode))
		snprintf(o->final, sizeof(o->final), "%s/%s", dst, s3_last_part(key));
	else
		snprintf(o->final, sizeof(o->final), "%s", dst);
	snprintf(dir, 4096, "%s", o->final);
	d = dirname(dir); /* in dir, or a static "." */
	memmove(dir, d, strlen(d) + 1);
	if (!resume)
		return 0;
	part = rdx_part_name(s3_last_part(o->final));
	if (!part)
		return -ENOMEM;
	n = (size_t)snprintf(o->tmp, sizeof(o->tmp), "%s/%s", dir, part);
	free(part);
	return n >= sizeof(o->tmp) ? -ENAMETOOLONG : 0;
}

/* A new file named base in the directory o->at: the stage it is written
 * to until s3_out_publish().  Returns 0 or -errno. */
static int open_stage(struct s3_out *o, const char *base)
{
	int ret = rdx_tmpfile_open(&o->stage, o->at, base, O_RDWR);

	if (ret)
		return ret;
	o->staged = true;
	o->fd = o->stage.fd;
	if ((ret = new_file_mode(o->fd)))
		return ret;
	open_direct(o);
	return 0;
}

int s3_out_open(struct s3_out *o, const char *dst, const char *key,
		const atomic_int *stop)
{
	char dir[4096];
	int ret;

	memset(o, 0, sizeof(*o));
	o->fd = o->dfd = -1;
	o->at = AT_FDCWD;
	o->stop = stop;
	if (!strcmp(dst, "-")) {
		o->fd = STDOUT_FILENO;
		o->is_stdout = true;
		return 0;
	}
	if ((ret = out_names(o, dst, key, false, dir)))
		return ret;
	o->at = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (o->at < 0) {
		o->at = AT_FDCWD;
		return -errno;
	}
	return open_stage(o, s3_last_part(o->final));
}

int s3_out_open_at(struct s3_out *o, int dir, const char *base, const atomic_int *stop)
{
	memset(o, 0, sizeof(*o));
	o->fd = o->dfd = -1;
	o->stop = stop;
	snprintf(o->final, sizeof(o->final), "%s", base);
	o->at = fcntl(dir, F_DUPFD_CLOEXEC, 0);
	if (o->at < 0) {
		o->at = AT_FDCWD;
		return -errno;
	}
	return open_stage(o, base);
}

/* The record: three lines, "etag E", "size N", "have N". */
static void read_meta(struct s3_out *o)
{
	char buf[512], etag[128];
	unsigned long long size, have;
	ssize_t n;
	int fd = open(o->meta, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return;
	buf[n] = '\0';
	if (sscanf(buf, "etag %127[^\n]\nsize %llu\nhave %llu\n", etag, &size,
		   &have) != 3 || have > size)
		return;
	snprintf(o->etag, sizeof(o->etag), "%s", etag);
	o->size = size;
	o->have = have;
}

int s3_out_open_resume(struct s3_out *o, const char *dst, const char *key,
		       const atomic_int *stop)
{
	char dir[4096];
	struct stat st;
	int ret;

	memset(o, 0, sizeof(*o));
	o->fd = o->dfd = -1;
	o->at = AT_FDCWD;
	o->stop = stop;
	o->resume = true;
	if ((ret = out_names(o, dst, key, true, dir)))
		return ret;
	if ((size_t)snprintf(o->meta, sizeof(o->meta), "%s.meta", o->tmp) >=
	    sizeof(o->meta))
		return -ENAMETOOLONG;
	o->fd = open(o->tmp, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
	if (o->fd < 0)
		return -errno;
	if (fstat(o->fd, &st))
		return -errno;
	read_meta(o);
	if (o->have > (uint64_t)st.st_size)
		o->have = (uint64_t)st.st_size;
	open_direct(o);
	return 0;
}

int s3_out_mark(struct s3_out *o, uint64_t have)
{
	char tmp[4300], buf[256];
	int fd, n, ret = 0;

	if (!o->resume)
		return 0;
	/* The data first: a record must never claim bytes a crash lost. */
	if (fdatasync(o->fd))
		return -errno;
	n = snprintf(buf, sizeof(buf), "etag %s\nsize %llu\nhave %llu\n", o->etag,
		     (unsigned long long)o->size, (unsigned long long)have);
	snprintf(tmp, sizeof(tmp), "%s.new", o->meta);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
	if (fd < 0)
		return -errno;
	ret = write_full(fd, buf, (size_t)n);
	if (close(fd) && !ret)
		ret = -errno;
	if (!ret && rename(tmp, o->meta))
		ret = -errno;
	if (ret)
		unlink(tmp);
	else
		o->have = have;
	return ret;
}

int s3_out_publish(struct s3_out *o)
{
	if (o->is_stdout)
		return 0;
	if (o->w_set)
		rdx_wfile_release(&o->w);
	o->w_set = false;
	if (o->dfd >= 0)
		close(o->dfd);
	o->dfd = -1;
	if (fsync(o->fd)) {
		close(o->fd);
		o->fd = -1;
		return -errno;
	}
	if (o->uncached) /* the first range, the ranges' unaligned ends */
		posix_fadvise(o->fd, 0, 0, POSIX_FADV_DONTNEED);
	/* An unnamed file is named while it is open: it goes with its
	 * last descriptor. */
	if (o->staged) {
		int ret = rdx_tmpfile_publish(&o->stage, o->at, s3_last_part(o->final), false);

		if (ret) {
			close(o->fd);
			o->fd = -1;
			return ret;
		}
		o->staged = false;
	}
	if (close(o->fd)) {
		o->fd = -1;
		return -errno;
	}
	o->fd = -1;
	if (o->resume && renameat(o->at, o->tmp, o->at, o->final))
		return -errno;
	o->tmp[0] = '\0';
	if (o->at != AT_FDCWD)
		close(o->at);
	o->at = AT_FDCWD;
	if (o->resume)
		unlink(o->meta);
	return 0;
}

void s3_out_abort(struct s3_out *o)
{
	if (o->is_stdout)
		return;
	close_fds(o);
	if (o->staged)
		rdx_tmpfile_discard(&o->stage, o->at);
	o->staged = false;
	if (o->at != AT_FDCWD)
		close(o->at);
	o->at = AT_FDCWD;
}

void s3_out_discard(struct s3_out *o)
{
	s3_out_abort(o);
	if (o->resume && o->tmp[0]) {
		unlink(o->tmp);
		unlink(o->meta);
	}
}

