#!/usr/bin/env bash
# bench/bigfile.sh -- a file too big for memory (issue 26, "Too big for
# memory"): rdsend -> rdrecv over 127.0.0.1 with rdrecv in a memory
# cgroup of LIMIT bytes, the file SIZE bytes (4 x LIMIT), against a plain
# page-cache writer in the same cgroup.  While each row runs, dirty pages
# are sampled once a second (the system's and the cgroup's, with `vmstat
# 1`), and a probe stands for the machine's other work: every 0.2 s a
# 4 KiB write + fdatasync and a 4 KiB read of an uncached file, on the
# same file system, outside the cgroup.
#
# Usage:   bash bench/bigfile.sh                 # LIMIT=1G, SIZE=4G
#          LIMIT=256M bash bench/bigfile.sh      # quick run (1 GiB file)
#
# Needs root (a memory cgroup; caches are dropped between rows).
#
# Environment (all optional):
#   LIMIT=1G       the cgroup's memory limit (v2 memory.max, or v1
#                  memory.limit_in_bytes where only v1's controller is)
#   SIZE=4xLIMIT   bytes of the file; suffixes K M G T (powers of 1024)
#   SRC_FILE       use this file as the source (its size overrides SIZE)
#   RDSEND, RDRECV the binaries (default build/rdsend, build/rdrecv)
#   ONLY=regex     run only the rows whose name matches
#   TIMEOUT        seconds one transfer may take (default 120 + 1 s per
#                  25 MB)
#   PROBE_S=0.2    seconds between two probes
#   TRACE_EVERY=2  the condensed traces print every Nth second
#   BENCH_TMPDIR   parent of the scratch directory (default /var/tmp)
#   TRACE_DIR      where the full per-second traces are kept (default a
#                  new directory rdxfer-bigfile-traces.* under
#                  BENCH_TMPDIR; it is not removed)
#
# Rows, each receiving the whole file into DST in the scratch directory,
# every receiving process in the cgroup, rdsend outside it:
#   rdrecv (auto, the default)  rdrecv -v PORT KEY DST
#   rdrecv --direct always      O_DIRECT with all four file writers at once
#                               (auto's O_DIRECT goes one write at a time):
#                               what a deeper queue does to the probe
#   rdrecv --direct never       buffered, paced with sync_file_range
#   rdrecv - | dd (unpaced)     rdrecv -v PORT KEY - | dd of=DST bs=1M: the
#                               baseline, a plain page-cache writer
#   cp (unpaced)                cp SRC DST, no network
#   (ref) dd oflag=direct       dd if=SRC of=DST bs=4M oflag=direct, no
#                               network: a plain O_DIRECT writer, to tell
#                               what O_DIRECT at the disk's speed does to
#                               the probe from what rdrecv's writes do
#
# Before each row: DST removed, `sync`, caches dropped, then the source
# read once (outside the cgroup) so that rdsend and cp read it from
# memory in every row and the disk only writes.  The monitors start 1 s
# before the sender.
#
# Per row:
#   s          from starting the sender (cp) until both ends exited;
#              GB/s = bytes / s / 1e9
#   synced s   s plus a `sync` of the file system right after (what the
#              writer left dirty); × dd = the baseline's / the row's
#   Dirty+WB   Dirty + Writeback of /proc/meminfo, and the cgroup's
#              dirty + writeback (memory.stat: file_dirty/file_writeback,
#              v1 total_dirty/total_writeback), peak and mean in MiB over
#              the samples from the sender's start until synced
#   probe      p50 / p99 / max milliseconds of the write + fdatasync and
#              of the read, over the same window
#   policy     what rdrecv -v said it chose for the file, and why
# Every copy is compared with the source (cmp) after its row.
#
# The traces (TRACE_DIR/ROW.trace, one line a second: second, Dirty,
# Writeback, the cgroup's dirty, writeback and page cache in MiB, vmstat's
# bo (MB/s) and wa (%), the probe's worst write and read in ms that
# second; ROW.vmstat, ROW.probe: the raw files) are kept; the condensed
# trace of the auto row and the baseline row is printed last.  The memory
# figures come from /proc/meminfo and memory.stat, not from vmstat's own
# columns (procps-ng 4.0.2's vmstat repeated its first free/cache figures
# on every line on the 2-core VM); vmstat gives bo and wa.
# shellcheck source=bench/lib.bash
. "$(dirname "${BASH_SOURCE[0]}")/lib.bash"
bench_init bigfile

