/* rds3 serve: a streaming upload's body (x-amz-content-sha256:
 * STREAMING-*), decoded as the HTTP body is read (sv_body_read, so it may
 * itself be chunked): aws_chunked.c frames it, each chunk's signature is
 * checked in its chain when the chunk ends, the trailer's checksum is
 * kept for sv_take_body() to check, and x-amz-decoded-content-length is
 * held to.  Memory is the decoder and a small look-ahead for the framing
 * lines, whatever the chunk sizes: chunk data goes straight into the
 * caller's buffer.
 *
 *   client → PUT, x-amz-content-sha256: STREAMING-..., Authorization (seed)
 *            x-amz-decoded-content-length: N, [x-amz-trailer: x-amz-checksum-A]
 *   client → SIZE[;chunk-signature=S1] DATA ... 0[;chunk-signature=Sn]
 *            [x-amz-checksum-A:V] [x-amz-trailer-signature:St] CRLF
 *   server   S1 chains from the seed, each S from the one before, St from Sn;
 *            N bytes decoded; V is A of them → 200, else the S3 error and
 *            the temporary is discarded. */
#include "s3/serve/aws_chunked.h"
#include "s3/serve/serve_ops.h"

#include "core/err.h"
#include "core/hex.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LOOK 4096 /* framing read ahead; a chunk's data beyond it is read directly */

struct sv_stream {
	struct sv_awsc dec;
	const struct sv_stream_auth *sa;
	EVP_MD_CTX *chunk;   /* SHA-256 of the chunk's data so far (sa->chain) */
	EVP_MD_CTX *trailer; /* of the canonical trailer lines (sa->chain) */
	char prev[SV_AWSC_SIG_LEN + 1]; /* the chain's last signature */
	uint64_t want, got; /* x-amz-decoded-content-length, decoded so far */
	enum s3_ck alg;	    /* the checksum x-amz-trailer names */
	char sum[64];	    /* its trailer's value; "" until it came */
	bool end;
	unsigned char look[LOOK];
	size_t look_off, look_len;
	/* Why the body was refused. */
	int status;
	const char *code;
	char msg[200];
};

static int refuse(struct sv_stream *s, int status, const char *code, const char *msg)
{
	s->status = status;
	s->code = code;
	snprintf(s->msg, sizeof(s->msg), "%s", msg);
	return -EBADMSG;
}

int sv_stream_fail(struct call *k, struct sv_stream *s)
{
	return sv_fail(k, s->status, s->code, s->msg) ? -EIO : 1;
}

enum s3_ck sv_stream_sum(const struct sv_stream *s, const char **value)
{
	*value = s->sum[0] ? s->sum : NULL;
	return s->alg;
}

void sv_stream_free(struct sv_stream *s)
{
	if (!s)
		return;
	EVP_MD_CTX_free(s->chunk);
	EVP_MD_CTX_free(s->trailer);
	free(s);
}

