/* SPAKE2 (RFC 9382), ciphersuite SPAKE2-P256-SHA256-HKDF-HMAC, on
 * OpenSSL's EC arithmetic: a password-authenticated key exchange over the
 * shared key.  Each side sends one share; what a peer sees of a run lets
 * it test at most the one key it used itself, never a guess offline.
 *
 *   A (the sender)   -> pA = x*G + w*M
 *   B (the receiver) -> pB = y*G + w*N, cB      A checks cB
 *   A                -> cA                      B checks cA
 *
 * K = x*(pB - w*N) = y*(pA - w*M); TT is RFC 9382's transcript over the
 * identities, both shares, K and w; Ke || Ka = SHA-256(TT);
 * KcA || KcB = HKDF(Ka, "ConfirmationKeys" || AAD); cA = HMAC(KcA, TT),
 * cB = HMAC(KcB, TT).  Ke is the session's key.
 *
 * The state is a plain value (no allocation), so a listener can keep one
 * per connection it has greeted and hand it over with the connection.
 * Only libcrypto: the test peers link this file on its own. */
#ifndef RDX_PAKE_H
#define RDX_PAKE_H

#include <stddef.h>
#include <stdint.h>

#define RDX_PAKE_SCALAR_LEN  32
#define RDX_PAKE_SHARE_LEN   65 /* an uncompressed P-256 point */
#define RDX_PAKE_CONFIRM_LEN 32
#define RDX_PAKE_KEY_LEN     16 /* Ke */

enum rdx_pake_role {
	RDX_PAKE_A, /* masks with M; rdxfer's sender */
	RDX_PAKE_B, /* masks with N; rdxfer's receiver */
};

struct rdx_pake {
	enum rdx_pake_role role;
	uint8_t w[RDX_PAKE_SCALAR_LEN];	     /* the password as a scalar */
	uint8_t secret[RDX_PAKE_SCALAR_LEN]; /* x or y */
	uint8_t share[RDX_PAKE_SHARE_LEN];   /* pA or pB, as sent */
};

/* What one run yields; the same on both sides when the keys matched. */
struct rdx_pake_result {
	uint8_t ke[RDX_PAKE_KEY_LEN];
	uint8_t conf_a[RDX_PAKE_CONFIRM_LEN]; /* A sends it, B checks it */
	uint8_t conf_b[RDX_PAKE_CONFIRM_LEN]; /* B sends it, A checks it */
};

/* Identities and associated data bound into the run (may be empty). */
struct rdx_pake_ctx {
	const void *id_a;
	size_t id_a_len;
	const void *id_b;
	size_t id_b_len;
	const void *aad;
	size_t aad_len;
};

/* w from a shared key of any length: SHA-512 over a label and the key,
 * reduced modulo the group order (a bias below 2^-256).  Both sides hold
 * the key itself, so no stored verifier needs a memory-hard function.
 * Returns 0 or -EIO. */
int rdx_pake_w(const void *key, size_t len, uint8_t w[RDX_PAKE_SCALAR_LEN]);

/* Starts one side: a fresh secret scalar, and the share to send in
 * p->share.  Returns 0 or -EIO. */
int rdx_pake_start(struct rdx_pake *p, enum rdx_pake_role role, const void *key,
		   size_t len);

/* The same with w already derived from the key (rdx_pake_w), for a side
 * that starts many runs with one key.  Returns 0 or -EIO. */
int rdx_pake_start_w(struct rdx_pake *p, enum rdx_pake_role role,
		     const uint8_t w[RDX_PAKE_SCALAR_LEN]);

/* The same with w and the secret scalar given (the RFC's test vectors).
 * Returns 0, -EINVAL for a scalar that is 0 or not below the order, or
 * -EIO. */
int rdx_pake_start_with(struct rdx_pake *p, enum rdx_pake_role role,
			const uint8_t w[RDX_PAKE_SCALAR_LEN],
			const uint8_t secret[RDX_PAKE_SCALAR_LEN]);

/* Finishes with the peer's share.  Returns 0 (r filled), -EINVAL for a
 * share that is not a point of the curve, is the identity, or unmasks to
 * it, or -EIO. */
int rdx_pake_finish(const struct rdx_pake *p, const struct rdx_pake_ctx *ctx,
		    const uint8_t peer[RDX_PAKE_SHARE_LEN],
		    struct rdx_pake_result *r);

/* Compares a confirmation in constant time; 1 when it matches. */
int rdx_pake_confirm_ok(const uint8_t want[RDX_PAKE_CONFIRM_LEN],
			const uint8_t got[RDX_PAKE_CONFIRM_LEN]);

/* Wipes the state or the result. */
void rdx_pake_clear(struct rdx_pake *p);
void rdx_pake_result_clear(struct rdx_pake_result *r);

#endif
