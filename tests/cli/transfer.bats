#!/usr/bin/env bats
# Transfers between rdsend and rdrecv over loopback (docs/CLI.md).

load ../lib/common

size_roundtrip() {
	mkrand "$D/src" "$1"
	xfer_file "$D/src" "$D/dst"
	[ "$(fsize "$D/dst")" -eq "$1" ]
}

@test "file->file 0 bytes" {
	size_roundtrip 0
}

@test "file->file 1 byte" {
	size_roundtrip 1
}

@test "file->file 4095 bytes" {
	size_roundtrip 4095
}

@test "file->file 4096 bytes" {
	size_roundtrip 4096
}

@test "file->file 4097 bytes" {
	size_roundtrip 4097
}

@test "file->file 1 MiB + 1" {
	size_roundtrip $((1024 * 1024 + 1))
}

@test "a sparse file arrives sparse: all-zero blocks are holes, the bytes the same (file and pipe)" {
	truncate -s 64M "$D/src"
	printf 'start' | dd of="$D/src" conv=notrunc status=none
	printf 'middle' | dd of="$D/src" bs=1 seek=$((32 * 1024 * 1024 + 5)) conv=notrunc status=none
	printf 'end' | dd of="$D/src" bs=1 seek=$((64 * 1024 * 1024 - 3)) conv=notrunc status=none
	xfer_file "$D/src" "$D/dst"
	assert_same "$D/src" "$D/dst"
	# Three blocks of data, give or take the file system's own.
	[ "$(du -k "$D/dst" | cut -f1)" -le 1024 ] || fail "$(du -k "$D/dst" | cut -f1) KiB allocated for 3 blocks of data"
	# From a pipe the size is unknown: nothing preallocated, holes all the same.
	port=$(free_port)
	start_recv "$port" "$KEY" "$D/dst2"
	wait_listen "$port"
	run_t bash -c 'cat "$1" | "$2" 127.0.0.1 "$3" "$4"' _ "$D/src" "$RDSEND" "$port" "$KEY"
	assert_status 0
	wait_recv
	assert_rc recv "$RECV_RC" 0
	assert_same "$D/src" "$D/dst2"
	[ "$(du -k "$D/dst2" | cut -f1)" -le 1024 ] || fail "from a pipe: $(du -k "$D/dst2" | cut -f1) KiB allocated"
	# Random data keeps every block.
	mkrand "$D/rnd" 4M
	xfer_file "$D/rnd" "$D/rnd.out"
	assert_same "$D/rnd" "$D/rnd.out"
	[ "$(du -k "$D/rnd.out" | cut -f1)" -ge 4096 ] || fail "random data lost blocks: $(du -k "$D/rnd.out")"
}

# RDX_BIG_SIZE (head -c syntax) shrinks it, e.g. for the sanitizer pass.
@test "file->file one big random file (1 GiB unless RDX_BIG_SIZE)" {
	RDX_CMD_TIMEOUT=180
	big=${RDX_BIG_SIZE:-1G}
	mkrand "$D/src" "$big"
	want=$(fsize "$D/src")
	[ -z "${RDX_BIG_SIZE:-}" ] || echo "# big file: $want bytes (RDX_BIG_SIZE)" >&3
	port=$(free_port)
	start_recv --timeout 20 "$port" "$KEY" "$D/dst"
	wait_listen "$port"
	run_t "$RDSEND" --timeout 20 127.0.0.1 "$port" "$KEY" "$D/src"
	assert_status 0
	wait_recv 60
	assert_rc recv "$RECV_RC" 0
	[ "$(fsize "$D/dst")" -eq "$want" ]
	assert_same "$D/src" "$D/dst"
	assert_no_temp "$D/dst"
}

@test "stdin->stdout" {
	mkrand "$D/src" $((3 * 1024 * 1024 + 17))
	port=$(free_port)
	RECV_OUT=$D/dst start_recv --timeout 10 "$port" "$KEY"
	wait_listen "$port"
	run_t "$RDSEND" --timeout 10 127.0.0.1 "$port" "$KEY" <"$D/src"
	assert_status 0
	[ -z "$output" ]
	wait_recv
	assert_rc recv "$RECV_RC" 0
	assert_same "$D/src" "$D/dst"
}

