/* rds3 serve: multipart uploads (create, parts, complete, abort, list,
 * expiry) and the dispatch of object requests. */
#include "s3/serve/serve_ops.h"

#include "s3/checksum.h"
#include "s3/s3.h"
#include "s3/xml.h"

#include "core/hex.h"
#include "core/err.h"
#include "core/io.h"
#include "core/log.h"
#include "core/units.h"

#include <curl/curl.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---------------------------------------------------------- multipart */

/* DIR/.rds3-uploads, made when asked; never through a symlink put
 * there.  Returns an O_PATH descriptor or -errno. */
int sv_uploads_fd(int root, bool make)
{
	int fd;

	if (make && mkdirat(root, UPLOADS, 0700) && errno != EEXIST)
		return -errno;
	fd = openat(root, UPLOADS, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

/* Opens upload id's directory in DIR/.rds3-uploads. */
static int upload_dir(int root, const char *id)
{
	int u = sv_uploads_fd(root, false), up;

	if (u < 0)
		return u;
	up = openat(u, id, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	up = up < 0 ? -errno : up;
	close(u);
	return up;
}

/* The upload's directory, when id is one of this bucket and key's. */
static int upload_open(struct call *k, const char *id)
{
	char info[SV_KEY_MAX + 128], want[SV_KEY_MAX + 128];
	int up, fd;
	ssize_t n;

	if (!id || strlen(id) != 32)
		return -ENOENT;
	if (!rdx_hex_is(id, 32))
		return -ENOENT;
	up = upload_dir(k->s->root, id);
	if (up < 0)
		return -ENOENT;
	fd = openat(up, "key", O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	n = fd >= 0 ? rdx_pread_full(fd, info, sizeof(info) - 1, 0) : -1;
	if (fd >= 0)
		close(fd);
	snprintf(want, sizeof(want), "%s\n%s\n", k->bucket, k->key);
	if (n < 0 || (size_t)n != strlen(want) || memcmp(info, want, (size_t)n)) {
		close(up);
		return -ENOENT;
	}
	return up;
}

/* A completed upload stays as a record ("key" and "done") this long
 * after, so that a CompleteMultipartUpload whose answer was lost can be
 * answered again; the sweep removes it then. */
#define DONE_KEEP_SECS 3600

bool sv_upload_done(int up)
{
	return !faccessat(up, "done", F_OK, AT_SYMLINK_NOFOLLOW);
}

/* Takes the upload's lock (complete and abort, one at a time): 0, or
 * -ENOENT when it went meanwhile (aborted, or expired). */
static int upload_lock(int up)
{
	while (flock(up, LOCK_EX))
		if (errno != EINTR)
			return -errno;
	return faccessat(up, "key", F_OK, AT_SYMLINK_NOFOLLOW) ? -ENOENT : 0;
}

static int no_upload(struct call *k)
{
	return sv_fail(k, 404, "NoSuchUpload",
		    "The specified upload does not exist. The upload ID may be invalid, or the upload may have been aborted or completed.");
}

static int remove_upload(int root, const char *id)
{
	int up, u, ret;
	DIR *d;
	struct dirent *de;

	up = upload_dir(root, id);
	if (up < 0)
		return up;
	d = fdopendir(up);
	if (!d) {
		close(up);
		return -errno;
	}
	while ((de = readdir(d)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
			unlinkat(dirfd(d), de->d_name, 0);
	closedir(d);
	u = sv_uploads_fd(root, false);
	if (u < 0)
		return u;
	ret = unlinkat(u, id, AT_REMOVEDIR) ? -errno : 0;
	close(u);
	return ret;
}

/* Removes the incomplete multipart uploads begun more than
 * o->upload_expiry_days ago, as S3's AbortIncompleteMultipartUpload rule
 * does (an upload's "key" file is written when it begins), and the
 * records of those completed over DONE_KEEP_SECS ago.  At the start
 * nothing is in flight: the temporaries a killed server left in the
 * uploads that stay (parts written under a name, where the file system
 * has no O_TMPFILE) are removed too. */
void sv_sweep_uploads(struct server *s, bool at_start)
{
	time_t now = time(NULL), max_age = (time_t)s->o->upload_expiry_days * 86400;
	int u = sv_uploads_fd(s->root, false);
	DIR *d = u < 0 ? NULL : sv_opendir(u);
	unsigned expired = 0, temps = 0;
	struct dirent *de;

	while (d && (de = readdir(d))) {
		struct stat st;
		int up;

		if (strlen(de->d_name) != 32)
			continue;
		up = openat(u, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (up < 0)
			continue;
		if (!fstatat(up, "done", &st, AT_SYMLINK_NOFOLLOW)) {
			close(up);
			if (now - st.st_mtime > DONE_KEEP_SECS)
				remove_upload(s->root, de->d_name);
			continue;
		}
		if (max_age && (fstatat(up, "key", &st, AT_SYMLINK_NOFOLLOW) ||
				now - st.st_mtime > max_age)) {
			close(up);
			if (!remove_upload(s->root, de->d_name))
				expired++;
			continue;
		}
		if (at_start) {
			DIR *ud = fdopendir(up);
			struct dirent *pe;

			while (ud && (pe = readdir(ud)))
				if (sv_is_temp(pe->d_name) && !unlinkat(dirfd(ud), pe->d_name, 0))
					temps++;
			if (ud)
				closedir(ud);
			else
				close(up);
		} else {
			close(up);
		}
	}
	if (d)
		closedir(d);
	if (u >= 0)
		close(u);
	if (expired)
		rdx_info(1, "removed %u incomplete multipart upload%s begun over %u day%s ago",
			 expired, expired == 1 ? "" : "s", s->o->upload_expiry_days,
			 s->o->upload_expiry_days == 1 ? "" : "s");
	if (temps)
		rdx_info(1, "removed %u temporar%s left in uploads by an earlier run", temps,
			 temps == 1 ? "y" : "ies");
}

/* Removes the open uploads of bucket. */
void sv_drop_uploads(int root, const char *bucket)
{
	int u = sv_uploads_fd(root, false);
	DIR *d = u < 0 ? NULL : sv_opendir(u);
	size_t bl = strlen(bucket);
	struct dirent *de;

	while (d && (de = readdir(d))) {
		char info[80];
		ssize_t n;
		int up, f;

		if (strlen(de->d_name) != 32)
			continue;
		up = openat(u, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (up < 0)
			continue;
		f = openat(up, "key", O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
		n = f >= 0 ? rdx_pread_full(f, info, sizeof(info), 0) : -1;
		if (f >= 0)
			close(f);
		close(up);
		if (n > (ssize_t)bl && !memcmp(info, bucket, bl) && info[bl] == '\n')
			remove_upload(root, de->d_name);
	}
	if (d)
		closedir(d);
	if (u >= 0)
		close(u);
}

/* The checksum an upload was begun with (x-amz-checksum-algorithm and
 * -type), its "cksum" file: "ALG TYPE\n".  Every part gets one of that
 * algorithm (sent and checked, or computed), and the object the whole's:
 * COMPOSITE (the checksum of the parts' checksums) or FULL_OBJECT (of
 * all the bytes, for a CRC combined from the parts').  Reads it into
 * *alg (S3_CK_NONE: none) and *composite.  Returns 0 or -EIO. */
static int upload_cksum(int up, enum s3_ck *alg, bool *composite)
{
	char b[64], a[16], t[16];
	int fd = openat(up, "cksum", O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	ssize_t n;

	*alg = S3_CK_NONE;
	*composite = false;
	if (fd < 0)
		return errno == ENOENT ? 0 : -EIO;
	n = rdx_pread_full(fd, b, sizeof(b) - 1, 0);
	close(fd);
	if (n <= 0)
		return -EIO;
	b[n] = '\0';
	if (sscanf(b, "%15s %15s", a, t) != 2 || (*alg = s3_cksum_alg(a)) == S3_CK_NONE)
		return -EIO;
	*composite = !strcmp(t, "COMPOSITE");
	return 0;
}

/* CreateMultipartUpload's x-amz-checksum-algorithm and -type, as S3
 * takes them: COMPOSITE by default, but CRC64NVME is FULL_OBJECT only,
 * and a SHA cannot be FULL_OBJECT (its parts' do not combine).  Returns
 * 0, or 400 InvalidRequest was sent (1) or could not be (-EIO). */
static int upload_cksum_asked(struct call *k, enum s3_ck *alg, bool *composite)
{
	const char *type = sv_hdr(k->r, "x-amz-checksum-type");
	char msg[160];
	int ret;

	*composite = false;
	if ((ret = sv_checksum_asked(k, alg)))
		return ret;
	if (*alg == S3_CK_NONE && type)
		return sv_fail(k, 400, "InvalidRequest",
			       "The x-amz-checksum-type header can only be used with the x-amz-checksum-algorithm header.") ? -EIO : 1;
	if (*alg == S3_CK_NONE)
		return 0;
	if (type && strcasecmp(type, "COMPOSITE") && strcasecmp(type, "FULL_OBJECT"))
		return sv_fail(k, 400, "InvalidRequest", "Value for x-amz-checksum-type header is invalid.") ? -EIO : 1;
	*composite = type ? !strcasecmp(type, "COMPOSITE") : *alg != S3_CK_CRC64NVME;
	if (*composite ? *alg == S3_CK_CRC64NVME : !s3_cksum_is_crc(*alg)) {
		snprintf(msg, sizeof(msg), "The %s checksum type cannot be used with the %s checksum algorithm.",
			 *composite ? "COMPOSITE" : "FULL_OBJECT", s3_cksum_name(*alg));
		return sv_fail(k, 400, "InvalidRequest", msg) ? -EIO : 1;
	}
	return 0;
}

static int create_upload(struct call *k)
{
	unsigned char rnd[16];
	struct timespec now;
	uint64_t ns;
	char id[33];
	char *hdrs = NULL;
	struct sv_tags tags;
	struct s3_buf b;
	enum s3_ck alg;
	bool composite;
	int u, up, fd, ret;

	if ((ret = upload_cksum_asked(k, &alg, &composite)))
		return ret < 0 ? ret : 0;
	if (sv_object_headers(k->r, &hdrs))
		return sv_fail(k, 400, "MetadataTooLarge", "Your metadata headers exceed the maximum allowed metadata size");
	if ((ret = sv_tags_take(k, &tags))) {
		free(hdrs);
		return ret < 0 ? ret : 0;
	}
	sv_body_skip(k->c, k->r, 1 << 20);
	/* The time first, big-endian, then 64 random bits: the ids of one
	 * key sort as their uploads began, finer than a file's mtime tells
	 * (ListMultipartUploads). */
	clock_gettime(CLOCK_REALTIME, &now);
	ns = (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
	for (int i = 0; i < 8; i++)
		rnd[i] = (unsigned char)(ns >> (56 - 8 * i));
	if (getrandom(rnd + 8, 8, 0) != 8) {
		free(hdrs);
		return sv_fail_errno(k, -EIO);
	}
	rdx_hex_encode(rnd, 16, id);
	u = sv_uploads_fd(k->s->root, true);
	up = u < 0 ? u : mkdirat(u, id, 0700) ? -errno : upload_dir(k->s->root, id);
	if (u >= 0)
		close(u);
	if (up < 0) {
		free(hdrs);
		return sv_fail_errno(k, up == -ENOTDIR || up == -ELOOP ? -EIO : up);
	}
	s3_buf_init(&b, 0);
	s3_buf_printf(&b, "%s\n%s\n", k->bucket, k->key);
	fd = openat(up, "key", O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	ret = fd < 0 || rdx_write_full(fd, b.p, b.len, NULL) < 0 ? -EIO : 0;
	if (fd >= 0)
		close(fd);
	fd = ret ? -1 : openat(up, "headers", O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (!ret && (fd < 0 || (hdrs && rdx_write_full(fd, hdrs, strlen(hdrs), NULL) < 0)))
		ret = -EIO;
	if (fd >= 0)
		close(fd);
	/* The tags the object will have, as its xattr keeps them. */
	if (!ret && tags.n) {
		s3_buf_reset(&b);
		fd = openat(up, "tags", O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (fd < 0 || sv_tags_format(&tags, &b) || rdx_write_full(fd, b.p, b.len, NULL) < 0)
			ret = -EIO;
		if (fd >= 0)
			close(fd);
	}
	if (!ret && alg != S3_CK_NONE) {
		s3_buf_reset(&b);
		s3_buf_printf(&b, "%s %s\n", s3_cksum_name(alg), composite ? "COMPOSITE" : "FULL_OBJECT");
		fd = openat(up, "cksum", O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (fd < 0 || s3_buf_err(&b) || rdx_write_full(fd, b.p, b.len, NULL) < 0)
			ret = -EIO;
		if (fd >= 0)
			close(fd);
	}
	close(up);
	free(hdrs);
	if (ret) {
		remove_upload(k->s->root, id);
		s3_buf_release(&b);
		return sv_fail_errno(k, ret);
	}
	s3_buf_reset(&b);
	s3_buf_printf(&b, XML_HEAD "<InitiateMultipartUploadResult xmlns=\"" XMLNS "\"><Bucket>%s</Bucket><Key>",
		      k->bucket);
	sv_xml_esc(&b, k->key);
	s3_buf_printf(&b, "</Key><UploadId>%s</UploadId></InitiateMultipartUploadResult>", id);
	if (alg == S3_CK_NONE) {
		ret = sv_xml_answer(k, 200, &b);
	} else {
		struct s3_buf h;

		s3_buf_init(&h, 0);
		s3_buf_printf(&h, "Content-Type: application/xml\r\nx-amz-checksum-algorithm: %s\r\nx-amz-checksum-type: %s\r\n",
			      s3_cksum_name(alg), composite ? "COMPOSITE" : "FULL_OBJECT");
		ret = s3_buf_err(&b) || s3_buf_err(&h) ? -ENOMEM : sv_answer(k, 200, h.p, b.p, b.len);
		s3_buf_release(&h);
	}
	s3_buf_release(&b);
	return ret;
}

/* UploadPartCopy: the part is x-amz-copy-source's bytes, all of them or
 * x-amz-copy-source-range's.  0, or an answer was sent (1). */
static int copy_part(struct call *k, int out, unsigned char md5[16], struct s3_cksum *ck)
{
	const char *range = sv_hdr(k->r, "x-amz-copy-source-range");
	struct sv_meta sm;
	uint64_t from = 0, to = 0;
	int sfd, ret;
	bool self;

	if ((ret = sv_copy_source_open(k, &sfd, &sm, &self)))
		return ret;
	sv_meta_release(&sm); /* its headers; etag and size stay */
	if (range) {
		unsigned long long a, b;
		const char *dash = strchr(range, '-');
		char tail, msg[96];

		if (strncmp(range, "bytes=", 6) || range[6] < '0' || range[6] > '9' || !dash ||
		    dash[1] < '0' || dash[1] > '9' ||
		    sscanf(range, "bytes=%llu-%llu%c", &a, &b, &tail) != 2) {
			close(sfd);
			return sv_fail(k, 400, "InvalidArgument", "The x-amz-copy-source-range value must be of the form bytes=first-last where first and last are the zero-based offsets of the first and last bytes to copy") ? -EIO : 1;
		}
		/* Past the source's end: S3's InvalidArgument, not a GET's
		 * 416 InvalidRange. */
		if (b < a || b >= sm.size) {
			close(sfd);
			snprintf(msg, sizeof(msg), "Range specified is not valid for source object of size: %" PRIu64, sm.size);
			return sv_fail(k, 400, "InvalidArgument", msg) ? -EIO : 1;
		}
		from = a;
		to = b + 1;
	} else {
		to = sm.size;
	}
	if (to - from > SV_PUT_MAX) {
		close(sfd);
		return sv_fail(k, 400, "EntityTooLarge", "Your proposed upload exceeds the maximum allowed size") ? -EIO : 1;
	}
	sv_body_skip(k->c, k->r, 1 << 20);
	ret = sv_copy_range(sfd, from, to - from, out, md5, ck);
	close(sfd);
	if (ret)
		return sv_fail_errno(k, ret) ? -EIO : 1;
	return 0;
}

static int upload_part(struct call *k, const char *id, const char *pn)
{
	char name[16], *end;
	unsigned long n = pn ? strtoul(pn, &end, 10) : 0;
	struct sv_meta m = { 0 };
	unsigned char md5[16];
	struct sv_put p = { .dir = -1, .fd = -1 };
	struct s3_buf h;
	struct s3_cksum ck = { 0 };
	uint64_t size;
	bool composite, copy = sv_hdr(k->r, "x-amz-copy-source");
	int up, ret;

	if (!pn || *end || !n || n > SV_PARTS_MAX)
		return sv_fail(k, 400, "InvalidArgument", "Part number must be an integer between 1 and 10000, inclusive");
	up = upload_open(k, id);
	if (up >= 0 && sv_upload_done(up)) {
		close(up);
		up = -ENOENT;
	}
	if (up < 0)
		return no_upload(k);
	ret = upload_cksum(up, &k->want_ck, &composite);
	snprintf(name, sizeof(name), "%05lu", n);
	if (!ret)
		ret = sv_put_begin_at(up, name, &p);
	else
		close(up);
	if (!ret && copy && k->want_ck != S3_CK_NONE && s3_cksum_init(&ck, k->want_ck))
		ret = -ENOMEM;
	if (ret) {
		sv_put_abort(&p);
		return sv_fail_errno(k, ret);
	}
	if (copy)
		ret = copy_part(k, p.fd, md5, k->want_ck != S3_CK_NONE ? &ck : NULL);
	else
		ret = sv_take_body(k, p.fd, SV_PUT_MAX, md5, &size);
	if (ret) {
		s3_cksum_release(&ck);
		sv_put_abort(&p);
		return ret < 0 ? ret : 0;
	}
	if (copy && k->want_ck != S3_CK_NONE) {
		k->sum_ck = k->want_ck;
		s3_cksum_final(&ck, k->sum);
	}
	rdx_hex_encode(md5, 16, m.etag);
	/* The part's checksum, for Complete: kept with it as an object's. */
	m.ck = k->sum_ck;
	memcpy(m.ck_sum, k->sum, sizeof(m.ck_sum));
	ret = sv_meta_set(p.fd, &m);
	if (ret == -ENOTSUP && k->want_ck == S3_CK_NONE)
		ret = 0;
	else if (ret == -ENOTSUP) {
		sv_put_abort(&p);
		return sv_fail(k, 501, "NotImplemented",
			       "the served directory's file system keeps no extended attributes, so a part's checksum (x-amz-checksum-algorithm) cannot be kept");
	}
	if (!ret)
		ret = sv_put_commit(&p, 0600);
	else
		sv_put_abort(&p);
	if (ret)
		return sv_fail_errno(k, ret);
	s3_buf_init(&h, 0);
	if (copy) {
		char date[40];

		sv_iso_date(time(NULL), date);
		s3_buf_printf(&h, XML_HEAD "<CopyPartResult xmlns=\"" XMLNS "\"><LastModified>%s</LastModified>"
				  "<ETag>&quot;%s&quot;</ETag>", date, m.etag);
		if (k->sum_ck != S3_CK_NONE) {
			char b64[48];

			s3_cksum_b64(k->sum, s3_cksum_len(k->sum_ck), b64);
			s3_buf_printf(&h, "<Checksum%s>%s</Checksum%s>", s3_cksum_name(k->sum_ck), b64,
				      s3_cksum_name(k->sum_ck));
		}
		s3_buf_printf(&h, "</CopyPartResult>");
		ret = sv_xml_answer(k, 200, &h);
	} else {
		sv_add_etag(&h, m.etag);
		sv_add_checksum(&h, k);
		sv_rdma_headers(k, &h);
		ret = s3_buf_err(&h) ? -ENOMEM : sv_answer(k, 200, h.p, NULL, 0);
	}
	s3_buf_release(&h);
	return ret;
}

/* What a step returns once it answered the request itself (sent: the
 * answer's 0 or -errno): 1, or the connection's -errno. */
static int answered(int sent)
{
	return sent < 0 ? sent : 1;
}

/* The object CompleteMultipartUpload is assembling: its parts appended in
 * order to out, their MD5s into all (the multipart ETag). */
struct assembly {
	int up;		 /* the upload's directory */
	int out;	 /* the object, written at off */
	uint64_t off;
	uint64_t first;	 /* the first part's size */
	bool equal;	 /* every part but the last of the first's size */
	size_t n;	 /* parts in all */
	EVP_MD_CTX *all; /* MD5 of the parts' MD5s */
	enum s3_ck ck;	 /* the upload's checksum (S3_CK_NONE: none): */
	bool composite;
	struct s3_cksum comp; /* COMPOSITE: of the parts' checksums */
	uint64_t crc;	 /* FULL_OBJECT: the CRC of the parts so far */
	struct sv_part_info *info; /* each part's size and checksum, kept */
};

static uint64_t be_value(const unsigned char *d, size_t n)
{
	uint64_t v = 0;

	for (size_t i = 0; i < n; i++)
		v = v << 8 | d[i];
	return v;
}

/* Part e's checksum, if the Complete request lists one, against the one
 * kept with it (pm).  0, or an answer was sent (1) or could not be. */
static int part_cksum_ok(struct call *k, const struct s3_entry *e, const struct sv_meta *pm)
{
	unsigned char d[S3_CK_MAX];
	enum s3_ck alg;

	if (!e->etag)
		return 0;
	alg = s3_cksum_alg(e->mtime);
	if (alg == pm->ck && !s3_cksum_unb64(e->etag, alg, d) &&
	    !memcmp(d, pm->ck_sum, s3_cksum_len(alg)))
		return 0;
	return answered(sv_fail(k, 400, "InvalidPart",
				"One or more of the specified parts could not be found. The part may not have been uploaded, or the specified checksum may not have matched the part's checksum."));
}

/* The headers kept when the upload began (Content-Type, x-amz-meta-*),
 * as a new string, or NULL. */
static char *upload_headers(int up)
{
	char hb[SV_HEADERS_MAX + 1];
	int hfd = openat(up, "headers", O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	ssize_t hn;

	if (hfd < 0)
		return NULL;
	hn = rdx_pread_full(hfd, hb, sizeof(hb) - 1, 0);
	close(hfd);
	if (hn <= 0)
		return NULL;
	hb[hn] = '\0';
	return strdup(hb);
}

/* Copies len bytes of the part fd to out at off, in the kernel.  Returns
 * 0 or -errno. */
static int append_data(int fd, int out, uint64_t off, uint64_t len)
{
	loff_t in = 0, o = (loff_t)off;

	while (len) {
		ssize_t c = copy_file_range(fd, &in, out, &o,
					    len > (1u << 30) ? 1u << 30 : (size_t)len, 0);

		if (c <= 0)
			return c < 0 ? -errno : -EIO;
		len -= (uint64_t)c;
	}
	return 0;
}

/* Appends part i (e: its number as size, its ETag as name), checked to
 * be the part uploaded under that ETag and, but for the last, at least
 * SV_PART_MIN.  Returns 0, or an answer was sent (1) or could not be
 * (-errno). */
static int append_part(struct call *k, struct assembly *a, size_t i, const struct s3_entry *e)
{
	char name[16], want[48];
	size_t el = strlen(e->name);
	struct sv_meta pm;
	unsigned char bin[16];
	int fd, ret;

	if (el >= 2 && e->name[0] == '"' && e->name[el - 1] == '"')
		snprintf(want, sizeof(want), "%.*s", (int)(el - 2), e->name + 1);
	else
		snprintf(want, sizeof(want), "%s", e->name);
	snprintf(name, sizeof(name), "%05" PRIu64, e->size);
	fd = openat(a->up, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 || sv_meta_get(fd, &pm) || strcmp(pm.etag, want)) {
		if (fd >= 0) {
			sv_meta_release(&pm);
			close(fd);
		}
		return answered(sv_fail(k, 400, "InvalidPart",
			       "One or more of the specified parts could not be found. The part may not have been uploaded, or the specified entity tag may not have matched the part's entity tag."));
	}
	sv_meta_release(&pm);
	if ((ret = part_cksum_ok(k, e, &pm))) {
		close(fd);
		return ret;
	}
	if (a->ck != S3_CK_NONE && pm.ck != a->ck) { /* cannot be, but for another hand */
		close(fd);
		return answered(sv_fail(k, 400, "InvalidPart", "A part of this upload has no checksum of its algorithm."));
	}
	if (i + 1 < a->n && pm.size < SV_PART_MIN) {
		close(fd);
		return answered(sv_fail(k, 400, "EntityTooSmall",
			       "Your proposed upload is smaller than the minimum allowed object size."));
	}
	if (!i)
		a->first = pm.size;
	else if (i + 1 < a->n ? pm.size != a->first : pm.size > a->first)
		a->equal = false;
	rdx_hex_decode(want, 16, bin); /* checked by etag_ok */
	EVP_DigestUpdate(a->all, bin, 16);
	a->info[i].size = pm.size;
	if (a->ck != S3_CK_NONE) {
		size_t cl = s3_cksum_len(a->ck);

		memcpy(a->info[i].sum, pm.ck_sum, cl);
		if (a->composite)
			s3_cksum_update(&a->comp, pm.ck_sum, cl);
		else
			a->crc = i ? s3_crc_combine(a->ck, a->crc, be_value(pm.ck_sum, cl), pm.size)
				   : be_value(pm.ck_sum, cl);
	}
	ret = append_data(fd, a->out, a->off, pm.size);
	close(fd);
	if (ret)
		return answered(sv_fail_errno(k, ret));
	a->off += pm.size;
	return 0;
}

/* CompleteMultipartUploadResult for the object m describes. */
static int answer_complete(struct call *k, const struct sv_meta *m)
{
	struct s3_buf b;
	int ret;

	s3_buf_init(&b, 0);
	s3_buf_printf(&b, XML_HEAD "<CompleteMultipartUploadResult xmlns=\"" XMLNS "\"><Location>/%s/",
		      k->bucket);
	sv_xml_esc(&b, k->key);
	s3_buf_printf(&b, "</Location><Bucket>%s</Bucket><Key>", k->bucket);
	sv_xml_esc(&b, k->key);
	s3_buf_printf(&b, "</Key><ETag>&quot;%s&quot;</ETag>", m->etag);
	sv_checksum_xml(&b, m);
	s3_buf_printf(&b, "</CompleteMultipartUploadResult>");
	ret = sv_xml_answer(k, 200, &b);
	s3_buf_release(&b);
	return ret;
}

/* The parts a Complete request lists as the "done" record keeps them:
 * "NUMBER ETAG\n" each, the ETag without its quotes. */
static int parts_text(const struct s3_list *parts, struct s3_buf *b)
{
	for (size_t i = 0; i < parts->n; i++) {
		const char *e = parts->v[i].name;
		size_t el = strlen(e);

		if (el >= 2 && e[0] == '"' && e[el - 1] == '"')
			e++, el -= 2;
		s3_buf_printf(b, "%" PRIu64 " ", parts->v[i].size);
		s3_buf_add(b, e, el);
		s3_buf_addc(b, '\n');
	}
	return s3_buf_err(b);
}

static int64_t mtime_ns(const struct stat *st)
{
	return (int64_t)st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec;
}

/* Records in up that the upload made the object st (its ETag etag) of
 * the parts listed: "rds3 done 1\netag E\nobject INODE MTIME_NS\n\n"
 * then parts_text's lines.  Returns 0 or -errno. */
static int write_done(int up, const char *etag, const struct stat *st, const struct s3_buf *parts)
{
	struct sv_put p;
	char head[128];
	int d = fcntl(up, F_DUPFD_CLOEXEC, 0), n, ret;

	if (d < 0)
		return -errno;
	n = snprintf(head, sizeof(head), "rds3 done 1\netag %s\nobject %llu %lld\n\n", etag,
		     (unsigned long long)st->st_ino, (long long)mtime_ns(st));
	ret = sv_put_begin_at(d, "done", &p);
	if (!ret && (rdx_pwrite_full(p.fd, head, (size_t)n, 0) < 0 ||
		     rdx_pwrite_full(p.fd, parts->p, parts->len, n) < 0))
		ret = -errno;
	if (ret) {
		sv_put_abort(&p);
		return ret;
	}
	return sv_put_commit(&p, 0600);
}

/* Removes what a completed upload no longer needs: all but "key",
 * "done" and "cksum" (a repeated Complete's checksum is checked as the
 * first's was). */
static void drop_parts(int up)
{
	DIR *d = sv_opendir(up);
	struct dirent *de;

	if (!d)
		return;
	while ((de = readdir(d)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..") &&
		    strcmp(de->d_name, "key") && strcmp(de->d_name, "done") &&
		    strcmp(de->d_name, "cksum"))
			unlinkat(dirfd(d), de->d_name, 0);
	closedir(d);
}

/* A Complete of an upload already completed (a client whose answer was
 * lost asks again): S3's first answer again when it lists the same parts
 * and the key still holds the object they made, else NoSuchUpload.  The
 * request's conditions held when the object was made. */
static int complete_again(struct call *k, int bfd, int up, const struct s3_buf *want)
{
	unsigned long long ino;
	long long mt;
	char etag[48];
	struct sv_meta m = { 0 };
	struct stat st;
	char *rec = NULL;
	ssize_t got = -1;
	int fd, used = 0;
	bool same = false;

	fd = openat(up, "done", O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd >= 0 && !fstat(fd, &st) && st.st_size > 0 && st.st_size <= 128 + (off_t)want->len &&
	    (rec = malloc((size_t)st.st_size + 1)))
		got = rdx_pread_full(fd, rec, (size_t)st.st_size, 0);
	if (fd >= 0)
		close(fd);
	if (got > 0) {
		rec[got] = '\0';
		same = sscanf(rec, "rds3 done 1\netag %47s\nobject %llu %lld\n\n%n", etag, &ino, &mt,
			      &used) == 3 && used && (size_t)(got - used) == want->len &&
		       !memcmp(rec + used, want->p, want->len);
	}
	free(rec);
	fd = same ? sv_object_open(bfd, k->key) : -1;
	same = fd >= 0 && !fstat(fd, &st) && !sv_meta_get(fd, &m) && st.st_ino == ino &&
	       mtime_ns(&st) == mt && !strcmp(m.etag, etag);
	if (fd >= 0)
		close(fd);
	fd = same ? answer_complete(k, &m) : no_upload(k);
	sv_meta_release(&m);
	return fd;
}

/* The tags the upload began with (none: t->n 0).  Returns 0 or -errno. */
static int upload_tags(int up, struct sv_tags *t)
{
	char b[SV_TAGS_MAX * (sizeof(t->v[0].key) + sizeof(t->v[0].value)) + 1];
	int fd = openat(up, "tags", O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	ssize_t n;

	t->n = 0;
	if (fd < 0)
		return errno == ENOENT ? 0 : -errno;
	n = rdx_pread_full(fd, b, sizeof(b), 0);
	close(fd);
	if (n < 0)
		return (int)n;
	return sv_tags_parse(b, (size_t)n, t) ? -EIO : 0;
}

/* The x-amz-checksum-* header of a Complete request (the whole object's,
 * as the client computed it) and x-amz-checksum-type, against the
 * upload's algorithm: 0 to go on, else an answer was sent (1) or could
 * not be (-EIO).  Without an algorithm there are no part checksums to
 * check a value against. */
static int complete_cksum_asked(struct call *k, const struct assembly *a, const struct sv_hdr **ckh)
{
	const char *type = sv_hdr(k->r, "x-amz-checksum-type");
	enum s3_ck alg;
	char msg[160];
	int ret;

	if ((ret = sv_checksum_header(k, ckh, &alg)))
		return ret;
	if (*ckh && a->ck == S3_CK_NONE)
		return sv_fail(k, 501, "NotImplemented",
			       "rds3 serve checks a CompleteMultipartUpload's x-amz-checksum-* only for an upload begun with x-amz-checksum-algorithm") ? -EIO : 1;
	if (*ckh && alg != a->ck) {
		snprintf(msg, sizeof(msg), "Checksum Type mismatch occurred, expected checksum Type: %s, actual checksum Type: %s",
			 s3_cksum_name(a->ck), s3_cksum_name(alg));
		return sv_fail(k, 400, "InvalidRequest", msg) ? -EIO : 1;
	}
	if (type && (a->ck == S3_CK_NONE ||
		     strcasecmp(type, a->composite ? "COMPOSITE" : "FULL_OBJECT")))
		return sv_fail(k, 400, "InvalidRequest",
			       "The x-amz-checksum-type header does not match the checksum type the upload was begun with.") ? -EIO : 1;
	return 0;
}

/* The whole object's checksum, made of its parts', into m; checked
 * against the request's header ckh, if any.  0, or 400 BadDigest was
 * sent (1) or could not be (-EIO). */
static int complete_cksum(struct call *k, struct assembly *a, struct sv_meta *m,
			  const struct sv_hdr *ckh)
{
	size_t cl = s3_cksum_len(a->ck);
	char v[64], b64[48];

	if (a->ck == S3_CK_NONE)
		return 0;
	m->ck = a->ck;
	m->ck_composite = a->composite;
	if (a->composite) {
		s3_cksum_final(&a->comp, m->ck_sum);
	} else {
		for (size_t b = 0; b < cl; b++)
			m->ck_sum[b] = (unsigned char)(a->crc >> (8 * (cl - 1 - b)));
	}
	if (!ckh)
		return 0;
	/* "BASE64-N" as S3 gives a COMPOSITE value, or the digest alone. */
	sv_checksum_text(m, v);
	s3_cksum_b64(m->ck_sum, cl, b64);
	if (!strcmp(ckh->value, v) || !strcmp(ckh->value, b64))
		return 0;
	snprintf(v, sizeof(v), "The %s you specified did not match the calculated checksum.",
		 s3_cksum_name(a->ck));
	return sv_fail(k, 400, "BadDigest", v) ? -EIO : 1;
}

/* CompleteMultipartUpload: the parts the request names, checked, become
 * the object, with S3's multipart ETag (the MD5 of the parts' MD5s, "-",
 * their count), under the request's If-Match or If-None-Match; then the
 * upload becomes a record of that, for a repeated request. */
static int complete_upload(struct call *k, int bfd, const char *id)
{
	struct s3_list parts = { 0 };
	struct assembly a = { .equal = true };
	struct sv_meta m = { 0 };
	struct sv_put p = { .dir = -1, .fd = -1 };
	struct sv_tags tags;
	struct sv_wcond w;
	struct s3_buf pt;
	struct stat st;
	const struct sv_hdr *ckh = NULL;
	char *xml = NULL;
	unsigned char md[16];
	size_t n, i;
	int ret;

	/* One Complete or Abort of an upload at a time: a repeat waits for
	 * the first, then finds its record. */
	a.up = upload_open(k, id);
	if (a.up >= 0 && upload_lock(a.up)) {
		close(a.up);
		a.up = -1;
	}
	if (a.up < 0)
		return no_upload(k);
	s3_buf_init(&pt, 0);
	if ((ret = sv_take_xml(k, false, &xml, &n))) {
		close(a.up);
		return ret < 0 ? ret : 0;
	}
	ret = s3_xml_complete_request(xml, n, &parts);
	free(xml);
	if (!ret && (upload_cksum(a.up, &a.ck, &a.composite) ||
		     (a.ck != S3_CK_NONE && a.composite && s3_cksum_init(&a.comp, a.ck)))) {
		ret = sv_fail_errno(k, -EIO);
		goto out;
	}
	if (!ret && (ret = complete_cksum_asked(k, &a, &ckh))) {
		ret = ret > 0 ? 0 : ret;
		goto out;
	}
	if (ret || !parts.n || parts.n > SV_PARTS_MAX) {
		ret = sv_fail(k, 400, "MalformedXML",
			   "The XML you provided was not well-formed or did not validate against our published schema");
		goto out;
	}
	for (i = 1; i < parts.n; i++)
		if (parts.v[i].size <= parts.v[i - 1].size) {
			ret = sv_fail(k, 400, "InvalidPartOrder", "The list of parts was not in ascending order. The parts list must be specified in order by part number.");
			goto out;
		}
	if (parts_text(&parts, &pt)) {
		ret = -ENOMEM;
		goto out;
	}
	if (sv_upload_done(a.up)) {
		ret = complete_again(k, bfd, a.up, &pt);
		goto out;
	}
	if ((ret = sv_wcond_take(k, bfd, &w))) {
		ret = ret > 0 ? 0 : ret;
		goto out;
	}
	m.headers = upload_headers(a.up);
	ret = upload_tags(a.up, &tags);
	if (!ret)
		ret = sv_put_begin(bfd, k->key, &p);
	if (ret) {
		ret = sv_fail_errno(k, ret);
		goto out;
	}
	a.out = p.fd;
	a.n = parts.n;
	a.all = EVP_MD_CTX_new();
	a.info = calloc(parts.n, sizeof(*a.info));
	if (!a.all || !a.info || !EVP_DigestInit_ex(a.all, EVP_md5(), NULL)) {
		ret = sv_fail_errno(k, -ENOMEM);
		goto out;
	}
	for (i = 0; i < parts.n; i++) {
		ret = append_part(k, &a, i, &parts.v[i]);
		if (ret) { /* answered (1), or the connection is gone */
			ret = ret > 0 ? 0 : ret;
			goto out;
		}
	}
	EVP_DigestFinal_ex(a.all, md, NULL);
	rdx_hex_encode(md, 16, m.etag);
	snprintf(m.etag + 32, sizeof(m.etag) - 32, "-%zu", parts.n);
	m.parts = (unsigned)parts.n;
	m.part_size = a.equal ? a.first : 0;
	if ((ret = complete_cksum(k, &a, &m, ckh))) {
		ret = ret > 0 ? 0 : ret;
		goto out;
	}
	ret = sv_meta_set(p.fd, &m);
	if (ret == -ENOTSUP && !m.headers)
		ret = 0;
	if (!ret && tags.n && (ret = sv_tags_set(p.fd, &tags))) {
		ret = sv_tags_fail(k, ret);
		goto out;
	}
	/* The parts' sizes and checksums, for GetObjectAttributes and a GET
	 * of one part, where the file system holds that many bytes after the
	 * record and the tags (ext4: some 4 KB in all); without them the
	 * object is whole, and those answers say less (docs/S3.md). */
	if (!ret)
		sv_parts_set(p.fd, &m, a.info);
	if (!ret && fstat(p.fd, &st))
		ret = -errno;
	sv_wcond_arm(&w, &p);
	if (!ret)
		ret = sv_put_commit(&p, k->s->file_mode);
	if (ret) {
		ret = sv_commit_fail(k, ret == -ENOTSUP ? -EIO : ret);
		goto out;
	}
	/* Without its record a repeat is NoSuchUpload, as before. */
	if (write_done(a.up, m.etag, &st, &pt))
		remove_upload(k->s->root, id);
	else
		drop_parts(a.up);
	ret = answer_complete(k, &m);
out:
	sv_put_abort(&p);
	EVP_MD_CTX_free(a.all);
	s3_cksum_release(&a.comp);
	free(a.info);
	s3_list_release(&parts);
	s3_buf_release(&pt);
	sv_meta_release(&m);
	close(a.up);
	return ret;
}

/* Whether every query parameter is one this server acts on for the
 * method: a sub-resource it does not keep (?acl, ?retention, ...) must
 * not read or replace the object as if it were absent.  Returns 0 to go
 * on; else an answer was sent (1) or -errno.  ?tagging (GET, PUT,
 * DELETE) is the object's tags, answered here (serve_tagging.c), and
 * ?attributes (GET) GetObjectAttributes (serve_attributes.c). */
static int object_query_ok(struct call *k)
{
	const char *m = k->r->method;
	bool get = !strcmp(m, "GET") || !strcmp(m, "HEAD");
	bool tagging = false, attributes = false, other = false;
	size_t i;

	for (i = 0; i < k->r->nquery; i++) {
		const char *n = k->r->query[i].name;

		if (!strncmp(n, "X-Amz-", 6) || !strcmp(n, "x-id"))
			continue;
		if ((get && (!strcmp(n, "partNumber") || !strncmp(n, "response-", 9))) ||
		    (!strcmp(m, "PUT") && (!strcmp(n, "partNumber") || !strcmp(n, "uploadId"))) ||
		    (!strcmp(m, "DELETE") && !strcmp(n, "uploadId")) ||
		    (!strcmp(m, "POST") && (!strcmp(n, "uploads") || !strcmp(n, "uploadId"))) ||
		    (get && !strcmp(n, "uploadId")) ||
		    (get && sv_query(k->r, "uploadId", NULL) &&
		     (!strcmp(n, "max-parts") || !strcmp(n, "part-number-marker")))) {
			other = true;
			continue;
		}
		if (!strcmp(n, "versionId") && k->r->query[i].value &&
		    !strcmp(k->r->query[i].value, "null"))
			continue; /* the one version an unversioned bucket has */
		if (!strcmp(n, "tagging") && strcmp(m, "HEAD") && strcmp(m, "POST")) {
			tagging = true;
			continue;
		}
		if (!strcmp(n, "attributes") && !strcmp(m, "GET")) {
			attributes = true;
			continue;
		}
		break;
	}
	if (i == k->r->nquery && attributes && !tagging && !other) {
		int ret = sv_object_attributes(k);

		return ret < 0 ? ret : 1;
	}
	if (i == k->r->nquery && tagging && !other) {
		int ret = sv_object_tagging(k);

		return ret < 0 ? ret : 1;
	}
	if (i == k->r->nquery && !tagging && !attributes)
		return 0;
	return sv_fail(k, 501, "NotImplemented",
		       "rds3 serve does not implement this sub-resource or parameter") ? -EIO : 1;
}

int sv_object_op(struct call *k)
{
	const char *m = k->r->method, *id = NULL, *pn = NULL;
	int bfd, ret;

	if ((ret = sv_key_ok(k->key)))
		return ret == -ENAMETOOLONG
			       ? sv_fail(k, 400, "KeyTooLongError", "Your key is too long")
			       : sv_fail(k, 400, "InvalidArgument",
				      "rds3 serve keeps keys as file paths: no empty, '.' or '..' component, none over 255 bytes, no control characters");
	if ((ret = object_query_ok(k)))
		return ret > 0 ? 0 : ret;
	if ((ret = sv_bucket_fd(k, &bfd)) || bfd < 0)
		return ret;
	sv_query(k->r, "uploadId", &id);
	sv_query(k->r, "partNumber", &pn);
	/* Only the requests that move an object's bytes take a token. */
	if ((!strcmp(m, "GET") || (!strcmp(m, "PUT") && !sv_hdr(k->r, "x-amz-copy-source"))) &&
	    (ret = sv_rdma_take(k))) {
		close(bfd);
		return ret > 0 ? 0 : ret;
	}
	if (!strcmp(m, "GET") || !strcmp(m, "HEAD"))
		ret = sv_query(k->r, "uploadId", NULL) ? sv_list_parts(k, id) : sv_get_object(k, bfd);
	else if (!strcmp(m, "PUT") && sv_query(k->r, "uploadId", NULL))
		ret = upload_part(k, id, pn);
	else if (!strcmp(m, "PUT") && sv_hdr(k->r, "x-amz-copy-source"))
		ret = sv_copy_object(k, bfd);
	else if (!strcmp(m, "PUT"))
		ret = sv_put_object(k, bfd);
	else if (!strcmp(m, "DELETE") && sv_query(k->r, "uploadId", NULL)) {
		int up = upload_open(k, id);

		/* Not under a Complete's feet; a completed one is gone. */
		if (up < 0 || upload_lock(up) || sv_upload_done(up)) {
			ret = no_upload(k);
		} else {
			remove_upload(k->s->root, id);
			ret = sv_answer(k, 204, NULL, NULL, 0);
		}
		if (up >= 0)
			close(up);
	} else if (!strcmp(m, "DELETE")) {
		/* If-Match: a delete only of the object as the client saw it. */
		struct sv_wcond w = { .match = sv_hdr(k->r, "If-Match") };

		if (sv_hdr(k->r, "If-None-Match") || sv_hdr(k->r, "If-Modified-Since") ||
		    sv_hdr(k->r, "If-Unmodified-Since"))
			ret = sv_fail(k, 501, "NotImplemented",
				      "rds3 serve takes If-Match on DeleteObject, no other condition");
		else if ((ret = sv_object_delete(bfd, k->key, w.match ? sv_match_check : NULL, &w)))
			ret = sv_commit_fail(k, ret);
		else
			ret = sv_answer(k, 204, NULL, NULL, 0);
	} else if (!strcmp(m, "POST") && sv_query(k->r, "uploads", NULL))
		ret = create_upload(k);
	else if (!strcmp(m, "POST") && sv_query(k->r, "uploadId", NULL))
		ret = complete_upload(k, bfd, id);
	else
		ret = sv_fail(k, 405, "MethodNotAllowed", "The specified method is not allowed against this resource.");
	sv_rdma_drop(k);
	close(bfd);
	return ret;
}
