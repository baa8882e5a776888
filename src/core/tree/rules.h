/* --include / --exclude: fnmatch(3) patterns (no flags, so '*' matches
 * '/' too, as in aws s3) against a name relative to what is copied; when
 * several match, the last one given wins.  Shared by rds3 sync and trees. */
#ifndef RDX_RULES_H
#define RDX_RULES_H

#include <stdbool.h>
#include <stddef.h>

struct rdx_rule {
	const char *pattern;
	bool include;
};

/* Whether rel passes the rules: included unless a rule excludes it. */
bool rdx_rules_pass(const struct rdx_rule *rules, size_t n, const char *rel);

/* Whether rel and every directory above it pass: what lies in an
 * excluded directory is excluded too. */
bool rdx_rules_pass_path(const struct rdx_rule *rules, size_t n, const char *rel);

#endif
