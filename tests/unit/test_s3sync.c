/* What rds3 sync decides without a server: which keys may become local
 * paths, the --include/--exclude rules, S3's dates, the --checksum ETag
 * comparison (plain and multipart, part sizes rds3's and other tools'),
 * and that a destination is never written through a symlink. */
#include "core/err.h"
#include "s3/pool.h"
#include "s3/sync.h"
#include "s3/walk.h"
#include "tap.h"

#include <errno.h>
#include <pthread.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void test_rel_paths(void)
{
	static const char *const bad[] = {
		"",	"/abs", "..", "../x", "a/..",  "a/../../x",
		"a//b", "a/",	".",  "./a",  "a/./b",
	};
	static const char *const good[] = {
		"a",	     "a/b/c",	"..a",	      "a..",
		".hidden/x", "a b/c d", "\xc3\xbc/x", "...",
	};
	char longname[300];
	const char *why = NULL;
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
		why = NULL;
		CHECK(!s3_rel_path_ok(bad[i], &why) && why,
		      "refused: '%s' (%s)", bad[i], why ? why : "no reason");
	}
	for (i = 0; i < sizeof(good) / sizeof(*good); i++)
		CHECK(s3_rel_path_ok(good[i], &why), "taken: '%s'", good[i]);
	memset(longname, 'x', 256);
	longname[256] = '\0';
	CHECK(!s3_rel_path_ok(longname, &why), "a 256-byte component is "
					       "refused");
}

static void test_rules(void)
{
	struct rdx_rule r[] = {
		{"*.log", false},
		{"logs/keep*", true},
		{"*", false},
		{"*.txt", true},
	};

	CHECK(rdx_rules_pass(NULL, 0, "anything"), "no rules: everything "
						  "passes");
	CHECK(!rdx_rules_pass(r, 1, "a/b.log"), "'*' matches '/' too (aws s3's "
					       "rule)");
	CHECK(rdx_rules_pass(r, 2, "logs/keep.log"), "a later --include wins");
	CHECK(!rdx_rules_pass(r, 2, "logs/x.log"), "the exclude stays for the "
						  "rest");
	CHECK(rdx_rules_pass(r, 4, "a.txt") &&
		      !rdx_rules_pass(r, 4, "logs/keep.log"),
	      "--exclude '*' --include '*.txt': the last matching rule wins");
}

static void test_times(void)
{
	CHECK(s3_parse_time("2024-05-01T10:00:00.000Z") == 1714557600, "ListObj"
								       "ectsV2'"
								       "s "
								       "date");
	CHECK(s3_parse_time("Wed, 01 May 2024 10:00:00 GMT") == 1714557600,
	      "Last-Modified's date");
	CHECK(s3_parse_time("yesterday") == -1 && s3_parse_time(NULL) == -1,
	      "not a date: -1");
}

static void md5_hex(const unsigned char *p, size_t n, char out[33])
{
	unsigned char d[16];
	unsigned int dl;
	int i;

	EVP_Digest(p, n, d, &dl, EVP_md5(), NULL);
	for (i = 0; i < 16; i++)
		sprintf(out + 2 * i, "%02x", d[i]);
}

/* "MD5S-N" of buf in parts of part bytes. */
static void mp_etag(const unsigned char *buf, size_t n, size_t part, char *out)
{
	unsigned char *all = malloc((n / part + 1) * 16), d[16];
	unsigned int dl;
	size_t off, k = 0;
	char hex[33];
	int i;

	for (off = 0; off < n; off += part, k++)
		EVP_Digest(buf + off, n - off < part ? n - off : part,
			   all + 16 * k, &dl, EVP_md5(), NULL);
	EVP_Digest(all, 16 * k, d, &dl, EVP_md5(), NULL);
	for (i = 0; i < 16; i++)
		sprintf(hex + 2 * i, "%02x", d[i]);
	sprintf(out, "\"%s-%zu\"", hex, k);
	free(all);
}

