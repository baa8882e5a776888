/* libFuzzer target: every S3 XML document rds3 reads (Error, ListBuckets,
 * ListObjectsV2, the multipart results, DeleteResult) and rds3 serve
 * (CompleteMultipartUpload) comes from the network.  Beyond
 * "no crash, no out-of-bounds, no leak" (ASan), checks the parsers'
 * promises: a failure leaves no partial list or field, entries always have
 * a name, and the Code fits its buffer with a NUL. */
#include "fuzz.h"
#include "core/err.h"
#include "s3/xml.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *xml = (const char *)data;
	struct s3_list l = { 0 };
	char code[16], msg[32];
	size_t i;
	int ret;

	ret = s3_xml_error(xml, size, code, sizeof(code), msg, sizeof(msg));
	CHECK(strlen(code) < sizeof(code) && strlen(msg) < sizeof(msg));
	CHECK(ret || code[0]);

	ret = s3_xml_list_objects(xml, size, &l);
	CHECK(!ret || l.n == 0);
	for (i = 0; i < l.n; i++)
		CHECK(l.v[i].name != NULL);
	CHECK(!l.truncated || !ret);
	s3_list_release(&l);

	ret = s3_xml_list_buckets(xml, size, &l);
	CHECK(!ret || l.n == 0);
	for (i = 0; i < l.n; i++)
		CHECK(l.v[i].name != NULL);
	s3_list_release(&l);

	{
		size_t deleted = 0;

		ret = s3_xml_delete_result(xml, size, &l, &deleted);
		CHECK(!ret || (l.n == 0 && deleted == 0));
		for (i = 0; i < l.n; i++)
			CHECK(l.v[i].name != NULL);
		s3_list_release(&l);
	}

	/* rds3 serve's: a CompleteMultipartUpload request, a part's checksum
	 * always with its algorithm. */
	ret = s3_xml_complete_request(xml, size, &l);
	CHECK(!ret || l.n == 0);
	for (i = 0; i < l.n; i++)
		CHECK(l.v[i].name != NULL && l.v[i].size && !l.v[i].etag == !l.v[i].mtime);
	s3_list_release(&l);

	ret = s3_xml_field(xml, size, "InitiateMultipartUploadResult", "UploadId", msg,
			   sizeof(msg));
	CHECK(strlen(msg) < sizeof(msg) && (!ret || !msg[0]));
	ret = s3_xml_field(xml, size, "CompleteMultipartUploadResult", "ETag", code,
			   sizeof(code));
	CHECK(strlen(code) < sizeof(code) && (!ret || !code[0]));
	return 0;
}
