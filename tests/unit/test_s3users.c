/* rds3 serve --users FILE (serve_users.c): both forms, every way a file
 * is refused, the file's mode, and lookups.  Error messages name lines,
 * never a secret. */
#include "s3/serve/serve_int.h"
#include "tap.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char err[256];

/* Parses a copy of text. */
static int parse(const char *text, struct sv_users *u)
{
	char *t = strdup(text);
	int ret;

	err[0] = '\0';
	ret = sv_users_parse(t, u, err, sizeof(err));
	free(t);
	return ret;
}

static void test_pairs(void)
{
	struct sv_users u;
	const struct sv_user *x;

	CHECK(!parse("# two users\n\nAKA  secret/A+1\r\n  \t\n\tAKB\tsecretB=2  \n# end", &u) &&
		      u.n == 2,
	      "pairs: comments, blank lines, tabs, CRLF");
	if (u.n != 2)
		return;
	CHECK(!strcmp(u.v[0].access_key, "AKA") && !strcmp(u.v[0].secret_key, "secret/A+1") &&
		      !strcmp(u.v[0].name, "AKA"),
	      "pairs: the first user is the file's first, named by its key");
	x = sv_users_find(&u, "AKB");
	CHECK(x == &u.v[1] && !strcmp(x->secret_key, "secretB=2"), "pairs: lookup by key");
	CHECK(!sv_users_find(&u, "AK") && !sv_users_find(&u, "AKAA") && !sv_users_find(&u, ""),
	      "pairs: no prefix or extension of a key is found");
	sv_users_release(&u);
	CHECK(u.n == 0 && !u.v, "release empties the table");
}

static void test_ini(void)
{
	struct sv_users u;

	CHECK(!parse("; an INI comment first\n[default]\nregion = us-east-1\n\n; comment\n[alice]\n"
		     "aws_access_key_id = AKALICE\naws_secret_access_key=al/ice+S\n"
		     "region=eu-west-1\n[profile bob]\naws_secret_access_key = bobS\n"
		     "aws_access_key_id=AKBOB\n",
		     &u) &&
		      u.n == 2,
	      "ini: profiles with keys are users, [default] without keys is passed over");
	if (u.n == 2) {
		CHECK(!strcmp(u.v[0].name, "alice") && !strcmp(u.v[0].secret_key, "al/ice+S") &&
			      !strcmp(u.v[1].name, "bob") && !strcmp(u.v[1].access_key, "AKBOB"),
		      "ini: names are the profiles', '[profile NAME]' as in ~/.aws/config");
		CHECK(sv_users_find(&u, "AKBOB") == &u.v[1], "ini: lookup by key");
	}
	sv_users_release(&u);
}

/* text must be refused with a message containing want (and not secret). */
static void refused(const char *text, const char *want, const char *what)
{
	struct sv_users u;
	int ret = parse(text, &u);

	CHECK(ret == -EINVAL && strstr(err, want) && !strstr(err, "SECRETX") && u.n == 0,
	      "refused: %s (%d: %s)", what, ret, err);
}

static void test_refused(void)
{
	refused("", "no users", "an empty file");
	refused("# nothing\n\n", "no users", "comments only");
	refused("[a]\nregion = x\n", "no users", "profiles without keys only");
	refused("AK1 SECRETX\nAK2\n", "line 2: expected ACCESS_KEY SECRET", "a key without a secret");
	refused("AK1 SECRETX extra\n", "line 1: expected", "three fields");
	refused("AK/1 SECRETX\n", "line 1: an access key", "a '/' in a key");
	refused("AK1 SECRETX\nAK1 SECRETX2\n", "'AK1' is given twice", "a key twice");
	refused("AK1 SECRETX\n[p]\n", "line 2: expected", "pairs, then a profile");
	refused("[a]\naws_access_key_id=AK1\n", "has aws_access_key_id but no aws_secret_access_key",
		"half a profile");
	refused("aws_access_key_id=AK1\n", "line 1: expected ACCESS_KEY", "pairs form: NAME=VALUE");
	refused("[a]\naws_access_key_id AK1\n", "line 2: expected NAME = VALUE", "no '='");
	refused("[a\naws_access_key_id=AK1\n", "line 1: a profile's name", "an unclosed [");
	refused("[a]\naws_access_key_id=AK1\naws_access_key_id=AK2\naws_secret_access_key=SECRETX\n",
		"line 3: aws_access_key_id is given twice", "a key twice in a profile");
	refused("[a]\naws_access_key_id=AK1\naws_secret_access_key=SECRETX\n"
		"[b]\naws_access_key_id=AK1\naws_secret_access_key=SECRETX2\n",
		"'AK1' is given twice", "one key in two profiles");
	refused("[a]\naws_access_key_id=AK1\naws_secret_access_key=SECRETX\n"
		"[a]\naws_access_key_id=AK2\naws_secret_access_key=SECRETX2\n",
		"'a' is given twice", "a profile twice");
	refused("[a]\naws_access_key_id=AK1\naws_secret_access_key=\n", "a secret key is",
		"an empty secret");
	refused("[a b]\naws_access_key_id=AK1\naws_secret_access_key=SECRETX\n",
		"a profile's name", "a space in a profile's name");
}

static void test_file(void)
{
	char dir[] = "/tmp/test_s3users.XXXXXX", path[64];
	struct sv_users u;
	FILE *f;
	int ret;

	if (!mkdtemp(dir)) {
		CHECK(0, "mkdtemp: %s", strerror(errno));
		return;
	}
	snprintf(path, sizeof(path), "%s/users", dir);
	CHECK(sv_users_load(path, &u, err, sizeof(err)) == -ENOENT, "a missing file: -ENOENT");
	f = fopen(path, "w");
	fputs("AKA SECRETX\n", f);
	fclose(f);
	chmod(path, 0644);
	ret = sv_users_load(path, &u, err, sizeof(err));
	CHECK(ret == -EPERM && strstr(err, "chmod 600"), "mode 0644 refused: %s", err);
	chmod(path, 0640);
	CHECK(sv_users_load(path, &u, err, sizeof(err)) == -EPERM, "mode 0640 refused");
	chmod(path, 0600);
	ret = sv_users_load(path, &u, err, sizeof(err));
	CHECK(!ret && u.n == 1 && !strcmp(u.v[0].secret_key, "SECRETX"), "mode 0600 read");
	sv_users_release(&u);
	chmod(path, 0400);
	CHECK(!sv_users_load(path, &u, err, sizeof(err)), "mode 0400 read");
	sv_users_release(&u);
	CHECK(sv_users_load(dir, &u, err, sizeof(err)) == -EINVAL, "a directory refused");
	unlink(path);
	f = fopen(path, "w");
	fwrite("AKA SEC\0RET\n", 1, 12, f);
	fclose(f);
	chmod(path, 0600);
	CHECK(sv_users_load(path, &u, err, sizeof(err)) == -EINVAL && strstr(err, "NUL"),
	      "a NUL byte refused");
	unlink(path);
	rmdir(dir);
}

static void test_one(void)
{
	struct sv_users u;

	CHECK(!sv_users_one(&u, "KEY", "sec") && u.n == 1 && sv_users_find(&u, "KEY") == &u.v[0] &&
		      !strcmp(u.v[0].name, "KEY"),
	      "the one key of the usual credentials is a table of one");
	sv_users_release(&u);
}

int main(void)
{
	test_pairs();
	test_ini();
	test_refused();
	test_file();
	test_one();
	return TAP_DONE();
}
