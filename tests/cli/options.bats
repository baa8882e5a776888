#!/usr/bin/env bats
# Option parsing, --help/--version, completions and man pages against
# docs/CLI.md.

load ../lib/common

# The long options docs/CLI.md lists: both tools, then each tool's own
# ("rdsend only" / "rdrecv only").  Each --help shows the options its tool
# accepts.
CLI_COMMON_OPTS=(verbose progress json transport rdma-dev rdma-port gid-index ack-timeout key-file slot-size slots
	streams io-threads encrypt timeout handshake-timeout bind ipv4 ipv6 help version server port stop-on-eof)
CLI_RDSEND_OPTS=("${CLI_COMMON_OPTS[@]}" qps limit-rate compress connect-timeout recursive dereference sync delete dry-run include exclude checksum resume)
CLI_RDRECV_OPTS=("${CLI_COMMON_OPTS[@]}" wait fsync direct connect recursive sync delete expect files-only keep-setid)
CLI_SHORT_OPTS=(-v -4 -6 -h -V)

# Every tool the Makefile builds and installs (its TOOLS line): --help,
# --version, completions and man pages are checked for each, so a new
# tool is covered without editing this file.
read -ra ALL_TOOLS <<<"$(sed -n 's/^TOOLS *:= *//p' "$RDX_REPO/Makefile")"

# long_opts_in: the distinct --long-option tokens on stdin, one per line.
long_opts_in() {
	grep -oE -- '--[a-z][a-z0-9]*(-[a-z0-9]+)*' | sort -u
}

help_opts() { # help_opts TOOL
	"$RDX_BUILD/$1" --help | long_opts_in
}

# A port nothing listens on, for rdsend cases that must fail before or at
# connecting.
dead_port() {
	free_port
}

# --------------------------------------------------------------- --help

# cli_opts TOOL: the long options docs/CLI.md gives TOOL, one per line.
cli_opts() {
	local -n list=CLI_${1^^}_OPTS
	printf -- '--%s\n' "${list[@]}" | sort -u
}

@test "--help exits 0, prints usage on stdout and every long option" {
	for tool in rdsend rdrecv; do
		local -n opts=CLI_${tool^^}_OPTS
		run_t --secs 10 "$RDX_BUILD/$tool" --help
		assert_status 0
		[ -z "$stderr" ] || fail "$tool --help wrote to stderr: $stderr"
		assert_match "$output" "[Uu]sage:.*$tool" "$tool --help"
		for o in "${opts[@]}"; do
			grep -qE -- "--$o([^a-z-]|$)" <<<"$output" ||
				fail "$tool --help does not mention --$o"
		done
		for o in "${CLI_SHORT_OPTS[@]}"; do
			grep -qE -- "(^|[^a-zA-Z0-9-])$o([^a-zA-Z0-9-]|$)" <<<"$output" ||
				fail "$tool --help does not mention $o"
		done
	done
}

@test "the Makefile's TOOLS are rdsend, rdrecv, rdx-diag, ... and all built" {
	[ "${#ALL_TOOLS[@]}" -ge 3 ] || fail "TOOLS from the Makefile: ${ALL_TOOLS[*]}"
	for tool in rdsend rdrecv rdx-diag; do
		[[ " ${ALL_TOOLS[*]} " == *" $tool "* ]] || fail "$tool not in the Makefile's TOOLS"
	done
	for tool in "${ALL_TOOLS[@]}"; do
		[ -x "$RDX_BUILD/$tool" ] || fail "$tool not built"
	done
}

@test "every tool: --help exits 0 with usage on stdout, -h, -V, -v listed" {
	for tool in "${ALL_TOOLS[@]}"; do
		run_t --secs 10 "$RDX_BUILD/$tool" --help
		assert_status 0
		[ -z "$stderr" ] || fail "$tool --help wrote to stderr: $stderr"
		assert_match "$output" "^Usage: $tool " "$tool --help"
		assert_match "$output" "^Exit status: 0 " "$tool --help"
		for o in -h --help -V --version -v --verbose; do
			grep -qE -- "(^|[^a-zA-Z0-9-])$o([^a-zA-Z0-9-]|$)" <<<"$output" ||
				fail "$tool --help does not mention $o"
		done
	done
}

