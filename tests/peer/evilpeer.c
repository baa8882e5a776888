/*
 * evilpeer - a hostile rdxfer sender for the CLI tree tests: a far host
 * that knows the key and speaks the real protocol, but sends a tree
 * stream (pax archive) built to escape the receiver's destination.
 *
 * Usage: evilpeer dial HOST PORT ATTACK TOP      (key from RDX_KEY)
 *        evilpeer server ATTACK [ARGS...] -- PATH...
 *
 *   dial    connects to an `rdrecv -r PORT` on HOST and sends as TOP
 *   server  plays `rdsend --server ... -- PATH...` for an rdcp pull (a
 *           fake rdsend script runs `exec evilpeer server ATTACK "$@"`):
 *           reads the key from the first line of stdin, takes TOP from
 *           the basename of the last PATH, listens on port 0 (:: or
 *           0.0.0.0), prints "RDX-PORT N" on stdout, accepts one
 *           connection within 30 s and sends on it (the sender speaks
 *           first whichever side listens).  Other arguments are ignored.
 *
 * ATTACK (every regular file with data is followed by its hash entry):
 *   ok             TOP, a regular file holding "honest\n"
 *   ok-tree        directory TOP, file TOP/a holding "honest\n"
 *   other-top      a file named .bashrc ("evil\n") instead of TOP
 *   extra          TOP as in ok, then a top-level file .bashrc
 *   dotdot         directory TOP, then the file TOP/../.bashrc
 *   absolute:PATH  a file named PATH (absolute)
 *   symlink:TARGET directory TOP, symlink TOP/link -> TARGET, then the
 *                  file TOP/link/evil (written through the link)
 *   nested-file    directory TOP, then the file TOP/inner: something
 *                  below a name the receiver asked for as one file
 *   delete:NAME    ok-tree, then a removal entry (/.rdx-delete) of NAME
 *   list:LOGFILE   with SYNC|CHECKSUM: writes "ASKED" to LOGFILE, asks
 *                  for the receiver's listing of TOP (LIST_REQ), appends
 *                  "LISTED <type> <name>" for every record it gets, then
 *                  sends ok-tree
 * The evil files hold "evil\n".
 *
 * One stream, no compression, no encryption, 1 MiB slots.  After EOS the
 * receiver's DONE or ERROR is reported on stderr ("evilpeer: receiver
 * accepted the stream", "evilpeer: receiver: TEXT"); an ERROR at any
 * point is reported the same way.  Then it lingers until the receiver
 * closes (at most 3 s).  Every socket wait is bounded by 15 s.
 *
 * Exit codes: 0 the stream went out or the receiver refused it with an
 * ERROR, 1 could not connect, listen, handshake or send, 2 usage.
 * Sockets, libcrypto, xxhash, libarchive and the handshake of peer.h.
 *
 * Frame header (docs/PROTOCOL.md), 24 bytes, big-endian:
 *   type u8 | flags u8 | stream u16 | len u32 | plain_len u32 |
 *   reserved u32 | seq u64
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include <archive.h>
#include <archive_entry.h>
#include <openssl/crypto.h>
#include <xxhash.h>

#include "peer.h"

#define HDR_LEN	       PEER_HDR_LEN
#define CTRL_MAX       4096
#define SLOT_SIZE      (1u << 20)
#define IO_TIMEOUT_S   15
#define ACCEPT_WAIT_MS 30000
#define LINGER_MS      3000
#define LIST_FIXED     19
#define LIST_WINDOW    32
#define NAME_BUF       4096

#define OPT_TREE     2u
#define OPT_SYNC     4u
#define OPT_CHECKSUM 8u

enum {
	F_HELLO = 1,
	F_AUTH,
	F_ACCEPT,
	F_JOIN,
	F_DATA,
	F_EOS,
	F_DONE,
	F_ERROR,
	F_KEEPALIVE,
	F_LIST_REQ,
	F_LIST,
	F_LIST_ACK,
	F_LIST_END,
};

#define MTIME	    1700000000
#define HASH_NAME   "/.rdx-xxh3-128"
#define DELETE_NAME "/.rdx-delete"
#define HONEST	    "honest\n"
#define EVIL	    "evil\n"

/* Results of the steps that talk to the receiver. */
enum { STEP_OK = 0, STEP_REFUSED = 1, STEP_FAILED = -1 };

