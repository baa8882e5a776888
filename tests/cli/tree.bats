#!/usr/bin/env bats
# Trees (-r): rdsend -r / rdrecv -r on loopback, rdcp -r both ways against
# a real sshd (tests/lib/sshd.bash: sshd in namespace A, rdcp in B, one
# shared file system), and same-host rdcp -r.  Every copy is compared by
# content and metadata (tests/lib/tree.bash): modes, mtimes, symlinks,
# hard links, empty directories, a sparse file, hostile names.

load ../lib/common
load ../lib/netns
load ../lib/sshd
load ../lib/tree

RDCP_SECS=120
RDCP_TIMEOUT=20

setup_file() {
	CLEANUPS=()
	sshd_setup
	# One big tree for the whole file: making 5000 files takes seconds.
	# Fewer under ASan, where every file costs more.
	mktree "$BATS_FILE_TMPDIR/big" "${RDX_SANITIZED:+500}"
	mktree "$BATS_FILE_TMPDIR/small" 100
}

teardown_file() {
	sshd_teardown
}

setup() {
	rdcp_test_setup
	BIG=$BATS_FILE_TMPDIR/big
	SMALL=$BATS_FILE_TMPDIR/small
}

# send_tree RECV_ARGS -- SEND_ARGS: rdrecv -r in the background, rdsend -r
# in the foreground; sets RECV_RC and status/stderr of rdsend.
send_tree() {
	local recv=() port
	while [ "$1" != -- ]; do recv+=("$1"); shift; done
	shift
	port=$(free_port)
	start_recv --wait 30 "${recv[@]/PORT/$port}"
	wait_listen "$port"
	run_t "$RDSEND" "${@/PORT/$port}"
	wait_recv
}

@test "rdsend -r / rdrecv -r: a tree with every kind of entry arrives whole" {
	mkdir "$D/out"
	send_tree -r PORT key "$D/out" -- -r 127.0.0.1 PORT key "$BIG"
	assert_status 0
	assert_rc recv "$RECV_RC" 0
	assert_same_tree "$BIG" "$D/out/big"
}

@test "rdsend -r: several paths into a directory; --streams 4 --compress --encrypt" {
	mkdir "$D/out"
	send_tree -r PORT key "$D/out" -- -r --streams 4 --compress --encrypt 127.0.0.1 PORT key \
		"$SMALL" "$SMALL/large2" "$SMALL/d3/"
	assert_status 0
	assert_rc recv "$RECV_RC" 0
	assert_same_tree "$SMALL" "$D/out/small"
	assert_same "$SMALL/large2" "$D/out/large2"
	diff -r "$SMALL/d3" "$D/out/d3" || fail "d3 differs"
}

@test "rdrecv -r: a DST that does not exist becomes the tree; two trees need a directory" {
	send_tree -r PORT key "$D/copy" -- -r 127.0.0.1 PORT key "$SMALL/"
	assert_status 0
	assert_rc recv "$RECV_RC" 0
	assert_same_tree "$SMALL" "$D/copy"
	send_tree -r PORT key "$D/new" -- -r 127.0.0.1 PORT key "$SMALL/d1" "$SMALL/d2"
	assert_nonzero
	assert_rc recv "$RECV_RC" 4
	assert_file_match "$D/recv.err" "several trees were sent but 'new' is not a directory"
	[ -z "$(find "$D" -name '.*.rdx-*')" ] || fail "temporaries left"
}

@test "rdrecv without -r refuses a tree, rdrecv -r refuses a stream, rdrecv -r into a file" {
	send_tree PORT key "$D/out.tar" -- -r 127.0.0.1 PORT key "$SMALL"
	assert_nonzero
	assert_rc recv "$RECV_RC" 2
	assert_file_match "$D/recv.err" "sends a directory tree: receive it with -r"
	[ ! -e "$D/out.tar" ] || fail "a tree was written as a file"
	mkrand "$D/in" 1000
	mkdir "$D/dir"
	send_tree -r PORT key "$D/dir" -- 127.0.0.1 PORT key "$D/in"
	assert_nonzero
	assert_rc recv "$RECV_RC" 2
	assert_file_match "$D/recv.err" "sends a stream, not a directory tree"
	send_tree -r PORT key "$D/in" -- -r 127.0.0.1 PORT key "$SMALL"
	assert_nonzero
	assert_rc recv "$RECV_RC" 4
	assert_file_match "$D/recv.err" "cannot replace the file 'in' with a directory"
	run_t "$RDSEND" -r 127.0.0.1 1 key
	assert_status 2
	run_t "$RDSEND" -L 127.0.0.1 1 key "$D/in"
	assert_status 2
	run_t "$RDRECV" -r 1 key -
	assert_status 2
}

@test "rdsend -r killed in the middle of a file: no partial file, no temporary, rdrecv fails" {
	mkdir -p "$D/src" "$D/out"
	echo done >"$D/src/first"
	mktext "$D/src/zlarge" $((48 * 1024 * 1024))
	port=$(free_port)
	start_recv -r --wait 30 --timeout 5 "$port" key "$D/out"
	wait_listen "$port"
	# zstd at level 19 on text is slow: the copy is still running.
	start_send -r --compress=19 127.0.0.1 "$port" key "$D/src"
	wait_temp "$D/out/src/zlarge" 30
	kill -KILL "$SEND_PID"
	wait_recv 30
	assert_rc recv "$RECV_RC" 3
	[ ! -e "$D/out/src/zlarge" ] || fail "a partial file under its final name"
	[ -z "$(find "$D/out" -name '.*.rdx-*')" ] || fail "temporary left: $(find "$D/out" -name '.*.rdx-*')"
}

