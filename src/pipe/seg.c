#include "pipe/seg.h"

#include "core/err.h"
#include "core/log.h"
#include "core/units.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

#define KILL_GRACE_MS 2000 /* TERM, then KILL this much later */
#define PIPE_BYTES (1 << 20)

/* One run: the segment, its command and the descriptors between them. */
struct run {
	struct pp_seg *s;
	struct pp_result *r;
	pid_t pid;	  /* the command, leader of its own group; 0: none */
	int to_cmd;	  /* our end of its stdin pipe, -1 */
	int from_cmd;	  /* our end of its stdout pipe, -1 */
	int append_fd;	  /* >>FILE, -1 */
	atomic_bool kill; /* a hop failed: the command must not finish */
	atomic_bool gone; /* reaped, its group empty: its id is no longer ours */
	pthread_t in_thread, out_thread;
	bool in_async, out_async;
};

void pp_seg_init(struct pp_seg *s)
{
	memset(s, 0, sizeof(*s));
	rdx_xfer_opts_init(&s->xo);
	s->shell = "/bin/sh";
	pthread_mutex_init(&s->mu, NULL);
	pthread_cond_init(&s->cv, NULL);
}

void pp_seg_release(struct pp_seg *s)
{
	rdx_key_release(&s->in.key);
	rdx_key_release(&s->out.key);
	pthread_cond_destroy(&s->cv);
	pthread_mutex_destroy(&s->mu);
}

void pp_seg_dial(struct pp_seg *s, unsigned port)
{
	pthread_mutex_lock(&s->mu);
	snprintf(s->in.port, sizeof(s->in.port), "%u", port);
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mu);
}

void pp_seg_stop(struct pp_seg *s)
{
	pthread_mutex_lock(&s->mu);
	atomic_store(&s->stop, 1);
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mu);
}

int pp_result_exit(const struct pp_result *r)
{
	if (r->status > 0)
		return r->status;
	if (r->in_ret)
		return rdx_exit_code(r->in_ret);
	if (r->out_ret)
		return rdx_exit_code(r->out_ret);
	return 0;
}

/* A PP_DIAL end's port, waited for; false once stopped. */
static bool wait_port(struct pp_seg *s, struct pp_hop_end *e)
{
	bool ok;

	pthread_mutex_lock(&s->mu);
	while (!e->port[0] && !atomic_load(&s->stop))
		pthread_cond_wait(&s->cv, &s->mu);
	ok = e->port[0] != '\0';
	pthread_mutex_unlock(&s->mu);
	return ok && !atomic_load(&s->stop);
}

struct listen_cb {
	struct pp_seg *s;
	bool in;
};

static void listened(unsigned port, void *arg)
{
	struct listen_cb *l = arg;

	if (l->s->on_port)
		l->s->on_port(l->s->cb_arg, l->in, port);
}

/* One hop: the input (rdx_recv into fd or path) or the output (rdx_send
 * from fd or path).  Returns 0 or the core's error (printed). */
static int hop(struct pp_seg *s, bool in, int fd, const char *path, const char *name,
	       struct rdx_xfer_stats *st)
{
	struct pp_hop_end *e = in ? &s->in : &s->out;
	struct listen_cb l = { s, in };
	struct rdx_xfer_opts xo = s->xo;
	int ret;

	xo.key = e->key;
	xo.interrupted = &s->stop;
	xo.fd = fd;
	xo.fd_name = name;
	xo.path = path;
	if (!in || !s->in_progress)
		xo.progress = xo.progress_lines = false;
	if (e->how == PP_LISTEN) {
		xo.host = NULL;
		xo.port = "0";
		xo.bind = s->listen_bind;
		xo.wait_ms = 0; /* the pipeline's end, not a clock, stops it */
		xo.on_listen = listened;
		xo.on_listen_arg = &l;
	} else {
		if (!wait_port(s, e)) {
			rdx_error("interrupted");
			return -RDX_EINTR;
		}
		xo.host = e->host;
		xo.port = e->port;
	}
	ret = in ? rdx_recv(&xo, st) : rdx_send(&xo, st);
	if (ret)
		st->seconds = 0; /* no session, or a cut one: no rate */
	return ret;
}

static void kill_cmd(struct run *u, int sig)
{
	if (u->pid > 0 && !atomic_load(&u->gone))
		kill(-u->pid, sig);
}

/* One hop around the command, on a thread of its own while the command
 * runs and is reaped: our end of its pipe is closed once the stream is
 * whole, and only after the command (with what it left holding the
 * pipe) was killed when it is not, so that it never takes a cut stream
 * for a whole one. */
