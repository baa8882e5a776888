# Helpers for the Soft-RoCE tests (tests/rxe/*.bats), on top of
# tests/lib/common.bash.  They run inside scripts/rxe-vm.sh guests, started
# by tests/rxe/guest.sh: the host's root read-only, /tmp writable, uid 0,
# rxe0 up on $RXE_NETDEV with address $RXE_ADDR (docs/RXE-VM.md).
#
# Load with:   load ../lib/common
#              load rxe
# shellcheck disable=SC2034,SC2154,SC2317 # globals are used by the .bats files; has_temp is called via wait_until

# The transport under test.  tcp proves the harness on a build without
# the verbs transport: RDX_RXE_TRANSPORT=tcp (tests/run.sh passes it on).
XPORT=${RDX_RXE_TRANSPORT:-rdma}
# What -v prints for it in the closing bandwidth line, "(NAME, ...)".
case $XPORT in
rdma) XPORT_SAYS='(rdma|verbs)' ;;
*) XPORT_SAYS=$XPORT ;;
esac

# Phrases that say "the connection went away" (as in tests/cli/faults.bats).
LOST='(connection|closed|reset|eof|end of (stream|file)|disconnect|broken pipe|timed out|timeout|no response)'

rxe_setup() {
	common_setup
	[ -n "${RXE_ADDR:-}" ] || fail "RXE_ADDR is not set: run through tests/rxe/guest.sh in scripts/rxe-vm.sh"
}

setup() { rxe_setup; }

# The parallel-connection option: --qps when rdsend has it, else --streams.
# Asked once per file (every exec is slow under TCG) through the environment.
if [ -z "${PAR_OPT:-}" ]; then
	if "$RDSEND" --help 2>/dev/null | grep -q -- '--qps'; then
		export PAR_OPT=--qps
	else
		export PAR_OPT=--streams
	fi
fi

# alive PID (replaces common.bash's): the same test in bash alone, since
# wait_exit polls it and every exec costs a tenth of a second under TCG.
alive() {
	local st
	read -r st 2>/dev/null <"/proc/$1/stat" || return 1
	st=${st##*) }
	st=${st%% *}
	[ -n "$st" ] && [ "$st" != Z ] && [ "$st" != X ]
}

# is_listening PORT (replaces common.bash's, which wait_listen calls): a
# TCP listener, or an rdma_cm id in state LISTEN on PORT (an RDMA listener
# is invisible to ss).
is_listening() {
	[ -n "$(ss -Hltn "sport = :$1" 2>/dev/null)" ] && return 0
	rdma resource show cm_id 2>/dev/null | grep -q "state LISTEN .*src-addr [^ ]*:$1 "
}

# mkdet FILE BYTES SEED: BYTES of incompressible data that depend only on
# SEED (AES-128-CTR keystream), so two guests can make the same file.
mkdet() {
	local key
	key=$(printf %s "$3" | sha256sum | cut -c1-32)
	openssl enc -aes-128-ctr -K "$key" -iv 00000000000000000000000000000000 </dev/zero 2>/dev/null |
		head -c "$2" >"$1"
	[ "$(fsize "$1")" -eq "$2" ] || fail "mkdet $1 $2"
}

# Under TCG each head and sleep costs a process start: feed slowly, so a
# transfer is still running when a test kills one end.  Not zeros: a
# receiver leaves blocks of zeros unwritten (holes), and wait_temp waits
# for data.
rxe_slow_source() {
	head -c 262144 /dev/zero | tr '\0' x >"$D/xs"
	slow_source 262144 0.1 "$D/xs"
}

# assert_err_file FILE TOOL ERE: FILE holds exactly one line, a TOOL error
# matching ERE (case-insensitive).
assert_err_file() {
	local n
	n=$(grep -c '' "$1" || true)
	if [ "$n" -ne 1 ]; then
		echo "${1##*/}: expected one error line, got $n:" >&2
		cat "$1" >&2
		return 1
	fi
	assert_one_line_error "$(cat "$1")" "$2"
	grep -qiE -- "$3" "$1" || {
		echo "${1##*/} does not match /$3/i: $(cat "$1")" >&2
		return 1
	}
}

# show_rate FILE...: the -v bandwidth lines of FILE... as TAP comments
# (bash only: every exec is slow under TCG).
show_rate() {
	local f line
	for f in "$@"; do
		while read -r line; do
			[[ $line != *Bandwidth* ]] || echo "# $line" >&3
		done <"$f"
	done
}

# assert_xport FILE: FILE (a -v stderr) names the transport under test in
# its bandwidth line: no silent fallback to another one.
assert_xport() {
	grep -qE -- "\\(${XPORT_SAYS}[,)]" "$1" || {
		echo "${1##*/}: no bandwidth line naming $XPORT:" >&2
		cat "$1" >&2
		return 1
	}
}

# rxe_s3_env: the S3 tests' environment (tests/rxe/s3.bats, two-s3.bats):
# our keys and region only, nothing from a user's ~/.aws or AWS_*.
rxe_s3_env() {
	unset AWS_PROFILE AWS_ENDPOINT_URL AWS_SESSION_TOKEN RDS3_RDMA RDS3_RDMA_PORT
	export HOME=$D/home AWS_CONFIG_FILE=$D/home/.aws/config
	export AWS_SHARED_CREDENTIALS_FILE=$D/home/.aws/credentials
	export AWS_ACCESS_KEY_ID=rxe-key AWS_SECRET_ACCESS_KEY='rxe/Secret+1' AWS_REGION=us-east-1
	mkdir -p "$HOME" "$D/store"
}

# rxe_two_lossy: setup_file of the two-guest files (tests/rxe/two*.bats):
# guest b drops 1 % of its packets, so RC has to retransmit.
rxe_two_lossy() {
	case ${RXE_ROLE:-} in
	a) ;;
	b) tc qdisc replace dev "$RXE_NETDEV" root netem loss 1% ;;
	*) echo "RXE_ROLE must be a or b (scripts/rxe-vm.sh run --two)" >&2; return 1 ;;
	esac
}
