/* What rdsend and rdrecv share at the command line: the common options,
 * key handling, signals, and the final report. */
#ifndef RDX_CMD_CLI_H
#define RDX_CMD_CLI_H

#include "cmd/opt.h"
#include "core/xfer.h"

#include <stdbool.h>

enum cli_key {
	OPT_PROGRESS = 256,
	OPT_JSON,
	OPT_TRANSPORT,
	OPT_KEY_FILE,
	OPT_SLOT_SIZE,
	OPT_SLOTS,
	OPT_STREAMS,
	OPT_IO_THREADS,
	OPT_COMPRESS,
	OPT_ENCRYPT,
	OPT_TIMEOUT,
	OPT_CONNECT_TIMEOUT,
	OPT_WAIT,
	OPT_FSYNC,
	OPT_BIND,
	OPT_COMPLETION,
	OPT_SERVER,
	OPT_PORT,
	OPT_CONNECT,
	OPT_STOP_ON_EOF,
	OPT_RDMA_DEV,
	OPT_RDMA_PORT,
	OPT_GID_INDEX,
	OPT_SYNC,
	OPT_TREE_DELETE,
	OPT_TREE_DRY_RUN,
	OPT_TREE_INCLUDE,
	OPT_TREE_EXCLUDE,
	OPT_TREE_CHECKSUM,
	OPT_FILE_RESUME,
	OPT_PROGRESS_LINES,
	OPT_EXPECT,
	OPT_HANDSHAKE_TIMEOUT,
	OPT_KEEP_SETID,
	OPT_FILES_ONLY,
	OPT_NEW_MODE,
	OPT_LIMIT_RATE,
	OPT_ATIME,
	OPT_GLOB,
	OPT_DIRECT,
	OPT_ACK_TIMEOUT,
};

#define CLI_RULES_MAX 256
#define CLI_EXPECT_MAX 256

/* rdsend and rdrecv's, and rdcp's and rdpipe's for every hop. */
#define CLI_ACK_TIMEOUT_ROW                                                    \
	{ "ack-timeout", OPT_ACK_TIMEOUT, RDX_ARG_REQUIRED, "N",               \
	  "RDMA: resend what is not acknowledged after 4.096 us x 2^N, 1..31, 0: rdma_cm's choice (default 14 on RoCE, rdma_cm's on InfiniBand)", \
	  NULL }

/* Table rows both tools have, in --help order. */
#define CLI_COMMON_HEAD                                                        \
	{ "verbose", 'v', RDX_ARG_NONE, NULL,                                  \
	  "more detail on stderr; a bandwidth line at the end", NULL },        \
	{ "progress", OPT_PROGRESS, RDX_ARG_NONE, NULL,                        \
	  "progress bar with rate and ETA (when stderr is a terminal)", NULL }, \
	{ "json", OPT_JSON, RDX_ARG_NONE, NULL,                                \
	  "print the final statistics as one JSON object", NULL },            \
	{ "transport", OPT_TRANSPORT, RDX_ARG_REQUIRED, "MODE",                \
	  "auto, tcp or rdma (default auto)", "auto tcp rdma" },               \
	{ "rdma-dev", OPT_RDMA_DEV, RDX_ARG_REQUIRED, "DEV",                   \
	  "RDMA device to use (rdx-diag lists them); means --transport rdma", \
	  NULL },                                                              \
	{ "rdma-port", OPT_RDMA_PORT, RDX_ARG_REQUIRED, "N",                   \
	  "port of that device (default: its first ACTIVE one)", NULL },       \
	{ "gid-index", OPT_GID_INDEX, RDX_ARG_REQUIRED, "N",                   \
	  "GID of that port to use (default: the first RoCE v2 GID with an IP)", \
	  NULL },                                                              \
	CLI_ACK_TIMEOUT_ROW,                                                   \
	{ "key-file", OPT_KEY_FILE, RDX_ARG_REQUIRED, "FILE",                  \
	  "read the key from the first line of FILE ('-': standard input)", "file" }, \
	{ "slot-size", OPT_SLOT_SIZE, RDX_ARG_REQUIRED, "SIZE",                \
	  "bytes per slot, 4K..64M in 4K steps (default 1M)", NULL },          \
	{ "slots", OPT_SLOTS, RDX_ARG_REQUIRED, "N",                           \
	  "slots in the ring, 2..1024 (default 16)", NULL },                   \
	{ "io-threads", OPT_IO_THREADS, RDX_ARG_REQUIRED, "N",                 \
	  "file read/write threads, 1..64 (default 4)", NULL },                \
	{ "timeout", OPT_TIMEOUT, RDX_ARG_REQUIRED, "SECS",                    \
	  "give up after SECS of silence or stall (default 60)", NULL },       \
	{ "handshake-timeout", OPT_HANDSHAKE_TIMEOUT, RDX_ARG_REQUIRED, "SECS", \
	  "listening: drop a connection not authenticated within SECS (default 10, or --timeout when less)", \
	  NULL },                                                              \
	{ "bind", OPT_BIND, RDX_ARG_REQUIRED, "ADDR",                          \
	  "local address to bind", "host" },                                   \
	{ "ipv4", '4', RDX_ARG_NONE, NULL, "use IPv4 only", NULL },            \
	{ "ipv6", '6', RDX_ARG_NONE, NULL, "use IPv6 only", NULL }

