/* The x-amz-rdma-token header's value: the cuObject buffer descriptor
 * that NooBaa checks strictly, exactly 81 ASCII characters,
 *
 *   %016llx:%08x:%08x:%04x:%06x:%1x:  then the GID's 32 hex digits
 *   raddr   :rsize:rkey:lid :qpn :has_gid:gid
 *
 * raddr, rsize and rkey name the client's registered buffer (for a PUT,
 * rsize is the payload's exact length; for a GET, the buffer's room);
 * lid, qpn and gid name the queue pair the server reaches it through.
 * The decoder is the server's first check of every token: it takes
 * exactly this shape, upper or lower case hex, and nothing else. */
#ifndef RDS3_RDMA_TOKEN_H
#define RDS3_RDMA_TOKEN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define S3_RDMA_TOKEN_LEN 81

struct s3_rdma_token {
	uint64_t raddr;
	uint32_t rsize;
	uint32_t rkey;
	uint16_t lid;
	uint32_t qpn; /* 24 bits */
	bool has_gid;
	uint8_t gid[16];
};

/* Writes t as 81 characters and a NUL into out.  Returns 0, or -ERANGE
 * for a qpn past 24 bits. */
int s3_rdma_token_encode(const struct s3_rdma_token *t,
			 char out[S3_RDMA_TOKEN_LEN + 1]);

/* Reads exactly one token of n bytes (no NUL needed).  Returns 0, or
 * -EINVAL for anything else (length, a separator, a non-hex digit, a
 * has_gid other than 0 or 1, a zero rsize); t is untouched then. */
int s3_rdma_token_decode(const char *s, size_t n, struct s3_rdma_token *t);

#endif
