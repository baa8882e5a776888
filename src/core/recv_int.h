/* The receiving side of a transfer, in two files: recv.c (the
 * pipeline: streams, the writer, the file or tree, --sync and --resume
 * answers, the end) and recv_hs.c (finding the sender and its
 * handshake).  What they share is here. */
#ifndef RDX_RECV_INT_H
#define RDX_RECV_INT_H

#include "core/xfer_int.h"

#include "core/err.h"
#include "core/fileio.h"
#include "core/log.h"
#include "core/tree/tree.h"
#include "core/units.h"
#include "core/zpack.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>



struct receiver {
	struct rdx_session s;
	struct rdx_sink *sink;
	struct rdx_tree_unpack *tree; /* -r: the thread reading sink's pipe */
	pthread_t writers[64];
	unsigned nwriters;
	atomic_uint writers_done;
	bool committed; /* the file is in place and DONE sent; s.lock */
	atomic_uint streams_done;
	bool eos_seen; /* s.lock */
	struct rdx_eos eos;
	/* --resume: the partial's bytes from the start, as its record says
	 * (until the sender agrees), then where this run's data starts */
	bool partial;
	uint64_t have, start;
	pthread_mutex_t mark_lock;
	uint64_t marked;		/* mark_lock */
	_Atomic uint64_t marked_ns;	/* written under mark_lock */
};

/* Opens the output and the ring once the sender is authenticated.  A
 * failure here ends rdrecv (the sender is told why). */
int rx_prepare(struct receiver *x);

/* Finds the sender: a listener takes connections until one passes the
 * handshake (strays and wrong keys are logged and dropped) or --wait runs
 * out; a dialer connects once, and any failure ends it.  Then settles the
 * session with it (ACCEPT).  Returns 0 or an error (recorded). */
int rx_meet_sender(struct receiver *x);

#endif
