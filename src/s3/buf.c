#include "s3/buf.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void s3_buf_init(struct s3_buf *b, size_t max)
{
	*b = (struct s3_buf){ .max = max ? max : S3_BUF_DEFAULT_MAX };
}

void s3_buf_release(struct s3_buf *b)
{
	size_t max = b->max;

	free(b->p);
	s3_buf_init(b, max);
}

void s3_buf_reset(struct s3_buf *b)
{
	b->len = 0;
	b->err = 0;
	if (b->p)
		b->p[0] = '\0';
}

static int grow(struct s3_buf *b, size_t n)
{
	size_t want, cap;
	char *p;

	if (b->err)
		return b->err;
	if (n > b->max || b->len > b->max - n) {
		b->err = -E2BIG;
		return b->err;
	}
	want = b->len + n + 1;
	if (want <= b->cap)
		return 0;
	cap = b->cap ? b->cap : 64;
	while (cap < want)
		cap = cap > ((size_t)-1) / 2 ? want : cap * 2;
	p = realloc(b->p, cap);
	if (!p) {
		b->err = -ENOMEM;
		return b->err;
	}
	b->p = p;
	b->cap = cap;
	return 0;
}

int s3_buf_add(struct s3_buf *b, const void *p, size_t n)
{
	int ret = grow(b, n);

	if (ret)
		return ret;
	if (n)
		memcpy(b->p + b->len, p, n);
	b->len += n;
	b->p[b->len] = '\0';
	return 0;
}

int s3_buf_adds(struct s3_buf *b, const char *s)
{
	return s3_buf_add(b, s, strlen(s));
}

int s3_buf_addc(struct s3_buf *b, char c)
{
	return s3_buf_add(b, &c, 1);
}

int s3_buf_printf(struct s3_buf *b, const char *fmt, ...)
{
	va_list ap;
	int n, ret;

	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0)
		return b->err ? b->err : (b->err = -EINVAL);
	ret = grow(b, (size_t)n);
	if (ret)
		return ret;
	va_start(ap, fmt);
	vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	b->len += (size_t)n;
	return 0;
}

const char *s3_buf_str(const struct s3_buf *b)
{
	return b->p ? b->p : "";
}
