/* rds3 serve: the listener, one thread per connection (at most
 * max_conns), the answers and helpers every operation uses.  The
 * operations themselves are in serve_owner.c (CreateBucket, ListBuckets),
 * serve_bucket.c, serve_object.c and serve_multipart.c, over
 * serve_store.c and serve_list.c.  Each request is verified
 * (serve_auth.c) before anything is read from or written to ROOT. */
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

/* -------------------------------------------------------------- answers */

int sv_answer(struct call *k, int status, const char *hdrs, const char *body, size_t n)
{
	int ret;

	k->status = status;
	ret = sv_send_head(k->c, k->r, status, hdrs, true, n);
	if (!ret && n && strcmp(k->r->method, "HEAD"))
		ret = sv_send(k->c, body, n);
	k->sent = n;
	return ret;
}

int sv_xml_answer(struct call *k, int status, struct s3_buf *b)
{
	int ret;

	if (s3_buf_err(b))
		return -ENOMEM;
	ret = sv_answer(k, status, "Content-Type: application/xml\r\n", b->p, b->len);
	return ret;
}

/* An S3 Error document, with extra headers (each ending in CRLF). */
int sv_fail_h(struct call *k, int status, const char *code, const char *msg,
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
	s3_buf_printf(&b, "</Resource><RequestId>%s</RequestId></Error>", k->r->id);
	s3_buf_init(&h, 0);
	s3_buf_printf(&h, "Content-Type: application/xml\r\n%s", extra ? extra : "");
	k->status = status;
	ret = s3_buf_err(&b) || s3_buf_err(&h)
		      ? -ENOMEM
		      : sv_answer(k, status, h.p, strcmp(k->r->method, "HEAD") ? b.p : NULL,
			       strcmp(k->r->method, "HEAD") ? b.len : 0);
	s3_buf_release(&b);
	s3_buf_release(&h);
	return ret;
}

int sv_fail(struct call *k, int status, const char *code, const char *msg)
{
	return sv_fail_h(k, status, code, msg, NULL);
}

/* The answer for an errno from the store. */
int sv_fail_errno(struct call *k, int err)
{
	switch (err) {
	case -ENOENT:
		return sv_fail(k, 404, "NoSuchKey", "The specified key does not exist.");
	case -ENOTDIR:
	case -EEXIST:
	case -ELOOP:
		return sv_fail(k, 409, "InvalidRequest",
			    "rds3 serve keeps keys as file paths: a key K cannot be both an object and a prefix of other keys with '/' (the folder marker K/ among them), nor pass a symlink");
	case -ENAMETOOLONG:
		return sv_fail(k, 400, "KeyTooLongError", "Your key is too long");
	case -ENOSPC:
	case -EDQUOT:
		return sv_fail(k, 500, "InternalError", "the server's disk is full");
	default:
		rdx_warn("%s %s: %s", k->r->method, k->r->raw_path, strerror(-err));
		return sv_fail(k, 500, "InternalError", "We encountered an internal error. Please try again.");
	}
}

int sv_count(const char *v, unsigned long def, unsigned long cap, unsigned long *out)
{
	char *end;

	*out = def;
	if (!v)
		return 0;
	if (*v < '0' || *v > '9')
		return -EINVAL;
	errno = 0;
	*out = strtoul(v, &end, 10);
	if (*end || errno)
		return -EINVAL;
	if (*out > cap)
		*out = cap;
	return 0;
}

bool sv_word_in(const char *list, const char *w)
{
	size_t n = strlen(w);

	for (const char *p = list; n && *p;) {
		size_t len = strcspn(p, " ");

		if (len == n && !strncmp(p, w, n))
			return true;
		p += len;
		p += *p == ' ';
	}
	return false;
}

void sv_add_etag(struct s3_buf *b, const char *etag)
{
	s3_buf_printf(b, "ETag: \"%s\"\r\n", etag);
}

