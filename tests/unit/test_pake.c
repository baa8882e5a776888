/* SPAKE2 (src/core/pake.c) against RFC 9382's test vectors, both roles
 * against each other, and every share it must refuse. */
#include "core/pake.h"
#include "tap.h"

#include <errno.h>
#include <stdbool.h>
#include <openssl/bn.h>
#include <openssl/ec.h>
#include <openssl/obj_mac.h>
#include <string.h>

/* RFC 9382 ("SPAKE2, a PAKE"), Appendix B, SPAKE2-P256-SHA256-HKDF-HMAC:
 * all four vectors as printed there (w, x and y given; AAD empty). */
static const struct vector {
	const char *id_a, *id_b;
	const char *w, *x, *pa, *y, *pb, *ke, *conf_a, *conf_b;
} vectors[] = {
	{
		.id_a = "server",
		.id_b = "client",
		.w = "2ee57912099d31560b3a44b1184b9b4866e904c49d12ac5042c97dca461b1a5f",
		.x = "43dd0fd7215bdcb482879fca3220c6a968e66d70b1356cac18bb26c84a78d729",
		.pa = "04a56fa807caaa53a4d28dbb9853b9815c61a411118a6fe516a8798434751470"
			"f9010153ac33d0d5f2047ffdb1a3e42c9b4e6be662766e1eeb4116988ede5f91"
			"2c",
		.y = "dcb60106f276b02606d8ef0a328c02e4b629f84f89786af5befb0bc75b6e66be",
		.pb = "0406557e482bd03097ad0cbaa5df82115460d951e3451962f1eaf4367a420676"
			"d09857ccbc522686c83d1852abfa8ed6e4a1155cf8f1543ceca528afb591a1e0"
			"b7",
		.ke = "0e0672dc86f8e45565d338b0540abe69",
		.conf_a = "58ad4aa88e0b60d5061eb6b5dd93e80d9c4f00d127c65b3b35b1b5281fee38f0",
		.conf_b = "d3e2e547f1ae04f2dbdbf0fc4b79f8ecff2dff314b5d32fe9fcef2fb26dc459b",
	},
	{
		.id_a = "",
		.id_b = "client",
		.w = "0548d8729f730589e579b0475a582c1608138ddf7054b73b5381c7e883e2efae",
		.x = "403abbe3b1b4b9ba17e3032849759d723939a27a27b9d921c500edde18ed654b",
		.pa = "04a897b769e681c62ac1c2357319a3d363f610839c4477720d24cbe32f5fd85f"
			"44fb92ba966578c1b712be6962498834078262caa5b441ecfa9d4a9485720e91"
			"8a",
		.y = "903023b6598908936ea7c929bd761af6039577a9c3f9581064187c3049d87065",
		.pb = "04e0f816fd1c35e22065d5556215c097e799390d16661c386e0ecc84593974a6"
			"1b881a8c82327687d0501862970c64565560cb5671f696048050ca66ca5f8cc7"
			"fc",
		.ke = "642f05c473c2cd79909f9a841e2f30a7",
		.conf_a = "47d29e6666af1b7dd450d571233085d7a9866e4d49d2645e2df975489521232b",
		.conf_b = "3313c5cefc361d27fb16847a91c2a73b766ffa90a4839122a9b70a2f6bd1d6df",
	},
	{
		.id_a = "server",
		.id_b = "",
		.w = "626e0cdc7b14c9db3e52a0b1b3a768c98e37852d5db30febe0497b14eae8c254",
		.x = "07adb3db6bc623d3399726bfdbfd3d15a58ea776ab8a308b00392621291f9633",
		.pa = "04f88fb71c99bfffaea370966b7eb99cd4be0ff1a7d335caac4211c4afd855e2"
			"e15a873b298503ad8ba1d9cbb9a392d2ba309b48bfd7879aefd0f2cea6009763"
			"b0",
		.y = "b6a4fc8dbb629d4ba51d6f91ed1532cf87adec98f25dd153a75accafafedec16",
		.pb = "040c269d6be017dccb15182ac6bfcd9e2a14de019dd587eaf4bdfd353f031101"
			"e7cca177f8eb362a6e83e7d5e729c0732e1b528879c086f39ba0f31a9661bd34"
			"db",
		.ke = "005184ff460da2ce59062c87733c299c",
		.conf_a = "bc9f9bbe99f26d0b2260e6456e05a86196a3307ec6663a18bf6ac825736533b2",
		.conf_b = "c2370e1bf813b086dff0d834e74425a06e6390f48f5411900276dcccc5a297ec",
	},
	{
		.id_a = "",
		.id_b = "",
		.w = "7bf46c454b4c1b25799527d896508afd5fc62ef4ec59db1efb49113063d70cca",
		.x = "8cef65df64bb2d0f83540c53632de911b5b24b3eab6cc74a97609fd659e95473",
		.pa = "04a65b367a3f613cf9f0654b1b28a1e3a8a40387956c8ba6063e8658563890f4"
			"6ca1ef6a676598889fc28de2950ab8120b79a5ef1ea4c9f44bc98f585634b46d"
			"66",
		.y = "d7a66f64074a84652d8d623a92e20c9675c61cb5b4f6a0063e4648a2fdc02d53",
		.pb = "04589f13218822710d98d8b2123a079041052d9941b9cf88c6617ddb2fcc0494"
			"662eea8ba6b64692dc318250030c6af045cb738bc81ba35b043c3dcb46adf6f5"
			"8d",
		.ke = "fc6374762ba5cf11f4b2caa08b2cd1b9",
		.conf_a = "dfb4db8d48ae5a675963ea5e6c19d98d4ea028d8e898dad96ea19a80ade95dca",
		.conf_b = "d0f0609d1613138d354f7e95f19fb556bf52d751947241e8c7118df5ef0ae175",
	},
};

