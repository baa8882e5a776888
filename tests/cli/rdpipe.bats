#!/usr/bin/env bats
# rdpipe across three network namespaces (tests/lib/netns.bash
# netns3_setup): real OpenSSH sshd in A (Host rdxhost) and in C (Host
# rdxc), rdpipe in B.  B reaches A and C over their own links; A and C
# reach each other over the A-C link only (a host route each way), and B
# forwards nothing: data between A and C cannot cross B.  All three share
# the file system, so a path in $D names the same file on every "host".

load ../lib/common
load ../lib/netns
load ../lib/sshd

setup_file() {
	CLEANUPS=()
	sshd_setup netns3_setup
	export NS_C IP_C IP_BC IP_AC_A IP_AC_C
	sshd_add "$NS_C" "$IP_C" rdxc
	# A dials C at the name B uses for it, over the A-C link.
	ip -n "$NS_A" route add "$IP_C/32" via "$IP_AC_C" || fail "cannot route $IP_C through the A-C link"
}

teardown_file() {
	sshd_teardown
}

setup() {
	rdcp_test_setup
	RDPIPE=$RDX_BUILD/rdpipe
	[ -x "$RDPIPE" ] || fail "rdpipe not built: $RDPIPE"
}

# rdpipe_b ARGS...: rdpipe in namespace B, its stdin $PIPE_IN (default
# /dev/null), the test's SSH config and the fresh rdpipe on the far
# hosts, --timeout 10, killed after 60 s; sets status, output, stderr.
rdpipe_b() {
	run_t --secs 60 ip netns exec "$NS_B" "$RDPIPE" -F "$SSH_CONFIG" \
		--remote-path "$RDX_BUILD" --timeout 10 "$@" <"${PIPE_IN:-/dev/null}"
}

# ours_left: what of ours still runs in A, B or C (rdpipe, the test's
# commands, their shells), one "ns comm args" line each.
ours_left() {
	local ns p comm
	for ns in "$NS_A" "$NS_B" "$NS_C"; do
		for p in $(ip netns pids "$ns"); do
			comm=$(cat "/proc/$p/comm" 2>/dev/null) || continue
			case $comm in
			rdpipe | sleep | cat | sh | bash | yes | sha1sum | wc)
				echo "$ns $comm $(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null)"
				;;
			esac
		done
	done
}

assert_nothing_left() {
	# shellcheck disable=SC2317 # called by wait_until
	none_left() { [ -z "$(ours_left)" ]; }
	wait_until 15 none_left || fail "left running: $(ours_left)"
}

# b_bytes: bytes through B's two links so far (SSH, and data if any).
b_bytes() {
	echo $(($(netns_bytes "$NS_B" veth1) + $(netns_bytes "$NS_B" vethbc)))
}

@test "rdpipe: rdma-pipe's README examples: wc -c, sha1sum, tee, and the '<' '>' '>>' operators" {
	mkrand "$D/myfile" 1000001
	PIPE_IN=$D/myfile rdpipe_b "rdxhost:wc -c"
	assert_status 0
	[ "$output" = 1000001 ] || fail "wc -c said '$output'; stderr: $stderr"
	PIPE_IN=$D/myfile rdpipe_b rdxhost:sha1sum
	assert_status 0
	[ "$output" = "$(sha1sum <"$D/myfile")" ] || fail "sha1sum: $output"
	PIPE_IN=$D/myfile rdpipe_b "rdxhost:> $D/mycopy"
	assert_status 0
	[ -z "$output" ] || fail "'>' printed: $output"
	assert_same "$D/myfile" "$D/mycopy"
	PIPE_IN=$D/myfile rdpipe_b "rdxhost:tee $D/mycopy2 | wc -c; echo done"
	assert_status 0
	[ "$output" = $'1000001\ndone' ] || fail "tee: $output"
	assert_same "$D/myfile" "$D/mycopy2"
	# A tee chain through both hosts: each keeps a copy, the last counts.
	PIPE_IN=$D/myfile rdpipe_b "rdxhost:tee $D/t1" "rdxc:tee $D/t2" "rdxhost:wc -c"
	assert_status 0
	[ "$output" = 1000001 ] || fail "tee chain: $output"
	assert_same "$D/myfile" "$D/t1"
	assert_same "$D/myfile" "$D/t2"
	# '<' feeds a file, '>' writes one: caps through another host.
	printf 'hello pipe\n' >"$D/textfile"
	rdpipe_b "rdxhost:< $D/textfile" "rdxc:tr '[:lower:]' '[:upper:]'" "rdxhost:> $D/TEXTFILE"
	assert_status 0
	[ "$(cat "$D/TEXTFILE")" = "HELLO PIPE" ] || fail "TEXTFILE: $(cat "$D/TEXTFILE")"
	# '>>' appends; '>' with no input makes an empty file.
	printf 'one\n' >"$D/log"
	PIPE_IN=$D/textfile rdpipe_b "rdxc:>> $D/log"
	assert_status 0
	[ "$(cat "$D/log")" = $'one\nhello pipe' ] || fail "log: $(cat "$D/log")"
	echo stale >"$D/empty"
	rdpipe_b "rdxhost:< $D/textfile" "rdxc:> $D/copy" "rdxhost:> $D/empty"
	assert_status 0
	[ -f "$D/empty" ] && [ ! -s "$D/empty" ] || fail "'>' with no input: $(ls -l "$D/empty")"
	assert_same "$D/textfile" "$D/copy"
	assert_no_temp "$D/copy"
}

