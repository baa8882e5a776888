/* One keyword of an ssh_config(5) file, for what libssh parses but does
 * not tell (StrictHostKeyChecking). */
#ifndef RDX_CP_SSHCFG_H
#define RDX_CP_SSHCFG_H

#include <stddef.h>

/* The value ssh would take for keyword (case-insensitive) when connecting
 * to host as given on the command line: the first one, before any Host
 * line or in a Host block one of whose patterns ('*', '?', '!'-negated)
 * matches host and none of whose negated ones does.  "Match" blocks are
 * not evaluated (taken as not matching), "Include" is not followed.
 * Returns 1 with the value in out, 0 when the file does not say (or does
 * not exist), -errno when it cannot be read. */
int cp_sshcfg_value(const char *path, const char *host, const char *keyword, char *out,
		    size_t len);

#endif
