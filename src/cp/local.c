#include "cp/local.h"

#include "core/err.h"
#include "core/fileio.h"
#include "core/io.h"
#include "core/log.h"
#include "core/tree/tree.h"
#include "core/units.h"
#include "core/xxh.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Per copy_file_range call: small enough that Ctrl-C is noticed soon. */
#define CFR_CHUNK (64u << 20)
#define RW_BUF	  (1u << 20)

static bool interrupted(const struct cp_opts *o)
{
	return o->xo.interrupted && atomic_load(o->xo.interrupted);
}

/* The read/write loop for what copy_file_range refuses (pipes, devices,
 * some file systems).  Returns 0, -RDX_EINTR, or -errno with *rd_err
 * telling whether reading failed. */
static int copy_rw(const struct cp_opts *o, int in, int out, uint64_t *done,
		   bool *rd_err)
{
	char *buf = malloc(RW_BUF);
	ssize_t n, w;
	int ret = 0;

	if (!buf)
		return -ENOMEM;
	for (;;) {
		if (interrupted(o)) {
			ret = -RDX_EINTR;
			break;
		}
		n = rdx_read_full(in, buf, RW_BUF, NULL);
		if (n < 0) {
			*rd_err = true;
			ret = (int)n;
			break;
		}
		if (n == 0)
			break;
		w = rdx_write_full(out, buf, (size_t)n, NULL);
		if (w < 0) {
			ret = (int)w;
			break;
		}
		*done += (uint64_t)n;
	}
	free(buf);
	return ret;
}

/* All of in into out from their current offsets.  Returns as copy_rw. */
static int copy_fd(const struct cp_opts *o, int in, int out, uint64_t *done,
		   bool *rd_err)
{
	*done = 0;
	*rd_err = false;
	for (;;) {
		ssize_t n;

		if (interrupted(o))
			return -RDX_EINTR;
		n = copy_file_range(in, NULL, out, NULL, CFR_CHUNK, 0);
		if (n > 0) {
			*done += (uint64_t)n;
			continue;
		}
		if (n == 0)
			return 0;
		if (errno == EINTR)
			continue;
		/* Not supported here (cross-device on old kernels, pipes,
		 * procfs...): nothing was copied yet, so fall back. */
		if (*done == 0 &&
		    (errno == EXDEV || errno == EINVAL || errno == ENOSYS ||
		     errno == EOPNOTSUPP || errno == EBADF))
			return copy_rw(o, in, out, done, rd_err);
		/* Which side failed is not told; EIO and the like are the
		 * reader's far more often than ENOSPC is. */
		*rd_err = errno != ENOSPC && errno != EDQUOT && errno != EFBIG;
		return -errno;
	}
}

/* The error line of a failed copy; returns ret. */
static int copy_failed(int ret, bool rd_err, const char *src, const char *dst)
{
	if (ret == -RDX_EINTR)
		rdx_error("interrupted");
	else
		rdx_error("cannot %s '%s': %s", rd_err ? "read" : "write",
			  rd_err ? src : dst, strerror(-ret));
	return ret == -RDX_EINTR ? ret : rd_err ? -RDX_ELOCAL : ret;
}

/* An existing destination that is no regular file (/dev/null, a fifo):
 * written into, as cp does; no temporary, nothing to rename. */
static int copy_into(const struct cp_opts *o, int in, const char *src,
		     const char *final, uint64_t *done)
{
	int out = open(final, O_WRONLY | O_CLOEXEC), ret;
	bool rd_err;

	if (out < 0) {
		ret = -errno;
		rdx_error("cannot open '%s': %s", final, strerror(-ret));
		return ret;
	}
	ret = copy_fd(o, in, out, done, &rd_err);
	if (close(out) && !ret) {
		ret = -errno;
		rd_err = false;
	}
	return ret ? copy_failed(ret, rd_err, src, final) : 0;
}

/* The temporary next to final: DIR/.NAME.rdx-XXXXXX, created with mode.
 * Returns the fd or -errno; *tmp is malloc'd (NULL on failure). */
static int open_temp(const char *final, mode_t mode, char **tmp, char **dir)
{
	char *d = strdup(final), *b = strdup(final);
	int fd = -ENOMEM;

	*tmp = NULL;
	*dir = NULL;
	if (!d || !b)
		goto out;
	*dir = strdup(dirname(d));
	if (!*dir ||
	    asprintf(tmp, "%s/.%.200s.rdx-XXXXXX", *dir, basename(b)) < 0) {
		*tmp = NULL;
		goto out;
	}
	fd = mkostemp(*tmp, O_CLOEXEC);
	if (fd < 0) {
		fd = -errno;
		free(*tmp);
		*tmp = NULL;
	} else if (fchmod(fd, mode)) {
		fd = -errno;
	}
out:
	free(d);
	free(b);
	return fd;
}

