/* The handshake's cryptography: HMAC challenge-response, label separation,
 * HKDF, AES-GCM sealing with replay/reorder/tamper rejection, keys. */
#include "core/auth.h"
#include "core/err.h"
#include "core/seal.h"
#include "tap.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static struct rdx_key key(const char *s)
{
	struct rdx_key k;

	rdx_key_load(&k, s, NULL);
	return k;
}

static void test_mac(void)
{
	struct rdx_key k = key("secret"), other = key("Secret");
	uint8_t ns[RDX_NONCE_LEN], nr[RDX_NONCE_LEN], mac[RDX_MAC_LEN];
	uint8_t opts[4] = { 1, 2, 3, 4 };

	rdx_random(ns, sizeof(ns));
	rdx_random(nr, sizeof(nr));
	CHECK(memcmp(ns, nr, sizeof(ns)) != 0, "fresh nonces differ");
	rdx_mac(&k, RDX_LABEL_RECEIVER, ns, nr, NULL, 0, mac);
	CHECK(rdx_mac_check(&k, RDX_LABEL_RECEIVER, ns, nr, NULL, 0, mac),
	      "MAC verifies with the same key");
	CHECK(!rdx_mac_check(&other, RDX_LABEL_RECEIVER, ns, nr, NULL, 0, mac),
	      "MAC fails with another key");
	CHECK(!rdx_mac_check(&k, RDX_LABEL_SENDER, ns, nr, NULL, 0, mac),
	      "a receiver MAC cannot be reflected as a sender MAC");
	CHECK(!rdx_mac_check(&k, RDX_LABEL_RECEIVER, nr, ns, NULL, 0, mac),
	      "swapped nonces do not verify");
	rdx_mac(&k, RDX_LABEL_SENDER, ns, nr, opts, sizeof(opts), mac);
	opts[3] ^= 1;
	CHECK(!rdx_mac_check(&k, RDX_LABEL_SENDER, ns, nr, opts, sizeof(opts), mac),
	      "tampered options do not verify");
	rdx_key_release(&k);
	rdx_key_release(&other);
}

static void test_seal(void)
{
	struct rdx_key k = key("secret");
	uint8_t ns[RDX_NONCE_LEN] = { 1 }, nr[RDX_NONCE_LEN] = { 2 };
	uint8_t s2r[32], r2s[32], s2r_b[32], r2s_b[32];
	uint8_t aad[RDX_HDR_LEN] = { 5 }, msg[100], ct[100 + RDX_TAG_LEN], pt[100];
	struct rdx_seal *tx, *rx;

	rdx_derive_keys(&k, ns, nr, s2r, r2s);
	rdx_derive_keys(&k, ns, nr, s2r_b, r2s_b);
	CHECK(memcmp(s2r, s2r_b, 32) == 0, "both ends derive the same keys");
	CHECK(memcmp(s2r, r2s, 32) != 0, "each direction has its own key");
	nr[0] = 3;
	rdx_derive_keys(&k, ns, nr, s2r_b, r2s_b);
	CHECK(memcmp(s2r, s2r_b, 32) != 0, "new nonces give new keys");

	memset(msg, 'm', sizeof(msg));
	rdx_seal_new(&tx, s2r);
	rdx_seal_new(&rx, s2r);
	CHECK(rdx_seal(tx, RDX_SEAL_DATA, 9, aad, sizeof(aad), msg, sizeof(msg), ct) == 0,
	      "seal");
	CHECK(memcmp(ct, msg, sizeof(msg)) != 0, "ciphertext differs from plaintext");
	CHECK(rdx_open(rx, RDX_SEAL_DATA, 9, aad, sizeof(aad), ct, sizeof(ct), pt) == 0 &&
		      memcmp(pt, msg, sizeof(msg)) == 0,
	      "open restores the plaintext");
	CHECK(rdx_open(rx, RDX_SEAL_DATA, 10, aad, sizeof(aad), ct, sizeof(ct), pt) ==
		      -RDX_EINTEGRITY,
	      "a frame replayed under another seq is rejected");
	CHECK(rdx_open(rx, RDX_SEAL_CTRL, 9, aad, sizeof(aad), ct, sizeof(ct), pt) ==
		      -RDX_EINTEGRITY,
	      "a data frame cannot pass as a control frame");
	aad[3] = 1;
	CHECK(rdx_open(rx, RDX_SEAL_DATA, 9, aad, sizeof(aad), ct, sizeof(ct), pt) ==
		      -RDX_EINTEGRITY,
	      "a header moved to another stream is rejected");
	aad[3] = 0;
	ct[50] ^= 1;
	CHECK(rdx_open(rx, RDX_SEAL_DATA, 9, aad, sizeof(aad), ct, sizeof(ct), pt) ==
		      -RDX_EINTEGRITY,
	      "a flipped bit is rejected");
	CHECK(rdx_open(rx, RDX_SEAL_DATA, 9, aad, sizeof(aad), ct, 10, pt) == -RDX_EINTEGRITY,
	      "a frame shorter than its tag is rejected");
	memcpy(ct, msg, sizeof(msg));
	CHECK(rdx_seal(tx, RDX_SEAL_DATA, 1, aad, sizeof(aad), ct, sizeof(msg), ct) == 0 &&
		      rdx_open(rx, RDX_SEAL_DATA, 1, aad, sizeof(aad), ct, sizeof(ct), ct) == 0 &&
		      memcmp(ct, msg, sizeof(msg)) == 0,
	      "sealing and opening in place");
	rdx_seal_free(tx);
	rdx_seal_free(rx);
	rdx_key_release(&k);
}

static void test_key_load(void)
{
	char path[] = "/tmp/rdx-key-XXXXXX";
	struct rdx_key k;
	int fd = mkstemp(path);

	CHECK(fd >= 0 && write(fd, "from-file\r\nsecond line\n", 23) == 23, "key file written");
	close(fd);
	unsetenv("RDX_KEY");
	CHECK(rdx_key_load(&k, NULL, NULL) == -RDX_EUSAGE, "no key at all is a usage error");
	CHECK(rdx_key_load(&k, "", NULL) == -RDX_EUSAGE, "an empty key is a usage error");
	CHECK(rdx_key_load(&k, "a", path) == -RDX_EUSAGE, "argument and key file together rejected");
	CHECK(rdx_key_load(&k, NULL, path) == 0 && k.len == 9 && !memcmp(k.bytes, "from-file", 9),
	      "key file: first line without CR/LF");
	rdx_key_release(&k);
	CHECK(k.bytes == NULL && k.len == 0, "release clears the key");
	setenv("RDX_KEY", "envkey", 1);
	CHECK(rdx_key_load(&k, NULL, NULL) == 0 && k.len == 6, "key from RDX_KEY");
	rdx_key_release(&k);
	CHECK(rdx_key_load(&k, "arg", NULL) == 0 && k.len == 3, "argument beats RDX_KEY");
	rdx_key_release(&k);
	CHECK(rdx_key_load(&k, NULL, path) == 0 && k.len == 9, "key file beats RDX_KEY");
	rdx_key_release(&k);
	CHECK(rdx_key_load(&k, NULL, "/nonexistent/key") == -ENOENT, "missing key file");
	unsetenv("RDX_KEY");
	unlink(path);
}

int main(void)
{
	test_mac();
	test_seal();
	test_key_load();
	return TAP_DONE();
}
