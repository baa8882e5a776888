#include "cp/remote.h"

#include "cp/sshcfg.h"

#include "core/err.h"
#include "core/log.h"
#include "core/units.h"

#include <errno.h>
#include <fcntl.h>
#include <libssh/libssh.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

extern char **environ;

#define ERR_KEEP (64u << 10) /* stderr kept from the far side */
#define LINE_MAX_ 512	     /* the port line, or rdrecv --json's, with room to spare */
#define CHATTER_MAX (16u << 10) /* login scripts' stdout before it */

struct cp_remote {
	ssh_session ss;
	ssh_channel ch;
	char *hostname; /* after the config's HostName */
	char *user;
	char *err;	/* stderr kept, NUL-terminated */
	size_t err_len;
	char errbuf[512]; /* ssh_err()'s printable copy */
	/* The stderr line being read, while it may be an "RDX-PROGRESS"
	 * line (--progress-lines); anything else goes to err as it comes. */
	char eline[64];
	size_t eline_len;
	bool eline_other; /* this line is not one: pass the rest through */
	uint64_t prog_done, prog_total;
	bool prog_seen, prog_total_known;
	char line[LINE_MAX_]; /* the stdout line being read */
	char last[LINE_MAX_]; /* the last whole line before any port line */
	size_t line_len;
	size_t chatter; /* stdout bytes before the port line */
	bool port_seen; /* line holds "RDX-PORT ...", or chatter ran over */
	/* cp_remote_on_output(): lines and stderr handed on as they come. */
	void (*on_line)(void *arg, const char *line);
	void (*on_err)(void *arg, const char *buf, size_t n);
	void *on_arg;
	bool ended; /* EOF on both streams and the channel is done */
	bool intr;  /* a signal cut a password prompt short */
	int status;
};

/* libssh's last error, which may quote the server (its banner, its
 * disconnect message): printable only. */
static const char *ssh_err(struct cp_remote *r)
{
	const char *e = ssh_get_error(r->ss);

	if (!e || !*e)
		return "unknown SSH error";
	return rdx_printable(r->errbuf, sizeof(r->errbuf), e, strlen(e));
}

/* "SHA256:..." of the server's host key, or "unknown fingerprint". */
static void fingerprint(struct cp_remote *r, char *buf, size_t len)
{
	ssh_key key = NULL;
	unsigned char *hash = NULL;
	size_t hlen = 0;
	char *fp = NULL;

	snprintf(buf, len, "unknown fingerprint");
	if (ssh_get_server_publickey(r->ss, &key) != SSH_OK)
		return;
	if (ssh_get_publickey_hash(key, SSH_PUBLICKEY_HASH_SHA256, &hash, &hlen) == 0)
		fp = ssh_get_fingerprint_hash(SSH_PUBLICKEY_HASH_SHA256, hash, hlen);
	if (fp)
		snprintf(buf, len, "%s %s", ssh_key_type_to_char(ssh_key_type(key)), fp);
	ssh_string_free_char(fp);
	ssh_clean_pubkey_hash(&hash);
	ssh_key_free(key);
}

int cp_strict_parse(const char *v, enum cp_strict *out)
{
	if (!strcasecmp(v, "yes") || !strcasecmp(v, "ask"))
		*out = CP_STRICT_YES;
	else if (!strcasecmp(v, "accept-new"))
		*out = CP_STRICT_ACCEPT_NEW;
	else if (!strcasecmp(v, "no") || !strcasecmp(v, "off"))
		*out = CP_STRICT_NO;
	else
		return -1;
	return 0;
}

/* A keyword's first value in the config for the host as given (-F's
 * file, or ~/.ssh/config then /etc/ssh/ssh_config), as ssh finds it:
 * libssh reads the same files but does not say.  Returns 1 with v set, 0
 * when no file sets it, or -errno. */
static int config_value(const struct cp_ssh_opts *o, const char *keyword, char *v, size_t len)
{
	const char *home = getenv("HOME");
	const char *files[2] = { o->config, NULL };
	char user[4096];
	int r = 0;

	if (!o->config) {
		snprintf(user, sizeof(user), "%s/.ssh/config", home ? home : "");
		files[0] = home ? user : NULL;
		files[1] = "/etc/ssh/ssh_config";
	}
	for (int i = 0; i < 2 && r == 0; i++)
		if (files[i])
			r = cp_sshcfg_value(files[i], o->host, keyword, v, len);
	return r;
}

/* StrictHostKeyChecking: -o, else the config's, else yes. */
static int strictness(const struct cp_ssh_opts *o, enum cp_strict *out)
{
	char v[64];

	*out = o->strict;
	if (o->strict_set)
		return 0;
	if (config_value(o, "StrictHostKeyChecking", v, sizeof(v)) != 1) {
		*out = CP_STRICT_YES;
		return 0;
	}
	if (cp_strict_parse(v, out)) {
		rdx_error("bad StrictHostKeyChecking '%s' in the SSH config (yes, accept-new or no)", v);
		return -RDX_EUSAGE;
	}
	return 0;
}