struct peer {
	int fd;
	const char *key;
	struct peer_hs hs;
};

/* The archive as it is built: a growing buffer. */
struct abuf {
	unsigned char *p;
	size_t len, cap;
};

/*
 * One entry of an attack: 'd' a directory, 'f' a regular file holding
 * data (and its hash entry), 'l' a symlink to PARAM, 'x' a removal entry
 * of PARAM.  In a name, a leading '@' stands for TOP; no name is PARAM.
 */
struct step {
	char kind;
	const char *name;
	const char *data;
};

struct attack {
	const char *name;
	bool param; /* given as NAME:PARAM */
	struct step steps[4];
};

static const struct attack attacks[] = {
	{"ok", false, {{'f', "@", HONEST}}},
	{"ok-tree", false, {{'d', "@"}, {'f', "@/a", HONEST}}},
	{"other-top", false, {{'f', ".bashrc", EVIL}}},
	{"extra", false, {{'f', "@", HONEST}, {'f', ".bashrc", EVIL}}},
	{"dotdot", false, {{'d', "@"}, {'f', "@/../.bashrc", EVIL}}},
	{"absolute", true, {{'f', NULL, EVIL}}},
	{"symlink",
	 true,
	 {{'d', "@"}, {'l', "@/link"}, {'f', "@/link/evil", EVIL}}},
	{"nested-file", false, {{'d', "@"}, {'f', "@/inner", EVIL}}},
	{"delete", true, {{'d', "@"}, {'f', "@/a", HONEST}, {'x', DELETE_NAME}}},
	/* the tree that follows the listing */
	{"list", true, {{'d', "@"}, {'f', "@/a", HONEST}}},
};

/* Sends one frame on stream 0 (flags 0); DATA passes plain_len = len. */
static int send_frame(int fd, uint8_t type, uint64_t seq, const void *payload,
		      uint32_t len)
{
	unsigned char h[HDR_LEN] = {0};

	h[0] = type;
	put_be32(h + 4, len);
	if (type == F_DATA)
		put_be32(h + 8, len);
	put_be64(h + 16, seq);
	if (send_full(fd, h, sizeof(h)) < 0)
		return -1;
	return len ? send_full(fd, payload, len) : 0;
}

/*
 * Reads the next frame that is not a KEEPALIVE: its type into *type, its
 * payload (at most CTRL_MAX bytes) into buf, its length into *len.
 * Returns 0, or -1 on EOF, timeout or a payload too long for control.
 */
static int recv_frame(int fd, uint8_t *type, unsigned char *buf, uint32_t *len)
{
	unsigned char h[HDR_LEN];

	do {
		if (recv_full(fd, h, sizeof(h)) < 0)
			return -1;
		*type = h[0];
		*len = get_be32(h + 4);
		if (*len > CTRL_MAX) {
			fprintf(stderr, "evilpeer: frame type %u of %u bytes\n",
				h[0], (unsigned)*len);
			return -1;
		}
		if (*len && recv_full(fd, buf, *len) < 0)
			return -1;
	} while (*type == F_KEEPALIVE);
	return 0;
}

/* Prints an ERROR frame's text (after its u32 code), unprintables as '?'. */
static void show_error(const unsigned char *p, uint32_t len)
{
	uint32_t i;

	fputs("evilpeer: receiver: ", stderr);
	for (i = 4; i < len; i++)
		fputc(p[i] >= 0x20 && p[i] < 0x7f ? p[i] : '?', stderr);
	fputc('\n', stderr);
}

/*
 * HELLO, the receiver's HELLO (its confirmation checked), AUTH with the
 * given option flags, ACCEPT (its MAC checked, one stream, no
 * encryption).  Returns STEP_OK, STEP_REFUSED after an ERROR, or
 * STEP_FAILED.
 */
