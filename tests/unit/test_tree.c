/* Trees (src/core/tree*.c): a real tree packed and unpacked (content, modes,
 * times, symlinks, hard links, a sparse file, empty directories), and the
 * unpacker against hostile archives made here with libarchive: names that
 * escape, writing or linking through a symlink, a missing or wrong hash, a
 * stream cut short; names repeated while the writer threads still hold
 * them, and a write failing in one.  Nothing may appear outside the
 * destination, and no file may sit under its final name unless its hash
 * matched. */
#include "core/err.h"
#include "core/proto.h"
#include "core/tree/tree.h"
#include "tap.h"

#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <xxhash.h>

static char top[] = "/tmp/rdx-tree-XXXXXX";
static char path[4096];

static const char *at(const char *rel)
{
	snprintf(path, sizeof(path), "%s/%s", top, rel);
	return path;
}

static bool exists(const char *rel)
{
	struct stat st;

	return lstat(at(rel), &st) == 0;
}

/* Any ".NAME.rdx-" temporary left anywhere under dir. */
static bool temp_left(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	bool found = false;

	while (d && !found && (e = readdir(d))) {
		char sub[4096];

		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		if (strstr(e->d_name, ".rdx-"))
			found = true;
		snprintf(sub, sizeof(sub), "%s/%s", dir, e->d_name);
		if (e->d_type == DT_DIR)
			found = found || temp_left(sub);
	}
	if (d)
		closedir(d);
	return found;
}

/* ---- crafting archives ---------------------------------------------- */

struct craft {
	struct archive *a;
	char buf[8 << 20];
	size_t used;
};

static void craft_begin(struct craft *c)
{
	c->a = archive_write_new();
	archive_write_set_format_pax_restricted(c->a);
	archive_write_set_bytes_in_last_block(c->a, 1);
	archive_write_open_memory(c->a, c->buf, sizeof(c->buf), &c->used);
}

static void entry(struct craft *c, const char *name, mode_t type,
		  const char *data, const char *link, bool hardlink)
{
	struct archive_entry *e = archive_entry_new();
	size_t len = data ? strlen(data) : 0;

	archive_entry_set_pathname(e, name);
	archive_entry_set_filetype(e, type);
	archive_entry_set_perm(e, type == AE_IFDIR ? 0755 : 0644);
	archive_entry_set_mtime(e, 1600000000, 0);
	if (link && hardlink)
		archive_entry_set_hardlink(e, link);
	else if (link)
		archive_entry_set_symlink(e, link);
	archive_entry_set_size(e, (la_int64_t)len);
	archive_write_header(c->a, e);
	if (len)
		archive_write_data(c->a, data, len);
	archive_entry_free(e);
}

/* The hash entry after a file: of data, of other bytes, or empty. */
static void hash(struct craft *c, const char *of, bool empty)
{
	struct archive_entry *e = archive_entry_new();
	XXH128_canonical_t h;

	XXH128_canonicalFromHash(&h, XXH3_128bits(of, strlen(of)));
	archive_entry_set_pathname(e, RDX_TREE_HASH_NAME);
	archive_entry_set_filetype(e, AE_IFREG);
	archive_entry_set_size(e, empty ? 0 : 16);
	archive_write_header(c->a, e);
	if (!empty)
		archive_write_data(c->a, h.digest, 16);
	archive_entry_free(e);
}

static void file(struct craft *c, const char *name, const char *data)
{
	entry(c, name, AE_IFREG, data, NULL, false);
	hash(c, data, false);
}

/* The unpacker's options in feed(): removals obeyed, any names, unless
 * a test says otherwise for its own archive. */
static const struct rdx_tree_unpack_opts any_tree = { .writers = 2, .allow_delete = true };
static const struct rdx_tree_unpack_opts *feed_opts = &any_tree;

/* Feeds the archive (cut to len bytes when len) to an unpacker into dst
 * (relative to top).  Returns its result, why filled. */
static int feed(struct craft *c, const char *dst, size_t len, char *why, size_t wlen)
{
	struct rdx_tree_unpack *u;
	atomic_int stop = 0;
	int fd, ret;

	archive_write_close(c->a);
	archive_write_free(c->a);
	why[0] = '\0';
	ret = rdx_tree_unpack_start(&u, at(dst), feed_opts, &stop, &fd);
	if (ret) {
		snprintf(why, wlen, "start: %d", ret);
		return ret;
	}
	if (write(fd, c->buf, len ? len : c->used) < 0)
		perror("write");
	close(fd);
	return rdx_tree_unpack_finish(u, true, why, wlen, NULL);
}

static int craft_into(void (*build)(struct craft *), const char *dst,
		      char *why, size_t wlen)
{
	static struct craft c;

	craft_begin(&c);
	build(&c);
	return feed(&c, dst, 0, why, wlen);
}

/* ---- hostile archives ------------------------------------------------- */

static void b_dotdot(struct craft *c)
{
	entry(c, "t", AE_IFDIR, NULL, NULL, false);
	file(c, "t/../../escaped", "x");
}

static void b_absolute(struct craft *c)
{
	file(c, at("abs-escaped"), "x");
}

static void b_through_symlink(struct craft *c)
{
	entry(c, "t", AE_IFDIR, NULL, NULL, false);
	entry(c, "t/s", AE_IFLNK, NULL, at("outside"), false);
	file(c, "t/s/planted", "x");
}

static void b_hardlink_out(struct craft *c)
{
	entry(c, "t", AE_IFDIR, NULL, NULL, false);
	entry(c, "t/h", AE_IFREG, NULL, "../outside/secret", true);
}

static void b_hardlink_via_symlink(struct craft *c)
{
	entry(c, "t", AE_IFDIR, NULL, NULL, false);
	entry(c, "t/s", AE_IFLNK, NULL, at("outside"), false);
	entry(c, "t/h", AE_IFREG, NULL, "t/s/secret", true);
}

