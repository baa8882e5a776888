/* One segment of an rdpipe pipeline where it runs: on a far host as
 * "rdpipe --far" (started over SSH), or here on a thread of rdpipe.  It
 * runs its command (or its file operator) between two hops, each an
 * rdxfer transfer of its own with its own key:
 *
 *   hop in ══▶ [ rdx_recv ─▶ pipe ─▶ $SHELL -c CMD ─▶ pipe ─▶ rdx_send ] ══▶ hop out
 *
 *   <FILE   the input, if any, is read to its end first and dropped; then
 *           FILE goes out (the core's file I/O, O_DIRECT where it pays)
 *   >FILE   the input is written to FILE (a temporary, renamed once whole);
 *   >>FILE  appended to FILE; then an empty stream goes out
 *
 * A segment whose input is the empty stream of a '>' before it (drain)
 * waits for that stream to end, then runs its command with nothing on
 * stdin: a new pipeline after the one before, as rdma-pipe has it. */
#ifndef RDX_PIPE_SEG_H
#define RDX_PIPE_SEG_H

#include "core/xfer.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/types.h>

enum pp_op { PP_CMD, PP_IN, PP_OUT, PP_APPEND };

/* One end of a hop, as this segment holds it. */
enum pp_end {
	PP_NONE,   /* no hop: stdin /dev/null, stdout dropped */
	PP_FD,	   /* a descriptor of rdpipe's own (its stdin, its stdout),
		    * the command's directly */
	PP_LISTEN, /* listens on a free port, reported by on_port */
	PP_DIAL,   /* dials host:port (the port may come late: pp_seg_dial) */
};

struct pp_hop_end {
	enum pp_end how;
	int fd;			 /* PP_FD */
	const char *host;	 /* PP_DIAL */
	char port[8];		 /* PP_DIAL: "" until known */
	struct rdx_key key;	 /* the hop's own session key */
};

struct pp_seg {
	enum pp_op op;
	const char *arg;   /* the command (PP_CMD) or the file */
	const char *shell; /* runs the command: "$SHELL -c CMD" */
	bool drain;	   /* see above */
	struct pp_hop_end in, out;
	struct rdx_xfer_opts xo; /* what every hop shares: transport, timeouts */
	const char *listen_bind; /* the address a PP_LISTEN end binds (NULL: any) */
	bool in_progress;	 /* the input draws the progress bar (xo.progress
				  * or xo.progress_lines) */
	/* Called (from any thread) once a PP_LISTEN end listens. */
	void (*on_port)(void *arg, bool in, unsigned port);
	void *cb_arg;
	atomic_int stop; /* pp_seg_stop() */
	pthread_mutex_t mu;
	pthread_cond_t cv;
};

struct pp_result {
	/* The command's exit status (128 + N when signal N killed it), 0
	 * for the operators, -1 when it never ran. */
	int status;
	int sig;	/* the signal that killed it, 0 otherwise */
	bool killed;	/* we killed it (a stop, or a hop that failed) */
	int in_ret, out_ret; /* the hops: 0 or a negative error */
	struct rdx_xfer_stats in, out;
};

/* Fills s with the defaults (no hops, xo from rdx_xfer_opts_init). */
void pp_seg_init(struct pp_seg *s);
void pp_seg_release(struct pp_seg *s);

/* Runs the segment to its end: spawns the command in a process group of
 * its own, moves both hops, reaps it.  A failing hop or pp_seg_stop()
 * kills the command's group (TERM, KILL 2 s later) before its stdin
 * ends, so that it never takes a cut stream for a whole one.  Errors are
 * printed (one line each).  Returns 0 when the command and both hops
 * succeeded, else -1; r says what happened. */
int pp_seg_run(struct pp_seg *s, struct pp_result *r);

/* The port of a PP_DIAL input known late (rdpipe: a far segment before
 * this local one listens only once its output is ready). */
void pp_seg_dial(struct pp_seg *s, unsigned port);

/* Asks the segment to end now (the pipeline is torn down). */
void pp_seg_stop(struct pp_seg *s);

/* The exit status a segment reports: the command's when it failed, else
 * the first failed hop's (rdx_exit_code), else 0. */
int pp_result_exit(const struct pp_result *r);

#endif
