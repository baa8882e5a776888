/* rdcp's pure parts: scp address forms, and shell quoting checked against
 * a real /bin/sh (what the quoted word comes out as is what went in). */
#include "cp/addr.h"
#include "cp/shquote.h"
#include "cp/sshcfg.h"
#include "tap.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static bool same(const char *a, const char *b)
{
	return (!a && !b) || (a && b && !strcmp(a, b));
}

/* Parses arg and compares with the expected parts (host NULL: local). */
static bool addr_is(const char *arg, const char *user, const char *host,
		    const char *path)
{
	struct cp_addr a;
	bool ok;

	if (cp_addr_parse(arg, &a))
		return false;
	ok = a.remote == (host != NULL) && same(a.user, user) &&
	     same(a.host, host) && same(a.path, path);
	cp_addr_release(&a);
	return ok;
}

/* An scp:// URI, port included. */
static bool uri_is(const char *arg, const char *user, const char *host, const char *port,
		   const char *path)
{
	struct cp_addr a;
	bool ok;

	if (cp_addr_parse(arg, &a))
		return false;
	ok = a.remote && same(a.user, user) && same(a.host, host) && same(a.port, port) &&
	     same(a.path, path);
	cp_addr_release(&a);
	return ok;
}

static bool addr_bad(const char *arg)
{
	struct cp_addr a;

	return cp_addr_parse(arg, &a) == -EINVAL;
}

/* Runs sh -c "printf %s QUOTED" and compares what it printed with s. */
static bool sh_roundtrip(const char *s)
{
	struct cp_cmd c = { 0 };
	char out[4096], *cmd;
	size_t n;
	FILE *f;
	bool ok;

	cp_cmd_raw(&c, "printf %s ");
	cp_cmd_quoted(&c, s);
	if (!cp_cmd_str(&c) || asprintf(&cmd, "/bin/sh -c %s", "\"$RDX_T_CMD\"") < 0) {
		cp_cmd_release(&c);
		return false;
	}
	setenv("RDX_T_CMD", cp_cmd_str(&c), 1);
	f = popen(cmd, "r");
	free(cmd);
	cp_cmd_release(&c);
	if (!f)
		return false;
	n = fread(out, 1, sizeof(out) - 1, f);
	out[n] = '\0';
	ok = pclose(f) == 0 && n == strlen(s) && !memcmp(out, s, n);
	if (!ok)
		fprintf(stderr, "# sh printed '%s' for '%s'\n", out, s);
	return ok;
}

/* cp_sshcfg_value() over a config written here. */
static const char *cfg_value(const char *cfg, const char *host)
{
	static char out[64];
	char path[] = "/tmp/rdx-test-sshcfg-XXXXXX";
	int fd = mkstemp(path), r;

	if (fd < 0 || write(fd, cfg, strlen(cfg)) != (ssize_t)strlen(cfg))
		return "(write failed)";
	close(fd);
	r = cp_sshcfg_value(path, host, "StrictHostKeyChecking", out, sizeof(out));
	unlink(path);
	return r == 1 ? out : r == 0 ? "(none)" : "(error)";
}

static void sshcfg(void)
{
	const char *cfg = "# comment\n"
			  "Host lab*  !lab-secure\n"
			  "    StrictHostKeyChecking accept-new\n"
			  "Host *.example.org other\n"
			  "\tstricthostkeychecking=no\n"
			  "Match host matched\n"
			  "    StrictHostKeyChecking no\n"
			  "Host *\n"
			  "    StrictHostKeyChecking \"yes\"\n";

	CHECK(!strcmp(cfg_value(cfg, "lab7"), "accept-new"), "a Host pattern with '*'");
	CHECK(!strcmp(cfg_value(cfg, "LAB7"), "accept-new"), "host names match without case");
	CHECK(!strcmp(cfg_value(cfg, "lab-secure"), "yes"), "a negated pattern excludes a host");
	CHECK(!strcmp(cfg_value(cfg, "a.example.org"), "no"), "key=value, any case");
	CHECK(!strcmp(cfg_value(cfg, "other"), "no"), "the second pattern of a Host line");
	CHECK(!strcmp(cfg_value(cfg, "matched"), "yes"), "a Match block is not taken");
	CHECK(!strcmp(cfg_value(cfg, "x"), "yes"), "the first value wins; quotes removed");
	CHECK(!strcmp(cfg_value("StrictHostKeyChecking no\nHost x\n StrictHostKeyChecking yes\n",
				"x"), "no"),
	      "a value before any Host line applies to every host");
	CHECK(!strcmp(cfg_value("Host y\n StrictHostKeyChecking no\n", "x"), "(none)"),
	      "no value for a host no block matches");
	{
		char out[8];

		CHECK(cp_sshcfg_value("/nonexistent/rdx-ssh-config", "x", "StrictHostKeyChecking",
				      out, sizeof(out)) == 0,
		      "a missing file says nothing");
	}
}

