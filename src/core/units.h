/* Parsing and printing of sizes, counts and durations given by users. */
#ifndef RDX_UNITS_H
#define RDX_UNITS_H

#include <stddef.h>
#include <stdint.h>

/* Parses "4096", "64K", "1M", "2GiB", "1T" (binary multiples) into *out.
 * Returns 0, or -EINVAL for malformed text and -ERANGE for overflow. */
int rdx_parse_size(const char *s, uint64_t *out);

/* Parses a decimal integer in [min, max] into *out.
 * Returns 0, -EINVAL for malformed text, -ERANGE outside the range. */
int rdx_parse_uint(const char *s, uint64_t min, uint64_t max, uint64_t *out);

/* Parses seconds ("10", "2.5", "3s") into milliseconds.
 * Returns 0, -EINVAL or -ERANGE. */
int rdx_parse_seconds(const char *s, uint64_t *ms);

/* Formats a byte count for humans ("1.50 GiB") into buf; returns buf. */
char *rdx_fmt_bytes(char *buf, size_t len, uint64_t bytes);

/* Monotonic clock in nanoseconds. */
uint64_t rdx_now_ns(void);

/* Now plus ms on CLOCK_REALTIME: a deadline for pthread_cond_timedwait. */
struct timespec;
void rdx_deadline_in(struct timespec *dl, uint64_t ms);

#endif