@test "stdin->stdout with FILE given as -" {
	mkrand "$D/src" 100000
	port=$(free_port)
	RECV_OUT=$D/dst start_recv --timeout 10 "$port" "$KEY" -
	wait_listen "$port"
	run_t "$RDSEND" --timeout 10 127.0.0.1 "$port" "$KEY" - <"$D/src"
	assert_status 0
	wait_recv
	assert_rc recv "$RECV_RC" 0
	assert_same "$D/src" "$D/dst"
	[ ! -e ./- ]
}

@test "stdin->FILE" {
	mkrand "$D/src" $((2 * 1024 * 1024 + 5))
	port=$(free_port)
	start_recv --timeout 10 "$port" "$KEY" "$D/dst"
	wait_listen "$port"
	run_t "$RDSEND" --timeout 10 127.0.0.1 "$port" "$KEY" <"$D/src"
	assert_status 0
	wait_recv
	assert_rc recv "$RECV_RC" 0
	assert_same "$D/src" "$D/dst"
	assert_no_temp "$D/dst"
	# stdout carries data only; nothing when writing to a FILE
	[ ! -s "$D/recv.out" ]
}

@test "FILE->stdout" {
	mkrand "$D/src" $((1024 * 1024 + 1))
	port=$(free_port)
	RECV_OUT=$D/dst start_recv --timeout 10 "$port" "$KEY"
	wait_listen "$port"
	run_t "$RDSEND" --timeout 10 127.0.0.1 "$port" "$KEY" "$D/src"
	assert_status 0
	wait_recv
	assert_rc recv "$RECV_RC" 0
	assert_same "$D/src" "$D/dst"
}

@test "an existing FILE is replaced" {
	mkrand "$D/src" 70000
	echo old >"$D/dst"
	xfer_file "$D/src" "$D/dst"
}

@test "a relative FILE in the current directory; mode follows the umask" {
	mkrand "$D/src" $((1024 * 1024 + 1))
	cd "$D"
	umask 022
	port=$(free_port)
	start_recv --timeout 10 "$port" "$KEY" out.bin
	wait_listen "$port"
	run_t "$RDSEND" --timeout 10 127.0.0.1 "$port" "$KEY" src
	assert_status 0
	wait_recv
	assert_rc recv "$RECV_RC" 0
	assert_same "$D/src" "$D/out.bin"
	assert_no_temp "$D/out.bin"
	[ "$(stat -c %a "$D/out.bin")" = 644 ] || fail "mode $(stat -c %a "$D/out.bin"), umask 022"
}

@test "destination on tmpfs (no O_DIRECT there)" {
	mount_tmpfs "$D/mnt" 64m
	mkrand "$D/src" $((5 * 1024 * 1024 + 3))
	xfer_file "$D/src" "$D/mnt/dst"
}

@test "source on tmpfs" {
	mount_tmpfs "$D/mnt" 64m
	mkrand "$D/mnt/src" $((5 * 1024 * 1024 + 3))
	xfer_file "$D/mnt/src" "$D/dst"
}

@test "--streams 4" {
	mkrand "$D/src" $((16 * 1024 * 1024 + 4097))
	xfer_file "$D/src" "$D/dst" --streams 4
}

@test "--streams 4 with a file smaller than one slot" {
	mkrand "$D/src" 5000
	xfer_file "$D/src" "$D/dst" --streams 4
}

@test "rdrecv --streams 2 caps rdsend --streams 4" {
	n=$((3 * 1024 * 1024 + 1))
	mkrand "$D/src" "$n"
	xfer_file "$D/src" "$D/dst" --streams 4 --json -- --streams 2 --json
	assert_match "$output" '"streams" *: *2[,}]' "rdsend --json"
	assert_file_match "$D/recv.out" '"streams" *: *2[,}]'
}

@test "--compress on compressible data" {
	mktext "$D/src" $((8 * 1024 * 1024 + 11))
	xfer_file "$D/src" "$D/dst" --compress
}

@test "--compress on random data" {
	mkrand "$D/src" $((4 * 1024 * 1024 + 11))
	xfer_file "$D/src" "$D/dst" --compress
}

