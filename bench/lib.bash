# Helpers shared by the bench scripts (sourced, not run).
#
#   bench_init NAME         scratch directory $TMPD under $BENCH_TMPDIR
#                           (default /var/tmp), removed on exit with
#                           everything in BENCH_CLEANUPS run first
#   timed DIR CMD...        run CMD under timeout + /usr/bin/time; sets
#                           T_WALL T_CPU T_RSS (s, s, KiB); returns CMD's rc
#   record ROW WALL CPU RSS FARCPU   keep ROW's fastest run
#   proc_cpu PID            user+sys seconds of PID and its reaped children
#   want ROW                ROW matches $ONLY (or ONLY is empty)
#   mkdata FILE BYTES       deterministic incompressible bytes (AES-CTR
#                           keystream under a fixed key)
#   mktree_bench DIR COUNT [PER_DIR]   the trees' files of 4..64 KiB
#
# Every command runs as a background job (its own process group under
# `timeout`) followed by `wait`, so Ctrl-C reaches the trap at once.
# shellcheck disable=SC2034 # R_* and T_* are read by the scripts

set -euo pipefail
export LC_ALL=C

BENCH_REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BENCH_CLEANUPS=()
BENCH_LIVE=
ONLY=${ONLY:-}
RUNS=${RUNS:-1}
CLK_TCK=$(getconf CLK_TCK)

log() { printf '%s: %s\n' "$BENCH_NAME" "$*" >&2; }
die() {
	printf '%s: error: %s\n' "$BENCH_NAME" "$*" >&2
	exit 1
}

# to_bytes SIZE: 4G, 512M, 64K (powers of 1024) or plain bytes
to_bytes() {
	local s=$1 n mult=1
	case $s in
	*[kK]) mult=1024 n=${s%?} ;;
	*[mM]) mult=$((1024 ** 2)) n=${s%?} ;;
	*[gG]) mult=$((1024 ** 3)) n=${s%?} ;;
	*[tT]) mult=$((1024 ** 4)) n=${s%?} ;;
	*) n=$s ;;
	esac
	[[ $n =~ ^[0-9]+$ ]] || die "bad size '$s' (use e.g. 4G, 512M, 1000000)"
	echo $((n * mult))
}

