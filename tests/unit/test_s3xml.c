/* The S3 XML parsers on real documents and on hostile ones: not well
 * formed, DTDs and entity bombs, deep nesting, oversized text, bad
 * numbers, wrong roots.  A failure leaves no partial result. */
#include "core/err.h"
#include "s3/s3.h"
#include "s3/xml.h"
#include "tap.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define NS "xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\""

static int list(const char *xml, struct s3_list *l)
{
	return s3_xml_list_objects(xml, strlen(xml), l);
}

static void test_error(void)
{
	char code[64], msg[128], small[8];
	const char *doc = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>NoSuchKey</Code>"
			  "<Message>The specified key does not exist.</Message><Key>a &amp; b</Key>"
			  "<RequestId>X</RequestId></Error>";

	CHECK(s3_xml_error(doc, strlen(doc), code, sizeof(code), msg, sizeof(msg)) == 0 &&
		      !strcmp(code, "NoSuchKey") &&
		      !strcmp(msg, "The specified key does not exist."),
	      "Error: Code and Message");
	CHECK(s3_xml_error(doc, strlen(doc), small, sizeof(small), msg, sizeof(msg)) == 0 &&
		      !strcmp(small, "NoSuchK"),
	      "Error: a long Code is truncated to the buffer");
	/* What XML lets a hostile server send toward the terminal: carriage
	 * returns and C1 controls (CSI, U+009B, opens an escape sequence),
	 * raw or as references (XML refuses ESC itself). */
	doc = "<Error><Code>Evil&#x9b;2J</Code><Message>fake&#13;rds3: ok\xc2\x9b" "31m</Message></Error>";
	CHECK(s3_xml_error(doc, strlen(doc), code, sizeof(code), msg, sizeof(msg)) == 0 &&
		      !strcmp(code, "Evil?2J") && !strcmp(msg, "fake?rds3: ok?31m"),
	      "Error: CR and C1 in Code and Message become '?': %s / %s", code, msg);
	doc = "<html><body>502 Bad Gateway</body></html>";
	CHECK(s3_xml_error(doc, strlen(doc), code, sizeof(code), msg, sizeof(msg)) == -RDX_EPROTO,
	      "an HTML page is not an Error document");
	doc = "<Error><Message>m</Message></Error>";
	CHECK(s3_xml_error(doc, strlen(doc), code, sizeof(code), msg, sizeof(msg)) == -RDX_EPROTO,
	      "an Error without a Code is refused");
	doc = "<Error><Code>X</Code>";
	CHECK(s3_xml_error(doc, strlen(doc), code, sizeof(code), msg, sizeof(msg)) == -RDX_EPROTO,
	      "a truncated document is refused");
	CHECK(s3_xml_error("", 0, code, sizeof(code), msg, sizeof(msg)) == -RDX_EPROTO,
	      "an empty body is refused");
}

