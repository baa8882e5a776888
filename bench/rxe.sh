#!/usr/bin/env bash
# bench/rxe.sh -- rdsend over Soft-RoCE against perftest, in the two guests
# of scripts/rxe-vm.sh (issue 27).  Guest a receives (rdrecv, or the
# perftest server) and keeps time; guest b sends.  Every case is timed end
# to end on a's clock: from "go" (a tells b to start its sender, the
# receiver already listening) until a's receiver exited.  Rate = bytes /
# that time.  Under TCG emulation only the ratios between rows mean much.
#
# Usage:   bash bench/rxe.sh                        # the issue's scale (long)
#          RUNS=1 SIZES="4K 16M" LOSS=16M bash bench/rxe.sh   # a quick run
#
# Environment (all optional):
#   SIZES="4K 64M 256M"   sizes without loss (K/M suffixes, powers of 2)
#   LOSS=16M              size(s) run with netem loss 1% on b's eth0; "" = none
#   RUNS=3                runs per case, in rounds of every tool once; min / median / max are kept
#   TOOLS="rd1 rd2 sendbw writebw tcp"   which rows (see below)
#   BUILD=build           the build whose rdsend / rdrecv run
#   BASE=                 a second build (e.g. of the commit before a change),
#                         for the rows old1 / old2: before and after in one run
#   PT_OPTS=              more perftest options, both ends (e.g. "-u 17")
#   RD_OPTS=              more rdsend/rdrecv options, both ends (e.g. "-vv":
#                         then each run's stderr is copied to the console log
#                         as "RXELOG a|b ..." lines, for rdx_phase's timings)
#   RDX_RXE_TIMEOUT=7200  the guests' limit, seconds (scripts/rxe-vm.sh)
#   RDX_RXE_LOG           where the console log goes (default: a temp file)
#
# Rows: rd1 = rdsend --transport rdma, old1 / old2 = rd1 / rd2 with BASE's
# binaries, rd2 = the same with --streams 2, rdnull = rd1 with rdrecv
# writing to standard output on /dev/null (no file: what the copy into
# the destination costs, by difference),
# sendbw = ib_send_bw -e, writebw = ib_write_bw (perftest; both with
# 1 MiB messages, below 8 MiB 8 messages of size/8: perftest wants at
# least 5 iterations), tcp = rdsend
# --transport tcp on the same guests.  CPU is user+sys seconds from
# /usr/bin/time, receiver (a) and sender (b).
#
# Guest b also times, once per size, XXH3-128 over the source file
# (xxhsum -H2, the hash both ends run over every byte) and a plain read of
# it: "RXEHASH SIZE hash SECS read SECS" lines in the console log.
#
# The guests print "RXEBENCH ..." lines to their consoles; this script,
# on the host, joins a's times with b's CPU and prints the table.
set -u
cd "$(dirname "$0")/.." || exit 1

