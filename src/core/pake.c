#include "core/pake.h"

#include <errno.h>
#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/kdf.h>
#include <openssl/obj_mac.h>
#include <openssl/sha.h>
#include <string.h>

/* RFC 9382, section 6: M and N for P-256, compressed.  Each is the hash
 * of a seed string mapped to the curve; nobody knows their discrete logs. */
static const uint8_t point_m[33] = {
	0x02, 0x88, 0x6e, 0x2f, 0x97, 0xac, 0xe4, 0x6e, 0x55, 0xba, 0x9d,
	0xd7, 0x24, 0x25, 0x79, 0xf2, 0x99, 0x3b, 0x64, 0xe1, 0x6e, 0xf3,
	0xdc, 0xab, 0x95, 0xaf, 0xd4, 0x97, 0x33, 0x3d, 0x8f, 0xa1, 0x2f,
};
static const uint8_t point_n[33] = {
	0x03, 0xd8, 0xbb, 0xd6, 0xc6, 0x39, 0xc6, 0x29, 0x37, 0xb0, 0x4d,
	0x99, 0x7f, 0x38, 0xc3, 0x77, 0x07, 0x19, 0xc6, 0x29, 0xd7, 0x01,
	0x4d, 0x49, 0xa2, 0x4b, 0x4f, 0x98, 0xba, 0xa1, 0x29, 0x2b, 0x49,
};

#define W_LABEL "rdxfer-2 spake2 w"

/* The group and a scratch context for one call. */
struct ec {
	EC_GROUP *g;
	BN_CTX *bn;
	const BIGNUM *order;
};

static int ec_open(struct ec *e)
{
	e->g = EC_GROUP_new_by_curve_name(NID_X9_62_prime256v1);
	e->bn = BN_CTX_secure_new();
	if (!e->g || !e->bn) {
		EC_GROUP_free(e->g);
		BN_CTX_free(e->bn);
		return -EIO;
	}
	e->order = EC_GROUP_get0_order(e->g);
	BN_CTX_start(e->bn);
	return 0;
}

/* BN_CTX_free() wipes every number of the pool (BN_clear_free): the
 * scalars taken from it need no clearing of their own. */
static void ec_close(struct ec *e)
{
	BN_CTX_end(e->bn);
	BN_CTX_free(e->bn);
	EC_GROUP_free(e->g);
}

/* A scalar in [1, order): the bytes as a number in the context's pool, or
 * NULL. */
static BIGNUM *scalar(struct ec *e, const uint8_t b[RDX_PAKE_SCALAR_LEN])
{
	BIGNUM *n = BN_CTX_get(e->bn);

	if (!n || !BN_bin2bn(b, RDX_PAKE_SCALAR_LEN, n) || BN_is_zero(n) ||
	    BN_cmp(n, e->order) >= 0)
		return NULL;
	BN_set_flags(n, BN_FLG_CONSTTIME);
	return n;
}

/* The role's own mask (M for A, N for B) or the peer's. */
static EC_POINT *mask_point(struct ec *e, enum rdx_pake_role role)
{
	EC_POINT *p = EC_POINT_new(e->g);
	const uint8_t *b = role == RDX_PAKE_A ? point_m : point_n;

	if (p && !EC_POINT_oct2point(e->g, p, b, sizeof(point_m), e->bn)) {
		EC_POINT_free(p);
		p = NULL;
	}
	return p;
}

static enum rdx_pake_role other(enum rdx_pake_role role)
{
	return role == RDX_PAKE_A ? RDX_PAKE_B : RDX_PAKE_A;
}

int rdx_pake_w(const void *key, size_t len, uint8_t w[RDX_PAKE_SCALAR_LEN])
{
	uint8_t h[SHA512_DIGEST_LENGTH];
	EVP_MD_CTX *md = EVP_MD_CTX_new();
	struct ec e;
	BIGNUM *n, *r;
	int ret = -EIO;

	if (!md)
		return -EIO;
	if (EVP_DigestInit_ex(md, EVP_sha512(), NULL) != 1 ||
	    EVP_DigestUpdate(md, W_LABEL, sizeof(W_LABEL) - 1) != 1 ||
	    EVP_DigestUpdate(md, key, len) != 1 ||
	    EVP_DigestFinal_ex(md, h, NULL) != 1) {
		EVP_MD_CTX_free(md);
		return -EIO;
	}
	EVP_MD_CTX_free(md);
	if (ec_open(&e))
		goto out;
	n = BN_CTX_get(e.bn);
	r = BN_CTX_get(e.bn);
	if (n && r && BN_bin2bn(h, sizeof(h), n) &&
	    BN_nnmod(r, n, e.order, e.bn) &&
	    BN_bn2binpad(r, w, RDX_PAKE_SCALAR_LEN) == RDX_PAKE_SCALAR_LEN)
		ret = 0;
	ec_close(&e);
out:
	OPENSSL_cleanse(h, sizeof(h));
	return ret;
}