/* A directory entry where the stream made a symlink to a directory
 * outside: its mode and times must not reach the outside directory. */
static void b_dir_over_symlink(struct craft *c)
{
	struct archive_entry *e = archive_entry_new();

	entry(c, "t", AE_IFDIR, NULL, NULL, false);
	entry(c, "t/s", AE_IFLNK, NULL, at("outside"), false);
	archive_entry_set_pathname(e, "t/s");
	archive_entry_set_filetype(e, AE_IFDIR);
	archive_entry_set_perm(e, 0777);
	archive_entry_set_mtime(e, 1000000000, 0);
	archive_write_header(c->a, e);
	archive_entry_free(e);
}

/* A hard link carrying data into a file already published. */
static void b_link_with_data(struct craft *c)
{
	struct archive_entry *e;

	entry(c, "t", AE_IFDIR, NULL, NULL, false);
	file(c, "t/a", "published");
	e = archive_entry_new();
	archive_entry_set_pathname(e, "t/h");
	archive_entry_set_filetype(e, AE_IFREG);
	archive_entry_set_hardlink(e, "t/a");
	archive_entry_set_size(e, 8);
	archive_write_header(c->a, e);
	archive_write_data(c->a, "REWRITE!", 8);
	archive_entry_free(e);
}

static void b_no_hash(struct craft *c)
{
	entry(c, "t", AE_IFDIR, NULL, NULL, false);
	entry(c, "t/a", AE_IFREG, "first", NULL, false);
	file(c, "t/b", "second");
}

static void b_wrong_hash(struct craft *c)
{
	entry(c, "t", AE_IFDIR, NULL, NULL, false);
	entry(c, "t/a", AE_IFREG, "what was sent", NULL, false);
	hash(c, "something else", false);
}

/* A corrupt file, then a removal: the removal must not happen. */
static void b_wrong_hash_then_delete(struct craft *c)
{
	b_wrong_hash(c);
	entry(c, RDX_TREE_DELETE_NAME, AE_IFREG, "t/keep", NULL, false);
}

static void b_empty_hash(struct craft *c)
{
	entry(c, "t", AE_IFDIR, NULL, NULL, false);
	entry(c, "t/a", AE_IFREG, "unreadable there", NULL, false);
	hash(c, "", true);
	file(c, "t/b", "fine");
}

static void b_good(struct craft *c)
{
	entry(c, "t", AE_IFDIR, NULL, NULL, false);
	file(c, "t/a", "alpha");
	entry(c, "t/l", AE_IFLNK, NULL, "a", false);
	entry(c, "t/h", AE_IFREG, NULL, "t/a", true);
	entry(c, "t/e", AE_IFDIR, NULL, NULL, false);
	entry(c, "t/dev", AE_IFCHR, NULL, NULL, false);
}

static void b_one_file(struct craft *c)
{
	file(c, "f", "one");
}

static void b_two_tops(struct craft *c)
{
	file(c, "one", "1");
	file(c, "two", "2");
}

static bool content_is(const char *rel, const char *want)
{
	char buf[256] = "";
	int fd = open(at(rel), O_RDONLY);
	ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;

	if (fd >= 0)
		close(fd);
	return n == (ssize_t)strlen(want) && !memcmp(buf, want, (size_t)n);
}

