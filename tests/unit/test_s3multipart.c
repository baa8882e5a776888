/* The pieces of rds3's large-object support that need no server: the
 * multipart result fields, Content-Range parsing (every length from the
 * server is checked) and the part size for S3's 10000-part limit. */
#include "core/err.h"
#include "s3/http.h"
#include "s3/multipart.h"
#include "s3/xml.h"
#include "tap.h"

#include <errno.h>
#include <string.h>

#define NS  "xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\""
#define MIB ((uint64_t)1 << 20)

static int field(const char *xml, const char *root, const char *name, char *out,
		 size_t len)
{
	return s3_xml_field(xml, strlen(xml), root, name, out, len);
}

static void test_fields(void)
{
	char v[64], tiny[7];
	const char *init = "<?xml "
			   "version=\"1.0\"?><InitiateMultipartUploadResult " NS
			   "><Bucket>b</Bucket><Key>k</Key><UploadId>abc-123</"
			   "UploadId>"
			   "</InitiateMultipartUploadResult>";
	const char *done = "<CompleteMultipartUploadResult " NS "><Location>x</"
								"Location>"
			   "<ETag>&quot;3858f62230ac3c915f300c664312c11f-9&"
			   "quot;</ETag>"
			   "</CompleteMultipartUploadResult>";
	const char *err = "<Error><Code>InternalError</Code><Message>m</"
			  "Message></Error>";
	const char *nested = "<CompleteMultipartUploadResult><X><ETag>no</"
			     "ETag></X>"
			     "</CompleteMultipartUploadResult>";

	CHECK(field(init, "InitiateMultipartUploadResult", "UploadId", v,
		    sizeof(v)) == 0 &&
		      !strcmp(v, "abc-123"),
	      "InitiateMultipartUploadResult: UploadId");
	CHECK(field(done, "CompleteMultipartUploadResult", "ETag", v,
		    sizeof(v)) == 0 &&
		      !strcmp(v, "\"3858f62230ac3c915f300c664312c11f-9\""),
	      "CompleteMultipartUploadResult: ETag, entities decoded");
	CHECK(field(err, "CompleteMultipartUploadResult", "ETag", v,
		    sizeof(v)) == -RDX_EPROTO,
	      "an Error document (a 200 that failed late) is not a result");
	CHECK(field(nested, "CompleteMultipartUploadResult", "ETag", v,
		    sizeof(v)) == -RDX_EPROTO,
	      "the field must be a child of the root, not deeper");
	CHECK(field(init, "InitiateMultipartUploadResult", "UploadId", tiny,
		    sizeof(tiny)) == -E2BIG,
	      "a value that does not fit is refused, not cut");
	CHECK(field("<InitiateMultipartUploadResult><UploadId>a",
		    "InitiateMultipartUploadResult", "UploadId", v,
		    sizeof(v)) == -RDX_EPROTO,
	      "a truncated document is refused");
}

static void test_content_range(void)
{
	uint64_t a = 0, b = 0, t = 0;

	CHECK(s3_http_content_range("bytes 0-5242879/16777216", &a, &b, &t) ==
			      0 &&
		      a == 0 && b == 5242879 && t == 16777216,
	      "bytes A-B/T");
	CHECK(s3_http_content_range("bytes 5-5/6", &a, &b, &t) == 0 && a == 5 &&
		      b == 5 && t == 6,
	      "the last byte alone");
	CHECK(s3_http_content_range("bytes 0-0/0", &a, &b, &t) == -RDX_EPROTO,
	      "a range of an empty object is impossible");
	CHECK(s3_http_content_range("bytes 7-3/10", &a, &b, &t) == -RDX_EPROTO,
	      "end before start");
	CHECK(s3_http_content_range("bytes 0-10/10", &a, &b, &t) == -RDX_EPROTO,
	      "end past the size");
	CHECK(s3_http_content_range("bytes 0-1/*", &a, &b, &t) == -RDX_EPROTO,
	      "an unknown size is refused");
	CHECK(s3_http_content_range("bytes */10", &a, &b, &t) == -RDX_EPROTO,
	      "a 416's form is refused");
	CHECK(s3_http_content_range("bytes 0-1/10 ", &a, &b, &t) ==
			      -RDX_EPROTO &&
		      s3_http_content_range("items 0-1/10", &a, &b, &t) ==
			      -RDX_EPROTO &&
		      s3_http_content_range("bytes -1-1/10", &a, &b, &t) ==
			      -RDX_EPROTO,
	      "trailing bytes, another unit, a sign: refused");
	CHECK(s3_http_content_range("bytes 0-1/99999999999999999999", &a, &b,
				    &t) == -RDX_EPROTO,
	      "a size past 64 bits is refused");
}

static void test_part_size(void)
{
	uint64_t ps = 0;

	CHECK(s3_part_size_for(16 * MIB, 8 * MIB, &ps) == 0 && ps == 8 * MIB,
	      "a small file keeps 8 MiB");
	CHECK(s3_part_size_for(10000 * 8 * MIB, 8 * MIB, &ps) == 0 &&
		      ps == 8 * MIB,
	      "exactly 10000 parts keeps the size");
	CHECK(s3_part_size_for(10000 * 8 * MIB + 1, 8 * MIB, &ps) == 0 &&
		      ps == 9 * MIB,
	      "one byte more grows it to a whole MiB");
	CHECK(s3_part_size_for(S3_OBJECT_MAX, 8 * MIB, &ps) == 0 &&
		      ps <= S3_PART_MAX &&
		      (S3_OBJECT_MAX + ps - 1) / ps <= S3_PARTS_MAX,
	      "5 TiB fits in 10000 parts of at most 5 GiB");
	CHECK(s3_part_size_for(S3_OBJECT_MAX + 1, 8 * MIB, &ps) == -EFBIG,
	      "past 5 TiB is refused");
}

int main(void)
{
	test_fields();
	test_content_range();
	test_part_size();
	return TAP_DONE();
}