@test "rdcp -r: 5000 files and every kind of entry, local to remote and back" {
	mkdir "$D/far" "$D/back"
	rdcp_b -r "$BIG" "rdxhost:$D/far"
	assert_status 0
	[ -z "$stderr" ] || fail "stderr: $stderr"
	assert_same_tree "$BIG" "$D/far/big"
	rdcp_b -r "rdxhost:$D/far/big" "$D/back"
	assert_status 0
	[ -z "$stderr" ] || fail "stderr: $stderr"
	assert_same_tree "$BIG" "$D/back/big"
}

@test "rdcp -r: cp's rules for DST, several sources, --streams 3 --encrypt --compress" {
	rdcp_b -r --streams 3 --encrypt --compress "$SMALL" "rdxhost:$D/named"
	assert_status 0
	assert_same_tree "$SMALL" "$D/named"
	rdcp_b -r "rdxhost:$D/named/" "$D/named-back"
	assert_status 0
	assert_same_tree "$SMALL" "$D/named-back"
	# Several sources on one side go as one tree: one SSH login each way.
	mkdir "$D/many" "$D/many-back"
	logins=$(grep -c 'Accepted publickey' "$SSHD_DIR/sshd.log")
	rdcp_b -r "$SMALL/d1" "$SMALL/large1" "$SMALL/empty" "rdxhost:$D/many"
	assert_status 0
	diff -r "$SMALL/d1" "$D/many/d1" || fail "d1 differs"
	assert_same "$SMALL/large1" "$D/many/large1"
	[ -d "$D/many/empty" ] || fail "empty directory missing"
	rdcp_b -r "rdxhost:$D/many/d1" "rdxhost:$D/many/large1" "$D/many-back"
	assert_status 0
	diff -r "$SMALL/d1" "$D/many-back/d1" || fail "d1 differs coming back"
	assert_same "$SMALL/large1" "$D/many-back/large1"
	[ "$(grep -c 'Accepted publickey' "$SSHD_DIR/sshd.log")" -eq $((logins + 2)) ] ||
		fail "expected 2 SSH logins for 2 copies of several sources, saw $(($(grep -c 'Accepted publickey' "$SSHD_DIR/sshd.log") - logins))"
	mkrand "$D/plain" 10
	rdcp_b -r "$SMALL/d1" "$SMALL/d2" "rdxhost:$D/plain"
	assert_nonzero
	assert_match "$stderr" "not a directory"
	rdcp_b -r "$SMALL" "rdxhost:$D/plain"
	assert_status 5
	assert_match "$stderr" "cannot replace the file 'plain' with a directory"
	[ "$(fsize "$D/plain")" -eq 10 ] || fail "the file DST was changed"
}

@test "rdcp -r: hostile DST names reach the far side as one word; -L follows symlinks" {
	local pw=rdx-pwned-tree-$$
	mkdir "$D/far"
	for name in "a b" "\$(touch $pw-1)" "; touch $pw-2 #" "'; touch $pw-3; '" "ünïcødé ✓"; do
		rdcp_b -r "$SMALL/d4" "rdxhost:$D/far/$name"
		assert_status 0
		diff -r "$SMALL/d4" "$D/far/$name" || fail "'$name' differs"
	done
	home=$(getent passwd root | cut -d: -f6)
	for i in 1 2 3; do
		[ ! -e "$home/$pw-$i" ] || { rm -f "$home/$pw-$i"; fail "injected command ran ($i)"; }
	done
	rdcp_b -r -L "$SMALL" "rdxhost:$D/followed"
	assert_status 0
	[ -f "$D/followed/rel-link" ] && [ ! -L "$D/followed/rel-link" ] || fail "-L did not follow"
	assert_same "$SMALL/large1" "$D/followed/rel-link"
	[ -d "$D/followed/dir-link" ] || fail "-L did not follow the directory link"
}

@test "rdcp -r on one host: the same tree code, no SSH" {
	run_t "$RDCP" -r "$BIG" "$D/local"
	assert_status 0
	assert_same_tree "$BIG" "$D/local"
	run_t "$RDCP" -r "$BIG" "$D/local/large1"
	assert_status 4
	assert_match "$stderr" "cannot replace the file 'large1' with a directory"
	run_t "$RDCP" "$BIG" "$D/x"
	assert_status 2
	assert_match "$stderr" "is a directory \\(use -r\\)"
	run_t "$RDCP" -r - "$D/x"
	assert_status 2
	# Into itself: refused before anything is written.
	cp -a "$SMALL" "$D/self"
	run_t "$RDCP" -r "$D/self" "$D/self/sub"
	assert_status 2
	assert_match "$stderr" "into itself"
	[ ! -e "$D/self/sub" ] || fail "something was written into the source"
	run_t "$RDCP" -r "$D/self/" "$D/self/d1"
	assert_status 2
}

