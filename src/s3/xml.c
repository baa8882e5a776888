#include "s3/xml.h"

#include "core/err.h"
#include "core/log.h"
#include "s3/checksum.h"

#include <errno.h>
#include <expat.h>
#include <stdlib.h>
#include <string.h>

enum doc {
	DOC_ERROR,
	DOC_OBJECTS,
	DOC_BUCKETS,
	DOC_FIELD,
	DOC_DELETE,
	DOC_COMPLETE, /* a CompleteMultipartUpload request */
	DOC_DELETE_REQ, /* a Delete request */
	DOC_TAGGING, /* a Tagging request (PutObjectTagging) */
};

struct walk {
	XML_Parser p;
	enum doc doc;
	int depth;
	const char *path[S3_XML_MAX_DEPTH]; /* element names, root first */
	char names[S3_XML_MAX_DEPTH][64];
	char text[S3_XML_MAX_TEXT + 1];
	size_t tlen;
	bool text_over;
	int err;
	bool root_ok;
	struct s3_entry cur;
	struct s3_list *list;
	char *code, *msg;
	size_t codelen, msglen;
	const char *root, *field; /* DOC_FIELD: ROOT/FIELD's text into out */
	char *out;
	size_t outlen;
	bool found;
	size_t *count; /* DOC_DELETE: Deleted elements seen */
};

static void fail(struct walk *w, int err)
{
	if (!w->err)
		w->err = err;
	XML_StopParser(w->p, XML_FALSE);
}

/* expat hands names as "ns-uri|local" with namespace processing on. */
static const char *local(const char *name)
{
	const char *bar = strrchr(name, '|');

	return bar ? bar + 1 : name;
}

static bool at(const struct walk *w, const char *a, const char *b,
	       const char *c)
{
	int want = 1 + (b != NULL) + (c != NULL);

	if (w->depth != want)
		return false;
	return !strcmp(w->names[0], a) && (!b || !strcmp(w->names[1], b)) &&
	       (!c || !strcmp(w->names[2], c));
}

static void entry_free(struct s3_entry *e)
{
	free(e->name);
	free(e->mtime);
	free(e->etag);
	free(e->version);
}

static void XMLCALL on_start(void *ud, const XML_Char *name, const XML_Char **attrs)
{
	struct walk *w = ud;
	const char *n = local(name);
	static const char *const roots[] = { "Error", "ListBucketResult",
					     "ListAllMyBucketsResult", NULL,
					     "DeleteResult", "CompleteMultipartUpload",
					     "Delete", "Tagging" };

	(void)attrs;
	if (w->depth >= S3_XML_MAX_DEPTH || strlen(n) >= sizeof(w->names[0])) {
		fail(w, -RDX_EPROTO);
		return;
	}
	if (!w->depth) {
		if (strcmp(n, w->doc == DOC_FIELD ? w->root : roots[w->doc])) {
			fail(w, -RDX_EPROTO);
			return;
		}
		w->root_ok = true;
	}
	strcpy(w->names[w->depth++], n);
	w->tlen = 0;
	w->text_over = false;
	if (at(w, "ListBucketResult", "Contents", NULL) ||
	    at(w, "ListBucketResult", "CommonPrefixes", NULL) ||
	    at(w, "ListAllMyBucketsResult", "Buckets", "Bucket") ||
	    at(w, "DeleteResult", "Error", NULL) ||
	    at(w, "CompleteMultipartUpload", "Part", NULL) ||
	    at(w, "Delete", "Object", NULL) ||
	    at(w, "Tagging", "TagSet", "Tag")) {
		entry_free(&w->cur);
		memset(&w->cur, 0, sizeof(w->cur));
		w->cur.is_prefix = !strcmp(n, "CommonPrefixes");
	}
}

static void XMLCALL on_text(void *ud, const XML_Char *s, int len)
{
	struct walk *w = ud;

	if (len < 0 || w->text_over)
		return;
	if ((size_t)len > S3_XML_MAX_TEXT - w->tlen) {
		w->text_over = true;
		return;
	}
	memcpy(w->text + w->tlen, s, (size_t)len);
	w->tlen += (size_t)len;
}

