/* SigV4 against AWS's published vectors: the aws-sig-v4-test-suite files
 * in tests/unit/sigv4/ (canonical request, string to sign and
 * Authorization checked separately) and the S3 examples from AWS's S3
 * documentation; then S3's own encoding rules and hostile input. */
#include "s3/sigv4.h"
#include "tap.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SUITE_DIR "tests/unit/sigv4"

static const struct s3_creds suite_creds = {
	.access_key = "AKIDEXAMPLE",
	.secret_key = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
};

static const struct s3_creds s3_doc_creds = {
	.access_key = "AKIAIOSFODNN7EXAMPLE",
	.secret_key = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
};

static char *slurp(const char *dir, const char *name, const char *ext)
{
	char path[512];
	FILE *f;
	char *p;
	long n;

	snprintf(path, sizeof(path), "%s/%s.%s", dir, name, ext);
	f = fopen(path, "rb");
	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	rewind(f);
	p = calloc(1, (size_t)n + 1);
	if (p && fread(p, 1, (size_t)n, f) != (size_t)n) {
		free(p);
		p = NULL;
	}
	fclose(f);
	return p;
}

#define MAXH 16

struct vreq {
	char *text; /* owns the strings below */
	char method[16];
	struct s3_buf path;
	struct s3_buf qbuf; /* decoded names and values, NUL-separated */
	struct s3_kv q[8];
	size_t nq;
	struct s3_kv h[MAXH];
	size_t nh;
	const char *body;
	const char *date;
};

/* Parses a .req: "METHOD URI HTTP/1.1", "Name:value" lines, a blank line
 * and the body. */
static int parse_req(struct vreq *r, char *text)
{
	char *line, *sp, *uri, *qs, *eol, *p;
	size_t off[16], i;

	memset(r, 0, sizeof(*r));
	r->text = text;
	s3_buf_init(&r->path, 0);
	s3_buf_init(&r->qbuf, 0);
	eol = strchr(text, '\n');
	if (eol)
		*eol = '\0';
	sp = strchr(text, ' ');
	if (!sp || (size_t)(sp - text) >= sizeof(r->method))
		return -1;
	memcpy(r->method, text, (size_t)(sp - text));
	uri = sp + 1;
	sp = strrchr(uri, ' ');
	if (!sp)
		return -1;
	*sp = '\0';
	qs = strchr(uri, '?');
	if (qs)
		*qs++ = '\0';
	if (s3_uri_decode(&r->path, uri, strlen(uri)))
		return -1;
	while (qs && *qs && r->nq < 8) {
		char *amp = strchr(qs, '&'), *eq;

		if (amp)
			*amp = '\0';
		eq = strchr(qs, '=');
		off[2 * r->nq] = r->qbuf.len;
		s3_uri_decode(&r->qbuf, qs, eq ? (size_t)(eq - qs) : strlen(qs));
		s3_buf_add(&r->qbuf, "", 1);
		off[2 * r->nq + 1] = r->qbuf.len;
		if (eq)
			s3_uri_decode(&r->qbuf, eq + 1, strlen(eq + 1));
		s3_buf_add(&r->qbuf, "", 1);
		r->nq++;
		qs = amp ? amp + 1 : NULL;
	}
	for (i = 0; i < r->nq; i++) {
		r->q[i].name = r->qbuf.p + off[2 * i];
		r->q[i].value = r->qbuf.p + off[2 * i + 1];
	}
	line = eol ? eol + 1 : NULL;
	r->body = "";
	while (line && *line && r->nh < MAXH) {
		if (*line == '\n') { /* the blank line before the body */
			r->body = line + 1;
			break;
		}
		eol = strchr(line, '\n');
		if (eol)
			*eol = '\0';
		p = strchr(line, ':');
		if (!p)
			return -1;
		*p = '\0';
		r->h[r->nh].name = line;
		r->h[r->nh].value = p + 1;
		if (!strcasecmp(line, "X-Amz-Date"))
			r->date = p + 1;
		r->nh++;
		line = eol ? eol + 1 : NULL;
	}
	return r->date ? 0 : -1;
}

static void vreq_release(struct vreq *r)
{
	s3_buf_release(&r->path);
	s3_buf_release(&r->qbuf);
	free(r->text);
}

static int by_name(const struct dirent **a, const struct dirent **b)
{
	return strcmp((*a)->d_name, (*b)->d_name);
}

static int only_req(const struct dirent *d)
{
	size_t n = strlen(d->d_name);

	return n > 4 && !strcmp(d->d_name + n - 4, ".req");
}