@test "-h is --help" {
	for tool in "${ALL_TOOLS[@]}"; do
		run_t --secs 10 "$RDX_BUILD/$tool" -h
		assert_status 0
		[ "$output" = "$("$RDX_BUILD/$tool" --help)" ]
	done
}

@test "rdsend and rdrecv --help list the same common options" {
	common=$(printf -- '--%s\n' "${CLI_COMMON_OPTS[@]}" | sort -u)
	diff <(comm -12 <(echo "$common") <(help_opts rdsend)) \
		<(comm -12 <(echo "$common") <(help_opts rdrecv))
}

@test "--help lists no option that docs/CLI.md lacks" {
	for tool in rdsend rdrecv; do
		extra=$(comm -13 <(cli_opts "$tool") <(help_opts "$tool"))
		[ -z "$extra" ] || fail "$tool --help lists options not in docs/CLI.md: $extra"
	done
}

@test "--help does not show the hidden --completion" {
	for tool in "${ALL_TOOLS[@]}"; do
		! "$RDX_BUILD/$tool" --help | grep -q -- --completion
	done
}

# ------------------------------------------------------------ --version

@test "--version and -V print 'TOOL (rdxfer) X.Y.Z' and exit 0" {
	for tool in "${ALL_TOOLS[@]}"; do
		for opt in --version -V; do
			run_t --secs 10 "$RDX_BUILD/$tool" "$opt"
			assert_status 0
			assert_match "$output" "^$tool \\(rdxfer\\) [0-9]+\\.[0-9]+\\.[0-9]+$" "$tool $opt"
			[ "$(grep -c '' <<<"$output")" -eq 1 ]
			[ -z "$stderr" ]
		done
	done
	# Every tool comes from one release.
	for tool in "${ALL_TOOLS[@]}"; do
		[ "$("$RDX_BUILD/$tool" --version | awk '{print $3}')" = "$("$RDSEND" --version | awk '{print $3}')" ] ||
			fail "$tool --version differs from rdsend's"
	done
}

# --------------------------------------------------------- usage errors

# usage_error TOOL ARGS...: exit 2, a one-line "TOOL: ..." error, no stdout.
usage_error() {
	local tool=$1
	shift
	run_t --secs 10 "$RDX_BUILD/$tool" "$@"
	if [ "$status" -ne 2 ]; then
		echo "$tool $*: expected exit 2, got $status" >&2
		echo "stderr: $stderr" >&2
		return 1
	fi
	[ -z "$output" ] || fail "$tool $*: usage error wrote to stdout: $output"
	assert_one_line_error "$stderr" "$tool"
}

@test "unknown option: exit 2 with a one-line error" {
	usage_error rdsend --bogus 127.0.0.1 1 k
	usage_error rdrecv --bogus 1 k
	usage_error rdsend -Z 127.0.0.1 1 k
	usage_error rdrecv -Z 1 k
}

@test "one tool's own options are unknown to the other: exit 2" {
	p=$(dead_port)
	usage_error rdrecv --compress "$p" k
	usage_error rdrecv --connect-timeout 1 "$p" k
	usage_error rdsend --connect-timeout 1 --wait 3 127.0.0.1 "$p" k
	usage_error rdsend --connect-timeout 1 --fsync 127.0.0.1 "$p" k
	usage_error rdrecv --qps 2 "$p" k
}

@test "option missing its argument: exit 2" {
	usage_error rdsend 127.0.0.1 1 k --streams
	usage_error rdrecv 1 k --slots
	usage_error rdrecv 1 k --key-file
}

@test "bad --slot-size: exit 2" {
	p=$(dead_port)
	for v in 1000 5K 0 2K 128M 1G abc 4Kx -4K ''; do
		usage_error rdsend --connect-timeout 1 --slot-size "$v" 127.0.0.1 "$p" k
		usage_error rdrecv --slot-size "$v" "$p" k
	done
}