@test "--compress=19" {
	mktext "$D/src" $((1024 * 1024 + 1))
	xfer_file "$D/src" "$D/dst" --compress=19
}

@test "--encrypt on the sender" {
	mkrand "$D/src" $((8 * 1024 * 1024 + 11))
	xfer_file "$D/src" "$D/dst" --encrypt
}

@test "--encrypt on the receiver only (either side asks)" {
	mkrand "$D/src" $((2 * 1024 * 1024 + 11))
	xfer_file "$D/src" "$D/dst" -- --encrypt
}

@test "--encrypt on both sides" {
	mkrand "$D/src" $((2 * 1024 * 1024 + 11))
	xfer_file "$D/src" "$D/dst" --encrypt -- --encrypt
}

@test "--compress --encrypt --streams 3" {
	{
		mktext "$D/a" $((6 * 1024 * 1024))
		mkrand "$D/b" $((6 * 1024 * 1024 + 99))
		cat "$D/a" "$D/b"
	} >"$D/src"
	xfer_file "$D/src" "$D/dst" --compress --encrypt --streams 3
}

@test "--slot-size 64K --slots 4 with a multi-MiB file" {
	mkrand "$D/src" $((6 * 1024 * 1024 + 12345))
	xfer_file "$D/src" "$D/dst" --slot-size 64K --slots 4 -- --slot-size 64K --slots 4
}

@test "--slot-size 64K --slots 4 on the sender only" {
	mkrand "$D/src" $((3 * 1024 * 1024 + 1))
	xfer_file "$D/src" "$D/dst" --slot-size 64K --slots 4
}

@test "--io-threads 1 and --fsync" {
	mkrand "$D/src" $((3 * 1024 * 1024 + 1))
	xfer_file "$D/src" "$D/dst" --io-threads 1 -- --io-threads 1 --fsync
}

@test "IPv6 ::1" {
	ip -6 addr show dev lo | grep -q '::1' || fail "no ::1 on lo"
	mkrand "$D/src" $((1024 * 1024 + 1))
	port=$(free_port)
	start_recv --timeout 10 "$port" "$KEY" "$D/dst"
	wait_listen "$port"
	run_t "$RDSEND" --timeout 10 ::1 "$port" "$KEY" "$D/src"
	assert_status 0
	wait_recv
	assert_rc recv "$RECV_RC" 0
	assert_same "$D/src" "$D/dst"
}

@test "IPv6 [::1] with -6 on both sides" {
	mkrand "$D/src" 12345
	port=$(free_port)
	start_recv -6 --timeout 10 "$port" "$KEY" "$D/dst"
	wait_listen "$port"
	run_t "$RDSEND" -6 --timeout 10 '[::1]' "$port" "$KEY" "$D/src"
	assert_status 0
	wait_recv
	assert_rc recv "$RECV_RC" 0
	assert_same "$D/src" "$D/dst"
}

@test "--bind 127.0.0.1 on the receiver, -4 on the sender" {
	mkrand "$D/src" 12345
	port=$(free_port)
	start_recv --bind 127.0.0.1 --timeout 10 "$port" "$KEY" "$D/dst"
	wait_listen "$port"
	run_t "$RDSEND" -4 --timeout 10 localhost "$port" "$KEY" "$D/src"
	assert_status 0
	wait_recv
	assert_rc recv "$RECV_RC" 0
	assert_same "$D/src" "$D/dst"
}

@test "rdrecv PORT 0 prints the chosen port" {
	mkrand "$D/src" 5000
	start_recv --timeout 10 0 "$KEY" "$D/dst"
	wait_until 5 grep -qE '^rdrecv: listening on port [0-9]+$' "$D/recv.err" ||
		fail "no 'listening on port' line: $(cat "$D/recv.err")"
	port=$(sed -nE 's/^rdrecv: listening on port ([0-9]+)$/\1/p' "$D/recv.err")
	[ "$port" -gt 0 ] && [ "$port" -le 65535 ]
	run_t "$RDSEND" --timeout 10 127.0.0.1 "$port" "$KEY" "$D/src"
	assert_status 0
	wait_recv
	assert_rc recv "$RECV_RC" 0
	assert_same "$D/src" "$D/dst"
}

