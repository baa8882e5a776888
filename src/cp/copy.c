#include "cp/copy_int.h"

#include "core/hex.h"
#include "core/auth.h"
#include "core/err.h"
#include "core/log.h"
#include "core/units.h"
#include "core/xport.h"

#include <errno.h>
#include <openssl/crypto.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

/* The near end of the transfer, on its own thread: the main thread keeps
 * the SSH channel moving meanwhile (libssh is used from it only). */
struct near {
	struct rdx_xfer_opts xo;
	bool push; /* we send */
	struct rdx_xfer_stats st;
	int ret;
	atomic_bool done;
};

static void *near_main(void *arg)
{
	struct near *n = arg;

	n->ret = n->push ? rdx_send(&n->xo, &n->st) : rdx_recv(&n->xo, &n->st);
	atomic_store(&n->done, true);
	return NULL;
}

int cp_make_key(char hex[65])
{
	unsigned char raw[32];
	int ret = rdx_random(raw, sizeof(raw));

	if (!ret)
		rdx_hex_encode(raw, sizeof(raw), hex);
	OPENSSL_cleanse(raw, sizeof(raw));
	if (ret)
		rdx_error("no randomness available for the session key");
	return ret;
}

int cp_far_login(struct cp_remote **r, const struct cp_opts *o, const struct cp_addr *far)
{
	struct cp_ssh_opts so = o->ssh;

	so.host = far->host;
	so.family = o->xo.family; /* -4/-6 */
	so.interrupted = o->xo.interrupted;
	so.silence_s = (long)((o->xo.timeout_ms + 999) / 1000);
	if (far->user)
		so.user = far->user;
	if (far->port) /* scp://host:port/ */
		so.port = far->port;
	return cp_remote_open(r, &so);
}

int cp_far_start(struct cp_remote **r, const struct cp_opts *o,
		 const struct cp_addr *far, const char *cmd, const char *key)
{
	int ret = cp_far_login(r, o, far);

	return ret ? ret : cp_remote_exec(*r, cmd, key);
}

static void add_secs(struct cp_cmd *c, const char *opt, uint64_t ms)
{
	char buf[64];

	/* Exact, and never in %g's exponent form the far parser refuses. */
	snprintf(buf, sizeof(buf), " %s %llu.%03llu", opt, (unsigned long long)(ms / 1000),
		 (unsigned long long)(ms % 1000));
	cp_cmd_raw(c, buf);
}

/* The options both server modes take from ours. */
void cp_cmd_net_opts(struct cp_cmd *c, const struct rdx_xfer_opts *x,
		     int verbose)
{
	char buf[32];

	if (x->transport == RDX_TRANSPORT_TCP)
		cp_cmd_raw(c, " --transport tcp");
	else if (x->transport == RDX_TRANSPORT_RDMA)
		cp_cmd_raw(c, " --transport rdma");
	/* Only when asked for: a far end older than --ack-timeout takes the
	 * rest, and its default is this end's. */
	if (x->ack_timeout) {
		snprintf(buf, sizeof(buf), " --ack-timeout %u",
			 x->ack_timeout == RDX_ACK_TIMEOUT_CM ? 0 : x->ack_timeout);
		cp_cmd_raw(c, buf);
	}
	if (x->encrypt)
		cp_cmd_raw(c, " --encrypt");
	if (x->family == AF_INET)
		cp_cmd_raw(c, " -4");
	else if (x->family == AF_INET6)
		cp_cmd_raw(c, " -6");
	for (int i = 0; i < verbose && i < 3; i++)
		cp_cmd_raw(c, " -v");
}

static void add_common(struct cp_cmd *c, const struct cp_opts *o)
{
	add_secs(c, "--timeout", o->xo.timeout_ms);
	cp_cmd_net_opts(c, &o->xo, o->verbose);
}