static int sync_dir(const char *dir)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC), ret = 0;

	if (fd < 0)
		return -errno;
	if (fsync(fd) && errno != EINVAL)
		ret = -errno;
	close(fd);
	return ret;
}

static void hash_into(void *arg, const void *buf, size_t len)
{
	XXH3_128bits_update(arg, buf, len);
}

/* The XXH3-128 of the first len bytes of the file fd, or (k non-NULL) of
 * what the partial k holds of them. */
static int hash_prefix(int fd, struct rdx_sink *k, uint64_t len, XXH128_hash_t *out)
{
	XXH3_state_t *h = XXH3_createState();
	int ret = h ? 0 : -ENOMEM;

	if (!ret) {
		XXH3_128bits_reset(h);
		ret = k ? rdx_sink_read_prefix(k, len, hash_into, h)
			: rdx_read_through(fd, 0, len, hash_into, h, NULL);
	}
	if (!ret)
		*out = XXH3_128bits_digest(h);
	XXH3_freeState(h);
	return ret;
}

/* --resume on one host: the copy goes into fileio's partial of final
 * (.NAME.rdx-part and its record, as a receiver keeps them), and what the
 * record vouches for is kept if the source's first bytes hash the same.
 * On failure the partial and its record stay for the next --resume.
 * Returns 0, -RDX_EINTR or -errno (said here); *done: the bytes this run
 * copied. */
static int copy_resumed(const struct cp_opts *o, int in, const struct stat *ss,
			const char *src, const char *final, mode_t mode, uint64_t *done)
{
	uint64_t have = 0, size = (uint64_t)ss->st_size, marked_ns = rdx_now_ns();
	struct rdx_sink *k = NULL;
	struct rdx_wplan plan;
	XXH128_hash_t a, b;
	bool rd_err = false;
	char *buf = NULL;
	int ret;

	*done = 0;
	plan = rdx_wplan_choose(&(struct rdx_wneed){ .policy = o->xo.direct, .size_known = true,
						     .size = size, .avail = rdx_mem_available(),
						     .fsync = o->xo.fsync });
	ret = rdx_sink_open_partial(&k, final, &plan, o->xo.interrupted, &have);
	if (ret) {
		rdx_error("cannot create '%s': %s", final, strerror(-ret));
		return ret;
	}
	if (have > size)
		have = 0;
	if (have && (hash_prefix(in, NULL, have, &a) || hash_prefix(-1, k, have, &b) ||
		     !XXH128_isEqual(a, b))) {
		rdx_warn("the partial of '%s' differs from '%s': copying it whole", final, src);
		have = 0;
	}
	if (have)
		rdx_info(1, "resuming '%s' after its first %llu bytes", final,
			 (unsigned long long)have);
	ret = rdx_sink_start_at(k, have, size - have);
	if (!ret && !(buf = malloc(RW_BUF)))
		ret = -ENOMEM;
	while (!ret) {
		ssize_t n;

		if (interrupted(o)) {
			ret = -RDX_EINTR;
			break;
		}
		n = pread(in, buf, RW_BUF, (off_t)(have + *done));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			if (n < 0) {
				ret = -errno;
				rd_err = true;
			}
			break;
		}
		ret = rdx_sink_write(k, buf, (size_t)n, *done);
		if (!ret)
			*done += (uint64_t)n;
		/* The record, twice a second: a killed copy loses no more. */
		if (!ret && rdx_now_ns() - marked_ns > 500000000ull) {
			rdx_sink_mark(k, have + *done);
			marked_ns = rdx_now_ns();
		}
	}
	free(buf);
	if (!ret)
		ret = rdx_sink_flush(k, *done);
	if (!ret)
		ret = rdx_sink_set_meta(k, mode, false, 0, 0, NULL);
	if (!ret)
		ret = rdx_sink_publish(k);
	if (ret) {
		rdx_sink_mark(k, have + *done);
		ret = copy_failed(ret, rd_err, src, final);
	}
	rdx_sink_close(k);
	return ret;
}

