#include "core/hex.h"
#include "s3/sigv4.h"

#include <errno.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

void s3_sha256_hex(const void *p, size_t n, char *out)
{
	unsigned char md[SHA256_DIGEST_LENGTH];

	SHA256(p, n, md);
	rdx_hex_encode(md, sizeof(md), out);
}

static bool unreserved(unsigned char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
	       (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_' ||
	       c == '~';
}

int s3_uri_encode(struct s3_buf *b, const char *s, size_t n, bool keep_slash)
{
	static const char up[] = "0123456789ABCDEF";
	size_t i;

	for (i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];

		if (unreserved(c) || (keep_slash && c == '/')) {
			s3_buf_addc(b, (char)c);
		} else {
			char e[3] = { '%', up[c >> 4], up[c & 15] };

			s3_buf_add(b, e, 3);
		}
	}
	return s3_buf_err(b);
}

int s3_uri_decode(struct s3_buf *b, const char *s, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		if (s[i] != '%') {
			s3_buf_addc(b, s[i]);
			continue;
		}
		if (n - i < 3)
			return -EINVAL;
		if (rdx_hex_digit(s[i + 1]) < 0 || rdx_hex_digit(s[i + 2]) < 0)
			return -EINVAL;
		s3_buf_addc(b, (char)(rdx_hex_digit(s[i + 1]) * 16 + rdx_hex_digit(s[i + 2])));
		i += 2;
	}
	return s3_buf_err(b);
}

/* RFC 3986 dot-segment removal plus empty-segment removal, as the SigV4
 * suite's normalize-path cases expect ("//a//" is "/a/"). */
static int normalized(struct s3_buf *b, const char *path)
{
	const char *seg[256];
	size_t len[256], n = 0, i;
	const char *p = path, *end = path + strlen(path);
	bool trailing = false;

	while (p < end) {
		const char *q;
		size_t l;

		while (p < end && *p == '/')
			p++;
		if (p == end) {
			trailing = true;
			break;
		}
		q = memchr(p, '/', (size_t)(end - p));
		l = q ? (size_t)(q - p) : (size_t)(end - p);
		trailing = false;
		if (l == 1 && p[0] == '.') {
			trailing = true;
		} else if (l == 2 && p[0] == '.' && p[1] == '.') {
			if (n)
				n--;
			trailing = true;
		} else {
			if (n == sizeof(seg) / sizeof(seg[0]))
				return -E2BIG;
			seg[n] = p;
			len[n++] = l;
		}
		p += l;
	}
	for (i = 0; i < n; i++) {
		s3_buf_addc(b, '/');
		s3_uri_encode(b, seg[i], len[i], false);
	}
	if (!n || trailing)
		s3_buf_addc(b, '/');
	return s3_buf_err(b);
}

int s3_sigv4_path(struct s3_buf *b, const char *path, bool normalize)
{
	if (!path || path[0] != '/')
		return -EINVAL;
	if (normalize)
		return normalized(b, path);
	return s3_uri_encode(b, path, strlen(path), true);
}

struct qpair {
	char *name; /* encoded */
	char *value;
};

static int qcmp(const void *a, const void *b)
{
	const struct qpair *x = a, *y = b;
	int c = strcmp(x->name, y->name);

	return c ? c : strcmp(x->value, y->value);
}

static char *encoded(const char *s)
{
	struct s3_buf b;

	s3_buf_init(&b, 0);
	s3_buf_add(&b, "", 0); /* "" encodes to "", not NULL */
	if (s3_uri_encode(&b, s, strlen(s), false)) {
		s3_buf_release(&b);
		return NULL;
	}
	return b.p;
}

