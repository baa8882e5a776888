/* rds3 serve's parts: HTTP/1.1 connections (serve_http.c), request
 * verification (serve_auth.c) against the users (serve_users.c), objects
 * on disk (serve_store.c), listings (serve_list.c) and the S3 operations
 * (serve_ops.h: serve.c, serve_owner.c, serve_bucket.c, serve_object.c,
 * serve_multipart.c). */
#ifndef RDS3_SERVE_INT_H
#define RDS3_SERVE_INT_H

#include "core/io.h"
#include "s3/buf.h"
#include "s3/checksum.h"
#include "s3/serve/serve.h"
#include "s3/sigv4.h"

#include <dirent.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>
#include <time.h>

#define SV_HEAD_MAX (16u << 10) /* request line and headers */
#define SV_HDRS_MAX 100
#define SV_QUERY_MAX 64
#define SV_INBUF (64u << 10)
#define SV_KEY_MAX 1024
#define SV_PUT_MAX ((uint64_t)5 << 30)	 /* one PutObject or part, as S3 */
#define SV_PART_MIN ((uint64_t)5 << 20)	 /* every part but the last */
#define SV_PARTS_MAX 10000
#define SV_XML_MAX ((size_t)4 << 20)	 /* a request's XML body */
#define SV_META_MAX 2048		 /* user metadata, as S3 */
#define SV_HEADERS_MAX 3072		 /* all headers kept with an object */

/* ---------------------------------------------------------------- HTTP */

struct sv_conn {
	int fd;
	char peer[64];		/* "ADDR:PORT", for the log */
	unsigned timeout_secs;	/* the longest wait for one read or write */
	const atomic_int *stop;
	atomic_int *shed;	/* idle connections the server wants closed, or NULL */
	bool idle;		/* between requests, nothing of the next one read */
	unsigned header_secs;	/* a request's header must be in this long after
				 * its first byte (client_header_timeout) */
	int64_t head_since_ms;	/* that first byte's time; 0: no header under way */
	int64_t io_deadline_ms; /* no wait goes past it; 0: none */
	char in[SV_INBUF];	/* bytes read and not yet used */
	size_t in_off, in_len;
	bool broken;		/* cannot carry another request */
	bool unread;		/* closing with a request's body not all read */
};

struct sv_hdr {
	const char *name, *value;
};

struct sv_req {
	char head[SV_HEAD_MAX + 1]; /* the header section, NUL-split */
	const char *method;
	char id[20];		    /* x-amz-request-id and RequestId */
	const char *raw_path;	    /* as sent, NUL-terminated copy */
	char *raw_query;	    /* as sent, malloc'ed; NULL: none */
	char *path;		    /* decoded, malloc'ed */
	struct s3_kv query[SV_QUERY_MAX]; /* decoded, malloc'ed */
	size_t nquery;
	struct sv_hdr hdr[SV_HDRS_MAX];
	size_t nhdr;
	uint64_t length;	/* Content-Length, when has_length */
	bool has_length, chunked, expect_continue, keep_alive, http10;
	/* the body as it is read */
	uint64_t left;		/* of the body, or of the current chunk */
	bool body_end;		/* all of it was read */
	bool continued;		/* 100 Continue sent, or not asked for */
	bool chunk_open;	/* inside a chunk's data */
	uint64_t body_read;
};

/* Reads the next request's header section.  Returns 0; 1 when the peer
 * closed the connection between requests; -E2BIG (431: over
 * SV_HEAD_MAX or SV_HDRS_MAX), -RDX_EPROTO (400: not HTTP/1.x as this
 * server reads it), -EILSEQ (400: %00 in the path or query),
 * -ETIMEDOUT, -ECANCELED (stop) or -errno. */
int sv_read_request(struct sv_conn *c, struct sv_req *r);

/* Frees what sv_read_request() allocated. */
void sv_req_release(struct sv_req *r);

/* The first header of that name (any case), NULL when none. */
const char *sv_hdr(const struct sv_req *r, const char *name);

/* Whether the query has name; *value its value (NULL for "?name"). */
bool sv_query(const struct sv_req *r, const char *name, const char **value);

/* Reads up to n bytes of the body (sending 100 Continue first when it was
 * asked for).  Returns the count, 0 at the body's end, -RDX_EPROTO for a
 * malformed chunk, -ECONNRESET when the peer closed early, -ETIMEDOUT,
 * -ECANCELED or -errno; after an error the connection is broken. */
