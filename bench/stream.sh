#!/usr/bin/env bash
# bench/stream.sh -- rdsend -> rdrecv against iperf3, socat, nc and mbuffer,
# side by side in one run over loopback TCP (127.0.0.1 only).
#
# Usage:   bash bench/stream.sh                 # 4 GiB per row
#          SIZE=1G bash bench/stream.sh         # quick run
#
# Environment (all optional):
#   SIZE=4G        bytes per row; suffixes K M G T (powers of 1024)
#   STREAMS=4      --streams for the "N streams" row
#   RUNS=1         repeat the whole set of rows RUNS times (interleaved);
#                  each row reports its fastest run
#   TIMEOUT=...    seconds any one process may run (default 120 + 1 s per
#                  25 MB, i.e. a floor of 25 MB/s)
#   ONLY=regex     run only rows whose name matches (iperf3 always runs,
#                  it is the reference)
#   RDSEND, RDRECV paths of the binaries (default build/rdsend, build/rdrecv)
#   BENCH_TMPDIR   parent of the scratch directory (default /var/tmp)
#   SRC_FILE       use this file as the data source instead of generating
#                  one (its size then overrides SIZE)
#   FEED=cat       how stream rows get their stdin: `cat` = `cat src | tool`
#                  (a pipe, the default: a generator), `file` = `tool < src`
#                  (stdin is the regular file itself: no pipe in the way)
#
# What is measured, per row:
#   wall s   from starting the sending side (the listener is already up)
#            until both ends have exited; GB/s = bytes / wall / 1e9.
#   CPU s    user+sys of both ends from /usr/bin/time (the `cat` feeding the
#            sender is common to every stream row and is not counted).
#   peak RSS max of the two ends' %M (KiB), shown in MiB.
#
# Data source: one random file of SIZE bytes (AES-CTR keystream from openssl,
# or /dev/urandom when openssl is missing) in the scratch directory, read
# once to warm the page cache, then fed with `cat file |` to every stream
# row, so every tool reads the same incompressible bytes from memory and
# --compress gets no free win.  The file->file row sends that same file from
# disk/page cache to a destination file in the scratch directory.  iperf3 is
# the exception: it sends from its own memory buffer (that is how the
# baseline `iperf3 -l 1M` is defined).
#
# iperf3 rate: the table uses wall time for iperf3 as for every other row
# (process start, control connection and result exchange included), because
# every rdxfer row pays its own handshake in wall time too -- same method,
# same clock for all rows.  iperf3's own figure from -J
# (end.sum_received.bits_per_second, data phase only) is printed below the
# table together with the rdsend/iperf3 ratio against it, which is the
# stricter comparison; the two differ by only the setup cost.
#
# Correctness: every rdxfer row runs rdrecv --json and checks "bytes" equals
# SIZE, that "streams"/"compress"/"encrypt" match what the row asked for,
# and that both ends exit 0; the file->file row also cmp's the destination with
# the source.  Before timing, a small pre-flight (3 MiB + 12345 bytes)
# goes through each rdxfer variant into `wc -c`/cmp.
#
# Every process runs under `timeout`; everything is killed and the scratch
# directory removed on exit (trap).
set -euo pipefail
export LC_ALL=C

here=$(cd "$(dirname "$0")/.." && pwd)
RDSEND=${RDSEND:-$here/build/rdsend}
RDRECV=${RDRECV:-$here/build/rdrecv}
STREAMS=${STREAMS:-4}
RUNS=${RUNS:-1}
ONLY=${ONLY:-}
FEED=${FEED:-cat}
case $FEED in cat | file) ;; *) echo "bench: FEED must be cat or file" >&2; exit 2 ;; esac

log() { printf 'bench: %s\n' "$*" >&2; }
die() { printf 'bench: error: %s\n' "$*" >&2; exit 1; }

to_bytes() {
	local s=$1 n mult=1
	case $s in
	*[kK]) mult=1024; n=${s%?} ;;
	*[mM]) mult=$((1024 ** 2)); n=${s%?} ;;
	*[gG]) mult=$((1024 ** 3)); n=${s%?} ;;
	*[tT]) mult=$((1024 ** 4)); n=${s%?} ;;
	*) n=$s ;;
	esac
	[[ $n =~ ^[0-9]+$ ]] || die "bad SIZE '$s' (use e.g. 4G, 512M, 1000000)"
	echo $((n * mult))
}

