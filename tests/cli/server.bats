#!/usr/bin/env bats
# Server modes, the far end of rdcp: rdsend --server / rdrecv --server
# listen, print "RDX-PORT N" on stdout and read the key from stdin; and
# the reversed direction, rdrecv --connect dialing a listening sender.

load ../lib/common

# server_start NAME TOOL ARGS...: TOOL --server ARGS in the background, its
# stdin from $D/NAME.in (the key line, then any data), stdout to
# $D/NAME.out; waits for the port line and sets SRV_PID and SRV_PORT.
server_start() {
	local name=$1 tool=$2
	shift 2
	BG_STDIN=$D/$name.in bg_start "$name" "$RDX_BUILD/$tool" --server "$@"
	SRV_PID=$BG_PID
	SRV_PORT=
	port_line() {
		SRV_PORT=$(sed -n 's/^RDX-PORT \([0-9][0-9]*\)$/\1/p' "$D/$name.out" | head -n 1)
		[ -n "$SRV_PORT" ] || ! alive "$SRV_PID"
	}
	wait_until 10 port_line || fail "$tool --server printed no port line: $(cat "$D/$name.err")"
	[ -n "$SRV_PORT" ] || fail "$tool --server exited without a port line: $(cat "$D/$name.err")"
}

@test "server: rdsend --server FILE, rdrecv --connect: 0, 1, 3 MiB + 1 bytes" {
	for n in 0 1 $((3 * 1024 * 1024 + 1)); do
		mkrand "$D/src" "$n"
		rm -f "$D/dst"
		echo "$KEY" >"$D/s.in"
		server_start s rdsend --timeout 10 "$D/src"
		RDX_KEY=$KEY run_t "$RDRECV" --timeout 10 --connect 127.0.0.1 "$SRV_PORT" "$D/dst"
		assert_status 0
		wait_exit "$SRV_PID" 20
		assert_rc s "$WAIT_RC" 0
		assert_same "$D/src" "$D/dst"
		assert_no_temp "$D/dst"
		# The file's mode for rdcp, then the port: nothing else.
		[ "$(cat "$D/s.out")" = "RDX-MODE $(stat -c %03a "$D/src")"$'\n'"RDX-PORT $SRV_PORT" ] ||
			fail "rdsend --server stdout: $(cat "$D/s.out")"
	done
}

@test "server: rdrecv --server FILE, rdsend dials: 0, 1, 3 MiB + 1 bytes" {
	for n in 0 1 $((3 * 1024 * 1024 + 1)); do
		mkrand "$D/src" "$n"
		rm -f "$D/dst"
		echo "$KEY" >"$D/r.in"
		server_start r rdrecv --timeout 10 --wait 20 "$D/dst"
		RDX_KEY=$KEY run_t "$RDSEND" --timeout 10 127.0.0.1 "$SRV_PORT" "$D/src"
		assert_status 0
		wait_exit "$SRV_PID" 20
		assert_rc r "$WAIT_RC" 0
		assert_same "$D/src" "$D/dst"
	done
}

@test "server: the listening sender takes the receiver's extra streams (--streams 4 --compress --encrypt)" {
	mktext "$D/src" $((5 * 1024 * 1024 + 7))
	echo "$KEY" >"$D/s.in"
	server_start s rdsend --timeout 10 --streams 4 --compress --encrypt --slot-size 256K -vv "$D/src"
	RDX_KEY=$KEY run_t "$RDRECV" --timeout 10 --json --connect 127.0.0.1 "$SRV_PORT" "$D/dst"
	assert_status 0
	wait_exit "$SRV_PID" 20
	assert_rc s "$WAIT_RC" 0
	assert_same "$D/src" "$D/dst"
	assert_match "$output" '"streams":4,"compress":true,"encrypt":true' "rdrecv --json"
	assert_file_match "$D/s.err" 'authenticated receiver .*; 4 streams, zstd, AES-256-GCM'
}

@test "server: rdsend --server without FILE sends what follows the key line on stdin" {
	mkrand "$D/src" $((1024 * 1024 + 3))
	{ echo "$KEY"; cat "$D/src"; } >"$D/s.in"
	server_start s rdsend --timeout 10
	RDX_KEY=$KEY run_t "$RDRECV" --timeout 10 --connect 127.0.0.1 "$SRV_PORT" "$D/dst"
	assert_status 0
	wait_exit "$SRV_PID" 20
	assert_rc s "$WAIT_RC" 0
	assert_same "$D/src" "$D/dst"
}

