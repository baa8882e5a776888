/* libFuzzer target: DATA payloads after the frame header was accepted.
 * A hostile or corrupted frame must never decompress past its slot, never
 * come out of AES-GCM as plaintext without the right tag, and never crash. */
#include "fuzz.h"
#include "core/err.h"
#include "core/proto.h"
#include "core/seal.h"
#include "core/zpack.h"

#include <stdlib.h>
#include <string.h>

#define SLOT 65536

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct rdx_zpack *z;
	static struct rdx_seal *seal;
	static uint8_t out[SLOT], aad[RDX_HDR_LEN];
	static const uint8_t key[32] = { 1, 2, 3 };
	size_t want;

	if (!z && rdx_zpack_new(&z, 1))
		abort();
	if (!seal && rdx_seal_new(&seal, key))
		abort();
	if (size < 2)
		return 0;
	/* The first two bytes pick the plain length the header claimed. */
	want = ((size_t)data[0] << 8 | data[1]) % SLOT + 1;
	data += 2;
	size -= 2;
	if (size > SLOT + RDX_TAG_LEN)
		return 0;
	if (rdx_zpack_decompress(z, data, size, out, want) == 0) {
		/* Accepted only when it decodes to exactly the claimed length;
		 * compressing it again must round-trip. */
		static uint8_t again[SLOT + 1024], back[SLOT];
		ssize_t n = rdx_zpack_compress(z, out, want, again, sizeof(again));

		if (n < 0)
			abort();
		if (n > 0 && (rdx_zpack_decompress(z, again, (size_t)n, back, want) ||
			      memcmp(back, out, want)))
			abort();
	}
	/* Random bytes never pass as a sealed frame (2^-128). */
	if (size >= RDX_TAG_LEN &&
	    rdx_open(seal, RDX_SEAL_DATA, 7, aad, sizeof(aad), data, size, out) !=
		    -RDX_EINTEGRITY)
		abort();
	return 0;
}