static void unhex(const char *h, uint8_t *out, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		unsigned v;

		sscanf(h + 2 * i, "%2x", &v);
		out[i] = (uint8_t)v;
	}
}

static bool same(const uint8_t *got, const char *hex, size_t n)
{
	uint8_t want[RDX_PAKE_SHARE_LEN];

	unhex(hex, want, n);
	return strlen(hex) == 2 * n && memcmp(got, want, n) == 0;
}

static void test_vectors(void)
{
	for (size_t i = 0; i < sizeof(vectors) / sizeof(vectors[0]); i++) {
		const struct vector *v = &vectors[i];
		struct rdx_pake_ctx ctx = {
			.id_a = v->id_a, .id_a_len = strlen(v->id_a),
			.id_b = v->id_b, .id_b_len = strlen(v->id_b),
		};
		uint8_t w[32], x[32], y[32], pa[65], pb[65];
		struct rdx_pake a, b;
		struct rdx_pake_result ra, rb;

		unhex(v->w, w, 32);
		unhex(v->x, x, 32);
		unhex(v->y, y, 32);
		unhex(v->pa, pa, 65);
		unhex(v->pb, pb, 65);
		CHECK(rdx_pake_start_with(&a, RDX_PAKE_A, w, x) == 0 &&
		      same(a.share, v->pa, 65), "vector %zu: pA = x*G + w*M", i + 1);
		CHECK(rdx_pake_start_with(&b, RDX_PAKE_B, w, y) == 0 &&
		      same(b.share, v->pb, 65), "vector %zu: pB = y*G + w*N", i + 1);
		CHECK(rdx_pake_finish(&a, &ctx, pb, &ra) == 0 && same(ra.ke, v->ke, 16) &&
		      same(ra.conf_a, v->conf_a, 32) && same(ra.conf_b, v->conf_b, 32),
		      "vector %zu: A's Ke, cA and cB", i + 1);
		CHECK(rdx_pake_finish(&b, &ctx, pa, &rb) == 0 && same(rb.ke, v->ke, 16) &&
		      same(rb.conf_a, v->conf_a, 32) && same(rb.conf_b, v->conf_b, 32),
		      "vector %zu: B's Ke, cA and cB", i + 1);
	}
}