int sv_stream_begin(struct call *k, uint64_t max, struct sv_stream **out)
{
	const char *dl = sv_hdr(k->r, "x-amz-decoded-content-length");
	const char *tr = sv_hdr(k->r, "x-amz-trailer");
	struct sv_stream *s;
	unsigned long long n = 0;
	char *end = NULL;

	*out = NULL;
	if (!dl)
		return sv_fail(k, 411, "MissingContentLength",
			       "an aws-chunked body needs x-amz-decoded-content-length") ? -EIO : 1;
	if (*dl >= '0' && *dl <= '9' && strlen(dl) <= 19)
		n = strtoull(dl, &end, 10);
	if (!end || *end)
		return sv_fail(k, 400, "InvalidArgument",
			       "x-amz-decoded-content-length is not a decimal byte count") ? -EIO : 1;
	if (n > max)
		return sv_fail(k, 400, "EntityTooLarge", "Your proposed upload exceeds the maximum allowed size") ? -EIO : 1;
	if (tr && !k->sa.trailers)
		return sv_fail(k, 400, "InvalidRequest",
			       "x-amz-trailer needs x-amz-content-sha256 STREAMING-UNSIGNED-PAYLOAD-TRAILER or STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER") ? -EIO : 1;
	if (tr && s3_cksum_named(tr) == S3_CK_NONE) {
		char msg[160];

		snprintf(msg, sizeof(msg), "rds3 serve takes one x-amz-checksum-* trailer, not '%.60s'", tr);
		return sv_fail(k, 400, "InvalidRequest", msg) ? -EIO : 1;
	}
	s = calloc(1, sizeof(*s));
	if (s && k->sa.chain) {
		s->chunk = EVP_MD_CTX_new();
		s->trailer = EVP_MD_CTX_new();
		if (!s->chunk || !s->trailer || !EVP_DigestInit_ex(s->chunk, EVP_sha256(), NULL) ||
		    !EVP_DigestInit_ex(s->trailer, EVP_sha256(), NULL)) {
			sv_stream_free(s);
			s = NULL;
		}
	}
	if (!s)
		return sv_fail(k, 500, "InternalError", "out of memory") ? -EIO : 1;
	sv_awsc_init(&s->dec, k->sa.signed_chunks, k->sa.trailers);
	s->sa = &k->sa;
	snprintf(s->prev, sizeof(s->prev), "%s", k->sa.seed);
	s->want = n;
	s->alg = tr ? s3_cksum_named(tr) : S3_CK_NONE;
	*out = s;
	return 0;
}

/* Raw bytes of the HTTP body: the count, 0 at its end, -EBADMSG (its own
 * chunked framing is broken) or -errno. */
static ssize_t raw_read(struct call *k, struct sv_stream *s, void *p, size_t n)
{
	ssize_t got = sv_body_read(k->c, k->r, p, n);

	if (got == -RDX_EPROTO)
		return refuse(s, 400, "IncompleteBody", "the chunked body is malformed");
	return got;
}

/* Decoded bytes: counted against x-amz-decoded-content-length, hashed
 * for the chunk's signature. */
static int data(struct sv_stream *s, const void *p, size_t n)
{
	if (n > s->want - s->got)
		return refuse(s, 400, "IncompleteBody",
			      "the aws-chunked body decodes to more than x-amz-decoded-content-length");
	s->got += n;
	if (s->sa->chain)
		EVP_DigestUpdate(s->chunk, p, n);
	return 0;
}

/* The signature of what the chain covers since its last link: 0 when it
 * is sig (and the chain moves on to it). */
static int link_ok(struct sv_stream *s, EVP_MD_CTX *md, bool trailer, const char *sig)
{
	unsigned char d[32];
	char hash[65], want[SV_AWSC_SIG_LEN + 1];

	if (!s->sa->chain)
		return 0;
	EVP_DigestFinal_ex(md, d, NULL);
	EVP_DigestInit_ex(md, EVP_sha256(), NULL);
	rdx_hex_encode(d, sizeof(d), hash);
	if (sv_awsc_sign(s->sa->key, s->sa->date, s->sa->scope, s->prev, hash, trailer, want))
		return refuse(s, 500, "InternalError", "out of memory");
	if (CRYPTO_memcmp(want, sig, SV_AWSC_SIG_LEN))
		return refuse(s, 403, "SignatureDoesNotMatch",
			      trailer ? "The trailer signature we calculated does not match the signature you provided."
				      : "The chunk signature we calculated does not match the signature you provided.");
	memcpy(s->prev, sig, sizeof(s->prev));
	return 0;
}

