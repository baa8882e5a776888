#!/usr/bin/env bats
# --resume: a file copy that fails keeps what it wrote as .NAME.rdx-part
# with a record (.NAME.rdx-part.meta, "have BYTES"); run again with
# --resume, both ends hash that part (XXH3-128) and only the rest is sent
# when the hashes agree.  rdsend/rdrecv across two namespaces, and rdcp
# through the tests' sshd, with the veth pair slowed to 40 Mbit/s (tc tbf)
# so that a copy can be killed midway.

load ../lib/common
load ../lib/netns
load ../lib/sshd

setup_file() {
	CLEANUPS=()
	sshd_setup
	# Both directions at 40 Mbit/s: SIZE takes about 5 s.
	in_b tc qdisc add dev veth1 root tbf rate 40mbit burst 64kb latency 400ms
	in_a tc qdisc add dev veth0 root tbf rate 40mbit burst 64kb latency 400ms
}

teardown_file() {
	sshd_teardown
}

setup() {
	rdcp_test_setup
	SIZE=$((24 * 1024 * 1024))
	mkrand "$D/src" "$SIZE"
}

in_ns_a() { NETNS_EXEC="ip netns exec $NS_A" "$@"; }

# partial_started SRC DST: DST's partial holds SRC's first MiB.
partial_started() {
	local part
	part=$(part_of "$2")
	[ -f "$part" ] && cmp -s -n 1048576 "$1" "$part"
}

# part_of DST: the path of DST's partial: .NAME.rdx-part, or for a NAME
# over 200 bytes .NAME-CUT-AT-200~HASH.rdx-part.
part_of() {
	local dir=${1%/*} base=${1##*/}
	if [ "${#base}" -gt 200 ]; then
		find "$dir" -maxdepth 1 -name ".${base:0:200}~*.rdx-part" | head -n 1
	else
		echo "$dir/.$base.rdx-part"
	fi
}

record_started() {
	[ "$(recorded "$1" 2>/dev/null || echo 0)" -gt 0 ] 2>/dev/null
}

# recorded DST: what DST's partial record says is complete.
recorded() {
	sed -n 's/^have \([0-9]*\)$/\1/p' "$(part_of "$1").meta"
}

# sent_bytes: the byte count of rdsend's/rdcp's -v line in $stderr.
sent_bytes() {
	sed -n 's/.* \(sent\|received\) \([0-9]*\) bytes in .*/\2/p' <<<"$stderr" | tail -n 1
}

