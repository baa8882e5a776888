#include "core/zpack.h"

#include "core/err.h"

#include <errno.h>
#include <stdlib.h>
#include <zstd.h>

struct rdx_zpack {
	ZSTD_CCtx *c;
	ZSTD_DCtx *d;
	int level;
};

int rdx_zpack_new(struct rdx_zpack **out, int level)
{
	struct rdx_zpack *z = calloc(1, sizeof(*z));

	if (!z)
		return -ENOMEM;
	z->c = ZSTD_createCCtx();
	z->d = ZSTD_createDCtx();
	if (!z->c || !z->d) {
		rdx_zpack_free(z);
		return -ENOMEM;
	}
	z->level = level;
	*out = z;
	return 0;
}

void rdx_zpack_free(struct rdx_zpack *z)
{
	if (!z)
		return;
	ZSTD_freeCCtx(z->c);
	ZSTD_freeDCtx(z->d);
	free(z);
}

ssize_t rdx_zpack_compress(struct rdx_zpack *z, const void *in, size_t len,
			   void *out, size_t cap)
{
	size_t n = ZSTD_compressCCtx(z->c, out, cap, in, len, z->level);

	/* out holds ZSTD_compressBound(len): an error is never "too small". */
	if (ZSTD_isError(n))
		return -EIO;
	return n < len ? (ssize_t)n : 0;
}

int rdx_zpack_decompress(struct rdx_zpack *z, const void *in, size_t len,
			 void *out, size_t want)
{
	size_t n = ZSTD_decompressDCtx(z->d, out, want, in, len);

	if (ZSTD_isError(n) || n != want)
		return -RDX_EPROTO;
	return 0;
}
