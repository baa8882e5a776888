#!/usr/bin/env bash
# bench/rdpipe.sh -- rdpipe through two hops against the same pipeline
# relayed by ssh through this host, and against rdcp of the same bytes,
# side by side in one run.  Three network namespaces of the rdcp tests
# (tests/lib/netns.bash netns3_setup, tests/lib/sshd.bash): OpenSSH sshd in
# A (rdxhost) and in C (rdxc), every client in B; A and C reach each other
# over their own link, B forwards nothing.  All share the file system.
#
# Usage:   bash bench/rdpipe.sh                # 4 GiB
#          SIZE=1G bash bench/rdpipe.sh        # quick run
#
# Environment (all optional):
#   SIZE=4G        the bytes; suffixes K M G T (powers of 1024)
#   RUNS=1         repeat every row RUNS times (interleaved); keep the fastest
#   ONLY=regex     run only the rows whose name matches
#   RDPIPE         path of rdpipe (default build/rdpipe; rdcp, rdsend and
#                  rdrecv from the same directory), copied into the scratch
#                  directory first
#   BENCH_TMPDIR   parent of the scratch directory (default /var/tmp)
#
# Rows, each ending here in `cmp - SRC` (the bytes checked as they arrive):
#   ssh relay     ssh rdxhost 'cat SRC' | ssh rdxc cat | cmp - SRC
#                 (A -> here -> C -> here: what one does without rdpipe)
#   rdpipe        rdpipe rdxhost:'cat SRC' rdxc:cat | cmp - SRC
#                 (A -> C -> here, directly)
#   rdpipe <      rdpipe rdxhost:'< SRC' rdxc:cat | cmp - SRC
#                 (the file read by rdpipe itself, O_DIRECT)
#   rdcp          rdcp rdxhost:SRC - | cmp - SRC      (one hop, A -> here)
#
# Per row: wall seconds of the local command, GB/s = bytes / wall / 1e9,
# CPU s here (user+sys of the client and its children) and far CPU s (what
# both sshds' sessions spent meanwhile).  The last lines compare rdpipe
# with the goals: >= 4 x the ssh relay, and within 10 % of rdcp (rdpipe's
# GB/s >= 0.9 x rdcp's).  Exit status non-zero if a row failed.
# shellcheck source=bench/lib.bash
. "$(dirname "${BASH_SOURCE[0]}")/lib.bash"
bench_init rdpipe

BYTES=$(to_bytes "${SIZE:-4G}")
RDPIPE=${RDPIPE:-$BENCH_REPO/build/rdpipe}
[ "$BYTES" -gt 0 ] || die "SIZE must be > 0"
TIMEOUT=${TIMEOUT:-$((300 + BYTES / 10000000))}
[ "$(id -u)" -eq 0 ] || die "needs root (network namespaces)"
[ -x "$RDPIPE" ] || die "$RDPIPE not built (make)"
bin=$(dirname "$RDPIPE")
for t in rdcp rdsend rdrecv; do [ -x "$bin/$t" ] || die "no $t next to $RDPIPE"; done
RDX_BUILD=$TMPD/bin
mkdir -p "$RDX_BUILD"
cp "$RDPIPE" "$bin/rdcp" "$bin/rdsend" "$bin/rdrecv" "$RDX_BUILD/"
RDPIPE=$RDX_BUILD/rdpipe
RDCP=$RDX_BUILD/rdcp
need_cmds ssh ip ss cmp timeout openssl
[ -x /usr/sbin/sshd ] || bash "$BENCH_REPO/scripts/deps.sh" bench >&2

# shellcheck source=bench/sshd.bash
. "$(dirname "${BASH_SOURCE[0]}")/sshd.bash"

export HOME=$TMPD/home
mkdir -p "$HOME"
unset SSH_AUTH_SOCK
sshd_setup netns3_setup
sshd_add "$NS_C" "$IP_C" rdxc
ip -n "$NS_A" route add "$IP_C/32" via "$IP_AC_C" || die "cannot route A to C"
SSH_OPTS=(-F "$SSH_CONFIG" -o IdentitiesOnly=yes -o IdentityAgent=none -o BatchMode=yes)
ssh_ok() { in_b ssh "${SSH_OPTS[@]}" "$1" true </dev/null 2>"$TMPD/ssh.err"; }
for h in rdxhost rdxc; do
	wait_until 10 ssh_ok "$h" || { cat "$TMPD/ssh.err" >&2; die "cannot log in to $h"; }
