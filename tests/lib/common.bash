# Shared helpers for the CLI tests (tests/cli/*.bats).
#
# Load with:   load ../lib/common
# and call common_setup / common_teardown from setup() / teardown(), or use
# the default setup/teardown defined at the bottom (a .bats file that needs
# more defines its own and calls these first/last).
#
# Rules every test follows:
#   - every foreground command runs under `timeout` (xrun / run_t), every
#     background one is started by bg_start and killed in teardown, so a
#     hung binary fails the test instead of hanging the suite;
#   - network timeouts are short (--timeout 5, --wait 10, --connect-timeout)
#     so failures end fast;
#   - every file lives in $BATS_TEST_TMPDIR (removed by bats).
# shellcheck disable=SC2034,SC2154 # globals are used by the .bats files; status/output come from bats

bats_require_minimum_version 1.5.0

RDX_REPO=$(cd "$BATS_TEST_DIRNAME/../.." && pwd)
RDX_BUILD=${RDX_BUILD:-build}
case $RDX_BUILD in
/*) ;;
*) RDX_BUILD=$RDX_REPO/$RDX_BUILD ;;
esac
RDSEND=$RDX_BUILD/rdsend
RDRECV=$RDX_BUILD/rdrecv
BADPEER=$RDX_BUILD/tests/badpeer

# Upper bound for one foreground command, seconds.
RDX_CMD_TIMEOUT=${RDX_CMD_TIMEOUT:-60}

KEY=rdx-test-key-$$

# ---------------------------------------------------------------- setup

common_setup() {
	D=$BATS_TEST_TMPDIR
	BG_PIDS=()
	MOUNTS=()
	CLEANUPS=()
	unset RDX_KEY
	[ -x "$RDSEND" ] || fail "rdsend not built: $RDSEND"
	[ -x "$RDRECV" ] || fail "rdrecv not built: $RDRECV"
}

common_teardown() {
	local pid fn m
	for pid in "${BG_PIDS[@]}"; do
		kill_tree "$pid" KILL
	done
	for pid in "${BG_PIDS[@]}"; do
		wait "$pid" 2>/dev/null || true
	done
	for fn in "${CLEANUPS[@]}"; do
		$fn || true
	done
	for m in "${MOUNTS[@]}"; do
		umount -l "$m" 2>/dev/null || true
	done
	if [ -n "${BATS_TEST_COMPLETED:-}" ]; then
		return 0
	fi
	# The test failed: show what the background processes said.
	local f
	for f in "$D"/*.err; do
		[ -s "$f" ] || continue
		echo "--- ${f##*/}:"
		head -c 4000 "$f"
	done >&2 || true
}

setup() { common_setup; }
teardown() { common_teardown; }

# ------------------------------------------------------------ assertions

fail() {
	echo "FAIL: $*" >&2
	return 1
}

# assert_status WANT: checks $status from the last `run`, shows output if not.
assert_status() {
	if [ "$status" -ne "$1" ]; then
		echo "expected exit $1, got $status" >&2
		echo "stdout: ${output:0:2000}" >&2
		echo "stderr: ${stderr:-}" >&2
		return 1
	fi
}

# assert_nonzero: last `run` failed but was not killed by timeout.
assert_nonzero() {
	if [ "$status" -eq 0 ] || [ "$status" -eq 124 ] || [ "$status" -eq 137 ]; then
		echo "expected a failure exit, got $status" >&2
		echo "stderr: ${stderr:-}" >&2
		return 1
	fi
}

# assert_match STRING ERE [what]: STRING matches the extended regex.
assert_match() {
	if ! grep -qE -- "$2" <<<"$1"; then
		echo "${3:-text} does not match /$2/:" >&2
		echo "$1" >&2
		return 1
	fi
}

# assert_file_match FILE ERE: some line of FILE matches.
assert_file_match() {
	if ! grep -qE -- "$2" "$1"; then
		echo "${1##*/} does not match /$2/:" >&2
		cat "$1" >&2
		return 1
	fi
}

# assert_one_line_error TEXT TOOL: exactly one line, "TOOL: message".
assert_one_line_error() {
	local n
	n=$(printf '%s' "$1" | grep -c '' || true)
	if [ "$n" -ne 1 ]; then
		echo "expected a one-line error, got $n lines:" >&2
		echo "$1" >&2
		return 1
	fi
	assert_match "$1" "^$2: [^ ]" "error line"
	# Lowercase start, no full stop at the end (docs/CLI.md "Errors").
	assert_match "$1" "^$2: [^A-Z]" "error line (lowercase)"
	if grep -qE '\.$' <<<"$1"; then
		echo "error line ends with a full stop: $1" >&2
		return 1
	fi
}