/* ------------------------------------------------------------- helpers */

/* Content-Encoding's codings but aws-chunked, which is how the body was
 * sent, not what the object is (S3 does not keep it either). */
static void add_encoding(struct s3_buf *b, const char *v)
{
	bool first = true;

	while (*v) {
		const char *comma = strchr(v, ',');
		size_t n = comma ? (size_t)(comma - v) : strlen(v);

		while (n && (*v == ' ' || *v == '\t'))
			v++, n--;
		while (n && (v[n - 1] == ' ' || v[n - 1] == '\t'))
			n--;
		if (n && !(n == 11 && !strncasecmp(v, "aws-chunked", 11))) {
			s3_buf_printf(b, "%s%.*s", first ? "Content-Encoding: " : ", ", (int)n, v);
			first = false;
		}
		if (!comma)
			break;
		v = comma + 1;
	}
	if (!first)
		s3_buf_addc(b, '\n');
}

/* The request's headers that go with an object: Content-Type and the
 * like, and x-amz-meta-* (names in lower case).  -E2BIG past S3's 2 KB
 * of user metadata. */
int sv_object_headers(const struct sv_req *r, char **out)
{
	static const char *const keep[] = { "Content-Type", "Content-Disposition",
					    "Content-Language", "Cache-Control",
					    "Expires", NULL };
	struct s3_buf b;
	size_t i, user = 0;

	s3_buf_init(&b, SV_HEADERS_MAX);
	for (i = 0; i < r->nhdr; i++) {
		const char *n = r->hdr[i].name;
		bool ok = !strncasecmp(n, "x-amz-meta-", 11);

		if (!strcasecmp(n, "Content-Encoding")) {
			add_encoding(&b, r->hdr[i].value);
			continue;
		}
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
void sv_emit_headers(struct s3_buf *b, const char *h)
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
int sv_checksum_header(struct call *k, const struct sv_hdr **hdr, enum s3_ck *alg)
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
		    !strcasecmp(n + sizeof(pre) - 1, "type") ||
		    !strcasecmp(n + sizeof(pre) - 1, "mode"))
			continue;
		if (a == S3_CK_NONE) {
			char msg[160];

			snprintf(msg, sizeof(msg), "rds3 serve does not know the checksum %.40s", n);
			return sv_fail(k, 400, "InvalidRequest", msg) ? -EIO : 1;
		}
		if (*hdr)
			return sv_fail(k, 400, "InvalidRequest",
				    "Expecting a single x-amz-checksum- header. Multiple checksum Types are not allowed.") ? -EIO : 1;
		*hdr = &r->hdr[i];
		*alg = a;
	}
	return 0;
}

int sv_checksum_asked(struct call *k, enum s3_ck *alg)
{
	const char *v = sv_hdr(k->r, "x-amz-checksum-algorithm");
	char msg[160];

	if (!v)
		v = sv_hdr(k->r, "x-amz-sdk-checksum-algorithm");
	*alg = v ? s3_cksum_alg(v) : S3_CK_NONE;
	if (!v || *alg != S3_CK_NONE)
		return 0;
	snprintf(msg, sizeof(msg), "Checksum algorithm provided is unsupported: %.40s", v);
	return sv_fail(k, 400, "InvalidRequest", msg) ? -EIO : 1;
}