int s3_sigv4_query(struct s3_buf *b, const struct s3_kv *q, size_t n)
{
	struct qpair *v;
	size_t i;
	int ret = 0;

	if (!n)
		return s3_buf_err(b);
	v = calloc(n, sizeof(*v));
	if (!v)
		return -ENOMEM;
	for (i = 0; i < n && !ret; i++) {
		v[i].name = encoded(q[i].name);
		v[i].value = encoded(q[i].value ? q[i].value : "");
		if (!v[i].name || !v[i].value)
			ret = -ENOMEM;
	}
	if (!ret) {
		qsort(v, n, sizeof(*v), qcmp);
		for (i = 0; i < n; i++)
			s3_buf_printf(b, "%s%s=%s", i ? "&" : "", v[i].name,
				      v[i].value);
		ret = s3_buf_err(b);
	}
	for (i = 0; i < n; i++) {
		free(v[i].name);
		free(v[i].value);
	}
	free(v);
	return ret;
}

/* ------------------------------------------------------------ headers */

struct hdr {
	char *name;  /* lower case */
	char *value; /* trimmed, space runs collapsed */
	size_t order;
};

static int hcmp(const void *a, const void *b)
{
	const struct hdr *x = a, *y = b;
	int c = strcmp(x->name, y->name);

	if (c)
		return c;
	return x->order < y->order ? -1 : x->order > y->order;
}

static bool token_char(unsigned char c)
{
	return c > 0x20 && c < 0x7f && c != ':' && !strchr("\"(),/;<=>?@[\\]{}", c);
}

static int canon_header(const struct s3_kv *in, size_t order, struct hdr *out)
{
	size_t nl = strlen(in->name), i, o = 0;
	const char *v = in->value ? in->value : "";
	bool space = false;

	if (!nl)
		return -EINVAL;
	out->order = order;
	out->name = malloc(nl + 1);
	out->value = malloc(strlen(v) + 1);
	if (!out->name || !out->value)
		return -ENOMEM;
	for (i = 0; i < nl; i++) {
		unsigned char c = (unsigned char)in->name[i];

		if (!token_char(c))
			return -EINVAL;
		out->name[i] = (char)(c >= 'A' && c <= 'Z' ? c + 32 : c);
	}
	out->name[nl] = '\0';
	for (; *v == ' ' || *v == '\t'; v++)
		;
	for (; *v; v++) {
		if (*v == '\r' || *v == '\n' || *v == '\0')
			return -EINVAL;
		if (*v == ' ' || *v == '\t') {
			space = true;
			continue;
		}
		if (space && o)
			out->value[o++] = ' ';
		space = false;
		out->value[o++] = *v;
	}
	out->value[o] = '\0';
	return 0;
}

/* Appends "name:value\n" per distinct header, values of repeated names
 * joined with ',' in the order given, and the signed-headers list. */
static int canon_headers(const struct s3_sign *s, struct s3_buf *creq,
			 struct s3_buf *signed_hdrs)
{
	struct hdr *h;
	size_t i;
	int ret = 0;

	if (!s->nheaders)
		return -EINVAL;
	h = calloc(s->nheaders, sizeof(*h));
	if (!h)
		return -ENOMEM;
	for (i = 0; i < s->nheaders && !ret; i++)
		ret = canon_header(&s->headers[i], i, &h[i]);
	if (!ret) {
		qsort(h, s->nheaders, sizeof(*h), hcmp);
		for (i = 0; i < s->nheaders; i++) {
			bool same = i && !strcmp(h[i].name, h[i - 1].name);

			if (same) {
				s3_buf_printf(creq, ",%s", h[i].value);
				continue;
			}
			s3_buf_printf(creq, "%s%s:%s", i ? "\n" : "", h[i].name,
				      h[i].value);
			s3_buf_printf(signed_hdrs, "%s%s", i ? ";" : "", h[i].name);
		}
		s3_buf_addc(creq, '\n');
		ret = s3_buf_err(creq) ? s3_buf_err(creq) : s3_buf_err(signed_hdrs);
	}
	for (i = 0; i < s->nheaders; i++) {
		free(h[i].name);
		free(h[i].value);
	}
	free(h);
	return ret;
}

