/*
 * badpeer - a misbehaving rdxfer sender for the CLI fault tests.
 *
 * Usage: badpeer MODE HOST PORT
 *        badpeer corrupt HOST PORT LISTEN_PORT
 *        badpeer strip-encrypt HOST PORT LISTEN_PORT
 *        badpeer flood|wrong-keys|slowloris N HOST PORT
 *        badpeer guess-sender|guess-receiver GUESS DICT HOST PORT
 *
 *   garbage      4 KiB of random bytes
 *   short-hello  a valid HELLO header (len 105), then only 10 payload bytes
 *   huge-len     a HELLO header with len 0xFFFFFFFF, then a few bytes
 *   bad-version  a complete HELLO with version 99
 *   silent       connect and send nothing for 30 s
 *   corrupt      a man in the middle: accepts one connection on
 *                127.0.0.1:LISTEN_PORT, relays it to HOST PORT, and flips
 *                one bit in the payload of the second DATA frame going to
 *                the receiver (one stream only; exits when both sides end)
 *   flood N      opens N connections that say nothing, holds them for
 *                30 s (or until killed), opening a new one for each the
 *                receiver closes: the strays of a lockout attempt
 *   wrong-keys N the whole exchange with a random key (a real share, the
 *                confirmation for it), N times, one connection each, as
 *                fast as the receiver answers: an online key guesser
 *   guess-sender GUESS DICT HOST PORT
 *                one exchange with key GUESS as a sender dialing rdrecv;
 *                then, offline, every line of DICT is tried against what
 *                the receiver sent (its share and confirmation).  Prints
 *                "online: right|wrong", "answer: ACCEPT|ERROR|closed",
 *                "verifies: KEY" per key that checks out, "verified: N"
 *   guess-receiver GUESS DICT HOST PORT
 *                the same as a receiver dialing rdsend --server: answers
 *                its HELLO with a share and confirmation for GUESS; only
 *                an AUTH (cA) would carry anything to try DICT against
 *   slowloris N  (an HTTP server: rds3 serve) N connections, each sending
 *                the start of a request header and then one byte every
 *                2 s, reconnecting when dropped, for 30 s
 *   (BADPEER_BIND=ADDR: connect from that local address, 127.0.0.2 say)
 *   strip-encrypt  the same man in the middle, but it clears the encrypt
 *                byte of the sender's AUTH options (a downgrade attack)
 *   bad-auth     one exchange with a random key: a real share, the
 *                receiver's HELLO read, an AUTH with plausible options and
 *                the confirmation for the wrong key
 *   trickle      a valid HELLO sent one byte every 2 s (slowloris): the
 *                receiver must give up on it within its handshake budget
 *   oversize     (needs RDX_KEY) authenticates properly, announces a
 *                4096-byte stream in 4 KiB slots, then sends two chunks:
 *                an authenticated sender that lies about the size
 *   undersize    (needs RDX_KEY) the same, but announces 8192 bytes and
 *                sends one chunk and an EOS that agrees with it (total
 *                4096, its xxh3-128): a file shorter than announced
 *
 * After sending, every mode but short-hello lingers until the receiver
 * closes the connection (at most 30 s for silent, 3 s otherwise), so the
 * receiver has to reject what it got rather than notice an early EOF.
 * short-hello closes at once: a truncated frame followed by EOF.
 *
 * Exit codes: 0 sent (whatever the receiver did afterwards), 1 could not
 * connect or send, 2 usage.  Sockets, libcrypto and the handshake of
 * peer.h (SPAKE2 from src/core/pake.c, nothing else from src/).
 *
 * Frame header (docs/PROTOCOL.md), 24 bytes, big-endian:
 *   type u8 | flags u8 | stream u16 | len u32 | plain_len u32 |
 *   reserved u32 | seq u64
 * Sender HELLO payload: "RDXF" | version u16 | reserved u16 | nonce[32] |
 * pA[65] (peer.h).
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
#include <arpa/inet.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stdbool.h>
#include <xxhash.h>

#include "peer.h"

#define HDR_LEN	    PEER_HDR_LEN
#define HELLO_LEN   PEER_HELLO_S_LEN
#define AUTH_LEN    PEER_AUTH_LEN
#define CTRL_MAX    4096
#define FRAME_HELLO 1
#define FRAME_AUTH  2
#define FRAME_DATA  5
#define FRAME_EOS   6
#define FRAME_JOIN_ACCEPT 3

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
	h[1] = 0;	    /* flags */
	put_be16(h + 2, 0); /* stream 0 = control */
	put_be32(h + 4, len);
	/* plain_len, reserved and seq stay 0 */
}