/* BatchMode: -o, else the config's, else no. */
static bool batch_mode(const struct cp_ssh_opts *o)
{
	char v[16];

	if (o->batch_set)
		return o->batch;
	return config_value(o, "BatchMode", v, sizeof(v)) == 1 && !strcasecmp(v, "yes");
}

/* known_hosts, as StrictHostKeyChecking says (strictness()).  A changed
 * key is refused whatever it says: the user removes the old one if the
 * change is expected. */
static int check_host_key(struct cp_remote *r, const struct cp_ssh_opts *o)
{
	enum ssh_known_hosts_e state = ssh_session_is_known_server(r->ss);
	enum cp_strict strict;
	char fp[160];
	int ret = strictness(o, &strict);

	if (ret)
		return ret;
	fingerprint(r, fp, sizeof(fp));
	switch (state) {
	case SSH_KNOWN_HOSTS_OK:
		return 0;
	case SSH_KNOWN_HOSTS_CHANGED:
	case SSH_KNOWN_HOSTS_OTHER:
		rdx_error("host key of '%s' does not match known_hosts (now %s): possible man-in-the-middle attack; if the key really changed, remove the old one (ssh-keygen -R)",
			  o->host, fp);
		return -RDX_ECONNECT;
	case SSH_KNOWN_HOSTS_NOT_FOUND:
	case SSH_KNOWN_HOSTS_UNKNOWN:
		if (strict == CP_STRICT_YES) {
			rdx_error("host key of '%s' is not known (%s); add it to known_hosts, or use -o StrictHostKeyChecking=accept-new",
				  o->host, fp);
			return -RDX_ECONNECT;
		}
		if (ssh_session_update_known_hosts(r->ss) != SSH_OK)
			rdx_warn("cannot add the host key of '%s' to known_hosts: %s",
				 o->host, ssh_err(r));
		else
			rdx_info(1, "added the host key of '%s' to known_hosts (%s)",
				 o->host, fp);
		return 0;
	case SSH_KNOWN_HOSTS_ERROR:
	default:
		rdx_error("cannot check the host key of '%s': %s", o->host, ssh_err(r));
		return -RDX_ECONNECT;
	}
}

/* -J and -o's libssh keywords: "Key Value" lines parsed as a config of
 * their own before the user's, so that they win as ssh's -o does (libssh
 * keeps the first value it reads), from a memfd: nothing on the disk.
 * 0, or -1 (printed). */
static int cmdline_config(struct cp_remote *r, const struct cp_ssh_opts *o)
{
	char path[64];
	int fd = memfd_create("rdx-ssh-options", MFD_CLOEXEC), ret = -1;

	for (unsigned i = 0; fd >= 0 && i < o->ncfg; i++)
		if (dprintf(fd, "%s %s\n", o->cfg[i].key, o->cfg[i].val) < 0) {
			close(fd);
			fd = -1;
		}
	if (fd < 0) {
		rdx_error("cannot pass the SSH options to libssh: %s", strerror(errno));
		goto out;
	}
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	if (ssh_options_parse_config(r->ss, path) != 0) {
		rdx_error("invalid SSH option (%s %s): %s", o->cfg[0].key, o->cfg[0].val,
			  ssh_err(r));
		goto out;
	}
	ret = 0;
out:
	if (fd >= 0)
		close(fd);
	return ret;
}

/* The config first (Host matches the name as given), then what the
 * command line says on top of it, as ssh does. */
