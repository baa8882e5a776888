#include "s3/http.h"

#include "core/err.h"

#include <curl/curl.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

_Static_assert(S3_HTTP_ERRLEN >= CURL_ERROR_SIZE, "curl error buffer");

struct s3_http {
	CURL *curl;
	struct s3_http_opts o;
};

/* Per-exchange state the callbacks share. */
struct xfer {
	const struct s3_http_req *req;
	struct s3_http_resp *resp;
	uint64_t sent; /* body bytes handed to libcurl */
	int err;       /* first callback error */
	const atomic_int *stop;
	CURL *curl;
};

#ifndef RDX_VERSION
#define RDX_VERSION "0.0.0"
#endif

static pthread_once_t global_once = PTHREAD_ONCE_INIT;
static CURLcode global_ret;

static void global_init(void)
{
	global_ret = curl_global_init(CURL_GLOBAL_DEFAULT);
}

int s3_http_new(struct s3_http **out, const struct s3_http_opts *o)
{
	struct s3_http *h;

	pthread_once(&global_once, global_init);
	if (global_ret != CURLE_OK)
		return -ENOMEM;
	h = calloc(1, sizeof(*h));
	if (!h)
		return -ENOMEM;
	h->o = *o;
	h->curl = curl_easy_init();
	if (!h->curl) {
		free(h);
		return -ENOMEM;
	}
	*out = h;
	return 0;
}

void s3_http_free(struct s3_http *h)
{
	if (!h)
		return;
	curl_easy_cleanup(h->curl);
	free(h);
}

void s3_http_resp_init(struct s3_http_resp *r, size_t max)
{
	memset(r, 0, sizeof(*r));
	s3_buf_init(&r->body, max);
}

void s3_http_resp_release(struct s3_http_resp *r)
{
	s3_buf_release(&r->body);
}

static void reset_resp(struct s3_http_resp *r)
{
	struct s3_buf b = r->body;

	s3_buf_reset(&b);
	memset(r, 0, sizeof(*r));
	r->body = b;
}

/* Copies a header's value (trimmed) if line is "name: value". */
static void header_value(const char *line, size_t n, const char *name,
			 char *out, size_t outlen)
{
	size_t nl = strlen(name), i = nl + 1, e = n;

	if (n <= nl || line[nl] != ':' || strncasecmp(line, name, nl))
		return;
	while (i < n && (line[i] == ' ' || line[i] == '\t'))
		i++;
	while (e > i && (line[e - 1] == '\r' || line[e - 1] == '\n' ||
			 line[e - 1] == ' '))
		e--;
	if (e - i >= outlen)
		e = i + outlen - 1;
	memcpy(out, line + i, e - i);
	out[e - i] = '\0';
}

int s3_http_content_range(const char *s, uint64_t *a, uint64_t *b, uint64_t *t)
{
	uint64_t *v[3] = { a, b, t };
	const char sep[3] = { '-', '/', '\0' };
	int i;

	if (strncmp(s, "bytes ", 6))
		return -RDX_EPROTO;
	s += 6;
	for (i = 0; i < 3; i++) {
		uint64_t x = 0;
		int digits = 0;

		for (; *s >= '0' && *s <= '9'; s++, digits++) {
			if (x > (UINT64_MAX - 9) / 10)
				return -RDX_EPROTO;
			x = x * 10 + (uint64_t)(*s - '0');
		}
		if (!digits || *s != sep[i])
			return -RDX_EPROTO;
		if (sep[i])
			s++;
		*v[i] = x;
	}
	return *b < *a || *b >= *t ? -RDX_EPROTO : 0;
}

/* The headers a copy carries over (see s3_http_resp.carry). */
static const char *const carried[] = { "Content-Type", "Cache-Control",
	"Content-Disposition", "Content-Encoding", "Content-Language",
	"Expires", "x-amz-meta-" };

