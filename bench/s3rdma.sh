#!/usr/bin/env bash
# bench/s3rdma.sh -- S3 over RDMA against S3 over HTTP, same client (rds3),
# same server (rds3 serve --rdma), same run: only --rdma=on / --rdma=off
# differs.  On this project's machines there is no RDMA NIC, so it runs in
# the Soft-RoCE guests of scripts/rxe-vm.sh, two of them (guest a serves,
# guest b is the client); under emulation only the ratio means anything.
# On hardware, run the two halves by hand (docs/RDMA.md, "S3 over RDMA on
# hardware").
#
# Usage:   bash bench/s3rdma.sh                    # boots the two guests: the
#                                                  # issue's sizes, hours under TCG
#          SIZE=128M MIDS=8 COUNT=200 bash bench/s3rdma.sh   # about 8 minutes
#
# Environment (all optional):
#   SIZE=1G       the one big object (head -c suffixes)
#   MIDS=16       how many 8 MiB objects in the 8 MiB rows
#   COUNT=2000    how many 4 KiB objects in the many-objects rows (up: one
#                 rds3 put each, 8 at once; down: rds3 cp -r, --jobs 8)
#   RUNS=1        repeat every row, interleaved; keep the fastest
#   BUILD=build   the build whose rds3 runs
#   RDX_RXE_TIMEOUT=1800  the guests' limit, seconds (scripts/rxe-vm.sh)
#
# Prints one table: each case's seconds over HTTP and over RDMA, and
# HTTP/RDMA (above 1: RDMA is faster).
set -u
cd "$(dirname "$0")/.." || exit 1

if [ -z "${RXE_ROLE:-}" ]; then
	RDX_RXE_TIMEOUT=${RDX_RXE_TIMEOUT:-1800} exec scripts/rxe-vm.sh run --two bench/s3rdma.sh \
		SIZE="${SIZE:-1G}" MIDS="${MIDS:-16}" COUNT="${COUNT:-2000}" \
		RUNS="${RUNS:-1}" BUILD="${BUILD:-build}"
fi
for a in "$@"; do export "${a?}"; done
SIZE=${SIZE:-1G} MIDS=${MIDS:-16} COUNT=${COUNT:-2000} RUNS=${RUNS:-1} BUILD=${BUILD:-build}
RDS3=$PWD/$BUILD/rds3
PORT=7400
W=/tmp/s3rdma
mkdir -p "$W/store/bench" "$W/home"
export HOME=$W/home AWS_ACCESS_KEY_ID=bench AWS_SECRET_ACCESS_KEY=bench-secret AWS_REGION=us-east-1

if [ "$RXE_ROLE" = a ]; then
	"$RDS3" --rdma --rdma-connections 64 --max-connections 256 serve --listen "$RXE_ADDR" \
		--port "$PORT" "$W/store" >"$W/serve.out" 2>"$W/serve.err" &
	srv=$!
	for _ in $(seq 1 3600); do
		[ -e "$W/store/bench/.done" ] || [ -e "$W/store/bench/done" ] && break
		sleep 1
	done
	kill "$srv"
	exit 0
fi

export AWS_ENDPOINT_URL_S3=http://$RXE_PEER:$PORT
for _ in $(seq 1 120); do
	"$RDS3" --retries 0 ls s3://bench >/dev/null 2>&1 && break
	sleep 1
done
seconds() { # seconds CMD...: wall time of CMD, which must succeed
	local t0 t1
	t0=$(date +%s.%N)
	"$@" >/dev/null 2>"$W/last.err" || { echo "FAILED: $* ($(tail -n 2 "$W/last.err"))" >&2; echo NaN; return; }
	t1=$(date +%s.%N)
	echo "$t1 - $t0" | bc
}
best() { # best A B: the smaller, NaN-aware
	if [ "$1" = NaN ] || { [ "$2" != NaN ] && [ "$(echo "$2 < $1" | bc)" = 1 ]; }; then echo "$2"; else echo "$1"; fi
}

head -c "$SIZE" /dev/urandom >"$W/big"
mkdir -p "$W/mids" "$W/many"
for i in $(seq 1 "$MIDS"); do head -c 8M /dev/urandom >"$W/mids/m$i"; done
for i in $(seq 1 "$COUNT"); do head -c 4096 /dev/urandom >"$W/many/s$i"; done

declare -A T
cases=(mid-put mid-get big-put big-get many-put many-get)
for c in "${cases[@]}"; do T[$c-off]=NaN T[$c-on]=NaN; done
for _ in $(seq 1 "$RUNS"); do
	for m in off on; do
		o=(--rdma="$m")
		T[mid-put-$m]=$(best "${T[mid-put-$m]}" "$(seconds bash -c 'for f in "$3"/mids/*; do "$1" "${@:4}" put "$f" "s3://bench/$2/${f##*/}" || exit 1; done' _ "$RDS3" "$m" "$W" "${o[@]}")")
		T[mid-get-$m]=$(best "${T[mid-get-$m]}" "$(seconds bash -c 'for f in "$3"/mids/*; do "$1" "${@:4}" get "s3://bench/$2/${f##*/}" "$3/back" || exit 1; done' _ "$RDS3" "$m" "$W" "${o[@]}")")
		T[big-put-$m]=$(best "${T[big-put-$m]}" "$(seconds "$RDS3" "${o[@]}" put "$W/big" "s3://bench/$m-big")")
		T[big-get-$m]=$(best "${T[big-get-$m]}" "$(seconds "$RDS3" "${o[@]}" get "s3://bench/$m-big" "$W/big.back")")
		cmp -s "$W/big" "$W/big.back" || echo "MISMATCH: big, --rdma=$m" >&2
		# One rds3 put per object, 8 at once: cp -r and sync up keep each
		# file's mtime in user metadata, which the guest's tmpfs store
		# cannot hold.  So every put pays its own start (and, by RDMA,
		# its own connection and login).
		T[many-put-$m]=$(best "${T[many-put-$m]}" "$(seconds bash -c 'ls "$3/many" | xargs -P 8 -I{} "$1" "${@:4}" put "$3/many/{}" "s3://bench/$2-many/{}"' _ "$RDS3" "$m" "$W" "${o[@]}")")
		rm -rf "$W/many.back"
		T[many-get-$m]=$(best "${T[many-get-$m]}" "$(seconds "$RDS3" "${o[@]}" --jobs 8 cp -r "s3://bench/$m-many/" "$W/many.back")")
	done
done
: >"$W/empty"
"$RDS3" put "$W/empty" s3://bench/done >/dev/null 2>&1

printf '\n%-28s %10s %10s %10s\n' case "HTTP s" "RDMA s" "HTTP/RDMA"
for c in "${cases[@]}"; do
	case $c in
	mid-*) what="$MIDS × 8 MiB ${c#mid-}" ;;
	big-*) what="one $SIZE ${c#big-}" ;;
	many-*) what="$COUNT × 4 KiB ${c#many-}" ;;
	esac
	r=NaN
	[ "${T[$c-off]}" = NaN ] || [ "${T[$c-on]}" = NaN ] || r=$(printf '%.2f' "$(echo "${T[$c-off]} / ${T[$c-on]}" | bc -l)")
	printf '%-28s %10.2f %10.2f %10s\n' "$what" "${T[$c-off]}" "${T[$c-on]}" "$r"
done