ssize_t sv_body_read(struct sv_conn *c, struct sv_req *r, void *p, size_t n);

/* Reads and drops what is left of the body, if it is at most max bytes
 * (and no 100 Continue is still owed: then the client never sent it);
 * else marks the connection broken, to be closed after the answer. */
void sv_body_skip(struct sv_conn *c, struct sv_req *r, uint64_t max);

/* Closes the write side after an answer given before the request's
 * body was read (an early 403 or 404), then reads and drops what the
 * client still sends, for a bounded time, so that it reads the answer
 * instead of the reset that unread data would cause. */
void sv_linger(struct sv_conn *c);

/* Sends a status line and headers: hdrs (each "Name: value\r\n") plus
 * Date, Server, x-amz-request-id, Content-Length (when has_length) and
 * Connection.  Returns 0 or -errno. */
int sv_send_head(struct sv_conn *c, const struct sv_req *r, int status,
		 const char *hdrs, bool has_length, uint64_t length);

/* Sends n bytes / len bytes of fd from off.  Return 0 or -errno. */
int sv_send(struct sv_conn *c, const void *p, size_t n);
int sv_sendfile(struct sv_conn *c, int fd, uint64_t off, uint64_t len);

/* "Tue, 15 Nov 1994 08:12:31 GMT" and "2009-10-12T17:50:30.000Z". */
void sv_http_date(time_t t, char out[40]);
void sv_iso_date(time_t t, char out[40]);

/* The UTF-8 character at p (NUL-terminated) into *cp: its length in
 * bytes, or -1 when p does not start one (overlong forms and surrogates
 * are none). */
int sv_utf8_next(const unsigned char *p, uint32_t *cp);

/* Whether s is UTF-8 throughout. */
bool sv_utf8_ok(const char *s);

/* Appends s with &, <, >, ", ' and characters XML 1.0 cannot carry
 * escaped (the last as &#xN; where XML allows them, else refused:
 * -EINVAL). */
int sv_xml_esc(struct s3_buf *b, const char *s);

/* ---------------------------------------------------------------- auth */

#define SV_USERS_MAX 10000
#define SV_USER_KEY_MAX 128	/* an access key (S3_RDMA_KEY_MAX) */
#define SV_USER_SECRET_MAX 256
#define SV_USER_NAME_MAX 64	/* a profile's name */

/* A principal: an access key and its secret (serve_users.c). */
struct sv_user {
	char *access_key;
	char *secret_key;
	char *name; /* Owner DisplayName: its profile's name, else the key */
};

struct sv_users {
	struct sv_user *v;	 /* in the file's order: v[0] is the first */
	size_t n;
	struct sv_user **by_key; /* v sorted by access key, for lookups */
};

/* Reads --users FILE (its forms in serve_users.c): a regular file of at
 * most 1 MiB that only its owner (the server's user, or root) may read or
 * write.  Returns 0, or -errno / -EINVAL / -EPERM with the reason in err
 * (a line number, never a secret). */
int sv_users_load(const char *path, struct sv_users *u, char *err, size_t errlen);

/* Parses text (NUL-terminated, changed in place) as sv_users_load() does
 * a file's.  Returns 0 or -EINVAL / -ENOMEM / -E2BIG, the reason in err. */
int sv_users_parse(char *text, struct sv_users *u, char *err, size_t errlen);

/* The table of one user: key and secret.  Returns 0 or -ENOMEM. */
int sv_users_one(struct sv_users *u, const char *key, const char *secret);

/* The user of access key key, or NULL. */
const struct sv_user *sv_users_find(const struct sv_users *u, const char *key);

/* Frees the table; the secrets are wiped first. */
void sv_users_release(struct sv_users *u);

struct sv_auth {
	const struct sv_users *users; /* NULL: no_sign */
};

/* A streaming upload (x-amz-content-sha256: STREAMING-*): its body is
 * aws-chunked (aws_chunked.h), and signed chunks chain from the
 * request's own signature. */
struct sv_stream_auth {
	bool on;	     /* the body is aws-chunked */
	bool signed_chunks;  /* each chunk carries a signature */
	bool trailers;	     /* trailer lines may follow the last chunk */
	bool chain;	     /* the signatures are checked (a signed request), with: */
	unsigned char key[32]; /* its signing key */
	char date[17];	     /* its X-Amz-Date */
	char scope[272];     /* "YYYYMMDD/REGION/s3/aws4_request" */
	char seed[65];	     /* its signature, the chain's start */
};

