#include "s3/s3.h"

#include "core/err.h"
#include "core/units.h"
#include "core/log.h"
#include "s3/http.h"
#include "s3/multipart.h"
#include "s3/s3_int.h"
#include "s3/sigv4.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#define LIST_BODY_MAX ((size_t)32 << 20)

int s3_client_new(struct s3_client **out, const struct s3_client_opts *o)
{
	struct s3_client *c = calloc(1, sizeof(*c));
	struct s3_http_opts ho = {
		.insecure = o->insecure,
		.connect_timeout_ms = o->connect_timeout_ms,
		.stall_secs = o->stall_secs,
		.verbose = o->verbose,
		.stop = o->stop,
		.moved = o->moved,
	};
	int ret;

	if (!c)
		return -ENOMEM;
	c->o = *o;
	c->cfg = o->cfg;
	if (!c->o.backoff_ms)
		c->o.backoff_ms = 100;
	if (!c->o.backoff_max_ms)
		c->o.backoff_max_ms = 5000;
	ret = s3_http_new(&c->http, &ho);
	if (ret) {
		free(c);
		return ret;
	}
	s3_http_resp_init(&c->resp, LIST_BODY_MAX);
	s3_sigv4_init(&c->sig);
	*out = c;
	return 0;
}

void s3_client_free(struct s3_client *c)
{
	if (!c)
		return;
	s3_rdma_close(c->rdma);
	s3_http_free(c->http);
	s3_http_resp_release(&c->resp);
	s3_sigv4_release(&c->sig);
	free(c);
}

const struct s3_error *s3_last_error(const struct s3_client *c)
{
	return &c->err;
}

void s3_set_error(struct s3_client *c, const struct s3_error *e)
{
	c->err = *e;
}

int s3_bad_response(struct s3_client *c, int ret, const char *code,
		    const char *fmt, ...)
{
	va_list ap;

	c->err.status = c->resp.status;
	snprintf(c->err.code, sizeof(c->err.code), "%s", code);
	va_start(ap, fmt);
	vsnprintf(c->err.message, sizeof(c->err.message), fmt, ap);
	va_end(ap);
	return ret;
}

/* --------------------------------------------------------- addressing */

static bool virtual_host(const struct s3_client *c, const char *bucket)
{
	if (!bucket)
		return false;
	switch (c->cfg->addressing) {
	case S3_ADDR_PATH:
		return false;
	case S3_ADDR_VIRTUAL:
		return true;
	default:
		return s3_bucket_dns_ok(bucket);
	}
}

/* Builds the decoded path, the Host value and the URL of r. */
static int address(const struct s3_client *c, const struct s3_req *r,
		   struct s3_buf *path, struct s3_buf *host, struct s3_buf *url)
{
	const struct s3_config *cfg = c->cfg;
	bool vhost = virtual_host(c, r->bucket);
	int ret;

	s3_buf_adds(path, cfg->base_path);
	s3_buf_addc(path, '/');
	if (r->bucket && !vhost) {
		s3_buf_adds(path, r->bucket);
		if (r->key)
			s3_buf_addc(path, '/');
	}
	if (r->key)
		s3_buf_adds(path, r->key);
	if (vhost)
		s3_buf_printf(host, "%s.%s", r->bucket, cfg->host);
	else
		s3_buf_adds(host, cfg->host);
	if ((ret = s3_buf_err(path)) || (ret = s3_buf_err(host)))
		return ret;
	s3_buf_printf(url, "%s://%s", cfg->https ? "https" : "http", host->p);
	ret = s3_sigv4_path(url, path->p, false);
	if (ret)
		return ret;
	if (r->nquery) {
		s3_buf_addc(url, '?');
		ret = s3_sigv4_query(url, r->query, r->nquery);
	}
	return ret ? ret : s3_buf_err(url);
}

static void amz_now(char out[17])
{
	time_t t = time(NULL);
	struct tm tm;

	gmtime_r(&t, &tm);
	strftime(out, 17, "%Y%m%dT%H%M%SZ", &tm);
}

/* ------------------------------------------------------------ retries */

/* The body S3 received is not the one signed or described: corrupted
 * on the way, worth one more try (the bytes we hold are the ones hashed). */
static bool digest_code(const char *code)
{
	return !strcmp(code, "BadDigest") ||
	       !strcmp(code, "XAmzContentSHA256Mismatch");
}

static bool retryable_status(long status, const char *code)
{
	/* 501 Not Implemented will not be implemented by the next try. */
	return (status >= 500 && status != 501) || status == 429 ||
	       !strcmp(code, "SlowDown") || !strcmp(code, "RequestTimeout") ||
	       !strcmp(code, "Throttling");
}