int rdx_pake_start_with(struct rdx_pake *p, enum rdx_pake_role role,
			const uint8_t w[RDX_PAKE_SCALAR_LEN],
			const uint8_t secret[RDX_PAKE_SCALAR_LEN])
{
	EC_POINT *mask = NULL, *xg = NULL, *wm = NULL;
	struct ec e;
	BIGNUM *bw, *bs;
	int ret = -EIO;

	if (ec_open(&e))
		return -EIO;
	bw = scalar(&e, w);
	bs = scalar(&e, secret);
	if (!bw || !bs) {
		ret = -EINVAL;
		goto out;
	}
	mask = mask_point(&e, role);
	xg = EC_POINT_new(e.g);
	wm = EC_POINT_new(e.g);
	/* Two single multiplications, each on OpenSSL's constant-time path;
	 * a combined x*G + w*M would take the variable-time one. */
	if (!mask || !xg || !wm ||
	    !EC_POINT_mul(e.g, xg, bs, NULL, NULL, e.bn) ||
	    !EC_POINT_mul(e.g, wm, NULL, mask, bw, e.bn) ||
	    !EC_POINT_add(e.g, xg, xg, wm, e.bn) ||
	    EC_POINT_point2oct(e.g, xg, POINT_CONVERSION_UNCOMPRESSED, p->share,
			       RDX_PAKE_SHARE_LEN, e.bn) != RDX_PAKE_SHARE_LEN)
		goto out;
	p->role = role;
	memcpy(p->w, w, RDX_PAKE_SCALAR_LEN);
	memcpy(p->secret, secret, RDX_PAKE_SCALAR_LEN);
	ret = 0;
out:
	EC_POINT_clear_free(xg);
	EC_POINT_clear_free(wm);
	EC_POINT_free(mask);
	ec_close(&e);
	return ret;
}

int rdx_pake_start_w(struct rdx_pake *p, enum rdx_pake_role role,
		     const uint8_t w[RDX_PAKE_SCALAR_LEN])
{
	uint8_t s[RDX_PAKE_SCALAR_LEN];
	struct ec e;
	BIGNUM *n, *range;
	int ret = -EIO;

	if (ec_open(&e))
		return -EIO;
	range = BN_CTX_get(e.bn);
	n = BN_CTX_get(e.bn);
	/* Uniform in [1, order): drawn below order - 1, plus one. */
	if (n && BN_copy(range, e.order) && BN_sub_word(range, 1) &&
	    BN_priv_rand_range_ex(n, range, 0, e.bn) && BN_add_word(n, 1) &&
	    BN_bn2binpad(n, s, RDX_PAKE_SCALAR_LEN) == RDX_PAKE_SCALAR_LEN)
		ret = 0;
	ec_close(&e);
	if (!ret)
		ret = rdx_pake_start_with(p, role, w, s);
	OPENSSL_cleanse(s, sizeof(s));
	/* A w of 0 (one key in 2^256) cannot mask: no key of its own. */
	return ret == -EINVAL ? -EIO : ret;
}

int rdx_pake_start(struct rdx_pake *p, enum rdx_pake_role role, const void *key,
		   size_t len)
{
	uint8_t w[RDX_PAKE_SCALAR_LEN];
	int ret = rdx_pake_w(key, len, w);

	if (!ret)
		ret = rdx_pake_start_w(p, role, w);
	OPENSSL_cleanse(w, sizeof(w));
	return ret;
}

/* Appends a length (8 bytes, little-endian, as RFC 9382 writes it) and
 * the bytes to the transcript. */
static void tt_put(uint8_t *tt, size_t *n, const void *b, size_t len)
{
	for (int i = 0; i < 8; i++)
		tt[*n + i] = (uint8_t)((uint64_t)len >> (8 * i));
	*n += 8;
	if (len)
		memcpy(tt + *n, b, len);
	*n += len;
}

static int confirm_keys(const uint8_t ka[16], const struct rdx_pake_ctx *ctx,
			uint8_t out[32])
{
	static const char label[] = "ConfirmationKeys";
	EVP_KDF *kdf = EVP_KDF_fetch(NULL, "HKDF", NULL);
	EVP_KDF_CTX *kctx = kdf ? EVP_KDF_CTX_new(kdf) : NULL;
	uint8_t info[sizeof(label) - 1 + 256];
	OSSL_PARAM params[4], *q = params;
	int ok = 0;

	EVP_KDF_free(kdf);
	if (!kctx || ctx->aad_len > sizeof(info) - (sizeof(label) - 1))
		goto out;
	memcpy(info, label, sizeof(label) - 1);
	if (ctx->aad_len)
		memcpy(info + sizeof(label) - 1, ctx->aad, ctx->aad_len);
	*q++ = OSSL_PARAM_construct_utf8_string(OSSL_KDF_PARAM_DIGEST,
						(char *)"SHA256", 0);
	*q++ = OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_KEY, (void *)ka,
						 16);
	*q++ = OSSL_PARAM_construct_octet_string(
		OSSL_KDF_PARAM_INFO, info, sizeof(label) - 1 + ctx->aad_len);
	*q = OSSL_PARAM_construct_end();
	ok = EVP_KDF_derive(kctx, out, 32, params) == 1;