@test "bad --slots: exit 2" {
	p=$(dead_port)
	for v in 0 1 1025 -1 x; do
		usage_error rdsend --connect-timeout 1 --slots "$v" 127.0.0.1 "$p" k
		usage_error rdrecv --slots "$v" "$p" k
	done
}

@test "bad --streams: exit 2" {
	p=$(dead_port)
	for v in 0 65 100 -1 x; do
		usage_error rdsend --connect-timeout 1 --streams "$v" 127.0.0.1 "$p" k
		usage_error rdsend --connect-timeout 1 --qps "$v" 127.0.0.1 "$p" k
		usage_error rdrecv --streams "$v" "$p" k
	done
}

@test "bad --io-threads, --compress level, --timeout, --transport: exit 2" {
	p=$(dead_port)
	usage_error rdsend --connect-timeout 1 --io-threads 0 127.0.0.1 "$p" k
	usage_error rdsend --connect-timeout 1 --io-threads 65 127.0.0.1 "$p" k
	usage_error rdsend --connect-timeout 1 --compress=0 127.0.0.1 "$p" k
	usage_error rdsend --connect-timeout 1 --compress=20 127.0.0.1 "$p" k
	usage_error rdsend --connect-timeout 1 --compress=x 127.0.0.1 "$p" k
	usage_error rdsend --connect-timeout 1 --timeout abc 127.0.0.1 "$p" k
	usage_error rdsend --connect-timeout x 127.0.0.1 "$p" k
	usage_error rdsend --connect-timeout 1 --transport foo 127.0.0.1 "$p" k
	usage_error rdrecv --io-threads 0 "$p" k
	usage_error rdrecv --timeout abc "$p" k
	usage_error rdrecv --wait abc "$p" k
	usage_error rdrecv --transport foo "$p" k
}

@test "bad PORT: exit 2" {
	for v in 0 65536 -1 abc 80x ''; do
		usage_error rdsend --connect-timeout 1 127.0.0.1 "$v" k
	done
	for v in 65536 -1 abc 80x ''; do
		usage_error rdrecv "$v" k
	done
}

@test "missing arguments: exit 2" {
	usage_error rdsend
	usage_error rdsend 127.0.0.1
	usage_error rdsend 127.0.0.1 "$(dead_port)"
	usage_error rdrecv
	usage_error rdrecv "$(dead_port)"
}

@test "too many arguments: exit 2" {
	usage_error rdsend 127.0.0.1 1 k f extra
	usage_error rdrecv 1 k f extra
}

@test "an empty key is a usage error" {
	p=$(dead_port)
	usage_error rdsend --connect-timeout 1 127.0.0.1 "$p" ''
	usage_error rdrecv "$p" ''
	: >"$D/empty"
	usage_error rdrecv --key-file "$D/empty" "$p"
	printf '\n' >"$D/nl"
	usage_error rdsend --connect-timeout 1 --key-file "$D/nl" 127.0.0.1 "$p"
	RDX_KEY= usage_error rdrecv "$p"
}

@test "--key-file together with a positional key: exit 2" {
	echo secret >"$D/kf"
	p=$(dead_port)
	usage_error rdrecv --key-file "$D/kf" "$p" secret "$D/out"
	usage_error rdsend --connect-timeout 1 --key-file "$D/kf" 127.0.0.1 "$p" secret "$D/in"
	[ ! -e "$D/out" ]
}

@test "valid boundary values are accepted (rdsend then fails to connect: 3)" {
	p=$(dead_port)
	cases=("--slot-size 4K --slots 2" "--slot-size 64M --slots 2"
		"--slot-size 4K --slots 1024" "--slot-size 1M" "--slot-size 4096"
		"--streams 1" "--streams 64" "--qps 2" "--io-threads 1" "--io-threads 64"
		"--compress" "--compress=1" "--compress=19" "--transport tcp"
		"--transport auto" "--timeout 1" "-4" "--ipv4")
	# All at once: each waits out its --connect-timeout 1.
	pids=()
	for i in "${!cases[@]}"; do
		# shellcheck disable=SC2086 # split the options on purpose
		bg_start "case$i" "$RDSEND" --connect-timeout 1 ${cases[$i]} 127.0.0.1 "$p" k
		pids+=("$BG_PID")
	done
	for i in "${!cases[@]}"; do
		wait_exit "${pids[$i]}" 15
		[ "$WAIT_RC" -eq 3 ] ||
			fail "rdsend ${cases[$i]}: expected 3 (connect failure), got $WAIT_RC: $(cat "$D/case$i.err")"
	done
}