# cut_send DST SEND_OPTS...: rdsend --resume from B into rdrecv in A,
# SIGKILLed once DST's partial has data; rdrecv must fail.
cut_send() {
	local dst=$1
	shift
	port=$(in_ns_a free_port)
	in_ns_a start_recv --timeout 5 "$port" "$KEY" "$dst"
	in_ns_a wait_listen "$port"
	NETNS_EXEC="ip netns exec $NS_B" start_send --resume "$@" "$IP_A" "$port" "$KEY" "$D/src"
	wait_until 20 partial_started "$D/src" "$dst" || fail "no partial with data: $(ls -la "${dst%/*}")"
	kill -KILL "$SEND_PID"
	wait_recv 30
	[ "$RECV_RC" -ne 0 ] || fail "rdrecv exited 0 after its sender was killed"
	[ ! -e "$dst" ] || fail "a file under the final name after the kill"
}

# resume_send DST SEND_OPTS...: the same copy again, to its end.
resume_send() {
	local dst=$1
	shift
	port=$(in_ns_a free_port)
	in_ns_a start_recv --timeout 10 "$port" "$KEY" "$dst"
	in_ns_a wait_listen "$port"
	run_t --secs 60 ip netns exec "$NS_B" "$RDSEND" -v --resume "$@" "$IP_A" "$port" "$KEY" "$D/src"
	wait_recv 30
}

@test "rdsend --resume: a copy killed midway goes on from what the receiver has, checked" {
	cut_send "$D/dst"
	have=$(recorded "$D/dst")
	[ -n "$have" ] && [ "$have" -gt 0 ] && [ "$have" -lt "$SIZE" ] ||
		fail "record says '$have' of $SIZE"
	[ $((have % 1048576)) -eq 0 ] || fail "record $have is not whole slots"
	cmp -s -n "$have" "$D/src" "$D/.dst.rdx-part" || fail "the record claims bytes the partial lacks"
	resume_send "$D/dst"
	assert_status 0
	assert_rc recv "$RECV_RC" 0
	assert_match "$stderr" "resuming: the receiver has the first $have bytes"
	[ "$(sent_bytes)" -eq $((SIZE - have)) ] || fail "sent $(sent_bytes) bytes, want $((SIZE - have))"
	assert_same "$D/src" "$D/dst"
	assert_no_temp "$D/dst"
	[ ! -e "$D/.dst.rdx-part.meta" ] || fail "the record is left"
}

@test "a FILE name of 255 bytes (NAME_MAX): received new, over an old file, and resumed" {
	# Its temporary cannot be .NAME.rdx-XXXXXXXX: unnamed, or a name cut
	# to fit; the partial's name is cut and told apart by a hash.
	local long
	long=$D/$(printf 'n%.0s' $(seq 255))
	port=$(in_ns_a free_port)
	in_ns_a start_recv --timeout 10 "$port" "$KEY" "$long"
	in_ns_a wait_listen "$port"
	run_t --secs 60 ip netns exec "$NS_B" "$RDSEND" "$IP_A" "$port" "$KEY" "$D/src"
	assert_status 0
	wait_recv 30
	assert_rc recv "$RECV_RC" 0
	assert_same "$D/src" "$long"
	echo old >"$long"
	port=$(in_ns_a free_port)
	in_ns_a start_recv --timeout 10 "$port" "$KEY" "$long"
	in_ns_a wait_listen "$port"
	run_t --secs 60 ip netns exec "$NS_B" "$RDSEND" "$IP_A" "$port" "$KEY" "$D/src"
	assert_status 0
	wait_recv 30
	assert_same "$D/src" "$long"
	rm "$long"
	cut_send "$long"
	[ -n "$(find "$D" -maxdepth 1 -name '.nnn*~*.rdx-part')" ] || fail "no partial: $(ls -a "$D")"
	resume_send "$long"
	assert_status 0
	assert_rc recv "$RECV_RC" 0
	assert_match "$stderr" "resuming: the receiver has the first"
	assert_same "$D/src" "$long"
	[ -z "$(find "$D" -maxdepth 1 -name '.nnn*')" ] || fail "left: $(ls -a "$D")"
}

@test "rdsend --resume --streams 3 --compress --encrypt: the same, sealed and striped" {
	cut_send "$D/dst" --streams 3 --compress --encrypt
	have=$(recorded "$D/dst")
	[ "$have" -gt 0 ] || fail "record says '$have'"
	resume_send "$D/dst" --streams 3 --compress --encrypt
	assert_status 0
	assert_rc recv "$RECV_RC" 0
	assert_match "$stderr" "resuming: the receiver has the first $have bytes"
	assert_same "$D/src" "$D/dst"
	assert_no_temp "$D/dst"
}

@test "rdsend --resume: a partial that differs from the file is sent whole" {
	cut_send "$D/dst"
	have=$(recorded "$D/dst")
	[ "$have" -gt 4096 ] || fail "record says '$have'"
	# One byte of the part the record vouches for is changed: the
	# hashes differ, so nothing of it may be kept.
	flip_byte "$D/.dst.rdx-part" 4000
	cmp -s -n "$have" "$D/src" "$D/.dst.rdx-part" && fail "the byte was not changed"
	resume_send "$D/dst"
	assert_status 0
	assert_rc recv "$RECV_RC" 0
	assert_match "$stderr" "the receiver's partial differs from '$D/src': sending it all"
	[ "$(sent_bytes)" -eq "$SIZE" ] || fail "sent $(sent_bytes) bytes, want all $SIZE"
	assert_same "$D/src" "$D/dst"
	assert_no_temp "$D/dst"
}

@test "rdsend --resume: a record claiming more than the file has, or a complete partial" {
	head -c 1000 "$D/src" >"$D/.dst.rdx-part"
	echo "have 99999999999" >"$D/.dst.rdx-part.meta"
	# The claim is cut to what the partial holds (1000 bytes), which do
	# match: the rest follows them.
	resume_send "$D/dst"
	assert_status 0
	assert_rc recv "$RECV_RC" 0
	assert_match "$stderr" "resuming: the receiver has the first 1000 bytes"
	assert_same "$D/src" "$D/dst"
	assert_no_temp "$D/dst"
	# Everything there already, only not renamed: nothing is sent.
	cp "$D/src" "$D/.dst2.rdx-part"
	echo "have $SIZE" >"$D/.dst2.rdx-part.meta"
	resume_send "$D/dst2"
	assert_status 0
	assert_rc recv "$RECV_RC" 0
	[ "$(sent_bytes)" -eq 0 ] || fail "sent $(sent_bytes) bytes for a complete partial"
	assert_same "$D/src" "$D/dst2"
	assert_no_temp "$D/dst2"
}

@test "without --resume a failed copy leaves nothing; --resume needs a file" {
	port=$(in_ns_a free_port)
	in_ns_a start_recv --timeout 5 "$port" "$KEY" "$D/dst"
	in_ns_a wait_listen "$port"
	NETNS_EXEC="ip netns exec $NS_B" start_send "$IP_A" "$port" "$KEY" "$D/src"
	wait_temp "$D/dst" 20
	kill -KILL "$SEND_PID"
	wait_recv 30
	[ "$RECV_RC" -ne 0 ] || fail "rdrecv exited 0"
	assert_no_temp "$D/dst"
	[ -z "$(find "$D" -name '*.rdx-part*')" ] || fail "a partial without --resume"
	run_t bash -c "echo data | '$RDSEND' --resume 127.0.0.1 1 '$KEY'"
	assert_status 2
	assert_one_line_error "$stderr" rdsend
	assert_match "$stderr" "--resume needs a file to send, not standard input"
	run_t "$RDSEND" -r --resume 127.0.0.1 1 "$KEY" "$D"
	assert_status 2
	assert_match "$stderr" "--resume is for a FILE: trees resume with --sync"
	rdcp_b -r --resume "$D/src" "rdxhost:$D/x"
	assert_status 2
	assert_match "$stderr" "--resume is for files: trees resume with --sync"
}

# slow_disk DIR: DIR becomes a fresh ext4 on a loop device that processes
# in the cgroup SLOW_CG read at 8 MB/s (cgroup v1 blkio, or v2 io).
# Returns 1 with SLOW_WHY when this machine cannot.
slow_disk() {
	local dev mm
	SLOW_CG=
	mount_ext4 "$1" 256M
	dev=$(findmnt -n -o SOURCE "$1")
	mm=$(lsblk -dno MAJ:MIN "$dev" | tr -d ' ')
	if [ -f /sys/fs/cgroup/blkio/blkio.throttle.read_bps_device ]; then
		SLOW_CG=/sys/fs/cgroup/blkio/rdx-slow-$$-$BATS_TEST_NUMBER
		mkdir "$SLOW_CG" && echo "$mm 8388608" >"$SLOW_CG/blkio.throttle.read_bps_device" ||
			{ SLOW_WHY="cannot set a blkio read limit"; return 1; }
	elif grep -qw io /sys/fs/cgroup/cgroup.controllers 2>/dev/null; then
		SLOW_CG=/sys/fs/cgroup/rdx-slow-$$-$BATS_TEST_NUMBER
		{ echo +io >/sys/fs/cgroup/cgroup.subtree_control && mkdir "$SLOW_CG" &&
			echo "$mm rbps=8388608" >"$SLOW_CG/io.max"; } 2>/dev/null ||
			{ SLOW_WHY="cannot set a cgroup v2 io.max read limit"; return 1; }
	else
		SLOW_WHY="neither cgroup v1 blkio nor cgroup v2 io is available"
		return 1
	fi
	CLEANUPS+=(rm_slow_cg)
}

rm_slow_cg() { [ -z "$SLOW_CG" ] || rmdir "$SLOW_CG"; }

@test "--resume: reading a partial for longer than --timeout keeps the connection alive" {
	# The receiver hashes its 24 MiB partial from a disk throttled to
	# 8 MB/s (3 s) while the sender waits with --timeout 1: only the
	# keepalives sent meanwhile keep the sender from giving up.
	slow_disk "$D/slow" || skip "$SLOW_WHY"
	cp "$D/src" "$D/slow/.dst.rdx-part"
	echo "have $SIZE" >"$D/slow/.dst.rdx-part.meta"
	sync
	dd if="$D/slow/.dst.rdx-part" iflag=nocache count=0 status=none # out of the page cache
	port=$(free_port)
	BG_STDOUT=$D/recv.out bg_start recv bash -c 'echo $$ >"$1/cgroup.procs" && exec "$2" -v --timeout 2 "$3" "$4" "$5"' \
		_ "$SLOW_CG" "$RDRECV" "$port" "$KEY" "$D/slow/dst"
	RECV_PID=$BG_PID
	wait_listen "$port"
	t0=$SECONDS
	run_t "$RDSEND" -v --timeout 1 --resume 127.0.0.1 "$port" "$KEY" "$D/src"
	assert_status 0
	[ $((SECONDS - t0)) -ge 2 ] || fail "the partial was read in under 2 s: the throttle did not hold"
	assert_match "$stderr" "resuming: the receiver has the first $SIZE bytes"
	wait_recv 30
	assert_rc recv "$RECV_RC" 0
	assert_same "$D/src" "$D/slow/dst"
}

# cut_rdcp SRC DST: rdcp --resume SIGKILLed once DST's partial has data.
cut_rdcp() {
	BG_STDOUT=$D/rdcp.out bg_start rdcp ip netns exec "$NS_B" "$RDCP" -F "$SSH_CONFIG" \
		--remote-path "$RDX_BUILD" --timeout 5 --resume "$1" "$2"
	local local_dst=${2#rdxhost:}
	# The receiver records its progress twice a second: wait for one.
	wait_until 30 record_started "$local_dst" || fail "no partial with a record of data"
	kill -KILL "$BG_PID"
	# The far end notices within --timeout and keeps its partial.
	wait_until 20 eval '! ns_running "$NS_A" rdrecv && ! ns_running "$NS_A" rdsend' ||
		fail "the far side still runs"
}

@test "rdcp --resume: push and pull, each killed midway, then finished from where they stopped" {
	cut_rdcp "$D/src" "rdxhost:$D/far"
	have=$(recorded "$D/far")
	[ "$have" -gt 0 ] || fail "push: record says '$have'"
	rdcp_b -v --resume "$D/src" "rdxhost:$D/far"
	assert_status 0
	assert_match "$stderr" "resuming: the receiver has the first $have bytes"
	assert_same "$D/src" "$D/far"
	assert_no_temp "$D/far"

	cut_rdcp "rdxhost:$D/src" "$D/near"
	have=$(recorded "$D/near")
	[ "$have" -gt 0 ] || fail "pull: record says '$have'"
	rdcp_b -v --resume "rdxhost:$D/src" "$D/near"
	assert_status 0
	assert_match "$stderr" "resuming '$D/near' after its first $have bytes"
	assert_same "$D/src" "$D/near"
	assert_no_temp "$D/near"
}

@test "rdcp --resume on one host: killed midway, then finished from the partial; a partial that differs is redone" {
	# The source sits on a disk that rdcp reads at 8 MB/s (3 s for it).
	slow_disk "$D/slow" || skip "$SLOW_WHY"
	cp "$D/src" "$D/slow/src"
	sync
	dd if="$D/slow/src" iflag=nocache count=0 status=none # out of the page cache
	BG_STDOUT=$D/rdcp.out bg_start rdcp bash -c 'echo $$ >"$1/cgroup.procs" && exec "$2" --resume "$3" "$4"' \
		_ "$SLOW_CG" "$RDCP" "$D/slow/src" "$D/near"
	wait_until 30 record_started "$D/near" || fail "no partial with a record of data"
	kill -KILL "$BG_PID"
	wait "$BG_PID" 2>/dev/null || true
	[ ! -e "$D/near" ] || fail "a file under the final name after the kill"
	have=$(recorded "$D/near")
	[ "$have" -gt 0 ] && [ "$have" -lt "$SIZE" ] || fail "record says '$have' of $SIZE"
	run_t "$RDCP" -v --resume "$D/slow/src" "$D/near"
	assert_status 0
	assert_match "$stderr" "resuming '$D/near' after its first $have bytes"
	assert_match "$stderr" "copied $((SIZE - have)) bytes locally"
	assert_same "$D/src" "$D/near"
	assert_no_temp "$D/near"
	# A partial whose vouched-for bytes differ from the source: all again.
	head -c 4194304 "$D/src" >"$D/.other.rdx-part"
	flip_byte "$D/.other.rdx-part" 1000
	echo "have 4194304" >"$D/.other.rdx-part.meta"
	run_t "$RDCP" -v --resume "$D/src" "$D/other"
	assert_status 0
	assert_match "$stderr" "the partial of '$D/other' differs from '$D/src': copying it whole"
	assert_match "$stderr" "copied $SIZE bytes locally"
	assert_same "$D/src" "$D/other"
	assert_no_temp "$D/other"
	# Only a regular file can be resumed.
	run_t "$RDCP" --resume /dev/zero "$D/zero"
	assert_status 2
	assert_match "$stderr" "--resume needs a regular file: '/dev/zero' is not one"
}
