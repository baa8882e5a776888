/* The one full-length read/write loop for files and pipes. */
#ifndef RDX_IO_H
#define RDX_IO_H

#include <stdatomic.h>
#include <stddef.h>
#include <sys/types.h>

/* Reads until len bytes arrived or EOF, retrying on EINTR and short counts.
 * With stop non-NULL the wait is sliced by poll(2) so that a set *stop ends
 * it with -ECANCELED.  Returns the bytes read (less than len only at EOF) or
 * -errno. */
ssize_t rdx_read_full(int fd, void *buf, size_t len, const atomic_int *stop);

/* Writes all len bytes, same conventions as rdx_read_full(); returns len or
 * -errno. */
ssize_t rdx_write_full(int fd, const void *buf, size_t len,
		       const atomic_int *stop);

/* pread(2) until len bytes or EOF; returns bytes read or -errno. */
ssize_t rdx_pread_full(int fd, void *buf, size_t len, off_t off);

/* pwrite(2) all len bytes; returns len or -errno. */
ssize_t rdx_pwrite_full(int fd, const void *buf, size_t len, off_t off);

#endif
