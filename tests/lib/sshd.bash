# A real OpenSSH sshd for the rdcp tests, in network namespace A of
# tests/lib/netns.bash, with keys made for the test (never the user's).
# Load after common and netns; call sshd_setup from setup_file and
# sshd_teardown from teardown_file:
#
#   SSHD_DIR      host key, client keys, authorized_keys, known_hosts, configs
#   SSH_CONFIG    a client config: Host rdxhost = $IP_A, user root, the
#                 test's key and known_hosts (rdcp -F "$SSH_CONFIG")
#   SSHD_PORT2    a second port sshd listens on (for -P), where a forced
#                 command prints a banner on stdout before running ours
#
# sshd's SetEnv puts $RDX_BUILD first on the far side's PATH, so rdcp
# finds the fresh rdsend/rdrecv there without --remote-path, and gives it
# an empty HOME (sshd takes only the first SetEnv line: one line for all).
#
# Two far hosts (rdcp3.bats): sshd_setup netns3_setup makes the three
# namespaces of tests/lib/netns.bash, then sshd_add NS ADDR NAME starts a
# second sshd in NS on ADDR (same keys), known to SSH_CONFIG as Host NAME.
#
# The rdcp files share their setup and runner too: rdcp_test_setup in
# setup(), rdcp_b to run rdcp in B, ns_running to look for a far side,
# hostile_names / assert_no_canaries for the quoting tests, rdcp_sigint.
# shellcheck disable=SC2034 # globals are used by the .bats files

RDCP=$RDX_BUILD/rdcp

sshd_setup() {
	local sshd=/usr/sbin/sshd n
	[ -x "$sshd" ] || fail "sshd not installed (scripts/deps.sh test installs openssh-server)"
	command -v ssh-keygen >/dev/null || fail "ssh-keygen not installed (openssh-client)"
	"${1:-netns_setup}"
	export NS_A NS_B IP_A IP_B
	SSHD_DIR=$BATS_FILE_TMPDIR/sshd
	mkdir -p "$SSHD_DIR"
	chmod 700 "$SSHD_DIR"
	ssh-keygen -q -t ed25519 -N '' -C rdx-host -f "$SSHD_DIR/host_key"
	ssh-keygen -q -t ed25519 -N '' -C rdx-client -f "$SSHD_DIR/id"
	ssh-keygen -q -t ed25519 -N '' -C rdx-wrong -f "$SSHD_DIR/wrong"
	cp "$SSHD_DIR/id.pub" "$SSHD_DIR/authorized_keys"
	# The far side's shell gets a HOME of its own, empty (SetEnv below):
	# bash run by sshd reads ~/.bashrc even for a command, and the host
	# user's (a pyenv init, say) would cost every login a second and could
	# print on stdout.  sshd still starts the command in the real home.
	mkdir -p "$SSHD_DIR/home"
	SSHD_PORT2=2222
	{
		echo "$IP_A $(cut -d' ' -f1,2 "$SSHD_DIR/host_key.pub")"
		echo "[$IP_A]:$SSHD_PORT2 $(cut -d' ' -f1,2 "$SSHD_DIR/host_key.pub")"
	} >"$SSHD_DIR/known_hosts"
	cat >"$SSHD_DIR/sshd_config" <<-EOF
		Port 22
		Port $SSHD_PORT2
		ListenAddress $IP_A
		HostKey $SSHD_DIR/host_key
		PidFile $SSHD_DIR/sshd.pid
		AuthorizedKeysFile $SSHD_DIR/authorized_keys
		PermitRootLogin prohibit-password
		PubkeyAuthentication yes
		PasswordAuthentication no
		KbdInteractiveAuthentication no
		UsePAM no
		StrictModes no
		SetEnv PATH=$RDX_BUILD:/usr/local/bin:/usr/bin:/bin HOME=$SSHD_DIR/home
		LogLevel VERBOSE
		# On the second port, a chatty login: lines on stdout before the
		# command runs, as a .bashrc or a wrapper might print.
		Match LocalPort $SSHD_PORT2
		  ForceCommand echo "Welcome to rdxhost"; echo "RDX-PORTAL is down today"; echo >&2 "motd on stderr"; eval "\$SSH_ORIGINAL_COMMAND"
	EOF
	SSH_CONFIG=$SSHD_DIR/ssh_config
	: >"$SSH_CONFIG"
	ssh_config_host rdxhost "$IP_A"
	export SSHD_DIR SSH_CONFIG SSHD_PORT2
	# The privilege separation directory Debian's sshd insists on.
	mkdir -p /run/sshd
	ip netns exec "$NS_A" "$sshd" -f "$SSHD_DIR/sshd_config" -E "$SSHD_DIR/sshd.log" ||
		fail "sshd did not start: $(cat "$SSHD_DIR/sshd.log")"
	for n in $(seq 1 100); do
		[ -n "$(ip netns exec "$NS_A" ss -Hltn "sport = :22")" ] && return 0
		sleep 0.05
	done
	fail "sshd does not listen: $(cat "$SSHD_DIR/sshd.log")"
}

# ssh_config_host NAME ADDR: Host NAME in SSH_CONFIG: HostName ADDR, root,
# the test's key and known_hosts.
ssh_config_host() {
	cat >>"$SSH_CONFIG" <<-EOF
		Host $1
		  HostName $2
		  User root
		  IdentityFile $SSHD_DIR/id
		  UserKnownHostsFile $SSHD_DIR/known_hosts
	EOF
}