# assert_same A B: files are byte-identical.
assert_same() {
	if ! cmp "$1" "$2"; then
		ls -l "$1" "$2" >&2 || true
		return 1
	fi
}

# assert_no_output_file PATH: neither PATH nor any .NAME.rdx-* temp exists.
assert_no_output_file() {
	local dir=${1%/*} base=${1##*/} left
	if [ -e "$1" ]; then
		echo "final file exists: $1" >&2
		ls -la "$dir" >&2
		return 1
	fi
	left=$(find "$dir" -maxdepth 1 -name ".$base.rdx-*" 2>/dev/null)
	if [ -n "$left" ]; then
		echo "temporary left behind: $left" >&2
		return 1
	fi
}

# assert_no_temp PATH: no .NAME.rdx-* temp next to PATH.
assert_no_temp() {
	local dir=${1%/*} base=${1##*/} left
	left=$(find "$dir" -maxdepth 1 -name ".$base.rdx-*" 2>/dev/null)
	if [ -n "$left" ]; then
		echo "temporary left behind: $left" >&2
		return 1
	fi
}

# ------------------------------------------------------------- processes

# xrun CMD...: CMD under timeout (never hangs the suite).
xrun() {
	timeout -k 5 "$RDX_CMD_TIMEOUT" "$@"
}

# run_t [--secs N] CMD...: bats `run --separate-stderr` under timeout;
# sets $status, $output (stdout) and $stderr.
run_t() {
	local secs=$RDX_CMD_TIMEOUT
	if [ "$1" = --secs ]; then
		secs=$2
		shift 2
	fi
	run --separate-stderr timeout -k 5 "$secs" "$@"
}

# bg_start NAME CMD...: runs CMD in the background with stdout to
# $D/NAME.out (or $BG_STDOUT if set), stderr to $D/NAME.err and stdin from
# $BG_STDIN (default /dev/null).  SIGINT/SIGTERM are reset to their
# defaults (bash makes background jobs ignore SIGINT).  Sets BG_PID.
bg_start() {
	local name=$1
	shift
	local out=${BG_STDOUT:-$D/$name.out} in=${BG_STDIN:-/dev/null}
	env --default-signal=INT,TERM,PIPE "$@" <"$in" >"$out" 2>"$D/$name.err" 3>&- &
	BG_PID=$!
	BG_PIDS+=("$BG_PID")
}

# start_recv ARGS...: rdrecv ARGS in the background.  stdout goes to
# $RECV_OUT (default $D/recv.out), stderr to $D/recv.err.  Sets RECV_PID.
# Prefix with $NETNS_EXEC (e.g. "ip netns exec NS") to run elsewhere.
start_recv() {
	# shellcheck disable=SC2086 # NETNS_EXEC is a command prefix, split on purpose
	BG_STDOUT=${RECV_OUT:-$D/recv.out} bg_start recv ${NETNS_EXEC:-} "$RDRECV" "$@"
	RECV_PID=$BG_PID
}

# start_send ARGS...: rdsend ARGS in the background, stdin from
# $SEND_IN (default /dev/null), stdout to $D/send.out, stderr $D/send.err.
start_send() {
	# shellcheck disable=SC2086 # NETNS_EXEC is a command prefix, split on purpose
	BG_STDIN=${SEND_IN:-/dev/null} bg_start send ${NETNS_EXEC:-} "$RDSEND" "$@"
	SEND_PID=$BG_PID
}

# alive PID: the process exists and is not a zombie.
alive() {
	local st
	[ -r "/proc/$1/stat" ] || return 1
	st=$(sed 's/^.*) //' "/proc/$1/stat" 2>/dev/null | cut -c1) || return 1
	[ -n "$st" ] && [ "$st" != Z ] && [ "$st" != X ]
}

# wait_exit PID SECS: waits for a background child; sets WAIT_RC to its
# exit status, or 124 (and kills it) if it is still running after SECS.
wait_exit() {
	local pid=$1 secs=$2 deadline
	deadline=$((SECONDS + secs))
	while alive "$pid"; do
		if [ "$SECONDS" -ge "$deadline" ]; then
			kill_tree "$pid" KILL
			wait "$pid" 2>/dev/null || true
			WAIT_RC=124
			return 0
		fi
		sleep 0.05
	done
	WAIT_RC=0
	wait "$pid" 2>/dev/null || WAIT_RC=$?
}

# wait_recv [SECS]: waits for rdrecv (default 30 s); sets RECV_RC.
wait_recv() {
	wait_exit "$RECV_PID" "${1:-30}"
	RECV_RC=$WAIT_RC
}

# wait_send [SECS]: waits for a background rdsend; sets SEND_RC.
wait_send() {
	wait_exit "$SEND_PID" "${1:-30}"
	SEND_RC=$WAIT_RC
}

