/* aws-chunked, the body encoding of S3's streaming uploads
 * (x-amz-content-sha256: STREAMING-*; AWS's "sigv4-streaming" and
 * "sigv4-streaming-trailers" pages), decoded a piece at a time with no
 * I/O of its own, and the signatures that chain its chunks:
 *
 *   chunk    = HEX-SIZE [";chunk-signature=" SIG] CRLF  DATA CRLF
 *   last     = "0" [";chunk-signature=" SIG] CRLF
 *   trailers = *( NAME ":" VALUE CRLF )  ["x-amz-trailer-signature:" SIG CRLF]
 *   body     = *chunk last trailers CRLF
 *
 * A decoder holds one line at most (SV_AWSC_LINE_MAX): whatever the chunk
 * sizes, its memory is this struct. */
#ifndef RDS3_AWS_CHUNKED_H
#define RDS3_AWS_CHUNKED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SV_AWSC_LINE_MAX 256	/* a size line or a trailer, CRLF excluded */
#define SV_AWSC_TRAILERS_MAX 4	/* trailer lines, the signature's included */
#define SV_AWSC_SIG_LEN 64	/* a signature: lower-case hex SHA-256 */

enum sv_awsc_ev {
	SV_AWSC_NEED,	   /* every byte given was used: give more */
	SV_AWSC_DATA,	   /* *data, *len: bytes of the decoded body */
	SV_AWSC_CHUNK_END, /* a chunk's data is all there: size, sig (signed) */
	SV_AWSC_TRAILER,   /* name (lower case) and value of a trailer line */
	SV_AWSC_TRAILER_SIG, /* sig: x-amz-trailer-signature's value */
	SV_AWSC_END,	   /* the body's last byte was used */
};

struct sv_awsc {
	/* Set by the caller before the first step. */
	bool signed_chunks; /* each size line carries its chunk-signature */
	bool trailers;	    /* trailer lines may follow the last chunk */
	/* The last event's. */
	uint64_t size;		      /* SV_AWSC_CHUNK_END: the chunk's data length */
	char sig[SV_AWSC_SIG_LEN + 1]; /* SV_AWSC_CHUNK_END, SV_AWSC_TRAILER_SIG */
	const char *name, *value;     /* SV_AWSC_TRAILER: in line[] */
	const char *why;	      /* after an error: what was wrong, for the answer */
	/* The decoder's own. */
	int state;
	uint64_t left; /* of the current chunk's data */
	unsigned ntrailers;
	bool sig_seen;
	size_t line_len;
	char line[SV_AWSC_LINE_MAX + 2];
};

/* Starts d; signed_chunks and trailers as the x-amz-content-sha256 says. */
void sv_awsc_init(struct sv_awsc *d, bool signed_chunks, bool trailers);

/* Decodes from in[0..n): *used of them are taken (fewer than n only when
 * an event other than SV_AWSC_NEED comes back; call again with the rest).
 * Returns the event, or -EBADMSG (malformed: d->why says how; after it
 * the decoder stays failed).  SV_AWSC_DATA's bytes are in in[]. */
int sv_awsc_step(struct sv_awsc *d, const unsigned char *in, size_t n,
		 size_t *used, const unsigned char **data, size_t *len);

/* How many bytes of chunk data come next with no framing between: a
 * caller may read up to that many itself and pass them to
 * sv_awsc_take(), skipping a copy.  0 when framing comes next. */
uint64_t sv_awsc_data_left(const struct sv_awsc *d);

/* Takes n (at most sv_awsc_data_left()) bytes of data read directly. */
void sv_awsc_take(struct sv_awsc *d, size_t n);

/* The signature that chains to prev over one chunk (trailer false: its
 * data's hex SHA-256 in hash) or over the trailer lines (trailer true:
 * hash is the hex SHA-256 of "name:value\n" for each):
 *
 *   AWS4-HMAC-SHA256-PAYLOAD \n DATE \n SCOPE \n PREV \n SHA256("") \n HASH
 *   AWS4-HMAC-SHA256-TRAILER \n DATE \n SCOPE \n PREV \n HASH
 *
 * key is the request's SigV4 signing key; out the hex HMAC.  Returns 0
 * or -ENOMEM. */
int sv_awsc_sign(const unsigned char key[32], const char *date, const char *scope,
		 const char *prev, const char *hash, bool trailer,
		 char out[SV_AWSC_SIG_LEN + 1]);

#endif
