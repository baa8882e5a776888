#include "cp/shquote.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static void put(struct cp_cmd *c, const char *s, size_t n)
{
	if (c->err)
		return;
	if (c->len + n + 1 > c->cap) {
		size_t cap = c->cap ? c->cap : 256;
		char *p;

		while (cap < c->len + n + 1)
			cap *= 2;
		p = realloc(c->buf, cap);
		if (!p) {
			c->err = -ENOMEM;
			return;
		}
		c->buf = p;
		c->cap = cap;
	}
	memcpy(c->buf + c->len, s, n);
	c->len += n;
	c->buf[c->len] = '\0';
}

void cp_cmd_raw(struct cp_cmd *c, const char *s)
{
	put(c, s, strlen(s));
}

void cp_cmd_quoted(struct cp_cmd *c, const char *s)
{
	put(c, "'", 1);
	for (;;) {
		const char *q = strchr(s, '\'');

		if (!q) {
			put(c, s, strlen(s));
			break;
		}
		put(c, s, (size_t)(q - s));
		put(c, "'\\''", 4);
		s = q + 1;
	}
	put(c, "'", 1);
}

const char *cp_cmd_str(const struct cp_cmd *c)
{
	return c->err ? NULL : c->buf ? c->buf : "";
}

void cp_cmd_release(struct cp_cmd *c)
{
	free(c->buf);
	memset(c, 0, sizeof(*c));
}
