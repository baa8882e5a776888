# bash completion for rdcp, generated from its option table
# (rdcp --completion bash); do not edit.
_rdcp()
{
	local cur prev
	cur="${COMP_WORDS[COMP_CWORD]}"
	prev="${COMP_WORDS[COMP_CWORD-1]}"
	case "$prev" in
	--include)
		return 0 ;;
	--exclude)
		return 0 ;;
	--ssh-port)
		return 0 ;;
	--identity)
		COMPREPLY=($(compgen -f -- "$cur")); return 0 ;;
	--ssh-config)
		COMPREPLY=($(compgen -f -- "$cur")); return 0 ;;
	--ssh-option)
		return 0 ;;
	--cipher)
		return 0 ;;
	--jump)
		COMPREPLY=($(compgen -A hostname -- "$cur")); return 0 ;;
	--remote-path)
		return 0 ;;
	--rdma-addr)
		COMPREPLY=($(compgen -A hostname -- "$cur")); return 0 ;;
	--transport)
		COMPREPLY=($(compgen -W "auto tcp rdma" -- "$cur")); return 0 ;;
	--streams)
		return 0 ;;
	--ack-timeout)
		return 0 ;;
	--direct)
		COMPREPLY=($(compgen -W "auto always never" -- "$cur")); return 0 ;;
	--limit-rate)
		return 0 ;;
	--timeout)
		return 0 ;;
	--connect-timeout)
		return 0 ;;
	--profile)
		return 0 ;;
	--endpoint)
		return 0 ;;
	--region)
		return 0 ;;
	esac
	if [[ "$cur" == -* ]]; then
		COMPREPLY=($(compgen -W "-r --recursive -p --preserve -L --dereference --keep-setid --sync --delete --dry-run --checksum --resume --include --exclude -v --verbose -q --quiet --progress --json -P --ssh-port -i --identity -F --ssh-config -o --ssh-option -B --batch -c --cipher -J --jump -4 --ipv4 -6 --ipv6 --remote-path --rdma-addr --transport --streams --ack-timeout -C --compress --compress= --encrypt --direct -3 --relay -l --limit-rate --timeout --connect-timeout --profile --endpoint --region --no-sign-request --path-style --virtual-host --insecure --rdma --rdma= --rdma-dc --rdma-dc= -h --help -V --version " -- "$cur"))
		return 0
	fi
	COMPREPLY=()
	if [[ "$cur" != */* && "$cur" != *:* ]]; then
		local h
		for h in $( { sed -nE 's/^[[:space:]]*[Hh][Oo][Ss][Tt][[:space:]=]+//p' ~/.ssh/config 2>/dev/null
			awk '$1 !~ /^[|#@]/ { n = split($1, a, ","); for (i = 1; i <= n; i++) { h = a[i]; sub(/^\[/, "", h); sub(/\]:.*/, "", h); print h } }' ~/.ssh/known_hosts 2>/dev/null
			} | tr -s ' \t' '\n\n' | grep -v '[*?!]' | sort -u); do
			[[ "$h:" == "$cur"* ]] && COMPREPLY+=("$h:")
		done
		[ ${#COMPREPLY[@]} -gt 0 ] && compopt -o nospace 2>/dev/null
	fi
	COMPREPLY+=($(compgen -f -- "$cur"))
}
complete -F _rdcp rdcp
