/* The x-amz-checksum-* digests S3 verifies on upload (CRC32, CRC32C,
 * CRC64NVME, SHA1, SHA256), as rds3 serve checks them: the digest of the
 * body, big-endian, base64 in the header. */
#ifndef RDX_S3_CHECKSUM_H
#define RDX_S3_CHECKSUM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum s3_ck {
	S3_CK_NONE,
	S3_CK_CRC32,
	S3_CK_CRC32C,
	S3_CK_CRC64NVME,
	S3_CK_SHA1,
	S3_CK_SHA256,
};

#define S3_CK_MAX 32 /* the largest digest: SHA-256 */

struct s3_cksum {
	enum s3_ck alg;
	uint64_t crc;
	void *md; /* EVP_MD_CTX, for SHA1 and SHA256 */
};

/* The algorithm a header is named for ("x-amz-checksum-crc32" ->
 * S3_CK_CRC32; any case); S3_CK_NONE for another name. */
enum s3_ck s3_cksum_named(const char *header);

/* The algorithm's name as S3 writes it in messages ("CRC32"). */
const char *s3_cksum_name(enum s3_ck alg);

/* Its header's name, in lower case ("x-amz-checksum-crc32"). */
const char *s3_cksum_header(enum s3_ck alg);

/* Starts a digest.  Returns 0 or -ENOMEM. */
int s3_cksum_init(struct s3_cksum *c, enum s3_ck alg);
void s3_cksum_update(struct s3_cksum *c, const void *p, size_t n);

/* Ends the digest: its bytes (big-endian for a CRC) into out, and their
 * count.  The state is released. */
size_t s3_cksum_final(struct s3_cksum *c, unsigned char out[S3_CK_MAX]);

/* Releases a digest not ended (safe after s3_cksum_final too). */
void s3_cksum_release(struct s3_cksum *c);

#endif