static void hostile(void)
{
	char why[256];
	int ret;

	mkdir(at("outside"), 0755);
	mkdir(at("d1"), 0755);
	ret = craft_into(b_dotdot, "d1", why, sizeof(why));
	CHECK(ret == -RDX_EPROTO && strstr(why, "unsafe"), "'..' refused: %d %s", ret, why);
	CHECK(!exists("escaped") && !exists("d1/escaped"), "nothing escaped through '..'");

	mkdir(at("d2"), 0755);
	ret = craft_into(b_absolute, "d2", why, sizeof(why));
	CHECK(ret == -RDX_EPROTO, "absolute name refused: %d %s", ret, why);
	CHECK(!exists("abs-escaped"), "nothing written at the absolute name");

	mkdir(at("d3"), 0755);
	ret = craft_into(b_through_symlink, "d3", why, sizeof(why));
	CHECK(ret == -RDX_EPROTO && strstr(why, "symlink"),
	      "writing through a sent symlink refused: %d %s", ret, why);
	CHECK(!exists("outside/planted"), "nothing planted through the symlink");
	CHECK(!temp_left(at("outside")) && !temp_left(at("d3")), "no temporary left");

	int fd = open(at("outside/secret"), O_CREAT | O_WRONLY, 0600);

	close(fd);
	mkdir(at("d4"), 0755);
	ret = craft_into(b_hardlink_out, "d4", why, sizeof(why));
	CHECK(ret == -RDX_EPROTO, "hard link to '../' refused: %d %s", ret, why);
	CHECK(!exists("d4/t/h"), "no link made");

	mkdir(at("d5"), 0755);
	ret = craft_into(b_hardlink_via_symlink, "d5", why, sizeof(why));
	CHECK(ret == -RDX_EPROTO && strstr(why, "symlink"),
	      "hard link through a symlink refused: %d %s", ret, why);
	CHECK(!exists("d5/t/h"), "no link to a file outside");

	{
		struct stat before, after;

		mkdir(at("d10"), 0755);
		stat(at("outside"), &before);
		ret = craft_into(b_dir_over_symlink, "d10", why, sizeof(why));
		CHECK(ret == -RDX_EPROTO && stat(at("outside"), &after) == 0 &&
			      after.st_mode == before.st_mode && after.st_mtime == before.st_mtime,
		      "a directory entry over a symlink is refused, its target untouched: %d %s",
		      ret, why);
		mkdir(at("d11"), 0755);
		ret = craft_into(b_link_with_data, "d11", why, sizeof(why));
		CHECK(ret == 0 && content_is("d11/t/a", "published") && content_is("d11/t/h", "published"),
		      "a hard link carrying data does not rewrite a published file: %d %s", ret, why);
	}

	mkdir(at("d6"), 0755);
	ret = craft_into(b_no_hash, "d6", why, sizeof(why));
	CHECK(ret == -RDX_EPROTO && strstr(why, "no hash"), "a file without its hash: %d %s", ret, why);
	CHECK(!exists("d6/t/a") && !exists("d6/t/b"), "neither file published");
	CHECK(!temp_left(at("d6")), "no temporary left");

	mkdir(at("d7"), 0755);
	ret = craft_into(b_wrong_hash, "d7", why, sizeof(why));
	CHECK(ret == -RDX_EINTEGRITY && strstr(why, "t/a"), "wrong hash names the file: %d %s",
	      ret, why);
	CHECK(!exists("d7/t/a") && !temp_left(at("d7")), "the corrupt file is gone, no temporary");
	/* The hash is checked by a writer thread: a removal right after a
	 * corrupt file waits for that verdict and does not happen. */
	mkdir(at("d7b"), 0755);
	mkdir(at("d7b/t"), 0755);
	{
		FILE *f = fopen(at("d7b/t/keep"), "w");

		if (f) {
			fputs("kept", f);
			fclose(f);
		}
	}
	ret = craft_into(b_wrong_hash_then_delete, "d7b", why, sizeof(why));
	CHECK(ret == -RDX_EINTEGRITY && content_is("d7b/t/keep", "kept"),
	      "a corrupt file stops the removals after it: %d %s", ret, why);

	mkdir(at("d8"), 0755);
	ret = craft_into(b_empty_hash, "d8", why, sizeof(why));
	CHECK(ret == -RDX_ELOCAL, "a file the sender could not read fails the copy: %d %s", ret, why);
	CHECK(!exists("d8/t/a") && content_is("d8/t/b", "fine") && !temp_left(at("d8")),
	      "it is absent, the next file is there");

	{
		static struct craft c;

		mkdir(at("d9"), 0755);
		craft_begin(&c);
		entry(&c, "t", AE_IFDIR, NULL, NULL, false);
		char big[8192];

		memset(big, 'z', sizeof(big) - 1);
		big[sizeof(big) - 1] = '\0';
		file(&c, "t/big", big);
		archive_write_close(c.a);
		ret = feed(&c, "d9", 512 * 4, why, sizeof(why)); /* cut in the data */
		CHECK(ret == -RDX_EPROTO, "a stream cut in a file's data: %d %s", ret, why);
		CHECK(!exists("d9/t/big") && !temp_left(at("d9")), "no partial file, no temporary");
	}
}

static void semantics(void)
{
	char why[256];
	int ret, fd;
	struct stat a, h;

	mkdir(at("g"), 0755);
	ret = craft_into(b_good, "g", why, sizeof(why));
	CHECK(ret == 0, "a good archive: %d %s", ret, why);
	CHECK(content_is("g/t/a", "alpha"), "file content");
	CHECK(lstat(at("g/t/a"), &a) == 0 && a.st_mtime == 1600000000 && (a.st_mode & 07777) == 0644,
	      "mode and mtime");
	CHECK(lstat(at("g/t/h"), &h) == 0 && h.st_ino == a.st_ino, "hard link");
	{
		char t[16] = "";

		CHECK(readlink(at("g/t/l"), t, sizeof(t) - 1) == 1 && t[0] == 'a', "symlink");
	}
	CHECK(lstat(at("g/t/e"), &a) == 0 && S_ISDIR(a.st_mode), "empty directory");
	CHECK(!exists("g/t/dev"), "a device is skipped");

	/* A destination that does not exist becomes the tree, as cp -r. */
	ret = craft_into(b_good, "renamed", why, sizeof(why));
	CHECK(ret == 0 && content_is("renamed/a", "alpha") && exists("renamed/l"),
	      "new DST is the tree: %d %s", ret, why);
	{
		struct stat r;

		CHECK(lstat(at("renamed/h"), &h) == 0 && lstat(at("renamed/a"), &r) == 0 &&
			      h.st_ino == r.st_ino,
		      "hard link target renamed too");
	}
	ret = craft_into(b_two_tops, "new2", why, sizeof(why));
	CHECK(ret == -RDX_ELOCAL && strstr(why, "not a directory"), "two trees into a new name: %d %s",
	      ret, why);
	fd = open(at("plain"), O_CREAT | O_WRONLY, 0644);
	close(fd);
	ret = craft_into(b_good, "plain", why, sizeof(why));
	CHECK(ret == -RDX_ELOCAL && strstr(why, "cannot replace the file") &&
		      lstat(at("plain"), &a) == 0 && S_ISREG(a.st_mode),
	      "a tree over a file as DST is refused, the file kept: %d %s", ret, why);
	ret = craft_into(b_one_file, "plain", why, sizeof(why));
	CHECK(ret == 0 && content_is("plain", "one"), "one file replaces a file as DST: %d %s", ret, why);
	mkfifo(at("fifo"), 0600);
	ret = craft_into(b_one_file, "fifo", why, sizeof(why));
	CHECK(ret == -ENOTDIR, "a fifo as DST: %d", ret);
}

/* ---- a real tree, packed and unpacked --------------------------------- */

static int64_t pump(int from, int to)
{
	char buf[65536];
	int64_t total = 0;
	ssize_t n;

	while ((n = read(from, buf, sizeof(buf))) > 0) {
		if (write(to, buf, (size_t)n) != n)
			return -1;
		total += n;
	}
	return n < 0 ? -1 : total;
}