# ------------------------------------------------------ --transport rdma

@test "--transport rdma on a host without RDMA: exit 3, one line naming the reason" {
	p=$(dead_port)
	run_t --secs 10 "$RDSEND" --connect-timeout 1 --transport rdma 127.0.0.1 "$p" k
	assert_status 3
	[ "$stderr" = "rdsend: --transport rdma: no RDMA device (/dev/infiniband/rdma_cm is missing); rdx-diag lists what this host has" ] ||
		fail "rdsend stderr: $stderr"
	run_t --secs 10 "$RDRECV" --transport rdma "$p" k "$D/out"
	assert_status 3
	[ "$stderr" = "rdrecv: --transport rdma: no RDMA device (/dev/infiniband/rdma_cm is missing); rdx-diag lists what this host has" ] ||
		fail "rdrecv stderr: $stderr"
	[ ! -e "$D/out" ]
}

@test "--transport tcp and auto transfer data" {
	for t in tcp auto; do
		mkrand "$D/src" 100000
		rm -f "$D/dst"
		xfer_file "$D/src" "$D/dst" --transport "$t" -- --transport "$t"
	done
}

# ---------------------------------------------------------- completions

@test "--completion bash is valid bash and mentions every --help option" {
	for tool in "${ALL_TOOLS[@]}"; do
		run_t --secs 10 "$RDX_BUILD/$tool" --completion bash
		assert_status 0
		[ -n "$output" ]
		bash -n <<<"$output" || fail "$tool --completion bash: syntax error"
		for o in $(help_opts "$tool"); do
			grep -qE -- "$o([^a-z-]|$)" <<<"$output" ||
				fail "$tool --completion bash lacks $o"
		done
	done
}

