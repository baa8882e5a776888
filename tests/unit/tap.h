/* A minimal TAP producer for the unit tests: one "ok"/"not ok" line per
 * check, so tests/run.sh can count them next to the bats results. */
#ifndef RDX_TAP_H
#define RDX_TAP_H

#include <stdio.h>

static int tap_n, tap_failed;

#define CHECK(cond, ...)                                                       \
	do {                                                                   \
		tap_n++;                                                       \
		if (cond) {                                                    \
			printf("ok %d - ", tap_n);                             \
		} else {                                                       \
			tap_failed++;                                          \
			printf("not ok %d - %s:%d: ", tap_n, __FILE__, __LINE__); \
		}                                                              \
		printf(__VA_ARGS__);                                           \
		printf("\n");                                                  \
	} while (0)

#define TAP_DONE() (printf("1..%d\n", tap_n), tap_failed ? 1 : 0)

#endif
