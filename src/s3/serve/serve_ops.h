/* rds3 serve's S3 operations, one file per kind: serve.c (answers,
 * helpers, connections), serve_owner.c (owners, the service),
 * serve_bucket.c, serve_object.c and serve_multipart.c.  What one of
 * them uses of another is declared here. */
#ifndef RDS3_SERVE_OPS_H
#define RDS3_SERVE_OPS_H

#include "s3/buf.h"
#include "s3/checksum.h"
#include "s3/serve/serve_int.h"

#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#define UPLOADS \
	".rds3-uploads" /* not a bucket name: buckets never start with '.' */
#define IO_BUF	 (1u << 20)
#define XMLNS	 "http://s3.amazonaws.com/doc/2006-03-01/"
#define XML_HEAD "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"

/* The server: shared by every connection's thread. */
struct server {
	const struct s3_serve_opts *o;
	struct sv_auth auth; /* the users (serve_users.c) */
	bool shared;	     /* several users: buckets have owners */
	int root;
	mode_t file_mode; /* 0666 less the umask */
	pthread_mutex_t lock;
	pthread_cond_t cond;
	unsigned active;
	atomic_int shed; /* idle connections to close for waiting ones */
	/* Connections held per address (lock), max_conns entries: one
	 * address cannot take every place. */
	struct addr_count {
		char host[INET6_ADDRSTRLEN];
		unsigned n;
	} * addrs;
	unsigned port;	     /* the one listened on */
	struct sv_rdma *rdma; /* --rdma: serve_rdma.c; NULL: off */
};

/* One request's context. */
struct call {
	struct server *s;
	struct sv_conn *c;
	struct sv_req *r;
	const struct sv_user *user; /* the signer; NULL: an unsigned server */
	const char *payload; /* the signed body hash, NULL: none */
	struct sv_stream_auth sa; /* an aws-chunked body's framing and chain */
	enum s3_ck want_ck;	  /* set before sv_take_body(): the checksum the
				   * body must have, computed when it brings none */
	enum s3_ck sum_ck;	  /* after: the body's checksum (S3_CK_NONE: none), */
	unsigned char sum[S3_CK_MAX]; /* checked against the header or trailer, or computed */
	char bucket[64];
	const char *key; /* NULL: a bucket or service request */
	int status;
	uint64_t sent;
	struct sv_rdma_use *rdma; /* the request's token, taken (or NULL) */
	uint64_t rdma_moved;	   /* bytes it moved by RDMA */
};

/* Sends the answer: status, hdrs (each ending in CRLF, or NULL) and n
 * bytes of body (not for HEAD).  Returns 0, or -errno when the
 * connection is gone. */
int sv_answer(struct call *k, int status, const char *hdrs, const char *body,
	      size_t n);

/* An S3 Error document: its code and message. */
int sv_fail(struct call *k, int status, const char *code, const char *msg);

/* The answer for an errno from the store. */
int sv_fail_errno(struct call *k, int err);

/* b as an XML answer (-ENOMEM when b ran out of memory). */
int sv_xml_answer(struct call *k, int status, struct s3_buf *b);

/* A count a request gives (max-keys, max-uploads, a part number...): v
 * (NULL: def) as decimal digits, at most cap.  0, or -EINVAL for
 * anything but digits. */
int sv_count(const char *v, unsigned long def, unsigned long cap, unsigned long *out);

/* Whether w is one of the words of list (separated by single spaces). */
bool sv_word_in(const char *list, const char *w);

/* An ETag header of the quoted etag into b. */
void sv_add_etag(struct s3_buf *b, const char *etag);

/* An S3 Error document, with extra headers (each ending in CRLF). */
int sv_fail_h(struct call *k, int status, const char *code, const char *msg,
	      const char *extra);

/* The request's bucket, opened into *fd: 0, or an answer was sent. */
int sv_bucket_fd(struct call *k, int *fd);

/* A request on a bucket (no key): serve_bucket.c. */
int sv_bucket_op(struct call *k);

/* A small XML body (a Delete or Complete request), NUL-terminated.
 * body_sum: an x-amz-checksum-* header is the body's (DeleteObjects) and
 * is checked; else it is the whole object's (Complete), for the caller
 * to check (sv_checksum_header). */
