/* Options are data: one table per tool drives getopt_long, --help and the
 * shell completions, so they cannot disagree. */
#ifndef RDX_OPT_H
#define RDX_OPT_H

#include <stdio.h>

enum rdx_opt_arg { RDX_ARG_NONE, RDX_ARG_REQUIRED, RDX_ARG_OPTIONAL };

struct rdx_opt {
	const char *name;	 /* long name, without "--" */
	int key;		 /* short letter, or a value >= 256 */
	enum rdx_opt_arg arg;
	const char *argname;	 /* "SECS"; NULL without an argument */
	const char *help;	 /* one line; NULL hides the option */
	const char *complete;	 /* "file", "host", or words: "auto tcp rdma" */
};

struct rdx_cli {
	const char *tool;
	const char *usage;	/* the synopsis after the tool's name */
	const char *summary;	/* one sentence */
	const struct rdx_opt *opts; /* ended by an entry with name NULL */
	/* The exit statuses --help lists, "Exit status: 0 ok, 1 ...";
	 * NULL: the table the transfer tools share (err.h). */
	const char *exits;
	/* What the positional arguments complete to: "host"; "scp": files,
	 * and "host:" from ~/.ssh/config and known_hosts (bash); NULL:
	 * files. */
	const char *args;
};

/* Parses argv with getopt_long from the table; calls handle(key, optarg)
 * for each option.  Returns optind, or -1 after a usage error (printed). */
int rdx_opt_parse(const struct rdx_cli *cli, int argc, char **argv,
		  int (*handle)(int key, const char *arg, void *ctx), void *ctx);

/* Prints --help. */
void rdx_opt_help(const struct rdx_cli *cli, FILE *f);

/* Prints a completion script for shell "bash" or "zsh".  Returns 0, or -1
 * for an unknown shell. */
int rdx_opt_completion(const struct rdx_cli *cli, const char *shell, FILE *f);

#endif
