/* rds3 serve: ListMultipartUploads, paged as S3 pages it.  The open
 * uploads of a bucket come in key order, and those of one key in the
 * order they began.  A page starts after key-marker (and, for that key,
 * after upload-id-marker), keeps to prefix, rolls keys up at delimiter
 * into common prefixes, and holds at most max-uploads entries.  Memory is
 * bounded by max-uploads, not by the uploads kept: one pass over
 * DIR/.rds3-uploads keeps the first max-uploads + 1 entries in order. */
#include "s3/serve/serve_ops.h"

#include "core/hex.h"
#include "core/io.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_UPLOADS 1000

struct up_item {
	char *key;	 /* the key, or a common prefix */
	bool is_prefix;
	int64_t init_ns; /* when the upload began (its "key" file's mtime) */
	char id[33];
};

/* Where a page starts and what it keeps. */
struct up_args {
	const char *prefix, *delim; /* delim NULL: none */
	const char *key_marker;	    /* NULL: from the first */
	bool has_id_marker;	    /* upload-id-marker named an upload of key_marker */
	int64_t id_init_ns;
	const char *id_marker;
	size_t max;
};

/* The first max + 1 entries, in order. */
struct up_page {
	struct up_item *v;
	size_t n, cap;
};

static int64_t ts_ns(const struct timespec *t)
{
	return (int64_t)t->tv_sec * 1000000000 + t->tv_nsec;
}

static int item_cmp(const struct up_item *a, const struct up_item *b)
{
	int c = strcmp(a->key, b->key);

	if (c || a->is_prefix || b->is_prefix)
		return c;
	if (a->init_ns != b->init_ns)
		return a->init_ns < b->init_ns ? -1 : 1;
	return strcmp(a->id, b->id);
}

/* Reads upload id's "BUCKET\nKEY\n" and when it began.  Returns the key
 * (malloc'ed) when the upload is of bucket and open (not the record of
 * one completed), else NULL. */
