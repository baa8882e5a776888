#!/usr/bin/env bash
# The one test runner: unit tests, then the CLI tests, one TAP stream, then
# a closing line "N passed, N failed" (", N skipped" when some were).
#
# Usage: bash tests/run.sh            (from anywhere; paths are resolved)
#
# Flaky tests: `make check-stress` (tests/stress.sh) runs the unit and CLI
# tests of the normal build five times at RDX_JOBS=4 beside a CPU hog on
# every CPU, and lists every test that failed even once, with how often
# (RDX_STRESS_PASSES, RDX_TESTS and RDX_FILTER narrow the hunt).  Run it
# after adding tests that wait on timing or on other processes.
#
# Environment:
#   RDX_BUILD   directory holding rdsend, rdrecv, tests/unit/* and
#               tests/badpeer (default: build)
#   RDX_TESTS   glob choosing a subset: unit binaries and tests/cli/*.bats
#               whose base name (without .bats) matches, e.g. 'faults' or
#               'trans*'; default: everything
#   RDX_FILTER  regex passed to `bats --filter` (test names)
#   RDX_UNIT_TIMEOUT  seconds one unit binary may run (default 300)
#   RDX_JOBS    CLI test files run at once (default: one more than the CPUs, 3 to 4;
#               1 runs them one after another).  Files run whole, each
#               test after the one before; more than one needs GNU
#               parallel (scripts/deps.sh test installs it)
#   RDX_ASAN_BUILD    a second build (ASan/UBSan) whose unit tests and
#               CLI transfer/fault/server/s3/s3check/rdcp/rdcp3 tests run too (make
#               check sets it)
#   RDX_ASAN_BIG_SIZE size of the big-file test in that pass (default 128M)
#   RDX_TSAN_BUILD    a third build (ThreadSanitizer) whose unit tests and
#               CLI transfer and tree tests run too (make check sets it)
#   RDX_SANITIZED     set when RDX_BUILD itself is a sanitizer build (make
#               asan): tests whose behaviour ASan's runtime changes adapt
#   RDX_FUZZ_BUILD    directory of libFuzzer targets (make fuzz) to run for
#               a fixed number of inputs from a fixed seed (deterministic)
#   RDX_FUZZ_RUNS     inputs per target (default 200000)
#   RDX_RXE     1: also the Soft-RoCE tier, tests/rxe in QEMU guests (make
#               check sets it; RDX_TESTS=rxe or rxe/NAME selects it too)
#   RDX_RXE_TRANSPORT transport the tier's transfers use (default rdma)
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
timings=$(mktemp "${TMPDIR:-/tmp}/rdx-times.XXXXXX") # ms <TAB> label <TAB> test
rxe_state= # run_rxe's directory, while its lanes run
trap 'rm -f "$log" "$timings"; [ -z "$rxe_state" ] || rm -rf "$rxe_state"' EXIT