static void test_suite(void)
{
	struct dirent **ents;
	int n, i;

	n = scandir(SUITE_DIR, &ents, only_req, by_name);
	CHECK(n >= 20, "the suite's vectors are in %s (%d found; run from the repository root)",
	      SUITE_DIR, n);
	for (i = 0; i < n; i++) {
		char name[256], hash[65];
		char *req, *creq, *sts, *authz;
		struct vreq r = { 0 };
		struct s3_sigv4 sig;
		struct s3_sign s;
		int ret;

		snprintf(name, sizeof(name), "%.*s", (int)strlen(ents[i]->d_name) - 4,
			 ents[i]->d_name);
		free(ents[i]);
		req = slurp(SUITE_DIR, name, "req");
		creq = slurp(SUITE_DIR, name, "creq");
		sts = slurp(SUITE_DIR, name, "sts");
		authz = slurp(SUITE_DIR, name, "authz");
		if (!req || !creq || !sts || !authz || parse_req(&r, req)) {
			CHECK(0, "%s: vector files readable and parsed", name);
			if (req && r.text)
				vreq_release(&r);
			else
				free(req);
			free(creq);
			free(sts);
			free(authz);
			continue;
		}
		s3_sha256_hex(r.body, strlen(r.body), hash);
		s = (struct s3_sign){
			.method = r.method,
			.path = s3_buf_str(&r.path),
			.query = r.q,
			.nquery = r.nq,
			.headers = r.h,
			.nheaders = r.nh,
			.payload_hash = hash,
			.region = "us-east-1",
			.service = "service",
			.amz_date = r.date,
			.normalize_path = true,
		};
		s3_sigv4_init(&sig);
		ret = s3_sigv4_sign(&suite_creds, &s, &sig);
		CHECK(ret == 0, "%s: signs (%d)", name, ret);
		CHECK(!strcmp(s3_buf_str(&sig.creq), creq), "%s: canonical request", name);
		if (strcmp(s3_buf_str(&sig.creq), creq))
			printf("# got:\n%s\n# want:\n%s\n", s3_buf_str(&sig.creq), creq);
		CHECK(!strcmp(s3_buf_str(&sig.sts), sts), "%s: string to sign", name);
		CHECK(!strcmp(s3_buf_str(&sig.authz), authz), "%s: Authorization", name);
		s3_sigv4_release(&sig);
		vreq_release(&r);
		free(creq);
		free(sts);
		free(authz);
	}
	if (n > 0)
		free(ents);
}

/* ------------------------------------------------------ S3 documentation */

static struct s3_sign s3_doc(const char *method, const char *path,
			     const struct s3_kv *h, size_t nh, const char *payload)
{
	return (struct s3_sign){
		.method = method,
		.path = path,
		.headers = h,
		.nheaders = nh,
		.payload_hash = payload,
		.region = "us-east-1",
		.service = "s3",
		.amz_date = "20130524T000000Z",
	};
}

