#include "core/direct.h"

#include "core/io.h"
#include "core/units.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const names[] = {
	[RDX_DIRECT_AUTO] = "auto",
	[RDX_DIRECT_ALWAYS] = "always",
	[RDX_DIRECT_NEVER] = "never",
};

int rdx_direct_parse(const char *s, enum rdx_direct *out)
{
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (!strcmp(s, names[i])) {
			*out = (enum rdx_direct)i;
			return 0;
		}
	return -EINVAL;
}

const char *rdx_direct_name(enum rdx_direct d)
{
	return (unsigned)d < sizeof(names) / sizeof(names[0]) ? names[d] : "?";
}

struct rdx_wplan rdx_wplan_choose(const struct rdx_wneed *n)
{
	uint64_t avail = n->avail ? n->avail : RDX_AVAIL_UNKNOWN;
	uint64_t share = avail / RDX_CACHE_SHARE;
	uint64_t left = n->before < share ? share - n->before : 0;
	uint64_t behind = avail / 16;
	struct rdx_wplan p = { .share = share, .fsync = n->fsync };

	switch (n->policy) {
	case RDX_DIRECT_ALWAYS:
		p.why = RDX_WHY_ALWAYS;
		return p; /* direct_from 0: all of it */
	case RDX_DIRECT_NEVER:
		p.why = RDX_WHY_NEVER;
		p.direct_from = RDX_NO_DIRECT;
		break;
	case RDX_DIRECT_AUTO:
	default:
		if (!n->size_known) {
			/* A stream (zfs send | rdsend): no telling how much
			 * comes, so what is left of the share goes through
			 * the cache, the rest around it. */
			p.why = RDX_WHY_UNKNOWN;
			p.direct_from = left & ~(uint64_t)(RDX_DIO_ALIGN - 1);
			p.serial = true;
		} else if (n->size <= left) {
			p.why = RDX_WHY_FITS;
			p.direct_from = RDX_NO_DIRECT;
		} else {
			p.why = RDX_WHY_BIG;
			p.serial = true;
			return p;
		}
		break;
	}
	/* --fsync writes it all to the disk before the rename anyway: the
	 * earlier that starts, the shorter the wait at the end. */
	if (p.direct_from && (n->fsync || !n->size_known || n->size >= RDX_PACE_MIN))
		p.behind = behind < RDX_BEHIND_MIN ? RDX_BEHIND_MIN
			   : behind > RDX_BEHIND_MAX ? RDX_BEHIND_MAX
						     : behind;
	return p;
}

char *rdx_wplan_say(const struct rdx_wplan *p, const struct rdx_wneed *n, char *buf,
		    size_t len)
{
	char size[32], before[48] = "", avail[80], from[32];
	const char *paced = p->behind ? ", paced" : "";

	rdx_fmt_bytes(size, sizeof(size), n->size);
	if (n->avail)
		snprintf(avail, sizeof(avail), "a quarter of the %s available",
			 rdx_fmt_bytes(from, sizeof(from), n->avail));
	else
		snprintf(avail, sizeof(avail), "a quarter of %s (the memory available is unknown)",
			 rdx_fmt_bytes(from, sizeof(from), RDX_AVAIL_UNKNOWN));
	if (n->before)
		snprintf(before, sizeof(before), " with %s before it",
			 rdx_fmt_bytes(from, sizeof(from), n->before));
	switch (p->why) {
	case RDX_WHY_ALWAYS:
		snprintf(buf, len, "O_DIRECT (--direct always)");
		break;
	case RDX_WHY_NEVER:
		snprintf(buf, len, "page cache%s (--direct never)", paced);
		break;
	case RDX_WHY_FITS:
		snprintf(buf, len, "page cache%s (--direct auto: %s%s is within %s)", paced, size,
			 before, avail);
		break;
	case RDX_WHY_BIG:
		snprintf(buf, len, "O_DIRECT, one write at a time (--direct auto: %s%s is past %s)",
			 size, before, avail);
		break;
	case RDX_WHY_UNKNOWN:
	default:
		if (p->direct_from)
			snprintf(buf, len,
				 "page cache%s for the first %s, O_DIRECT one write at a time past it (--direct auto: "
				 "the size is not known;%s %s)",
				 paced, rdx_fmt_bytes(from, sizeof(from), p->direct_from), before,
				 avail);
		else
			snprintf(buf, len,
				 "O_DIRECT, one write at a time (--direct auto: the size is not known, and%s nothing is "
				 "left of %s)",
				 before, avail);
		break;
	}
	return buf;
}

