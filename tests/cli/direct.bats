#!/usr/bin/env bats
# --direct auto|always|never (src/core/direct.h, docs/CLI.md "Page cache"):
# what rdrecv and rds3 write goes through the page cache or around it.
# Whatever the policy, the data is the same, it is written under a
# temporary and renamed when complete, and a write that fails leaves
# nothing under the final name.  Where the data is afterwards is read
# with fincore(1) (util-linux) before anything else reads the copy.
# (rdcp's far end: tests/cli/rdcp.bats, "--direct".)

load ../lib/common
load ../lib/s3serve

SERVE_KEY=RDS3DIRECTKEY
SERVE_SECRET='direct/Secret+1'
RDS3=$RDX_BUILD/rds3

setup() {
	common_setup
	command -v fincore >/dev/null || skip "no fincore (util-linux)"
	# A file system with a page cache of its own and O_DIRECT: not tmpfs.
	W=$D
	if [ "$(stat -f -c %T "$D")" = tmpfs ]; then
		W=$D/fs
		mount_ext4 "$W" 256M
	fi
}

# cached FILE: how many of FILE's pages are in the page cache.
cached() {
	fincore -n -o PAGES "$1" | tr -d ' '
}

# pages FILE: how many pages FILE has.
pages() {
	echo $((($(fsize "$1") + 4095) / 4096))
}

# recv_with POLICY SIZE [RECV_OPTS...]: SIZE random bytes from rdsend
# (a file; SRC=pipe: through a pipe, size unknown) into rdrecv -v
# --direct POLICY; both exit 0.  Sets CACHED (the copy's pages in the
# page cache, read first), then checks the copy and that no temporary is
# left.  RECV_PREFIX: a command rdrecv runs under.
recv_with() {
	local policy=$1 size=$2
	shift 2
	mkrand "$W/src" "$size"
	rm -f "$W/dst"
	port=$(free_port)
	NETNS_EXEC=${RECV_PREFIX:-} start_recv -v --timeout 10 --direct "$policy" "$@" \
		"$port" "$KEY" "$W/dst"
	wait_listen "$port"
	if [ "${SRC:-file}" = pipe ]; then
		run_t bash -c 'cat "$1" | "$2" --timeout 10 127.0.0.1 "$3" "$4"' _ \
			"$W/src" "$RDSEND" "$port" "$KEY"
	else
		run_t "$RDSEND" --timeout 10 127.0.0.1 "$port" "$KEY" "$W/src"
	fi
	assert_status 0
	wait_recv 30
	assert_rc recv "$RECV_RC" 0
	CACHED=$(cached "$W/dst")
	assert_same "$W/src" "$W/dst"
	assert_no_temp "$W/dst"
}

# mem_cgroup BYTES: a memory cgroup limited to BYTES (v2, else v1's
# memory controller) in $CG, removed in teardown; skips where none can
# be made.
mem_cgroup() {
	local name=rdx-direct-$$-$BATS_TEST_NUMBER
	if grep -qw memory /sys/fs/cgroup/cgroup.controllers 2>/dev/null &&
		mkdir "/sys/fs/cgroup/$name" 2>/dev/null; then
		CG=/sys/fs/cgroup/$name
		echo "$1" >"$CG/memory.max" || skip "cannot limit a cgroup v2's memory"
	elif [ -d /sys/fs/cgroup/memory ] && mkdir "/sys/fs/cgroup/memory/$name" 2>/dev/null; then
		CG=/sys/fs/cgroup/memory/$name
		echo "$1" >"$CG/memory.limit_in_bytes" || skip "cannot limit a cgroup v1's memory"
	else
		skip "no memory cgroup can be made here"
	fi
	CLEANUPS+=(cgroup_remove)
	printf '#!/bin/sh\necho $$ >"%s/cgroup.procs" || exit 99\nexec "$@"\n' "$CG" >"$D/incg"
	chmod +x "$D/incg"
}

cgroup_remove() {
	rmdir "$CG" 2>/dev/null
}

@test "--direct never: the data is the same, renamed from its temporary, and in the page cache afterwards" {
	recv_with never $((8 * 1024 * 1024 + 100))
	[ "$CACHED" -eq "$(pages "$W/dst")" ] || fail "$CACHED of $(pages "$W/dst") pages cached"
	assert_file_match "$D/recv.err" "^rdrecv: writing '.*/dst': page cache \\(--direct never\\)$"
}

@test "--direct auto, a file small against the memory available: through the page cache" {
	recv_with auto $((8 * 1024 * 1024 + 100))
	[ "$CACHED" -eq "$(pages "$W/dst")" ] || fail "$CACHED of $(pages "$W/dst") pages cached"
	assert_file_match "$D/recv.err" "writing '.*/dst': page cache \\(--direct auto: 8\\.00 MiB is within a quarter of the .* available\\)$"
}

@test "--direct always: around the page cache (its unaligned tail aside)" {
	recv_with always $((8 * 1024 * 1024 + 100))
	[ "$CACHED" -le 1 ] || fail "$CACHED of $(pages "$W/dst") pages cached"
	assert_file_match "$D/recv.err" "writing '.*/dst': O_DIRECT \\(--direct always\\)$"
}

