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
#   RDX_ASAN_BUILD    a second build (ASan/UBSan) whose unit tests and
#               CLI transfer/fault tests run too (make check sets it)
#   RDX_ASAN_BIG_SIZE size of the big-file test in that pass (default 128M)
#   RDX_SANITIZED     set when RDX_BUILD itself is a sanitizer build (make
#               asan): tests whose behaviour ASan's runtime changes adapt
#   RDX_FUZZ_BUILD    directory of libFuzzer targets (make fuzz) to run for
#               a fixed number of inputs from a fixed seed (deterministic)
#   RDX_FUZZ_RUNS     inputs per target (default 200000)
#
# Exit status: 0 when every test passed or was skipped and at least one ran;
# 1 otherwise.
set -u

invoked_from=$PWD
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# abs_dir DIR: DIR made absolute, relative to where we were invoked if it
# exists there, else to the repository.
abs_dir() {
	case $1 in
	/*) echo "$1" ;;
	*) if [ -d "$invoked_from/$1" ]; then echo "$invoked_from/$1"; else echo "$repo/$1"; fi ;;
	esac
}

build=$(abs_dir "${RDX_BUILD:-build}")
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
# sets tap_n to how many results it held (no subshell: totals must stick).
count_tap() {
	local p f s
	p=$(grep -cE '^ok ' "$1")
	s=$(grep -ciE '^ok .*# *skip' "$1")
	f=$(grep -cE '^not ok ' "$1")
	passed=$((passed + p - s))
	skipped=$((skipped + s))
	failed=$((failed + f))
	tap_n=$((p + f))
}

matches() {
	# shellcheck disable=SC2053 # glob match on purpose
	[[ $1 == $select_glob ]]
}

# run_unit DIR LABEL: every executable in DIR/tests/unit, TAP counted.
run_unit() {
	local dir=$1 label=$2 t name rc n bad
	if [ ! -d "$dir/tests/unit" ]; then
		echo "# $label: no unit tests in $dir/tests/unit"
		return 0
	fi
	for t in "$dir"/tests/unit/*; do
		if [ ! -f "$t" ] || [ ! -x "$t" ]; then
			continue
		fi
		name=${t##*/}
		matches "$name" || continue
		echo "# $label unit: $name"
		timeout -k 5 "$unit_timeout" "$t" </dev/null | tee "$log"
		rc=${PIPESTATUS[0]}
		count_tap "$log"
		n=$tap_n
		bad=$(grep -cE '^not ok ' "$log")
		if [ "$rc" -ne 0 ] && [ "$bad" -eq 0 ]; then
			# Crashed, timed out or failed without saying which test.
			echo "not ok - $label $name exited with status $rc"
			failed=$((failed + 1))
		elif [ "$n" -eq 0 ]; then
			echo "not ok - $label $name printed no TAP results"
			failed=$((failed + 1))
		fi
	done
}

# run_cli DIR LABEL FILE...: bats on FILE... with RDX_BUILD=DIR.
run_cli() {
	local dir=$1 label=$2 rc bad
	shift 2
	[ $# -gt 0 ] || return 0
	if ! command -v bats >/dev/null 2>&1; then
		echo "not ok - bats is not installed (scripts/deps.sh test)"
		failed=$((failed + 1))
		return 0
	fi
	local args=(--tap)
	[ -n "${RDX_FILTER:-}" ] && args+=(--filter "$RDX_FILTER")
	echo "# $label cli: $*"
	RDX_BUILD=$dir bats "${args[@]}" "$@" </dev/null | tee "$log"
	rc=${PIPESTATUS[0]}
	count_tap "$log"
	bad=$(grep -cE '^not ok ' "$log")
	if [ "$rc" -ne 0 ] && [ "$bad" -eq 0 ]; then
		echo "not ok - $label bats exited with status $rc"
		failed=$((failed + 1))
	fi
}

# cli_files GLOB...: the tests/cli files RDX_TESTS selects among GLOB.
cli_files() {
	local f base
	for f in "$@"; do
		[ -f "$f" ] || continue
		base=${f##*/}
		matches "${base%.bats}" || matches "$base" || continue
		echo "$f"
	done
}

# ------------------------------------------------------------ normal build
run_unit "$build" build
mapfile -t files < <(cli_files tests/cli/*.bats)
run_cli "$build" build "${files[@]}"

# -------------------------------------------- sanitizer build (optional)
# RDX_ASAN_BUILD=DIR: also run DIR's unit tests and the CLI transfers and
# faults with DIR's binaries (ASan/UBSan).  Any sanitizer report makes the
# tool exit non-zero, which fails the test.  The big-file test shrinks to
# RDX_ASAN_BIG_SIZE (default 128M) there.
if [ -n "${RDX_ASAN_BUILD:-}" ]; then
	asan=$(abs_dir "$RDX_ASAN_BUILD")
	if [ ! -x "$asan/rdsend" ] || [ ! -x "$asan/rdrecv" ]; then
		echo "not ok - RDX_ASAN_BUILD=$asan holds no rdsend/rdrecv"
		failed=$((failed + 1))
	else
		export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
		export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
		export RDX_BIG_SIZE=${RDX_ASAN_BIG_SIZE:-128M}
		export RDX_SANITIZED=1 # tests whose behaviour ASan's runtime changes
		run_unit "$asan" asan
		mapfile -t files < <(cli_files tests/cli/transfer.bats tests/cli/faults.bats)
		run_cli "$asan" asan "${files[@]}"
		unset RDX_BIG_SIZE RDX_SANITIZED
	fi
fi

# ------------------------------------------------ fuzz targets (optional)
# Each target starts from its committed seeds in tests/fuzz/corpus/NAME and
# runs RDX_FUZZ_RUNS inputs from seed 1, so a run is repeatable; new inputs
# go to a scratch directory, never into the tree.
if [ -n "${RDX_FUZZ_BUILD:-}" ]; then
	fuzz_runs=${RDX_FUZZ_RUNS:-200000}
	for f in "$(abs_dir "$RDX_FUZZ_BUILD")"/fuzz_*; do
		[ -x "$f" ] || continue
		name=${f##*/}
		matches "$name" || continue
		scratch=$(mktemp -d "${TMPDIR:-/tmp}/rdx-fuzz.XXXXXX")
		if timeout 300 "$f" -seed=1 -runs="$fuzz_runs" -artifact_prefix="$scratch/" \
			"$scratch" "tests/fuzz/corpus/$name" >"$log" 2>&1; then
			echo "ok - fuzz $name: $fuzz_runs inputs, no crash or failed check"
			passed=$((passed + 1))
			rm -rf "$scratch"
		else
			tail -n 30 "$log"
			echo "not ok - fuzz $name (reproduce: $f $scratch/crash-*)"
			failed=$((failed + 1))
		fi
	done
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