# A local user who can write inside the destination swaps a directory the
# receiver has checked for a symlink to a directory outside, just before
# an entry is made in it (the shim's RDX_SHIM_RACE), once for each kind of
# entry: nothing may land outside or change its mode or times, and the
# entry is made in the directory that was checked.
@test "rdcp -r: a directory swapped for a symlink out mid-copy: nothing made outside, for every kind of entry" {
	[ -x "$RDX_BUILD/tests/shim.so" ] || fail "shim not built: $RDX_BUILD/tests/shim.so"
	local s=$D/src/t name before
	mkdir -p "$s/sub/dirX"
	echo inside >"$s/sub/dirX/in"
	echo small >"$s/sub/smlf"
	head -c $((5 * 1024 * 1024 + 3)) /dev/urandom >"$s/sub/bigf"
	truncate -s 8M "$s/sub/sprs"
	printf 'middle' | dd of="$s/sub/sprs" bs=1 seek=$((4 * 1024 * 1024)) conv=notrunc 2>/dev/null
	ln -s smlf "$s/sub/slnk"
	mkfifo "$s/sub/fifo"
	# t/hsrc is walked before t/sub's entries: t/sub/hard is the link.
	echo linked >"$s/hsrc"
	ln "$s/hsrc" "$s/sub/hard"
	for name in dirX slnk fifo hard sprs bigf smlf; do
		rm -rf "$D/out" "$D/dst"
		mkdir "$D/out" "$D/dst"
		echo canary >"$D/out/canary"
		chmod 751 "$D/out"
		touch -d '2001-02-03 04:05:06' "$D/out"
		before=$(stat -c '%a %Y' "$D/out")
		# shellcheck disable=SC2046 # shimmed is a command prefix
		run_t $(shimmed RDX_SHIM_RACE="$name" RDX_SHIM_RACE_DIR="$D/dst/t/sub" \
			RDX_SHIM_RACE_TO="$D/out") "$RDCP" -r "$s" "$D/dst/"
		[ -L "$D/dst/t/sub" ] || fail "$name: the shim did not swap the directory"
		[ "$(ls -A "$D/out")" = canary ] || fail "$name: made outside: $(ls -A "$D/out")"
		[ "$(stat -c '%a %Y' "$D/out")" = "$before" ] ||
			fail "$name: the outside directory's mode or times changed: $(stat -c '%a %Y' "$D/out")"
		[ -e "$D/dst/t/sub.moved/$name" ] || [ -L "$D/dst/t/sub.moved/$name" ] ||
			fail "$name: not made in the directory that was checked: $(ls -A "$D/dst/t/sub.moved")"
		# What follows in t/sub cannot be finished: a failure, never 0.
		[ "$status" -ne 0 ] || fail "$name: exit 0 with the destination tampered with"
		assert_match "$stderr" "symlink|cannot set the mode"
	done
	cmp "$s/sub/bigf" "$D/dst/t/sub.moved/bigf"
}

# Two more races on a receiver that is root: a directory removed as soon
# as it is made (it used to crash the receiver), and a hard link to a file
# outside renamed over a symlink's or fifo's temporary before its owner
# and times are set (that file's must not change).
@test "rdcp -r: a directory removed as it is made, a hard link renamed over a temporary: a clean failure, nothing outside changed" {
	[ -x "$RDX_BUILD/tests/shim.so" ] || fail "shim not built: $RDX_BUILD/tests/shim.so"
	local s=$D/src/t name before
	mkdir -p "$s/gone" "$D/out"
	echo f >"$s/gone/f"
	ln -s gone "$s/slnk"
	mkfifo "$s/fifo"
	# shellcheck disable=SC2046 # shimmed is a command prefix
	run_t $(shimmed RDX_SHIM_RMDIR=gone) "$RDCP" -r "$s" "$D/dst1"
	assert_match "$status" "^[1-9]"
	[ "$status" -lt 128 ] || fail "killed by signal $((status - 128))"
	assert_match "$stderr" "gone"
	for name in slnk fifo; do
		echo outside >"$D/out/file"
		chown 1:1 "$D/out/file"
		touch -d '2001-02-03 04:05:06' "$D/out/file"
		before=$(stat -c '%u:%g %Y' "$D/out/file")
		# shellcheck disable=SC2046
		run_t $(shimmed RDX_SHIM_LINK_OVER=".$name.rdx-" RDX_SHIM_LINK_FROM="$D/out/file") \
			"$RDCP" -r "$s" "$D/dst-$name"
		assert_status 4
		assert_match "$stderr" "cannot create 'dst-$name/$name': File exists"
		[ "$(stat -c '%u:%g %Y' "$D/out/file")" = "$before" ] ||
			fail "$name: the outside file changed: $(stat -c '%u:%g %Y' "$D/out/file")"
		[ -z "$(find "$D/dst-$name" -name '.*.rdx-*')" ] || fail "$name: temporary left"
		rm -rf "$D/dst-$name"
	done
}

# Both ends under valgrind: the tree code is core code.
@test "valgrind: rdsend -r and rdrecv -r are clean, on success and on a refused tree" {
	command -v valgrind >/dev/null || fail "valgrind not installed (scripts/deps.sh test)"
	[ -z "${RDX_SANITIZED:-}" ] || skip "valgrind does not run ASan binaries"
	local vg=(valgrind -q --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite)
	mkdir "$D/out"
	port=$(free_port)
	# Under valgrind on a loaded machine a handshake takes more than the
	# 10 s a listener gives one by default.
	bg_start recv "${vg[@]}" "$RDRECV" -r --wait 60 --handshake-timeout 120 "$port" key "$D/out"
	RECV_PID=$BG_PID
	wait_listen "$port" 30
	run_t --secs 120 "${vg[@]}" "$RDSEND" -r --streams 2 --encrypt --compress \
		127.0.0.1 "$port" key "$SMALL"
	echo "$stderr"
	assert_status 0
	wait_recv 60
	assert_rc recv "$RECV_RC" 0
	assert_same_tree "$SMALL" "$D/out/small"
	# The unpacker refuses the second tree mid-stream: both failure paths.
	port=$(free_port)
	bg_start recv "${vg[@]}" "$RDRECV" -r --wait 60 --handshake-timeout 120 "$port" key "$D/new"
	RECV_PID=$BG_PID
	wait_listen "$port" 30
	run_t --secs 120 "${vg[@]}" "$RDSEND" -r 127.0.0.1 "$port" key "$SMALL/d1" "$SMALL/d2"
	echo "$stderr"
	assert_status 5
	wait_recv 60
	assert_rc recv "$RECV_RC" 4
}