out:
	EVP_KDF_CTX_free(kctx);
	return ok ? 0 : -EIO;
}

int rdx_pake_finish(const struct rdx_pake *p, const struct rdx_pake_ctx *ctx,
		    const uint8_t peer[RDX_PAKE_SHARE_LEN],
		    struct rdx_pake_result *r)
{
	EC_POINT *pt = NULL, *wmask = NULL, *mask = NULL;
	uint8_t k[RDX_PAKE_SHARE_LEN], h[32], kc[32];
	uint8_t tt[4 * 8 + 3 * RDX_PAKE_SHARE_LEN + RDX_PAKE_SCALAR_LEN +
		   2 * (8 + 256)];
	const uint8_t *pa = p->role == RDX_PAKE_A ? p->share : peer;
	const uint8_t *pb = p->role == RDX_PAKE_A ? peer : p->share;
	unsigned int len;
	struct ec e;
	BIGNUM *bw, *bs;
	size_t n = 0;
	int ret = -EIO;

	if (ctx->id_a_len > 256 || ctx->id_b_len > 256)
		return -EINVAL;
	if (ec_open(&e))
		return -EIO;
	bw = scalar(&e, p->w);
	bs = scalar(&e, p->secret);
	pt = EC_POINT_new(e.g);
	wmask = EC_POINT_new(e.g);
	mask = mask_point(&e, other(p->role));
	if (!bw || !bs || !pt || !wmask || !mask)
		goto out;
	/* Only an uncompressed point of the curve, never the identity. */
	ret = -EINVAL;
	if (peer[0] != POINT_CONVERSION_UNCOMPRESSED ||
	    !EC_POINT_oct2point(e.g, pt, peer, RDX_PAKE_SHARE_LEN, e.bn) ||
	    EC_POINT_is_at_infinity(e.g, pt) ||
	    EC_POINT_is_on_curve(e.g, pt, e.bn) != 1)
		goto out;
	ret = -EIO;
	/* K = secret * (peer - w * peer's mask); P-256's cofactor is 1. */
	if (!EC_POINT_mul(e.g, wmask, NULL, mask, bw, e.bn) ||
	    !EC_POINT_invert(e.g, wmask, e.bn) ||
	    !EC_POINT_add(e.g, pt, pt, wmask, e.bn))
		goto out;
	if (EC_POINT_is_at_infinity(e.g, pt)) {
		ret = -EINVAL;
		goto out;
	}
	if (!EC_POINT_mul(e.g, pt, NULL, pt, bs, e.bn) ||
	    EC_POINT_is_at_infinity(e.g, pt) ||
	    EC_POINT_point2oct(e.g, pt, POINT_CONVERSION_UNCOMPRESSED, k,
			       sizeof(k), e.bn) != sizeof(k))
		goto out;

	tt_put(tt, &n, ctx->id_a, ctx->id_a_len);
	tt_put(tt, &n, ctx->id_b, ctx->id_b_len);
	tt_put(tt, &n, pa, RDX_PAKE_SHARE_LEN);
	tt_put(tt, &n, pb, RDX_PAKE_SHARE_LEN);
	tt_put(tt, &n, k, sizeof(k));
	tt_put(tt, &n, p->w, RDX_PAKE_SCALAR_LEN);
	/* Ke || Ka = Hash(TT); KcA || KcB from Ka. */
	if (!SHA256(tt, n, h) || confirm_keys(h + 16, ctx, kc) ||
	    !HMAC(EVP_sha256(), kc, 16, tt, n, r->conf_a, &len) ||
	    !HMAC(EVP_sha256(), kc + 16, 16, tt, n, r->conf_b, &len))
		goto out;
	memcpy(r->ke, h, RDX_PAKE_KEY_LEN);
	ret = 0;
out:
	EC_POINT_clear_free(pt);
	EC_POINT_clear_free(wmask);
	EC_POINT_free(mask);
	ec_close(&e);
	OPENSSL_cleanse(k, sizeof(k));
	OPENSSL_cleanse(h, sizeof(h));
	OPENSSL_cleanse(kc, sizeof(kc));
	OPENSSL_cleanse(tt, sizeof(tt));
	return ret;
}

int rdx_pake_confirm_ok(const uint8_t want[RDX_PAKE_CONFIRM_LEN],
			const uint8_t got[RDX_PAKE_CONFIRM_LEN])
{
	return CRYPTO_memcmp(want, got, RDX_PAKE_CONFIRM_LEN) == 0;
}

void rdx_pake_clear(struct rdx_pake *p)
{
	OPENSSL_cleanse(p, sizeof(*p));
}

void rdx_pake_result_clear(struct rdx_pake_result *r)
{
	OPENSSL_cleanse(r, sizeof(*r));
}