/* A "Key: N kB" line of /proc/meminfo, in bytes; 0 when absent. */
static uint64_t meminfo(const char *key)
{
	FILE *f = fopen("/proc/meminfo", "re");
	unsigned long long kb = 0;
	size_t klen = strlen(key);
	char line[128];

	while (f && fgets(line, sizeof(line), f))
		if (!strncmp(line, key, klen) && line[klen] == ':' &&
		    sscanf(line + klen + 1, "%llu", &kb) == 1)
			break;
	if (f)
		fclose(f);
	return (uint64_t)kb * 1024;
}

/* The first number in the file, or in its line starting with key. */
static bool read_u64(const char *path, const char *key, uint64_t *out)
{
	FILE *f = fopen(path, "re");
	unsigned long long v;
	char line[256];
	bool ok = false;

	while (!ok && f && fgets(line, sizeof(line), f)) {
		const char *p = line;

		if (key) {
			size_t k = strlen(key);

			if (strncmp(line, key, k) || line[k] != ' ')
				continue;
			p = line + k + 1;
		}
		ok = sscanf(p, "%llu", &v) == 1;
		if (!key)
			break;
	}
	if (f)
		fclose(f);
	if (ok)
		*out = v;
	return ok;
}

/* A memory cgroup's files: v2's, or v1's (the memory controller's own
 * hierarchy, as on hosts that have not moved to v2). */
struct cgfiles {
	const char *root, *max, *cur, *cache;
};
static const struct cgfiles cg_v2 = { "/sys/fs/cgroup", "memory.max", "memory.current", "file" };
static const struct cgfiles cg_v1 = { "/sys/fs/cgroup/memory", "memory.limit_in_bytes",
				      "memory.usage_in_bytes", "total_cache" };

/* What the cgroup cg lets its page cache grow to: its limit less what it
 * holds that is not page cache.  False where it has no limit. */
static bool cgroup_room(const struct cgfiles *f, const char *cg, uint64_t *room)
{
	char path[4200];
	uint64_t max, cur, cache = 0;

	snprintf(path, sizeof(path), "%s%s/%s", f->root, cg, f->max);
	if (!read_u64(path, NULL, &max) || max >= (uint64_t)1 << 62) /* "max", v1's none */
		return false;
	snprintf(path, sizeof(path), "%s%s/%s", f->root, cg, f->cur);
	if (!read_u64(path, NULL, &cur))
		return false;
	snprintf(path, sizeof(path), "%s%s/memory.stat", f->root, cg);
	read_u64(path, f->cache, &cache);
	cur = cur > cache ? cur - cache : 0;
	*room = max > cur ? max - cur : 0;
	return true;
}

/* The least room of cg and the cgroups above it (any level's limit holds
 * for what is below), into *avail. */
static void cgroup_limit(const struct cgfiles *f, char *cg, uint64_t *avail)
{
	uint64_t room;
	char *slash;

	while (*cg == '/' && !strstr(cg, "/..")) {
		if (cgroup_room(f, cg, &room) && (!*avail || room < *avail))
			*avail = room ? room : 1;
		slash = strrchr(cg, '/');
		if (slash == cg)
			break;
		*slash = '\0';
	}
}

uint64_t rdx_mem_available(void)
{
	uint64_t avail = meminfo("MemAvailable");
	FILE *f = fopen("/proc/self/cgroup", "re");
	char line[4096];

	/* "0::/path" (v2), "N:...memory...:/path" (v1). */
	while (f && fgets(line, sizeof(line), f)) {
		char *ctl = strchr(line, ':'), *cg = ctl ? strchr(ctl + 1, ':') : NULL;

		if (!cg)
			continue;
		*ctl++ = '\0';
		*cg++ = '\0';
		cg[strcspn(cg, "\n")] = '\0';
		if (!strcmp(line, "0") && !*ctl)
			cgroup_limit(&cg_v2, cg, &avail);
		else if (strstr(ctl, "memory"))
			cgroup_limit(&cg_v1, cg, &avail);
	}
	if (f)
		fclose(f);
	return avail;
}