static void run_hop(struct run *u, bool in)
{
	int *fd = in ? &u->to_cmd : &u->from_cmd;
	int *ret = in ? &u->r->in_ret : &u->r->out_ret;

	*ret = hop(u->s, in, *fd, NULL, in ? "the command's input" : "the command's output",
		   in ? &u->r->in : &u->r->out);
	if (*ret) {
		atomic_store(&u->kill, true);
		kill_cmd(u, SIGTERM);
	}
	close(*fd);
	*fd = -1;
}

static void *in_main(void *arg)
{
	run_hop(arg, true);
	return NULL;
}

static void *out_main(void *arg)
{
	run_hop(arg, false);
	return NULL;
}

/* A pipe with our end (ours: 1 for the write end) non-blocking, both
 * close-on-exec (the child gets its end by dup2).  0 or -errno. */
static int cmd_pipe(int p[2], int ours)
{
	if (pipe2(p, O_CLOEXEC))
		return -errno;
	fcntl(p[ours], F_SETFL, fcntl(p[ours], F_GETFL) | O_NONBLOCK);
	fcntl(p[ours], F_SETPIPE_SZ, PIPE_BYTES); /* as much as allowed */
	return 0;
}

/* Starts "$SHELL -c CMD" in a process group of its own, its stdin and
 * stdout on in_fd and out_fd (-1: /dev/null), stderr ours, signals at
 * their defaults.  0 or -errno. */
static int spawn_cmd(struct run *u, int in_fd, int out_fd)
{
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t at;
	sigset_t def, none;
	char *argv[] = { (char *)u->s->shell, "-c", (char *)u->s->arg, NULL };
	int ret;

	posix_spawn_file_actions_init(&fa);
	posix_spawnattr_init(&at);
	if (in_fd >= 0)
		posix_spawn_file_actions_adddup2(&fa, in_fd, 0);
	else
		posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	if (out_fd >= 0)
		posix_spawn_file_actions_adddup2(&fa, out_fd, 1);
	else
		posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
	sigemptyset(&none);
	sigemptyset(&def);
	sigaddset(&def, SIGPIPE);
	sigaddset(&def, SIGINT);
	sigaddset(&def, SIGTERM);
	sigaddset(&def, SIGHUP);
	sigaddset(&def, SIGQUIT);
	posix_spawnattr_setsigdefault(&at, &def);
	posix_spawnattr_setsigmask(&at, &none);
	posix_spawnattr_setpgroup(&at, 0);
	posix_spawnattr_setflags(&at, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGDEF |
					      POSIX_SPAWN_SETSIGMASK);
	ret = posix_spawn(&u->pid, u->s->shell, &fa, &at, argv, environ);
	posix_spawnattr_destroy(&at);
	posix_spawn_file_actions_destroy(&fa);
	if (ret) {
		u->pid = 0;
		return -ret;
	}
	return 0;
}

/* Reaps the command, then what it left running in its group (a
 * "tee >(zfs recv ...)"'s reader), as ssh waits for them: the segment
 * is done when they are.  A command that failed takes them along, and a
 * stop or a failed hop kills the whole group: TERM, then KILL after
 * KILL_GRACE_MS.  The group's orphans are ours to reap (pp_seg_run makes
 * this process their subreaper). */
static void reap(struct run *u)
{
	uint64_t term_at = 0;
	bool shell_done = false;
	int st;

	for (;;) {
		pid_t p = waitpid(-u->pid, &st, WNOHANG);

		if (p == u->pid) {
			shell_done = true;
			if (WIFSIGNALED(st)) {
				u->r->sig = WTERMSIG(st);
				u->r->status = 128 + u->r->sig;
			} else {
				u->r->status = WEXITSTATUS(st);
			}
			if (u->r->status)
				atomic_store(&u->kill, true);
			continue;
		}
		if (p > 0)
			continue; /* an orphan of its group */
		if (p < 0 && errno != EINTR && (errno != ECHILD || !shell_done))
			break;
		if (shell_done && kill(-u->pid, 0) && errno == ESRCH)
			break;
		if (!term_at && (atomic_load(&u->s->stop) || atomic_load(&u->kill))) {
			kill_cmd(u, SIGTERM);
			term_at = rdx_now_ns();
		} else if (term_at && rdx_now_ns() - term_at > KILL_GRACE_MS * 1000000ull) {
			kill_cmd(u, SIGKILL);
			term_at = rdx_now_ns(); /* again, should one linger */
		}
		usleep(20000);
	}
	atomic_store(&u->gone, true);
	if (!shell_done)
		u->r->status = -1;
	/* Killed by us, not by itself failing first. */
	u->r->killed = term_at != 0 && !(shell_done && u->r->status && !u->r->sig);
}