int sv_take_xml(struct call *k, bool body_sum, char **out, size_t *len);

/* The stored header lines as HTTP headers, Content-Type defaulted. */
void sv_emit_headers(struct s3_buf *b, const char *h);

/* The request's headers that go with an object: Content-Type and the
 * like, and x-amz-meta-* (names in lower case).  -E2BIG past S3's 2 KB
 * of user metadata. */
int sv_object_headers(const struct sv_req *r, char **out);

/* Reads the body into fd (an aws-chunked one decoded, serve_stream.c),
 * hashing it: MD5 always, SHA-256 when signed, and the x-amz-checksum-*
 * the client sent as a header or a trailer.  Checks Content-MD5, the
 * signed hash and that checksum.  Returns 0 with md5 set; or an answer
 * was sent (1) or the connection is gone (-errno). */
int sv_take_body(struct call *k, int fd, uint64_t max, unsigned char md5[16],
		 uint64_t *size);

/* Echoes the body's checksum (k->sum_ck), as S3 does. */
void sv_add_checksum(struct s3_buf *b, const struct call *k);

/* The request's x-amz-checksum-* header, if any: *hdr (NULL: none) and
 * its algorithm; S3 takes one.  Returns 0, or an answer was sent (1) or
 * the connection is gone (-errno). */
int sv_checksum_header(struct call *k, const struct sv_hdr **hdr, enum s3_ck *alg);

/* The algorithm x-amz-checksum-algorithm (or the SDK's
 * x-amz-sdk-checksum-algorithm) names into *alg, S3_CK_NONE when
 * neither is there.  Returns 0, or 400 InvalidRequest was sent (1) or
 * could not be (-EIO). */
int sv_checksum_asked(struct call *k, enum s3_ck *alg);

/* For a PutObject: k->want_ck, the algorithm named (sv_checksum_asked)
 * when the body brings no checksum of its own, to be computed.  Returns
 * 0, or an answer was sent (1) or could not be (-EIO). */
int sv_checksum_default(struct call *k);

/* An object's kept checksum as S3 shows it: base64, "-N" after a
 * COMPOSITE one of N parts. */
void sv_checksum_text(const struct sv_meta *m, char out[64]);

/* The same as XML elements, <ChecksumALG> and <ChecksumType> (none when
 * m is NULL or keeps none): Complete's, CopyObject's and
 * GetObjectAttributes' answers. */
void sv_checksum_xml(struct s3_buf *b, const struct sv_meta *m);

/* Its x-amz-checksum-ALG and x-amz-checksum-type headers into b (none
 * when m keeps none). */
void sv_add_kept_checksum(struct s3_buf *b, const struct sv_meta *m);

/* Whether the request asks for checksums (x-amz-checksum-mode: ENABLED). */
bool sv_checksum_mode(const struct call *k);

/* ------------------------------------- aws-chunked bodies (serve_stream.c) */

struct sv_stream;

/* Starts reading k's aws-chunked body (k->sa.on), of at most max decoded
 * bytes: x-amz-decoded-content-length is required, x-amz-trailer names
 * the checksum trailer if any.  Returns 0 with *out, or an answer was
 * sent (1) or could not be (-EIO). */
int sv_stream_begin(struct call *k, uint64_t max, struct sv_stream **out);

/* Reads up to n decoded bytes into p, checking each chunk's signature
 * as it ends.  Returns the count; 0 at the end, when every signature,
 * the trailers, the decoded length and the HTTP body's end agree;
 * -EBADMSG when the body is refused (sv_stream_fail() answers); or the
 * connection's -errno. */
ssize_t sv_stream_read(struct call *k, struct sv_stream *s, void *p, size_t n);

/* Answers why s was refused: 1, or -EIO when that could not be sent. */
int sv_stream_fail(struct call *k, struct sv_stream *s);

/* The checksum x-amz-trailer named (S3_CK_NONE: none) and, after the
 * end, its value as the trailer gave it. */
enum s3_ck sv_stream_sum(const struct sv_stream *s, const char **value);

void sv_stream_free(struct sv_stream *s);

/* Appends <tag>v</tag>, v URI-encoded when url (encoding-type=url). */
void sv_list_text(struct s3_buf *b, const char *tag, const char *v, bool url);

