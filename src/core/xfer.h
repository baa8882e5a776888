/* One transfer, sender or receiver side: the public entry points of the
 * streaming core used by rdsend and rdrecv (and later rdcp and rdpipe). */
#ifndef RDX_XFER_H
#define RDX_XFER_H

#include "core/auth.h"
#include "core/direct.h"
#include "core/tree/rules.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum rdx_transport_mode { RDX_TRANSPORT_AUTO, RDX_TRANSPORT_TCP, RDX_TRANSPORT_RDMA };

struct rdx_xfer_opts {
	const char *host; /* the peer's address: this side dials; NULL: listens */
	const char *port; /* dialing: the peer's port; listening: ours ("0": any) */
	const char *bind;
	int family;	  /* AF_UNSPEC, AF_INET, AF_INET6 */
	const char *path; /* NULL or "-": stdin / stdout; a tree's destination */
	/* Instead of path, a descriptor (> 0) the sender reads or the
	 * receiver writes as a stream: rdpipe's commands and >>FILE.  The
	 * transfer uses a duplicate; the caller keeps fd and closes it.
	 * fd_name names it in messages. */
	int fd;
	const char *fd_name;
	/* Trees (src/core/tree.h): a sender with ntree > 0 sends these files
	 * and directories as one tree (path unused); a receiver with tree
	 * set extracts one under path. */
	const char *const *tree_paths;
	unsigned ntree;
	bool tree;	   /* receiver */
	/* Receiver: what this side's user asked for, which the sender is
	 * held to (rdx_tree_unpack_opts): the top-level names it may send
	 * (NULL entries: one it picks; none: any), files only (rdcp -p),
	 * whether it may remove what it lacks, and whether it may list
	 * what is here (--sync, --checksum, --delete or --dry-run asked). */
	const char *const *tree_tops;
	unsigned ntree_tops;
	bool tree_files_only;
	bool tree_tops_glob; /* tree_tops are patterns (rdcp 'host:*.log') */
	bool tree_allow_delete;
	bool tree_allow_list;
	bool tree_keep_setid; /* receiver as root: keep files' set-id bits */
	bool tree_follow;  /* sender: follow every symlink (-L) */
	bool tree_atime;   /* sender: files' access times too (rdcp -p) */
	bool tree_sync;	   /* sender: skip files the receiver has (--sync) */
	bool tree_delete;  /* sender, with tree_sync: remove what we lack */
	bool tree_dry_run; /* sender, with tree_sync: only say what would go */
	bool tree_checksum; /* sender, with tree_sync: compare content, not mtime */
	bool resume;	    /* sender, a file: continue the receiver's partial */
	/* Sender: at most this many bits of data a second (0: no limit), the
	 * bytes paced as they are read (before zstd), slots made small enough
	 * for an even pace (rdcp -l, as scp's). */
	uint64_t rate_limit_bps;
	/* Receiver, a file: a new one gets these permission bits less the
	 * umask (rdcp: the source's, as scp and cp give them), with
	 * RDX_NEW_MODE_SET; 0: 0666 less the umask.  An existing file keeps
	 * its own. */
	unsigned new_mode;
	const struct rdx_rule *tree_rules; /* sender: --include/--exclude */
	size_t ntree_rules;
	struct rdx_key key;
	enum rdx_transport_mode transport;
	const char *rdma_dev; /* --rdma-dev, or NULL */
	unsigned rdma_port;   /* --rdma-port, 0: the first ACTIVE one */
	int gid_index;	      /* --gid-index, -1: pick one */
	unsigned ack_timeout; /* --ack-timeout (rdx_net_opts's) */
	uint32_t slot_size;
	unsigned slots;
	unsigned streams;    /* sender: wanted; receiver: most accepted */
	unsigned io_threads; /* file readers / writers */
	int compress;	     /* zstd level, 0 = off (sender) */
	bool encrypt;
	bool fsync;
	/* Receiver: the page-cache policy of what it writes (--direct), a
	 * file's or a tree's (core/direct.h). */
	enum rdx_direct direct;
	bool progress;
	bool progress_lines; /* "RDX-PROGRESS DONE TOTAL" lines on stderr, for rdcp */
	uint64_t timeout_ms;	     /* silence limit during a transfer */
	uint64_t handshake_ms;	     /* listening: what one connection gets to authenticate
				      * (0: 10 s, or timeout_ms when less) */
	uint64_t connect_timeout_ms; /* dialing: how long to retry connecting */
	uint64_t wait_ms;	     /* listening: wait for the peer, 0 = forever */
	const atomic_int *interrupted; /* set by the tool's signal handler */
	/* listening: called once listening, with the bound port */
	void (*on_listen)(unsigned port, void *arg);
	void *on_listen_arg;
};

#define RDX_NEW_MODE_SET 0x10000u

struct rdx_xfer_stats {
	uint64_t bytes;	 /* plain bytes moved */
	double seconds;	 /* from authenticated session to end */
	const char *transport;
	unsigned streams;
	bool compress;
	bool encrypt;
};

/* Bytes of memory RDMA must lock for a transfer with these options (the
 * ring, plus each queue pair's own buffers): what RLIMIT_MEMLOCK must
 * allow unless the process has CAP_IPC_LOCK. */
uint64_t rdx_rdma_lock_need(const struct rdx_xfer_opts *o);

/* Sets the defaults every tool starts from. */
void rdx_xfer_opts_init(struct rdx_xfer_opts *o);

/* Sends o->path (or stdin) to a receiver, dialing o->host or, without
 * one, listening on o->port for the receiver to dial.  Prints exactly one
 * error line on failure.  Returns 0 or a negative error for
 * rdx_exit_code(). */
int rdx_send(const struct rdx_xfer_opts *o, struct rdx_xfer_stats *st);

/* Receives one stream into o->path (or stdout), listening on o->port or,
 * with o->host, dialing a listening sender.  Same conventions. */
int rdx_recv(const struct rdx_xfer_opts *o, struct rdx_xfer_stats *st);

#endif
