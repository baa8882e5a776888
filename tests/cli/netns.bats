#!/usr/bin/env bats
# Transfers between two network namespaces joined by a veth pair
# (tests/lib/netns.bash): rdrecv in A, rdsend in B.

load ../lib/common
load ../lib/netns

setup() {
	common_setup
	netns_setup
}

teardown() {
	common_teardown
}

# ns_xfer BYTES [SEND_OPTS...]: random file of BYTES from B to A, cmp.
ns_xfer() {
	local n=$1
	shift
	mkrand "$D/src" "$n"
	port=$(NETNS_EXEC="ip netns exec $NS_A" free_port)
	NETNS_EXEC="ip netns exec $NS_A" start_recv --timeout 15 "$port" "$KEY" "$D/dst"
	NETNS_EXEC="ip netns exec $NS_A" wait_listen "$port"
	run_t --secs 120 ip netns exec "$NS_B" "$RDSEND" --timeout 15 "$@" "$IP_A" "$port" "$KEY" "$D/src"
	assert_status 0
	wait_recv 30
	assert_rc recv "$RECV_RC" 0
	[ "$(fsize "$D/dst")" -eq "$n" ]
	assert_same "$D/src" "$D/dst"
	assert_no_temp "$D/dst"
}

@test "netns: the namespaces are isolated and joined only by the veth" {
	in_b ip -4 addr show dev veth1 | grep -q "$IP_B/24"
	# A's loopback is not reachable from B: the transfers below really
	# cross the veth.
	port=$(NETNS_EXEC="ip netns exec $NS_A" free_port)
	NETNS_EXEC="ip netns exec $NS_A" start_recv --timeout 5 "$port" "$KEY" "$D/dst"
	NETNS_EXEC="ip netns exec $NS_A" wait_listen "$port"
	run_t --secs 10 ip netns exec "$NS_B" "$RDSEND" --connect-timeout 1 127.0.0.1 "$port" "$KEY" /dev/null
	assert_status 3
}

@test "netns: 1 MiB + 1 plain" {
	ns_xfer $((1024 * 1024 + 1))
}

@test "netns: 64 MiB plain" {
	ns_xfer $((64 * 1024 * 1024))
}

@test "netns: 1 MiB + 1 --streams 4 --compress --encrypt" {
	ns_xfer $((1024 * 1024 + 1)) --streams 4 --compress --encrypt
}

@test "netns: 64 MiB --streams 4 --compress --encrypt" {
	ns_xfer $((64 * 1024 * 1024)) --streams 4 --compress --encrypt
}

@test "netns: rdrecv --bind to its veth address, rdsend --bind to its own" {
	mkrand "$D/src" $((1024 * 1024 + 1))
	port=$(NETNS_EXEC="ip netns exec $NS_A" free_port)
	NETNS_EXEC="ip netns exec $NS_A" start_recv --bind "$IP_A" --timeout 10 -v "$port" "$KEY" "$D/dst"
	NETNS_EXEC="ip netns exec $NS_A" wait_listen "$port"
	in_a ss -Hltn "sport = :$port" | grep -qF "$IP_A:$port" ||
		fail "rdrecv does not listen on $IP_A: $(in_a ss -Hltn)"
	run_t --secs 30 ip netns exec "$NS_B" "$RDSEND" --bind "$IP_B" --timeout 10 "$IP_A" "$port" "$KEY" "$D/src"
	assert_status 0
	wait_recv 20
	assert_rc recv "$RECV_RC" 0
	assert_same "$D/src" "$D/dst"
}

@test "netns: 16 MiB over a lossy link (netem loss 1% delay 5ms; nft 1% drop without netem)" {
	netns_lossy_link || fail "kernel lacks sch_netem and nft is not installed (scripts/deps.sh test installs nftables)"
	echo "# lossy link: $LOSSY_HOW" >&3
	ns_xfer $((16 * 1024 * 1024))
	dropped=$(netns_lossy_dropped)
	echo "# lossy link dropped ${dropped:-?} packets" >&3
	[ "${dropped:-0}" -gt 0 ] || fail "the lossy link dropped nothing: the test proved nothing"
}

@test "netns: 16 MiB --streams 4 --encrypt over the lossy link" {
	netns_lossy_link || fail "kernel lacks sch_netem and nft is not installed (scripts/deps.sh test installs nftables)"
	ns_xfer $((16 * 1024 * 1024)) --streams 4 --encrypt
	[ "$(netns_lossy_dropped)" -gt 0 ] || fail "the lossy link dropped nothing"
}