# count_tap FILE [LABEL]: adds FILE's ok / not ok / skip lines to the
# totals and sets tap_n to how many results it held (no subshell: totals
# must stick).  With LABEL, the tests' times (bats --timing: "... in Nms")
# go to the slowest-ten list.
count_tap() {
	local p f s
	[ -z "${2:-}" ] ||
		sed -n "s/^\(not \)\{0,1\}ok [0-9]* \(.*\) in \([0-9][0-9]*\)ms\$/\3\t$2\t\2/p" "$1" >>"$timings"
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
	local dir=$1 label=$2 t name rc n bad t0
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
		t0=$SECONDS
		timeout -k 5 "$unit_timeout" "$t" </dev/null | tee "$log"
		rc=${PIPESTATUS[0]}
		echo "# $label unit: $name took $((SECONDS - t0)) s"
		printf '%d\t%s unit\t%s\n' $(((SECONDS - t0) * 1000)) "$label" "$name" >>"$timings"
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

# Most tests wait (on sshd, a timeout, a peer) more than they compute:
# one file at a time kept two CPUs 37 % busy.  The default is one more
# than the CPUs, from 3 to 4 (on the 2-core VM the normal build's files
# took 326-345 s two at a time and 258 s three at a time, all passing):
# more would run the heavy files (a 1 GiB transfer, valgrind, node
# servers) all at once, and some tests bound how long a step may take.
# make check-stress runs them four at a time beside CPU hogs.
if [ -n "${RDX_JOBS:-}" ]; then
	[[ $RDX_JOBS =~ ^[1-9][0-9]*$ ]] || { echo "tests/run.sh: RDX_JOBS must be a number from 1" >&2; exit 2; }
	jobs=$RDX_JOBS
else
	jobs=$(($(nproc 2>/dev/null || echo 2) + 1))
	[ "$jobs" -ge 3 ] || jobs=3
	[ "$jobs" -le 4 ] || jobs=4
fi

# run_cli DIR LABEL FILE...: bats on FILE... with RDX_BUILD=DIR, RDX_JOBS
# files at once, the biggest first (they take longest).
run_cli() {
	local dir=$1 label=$2 rc bad t0=$SECONDS files
	shift 2
	[ $# -gt 0 ] || return 0
	if ! command -v bats >/dev/null 2>&1; then
		echo "not ok - bats is not installed (scripts/deps.sh test)"
		failed=$((failed + 1))
		return 0
	fi
	local args=(--tap --timing) # each test's time: where CI's minutes go
	[ -n "${RDX_FILTER:-}" ] && args+=(--filter "$RDX_FILTER")
	if [ "$jobs" -gt 1 ] && [ $# -gt 1 ]; then
		if ! parallel --version 2>/dev/null | grep -q 'GNU parallel'; then
			echo "not ok - RDX_JOBS=$jobs needs GNU parallel (scripts/deps.sh test; RDX_JOBS=1 runs without)"
			failed=$((failed + 1))
			return 0
		fi
		args+=(--jobs "$jobs" --no-parallelize-within-files)
		mapfile -t files < <(ls -S --quoting-style=literal -- "$@")
		set -- "${files[@]}"
	fi
	echo "# $label cli: $*"
	RDX_BUILD=$dir bats "${args[@]}" "$@" </dev/null | tee "$log"
	rc=${PIPESTATUS[0]}
	echo "# $label cli: took $((SECONDS - t0)) s"
	count_tap "$log" "$label"
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

# ------------------------------------------- sanitizer builds (optional)
# sanitized VAR LABEL CLI-FILE...: the unit tests and the CLI-FILEs with the
# build in $VAR (a directory).  Any sanitizer report makes the tool exit
# non-zero, which fails the test.  The big-file test shrinks to
# RDX_ASAN_BIG_SIZE (default 128M) there.
sanitized() {
	local var=$1 label=$2 dir
	shift 2
	dir=$(abs_dir "${!var}")
	if [ ! -x "$dir/rdsend" ] || [ ! -x "$dir/rdrecv" ]; then
		echo "not ok - $var=$dir holds no rdsend/rdrecv"
		failed=$((failed + 1))
		return 0
	fi
	export RDX_BIG_SIZE=${RDX_ASAN_BIG_SIZE:-128M}
	export RDX_SANITIZED=1 # tests whose behaviour a sanitizer's runtime changes
	run_unit "$dir" "$label"
	mapfile -t files < <(cli_files "$@")
	run_cli "$dir" "$label" "${files[@]}"
	unset RDX_BIG_SIZE RDX_SANITIZED
}

# ------------------------------------------ Soft-RoCE tier (optional)
# RDX_RXE=1 (make check sets it), or RDX_TESTS naming it ('rxe' for all,
# 'rxe/NAME' for tests/rxe/NAME.*): tests/rxe/*.bats and the TAP scripts
# tests/rxe/*.sh in one guest (s3.bats in one of its own),
# tests/rxe/two*.bats in two, booted by scripts/rxe-vm.sh (docs/RXE-VM.md,
# "The test tier").  In the guest,
# tests/rxe/guest.sh prints each file's TAP on the console, every line
# prefixed "RXETAP ROLE|" between BEGIN and END lines; the results are
# taken from the console log and counted here.  A guest that fails to boot
# (125), times out (124) or stops before a file's END is a failure, shown
# with the console tail, never a skip.  RDX_RXE_TRANSPORT (default rdma)
# is the transport the tests use; tcp checks the harness without verbs.

# rxe_files one|two: the tests/rxe files RDX_TESTS selects for one guest
# (*.bats but two*, and TAP scripts *.sh) or for two guests (two*.bats).
rxe_files() {
	local f base
	for f in tests/rxe/*.bats tests/rxe/*.sh; do
		[ -f "$f" ] || continue
		base=${f##*/}
		base=${base%.*}
		[ "$base" != guest ] || continue
		if [[ $base == two* ]]; then
			if [ "$1" != two ] || [[ $f != *.bats ]]; then
				continue
			fi
		else
			[ "$1" = one ] || continue
		fi
		matches rxe || matches "rxe/$base" || continue
		echo "$f"
	done
}

rxe_why() {
	case $1 in
	124) echo "scripts/rxe-vm.sh exit 124: timed out" ;;
	125) echo "scripts/rxe-vm.sh exit 125: no status from the guest, boot or setup failed" ;;
	*) echo "scripts/rxe-vm.sh exit $1" ;;
	esac
}