static void test_s3_examples(void)
{
	const struct s3_kv get_h[] = {
		{ "Host", "examplebucket.s3.amazonaws.com" },
		{ "Range", "bytes=0-9" },
		{ "x-amz-content-sha256", S3_EMPTY_SHA256 },
		{ "x-amz-date", "20130524T000000Z" },
	};
	const char *put_hash = "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072";
	const struct s3_kv put_h[] = {
		{ "Host", "examplebucket.s3.amazonaws.com" },
		{ "Date", "Fri, 24 May 2013 00:00:00 GMT" },
		{ "x-amz-date", "20130524T000000Z" },
		{ "x-amz-storage-class", "REDUCED_REDUNDANCY" },
		{ "x-amz-content-sha256", put_hash },
	};
	const struct s3_kv list_h[] = {
		{ "Host", "examplebucket.s3.amazonaws.com" },
		{ "x-amz-content-sha256", S3_EMPTY_SHA256 },
		{ "x-amz-date", "20130524T000000Z" },
	};
	const struct s3_kv lifecycle_q[] = { { "lifecycle", NULL } };
	const struct s3_kv list_q[] = { { "prefix", "J" }, { "max-keys", "2" } };
	const struct s3_kv presign_h[] = { { "Host", "examplebucket.s3.amazonaws.com" } };
	struct s3_sigv4 sig;
	struct s3_sign s;
	struct s3_buf url;
	char hash[65];

	s3_sigv4_init(&sig);
	s = s3_doc("GET", "/test.txt", get_h, 4, S3_EMPTY_SHA256);
	CHECK(s3_sigv4_sign(&s3_doc_creds, &s, &sig) == 0, "S3 GET Object: signs");
	CHECK(!strcmp(s3_buf_str(&sig.creq),
		      "GET\n/test.txt\n\nhost:examplebucket.s3.amazonaws.com\n"
		      "range:bytes=0-9\nx-amz-content-sha256:" S3_EMPTY_SHA256 "\n"
		      "x-amz-date:20130524T000000Z\n\n"
		      "host;range;x-amz-content-sha256;x-amz-date\n" S3_EMPTY_SHA256),
	      "S3 GET Object (Range): canonical request");
	CHECK(!strcmp(s3_buf_str(&sig.sts),
		      "AWS4-HMAC-SHA256\n20130524T000000Z\n20130524/us-east-1/s3/aws4_request\n"
		      "7344ae5b7ee6c3e7e6b0fe0640412a37625d1fbfff95c48bbb2dc43964946972"),
	      "S3 GET Object: string to sign");
	CHECK(!strcmp(s3_buf_str(&sig.authz),
		      "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, "
		      "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, "
		      "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41"),
	      "S3 GET Object: Authorization");

	s3_sha256_hex("Welcome to Amazon S3.", 21, hash);
	CHECK(!strcmp(hash, put_hash), "S3 PUT Object: payload hash");
	s = s3_doc("PUT", "/test$file.text", put_h, 5, put_hash);
	CHECK(s3_sigv4_sign(&s3_doc_creds, &s, &sig) == 0, "S3 PUT Object: signs");
	CHECK(strstr(s3_buf_str(&sig.creq), "PUT\n/test%24file.text\n\n") ==
		      s3_buf_str(&sig.creq),
	      "S3 PUT Object: '$' in the key is %%24");
	CHECK(!strcmp(sig.signature,
		      "98ad721746da40c64f1a55b78f14c238d841ea1380cd77a1b5971af0ece108bd"),
	      "S3 PUT Object (x-amz-content-sha256, storage class): signature %s",
	      sig.signature);

	s = s3_doc("GET", "/", list_h, 3, S3_EMPTY_SHA256);
	s.query = lifecycle_q;
	s.nquery = 1;
	CHECK(s3_sigv4_sign(&s3_doc_creds, &s, &sig) == 0 &&
		      strstr(s3_buf_str(&sig.creq), "GET\n/\nlifecycle=\n") &&
		      !strcmp(sig.signature,
			      "fea454ca298b7da1c68078a5d1bdbfbbe0d65c699e0f91ac7a200a0136783543"),
	      "S3 GET Bucket Lifecycle (?lifecycle): 'lifecycle=' and signature");
	s.query = list_q;
	s.nquery = 2;
	CHECK(s3_sigv4_sign(&s3_doc_creds, &s, &sig) == 0 &&
		      strstr(s3_buf_str(&sig.creq), "GET\n/\nmax-keys=2&prefix=J\n") &&
		      !strcmp(sig.signature,
			      "34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7"),
	      "S3 GET Bucket (List Objects): sorted query and signature");

	s3_buf_init(&url, 0);
	s = s3_doc("GET", "/test.txt", presign_h, 1, S3_UNSIGNED_PAYLOAD);
	CHECK(s3_sigv4_presign(&s3_doc_creds, &s, 86400, &sig, &url) == 0,
	      "S3 presigned GET: signs");
	CHECK(!strcmp(s3_buf_str(&sig.sts),
		      "AWS4-HMAC-SHA256\n20130524T000000Z\n20130524/us-east-1/s3/aws4_request\n"
		      "3bfa292879f6447bbcda7001decf97f4a54dc650c8942174ae0a9121cf58ad04"),
	      "S3 presigned GET: string to sign");
	CHECK(!strcmp(s3_buf_str(&url),
		      "X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20130524%2Fus-east-1%2Fs3%2Faws4_request"
		      "&X-Amz-Date=20130524T000000Z&X-Amz-Expires=86400&X-Amz-SignedHeaders=host"
		      "&X-Amz-Signature=aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d404"),
	      "S3 presigned GET: the published URL query");
	s3_buf_reset(&url);
	CHECK(s3_sigv4_presign(&s3_doc_creds, &s, 0, &sig, &url) == -EINVAL &&
		      s3_sigv4_presign(&s3_doc_creds, &s, 604801, &sig, &url) == -EINVAL,
	      "presign: expiry outside 1 s..7 days refused");
	s3_buf_release(&url);
	s3_sigv4_release(&sig);
}

/* ----------------------------------------------------- S3 encoding rules */

static int canon_path(const char *path, bool normalize, char *out, size_t n)
{
	struct s3_buf b;
	int ret;

	s3_buf_init(&b, 0);
	ret = s3_sigv4_path(&b, path, normalize);
	snprintf(out, n, "%s", s3_buf_str(&b));
	s3_buf_release(&b);
	return ret;
}