static int set_options(struct cp_remote *r, const struct cp_ssh_opts *o)
{
	long timeout = o->connect_timeout_s;
	int ret = 0;

	if (ssh_options_set(r->ss, SSH_OPTIONS_HOST, o->host)) {
		/* libssh takes host names only, and a Host alias of the config
		 * is looked up as one: "db_1" is refused before any config. */
		rdx_error("invalid host name '%s': libssh takes letters, digits, '-' and '.' "
			  "(an ssh_config Host alias too)", o->host);
		return -RDX_EUSAGE;
	}
	if (o->config && access(o->config, R_OK)) {
		rdx_error("cannot read SSH config '%s': %s", o->config, strerror(errno));
		return -RDX_EUSAGE;
	}
	if (o->ncfg && cmdline_config(r, o))
		return -RDX_EUSAGE;
	if (ssh_options_parse_config(r->ss, o->config) != 0) {
		rdx_error("cannot parse SSH config '%s': %s",
			  o->config ? o->config : "~/.ssh/config", ssh_err(r));
		return -RDX_EUSAGE;
	}
	if (o->user)
		ret |= ssh_options_set(r->ss, SSH_OPTIONS_USER, o->user);
	if (o->port)
		ret |= ssh_options_set(r->ss, SSH_OPTIONS_PORT_STR, o->port);
	if (o->identity)
		ret |= ssh_options_set(r->ss, SSH_OPTIONS_ADD_IDENTITY, o->identity);
	if (o->known_hosts)
		ret |= ssh_options_set(r->ss, SSH_OPTIONS_KNOWNHOSTS, o->known_hosts);
	if (timeout > 0)
		ret |= ssh_options_set(r->ss, SSH_OPTIONS_TIMEOUT, &timeout);
	if (o->compression)
		ret |= ssh_options_set(r->ss, SSH_OPTIONS_COMPRESSION, o->compression);
	if (!ret && o->ciphers &&
	    (ssh_options_set(r->ss, SSH_OPTIONS_CIPHERS_C_S, o->ciphers) ||
	     ssh_options_set(r->ss, SSH_OPTIONS_CIPHERS_S_C, o->ciphers))) {
		rdx_error("no cipher of '%s' is one libssh speaks: %s", o->ciphers, ssh_err(r));
		return -RDX_EUSAGE;
	}
	if (ret) {
		rdx_error("cannot set SSH options: %s", ssh_err(r));
		return -RDX_EUSAGE;
	}
	/* For messages and the data connection; libssh always knows the
	 * host, and the user unless the local one has no passwd entry. */
	if (ssh_options_get(r->ss, SSH_OPTIONS_HOST, &r->hostname) != SSH_OK)
		return -ENOMEM;
	if (ssh_options_get(r->ss, SSH_OPTIONS_USER, &r->user) != SSH_OK)
		r->user = NULL;
	return 0;
}

/* ---- passwords and keyboard-interactive logins -------------------- */

#define SECRET_MAX 1024
#define PROMPTS 3 /* tries, as ssh's NumberOfPasswordPrompts */

/* Runs SSH_ASKPASS with the prompt as its argument and takes the first
 * line it prints; it gets none of our descriptors but its stdout (not
 * the SSH sockets) and SIGPIPE as a program expects it.  Returns 0, or
 * -1 when it failed or said no. */
static int askpass(const char *prog, const char *prompt, char *buf, size_t len)
{
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t attr;
	sigset_t dfl;
	char *argv[] = { (char *)prog, (char *)prompt, NULL };
	char scratch[256];
	size_t got = 0;
	int fds[2], st = 0, ret;
	pid_t pid;

	if (pipe2(fds, O_CLOEXEC))
		return -1;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, fds[1], STDOUT_FILENO);
	posix_spawn_file_actions_addclosefrom_np(&fa, STDERR_FILENO + 1);
	posix_spawnattr_init(&attr);
	sigemptyset(&dfl);
	sigaddset(&dfl, SIGPIPE);
	posix_spawnattr_setsigdefault(&attr, &dfl);
	posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF);
	ret = posix_spawnp(&pid, prog, &fa, &attr, argv, environ);
	posix_spawnattr_destroy(&attr);
	posix_spawn_file_actions_destroy(&fa);
	close(fds[1]);
	if (ret) {
		close(fds[0]);
		rdx_warn("cannot run SSH_ASKPASS '%s': %s", prog, strerror(ret));
		return -1;
	}
	for (;;) { /* to its end: a program blocked on a full pipe never exits */
		bool room = got < len - 1;
		ssize_t n = read(fds[0], room ? buf + got : scratch,
				 room ? len - 1 - got : sizeof(scratch));

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		if (room)
			got += (size_t)n;
	}
	close(fds[0]);
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	buf[got] = '\0';
	buf[strcspn(buf, "\r\n")] = '\0';
	explicit_bzero(scratch, sizeof(scratch));
	if (!WIFEXITED(st) || WEXITSTATUS(st)) {
		explicit_bzero(buf, len);
		return -1;
	}
	return 0;
}

/* The signal that cut a terminal prompt short (see tty_ask). */
static volatile sig_atomic_t tty_signo;

static void tty_on_signal(int sig)
{
	tty_signo = sig;
}

/* The signals a prompt catches, as readpassphrase(3) does: the terminal
 * is given back its echo before any of them takes its usual effect. */
static const int tty_signals[] = { SIGHUP, SIGINT, SIGQUIT, SIGTERM,
				   SIGTSTP, SIGTTIN, SIGTTOU };
#define TTY_NSIG (sizeof(tty_signals) / sizeof(tty_signals[0]))

/* One prompt on fd.  Returns 0, -1 (no answer: end of file) or the
 * signal that came (the terminal restored, our handlers back). */
