/* rdpipe's plan (src/pipe/plan.c): SEGMENTs parsed, rdpipe's own stdin
 * and stdout added where a hop must reach them, and who listens on each
 * hop, so that this host never has to be reachable from a far one. */
#include "pipe/plan.h"
#include "core/err.h"
#include "core/log.h"
#include "tap.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static bool seg_is(const char *arg, bool local, const char *user, const char *host,
		   enum pp_op op, const char *a)
{
	struct pp_node n;
	bool ok;

	if (pp_segment_parse(arg, &n))
		return false;
	ok = n.local == local && n.op == op && !strcmp(n.arg, a) &&
	     ((!user && !n.user) || (user && n.user && !strcmp(user, n.user))) &&
	     ((!host && !n.host) || (host && n.host && !strcmp(host, n.host)));
	free(n.user);
	free(n.host);
	free(n.arg);
	return ok;
}

static bool seg_bad(const char *arg)
{
	struct pp_node n;

	return pp_segment_parse(arg, &n) == -EINVAL;
}

/* The plan as one string: per node "L" or "R", its op (c < > a), its
 * in and out ends (n f l d), and "D" for a drain; "|" between nodes. */
static bool plan_is(const char *const *segs, int n, bool stdin_data, const char *want)
{
	struct pp_plan p;
	char got[256] = "", one[16];
	static const char ends[] = "nfld", ops[] = "c<>a";

	if (pp_plan_build(&p, (char *const *)segs, n, stdin_data))
		return false;
	for (int i = 0; i < p.n; i++) {
		snprintf(one, sizeof(one), "%s%c%c%c%c%s", i ? "|" : "", p.node[i].local ? 'L' : 'R',
			 ops[p.node[i].op], ends[p.node[i].in], ends[p.node[i].out],
			 p.node[i].drain ? "D" : "");
		strcat(got, one);
	}
	pp_plan_release(&p);
	if (strcmp(got, want))
		printf("# got %s, want %s\n", got, want);
	return !strcmp(got, want);
}

int main(void)
{
	rdx_log_init("test_pipe", -1);
	CHECK(seg_is("host:wc -c", false, NULL, "host", PP_CMD, "wc -c"), "host:CMD");
	CHECK(seg_is("u@h:zfs send tank/a@b", false, "u", "h", PP_CMD, "zfs send tank/a@b"),
	      "user@host:CMD with '/' and '@' in it");
	CHECK(seg_is("[::1]:cat", false, NULL, "::1", PP_CMD, "cat"), "[v6]:CMD");
	CHECK(seg_is(":sort", true, NULL, NULL, PP_CMD, "sort"), ":CMD is local");
	CHECK(seg_is("localhost:sort", true, NULL, NULL, PP_CMD, "sort"), "localhost:CMD is local");
	CHECK(seg_is("me@localhost:sort", false, "me", "localhost", PP_CMD, "sort"),
	      "user@localhost logs in");
	CHECK(seg_is("h:< my file ", false, NULL, "h", PP_IN, "my file"), "<FILE, blanks trimmed");
	CHECK(seg_is("h: >out", false, NULL, "h", PP_OUT, "out"), ">FILE after a blank");
	CHECK(seg_is("h:>>log", false, NULL, "h", PP_APPEND, "log"), ">>FILE");
	CHECK(seg_bad("h:<"), "'<' without a file");
	CHECK(seg_bad("h:>>  "), "'>>' without a file");
	CHECK(seg_bad("justacommand"), "no host:");
	CHECK(seg_bad("dir/x:cmd"), "a '/' before ':' is no host");

	{
		const char *one[] = { "a:wc -c" };
		const char *mid[] = { "a:cat", ":sort", "b:cat" };
		const char *two[] = { "a:cat", "b:cat" };
		const char *file[] = { "a:<f", "b:tr a b", "c:>g" };
		const char *seq[] = { "a:>f", "a:cat f", "a:<f" };
		const char *loc[] = { ":cat" };
		const char *outfirst[] = { ":>f" };

		CHECK(plan_is(one, 1, true, "L<nd|Rcll|L>dn"),
		      "stdin -> a -> stdout: a listens both ways, this host dials");
		CHECK(plan_is(one, 1, false, "Rcnl|L>dn"), "a terminal on stdin: no input hop");
		CHECK(plan_is(two, 2, false, "Rcnd|Rcll|L>dn"), "a dials b (downstream listens)");
		CHECK(plan_is(mid, 3, true, "L<nd|Rcll|Lcdd|Rcll|L>dn"),
		      "a local segment in the middle dials both neighbours");
		CHECK(plan_is(file, 3, true, "R<nd|Rcld|R>ln"),
		      "'<' ignores stdin, '>' sends nothing to stdout");
		CHECK(plan_is(seq, 3, false, "R>nd|RcldD|R<ll|L>dn"),
		      "after a '>' the next command drains first");
		CHECK(plan_is(loc, 1, true, "Lcff"), "one local command: stdin and stdout directly");
		CHECK(plan_is(outfirst, 1, true, "L<nd|L>ln"), "a local '>' gets stdin through a hop");
	}
	return TAP_DONE();
}