static void test_list(void)
{
	struct s3_list l = { 0 };
	const char *doc =
		"<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<ListBucketResult " NS ">"
		"<Name>b</Name><Prefix></Prefix><KeyCount>3</KeyCount><MaxKeys>2</MaxKeys>"
		"<IsTruncated>true</IsTruncated>"
		"<NextContinuationToken>tok/+=</NextContinuationToken>"
		"<Contents><Key>a &lt;&amp;&gt; b</Key><LastModified>2024-01-02T03:04:05.000Z</LastModified>"
		"<ETag>&quot;abc&quot;</ETag><Size>18446744073709551615</Size><StorageClass>STANDARD</StorageClass></Contents>"
		"<Contents><Key>\xc3\xbc/x</Key><Size>0</Size></Contents>"
		"<CommonPrefixes><Prefix>d/</Prefix></CommonPrefixes></ListBucketResult>";

	CHECK(list(doc, &l) == 0 && l.n == 3, "ListObjectsV2: two keys, one prefix");
	CHECK(l.n == 3 && !strcmp(l.v[0].name, "a <&> b") && l.v[0].size == UINT64_MAX &&
		      !strcmp(l.v[0].etag, "\"abc\"") &&
		      !strcmp(l.v[0].mtime, "2024-01-02T03:04:05.000Z"),
	      "entities decoded, a 64-bit size, the ETag's quotes kept");
	CHECK(l.n == 3 && !strcmp(l.v[1].name, "\xc3\xbc/x") && !l.v[1].is_prefix,
	      "a UTF-8 key");
	CHECK(l.n == 3 && l.v[2].is_prefix && !strcmp(l.v[2].name, "d/"), "a common prefix");
	CHECK(l.truncated && l.next_token && !strcmp(l.next_token, "tok/+="),
	      "IsTruncated and the continuation token");
	s3_list_release(&l);

	CHECK(list("<ListBucketResult><Contents><Key>k</Key><Size>12x</Size></Contents></ListBucketResult>",
		   &l) == -RDX_EPROTO && l.n == 0,
	      "a Size that is not a number is refused, nothing kept");
	CHECK(list("<ListBucketResult><Contents><Key>k</Key><Size>18446744073709551616</Size></Contents></ListBucketResult>",
		   &l) == -RDX_EPROTO,
	      "a Size past 2^64-1 is refused");
	CHECK(list("<ListBucketResult><Contents><Size>1</Size></Contents></ListBucketResult>", &l) ==
		      -RDX_EPROTO,
	      "an entry without a Key is refused");
	CHECK(list("<ListAllMyBucketsResult/>", &l) == -RDX_EPROTO, "the wrong root is refused");
	CHECK(list("<ListBucketResult><IsTruncated>true</IsTruncated><NextContinuationToken>t"
		   "</NextContinuationToken><Contents><Key>k</Key></Contents>", &l) == -RDX_EPROTO &&
		      l.n == 0 && !l.truncated && !l.next_token,
	      "a cut-off listing yields nothing, not a partial list nor a next page");
	s3_list_release(&l);

	doc = "<ListAllMyBucketsResult " NS "><Owner><ID>o</ID></Owner><Buckets>"
	      "<Bucket><Name>one</Name><CreationDate>2024-01-01T00:00:00.000Z</CreationDate></Bucket>"
	      "<Bucket><Name>two</Name><CreationDate>x</CreationDate></Bucket></Buckets>"
	      "</ListAllMyBucketsResult>";
	CHECK(s3_xml_list_buckets(doc, strlen(doc), &l) == 0 && l.n == 2 &&
		      !strcmp(l.v[1].name, "two") && !strcmp(l.v[0].mtime, "2024-01-01T00:00:00.000Z"),
	      "ListBuckets: names and dates");
	s3_list_release(&l);
}

static void test_hostile(void)
{
	struct s3_list l = { 0 };
	char code[64], msg[64];
	const char *bomb =
		"<?xml version=\"1.0\"?><!DOCTYPE r [<!ENTITY a \"aaaaaaaaaa\">"
		"<!ENTITY b \"&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;\"><!ENTITY c \"&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;\">]>"
		"<Error><Code>&c;</Code></Error>";
	const char *ext = "<?xml version=\"1.0\"?><!DOCTYPE r [<!ENTITY x SYSTEM \"file:///etc/passwd\">]>"
			  "<Error><Code>&x;</Code></Error>";
	char *deep, *big;
	size_t i, n;


	CHECK(s3_xml_error(bomb, strlen(bomb), code, sizeof(code), msg, sizeof(msg)) == -RDX_EPROTO,
	      "a DOCTYPE with entities is refused (no entity expansion)");
	CHECK(s3_xml_error(ext, strlen(ext), code, sizeof(code), msg, sizeof(msg)) == -RDX_EPROTO &&
		      !strstr(code, "root"),
	      "an external entity is refused, never read");

	deep = malloc(200 * 7 + 64);
	strcpy(deep, "<ListBucketResult>");
	for (i = 0; i < 200; i++)
		strcat(deep, "<a>");
	for (i = 0; i < 200; i++)
		strcat(deep, "</a>");
	strcat(deep, "</ListBucketResult>");
	CHECK(list(deep, &l) == -RDX_EPROTO, "nesting past the depth bound is refused");
	free(deep);

	n = S3_XML_MAX_TEXT + 100;
	big = malloc(n + 128);
	strcpy(big, "<ListBucketResult><Contents><Key>");
	memset(big + strlen(big), 'k', n);
	big[33 + n] = '\0';
	strcat(big, "</Key><Size>1</Size></Contents></ListBucketResult>");
	CHECK(list(big, &l) == -E2BIG && l.n == 0, "a key past %d bytes of text is refused",
	      S3_XML_MAX_TEXT);
	free(big);

	CHECK(list("<ListBucketResult>\xff\xfe</ListBucketResult>", &l) == -RDX_EPROTO,
	      "invalid UTF-8 is refused");
	CHECK(list("<ListBucketResult><Contents><Key>a\0b</Key></Contents></ListBucketResult>", &l) ==
		      -RDX_EPROTO,
	      "a document cut by a NUL is refused");
	s3_list_release(&l);
}

