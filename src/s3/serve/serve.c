/* rds3 serve: the listener, one thread per connection (at most
 * max_conns), and the S3 operations over serve_store.c and
 * serve_list.c.  Each request is verified (serve_auth.c) before anything
 * is read from or written to ROOT. */
#include "s3/serve/serve_int.h"

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

#define UPLOADS ".rds3-uploads" /* not a bucket name: buckets never start with '.' */
#define IO_BUF (1u << 20)
#define XMLNS "http://s3.amazonaws.com/doc/2006-03-01/"
#define XML_HEAD "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"


struct server {
	const struct s3_serve_opts *o;
	struct sv_auth auth;
	int root;
	mode_t file_mode; /* 0666 less the umask */
	pthread_mutex_t lock;
	pthread_cond_t cond;
	unsigned active;
	atomic_int shed; /* idle connections to close for waiting ones */
	/* Connections held per address (lock), max_conns entries: one
	 * address cannot take every place. */
	struct addr_count {
		char host[INET6_ADDRSTRLEN];
		unsigned n;
	} *addrs;
};

/* One request's context. */
struct call {
	struct server *s;
	struct sv_conn *c;
	struct sv_req *r;
	const char *payload; /* the signed body hash, NULL: none */
	char bucket[64];
	const char *key;     /* NULL: a bucket or service request */
	int status;
	uint64_t sent;
};

/* -------------------------------------------------------------- answers */

static int answer(struct call *k, int status, const char *hdrs,
		  const char *body, size_t n)
{
	int ret;

	k->status = status;
	ret = sv_send_head(k->c, k->r, status, hdrs, true, n);
	if (!ret && n && strcmp(k->r->method, "HEAD"))
		ret = sv_send(k->c, body, n);
	k->sent = n;
	return ret;
}

static int xml_answer(struct call *k, int status, struct s3_buf *b)
{
	int ret;

	if (s3_buf_err(b))
		return -ENOMEM;
	ret = answer(k, status, "Content-Type: application/xml\r\n", b->p, b->len);
	return ret;
}

/* An S3 Error document, with extra headers (each ending in CRLF). */
static int fail_h(struct call *k, int status, const char *code, const char *msg,
		  const char *extra)
{
	struct s3_buf b, h;
	int ret;

	/* A body not read is dropped if small, else the connection closes. */
	sv_body_skip(k->c, k->r, 1 << 20);
	s3_buf_init(&b, 0);
	s3_buf_printf(&b, XML_HEAD "<Error><Code>%s</Code><Message>", code);
	sv_xml_esc(&b, msg);
	s3_buf_adds(&b, "</Message><Resource>");
	sv_xml_esc(&b, k->r->path ? k->r->path : k->r->raw_path ? k->r->raw_path : "");
	s3_buf_adds(&b, "</Resource></Error>");
	s3_buf_init(&h, 0);
	s3_buf_printf(&h, "Content-Type: application/xml\r\n%s", extra ? extra : "");
	k->status = status;
	ret = s3_buf_err(&b) || s3_buf_err(&h)
		      ? -ENOMEM
		      : answer(k, status, h.p, strcmp(k->r->method, "HEAD") ? b.p : NULL,
			       strcmp(k->r->method, "HEAD") ? b.len : 0);
	s3_buf_release(&b);
	s3_buf_release(&h);
	return ret;
}

static int fail(struct call *k, int status, const char *code, const char *msg)
{
	return fail_h(k, status, code, msg, NULL);
}

/* The answer for an errno from the store. */
static int fail_errno(struct call *k, int err)
{
	switch (err) {
	case -ENOENT:
		return fail(k, 404, "NoSuchKey", "The specified key does not exist.");
	case -ENOTDIR:
	case -EEXIST:
	case -ELOOP:
		return fail(k, 409, "InvalidRequest",
			    "rds3 serve keeps keys as file paths: a key cannot be both an object and a prefix of other keys with '/', nor pass a symlink");
	case -ENAMETOOLONG:
		return fail(k, 400, "KeyTooLongError", "Your key is too long");
	case -ENOSPC:
	case -EDQUOT:
		return fail(k, 500, "InternalError", "the server's disk is full");
	default:
		rdx_warn("%s %s: %s", k->r->method, k->r->raw_path, strerror(-err));
		return fail(k, 500, "InternalError", "We encountered an internal error. Please try again.");
	}
}

static void add_etag(struct s3_buf *b, const char *etag)
{
	s3_buf_printf(b, "ETag: \"%s\"\r\n", etag);
}

/* ------------------------------------------------------------- helpers */

/* The request's headers that go with an object: Content-Type and the
 * like, and x-amz-meta-* (names in lower case).  -E2BIG past S3's 2 KB
 * of user metadata. */
static int object_headers(const struct sv_req *r, char **out)
{
	static const char *const keep[] = { "Content-Type", "Content-Encoding",
					    "Content-Disposition", "Content-Language",
					    "Cache-Control", "Expires", NULL };
	struct s3_buf b;
	size_t i, user = 0;

	s3_buf_init(&b, SV_HEADERS_MAX);
	for (i = 0; i < r->nhdr; i++) {
		const char *n = r->hdr[i].name;
		bool ok = !strncasecmp(n, "x-amz-meta-", 11);

		for (int j = 0; !ok && keep[j]; j++)
			ok = !strcasecmp(n, keep[j]);
		if (!ok)
			continue;
		if (!strncasecmp(n, "x-amz-meta-", 11)) {
			user += strlen(n) - 11 + strlen(r->hdr[i].value);
			for (const char *p = n; *p; p++)
				s3_buf_addc(&b, (char)(*p >= 'A' && *p <= 'Z' ? *p + 32 : *p));
		} else {
			s3_buf_adds(&b, n);
		}
		s3_buf_printf(&b, ": %s\n", r->hdr[i].value);
	}
	if (user > SV_META_MAX || s3_buf_err(&b)) {
		s3_buf_release(&b);
		return -E2BIG;
	}
	*out = b.p; /* NULL when none */
	return 0;
}

/* The stored header lines as HTTP headers, Content-Type defaulted. */
static void emit_headers(struct s3_buf *b, const char *h)
{
	bool ctype = false;

	while (h && *h) {
		const char *nl = strchr(h, '\n');
		size_t n = nl ? (size_t)(nl - h) : strlen(h);

		if (!strncasecmp(h, "Content-Type:", 13))
			ctype = true;
		s3_buf_add(b, h, n);
		s3_buf_adds(b, "\r\n");
		h += n + (nl != NULL);
	}
	if (!ctype)
		s3_buf_adds(b, "Content-Type: binary/octet-stream\r\n");
}

/* The x-amz-checksum-* header a body comes with, if any: *hdr (NULL: none)
 * and its algorithm.  S3 takes one; a name it does not know is refused
 * rather than left unchecked.  Returns 0, or an answer was sent (1) or
 * the connection is gone (-errno). */
static int body_checksum(struct call *k, const struct sv_hdr **hdr, enum s3_ck *alg)
{
	static const char pre[] = "x-amz-checksum-";
	const struct sv_req *r = k->r;

	*hdr = NULL;
	*alg = S3_CK_NONE;
	for (size_t i = 0; i < r->nhdr; i++) {
		const char *n = r->hdr[i].name;
		enum s3_ck a = s3_cksum_named(n);

		if (strncasecmp(n, pre, sizeof(pre) - 1) ||
		    !strcasecmp(n + sizeof(pre) - 1, "algorithm") ||
		    !strcasecmp(n + sizeof(pre) - 1, "type"))
			continue;
		if (a == S3_CK_NONE) {
			char msg[160];

			snprintf(msg, sizeof(msg), "rds3 serve does not know the checksum %.40s", n);
			return fail(k, 400, "InvalidRequest", msg) ? -EIO : 1;
		}
		if (*hdr)
			return fail(k, 400, "InvalidRequest",
				    "Expecting a single x-amz-checksum- header. Multiple checksum Types are not allowed.") ? -EIO : 1;
		*hdr = &r->hdr[i];
		*alg = a;
	}
	return 0;
}

/* Whether a header's base64 value is the digest d (n bytes). */
static bool checksum_matches(const char *b64, const unsigned char *d, size_t n)
{
	unsigned char want[S3_CK_MAX + 3];
	size_t len = strlen(b64);

	if (len != (n + 2) / 3 * 4 ||
	    EVP_DecodeBlock(want, (const unsigned char *)b64, (int)len) != (int)((n + 2) / 3 * 3))
		return false;
	return !CRYPTO_memcmp(want, d, n);
}

/* Echoes the body's x-amz-checksum-* header, checked, as S3 does. */
static void add_checksum(struct s3_buf *b, const struct call *k)
{
	for (size_t i = 0; i < k->r->nhdr; i++) {
		enum s3_ck alg = s3_cksum_named(k->r->hdr[i].name);

		if (alg != S3_CK_NONE) {
			s3_buf_printf(b, "%s: %s\r\n", s3_cksum_header(alg), k->r->hdr[i].value);
			return;
		}
	}
}

/* Reads the body into fd, hashing it: MD5 always, SHA-256 when signed,
 * and the x-amz-checksum-* the client sent.  Checks Content-MD5, the
 * signed hash and that checksum.  Returns 0 with md5 set; or an answer
 * was sent (1) or the connection is gone (-errno). */