static void test_encoding(void)
{
	char out[256];
	struct s3_buf b;
	const struct s3_kv q[] = { { "prefix", "a b+c/é" }, { "list-type", "2" },
				   { "continuation-token", "x=y&z" } };

	CHECK(canon_path("//example//", false, out, sizeof(out)) == 0 &&
		      !strcmp(out, "//example//"),
	      "S3: runs of '/' are part of the key, not collapsed (%s)", out);
	CHECK(canon_path("/b/a/../c/./d", false, out, sizeof(out)) == 0 &&
		      !strcmp(out, "/b/a/../c/./d"),
	      "S3: dot segments are kept (%s)", out);
	CHECK(canon_path("/b/sp ace+plus=eq%pct~", false, out, sizeof(out)) == 0 &&
		      !strcmp(out, "/b/sp%20ace%2Bplus%3Deq%25pct~"),
	      "S3: space, '+', '=', '%%' encoded once (%s)", out);
	CHECK(canon_path("/b/\xe1\x88\xb4\xc3\xa9", false, out, sizeof(out)) == 0 &&
		      !strcmp(out, "/b/%E1%88%B4%C3%A9"),
	      "S3: UTF-8 bytes as upper-case %%XX (%s)", out);
	CHECK(canon_path("/b/%41", false, out, sizeof(out)) == 0 &&
		      !strcmp(out, "/b/%2541"),
	      "S3: a literal '%%41' in a key is not decoded (%s)", out);
	CHECK(canon_path("nosl", false, out, sizeof(out)) == -EINVAL,
	      "a path without a leading '/' is refused");
	CHECK(canon_path("/a/../../..", true, out, sizeof(out)) == 0 && !strcmp(out, "/"),
	      "normalizing cannot climb above the root (%s)", out);

	s3_buf_init(&b, 0);
	CHECK(s3_sigv4_query(&b, q, 3) == 0 &&
		      !strcmp(s3_buf_str(&b),
			      "continuation-token=x%3Dy%26z&list-type=2&prefix=a%20b%2Bc%2F%C3%A9"),
	      "query: sorted, '/', '+', '=', '&' and UTF-8 encoded (%s)", s3_buf_str(&b));
	s3_buf_reset(&b);
	CHECK(s3_uri_decode(&b, "a%2", 3) == -EINVAL, "decode: truncated escape refused");
	s3_buf_reset(&b);
	CHECK(s3_uri_decode(&b, "a%zz", 4) == -EINVAL, "decode: non-hex escape refused");
	s3_buf_reset(&b);
	CHECK(s3_uri_decode(&b, "a%2Fb+c", 7) == 0 && !strcmp(s3_buf_str(&b), "a/b+c"),
	      "decode: %%2F decoded, '+' kept");
	s3_buf_release(&b);

	s3_buf_init(&b, 8);
	CHECK(s3_buf_adds(&b, "12345678") == 0 && s3_buf_addc(&b, '9') == -E2BIG &&
		      s3_buf_adds(&b, "") == -E2BIG && b.len == 8,
	      "buffers stop at their limit, and the error sticks");
	s3_buf_release(&b);
}

static void test_hostile(void)
{
	struct s3_kv h[] = { { "Host", "h" }, { "x-amz-date", "20130524T000000Z" } };
	struct s3_sigv4 sig;
	struct s3_sign s = s3_doc("GET", "/k", h, 2, S3_EMPTY_SHA256);
	struct s3_creds bad = s3_doc_creds;

	s3_sigv4_init(&sig);
	h[0].value = "a\r\nInjected: yes";
	CHECK(s3_sigv4_sign(&s3_doc_creds, &s, &sig) == -EINVAL,
	      "CR/LF in a header value refused");
	h[0].value = "h";
	h[0].name = "Bad Name";
	CHECK(s3_sigv4_sign(&s3_doc_creds, &s, &sig) == -EINVAL,
	      "a header name that is not a token refused");
	h[0].name = "Host";
	s.amz_date = "2013-05-24";
	CHECK(s3_sigv4_sign(&s3_doc_creds, &s, &sig) == -EINVAL, "malformed date refused");
	s.amz_date = "20130524T000000Z";
	s.region = "us/east";
	CHECK(s3_sigv4_sign(&s3_doc_creds, &s, &sig) == -EINVAL,
	      "a region with '/' refused (it would change the scope)");
	s.region = "us-east-1";
	bad.access_key = "AK/ID";
	CHECK(s3_sigv4_sign(&bad, &s, &sig) == -EINVAL, "an access key with '/' refused");
	s.nheaders = 0;
	CHECK(s3_sigv4_sign(&s3_doc_creds, &s, &sig) == -EINVAL, "no header refused");
	s.nheaders = 2;
	CHECK(s3_sigv4_sign(&s3_doc_creds, &s, &sig) == 0, "and the fixed request signs");
	bad = s3_doc_creds;
	bad.secret_key = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEz";
	{
		char good[65];

		strcpy(good, sig.signature);
		CHECK(s3_sigv4_sign(&bad, &s, &sig) == 0 && strcmp(good, sig.signature),
		      "another secret, another signature");
	}
	s3_sigv4_release(&sig);
}

int main(void)
{
	test_suite();
	test_s3_examples();
	test_encoding();
	test_hostile();
	return TAP_DONE();
}
