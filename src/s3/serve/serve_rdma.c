/* rds3 serve --rdma: the server's side of S3 over RDMA (src/s3/rdma.h).
 *
 * An RDMA listener on the HTTP port's number takes RC connections, each
 * with a protection domain of its own and a thread of its own: the thread
 * runs the login, then keeps the connection until the client leaves, it
 * fails, it idles past the server's timeout, or the server stops.  A
 * logged-in connection has a registered bounce buffer (IO_BUF) that the
 * requests naming it read into and write from.
 *
 * A request's x-amz-rdma-token is served only through the connection it
 * names (queue pair number and GID, as the queue pair itself has them),
 * only when that connection logged in with the request's signer's access
 * key, only inside the buffer the client registered at login, and by one
 * request at a time.  Anything else is declined with NooBaa's S3 errors,
 * before a byte moves, and the client sends the request again over HTTP. */
#include "s3/serve/serve_ops.h"

#include "s3/rdma.h"

#include "core/err.h"
#include "core/io.h"
#include "core/log.h"
#include "core/proto.h"
#include "core/units.h"
#include "core/verbs/verbs.h"

#include <errno.h>
#include <inttypes.h>
#include <openssl/crypto.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

struct rconn {
	struct sv_rdma *d;
	struct rdx_conn *c;
	void *buf; /* IO_BUF, registered in the connection's own PD */
	struct rdx_verbs_mr *mr;
	char access_key[S3_RDMA_KEY_MAX + 1];
	struct rdx_verbs_qpaddr peer;
	uint64_t addr, len; /* what the client registered */
	uint32_t rkey;
	bool ready; /* logged in (d->lock) */
	bool dead;  /* failed or leaving: no new request (d->lock) */
	bool busy;  /* a request holds it (d->lock) */
	int64_t last_ns; /* the end of its last request */
	struct rconn *next;
};

struct sv_rdma {
	struct server *s;
	struct rdx_listener *l;
	struct rdx_net_opts no;
	pthread_t acceptor;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct rconn *conns;
	unsigned n; /* connection threads running */
	atomic_int quit;
};

/* One request's hold on a connection, and its moves in flight: the
 * buffer's two halves take turns, so that the file is read (or written)
 * while the other half crosses. */
struct sv_rdma_use {
	struct rconn *rc;
	struct s3_rdma_token t;
	bool busy[RDX_VERBS_SLOTS]; /* a move in flight in that half */
	size_t len[RDX_VERBS_SLOTS];
	unsigned cur;  /* READ: the half whose bytes come next */
	uint64_t next; /* READ: where the next one starts in the client's buffer */
};

#define HALF (IO_BUF / 2)

_Static_assert(SV_USER_KEY_MAX == S3_RDMA_KEY_MAX, "a user's key fits the login's");

static void unlink_conn(struct sv_rdma *d, struct rconn *rc)
{
	struct rconn **pp;

	for (pp = &d->conns; *pp; pp = &(*pp)->next)
		if (*pp == rc) {
			*pp = rc->next;
			break;
		}
}

static int refuse(struct rconn *rc, const char *why)
{
	s3_rdma_send(rc->c, RDX_F_ERROR, why, strlen(why));
	rdx_info(1, "rdma %s: login refused: %s", rc->c->peer, why);
	return -RDX_EAUTH;
}

/* The server's half of the login (rdma.h), up to its ACCEPT, which
 * conn_main() sends once the connection can take a request. */
