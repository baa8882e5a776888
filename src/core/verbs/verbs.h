/* One-sided RDMA on an established verbs connection, for later users of
 * the transport (the S3-over-RDMA server pulls and pushes object bytes this
 * way): register a buffer, describe it to the peer as (address, rkey,
 * length), and RDMA READ or WRITE a peer's buffer so described.  The peer's
 * hardware checks bounds and access; a violation fails the operation (and,
 * as RC does, the connection) with the completion status in c->why. */
#ifndef RDX_VERBS_H
#define RDX_VERBS_H

#include "core/xport.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct rdx_verbs_mr;

#define RDX_VERBS_SLOTS 2 /* one-sided operations in flight per connection */

/* Where a queue pair is, as a peer addresses it: its number, and the
 * port's LID (InfiniBand) or the GID (RoCE: has_gid). */
struct rdx_verbs_qpaddr {
	uint32_t qpn;
	uint16_t lid;
	bool has_gid;
	uint8_t gid[16];
};

struct rdx_verbs_remote {
	uint64_t addr;
	uint32_t rkey;
	uint64_t len;
};

/* Registers buf on c's device; remote access only as asked.  Returns 0,
 * or -RDX_ENOTSUP (not a verbs connection, or registration refused: the
 * reason, with the memlock limit, is in c->why). */
int rdx_verbs_reg(struct rdx_conn *c, void *buf, size_t len, bool remote_write,
		  bool remote_read, struct rdx_verbs_mr **out);
void rdx_verbs_desc(const struct rdx_verbs_mr *m, struct rdx_verbs_remote *d);
void rdx_verbs_dereg(struct rdx_verbs_mr *m);

/* This end's queue pair (peer false) or the one it is connected to (peer
 * true), as the queue pair's own state has them: who is at the other end
 * is what the hardware talks to, not what anyone said.  Returns 0 or
 * -RDX_ENOTSUP (not a verbs connection, or the device would not say). */
int rdx_verbs_qpaddr(struct rdx_conn *c, bool peer, struct rdx_verbs_qpaddr *a);

/* For a connection that carries only one-sided traffic after its
 * handshake: waits up to ms for it to end (the peer disconnected, an
 * operation failed, shutdown).  Returns true once it has ended, false
 * while it stands.  Frames the peer may send meanwhile are left unread. */
bool rdx_verbs_wait_gone(struct rdx_conn *c, unsigned ms);

/* Copies len bytes between local (inside m) and r->addr + offset: an RDMA
 * WRITE when write, else an RDMA READ.  Waits for the completion (bounded
 * by the connection's timeout).  Returns 0, -EINVAL when local is outside
 * m, or the connection's error with the reason in c->why.  Uses slot 0. */
int rdx_verbs_rw(struct rdx_conn *c, bool write, struct rdx_verbs_mr *m,
		 void *local, size_t len, const struct rdx_verbs_remote *r,
		 uint64_t offset);

/* The same in two steps, so that a caller keeps up to RDX_VERBS_SLOTS
 * operations in flight (reading the next piece of a file while the last
 * one crosses): rdx_verbs_post() starts one in slot (which must be free),
 * rdx_verbs_wait() waits for it.  Until its wait returns, a slot's local
 * bytes belong to the NIC; a failed wait returns only once no slot's
 * operation can still touch local memory (the queue pair is moved to the
 * error state and the flush awaited), and ends the connection. */
int rdx_verbs_post(struct rdx_conn *c, unsigned slot, bool write, struct rdx_verbs_mr *m,
		   void *local, size_t len, const struct rdx_verbs_remote *r,
		   uint64_t offset);
int rdx_verbs_wait(struct rdx_conn *c, unsigned slot);

#endif
