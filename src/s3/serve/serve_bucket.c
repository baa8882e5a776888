/* rds3 serve: bucket requests (create, delete, list, location, the
 * sub-resources it answers or refuses). */
#include "s3/serve/serve_ops.h"

#include "s3/checksum.h"
#include "s3/s3.h"
#include "s3/xml.h"

#include "core/hex.h"
#include "core/err.h"
#include "core/io.h"
#include "core/log.h"
#include "core/units.h"

#include <curl/curl.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

/* ------------------------------------------------------------ buckets */

int sv_bucket_fd(struct call *k, int *fd)
{
	int ret;

	*fd = sv_bucket_open(k->s->root, k->bucket);
	if (*fd == -ENOENT)
		return sv_fail(k, 404, "NoSuchBucket", "The specified bucket does not exist");
	if (*fd < 0)
		return sv_fail_errno(k, *fd);
	if ((ret = sv_bucket_mine(k, *fd))) {
		close(*fd);
		*fd = -1;
		return ret < 0 ? ret : 0;
	}
	return 0;
}

/* A query value as given in a listing: encoded with encoding-type=url. */
void sv_list_text(struct s3_buf *b, const char *tag, const char *v, bool url)
{
	s3_buf_printf(b, "<%s>", tag);
	if (url)
		s3_uri_encode(b, v, strlen(v), true);
	else
		sv_xml_esc(b, v);
	s3_buf_printf(b, "</%s>", tag);
}

static int hex_decode(const char *h, char *out, size_t cap)
{
	size_t n = strlen(h);

	if (n % 2 || n / 2 >= cap)
		return -EINVAL;
	if (rdx_hex_decode(h, n / 2, out) || memchr(out, '\0', n / 2))
		return -EINVAL;
	out[n / 2] = '\0';
	return 0;
}

/* ListObjects (v1), ListObjectsV2, and ListObjectVersions, which on a
 * bucket that never had versioning (every bucket here) lists each object
 * once, as its one version "null", the latest, as S3 does. */
enum list_kind { LIST_V1, LIST_V2, LIST_VERSIONS };