static int login(struct rconn *rc)
{
	const struct sv_auth *a = &rc->d->s->auth;
	const struct sv_user *u = NULL;
	struct s3_rdma_hello h;
	uint8_t in[RDX_CTRL_MAX], out[S3_RDMA_NONCE + S3_RDMA_MAC], mac[S3_RDMA_MAC];
	uint8_t hello[S3_RDMA_HELLO_MAX];
	const char *secret;
	size_t n, hl;
	unsigned type;
	int ret;

	if ((ret = s3_rdma_recv(rc->c, &type, in, sizeof(in), &n)))
		return ret;
	if (type != RDX_F_HELLO)
		return refuse(rc, "expected a HELLO");
	ret = s3_rdma_hello_decode(in, n, &h);
	if (ret == -RDX_EVERSION)
		return refuse(rc, "unsupported login version");
	if (ret)
		return refuse(rc, "malformed HELLO");
	/* An unsigned server knows no secret: every login is anonymous.
	 * Else the connection is the user's whose key it logs in with, and
	 * serves only requests that user signs (sv_rdma_take). */
	if (a->users && !(u = sv_users_find(a->users, h.access_key)))
		return refuse(rc, "unknown access key");
	secret = u ? u->secret_key : "";
	hl = n;
	memcpy(hello, in, hl);
	if (getrandom(out, S3_RDMA_NONCE, 0) != S3_RDMA_NONCE)
		return -errno;
	s3_rdma_proof(secret, "server", hello, hl, out, out + S3_RDMA_NONCE);
	if ((ret = s3_rdma_send(rc->c, RDX_F_AUTH, out, sizeof(out))) ||
	    (ret = s3_rdma_recv(rc->c, &type, in, sizeof(in), &n)))
		return ret;
	s3_rdma_proof(secret, "client", hello, hl, out, mac);
	if (type != RDX_F_AUTH || n != S3_RDMA_MAC || CRYPTO_memcmp(mac, in, S3_RDMA_MAC))
		return refuse(rc, "authentication failed (wrong secret key?)");
	snprintf(rc->access_key, sizeof(rc->access_key), "%s", u ? u->access_key : "");
	rc->addr = h.addr;
	rc->len = h.len;
	rc->rkey = h.rkey;
	return 0;
}

static void *conn_main(void *arg)
{
	struct rconn *rc = arg;
	struct sv_rdma *d = rc->d;
	const struct s3_serve_opts *o = d->s->o;
	uint64_t idle_ns = (uint64_t)o->timeout_secs * 1000000000;
	int ret;

	rdx_xport_verbs.set_deadline(rc->c, rdx_now_ns() + (uint64_t)S3_RDMA_LOGIN_MS * 1000000,
				     o->stop);
	ret = rdx_verbs_qpaddr(rc->c, true, &rc->peer);
	if (!ret)
		ret = login(rc);
	if (!ret) {
		rc->buf = aligned_alloc(4096, IO_BUF);
		if (!rc->buf || rdx_verbs_reg(rc->c, rc->buf, IO_BUF, false, false, &rc->mr)) {
			s3_rdma_send(rc->c, RDX_F_ERROR, "out of memory", 13);
			ret = -ENOMEM;
		}
	}
	/* Ready before ACCEPT: the client's next request names this
	 * connection in its token, and must find it (sv_rdma_take). */
	if (!ret) {
		pthread_mutex_lock(&d->lock);
		rc->ready = true;
		rc->last_ns = (int64_t)rdx_now_ns();
		pthread_mutex_unlock(&d->lock);
		ret = s3_rdma_send(rc->c, RDX_F_ACCEPT, NULL, 0);
	}
	rdx_xport_verbs.set_deadline(rc->c, 0, NULL);
	if (!ret) {
		rdx_info(1, "rdma %s: logged in%s%s%s, buffer of %" PRIu64 " bytes", rc->c->peer,
			 rc->access_key[0] ? " as '" : " (unsigned)", rc->access_key,
			 rc->access_key[0] ? "'" : "", rc->len);
		for (;;) {
			bool gone = rdx_verbs_wait_gone(rc->c, 500), idle;

			pthread_mutex_lock(&d->lock);
			idle = !rc->busy && rdx_now_ns() - (uint64_t)rc->last_ns > idle_ns;
			if (gone || idle || atomic_load(&d->quit) || atomic_load(o->stop))
				rc->dead = true;
			pthread_mutex_unlock(&d->lock);
			if (rc->dead)
				break;
		}
	} else if (ret != -RDX_EAUTH) {
		rdx_info(1, "rdma %s: login did not complete: %s", rc->c->peer,
			 ret == RDX_XPORT_EOF ? "the client left"
			 : rc->c->why[0] ? rc->c->why : rdx_strerror(ret));
	}
	/* Gone from the table first, then wait for the request holding it:
	 * its operation ends (done or failed, within the connection's
	 * timeout) before the buffer goes. */
	pthread_mutex_lock(&d->lock);
	rc->dead = true;
	while (rc->busy)
		pthread_cond_wait(&d->cond, &d->lock);
	unlink_conn(d, rc);
	pthread_mutex_unlock(&d->lock);
	rc->c->ops->shutdown(rc->c);
	rdx_verbs_dereg(rc->mr);
	rc->c->ops->close(rc->c);
	free(rc->buf);
	rdx_info(2, "rdma connection closed");
	free(rc);
	pthread_mutex_lock(&d->lock);
	d->n--;
	pthread_cond_broadcast(&d->cond);
	pthread_mutex_unlock(&d->lock);
	return NULL;
}