static void test_etags(void)
{
	const size_t mib = 1 << 20, n = 11 * mib + 123;
	unsigned char *buf = malloc(n);
	char path[] = "/tmp/test_s3sync.XXXXXX", etag[64], hex[33];
	bool same = true;
	size_t i;
	int fd = mkstemp(path);

	for (i = 0; i < n; i++)
		buf[i] = (unsigned char)(i * 2654435761u >> 13);
	CHECK(fd >= 0 && write(fd, buf, n) == (ssize_t)n, "a 11 MiB test file");
	md5_hex(buf, n, hex);
	sprintf(etag, "\"%s\"", hex);
	CHECK(!s3_sync_etag_match(fd, n, etag, 8 * mib, NULL, &same) && same,
	      "a plain ETag is the MD5");
	CHECK(!s3_sync_etag_match(fd, n, hex, 8 * mib, NULL, &same) && same,
	      "with or without quotes");
	hex[0] = hex[0] == '0' ? '1' : '0';
	CHECK(!s3_sync_etag_match(fd, n, hex, 8 * mib, NULL, &same) && !same,
	      "another MD5 does not match");
	mp_etag(buf, n, 5 * mib, etag);
	CHECK(!s3_sync_etag_match(fd, n, etag, 5 * mib, NULL, &same) && same,
	      "multipart, rds3's --part-size: %s", etag);
	CHECK(!s3_sync_etag_match(fd, n, etag, 8 * mib, NULL, &same) && !same,
	      "multipart with another part size (8 MiB: 2 parts, not 3) does "
	      "not match");
	mp_etag(buf, n, 4 * mib, etag);
	CHECK(!s3_sync_etag_match(fd, n, etag, 8 * mib, NULL, &same) && same,
	      "multipart, the smallest whole MiB for N parts (4 MiB x 3)");
	mp_etag(buf, n, 16 * mib, etag);
	CHECK(!s3_sync_etag_match(fd, n, etag, 16 * mib, NULL, &same) && same,
	      "one part of a multipart upload: \"MD5(MD5)-1\"");
	CHECK(!s3_sync_etag_match(fd, n,
				  "\"0123456789abcdef0123456789abcdef-x\"",
				  5 * mib, NULL, &same) &&
		      !same,
	      "a malformed part count never matches");
	CHECK(!s3_sync_etag_match(fd, n, "kms:whatever", 5 * mib, NULL,
				  &same) &&
		      !same,
	      "a non-MD5 ETag (SSE-KMS) never matches");
	md5_hex(buf, n, hex);
	CHECK(s3_sync_etag_match(fd, n + 10, hex, 5 * mib, NULL, &same) ==
		      -ENODATA,
	      "a file shorter than listed: -ENODATA");
	close(fd);
	unlink(path);
	free(buf);
}

static void test_prepare(void)
{
	char root[] = "/tmp/test_s3sync.XXXXXX", p[256], q[256];
	struct stat st;
	int ret;

	if (!mkdtemp(root)) {
		CHECK(0, "mkdtemp");
		return;
	}
	CHECK(s3_local_prepare(root, "a/b/c/file", NULL) == 0, "parents made");
	snprintf(p, sizeof(p), "%s/a/b/c", root);
	CHECK(!stat(p, &st) && S_ISDIR(st.st_mode), "a/b/c is a directory");
	snprintf(p, sizeof(p), "%s/out", root);
	mkdir(p, 0700);
	snprintf(q, sizeof(q), "%s/link", root);
	CHECK(!symlink(p, q), "a symlink to a directory beside the root");
	CHECK(s3_local_prepare(root, "link/x", NULL) == -ELOOP, "through a symlinked "
							  "directory: -ELOOP");
	CHECK(s3_local_prepare(root, "link", NULL) == -ELOOP, "onto a symlink: "
							"-ELOOP");
	CHECK(s3_local_prepare(root, "a/b", NULL) == -EISDIR, "onto a directory: "
							"-EISDIR");
	snprintf(p, sizeof(p), "%s/f", root);
	close(open(p, O_CREAT | O_WRONLY, 0600));
	CHECK(s3_local_prepare(root, "f/x", NULL) == -ENOTDIR ||
		      s3_local_prepare(root, "f/x", NULL) == -EEXIST,
	      "under a file: refused");
	unlink(p);
	snprintf(p, sizeof(p), "%s/out/victim", root);
	close(open(p, O_CREAT | O_WRONLY, 0600));
	CHECK((ret = s3_local_unlink(root, "link/victim")) < 0 &&
		      (ret == -ELOOP || ret == -ENOTDIR) && !access(p, F_OK),
	      "--delete does not go through a symlinked directory");
	snprintf(p, sizeof(p), "%s/a/b/c/f", root);
	close(open(p, O_CREAT | O_WRONLY, 0600));
	CHECK(s3_local_unlink(root, "a/b/c/f") == 0 && access(p, F_OK),
	      "--delete removes a file below the root");
	CHECK(s3_local_unlink(root, "a/b/c/f") == 0 &&
		      s3_local_unlink(root, "no/such") == 0,
	      "a file already gone is no error");
	unlink(q);
	snprintf(p, sizeof(p), "rm -rf '%s'", root);
	CHECK(system(p) == 0, "cleaned up");
}