static int tty_prompt(int fd, const char *prompt, bool echo, char *buf, size_t len)
{
	struct sigaction sa = { .sa_handler = tty_on_signal }, old_sa[TTY_NSIG];
	struct termios old, quiet;
	bool restore = false;
	size_t got = 0;
	int ret = -1;

	tty_signo = 0;
	sigemptyset(&sa.sa_mask); /* no SA_RESTART: read() returns EINTR */
	for (size_t i = 0; i < TTY_NSIG; i++) {
		/* One we were told to ignore (nohup) stays ignored. */
		sigaction(tty_signals[i], NULL, &old_sa[i]);
		if (old_sa[i].sa_handler != SIG_IGN)
			sigaction(tty_signals[i], &sa, NULL);
	}
	if (!echo && tcgetattr(fd, &old) == 0) {
		quiet = old;
		quiet.c_lflag &= ~(tcflag_t)ECHO;
		quiet.c_lflag |= ECHONL;
		restore = tcsetattr(fd, TCSAFLUSH, &quiet) == 0;
	}
	if (!tty_signo && write(fd, prompt, strlen(prompt)) >= 0) {
		while (!tty_signo) {
			char c;
			ssize_t n = read(fd, &c, 1);

			if (n < 0 && errno == EINTR)
				continue; /* tty_signo says whether to stop */
			if (n <= 0)
				break;
			if (c == '\n' || c == '\r') {
				ret = 0;
				break;
			}
			if (got < len - 1)
				buf[got++] = c;
		}
	}
	buf[got] = '\0';
	if (restore)
		tcsetattr(fd, TCSAFLUSH, &old);
	if (!echo && tty_signo)
		(void)!write(fd, "\n", 1); /* the line ECHONL did not end */
	for (size_t i = 0; i < TTY_NSIG; i++)
		sigaction(tty_signals[i], &old_sa[i], NULL);
	return tty_signo ? tty_signo : ret;
}

/* Asks on the terminal (/dev/tty, never standard input, which may be
 * the data), without echo unless echo.  A signal during the prompt finds
 * the echo restored, then is raised again for its usual effect: Ctrl-Z
 * stops us, and the prompt comes back on fg; Ctrl-C sets the interrupt
 * flag (our handler) or ends us.  Returns 0, -1 when there is no
 * terminal or no answer (end of file), -2 after a signal that did not
 * end us. */
static int tty_ask(const char *prompt, bool echo, char *buf, size_t len)
{
	int fd = open("/dev/tty", O_RDWR | O_NOCTTY | O_CLOEXEC);
	int ret;

	if (fd < 0)
		return -1;
	for (;;) {
		ret = tty_prompt(fd, prompt, echo, buf, len);
		if (ret <= 0)
			break;
		kill(getpid(), ret);
		if (ret != SIGTSTP && ret != SIGTTIN && ret != SIGTTOU) {
			ret = -2;
			break;
		}
	}
	close(fd);
	if (ret)
		explicit_bzero(buf, len);
	return ret;
}

/* One answer to a prompt, as ssh gets it: from SSH_ASKPASS when
 * SSH_ASKPASS_REQUIRE is "force" or "prefer" (or when there is a DISPLAY
 * and no terminal), else from the terminal.  Nothing is asked with
 * BatchMode.  Returns 0, -1 with nothing asked or answered, or -2 when
 * a signal (Ctrl-C) cut the prompt short. */
static int ask(const struct cp_ssh_opts *o, const char *prompt, bool echo, char *buf, size_t len)
{
	const char *prog = getenv("SSH_ASKPASS"), *req = getenv("SSH_ASKPASS_REQUIRE");
	bool force = req && !strcmp(req, "force"), prefer = req && !strcmp(req, "prefer");
	int tty, ret;

	if (batch_mode(o))
		return -1;
	if (req && !strcmp(req, "never"))
		prog = NULL;
	tty = open("/dev/tty", O_RDWR | O_NOCTTY | O_CLOEXEC);
	if (tty >= 0)
		close(tty);
	if (prog && *prog && (force || prefer || (tty < 0 && getenv("DISPLAY"))))
		ret = askpass(prog, prompt, buf, len);
	else
		ret = force ? -1 : tty_ask(prompt, echo, buf, len);
	/* Ctrl-C also ends SSH_ASKPASS (our process group): no answer */
	if (ret && o->interrupted && atomic_load(o->interrupted))
		ret = -2;
	return ret;
}

/* Text from the server, shown to the user: no control characters (a
 * hostile server's escape sequences stay off the terminal). */
static void shown_text(char *dst, size_t len, const char *src)
{
	rdx_printable(dst, len, src, src ? strlen(src) : 0);
}

/* Keyboard-interactive: every prompt of every round the server sends,
 * asked as it says (echoed or not); up to PROMPTS tries.  *asked: an
 * answer was given.  Returns libssh's SSH_AUTH_* code. */