static int set_str(struct walk *w, char **dst)
{
	if (w->text_over)
		return -E2BIG;
	free(*dst);
	*dst = strndup(w->text, w->tlen);
	return *dst ? 0 : -ENOMEM;
}

static int parse_u64(const char *s, size_t n, uint64_t *out)
{
	uint64_t v = 0;
	size_t i;

	if (!n || n > 20)
		return -RDX_EPROTO;
	for (i = 0; i < n; i++) {
		uint64_t d = (uint64_t)(s[i] - '0');

		if (s[i] < '0' || s[i] > '9' || v > UINT64_MAX / 10 ||
		    (v == UINT64_MAX / 10 && d > UINT64_MAX % 10))
			return -RDX_EPROTO;
		v = v * 10 + d;
	}
	*out = v;
	return 0;
}

static int push(struct walk *w)
{
	struct s3_list *l = w->list;

	if (!w->cur.name)
		return -RDX_EPROTO;
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 64;
		struct s3_entry *v;

		if (l->n >= S3_XML_MAX_ENTRIES)
			return -E2BIG;
		v = realloc(l->v, cap * sizeof(*v));
		if (!v)
			return -ENOMEM;
		l->v = v;
		l->cap = cap;
	}
	l->v[l->n++] = w->cur;
	memset(&w->cur, 0, sizeof(w->cur));
	return 0;
}

static void copy_text(const struct walk *w, char *dst, size_t len)
{
	size_t n = w->tlen < len - 1 ? w->tlen : len - 1;

	memcpy(dst, w->text, n);
	dst[n] = '\0';
}