/* ------------------------------------------------------------- signing */

void s3_sigv4_init(struct s3_sigv4 *sig)
{
	memset(sig, 0, sizeof(*sig));
	s3_buf_init(&sig->creq, 0);
	s3_buf_init(&sig->sts, 0);
	s3_buf_init(&sig->authz, 0);
	s3_buf_init(&sig->signed_hdrs, 0);
}

void s3_sigv4_release(struct s3_sigv4 *sig)
{
	s3_buf_release(&sig->creq);
	s3_buf_release(&sig->sts);
	s3_buf_release(&sig->authz);
	s3_buf_release(&sig->signed_hdrs);
}

static bool valid_date(const char *d)
{
	size_t i;

	if (!d || strlen(d) != 16 || d[8] != 'T' || d[15] != 'Z')
		return false;
	for (i = 0; i < 15; i++)
		if (i != 8 && (d[i] < '0' || d[i] > '9'))
			return false;
	return true;
}

static bool valid_scope_part(const char *s)
{
	if (!s || !*s)
		return false;
	for (; *s; s++)
		if (*s == '/' || (unsigned char)*s <= 0x20 || *s == 0x7f)
			return false;
	return true;
}

static int hmac(const void *key, size_t klen, const char *msg, unsigned char *out)
{
	unsigned int len = 0;

	if (!HMAC(EVP_sha256(), key, (int)klen, (const unsigned char *)msg,
		  strlen(msg), out, &len) || len != SHA256_DIGEST_LENGTH)
		return -ENOMEM;
	return 0;
}

int s3_sigv4_key(const char *secret, const char *day, const char *region,
		 const char *service, unsigned char key[32])
{
	struct s3_buf k;
	int ret;

	s3_buf_init(&k, 0);
	s3_buf_printf(&k, "AWS4%s", secret);
	ret = s3_buf_err(&k);
	if (!ret)
		ret = hmac(k.p, k.len, day, key);
	if (!ret)
		ret = hmac(key, SHA256_DIGEST_LENGTH, region, key);
	if (!ret)
		ret = hmac(key, SHA256_DIGEST_LENGTH, service, key);
	if (!ret)
		ret = hmac(key, SHA256_DIGEST_LENGTH, "aws4_request", key);
	if (k.p)
		OPENSSL_cleanse(k.p, k.len);
	s3_buf_release(&k);
	return ret;
}

static int signing_key(const struct s3_creds *c, const struct s3_sign *s,
		       unsigned char key[SHA256_DIGEST_LENGTH])
{
	char day[9];

	memcpy(day, s->amz_date, 8);
	day[8] = '\0';
	return s3_sigv4_key(c->secret_key, day, s->region, s->service, key);
}

int s3_sigv4_sign(const struct s3_creds *c, const struct s3_sign *s,
		  struct s3_sigv4 *sig)
{
	unsigned char key[SHA256_DIGEST_LENGTH], mac[SHA256_DIGEST_LENGTH];
	char hash[S3_SHA256_HEX_LEN + 1];
	int ret;

