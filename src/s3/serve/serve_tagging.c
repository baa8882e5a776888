/* rds3 serve: object tags.  They are kept beside the object, in the
 * extended attribute "user.rds3.tags" (one "KEY\tVALUE\n" line each), so
 * they go with the file when it is renamed over its key and with it when
 * it is replaced.  They come with PutObject, CopyObject and
 * CreateMultipartUpload (x-amz-tagging, URL-encoded "k=v&k2=v2") and
 * with PutObjectTagging (a Tagging document), checked against S3's
 * limits: 10 tags, keys of 1..128 characters and values of 0..256,
 * unique keys, none starting "aws:". */
#include "s3/serve/serve_ops.h"

#include "s3/sigv4.h"
#include "s3/xml.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/xattr.h>
#include <unistd.h>

#define TAGS_XATTR "user.rds3.tags"

/* The length in characters of s, when it is valid UTF-8 of S3's tag
 * alphabet: letters, digits, spaces and + - = . _ : / @.  Past ASCII
 * every character but the C1 controls passes: S3 takes Unicode letters,
 * digits and spaces, which are not told apart here.  -1: a character
 * outside it, -2: not UTF-8. */
static long tag_chars(const char *s)
{
	const unsigned char *p = (const unsigned char *)s;
	long n = 0;

	while (*p) {
		uint32_t cp;
		int len = sv_utf8_next(p, &cp);

		if (len < 0)
			return -2;
		if (cp < 0x80 && !((cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z') ||
				   (cp >= '0' && cp <= '9') || strchr(" +-=._:/@", (int)cp)))
			return -1;
		if (cp >= 0x80 && cp < 0xa0)
			return -1; /* a C1 control */
		p += len, n++;
	}
	return n;
}

static const char too_many[] = "Object tags cannot be greater than 10";
static const char duplicate[] = "Cannot provide multiple Tags with the same key";
static const char bad_header[] =
	"The header 'x-amz-tagging' shall be encoded as UTF-8 then URLEncoded URL query parameters without tag name duplicates.";

/* Adds key=value to t, checked as S3 checks a tag.  Returns NULL, or
 * the message of S3's error (too_many: 400 BadRequest, else 400
 * InvalidTag). */
static const char *tag_add(struct sv_tags *t, const char *key, const char *value)
{
	long kn = tag_chars(key), vn = tag_chars(value);
	unsigned i;

	for (i = 0; i < t->n; i++)
		if (!strcmp(t->v[i].key, key))
			return duplicate;
	if (t->n == SV_TAGS_MAX)
		return too_many;
	if (kn <= 0)
		return "The TagKey you have provided is invalid";
	if (kn > SV_TAG_KEY_CHARS)
		return "The TagKey you have provided is too long, max 128";
	if (vn < 0)
		return "The TagValue you have provided is invalid";
	if (vn > SV_TAG_VALUE_CHARS)
		return "The TagValue you have provided is too long, max 256";
	if (!strncmp(key, "aws:", 4))
		return "Your TagKey cannot be prefixed with aws:";
	/* At most 4 bytes a character: they fit. */
	snprintf(t->v[t->n].key, sizeof(t->v[0].key), "%s", key);
	snprintf(t->v[t->n].value, sizeof(t->v[0].value), "%s", value);
	t->n++;
	return NULL;
}

/* S3's answer for tag_add()'s message. */
static int tag_fail(struct call *k, const char *why)
{
	return sv_fail(k, 400, why == too_many ? "BadRequest" : "InvalidTag", why) ? -EIO : 1;
}

int sv_tags_format(const struct sv_tags *t, struct s3_buf *b)
{
	for (unsigned i = 0; i < t->n; i++)
		s3_buf_printf(b, "%s\t%s\n", t->v[i].key, t->v[i].value);
	return s3_buf_err(b);
}

int sv_tags_parse(const char *s, size_t n, struct sv_tags *t)
{
	const char *end = s + n;

	t->n = 0;
	while (s < end) {
		const char *nl = memchr(s, '\n', (size_t)(end - s));
		const char *tab = nl ? memchr(s, '\t', (size_t)(nl - s)) : NULL;
		char key[sizeof(t->v[0].key)], value[sizeof(t->v[0].value)];

		if (!tab || (size_t)(tab - s) >= sizeof(key) ||
		    (size_t)(nl - tab - 1) >= sizeof(value))
			return -EINVAL;
		memcpy(key, s, (size_t)(tab - s));
		key[tab - s] = '\0';
		memcpy(value, tab + 1, (size_t)(nl - tab - 1));
		value[nl - tab - 1] = '\0';
		if (tag_add(t, key, value))
			return -EINVAL;
		s = nl + 1;
	}
	return 0;
}

int sv_tags_get(int fd, struct sv_tags *t)
{
	char v[SV_TAGS_MAX * (sizeof(t->v[0].key) + sizeof(t->v[0].value)) + 1];
	ssize_t n = fgetxattr(fd, TAGS_XATTR, v, sizeof(v) - 1);

	t->n = 0;
	if (n < 0) /* none; or too large, so not this server's */
		return errno == ENODATA || errno == ENOTSUP || errno == ERANGE ? 0 : -errno;
	/* Not one this server wrote (another hand's): no tags. */
	if (sv_tags_parse(v, (size_t)n, t))
		t->n = 0;
	return 0;
}

int sv_tags_set(int fd, const struct sv_tags *t)
{
	struct s3_buf b;
	int ret;

	if (!t->n) {
		if (fremovexattr(fd, TAGS_XATTR) && errno != ENODATA)
			return errno == ENOTSUP ? 0 : -errno; /* none kept: none there */
		return 0;
	}
	s3_buf_init(&b, 0);
	ret = sv_tags_format(t, &b);
	if (!ret && fsetxattr(fd, TAGS_XATTR, b.p, b.len, 0))
		ret = errno == ENOTSUP ? -ENOTSUP : errno == ENOSPC || errno == E2BIG ? -E2BIG : -errno;
	s3_buf_release(&b);
	return ret;
}

int sv_tags_fail(struct call *k, int err)
{
	if (err == -ENOTSUP)
		return sv_fail(k, 501, "NotImplemented",
			       "the served directory's file system keeps no extended attributes, so object tags cannot be kept");
	if (err == -E2BIG)
		return sv_fail(k, 501, "NotImplemented",
			       "the served directory's file system cannot keep this many tag bytes beside the object");
	return sv_fail_errno(k, err);
}

int sv_tags_take(struct call *k, struct sv_tags *t)
{
	const char *h = sv_hdr(k->r, "x-amz-tagging");

	t->n = 0;
	while (h && *h) {
		const char *amp = strchr(h, '&'), *eq;
		size_t n = amp ? (size_t)(amp - h) : strlen(h);
		struct s3_buf key, value;
		const char *why = NULL;
		bool bad = false;

		eq = memchr(h, '=', n);
		s3_buf_init(&key, 0);
		s3_buf_init(&value, 0);
		/* The query string itself wrong (S3's InvalidArgument), or a
		 * tag S3 refuses (InvalidTag). */
		if (n) {
			bad = s3_uri_decode(&key, h, eq ? (size_t)(eq - h) : n) ||
			      (eq && s3_uri_decode(&value, eq + 1, n - (size_t)(eq - h) - 1)) ||
			      !key.len || strlen(s3_buf_str(&key)) != key.len ||
			      strlen(s3_buf_str(&value)) != value.len ||
			      tag_chars(s3_buf_str(&key)) == -2 || tag_chars(s3_buf_str(&value)) == -2;
			why = bad ? NULL
			      : key.len > SV_TAG_KEY_CHARS * 4 ? "The TagKey you have provided is too long, max 128"
			      : value.len > SV_TAG_VALUE_CHARS * 4 ? "The TagValue you have provided is too long, max 256"
								   : tag_add(t, s3_buf_str(&key), s3_buf_str(&value));
		}
		s3_buf_release(&key);
		s3_buf_release(&value);
		if (bad || why == duplicate)
			return sv_fail(k, 400, "InvalidArgument", bad_header) ? -EIO : 1;
		if (why)
			return tag_fail(k, why);
		h = amp ? amp + 1 : NULL;
	}
	return 0;
}

/* GetObjectTagging's document. */
static int answer_tags(struct call *k, const struct sv_tags *t)
{
	struct s3_buf b;
	int ret;

	s3_buf_init(&b, 0);
	s3_buf_adds(&b, XML_HEAD "<Tagging xmlns=\"" XMLNS "\"><TagSet>");
	for (unsigned i = 0; i < t->n; i++) {
		s3_buf_adds(&b, "<Tag><Key>");
		sv_xml_esc(&b, t->v[i].key);
		s3_buf_adds(&b, "</Key><Value>");
		sv_xml_esc(&b, t->v[i].value);
		s3_buf_adds(&b, "</Value></Tag>");
	}
	s3_buf_adds(&b, "</TagSet></Tagging>");
	ret = sv_xml_answer(k, 200, &b);
	s3_buf_release(&b);
	return ret;
}

/* PutObjectTagging's document into t: 0, or an answer was sent (1) or
 * could not be (-errno). */
static int take_tagging(struct call *k, struct sv_tags *t)
{
	struct s3_list l = { 0 };
	const char *why = NULL;
	char *xml = NULL;
	size_t n, i;
	int ret;

	if ((ret = sv_take_xml(k, true, &xml, &n)))
		return ret;
	ret = s3_xml_tagging_request(xml, n, &l);
	free(xml);
	if (ret == -ENOMEM) {
		s3_list_release(&l);
		return -ENOMEM;
	}
	if (ret) {
		s3_list_release(&l);
		return sv_fail(k, 400, "MalformedXML",
			       "The XML you provided was not well-formed or did not validate against our published schema") ? -EIO : 1;
	}
	t->n = 0;
	for (i = 0; i < l.n && !why; i++)
		why = strlen(l.v[i].name) > SV_TAG_KEY_CHARS * 4 ? "The TagKey you have provided is too long, max 128"
		      : strlen(l.v[i].etag) > SV_TAG_VALUE_CHARS * 4 ? "The TagValue you have provided is too long, max 256"
								     : tag_add(t, l.v[i].name, l.v[i].etag);
	s3_list_release(&l);
	return why ? tag_fail(k, why) : 0;
}

int sv_object_tagging(struct call *k)
{
	const char *m = k->r->method;
	struct sv_meta om;
	struct sv_tags t;
	time_t mt;
	int bfd, fd, ret;

	if ((ret = sv_bucket_fd(k, &bfd)) || bfd < 0)
		return ret;
	fd = sv_key_open(bfd, k->key, &om, &mt); /* an object or a folder marker */
	close(bfd);
	if (fd < 0)
		return sv_fail_errno(k, fd);
	sv_meta_release(&om);
	if (!strcmp(m, "GET")) {
		ret = sv_tags_get(fd, &t);
		ret = ret ? sv_fail_errno(k, ret) : answer_tags(k, &t);
	} else if (!strcmp(m, "PUT")) {
		/* On the object as it was opened: one that replaces it meanwhile
		 * comes with its own tags, as it would after this request. */
		ret = take_tagging(k, &t);
		if (!ret)
			ret = (ret = sv_tags_set(fd, &t)) ? sv_tags_fail(k, ret)
							  : sv_answer(k, 200, NULL, NULL, 0);
		else
			ret = ret > 0 ? 0 : ret;
	} else if (!strcmp(m, "DELETE")) {
		t.n = 0;
		ret = sv_tags_set(fd, &t);
		ret = ret ? sv_tags_fail(k, ret) : sv_answer(k, 204, NULL, NULL, 0);
	} else {
		ret = sv_fail(k, 405, "MethodNotAllowed", "The specified method is not allowed against this resource.");
	}
	close(fd);
	return ret;
}
