#!/usr/bin/env bats
# A hostile far end: tests/peer/evilpeer speaks the real protocol with the
# right key (a compromised host, or a replaced rdsend there) and sends what
# nobody asked for.  The receiving side is in charge: it writes only under
# the names it asked for, removes nothing without --delete, and lists
# nothing without --sync/--checksum/--delete/--dry-run asked for on its
# own side.  Played through rdcp (a pull: evilpeer stands in for the far
# rdsend --server, by --remote-path) and against rdrecv -r.

load ../lib/common
load ../lib/netns
load ../lib/sshd

setup_file() {
	CLEANUPS=()
	sshd_setup
}

teardown_file() {
	sshd_teardown
}

setup() {
	rdcp_test_setup
	EVIL=$RDX_BUILD/tests/evilpeer
	[ -x "$EVIL" ] || fail "evilpeer not built: $EVIL"
	mkdir "$D/fake" "$D/near" "$D/outside"
}

# far ATTACK: the far host's rdsend is evilpeer playing ATTACK.
far() {
	printf '#!/bin/sh\nexec %s server %s "$@"\n' "$EVIL" "$1" >"$D/fake/rdsend"
	chmod 755 "$D/fake/rdsend"
}

# pull ARGS...: rdcp ARGS with the fake far rdsend.
pull() {
	run_t --secs 60 ip netns exec "$NS_B" "$RDCP" -F "$SSH_CONFIG" \
		--remote-path "$D/fake" --timeout 10 "$@"
}

# nothing_new DIR: DIR holds nothing but what the test put there.
assert_untouched() {
	local got
	got=$(cd "$1" && find . -mindepth 1 | sort | tr '\n' ' ')
	[ "$got" = "$2" ] || fail "'$1' holds '$got', want '$2'"
}

@test "hostile far end: the honest peer's file and tree are received (the peer works)" {
	far ok
	pull -p "rdxhost:/srv/x" "$D/near"
	assert_status 0
	[ "$(cat "$D/near/x")" = honest ] || fail "near/x: $(cat "$D/near/x")"
	far ok-tree
	pull -r "rdxhost:/srv/x/" "$D/near/tree"
	assert_status 0
	[ "$(cat "$D/near/tree/a")" = honest ] || fail "near/tree/a missing"
}

@test "hostile far end: rdcp -p/-r pull refuses a name that was not asked for; nothing written" {
	echo mine >"$D/near/.bashrc"
	for opt in -p -r; do
		for attack in other-top extra; do
			far "$attack"
			pull "$opt" "rdxhost:/srv/x" "$D/near"
			[ "$status" -ne 0 ] || fail "$opt $attack: exit 0"
			assert_match "$stderr" "refused '\\.bashrc' from the sender: not what was asked for"
			[ "$(cat "$D/near/.bashrc")" = mine ] || fail "$opt $attack: .bashrc replaced"
			rm -f "$D/near/x"
		done
	done
	assert_untouched "$D/near" "./.bashrc "
	# Several sources: each name is one asked for, and only those.
	far extra
	pull -r "rdxhost:/srv/x" "rdxhost:/srv/y" "$D/near"
	[ "$status" -ne 0 ] || fail "extra with two sources: exit 0"
	[ "$(cat "$D/near/.bashrc")" = mine ] || fail ".bashrc replaced"
}

@test "hostile far end: rdcp -p (one file) refuses a tree under the file's name" {
	far nested-file
	pull -p "rdxhost:/srv/x" "$D/near"
	[ "$status" -ne 0 ] || fail "exit 0"
	assert_match "$stderr" "a file was asked for, not a tree"
	assert_untouched "$D/near" ""
}

