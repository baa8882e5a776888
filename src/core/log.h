/* Human-readable diagnostics on stderr, one line each, prefixed with the
 * tool's name ("rdsend: cannot open 'x': No such file or directory").
 * Thread-safe: each call is written with a single write(2).
 */
#ifndef RDX_LOG_H
#define RDX_LOG_H

#include <stdarg.h>

/* Sets the prefix and how chatty rdx_info() is (0 = only errors/warnings). */
void rdx_log_init(const char *progname, int verbosity);

void rdx_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void rdx_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Printed only when the verbosity is at least level. */
void rdx_info(int level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

#endif
