#include "cp/addr.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

void cp_addr_release(struct cp_addr *a)
{
	free(a->user);
	free(a->host);
	free(a->path);
	a->user = a->host = a->path = NULL;
}

static int dup_range(char **out, const char *s, size_t n)
{
	*out = strndup(s, n);
	return *out ? 0 : -ENOMEM;
}

int cp_addr_parse(const char *arg, struct cp_addr *out)
{
	const char *colon, *at, *host, *hend;
	int ret;

	memset(out, 0, sizeof(*out));
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