static int trailer(struct sv_stream *s, const char *name, const char *value)
{
	if (s->alg == S3_CK_NONE || strcmp(name, s3_cksum_header(s->alg)))
		return refuse(s, 400, "MalformedTrailerError",
			      "a trailer that x-amz-trailer does not name");
	if (s->sum[0])
		return refuse(s, 400, "MalformedTrailerError", "the checksum trailer came twice");
	if (!*value || strlen(value) >= sizeof(s->sum))
		return refuse(s, 400, "InvalidRequest", "the checksum trailer's value is not a checksum");
	snprintf(s->sum, sizeof(s->sum), "%s", value);
	if (s->sa->chain) {
		EVP_DigestUpdate(s->trailer, name, strlen(name));
		EVP_DigestUpdate(s->trailer, ":", 1);
		EVP_DigestUpdate(s->trailer, value, strlen(value));
		EVP_DigestUpdate(s->trailer, "\n", 1);
	}
	return 0;
}

/* The framing's end: the length and trailer held to, and nothing after
 * it in the HTTP body. */
static int finish(struct call *k, struct sv_stream *s)
{
	unsigned char extra;
	ssize_t n;

	if (s->got != s->want)
		return refuse(s, 400, "IncompleteBody",
			      "the aws-chunked body decodes to fewer bytes than x-amz-decoded-content-length");
	if (s->alg != S3_CK_NONE && !s->sum[0])
		return refuse(s, 400, "MalformedTrailerError",
			      "the trailer x-amz-trailer names did not come");
	if (s->look_off != s->look_len)
		return refuse(s, 400, "IncompleteBody", "bytes follow the end of the aws-chunked body");
	n = raw_read(k, s, &extra, 1);
	if (n > 0)
		return refuse(s, 400, "IncompleteBody", "bytes follow the end of the aws-chunked body");
	if (n < 0)
		return (int)n;
	s->end = true;
	return 0;
}

/* One event of the decoder over the look-ahead, at most room bytes of
 * data into p: the bytes given, or -EBADMSG / -errno. */
static ssize_t step(struct call *k, struct sv_stream *s, unsigned char *p, size_t room)
{
	size_t avail = s->look_len - s->look_off, used, len;
	const unsigned char *d;
	int ev, ret = 0;

	/* No more input than room: the data it yields fits. */
	ev = sv_awsc_step(&s->dec, s->look + s->look_off, avail < room ? avail : room, &used, &d, &len);
	s->look_off += used;
	switch (ev) {
	case SV_AWSC_NEED:
		return 0;
	case SV_AWSC_DATA:
		if ((ret = data(s, d, len)))
			return ret;
		memcpy(p, d, len);
		return (ssize_t)len;
	case SV_AWSC_CHUNK_END:
		return link_ok(s, s->chunk, false, s->dec.sig);
	case SV_AWSC_TRAILER:
		return trailer(s, s->dec.name, s->dec.value);
	case SV_AWSC_TRAILER_SIG:
		return link_ok(s, s->trailer, true, s->dec.sig);
	case SV_AWSC_END:
		return finish(k, s);
	default:
		return refuse(s, 400, "IncompleteBody", s->dec.why ? s->dec.why : "the aws-chunked body is malformed");
	}
}

ssize_t sv_stream_read(struct call *k, struct sv_stream *s, void *p, size_t n)
{
	unsigned char *out = p;
	size_t got = 0;

	while (got < n && !s->end) {
		uint64_t direct = sv_awsc_data_left(&s->dec);
		ssize_t r;
		int ret;

		if (s->look_off < s->look_len) {
			r = step(k, s, out + got, n - got);
			if (r < 0)
				return r;
			got += (size_t)r;
			continue;
		}
		if (!direct) {
			r = raw_read(k, s, s->look, sizeof(s->look));
			s->look_off = 0;
			s->look_len = r > 0 ? (size_t)r : 0;
		} else {
			/* Chunk data with nothing read ahead: straight in. */
			r = raw_read(k, s, out + got, direct < n - got ? (size_t)direct : n - got);
			if (r > 0) {
				sv_awsc_take(&s->dec, (size_t)r);
				if ((ret = data(s, out + got, (size_t)r)))
					return ret;
				got += (size_t)r;
			}
		}
		if (!r)
			return refuse(s, 400, "IncompleteBody",
				      "the body ended before its aws-chunked framing did");
		if (r < 0)
			return r;
	}
	return (ssize_t)got;
}
