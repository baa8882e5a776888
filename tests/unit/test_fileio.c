/* Sources and sinks: where the temporary lives, that nothing appears under
 * the final name before publish, that a failed transfer leaves nothing,
 * modes, unaligned tails, and stdin's offset.  The write pool: producers
 * on several threads, each waiting for its own writes; a failed write. */
#include "core/direct.h"
#include "core/fileio.h"
#include "core/io.h"
#include "core/wpool.h"
#include "tap.h"

#include <pthread.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

static char dir[] = "/tmp/rdx-fileio-XXXXXX";

static int count_entries(void)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;

	while (d && (e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			n++;
	if (d)
		closedir(d);
	return n;
}

static int temp_named_like(const char *base)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	char want[64];
	int found = 0;

	snprintf(want, sizeof(want), ".%s.rdx-", base);
	while (d && (e = readdir(d)))
		if (!strncmp(e->d_name, want, strlen(want)))
			found = 1;
	if (d)
		closedir(d);
	return found;
}

static void *aligned_buf(size_t n, int fill)
{
	void *p = NULL;

	if (posix_memalign(&p, 4096, n))
		abort();
	memset(p, fill, n);
	return p;
}

static void test_sink(void)
{
	char path[128], other[128];
	struct rdx_sink *k;
	struct stat st;
	size_t n = 3 * 4096 + 100; /* aligned chunks and an unaligned tail */
	struct rdx_wplan always = { .direct_from = 0 }; /* --direct always */
	char *buf = aligned_buf(8192, 'x');
	int fd;

	snprintf(path, sizeof(path), "%s/out.bin", dir);
	CHECK(rdx_sink_open(&k, path, true, n, &always, NULL, 0, NULL) == 0, "sink opens");
	CHECK((temp_named_like("out.bin") || count_entries() == 0) && stat(path, &st) != 0,
	      "writes go to an unnamed file (or .out.bin.rdx-*), nothing under the final name");
	CHECK(rdx_sink_parallel(k), "a file sink takes parallel writes");
	CHECK(rdx_sink_write(k, buf, 8192, 4096) == 0 && rdx_sink_write(k, buf, 4096, 0) == 0 &&
		      rdx_sink_write(k, buf, 100, 3 * 4096) == 0,
	      "out-of-order aligned writes and an unaligned tail");
	CHECK(rdx_sink_flush(k, n) == 0 && stat(path, &st) != 0,
	      "flush does not publish");
	CHECK(rdx_sink_publish(k) == 0 && stat(path, &st) == 0 && (size_t)st.st_size == n,
	      "publish gives the final name and the exact size");
	rdx_sink_close(k);
	CHECK(count_entries() == 1, "no temporary left after publish");

	/* A failed transfer: close without publish. */
	chmod(path, 0640);
	CHECK(rdx_sink_open(&k, path, true, 1 << 20, NULL, NULL, 0, NULL) == 0 &&
		      rdx_sink_write(k, buf, 4096, 0) == 0,
	      "second transfer to an existing file");
	rdx_sink_close(k);
	CHECK(stat(path, &st) == 0 && (size_t)st.st_size == n && count_entries() == 1,
	      "an unpublished transfer leaves the old file alone and no temporary");
	CHECK(rdx_sink_open(&k, path, false, 0, NULL, NULL, 0, NULL) == 0 &&
		      rdx_sink_flush(k, 0) == 0 && rdx_sink_publish(k) == 0,
	      "replacing an existing file");
	rdx_sink_close(k);
	CHECK(stat(path, &st) == 0 && st.st_size == 0 && (st.st_mode & 07777) == 0640,
	      "a replaced file keeps its mode");

	snprintf(other, sizeof(other), "%s/no/such/dir/x", dir);
	CHECK(rdx_sink_open(&k, other, false, 0, NULL, NULL, 0, NULL) == -ENOENT,
	      "missing directory: ENOENT, nothing created");
	CHECK(rdx_sink_open(&k, dir, false, 0, NULL, NULL, 0, NULL) == -EISDIR,
	      "a directory as FILE: EISDIR");
	snprintf(other, sizeof(other), "%s/fifo", dir);
	mkfifo(other, 0600);
	CHECK(rdx_sink_open(&k, other, false, 0, NULL, NULL, 200, NULL) == -ENXIO,
	      "a fifo without a reader is refused after the wait");
	fd = open("/dev/null", O_RDONLY);
	close(fd);
	CHECK(rdx_sink_open(&k, "/dev/null", true, 1 << 20, NULL, NULL, 0, NULL) == 0 &&
		      !rdx_sink_parallel(k) && rdx_sink_write(k, buf, 4096, 0) == 0 &&
		      rdx_sink_flush(k, 4096) == 0 && rdx_sink_publish(k) == 0,
	      "/dev/null is written in place");
	rdx_sink_close(k);
	CHECK(access("/dev/null", W_OK) == 0, "and is still /dev/null");
	unlink(other);
	unlink(path);
	free(buf);
}

