#!/usr/bin/env bats
# rdcp between two remote hosts (src/cp/relay.c): three network namespaces
# (tests/lib/netns.bash netns3_setup), sshd in A (Host rdxhost) and in C
# (Host rdxc), rdcp in B.  B reaches A and C over their own links; A and
# C talk over the A-C link, and nothing forwards through B, so the data
# can only go from A to C directly.  All three share the file system: a
# remote path is a path in $D on either host.

load ../lib/common
load ../lib/netns
load ../lib/sshd
load ../lib/tree

setup_file() {
	CLEANUPS=()
	sshd_setup netns3_setup
	export NS_C IP_C IP_BC IP_AC_A IP_AC_C
	sshd_add "$NS_C" "$IP_C" rdxc
	mktree "$BATS_FILE_TMPDIR/tree" 40
}

teardown_file() {
	sshd_teardown
}

setup() {
	rdcp_test_setup
}

# assert_far_gone: neither far side is left running (within 10 s).
assert_far_gone() {
	wait_until 10 eval '! ns_running "$NS_A" rdsend && ! ns_running "$NS_C" rdrecv' ||
		fail "a far side still runs: $(ps -eo pid,comm,args | grep -E '[r]d(send|recv)')"
}

# b_bytes: bytes through B's two links so far (SSH, and data if any).
b_bytes() {
	echo $(($(netns_bytes "$NS_B" veth1) + $(netns_bytes "$NS_B" vethbc)))
}

@test "rdcp3: a file from A to C goes over the A-C link, not through B" {
	mkrand "$D/src" $((3 * 1024 * 1024 + 1))
	b0=$(b_bytes)
	ac0=$(netns_bytes "$NS_A" vethac)
	rdcp_b "rdxhost:$D/src" "rdxc:$D/dst"
	assert_status 0
	[ -z "$output$stderr" ] || fail "output: $output$stderr"
	assert_same "$D/src" "$D/dst"
	assert_no_temp "$D/dst"
	b=$(($(b_bytes) - b0))
	ac=$(($(netns_bytes "$NS_A" vethac) - ac0))
	[ "$ac" -gt $((3 * 1024 * 1024)) ] || fail "only $ac bytes on the A-C link"
	# Two SSH logins and their channels: tens of KiB, never the file.
	[ "$b" -lt $((512 * 1024)) ] || fail "$b bytes went through B"
	# A directory as DST gets the source's name; -v shows both sides;
	# --json is C's count.
	mkdir "$D/dir"
	rdcp_b -v --json "rdxhost:$D/src" "rdxc:$D/dir"
	assert_status 0
	assert_same "$D/src" "$D/dir/src"
	assert_match "$output" '^\{"tool":"rdcp","bytes":3145729,"seconds":[0-9.]+,.*"transport":"(tcp|rdma)","streams":1,"compress":false,"encrypt":false\}$' "--json"
	assert_match "$stderr" "^rdcp: rdsend on rdxhost listens on port [0-9]+; rdrecv on rdxc dials $IP_A$"
	assert_match "$stderr" "^rdcp: rdxc: rdrecv: "
	assert_match "$stderr" "^rdcp: rdxhost: rdsend: "
	# Both on one host: two logins there, the host dialing itself.
	rdcp_b "rdxhost:$D/src" "rdxhost:$D/again"
	assert_status 0
	assert_same "$D/src" "$D/again"
}

@test "rdcp3: -r trees from A to C, as and into DST; several sources" {
	T=$BATS_FILE_TMPDIR/tree
	rdcp_b -r "rdxhost:$T" "rdxc:$D/as"
	assert_status 0
	assert_same_tree "$T" "$D/as"
	mkdir "$D/into"
	rdcp_b -r --streams 2 --encrypt --compress --json "rdxhost:$T" "rdxc:$D/into"
	assert_status 0
	assert_match "$output" '"streams":2,"compress":true,"encrypt":true\}$' "--json"
	assert_same_tree "$T" "$D/into/tree"
	mkdir "$D/many"
	rdcp_b "rdxhost:$T/large1" "rdxhost:$T/private" "rdxc:$D/many"
	assert_status 0
	assert_same "$T/large1" "$D/many/large1"
	assert_same "$T/private" "$D/many/private"
}

