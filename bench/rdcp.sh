#!/usr/bin/env bash
# bench/rdcp.sh -- rdcp against scp, rsync -e ssh and tar c | ssh tar x,
# side by side in one run through the same OpenSSH sshd.  The sshd is the
# one of the rdcp tests (tests/lib/sshd.bash): it runs in network namespace
# A with a host key and a client key made for this run (never the user's
# keys or agent), every client runs in namespace B, and the data crosses
# the veth pair between them.  Both "hosts" share the file system.
#
# Usage:   bash bench/rdcp.sh                        # 4 GiB, 20000 files
#          SIZE=1G bash bench/rdcp.sh                # quick run
#
# Environment (all optional):
#   SIZE=4G        the one file; suffixes K M G T (powers of 1024)
#   MODEL=1G       each of the 10 big files of the "ready" case's model-like
#                  tree (MODEL_FILES=10 of them, and 200 files of 4..64 KiB)
#   COUNT=20000    files in the tree, 4..64 KiB each (sizes and bytes are
#                  the same on every run), 1000 to a directory
#   RUNS=1         repeat every row RUNS times (interleaved); keep the fastest
#   ONLY=regex     run only rows whose "TOOL CASE" matches; TOOL one of scp
#                  rsync tar rdcp rdcp--direct rdcp--encrypt, CASE one of
#                  file tree ready (e.g. ONLY='file', ONLY='scp|rdcp ')
#   TIMEOUT=...    seconds one copy may run (default 300 + 1 s per 10 MB
#                  + 1 s per 50 files)
#   RDCP           path of rdcp (default build/rdcp; rdsend and rdrecv are
#                  taken from the same directory for the far side); all
#                  three are copied into the scratch directory first, so a
#                  rebuild during the run changes nothing
#   RDCP_OPTS      extra options for every rdcp row, split on spaces
#                  (e.g. RDCP_OPTS='--streams 4'); printed under the table
#   BENCH_TMPDIR   parent of the scratch directory (default /var/tmp)
#   SYNC=1         each row's seconds also count a `sync -f` of the scratch
#                  file system after the client exited: until the copy is
#                  on the disk, not only in the page cache (the SSH tools
#                  write through the page cache and exit before the disk
#                  has it; rdcp writes a big file with O_DIRECT)
#
# Rows, every one a push from namespace B to rdxhost (namespace A):
#   scp            scp [-r] SRC rdxhost:DST          (OpenSSH 9: SFTP inside)
#   rsync          rsync -a -e ssh SRC rdxhost:DST
#   tar            tar cf - SRC | ssh rdxhost 'tar xf - -C DST'
#   rdcp           rdcp SRC rdxhost:DST; the tree with rdcp -r when this
#                  build has it (rdcp --help lists --recursive), else the
#                  row says "rdcp -r: not available in this build"
#   rdcp --direct  rdcp --direct always: every big file written with
#                  O_DIRECT, as rdcp did before --direct (file and ready)
#   rdcp --encrypt the file only
#
# Cases: file (the one file), tree (COUNT small files), and ready: a
# model-like tree copied and then read back once (cat of every file to
# /dev/null), the two timed together: what a worker that loads the
# weights right after the copy waits for.  A copy left in the page cache
# is read from memory, one written around it from the disk.# The SSH tools use OpenSSH's default cipher (chacha20-poly1305); plain
# rdcp sends the data in the clear, rdcp --encrypt with AES-256-GCM.
#
# What is measured, per row: wall seconds of the client command (process
# start to exit: SSH login, the far end's start and its exit status
# included); GB/s = bytes / wall / 1e9, files/s = COUNT / wall; × scp,
# × rsync, × tar = that tool's wall / this row's wall (above 1: faster);
# CPU s = user+sys of the client and its children (/usr/bin/time); far CPU s
# = what sshd's sessions spent meanwhile (the far rdrecv, scp/sftp-server,
# rsync, tar and sshd's own crypto), from sshd's reaped children in /proc;
# peak RSS = the largest client process.
#
# Correctness: every copy is compared with its source (cmp, diff -r)
# before its time is kept; a failed copy or check gives the row no number.
# The last lines compare rdcp with the goals: the file >= 4 x scp and
# >= 5 x rsync; the tree >= 2 x tar|ssh and >= 3 x rsync; --encrypt >= 3 x
# scp.  Exit status non-zero if a row failed (not if a goal was missed).
#
# Everything lives in a scratch directory under BENCH_TMPDIR; the sshd and
# both namespaces are removed on exit (trap).
# shellcheck source=bench/lib.bash
. "$(dirname "${BASH_SOURCE[0]}")/lib.bash"
bench_init rdcp

