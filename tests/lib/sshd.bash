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
# finds the fresh rdsend/rdrecv there without --remote-path.
# shellcheck disable=SC2034 # globals are used by the .bats files

sshd_setup() {
	local sshd=/usr/sbin/sshd n
	[ -x "$sshd" ] || fail "sshd not installed (scripts/deps.sh test installs openssh-server)"
	command -v ssh-keygen >/dev/null || fail "ssh-keygen not installed (openssh-client)"
	netns_setup
	export NS_A NS_B IP_A IP_B
	SSHD_DIR=$BATS_FILE_TMPDIR/sshd
	mkdir -p "$SSHD_DIR"
	chmod 700 "$SSHD_DIR"
	ssh-keygen -q -t ed25519 -N '' -C rdx-host -f "$SSHD_DIR/host_key"
	ssh-keygen -q -t ed25519 -N '' -C rdx-client -f "$SSHD_DIR/id"
	ssh-keygen -q -t ed25519 -N '' -C rdx-wrong -f "$SSHD_DIR/wrong"
	cp "$SSHD_DIR/id.pub" "$SSHD_DIR/authorized_keys"
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
		SetEnv PATH=$RDX_BUILD:/usr/local/bin:/usr/bin:/bin
		LogLevel VERBOSE
		# On the second port, a chatty login: lines on stdout before the
		# command runs, as a .bashrc or a wrapper might print.
		Match LocalPort $SSHD_PORT2
		  ForceCommand echo "Welcome to rdxhost"; echo "RDX-PORTAL is down today"; echo >&2 "motd on stderr"; eval "\$SSH_ORIGINAL_COMMAND"
	EOF
	SSH_CONFIG=$SSHD_DIR/ssh_config
	cat >"$SSH_CONFIG" <<-EOF
		Host rdxhost
		  HostName $IP_A
		  User root
		  IdentityFile $SSHD_DIR/id
		  UserKnownHostsFile $SSHD_DIR/known_hosts
	EOF
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

sshd_teardown() {
	if [ -s "${SSHD_DIR:-/nonexistent}/sshd.pid" ]; then
		kill "$(cat "$SSHD_DIR/sshd.pid")" 2>/dev/null || true
	fi
	netns_teardown
}