if [ -z "${RXE_ROLE:-}" ]; then
	SIZES=${SIZES-4K 64M 256M} LOSS=${LOSS-16M} RUNS=${RUNS:-3}
	TOOLS=${TOOLS:-rd1 rd2 sendbw writebw tcp} BUILD=${BUILD:-build}
	for t in ib_send_bw ib_write_bw; do
		command -v "$t" >/dev/null || { echo "bench/rxe.sh: $t not found (Debian package perftest; scripts/deps.sh bench)" >&2; exit 1; }
	done
	[ -x "$BUILD/rdsend" ] || { echo "bench/rxe.sh: $BUILD/rdsend not built" >&2; exit 1; }
	log=${RDX_RXE_LOG:-$(mktemp /tmp/rxebench.XXXXXX.log)}
	echo "# bench/rxe.sh $(date -u '+%F %H:%M UTC') commit $(git rev-parse --short HEAD 2>/dev/null)" \
		"SIZES='$SIZES' LOSS='$LOSS' RUNS=$RUNS TOOLS='$TOOLS' BUILD=$BUILD PT_OPTS='${PT_OPTS:-}' RD_OPTS='${RD_OPTS:-}'; console log: $log"
	RDX_RXE_TIMEOUT=${RDX_RXE_TIMEOUT:-7200} RDX_RXE_LOG=$log scripts/rxe-vm.sh run --two bench/rxe.sh \
		SIZES="$SIZES" LOSS="$LOSS" RUNS="$RUNS" TOOLS="$TOOLS" BUILD="$BUILD" PT_OPTS="${PT_OPTS:-}" RD_OPTS="${RD_OPTS:-}" BASE="${BASE:-}"
	rc=$?
	# a: RXEBENCH a TOOL SIZE LOSS RUN BYTES SECS RC CPU ; b: RXEBENCH b TOOL SIZE LOSS RUN RC CPU
	tr -d '\r' <"$log" | grep -ao 'RXEBENCH .*' | sort -s -r -k2,2 | awk '
	function fmt(x) { return x == "" ? "-" : x }
	function sortn(a, n,   i, j, t) { for (i = 2; i <= n; i++) for (j = i; j > 1 && a[j-1] > a[j]; j--) { t = a[j]; a[j] = a[j-1]; a[j-1] = t } }
	function med(a, n) { return n % 2 ? a[(n+1)/2] : (a[n/2] + a[n/2+1]) / 2 }
	function rate(b, s) { return s > 0 ? sprintf("%.3g", b / s / 1e6) : "-" }
	$2 == "b" { k = $3 " " $4 " " $5 " " $6; bcpu[k] = $8; brc[k] = $7; next }
	$2 == "a" {
		c = $3 " " $4 " " $5; if (!(c in seen)) { seen[c] = 1; order[++nc] = c }
		bytes[c] = $7; k = c " " $6
		if ($9 == 0 && (brc[k] == "" || brc[k] == 0)) { n[c]++; T[c, n[c]] = $8; CA[c, n[c]] = $10 } else fails[c]++
	}
	END {
		printf "\n%-8s %-6s %-5s %4s  %-26s %-26s %-14s %-14s %s\n", "tool", "size", "loss", "ok", "seconds min/med/max", "MB/s max/med/min", "cpu a (recv)", "cpu b (send)", "failed"
		for (i = 1; i <= nc; i++) {
			c = order[i]; m = n[c] + 0; split(c, f, " ")
			if (m == 0) { printf "%-8s %-6s %-5s %4d  %s\n", f[1], f[2], f[3], 0, "all runs failed (" fails[c] ")"; continue }
			delete t; delete ca; delete cb; nb = 0
			for (j = 1; j <= m; j++) { t[j] = T[c, j] + 0; ca[j] = CA[c, j] + 0 }
			for (k in bcpu) { split(k, g, " "); if (g[1] " " g[2] " " g[3] == c && bcpu[k] != "-") cb[++nb] = bcpu[k] + 0 }
			sortn(t, m); sortn(ca, m); sortn(cb, nb)
			printf "%-8s %-6s %-5s %4d  %-26s %-26s %-14s %-14s %s\n", f[1], f[2], f[3], m,
				sprintf("%.2f / %.2f / %.2f", t[1], med(t, m), t[m]),
				sprintf("%s / %s / %s", rate(bytes[c], t[1]), rate(bytes[c], med(t, m)), rate(bytes[c], t[m])),
				sprintf("%.2f s", med(ca, m)), nb ? sprintf("%.2f s", med(cb, nb)) : "-", fails[c] + 0
		}
		print "(cpu: median user+sys seconds of the runs; MB/s = 10^6 bytes/s)"
	}'
	tr -d '\r' <"$log" | grep -ao 'RXEHASH .*' | sed 's/^RXEHASH/b: XXH3-128 and a plain read of the source:/'
	exit "$rc"
fi