void cp_far_tool(struct cp_cmd *c, const struct cp_opts *o, const char *tool)
{
	cp_cmd_raw(c, "exec ");
	if (o->remote_path) {
		struct cp_cmd p = { 0 };

		cp_cmd_raw(&p, o->remote_path);
		cp_cmd_raw(&p, "/");
		cp_cmd_raw(&p, tool);
		if (cp_cmd_str(&p))
			cp_cmd_quoted(c, cp_cmd_str(&p));
		else
			c->err = -ENOMEM;
		cp_cmd_release(&p);
	} else {
		cp_cmd_quoted(c, tool);
	}
}

const char *cp_far_path(const char *path)
{
	if (!strcmp(path, "~") || !*path)
		return ".";
	if (!strncmp(path, "~/", 2))
		return path[2] ? path + 2 : ".";
	return path;
}

/* The far rdrecv itself: --server, or --connect dialing the source, then
 * its options and DST ("$d", set by the caller's shell code). */
static void recv_tool(struct cp_cmd *c, const struct cp_opts *o,
		      const struct cp_dial *dial, unsigned mode)
{
	char buf[32];

	cp_far_tool(c, o, "rdrecv");
	if (mode && !o->recursive) {
		snprintf(buf, sizeof(buf), " --new-mode %03o", mode & 0777);
		cp_cmd_raw(c, buf);
	}
	if (dial) {
		cp_cmd_raw(c, " --connect ");
		cp_cmd_quoted(c, dial->host);
		/* Its statistics, for rdcp's own report: one line on stdout. */
		cp_cmd_raw(c, " --key-file - --stop-on-eof --json");
		/* Between two far hosts the bar is drawn here, from its
		 * progress lines (cp_relay). */
		if (o->xo.progress && !o->quiet && isatty(STDERR_FILENO))
			cp_cmd_raw(c, " --progress-lines");
	} else {
		cp_cmd_raw(c, " --server --stop-on-eof");
	}
	if (o->recursive)
		cp_cmd_raw(c, " -r");
	/* What the sender may do there is what was asked for here. */
	if (o->recursive && o->xo.tree_delete)
		cp_cmd_raw(c, " --delete");
	else if (o->recursive && o->xo.tree_sync)
		cp_cmd_raw(c, " --sync");
	if (o->recursive && o->xo.tree_keep_setid)
		cp_cmd_raw(c, " --keep-setid");
	/* Only when asked for: a far rdrecv older than --direct takes the
	 * rest. */
	if (o->xo.direct != RDX_DIRECT_AUTO) {
		cp_cmd_raw(c, " --direct ");
		cp_cmd_raw(c, rdx_direct_name(o->xo.direct));
	}
	/* From another far host: the tree named as asked for (a push
	 * comes from here, from us). */
	if (o->recursive && dial) {
		cp_cmd_raw(c, " --expect ");
		cp_cmd_quoted(c, dial->top ? dial->top : "");
		if (o->files_only)
			cp_cmd_raw(c, " --files-only");
	}
	/* Dialing, --wait bounds its retries: our --connect-timeout, as
	 * when we dial ourselves. */
	add_secs(c, "--wait", dial ? o->xo.connect_timeout_ms : CP_FAR_WAIT_S * 1000);
	add_common(c, o);
	cp_cmd_raw(c, " --");
	if (dial) {
		snprintf(buf, sizeof(buf), " %u", dial->port);
		cp_cmd_raw(c, buf);
	}
	cp_cmd_raw(c, " \"$d\"");
}

/* Far side receives.  A file: a directory as destination gets the
 * source's name in it, decided there by the shell:
 *   d='PATH'; if [ -d "$d" ]; then d="$d"/'NAME'; fi; exec 'rdrecv' --server ... -- "$d"
 * (with o->dst_dir, anything but a directory ends it with status 1).  A
 * tree: rdrecv -r itself does what cp -r does with DST (into it when a
 * directory, else DST becomes the tree). */
bool cp_is_glob(const char *path)
{
	for (const char *p = path; *p; p++) {
		if (*p == '\\' && p[1])
			p++;
		else if (*p == '*' || *p == '?' || *p == '[')
			return true;
	}
	return false;
}