static void keep_carried(struct s3_http_resp *r, const char *line, size_t n)
{
	const char *colon = memchr(line, ':', n);
	size_t i, nl, vs, ve;
	bool want = false;

	if (!colon)
		return;
	nl = (size_t)(colon - line);
	for (i = 0; i < sizeof(carried) / sizeof(carried[0]) && !want; i++) {
		size_t cl = strlen(carried[i]);

		want = carried[i][cl - 1] == '-' ? nl > cl && !strncasecmp(line, carried[i], cl)
						 : nl == cl && !strncasecmp(line, carried[i], cl);
	}
	if (!want)
		return;
	for (vs = nl + 1; vs < n && (line[vs] == ' ' || line[vs] == '\t'); vs++)
		;
	for (ve = n; ve > vs && (line[ve - 1] == '\r' || line[ve - 1] == '\n' ||
				  line[ve - 1] == ' '); ve--)
		;
	for (i = 0; i < ve; i++) /* nothing that could end a header early */
		if ((unsigned char)line[i] < 0x20 && line[i] != '\t') {
			r->carry_over = true;
			return;
		}
	if (r->carry_len + nl + 2 + (ve - vs) + 2 > sizeof(r->carry)) {
		r->carry_over = true;
		return;
	}
	r->carry_len += (size_t)snprintf(r->carry + r->carry_len,
					 sizeof(r->carry) - r->carry_len, "%.*s: %.*s\n",
					 (int)nl, line, (int)(ve - vs), line + vs);
}

static size_t on_header(char *p, size_t size, size_t n, void *ctx)
{
	struct xfer *x = ctx;
	struct s3_http_resp *r = x->resp;
	size_t len = size * n;
	char cl[32] = "";

	/* A new status line (after a 100 Continue, say) starts over. */
	if (len > 5 && !strncmp(p, "HTTP/", 5)) {
		r->etag[0] = r->last_modified[0] = r->content_type[0] = '\0';
		r->request_id[0] = r->content_range[0] = r->sse[0] = '\0';
		r->meta_mtime[0] = r->mp_parts[0] = '\0';
		r->rdma_reply[0] = r->rdma_moved[0] = '\0';
		r->carry[0] = '\0';
		r->carry_len = 0;
		r->carry_over = false;
		r->sse_c = false;
		r->has_length = false;
		r->body_max = UINT64_MAX;
		return len;
	}
	if ((len == 2 && !memcmp(p, "\r\n", 2)) || (len == 1 && *p == '\n')) {
		uint64_t a, b, t;

		/* The headers are in.  An impossible range ("bytes 0-0/0")
		 * would have us wait for bytes that never come; a 416's
		 * "bytes * /SIZE" is no range at all.  No more body is taken
		 * than Content-Length and Content-Range allow. */
		r->body_max = r->has_length ? r->content_length : UINT64_MAX;
		if (r->content_range[0] && strncmp(r->content_range, "bytes */", 8)) {
			if (s3_http_content_range(r->content_range, &a, &b, &t)) {
				x->err = -RDX_EPROTO;
				return 0;
			}
			if (b - a + 1 < r->body_max)
				r->body_max = b - a + 1;
		}
		return len;
	}
	header_value(p, len, "ETag", r->etag, sizeof(r->etag));
	header_value(p, len, "Last-Modified", r->last_modified, sizeof(r->last_modified));
	header_value(p, len, "Content-Type", r->content_type, sizeof(r->content_type));
	header_value(p, len, "Content-Range", r->content_range, sizeof(r->content_range));
	header_value(p, len, "x-amz-server-side-encryption", r->sse, sizeof(r->sse));
	header_value(p, len, "x-amz-meta-mtime", r->meta_mtime, sizeof(r->meta_mtime));
	header_value(p, len, "x-amz-mp-parts-count", r->mp_parts, sizeof(r->mp_parts));
	header_value(p, len, "x-amz-rdma-reply", r->rdma_reply, sizeof(r->rdma_reply));
	header_value(p, len, "x-amz-rdma-bytes-transferred", r->rdma_moved, sizeof(r->rdma_moved));
	keep_carried(r, p, len);
	if (len > 48 && !strncasecmp(p, "x-amz-server-side-encryption-customer-algorithm:", 48))
		r->sse_c = true;
	header_value(p, len, "x-amz-request-id", r->request_id, sizeof(r->request_id));
	header_value(p, len, "Content-Length", cl, sizeof(cl));
	if (cl[0]) {
		char *end;
		unsigned long long v;

		errno = 0;
		v = strtoull(cl, &end, 10);
		if (!errno && !*end && cl[0] >= '0' && cl[0] <= '9') {
			r->content_length = v;
			r->has_length = true;
		}
	}
	return len;
}

