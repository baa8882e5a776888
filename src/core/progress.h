/* A progress line on stderr: bytes, percentage and ETA when the total is
 * known, rate always.  Redrawn at most a few times a second, only on a tty. */
#ifndef RDX_PROGRESS_H
#define RDX_PROGRESS_H

#include <stdbool.h>
#include <stdint.h>

struct rdx_progress {
	bool on;
	bool lines;	/* rdx_progress_init_lines() */
	bool total_known;
	uint64_t total;
	uint64_t start_ns;
	uint64_t last_ns;
	bool drawn;
};

/* Turns the display on when wanted and stderr is a terminal. */
void rdx_progress_init(struct rdx_progress *p, bool wanted, bool total_known,
		       uint64_t total);

/* For a program that shows the progress of ours (rdcp, of its far
 * rdrecv): twice a second a line "RDX-PROGRESS DONE TOTAL" on stderr,
 * TOTAL "-" when unknown, whatever stderr is. */
void rdx_progress_init_lines(struct rdx_progress *p, bool total_known, uint64_t total);

/* Redraws if enough time passed since the last draw. */
void rdx_progress_update(struct rdx_progress *p, uint64_t done);

/* Clears the line. */
void rdx_progress_end(struct rdx_progress *p);

#endif