@test "rdcp3: a hostile source host: the destination takes only the tree or file asked for" {
	# A's rdsend is tests/peer/evilpeer; C's rdrecv is the real one,
	# told by rdcp what was asked for (--expect, --files-only).
	local evil=$RDX_BUILD/tests/evilpeer
	[ -x "$evil" ] || fail "evilpeer not built: $evil"
	mkdir "$D/fake" "$D/into"
	ln -s "$RDX_BUILD/rdrecv" "$D/fake/rdrecv"
	far_a() {
		printf '#!/bin/sh\nexec %s server %s "$@"\n' "$evil" "$1" >"$D/fake/rdsend"
		chmod 755 "$D/fake/rdsend"
	}
	far_a ok-tree
	RDX_BUILD=$D/fake rdcp_b -r "rdxhost:/srv/x" "rdxc:$D/into"
	assert_status 0
	[ "$(cat "$D/into/x/a")" = honest ] || fail "the honest tree did not arrive"
	far_a extra
	RDX_BUILD=$D/fake rdcp_b -r "rdxhost:/srv/y" "rdxc:$D/into"
	[ "$status" -ne 0 ] || fail "extra: exit 0"
	assert_match "$stderr" "not what was asked for"
	[ ! -e "$D/into/.bashrc" ] || fail "the extra name was written"
	far_a nested-file
	RDX_BUILD=$D/fake rdcp_b -p "rdxhost:/srv/f" "rdxc:$D/into"
	[ "$status" -ne 0 ] || fail "nested-file: exit 0"
	assert_match "$stderr" "a file was asked for, not a tree"
	[ ! -e "$D/into/f" ] || fail "a tree landed where a file was asked for"
	far_a "delete:x/a"
	RDX_BUILD=$D/fake rdcp_b -r "rdxhost:/srv/x" "rdxc:$D/into"
	[ "$status" -ne 0 ] || fail "delete: exit 0"
	[ -e "$D/into/x/a" ] || fail "an unasked removal was obeyed"
}

@test "rdcp3: --rdma-addr names the source's address for the destination" {
	mkrand "$D/src" 200000
	# An address C has no route to (B's): rdrecv there fails within
	# --connect-timeout, and the source is stopped rather than left
	# waiting for it (--connect-timeout 30 there).
	rdcp_b --connect-timeout 1 --rdma-addr "$IP_B" "rdxhost:$D/src" "rdxc:$D/dst"
	assert_status 5
	assert_match "$stderr" "^rdcp: rdxc: rdrecv: cannot connect to $IP_B"
	assert_match "$stderr" "^rdcp: rdrecv on 'rdxc' failed \\(exit status 3\\)$"
	if grep -q "rdxhost" <<<"$stderr"; then fail "the stopped source's words: $stderr"; fi
	assert_far_gone
	assert_no_output_file "$D/dst"
	# A's address on the A-C link, which B cannot reach.
	rdcp_b -v --rdma-addr "$IP_AC_A" "rdxhost:$D/src" "rdxc:$D/dst"
	assert_match "$stderr" "rdrecv on rdxc dials $IP_AC_A$"
	assert_status 0
	assert_same "$D/src" "$D/dst"
}

@test "rdcp3: hostile names on both sides reach each far side as one word; no injection" {
	hostile_names
	mkdir "$D/a" "$D/c" "$D/into"
	for name in "${NAMES[@]}"; do
		mkrand "$D/a/$name" 4097
		rdcp_b "rdxhost:$D/a/$name" "rdxc:$D/c/$name"
		assert_status 0
		assert_same "$D/a/$name" "$D/c/$name"
	done
	# Into a directory: the name comes from the source, through C's shell.
	rdcp_b "rdxhost:$D/a/${NAMES[1]}" "rdxhost:$D/a/${NAMES[2]}" "rdxc:$D/into"
	assert_status 0
	assert_same "$D/a/${NAMES[1]}" "$D/into/${NAMES[1]}"
	assert_same "$D/a/${NAMES[2]}" "$D/into/${NAMES[2]}"
	assert_no_canaries
	[ "$(find "$D/c" -type f -print0 | tr -cd '\0' | wc -c)" -eq "${#NAMES[@]}" ] ||
		fail "unexpected files: $(ls -la "$D/c")"
}