static int take_body(struct call *k, int fd, uint64_t max, unsigned char md5[16],
		     uint64_t *size)
{
	struct sv_req *r = k->r;
	EVP_MD_CTX *m = EVP_MD_CTX_new(), *sh = EVP_MD_CTX_new();
	const char *cmd5 = sv_hdr(r, "Content-MD5");
	const struct sv_hdr *ckh;
	struct s3_cksum ck = { 0 };
	enum s3_ck alg;
	unsigned char sha[32];
	char *buf = malloc(IO_BUF);
	uint64_t total = 0;
	int ret = 0;

	*size = 0;
	if ((ret = body_checksum(k, &ckh, &alg)))
		goto out;
	if (!m || !sh || !buf || !EVP_DigestInit_ex(m, EVP_md5(), NULL) ||
	    !EVP_DigestInit_ex(sh, EVP_sha256(), NULL) || (ckh && s3_cksum_init(&ck, alg))) {
		ret = fail(k, 500, "InternalError", "out of memory") ? -ENOMEM : 1;
		goto out;
	}
	if (!r->has_length && !r->chunked) {
		ret = fail(k, 411, "MissingContentLength", "You must provide the Content-Length HTTP header.") ? -EIO : 1;
		goto out;
	}
	if (r->has_length && r->length > max) {
		ret = fail(k, 400, "EntityTooLarge", "Your proposed upload exceeds the maximum allowed size") ? -EIO : 1;
		goto out;
	}
	for (;;) {
		ssize_t n = sv_body_read(k->c, r, buf, IO_BUF);

		if (n == -RDX_EPROTO) { /* the peer is there: tell it */
			ret = fail(k, 400, "IncompleteBody", "the chunked body is malformed") ? -EIO : 1;
			goto out;
		}
		if (n < 0) {
			ret = (int)n;
			goto out;
		}
		if (!n)
			break;
		total += (uint64_t)n;
		if (total > max) {
			ret = fail(k, 400, "EntityTooLarge", "Your proposed upload exceeds the maximum allowed size") ? -EIO : 1;
			goto out;
		}
		EVP_DigestUpdate(m, buf, (size_t)n);
		if (k->payload)
			EVP_DigestUpdate(sh, buf, (size_t)n);
		if (ckh)
			s3_cksum_update(&ck, buf, (size_t)n);
		if (rdx_pwrite_full(fd, buf, (size_t)n, (off_t)(total - (uint64_t)n)) < 0) {
			ret = fail_errno(k, -errno) ? -EIO : 1;
			goto out;
		}
	}
	EVP_DigestFinal_ex(m, md5, NULL);
	*size = total;
	if (cmd5) {
		unsigned char want[18];
		int n = strlen(cmd5) == 24 ? EVP_DecodeBlock(want, (const unsigned char *)cmd5, 24) : -1;

		if (n != 18) {
			ret = fail(k, 400, "InvalidDigest", "The Content-MD5 you specified was invalid.") ? -EIO : 1;
			goto out;
		}
		if (CRYPTO_memcmp(want, md5, 16)) {
			ret = fail(k, 400, "BadDigest", "The Content-MD5 you specified did not match what we received.") ? -EIO : 1;
			goto out;
		}
	}
	if (k->payload) {
		char hex[65];

		EVP_DigestFinal_ex(sh, sha, NULL);
		rdx_hex_encode(sha, 32, hex);
		if (strcmp(hex, k->payload)) {
			ret = fail(k, 400, "XAmzContentSHA256Mismatch",
				   "The provided 'x-amz-content-sha256' header does not match what was computed.") ? -EIO : 1;
			goto out;
		}
	}
	if (ckh) {
		unsigned char d[S3_CK_MAX];
		size_t dn = s3_cksum_final(&ck, d);
		char msg[96];

		if (!checksum_matches(ckh->value, d, dn)) {
			snprintf(msg, sizeof(msg), "The %s you specified did not match the calculated checksum.",
				 s3_cksum_name(alg));
			ret = fail(k, 400, "BadDigest", msg) ? -EIO : 1;
			goto out;
		}
	}
out:
	s3_cksum_release(&ck);
	EVP_MD_CTX_free(m);
	EVP_MD_CTX_free(sh);
	free(buf);
	return ret;
}

/* A small XML body (a Delete or Complete request), NUL-terminated.
 * body_sum: an x-amz-checksum-* header is the body's (DeleteObjects) and
 * is checked; else it would be the whole object's (Complete), which is
 * not computed here: refused rather than left unchecked. */
static int take_xml(struct call *k, bool body_sum, char **out, size_t *len)
{
	const struct sv_hdr *ckh;
	enum s3_ck alg;
	int ret;
	struct s3_buf b;
	char tmp[16384];
	ssize_t n;

	s3_buf_init(&b, SV_XML_MAX);
	while ((n = sv_body_read(k->c, k->r, tmp, sizeof(tmp))) > 0)
		if (s3_buf_add(&b, tmp, (size_t)n))
			break;
	if (n < 0 || s3_buf_err(&b)) {
		s3_buf_release(&b);
		if (n < 0)
			return (int)n;
		return fail(k, 400, "MalformedXML", "the XML body is too large") ? -EIO : 1;
	}
	if ((ret = body_checksum(k, &ckh, &alg))) {
		s3_buf_release(&b);
		return ret;
	}
	if (ckh && !body_sum) {
		s3_buf_release(&b);
		return fail(k, 501, "NotImplemented",
			    "rds3 serve does not compute a multipart upload's whole-object checksum") ? -EIO : 1;
	}
	if (ckh) {
		unsigned char d[S3_CK_MAX];
		struct s3_cksum ck;
		size_t dn;

		if (s3_cksum_init(&ck, alg)) {
			s3_buf_release(&b);
			return -ENOMEM;
		}
		s3_cksum_update(&ck, b.p ? b.p : "", b.len);
		dn = s3_cksum_final(&ck, d);
		if (!checksum_matches(ckh->value, d, dn)) {
			s3_buf_release(&b);
			return fail(k, 400, "BadDigest", "The checksum you specified did not match the calculated checksum.") ? -EIO : 1;
		}
	}
	*out = b.p ? b.p : strdup("");
	*len = b.len;
	return *out ? 0 : -ENOMEM;
}

/* ----------------------------------------------------------- service */

static int list_buckets(struct call *k)
{
	int fd = openat(k->s->root, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	struct dirent *de;
	struct s3_buf b;
	int ret;

	if (!d) {
		if (fd >= 0)
			close(fd);
		return fail_errno(k, -errno);
	}
	s3_buf_init(&b, 0);
	s3_buf_adds(&b, XML_HEAD "<ListAllMyBucketsResult xmlns=\"" XMLNS "\">"
			"<Owner><ID>rds3</ID><DisplayName>rds3</DisplayName></Owner><Buckets>");
	while ((de = readdir(d))) {
		struct stat st;
		char date[40];

		if (!sv_bucket_ok(de->d_name) ||
		    fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) ||
		    !S_ISDIR(st.st_mode))
			continue;
		sv_iso_date(st.st_mtim.tv_sec, date);
		s3_buf_printf(&b, "<Bucket><Name>%s</Name><CreationDate>%s</CreationDate></Bucket>",
			      de->d_name, date);
	}
	closedir(d);
	s3_buf_adds(&b, "</Buckets></ListAllMyBucketsResult>");
	ret = xml_answer(k, 200, &b);
	s3_buf_release(&b);
	return ret;
}

/* ------------------------------------------------------------ buckets */

static int bucket_fd(struct call *k, int *fd)
{
	*fd = sv_bucket_open(k->s->root, k->bucket);
	if (*fd == -ENOENT)
		return fail(k, 404, "NoSuchBucket", "The specified bucket does not exist");
	if (*fd < 0)
		return fail_errno(k, *fd);
	return 0;
}

/* A query value as given in a listing: encoded with encoding-type=url. */
static void list_text(struct s3_buf *b, const char *tag, const char *v, bool url)
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