int sv_checksum_default(struct call *k)
{
	const struct sv_hdr *hdr;
	enum s3_ck alg;
	int ret;

	if ((ret = sv_checksum_asked(k, &k->want_ck)) || (ret = sv_checksum_header(k, &hdr, &alg)))
		return ret;
	/* A value sent, or to come as a trailer: S3 takes it and ignores
	 * the algorithm named. */
	if (hdr || sv_hdr(k->r, "x-amz-trailer"))
		k->want_ck = S3_CK_NONE;
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

void sv_add_checksum(struct s3_buf *b, const struct call *k)
{
	char b64[48];

	if (k->sum_ck == S3_CK_NONE)
		return;
	s3_cksum_b64(k->sum, s3_cksum_len(k->sum_ck), b64);
	s3_buf_printf(b, "%s: %s\r\n", s3_cksum_header(k->sum_ck), b64);
}

void sv_checksum_text(const struct sv_meta *m, char out[64])
{
	char b64[48];

	s3_cksum_b64(m->ck_sum, s3_cksum_len(m->ck), b64);
	if (m->ck_composite)
		snprintf(out, 64, "%s-%u", b64, m->parts);
	else
		snprintf(out, 64, "%s", b64);
}

void sv_checksum_xml(struct s3_buf *b, const struct sv_meta *m)
{
	char v[64];

	if (!m || m->ck == S3_CK_NONE)
		return;
	sv_checksum_text(m, v);
	s3_buf_printf(b, "<Checksum%s>%s</Checksum%s><ChecksumType>%s</ChecksumType>",
		      s3_cksum_name(m->ck), v, s3_cksum_name(m->ck),
		      m->ck_composite ? "COMPOSITE" : "FULL_OBJECT");
}

void sv_add_kept_checksum(struct s3_buf *b, const struct sv_meta *m)
{
	char v[64];

	if (m->ck == S3_CK_NONE)
		return;
	sv_checksum_text(m, v);
	s3_buf_printf(b, "%s: %s\r\nx-amz-checksum-type: %s\r\n", s3_cksum_header(m->ck), v,
		      m->ck_composite ? "COMPOSITE" : "FULL_OBJECT");
}

bool sv_checksum_mode(const struct call *k)
{
	const char *v = sv_hdr(k->r, "x-amz-checksum-mode");

	return v && !strcasecmp(v, "ENABLED");
}

/* An upload by RDMA has no HTTP body and says its size twice: in the
 * token and in x-amz-decoded-content-length.  0 to go on, else an answer
 * was sent (1) or could not be (-EIO). */
static int rdma_body_ok(struct call *k, uint64_t max)
{
	const char *dl = sv_hdr(k->r, "x-amz-decoded-content-length");
	char *end;
	unsigned long long n = dl ? strtoull(dl, &end, 10) : 0;

	if (!k->r->has_length || k->r->length || k->r->chunked)
		return sv_fail(k, 400, "InvalidRequest", "an RDMA upload carries no HTTP body") ? -EIO : 1;
	if (!dl || !*dl || *end || *dl < '0' || *dl > '9' || n != sv_rdma_size(k))
		return sv_fail(k, 400, "S3InvalidRdmaToken",
			    "x-amz-decoded-content-length is not the token's size") ? -EIO : 1;
	if (n > max)
		return sv_fail(k, 400, "EntityTooLarge", "Your proposed upload exceeds the maximum allowed size") ? -EIO : 1;
	return 0;
}

/* What the body is checked against besides its length: Content-MD5, the
 * signed SHA-256, and the x-amz-checksum-* header or trailer (want its
 * value; NULL: computed, nothing to check) against d.  0, or an answer
 * was sent (1) or could not be (-EIO). */
static int body_checks(struct call *k, const unsigned char md5[16], EVP_MD_CTX *sh,
		       enum s3_ck alg, const unsigned char *d, size_t dn, const char *want)
{
	const char *cmd5 = sv_hdr(k->r, "Content-MD5");

	if (cmd5) {
		unsigned char w[18];
		int n = strlen(cmd5) == 24 ? EVP_DecodeBlock(w, (const unsigned char *)cmd5, 24) : -1;

		if (n != 18)
			return sv_fail(k, 400, "InvalidDigest", "The Content-MD5 you specified was invalid.") ? -EIO : 1;
		if (CRYPTO_memcmp(w, md5, 16))
			return sv_fail(k, 400, "BadDigest", "The Content-MD5 you specified did not match what we received.") ? -EIO : 1;
	}
	if (k->payload) {
		unsigned char sha[32];
		char hex[65];

		EVP_DigestFinal_ex(sh, sha, NULL);
		rdx_hex_encode(sha, 32, hex);
		if (strcmp(hex, k->payload))
			return sv_fail(k, 400, "XAmzContentSHA256Mismatch",
				       "The provided 'x-amz-content-sha256' header does not match what was computed.") ? -EIO : 1;
	}
	if (alg != S3_CK_NONE && want && !checksum_matches(want, d, dn)) {
		char msg[96];

		snprintf(msg, sizeof(msg), "The %s you specified did not match the calculated checksum.",
			 s3_cksum_name(alg));
		return sv_fail(k, 400, "BadDigest", msg) ? -EIO : 1;
	}
	return 0;
}

/* The body's next bytes, from wherever they come: RDMA, aws-chunked or
 * plain HTTP.  The count, 0 at the end, -EBADMSG when the body was
 * refused and that answered, or -errno (-EIO: the answer could not go). */
static ssize_t body_next(struct call *k, struct sv_stream *st, char *buf, const void **data)
{
	ssize_t n;

	*data = buf;
	if (k->rdma) {
		n = sv_rdma_read_next(k, data);
		return n < 0 ? (sv_rdma_fail(k) < 0 ? -EIO : -EBADMSG) : n;
	}
	if (st) {
		n = sv_stream_read(k, st, buf, IO_BUF);
		return n == -EBADMSG ? (sv_stream_fail(k, st) < 0 ? -EIO : -EBADMSG) : n;
	}
	n = sv_body_read(k->c, k->r, buf, IO_BUF);
	if (n == -RDX_EPROTO) /* the peer is there: tell it */
		return sv_fail(k, 400, "IncompleteBody", "the chunked body is malformed") ? -EIO : -EBADMSG;
	return n;
}

/* How the body comes and what it is checked with: 0, or an answer was
 * sent (1) or could not be (-EIO). */
static int body_begin(struct call *k, uint64_t max, struct sv_stream **st,
		      const struct sv_hdr **ckh, enum s3_ck *alg)
{
	struct sv_req *r = k->r;
	const char *unused;
	int ret;

	if (k->rdma && k->sa.on)
		return sv_fail(k, 400, "InvalidRequest", "an RDMA upload carries no aws-chunked body") ? -EIO : 1;
	if (k->rdma && (ret = rdma_body_ok(k, max)))
		return ret;
	if ((ret = sv_checksum_header(k, ckh, alg)))
		return ret;
	if (k->sa.on && (ret = sv_stream_begin(k, max, st)))
		return ret;
	if (*st && sv_stream_sum(*st, &unused) != S3_CK_NONE) {
		if (*ckh)
			return sv_fail(k, 400, "InvalidRequest",
				       "Expecting a single x-amz-checksum- header. Multiple checksum Types are not allowed.") ? -EIO : 1;
		*alg = sv_stream_sum(*st, &unused);
	}
	/* An upload begun with an algorithm takes parts of that one only. */
	if (k->want_ck != S3_CK_NONE && *alg != S3_CK_NONE && *alg != k->want_ck) {
		char msg[128];

		snprintf(msg, sizeof(msg), "Checksum Type mismatch occurred, expected checksum Type: %s, actual checksum Type: %s",
			 s3_cksum_name(k->want_ck), s3_cksum_name(*alg));
		return sv_fail(k, 400, "InvalidRequest", msg) ? -EIO : 1;
	}
	if (*alg == S3_CK_NONE)
		*alg = k->want_ck; /* computed */
	if (!r->has_length && !r->chunked)
		return sv_fail(k, 411, "MissingContentLength", "You must provide the Content-Length HTTP header.") ? -EIO : 1;
	/* aws-chunked: its framing is more than max; the decoded length counts. */
	if (!*st && r->has_length && r->length > max)
		return sv_fail(k, 400, "EntityTooLarge", "Your proposed upload exceeds the maximum allowed size") ? -EIO : 1;
	return 0;
}

/* Reads the body into fd, hashing it: MD5 always, SHA-256 when signed,
 * and the x-amz-checksum-* the client sent (as a header or an
 * aws-chunked trailer).  Checks Content-MD5, the signed hash and that
 * checksum.  Returns 0 with md5 set; or an answer was sent (1) or the
 * connection is gone (-errno). */
int sv_take_body(struct call *k, int fd, uint64_t max, unsigned char md5[16],
		 uint64_t *size)
{
	EVP_MD_CTX *m = EVP_MD_CTX_new(), *sh = EVP_MD_CTX_new();
	const struct sv_hdr *ckh = NULL;
	struct sv_stream *st = NULL;
	struct s3_cksum ck = { 0 };
	enum s3_ck alg = S3_CK_NONE;
	const char *want = NULL;
	unsigned char d[S3_CK_MAX];
	size_t dn;
	/* By RDMA the bytes come in the registered buffer's halves. */
	char *buf = k->rdma ? NULL : malloc(IO_BUF);
	uint64_t total = 0;
	int ret = 0;

	*size = 0;
	if ((ret = body_begin(k, max, &st, &ckh, &alg)))
		goto out;
	if (!m || !sh || (!buf && !k->rdma) || !EVP_DigestInit_ex(m, EVP_md5(), NULL) ||
	    !EVP_DigestInit_ex(sh, EVP_sha256(), NULL) ||
	    (alg != S3_CK_NONE && s3_cksum_init(&ck, alg))) {
		ret = sv_fail(k, 500, "InternalError", "out of memory") ? -ENOMEM : 1;
		goto out;
	}
	for (;;) {
		const void *data;
		ssize_t n = body_next(k, st, buf, &data);

		if (n == -EBADMSG) { /* answered */
			ret = 1;
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
			ret = sv_fail(k, 400, "EntityTooLarge", "Your proposed upload exceeds the maximum allowed size") ? -EIO : 1;
			goto out;
		}
		EVP_DigestUpdate(m, data, (size_t)n);
		if (k->payload)
			EVP_DigestUpdate(sh, data, (size_t)n);
		if (alg != S3_CK_NONE)
			s3_cksum_update(&ck, data, (size_t)n);
		if (rdx_pwrite_full(fd, data, (size_t)n, (off_t)(total - (uint64_t)n)) < 0) {
			ret = sv_fail_errno(k, -errno) ? -EIO : 1;
			goto out;
		}
	}
	EVP_DigestFinal_ex(m, md5, NULL);
	*size = total;
	if (ckh)
		want = ckh->value;
	else if (st)
		sv_stream_sum(st, &want);
	dn = alg != S3_CK_NONE ? s3_cksum_final(&ck, d) : 0;
	if ((ret = body_checks(k, md5, sh, alg, d, dn, want)))
		goto out;
	if (alg != S3_CK_NONE) { /* kept with the object, and echoed */
		k->sum_ck = alg;
		memcpy(k->sum, d, dn);
	}
out:
	sv_stream_free(st);
	s3_cksum_release(&ck);
	EVP_MD_CTX_free(m);
	EVP_MD_CTX_free(sh);
	free(buf);
	return ret;
}

/* Checks a small body against its Content-MD5, if it came with one (S3
 * asks for it with DeleteObjects and PutObjectTagging).  0 to go on, else
 * an answer was sent (1) or could not be (-EIO). */
static int xml_md5_ok(struct call *k, const struct s3_buf *b)
{
	const char *cmd5 = sv_hdr(k->r, "Content-MD5");
	unsigned char want[18], md5[16];

	if (!cmd5)
		return 0;
	if (strlen(cmd5) != 24 || EVP_DecodeBlock(want, (const unsigned char *)cmd5, 24) != 18)
		return sv_fail(k, 400, "InvalidDigest", "The Content-MD5 you specified was invalid.") ? -EIO : 1;
	if (!EVP_Digest(b->p ? b->p : "", b->len, md5, NULL, EVP_md5(), NULL))
		return -ENOMEM;
	if (CRYPTO_memcmp(want, md5, 16))
		return sv_fail(k, 400, "BadDigest", "The Content-MD5 you specified did not match what we received.") ? -EIO : 1;
	return 0;
}

/* A small XML body (a Delete or Complete request), NUL-terminated.
 * body_sum: an x-amz-checksum-* header is the body's (DeleteObjects) and
 * is checked; else it would be the whole object's (Complete), which is
 * not computed here: refused rather than left unchecked. */
int sv_take_xml(struct call *k, bool body_sum, char **out, size_t *len)
{
	const struct sv_hdr *ckh = NULL;
	enum s3_ck alg = S3_CK_NONE;
	int ret;
	struct s3_buf b;
	char tmp[16384];
	ssize_t n;

	if (k->sa.on)
		return sv_fail(k, 501, "NotImplemented",
			    "rds3 serve reads aws-chunked bodies (x-amz-content-sha256 STREAMING-*) for PutObject and UploadPart only") ? -EIO : 1;
	s3_buf_init(&b, SV_XML_MAX);
	while ((n = sv_body_read(k->c, k->r, tmp, sizeof(tmp))) > 0)
		if (s3_buf_add(&b, tmp, (size_t)n))
			break;
	if (n < 0 || s3_buf_err(&b)) {
		s3_buf_release(&b);
		if (n < 0)
			return (int)n;
		return sv_fail(k, 400, "MalformedXML", "the XML body is too large") ? -EIO : 1;
	}
	if (body_sum && (ret = sv_checksum_header(k, &ckh, &alg))) {
		s3_buf_release(&b);
		return ret;
	}
	if ((ret = xml_md5_ok(k, &b))) {
		s3_buf_release(&b);
		return ret;
	}
	if (body_sum && ckh) {
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
			return sv_fail(k, 400, "BadDigest", "The checksum you specified did not match the calculated checksum.") ? -EIO : 1;
		}
	}
	*out = b.p ? b.p : strdup("");
	*len = b.len;
	return *out ? 0 : -ENOMEM;
}

