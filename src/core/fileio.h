/* Sources and sinks for the stream: files read through O_DIRECT where the
 * filesystem allows it (buffered otherwise, for the unaligned tail, and for
 * a source already in the page cache) and written as the page-cache policy
 * says (core/direct.h), stdin/stdout and other pipes through
 * full-length loops, with pipes grown to a slot's size.
 *
 * A sink for a regular file writes a temporary in the target's directory and
 * only rdx_sink_publish() gives it the final name; rdx_sink_abort() removes
 * it.  Reads and writes at distinct offsets may run on several threads. */
#ifndef RDX_FILEIO_H
#define RDX_FILEIO_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

struct rdx_source;
struct rdx_wplan;
struct rdx_sink;

/* Opens path for reading (NULL or "-": stdin).  Returns 0 or -errno. */
int rdx_source_open(struct rdx_source **out, const char *path,
		    const atomic_int *stop);

/* A stream source reading fd (a pipe from a producer thread), which the
 * source owns and closes.  Returns 0 or -ENOMEM. */
int rdx_source_open_fd(struct rdx_source **out, int fd, const atomic_int *stop);

/* A seekable source reading the regular file fd from its start, through a
 * second O_DIRECT open of the same inode where the file is not mostly in
 * the page cache.  On success the source owns fd (rdx_source_close()
 * closes it); on failure the caller still does.  Returns 0 or -errno
 * (-EINVAL: not a regular file). */
int rdx_source_open_file(struct rdx_source **out, int fd, const atomic_int *stop);

/* A stream source taking its bytes from read(arg, buf, cap), which fills
 * buf (less only at the end) and returns the count, 0 at the end or
 * -errno; rdx_source_close() calls close(arg) once.  Returns 0 or
 * -ENOMEM. */
int rdx_source_open_cb(struct rdx_source **out,
		       ssize_t (*read)(void *arg, void *buf, size_t cap),
		       void (*close)(void *arg), void *arg);

/* True for regular files: size known, chunks readable in parallel. */
bool rdx_source_seekable(const struct rdx_source *s);

/* The size of a seekable source at open time. */
uint64_t rdx_source_size(const struct rdx_source *s);

/* Reads chunk seq (bytes [seq*cap, seq*cap+cap) of a seekable source, or
 * the next cap bytes of a stream, merging short pipe reads) into buf, which
 * is 4 KiB-aligned with cap a multiple of 4 KiB.  Returns the bytes read,
 * 0 at end of input, -EIO... -errno; for a seekable source that shrank
 * while being read, -ESTALE. */
ssize_t rdx_source_read(struct rdx_source *s, void *buf, size_t cap,
			uint64_t seq);

/* Whether O_DIRECT is in use (for -v). */
bool rdx_source_direct(const struct rdx_source *s);

/* What --resume compares: the first len bytes of a seekable source (or of
 * a sink's partial, below), read in order through fn.  Returns 0, -ESTALE
 * when there are fewer, or -errno; -ECANCELED once *stop is set. */
typedef void (*rdx_prefix_fn)(void *arg, const void *buf, size_t len);

/* pread()s [off, off + len) of fd in order through fn, 1 MiB at a time.
 * Returns 0, -ESTALE when the file ends before, -ECANCELED once *stop is
 * set (stop may be NULL), or -errno. */
int rdx_read_through(int fd, uint64_t off, uint64_t len, rdx_prefix_fn fn, void *arg,
		     const atomic_int *stop);
int rdx_source_read_prefix(struct rdx_source *s, uint64_t len, rdx_prefix_fn fn,
			   void *arg);

/* --resume: the data starts len bytes further in (len <= the size); chunk
 * numbers and rdx_source_size() count from there. */
void rdx_source_skip(struct rdx_source *s, uint64_t len);

void rdx_source_close(struct rdx_source *s);

/* Prepares to write path (NULL or "-": stdout).  For a regular or new file
 * this creates the temporary and preallocates size bytes when size_known;
 * its writes go around the page cache or through it as plan says
 * (core/direct.h; NULL: through it, unpaced), and with plan->fsync it is
 * synced before its rename, and its directory after.  A fifo without a reader is waited for up
 * to open_wait_ms, or until *interrupted (-EINTR).  Writes end with
 * -ECANCELED once *stop is set.  Returns 0 or -errno. */
int rdx_sink_open(struct rdx_sink **out, const char *path, bool size_known,
		  uint64_t size, const struct rdx_wplan *plan, const atomic_int *stop,
		  uint64_t open_wait_ms, const atomic_int *interrupted);

