/* The transport vtable: everything above it (handshake, streams, slots,
 * seal, zstd, file I/O) is shared by every transport.  A transport moves
 * whole frames over one connection; a session uses one connection per
 * stream.  tcp is the only implementation today; verbs plugs in here.
 *
 * All calls return 0 or a negative error.  Receiving distinguishes a clean
 * end (the peer closed between frames) from a connection cut mid-frame. */
#ifndef RDX_XPORT_H
#define RDX_XPORT_H

#include "proto.h"

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

struct rdx_net_opts {
	int family;	     /* AF_UNSPEC, AF_INET or AF_INET6 */
	const char *bind;    /* local address, or NULL */
	uint64_t timeout_ms; /* a send or receive blocked this long fails */
};

struct rdx_xport_ops;

struct rdx_conn {
	const struct rdx_xport_ops *ops;
	char peer[96]; /* "addr:port" of the other end, for messages */
};

struct rdx_listener {
	const struct rdx_xport_ops *ops;
};

struct rdx_xport_ops {
	const char *name;
	/* Connects to host:port, retrying refused/unreachable attempts until
	 * deadline_ns (rdx_now_ns() clock) or *stop.  Errors: -RDX_ECONNECT
	 * after the deadline (errno of the last attempt in *last_err), or
	 * -EINVAL/-ENOENT for a host that does not resolve. */
	int (*connect)(const struct rdx_net_opts *o, const char *host,
		       const char *port, uint64_t deadline_ns,
		       const atomic_int *stop, int *last_err,
		       struct rdx_conn **out);
	/* Binds and listens; port "0" picks a free one. */
	int (*listen)(const struct rdx_net_opts *o, const char *port,
		      struct rdx_listener **out);
	/* The port the listener is bound to. */
	unsigned (*listen_port)(struct rdx_listener *l);
	/* Waits up to wait_ms for a connection; -EAGAIN when none came. */
	int (*accept)(struct rdx_listener *l, const struct rdx_net_opts *o,
		      int wait_ms, struct rdx_conn **out);
	void (*close_listener)(struct rdx_listener *l);
	/* Sends one frame: the header, then h->len bytes of payload.  Not
	 * safe to call concurrently on one connection. */
	int (*send)(struct rdx_conn *c, const struct rdx_frame_hdr *h,
		    const void *payload);
	/* Receives exactly len bytes.  Returns 0, RDX_XPORT_EOF (positive)
	 * when the peer closed before the first byte, -RDX_ECONNECT when it
	 * closed mid-way, -RDX_ETIMEOUT, or -errno. */
	int (*recv)(struct rdx_conn *c, void *buf, size_t len);
	/* Changes the silence limit of an established connection. */
	void (*set_timeout)(struct rdx_conn *c, uint64_t ms);
	/* Bounds every later recv on c by an absolute deadline (rdx_now_ns()
	 * clock; 0: none) and ends it with -RDX_EINTR once *stop is set (NULL:
	 * never): a handshake must not outlive its budget however slowly the
	 * peer trickles bytes in, and must answer Ctrl-C. */
	void (*set_deadline)(struct rdx_conn *c, uint64_t deadline_ns,
			     const atomic_int *stop);
	/* Unblocks any sender/receiver on c; they fail.  Thread-safe. */
	void (*shutdown)(struct rdx_conn *c);
	/* After a final message: signals end of data, lets the peer read it
	 * (waiting at most wait_ms for it to close), then closes. */
	void (*close_gently)(struct rdx_conn *c, int wait_ms);
	void (*close)(struct rdx_conn *c);
};

#define RDX_XPORT_EOF 1

extern const struct rdx_xport_ops rdx_xport_tcp;

#endif
