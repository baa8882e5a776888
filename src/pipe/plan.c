#include "pipe/plan.h"

#include "cp/addr.h"

#include "core/err.h"
#include "core/log.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static void node_release(struct pp_node *n)
{
	free(n->user);
	free(n->host);
	free(n->arg);
}

void pp_plan_release(struct pp_plan *p)
{
	for (int i = 0; i < p->n; i++)
		node_release(&p->node[i]);
	free(p->node);
	p->node = NULL;
	p->n = 0;
}

/* The operator at the start of a command ("<", ">>", ">"), and its file:
 * the rest, blanks trimmed at both ends.  -EINVAL for no file. */
static int parse_op(const char *cmd, struct pp_node *n)
{
	const char *p = cmd + strspn(cmd, " \t"), *end;

	n->op = PP_CMD;
	if (*p == '<') {
		n->op = PP_IN;
		p++;
	} else if (!strncmp(p, ">>", 2)) {
		n->op = PP_APPEND;
		p += 2;
	} else if (*p == '>') {
		n->op = PP_OUT;
		p++;
	} else {
		n->arg = strdup(cmd);
		return n->arg ? 0 : -ENOMEM;
	}
	p += strspn(p, " \t");
	end = p + strlen(p);
	while (end > p && (end[-1] == ' ' || end[-1] == '\t'))
		end--;
	if (end == p)
		return -EINVAL;
	n->arg = strndup(p, (size_t)(end - p));
	return n->arg ? 0 : -ENOMEM;
}

int pp_segment_parse(const char *arg, struct pp_node *n)
{
	struct cp_addr a;
	int ret;

	memset(n, 0, sizeof(*n));
	if (arg[0] == ':') {
		n->local = true;
		n->label = "localhost";
		return parse_op(arg + 1, n);
	}
	ret = cp_addr_parse(arg, &a);
	if (ret)
		return ret;
	if (!a.remote || a.port) { /* scp:// names a file, not a command */
		cp_addr_release(&a);
		return -EINVAL;
	}
	if (!a.user && !strcmp(a.host, "localhost")) {
		n->local = true;
		n->label = "localhost";
		free(a.host);
		a.host = NULL;
	}
	n->user = a.user;
	n->host = a.host;
	n->label = n->local ? "localhost" : n->host;
	ret = parse_op(a.path, n);
	free(a.path);
	if (ret) {
		node_release(n);
		memset(n, 0, sizeof(*n));
	}
	return ret;
}

/* rdpipe's own stdin (op '<' of "-") or stdout ('>' of "-"). */
static int own_node(struct pp_node *n, bool in)
{
	memset(n, 0, sizeof(*n));
	n->local = true;
	n->label = in ? "stdin" : "stdout";
	n->op = in ? PP_IN : PP_OUT;
	n->arg = strdup("-");
	return n->arg ? 0 : -ENOMEM;
}

int pp_plan_build(struct pp_plan *p, char *const *segs, int nseg, bool stdin_data)
{
	struct pp_node *first, *last;
	int i, k = 0, ret;

	memset(p, 0, sizeof(*p));
	p->node = calloc((size_t)nseg + 2, sizeof(*p->node));
	if (!p->node)
		return -ENOMEM;
	/* Room for stdin first; moved down below when it is not needed. */
	k = 1;
	for (i = 0; i < nseg; i++, k++) {
		ret = pp_segment_parse(segs[i], &p->node[k]);
		p->n = k + 1;
		if (ret == -EINVAL) {
			rdx_error("invalid segment '%s': expected [user@]host:CMD, :CMD, or an operator with its file (<FILE, >FILE, >>FILE)",
				  segs[i]);
			ret = -RDX_EUSAGE;
		}
		if (ret)
			goto err;
		p->node[k].seg = i + 1;
	}
	first = &p->node[1];
	last = &p->node[k - 1];
	/* stdin: straight into a local command, through a hop to anything
	 * else, never into a '<' (which reads its file instead). */
	if (!stdin_data || first->op == PP_IN || (first->local && first->op == PP_CMD)) {
		if (stdin_data && first->op == PP_CMD)
			first->in = PP_FD;
		memmove(p->node, p->node + 1, (size_t)(k - 1) * sizeof(*p->node));
		memset(&p->node[k - 1], 0, sizeof(*p->node));
		k--;
		last = &p->node[k - 1];
	} else if ((ret = own_node(&p->node[0], true))) {
		goto err;
	}
	p->n = k;
	/* stdout: a local command's straight, a '>' sends nothing on. */
	if (last->local && last->op == PP_CMD) {
		last->out = PP_FD;
	} else if (last->op == PP_CMD || last->op == PP_IN) {
		if ((ret = own_node(&p->node[k], false)))
			goto err;
		p->n = ++k;
	}
	for (i = 0; i + 1 < p->n; i++) {
		struct pp_node *u = &p->node[i], *d = &p->node[i + 1];

		if (!u->local && d->local) {
			u->out = PP_LISTEN;
			d->in = PP_DIAL;
		} else {
			u->out = PP_DIAL;
			d->in = PP_LISTEN;
		}
		d->drain = d->op == PP_CMD && (u->op == PP_OUT || u->op == PP_APPEND);
	}
	return 0;
err:
	pp_plan_release(p);
	return ret;
}
