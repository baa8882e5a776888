#!/usr/bin/env bats
# Soft-RoCE, two guests (scripts/rxe-vm.sh run --two): guest a receives,
# guest b sends to it across the emulated link with netem dropping 1 % of
# b's packets, so RC has to retransmit.  Both guests run this file; each
# test does its own side, selected by $RXE_ROLE, on a port fixed per test
# (the sender retries with --connect-timeout until the receiver listens).
# Both sides make the same deterministic data (mkdet), so a compares what
# it received with what b sent without any channel but the transfer.
#
# Results come from both guests: a reports whether the data arrived
# intact, b whether rdsend succeeded.

load ../lib/common
load rxe

T=60

setup_file() { rxe_two_lossy; }

# two_xfer BYTES SEED [SEND_OPTS...]: b sends BYTES of mkdet data FILE->FILE
# to a on port 7000 + test number; a checks exit 0, the transport and the
# bytes; b checks exit 0.
two_xfer() {
	local n=$1 seed=$2 port=$((7000 + BATS_TEST_NUMBER))
	shift 2
	mkdet "$D/src" "$n" "$seed"
	if [ "$RXE_ROLE" = a ]; then
		start_recv -v --transport "$XPORT" --timeout $T --wait $T "$port" "$KEY" "$D/dst"
		wait_recv $((3 * T))
		show_rate "$D/recv.err"
		assert_rc recv "$RECV_RC" 0
		assert_xport "$D/recv.err"
		[ "$(fsize "$D/dst")" -eq "$n" ] || fail "received $(fsize "$D/dst") bytes, want $n"
		assert_same "$D/src" "$D/dst"
		assert_no_temp "$D/dst"
	else
		run_t --secs $((3 * T)) "$RDSEND" -v --transport "$XPORT" --timeout $T \
			--connect-timeout $T "$@" "$RXE_PEER" "$port" "$KEY" "$D/src"
		echo "$stderr" >"$D/send.err"
		show_rate "$D/send.err"
		assert_status 0
		assert_xport "$D/send.err"
	fi
}

@test "netem loss 1%: FILE->FILE 3 MiB + 3" {
	KEY=rdx-two-1
	two_xfer $((3 * 1024 * 1024 + 3)) one
}

@test "netem loss 1%: $PAR_OPT 2 --encrypt, 2 MiB" {
	KEY=rdx-two-2
	two_xfer $((2 * 1024 * 1024)) two "$PAR_OPT" 2 --encrypt
}
