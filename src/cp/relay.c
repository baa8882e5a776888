#include "cp/relay.h"

#include "cp/copy_int.h"

#include "core/err.h"
#include "core/log.h"
#include "core/progress.h"
#include "core/units.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <unistd.h>
#include <openssl/crypto.h>
#include <stdio.h>
#include <string.h>

/* One of the two far sides: its SSH session and what became of it.  All
 * of it is used from the main thread only (libssh). */
struct far {
	const char *host; /* as given, for messages */
	const char *tool; /* rdsend or rdrecv */
	struct cp_remote *r;
	bool over;    /* ended (its status known) or its SSH connection lost */
	bool stopped; /* we stopped it: its words are not the news */
};

static void far_pump(struct far *f, int wait_ms)
{
	/* Ended, or SSH lost: either way nothing more comes (the status
	 * stays -1 in the second case). */
	if (!f->over && cp_remote_pump(f->r, wait_ms) != 0)
		f->over = true;
}

static bool far_failed(const struct far *f)
{
	return f->over && cp_remote_status(f->r) != 0;
}

static void far_stop(struct far *f)
{
	if (f->over || f->stopped)
		return;
	cp_remote_terminate(f->r);
	f->stopped = true;
}

/* Keeps both channels moving until both far sides have ended.  An
 * interruption stops both; a side that fails stops the other a second
 * later (time to end on its own: both may fail for one cause, as when
 * the destination fails because the source could not read some of a
 * tree, and then both have something to say).  Once one side has ended
 * (or was stopped) the other gets a grace period to report, as cp_copy()
 * gives its one far side. */
#define RELAY_FAIL_GRACE_NS 1000000000ull
static void run_both(struct far *s, struct far *d, const struct cp_opts *o,
		     const atomic_bool *here_failed)
{
	uint64_t ms = o->xo.timeout_ms < 5000 ? o->xo.timeout_ms : 5000;
	uint64_t grace = 0, failed_at = 0, done, total;
	struct rdx_progress bar = { 0 };
	bool started = false, known;

	for (;;) {
		far_pump(s, 50);
		far_pump(d, 50);
		/* --progress: the destination's count (--progress-lines). */
		if (o->xo.progress && cp_remote_progress(d->r, &done, &total, &known)) {
			if (!started)
				rdx_progress_init(&bar, !o->quiet, known, total);
			started = true;
			rdx_progress_update(&bar, done);
		}
		if (s->over && d->over)
			break;
		if (!failed_at && (far_failed(s) || far_failed(d) ||
				   (here_failed && atomic_load(here_failed))))
			failed_at = rdx_now_ns();
		if ((o->xo.interrupted && atomic_load(o->xo.interrupted)) ||
		    (failed_at && rdx_now_ns() - failed_at >= RELAY_FAIL_GRACE_NS)) {
			far_stop(s);
			far_stop(d);
		}
		if (!grace && (s->over || d->over || s->stopped))
			grace = rdx_now_ns() + ms * 1000000;
		else if (grace && rdx_now_ns() >= grace)
			break;
	}
	if (started)
		rdx_progress_end(&bar);
}

/* The verdict once run_both() is through: prints the far sides' words
 * (those that failed on their own; all of them with -v) and one line per
 * failed side.  Returns 0, -RDX_EINTR or -RDX_EREMOTE. */
static int verdict(struct far *s, struct far *d, const struct cp_opts *o)
{
	struct far *both[2] = { s, d };
	bool intr = o->xo.interrupted && atomic_load(o->xo.interrupted);
	int i, ret = 0;

	for (i = 0; i < 2; i++) {
		struct far *f = both[i];
		int status = cp_remote_status(f->r);

		if (status == 0 || f->stopped || intr) {
			if (o->verbose && !o->quiet)
				cp_show_far_stderr(f->r, f->host);
			continue;
		}
		cp_show_far_stderr(f->r, f->host);
		if (status > 0)
			rdx_error("%s on '%s' failed (exit status %d)", f->tool,
				  f->host, status);
		else
			rdx_error("%s on '%s' ended without an exit status",
				  f->tool, f->host);
		ret = -RDX_EREMOTE;
	}
	if (intr) {
		rdx_error("interrupted");
		return -RDX_EINTR;
	}
	return ret;
}

/* What the destination's rdrecv --json line says was copied (bytes,
 * seconds, transport, streams, compress, encrypt), for rdcp's own report;
 * fields it lacks stay 0, the transport "none". */