unsigned cp_local_mode(const char *path)
{
	struct stat sb;

	if (strcmp(path, "-") && !stat(path, &sb) && S_ISREG(sb.st_mode))
		return (sb.st_mode & 0777) | RDX_NEW_MODE_SET;
	return 0;
}

unsigned cp_far_mode(struct cp_remote *r)
{
	unsigned m;
	char end;

	if (sscanf(cp_remote_last_line(r), "RDX-MODE %o%c", &m, &end) == 1 && m <= 0777)
		return m | RDX_NEW_MODE_SET;
	return 0;
}

void cp_recv_cmd(struct cp_cmd *c, const struct cp_opts *o, const char *far,
		 const char *name, const struct cp_dial *dial, unsigned mode)
{
	cp_cmd_raw(c, "d=");
	cp_cmd_quoted(c, cp_far_path(far));
	if (o->recursive) {
		if (o->dst_dir)
			cp_cmd_raw(c, "; if [ ! -d \"$d\" ]; then printf '%s: not a directory\\n' \"$d\" >&2; exit 1; fi");
	} else if (name) {
		/* From standard input there is no name: DST names the file. */
		cp_cmd_raw(c, "; if [ -d \"$d\" ]; then d=\"$d\"/");
		cp_cmd_quoted(c, name);
		/* Several sources: never a file named after DST. */
		if (o->dst_dir)
			cp_cmd_raw(c, "; else printf '%s: not a directory\\n' \"$d\" >&2; exit 1");
		cp_cmd_raw(c, "; fi");
	}
	cp_cmd_raw(c, "; ");
	recv_tool(c, o, dial, mode);
}

/* Far side sends: exec 'rdsend' --server ... -- 'PATH'... */
void cp_send_cmd(struct cp_cmd *c, const struct cp_opts *o,
		 const char *const *far, int n)
{
	char buf[64];
	int i;

	/* -p alone sends files as one-file trees: a directory there needs
	 * -r, as here (the far shell says so, exit 2, before rdsend). */
	for (i = 0; o->files_only && i < n; i++) {
		cp_cmd_raw(c, "if [ -d ");
		cp_cmd_quoted(c, cp_far_path(far[i]));
		cp_cmd_raw(c, " ]; then printf \"rdsend: '%s' is a directory (use -r)\\n\" ");
		cp_cmd_quoted(c, far[i]);
		cp_cmd_raw(c, " >&2; exit 2; fi; ");
	}
	cp_far_tool(c, o, "rdsend");
	cp_cmd_raw(c, " --server --stop-on-eof");
	if (o->recursive)
		cp_cmd_raw(c, o->xo.tree_follow ? " -r -L" : " -r");
	if (o->recursive && o->glob)
		cp_cmd_raw(c, " --glob");
	if (o->recursive && o->xo.tree_atime)
		cp_cmd_raw(c, " --atime");
	if (o->recursive && o->xo.tree_sync)
		cp_cmd_raw(c, " --sync");
	if (o->recursive && o->xo.tree_delete)
		cp_cmd_raw(c, " --delete");
	if (o->recursive && o->xo.tree_dry_run)
		cp_cmd_raw(c, " --dry-run");
	if (o->recursive && o->xo.tree_checksum)
		cp_cmd_raw(c, " --checksum");
	if (!o->recursive && o->xo.resume)
		cp_cmd_raw(c, " --resume");
	if (o->xo.rate_limit_bps) {
		snprintf(buf, sizeof(buf), " --limit-rate %llu",
			 (unsigned long long)(o->xo.rate_limit_bps / 1000));
		cp_cmd_raw(c, buf);
	}
	for (i = 0; o->recursive && i < (int)o->xo.ntree_rules; i++) {
		cp_cmd_raw(c, o->xo.tree_rules[i].include ? " --include=" : " --exclude=");
		cp_cmd_quoted(c, o->xo.tree_rules[i].pattern);
	}
	add_secs(c, "--connect-timeout", CP_FAR_WAIT_S * 1000);
	add_common(c, o);
	snprintf(buf, sizeof(buf), " --streams %u", o->xo.streams);
	cp_cmd_raw(c, buf);
	if (o->xo.compress) {
		snprintf(buf, sizeof(buf), " --compress=%d", o->xo.compress);
		cp_cmd_raw(c, buf);
	}
	cp_cmd_raw(c, " --");
	for (i = 0; i < n; i++) {
		cp_cmd_raw(c, " ");
		cp_cmd_quoted(c, cp_far_path(far[i]));
	}
}

