/* aws-chunked decoding (aws_chunked.h): a state machine over whatever
 * pieces the body arrives in.  Strict where AWS's SDKs agree (CRLF after
 * every line, lower-case hex signatures, no chunk extension but the
 * signature), since a lenient reading of a signed body is a reading
 * someone else may make differently. */
#include "s3/serve/aws_chunked.h"

#include "core/hex.h"

#include <errno.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stdio.h>
#include <string.h>

enum {
	S_SIZE,	   /* a size line */
	S_DATA,	   /* left bytes of data */
	S_DATA_CR, /* the CRLF after the data */
	S_DATA_LF,
	S_TRAILER, /* trailer lines, up to the empty one */
	S_END,
	S_FAILED,
};

static const char sig_ext[] = ";chunk-signature=";
static const char sig_trailer[] = "x-amz-trailer-signature";

void sv_awsc_init(struct sv_awsc *d, bool signed_chunks, bool trailers)
{
	memset(d, 0, sizeof(*d));
	d->signed_chunks = signed_chunks;
	d->trailers = trailers;
	d->state = S_SIZE;
}

static int bad(struct sv_awsc *d, const char *why)
{
	d->why = why;
	d->state = S_FAILED;
	return -EBADMSG;
}

static bool is_sig(const char *s)
{
	return rdx_hex_is(s, SV_AWSC_SIG_LEN) && !s[SV_AWSC_SIG_LEN];
}

/* Adds byte b to the line: 1 when the line is whole (CRLF removed), 0
 * when more is needed, or -EBADMSG. */
static int line_add(struct sv_awsc *d, unsigned char b)
{
	if (b == '\n') {
		if (!d->line_len || d->line[d->line_len - 1] != '\r')
			return bad(d, "a line of the aws-chunked framing does not end in CRLF");
		d->line[--d->line_len] = '\0';
		return 1;
	}
	if (d->line_len > SV_AWSC_LINE_MAX) /* room for the CR only */
		return bad(d, "a line of the aws-chunked framing is too long");
	d->line[d->line_len++] = (char)b;
	return 0;
}

/* A size line: its data's length into d->left, its signature into d->sig. */
static int size_line(struct sv_awsc *d)
{
	const char *p = d->line;
	uint64_t v = 0;
	size_t i;

	for (i = 0; rdx_hex_digit(p[i]) >= 0; i++) {
		if (i == 16)
			return bad(d, "a chunk size has more than 16 hex digits");
		v = v << 4 | (unsigned)rdx_hex_digit(p[i]);
	}
	if (!i)
		return bad(d, "a chunk does not start with its size in hex");
	p += i;
	if (d->signed_chunks) {
		if (strncmp(p, sig_ext, sizeof(sig_ext) - 1) || !is_sig(p + sizeof(sig_ext) - 1))
			return bad(d, "a chunk has no chunk-signature (64 lower-case hex digits)");
		memcpy(d->sig, p + sizeof(sig_ext) - 1, SV_AWSC_SIG_LEN + 1);
	} else if (*p) {
		return bad(d, "a chunk of an unsigned body has an extension after its size");
	}
	d->left = v;
	d->size = v;
	return 0;
}

static bool token_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       (c && strchr("!#$%&'*+-.^_`|~", c));
}

/* A trailer line, or the empty one that ends them: the event. */
static int trailer_line(struct sv_awsc *d)
{
	char *colon, *v, *end;

	if (!d->line[0]) {
		if (d->signed_chunks && d->ntrailers && !d->sig_seen)
			return bad(d, "the trailers have no x-amz-trailer-signature");
		d->state = S_END;
		return SV_AWSC_END;
	}
	if (!d->trailers)
		return bad(d, "the last chunk is not followed by an empty line");
	if (d->sig_seen)
		return bad(d, "a trailer follows x-amz-trailer-signature");
	if (++d->ntrailers > SV_AWSC_TRAILERS_MAX)
		return bad(d, "too many trailer lines");
	colon = strchr(d->line, ':');
	if (!colon || colon == d->line)
		return bad(d, "a trailer line is not NAME:VALUE");
	*colon = '\0';
	for (char *p = d->line; *p; p++) {
		if (!token_char(*p))
			return bad(d, "a trailer's name is not an HTTP token");
		if (*p >= 'A' && *p <= 'Z')
			*p = (char)(*p + 32);
	}
	for (v = colon + 1; *v == ' ' || *v == '\t'; v++)
		;
	for (end = v + strlen(v); end > v && (end[-1] == ' ' || end[-1] == '\t'); end--)
		;
	*end = '\0';
	for (const char *p = v; *p; p++)
		if ((unsigned char)*p < 0x20 || (unsigned char)*p > 0x7e)
			return bad(d, "a trailer's value holds a control or non-ASCII byte");
	if (strcmp(d->line, sig_trailer)) {
		d->name = d->line;
		d->value = v;
		return SV_AWSC_TRAILER;
	}
	if (!d->signed_chunks)
		return bad(d, "an unsigned body has an x-amz-trailer-signature");
	if (!is_sig(v))
		return bad(d, "x-amz-trailer-signature is not 64 lower-case hex digits");
	memcpy(d->sig, v, SV_AWSC_SIG_LEN + 1);
	d->sig_seen = true;
	return SV_AWSC_TRAILER_SIG;
}

