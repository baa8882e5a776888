/* Parsing of sizes, counts and seconds given by users; hexadecimal. */
#include "core/hex.h"
#include "core/units.h"
#include "tap.h"

#include <errno.h>
#include <string.h>

static void test_hex(void)
{
	const unsigned char in[4] = { 0x00, 0x9f, 0xa0, 0xff };
	unsigned char out[4];
	char h[9];

	rdx_hex_encode(in, sizeof(in), h);
	CHECK(!strcmp(h, "009fa0ff"), "hex: lower case, NUL-terminated");
	CHECK(rdx_hex_decode(h, 4, out) == 0 && !memcmp(in, out, 4), "hex: round trip");
	CHECK(rdx_hex_decode("009FA0FF", 4, out) == -EINVAL, "hex: upper case refused");
	CHECK(rdx_hex_decode("009fa0f", 4, out) == -EINVAL, "hex: too few digits refused");
	CHECK(rdx_hex_decode("009fa0fg", 4, out) == -EINVAL, "hex: a non-digit refused");
	CHECK(rdx_hex_is("0123456789abcdef", 16) && !rdx_hex_is("01x", 3) &&
	      !rdx_hex_is("01", 3), "hex: rdx_hex_is stops at a non-digit or the end");
}

int main(void)
{
	uint64_t v;
	char buf[32];

	test_hex();

	CHECK(rdx_parse_size("4096", &v) == 0 && v == 4096, "plain bytes");
	CHECK(rdx_parse_size("64K", &v) == 0 && v == 65536, "K");
	CHECK(rdx_parse_size("1M", &v) == 0 && v == 1048576, "M");
	CHECK(rdx_parse_size("2GiB", &v) == 0 && v == 2147483648ull, "GiB");
	CHECK(rdx_parse_size("1t", &v) == 0 && v == 1ull << 40, "lower-case t");
	CHECK(rdx_parse_size("", &v) == -EINVAL, "empty rejected");
	CHECK(rdx_parse_size("-1", &v) == -EINVAL, "negative rejected");
	CHECK(rdx_parse_size("1X", &v) == -EINVAL, "unknown suffix rejected");
	CHECK(rdx_parse_size("1MM", &v) == -EINVAL, "trailing junk rejected");
	CHECK(rdx_parse_size("99999999999999999999", &v) == -ERANGE, "overflow rejected");
	CHECK(rdx_parse_size("20000000000T", &v) == -ERANGE, "overflow by suffix rejected");

	CHECK(rdx_parse_uint("16", 2, 1024, &v) == 0 && v == 16, "count in range");
	CHECK(rdx_parse_uint("1", 2, 1024, &v) == -ERANGE, "count below range");
	CHECK(rdx_parse_uint("1025", 2, 1024, &v) == -ERANGE, "count above range");
	CHECK(rdx_parse_uint("12a", 2, 1024, &v) == -EINVAL, "count with junk");
	CHECK(rdx_parse_uint(" 3", 2, 1024, &v) == -EINVAL, "count with a space");

	CHECK(rdx_parse_seconds("10", &v) == 0 && v == 10000, "seconds");
	CHECK(rdx_parse_seconds("2.5", &v) == 0 && v == 2500, "fractional seconds");
	CHECK(rdx_parse_seconds("0.1234", &v) == 0 && v == 123, "sub-millisecond cut");
	CHECK(rdx_parse_seconds("3s", &v) == 0 && v == 3000, "s suffix");
	CHECK(rdx_parse_seconds("3m", &v) == -EINVAL, "other suffix rejected");
	CHECK(rdx_parse_seconds("99999999999", &v) == -ERANGE, "absurd duration rejected");

	CHECK(strcmp(rdx_fmt_bytes(buf, sizeof(buf), 512), "512 B") == 0, "format bytes");
	CHECK(strcmp(rdx_fmt_bytes(buf, sizeof(buf), 1536), "1.50 KiB") == 0, "format KiB");
	return TAP_DONE();
}