@test "server: rdrecv --server without FILE prints the port line, then the data" {
	mkrand "$D/src" $((1024 * 1024 + 3))
	printf '%s\r\n' "$KEY" >"$D/r.in" # a CR before the newline is not part of the key
	server_start r rdrecv --timeout 10 --wait 20
	RDX_KEY=$KEY run_t "$RDSEND" --timeout 10 127.0.0.1 "$SRV_PORT" "$D/src"
	assert_status 0
	wait_exit "$SRV_PID" 20
	assert_rc r "$WAIT_RC" 0
	tail -n +2 "$D/r.out" >"$D/dst"
	assert_same "$D/src" "$D/dst"
}

@test "server: a wrong key fails the dialing receiver (3); the listening sender logs it and serves the next" {
	mkrand "$D/src" 100000
	echo "$KEY" >"$D/s.in"
	server_start s rdsend --timeout 10 --connect-timeout 20 "$D/src"
	RDX_KEY=wrong-$KEY run_t "$RDRECV" --timeout 5 --connect 127.0.0.1 "$SRV_PORT" "$D/bad"
	assert_status 3
	assert_one_line_error "$stderr" rdrecv
	[ "$stderr" = "rdrecv: authentication failed (wrong key?)" ] || fail "stderr: $stderr"
	[ ! -e "$D/bad" ]
	alive "$SRV_PID" || fail "rdsend --server gave up after a wrong key: $(cat "$D/s.err")"
	RDX_KEY=$KEY run_t "$RDRECV" --timeout 10 --connect 127.0.0.1 "$SRV_PORT" "$D/dst"
	assert_status 0
	wait_exit "$SRV_PID" 20
	assert_rc s "$WAIT_RC" 0
	assert_same "$D/src" "$D/dst"
	assert_file_match "$D/s.err" '^rdsend: rejected connection from 127\.0\.0\.1:[0-9]+: authentication failed \(wrong key\?\)$'
}

@test "server: a failed exchange gives a guessing receiver nothing to test keys against offline" {
	# The listening sender speaks first (its share); badpeer answers as a
	# receiver with a wrong key.  Only an AUTH (the sender's confirmation)
	# would carry something of the key: rdsend sends it only to a
	# receiver that proved the key, so none of the list verifies.
	[ -x "$RDX_BUILD/tests/badpeer" ] || fail "badpeer not built"
	mkrand "$D/src" 100000
	guess_dict
	echo "$KEY" >"$D/s.in"
	server_start s rdsend --timeout 10 --connect-timeout 20 "$D/src"
	run_t "$RDX_BUILD/tests/badpeer" guess-receiver "wrong-$KEY" "$D/dict" 127.0.0.1 "$SRV_PORT"
	assert_status 0
	[ "$output" = "$(printf 'online: wrong\nanswer: ERROR\nverified: 0')" ] ||
		fail "badpeer: $output"
	# The check is real: with the right key the AUTH comes, and verifies.
	run_t "$RDX_BUILD/tests/badpeer" guess-receiver "$KEY" "$D/dict" 127.0.0.1 "$SRV_PORT"
	assert_status 0
	[ "$output" = "$(printf 'online: right\nanswer: AUTH\nverifies: %s\nverified: 1' "$KEY")" ] ||
		fail "badpeer: $output"
	RDX_KEY=$KEY run_t "$RDRECV" --timeout 10 --connect 127.0.0.1 "$SRV_PORT" "$D/dst"
	assert_status 0
	wait_exit "$SRV_PID" 20
	assert_rc s "$WAIT_RC" 0
	assert_same "$D/src" "$D/dst"
}

@test "server: a stray connection does not stop rdsend --server" {
	mkrand "$D/src" 100000
	echo "$KEY" >"$D/s.in"
	server_start s rdsend --timeout 10 --connect-timeout 20 "$D/src"
	# Says nothing, then hangs up.
	xrun bash -c "exec 3<>/dev/tcp/127.0.0.1/$SRV_PORT; sleep 0.2; exec 3>&-"
	RDX_KEY=$KEY run_t "$RDRECV" --timeout 10 --connect 127.0.0.1 "$SRV_PORT" "$D/dst"
	assert_status 0
	wait_exit "$SRV_PID" 20
	assert_rc s "$WAIT_RC" 0
	assert_same "$D/src" "$D/dst"
}

