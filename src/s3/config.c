#include "s3/config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define INI_MAX_BYTES (1u << 20)

void s3_errf(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

/* ------------------------------------------------------------------ INI */

char *s3_trim(char *s)
{
	char *e;

	while (*s == ' ' || *s == '\t')
		s++;
	e = s + strlen(s);
	while (e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r'))
		*--e = '\0';
	return s;
}

static int read_small(const char *path, char **out)
{
	struct stat st;
	FILE *f = fopen(path, "rb");
	char *p;
	size_t n;

	if (!f)
		return errno == ENOENT || errno == ENOTDIR ? 0 : -errno;
	if (fstat(fileno(f), &st) || !S_ISREG(st.st_mode)) {
		fclose(f);
		return -EINVAL;
	}
	if (st.st_size > INI_MAX_BYTES) {
		fclose(f);
		return -EFBIG;
	}
	p = malloc((size_t)st.st_size + 1);
	if (!p) {
		fclose(f);
		return -ENOMEM;
	}
	n = fread(p, 1, (size_t)st.st_size, f);
	fclose(f);
	p[n] = '\0';
	if (memchr(p, '\0', n)) {
		free(p);
		return -EINVAL;
	}
	*out = p;
	return 1;
}

int s3_ini_get(const char *path, const char *section, const char *key,
	       char **out)
{
	char *text = NULL, *line, *next;
	bool in = false;
	int ret = read_small(path, &text);

	*out = NULL;
	if (ret <= 0)
		return ret;
	ret = 0;
	for (line = text; line && !ret; line = next) {
		char *eq, *s;

		next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		if (*line == ' ' || *line == '\t') /* nested block: not ours */
			continue;
		s = s3_trim(line);
		if (!*s || *s == '#' || *s == ';')
			continue;
		if (*s == '[') {
			char *end = strrchr(s, ']');

			if (!end)
				continue;
			*end = '\0';
			in = !strcmp(s3_trim(s + 1), section);
			continue;
		}
		if (!in || !(eq = strchr(s, '=')))
			continue;
		*eq = '\0';
		if (strcmp(s3_trim(s), key))
			continue;
		*out = strdup(s3_trim(eq + 1));
		ret = *out ? 1 : -ENOMEM;
	}
	free(text);
	return ret;
}

/* Whether the file has section at all (for a --profile that names none). */
static bool ini_has_section(const char *path, const char *section)
{
	char *text = NULL, *line, *next;
	bool found = false;

	if (read_small(path, &text) <= 0)
		return false;
	for (line = text; line && !found; line = next) {
		char *s, *end;

		next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		s = s3_trim(line);
		if (*s != '[' || !(end = strrchr(s, ']')))
			continue;
		*end = '\0';
		found = !strcmp(s3_trim(s + 1), section);
	}
	free(text);
	return found;
}

/* ------------------------------------------------------------- endpoint */

int s3_parse_endpoint(struct s3_config *cfg, const char *url)
{
	const char *h, *slash;
	size_t i, hl;

	if (!strncasecmp(url, "https://", 8)) {
		cfg->https = true;
		h = url + 8;
	} else if (!strncasecmp(url, "http://", 7)) {
		cfg->https = false;
		h = url + 7;
	} else {
		return -EINVAL;
	}
	slash = strchr(h, '/');
	hl = slash ? (size_t)(slash - h) : strlen(h);
	if (!hl || hl > 255)
		return -EINVAL;
	for (i = 0; i < hl; i++) {
		unsigned char c = (unsigned char)h[i];

		/* Letters, digits and what a host, port or [v6] needs; no
		 * userinfo, no spaces, nothing a header could be split on. */
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		      (c >= '0' && c <= '9') || strchr("-.:[]_", c)))
			return -EINVAL;
	}
	free(cfg->host);
	free(cfg->base_path);
	cfg->host = strndup(h, hl);
	cfg->base_path = strdup(slash ? slash : "");
	if (!cfg->host || !cfg->base_path)
		return -ENOMEM;
	/* "http://h/" and "http://h" are the same endpoint. */
	hl = strlen(cfg->base_path);
	while (hl && cfg->base_path[hl - 1] == '/')
		cfg->base_path[--hl] = '\0';
	if (strpbrk(cfg->base_path, "?#%"))
		return -EINVAL;
	return 0;
}

bool s3_bucket_dns_ok(const char *b)
{
	size_t n = strlen(b), i;

	if (n < 3 || n > 63 || b[0] == '-' || b[n - 1] == '-')
		return false;
	for (i = 0; i < n; i++)
		if (!((b[i] >= 'a' && b[i] <= 'z') || (b[i] >= '0' && b[i] <= '9') ||
		      b[i] == '-'))
			return false;
	return true;
}

