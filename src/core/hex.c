#include "core/hex.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>

void rdx_hex_encode(const void *in, size_t n, char *out)
{
	static const char digits[] = RDX_HEX_DIGITS;
	const uint8_t *b = in;

	for (size_t i = 0; i < n; i++) {
		out[2 * i] = digits[b[i] >> 4];
		out[2 * i + 1] = digits[b[i] & 15];
	}
	out[2 * n] = '\0';
}

static int digit(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

int rdx_hex_decode(const char *h, size_t n, void *out)
{
	uint8_t *b = out;

	for (size_t i = 0; i < n; i++) {
		int hi = digit(h[2 * i]),
		    lo = hi < 0 ? -1 : digit(h[2 * i + 1]);

		if (hi < 0 || lo < 0)
			return -EINVAL;
		b[i] = (uint8_t)(hi << 4 | lo);
	}
	return 0;
}

bool rdx_hex_is(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (digit(s[i]) < 0)
			return false;
	return true;
}

int rdx_hex_digit(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}
