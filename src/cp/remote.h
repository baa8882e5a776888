/* The far end of rdcp over SSH (libssh): one session, one command.
 *
 *   rdcp                                      far host (sshd)
 *     │ ── SSH: known_hosts, publickey ──────▶ │
 *     │ ── exec "rdrecv --server ..." ───────▶ │  (or rdsend --server)
 *     │ ── stdin: KEY\n (kept open) ─────────▶ │  its end stops the far side
 *     │ ◀─ stdout: RDX-PORT N ──────────────── │  listening
 *     │ ══ rdxfer session on N, directly ════▶ │  (not through SSH)
 *     │ ◀─ stderr, exit status ─────────────── │
 *
 * Every function runs on the thread that opened the session; messages go
 * to stderr through log.h. */
#ifndef RDX_CP_REMOTE_H
#define RDX_CP_REMOTE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>

enum cp_strict { CP_STRICT_YES, CP_STRICT_ACCEPT_NEW, CP_STRICT_NO };

struct cp_ssh_opts {
	const char *host;	 /* as given: a name, an alias from the config */
	const char *user;	 /* NULL: the config's User, else the local user */
	const char *port;	 /* NULL: the config's Port, else 22 */
	const char *identity;	 /* -i: tried before the config's and defaults */
	const char *config;	 /* -F; NULL: ~/.ssh/config and the system's */
	const char *known_hosts; /* NULL: the config's, else ~/.ssh/known_hosts */
	enum cp_strict strict;
	bool strict_set;	 /* -o gave it; else the config's, else yes */
	bool batch;		 /* BatchMode: keys only, nothing asked */
	bool batch_set;		 /* -o gave it; else the config's, else no */
	const char *ciphers;	 /* -c, -o Ciphers: for both directions */
	/* -J and the -o keywords libssh applies itself ("ProxyJump" and
	 * its value, ...): a config read before the user's, so that they
	 * win as ssh's -o does. */
	struct cp_ssh_kv {
		const char *key, *val;
	} cfg[32];
	unsigned ncfg;
	int family;		 /* -4/-6: AF_INET or AF_INET6; AF_UNSPEC: either */
	const char *compression; /* -o Compression: "yes", "no"; NULL: the config's */
	long connect_timeout_s;
	long silence_s;		 /* --timeout: a dead connection is found
				  * within this (25 s at most); 0: 25 s */
	const atomic_int *interrupted; /* set by SIGINT/SIGTERM (may be NULL) */
};

/* A StrictHostKeyChecking value: yes or ask (no one is asked), accept-new,
 * no or off.  Returns 0, or -1 for anything else. */
int cp_strict_parse(const char *v, enum cp_strict *out);

/* The command line's SSH options (sshopt.c), for rdcp and rdpipe; each
 * prints its usage error and returns -1, or 0.  -o takes Key=Value (or
 * "Key Value") of StrictHostKeyChecking, UserKnownHostsFile, User, Port,
 * IdentityFile, ConnectTimeout, BatchMode, Ciphers and Compression, and
 * passes those libssh applies itself (ProxyJump, ProxyCommand, HostName,
 * KexAlgorithms, ...: by_libssh in sshopt.c) on to it; keywords that change nothing of what a login proves or
 * sends (LogLevel, ServerAliveInterval, ControlMaster, ...) get a warning
 * and are ignored; tool names the command in the refusal of any other.  ConnectTimeout and --connect-timeout set
 * *connect_ms (the data connection's) as well. */
int cp_ssh_option(struct cp_ssh_opts *o, uint64_t *connect_ms, const char *tool,
		  const char *arg);
int cp_ssh_port(struct cp_ssh_opts *o, const char *opt, const char *arg);
/* The options of CLI_SSH_ROWS (src/cmd/cli.h) by key: -P, -i, -F, -o,
 * -B, -c, -J.
 * Returns 0, -1 (printed), or 1 for another key. */
