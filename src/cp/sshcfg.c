/* A reader for one keyword of an ssh_config(5) file (see sshcfg.h). */
#include "cp/sshcfg.h"

#include <ctype.h>
#include <errno.h>
#include <fnmatch.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* A Host line's patterns against host: a match of a positive pattern and
 * of no negated one. */
static bool host_matches(char *patterns, const char *host)
{
	bool yes = false;

	for (char *p = strtok(patterns, " \t,"); p; p = strtok(NULL, " \t,")) {
		bool neg = *p == '!';

		if (fnmatch(neg ? p + 1 : p, host, FNM_CASEFOLD) == 0) {
			if (neg)
				return false;
			yes = true;
		}
	}
	return yes;
}

int cp_sshcfg_value(const char *path, const char *host, const char *keyword, char *out,
		    size_t len)
{
	FILE *f = fopen(path, "r");
	char *line = NULL;
	size_t cap = 0;
	bool on = true; /* before any Host line: every host */
	int found = 0;

	if (!f)
		return errno == ENOENT ? 0 : -errno;
	while (!found && getline(&line, &cap, f) >= 0) {
		char *k = line + strspn(line, " \t"), *v;
		size_t klen = strcspn(k, " \t=\r\n");

		if (!klen || *k == '#')
			continue;
		v = k + klen;
		v += strspn(v, " \t");
		if (*v == '=')
			v++;
		v += strspn(v, " \t");
		v[strcspn(v, "\r\n")] = '\0';
		for (size_t n = strlen(v); n && isspace((unsigned char)v[n - 1]); n--)
			v[n - 1] = '\0';
		if (klen == 4 && !strncasecmp(k, "Host", 4)) {
			on = host_matches(v, host);
		} else if (klen == 5 && !strncasecmp(k, "Match", 5)) {
			on = false;
		} else if (on && klen == strlen(keyword) && !strncasecmp(k, keyword, klen)) {
			size_t n = strlen(v);

			if (n >= 2 && v[0] == '"' && v[n - 1] == '"') {
				v[n - 1] = '\0';
				v++;
			}
			snprintf(out, len, "%s", v);
			found = 1;
		}
	}
	free(line);
	fclose(f);
	return found;
}
