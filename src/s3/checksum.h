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

/* The algorithm of a name as S3 writes it ("SHA256", any case: the value
 * of x-amz-checksum-algorithm); S3_CK_NONE for another. */
enum s3_ck s3_cksum_alg(const char *name);

/* The digest's length in bytes (4, 8, 20, 32; 0 for S3_CK_NONE). */
size_t s3_cksum_len(enum s3_ck alg);

/* Whether alg is one of the CRCs (whose digests combine). */
bool s3_cksum_is_crc(enum s3_ck alg);

/* Starts a digest.  Returns 0 or -ENOMEM. */
int s3_cksum_init(struct s3_cksum *c, enum s3_ck alg);
void s3_cksum_update(struct s3_cksum *c, const void *p, size_t n);

/* Ends the digest: its bytes (big-endian for a CRC) into out, and their
 * count.  The state is released. */
size_t s3_cksum_final(struct s3_cksum *c, unsigned char out[S3_CK_MAX]);

/* Releases a digest not ended (safe after s3_cksum_final too). */
void s3_cksum_release(struct s3_cksum *c);

/* The digest of n bytes at p into out: its length, 0 when out of memory. */
size_t s3_cksum_buf(enum s3_ck alg, const void *p, size_t n, unsigned char out[S3_CK_MAX]);

/* The CRC (alg one of the three, as s3_cksum_final gives it, read as a
 * big-endian number) of A followed by B, from crc1 of A, crc2 of B and
 * len2, B's length: how a FULL_OBJECT checksum is made of its parts'. */
uint64_t s3_crc_combine(enum s3_ck alg, uint64_t crc1, uint64_t crc2, uint64_t len2);

/* n digest bytes as base64 into out (NUL-terminated). */
void s3_cksum_b64(const unsigned char *d, size_t n, char out[48]);

/* The base64 value b64 as alg's digest into out: 0, or -EINVAL when it is
 * not the base64 of that many bytes. */
int s3_cksum_unb64(const char *b64, enum s3_ck alg, unsigned char out[S3_CK_MAX]);

#endif