# assert_rc NAME GOT WANT: exit status check for background processes.
assert_rc() {
	if [ "$2" -ne "$3" ]; then
		echo "$1: expected exit $3, got $2${4:+ ($4)}" >&2
		[ -f "$D/$1.err" ] && { echo "$1 stderr:" >&2; cat "$D/$1.err" >&2; }
		return 1
	fi
}

# kill_tree PID [SIG]: signals PID and all its descendants (children first
# collected, so none escapes by reparenting).
kill_tree() {
	local pid=$1 sig=${2:-TERM} kids c
	kids=$(ps -o pid= --ppid "$pid" 2>/dev/null || true)
	kill -s STOP "$pid" 2>/dev/null || true
	for c in $kids; do
		kill_tree "$c" "$sig"
	done
	kill -s "$sig" "$pid" 2>/dev/null || true
	kill -s CONT "$pid" 2>/dev/null || true
}

# wait_until SECS CMD...: polls CMD every 0.05 s until it succeeds.
wait_until() {
	local secs=$1 deadline
	shift
	deadline=$((SECONDS + secs))
	until "$@"; do
		[ "$SECONDS" -lt "$deadline" ] || return 1
		sleep 0.05
	done
}

# slow_source [BYTES [PAUSE [FROM]]]: a background writer into $D/fifo that
# never ends by itself (BYTES of FROM every PAUSE seconds; default 64 KiB
# of /dev/urandom every 0.02 s, about 2-3 MB/s), so a transfer is still
# running when a test kills one end; sets SEND_IN for start_send.
slow_source() {
	mkfifo "$D/fifo"
	BG_STDOUT=$D/fifo bg_start src bash -c \
		"while :; do head -c ${1:-65536} ${3:-/dev/urandom} || exit 0; sleep ${2:-0.02}; done"
	SEND_IN=$D/fifo
}

# has_unnamed DIR [MIN]: some process has an unnamed file (O_TMPFILE) of
# DIR open, of at least MIN bytes (default 0): its /proc fd link reads
# "DIR/#INODE (deleted)".
has_unnamed() {
	local f
	for f in $(find /proc/[0-9]*/fd -lname "$1/#*" 2>/dev/null); do
		[ "$(stat -L -c %s "$f" 2>/dev/null || echo -1)" -ge "${2:-0}" ] && return 0
	done
	return 1
}

# unnamed_in DIR: how many unnamed files (see has_unnamed) processes have
# open in DIR and the directories below it.
unnamed_in() {
	find /proc/[0-9]*/fd -lname "$1/*#*" 2>/dev/null | wc -l
}

# wait_temp DST [SECS]: until the file rdrecv writes for DST holds data
# (default 15 s): unnamed (O_TMPFILE: an open descriptor of some process
# leads to "DIR/#INODE (deleted)"; the test's own DIR holds no other), or
# a .DST.rdx-* temporary where the file system has no O_TMPFILE.
wait_temp() {
	local dir=${1%/*} base=${1##*/}
	has_temp() {
		[ -z "$(find "$dir" -maxdepth 1 -name ".$base.rdx-*" -size +0 2>/dev/null)" ] ||
			return 0
		has_unnamed "$dir" 1
	}
	wait_until "${2:-15}" has_temp ||
		fail "no file with data being written for '$1' in $dir: $(ls -la "$dir")"
}


# ------------------------------------------------------------- network

# guess_dict: $D/dict, candidate keys for badpeer guess-sender and
# guess-receiver, the right one ($KEY) among them.
guess_dict() {
	printf '%s\n' 123456 password dragon2023 "$KEY" letmein >"$D/dict"
}

# free_port: prints a TCP port below the ephemeral range (10000..32767 on
# Linux's default) that nothing uses.
free_port() {
	local p used i lo=10000 hi
	# Below the kernel's ephemeral range: a port in it can be taken by any
	# test's outgoing connection (a flood opens a thousand) between this
	# check and the listen, and the listener then fails with "Address
	# already in use".
	read -r hi _ </proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || hi=32768
	hi=$((hi - 1))
	[ "$hi" -ge $((lo + 1000)) ] || { lo=20000 hi=60000; }
	used=$(${NETNS_EXEC:-} ss -Htan 2>/dev/null | awk '{print $4}' | sed 's/.*://')
	for i in $(seq 1 200); do
		p=$((lo + (RANDOM * 32768 + RANDOM) % (hi - lo + 1)))
		if ! grep -qx "$p" <<<"$used"; then
			echo "$p"
			return 0
		fi
	done
	fail "no free port found"
}

is_listening() {
	[ -n "$(${NETNS_EXEC:-} ss -Hltn "sport = :$1" 2>/dev/null)" ]
}

