# bash completion for rdx-diag, generated from its option table
# (rdx-diag --completion bash); do not edit.
_rdx-diag()
{
	local cur prev
	cur="${COMP_WORDS[COMP_CWORD]}"
	prev="${COMP_WORDS[COMP_CWORD-1]}"
	case "$prev" in
	--timeout)
		return 0 ;;
	--bind)
		COMPREPLY=($(compgen -A hostname -- "$cur")); return 0 ;;
	esac
	if [[ "$cur" == -* ]]; then
		COMPREPLY=($(compgen -W "-v --verbose --json --timeout --bind -4 --ipv4 -6 --ipv6 -h --help -V --version " -- "$cur"))
		return 0
	fi
	COMPREPLY=($(compgen -A hostname -- "$cur"))
}
complete -F _rdx-diag rdx-diag