	if (!valid_date(s->amz_date) || !valid_scope_part(s->region) ||
	    !valid_scope_part(s->service) || !s->method || !*s->method ||
	    !s->payload_hash || !c->access_key || !c->secret_key ||
	    !valid_scope_part(c->access_key))
		return -EINVAL;
	s3_buf_reset(&sig->creq);
	s3_buf_reset(&sig->sts);
	s3_buf_reset(&sig->authz);
	s3_buf_reset(&sig->signed_hdrs);
	s3_buf_printf(&sig->creq, "%s\n", s->method);
	ret = s3_sigv4_path(&sig->creq, s->path, s->normalize_path);
	if (ret)
		return ret;
	s3_buf_addc(&sig->creq, '\n');
	ret = s3_sigv4_query(&sig->creq, s->query, s->nquery);
	if (ret)
		return ret;
	s3_buf_addc(&sig->creq, '\n');
	ret = canon_headers(s, &sig->creq, &sig->signed_hdrs);
	if (ret)
		return ret;
	s3_buf_printf(&sig->creq, "\n%s\n%s", s3_buf_str(&sig->signed_hdrs),
		      s->payload_hash);
	if ((ret = s3_buf_err(&sig->creq)))
		return ret;
	s3_sha256_hex(sig->creq.p, sig->creq.len, hash);
	s3_buf_printf(&sig->sts, "AWS4-HMAC-SHA256\n%s\n%.8s/%s/%s/aws4_request\n%s",
		      s->amz_date, s->amz_date, s->region, s->service, hash);
	if ((ret = s3_buf_err(&sig->sts)))
		return ret;
	ret = signing_key(c, s, key);
	if (!ret)
		ret = hmac(key, sizeof(key), sig->sts.p, mac);
	OPENSSL_cleanse(key, sizeof(key));
	if (ret)
		return ret;
	rdx_hex_encode(mac, sizeof(mac), sig->signature);
	s3_buf_printf(&sig->authz,
		      "AWS4-HMAC-SHA256 Credential=%s/%.8s/%s/%s/aws4_request, "
		      "SignedHeaders=%s, Signature=%s",
		      c->access_key, s->amz_date, s->region, s->service,
		      s3_buf_str(&sig->signed_hdrs), sig->signature);
	return s3_buf_err(&sig->authz);
}

int s3_sigv4_presign(const struct s3_creds *c, const struct s3_sign *s,
		     unsigned expires, struct s3_sigv4 *sig,
		     struct s3_buf *url_query)
{
	struct s3_sign p = *s;
	struct s3_kv *q;
	struct s3_buf cred, hdrs;
	char exp[16];
	size_t n = s->nquery, i;
	int ret;

	if (expires < 1 || expires > 604800 || !valid_date(s->amz_date) ||
	    !s->nheaders)
		return -EINVAL;
	q = calloc(n + 6, sizeof(*q));
	if (!q)
		return -ENOMEM;
	s3_buf_init(&cred, 0);
	s3_buf_init(&hdrs, 0);
	/* The signed-header list goes into the query, so work it out first. */
	{
		struct s3_buf scratch;

		s3_buf_init(&scratch, 0);
		ret = canon_headers(s, &scratch, &hdrs);
		s3_buf_release(&scratch);
	}
	s3_buf_printf(&cred, "%s/%.8s/%s/%s/aws4_request", c->access_key,
		      s->amz_date, s->region, s->service);
	if (!ret)
		ret = s3_buf_err(&cred);
	if (ret)
		goto out;
	snprintf(exp, sizeof(exp), "%u", expires);
	for (i = 0; i < s->nquery; i++)
		q[i] = s->query[i];
	q[n++] = (struct s3_kv){ "X-Amz-Algorithm", "AWS4-HMAC-SHA256" };
	q[n++] = (struct s3_kv){ "X-Amz-Credential", cred.p };
	q[n++] = (struct s3_kv){ "X-Amz-Date", s->amz_date };
	q[n++] = (struct s3_kv){ "X-Amz-Expires", exp };
	if (c->session_token)
		q[n++] = (struct s3_kv){ "X-Amz-Security-Token", c->session_token };
	q[n++] = (struct s3_kv){ "X-Amz-SignedHeaders", hdrs.p };
	p.query = q;
	p.nquery = n;
	p.payload_hash = S3_UNSIGNED_PAYLOAD;
	ret = s3_sigv4_sign(c, &p, sig);
	if (ret)
		goto out;
	ret = s3_sigv4_query(url_query, q, n);
	if (!ret) {
		s3_buf_printf(url_query, "&X-Amz-Signature=%s", sig->signature);
		ret = s3_buf_err(url_query);
	}
out:
	s3_buf_release(&cred);
	s3_buf_release(&hdrs);
	free(q);
	return ret;
}