# complete_words TOOL WORD: what TOOL's bash completion offers for WORD.
complete_words() {
	"$RDX_BUILD/$1" --completion bash >"$D/$1.bash"
	run_t --secs 10 bash -c '
		source "$1" || exit 1
		spec=$(complete -p "$2") || exit 1
		fn=$(sed -nE "s/.* -F ([^ ]+) .*/\1/p" <<<"$spec")
		[ -n "$fn" ] || { echo "no -F function: $spec"; exit 1; }
		COMP_WORDS=("$2" "$3"); COMP_CWORD=1; COMP_LINE="$2 $3"; COMP_POINT=${#COMP_LINE}
		"$fn" "$2" "$3" "$2"
		printf "%s\n" "${COMPREPLY[@]}"' _ "$D/$1.bash" "$1" "$2"
}

@test "--completion bash registers a working completion" {
	for tool in "${ALL_TOOLS[@]}"; do
		complete_words "$tool" --ver
		assert_status 0
		assert_match "$output" '^--verbose$' "$tool completion of --ver"
		assert_match "$output" '^--version$' "$tool completion of --ver"
	done
	for tool in rdsend rdrecv; do
		complete_words "$tool" --sl
		assert_status 0
		assert_match "$output" '^--slot-size' "$tool completion of --sl"
		assert_match "$output" '^--slots' "$tool completion of --sl"
	done
}

@test "rdx-diag's bash completion offers host names for HOST" {
	complete_words rdx-diag localh
	assert_status 0
	assert_match "$output" '^localhost$' "rdx-diag completion of localh"
	run_t --secs 10 "$RDX_BUILD/rdx-diag" --completion zsh
	assert_match "$output" "^  '\\*:host:_hosts'$" "rdx-diag zsh operand"
}

@test "rdcp's bash completion offers host: from ~/.ssh/config and known_hosts, and files" {
	mkdir -p "$D/h/.ssh" "$D/w"
	printf 'Host alpha beta *.wild !neg\n  HostName x.example\nhost=gamma\n' >"$D/h/.ssh/config"
	printf 'delta,10.0.0.9 ssh-ed25519 AAAA\n[eps]:2222 ssh-ed25519 AAAA\n|1|c2FsdA==|aGFzaA== ssh-ed25519 AAAA\n' \
		>"$D/h/.ssh/known_hosts"
	touch "$D/w/alpha-file"
	cd "$D/w"
	HOME=$D/h complete_words rdcp ""
	assert_status 0
	for h in alpha: beta: gamma: delta: 10.0.0.9: eps: alpha-file; do
		grep -qxF -- "$h" <<<"$output" || fail "no '$h' in: $output"
	done
	! grep -qE '\*|!|^\||x\.example' <<<"$output" || fail "a pattern, hash or HostName offered: $output"
	HOME=$D/h complete_words rdcp al
	[ "$(sort <<<"$output" | tr '\n' ' ')" = "alpha-file alpha: " ] || fail "for 'al': $output"
	HOME=$D/h complete_words rdcp ./al
	[ "$output" = ./alpha-file ] || fail "for './al': $output"
}

@test "--completion zsh starts with #compdef and mentions every --help option" {
	for tool in "${ALL_TOOLS[@]}"; do
		run_t --secs 10 "$RDX_BUILD/$tool" --completion zsh
		assert_status 0
		assert_match "$(head -n1 <<<"$output")" "^#compdef $tool" "$tool zsh first line"
		for o in $(help_opts "$tool"); do
			grep -qE -- "$o([^a-z-]|$)" <<<"$output" ||
				fail "$tool --completion zsh lacks $o"
		done
		zsh -n <<<"$output" || fail "$tool --completion zsh: syntax error"
	done
}

@test "--completion with an unknown shell: exit 2" {
	for tool in "${ALL_TOOLS[@]}"; do
		usage_error "$tool" --completion fish
	done
}

@test "committed completions/ equal --completion output" {
	for tool in "${ALL_TOOLS[@]}"; do
		[ -f "$RDX_REPO/completions/$tool.bash" ] || fail "missing completions/$tool.bash"
		[ -f "$RDX_REPO/completions/_$tool" ] || fail "missing completions/_$tool"
		diff -u "$RDX_REPO/completions/$tool.bash" <("$RDX_BUILD/$tool" --completion bash) ||
			fail "completions/$tool.bash is stale"
		diff -u "$RDX_REPO/completions/_$tool" <("$RDX_BUILD/$tool" --completion zsh) ||
			fail "completions/_$tool is stale"
	done
}

# ------------------------------------------------------------ man pages

# man_opts FILE: the --options the roff source mentions (\-\- or \- escapes).
man_opts() {
	sed -e 's/\\-/-/g' -e 's/\\f[BIRP]//g' -e 's/\\f(..//g' -e 's/\\&//g' "$1" | long_opts_in
}

@test "man pages mention every --help option and no other" {
	for tool in "${ALL_TOOLS[@]}"; do
		page=$RDX_REPO/man/$tool.1
		[ -f "$page" ] || fail "missing man/$tool.1"
		missing=$(comm -23 <(help_opts "$tool") <(man_opts "$page"))
		[ -z "$missing" ] || fail "man/$tool.1 lacks: $missing"
		extra=$(comm -13 <(help_opts "$tool") <(man_opts "$page"))
		[ -z "$extra" ] || fail "man/$tool.1 mentions options --help lacks: $extra"
	done
}

# help_exit_codes TOOL: the statuses its --help lists after "Exit status:"
# ("0 ok, 1 failure, 2 usage, ..."), one per line.
help_exit_codes() {
	"$RDX_BUILD/$1" --help | sed -n '/^Exit status:/,/^See /p' | tr '\n' ' ' |
		sed -e 's/^Exit status://' -e 's/See .*//' | grep -oE '(^|,) *[0-9]+ ' | tr -dc '0-9\n'
}

@test "man pages render and document the exit codes --help lists" {
	command -v man >/dev/null || fail "man not installed (scripts/deps.sh test installs man-db)"
	for tool in "${ALL_TOOLS[@]}"; do
		page=$RDX_REPO/man/$tool.1
		[ -f "$page" ] || fail "missing man/$tool.1"
		run_t --secs 20 env MANWIDTH=100 MAN_KEEP_FORMATTING= man -P cat -l "$page"
		assert_status 0
		text=$(sed 's/.\x08//g' <<<"$output")
		assert_match "$text" "$tool" "man $tool"
		# Rendered options agree with the source scan too.
		missing=$(comm -23 <(help_opts "$tool") <(long_opts_in <<<"$text"))
		[ -z "$missing" ] || fail "rendered man/$tool.1 lacks: $missing"
		assert_match "$text" '^EXIT (STATUS|CODES|VALUES)' "man $tool"
		section=$(sed -nE '/^EXIT (STATUS|CODES|VALUES)/,/^[A-Z][A-Z ]+$/p' <<<"$text")
		codes=$(help_exit_codes "$tool")
		[ -n "$codes" ] || fail "$tool --help lists no exit status"
		case $tool in
		rdsend | rdrecv) [ "$(echo $codes)" = "0 1 2 3 4 5 6 130" ] ||
			fail "$tool --help exit statuses: $(echo $codes)" ;;
		esac
		for code in $codes; do
			grep -qE "(^|[^0-9])$code([^0-9]|$)" <<<"$section" ||
				fail "man $tool: EXIT STATUS lacks $code"
		done
		# And no status --help does not list.
		for code in $(grep -oE '^ {7}[0-9]+$' <<<"$section"); do
			grep -qx "$code" <<<"$codes" ||
				fail "man $tool: EXIT STATUS has $code, which --help does not list"
		done
	done
}

