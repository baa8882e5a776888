/* The tcp transport: one TCP connection per stream, frames sent with one
 * sendmsg (header + payload) and received straight into the caller's slot.
 * Silence is bounded by SO_RCVTIMEO/SO_SNDTIMEO and TCP_USER_TIMEOUT, so a
 * dead peer or a pulled cable surfaces as -RDX_ETIMEOUT, never a hang. */
#include "core/xport.h"

#include "core/addr.h"

#include "core/err.h"
#include "core/units.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

struct tcp_conn {
	struct rdx_conn base;
	int fd;
	uint64_t deadline_ns;	/* see set_deadline; owner thread only */
	const atomic_int *stop;
};

struct tcp_listener {
	struct rdx_listener base;
	int fd;
	unsigned port;
};

static struct tcp_conn *tcp_of(struct rdx_conn *c)
{
	return (struct tcp_conn *)c;
}

static void set_timeouts(int fd, uint64_t ms)
{
	struct timeval tv = { .tv_sec = (time_t)(ms / 1000),
			      .tv_usec = (suseconds_t)(ms % 1000) * 1000 };
	unsigned int uto = ms > UINT32_MAX ? UINT32_MAX : (unsigned int)ms;
	int one = 1;

	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (!ms)
		return;
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &uto, sizeof(uto));
}

static int conn_new(int fd, const struct rdx_net_opts *o,
		    struct rdx_conn **out)
{
	struct tcp_conn *c = calloc(1, sizeof(*c));
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);

	if (!c) {
		close(fd);
		return -ENOMEM;
	}
	c->base.ops = &rdx_xport_tcp;
	c->fd = fd;
	if (getpeername(fd, (struct sockaddr *)&ss, &len) == 0)
		rdx_addr_text((struct sockaddr *)&ss, c->base.peer, sizeof(c->base.peer));
	set_timeouts(fd, o->timeout_ms);
	*out = &c->base;
	return 0;
}

/* One non-blocking connect bounded by the deadline.  Returns fd or -errno;
 * *fatal says that retrying cannot help (the local --bind address is bad). */
static int try_connect(const struct addrinfo *ai, const struct rdx_net_opts *o,
		       uint64_t deadline_ns, bool *fatal)
{
	struct pollfd p;
	int fd, err = 0, flags;
	socklen_t elen = sizeof(err);
	uint64_t now, wait_ms;

	fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC,
		    ai->ai_protocol);
	if (fd < 0)
		return -errno;
	if (o->bind) {
		struct addrinfo *b;
		int ret = rdx_resolve(o->bind, NULL, ai->ai_family, AI_PASSIVE, &b);

		if (ret) {
			*fatal = true;
			close(fd);
			return ret;
		}
		ret = bind(fd, b->ai_addr, b->ai_addrlen) ? -errno : 0;
		freeaddrinfo(b);
		if (ret) {
			*fatal = true;
			close(fd);
			return ret;
		}
	}
	flags = fcntl(fd, F_GETFL);
	fcntl(fd, F_SETFL, flags | O_NONBLOCK);
	if (connect(fd, ai->ai_addr, ai->ai_addrlen) && errno != EINPROGRESS) {
		err = errno;
		close(fd);
		return -err;
	}
	p.fd = fd;
	p.events = POLLOUT;
	now = rdx_now_ns();
	wait_ms = now >= deadline_ns ? 0 : (deadline_ns - now) / 1000000 + 1;
	if (poll(&p, 1, wait_ms > 10000 ? 10000 : (int)wait_ms) <= 0) {
		close(fd);
		return -ETIMEDOUT;
	}
	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen) || err) {
		close(fd);
		return -(err ? err : ECONNREFUSED);
	}
	fcntl(fd, F_SETFL, flags);
	return fd;
}

static int tcp_connect(const struct rdx_net_opts *o, const char *host,
		       const char *port, uint64_t deadline_ns,
		       const atomic_int *stop, int *last_err,
		       struct rdx_conn **out)
{
	struct addrinfo *res, *ai;
	int ret, fd = -ECONNREFUSED;
	bool fatal = false;

	ret = rdx_resolve(host, port, o->family, AI_ADDRCONFIG, &res);
	if (ret)
		return ret;
	for (;;) {
		for (ai = res; ai && !fatal; ai = ai->ai_next) {
			fd = try_connect(ai, o, deadline_ns, &fatal);
			if (fd >= 0)
				break;
		}
		if (fd >= 0 || fatal || rdx_now_ns() >= deadline_ns ||
		    (stop && atomic_load(stop)))
			break;
		usleep(100000);
	}
	freeaddrinfo(res);
	if (fd < 0) {
		*last_err = -fd;
		return stop && atomic_load(stop) ? -RDX_EINTR : -RDX_ECONNECT;
	}
	return conn_new(fd, o, out);
}

/* v6only: 1 for -6 (IPv6 only), 0 for one socket serving both families,
 * -1 to leave the system default (net.ipv6.bindv6only). */
