/*
 * badpeer - a misbehaving rdxfer sender for the CLI fault tests.
 *
 * Usage: badpeer MODE HOST PORT
 *
 *   garbage      4 KiB of random bytes
 *   short-hello  a valid HELLO header (len 40), then only 10 payload bytes
 *   huge-len     a HELLO header with len 0xFFFFFFFF, then a few bytes
 *   bad-version  a complete 40-byte HELLO with version 99
 *   silent       connect and send nothing for 30 s
 *
 * After sending, every mode but short-hello lingers until the receiver
 * closes the connection (at most 30 s for silent, 3 s otherwise), so the
 * receiver has to reject what it got rather than notice an early EOF.
 * short-hello closes at once: a truncated frame followed by EOF.
 *
 * Exit codes: 0 sent (whatever the receiver did afterwards), 1 could not
 * connect or send, 2 usage.  Sockets only; nothing from src/ is used so
 * this keeps working whatever state the project code is in.
 *
 * Frame header (docs/PROTOCOL.md), 24 bytes, big-endian:
 *   type u8 | flags u8 | stream u16 | len u32 | plain_len u32 |
 *   reserved u32 | seq u64
 * Sender HELLO payload: "RDXF" | version u16 | reserved u16 | nonce[32].
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#define HDR_LEN 24
#define HELLO_LEN 40
#define FRAME_HELLO 1

static void put_be16(unsigned char *p, uint16_t v)
{
	p[0] = (unsigned char)(v >> 8);
	p[1] = (unsigned char)v;
}

static void put_be32(unsigned char *p, uint32_t v)
{
	p[0] = (unsigned char)(v >> 24);
	p[1] = (unsigned char)(v >> 16);
	p[2] = (unsigned char)(v >> 8);
	p[3] = (unsigned char)v;
}

/* Fills buf with bytes from /dev/urandom, or from rand() if that fails. */
static void fill_random(unsigned char *buf, size_t n)
{
	size_t got = 0;
	int fd = open("/dev/urandom", O_RDONLY);

	if (fd >= 0) {
		while (got < n) {
			ssize_t r = read(fd, buf + got, n - got);

			if (r < 0 && errno == EINTR)
				continue;
			if (r <= 0)
				break;
			got += (size_t)r;
		}
		close(fd);
	}
	if (got < n) {
		srand((unsigned)time(NULL) ^ (unsigned)getpid());
		for (; got < n; got++)
			buf[got] = (unsigned char)rand();
	}
}

/* Writes a 24-byte frame header of the given type and payload length. */
static void make_hdr(unsigned char *h, uint8_t type, uint32_t len)
{
	memset(h, 0, HDR_LEN);
	h[0] = type;
	h[1] = 0;		/* flags */
	put_be16(h + 2, 0);	/* stream 0 = control */
	put_be32(h + 4, len);
	/* plain_len, reserved and seq stay 0 */
}

/* Writes a 40-byte sender HELLO payload announcing the given version. */
static void make_hello(unsigned char *p, uint16_t version)
{
	memcpy(p, "RDXF", 4);
	put_be16(p + 4, version);
	put_be16(p + 6, 0);
	fill_random(p + 8, 32);
}

/* Sends all n bytes; returns 0, or -1 with errno set. */
static int send_full(int fd, const unsigned char *buf, size_t n)
{
	while (n > 0) {
		ssize_t w = send(fd, buf, n, MSG_NOSIGNAL);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -1;
		buf += w;
		n -= (size_t)w;
	}
	return 0;
}

/* Connects to host:port (any address family); returns the fd or -1. */
static int dial(const char *host, const char *port)
{
	struct addrinfo hints, *res, *ai;
	char h[256];
	size_t hl = strlen(host);
	int fd = -1, rc;

	/* Accept "[::1]" as well as "::1". */
	if (hl >= 2 && hl < sizeof(h) && host[0] == '[' && host[hl - 1] == ']') {
		memcpy(h, host + 1, hl - 2);
		h[hl - 2] = '\0';
		host = h;
	}
	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	rc = getaddrinfo(host, port, &hints, &res);
	if (rc != 0) {
		fprintf(stderr, "badpeer: cannot resolve '%s': %s\n", host,
			gai_strerror(rc));
		return -1;
	}
	for (ai = res; ai; ai = ai->ai_next) {
		fd = socket(ai->ai_family, ai->ai_socktype, ai->ai_protocol);
		if (fd < 0)
			continue;
		if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0)
			break;
		close(fd);
		fd = -1;
	}
	if (fd < 0)
		fprintf(stderr, "badpeer: cannot connect to %s port %s: %s\n",
			host, port, strerror(errno));
	freeaddrinfo(res);
	return fd;
}

/*
 * Waits until the peer closes (or resets) the connection or ms elapse,
 * discarding whatever it sends.  Returns 1 if the peer closed, else 0.
 */
static int linger_until_closed(int fd, int ms)
{
	unsigned char sink[4096];
	struct timespec start, now;

	clock_gettime(CLOCK_MONOTONIC, &start);
	for (;;) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		long left;
		int r;

		clock_gettime(CLOCK_MONOTONIC, &now);
		left = ms - ((now.tv_sec - start.tv_sec) * 1000L +
			     (now.tv_nsec - start.tv_nsec) / 1000000L);
		if (left <= 0)
			return 0;
		r = poll(&pfd, 1, (int)left);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return 0;
		ssize_t n = recv(fd, sink, sizeof(sink), 0);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return 1;
	}
}

static int usage(void)
{
	fprintf(stderr, "usage: badpeer garbage|short-hello|huge-len|"
			"bad-version|silent HOST PORT\n");
	return 2;
}

int main(int argc, char **argv)
{
	unsigned char buf[4096];
	const char *mode;
	size_t n = 0;
	int fd, linger_ms = 3000;

	if (argc != 4)
		return usage();
	mode = argv[1];
	if (strcmp(mode, "garbage") && strcmp(mode, "short-hello") &&
	    strcmp(mode, "huge-len") && strcmp(mode, "bad-version") &&
	    strcmp(mode, "silent"))
		return usage();

	signal(SIGPIPE, SIG_IGN);
	fd = dial(argv[2], argv[3]);
	if (fd < 0)
		return 1;

	if (!strcmp(mode, "garbage")) {
		fill_random(buf, sizeof(buf));
		n = sizeof(buf);
	} else if (!strcmp(mode, "short-hello")) {
		make_hdr(buf, FRAME_HELLO, HELLO_LEN);
		make_hello(buf + HDR_LEN, 1);
		n = HDR_LEN + 10;
		linger_ms = 0;
	} else if (!strcmp(mode, "huge-len")) {
		make_hdr(buf, FRAME_HELLO, 0xFFFFFFFFu);
		make_hello(buf + HDR_LEN, 1);
		fill_random(buf + HDR_LEN + HELLO_LEN, 64);
		n = HDR_LEN + HELLO_LEN + 64;
	} else if (!strcmp(mode, "bad-version")) {
		make_hdr(buf, FRAME_HELLO, HELLO_LEN);
		make_hello(buf + HDR_LEN, 99);
		n = HDR_LEN + HELLO_LEN;
	} else {
		linger_ms = 30000;
	}

	if (n > 0 && send_full(fd, buf, n) < 0) {
		fprintf(stderr, "badpeer: send: %s\n", strerror(errno));
		close(fd);
		return 1;
	}
	if (linger_ms > 0)
		linger_until_closed(fd, linger_ms);
	close(fd);
	return 0;
}
