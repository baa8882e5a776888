#include "local.h"
#include "s3.h"

#include "../core/err.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

const char *s3_last_part(const char *path)
{
	const char *s = strrchr(path, '/');

	return s ? s + 1 : path;
}

static int write_full(int fd, const void *p, size_t n)
{
	const char *c = p;

	while (n) {
		ssize_t w = write(fd, c, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -errno;
		c += w;
		n -= (size_t)w;
	}
	return 0;
}

/* Hashes the file fd from its start and gives its size. */
int s3_local_hash(int fd, uint64_t max, const atomic_int *stop, uint64_t *size,
		  struct s3_body_sum *sum)
{
	static const char hx[] = "0123456789abcdef";
	EVP_MD_CTX *md = EVP_MD_CTX_new(), *m5 = EVP_MD_CTX_new();
	char *hex = sum->sha256_hex;
	unsigned char d[32];
	unsigned int dl = 0;
	size_t cap = 1 << 20;
	char *buf = malloc(cap);
	int ret = 0, i;
	uint64_t off = 0;

	if (!md || !m5 || !buf || !EVP_DigestInit_ex(md, EVP_sha256(), NULL) ||
	    !EVP_DigestInit_ex(m5, EVP_md5(), NULL)) {
		ret = -ENOMEM;
		goto out;
	}
	for (;;) {
		ssize_t n = pread(fd, buf, cap, (off_t)off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			ret = -errno;
			goto out;
		}
		if (!n)
			break;
		if (stop && atomic_load(stop)) {
			ret = -RDX_EINTR;
			goto out;
		}
		EVP_DigestUpdate(md, buf, (size_t)n);
		EVP_DigestUpdate(m5, buf, (size_t)n);
		off += (uint64_t)n;
		if (off > max) {
			ret = -EFBIG;
			goto out;
		}
	}
	EVP_DigestFinal_ex(md, d, &dl);
	EVP_DigestFinal_ex(m5, sum->md5, &dl);
	for (i = 0; i < 32; i++) {
		hex[2 * i] = hx[d[i] >> 4];
		hex[2 * i + 1] = hx[d[i] & 15];
	}
	hex[64] = '\0';
	*size = off;
out:
	EVP_MD_CTX_free(md);
	EVP_MD_CTX_free(m5);
	free(buf);
	return ret;
}

/* A download target: a temporary next to the final name, renamed into
 * place only when the whole object is in; or stdout. */
int s3_out_write(void *ctx, const void *p, size_t n)
{
	struct s3_out *o = ctx;

	if (o->stop && atomic_load(o->stop))
		return -RDX_EINTR;
	return write_full(o->fd, p, n);
}

int s3_out_rewind(void *ctx)
{
	struct s3_out *o = ctx;

	if (ftruncate(o->fd, 0) || lseek(o->fd, 0, SEEK_SET))
		return -errno;
	return 0;
}

int s3_out_open(struct s3_out *o, const char *dst, const char *key,
		const atomic_int *stop)
{
	struct stat st;
	char dirbuf[4096], *dir;
	mode_t mask;

	memset(o, 0, sizeof(*o));
	o->fd = -1;
	o->stop = stop;
	if (!strcmp(dst, "-")) {
		o->fd = STDOUT_FILENO;
		o->is_stdout = true;
		return 0;
	}
	if (stat(dst, &st) == 0 && S_ISDIR(st.st_mode))
		snprintf(o->final, sizeof(o->final), "%s/%s", dst, s3_last_part(key));
	else
		snprintf(o->final, sizeof(o->final), "%s", dst);
	snprintf(dirbuf, sizeof(dirbuf), "%s", o->final);
	dir = dirname(dirbuf);
	if ((size_t)snprintf(o->tmp, sizeof(o->tmp), "%s/.%s.rdx-XXXXXX", dir,
			     s3_last_part(o->final)) >= sizeof(o->tmp))
		return -ENAMETOOLONG;
	o->fd = mkostemp(o->tmp, O_CLOEXEC);
	if (o->fd < 0)
		return -errno;
	/* mkstemp makes 0600; a download gets what a new file would. */
	mask = umask(0);
	umask(mask);
	if (fchmod(o->fd, 0666 & ~mask))
		return -errno;
	return 0;
}

int s3_out_publish(struct s3_out *o)
{
	if (o->is_stdout)
		return 0;
	if (fsync(o->fd) || close(o->fd)) {
		o->fd = -1;
		return -errno;
	}
	o->fd = -1;
	if (rename(o->tmp, o->final))
		return -errno;
	o->tmp[0] = '\0';
	return 0;
}

void s3_out_abort(struct s3_out *o)
{
	if (o->is_stdout)
		return;
	if (o->fd >= 0)
		close(o->fd);
	if (o->tmp[0])
		unlink(o->tmp);
}