static char *upload_key(int u, const char *id, const char *bucket, int64_t *init_ns)
{
	char info[SV_KEY_MAX + 128];
	size_t bl = strlen(bucket);
	struct stat st;
	ssize_t n = -1;
	int up, f;

	up = openat(u, id, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (up < 0)
		return NULL;
	f = sv_upload_done(up) ? -1 : openat(up, "key", O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	close(up);
	if (f < 0)
		return NULL;
	if (!fstat(f, &st))
		n = rdx_pread_full(f, info, sizeof(info) - 1, 0);
	close(f);
	if (n < (ssize_t)bl + 3 || memcmp(info, bucket, bl) || info[bl] != '\n' ||
	    info[n - 1] != '\n')
		return NULL;
	info[n - 1] = '\0';
	*init_ns = ts_ns(&st.st_mtim);
	return strdup(info + bl + 1);
}

/* Whether the upload (key, init_ns, id) comes after the page's markers. */
static bool after_markers(const struct up_args *a, const char *key, int64_t init_ns,
			  const char *id)
{
	int c;

	if (!a->key_marker)
		return true;
	c = strcmp(key, a->key_marker);
	if (c || !a->has_id_marker)
		return c > 0;
	if (init_ns != a->id_init_ns)
		return init_ns > a->id_init_ns;
	return strcmp(id, a->id_marker) > 0;
}

/* Puts it in its place on the page, or drops it when max + 1 come before
 * it.  Takes key.  Returns 0 or -ENOMEM. */
static int page_add(struct up_page *p, struct up_item *it)
{
	size_t i = p->n;

	while (i > 0 && item_cmp(it, &p->v[i - 1]) < 0)
		i--;
	if ((i > 0 && it->is_prefix && !item_cmp(it, &p->v[i - 1])) || i == p->cap) {
		free(it->key); /* a prefix given already, or past the page */
		return 0;
	}
	if (p->n == p->cap)
		free(p->v[--p->n].key);
	memmove(&p->v[i + 1], &p->v[i], (p->n - i) * sizeof(p->v[0]));
	p->v[i] = *it;
	p->n++;
	return 0;
}

/* One upload (its key taken) as the page sees it: outside the prefix or
 * before the markers it is dropped, under a delimiter it becomes its
 * common prefix. */
static int consider(struct up_page *p, const struct up_args *a, char *key,
		    int64_t init_ns, const char *id)
{
	struct up_item it = { .key = key, .init_ns = init_ns };
	size_t pl = strlen(a->prefix);
	const char *d;

	if (strncmp(key, a->prefix, pl) || !after_markers(a, key, init_ns, id)) {
		free(key);
		return 0;
	}
	memcpy(it.id, id, 32); /* the caller checked: 32 hex digits */
	it.id[32] = '\0';
	d = a->delim ? strstr(key + pl, a->delim) : NULL;
	if (d) {
		key[d - key + strlen(a->delim)] = '\0';
		/* The prefix a page ended on is passed over whole. */
		if (a->key_marker && strcmp(key, a->key_marker) <= 0) {
			free(key);
			return 0;
		}
		it.is_prefix = true;
		it.id[0] = '\0';
	}
	return page_add(p, &it);
}

/* The page: every upload of the bucket considered. */
static int collect(struct call *k, const struct up_args *a, struct up_page *p)
{
	int u = sv_uploads_fd(k->s->root, false), ret = 0;
	struct dirent *de;
	DIR *d;

	if (u == -ENOENT)
		return 0;
	if (u < 0)
		return u;
	d = sv_opendir(u);
	if (!d) {
		ret = -errno;
		close(u);
		return ret;
	}
	while (!ret && (de = readdir(d))) {
		int64_t init_ns;
		char *key;

		if (strlen(de->d_name) != 32 || !rdx_hex_is(de->d_name, 32))
			continue;
		key = upload_key(dirfd(d), de->d_name, k->bucket, &init_ns);
		if (key)
			ret = consider(p, a, key, init_ns, de->d_name);
	}
	closedir(d);
	close(u);
	return ret;
}

int sv_list_uploads(struct call *k)
{
	const char *prefix = "", *delim = NULL, *km = NULL, *im = NULL, *mu = NULL, *enc = NULL;
	struct up_args a = { .max = MAX_UPLOADS };
	struct up_page p = { 0 };
	unsigned long max;
	bool url, truncated;
	struct s3_buf b;
	size_t i;
	int ret;

	sv_query(k->r, "prefix", &prefix);
	sv_query(k->r, "delimiter", &delim);
	sv_query(k->r, "key-marker", &km);
	sv_query(k->r, "upload-id-marker", &im);
	sv_query(k->r, "max-uploads", &mu);
	sv_query(k->r, "encoding-type", &enc);
	url = enc && !strcmp(enc, "url");
	a.prefix = prefix ? prefix : "";
	a.delim = delim && *delim ? delim : NULL;
	a.key_marker = km && *km ? km : NULL;
	if (sv_count(mu, MAX_UPLOADS, MAX_UPLOADS, &max))
		return sv_fail(k, 400, "InvalidArgument", "max-uploads must be a number of 0 or more");
	a.max = max;
	/* upload-id-marker counts only beside key-marker, as in S3; one
	 * that names no upload of that key starts after the key. */
	if (a.key_marker && im && strlen(im) == 32 && rdx_hex_is(im, 32)) {
		int u = sv_uploads_fd(k->s->root, false);
		char *key = u >= 0 ? upload_key(u, im, k->bucket, &a.id_init_ns) : NULL;

		if (key && !strcmp(key, a.key_marker)) {
			a.has_id_marker = true;
			a.id_marker = im;
		}
		free(key);
		if (u >= 0)
			close(u);
	}
	if (a.max) {
		p.cap = a.max + 1;
		p.v = calloc(p.cap, sizeof(p.v[0]));
		if (!p.v)
			return -ENOMEM;
		ret = collect(k, &a, &p);
		if (ret) {
			for (i = 0; i < p.n; i++)
				free(p.v[i].key);
			free(p.v);
			return sv_fail_errno(k, ret);
		}
	}
	truncated = p.n > a.max;
	if (truncated)
		free(p.v[--p.n].key);
	s3_buf_init(&b, 0);
	s3_buf_printf(&b, XML_HEAD "<ListMultipartUploadsResult xmlns=\"" XMLNS "\"><Bucket>%s</Bucket>",
		      k->bucket);
	sv_list_text(&b, "KeyMarker", km ? km : "", url);
	sv_list_text(&b, "UploadIdMarker", im ? im : "", false);
	if (truncated) {
		sv_list_text(&b, "NextKeyMarker", p.v[p.n - 1].key, url);
		sv_list_text(&b, "NextUploadIdMarker", p.v[p.n - 1].id, false);
	}
	if (a.delim)
		sv_list_text(&b, "Delimiter", a.delim, url);
	sv_list_text(&b, "Prefix", a.prefix, url);
	s3_buf_printf(&b, "<MaxUploads>%zu</MaxUploads><IsTruncated>%s</IsTruncated>", a.max,
		      truncated ? "true" : "false");
	if (url)
		s3_buf_adds(&b, "<EncodingType>url</EncodingType>");
	for (i = 0; i < p.n; i++) {
		char date[40];

		if (p.v[i].is_prefix)
			continue;
		sv_iso_date((time_t)(p.v[i].init_ns / 1000000000), date);
		s3_buf_adds(&b, "<Upload>");
		sv_list_text(&b, "Key", p.v[i].key, url);
		s3_buf_printf(&b, "<UploadId>%s</UploadId><Initiated>%s</Initiated>"
				  "<StorageClass>STANDARD</StorageClass></Upload>",
			      p.v[i].id, date);
	}
	for (i = 0; i < p.n; i++)
		if (p.v[i].is_prefix) {
			s3_buf_adds(&b, "<CommonPrefixes>");
			sv_list_text(&b, "Prefix", p.v[i].key, url);
			s3_buf_adds(&b, "</CommonPrefixes>");
		}
	s3_buf_adds(&b, "</ListMultipartUploadsResult>");
	for (i = 0; i < p.n; i++)
		free(p.v[i].key);
	free(p.v);
	ret = sv_xml_answer(k, 200, &b);
	s3_buf_release(&b);
	return ret;
}

static int part_cmp(const void *a, const void *b)
{
	unsigned x = *(const unsigned *)a, y = *(const unsigned *)b;

	return x < y ? -1 : x > y;
}

/* The part numbers of upload directory up (files "00001" ... "10000"),
 * sorted into v (SV_PARTS_MAX of them at most).  Returns the count or
 * -errno. */
static int part_numbers(int up, unsigned *v)
{
	DIR *d = sv_opendir(up);
	struct dirent *de;
	size_t n = 0;

	if (!d)
		return -errno;
	while ((de = readdir(d)) && n < SV_PARTS_MAX) {
		char *end;
		unsigned long pn = strtoul(de->d_name, &end, 10);

		if (strlen(de->d_name) == 5 && !*end && pn >= 1 && pn <= SV_PARTS_MAX)
			v[n++] = (unsigned)pn;
	}
	closedir(d);
	qsort(v, n, sizeof(*v), part_cmp);
	return (int)n;
}

int sv_list_parts(struct call *k, const char *id)
{
	const char *mp = NULL, *marker = NULL;
	unsigned long max, after;
	unsigned *nums = NULL;
	int64_t init_ns;
	int u, up = -1, n, ret, shown = 0;
	char *key = NULL;
	bool truncated = false;
	unsigned last = 0;
	struct s3_buf b;

	sv_query(k->r, "max-parts", &mp);
	sv_query(k->r, "part-number-marker", &marker);
	if (sv_count(mp, MAX_UPLOADS, MAX_UPLOADS, &max))
		return sv_fail(k, 400, "InvalidArgument", "max-parts must be a number of 0 or more");
	if (sv_count(marker, 0, ULONG_MAX, &after))
		return sv_fail(k, 400, "InvalidArgument", "part-number-marker must be a part number");
	u = sv_uploads_fd(k->s->root, false);
	if (u >= 0 && id && strlen(id) == 32 && rdx_hex_is(id, 32))
		key = upload_key(u, id, k->bucket, &init_ns);
	if (key && !strcmp(key, k->key))
		up = openat(u, id, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	free(key);
	if (u >= 0)
		close(u);
	if (up < 0)
		return sv_fail(k, 404, "NoSuchUpload",
			    "The specified upload does not exist. The upload ID may be invalid, or the upload may have been aborted or completed.");
	nums = malloc(SV_PARTS_MAX * sizeof(*nums));
	n = nums ? part_numbers(up, nums) : -ENOMEM;
	if (n < 0) {
		free(nums);
		close(up);
		return sv_fail_errno(k, n);
	}
	s3_buf_init(&b, 0);
	s3_buf_printf(&b, XML_HEAD "<ListPartsResult xmlns=\"" XMLNS "\"><Bucket>%s</Bucket>",
		      k->bucket);
	sv_list_text(&b, "Key", k->key, false);
	s3_buf_printf(&b, "<UploadId>%s</UploadId><PartNumberMarker>%lu</PartNumberMarker>"
			  "<MaxParts>%lu</MaxParts><StorageClass>STANDARD</StorageClass>",
		      id, after, max);
	for (int i = 0; i < n; i++) {
		char name[16], date[40];
		struct sv_meta m = { 0 };
		int fd;

		if (nums[i] <= after)
			continue;
		if ((unsigned long)shown == max) {
			truncated = true;
			break;
		}
		snprintf(name, sizeof(name), "%05u", nums[i]);
		fd = openat(up, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0)
			continue; /* replaced or aborted meanwhile */
		ret = sv_meta_get(fd, &m);
		close(fd);
		if (ret)
			continue;
		sv_iso_date((time_t)(m.mtime_ns / 1000000000), date);
		s3_buf_printf(&b, "<Part><PartNumber>%u</PartNumber><LastModified>%s</LastModified>"
				  "<ETag>&quot;%s&quot;</ETag><Size>%llu</Size>",
			      nums[i], date, m.etag, (unsigned long long)m.size);
		if (m.ck != S3_CK_NONE) { /* the part's, kept with it */
			char b64[48];

			s3_cksum_b64(m.ck_sum, s3_cksum_len(m.ck), b64);
			s3_buf_printf(&b, "<Checksum%s>%s</Checksum%s>", s3_cksum_name(m.ck), b64,
				      s3_cksum_name(m.ck));
		}
		s3_buf_printf(&b, "</Part>");
		sv_meta_release(&m);
		last = nums[i];
		shown++;
	}
	if (truncated)
		s3_buf_printf(&b, "<NextPartNumberMarker>%u</NextPartNumberMarker>", last);
	s3_buf_printf(&b, "<IsTruncated>%s</IsTruncated></ListPartsResult>", truncated ? "true" : "false");
	free(nums);
	close(up);
	ret = sv_xml_answer(k, 200, &b);
	s3_buf_release(&b);
	return ret;
}
