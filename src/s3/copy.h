/* Copies with S3 as a command makes them: put a file or stdin, get an
 * object to a file or stdout, copy server side, and trees both ways (sync,
 * cp -r).  rds3's commands and rdcp's s3:// copies both fill one struct
 * s3_copy_opts (from the options of src/cmd/s3opts.c) and run these on
 * one session: the configuration the AWS CLI would find and a client.
 *
 * Each s3_run_* prints its own one-line errors, prefixed by the tool
 * (core/log.h), and returns the tool's exit status (RDX_EXIT_*): what
 * failed is the user's business, said once, where it is known. */
#ifndef RDX_S3_COPY_H
#define RDX_S3_COPY_H

#include "core/tree/rules.h"
#include "s3/config.h"
#include "s3/multipart.h"
#include "s3/s3.h"
#include "s3/sync.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#define S3_RULES_MAX 256 /* --include and --exclude patterns */
#define S3_KEY_MAX 1024

struct s3_copy_opts {
	struct s3_config_opts co;    /* profile, endpoint, region, addressing */
	unsigned retries;	     /* of a failed request (4) */
	uint64_t connect_timeout_ms; /* (10 s) */
	uint64_t stall_ms;	     /* a request stalled this long fails (60 s) */
	bool insecure;		     /* no TLS certificate check */
	uint64_t part_size;	     /* multipart parts, download ranges (8 MiB) */
	unsigned concurrency;	     /* parts or ranges at once (4) */
	unsigned jobs;		     /* sync, cp -r: objects at once (8) */
	bool del, checksum, dry_run; /* sync: --delete, --checksum, --dry-run */
	struct rdx_rule rules[S3_RULES_MAX]; /* sync, cp -r */
	size_t nrules;
	bool recursive; /* cp: a directory or prefix */
	bool resume;	/* get (and cp s3://BUCKET/KEY FILE): from the partial */
	bool progress;	/* a progress line on stderr when it is a terminal */
	bool quiet;
	int verbose;
	enum s3_rdma_mode rdma; /* --rdma (auto, or RDS3_RDMA) */
	bool rdma_set;		/* given on the command line */
	bool rdma_dc;		/* --rdma-dc: a DC target, key rdma_dc_key */
	uint64_t rdma_dc_key;
	enum rdx_direct direct; /* downloads: the page-cache policy (--direct) */
	bool direct_set;	/* given */
};

/* The defaults above. */
void s3_copy_opts_init(struct s3_copy_opts *o);

/* The options of o that command cmd cannot take ("put", "get", "cat",
 * "cp" or "sync" with its first two arguments src and dst, NULL when it
 * has none; any other command takes none of them), said in one line.
 * Returns 0 or RDX_EXIT_USAGE. */
int s3_copy_opts_check(const struct s3_copy_opts *o, const char *cmd, const char *src,
		       const char *dst);

/* An open session: the options, the configuration, a client. */
struct s3_session {
	struct s3_copy_opts o;
	struct s3_config cfg;
	struct s3_client_opts client;
	struct s3_xfer_opts xfer;
	struct s3_sync_opts sync;
	struct s3_client *c;
	const char *cmd; /* names the command in messages ("put", "cp", "sync") */
	const atomic_int *stop;
	_Atomic uint64_t moved, total; /* --progress: bytes so far, and of what (0: unknown) */
	_Atomic uint64_t cached;	/* downloads: bytes written through the page cache */
	struct s3_rdma_stats rdma;	/* -v: bytes by RDMA and by HTTP */
	struct {
		pthread_t thread;
		pthread_mutex_t lock;
		pthread_cond_t cond;
		bool on, done;
	} line; /* the progress line's thread */
};

/* Loads the configuration of o (printing why it cannot be) and makes the
 * client; *stop set ends every request.  Returns 0, or RDX_EXIT_USAGE (a
 * bad configuration) or RDX_EXIT_FAIL. */
int s3_session_open(struct s3_session *s, const struct s3_copy_opts *o,
		    const atomic_int *stop);
void s3_session_close(struct s3_session *s);

/* Draws the progress line while a command runs, when asked for and stderr
 * is a terminal. */
void s3_session_progress_begin(struct s3_session *s);
void s3_session_progress_end(struct s3_session *s);

/* "TOOL: CMD WHAT: NoSuchKey: The specified key does not exist" for a
 * failed request (ret), and the exit status for it. */
int s3_session_fail(struct s3_session *s, const char *what, int ret);

struct s3_url {
	char bucket[256];
	char key[S3_KEY_MAX + 1];
};

/* Parses "s3://BUCKET[/KEY]"; the key may be empty.  Returns 0, or -1
 * with the reason printed. */
int s3_url_parse(const char *arg, struct s3_url *u);

/* 0 when u names an object (a key, not ending in '/'), else -1 with the
 * reason printed. */
int s3_url_need_key(const char *arg, const struct s3_url *u);

/* FILE or - (stdin) to s3://BUCKET/KEY (a KEY ending in '/', or none,
 * takes FILE's name): one PutObject, or a multipart upload above a part. */
int s3_run_put(struct s3_session *s, const char *src, const char *url);

/* s3://BUCKET/KEY to dst: a file (NULL: the key's last part), or - for
 * stdout (cat).  Parallel ranges above a part; o.resume continues a
 * partial. */
int s3_run_get(struct s3_session *s, const char *url, const char *dst);

/* cp SRC DST: put, get, a server-side copy (both s3://), or with
 * o.recursive a tree both ways (as sync without comparing). */
int s3_run_cp(struct s3_session *s, const char *src, const char *dst);

/* sync SRC DST (a directory or s3://BUCKET[/PREFIX] each, one of them
 * S3): send what differs; copy_all: everything (cp -r). */
int s3_run_sync(struct s3_session *s, const char *src, const char *dst, bool copy_all);

#endif