# need_cmds CMD...: install the bench package group when one is missing
need_cmds() {
	local c missing=()
	for c in "$@"; do
		command -v "$c" >/dev/null 2>&1 || missing+=("$c")
	done
	[ -x /usr/bin/time ] || missing+=(/usr/bin/time)
	[ ${#missing[@]} -eq 0 ] && return 0
	log "missing: ${missing[*]}; running scripts/deps.sh bench"
	bash "$BENCH_REPO/scripts/deps.sh" bench >&2 || die "scripts/deps.sh bench failed"
	for c in "$@"; do
		command -v "$c" >/dev/null 2>&1 || die "$c still missing after scripts/deps.sh bench"
	done
}

bench_cleanup() {
	local fn
	if [ -n "$BENCH_LIVE" ]; then
		kill -TERM -- "-$BENCH_LIVE" 2>/dev/null || kill -TERM "$BENCH_LIVE" 2>/dev/null || true
		wait "$BENCH_LIVE" 2>/dev/null || true
	fi
	for fn in "${BENCH_CLEANUPS[@]}"; do
		$fn || true
	done
	[ -z "${TMPD:-}" ] || rm -rf "$TMPD"
}

bench_init() {
	BENCH_NAME=$1
	TMPD=$(mktemp -d "${BENCH_TMPDIR:-/var/tmp}/rdxfer-$1.XXXXXX")
	trap bench_cleanup EXIT
	trap 'exit 130' INT TERM
}

now() { date +%s.%N; }

# timed DIR CMD...: stdout/stderr of CMD go to DIR/out, DIR/err
timed() {
	local d=$1 rc=0 t0 t1 u s m
	shift
	mkdir -p "$d"
	t0=$(now)
	timeout -k 5 "$TIMEOUT" /usr/bin/time -o "$d/time" -f '%e %U %S %M' "$@" \
		</dev/null >"$d/out" 2>"$d/err" &
	BENCH_LIVE=$!
	wait "$BENCH_LIVE" || rc=$?
	BENCH_LIVE=
	t1=$(now)
	# the last line: GNU time may prepend "Command exited with ..."
	read -r _ u s m < <(tail -n1 "$d/time" 2>/dev/null) || true
	T_WALL=$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.3f", b - a}')
	T_CPU=$(awk -v a="${u:-0}" -v b="${s:-0}" 'BEGIN {printf "%.2f", a + b}')
	T_RSS=${m:-0}
	return "$rc"
}

# proc_cpu PID: utime+stime+cutime+cstime of PID in seconds
proc_cpu() {
	awk -v hz="$CLK_TCK" '{sub(/.*\) /, ""); printf "%.2f", ($12 + $13 + $14 + $15) / hz}' \
		"/proc/$1/stat" 2>/dev/null || echo 0
}

declare -A R_WALL R_CPU R_RSS R_FAR R_NOTE
ROWS=()
FAILED=()

add_row() {
	local r
	for r in "${ROWS[@]}"; do [ "$r" = "$1" ] && return 0; done
	ROWS+=("$1")
}

record() {
	local row=$1
	add_row "$row"
	if [ -z "${R_WALL[$row]:-}" ] ||
		awk -v a="$2" -v b="${R_WALL[$row]}" 'BEGIN {exit !(a < b)}'; then
		R_WALL[$row]=$2 R_CPU[$row]=$3 R_RSS[$row]=$4 R_FAR[$row]=$5
	fi
	log "$(printf '%-34s %8.3f s  cpu %6.2f s  rss %7d KiB  far cpu %6.2f s' "$row" "$2" "$3" "$4" "$5")"
}

# fail_row ROW DIR MSG: the row gets no number, only the failure
fail_row() {
	local row=$1 d=$2 f
	add_row "$row"
	log "FAIL $row: $3"
	for f in err out; do
		[ -s "$d/$f" ] && { log "  --- $f:"; head -c 2000 "$d/$f" | sed 's/^/    /' >&2; }
	done
	FAILED+=("$row")
	[ -n "${R_WALL[$row]:-}" ] || R_NOTE[$row]="FAILED: $3"
}

want() { [ -z "$ONLY" ] || [[ $1 =~ $ONLY ]]; }

# ratio A B: B / A to 2 places (how many times faster A is than B)
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", b / a}'; }

# speedup ROW REF: how many times faster ROW was than REF, or nothing
# when either has no time
speedup() {
	[ -n "${R_WALL[$1]:-}" ] && [ -n "${R_WALL[$2]:-}" ] || return 0
	ratio "${R_WALL[$1]}" "${R_WALL[$2]}"
}

# goal WHAT ROW REF MIN: one line, met / NOT met / not measured (with the
# rows' notes when there are)
goal() {
	local x
	x=$(speedup "$2" "$3")
	if [ -z "$x" ]; then
		echo "goal $1: not measured (${R_NOTE[$2]:-${R_NOTE[$3]:-row not run}})"
	elif awk -v x="$x" -v m="$4" 'BEGIN {exit !(x >= m)}'; then
		echo "goal $1: met ($x x)"
	else
		echo "goal $1: NOT met ($x x)"
	fi
}

# mktree_bench DIR COUNT [PER_DIR]: COUNT files, file i 4096 + (i *
# 2654435761 mod 2^32) mod 61441 bytes (4..64 KiB), the next slice of one
# AES-CTR keystream under a fixed key: the same sizes and bytes on every
# run.  1000 to a directory dNNN; with PER_DIR below 1000, PER_DIR to a
# subdirectory dNNN/sNNNNN of those.
mktree_bench() {
	python3 - "$1" "$2" "${3:-1000}" <<-'EOF' || die "could not make the tree"
		import os, subprocess, sys
		top, n, per = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
		ks = subprocess.Popen(["openssl", "enc", "-aes-128-ctr", "-nosalt", "-pbkdf2",
		                       "-pass", "pass:rdxfer-bench-tree"],
		                      stdin=open("/dev/zero", "rb"), stdout=subprocess.PIPE,
		                      stderr=subprocess.DEVNULL)
		for i in range(n):
		    d = os.path.join(top, "d%03d" % (i // 1000))
		    if per < 1000:
		        d = os.path.join(d, "s%05d" % (i // per))
		    if i % min(per, 1000) == 0:
		        os.makedirs(d, exist_ok=True)
		    size = 4096 + (i * 2654435761 % 2**32) % 61441
		    data = ks.stdout.read(size)
		    assert len(data) == size
		    with open(os.path.join(d, "f%06d" % i), "wb") as f:
		        f.write(data)
		ks.kill()
	EOF
}

mkdata() {
	openssl enc -aes-128-ctr -nosalt -pbkdf2 -pass pass:rdxfer-bench </dev/zero 2>/dev/null |
		head -c "$2" >"$1" || true
	[ "$(stat -c %s "$1")" -eq "$2" ] || die "could not generate $1"
}