static void far_stats(struct cp_remote *r, struct rdx_xfer_stats *st)
{
	const char *line = cp_remote_last_line(r), *p;
	unsigned long long bytes;
	unsigned streams;
	double secs;

	*st = (struct rdx_xfer_stats){ .transport = "none" };
	p = strstr(line, "\"bytes\":");
	if (p && sscanf(p + 8, "%llu", &bytes) == 1)
		st->bytes = bytes;
	p = strstr(line, "\"seconds\":");
	if (p && sscanf(p + 10, "%lf", &secs) == 1)
		st->seconds = secs;
	p = strstr(line, "\"streams\":");
	if (p && sscanf(p + 10, "%u", &streams) == 1)
		st->streams = streams;
	if (strstr(line, "\"transport\":\"rdma\""))
		st->transport = "rdma";
	else if (strstr(line, "\"transport\":\"tcp\""))
		st->transport = "tcp";
	st->compress = strstr(line, "\"compress\":true") != NULL;
	st->encrypt = strstr(line, "\"encrypt\":true") != NULL;
}

/* -3: the two hops of a relay through this host, each on a thread: from
 * the source's rdsend --server into a pipe, from the pipe to the
 * destination's rdrecv --server. */
struct hop {
	struct rdx_xfer_opts xo;
	bool send;
	struct rdx_xfer_stats st;
	int ret;
	atomic_bool *failed;
	pthread_t t;
	bool started;
};

static void *hop_main(void *arg)
{
	struct hop *h = arg;

	h->ret = h->send ? rdx_send(&h->xo, &h->st) : rdx_recv(&h->xo, &h->st);
	if (h->ret)
		atomic_store(h->failed, true);
	/* Our end of the pipe: the other hop sees its end, or EPIPE. */
	close(h->xo.fd);
	return NULL;
}

/* Both logins first (a password typed slowly for the destination must not
 * time out a source already waiting for its peer), then the source's
 * rdsend --server with key, and its port into *port.  s->r and d->r are
 * the caller's to close whatever the result. */
static int start_source(struct far *s, struct far *d, const struct cp_opts *o,
			const struct cp_addr *src, const struct cp_addr *dst,
			struct cp_cmd *scmd, const char *key, unsigned *port)
{
	int ret;

	cp_send_cmd(scmd, o, (const char *const *)&src->path, 1);
	if (!cp_cmd_str(scmd))
		return -ENOMEM;
	ret = cp_far_login(&s->r, o, src);
	if (!ret)
		ret = cp_far_login(&d->r, o, dst);
	if (!ret)
		ret = cp_remote_exec(s->r, cp_cmd_str(scmd), key);
	if (ret)
		return ret;
	ret = cp_remote_read_port(s->r, CP_FAR_WAIT_S * 1000, o->xo.interrupted, port);
	return ret ? cp_port_failed(s->r, ret, s->host, s->tool, o) : 0;
}

/* Starts the far sides as for a direct copy, but both listen, and this
 * host dials both (scp -3): for two hosts that cannot reach each other. */