static int auth_kbdint(struct cp_remote *r, const struct cp_ssh_opts *o, bool *asked)
{
	char answer[SECRET_MAX], prompt[512];
	int rc = SSH_AUTH_DENIED;

	for (int try = 0; try < PROMPTS && rc == SSH_AUTH_DENIED; try++) {
		int rounds = 0;

		while ((rc = ssh_userauth_kbdint(r->ss, NULL, NULL)) == SSH_AUTH_INFO) {
			int n = ssh_userauth_kbdint_getnprompts(r->ss);
			const char *text = ssh_userauth_kbdint_getinstruction(r->ss);

			if (++rounds > 16)
				return SSH_AUTH_DENIED; /* a server that never ends */
			if (text && *text) {
				shown_text(prompt, sizeof(prompt), text);
				rdx_info(0, "%s", prompt);
			}
			for (int i = 0; i < n; i++) {
				char echo = 0;

				shown_text(prompt, sizeof(prompt),
					   ssh_userauth_kbdint_getprompt(r->ss, (unsigned)i, &echo));
				int a = ask(o, prompt, echo, answer, sizeof(answer));

				if (a) {
					r->intr = a == -2;
					return SSH_AUTH_DENIED;
				}
				*asked = true;
				rc = ssh_userauth_kbdint_setanswer(r->ss, (unsigned)i, answer);
				explicit_bzero(answer, sizeof(answer));
				if (rc < 0)
					return SSH_AUTH_ERROR;
			}
		}
		if (rc == SSH_AUTH_DENIED && *asked && try < PROMPTS - 1 && !r->intr)
			rdx_info(0, "permission denied, please try again");
	}
	return rc;
}

/* Password: "user@host's password: ", up to PROMPTS tries. */
static int auth_password(struct cp_remote *r, const struct cp_ssh_opts *o, bool *asked)
{
	char pw[SECRET_MAX], prompt[512], who[300];
	int rc = SSH_AUTH_DENIED;

	snprintf(who, sizeof(who), "%s@%s", r->user ? r->user : "?", r->hostname);
	shown_text(prompt, sizeof(prompt) - 13, who);
	strcat(prompt, "'s password: ");
	for (int try = 0; try < PROMPTS && rc == SSH_AUTH_DENIED; try++) {
		if (try)
			rdx_info(0, "permission denied, please try again");
		int a = ask(o, prompt, false, pw, sizeof(pw));

		if (a) {
			r->intr = a == -2;
			break;
		}
		*asked = true;
		rc = ssh_userauth_password(r->ss, NULL, pw);
		explicit_bzero(pw, sizeof(pw));
	}
	return rc;
}

/* Keys first (the agent, -i, IdentityFile, ~/.ssh/id_*), then what the
 * server offers of keyboard-interactive and password.  Returns 0 or
 * -RDX_EAUTH / -RDX_ECONNECT / -RDX_EINTR (said here). */
static int authenticate(struct cp_remote *r, const struct cp_ssh_opts *o)
{
	const char *user = r->user ? r->user : "?";
	bool asked = false;
	int rc, methods;

	rc = ssh_userauth_publickey_auto(r->ss, NULL, NULL);
	if (rc == SSH_AUTH_DENIED || rc == SSH_AUTH_PARTIAL) {
		/* No key tried means no list of methods yet: "none" gets it. */
		methods = ssh_userauth_list(r->ss, NULL);
		if (!methods && (rc = ssh_userauth_none(r->ss, NULL)) == SSH_AUTH_DENIED)
			methods = ssh_userauth_list(r->ss, NULL);
		if (methods & SSH_AUTH_METHOD_INTERACTIVE)
			rc = auth_kbdint(r, o, &asked);
		if (rc != SSH_AUTH_SUCCESS && rc != SSH_AUTH_ERROR && !r->intr &&
		    (methods & SSH_AUTH_METHOD_PASSWORD))
			rc = auth_password(r, o, &asked);
		if (r->intr) {
			rdx_error("interrupted");
			return -RDX_EINTR;
		}
		if (rc == SSH_AUTH_DENIED && !asked &&
		    (methods & (SSH_AUTH_METHOD_INTERACTIVE | SSH_AUTH_METHOD_PASSWORD))) {
			rdx_error("permission denied for %s@%s: no key was accepted, and %s",
				  user, o->host,
				  batch_mode(o) ? "BatchMode asks for no password"
					   : "no password can be asked here (no terminal; see SSH_ASKPASS in rdcp(1))");
			return -RDX_EAUTH;
		}
		if (rc == SSH_AUTH_DENIED && asked) {
			rdx_error("permission denied for %s@%s: no key was accepted, and the password was refused",
				  user, o->host);
			return -RDX_EAUTH;
		}
	}
	if (rc == SSH_AUTH_SUCCESS)
		return 0;
	if (rc == SSH_AUTH_ERROR) {
		rdx_error("cannot log in to '%s': %s", o->host, ssh_err(r));
		return -RDX_ECONNECT;
	}
	rdx_error("permission denied for %s@%s: no key was accepted (ssh-agent, -i, IdentityFile, ~/.ssh/id_*)",
		  user, o->host);
	return -RDX_EAUTH;
}