/* The far end of rdcp: both tools listen, report the port on stdout and
 * take the key from stdin. */
#define CLI_SERVER_ROWS                                                        \
	{ "server", OPT_SERVER, RDX_ARG_NONE, NULL,                            \
	  "listen on --port, print 'RDX-PORT N' on stdout, read the key from stdin", \
	  NULL },                                                              \
	{ "port", OPT_PORT, RDX_ARG_REQUIRED, "PORT",                          \
	  "with --server: the port to listen on (default 0: any free port)", NULL }, \
	{ "stop-on-eof", OPT_STOP_ON_EOF, RDX_ARG_NONE, NULL,                  \
	  "with --server or --key-file -, and FILE: stop, as if interrupted, when stdin ends after the key", \
	  NULL },                                                              \
	/* rdcp's: "RDX-PROGRESS DONE TOTAL" lines on stderr (hidden) */       \
	{ "progress-lines", OPT_PROGRESS_LINES, RDX_ARG_NONE, NULL, NULL, NULL }

/* rdcp's and rdpipe's SSH options, handled by cp_ssh_cli() (src/cp). */
#define CLI_SSH_ROWS                                                           \
	{ "ssh-port", 'P', RDX_ARG_REQUIRED, "PORT",                           \
	  "SSH port of the remote hosts (default: ~/.ssh/config's, else 22)", NULL }, \
	{ "identity", 'i', RDX_ARG_REQUIRED, "FILE",                           \
	  "SSH private key to try first", "file" },                            \
	{ "ssh-config", 'F', RDX_ARG_REQUIRED, "FILE",                         \
	  "SSH config file instead of ~/.ssh/config", "file" },                \
	{ "ssh-option", 'o', RDX_ARG_REQUIRED, "OPTION",                       \
	  "SSH option as Key=Value, as ssh_config(5): StrictHostKeyChecking, UserKnownHostsFile, User, Port, IdentityFile, ConnectTimeout, BatchMode, Ciphers, Compression, and what libssh applies (ProxyJump, ProxyCommand, HostName, KexAlgorithms, MACs, ...); LogLevel and other harmless ones: ignored, with a warning", \
	  NULL },                                                              \
	{ "batch", 'B', RDX_ARG_NONE, NULL,                                    \
	  "never ask for a password or passphrase (BatchMode=yes)", NULL },    \
	{ "cipher", 'c', RDX_ARG_REQUIRED, "CIPHERS",                          \
	  "SSH ciphers for the login, comma-separated, as ssh -c (the data: --encrypt)", NULL }, \
	{ "jump", 'J', RDX_ARG_REQUIRED, "[USER@]HOST[:PORT]",                 \
	  "log in through this SSH jump host (ProxyJump; the data still goes directly)", "host" }, \
	{ "ipv4", '4', RDX_ARG_NONE, NULL, "IPv4 only, for SSH and the data", NULL }, \
	{ "ipv6", '6', RDX_ARG_NONE, NULL, "IPv6 only, for SSH and the data", NULL }

