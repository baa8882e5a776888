#include "cp/addr.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

void cp_addr_release(struct cp_addr *a)
{
	free(a->user);
	free(a->host);
	free(a->path);
	free(a->port);
	a->user = a->host = a->path = a->port = NULL;
}

static int dup_range(char **out, const char *s, size_t n)
{
	*out = strndup(s, n);
	return *out ? 0 : -ENOMEM;
}

static int hex_val(char c)
{
	return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
	       : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* s[0..n) with %XX decoded and '+' as a blank, as scp decodes a URI's
 * user and path.  0, -EINVAL (a bad or NUL escape) or -ENOMEM. */
static int url_decode(char **out, const char *s, size_t n)
{
	char *d = malloc(n + 1), *p = d;

	if (!d)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		if (s[i] == '+') {
			*p++ = ' ';
		} else if (s[i] == '%') {
			int hi = i + 2 < n ? hex_val(s[i + 1]) : -1;
			int lo = hi >= 0 ? hex_val(s[i + 2]) : -1;

			if (lo < 0 || (hi == 0 && lo == 0)) {
				free(d);
				return -EINVAL;
			}
			*p++ = (char)(hi << 4 | lo);
			i += 2;
		} else {
			*p++ = s[i];
		}
	}
	*p = '\0';
	*out = d;
	return 0;
}

/* scp://[user@]host[:port][/path], as OpenSSH's scp parses it: the user
 * and the path URL-encoded, the host in brackets for IPv6, the path
 * after the first '/' (none: the login directory). */
static int parse_uri(const char *u, struct cp_addr *out)
{
	const char *at = strchr(u, '@'), *h, *end, *slash;
	int ret = 0;

	out->remote = true;
	h = at ? at + 1 : u;
	if (at) {
		const char *semi = memchr(u, ';', (size_t)(at - u)); /* ;params: ignored */

		if (at == u || semi == u)
			return -EINVAL;
		ret = url_decode(&out->user, u, (size_t)((semi ? semi : at) - u));
	}
	if (*h == '[') {
		end = strchr(h, ']');
		if (!end || end == h + 1)
			ret = ret ? ret : -EINVAL;
		else if (!ret)
			ret = dup_range(&out->host, h + 1, (size_t)(end - h - 1));
		end = end ? end + 1 : h + strlen(h);
	} else {
		end = h + strcspn(h, ":/");
		if (end == h)
			ret = ret ? ret : -EINVAL;
		else if (!ret)
			ret = dup_range(&out->host, h, (size_t)(end - h));
	}
	if (!ret && *end == ':') {
		size_t n = strcspn(end + 1, "/");
		long port = 0;

		for (size_t i = 0; i < n && port <= 65535; i++)
			port = end[1 + i] >= '0' && end[1 + i] <= '9' ? port * 10 + end[1 + i] - '0' : 70000;
		if (!n || port < 1 || port > 65535)
			ret = -EINVAL;
		else
			ret = dup_range(&out->port, end + 1, n);
		end += 1 + n;
	}
	if (!ret && *end && *end != '/')
		ret = -EINVAL;
	slash = *end == '/' ? end + 1 : end;
	if (!ret)
		ret = url_decode(&out->path, slash, strlen(slash));
	if (ret)
		cp_addr_release(out);
	return ret;
}

int cp_addr_parse(const char *arg, struct cp_addr *out)
{
	const char *colon, *at, *host, *hend;
	int ret;

	memset(out, 0, sizeof(*out));
	if (!strncmp(arg, "scp://", 6))
		return parse_uri(arg + 6, out);
	/* user@ may come before a bracketed address: find where the host
	 * starts (after the last '@' before the first ':' or '/'). */
	colon = NULL;
	host = arg;
	at = NULL;
	for (const char *p = arg; *p && *p != '/'; p++) {
		if (*p == '[')
			break;
		if (*p == ':') {
			colon = p;
			break;
		}
		if (*p == '@')
			at = p;
	}
	if (at)
		host = at + 1;
	if (*host == '[' && (!at || !colon || colon > host)) {
		const char *close = strchr(host, ']');

		/* "[v6]:path"; a '[' that does not open an address is a
		 * local name ("[draft].txt"). */
		if (!close || close[1] != ':') {
			if (at)
				return -EINVAL; /* "user@[..." names no host */
			return dup_range(&out->path, arg, strlen(arg));
		}
		if (close == host + 1)
			return -EINVAL;
		ret = dup_range(&out->host, host + 1, (size_t)(close - host - 1));
		hend = close + 1;
	} else {
		if (!colon)
			return dup_range(&out->path, arg, strlen(arg));
		if (colon == host)
			return -EINVAL; /* ":path" or "user@:path" */
		ret = dup_range(&out->host, host, (size_t)(colon - host));
		hend = colon;
	}
	out->remote = true;
	if (!ret && at)
		ret = at == arg ? -EINVAL : dup_range(&out->user, arg, (size_t)(at - arg));
	if (!ret)
		ret = dup_range(&out->path, hend + 1, strlen(hend + 1));
	if (ret)
		cp_addr_release(out);
	return ret;
}

const char *cp_basename(const char *path)
{
	const char *slash = strrchr(path, '/');

	return slash ? slash + 1 : path;
}