static void backoff(const struct s3_client *c, unsigned attempt)
{
	uint64_t cap = c->o.backoff_ms, r = 0;
	struct timespec ts;

	while (attempt-- && cap < c->o.backoff_max_ms)
		cap *= 2;
	if (cap > c->o.backoff_max_ms)
		cap = c->o.backoff_max_ms;
	/* Full jitter: anywhere in [0, cap], so clients that failed together
	 * do not come back together. */
	if (getrandom(&r, sizeof(r), 0) != sizeof(r))
		r = (uint64_t)time(NULL);
	r %= cap + 1;
	ts.tv_sec = (time_t)(r / 1000);
	ts.tv_nsec = (long)(r % 1000) * 1000000L;
	while (nanosleep(&ts, &ts) && errno == EINTR)
		if (c->o.stop && atomic_load(c->o.stop))
			return;
}

/* S3's Code for a status that came without an error document. */
static const char *status_code_name(long status)
{
	switch (status) {
	case 301:
		return "PermanentRedirect";
	case 400:
		return "BadRequest";
	case 403:
		return "Forbidden";
	case 404:
		return "NotFound";
	case 405:
		return "MethodNotAllowed";
	case 409:
		return "Conflict";
	case 412:
		return "PreconditionFailed";
	case 429:
		return "TooManyRequests";
	case 500:
		return "InternalError";
	case 501:
		return "NotImplemented";
	case 503:
		return "ServiceUnavailable";
	default:
		return "UnexpectedStatus";
	}
}

void s3_fill_error(struct s3_client *c, int ret)
{
	struct s3_error *e = &c->err;
	const struct s3_http_resp *p = &c->resp;

	e->code[0] = e->message[0] = '\0';
	e->status = ret == 0 || ret == -RDX_EPROTO ? p->status : 0;
	if (ret == -RDX_EPROTO && p->error[0]) {
		snprintf(e->code, sizeof(e->code), "MalformedResponse");
		snprintf(e->message, sizeof(e->message), "%s", p->error);
		return;
	}
	if (ret && ret != -RDX_EPROTO) {
		snprintf(e->message, sizeof(e->message), "%s",
			 p->error[0] ? p->error : rdx_strerror(ret));
		return;
	}
	if (p->body.len &&
	    !s3_xml_error(p->body.p, p->body.len, e->code, sizeof(e->code),
			  e->message, sizeof(e->message)))
		return;
	/* HEAD has no body; other servers send HTML: name the status. */
	snprintf(e->code, sizeof(e->code), "%s", status_code_name(p->status));
	snprintf(e->message, sizeof(e->message), "HTTP status %ld", p->status);
}

/* Tracks whether a sink received bytes, to know if a retry is possible. */
struct sink_guard {
	const struct s3_sink *sink;
	uint64_t bytes;
};

static int guarded_write(void *ctx, const void *p, size_t n)
{
	struct sink_guard *g = ctx;

	g->bytes += n;
	return g->sink->write(g->sink->ctx, p, n);
}

