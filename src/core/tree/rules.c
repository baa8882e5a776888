#include "core/tree/rules.h"

#include <fnmatch.h>
#include <stdlib.h>
#include <string.h>

bool rdx_rules_pass(const struct rdx_rule *rules, size_t n, const char *rel)
{
	bool pass = true;
	size_t i;

	for (i = 0; i < n; i++)
		if (!fnmatch(rules[i].pattern, rel, 0))
			pass = rules[i].include;
	return pass;
}

bool rdx_rules_pass_path(const struct rdx_rule *rules, size_t n, const char *rel)
{
	char *copy, *slash;
	bool pass = true;

	if (!n)
		return true;
	copy = strdup(rel);
	if (!copy)
		return false; /* when in doubt, leave it alone */
	for (slash = strchr(copy, '/'); slash && pass; slash = strchr(slash + 1, '/')) {
		*slash = '\0';
		pass = rdx_rules_pass(rules, n, copy);
		*slash = '/';
	}
	if (pass)
		pass = rdx_rules_pass(rules, n, copy);
	free(copy);
	return pass;
}
