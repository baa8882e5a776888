#!/usr/bin/env bash
# shellcheck disable=SC2016 # eval and jq expand their arguments later, on purpose
# rdx-diag on a real (Soft-RoCE) device.  Runs INSIDE a scripts/rxe-vm.sh
# guest, which exports RXE_DEV, RXE_ADDR, RXE_NETDEV and RXE_GID_INDEX
# (docs/RXE-VM.md):
#
#   scripts/rxe-vm.sh run tests/rxe/diag.sh
#
# Checks that rdx-diag finds RXE_DEV with an ACTIVE Ethernet port and the
# RoCE v2 GID ::ffff:RXE_ADDR at RXE_GID_INDEX, exits 0, and says that
# rdsend would reach RXE_ADDR over rdma via RXE_DEV; that unreachable
# destinations give tcp with a reason, exit 3, and never hang; and runs
# the verbs_probe unit test against the device.  Prints TAP; exits 1 when
# a check failed.  RDX_BUILD: the build directory (default build/ of this
# checkout).
set -u

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=${RDX_BUILD:-$repo/build}
case $build in /*) ;; *) build=$repo/$build ;; esac
DIAG=("$build/rdx-diag") # the command line diag runs
UNIT=$build/tests/unit/test_verbs_probe
for v in RXE_DEV RXE_ADDR RXE_NETDEV RXE_GID_INDEX; do
	if [ -z "${!v:-}" ]; then
		echo "Bail out! $v is not set: run me with scripts/rxe-vm.sh run $0"
		exit 1
	fi
done
if [ ! -x "$build/rdx-diag" ]; then
	echo "Bail out! $build/rdx-diag is not built (make)"
	exit 1
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/rdx-diag.XXXXXX") || exit 1
trap 'rm -rf "$work"' EXIT

n=0
failed=0
# check NAME CMD...: one TAP line; on failure the command's own words and
# the last rdx-diag run's output follow as comments.
check() {
	local name=$1 msg
	shift
	n=$((n + 1))
	if msg=$("$@" 2>&1); then
		echo "ok $n - $name"
	else
		failed=$((failed + 1))
		echo "not ok $n - $name"
		[ -z "$msg" ] || printf '%s\n' "$msg" | sed 's/^/#   /'
		sed 's/^/#   stdout: /' "$work/out"
		sed 's/^/#   stderr: /' "$work/err"
		echo "#   exit: $rc, $ms ms"
	fi
}

# diag ARGS...: runs rdx-diag (killed after 60 s), sets rc and ms.
diag() {
	local t0
	t0=$(date +%s%N)
	timeout -k 5 60 "${DIAG[@]}" "$@" >"$work/out" 2>"$work/err"
	rc=$?
	ms=$((($(date +%s%N) - t0) / 1000000))
	echo "# rdx-diag $*: exit $rc in $ms ms"
}

has() { # has ERE: some stdout line matches
	grep -qE -- "$1" "$work/out" || {
		echo "no stdout line matches /$1/"
		return 1
	}
}
rc_is() { [ "$rc" -eq "$1" ] || { echo "exit $rc, want $1"; return 1; }; }
one_line_error() { # the one stderr line: "rdx-diag: " + lowercase reason
	if [ "$(grep -c '' "$work/err")" -ne 1 ] || ! grep -qE '^rdx-diag: [a-zA-Z0-9]' "$work/err" ||
		grep -qE '\.$' "$work/err"; then
		echo "want one line 'rdx-diag: reason' on stderr, no full stop"
		return 1
	fi
}
jq_true() { # jq_true FILTER [--arg NAME VALUE...]: FILTER holds on stdout
	local f=$1
	shift
	jq -e "$@" "$f" "$work/out" >/dev/null || {
		echo "jq: $f is not true"
		return 1
	}
}
quiet() { [ ! -s "$work/err" ] || { echo "stderr not empty"; return 1; }; }

gid="::ffff:$RXE_ADDR"
ere_dot=${RXE_ADDR//./\\.}

# ----------------------------------------------------------- the device
diag
sed 's/^/#   /' "$work/out"
check "rdx-diag exits 0 with an ACTIVE port, stderr empty" eval 'rc_is 0 && quiet'
check "lists $RXE_DEV" has "^device $RXE_DEV: node GUID [0-9a-f]{4}(:[0-9a-f]{4}){3}"
check "port 1 is ACTIVE, link layer Ethernet, with an active MTU" \
	has "^  port 1: ACTIVE, link layer Ethernet, active MTU (256|512|1024|2048|4096)"
check "GID $RXE_GID_INDEX is $gid, RoCE v2, on $RXE_NETDEV" \
	has "^    GID $RXE_GID_INDEX +::ffff:$ere_dot +RoCE v2 +$RXE_NETDEV\$"
check "memlock limit unlimited, no hint" eval 'has "^memlock limit: unlimited$" && ! has "ulimit -l"'

diag --json
check "--json: exit 0, valid JSON, nothing on stderr" eval 'rc_is 0 && quiet && jq -e . "$work/out" >/dev/null'
check "--json: $RXE_DEV port 1 ACTIVE, Ethernet" jq_true \
	'.devices[] | select(.name == $d) | .any_active and (.ports[0] | .port == 1 and .active and .state == "ACTIVE" and .link_layer == "Ethernet" and .active_mtu >= 256)' \
	--arg d "$RXE_DEV"
check "--json: GID $RXE_GID_INDEX is $gid, RoCE v2, on $RXE_NETDEV" jq_true \
	'[.devices[] | select(.name == $d) | .ports[0].gids[] | select(.index == ($i | tonumber))] | length == 1 and .[0].gid == $g and .[0].type == "RoCE v2" and .[0].netdev == $nd' \
	--arg d "$RXE_DEV" --arg i "$RXE_GID_INDEX" --arg g "$gid" --arg nd "$RXE_NETDEV"
check "--json: usable, exit 0, no reason, host null" jq_true \
	'.usable == true and .exit == 0 and .reason == null and .host == null and .active_ports >= 1 and .memlock.limit == "unlimited"'

# ------------------------------------------------------ route to RXE_ADDR
diag "$RXE_ADDR"
sed 's/^/#   /' "$work/out"
check "rdx-diag $RXE_ADDR exits 0" eval 'rc_is 0 && quiet'
check "rdx-diag $RXE_ADDR says rdma via $RXE_DEV port 1" \
	has "^transport to $ere_dot: rdma via $RXE_DEV port 1 \\(local $ere_dot"
diag --json "$RXE_ADDR"
check "--json $RXE_ADDR: rdma via $RXE_DEV port 1, local $RXE_ADDR" jq_true \
	'.exit == 0 and .host.name == $a and .host.transport == "rdma" and .host.reason == null and .host.route_error == null and (.host.route | .device == $d and .port == 1 and .local == $a and .remote == $a)' \
	--arg a "$RXE_ADDR" --arg d "$RXE_DEV"
diag -4 --bind "$RXE_ADDR" "$RXE_ADDR"
check "--bind $RXE_ADDR -4 $RXE_ADDR: rdma via $RXE_DEV" eval 'rc_is 0 && has "^transport to $ere_dot: rdma via $RXE_DEV port 1"'

# ------------------------------------------------- destinations RDMA misses
diag 198.51.100.1
check "no route to 198.51.100.1: exit 3, tcp with the reason" eval \
	'rc_is 3 && has "^transport to 198\.51\.100\.1: tcp: 198\.51\.100\.1 is not reachable through an RDMA device \(rdma_resolve_addr: "'
check "no route: one-line error on stderr" one_line_error
# Nobody answers ARP for .77: rdma_cm gives up after --timeout (plus the
# probe's grace); generous slack for an emulated, shared machine.
diag --timeout 1 192.0.2.77
check "silent neighbour 192.0.2.77: exit 3, tcp, not reachable" eval \
	'rc_is 3 && has "^transport to 192\.0\.2\.77: tcp: 192\.0\.2\.77 is not reachable through an RDMA device"'
check "silent neighbour: answered within 30 s of a 1 s timeout" eval '[ "$ms" -lt 30000 ]'
diag --json --timeout 1 192.0.2.77
check "--json silent neighbour: transport tcp with a reason, exit 3" jq_true \
	'.exit == 3 and .usable == false and .host.transport == "tcp" and (.host.reason | test("not reachable")) and .reason == .host.reason and .host.route == null and .host.route_error == .host.reason'
diag -6 "$RXE_ADDR"
check "-6 $RXE_ADDR: exit 3, cannot resolve" eval \
	'rc_is 3 && has "tcp: cannot resolve .$ere_dot.: " && one_line_error'
diag "$RXE_ADDR" extra
check "two operands: usage error, exit 2, nothing on stdout" eval \
	'rc_is 2 && [ ! -s "$work/out" ] && one_line_error'

# ------------------------------------------------ rdsend agrees with it
# rdsend -v names the transport it picked before it tries to connect; no
# receiver is needed (nothing listens on the port: it then fails, exit 3).
rdsend_pick() { # rdsend_pick HOST: rdsend's "transport: ..." line
	RDX_KEY=k timeout -k 5 60 "$build/rdsend" -v --connect-timeout 1 "$1" 9 /dev/null 2>&1 |
		grep -m1 -E 'transport: '
}
check "rdsend -v to $RXE_ADDR picks rdma too" eval \
	'pick=$(rdsend_pick "$RXE_ADDR") && grep -qE "transport: rdma" <<<"$pick" || { echo "rdsend said: ${pick:-nothing}"; false; }'
check "rdsend -v to 198.51.100.1 picks tcp too" eval \
	'pick=$(rdsend_pick 198.51.100.1) && grep -qE "transport: tcp" <<<"$pick" || { echo "rdsend said: ${pick:-nothing}"; false; }'

# ------------------------------------------ the memory lock, as non-root
# Root passes RLIMIT_MEMLOCK (CAP_IPC_LOCK); nobody does not.  The
# binary goes where nobody can reach it (the checkout may be private).
nob=$work/nobody
mkdir -m 755 "$nob" && chmod 755 "$work" && cp "$build/rdx-diag" "$nob/"
as_nobody=(setpriv --reuid=nobody --regid=nogroup --clear-groups)
DIAG=("${as_nobody[@]}" "$nob/rdx-diag")
diag "$RXE_ADDR"
check "nobody, memlock unlimited: rdma via $RXE_DEV, exit 0" eval \
	'rc_is 0 && has "^transport to $ere_dot: rdma via $RXE_DEV port 1"'
DIAG=("${as_nobody[@]}" prlimit --memlock=1048576 "$nob/rdx-diag")
diag "$RXE_ADDR"
check "nobody, memlock 1 MiB: exit 1, too low, with the ulimit hint" eval \
	'rc_is 1 && has "^memlock limit: 1\.00 MiB, too low for RDMA$" && has "ulimit -l|limits\.d"'
check "nobody, memlock 1 MiB: tcp, because of the limit, although rdma_cm reaches it" \
	has "^transport to $ere_dot: tcp: RDMA needs [0-9.]+ MiB of locked memory but RLIMIT_MEMLOCK is 1\.00 MiB \(rdma_cm reaches it via $RXE_DEV port 1\)$"
check "nobody, memlock 1 MiB: that reason is the one line on stderr" eval \
	'one_line_error && grep -q "RLIMIT_MEMLOCK is 1.00 MiB" "$work/err"'
DIAG=(prlimit --memlock=1048576:33554432 "${as_nobody[@]}" "$nob/rdx-diag")
diag
check "nobody, memlock 1 MiB, hard 32 MiB: the hint is 'ulimit -l 32768'" eval \
	'rc_is 1 && has "^  rdsend pins 17\.00 MiB by default: raise the limit with .ulimit -l 32768. \(the hard limit\)"'
DIAG=(prlimit --memlock=33554432 "${as_nobody[@]}" "$nob/rdx-diag")
diag "$RXE_ADDR"
check "nobody, memlock 32 MiB: enough, no hint, rdma via $RXE_DEV" eval \
	'rc_is 0 && has "^memlock limit: 32\.00 MiB$" && ! has "ulimit" && has "^transport to $ere_dot: rdma via $RXE_DEV port 1"'
DIAG=("$build/rdx-diag")

# ------------------------------------------- the probe's own unit test
if [ -x "$UNIT" ]; then
	n=$((n + 1))
	if timeout -k 5 120 "$UNIT" >"$work/unit" 2>&1; then
		echo "ok $n - unit test_verbs_probe against $RXE_DEV ($(grep -c '^ok ' "$work/unit") checks)"
	else
		failed=$((failed + 1))
		echo "not ok $n - unit test_verbs_probe against $RXE_DEV"
	fi
	sed 's/^/#   /' "$work/unit"
else
	n=$((n + 1))
	failed=$((failed + 1))
	echo "not ok $n - $UNIT is not built"
fi

echo "1..$n"
[ "$failed" -eq 0 ]