BYTES=$(to_bytes "${SIZE:-4G}")
MODEL_ONE=$(to_bytes "${MODEL:-1G}")
MODEL_FILES=${MODEL_FILES:-10}
COUNT=${COUNT:-20000}
RDCP=${RDCP:-$BENCH_REPO/build/rdcp}
read -r -a RDCP_EXTRA <<<"${RDCP_OPTS:-}"
[[ $COUNT =~ ^[1-9][0-9]*$ ]] || die "COUNT must be a positive integer"
[ "$BYTES" -gt 0 ] || die "SIZE must be > 0"
[[ ${SYNC:-0} =~ ^[01]$ ]] || die "SYNC must be 0 or 1"
TIMEOUT=${TIMEOUT:-$((300 + BYTES / 10000000 + COUNT / 50))}
[ "$(id -u)" -eq 0 ] || die "needs root (network namespaces)"
[ -x "$RDCP" ] || die "$RDCP not built (make)"
bin=$(dirname "$RDCP")
{ [ -x "$bin/rdsend" ] && [ -x "$bin/rdrecv" ]; } || die "no rdsend/rdrecv next to $RDCP"
# private copies: a `make` elsewhere must not swap a binary mid-run
RDX_BUILD=$TMPD/bin
mkdir -p "$RDX_BUILD"
cp "$RDCP" "$bin/rdsend" "$bin/rdrecv" "$RDX_BUILD/"
RDCP=$RDX_BUILD/rdcp
need_cmds ssh scp rsync tar ip ss openssl python3 cmp diff timeout
[ -x /usr/sbin/sshd ] || bash "$BENCH_REPO/scripts/deps.sh" bench >&2

# ---------------------------------------------------------------- sshd
# shellcheck source=bench/sshd.bash
. "$(dirname "${BASH_SOURCE[0]}")/sshd.bash"

export HOME=$TMPD/home # no ~/.ssh of the user's, for ssh nor for libssh
mkdir -p "$HOME"
unset SSH_AUTH_SOCK
# shellcheck disable=SC2119 # sshd_setup takes no arguments
sshd_setup
SSHD_PID=$(cat "$SSHD_DIR/sshd.pid")
# scp speaks SFTP since OpenSSH 9.0; the tests' sshd has no subsystem for
# it.  Add one (outside the Match block) and make sshd reread its config.
sed -i '/^Match /i Subsystem sftp internal-sftp' "$SSHD_DIR/sshd_config"
/usr/sbin/sshd -t -f "$SSHD_DIR/sshd_config" || die "sshd_config with sftp does not parse"
kill -HUP "$SSHD_PID"
SSH_OPTS=(-F "$SSH_CONFIG" -o IdentitiesOnly=yes -o IdentityAgent=none -o BatchMode=yes)
SSH_LINE="ssh ${SSH_OPTS[*]}"
ssh_ok() { in_b ssh "${SSH_OPTS[@]}" rdxhost true </dev/null 2>"$TMPD/ssh.err"; }
wait_until 10 ssh_ok || { cat "$TMPD/ssh.err" >&2; die "cannot log in to the test sshd"; }
SSHD_PID=$(cat "$SSHD_DIR/sshd.pid")
CIPHER=$(ssh -G "${SSH_OPTS[@]}" rdxhost 2>/dev/null | sed -n 's/^ciphers //p' | cut -d, -f1)