/* TCP keepalives on the SSH connection: when this host loses the network
 * while the far ends move the data between them (a relay, which sends
 * nothing on it for a long time), the connection is found dead within
 * --timeout (silence_s, 2 s at least: one idle second and one probe), and
 * in 25 s at most (10 idle, then 3 probes 5 s apart) instead of never.
 * A ProxyCommand's pipe takes none: ignored. */
static void keep_alive(int fd, long silence_s)
{
	int on = 1, idle = 10, intvl = 5, cnt = 3;

	if (silence_s > 0 && silence_s < idle + cnt * intvl) {
		idle = silence_s / 2 > 0 ? (int)(silence_s / 2) : 1;
		intvl = silence_s / 6 > 0 ? (int)(silence_s / 6) : 1;
		cnt = (int)(silence_s - idle) / intvl;
		cnt = cnt < 1 ? 1 : cnt > 3 ? 3 : cnt;
	}
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof(on)))
		return;
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof(intvl));
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt));
}

/* -4/-6: libssh resolves names as it likes, so the socket is ours: the
 * config's host and port, only addresses of that family, within the
 * connect timeout; libssh takes the connected socket.  A ProxyCommand
 * (or ProxyJump) reaches the host its own way: the flag then applies to
 * the data alone, with a warning.  0, or -RDX_ECONNECT (printed). */
static int connect_family(struct cp_remote *r, const struct cp_ssh_opts *o)
{
	struct addrinfo hints = { .ai_family = o->family, .ai_socktype = SOCK_STREAM }, *ai, *a;
	const char *fam = o->family == AF_INET ? "IPv4" : "IPv6";
	char *proxy = NULL, portbuf[8];
	unsigned port = 22;
	int fd = -1, err;

	if (ssh_options_get(r->ss, SSH_OPTIONS_PROXYCOMMAND, &proxy) == SSH_OK && proxy) {
		ssh_string_free_char(proxy);
		rdx_warn("-%c applies to the data only: '%s' is reached through a proxy command",
			 o->family == AF_INET ? '4' : '6', o->host);
		return 0;
	}
	ssh_options_get_port(r->ss, &port);
	snprintf(portbuf, sizeof(portbuf), "%u", port);
	err = getaddrinfo(r->hostname, portbuf, &hints, &ai);
	if (err) {
		rdx_error("cannot connect to '%s' over SSH: no %s address (%s)", o->host, fam,
			  gai_strerror(err));
		return -RDX_ECONNECT;
	}
	for (a = ai; a && fd < 0; a = a->ai_next) {
		struct pollfd p;
		socklen_t len = sizeof(err);

		fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		if (fd < 0)
			continue;
		p = (struct pollfd){ .fd = fd, .events = POLLOUT };
		err = connect(fd, a->ai_addr, a->ai_addrlen) ? errno : 0;
		if (err == EINPROGRESS && poll(&p, 1, o->connect_timeout_s > 0
						       ? (int)o->connect_timeout_s * 1000 : 10000) == 1 &&
		    !getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len))
			;
		else if (err == EINPROGRESS)
			err = ETIMEDOUT;
		if (err) {
			close(fd);
			fd = -1;
			errno = err;
		}
	}
	freeaddrinfo(ai);
	if (fd < 0) {
		rdx_error("cannot connect to '%s' over SSH (%s): %s", o->host, fam, strerror(errno));
		return -RDX_ECONNECT;
	}
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
	if (ssh_options_set(r->ss, SSH_OPTIONS_FD, &fd) != SSH_OK) {
		close(fd);
		rdx_error("cannot hand libssh its socket: %s", ssh_err(r));
		return -RDX_ECONNECT;
	}
	return 0;
}

int cp_remote_open(struct cp_remote **out, const struct cp_ssh_opts *o)
{
	struct cp_remote *r = calloc(1, sizeof(*r));
	int ret;

	*out = NULL;
	if (!r)
		return -ENOMEM;
	r->status = -1;
	r->ss = ssh_new();
	if (!r->ss) {
		free(r);
		return -ENOMEM;
	}
	ret = set_options(r, o);
	if (!ret && o->family != AF_UNSPEC)
		ret = connect_family(r, o);
	if (ret)
		goto err;
	if (ssh_connect(r->ss) != SSH_OK) {
		rdx_error("cannot connect to '%s' over SSH: %s", o->host, ssh_err(r));
		ret = -RDX_ECONNECT;
		goto err;
	}
	keep_alive(ssh_get_fd(r->ss), o->silence_s);
	ret = check_host_key(r, o);
	if (ret)
		goto err_disconnect;
	ret = authenticate(r, o);
	if (ret)
		goto err_disconnect;
	*out = r;
	return 0;

err_disconnect:
	ssh_disconnect(r->ss);
err:
	cp_remote_close(r);
	return ret;
}