@test "--sync: a second copy sends only what changed; an interrupted tree resumes" {
	mkdir "$D/out"
	send_tree -r --sync PORT key "$D/out" -- -r --sync 127.0.0.1 PORT key "$SMALL"
	assert_status 0
	assert_same_tree "$SMALL" "$D/out/small"
	ino=$(stat -c %i "$D/out/small/large2")
	# Nothing changed: no file data goes (the stream is directory headers).
	send_tree -r --sync PORT key "$D/out" -- -v -r --sync 127.0.0.1 PORT key "$SMALL"
	assert_status 0
	assert_match "$stderr" "--sync: $(find "$SMALL" -type f | wc -l) unchanged files not sent"
	sent=$(sed -n 's/.*sent \([0-9]*\) bytes.*/\1/p' <<<"$stderr")
	[ "$sent" -lt $((1024 * 1024)) ] || fail "sent $sent bytes for an unchanged tree"
	[ "$(stat -c %i "$D/out/small/large2")" = "$ino" ] || fail "an unchanged file was rewritten"
	assert_same_tree "$SMALL" "$D/out/small"
	# A file changed (size and mtime) is sent again, the rest is not.
	mkdir "$D/src"
	cp -a "$SMALL" "$D/src/"
	echo changed >>"$D/src/small/d1/s1/f1"
	send_tree -r --sync PORT key "$D/out" -- -v -r --sync 127.0.0.1 PORT key "$D/src/small"
	assert_status 0
	assert_match "$stderr" "--sync: $(($(find "$SMALL" -type f | wc -l) - 1)) unchanged files not sent"
	cmp "$D/src/small/d1/s1/f1" "$D/out/small/d1/s1/f1" || fail "the changed file was not sent"
	# A copy killed in its big file: with --sync the next one completes,
	# without sending again the files that arrived whole.
	mkdir -p "$D/big" "$D/out2"
	mkrand "$D/big/a-done" 100000
	mktext "$D/big/zlarge" $((48 * 1024 * 1024))
	port=$(free_port)
	start_recv -r --wait 30 --timeout 5 "$port" key "$D/out2"
	wait_listen "$port"
	start_send -r --compress=19 127.0.0.1 "$port" key "$D/big"
	wait_temp "$D/out2/big/zlarge" 30
	kill -KILL "$SEND_PID"
	wait_recv 30
	[ -f "$D/out2/big/a-done" ] && [ ! -e "$D/out2/big/zlarge" ] || fail "unexpected state after the kill"
	send_tree -r --sync PORT key "$D/out2" -- -v -r --sync 127.0.0.1 PORT key "$D/big"
	assert_status 0
	assert_match "$stderr" "--sync: 1 unchanged file not sent"
	assert_same "$D/big/zlarge" "$D/out2/big/zlarge"
	assert_same "$D/big/a-done" "$D/out2/big/a-done"
}

@test "rdcp --sync: both directions, a second run sends no file data" {
	# As with cp -r, a second copy of a tree goes into DST when DST is a
	# directory: both runs use one, so the tree lands at DST/small.
	mkdir "$D/far" "$D/near"
	rdcp_b --sync "$SMALL" "rdxhost:$D/far"
	assert_status 0
	assert_same_tree "$SMALL" "$D/far/small"
	rdcp_b -v --sync "$SMALL" "rdxhost:$D/far"
	assert_status 0
	assert_match "$stderr" "--sync: $(find "$SMALL" -type f | wc -l) unchanged files not sent"
	rdcp_b --sync "rdxhost:$D/far/small" "$D/near"
	assert_status 0
	assert_same_tree "$SMALL" "$D/near/small"
	touch -d '2000-01-01' "$D/far/small/large1"
	rdcp_b -v --sync "rdxhost:$D/far/small" "$D/near"
	assert_status 0
	assert_match "$stderr" "--sync: $(($(find "$SMALL" -type f | wc -l) - 1)) unchanged files not sent"
	[ "$(stat -c %Y "$D/near/small/large1")" = "$(stat -c %Y "$D/far/small/large1")" ] ||
		fail "large1 was not sent again"
}

@test "--sync --encrypt: a listing of many sealed frames, acknowledged as it goes" {
	mkdir "$D/out"
	send_tree -r PORT key "$D/out" -- -r --encrypt 127.0.0.1 PORT key "$BIG"
	assert_status 0
	send_tree -r --sync PORT key "$D/out" -- -v -r --sync --encrypt --streams 2 127.0.0.1 PORT key "$BIG"
	assert_status 0
	assert_match "$stderr" "--sync: $(find "$BIG" -type f | wc -l) unchanged files not sent"
	assert_same_tree "$BIG" "$D/out/big"
}

@test "--delete removes what the source lacks, --dry-run only says so, rdcp both ways" {
	mkdir "$D/src" "$D/out"
	cp -a "$SMALL" "$D/src/"
	send_tree -r PORT key "$D/out" -- -r 127.0.0.1 PORT key "$D/src/small"
	assert_status 0
	# The destination gains extras; the source loses a file and a directory.
	mkdir -p "$D/out/small/extra/deeper"
	echo x >"$D/out/small/extra/deeper/x"
	echo y >"$D/out/small/y"
	rm -r "$D/src/small/d6" "$D/src/small/private"
	echo new >"$D/src/small/new"
	send_tree -r --delete PORT key "$D/out" -- -r --dry-run --delete 127.0.0.1 PORT key "$D/src/small"
	assert_status 0
	assert_match "$stderr" "would send 'small/new'"
	assert_match "$stderr" "would delete 'small/extra/deeper/x'"
	assert_match "$stderr" "would delete 'small/d6'"
	assert_match "$stderr" "would delete 'small/private'"
	[ -e "$D/out/small/y" ] && [ -d "$D/out/small/d6" ] && [ ! -e "$D/out/small/new" ] ||
		fail "--dry-run changed the destination"
	send_tree -r --delete PORT key "$D/out" -- -r --delete 127.0.0.1 PORT key "$D/src/small"
	assert_status 0
	assert_same_tree "$D/src/small" "$D/out/small"
	# rdcp: pushing deletes there, pulling deletes here; a dry run pulling
	# shows the far side's list.
	mkdir "$D/far" "$D/near"
	rdcp_b -r "$SMALL" "rdxhost:$D/far"
	assert_status 0
	echo z >"$D/far/small/stale"
	rdcp_b --delete "$SMALL" "rdxhost:$D/far"
	assert_status 0
	[ ! -e "$D/far/small/stale" ] || fail "rdcp --delete left the extraneous file there"
	rdcp_b -r "rdxhost:$D/far/small" "$D/near"
	echo z >"$D/near/small/stale"
	rdcp_b --dry-run --delete "rdxhost:$D/far/small" "$D/near"
	assert_status 0
	assert_match "$stderr" "would delete 'small/stale'"
	[ -e "$D/near/small/stale" ] || fail "--dry-run deleted"
	rdcp_b --delete "rdxhost:$D/far/small" "$D/near"
	assert_status 0
	[ ! -e "$D/near/small/stale" ] || fail "rdcp --delete left the extraneous file here"
	assert_same_tree "$SMALL" "$D/near/small"
}

