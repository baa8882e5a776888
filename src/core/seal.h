/* AES-256-GCM for frames.  One rdx_seal per thread and direction (an
 * EVP_CIPHER_CTX is not shareable).  The 96-bit nonce is a 32-bit domain
 * (data or control) and the 64-bit sequence number, so a key never sees the
 * same nonce twice; the frame header is the associated data, which binds
 * type, stream, lengths and seq to the payload. */
#ifndef RDX_SEAL_H
#define RDX_SEAL_H

#include <stddef.h>
#include <stdint.h>

#define RDX_SEAL_DATA 0u
#define RDX_SEAL_CTRL 1u

struct rdx_seal;

/* Returns 0 or -ENOMEM/-EIO. */
int rdx_seal_new(struct rdx_seal **out, const uint8_t key[32]);
void rdx_seal_free(struct rdx_seal *s);

/* Encrypts len bytes of in into out and appends the 16-byte tag (out needs
 * len + 16 bytes; in == out is allowed).  Returns 0 or -EIO. */
int rdx_seal(struct rdx_seal *s, uint32_t domain, uint64_t seq,
	     const uint8_t *aad, size_t aad_len, const uint8_t *in, size_t len,
	     uint8_t *out);

/* Decrypts len bytes (tag included) of in into out (len - 16 bytes).
 * Returns 0, or -RDX_EINTEGRITY when the tag does not verify. */
int rdx_open(struct rdx_seal *s, uint32_t domain, uint64_t seq,
	     const uint8_t *aad, size_t aad_len, const uint8_t *in, size_t len,
	     uint8_t *out);

#endif
