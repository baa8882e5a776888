/* rdcp's same-host copy: both SRC and DST local, no SSH and no network,
 * the kernel copying (copy_file_range, else read/write) into a temporary
 * that only a complete copy renames to the final name. */
#ifndef RDX_CP_LOCAL_H
#define RDX_CP_LOCAL_H

#include "cp/copy.h"

/* Copies the file src to dst; a dst that is a directory gets src's base
 * name in it, as cp does.  A new file gets src's permission bits less the
 * umask, an existing one keeps its own; o->xo.fsync syncs the file and the
 * directory; *o->xo.interrupted stops the copy.  Prints one error line on
 * failure and leaves no temporary.  Returns 0 or a negative error for
 * rdx_exit_code(). */
int cp_local_copy(const struct cp_opts *o, const char *src, const char *dst,
		  struct rdx_xfer_stats *st);

/* -r with both ends local: src packed and unpacked through one pipe by
 * the same code as a remote tree copy (src/core/tree.h), so the result
 * (names checked, files complete or absent, metadata) is the same.
 * Returns 0 or a negative error for rdx_exit_code(), errors printed. */
int cp_local_tree(const struct cp_opts *o, const char *src, const char *dst,
		  struct rdx_xfer_stats *st);

#endif