@test "--include/--exclude: what is left out is neither sent nor deleted; rdcp passes them to the far side" {
	mkdir -p "$D/src/top/build/deep" "$D/src/top/keep" "$D/out"
	echo 1 >"$D/src/top/a.o"
	echo 2 >"$D/src/top/keep/b.o"
	echo 3 >"$D/src/top/build/deep/x"
	echo 4 >"$D/src/top/main.c"
	send_tree -r PORT key "$D/out" -- -r --exclude='*.o' --include 'keep/*' --exclude=build \
		127.0.0.1 PORT key "$D/src/top"
	assert_status 0
	[ "$(cd "$D/out/top" && find . | sort | tr '\n' ' ')" = ". ./keep ./keep/b.o ./main.c " ] ||
		fail "unexpected tree: $(cd "$D/out/top" && find . | sort | tr '\n' ' ')"
	# --delete spares what the rules leave out, on the far side too.
	mkdir -p "$D/out/top/build"
	echo z >"$D/out/top/build/mine"
	echo z >"$D/out/top/mine.o"
	echo z >"$D/out/top/gone"
	send_tree -r --delete PORT key "$D/out" -- -r --delete --exclude='*.o' --include 'keep/*' --exclude=build \
		127.0.0.1 PORT key "$D/src/top"
	assert_status 0
	[ -e "$D/out/top/build/mine" ] && [ -e "$D/out/top/mine.o" ] || fail "--delete removed an excluded name"
	[ ! -e "$D/out/top/gone" ] || fail "--delete kept an extraneous name"
	# rdcp pulling: the far rdsend applies the rules (quoted: '*' reaches it whole).
	mkdir "$D/near"
	rdcp_b -r --exclude '*.o' --exclude 'build' "rdxhost:$D/src/top" "$D/near"
	assert_status 0
	[ "$(cd "$D/near/top" && find . | sort | tr '\n' ' ')" = ". ./keep ./main.c " ] ||
		fail "unexpected pulled tree: $(cd "$D/near/top" && find . | sort | tr '\n' ' ')"
	run_t "$RDSEND" --exclude x 127.0.0.1 1 key /dev/null
	assert_status 2
}

@test "as root, set-id bits of received files are dropped unless --keep-setid; a setgid directory keeps its bit" {
	[ "$(id -u)" = 0 ] || skip "needs root (the receiver restores owners)"
	mkdir -p "$D/src/t/shared" "$D/out1" "$D/out2" "$D/near"
	echo '#!/bin/sh' >"$D/src/t/prog"
	chmod 6755 "$D/src/t/prog"
	chmod 2775 "$D/src/t/shared"
	send_tree -r PORT key "$D/out1" -- -r 127.0.0.1 PORT key "$D/src/t"
	assert_status 0
	[ "$(stat -c %a "$D/out1/t/prog")" = 755 ] || fail "rdrecv kept set-id bits: $(stat -c %a "$D/out1/t/prog")"
	[ "$(stat -c %a "$D/out1/t/shared")" = 2775 ] || fail "the setgid directory lost its bit"
	send_tree -r --keep-setid PORT key "$D/out2" -- -r 127.0.0.1 PORT key "$D/src/t"
	assert_status 0
	[ "$(stat -c %a "$D/out2/t/prog")" = 6755 ] || fail "--keep-setid dropped them"
	# rdcp: a pull and a push, each way dropped, and kept when asked.
	rdcp_b -p "rdxhost:$D/src/t/prog" "$D/near"
	assert_status 0
	[ "$(stat -c %a "$D/near/prog")" = 755 ] || fail "rdcp -p pull kept set-id bits"
	rdcp_b -p --keep-setid "$D/src/t/prog" "rdxhost:$D/near/kept"
	assert_status 0
	[ "$(stat -c %a "$D/near/kept")" = 6755 ] || fail "rdcp -p --keep-setid push dropped them"
	rdcp_b -r "$D/src/t" "rdxhost:$D/near/pushed"
	assert_status 0
	[ "$(stat -c %a "$D/near/pushed/prog")" = 755 ] || fail "rdcp -r push kept set-id bits"
}

@test "rdcp -p keeps a file's mode and mtime both ways; -r replaces an existing file with a file, not with a tree" {
	mkrand "$D/f" 70000
	chmod 640 "$D/f"
	touch -d '2001-02-03 04:05:06' "$D/f"
	echo old >"$D/existing"
	rdcp_b -p "$D/f" "rdxhost:$D/existing"
	assert_status 0
	assert_same "$D/f" "$D/existing"
	[ "$(stat -c '%a %Y' "$D/existing")" = "$(stat -c '%a %Y' "$D/f")" ] || fail "-p lost mode or mtime"
	mkdir "$D/back"
	rdcp_b -p "rdxhost:$D/f" "$D/back"
	assert_status 0
	[ "$(stat -c '%a %Y' "$D/back/f")" = "$(stat -c '%a %Y' "$D/f")" ] || fail "-p lost mode or mtime coming back"
	run_t "$RDCP" -p "$SMALL" "$D/x"
	assert_status 2
	assert_match "$stderr" "is a directory"
	# A far directory needs -r too (it used to arrive whole, as a tree).
	rdcp_b -p "rdxhost:$SMALL" "$D/pulled"
	assert_status 5
	assert_match "$stderr" "rdsend: '$SMALL' is a directory \\(use -r\\)"
	[ ! -e "$D/pulled" ] || fail "the directory was copied: $(ls "$D/pulled" | head -3)"
	run_t "$RDCP" -p - "$D/x"
	assert_status 2
	rdcp_b -r "$SMALL" "rdxhost:$D/existing"
	assert_status 5
	assert_match "$stderr" "cannot replace the file"
	assert_same "$D/f" "$D/existing"
}

