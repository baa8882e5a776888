#!/usr/bin/env bash
# bench/tree.sh -- the tree path alone, two builds side by side:
# rdsend -r -> rdrecv -r over 127.0.0.1 (no SSH, no network namespace),
# each end timed on its own, the builds' runs interleaved so that a slow
# spell of the machine falls on both.  What rdcp -r's tree row costs
# besides SSH and the far end's start.
#
# Usage:   A=/path/to/old/build bash bench/tree.sh     # old against build/
#          bash bench/tree.sh                          # build/ alone
#
# Environment (all optional):
#   A, B          directories holding rdsend and rdrecv (B defaults to
#                 build/; without A only B runs); copied first, so a
#                 rebuild during the run changes nothing
#   COUNT=20000   files, 4..64 KiB each (bench/rdcp.sh's tree, same bytes)
#   PER_DIR=1000  files to a directory (below 1000: subdirectories of
#                 PER_DIR files each, the many-directory case)
#   RUNS=3        runs of each build
#   OPTS          extra options for both ends, split on spaces
#                 (e.g. OPTS='--io-threads 8')
#   BENCH_TMPDIR  parent of the scratch directory (default /var/tmp);
#                 /dev/shm keeps the disk out of it
#   TIMEOUT=600   seconds one transfer may take
#
# Per run: wall seconds of rdsend (start to exit), user+sys CPU seconds of
# each end, and the receiver's minor page faults.  The first copy of each
# build is compared with the tree (diff -r) before any number is kept.
# Each copy is removed before the next run of the same build.
# shellcheck source=bench/lib.bash
. "$(dirname "${BASH_SOURCE[0]}")/lib.bash"
bench_init tree

COUNT=${COUNT:-20000}
PER_DIR=${PER_DIR:-1000}
TIMEOUT=${TIMEOUT:-600}
read -r -a EXTRA <<<"${OPTS:-}"
[[ $COUNT =~ ^[1-9][0-9]*$ ]] || die "COUNT must be a positive integer"
[[ $PER_DIR =~ ^[1-9][0-9]*$ ]] || die "PER_DIR must be a positive integer"
[[ $RUNS =~ ^[1-9][0-9]*$ ]] || die "RUNS must be a positive integer"
need_cmds python3 openssl diff timeout

builds=()
[ -z "${A:-}" ] || builds+=(A)
builds+=(B)
declare -A DIR
for b in "${builds[@]}"; do
	src=${!b:-$BENCH_REPO/build}
	{ [ -x "$src/rdsend" ] && [ -x "$src/rdrecv" ]; } || die "no rdsend/rdrecv in $src"
	mkdir -p "$TMPD/$b"
	cp "$src/rdsend" "$src/rdrecv" "$TMPD/$b/"
	DIR[$b]=$src
done

TREE=$TMPD/tree
log "a tree of $COUNT files, $PER_DIR to a directory, in $TMPD"
mktree_bench "$TREE" "$COUNT" "$PER_DIR"
find "$TREE" -type f -exec cat {} + >/dev/null

# one_run BUILD N: one transfer; prints "wall send_cpu recv_cpu recv_minflt"
one_run() {
	local b=$1 n=$2 port out=$TMPD/out.$1 rp rc=0 t0 t1
	rm -rf "$out"
	mkdir "$out"
	port=$((20000 + RANDOM % 20000))
	timeout -k 5 "$TIMEOUT" /usr/bin/time -o "$TMPD/recv.time" -f '%U %S %R' \
		"$TMPD/$b/rdrecv" -r --wait 30 "${EXTRA[@]}" "$port" bench-key "$out" \
		</dev/null >"$TMPD/recv.err" 2>&1 &
	rp=$!
	sleep 0.3
	t0=$(now)
	timeout -k 5 "$TIMEOUT" /usr/bin/time -o "$TMPD/send.time" -f '%U %S' \
		"$TMPD/$b/rdsend" -r "${EXTRA[@]}" 127.0.0.1 "$port" bench-key "$TREE" \
		</dev/null >"$TMPD/send.err" 2>&1 || rc=$?
	t1=$(now)
	wait "$rp" || rc=$((rc ? rc : $?))
	if [ "$rc" -ne 0 ]; then
		cat "$TMPD/send.err" "$TMPD/recv.err" >&2
		die "build $b run $n failed (exit $rc)"
	fi
	if [ "$n" -eq 1 ]; then
		diff -r "$TREE" "$out/tree" >/dev/null || die "build $b: the copy differs from the tree"
	fi
	awk -v a="$t0" -v b="$t1" '
		FNR == 1 && FILENAME ~ /send/ { s = $1 + $2 }
		FNR == 1 && FILENAME ~ /recv/ { r = $1 + $2; f = $3 }
		END { printf "%.3f %.2f %.2f %d\n", b - a, s, r, f }' \
		"$TMPD/send.time" "$TMPD/recv.time"
}

declare -A RES
for n in $(seq "$RUNS"); do
	for b in "${builds[@]}"; do
		r=$(one_run "$b" "$n")
		log "$b run $n: wall, send CPU, recv CPU (s), recv minor faults: $r"
		RES[$b]+="$r"$'\n'
	done
done

echo "tree: $COUNT files of 4-64 KiB, $PER_DIR to a directory; $RUNS run(s) each, interleaved; ${OPTS:+options: $OPTS; }under $(dirname "$TMPD")"
echo
echo "| build | wall s | rdsend CPU s | rdrecv CPU s | rdrecv minor faults |"
echo "|---|---:|---:|---:|---:|"
for b in "${builds[@]}"; do
	printf '%s' "${RES[$b]}" | awk -v name="${DIR[$b]}" '
		function span(i) { return (lo[i] == hi[i]) ? lo[i] : lo[i] "-" hi[i] }
		{ for (i = 1; i <= 4; i++) { if (NR == 1 || $i < lo[i]) lo[i] = $i; if (NR == 1 || $i > hi[i]) hi[i] = $i } }
		END { printf "| %s | %s | %s | %s | %s |\n", name, span(1), span(2), span(3), span(4) }'
done
