#include "cmd/opt.h"

#include "core/log.h"

#include <getopt.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

static size_t count(const struct rdx_opt *o)
{
	size_t n = 0;

	while (o[n].name)
		n++;
	return n;
}

int rdx_opt_parse(const struct rdx_cli *cli, int argc, char **argv,
		  int (*handle)(int key, const char *arg, void *ctx), void *ctx)
{
	size_t n = count(cli->opts), i;
	struct option *lo = calloc(n + 1, sizeof(*lo));
	char *so = calloc(3 * n + 2, 1), *p;
	int c, ret = 0;

	if (!lo || !so) {
		free(lo);
		free(so);
		rdx_error("out of memory");
		return -1;
	}
	p = so;
	*p++ = ':'; /* report a missing argument as ':' */
	for (i = 0; i < n; i++) {
		const struct rdx_opt *o = &cli->opts[i];

		lo[i].name = o->name;
		lo[i].has_arg = o->arg == RDX_ARG_NONE ? no_argument :
				o->arg == RDX_ARG_REQUIRED ? required_argument :
							     optional_argument;
		lo[i].val = o->key;
		if (o->key < 256) {
			*p++ = (char)o->key;
			if (o->arg != RDX_ARG_NONE)
				*p++ = ':';
			if (o->arg == RDX_ARG_OPTIONAL)
				*p++ = ':';
		}
	}
	opterr = 0;
	optind = 0; /* a full restart: a second parse (rdcp -> rds3_run) starts afresh */
	while ((c = getopt_long(argc, argv, so, lo, NULL)) != -1) {
		if (c == '?' || c == ':') {
			const char *bad = argv[optind - 1];

			if (c == ':')
				rdx_error("option '%s' needs an argument (see --help)", bad);
			else if (optopt && optopt < 256)
				rdx_error("unknown option '-%c' (see --help)", optopt);
			else
				rdx_error("unknown option '%s' (see --help)", bad);
			ret = -1;
			break;
		}
		if (handle(c, optarg, ctx)) {
			ret = -1;
			break;
		}
	}
	free(lo);
	free(so);
	return ret ? ret : optind;
}

void rdx_opt_help(const struct rdx_cli *cli, FILE *f)
{
	const struct rdx_opt *o;

	fprintf(f, "Usage: %s %s\n%s\n\nOptions:\n", cli->tool, cli->usage,
		cli->summary);
	for (o = cli->opts; o->name; o++) {
		char left[64];
		int n;

		if (!o->help)
			continue;
		if (o->key < 256)
			n = snprintf(left, sizeof(left), "-%c, --%s", o->key, o->name);
		else
			n = snprintf(left, sizeof(left), "    --%s", o->name);
		if (o->arg == RDX_ARG_REQUIRED && n > 0)
			snprintf(left + n, sizeof(left) - (size_t)n, " %s", o->argname);
		else if (o->arg == RDX_ARG_OPTIONAL && n > 0)
			snprintf(left + n, sizeof(left) - (size_t)n, "[=%s]", o->argname);
		fprintf(f, "  %-26s %s\n", left, o->help);
	}
	if (cli->exits)
		fprintf(f, "\n%s\nSee %s(1).\n", cli->exits, cli->tool);
	else
		fprintf(f, "\nExit status: 0 ok, 1 failure, 2 usage, 3 connection/authentication/timeout,\n"
			   "4 local I/O, 5 error reported by the peer, 6 integrity, 130 interrupted.\n"
			   "See %s(1).\n", cli->tool);
}

static bool is_words(const char *c)
{
	return c && strcmp(c, "file") && strcmp(c, "host");
}

