/* The page-cache policy (core/direct.h): the choice as a pure function
 * of the file's size, what the transfer put through the cache before it,
 * the memory available, --direct and --fsync; and one file's writes as a
 * plan has them, paced. */
#include "core/direct.h"
#include "core/io.h"
#include "tap.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MiB ((uint64_t)1 << 20)
#define GiB ((uint64_t)1 << 30)

static struct rdx_wplan choose(enum rdx_direct policy, bool known, uint64_t size,
			       uint64_t before, uint64_t avail, bool fsync)
{
	struct rdx_wneed n = { .policy = policy, .size_known = known, .size = size,
			       .before = before, .avail = avail, .fsync = fsync };

	return rdx_wplan_choose(&n);
}

static bool buffered(struct rdx_wplan p)
{
	return p.direct_from == RDX_NO_DIRECT;
}

static void test_parse(void)
{
	enum rdx_direct d = RDX_DIRECT_NEVER;

	CHECK(rdx_direct_parse("auto", &d) == 0 && d == RDX_DIRECT_AUTO, "parse: auto");
	CHECK(rdx_direct_parse("always", &d) == 0 && d == RDX_DIRECT_ALWAYS, "parse: always");
	CHECK(rdx_direct_parse("never", &d) == 0 && d == RDX_DIRECT_NEVER, "parse: never");
	CHECK(rdx_direct_parse("", &d) == -EINVAL && rdx_direct_parse("Auto", &d) == -EINVAL &&
		      rdx_direct_parse("on", &d) == -EINVAL,
	      "parse: anything else refused");
	CHECK(!strcmp(rdx_direct_name(RDX_DIRECT_ALWAYS), "always"), "the name --direct takes");
}

static void test_size_against_memory(void)
{
	struct rdx_wplan p;

	p = choose(RDX_DIRECT_AUTO, true, 1 * GiB, 0, 16 * GiB, false);
	CHECK(buffered(p) && p.why == RDX_WHY_FITS && p.share == 4 * GiB,
	      "auto: 1 GiB of 16 GiB available goes through the page cache");
	CHECK(p.behind == 1 * GiB, "... paced, a sixteenth of the memory behind");
	p = choose(RDX_DIRECT_AUTO, true, 4 * GiB, 0, 16 * GiB, false);
	CHECK(buffered(p), "auto: exactly a quarter still fits");
	p = choose(RDX_DIRECT_AUTO, true, 4 * GiB + 1, 0, 16 * GiB, false);
	CHECK(p.direct_from == 0 && p.behind == 0 && p.why == RDX_WHY_BIG && p.serial,
	      "auto: past a quarter: O_DIRECT, unpaced, one write at a time");
	p = choose(RDX_DIRECT_AUTO, true, 10 * MiB, 0, 16 * GiB, false);
	CHECK(buffered(p) && p.behind == 0, "auto: a small file is not paced");
	p = choose(RDX_DIRECT_AUTO, true, RDX_PACE_MIN, 0, 16 * GiB, false);
	CHECK(buffered(p) && p.behind, "auto: from RDX_PACE_MIN on it is");

	/* A tree: what its earlier files put through the cache counts. */
	p = choose(RDX_DIRECT_AUTO, true, 1 * GiB, 3 * GiB, 16 * GiB, false);
	CHECK(buffered(p), "auto, a tree: 1 GiB after 3 GiB fits a 4 GiB share");
	p = choose(RDX_DIRECT_AUTO, true, 1 * GiB, 3 * GiB + 1, 16 * GiB, false);
	CHECK(p.direct_from == 0, "auto, a tree: a byte more before it does not");
	p = choose(RDX_DIRECT_AUTO, true, 1, 8 * GiB, 16 * GiB, false);
	CHECK(p.direct_from == 0, "auto, a tree: the share used up, even a byte goes around");

	/* No size: the share that is left, then O_DIRECT. */
	p = choose(RDX_DIRECT_AUTO, false, 0, 0, 16 * GiB, false);
	CHECK(p.direct_from == 4 * GiB && p.why == RDX_WHY_UNKNOWN && p.behind == 1 * GiB &&
		      p.serial,
	      "auto, a stream: the first quarter through the cache, paced, O_DIRECT one write at a time past it");
	p = choose(RDX_DIRECT_AUTO, false, 0, 1 * GiB + 5, 16 * GiB, false);
	CHECK(p.direct_from == 3 * GiB - 4096, "... less what went before, 4 KiB-aligned");
	p = choose(RDX_DIRECT_AUTO, false, 0, 5 * GiB, 16 * GiB, false);
	CHECK(p.direct_from == 0 && p.behind == 0, "... and all O_DIRECT when nothing is left");

	/* The memory available unknown (no /proc): 1 GiB assumed. */
	p = choose(RDX_DIRECT_AUTO, true, 256 * MiB, 0, 0, false);
	CHECK(buffered(p) && p.share == RDX_AVAIL_UNKNOWN / 4,
	      "auto, memory unknown: a quarter of 1 GiB fits");
	p = choose(RDX_DIRECT_AUTO, true, 256 * MiB + 1, 0, 0, false);
	CHECK(p.direct_from == 0, "auto, memory unknown: more does not");

	/* The lag's bounds. */
	p = choose(RDX_DIRECT_NEVER, true, 1 * GiB, 0, 256 * MiB, false);
	CHECK(p.behind == RDX_BEHIND_MIN, "a small machine: the lag's floor");
	p = choose(RDX_DIRECT_NEVER, true, 1 * GiB, 0, 1024 * GiB, false);
	CHECK(p.behind == RDX_BEHIND_MAX, "a large one: its ceiling");
}