@test "rdcp3: a missing source (exit 5, rdsend's own words), a failed login to C (3): nothing left" {
	rdcp_b "rdxhost:$D/nope" "rdxc:$D/dst"
	assert_status 5
	assert_match "$stderr" "^rdcp: rdxhost: rdsend: cannot open '$D/nope': No such file or directory$"
	assert_match "$stderr" "^rdcp: rdsend on 'rdxhost' failed before the transfer \\(exit status 4\\)$"
	assert_far_gone
	assert_no_output_file "$D/dst"
	# The destination's login fails: the source, already listening, is
	# stopped rather than left waiting for a receiver.
	echo data >"$D/src"
	rdcp_b "rdxhost:$D/src" "root@$IP_BC:$D/dst"
	assert_status 3
	assert_one_line_error "$stderr" rdcp
	assert_match "$stderr" "^rdcp: cannot connect to '$IP_BC' over SSH"
	assert_far_gone
	# Both logins come before either command: the source's never ran
	# (a slow password for C must not time out a waiting source).
	mkdir "$D/fake"
	printf '#!/bin/sh\ntouch %s\nexit 1\n' "$D/ran" >"$D/fake/rdsend"
	chmod 755 "$D/fake/rdsend"
	rdcp_b --remote-path "$D/fake" "rdxhost:$D/src" "root@$IP_BC:$D/dst"
	assert_status 3
	[ ! -e "$D/ran" ] || fail "the source's command ran before the destination's login"
	# With -r the source listens first and fails once C has dialed.
	rdcp_b -r "rdxhost:$D/nope" "rdxc:$D/tdst"
	assert_status 5
	assert_match "$stderr" "^rdcp: rdxhost: rdsend: warning: cannot read '$D/nope'"
	assert_match "$stderr" "^rdcp: rdsend on 'rdxhost' failed \\(exit status 4\\)$"
	assert_far_gone
}

@test "rdcp3: a bad destination: not a directory for several sources, not writable" {
	echo one >"$D/f1"
	echo two >"$D/f2"
	echo keep >"$D/file"
	rdcp_b "rdxhost:$D/f1" "rdxhost:$D/f2" "rdxc:$D/file"
	assert_status 5
	assert_match "$stderr" "^rdcp: rdxc: $D/file: not a directory$"
	[ "$(cat "$D/file")" = keep ] || fail "DST was overwritten"
	assert_far_gone
	# Read-only for root too: a read-only tmpfs in C's sshd's mount
	# namespace (ip netns exec made it one).
	mkdir -p "$D/ro"
	nsenter -t "$(cat "$SSHD_DIR/sshd-rdxc.pid")" -m -- mount -t tmpfs -o ro,size=1m rdxro "$D/ro" ||
		fail "cannot mount a read-only tmpfs in sshd's mount namespace"
	rdcp_b "rdxhost:$D/f1" "rdxc:$D/ro/dst"
	assert_status 5
	assert_match "$stderr" "cannot create '$D/ro/dst': Read-only file system"
	assert_match "$stderr" "^rdcp: rdrecv on 'rdxc' failed \\(exit status [0-9]+\\)$"
	assert_far_gone
}

@test "rdcp3: SIGINT mid-copy: exit 130, both far sides gone, nothing under the final name" {
	rdcp_sigint "rdxhost:$D/fifo" "rdxc:$D/dst"
	assert_far_gone
	assert_no_output_file "$D/dst"
}

# B loses the network while both far ends run (fakes that print a port
# line, then wait): the relay sends nothing on its SSH connections, so
# only their TCP keepalives can find them dead.  rdcp must give up within
# about its --timeout (5 s here; the default 25 s), not wait for ever.
@test "rdcp3: this host loses the network mid-relay: rdcp fails within about --timeout instead of waiting for ever" {
	command -v nft >/dev/null || fail "nft is missing (scripts/deps.sh installs it)"
	mkdir "$D/fake"
	printf '#!/bin/sh\necho RDX-PORT 40000\nexec sleep 90\n' >"$D/fake/rdsend"
	printf '#!/bin/sh\nexec sleep 90\n' >"$D/fake/rdrecv"
	chmod 755 "$D/fake/rdsend" "$D/fake/rdrecv"
	BG_STDIN=/dev/null bg_start rdcp ip netns exec "$NS_B" "$RDCP" -F "$SSH_CONFIG" \
		--remote-path "$D/fake" --timeout 5 "rdxhost:$D/x" "rdxc:$D/y"
	pid=$BG_PID
	# shellcheck disable=SC2317 # called by wait_until
	both_far() { ns_running "$NS_A" sleep && ns_running "$NS_C" sleep; }
	wait_until 20 both_far || fail "the fakes did not start: $(cat "$D/rdcp.err")"
	in_b nft -f - <<-'EOF' || fail "nft setup failed"
		table inet rdxcut {
			chain in { type filter hook input priority 0; policy drop; }
			chain out { type filter hook output priority 0; policy drop; }
		}
	EOF
	wait_exit "$pid" 20
	in_b nft delete table inet rdxcut
	for ns in "$NS_A" "$NS_C"; do
		for p in $(ip netns pids "$ns"); do
			[ "$(cat "/proc/$p/comm" 2>/dev/null)" = sleep ] && kill "$p" 2>/dev/null
		done
	done
	[ "$WAIT_RC" != 124 ] || fail "rdcp still waited after 20 s with --timeout 5: $(cat "$D/rdcp.err")"
	[ "$WAIT_RC" -ne 0 ] && [ "$WAIT_RC" -lt 128 ] || fail "rdcp exited $WAIT_RC: $(cat "$D/rdcp.err")"
}

