#!/usr/bin/env bats
# Soft-RoCE, two guests (scripts/rxe-vm.sh run --two): S3 over RDMA across
# the emulated link with netem dropping 1 % of b's packets, so RC has to
# retransmit.  Guest a runs rds3 serve --rdma; guest b puts and gets.  Both
# make the same deterministic data (mkdet): a checks what it stored, b what
# it got back; the bytes must have moved by RDMA on both ends.

load ../lib/common
load rxe

T=60
RDS3=$RDX_BUILD/rds3
BK=rxe-two

setup_file() { rxe_two_lossy; }

setup() {
	rxe_setup
	rxe_s3_env
}

# two_s3 BYTES SEED: b puts BYTES of mkdet data to a's server (port 7300 +
# test number) and gets it back, by RDMA, then puts a "done" object; a
# serves until "done" is there and checks the stored object.
two_s3() {
	local n=$1 seed=$2 port=$((7300 + BATS_TEST_NUMBER)) i
	mkdet "$D/src" "$n" "$seed"
	if [ "$RXE_ROLE" = a ]; then
		bg_start srv "$RDS3" -v --rdma serve --listen "$RXE_ADDR" --port "$port" "$D/store"
		mkdir -p "$D/store/$BK"
		wait_until $((12 * T)) [ -e "$D/store/$BK/done" ] || fail "b never finished: $(tail -n 20 "$D/srv.err")"
		assert_same "$D/src" "$D/store/$BK/obj"
		[ "$(grep -o ' rdma [0-9]*$' "$D/srv.err" | awk '{ s += $2 } END { print s + 0 }')" -eq $((2 * n)) ] ||
			fail "the server did not move the bytes by RDMA: $(tail -n 20 "$D/srv.err")"
	else
		export AWS_ENDPOINT_URL_S3=http://$RXE_PEER:$port
		for i in $(seq 1 $((2 * T))); do
			"$RDS3" --retries 0 ls "s3://$BK" >/dev/null 2>&1 && break
			sleep 1
		done
		# --rdma (on): under loss the connection and its login may take
		# seconds; --connect-timeout bounds both.
		o=(-v --rdma --connect-timeout $T --timeout $T)
		run_t --secs $((5 * T)) "$RDS3" "${o[@]}" put "$D/src" "s3://$BK/obj"
		put_status=$status put_err=$stderr
		run_t --secs $((5 * T)) "$RDS3" "${o[@]}" get "s3://$BK/obj" "$D/back"
		# a waits for this, whatever came before.
		: >"$D/empty"
		"$RDS3" put "$D/empty" "s3://$BK/done" >/dev/null 2>&1 || true
		[ "$put_status" -eq 0 ] || fail "put: exit $put_status: $put_err"
		assert_match "$put_err" ": $n bytes by RDMA, 0 by HTTP"
		assert_status 0
		assert_match "$stderr" ": $n bytes by RDMA, 0 by HTTP"
		assert_same "$D/src" "$D/back"
	fi
}

@test "netem loss 1%: 1 MiB + 3 put and get by RDMA (two moves each way), byte-identical" {
	# Under loss every RDMA READ and WRITE waits out RC's retransmissions
	# (about 15 s a MiB each way on emulated rxe): one object, one part.
	two_s3 $((1024 * 1024 + 3)) s3-one
}