done
SSHD_PIDS=("$(cat "$SSHD_DIR/sshd.pid")" "$(cat "$SSHD_DIR/sshd-rdxc.pid")")
CIPHER=$(ssh -G "${SSH_OPTS[@]}" rdxhost 2>/dev/null | sed -n 's/^ciphers //p' | cut -d, -f1)

avail=$(df -P -B1 "$TMPD" | awk 'NR==2 {print $4}')
[ "$avail" -gt $((BYTES + 512 * 1024 * 1024)) ] || die "need $BYTES bytes free under $TMPD"
SRC=$TMPD/one.bin
log "generating $BYTES bytes in $TMPD"
mkdata "$SRC" "$BYTES"
cat "$SRC" >/dev/null

# cmd ROW: fills CMD (a bash -c line, run in namespace B)
cmd() {
	local so="${SSH_OPTS[*]}" rp="-F $SSH_CONFIG --remote-path $RDX_BUILD"
	case "$1" in
	"ssh relay") CMD="ssh $so rdxhost 'cat $SRC' | ssh $so rdxc cat | cmp - $SRC" ;;
	rdpipe) CMD="$RDPIPE $rp rdxhost:'cat $SRC' rdxc:cat | cmp - $SRC" ;;
	"rdpipe <") CMD="$RDPIPE $rp 'rdxhost:< $SRC' rdxc:cat | cmp - $SRC" ;;
	rdcp) CMD="$RDCP -q $rp rdxhost:$SRC - | cmp - $SRC" ;;
	esac
}

far_cpu() {
	local s=0 p
	for p in "${SSHD_PIDS[@]}"; do s=$(awk -v a="$s" -v b="$(proc_cpu "$p")" 'BEGIN {printf "%.2f", a + b}'); done
	echo "$s"
}
far_idle() {
	local p
	for p in "${SSHD_PIDS[@]}"; do [ -z "$(pgrep -P "$p")" ] || return 1; done
}

row() {
	local name=$1 d=$TMPD/r rc=0 f0 f1
	want "$name" || return 0
	rm -rf "$d"
	cmd "$name"
	wait_until 5 far_idle || true
	f0=$(far_cpu)
	timed "$d" ip netns exec "$NS_B" bash -c "set -o pipefail; $CMD" || rc=$?
	wait_until 10 far_idle || log "$name: a session still runs on a far host"
	f1=$(far_cpu)
	if [ "$rc" -ne 0 ]; then
		fail_row "$name" "$d" "exit $rc (cmp says the bytes differ, or a tool failed)"
		return 0
	fi
	record "$name" "$T_WALL" "$T_CPU" "$T_RSS" "$(awk -v a="$f0" -v b="$f1" 'BEGIN {printf "%.2f", b - a}')"
}

ROWNAMES=("ssh relay" rdpipe "rdpipe <" rdcp)
log "sshd in $NS_A ($IP_A) and $NS_C ($IP_C), clients in $NS_B; cipher $CIPHER; $BYTES bytes; runs $RUNS"
for run in $(seq 1 "$RUNS"); do
	[ "$RUNS" -gt 1 ] && log "--- run $run/$RUNS"
	for r in "${ROWNAMES[@]}"; do row "$r"; done
done

echo
echo "rdxfer rdpipe bench, $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, $(uname -r)"
echo "$("$RDPIPE" --version); sshd $(ssh -V 2>&1 | cut -d, -f1) in two network namespaces, clients in a third; SSH cipher $CIPHER"
echo "$BYTES bytes from A through C to here (rdcp: from A to here); best of $RUNS run(s)"
echo
echo "| row | s | GB/s | × ssh relay | × rdcp | CPU s here | far CPU s |"
echo "|---|---:|---:|---:|---:|---:|---:|"
for n in "${ROWNAMES[@]}"; do
	if [ -n "${R_WALL[$n]:-}" ]; then
		w=${R_WALL[$n]}
		echo "| $n | $w | $(awk -v b="$BYTES" -v w="$w" 'BEGIN {printf "%.3f", b / w / 1e9}') | $(speedup "$n" "ssh relay") | $(speedup "$n" rdcp) | ${R_CPU[$n]} | ${R_FAR[$n]} |"
	elif [ -n "${R_NOTE[$n]:-}" ]; then
		echo "| $n | ${R_NOTE[$n]} | | | | | |"
	fi
done
echo
goal "rdpipe >= 4 x the ssh relay" rdpipe "ssh relay" 4
goal "rdpipe within 10 % of rdcp (>= 0.9 x)" rdpipe rdcp 0.9
[ ${#FAILED[@]} -eq 0 ] || { echo; echo "FAILED ROWS: ${FAILED[*]}"; }
[ ${#FAILED[@]} -eq 0 ]