static void test_flag(void)
{
	struct rdx_wplan p;

	p = choose(RDX_DIRECT_ALWAYS, true, 4096, 0, 16 * GiB, false);
	CHECK(p.direct_from == 0 && p.why == RDX_WHY_ALWAYS && !p.serial,
	      "always: a small file too, every writer at once");
	p = choose(RDX_DIRECT_ALWAYS, false, 0, 0, 16 * GiB, false);
	CHECK(p.direct_from == 0 && p.behind == 0, "always: a stream too, unpaced");
	p = choose(RDX_DIRECT_NEVER, true, 64 * GiB, 0, 16 * GiB, false);
	CHECK(buffered(p) && p.why == RDX_WHY_NEVER && p.behind == 1 * GiB,
	      "never: past memory too, paced");
	p = choose(RDX_DIRECT_NEVER, false, 0, 100 * GiB, 16 * GiB, false);
	CHECK(buffered(p) && p.behind, "never: a stream after anything, paced");
	p = choose(RDX_DIRECT_NEVER, true, 10 * MiB, 0, 16 * GiB, false);
	CHECK(buffered(p) && !p.behind, "never: a small file unpaced");
}

static void test_fsync(void)
{
	struct rdx_wplan p;
	enum rdx_direct d;

	for (d = RDX_DIRECT_AUTO; d <= RDX_DIRECT_NEVER; d++) {
		struct rdx_wplan a = choose(d, true, 10 * MiB, 0, 16 * GiB, false);
		struct rdx_wplan b = choose(d, true, 10 * MiB, 0, 16 * GiB, true);

		CHECK(b.fsync && !a.fsync && a.direct_from == b.direct_from,
		      "--fsync under %s: synced, and around the cache or not as without it",
		      rdx_direct_name(d));
	}
	p = choose(RDX_DIRECT_AUTO, true, 10 * MiB, 0, 16 * GiB, true);
	CHECK(buffered(p) && p.behind,
	      "--fsync: a small buffered file is paced too (its writeback starts early)");
	p = choose(RDX_DIRECT_AUTO, true, 10 * GiB, 0, 16 * GiB, true);
	CHECK(p.direct_from == 0 && p.fsync, "--fsync with O_DIRECT: still synced");
}