/* Where the copy goes: dst, or dst/NAME when dst is a directory. */
static int final_path(const char *src, const char *dst, char **final)
{
	struct stat sb;
	size_t len = strlen(dst);
	int ret;

	if (stat(dst, &sb) == 0 && S_ISDIR(sb.st_mode))
		ret = asprintf(final, "%s%s%s", dst,
			       dst[len - 1] == '/' ? "" : "/",
			       cp_basename(src));
	else if (dst[len - 1] == '/')
		return -ENOTDIR; /* "x/" that is no directory */
	else
		ret = (* final = strdup(dst)) ? 0 : -1;
	if (ret < 0) {
		*final = NULL;
		return -ENOMEM;
	}
	return 0;
}

int cp_local_copy(const struct cp_opts *o, const char *src, const char *dst,
		  struct rdx_xfer_stats *st)
{
	char *final = NULL, *tmp = NULL, *dir = NULL;
	struct stat ss, ds;
	uint64_t t0 = rdx_now_ns(), done = 0;
	bool rd_err = false;
	mode_t mode, mask;
	int in, out = -1, ret;

	if (!strcmp(src, "-") || !strcmp(dst, "-")) {
		rdx_error("'-' needs a remote address on the other side (both "
			  "are local here)");
		return -RDX_EUSAGE;
	}
	in = open(src, O_RDONLY | O_CLOEXEC);
	if (in < 0 || fstat(in, &ss)) {
		rdx_error("cannot open '%s': %s", src, strerror(errno));
		ret = -RDX_ELOCAL;
		goto out;
	}
	if (S_ISDIR(ss.st_mode)) {
		rdx_error("'%s' is a directory (use -r)", src);
		ret = -RDX_EUSAGE;
		goto out;
	}
	ret = final_path(src, dst, &final);
	if (ret) {
		rdx_error("cannot create '%s': %s", dst, strerror(-ret));
		goto out;
	}
	if (stat(final, &ds) == 0 && S_ISREG(ds.st_mode)) {
		/* A symlink to a file is written through, as cp and scp do:
		 * the new file replaces its target, the link stays. */
		char *real = realpath(final, NULL);

		if (real) {
			free(final);
			final = real;
		}
	}
	if (stat(final, &ds) == 0) {
		if (ds.st_dev == ss.st_dev && ds.st_ino == ss.st_ino) {
			rdx_error("'%s' and '%s' are the same file", src,
				  final);
			ret = -EINVAL;
			goto out;
		}
		if (S_ISDIR(ds.st_mode)) {
			rdx_error("cannot overwrite directory '%s' with a file",
				  final);
			ret = -EISDIR;
			goto out;
		}
		if (!S_ISREG(ds.st_mode)) {
			ret = copy_into(o, in, src, final, &done);
			goto out;
		}
		/* Its mode, but no set-id bit on new content (cp's write
		 * into it would lose them too). */
		mode = ds.st_mode & 01777;
	} else {
		mask = umask(0);
		umask(mask);
		mode = ss.st_mode & 0777 & ~mask;
	}
	if (o->xo.resume) {
		if (!S_ISREG(ss.st_mode)) {
			rdx_error("--resume needs a regular file: '%s' is not one", src);
			ret = -RDX_EUSAGE;
			goto out;
		}
		ret = copy_resumed(o, in, &ss, src, final, mode, &done);
		goto out;
	}
	out = open_temp(final, mode, &tmp, &dir);
	if (out < 0) {
		ret = out;
		rdx_error("cannot create '%s': %s", final, strerror(-ret));
		goto out;
	}
	ret = copy_fd(o, in, out, &done, &rd_err);
	if (!ret && o->xo.fsync && fsync(out))
		ret = -errno;
	if (close(out) && !ret)
		ret = -errno;
	out = -1;
	if (ret) {
		ret = copy_failed(ret, rd_err, src, final);
		goto out;
	}
	if (rename(tmp, final)) {
		ret = -errno;
		rdx_error("cannot rename '%s' to '%s': %s", tmp, final,
			  strerror(-ret));
		goto out;
	}
	free(tmp);
	tmp = NULL; /* published: nothing to remove */
	if (o->xo.fsync) {
		ret = sync_dir(dir);
		if (ret)
			rdx_error("cannot sync '%s': %s", dir, strerror(-ret));
	}
out:
	if (out >= 0)
		close(out);
	if (tmp)
		unlink(tmp);
	free(tmp);
	if (in >= 0)
		close(in);
	if (!ret && st) {
		double secs = (double)(rdx_now_ns() - t0) / 1e9;

		*st = (struct rdx_xfer_stats){
			.bytes = done, .seconds = secs, .transport = "local"};
		rdx_info(1, "copied %llu bytes locally to '%s'",
			 (unsigned long long)done, final);
	}
	free(final);
	free(dir);
	return ret;
}