/* -------------------------------------------------------------- loading */

static const char *env(const char *name)
{
	const char *v = getenv(name);

	return v && *v ? v : NULL;
}

static char *home_file(const char *env_name, const char *rel)
{
	const char *e = env(env_name), *home = env("HOME");
	char *p;

	if (e)
		return strdup(e);
	if (!home)
		return NULL;
	if (asprintf(&p, "%s/%s", home, rel) < 0)
		return NULL;
	return p;
}

/* Looks key up for profile: credentials file first when creds, then the
 * config file.  Returns 1, 0 or -errno as s3_ini_get(), with *src set to
 * the file it came from. */
static int profile_get(const char *cred_file, const char *conf_file,
		       const char *profile, const char *key, bool creds,
		       char **out, const char **src)
{
	char section[300];
	int ret;

	*out = NULL;
	if (creds && cred_file) {
		ret = s3_ini_get(cred_file, profile, key, out);
		if (ret) {
			*src = "shared credentials file";
			return ret;
		}
	}
	if (!conf_file)
		return 0;
	snprintf(section, sizeof(section), "profile %s", profile);
	ret = s3_ini_get(conf_file, section, key, out);
	if (!ret && !strcmp(profile, "default"))
		ret = s3_ini_get(conf_file, "default", key, out);
	if (ret)
		*src = "config file";
	return ret;
}

static int dup_to(char **dst, const char *s)
{
	free(*dst);
	*dst = s ? strdup(s) : NULL;
	return s && !*dst ? -ENOMEM : 0;
}

/* Where s3_config_load() looks, and where it says why it failed. */
struct loading {
	const struct s3_config_opts *o;
	char *cred_file, *conf_file; /* NULL: no home to find them in */
	const char *profile;
	char *err;
	size_t errlen;
};

/* Says that the files could not be read (ret: -errno).  Returns -EINVAL. */
static int file_error(const struct loading *l, int ret)
{
	s3_errf(l->err, l->errlen, "cannot read the AWS configuration (%s or %s): %s",
		l->cred_file ? l->cred_file : "~/.aws/credentials",
		l->conf_file ? l->conf_file : "~/.aws/config",
		ret == -EFBIG ? "larger than 1 MiB" : strerror(-ret));
	return -EINVAL;
}

/* The region: --region, AWS_REGION, AWS_DEFAULT_REGION, the profile's, or
 * us-east-1.  Returns 0 or a negative error (said in l->err). */
static int load_region(struct s3_config *cfg, const struct loading *l)
{
	const char *s, *src = NULL;
	char *v = NULL;
	int ret;

	if ((s = l->o->region) || (s = env("AWS_REGION")) || (s = env("AWS_DEFAULT_REGION")))
		return dup_to(&cfg->region, s);
	ret = profile_get(NULL, l->conf_file, l->profile, "region", false, &v, &src);
	if (ret < 0)
		return file_error(l, ret);
	cfg->region = v ? v : strdup("us-east-1");
	return cfg->region ? 0 : -ENOMEM;
}

/* The endpoint: --endpoint, AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL, the
 * profile's endpoint_url, or AWS's for the region; and the addressing
 * that goes with it.  Returns 0 or a negative error (said in l->err). */
static int load_endpoint(struct s3_config *cfg, const struct loading *l)
{
	const char *s, *src = NULL;
	char *v = NULL;
	int ret = 0;

	cfg->endpoint_source = "--endpoint";
	if (!(s = l->o->endpoint)) {
		cfg->endpoint_source = "AWS_ENDPOINT_URL_S3";
		s = env("AWS_ENDPOINT_URL_S3");
	}
	if (!s) {
		cfg->endpoint_source = "AWS_ENDPOINT_URL";
		s = env("AWS_ENDPOINT_URL");
	}
	if (!s) {
		ret = profile_get(NULL, l->conf_file, l->profile, "endpoint_url", false, &v, &src);
		if (ret < 0)
			return file_error(l, ret);
		ret = 0;
		cfg->endpoint_source = "config file";
		s = v;
	}
	if (s) {
		cfg->custom = true;
		if (s3_parse_endpoint(cfg, s)) {
			s3_errf(l->err, l->errlen,
				"invalid endpoint '%s' (from %s): expected http[s]://host[:port]",
				s, cfg->endpoint_source);
			ret = -EINVAL;
		}
	} else {
		char url[300];

		cfg->endpoint_source = "AWS";
		snprintf(url, sizeof(url), "https://s3.%s.amazonaws.com", cfg->region);
		if (!*cfg->region || strspn(cfg->region, "abcdefghijklmnopqrstuvwxyz0123456789-") !=
					     strlen(cfg->region) ||
		    s3_parse_endpoint(cfg, url)) {
			s3_errf(l->err, l->errlen, "invalid region '%s'", cfg->region);
			ret = -EINVAL;
		}
	}
	free(v);
	if (!ret && cfg->addressing == S3_ADDR_AUTO)
		cfg->addressing = cfg->custom ? S3_ADDR_PATH : S3_ADDR_AUTO;
	return ret;
}

