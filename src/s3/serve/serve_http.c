/* rds3 serve's HTTP/1.1: one request after another on a connection,
 * bodies by Content-Length or chunked, 100 Continue when asked for.
 * Everything the peer sends is hostile: the header section is bounded
 * (SV_HEAD_MAX, SV_HDRS_MAX), lines must end in CRLF, header names must
 * be tokens, values carry no control characters, a length is digits
 * that fit, and every wait is cut by the connection's timeout and by
 * the stop flag (poll(2) in slices). */
#include "s3/serve/serve_int.h"

#include "core/err.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define SLICE_MS 500
#define CHUNK_LINE_MAX 4096

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* A header that takes longer than this to arrive is a stray's, not a
 * real client's: the connection gives way like an idle one. */
#define SLOW_HEAD_MS 1000

/* Whether this connection is one the server wants closed (it has a new
 * one waiting and no room): an idle one, or one whose header has been
 * trickling in for over SLOW_HEAD_MS (a slowloris); takes one from the
 * count if so. */
static bool shed_me(struct sv_conn *c)
{
	int n;

	if (!c->shed ||
	    !(c->idle || (c->head_since_ms && now_ms() - c->head_since_ms >= SLOW_HEAD_MS)))
		return false;
	n = atomic_load(c->shed);
	while (n > 0)
		if (atomic_compare_exchange_weak(c->shed, &n, n - 1))
			return true;
	return false;
}

/* Waits until fd is ready for ev, at most the timeout from now; an idle
 * connection gives way to a new one when the server asks. */
static int wait_io(struct sv_conn *c, short ev)
{
	int64_t end = now_ms() + (int64_t)c->timeout_secs * 1000;

	if (c->io_deadline_ms && c->io_deadline_ms < end)
		end = c->io_deadline_ms;

	for (;;) {
		struct pollfd p = { .fd = c->fd, .events = ev };
		int64_t left = end - now_ms();
		int n;

		if (c->stop && atomic_load(c->stop))
			return -ECANCELED;
		if (left <= 0)
			return -ETIMEDOUT;
		n = poll(&p, 1, left < SLICE_MS ? (int)left : SLICE_MS);
		if (n > 0)
			return 0;
		/* Silent for a whole slice: not a new connection whose
		 * request is on its way, nor one that just got its answer. */
		if (!n && shed_me(c))
			return -ECANCELED;
		if (n < 0 && errno != EINTR)
			return -errno;
	}
}

/* One recv into p: the count, 0 at EOF, or -errno. */
static ssize_t conn_recv(struct sv_conn *c, void *p, size_t n)
{
	for (;;) {
		ssize_t r = recv(c->fd, p, n, MSG_DONTWAIT);
		int ret;

		if (r >= 0)
			return r;
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN && errno != EWOULDBLOCK)
			return -errno;
		if ((ret = wait_io(c, POLLIN)))
			return ret;
	}
}

/* After a send that moved nothing, with errno err: 0 to try again
 * (interrupted, or writable again within the timeout), else the error,
 * the connection broken. */
static int send_retry(struct sv_conn *c, int err)
{
	int ret;

	if (err == EINTR)
		return 0;
	if (err != EAGAIN && err != EWOULDBLOCK)
		ret = -err;
	else if (!(ret = wait_io(c, POLLOUT)))
		return 0;
	c->broken = true;
	return ret;
}

int sv_send(struct sv_conn *c, const void *p, size_t n)
{
	const char *s = p;

	while (n) {
		ssize_t w = send(c->fd, s, n, MSG_DONTWAIT | MSG_NOSIGNAL);
		int ret;

		if (w > 0) {
			s += w;
			n -= (size_t)w;
		} else if ((ret = send_retry(c, w < 0 ? errno : EAGAIN))) {
			return ret;
		}
	}
	return 0;
}

int sv_sendfile(struct sv_conn *c, int fd, uint64_t off, uint64_t len)
{
	off_t o = (off_t)off;

	while (len) {
		size_t chunk = len > (1u << 30) ? 1u << 30 : (size_t)len;
		ssize_t w = sendfile(c->fd, fd, &o, chunk);
		int ret;

		if (w > 0) {
			len -= (uint64_t)w;
		} else if (w == 0) { /* the file shrank under us */
			c->broken = true;
			return -EIO;
		} else if ((ret = send_retry(c, errno))) {
			return ret;
		}
	}
	return 0;
}

