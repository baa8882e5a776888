/* rds3's configuration: the AWS CLI's precedence between options, the
 * environment, ~/.aws/credentials and ~/.aws/config; INI quirks; endpoint
 * URLs; hostile files. */
#include "s3/config.h"
#include "tap.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char dir[64], cred[128], conf[128];

static void put(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	if (!f || fputs(text, f) < 0) {
		perror(path);
		exit(1);
	}
	fclose(f);
}

static void clean_env(void)
{
	static const char *const vars[] = {
		"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
		"AWS_PROFILE", "AWS_REGION", "AWS_DEFAULT_REGION", "AWS_ENDPOINT_URL",
		"AWS_ENDPOINT_URL_S3",
	};
	size_t i;

	for (i = 0; i < sizeof(vars) / sizeof(vars[0]); i++)
		unsetenv(vars[i]);
	setenv("AWS_SHARED_CREDENTIALS_FILE", cred, 1);
	setenv("AWS_CONFIG_FILE", conf, 1);
}

static int load(struct s3_config *c, const struct s3_config_opts *o, char *err)
{
	err[0] = '\0';
	return s3_config_load(c, o, err, 256);
}

static void test_ini(void)
{
	char *v = NULL;

	put(cred, "# comment\n; another\n[default]\naws_access_key_id = AKDEF \n"
		  "aws_secret_access_key=secretdef\r\n\n[work]\n"
		  "aws_access_key_id=AKWORK\naws_secret_access_key = s=with=equals\n"
		  "s3 =\n  aws_access_key_id = NESTED\n");
	CHECK(s3_ini_get(cred, "default", "aws_access_key_id", &v) == 1 &&
		      !strcmp(v, "AKDEF"),
	      "INI: spaces around '=' and at the end trimmed");
	free(v);
	CHECK(s3_ini_get(cred, "default", "aws_secret_access_key", &v) == 1 &&
		      !strcmp(v, "secretdef"),
	      "INI: CRLF line ends");
	free(v);
	CHECK(s3_ini_get(cred, "work", "aws_secret_access_key", &v) == 1 &&
		      !strcmp(v, "s=with=equals"),
	      "INI: the value keeps later '='");
	free(v);
	CHECK(s3_ini_get(cred, "work", "aws_access_key_id", &v) == 1 &&
		      !strcmp(v, "AKWORK"),
	      "INI: an indented nested key does not override the top-level one");
	free(v);
	CHECK(s3_ini_get(cred, "nope", "aws_access_key_id", &v) == 0 && !v,
	      "INI: missing section: not found");
	CHECK(s3_ini_get("/nonexistent/x", "a", "b", &v) == 0,
	      "INI: a missing file is not an error");
	CHECK(s3_ini_get(dir, "a", "b", &v) == -EINVAL, "INI: a directory is refused");
	{
		char big[128];
		FILE *f;

		snprintf(big, sizeof(big), "%s/big", dir);
		f = fopen(big, "w");
		if (f) {
			fseek(f, 2 << 20, SEEK_SET);
			fputc('\n', f);
			fclose(f);
		}
		CHECK(s3_ini_get(big, "a", "b", &v) == -EFBIG,
		      "INI: a file over 1 MiB is refused, not read");
		put(big, "[a]\nb=1\0junk");
	}
}