/* --direct, the page-cache policy of what a tool writes (core/direct.h);
 * what writes is said first. */
#define CLI_DIRECT_ROW(WHAT)                                                   \
	{ "direct", OPT_DIRECT, RDX_ARG_REQUIRED, "MODE",                      \
	  WHAT ": auto (default: through the page cache while what this run writes stays within a quarter of the memory available, with O_DIRECT past that), always (O_DIRECT) or never (the page cache, paced)", \
	  "auto always never" }

#define CLI_COMMON_TAIL                                                        \
	{ "help", 'h', RDX_ARG_NONE, NULL, "show this help and exit", NULL },  \
	{ "version", 'V', RDX_ARG_NONE, NULL, "show the version and exit",     \
	  NULL },                                                              \
	{ "completion", OPT_COMPLETION, RDX_ARG_REQUIRED, "SHELL", NULL,       \
	  "bash zsh" },                                                        \
	{ NULL, 0, RDX_ARG_NONE, NULL, NULL, NULL }

struct cli_state {
	const struct rdx_cli *cli;
	struct rdx_xfer_opts o;
	const char *key_file;
	int verbose;
	bool json;
	bool server;	  /* --server */
	bool stop_on_eof; /* --stop-on-eof */
	bool tree;	  /* -r */
	const char *port; /* --port */
	bool done; /* --help, --version or --completion ran: exit 0 */
	struct rdx_rule rules[CLI_RULES_MAX]; /* --include/--exclude, in order */
	size_t nrules;
	const char *tops[CLI_EXPECT_MAX]; /* rdrecv --expect: NULL for '' */
};

/* Appends an --include (include true) or --exclude pattern to c->rules
 * and points c->o at them.  Returns 0, or -1 after a usage error. */
int cli_add_rule(struct cli_state *c, const char *pattern, bool include);

/* --limit-rate KBITS (rdsend, rdcp -l): kilobits of data a second, into
 * c->o.rate_limit_bps.  Returns 0, or -1 after a usage error. */
int cli_limit_rate(struct cli_state *c, const char *opt, const char *arg);

/* --compress[=LEVEL] (-C): zstd level 1..19, 1 without one, into
 * c->o.compress.  Returns 0, or -1 after a usage error. */
int cli_compress(struct cli_state *c, const char *arg);

/* Parses the options both tools share; returns 0, 1 if the key is not a
 * common one, or -1 after a usage error (printed). */
int cli_common_opt(struct cli_state *c, int key, const char *arg);

/* Loads the key (positional arg, --key-file or RDX_KEY; --key-file -
 * reads the first line of stdin and, with --stop-on-eof, then watches it
 * as --server does); wipes the positional argument in argv so that ps
 * shows less.  Returns 0, or the
 * exit status after an error it printed (usage, or I/O for the file). */
int cli_load_key(struct cli_state *c, char *arg);

/* --server: checks that no key was given any other way, reads it from the
 * first line of stdin and arranges for the bound port to be printed on
 * stdout as "RDX-PORT N"; with --stop-on-eof, watches stdin for its end
 * (the controller, rdcp, is gone) and then stops the transfer as SIGINT
 * would.  Without --server, refuses --port and --stop-on-eof.  Returns 0
 * or the exit status after an error it printed. */
int cli_server_setup(struct cli_state *c);

/* Installs SIGINT/SIGTERM handlers that ask the transfer to stop, and
 * ignores SIGPIPE. */
void cli_signals(struct rdx_xfer_opts *o);

/* Keeps freed heap memory in the process rather than handing it back to
 * the kernel at each free (see cli.c). */
void cli_heap_keep(void);

/* Prints --json output (to stdout, or stderr when stdout carries data). */
void cli_report(const struct cli_state *c, const struct rdx_xfer_stats *st,
		bool stdout_is_data);

/* Says whether a key could come from --key-file or RDX_KEY. */
bool cli_key_elsewhere(const struct cli_state *c);

/* Says whether the key comes from the first line of stdin: --server, or
 * --key-file - (how rdcp hands it to a far rdrecv --connect). */
bool cli_key_from_stdin(const struct cli_state *c);

#endif