static void round_trip(void)
{
	struct rdx_tree_pack *p;
	struct rdx_tree_unpack *u;
	atomic_int stop = 0;
	char why[256], src[4096];
	const char *paths[1] = { src };
	struct stat a, b;
	int rfd, wfd, fd, ret;
	char block[4096];

	snprintf(src, sizeof(src), "%s/src", top);
	mkdir(at("src"), 0750);
	mkdir(at("src/empty"), 0700);
	mkdir(at("src/sub"), 0711);
	fd = open(at("src/sub/file"), O_CREAT | O_WRONLY, 0604);
	memset(block, 'q', sizeof(block));
	for (int i = 0; i < 300; i++)
		if (write(fd, block, sizeof(block)) != (ssize_t)sizeof(block))
			perror("write");
	close(fd);
	{
		char target[4096];

		snprintf(target, sizeof(target), "%s/src/sub/file", top);
		CHECK(link(target, at("src/hard")) == 0, "made a hard link");
	}
	CHECK(symlink("sub/file", at("src/link")) == 0, "made a symlink");
	/* Past BIG_FILE: written through fileio's O_DIRECT sink. */
	fd = open(at("src/big"), O_CREAT | O_WRONLY, 0640);
	for (int i = 0; i < 2048; i++) {
		memset(block, 'a' + i % 26, sizeof(block));
		if (write(fd, block, sizeof(block)) != (ssize_t)sizeof(block))
			perror("write");
	}
	CHECK(write(fd, "tail", 4) == 4, "made a big file");
	close(fd);
	{
		struct timespec ts[2] = { { 1400000000, 0 }, { 1400000000, 5000 } };

		utimensat(AT_FDCWD, at("src/big"), ts, 0);
	}
	fd = open(at("src/sparse"), O_CREAT | O_WRONLY, 0644);
	CHECK(pwrite(fd, "end", 3, 64 << 20) == 3, "made a sparse file");
	close(fd);
	/* Below BIG_FILE, which the readers would read ahead whole: data, a
	 * hole, data, a hole to the end; and one that is all hole. */
	fd = open(at("src/sparse_small"), O_CREAT | O_WRONLY, 0644);
	CHECK(pwrite(fd, "head", 4, 0) == 4 && pwrite(fd, "mid", 3, 2 << 20) == 3 &&
		      ftruncate(fd, 3 << 20) == 0,
	      "made a small sparse file");
	close(fd);
	fd = open(at("src/hole"), O_CREAT | O_WRONLY, 0644);
	CHECK(ftruncate(fd, 1 << 20) == 0, "made a file of one hole");
	close(fd);
	{
		struct timespec ts[2] = { { 1500000000, 0 }, { 1500000000, 0 } };

		utimensat(AT_FDCWD, at("src/sub/file"), ts, AT_SYMLINK_NOFOLLOW);
	}
	mkdir(at("out"), 0755);

	ret = rdx_tree_unpack_start(&u, at("out"), &any_tree, &stop, &wfd);
	CHECK(ret == 0, "unpacker started");
	ret = rdx_tree_pack_start(&p, &(struct rdx_tree_pack_opts){ .paths = paths, .n = 1 }, &rfd);
	CHECK(ret == 0, "packer started");
	CHECK(pump(rfd, wfd) > 0, "stream moved");
	close(rfd);
	close(wfd);
	CHECK(rdx_tree_pack_finish(p) == 0, "packer ended well");
	ret = rdx_tree_unpack_finish(u, true, why, sizeof(why), NULL);
	CHECK(ret == 0, "unpacker ended well: %d %s", ret, why);

	CHECK(stat(at("out/src/sub/file"), &a) == 0 && a.st_size == 300 * 4096 &&
		      (a.st_mode & 07777) == 0604 && a.st_mtime == 1500000000,
	      "file size, mode, mtime");
	CHECK(stat(at("out/src/hard"), &b) == 0 && b.st_ino == a.st_ino && a.st_nlink == 2,
	      "hard link kept");
	CHECK(lstat(at("out/src/link"), &b) == 0 && S_ISLNK(b.st_mode), "symlink kept");
	CHECK(stat(at("out/src/empty"), &b) == 0 && (b.st_mode & 07777) == 0700, "empty dir and mode");
	CHECK(stat(at("out/src/sub"), &b) == 0 && (b.st_mode & 07777) == 0711, "directory mode");
	CHECK(stat(at("out/src/sparse"), &b) == 0 && b.st_size == (64 << 20) + 3 &&
		      b.st_blocks < 1024,
	      "sparse file stays sparse (%lld blocks)", (long long)b.st_blocks);
	CHECK(stat(at("out/src/sparse_small"), &b) == 0 && b.st_size == 3 << 20 &&
		      b.st_blocks <= 64,
	      "small sparse file stays sparse (%lld blocks)", (long long)b.st_blocks);
	CHECK(stat(at("out/src/hole"), &b) == 0 && b.st_size == 1 << 20 && b.st_blocks == 0,
	      "a file of one hole stays one (%lld blocks)", (long long)b.st_blocks);
	{
		char cmd[8300];

		snprintf(cmd, sizeof(cmd), "cmp -s '%s/src/big' '%s/out/src/big'", top, top);
		CHECK(system(cmd) == 0, "big file content");
		snprintf(cmd, sizeof(cmd), "cmp -s '%s/src/sparse_small' '%s/out/src/sparse_small'",
			 top, top);
		CHECK(system(cmd) == 0, "small sparse file content");
		snprintf(cmd, sizeof(cmd), "cmp -s '%s/src/sparse' '%s/out/src/sparse'", top, top);
		CHECK(system(cmd) == 0, "sparse file content");
	}
	CHECK(stat(at("out/src/big"), &b) == 0 && b.st_size == 8 * 1024 * 1024 + 4 &&
		      (b.st_mode & 07777) == 0640 && b.st_mtime == 1400000000,
	      "big file size, mode, mtime");
	CHECK(!temp_left(at("out")), "no temporary left");
}