static int list_objects(struct call *k, int bfd, enum list_kind kind)
{
	const char *prefix = "", *delim = NULL, *maxk = NULL, *token = NULL,
		   *after = NULL, *enc = NULL, *marker = NULL, *fetch = NULL,
		   *vmarker = NULL;
	const struct sv_user *owner = NULL;
	struct sv_list_args a = { 0 };
	struct sv_list_result res;
	char start[SV_KEY_MAX + 1];
	bool url, owners;
	unsigned long n;
	struct s3_buf b;
	size_t i;
	int ret;

	sv_query(k->r, "prefix", &prefix);
	sv_query(k->r, "delimiter", &delim);
	sv_query(k->r, "max-keys", &maxk);
	sv_query(k->r, "continuation-token", &token);
	sv_query(k->r, "start-after", &after);
	sv_query(k->r, kind == LIST_VERSIONS ? "key-marker" : "marker", &marker);
	sv_query(k->r, "version-id-marker", &vmarker);
	sv_query(k->r, "encoding-type", &enc);
	sv_query(k->r, "fetch-owner", &fetch);
	/* As S3: v1 and versions give each key's owner, v2 when asked. */
	owners = kind != LIST_V2 || (fetch && !strcmp(fetch, "true"));
	if (owners)
		owner = sv_bucket_owner(k->s, bfd);
	if (!prefix)
		prefix = "";
	url = enc && !strcmp(enc, "url");
	a.prefix = prefix;
	a.delimiter = delim && *delim ? delim : NULL;
	if (sv_count(maxk, 1000, 1000, &n))
		return sv_fail(k, 400, "InvalidArgument", "max-keys must be a number of 0 or more");
	a.max_keys = (unsigned)n;
	if (vmarker && (!marker || !*marker))
		return sv_fail(k, 400, "InvalidArgument", "A version-id marker cannot be specified without a key marker.");
	if (vmarker && strcmp(vmarker, "null"))
		return sv_fail(k, 400, "InvalidArgument", "Invalid version id specified");
	if (kind == LIST_V2 && token) {
		if (hex_decode(token, start, sizeof(start)))
			return sv_fail(k, 400, "InvalidArgument", "The continuation token provided is incorrect");
		a.start_after = start;
	} else if (kind == LIST_V2 && after && *after) {
		a.start_after = after;
	} else if (kind != LIST_V2 && marker && *marker) {
		a.start_after = marker; /* a key's one version: after it is after the key */
	}
	/* max-keys=0 asks for nothing, and nothing more follows it. */
	ret = a.max_keys ? sv_list(bfd, &a, &res) : 0;
	if (!a.max_keys)
		res = (struct sv_list_result){ 0 };
	if (ret)
		return sv_fail_errno(k, ret);
	s3_buf_init(&b, 0);
	s3_buf_printf(&b, XML_HEAD "<%s xmlns=\"" XMLNS "\">",
		      kind == LIST_VERSIONS ? "ListVersionsResult" : "ListBucketResult");
	s3_buf_printf(&b, "<Name>%s</Name>", k->bucket);
	/* v1's Prefix as given: botocore decodes it in v2 and versions only,
	 * as S3 encodes it. */
	sv_list_text(&b, "Prefix", prefix, url && kind != LIST_V1);
	if (a.delimiter)
		sv_list_text(&b, "Delimiter", a.delimiter, url);
	s3_buf_printf(&b, "<MaxKeys>%u</MaxKeys>", a.max_keys);
	if (url)
		s3_buf_adds(&b, "<EncodingType>url</EncodingType>");
	s3_buf_printf(&b, "<IsTruncated>%s</IsTruncated>", res.truncated ? "true" : "false");
	if (kind == LIST_V2) {
		s3_buf_printf(&b, "<KeyCount>%zu</KeyCount>", res.n);
		if (token)
			sv_list_text(&b, "ContinuationToken", token, false);
		if (after)
			sv_list_text(&b, "StartAfter", after, url);
		if (res.truncated && res.n) {
			const char *last = res.v[res.n - 1].key;

			s3_buf_adds(&b, "<NextContinuationToken>");
			for (const char *p = last; *p; p++)
				s3_buf_printf(&b, "%02x", (unsigned char)*p);
			s3_buf_adds(&b, "</NextContinuationToken>");
		}
	} else if (kind == LIST_V1) {
		sv_list_text(&b, "Marker", marker ? marker : "", url);
		if (res.truncated && res.n)
			sv_list_text(&b, "NextMarker", res.v[res.n - 1].key, url);
	} else {
		sv_list_text(&b, "KeyMarker", marker ? marker : "", url);
		sv_list_text(&b, "VersionIdMarker", vmarker ? vmarker : "", false);
		if (res.truncated && res.n) {
			sv_list_text(&b, "NextKeyMarker", res.v[res.n - 1].key, url);
			s3_buf_adds(&b, "<NextVersionIdMarker>null</NextVersionIdMarker>");
		}
	}
	for (i = 0; i < res.n; i++) {
		const struct sv_list_item *it = &res.v[i];
		char date[40];

		if (it->is_prefix) {
			s3_buf_adds(&b, "<CommonPrefixes>");
			sv_list_text(&b, "Prefix", it->key, url);
			s3_buf_adds(&b, "</CommonPrefixes>");
			continue;
		}
		sv_iso_date(it->mtime, date);
		s3_buf_adds(&b, kind == LIST_VERSIONS ? "<Version>" : "<Contents>");
		sv_list_text(&b, "Key", it->key, url);
		if (kind == LIST_VERSIONS)
			s3_buf_adds(&b, "<VersionId>null</VersionId><IsLatest>true</IsLatest>");
		s3_buf_printf(&b, "<LastModified>%s</LastModified><ETag>&quot;%s&quot;</ETag>"
				  "<Size>%" PRIu64 "</Size>",
			      date, it->etag, it->size);
		if (owners)
			sv_owner_xml(&b, owner);
		s3_buf_adds(&b, "<StorageClass>STANDARD</StorageClass>");
		s3_buf_adds(&b, kind == LIST_VERSIONS ? "</Version>" : "</Contents>");
	}
	s3_buf_printf(&b, "</%s>", kind == LIST_VERSIONS ? "ListVersionsResult" : "ListBucketResult");
	sv_list_release(&res);
	ret = sv_xml_answer(k, 200, &b);
	s3_buf_release(&b);
	return ret;
}


