/* The transport vtable: everything above it (handshake, streams, slots,
 * seal, zstd, file I/O) is shared by every transport.  A transport moves
 * frames over one connection; a session uses one connection per stream.
 *
 *   tcp    frames are bytes on a socket; DATA payloads are read into slots
 *   verbs  control frames are SENDs; DATA payloads are RDMA-written straight
 *          from the sender's slot into the receiver's (docs/RDMA.md)
 *
 * All calls return 0 or a negative error.  Receiving distinguishes a clean
 * end (the peer closed between frames) from a connection cut mid-frame. */
#ifndef RDX_XPORT_H
#define RDX_XPORT_H

#include "core/proto.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct rdx_ring;
struct rdx_slot;

struct rdx_net_opts {
	int family;	     /* AF_UNSPEC, AF_INET or AF_INET6 */
	const char *bind;    /* local address, or NULL */
	uint64_t timeout_ms; /* a send or receive blocked this long fails */
	/* verbs: a protection domain of the connection's own rather than the
	 * device's shared one (a server keeping each client's registrations
	 * apart); TCP ignores it. */
	bool own_pd;
	/* verbs: the queue pairs' local ACK timeout, 4.096 us x 2^N (1..31);
	 * 0: RDX_ACK_TIMEOUT_ROCE on RoCE, rdma_cm's own (the subnet
	 * manager's path record) on InfiniBand; RDX_ACK_TIMEOUT_CM: rdma_cm's
	 * own everywhere.  TCP ignores it. */
	unsigned ack_timeout;
};

#define RDX_ACK_TIMEOUT_CM 32

/* A lost packet that nothing follows (the last of a message, the last in
 * flight) is sent again only after the ACK timeout.  rdma_cm's default on
 * RoCE is its fixed packet lifetime plus one: 19 (2.1 s) on Debian 12's
 * Linux 6.1, as its queue pairs report it; perftest uses 14 (67 ms).
 * Seven retries without an ACK end the queue pair: 14 gives up after
 * about 0.5 s of silence (docs/RDMA.md). */
#define RDX_ACK_TIMEOUT_ROCE 14

struct rdx_xport_ops;

struct rdx_conn {
	const struct rdx_xport_ops *ops;
	char peer[96]; /* "addr:port" of the other end, for messages */
	/* Set by transports that know more than an error code can say
	 * ("RDMA write failed: remote access error"); empty otherwise.
	 * Written before the failing call returns, never changed after. */
	char why[160];
};

struct rdx_listener {
	const struct rdx_xport_ops *ops;
};

/* Called once a DATA payload handed to send_data may be reused: err is 0,
 * or the transport's error if it never got out. */
typedef void (*rdx_sent_fn)(void *arg, struct rdx_slot *slot, int err);

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

	/* The data phase.  Once the handshake is done, both ends attach their
	 * slot ring: the receiver's becomes the landing area of DATA payloads
	 * (verbs registers it and tells the sender where it is, with room for
	 * the chunks below rdx_ring_nslots()); the sender's becomes their
	 * source.  deadline_ns bounds waiting for the peer's half; -ENOMSG
	 * says the peer sent a frame instead (read it: an ERROR, say). */
	int (*attach)(struct rdx_conn *c, struct rdx_ring *r, bool receiver,
		      uint64_t deadline_ns);
	/* Sends a DATA frame whose payload lies in the attached ring and
	 * belongs to slot; done(arg, slot, err) runs once the payload may be
	 * reused, possibly before send_data returns, possibly on another
	 * thread.  Returns 0 (done will run) or an error (it will not). */
	int (*send_data)(struct rdx_conn *c, const struct rdx_frame_hdr *h,
			 const void *payload, struct rdx_slot *slot,
			 rdx_sent_fn done, void *arg);
	/* Receiver: chunks with seq < below have a free slot waiting.  A
	 * transport that writes into the receiver's ring sends no chunk before
	 * it is granted; byte-stream transports ignore it. */
	void (*grant)(struct rdx_conn *c, uint64_t below);

	/* Listening, before the handshake: 1 when a whole first frame
	 * (header and payload, or a header whose length is too large to
	 * wait for) has arrived, 0 when not yet, a negative error when the
	 * connection failed or closed.  *fd becomes readable when more
	 * arrives.  NULL: the transport cannot tell (the gate lets the
	 * connection straight through).  Never blocks. */
	int (*frame_ready)(struct rdx_conn *c, int *fd);
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
extern const struct rdx_xport_ops rdx_xport_verbs;

/* Why the verbs transport cannot be used at all on this host ("no RDMA
 * device found"), or NULL when it can be tried. */
const char *rdx_verbs_unavailable(void);

#endif
