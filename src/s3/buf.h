/* A growable byte string with a hard size limit, for building requests
 * and holding bounded responses.  Errors are sticky: after the first
 * failed append every later one fails too, and s3_buf_err() says why, so
 * a builder can append many pieces and check once. */
#ifndef RDS3_BUF_H
#define RDS3_BUF_H

#include <stdbool.h>
#include <stddef.h>

struct s3_buf {
	char *p;    /* NUL-terminated when not NULL */
	size_t len;
	size_t cap;
	size_t max; /* appends past this many bytes fail with -E2BIG */
	int err;    /* 0, -ENOMEM or -E2BIG */
};

#define S3_BUF_DEFAULT_MAX ((size_t)16 << 20)

/* Starts an empty buffer that may grow to max bytes (0: the default). */
void s3_buf_init(struct s3_buf *b, size_t max);

/* Frees the storage; the buffer is empty and usable again. */
void s3_buf_release(struct s3_buf *b);

/* Empties the buffer, keeping its storage; clears a sticky error. */
void s3_buf_reset(struct s3_buf *b);

/* Append n bytes / a string / one char / printf output.  Return 0 or the
 * sticky error (-ENOMEM, -E2BIG). */
int s3_buf_add(struct s3_buf *b, const void *p, size_t n);
int s3_buf_adds(struct s3_buf *b, const char *s);
int s3_buf_addc(struct s3_buf *b, char c);
int s3_buf_printf(struct s3_buf *b, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* The contents as a string: "" for an empty buffer, never NULL. */
const char *s3_buf_str(const struct s3_buf *b);

/* The sticky error, 0 if every append succeeded. */
static inline int s3_buf_err(const struct s3_buf *b)
{
	return b->err;
}

#endif