RDSEND=${RDSEND:-$BENCH_REPO/build/rdsend}
RDRECV=${RDRECV:-$BENCH_REPO/build/rdrecv}
LIMIT_B=$(to_bytes "${LIMIT:-1G}")
PROBE_S=${PROBE_S:-0.2}
TRACE_EVERY=${TRACE_EVERY:-2}
KEY=bench-bigfile-key
[ "$(id -u)" -eq 0 ] || die "needs root (a memory cgroup, drop_caches)"
{ [ -x "$RDSEND" ] && [ -x "$RDRECV" ]; } || die "no $RDSEND / $RDRECV (make first)"
[[ $TRACE_EVERY =~ ^[1-9][0-9]*$ ]] || die "TRACE_EVERY must be a positive integer"
need_cmds python3 openssl vmstat stdbuf ss cmp timeout dd

# ---------------------------------------------------------------- cgroup
# Made once for the run, removed on every exit (after the row's processes,
# which bench_cleanup has taken down by then).
CG_NAME=rdx-bigfile-$$
CG=
if grep -qw memory /sys/fs/cgroup/cgroup.controllers 2>/dev/null; then
	CG=/sys/fs/cgroup/$CG_NAME CG_V=2
	mkdir "$CG" || die "cannot make the cgroup $CG"
	BENCH_CLEANUPS+=(cg_remove)
	echo "$LIMIT_B" >"$CG/memory.max" || die "cannot set $CG/memory.max"
	CG_DIRTY=file_dirty CG_WB=file_writeback CG_FILE=file
elif [ -d /sys/fs/cgroup/memory ]; then
	CG=/sys/fs/cgroup/memory/$CG_NAME CG_V=1
	mkdir "$CG" || die "cannot make the cgroup $CG"
	BENCH_CLEANUPS+=(cg_remove)
	echo "$LIMIT_B" >"$CG/memory.limit_in_bytes" || die "cannot set $CG/memory.limit_in_bytes"
	CG_DIRTY=total_dirty CG_WB=total_writeback CG_FILE=total_cache
else
	die "no memory cgroup controller (v2 or v1) here"
fi

# cg_remove: whatever is left in the cgroup is a process of this run
# (the row's receiver); end it by its id, then remove the cgroup.
cg_remove() {
	local pid
	for _ in 1 2 3 4 5 6 7 8 9 10; do
		[ -s "$CG/cgroup.procs" ] || break
		while read -r pid; do kill -TERM "$pid" 2>/dev/null || true; done <"$CG/cgroup.procs"
		sleep 0.5
	done
	rmdir "$CG" 2>/dev/null || log "WARNING: could not remove $CG"
}

printf '#!/bin/sh\necho $$ >"%s/cgroup.procs" || exit 99\nexec "$@"\n' "$CG" >"$TMPD/incg"
chmod +x "$TMPD/incg"

# ---------------------------------------------------------------- source
if [ -n "${SRC_FILE:-}" ]; then
	SRC=$SRC_FILE
	[ -f "$SRC" ] || die "SRC_FILE=$SRC is not a file"
	BYTES=$(stat -c %s "$SRC")
else
	BYTES=$(to_bytes "${SIZE:-$((4 * LIMIT_B))}")
	SRC=$TMPD/src.bin
fi
TIMEOUT=${TIMEOUT:-$((120 + BYTES / 25000000))}
avail=$(df -P -B1 "$TMPD" | awk 'NR == 2 {print $4}')
need=$((BYTES + 512 * 1024 * 1024))
[ -n "${SRC_FILE:-}" ] || need=$((need + BYTES))
[ "$avail" -gt "$need" ] || die "need $need bytes free under $TMPD, have $avail"
if [ -z "${SRC_FILE:-}" ]; then
	log "generating $BYTES random bytes in $SRC"
	mkdata "$SRC" "$BYTES"
fi
DST=$TMPD/dst.bin
# the probe's files: one it writes and fdatasyncs, one it reads uncached
dd if=/dev/urandom of="$TMPD/probe.r" bs=1M count=64 status=none
: >"$TMPD/probe.w"

TRACE_DIR=${TRACE_DIR:-$(mktemp -d "${BENCH_TMPDIR:-/var/tmp}/rdxfer-bigfile-traces.XXXXXX")}
mkdir -p "$TRACE_DIR"