@test "--checksum: content decides, not mtime; rdcp passes it to the far side" {
	mkdir -p "$D/src/t" "$D/out"
	mkrand "$D/src/t/same" 100000
	mkrand "$D/src/t/changed" 100000
	send_tree -r PORT key "$D/out" -- -r 127.0.0.1 PORT key "$D/src/t"
	assert_status 0
	# Same bytes, another mtime: not sent.  Other bytes, same size and
	# mtime (what --sync alone cannot see): sent.
	touch -d 2000-01-01 "$D/out/t/same"
	flip_byte "$D/out/t/changed" 7
	touch -r "$D/src/t/changed" "$D/out/t/changed"
	send_tree -r --sync PORT key "$D/out" -- -v -r --checksum 127.0.0.1 PORT key "$D/src/t"
	assert_status 0
	assert_match "$stderr" "--sync: 1 unchanged file not sent"
	assert_same "$D/src/t/changed" "$D/out/t/changed"
	[ "$(stat -c %Y "$D/out/t/same")" = "$(date -d 2000-01-01 +%s)" ] || fail "'same' was sent again"
	flip_byte "$D/out/t/changed" 9
	touch -r "$D/src/t/changed" "$D/out/t/changed"
	mkdir "$D/near"
	cp -a "$D/out/t" "$D/near/"
	rdcp_b -v --checksum "rdxhost:$D/src/t" "$D/near"
	assert_status 0
	assert_match "$stderr" "--sync: 1 unchanged file not sent"
	assert_same "$D/src/t/changed" "$D/near/t/changed"
}

rm_nobody() { chmod -R u+rwx "$N" 2>/dev/null; rm -rf "$N"; }

# nobody_dir: N, a directory everyone may enter, removed at the end, with
# a copy of rdsend that nobody can run (nobody cannot reach $RDX_BUILD).
nobody_dir() {
	N=$(mktemp -d /tmp/rdx-nobody.XXXXXX)
	CLEANUPS+=(rm_nobody)
	chmod 755 "$N"
	cp "$RDSEND" "$N/"
}

# The command prefix that runs the rest as the user nobody.
NOBODY=(setpriv --reuid=nobody --regid=nogroup --clear-groups)

@test "rdcp -r as nobody: a setgid directory of its group stays setgid, read-only directories are set last, a -wx one takes a big file" {
	nobody_dir
	cp "$RDCP" "$N/"
	mkdir -p "$N/src/t/shared" "$N/src/t/ro/in" "$N/src/t/wx" "$N/dst"
	head -c $((5 * 1024 * 1024 + 1)) /dev/urandom >"$N/src/t/wx/big"
	chmod -R a+rX "$N/src"
	chgrp nogroup "$N/src/t/shared"
	chmod 2775 "$N/src/t/shared"
	chmod 555 "$N/src/t/ro/in" "$N/src/t/ro"
	chown nobody:nogroup "$N/dst"
	run_t "${NOBODY[@]}" "$N/rdcp" -r "$N/src/t" "$N/dst/"
	assert_status 0
	[ "$(stat -c '%a %G' "$N/dst/t/shared")" = "2775 nogroup" ] ||
		fail "setgid directory: $(stat -c '%a %G' "$N/dst/t/shared")"
	[ "$(stat -c %a "$N/dst/t/ro")" = 555 ] && [ "$(stat -c %a "$N/dst/t/ro/in")" = 555 ] ||
		fail "read-only directories: $(stat -c %a "$N/dst/t/ro" "$N/dst/t/ro/in")"
	# Again, into a directory nobody may write and enter but not read.
	chmod 300 "$N/dst/t/wx"
	run_t "${NOBODY[@]}" "$N/rdcp" -r "$N/src/t" "$N/dst/"
	assert_status 0
	[ "$(stat -c %a "$N/dst/t/wx")" = 755 ] || fail "-wx directory: $(stat -c %a "$N/dst/t/wx")"
	cmp "$N/src/t/wx/big" "$N/dst/t/wx/big"
	chmod -R u+w "$N/src" "$N/dst"
}

@test "--delete deletes nothing when the sender could not read all of its tree" {
	# rdsend as nobody, from a copy nobody can reach; a directory it
	# cannot read must not be taken for gone.
	nobody_dir
	mkdir -p "$N/src/t/open" "$N/src/t/closed" "$D/out"
	echo a >"$N/src/t/open/a"
	echo b >"$N/src/t/closed/b"
	chmod -R a+rX "$N/src"
	send_tree -r PORT key "$D/out" -- -r 127.0.0.1 PORT key "$N/src/t"
	assert_status 0
	echo extra >"$D/out/t/extra"
	chmod 000 "$N/src/t/closed"
	port=$(free_port)
	start_recv -r --delete --wait 30 "$port" key "$D/out"
	wait_listen "$port"
	run_t "${NOBODY[@]}" "$N/rdsend" -r --delete 127.0.0.1 "$port" key "$N/src/t"
	assert_status 4
	assert_match "$stderr" "--delete: nothing deleted"
	wait_recv
	[ -e "$D/out/t/closed/b" ] && [ -e "$D/out/t/extra" ] ||
		fail "--delete removed something though the source was not all read"
	# The receiver got a shorter tree: it names what is missing and
	# fails too, rather than take it for the whole.
	assert_rc recv "$RECV_RC" 4
	assert_file_match "$D/recv.err" "not sent, the sender could not read it: $N/src/t[/:]"
	assert_file_match "$D/recv.err" "the sender could not read 1 entry"
	# A source that does not exist, beside one that does: the same.
	mkdir "$D/out2"
	send_tree -r PORT key "$D/out2" -- -r 127.0.0.1 PORT key "$N/src/t/open" "$D/no-such"
	assert_status 4
	assert_rc recv "$RECV_RC" 4
	assert_file_match "$D/recv.err" "not sent, the sender could not read it: $D/no-such: "
	[ -e "$D/out2/open/a" ] || fail "the readable source was not sent"
}