/* A DeleteObjects entry's error for what sv_object_delete() returned. */
static void delete_error(int err, const char **code, const char **why)
{
	switch (err) {
	case -ECANCELED:
		*code = "PreconditionFailed", *why = "At least one of the pre-conditions you specified did not hold";
		break;
	case -ENOENT:
		*code = "NoSuchKey", *why = "The specified key does not exist.";
		break;
	case -EINVAL:
	case -ENAMETOOLONG:
		*code = "InvalidArgument", *why = strerror(-err);
		break;
	default:
		*code = "InternalError", *why = strerror(-err);
	}
}

/* The bucket requests this server carries out: a method, the
 * sub-resource that names the operation (NULL: none) and the parameters
 * it acts on.  A request that is none of them is refused whole, whatever
 * else it carries: "?versions&encoding-type=url" is not a listing. */
#define LIST_PARAMS                                                     \
	"list-type prefix delimiter max-keys marker continuation-token " \
	"start-after encoding-type fetch-owner"

static const struct bucket_op {
	const char *method, *sub, *params;
} bucket_ops[] = {
	{ "PUT", NULL, "" },	/* CreateBucket */
	{ "DELETE", NULL, "" }, /* DeleteBucket */
	{ "HEAD", NULL, "" },	/* HeadBucket */
	{ "GET", NULL, LIST_PARAMS },
	{ "GET", "location", "" },
	{ "GET", "versioning", "" }, /* never enabled: an empty configuration */
	{ "GET", "versions", "prefix delimiter key-marker version-id-marker max-keys encoding-type" },
	{ "GET", "uploads", "prefix delimiter key-marker upload-id-marker max-uploads encoding-type" },
	{ "POST", "delete", "" },
};

/* A query parameter every request may carry: a presigned URL's, and the
 * x-id that some SDKs add to name the operation. */
static bool any_request_param(const char *n)
{
	return !strncmp(n, "X-Amz-", 6) || !strcmp(n, "x-id");
}

/* The operation of the request, or NULL: then *odd is the parameter that
 * names what it asked for (NULL: the method itself is not served). */
static const struct bucket_op *bucket_op_of(const struct sv_req *r, const char **odd)
{
	size_t i, j;

	*odd = NULL;
	for (i = 0; i < sizeof(bucket_ops) / sizeof(bucket_ops[0]); i++) {
		const struct bucket_op *op = &bucket_ops[i];
		bool fits = !strcmp(op->method, r->method) &&
			    (!op->sub || sv_query(r, op->sub, NULL));

		for (j = 0; fits && j < r->nquery; j++) {
			const char *n = r->query[j].name;

			fits = any_request_param(n) || (op->sub && !strcmp(n, op->sub)) ||
			       sv_word_in(op->params, n);
		}
		if (fits)
			return op;
	}
	/* Name the sub-resource: the first parameter no listing takes. */
	for (j = 0; j < r->nquery; j++) {
		const char *n = r->query[j].name;

		if (!any_request_param(n) && !sv_word_in(LIST_PARAMS, n))
			return *odd = n, NULL;
	}
	if (r->nquery)
		*odd = r->query[0].name;
	return NULL;
}