/* ------------------------------------------------------------- parsing */

static bool token_char(unsigned char c)
{
	return c > 0x20 && c < 0x7f && !strchr("\"(),/:;<=>?@[\\]{}", c);
}

static bool value_ok(const char *v)
{
	for (; *v; v++) {
		unsigned char ch = (unsigned char)*v;

		if ((ch < 0x20 && ch != '\t') || ch == 0x7f)
			return false;
	}
	return true;
}

static int parse_u64(const char *s, uint64_t *out)
{
	uint64_t v = 0;

	if (!*s || strlen(s) > 19)
		return -RDX_EPROTO;
	for (; *s; s++) {
		if (*s < '0' || *s > '9')
			return -RDX_EPROTO;
		v = v * 10 + (uint64_t)(*s - '0');
	}
	*out = v;
	return 0;
}

/* Splits the query into decoded name/value pairs. */
static int parse_query(struct sv_req *r, char *q)
{
	while (q && *q) {
		char *amp = strchr(q, '&'), *eq;
		struct s3_buf name, value;
		int ret;

		if (amp)
			*amp++ = '\0';
		if (!*q) {
			q = amp;
			continue;
		}
		if (r->nquery == SV_QUERY_MAX)
			return -E2BIG;
		eq = strchr(q, '=');
		s3_buf_init(&name, SV_HEAD_MAX);
		s3_buf_init(&value, SV_HEAD_MAX);
		ret = s3_uri_decode(&name, q, eq ? (size_t)(eq - q) : strlen(q));
		if (!ret && eq)
			ret = s3_uri_decode(&value, eq + 1, strlen(eq + 1));
		if (!ret && (strlen(s3_buf_str(&name)) != name.len ||
			     strlen(s3_buf_str(&value)) != value.len))
			ret = -EILSEQ; /* %00 */
		if (ret) {
			s3_buf_release(&name);
			s3_buf_release(&value);
			return ret == -ENOMEM || ret == -EILSEQ ? ret : -RDX_EPROTO;
		}
		r->query[r->nquery].name = name.p ? name.p : strdup("");
		r->query[r->nquery].value = eq ? (value.p ? value.p : strdup("")) : NULL;
		if (!eq)
			s3_buf_release(&value);
		if (!r->query[r->nquery].name || (eq && !r->query[r->nquery].value)) {
			free((char *)r->query[r->nquery].name);
			free((char *)r->query[r->nquery].value);
			return -ENOMEM;
		}
		r->nquery++;
		q = amp;
	}
	return 0;
}

static int parse_target(struct sv_req *r, char *target)
{
	char *q = strchr(target, '?');
	struct s3_buf path;
	int ret;

	if (target[0] != '/')
		return -RDX_EPROTO; /* only origin-form */
	if (q) {
		*q++ = '\0';
		if (!(r->raw_query = strdup(q)))
			return -ENOMEM;
	}
	r->raw_path = target;
	s3_buf_init(&path, SV_HEAD_MAX);
	ret = s3_uri_decode(&path, target, strlen(target));
	if (!ret && strlen(s3_buf_str(&path)) != path.len)
		ret = -EILSEQ; /* %00 */
	if (ret) {
		s3_buf_release(&path);
		return ret == -ENOMEM || ret == -EILSEQ ? ret : -RDX_EPROTO;
	}
	r->path = path.p;
	return parse_query(r, q);
}