int main(void)
{
	static const char *hostile[] = {
		"plain", "a b", "it's", "''", "'", "\"dq\"", "$HOME", "${HOME}",
		"$(id)", "`id`", "a;b", "a&&b", "a|b", "a\nb", "tab\tx", "back\\slash",
		"*", "?", "[a]", "~", "~root", "-dash", "--", "ünïcødé ✓", "\\'", "!x",
		"'; touch /tmp/rdx-test-cp-pwned; '", "",
	};
	struct cp_cmd c = { 0 };
	size_t i;

	CHECK(addr_is("file", NULL, NULL, "file"), "a plain name is local");
	CHECK(addr_is("/abs/path", NULL, NULL, "/abs/path"), "an absolute path is local");
	CHECK(addr_is("./a:b", NULL, NULL, "./a:b"), "a '/' before ':' is local");
	CHECK(addr_is("dir/a:b", NULL, NULL, "dir/a:b"), "dir/a:b is local");
	CHECK(addr_is("host:path", NULL, "host", "path"), "host:path");
	CHECK(addr_is("host:", NULL, "host", ""), "host: is the home directory");
	CHECK(addr_is("host:/a:b", NULL, "host", "/a:b"), "a ':' in the remote path");
	CHECK(addr_is("u@host:p", "u", "host", "p"), "user@host:path");
	CHECK(addr_is("u@x@host:p", "u@x", "host", "p"), "the last '@' ends the user");
	CHECK(addr_is("[::1]:p", NULL, "::1", "p"), "[v6]:path");
	CHECK(addr_is("u@[fe80::1%eth0]:/p", "u", "fe80::1%eth0", "/p"), "user@[v6%%scope]:path");
	CHECK(addr_is("[draft].txt", NULL, NULL, "[draft].txt"), "brackets without ':' are local");
	CHECK(addr_is("[::1]", NULL, NULL, "[::1]"), "[addr] without ':' is local");
	CHECK(addr_bad(":path"), "empty host rejected");
	CHECK(addr_bad("u@:path"), "user@ with an empty host rejected");
	CHECK(addr_bad("@host:p"), "empty user rejected");
	CHECK(addr_bad("[]:p"), "empty brackets rejected");
	CHECK(addr_bad("u@[::1"), "unclosed bracket after user@ rejected");
	CHECK(uri_is("scp://host/file", NULL, "host", NULL, "file"), "scp://host/path: relative to home");
	CHECK(uri_is("scp://u@host:2222//abs/p", "u", "host", "2222", "/abs/p"),
	      "scp://user@host:port//absolute");
	CHECK(uri_is("scp://host", NULL, "host", NULL, ""), "scp://host: the home directory");
	CHECK(uri_is("scp://host:22", NULL, "host", "22", ""), "scp://host:port");
	CHECK(uri_is("scp://[::1]:2200/a%20b+c", NULL, "::1", "2200", "a b c"),
	      "scp://[v6]:port/, %%XX and '+' decoded");
	CHECK(uri_is("scp://j%40x;fp=1@h/p", "j@x", "h", NULL, "p"),
	      "a URI's user decoded, ;params ignored");
	CHECK(addr_bad("scp://"), "scp:// without a host");
	CHECK(addr_bad("scp://h:/p"), "an empty port");
	CHECK(addr_bad("scp://h:99999/p"), "a port beyond 65535");
	CHECK(addr_bad("scp://h:2x/p"), "a port that is no number");
	CHECK(addr_bad("scp://h/a%00b"), "%%00 in a path");
	CHECK(addr_bad("scp://h/a%4"), "a cut escape");
	CHECK(addr_bad("scp://@h/p"), "an empty user");
	CHECK(addr_bad("scp://[::1/p"), "an unclosed bracket");
	CHECK(strcmp(cp_basename("/a/b/c.txt"), "c.txt") == 0, "basename");
	CHECK(strcmp(cp_basename("c"), "c") == 0, "basename without '/'");
	CHECK(strcmp(cp_basename("/a/"), "") == 0, "basename of a directory path");

	cp_cmd_raw(&c, "exec ");
	cp_cmd_quoted(&c, "it's");
	CHECK(cp_cmd_str(&c) && strcmp(cp_cmd_str(&c), "exec 'it'\\''s'") == 0,
	      "a quote closes, is escaped, reopens");
	cp_cmd_release(&c);
	for (i = 0; i < sizeof(hostile) / sizeof(hostile[0]); i++)
		CHECK(sh_roundtrip(hostile[i]), "sh gets back exactly what was quoted (%zu)", i);
	sshcfg();
	return TAP_DONE();
}
