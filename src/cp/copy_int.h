/* What copy.c (one far end, the near end here) and relay.c (two far ends,
 * remote to remote) share: the session key, the far command lines, and
 * the far side's words when it fails. */
#ifndef RDX_CP_COPY_INT_H
#define RDX_CP_COPY_INT_H

#include "cp/copy.h"
#include "cp/shquote.h"

/* How long a far side waits for its peer once listening, and we for its
 * port line: SSH round trips and a cold start, with room to spare. */
#define CP_FAR_WAIT_S 30

/* Where a far rdrecv dials instead of listening: the source host's
 * rdsend --server (remote to remote). */
struct cp_dial {
	const char *host;
	unsigned port;
	/* The source's name as far as it is known here (cp_far_top; NULL:
	 * one the far sender picks): the far receiver takes nothing else. */
	const char *top;
};

/* The name a far source's tree comes under, as far as it can be known
 * here: its last component.  NULL (*top) where only the far side knows it
 * ("host:", "host:~", "host:dir/.", "host:.."): the receiver then takes
 * one name the sender picks, as scp does.  Returns 0 or -ENOMEM. */
int cp_far_top(const char *path, char **top);

/* A fresh random session key as 64 hex digits: it travels on the far
 * commands' stdin, one line.  Returns 0 or -EIO (printed). */
int cp_make_key(char hex[65]);

/* Logs in to far's host (o->ssh, far's user on top).  *r is the session,
 * to be closed by the caller whatever the result.  Returns 0 or the error
 * (printed). */
int cp_far_login(struct cp_remote **r, const struct cp_opts *o, const struct cp_addr *far);

/* Logs in to far's host (o->ssh, far's user on top) and runs cmd there,
 * key and a newline on its stdin.  *r is the session, to be closed by
 * the caller whatever the result.  Returns 0 or the error (printed). */
int cp_far_start(struct cp_remote **r, const struct cp_opts *o,
		 const struct cp_addr *far, const char *cmd, const char *key);

/* "exec TOOL": DIR/TOOL with o->remote_path (--remote-path), else the
 * far PATH's, quoted.  Errors stay in c->err. */
void cp_far_tool(struct cp_cmd *c, const struct cp_opts *o, const char *tool);

/* The options both ends of a hop share, for a far rdsend, rdrecv or
 * rdpipe: transport, --ack-timeout, --encrypt, -4/-6 and up to three -v. */
void cp_cmd_net_opts(struct cp_cmd *c, const struct rdx_xfer_opts *x,
		     int verbose);

/* A remote path relative to the login directory: "~/x" is "x" there, and
 * "" (host:) the directory itself.  Points into path or at ".". */
const char *cp_far_path(const char *path);

/* The remote paths' own checks: '-' is never a remote file, and without
 * -r a remote source names a file ("host:" and "host:dir/" do not).
 * Prints the error.  Returns 0 or -RDX_EUSAGE. */
int cp_check_far_paths(const struct cp_addr *src, const struct cp_addr *dst,
		       bool recursive);

/* The far receiver's command line, DST decided by its shell: a file into
 * a directory DST gets the name name (NULL: DST names it), with -r
 * rdrecv -r decides; o->dst_dir refuses a DST that is no directory.  With
 * dial, rdrecv --connect dials it (and prints its --json line for
 * cp_remote_last_line()), else rdrecv --server listens; the key
 * comes on stdin either way.  Errors stay in c->err. */
void cp_recv_cmd(struct cp_cmd *c, const struct cp_opts *o, const char *far,
		 const char *name, const struct cp_dial *dial, unsigned mode);

/* A file's permission bits for the far receiver (--new-mode), as scp
 * and cp give a new file the source's less the umask: a local source's
 * from stat, a far rdsend --server's from its "RDX-MODE NNNN" line (the
 * last before its port line).  0 when unknown (stdin, a tree, an older
 * rdsend): the receiver's default. */
unsigned cp_local_mode(const char *path);
unsigned cp_far_mode(struct cp_remote *r);

/* The far sender's command line: rdsend --server (-r with o->recursive)
 * of far[0..n) (several only with -r).  Errors stay in c->err. */
void cp_send_cmd(struct cp_cmd *c, const struct cp_opts *o,
		 const char *const *far, int n);

/* Prints the far side's stderr, each line as "rdcp: HOST: line". */
void cp_show_far_stderr(struct cp_remote *r, const char *host);

/* cp_remote_read_port() returned ret: stops the far side when it still
 * runs, prints why (its stderr, then one line).  Returns the error for
 * rdx_exit_code(): -RDX_EREMOTE when the far command ended. */
int cp_port_failed(struct cp_remote *r, int ret, const char *host,
		   const char *tool, const struct cp_opts *o);

#endif
