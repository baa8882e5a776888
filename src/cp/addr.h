/* scp's address forms: a local path, [user@]host:path with an IPv6
 * address in brackets ([user@][v6addr]:path), or the URI
 * scp://[user@]host[:port][/path]. */
#ifndef RDX_CP_ADDR_H
#define RDX_CP_ADDR_H

#include <stdbool.h>

struct cp_addr {
	bool remote;
	char *user; /* NULL: from ~/.ssh/config or the local user */
	char *host; /* remote only; brackets removed */
	char *path; /* never NULL; "" for host: (the remote home directory) */
	char *port; /* an scp:// URI's SSH port, NULL otherwise */
};

/* Parses arg as scp does: remote when a ':' comes before any '/' (or the
 * arg starts with "[addr]:"), local otherwise ("./a:b" is local).  Returns
 * 0, -EINVAL for a malformed remote address (empty host, unclosed
 * bracket), or -ENOMEM. */
int cp_addr_parse(const char *arg, struct cp_addr *out);

void cp_addr_release(struct cp_addr *a);

/* The last path component of path ("" when it ends in '/'), pointing into
 * path. */
const char *cp_basename(const char *path);

#endif
