/* rds3 serve's request verification: AWS Signature Version 4, in the
 * Authorization header or a presigned URL's query, recomputed with the
 * client's own signer (sigv4.c) from what arrived and compared in
 * constant time, with the secret of the user (serve_users.c) whose access
 * key the credential scope names.  The body's hash is what
 * x-amz-content-sha256 says; the caller checks the body against it as it
 * arrives.  A STREAMING-* value is signed as it is, and the aws-chunked
 * body's chunks are checked against the chain that starts at this
 * signature (serve_stream.c). */
#include "s3/serve/serve_int.h"

#include <openssl/crypto.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#define SKEW_SECS (15 * 60) /* as S3 */
#define SIGNED_MAX 32

static int fail(const char **code, char *msg, size_t msglen, int status,
		const char *c, const char *m)
{
	*code = c;
	snprintf(msg, msglen, "%s", m);
	return status;
}

static bool is_hex64(const char *s)
{
	size_t i;

	for (i = 0; i < 64; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return false;
	return !s[64];
}

/* "20150830T123600Z" as seconds since the epoch, or -1. */
static time_t amz_time(const char *d)
{
	struct tm tm = { 0 };
	size_t i;

	if (!d || strlen(d) != 16 || d[8] != 'T' || d[15] != 'Z')
		return -1;
	for (i = 0; i < 15; i++)
		if (i != 8 && (d[i] < '0' || d[i] > '9'))
			return -1;
	if (sscanf(d, "%4d%2d%2dT%2d%2d%2dZ", &tm.tm_year, &tm.tm_mon,
		   &tm.tm_mday, &tm.tm_hour, &tm.tm_min, &tm.tm_sec) != 6)
		return -1;
	tm.tm_year -= 1900;
	tm.tm_mon -= 1;
	return timegm(&tm);
}

/* The parts of "AKID/YYYYMMDD/REGION/s3/aws4_request", in place. */
struct scope {
	char buf[256];
	char *key, *day, *region;
};

static bool parse_scope(const char *cred, struct scope *s)
{
	char *part[5];
	char *p;
	int i;

	if (strlen(cred) >= sizeof(s->buf))
		return false;
	strcpy(s->buf, cred);
	p = s->buf;
	for (i = 0; i < 5; i++) {
		part[i] = p;
		p = strchr(p, '/');
		if (i < 4 && !p)
			return false;
		if (p)
			*p++ = '\0';
	}
	if (p || strcmp(part[3], "s3") || strcmp(part[4], "aws4_request") ||
	    strlen(part[1]) != 8 || !*part[0] || !*part[2])
		return false;
	s->key = part[0];
	s->day = part[1];
	s->region = part[2];
	return true;
}

/* Recomputes the signature of r over the given signed headers, query and
 * payload hash; 0 when it is sig. */
static int verify(const struct sv_user *u, const struct sv_req *r,
		  const struct scope *sc, const char *amz_date,
		  const char *signed_list, const struct s3_kv *query,
		  size_t nquery, const char *payload, const char *sig,
		  const char **code, char *msg, size_t msglen)
{
	struct s3_creds creds = { u->access_key, u->secret_key, NULL };
	struct s3_kv hdrs[SV_HDRS_MAX];
	char names[SV_HEAD_MAX];
	size_t nh = 0, i;
	char *name, *save = NULL;
	struct s3_sigv4 out;
	bool host = false;
	int ret;

	if (strlen(signed_list) >= sizeof(names))
		return fail(code, msg, msglen, 400, "AuthorizationHeaderMalformed",
			    "the signed header list is too long");
	strcpy(names, signed_list);
	for (name = strtok_r(names, ";", &save); name; name = strtok_r(NULL, ";", &save)) {
		bool found = false;

		host |= !strcmp(name, "host");
		for (i = 0; i < r->nhdr; i++) {
			if (strcasecmp(r->hdr[i].name, name))
				continue;
			if (nh == SV_HDRS_MAX || found)
				return fail(code, msg, msglen, 400, "AuthorizationHeaderMalformed",
					    "a signed header is named twice or sent twice");
			hdrs[nh++] = (struct s3_kv){ r->hdr[i].name, r->hdr[i].value };
			found = true;
		}
		if (!found)
			return fail(code, msg, msglen, 403, "SignatureDoesNotMatch",
				    "a signed header is not in the request");
	}
	if (!host)
		return fail(code, msg, msglen, 400, "AuthorizationHeaderMalformed",
			    "the Host header must be signed");
	/* As S3: every x-amz-* header is signed, so that a request seen on
	 * the way cannot be replayed with metadata or a copy source added. */
	for (i = 0; i < r->nhdr; i++) {
		const char *n = r->hdr[i].name;
		size_t len = strlen(n);
		const char *at = signed_list;
		bool listed = false;

		if (strncasecmp(n, "x-amz-", 6))
			continue;
		while (at && *at && !listed) {
			listed = !strncasecmp(at, n, len) && (at[len] == ';' || !at[len]);
			at = strchr(at, ';');
			at = at ? at + 1 : NULL;
		}
		if (!listed)
			return fail(code, msg, msglen, 403, "AccessDenied",
				    "There were headers present in the request which were not signed");
	}
	s3_sigv4_init(&out);
	ret = s3_sigv4_sign(&creds,
			    &(struct s3_sign){ .method = r->method,
					       .path = r->path,
					       .query = query,
					       .nquery = nquery,
					       .headers = hdrs,
					       .nheaders = nh,
					       .payload_hash = payload,
					       .region = sc->region,
					       .service = "s3",
					       .amz_date = amz_date },
			    &out);
	if (ret) {
		s3_sigv4_release(&out);
		return fail(code, msg, msglen, 400, "AuthorizationHeaderMalformed",
			    "the request cannot be signed as it came (header names, dates, region)");
	}
	if (strcmp(s3_buf_str(&out.signed_hdrs), signed_list))
		ret = fail(code, msg, msglen, 400, "AuthorizationHeaderMalformed",
			   "SignedHeaders must be lower case, sorted, each once");
	else if (strlen(sig) != S3_SHA256_HEX_LEN ||
		 CRYPTO_memcmp(sig, out.signature, S3_SHA256_HEX_LEN))
		ret = fail(code, msg, msglen, 403, "SignatureDoesNotMatch",
			   "The request signature we calculated does not match the signature you provided. Check your key and signing method.");
	s3_sigv4_release(&out);
	return ret;
}

/* The scope's access key is a user's (*who), the date a valid one. */
static int check_scope(const struct sv_auth *a, const struct scope *sc,
		       const char *amz_date, const struct sv_user **who,
		       const char **code, char *msg, size_t msglen)
{
	*who = sv_users_find(a->users, sc->key);
	if (!*who)
		return fail(code, msg, msglen, 403, "InvalidAccessKeyId",
			    "The AWS Access Key Id you provided does not exist in our records.");
	if (!amz_date || amz_time(amz_date) < 0)
		return fail(code, msg, msglen, 403, "AccessDenied",
			    "the request has no valid X-Amz-Date");
	if (strncmp(amz_date, sc->day, 8))
		return fail(code, msg, msglen, 400, "AuthorizationHeaderMalformed",
			    "the credential's date is not the request's");
	return 0;
}

/* What a signed request's chunk signatures chain from. */
static int chain_start(const struct sv_user *u, const struct scope *sc,
		       const char *amz_date, const char *sig,
		       struct sv_stream_auth *sa, const char **code, char *msg,
		       size_t msglen)
{
	if (s3_sigv4_key(u->secret_key, sc->day, sc->region, "s3", sa->key))
		return fail(code, msg, msglen, 500, "InternalError", "out of memory");
	snprintf(sa->date, sizeof(sa->date), "%s", amz_date);
	snprintf(sa->scope, sizeof(sa->scope), "%s/%s/s3/aws4_request", sc->day, sc->region);
	snprintf(sa->seed, sizeof(sa->seed), "%s", sig);
	sa->chain = true;
	return 0;
}

static int by_header(const struct sv_auth *a, const struct sv_req *r,
		     const char *authz, const char *payload,
		     const struct sv_user **who, struct sv_stream_auth *sa,
		     const char **code, char *msg,
		     size_t msglen)
{
	static const char alg[] = "AWS4-HMAC-SHA256 ";
	char buf[SV_HEAD_MAX];
	char *cred = NULL, *signed_list = NULL, *sig = NULL, *p, *save = NULL;
	const char *amz_date = sv_hdr(r, "x-amz-date");
	struct scope sc;
	time_t t;
	int ret;

	if (strncmp(authz, alg, sizeof(alg) - 1) ||
	    strlen(authz) >= sizeof(buf))
		return fail(code, msg, msglen, 400, "InvalidArgument",
			    "Unsupported Authorization Type (only AWS4-HMAC-SHA256)");
	strcpy(buf, authz + sizeof(alg) - 1);
	for (p = strtok_r(buf, ",", &save); p; p = strtok_r(NULL, ",", &save)) {
		while (*p == ' ')
			p++;
		if (!strncmp(p, "Credential=", 11))
			cred = p + 11;
		else if (!strncmp(p, "SignedHeaders=", 14))
			signed_list = p + 14;
		else if (!strncmp(p, "Signature=", 10))
			sig = p + 10;
		else
			return fail(code, msg, msglen, 400, "AuthorizationHeaderMalformed",
				    "unknown part of the Authorization header");
	}
	if (!cred || !signed_list || !sig || !parse_scope(cred, &sc))
		return fail(code, msg, msglen, 400, "AuthorizationHeaderMalformed",
			    "the Authorization header is malformed");
	if ((ret = check_scope(a, &sc, amz_date, who, code, msg, msglen)))
		return ret;
	t = amz_time(amz_date);
	if (t < time(NULL) - SKEW_SECS || t > time(NULL) + SKEW_SECS)
		return fail(code, msg, msglen, 403, "RequestTimeTooSkewed",
			    "The difference between the request time and the current time is too large.");
	if (!payload)
		return fail(code, msg, msglen, 400, "InvalidRequest",
			    "Missing required header for this request: x-amz-content-sha256");
	ret = verify(*who, r, &sc, amz_date, signed_list, r->query, r->nquery,
		     payload, sig, code, msg, msglen);
	if (!ret && sa->signed_chunks)
		ret = chain_start(*who, &sc, amz_date, sig, sa, code, msg, msglen);
	return ret;
}

static int by_query(const struct sv_auth *a, const struct sv_req *r,
		    const struct sv_user **who, const char **code, char *msg,
		    size_t msglen)
{
	const char *alg = NULL, *cred = NULL, *date = NULL, *expires = NULL,
		   *signed_list = NULL, *sig = NULL;
	struct s3_kv q[SV_QUERY_MAX];
	size_t nq = 0, i;
	struct scope sc;
	char *end;
	long exp;
	time_t t;
	int ret;

	sv_query(r, "X-Amz-Algorithm", &alg);
	sv_query(r, "X-Amz-Credential", &cred);
	sv_query(r, "X-Amz-Date", &date);
	sv_query(r, "X-Amz-Expires", &expires);
	sv_query(r, "X-Amz-SignedHeaders", &signed_list);
	sv_query(r, "X-Amz-Signature", &sig);
	if (!alg || strcmp(alg, "AWS4-HMAC-SHA256") || !cred || !date ||
	    !expires || !signed_list || !sig || !parse_scope(cred, &sc))
		return fail(code, msg, msglen, 400, "AuthorizationQueryParametersError",
			    "a presigned URL needs X-Amz-Algorithm, -Credential, -Date, -Expires, -SignedHeaders and -Signature");
	if ((ret = check_scope(a, &sc, date, who, code, msg, msglen)))
		return ret;
	exp = strtol(expires, &end, 10);
	if (*end || end == expires || exp < 1 || exp > 604800)
		return fail(code, msg, msglen, 400, "AuthorizationQueryParametersError",
			    "X-Amz-Expires must be 1..604800");
	t = amz_time(date);
	if (t > time(NULL) + SKEW_SECS)
		return fail(code, msg, msglen, 403, "AccessDenied",
			    "Request is not valid yet");
	if (t + exp < time(NULL))
		return fail(code, msg, msglen, 403, "AccessDenied",
			    "Request has expired");
	for (i = 0; i < r->nquery; i++)
		if (strcmp(r->query[i].name, "X-Amz-Signature"))
			q[nq++] = r->query[i];
	return verify(*who, r, &sc, date, signed_list, q, nq, S3_UNSIGNED_PAYLOAD,
		      sig, code, msg, msglen);
}

/* The streaming values of x-amz-content-sha256 into sa.  0, or a status
 * (SigV4a's are not verified here: 501). */
static int streaming(const char *sha, struct sv_stream_auth *sa, const char **code,
		     char *msg, size_t msglen)
{
	if (!strcmp(sha, "STREAMING-UNSIGNED-PAYLOAD-TRAILER"))
		sa->trailers = true;
	else if (!strcmp(sha, "STREAMING-AWS4-HMAC-SHA256-PAYLOAD"))
		sa->signed_chunks = true;
	else if (!strcmp(sha, "STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER"))
		sa->signed_chunks = sa->trailers = true;
	else if (!strncmp(sha, "STREAMING-AWS4-ECDSA-P256-SHA256-PAYLOAD", 40))
		return fail(code, msg, msglen, 501, "NotImplemented",
			    "rds3 serve does not verify SigV4a (ECDSA) signatures: x-amz-content-sha256 STREAMING-AWS4-ECDSA-P256-SHA256-PAYLOAD is not read");
	else
		return fail(code, msg, msglen, 400, "InvalidArgument",
			    "x-amz-content-sha256 is not a STREAMING-* value S3 defines");
	sa->on = true;
	return 0;
}

int sv_auth_check(const struct sv_auth *a, const struct sv_req *r,
		  const struct sv_user **who, const char **payload,
		  struct sv_stream_auth *sa,
		  const char **code, char *msg, size_t msglen)
{
	const char *sha = sv_hdr(r, "x-amz-content-sha256");
	const char *authz = sv_hdr(r, "Authorization");
	const struct sv_user *u = NULL;
	int ret;

	*who = NULL;
	*payload = NULL;
	memset(sa, 0, sizeof(*sa));
	if (sha && !strncmp(sha, "STREAMING-", 10) &&
	    (ret = streaming(sha, sa, code, msg, msglen)))
		return ret;
	if (sha && !sa->on && strcmp(sha, S3_UNSIGNED_PAYLOAD) && !is_hex64(sha))
		return fail(code, msg, msglen, 400, "InvalidArgument",
			    "x-amz-content-sha256 must be a hex SHA-256, UNSIGNED-PAYLOAD or STREAMING-*");
	if (sha && is_hex64(sha))
		*payload = sha;
	if (!a->users)
		return 0; /* chunk signatures are read, not checked: no key */
	if (authz)
		ret = by_header(a, r, authz, sha, &u, sa, code, msg, msglen);
	else if (!sv_query(r, "X-Amz-Signature", NULL) && !sv_query(r, "X-Amz-Credential", NULL))
		ret = fail(code, msg, msglen, 403, "AccessDenied",
			   "Access Denied (this server answers signed requests only)");
	else if (sa->signed_chunks)
		ret = fail(code, msg, msglen, 400, "InvalidRequest",
			   "signed aws-chunked chunks need the Authorization header's signature to chain from, not a presigned URL's");
	else
		ret = by_query(a, r, &u, code, msg, msglen);
	/* The signer only once its signature holds. */
	*who = ret ? NULL : u;
	return ret;
}