/* ListMultipartUploads of the request's bucket: serve_uploads.c. */
int sv_list_uploads(struct call *k);

/* Whether the upload in directory up was completed: its "done" record
 * is there, kept a while to answer a repeated Complete, and it is no
 * longer an upload to list, add to or abort. */
bool sv_upload_done(int up);

/* ListParts of upload id (the request's key's): serve_uploads.c. */
int sv_list_parts(struct call *k, const char *id);

/* Removes the open uploads of bucket. */
void sv_drop_uploads(int root, const char *bucket);

/* A request on an object (a key): serve_multipart.c dispatches it. */
int sv_object_op(struct call *k);

/* DIR/.rds3-uploads, made when asked; never through a symlink put
 * there.  Returns an O_PATH descriptor or -errno. */
int sv_uploads_fd(int root, bool make);

/* Removes the incomplete multipart uploads begun more than
 * o->upload_expiry_days ago, as S3's AbortIncompleteMultipartUpload rule
 * does (an upload's "key" file is written when it begins).  At the start
 * nothing is in flight: the temporaries a killed server left in the
 * uploads that stay (parts written under a name, where the file system
 * has no O_TMPFILE) are removed too. */
void sv_sweep_uploads(struct server *s, bool at_start);

/* Opens x-amz-copy-source for a copy: its descriptor into *sfd and its
 * meta into *sm, checked against x-amz-copy-source-if-match,
 * -if-none-match, -if-unmodified-since and -if-modified-since (412
 * PreconditionFailed); *self when it is the request's own object.
 * Returns 0, or an answer was sent (1) or could not be (-EIO). */
int sv_copy_source_open(struct call *k, int *sfd, struct sv_meta *sm,
			bool *self);

/* A write's conditions on the object it replaces (PutObject, CopyObject,
 * CompleteMultipartUpload): If-None-Match: * (none is there) or If-Match
 * (one is, with one of those ETags). */
struct sv_wcond {
	const char *match;	/* If-Match's value, or NULL */
	const char *none_match; /* If-None-Match's ETags (not "*"), or NULL */
	bool absent;		/* If-None-Match: * */
};

/* Reads them from the request and checks them against the object now,
 * to spare a body that could not be written: 0 to go on, else an answer
 * was sent (1) or could not be (-EIO): 412 PreconditionFailed or 404
 * NoSuchKey (If-Match and no object).  If-None-Match with ETags holds
 * when no object is there or its ETag is none of them, as HTTP has it
 * (S3 takes "*" only; RGW and the s3-tests take both). */
int sv_wcond_take(struct call *k, int bfd, struct sv_wcond *w);

/* If-Match's check, under the store's lock (arg: the struct sv_wcond):
 * the object at name in dir has one of w->match's ETags.  Returns 0,
 * -ENOENT (none is there) or -ECANCELED (another ETag). */
int sv_match_check(int dir, const char *name, void *arg);

/* Has p's commit check them again where they hold: in sv_put_commit(),
 * one commit at a time.  w must outlive the commit. */
void sv_wcond_arm(struct sv_wcond *w, struct sv_put *p);

/* The answer for sv_put_commit()'s error (-ECANCELED: 412). */
int sv_commit_fail(struct call *k, int err);

/* Copies len bytes of in from off to out from 0, hashing them: MD5, and
 * ck when not NULL (begun by the caller). */
int sv_copy_range(int in, uint64_t off, uint64_t len, int out,
		  unsigned char md5[16], struct s3_cksum *ck);

/* GetObjectAttributes (GET ?attributes): serve_attributes.c. */
int sv_object_attributes(struct call *k);

/* ------------------------------------------- tags (serve_tagging.c) */

#define SV_TAGS_MAX 10
#define SV_TAG_KEY_CHARS 128
#define SV_TAG_VALUE_CHARS 256

/* An object's tags, checked as S3 checks them (UTF-8, at most 4 bytes a
 * character). */
struct sv_tags {
	unsigned n;
	struct sv_tag {
		char key[SV_TAG_KEY_CHARS * 4 + 1];
		char value[SV_TAG_VALUE_CHARS * 4 + 1];
	} v[SV_TAGS_MAX];
};

/* The tags as "KEY\tVALUE\n" lines into b, and back (-EINVAL: not such
 * lines, or tags S3 would refuse).  Return 0 or -errno. */
