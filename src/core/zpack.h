/* zstd compression of one slot at a time.  Each chunk is an independent
 * zstd frame, so chunks can be (de)compressed by any thread in any order. */
#ifndef RDX_ZPACK_H
#define RDX_ZPACK_H

#include <stddef.h>
#include <sys/types.h>

struct rdx_zpack;

/* Returns 0 or -ENOMEM.  level 1..19 for compression; any for decoding. */
int rdx_zpack_new(struct rdx_zpack **out, int level);
void rdx_zpack_free(struct rdx_zpack *z);

/* Compresses len bytes into out (cap bytes).  Returns the compressed size,
 * 0 when compression would not make the chunk smaller (send it raw), or
 * -EIO. */
ssize_t rdx_zpack_compress(struct rdx_zpack *z, const void *in, size_t len,
			   void *out, size_t cap);

/* Decompresses exactly want bytes into out.  Returns 0, or -RDX_EPROTO if
 * the frame is corrupt or does not hold exactly want bytes. */
int rdx_zpack_decompress(struct rdx_zpack *z, const void *in, size_t len,
			 void *out, size_t want);

#endif