void cp_show_far_stderr(struct cp_remote *r, const char *host)
{
	size_t len;
	const char *p = cp_remote_stderr(r, &len), *end = p + len;

	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);

		if (n) {
			char line[1024]; /* the far side's, printable */

			rdx_error("%s: %s", host, rdx_printable(line, sizeof(line), p, n));
		}
		p += n + 1;
	}
}

int cp_port_failed(struct cp_remote *r, int ret, const char *host,
		   const char *tool, const struct cp_opts *o)
{
	int status = cp_remote_status(r);

	if (ret != -RDX_EREMOTE) {
		cp_remote_terminate(r);
		cp_show_far_stderr(r, host);
		if (ret == -RDX_EINTR)
			rdx_error("interrupted");
		else if (ret == -RDX_ETIMEOUT)
			rdx_error("%s on '%s' did not report a port within %d s", tool,
				  host, CP_FAR_WAIT_S);
		else if (ret == -RDX_EPROTO)
			rdx_error("%s on '%s' did not start as expected (is it rdxfer's, and recent enough for --server?)",
				  tool, host);
		else
			rdx_error("lost the SSH connection to '%s'", host);
		return ret;
	}
	/* The far command ended before it listened: say why as best we can.
	 * Without an exit status it may still run, its outputs closed: it
	 * is told to stop. */
	if (status < 0)
		cp_remote_terminate(r);
	cp_show_far_stderr(r, host);
	if (status == 127)
		rdx_error("%s not found on '%s'%s", tool, host,
			  o->remote_path ? " in --remote-path" :
					   " (install rdxfer there, or name its directory with --remote-path)");
	else if (status == 126)
		rdx_error("cannot run %s on '%s' (permission denied)", tool, host);
	else if (status >= 0)
		rdx_error("%s on '%s' failed before the transfer (exit status %d)",
			  tool, host, status);
	else
		rdx_error("%s on '%s' ended before the transfer without an exit status",
			  tool, host);
	return -RDX_EREMOTE;
}

int cp_check_far_paths(const struct cp_addr *src, const struct cp_addr *dst,
		       bool recursive)
{
	if ((src->remote && !strcmp(src->path, "-")) || (dst->remote && !strcmp(dst->path, "-"))) {
		rdx_error("'-' names standard input or output here, not on the remote host");
		return -RDX_EUSAGE;
	}
	if (src->remote && !recursive &&
	    (!*cp_basename(cp_far_path(src->path)) || !strcmp(cp_far_path(src->path), "."))) {
		rdx_error("'%s:%s' names no file", src->host, src->path);
		return -RDX_EUSAGE;
	}
	return 0;
}

/* Local checks before any SSH: a missing or unreadable source, a
 * directory; and where a pulled file goes.  "-" is standard input or
 * output (*path NULL), on this side only. */
static int near_path(const struct cp_addr *src, const struct cp_addr *dst,
		     bool recursive, char **path)
{
	struct stat sb;
	int ret;

	*path = NULL;
	ret = cp_check_far_paths(src, dst, recursive);
	if (ret)
		return ret;
	if (!src->remote && !strcmp(src->path, "-"))
		return 0; /* standard input */
	if (!src->remote) {
		if (stat(src->path, &sb)) {
			rdx_error("cannot open '%s': %s", src->path, strerror(errno));
			return -RDX_ELOCAL;
		}
		if (S_ISDIR(sb.st_mode) && !recursive) {
			rdx_error("'%s' is a directory (use -r)", src->path);
			return -RDX_EUSAGE;
		}
		*path = strdup(src->path);
		return *path ? 0 : -ENOMEM;
	}
	if (!strcmp(dst->path, "-"))
		return 0; /* standard output */
	if (recursive) {
		/* The tree's receiver decides between into and as DST. */
		*path = strdup(dst->path);
		return *path ? 0 : -ENOMEM;
	}
	if (stat(dst->path, &sb) == 0 && S_ISDIR(sb.st_mode)) {
		const char *name = cp_basename(src->path);

		if (asprintf(path, "%s/%s", dst->path, name) < 0) {
			*path = NULL;
			return -ENOMEM;
		}
		return 0;
	}
	*path = strdup(dst->path);
	return *path ? 0 : -ENOMEM;
}

