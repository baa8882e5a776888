/* s3rdmapeer: an S3-over-RDMA client that holds its connection and shows
 * its token, for the Soft-RoCE tests that play a hostile or careless
 * client against rds3 serve --rdma (tests/rxe/s3.bats).
 *
 *   s3rdmapeer HOST:PORT LEN
 *
 * Connects and logs in as rds3 would (AWS_ACCESS_KEY_ID and
 * AWS_SECRET_ACCESS_KEY; anonymous when they are unset), fills its
 * registered buffer with 'P', prints "token TOKEN" for the buffer's first
 * LEN bytes, then reads commands from stdin:
 *
 *   sum N     prints "sum SHA256" of the buffer's first N bytes
 *   close     closes the connection, prints "closed"
 *
 * and exits at the end of stdin.  The tests edit the token to forge one
 * (another rkey, a range past the buffer) and send it with curl. */
#include "core/hex.h"
#include "s3/rdma.h"

#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CAP (1u << 20)

int main(int argc, char **argv)
{
	struct s3_config cfg = { 0 };
	struct s3_rdma *r = NULL;
	char why[256], tok[S3_RDMA_TOKEN_LEN + 1], line[64];
	size_t cap, len;
	unsigned char *buf;

	if (argc != 3 || (len = strtoul(argv[2], NULL, 10)) == 0 || len > CAP) {
		fprintf(stderr, "usage: s3rdmapeer HOST:PORT LEN (1..%u)\n", CAP);
		return 2;
	}
	cfg.host = argv[1];
	cfg.access_key = getenv("AWS_ACCESS_KEY_ID");
	cfg.secret_key = getenv("AWS_SECRET_ACCESS_KEY");
	cfg.no_sign = !cfg.access_key || !cfg.secret_key;
	if (s3_rdma_open(&cfg, NULL, CAP, 10000, NULL, &r, why, sizeof(why))) {
		printf("failed %s\n", why);
		return 1;
	}
	buf = s3_rdma_buf(r, &cap);
	memset(buf, 'P', cap);
	if (s3_rdma_token(r, len, tok))
		return 1;
	printf("token %s\n", tok);
	fflush(stdout);
	while (fgets(line, sizeof(line), stdin)) {
		unsigned char md[32];
		char hex[65];
		size_t n;

		if (r && sscanf(line, "sum %zu", &n) == 1 && n <= cap) {
			EVP_Digest(buf, n, md, NULL, EVP_sha256(), NULL);
			rdx_hex_encode(md, 32, hex);
			printf("sum %s\n", hex);
		} else if (!strncmp(line, "close", 5) && r) {
			s3_rdma_close(r);
			r = NULL;
			printf("closed\n");
		}
		fflush(stdout);
	}
	s3_rdma_close(r);
	return 0;
}
