/* What rdpipe runs where: the SEGMENTs of its command line, and rdpipe's
 * own standard input and output where the data must cross a hop to reach
 * them, as nodes in a row.  Between two neighbours there is one hop, and
 * the plan says which of the two listens:
 *
 *   remote ─▶ remote, local ─▶ any   the one downstream listens, the one
 *                                    upstream dials when its data is
 *                                    ready (after a drain, say)
 *   remote ─▶ local                  the remote one listens, and this
 *                                    host dials it: it never needs to be
 *                                    reachable itself, as with rdcp
 *
 * Pure: no I/O, for the unit tests. */
#ifndef RDX_PIPE_PLAN_H
#define RDX_PIPE_PLAN_H

#include "pipe/seg.h"

#include <stdbool.h>

struct pp_node {
	bool local;
	char *user;  /* remote: NULL for the config's */
	char *host;  /* remote, brackets removed */
	const char *label; /* for messages: the host as given, "localhost",
			    * or "stdin"/"stdout" for rdpipe's own */
	int seg;     /* its SEGMENT's number from 1; 0 for stdin and stdout */
	enum pp_op op;
	char *arg;   /* the command, or the operator's file */
	bool drain;  /* its input is a '>' segment's empty stream */
	enum pp_end in, out; /* PP_FD: rdpipe's stdin (in) or stdout (out) */
};

struct pp_plan {
	struct pp_node *node;
	int n;
};

/* Builds the plan for segs[0..nseg), where stdin_data says whether
 * rdpipe's stdin feeds the first segment (it is no terminal).  Prints
 * one usage error and returns -RDX_EUSAGE for a malformed SEGMENT
 * (no "host:" part, an operator with no file); -ENOMEM; 0. */
int pp_plan_build(struct pp_plan *p, char *const *segs, int nseg, bool stdin_data);

void pp_plan_release(struct pp_plan *p);

/* Parses one SEGMENT into n (local or remote, op, arg).  Returns 0,
 * -EINVAL (malformed: the caller says why) or -ENOMEM. */
int pp_segment_parse(const char *arg, struct pp_node *n);

#endif