# ---------------------------------------------------------------- tools
need_tools() {
	local missing=() t
	for t in iperf3 socat nc mbuffer ss timeout openssl cmp; do
		command -v "$t" >/dev/null 2>&1 || missing+=("$t")
	done
	[ -x /usr/bin/time ] || missing+=(time)
	[ ${#missing[@]} -eq 0 ] && return 0
	log "missing: ${missing[*]}; installing"
	if [ -x "$here/scripts/deps.sh" ] || [ -f "$here/scripts/deps.sh" ]; then
		bash "$here/scripts/deps.sh" bench || true
	fi
	for t in iperf3 socat nc mbuffer ss timeout; do
		command -v "$t" >/dev/null 2>&1 || {
			DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
				time iperf3 socat netcat-openbsd mbuffer iproute2 >/dev/null
			break
		}
	done
	[ -x /usr/bin/time ] || die "/usr/bin/time missing (apt-get install time)"
	grep -q OpenBSD <<<"$(nc -h 2>&1 || true)" || die "nc is not netcat-openbsd"
}
need_tools

have_rdx=1
if [ ! -x "$RDSEND" ] || [ ! -x "$RDRECV" ]; then
	have_rdx=0
	log "WARNING: $RDSEND / $RDRECV not found: rdxfer rows skipped"
fi

# ---------------------------------------------------------------- scratch + cleanup
TMPD=$(mktemp -d "${BENCH_TMPDIR:-/var/tmp}/rdxfer-bench.XXXXXX")
LIVE_RX="" LIVE_TX=""   # pids of running background jobs (`timeout` leaders)
cleanup() {
	local p
	for p in $LIVE_TX $LIVE_RX; do
		[ -n "$p" ] || continue
		# every background job is `timeout ...`, which leads its own
		# process group: take the group down, then the leader
		kill -TERM -- "-$p" 2>/dev/null || kill -TERM "$p" 2>/dev/null || true
	done
	for p in $LIVE_TX $LIVE_RX; do
		[ -n "$p" ] || continue
		wait "$p" 2>/dev/null || true
	done
	rm -rf "$TMPD"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if [ -n "${SRC_FILE:-}" ]; then
	SRC=$SRC_FILE
	[ -f "$SRC" ] || die "SRC_FILE=$SRC is not a file"
	BYTES=$(stat -c %s "$SRC")
	SRC_DESC="given file $SRC ($BYTES bytes) fed from page cache with cat"
else
	BYTES=$(to_bytes "${SIZE:-4G}")
	SRC=$TMPD/src.bin
	avail=$(df -P -B1 "$TMPD" | awk 'NR==2 {print $4}')
	[ "$avail" -gt $((BYTES * 2 + 256 * 1024 * 1024)) ] ||
		die "need 2 x $BYTES bytes free under $TMPD, have $avail"
	log "generating $BYTES random bytes in $SRC"
	if command -v openssl >/dev/null 2>&1; then
		# keystream of AES-128-CTR over zeros: random-looking, fast
		openssl enc -aes-128-ctr -nosalt -pbkdf2 \
			-pass "pass:$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')" \
			</dev/zero 2>/dev/null | head -c "$BYTES" >"$SRC" || true
		SRC_DESC="random file ($BYTES bytes, AES-CTR keystream via openssl) fed from page cache with cat"
	else
		head -c "$BYTES" /dev/urandom >"$SRC"
		SRC_DESC="random file ($BYTES bytes from /dev/urandom) fed from page cache with cat"
	fi
	[ "$(stat -c %s "$SRC")" -eq "$BYTES" ] || die "could not generate source"
fi
cat "$SRC" >/dev/null   # warm the page cache
[ "$BYTES" -gt 0 ] || die "SIZE must be > 0"
TIMEOUT=${TIMEOUT:-$((120 + BYTES / 25000000))}

export RDX_KEY
RDX_KEY=$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')

# ---------------------------------------------------------------- helpers
port_listening() { [ -n "$(ss -Hltn "sport = :$1" 2>/dev/null)" ]; }

free_port() {
	local p
	for _ in $(seq 1 200); do
		p=$((20000 + RANDOM % 40000))
		port_listening "$p" && continue
		# also skip ports with any socket (TIME_WAIT, connected) on them
		[ -n "$(ss -Htan "( sport = :$p or dport = :$p )" 2>/dev/null)" ] && continue
		echo "$p"
		return 0
	done
	die "no free port found"
}

# wait_listen PORT PID: poll ss until PORT is listening; fail if PID died
wait_listen() {
	local port=$1 pid=$2
	for _ in $(seq 1 1000); do # 1000 x 10 ms = 10 s
		port_listening "$port" && return 0
		kill -0 "$pid" 2>/dev/null || return 1
		sleep 0.01
	done
	return 1
}

now() { date +%s.%N; }

TIMEF='%e %U %S %M'
# run_rx DIR OUT CMD...: start receiver in the background, stdout -> OUT
# (/dev/null for the data of stream rows), stderr -> DIR/rx.err
run_rx() {
	local d=$1 out=$2; shift 2
	timeout -k 5 "$TIMEOUT" /usr/bin/time -o "$d/rx.time" -f "$TIMEF" "$@" \
		<"/dev/null" >"$out" 2>"$d/rx.err" &
	RXPID=$!
	LIVE_RX=$RXPID
}
# run_tx DIR INPUT CMD...: run the sender with stdin INPUT (a file path,
# read through `cat` like a generator; "-" = /dev/null) and wait for it.
# It runs as a background job + `wait` so that a signal to this script is
# handled at once (trap), not after the sender has finished.
run_tx() {
	local d=$1 in=$2 rc=0 txpid; shift 2
	if [ "$in" = - ]; then
		timeout -k 5 "$TIMEOUT" /usr/bin/time -o "$d/tx.time" -f "$TIMEF" "$@" \
			</dev/null >"$d/tx.out" 2>"$d/tx.err" &
	elif [ "$FEED" = file ]; then
		timeout -k 5 "$TIMEOUT" /usr/bin/time -o "$d/tx.time" -f "$TIMEF" "$@" \
			<"$in" >"$d/tx.out" 2>"$d/tx.err" &
	else
		cat "$in" | timeout -k 5 "$TIMEOUT" /usr/bin/time -o "$d/tx.time" -f "$TIMEF" "$@" \
			>"$d/tx.out" 2>"$d/tx.err" &
	fi
	txpid=$!   # the `timeout` (last element of the pipeline)
	LIVE_TX=$txpid
	wait "$txpid" || rc=$?
	LIVE_TX=
	return "$rc"
}

# results: name -> "wall cpu rssKiB"
declare -A R_WALL R_CPU R_RSS R_NOTE
declare -a ORDER=()
FAILED=()

# record NAME DIR T0 T1
record() {
	local name=$1 d=$2 t0=$3 t1=$4 wall cpu rss
	wall=$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.3f", b - a}')
	local tu ts tm ru rs rm
	# last line: GNU time prepends "Command exited with non-zero status"
	read -r _ tu ts tm < <(tail -n1 "$d/tx.time" 2>/dev/null) || true
	read -r _ ru rs rm < <(tail -n1 "$d/rx.time" 2>/dev/null) || true
	cpu=$(awk -v a="${tu:-0}" -v b="${ts:-0}" -v c="${ru:-0}" -v e="${rs:-0}" \
		'BEGIN {printf "%.2f", a + b + c + e}')
	rss=$(( ${tm:-0} > ${rm:-0} ? ${tm:-0} : ${rm:-0} ))
	if [ -z "${R_WALL[$name]:-}" ] ||
		awk -v a="$wall" -v b="${R_WALL[$name]}" 'BEGIN {exit !(a < b)}'; then
		R_WALL[$name]=$wall R_CPU[$name]=$cpu R_RSS[$name]=$rss
	fi
	log "$(printf '%-28s %8.3f s  %6.2f GB/s  cpu %6.2f s  rss %6d KiB' \
		"$name" "$wall" "$(awk -v b="$BYTES" -v w="$wall" 'BEGIN {printf "%.2f", b / w / 1e9}')" \
		"$cpu" "$rss")"
}

fail_row() {
	local name=$1 d=$2 msg=$3 f
	log "FAIL $name: $msg"
	for f in rx.err tx.err rx.out tx.out; do
		[ -s "$d/$f" ] && { log "  --- $f:"; head -c 2000 "$d/$f" | sed 's/^/    /' >&2; }
	done
	FAILED+=("$name")
	R_NOTE[$name]="FAILED: $msg"
}

# wait_rx TXRC: wait for the receiver; if the sender failed (TXRC != 0),
# give the receiver 10 s to notice, then stop it (a receiver whose sender
# died before connecting would otherwise wait until $TIMEOUT)
wait_rx() {
	local rc=0 txrc=${1:-0}
	if [ "$txrc" -ne 0 ]; then
		for _ in $(seq 1 100); do
			kill -0 "$RXPID" 2>/dev/null || break
			sleep 0.1
		done
		kill -TERM -- "-$RXPID" 2>/dev/null || true
	fi
	wait "$RXPID" || rc=$?
	LIVE_RX=   # reaped: never signal a pid that may have been reused
	return "$rc"
}

json_num() { # json_num KEY FILE: first numeric value of "KEY" in FILE
	grep -o "\"$1\"[[:space:]]*:[[:space:]]*[0-9.eE+-]*" "$2" 2>/dev/null |
		head -n1 | sed 's/.*:[[:space:]]*//'
}

want_row() { [ -z "$ONLY" ] || [[ $1 =~ $ONLY ]] || [ "$1" = "iperf3 -l 1M" ]; }

add_order() {
	local n=$1 o
	for o in "${ORDER[@]}"; do [ "$o" = "$n" ] && return 0; done
	ORDER+=("$n")
}

# ---------------------------------------------------------------- rows
row_iperf3() {
	local name="iperf3 -l 1M" d=$TMPD/r port t0 t1 rc=0 rrc=0
	rm -rf "$d"; mkdir -p "$d"; add_order "$name"
	port=$(free_port)
	run_rx "$d" "$d/rx.out" iperf3 -s -1 -B 127.0.0.1 -p "$port"
	wait_listen "$port" "$RXPID" || { fail_row "$name" "$d" "server did not listen"; return; }
	t0=$(now)
	run_tx "$d" - iperf3 -c 127.0.0.1 -p "$port" -n "$BYTES" -l 1M -J || rc=$?
	wait_rx "$rc" || rrc=$?
	t1=$(now)
	[ "$rc" -eq 0 ] && [ "$rrc" -eq 0 ] ||
		{ fail_row "$name" "$d" "exit client=$rc server=$rrc"; return; }
	# iperf3's own data-phase rate (receiver side), for the note below
	local bps
	bps=$(python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); print(j["end"]["sum_received"]["bits_per_second"])' \
		"$d/tx.out" 2>/dev/null || true)
	if [ -n "$bps" ]; then
		local gbs
		gbs=$(awk -v b="$bps" 'BEGIN {printf "%.3f", b / 8e9}')
		if [ -z "${IPERF_JSON_GBS:-}" ] || awk -v a="$gbs" -v b="$IPERF_JSON_GBS" 'BEGIN {exit !(a > b)}'; then
			IPERF_JSON_GBS=$gbs
		fi
	fi
	record "$name" "$d" "$t0" "$t1"
}

row_socat() {
	local name="socat -b 1048576" d=$TMPD/r port t0 t1 rc=0 rrc=0
	want_row "$name" || return 0
	rm -rf "$d"; mkdir -p "$d"; add_order "$name"
	port=$(free_port)
	run_rx "$d" /dev/null socat -u -b 1048576 "TCP4-LISTEN:$port,bind=127.0.0.1,reuseaddr" STDOUT
	wait_listen "$port" "$RXPID" || { fail_row "$name" "$d" "listener did not start"; return; }
	t0=$(now)
	run_tx "$d" "$SRC" socat -u -b 1048576 STDIN "TCP4:127.0.0.1:$port" || rc=$?
	wait_rx "$rc" || rrc=$?
	t1=$(now)
	[ "$rc" -eq 0 ] && [ "$rrc" -eq 0 ] ||
		{ fail_row "$name" "$d" "exit tx=$rc rx=$rrc"; return; }
	record "$name" "$d" "$t0" "$t1"
}

row_nc() {
	local name="nc (openbsd)" d=$TMPD/r port t0 t1 rc=0 rrc=0
	want_row "$name" || return 0
	rm -rf "$d"; mkdir -p "$d"; add_order "$name"
	port=$(free_port)
	# -d: the listener does not read stdin, exits at network EOF
	run_rx "$d" /dev/null nc -d -l 127.0.0.1 "$port"
	wait_listen "$port" "$RXPID" || { fail_row "$name" "$d" "listener did not start"; return; }
	t0=$(now)
	run_tx "$d" "$SRC" nc -N 127.0.0.1 "$port" || rc=$?
	wait_rx "$rc" || rrc=$?
	t1=$(now)
	[ "$rc" -eq 0 ] && [ "$rrc" -eq 0 ] ||
		{ fail_row "$name" "$d" "exit tx=$rc rx=$rrc"; return; }
	record "$name" "$d" "$t0" "$t1"
}

row_mbuffer() {
	local name="mbuffer -m 64M -s 1M" d=$TMPD/r port t0 t1 rc=0 rrc=0
	want_row "$name" || return 0
	rm -rf "$d"; mkdir -p "$d"; add_order "$name"
	port=$(free_port)
	# mbuffer -I cannot choose the bind address (it listens on all
	# addresses); "127.0.0.1:PORT" makes it accept only loopback peers
	run_rx "$d" /dev/null mbuffer -q -m 64M -s 1M -I "127.0.0.1:$port" -o -
	wait_listen "$port" "$RXPID" || { fail_row "$name" "$d" "listener did not start"; return; }
	t0=$(now)
	run_tx "$d" "$SRC" mbuffer -q -m 64M -s 1M -O "127.0.0.1:$port" || rc=$?
	wait_rx "$rc" || rrc=$?
	t1=$(now)
	[ "$rc" -eq 0 ] && [ "$rrc" -eq 0 ] ||
		{ fail_row "$name" "$d" "exit tx=$rc rx=$rrc"; return; }
	record "$name" "$d" "$t0" "$t1"
}

# Reference, no network: how fast `cat file |` alone delivers through a
# pipe on this machine (default 64 KiB pipe, reader doing 1 MiB reads).
# Every stdin-fed row is bounded by something like this unless the tool
# enlarges the pipe (F_SETPIPE_SZ) or splices.
row_pipe() {
	local name="(ref) pipe only: cat into dd bs=1M" d=$TMPD/r t0 t1 rc=0
	local FEED=cat   # always through a pipe, whatever the other rows use
	want_row "$name" || return 0
	rm -rf "$d"; mkdir -p "$d"; add_order "$name"
	t0=$(now)
	run_tx "$d" "$SRC" dd bs=1M of=/dev/null status=none || rc=$?
	t1=$(now)
	[ "$rc" -eq 0 ] || { fail_row "$name" "$d" "exit $rc"; return; }
	record "$name" "$d" "$t0" "$t1"
}

# Reference, no network: the disk's own file->file ceiling, O_DIRECT read
# of the source piped into an O_DIRECT write of a destination in the same
# scratch directory (what the rdxfer file->file row does, minus TCP)
row_disk() {
	local name="(ref) disk only: dd iflag=direct into dd oflag=direct" d=$TMPD/r t0 t1 rc=0
	want_row "$name" || return 0
	rm -rf "$d"; mkdir -p "$d"; add_order "$name"
	rm -f "$TMPD/dst.bin"
	t0=$(now)
	# shellcheck disable=SC2016  # $1/$2 are the inner shell's arguments
	run_tx "$d" - sh -c 'dd if="$1" bs=4M iflag=direct status=none |
		dd of="$2" bs=4M oflag=direct iflag=fullblock status=none' sh "$SRC" "$TMPD/dst.bin" || rc=$?
	t1=$(now)
	rm -f "$TMPD/dst.bin"
	[ "$rc" -eq 0 ] || { fail_row "$name" "$d" "exit $rc"; return; }
	record "$name" "$d" "$t0" "$t1"
}

# row_rdx NAME MODE [rdsend options...]; MODE = stream | file
row_rdx() {
	local name=$1 mode=$2 d=$TMPD/r port t0 t1 rc=0 rrc=0 got jf
	shift 2
	want_row "$name" || return 0
	rm -rf "$d"; mkdir -p "$d"; add_order "$name"
	[ "$have_rdx" -eq 1 ] || { R_NOTE[$name]="skipped: no binaries"; return 0; }
	local rxopts=() o
	for o in "$@"; do [ "$o" = --encrypt ] && rxopts+=(--encrypt); done
	port=$(free_port)
	if [ "$mode" = file ]; then
		rm -f "$TMPD/dst.bin"
		run_rx "$d" "$d/rx.out" "$RDRECV" --json --timeout 30 "${rxopts[@]}" "$port" "$TMPD/dst.bin"
		jf=$d/rx.out   # rdrecv writing a file: --json on stdout
	else
		run_rx "$d" /dev/null "$RDRECV" --json --timeout 30 "${rxopts[@]}" "$port"
		jf=$d/rx.err   # rdrecv writing data to stdout: --json on stderr
	fi
	wait_listen "$port" "$RXPID" || { fail_row "$name" "$d" "rdrecv did not listen on $port"; return; }
	t0=$(now)
	if [ "$mode" = file ]; then
		run_tx "$d" - "$RDSEND" --json --timeout 30 "$@" 127.0.0.1 "$port" "$SRC" || rc=$?
	else
		run_tx "$d" "$SRC" "$RDSEND" --json --timeout 30 "$@" 127.0.0.1 "$port" || rc=$?
	fi
	wait_rx "$rc" || rrc=$?
	t1=$(now)
	[ "$rc" -eq 0 ] && [ "$rrc" -eq 0 ] ||
		{ fail_row "$name" "$d" "exit rdsend=$rc rdrecv=$rrc"; return; }
	got=$(json_num bytes "$jf")
	[ "$got" = "$BYTES" ] ||
		{ fail_row "$name" "$d" "rdrecv --json bytes='$got', want $BYTES"; return; }
	# the mode asked for must be the mode rdrecv reports
	local want_streams=1 want_c=false want_e=false prev=""
	for o in "$@"; do
		[ "$prev" = --streams ] && want_streams=$o
		[ "$o" = --compress ] && want_c=true
		[ "$o" = --encrypt ] && want_e=true
		prev=$o
	done
	grep -q "\"streams\":${want_streams}[,}]" "$jf" &&
		grep -q "\"compress\":$want_c" "$jf" && grep -q "\"encrypt\":$want_e" "$jf" ||
		{ fail_row "$name" "$d" "rdrecv --json does not report streams=$want_streams compress=$want_c encrypt=$want_e"; return; }
	if [ "$mode" = file ]; then
		cmp -s "$SRC" "$TMPD/dst.bin" ||
			{ fail_row "$name" "$d" "destination differs from source"; return; }
		rm -f "$TMPD/dst.bin"
	fi
	record "$name" "$d" "$t0" "$t1"
}

# Pre-flight: a small odd-sized transfer through each variant, checked
# with wc -c and cmp, so a broken build fails fast and loudly.
preflight() {
	local d=$TMPD/pf small=$TMPD/small.bin port rc rrc n args
	mkdir -p "$d"
	head -c $((3 * 1024 * 1024 + 12345)) "$SRC" >"$small"
	for args in "" "--streams $STREAMS" "--compress" "--encrypt"; do
		port=$(free_port)
		local rxopts=()
		[ "$args" = --encrypt ] && rxopts=(--encrypt)
		timeout -k 2 30 "$RDRECV" --timeout 10 "${rxopts[@]}" "$port" \
			</dev/null >"$d/out" 2>"$d/rx.err" &
		RXPID=$!; LIVE_RX=$RXPID
		if ! wait_listen "$port" "$RXPID"; then
			log "preflight [$args]: rdrecv did not listen"; sed 's/^/    /' "$d/rx.err" >&2
			return 1
		fi
		rc=0; rrc=0
		# shellcheck disable=SC2086
		timeout -k 2 30 "$RDSEND" --timeout 10 $args 127.0.0.1 "$port" \
			<"$small" >/dev/null 2>"$d/tx.err" || rc=$?
		wait_rx "$rc" || rrc=$?
		n=$(wc -c <"$d/out")
		if [ "$rc" -ne 0 ] || [ "$rrc" -ne 0 ] || ! cmp -s "$small" "$d/out"; then
			log "preflight [rdsend ${args:-(plain)}]: rdsend rc=$rc rdrecv rc=$rrc, got $n of $(stat -c %s "$small") bytes$(cmp -s "$small" "$d/out" || echo ', content differs')"
			sed 's/^/    rdsend: /' "$d/tx.err" >&2
			sed 's/^/    rdrecv: /' "$d/rx.err" >&2
			PREFLIGHT_FAIL+=("rdsend ${args:-(plain)}")
		else
			log "preflight [rdsend ${args:-(plain)}]: ok ($n bytes, identical)"
		fi
	done
	rm -rf "$d" "$small"
}

# ---------------------------------------------------------------- main
[ "$FEED" = file ] && SRC_DESC=${SRC_DESC/ fed from page cache with cat/ as stdin (< file, no pipe), from page cache}
log "source: $SRC_DESC"
log "size $BYTES bytes per row, runs $RUNS, timeout ${TIMEOUT}s per process, scratch $TMPD"
PREFLIGHT_FAIL=()
if [ "$have_rdx" -eq 1 ]; then
	log "rdxfer: $("$RDSEND" --version 2>&1 | head -n1)"
	preflight || have_rdx=0
fi

for run in $(seq 1 "$RUNS"); do
	[ "$RUNS" -gt 1 ] && log "--- run $run/$RUNS"
	row_iperf3
	row_rdx "rdsend 1 stream" stream
	row_rdx "rdsend $STREAMS streams" stream --streams "$STREAMS"
	row_rdx "rdsend --compress" stream --compress
	row_rdx "rdsend --encrypt" stream --encrypt
	row_rdx "rdsend file->file" file
	row_socat
	row_nc
	row_mbuffer
	row_pipe
	row_disk
done

# ---------------------------------------------------------------- report
gbs() { awk -v b="$BYTES" -v w="$1" 'BEGIN {printf "%.2f", b / w / 1e9}'; }
ref=${R_WALL["iperf3 -l 1M"]:-}
echo
echo "rdxfer stream bench, $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, $(uname -r), loopback 127.0.0.1"
echo "data: $BYTES bytes per row; source: $SRC_DESC (iperf3 sends from its own buffer)"
echo
echo "| tool | GB/s | ratio to iperf3 | CPU s | peak RSS MiB |"
echo "|---|---:|---:|---:|---:|"
for n in "${ORDER[@]}"; do
	if [ -n "${R_WALL[$n]:-}" ]; then
		g=$(gbs "${R_WALL[$n]}")
		if [ -n "$ref" ]; then
			ratio=$(awk -v a="${R_WALL[$n]}" -v r="$ref" 'BEGIN {printf "%.2f", r / a}')
		else
			ratio=n/a
		fi
		rss=$(awk -v k="${R_RSS[$n]}" 'BEGIN {printf "%.1f", k / 1024}')
		echo "| $n | $g | $ratio | ${R_CPU[$n]} | $rss |"
	else
		echo "| $n | ${R_NOTE[$n]:-n/a} | | | |"
	fi
done
echo
if [ -n "${IPERF_JSON_GBS:-}" ]; then
	line="iperf3 self-reported (-J, data phase only): $IPERF_JSON_GBS GB/s"
	if [ -n "${R_WALL["rdsend 1 stream"]:-}" ]; then
		line+="; rdsend 1 stream / that = $(awk -v g="$(gbs "${R_WALL["rdsend 1 stream"]}")" -v r="$IPERF_JSON_GBS" 'BEGIN {printf "%.2f", g / r}')"
	fi
	echo "$line"
fi
[ ${#PREFLIGHT_FAIL[@]} -eq 0 ] || echo "PREFLIGHT FAILED: ${PREFLIGHT_FAIL[*]}"
[ ${#FAILED[@]} -eq 0 ] || echo "FAILED ROWS: ${FAILED[*]}"

one=${R_WALL["rdsend 1 stream"]:-}
soc=${R_WALL["socat -b 1048576"]:-}
if [ -n "$one" ] && [ -n "$ref" ] && [ -n "$soc" ]; then
	ri=$(awk -v a="$one" -v r="$ref" 'BEGIN {printf "%.2f", r / a}')
	rs=$(awk -v a="$one" -v r="$soc" 'BEGIN {printf "%.2f", r / a}')
	vi=$(awk -v x="$ri" 'BEGIN {print (x >= 0.9) ? "PASS" : "FAIL"}')
	vs=$(awk -v x="$rs" 'BEGIN {print (x >= 1.5) ? "PASS" : "FAIL"}')
	echo "rdsend 1 stream: ${ri} x iperf3 (goal >= 0.9: $vi), ${rs} x socat (goal >= 1.5: $vs)"
else
	echo "rdsend 1 stream vs iperf3/socat: not available (missing row)"
fi
[ ${#FAILED[@]} -eq 0 ] && [ ${#PREFLIGHT_FAIL[@]} -eq 0 ]