static int list_objects(struct call *k, int bfd)
{
	const char *v2 = NULL, *prefix = "", *delim = NULL, *maxk = NULL,
		   *token = NULL, *after = NULL, *enc = NULL, *marker = NULL;
	struct sv_list_args a = { 0 };
	struct sv_list_result res;
	char start[SV_KEY_MAX + 1];
	bool url, is_v2;
	struct s3_buf b;
	size_t i;
	int ret;

	sv_query(k->r, "list-type", &v2);
	is_v2 = v2 && !strcmp(v2, "2");
	sv_query(k->r, "prefix", &prefix);
	sv_query(k->r, "delimiter", &delim);
	sv_query(k->r, "max-keys", &maxk);
	sv_query(k->r, "continuation-token", &token);
	sv_query(k->r, "start-after", &after);
	sv_query(k->r, "marker", &marker);
	sv_query(k->r, "encoding-type", &enc);
	if (!prefix)
		prefix = "";
	url = enc && !strcmp(enc, "url");
	a.prefix = prefix;
	a.delimiter = delim && *delim ? delim : NULL;
	a.max_keys = 1000;
	if (maxk) {
		char *end;
		long m = strtol(maxk, &end, 10);

		if (*end || end == maxk || m < 0)
			return fail(k, 400, "InvalidArgument", "max-keys must be a number of 0 or more");
		if (m < 1000)
			a.max_keys = (unsigned)m;
	}
	if (is_v2 && token) {
		if (hex_decode(token, start, sizeof(start)))
			return fail(k, 400, "InvalidArgument", "The continuation token provided is incorrect");
		a.start_after = start;
	} else if (is_v2 && after && *after) {
		a.start_after = after;
	} else if (!is_v2 && marker && *marker) {
		a.start_after = marker;
	}
	ret = sv_list(bfd, &a, &res);
	if (ret)
		return fail_errno(k, ret);
	s3_buf_init(&b, 0);
	s3_buf_adds(&b, XML_HEAD "<ListBucketResult xmlns=\"" XMLNS "\">");
	s3_buf_printf(&b, "<Name>%s</Name>", k->bucket);
	list_text(&b, "Prefix", prefix, url);
	if (a.delimiter)
		list_text(&b, "Delimiter", a.delimiter, url);
	s3_buf_printf(&b, "<MaxKeys>%u</MaxKeys>", a.max_keys);
	if (url)
		s3_buf_adds(&b, "<EncodingType>url</EncodingType>");
	s3_buf_printf(&b, "<IsTruncated>%s</IsTruncated>", res.truncated ? "true" : "false");
	if (is_v2) {
		s3_buf_printf(&b, "<KeyCount>%zu</KeyCount>", res.n);
		if (token)
			list_text(&b, "ContinuationToken", token, false);
		if (after && !token)
			list_text(&b, "StartAfter", after, url);
		if (res.truncated && res.n) {
			const char *last = res.v[res.n - 1].key;

			s3_buf_adds(&b, "<NextContinuationToken>");
			for (const char *p = last; *p; p++)
				s3_buf_printf(&b, "%02x", (unsigned char)*p);
			s3_buf_adds(&b, "</NextContinuationToken>");
		}
	} else {
		list_text(&b, "Marker", marker ? marker : "", url);
		if (res.truncated && res.n)
			list_text(&b, "NextMarker", res.v[res.n - 1].key, url);
	}
	for (i = 0; i < res.n; i++) {
		const struct sv_list_item *it = &res.v[i];
		char date[40];

		if (it->is_prefix) {
			s3_buf_adds(&b, "<CommonPrefixes>");
			list_text(&b, "Prefix", it->key, url);
			s3_buf_adds(&b, "</CommonPrefixes>");
			continue;
		}
		sv_iso_date(it->mtime, date);
		s3_buf_adds(&b, "<Contents>");
		list_text(&b, "Key", it->key, url);
		s3_buf_printf(&b, "<LastModified>%s</LastModified><ETag>&quot;%s&quot;</ETag>"
				  "<Size>%" PRIu64 "</Size><StorageClass>STANDARD</StorageClass></Contents>",
			      date, it->etag, it->size);
	}
	s3_buf_adds(&b, "</ListBucketResult>");
	sv_list_release(&res);
	ret = xml_answer(k, 200, &b);
	s3_buf_release(&b);
	return ret;
}

static int list_uploads(struct call *k);
static void drop_uploads(int root, const char *bucket);

static int bucket_op(struct call *k)
{
	const char *m = k->r->method;
	int bfd, ret;

	if (!strcmp(m, "PUT") && !k->r->nquery) {
		sv_body_skip(k->c, k->r, 1 << 16); /* CreateBucketConfiguration */
		if (!mkdirat(k->s->root, k->bucket, 0777))
		{
			char loc[96];

			snprintf(loc, sizeof(loc), "Location: /%s\r\n", k->bucket);
			return answer(k, 200, loc, NULL, 0);
		}
		if (errno == EEXIST)
			return fail(k, 409, "BucketAlreadyOwnedByYou",
				    "Your previous request to create the named bucket succeeded and you already own it.");
		return fail_errno(k, -errno);
	}
	if ((ret = bucket_fd(k, &bfd)) || bfd < 0)
		return ret;
	if (!strcmp(m, "DELETE") && !k->r->nquery) {
		close(bfd);
		if (!unlinkat(k->s->root, k->bucket, AT_REMOVEDIR)) {
			/* Its open uploads go with it: a bucket made again
			 * under the name starts without them. */
			drop_uploads(k->s->root, k->bucket);
			return answer(k, 204, NULL, NULL, 0);
		}
		if (errno == ENOTEMPTY || errno == EEXIST)
			return fail(k, 409, "BucketNotEmpty", "The bucket you tried to delete is not empty");
		return fail_errno(k, -errno);
	}
	if (!strcmp(m, "HEAD") && !k->r->nquery)
		ret = answer(k, 200, NULL, NULL, 0);
	else if (!strcmp(m, "GET") && sv_query(k->r, "location", NULL)) {
		struct s3_buf b;

		s3_buf_init(&b, 0);
		s3_buf_adds(&b, XML_HEAD "<LocationConstraint xmlns=\"" XMLNS "\"/>");
		ret = xml_answer(k, 200, &b);
		s3_buf_release(&b);
	} else if (!strcmp(m, "GET") && sv_query(k->r, "uploads", NULL))
		ret = list_uploads(k);
	else if (!strcmp(m, "GET") && (!k->r->nquery || sv_query(k->r, "list-type", NULL) ||
				       sv_query(k->r, "prefix", NULL) || sv_query(k->r, "delimiter", NULL) ||
				       sv_query(k->r, "max-keys", NULL) || sv_query(k->r, "marker", NULL) ||
				       sv_query(k->r, "encoding-type", NULL)))
		ret = list_objects(k, bfd);
	else if (!strcmp(m, "POST") && sv_query(k->r, "delete", NULL)) {
		char *xml = NULL;
		size_t n;
		struct s3_list keys = { 0 };
		bool quiet = false;
		struct s3_buf b;

		if ((ret = take_xml(k, true, &xml, &n))) {
			close(bfd);
			return ret < 0 ? ret : 0;
		}
		ret = s3_xml_delete_request(xml, n, &keys, &quiet);
		free(xml);
		if (ret || keys.n > 1000) {
			s3_list_release(&keys);
			close(bfd);
			return fail(k, 400, "MalformedXML",
				    "The XML you provided was not well-formed or did not validate against our published schema");
		}
		s3_buf_init(&b, 0);
		s3_buf_adds(&b, XML_HEAD "<DeleteResult xmlns=\"" XMLNS "\">");
		for (size_t i = 0; i < keys.n; i++) {
			const char *key = keys.v[i].name;
			int err = sv_key_ok(key);

			if (!err)
				err = sv_object_delete(bfd, key);
			if (!err && quiet)
				continue;
			s3_buf_adds(&b, err ? "<Error><Key>" : "<Deleted><Key>");
			sv_xml_esc(&b, key);
			if (err)
				s3_buf_printf(&b, "</Key><Code>%s</Code><Message>%s</Message></Error>",
					      err == -EINVAL || err == -ENAMETOOLONG ? "InvalidArgument" : "InternalError",
					      strerror(-err));
			else
				s3_buf_adds(&b, "</Key></Deleted>");
		}
		s3_buf_adds(&b, "</DeleteResult>");
		s3_list_release(&keys);
		ret = xml_answer(k, 200, &b);
		s3_buf_release(&b);
	} else if (!strcmp(m, "GET") || !strcmp(m, "PUT") || !strcmp(m, "DELETE"))
		ret = fail(k, 501, "NotImplemented", "rds3 serve does not implement this bucket sub-resource");
	else
		ret = fail(k, 405, "MethodNotAllowed", "The specified method is not allowed against this resource.");
	close(bfd);
	return ret;
}

/* ------------------------------------------------------------ objects */

/* Parses "bytes=A-B", "bytes=A-", "bytes=-N" against size: 1 a range
 * [*from, *to], 0 none to honour (absent, malformed, several), -1
 * unsatisfiable. */
static int parse_range(const char *h, uint64_t size, uint64_t *from, uint64_t *to)
{
	unsigned long long a, b;
	char tail;

	if (!h || strncmp(h, "bytes=", 6) || strchr(h, ','))
		return 0;
	h += 6;
	if (h[0] == '-') {
		if (sscanf(h + 1, "%llu%c", &a, &tail) != 1 || h[1] < '0' || h[1] > '9')
			return 0;
		if (!a || !size)
			return -1;
		*from = a >= size ? 0 : size - a;
		*to = size - 1;
		return 1;
	}
	if (h[0] < '0' || h[0] > '9')
		return 0;
	if (sscanf(h, "%llu-%c", &a, &tail) == 1 && h[strlen(h) - 1] == '-') {
		b = size ? size - 1 : 0;
	} else if (sscanf(h, "%llu-%llu%c", &a, &b, &tail) != 2 || b < a) {
		return 0;
	}
	if (a >= size)
		return -1;
	*from = a;
	*to = b >= size ? size - 1 : b;
	return 1;
}

static bool etag_match(const char *list, const char *etag)
{
	char want[64];
	const char *p = list;

	snprintf(want, sizeof(want), "\"%s\"", etag);
	while (*p) {
		const char *comma = strchr(p, ',');
		size_t n = comma ? (size_t)(comma - p) : strlen(p);

		while (n && (*p == ' ' || *p == '\t'))
			p++, n--;
		while (n && (p[n - 1] == ' ' || p[n - 1] == '\t'))
			n--;
		if ((n == 1 && *p == '*') || (n == strlen(want) && !strncmp(p, want, n)) ||
		    (n == strlen(etag) && !strncmp(p, etag, n)))
			return true;
		if (!comma)
			break;
		p = comma + 1;
	}
	return false;
}