# want_case CASE: some row of CASE matches ONLY
want_case() {
	local t
	for t in scp rsync tar rdcp rdcp--direct; do
		want "$t $1" && return 0
	done
	return 1
}

# ---------------------------------------------------------------- data
avail=$(df -P -B1 "$TMPD" | awk 'NR==2 {print $4}')
# the file and its copy; the tree and a copy per tree row (kept to the end)
need=$((BYTES * 2 + COUNT * 65536 * (1 + 4 * ${RUNS:-1}) + 2 * MODEL_FILES * MODEL_ONE + 512 * 1024 * 1024))
[ "$avail" -gt "$need" ] || die "need $need bytes free under $TMPD, have $avail"
SRC=$TMPD/one.bin
TREE=$TMPD/tree
log "generating $BYTES bytes and a tree of $COUNT files in $TMPD"
mkdata "$SRC" "$BYTES"
mktree_bench "$TREE" "$COUNT"
TREE_BYTES=$(find "$TREE" -type f -printf '%s\n' | awk '{s += $1} END {print s}')
# the model: MODEL_FILES shards (each its own bytes), a config, 200 small files
MODEL_DIR=$TMPD/model
if want_case ready; then
	mkdir -p "$MODEL_DIR"
	for i in $(seq 1 "$MODEL_FILES"); do
		f=$(printf '%s/model-%05d-of-%05d.safetensors' "$MODEL_DIR" "$i" "$MODEL_FILES")
		openssl enc -aes-128-ctr -nosalt -pbkdf2 -pass "pass:rdxfer-model-$i" </dev/zero 2>/dev/null |
			head -c "$MODEL_ONE" >"$f" || true
		[ "$(stat -c %s "$f")" -eq "$MODEL_ONE" ] || die "could not generate $f"
	done
	mktree_bench "$MODEL_DIR/small" 200
fi
MODEL_BYTES=0 # no model when ONLY leaves the ready case out (find would fail)
[ ! -d "$MODEL_DIR" ] ||
	MODEL_BYTES=$(find "$MODEL_DIR" -type f -printf '%s\n' | awk '{s += $1} END {print s + 0}')
cat "$SRC" >/dev/null
find "$TREE" -type f -exec cat {} + >/dev/null
[ ! -d "$MODEL_DIR" ] || find "$MODEL_DIR" -type f -exec cat {} + >/dev/null

# rdcp's tree mode: listed in --help, or a local trial copy works
RDCP_R=0
if grep -q -- --recursive <<<"$("$RDCP" --help 2>&1 || true)"; then
	RDCP_R=1
else
	mkdir -p "$TMPD/try/a/b" && echo x >"$TMPD/try/a/b/c"
	if timeout 20 "$RDCP" -q -r "$TMPD/try/a" "$TMPD/try/z" >/dev/null 2>&1 &&
		diff -r "$TMPD/try/a" "$TMPD/try/z" >/dev/null 2>&1; then
		RDCP_R=1
	fi
	rm -rf "$TMPD/try"
fi