static void *accept_main(void *arg)
{
	struct sv_rdma *d = arg;
	const struct s3_serve_opts *o = d->s->o;
	pthread_attr_t attr;

	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	while (!atomic_load(&d->quit) && !atomic_load(o->stop)) {
		struct rdx_conn *c;
		struct rconn *rc;
		pthread_t t;
		bool room;

		if (rdx_xport_verbs.accept(d->l, &d->no, 500, &c))
			continue;
		pthread_mutex_lock(&d->lock);
		room = d->n < o->rdma_conns;
		pthread_mutex_unlock(&d->lock);
		rc = room ? calloc(1, sizeof(*rc)) : NULL;
		if (!rc) {
			/* Full: the client logs in to nothing and uses HTTP. */
			rdx_info(1, "rdma %s: turned away: %u RDMA connections already (--rdma-conns)",
				 c->peer, o->rdma_conns);
			c->ops->close(c);
			continue;
		}
		rc->d = d;
		rc->c = c;
		pthread_mutex_lock(&d->lock);
		rc->next = d->conns;
		d->conns = rc;
		d->n++;
		pthread_mutex_unlock(&d->lock);
		if (pthread_create(&t, &attr, conn_main, rc)) {
			pthread_mutex_lock(&d->lock);
			unlink_conn(d, rc);
			d->n--;
			pthread_mutex_unlock(&d->lock);
			c->ops->close(c);
			free(rc);
		}
	}
	pthread_attr_destroy(&attr);
	return NULL;
}

int sv_rdma_start(struct server *s)
{
	const struct s3_serve_opts *o = s->o;
	const char *nodev = rdx_verbs_unavailable();
	struct sv_rdma *d;
	char port[16];
	int ret;

	if (nodev) {
		rdx_error("--rdma: %s", nodev);
		return RDX_EXIT_CONN;
	}
	d = calloc(1, sizeof(*d));
	if (!d)
		return RDX_EXIT_FAIL;
	d->s = s;
	d->no.bind = o->listen;
	d->no.timeout_ms = (uint64_t)o->timeout_secs * 1000;
	d->no.own_pd = true;
	snprintf(port, sizeof(port), "%u", s->port);
	ret = rdx_xport_verbs.listen(&d->no, port, &d->l);
	if (ret) {
		rdx_error("--rdma: cannot listen for RDMA on %s port %s: %s", o->listen, port,
			  rdx_strerror(ret));
		free(d);
		return RDX_EXIT_CONN;
	}
	pthread_mutex_init(&d->lock, NULL);
	pthread_cond_init(&d->cond, NULL);
	if (pthread_create(&d->acceptor, NULL, accept_main, d)) {
		rdx_xport_verbs.close_listener(d->l);
		free(d);
		return RDX_EXIT_FAIL;
	}
	s->rdma = d;
	rdx_info(1, "rdma: listening on port %s: at most %u connections, %u KiB pinned for each "
		    "(%u MiB in all, with the queues' buffers)",
		 port, o->rdma_conns, IO_BUF >> 10,
		 (unsigned)(((uint64_t)o->rdma_conns * (IO_BUF + (512u << 10))) >> 20));
	return 0;
}