static int handshake(struct peer *p, uint32_t flags)
{
	unsigned char buf[CTRL_MAX], opts[PEER_OPTS_LEN] = {0}, want[32];
	uint32_t len;
	uint8_t type;
	int ok;

	if (peer_hello(&p->hs, p->key, buf) < 0)
		return STEP_FAILED;
	if (send_frame(p->fd, F_HELLO, 0, buf, PEER_HELLO_S_LEN) < 0 ||
	    recv_frame(p->fd, &type, buf, &len) < 0) {
		fprintf(stderr, "evilpeer: no HELLO from the receiver\n");
		return STEP_FAILED;
	}
	if (type == F_ERROR) {
		show_error(buf, len);
		return STEP_REFUSED;
	}
	ok = type == F_HELLO ? peer_hello_reply(&p->hs, buf, len) : -1;
	if (ok < 0) {
		fprintf(stderr, "evilpeer: bad HELLO (type %u len %u)\n", type,
			(unsigned)len);
		return STEP_FAILED;
	}
	if (!ok) {
		fprintf(stderr, "evilpeer: wrong key (receiver's HELLO)\n");
		return STEP_FAILED;
	}

	/* slot_size, slots, streams, compress, encrypt, flags, size 0 */
	put_be32(opts, SLOT_SIZE);
	put_be32(opts + 4, 16);
	put_be16(opts + 8, 1);
	put_be32(opts + 12, flags);
	if (peer_auth(&p->hs, opts, buf) < 0)
		return STEP_FAILED;
	if (send_frame(p->fd, F_AUTH, 0, buf, PEER_AUTH_LEN) < 0 ||
	    recv_frame(p->fd, &type, buf, &len) < 0) {
		fprintf(stderr, "evilpeer: no answer to AUTH\n");
		return STEP_FAILED;
	}
	if (type == F_ERROR) {
		show_error(buf, len);
		return STEP_REFUSED;
	}
	if (type != F_ACCEPT || len != PEER_ACCEPT_LEN ||
	    peer_mac(&p->hs, "rdxfer-2 accept", buf, 8, want) < 0 ||
	    CRYPTO_memcmp(want, buf + 8, 32)) {
		fprintf(stderr, "evilpeer: bad ACCEPT (type %u len %u)\n", type,
			(unsigned)len);
		return STEP_FAILED;
	}
	if (get_be16(buf) != 1 || buf[2]) {
		fprintf(stderr, "evilpeer: the receiver wants %u streams%s\n",
			get_be16(buf), buf[2] ? " and encryption" : "");
		return STEP_FAILED;
	}
	return STEP_OK;
}

/* Appends one line to the log; returns 0 or -1. */
static int log_line(const char *path, const char *line, size_t n)
{
	int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
	int ret;

	if (fd < 0) {
		fprintf(stderr, "evilpeer: cannot open '%s': %s\n", path,
			strerror(errno));
		return -1;
	}
	ret = write(fd, line, n) == (ssize_t)n ? 0 : -1;
	close(fd);
	return ret;
}

/* Logs every record of one LIST payload; returns 0, or -1 if malformed. */
static int log_records(const char *logfile, const unsigned char *p,
		       uint32_t len)
{
	char line[CTRL_MAX + 16];
	uint32_t off = 0;

	while (off < len) {
		uint16_t nlen, i;
		size_t extra, n;

		if (len - off < LIST_FIXED)
			return -1;
		nlen = get_be16(p + off + 17);
		extra = p[off] == 'F' ? 16 : 0;
		if (len - off - LIST_FIXED < nlen + extra)
			return -1;
		n = (size_t)snprintf(line, sizeof(line), "LISTED %c ",
				     p[off] >= 0x21 && p[off] < 0x7f ? p[off]
								     : '?');
		for (i = 0; i < nlen; i++) {
			unsigned char c = p[off + LIST_FIXED + i];

			line[n++] = c >= 0x20 && c != 0x7f ? (char)c : '?';
		}
		line[n++] = '\n';
		if (log_line(logfile, line, n) < 0)
			return -1;
		off += LIST_FIXED + nlen + (uint32_t)extra;
	}
	return 0;
}

