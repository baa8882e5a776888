#include "s3/config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define INI_MAX_BYTES (1u << 20)

static void set_err(char *err, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void set_err(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

/* ------------------------------------------------------------------ INI */

static char *trim(char *s)
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
		s = trim(line);
		if (!*s || *s == '#' || *s == ';')
			continue;
		if (*s == '[') {
			char *end = strrchr(s, ']');

			if (!end)
				continue;
			*end = '\0';
			in = !strcmp(trim(s + 1), section);
			continue;
		}
		if (!in || !(eq = strchr(s, '=')))
			continue;
		*eq = '\0';
		if (strcmp(trim(s), key))
			continue;
		*out = strdup(trim(eq + 1));
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
		s = trim(line);
		if (*s != '[' || !(end = strrchr(s, ']')))
			continue;
		*end = '\0';
		found = !strcmp(trim(s + 1), section);
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

int s3_config_load(struct s3_config *cfg, const struct s3_config_opts *o,
		   char *err, size_t errlen)
{
	char *cred_file = home_file("AWS_SHARED_CREDENTIALS_FILE", ".aws/credentials");
	char *conf_file = home_file("AWS_CONFIG_FILE", ".aws/config");
	const char *profile = o->profile ? o->profile : env("AWS_PROFILE");
	const char *src = NULL, *s;
	char *v = NULL, section[300];
	int ret = 0;

	memset(cfg, 0, sizeof(*cfg));
	cfg->no_sign = o->no_sign;
	cfg->addressing = o->addressing;
	if (!profile)
		profile = "default";
	if ((ret = dup_to(&cfg->profile, profile)))
		goto out;
	snprintf(section, sizeof(section), "profile %s", profile);
	if ((o->profile || env("AWS_PROFILE")) && strcmp(profile, "default") &&
	    !(cred_file && ini_has_section(cred_file, profile)) &&
	    !(conf_file && ini_has_section(conf_file, section))) {
		set_err(err, errlen, "the profile '%s' is in neither %s nor %s",
			profile, cred_file ? cred_file : "~/.aws/credentials",
			conf_file ? conf_file : "~/.aws/config");
		ret = -EINVAL;
		goto out;
	}

	/* Region. */
	if ((s = o->region) || (s = env("AWS_REGION")) || (s = env("AWS_DEFAULT_REGION"))) {
		ret = dup_to(&cfg->region, s);
	} else {
		ret = profile_get(NULL, conf_file, profile, "region", false, &v, &src);
		if (ret < 0)
			goto file_err;
		cfg->region = v ? v : strdup("us-east-1");
		v = NULL;
		ret = cfg->region ? 0 : -ENOMEM;
	}
	if (ret)
		goto out;

	/* Endpoint. */
	cfg->endpoint_source = "--endpoint";
	if (!(s = o->endpoint)) {
		cfg->endpoint_source = "AWS_ENDPOINT_URL_S3";
		s = env("AWS_ENDPOINT_URL_S3");
	}
	if (!s) {
		cfg->endpoint_source = "AWS_ENDPOINT_URL";
		s = env("AWS_ENDPOINT_URL");
	}
	if (!s) {
		ret = profile_get(NULL, conf_file, profile, "endpoint_url", false, &v, &src);
		if (ret < 0)
			goto file_err;
		cfg->endpoint_source = "config file";
		s = v;
	}
	if (s) {
		cfg->custom = true;
		if (s3_parse_endpoint(cfg, s)) {
			set_err(err, errlen,
				"invalid endpoint '%s' (from %s): expected http[s]://host[:port]",
				s, cfg->endpoint_source);
			ret = -EINVAL;
			goto out;
		}
	} else {
		char url[300];

		cfg->endpoint_source = "AWS";
		snprintf(url, sizeof(url), "https://s3.%s.amazonaws.com", cfg->region);
		if (!*cfg->region || strspn(cfg->region, "abcdefghijklmnopqrstuvwxyz0123456789-") !=
					     strlen(cfg->region) ||
		    s3_parse_endpoint(cfg, url)) {
			set_err(err, errlen, "invalid region '%s'", cfg->region);
			ret = -EINVAL;
			goto out;
		}
	}
	free(v);
	v = NULL;
	if (cfg->addressing == S3_ADDR_AUTO)
		cfg->addressing = cfg->custom ? S3_ADDR_PATH : S3_ADDR_AUTO;

	if (cfg->no_sign)
		goto out;
	/* Credentials: the environment unless --profile named a profile. */
	if (!o->profile && env("AWS_ACCESS_KEY_ID") && env("AWS_SECRET_ACCESS_KEY")) {
		cfg->cred_source = "environment";
		if ((ret = dup_to(&cfg->access_key, env("AWS_ACCESS_KEY_ID"))) ||
		    (ret = dup_to(&cfg->secret_key, env("AWS_SECRET_ACCESS_KEY"))) ||
		    (ret = dup_to(&cfg->session_token, env("AWS_SESSION_TOKEN"))))
			goto out;
		goto out;
	}
	ret = profile_get(cred_file, conf_file, profile, "aws_access_key_id", true,
			  &cfg->access_key, &cfg->cred_source);
	if (ret < 0)
		goto file_err;
	ret = profile_get(cred_file, conf_file, profile, "aws_secret_access_key",
			  true, &cfg->secret_key, &src);
	if (ret < 0)
		goto file_err;
	ret = profile_get(cred_file, conf_file, profile, "aws_session_token", true,
			  &cfg->session_token, &src);
	if (ret < 0)
		goto file_err;
	ret = 0;
	if (!cfg->access_key || !cfg->secret_key || !*cfg->access_key ||
	    !*cfg->secret_key) {
		set_err(err, errlen,
			"no credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, "
			"put them in profile '%s' of ~/.aws/credentials, or use --no-sign-request",
			profile);
		ret = -EINVAL;
	}
	goto out;

file_err:
	set_err(err, errlen, "cannot read the AWS configuration (%s or %s): %s",
		cred_file ? cred_file : "~/.aws/credentials",
		conf_file ? conf_file : "~/.aws/config",
		ret == -EFBIG ? "larger than 1 MiB" : strerror(-ret));
	ret = -EINVAL;
out:
	free(v);
	free(cred_file);
	free(conf_file);
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