int s3_do_request(struct s3_client *c, const struct s3_req *r)
{
	const struct s3_config *cfg = c->cfg;
	struct s3_buf path, host, url;
	/* Ours (at most 5) and the request's: a copy carries up to 128. */
	struct s3_kv hbuf[16], *h = hbuf;
	struct s3_creds creds = {
		.access_key = cfg->access_key,
		.secret_key = cfg->secret_key,
		.session_token = cfg->session_token,
	};
	struct sink_guard guard = { .sink = r->sink };
	char date[17];
	unsigned attempt;
	bool digest_retried = false;
	size_t nh, i;
	int ret;

	memset(&c->err, 0, sizeof(c->err));
	if (r->nheaders + 5 > sizeof(hbuf) / sizeof(hbuf[0]) &&
	    !(h = malloc((r->nheaders + 5) * sizeof(*h))))
		return -ENOMEM;
	s3_buf_init(&path, 0);
	s3_buf_init(&host, 0);
	s3_buf_init(&url, 0);
	ret = address(c, r, &path, &host, &url);
	if (ret)
		goto out;
	for (attempt = 0;; attempt++) {
		struct s3_http_req hr = {
			.method = r->method,
			.url = url.p,
			.headers = h,
			.body = r->body,
			.body_fd = r->body_fd,
			.body_off = r->body_off,
			.body_len = r->body_len,
			.stall_secs = r->stall_secs,
		};
		bool again;

		if (r->sink) {
			guard.bytes = 0;
			hr.sink.write = guarded_write;
			hr.sink.ctx = &guard;
		}
		amz_now(date);
		nh = 0;
		h[nh++] = (struct s3_kv){ "Host", host.p };
		h[nh++] = (struct s3_kv){ "x-amz-date", date };
		h[nh++] = (struct s3_kv){ "x-amz-content-sha256",
					  r->payload_hash ? r->payload_hash : S3_EMPTY_SHA256 };
		if (cfg->session_token && !cfg->no_sign)
			h[nh++] = (struct s3_kv){ "x-amz-security-token", cfg->session_token };
		for (i = 0; i < r->nheaders; i++)
			h[nh++] = r->headers[i];
		if (!cfg->no_sign) {
			struct s3_sign s = {
				.method = r->method,
				.path = path.p,
				.query = r->query,
				.nquery = r->nquery,
				.headers = h,
				.nheaders = nh,
				.payload_hash = h[2].value,
				.region = cfg->region,
				.service = "s3",
				.amz_date = date,
			};

			ret = s3_sigv4_sign(&creds, &s, &c->sig);
			if (ret)
				goto out;
			h[nh++] = (struct s3_kv){ "Authorization", c->sig.authz.p };
		}
		hr.nheaders = nh;
		ret = s3_http_do(c->http, &hr, &c->resp);
		c->err.attempts = attempt + 1;
		rdx_info(2, "%s %s: %ld, %llu bytes in, %llu out", r->method, url.p,
			 c->resp.status, (unsigned long long)c->resp.bytes,
			 (unsigned long long)r->body_len);
		if (ret == 0 && c->resp.status >= 200 && c->resp.status < 300)
			break;
		if (ret == -RDX_ECONNECT || ret == -RDX_ETIMEOUT) {
			again = true;
		} else if (ret == 0) {
			s3_fill_error(c, 0);
			again = retryable_status(c->resp.status, c->err.code);
			if (!again && digest_code(c->err.code) && !digest_retried)
				again = digest_retried = true;
		} else {
			break; /* the sink, memory, a stop: final */
		}
		/* Sent with a token: a decline goes over HTTP at once (rdma_req.c). */
		if (ret == 0 && r->rdma &&
		    (s3_rdma_decline_code(c->err.code) || digest_code(c->err.code)))
			again = false;
		if (r->sink && guard.bytes && !r->sink->rewind)
			again = false;
		if (!again || attempt >= c->o.retries ||
		    (c->o.stop && atomic_load(c->o.stop))) {
			if (ret == 0 && digest_code(c->err.code))
				ret = -RDX_EINTEGRITY;
			else if (ret == 0)
				ret = c->resp.status == 403 ? -RDX_EAUTH : -RDX_EREMOTE;
			break;
		}
		rdx_info(1, "%s %s: %s%s%s, retrying (attempt %u of %u)", r->op,
			 url.p, ret ? c->resp.error : c->err.code,
			 ret ? "" : ": ", ret ? "" : c->err.message, attempt + 2,
			 c->o.retries + 1);
		backoff(c, attempt);
		if (r->sink && guard.bytes) {
			ret = r->sink->rewind(r->sink->ctx);
			if (ret)
				goto out;
		}
	}
	if (ret && ret != -RDX_EAUTH && ret != -RDX_EREMOTE &&
	    !(ret == -RDX_EINTEGRITY && c->err.code[0]))
		s3_fill_error(c, ret);
	if (c->o.stop && atomic_load(c->o.stop) && ret)
		ret = -RDX_EINTR;
out:
	s3_buf_release(&path);
	s3_buf_release(&host);
	s3_buf_release(&url);
	if (h != hbuf)
		free(h);
	return ret;
}

static void take_info(const struct s3_client *c, struct s3_object_info *info)
{
	const struct s3_http_resp *p = &c->resp;

	if (!info)
		return;
	memset(info, 0, sizeof(*info));
	info->size = p->has_length ? p->content_length : p->bytes;
	snprintf(info->etag, sizeof(info->etag), "%s", p->etag);
	snprintf(info->last_modified, sizeof(info->last_modified), "%s", p->last_modified);
	snprintf(info->content_type, sizeof(info->content_type), "%s", p->content_type);
	info->encrypted = !strncmp(p->sse, "aws:kms", 7) || p->sse_c;
}

/* --------------------------------------------------------- operations */

/* A request with a body (PutObject, UploadPart): by RDMA when it can,
 * else, or when declined, over HTTP. */
static int send_body(struct s3_client *c, const struct s3_req *r)
{
	struct s3_req q = *r;
	char sha[S3_SHA256_HEX_LEN + 1];
	struct s3_rdma *rd;
	int ret = s3_rdma_conn(c, r->body_len, &rd);

	if (ret)
		return ret;
	if (rd && (ret = s3_rdma_put(c, rd, r)) != 1)
		return ret;
	/* Hashed for RDMA, which signs no payload, and declined: the
	 * SHA-256 the signature needs, now. */
	if (q.payload_hash && !q.payload_hash[0]) {
		if ((ret = s3_body_sha256(q.body, q.body_fd, q.body_off, q.body_len, c->o.stop, sha)))
			return ret;
		q.payload_hash = sha;
	}
	ret = s3_do_request(c, &q);
	if (!ret)
		s3_rdma_count(c, false, r->body_len);
	return ret;
}