/*
 * list: asks for the receiver's listing of top, logs what it says, and
 * acknowledges every LIST_WINDOW-th LIST.  Returns STEP_OK after
 * LIST_END, STEP_REFUSED after an ERROR, or STEP_FAILED.
 */
static int fetch_listing(struct peer *p, const char *top, const char *logfile)
{
	unsigned char buf[CTRL_MAX];
	size_t tlen = strlen(top) + 1;
	unsigned frames = 0;
	uint32_t len;
	uint8_t type;

	if (tlen > CTRL_MAX - 16 || log_line(logfile, "ASKED\n", 6) < 0)
		return STEP_FAILED;
	if (send_frame(p->fd, F_LIST_REQ, 0, top, (uint32_t)tlen) < 0)
		return STEP_FAILED;
	for (;;) {
		if (recv_frame(p->fd, &type, buf, &len) < 0) {
			fprintf(stderr, "evilpeer: listing cut short\n");
			return STEP_FAILED;
		}
		if (type == F_ERROR) {
			show_error(buf, len);
			return STEP_REFUSED;
		}
		if (type == F_LIST_END)
			return STEP_OK;
		if (type != F_LIST || log_records(logfile, buf, len) < 0) {
			fprintf(stderr,
				"evilpeer: bad listing (type %u len %u)\n",
				type, (unsigned)len);
			return STEP_FAILED;
		}
		if (++frames % LIST_WINDOW == 0 &&
		    send_frame(p->fd, F_LIST_ACK, 0, NULL, 0) < 0)
			return STEP_FAILED;
	}
}

static la_ssize_t abuf_write(struct archive *a, void *arg, const void *data,
			     size_t n)
{
	struct abuf *b = arg;

	if (b->len + n > b->cap) {
		size_t cap = b->cap ? b->cap : 65536;
		unsigned char *np;

		while (cap < b->len + n)
			cap *= 2;
		np = realloc(b->p, cap);
		if (!np) {
			archive_set_error(a, ENOMEM, "out of memory");
			return -1;
		}
		b->p = np;
		b->cap = cap;
	}
	memcpy(b->p + b->len, data, n);
	b->len += n;
	return (la_ssize_t)n;
}

/* One entry: type AE_IFDIR, AE_IFREG (with data) or AE_IFLNK (to link). */
static int put_entry(struct archive *w, const char *name, unsigned type,
		     const void *data, size_t len, const char *link)
{
	struct archive_entry *e = archive_entry_new();
	int ret = 0;

	if (!e)
		return -1;
	archive_entry_set_pathname(e, name);
	archive_entry_set_filetype(e, type);
	archive_entry_set_perm(e, type == AE_IFDIR   ? 0755
				  : type == AE_IFLNK ? 0777
						     : 0644);
	archive_entry_set_mtime(e, MTIME, 0);
	archive_entry_set_uid(e, 0);
	archive_entry_set_gid(e, 0);
	archive_entry_set_size(e, type == AE_IFREG ? (la_int64_t)len : 0);
	if (link)
		archive_entry_set_symlink(e, link);
	if (archive_write_header(w, e) < ARCHIVE_WARN ||
	    (type == AE_IFREG && len &&
	     archive_write_data(w, data, len) != (la_ssize_t)len)) {
		fprintf(stderr, "evilpeer: archive: %s\n",
			archive_error_string(w));
		ret = -1;
	}
	archive_entry_free(e);
	return ret;
}

/* A regular file, and its hash entry when it has data. */
static int put_file(struct archive *w, const char *name, const char *data)
{
	size_t len = strlen(data);
	XXH128_canonical_t c;

	if (put_entry(w, name, AE_IFREG, data, len, NULL) < 0)
		return -1;
	if (!len)
		return 0;
	XXH128_canonicalFromHash(&c, XXH3_128bits(data, len));
	return put_entry(w, HASH_NAME, AE_IFREG, c.digest, sizeof(c.digest),
			 NULL);
}

