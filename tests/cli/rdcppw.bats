#!/usr/bin/env bats
# rdcp logging in with a password: two more sshds in namespace A, one
# taking passwords and one keyboard-interactive logins (through PAM's
# pam_unix), and no keys, started in a mount namespace of their own whose
# /etc/shadow gives root a password made for the run (the system's own
# files are not touched).  rdcp gets the password from SSH_ASKPASS
# (SSH_ASKPASS_REQUIRE=force, as ssh reads them) and runs under setsid,
# so that no terminal can be asked.

load ../lib/common
load ../lib/netns
load ../lib/sshd

setup_file() {
	CLEANUPS=()
	sshd_setup
	PW_PORT=2223
	PW=rdx-pw-$RANDOM$RANDOM
	local hash n
	hash=$(openssl passwd -6 "$PW")
	awk -F: -v OFS=: -v h="$hash" '$1 == "root" { $2 = h } { print }' /etc/shadow >"$SSHD_DIR/shadow"
	chmod 600 "$SSHD_DIR/shadow"
	sed -e '/^Port /d' -e '/^Match /,$d' \
		-e 's|^PidFile .*|PidFile '"$SSHD_DIR"'/sshd-pw.pid|' \
		-e 's/^PermitRootLogin .*/PermitRootLogin yes/' \
		-e 's/^PubkeyAuthentication .*/PubkeyAuthentication no/' \
		-e 's/^PasswordAuthentication .*/PasswordAuthentication yes/' \
		"$SSHD_DIR/sshd_config" >"$SSHD_DIR/sshd-pw.config"
	echo "Port $PW_PORT" >>"$SSHD_DIR/sshd-pw.config"
	echo "[$IP_A]:$PW_PORT $(cut -d' ' -f1,2 "$SSHD_DIR/host_key.pub")" >>"$SSHD_DIR/known_hosts"
	cat >>"$SSH_CONFIG" <<-EOF2
		Host pwhost
		  HostName $IP_A
		  Port $PW_PORT
		  User root
		  UserKnownHostsFile $SSHD_DIR/known_hosts
	EOF2
	KB_PORT=2224
	sed -e 's/^UsePAM .*/UsePAM yes/' -e 's/^PasswordAuthentication .*/PasswordAuthentication no/' \
		-e 's/^KbdInteractiveAuthentication .*/KbdInteractiveAuthentication yes/' \
		-e "s/^Port .*/Port $KB_PORT/" -e 's|sshd-pw.pid|sshd-kb.pid|' \
		"$SSHD_DIR/sshd-pw.config" >"$SSHD_DIR/sshd-kb.config"
	echo "[$IP_A]:$KB_PORT $(cut -d' ' -f1,2 "$SSHD_DIR/host_key.pub")" >>"$SSHD_DIR/known_hosts"
	cat >>"$SSH_CONFIG" <<-EOF2
		Host kbhost
		  HostName $IP_A
		  Port $KB_PORT
		  User root
		  UserKnownHostsFile $SSHD_DIR/known_hosts
	EOF2
	for n in pw kb; do
		ip netns exec "$NS_A" unshare -m --propagation private sh -c \
			'mount --bind "$1" /etc/shadow && exec /usr/sbin/sshd -f "$2" -E "$3"' \
			_ "$SSHD_DIR/shadow" "$SSHD_DIR/sshd-$n.config" "$SSHD_DIR/sshd-$n.log" ||
			fail "sshd $n did not start: $(cat "$SSHD_DIR/sshd-$n.log")"
	done
	for port in $PW_PORT $KB_PORT; do
		for n in $(seq 1 100); do
			[ -n "$(ip netns exec "$NS_A" ss -Hltn "sport = :$port")" ] && break
			sleep 0.05
		done
	done
	export PW PW_PORT KB_PORT
}

teardown_file() {
	sshd_teardown
}

setup() {
	rdcp_test_setup
	# askpass: logs each prompt, answers $ANSWER
	printf '#!/bin/sh\nprintf "%%s\\n" "$1" >>"%s/asked"\nprintf "%%s\\n" "$ANSWER"\n' "$D" >"$D/askpass"
	chmod +x "$D/askpass"
}