# wait_listen PORT [SECS]: until something listens on PORT (max 5 s);
# fails at once if the listener ($LISTEN_PID, default rdrecv) exited.
wait_listen() {
	local port=$1 deadline pid=${LISTEN_PID:-${RECV_PID:-}}
	deadline=$((SECONDS + ${2:-5}))
	until is_listening "$port"; do
		if [ -n "$pid" ] && ! alive "$pid"; then
			echo "the listener (pid $pid) exited before listening on $port:" >&2
			cat "$D/recv.err" >&2
			return 1
		fi
		if [ "$SECONDS" -ge "$deadline" ]; then
			echo "nothing listens on port $port after ${2:-5} s" >&2
			cat "$D/recv.err" >&2
			return 1
		fi
		sleep 0.05
	done
}

# wait_listen_or_exit PORT [SECS]: until rdrecv listens on PORT or has
# exited (for cases where it may refuse to start); never fails.
wait_listen_or_exit() {
	local port=$1 deadline
	deadline=$((SECONDS + ${2:-5}))
	while ! is_listening "$port" && alive "$RECV_PID"; do
		[ "$SECONDS" -lt "$deadline" ] || return 0
		sleep 0.05
	done
}

# ---------------------------------------------------------------- files

# mkrand FILE BYTES: BYTES random bytes (K/M/G suffixes as head -c takes).
mkrand() {
	head -c "$2" /dev/urandom >"$1"
}

# flip_byte FILE OFFSET: inverts the byte at OFFSET in place, so FILE
# always changes (writing a fixed byte into random data is no change one
# time in 256).
flip_byte() {
	local b
	b=$(od -An -tu1 -j "$2" -N1 "$1" | tr -d ' ')
	[ -n "$b" ] || fail "flip_byte: '$1' has no byte at $2"
	printf "\\$(printf %03o $((255 - b)))" |
		dd of="$1" bs=1 seek="$2" conv=notrunc status=none
}

# mktext FILE BYTES: compressible but not trivial content.
mktext() {
	local n=$2
	{ seq 1 100000000 | head -c "$n"; } >"$1" 2>/dev/null || true
	[ "$(stat -c %s "$1")" -eq "$n" ] || fail "mktext $1 $n"
}

fsize() {
	stat -c %s "$1"
}

# mount_tmpfs DIR SIZE: a tmpfs of SIZE at DIR, unmounted in teardown.
mount_tmpfs() {
	mkdir -p "$1"
	mount -t tmpfs -o "size=$2" rdxtest "$1" || fail "cannot mount tmpfs on $1 (needs root)"
	MOUNTS+=("$1")
}

# shimmed VAR=VALUE...: a command prefix (for NETNS_EXEC, or unquoted
# before a command) that preloads tests/peer/shim.c with those settings
# (ASan wants its runtime first; the shim is not sanitized and needs no
# such place).  No spaces in the values.
shimmed() {
	[ -x "$RDX_BUILD/tests/shim.so" ] || fail "shim not built: $RDX_BUILD/tests/shim.so"
	echo "env LD_PRELOAD=$RDX_BUILD/tests/shim.so ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0 $*"
}

# mount_ext4 DIR SIZE: a fresh ext4 of SIZE on a loop device at DIR (a
# real block file system: O_DIRECT, fallocate), unmounted in teardown.
mount_ext4() {
	local img=$D/${1//\//_}.img
	truncate -s "$2" "$img" && mkfs.ext4 -q -F "$img" 2>/dev/null || fail "mkfs.ext4 failed"
	mkdir -p "$1"
	mount -o loop "$img" "$1" || fail "cannot mount a loop device on $1 (needs root)"
	MOUNTS+=("$1")
}

# ----------------------------------------------------------- transfers

# xfer_file SRC DST [SEND_OPTS...] [-- RECV_OPTS...]: FILE->FILE over
# 127.0.0.1 with rdsend in the foreground; asserts both exit 0 and cmp.
# Sets the global $port it used.
xfer_file() {
	local src=$1 dst=$2 a
	shift 2
	local sopts=() ropts=() seen=
	for a in "$@"; do
		if [ "$a" = -- ] && [ -z "$seen" ]; then
			seen=1
			continue
		fi
		if [ -n "$seen" ]; then ropts+=("$a"); else sopts+=("$a"); fi
	done
	port=$(free_port)
	start_recv --timeout 10 "${ropts[@]}" "$port" "$KEY" "$dst"
	wait_listen "$port"
	run_t "$RDSEND" --timeout 10 "${sopts[@]}" 127.0.0.1 "$port" "$KEY" "$src"
	assert_status 0
	wait_recv 30
	assert_rc recv "$RECV_RC" 0
	assert_same "$src" "$dst"
	assert_no_temp "$dst"
}