static int parse_head(struct sv_req *r, char *head)
{
	char *line = head, *next, *sp1, *sp2, *proto;
	const char *v;
	size_t i;

	next = strstr(line, "\r\n");
	*next = '\0';
	next += 2;
	sp1 = strchr(line, ' ');
	sp2 = sp1 ? strchr(sp1 + 1, ' ') : NULL;
	if (!sp1 || !sp2 || sp1 == line)
		return -RDX_EPROTO;
	*sp1 = *sp2 = '\0';
	proto = sp2 + 1;
	if (!strcmp(proto, "HTTP/1.0"))
		r->http10 = true;
	else if (strcmp(proto, "HTTP/1.1"))
		return -RDX_EPROTO;
	for (i = 0; line[i]; i++)
		if (line[i] < 'A' || line[i] > 'Z')
			return -RDX_EPROTO;
	r->method = line;
	for (line = next; *line; line = next) {
		char *colon, *val, *end;

		next = strstr(line, "\r\n");
		*next = '\0';
		next += 2;
		colon = strchr(line, ':');
		if (!colon || colon == line)
			return -RDX_EPROTO;
		*colon = '\0';
		for (i = 0; line[i]; i++)
			if (!token_char((unsigned char)line[i]))
				return -RDX_EPROTO; /* also obs-fold's leading space */
		for (val = colon + 1; *val == ' ' || *val == '\t'; val++)
			;
		for (end = val + strlen(val); end > val && (end[-1] == ' ' || end[-1] == '\t'); end--)
			;
		*end = '\0';
		if (!value_ok(val))
			return -RDX_EPROTO;
		if (r->nhdr == SV_HDRS_MAX)
			return -E2BIG;
		r->hdr[r->nhdr++] = (struct sv_hdr){ line, val };
	}
	if (!r->method[0])
		return -RDX_EPROTO;
	for (i = 0; i < r->nhdr; i++) {
		uint64_t len;

		if (strcasecmp(r->hdr[i].name, "Content-Length"))
			continue;
		if (parse_u64(r->hdr[i].value, &len) ||
		    (r->has_length && len != r->length))
			return -RDX_EPROTO;
		r->has_length = true;
		r->length = len;
	}
	for (i = 0; i < r->nhdr; i++) {
		if (strcasecmp(r->hdr[i].name, "Transfer-Encoding"))
			continue;
		if (strcasecmp(r->hdr[i].value, "chunked") || r->chunked ||
		    r->has_length || r->http10)
			return -RDX_EPROTO;
		r->chunked = true;
	}
	v = sv_hdr(r, "Connection");
	r->keep_alive = !r->http10;
	if (v && strcasestr(v, "close"))
		r->keep_alive = false;
	else if (v && r->http10 && strcasestr(v, "keep-alive"))
		r->keep_alive = true;
	v = sv_hdr(r, "Expect");
	if (v && strcasecmp(v, "100-continue"))
		return -RDX_EPROTO; /* 417, strictly; nobody sends another */
	r->expect_continue = v && !r->http10;
	r->continued = !r->expect_continue;
	r->left = r->has_length ? r->length : 0;
	r->body_end = !r->chunked && !r->left;
	return parse_target(r, sp1 + 1);
}

/* A request's id: this run's random half, then a count, so that ids are
 * unique across the server's restarts as well as within a run. */
static uint32_t run_id;

static void pick_run_id(void)
{
	if (getrandom(&run_id, sizeof(run_id), 0) != sizeof(run_id))
		run_id = (uint32_t)time(NULL) ^ (uint32_t)getpid();
}

static void new_request_id(char id[20])
{
	static atomic_uint_fast32_t seq;
	static pthread_once_t once = PTHREAD_ONCE_INIT;

	pthread_once(&once, pick_run_id);
	snprintf(id, 20, "%08X%08X", (unsigned)run_id,
		 (unsigned)(atomic_fetch_add(&seq, 1) + 1));
}