static int listen_on(const struct addrinfo *ai, int v6only)
{
	int fd, one = 1;

	fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC,
		    ai->ai_protocol);
	if (fd < 0)
		return -errno;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (ai->ai_family == AF_INET6 && v6only >= 0)
		setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &v6only, sizeof(v6only));
	/* A long queue: a flood of strays must not push a real peer's
	 * connection out of it (the gate takes them in quickly). */
	if (bind(fd, ai->ai_addr, ai->ai_addrlen) || listen(fd, SOMAXCONN)) {
		int err = errno;

		close(fd);
		return -err;
	}
	return fd;
}

static int tcp_listen(const struct rdx_net_opts *o, const char *port,
		      struct rdx_listener **out)
{
	struct addrinfo *res, *ai;
	struct tcp_listener *l;
	struct sockaddr_storage ss;
	socklen_t slen = sizeof(ss);
	int ret, fd = -EADDRNOTAVAIL;

	ret = rdx_resolve(o->bind, port, o->family, AI_PASSIVE, &res);
	if (ret)
		return ret;
	/* With no address given, prefer one dual-stack IPv6 socket. */
	for (ai = res; ai && fd < 0; ai = ai->ai_next)
		if (ai->ai_family == AF_INET6)
			fd = listen_on(ai, o->family == AF_INET6 ? 1 :
					   !o->bind && o->family == AF_UNSPEC ? 0 : -1);
	for (ai = res; ai && fd < 0; ai = ai->ai_next)
		if (ai->ai_family == AF_INET)
			fd = listen_on(ai, -1);
	freeaddrinfo(res);
	if (fd < 0)
		return fd;
	l = calloc(1, sizeof(*l));
	if (!l) {
		close(fd);
		return -ENOMEM;
	}
	l->base.ops = &rdx_xport_tcp;
	l->fd = fd;
	if (getsockname(fd, (struct sockaddr *)&ss, &slen) == 0)
		l->port = ntohs(ss.ss_family == AF_INET6 ?
				  ((struct sockaddr_in6 *)&ss)->sin6_port :
				  ((struct sockaddr_in *)&ss)->sin_port);
	*out = &l->base;
	return 0;
}

static unsigned tcp_listen_port(struct rdx_listener *l)
{
	return ((struct tcp_listener *)l)->port;
}

static int tcp_accept(struct rdx_listener *lb, const struct rdx_net_opts *o,
		      int wait_ms, struct rdx_conn **out)
{
	struct tcp_listener *l = (struct tcp_listener *)lb;
	struct pollfd p = { .fd = l->fd, .events = POLLIN };
	int n, fd;

	n = poll(&p, 1, wait_ms);
	if (n < 0)
		return errno == EINTR ? -EAGAIN : -errno;
	if (n == 0)
		return -EAGAIN;
	fd = accept4(l->fd, NULL, NULL, SOCK_CLOEXEC);
	if (fd < 0)
		return (errno == EINTR || errno == ECONNABORTED) ? -EAGAIN : -errno;
	return conn_new(fd, o, out);
}

static void tcp_close_listener(struct rdx_listener *lb)
{
	struct tcp_listener *l = (struct tcp_listener *)lb;

	if (!l)
		return;
	close(l->fd);
	free(l);
}

static int io_error(int err)
{
	if (err == EAGAIN || err == EWOULDBLOCK)
		return -RDX_ETIMEOUT;
	return -err;
}

static int tcp_send(struct rdx_conn *cb, const struct rdx_frame_hdr *h,
		    const void *payload)
{
	struct tcp_conn *c = tcp_of(cb);
	uint8_t hdr[RDX_HDR_LEN];
	struct iovec iov[2] = {
		{ .iov_base = hdr, .iov_len = RDX_HDR_LEN },
		{ .iov_base = (void *)payload, .iov_len = h->len },
	};
	struct msghdr msg = { .msg_iov = iov, .msg_iovlen = h->len ? 2 : 1 };

	rdx_hdr_encode(h, hdr);
	while (msg.msg_iovlen) {
		ssize_t n = sendmsg(c->fd, &msg, MSG_NOSIGNAL);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return io_error(errno);
		}
		while (msg.msg_iovlen && (size_t)n >= msg.msg_iov->iov_len) {
			n -= (ssize_t)msg.msg_iov->iov_len;
			msg.msg_iov++;
			msg.msg_iovlen--;
		}
		if (msg.msg_iovlen) {
			msg.msg_iov->iov_base = (char *)msg.msg_iov->iov_base + n;
			msg.msg_iov->iov_len -= (size_t)n;
		}
	}
	return 0;
}

/* Waits until fd is readable, the deadline passes or *stop is set. */
static int wait_readable(struct tcp_conn *c)
{
	for (;;) {
		struct pollfd p = { .fd = c->fd, .events = POLLIN };
		uint64_t now = rdx_now_ns();
		int slice = 200, n;

		if (c->stop && atomic_load(c->stop))
			return -RDX_EINTR;
		if (c->deadline_ns) {
			if (now >= c->deadline_ns)
				return -RDX_ETIMEOUT;
			if (c->deadline_ns - now < 200000000)
				slice = (int)((c->deadline_ns - now) / 1000000) + 1;
		}
		n = poll(&p, 1, slice);
		if (n > 0)
			return 0;
		if (n < 0 && errno != EINTR)
			return -errno;
	}
}

