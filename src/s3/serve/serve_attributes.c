/* rds3 serve: GetObjectAttributes (GET /BUCKET/KEY?attributes), what a
 * client asks of an object without its bytes: the attributes
 * x-amz-object-attributes names of ETag, Checksum (the one kept with it:
 * sv_meta), ObjectParts (a multipart object's parts, paged by
 * x-amz-max-parts and x-amz-part-number-marker, with their sizes and
 * checksums where they were kept: sv_parts_get), StorageClass and
 * ObjectSize. */
#include "s3/serve/serve_ops.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

enum {
	ATTR_ETAG = 1 << 0,
	ATTR_CHECKSUM = 1 << 1,
	ATTR_PARTS = 1 << 2,
	ATTR_CLASS = 1 << 3,
	ATTR_SIZE = 1 << 4,
};

#define MAX_PARTS_SHOWN 1000 /* S3's default and largest x-amz-max-parts */

/* x-amz-object-attributes: names separated by commas (and spaces), into
 * *want.  Returns 0, or -EINVAL for a name S3 does not have. */
static int attrs_parse(const char *v, unsigned *want)
{
	static const struct {
		const char *name;
		unsigned bit;
	} names[] = {
		{ "ETag", ATTR_ETAG },		{ "Checksum", ATTR_CHECKSUM },
		{ "ObjectParts", ATTR_PARTS },	{ "StorageClass", ATTR_CLASS },
		{ "ObjectSize", ATTR_SIZE },
	};

	*want = 0;
	while (*v) {
		size_t len, i;

		v += strspn(v, ", \t");
		len = strcspn(v, ", \t");
		if (!len)
			break;
		for (i = 0; i < sizeof(names) / sizeof(names[0]); i++)
			if (strlen(names[i].name) == len && !strncasecmp(v, names[i].name, len))
				break;
		if (i == sizeof(names) / sizeof(names[0]))
			return -EINVAL;
		*want |= names[i].bit;
		v += len;
	}
	return *want ? 0 : -EINVAL;
}

/* <ObjectParts> of the multipart object fd (record m), from part
 * after + 1, at most max.  Where the parts' sizes were not kept (a file
 * system without room for them) only their count is known, and given. */
static void parts_xml(struct s3_buf *b, int fd, const struct sv_meta *m, unsigned long after,
		      unsigned long max)
{
	struct sv_part_info *v = NULL;
	unsigned long i, last = after;
	bool truncated = false;

	s3_buf_printf(b, "<ObjectParts><PartsCount>%u</PartsCount>", m->parts);
	if (sv_parts_get(fd, m, &v)) {
		s3_buf_printf(b, "</ObjectParts>");
		return;
	}
	s3_buf_printf(b, "<PartNumberMarker>%lu</PartNumberMarker><MaxParts>%lu</MaxParts>", after,
		      max);
	for (i = after; i < m->parts; i++) {
		if (i - after == max) {
			truncated = true;
			break;
		}
		s3_buf_printf(b, "<Part><PartNumber>%lu</PartNumber><Size>%" PRIu64 "</Size>", i + 1,
			      v[i].size);
		if (m->ck != S3_CK_NONE) {
			char b64[48];

			s3_cksum_b64(v[i].sum, s3_cksum_len(m->ck), b64);
			s3_buf_printf(b, "<Checksum%s>%s</Checksum%s>", s3_cksum_name(m->ck), b64,
				      s3_cksum_name(m->ck));
		}
		s3_buf_printf(b, "</Part>");
		last = i + 1;
	}
	s3_buf_printf(b, "<NextPartNumberMarker>%lu</NextPartNumberMarker><IsTruncated>%s</IsTruncated></ObjectParts>",
		      last, truncated ? "true" : "false");
	free(v);
}

int sv_object_attributes(struct call *k)
{
	const char *names = sv_hdr(k->r, "x-amz-object-attributes");
	unsigned long max, after;
	unsigned want;
	struct sv_meta m;
	struct s3_buf b, h;
	time_t mtime;
	char date[40];
	int bfd, fd, ret;

	if (!names || attrs_parse(names, &want))
		return sv_fail(k, 400, "InvalidArgument",
			       names ? "Invalid attribute name specified."
				     : "The x-amz-object-attributes header specifying the attributes to be retrieved is either missing or empty");
	if (sv_count(sv_hdr(k->r, "x-amz-max-parts"), MAX_PARTS_SHOWN, MAX_PARTS_SHOWN, &max))
		return sv_fail(k, 400, "InvalidArgument", "x-amz-max-parts must be a number of 0 or more");
	if (sv_count(sv_hdr(k->r, "x-amz-part-number-marker"), 0, SV_PARTS_MAX, &after))
		return sv_fail(k, 400, "InvalidArgument", "x-amz-part-number-marker must be a part number");
	if ((ret = sv_bucket_fd(k, &bfd)) || bfd < 0)
		return ret;
	fd = sv_key_open(bfd, k->key, &m, &mtime); /* an object or a folder marker */
	close(bfd);
	if (fd < 0)
		return sv_fail_errno(k, fd == -ENOENT ? fd : -EIO);
	sv_meta_release(&m); /* its headers; the rest stays */
	s3_buf_init(&b, 0);
	s3_buf_printf(&b, XML_HEAD "<GetObjectAttributesResponse xmlns=\"" XMLNS "\">");
	if (want & ATTR_ETAG)
		s3_buf_printf(&b, "<ETag>%s</ETag>", m.etag);
	if ((want & ATTR_CHECKSUM) && m.ck != S3_CK_NONE) {
		s3_buf_adds(&b, "<Checksum>");
		sv_checksum_xml(&b, &m);
		s3_buf_adds(&b, "</Checksum>");
	}
	if ((want & ATTR_PARTS) && m.parts)
		parts_xml(&b, fd, &m, after, max);
	if (want & ATTR_CLASS)
		s3_buf_printf(&b, "<StorageClass>STANDARD</StorageClass>");
	if (want & ATTR_SIZE)
		s3_buf_printf(&b, "<ObjectSize>%" PRIu64 "</ObjectSize>", m.size);
	s3_buf_printf(&b, "</GetObjectAttributesResponse>");
	close(fd);
	s3_buf_init(&h, 0);
	sv_http_date(mtime, date);
	s3_buf_printf(&h, "Content-Type: application/xml\r\nLast-Modified: %s\r\n", date);
	ret = s3_buf_err(&b) || s3_buf_err(&h) ? -ENOMEM : sv_answer(k, 200, h.p, b.p, b.len);
	s3_buf_release(&h);
	s3_buf_release(&b);
	return ret;
}