int sv_read_request(struct sv_conn *c, struct sv_req *r)
{
	int64_t end = now_ms() + (int64_t)c->timeout_secs * 1000;
	size_t have = 0;
	char *term = NULL;

	r->head[0] = '\0';
	c->head_since_ms = 0;
	memset((char *)r + offsetof(struct sv_req, method), 0,
	       sizeof(*r) - offsetof(struct sv_req, method));
	new_request_id(r->id);
	/* Empty lines before a request are allowed (RFC 9112 2.2), also
	 * after a body, in what is already buffered. */
	while (c->in_off < c->in_len &&
	       (c->in[c->in_off] == '\r' || c->in[c->in_off] == '\n'))
		c->in_off++;
	/* The head is copied out of the input buffer as it is found. */
	for (;;) {
		size_t take = c->in_len - c->in_off;
		ssize_t n;

		if (take > SV_HEAD_MAX - have)
			take = SV_HEAD_MAX - have;
		memcpy(r->head + have, c->in + c->in_off, take);
		r->head[have + take] = '\0';
		term = strstr(r->head + (have > 3 ? have - 3 : 0), "\r\n\r\n");
		if (term) {
			size_t used = (size_t)(term + 4 - r->head);

			c->in_off += used - have;
			term[2] = '\0'; /* the last line keeps its CRLF */
			break;
		}
		c->in_off += take;
		have += take;
		if (have == SV_HEAD_MAX)
			return -E2BIG;
		if (memchr(r->head, '\0', have))
			return -RDX_EPROTO;
		if (now_ms() > end)
			return -ETIMEDOUT; /* a trickle is not a request */
		/* Once it has begun, the whole header within header_secs. */
		if (have && !c->head_since_ms && c->header_secs) {
			c->head_since_ms = now_ms();
			if (c->head_since_ms + (int64_t)c->header_secs * 1000 < end)
				end = c->head_since_ms + (int64_t)c->header_secs * 1000;
		}
		c->in_off = c->in_len = 0;
		c->idle = !have;
		c->io_deadline_ms = have ? end : 0;
		n = conn_recv(c, c->in, sizeof(c->in));
		c->idle = false;
		c->io_deadline_ms = 0;
		if (n < 0)
			return (int)n;
		if (!n)
			return have ? -ECONNRESET : 1;
		c->in_len = (size_t)n;
		/* Blank lines before a request are allowed (RFC 9112 2.2). */
		while (!have && c->in_off < c->in_len &&
		       (c->in[c->in_off] == '\r' || c->in[c->in_off] == '\n'))
			c->in_off++;
	}
	c->head_since_ms = 0;
	if (strlen(r->head) != (size_t)(term + 2 - r->head))
		return -RDX_EPROTO; /* a NUL inside */
	return parse_head(r, r->head);
}

void sv_req_release(struct sv_req *r)
{
	size_t i;

	free(r->path);
	r->path = NULL;
	free(r->raw_query);
	r->raw_query = NULL;
	for (i = 0; i < r->nquery; i++) {
		free((char *)r->query[i].name);
		free((char *)r->query[i].value);
	}
	r->nquery = 0;
}

const char *sv_hdr(const struct sv_req *r, const char *name)
{
	size_t i;

	for (i = 0; i < r->nhdr; i++)
		if (!strcasecmp(r->hdr[i].name, name))
			return r->hdr[i].value;
	return NULL;
}

bool sv_query(const struct sv_req *r, const char *name, const char **value)
{
	size_t i;

	for (i = 0; i < r->nquery; i++)
		if (!strcmp(r->query[i].name, name)) {
			if (value)
				*value = r->query[i].value;
			return true;
		}
	return false;
}

/* ---------------------------------------------------------------- body */

/* Up to n bytes of the connection: the buffer first, then the socket. */
static ssize_t conn_read(struct sv_conn *c, void *p, size_t n)
{
	if (c->in_off < c->in_len) {
		size_t take = c->in_len - c->in_off;

		if (take > n)
			take = n;
		memcpy(p, c->in + c->in_off, take);
		c->in_off += take;
		return (ssize_t)take;
	}
	return conn_recv(c, p, n);
}

/* One line of the chunked framing, CRLF removed. */
static int chunk_line(struct sv_conn *c, char *line, size_t cap)
{
	size_t n = 0;

	for (;;) {
		char ch;
		ssize_t r = conn_read(c, &ch, 1);

		if (r < 0)
			return (int)r;
		if (!r)
			return -ECONNRESET;
		if (ch == '\n') {
			if (!n || line[n - 1] != '\r')
				return -RDX_EPROTO;
			line[n - 1] = '\0';
			return 0;
		}
		if (n + 1 >= cap)
			return -RDX_EPROTO;
		line[n++] = ch;
	}
}