/* Runs the near end while the channel moves; returns the near end's
 * result once both are through (or the far side is given up on). */
static int run_near(struct near *n, struct cp_remote *r, const struct cp_opts *o,
		    bool *terminated)
{
	pthread_t t;
	uint64_t grace = 0;
	bool far_over = false;
	int ret;

	ret = pthread_create(&t, NULL, near_main, n);
	if (ret) {
		rdx_error("cannot start a thread: %s", strerror(ret));
		return -ret;
	}
	for (;;) {
		if (!far_over)
			far_over = cp_remote_pump(r, 100) != 0; /* ended, or SSH lost */
		else if (!atomic_load(&n->done))
			usleep(100000);
		if (atomic_load(&n->done)) {
			/* Give the far side a moment to report its status. */
			if (far_over)
				break;
			if (!grace) {
				grace = rdx_now_ns() + (o->xo.timeout_ms < 5000 ? o->xo.timeout_ms
										 : 5000) * 1000000;
				/* We failed: it would wait for us until its
				 * own timeouts. */
				if (n->ret) {
					cp_remote_terminate(r);
					*terminated = true;
				}
			} else if (rdx_now_ns() >= grace) {
				break;
			}
		}
	}
	pthread_join(t, NULL);
	return n->ret;
}

/* near_path() for each source; with several, *paths holds the local
 * sources (push) or the far ones (pull), and *path the local DST. */
static int near_paths(const struct cp_addr *src, int n, const struct cp_addr *dst,
		      bool recursive, char **path, char ***paths)
{
	int i, ret;

	*paths = calloc((size_t)n, sizeof(**paths));
	if (!*paths)
		return -ENOMEM;
	for (i = 0; i < n; i++) {
		ret = near_path(&src[i], dst, recursive, &(*paths)[i]);
		if (ret)
			return ret;
		if (src[i].remote) {
			free((*paths)[i]);
			(*paths)[i] = strdup(src[i].path);
			if (!(*paths)[i])
				return -ENOMEM;
		}
	}
	if (!src->remote) {
		*path = NULL;
		return 0;
	}
	return near_path(src, dst, recursive, path);
}

int cp_far_top(const char *path, char **top)
{
	const char *p = cp_far_path(path), *end = p + strlen(p), *base;

	*top = NULL;
	while (end > p && end[-1] == '/')
		end--;
	base = end;
	while (base > p && base[-1] != '/')
		base--;
	if (base == end || (end - base == 1 && base[0] == '.') ||
	    (end - base == 2 && base[0] == '.' && base[1] == '.'))
		return 0;
	*top = strndup(base, (size_t)(end - base));
	return *top ? 0 : -ENOMEM;
}

static void free_paths(char **paths, int n)
{
	int i;

	for (i = 0; paths && i < n; i++)
		free(paths[i]);
	free(paths);
}

