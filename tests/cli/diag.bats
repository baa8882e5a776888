#!/usr/bin/env bats
# rdx-diag on a host without RDMA (the build machines: no devices, a
# kernel without InfiniBand): it must say so plainly, fast, and exit 1.
# The same tool on a real device is tests/rxe/diag.sh (Soft-RoCE guest).

load ../lib/common

DIAG=$RDX_BUILD/rdx-diag
NO_DEV='^no RDMA devices( \(.+\))?$'

setup() {
	common_setup
	[ -x "$DIAG" ] || fail "rdx-diag not built: $DIAG"
	# On a host with RDMA these expectations do not hold; say so.
	if [ -n "$(ls -A /sys/class/infiniband 2>/dev/null)" ]; then
		skip "this host has RDMA devices (see tests/rxe/diag.sh)"
	fi
}

# nobody_diag ARGS...: rdx-diag ARGS as nobody, from a copy nobody can
# reach (the checkout may be private to root), with the memlock limit
# $MEMLOCK (prlimit's SOFT:HARD bytes).  Root passes RLIMIT_MEMLOCK
# (CAP_IPC_LOCK); nobody does not.
nobody_diag() {
	N=$(mktemp -d /tmp/rdx-nobody.XXXXXX)
	chmod 755 "$N"
	cp "$DIAG" "$N/"
	CLEANUPS+=(rm_nobody)
	run_t --secs 20 prlimit --memlock="$MEMLOCK" setpriv --reuid=nobody --regid=nogroup \
		--clear-groups "$N/rdx-diag" "$@"
}
rm_nobody() { rm -rf "$N"; }

@test "no devices: exit 1, the reason on stdout and as one line on stderr" {
	run_t --secs 20 "$DIAG"
	assert_status 1
	assert_one_line_error "$stderr" rdx-diag
	assert_match "$stderr" '^rdx-diag: no RDMA devices' "stderr"
	assert_match "$output" "$NO_DEV" "stdout"
	assert_match "$output" '^memlock limit: ' "stdout"
	# No kernel support at all (this machine): the reason says that.
	if [ ! -e /sys/class/infiniband_verbs ]; then
		[ "$stderr" = "rdx-diag: no RDMA devices (this kernel has no RDMA support)" ] ||
			fail "stderr: $stderr"
	fi
}

@test "no devices, with HOST: exit 1 at once, tcp and why" {
	for host in 127.0.0.1 ::1 '[::1]' nonexistent.invalid; do
		SECONDS=0
		run_t --secs 20 "$DIAG" --timeout 30 "$host"
		assert_status 1
		# No devices: no name lookup, no rdma_cm wait, whatever --timeout says.
		[ "$SECONDS" -lt 5 ] || fail "rdx-diag $host took $SECONDS s"
		assert_match "$output" "^transport to ${host//[\[\].]/.}: tcp: no RDMA devices" "stdout for $host"
		assert_one_line_error "$stderr" rdx-diag
		assert_match "$stderr" '^rdx-diag: no RDMA devices' "stderr for $host"
	done
}

@test "--json: valid, says there are no devices, and why" {
	run_t --secs 20 "$DIAG" --json
	assert_status 1
	assert_one_line_error "$stderr" rdx-diag
	[ "$(grep -c '' <<<"$output")" -eq 1 ] || fail "not one line: $output"
	jq -e . <<<"$output" >/dev/null || fail "not JSON: $output"
	jq -e '.tool == "rdx-diag" and .devices == [] and .active_ports == 0 and
		.usable == false and .exit == 1 and .host == null and
		(.devices_reason | startswith("no RDMA devices")) and .reason == .devices_reason' \
		<<<"$output" >/dev/null || fail "unexpected report: $output"
	# The reason in the JSON is the one on stderr.
	[ "rdx-diag: $(jq -r .reason <<<"$output")" = "$stderr" ] || fail "reason differs from stderr: $stderr"
	# And the version is the tool's.
	[ "$(jq -r .version <<<"$output")" = "$("$DIAG" --version | awk '{print $3}')" ]
}

@test "--json with HOST: transport tcp, no route, the reason" {
	run_t --secs 20 "$DIAG" --json 127.0.0.1
	assert_status 1
	jq -e '.host.name == "127.0.0.1" and .host.transport == "tcp" and .host.route == null and
		(.host.reason | startswith("no RDMA devices")) and
		(.host.route_error | startswith("no RDMA devices"))' \
		<<<"$output" >/dev/null || fail "unexpected report: $output"
}

