/* One rdcp copy of a single file between this host and a remote one: the
 * far end is rdrecv/rdsend --server started over SSH (remote.h), the near
 * end is the core's rdx_send/rdx_recv dialing it, and the data goes
 * directly between the two, not through SSH. */
#ifndef RDX_CP_COPY_H
#define RDX_CP_COPY_H

#include "core/xfer.h"
#include "cp/addr.h"
#include "cp/remote.h"

struct cp_opts {
	struct cp_ssh_opts ssh;	 /* host and user come from the address */
	const char *remote_path; /* directory of rdsend/rdrecv there; NULL: PATH */
	const char *rdma_addr;	 /* data address; NULL: the SSH host name */
	struct rdx_xfer_opts xo; /* transport, streams, compress, encrypt, ... */
	int verbose;
	bool quiet; /* the far side's stderr only when something failed */
	bool dst_dir; /* several sources: a remote DST must be a directory */
	bool recursive; /* -r: sources go as trees (src/core/tree.h) */
	bool via_here;	 /* -3: between two remote hosts, through this one */
	bool glob;	 /* the remote source is a glob(3) pattern, expanded
			  * there (cp_is_glob); the names that come must match
			  * its last component */
	bool files_only; /* -p without -r: trees of one file; a directory
			  * source is refused, on the far side too */
};

/* Copies src[0..n) to dst, the sources on one side and dst on the other,
 * one of them remote.  A dst that is a directory gets each source's base
 * name in it (on the far side too).  Several sources only with -r, all
 * local or all on one remote host: they go as one tree, over one SSH
 * login and one transfer.  Prints one error line (plus the far side's
 * stderr) on failure.  Returns 0 or a negative error for rdx_exit_code(). */
/* Whether a remote path is a pattern for the far side to expand, as scp
 * does: an unescaped '*', '?' or '['. */
bool cp_is_glob(const char *path);

int cp_copy(const struct cp_opts *o, const struct cp_addr *src, int n,
	    const struct cp_addr *dst, struct rdx_xfer_stats *st);

#endif
