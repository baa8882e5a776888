#!/usr/bin/env bash
# Flake hunt (make check-stress; not part of make check): the unit and CLI
# tests of the normal build, RDX_STRESS_PASSES times over (default 5) at
# RDX_JOBS=4, with a CPU hog on every CPU beside them.  What a calm run
# hides (a race lost under load, a test that depends on timing, a random
# input that is no change one time in 256) then shows.  At the end it
# prints every test that failed even once, with how often, and each
# pass's log is kept for the failures' output.
#
# Usage: bash tests/stress.sh    (after make; RDX_BUILD as for run.sh)
#   RDX_STRESS_PASSES  passes (default 5)
#   RDX_STRESS_HOGS    CPU hogs (default: one per CPU)
#   RDX_TESTS, RDX_FILTER      as for tests/run.sh, to hunt in a subset
#
# Exit status: 0 when no test failed in any pass, 1 otherwise.
set -u

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
passes=${RDX_STRESS_PASSES:-5}
hogs=${RDX_STRESS_HOGS:-$(nproc 2>/dev/null || echo 2)}
[[ $passes =~ ^[1-9][0-9]*$ ]] || { echo "tests/stress.sh: RDX_STRESS_PASSES must be a number from 1" >&2; exit 2; }
[[ $hogs =~ ^[0-9]+$ ]] || { echo "tests/stress.sh: RDX_STRESS_HOGS must be a number" >&2; exit 2; }
logdir=$(mktemp -d "${TMPDIR:-/tmp}/rdx-stress.XXXXXX")

hog_pids=()
stop_hogs() {
	[ ${#hog_pids[@]} -eq 0 ] || kill "${hog_pids[@]}" 2>/dev/null
	hog_pids=()
}
trap stop_hogs EXIT
trap 'stop_hogs; exit 130' INT TERM
for _ in $(seq "$hogs"); do
	(exec yes >/dev/null) &
	hog_pids+=($!)
done

for pass in $(seq "$passes"); do
	echo "# stress pass $pass of $passes ($hogs CPU hogs, RDX_JOBS=4): $logdir/pass$pass.log"
	RDX_JOBS=4 bash "$repo/tests/run.sh" >"$logdir/pass$pass.log" 2>&1
	echo "# pass $pass: $(tail -n 1 "$logdir/pass$pass.log")"
done
stop_hogs

# A test's name is its "not ok" line less the number and the timing.
grep -h '^not ok ' "$logdir"/pass*.log |
	sed -E 's/^not ok [0-9]+ //; s/^- //; s/ in [0-9]+ms$//' |
	sort | uniq -c | sort -rn >"$logdir/failed"
if [ -s "$logdir/failed" ]; then
	echo "# failed at least once (times of $passes):"
	sed 's/^ *\([0-9]*\) /  \1x /' "$logdir/failed"
	echo "# their output: grep -A20 'not ok' $logdir/pass*.log"
	exit 1
fi
echo "# no test failed in $passes passes"
rm -rf "$logdir"