static size_t on_body(char *p, size_t size, size_t n, void *ctx)
{
	struct xfer *x = ctx;
	size_t len = size * n;
	int ret;

	/* The status is known once the headers are in, before any body. */
	curl_easy_getinfo(x->curl, CURLINFO_RESPONSE_CODE, &x->resp->status);
	x->resp->bytes += len;
	if (x->resp->status >= 200 && x->resp->status < 300 && x->resp->bytes > x->resp->body_max) {
		x->err = -RDX_EINTEGRITY; /* more than its headers said */
		return CURL_WRITEFUNC_ERROR;
	}
	if (x->resp->status >= 200 && x->resp->status < 300 && x->req->sink.write) {
		ret = x->req->sink.write(x->req->sink.ctx, p, len);
	} else if (x->resp->status >= 200 && x->resp->status < 300) {
		ret = s3_buf_add(&x->resp->body, p, len);
	} else {
		/* An error document: keep its start, drop the rest. */
		size_t room = x->resp->body.len < S3_HTTP_ERR_MAX ?
				      S3_HTTP_ERR_MAX - x->resp->body.len : 0;

		ret = s3_buf_add(&x->resp->body, p, len < room ? len : room);
	}
	if (ret) {
		x->err = ret;
		return CURL_WRITEFUNC_ERROR;
	}
	return len;
}

static size_t on_read(char *p, size_t size, size_t n, void *ctx)
{
	struct xfer *x = ctx;
	const struct s3_http_req *r = x->req;
	uint64_t left = r->body_len - x->sent;
	size_t want = size * n;
	ssize_t got;

	if (want > left)
		want = (size_t)left;
	if (!want)
		return 0;
	if (r->body) {
		memcpy(p, (const char *)r->body + x->sent, want);
		got = (ssize_t)want;
	} else {
		do
			got = pread(r->body_fd, p, want, (off_t)(r->body_off + x->sent));
		while (got < 0 && errno == EINTR);
		if (got <= 0) {
			/* The file shrank under us or cannot be read. */
			x->err = got < 0 ? -errno : -EIO;
			return CURL_READFUNC_ABORT;
		}
	}
	x->sent += (uint64_t)got;
	return (size_t)got;
}

static int on_seek(void *ctx, curl_off_t off, int origin)
{
	struct xfer *x = ctx;

	if (origin != SEEK_SET || off < 0 || (uint64_t)off > x->req->body_len)
		return CURL_SEEKFUNC_CANTSEEK;
	x->sent = (uint64_t)off;
	return CURL_SEEKFUNC_OK;
}

static int on_progress(void *ctx, curl_off_t a, curl_off_t b, curl_off_t c,
		       curl_off_t d)
{
	struct xfer *x = ctx;

	(void)a, (void)b, (void)c, (void)d;
	return x->stop && atomic_load(x->stop) ? 1 : 0;
}

int s3_http_do(struct s3_http *h, const struct s3_http_req *r,
	       struct s3_http_resp *resp)
{
	struct xfer x = { .req = r, .resp = resp, .stop = h->o.stop, .curl = h->curl };
	struct curl_slist *hl = NULL, *tmp;
	CURL *c = h->curl;
	CURLcode rc;
	size_t i;
	int ret = 0;

