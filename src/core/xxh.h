/* xxHash as rdxfer uses it.  Every file's XXH3-128 and the end-to-end
 * hash run over every byte on both ends: on x86-64 libxxhash's runtime
 * dispatch (AVX2/AVX-512, 3-4x its SSE2 default) replaces XXH3_*() in
 * any file that includes this header instead of <xxhash.h>. */
#ifndef RDX_XXH_H
#define RDX_XXH_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <xxhash.h>
#if defined(__x86_64__)
#include <xxh_x86dispatch.h>
#endif

static inline void rdx_hash_update(XXH3_state_t *st, const void *p, size_t n)
{
	XXH3_128bits_update(st, p, n);
}

/* --resume: the end-to-end hash starts with the bytes both ends have
 * (fileio's rdx_prefix_fn, the state as arg). */
static inline void rdx_hash_prefix(void *st, const void *p, size_t n)
{
	rdx_hash_update(st, p, n);
}

/* The XXH3-128 of what the hash state has seen so far, canonical. */
static inline void rdx_hash_digest(XXH3_state_t *st, uint8_t out[16])
{
	XXH128_canonical_t c;

	XXH128_canonicalFromHash(&c, XXH3_128bits_digest(st));
	memcpy(out, c.digest, 16);
}

#endif