void sv_rdma_stop(struct server *s)
{
	struct sv_rdma *d = s->rdma;

	if (!d)
		return;
	atomic_store(&d->quit, 1);
	pthread_join(d->acceptor, NULL);
	pthread_mutex_lock(&d->lock);
	while (d->n)
		pthread_cond_wait(&d->cond, &d->lock);
	pthread_mutex_unlock(&d->lock);
	rdx_xport_verbs.close_listener(d->l);
	pthread_mutex_destroy(&d->lock);
	pthread_cond_destroy(&d->cond);
	free(d);
	s->rdma = NULL;
}

/* A decline: the client sends the request again over HTTP. */
static int decline(struct call *k, int status, const char *code, const char *msg)
{
	rdx_info(1, "%s %s %s: RDMA declined: %s", k->c->peer, k->r->method, k->r->raw_path, msg);
	return sv_fail(k, status, code, msg) ? -EIO : 1;
}

static bool names(const struct rconn *rc, const struct s3_rdma_token *t)
{
	if (rc->peer.qpn != t->qpn || rc->peer.has_gid != t->has_gid)
		return false;
	return t->has_gid ? !memcmp(rc->peer.gid, t->gid, 16) : rc->peer.lid == t->lid;
}

int sv_rdma_take(struct call *k)
{
	const char *tok = sv_hdr(k->r, "x-amz-rdma-token");
	const char *agent = sv_hdr(k->r, "x-amz-rdma-agent");
	const char *signer = k->user ? k->user->access_key : "";
	struct sv_rdma *d = k->s->rdma;
	struct s3_rdma_token t;
	struct rconn *rc;
	const char *why = NULL;

	k->rdma = NULL;
	if (!tok)
		return 0;
	if (!d)
		return decline(k, 501, "S3RdmaNotSupported",
			       "this server was started without --rdma");
	if (agent && strcmp(agent, S3_RDMA_AGENT))
		return decline(k, 501, "S3RdmaNotSupported",
			       "rds3 serve takes rdxfer's own (rc) tokens only");
	if (s3_rdma_token_decode(tok, strlen(tok), &t))
		return decline(k, 400, "S3InvalidRdmaToken", "the RDMA token is malformed");
	pthread_mutex_lock(&d->lock);
	for (rc = d->conns; rc; rc = rc->next)
		if (rc->ready && !rc->dead && names(rc, &t))
			break;
	/* Another principal's connection reads as no connection at all. */
	if (!rc || strcmp(rc->access_key, signer))
		why = "no RDMA connection of this client's matches the token";
	else if (t.rkey != rc->rkey || t.raddr < rc->addr ||
		 t.raddr - rc->addr > rc->len || t.rsize > rc->len - (t.raddr - rc->addr))
		why = "the token's buffer is not the one its connection registered";
	else if (rc->busy)
		why = "the token's connection is busy with another request";
	else
		rc->busy = true;
	pthread_mutex_unlock(&d->lock);
	if (why)
		return decline(k, 400, "S3InvalidRdmaToken", why);
	k->rdma = calloc(1, sizeof(*k->rdma));
	if (!k->rdma) {
		pthread_mutex_lock(&d->lock);
		rc->busy = false;
		pthread_cond_broadcast(&d->cond);
		pthread_mutex_unlock(&d->lock);
		return sv_fail(k, 500, "InternalError", "out of memory") ? -EIO : 1;
	}
	k->rdma->rc = rc;
	k->rdma->t = t;
	return 0;
}

/* Marks the connection failed (an RC queue pair in error does not
 * recover): no request takes it again, its thread closes it. */
static void conn_failed(struct call *k, bool write)
{
	struct rconn *rc = k->rdma->rc;

	rdx_info(1, "%s %s %s: RDMA %s failed: %s", k->c->peer, k->r->method, k->r->raw_path,
		 write ? "write" : "read", rc->c->why[0] ? rc->c->why : "the connection failed");
	pthread_mutex_lock(&k->s->rdma->lock);
	rc->dead = true;
	pthread_mutex_unlock(&k->s->rdma->lock);
}

/* Waits for the move in half slot; counts its bytes.  0 or -EIO. */
static int wait_half(struct call *k, unsigned slot, bool write)
{
	struct sv_rdma_use *u = k->rdma;

	u->busy[slot] = false;
	if (rdx_verbs_wait(u->rc->c, slot)) {
		conn_failed(k, write);
		return -EIO;
	}
	k->rdma_moved += u->len[slot];
	return 0;
}