	reset_resp(resp);
	for (i = 0; i < r->nheaders; i++) {
		char line[8192];
		/* "Name;" is how libcurl sends a header with no value ("Name:"
		 * alone removes it), which is signed all the same. */
		int n = r->headers[i].value[0]
				? snprintf(line, sizeof(line), "%s: %s", r->headers[i].name,
					   r->headers[i].value)
				: snprintf(line, sizeof(line), "%s;", r->headers[i].name);

		if (n < 0 || (size_t)n >= sizeof(line) || strpbrk(line, "\r\n")) {
			curl_slist_free_all(hl);
			return -EINVAL;
		}
		tmp = curl_slist_append(hl, line);
		if (!tmp) {
			curl_slist_free_all(hl);
			return -ENOMEM;
		}
		hl = tmp;
	}
	/* libcurl adds these otherwise; S3 needs none of them. */
	tmp = curl_slist_append(hl, "Expect:");
	if (tmp)
		hl = tmp;
	tmp = curl_slist_append(hl, "Accept:");
	if (tmp)
		hl = tmp;

	curl_easy_reset(c); /* options only: the connection cache stays */
	curl_easy_setopt(c, CURLOPT_URL, r->url);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, hl);
	curl_easy_setopt(c, CURLOPT_ERRORBUFFER, resp->error);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
	/* "a/../b" and "a/./b" are S3 keys: send the path as signed. */
	curl_easy_setopt(c, CURLOPT_PATH_AS_IS, 1L);
	curl_easy_setopt(c, CURLOPT_USERAGENT, "rds3/" RDX_VERSION);
	curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(c, CURLOPT_HEADERDATA, &x);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &x);
	curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
	curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_progress);
	curl_easy_setopt(c, CURLOPT_XFERINFODATA, &x);
	if (h->o.connect_timeout_ms)
		curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, h->o.connect_timeout_ms);
	if (h->o.stall_secs) {
		curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
		curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME,
				 r->stall_secs > h->o.stall_secs ? r->stall_secs : h->o.stall_secs);
	}
	if (h->o.insecure) {
		curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 0L);
		curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 0L);
	}
	if (h->o.verbose >= 3)
		curl_easy_setopt(c, CURLOPT_VERBOSE, 1L);
	if (!strcmp(r->method, "HEAD")) {
		curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
	} else if (!strcmp(r->method, "PUT") || !strcmp(r->method, "POST")) {
		curl_easy_setopt(c, CURLOPT_UPLOAD, 1L);
		curl_easy_setopt(c, CURLOPT_INFILESIZE_LARGE, (curl_off_t)r->body_len);
		curl_easy_setopt(c, CURLOPT_READFUNCTION, on_read);
		curl_easy_setopt(c, CURLOPT_READDATA, &x);
		curl_easy_setopt(c, CURLOPT_SEEKFUNCTION, on_seek);
		curl_easy_setopt(c, CURLOPT_SEEKDATA, &x);
		if (strcmp(r->method, "PUT"))
			curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, r->method);
	} else if (strcmp(r->method, "GET")) {
		curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, r->method);
	}
	resp->error[0] = '\0';
	rc = curl_easy_perform(c);
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &resp->status);
	curl_slist_free_all(hl);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, NULL);
	curl_easy_setopt(c, CURLOPT_ERRORBUFFER, NULL);
	if (x.err == -RDX_EPROTO) /* after libcurl's own word on it */
		snprintf(resp->error, sizeof(resp->error), "impossible Content-Range '%s'",
			 resp->content_range);
	if (x.err)
		return x.err;
	switch (rc) {
	case CURLE_OK:
		if (h->o.moved && resp->status >= 200 && resp->status < 300)
			atomic_fetch_add(h->o.moved, (r->body || r->body_fd >= 0 ? r->body_len : 0) +
							     (r->sink.write ? resp->bytes : 0));
		return 0;
	case CURLE_ABORTED_BY_CALLBACK:
		ret = -RDX_EINTR;
		break;
	case CURLE_OPERATION_TIMEDOUT:
		ret = -RDX_ETIMEOUT;
		break;
	default:
		ret = -RDX_ECONNECT;
		break;
	}
	if (!resp->error[0])
		snprintf(resp->error, sizeof(resp->error), "%s", curl_easy_strerror(rc));
	return ret;
}