int cp_copy(const struct cp_opts *o, const struct cp_addr *src, int nsrc,
	    const struct cp_addr *dst, struct rdx_xfer_stats *st)
{
	const struct cp_addr *far = src->remote ? src : dst;
	bool push = !src->remote;
	const char *tool = push ? "rdrecv" : "rdsend";
	struct cp_remote *r = NULL;
	struct cp_cmd cmd = { 0 };
	struct near *n = NULL;
	char key[65] = "", port[8], *path = NULL, **paths = NULL, **tops = NULL;
	bool quiet_far = false, terminated = false;
	unsigned p;
	int ret, status;

	if (nsrc > 1 && !o->recursive)
		return -EINVAL; /* a caller's error */
	ret = nsrc > 1 ? near_paths(src, nsrc, dst, o->recursive, &path, &paths)
		       : near_path(src, dst, o->recursive, &path);
	if (ret)
		goto out;
	if (push)
		cp_recv_cmd(&cmd, o, dst->path,
			    strcmp(src->path, "-") ? cp_basename(src->path) : NULL, NULL,
			    o->recursive ? 0 : cp_local_mode(src->path));
	else if (paths)
		cp_send_cmd(&cmd, o, (const char *const *)paths, nsrc);
	else
		cp_send_cmd(&cmd, o, (const char *const *)&src->path, 1);
	n = calloc(1, sizeof(*n));
	if (!n || !cp_cmd_str(&cmd)) {
		ret = -ENOMEM;
		goto out;
	}
	ret = cp_make_key(key);
	if (ret)
		goto out;
	ret = cp_far_start(&r, o, far, cp_cmd_str(&cmd), key);
	if (ret)
		goto out;
	ret = cp_remote_read_port(r, CP_FAR_WAIT_S * 1000, o->xo.interrupted, &p);
	if (ret) {
		ret = cp_port_failed(r, ret, far->host, tool, o);
		goto out;
	}
	snprintf(port, sizeof(port), "%u", p);
	n->xo = o->xo;
	n->push = push;
	n->xo.host = o->rdma_addr ? o->rdma_addr : cp_remote_hostname(r);
	n->xo.port = port;
	n->xo.path = path;
	if (!push && !o->recursive)
		n->xo.new_mode = cp_far_mode(r);
	if (o->recursive && push) {
		n->xo.tree_paths = (const char *const *)(paths ? paths : &path);
		n->xo.ntree = paths ? (unsigned)nsrc : 1;
		n->xo.path = NULL;
	} else if (o->recursive) {
		/* A pull: the far sender is held to what was asked for. */
		int i;

		tops = calloc((size_t)nsrc, sizeof(*tops));
		for (i = 0; tops && i < nsrc; i++)
			if (cp_far_top(src[i].path, &tops[i]))
				break;
		if (!tops || i < nsrc) {
			ret = -ENOMEM;
			goto out;
		}
		n->xo.tree = true;
		n->xo.tree_tops_glob = o->glob;
		n->xo.tree_tops = (const char *const *)tops;
		n->xo.ntree_tops = (unsigned)nsrc;
		n->xo.tree_files_only = o->files_only;
		n->xo.tree_allow_delete = o->xo.tree_delete;
		n->xo.tree_allow_list = o->xo.tree_sync;
	}
	n->xo.key.bytes = (uint8_t *)key;
	n->xo.key.len = strlen(key);
	rdx_info(1, "%s on %s listens on port %u; %s %s", tool, far->host, p,
		 push ? "sending to" : "receiving from", n->xo.host);
	ret = run_near(n, r, o, &terminated);
	status = cp_remote_status(r);
	/* The far side's own words: on success only what -v asked for, and
	 * likewise when the error it sent us is printed already or we
	 * stopped it ourselves. */
	/* A dry run's list comes on the far sender's stderr. */
	if (ret == -RDX_EREMOTE || terminated || (!ret && status == 0))
		quiet_far = (o->verbose == 0 || o->quiet) && !(o->xo.tree_dry_run && !push);
	if (!quiet_far)
		cp_show_far_stderr(r, far->host);
	if (!ret && status != 0) {
		rdx_error("%s on '%s' %s", tool, far->host,
			  status < 0 ? "ended without an exit status" : "failed");
		ret = -RDX_EREMOTE;
	}
	if (!ret && st)
		*st = n->st;
out:
	OPENSSL_cleanse(key, sizeof(key));
	cp_remote_close(r);
	cp_cmd_release(&cmd);
	free(n);
	free(path);
	free_paths(paths, nsrc);
	free_paths(tops, nsrc);
	return ret;
}