@test "rdrecv -r where O_TMPFILE is refused (NFS, FUSE): temporary names and renames, whole files, nothing left" {
	[ -x "$RDX_BUILD/tests/shim.so" ] || fail "shim not built: $RDX_BUILD/tests/shim.so"
	mkdir "$D/out"
	NETNS_EXEC=$(shimmed RDX_SHIM_NO_TMPFILE=1 RDX_SHIM_LOG="$D/shim.log") \
		send_tree -r PORT key "$D/out" -- -r 127.0.0.1 PORT key "$SMALL"
	assert_status 0
	assert_rc recv "$RECV_RC" 0
	[ -s "$D/shim.log" ] || fail "the shim refused no O_TMPFILE: the fallback was not taken"
	assert_same_tree "$SMALL" "$D/out/small"
	# Again over the copy, with new content: each file replaced whole.
	cp -a "$SMALL" "$D/src"
	find "$D/src" -type f -name 'f*' | head -n 20 | while read -r f; do echo changed >>"$f"; done
	NETNS_EXEC=$(shimmed RDX_SHIM_NO_TMPFILE=1) \
		send_tree -r PORT key "$D/out" -- -r 127.0.0.1 PORT key "$D/src"
	assert_status 0
	assert_rc recv "$RECV_RC" 0
	assert_same_tree "$D/src" "$D/out/src"
	[ -z "$(find "$D/out" -name '.*.rdx-*')" ] || fail "temporary left: $(find "$D/out" -name '.*.rdx-*')"
}

@test "rdsend -r: a file replaced after the walk saw it is not sent; both ends say so and exit 4" {
	[ -x "$RDX_BUILD/tests/shim.so" ] || fail "shim not built: $RDX_BUILD/tests/shim.so"
	mkdir -p "$D/src/t" "$D/out"
	echo before >"$D/src/t/a"
	echo keep >"$D/src/t/b"
	echo "swapped in after the walk" >"$D/other"
	# The sender's first open of t/a (the read after the walk) first
	# renames another file over it.
	port=$(free_port)
	start_recv -r --wait 30 "$port" key "$D/out"
	wait_listen "$port"
	run_t env LD_PRELOAD="$RDX_BUILD/tests/shim.so" \
		ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0" \
		RDX_SHIM_SWAP="$D/src/t/a" RDX_SHIM_SWAP_FROM="$D/other" \
		"$RDSEND" -r 127.0.0.1 "$port" key "$D/src/t"
	assert_status 4
	assert_match "$stderr" "'$D/src/t/a' changed while it was read; not sent"
	wait_recv
	assert_rc recv "$RECV_RC" 4
	assert_file_match "$D/recv.err" "'t/a' was not sent: the sender could not read it"
	[ ! -e "$D/out/t/a" ] || fail "the file was sent: $(cat "$D/out/t/a")"
	[ "$(cat "$D/out/t/b")" = keep ] || fail "the other file did not arrive"
}

@test "rdsend -r: big files are read in parallel chunks and arrive whole, in order, among small files" {
	mkdir -p "$D/src/t" "$D/out1" "$D/out2"
	echo first >"$D/src/t/a"
	# Sizes around the readers' 1 MiB chunks and their window of 8:
	# a short last chunk, exactly the window, more than two windows.
	head -c $((9 * 1024 * 1024 + 7)) /dev/urandom >"$D/src/t/big1"
	echo between >"$D/src/t/b"
	head -c $((8 * 1024 * 1024)) /dev/urandom >"$D/src/t/big2"
	head -c $((20 * 1024 * 1024 + 1)) /dev/urandom >"$D/src/t/big3"
	head -c $((4 * 1024 * 1024)) /dev/urandom >"$D/src/t/big4"
	echo last >"$D/src/t/z"
	send_tree -r PORT key "$D/out1" -- -r --io-threads 4 --streams 3 127.0.0.1 PORT key "$D/src/t"
	assert_status 0
	assert_rc recv "$RECV_RC" 0
	diff -r "$D/src/t" "$D/out1/t"
	# One reader: the chunks come one at a time, the same stream.
	send_tree -r PORT key "$D/out2" -- -r --io-threads 1 127.0.0.1 PORT key "$D/src/t"
	assert_status 0
	assert_rc recv "$RECV_RC" 0
	diff -r "$D/src/t" "$D/out2/t"
}

@test "rdsend -r: a big file whose disk read fails midway is named and not sent; the rest arrives" {
	[ -x "$RDX_BUILD/tests/shim.so" ] || fail "shim not built: $RDX_BUILD/tests/shim.so"
	mkdir -p "$D/src/t" "$D/out"
	echo small >"$D/src/t/a"
	head -c $((12 * 1024 * 1024)) /dev/urandom >"$D/src/t/big"
	echo after >"$D/src/t/z"
	# Reads past 5 MiB fail: a chunk in the middle of the big file.
	port=$(free_port)
	start_recv -r --wait 30 "$port" key "$D/out"
	wait_listen "$port"
	run_t env LD_PRELOAD="$RDX_BUILD/tests/shim.so" \
		ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0" \
		RDX_SHIM_READ_EIO_FROM=$((5 * 1024 * 1024)) \
		"$RDSEND" -r 127.0.0.1 "$port" key "$D/src/t"
	assert_status 4
	assert_match "$stderr" "cannot read '$D/src/t/big': Input/output error"
	wait_recv
	assert_rc recv "$RECV_RC" 4
	assert_file_match "$D/recv.err" "'t/big' was not sent: the sender could not read it"
	[ ! -e "$D/out/t/big" ] || fail "the big file was kept under its name"
	[ "$(cat "$D/out/t/a")" = small ] && [ "$(cat "$D/out/t/z")" = after ] ||
		fail "the other files did not arrive"
	[ -z "$(find "$D/out" -name '.*rdx-*')" ] || fail "a temporary was left: $(find "$D/out")"
}