# rdcp_pw ARGS...: rdcp from namespace B with no terminal, SSH_ASKPASS set.
rdcp_pw() {
	run_t --secs 60 ip netns exec "$NS_B" env SSH_ASKPASS="$D/askpass" SSH_ASKPASS_REQUIRE=force \
		ANSWER="${ANSWER:-$PW}" setsid -w "$RDCP" -F "$SSH_CONFIG" --remote-path "$RDX_BUILD" \
		--timeout 10 "$@"
}

# refused_thrice HOST DST: rdcp of $D/src to HOST:DST with a wrong answer
# is asked three times, exits 3 with one line, and copies nothing.
refused_thrice() {
	rm -f "$D/asked"
	ANSWER=wrong rdcp_pw "$D/src" "$1:$2"
	assert_status 3
	[ "$(grep -c . "$D/asked")" -eq 3 ] || fail "asked: $(cat "$D/asked")"
	assert_match "$stderr" "^rdcp: permission denied for root@$1: no key was accepted, and the password was refused$"
	[ ! -e "$2" ] || fail "a file arrived"
}

@test "rdcp with a password from SSH_ASKPASS: push and pull" {
	mkrand "$D/src" 100000
	rdcp_pw "$D/src" "pwhost:$D/far"
	assert_status 0
	assert_same "$D/src" "$D/far"
	[ "$(cat "$D/asked")" = "root@$IP_A's password: " ] || fail "asked: $(cat "$D/asked")"
	rdcp_pw "pwhost:$D/far" "$D/near"
	assert_status 0
	assert_same "$D/src" "$D/near"
	[ "$(grep -c . "$D/asked")" -eq 2 ] || fail "asked: $(cat "$D/asked")"
}

@test "rdcp with a wrong password: asked three times, then exit 3 with one line" {
	mkrand "$D/src" 10
	refused_thrice pwhost "$D/far"
}

@test "rdcp asks for no password with -o BatchMode=yes, nor without SSH_ASKPASS and a terminal" {
	mkrand "$D/src" 10
	rdcp_pw -o BatchMode=yes "$D/src" "pwhost:$D/far"
	assert_status 3
	assert_match "$stderr" "permission denied for root@pwhost: no key was accepted, and BatchMode asks for no password"
	[ ! -e "$D/asked" ] || fail "SSH_ASKPASS was run: $(cat "$D/asked")"
	# scp's -B is the same.
	rdcp_pw -B "$D/src" "pwhost:$D/far"
	assert_status 3
	assert_match "$stderr" "no key was accepted, and BatchMode asks for no password"
	[ ! -e "$D/asked" ] || fail "SSH_ASKPASS was run for -B: $(cat "$D/asked")"
	run_t --secs 60 ip netns exec "$NS_B" setsid -w "$RDCP" -F "$SSH_CONFIG" \
		--remote-path "$RDX_BUILD" "$D/src" "pwhost:$D/far"
	assert_status 3
	assert_match "$stderr" "no password can be asked here \\(no terminal; see SSH_ASKPASS"
	[ ! -e "$D/far" ] || fail "a file arrived"
}

@test "rdcp with keyboard-interactive (PAM): the server's prompt, answered by SSH_ASKPASS; a wrong answer" {
	mkrand "$D/src" 100000
	rdcp_pw "$D/src" "kbhost:$D/far"
	assert_status 0
	assert_same "$D/src" "$D/far"
	[ "$(cat "$D/asked")" = "Password: " ] || fail "asked: $(cat "$D/asked")"
	assert_file_match "$SSHD_DIR/sshd-kb.log" "Accepted keyboard-interactive/pam for root"
	refused_thrice kbhost "$D/far2"
}

