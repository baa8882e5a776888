/* rds3 serve: who owns a bucket, and what follows from it: the access
 * check of every request on a bucket, CreateBucket, DeleteBucket and
 * ListBuckets.
 *
 * With one access key (the usual credentials, or a --users file of one
 * user) that user owns everything and nothing is recorded.  With several,
 * a bucket's creator owns it: its access key is in the file .rds3-owner at
 * the top of the bucket's directory (SV_OWNER_NAME: no key can have that
 * name, so it is never listed, read or written as one; a file, not an
 * extended attribute, because tmpfs before Linux 6.6 keeps none).  It is
 * written into a directory made under a temporary name (not a bucket
 * name: it starts with '.') that is then renamed to the bucket's without
 * replacing anything, so no bucket is ever seen without its owner.  A
 * directory with no owner recorded (made by hand, or served before the
 * server had users), or with an owner the file no longer names, is the
 * first user's.  Another user's bucket is 403 AccessDenied for any
 * request, and is left out of their ListBuckets; objects are their bucket
 * owner's (as S3's BucketOwnerEnforced). */
#include "s3/serve/serve_ops.h"
#include "s3/xml.h"

#include "core/err.h"
#include "core/hex.h"
#include "core/io.h"
#include "core/log.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAKING	 ".rds3-mkbucket-" /* a bucket being made, owner first */
#define LIST_MAX 10000		   /* max-buckets, as S3 */

const struct sv_user *sv_bucket_owner(const struct server *s, int bfd)
{
	char key[SV_USER_KEY_MAX + 2];
	const struct sv_user *u = NULL;
	ssize_t n = -1;
	int fd;

	if (!s->auth.users)
		return NULL;
	if (!s->shared)
		return &s->auth.users->v[0];
	/* Non-blocking: a FIFO put there by hand is no owner, not a hang. */
	fd = openat(bfd, SV_OWNER_NAME, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd >= 0) {
		n = rdx_pread_full(fd, key, sizeof(key) - 1, 0);
		close(fd);
	}
	if (n > 1 && key[n - 1] == '\n') {
		key[n - 1] = '\0';
		u = sv_users_find(s->auth.users, key);
	}
	return u ? u : &s->auth.users->v[0];
}

int sv_bucket_mine(struct call *k, int bfd)
{
	if (!k->s->shared || sv_bucket_owner(k->s, bfd) == k->user)
		return 0;
	rdx_info(2, "%s %s %s: bucket '%s' is another user's", k->c->peer, k->r->method,
		 k->r->raw_path, k->bucket);
	return sv_fail(k, 403, "AccessDenied", "Access Denied") ? -EIO : 1;
}

void sv_owner_xml(struct s3_buf *b, const struct sv_user *u)
{
	s3_buf_adds(b, "<Owner><ID>");
	sv_xml_esc(b, u ? u->access_key : "rds3");
	s3_buf_adds(b, "</ID><DisplayName>");
	sv_xml_esc(b, u ? u->name : "rds3");
	s3_buf_adds(b, "</DisplayName></Owner>");
}

/* A name for a bucket being made: MAKING and 16 random hex digits. */
static int making_name(char out[64])
{
	unsigned char r[8];
	char hex[17];

	if (getrandom(r, sizeof(r), 0) != sizeof(r))
		return -EIO;
	rdx_hex_encode(r, sizeof(r), hex);
	snprintf(out, 64, MAKING "%s", hex);
	return 0;
}

/* Writes the owner record rec (n bytes: "KEY\n") in directory dir.
 * Returns 0 or -errno. */
static int write_owner(int dir, const char *rec, size_t n)
{
	int fd = openat(dir, SV_OWNER_NAME, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
			0666);
	int ret = 0;

	if (fd < 0)
		return -errno;
	if (rdx_write_full(fd, rec, n, NULL) < 0)
		ret = -errno;
	close(fd);
	if (ret)
		unlinkat(dir, SV_OWNER_NAME, 0);
	return ret;
}

