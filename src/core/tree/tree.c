/* Directory trees as one pax stream (see tree.h for the format): what the
 * sender (tree_pack.c) and the receiver (tree_unpack.c) share. */
#include "core/tree/tree_int.h"

#include "core/io.h"
#include "core/units.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int tree_new_pipe(int fds[2])
{
	if (pipe2(fds, O_CLOEXEC))
		return -errno;
	/* Best effort: a pipe as large as a slot saves wakeups. */
	(void)fcntl(fds[1], F_SETPIPE_SZ, 1 << 20);
	return 0;
}

int tree_hash_fd(int fd, const uint8_t *key, uint8_t out[16])
{
	enum { BUF = 1 << 20 };
	XXH3_state_t *h = XXH3_createState();
	char *buf = malloc(BUF);
	XXH128_canonical_t c;
	unsigned char mac[EVP_MAX_MD_SIZE];
	unsigned int maclen = 0;
	int ret = 0;
	ssize_t n;

	if (!h || !buf) {
		ret = -ENOMEM;
		goto out;
	}
	XXH3_128bits_reset(h);
	while ((n = read(fd, buf, BUF)) != 0) {
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			ret = -errno;
			goto out;
		}
		XXH3_128bits_update(h, buf, (size_t)n);
	}
	XXH128_canonicalFromHash(&c, XXH3_128bits_digest(h));
	/* The digest alone would let anyone who sees a listing check a
	 * guess of a short file's content. */
	if (!HMAC(EVP_sha256(), key, RDX_LIST_KEY_LEN, c.digest, sizeof(c.digest), mac, &maclen))
		ret = -EIO;
	else
		memcpy(out, mac, 16);
	OPENSSL_cleanse(mac, sizeof(mac));
out:
	free(buf);
	XXH3_freeState(h);
	return ret;
}

int tree_hash_file(const char *path, const uint8_t *key, uint8_t out[16])
{
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC), ret;

	if (fd < 0)
		return -errno;
	ret = tree_hash_fd(fd, key, out);
	close(fd);
	return ret;
}

/* A received name is safe when it is relative and every component is a
 * real name: no empty one, no "." (a symlink or directory named "." would
 * be the root itself) and no "..".  One trailing slash (libarchive's mark
 * of a directory) is allowed. */
bool tree_name_safe(const char *p)
{
	const char *c = p;

	if (!*p || *p == '/')
		return false;
	while (*c) {
		const char *end = strchrnul(c, '/');
		size_t len = (size_t)(end - c);

		if (!len || (len == 1 && c[0] == '.') || (len == 2 && c[0] == '.' && c[1] == '.'))
			return false;
		if (*end && !end[1])
			break; /* "dir/" */
		c = *end ? end + 1 : end;
	}
	return true;
}


void tree_feed_init(struct feed *f)
{
	*f = (struct feed){ 0 };
	pthread_mutex_init(&f->lock, NULL);
	pthread_cond_init(&f->cond, NULL);
}

void tree_feed_destroy(struct feed *f)
{
	pthread_cond_destroy(&f->cond);
	pthread_mutex_destroy(&f->lock);
}

/* Sets eof or gone, and wakes whoever waits. */
void tree_feed_mark(struct feed *f, bool *flag)
{
	pthread_mutex_lock(&f->lock);
	*flag = true;
	pthread_cond_broadcast(&f->cond);
	pthread_mutex_unlock(&f->lock);
}

/* Waits on f for at most 100 ms (the caller rechecks a stop flag). */
void tree_feed_wait(struct feed *f)
{
	struct timespec dl;

	rdx_deadline_in(&dl, 100);
	pthread_cond_timedwait(&f->cond, &f->lock, &dl);
}
