/* libFuzzer target: x-amz-rdma-token, which rds3 serve decodes from every
 * request that carries one.  Beyond "no crash, no out-of-bounds" (ASan),
 * checks the decoder's promise: it takes exactly the 81-character shape,
 * and what it takes encodes back to the same token (case aside). */
#include "fuzz.h"
#include "s3/rdma_token.h"

#include <stdlib.h>
#include <strings.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct s3_rdma_token t;
	char out[S3_RDMA_TOKEN_LEN + 1];

	if (s3_rdma_token_decode((const char *)data, size, &t))
		return 0;
	CHECK(size == S3_RDMA_TOKEN_LEN && t.rsize && t.qpn <= 0xffffff);
	CHECK(s3_rdma_token_encode(&t, out) == 0);
	CHECK(!strncasecmp(out, (const char *)data, S3_RDMA_TOKEN_LEN));
	return 0;
}