@test "rdcp3: ProxyCommand and ProxyJump: the login to A goes through C, the data straight to A" {
	sed -n '/^Host rdxc$/,/^Host /p' "$SSH_CONFIG" | sed '$ { /^Host /d }' >"$D/inner.cfg"
	printf '  BatchMode yes\n' >>"$D/inner.cfg"
	grep -q "HostName $IP_C" "$D/inner.cfg" || fail "no rdxc entry: $(cat "$D/inner.cfg")"
	{ printf 'Host viac\n  HostName %s\n  ProxyCommand ssh -F %s -W [%%h]:%%p rdxc\n' "$IP_A" "$D/inner.cfg"
	  printf '  User root\n  IdentityFile %s\n  UserKnownHostsFile %s\n' "$SSHD_DIR/id" "$SSHD_DIR/known_hosts"; } >"$D/jump.cfg"
	mkrand "$D/src" $((1024 * 1024 + 3))
	rdcp_b -F "$D/jump.cfg" "$D/src" "viac:$D/dst"
	assert_status 0
	assert_same "$D/src" "$D/dst"
	# A's sshd saw the login come from C's end of the A-C link.
	from_c() { [ "$(grep -c "Accepted publickey for root from $IP_AC_C " "$SSHD_DIR/sshd.log")" -eq "$1" ] ||
		fail "not $1 logins from C in A's log: $(grep Accepted "$SSHD_DIR/sshd.log" | tail -n 3)"; }
	from_c 1
	# And back, a pull through the same jump.
	rdcp_b -F "$D/jump.cfg" "viac:$D/src" "$D/back"
	assert_status 0
	assert_same "$D/src" "$D/back"
	from_c 2

	# ProxyJump: libssh runs "ssh -W [%h]:%p rdxc", an OpenSSH client
	# that reads the user's own ~/.ssh/config for rdxc.  That is a home
	# made for the test, bound over the real one in a mount namespace of
	# rdcp's own: the user's ~/.ssh is never read or written.
	home=$(getent passwd "$(id -u)" | cut -d: -f6)
	mkdir -p "$D/home/.ssh"
	cp "$D/inner.cfg" "$D/home/.ssh/config"
	chmod 700 "$D/home/.ssh"
	chmod 600 "$D/home/.ssh/config"
	{ printf 'Host viaj\n  HostName %s\n  ProxyJump rdxc\n' "$IP_A"
	  printf '  User root\n  IdentityFile %s\n  UserKnownHostsFile %s\n' "$SSHD_DIR/id" "$SSHD_DIR/known_hosts"; } >"$D/pj.cfg"
	rm -f "$D/dst" "$D/back"
	for dir in push pull; do
		if [ $dir = push ]; then set -- "$D/src" "viaj:$D/dst"; else set -- "viaj:$D/src" "$D/back"; fi
		run_t --secs 60 ip netns exec "$NS_B" unshare -m --propagation private sh -c \
			'mount --bind "$1" "$2" && shift 2 && exec "$@"' _ "$D/home" "$home" \
			"$RDCP" -F "$D/pj.cfg" --remote-path "$RDX_BUILD" --timeout 10 "$@"
		assert_status 0
	done
	assert_same "$D/src" "$D/dst"
	assert_same "$D/src" "$D/back"
	from_c 4
	# scp's -J: the same jump from the command line, to a host the
	# config reaches directly.
	{ printf 'Host direct\n  HostName %s\n' "$IP_A"
	  printf '  User root\n  IdentityFile %s\n  UserKnownHostsFile %s\n' "$SSHD_DIR/id" "$SSHD_DIR/known_hosts"; } >"$D/direct.cfg"
	rm -f "$D/dst"
	run_t --secs 60 ip netns exec "$NS_B" unshare -m --propagation private sh -c \
		'mount --bind "$1" "$2" && shift 2 && exec "$@"' _ "$D/home" "$home" \
		"$RDCP" -F "$D/direct.cfg" -J rdxc --remote-path "$RDX_BUILD" --timeout 10 "$D/src" "direct:$D/dst"
	assert_status 0
	assert_same "$D/src" "$D/dst"
	from_c 5
}