static void test_say(void)
{
	struct rdx_wneed n = { .policy = RDX_DIRECT_AUTO, .size_known = true, .size = 1 * GiB,
			       .before = 2 * GiB, .avail = 16 * GiB };
	struct rdx_wplan p = rdx_wplan_choose(&n);
	char buf[256];

	rdx_wplan_say(&p, &n, buf, sizeof(buf));
	CHECK(strstr(buf, "page cache") && strstr(buf, "1.00 GiB") && strstr(buf, "2.00 GiB") &&
		      strstr(buf, "16.00 GiB"),
	      "-v says which and why: %s", buf);
	n.before = 4 * GiB;
	p = rdx_wplan_choose(&n);
	rdx_wplan_say(&p, &n, buf, sizeof(buf));
	CHECK(!strncmp(buf, "O_DIRECT", 8) && strstr(buf, "past"), "-v: %s", buf);
}

/* Writes through a plan: paced buffered writes advance what was waited
 * for, and keep the data; O_DIRECT from an offset. */
static void test_wfile(void)
{
	char dir[] = "/tmp/rdx-direct-XXXXXX", path[64];
	struct rdx_wplan p = { .direct_from = RDX_NO_DIRECT, .behind = MiB };
	struct rdx_wfile w;
	char *buf = NULL, *back = malloc(MiB);
	bool same = true;
	int fd, dfd;

	if (!mkdtemp(dir) || posix_memalign((void **)&buf, RDX_DIO_ALIGN, MiB) || !back) {
		CHECK(0, "scratch directory and buffers");
		return;
	}
	snprintf(path, sizeof(path), "%s/f", dir);
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	dfd = fd >= 0 ? rdx_reopen(fd, O_WRONLY | O_DIRECT) : -1;
	rdx_wfile_init(&w, fd, dfd, &p);
	CHECK(!rdx_wfile_direct_at(&w, 0), "a buffered plan writes nothing with O_DIRECT");
	for (unsigned i = 0; i < 4 && same; i++) {
		memset(buf, 'a' + (int)i, MiB);
		same = rdx_wfile_pwrite(&w, buf, MiB, (uint64_t)i * MiB) == 0;
	}
	CHECK(same, "four paced 1 MiB writes");
	CHECK(atomic_load(&w.waited) >= 2 * MiB && atomic_load(&w.waited) <= 3 * MiB,
	      "what lags more than behind was waited for (%llu)",
	      (unsigned long long)atomic_load(&w.waited));
	rdx_wfile_release(&w);

	/* O_DIRECT from 2 MiB on, where the file system takes it. */
	p = (struct rdx_wplan){ .direct_from = 2 * MiB };
	rdx_wfile_init(&w, fd, dfd, &p);
	CHECK(!rdx_wfile_direct_at(&w, MiB) && rdx_wfile_direct_at(&w, 2 * MiB) == (dfd >= 0),
	      "O_DIRECT from direct_from on");
	memset(buf, 'z', MiB);
	CHECK(rdx_wfile_pwrite(&w, buf, MiB, 2 * MiB) == 0 &&
		      rdx_wfile_pwrite(&w, buf, 100, 3 * MiB) == 0,
	      "a direct write and an unaligned one");
	for (unsigned i = 0; i < 4 && same; i++) {
		same = rdx_pread_full(fd, back, MiB, (off_t)(i * MiB)) == (ssize_t)MiB;
		for (size_t k = 0; k < (i == 3 ? 100 : MiB) && same; k++)
			same = back[k] == (i >= 2 ? 'z' : 'a' + (int)i);
	}
	CHECK(same, "every byte where it was written");
	rdx_wfile_release(&w);
	if (dfd >= 0)
		close(dfd);
	if (fd >= 0)
		close(fd);
	unlink(path);
	rmdir(dir);
	free(buf);
	free(back);
}

int main(void)
{
	test_parse();
	test_size_against_memory();
	test_flag();
	test_fsync();
	test_say();
	test_wfile();
	CHECK(rdx_mem_available() > 0, "the memory available can be read here");
	return TAP_DONE();
}
