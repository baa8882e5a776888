#!/usr/bin/env bash
# The main job, end to end: a real 1 GiB file transfer over loopback between
# rdrecv and rdsend running as two processes.  Both ends check the stream's
# length and xxh3-128 hash; the demo compares the files once more with cmp
# and prints the bandwidth.  Usage: demo.sh [BUILD]   (DEMO_SIZE=1G)
set -euo pipefail
build=${1:-build}
size=${DEMO_SIZE:-1G}
port=$((20000 + RANDOM % 20000))
dir=$(mktemp -d "${TMPDIR:-/var/tmp}/rdxfer-demo.XXXXXX")
recv=
cleanup() {
	[ -n "$recv" ] && kill "$recv" 2>/dev/null
	rm -rf "$dir"
}
trap cleanup EXIT

# The key travels in the environment, never on a command line (ps).
RDX_KEY=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
export RDX_KEY

echo "demo: writing $size of random data to $dir/source"
head -c "$size" /dev/urandom >"$dir/source"

echo "demo: rdrecv on port $port, rdsend from another process"
"$build/rdrecv" -v --wait 30 "$port" "$dir/copy" &
recv=$!
for _ in $(seq 50); do
	ss -ltnH "sport = :$port" 2>/dev/null | grep -q . && break
	sleep 0.1
done
"$build/rdsend" -v 127.0.0.1 "$port" "$dir/source"
wait "$recv"
recv=
cmp "$dir/source" "$dir/copy"
echo "demo: ok: $size copied and verified"