/* Finds ATTACK ("NAME" or "NAME:PARAM"); *param gets PARAM or NULL. */
static const struct attack *find_attack(const char *arg, const char **param)
{
	const char *colon = strchr(arg, ':');
	size_t n = colon ? (size_t)(colon - arg) : strlen(arg);
	size_t i;

	*param = colon ? colon + 1 : NULL;
	for (i = 0; i < sizeof(attacks) / sizeof(attacks[0]); i++) {
		const struct attack *a = &attacks[i];

		if (strlen(a->name) != n || strncmp(a->name, arg, n))
			continue;
		if (a->param != (colon != NULL) || (colon && !colon[1]))
			return NULL;
		return a;
	}
	return NULL;
}

/* Builds the archive of attack a into b; returns 0 or -1. */
static int build_archive(const struct attack *a, const char *top,
			 const char *param, struct abuf *b)
{
	struct archive *w = archive_write_new();
	const struct step *st;
	char name[NAME_BUF];
	int ret = 0;

	if (!w)
		return -1;
	archive_write_set_format_pax_restricted(w);
	archive_write_set_format_option(w, "pax", "hdrcharset", "BINARY");
	archive_write_set_bytes_per_block(w, 0);
	if (archive_write_open(w, b, NULL, abuf_write, NULL) != ARCHIVE_OK) {
		fprintf(stderr, "evilpeer: archive: %s\n",
			archive_error_string(w));
		archive_write_free(w);
		return -1;
	}
	for (st = a->steps; !ret && st < a->steps + 4 && st->kind; st++) {
		if (!st->name)
			snprintf(name, sizeof(name), "%s", param);
		else if (st->name[0] == '@')
			snprintf(name, sizeof(name), "%s%s", top, st->name + 1);
		else
			snprintf(name, sizeof(name), "%s", st->name);
		if (st->kind == 'd')
			ret = put_entry(w, name, AE_IFDIR, NULL, 0, NULL);
		else if (st->kind == 'l')
			ret = put_entry(w, name, AE_IFLNK, NULL, 0, param);
		else if (st->kind == 'x')
			ret = put_entry(w, name, AE_IFREG, param, strlen(param),
					NULL);
		else
			ret = put_file(w, name, st->data);
	}
	if (archive_write_close(w) != ARCHIVE_OK)
		ret = -1;
	archive_write_free(w);
	return ret;
}

/* The archive as DATA frames of at most one slot, then EOS. */
static int send_stream(struct peer *p, const struct abuf *b)
{
	unsigned char eos[32];
	XXH128_canonical_t c;
	uint64_t seq = 0;
	size_t off;

	for (off = 0; off < b->len; off += SLOT_SIZE, seq++) {
		size_t n = b->len - off < SLOT_SIZE ? b->len - off : SLOT_SIZE;

		if (send_frame(p->fd, F_DATA, seq, b->p + off, (uint32_t)n) < 0)
			return -1;
	}
	XXH128_canonicalFromHash(&c, XXH3_128bits(b->p, b->len));
	put_be64(eos, b->len);
	put_be64(eos + 8, seq);
	memcpy(eos + 16, c.digest, sizeof(c.digest));
	return send_frame(p->fd, F_EOS, 0, eos, sizeof(eos));
}

/*
 * Waits until the peer closes (or resets) the connection or ms elapse,
 * discarding whatever it sends.
 */
