/* Lower-case hexadecimal: the one encoder and decoder of the suite
 * (digests, ETags, upload ids, keys). */
#ifndef RDX_HEX_H
#define RDX_HEX_H

#include <stdbool.h>
#include <stddef.h>

#define RDX_HEX_DIGITS "0123456789abcdef"

/* Writes the n bytes of in as 2n lower-case digits and a NUL into out
 * (2n + 1 bytes). */
void rdx_hex_encode(const void *in, size_t n, char *out);

/* Reads 2n lower-case digits of h into the n bytes of out.  Returns 0, or
 * -EINVAL when h has fewer digits or another character among them. */
int rdx_hex_decode(const char *h, size_t n, void *out);

/* The value of one hex digit of either case, or -1. */
int rdx_hex_digit(char c);

/* Whether the first n characters of s are all lower-case hex digits. */
bool rdx_hex_is(const char *s, size_t n);

#endif