/* The credentials: the environment unless --profile named a profile, else
 * the profile's.  Returns 0 or a negative error (said in l->err). */
static int load_credentials(struct s3_config *cfg, const struct loading *l)
{
	const char *src = NULL;
	int ret;

	if (!l->o->profile && env("AWS_ACCESS_KEY_ID") && env("AWS_SECRET_ACCESS_KEY")) {
		cfg->cred_source = "environment";
		if ((ret = dup_to(&cfg->access_key, env("AWS_ACCESS_KEY_ID"))) ||
		    (ret = dup_to(&cfg->secret_key, env("AWS_SECRET_ACCESS_KEY"))))
			return ret;
		return dup_to(&cfg->session_token, env("AWS_SESSION_TOKEN"));
	}
	ret = profile_get(l->cred_file, l->conf_file, l->profile, "aws_access_key_id", true,
			  &cfg->access_key, &cfg->cred_source);
	if (ret >= 0)
		ret = profile_get(l->cred_file, l->conf_file, l->profile,
				  "aws_secret_access_key", true, &cfg->secret_key, &src);
	if (ret >= 0)
		ret = profile_get(l->cred_file, l->conf_file, l->profile, "aws_session_token",
				  true, &cfg->session_token, &src);
	if (ret < 0)
		return file_error(l, ret);
	if (!cfg->access_key || !cfg->secret_key || !*cfg->access_key ||
	    !*cfg->secret_key) {
		s3_errf(l->err, l->errlen,
			"no credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, "
			"put them in profile '%s' of ~/.aws/credentials, or use --no-sign-request",
			l->profile);
		return -EINVAL;
	}
	return 0;
}

int s3_config_load(struct s3_config *cfg, const struct s3_config_opts *o,
		   char *err, size_t errlen)
{
	struct loading l = {
		.o = o,
		.cred_file = home_file("AWS_SHARED_CREDENTIALS_FILE", ".aws/credentials"),
		.conf_file = home_file("AWS_CONFIG_FILE", ".aws/config"),
		.profile = o->profile ? o->profile : env("AWS_PROFILE"),
		.err = err,
		.errlen = errlen,
	};
	char section[300];
	int ret;

	memset(cfg, 0, sizeof(*cfg));
	cfg->no_sign = o->no_sign;
	cfg->addressing = o->addressing;
	if (!l.profile)
		l.profile = "default";
	if ((ret = dup_to(&cfg->profile, l.profile)))
		goto out;
	snprintf(section, sizeof(section), "profile %s", l.profile);
	if ((o->profile || env("AWS_PROFILE")) && strcmp(l.profile, "default") &&
	    !(l.cred_file && ini_has_section(l.cred_file, l.profile)) &&
	    !(l.conf_file && ini_has_section(l.conf_file, section))) {
		s3_errf(err, errlen, "the profile '%s' is in neither %s nor %s",
			l.profile, l.cred_file ? l.cred_file : "~/.aws/credentials",
			l.conf_file ? l.conf_file : "~/.aws/config");
		ret = -EINVAL;
		goto out;
	}
	ret = load_region(cfg, &l);
	if (!ret)
		ret = load_endpoint(cfg, &l);
	if (!ret && !cfg->no_sign)
		ret = load_credentials(cfg, &l);
out:
	free(l.cred_file);
	free(l.conf_file);
	if (ret)
		s3_config_release(cfg);
	return ret;
}

void s3_config_release(struct s3_config *cfg)
{
	if (cfg->secret_key)
		memset(cfg->secret_key, 0, strlen(cfg->secret_key));
	free(cfg->access_key);
	free(cfg->secret_key);
	free(cfg->session_token);
	free(cfg->region);
	free(cfg->profile);
	free(cfg->host);
	free(cfg->base_path);
	memset(cfg, 0, sizeof(*cfg));
}