/* A symlink named "." would replace an empty DST and take every later
 * entry wherever it points; a directory entry "." would give DST the
 * sender's mode.  Both are refused. */
static void b_root_symlink(struct craft *c)
{
	entry(c, ".", AE_IFLNK, NULL, at("outside2"), false);
	file(c, "x", "planted");
}

static void b_dot_dir(struct craft *c)
{
	struct archive_entry *e = archive_entry_new();

	archive_entry_set_pathname(e, ".");
	archive_entry_set_filetype(e, AE_IFDIR);
	archive_entry_set_perm(e, 0777);
	archive_write_header(c->a, e);
	archive_entry_free(e);
}

/* A big file where the stream made a symlink to a fifo outside: written
 * to a temporary and renamed over the link, never into the fifo. */
static void b_big_over_symlink(struct craft *c)
{
	static char big[5 << 20];

	memset(big, 'b', sizeof(big) - 1);
	entry(c, "t", AE_IFDIR, NULL, NULL, false);
	entry(c, "t/s", AE_IFLNK, NULL, at("outside2/fifo"), false);
	file(c, "t/s", big);
}

static void dots_and_links(void)
{
	static struct craft c;
	char why[256];
	struct stat st;
	int ret;

	mkdir(at("outside2"), 0755);
	mkdir(at("r1"), 0755);
	ret = craft_into(b_root_symlink, "r1", why, sizeof(why));
	CHECK(ret == -RDX_EPROTO && !exists("outside2/x"),
	      "nothing planted through a symlink named '.': %d %s", ret, why);
	mkdir(at("r2"), 0755);
	ret = craft_into(b_dot_dir, "r2", why, sizeof(why));
	CHECK(ret == -RDX_EPROTO && stat(at("r2"), &st) == 0 && (st.st_mode & 07777) == 0755,
	      "DST's own mode untouched by an entry '.': %d %s", ret, why);
	mkfifo(at("outside2/fifo"), 0600);
	mkdir(at("r3"), 0755);
	craft_begin(&c);
	b_big_over_symlink(&c);
	ret = feed(&c, "r3", 0, why, sizeof(why));
	CHECK(ret == 0 && lstat(at("r3/t/s"), &st) == 0 && S_ISREG(st.st_mode) &&
		      st.st_size == (5 << 20) - 1 && lstat(at("outside2/fifo"), &st) == 0 &&
		      S_ISFIFO(st.st_mode) && (st.st_mode & 07777) == 0600,
	      "a big file replaces a symlink to a fifo, the fifo untouched: %d %s", ret, why);
}

/* ---- what is already there --------------------------------------------- */

/* A hard link whose name already is that file's (its target not sent
 * again): rename(2) of one name over another of the same file keeps both. */
static void b_link_again(struct craft *c)
{
	entry(c, "t", AE_IFDIR, NULL, NULL, false);
	entry(c, "t/h", AE_IFREG, NULL, "t/a", true);
}

/* A symlink, a fifo and a file where empty directories are. */
static void b_over_dirs(struct craft *c)
{
	entry(c, "t", AE_IFDIR, NULL, NULL, false);
	entry(c, "t/l", AE_IFLNK, NULL, "a", false);
	entry(c, "t/f", AE_IFIFO, NULL, NULL, false);
	file(c, "t/r", "regular");
}

/* Files, each followed by a symlink or fifo of its name, in directories
 * of their own and in one: the later entry must win while the writers
 * still have the file (writers_wait_name). */
#define OVER_FILES 300
static void b_over_files(struct craft *c)
{
	char name[64];

	entry(c, "t", AE_IFDIR, NULL, NULL, false);
	for (int i = 0; i < OVER_FILES; i++) {
		if (i % 3 == 0) {
			snprintf(name, sizeof(name), "t/d%d", i);
			entry(c, name, AE_IFDIR, NULL, NULL, false);
			snprintf(name, sizeof(name), "t/d%d/x", i);
		} else {
			snprintf(name, sizeof(name), "t/x%d", i);
		}
		file(c, name, "a file to be replaced, long enough to take its writer a while");
		entry(c, name, i % 2 ? AE_IFLNK : AE_IFIFO, NULL, i % 2 ? "target" : NULL, false);
	}
}

static void dir_entry(struct craft *c, const char *name, mode_t perm, gid_t gid)
{
	struct archive_entry *e = archive_entry_new();

	archive_entry_set_pathname(e, name);
	archive_entry_set_filetype(e, AE_IFDIR);
	archive_entry_set_perm(e, perm);
	archive_entry_set_gid(e, gid);
	archive_entry_set_mtime(e, 1600000000, 0);
	archive_write_header(c->a, e);
	archive_entry_free(e);
}

/* Set-id directories (the unpacker here is not root): setgid kept when
 * the directory's group is the sender's, dropped otherwise.  A directory
 * sent twice ends with the last entry's mode, its child set first. */
static void b_dir_modes(struct craft *c)
{
	dir_entry(c, "t/", 0755, getegid());
	dir_entry(c, "t/shared/", 02770, getegid());
	dir_entry(c, "t/other/", 02770, getegid() + 4242);
	dir_entry(c, "t/ro/", 0755, getegid());
	dir_entry(c, "t/ro/in/", 0500, getegid());
	dir_entry(c, "t/ro/", 0500, getegid());
}

