#include "core/seal.h"

#include "core/err.h"
#include "core/proto.h"

#include <errno.h>
#include <limits.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>

struct rdx_seal {
	EVP_CIPHER_CTX *enc;
	EVP_CIPHER_CTX *dec;
};

int rdx_seal_new(struct rdx_seal **out, const uint8_t key[32])
{
	struct rdx_seal *s = calloc(1, sizeof(*s));

	if (!s)
		return -ENOMEM;
	s->enc = EVP_CIPHER_CTX_new();
	s->dec = EVP_CIPHER_CTX_new();
	if (!s->enc || !s->dec ||
	    EVP_EncryptInit_ex(s->enc, EVP_aes_256_gcm(), NULL, key, NULL) != 1 ||
	    EVP_DecryptInit_ex(s->dec, EVP_aes_256_gcm(), NULL, key, NULL) != 1) {
		rdx_seal_free(s);
		return -EIO;
	}
	*out = s;
	return 0;
}

void rdx_seal_free(struct rdx_seal *s)
{
	if (!s)
		return;
	EVP_CIPHER_CTX_free(s->enc);
	EVP_CIPHER_CTX_free(s->dec);
	free(s);
}

static void make_iv(uint8_t iv[12], uint32_t domain, uint64_t seq)
{
	int i;

	for (i = 3; i >= 0; i--, domain >>= 8)
		iv[i] = (uint8_t)domain;
	for (i = 11; i >= 4; i--, seq >>= 8)
		iv[i] = (uint8_t)seq;
}

int rdx_seal(struct rdx_seal *s, uint32_t domain, uint64_t seq,
	     const uint8_t *aad, size_t aad_len, const uint8_t *in, size_t len,
	     uint8_t *out)
{
	uint8_t iv[12];
	int n;

	if (len > INT_MAX)
		return -EINVAL;
	make_iv(iv, domain, seq);
	if (EVP_EncryptInit_ex(s->enc, NULL, NULL, NULL, iv) != 1 ||
	    EVP_EncryptUpdate(s->enc, NULL, &n, aad, (int)aad_len) != 1 ||
	    EVP_EncryptUpdate(s->enc, out, &n, in, (int)len) != 1 ||
	    EVP_EncryptFinal_ex(s->enc, out + n, &n) != 1 ||
	    EVP_CIPHER_CTX_ctrl(s->enc, EVP_CTRL_GCM_GET_TAG, RDX_TAG_LEN,
				out + len) != 1)
		return -EIO;
	return 0;
}

int rdx_open(struct rdx_seal *s, uint32_t domain, uint64_t seq,
	     const uint8_t *aad, size_t aad_len, const uint8_t *in, size_t len,
	     uint8_t *out)
{
	uint8_t iv[12], tag[RDX_TAG_LEN];
	size_t clen;
	int n;

	if (len < RDX_TAG_LEN || len > INT_MAX)
		return -RDX_EINTEGRITY;
	clen = len - RDX_TAG_LEN;
	/* Copy the tag out first: in and out may be the same buffer. */
	memcpy(tag, in + clen, RDX_TAG_LEN);
	make_iv(iv, domain, seq);
	if (EVP_DecryptInit_ex(s->dec, NULL, NULL, NULL, iv) != 1 ||
	    EVP_DecryptUpdate(s->dec, NULL, &n, aad, (int)aad_len) != 1 ||
	    EVP_DecryptUpdate(s->dec, out, &n, in, (int)clen) != 1 ||
	    EVP_CIPHER_CTX_ctrl(s->dec, EVP_CTRL_GCM_SET_TAG, RDX_TAG_LEN, tag) != 1)
		return -EIO;
	if (EVP_DecryptFinal_ex(s->dec, out + n, &n) != 1) {
		/* Never hand out plaintext that failed authentication. */
		OPENSSL_cleanse(out, clen);
		return -RDX_EINTEGRITY;
	}
	return 0;
}