# ---------------------------------------------------------------- monitors
# mon.py sample CGSTAT DIRTY WB FILE: one line a second from its start,
#   "epoch Dirty Writeback cg_dirty cg_writeback cg_file" (bytes)
# mon.py probe WFILE RFILE PERIOD: one line a probe, "epoch write_ms read_ms"
cat >"$TMPD/mon.py" <<-'EOF'
	import mmap, os, sys, time
	def meminfo():
	    v = {}
	    with open("/proc/meminfo") as f:
	        for line in f:
	            k, rest = line.split(":", 1)
	            v[k] = int(rest.split()[0]) * 1024
	    return v
	def cgstat(path, keys):
	    v = dict.fromkeys(keys, 0)
	    with open(path) as f:
	        for line in f:
	            k, n = line.split()
	            if k in v:
	                v[k] = int(n)
	    return [v[k] for k in keys]
	def sample(path, *keys):
	    t0 = time.time()
	    k = 0
	    while True:
	        k += 1
	        time.sleep(max(0, t0 + k - time.time()))
	        m = meminfo()
	        print("%.3f %d %d %d %d %d" % (time.time(), m["Dirty"], m["Writeback"],
	                                       *cgstat(path, keys)), flush=True)
	def probe(wpath, rpath, period):
	    period = float(period)
	    w = os.open(wpath, os.O_WRONLY)
	    r = os.open(rpath, os.O_RDONLY)
	    pages = os.fstat(r).st_size // 4096
	    buf = mmap.mmap(-1, 4096)
	    rnd = int.from_bytes(os.urandom(4), "big")
	    t0 = time.time()
	    i = 0
	    while True:
	        a = time.monotonic()
	        os.pwrite(w, b"p" * 4096, (i % 256) * 4096)
	        os.fdatasync(w)
	        b = time.monotonic()
	        # not in the cache: dropped (clean pages go at once) before the read
	        os.posix_fadvise(r, 0, 0, os.POSIX_FADV_DONTNEED)
	        rnd = (rnd * 1103515245 + 12345) % 2**31
	        os.preadv(r, [buf], (rnd % pages) * 4096)
	        c = time.monotonic()
	        print("%.3f %.2f %.2f" % (time.time(), (b - a) * 1e3, (c - b) * 1e3), flush=True)
	        i += 1
	        time.sleep(max(0, t0 + i * period - time.time()))
	{"sample": sample, "probe": probe}[sys.argv[1]](*sys.argv[2:])
EOF

MON_PIDS=()
mon_start() {
	local base=$1
	python3 "$TMPD/mon.py" sample "$CG/memory.stat" "$CG_DIRTY" "$CG_WB" "$CG_FILE" \
		>"$base.mem" 2>"$base.mon.err" &
	MON_PIDS+=($!)
	stdbuf -oL vmstat -n 1 >"$base.vmstat" 2>>"$base.mon.err" &
	MON_PIDS+=($!)
	python3 "$TMPD/mon.py" probe "$TMPD/probe.w" "$TMPD/probe.r" "$PROBE_S" \
		>"$base.probe" 2>>"$base.mon.err" &
	MON_PIDS+=($!)
}
mon_stop() {
	local p
	for p in "${MON_PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
	for p in "${MON_PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
	MON_PIDS=()
}
BENCH_CLEANUPS+=(mon_stop)

# ---------------------------------------------------------------- rows
# prepare: every row starts with the destination gone, nothing dirty,
# the caches dropped and the source read back into memory
prepare() {
	rm -f "$DST"
	sync
	echo 3 >/proc/sys/vm/drop_caches
	cat "$SRC" >/dev/null
}

wait_listen() {

	for _ in $(seq 100); do
		ss -Hltn "sport = :$1" | grep -q . && return 0
		sleep 0.1
	done
	return 1
}

declare -A R_S R_SYNC R_POL R_STATS
ROWS=()

