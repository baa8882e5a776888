#include "io.h"

#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <unistd.h>

/* Waits until fd is ready for events or *stop is set. */
static int wait_ready(int fd, short events, const atomic_int *stop)
{
	struct pollfd p = { .fd = fd, .events = events };

	for (;;) {
		int n;

		if (atomic_load(stop))
			return -ECANCELED;
		n = poll(&p, 1, 200);
		if (n > 0)
			return 0;
		if (n < 0 && errno != EINTR)
			return -errno;
	}
}

/* The loop behind rdx_read_full and rdx_write_full, as OpenSSH's atomicio:
 * one place that knows about EINTR, EAGAIN and short counts. */
static ssize_t full_io(int fd, char *p, size_t len, const atomic_int *stop,
		       bool writing)
{
	size_t done = 0;

	while (done < len) {
		ssize_t n;

		if (stop) {
			int ret = wait_ready(fd, writing ? POLLOUT : POLLIN, stop);

			if (ret)
				return ret;
		}
		n = writing ? write(fd, p + done, len - done)
			    : read(fd, p + done, len - done);
		if (n == 0) {
			if (writing)
				return -EIO; /* no progress: never spin */
			break;
		}
		if (n < 0) {
			if (errno == EINTR || (stop && errno == EAGAIN))
				continue;
			return -errno;
		}
		done += (size_t)n;
	}
	return (ssize_t)done;
}

ssize_t rdx_read_full(int fd, void *buf, size_t len, const atomic_int *stop)
{
	return full_io(fd, buf, len, stop, false);
}

ssize_t rdx_write_full(int fd, const void *buf, size_t len,
		       const atomic_int *stop)
{
	return full_io(fd, (char *)buf, len, stop, true);
}

ssize_t rdx_pread_full(int fd, void *buf, size_t len, off_t off)
{
	char *p = buf;
	size_t done = 0;

	while (done < len) {
		ssize_t n = pread(fd, p + done, len - done, off + (off_t)done);

		if (n == 0)
			break;
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		done += (size_t)n;
	}
	return (ssize_t)done;
}

ssize_t rdx_pwrite_full(int fd, const void *buf, size_t len, off_t off)
{
	const char *p = buf;
	size_t done = 0;

	while (done < len) {
		ssize_t n = pwrite(fd, p + done, len - done, off + (off_t)done);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			return -EIO;
		done += (size_t)n;
	}
	return (ssize_t)done;
}