/* Checks r's signature.  Returns 0 with *who the signer (NULL on an
 * unsigned server), *payload the body's SHA-256 the signature covers
 * (hex; NULL: unsigned payload or aws-chunked) and *sa what a streaming
 * body needs, or an HTTP status with code and msg set (403
 * InvalidAccessKeyId, 403 SignatureDoesNotMatch, 400
 * AuthorizationHeaderMalformed, 501 for SigV4a's streaming, ...). */
int sv_auth_check(const struct sv_auth *a, const struct sv_req *r,
		  const struct sv_user **who, const char **payload,
		  struct sv_stream_auth *sa,
		  const char **code, char *msg, size_t msglen);

/* --------------------------------------------------------------- store */

/* What rds3 serve keeps with an object (in the extended attribute
 * "user.rds3"), checked against the file's size and mtime: a file
 * changed or put there by another hand gets its MD5 computed again. */
struct sv_meta {
	char etag[48];	    /* "hex" or "hex-N", no quotes */
	uint64_t size;
	int64_t mtime_ns;
	unsigned parts;	    /* 0: not multipart */
	uint64_t part_size; /* parts of this size but the last; 0: unequal */
	/* The additional checksum it was stored with (x-amz-checksum-*):
	 * of the whole (FULL_OBJECT), or of its parts' (COMPOSITE). */
	enum s3_ck ck;	    /* S3_CK_NONE: none */
	bool ck_composite;
	unsigned char ck_sum[S3_CK_MAX];
	char *headers;	    /* "name: value\n" lines (Content-Type, x-amz-meta-*), malloc'ed */
};

void sv_meta_release(struct sv_meta *m);

/* Whether name is a valid bucket name, by S3's rules: 3..63 of a-z 0-9 .
 * -, starting and ending with a letter or digit, no "..", ".-" or "-.",
 * not an IPv4 address, not xn--* sthree-* *-s3alias *--ol-s3. */
bool sv_bucket_ok(const char *name);

/* A bucket's owner (serve_owner.c): a name no key component can have. */
#define SV_OWNER_NAME ".rds3-owner"

/* The file of a key ending in '/' (a folder marker, or any object of such
 * a name) inside the directory of that name: no key component can have
 * it either. */
#define SV_FOLDER_NAME ".rds3-folder"

/* Whether key is one this server can store: 1..1024 bytes, components
 * non-empty (but for a final '/': a folder marker), not "." or "..", at
 * most 255 bytes, no temporary's name, SV_OWNER_NAME nor SV_FOLDER_NAME.
 * Returns 0 or -ENAMETOOLONG / -EINVAL. */
int sv_key_ok(const char *key);

/* Whether a directory entry's name is one of this server's temporaries. */
bool sv_is_temp(const char *name);

/* Reads (or computes and records) m for the regular file fd. */
int sv_meta_get(int fd, struct sv_meta *m);

/* Records m on fd.  Returns 0, -ENOTSUP (the file system keeps no user
 * extended attributes) or -errno. */
int sv_meta_set(int fd, const struct sv_meta *m);

/* The directory dir (any descriptor of it, O_PATH too) opened for
 * readdir on a descriptor of its own.  NULL with errno set when it
 * cannot be. */
DIR *sv_opendir(int dir);

/* What a multipart object keeps of each part (the extended attribute
 * "user.rds3.parts", beside the record): its size and its checksum (of
 * the record's algorithm), for GetObjectAttributes and a GET of a part. */
struct sv_part_info {
	uint64_t size;
	unsigned char sum[S3_CK_MAX];
};

/* Records the m->parts parts v of the object fd described by m (its
 * ETag ties them to it): the sizes when they are unequal (m->part_size
 * 0), the checksums when m->ck.  Returns 0 (also when there is nothing
 * to keep), -E2BIG / -ENOSPC / -ENOTSUP when the file system cannot keep
 * that many bytes with the file, or -errno. */
int sv_parts_set(int fd, const struct sv_meta *m, const struct sv_part_info *v);

/* Reads them back for the object fd of record m: 0 with *out (m->parts
 * entries, malloc'ed; sizes from m->part_size when they are equal),
 * -ENODATA when the object has no such record (not multipart, or none
 * that fits it: sizes unequal or checksums not kept), or -ENOMEM. */
