/* Credentials, region and endpoint, found the way the AWS CLI finds them.
 *
 *   credentials: AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY /
 *                AWS_SESSION_TOKEN (skipped when --profile is given), then
 *                the profile's keys in the shared credentials file
 *                (AWS_SHARED_CREDENTIALS_FILE, default ~/.aws/credentials,
 *                sections "[NAME]"), then in the config file
 *                (AWS_CONFIG_FILE, default ~/.aws/config, sections
 *                "[profile NAME]" and "[default]");
 *   profile:     --profile, AWS_PROFILE, "default";
 *   region:      --region, AWS_REGION, AWS_DEFAULT_REGION, the profile's
 *                region, us-east-1;
 *   endpoint:    --endpoint, AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL, the
 *                profile's endpoint_url, AWS (https://s3.REGION.amazonaws.com).
 *
 * A custom endpoint is addressed path-style (http://host:port/bucket/key),
 * AWS virtual-hosted (https://bucket.s3.REGION.amazonaws.com/key) when the
 * bucket name allows it; --path-style / --virtual-host override. */
#ifndef RDS3_CONFIG_H
#define RDS3_CONFIG_H

#include <stdbool.h>
#include <stddef.h>

enum s3_addressing { S3_ADDR_AUTO, S3_ADDR_PATH, S3_ADDR_VIRTUAL };

/* What the command line said; NULL / false / AUTO: not given. */
struct s3_config_opts {
	const char *profile;
	const char *endpoint;
	const char *region;
	bool no_sign;
	enum s3_addressing addressing;
};

struct s3_config {
	char *access_key; /* NULL with no_sign */
	char *secret_key;
	char *session_token; /* NULL: none */
	char *region;
	char *profile;
	bool no_sign;
	bool https;
	char *host;	   /* "host", "host:port" or "[v6]:port", as in Host: */
	char *base_path;   /* "" or "/prefix" the endpoint URL carried */
	bool custom;	   /* endpoint given, not AWS's */
	enum s3_addressing addressing;
	const char *cred_source; /* where the keys came from, for -v */
	const char *endpoint_source;
};

/* Fills cfg from o, the environment and the files.  Returns 0, or -EINVAL
 * (bad endpoint, unknown --profile, no credentials, a file too large or
 * unreadable) with the reason in err. */
int s3_config_load(struct s3_config *cfg, const struct s3_config_opts *o,
		   char *err, size_t errlen);

/* Frees what s3_config_load() allocated. */
void s3_config_release(struct s3_config *cfg);

/* Looks key up in section of INI file path: 1 found (*out malloc'd), 0 not
 * there (or no such file), -errno/-EFBIG/-EINVAL on a file that cannot be
 * read or is not INI.  Keys of nested blocks ("s3 =" then indented lines)
 * are not top-level keys and are not found. */
int s3_ini_get(const char *path, const char *section, const char *key,
	       char **out);

/* Parses an endpoint URL "http[s]://host[:port][/path]" into cfg's https,
 * host and base_path.  Returns 0 or -EINVAL. */
int s3_parse_endpoint(struct s3_config *cfg, const char *url);

/* Whether bucket can be the first label of a virtual-hosted name: 3..63
 * of a-z 0-9 '-', no dots (TLS wildcards do not cover them). */
bool s3_bucket_dns_ok(const char *bucket);

/* Formats a reason into err (errlen bytes), for the loaders that say why
 * a file is refused (here and rds3 serve's --users). */
void s3_errf(char *err, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* s without its leading blanks and trailing blanks and CR (changed in
 * place): an INI line's parts. */
char *s3_trim(char *s);

#endif
