# Two network namespaces joined by a veth pair, for tests that need two
# "hosts".  Load after common:   load ../lib/common
#                                load ../lib/netns
#
# netns_setup creates, per test, namespaces rdxA<pid>_<n> / rdxB<pid>_<n>
# with veth0 = 10.231.X.1/24 (A) and veth1 = 10.231.X.2/24 (B).  Nothing
# outside the two namespaces is touched: the veth pair is created inside A
# with its peer moved straight into B, so the host's interfaces, routes and
# addresses never change.  netns_teardown (registered in CLEANUPS, so the
# common teardown runs it) kills what runs inside and deletes both.
#
# Needs root and `ip netns`; when that is not permitted the test FAILS (CI
# runs as root, so a skip would hide a broken setup).
#
# After setup:  NS_A NS_B IP_A IP_B  and  in_a CMD... / in_b CMD...
# (netns3_setup below adds a third namespace C: NS_C IP_C ..., in_c).
# shellcheck disable=SC2034,SC2317 # LOSSY_HOW is read by the tests; link_up is called via wait_until

netns_setup() {
	command -v ip >/dev/null || fail "ip (iproute2) not installed"
	local n=${BATS_TEST_NUMBER:-0}
	NS_A=rdxA$$_$n
	NS_B=rdxB$$_$n
	NET_X=$((($$ + n) % 250 + 1))
	IP_A=10.231.$NET_X.1
	IP_B=10.231.$NET_X.2
	NETNS_CREATED=()
	CLEANUPS+=(netns_teardown)

	ip netns add "$NS_A" || fail "ip netns add $NS_A not permitted (needs root)"
	NETNS_CREATED+=("$NS_A")
	ip netns add "$NS_B" || fail "ip netns add $NS_B not permitted (needs root)"
	NETNS_CREATED+=("$NS_B")

	netns_veth "$NS_A" veth0 "$IP_A" "$NS_B" veth1 "$IP_B" ||
		fail "cannot create a veth pair in $NS_A"
	ip -n "$NS_A" link set lo up
	ip -n "$NS_B" link set lo up
	netns_wait_up || fail "veth pair did not come up"
}

# netns_veth NS1 DEV1 ADDR1 NS2 DEV2 ADDR2: a veth pair made in NS1, its
# peer moved straight into NS2, each end with its /24 address and up.
netns_veth() {
	ip -n "$1" link add "$2" type veth peer name "$5" netns "$4" &&
		ip -n "$1" addr add "$3/24" dev "$2" &&
		ip -n "$4" addr add "$6/24" dev "$5" &&
		ip -n "$1" link set "$2" up &&
		ip -n "$4" link set "$5" up
}

# netns_wait_up: both ends report LOWER_UP (carrier), max 5 s.
netns_wait_up() {
	link_up() {
		ip -n "$NS_A" link show veth0 | grep -q LOWER_UP &&
			ip -n "$NS_B" link show veth1 | grep -q LOWER_UP
	}
	wait_until 5 link_up
}

netns_teardown() {
	local ns pids
	for ns in "${NETNS_CREATED[@]}"; do
		pids=$(ip netns pids "$ns" 2>/dev/null || true)
		# shellcheck disable=SC2086 # a list of pids
		[ -z "$pids" ] || kill -KILL $pids 2>/dev/null || true
	done
	for ns in "${NETNS_CREATED[@]}"; do
		ip netns del "$ns" 2>/dev/null || true
	done
	NETNS_CREATED=()
}

in_a() { ip netns exec "$NS_A" "$@"; }
in_b() { ip netns exec "$NS_B" "$@"; }
in_c() { ip netns exec "$NS_C" "$@"; }

