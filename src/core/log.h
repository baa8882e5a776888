/* Human-readable diagnostics on stderr, one line each, prefixed with the
 * tool's name ("rdsend: cannot open 'x': No such file or directory").
 * Thread-safe: each call is written with a single write(2).  Whatever the
 * message quotes (file names, keys, a far host's words) is written with
 * its control characters as '?' (rdx_printable).
 */
#ifndef RDX_LOG_H
#define RDX_LOG_H

#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

/* Set while a progress line (progress.c) is on the terminal: the next
 * message clears it first, so that it starts a line of its own. */
extern atomic_bool rdx_log_bar;

/* Sets the prefix and how chatty rdx_info() is (0 = only errors/warnings;
 * below 0, only errors: rdx_warn() is quiet too). */
void rdx_log_init(const char *progname, int verbosity);

void rdx_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void rdx_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Copies n bytes of text from elsewhere (a far host, a server) into dst
 * (cap bytes, NUL-terminated) for a message: control characters (C0 but
 * tab, DEL, and C1 written as UTF-8) become '?', so that no escape
 * sequence or carriage return reaches the terminal.  Returns dst. */
char *rdx_printable(char *dst, size_t cap, const char *src, size_t n);

/* Printed only when the verbosity is at least level. */
void rdx_info(int level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* -vv: a line stamped with the seconds since the first rdx_log_init()
 * ("rdrecv: [0.412 s] rdma: registered 16384 KiB of slots in 31 ms"), to
 * see where start-up and tear-down time goes. */
void rdx_phase(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Names the calling thread ("rdx-recv0") for top -H, perf and gdb; the
 * name is cut to the kernel's 15 bytes. */
void rdx_thread_name(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