@test "server: 1000 silent connections do not hold rdsend --server: a real receiver completes within 5 s" {
	# The listening sender greets each connection with its HELLO (a
	# nonce each) and waits for the answers all at once (src/core/gate.c).
	local badpeer=$RDX_BUILD/tests/badpeer
	[ -x "$badpeer" ] || fail "badpeer not built: $badpeer"
	mkrand "$D/src" 100000
	echo "$KEY" >"$D/s.in"
	server_start s rdsend --timeout 10 --connect-timeout 30 "$D/src"
	BADPEER_BIND=127.0.0.2 bg_start flood "$badpeer" flood 1000 127.0.0.1 "$SRV_PORT"
	sleep 2
	t0=$(date +%s%N)
	RDX_KEY=$KEY run_t "$RDRECV" --timeout 10 --connect 127.0.0.1 "$SRV_PORT" "$D/dst"
	ms=$((($(date +%s%N) - t0) / 1000000))
	assert_status 0
	echo "# the real receiver took $ms ms" >&3
	[ "$ms" -le 5000 ] || fail "the real receiver took $ms ms under the flood"
	wait_exit "$SRV_PID" 20
	assert_rc s "$WAIT_RC" 0
	assert_same "$D/src" "$D/dst"
}

@test "server: a wrong key against rdrecv --server is rejected and it keeps waiting" {
	mkrand "$D/src" 100000
	echo "$KEY" >"$D/r.in"
	server_start r rdrecv --timeout 10 --wait 20 "$D/dst"
	RDX_KEY=wrong-$KEY run_t "$RDSEND" --timeout 5 127.0.0.1 "$SRV_PORT" "$D/src"
	assert_status 3
	[ ! -e "$D/dst" ]
	RDX_KEY=$KEY run_t "$RDSEND" --timeout 10 127.0.0.1 "$SRV_PORT" "$D/src"
	assert_status 0
	wait_exit "$SRV_PID" 20
	assert_rc r "$WAIT_RC" 0
	assert_same "$D/src" "$D/dst"
}

@test "server: rdsend --server gives up after --connect-timeout (3); rdrecv --connect to nobody (3)" {
	: >"$D/src"
	echo "$KEY" >"$D/s.in"
	server_start s rdsend --connect-timeout 1 "$D/src"
	wait_exit "$SRV_PID" 10
	assert_rc s "$WAIT_RC" 3
	[ "$(cat "$D/s.err")" = "rdsend: no authenticated receiver within 1 s (--connect-timeout)" ] ||
		fail "stderr: $(cat "$D/s.err")"
	p=$(free_port)
	RDX_KEY=$KEY run_t --secs 20 "$RDRECV" --wait 1 --connect 127.0.0.1 "$p" "$D/dst"
	assert_status 3
	assert_one_line_error "$stderr" rdrecv
	assert_match "$stderr" "cannot connect to 127\\.0\\.0\\.1 port $p"
	[ ! -e "$D/dst" ]
}

@test "server: --port picks the port" {
	p=$(free_port)
	echo "$KEY" >"$D/r.in"
	server_start r rdrecv --port "$p" --wait 10 "$D/dst"
	[ "$SRV_PORT" = "$p" ]
	echo hello >"$D/src"
	RDX_KEY=$KEY run_t "$RDSEND" 127.0.0.1 "$p" "$D/src"
	assert_status 0
	wait_exit "$SRV_PID" 20
	assert_rc r "$WAIT_RC" 0
	assert_same "$D/src" "$D/dst"
}

# server_usage TOOL ARGS...: exit 2 with one error line, nothing on stdout.
server_usage() {
	local tool=$1
	shift
	run_t --secs 10 "$RDX_BUILD/$tool" "$@" <"$D/key.in"
	assert_status 2
	[ -z "$output" ] || fail "$tool $*: wrote to stdout: $output"
	assert_one_line_error "$stderr" "$tool"
}

