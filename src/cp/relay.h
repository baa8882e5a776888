/* rdcp between two remote hosts: both ends are started over SSH and the
 * data goes from one to the other directly, never through this host.
 *
 *   rdcp (here)               source host A              destination host C
 *     │ ── SSH exec rdsend --server ... -- 'PATH' ─▶ │
 *     │ ── stdin: KEY\n (kept open) ───────────────▶ │
 *     │ ◀─ stdout: RDX-PORT N ────────────────────── │ listening on N
 *     │ ── SSH exec rdrecv --connect 'ADDR' --key-file - ... -- N "$d" ────▶ │
 *     │ ── stdin: KEY\n (kept open) ──────────────────────────────────────▶ │
 *     │                                              │ ◀═ rdxfer session ══ │ dials ADDR:N
 *     │ ◀─ stderr, exit status ───────────────────── │                      │
 *     │ ◀─ stdout: its --json line; stderr, exit status ───────────────────── │
 *
 * ADDR is --rdma-addr, else A's SSH host name (after ~/.ssh/config). */
#ifndef RDX_CP_RELAY_H
#define RDX_CP_RELAY_H

#include "cp/copy.h"

/* Copies src on one remote host to dst on another (or the same) one, the
 * data going directly between them; dst as cp_copy() treats it.  Prints
 * one error line (plus the far sides' stderr) on failure; stops both far
 * sides on failure or once *o->xo.interrupted is set.  *st is what the
 * destination's rdrecv reported (--json).  Returns 0 or a negative error for
 * rdx_exit_code(): -RDX_EREMOTE when either far side failed. */
int cp_relay(const struct cp_opts *o, const struct cp_addr *src,
	     const struct cp_addr *dst, struct rdx_xfer_stats *st);

#endif