static void test_source(void)
{
	char path[128];
	struct rdx_source *s;
	char *buf = aligned_buf(8192, 0);
	int fd, saved;
	ssize_t n;

	snprintf(path, sizeof(path), "%s/in.bin", dir);
	fd = open(path, O_CREAT | O_WRONLY | O_TRUNC, 0600);
	CHECK(fd >= 0 && write(fd, "0123456789", 10) == 10, "source file written");
	close(fd);
	CHECK(rdx_source_open(&s, path, NULL) == 0 && rdx_source_seekable(s) &&
		      rdx_source_size(s) == 10,
	      "a regular file is seekable with its size");
	n = rdx_source_read(s, buf, 8192, 0);
	CHECK(n == 10 && !memcmp(buf, "0123456789", 10), "chunk 0 holds the file");
	CHECK(rdx_source_read(s, buf, 8192, 1) == 0, "chunk 1 is past the end");
	rdx_source_close(s);

	/* stdin already read from: send the rest, as cat would. */
	saved = dup(0);
	fd = open(path, O_RDONLY);
	CHECK(lseek(fd, 4, SEEK_SET) == 4 && dup2(fd, 0) == 0, "stdin at offset 4");
	close(fd);
	CHECK(rdx_source_open(&s, NULL, NULL) == 0 && rdx_source_size(s) == 6,
	      "stdin at offset 4 has 6 bytes left");
	n = rdx_source_read(s, buf, 8192, 0);
	CHECK(n == 6 && !memcmp(buf, "456789", 6), "and reads them");
	rdx_source_close(s);
	dup2(saved, 0);
	close(saved);
	CHECK(rdx_source_open(&s, dir, NULL) == -EISDIR, "a directory is no source");
	CHECK(rdx_source_open(&s, "/nonexistent/x", NULL) == -ENOENT, "missing source");
	unlink(path);
	free(buf);
}

#define WP_BUF (4 * RDX_DIO_ALIGN)
#define WP_EACH 200 /* buffers per producer */

struct producer {
	struct rdx_wpool *p;
	unsigned id; /* writes blocks id, id + 2, id + 4, ... */
	int ret;
};

/* Fills the pool's buffers with its id and block number, one after the
 * other, then waits for its writes. */
static void *produce(void *arg)
{
	struct producer *w = arg;
	struct rdx_wtag tag = { 0 };

	for (unsigned i = 0; i < WP_EACH; i++) {
		unsigned blk = w->id + 2 * i;
		char *b = rdx_wpool_get(w->p);

		memset(b, 'a' + (int)(blk % 26), WP_BUF);
		rdx_wpool_put(w->p, b, WP_BUF, (uint64_t)blk * WP_BUF, &tag);
	}
	w->ret = rdx_wpool_wait(w->p, &tag);
	return NULL;
}

