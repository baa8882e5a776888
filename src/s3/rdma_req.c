/* A client's data requests over RDMA (rdma.h): when to try, the token on
 * the request, and reading what came back, declines included. */
#include "s3/s3_int.h"

#include "core/err.h"
#include "core/io.h"
#include "core/log.h"
#include "core/xport.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define AUTO_OPEN_MS 1500 /* auto: how long a first connection may take */

void s3_rdma_count(struct s3_client *c, bool rdma, uint64_t n)
{
	struct s3_rdma_stats *st = c->o.rdma_stats;

	if (st)
		atomic_fetch_add(rdma ? &st->rdma : &st->http, n);
	/* --progress: libcurl counts what crosses HTTP; these did not. */
	if (rdma && c->o.moved)
		atomic_fetch_add(c->o.moved, n);
}

/* Whether a body of len bytes may go by RDMA at all: not off, not empty
 * (empty objects always go over HTTP), within the buffer. */
static bool fits(const struct s3_client *c, uint64_t len)
{
	return c->o.rdma != S3_RDMA_OFF && len && len <= c->o.rdma_buf;
}

bool s3_rdma_wanted(const struct s3_client *c, uint64_t len)
{
	const struct s3_rdma_stats *st = c->o.rdma_stats;

	if (!fits(c, len))
		return false;
	return c->rdma || c->o.rdma == S3_RDMA_ON ||
	       (!c->rdma_failed && !(st && atomic_load(&st->unusable)) && !rdx_verbs_unavailable());
}

int s3_rdma_conn(struct s3_client *c, uint64_t len, struct s3_rdma **out)
{
	struct s3_rdma_stats *st = c->o.rdma_stats;
	uint64_t ms = (uint64_t)(c->o.connect_timeout_ms > 0 ? c->o.connect_timeout_ms : 10000);
	char why[256];
	int ret;

	*out = NULL;
	if (!fits(c, len))
		return 0;
	if (c->rdma) {
		*out = c->rdma;
		return 0;
	}
	if (c->o.rdma == S3_RDMA_AUTO) {
		if (c->rdma_failed || (st && atomic_load(&st->unusable)))
			return 0;
		if (ms > AUTO_OPEN_MS)
			ms = AUTO_OPEN_MS;
	}
	ret = s3_rdma_open(c->cfg, &c->o.rdma_how, c->o.rdma_buf, ms, c->o.stop, &c->rdma, why,
			   sizeof(why));
	if (!ret) {
		rdx_info(2, "rdma: %s %s, %zu bytes registered",
			 c->o.rdma_how.dc ? "a DC target for" : "connected to", c->cfg->host,
			 c->o.rdma_buf);
		if (st)
			atomic_store(&st->opened, 1);
		*out = c->rdma;
		return 0;
	}
	if (ret == -RDX_EINTR || (c->o.stop && atomic_load(c->o.stop)))
		return -RDX_EINTR;
	if (c->o.rdma == S3_RDMA_ON) {
		memset(&c->err, 0, sizeof(c->err));
		snprintf(c->err.message, sizeof(c->err.message), "--rdma on: %s", why);
		return ret == -ENOMEM ? ret : ret == -RDX_EAUTH ? ret : -RDX_ENOTSUP;
	}
	c->rdma_failed = true;
	/* A host without a device is the common case, not news. */
	if (!st || !atomic_exchange(&st->unusable, 1))
		rdx_info(rdx_verbs_unavailable() ? 2 : 1, "rdma: not used (%s); over HTTP", why);
	return 0;
}

/* The request r, sent with a token for the buffer's first len bytes.
 * Returns the verdict, or a negative error when no answer came (or the
 * token could not be made); *bytes: a DONE's count. */
static int send_token(struct s3_client *c, struct s3_rdma *rd, const struct s3_req *r,
		      bool get, uint64_t len, uint64_t *bytes)
{
	struct s3_kv h[16];
	struct s3_req q = *r;
	char tok[S3_RDMA_TOKEN_LEN + 1], dl[24];
	enum s3_rdma_verdict v;
	size_t nh = 0, i;
	int ret;

	if (r->nheaders + 3 > sizeof(h) / sizeof(h[0]) || s3_rdma_token(rd, (size_t)len, tok))
		return -EINVAL;
	for (i = 0; i < r->nheaders; i++)
		h[nh++] = r->headers[i];
	h[nh++] = (struct s3_kv){ "x-amz-rdma-token", tok };
	h[nh++] = (struct s3_kv){ "x-amz-rdma-agent", s3_rdma_agent(rd) };
	if (!get) {
		snprintf(dl, sizeof(dl), "%" PRIu64, len);
		h[nh++] = (struct s3_kv){ "x-amz-decoded-content-length", dl };
		q.body = "";
		q.body_fd = -1;
		q.body_off = 0;
		q.body_len = 0;
		q.payload_hash = "UNSIGNED-PAYLOAD";
	}
	q.headers = h;
	q.nheaders = nh;
	q.rdma = true;
	/* The server moves the bytes 1 MiB at a time, each move bounded by
	 * its own timeout, and answers only then: allow as much silence. */
	q.stall_secs = c->o.stall_secs * (long)(1 + len / (1u << 20));
	ret = s3_do_request(c, &q);
	if (ret && !c->err.status)
		return ret; /* no answer */
	v = s3_rdma_verdict(get, c->resp.status, ret ? c->err.code : "",
			    c->resp.rdma_reply[0] ? c->resp.rdma_reply : NULL,
			    c->resp.rdma_moved[0] ? c->resp.rdma_moved : NULL, c->resp.bytes, bytes);
	if (ret && v != S3_RDMA_DECLINED)
		return ret; /* an S3 error, as over HTTP */
	return (int)v;
}