@test "hostile far end: '..', absolute names and writes through a symlink are refused (rdcp -r)" {
	far dotdot
	pull -r "rdxhost:/srv/x" "$D/near"
	[ "$status" -ne 0 ] || fail "dotdot: exit 0"
	[ ! -e "$D/.bashrc" ] || fail "dotdot: wrote outside"
	far "absolute:$D/outside/abs"
	pull -r "rdxhost:/srv/x" "$D/near"
	[ "$status" -ne 0 ] || fail "absolute: exit 0"
	far "symlink:$D/outside"
	pull -r "rdxhost:/srv/x" "$D/near"
	[ "$status" -ne 0 ] || fail "symlink: exit 0"
	assert_untouched "$D/outside" ""
	[ ! -e "$D/near/x/link/evil" ] || fail "wrote through the symlink"
}

@test "hostile far end: unasked removals and listings are refused (rdcp -r); with --delete asked, obeyed" {
	mkdir -p "$D/near/x"
	echo keep >"$D/near/x/victim"
	far "delete:x/victim"
	pull -r "rdxhost:/srv/x" "$D/near"
	[ "$status" -ne 0 ] || fail "delete: exit 0"
	assert_match "$stderr" "the sender asked to delete files, but --delete was not given here"
	[ "$(cat "$D/near/x/victim")" = keep ] || fail "the victim was removed"
	far "list:$D/list.log"
	pull -r "rdxhost:/srv/x" "$D/near"
	[ "$status" -ne 0 ] || fail "list: exit 0"
	assert_match "$stderr" "the sender asked for a listing of what is here"
	! grep -q LISTED "$D/list.log" 2>/dev/null || fail "listed: $(cat "$D/list.log")"
	# Asked for here, the same removal and listing are what the user wanted.
	far "delete:x/victim"
	pull -r --delete "rdxhost:/srv/x" "$D/near"
	assert_status 0
	[ ! -e "$D/near/x/victim" ] || fail "--delete asked for, the victim is still there"
	far "list:$D/list.log"
	pull -r --sync "rdxhost:/srv/x" "$D/near"
	assert_status 0
	grep -q "LISTED F x/a" "$D/list.log" || fail "--sync asked for, no listing: $(cat "$D/list.log")"
}

# dial ATTACK [RDRECV OPTIONS...]: rdrecv -r into $D/near, evilpeer dials it.
dial() {
	local attack=$1 port
	shift
	port=$(free_port)
	RDX_KEY=$KEY start_recv -r --wait 30 "$@" "$port" "$D/near"
	wait_listen "$port"
	RDX_KEY=$KEY run_t "$EVIL" dial 127.0.0.1 "$port" "$attack" x
	wait_recv
}

@test "hostile sender against rdrecv -r: unsafe names, unasked removals and listings refused" {
	local attack
	for attack in dotdot "absolute:$D/outside/abs" "symlink:$D/outside"; do
		dial "$attack"
		[ "$RECV_RC" -ne 0 ] || fail "$attack: rdrecv exit 0"
	done
	assert_untouched "$D/outside" ""
	mkdir -p "$D/near/x"
	echo keep >"$D/near/x/victim"
	dial "delete:x/victim"
	assert_rc recv "$RECV_RC" 3
	assert_file_match "$D/recv.err" "the sender asked to delete files, but --delete was not given here"
	[ "$(cat "$D/near/x/victim")" = keep ] || fail "the victim was removed"
	dial "list:$D/list.log"
	assert_rc recv "$RECV_RC" 3
	assert_file_match "$D/recv.err" "the sender asked for a listing of what is here"
	! grep -q LISTED "$D/list.log" 2>/dev/null || fail "listed: $(cat "$D/list.log")"
	# rdrecv's own --delete and --sync let them through.
	dial "delete:x/victim" --delete
	assert_rc recv "$RECV_RC" 0
	[ ! -e "$D/near/x/victim" ] || fail "rdrecv --delete: the victim is still there"
	dial "list:$D/list.log" --sync
	assert_rc recv "$RECV_RC" 0
	grep -q "LISTED F x/a" "$D/list.log" || fail "rdrecv --sync: no listing: $(cat "$D/list.log")"
	run_t "$RDRECV" --delete 1234 "$D/near/file"
	assert_status 2
	assert_match "$stderr" "--delete is for trees: use it with -r"
}