static int tcp_frame_ready(struct rdx_conn *cb, int *fd)
{
	struct tcp_conn *c = tcp_of(cb);
	uint8_t hdr[RDX_HDR_LEN];
	uint32_t len;
	ssize_t n;
	int avail;

	*fd = c->fd;
	n = recv(c->fd, hdr, sizeof(hdr), MSG_PEEK | MSG_DONTWAIT);
	if (n == 0)
		return -RDX_ECONNECT;
	if (n < 0)
		return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? 0 : io_error(errno);
	if ((size_t)n < sizeof(hdr))
		return 0;
	len = (uint32_t)hdr[4] << 24 | (uint32_t)hdr[5] << 16 | (uint32_t)hdr[6] << 8 | hdr[7];
	if (len > RDX_CTRL_MAX + RDX_TAG_LEN)
		return 1; /* not a first frame: the handshake says so */
	if (ioctl(c->fd, FIONREAD, &avail))
		return io_error(errno);
	return (size_t)avail >= sizeof(hdr) + len;
}

static int tcp_recv(struct rdx_conn *cb, void *buf, size_t len)
{
	struct tcp_conn *c = tcp_of(cb);
	bool bounded = c->deadline_ns || c->stop;
	char *p = buf;
	size_t done = 0;

	while (done < len) {
		ssize_t n;

		if (bounded) {
			int ret = wait_readable(c);

			if (ret)
				return ret;
		}
		n = recv(c->fd, p + done, len - done,
			 bounded ? MSG_DONTWAIT : MSG_WAITALL);

		if (n == 0)
			return done ? -RDX_ECONNECT : RDX_XPORT_EOF;
		if (n < 0) {
			if (errno == EINTR || (bounded && errno == EAGAIN))
				continue;
			return io_error(errno);
		}
		done += (size_t)n;
	}
	return 0;
}

static void tcp_set_deadline(struct rdx_conn *cb, uint64_t deadline_ns,
			     const atomic_int *stop)
{
	tcp_of(cb)->deadline_ns = deadline_ns;
	tcp_of(cb)->stop = stop;
}

/* A socket needs no registration: the payload is copied into the kernel
 * by the time send returns, so the slot is free at once. */
static int tcp_attach(struct rdx_conn *cb, struct rdx_ring *r, bool receiver,
		      uint64_t deadline_ns)
{
	(void)cb, (void)r, (void)receiver, (void)deadline_ns;
	return 0;
}

static int tcp_send_data(struct rdx_conn *cb, const struct rdx_frame_hdr *h,
			 const void *payload, struct rdx_slot *slot,
			 rdx_sent_fn done, void *arg)
{
	int ret = tcp_send(cb, h, payload);

	if (!ret)
		done(arg, slot, 0);
	return ret;
}

/* TCP's own flow control bounds what is in flight. */
static void tcp_grant(struct rdx_conn *cb, uint64_t below)
{
	(void)cb, (void)below;
}

static void tcp_set_timeout(struct rdx_conn *cb, uint64_t ms)
{
	set_timeouts(tcp_of(cb)->fd, ms);
}

static void tcp_shutdown(struct rdx_conn *cb)
{
	shutdown(tcp_of(cb)->fd, SHUT_RDWR);
}

static void tcp_close(struct rdx_conn *cb)
{
	if (!cb)
		return;
	close(tcp_of(cb)->fd);
	free(cb);
}

static void tcp_close_gently(struct rdx_conn *cb, int wait_ms)
{
	struct tcp_conn *c = tcp_of(cb);
	uint64_t end = rdx_now_ns() + (uint64_t)wait_ms * 1000000;
	char sink[4096];

	/* Send our FIN after the last frame, then drain until the peer
	 * closes: closing with unread data would send a RST, and a RST can
	 * destroy the frame we just sent before the peer reads it. */
	shutdown(c->fd, SHUT_WR);
	for (;;) {
		struct pollfd p = { .fd = c->fd, .events = POLLIN };
		uint64_t now = rdx_now_ns();

		if (now >= end || poll(&p, 1, (int)((end - now) / 1000000) + 1) <= 0)
			break;
		if (recv(c->fd, sink, sizeof(sink), MSG_DONTWAIT) <= 0)
			break;
	}
	tcp_close(cb);
}

const struct rdx_xport_ops rdx_xport_tcp = {
	.name = "tcp",
	.connect = tcp_connect,
	.listen = tcp_listen,
	.listen_port = tcp_listen_port,
	.accept = tcp_accept,
	.close_listener = tcp_close_listener,
	.send = tcp_send,
	.recv = tcp_recv,
	.attach = tcp_attach,
	.send_data = tcp_send_data,
	.grant = tcp_grant,
	.frame_ready = tcp_frame_ready,
	.set_timeout = tcp_set_timeout,
	.set_deadline = tcp_set_deadline,
	.shutdown = tcp_shutdown,
	.close_gently = tcp_close_gently,
	.close = tcp_close,
};