/* The input before anything else runs: dropped (<FILE, drain) or into
 * the file (>FILE, >>FILE).  With no input hop, '>' makes an empty file
 * and '>>' an existing one.  0 or -1 (printed). */
static int input_first(struct run *u)
{
	struct pp_seg *s = u->s;
	const char *path = "/dev/null";
	int fd = 0;

	if (s->op == PP_APPEND) {
		u->append_fd = open(s->arg, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0666);
		if (u->append_fd < 0) {
			rdx_error("cannot open '%s': %s", s->arg, strerror(errno));
			u->r->in_ret = -RDX_ELOCAL;
			return -1;
		}
		fd = u->append_fd;
		path = NULL;
	} else if (s->op == PP_OUT) {
		path = s->arg;
	}
	if (s->in.how == PP_NONE) {
		if (s->op == PP_OUT) {
			int f = open(s->arg, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);

			if (f < 0) {
				rdx_error("cannot create '%s': %s", s->arg, strerror(errno));
				u->r->in_ret = -RDX_ELOCAL;
				return -1;
			}
			close(f);
		}
		return 0;
	}
	u->r->in_ret = hop(s, true, fd, path, s->arg, &u->r->in);
	return u->r->in_ret ? -1 : 0;
}

/* The command with both hops around it. */
static int run_cmd(struct run *u)
{
	struct pp_seg *s = u->s;
	int in[2] = { -1, -1 }, out[2] = { -1, -1 }, child_in = -1, child_out = -1;
	int ret = 0;

	if (s->in.how == PP_FD) {
		child_in = s->in.fd;
	} else if (s->in.how != PP_NONE && !s->drain) {
		ret = cmd_pipe(in, 1);
		child_in = in[0];
		u->to_cmd = in[1];
	}
	if (!ret && s->out.how == PP_FD) {
		child_out = s->out.fd;
	} else if (!ret && s->out.how != PP_NONE) {
		ret = cmd_pipe(out, 0);
		child_out = out[1];
		u->from_cmd = out[0];
	}
	if (!ret)
		ret = spawn_cmd(u, child_in, child_out);
	if (in[0] >= 0)
		close(in[0]);
	if (out[1] >= 0)
		close(out[1]);
	if (ret) {
		rdx_error("cannot run '%s': %s", s->shell, strerror(-ret));
		if (u->to_cmd >= 0)
			close(u->to_cmd);
		if (u->from_cmd >= 0)
			close(u->from_cmd);
		u->to_cmd = u->from_cmd = -1;
		return -1;
	}
	u->r->status = 0;
	if (u->to_cmd >= 0) {
		ret = pthread_create(&u->in_thread, NULL, in_main, u);
		u->in_async = !ret;
		if (ret) {
			close(u->to_cmd);
			u->to_cmd = -1;
		}
	}
	if (!ret && u->from_cmd >= 0) {
		ret = pthread_create(&u->out_thread, NULL, out_main, u);
		u->out_async = !ret;
	}
	if (ret) {
		rdx_error("cannot start a thread: %s", strerror(ret));
		atomic_store(&u->kill, true);
	}
	reap(u);
	if (u->in_async)
		pthread_join(u->in_thread, NULL);
	if (u->out_async)
		pthread_join(u->out_thread, NULL);
	if (u->from_cmd >= 0)
		close(u->from_cmd);
	return 0;
}

int pp_seg_run(struct pp_seg *s, struct pp_result *r)
{
	struct run u = { .s = s, .r = r, .to_cmd = -1, .from_cmd = -1, .append_fd = -1 };
	bool first = s->op != PP_CMD || s->drain;

	memset(r, 0, sizeof(*r));
	r->status = s->op == PP_CMD ? -1 : 0;
	/* What a command leaves in its group comes back to us to reap. */
	prctl(PR_SET_CHILD_SUBREAPER, 1);
	if (first && input_first(&u))
		goto out;
	if (s->op == PP_CMD) {
		if (run_cmd(&u))
			goto out;
	} else if (s->out.how != PP_NONE) {
		/* <FILE sends the file; > and >> an empty stream, the sign
		 * that the file is whole. */
		r->out_ret = hop(s, false, 0, s->op == PP_IN ? s->arg : "/dev/null",
				 s->arg, &r->out);
	}
out:
	if (u.append_fd >= 0 && close(u.append_fd) && !r->in_ret) {
		rdx_error("cannot write '%s': %s", s->arg, strerror(errno));
		r->in_ret = -RDX_ELOCAL;
	}
	if (s->op == PP_CMD && r->status < 0)
		return -1;
	return r->status || r->in_ret || r->out_ret ? -1 : 0;
}
