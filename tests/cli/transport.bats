#!/usr/bin/env bats
# --transport on a host without RDMA (docs/CLI.md): rdma must fail at once
# with one clear line, auto must fall back to tcp.  The verbs transport
# itself is tested on Soft-RoCE in tests/rxe (RDX_RXE=1).

load ../lib/common

# no_rdma_here: skips (saying why) on a host that has an RDMA device, where
# these expectations do not hold.
no_rdma_here() {
	if compgen -G '/sys/class/infiniband/*' >/dev/null; then
		skip "this host has an RDMA device: $(cd /sys/class/infiniband && echo *)"
	fi
}

@test "rdsend --transport rdma without an RDMA device: one-line error, exit 3, at once" {
	no_rdma_here
	mkrand "$D/src" 1000
	port=$(free_port)
	t0=$(date +%s%N)
	run_t --secs 10 "$RDSEND" --transport rdma --connect-timeout 5 127.0.0.1 "$port" "$KEY" "$D/src"
	ms=$((($(date +%s%N) - t0) / 1000000))
	assert_status 3
	[ -z "$output" ]
	assert_one_line_error "$stderr" rdsend
	assert_match "$stderr" '(RDMA|rdma)' "rdsend stderr"
	# Fails before trying to connect, not after --connect-timeout.
	[ "$ms" -lt 2000 ] || fail "rdsend took $ms ms to fail"
}

@test "rdrecv --transport rdma without an RDMA device: one-line error, exit 3, no file, not listening" {
	no_rdma_here
	port=$(free_port)
	t0=$(date +%s%N)
	run_t --secs 10 "$RDRECV" --transport rdma --wait 5 "$port" "$KEY" "$D/dst"
	ms=$((($(date +%s%N) - t0) / 1000000))
	assert_status 3
	[ -z "$output" ]
	assert_one_line_error "$stderr" rdrecv
	assert_match "$stderr" '(RDMA|rdma)' "rdrecv stderr"
	[ "$ms" -lt 2000 ] || fail "rdrecv took $ms ms to fail"
	assert_no_output_file "$D/dst"
	if is_listening "$port"; then
		fail "something listens on $port after rdrecv failed"
	fi
}

@test "--transport auto without an RDMA device transfers over tcp (-v says so)" {
	no_rdma_here
	mkrand "$D/src" $((1024 * 1024 + 1))
	port=$(free_port)
	start_recv -v --transport auto --timeout 10 "$port" "$KEY" "$D/dst"
	wait_listen "$port"
	run_t "$RDSEND" -v --transport auto --timeout 10 127.0.0.1 "$port" "$KEY" "$D/src"
	assert_status 0
	wait_recv
	assert_rc recv "$RECV_RC" 0
	assert_same "$D/src" "$D/dst"
	assert_match "$stderr" '\(tcp, 1 stream\)' "rdsend -v"
	assert_file_match "$D/recv.err" '\(tcp, 1 stream\)'
}

@test "default transport (auto) is tcp here too" {
	no_rdma_here
	mkrand "$D/src" 4097
	port=$(free_port)
	start_recv -v --timeout 10 "$port" "$KEY" "$D/dst"
	wait_listen "$port"
	run_t "$RDSEND" -v --timeout 10 127.0.0.1 "$port" "$KEY" "$D/src"
	assert_status 0
	wait_recv
	assert_rc recv "$RECV_RC" 0
	assert_same "$D/src" "$D/dst"
	assert_match "$stderr" '\(tcp, 1 stream\)' "rdsend -v"
}

@test "--rdma-dev without an RDMA device: exit 3, one line, on both tools" {
	no_rdma_here
	port=$(free_port)
	run_t --secs 10 "$RDSEND" --rdma-dev mlx5_0 127.0.0.1 "$port" "$KEY" /dev/null
	assert_status 3
	assert_one_line_error "$stderr" rdsend
	assert_match "$stderr" 'cannot use RDMA: no RDMA device' "rdsend stderr"
	run_t --secs 10 "$RDRECV" --gid-index 1 --wait 5 "$port" "$KEY" "$D/dst"
	assert_status 3
	assert_one_line_error "$stderr" rdrecv
	[ ! -e "$D/dst" ]
}

@test "--rdma-dev/--rdma-port/--gid-index: usage errors with --transport tcp, with --bind, out of range" {
	port=$(free_port)
	run_t --secs 10 "$RDSEND" --rdma-dev mlx5_0 --transport tcp 127.0.0.1 "$port" "$KEY" /dev/null
	assert_status 2
	assert_match "$stderr" 'not with --transport tcp' "rdsend stderr"
	run_t --secs 10 "$RDRECV" --rdma-port 1 --bind 127.0.0.1 "$port" "$KEY" "$D/dst"
	assert_status 2
	assert_match "$stderr" 'both choose the local address' "rdrecv stderr"
	run_t --secs 10 "$RDSEND" --rdma-port 0 127.0.0.1 "$port" "$KEY" /dev/null
	assert_status 2
	run_t --secs 10 "$RDSEND" --gid-index 65536 127.0.0.1 "$port" "$KEY" /dev/null
	assert_status 2
	run_t --secs 10 "$RDSEND" --rdma-dev ../x 127.0.0.1 "$port" "$KEY" /dev/null
	assert_status 2
	[ ! -e "$D/dst" ]
}