rm_ac_qdisc() { ip netns exec "$NS_A" tc qdisc del dev vethac root 2>/dev/null || true; }

@test "rdcp3: --progress from A to C draws C's count here (its progress lines), on a terminal only" {
	command -v script >/dev/null || fail "script (bsdutils) not installed"
	mkrand "$D/src" $((12 * 1024 * 1024))
	# About 1.5 s over the A-C link: time for several progress lines.
	ip netns exec "$NS_A" tc qdisc add dev vethac root tbf rate 64mbit burst 64kb latency 400ms
	CLEANUPS+=(rm_ac_qdisc)
	cmd=$(printf '%q ' ip netns exec "$NS_B" "$RDCP" -F "$SSH_CONFIG" --remote-path "$RDX_BUILD" \
		--timeout 10 --progress -v "rdxhost:$D/src" "rdxc:$D/dst")
	run_t --secs 60 script -qec "$cmd" "$D/typescript"
	assert_status 0
	assert_same "$D/src" "$D/dst"
	bar=$(tr '\r' '\n' <"$D/typescript")
	assert_match "$bar" '\[[#.]{30}\] +[0-9]+%' "progress bar"
	assert_match "$bar" 'ETA' "progress ETA"
	! grep -q RDX-PROGRESS "$D/typescript" || fail "a raw progress line was shown: $bar"
	# The far side's other words come through whole (-v).
	assert_match "$bar" "rdxc: rdrecv: received 12582912 bytes"
	# Without a terminal: nothing drawn, and no progress line shown.
	rm -f "$D/dst"
	rdcp_b --progress -v "rdxhost:$D/src" "rdxc:$D/dst"
	assert_status 0
	assert_same "$D/src" "$D/dst"
	! grep -q RDX-PROGRESS <<<"$stderr" || fail "a raw progress line was shown: $stderr"
	assert_match "$stderr" "rdxc: rdrecv: received 12582912 bytes"
}

@test "rdcp3: from A to C a new file gets the source's mode" {
	mkrand "$D/src" 1000
	chmod 0750 "$D/src"
	rdcp_b "rdxhost:$D/src" "rdxc:$D/dst"
	assert_status 0
	[ "$(stat -c %a "$D/dst")" = 750 ] || fail "mode: $(stat -c %a "$D/dst")"
}

@test "rdcp3: -3 relays through this host for two hosts that cannot reach each other, as scp -3" {
	mkrand "$D/src" $((2 * 1024 * 1024 + 5))
	chmod 0750 "$D/src"
	# Cut the A-C link: the direct copy cannot work.
	ip -n "$NS_A" link set vethac down
	CLEANUPS+=(ac_up)
	rdcp_b --connect-timeout 2 "rdxhost:$D/src" "rdxc:$D/direct"
	assert_nonzero
	[ ! -e "$D/direct" ] || fail "a direct copy over a cut link"
	before=$(b_bytes)
	rdcp_b -3 "rdxhost:$D/src" "rdxc:$D/dst"
	assert_status 0
	after=$(b_bytes)
	assert_same "$D/src" "$D/dst"
	[ "$(stat -c %a "$D/dst")" = 750 ] || fail "mode: $(stat -c %a "$D/dst")"
	[ $((after - before)) -ge $((4 * 1024 * 1024)) ] || fail "only $((after - before)) bytes crossed B"
	# Trees go directly or not at all.
	rdcp_b -3 -r "rdxhost:$D/src" "rdxc:$D/dst2"
	assert_status 2
	# The far side's failure is still named.
	rdcp_b -3 "rdxhost:$D/missing" "rdxc:$D/dst3"
	assert_status 5
	assert_match "$stderr" "rdsend on 'rdxhost' failed"
	assert_far_gone
}

ac_up() { ip -n "$NS_A" link set vethac up 2>/dev/null || true; }