# zsh_tab HOME DIR COMPDIR KEYS: what zsh's line editor shows after KEYS
# are typed at a prompt in DIR (in a pseudo-terminal, zsh/zpty), with the
# completions of COMPDIR and HOME as given; carriage returns as newlines.
zsh_tab() {
	# shellcheck disable=SC2016 # expanded by zsh
	timeout 30 zsh -f -c '
		zmodload zsh/zpty
		zpty z "HOME=$1 TERM=dumb zsh -f -i"
		zpty -w z "PS1=\"> \"; fpath=($3 \$fpath); autoload -Uz compinit; compinit -u -D; cd $2; zstyle \":completion:*\" list-prompt \"\"; zstyle \":completion:*\" menu no"
		zpty -w z "echo READY"
		zpty -r z line "*READY*"
		sleep 0.5
		zpty -w -n z "$4"
		sleep 1.5
		out=
		while zpty -r -t z chunk; do out+=$chunk; done
		print -r -- "$out"
		zpty -d z' _ "$@" | tr '\r' '\n'
}

@test "rdcp's zsh completion offers host: from ssh's config and known_hosts, and files" {
	mkdir -p "$D/h/.ssh" "$D/w" "$D/comp"
	"$RDX_BUILD/rdcp" --completion zsh >"$D/comp/_rdcp"
	printf 'Host alpha beta\n' >"$D/h/.ssh/config"
	printf 'delta ssh-ed25519 AAAA\n' >"$D/h/.ssh/known_hosts"
	touch "$D/w/alpha-file"
	run zsh_tab "$D/h" "$D/w" "$D/comp" $'rdcp de\t'
	assert_match "$output" "rdcp delta:" "a known_hosts name, with ':'"
	run zsh_tab "$D/h" "$D/w" "$D/comp" $'rdcp al\t\t'
	assert_match "$output" "alpha +alpha-file" "a config host beside a file"
	run zsh_tab "$D/h" "$D/w" "$D/comp" $'rdcp ./al\t'
	assert_match "$output" "rdcp \\./alpha-file" "a path is a file only"
}