# ---------------------------------------------------------------- rows
# cmd TOOL CASE SRC DST: fills CMD (run in namespace B); the ready case
# copies a tree as the tree case does
cmd() {
	local tool=$1 c=${2/ready/tree} src=$3 dst=$4
	case "$tool $c" in
	"scp file") CMD=(scp -q "${SSH_OPTS[@]}" "$src" "rdxhost:$dst") ;;
	"scp tree") CMD=(scp -q -r "${SSH_OPTS[@]}" "$src" "rdxhost:$dst") ;;
	"rsync file") CMD=(rsync -a -e "$SSH_LINE" "$src" "rdxhost:$dst") ;;
	"rsync tree") CMD=(rsync -a -e "$SSH_LINE" "$src/" "rdxhost:$dst/") ;;
	"tar file")
		# shellcheck disable=SC2016 # expanded by the inner bash
		CMD=(bash -c 'set -o pipefail; tar cf - -C "${1%/*}" "${1##*/}" |
			$SSH_LINE rdxhost "tar xf - -C ${2%/*}"' bash "$src" "$dst") ;;
	"tar tree")
		# shellcheck disable=SC2016
		CMD=(bash -c 'set -o pipefail; tar cf - -C "$1" . |
			$SSH_LINE rdxhost "mkdir -p $2 && tar xf - -C $2"' bash "$src" "$dst") ;;
	"rdcp file") CMD=("$RDCP" -q "${RDCP_EXTRA[@]}" -F "$SSH_CONFIG" --remote-path "$RDX_BUILD" "$src" "rdxhost:$dst") ;;
	"rdcp tree") CMD=("$RDCP" -q -r "${RDCP_EXTRA[@]}" -F "$SSH_CONFIG" --remote-path "$RDX_BUILD" "$src" "rdxhost:$dst") ;;
	"rdcp--encrypt file") CMD=("$RDCP" -q --encrypt "${RDCP_EXTRA[@]}" -F "$SSH_CONFIG" --remote-path "$RDX_BUILD" "$src" "rdxhost:$dst") ;;
	"rdcp--direct file") CMD=("$RDCP" -q --direct always "${RDCP_EXTRA[@]}" -F "$SSH_CONFIG" --remote-path "$RDX_BUILD" "$src" "rdxhost:$dst") ;;
	"rdcp--direct tree") CMD=("$RDCP" -q -r --direct always "${RDCP_EXTRA[@]}" -F "$SSH_CONFIG" --remote-path "$RDX_BUILD" "$src" "rdxhost:$dst") ;;
	esac
}
export SSH_LINE

# far_idle: sshd has reaped every session (so its children's CPU is in)
far_idle() { [ -z "$(pgrep -P "$SSHD_PID")" ]; }