static void linger_until_closed(int fd, int ms)
{
	unsigned char sink[4096];
	struct timespec start, now;

	clock_gettime(CLOCK_MONOTONIC, &start);
	for (;;) {
		struct pollfd pfd = {.fd = fd, .events = POLLIN};
		long left;
		ssize_t n;
		int r;

		clock_gettime(CLOCK_MONOTONIC, &now);
		left = ms - ((now.tv_sec - start.tv_sec) * 1000L +
			     (now.tv_nsec - start.tv_nsec) / 1000000L);
		if (left <= 0)
			return;
		r = poll(&pfd, 1, (int)left);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return;
		n = recv(fd, sink, sizeof(sink), 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return;
	}
}

/* Reads the receiver's verdict after EOS (or after a failed send). */
static int read_reply(struct peer *p, bool sent)
{
	unsigned char buf[CTRL_MAX];
	uint32_t len;
	uint8_t type;

	if (recv_frame(p->fd, &type, buf, &len) < 0) {
		fprintf(stderr, "evilpeer: no reply from the receiver\n");
		return sent ? 0 : 1;
	}
	if (type == F_ERROR) {
		show_error(buf, len);
		return 0;
	}
	if (type == F_DONE && sent) {
		fprintf(stderr, "evilpeer: receiver accepted the stream\n");
		return 0;
	}
	fprintf(stderr, "evilpeer: unexpected reply (type %u len %u)\n", type,
		(unsigned)len);
	return 1;
}

/* Runs attack a as the sender on the connected fd; returns the exit code. */
static int run_attack(int fd, const char *key, const struct attack *a,
		      const char *param, const char *top)
{
	struct peer p = {.fd = fd, .key = key};
	bool list = !strcmp(a->name, "list");
	struct abuf b = {0};
	int step, ret;

	step = handshake(&p, OPT_TREE | (list ? OPT_SYNC | OPT_CHECKSUM : 0));
	if (step == STEP_OK && list)
		step = fetch_listing(&p, top, param);
	if (step != STEP_OK) {
		ret = step == STEP_REFUSED ? 0 : 1;
		goto out;
	}
	if (build_archive(a, top, param, &b) < 0) {
		ret = 1;
		goto out;
	}
	if (send_stream(&p, &b) < 0) {
		fprintf(stderr, "evilpeer: send: %s\n", strerror(errno));
		ret = read_reply(&p, false);
	} else {
		ret = read_reply(&p, true);
	}
out:
	free(b.p);
	shutdown(fd, SHUT_WR);
	linger_until_closed(fd, LINGER_MS);
	close(fd);
	return ret;
}

static void set_timeouts(int fd)
{
	struct timeval tv = {.tv_sec = IO_TIMEOUT_S};

	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

/* Connects to host:port (any address family); returns the fd or -1. */
static int dial(const char *host, const char *port)
{
	struct addrinfo hints = {.ai_family = AF_UNSPEC,
				 .ai_socktype = SOCK_STREAM};
	struct addrinfo *res, *ai;
	char h[256];
	size_t hl = strlen(host);
	int fd = -1, rc, err = 0;

	if (hl >= 2 && hl < sizeof(h) && host[0] == '[' &&
	    host[hl - 1] == ']') {
		memcpy(h, host + 1, hl - 2);
		h[hl - 2] = '\0';
		host = h;
	}
	rc = getaddrinfo(host, port, &hints, &res);
	if (rc != 0) {
		fprintf(stderr, "evilpeer: cannot resolve '%s': %s\n", host,
			gai_strerror(rc));
		return -1;
	}
	for (ai = res; ai; ai = ai->ai_next) {
		fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC,
			    ai->ai_protocol);
		if (fd < 0)
			continue;
		set_timeouts(fd); /* SO_SNDTIMEO bounds connect() too */
		if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0)
			break;
		err = errno;
		close(fd);
		fd = -1;
	}
	if (fd < 0)
		fprintf(stderr, "evilpeer: cannot connect to %s port %s: %s\n",
			host, port, strerror(err));
	freeaddrinfo(res);
	return fd;
}

/* A listening socket on port 0 of every address (:: dual-stack, else
 * 0.0.0.0); its port goes into *port.  Returns the fd or -1. */
