/* rds3 get --resume: a download into a partial that outlives a failure
 * (see local.h), continued from its record:
 *
 *   HEAD                                   -> size, ETag now
 *   record's ETag and size the same        -> keep its first `have` bytes
 *   else (or no record)                    -> start over (said when changed)
 *   GET Range: bytes=have-..., If-Match: ETag, the rest as s3_download
 *   read the whole partial back for a plain-MD5 ETag, then rename
 *
 * The record is rewritten (after an fdatasync of the data) each time the
 * bytes complete from the start grow; ranges finish out of order, so the
 * partial's length alone proves nothing and is cut back to the record. */
#include "s3/multipart.h"
#include "s3/multipart_int.h"

#include "core/err.h"
#include "core/log.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int s3_download_resume(struct s3_client *c, const struct s3_xfer_opts *o,
		       const char *bucket, const char *key, struct s3_out *out,
		       struct s3_object_info *info)
{
	struct s3_object_info now;
	uint64_t have = 0;
	int ret;

	if (!out->resume || out->is_stdout)
		return -EINVAL;
	ret = s3_head_object(c, bucket, key, &now);
	if (ret)
		return ret;
	if (out->etag[0] && (strcmp(out->etag, now.etag) || out->size != now.size))
		rdx_warn("get s3://%s/%s: the object changed since the partial download (ETag %s, %" PRIu64
			 " bytes; was %s, %" PRIu64 "): starting over",
			 bucket, key, now.etag[0] ? now.etag : "none", now.size,
			 out->etag, out->size);
	else if (out->etag[0] && now.etag[0])
		have = out->have;
	else if (out->have || lseek(out->fd, 0, SEEK_END) > 0)
		rdx_info(1, "get s3://%s/%s: the partial has no usable record: starting over",
			 bucket, key);
	if (ftruncate(out->fd, (off_t)have))
		return -errno;
	snprintf(out->etag, sizeof(out->etag), "%s", now.etag);
	out->size = now.size;
	if ((ret = s3_out_mark(out, have)))
		return ret;
	if (have && have == now.size) {
		rdx_info(1, "get s3://%s/%s: all %" PRIu64 " bytes were in already", bucket,
			 key, have);
		if (info)
			*info = now;
		return s3_download_verify(c, o, bucket, key, out, NULL, NULL, false, &now);
	}
	if (have)
		rdx_info(1, "get s3://%s/%s: resuming at byte %" PRIu64 " of %" PRIu64,
			 bucket, key, have, now.size);
	return s3_download_at(c, o, bucket, key, out, have,
			      now.etag[0] ? now.etag : NULL, info);
}