@test "rdrecv serves exactly one transfer, then exits" {
	mkrand "$D/src" 5000
	xfer_file "$D/src" "$D/dst"
	! alive "$RECV_PID"
	! is_listening "$port" || fail "still listening on $port"
}

# ------------------------------------------------------------- --json / -v

json_num() { # json_num JSON KEY
	sed -nE "s/.*\"$2\" *: *([0-9.eE+-]+).*/\1/p" <<<"$1"
}

assert_json_stats() { # assert_json_stats JSON TOOL BYTES
	local j=$1
	assert_match "$j" '^\{.*\}$' "--json output"
	[ "$(grep -c '' <<<"$j")" -eq 1 ] || fail "--json: not one line: $j"
	assert_match "$j" "\"tool\" *: *\"$2\"" "--json tool"
	[ "$(json_num "$j" bytes)" = "$3" ] || fail "--json bytes != $3: $j"
	assert_match "$j" '"seconds" *: *[0-9]' "--json seconds"
	assert_match "$j" '"rate_bytes_per_sec" *: *[0-9]' "--json rate"
	assert_match "$j" '"transport" *: *"tcp"' "--json transport"
	assert_match "$j" '"streams" *: *[0-9]+' "--json streams"
	assert_match "$j" '"compress" *: *(true|false)' "--json compress"
	assert_match "$j" '"encrypt" *: *(true|false)' "--json encrypt"
	[ "$(jq -r .bytes <<<"$j")" = "$3" ] || fail "jq: bytes != $3"
}

@test "rdrecv --json to a FILE: stats on stdout, bytes equals size" {
	n=$((2 * 1024 * 1024 + 7))
	mkrand "$D/src" "$n"
	xfer_file "$D/src" "$D/dst" -- --json
	assert_json_stats "$(cat "$D/recv.out")" rdrecv "$n"
}

@test "rdrecv --json to stdout: stats on stderr, data intact" {
	n=$((1024 * 1024 + 1))
	mkrand "$D/src" "$n"
	port=$(free_port)
	RECV_OUT=$D/dst start_recv --json --timeout 10 "$port" "$KEY"
	wait_listen "$port"
	run_t "$RDSEND" --timeout 10 127.0.0.1 "$port" "$KEY" <"$D/src"
	assert_status 0
	wait_recv
	assert_rc recv "$RECV_RC" 0
	assert_same "$D/src" "$D/dst"
	assert_json_stats "$(grep '^{' "$D/recv.err")" rdrecv "$n"
}

@test "rdsend --json: stats on stdout with streams/compress/encrypt" {
	n=$((3 * 1024 * 1024 + 3))
	mktext "$D/src" "$n"
	xfer_file "$D/src" "$D/dst" --json --streams 2 --compress --encrypt
	assert_json_stats "$output" rdsend "$n"
	assert_match "$output" '"streams" *: *2[,}]' "--json streams"
	assert_match "$output" '"compress" *: *true' "--json compress"
	assert_match "$output" '"encrypt" *: *true' "--json encrypt"
}

@test "-v prints a Bandwidth line on both sides" {
	mkrand "$D/src" $((4 * 1024 * 1024))
	xfer_file "$D/src" "$D/dst" -v -- -v
	# docs/CLI.md: "<tool>: <bytes> bytes in <secs> s, Bandwidth <X> GB/s
	# (tcp, N streams)"; a verb before the count ("sent", "received") is
	# tolerated here.
	n=$((4 * 1024 * 1024))
	re=" ([a-z]+ )?$n bytes in [0-9.]+ s, Bandwidth [0-9.]+ GB/s \\(tcp, 1 streams?\\)$"
	assert_match "$stderr" "^rdsend:$re" "rdsend -v stderr"
	assert_file_match "$D/recv.err" "^rdrecv:$re"
	[ -z "$output" ]
}

@test "-v with --streams 4 reports 4 streams" {
	mkrand "$D/src" $((4 * 1024 * 1024 + 1))
	xfer_file "$D/src" "$D/dst" -v --streams 4
	assert_match "$stderr" '^rdsend: .*Bandwidth [0-9.]+ GB/s \(tcp, 4 streams\)$' "rdsend -v stderr"
}