@test "a /proc that is not procfs (its fd links lead to another file) is not believed: rdsend -r and rdrecv move the right bytes" {
	command -v unshare >/dev/null || skip "no unshare"
	mkdir -p "$D/src/t" "$D/out1" "$D/out2"
	echo small >"$D/src/t/a"
	# Written around the page cache, so that O_DIRECT is chosen for it.
	head -c $((6 * 1024 * 1024)) /dev/urandom | dd of="$D/src/t/big" bs=1M iflag=fullblock oflag=direct status=none
	head -c $((6 * 1024 * 1024)) /dev/zero | tr '\0' X >"$D/decoy"
	# fakeproc CMD...: CMD with a tmpfs over /proc whose self/fd/N are
	# symlinks to the decoy (a chroot's /proc, a mount over it).
	cat >"$D/fakeproc" <<EOS
#!/bin/sh
mount -t tmpfs none /proc || exit 99
mkdir -p /proc/self/fd
for i in \$(seq 3 60); do ln -s "$D/decoy" /proc/self/fd/\$i; done
# An ASan build reads its options from /proc/self/environ, and its
# LeakSanitizer needs the real /proc: no leak check here.
export ASAN_OPTIONS="\${ASAN_OPTIONS:+\$ASAN_OPTIONS:}detect_leaks=0"
env -0 >/proc/self/environ
exec "\$@"
EOS
	chmod +x "$D/fakeproc"
	unshare -m "$D/fakeproc" true || skip "cannot mount a tmpfs over /proc here"
	port=$(free_port)
	start_recv -r --wait 30 "$port" key "$D/out1"
	wait_listen "$port"
	run_t unshare -m "$D/fakeproc" "$RDSEND" -r 127.0.0.1 "$port" key "$D/src/t"
	assert_status 0
	wait_recv
	assert_rc recv "$RECV_RC" 0
	diff -r "$D/src/t" "$D/out1/t"
	# The receiving end, likewise (its temporaries are reopened for O_DIRECT).
	port=$(free_port)
	NETNS_EXEC="unshare -m $D/fakeproc" start_recv -r --wait 30 "$port" key "$D/out2"
	wait_listen "$port"
	run_t "$RDSEND" -r 127.0.0.1 "$port" key "$D/src/t"
	assert_status 0
	wait_recv
	assert_rc recv "$RECV_RC" 0
	diff -r "$D/src/t" "$D/out2/t"
	[ "$(find "$D/decoy" -newer "$D/fakeproc")" = "" ] || fail "the decoy was written"
}

@test "rdrecv -r: a big file whose disk write fails midway is named and not kept; the rest arrives" {
	[ -x "$RDX_BUILD/tests/shim.so" ] || fail "shim not built: $RDX_BUILD/tests/shim.so"
	mkdir -p "$D/src/t" "$D/out"
	echo small >"$D/src/t/a"
	head -c $((12 * 1024 * 1024)) /dev/urandom >"$D/src/t/big"
	echo after >"$D/src/t/z"
	# Writes past 5 MiB fail: the third of the big file's 1 MiB stages,
	# written by a writer thread while the stream goes on.
	NETNS_EXEC=$(shimmed RDX_SHIM_EIO_FROM=$((5 * 1024 * 1024))) \
		send_tree -r PORT key "$D/out" -- -r 127.0.0.1 PORT key "$D/src/t"
	assert_rc recv "$RECV_RC" 4
	assert_file_match "$D/recv.err" "cannot write 't/big': Input/output error"
	assert_file_match "$D/recv.err" "1 entry could not be written"
	assert_status 5
	assert_match "$stderr" "receiver: 1 entry could not be written"
	[ ! -e "$D/out/t/big" ] || fail "the big file was kept under its name"
	[ "$(cat "$D/out/t/a")" = small ] && [ "$(cat "$D/out/t/z")" = after ] ||
		fail "the other files did not arrive"
	[ -z "$(find "$D/out" -name '.*.rdx-*')" ] || fail "temporary left: $(find "$D/out" -name '.*.rdx-*')"
}

@test "rdsend -r as nobody: an empty file it may not read is sent (nothing to read); a working directory it may not read is no matter" {
	nobody_dir
	mkdir -p "$N/src/t" "$N/private" "$D/out"
	chmod 700 "$N/private"
	echo a >"$N/src/t/a"
	: >"$N/src/t/lock"
	chmod -R a+rX "$N/src"
	chmod 000 "$N/src/t/lock"
	port=$(free_port)
	start_recv -r --wait 30 "$port" key "$D/out"
	wait_listen "$port"
	# Run from a directory nobody may read: libarchive's walk opens ".".
	run_t bash -c 'cd "$1" && shift && exec "$@"' _ "$N/private" \
		"${NOBODY[@]}" "$N/rdsend" -r 127.0.0.1 "$port" key "$N/src/t"
	assert_status 0
	wait_recv
	assert_rc recv "$RECV_RC" 0
	[ -f "$D/out/t/lock" ] && [ ! -s "$D/out/t/lock" ] || fail "the empty file did not arrive"
	[ "$(cat "$D/out/t/a")" = a ] || fail "the other file did not arrive"
}