/* The conditional headers: 0 go on, else the status to answer. */
static int conditions(const struct sv_req *r, const char *etag, time_t mtime)
{
	const char *im = sv_hdr(r, "If-Match"), *inm = sv_hdr(r, "If-None-Match");
	const char *ius = sv_hdr(r, "If-Unmodified-Since"), *ims = sv_hdr(r, "If-Modified-Since");

	if (im && !etag_match(im, etag))
		return 412;
	if (!im && ius) {
		time_t t = curl_getdate(ius, NULL);

		if (t >= 0 && mtime > t)
			return 412;
	}
	if (inm && etag_match(inm, etag))
		return 304;
	if (!inm && ims) {
		time_t t = curl_getdate(ims, NULL);

		if (t >= 0 && mtime <= t)
			return 304;
	}
	return 0;
}

static int get_object(struct call *k, int bfd)
{
	bool head = !strcmp(k->r->method, "HEAD");
	const char *pn = NULL;
	struct sv_meta m;
	struct stat st;
	struct s3_buf h;
	uint64_t from = 0, to = 0;
	int fd, ret, status = 200, rr = 0;
	char date[40];

	fd = sv_object_open(bfd, k->key);
	if (fd < 0)
		return fail_errno(k, fd);
	if (fstat(fd, &st) || (ret = sv_meta_get(fd, &m))) {
		ret = fail_errno(k, -EIO);
		close(fd);
		return ret;
	}
	s3_buf_init(&h, 0);
	sv_http_date(st.st_mtim.tv_sec, date);
	add_etag(&h, m.etag);
	s3_buf_printf(&h, "Last-Modified: %s\r\nAccept-Ranges: bytes\r\n", date);
	status = conditions(k->r, m.etag, st.st_mtim.tv_sec);
	if (status == 304) {
		ret = answer(k, 304, h.p, NULL, 0);
		goto out;
	}
	if (status == 412) {
		ret = fail(k, 412, "PreconditionFailed", "At least one of the pre-conditions you specified did not hold");
		goto out;
	}
	emit_headers(&h, m.headers);
	if (sv_query(k->r, "partNumber", &pn)) {
		char *end;
		unsigned long n = pn ? strtoul(pn, &end, 10) : 0;

		if (!pn || *end || !n || n > SV_PARTS_MAX) {
			ret = fail(k, 400, "InvalidArgument", "Part number must be an integer between 1 and 10000, inclusive");
			goto out;
		}
		if (m.parts && !m.part_size) {
			ret = fail(k, 501, "NotImplemented", "this object's parts are of unequal sizes; rds3 serve cannot give one");
			goto out;
		}
		if (n > (m.parts ? m.parts : 1)) {
			ret = fail(k, 416, "InvalidPartNumber", "The requested partnumber is not satisfiable");
			goto out;
		}
		if (m.parts) {
			s3_buf_printf(&h, "x-amz-mp-parts-count: %u\r\n", m.parts);
			from = (n - 1) * m.part_size;
			to = n == m.parts ? m.size - 1 : from + m.part_size - 1;
			rr = m.size ? 1 : 0;
		}
	} else {
		rr = parse_range(sv_hdr(k->r, "Range"), m.size, &from, &to);
	}
	if (rr < 0) {
		char cr[64];

		snprintf(cr, sizeof(cr), "Content-Range: bytes */%" PRIu64 "\r\n", m.size);
		ret = fail_h(k, 416, "InvalidRange", "The requested range is not satisfiable", cr);
		goto out;
	}
	if (rr > 0) {
		status = 206;
		s3_buf_printf(&h, "Content-Range: bytes %" PRIu64 "-%" PRIu64 "/%" PRIu64 "\r\n",
			      from, to, m.size);
	} else {
		from = 0;
		to = m.size ? m.size - 1 : 0;
		status = 200;
	}
	if (s3_buf_err(&h)) {
		ret = -ENOMEM;
		goto out;
	}
	{
		uint64_t len = m.size ? to - from + 1 : 0;

		ret = sv_send_head(k->c, k->r, status, h.p, true, len);
		k->status = status;
		if (!ret && !head && len)
			ret = sv_sendfile(k->c, fd, from, len);
		k->sent = head ? 0 : len;
	}
out:
	s3_buf_release(&h);
	sv_meta_release(&m);
	close(fd);
	return ret;
}

static int put_object(struct call *k, int bfd)
{
	struct sv_meta m = { 0 };
	unsigned char md5[16];
	struct sv_put p;
	struct s3_buf h;
	uint64_t size;
	int ret;

	if (object_headers(k->r, &m.headers))
		return fail(k, 400, "MetadataTooLarge", "Your metadata headers exceed the maximum allowed metadata size");
	ret = sv_put_begin(bfd, k->key, &p);
	if (ret) {
		sv_meta_release(&m);
		return fail_errno(k, ret);
	}
	ret = take_body(k, p.fd, SV_PUT_MAX, md5, &size);
	if (ret) {
		sv_put_abort(&p);
		sv_meta_release(&m);
		return ret < 0 ? ret : 0;
	}
	rdx_hex_encode(md5, 16, m.etag);
	ret = sv_meta_set(p.fd, &m);
	if (ret == -ENOTSUP && !m.headers)
		ret = 0; /* the ETag is computed again when asked */
	if (ret == -ENOTSUP)
		ret = -EOPNOTSUPP;
	if (!ret)
		ret = sv_put_commit(&p, k->s->file_mode);
	else
		sv_put_abort(&p);
	if (ret == -EOPNOTSUPP)
		ret = fail(k, 501, "NotImplemented",
			   "the served directory's file system keeps no extended attributes, so this object's headers (Content-Type, x-amz-meta-*) cannot be kept");
	else if (ret)
		ret = fail_errno(k, ret);
	else {
		s3_buf_init(&h, 0);
		add_etag(&h, m.etag);
		add_checksum(&h, k);
		ret = s3_buf_err(&h) ? -ENOMEM : answer(k, 200, h.p, NULL, 0);
		s3_buf_release(&h);
	}
	sv_meta_release(&m);
	return ret;
}

/* "/bucket/key" or "bucket/key", URL-encoded, into bucket and key. */
static int copy_source(const char *src, char *bucket, size_t blen, char **key)
{
	struct s3_buf b;
	char *slash;

	s3_buf_init(&b, SV_KEY_MAX + 128);
	if (*src == '/')
		src++;
	if (strchr(src, '?') || s3_uri_decode(&b, src, strlen(src)) ||
	    strlen(s3_buf_str(&b)) != b.len || !(slash = strchr(s3_buf_str(&b), '/')) ||
	    (size_t)(slash - b.p) >= blen) {
		s3_buf_release(&b);
		return -EINVAL;
	}
	memcpy(bucket, b.p, (size_t)(slash - b.p));
	bucket[slash - b.p] = '\0';
	*key = strdup(slash + 1);
	s3_buf_release(&b);
	if (!*key)
		return -ENOMEM;
	return sv_bucket_ok(bucket) && !sv_key_ok(*key) ? 0 : -EINVAL;
}

/* Copies len bytes of in from off to out from 0, hashing them. */
static int copy_range(int in, uint64_t off, uint64_t len, int out, unsigned char md5[16])
{
	EVP_MD_CTX *m = EVP_MD_CTX_new();
	char *buf = malloc(IO_BUF);
	uint64_t done = 0;
	int ret = 0;

	if (!m || !buf || !EVP_DigestInit_ex(m, EVP_md5(), NULL)) {
		ret = -ENOMEM;
		goto out;
	}
	while (done < len) {
		size_t n = len - done > IO_BUF ? IO_BUF : (size_t)(len - done);
		ssize_t got = rdx_pread_full(in, buf, n, (off_t)(off + done));

		if (got < 0 || (size_t)got != n) {
			ret = got < 0 ? (int)got : -EIO;
			goto out;
		}
		EVP_DigestUpdate(m, buf, n);
		if (rdx_pwrite_full(out, buf, n, (off_t)done) < 0) {
			ret = -errno;
			goto out;
		}
		done += n;
	}
	EVP_DigestFinal_ex(m, md5, NULL);
out:
	EVP_MD_CTX_free(m);
	free(buf);
	return ret;
}

/* Opens x-amz-copy-source for a copy: its descriptor into *sfd and its
 * meta into *sm, checked against x-amz-copy-source-if-match; *self when
 * it is the request's own object.  Returns 0, or an answer was sent (1)
 * or could not be (-EIO). */
static int copy_source_open(struct call *k, int *sfd, struct sv_meta *sm, bool *self)
{
	const char *im = sv_hdr(k->r, "x-amz-copy-source-if-match");
	char sbucket[64];
	char *skey = NULL;
	int sb, ret;

	if (copy_source(sv_hdr(k->r, "x-amz-copy-source"), sbucket, sizeof(sbucket), &skey)) {
		free(skey);
		return fail(k, 400, "InvalidArgument", "Copy Source must mention the source bucket and key: sourcebucket/sourcekey") ? -EIO : 1;
	}
	*self = !strcmp(sbucket, k->bucket) && !strcmp(skey, k->key);
	sb = sv_bucket_open(k->s->root, sbucket);
	*sfd = sb >= 0 ? sv_object_open(sb, skey) : sb;
	if (sb >= 0)
		close(sb);
	free(skey);
	if (*sfd < 0)
		return fail(k, 404, sb < 0 ? "NoSuchBucket" : "NoSuchKey", "The copy source does not exist.") ? -EIO : 1;
	if ((ret = sv_meta_get(*sfd, sm))) {
		close(*sfd);
		return fail_errno(k, ret) ? -EIO : 1;
	}
	if (im && !etag_match(im, sm->etag)) {
		close(*sfd);
		sv_meta_release(sm);
		return fail(k, 412, "PreconditionFailed", "At least one of the pre-conditions you specified did not hold") ? -EIO : 1;
	}
	return 0;
}