/* A random key, as a guesser would try one. */
static void guess_key(char key[33])
{
	static const char digits[] = "0123456789abcdef";
	unsigned char b[16];
	int i;

	fill_random(b, sizeof(b));
	for (i = 0; i < 16; i++) {
		key[2 * i] = digits[b[i] >> 4];
		key[2 * i + 1] = digits[b[i] & 15];
	}
	key[32] = '\0';
}

/* Writes a sender HELLO payload (HELLO_LEN bytes, a real share for a
 * random key) announcing the given version. */
static void make_hello(unsigned char *p, uint16_t version)
{
	struct peer_hs h;
	char key[33];

	guess_key(key);
	if (peer_hello(&h, key, p) < 0)
		fill_random(p + 8, HELLO_LEN - 8);
	put_be16(p + 4, version);
}

/* Reads one frame whose payload fits buf (CTRL_MAX): 0, or -1. */
static int recv_frame(int fd, unsigned char *buf, uint8_t *type, uint32_t *len)
{
	if (recv_full(fd, buf, HDR_LEN) < 0)
		return -1;
	*type = buf[0];
	*len = get_be32(buf + 4);
	if (*len > CTRL_MAX || recv_full(fd, buf + HDR_LEN, *len) < 0)
		return -1;
	return 0;
}

/* Plausible options: slot_size, slots, streams 1, no compression or
 * encryption, flags, size (src/core/proto.h, rdx_opts_wire). */
static void make_opts(unsigned char opts[PEER_OPTS_LEN], uint32_t slot,
		      uint32_t flags, uint32_t size)
{
	memset(opts, 0, PEER_OPTS_LEN);
	put_be32(opts, slot);
	put_be32(opts + 4, 16);
	put_be16(opts + 8, 1);
	put_be32(opts + 12, flags);
	put_be32(opts + 20, size); /* the low half of the u64 */
}

/*
 * The sender's side of the handshake with key, up to and including AUTH
 * (plausible options, 1 MiB slots unless opts is given).  Returns 1 when
 * the receiver proved key, 0 when it did not (a guess that failed: the
 * AUTH went out all the same, as a guesser's would), -1 when the exchange
 * broke.  cb gets the receiver's confirmation when not NULL.
 */
static int sender_handshake(int fd, struct peer_hs *h, const char *key,
			    const unsigned char *opts, unsigned char cb[32])
{
	unsigned char buf[HDR_LEN + CTRL_MAX], o[PEER_OPTS_LEN];
	uint32_t len;
	uint8_t type;
	int ok;

	make_hdr(buf, FRAME_HELLO, HELLO_LEN);
	if (peer_hello(h, key, buf + HDR_LEN) < 0 ||
	    send_full(fd, buf, HDR_LEN + HELLO_LEN) < 0)
		return -1;
	if (recv_frame(fd, buf, &type, &len) < 0) {
		fprintf(stderr, "badpeer: no HELLO from the receiver\n");
		return -1;
	}
	ok = type == FRAME_HELLO ? peer_hello_reply(h, buf + HDR_LEN, len) : -1;
	if (ok < 0) {
		fprintf(stderr, "badpeer: unexpected reply (type %u len %u)\n",
			type, (unsigned)len);
		return -1;
	}
	if (cb)
		memcpy(cb, buf + HDR_LEN + PEER_HELLO_S_LEN, 32);
	if (!opts) {
		make_opts(o, 1u << 20, 0, 0);
		opts = o;
	}
	make_hdr(buf, FRAME_AUTH, AUTH_LEN);
	if (peer_auth(h, opts, buf + HDR_LEN) < 0 ||
	    send_full(fd, buf, HDR_LEN + AUTH_LEN) < 0)
		return -1;
	return ok;
}