int cp_ssh_cli(struct cp_ssh_opts *o, uint64_t *connect_ms, const char *tool, int key,
	       const char *arg);
int cp_ssh_connect_timeout(struct cp_ssh_opts *o, uint64_t *connect_ms, const char *opt,
			   const char *arg);

struct cp_remote;

/* Connects, checks the host key against known_hosts (as strict says) and
 * authenticates by public key (agent, -i, the config's IdentityFile, the
 * default keys), then by what the server offers of keyboard-interactive
 * and password, asked through SSH_ASKPASS or /dev/tty.  Prints one error
 * line on failure.  Returns 0, -RDX_ECONNECT (cannot connect, host key
 * refused), -RDX_EAUTH, -RDX_EINTR (Ctrl-C at a prompt) or -ENOMEM. */
int cp_remote_open(struct cp_remote **out, const struct cp_ssh_opts *o);

/* The host name SSH connected to, after ~/.ssh/config's HostName. */
const char *cp_remote_hostname(struct cp_remote *r);

/* For rdpipe, before cp_remote_exec(): each whole line of the command's
 * stdout goes to on_line (without its newline, at most 511 bytes of it)
 * and its stderr to on_err as it comes (less RDX-PROGRESS lines, still
 * for cp_remote_progress()), instead of the port line and the kept
 * stderr.  Called from cp_remote_pump(). */
void cp_remote_on_output(struct cp_remote *r,
			 void (*on_line)(void *arg, const char *line),
			 void (*on_err)(void *arg, const char *buf, size_t n), void *arg);

/* Runs cmd on the far host and writes line and a newline on its stdin,
 * which stays open until cp_remote_terminate() or cp_remote_close().
 * Returns 0, or -RDX_ECONNECT (printed). */
int cp_remote_exec(struct cp_remote *r, const char *cmd, const char *line);

/* Waits up to timeout_ms for the command's "RDX-PORT N" line on stdout
 * (other lines before it, from login scripts, are skipped), keeping its
 * stderr.  Returns 0 with *port set; -RDX_EREMOTE when the command ended
 * without it (cp_remote_status() says how); -RDX_ETIMEOUT; -RDX_EPROTO
 * for a malformed port line or none in the first 16 KiB; -RDX_EINTR once
 * *stop is set; -RDX_ECONNECT when SSH failed. */
int cp_remote_read_port(struct cp_remote *r, int timeout_ms,
			const atomic_int *stop, unsigned *port);

/* Keeps the channel moving for up to wait_ms: stderr kept, stdout
 * dropped.  Returns 1 once the command has ended (its exit status is
 * then known), 0 while it runs, or -RDX_ECONNECT. */
int cp_remote_pump(struct cp_remote *r, int wait_ms);

/* Stops the command once we give up, so that the far side need not wait
 * out its own timeouts: EOF on its stdin (rdsend/rdrecv --stop-on-eof),
 * and SIGTERM where sshd honours the "signal" request. */
void cp_remote_terminate(struct cp_remote *r);

/* The command's exit status, or -1 when it did not report one (killed by
 * a signal, connection lost). */
int cp_remote_status(struct cp_remote *r);

/* The last whole line the command wrote on stdout, when it prints no
 * port line (a dialing rdrecv's --json line, after any login chatter);
 * at most 511 bytes of it, "" when there was none. */
const char *cp_remote_last_line(struct cp_remote *r);

/* The last "RDX-PROGRESS DONE TOTAL" line of its stderr (rdsend/rdrecv
 * --progress-lines): false before the first.  Such lines are not kept. */
bool cp_remote_progress(struct cp_remote *r, uint64_t *done, uint64_t *total, bool *total_known);

/* What the command wrote on stderr (at most 64 KiB are kept). */
const char *cp_remote_stderr(struct cp_remote *r, size_t *len);

/* Closes the channel and the session. */
void cp_remote_close(struct cp_remote *r);

#endif