int sv_bucket_op(struct call *k)
{
	const char *m = k->r->method, *odd;
	const struct bucket_op *op = bucket_op_of(k->r, &odd);
	int bfd, ret;

	if (!op && odd) {
		char msg[160];

		snprintf(msg, sizeof(msg), "rds3 serve does not implement ?%.64s on a bucket%s", odd,
			 strcmp(m, "GET") && strcmp(m, "HEAD") ? " with this method" : "");
		return sv_fail(k, 501, "NotImplemented", msg);
	}
	if (!op)
		return sv_fail(k, 405, "MethodNotAllowed", "The specified method is not allowed against this resource.");
	if (!strcmp(m, "PUT"))
		return sv_create_bucket(k);
	if ((ret = sv_bucket_fd(k, &bfd)) || bfd < 0)
		return ret;
	if (!strcmp(m, "DELETE"))
		ret = sv_delete_bucket(k, bfd);
	else if (!strcmp(m, "HEAD"))
		ret = sv_answer(k, 200, NULL, NULL, 0);
	else if (op->sub && (!strcmp(op->sub, "location") || !strcmp(op->sub, "versioning"))) {
		struct s3_buf b;

		s3_buf_init(&b, 0);
		s3_buf_printf(&b, XML_HEAD "<%s xmlns=\"" XMLNS "\"/>",
			      !strcmp(op->sub, "location") ? "LocationConstraint" : "VersioningConfiguration");
		ret = sv_xml_answer(k, 200, &b);
		s3_buf_release(&b);
	} else if (op->sub && !strcmp(op->sub, "uploads"))
		ret = sv_list_uploads(k);
	else if (op->sub && !strcmp(op->sub, "versions"))
		ret = list_objects(k, bfd, LIST_VERSIONS);
	else if (!op->sub && !strcmp(m, "GET")) {
		const char *v = NULL;

		sv_query(k->r, "list-type", &v);
		ret = list_objects(k, bfd, v && !strcmp(v, "2") ? LIST_V2 : LIST_V1);
	}
	else {
		char *xml = NULL;
		size_t n;
		struct s3_list keys = { 0 };
		bool quiet = false;
		struct s3_buf b;

		if ((ret = sv_take_xml(k, true, &xml, &n))) {
			close(bfd);
			return ret < 0 ? ret : 0;
		}
		ret = s3_xml_delete_request(xml, n, &keys, &quiet);
		free(xml);
		if (ret || keys.n > 1000) {
			s3_list_release(&keys);
			close(bfd);
			return sv_fail(k, 400, "MalformedXML",
				    "The XML you provided was not well-formed or did not validate against our published schema");
		}
		s3_buf_init(&b, 0);
		s3_buf_adds(&b, XML_HEAD "<DeleteResult xmlns=\"" XMLNS "\">");
		for (size_t i = 0; i < keys.n; i++) {
			const struct s3_entry *e = &keys.v[i];
			struct sv_wcond w = { .match = e->etag };
			const char *code = NULL, *why = NULL;
			int err = sv_key_ok(e->name);

			if (err)
				code = "InvalidArgument", why = strerror(-err);
			else if (e->version && strcmp(e->version, "null"))
				code = "InvalidArgument", why = "Invalid version id specified";
			else if (e->mtime || e->has_size)
				code = "NotImplemented",
				why = "rds3 serve does not implement conditions on size or times";
			else if ((err = sv_object_delete(bfd, e->name, w.match ? sv_match_check : NULL, &w)))
				delete_error(err, &code, &why);
			if (!code && quiet)
				continue;
			s3_buf_adds(&b, code ? "<Error><Key>" : "<Deleted><Key>");
			sv_xml_esc(&b, e->name);
			if (code) {
				s3_buf_printf(&b, "</Key><Code>%s</Code><Message>", code);
				sv_xml_esc(&b, why);
				s3_buf_adds(&b, "</Message></Error>");
			} else {
				s3_buf_adds(&b, "</Key></Deleted>");
			}
		}
		s3_buf_adds(&b, "</DeleteResult>");
		s3_list_release(&keys);
		ret = sv_xml_answer(k, 200, &b);
		s3_buf_release(&b);
	}
	close(bfd);
	return ret;
}
