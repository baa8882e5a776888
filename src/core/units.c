#include "core/units.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int parse_digits(const char *s, uint64_t *val, const char **end)
{
	uint64_t v = 0;
	const char *p = s;

	if (!isdigit((unsigned char)*p))
		return -EINVAL;
	for (; isdigit((unsigned char)*p); p++) {
		unsigned d = (unsigned)(*p - '0');

		if (v > (UINT64_MAX - d) / 10)
			return -ERANGE;
		v = v * 10 + d;
	}
	*val = v;
	*end = p;
	return 0;
}

int rdx_parse_size(const char *s, uint64_t *out)
{
	const char *p;
	uint64_t v, mult = 1;
	int ret;

	ret = parse_digits(s, &v, &p);
	if (ret)
		return ret;
	switch (toupper((unsigned char)*p)) {
	case 'T':
		mult <<= 10;
		/* fallthrough */
	case 'G':
		mult <<= 10;
		/* fallthrough */
	case 'M':
		mult <<= 10;
		/* fallthrough */
	case 'K':
		mult <<= 10;
		p++;
		if (*p == 'i')
			p++;
		if (*p == 'B')
			p++;
		break;
	case 'B':
		p++;
		break;
	default:
		break;
	}
	if (*p)
		return -EINVAL;
	if (v > UINT64_MAX / mult)
		return -ERANGE;
	*out = v * mult;
	return 0;
}

int rdx_parse_uint(const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
	const char *p;
	uint64_t v;
	int ret;

	ret = parse_digits(s, &v, &p);
	if (ret)
		return ret;
	if (*p)
		return -EINVAL;
	if (v < min || v > max)
		return -ERANGE;
	*out = v;
	return 0;
}

int rdx_parse_seconds(const char *s, uint64_t *ms)
{
	const char *p;
	uint64_t whole, frac = 0, scale = 1000;
	int ret;

	ret = parse_digits(s, &whole, &p);
	if (ret)
		return ret;
	if (*p == '.') {
		for (p++; isdigit((unsigned char)*p); p++) {
			if (scale > 1) {
				scale /= 10;
				frac += (uint64_t)(*p - '0') * scale;
			}
		}
	}
	if (*p == 's')
		p++;
	if (*p)
		return -EINVAL;
	if (whole > 100u * 365 * 86400)
		return -ERANGE;
	*ms = whole * 1000 + frac;
	return 0;
}

char *rdx_fmt_bytes(char *buf, size_t len, uint64_t bytes)
{
	static const char *const unit[] = { "B", "KiB", "MiB", "GiB", "TiB", "PiB" };
	double v = (double)bytes;
	int i = 0;

	while (v >= 1024 && i < 5) {
		v /= 1024;
		i++;
	}
	if (i == 0)
		snprintf(buf, len, "%llu B", (unsigned long long)bytes);
	else
		snprintf(buf, len, "%.2f %s", v, unit[i]);
	return buf;
}

void rdx_deadline_in(struct timespec *dl, uint64_t ms)
{
	clock_gettime(CLOCK_REALTIME, dl);
	dl->tv_sec += (time_t)(ms / 1000);
	dl->tv_nsec += (long)(ms % 1000) * 1000000;
	if (dl->tv_nsec >= 1000000000) {
		dl->tv_sec++;
		dl->tv_nsec -= 1000000000;
	}
}

uint64_t rdx_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}
