/* rds3 sync and cp --recursive: one walker, one mapping and one worker
 * pool for both.  A local directory maps to an S3 prefix name by name
 * (DIR/a/b <-> s3://BUCKET/PREFIX/a/b); sync transfers only what differs,
 * cp -r everything.
 *
 *   list both sides (local walk, ListObjectsV2 pages), sorted by name
 *   plan:  source only -> transfer; both -> transfer, skip, or "check"
 *          (the worker decides: HEAD for x-amz-meta-mtime, or MD5 vs ETag);
 *          destination only -> delete (with --delete)
 *   run:   deletes, then transfers, on --jobs workers (own client each);
 *          a failed object is named and the rest go on
 *
 * What "the same" means (sync):
 *   upload    sizes equal and the file's mtime is not newer than the
 *             object's LastModified, and the object's x-amz-meta-mtime,
 *             when it has one, equals the file's mtime (whole seconds)
 *   download  sizes equal and the file's mtime equals the object's
 *             x-amz-meta-mtime when it has one, else is not older than
 *             its LastModified (downloads set the file's mtime so)
 *   copy      sizes equal and the destination is not older than the source
 *   --checksum: sizes equal and the content's MD5 (or multipart ETag)
 *             equals the ETag.
 * Uploads store the file's mtime (decimal seconds) as x-amz-meta-mtime. */
#ifndef RDS3_SYNC_H
#define RDS3_SYNC_H

#include "s3/multipart.h"
#include "s3/walk.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

/* One side: a local directory, or s3://bucket/prefix. */
struct s3_loc {
	bool is_s3;
	const char *dir;    /* local: as given, without a trailing '/' */
	const char *bucket; /* S3 */
	const char *prefix; /* S3: "" or ending in '/' */
};

struct s3_sync_opts {
	const struct s3_client_opts *client; /* the workers' clients' */
	const struct s3_xfer_opts *xfer;     /* objects over one part */
	unsigned jobs; /* objects at once, 1..S3_JOBS_MAX */
	bool copy_all; /* cp -r: no comparison */
	bool del;      /* --delete */
	bool dry_run;  /* print "(dryrun) ..." lines on stdout */
	bool checksum; /* --checksum */
	const struct rdx_rule *rules;
	size_t nrules;
	const atomic_int *stop;
};

struct s3_sync_stats {
	size_t transferred, deleted, unchanged;
	size_t failed;	/* objects or files that failed, each named on stderr */
	size_t refused; /* keys with no safe local name, each warned about */
};

/* Copies or syncs src to dst (not both local).  Per-object failures are
 * printed and counted, and the run goes on; so are refused keys (a
 * warning each, st->refused).  Returns 0 when no object failed (refused
 * keys aside), the first failure's code (-RDX_*, -errno) when one did,
 * or a listing's or the local walk's error, printed, when nothing could
 * be planned. */
int s3_sync(struct s3_client *c, const struct s3_sync_opts *o,
	    const struct s3_loc *src, const struct s3_loc *dst,
	    struct s3_sync_stats *st);

/* Whether the file fd (size bytes, read with pread) has this ETag
 * (quotes or not): a plain one is its MD5; "MD5S-N" is a multipart
 * upload's, tried with the part size rds3 would have used (part_size,
 * grown to fit 10000 parts) and with the smallest whole MiB that makes N
 * parts (other tools' usual choice).  Any other ETag (SSE-KMS, SSE-C)
 * never matches, so such objects are always sent.  Returns 0 (*same
 * set), -errno, -ENODATA (the file is shorter than size) or -RDX_EINTR. */
int s3_sync_etag_match(int fd, uint64_t size, const char *etag,
		       uint64_t part_size, const atomic_int *stop, bool *same);

#endif