@test "--progress prints nothing when stderr is not a terminal" {
	mkrand "$D/src" $((2 * 1024 * 1024))
	xfer_file "$D/src" "$D/dst" --progress -- --progress
	[ -z "$stderr" ] || fail "rdsend --progress wrote: $stderr"
	[ ! -s "$D/recv.err" ] || fail "rdrecv --progress wrote: $(cat "$D/recv.err")"
}

@test "--progress on a terminal shows a bar with rate and ETA" {
	command -v script >/dev/null || fail "script (bsdutils) not installed"
	mkrand "$D/src" $((32 * 1024 * 1024))
	port=$(free_port)
	start_recv --timeout 10 "$port" "$KEY" "$D/dst"
	wait_listen "$port"
	cmd=$(printf '%q ' "$RDSEND" --progress --timeout 10 127.0.0.1 "$port" "$KEY" "$D/src")
	# script(1) gives rdsend a pty as stdout and stderr.
	run_t --secs 60 script -qec "$cmd" "$D/typescript"
	assert_status 0
	wait_recv
	assert_rc recv "$RECV_RC" 0
	assert_same "$D/src" "$D/dst"
	bar=$(tr '\r' '\n' <"$D/typescript")
	# The last redraw may come before 100%: the bar is erased at the end.
	assert_match "$bar" '[0-9]+%' "progress bar"
	assert_match "$bar" '[0-9.]+ [KMG]?B/s' "progress rate"
	assert_match "$bar" 'ETA' "progress ETA"
}

@test "without -v a successful transfer is quiet" {
	mkrand "$D/src" 5000
	xfer_file "$D/src" "$D/dst"
	[ -z "$stderr" ] || fail "rdsend stderr not empty: $stderr"
	[ -z "$output" ] || fail "rdsend stdout not empty: $output"
	[ ! -s "$D/recv.err" ] || fail "rdrecv stderr: $(cat "$D/recv.err")"
}

@test "a memory-lock limit below the ring: one warning on each side, transfer still intact" {
	# Root ignores RLIMIT_MEMLOCK (CAP_IPC_LOCK): run both ends as nobody,
	# binaries and files in a directory nobody can reach (the bats tree
	# and the checkout may be private to root).
	N=$(mktemp -d /tmp/rdx-nobody.XXXXXX)
	chmod 755 "$N"
	cp "$RDSEND" "$RDRECV" "$N/"
	mkdir -m 777 "$N/io"
	mkrand "$N/io/src" $((3 * 1024 * 1024 + 1))
	chmod 644 "$N/io/src"
	as_nobody=(setpriv --reuid=nobody --regid=nogroup --clear-groups prlimit --memlock=1048576)
	port=$(free_port)
	bg_start recv "${as_nobody[@]}" "$N/rdrecv" --timeout 10 "$port" "$KEY" "$N/io/dst"
	RECV_PID=$BG_PID
	wait_listen "$port"
	run_t --secs 30 "${as_nobody[@]}" "$N/rdsend" --timeout 10 127.0.0.1 "$port" "$KEY" "$N/io/src"
	assert_status 0
	wait_recv 10
	assert_rc recv "$RECV_RC" 0
	assert_same "$N/io/src" "$N/io/dst"
	if [ -n "${RDX_SANITIZED:-}" ]; then
		# ASan's runtime intercepts mlock(2) and reports success, so
		# there is nothing to warn about: the sides must stay quiet.
		[ -z "$stderr" ] || fail "rdsend stderr under ASan: $stderr"
	else
		assert_match "$stderr" '^rdsend: warning: cannot lock 4.00 MiB of slots in memory \(RLIMIT_MEMLOCK is 1.00 MiB\).*ulimit -l' "rdsend warning"
		[ "$(grep -c . <<<"$stderr")" -eq 1 ] || fail "more than one line: $stderr"
		assert_file_match "$D/recv.err" '^rdrecv: warning: cannot lock .*RLIMIT_MEMLOCK'
	fi
	rm -rf "$N"
}

# ----------------------------------------------- rdma-pipe compatible usage

