#!/usr/bin/env bats
# Soft-RoCE, one guest: rdsend and rdrecv both on rxe0 at $RXE_ADDR, with
# --transport rdma (RDX_RXE_TRANSPORT).  Run by tests/run.sh (RDX_RXE=1)
# through scripts/rxe-vm.sh; by hand: docs/RXE-VM.md "The test tier".
# Each transfer must end with both exits 0 and identical bytes; each fault
# with a one-line error, the documented exit code, nothing under the final
# name, and no hang (every wait is bounded).

load ../lib/common
load rxe

# Bounds under TCG emulation, where everything is slow.
T=20

# rx_file SRC DST [SEND_OPTS...] [-- RECV_OPTS...]: FILE->FILE over
# $RXE_ADDR; both ends must exit 0, say they used $XPORT, and DST == SRC.
rx_file() {
	local src=$1 dst=$2 a sopts=() ropts=() seen=
	shift 2
	for a in "$@"; do
		if [ "$a" = -- ] && [ -z "$seen" ]; then
			seen=1
		elif [ -n "$seen" ]; then
			ropts+=("$a")
		else
			sopts+=("$a")
		fi
	done
	port=$(free_port)
	start_recv -v --transport "$XPORT" --timeout $T "${ropts[@]}" "$port" "$KEY" "$dst"
	wait_listen "$port" $T
	run_t "$RDSEND" -v --transport "$XPORT" --timeout $T "${sopts[@]}" "$RXE_ADDR" "$port" "$KEY" "$src"
	assert_status 0
	wait_recv $T
	assert_rc recv "$RECV_RC" 0
	assert_same "$src" "$dst"
	assert_no_temp "$dst"
	assert_xport "$D/recv.err"
	echo "$stderr" >"$D/send.err"
	assert_xport "$D/send.err"
	show_rate "$D/send.err" "$D/recv.err"
}

rx_size() {
	mkrand "$D/src" "$1"
	rx_file "$D/src" "$D/dst"
	[ "$(fsize "$D/dst")" -eq "$1" ]
}

@test "file->file 0 bytes" {
	rx_size 0
}

@test "file->file 1 byte" {
	rx_size 1
}

@test "file->file 4097 bytes" {
	rx_size 4097
}

@test "file->file 3 MiB + 5" {
	rx_size $((3 * 1024 * 1024 + 5))
}

@test "stdin->stdout 3 MiB + 17" {
	mkrand "$D/src" $((3 * 1024 * 1024 + 17))
	port=$(free_port)
	RECV_OUT=$D/dst start_recv --transport "$XPORT" --timeout $T "$port" "$KEY"
	wait_listen "$port" $T
	run_t "$RDSEND" --transport "$XPORT" --timeout $T "$RXE_ADDR" "$port" "$KEY" <"$D/src"
	assert_status 0
	[ -z "$output" ]
	wait_recv $T
	assert_rc recv "$RECV_RC" 0
	assert_same "$D/src" "$D/dst"
}

@test "stdin->stdout 0 bytes" {
	port=$(free_port)
	RECV_OUT=$D/dst start_recv --transport "$XPORT" --timeout $T "$port" "$KEY"
	wait_listen "$port" $T
	run_t "$RDSEND" --transport "$XPORT" --timeout $T "$RXE_ADDR" "$port" "$KEY" </dev/null
	assert_status 0
	wait_recv $T
	assert_rc recv "$RECV_RC" 0
	[ -f "$D/dst" ] && [ ! -s "$D/dst" ]
}

@test "parallel: $PAR_OPT 2, 3 MiB" {
	mkrand "$D/src" $((3 * 1024 * 1024 + 4097))
	rx_file "$D/src" "$D/dst" "$PAR_OPT" 2
	# Both connections were used, not one.
	assert_file_match "$D/recv.err" '2 (stream|qp|connection)s'
}

@test "--encrypt, 1 MiB + 1" {
	mkrand "$D/src" $((1024 * 1024 + 1))
	rx_file "$D/src" "$D/dst" --encrypt
}

@test "--compress, 2 MiB of text" {
	mktext "$D/src" $((2 * 1024 * 1024))
	rx_file "$D/src" "$D/dst" --compress
}

@test "a tree (-r), then --sync --encrypt --delete: the listing crosses $XPORT too" {
	source "$BATS_TEST_DIRNAME/../lib/tree.bash"
	mktree "$D/t" 150
	mkdir "$D/out"
	port=$(free_port)
	start_recv -v -r --transport "$XPORT" --timeout $T "$port" "$KEY" "$D/out"
	wait_listen "$port" $T
	run_t "$RDSEND" -v -r --transport "$XPORT" --timeout $T "$RXE_ADDR" "$port" "$KEY" "$D/t"
	assert_status 0
	wait_recv $T
	assert_rc recv "$RECV_RC" 0
	assert_same_tree "$D/t" "$D/out/t"
	assert_xport "$D/recv.err"
	echo stale >"$D/out/t/stale"
	port=$(free_port)
	# The receiver's own --delete lets the sender list and remove.
	start_recv -v -r --delete --transport "$XPORT" --timeout $T "$port" "$KEY" "$D/out"
	wait_listen "$port" $T
	run_t "$RDSEND" -v -r --sync --encrypt --delete --transport "$XPORT" --timeout $T \
		"$RXE_ADDR" "$port" "$KEY" "$D/t"
	assert_status 0
	assert_match "$stderr" "--sync: $(find "$D/t" -type f | wc -l) unchanged files not sent"
	wait_recv $T
	assert_rc recv "$RECV_RC" 0
	[ ! -e "$D/out/t/stale" ] || fail "--delete left the extraneous file"
	assert_same_tree "$D/t" "$D/out/t"
	echo "$stderr" >"$D/send.err"
	assert_xport "$D/send.err"
}

