/* rds3 serve --users FILE: the access keys a server answers to, read once
 * at the start.  Two forms, told apart by the first line that says
 * anything (blank lines and '#' comments say nothing):
 *
 *   # one user a line                   [alice]
 *   AKIDALICE  alice/Secret+1           aws_access_key_id = AKIDALICE
 *   AKIDBOB    bob/Secret+2             aws_secret_access_key = alice/Secret+1
 *
 * the second being the AWS CLI's credentials file, a profile a user (its
 * name the user's DisplayName; "[profile NAME]" as in ~/.aws/config).
 * Other keys of a profile (region, ...) are left alone, a profile without
 * keys is passed over, one with half of them is an error.  Anything else
 * the file says wrong stops the server: a line it cannot read, an access
 * key given twice, no user at all.  The file holds secrets: like ssh with
 * a private key, it is refused when group or others may read or write it,
 * or when someone else owns it. */
#include "s3/serve/serve_int.h"

#include "s3/config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define FILE_MAX (1u << 20)

/* An access key goes into Credential=KEY/DATE/... and the RDMA login:
 * letters, digits and a few marks, no '/', ',' or space. */
static bool key_ok(const char *s)
{
	size_t n = strlen(s);

	if (!n || n > SV_USER_KEY_MAX)
		return false;
	for (; *s; s++)
		if (!((*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') ||
		      (*s >= '0' && *s <= '9') || strchr("-_.+=@~", *s)))
			return false;
	return true;
}

/* Printable ASCII, no space, 1..max bytes (and no ']' in a name). */
static bool text_ok(const char *s, size_t max, bool name)
{
	size_t n = strlen(s);

	if (!n || n > max)
		return false;
	for (; *s; s++)
		if (*s < 0x21 || *s > 0x7e || (name && *s == ']'))
			return false;
	return true;
}

static void user_release(struct sv_user *u)
{
	if (u->secret_key)
		explicit_bzero(u->secret_key, strlen(u->secret_key));
	free(u->access_key);
	free(u->secret_key);
	free(u->name);
	memset(u, 0, sizeof(*u));
}

void sv_users_release(struct sv_users *u)
{
	for (size_t i = 0; i < u->n; i++)
		user_release(&u->v[i]);
	free(u->v);
	free(u->by_key);
	memset(u, 0, sizeof(*u));
}

/* Appends a user (copies of key, secret and name, NULL: the key). */
static int add(struct sv_users *u, const char *key, const char *secret, const char *name)
{
	struct sv_user *v, *n;

	if (u->n == SV_USERS_MAX)
		return -E2BIG;
	v = realloc(u->v, (u->n + 1) * sizeof(*v));
	if (!v)
		return -ENOMEM;
	u->v = v;
	n = &v[u->n];
	n->access_key = strdup(key);
	n->secret_key = strdup(secret);
	n->name = strdup(name ? name : key);
	if (!n->access_key || !n->secret_key || !n->name) {
		user_release(n);
		return -ENOMEM;
	}
	u->n++;
	return 0;
}

static int by_key(const void *a, const void *b)
{
	return strcmp((*(struct sv_user *const *)a)->access_key,
		      (*(struct sv_user *const *)b)->access_key);
}

static int by_name(const void *a, const void *b)
{
	return strcmp((*(struct sv_user *const *)a)->name, (*(struct sv_user *const *)b)->name);
}

/* The lookup index; refuses a key (or a profile name) given twice. */
static int index_users(struct sv_users *u, char *err, size_t errlen)
{
	struct sv_user **names;
	size_t i;

	if (!u->n) {
		s3_errf(err, errlen, "no users in it");
		return -EINVAL;
	}
	u->by_key = malloc(u->n * sizeof(*u->by_key));
	names = malloc(u->n * sizeof(*names));
	if (!u->by_key || !names) {
		free(names);
		s3_errf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	for (i = 0; i < u->n; i++)
		u->by_key[i] = names[i] = &u->v[i];
	qsort(u->by_key, u->n, sizeof(*u->by_key), by_key);
	qsort(names, u->n, sizeof(*names), by_name);
	for (i = 1; i < u->n; i++) {
		if (!strcmp(u->by_key[i - 1]->access_key, u->by_key[i]->access_key)) {
			s3_errf(err, errlen, "the access key '%s' is given twice",
			    u->by_key[i]->access_key);
			free(names);
			return -EINVAL;
		}
		if (!strcmp(names[i - 1]->name, names[i]->name)) {
			s3_errf(err, errlen, "the user '%s' is given twice", names[i]->name);
			free(names);
			return -EINVAL;
		}
	}
	free(names);
	return 0;
}

/* One "ACCESS_KEY SECRET" line. */
static int pair_line(struct sv_users *u, char *s, unsigned line, char *err, size_t errlen)
{
	char *key = s, *secret, *end;

	secret = key + strcspn(key, " \t");
	if (*secret)
		*secret++ = '\0';
	secret += strspn(secret, " \t");
	end = secret + strcspn(secret, " \t");
	if (!*secret || *end) {
		s3_errf(err, errlen, "line %u: expected ACCESS_KEY SECRET", line);
		return -EINVAL;
	}
	if (!key_ok(key) || !text_ok(secret, SV_USER_SECRET_MAX, false)) {
		s3_errf(err, errlen, "line %u: %s", line,
		    !key_ok(key) ? "an access key is 1 to 128 letters, digits or -_.+=@~"
				 : "a secret key is 1 to 256 printable characters");
		return -EINVAL;
	}
	return add(u, key, secret, NULL);
}

/* An INI profile being read. */
struct profile {
	char name[SV_USER_NAME_MAX + 1]; /* "": none yet */
	char *key, *secret;		 /* into the text */
	unsigned line;			 /* its [name]'s */
};

/* The profile read so far becomes a user (if it has keys). */
static int profile_end(struct sv_users *u, struct profile *p, char *err, size_t errlen)
{
	int ret;

	if (!p->name[0] || (!p->key && !p->secret))
		return 0;
	if (!p->key || !p->secret) {
		s3_errf(err, errlen, "line %u: the profile '%s' has %s but no %s", p->line, p->name,
		    p->key ? "aws_access_key_id" : "aws_secret_access_key",
		    p->key ? "aws_secret_access_key" : "aws_access_key_id");
		return -EINVAL;
	}
	if (!key_ok(p->key) || !text_ok(p->secret, SV_USER_SECRET_MAX, false)) {
		s3_errf(err, errlen, "line %u: the profile '%s': %s", p->line, p->name,
		    !key_ok(p->key) ? "an access key is 1 to 128 letters, digits or -_.+=@~"
				    : "a secret key is 1 to 256 printable characters");
		return -EINVAL;
	}
	ret = add(u, p->key, p->secret, p->name);
	p->key = p->secret = NULL;
	return ret;
}

static int ini_line(struct sv_users *u, struct profile *p, char *s, unsigned line,
		    char *err, size_t errlen)
{
	char *eq, *name, *value, **slot;
	int ret;

	if (*s == '[') {
		char *end = s + strlen(s) - 1;

		if (*end != ']') {
			s3_errf(err, errlen, "line %u: a profile's name is in [brackets]", line);
			return -EINVAL;
		}
		if ((ret = profile_end(u, p, err, errlen)))
			return ret;
		*end = '\0';
		name = s3_trim(s + 1);
		if (!strncmp(name, "profile ", 8) || !strncmp(name, "profile\t", 8))
			name = s3_trim(name + 8);
		if (!text_ok(name, SV_USER_NAME_MAX, true)) {
			s3_errf(err, errlen, "line %u: a profile's name is 1 to 64 printable characters, no space", line);
			return -EINVAL;
		}
		snprintf(p->name, sizeof(p->name), "%s", name);
		p->line = line;
		return 0;
	}
	eq = strchr(s, '=');
	if (!p->name[0] || !eq) {
		s3_errf(err, errlen, "line %u: %s", line,
		    !p->name[0] ? "a key outside any [profile]" : "expected NAME = VALUE");
		return -EINVAL;
	}
	*eq = '\0';
	name = s3_trim(s);
	value = s3_trim(eq + 1);
	if (strcmp(name, "aws_access_key_id") && strcmp(name, "aws_secret_access_key"))
		return 0; /* region and the like: not the server's */
	slot = !strcmp(name, "aws_access_key_id") ? &p->key : &p->secret;
	if (*slot) {
		s3_errf(err, errlen, "line %u: %s is given twice in the profile '%s'", line, name,
		    p->name);
		return -EINVAL;
	}
	*slot = value;
	return 0;
}

int sv_users_parse(char *text, struct sv_users *u, char *err, size_t errlen)
{
	struct profile p = { .name = "" };
	char *line, *next;
	unsigned n = 0;
	int ini = -1, ret = 0; /* -1: which form is not known yet */

	memset(u, 0, sizeof(*u));
	for (line = text; line && !ret; line = next) {
		char *s;

		next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		n++;
		s = s3_trim(line);
		if (!*s || *s == '#' || (ini && *s == ';')) /* ';': INI's too */
			continue;
		if (ini < 0)
			ini = *s == '[';
		ret = ini ? ini_line(u, &p, s, n, err, errlen)
			  : pair_line(u, s, n, err, errlen);
	}
	if (!ret && ini == 1)
		ret = profile_end(u, &p, err, errlen);
	if (ret == -ENOMEM)
		s3_errf(err, errlen, "out of memory");
	else if (ret == -E2BIG)
		s3_errf(err, errlen, "more than %u users", SV_USERS_MAX);
	if (!ret)
		ret = index_users(u, err, errlen);
	if (ret)
		sv_users_release(u);
	return ret;
}

int sv_users_one(struct sv_users *u, const char *key, const char *secret)
{
	int ret;

	memset(u, 0, sizeof(*u));
	ret = add(u, key, secret, NULL);
	if (!ret)
		ret = index_users(u, NULL, 0);
	if (ret)
		sv_users_release(u);
	return ret;
}

int sv_users_load(const char *path, struct sv_users *u, char *err, size_t errlen)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	struct stat st;
	char *text;
	ssize_t got;
	int ret;

	memset(u, 0, sizeof(*u));
	if (fd < 0) {
		s3_errf(err, errlen, "%s", strerror(errno));
		return -errno;
	}
	if (fstat(fd, &st) || !S_ISREG(st.st_mode) || st.st_size > FILE_MAX) {
		s3_errf(err, errlen, "%s", !S_ISREG(st.st_mode) ? "not a regular file" : "over 1 MiB");
		close(fd);
		return -EINVAL;
	}
	if (st.st_mode & (S_IRWXG | S_IRWXO)) {
		s3_errf(err, errlen, "it holds secret keys and group or others may use it (mode %04o): "
				 "chmod 600 it", (unsigned)(st.st_mode & 07777));
		close(fd);
		return -EPERM;
	}
	if (st.st_uid != geteuid() && st.st_uid != 0) {
		s3_errf(err, errlen, "it holds secret keys and is owned by another user (uid %u)",
		    (unsigned)st.st_uid);
		close(fd);
		return -EPERM;
	}
	text = malloc((size_t)st.st_size + 1);
	if (!text) {
		close(fd);
		s3_errf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	got = rdx_read_full(fd, text, (size_t)st.st_size, NULL);
	ret = got < 0 ? (int)got : 0;
	close(fd);
	if (ret) {
		s3_errf(err, errlen, "%s", strerror(-ret));
	} else if (memchr(text, '\0', (size_t)got)) {
		s3_errf(err, errlen, "a NUL byte in it: not a text file");
		ret = -EINVAL;
	} else {
		text[got] = '\0';
		ret = sv_users_parse(text, u, err, errlen);
	}
	explicit_bzero(text, (size_t)st.st_size + 1);
	free(text);
	return ret;
}

const struct sv_user *sv_users_find(const struct sv_users *u, const char *key)
{
	size_t lo = 0, hi = u->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(key, u->by_key[mid]->access_key);

		if (!c)
			return u->by_key[mid];
		if (c < 0)
			hi = mid;
		else
			lo = mid + 1;
	}
	return NULL;
}
