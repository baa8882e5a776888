/* rds3's local side: hashing a file that goes up in one PutObject, and
 * landing what comes down under a temporary name that is renamed into
 * place only when complete. */
#ifndef RDS3_LOCAL_H
#define RDS3_LOCAL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct s3_body_sum;

/* Hashes the file fd from its start (SHA-256 and MD5 into sum) and gives
 * its size.  More than max bytes is -EFBIG; stop set is -RDX_EINTR.
 * Returns 0 or -errno. */
int s3_local_hash(int fd, uint64_t max, const atomic_int *stop, uint64_t *size,
		  struct s3_body_sum *sum);

/* A download target: "-" is stdout; a directory gets the key's last part
 * inside it; a file is written as .NAME.rdx-XXXXXX beside it. */
struct s3_out {
	int fd;
	bool is_stdout;
	const atomic_int *stop;
	char tmp[4096];	  /* "" once renamed or for stdout */
	char final[4096];
};

/* Opens the target for dst (see above).  Returns 0 or -errno; on error
 * out->final names what could not be written and s3_out_abort() cleans. */
int s3_out_open(struct s3_out *o, const char *dst, const char *key,
		const atomic_int *stop);

/* Sink callbacks: write all of p (-errno, -RDX_EINTR when stopped), and
 * start over empty for a retry. */
int s3_out_write(void *o, const void *p, size_t n);
int s3_out_rewind(void *o);

/* Syncs, closes and renames the temporary to the final name. */
int s3_out_publish(struct s3_out *o);

/* Closes and removes the temporary (nothing for stdout). */
void s3_out_abort(struct s3_out *o);

/* The part of path after its last '/'. */
const char *s3_last_part(const char *path);

#endif