/* The next chunk's size into r->left; 0 ends the body (trailers read). */
static int next_chunk(struct sv_conn *c, struct sv_req *r)
{
	char line[CHUNK_LINE_MAX];
	uint64_t v = 0;
	size_t i;
	int ret;

	if (r->body_read && (ret = chunk_line(c, line, sizeof(line))))
		return ret;
	if (r->body_read && line[0])
		return -RDX_EPROTO; /* the CRLF after a chunk's data */
	if ((ret = chunk_line(c, line, sizeof(line))))
		return ret;
	for (i = 0; line[i] && line[i] != ';'; i++) {
		char ch = line[i];
		unsigned d;

		if (ch >= '0' && ch <= '9')
			d = (unsigned)(ch - '0');
		else if ((ch | 0x20) >= 'a' && (ch | 0x20) <= 'f')
			d = (unsigned)((ch | 0x20) - 'a' + 10);
		else
			return -RDX_EPROTO;
		if (i >= 15)
			return -RDX_EPROTO;
		v = v * 16 + d;
	}
	if (!i)
		return -RDX_EPROTO;
	r->left = v;
	r->chunk_open = v != 0;
	if (v)
		return 0;
	for (i = 0; i < SV_HDRS_MAX; i++) { /* trailers, dropped */
		if ((ret = chunk_line(c, line, sizeof(line))))
			return ret;
		if (!line[0]) {
			r->body_end = true;
			return 0;
		}
	}
	return -RDX_EPROTO;
}

ssize_t sv_body_read(struct sv_conn *c, struct sv_req *r, void *p, size_t n)
{
	ssize_t got;
	int ret;

	if (r->body_end || !n)
		return 0;
	if (!r->continued) {
		static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";

		r->continued = true;
		if ((ret = sv_send(c, cont, sizeof(cont) - 1)))
			return ret;
	}
	if (r->chunked && !r->chunk_open) {
		if ((ret = next_chunk(c, r))) {
			c->broken = true;
			return ret;
		}
		if (r->body_end)
			return 0;
	}
	if (n > r->left)
		n = (size_t)r->left;
	got = conn_read(c, p, n);
	if (got <= 0) {
		c->broken = true;
		return got ? got : -ECONNRESET;
	}
	r->left -= (uint64_t)got;
	r->body_read += (uint64_t)got;
	if (!r->left) {
		if (r->chunked)
			r->chunk_open = false;
		else
			r->body_end = true;
	}
	return got;
}

void sv_body_skip(struct sv_conn *c, struct sv_req *r, uint64_t max)
{
	char buf[16384];
	uint64_t n = 0;

	if (r->body_end)
		return;
	if (!r->continued || (r->has_length && r->length - r->body_read > max)) {
		c->broken = true;
		return;
	}
	while (!r->body_end && n <= max) {
		ssize_t got = sv_body_read(c, r, buf, sizeof(buf));

		if (got <= 0)
			break;
		n += (uint64_t)got;
	}
	if (!r->body_end)
		c->broken = true;
}

/* How long a connection is kept for the rest of a body it will not use:
 * in all, and with nothing coming. */
#define LINGER_MS	(30 * 1000)
#define LINGER_IDLE_MS	(2 * 1000)

void sv_linger(struct sv_conn *c)
{
	int64_t end = now_ms() + LINGER_MS, idle_end = now_ms() + LINGER_IDLE_MS;
	char buf[65536];

	/* FIN after the answer: a client that reads as it sends stops now. */
	if (shutdown(c->fd, SHUT_WR))
		return;
	for (;;) {
		int64_t t = now_ms(), left = (end < idle_end ? end : idle_end) - t;
		struct pollfd p = { .fd = c->fd, .events = POLLIN };
		ssize_t got;
		int n;

		if (left <= 0 || (c->stop && atomic_load(c->stop)))
			return;
		n = poll(&p, 1, left > 1000 ? 1000 : (int)left);
		if (n < 0 && errno != EINTR)
			return;
		if (n <= 0)
			continue;
		got = read(c->fd, buf, sizeof(buf));
		if (got == 0 || (got < 0 && errno != EINTR && errno != EAGAIN))
			return;
		idle_end = now_ms() + LINGER_IDLE_MS;
	}
}

/* -------------------------------------------------------------- answers */

static const char *reason(int status)
{
	switch (status) {
	case 200: return "OK";
	case 204: return "No Content";
	case 206: return "Partial Content";
	case 304: return "Not Modified";
	case 400: return "Bad Request";
	case 403: return "Forbidden";
	case 404: return "Not Found";
	case 405: return "Method Not Allowed";
	case 409: return "Conflict";
	case 411: return "Length Required";
	case 412: return "Precondition Failed";
	case 413: return "Payload Too Large";
	case 416: return "Range Not Satisfiable";
	case 431: return "Request Header Fields Too Large";
	case 500: return "Internal Server Error";
	case 501: return "Not Implemented";
	case 503: return "Service Unavailable";
	default: return "Unknown";
	}
}

