/* rds3 serve: object requests (put, get, head, copy, delete). */
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

/* The conditional headers, named pre + "If-Match" and so on (a copy's
 * source has "x-amz-copy-source-if-match"...): 0 go on, else the status
 * to answer.  If-Match decides over If-Unmodified-Since, If-None-Match
 * over If-Modified-Since, as S3 has it. */
static int conditions(const struct sv_req *r, const char *pre, const char *etag, time_t mtime)
{
	char n[4][48];
	const char *im, *inm, *ius, *ims;

	snprintf(n[0], sizeof(n[0]), "%sIf-Match", pre);
	snprintf(n[1], sizeof(n[1]), "%sIf-None-Match", pre);
	snprintf(n[2], sizeof(n[2]), "%sIf-Unmodified-Since", pre);
	snprintf(n[3], sizeof(n[3]), "%sIf-Modified-Since", pre);
	im = sv_hdr(r, n[0]), inm = sv_hdr(r, n[1]), ius = sv_hdr(r, n[2]), ims = sv_hdr(r, n[3]);

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

#define PRECONDITION_MSG "At least one of the pre-conditions you specified did not hold"

/* Whether the object fd's ETag passes w's If-Match and If-None-Match
 * (its ETags): 0, -ECANCELED or -errno. */
static int etags_hold(int fd, const struct sv_wcond *w)
{
	struct sv_meta m;
	int ret = sv_meta_get(fd, &m);

	if (ret)
		return ret;
	if ((w->match && !etag_match(w->match, m.etag)) ||
	    (w->none_match && etag_match(w->none_match, m.etag)))
		ret = -ECANCELED;
	sv_meta_release(&m);
	return ret;
}

int sv_match_check(int dir, const char *name, void *arg)
{
	const struct sv_wcond *w = arg;
	int fd = openat(dir, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC), ret;
	struct stat st;

	if (fd < 0)
		ret = errno == ELOOP || errno == ENXIO || errno == ENOENT ? -ENOENT : -errno;
	else if (fstat(fd, &st) || !S_ISREG(st.st_mode))
		ret = -ENOENT;
	else
		ret = etags_hold(fd, w);
	if (fd >= 0)
		close(fd);
	/* No object: If-Match fails, If-None-Match holds. */
	return ret == -ENOENT && !w->match ? 0 : ret;
}

int sv_wcond_take(struct call *k, int bfd, struct sv_wcond *w)
{
	const char *inm = sv_hdr(k->r, "If-None-Match");
	int fd, ret;

	w->match = sv_hdr(k->r, "If-Match");
	w->absent = inm && !strcmp(inm, "*");
	w->none_match = w->absent ? NULL : inm;
	if (!w->absent && !w->match && !w->none_match)
		return 0;
	fd = sv_object_open(bfd, k->key);
	if (fd == -ENOENT)
		ret = w->match ? -ENOENT : 0;
	else if (fd < 0)
		ret = fd;
	else if (w->absent)
		ret = -ECANCELED;
	else {
		ret = etags_hold(fd, w);
	}
	if (fd >= 0)
		close(fd);
	return ret ? (sv_commit_fail(k, ret) ? -EIO : 1) : 0;
}

void sv_wcond_arm(struct sv_wcond *w, struct sv_put *p)
{
	p->if_absent = w->absent;
	p->check = w->match || w->none_match ? sv_match_check : NULL;
	p->check_arg = w;
}

int sv_commit_fail(struct call *k, int err)
{
	if (err == -ECANCELED)
		return sv_fail(k, 412, "PreconditionFailed", PRECONDITION_MSG);
	return sv_fail_errno(k, err);
}

/* A GET by RDMA: len bytes of fd from off written into the client's
 * buffer, then the answer, with no body.  A range larger than the buffer
 * is declined before a byte moves. */
static int rdma_send(struct call *k, int status, int fd, uint64_t off, uint64_t len,
		     struct s3_buf *h)
{
	int ret;

	if (len > sv_rdma_size(k))
		return sv_fail(k, 400, "S3InvalidRdmaToken",
			    "the object does not fit the token's buffer") ? -EIO : 0;
	ret = sv_rdma_send_file(k, fd, off, len);
	if (ret == -EIO)
		return sv_rdma_fail(k) < 0 ? -EIO : 0;
	if (ret)
		return sv_fail_errno(k, ret);
	sv_rdma_headers(k, h);
	if (s3_buf_err(h))
		return -ENOMEM;
	k->status = status;
	k->sent = 0;
	return sv_send_head(k->c, k->r, status, h->p, true, 0);
}

/* GetObject's response-* parameters: the header each sets in place of
 * the object's own. */
static const struct {
	const char *param, *header;
} overrides[] = {
	{ "response-content-type", "Content-Type" },
	{ "response-content-language", "Content-Language" },
	{ "response-expires", "Expires" },
	{ "response-cache-control", "Cache-Control" },
	{ "response-content-disposition", "Content-Disposition" },
	{ "response-content-encoding", "Content-Encoding" },
};

/* The object's header lines h with the request's response-* overrides in
 * their place, into *out (malloc'ed; NULL: none).  S3 takes them on
 * signed requests only: an anonymous one (on a --no-sign-request server,
 * one that carries no signature) is refused with S3's 400.  0, or an
 * answer was sent (1) or could not be (-EIO), or -ENOMEM. */
static int override_headers(struct call *k, const char *h, char **out)
{
	const struct sv_req *r = k->r;
	const char *v[sizeof(overrides) / sizeof(overrides[0])];
	size_t i, n = sizeof(overrides) / sizeof(overrides[0]);
	bool any = false;
	struct s3_buf b;

	*out = NULL;
	for (i = 0; i < n; i++) {
		v[i] = NULL;
		if (!sv_query(r, overrides[i].param, &v[i]))
			continue;
		any = true;
		for (const char *c = v[i] ? v[i] : ""; *c; c++)
			if ((unsigned char)*c < 0x20 || *c == 0x7f) /* a header could not carry it */
				return sv_fail(k, 400, "InvalidArgument", "a response-* parameter's value cannot hold control characters") ? -EIO : 1;
	}
	if (!any)
		return 0;
	if (!sv_hdr(r, "Authorization") && !sv_query(r, "X-Amz-Signature", NULL))
		return sv_fail(k, 400, "InvalidRequest",
			       "Request specific response headers cannot be used for anonymous GET requests.") ? -EIO : 1;
	s3_buf_init(&b, 0);
	while (h && *h) {
		const char *nl = strchr(h, '\n');
		size_t len = nl ? (size_t)(nl - h) : strlen(h);
		bool drop = false;

		for (i = 0; i < n && !drop; i++) {
			size_t hl = strlen(overrides[i].header);

			drop = v[i] && len > hl && h[hl] == ':' && !strncasecmp(h, overrides[i].header, hl);
		}
		if (!drop) {
			s3_buf_add(&b, h, len);
			s3_buf_addc(&b, '\n');
		}
		h += len + (nl != NULL);
	}
	for (i = 0; i < n; i++)
		if (v[i])
			s3_buf_printf(&b, "%s: %s\n", overrides[i].header, v[i]);
	if (s3_buf_err(&b)) {
		s3_buf_release(&b);
		return -ENOMEM;
	}
	*out = b.p;
	return 0;
}

/* The sizes of the parts of the multipart object fd (record m), kept
 * with it when they are unequal; NULL when they were not. */
static struct sv_part_info *part_sizes(int fd, const struct sv_meta *m)
{
	struct sv_part_info *v;

	return sv_parts_get(fd, m, &v) ? NULL : v;
}

/* Part n's checksum (x-amz-checksum-mode: ENABLED on a GET of one
 * part of a multipart object), when its parts' are kept; its type is
 * the whole object's, as S3 gives it. */
static void add_part_checksum(struct s3_buf *h, int fd, const struct sv_meta *m, unsigned n)
{
	struct sv_part_info *v;
	char b64[48];

	if (m->ck == S3_CK_NONE || sv_parts_get(fd, m, &v))
		return;
	s3_cksum_b64(v[n - 1].sum, s3_cksum_len(m->ck), b64);
	s3_buf_printf(h, "%s: %s\r\nx-amz-checksum-type: %s\r\n", s3_cksum_header(m->ck), b64,
		      m->ck_composite ? "COMPOSITE" : "FULL_OBJECT");
	free(v);
}

int sv_get_object(struct call *k, int bfd)
{
	bool head = !strcmp(k->r->method, "HEAD");
	const char *pn = NULL;
	struct sv_meta m;
	struct s3_buf h;
	time_t mtime;
	uint64_t from = 0, to = 0;
	int fd, ret, status = 200, rr = 0;
	struct sv_part_info *v = NULL;
	char date[40];

	fd = sv_key_open(bfd, k->key, &m, &mtime);
	if (fd < 0)
		return sv_fail_errno(k, fd == -ENOENT ? fd : -EIO);
	s3_buf_init(&h, 0);
	sv_http_date(mtime, date);
	sv_add_etag(&h, m.etag);
	s3_buf_printf(&h, "Last-Modified: %s\r\nAccept-Ranges: bytes\r\n", date);
	status = conditions(k->r, "", m.etag, mtime);
	if (status == 304) {
		ret = sv_answer(k, 304, h.p, NULL, 0);
		goto out;
	}
	if (status == 412) {
		ret = sv_fail(k, 412, "PreconditionFailed", "At least one of the pre-conditions you specified did not hold");
		goto out;
	}
	{
		struct sv_tags t;
		char *oh;

		if ((ret = override_headers(k, m.headers, &oh))) {
			ret = ret > 0 ? 0 : ret;
			goto out;
		}
		sv_emit_headers(&h, oh ? oh : m.headers);
		free(oh);
		if (!sv_tags_get(fd, &t) && t.n)
			s3_buf_printf(&h, "x-amz-tagging-count: %u\r\n", t.n);
	}
	if (sv_query(k->r, "partNumber", &pn)) {
		char *end;
		unsigned long n = pn ? strtoul(pn, &end, 10) : 0;

		if (!pn || *end || !n || n > SV_PARTS_MAX) {
			ret = sv_fail(k, 400, "InvalidArgument", "Part number must be an integer between 1 and 10000, inclusive");
			goto out;
		}
		if (m.parts && !m.part_size && !(v = part_sizes(fd, &m))) {
			ret = sv_fail(k, 501, "NotImplemented", "this object's parts are of unequal sizes, not kept with it; rds3 serve cannot give one");
			goto out;
		}
		if (n > (m.parts ? m.parts : 1)) {
			/* As S3 answers it (and the s3-tests expect): not 416. */
			ret = sv_fail(k, 400, "InvalidPart", "The requested partnumber is not satisfiable");
			goto out;
		}
		if (m.parts) {
			s3_buf_printf(&h, "x-amz-mp-parts-count: %u\r\n", m.parts);
			from = (n - 1) * m.part_size;
			to = n == m.parts ? m.size - 1 : from + m.part_size - 1;
			if (v) { /* unequal: from the sizes kept */
				from = 0;
				for (unsigned long i = 0; i + 1 < n; i++)
					from += v[i].size;
				to = from + v[n - 1].size - 1;
			}
			rr = m.size ? 1 : 0;
			if (sv_checksum_mode(k))
				add_part_checksum(&h, fd, &m, (unsigned)n);
		} else if (sv_checksum_mode(k)) {
			sv_add_kept_checksum(&h, &m); /* part 1 is all of it */
		}
	} else {
		rr = parse_range(sv_hdr(k->r, "Range"), m.size, &from, &to);
		/* A range's bytes are not what the checksum is of. */
		if (!rr && sv_checksum_mode(k))
			sv_add_kept_checksum(&h, &m);
	}
	if (rr < 0) {
		char cr[64];

		snprintf(cr, sizeof(cr), "Content-Range: bytes */%" PRIu64 "\r\n", m.size);
		ret = sv_fail_h(k, 416, "InvalidRange", "The requested range is not satisfiable", cr);
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

		if (k->rdma && !head) {
			ret = rdma_send(k, status, fd, from, len, &h);
			goto out;
		}
		ret = sv_send_head(k->c, k->r, status, h.p, true, len);
		k->status = status;
		if (!ret && !head && len)
			ret = sv_sendfile(k->c, fd, from, len);
		k->sent = head ? 0 : len;
	}
out:
	free(v);
	s3_buf_release(&h);
	sv_meta_release(&m);
	close(fd);
	return ret;
}

int sv_put_object(struct call *k, int bfd)
{
	struct sv_meta m = { 0 };
	unsigned char md5[16];
	struct sv_tags tags;
	struct sv_wcond w;
	struct sv_put p;
	struct s3_buf h;
	uint64_t size;
	int ret;

	if (sv_object_headers(k->r, &m.headers))
		return sv_fail(k, 400, "MetadataTooLarge", "Your metadata headers exceed the maximum allowed metadata size");
	if ((ret = sv_tags_take(k, &tags)) || (ret = sv_wcond_take(k, bfd, &w))) {
		sv_meta_release(&m);
		return ret < 0 ? ret : 0;
	}
	ret = sv_put_begin(bfd, k->key, &p);
	if (ret) {
		sv_meta_release(&m);
		return sv_fail_errno(k, ret);
	}
	ret = sv_checksum_default(k);
	if (!ret)
		ret = sv_take_body(k, p.fd, SV_PUT_MAX, md5, &size);
	if (ret) {
		sv_put_abort(&p);
		sv_meta_release(&m);
		return ret < 0 ? ret : 0;
	}
	rdx_hex_encode(md5, 16, m.etag);
	m.ck = k->sum_ck; /* returned with x-amz-checksum-mode: ENABLED */
	memcpy(m.ck_sum, k->sum, sizeof(m.ck_sum));
	ret = sv_meta_set(p.fd, &m);
	if (ret == -ENOTSUP && !m.headers)
		ret = 0; /* the ETag is computed again when asked; no checksum is kept */
	if (ret) {
		sv_put_abort(&p);
		ret = ret == -ENOTSUP
			      ? sv_fail(k, 501, "NotImplemented",
					"the served directory's file system keeps no extended attributes, so this object's headers (Content-Type, x-amz-meta-*) cannot be kept")
			      : sv_fail_errno(k, ret);
		goto out;
	}
	if (tags.n && (ret = sv_tags_set(p.fd, &tags))) {
		sv_put_abort(&p);
		ret = sv_tags_fail(k, ret);
		goto out;
	}
	sv_wcond_arm(&w, &p);
	ret = sv_put_commit(&p, k->s->file_mode);
	if (ret) {
		ret = sv_commit_fail(k, ret);
		goto out;
	}
	s3_buf_init(&h, 0);
	sv_add_etag(&h, m.etag);
	sv_add_checksum(&h, k);
	sv_rdma_headers(k, &h);
	ret = s3_buf_err(&h) ? -ENOMEM : sv_answer(k, 200, h.p, NULL, 0);
	s3_buf_release(&h);
out:
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

int sv_copy_range(int in, uint64_t off, uint64_t len, int out, unsigned char md5[16],
		  struct s3_cksum *ck)
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
		if (ck)
			s3_cksum_update(ck, buf, n);
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
int sv_copy_source_open(struct call *k, int *sfd, struct sv_meta *sm, bool *self)
{
	char sbucket[64];
	char *skey = NULL;
	time_t mtime;
	int sb;

	if (k->sa.on) /* a copy's body is empty and skipped, not decoded */
		return sv_fail(k, 400, "InvalidRequest",
			    "x-amz-copy-source does not go with an aws-chunked body (x-amz-content-sha256 STREAMING-*)") ? -EIO : 1;
	if (copy_source(sv_hdr(k->r, "x-amz-copy-source"), sbucket, sizeof(sbucket), &skey)) {
		free(skey);
		return sv_fail(k, 400, "InvalidArgument", "Copy Source must mention the source bucket and key: sourcebucket/sourcekey") ? -EIO : 1;
	}
	*self = !strcmp(sbucket, k->bucket) && !strcmp(skey, k->key);
	sb = sv_bucket_open(k->s->root, sbucket);
	/* Another user's source is theirs to read, not the signer's. */
	if (sb >= 0 && k->s->shared && sv_bucket_owner(k->s, sb) != k->user) {
		close(sb);
		free(skey);
		return sv_fail(k, 403, "AccessDenied", "Access Denied") ? -EIO : 1;
	}
	*sfd = sb >= 0 ? sv_key_open(sb, skey, sm, &mtime) : sb;
	if (sb >= 0)
		close(sb);
	free(skey);
	if (*sfd == -ENOENT)
		return sv_fail(k, 404, sb < 0 ? "NoSuchBucket" : "NoSuchKey", "The copy source does not exist.") ? -EIO : 1;
	if (*sfd < 0)
		return sv_fail_errno(k, *sfd) ? -EIO : 1;
	if (conditions(k->r, "x-amz-copy-source-", sm->etag, mtime)) {
		close(*sfd);
		sv_meta_release(sm);
		return sv_fail(k, 412, "PreconditionFailed", PRECONDITION_MSG) ? -EIO : 1;
	}
	return 0;
}

/* CopyObjectResult: when the copy was made, its ETag and its checksum
 * (m: NULL, or the copy's record). */
static int copy_result(struct call *k, time_t mtime, const char *etag, const struct sv_meta *m)
{
	struct s3_buf b;
	char date[40];
	int ret;

	sv_iso_date(mtime, date);
	s3_buf_init(&b, 0);
	s3_buf_printf(&b, XML_HEAD "<CopyObjectResult xmlns=\"" XMLNS "\"><LastModified>%s</LastModified>"
			  "<ETag>&quot;%s&quot;</ETag>", date, etag);
	sv_checksum_xml(&b, m);
	s3_buf_printf(&b, "</CopyObjectResult>");
	ret = sv_xml_answer(k, 200, &b);
	s3_buf_release(&b);
	return ret;
}

int sv_copy_object(struct call *k, int bfd)
{
	const char *dir = sv_hdr(k->r, "x-amz-metadata-directive");
	const char *tdir = sv_hdr(k->r, "x-amz-tagging-directive");
	bool replace = dir && !strcmp(dir, "REPLACE"), self;
	struct sv_meta sm, m = { 0 };
	unsigned char md5[16];
	struct sv_tags tags;
	struct sv_wcond w;
	struct sv_put p;
	struct stat st;
	struct s3_cksum ck = { 0 };
	enum s3_ck asked;
	int sfd, ret;

	if (tdir && strcmp(tdir, "COPY") && strcmp(tdir, "REPLACE"))
		return sv_fail(k, 400, "InvalidArgument", "Unknown tag directive.");
	if ((ret = sv_checksum_asked(k, &asked)))
		return ret < 0 ? ret : 0;
	/* The new tags (REPLACE) are checked before anything is read. */
	if (tdir && !strcmp(tdir, "REPLACE") && (ret = sv_tags_take(k, &tags)))
		return ret < 0 ? ret : 0;
	if ((ret = sv_wcond_take(k, bfd, &w)))
		return ret < 0 ? ret : 0;
	if ((ret = sv_copy_source_open(k, &sfd, &sm, &self)))
		return ret < 0 ? ret : 0;
	if (self && !replace) {
		close(sfd);
		sv_meta_release(&sm);
		return sv_fail(k, 400, "InvalidRequest",
			    "This copy request is illegal because it is trying to copy an object to itself without changing the object's metadata, storage class, website redirect location or encryption attributes.");
	}
	ret = !tdir || !strcmp(tdir, "COPY") ? sv_tags_get(sfd, &tags) : 0;
	if (!ret && replace && sv_object_headers(k->r, &m.headers)) {
		close(sfd);
		sv_meta_release(&sm);
		return sv_fail(k, 400, "MetadataTooLarge", "Your metadata headers exceed the maximum allowed metadata size");
	}
	if (!ret && !replace && sm.headers && !(m.headers = strdup(sm.headers)))
		ret = -ENOMEM;
	if (!ret)
		ret = sv_put_begin(bfd, k->key, &p);
	if (ret) {
		close(sfd);
		sv_meta_release(&sm);
		sv_meta_release(&m);
		return sv_fail_errno(k, ret);
	}
	sv_body_skip(k->c, k->r, 1 << 20);
	/* The copy's checksum, as S3 makes it: of the algorithm asked,
	 * else the source's: taken over when it is of the whole, computed
	 * again over the bytes when it was of parts the copy does not have. */
	if (asked == S3_CK_NONE && sm.ck != S3_CK_NONE && !sm.ck_composite) {
		m.ck = sm.ck;
		memcpy(m.ck_sum, sm.ck_sum, sizeof(m.ck_sum));
	} else if (asked != S3_CK_NONE || sm.ck != S3_CK_NONE) {
		m.ck = asked != S3_CK_NONE ? asked : sm.ck;
		ret = s3_cksum_init(&ck, m.ck);
	}
	if (!ret)
		ret = sv_copy_range(sfd, 0, sm.size, p.fd, md5, ck.alg != S3_CK_NONE ? &ck : NULL);
	if (!ret && ck.alg != S3_CK_NONE)
		s3_cksum_final(&ck, m.ck_sum);
	s3_cksum_release(&ck);
	close(sfd);
	sv_meta_release(&sm);
	if (!ret) {
		rdx_hex_encode(md5, 16, m.etag);
		ret = sv_meta_set(p.fd, &m);
		if (ret == -ENOTSUP && !m.headers)
			ret = 0;
	}
	if (!ret && tags.n && (ret = sv_tags_set(p.fd, &tags))) {
		sv_put_abort(&p);
		sv_meta_release(&m);
		return sv_tags_fail(k, ret);
	}
	sv_wcond_arm(&w, &p);
	if (!ret)
		ret = sv_put_commit(&p, k->s->file_mode);
	else
		sv_put_abort(&p);
	if (ret) {
		sv_meta_release(&m);
		return sv_commit_fail(k, ret == -ENOTSUP ? -EIO : ret);
	}
	sfd = sv_object_open(bfd, k->key);
	st.st_mtim.tv_sec = time(NULL);
	if (sfd >= 0) {
		fstat(sfd, &st);
		close(sfd);
	}
	ret = copy_result(k, st.st_mtim.tv_sec, m.etag, &m);
	sv_meta_release(&m);
	return ret;
}