static const struct rdx_pake_ctx rdx_ctx = {
	.id_a = "a", .id_a_len = 1, .id_b = "b", .id_b_len = 1,
	.aad = "nonces", .aad_len = 6,
};

/* One run between two keys; 1 when both sides got the same Ke and each
 * side's confirmation checks out at the other. */
static int run(const char *ka, const char *kb)
{
	struct rdx_pake a, b;
	struct rdx_pake_result ra, rb;

	if (rdx_pake_start(&a, RDX_PAKE_A, ka, strlen(ka)) ||
	    rdx_pake_start(&b, RDX_PAKE_B, kb, strlen(kb)) ||
	    rdx_pake_finish(&a, &rdx_ctx, b.share, &ra) ||
	    rdx_pake_finish(&b, &rdx_ctx, a.share, &rb))
		return -1;
	return !memcmp(ra.ke, rb.ke, sizeof(ra.ke)) &&
	       rdx_pake_confirm_ok(ra.conf_a, rb.conf_a) &&
	       rdx_pake_confirm_ok(ra.conf_b, rb.conf_b);
}

static void test_runs(void)
{
	struct rdx_pake a1, a2;
	uint8_t w1[32], w2[32];

	CHECK(run("dragon2024", "dragon2024") == 1, "the same key: same Ke, confirmations verify");
	CHECK(run("dragon2024", "dragon2025") == 0, "another key: nothing verifies");
	CHECK(run("k", "k") == 1 && run("k", "K") == 0, "one-byte keys");
	CHECK(rdx_pake_start(&a1, RDX_PAKE_A, "k", 1) == 0 &&
	      rdx_pake_start(&a2, RDX_PAKE_A, "k", 1) == 0 &&
	      memcmp(a1.share, a2.share, sizeof(a1.share)) && memcmp(a1.secret, a2.secret, 32),
	      "every start draws a fresh scalar and share");
	CHECK(rdx_pake_w("k", 1, w1) == 0 && rdx_pake_w("k", 1, w2) == 0 &&
	      !memcmp(w1, w2, 32) && rdx_pake_w("K", 1, w2) == 0 && memcmp(w1, w2, 32),
	      "w depends on the key alone");
}

/* w*N as a peer's share: it unmasks to the identity at A. */
static void mask_only(const uint8_t w[32], uint8_t out[65])
{
	static const char n_hex[] =
		"03d8bbd6c639c62937b04d997f38c3770719c629d7014d49a24b4f98baa1292b49";
	EC_GROUP *g = EC_GROUP_new_by_curve_name(NID_X9_62_prime256v1);
	EC_POINT *n = EC_POINT_new(g), *r = EC_POINT_new(g);
	BIGNUM *bw = BN_bin2bn(w, 32, NULL);
	uint8_t nb[33];

	unhex(n_hex, nb, 33);
	EC_POINT_oct2point(g, n, nb, 33, NULL);
	EC_POINT_mul(g, r, NULL, n, bw, NULL);
	EC_POINT_point2oct(g, r, POINT_CONVERSION_UNCOMPRESSED, out, 65, NULL);
	BN_free(bw);
	EC_POINT_free(n);
	EC_POINT_free(r);
	EC_GROUP_free(g);
}

