/* Directory trees as one stream: the sender walks its sources and writes a
 * pax archive (libarchive) into a pipe that the core reads as its source;
 * the receiver's core writes the stream into a pipe that an unpacking
 * thread reads, extracting under the destination.
 *
 *   stream:  ENTRY(path, type, mode, times, owner, link, sparse map) DATA...
 *            [HASH entry after each regular file with data of its own]
 *            ... end-of-archive blocks
 *
 * HASH is a regular-file entry named RDX_TREE_HASH_NAME (an absolute path,
 * which no real entry may have) holding the 16-byte canonical XXH3-128 of
 * the previous file's data bytes in order (holes not included).  The
 * receiver writes every regular file under a temporary name beside its
 * final one (".NAME.rdx-XXXXXX") and renames it only once that hash
 * matched, so a file under its final name is always complete.
 *
 * Received names are hostile: absolute paths, ".." components, hard-link
 * targets outside the tree and writing through a symlink (one the sender
 * made earlier, or one already there) are refused; the first such entry
 * ends the transfer.  Devices and sockets are skipped with a warning. */
#ifndef RDX_TREE_H
#define RDX_TREE_H

#include "core/direct.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define RDX_TREE_HASH_NAME "/.rdx-xxh3-128"
/* --delete: an entry whose data is a name the receiver removes. */
#define RDX_TREE_DELETE_NAME "/.rdx-delete"
/* An entry whose data says what the sender could not read and why
 * ("NAME: reason": a source, a directory it could not list, an entry it
 * could not stat): the receiver shows it and fails, rather than take a
 * shorter tree for the whole. */
#define RDX_TREE_MISSING_NAME "/.rdx-missing"

struct rdx_tree_pack;
struct rdx_tree_unpack;
struct rdx_tree_plan;
struct rdx_list_entry;

/* --checksum's content hashes are keyed with this session's list key
 * (RDX_LIST_KEY_LEN bytes, from the shared key and both nonces): a
 * listing shows no one without the key what a file holds. */
#define RDX_LIST_KEY_LEN 32

/* --sync: the receiver's regular files (from its LIST frames), by the
 * names the sender sends them under, their hashes keyed with key.
 * Memory grows with the destination tree: about 60 bytes plus the name
 * per file. */
int rdx_tree_plan_new(struct rdx_tree_plan **out, const uint8_t key[RDX_LIST_KEY_LEN]);

/* Adds one listed entry.  Returns 0 or -ENOMEM. */
int rdx_tree_plan_add(struct rdx_tree_plan *p, const struct rdx_list_entry *e);

/* delete: after the files, the packer sends the removal of every listed
 * entry it did not walk (children before their directories).  dry_run:
 * it sends nothing but prints "would send 'NAME'" and "would delete
 * 'NAME'" lines on stderr. */
void rdx_tree_plan_options(struct rdx_tree_plan *p, bool delete, bool dry_run);

void rdx_tree_plan_free(struct rdx_tree_plan *p);

/* The name a source path is sent under (its last component; "." and
 * "dir/" resolved), malloc'ed; NULL for "/" or out of memory. */
char *rdx_tree_top_name(const char *path);

struct rdx_rule;

/* What to pack. */
struct rdx_tree_pack_opts {
	const char *const *paths;     /* files and directories, each sent under its base name */
	unsigned n;
	bool follow;		      /* -L: follow every symlink (the paths themselves always) */
	bool atime;		      /* access times too (rdcp -p, as scp -p): a pax
				       * header for every entry */
	const struct rdx_rule *rules; /* --include/--exclude on names below the tops; borrowed */
	size_t nrules;
	struct rdx_tree_plan *plan;   /* --sync: the receiver's listing, taken over; or NULL */
	unsigned readers;	      /* threads reading small files ahead and big ones in chunks
				       * (--io-threads; at most the CPUs) */
};

/* Starts walking o->paths on a thread of its own; *fd is the read end of
 * the stream, owned by the caller (fd NULL: no pipe, the stream is read
 * with rdx_tree_pack_read()).  Unreadable files are skipped with a
 * warning and counted.  A name the rules exclude is not sent, and an
 * excluded directory is not walked.  With a plan, regular files the
 * receiver has with the same size and mtime (seconds) are not sent.
 * libarchive's walk descends with fchdir() and returns: nothing else in
 * the process may resolve relative paths until rdx_tree_pack_finish().
 * Returns 0 or -errno (the plan is freed either way). */
int rdx_tree_pack_start(struct rdx_tree_pack **out,
			const struct rdx_tree_pack_opts *o, int *fd);

/* Without a pipe: copies the next cap bytes of the stream into buf (fewer
 * only at its end), waiting for the walk.  Returns the bytes, 0 at the
 * end, -ECANCELED once *stop is set with nothing copied. */
ssize_t rdx_tree_pack_read(struct rdx_tree_pack *p, void *buf, size_t cap,
			   const atomic_int *stop);