/* A new file base in the directory dir (any descriptor of it, O_PATH
 * too): its temporary is created there and published there by renameat(2),
 * so no name above it is looked up again.  size bytes are preallocated;
 * name is for messages; written as plan says (its fsync: the file, before
 * the rename).  Returns 0 or -errno. */
int rdx_sink_open_at(struct rdx_sink **out, int dir, const char *base, const char *name,
		     uint64_t size, const struct rdx_wplan *plan, const atomic_int *stop);

/* --resume: like rdx_sink_open() for a regular or new file, but the
 * temporary is ".NAME.rdx-part" beside it (the same name every time),
 * which outlives a failure, with its record ".NAME.rdx-part.meta" (one
 * line, "have BYTES").  *have: the bytes complete from the start by the
 * record, never more than the partial holds; 0 without a record.  Returns
 * 0 or -errno; -ENOTSUP when path is not a regular or new file (the caller
 * opens it with rdx_sink_open() instead). */
int rdx_sink_open_partial(struct rdx_sink **out, const char *path,
			  const struct rdx_wplan *plan, const atomic_int *stop, uint64_t *have);

/* Reads the partial's first len bytes (see rdx_source_read_prefix). */
int rdx_sink_read_prefix(struct rdx_sink *k, uint64_t len, rdx_prefix_fn fn, void *arg);

/* The data written from now on starts at byte start of the partial: what
 * it has past that is dropped, and the offsets given to rdx_sink_write()
 * and rdx_sink_flush() count from there.  size: the bytes still to come
 * (preallocated).  Returns 0 or -errno. */
int rdx_sink_start_at(struct rdx_sink *k, uint64_t start, uint64_t size);

/* Records that the partial's first have bytes are complete (rewrites the
 * record: a new file renamed over it).  Returns 0 or -errno; 0 for sinks
 * without a partial. */
int rdx_sink_mark(struct rdx_sink *k, uint64_t have);

/* A sink of rdx_sink_open() that made a new file: gives it mode (0777
 * bits) less the umask.  Nothing for an existing file or a stream.
 * Returns 0 or -errno. */
int rdx_sink_new_mode(struct rdx_sink *k, mode_t mode);

/* A stream sink writing into fd (a pipe to a consumer thread), which the
 * sink owns and closes; name is for messages.  Returns 0 or -ENOMEM. */
int rdx_sink_open_fd(struct rdx_sink **out, int fd, const char *name,
		     const atomic_int *stop);

/* A stream sink handing its bytes in order to write(arg, buf, len), which
 * returns 0 or -errno; rdx_sink_close() calls end(arg) once.  name is for
 * messages.  Returns 0 or -ENOMEM. */
int rdx_sink_open_cb(struct rdx_sink **out, const char *name,
		     int (*write)(void *arg, const void *buf, size_t len),
		     void (*end)(void *arg), void *arg);

/* True when writes at distinct offsets may run in parallel. */
bool rdx_sink_parallel(const struct rdx_sink *k);

/* Writes len bytes of buf (4 KiB-aligned) at plain offset off; stream
 * sinks require strictly sequential offsets.  Returns 0 or -errno. */
int rdx_sink_write(struct rdx_sink *k, const void *buf, size_t len,
		   uint64_t off);

/* Sets the final length and fsyncs when asked.  Returns 0 or -errno. */
int rdx_sink_flush(struct rdx_sink *k, uint64_t total);

/* Gives the temporary its final metadata once written (owner only when
 * chown is set; times[0] atime, times[1] mtime).  Returns 0 or -errno. */
int rdx_sink_set_meta(struct rdx_sink *k, mode_t mode, bool chown, uid_t uid,
		      gid_t gid, const struct timespec times[2]);

/* Renames the temporary to the final name (then fsyncs the directory when
 * asked; removes a partial's record); from here on rdx_sink_close() keeps
 * the file.  0 or -errno. */
int rdx_sink_publish(struct rdx_sink *k);

/* Removes the temporary (if any; a partial stays, see rdx_sink_mark) and
 * frees the sink.  Safe after commit. */
void rdx_sink_close(struct rdx_sink *k);

/* The name to use in messages about this sink. */
const char *rdx_sink_name(const struct rdx_sink *k);

/* Whether a file's writes from its start go around the page cache. */
bool rdx_sink_direct(struct rdx_sink *k);

#endif