static void XMLCALL on_end(void *ud, const XML_Char *name)
{
	struct walk *w = ud;
	const char *n = local(name);
	int ret = 0;

	if (w->doc == DOC_ERROR) {
		if (at(w, "Error", "Code", NULL))
			copy_text(w, w->code, w->codelen);
		else if (at(w, "Error", "Message", NULL))
			copy_text(w, w->msg, w->msglen);
	} else if (w->doc == DOC_OBJECTS) {
		if (at(w, "ListBucketResult", "Contents", "Key") ||
		    at(w, "ListBucketResult", "CommonPrefixes", "Prefix"))
			ret = set_str(w, &w->cur.name);
		else if (at(w, "ListBucketResult", "Contents", "LastModified"))
			ret = set_str(w, &w->cur.mtime);
		else if (at(w, "ListBucketResult", "Contents", "ETag"))
			ret = set_str(w, &w->cur.etag);
		else if (at(w, "ListBucketResult", "Contents", "Size"))
			ret = parse_u64(w->text, w->tlen, &w->cur.size);
		else if (at(w, "ListBucketResult", "Contents", NULL) ||
			 at(w, "ListBucketResult", "CommonPrefixes", NULL))
			ret = push(w);
		else if (at(w, "ListBucketResult", "IsTruncated", NULL))
			w->list->truncated = w->tlen == 4 && !memcmp(w->text, "true", 4);
		else if (at(w, "ListBucketResult", "NextContinuationToken", NULL))
			ret = set_str(w, &w->list->next_token);
	} else if (w->doc == DOC_DELETE) {
		if (at(w, "DeleteResult", "Error", "Key"))
			ret = set_str(w, &w->cur.name);
		else if (at(w, "DeleteResult", "Error", "Code"))
			ret = set_str(w, &w->cur.etag);
		else if (at(w, "DeleteResult", "Error", "Message"))
			ret = set_str(w, &w->cur.mtime);
		else if (at(w, "DeleteResult", "Error", NULL))
			ret = push(w);
		else if (at(w, "DeleteResult", "Deleted", NULL))
			++*w->count;
	} else if (w->doc == DOC_COMPLETE) {
		if (at(w, "CompleteMultipartUpload", "Part", "ETag"))
			ret = set_str(w, &w->cur.name);
		else if (at(w, "CompleteMultipartUpload", "Part", "PartNumber"))
			ret = parse_u64(w->text, w->tlen, &w->cur.size);
		else if (w->depth == 3 && !strcmp(w->names[1], "Part") &&
			 !strncmp(n, "Checksum", 8) && s3_cksum_alg(n + 8) != S3_CK_NONE) {
			/* One checksum a part: its value, and its algorithm. */
			ret = w->cur.etag ? -RDX_EPROTO : set_str(w, &w->cur.etag);
			if (!ret && !(w->cur.mtime = strdup(n + 8)))
				ret = -ENOMEM;
		}
		else if (at(w, "CompleteMultipartUpload", "Part", NULL))
			ret = w->cur.size ? push(w) : -RDX_EPROTO;
	} else if (w->doc == DOC_DELETE_REQ) {
		if (at(w, "Delete", "Object", "Key"))
			ret = set_str(w, &w->cur.name);
		else if (at(w, "Delete", "Object", "ETag"))
			ret = set_str(w, &w->cur.etag);
		else if (at(w, "Delete", "Object", "LastModifiedTime"))
			ret = set_str(w, &w->cur.mtime);
		else if (at(w, "Delete", "Object", "VersionId"))
			ret = set_str(w, &w->cur.version);
		else if (at(w, "Delete", "Object", "Size")) {
			ret = parse_u64(w->text, w->tlen, &w->cur.size);
			w->cur.has_size = true;
		} else if (at(w, "Delete", "Object", NULL))
			ret = push(w);
		else if (at(w, "Delete", "Quiet", NULL))
			w->list->truncated = w->tlen == 4 && !memcmp(w->text, "true", 4);
	} else if (w->doc == DOC_TAGGING) {
		bool in_tag = w->depth == 4 && !strcmp(w->names[1], "TagSet") &&
			      !strcmp(w->names[2], "Tag");

		if (in_tag && !strcmp(n, "Key"))
			ret = set_str(w, &w->cur.name);
		else if (in_tag && !strcmp(n, "Value"))
			ret = set_str(w, &w->cur.etag);
		else if (at(w, "Tagging", "TagSet", "Tag"))
			ret = w->cur.etag ? push(w) : -RDX_EPROTO;
	} else if (w->doc == DOC_FIELD) {
		if (at(w, w->root, w->field, NULL)) {
			if (w->text_over || w->tlen >= w->outlen)
				ret = -E2BIG;
			else
				copy_text(w, w->out, w->outlen);
			w->found = true;
		}
	} else {
		if (at(w, "ListAllMyBucketsResult", "Buckets", "Bucket"))
			ret = push(w);
		else if (w->depth == 4 && !strcmp(w->names[2], "Bucket") &&
			 !strcmp(n, "Name"))
			ret = set_str(w, &w->cur.name);
		else if (w->depth == 4 && !strcmp(w->names[2], "Bucket") &&
			 !strcmp(n, "CreationDate"))
			ret = set_str(w, &w->cur.mtime);
	}
	if (ret)
		fail(w, ret);
	w->depth--;
	w->tlen = 0;
	w->text_over = false;
}

/* Refuses DTDs outright: S3 sends none, and entities are a way to grow a
 * small document into a large one. */
static void XMLCALL on_doctype(void *ud, const XML_Char *name,
			       const XML_Char *sysid, const XML_Char *pubid,
			       int has_internal_subset)
{
	(void)name, (void)sysid, (void)pubid, (void)has_internal_subset;
	fail(ud, -RDX_EPROTO);
}

static int walk(enum doc doc, const char *xml, size_t n, struct walk *w)
{
	int ret = 0;

	if (n > (size_t)INT32_MAX)
		return -E2BIG;
	w->doc = doc;
	w->p = XML_ParserCreateNS(NULL, '|');
	if (!w->p)
		return -ENOMEM;
	XML_SetUserData(w->p, w);
	XML_SetElementHandler(w->p, on_start, on_end);
	XML_SetCharacterDataHandler(w->p, on_text);
	XML_SetStartDoctypeDeclHandler(w->p, on_doctype);
	XML_SetParamEntityParsing(w->p, XML_PARAM_ENTITY_PARSING_NEVER);
	if (XML_Parse(w->p, xml, (int)n, XML_TRUE) == XML_STATUS_ERROR && !w->err)
		w->err = -RDX_EPROTO;
	if (w->err)
		ret = w->err;
	else if (!w->root_ok)
		ret = -RDX_EPROTO;
	XML_ParserFree(w->p);
	entry_free(&w->cur);
	return ret;
}

