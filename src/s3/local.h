/* rds3's local side: hashing a file that goes up in one PutObject, and
 * landing what comes down in a file that gets its name only when
 * complete. */
#ifndef RDS3_LOCAL_H
#define RDS3_LOCAL_H

#include "core/direct.h"
#include "core/io.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct s3_body_sum;

/* Hashes the file fd from its start (MD5, and SHA-256 unless !sha: see
 * s3_body_sum_md5, into sum) and gives its size.  More than max bytes is
 * -EFBIG; stop set is -RDX_EINTR.  Returns 0 or -errno. */
int s3_local_hash(int fd, uint64_t max, const atomic_int *stop, uint64_t *size,
		  struct s3_body_sum *sum, bool sha);

/* A download target: "-" is stdout; a directory gets the key's last part
 * inside it; a file is written unnamed (O_TMPFILE) or as .NAME.rdx-XXXXXXXX
 * beside it (rdx_tmpfile) and given its name when complete, or for
 * --resume as .NAME.rdx-part, kept on failure, with its record
 * .NAME.rdx-part.meta: the object's ETag and size and how many bytes from
 * the start are complete. */
struct s3_out {
	int fd;
	int dfd;	  /* the same file through O_DIRECT, or -1 */
	struct rdx_wfile w; /* a file's writes, as its plan has them (s3_out_plan) */
	bool w_set;	  /* w initialised */
	bool uncached;	  /* written around the page cache: what little went
			     through it leaves it once synced */
	bool is_stdout;
	bool resume;
	const atomic_int *stop;
	int at;		  /* what tmp and final are relative to: AT_FDCWD, or
			     final's directory (owned) */
	bool staged;	  /* a new file, published from stage (not resume) */
	struct rdx_tmpfile stage;
	char tmp[4096];	  /* resume: the partial's path */
	char final[4096];
	char meta[4200];  /* resume: the record's path */
	char etag[128];	  /* resume: the record's ETag ("" none), size and */
	uint64_t size;	  /* bytes complete from the start, as read at open */
	uint64_t have;	  /* and then as last recorded */
};

/* Opens the target for dst (see above).  Returns 0 or -errno; on error
 * out->final names what could not be written and s3_out_abort() cleans. */
int s3_out_open(struct s3_out *o, const char *dst, const char *key,
		const atomic_int *stop);

/* Opens the file base in the directory dir (any descriptor of it):
 * its temporary is made there and renamed there, so nothing above base
 * is looked up again.  Returns 0 or -errno as s3_out_open. */
int s3_out_open_at(struct s3_out *o, int dir, const char *base, const atomic_int *stop);

/* Opens dst for --resume: the partial .NAME.rdx-part is created or
 * reopened as it is, its record read into etag, size and have (have is
 * cut to the partial's length; a record that cannot be read is none).
 * Returns 0 or -errno as s3_out_open. */
int s3_out_open_resume(struct s3_out *o, const char *dst, const char *key,
		       const atomic_int *stop);

/* Resume: the first have bytes of the partial are complete.  Syncs its
 * data, then replaces the record (etag, size, have) whole.  Nothing for
 * another target.  Returns 0 or -errno. */
int s3_out_mark(struct s3_out *o, uint64_t have);

/* Removes a resume partial and its record (its data is known bad); as
 * s3_out_abort otherwise. */
void s3_out_discard(struct s3_out *o);

/* Sink callbacks: write all of p (-errno, -RDX_EINTR when stopped), and
 * start over empty for a retry. */
int s3_out_write(void *o, const void *p, size_t n);
int s3_out_rewind(void *o);

/* Writes len bytes of buf at off of the file (not stdout) from any
 * thread: through O_DIRECT where the plan has it and buf, len and off are
 * 4 KiB-aligned and the file system takes it, else through the page
 * cache (paced, where the plan says).  Returns 0 or -errno. */
int s3_out_pwrite(struct s3_out *o, const void *buf, size_t len, uint64_t off);

/* The page-cache policy of the file's writes from now on (until then:
 * through the cache, unpaced).  A plan with any O_DIRECT also has what
 * went through the cache dropped from it once synced (s3_out_publish).
 * Nothing for stdout. */
void s3_out_plan(struct s3_out *o, const struct rdx_wplan *p);

/* Whether s3_out_pwrite() bypasses the page cache (from the start). */
bool s3_out_direct(struct s3_out *o);

/* Reserves the object's size in the file (see rdx_prealloc).  Returns 0
 * or -errno. */
int s3_out_reserve(struct s3_out *o, uint64_t size);

/* Syncs, closes and renames the temporary to the final name (and removes
 * a resume record). */
int s3_out_publish(struct s3_out *o);

/* Closes and removes the temporary (nothing for stdout); a resume
 * partial and its record stay for the next --resume. */
void s3_out_abort(struct s3_out *o);

/* The part of path after its last '/'. */
const char *s3_last_part(const char *path);

#endif