static void test_precedence(void)
{
	struct s3_config c;
	struct s3_config_opts o = { 0 };
	char err[256];

	put(cred, "[default]\naws_access_key_id=AKDEF\naws_secret_access_key=sdef\n"
		  "[work]\naws_access_key_id=AKWORK\naws_secret_access_key=swork\n"
		  "aws_session_token=tokwork\n");
	put(conf, "[default]\nregion=eu-west-1\n[profile work]\nregion = ap-south-1\n"
		  "endpoint_url = http://127.0.0.1:9000\n"
		  "[profile cfgonly]\naws_access_key_id=AKCFG\naws_secret_access_key=scfg\n"
		  "[work]\nregion=wrong-section\n");
	clean_env();

	CHECK(load(&c, &o, err) == 0 && !strcmp(c.access_key, "AKDEF") &&
		      !strcmp(c.region, "eu-west-1") && !c.custom && c.https &&
		      !strcmp(c.host, "s3.eu-west-1.amazonaws.com") && !c.session_token,
	      "default profile: keys from credentials, region from config, AWS endpoint");
	s3_config_release(&c);

	setenv("AWS_PROFILE", "work", 1);
	CHECK(load(&c, &o, err) == 0 && !strcmp(c.access_key, "AKWORK") &&
		      !strcmp(c.session_token, "tokwork") &&
		      !strcmp(c.region, "ap-south-1") && c.custom && !c.https &&
		      !strcmp(c.host, "127.0.0.1:9000") && c.addressing == S3_ADDR_PATH,
	      "AWS_PROFILE: [profile work] in config (not [work]), endpoint_url, path-style");
	s3_config_release(&c);

	setenv("AWS_ACCESS_KEY_ID", "AKENV", 1);
	setenv("AWS_SECRET_ACCESS_KEY", "senv", 1);
	CHECK(load(&c, &o, err) == 0 && !strcmp(c.access_key, "AKENV") &&
		      !strcmp(c.secret_key, "senv") && !c.session_token,
	      "environment keys beat AWS_PROFILE's");
	s3_config_release(&c);

	o.profile = "work";
	CHECK(load(&c, &o, err) == 0 && !strcmp(c.access_key, "AKWORK"),
	      "--profile beats the environment's keys");
	s3_config_release(&c);

	o.profile = "cfgonly";
	CHECK(load(&c, &o, err) == 0 && !strcmp(c.access_key, "AKCFG") &&
		      !strcmp(c.cred_source, "config file"),
	      "keys in the config file's profile section");
	s3_config_release(&c);

	o.profile = "missing";
	CHECK(load(&c, &o, err) == -EINVAL && strstr(err, "'missing'"),
	      "an unknown --profile is an error naming it: %s", err);
	o.profile = NULL;
	setenv("AWS_PROFILE", "missing", 1);
	CHECK(load(&c, &o, err) == -EINVAL, "an unknown AWS_PROFILE too");
	unsetenv("AWS_PROFILE");

	setenv("AWS_DEFAULT_REGION", "r-default", 1);
	CHECK(load(&c, &o, err) == 0 && !strcmp(c.region, "r-default"),
	      "AWS_DEFAULT_REGION beats the profile's region");
	s3_config_release(&c);
	setenv("AWS_REGION", "r-region", 1);
	CHECK(load(&c, &o, err) == 0 && !strcmp(c.region, "r-region"),
	      "AWS_REGION beats AWS_DEFAULT_REGION");
	s3_config_release(&c);
	o.region = "r-opt";
	CHECK(load(&c, &o, err) == 0 && !strcmp(c.region, "r-opt"),
	      "--region beats AWS_REGION");
	s3_config_release(&c);
	o.region = NULL;

	setenv("AWS_ENDPOINT_URL", "http://generic:1", 1);
	CHECK(load(&c, &o, err) == 0 && !strcmp(c.host, "generic:1"),
	      "AWS_ENDPOINT_URL");
	s3_config_release(&c);
	setenv("AWS_ENDPOINT_URL_S3", "https://s3only:2/", 1);
	CHECK(load(&c, &o, err) == 0 && !strcmp(c.host, "s3only:2") && c.https &&
		      !strcmp(c.base_path, ""),
	      "AWS_ENDPOINT_URL_S3 beats AWS_ENDPOINT_URL");
	s3_config_release(&c);
	o.endpoint = "http://[::1]:3";
	o.addressing = S3_ADDR_VIRTUAL;
	CHECK(load(&c, &o, err) == 0 && !strcmp(c.host, "[::1]:3") &&
		      c.addressing == S3_ADDR_VIRTUAL,
	      "--endpoint beats both; --virtual-host kept");
	s3_config_release(&c);
	o.addressing = S3_ADDR_AUTO;

	o.endpoint = "ftp://x";
	CHECK(load(&c, &o, err) == -EINVAL && strstr(err, "ftp://x"),
	      "a non-HTTP endpoint is refused: %s", err);
	o.endpoint = "http://user@host";
	CHECK(load(&c, &o, err) == -EINVAL, "userinfo in the endpoint refused");
	o.endpoint = "http://ho st";
	CHECK(load(&c, &o, err) == -EINVAL, "a space in the host refused");
	o.endpoint = "http://";
	CHECK(load(&c, &o, err) == -EINVAL, "an empty host refused");
	o.endpoint = NULL;

	clean_env();
	put(cred, "[default]\naws_access_key_id=AK\n");
	CHECK(load(&c, &o, err) == -EINVAL && strstr(err, "no credentials"),
	      "a key id without a secret: no credentials: %s", err);
	o.no_sign = true;
	CHECK(load(&c, &o, err) == 0 && c.no_sign && !c.access_key,
	      "--no-sign-request needs no credentials");
	s3_config_release(&c);
	o.no_sign = false;

	unlink(cred);
	unlink(conf);
	setenv("AWS_ACCESS_KEY_ID", "A", 1);
	setenv("AWS_SECRET_ACCESS_KEY", "B", 1);
	setenv("AWS_SESSION_TOKEN", "T", 1);
	CHECK(load(&c, &o, err) == 0 && !strcmp(c.session_token, "T") &&
		      !strcmp(c.region, "us-east-1") &&
		      !strcmp(c.host, "s3.us-east-1.amazonaws.com"),
	      "no files: environment keys and token, us-east-1");
	s3_config_release(&c);
	o.region = "bad/region";
	CHECK(load(&c, &o, err) == -EINVAL, "a region that is no host name is refused");
	o.region = NULL;
	clean_env();
}

static void test_bucket_names(void)
{
	CHECK(s3_bucket_dns_ok("my-bucket-1"), "DNS bucket name");
	CHECK(!s3_bucket_dns_ok("My_Bucket"), "upper case and '_' are not DNS labels");
	CHECK(!s3_bucket_dns_ok("a.b.c"), "dotted names go path-style");
	CHECK(!s3_bucket_dns_ok("ab") && !s3_bucket_dns_ok("-ab-"), "short or dashed ends");
}

int main(void)
{
	snprintf(dir, sizeof(dir), "/tmp/rds3-config.XXXXXX");
	if (!mkdtemp(dir))
		return 1;
	snprintf(cred, sizeof(cred), "%s/credentials", dir);
	snprintf(conf, sizeof(conf), "%s/config", dir);
	test_ini();
	test_precedence();
	test_bucket_names();
	{
		char cmd[128];

		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
		if (system(cmd))
			return 1;
	}
	return TAP_DONE();
}