/* DeleteObjects: the request body rds3 builds (keys escaped, CR/LF/tab
 * as references so a parser cannot fold them, what XML cannot carry
 * refused, 1..1000 keys) and the DeleteResult it reads. */
static void test_delete(void)
{
	const char *keys[] = { "a&b<c>\"d'", "t\tl\nc\r", "\xc3\xbc/x" };
	const char *bad[] = { "ok", "ctl\x01" }, *empty[] = { "" };
	const char **many;
	struct s3_list l = { 0 };
	struct s3_buf b;
	size_t deleted = 7, i;
	const char *doc;

	s3_buf_init(&b, 0);
	CHECK(s3_delete_xml(&b, keys, 3) == 0 &&
		      !strcmp(s3_buf_str(&b),
			      "<Delete " NS "><Quiet>true</Quiet>"
			      "<Object><Key>a&amp;b&lt;c&gt;\"d'</Key></Object>"
			      "<Object><Key>t&#9;l&#10;c&#13;</Key></Object>"
			      "<Object><Key>\xc3\xbc/x</Key></Object></Delete>"),
	      "Delete: keys escaped, tab/LF/CR as references");
	s3_buf_reset(&b);
	CHECK(s3_delete_xml(&b, bad, 2) == -EINVAL && !s3_delete_key_ok(bad[1]),
	      "a key with a control character XML cannot carry is refused");
	CHECK(s3_delete_xml(&b, empty, 1) == -EINVAL, "an empty key is refused");
	CHECK(s3_delete_xml(&b, keys, 0) == -EINVAL, "no keys is refused");
	many = calloc(S3_DELETE_MAX + 1, sizeof(*many));
	for (i = 0; many && i <= S3_DELETE_MAX; i++)
		many[i] = "k";
	s3_buf_reset(&b);
	CHECK(many && s3_delete_xml(&b, many, S3_DELETE_MAX + 1) == -EINVAL,
	      "more than %d keys is refused", S3_DELETE_MAX);
	s3_buf_reset(&b);
	CHECK(many && s3_delete_xml(&b, many, S3_DELETE_MAX) == 0, "%d keys are one request",
	      S3_DELETE_MAX);
	free(many);
	s3_buf_release(&b);

	doc = "<DeleteResult " NS "><Deleted><Key>a</Key></Deleted>"
	      "<Error><Key>b &amp; c</Key><Code>AccessDenied</Code><Message>Access Denied</Message></Error>"
	      "<Deleted><Key>d</Key></Deleted></DeleteResult>";
	CHECK(s3_xml_delete_result(doc, strlen(doc), &l, &deleted) == 0 && deleted == 2 &&
		      l.n == 1 && !strcmp(l.v[0].name, "b & c") &&
		      !strcmp(l.v[0].etag, "AccessDenied") && !strcmp(l.v[0].mtime, "Access Denied"),
	      "DeleteResult: two deleted, one error with Key, Code, Message");
	doc = "<DeleteResult " NS "><Error><Key>x</Key></Error><Error><Code>C</Code></Error></DeleteResult>";
	CHECK(s3_xml_delete_result(doc, strlen(doc), &l, &deleted) == -RDX_EPROTO && l.n == 1 &&
		      deleted == 0,
	      "an Error without a Key is refused, no partial result");
	doc = "<Error><Code>InternalError</Code></Error>";
	CHECK(s3_xml_delete_result(doc, strlen(doc), &l, &deleted) == -RDX_EPROTO && l.n == 1,
	      "an Error document is not a DeleteResult");
	doc = "<DeleteResult " NS "/>";
	CHECK(s3_xml_delete_result(doc, strlen(doc), &l, &deleted) == 0 && deleted == 0 && l.n == 1,
	      "an empty (quiet) DeleteResult");
	s3_list_release(&l);
}

