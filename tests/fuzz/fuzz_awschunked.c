/* libFuzzer target: hostile bytes as an aws-chunked body to rds3 serve's
 * decoder (src/s3/serve/aws_chunked.c).  The first byte picks the mode
 * (bit 0: signed chunks, bit 1: trailers) and the second the size of the
 * pieces the rest arrives in.  The body is decoded three ways: in one
 * piece, in those pieces, and in those pieces with chunk data taken
 * directly (sv_awsc_take, as serve_stream.c reads it).  Whatever the bytes,
 * the decoder must neither fault nor loop, give no data outside its input
 * nor more data than it was given, and the three must agree: the same
 * decoded bytes, chunk ends, trailers and outcome. */
#include "fuzz.h"
#include "s3/serve/aws_chunked.h"

#include <errno.h>
#include <string.h>

struct outcome {
	int end;	  /* SV_AWSC_END, -EBADMSG, or SV_AWSC_NEED: input ran out */
	size_t data;	  /* decoded bytes */
	uint64_t sum;	  /* of them, order-sensitive */
	unsigned chunks, trailers, sigs;
};

static void mix(struct outcome *o, const unsigned char *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		o->sum = o->sum * 1099511628211u + p[i] + 1;
	o->data += n;
}

static struct outcome decode(const unsigned char *in, size_t size, size_t piece, bool direct,
			     bool signed_chunks, bool trailers)
{
	struct outcome o = { .end = SV_AWSC_NEED };
	struct sv_awsc d;
	size_t off = 0;

	sv_awsc_init(&d, signed_chunks, trailers);
	while (o.end == SV_AWSC_NEED) {
		size_t end = off + piece < size ? off + piece : size, used, len;
		const unsigned char *data;
		int ev;

		if (direct && sv_awsc_data_left(&d) && off < end) {
			size_t n = end - off;

			if (n > sv_awsc_data_left(&d))
				n = (size_t)sv_awsc_data_left(&d);
			sv_awsc_take(&d, n);
			mix(&o, in + off, n);
			off += n;
			continue;
		}
		ev = sv_awsc_step(&d, in + off, end - off, &used, &data, &len);
		CHECK(used <= end - off);
		if (ev == SV_AWSC_DATA)
			CHECK(len && data >= in + off && data + len <= in + off + used);
		else
			CHECK(!len);
		off += used;
		switch (ev) {
		case SV_AWSC_NEED:
			CHECK(off == end);
			if (off == size)
				return o; /* the body ended first */
			break;
		case SV_AWSC_DATA:
			mix(&o, data, len);
			break;
		case SV_AWSC_CHUNK_END:
			o.chunks++;
			CHECK(!signed_chunks || strlen(d.sig) == SV_AWSC_SIG_LEN);
			break;
		case SV_AWSC_TRAILER:
			CHECK(trailers && d.name[0] && strlen(d.name) + strlen(d.value) < sizeof(d.line));
			o.trailers++;
			break;
		case SV_AWSC_TRAILER_SIG:
			CHECK(signed_chunks && trailers && strlen(d.sig) == SV_AWSC_SIG_LEN);
			o.sigs++;
			break;
		case SV_AWSC_END:
			/* What follows the end is refused, and stays refused. */
			if (off < size) {
				CHECK(sv_awsc_step(&d, in + off, size - off, &used, &data, &len) == -EBADMSG);
				o.end = -EBADMSG;
			} else {
				o.end = ev;
			}
			break;
		default:
			CHECK(ev == -EBADMSG && d.why);
			CHECK(sv_awsc_step(&d, in, size, &used, &data, &len) == -EBADMSG);
			o.end = ev;
			break;
		}
		CHECK(o.data <= size);
	}
	return o;
}

static bool same(const struct outcome *a, const struct outcome *b)
{
	return a->end == b->end && a->data == b->data && a->sum == b->sum &&
	       a->chunks == b->chunks && a->trailers == b->trailers && a->sigs == b->sigs;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct outcome whole, pieces, direct;
	bool signed_chunks, trailers;
	size_t piece;

	if (size < 2)
		return 0;
	signed_chunks = data[0] & 1;
	trailers = data[0] & 2;
	piece = (size_t)data[1] + 1;
	data += 2;
	size -= 2;
	whole = decode(data, size, size ? size : 1, false, signed_chunks, trailers);
	pieces = decode(data, size, piece, false, signed_chunks, trailers);
	direct = decode(data, size, piece, true, signed_chunks, trailers);
	CHECK(same(&whole, &pieces));
	CHECK(same(&whole, &direct));
	return 0;
}