struct pool_check {
	atomic_int *calls; /* per index */
	atomic_int *stop;
	atomic_int done;
	pthread_mutex_t lock;
	struct s3_client *seen[S3_JOBS_MAX + 1];
	size_t nseen;
	size_t stop_after;
};

static int pool_fn(void *ctx, struct s3_client *c, size_t i)
{
	struct pool_check *p = ctx;
	size_t k;

	atomic_fetch_add(&p->calls[i], 1);
	pthread_mutex_lock(&p->lock);
	for (k = 0; k < p->nseen && p->seen[k] != c; k++)
		;
	if (k == p->nseen && p->nseen <= S3_JOBS_MAX)
		p->seen[p->nseen++] = c;
	pthread_mutex_unlock(&p->lock);
	if ((size_t)atomic_fetch_add(&p->done, 1) + 1 == p->stop_after)
		atomic_store(p->stop, 1);
	usleep(200); /* as if a request: the other workers get jobs too */
	return 0;
}

static void test_pool(void)
{
	static atomic_int calls[1000], stop;
	struct s3_config cfg = {0};
	struct s3_client_opts co = {.cfg = &cfg, .stop = &stop};
	struct pool_check p = {.calls = calls, .stop = &stop};
	size_t i, once = 0, total = 0;

	pthread_mutex_init(&p.lock, NULL);
	CHECK(s3_pool_run(&co, 8, 1000, pool_fn, &p) == 0, "1000 jobs on 8 "
							   "workers");
	for (i = 0; i < 1000; i++)
		once += atomic_load(&calls[i]) == 1;
	CHECK(once == 1000, "each job ran exactly once (%zu)", once);
	CHECK(p.nseen >= 2 && p.nseen <= 8,
	      "on several clients, at most 8: each worker its own (%zu)",
	      p.nseen);
	memset(calls, 0, sizeof(calls));
	p.nseen = 0;
	atomic_store(&p.done, 0);
	p.stop_after = 100;
	CHECK(s3_pool_run(&co, 4, 1000, pool_fn, &p) == 0, "a run stopped "
							   "midway returns");
	for (i = 0; i < 1000; i++)
		total += (size_t)atomic_load(&calls[i]);
	CHECK(total >= 100 && total < 1000,
	      "the stop flag ends it early (%zu jobs ran)", total);
	atomic_store(&stop, 0);
	p.nseen = 0;
	CHECK(s3_pool_run(&co, 64, 3, pool_fn, &p) == 0 && p.nseen <= 3,
	      "3 jobs need no more than 3 workers");
	CHECK(s3_pool_run(&co, 8, 0, pool_fn, &p) == 0, "no jobs: nothing to "
							"do");
	pthread_mutex_destroy(&p.lock);
}

int main(void)
{
	test_pool();
	test_rel_paths();
	test_rules();
	test_times();
	test_etags();
	test_prepare();
	return TAP_DONE();
}