# Trees are received into a new directory per row and removed only at the
# end.  Removing 20000 files just before the next row would make that row's
# creates slow for reasons of the file system, not of the tool: ext4
# without a journal (this VM's root) does not reuse an inode within 60 s of
# its deletion (300 s while its table block is dirty) and scans past every
# such inode on each create, which cost all tools alike several seconds
# and made the rows measure ext4's allocator.
#
# In tmpfs it is the other way round: a copy kept is memory taken, and the
# next row's copy lands in memory not used before.  In a VM that returns
# free memory to its host (virtio-balloon free page reporting, as on the
# 2-core VM this was written on) that first touch costs a host fault a
# page: the same rdsend -r of this tree took 1.35 s, then 2.0 and 3.1 s as
# copies piled up in /dev/shm, and whichever tool ran last looked slowest.
# So in tmpfs each row starts by removing the copy before it, and reuses
# its pages.
TREE_ROWS=0
KEEP_TREES=1
[ "$(stat -f -c %T "$TMPD")" != tmpfs ] || KEEP_TREES=0
row() {
	local tool=$1 c=$2 name="$1 $2" d=$TMPD/r rc=0 f0 f1 far src dst
	want "$name" || return 0
	rm -rf "$d" "$TMPD/dst"
	[ "$KEEP_TREES" = 1 ] || rm -rf "$TMPD/trees" # the last row's copy
	mkdir -p "$d"
	if [ "$c" = ready ] && [[ $tool = rdcp* ]] && [ "$RDCP_R" -eq 0 ]; then
		add_row "$name"
		R_NOTE[$name]="rdcp -r: not available in this build"
		return 0
	fi
	if [ "$c" = tree ]; then
		TREE_ROWS=$((TREE_ROWS + 1))
		mkdir -p "$TMPD/trees/$TREE_ROWS"
		ln -s "trees/$TREE_ROWS" "$TMPD/dst"
	else
		mkdir -p "$TMPD/dst"
	fi
	if [ "$c" = tree ] && [ "$tool" = rdcp ] && [ "$RDCP_R" -eq 0 ]; then
		add_row "$name"
		R_NOTE[$name]="rdcp -r: not available in this build"
		return 0
	fi
	if [ "$c" = file ]; then src=$SRC dst=$TMPD/dst/one.bin; else src=$TREE dst=$TMPD/dst/tree; fi
	[ "$c" != ready ] || src=$MODEL_DIR dst=$TMPD/dst/model
	cmd "$tool" "$c" "$src" "$dst"
	sync
	wait_until 5 far_idle || true
	f0=$(proc_cpu "$SSHD_PID")
	timed "$d" ip netns exec "$NS_B" "${CMD[@]}" || rc=$?
	if [ "${SYNC:-0}" = 1 ] && [ "$rc" -eq 0 ]; then
		local w=$T_WALL t0
		t0=$(now)
		sync -f "$TMPD"
		T_WALL=$(awk -v w="$w" -v a="$t0" -v b="$(now)" 'BEGIN {printf "%.3f", w + b - a}')
	fi
	if [ "$c" = ready ] && [ "$rc" -eq 0 ]; then
		# the copy read back once, as a worker loading it would
		local w=$T_WALL t0
		[ -d "$dst/model" ] && [ "$(ls "$dst")" = model ] && dst=$dst/model
		t0=$(now)
		find "$dst" -type f -exec cat {} + >/dev/null
		T_WALL=$(awk -v w="$w" -v a="$t0" -v b="$(now)" 'BEGIN {printf "%.3f", w + b - a}')
		R_READ[$name]=$(awk -v a="$t0" -v b="$(now)" 'BEGIN {printf "%.3f", b - a}')
	fi
	wait_until 5 far_idle || log "$name: a session is still running on the far side"
	f1=$(proc_cpu "$SSHD_PID")
	far=$(awk -v a="$f0" -v b="$f1" 'BEGIN {printf "%.2f", b - a}')
	if [ "$rc" -ne 0 ]; then
		fail_row "$name" "$d" "exit $rc"
		return 0
	fi
	if [ "$c" = file ]; then
		cmp -s "$SRC" "$dst" || { fail_row "$name" "$d" "the copy differs from the source"; return 0; }
	else
		# a tree copied into DST rather than as DST is still a copy
		[ -d "$dst/tree" ] && [ "$(ls "$dst")" = tree ] && dst=$dst/tree
		[ -d "$dst/model" ] && [ "$(ls "$dst")" = model ] && dst=$dst/model
		diff -r "$src" "$dst" >"$d/diff" 2>&1 ||
			{ fail_row "$name" "$d" "the copy differs from the source: $(head -n3 "$d/diff" | tr '\n' ' ')"; return 0; }
	fi
	[ "$c" = tree ] || rm -rf "$TMPD/dst"
	record "$name" "$T_WALL" "$T_CPU" "$T_RSS" "$far"
}

log "sshd in $NS_A ($IP_A), clients in $NS_B ($IP_B), cipher $CIPHER"
log "rdcp -r: $([ "$RDCP_R" -eq 1 ] && echo available || echo "not available in this build")"
log "file $BYTES bytes; tree $COUNT files, $TREE_BYTES bytes; ready: $MODEL_BYTES bytes; runs $RUNS; timeout ${TIMEOUT}s"
TOOLS=(scp rsync tar rdcp rdcp--direct rdcp--encrypt)
declare -A R_READ
# skip TOOL CASE: rows that are not run
skip() {
	case "$1 $2" in
	"rdcp--encrypt tree" | "rdcp--encrypt ready" | "rdcp--direct tree") return 0 ;;
	esac
	return 1
}
for run in $(seq 1 "$RUNS"); do
	[ "$RUNS" -gt 1 ] && log "--- run $run/$RUNS"
	for c in file tree ready; do
		for tool in "${TOOLS[@]}"; do
			skip "$tool" "$c" || row "$tool" "$c"
		done
	done
done