/* One PutObject of r's body (a file range or a buffer): Content-MD5 and
 * the payload hash from sum, the returned ETag checked against it. */
static int put_body(struct s3_client *c, struct s3_req *r,
		    const struct s3_body_sum *sum, const struct s3_kv *extra, size_t nextra,
		    struct s3_object_info *info)
{
	char b64[32];
	struct s3_kv h[8] = { { "Content-MD5", b64 } };
	size_t i;
	int ret;

	if (nextra > sizeof(h) / sizeof(h[0]) - 1)
		return -EINVAL;
	for (i = 0; i < nextra; i++)
		h[1 + i] = extra[i];
	s3_md5_b64(sum->md5, b64);
	r->method = "PUT";
	r->op = "put";
	r->headers = h;
	r->nheaders = 1 + nextra;
	r->payload_hash = sum->sha256_hex;
	ret = send_body(c, r);
	if (!ret)
		ret = s3_check_put_etag(c, sum);
	if (!ret)
		take_info(c, info);
	if (!ret && info)
		info->size = r->body_len;
	return ret;
}

int s3_put_object(struct s3_client *c, const char *bucket, const char *key,
		  int fd, uint64_t off, uint64_t len,
		  const struct s3_body_sum *sum, struct s3_object_info *info)
{
	return s3_put_object_h(c, bucket, key, fd, off, len, sum, NULL, 0, info);
}

int s3_put_object_h(struct s3_client *c, const char *bucket, const char *key,
		    int fd, uint64_t off, uint64_t len, const struct s3_body_sum *sum,
		    const struct s3_kv *headers, size_t nheaders,
		    struct s3_object_info *info)
{
	struct s3_req r = {
		.bucket = bucket, .key = key,
		.body_fd = fd, .body_off = off, .body_len = len,
	};

	return put_body(c, &r, sum, headers, nheaders, info);
}

int s3_put_buffer(struct s3_client *c, const char *bucket, const char *key,
		  const void *p, uint64_t len, const struct s3_body_sum *sum,
		  struct s3_object_info *info)
{
	struct s3_req r = {
		.bucket = bucket, .key = key,
		.body = p, .body_fd = -1, .body_len = len,
	};

	return put_body(c, &r, sum, NULL, 0, info);
}

/* An ETag goes back into CompleteMultipartUpload's XML as it came: refuse
 * what would need escaping rather than escape what S3 never sends. */
static bool etag_ok(const char *e)
{
	if (!*e)
		return false;
	for (; *e; e++)
		if (*e < 0x20 || *e > 0x7e || *e == '<' || *e == '>' || *e == '&')
			return false;
	return true;
}

int s3_mpu_create(struct s3_client *c, const char *bucket, const char *key,
		  const struct s3_kv *headers, size_t nheaders, char *upload_id)
{
	struct s3_kv q[] = { { "uploads", "" } };
	struct s3_req r = {
		.method = "POST", .op = "put", .bucket = bucket, .key = key,
		.query = q, .nquery = 1, .body = "", .body_fd = -1,
		.headers = headers, .nheaders = nheaders,
	};
	int ret = s3_do_request(c, &r);

	if (ret)
		return ret;
	ret = s3_xml_field(c->resp.body.p, c->resp.body.len,
			   "InitiateMultipartUploadResult", "UploadId", upload_id,
			   S3_UPLOAD_ID_MAX);
	if (ret || !upload_id[0])
		return s3_bad_response(c, -RDX_EPROTO, "MalformedResponse",
				    "CreateMultipartUpload's answer has no UploadId");
	return 0;
}

int s3_mpu_part(struct s3_client *c, const char *bucket, const char *key,
		const char *upload_id, unsigned part, const void *p, uint64_t len,
		const struct s3_body_sum *sum, char *etag)
{
	char num[16], b64[32];
	struct s3_kv q[] = { { "partNumber", num }, { "uploadId", upload_id } };
	struct s3_kv h[] = { { "Content-MD5", b64 } };
	struct s3_req r = {
		.method = "PUT", .op = "put", .bucket = bucket, .key = key,
		.query = q, .nquery = 2, .headers = h, .nheaders = 1,
		.body = p, .body_fd = -1, .body_len = len,
		.payload_hash = sum->sha256_hex,
	};
	int ret;

	s3_md5_b64(sum->md5, b64);
	snprintf(num, sizeof(num), "%u", part);
	ret = send_body(c, &r);
	if (ret)
		return ret;
	if (!etag_ok(c->resp.etag))
		return s3_bad_response(c, -RDX_EPROTO, "MalformedResponse",
				    "part %u came back without a usable ETag", part);
	snprintf(etag, S3_ETAG_MAX, "%s", c->resp.etag);
	return 0;
}

