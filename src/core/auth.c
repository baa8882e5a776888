#include "core/auth.h"

#include "core/err.h"
#include "core/io.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/kdf.h>
#include <openssl/rand.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int rdx_random(void *buf, size_t len)
{
	return RAND_bytes(buf, (int)len) == 1 ? 0 : -EIO;
}

int rdx_mac(const struct rdx_key *key, const char *label,
	    const uint8_t nonce_s[RDX_NONCE_LEN],
	    const uint8_t nonce_r[RDX_NONCE_LEN], const void *extra,
	    size_t extra_len, uint8_t out[RDX_MAC_LEN])
{
	uint8_t msg[64 + 2 * RDX_NONCE_LEN + RDX_CTRL_MAX];
	size_t llen = strlen(label), n = 0;
	unsigned int olen = 0;

	if (llen > 64 || extra_len > RDX_CTRL_MAX)
		return -EINVAL;
	memcpy(msg, label, llen);
	n += llen;
	memcpy(msg + n, nonce_s, RDX_NONCE_LEN);
	n += RDX_NONCE_LEN;
	memcpy(msg + n, nonce_r, RDX_NONCE_LEN);
	n += RDX_NONCE_LEN;
	if (extra_len)
		memcpy(msg + n, extra, extra_len);
	n += extra_len;
	if (!HMAC(EVP_sha256(), key->bytes, (int)key->len, msg, n, out, &olen) ||
	    olen != RDX_MAC_LEN)
		return -EIO;
	return 0;
}

bool rdx_mac_check(const struct rdx_key *key, const char *label,
		   const uint8_t nonce_s[RDX_NONCE_LEN],
		   const uint8_t nonce_r[RDX_NONCE_LEN], const void *extra,
		   size_t extra_len, const uint8_t mac[RDX_MAC_LEN])
{
	uint8_t want[RDX_MAC_LEN];

	if (rdx_mac(key, label, nonce_s, nonce_r, extra, extra_len, want))
		return false;
	return CRYPTO_memcmp(want, mac, RDX_MAC_LEN) == 0;
}

static int hkdf(const struct rdx_key *key, const uint8_t *salt,
		size_t salt_len, const char *info, uint8_t out[32])
{
	EVP_KDF *kdf = EVP_KDF_fetch(NULL, "HKDF", NULL);
	EVP_KDF_CTX *ctx;
	OSSL_PARAM params[5], *p = params;
	int ok;

	if (!kdf)
		return -EIO;
	ctx = EVP_KDF_CTX_new(kdf);
	EVP_KDF_free(kdf);
	if (!ctx)
		return -EIO;
	*p++ = OSSL_PARAM_construct_utf8_string(OSSL_KDF_PARAM_DIGEST,
						(char *)"SHA256", 0);
	*p++ = OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_KEY, key->bytes,
						 key->len);
	*p++ = OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_SALT,
						 (void *)salt, salt_len);
	*p++ = OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_INFO,
						 (void *)info, strlen(info));
	*p = OSSL_PARAM_construct_end();
	ok = EVP_KDF_derive(ctx, out, 32, params);
	EVP_KDF_CTX_free(ctx);
	return ok == 1 ? 0 : -EIO;
}

int rdx_derive_keys(const struct rdx_key *key,
		    const uint8_t nonce_s[RDX_NONCE_LEN],
		    const uint8_t nonce_r[RDX_NONCE_LEN], uint8_t s2r[32],
		    uint8_t r2s[32])
{
	uint8_t salt[2 * RDX_NONCE_LEN];
	int ret;

	memcpy(salt, nonce_s, RDX_NONCE_LEN);
	memcpy(salt + RDX_NONCE_LEN, nonce_r, RDX_NONCE_LEN);
	ret = hkdf(key, salt, sizeof(salt), "rdxfer-2 sender to receiver", s2r);
	if (!ret)
		ret = hkdf(key, salt, sizeof(salt), "rdxfer-2 receiver to sender",
			   r2s);
	return ret;
}

static int key_set(struct rdx_key *key, const char *s, size_t len)
{
	if (len == 0)
		return -RDX_EUSAGE;
	key->bytes = malloc(len);
	if (!key->bytes)
		return -ENOMEM;
	memcpy(key->bytes, s, len);
	key->len = len;
	return 0;
}

static int key_from_file(struct rdx_key *key, const char *path)
{
	char buf[4096];
	ssize_t n;
	size_t len;
	int fd, ret;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = rdx_read_full(fd, buf, sizeof(buf), NULL);
	close(fd);
	if (n < 0)
		return (int)n;
	/* The first line is the key; a trailing CR/LF is not part of it. */
	len = 0;
	while (len < (size_t)n && buf[len] != '\n' && buf[len] != '\r')
		len++;
	ret = key_set(key, buf, len);
	OPENSSL_cleanse(buf, sizeof(buf));
	return ret;
}

int rdx_key_load(struct rdx_key *key, const char *arg, const char *key_file)
{
	const char *env = getenv("RDX_KEY");

	key->bytes = NULL;
	key->len = 0;
	if (arg && key_file)
		return -RDX_EUSAGE;
	if (arg)
		return key_set(key, arg, strlen(arg));
	if (key_file)
		return key_from_file(key, key_file);
	if (env)
		return key_set(key, env, strlen(env));
	return -RDX_EUSAGE;
}

int rdx_key_read_line(struct rdx_key *key, int fd)
{
	char buf[4096];
	size_t len = 0;
	int ret = 0;

	key->bytes = NULL;
	key->len = 0;
	/* One byte at a time: whatever follows the line (rdsend --server's
	 * data) stays unread for its reader. */
	for (;;) {
		ssize_t n = read(fd, buf + len, 1);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			ret = -errno;
			break;
		}
		if (n == 0 || buf[len] == '\n')
			break;
		if (++len == sizeof(buf)) {
			ret = -E2BIG;
			break;
		}
	}
	if (!ret && len && buf[len - 1] == '\r')
		len--;
	if (!ret)
		ret = key_set(key, buf, len);
	OPENSSL_cleanse(buf, sizeof(buf));
	return ret;
}

void rdx_key_release(struct rdx_key *key)
{
	if (key->bytes) {
		OPENSSL_cleanse(key->bytes, key->len);
		free(key->bytes);
	}
	key->bytes = NULL;
	key->len = 0;
}