/*
 * bad-auth: the whole exchange with a random key, as a guesser runs it:
 * a real share, the receiver's HELLO read, an AUTH carrying the
 * confirmation for the guess.  Returns 0 once the AUTH went out, -1 if
 * the exchange broke earlier.
 */
static int send_bad_auth(int fd)
{
	struct peer_hs h;
	char key[33];

	guess_key(key);
	return sender_handshake(fd, &h, key, NULL, NULL) < 0 ? -1 : 0;
}

/*
 * oversize: the whole handshake with the right key (RDX_KEY), options
 * announcing a 4096-byte stream in 4 KiB slots, then chunks 0 and 1 of
 * 4 KiB each: 8 KiB for an announced 4 KiB.  Returns 0 once sent.
 */
static int send_sized(int fd, const char *key, bool under)
{
	unsigned char buf[HDR_LEN + CTRL_MAX], opts[PEER_OPTS_LEN];
	unsigned char chunk[HDR_LEN + 4096];
	struct peer_hs h;
	uint32_t len;
	uint8_t type;
	int i;

	make_opts(opts, 4096, 1 /* size known */, under ? 8192 : 4096);
	if (sender_handshake(fd, &h, key, opts, NULL) != 1 ||
	    recv_frame(fd, buf, &type, &len) < 0 || type != FRAME_JOIN_ACCEPT) {
		fprintf(stderr, "badpeer: not accepted (wrong RDX_KEY?)\n");
		return -1;
	}
	for (i = 0; i < (under ? 1 : 2); i++) {
		make_hdr(chunk, FRAME_DATA, 4096);
		put_be32(chunk + 8, 4096);		/* plain_len */
		put_be32(chunk + 20, (uint32_t)i);	/* seq (low half) */
		memset(chunk + HDR_LEN, 'A' + i, 4096);
		if (send_full(fd, chunk, sizeof(chunk)) < 0)
			return -1;
	}
	if (under) { /* EOS: total 4096, 1 chunk, the hash of what was sent */
		XXH128_canonical_t hash;

		XXH128_canonicalFromHash(&hash, XXH3_128bits(chunk + HDR_LEN, 4096));
		make_hdr(buf, FRAME_EOS, 32);
		memset(buf + HDR_LEN, 0, 16);
		put_be32(buf + HDR_LEN + 4, 4096);
		put_be32(buf + HDR_LEN + 12, 1);
		memcpy(buf + HDR_LEN + 16, hash.digest, 16);
		if (send_full(fd, buf, HDR_LEN + 32) < 0)
			return -1;
	}
	return 0;
}

