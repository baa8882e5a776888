/* Quoting for the far side's POSIX shell: every word rdcp puts on a
 * remote command line goes through here, so no path can inject. */
#ifndef RDX_CP_SHQUOTE_H
#define RDX_CP_SHQUOTE_H

#include <stddef.h>

/* A growing command line. */
struct cp_cmd {
	char *buf;
	size_t len, cap;
	int err; /* -ENOMEM once an append failed; later appends do nothing */
};

/* Appends s as is (for rdcp's own fixed words and shell syntax). */
void cp_cmd_raw(struct cp_cmd *c, const char *s);

/* Appends s as one single-quoted word: 'it'\''s' — inside single quotes
 * a POSIX shell gives no character a meaning but the quote itself, so
 * spaces, $, ;, `, \, newlines and non-ASCII bytes stay literal. */
void cp_cmd_quoted(struct cp_cmd *c, const char *s);

/* Returns the finished line (owned by c), or NULL after -ENOMEM. */
const char *cp_cmd_str(const struct cp_cmd *c);

void cp_cmd_release(struct cp_cmd *c);

#endif
