/* The shared key, and what a session derives from its session key (the
 * Ke of SPAKE2, pake.h): HMAC-SHA256 over both nonces, and HKDF-SHA256
 * for the per-direction AES-256-GCM keys.  Neither key crosses the wire.
 * Labels keep every MAC distinct so that one can never be replayed as
 * another (reflection). */
#ifndef RDX_AUTH_H
#define RDX_AUTH_H

#include "core/proto.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct rdx_key {
	uint8_t *bytes;
	size_t len;
};

#define RDX_LABEL_RECEIVER "rdxfer-2 receiver"
#define RDX_LABEL_SENDER "rdxfer-2 sender"
#define RDX_LABEL_ACCEPT "rdxfer-2 accept"
#define RDX_LABEL_JOIN "rdxfer-2 join"
#define RDX_LABEL_LIST "rdxfer-2 list" /* --checksum listing key, never sent */

/* Fills buf with cryptographically strong random bytes; 0 or -EIO. */
int rdx_random(void *buf, size_t len);

/* out = HMAC-SHA256(key, label || nonce_s || nonce_r || extra).
 * Returns 0 or -EIO. */
int rdx_mac(const struct rdx_key *key, const char *label,
	    const uint8_t nonce_s[RDX_NONCE_LEN],
	    const uint8_t nonce_r[RDX_NONCE_LEN], const void *extra,
	    size_t extra_len, uint8_t out[RDX_MAC_LEN]);

/* Recomputes the MAC and compares in constant time; true when it matches. */
bool rdx_mac_check(const struct rdx_key *key, const char *label,
		   const uint8_t nonce_s[RDX_NONCE_LEN],
		   const uint8_t nonce_r[RDX_NONCE_LEN], const void *extra,
		   size_t extra_len, const uint8_t mac[RDX_MAC_LEN]);

/* Derives the sender->receiver and receiver->sender keys.  0 or -EIO. */
int rdx_derive_keys(const struct rdx_key *key,
		    const uint8_t nonce_s[RDX_NONCE_LEN],
		    const uint8_t nonce_r[RDX_NONCE_LEN], uint8_t s2r[32],
		    uint8_t r2s[32]);

/* Loads the key, in order of precedence: the positional argument, the
 * first line of key_file, the RDX_KEY environment variable.  Returns 0,
 * -RDX_EUSAGE (none given, empty, or two given: the caller explains) or
 * -errno reading the file. */
int rdx_key_load(struct rdx_key *key, const char *arg, const char *key_file);

/* Reads the key from the first line of fd (a trailing CR/LF is not part
 * of it) and nothing after it.  Returns 0, -RDX_EUSAGE for an empty line,
 * -E2BIG for a line of 4 KiB or more, or -errno. */
int rdx_key_read_line(struct rdx_key *key, int fd);

/* Wipes and frees the key. */
void rdx_key_release(struct rdx_key *key);

#endif