static void existing(void)
{
	char why[256];
	struct stat a, h, st;
	int ret;

	mkdir(at("x1"), 0755);
	mkdir(at("x1/t"), 0755);
	close(open(at("x1/t/a"), O_CREAT | O_WRONLY, 0644));
	{
		char *a_path = strdup(at("x1/t/a")); /* at() has one buffer */

		CHECK(a_path && link(a_path, at("x1/t/h")) == 0, "made t/h a link to t/a");
		free(a_path);
	}
	ret = craft_into(b_link_again, "x1", why, sizeof(why));
	CHECK(ret == 0 && lstat(at("x1/t/a"), &a) == 0 && lstat(at("x1/t/h"), &h) == 0 &&
		      a.st_ino == h.st_ino && !temp_left(at("x1/t")),
	      "a link that is there already: kept, no temporary left: %d %s", ret, why);

	mkdir(at("x2"), 0755);
	mkdir(at("x2/t"), 0755);
	mkdir(at("x2/t/l"), 0755);
	mkdir(at("x2/t/f"), 0755);
	mkdir(at("x2/t/r"), 0755);
	ret = craft_into(b_over_dirs, "x2", why, sizeof(why));
	CHECK(ret == 0 && lstat(at("x2/t/l"), &st) == 0 && S_ISLNK(st.st_mode) &&
		      lstat(at("x2/t/f"), &st) == 0 && S_ISFIFO(st.st_mode) &&
		      content_is("x2/t/r", "regular") && !temp_left(at("x2/t")),
	      "a symlink, fifo and file replace empty directories: %d %s", ret, why);

	mkdir(at("x4"), 0755);
	ret = craft_into(b_over_files, "x4", why, sizeof(why));
	{
		int wrong = 0;
		char name[64];

		for (int i = 0; i < OVER_FILES; i++) {
			if (i % 3 == 0)
				snprintf(name, sizeof(name), "x4/t/d%d/x", i);
			else
				snprintf(name, sizeof(name), "x4/t/x%d", i);
			if (lstat(at(name), &st) ||
			    (i % 2 ? !S_ISLNK(st.st_mode) : !S_ISFIFO(st.st_mode)))
				wrong++;
		}
		CHECK(ret == 0 && !wrong && !temp_left(at("x4/t")),
		      "a symlink or fifo after a file of its name replaces it: %d %s, %d of %d wrong",
		      ret, why, wrong, OVER_FILES);
	}

	mkdir(at("x3"), 0755);
	ret = craft_into(b_dir_modes, "x3", why, sizeof(why));
	CHECK(ret == 0, "directories' modes: %d %s", ret, why);
	CHECK(stat(at("x3/t/shared"), &st) == 0 && (st.st_mode & 07777) == 02770,
	      "setgid kept where the group is the sender's: %o", st.st_mode & 07777);
	CHECK(stat(at("x3/t/other"), &st) == 0 && (st.st_mode & 07777) == 0770,
	      "setgid dropped for another group: %o", st.st_mode & 07777);
	CHECK(stat(at("x3/t/ro"), &st) == 0 && (st.st_mode & 07777) == 0500 &&
		      stat(at("x3/t/ro/in"), &st) == 0 && (st.st_mode & 07777) == 0500 &&
		      st.st_mtime == 1600000000,
	      "a directory sent twice has the last mode, its child its own: %o",
	      st.st_mode & 07777);
	chmod(at("x3/t/ro/in"), 0755);
	chmod(at("x3/t/ro"), 0755);
}

/* ---- what the receiving side asked for -------------------------------- */

static void b_other_top(struct craft *c)
{
	file(c, ".bashrc", "evil");
}

static void b_extra_top(struct craft *c)
{
	entry(c, "t", AE_IFDIR, NULL, NULL, false);
	file(c, "t/a", "alpha");
	file(c, ".bashrc", "evil");
}

static void b_link_out_of_tops(struct craft *c)
{
	entry(c, "t", AE_IFDIR, NULL, NULL, false);
	entry(c, "t/h", AE_IFREG, NULL, "u/secret", true);
}

static void b_file_as_tree(struct craft *c)
{
	entry(c, "f", AE_IFDIR, NULL, NULL, false);
	file(c, "f/inner", "evil");
}

static void b_unasked_delete(struct craft *c)
{
	entry(c, "t", AE_IFDIR, NULL, NULL, false);
	file(c, "t/a", "alpha");
	entry(c, RDX_TREE_DELETE_NAME, AE_IFREG, "t/keep", NULL, false);
}

/* A sender is held to what the receiver's user asked for: the names (a
 * tree's top, a single file), and no removals without --delete. */