void cp_remote_on_output(struct cp_remote *r,
			 void (*on_line)(void *arg, const char *line),
			 void (*on_err)(void *arg, const char *buf, size_t n), void *arg)
{
	r->on_line = on_line;
	r->on_err = on_err;
	r->on_arg = arg;
}

const char *cp_remote_hostname(struct cp_remote *r)
{
	return r->hostname;
}

int cp_remote_exec(struct cp_remote *r, const char *cmd, const char *line)
{
	rdx_info(2, "running on %s: %s", r->hostname, cmd);
	r->ch = ssh_channel_new(r->ss);
	if (!r->ch || ssh_channel_open_session(r->ch) != SSH_OK ||
	    ssh_channel_request_exec(r->ch, cmd) != SSH_OK)
		goto err;
	/* Its stdin stays open: the far side (--stop-on-eof) stops when it
	 * ends, that is when we give up or go away. */
	if (ssh_channel_write(r->ch, line, (uint32_t)strlen(line)) == SSH_ERROR ||
	    ssh_channel_write(r->ch, "\n", 1) == SSH_ERROR) {
		/* A command that ended at once (not found, refused its
		 * arguments) may have closed the channel before its key
		 * could be written: libssh refuses the write (a request
		 * error, the session intact) while the command's stderr
		 * and exit status still wait, unread, in the channel.
		 * That is no transport failure: the caller's next read
		 * reports them.  (ssh_channel_is_eof() is false while
		 * that stderr is unread.) */
		if (ssh_is_connected(r->ss) &&
		    ssh_get_error_code(r->ss) == SSH_REQUEST_DENIED) {
			rdx_info(2, "%s: the command ended before it took its key",
				 r->hostname);
			return 0;
		}
		goto err;
	}
	return 0;
err:
	rdx_error("cannot run a command on '%s': %s", r->hostname, ssh_err(r));
	return -RDX_ECONNECT;
}

static void keep_err(struct cp_remote *r, const char *buf, size_t n)
{
	char *p;

	if (r->on_err) {
		if (n)
			r->on_err(r->on_arg, buf, n);
		return;
	}
	if (r->err_len + n > ERR_KEEP)
		n = ERR_KEEP - r->err_len;
	if (!n)
		return;
	p = realloc(r->err, r->err_len + n + 1);
	if (!p)
		return; /* losing the far side's words is no reason to fail */
	memcpy(p + r->err_len, buf, n);
	r->err = p;
	r->err_len += n;
	r->err[r->err_len] = '\0';
}

/* "RDX-PROGRESS DONE TOTAL" (TOTAL "-" when unknown), or false. */
static bool progress_line(struct cp_remote *r, const char *line)
{
	unsigned long long done, total;
	char t[24];

	if (sscanf(line, "RDX-PROGRESS %llu %23s", &done, t) != 2)
		return false;
	r->prog_done = done;
	r->prog_total_known = strcmp(t, "-") != 0 && sscanf(t, "%llu", &total) == 1;
	if (r->prog_total_known)
		r->prog_total = total;
	r->prog_seen = true;
	return true;
}

/* Keeps stderr, less the progress lines. */
static void take_err(struct cp_remote *r, const char *buf, size_t n)
{
	static const char tag[] = "RDX-PROGRESS ";

	for (size_t i = 0; i < n; i++) {
		char c = buf[i];

		if (r->eline_other) {
			/* The rest of a line that is not one, kept at once. */
			const char *nl = memchr(buf + i, '\n', n - i);
			size_t run = nl ? (size_t)(nl - (buf + i)) + 1 : n - i;

			keep_err(r, buf + i, run);
			r->eline_other = !nl;
			i += run - 1;
			continue;
		}
		if (c == '\n') {
			r->eline[r->eline_len] = '\0';
			if (!progress_line(r, r->eline)) {
				keep_err(r, r->eline, r->eline_len);
				keep_err(r, "\n", 1);
			}
			r->eline_len = 0;
			continue;
		}
		r->eline[r->eline_len++] = c;
		/* Not the tag, or longer than a progress line: not one. */
		if ((r->eline_len <= sizeof(tag) - 1 && c != tag[r->eline_len - 1]) ||
		    r->eline_len == sizeof(r->eline) - 1) {
			keep_err(r, r->eline, r->eline_len);
			r->eline_len = 0;
			r->eline_other = true;
		}
	}
}

bool cp_remote_progress(struct cp_remote *r, uint64_t *done, uint64_t *total, bool *total_known)
{
	*done = r->prog_done;
	*total = r->prog_total;
	*total_known = r->prog_total_known;
	return r->prog_seen;
}

