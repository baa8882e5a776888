/* Error codes and exit statuses shared by every rdxfer tool.
 *
 * The core returns 0 or a negative number: -errno for system errors, or one
 * of the RDX_E* codes below (all beyond the errno range).  Only src/cmd turns
 * them into exit statuses, through rdx_exit_code().
 */
#ifndef RDX_ERR_H
#define RDX_ERR_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>

enum rdx_errcode {
	RDX_EBASE = 10000,
	RDX_EPROTO,	/* peer broke the wire protocol */
	RDX_EVERSION,	/* peer speaks an incompatible protocol version */
	RDX_EAUTH,	/* authentication failed */
	RDX_EREMOTE,	/* peer reported an error (its text was logged) */
	RDX_EINTEGRITY, /* hash, length or AEAD tag mismatch */
	RDX_ETIMEOUT,	/* peer silent for longer than --timeout */
	RDX_ECONNECT,	/* could not connect or peer went away */
	RDX_EINTR,	/* interrupted by a signal */
	RDX_EUSAGE,	/* bad option or argument */
	RDX_ENOTSUP,	/* feature not available in this build/host */
	RDX_ELOCAL,	/* local file I/O failed (the message says which) */
	RDX_EMAX
};

/* Exit statuses, documented in every man page. */
enum rdx_exit {
	RDX_EXIT_OK = 0,
	RDX_EXIT_FAIL = 1,
	RDX_EXIT_USAGE = 2,
	RDX_EXIT_CONN = 3,
	RDX_EXIT_IO = 4,
	RDX_EXIT_REMOTE = 5,
	RDX_EXIT_INTEGRITY = 6,
	RDX_EXIT_INTR = 130,
};

/* Names an error returned by the core (negative) or an errno (positive). */
const char *rdx_strerror(int err);

/* Maps a core error to the exit status a tool should return. */
int rdx_exit_code(int err);

/* The one "first failure wins, with its message" recorder: records err
 * in *slot and the message (fmt) in why[cap] when *slot holds no failure
 * yet, or when replace (a better explained one).  The caller holds
 * whatever lock guards slot.  Returns true when this failure was
 * recorded. */
bool rdx_fail_record(int *slot, char *why, size_t cap, bool replace, int err,
		     const char *fmt, va_list ap) __attribute__((format(printf, 6, 0)));

#endif