static void test_refusals(void)
{
	struct rdx_pake a, b;
	struct rdx_pake_result r;
	uint8_t bad[65], zero[32] = {0}, order[32];

	rdx_pake_start(&a, RDX_PAKE_A, "k", 1);
	rdx_pake_start(&b, RDX_PAKE_B, "k", 1);
	memcpy(bad, b.share, 65);
	bad[0] = 0x02;
	CHECK(rdx_pake_finish(&a, &rdx_ctx, bad, &r) == -EINVAL,
	      "a share that is not uncompressed is refused");
	memcpy(bad, b.share, 65);
	bad[64] ^= 1;
	CHECK(rdx_pake_finish(&a, &rdx_ctx, bad, &r) == -EINVAL,
	      "a share off the curve is refused");
	memset(bad, 0, 65);
	CHECK(rdx_pake_finish(&a, &rdx_ctx, bad, &r) == -EINVAL,
	      "an all-zero share is refused");
	mask_only(a.w, bad);
	CHECK(rdx_pake_finish(&a, &rdx_ctx, bad, &r) == -EINVAL,
	      "a share of w*N alone (unmasks to the identity) is refused");
	unhex("ffffffff00000000ffffffffffffffffbce6faada7179e84f3b9cac2fc632551", order, 32);
	CHECK(rdx_pake_start_with(&a, RDX_PAKE_A, a.w, zero) == -EINVAL &&
	      rdx_pake_start_with(&a, RDX_PAKE_A, a.w, order) == -EINVAL &&
	      rdx_pake_start_with(&a, RDX_PAKE_A, zero, a.secret) == -EINVAL,
	      "scalars of 0 or of the group order are refused");
	rdx_pake_clear(&a);
	CHECK(a.secret[0] == 0 && !memcmp(a.secret, zero, 32), "clear wipes the secret");
}

/*
 * What a failed run gives an attacker, on either side: with its own
 * secret scalar and w(guess) it redoes the exchange for each candidate
 * key.  Only the key it masked its share with can match; the right key,
 * when it is not the one guessed, does not verify.  (A run with the right
 * guess shows that the check is real.)  tests/cli/hostile.bats does the
 * same against rdrecv and rdsend --server themselves.
 */
static int offline(enum rdx_pake_role attacker, const char *guess, const char *key,
		   const char *candidate)
{
	struct rdx_pake me, peer, t;
	struct rdx_pake_result rm, rp, rt;

	rdx_pake_start(&me, attacker, guess, strlen(guess));
	rdx_pake_start(&peer, attacker == RDX_PAKE_A ? RDX_PAKE_B : RDX_PAKE_A, key,
		       strlen(key));
	if (rdx_pake_finish(&peer, &rdx_ctx, me.share, &rp) ||
	    rdx_pake_finish(&me, &rdx_ctx, peer.share, &rm))
		return -1;
	t = me;
	rdx_pake_w(candidate, strlen(candidate), t.w);
	if (rdx_pake_finish(&t, &rdx_ctx, peer.share, &rt))
		return -1;
	/* The peer's confirmation: cB when the attacker sends, cA when it
	 * receives (a peer that sent it before checking ours). */
	return attacker == RDX_PAKE_A ? rdx_pake_confirm_ok(rt.conf_b, rp.conf_b)
				      : rdx_pake_confirm_ok(rt.conf_a, rp.conf_a);
}

static void test_offline(void)
{
	CHECK(offline(RDX_PAKE_A, "letmein", "dragon2024", "dragon2024") == 0,
	      "as the sender: a failed run does not let the right key be checked");
	CHECK(offline(RDX_PAKE_B, "letmein", "dragon2024", "dragon2024") == 0,
	      "as the receiver: a failed run does not let the right key be checked");
	CHECK(offline(RDX_PAKE_A, "dragon2024", "dragon2024", "dragon2024") == 1 &&
	      offline(RDX_PAKE_B, "dragon2024", "dragon2024", "dragon2024") == 1,
	      "the check is real: the one key guessed online is checked");
	CHECK(offline(RDX_PAKE_A, "letmein", "dragon2024", "letmein") == 0,
	      "and a wrong guess is wrong");
}

int main(void)
{
	test_vectors();
	test_runs();
	test_refusals();
	test_offline();
	return TAP_DONE();
}