# rxe_boot STATE [--two] FILE...: one boot (or a pair) running every FILE;
# the console log into STATE.clog, rxe-vm.sh's own output into STATE.vlog,
# its exit status into STATE.rc.  Prints nothing, so it can run in the
# background while other tests print.
rxe_boot() {
	local st=$1 two=()
	shift
	if [ "$1" = --two ]; then
		two=(--two)
		shift
	fi
	# Every command in the tests is bounded; the guest's own limit is the
	# safety net, generous because a busy host slows TCG down a lot.
	RDX_RXE_LOG=$st.clog RDX_RXE_TIMEOUT=${RDX_RXE_TIMEOUT:-1500} \
		scripts/rxe-vm.sh run "${two[@]}" tests/rxe/guest.sh \
		"RDX_BUILD=$build" "RDX_RXE_TRANSPORT=${RDX_RXE_TRANSPORT:-rdma}" \
		${RDX_FILTER:+"RDX_FILTER=$RDX_FILTER"} "$@" </dev/null >"$st.vlog" 2>&1
	echo $? >"$st.rc"
}

# rxe_count STATE [--two] FILE...: what rxe_boot STATE left, as TAP, counted.
rxe_count() {
	local st=$1 two=() roles=(single) clog vlog rc role f name end cut_short=0 bad0=$failed
	shift
	if [ "$1" = --two ]; then
		two=(--two)
		roles=(a b)
		shift
	fi
	clog=$(mktemp "${TMPDIR:-/tmp}/rdx-rxe-console.XXXXXX")
	[ -f "$st.clog" ] && cat "$st.clog" >"$clog"
	vlog=$st.vlog
	[ -f "$vlog" ] || : >"$vlog"
	rc=$(cat "$st.rc" 2>/dev/null || echo 125)
	sed -n 's/^rxe-vm: \(guest .* s\)\( (.*)\)\{0,1\}$/# rxe \1\2/p' "$vlog"
	for role in "${roles[@]}"; do
		for f in "$@"; do
			name=${f#tests/}
			name=${name%.*}
			[ "$role" = single ] || name+=" $role"
			rm -f "$log.end"
			awk -v tag="RXETAP $role|" -v f="$f" -v endf="$log.end" '
				{ i = index($0, tag); if (!i) next; s = substr($0, i + length(tag)) }
				s == "BEGIN " f { on = 1; next }
				on && index(s, "END " f " ") == 1 { print substr(s, length(f) + 6) >endf; on = 0; next }
				on { print s }' "$clog" |
				sed -E "s/^(not ok|ok)( [0-9]+)?( -)? /\1\2 $(sed 's/[\/&]/\\&/g' <<<"$name"): /" >"$log"
			cat "$log"
			count_tap "$log" rxe
			end=$(cat "$log.end" 2>/dev/null)
			if [ -z "$end" ]; then
				echo "not ok - $name: the guest stopped before it ended ($(rxe_why "$rc"))"
				failed=$((failed + 1))
				cut_short=1
			elif [ "$end" -ne 0 ] && ! grep -qE '^not ok ' "$log"; then
				echo "not ok - $name exited with status $end"
				failed=$((failed + 1))
			elif [ "$tap_n" -eq 0 ]; then
				echo "not ok - $name printed no TAP results"
				failed=$((failed + 1))
			fi
		done
	done
	# Booting or the guest itself failed: the console tail says why.
	if [ "$rc" -ne 0 ] && [ "$rc" -ne 1 ]; then
		if [ "$cut_short" = 0 ]; then
			echo "not ok - rxe: the guest did not end after the tests ($(rxe_why "$rc"))"
			failed=$((failed + 1))
		fi
		sed 's/^/# /' "$vlog"
	fi
	rm -f "$vlog" "$log.end" "$st.clog" "$st.rc"
	if [ "$failed" -gt "$bad0" ] && [ -s "$clog" ]; then
		echo "# rxe: full console log kept in $clog"
	else
		rm -f "$clog"
	fi
}

# rxe_say [--two] FILE...: the line that names a boot and its files.
rxe_say() {
	if [ "$1" = --two ]; then
		echo "# rxe: scripts/rxe-vm.sh run --two tests/rxe/guest.sh ${*:2}"
	else
		echo "# rxe: scripts/rxe-vm.sh run  tests/rxe/guest.sh $*"
	fi
}

# run_rxe ONE-FILES -- TWO-FILES: every boot the files need, in two lanes
# side by side, then their results in order.  Inside a guest the tests run
# one at a time, and a lone guest leaves part of the second CPU idle: on
# the 2-core VM the tier took 614 s one boot after another (about 570 s
# with verbs.bats's valgrind test as it is now) and 487 s in two lanes
# (each guest slower, the two together faster).  Lane 1 boots
# one guest for the one-guest files but s3.bats; lane 2 boots one for
# s3.bats, then the pair (one vCPU each) for the two-guest files.
run_rxe() {
	local one=() s3=() two=() lanes=()
	while [ "$1" != -- ]; do
		case $1 in
		*/s3.bats) s3+=("$1") ;;
		*) one+=("$1") ;;
		esac
		shift
	done
	shift
	two=("$@")
	# Each lane's STATE files (rxe_boot) in one directory, removed on
	# every exit.
	rxe_state=$(mktemp -d "${TMPDIR:-/tmp}/rdx-rxe-state.XXXXXX")
	local st1=$rxe_state/one st2=$rxe_state/s3 st3=$rxe_state/two
	[ ${#one[@]} -eq 0 ] || rxe_say "${one[@]}"
	[ ${#s3[@]} -eq 0 ] || rxe_say "${s3[@]}"
	[ ${#two[@]} -eq 0 ] || rxe_say --two "${two[@]}"
	{ [ ${#one[@]} -eq 0 ] || rxe_boot "$st1" "${one[@]}"; } &
	lanes+=($!)
	{
		[ ${#s3[@]} -eq 0 ] || rxe_boot "$st2" "${s3[@]}"
		[ ${#two[@]} -eq 0 ] || rxe_boot "$st3" --two "${two[@]}"
	} &
	lanes+=($!)
	wait "${lanes[@]}"
	[ ${#one[@]} -eq 0 ] || rxe_count "$st1" "${one[@]}"
	[ ${#s3[@]} -eq 0 ] || rxe_count "$st2" "${s3[@]}"
	[ ${#two[@]} -eq 0 ] || rxe_count "$st3" --two "${two[@]}"
	rm -rf "$rxe_state"
	rxe_state=
}

# RDX_ASAN_BUILD=DIR (ASan/UBSan): the transfers, faults, servers, S3, rdcp,
# trees and resumes.
if [ -n "${RDX_ASAN_BUILD:-}" ]; then
	export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
	export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
	sanitized RDX_ASAN_BUILD asan tests/cli/transfer.bats tests/cli/faults.bats \
		tests/cli/server.bats tests/cli/s3.bats tests/cli/s3check.bats tests/cli/s3sync.bats \
		tests/cli/s3serve.bats tests/cli/s3boto.bats tests/cli/s3fs.bats tests/cli/rdcp.bats tests/cli/rdcp3.bats tests/cli/tree.bats \
		tests/cli/resume.bats tests/cli/rdpipe.bats
fi

# RDX_TSAN_BUILD=DIR (ThreadSanitizer): the transfers and trees, where the
# threads are (rings, readers, writers, streams).  A data race, a
# lock-order inversion or a destroyed mutex locked is reported and the
# tool exits 66.
if [ -n "${RDX_TSAN_BUILD:-}" ]; then
	export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:exitcode=66}
	sanitized RDX_TSAN_BUILD tsan tests/cli/transfer.bats tests/cli/tree.bats
	unset TSAN_OPTIONS
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
		# A target whose inputs touch the disk says how many it can
		# afford in tests/fuzz/NAME.runs (RDX_FUZZ_RUNS still wins).
		runs=$fuzz_runs
		[ -n "${RDX_FUZZ_RUNS:-}" ] || [ ! -f "tests/fuzz/$name.runs" ] ||
			runs=$(cat "tests/fuzz/$name.runs")
		scratch=$(mktemp -d "${TMPDIR:-/tmp}/rdx-fuzz.XXXXXX")
		if timeout 300 "$f" -seed=1 -runs="$runs" -artifact_prefix="$scratch/" \
			"$scratch" "tests/fuzz/corpus/$name" >"$log" 2>&1; then
			echo "ok - fuzz $name: $runs inputs, no crash or failed check"
			passed=$((passed + 1))
			rm -rf "$scratch"
		else
			tail -n 30 "$log"
			echo "not ok - fuzz $name (reproduce: $f $scratch/crash-*)"
			failed=$((failed + 1))
		fi
	done
fi

# The guests run last, alone: emulation needs every CPU there is, and a
# guest slowed by other tests' load gains nothing (measured: beside the
# sanitizer passes, make check took as long, everything slower).
if [ "${RDX_RXE:-}" = 1 ] || { [ -n "${RDX_TESTS:-}" ] && [ "${RDX_RXE:-}" != 0 ]; }; then
	mapfile -t rxe_one < <(rxe_files one)
	mapfile -t rxe_two < <(rxe_files two)
	if [ $((${#rxe_one[@]} + ${#rxe_two[@]})) -gt 0 ]; then
		if ! scripts/rxe-vm.sh fetch >"$log" 2>&1; then
			sed 's/^/# /' "$log"
			echo "not ok - rxe: scripts/rxe-vm.sh fetch failed"
			failed=$((failed + 1))
		else
			run_rxe "${rxe_one[@]}" -- "${rxe_two[@]}"
		fi
	fi
fi

# The next slow test shows up here when it arrives.
if [ -s "$timings" ]; then
	echo "# the ten slowest tests:"
	sort -t "$(printf '\t')" -k1,1nr "$timings" | head -n 10 |
		awk -F '\t' '{ printf "#   %6.1f s  %s: %s\n", $1 / 1000, $2, $3 }'
fi
echo "# all: took $SECONDS s"
summary="$passed passed, $failed failed"
[ "$skipped" -gt 0 ] && summary+=", $skipped skipped"
echo "$summary"

if [ "$failed" -gt 0 ] || [ $((passed + skipped)) -eq 0 ]; then
	exit 1
fi
# Zero tests actually run (all skipped) is not a pass either.
[ "$passed" -gt 0 ] || exit 1
exit 0
