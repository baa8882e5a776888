/* The page-cache policy of what the tools write (--direct auto|always|
 * never): which files go around the page cache (O_DIRECT) and which
 * through it, and how buffered writes of big files are paced.
 *
 * A file written through the page cache is ready to use at once: whoever
 * reads it next (a worker loading model weights) reads memory.  A file
 * too big for that (a disk image, a zfs send stream) would push
 * everything else out of memory and leave gigabytes of dirty pages for
 * writeback to stall on; it goes around the cache.  auto draws the line
 * at a quarter of the memory available, counted over a whole transfer
 * (a tree's files add up).  Reads keep their own rule (fileio.c: O_DIRECT
 * for data not in the cache).
 *
 * Buffered writes of big files are paced the way fio's sync_file_range=
 * paces them: each finished range's writeback is started at once
 * (SYNC_FILE_RANGE_WRITE), and once more than the plan's behind bytes
 * are written and not yet waited for, the writer waits for the oldest
 * (WAIT_BEFORE | WRITE | WAIT_AFTER).  Dirty pages stay bounded, the
 * data reaches the disk early, and what stays in the cache is clean. */
#ifndef RDX_DIRECT_H
#define RDX_DIRECT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum rdx_direct { RDX_DIRECT_AUTO, RDX_DIRECT_ALWAYS, RDX_DIRECT_NEVER };

/* "auto", "always" or "never" into *out.  Returns 0 or -EINVAL. */
int rdx_direct_parse(const char *s, enum rdx_direct *out);

/* The policy's name as --direct takes it. */
const char *rdx_direct_name(enum rdx_direct d);

/* auto: the page cache's share of the memory available (1/4). */
#define RDX_CACHE_SHARE 4
/* What auto assumes where the memory available cannot be read. */
#define RDX_AVAIL_UNKNOWN ((uint64_t)1 << 30)
/* Buffered files from this size on (or of unknown size) are paced. */
#define RDX_PACE_MIN ((uint64_t)64 << 20)
/* Bytes a paced file may have written and not yet waited for: a
 * sixteenth of the memory available (under the kernel's own background
 * writeback threshold, 10 %), within these bounds. */
#define RDX_BEHIND_MIN ((uint64_t)64 << 20)
#define RDX_BEHIND_MAX ((uint64_t)2 << 30)
/* direct_from of a plan that never writes with O_DIRECT. */
#define RDX_NO_DIRECT UINT64_MAX

/* What the choice looks at: one file of a transfer. */
struct rdx_wneed {
	enum rdx_direct policy;
	bool size_known;
	uint64_t size;	 /* the file's bytes (with size_known) */
	uint64_t before; /* what the same transfer wrote through the page cache
			  * before this file (a tree's earlier files) */
	uint64_t avail;	 /* rdx_mem_available(); 0: unknown */
	bool fsync;	 /* --fsync: durable before its name */
};

enum rdx_wwhy {
	RDX_WHY_ALWAYS,	 /* --direct always */
	RDX_WHY_NEVER,	 /* --direct never */
	RDX_WHY_FITS,	 /* auto: within the page cache's share */
	RDX_WHY_BIG,	 /* auto: past it */
	RDX_WHY_UNKNOWN, /* auto, size unknown: the share, then O_DIRECT */
};

/* How one file is written. */
struct rdx_wplan {
	/* Writes at this offset and past it go O_DIRECT (where aligned and
	 * the file system takes it): 0 all of them, RDX_NO_DIRECT none.  A
	 * stream of unknown size goes through the cache for the share
	 * that is left, and around it beyond. */
	uint64_t direct_from;
	uint64_t behind; /* buffered writes: write-behind lag; 0: not paced */
	uint64_t share;	 /* auto: the page cache's share of avail */
	bool fsync;	 /* synced before it gets its name, whatever the rest */
	/* auto's O_DIRECT (too big for the memory, or past a stream's
	 * share) goes one write at a time: two or more in flight made the
	 * fdatasync of other processes wait up to 1.3 s on the 2-core VM's
	 * disk, one write at a time under 4 ms, at 80-95 % of the speed
	 * (bench/RESULTS.md, "bigfile.sh").  --direct always keeps every
	 * writer going. */
	bool serial;
	enum rdx_wwhy why;
};

/* The plan for n: a pure function of it (tests/unit/test_direct.c). */
struct rdx_wplan rdx_wplan_choose(const struct rdx_wneed *n);

/* The plan in words for -v ("page cache, paced (auto: 1.00 GiB of 3.00
 * GiB left of a quarter of the memory available)"), into buf; returns
 * buf. */
char *rdx_wplan_say(const struct rdx_wplan *p, const struct rdx_wneed *n, char *buf,
		    size_t len);

/* The memory the page cache may take without pushing out what others
 * use: /proc/meminfo's MemAvailable, less where this process's cgroup
 * (v2) allows less (memory.max less memory.current, up the hierarchy).
 * 0 when nothing says. */
uint64_t rdx_mem_available(void);

/* One file's writes, as its plan has them.  The descriptors stay the
 * caller's.  Writes at distinct offsets may come from several threads. */
struct rdx_wfile {
	int fd;		       /* buffered */
	int dfd;	       /* O_DIRECT, or -1 */
	atomic_bool direct_ok; /* the file system takes O_DIRECT (until it refuses) */
	uint64_t direct_from;
	_Atomic uint64_t behind; /* 0: not paced (or sync_file_range refused) */
	_Atomic uint64_t end;	 /* the furthest end a buffered write reached */
	_Atomic uint64_t waited; /* below it, written back (lock held to move it) */
	pthread_mutex_t lock;	 /* one writer waits at a time; the others queue */
	bool serial;		 /* the plan's: one O_DIRECT write at a time */
	pthread_mutex_t dlock;	 /* held for an O_DIRECT write, when serial */
};

void rdx_wfile_init(struct rdx_wfile *w, int fd, int dfd, const struct rdx_wplan *p);

/* A new plan for the writes from now on (before any is in flight). */
void rdx_wfile_replan(struct rdx_wfile *w, const struct rdx_wplan *p);

void rdx_wfile_release(struct rdx_wfile *w);

/* Writes len bytes of buf at off: through dfd when the plan says
 * O_DIRECT for off and buf, len and off are 4 KiB-aligned (a file system
 * that refuses it at write turns it off for good), else through fd and
 * paced.  Returns 0 or -errno (a failed write-behind too). */
int rdx_wfile_pwrite(struct rdx_wfile *w, const void *buf, size_t len, uint64_t off);

/* Whether writes at off would go around the page cache. */
bool rdx_wfile_direct_at(struct rdx_wfile *w, uint64_t off);

#endif