/* What rds3 serve reads from clients. */
static void test_requests(void)
{
	struct s3_list l = { 0 };
	bool quiet = true;
	const char *doc;

	doc = "<CompleteMultipartUpload " NS "><Part><ETag>\"aa\"</ETag><PartNumber>1</PartNumber></Part>"
	      "<Part><PartNumber>2</PartNumber><ETag>bb</ETag></Part></CompleteMultipartUpload>";
	CHECK(s3_xml_complete_request(doc, strlen(doc), &l) == 0 && l.n == 2 &&
		      !strcmp(l.v[0].name, "\"aa\"") && l.v[0].size == 1 &&
		      !strcmp(l.v[1].name, "bb") && l.v[1].size == 2,
	      "Complete: each Part's ETag and PartNumber, in either order");
	s3_list_release(&l);
	doc = "<CompleteMultipartUpload><Part><ETag>aa</ETag><ChecksumSHA256>c2hh</ChecksumSHA256>"
	      "<PartNumber>1</PartNumber></Part><Part><ETag>bb</ETag><PartNumber>2</PartNumber></Part>"
	      "</CompleteMultipartUpload>";
	CHECK(s3_xml_complete_request(doc, strlen(doc), &l) == 0 && l.n == 2 && l.v[0].etag &&
		      !strcmp(l.v[0].etag, "c2hh") && !strcmp(l.v[0].mtime, "SHA256") && !l.v[1].etag,
	      "Complete: a Part's checksum and its algorithm");
	s3_list_release(&l);
	doc = "<CompleteMultipartUpload><Part><ETag>aa</ETag><ChecksumCRC32>x</ChecksumCRC32>"
	      "<ChecksumSHA1>y</ChecksumSHA1><PartNumber>1</PartNumber></Part></CompleteMultipartUpload>";
	CHECK(s3_xml_complete_request(doc, strlen(doc), &l) == -RDX_EPROTO && l.n == 0,
	      "Complete: two checksums in one Part are refused");
	doc = "<CompleteMultipartUpload><Part><ETag>aa</ETag></Part></CompleteMultipartUpload>";
	CHECK(s3_xml_complete_request(doc, strlen(doc), &l) == -RDX_EPROTO && l.n == 0,
	      "Complete: a Part without a PartNumber is refused");
	doc = "<CompleteMultipartUpload><Part><ETag>aa</ETag><PartNumber>-1</PartNumber></Part></CompleteMultipartUpload>";
	CHECK(s3_xml_complete_request(doc, strlen(doc), &l) == -RDX_EPROTO && l.n == 0,
	      "Complete: a PartNumber that is not a number is refused");
	doc = "<Delete " NS "><Quiet>true</Quiet><Object><Key>a &amp; b</Key></Object>"
	      "<Object><Key>c/d</Key><VersionId>x</VersionId></Object></Delete>";
	CHECK(s3_xml_delete_request(doc, strlen(doc), &l, &quiet) == 0 && quiet && l.n == 2 &&
		      !strcmp(l.v[0].name, "a & b") && !strcmp(l.v[1].name, "c/d"),
	      "Delete: the keys and Quiet");
	s3_list_release(&l);
	doc = "<Delete><Object><Key>a</Key></Object></Delete>";
	CHECK(s3_xml_delete_request(doc, strlen(doc), &l, &quiet) == 0 && !quiet && l.n == 1,
	      "Delete: not quiet unless it says so");
	s3_list_release(&l);
	doc = "<Delete><Object><VersionId>x</VersionId></Object></Delete>";
	CHECK(s3_xml_delete_request(doc, strlen(doc), &l, &quiet) == -RDX_EPROTO && l.n == 0,
	      "Delete: an Object without a Key is refused");
	doc = "<!DOCTYPE d [<!ENTITY a \"aaaa\">]><Delete><Object><Key>&a;</Key></Object></Delete>";
	CHECK(s3_xml_delete_request(doc, strlen(doc), &l, &quiet) == -RDX_EPROTO && l.n == 0,
	      "Delete: a DTD is refused");
	doc = "<DeleteResult/>";
	CHECK(s3_xml_delete_request(doc, strlen(doc), &l, &quiet) == -RDX_EPROTO,
	      "Delete: another document is refused");
	s3_list_release(&l);
}

int main(void)
{
	test_requests();
	test_delete();
	test_error();
	test_list();
	test_hostile();
	return TAP_DONE();
}
