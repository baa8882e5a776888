# bash completion for rds3, generated from its option table
# (rds3 --completion bash); do not edit.
_rds3()
{
	local cur prev
	cur="${COMP_WORDS[COMP_CWORD]}"
	prev="${COMP_WORDS[COMP_CWORD-1]}"
	case "$prev" in
	--include)
		return 0 ;;
	--exclude)
		return 0 ;;
	--jobs)
		return 0 ;;
	--expires)
		return 0 ;;
	--listen)
		return 0 ;;
	--port)
		return 0 ;;
	--max-connections)
		return 0 ;;
	--max-per-address)
		return 0 ;;
	--header-timeout)
		return 0 ;;
	--rdma-connections)
		return 0 ;;
	--users)
		return 0 ;;
	--expire-uploads)
		return 0 ;;
	--direct)
		COMPREPLY=($(compgen -W "auto always never" -- "$cur")); return 0 ;;
	--profile)
		return 0 ;;
	--endpoint)
		return 0 ;;
	--region)
		return 0 ;;
	--retries)
		return 0 ;;
	--part-size)
		return 0 ;;
	--concurrency)
		return 0 ;;
	--connect-timeout)
		return 0 ;;
	--timeout)
		return 0 ;;
	esac
	if [[ "$cur" == -* ]]; then
		COMPREPLY=($(compgen -W "-v --verbose -q --quiet --progress --json -r --recursive --delete --dry-run --checksum --include --exclude --jobs --resume --expires --listen --port --max-connections --max-per-address --header-timeout --rdma-connections --users --expire-uploads --direct --profile --endpoint --region --no-sign-request --path-style --virtual-host --insecure --rdma --rdma= --rdma-dc --rdma-dc= --retries --part-size --concurrency --connect-timeout --timeout -h --help -V --version " -- "$cur"))
		return 0
	fi
	COMPREPLY=($(compgen -f -- "$cur"))
}
complete -F _rds3 rds3