@test "rdpipe: a '<' after a '>' reads the file once it is whole; a command after '>' runs after it" {
	mkrand "$D/src" 3000000
	rdpipe_b "rdxhost:< $D/src" "rdxc:> $D/mid" "rdxc:< $D/mid" "rdxhost:sha1sum"
	assert_status 0
	[ "$output" = "$(sha1sum <"$D/src")" ] || fail "sha1sum: $output; stderr: $stderr"
	rm -f "$D/mid"
	rdpipe_b "rdxhost:< $D/src" "rdxc:> $D/mid" "rdxhost:wc -c < $D/mid"
	assert_status 0
	[ "$output" = 3000000 ] || fail "the command after '>' saw: $output"
}

@test "rdpipe: 0 bytes, 1 byte and 256 MiB (unless RDX_BIG_SIZE) come out as a local shell pipeline's; the data goes A to C directly" {
	local n before after
	for n in 0 1; do
		mkrand "$D/in" "$n"
		PIPE_IN=$D/in rdpipe_b rdxhost:cat rdxc:cat
		assert_status 0
		[ "$output" = "$(cat "$D/in")" ] || fail "$n bytes: '$output'"
	done
	mkrand "$D/in" "${RDX_BIG_SIZE:-256M}"
	# Read on A, through C and back to A: B sees only the hash.
	before=$(b_bytes)
	run_t --secs 120 ip netns exec "$NS_B" "$RDPIPE" -F "$SSH_CONFIG" --remote-path "$RDX_BUILD" \
		"rdxhost:cat $D/in" "rdxc:tr a b" "rdxhost:sha256sum"
	after=$(b_bytes)
	assert_status 0
	[ "$output" = "$(tr a b <"$D/in" | sha256sum)" ] || fail "256 MiB: $output"
	[ $((after - before)) -lt $((16 * 1024 * 1024)) ] ||
		fail "$((after - before)) bytes crossed B for a pipeline that ends on A"
	# Through this host and out: byte-identical.
	run_t --secs 120 bash -c 'ip netns exec "$1" "$2" -F "$3" --remote-path "$4" rdxhost:cat rdxc:cat <"$5" >"$6"' \
		_ "$NS_B" "$RDPIPE" "$SSH_CONFIG" "$RDX_BUILD" "$D/in" "$D/out"
	assert_status 0
	assert_same "$D/in" "$D/out"
}

@test "rdpipe: the same host twice, and a local segment in the middle" {
	printf 'b\na\nc\n' >"$D/in"
	PIPE_IN=$D/in rdpipe_b -4 rdxhost:cat rdxhost:sort rdxhost:cat
	assert_status 0
	[ "$output" = $'a\nb\nc' ] || fail "same host thrice: $output"
	PIPE_IN=$D/in rdpipe_b "rdxhost:tr a-z A-Z" ":sort -r" "rdxc:cat -n"
	assert_status 0
	[ "$output" = "$(tr a-z A-Z <"$D/in" | sort -r | cat -n)" ] || fail "local middle: $output"
}

@test "rdpipe: a failing middle segment names itself and gives its status" {
	rdpipe_b rdxhost:'echo x' rdxc:'exit 7' rdxhost:cat
	assert_status 7
	assert_match "$stderr" "^rdpipe: segment 2 \(exit 7\) on 'rdxc' failed: exit status 7$"
	rdpipe_b rdxhost:'echo x' rdxc:false rdxhost:cat
	assert_status 1
	assert_match "$stderr" "^rdpipe: segment 2 \(false\) on 'rdxc' failed: exit status 1$"
	assert_nothing_left
}

@test "rdpipe: each segment's stderr comes prefixed with its host (--no-prefix: bare)" {
	rdpipe_b rdxhost:'echo from-a >&2; echo data' rdxc:'cat; echo from-c >&2'
	assert_status 0
	[ "$output" = data ] || fail "stdout: $output"
	assert_match "$stderr" "^rdxhost: from-a$"
	assert_match "$stderr" "^rdxc: from-c$"
	rdpipe_b --no-prefix rdxhost:'echo from-a >&2' rdxc:cat
	assert_status 0
	assert_match "$stderr" "^from-a$"
}