@test "--json memlock: bytes, or null for unlimited; root is exempt" {
	run_t --secs 20 "$DIAG" --json
	want=$(ulimit -l)
	if [ "$want" = unlimited ]; then
		jq -e '.memlock.limit == "unlimited" and .memlock.bytes == null' <<<"$output" >/dev/null ||
			fail "memlock: $output"
	else
		jq -e --argjson b "$((want * 1024))" '.memlock.bytes == $b' <<<"$output" >/dev/null ||
			fail "memlock, want $((want * 1024)) bytes: $output"
	fi
	if [ "$(id -u)" -eq 0 ]; then
		jq -e '.memlock.root_exempt and (.memlock.too_low | not) and .memlock.hint == null' \
			<<<"$output" >/dev/null || fail "root: $output"
	fi
	jq -e '.memlock.needed_bytes == 17825792' <<<"$output" >/dev/null ||
		fail "rdsend's default ring is 16 x 1 MiB + 1 MiB: $output"
}

@test "memlock below rdsend's ring as nobody: too low, and how to raise it" {
	[ "$(id -u)" -eq 0 ] || skip "needs root to become nobody"
	MEMLOCK=1048576:1048576 nobody_diag
	assert_status 1
	assert_match "$output" '^memlock limit: 1\.00 MiB, too low for RDMA$' "stdout"
	assert_match "$output" "^  rdsend pins 17\\.00 MiB by default, more than the hard limit \\(1\\.00 MiB\\) lets 'ulimit -l' raise it to: raise it for every login with '\\* - memlock unlimited' in /etc/security/limits\\.d/" "hint"
	# Devices come first: the reason is still that there are none.
	assert_match "$stderr" '^rdx-diag: no RDMA devices' "stderr"

	MEMLOCK=1048576:1048576 nobody_diag --json
	assert_status 1
	jq -e '.memlock.bytes == 1048576 and .memlock.hard_bytes == 1048576 and .memlock.too_low and
		(.memlock.root_exempt | not) and (.memlock.hint | test("ulimit -l")) and
		(.memlock.hint | test("/etc/security/limits.d/"))' <<<"$output" >/dev/null || fail "json: $output"
}

@test "memlock as nobody, hard limit above the ring: 'ulimit -l', or no hint when enough" {
	[ "$(id -u)" -eq 0 ] || skip "needs root to become nobody"
	hard=$(ulimit -Hl)
	if [ "$hard" != unlimited ] && [ "$hard" -lt 32768 ]; then
		skip "the hard memlock limit here is $hard KiB and cannot be raised"
	fi
	MEMLOCK=1048576:33554432 nobody_diag
	assert_match "$output" "^  rdsend pins 17\\.00 MiB by default: raise the limit with 'ulimit -l 32768' \\(the hard limit\\), or " "hint, hard 32 MiB"
	MEMLOCK=33554432:33554432 nobody_diag
	assert_match "$output" '^memlock limit: 32\.00 MiB$' "stdout, 32 MiB"
	! grep -q 'ulimit' <<<"$output" || fail "a hint although the limit suffices: $output"
}

@test "-v: the route's timing on stderr, the reason last" {
	run_t --secs 20 "$DIAG" -v 127.0.0.1
	assert_status 1
	assert_match "$stderr" '^rdx-diag: asking rdma_cm for a route to 127\.0\.0\.1 \(timeout 2000 ms\)$' "stderr"
	assert_match "$stderr" '^rdx-diag: rdma_cm answered in [0-9]+ ms: ' "stderr"
	assert_match "$(tail -n1 <<<"$stderr")" '^rdx-diag: no RDMA devices' "last stderr line"
}

@test "--help: usage, the options, the exit statuses; exit 0" {
	run_t --secs 10 "$DIAG" --help
	assert_status 0
	[ -z "$stderr" ] || fail "stderr: $stderr"
	assert_match "$output" '^Usage: rdx-diag \[OPTIONS\] \[HOST\]$' "usage"
	for o in --verbose --json --timeout --bind --ipv4 --ipv6 --help --version; do
		grep -qE -- "$o([^a-z-]|$)" <<<"$output" || fail "--help lacks $o"
	done
	assert_match "$output" '^Exit status: 0 .*1 .*' "exit statuses"
	assert_match "$output" '2 usage, 3 HOST not reachable over RDMA' "exit statuses"
}

@test "usage errors: exit 2, one line, nothing on stdout" {
	for args in "a b" "--timeout x" "--timeout 0" "--bogus" "-Z" "--completion fish" "--bind"; do
		# shellcheck disable=SC2086 # split on purpose
		run_t --secs 10 "$DIAG" $args
		[ "$status" -eq 2 ] || fail "rdx-diag $args: exit $status, stderr: $stderr"
		[ -z "$output" ] || fail "rdx-diag $args: stdout: $output"
		assert_one_line_error "$stderr" rdx-diag
	done
}