static void asked_for(void)
{
	const char *const t[] = { "t" }, *const f[] = { "f" }, *const any[] = { NULL };
	char why[256];
	int ret;

	feed_opts = &(struct rdx_tree_unpack_opts){ .writers = 2, .tops = t, .ntops = 1 };
	mkdir(at("a1"), 0755);
	ret = craft_into(b_good, "a1", why, sizeof(why));
	CHECK(ret == 0 && content_is("a1/t/a", "alpha"), "the tree asked for lands: %d %s", ret, why);
	mkdir(at("a2"), 0755);
	ret = craft_into(b_other_top, "a2", why, sizeof(why));
	CHECK(ret == -RDX_EPROTO && strstr(why, "not what was asked for") && !exists("a2/.bashrc"),
	      "another top-level name is refused, nothing written: %d %s", ret, why);
	mkdir(at("a3"), 0755);
	ret = craft_into(b_extra_top, "a3", why, sizeof(why));
	CHECK(ret == -RDX_EPROTO && !exists("a3/.bashrc") && !temp_left(at("a3")),
	      "an extra top-level name after the tree is refused: %d %s", ret, why);
	mkdir(at("a4"), 0755);
	mkdir(at("a4/u"), 0755);
	close(open(at("a4/u/secret"), O_CREAT | O_WRONLY, 0600));
	ret = craft_into(b_link_out_of_tops, "a4", why, sizeof(why));
	CHECK(ret == -RDX_EPROTO && !exists("a4/t/h"),
	      "a hard link to a name outside what was asked for is refused: %d %s", ret, why);
	/* "host:." names no top: the sender picks one, and only one. */
	feed_opts = &(struct rdx_tree_unpack_opts){ .writers = 2, .tops = any, .ntops = 1 };
	mkdir(at("a5"), 0755);
	ret = craft_into(b_two_tops, "a5", why, sizeof(why));
	CHECK(ret == -RDX_EPROTO && content_is("a5/one", "1") && !exists("a5/two"),
	      "a source without a name gets one top, not two: %d %s", ret, why);
	/* -p without -r: one regular file, nothing below it. */
	feed_opts = &(struct rdx_tree_unpack_opts){ .writers = 2, .tops = f, .ntops = 1,
						    .files_only = true };
	mkdir(at("a6"), 0755);
	ret = craft_into(b_one_file, "a6", why, sizeof(why));
	CHECK(ret == 0 && content_is("a6/f", "one"), "the file asked for lands: %d %s", ret, why);
	mkdir(at("a7"), 0755);
	ret = craft_into(b_file_as_tree, "a7", why, sizeof(why));
	CHECK(ret == -RDX_EPROTO && strstr(why, "a file was asked for") && !exists("a7/f"),
	      "a tree where a file was asked for is refused: %d %s", ret, why);
	/* Removals only with --delete asked for here. */
	feed_opts = &(struct rdx_tree_unpack_opts){ .writers = 2, .tops = t, .ntops = 1 };
	mkdir(at("a8"), 0755);
	mkdir(at("a8/t"), 0755);
	close(open(at("a8/t/keep"), O_CREAT | O_WRONLY, 0600));
	ret = craft_into(b_unasked_delete, "a8", why, sizeof(why));
	CHECK(ret == -RDX_EPROTO && strstr(why, "--delete was not given") && exists("a8/t/keep"),
	      "an unasked removal is refused, nothing removed: %d %s", ret, why);
	feed_opts = &(struct rdx_tree_unpack_opts){ .writers = 2, .tops = t, .ntops = 1,
						    .allow_delete = true };
	mkdir(at("a9"), 0755);
	mkdir(at("a9/t"), 0755);
	close(open(at("a9/t/keep"), O_CREAT | O_WRONLY, 0600));
	ret = craft_into(b_unasked_delete, "a9", why, sizeof(why));
	CHECK(ret == 0 && !exists("a9/t/keep"), "with --delete asked for, it is removed: %d %s",
	      ret, why);
	feed_opts = &any_tree;
}

/* ---- --sync: the receiver's listing ----------------------------------- */

struct listed {
	char names[4096];
	bool swapped;
	bool hash_ok;
	bool hash_bare; /* the plain XXH3-128 went out: anyone could check a guess */
};

static const uint8_t list_key[RDX_LIST_KEY_LEN] = "a listing key of 32 bytes, here";

/* Collects "TYPE:NAME " for each entry; when t/sub comes (before its
 * contents), swaps it for a symlink to outside, as a local user racing
 * the listing would. */
static int collect(void *arg, const struct rdx_list_entry *e)
{
	struct listed *l = arg;
	size_t used = strlen(l->names);

	snprintf(l->names + used, sizeof(l->names) - used, "%u:%.*s ", e->type, (int)e->len,
		 e->name);
	if (e->len == 5 && !memcmp(e->name, "t/sub", 5) && !l->swapped) {
		char *moved = strdup(at("l/t/sub.moved")), *sub = strdup(at("l/t/sub"));

		l->swapped = moved && sub && !rename(sub, moved) && !symlink(at("outside3"), sub);
		free(moved);
		free(sub);
	}
	if (e->len == 3 && !memcmp(e->name, "t/a", 3) && e->type == RDX_LIST_HASHED) {
		XXH128_canonical_t h;

		unsigned char mac[EVP_MAX_MD_SIZE];
		unsigned int maclen = 0;

		XXH128_canonicalFromHash(&h, XXH3_128bits("alpha", 5));
		l->hash_bare = !memcmp(h.digest, e->hash, 16);
		l->hash_ok = HMAC(EVP_sha256(), list_key, sizeof(list_key), h.digest, 16, mac,
				  &maclen) && !memcmp(mac, e->hash, 16);
	}
	return 0;
}

static void listing(void)
{
	static struct listed l;
	struct rdx_tree_unpack *u;
	atomic_int stop = 0;
	char why[256];
	int fd, ret;
	FILE *f;

	mkdir(at("outside3"), 0755);
	close(open(at("outside3/secret"), O_CREAT | O_WRONLY, 0600));
	mkdir(at("l"), 0755);
	mkdir(at("l/t"), 0755);
	mkdir(at("l/t/sub"), 0755);
	if ((f = fopen(at("l/t/a"), "w"))) {
		fputs("alpha", f);
		fclose(f);
	}
	close(open(at("l/t/sub/b"), O_CREAT | O_WRONLY, 0644));
	mkfifo(at("l/t/fifo"), 0644);
	{
		char *target = strdup(at("outside3")); /* at() has one buffer */

		CHECK(target && symlink(target, at("l/t/out")) == 0, "made t/out");
		free(target);
	}
	ret = rdx_tree_unpack_start(&u, at("l"), &(struct rdx_tree_unpack_opts){
		.writers = 2, .tops = (const char *const[]){ "t" }, .ntops = 1 }, &stop, &fd);
	CHECK(ret == 0, "unpacker for the listing: %d", ret);
	if (ret)
		return;
	CHECK(rdx_tree_unpack_list(u, "other", NULL, collect, &l) == -RDX_EPROTO,
	      "a top that was not asked for is not listed");
	ret = rdx_tree_unpack_list(u, "t", list_key, collect, &l);
	close(fd);
	rdx_tree_unpack_finish(u, true, why, sizeof(why), NULL);
	CHECK(ret == 0 && l.swapped, "listed, t/sub swapped midway: %d", ret);
	CHECK(strstr(l.names, "t/sub/b ") && !strstr(l.names, "secret"),
	      "the directory opened is the one listed, not the symlink's target: %s", l.names);
	CHECK(strstr(l.names, "t/out ") && strstr(l.names, "t/fifo ") && l.hash_ok,
	      "symlinks and fifos listed, not followed; a file with its hash: %s", l.names);
	CHECK(!l.hash_bare, "the hash is keyed: the plain XXH3-128 is not what is listed");
	CHECK(rdx_tree_unpack_list(NULL, "../t", NULL, collect, &l) == -RDX_EPROTO,
	      "an unsafe top is refused");
}

