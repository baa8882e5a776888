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

	ip -n "$NS_A" link add veth0 type veth peer name veth1 netns "$NS_B" ||
		fail "cannot create a veth pair in $NS_A"
	ip -n "$NS_A" addr add "$IP_A/24" dev veth0
	ip -n "$NS_B" addr add "$IP_B/24" dev veth1
	ip -n "$NS_A" link set lo up
	ip -n "$NS_B" link set lo up
	ip -n "$NS_A" link set veth0 up
	ip -n "$NS_B" link set veth1 up
	netns_wait_up || fail "veth pair did not come up"
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