static int copy_object(struct call *k, int bfd)
{
	char date[40];
	const char *dir = sv_hdr(k->r, "x-amz-metadata-directive");
	bool replace = dir && !strcmp(dir, "REPLACE"), self;
	struct sv_meta sm, m = { 0 };
	unsigned char md5[16];
	struct sv_put p;
	struct s3_buf b;
	struct stat st;
	int sfd, ret;

	if ((ret = copy_source_open(k, &sfd, &sm, &self)))
		return ret < 0 ? ret : 0;
	if (self && !replace) {
		close(sfd);
		sv_meta_release(&sm);
		return fail(k, 400, "InvalidRequest",
			    "This copy request is illegal because it is trying to copy an object to itself without changing the object's metadata, storage class, website redirect location or encryption attributes.");
	}
	if (replace) {
		if (object_headers(k->r, &m.headers)) {
			close(sfd);
			sv_meta_release(&sm);
			return fail(k, 400, "MetadataTooLarge", "Your metadata headers exceed the maximum allowed metadata size");
		}
	} else if (sm.headers && !(m.headers = strdup(sm.headers))) {
		ret = -ENOMEM;
	}
	if (!ret)
		ret = sv_put_begin(bfd, k->key, &p);
	if (ret) {
		close(sfd);
		sv_meta_release(&sm);
		sv_meta_release(&m);
		return fail_errno(k, ret);
	}
	sv_body_skip(k->c, k->r, 1 << 20);
	ret = copy_range(sfd, 0, sm.size, p.fd, md5);
	close(sfd);
	sv_meta_release(&sm);
	if (!ret) {
		rdx_hex_encode(md5, 16, m.etag);
		ret = sv_meta_set(p.fd, &m);
		if (ret == -ENOTSUP && !m.headers)
			ret = 0;
	}
	if (!ret)
		ret = sv_put_commit(&p, k->s->file_mode);
	else
		sv_put_abort(&p);
	if (ret) {
		sv_meta_release(&m);
		return fail_errno(k, ret == -ENOTSUP ? -EIO : ret);
	}
	sfd = sv_object_open(bfd, k->key);
	st.st_mtim.tv_sec = time(NULL);
	if (sfd >= 0) {
		fstat(sfd, &st);
		close(sfd);
	}
	sv_iso_date(st.st_mtim.tv_sec, date);
	s3_buf_init(&b, 0);
	s3_buf_printf(&b, XML_HEAD "<CopyObjectResult xmlns=\"" XMLNS "\"><LastModified>%s</LastModified>"
			  "<ETag>&quot;%s&quot;</ETag></CopyObjectResult>", date, m.etag);
	ret = xml_answer(k, 200, &b);
	s3_buf_release(&b);
	sv_meta_release(&m);
	return ret;
}

/* ---------------------------------------------------------- multipart */

/* DIR/.rds3-uploads, made when asked; never through a symlink put
 * there.  Returns an O_PATH descriptor or -errno. */