# ---------------------------------------------------------------- in the guests
for a in "$@"; do export "${a?}"; done
RDSEND=$PWD/$BUILD/rdsend RDRECV=$PWD/$BUILD/rdrecv
OLDSEND=$PWD/${BASE:-$BUILD}/rdsend OLDRECV=$PWD/${BASE:-$BUILD}/rdrecv
W=/tmp/rxebench CTL=6999 KEY=rxe-bench-key T=600
# A case that hangs (perftest's client has been seen to, once in a few
# dozen runs) is killed, counted as failed, and the next one runs.
CASE_T=$((T + 60))
mkdir -p "$W"
bytes() { # 4K -> 4096
	local s=$1
	case $s in
	*K) echo $((${s%K} * 1024)) ;; *M) echo $((${s%M} * 1048576)) ;; *G) echo $((${s%G} * 1073741824)) ;; *) echo "$s" ;;
	esac
}
TIMED=()
[ -x /usr/bin/time ] && TIMED=(/usr/bin/time -f '%U %S' -o)
cpu_of() { # cpu_of FILE: user+sys from /usr/bin/time's output, or -
	local u s
	[ ${#TIMED[@]} -gt 0 ] && read -r u s < <(grep -E '^[0-9.]+ [0-9.]+$' "$1" 2>/dev/null | tail -n 1) &&
		[ -n "$s" ] && { echo "$u + $s" | bc; return; }
	echo -
}
# perftest: messages of 1 MiB; below 8 MiB, 8 messages of BYTES/8
# (perftest wants at least 5 iterations)
pt_args() { # pt_args BYTES PORT
	local m=$(($1 >= 8388608 ? 1048576 : $1 / 8))
	echo -d "$RXE_DEV" -x "$RXE_GID_INDEX" -F -s "$m" -n $(($1 / m)) -p "$2" ${PT_OPTS:-}
}
RDO=(${RD_OPTS:-})
show_log() { # show_log a|b FILE: the run's stderr, when RD_OPTS asks for words
	[ -n "${RD_OPTS:-}" ] && sed "s/^/RXELOG $1 /" "$2"
	return 0
}
# The rxe port's counters (sent packets, NAKs, retries, RNR): what each
# run changed, as "RXECNT a|b TOOL SIZE LOSS RUN name=delta ..." lines.
CNT=/sys/class/infiniband/${RXE_DEV:-rxe0}/ports/1/hw_counters
cnt_snap() { # cnt_snap: "name value" lines
	local f
	for f in "$CNT"/*; do [ -r "$f" ] && echo "${f##*/} $(cat "$f")"; done 2>/dev/null
}
cnt_delta() { # cnt_delta SIDE LABEL BEFORE: the counters that moved since BEFORE
	local line
	line=$(join <(sort <<<"$3") <(cnt_snap | sort) | awk '$3 != $2 { printf " %s=%d", $1, $3 - $2 }')
	echo "RXECNT $1 $2$line"
}
cases() { # TOOL SIZE LOSS RUN lines, in the order both guests run them
	local s t r
	# First an untimed rdma transfer: the first after boot reads the
	# binaries and libraries from the host and opens rxe0 cold (seconds).
	echo "warm 4K 0 1"
	[ -n "${BASE:-}" ] && echo "warmold 4K 0 1"
	# Each round runs every tool once: what drifts during the run (the
	# host's load, the guests' memory) falls on all rows alike.
	for s in $SIZES; do for r in $(seq 1 "$RUNS"); do for t in $TOOLS; do echo "$t $s 0 $r"; done; done; done
	for s in $LOSS; do for r in $(seq 1 "$RUNS"); do for t in $TOOLS; do echo "$t $s 1 $r"; done; done; done
}

if [ "$RXE_ROLE" = b ]; then
	# b: serve control lines "netem on|off" and "go TOOL SIZE LOSS RUN PORT" until "end".
	for s in 4K $SIZES $LOSS; do [ -e "$W/src-$s" ] || head -c "$(bytes "$s")" /dev/urandom >"$W/src-$s"; done
	for s in $SIZES; do
		t0=$EPOCHREALTIME; cat "$W/src-$s" >/dev/null; t1=$EPOCHREALTIME
		xxhsum -H2 "$W/src-$s" >/dev/null; t2=$EPOCHREALTIME
		echo "RXEHASH $s hash $(echo "$t2 - $t1" | bc) read $(echo "$t1 - $t0" | bc)"
	done
	while :; do
		line=$(nc -l "$CTL" </dev/null)
		set -- $line
		case ${1:-} in
		end) break ;;
		netem)
			if [ "$2" = on ]; then tc qdisc replace dev "$RXE_NETDEV" root netem loss 1%
			else tc qdisc del dev "$RXE_NETDEV" root 2>/dev/null; fi ;;
		go)
			tool=$2 size=$3 loss=$4 run=$5 port=$6 n=$(bytes "$3")
			case $tool in
			rd1 | rdnull | warm) cmd=("$RDSEND" "${RDO[@]}" --transport rdma --timeout $T --connect-timeout 60 "$RXE_PEER" "$port" "$KEY" "$W/src-$size") ;;
			rd2) cmd=("$RDSEND" "${RDO[@]}" --transport rdma --streams 2 --timeout $T --connect-timeout 60 "$RXE_PEER" "$port" "$KEY" "$W/src-$size") ;;
			old1 | warmold) cmd=("$OLDSEND" "${RDO[@]}" --transport rdma --timeout $T --connect-timeout 60 "$RXE_PEER" "$port" "$KEY" "$W/src-$size") ;;
			old2) cmd=("$OLDSEND" "${RDO[@]}" --transport rdma --streams 2 --timeout $T --connect-timeout 60 "$RXE_PEER" "$port" "$KEY" "$W/src-$size") ;;
			tcp) cmd=("$RDSEND" "${RDO[@]}" --transport tcp --timeout $T --connect-timeout 60 "$RXE_PEER" "$port" "$KEY" "$W/src-$size") ;;
			sendbw) cmd=(ib_send_bw -e $(pt_args "$n" "$port") "$RXE_PEER") ;;
			writebw) cmd=(ib_write_bw $(pt_args "$n" "$port") "$RXE_PEER") ;;
			esac
			rm -f "$W/time.b"
			before=$(cnt_snap)
			"${TIMED[@]}" ${TIMED:+"$W/time.b"} timeout -k 5 "$CASE_T" "${cmd[@]}" >"$W/out.b" 2>&1
			rc=$?
			[ $rc = 0 ] || { echo "RXEBENCH-ERR b $tool $size: rc $rc"; tail -n 3 "$W/out.b"; }
			case $tool in rd* | old* | tcp) show_log b "$W/out.b" ;; esac
			cnt_delta b "$tool $size $loss $run" "$before"
			echo "RXEBENCH b $tool $size $loss $run $rc $(cpu_of "$W/time.b")" ;;
		esac
	done
	exit 0