@test "rdpipe: a segment killed mid-stream tears the pipeline down everywhere" {
	mkfifo "$D/fifo"
	BG_STDIN=/dev/null bg_start pipe ip netns exec "$NS_B" "$RDPIPE" -F "$SSH_CONFIG" \
		--remote-path "$RDX_BUILD" --timeout 10 rdxhost:'yes' rdxc:"sleep 300 </dev/null & echo \$! >$D/pid; cat" rdxhost:'wc -c'
	wait_until 20 test -s "$D/pid" || fail "the middle segment never started: $(cat "$D/pipe.err")"
	# The middle segment's command dies (the shell, or the cat it became:
	# the sleep's parent), its background sleep still running.
	kill -KILL "$(ps -o ppid= "$(cat "$D/pid")" | tr -d ' ')"
	wait_exit "$BG_PID" 30
	[ "$WAIT_RC" -ne 0 ] && [ "$WAIT_RC" -ne 124 ] || fail "rdpipe: exit $WAIT_RC: $(cat "$D/pipe.err")"
	assert_file_match "$D/pipe.err" "failed"
	assert_nothing_left
}

@test "rdpipe: SIGINT ends it with 130 and nothing of ours runs anywhere" {
	BG_STDIN=/dev/null bg_start pipe ip netns exec "$NS_B" "$RDPIPE" -F "$SSH_CONFIG" \
		--remote-path "$RDX_BUILD" --timeout 10 rdxhost:'yes' ":cat" rdxc:"sleep 300 & cat >/dev/null"
	# shellcheck disable=SC2317 # called by wait_until
	running() { ours_left | grep -q "sleep 300"; }
	wait_until 20 running || fail "the pipeline never started: $(cat "$D/pipe.err")"
	sleep 0.5
	kill -INT "$BG_PID"
	wait_exit "$BG_PID" 30
	assert_rc pipe "$WAIT_RC" 130
	assert_file_match "$D/pipe.err" '^rdpipe: interrupted$'
	assert_nothing_left
}

@test "rdpipe: a host that does not answer is a clear error within the SSH timeout" {
	local t0=$SECONDS
	# IP_AC_A is not reachable from B: nothing answers there.
	run_t --secs 30 ip netns exec "$NS_B" "$RDPIPE" -o StrictHostKeyChecking=no \
		-o UserKnownHostsFile=/dev/null --connect-timeout 2 "root@10.234.1.1:cat"
	assert_status 3
	assert_match "$stderr" "^rdpipe: cannot connect to '10.234.1.1' over SSH"
	[ $((SECONDS - t0)) -lt 10 ] || fail "took $((SECONDS - t0)) s"
}

@test "rdpipe: the keys never appear on a command line; --dry-run shows the plan and runs nothing" {
	BG_STDIN=/dev/null bg_start pipe ip netns exec "$NS_B" "$RDPIPE" -F "$SSH_CONFIG" \
		--remote-path "$RDX_BUILD" --timeout 10 rdxhost:'sleep 3; echo' rdxc:cat
	# shellcheck disable=SC2317 # called by wait_until
	both() { [ "$(pgrep -fc -- '--far ')" -ge 2 ]; }
	wait_until 20 both || fail "no far segments: $(cat "$D/pipe.err")"
	! ps -eo args | grep -- '--far ' | grep -qE '[0-9a-f]{64}' || fail "a key on a command line: $(ps -eo args | grep -- --far)"
	wait_exit "$BG_PID" 30
	assert_rc pipe "$WAIT_RC" 0
	rdpipe_b --dry-run "rdxhost:< $D/nothing" ":sort" "rdxc:> $D/never"
	assert_status 0
	assert_match "$output" "^segment 1 \(<$D/nothing\) on 'rdxhost': ssh rdxhost exec"
	assert_match "$output" "^segment 2 \(sort\) on 'localhost': here"
	assert_match "$output" "hop 2: localhost dials, rdxc listens"
	[ ! -e "$D/never" ] || fail "--dry-run ran something"
}

@test "rdpipe: -v reports each hop; --streams and --compress apply to every hop" {
	mkrand "$D/in" 2000000
	PIPE_IN=$D/in rdpipe_b -v --streams 2 --compress rdxhost:cat "rdxc:cat > $D/out"
	assert_status 0
	assert_same "$D/in" "$D/out"
	assert_match "$stderr" "^rdpipe: hop 1: stdin -> rdxhost: 1.91 MiB"
	assert_match "$stderr" "^rdpipe: hop 2: rdxhost -> rdxc: 1.91 MiB"
	assert_match "$stderr" "^rdpipe: hop 3: rdxc -> stdout: 0 B"
}