/* Moves the packed stream into the unpacker until its end, a failure or
 * an interruption.  Returns the bytes moved or -errno. */
static int64_t pump(int from, int to, const atomic_int *stop)
{
	enum { BUF = 1 << 20 };
	char *buf = malloc(BUF);
	int64_t total = 0;
	ssize_t n;

	if (!buf)
		return -ENOMEM;
	for (;;) {
		if (stop && atomic_load(stop)) {
			total = -ECANCELED;
			break;
		}
		n = read(from, buf, BUF);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			if (n < 0)
				total = -errno;
			break;
		}
		if (rdx_write_full(to, buf, (size_t)n, NULL) < 0) {
			total = -EPIPE; /* the unpacker stopped: it says why */
			break;
		}
		total += n;
	}
	free(buf);
	return total;
}

/* Whether dst (or, when it does not exist yet, its directory) lies in
 * the directory src: copying there would copy the copy without end. */
static bool inside(const char *src, const char *dst)
{
	char *s = realpath(src, NULL), *d = realpath(dst, NULL), *copy = NULL;
	bool in = false;
	size_t n;

	if (!d && errno == ENOENT && (copy = strdup(dst)))
		d = realpath(dirname(copy), NULL);
	if (s && d) {
		n = strlen(s);
		in = !strncmp(s, d, n) && (d[n] == '/' || d[n] == '\0' || n == 1);
	}
	free(copy);
	free(s);
	free(d);
	return in;
}

int cp_local_tree(const struct cp_opts *o, const char *src, const char *dst,
		  struct rdx_xfer_stats *st)
{
	uint64_t t0 = rdx_now_ns();
	struct rdx_tree_pack *p = NULL;
	struct rdx_tree_unpack *u = NULL;
	char why[256];
	int rfd = -1, wfd = -1, ret, pret, uret;
	int64_t moved;
	struct stat sb;

	if (stat(src, &sb) == 0 && S_ISDIR(sb.st_mode) && inside(src, dst)) {
		rdx_error("cannot copy '%s' into itself ('%s')", src, dst);
		return -RDX_EUSAGE;
	}
	/* Both ends are ours: any name, and --delete as asked. */
	ret = rdx_tree_unpack_start(&u, dst, &(struct rdx_tree_unpack_opts){
		.as_root = geteuid() == 0,
		.writers = o->xo.io_threads,
		.allow_delete = o->xo.tree_delete,
		.keep_setid = o->xo.tree_keep_setid,
		.direct = o->xo.direct,
		.fsync = o->xo.fsync,
	}, o->xo.interrupted, &wfd);
	if (ret) {
		rdx_error("cannot copy a tree into '%s': %s", dst,
			  ret == -ENOTDIR ? "not a directory" : rdx_strerror(ret));
		return -RDX_ELOCAL;
	}
	ret = rdx_tree_pack_start(&p, &(struct rdx_tree_pack_opts){
		.paths = &src, .n = 1, .follow = o->xo.tree_follow,
		.rules = o->xo.tree_rules, .nrules = o->xo.ntree_rules,
		.readers = o->xo.io_threads,
	}, &rfd);
	if (ret) {
		close(wfd);
		rdx_tree_unpack_finish(u, false, why, sizeof(why), NULL);
		rdx_error("cannot copy '%s': %s", src, rdx_strerror(ret));
		return -RDX_ELOCAL;
	}
	moved = pump(rfd, wfd, o->xo.interrupted);
	close(rfd); /* a packer still writing sees EPIPE */
	close(wfd);
	pret = rdx_tree_pack_finish(p);
	uret = rdx_tree_unpack_finish(u, moved >= 0, why, sizeof(why), NULL);
	if (moved == -ECANCELED) {
		rdx_error("interrupted");
		return -RDX_EINTR;
	}
	if (uret) {
		rdx_error("%s", why);
		return uret;
	}
	if (moved < 0) {
		rdx_error("cannot copy '%s': %s", src, rdx_strerror((int)moved));
		return -RDX_ELOCAL;
	}
	if (pret)
		return pret;
	if (st) {
		st->bytes = (uint64_t)moved;
		st->seconds = (double)(rdx_now_ns() - t0) / 1e9;
		st->transport = "local";
		st->streams = 0;
	}
	return 0;
}
