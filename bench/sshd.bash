# bench/sshd.bash -- the rdcp tests' network namespaces and sshd
# (tests/lib/netns.bash, tests/lib/sshd.bash) for a bench, sourced as they
# are, with what bats and tests/lib/common.bash would give them; the sshd
# and the namespaces go on exit (BENCH_CLEANUPS).  Source after lib.bash
# and bench_init; then call sshd_setup (or sshd_setup netns3_setup).
# shellcheck shell=bash
fail() { die "$*"; }
wait_until() {
	local deadline=$((SECONDS + $1))
	shift
	until "$@"; do
		[ "$SECONDS" -lt "$deadline" ] || return 1
		sleep 0.05
	done
}
# shellcheck disable=SC2034 # read by the sourced libraries
BATS_FILE_TMPDIR=$TMPD BATS_TEST_NUMBER=0 CLEANUPS=()
# shellcheck source=tests/lib/netns.bash
. "$BENCH_REPO/tests/lib/netns.bash"
# shellcheck source=tests/lib/sshd.bash
. "$BENCH_REPO/tests/lib/sshd.bash"
sshd_down() { [ -z "${NS_A:-}" ] || sshd_teardown; }
BENCH_CLEANUPS+=(sshd_down)