@test "compat: rdrecv PORT KEY > out / rdsend -v 127.0.0.1 PORT KEY < in" {
	mkrand "$D/in" $((1024 * 1024 + 1))
	port=$(free_port)
	RECV_OUT=$D/out start_recv "$port" "$KEY"
	wait_listen "$port"
	run_t "$RDSEND" -v 127.0.0.1 "$port" "$KEY" <"$D/in"
	assert_status 0
	assert_match "$stderr" 'Bandwidth' "rdsend -v"
	wait_recv
	assert_rc recv "$RECV_RC" 0
	assert_same "$D/in" "$D/out"
}

@test "compat: rdrecv PORT KEY FILE / rdsend HOST PORT KEY FILE" {
	mkrand "$D/in" $((1024 * 1024 + 1))
	port=$(free_port)
	start_recv "$port" "$KEY" "$D/out"
	wait_listen "$port"
	run_t "$RDSEND" localhost "$port" "$KEY" "$D/in"
	assert_status 0
	wait_recv
	assert_rc recv "$RECV_RC" 0
	assert_same "$D/in" "$D/out"
}

# ------------------------------------------------------- where the key is

@test "key from --key-file on both sides (trailing newline stripped)" {
	mkrand "$D/src" 100000
	printf '%s\n' "$KEY" >"$D/kf"
	port=$(free_port)
	start_recv --timeout 10 --key-file "$D/kf" "$port" "$D/dst"
	wait_listen "$port"
	run_t "$RDSEND" --timeout 10 --key-file "$D/kf" 127.0.0.1 "$port" "$D/src"
	assert_status 0
	wait_recv
	assert_rc recv "$RECV_RC" 0
	assert_same "$D/src" "$D/dst"
}

@test "key from --key-file matches the same key given positionally" {
	mkrand "$D/src" 100000
	printf '%s\n' "$KEY" >"$D/kf"
	port=$(free_port)
	start_recv --timeout 10 --key-file "$D/kf" "$port" "$D/dst"
	wait_listen "$port"
	run_t "$RDSEND" --timeout 10 127.0.0.1 "$port" "$KEY" "$D/src"
	assert_status 0
	wait_recv
	assert_rc recv "$RECV_RC" 0
	assert_same "$D/src" "$D/dst"
}

@test "key from RDX_KEY on both sides" {
	mkrand "$D/src" 100000
	port=$(free_port)
	export RDX_KEY=$KEY
	start_recv --timeout 10 "$port" "$D/dst"
	wait_listen "$port"
	run_t "$RDSEND" --timeout 10 127.0.0.1 "$port" "$D/src"
	assert_status 0
	wait_recv
	assert_rc recv "$RECV_RC" 0
	assert_same "$D/src" "$D/dst"
}

@test "key from RDX_KEY, stdin->stdout with one positional after HOST" {
	mkrand "$D/src" 100000
	port=$(free_port)
	export RDX_KEY=$KEY
	RECV_OUT=$D/dst start_recv --timeout 10 "$port"
	wait_listen "$port"
	run_t "$RDSEND" --timeout 10 127.0.0.1 "$port" <"$D/src"
	assert_status 0
	wait_recv
	assert_rc recv "$RECV_RC" 0
	assert_same "$D/src" "$D/dst"
}

@test "a positional KEY overrides RDX_KEY" {
	mkrand "$D/src" 100000
	port=$(free_port)
	export RDX_KEY=not-the-key
	start_recv --timeout 10 "$port" "$KEY" "$D/dst"
	wait_listen "$port"
	run_t "$RDSEND" --timeout 10 127.0.0.1 "$port" "$KEY" "$D/src"
	assert_status 0
	wait_recv
	assert_rc recv "$RECV_RC" 0
	assert_same "$D/src" "$D/dst"
}

@test "an existing non-regular FILE (/dev/null) is written directly" {
	mkrand "$D/src" 100000
	port=$(free_port)
	start_recv --timeout 10 "$port" "$KEY" /dev/null
	wait_listen "$port"
	run_t "$RDSEND" --timeout 10 127.0.0.1 "$port" "$KEY" "$D/src"
	assert_status 0
	wait_recv
	assert_rc recv "$RECV_RC" 0
	[ -c /dev/null ]
	[ -z "$(find /dev -maxdepth 1 -name '.null.rdx-*')" ]
}