fi

# a: the receiver and the clock
ctl() { # ctl LINE: hand LINE to b (retrying until b listens)
	local i
	for i in $(seq 1 600); do
		if exec 3<>"/dev/tcp/$RXE_PEER/$CTL" 2>/dev/null; then
			printf '%s\n' "$1" >&3
			exec 3>&-
			return 0
		fi
		sleep 0.1
	done
	echo "RXEBENCH-ERR a: b never took '$1'"
	return 1
}
is_listening() { # TCP listener or rdma_cm listener on port $1
	[ -n "$(ss -Hltn "sport = :$1" 2>/dev/null)" ] && return 0
	rdma resource show cm_id 2>/dev/null | grep -q "state LISTEN .*src-addr [^ ]*:$1 "
}
port=7100 netem=off
while read -r tool size loss run; do
	want=off
	[ "$loss" = 1 ] && want=on
	[ "$want" = "$netem" ] || { ctl "netem $want" || exit 1; netem=$want; }
	n=$(bytes "$size")
	port=$((port + 1))
	case $tool in
	rd1 | rd2 | tcp | warm)
		x=rdma
		[ "$tool" = tcp ] && x=tcp
		cmd=("$RDRECV" "${RDO[@]}" --transport $x --timeout $T --wait $T "$port" "$KEY" "$W/dst") ;;
	rdnull) cmd=("$RDRECV" "${RDO[@]}" --transport rdma --timeout $T --wait $T "$port" "$KEY" -) ;;
	old1 | old2 | warmold) cmd=("$OLDRECV" "${RDO[@]}" --transport rdma --timeout $T --wait $T "$port" "$KEY" "$W/dst") ;;
	sendbw) cmd=(ib_send_bw -e $(pt_args "$n" "$port")) ;;
	writebw) cmd=(ib_write_bw $(pt_args "$n" "$port")) ;;
	esac
	rm -f "$W/dst" "$W/time.a"
	before=$(cnt_snap)
	if [ "$tool" = rdnull ]; then
		"${TIMED[@]}" ${TIMED:+"$W/time.a"} timeout -k 5 "$CASE_T" "${cmd[@]}" >/dev/null 2>"$W/out.a" &
	else
		"${TIMED[@]}" ${TIMED:+"$W/time.a"} timeout -k 5 "$CASE_T" "${cmd[@]}" >"$W/out.a" 2>&1 &
	fi
	pid=$!
	for _ in $(seq 1 300); do is_listening "$port" && break; kill -0 $pid 2>/dev/null || break; sleep 0.1; done
	t0=$EPOCHREALTIME
	ctl "go $tool $size $loss $run $port" || { kill $pid; exit 1; }
	wait $pid
	rc=$?
	t1=$EPOCHREALTIME
	# (rdnull: rdrecv's exit 0 means all n bytes came, its hash checked)
	case $tool in rdnull) ;; rd* | old* | tcp) [ "$(stat -c %s "$W/dst" 2>/dev/null)" = "$n" ] || { [ $rc != 0 ] || rc=99; } ;; esac
	[ $rc = 0 ] || { echo "RXEBENCH-ERR a $tool $size: rc $rc"; tail -n 3 "$W/out.a"; }
	case $tool in rd* | old* | tcp) show_log a "$W/out.a" ;; esac
	cnt_delta a "$tool $size $loss $run" "$before"
	case $tool in warm*) echo "RXEBENCH-WARM a $tool $(echo "$t1 - $t0" | bc) s rc $rc"; continue ;; esac
	echo "RXEBENCH a $tool $size $loss $run $n $(echo "$t1 - $t0" | bc) $rc $(cpu_of "$W/time.a")"
done < <(cases)
ctl netem\ off
ctl end
rm -f "$W/dst"
exit 0