/* --------------------------------------------------------- connections */

/* Headers asking for what this server does not do.  A client told 200
 * believes its request took effect: an object it asked to encrypt, lock
 * or share must not be stored plain, deletable or private as if it had
 * been.  name ending in '*': a prefix.  ok: the values (separated by
 * spaces) that ask for nothing more than what is done anyway (NULL:
 * none): an owner's full control is what "private" gives. */
static const struct unkept {
	const char *name, *ok, *what;
} unkept[] = {
	{ "x-amz-server-side-encryption*", NULL, "server-side encryption (SSE-S3, SSE-KMS, SSE-C)" },
	{ "x-amz-copy-source-server-side-encryption*", NULL, "server-side encryption (SSE-C)" },
	/* x-amz-bypass-governance-retention passes: with no retention kept,
	 * a delete that bypasses it is the delete done. */
	{ "x-amz-object-lock-*", NULL, "object lock" },
	{ "x-amz-bucket-object-lock-enabled", "false", "object lock" },
	{ "x-amz-acl", "private bucket-owner-full-control", "ACLs other than private" },
	{ "x-amz-grant-*", NULL, "ACL grants" },
	{ "x-amz-object-ownership", "BucketOwnerEnforced", "ACLs (object ownership other than BucketOwnerEnforced)" },
	{ "x-amz-mfa", NULL, "MFA delete" },
	{ "x-amz-website-redirect-location", NULL, "website redirects" },
	{ "x-amz-storage-class", "STANDARD", "storage classes other than STANDARD" },
	{ "x-amz-write-offset-bytes", NULL, "appends" },
	{ "x-amz-if-match-*", NULL, "conditions on size or times" },
};