static int relay_here(const struct cp_opts *o, const struct cp_addr *src,
		      const struct cp_addr *dst, struct rdx_xfer_stats *st)
{
	struct far s = { .host = src->host, .tool = "rdsend" };
	struct far d = { .host = dst->host, .tool = "rdrecv" };
	struct cp_cmd scmd = { 0 }, dcmd = { 0 };
	struct hop in = { .send = false }, out = { .send = true };
	atomic_bool failed = false;
	char skey[65] = "", dkey[65] = "", sport[8], dport[8];
	unsigned ps, pd;
	int p[2] = { -1, -1 }, ret;

	ret = cp_check_far_paths(src, dst, false);
	if (ret)
		return ret;
	ret = cp_make_key(skey);
	if (!ret)
		ret = cp_make_key(dkey);
	if (!ret)
		ret = start_source(&s, &d, o, src, dst, &scmd, skey, &ps);
	if (ret)
		goto out;
	cp_recv_cmd(&dcmd, o, dst->path, cp_basename(src->path), NULL, cp_far_mode(s.r));
	ret = !cp_cmd_str(&dcmd) ? -ENOMEM : cp_remote_exec(d.r, cp_cmd_str(&dcmd), dkey);
	if (!ret) {
		ret = cp_remote_read_port(d.r, CP_FAR_WAIT_S * 1000, o->xo.interrupted, &pd);
		if (ret)
			ret = cp_port_failed(d.r, ret, d.host, d.tool, o);
	}
	if (!ret && pipe2(p, O_CLOEXEC | O_NONBLOCK))
		ret = -errno;
	if (ret) {
		cp_remote_terminate(s.r);
		cp_remote_terminate(d.r);
		goto out;
	}
	snprintf(sport, sizeof(sport), "%u", ps);
	snprintf(dport, sizeof(dport), "%u", pd);
	in.xo = out.xo = o->xo;
	in.xo.host = o->rdma_addr ? o->rdma_addr : cp_remote_hostname(s.r);
	in.xo.port = sport;
	in.xo.key = (struct rdx_key){ (uint8_t *)skey, strlen(skey) };
	in.xo.fd = p[1];
	in.xo.fd_name = "the relay";
	out.xo.host = cp_remote_hostname(d.r);
	out.xo.port = dport;
	out.xo.key = (struct rdx_key){ (uint8_t *)dkey, strlen(dkey) };
	out.xo.fd = p[0];
	out.xo.fd_name = "the relay";
	in.xo.progress = out.xo.progress = false;
	in.failed = out.failed = &failed;
	rdx_info(1, "rdsend on %s listens on port %u, rdrecv on %s on %u: relaying through here",
		 s.host, ps, d.host, pd);
	in.started = !pthread_create(&in.t, NULL, hop_main, &in);
	out.started = in.started && !pthread_create(&out.t, NULL, hop_main, &out);
	if (!in.started)
		close(p[1]);
	if (!out.started) {
		close(p[0]);
		atomic_store(&failed, true);
	}
	run_both(&s, &d, o, &failed);
	if (in.started)
		pthread_join(in.t, NULL);
	if (out.started)
		pthread_join(out.t, NULL);
	ret = verdict(&s, &d, o);
	if (!ret && (in.ret || out.ret))
		ret = in.ret ? in.ret : out.ret;
	if (!ret && st)
		*st = out.st;
out:
	OPENSSL_cleanse(skey, sizeof(skey));
	OPENSSL_cleanse(dkey, sizeof(dkey));
	cp_remote_close(d.r);
	cp_remote_close(s.r);
	cp_cmd_release(&dcmd);
	cp_cmd_release(&scmd);
	return ret;
}

int cp_relay(const struct cp_opts *o, const struct cp_addr *src,
	     const struct cp_addr *dst, struct rdx_xfer_stats *st)
{
	struct far s = { .host = src->host, .tool = "rdsend" };
	struct far d = { .host = dst->host, .tool = "rdrecv" };
	struct cp_cmd scmd = { 0 }, dcmd = { 0 };
	struct cp_dial dial;
	char key[65] = "", *top = NULL;
	unsigned port;
	int ret;

	if (o->via_here)
		return relay_here(o, src, dst, st);
	ret = cp_check_far_paths(src, dst, o->recursive);
	if (ret)
		return ret;
	/* The source first: the destination needs its port. */
	ret = cp_make_key(key);
	if (!ret)
		ret = start_source(&s, &d, o, src, dst, &scmd, key, &port);
	if (ret)
		goto out;
	dial.host = o->rdma_addr ? o->rdma_addr : cp_remote_hostname(s.r);
	dial.port = port;
	if (o->recursive && cp_far_top(src->path, &top)) {
		cp_remote_terminate(s.r);
		ret = -ENOMEM;
		goto out;
	}
	dial.top = top;
	cp_recv_cmd(&dcmd, o, dst->path,
		    o->recursive ? NULL : cp_basename(src->path), &dial,
		    o->recursive ? 0 : cp_far_mode(s.r));
	if (!cp_cmd_str(&dcmd)) {
		cp_remote_terminate(s.r);
		ret = -ENOMEM;
		goto out;
	}
	rdx_info(1, "rdsend on %s listens on port %u; rdrecv on %s dials %s",
		 s.host, port, d.host, dial.host);
	ret = cp_remote_exec(d.r, cp_cmd_str(&dcmd), key);
	if (ret) {
		cp_remote_terminate(s.r);
		goto out;
	}
	run_both(&s, &d, o, NULL);
	ret = verdict(&s, &d, o);
	if (!ret && st)
		far_stats(d.r, st);
out:
	OPENSSL_cleanse(key, sizeof(key));
	free(top);
	cp_remote_close(d.r);
	cp_remote_close(s.r);
	cp_cmd_release(&dcmd);
	cp_cmd_release(&scmd);
	return ret;
}