static int listen_any(unsigned *port)
{
	struct sockaddr_in6 a6 = {.sin6_family = AF_INET6,
				  .sin6_addr = IN6ADDR_ANY_INIT};
	struct sockaddr_in a4 = {.sin_family = AF_INET,
				 .sin_addr.s_addr = htonl(INADDR_ANY)};
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	int fd, off = 0;

	fd = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd >= 0 &&
	    (setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof(off)) < 0 ||
	     bind(fd, (struct sockaddr *)&a6, sizeof(a6)) < 0)) {
		close(fd);
		fd = -1;
	}
	if (fd < 0) {
		fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd >= 0 &&
		    bind(fd, (struct sockaddr *)&a4, sizeof(a4)) < 0) {
			close(fd);
			fd = -1;
		}
	}
	if (fd < 0 || listen(fd, 1) < 0 ||
	    getsockname(fd, (struct sockaddr *)&ss, &sl) < 0) {
		fprintf(stderr, "evilpeer: cannot listen: %s\n",
			strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	*port = ntohs(ss.ss_family == AF_INET6
			      ? ((struct sockaddr_in6 *)&ss)->sin6_port
			      : ((struct sockaddr_in *)&ss)->sin_port);
	return fd;
}

/* The key: the first line of stdin, without its "\n" or "\r\n"; the rest
 * of stdin stays unread (rdcp keeps it open).  Returns 0 or -1. */
static int read_key_line(char *key, size_t cap)
{
	size_t n = 0;

	for (;;) {
		ssize_t r = read(0, key + n, 1);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0 || key[n] == '\n')
			break;
		if (++n == cap - 1)
			return -1;
	}
	if (n && key[n - 1] == '\r')
		n--;
	key[n] = '\0';
	return n ? 0 : -1;
}

/* server: TOP from the last PATH after "--", then one accepted connection. */
static int run_server(const struct attack *a, const char *param, int argc,
		      char **argv)
{
	static char key[NAME_BUF];
	char top[NAME_BUF], *slash;
	struct pollfd pfd;
	unsigned port;
	int i, ls, fd, r;

	for (i = 0; i < argc && strcmp(argv[i], "--"); i++)
		;
	if (i >= argc - 1 || strlen(argv[argc - 1]) >= sizeof(top))
		return 2;
	strcpy(top, argv[argc - 1]);
	while (strlen(top) > 1 && top[strlen(top) - 1] == '/')
		top[strlen(top) - 1] = '\0';
	slash = strrchr(top, '/');
	if (slash && slash[1])
		memmove(top, slash + 1, strlen(slash + 1) + 1);
	if (!top[0] || !strcmp(top, "/"))
		return 2;

	if (read_key_line(key, sizeof(key)) < 0) {
		fprintf(stderr, "evilpeer: no key on stdin's first line\n");
		return 1;
	}
	ls = listen_any(&port);
	if (ls < 0)
		return 1;
	printf("RDX-PORT %u\n", port);
	fflush(stdout);
	pfd = (struct pollfd){.fd = ls, .events = POLLIN};
	do
		r = poll(&pfd, 1, ACCEPT_WAIT_MS);
	while (r < 0 && errno == EINTR);
	fd = r > 0 ? accept4(ls, NULL, NULL, SOCK_CLOEXEC) : -1;
	close(ls);
	if (fd < 0) {
		fprintf(stderr, "evilpeer: no connection within %d s\n",
			ACCEPT_WAIT_MS / 1000);
		return 1;
	}
	set_timeouts(fd);
	return run_attack(fd, key, a, param, top);
}

static int usage(void)
{
	fputs("usage: evilpeer dial HOST PORT ATTACK TOP  (key in RDX_KEY)\n"
	      "       evilpeer server ATTACK [ARGS...] -- PATH...\n"
	      "ATTACK: ok, ok-tree, other-top, extra, dotdot, absolute:PATH,\n"
	      "        symlink:TARGET, nested-file, delete:NAME, "
	      "list:LOGFILE\n",
	      stderr);
	return 2;
}

int main(int argc, char **argv)
{
	const struct attack *a;
	const char *param, *key = getenv("RDX_KEY");
	int fd, ret;

	signal(SIGPIPE, SIG_IGN);
	if (argc >= 3 && !strcmp(argv[1], "server")) {
		a = find_attack(argv[2], &param);
		if (!a)
			return usage();
		ret = run_server(a, param, argc - 3, argv + 3);
		return ret == 2 ? usage() : ret;
	}
	if (argc != 6 || strcmp(argv[1], "dial") || !key || !*key || !*argv[5])
		return usage();
	a = find_attack(argv[4], &param);
	if (!a)
		return usage();
	fd = dial(argv[2], argv[3]);
	if (fd < 0)
		return 1;
	return run_attack(fd, key, a, param, argv[5]);
}