/* After a decline: a token the server would not take (the connection it
 * named is gone) means a new connection next time; a server that does
 * not do RDMA means none. */
static void declined(struct s3_client *c, const struct s3_req *r)
{
	rdx_info(2, "rdma: %s s3://%s/%s declined (%s%s%s), again over HTTP", r->op,
		 r->bucket, r->key ? r->key : "", c->err.code[0] ? c->err.code : "",
		 c->err.code[0] && c->resp.rdma_reply[0] ? ", " : "",
		 c->resp.rdma_reply[0] ? "x-amz-rdma-reply" : c->err.code[0] ? "" : "no RDMA answer");
	if (!strcmp(c->err.code, "S3RdmaNotSupported")) {
		c->rdma_failed = true;
		s3_rdma_close(c->rdma);
		c->rdma = NULL;
	} else if (c->err.code[0]) {
		s3_rdma_close(c->rdma);
		c->rdma = NULL;
	}
	memset(&c->err, 0, sizeof(c->err));
}

int s3_rdma_put(struct s3_client *c, struct s3_rdma *rd, const struct s3_req *r)
{
	size_t cap;
	char *buf = s3_rdma_buf(rd, &cap);
	uint64_t bytes = 0;
	int v;

	if (r->body_len > cap)
		return 1;
	if (r->body)
		memcpy(buf, r->body, (size_t)r->body_len);
	else if (rdx_pread_full(r->body_fd, buf, (size_t)r->body_len, (off_t)r->body_off) !=
		 (ssize_t)r->body_len)
		return -EIO;
	v = send_token(c, rd, r, false, r->body_len, &bytes);
	if (v < 0)
		return v;
	switch (v) {
	case S3_RDMA_DONE:
		if (bytes != r->body_len)
			return s3_bad_response(c, -RDX_EPROTO, "MalformedResponse",
					    "the server says it took %" PRIu64 " bytes of %" PRIu64
					    " by RDMA", bytes, r->body_len);
		s3_rdma_count(c, true, bytes);
		return 0;
	case S3_RDMA_DECLINED:
		declined(c, r);
		return 1;
	case S3_RDMA_BAD:
		return s3_bad_response(c, -RDX_EPROTO, "MalformedResponse",
				    "the answer to an RDMA upload makes no sense (x-amz-rdma-reply '%s', x-amz-rdma-bytes-transferred '%s')",
				    c->resp.rdma_reply, c->resp.rdma_moved);
	default: /* FAILED; IGNORED is no verdict for a PUT */
		return -RDX_EREMOTE;
	}
}

int s3_rdma_get(struct s3_client *c, struct s3_rdma *rd, const struct s3_req *r,
		uint64_t len, uint64_t *moved)
{
	size_t cap;
	uint64_t bytes = 0;
	int v;

	s3_rdma_buf(rd, &cap);
	if (len > cap)
		len = cap;
	v = send_token(c, rd, r, true, len, &bytes);
	if (v < 0)
		return v;
	switch (v) {
	case S3_RDMA_DONE:
		if (bytes > len)
			return s3_bad_response(c, -RDX_EPROTO, "MalformedResponse",
					    "the server says it wrote %" PRIu64
					    " bytes into a buffer of %" PRIu64, bytes, len);
		*moved = bytes;
		return 0;
	case S3_RDMA_IGNORED:
		return 2;
	case S3_RDMA_DECLINED:
		declined(c, r);
		return 1;
	case S3_RDMA_BAD:
		return s3_bad_response(c, -RDX_EPROTO, "MalformedResponse",
				    "the answer to an RDMA download makes no sense (x-amz-rdma-reply '%s', x-amz-rdma-bytes-transferred '%s', %" PRIu64 " bytes of body)",
				    c->resp.rdma_reply, c->resp.rdma_moved, c->resp.bytes);
	default:
		return -RDX_EREMOTE;
	}
}
