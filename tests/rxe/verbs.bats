#!/usr/bin/env bats
# Soft-RoCE, one guest: real verbs faults, provoked on purpose by
# tests/peer/verbspeer.c, and the one-sided API (RDMA READ/WRITE of a
# peer-registered buffer) that later users of the transport build on.
# Each fault must end in a clear error and a non-zero exit, never a hang.
# Run by tests/run.sh (RDX_RXE=1) through scripts/rxe-vm.sh.

load ../lib/common
load rxe

PEER=$RDX_BUILD/tests/verbspeer

@test "one-sided RDMA READ and WRITE; a wrong rkey and an out-of-bounds READ fail with remote access error" {
	[ "$XPORT" = rdma ] || skip "verbs only"
	port=$(free_port)
	bg_start peer "$PEER" serve "$port"
	peer_pid=$BG_PID
	run_t --secs 60 "$PEER" client "$RXE_ADDR" "$port"
	echo "$output"
	echo "$stderr"
	assert_status 0
	[ "$(grep -c '^ok:' <<<"$output")" -eq 10 ]
	wait_exit "$peer_pid" 30
	cat "$D/peer.out" "$D/peer.err"
	assert_rc peer "$WAIT_RC" 0
	[ "$(grep -c '^ok:' "$D/peer.out")" -eq 4 ]
}

@test "a receiver that posts no receives: rdsend ends with RNR retries exceeded, exit 3, within bounds" {
	[ "$XPORT" = rdma ] || skip "verbs only"
	port=$(free_port)
	bg_start peer "$PEER" norecv "$port" 60
	peer_pid=$BG_PID
	wait_until 10 grep -q listening "$D/peer.out" || fail "verbspeer did not listen"
	echo data >"$D/in"
	run_t --secs 60 "$RDSEND" --transport rdma --timeout 30 "$RXE_ADDR" "$port" "$KEY" "$D/in"
	echo "$stderr"
	assert_status 3
	assert_one_line_error "$stderr" rdsend
	assert_match "$stderr" 'RNR retry'
	kill "$peer_pid" 2>/dev/null || true
}

@test "receiver killed mid-stream: rdsend fails naming the lost connection, exit 3" {
	[ "$XPORT" = rdma ] || skip "verbs only"
	port=$(free_port)
	start_recv --transport rdma --timeout 20 "$port" "$KEY" "$D/out"
	wait_listen "$port" 20
	slow_source
	start_send --transport rdma --timeout 20 "$RXE_ADDR" "$port" "$KEY"
	wait_temp "$D/out"
	kill -KILL "$RECV_PID"
	wait_send 40
	cat "$D/send.err"
	assert_rc send "$SEND_RC" 3
	assert_err_file "$D/send.err" rdsend "$LOST|receiver"
}

@test "--transport rdma to an address with nothing listening: connect gives up after --connect-timeout, exit 3" {
	[ "$XPORT" = rdma ] || skip "verbs only"
	port=$(free_port)
	echo data >"$D/in"
	SECONDS=0
	run_t --secs 60 "$RDSEND" --transport rdma --connect-timeout 3 "$RXE_ADDR" "$port" "$KEY" "$D/in"
	echo "$stderr"
	assert_status 3
	assert_one_line_error "$stderr" rdsend
	assert_match "$stderr" "cannot connect"
	[ "$SECONDS" -lt 30 ]
}