/* ---- small files written by the writer threads ------------------------ */

static void b_repeats(struct craft *c)
{
	char name[32], data[32];

	entry(c, "t", AE_IFDIR, NULL, NULL, false);
	entry(c, "t/a", AE_IFDIR, NULL, NULL, false);
	entry(c, "t/b", AE_IFDIR, NULL, NULL, false);
	for (int i = 0; i < 300; i++) {
		snprintf(name, sizeof(name), "t/%c/f%03d", i % 3 == 2 ? 'b' : 'a', i);
		snprintf(data, sizeof(data), "file %d", i);
		file(c, name, data);
	}
	/* The same names again, while the first writes may still be queued:
	 * the stream's last word wins.  Big and small versions alternate, so
	 * that writers taking them in any other order would show. */
	for (int k = 0; k < 40; k++) {
		static char big[100001];

		memset(big, 'a' + k % 26, sizeof(big) - 1);
		file(c, "t/a/f000", k == 39 ? "last" : k % 2 ? "small" : big);
	}
	entry(c, "t/a/f001", AE_IFLNK, NULL, "f000", false);
	file(c, "t/b/f002", "again");
}

static void b_too_big(struct craft *c)
{
	char big[5001];

	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	entry(c, "t", AE_IFDIR, NULL, NULL, false);
	file(c, "t/small", "fits");
	file(c, "t/big", big);
	file(c, "t/after", "fits too");
}

static void b_missing(struct craft *c)
{
	entry(c, "t", AE_IFDIR, NULL, NULL, false);
	file(c, "t/a", "alpha");
	entry(c, RDX_TREE_MISSING_NAME, AE_IFREG, "/src/t/closed\033[2J: Permission denied", NULL,
	      false);
	file(c, "t/b", "beta");
}

static void b_missing_empty(struct craft *c)
{
	entry(c, RDX_TREE_MISSING_NAME, AE_IFREG, NULL, NULL, false);
}

/* What the sender could not read fails the receiver too, after the rest. */
static void missing(void)
{
	char why[256];
	int ret;

	ret = craft_into(b_missing, "m", why, sizeof(why));
	CHECK(ret == -RDX_ELOCAL && strstr(why, "the sender could not read 1 entry"),
	      "a missing entry fails the tree: %d %s", ret, why);
	CHECK(content_is("m/a", "alpha") && content_is("m/b", "beta"),
	      "the files around it are written");
	ret = craft_into(b_missing_empty, "m2", why, sizeof(why));
	CHECK(ret == -RDX_EPROTO, "a missing entry without a name is malformed: %d %s", ret, why);
}

static void writers(void)
{
	struct rlimit old, lim;
	char why[256], name[32], data[32];
	bool all = true;
	struct stat st;
	int ret;

	mkdir(at("w"), 0755);
	ret = craft_into(b_repeats, "w", why, sizeof(why));
	CHECK(ret == 0, "repeated names: %d %s", ret, why);
	for (int i = 2; i < 300; i++) {
		snprintf(name, sizeof(name), "w/t/%c/f%03d", i % 3 == 2 ? 'b' : 'a', i);
		snprintf(data, sizeof(data), i == 2 ? "again" : "file %d", i);
		all = all && content_is(name, data);
	}
	CHECK(all, "300 small files in two directories, each with its data");
	CHECK(content_is("w/t/a/f000", "last"), "a name sent 40 times has the last data");
	CHECK(lstat(at("w/t/a/f001"), &st) == 0 && S_ISLNK(st.st_mode),
	      "a symlink replaces a file written just before");
	CHECK(!temp_left(at("w")), "no temporary left");

	/* A write that fails in a writer thread is named and counted, and
	 * the other files are written. */
	getrlimit(RLIMIT_FSIZE, &old);
	lim = (struct rlimit){ 4096, old.rlim_max }; /* the soft limit only */
	signal(SIGXFSZ, SIG_IGN);
	setrlimit(RLIMIT_FSIZE, &lim);
	ret = craft_into(b_too_big, "w2", why, sizeof(why));
	setrlimit(RLIMIT_FSIZE, &old);
	CHECK(ret == -RDX_ELOCAL && strstr(why, "1 entry could not be written"),
	      "a failed write is a local failure: %d %s", ret, why);
	CHECK(!exists("w2/big") && content_is("w2/small", "fits") &&
		      content_is("w2/after", "fits too"),
	      "the failed file is missing, the others are there");
	CHECK(!temp_left(at("w2")), "no temporary left after a failed write");
}

int main(void)
{
	if (!mkdtemp(top))
		return 1;
	dots_and_links();
	existing();
	listing();
	hostile();
	asked_for();
	semantics();
	writers();
	missing();
	round_trip();
	{
		char cmd[256];

		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", top);
		if (system(cmd))
			perror("rm");
	}
	return TAP_DONE();
}