# netns3_setup: netns_setup's A and B, and a third namespace C (rdxC<pid>_<n>)
# for remote-to-remote copies, rdcp in B:
#
#        A ── veth0/veth1 (10.231.X.0/24) ── B
#        │                                   │
#   vethac/vethca (10.233.X.0/24)   vethbc/vethcb (10.232.X.0/24)
#        │                                   │
#        └──────────────── C ────────────────┘
#
# IP_C = C on the B-C link (B's address there: IP_BC); IP_AC_A / IP_AC_C =
# A and C on the A-C link.  C reaches IP_A through the A-C link (a host
# route via IP_AC_A), so a name B uses for A works from C too; nothing
# forwards through B (ip_forward stays 0 there), so data between A and C
# cannot cross B.
netns3_setup() {
	netns_setup
	NS_C=rdxC$$_${BATS_TEST_NUMBER:-0}
	IP_C=10.232.$NET_X.1
	IP_BC=10.232.$NET_X.2
	IP_AC_A=10.233.$NET_X.1
	IP_AC_C=10.233.$NET_X.2
	ip netns add "$NS_C" || fail "ip netns add $NS_C not permitted (needs root)"
	NETNS_CREATED+=("$NS_C")
	netns_veth "$NS_C" vethcb "$IP_C" "$NS_B" vethbc "$IP_BC" ||
		fail "cannot create a veth pair between $NS_C and $NS_B"
	netns_veth "$NS_C" vethca "$IP_AC_C" "$NS_A" vethac "$IP_AC_A" ||
		fail "cannot create a veth pair between $NS_C and $NS_A"
	ip -n "$NS_C" link set lo up
	ip -n "$NS_C" route add "$IP_A/32" via "$IP_AC_A" ||
		fail "cannot route $IP_A through the A-C link"
	in_b sysctl -qw net.ipv4.ip_forward=0 net.ipv6.conf.all.forwarding=0 ||
		fail "cannot turn forwarding off in $NS_B"
	links3_up() {
		ip -n "$NS_C" link show vethcb | grep -q LOWER_UP &&
			ip -n "$NS_C" link show vethca | grep -q LOWER_UP &&
			ip -n "$NS_B" link show vethbc | grep -q LOWER_UP &&
			ip -n "$NS_A" link show vethac | grep -q LOWER_UP
	}
	wait_until 5 links3_up || fail "the veth pairs of $NS_C did not come up"
}

# netns_bytes NS DEV: bytes received plus sent on DEV in NS so far.
netns_bytes() {
	local d=/sys/class/net/$2/statistics
	ip netns exec "$1" sh -c "echo \$((\$(cat $d/rx_bytes) + \$(cat $d/tx_bytes)))"
}

# netns_lossy_link: 1% loss and 5 ms delay on B's egress (the data
# direction when B sends).  Uses tc netem; on a kernel without sch_netem it
# falls back to 1% random drop with nftables (no delay) and says so on fd 3.
# Prints nothing and returns 0 on success; returns 1 if neither works.
netns_lossy_link() {
	local err
	# One MTU-sized packet per skb, so a 1% loss hits about 1% of the
	# segments rather than 1% of 64 KiB GSO bursts.
	in_b ip link set dev veth1 gso_max_segs 1 2>/dev/null || true
	if err=$(in_b tc qdisc add dev veth1 root netem loss 1% delay 5ms 2>&1); then
		LOSSY_HOW="tc netem loss 1% delay 5ms"
		return 0
	fi
	if ! grep -qi 'unknown' <<<"$err"; then
		fail "tc netem failed: $err"
	fi
	command -v nft >/dev/null || return 1
	in_b nft -f - <<-'EOF' || fail "nft setup failed"
		table inet rdxloss {
			chain out {
				type filter hook output priority 0; policy accept;
				meta l4proto tcp numgen random mod 100 < 1 counter drop
			}
		}
	EOF
	LOSSY_HOW="nft 1% random drop (kernel lacks sch_netem; no delay)"
	return 0
}

# netns_lossy_dropped: prints how many packets the lossy link dropped.
netns_lossy_dropped() {
	if [ "${LOSSY_HOW#tc}" != "$LOSSY_HOW" ]; then
		in_b tc -s qdisc show dev veth1 | sed -nE 's/.*dropped ([0-9]+).*/\1/p' | head -n 1
	else
		in_b nft list table inet rdxloss | sed -nE 's/.*counter packets ([0-9]+).*/\1/p' | head -n 1
	fi
}