# sshd_add NS ADDR NAME: one more sshd, in namespace NS on ADDR port 22,
# with sshd_setup's host key and authorized_keys; Host NAME in SSH_CONFIG.
sshd_add() {
	local ns=$1 addr=$2 name=$3 n
	sed -e "s/^ListenAddress .*/ListenAddress $addr/" \
		-e "s|^PidFile .*|PidFile $SSHD_DIR/sshd-$name.pid|" \
		-e "/^Port $SSHD_PORT2\$/d" "$SSHD_DIR/sshd_config" >"$SSHD_DIR/sshd-$name.config"
	echo "$addr $(cut -d' ' -f1,2 "$SSHD_DIR/host_key.pub")" >>"$SSHD_DIR/known_hosts"
	ssh_config_host "$name" "$addr"
	ip netns exec "$ns" /usr/sbin/sshd -f "$SSHD_DIR/sshd-$name.config" -E "$SSHD_DIR/sshd-$name.log" ||
		fail "sshd $name did not start: $(cat "$SSHD_DIR/sshd-$name.log")"
	for n in $(seq 1 100); do
		[ -n "$(ip netns exec "$ns" ss -Hltn "sport = :22")" ] && return 0
		sleep 0.05
	done
	fail "sshd $name does not listen: $(cat "$SSHD_DIR/sshd-$name.log")"
}

sshd_teardown() {
	local pid
	for pid in "${SSHD_DIR:-/nonexistent}"/sshd*.pid; do
		[ -s "$pid" ] || continue
		kill "$(cat "$pid")" 2>/dev/null || true
	done
	netns_teardown
}

# rdcp_test_setup: setup() of the rdcp files: common_setup, rdcp built,
# and the user's agent left out of the tests.
rdcp_test_setup() {
	common_setup
	[ -x "$RDCP" ] || fail "rdcp not built: $RDCP"
	unset SSH_AUTH_SOCK
}

# rdcp_b ARGS...: rdcp in namespace B with the test's SSH config and the
# fresh binaries on the far side, --timeout ${RDCP_TIMEOUT:-10}, killed
# after ${RDCP_SECS:-60} s; sets status, output, stderr.
rdcp_b() {
	run_t --secs "${RDCP_SECS:-60}" ip netns exec "$NS_B" "$RDCP" -F "$SSH_CONFIG" \
		--remote-path "$RDX_BUILD" --timeout "${RDCP_TIMEOUT:-10}" "$@"
}

# ns_running NS NAME: a process NAME runs in namespace NS.
ns_running() {
	local p
	for p in $(ip netns pids "$1"); do
		[ "$(cat "/proc/$p/comm" 2>/dev/null)" != "$2" ] || return 0
	done
	return 1
}

# hostile_names: sets NAMES to file names a shell would split, expand or
# run as code if they were not quoted.  An injected command would run in
# the far side's login directory (root's home), creating a canary
# $CANARY-1..4 there.  The sanitizer pass checks memory, not quoting
# again: a few names (every login is slow there).
hostile_names() {
	CANARY=rdx-pwned-$$
	local pw=$CANARY
	NAMES=("a b" "it's" "dq\"x" "\$HOME" "semi;colon" "\$(touch $pw-1)"
		"\`touch $pw-2\`" "; touch $pw-3 #" "ünïcødé ✓" "-dash" "new
line" "tab	x" "back\\slash" "'; touch $pw-4; '" "\$(id>&2)")
	[ -z "${RDX_SANITIZED:-}" ] || NAMES=("it's" "\$(touch $pw-1)" "; touch $pw-3 #" "ünïcødé ✓")
}

# assert_no_canaries: no far shell ran a command from hostile_names.
assert_no_canaries() {
	local home i
	home=$(getent passwd root | cut -d: -f6)
	for i in 1 2 3 4; do
		if [ -e "$home/$CANARY-$i" ]; then
			rm -f "$home/$CANARY-$i"
			fail "a far side's shell ran an injected command ($i)"
		fi
	done
}

# rdcp_sigint SRC DST: rdcp SRC DST in B, in the background, one of them
# the fifo $D/fifo, fed 1 MiB and then held open; once the receiver's
# file for $D/dst exists (unnamed, or a temporary $D/.dst.rdx-*), SIGINT.  Asserts exit 130 and
# "rdcp: interrupted".
rdcp_sigint() {
	local pid
	mkfifo "$D/fifo"
	# shellcheck disable=SC2016 # $1 is the inner shell's
	bg_start writer bash -c 'exec 7>"$1"; head -c 1048576 /dev/urandom >&7; sleep 30' _ "$D/fifo"
	BG_STDIN=/dev/null bg_start rdcp ip netns exec "$NS_B" "$RDCP" -F "$SSH_CONFIG" \
		--remote-path "$RDX_BUILD" --timeout 10 "$1" "$2"
	pid=$BG_PID
	# shellcheck disable=SC2317 # called by wait_until
	temp_there() { compgen -G "$D/.dst.rdx-*" >/dev/null || has_unnamed "$D"; }
	wait_until 20 temp_there || fail "the receiver never created its temporary: $(cat "$D/rdcp.err")"
	kill -INT "$pid"
	wait_exit "$pid" 20
	assert_rc rdcp "$WAIT_RC" 130
	assert_file_match "$D/rdcp.err" '^rdcp: interrupted$'
}
