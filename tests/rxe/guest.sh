#!/usr/bin/env bash
# Guest side of the Soft-RoCE test tier, run inside scripts/rxe-vm.sh by
# tests/run.sh (RDX_RXE=1).  For each FILE, runs bats on it (FILE.bats) or
# bash (any other FILE, which must print TAP), and prints its output to the
# console with every line prefixed "RXETAP ROLE|", framed by
# "RXETAP ROLE|BEGIN FILE" and "RXETAP ROLE|END FILE STATUS", so the host
# can pick each guest's results out of the console log, which kernel
# messages share.  ROLE is $RXE_ROLE: single, a or b.
#
#   tests/rxe/guest.sh [RDX_NAME=VALUE...] FILE...
#
# The guest starts with a clean environment: settings (RDX_BUILD,
# RDX_RXE_TRANSPORT, RDX_FILTER) travel as arguments.  Exit status: 0 when
# every FILE exited 0, else 1.
set -u

while [ $# -gt 0 ]; do
	case $1 in
	RDX_[A-Z0-9_]*=*) export "${1?}" ;;
	*) break ;;
	esac
	shift
done
if [ $# -eq 0 ]; then
	echo "usage: $0 [RDX_NAME=VALUE...] FILE..." >&2
	exit 2
fi

tag="RXETAP ${RXE_ROLE:?not in an rxe-vm guest}|"
bats_args=(--tap --timing)
[ -z "${RDX_FILTER:-}" ] || bats_args+=(--filter "$RDX_FILTER")
status=0
for f in "$@"; do
	echo "${tag}BEGIN $f"
	case $f in
	*.bats) bats "${bats_args[@]}" "$f" ;;
	*) bash "$f" ;;
	esac </dev/null 2>&1 | sed -u "s/^/$tag/"
	rc=${PIPESTATUS[0]}
	echo "${tag}END $f $rc"
	[ "$rc" -eq 0 ] || status=1
done
exit "$status"