void sv_http_date(time_t t, char out[40])
{
	struct tm tm;

	gmtime_r(&t, &tm);
	strftime(out, 40, "%a, %d %b %Y %H:%M:%S GMT", &tm);
}

void sv_iso_date(time_t t, char out[40])
{
	struct tm tm;

	gmtime_r(&t, &tm);
	strftime(out, 40, "%Y-%m-%dT%H:%M:%S.000Z", &tm);
}

int sv_send_head(struct sv_conn *c, const struct sv_req *r, int status,
		 const char *hdrs, bool has_length, uint64_t length)
{
	struct s3_buf b;
	char date[40];
	int ret;

	sv_http_date(time(NULL), date);
	s3_buf_init(&b, 0);
	/* An empty body asked 100 Continue for (botocore sends it with a
	 * zero Content-Length, for a folder marker) gets one before the
	 * answer on a connection that stays: botocore takes a final answer
	 * without it for the status of its next request that gets one, and
	 * waits for an answer it already read (RFC 9110 10.1.1 allows both). */
	if (r->expect_continue && !r->continued && r->body_end && !c->broken && r->keep_alive)
		s3_buf_adds(&b, "HTTP/1.1 100 Continue\r\n\r\n");
	s3_buf_printf(&b, "HTTP/1.1 %d %s\r\nDate: %s\r\nServer: rds3\r\n"
			  "x-amz-request-id: %s\r\n",
		      status, reason(status), date, r->id);
	s3_buf_adds(&b, hdrs ? hdrs : "");
	if (has_length)
		s3_buf_printf(&b, "Content-Length: %llu\r\n",
			      (unsigned long long)length);
	if (c->broken || !r->keep_alive || !r->body_end)
		s3_buf_adds(&b, "Connection: close\r\n");
	s3_buf_adds(&b, "\r\n");
	ret = s3_buf_err(&b);
	if (!ret)
		ret = sv_send(c, b.p, b.len);
	s3_buf_release(&b);
	return ret;
}

int sv_utf8_next(const unsigned char *p, uint32_t *cp)
{
	unsigned c = p[0];
	int len, i;

	if (c < 0x80) {
		*cp = c;
		return 1;
	}
	if (c >= 0xc2 && c <= 0xdf)
		len = 2, *cp = c & 0x1f;
	else if (c >= 0xe0 && c <= 0xef)
		len = 3, *cp = c & 0x0f;
	else if (c >= 0xf0 && c <= 0xf4)
		len = 4, *cp = c & 0x07;
	else
		return -1;
	for (i = 1; i < len; i++) {
		if ((p[i] & 0xc0) != 0x80)
			return -1;
		*cp = *cp << 6 | (p[i] & 0x3fu);
	}
	if ((len == 3 && *cp < 0x800) || (len == 4 && (*cp < 0x10000 || *cp > 0x10ffff)) ||
	    (*cp >= 0xd800 && *cp <= 0xdfff))
		return -1; /* overlong, or a surrogate */
	return len;
}

bool sv_utf8_ok(const char *s)
{
	const unsigned char *p = (const unsigned char *)s;
	uint32_t cp;
	int len;

	for (; *p; p += len)
		if ((len = sv_utf8_next(p, &cp)) < 0)
			return false;
	return true;
}

/* XML 1.0 allows tab, LF, CR and 0x20 up (S3 sends others percent-encoded
 * only with encoding-type=url); a key with another control character
 * cannot be written into a listing without it. */
int sv_xml_esc(struct s3_buf *b, const char *s)
{
	for (; *s; s++) {
		unsigned char ch = (unsigned char)*s;

		switch (ch) {
		case '&': s3_buf_adds(b, "&amp;"); break;
		case '<': s3_buf_adds(b, "&lt;"); break;
		case '>': s3_buf_adds(b, "&gt;"); break;
		case '"': s3_buf_adds(b, "&quot;"); break;
		case '\'': s3_buf_adds(b, "&apos;"); break;
		case '\t': case '\n': case '\r':
			s3_buf_printf(b, "&#x%X;", ch);
			break;
		default:
			if (ch < 0x20)
				return -EINVAL;
			s3_buf_addc(b, (char)ch);
		}
	}
	return s3_buf_err(b);
}