/* trickle: one byte of a valid HELLO every 2 s, for at most a minute. */
static int send_trickle(int fd)
{
	unsigned char buf[HDR_LEN + HELLO_LEN];
	size_t i;

	make_hdr(buf, FRAME_HELLO, HELLO_LEN);
	make_hello(buf + HDR_LEN, 1);
	for (i = 0; i < sizeof(buf) && i < 30; i++) {
		if (send_full(fd, buf + i, 1) < 0)
			return 0; /* the receiver hung up: what we wanted */
		sleep(2);
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
	if (hl >= 2 && hl < sizeof(h) && host[0] == '[' &&
	    host[hl - 1] == ']') {
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
		const char *bind_to = getenv("BADPEER_BIND");

		fd = socket(ai->ai_family, ai->ai_socktype, ai->ai_protocol);
		if (fd < 0)
			continue;
		if (bind_to && ai->ai_family == AF_INET) {
			struct sockaddr_in a = { .sin_family = AF_INET };

			if (inet_pton(AF_INET, bind_to, &a.sin_addr) != 1 ||
			    bind(fd, (struct sockaddr *)&a, sizeof(a))) {
				close(fd);
				fd = -1;
				continue;
			}
		}
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
		struct pollfd pfd = {.fd = fd, .events = POLLIN};
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

/*
 * Frame tracker for the sender-to-receiver direction of the corrupt
 * proxy: flips one bit in the middle of the second DATA payload, or
 * (strip) clears the encrypt byte of AUTH's options (after cA and the
 * MAC: slot_size u32, slots u32, streams u16, compress u8, encrypt u8).
 */
#define AUTH_ENCRYPT_AT (RDX_PAKE_CONFIRM_LEN + 32 + 11)

struct tracker {
	int strip;	  /* strip-encrypt, not corrupt */
	unsigned char hdr[HDR_LEN];
	size_t hdr_have;  /* header bytes seen of the current frame */
	uint32_t left;	  /* payload bytes still to come */
	uint32_t flip_at; /* payload offset to flip, counted down */
	int flip_this;	  /* the current frame is the victim */
	int data_seen;
	int flipped;
};

static void track(struct tracker *t, unsigned char *buf, size_t n)
{
	size_t i = 0;

	while (i < n) {
		if (t->left == 0) {
			t->hdr[t->hdr_have++] = buf[i++];
			if (t->hdr_have < HDR_LEN)
				continue;
			t->hdr_have = 0;
			t->left = get_be32(t->hdr + 4);
			t->flip_this = 0;
			if (t->strip && t->hdr[0] == FRAME_AUTH && t->left == AUTH_LEN &&
			    !t->flipped) {
				t->flip_this = 1;
				t->flip_at = AUTH_ENCRYPT_AT;
			} else if (!t->strip && t->hdr[0] == FRAME_DATA && t->left > 0 &&
				   ++t->data_seen == 2 && !t->flipped) {
				t->flip_this = 1;
				t->flip_at = t->left / 2;
			}
			continue;
		}
		size_t take = n - i < t->left ? n - i : t->left;

		if (t->flip_this && t->flip_at < take) {
			if (t->strip)
				buf[i + t->flip_at] = 0;
			else
				buf[i + t->flip_at] ^= 0x10;
			t->flip_this = 0;
			t->flipped = 1;
		} else if (t->flip_this) {
			t->flip_at -= (uint32_t)take;
		}
		i += take;
		t->left -= (uint32_t)take;
	}
}

/* Relays one accepted connection to host:port, corrupting as above. */
static int run_corrupt(const char *host, const char *port, const char *lport, int strip)
{
	struct addrinfo hints, *res;
	struct tracker t;
	unsigned char buf[65536];
	int ls, c, u, one = 1, open_c = 1, open_u = 1;

	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_INET;
	hints.ai_socktype = SOCK_STREAM;
	if (getaddrinfo("127.0.0.1", lport, &hints, &res) != 0)
		return 1;
	ls = socket(AF_INET, SOCK_STREAM, 0);
	if (ls < 0)
		return 1;
	setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(ls, res->ai_addr, res->ai_addrlen) < 0 || listen(ls, 1) < 0) {
		fprintf(stderr, "badpeer: cannot listen on port %s: %s\n",
			lport, strerror(errno));
		return 1;
	}
	freeaddrinfo(res);
	c = accept(ls, NULL, NULL);
	close(ls);
	if (c < 0)
		return 1;
	u = dial(host, port);
	if (u < 0)
		return 1;
	memset(&t, 0, sizeof(t));
	t.strip = strip;
	while (open_c || open_u) {
		struct pollfd p[2] = {{.fd = open_c ? c : -1, .events = POLLIN},
				      {.fd = open_u ? u : -1,
				       .events = POLLIN}};

		if (poll(p, 2, 60000) <= 0)
			break;
		if (p[0].revents) {
			ssize_t n = recv(c, buf, sizeof(buf), 0);

			if (n <= 0) {
				open_c = 0;
				shutdown(u, SHUT_WR);
			} else {
				track(&t, buf, (size_t)n);
				if (send_full(u, buf, (size_t)n) < 0)
					break;
			}
		}
		if (p[1].revents) {
			ssize_t n = recv(u, buf, sizeof(buf), 0);

			if (n <= 0) {
				open_u = 0;
				shutdown(c, SHUT_WR);
			} else if (send_full(c, buf, (size_t)n) < 0) {
				break;
			}
		}
	}
	close(c);
	close(u);
	if (!t.flipped)
		fprintf(stderr,
			"badpeer: saw %d DATA frames, flipped nothing\n",
			t.data_seen);
	else if (strip)
		fprintf(stderr, "badpeer: stripped encrypt from AUTH\n");
	return 0;
}

/* flood: n silent connections, each replaced when the receiver drops it,
 * for 30 s. */
static int run_flood(int n, const char *host, const char *port)
{
	struct rlimit rl;
	struct pollfd *p = calloc((size_t)n, sizeof(*p));
	time_t end = time(NULL) + 30;
	int i;

	if (!p)
		return 1;
	if (!getrlimit(RLIMIT_NOFILE, &rl) && rl.rlim_cur < (rlim_t)n + 16) {
		rl.rlim_cur = rl.rlim_max < (rlim_t)n + 16 ? rl.rlim_max : (rlim_t)n + 16;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	for (i = 0; i < n; i++)
		p[i] = (struct pollfd){ .fd = dial(host, port), .events = POLLIN };
	while (time(NULL) < end) {
		if (poll(p, (nfds_t)n, 200) < 0 && errno != EINTR)
			break;
		for (i = 0; i < n; i++) {
			char sink[256];

			if (p[i].fd >= 0 && !p[i].revents)
				continue;
			if (p[i].fd >= 0 && recv(p[i].fd, sink, sizeof(sink), MSG_DONTWAIT) > 0)
				continue;
			if (p[i].fd >= 0)
				close(p[i].fd);
			p[i].fd = dial(host, port);
			p[i].revents = 0;
		}
	}
	return 0;
}

/* slowloris: n HTTP headers that never end, one byte every 2 s each. */
static int run_slowloris(int n, const char *host, const char *port)
{
	static const char start[] = "GET / HTTP/1.1\r\nHost: x\r\nX-Slow: ";
	int *fd = calloc((size_t)n, sizeof(*fd));
	time_t end = time(NULL) + 30;
	int i;

	if (!fd)
		return 1;
	for (i = 0; i < n; i++)
		fd[i] = -1;
	while (time(NULL) < end) {
		for (i = 0; i < n; i++) {
			if (fd[i] >= 0 && send(fd[i], "a", 1, MSG_NOSIGNAL | MSG_DONTWAIT) == 1)
				continue;
			if (fd[i] >= 0)
				close(fd[i]);
			fd[i] = dial(host, port);
			if (fd[i] >= 0 && send_full(fd[i], (const unsigned char *)start,
						    sizeof(start) - 1) < 0) {
				close(fd[i]);
				fd[i] = -1;
			}
		}
		sleep(2);
	}
	return 0;
}

/* wrong-keys: n exchanges with a random key, one after the other. */
static int run_wrong_keys(int n, const char *host, const char *port)
{
	int i;

	for (i = 0; i < n; i++) {
		int fd = dial(host, port);

		if (fd < 0)
			continue;
		if (send_bad_auth(fd) == 0)
			linger_until_closed(fd, 3000);
		close(fd);
	}
	return 0;
}

/*
 * Offline: does candidate key c make the transcript check out?  As the
 * attacker in role `role` with its own secret scalar and share (from h),
 * the peer's share, and what the peer sent that depends on the key
 * (want: cB when the attacker was the sender, cA when it was the
 * receiver).  An attacker can do no better than redo the exchange with
 * w(c) in place of the w it masked with; only when c is the key it sent
 * with can the result match (docs/PROTOCOL.md, "Security").
 */
static bool candidate_verifies(const struct peer_hs *h, const char *c,
			       const unsigned char want[32])
{
	struct rdx_pake t = h->pake;
	struct rdx_pake_result r;
	struct rdx_pake_ctx ctx;
	uint8_t aad[2 * PEER_NONCE_LEN];

	if (rdx_pake_w(c, strlen(c), t.w))
		return false;
	peer_hs_ctx(h, aad, &ctx);
	if (rdx_pake_finish(&t, &ctx, h->peer_share, &r))
		return false;
	return rdx_pake_confirm_ok(t.role == RDX_PAKE_A ? r.conf_b : r.conf_a, want);
}

/* Names the frame that answered: ACCEPT, AUTH, ERROR or closed. */
static const char *answer_name(int fd)
{
	unsigned char buf[HDR_LEN + CTRL_MAX];
	uint32_t len;
	uint8_t type;

	if (recv_frame(fd, buf, &type, &len) < 0)
		return "closed";
	return type == FRAME_JOIN_ACCEPT ? "ACCEPT" : type == FRAME_AUTH ? "AUTH" :
	       type == 8 ? "ERROR" : "other";
}

/*
 * guess-sender / guess-receiver: one handshake with key guess, as the
 * sender (dialing rdrecv) or as the receiver (dialing rdsend --server,
 * which greets first).  Prints "online: right|wrong" (what the exchange
 * itself told), "answer: FRAME" (what the peer sent next), then tries
 * every line of dict against the transcript offline and prints
 * "verifies: KEY" for each that checks out and "verified: N".
 */
static int run_guess(bool as_sender, const char *guess, const char *dict,
		     const char *host, const char *port)
{
	unsigned char buf[HDR_LEN + CTRL_MAX], want[32] = {0};
	const char *answer;
	struct peer_hs h;
	bool have = false;
	char line[512];
	unsigned verified = 0;
	uint32_t len;
	uint8_t type;
	FILE *f;
	int fd = dial(host, port), ok = -1;

	if (fd < 0)
		return 1;
	if (as_sender) {
		ok = sender_handshake(fd, &h, guess, NULL, want);
		have = ok >= 0;
		answer = ok < 0 ? "closed" : answer_name(fd);
	} else if (recv_frame(fd, buf, &type, &len) == 0 && type == FRAME_HELLO &&
		   len == PEER_HELLO_S_LEN) {
		/* The sender's HELLO: nonce_s and pA.  Ours answers it. */
		uint8_t aad[2 * PEER_NONCE_LEN];
		struct rdx_pake_ctx ctx;

		memcpy(h.ns, buf + HDR_LEN + 8, PEER_NONCE_LEN);
		memcpy(h.peer_share, buf + HDR_LEN + 8 + PEER_NONCE_LEN, RDX_PAKE_SHARE_LEN);
		fill_random(h.nr, PEER_NONCE_LEN);
		peer_hs_ctx(&h, aad, &ctx);
		if (rdx_pake_start(&h.pake, RDX_PAKE_B, guess, strlen(guess)) ||
		    rdx_pake_finish(&h.pake, &ctx, h.peer_share, &h.r)) {
			close(fd);
			return 1;
		}
		make_hdr(buf, FRAME_HELLO, PEER_HELLO_R_LEN);
		memcpy(buf + HDR_LEN, "RDXF", 4);
		put_be16(buf + HDR_LEN + 4, PEER_VERSION);
		put_be16(buf + HDR_LEN + 6, 0);
		memcpy(buf + HDR_LEN + 8, h.nr, PEER_NONCE_LEN);
		memcpy(buf + HDR_LEN + 8 + PEER_NONCE_LEN, h.pake.share, RDX_PAKE_SHARE_LEN);
		memcpy(buf + HDR_LEN + PEER_HELLO_S_LEN, h.r.conf_b, RDX_PAKE_CONFIRM_LEN);
		answer = "closed";
		if (send_full(fd, buf, HDR_LEN + PEER_HELLO_R_LEN) == 0 &&
		    recv_frame(fd, buf, &type, &len) == 0) {
			answer = type == FRAME_AUTH ? "AUTH" : type == 8 ? "ERROR" : "other";
			/* Only an AUTH carries something of the key: cA. */
			if (type == FRAME_AUTH && len == PEER_AUTH_LEN) {
				memcpy(want, buf + HDR_LEN, 32);
				have = true;
				ok = rdx_pake_confirm_ok(h.r.conf_a, want);
			} else {
				ok = 0;
			}
		}
	} else {
		fprintf(stderr, "badpeer: no HELLO from the sender\n");
		close(fd);
		return 1;
	}
	close(fd);
	printf("online: %s\nanswer: %s\n", ok > 0 ? "right" : "wrong", answer);
	f = fopen(dict, "r");
	if (!f) {
		fprintf(stderr, "badpeer: %s: %s\n", dict, strerror(errno));
		return 1;
	}
	while (have && fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\r\n")] = '\0';
		if (line[0] && candidate_verifies(&h, line, want)) {
			printf("verifies: %s\n", line);
			verified++;
		}
	}
	fclose(f);
	printf("verified: %u\n", verified);
	return 0;
}

static int usage(void)
{
	fprintf(stderr, "usage: badpeer garbage|short-hello|huge-len|"
			"bad-version|bad-auth|silent|trickle|oversize|undersize HOST PORT\n"
			"       badpeer corrupt|strip-encrypt HOST PORT LISTEN_PORT\n"
			"       badpeer flood|wrong-keys|slowloris N HOST PORT\n"
			"       badpeer guess-sender|guess-receiver GUESS DICT HOST PORT\n");
	return 2;
}

int main(int argc, char **argv)
{
	unsigned char buf[4096];
	const char *mode;
	size_t n = 0;
	int fd, linger_ms = 3000;

	signal(SIGPIPE, SIG_IGN);
	if (argc == 6 && (!strcmp(argv[1], "guess-sender") || !strcmp(argv[1], "guess-receiver")))
		return run_guess(!strcmp(argv[1], "guess-sender"), argv[2], argv[3], argv[4],
				 argv[5]);
	if (argc == 5 && !strcmp(argv[1], "corrupt"))
		return run_corrupt(argv[2], argv[3], argv[4], 0);
	if (argc == 5 && !strcmp(argv[1], "strip-encrypt"))
		return run_corrupt(argv[2], argv[3], argv[4], 1);
	if (argc == 5 && (!strcmp(argv[1], "flood") || !strcmp(argv[1], "wrong-keys") ||
			  !strcmp(argv[1], "slowloris"))) {
		int count = atoi(argv[2]);

		if (count < 1 || count > 100000)
			return usage();
		if (!strcmp(argv[1], "slowloris"))
			return run_slowloris(count, argv[3], argv[4]);
		return !strcmp(argv[1], "flood") ? run_flood(count, argv[3], argv[4])
						 : run_wrong_keys(count, argv[3], argv[4]);
	}
	if (argc != 4)
		return usage();
	mode = argv[1];
	if (strcmp(mode, "garbage") && strcmp(mode, "short-hello") &&
	    strcmp(mode, "huge-len") && strcmp(mode, "bad-version") &&
	    strcmp(mode, "bad-auth") && strcmp(mode, "silent") &&
	    strcmp(mode, "trickle") && strcmp(mode, "oversize") && strcmp(mode, "undersize"))
		return usage();
	if ((!strcmp(mode, "oversize") || !strcmp(mode, "undersize")) && !getenv("RDX_KEY"))
		return usage();

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
	} else if (!strcmp(mode, "bad-auth")) {
		if (send_bad_auth(fd) < 0) {
			close(fd);
			return 1;
		}
	} else if (!strcmp(mode, "oversize") || !strcmp(mode, "undersize")) {
		if (send_sized(fd, getenv("RDX_KEY"), !strcmp(mode, "undersize")) < 0) {
			close(fd);
			return 1;
		}
		linger_ms = 30000;
	} else if (!strcmp(mode, "trickle")) {
		send_trickle(fd);
		linger_ms = 0;
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
