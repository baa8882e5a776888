/* libFuzzer target: a hostile tree stream (src/core/tree*.c) unpacked into
 * a scratch root.  Whatever the bytes, nothing may be created outside the
 * root (a sibling directory stays empty even when the stream plants
 * symlinks to it), no ".NAME.rdx-" temporary may be left behind (unless
 * the stream names such a file itself), and a
 * failed extraction must say why. */
#include "fuzz.h"
#include "core/tree/tree.h"

#include <dirent.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char base[64], root[96], outside[96];

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *f)
{
	(void)st;
	(void)flag;
	if (f->level > 0)
		remove(p);
	return 0;
}

static bool found_temp;

static int look(const char *p, const struct stat *st, int flag, struct FTW *f)
{
	(void)st;
	(void)flag;
	if (strstr(p + f->base, ".rdx-"))
		found_temp = true;
	return 0;
}

static size_t entries(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	size_t n = 0;

	while (d && (e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			n++;
	if (d)
		closedir(d);
	return n;
}

static void cleanup(void)
{
	rmdir(root);
	rmdir(outside);
	rmdir(base);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *input = data;
	size_t input_len = size;
	struct rdx_tree_unpack *u;
	atomic_int stop = 0;
	char why[256];
	int fd, ret;

	if (!base[0]) {
		struct stat st;

		/* tmpfs when there is one: a run makes and removes files. */
		snprintf(base, sizeof(base), "%s/rdx-fuzz-tree-%d",
			 stat("/dev/shm", &st) == 0 ? "/dev/shm" : "/tmp", (int)getpid());
		snprintf(root, sizeof(root), "%s/root", base);
		snprintf(outside, sizeof(outside), "%s/outside", base);
		mkdir(base, 0700);
		mkdir(outside, 0700);
		atexit(cleanup);
	}
	mkdir(root, 0700);
	/* Seeds and mutations plant links to ../outside and to base. */
	/* Removals allowed, any names: every path of the unpacker reached. */
	if (rdx_tree_unpack_start(&u, root, &(struct rdx_tree_unpack_opts){
		.writers = 2, .allow_delete = true }, &stop, &fd))
		abort();
	while (size) {
		ssize_t n = write(fd, data, size);

		if (n <= 0)
			break; /* the unpacker gave up: fine */
		data += n;
		size -= (size_t)n;
	}
	close(fd);
	ret = rdx_tree_unpack_finish(u, true, why, sizeof(why), NULL);
	if (ret && !why[0])
		abort(); /* a failure must say why */
	if (entries(outside) != 0 || entries(base) != 2)
		abort(); /* something escaped the root */
	/* A name with ".rdx-" on disk is a temporary we left, unless the
	 * stream itself named a file so (names are literal bytes in it). */
	found_temp = false;
	nftw(root, look, 16, FTW_PHYS);
	if (found_temp && !memmem(input, input_len, ".rdx-", 5))
		abort(); /* a temporary was left behind */
	nftw(root, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	return 0;
}