@test "server: usage errors (key elsewhere, extra arguments, --port alone, --server with --connect, no key)" {
	echo "$KEY" >"$D/key.in"
	echo "$KEY" >"$D/kf"
	for tool in rdsend rdrecv; do
		server_usage "$tool" --server --key-file "$D/kf" "$D/f"
		server_usage "$tool" --server "$KEY" "$D/f"
		server_usage "$tool" --server --port 70000 "$D/f"
	done
	server_usage rdrecv --port 1234 1234 "$KEY" "$D/f"
	server_usage rdsend --port 1234 127.0.0.1 1234 "$KEY" "$D/f"
	server_usage rdrecv --server --connect 127.0.0.1 "$D/f"
	server_usage rdrecv --connect 127.0.0.1 0 "$KEY" "$D/f"
	: >"$D/key.in"
	server_usage rdrecv --server "$D/f"
	printf '\n' >"$D/key.in"
	server_usage rdsend --server "$D/f"
	[ ! -e "$D/f" ]
}

@test "server: --stop-on-eof: the end of stdin after the key stops the server (130), nothing written" {
	mkfifo "$D/ctl"
	BG_STDIN=$D/ctl bg_start r "$RDRECV" --server --stop-on-eof --wait 20 "$D/dst"
	srv=$BG_PID
	# The controller: the key, then the pipe held open a while.
	bg_start ctl bash -c 'exec 7>"$1"; echo "$2" >&7; sleep 1; exec 7>&-; sleep 30' _ "$D/ctl" "$KEY"
	wait_until 10 grep -q '^RDX-PORT [0-9]' "$D/r.out" || fail "no port line: $(cat "$D/r.err")"
	alive "$srv" || fail "rdrecv --server stopped before stdin ended: $(cat "$D/r.err")"
	wait_exit "$srv" 10
	assert_rc r "$WAIT_RC" 130
	[ "$(cat "$D/r.err")" = "rdrecv: interrupted" ] || fail "stderr: $(cat "$D/r.err")"
	assert_no_output_file "$D/dst"
	# Held open, it serves a transfer as usual.
	mkrand "$D/src" 100000
	rm -f "$D/ctl"
	mkfifo "$D/ctl"
	BG_STDIN=$D/ctl bg_start s "$RDSEND" --server --stop-on-eof "$D/src"
	srv=$BG_PID
	bg_start ctl2 bash -c 'exec 7>"$1"; echo "$2" >&7; sleep 30' _ "$D/ctl" "$KEY"
	wait_until 10 grep -q '^RDX-PORT [0-9]' "$D/s.out" || fail "no port line: $(cat "$D/s.err")"
	RDX_KEY=$KEY run_t "$RDRECV" --connect 127.0.0.1 "$(sed -n 's/^RDX-PORT //p' "$D/s.out")" "$D/dst"
	assert_status 0
	wait_exit "$srv" 10
	assert_rc s "$WAIT_RC" 0
	assert_same "$D/src" "$D/dst"
}

@test "server: --stop-on-eof goes with --server or --key-file -, and with rdsend needs FILE" {
	echo "$KEY" >"$D/key.in"
	server_usage rdrecv --stop-on-eof 1234 "$KEY" "$D/f"
	server_usage rdsend --stop-on-eof 127.0.0.1 1234 "$KEY" "$D/f"
	server_usage rdsend --server --stop-on-eof
	server_usage rdsend --key-file - --stop-on-eof 127.0.0.1 1234
	server_usage rdrecv --key-file - --connect 127.0.0.1 1234 "$KEY" "$D/f"
	[ ! -e "$D/f" ]
}

@test "server: rdrecv --connect --key-file - reads the key from stdin; --stop-on-eof stops it (130)" {
	mkrand "$D/src" 300000
	echo "$KEY" >"$D/s.in"
	server_start s rdsend --timeout 10 "$D/src"
	run_t "$RDRECV" --timeout 10 --connect 127.0.0.1 --key-file - --stop-on-eof "$SRV_PORT" "$D/dst" \
		< <(echo "$KEY"; sleep 20)
	assert_status 0
	wait_exit "$SRV_PID" 20
	assert_rc s "$WAIT_RC" 0
	assert_same "$D/src" "$D/dst"
	# The end of stdin after the key: stopped while still dialing.
	run_t "$RDRECV" --connect 127.0.0.1 --key-file - --stop-on-eof --wait 30 "$(free_port)" "$D/dst2" \
		< <(echo "$KEY"; sleep 1)
	assert_status 130
	assert_no_output_file "$D/dst2"
}