@test "rdpipe: --ack-timeout goes to every far segment as given (0 as 0), and only when given" {
	rdpipe_b --dry-run --ack-timeout 16 rdxhost:cat rdxc:cat
	assert_status 0
	[ "$(grep -c -- "--far .* --ack-timeout 16 " <<<"$output")" = 2 ] || fail "$output"
	rdpipe_b --dry-run --ack-timeout 0 rdxhost:cat
	assert_status 0
	assert_match "$output" "--far .* --ack-timeout 0 "
	rdpipe_b --dry-run rdxhost:cat
	assert_status 0
	! grep -q -- --ack-timeout <<<"$output" || fail "$output"
	rdpipe_b --ack-timeout 32 rdxhost:cat
	assert_status 2
}

@test "rdpipe: usage errors" {
	rdpipe_b
	assert_status 2
	rdpipe_b "nohost"
	assert_status 2
	assert_match "$stderr" "^rdpipe: invalid segment 'nohost'"
	rdpipe_b "rdxhost:<"
	assert_status 2
	rdpipe_b --rdma-addr nothing rdxhost:cat
	assert_status 2
}

@test "rdpipe: --rdma-addr HOST=ADDR is where the hosts before HOST dial it" {
	printf 'abc\n' >"$D/in"
	# C's address on the A-C link: A dials it there.
	rdpipe_b --dry-run --rdma-addr "rdxc=$IP_AC_C" rdxhost:cat rdxc:cat
	assert_status 0
	assert_match "$output" "^segment 1 \(cat\) on 'rdxhost': ssh rdxhost .* --far-dial '?$IP_AC_C'? "
	# (This host would dial C there too: the pipeline ends on C.)
	PIPE_IN=$D/in rdpipe_b --rdma-addr "rdxc=$IP_AC_C" rdxhost:cat "rdxc:> $D/out"
	assert_status 0
	assert_same "$D/in" "$D/out"
	# An address nothing answers at: the hop fails within the connect timeout.
	PIPE_IN=$D/in rdpipe_b --connect-timeout 2 --rdma-addr "rdxc=10.234.1.1" rdxhost:cat "rdxc:> $D/out2"
	assert_status 3
	assert_match "$stderr" "10.234.1.1"
	[ ! -e "$D/out2" ] || fail "a failed pipeline left $D/out2"
}

@test "rdpipe: rdpipe missing on a host: exit 5, the host named, nothing left" {
	run_t --secs 60 ip netns exec "$NS_B" "$RDPIPE" -F "$SSH_CONFIG" --remote-path "$D/nowhere" \
		rdxhost:cat rdxc:cat </dev/null
	assert_status 5
	assert_match "$stderr" "^rdpipe: rdpipe was not found on 'rdx(c|host)' \(install it there, or name its directory with --remote-path\)$"
	assert_nothing_left
}

@test "rdpipe: --progress draws the last hop's count, a far receiver's too, on a terminal only" {
	command -v script >/dev/null || fail "script (bsdutils) not installed"
	mkrand "$D/src" $((12 * 1024 * 1024))
	# About 1.5 s over the A-C link: time for several progress lines.
	ip netns exec "$NS_A" tc qdisc add dev vethac root tbf rate 64mbit burst 64kb latency 400ms
	CLEANUPS+=(rm_ac_qdisc)
	cmd=$(printf '%q ' ip netns exec "$NS_B" "$RDPIPE" -F "$SSH_CONFIG" --remote-path "$RDX_BUILD" \
		--timeout 10 --progress "rdxhost:cat $D/src" "rdxc:> $D/dst")
	run_t --secs 60 script -qec "$cmd" "$D/typescript"
	assert_status 0
	assert_same "$D/src" "$D/dst"
	bar=$(tr '\r' '\n' <"$D/typescript")
	assert_match "$bar" '^[0-9.]+ [KMG]iB  [0-9]+\.[0-9]{2} GB/s' "progress count and rate"
	! grep -q RDX-PROGRESS "$D/typescript" || fail "a raw progress line was shown: $bar"
	# Without a terminal: nothing drawn, no progress line shown.
	rm -f "$D/dst"
	rdpipe_b --progress "rdxhost:cat $D/src" "rdxc:> $D/dst"
	assert_status 0
	assert_same "$D/src" "$D/dst"
	[ -z "$stderr" ] || fail "stderr without a terminal: $stderr"
}

rm_ac_qdisc() { ip netns exec "$NS_A" tc qdisc del dev vethac root 2>/dev/null || true; }