int sv_parts_get(int fd, const struct sv_meta *m, struct sv_part_info **out);

/* Opens the bucket directory (O_PATH | O_DIRECTORY, never through a
 * symlink).  Returns the fd or -ENOENT / -errno. */
int sv_bucket_open(int root, const char *bucket);

/* Opens the object key in bucket directory bfd for reading: a regular
 * file reached without following a symlink.  Returns the fd, -ENOENT
 * (no such key: also a directory or a symlink there), or -errno. */
int sv_object_open(int bfd, const char *key);

/* Opens key for reading with its record into *m and its Last-Modified
 * into *mtime.  Returns the fd, -ENOENT (no such key) or -errno. */
int sv_key_open(int bfd, const char *key, struct sv_meta *m, time_t *mtime);

/* Writing an object: a temporary in the key's directory (made as
 * needed), renamed over the key by sv_put_commit(). */
struct sv_put {
	int dir;	/* the key's directory */
	int fd;		/* stage.fd, or -1 */
	struct rdx_tmpfile stage; /* unnamed until committed (rdx_tmpfile) */
	const char *name; /* the key's last component */
	/* sv_put_begin()'s bucket and key (NULL from sv_put_begin_at()): the
	 * directory is made again at the commit if a delete pruned it
	 * meanwhile, and pruned when the put fails. */
	int bfd;
	const char *key;
	/* A conditional write (If-None-Match: *, If-Match), set by the
	 * caller after begin: decided in sv_put_commit() with no other
	 * commit of this server between the check and the name. */
	bool if_absent; /* the name is linked, never renamed over: an
			 * object there, put by any process, stays */
	int (*check)(int dir, const char *name, void *arg); /* 0 or -errno */
	void *check_arg;
};

/* Starts writing name in the directory dir (taken over: closed by
 * commit or abort).  Returns 0 or -errno. */
int sv_put_begin_at(int dir, const char *name, struct sv_put *p);

/* Starts writing key in bucket bfd.  Returns 0, -ENOTDIR / -EEXIST (a
 * component of the key is an object, or the key a prefix of others or a
 * folder marker's name), -ELOOP (a symlink on the way) or -errno. */
int sv_put_begin(int bfd, const char *key, struct sv_put *p);

/* Gives the temporary mode and renames it to the key (replacing an
 * object, or an empty directory of that name).  Commits and deletes are
 * one at a time: p->check runs just before the rename, and p->if_absent
 * makes it a link that fails when an object has the name.  Returns 0,
 * -EEXIST (a directory with keys under it, or a folder marker's, is
 * there), -ECANCELED (an object is there and p->if_absent), what
 * p->check returned, or -errno; the temporary is removed and the
 * descriptors closed either way, and a failed put's directories pruned. */
int sv_put_commit(struct sv_put *p, mode_t mode);

/* Removes the temporary, and the directories sv_put_begin() made for it
 * that are left empty; harmless after a commit. */
void sv_put_abort(struct sv_put *p);

/* Removes the object key, then the directories that leaves empty up to
 * the bucket (a folder marker's is not: it holds its file).  check (NULL:
 * none) runs first, under the lock commits take, on the file's directory
 * and name: what it returns stops the delete.  Returns 0 (without check,
 * also when there was no such key), -ENOENT (with check, no such key),
 * what check returned, or -errno. */
int sv_object_delete(int bfd, const char *key,
		     int (*check)(int dir, const char *name, void *arg), void *arg);

/* ---------------------------------------------------------------- list */

struct sv_list_item {
	char *key;
	bool is_prefix;
	uint64_t size;
	time_t mtime;
	char etag[48];
};

struct sv_list_args {
	const char *prefix, *delimiter, *start_after;
	unsigned max_keys; /* 0..1000 */
};

struct sv_list_result {
	struct sv_list_item *v;
	size_t n;
	bool truncated;
};

/* Lists bucket bfd as ListObjects does: keys and common prefixes in
 * byte order after start_after, at most max_keys, truncated when more
 * follow.  Memory is bounded by the largest directory, not the bucket.
 * Returns 0 or -errno. */
int sv_list(int bfd, const struct sv_list_args *a, struct sv_list_result *out);
void sv_list_release(struct sv_list_result *r);

#endif
