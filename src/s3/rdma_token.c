/* The x-amz-rdma-token descriptor: see rdma_token.h. */
#include "s3/rdma_token.h"

#include "core/hex.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

int s3_rdma_token_encode(const struct s3_rdma_token *t,
			 char out[S3_RDMA_TOKEN_LEN + 1])
{
	int n, i;

	if (t->qpn > 0xffffffu)
		return -ERANGE;
	n = snprintf(out, S3_RDMA_TOKEN_LEN + 1, "%016llx:%08x:%08x:%04x:%06x:%1x:",
		     (unsigned long long)t->raddr, (unsigned)t->rsize, (unsigned)t->rkey,
		     (unsigned)t->lid, (unsigned)t->qpn, t->has_gid ? 1u : 0u);
	for (i = 0; i < 16; i++)
		n += snprintf(out + n, S3_RDMA_TOKEN_LEN + 1 - (size_t)n, "%02x", t->gid[i]);
	return n == S3_RDMA_TOKEN_LEN ? 0 : -ERANGE;
}

/* Exactly digits hex digits at *p, then sep (0: the end); *p moves on. */
static int field(const char **p, unsigned digits, char sep, uint64_t *v)
{
	uint64_t x = 0;
	unsigned i;

	for (i = 0; i < digits; i++) {
		int d = rdx_hex_digit((*p)[i]);

		if (d < 0)
			return -EINVAL;
		x = x << 4 | (unsigned)d;
	}
	if (sep && (*p)[digits] != sep)
		return -EINVAL;
	*p += digits + (sep ? 1 : 0);
	*v = x;
	return 0;
}

int s3_rdma_token_decode(const char *s, size_t n, struct s3_rdma_token *t)
{
	static const unsigned width[6] = { 16, 8, 8, 4, 6, 1 };
	struct s3_rdma_token r = { 0 };
	uint64_t v[6], b;
	const char *p = s;
	unsigned i;

	if (n != S3_RDMA_TOKEN_LEN)
		return -EINVAL;
	for (i = 0; i < 6; i++)
		if (field(&p, width[i], ':', &v[i]))
			return -EINVAL;
	for (i = 0; i < 16; i++) {
		if (field(&p, 2, 0, &b))
			return -EINVAL;
		r.gid[i] = (uint8_t)b;
	}
	if (v[1] == 0 || v[5] > 1)
		return -EINVAL;
	r.raddr = v[0];
	r.rsize = (uint32_t)v[1];
	r.rkey = (uint32_t)v[2];
	r.lid = (uint16_t)v[3];
	r.qpn = (uint32_t)v[4];
	r.has_gid = v[5] == 1;
	*t = r;
	return 0;
}