int sv_awsc_step(struct sv_awsc *d, const unsigned char *in, size_t n,
		 size_t *used, const unsigned char **data, size_t *len)
{
	size_t i = 0;
	int ret = SV_AWSC_NEED;

	*data = NULL;
	*len = 0;
	while (i < n && ret == SV_AWSC_NEED) {
		switch (d->state) {
		case S_SIZE:
		case S_TRAILER:
			ret = line_add(d, in[i++]);
			if (ret <= 0)
				break;
			d->line_len = 0;
			if (d->state == S_TRAILER) {
				ret = trailer_line(d);
				break;
			}
			ret = size_line(d);
			if (ret < 0)
				break;
			d->state = d->left ? S_DATA : S_TRAILER;
			/* The last chunk's (empty) data ends at its size line. */
			ret = d->left ? SV_AWSC_NEED : SV_AWSC_CHUNK_END;
			break;
		case S_DATA: {
			size_t take = n - i;

			if (take > d->left)
				take = (size_t)d->left;
			*data = in + i;
			*len = take;
			i += take;
			sv_awsc_take(d, take);
			ret = SV_AWSC_DATA;
			break;
		}
		case S_DATA_CR:
			if (in[i++] != '\r')
				ret = bad(d, "a chunk's data is longer than its size");
			else
				d->state = S_DATA_LF;
			break;
		case S_DATA_LF:
			if (in[i++] != '\n') {
				ret = bad(d, "a chunk's data is not followed by CRLF");
				break;
			}
			d->state = S_SIZE;
			ret = SV_AWSC_CHUNK_END;
			break;
		case S_END:
			ret = bad(d, "bytes follow the end of the aws-chunked body");
			break;
		default:
			ret = -EBADMSG;
			break;
		}
	}
	if (ret == SV_AWSC_NEED && d->state == S_END)
		ret = SV_AWSC_END;
	if (ret == SV_AWSC_NEED && d->state == S_FAILED)
		ret = -EBADMSG;
	*used = i;
	return ret;
}

uint64_t sv_awsc_data_left(const struct sv_awsc *d)
{
	return d->state == S_DATA ? d->left : 0;
}

void sv_awsc_take(struct sv_awsc *d, size_t n)
{
	d->left -= n;
	if (!d->left)
		d->state = S_DATA_CR;
}

int sv_awsc_sign(const unsigned char key[32], const char *date, const char *scope,
		 const char *prev, const char *hash, bool trailer,
		 char out[SV_AWSC_SIG_LEN + 1])
{
	static const char empty[] =
		"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
	unsigned char mac[32];
	unsigned int mlen = 0;
	char sts[768];
	int n;

	if (trailer)
		n = snprintf(sts, sizeof(sts), "AWS4-HMAC-SHA256-TRAILER\n%s\n%s\n%s\n%s",
			     date, scope, prev, hash);
	else
		n = snprintf(sts, sizeof(sts), "AWS4-HMAC-SHA256-PAYLOAD\n%s\n%s\n%s\n%s\n%s",
			     date, scope, prev, empty, hash);
	if (n < 0 || (size_t)n >= sizeof(sts))
		return -EINVAL;
	if (!HMAC(EVP_sha256(), key, 32, (const unsigned char *)sts, (size_t)n, mac, &mlen) ||
	    mlen != sizeof(mac))
		return -ENOMEM;
	rdx_hex_encode(mac, sizeof(mac), out);
	return 0;
}
