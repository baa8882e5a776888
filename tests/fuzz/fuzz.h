/* What every libFuzzer target here shares: the entry point's prototype and
 * CHECK, which turns a broken promise of the code under test into a crash
 * libFuzzer reports (ASan catches the rest). */
#ifndef RDX_FUZZ_H
#define RDX_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#define CHECK(c)                                                               \
	do {                                                                   \
		if (!(c))                                                      \
			abort();                                               \
	} while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#endif