# run_row NAME KIND: KIND recv (rdrecv into DST, extra options in
# ROW_OPTS), pipe (rdrecv - | dd) or local (ROW_OPTS is the command,
# no network)
run_row() {
	local name=$1 kind=$2 slug port rp rc=0 t0 t1 t2 base
	want "$name" || return 0
	slug=$(tr -c 'a-z0-9\n' '-' <<<"${name,,}" | tr -s '-')
	slug=${slug%-} slug=${slug#-}
	base=$TRACE_DIR/$slug
	log "row: $name"
	prepare
	port=$((20000 + RANDOM % 20000))
	rp=
	case $kind in
	recv)
		timeout -k 5 "$TIMEOUT" "$TMPD/incg" "$RDRECV" -v --wait 30 "${ROW_OPTS[@]}" \
			"$port" "$KEY" "$DST" </dev/null >"$base.recv.out" 2>"$base.recv.err" &
		rp=$!
		;;
	pipe)
		# shellcheck disable=SC2016 # $1.. are the inner shell's
		timeout -k 5 "$TIMEOUT" "$TMPD/incg" sh -c \
			'"$1" -v --wait 30 "$2" "$3" - | dd of="$4" bs=1M iflag=fullblock status=none' \
			sh "$RDRECV" "$port" "$KEY" "$DST" </dev/null >"$base.recv.out" 2>"$base.recv.err" &
		rp=$!
		;;
	esac
	BENCH_LIVE=$rp
	if [ -n "$rp" ]; then
		wait_listen "$port" || die "$name: rdrecv is not listening on $port"
	fi
	mon_start "$base"
	sleep 1
	t0=$(now)
	if [ "$kind" = local ]; then
		timeout -k 5 "$TIMEOUT" "$TMPD/incg" "${ROW_OPTS[@]}" </dev/null \
			>"$base.recv.out" 2>"$base.recv.err" || rc=$?
	else
		timeout -k 5 "$TIMEOUT" "$RDSEND" 127.0.0.1 "$port" "$KEY" "$SRC" </dev/null \
			>"$base.send.out" 2>"$base.send.err" || rc=$?
		wait "$rp" || rc=$((rc ? rc : $?))
	fi
	BENCH_LIVE=
	t1=$(now)
	sync -f "$DST"
	t2=$(now)
	sleep 1
	mon_stop
	if [ "$rc" -ne 0 ]; then
		cat "$base".*.err >&2 || true
		die "$name: exit status $rc"
	fi
	cmp "$SRC" "$DST" || die "$name: the copy differs from the source"
	rm -f "$DST"
	ROWS+=("$name")
	R_S[$name]=$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.2f", b - a}')
	R_SYNC[$name]=$(awk -v a="$t0" -v b="$t2" 'BEGIN {printf "%.2f", b - a}')
	R_POL[$name]=$(sed -n "s/^rdrecv: writing '.*': //p" "$base.recv.err" | head -n1)
	[ -n "${R_POL[$name]}" ] || R_POL[$name]="—"
	R_STATS[$name]=$(stats "$base" "$t0" "$t2")
	mk_trace "$base"
	log "$name: ${R_S[$name]} s, synced ${R_SYNC[$name]} s; ${R_POL[$name]}"
}

# pctl: p50 / p99 / max of the sorted numbers on stdin
pctl() {
	awk 'function at(p,   i) { i = int(p * NR + 0.999999); return v[i < 1 ? 1 : i] }
		{ v[NR] = $1 }
		END { if (NR) printf "%.1f / %.1f / %.1f", at(0.5), at(0.99), v[NR]; else printf "-" }'
}

# stats BASE T0 T2: "sys peak / mean | cg peak / mean | write p50 / p99 /
# max | read p50 / p99 / max" over the samples and probes in [T0, T2 + 1]
stats() {
	local col
	awk -v a="$2" -v b="$3" '
		$1 >= a && $1 <= b + 1 {
			s = ($2 + $3) / 1048576; c = ($4 + $5) / 1048576; n++
			ss += s; cs += c; if (s > sp) sp = s; if (c > cp) cp = c
		}
		END { printf "%.0f / %.0f | %.0f / %.0f", sp, n ? ss / n : 0, cp, n ? cs / n : 0 }' "$1.mem"
	for col in 2 3; do
		printf ' | '
		awk -v a="$2" -v b="$3" -v c="$col" '$1 >= a && $1 <= b + 1 { print $c }' "$1.probe" |
			sort -n | pctl
	done
}