@test "--resume --encrypt: the partial's offer and the sender's answer cross $XPORT, the rest follows" {
	mkrand "$D/src" $((5 * 1024 * 1024 + 7))
	# A partial as a failed --resume copy leaves it: 2 MiB kept.
	head -c $((2 * 1024 * 1024)) "$D/src" >"$D/.dst.rdx-part"
	echo "have $((2 * 1024 * 1024))" >"$D/.dst.rdx-part.meta"
	port=$(free_port)
	start_recv -v --transport "$XPORT" --timeout $T "$port" "$KEY" "$D/dst"
	wait_listen "$port" $T
	run_t "$RDSEND" -v --resume --encrypt --transport "$XPORT" --timeout $T \
		"$RXE_ADDR" "$port" "$KEY" "$D/src"
	assert_status 0
	assert_match "$stderr" "resuming: the receiver has the first $((2 * 1024 * 1024)) bytes"
	assert_match "$stderr" " sent $((3 * 1024 * 1024 + 7)) bytes"
	wait_recv $T
	assert_rc recv "$RECV_RC" 0
	assert_same "$D/src" "$D/dst"
	assert_no_temp "$D/dst"
	echo "$stderr" >"$D/send.err"
	assert_xport "$D/send.err"
}

@test "wrong key: rdsend exits 3, rdrecv logs it, keeps waiting, then a right sender succeeds" {
	mkrand "$D/src" $((1024 * 1024 + 1))
	port=$(free_port)
	start_recv --transport "$XPORT" --timeout $T --wait 60 "$port" "$KEY" "$D/dst"
	wait_listen "$port" $T
	run_t "$RDSEND" --transport "$XPORT" --timeout $T "$RXE_ADDR" "$port" wrong-key "$D/src"
	assert_status 3
	[ "$stderr" = "rdsend: authentication failed (wrong key?)" ] || fail "rdsend stderr: $stderr"
	wait_until 10 grep -qE '^rdrecv: rejected connection from .+: .*authentication failed' "$D/recv.err" ||
		fail "rdrecv did not log the rejection: $(cat "$D/recv.err")"
	alive "$RECV_PID" || fail "rdrecv exited after a wrong key: $(cat "$D/recv.err")"
	assert_no_output_file "$D/dst"
	run_t "$RDSEND" --transport "$XPORT" --timeout $T --connect-timeout $T "$RXE_ADDR" "$port" "$KEY" "$D/src"
	assert_status 0
	wait_recv $T
	assert_rc recv "$RECV_RC" 0
	assert_same "$D/src" "$D/dst"
	assert_no_temp "$D/dst"
}

# kill_mid_stream VICTIM: a transfer from a slow, endless pipe with
# --timeout 5 on both ends; once the receiver's temporary holds data,
# VICTIM (recv or send) gets SIGKILL.  The other end must exit 3 with a
# one-line lost-peer error within --timeout + 3 s.
kill_mid_stream() {
	local victim=$1 other victim_pid rc t0
	port=$(free_port)
	start_recv --transport "$XPORT" --timeout 5 "$port" "$KEY" "$D/dst"
	wait_listen "$port" $T
	rxe_slow_source
	start_send --transport "$XPORT" --timeout 5 "$RXE_ADDR" "$port" "$KEY"
	wait_temp "$D/dst" 30
	if [ "$victim" = recv ]; then
		victim_pid=$RECV_PID other=send
	else
		victim_pid=$SEND_PID other=recv
	fi
	kill -KILL "$victim_pid"
	t0=$(date +%s%N)
	if [ "$other" = send ]; then
		wait_send 20
		rc=$SEND_RC
	else
		wait_recv 20
		rc=$RECV_RC
	fi
	ms=$((($(date +%s%N) - t0) / 1000000))
	echo "# rd$other: exit $rc after $ms ms: $(cat "$D/$other.err")" >&3
	[ "$rc" -ne 124 ] || fail "rd$other still running 20 s after SIGKILL to rd$victim"
	[ "$ms" -le 8000 ] || fail "rd$other needed $ms ms (--timeout 5)"
	assert_rc "$other" "$rc" 3
	assert_err_file "$D/$other.err" "rd$other" "$LOST"
}

@test "sender killed (SIGKILL) mid-stream: rdrecv exits 3 within --timeout, no file, no temporary" {
	kill_mid_stream send
	assert_no_output_file "$D/dst"
}

@test "receiver killed (SIGKILL) mid-stream: rdsend exits 3 within --timeout" {
	kill_mid_stream recv
	# A killed rdrecv cannot remove its temporary, but it never renames.
	[ ! -e "$D/dst" ]
}