static void bash_completion(const struct rdx_cli *cli, FILE *f)
{
	const struct rdx_opt *o;
	const char *fn = cli->tool;

	fprintf(f, "# bash completion for %s, generated from its option table\n"
		   "# (%s --completion bash); do not edit.\n", fn, fn);
	fprintf(f, "_%s()\n{\n\tlocal cur prev\n"
		   "\tcur=\"${COMP_WORDS[COMP_CWORD]}\"\n"
		   "\tprev=\"${COMP_WORDS[COMP_CWORD-1]}\"\n"
		   "\tcase \"$prev\" in\n", fn);
	for (o = cli->opts; o->name; o++) {
		if (!o->help || o->arg != RDX_ARG_REQUIRED)
			continue;
		fprintf(f, "\t--%s)\n", o->name);
		if (!o->complete)
			fprintf(f, "\t\treturn 0 ;;\n");
		else if (!strcmp(o->complete, "file"))
			fprintf(f, "\t\tCOMPREPLY=($(compgen -f -- \"$cur\")); return 0 ;;\n");
		else if (!strcmp(o->complete, "host"))
			fprintf(f, "\t\tCOMPREPLY=($(compgen -A hostname -- \"$cur\")); return 0 ;;\n");
		else
			fprintf(f, "\t\tCOMPREPLY=($(compgen -W \"%s\" -- \"$cur\")); return 0 ;;\n",
				o->complete);
	}
	fprintf(f, "\tesac\n\tif [[ \"$cur\" == -* ]]; then\n\t\tCOMPREPLY=($(compgen -W \"");
	for (o = cli->opts; o->name; o++) {
		if (!o->help)
			continue;
		if (o->key < 256)
			fprintf(f, "-%c ", o->key);
		fprintf(f, "--%s ", o->name);
		if (o->arg == RDX_ARG_OPTIONAL)
			fprintf(f, "--%s= ", o->name);
	}
	fprintf(f, "\" -- \"$cur\"))\n\t\treturn 0\n\tfi\n");
	if (cli->args && !strcmp(cli->args, "scp"))
		/* scp's operands: "host:" for the Host names of ~/.ssh/config
		 * (no patterns) and the plain names of ~/.ssh/known_hosts
		 * (not hashed ones), while the word has no '/' or ':' yet;
		 * files always. */
		fprintf(f, "\tCOMPREPLY=()\n"
			   "\tif [[ \"$cur\" != */* && \"$cur\" != *:* ]]; then\n"
			   "\t\tlocal h\n"
			   "\t\tfor h in $( { sed -nE 's/^[[:space:]]*[Hh][Oo][Ss][Tt][[:space:]=]+//p' ~/.ssh/config 2>/dev/null\n"
			   "\t\t\tawk '$1 !~ /^[|#@]/ { n = split($1, a, \",\"); for (i = 1; i <= n; i++) { h = a[i]; sub(/^\\[/, \"\", h); sub(/\\]:.*/, \"\", h); print h } }' ~/.ssh/known_hosts 2>/dev/null\n"
			   "\t\t\t} | tr -s ' \\t' '\\n\\n' | grep -v '[*?!]' | sort -u); do\n"
			   "\t\t\t[[ \"$h:\" == \"$cur\"* ]] && COMPREPLY+=(\"$h:\")\n"
			   "\t\tdone\n"
			   "\t\t[ ${#COMPREPLY[@]} -gt 0 ] && compopt -o nospace 2>/dev/null\n"
			   "\tfi\n"
			   "\tCOMPREPLY+=($(compgen -f -- \"$cur\"))\n}\n");
	else
		fprintf(f, "\tCOMPREPLY=($(compgen %s -- \"$cur\"))\n}\n",
			cli->args && !strcmp(cli->args, "host") ? "-A hostname" : "-f");
	fprintf(f, "complete -F _%s %s\n", fn, fn);
}

static void zsh_completion(const struct rdx_cli *cli, FILE *f)
{
	const struct rdx_opt *o;

	bool scp = cli->args && !strcmp(cli->args, "scp");

	fprintf(f, "#compdef %s\n# zsh completion for %s, generated from its option table\n"
		   "# (%s --completion zsh); do not edit.\n\n",
		cli->tool, cli->tool, cli->tool);
	if (scp)
		/* scp's operands: "host:" from ssh's config and known_hosts
		 * (zsh's own _ssh_hosts, as ssh's completion has them) while
		 * the word has no '/' or ':' yet; files always. */
		fprintf(f, "_%s_operand() {\n"
			   "  if [[ $PREFIX != */* && $PREFIX != *:* ]]; then\n"
			   "    _alternative 'files:file:_files' 'hosts:host:_ssh_hosts -S :'\n"
			   "  else\n"
			   "    _files\n"
			   "  fi\n"
			   "}\n\n",
			cli->tool);
	fprintf(f, "_arguments -s \\\n");
	for (o = cli->opts; o->name; o++) {
		char action[128] = "";
		const char *sep = o->arg == RDX_ARG_REQUIRED ? "=" :
				  o->arg == RDX_ARG_OPTIONAL ? "=-" : "";
		const char *h;

		if (!o->help)
			continue;
		if (o->arg != RDX_ARG_NONE) {
			if (is_words(o->complete))
				snprintf(action, sizeof(action), ":%s:(%s)", o->argname,
					 o->complete);
			else if (o->complete && !strcmp(o->complete, "file"))
				snprintf(action, sizeof(action), ":%s:_files", o->argname);
			else if (o->complete)
				snprintf(action, sizeof(action), ":%s:_hosts", o->argname);
			else
				snprintf(action, sizeof(action), ":%s: ", o->argname);
		}
		fprintf(f, "  ");
		if (o->key < 256)
			fprintf(f, "'(-%c --%s)'{-%c,--%s%s}'[", o->key, o->name, o->key,
				o->name, sep);
		else
			fprintf(f, "'--%s%s[", o->name, sep);
		/* Brackets and quotes would end the zsh spec early. */
		for (h = o->help; *h; h++)
			fputc(*h == '[' || *h == ']' ? '(' + (*h == ']') : *h == '\'' ? '"' : *h, f);
		fprintf(f, "]%s' \\\n", action);
	}
	if (cli->args && !strcmp(cli->args, "host"))
		fprintf(f, "  '*:host:_hosts'\n");
	else if (scp)
		fprintf(f, "  '*:file or host:_%s_operand'\n", cli->tool);
	else
		fprintf(f, "  '*:file:_files'\n");
}

int rdx_opt_completion(const struct rdx_cli *cli, const char *shell, FILE *f)
{
	if (!strcmp(shell, "bash"))
		bash_completion(cli, f);
	else if (!strcmp(shell, "zsh"))
		zsh_completion(cli, f);
	else
		return -1;
	return 0;
}