# on_tty DST [AFTER [BEFORE]]: rdcp of $D/src to pwhost:DST from namespace
# B on a terminal of its own (script(1)), without SSH_ASKPASS, in sh
# after the commands BEFORE and before AFTER, "echo rc=$?" and "stty -a"
# (the settings rdcp left); the
# terminal's output is $D/tty.out, what is typed goes to fd 7.  Waits
# for the first prompt.  Sets TTY_PID (script's) and RDCP_PID.
on_tty() {
	rm -f "$D/in" "$D/tty.out"
	mkfifo "$D/in"
	script -qfec "${3:-}env --default-signal=HUP ip netns exec $NS_B $RDCP -F $SSH_CONFIG --remote-path $RDX_BUILD --timeout 10 $D/src pwhost:$1; ${2:-}echo rc=\$?; stty -a" \
		/dev/null <"$D/in" >"$D/tty.out" 2>&1 &
	TTY_PID=$!
	exec 7>"$D/in"
	wait_until 30 prompts 1 || { exec 7>&-; fail "no prompt: $(cat "$D/tty.out")"; }
	RDCP_PID=$(pgrep -x rdcp -s "$(ps -o sid= -p "$(pgrep -P "$TTY_PID")" | tr -d ' ')")
	[ -n "$RDCP_PID" ] || fail "no rdcp under script"
}

# prompts N: the terminal has shown the password prompt N times.
prompts() {
	[ "$(grep -o "password: " "$D/tty.out" | wc -l)" -ge "$1" ]
}

# tty_done WANT_RC: script ends; rdcp's exit status (the terminal's
# "rc=" line) is WANT_RC.
tty_done() {
	wait_exit "$TTY_PID" 60
	exec 7>&-
	assert_rc script "$WAIT_RC" 0
	grep -q "^rc=$1" "$D/tty.out" || fail "rdcp did not exit $1: $(cat "$D/tty.out")"
}

@test "rdcp asks on its terminal without echo when SSH_ASKPASS is not forced" {
	mkrand "$D/src" 1000
	# The password is typed once the prompt is there (what is typed
	# before it is flushed, as by ssh).
	on_tty "$D/far"
	echo "$PW" >&7
	tty_done 0
	grep -q "root@$IP_A's password: " "$D/tty.out" || fail "prompt: $(cat "$D/tty.out")"
	! grep -qF "$PW" "$D/tty.out" || fail "the password was echoed: $(cat "$D/tty.out")"
	assert_same "$D/src" "$D/far"
}

@test "rdcp: Ctrl-C at the password prompt exits 130; SIGHUP there leaves the echo on" {
	mkrand "$D/src" 1000
	on_tty "$D/far"
	printf '\003' >&7
	tty_done 130
	grep -q "rdcp: interrupted" "$D/tty.out" || fail "no message: $(cat "$D/tty.out")"
	! grep -q "permission denied" "$D/tty.out" || fail "taken as a refusal: $(cat "$D/tty.out")"
	[ "$(grep -c "password: " "$D/tty.out")" -eq 1 ] || fail "asked again: $(cat "$D/tty.out")"
	grep -qw -- "-echo" "$D/tty.out" && fail "echo left off: $(cat "$D/tty.out")"
	[ ! -e "$D/far" ] || fail "a file arrived"
	# A hangup ends rdcp as it would (128 + 1), with the echo back first
	# (on_tty gives it SIGHUP's default, whatever nohup set for us).
	on_tty "$D/far"
	kill -HUP "$RDCP_PID"
	tty_done 129
	grep -qw -- "-echo" "$D/tty.out" && fail "echo left off: $(cat "$D/tty.out")"
	grep -qw -- "echo" "$D/tty.out" || fail "no stty: $(cat "$D/tty.out")"
	[ ! -e "$D/far" ] || fail "a file arrived"
}

@test "rdcp: Ctrl-Z at the password prompt stops it with the echo on; fg asks again" {
	mkrand "$D/src" 1000
	# A shell with job control: on the stop it shows the terminal's
	# settings, then brings rdcp back with fg, whose status is rdcp's.
	on_tty "$D/far" "stty -a; fg >/dev/null; " "set -m; "
	printf '\032' >&7
	wait_until 10 prompts 2 || fail "not asked again: $(cat "$D/tty.out")"
	grep -q "speed" "$D/tty.out" || fail "did not stop: $(cat "$D/tty.out")"
	grep -qw -- "-echo" "$D/tty.out" && fail "stopped with the echo off: $(cat "$D/tty.out")"
	echo "$PW" >&7
	tty_done 0
	! grep -qF "$PW" "$D/tty.out" || fail "the password was echoed: $(cat "$D/tty.out")"
	assert_same "$D/src" "$D/far"
}