/* Starts moving n bytes between half slot and the client's buffer at off. */
static int post_half(struct call *k, unsigned slot, bool write, uint64_t off, size_t n)
{
	struct sv_rdma_use *u = k->rdma;
	struct rdx_verbs_remote r = { .addr = u->t.raddr, .rkey = u->t.rkey, .len = u->t.rsize };

	if (n > HALF || off > r.len || n > r.len - off)
		return -EINVAL;
	if (rdx_verbs_post(u->rc->c, slot, write, u->rc->mr, (char *)u->rc->buf + slot * HALF, n,
			   &r, off)) {
		conn_failed(k, write);
		return -EIO;
	}
	u->busy[slot] = true;
	u->len[slot] = n;
	return 0;
}

/* Waits for every move still in flight: the halves are the NIC's until
 * then.  Returns 0 or -EIO. */
static int drain(struct call *k, bool write)
{
	unsigned i;
	int ret = 0;

	for (i = 0; i < RDX_VERBS_SLOTS; i++)
		if (k->rdma->busy[i] && wait_half(k, i, write))
			ret = -EIO;
	return ret;
}

void sv_rdma_drop(struct call *k)
{
	struct sv_rdma *d = k->s->rdma;

	if (!k->rdma)
		return;
	drain(k, false);
	pthread_mutex_lock(&d->lock);
	k->rdma->rc->busy = false;
	k->rdma->rc->last_ns = (int64_t)rdx_now_ns();
	pthread_cond_broadcast(&d->cond);
	pthread_mutex_unlock(&d->lock);
	free(k->rdma);
	k->rdma = NULL;
}

uint64_t sv_rdma_size(const struct call *k)
{
	return k->rdma->t.rsize;
}

int sv_rdma_send_file(struct call *k, int fd, uint64_t off, uint64_t len)
{
	char *buf = k->rdma->rc->buf;
	uint64_t done = 0;
	unsigned s = 0;
	int ret = 0;

	while (!ret && done < len) {
		size_t n = len - done < HALF ? (size_t)(len - done) : HALF;
		ssize_t got;

		if (k->rdma->busy[s] && (ret = wait_half(k, s, true)))
			break;
		do
			got = pread(fd, buf + s * HALF, n, (off_t)(off + done));
		while (got < 0 && errno == EINTR);
		if (got <= 0) {
			ret = got < 0 ? -errno : -ENODATA;
			break;
		}
		if ((ret = post_half(k, s, true, done, (size_t)got)))
			break;
		done += (uint64_t)got;
		s ^= 1;
	}
	if (drain(k, true) && !ret)
		ret = -EIO;
	return ret;
}

ssize_t sv_rdma_read_next(struct call *k, const void **p)
{
	struct sv_rdma_use *u = k->rdma;
	uint64_t size = u->t.rsize;
	unsigned s = u->cur, o = s ^ 1;
	size_t n;

	/* The half due next, posted on the first call; the other one's
	 * READ starts now, so that it crosses while the caller writes. */
	for (unsigned h = s, i = 0; i < RDX_VERBS_SLOTS; h ^= 1, i++) {
		if (u->busy[h] || u->next >= size)
			continue;
		n = size - u->next < HALF ? (size_t)(size - u->next) : HALF;
		if (post_half(k, h, false, u->next, n)) {
			drain(k, false);
			return -EIO;
		}
		u->next += n;
	}
	if (!u->busy[s])
		return 0;
	if (wait_half(k, s, false)) {
		drain(k, false);
		return -EIO;
	}
	u->cur = o;
	*p = (char *)u->rc->buf + s * HALF;
	return (ssize_t)u->len[s];
}

int sv_rdma_fail(struct call *k)
{
	return sv_fail(k, 500, "S3RdmaIoError", "the RDMA transfer failed") ? -EIO : 1;
}

void sv_rdma_headers(const struct call *k, struct s3_buf *h)
{
	if (k->rdma)
		s3_buf_printf(h, "x-amz-rdma-reply: 200\r\nx-amz-rdma-bytes-transferred: %" PRIu64 "\r\n",
			      k->rdma_moved);
}