/* Removes the directory name of root that holds at most an owner. */
static void remove_owned(int root, const char *name)
{
	int d = openat(root, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

	if (d >= 0) {
		unlinkat(d, SV_OWNER_NAME, 0);
		close(d);
	}
	unlinkat(root, name, AT_REMOVEDIR);
}

/* Makes directory name in root owned by u, atomically.  Returns 0, -EEXIST
 * (something has that name) or -errno. */
static int make_owned(int root, const char *name, const struct sv_user *u)
{
	char tmp[64], rec[SV_USER_KEY_MAX + 2];
	int d, ret;

	if ((ret = making_name(tmp)))
		return ret;
	if (mkdirat(root, tmp, 0777))
		return -errno;
	snprintf(rec, sizeof(rec), "%s\n", u->access_key);
	d = openat(root, tmp, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	ret = d < 0 ? -errno : write_owner(d, rec, strlen(rec));
	if (!ret && renameat2(root, tmp, root, name, RENAME_NOREPLACE))
		ret = -errno;
	if (d >= 0)
		close(d);
	if (ret)
		remove_owned(root, tmp);
	return ret;
}

int sv_owners_start(struct server *s)
{
	DIR *d = sv_opendir(s->root);
	struct dirent *de;
	char probe[64];
	int ret;

	/* What a killed server was making is nobody's yet. */
	if (d) {
		while ((de = readdir(d)))
			if (!strncmp(de->d_name, MAKING, sizeof(MAKING) - 1))
				remove_owned(dirfd(d), de->d_name);
		closedir(d);
	}
	if (!s->shared)
		return 0;
	/* A rename that does not replace (not on NFS, for one): known now
	 * rather than at the first CreateBucket. */
	if ((ret = making_name(probe)))
		return ret;
	ret = make_owned(s->root, probe, &s->auth.users->v[0]);
	if (!ret)
		remove_owned(s->root, probe);
	return ret;
}

/* Whether bucket bfd holds anything but its owner: 1, 0, or -errno. */
static int holds_keys(int bfd)
{
	DIR *d = sv_opendir(bfd);
	struct dirent *de;
	int ret = 0;

	if (!d)
		return -errno;
	while (!ret && (de = readdir(d)))
		ret = strcmp(de->d_name, ".") && strcmp(de->d_name, "..") &&
		      strcmp(de->d_name, SV_OWNER_NAME);
	closedir(d);
	return ret;
}

int sv_delete_bucket(struct call *k, int bfd)
{
	struct server *s = k->s;
	char rec[SV_USER_KEY_MAX + 2];
	ssize_t had = -1;
	int ret, err, fd;

	/* The owner's record keeps the directory from being empty (also one
	 * left from serving several users, now one): it goes only when
	 * nothing else is there, and comes back if something arrived
	 * meanwhile (the owner's own upload: no one else may write here). */
	fd = openat(bfd, SV_OWNER_NAME, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd >= 0) {
		had = rdx_pread_full(fd, rec, sizeof(rec), 0);
		close(fd);
		ret = holds_keys(bfd);
		if (ret < 0)
			return sv_fail_errno(k, ret);
		if (ret)
			return sv_fail(k, 409, "BucketNotEmpty", "The bucket you tried to delete is not empty");
		if (unlinkat(bfd, SV_OWNER_NAME, 0))
			had = -1;
	}
	if (!unlinkat(s->root, k->bucket, AT_REMOVEDIR)) {
		/* Its open uploads go with it: a bucket made again under the
		 * name starts without them. */
		sv_drop_uploads(s->root, k->bucket);
		return sv_answer(k, 204, NULL, NULL, 0);
	}
	err = errno;
	if (had >= 0 && (ret = write_owner(bfd, rec, (size_t)had)))
		rdx_warn("bucket '%s' lost its owner record: %s", k->bucket, strerror(-ret));
	if (err == ENOTEMPTY || err == EEXIST)
		return sv_fail(k, 409, "BucketNotEmpty", "The bucket you tried to delete is not empty");
	return sv_fail_errno(k, -err);
}

/* The CreateBucketConfiguration's LocationConstraint, if any: every
 * bucket here is in us-east-1 (GetBucketLocation, ListBuckets), so
 * another region is refused as S3's endpoint of one region refuses it,
 * rather than taken and forgotten.  0 to go on; else an answer was sent
 * (1) or could not be (-errno). */
static int location_ok(struct call *k)
{
	char where[64];
	char *xml = NULL;
	size_t n;
	int ret;

	if ((ret = sv_take_xml(k, true, &xml, &n)))
		return ret;
	ret = n ? s3_xml_field(xml, n, "CreateBucketConfiguration", "LocationConstraint", where,
			       sizeof(where))
		: 0;
	free(xml);
	if (ret == -RDX_EPROTO)
		return sv_fail(k, 400, "MalformedXML",
			       "rds3 serve reads a CreateBucketConfiguration with a LocationConstraint, nothing else") ? -EIO : 1;
	if (ret || (n && *where && strcmp(where, "us-east-1")))
		return sv_fail(k, 400, "IllegalLocationConstraintException",
			       "rds3 serve keeps every bucket in us-east-1: create it with no LocationConstraint (region us-east-1)") ? -EIO : 1;
	return 0;
}

int sv_create_bucket(struct call *k)
{
	struct server *s = k->s;
	char loc[96];
	int ret, bfd;

	if ((ret = location_ok(k)))
		return ret < 0 ? ret : 0;
	if (!s->shared)
		ret = mkdirat(s->root, k->bucket, 0777) ? -errno : 0;
	else
		ret = make_owned(s->root, k->bucket, k->user);
	if (!ret) {
		snprintf(loc, sizeof(loc), "Location: /%s\r\n", k->bucket);
		return sv_answer(k, 200, loc, NULL, 0);
	}
	if (ret != -EEXIST)
		return sv_fail_errno(k, ret);
	/* Bucket names are global: whose it is decides the answer. */
	bfd = s->shared ? sv_bucket_open(s->root, k->bucket) : -1;
	if (s->shared && (bfd < 0 || sv_bucket_owner(s, bfd) != k->user)) {
		if (bfd >= 0)
			close(bfd);
		return sv_fail(k, 409, "BucketAlreadyExists",
			       "The requested bucket name is not available. The bucket namespace is shared by all users of the system. Please select a different name and try again.");
	}
	if (bfd >= 0)
		close(bfd);
	/* One's own bucket again: 200 and nothing changed, as us-east-1
	 * (every bucket's region here) answers it. */
	snprintf(loc, sizeof(loc), "Location: /%s\r\n", k->bucket);
	return sv_answer(k, 200, loc, NULL, 0);
}

/* ----------------------------------------------------------- ListBuckets */

struct bucket {
	char name[64];
	time_t made;
};

static int by_name(const void *a, const void *b)
{
	return strcmp(((const struct bucket *)a)->name, ((const struct bucket *)b)->name);
}

/* The request's buckets (its user's, after *after, starting with prefix),
 * sorted: 0, or -errno. */
static int own_buckets(struct call *k, const char *prefix, const char *after,
		       struct bucket **out, size_t *n)
{
	DIR *d = sv_opendir(k->s->root);
	struct bucket *v = NULL;
	size_t cap = 0;
	struct dirent *de;
	int ret = 0;

	*n = 0;
	if (!d)
		return -errno;
	while ((de = readdir(d))) {
		struct stat st;
		int bfd;

		if (!sv_bucket_ok(de->d_name) || strncmp(de->d_name, prefix, strlen(prefix)) ||
		    (after && strcmp(de->d_name, after) <= 0) ||
		    fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) || !S_ISDIR(st.st_mode))
			continue;
		if (k->s->shared) {
			bfd = sv_bucket_open(k->s->root, de->d_name);
			if (bfd < 0)
				continue;
			if (sv_bucket_owner(k->s, bfd) != k->user) {
				close(bfd);
				continue;
			}
			close(bfd);
		}
		if (*n == cap) {
			struct bucket *nv = realloc(v, (cap = cap ? 2 * cap : 64) * sizeof(*v));

			if (!nv) {
				ret = -ENOMEM;
				break;
			}
			v = nv;
		}
		snprintf(v[*n].name, sizeof(v[*n].name), "%.63s", de->d_name); /* sv_bucket_ok */
		v[(*n)++].made = st.st_mtim.tv_sec;
	}
	closedir(d);
	if (ret) {
		free(v);
		*n = 0;
		return ret;
	}
	if (*n)
		qsort(v, *n, sizeof(*v), by_name);
	*out = v;
	return 0;
}

/* A ListBuckets parameter as a number of 1..LIST_MAX: 0 or -EINVAL. */
static int max_buckets(const char *v, size_t *out)
{
	unsigned long m;

	if (!v || sv_count(v, 0, ULONG_MAX, &m) || m < 1 || m > LIST_MAX)
		return -EINVAL;
	*out = (size_t)m;
	return 0;
}

int sv_list_buckets(struct call *k)
{
	const char *maxb = NULL, *token = NULL, *prefix = NULL, *region = NULL;
	char after[64];
	struct bucket *v = NULL;
	size_t n = 0, max = 0, i;
	struct s3_buf b;
	bool paged;
	int ret;

	sv_query(k->r, "max-buckets", &maxb);
	sv_query(k->r, "continuation-token", &token);
	sv_query(k->r, "prefix", &prefix);
	sv_query(k->r, "bucket-region", &region);
	paged = sv_query(k->r, "max-buckets", NULL);
	if (paged && max_buckets(maxb, &max))
		return sv_fail(k, 400, "InvalidArgument", "max-buckets must be a number from 1 to 10000");
	if (token) {
		size_t tl = strlen(token);

		if (!tl || tl % 2 || tl / 2 >= sizeof(after) ||
		    rdx_hex_decode(token, tl / 2, after) || memchr(after, '\0', tl / 2))
			return sv_fail(k, 400, "InvalidArgument", "The continuation token provided is incorrect");
		after[tl / 2] = '\0';
	}
	/* Every bucket here is in us-east-1 (GetBucketLocation says so). */
	if (!region || !strcmp(region, "us-east-1"))
		ret = own_buckets(k, prefix ? prefix : "", token ? after : NULL, &v, &n);
	else
		ret = 0;
	if (ret)
		return sv_fail_errno(k, ret);
	s3_buf_init(&b, 0);
	s3_buf_adds(&b, XML_HEAD "<ListAllMyBucketsResult xmlns=\"" XMLNS "\">");
	sv_owner_xml(&b, k->user);
	s3_buf_adds(&b, "<Buckets>");
	for (i = 0; i < n && (!paged || i < max); i++) {
		char date[40];

		sv_iso_date(v[i].made, date);
		s3_buf_printf(&b, "<Bucket><Name>%s</Name><CreationDate>%s</CreationDate>"
				  "<BucketRegion>us-east-1</BucketRegion></Bucket>",
			      v[i].name, date);
	}
	s3_buf_adds(&b, "</Buckets>");
	if (i < n) {
		char hex[2 * sizeof(v[0].name) + 1];

		rdx_hex_encode(v[i - 1].name, strlen(v[i - 1].name), hex);
		s3_buf_printf(&b, "<ContinuationToken>%s</ContinuationToken>", hex);
	}
	if (prefix) {
		s3_buf_adds(&b, "<Prefix>");
		sv_xml_esc(&b, prefix);
		s3_buf_adds(&b, "</Prefix>");
	}
	s3_buf_adds(&b, "</ListAllMyBucketsResult>");
	free(v);
	ret = sv_xml_answer(k, 200, &b);
	s3_buf_release(&b);
	return ret;
}