void rdx_wfile_init(struct rdx_wfile *w, int fd, int dfd, const struct rdx_wplan *p)
{
	w->fd = fd;
	w->dfd = dfd;
	atomic_init(&w->direct_ok, dfd >= 0);
	w->direct_from = p->direct_from;
	atomic_init(&w->behind, p->behind);
	atomic_init(&w->end, 0);
	atomic_init(&w->waited, 0);
	pthread_mutex_init(&w->lock, NULL);
	w->serial = p->serial;
	pthread_mutex_init(&w->dlock, NULL);
}

void rdx_wfile_replan(struct rdx_wfile *w, const struct rdx_wplan *p)
{
	w->direct_from = p->direct_from;
	atomic_store(&w->behind, p->behind);
	w->serial = p->serial;
}

void rdx_wfile_release(struct rdx_wfile *w)
{
	pthread_mutex_destroy(&w->lock);
	pthread_mutex_destroy(&w->dlock);
}

bool rdx_wfile_direct_at(struct rdx_wfile *w, uint64_t off)
{
	return w->dfd >= 0 && off >= w->direct_from && atomic_load(&w->direct_ok);
}

static bool aligned(uint64_t v)
{
	return (v & (RDX_DIO_ALIGN - 1)) == 0;
}

/* sync_file_range failed with err: a disk error fails the write; a file
 * that cannot take it (a pipe, a file system without it) goes unpaced. */
static int pace_failed(struct rdx_wfile *w, int err)
{
	if (err == EIO || err == ENOSPC)
		return -err;
	atomic_store(&w->behind, 0);
	return 0;
}

/* [off, off + len) was just written through the cache: its writeback
 * starts now; past behind bytes ahead of what was waited for, this
 * writer waits for the oldest (in steps of a quarter of behind, so that
 * waits are few and large).  Writers go roughly in offset order (slots,
 * stages and ranges in flight are a few MiB apart), so the end reached
 * less behind is written. */
static int pace(struct rdx_wfile *w, uint64_t off, size_t len)
{
	uint64_t behind = atomic_load(&w->behind), end = off + len, cur, from, to;
	int ret = 0;

	if (!behind || !len)
		return 0;
	if (sync_file_range(w->fd, (off64_t)off, (off64_t)len, SYNC_FILE_RANGE_WRITE))
		return pace_failed(w, errno);
	cur = atomic_load(&w->end);
	while (cur < end && !atomic_compare_exchange_weak(&w->end, &cur, end))
		;
	if (cur < end)
		cur = end;
	if (cur < atomic_load(&w->waited) + behind + behind / 4)
		return 0;
	pthread_mutex_lock(&w->lock);
	from = atomic_load(&w->waited);
	cur = atomic_load(&w->end);
	to = cur > behind ? (cur - behind) & ~(uint64_t)(RDX_DIO_ALIGN - 1) : 0;
	if (to > from) {
		if (sync_file_range(w->fd, (off64_t)from, (off64_t)(to - from),
				    SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE |
					    SYNC_FILE_RANGE_WAIT_AFTER))
			ret = pace_failed(w, errno);
		else
			atomic_store(&w->waited, to);
	}
	pthread_mutex_unlock(&w->lock);
	return ret;
}

int rdx_wfile_pwrite(struct rdx_wfile *w, const void *buf, size_t len, uint64_t off)
{
	ssize_t n;

	if (rdx_wfile_direct_at(w, off) && aligned(off) && aligned(len) &&
	    aligned((uintptr_t)buf)) {
		if (w->serial)
			pthread_mutex_lock(&w->dlock);
		n = rdx_pwrite_full(w->dfd, buf, len, (off_t)off);
		if (w->serial)
			pthread_mutex_unlock(&w->dlock);
		if (n >= 0)
			return 0;
		if (n != -EINVAL)
			return (int)n;
		/* Accepted at open, refused at write: stay buffered. */
		atomic_store(&w->direct_ok, false);
	}
	n = rdx_pwrite_full(w->fd, buf, len, (off_t)off);
	if (n < 0)
		return (int)n;
	return pace(w, off, len);
}