/* Refuses (501, naming the header) a request with one of unkept.
 * Returns 0 to go on, else an answer was sent (1) or -errno. */
static int refuse_unkept(struct call *k)
{
	const struct sv_req *r = k->r;
	size_t i, j;

	for (i = 0; i < r->nhdr; i++) {
		const char *n = r->hdr[i].name, *v = r->hdr[i].value;

		for (j = 0; j < sizeof(unkept) / sizeof(unkept[0]); j++) {
			const struct unkept *u = &unkept[j];
			size_t len = strlen(u->name);
			char msg[256];

			if (u->name[len - 1] == '*' ? strncasecmp(n, u->name, len - 1)
						    : strcasecmp(n, u->name))
				continue;
			if (u->ok && sv_word_in(u->ok, v))
				continue;
			snprintf(msg, sizeof(msg), "rds3 serve does not implement %s (header %.64s)", u->what, n);
			return sv_fail(k, 501, "NotImplemented", msg) ? -EIO : 1;
		}
	}
	return 0;
}

static int handle(struct call *k)
{
	struct sv_req *r = k->r;
	const char *code, *p, *slash, *ct;
	char msg[256];
	int st;

	/* A browser's form upload (POST Object) is signed by its policy,
	 * which is not read here: refused as what it is, not as unsigned. */
	if (!strcmp(r->method, "POST") && (ct = sv_hdr(r, "Content-Type")) &&
	    !strncasecmp(ct, "multipart/form-data", 19))
		return sv_fail(k, 501, "NotImplemented",
			       "rds3 serve does not implement POST Object (browser form uploads)");
	st = sv_auth_check(&k->s->auth, r, &k->user, &k->payload, &k->sa, &code, msg, sizeof(msg));
	if (st)
		return sv_fail(k, st, code, msg);
	if ((st = refuse_unkept(k)))
		return st < 0 ? st : 0;
	/* S3's keys are UTF-8: other bytes name none. */
	if (!sv_utf8_ok(r->path))
		return sv_fail(k, 400, "InvalidURI", "Couldn't parse the specified URI.");
	p = r->path + 1;
	if (!*p)
		return !strcmp(r->method, "GET")
			       ? sv_list_buckets(k)
			       : sv_fail(k, 405, "MethodNotAllowed", "The specified method is not allowed against this resource.");
	slash = strchr(p, '/');
	if ((size_t)(slash ? slash - p : (ptrdiff_t)strlen(p)) >= sizeof(k->bucket))
		return sv_fail(k, 400, "InvalidBucketName", "The specified bucket is not valid.");
	snprintf(k->bucket, sizeof(k->bucket), "%.*s", (int)(slash ? slash - p : (ptrdiff_t)strlen(p)), p);
	if (!sv_bucket_ok(k->bucket))
		return sv_fail(k, 400, "InvalidBucketName", "The specified bucket is not valid.");
	if (!slash || !slash[1])
		return sv_bucket_op(k);
	k->key = slash + 1;
	return sv_object_op(k);
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

/* The log line's " rdma N": the bytes a request moved by RDMA. */
static const char *rdma_note(const struct call *k, char *buf, size_t n)
{
	snprintf(buf, n, " rdma %" PRIu64, k->rdma_moved);
	return buf;
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
			char note[32];
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
				sv_fail(&k, 400, "InvalidArgument", "a key or parameter cannot hold a NUL byte");
				sv_req_release(r);
				break;
			}
			if (ret) {
				c->broken = true;
				r->keep_alive = false;
				r->method = r->method ? r->method : "GET";
				sv_fail(&k, ret == -E2BIG ? 431 : 400,
				     ret == -E2BIG ? "RequestHeaderSectionTooLarge" : "BadRequest",
				     "the request is not HTTP/1.1 as rds3 serve reads it");
				sv_req_release(r);
				break;
			}
			ret = handle(&k);
			if (s->o->verbose)
				rdx_info(0, "%s %s %s %s%s%s %d %" PRIu64 "%s", r->id, c->peer,
					 r->method, r->raw_path, r->raw_query ? "?" : "",
					 r->raw_query ? r->raw_query : "", k.status, k.sent,
					 k.rdma_moved ? rdma_note(&k, note, sizeof(note)) : "");
			if (ret < 0 || !r->keep_alive || !r->body_end)
				c->broken = true;
			/* Answered with the body unread: not when the peer is
			 * gone or stalled (ret < 0), there is no one to answer. */
			if (ret >= 0 && !r->body_end)
				c->unread = true;
			sv_req_release(r);
		}
	}
	if (c && c->unread)
		sv_linger(c);
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