@test "--direct auto, a file past a quarter of what a 64 MiB memory cgroup leaves: O_DIRECT, one write at a time" {
	mem_cgroup $((64 * 1024 * 1024))
	# Each O_DIRECT write takes 20 ms longer (the shim): four writers
	# would have several in flight, as --direct always does below.
	RECV_PREFIX="$D/incg $(shimmed RDX_SHIM_DIRECT_DEPTH="$D/depth")" recv_with auto $((24 * 1024 * 1024))
	[ "$CACHED" -le 1 ] || fail "$CACHED of $(pages "$W/dst") pages cached"
	assert_file_match "$D/recv.err" "O_DIRECT, one write at a time \\(--direct auto: 24\\.00 MiB is past a quarter of the .* available\\)$"
	[ "$(cat "$D/depth")" = 1 ] || fail "auto: $(cat "$D/depth") O_DIRECT writes in flight at once"
	RECV_PREFIX="$D/incg $(shimmed RDX_SHIM_DIRECT_DEPTH="$D/depth")" recv_with always $((24 * 1024 * 1024))
	[ "$(cat "$D/depth")" -gt 1 ] || fail "always: $(cat "$D/depth") O_DIRECT writes in flight at once"
}

@test "--direct auto, a stream of unknown size in a 64 MiB memory cgroup: its start through the page cache, the rest O_DIRECT" {
	mem_cgroup $((64 * 1024 * 1024))
	SRC=pipe RECV_PREFIX=$D/incg recv_with auto $((40 * 1024 * 1024))
	# The slot that straddles the line goes through the cache whole.
	[ "$CACHED" -gt 0 ] && [ "$CACHED" -le $((20 * 256)) ] ||
		fail "$CACHED of $(pages "$W/dst") pages cached"
	assert_file_match "$D/recv.err" "page cache, paced for the first .*, O_DIRECT one write at a time past it \\(--direct auto: the size is not known"
}

@test "--fsync under each policy: the data is the same and renamed" {
	for p in auto always never; do
		recv_with "$p" $((3 * 1024 * 1024 + 5)) --fsync
	done
}

@test "a write that fails midway under each policy: rdrecv exits 4, nothing under the final name" {
	[ -x "$RDX_BUILD/tests/shim.so" ] || fail "shim not built: $RDX_BUILD/tests/shim.so"
	mkrand "$W/src" $((12 * 1024 * 1024))
	for p in auto always never; do
		port=$(free_port)
		# Writes reaching past 5 MiB fail, as a failing disk's would.
		NETNS_EXEC=$(shimmed RDX_SHIM_EIO_FROM=$((5 * 1024 * 1024))) \
			start_recv --timeout 10 --direct "$p" "$port" "$KEY" "$W/dst"
		wait_listen "$port"
		run_t "$RDSEND" --timeout 10 127.0.0.1 "$port" "$KEY" "$W/src"
		assert_status 5
		wait_recv 30
		assert_rc recv "$RECV_RC" 4
		assert_file_match "$D/recv.err" "Input/output error"
		assert_no_output_file "$W/dst"
	done
}

@test "--direct: a value other than auto, always or never is a usage error" {
	run_t "$RDRECV" --direct sometimes 1234 k "$W/dst"
	assert_status 2
	assert_match "$stderr" "invalid value 'sometimes' for --direct: expected auto, always or never"
	run_t "$RDS3" --no-sign-request --endpoint http://127.0.0.1:9 --direct always ls
	assert_status 2
	assert_match "$stderr" "--direct is for get, cp and sync"
}

@test "rds3 get --direct never|auto|always: the object is the same; in the page cache afterwards, or not" {
	local t=$BATS_FILE_TMPDIR p want
	mkdir -p "$t/store/direct-b"
	mkrand "$t/store/direct-b/obj" $((20 * 1024 * 1024 + 100)) # three ranges of 8 MiB
	serve_start direct "$t/store" || fail "rds3 serve did not start"
	CLEANUPS+=("serve_stop direct")
	export HOME=$D/home AWS_SHARED_CREDENTIALS_FILE=$D/home/.aws/credentials
	export AWS_CONFIG_FILE=$D/home/.aws/config AWS_ACCESS_KEY_ID=$SERVE_KEY
	export AWS_SECRET_ACCESS_KEY=$SERVE_SECRET AWS_ENDPOINT_URL_S3=$SERVED_URL
	unset AWS_PROFILE AWS_REGION AWS_DEFAULT_REGION AWS_ENDPOINT_URL AWS_SESSION_TOKEN
	for p in never auto always; do
		rm -f "$W/got"
		run_t "$RDS3" -v --direct "$p" get s3://direct-b/obj "$W/got"
		assert_status 0
		want="page cache (--direct never)"
		[ "$p" = auto ] && want="page cache (--direct auto:"
		[ "$p" = always ] && want="O_DIRECT (--direct always)"
		[[ $stderr == *"written: $want"* ]] || fail "rds3 -v said: $stderr"
		CACHED=$(cached "$W/got")
		if [ "$p" = always ]; then
			[ "$CACHED" -eq 0 ] || fail "always: $CACHED pages cached"
		else
			[ "$CACHED" -eq "$(pages "$W/got")" ] || fail "$p: $CACHED of $(pages "$W/got") pages cached"
		fi
		assert_same "$t/store/direct-b/obj" "$W/got"
		assert_no_temp "$W/got"
	done
}
