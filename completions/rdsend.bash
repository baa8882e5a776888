# bash completion for rdsend, generated from its option table
# (rdsend --completion bash); do not edit.
_rdsend()
{
	local cur prev
	cur="${COMP_WORDS[COMP_CWORD]}"
	prev="${COMP_WORDS[COMP_CWORD-1]}"
	case "$prev" in
	--transport)
		COMPREPLY=($(compgen -W "auto tcp rdma" -- "$cur")); return 0 ;;
	--rdma-dev)
		return 0 ;;
	--rdma-port)
		return 0 ;;
	--gid-index)
		return 0 ;;
	--ack-timeout)
		return 0 ;;
	--key-file)
		COMPREPLY=($(compgen -f -- "$cur")); return 0 ;;
	--slot-size)
		return 0 ;;
	--slots)
		return 0 ;;
	--io-threads)
		return 0 ;;
	--timeout)
		return 0 ;;
	--handshake-timeout)
		return 0 ;;
	--bind)
		COMPREPLY=($(compgen -A hostname -- "$cur")); return 0 ;;
	--streams)
		return 0 ;;
	--qps)
		return 0 ;;
	--limit-rate)
		return 0 ;;
	--connect-timeout)
		return 0 ;;
	--include)
		return 0 ;;
	--exclude)
		return 0 ;;
	--port)
		return 0 ;;
	esac
	if [[ "$cur" == -* ]]; then
		COMPREPLY=($(compgen -W "-v --verbose --progress --json --transport --rdma-dev --rdma-port --gid-index --ack-timeout --key-file --slot-size --slots --io-threads --timeout --handshake-timeout --bind -4 --ipv4 -6 --ipv6 --streams --qps --limit-rate --compress --compress= --encrypt --connect-timeout --resume -r --recursive -L --dereference --sync --delete --dry-run --checksum --include --exclude --server --port --stop-on-eof -h --help -V --version " -- "$cur"))
		return 0
	fi
	COMPREPLY=($(compgen -f -- "$cur"))
}
complete -F _rdsend rdsend