static int listen_on(const struct s3_serve_opts *o, char *url, size_t urllen,
		     unsigned *bound)
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
		*bound = ntohs(s6->sin6_port);
	} else {
		struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;

		inet_ntop(AF_INET, &s4->sin_addr, host, sizeof(host));
		snprintf(url, urllen, "http://%s:%u", host, ntohs(s4->sin_port));
		*bound = ntohs(s4->sin_port);
	}
	return fd;
}

/* The users requests are signed by: --users FILE, else the one key. */
static int load_users(const struct s3_serve_opts *o, struct sv_users *u)
{
	char err[256];
	int ret;

	if (!o->users_file)
		return sv_users_one(u, o->access_key, o->secret_key) ? RDX_EXIT_FAIL : 0;
	ret = sv_users_load(o->users_file, u, err, sizeof(err));
	if (ret) {
		rdx_error("--users '%s': %s", o->users_file, err);
		return ret == -EINVAL || ret == -EPERM || ret == -E2BIG ? RDX_EXIT_USAGE : RDX_EXIT_IO;
	}
	rdx_info(1, "%zu users from '%s'%s", u->n, o->users_file,
		 u->n > 1 ? ": each owns the buckets it makes" : "");
	return 0;
}

static int serve(const struct s3_serve_opts *o, const struct sv_users *users)
{
	struct server s = { .o = o, .auth.users = users, .shared = users && users->n > 1 };
	char url[128];
	pthread_attr_t attr;
	time_t swept;
	mode_t um;
	int lfd, ret;

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
	if ((ret = sv_owners_start(&s))) {
		rdx_error("cannot serve '%s' to several users: %s%s", o->root, strerror(-ret),
			  ret == -EINVAL ? " (an owned bucket is made by a rename that does not replace)"
					 : "");
		close(s.root);
		return RDX_EXIT_IO;
	}
	um = umask(0);
	umask(um);
	s.file_mode = 0666 & ~um;
	lfd = listen_on(o, url, sizeof(url), &s.port);
	if (lfd < 0) {
		close(s.root);
		return RDX_EXIT_CONN;
	}
	if (o->rdma) {
		int st = sv_rdma_start(&s);

		if (st) {
			close(lfd);
			close(s.root);
			return st;
		}
	}
	s.addrs = calloc(o->max_conns, sizeof(*s.addrs));
	if (!s.addrs) {
		sv_rdma_stop(&s);
		close(lfd);
		close(s.root);
		return RDX_EXIT_FAIL;
	}
	sv_sweep_uploads(&s, true);
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
			sv_sweep_uploads(&s, false);
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
	sv_rdma_stop(&s);
	pthread_attr_destroy(&attr);
	free(s.addrs);
	close(s.root);
	rdx_info(1, "stopped");
	return RDX_EXIT_OK;
}

int s3_serve(const struct s3_serve_opts *o)
{
	struct sv_users users = { 0 };
	int st = o->no_sign ? 0 : load_users(o, &users);

	if (!st)
		st = serve(o, o->no_sign ? NULL : &users);
	sv_users_release(&users);
	return st;
}