# mk_trace BASE: BASE.trace, one line a second (see the header)
mk_trace() {
	awk '
		FILENAME ~ /\.mem$/ { if (!t0) t0 = $1 - 1; k = FNR; m[k] = sprintf("%6.0f %6.0f %6.0f %6.0f %6.0f", $2 / 1048576, $3 / 1048576, $4 / 1048576, $5 / 1048576, $6 / 1048576); n = k }
		FILENAME ~ /\.vmstat$/ {
			if ($1 == "r") { for (i = 1; i <= NF; i++) col[$i] = i; next }
			if (!("bo" in col) || $1 !~ /^[0-9]+$/) next
			# the first line is since boot; line j covers second j - 1 .. j
			if (++vl > 1) { bo[vl - 1] = $col["bo"] / 1000; wa[vl - 1] = $col["wa"] }
		}
		FILENAME ~ /\.probe$/ {
			k = int($1 - t0) + 1
			if ($2 > pw[k]) pw[k] = $2
			if ($3 > pr[k]) pr[k] = $3
		}
		END {
			print "#  s  Dirty     WB cgDirty   cgWB cgFile  bo MB/s  wa %  probe w ms  probe r ms"
			for (k = 1; k <= n; k++)
				printf "%4d %s %8.0f %5s %11.1f %11.1f\n", k, m[k], bo[k], wa[k], pw[k], pr[k]
		}' "$1.mem" "$1.vmstat" "$1.probe" >"$1.trace"
}

log "cgroup v$CG_V $CG, limit $LIMIT_B bytes; file $BYTES bytes; traces in $TRACE_DIR"
ROW_OPTS=()
run_row "rdrecv (auto, the default)" recv
ROW_OPTS=(--direct always)
run_row "rdrecv --direct always" recv
ROW_OPTS=(--direct never)
run_row "rdrecv --direct never" recv
ROW_OPTS=()
run_row "rdrecv - | dd (unpaced)" pipe
ROW_OPTS=(cp "$SRC" "$DST")
run_row "cp (unpaced)" local
ROW_OPTS=(dd if="$SRC" of="$DST" bs=4M oflag=direct status=none)
run_row "(ref) dd oflag=direct" local
rm -f "$DST"

# ---------------------------------------------------------------- report
BASE_ROW="rdrecv - | dd (unpaced)"
echo "bigfile: $BYTES bytes ($(awk -v b="$BYTES" 'BEGIN {printf "%.2f", b / 2^30}') GiB) into a memory cgroup (v$CG_V) of $LIMIT_B bytes ($(awk -v b="$LIMIT_B" 'BEGIN {printf "%.2f", b / 2^30}') GiB); MemAvailable $(awk '/^MemAvailable/ {printf "%.1f GiB", $2 / 2^20}' /proc/meminfo) outside it; under $(dirname "$TMPD") ($(stat -f -c %T "$TMPD")); probe every $PROBE_S s"
echo
echo "| row | s | GB/s | synced s | × dd | × dd synced | Dirty+WB MiB peak / mean | cgroup dirty+WB MiB peak / mean | probe write+fdatasync ms p50 / p99 / max | probe read ms p50 / p99 / max |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
for r in "${ROWS[@]}"; do
	x=- xs=-
	if [ -n "${R_S[$BASE_ROW]:-}" ]; then
		x=$(ratio "${R_S[$r]}" "${R_S[$BASE_ROW]}")
		xs=$(ratio "${R_SYNC[$r]}" "${R_SYNC[$BASE_ROW]}")
	fi
	printf '| %s | %s | %s | %s | %s | %s | %s |\n' "${r//|/\\|}" "${R_S[$r]}" \
		"$(awk -v b="$BYTES" -v s="${R_S[$r]}" 'BEGIN {printf "%.3f", b / s / 1e9}')" \
		"${R_SYNC[$r]}" "$x" "$xs" "${R_STATS[$r]}"
done
echo
echo "What rdrecv -v said it chose:"
echo
for r in "${ROWS[@]}"; do
	[ "${R_POL[$r]}" = "—" ] || echo "- ${r}: ${R_POL[$r]}"
done
for r in "rdrecv (auto, the default)" "$BASE_ROW"; do
	[ -n "${R_S[$r]:-}" ] || continue
	slug=$(tr -c 'a-z0-9\n' '-' <<<"${r,,}" | tr -s '-')
	slug=${slug%-} slug=${slug#-}
	echo
	echo "Trace, $r (one second in ${TRACE_EVERY}; MiB; the sender started at second 1, done at $(awk -v s="${R_S[$r]}" 'BEGIN {printf "%.0f", s + 1}'), synced at $(awk -v s="${R_SYNC[$r]}" 'BEGIN {printf "%.0f", s + 1}')):"
	echo
	echo '```'
	awk -v e="$TRACE_EVERY" 'NR == 1 || (NR - 1) % e == 0' "$TRACE_DIR/$slug.trace"
	echo '```'
done
echo
echo "full traces: $TRACE_DIR"
