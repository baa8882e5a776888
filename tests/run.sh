#!/usr/bin/env bash
# The one test runner: unit tests, then the CLI tests, one TAP stream, then
# a closing line "N passed, N failed" (", N skipped" when some were).
#
# Usage: bash tests/run.sh            (from anywhere; paths are resolved)
#
# Environment:
#   RDX_BUILD   directory holding rdsend, rdrecv, tests/unit/* and
#               tests/badpeer (default: build)
#   RDX_TESTS   glob choosing a subset: unit binaries and tests/cli/*.bats
#               whose base name (without .bats) matches, e.g. 'faults' or
#               'trans*'; default: everything
#   RDX_FILTER  regex passed to `bats --filter` (test names)
#   RDX_UNIT_TIMEOUT  seconds one unit binary may run (default 300)
#
# Exit status: 0 when every test passed or was skipped and at least one ran;
# 1 otherwise.
set -u

invoked_from=$PWD
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${RDX_BUILD:-build}
case $build in
/*) ;;
*)
	if [ -d "$invoked_from/$build" ]; then
		build=$invoked_from/$build
	else
		build=$repo/$build
	fi
	;;
esac
export RDX_BUILD=$build
cd "$repo" || exit 1

select_glob=${RDX_TESTS:-*}
unit_timeout=${RDX_UNIT_TIMEOUT:-300}

passed=0
failed=0
skipped=0
log=$(mktemp "${TMPDIR:-/tmp}/rdx-run.XXXXXX")
trap 'rm -f "$log"' EXIT

# count_tap FILE: adds FILE's ok / not ok / skip lines to the totals and
# prints how many results it held.
count_tap() {
	local p f s
	p=$(grep -cE '^ok ' "$1")
	s=$(grep -ciE '^ok .*# *skip' "$1")
	f=$(grep -cE '^not ok ' "$1")
	passed=$((passed + p - s))
	skipped=$((skipped + s))
	failed=$((failed + f))
	echo $((p + f))
}

matches() {
	# shellcheck disable=SC2053 # glob match on purpose
	[[ $1 == $select_glob ]]
}

# ------------------------------------------------------------ unit tests
if [ -d "$build/tests/unit" ]; then
	for t in "$build"/tests/unit/*; do
		if [ ! -f "$t" ] || [ ! -x "$t" ]; then
			continue
		fi
		name=${t##*/}
		matches "$name" || continue
		echo "# unit: $name"
		timeout -k 5 "$unit_timeout" "$t" </dev/null | tee "$log"
		rc=${PIPESTATUS[0]}
		n=$(count_tap "$log")
		bad=$(grep -cE '^not ok ' "$log")
		if [ "$rc" -ne 0 ] && [ "$bad" -eq 0 ]; then
			# Crashed, timed out or failed without saying which test.
			echo "not ok - $name exited with status $rc"
			failed=$((failed + 1))
		elif [ "$n" -eq 0 ]; then
			echo "not ok - $name printed no TAP results"
			failed=$((failed + 1))
		fi
	done
else
	echo "# no unit tests in $build/tests/unit"
fi

# ------------------------------------------------------------- CLI tests
files=()
for f in tests/cli/*.bats; do
	[ -f "$f" ] || continue
	base=${f##*/}
	matches "${base%.bats}" || matches "$base" || continue
	files+=("$f")
done

if [ ${#files[@]} -gt 0 ]; then
	if ! command -v bats >/dev/null 2>&1; then
		echo "not ok - bats is not installed (scripts/deps.sh test)"
		failed=$((failed + 1))
	else
		args=(--tap)
		[ -n "${RDX_FILTER:-}" ] && args+=(--filter "$RDX_FILTER")
		echo "# cli: ${files[*]}"
		bats "${args[@]}" "${files[@]}" </dev/null | tee "$log"
		rc=${PIPESTATUS[0]}
		count_tap "$log" >/dev/null
		bad=$(grep -cE '^not ok ' "$log")
		if [ "$rc" -ne 0 ] && [ "$bad" -eq 0 ]; then
			echo "not ok - bats exited with status $rc"
			failed=$((failed + 1))
		fi
	fi
fi

summary="$passed passed, $failed failed"
[ "$skipped" -gt 0 ] && summary+=", $skipped skipped"
echo "$summary"

if [ "$failed" -gt 0 ] || [ $((passed + skipped)) -eq 0 ]; then
	exit 1
fi
# Zero tests actually run (all skipped) is not a pass either.
[ "$passed" -gt 0 ] || exit 1
exit 0