/* Without a pipe: nothing more will be read (a pipe's reader closes it);
 * the walk stops at its next write. */
void rdx_tree_pack_close_input(struct rdx_tree_pack *p);

/* Waits for the walk to end (the caller has read the stream to its end,
 * or closed it) and frees it.  Returns 0; -RDX_ELOCAL when some files
 * could not be read (each was named in a warning); -RDX_EUSAGE when a
 * source could not be walked at all; -ENOMEM. */
int rdx_tree_pack_finish(struct rdx_tree_pack *p);

/* How a receiver extracts, and what its own user asked for: the sender
 * (a far end that may be hostile) is held to it.  A zero value takes any
 * tree's names and refuses removals. */
struct rdx_tree_unpack_opts {
	bool as_root;	  /* restore ownership */
	unsigned writers; /* threads writing small files (0: the unpacking thread) */
	/* The top-level names the sender may use: every entry lies under
	 * one of them.  A NULL among them stands for one name the sender
	 * picks (a source such as "host:." whose name only the far side
	 * knows).  ntops 0: any names (rdrecv -r, which asked for none). */
	const char *const *tops;
	unsigned ntops;
	bool files_only;   /* each top a regular file, nothing below it (rdcp -p) */
	/* tops are patterns (a remote glob, rdcp 'host:*.log'): every
	 * top-level name must match one of them (fnmatch, a leading '.'
	 * only where the pattern has one), as many names as match. */
	bool tops_glob;
	bool allow_delete; /* --delete was asked for here: obey removal entries */
	/* as_root: keep files' set-user-ID and set-group-ID bits (as tar's
	 * --same-permissions); without it they are dropped, so that a sender
	 * cannot make a set-id program of its own here. */
	bool keep_setid;
	/* The page-cache policy (core/direct.h), counted over the whole
	 * tree: its files go through the cache while what went through it
	 * stays within the share, big ones around it past that.  Small
	 * files (under BIG_FILE, written whole) go through it always. */
	enum rdx_direct direct;
	bool fsync; /* each file synced before it gets its name */
};

/* Prepares to extract under dst: an existing directory receives the
 * sent trees by their names; a name that does not exist (in an existing
 * directory) becomes the one tree sent, as with cp -r, and an existing
 * regular file is replaced by the one file sent (a tree there is
 * refused).  Starts the unpacking thread; *fd is the write end of the
 * stream, owned by the caller.  Every name is made absolute under the
 * real path of the extraction root (no working directory is changed).
 * o says how, and what the sender may do (o->tops is copied).  Small
 * files are received whole and their hash checked before a writer
 * writes them.  fd NULL: no pipe, the stream comes through
 * rdx_tree_unpack_feed().  Returns 0 or -errno (-ENOTDIR: dst exists and
 * is neither a directory nor a regular file). */
int rdx_tree_unpack_start(struct rdx_tree_unpack **out, const char *dst,
			  const struct rdx_tree_unpack_opts *o, const atomic_int *stop,
			  int *fd);

/* Without a pipe: hands len bytes of the stream to the unpacker, which
 * reads them in place; returns once it is done with them (0), or -EPIPE
 * when it reads no more (it failed, or the tree ended before them). */
int rdx_tree_unpack_feed(struct rdx_tree_unpack *u, const void *buf, size_t len);

/* Without a pipe: the stream ends here (a pipe's writer closes it). */
void rdx_tree_unpack_end_feed(struct rdx_tree_unpack *u);

/* --sync: calls emit for every entry the receiver has where the sender's
 * top-level name top would land (walked from descriptors, without
 * following symlinks; at most 128 directories deep),
 * named as the sender names it; with key (--checksum): regular files with
 * their XXH3-128 keyed with it.  A top that is not a plain name, or not
 * one the receiver's opts allow, is refused (-RDX_EPROTO); emit's
 * non-zero result stops the walk and is returned. */
int rdx_tree_unpack_list(struct rdx_tree_unpack *u, const char *top,
			 const uint8_t *key,
			 int (*emit)(void *arg, const struct rdx_list_entry *e),
			 void *arg);

/* What an extraction made (for -v). */
struct rdx_tree_counts {
	uint64_t files; /* everything but directories */
	uint64_t bytes; /* file data written */
};

/* Waits for the extraction to end (the caller has closed *fd) and frees
 * it, filling *counts when not NULL.  ok false: the stream failed,
 * whatever is half-written is removed.  Returns 0 or a negative code with
 * why (NUL-terminated, len bytes) set: -RDX_EPROTO for a malformed
 * archive or a refused name, -RDX_EINTEGRITY for a file whose hash did
 * not match, -RDX_ELOCAL when some entries could not be written (each
 * was named in a warning). */
int rdx_tree_unpack_finish(struct rdx_tree_unpack *u, bool ok, char *why,
			   size_t len, struct rdx_tree_counts *counts);

#endif