static void test_wpool(void)
{
	char path[256], *back = malloc(WP_BUF);
	struct producer w[2];
	struct rdx_wpool *p;
	struct rdx_wtag tag = { 0 };
	struct rdx_wplan buffered = { .direct_from = RDX_NO_DIRECT };
	struct rdx_wfile wf;
	pthread_t t[2];
	bool same = true;
	int fd, ro;

	snprintf(path, sizeof(path), "%s/wpool", dir);
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	/* Three buffers for two producers: they wait on each other's writes. */
	rdx_wfile_init(&wf, fd, -1, &buffered);
	CHECK(fd >= 0 && rdx_wpool_new(&p, 2, 3, WP_BUF, &wf) == 0,
	      "a pool of 2 threads and 3 buffers");
	for (unsigned i = 0; i < 2; i++) {
		w[i] = (struct producer){ .p = p, .id = i };
		pthread_create(&t[i], NULL, produce, &w[i]);
	}
	for (unsigned i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	CHECK(w[0].ret == 0 && w[1].ret == 0, "both producers' writes succeeded");
	for (unsigned blk = 0; blk < 2 * WP_EACH && same; blk++) {
		same = rdx_pread_full(fd, back, WP_BUF, (off_t)blk * WP_BUF) == WP_BUF;
		for (size_t k = 0; k < WP_BUF && same; k++)
			same = back[k] == 'a' + (int)(blk % 26);
	}
	CHECK(same, "every block at its offset, whole");
	CHECK(lseek(fd, 0, SEEK_END) == (off_t)2 * WP_EACH * WP_BUF, "the file's size");
	rdx_wpool_free(p);

	/* A descriptor that cannot be written: the tag says why, once. */
	ro = open(path, O_RDONLY | O_CLOEXEC);
	rdx_wfile_release(&wf);
	rdx_wfile_init(&wf, ro, -1, &buffered);
	CHECK(ro >= 0 && rdx_wpool_new(&p, 1, 2, WP_BUF, &wf) == 0,
	      "a pool on a read-only descriptor");
	for (unsigned i = 0; i < 2; i++) {
		char *b = rdx_wpool_get(p);

		memset(b, 'x', WP_BUF);
		rdx_wpool_put(p, b, WP_BUF, (uint64_t)i * WP_BUF, &tag);
	}
	CHECK(rdx_wpool_wait(p, &tag) == -EBADF, "a failed write is the tag's error");
	CHECK(rdx_wpool_wait(p, &tag) == 0, "and the tag is clear for reuse");
	rdx_wpool_drop(p, rdx_wpool_get(p));
	rdx_wpool_free(p);
	rdx_wfile_release(&wf);
	close(ro);
	close(fd);
	unlink(path);
	free(back);
}

/* rdx_writev_full: more pieces than one writev(2) takes (IOV_MAX), empty
 * ones among them, arrive whole and in order; a bad descriptor is -EBADF. */
static void test_writev(void)
{
	enum { PIECES = 3000 };
	struct iovec *v = calloc(PIECES, sizeof(*v));
	char path[256], *data = malloc(PIECES * 7), *back = malloc(PIECES * 7);
	size_t total = 0;
	bool same;
	int fd;

	for (unsigned i = 0; i < PIECES * 7; i++)
		data[i] = (char)(i * 31 + 7);
	for (unsigned i = 0; i < PIECES; i++) { /* 0..6 bytes each, from data */
		v[i].iov_base = data + total;
		v[i].iov_len = i % 7;
		total += i % 7;
	}
	snprintf(path, sizeof(path), "%s/writev", dir);
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	CHECK(fd >= 0 && rdx_writev_full(fd, v, PIECES) == (ssize_t)total,
	      "%d pieces (%zu bytes) written whole", PIECES, total);
	same = rdx_pread_full(fd, back, total + 1, 0) == (ssize_t)total &&
	       !memcmp(back, data, total);
	CHECK(same, "in order");
	CHECK(rdx_writev_full(fd, (struct iovec[]){ { data, 0 }, { data, 0 } }, 2) == 0,
	      "only empty pieces: 0 bytes, no error");
	CHECK(rdx_writev_full(-1, &(struct iovec){ data, 1 }, 1) == -EBADF,
	      "a bad descriptor: -EBADF");
	close(fd);
	unlink(path);
	free(v);
	free(data);
	free(back);
}

/* rdx_prealloc on tmpfs (/dev/shm, as on every Debian system): its room
 * is checked, and no page is allocated (fallocate would zero them all
 * before the first byte of data). */
static void test_prealloc_tmpfs(void)
{
	char path[] = "/dev/shm/rdx-prealloc-XXXXXX";
	struct statfs f;
	struct stat st;
	uint64_t room, len;
	int fd;

	CHECK(statfs("/dev/shm", &f) == 0 && f.f_type == TMPFS_MAGIC && f.f_blocks,
	      "prealloc: /dev/shm is a tmpfs with a size (this test needs one)");
	fd = mkstemp(path);
	CHECK(fd >= 0, "prealloc: a file in /dev/shm");
	if (fd < 0)
		return;
	unlink(path); /* open, and gone on any return */
	if (fstatfs(fd, &f)) {
		close(fd);
		return;
	}
	room = (uint64_t)f.f_bavail * (uint64_t)f.f_bsize;
	len = room / 2 < (256u << 20) ? room / 2 : (256u << 20);
	CHECK(rdx_prealloc(fd, 0, len) == 0, "prealloc: %llu bytes of tmpfs: fine",
	      (unsigned long long)len);
	CHECK(fstat(fd, &st) == 0 && st.st_blocks == 0 && st.st_size == 0,
	      "prealloc: tmpfs: no page allocated (%lld blocks, size %lld)",
	      (long long)st.st_blocks, (long long)st.st_size);
	/* Only where nothing was allocated: fallocate would take the whole
	 * tmpfs's worth of memory before failing (the OOM killer, on a
	 * machine whose /dev/shm is as big as its memory). */
	if (st.st_blocks == 0)
		CHECK(rdx_prealloc(fd, 0, room + (64u << 20)) == -ENOSPC,
		      "prealloc: more than the tmpfs has room for: ENOSPC now");
	close(fd);
}

int main(void)
{
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	test_sink();
	test_source();
	test_wpool();
	test_writev();
	test_prealloc_tmpfs();
	rmdir(dir);
	return TAP_DONE();
}