int s3_xml_error(const char *xml, size_t n, char *code, size_t codelen,
		 char *msg, size_t msglen)
{
	struct walk *w = calloc(1, sizeof(*w));
	int ret;

	if (!w)
		return -ENOMEM;
	code[0] = msg[0] = '\0';
	w->code = code;
	w->msg = msg;
	w->codelen = codelen;
	w->msglen = msglen;
	ret = walk(DOC_ERROR, xml, n, w);
	free(w);
	if (!ret && !code[0])
		ret = -RDX_EPROTO;
	/* Both end up in a message on the user's terminal: printable. */
	rdx_printable(code, codelen, code, strlen(code));
	rdx_printable(msg, msglen, msg, strlen(msg));
	return ret;
}

int s3_xml_field(const char *xml, size_t n, const char *root,
		 const char *field, char *out, size_t outlen)
{
	struct walk *w = calloc(1, sizeof(*w));
	int ret;

	if (!w)
		return -ENOMEM;
	out[0] = '\0';
	w->root = root;
	w->field = field;
	w->out = out;
	w->outlen = outlen;
	ret = walk(DOC_FIELD, xml, n, w);
	if (!ret && !w->found)
		ret = -RDX_EPROTO;
	if (ret) /* no partial result */
		out[0] = '\0';
	free(w);
	return ret;
}

static int list_doc(enum doc doc, const char *xml, size_t n, struct s3_list *out)
{
	struct walk *w = calloc(1, sizeof(*w));
	size_t n0 = out->n;
	int ret;

	if (!w)
		return -ENOMEM;
	w->list = out;
	out->truncated = false;
	free(out->next_token);
	out->next_token = NULL;
	ret = walk(doc, xml, n, w);
	free(w);
	if (ret) { /* no partial result */
		out->truncated = false;
		free(out->next_token);
		out->next_token = NULL;
	}
	while (ret && out->n > n0) {
		entry_free(&out->v[--out->n]);
	}
	return ret;
}

int s3_xml_list_objects(const char *xml, size_t n, struct s3_list *out)
{
	return list_doc(DOC_OBJECTS, xml, n, out);
}

int s3_xml_list_buckets(const char *xml, size_t n, struct s3_list *out)
{
	return list_doc(DOC_BUCKETS, xml, n, out);
}

int s3_xml_delete_result(const char *xml, size_t n, struct s3_list *errors,
			 size_t *deleted)
{
	struct walk *w = calloc(1, sizeof(*w));
	size_t n0 = errors->n;
	int ret;

	if (!w)
		return -ENOMEM;
	w->list = errors;
	w->count = deleted;
	*deleted = 0;
	ret = walk(DOC_DELETE, xml, n, w);
	free(w);
	errors->truncated = false;
	while (ret && errors->n > n0) {
		struct s3_entry *e = &errors->v[--errors->n];

		free(e->name);
		free(e->mtime);
		free(e->etag);
	}
	if (ret)
		*deleted = 0;
	return ret;
}

int s3_xml_complete_request(const char *xml, size_t n, struct s3_list *out)
{
	return list_doc(DOC_COMPLETE, xml, n, out);
}

int s3_xml_delete_request(const char *xml, size_t n, struct s3_list *out,
			  bool *quiet)
{
	int ret = list_doc(DOC_DELETE_REQ, xml, n, out);

	*quiet = out->truncated;
	out->truncated = false;
	return ret;
}

int s3_xml_tagging_request(const char *xml, size_t n, struct s3_list *out)
{
	return list_doc(DOC_TAGGING, xml, n, out);
}

void s3_list_release(struct s3_list *l)
{
	size_t i;

	for (i = 0; i < l->n; i++)
		entry_free(&l->v[i]);
	free(l->v);
	free(l->next_token);
	memset(l, 0, sizeof(*l));
}