static int uploads_fd(int root, bool make)
{
	int fd;

	if (make && mkdirat(root, UPLOADS, 0700) && errno != EEXIST)
		return -errno;
	fd = openat(root, UPLOADS, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

/* Opens upload id's directory in DIR/.rds3-uploads. */
static int upload_dir(int root, const char *id)
{
	int u = uploads_fd(root, false), up;

	if (u < 0)
		return u;
	up = openat(u, id, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	up = up < 0 ? -errno : up;
	close(u);
	return up;
}

/* The upload's directory, when id is one of this bucket and key's. */
static int upload_open(struct call *k, const char *id)
{
	char info[SV_KEY_MAX + 128], want[SV_KEY_MAX + 128];
	int up, fd;
	ssize_t n;

	if (!id || strlen(id) != 32)
		return -ENOENT;
	if (!rdx_hex_is(id, 32))
		return -ENOENT;
	up = upload_dir(k->s->root, id);
	if (up < 0)
		return -ENOENT;
	fd = openat(up, "key", O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	n = fd >= 0 ? rdx_pread_full(fd, info, sizeof(info) - 1, 0) : -1;
	if (fd >= 0)
		close(fd);
	snprintf(want, sizeof(want), "%s\n%s\n", k->bucket, k->key);
	if (n < 0 || (size_t)n != strlen(want) || memcmp(info, want, (size_t)n)) {
		close(up);
		return -ENOENT;
	}
	return up;
}

static int no_upload(struct call *k)
{
	return fail(k, 404, "NoSuchUpload",
		    "The specified upload does not exist. The upload ID may be invalid, or the upload may have been aborted or completed.");
}

static int remove_upload(int root, const char *id)
{
	int up, u, ret;
	DIR *d;
	struct dirent *de;

	up = upload_dir(root, id);
	if (up < 0)
		return up;
	d = fdopendir(up);
	if (!d) {
		close(up);
		return -errno;
	}
	while ((de = readdir(d)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
			unlinkat(dirfd(d), de->d_name, 0);
	closedir(d);
	u = uploads_fd(root, false);
	if (u < 0)
		return u;
	ret = unlinkat(u, id, AT_REMOVEDIR) ? -errno : 0;
	close(u);
	return ret;
}

/* Removes the incomplete multipart uploads begun more than
 * o->upload_expiry_days ago, as S3's AbortIncompleteMultipartUpload rule
 * does (an upload's "key" file is written when it begins).  At the start
 * nothing is in flight: the temporaries a killed server left in the
 * uploads that stay (parts written under a name, where the file system
 * has no O_TMPFILE) are removed too. */
static void sweep_uploads(struct server *s, bool at_start)
{
	time_t now = time(NULL), max_age = (time_t)s->o->upload_expiry_days * 86400;
	int u = uploads_fd(s->root, false);
	int fd = u < 0 ? -1 : openat(u, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	unsigned expired = 0, temps = 0;
	struct dirent *de;

	if (!d && fd >= 0)
		close(fd);
	while (d && (de = readdir(d))) {
		struct stat st;
		int up;

		if (strlen(de->d_name) != 32)
			continue;
		up = openat(u, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (up < 0)
			continue;
		if (max_age && (fstatat(up, "key", &st, AT_SYMLINK_NOFOLLOW) ||
				now - st.st_mtime > max_age)) {
			close(up);
			if (!remove_upload(s->root, de->d_name))
				expired++;
			continue;
		}
		if (at_start) {
			DIR *ud = fdopendir(up);
			struct dirent *pe;

			while (ud && (pe = readdir(ud)))
				if (sv_is_temp(pe->d_name) && !unlinkat(dirfd(ud), pe->d_name, 0))
					temps++;
			if (ud)
				closedir(ud);
			else
				close(up);
		} else {
			close(up);
		}
	}
	if (d)
		closedir(d);
	if (u >= 0)
		close(u);
	if (expired)
		rdx_info(1, "removed %u incomplete multipart upload%s begun over %u day%s ago",
			 expired, expired == 1 ? "" : "s", s->o->upload_expiry_days,
			 s->o->upload_expiry_days == 1 ? "" : "s");
	if (temps)
		rdx_info(1, "removed %u temporar%s left in uploads by an earlier run", temps,
			 temps == 1 ? "y" : "ies");
}

/* Removes the open uploads of bucket. */
static void drop_uploads(int root, const char *bucket)
{
	int u = uploads_fd(root, false);
	int fd = u < 0 ? -1 : openat(u, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	size_t bl = strlen(bucket);
	struct dirent *de;

	if (!d && fd >= 0)
		close(fd);
	while (d && (de = readdir(d))) {
		char info[80];
		ssize_t n;
		int up, f;

		if (strlen(de->d_name) != 32)
			continue;
		up = openat(u, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (up < 0)
			continue;
		f = openat(up, "key", O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
		n = f >= 0 ? rdx_pread_full(f, info, sizeof(info), 0) : -1;
		if (f >= 0)
			close(f);
		close(up);
		if (n > (ssize_t)bl && !memcmp(info, bucket, bl) && info[bl] == '\n')
			remove_upload(root, de->d_name);
	}
	if (d)
		closedir(d);
	if (u >= 0)
		close(u);
}

static int create_upload(struct call *k)
{
	unsigned char rnd[16];
	char id[33];
	char *hdrs = NULL;
	struct s3_buf b;
	int u, up, fd, ret;

	if (object_headers(k->r, &hdrs))
		return fail(k, 400, "MetadataTooLarge", "Your metadata headers exceed the maximum allowed metadata size");
	sv_body_skip(k->c, k->r, 1 << 20);
	if (getrandom(rnd, sizeof(rnd), 0) != sizeof(rnd)) {
		free(hdrs);
		return fail_errno(k, -EIO);
	}
	rdx_hex_encode(rnd, 16, id);
	u = uploads_fd(k->s->root, true);
	up = u < 0 ? u : mkdirat(u, id, 0700) ? -errno : upload_dir(k->s->root, id);
	if (u >= 0)
		close(u);
	if (up < 0) {
		free(hdrs);
		return fail_errno(k, up == -ENOTDIR || up == -ELOOP ? -EIO : up);
	}
	s3_buf_init(&b, 0);
	s3_buf_printf(&b, "%s\n%s\n", k->bucket, k->key);
	fd = openat(up, "key", O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	ret = fd < 0 || rdx_write_full(fd, b.p, b.len, NULL) < 0 ? -EIO : 0;
	if (fd >= 0)
		close(fd);
	fd = ret ? -1 : openat(up, "headers", O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (!ret && (fd < 0 || (hdrs && rdx_write_full(fd, hdrs, strlen(hdrs), NULL) < 0)))
		ret = -EIO;
	if (fd >= 0)
		close(fd);
	close(up);
	free(hdrs);
	if (ret) {
		remove_upload(k->s->root, id);
		s3_buf_release(&b);
		return fail_errno(k, ret);
	}
	s3_buf_reset(&b);
	s3_buf_printf(&b, XML_HEAD "<InitiateMultipartUploadResult xmlns=\"" XMLNS "\"><Bucket>%s</Bucket><Key>",
		      k->bucket);
	sv_xml_esc(&b, k->key);
	s3_buf_printf(&b, "</Key><UploadId>%s</UploadId></InitiateMultipartUploadResult>", id);
	ret = xml_answer(k, 200, &b);
	s3_buf_release(&b);
	return ret;
}

/* UploadPartCopy: the part is x-amz-copy-source's bytes, all of them or
 * x-amz-copy-source-range's.  0, or an answer was sent (1). */
static int copy_part(struct call *k, int out, unsigned char md5[16])
{
	const char *range = sv_hdr(k->r, "x-amz-copy-source-range");
	struct sv_meta sm;
	uint64_t from = 0, to = 0;
	int sfd, ret;
	bool self;

	if ((ret = copy_source_open(k, &sfd, &sm, &self)))
		return ret;
	sv_meta_release(&sm); /* its headers; etag and size stay */
	if (range) {
		unsigned long long a, b;
		char tail;

		if (sscanf(range, "bytes=%llu-%llu%c", &a, &b, &tail) != 2 || b < a || b >= sm.size) {
			close(sfd);
			return fail(k, 400, "InvalidArgument", "The x-amz-copy-source-range value must be of the form bytes=first-last where first and last are the zero-based offsets of the first and last bytes to copy") ? -EIO : 1;
		}
		from = a;
		to = b + 1;
	} else {
		to = sm.size;
	}
	if (to - from > SV_PUT_MAX) {
		close(sfd);
		return fail(k, 400, "EntityTooLarge", "Your proposed upload exceeds the maximum allowed size") ? -EIO : 1;
	}
	sv_body_skip(k->c, k->r, 1 << 20);
	ret = copy_range(sfd, from, to - from, out, md5);
	close(sfd);
	if (ret)
		return fail_errno(k, ret) ? -EIO : 1;
	return 0;
}

static int upload_part(struct call *k, const char *id, const char *pn)
{
	char name[16], *end;
	unsigned long n = pn ? strtoul(pn, &end, 10) : 0;
	struct sv_meta m = { 0 };
	unsigned char md5[16];
	struct sv_put p = { .dir = -1, .fd = -1 };
	struct s3_buf h;
	uint64_t size;
	int up, ret;

	if (!pn || *end || !n || n > SV_PARTS_MAX)
		return fail(k, 400, "InvalidArgument", "Part number must be an integer between 1 and 10000, inclusive");
	up = upload_open(k, id);
	if (up < 0)
		return no_upload(k);
	snprintf(name, sizeof(name), "%05lu", n);
	ret = sv_put_begin_at(up, name, &p);
	if (ret) {
		sv_put_abort(&p);
		return fail_errno(k, ret);
	}
	if (sv_hdr(k->r, "x-amz-copy-source"))
		ret = copy_part(k, p.fd, md5);
	else
		ret = take_body(k, p.fd, SV_PUT_MAX, md5, &size);
	if (ret) {
		sv_put_abort(&p);
		return ret < 0 ? ret : 0;
	}
	rdx_hex_encode(md5, 16, m.etag);
	ret = sv_meta_set(p.fd, &m);
	if (ret == -ENOTSUP)
		ret = 0;
	if (!ret)
		ret = sv_put_commit(&p, 0600);
	else
		sv_put_abort(&p);
	if (ret)
		return fail_errno(k, ret);
	s3_buf_init(&h, 0);
	if (sv_hdr(k->r, "x-amz-copy-source")) {
		char date[40];

		sv_iso_date(time(NULL), date);
		s3_buf_printf(&h, XML_HEAD "<CopyPartResult xmlns=\"" XMLNS "\"><LastModified>%s</LastModified>"
				  "<ETag>&quot;%s&quot;</ETag></CopyPartResult>", date, m.etag);
		ret = xml_answer(k, 200, &h);
	} else {
		add_etag(&h, m.etag);
		add_checksum(&h, k);
		ret = s3_buf_err(&h) ? -ENOMEM : answer(k, 200, h.p, NULL, 0);
	}
	s3_buf_release(&h);
	return ret;
}

static int complete_upload(struct call *k, int bfd, const char *id)
{
	struct s3_list parts = { 0 };
	EVP_MD_CTX *all = NULL;
	struct sv_meta m = { 0 };
	struct sv_put p = { .dir = -1, .fd = -1 };
	uint64_t off = 0, first = 0;
	bool equal = true;
	char *xml = NULL;
	unsigned char md[16];
	struct s3_buf b;
	size_t n, i;
	int up, ret, hfd;

	up = upload_open(k, id);
	if (up < 0)
		return no_upload(k);
	if ((ret = take_xml(k, false, &xml, &n))) {
		close(up);
		return ret < 0 ? ret : 0;
	}
	ret = s3_xml_complete_request(xml, n, &parts);
	free(xml);
	if (ret || !parts.n || parts.n > SV_PARTS_MAX) {
		ret = fail(k, 400, "MalformedXML",
			   "The XML you provided was not well-formed or did not validate against our published schema");
		goto out;
	}
	for (i = 1; i < parts.n; i++)
		if (parts.v[i].size <= parts.v[i - 1].size) {
			ret = fail(k, 400, "InvalidPartOrder", "The list of parts was not in ascending order. The parts list must be specified in order by part number.");
			goto out;
		}
	hfd = openat(up, "headers", O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (hfd >= 0) {
		char hb[SV_HEADERS_MAX + 1];
		ssize_t hn = rdx_pread_full(hfd, hb, sizeof(hb) - 1, 0);

		close(hfd);
		if (hn > 0) {
			hb[hn] = '\0';
			m.headers = strdup(hb);
		}
	}
	ret = sv_put_begin(bfd, k->key, &p);
	if (ret) {
		ret = fail_errno(k, ret);
		goto out;
	}
	all = EVP_MD_CTX_new();
	if (!all || !EVP_DigestInit_ex(all, EVP_md5(), NULL)) {
		ret = fail_errno(k, -ENOMEM);
		goto out;
	}
	for (i = 0; i < parts.n; i++) {
		char name[16], want[48];
		const char *e = parts.v[i].name;
		struct sv_meta pm;
		unsigned char bin[16];
		size_t el = strlen(e);
		int fd;

		if (el >= 2 && e[0] == '"' && e[el - 1] == '"')
			snprintf(want, sizeof(want), "%.*s", (int)(el - 2), e + 1);
		else
			snprintf(want, sizeof(want), "%s", e);
		snprintf(name, sizeof(name), "%05" PRIu64, parts.v[i].size);
		fd = openat(up, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0 || sv_meta_get(fd, &pm) || strcmp(pm.etag, want)) {
			if (fd >= 0) {
				sv_meta_release(&pm);
				close(fd);
			}
			ret = fail(k, 400, "InvalidPart",
				   "One or more of the specified parts could not be found. The part may not have been uploaded, or the specified entity tag may not have matched the part's entity tag.");
			goto out;
		}
		sv_meta_release(&pm);
		if (i + 1 < parts.n && pm.size < SV_PART_MIN) {
			close(fd);
			ret = fail(k, 400, "EntityTooSmall", "Your proposed upload is smaller than the minimum allowed object size.");
			goto out;
		}
		if (!i)
			first = pm.size;
		else if (i + 1 < parts.n ? pm.size != first : pm.size > first)
			equal = false;
		rdx_hex_decode(want, 16, bin); /* checked by etag_ok */
		EVP_DigestUpdate(all, bin, 16);
		{
			uint64_t left = pm.size;
			loff_t in = 0, o = (loff_t)off;

			while (left) {
				ssize_t c = copy_file_range(fd, &in, p.fd, &o, left > (1u << 30) ? 1u << 30 : (size_t)left, 0);

				if (c <= 0) {
					ret = c < 0 ? -errno : -EIO;
					break;
				}
				left -= (uint64_t)c;
			}
		}
		close(fd);
		if (ret) {
			ret = fail_errno(k, ret);
			goto out;
		}
		off += pm.size;
	}
	EVP_DigestFinal_ex(all, md, NULL);
	rdx_hex_encode(md, 16, m.etag);
	snprintf(m.etag + 32, sizeof(m.etag) - 32, "-%zu", parts.n);
	m.parts = (unsigned)parts.n;
	m.part_size = equal ? first : 0;
	ret = sv_meta_set(p.fd, &m);
	if (ret == -ENOTSUP && !m.headers)
		ret = 0;
	if (!ret)
		ret = sv_put_commit(&p, k->s->file_mode);
	if (ret) {
		ret = fail_errno(k, ret == -ENOTSUP ? -EIO : ret);
		goto out;
	}
	close(up);
	up = -1;
	remove_upload(k->s->root, id);
	s3_buf_init(&b, 0);
	s3_buf_printf(&b, XML_HEAD "<CompleteMultipartUploadResult xmlns=\"" XMLNS "\"><Location>/%s/", k->bucket);
	sv_xml_esc(&b, k->key);
	s3_buf_printf(&b, "</Location><Bucket>%s</Bucket><Key>", k->bucket);
	sv_xml_esc(&b, k->key);
	s3_buf_printf(&b, "</Key><ETag>&quot;%s&quot;</ETag></CompleteMultipartUploadResult>", m.etag);
	ret = xml_answer(k, 200, &b);
	s3_buf_release(&b);
out:
	sv_put_abort(&p);
	EVP_MD_CTX_free(all);
	s3_list_release(&parts);
	sv_meta_release(&m);
	if (up >= 0)
		close(up);
	return ret;
}

static int list_uploads(struct call *k)
{
	int u = uploads_fd(k->s->root, false);
	int fd = u < 0 ? -1 : openat(u, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	struct dirent *de;
	struct s3_buf b;
	size_t count = 0;
	bool more = false;
	int ret;

	s3_buf_init(&b, 0);
	s3_buf_printf(&b, XML_HEAD "<ListMultipartUploadsResult xmlns=\"" XMLNS "\"><Bucket>%s</Bucket>"
			  "<MaxUploads>1000</MaxUploads>", k->bucket);
	while (d && (de = readdir(d))) {
		char info[SV_KEY_MAX + 128], date[40];
		struct stat st;
		char *nl;
		ssize_t n;
		int up, f;

		if (strlen(de->d_name) != 32)
			continue;
		up = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (up < 0)
			continue;
		f = openat(up, "key", O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
		n = f >= 0 ? rdx_pread_full(f, info, sizeof(info) - 1, 0) : -1;
		if (f >= 0)
			close(f);
		if (fstat(up, &st))
			n = -1;
		close(up);
		if (n <= 0)
			continue;
		info[n] = '\0';
		nl = strchr(info, '\n');
		if (!nl || (size_t)(nl - info) != strlen(k->bucket) ||
		    strncmp(info, k->bucket, (size_t)(nl - info)))
			continue;
		if (count == 1000) {
			more = true;
			break;
		}
		count++;
		nl[strlen(nl) - 1] = '\0'; /* the key's newline */
		sv_iso_date(st.st_mtim.tv_sec, date);
		s3_buf_adds(&b, "<Upload><Key>");
		sv_xml_esc(&b, nl + 1);
		s3_buf_printf(&b, "</Key><UploadId>%s</UploadId><Initiated>%s</Initiated>"
				  "<StorageClass>STANDARD</StorageClass></Upload>", de->d_name, date);
	}
	if (d)
		closedir(d);
	else if (fd >= 0)
		close(fd);
	if (u >= 0)
		close(u);
	s3_buf_printf(&b, "<IsTruncated>%s</IsTruncated></ListMultipartUploadsResult>", more ? "true" : "false");
	ret = xml_answer(k, 200, &b);
	s3_buf_release(&b);
	return ret;
}

/* Whether every query parameter is one this server acts on for the
 * method: a sub-resource it does not keep (?acl, ?tagging, ?retention,
 * ...) must not read or replace the object as if it were absent.
 * Returns 0 to go on; else an answer was sent (1) or -errno.  GET
 * ?tagging answers an empty tag set, which is what this server keeps. */
static int object_query_ok(struct call *k)
{
	const char *m = k->r->method;
	bool get = !strcmp(m, "GET") || !strcmp(m, "HEAD");
	size_t i;

	for (i = 0; i < k->r->nquery; i++) {
		const char *n = k->r->query[i].name;

		if (!strncmp(n, "X-Amz-", 6) || !strcmp(n, "x-id") ||
		    (get && (!strcmp(n, "partNumber") || !strncmp(n, "response-", 9))) ||
		    (!strcmp(m, "PUT") && (!strcmp(n, "partNumber") || !strcmp(n, "uploadId"))) ||
		    (!strcmp(m, "DELETE") && !strcmp(n, "uploadId")) ||
		    (!strcmp(m, "POST") && (!strcmp(n, "uploads") || !strcmp(n, "uploadId"))) ||
		    (get && !strcmp(n, "uploadId")))
			continue;
		if (!strcmp(n, "versionId") && k->r->query[i].value &&
		    !strcmp(k->r->query[i].value, "null"))
			continue; /* the one version an unversioned bucket has */
		if (!strcmp(m, "GET") && !strcmp(n, "tagging") && k->r->nquery == 1) {
			struct s3_buf b;
			int ret, fd = -1, bfd;

			if ((ret = bucket_fd(k, &bfd)) || bfd < 0)
				return ret < 0 ? ret : 1;
			fd = sv_object_open(bfd, k->key);
			close(bfd);
			if (fd < 0)
				return fail_errno(k, fd) ? -EIO : 1;
			close(fd);
			s3_buf_init(&b, 0);
			s3_buf_adds(&b, XML_HEAD "<Tagging xmlns=\"" XMLNS "\"><TagSet></TagSet></Tagging>");
			ret = xml_answer(k, 200, &b);
			s3_buf_release(&b);
			return ret ? ret : 1;
		}
		return fail(k, 501, "NotImplemented",
			    "rds3 serve does not implement this sub-resource or parameter") ? -EIO : 1;
	}
	return 0;
}

static int object_op(struct call *k)
{
	const char *m = k->r->method, *id = NULL, *pn = NULL;
	int bfd, ret;

	if ((ret = sv_key_ok(k->key)))
		return ret == -ENAMETOOLONG
			       ? fail(k, 400, "KeyTooLongError", "Your key is too long")
			       : fail(k, 400, "InvalidArgument",
				      "rds3 serve keeps keys as file paths: no empty, '.' or '..' component, none over 255 bytes, no control characters");
	if ((ret = object_query_ok(k)))
		return ret > 0 ? 0 : ret;
	if ((ret = bucket_fd(k, &bfd)) || bfd < 0)
		return ret;
	sv_query(k->r, "uploadId", &id);
	sv_query(k->r, "partNumber", &pn);
	if (!strcmp(m, "GET") || !strcmp(m, "HEAD"))
		ret = sv_query(k->r, "uploadId", NULL)
			      ? fail(k, 501, "NotImplemented", "rds3 serve does not implement ListParts")
			      : get_object(k, bfd);
	else if (!strcmp(m, "PUT") && sv_query(k->r, "uploadId", NULL))
		ret = upload_part(k, id, pn);
	else if (!strcmp(m, "PUT") && sv_hdr(k->r, "x-amz-copy-source"))
		ret = copy_object(k, bfd);
	else if (!strcmp(m, "PUT"))
		ret = put_object(k, bfd);
	else if (!strcmp(m, "DELETE") && sv_query(k->r, "uploadId", NULL)) {
		int up = upload_open(k, id);

		if (up < 0) {
			ret = no_upload(k);
		} else {
			close(up);
			remove_upload(k->s->root, id);
			ret = answer(k, 204, NULL, NULL, 0);
		}
	} else if (!strcmp(m, "DELETE")) {
		ret = sv_object_delete(bfd, k->key);
		ret = ret ? fail_errno(k, ret) : answer(k, 204, NULL, NULL, 0);
	} else if (!strcmp(m, "POST") && sv_query(k->r, "uploads", NULL))
		ret = create_upload(k);
	else if (!strcmp(m, "POST") && sv_query(k->r, "uploadId", NULL))
		ret = complete_upload(k, bfd, id);
	else
		ret = fail(k, 405, "MethodNotAllowed", "The specified method is not allowed against this resource.");
	close(bfd);
	return ret;
}

/* --------------------------------------------------------- connections */

static int handle(struct call *k)
{
	struct sv_req *r = k->r;
	const char *code, *p, *slash;
	char msg[256];
	int st;

	st = sv_auth_check(&k->s->auth, r, &k->payload, &code, msg, sizeof(msg));
	if (st)
		return fail(k, st, code, msg);
	p = r->path + 1;
	if (!*p)
		return !strcmp(r->method, "GET")
			       ? list_buckets(k)
			       : fail(k, 405, "MethodNotAllowed", "The specified method is not allowed against this resource.");
	slash = strchr(p, '/');
	if ((size_t)(slash ? slash - p : (ptrdiff_t)strlen(p)) >= sizeof(k->bucket))
		return fail(k, 400, "InvalidBucketName", "The specified bucket is not valid.");
	snprintf(k->bucket, sizeof(k->bucket), "%.*s", (int)(slash ? slash - p : (ptrdiff_t)strlen(p)), p);
	if (!sv_bucket_ok(k->bucket))
		return fail(k, 400, "InvalidBucketName", "The specified bucket is not valid.");
	if (!slash || !slash[1])
		return bucket_op(k);
	k->key = slash + 1;
	return object_op(k);
}

struct conn_arg {
	struct server *s;
	int fd;
	char peer[64];
	struct addr_count *from; /* its address's count (lock) */
};

/* Counts a connection from host, unless host has max_per_addr already.
 * Under s->lock.  The entry counted, or NULL. */
static struct addr_count *addr_take(struct server *s, const char *host)
{
	struct addr_count *free_one = NULL;
	unsigned i;

	for (i = 0; i < s->o->max_conns; i++) {
		struct addr_count *a = &s->addrs[i];

		if (a->n && !strcmp(a->host, host)) {
			if (a->n >= s->o->max_per_addr)
				return NULL;
			a->n++;
			return a;
		}
		if (!a->n && !free_one)
			free_one = a;
	}
	if (!free_one) /* cannot be: active < max_conns */
		return NULL;
	snprintf(free_one->host, sizeof(free_one->host), "%s", host);
	free_one->n = 1;
	return free_one;
}

static void *conn_main(void *arg)
{
	struct conn_arg *a = arg;
	struct server *s = a->s;
	struct sv_conn *c = calloc(1, sizeof(*c));
	struct sv_req *r = calloc(1, sizeof(*r));

	if (c && r) {
		c->fd = a->fd;
		c->timeout_secs = s->o->timeout_secs;
		c->header_secs = s->o->header_secs;
		c->stop = s->o->stop;
		c->shed = &s->shed;
		snprintf(c->peer, sizeof(c->peer), "%s", a->peer);
		while (!c->broken) {
			struct call k = { .s = s, .c = c, .r = r };
			int ret = sv_read_request(c, r);

			if (ret == 1 || ret == -ECONNRESET || ret == -ETIMEDOUT ||
			    ret == -ECANCELED ||
			    (ret < 0 && ret != -E2BIG && ret != -RDX_EPROTO && ret != -EILSEQ)) {
				sv_req_release(r);
				break;
			}
			if (ret == -EILSEQ) { /* a NUL in the path or query */
				c->broken = true;
				r->keep_alive = false;
				fail(&k, 400, "InvalidArgument", "a key or parameter cannot hold a NUL byte");
				sv_req_release(r);
				break;
			}
			if (ret) {
				c->broken = true;
				r->keep_alive = false;
				r->method = r->method ? r->method : "GET";
				fail(&k, ret == -E2BIG ? 431 : 400,
				     ret == -E2BIG ? "RequestHeaderSectionTooLarge" : "BadRequest",
				     "the request is not HTTP/1.1 as rds3 serve reads it");
				sv_req_release(r);
				break;
			}
			ret = handle(&k);
			if (s->o->verbose)
				rdx_info(0, "%s %s %s%s%s %d %" PRIu64, c->peer, r->method,
					 r->raw_path, r->raw_query ? "?" : "",
					 r->raw_query ? r->raw_query : "", k.status, k.sent);
			if (ret < 0 || !r->keep_alive || !r->body_end)
				c->broken = true;
			sv_req_release(r);
		}
	}
	close(a->fd);
	free(c);
	free(r);
	pthread_mutex_lock(&s->lock);
	a->from->n--;
	s->active--;
	pthread_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->lock);
	free(a);
	return NULL;
}

static int listen_on(const struct s3_serve_opts *o, char *url, size_t urllen)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
				  .ai_flags = AI_PASSIVE | AI_NUMERICHOST | AI_NUMERICSERV };
	struct addrinfo *ai;
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	char port[16], host[INET6_ADDRSTRLEN];
	int fd, one = 1, err;

	snprintf(port, sizeof(port), "%u", o->port);
	err = getaddrinfo(o->listen, port, &hints, &ai);
	if (err) {
		rdx_error("cannot listen on '%s': not a numeric address", o->listen);
		return -EINVAL;
	}
	fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd >= 0)
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (fd < 0 || bind(fd, ai->ai_addr, ai->ai_addrlen) || listen(fd, 128) ||
	    getsockname(fd, (struct sockaddr *)&ss, &sl)) {
		err = -errno;
		rdx_error("cannot listen on %s port %u: %s", o->listen, o->port, strerror(errno));
		if (fd >= 0)
			close(fd);
		freeaddrinfo(ai);
		return err;
	}
	freeaddrinfo(ai);
	if (ss.ss_family == AF_INET6) {
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;

		inet_ntop(AF_INET6, &s6->sin6_addr, host, sizeof(host));
		snprintf(url, urllen, "http://[%s]:%u", host, ntohs(s6->sin6_port));
	} else {
		struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;

		inet_ntop(AF_INET, &s4->sin_addr, host, sizeof(host));
		snprintf(url, urllen, "http://%s:%u", host, ntohs(s4->sin_port));
	}
	return fd;
}

int s3_serve(const struct s3_serve_opts *o)
{
	struct server s = { .o = o };
	char url[128];
	pthread_attr_t attr;
	time_t swept;
	mode_t um;
	int lfd;

	s.auth.access_key = o->no_sign ? NULL : o->access_key;
	s.auth.secret_key = o->no_sign ? NULL : o->secret_key;
	s.root = open(o->root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (s.root < 0) {
		rdx_error("cannot serve '%s': %s", o->root, strerror(errno));
		return RDX_EXIT_IO;
	}
	/* Uploads are never written through a symlink (uploads_fd): one
	 * there would fail every multipart upload with a 500, which clients
	 * retry.  Say so once, now. */
	{
		struct stat st;

		if (!fstatat(s.root, UPLOADS, &st, AT_SYMLINK_NOFOLLOW) && !S_ISDIR(st.st_mode)) {
			rdx_error("cannot serve '%s': '%s/%s' is %s, not a directory (remove it)",
				  o->root, o->root, UPLOADS,
				  S_ISLNK(st.st_mode) ? "a symlink" : "something else");
			close(s.root);
			return RDX_EXIT_IO;
		}
	}
	um = umask(0);
	umask(um);
	s.file_mode = 0666 & ~um;
	lfd = listen_on(o, url, sizeof(url));
	if (lfd < 0) {
		close(s.root);
		return RDX_EXIT_CONN;
	}
	s.addrs = calloc(o->max_conns, sizeof(*s.addrs));
	if (!s.addrs) {
		close(lfd);
		close(s.root);
		return RDX_EXIT_FAIL;
	}
	sweep_uploads(&s, true);
	swept = time(NULL);
	pthread_mutex_init(&s.lock, NULL);
	pthread_cond_init(&s.cond, NULL);
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	fprintf(o->announce, "%s\n", url);
	fflush(o->announce);
	rdx_info(1, "serving '%s' at %s (%s)", o->root, url,
		 o->no_sign ? "unsigned: anyone may read and write" : "signed requests only");
	while (!atomic_load(o->stop)) {
		struct pollfd p = { .fd = lfd, .events = POLLIN };
		struct sockaddr_storage ss;
		socklen_t sl = sizeof(ss);
		struct conn_arg *a;
		pthread_t t;
		int fd;

		pthread_mutex_lock(&s.lock);
		while (s.active >= o->max_conns && !atomic_load(o->stop)) {
			struct pollfd w = { .fd = lfd, .events = POLLIN };
			struct timespec dl;

			/* Someone waits and there is no room: an idle
			 * connection gives way (its client connects again, as
			 * HTTP clients do when a kept-alive one is closed). */
			if (poll(&w, 1, 0) > 0)
				atomic_store(&s.shed, 1);
			rdx_deadline_in(&dl, 200);
			pthread_cond_timedwait(&s.cond, &s.lock, &dl);
		}
		atomic_store(&s.shed, 0);
		pthread_mutex_unlock(&s.lock);
		if (time(NULL) - swept >= 3600) {
			sweep_uploads(&s, false);
			swept = time(NULL);
		}
		if (poll(&p, 1, 500) <= 0)
			continue;
		fd = accept4(lfd, (struct sockaddr *)&ss, &sl, SOCK_CLOEXEC | SOCK_NONBLOCK);
		if (fd < 0)
			continue;
		a = calloc(1, sizeof(*a));
		if (!a) {
			close(fd);
			continue;
		}
		a->s = &s;
		a->fd = fd;
		{
			char h[INET6_ADDRSTRLEN] = "?";
			unsigned port = 0;

			if (ss.ss_family == AF_INET6) {
				inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&ss)->sin6_addr, h, sizeof(h));
				port = ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
			} else if (ss.ss_family == AF_INET) {
				inet_ntop(AF_INET, &((struct sockaddr_in *)&ss)->sin_addr, h, sizeof(h));
				port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
			}
			snprintf(a->peer, sizeof(a->peer), "%s:%u", h, port);
			pthread_mutex_lock(&s.lock);
			a->from = addr_take(&s, h);
			if (a->from)
				s.active++;
			pthread_mutex_unlock(&s.lock);
		}
		if (!a->from) {
			/* Its address holds its share: S3's answer to too many
			 * requests (clients back off and retry). */
			static const char busy[] =
				"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n"
				"Retry-After: 1\r\nConnection: close\r\n\r\n";

			if (send(fd, busy, sizeof(busy) - 1, MSG_DONTWAIT | MSG_NOSIGNAL) < 0)
				rdx_info(2, "%s: %s", a->peer, strerror(errno));
			rdx_info(1, "%s: turned away: its address holds %u connections (--max-per-address)",
				 a->peer, o->max_per_addr);
			close(fd);
			free(a);
			continue;
		}
		if (pthread_create(&t, &attr, conn_main, a)) {
			close(fd);
			pthread_mutex_lock(&s.lock);
			a->from->n--;
			s.active--;
			pthread_mutex_unlock(&s.lock);
			free(a);
		}
	}
	close(lfd);
	/* Connections see the stop within a poll slice and end their
	 * requests, removing their temporaries. */
	pthread_mutex_lock(&s.lock);
	while (s.active)
		pthread_cond_wait(&s.cond, &s.lock);
	pthread_mutex_unlock(&s.lock);
	pthread_attr_destroy(&attr);
	free(s.addrs);
	close(s.root);
	rdx_info(1, "stopped");
	return RDX_EXIT_OK;
}