int sv_tags_format(const struct sv_tags *t, struct s3_buf *b);
int sv_tags_parse(const char *s, size_t n, struct sv_tags *t);

/* The tags of the open object fd (none: t->n 0).  Returns 0 or -errno. */
int sv_tags_get(int fd, struct sv_tags *t);

/* Records t on fd (t->n 0: removes them).  Returns 0, -ENOTSUP (the file
 * system keeps no user extended attributes), -E2BIG (not that many
 * bytes of them) or -errno. */
int sv_tags_set(int fd, const struct sv_tags *t);

/* The answer for an error of sv_tags_set(). */
int sv_tags_fail(struct call *k, int err);

/* The request's x-amz-tagging into t (absent: none): 0, or 400
 * InvalidTag was sent (1) or could not be (-EIO). */
int sv_tags_take(struct call *k, struct sv_tags *t);

/* GetObjectTagging, PutObjectTagging, DeleteObjectTagging. */
int sv_object_tagging(struct call *k);

/* GetObject and HeadObject, CopyObject, PutObject, in the bucket bfd:
 * serve_object.c. */
int sv_get_object(struct call *k, int bfd);
int sv_copy_object(struct call *k, int bfd);
int sv_put_object(struct call *k, int bfd);

/* ------------------------------------------- owners: serve_owner.c */

/* The owner of bucket directory bfd: the user recorded, else the first
 * one; NULL on an unsigned server. */
const struct sv_user *sv_bucket_owner(const struct server *s, int bfd);

/* Whether the request's signer owns bucket bfd: 0, or 403 AccessDenied
 * was sent (1) or could not be (-EIO). */
int sv_bucket_mine(struct call *k, int bfd);

/* <Owner> of user u (NULL: an unsigned server's "rds3"). */
void sv_owner_xml(struct s3_buf *b, const struct sv_user *u);

/* At the start: removes what a killed server was making; with several
 * users, checks that DIR can make owned buckets (a rename that does not
 * replace).  Returns 0 or -errno. */
int sv_owners_start(struct server *s);

/* CreateBucket, owned by the request's signer. */
int sv_create_bucket(struct call *k);

/* DeleteBucket of bfd, the request's bucket (the signer's). */
int sv_delete_bucket(struct call *k, int bfd);

/* ListBuckets: the signer's own (prefix, max-buckets,
 * continuation-token, bucket-region). */
int sv_list_buckets(struct call *k);

/* ------------------------------------------------- S3 over RDMA (--rdma) */

/* Listens for RDMA on s->port's number and serves logins from now on.
 * Returns 0 or an exit status, the reason on stderr. */
int sv_rdma_start(struct server *s);

/* Closes the listener and every RDMA connection; waits for them. */
void sv_rdma_stop(struct server *s);

/* Takes the request's x-amz-rdma-token, if any, for a data request (a
 * GetObject, PutObject or UploadPart): 0 with k->rdma set, or NULL when
 * there is none; else it was declined with an S3 error (1) or that
 * answer could not be sent (-EIO).  sv_rdma_drop() lets it go. */
int sv_rdma_take(struct call *k);
void sv_rdma_drop(struct call *k);

/* The token's buffer size: a GET's room, a PUT's exact length. */
uint64_t sv_rdma_size(const struct call *k);

/* A GET by RDMA: len bytes of fd from off into the client's buffer, in
 * halves of the registered buffer, reading the next from the file while
 * the last crosses.  Returns 0, -EIO (the RDMA side failed: the
 * connection is done for) or -errno (the file). */
int sv_rdma_send_file(struct call *k, int fd, uint64_t off, uint64_t len);

/* A PUT by RDMA: the next piece of the client's buffer, its bytes at *p
 * (valid until the next call), its length; 0 at the end, -EIO when the
 * RDMA side failed.  The piece after it is already on its way. */
ssize_t sv_rdma_read_next(struct call *k, const void **p);

/* Answers 500 S3RdmaIoError: 1, or -EIO when that could not be sent. */
int sv_rdma_fail(struct call *k);

/* x-amz-rdma-reply and x-amz-rdma-bytes-transferred, for k->rdma. */
void sv_rdma_headers(const struct call *k, struct s3_buf *h);

#endif