int s3_mpu_complete(struct s3_client *c, const char *bucket, const char *key,
		    const char *upload_id, const char (*etags)[S3_ETAG_MAX],
		    unsigned n, char *etag, bool *md5_etag)
{
	struct s3_kv q[] = { { "uploadId", upload_id } };
	char hash[S3_SHA256_HEX_LEN + 1];
	struct s3_buf body;
	struct s3_req r = {
		.method = "POST", .op = "put", .bucket = bucket, .key = key,
		.query = q, .nquery = 1, .body_fd = -1, .payload_hash = hash,
	};
	unsigned i, attempt;
	int ret;

	s3_buf_init(&body, 0);
	s3_buf_adds(&body, "<CompleteMultipartUpload xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">");
	for (i = 0; i < n; i++)
		s3_buf_printf(&body, "<Part><PartNumber>%u</PartNumber><ETag>%s</ETag></Part>",
			      i + 1, etags[i]);
	s3_buf_adds(&body, "</CompleteMultipartUpload>");
	if ((ret = s3_buf_err(&body)))
		goto out;
	s3_sha256_hex(body.p, body.len, hash);
	r.body = body.p;
	r.body_len = body.len;
	for (attempt = 0;; attempt++) {
		ret = s3_do_request(c, &r);
		if (ret)
			goto out;
		if (!s3_xml_field(c->resp.body.p, c->resp.body.len,
				  "CompleteMultipartUploadResult", "ETag", etag, S3_ETAG_MAX))
			break;
		/* A 200 whose body is an Error: the assembly failed after
		 * the status went out.  Retried like a 5xx when it says so. */
		s3_fill_error(c, -RDX_EPROTO);
		if (c->resp.body.len &&
		    !s3_xml_error(c->resp.body.p, c->resp.body.len, c->err.code,
				  sizeof(c->err.code), c->err.message,
				  sizeof(c->err.message))) {
			ret = -RDX_EREMOTE;
			if (attempt < c->o.retries && retryable_status(500, c->err.code) &&
			    !(c->o.stop && atomic_load(c->o.stop))) {
				rdx_info(1, "complete s3://%s/%s: %s: %s (in a 200), retrying (attempt %u of %u)",
					 bucket, key, c->err.code, c->err.message, attempt + 2,
					 c->o.retries + 1);
				backoff(c, attempt);
				continue;
			}
		} else {
			ret = s3_bad_response(c, -RDX_EPROTO, "MalformedResponse",
					   "CompleteMultipartUpload's answer has no ETag");
		}
		goto out;
	}
	if (!etag[0])
		ret = s3_bad_response(c, -RDX_EPROTO, "MalformedResponse",
				   "CompleteMultipartUpload's answer has an empty ETag");
	*md5_etag = strncmp(c->resp.sse, "aws:kms", 7) && !c->resp.sse_c;
out:
	s3_buf_release(&body);
	return ret;
}

int s3_mpu_abort(struct s3_client *c, const char *bucket, const char *key,
		 const char *upload_id)
{
	struct s3_kv q[] = { { "uploadId", upload_id } };
	struct s3_req r = {
		.method = "DELETE", .op = "put", .bucket = bucket, .key = key,
		.query = q, .nquery = 1, .body_fd = -1,
	};

	return s3_do_request(c, &r);
}

int s3_get_range(struct s3_client *c, const char *bucket, const char *key,
		 const struct s3_sink *sink, struct s3_range *rg)
{
	char range[64];
	struct s3_kv h[2];
	struct s3_req r = {
		.method = "GET", .op = "get", .bucket = bucket, .key = key,
		.headers = h, .body_fd = -1, .sink = sink,
	};
	const struct s3_http_resp *p = &c->resp;
	uint64_t a, b, t, want_end, got, moved = 0;
	struct s3_rdma *rd;
	bool by_rdma;
	int ret;

	if (!rg->len || rg->start > UINT64_MAX - rg->len)
		return -EINVAL;
	snprintf(range, sizeof(range), "bytes=%" PRIu64 "-%" PRIu64, rg->start,
		 rg->start + rg->len - 1);
	h[r.nheaders++] = (struct s3_kv){ "Range", range };
	if (rg->if_match)
		h[r.nheaders++] = (struct s3_kv){ "If-Match", rg->if_match };
	rg->whole = false;
	rg->got = rg->total = 0;
	rg->etag[0] = '\0';
	ret = s3_rdma_conn(c, rg->len, &rd);
	if (!ret && rd)
		ret = s3_rdma_get(c, rd, &r, rg->len, &moved);
	else if (!ret)
		ret = 1;
	by_rdma = ret == 0;
	if (ret == 1 || ret == 2)
		ret = ret == 1 ? s3_do_request(c, &r) : 0;
	if (ret)
		return ret;
	got = by_rdma ? moved : p->bytes;
	rg->got = got;
	snprintf(rg->etag, sizeof(rg->etag), "%s", p->etag);
	rg->encrypted = !strncmp(p->sse, "aws:kms", 7) || p->sse_c;
	if (p->has_length && p->bytes != p->content_length)
		return s3_bad_response(c, -RDX_EINTEGRITY, "", "received %" PRIu64
				    " bytes of %" PRIu64, p->bytes, p->content_length);
	if (p->status == 200) {
		if (rg->start)
			return s3_bad_response(c, -RDX_EPROTO, "MalformedResponse",
					    "the server ignored Range: bytes=%" PRIu64 "-",
					    rg->start);
		rg->whole = true;
		rg->total = got;
	} else if (p->status == 206) {
		if (s3_http_content_range(p->content_range, &a, &b, &t))
			return s3_bad_response(c, -RDX_EPROTO, "MalformedResponse",
					    "a 206 with Content-Range '%s'", p->content_range);
		if (t > S3_OBJECT_MAX)
			return s3_bad_response(c, -RDX_EPROTO, "MalformedResponse",
					    "an object of %" PRIu64 " bytes (Content-Range '%s'): "
					    "S3's are at most 5 TiB", t, p->content_range);
		want_end = rg->start + rg->len < t ? rg->start + rg->len - 1 : t - 1;
		if (a != rg->start || b != want_end || got != b - a + 1)
			return s3_bad_response(c, -RDX_EINTEGRITY, "",
					    "asked for bytes %" PRIu64 "-%" PRIu64
					    ", got %" PRIu64 " bytes as '%s'",
					    rg->start, want_end, got, p->content_range);
		rg->total = t;
	} else {
		return s3_bad_response(c, -RDX_EPROTO, "MalformedResponse",
				    "a GET answered %ld", p->status);
	}
	if (rg->if_match && strcmp(rg->etag, rg->if_match))
		return s3_bad_response(c, -RDX_EREMOTE, "PreconditionFailed",
				    "the object changed during the download (ETag %s, was %s)",
				    rg->etag[0] ? rg->etag : "none", rg->if_match);
	/* Checked: the bytes in the registered buffer go where a body would. */
	if (by_rdma && got) {
		size_t cap;

		if ((ret = sink->write(sink->ctx, s3_rdma_buf(rd, &cap), (size_t)got)))
			return ret;
	}
	s3_rdma_count(c, by_rdma, got);
	return 0;
}

int s3_get_object(struct s3_client *c, const char *bucket, const char *key,
		  const struct s3_sink *sink, struct s3_object_info *info)
{
	struct s3_req r = {
		.method = "GET", .op = "get", .bucket = bucket, .key = key,
		.body_fd = -1, .sink = sink,
	};
	int ret = s3_do_request(c, &r);

	if (ret)
		return ret;
	if (c->resp.has_length && c->resp.bytes != c->resp.content_length) {
		snprintf(c->err.message, sizeof(c->err.message),
			 "received %llu bytes of %llu",
			 (unsigned long long)c->resp.bytes,
			 (unsigned long long)c->resp.content_length);
		return -RDX_EINTEGRITY;
	}
	take_info(c, info);
	return 0;
}

int s3_head_object(struct s3_client *c, const char *bucket, const char *key,
		   struct s3_object_info *info)
{
	struct s3_req r = {
		.method = "HEAD", .op = "head", .bucket = bucket, .key = key,
		.body_fd = -1,
	};
	int ret = s3_do_request(c, &r);

	if (!ret)
		take_info(c, info);
	return ret;
}

int s3_delete_object(struct s3_client *c, const char *bucket, const char *key)
{
	struct s3_req r = {
		.method = "DELETE", .op = "rm", .bucket = bucket, .key = key,
		.body_fd = -1,
	};

	return s3_do_request(c, &r);
}

static int parsed(struct s3_client *c, int ret)
{
	if (ret == -RDX_EPROTO || ret == -E2BIG) {
		c->err.status = c->resp.status;
		snprintf(c->err.code, sizeof(c->err.code), "MalformedResponse");
		snprintf(c->err.message, sizeof(c->err.message),
			 "the server's XML could not be read (%s)",
			 ret == -E2BIG ? "too large" : "not a listing");
		return -RDX_EPROTO;
	}
	return ret;
}

int s3_list_objects(struct s3_client *c, const char *bucket, const char *prefix,
		    const char *delimiter, const char *token, struct s3_list *out)
{
	struct s3_kv q[5];
	size_t n = 0;
	struct s3_req r = {
		.method = "GET", .op = "ls", .bucket = bucket, .body_fd = -1,
	};
	int ret;

	q[n++] = (struct s3_kv){ "list-type", "2" };
	if (prefix && *prefix)
		q[n++] = (struct s3_kv){ "prefix", prefix };
	if (delimiter)
		q[n++] = (struct s3_kv){ "delimiter", delimiter };
	if (token)
		q[n++] = (struct s3_kv){ "continuation-token", token };
	r.query = q;
	r.nquery = n;
	ret = s3_do_request(c, &r);
	if (ret)
		return ret;
	ret = parsed(c, s3_xml_list_objects(c->resp.body.p, c->resp.body.len, out));
	/* A page that sends us back where we were, or nowhere, would have
	 * a listing go round for ever. */
	if (!ret && out->truncated &&
	    (!out->next_token || !*out->next_token || (token && !strcmp(token, out->next_token)))) {
		bool missing = !out->next_token || !*out->next_token;

		s3_list_release(out);
		return s3_bad_response(c, -RDX_EPROTO, "MalformedResponse",
				       "the listing is truncated but its continuation token %s",
				       missing ? "is missing" : "is the one sent");
	}
	return ret;
}

int s3_list_buckets(struct s3_client *c, struct s3_list *out)
{
	struct s3_req r = { .method = "GET", .op = "ls", .body_fd = -1 };
	int ret = s3_do_request(c, &r);

	if (ret)
		return ret;
	return parsed(c, s3_xml_list_buckets(c->resp.body.p, c->resp.body.len, out));
}

int s3_create_bucket(struct s3_client *c, const char *bucket)
{
	struct s3_buf body;
	char hash[S3_SHA256_HEX_LEN + 1];
	struct s3_req r = {
		.method = "PUT", .op = "mb", .bucket = bucket, .body_fd = -1,
	};
	int ret;

	s3_buf_init(&body, 0);
	/* us-east-1 is the default and refuses to be named. */
	if (strcmp(c->cfg->region, "us-east-1"))
		s3_buf_printf(&body,
			      "<CreateBucketConfiguration xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
			      "<LocationConstraint>%s</LocationConstraint></CreateBucketConfiguration>",
			      c->cfg->region);
	if ((ret = s3_buf_err(&body)))
		goto out;
	s3_sha256_hex(s3_buf_str(&body), body.len, hash);
	r.body = s3_buf_str(&body);
	r.body_len = body.len;
	r.payload_hash = hash;
	ret = s3_do_request(c, &r);
out:
	s3_buf_release(&body);
	return ret;
}

int s3_delete_bucket(struct s3_client *c, const char *bucket)
{
	struct s3_req r = {
		.method = "DELETE", .op = "rb", .bucket = bucket, .body_fd = -1,
	};

	return s3_do_request(c, &r);
}

/* ----------------------------------------------------- presign, copy */

int s3_presign(struct s3_client *c, const char *bucket, const char *key,
	       unsigned expires, struct s3_buf *out)
{
	const struct s3_config *cfg = c->cfg;
	struct s3_req r = { .method = "GET", .bucket = bucket, .key = key, .body_fd = -1 };
	struct s3_creds creds = {
		.access_key = cfg->access_key,
		.secret_key = cfg->secret_key,
		.session_token = cfg->session_token,
	};
	struct s3_buf path, host;
	struct s3_kv h[1];
	char date[17];
	int ret;

	if (cfg->no_sign || !cfg->access_key || !cfg->secret_key)
		return -EINVAL;
	s3_buf_init(&path, 0);
	s3_buf_init(&host, 0);
	ret = address(c, &r, &path, &host, out);
	if (ret)
		goto out;
	amz_now(date);
	h[0] = (struct s3_kv){ "Host", host.p };
	{
		struct s3_sign sg = {
			.method = "GET", .path = path.p, .headers = h, .nheaders = 1,
			.payload_hash = S3_UNSIGNED_PAYLOAD, .region = cfg->region,
			.service = "s3", .amz_date = date,
		};

		s3_buf_addc(out, '?');
		ret = s3_sigv4_presign(&creds, &sg, expires, &c->sig, out);
	}
out:
	s3_buf_release(&path);
	s3_buf_release(&host);
	return ret;
}

/* x-amz-copy-source's value: "/bucket/key", the key URI-encoded (slashes
 * kept) as S3 decodes it.  Returns 0 or -ENOMEM. */
static int copy_source(struct s3_buf *src, const char *src_bucket, const char *src_key)
{
	int ret;

	s3_buf_init(src, 0);
	s3_buf_printf(src, "/%s/", src_bucket);
	ret = s3_uri_encode(src, src_key, strlen(src_key), true);
	return ret ? ret : s3_buf_err(src);
}

/* The ETag in a copy's answer, <root><ETag>: S3 may answer 200 and fail
 * later, which the body then says. */
static int copy_result(struct s3_client *c, const char *root, const char *op,
		       char *etag)
{
	if (!s3_xml_field(c->resp.body.p, c->resp.body.len, root, "ETag", etag,
			  S3_ETAG_MAX))
		return 0;
	s3_fill_error(c, -RDX_EPROTO);
	if (c->resp.body.len &&
	    !s3_xml_error(c->resp.body.p, c->resp.body.len, c->err.code,
			  sizeof(c->err.code), c->err.message, sizeof(c->err.message)))
		return -RDX_EREMOTE;
	return s3_bad_response(c, -RDX_EPROTO, "MalformedResponse",
			       "%s's answer has no %s ETag", op, root);
}

int s3_copy_object(struct s3_client *c, const char *src_bucket,
		   const char *src_key, const char *bucket, const char *key,
		   struct s3_object_info *info)
{
	struct s3_buf src;
	struct s3_kv h[1];
	struct s3_req r = {
		.method = "PUT", .op = "cp", .bucket = bucket, .key = key,
		.headers = h, .nheaders = 1, .body = "", .body_fd = -1,
	};
	char etag[S3_ETAG_MAX];
	int ret = copy_source(&src, src_bucket, src_key);

	if (ret)
		goto out;
	h[0] = (struct s3_kv){ "x-amz-copy-source", src.p };
	ret = s3_do_request(c, &r);
	if (!ret)
		ret = copy_result(c, "CopyObjectResult", "CopyObject", etag);
	if (!ret && info) {
		memset(info, 0, sizeof(*info));
		snprintf(info->etag, sizeof(info->etag), "%s", etag);
	}
out:
	s3_buf_release(&src);
	return ret;
}

int s3_mpu_part_copy(struct s3_client *c, const char *bucket, const char *key,
		     const char *upload_id, unsigned part, const char *src_bucket,
		     const char *src_key, const char *src_etag, uint64_t first,
		     uint64_t last, char *etag)
{
	char num[16], range[64];
	struct s3_kv q[] = { { "partNumber", num }, { "uploadId", upload_id } };
	struct s3_kv h[3];
	struct s3_buf src;
	struct s3_req r = {
		.method = "PUT", .op = "cp", .bucket = bucket, .key = key,
		.query = q, .nquery = 2, .headers = h, .nheaders = 2,
		.body = "", .body_fd = -1,
	};
	int ret = copy_source(&src, src_bucket, src_key);

	if (ret)
		goto out;
	snprintf(num, sizeof(num), "%u", part);
	snprintf(range, sizeof(range), "bytes=%" PRIu64 "-%" PRIu64, first, last);
	h[0] = (struct s3_kv){ "x-amz-copy-source", src.p };
	h[1] = (struct s3_kv){ "x-amz-copy-source-range", range };
	if (src_etag && *src_etag)
		h[r.nheaders++] = (struct s3_kv){ "x-amz-copy-source-if-match", src_etag };
	ret = s3_do_request(c, &r);
	if (!ret)
		ret = copy_result(c, "CopyPartResult", "UploadPartCopy", etag);
	if (!ret && !etag_ok(etag))
		ret = s3_bad_response(c, -RDX_EPROTO, "MalformedResponse",
				      "part %u came back without a usable ETag", part);
out:
	s3_buf_release(&src);
	return ret;
}

int s3_head_part(struct s3_client *c, const char *bucket, const char *key,
		 unsigned part, uint64_t *len, unsigned *count)
{
	char num[16];
	struct s3_kv q[] = { { "partNumber", num } };
	struct s3_req r = {
		.method = "HEAD", .op = "head", .bucket = bucket, .key = key,
		.query = q, .nquery = 1, .body_fd = -1,
	};
	uint64_t v = 0;
	int ret;

	snprintf(num, sizeof(num), "%u", part);
	ret = s3_do_request(c, &r);
	if (ret)
		return ret;
	if (!c->resp.has_length)
		return s3_bad_response(c, -RDX_EPROTO, "MalformedResponse",
				       "HEAD ?partNumber=%u without a Content-Length", part);
	*len = c->resp.content_length;
	*count = 0;
	if (c->resp.mp_parts[0] && !rdx_parse_uint(c->resp.mp_parts, 1, 10000, &v)) /* S3_PARTS_MAX */
		*count = (unsigned)v;
	return 0;
}

int s3_head_carry(struct s3_client *c, const char *bucket, const char *key,
		  struct s3_object_info *info, char *carry, size_t cap)
{
	int ret = s3_head_object(c, bucket, key, info);

	if (ret)
		return ret;
	if (c->resp.carry_over || c->resp.carry_len >= cap)
		return s3_bad_response(c, -RDX_EPROTO, "MetadataTooLarge",
				       "more metadata than a copy can carry over (%zu bytes)",
				       sizeof(c->resp.carry));
	memcpy(carry, c->resp.carry, c->resp.carry_len + 1);
	return 0;
}
