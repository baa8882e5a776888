#include "core/log.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char *log_prog = "rdx";
static int log_level;
static struct timespec log_t0;
atomic_bool rdx_log_bar;

void rdx_log_init(const char *progname, int verbosity)
{
	const char *slash = strrchr(progname, '/');

	log_prog = slash ? slash + 1 : progname;
	log_level = verbosity;
	if (!log_t0.tv_sec && !log_t0.tv_nsec)
		clock_gettime(CLOCK_MONOTONIC, &log_t0);
}

static void log_line(const char *tag, const char *fmt, va_list ap)
{
	char buf[1024];
	int n;

	n = snprintf(buf, sizeof(buf), "%s%s: %s",
		     atomic_exchange(&rdx_log_bar, false) ? "\r\033[K" : "", log_prog, tag);
	if (n < 0 || (size_t)n >= sizeof(buf))
		n = 0;
	vsnprintf(buf + n, sizeof(buf) - (size_t)n - 1, fmt, ap);
	/* A message quotes names and text from elsewhere (files, keys, a far
	 * host, a server): nothing in it may drive the terminal. */
	rdx_printable(buf + n, sizeof(buf) - (size_t)n, buf + n, strlen(buf + n));
	n = (int)strlen(buf);
	buf[n++] = '\n';
	/* One write keeps lines from different threads whole. */
	if (write(STDERR_FILENO, buf, (size_t)n) < 0)
		return;
}

void rdx_error(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_line("", fmt, ap);
	va_end(ap);
}

void rdx_warn(const char *fmt, ...)
{
	va_list ap;

	if (log_level < 0)
		return;
	va_start(ap, fmt);
	log_line("warning: ", fmt, ap);
	va_end(ap);
}

void rdx_info(int level, const char *fmt, ...)
{
	va_list ap;

	if (log_level < level)
		return;
	va_start(ap, fmt);
	log_line("", fmt, ap);
	va_end(ap);
}

void rdx_phase(const char *fmt, ...)
{
	struct timespec now;
	char tag[32];
	va_list ap;

	if (log_level < 2)
		return;
	clock_gettime(CLOCK_MONOTONIC, &now);
	snprintf(tag, sizeof(tag), "[%.3f s] ",
		 (double)(now.tv_sec - log_t0.tv_sec) +
			 (double)(now.tv_nsec - log_t0.tv_nsec) / 1e9);
	va_start(ap, fmt);
	log_line(tag, fmt, ap);
	va_end(ap);
}

char *rdx_printable(char *dst, size_t cap, const char *src, size_t n)
{
	size_t i = 0, o = 0;

	while (src && i < n && src[i] && o + 1 < cap) {
		unsigned char c = (unsigned char)src[i];

		if (c == 0xc2 && i + 1 < n && (unsigned char)src[i + 1] >= 0x80 &&
		    (unsigned char)src[i + 1] <= 0x9f) { /* U+0080..U+009F */
			dst[o++] = '?';
			i += 2;
			continue;
		}
		dst[o++] = (c < 0x20 && c != '\t') || c == 0x7f ? '?' : (char)c;
		i++;
	}
	if (cap)
		dst[o] = '\0';
	return dst;
}

void rdx_thread_name(const char *fmt, ...)
{
	char name[16];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(name, sizeof(name), fmt, ap);
	va_end(ap);
	pthread_setname_np(pthread_self(), name);
}
