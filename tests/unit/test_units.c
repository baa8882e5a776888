/* Parsing of sizes, counts and seconds given by users. */
#include "core/units.h"
#include "tap.h"

#include <errno.h>
#include <string.h>

int main(void)
{
	uint64_t v;
	char buf[32];

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