# ---------------------------------------------------------------- report
echo
echo "rdxfer rdcp bench, $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, $(uname -r)"
echo "sshd $(ssh -V 2>&1 | cut -d, -f1) in a network namespace, clients in another, over a veth pair; SSH cipher $CIPHER"
echo "rdcp: $("$RDCP" --version 2>&1 | head -n1); rdcp -r: $([ "$RDCP_R" -eq 1 ] && echo available || echo not available in this build)"
[ -z "${RDCP_OPTS:-}" ] || echo "every rdcp row with: $RDCP_OPTS"
[ "${SYNC:-0}" != 1 ] || echo "SYNC=1: s counts until a sync -f of $(dirname "$TMPD") returned (the copy on disk)"
echo "file: $BYTES bytes; tree: $COUNT files of 4-64 KiB, $TREE_BYTES bytes; ready: $MODEL_FILES files of $MODEL_ONE bytes and 200 of 4-64 KiB, $MODEL_BYTES bytes, copied then read back (cat), both timed; best of $RUNS run(s)"
echo
echo "| case | tool | s | rate | × scp | × rsync | × tar\\|ssh | CPU s | far CPU s | peak RSS MiB |"
echo "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"
for c in file tree ready; do
	for tool in "${TOOLS[@]}"; do
		n="$tool $c"
		label=${tool/--encrypt/ --encrypt}
		label=${label/--direct/ --direct always}
		[ "$tool" = tar ] && label="tar c \\| ssh tar x"
		[ "$tool" = rsync ] && label="rsync -a -e ssh"
		[ "$tool $c" = "rdcp tree" ] && label="rdcp -r"
		[ "$tool $c" = "rdcp ready" ] && label="rdcp -r"
		[ "$tool $c" = "rdcp--direct ready" ] && label="rdcp -r --direct always"
		[ -z "${R_READ[$n]:-}" ] || label="$label (read back ${R_READ[$n]} s)"
		if [ -n "${R_WALL[$n]:-}" ]; then
			w=${R_WALL[$n]}
			if [ "$c" = file ]; then
				rate=$(awk -v b="$BYTES" -v w="$w" 'BEGIN {printf "%.3f GB/s", b / w / 1e9}')
			elif [ "$c" = ready ]; then
				rate=$(awk -v b="$MODEL_BYTES" -v w="$w" 'BEGIN {printf "%.3f GB/s", b / w / 1e9}')
			else
				rate=$(awk -v n="$COUNT" -v w="$w" 'BEGIN {printf "%.0f files/s", n / w}')
			fi
			rss=$(awk -v k="${R_RSS[$n]}" 'BEGIN {printf "%.1f", k / 1024}')
			echo "| $c | $label | $w | $rate | $(speedup "$n" "scp $c") | $(speedup "$n" "rsync $c") | $(speedup "$n" "tar $c") | ${R_CPU[$n]} | ${R_FAR[$n]} | $rss |"
		elif [ -n "${R_NOTE[$n]:-}" ]; then
			echo "| $c | $label | ${R_NOTE[$n]} | | | | | | | |"
		fi
	done
done
echo

goal "file: rdcp >= 4 x scp" "rdcp file" "scp file" 4
goal "file: rdcp >= 5 x rsync" "rdcp file" "rsync file" 5
goal "tree: rdcp -r >= 2 x tar|ssh" "rdcp tree" "tar tree" 2
goal "tree: rdcp -r >= 3 x rsync" "rdcp tree" "rsync tree" 3
goal "file: rdcp --encrypt >= 3 x scp" "rdcp--encrypt file" "scp file" 3
goal "ready: rdcp -r >= 1 x rdcp -r --direct always (the O_DIRECT build)" "rdcp ready" "rdcp--direct ready" 1
goal "ready: rdcp -r >= 1 x scp -r" "rdcp ready" "scp ready" 1
goal "ready: rdcp -r >= 1 x rsync" "rdcp ready" "rsync ready" 1
goal "ready: rdcp -r >= 1 x tar|ssh" "rdcp ready" "tar ready" 1
[ ${#FAILED[@]} -eq 0 ] || { echo; echo "FAILED ROWS: ${FAILED[*]}"; }
[ ${#FAILED[@]} -eq 0 ]