/* Looks for the port line on stdout.  A login script may print before
 * it (a banner from .bashrc): whole lines that are not it are skipped,
 * up to CHATTER_MAX bytes; after it everything is dropped. */
static void keep_out(struct cp_remote *r, const char *buf, size_t n)
{
	size_t i;

	for (i = 0; r->on_line && i < n; i++) {
		if (buf[i] != '\n') {
			if (r->line_len < sizeof(r->line) - 1)
				r->line[r->line_len++] = buf[i];
			continue;
		}
		r->line[r->line_len] = '\0';
		r->line_len = 0;
		r->on_line(r->on_arg, r->line);
	}
	if (r->on_line)
		return;
	for (i = 0; i < n && !r->port_seen; i++) {
		if (++r->chatter > CHATTER_MAX) {
			r->port_seen = true; /* read_port says it is not one */
			break;
		}
		if (buf[i] != '\n') {
			if (r->line_len < sizeof(r->line) - 1)
				r->line[r->line_len++] = buf[i];
			r->line[r->line_len] = '\0';
			continue;
		}
		r->line[r->line_len] = '\0';
		if (!strncmp(r->line, "RDX-PORT ", 9)) {
			r->port_seen = true;
		} else {
			memcpy(r->last, r->line, r->line_len + 1);
			r->line_len = 0;
		}
	}
}

int cp_remote_pump(struct cp_remote *r, int wait_ms)
{
	char buf[16384];
	int n, got = 0;

	if (r->ended)
		return 1;
	n = ssh_channel_read_nonblocking(r->ch, buf, sizeof(buf), 1);
	if (n == SSH_ERROR)
		return -RDX_ECONNECT;
	if (n > 0) {
		take_err(r, buf, (size_t)n);
		got = 1;
	}
	n = ssh_channel_read_nonblocking(r->ch, buf, sizeof(buf), 0);
	if (n == SSH_ERROR)
		return -RDX_ECONNECT;
	if (n > 0) {
		keep_out(r, buf, (size_t)n);
		got = 1;
	}
	if (got)
		return 0;
	if (ssh_channel_is_eof(r->ch) || ssh_channel_is_closed(r->ch)) {
		/* Both streams are drained: the status follows the EOF. */
		r->status = ssh_channel_get_exit_status(r->ch);
		r->ended = true;
		return 1;
	}
	/* Wakes for stdout; stderr that arrives meanwhile is read next. */
	if (ssh_channel_poll_timeout(r->ch, wait_ms, 0) == SSH_ERROR)
		return -RDX_ECONNECT;
	return 0;
}

int cp_remote_read_port(struct cp_remote *r, int timeout_ms,
			const atomic_int *stop, unsigned *port)
{
	uint64_t deadline = rdx_now_ns() + (uint64_t)timeout_ms * 1000000;
	uint64_t v;
	int ret;

	while (!r->port_seen) {
		if (stop && atomic_load(stop))
			return -RDX_EINTR;
		if (rdx_now_ns() >= deadline)
			return -RDX_ETIMEOUT;
		ret = cp_remote_pump(r, 100);
		if (ret < 0)
			return ret;
		if (ret == 1 && !r->port_seen)
			return -RDX_EREMOTE;
	}
	if (strncmp(r->line, "RDX-PORT ", 9) ||
	    rdx_parse_uint(r->line + 9, 1, 65535, &v))
		return -RDX_EPROTO;
	*port = (unsigned)v;
	return 0;
}

void cp_remote_terminate(struct cp_remote *r)
{
	if (!r->ch || r->ended || !ssh_channel_is_open(r->ch))
		return;
	/* The end of its stdin stops it (--stop-on-eof); a signal too,
	 * where sshd allows one (not for root logins: it wants privilege
	 * separation for that). */
	ssh_channel_send_eof(r->ch);
	ssh_channel_request_send_signal(r->ch, "TERM");
}

int cp_remote_status(struct cp_remote *r)
{
	return r->status;
}

const char *cp_remote_last_line(struct cp_remote *r)
{
	return r->last;
}

const char *cp_remote_stderr(struct cp_remote *r, size_t *len)
{
	/* A last line without its newline is words too. */
	if (r->eline_len) {
		keep_err(r, r->eline, r->eline_len);
		r->eline_len = 0;
	}
	*len = r->err_len;
	return r->err ? r->err : "";
}

void cp_remote_close(struct cp_remote *r)
{
	if (!r)
		return;
	if (r->ch) {
		ssh_channel_close(r->ch);
		ssh_channel_free(r->ch);
	}
	if (r->ss) {
		if (ssh_is_connected(r->ss))
			ssh_disconnect(r->ss);
		ssh_free(r->ss);
	}
	ssh_string_free_char(r->hostname);
	ssh_string_free_char(r->user);
	free(r->err);
	free(r);
}
