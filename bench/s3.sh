#!/usr/bin/env bash
# bench/s3.sh -- rds3 against the AWS CLI (Debian's awscli), rclone and
# s3cmd, side by side in one run against the same S3 server: s3rver (from
# tests/s3, npm, pinned) on 127.0.0.1, without the verifying proxy of the
# tests (it would cost more than the clients being measured).
#
# Usage:   bash bench/s3.sh                              # 1 GiB, 2000 objects
#          SIZE=256M COUNT=500 bash bench/s3.sh          # quick run
#
# Environment (all optional):
#   SIZE=1G        the one big object; suffixes K M G T (powers of 1024)
#   COUNT=2000     how many 256 KiB objects in the many-objects rows
#   RUNS=1         repeat every row RUNS times (interleaved); keep the fastest
#   ONLY=regex     run only rows whose "TOOL CASE" matches, CASE one of
#                  one-up one-down many-up many-down (e.g. ONLY='rds3|aws',
#                  ONLY=many); a down row uploads first, untimed, if its up
#                  row is not selected
#   PAR=8          processes in flight for rds3's many-objects rows when
#                  rds3 has no tree copy (xargs -P)
#   TIMEOUT=...    seconds any one command may run (default 300 + 1 s per
#                  10 MB + 1 s per 5 objects)
#   RDS3           path of rds3 (default build/rds3; copied into the scratch
#                  directory first, so a rebuild during the run changes nothing)
#   SERVER=s3rver  the server: s3rver, or rds3 (`rds3 serve` of this build
#                  on the scratch directory's store: a server fast enough
#                  not to hide the clients' differences; no node or npm)
#   AWS            the AWS CLI (default /usr/bin/aws, Debian's awscli; on
#                  a host without it, bench/pack-tools.sh --s3 carries it)
#   BENCH_TMPDIR   parent of the scratch directory (default /var/tmp)
#
# Each tool runs with its own defaults (part size, concurrency, transfers):
#   rds3     put/get (8 MiB parts, 4 at once); many objects: `rds3 sync DIR
#            s3://...` or `rds3 cp -r` when `rds3 --help` lists them, else
#            `xargs -P $PAR` of one `rds3 put`/`get` per object (the
#            download side lists with `rds3 ls -r` first); the output says
#            which
#   aws      aws s3 cp [--recursive]       ($AWS: /usr/bin/aws, Debian's awscli)
#   rclone   rclone copyto / rclone copy   (config from RCLONE_CONFIG_* env)
#   s3cmd    s3cmd put/get [--recursive]
#
# What is measured, per row: wall seconds of the client command (process
# start to exit); GB/s = bytes / wall / 1e9 (one object) or objects/s =
# COUNT / wall (many); CPU s = user+sys of the client and all its children
# (/usr/bin/time); peak RSS = the largest of them (%M); server CPU s = what
# s3rver (node) spent meanwhile (/proc); × aws = aws's wall / the row's wall
# (above 1: faster than the AWS CLI).
#
# Correctness: every download is compared with the source (cmp, diff -r),
# which also checks that tool's upload; every upload is checked by listing
# (object count and sizes).  A failed check gives the row no number.
#
# Data: one deterministic incompressible file (AES-CTR keystream) of SIZE
# and COUNT 256 KiB files cut from another, in a scratch directory under
# BENCH_TMPDIR, read once so uploads come from the page cache.  s3rver's
# store and every download go to the same directory, which is removed on
# exit (trap), with s3rver stopped.
# shellcheck source=bench/lib.bash
. "$(dirname "${BASH_SOURCE[0]}")/lib.bash"
bench_init s3

BYTES=$(to_bytes "${SIZE:-1G}")
COUNT=${COUNT:-2000}
PAR=${PAR:-8}
OBJ=$((256 * 1024))
RDS3=${RDS3:-$BENCH_REPO/build/rds3}
SERVER=${SERVER:-s3rver}
case $SERVER in s3rver | rds3) ;; *) die "SERVER: s3rver or rds3, not '$SERVER'" ;; esac
AWS=${AWS:-/usr/bin/aws}
[[ $COUNT =~ ^[1-9][0-9]*$ ]] || die "COUNT must be a positive integer"
[ "$BYTES" -gt 0 ] || die "SIZE must be > 0"
TIMEOUT=${TIMEOUT:-$((300 + BYTES / 10000000 + COUNT / 5))}
TOOLS=(rds3 aws rclone s3cmd)
CASES=(one-up one-down many-up many-down)

need_cmds rclone s3cmd openssl ss timeout cmp diff
[ "$SERVER" = rds3 ] || need_cmds node npm
[ -x "$AWS" ] || bash "$BENCH_REPO/scripts/deps.sh" bench >&2
[ -x "$AWS" ] || die "$AWS missing (Debian's awscli)"
[ -x "$RDS3" ] || die "$RDS3 not built (make)"
# a private copy: a `make` elsewhere must not swap the binary mid-run
mkdir -p "$TMPD/bin" && cp "$RDS3" "$TMPD/bin/rds3" && RDS3=$TMPD/bin/rds3

avail=$(df -P -B1 "$TMPD" | awk 'NR==2 {print $4}')
need=$(((BYTES + COUNT * OBJ) * 3 + 512 * 1024 * 1024))
[ "$avail" -gt "$need" ] || die "need $need bytes free under $TMPD, have $avail"

# Only what this script sets: no user's ~/.aws, ~/.s3cfg or rclone.conf,
# no AWS_* from the environment (an AWS_CA_BUNDLE breaks rclone), no proxy.
while read -r v; do unset "$v"; done < <(compgen -e | grep -E '^(AWS_|RCLONE_)' || true)
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY all_proxy ALL_PROXY no_proxy NO_PROXY
export HOME=$TMPD/home
mkdir -p "$HOME"

# ---------------------------------------------------------------- server
if [ "$SERVER" = s3rver ]; then
	bash "$BENCH_REPO/tests/s3/setup.sh" >"$TMPD/setup.log" 2>&1 ||
		{ cat "$TMPD/setup.log" >&2; die "tests/s3/setup.sh failed"; }
	S3RVER_JS=$BENCH_REPO/tests/s3/node_modules/s3rver/bin/s3rver.js
	S3RVER_VER=$(sed -n 's/^ *"version": "\(.*\)",/\1/p' "$BENCH_REPO/tests/s3/node_modules/s3rver/package.json" | head -n1)
fi

free_port() {
	local p used
	used=$(ss -Htan 2>/dev/null | awk '{print $4}' | sed 's/.*://')
	for _ in $(seq 1 200); do
		p=$((20000 + (RANDOM * 32768 + RANDOM) % 40001))
		grep -qx "$p" <<<"$used" || { echo "$p"; return 0; }
	done
	die "no free port found"
}

S3_PID=
stop_s3rver() {
	[ -n "$S3_PID" ] || return 0
	kill "$S3_PID" 2>/dev/null || true
	wait "$S3_PID" 2>/dev/null || true
	S3_PID=
}
BENCH_CLEANUPS+=(stop_s3rver)

PORT=$(free_port)
if [ "$SERVER" = rds3 ]; then
	cp "$RDS3" "$TMPD/rds3-serve"
	mkdir -p "$TMPD/store"
	AWS_ACCESS_KEY_ID=S3RVER AWS_SECRET_ACCESS_KEY=S3RVER \
		"$TMPD/rds3-serve" --port "$PORT" serve "$TMPD/store" \
		>"$TMPD/s3rver.log" 2>&1 &
	S3_PID=$!
	SERVER_DESC="rds3 serve ($("$RDS3" --version 2>&1 | head -n1))"
else
	# s3rver's ListObjectsV2 continuation token is DES, which OpenSSL 3
	# keeps in its legacy provider: without it a listing past 1000 keys
	# is a 500.
	legacy=()
	node --openssl-legacy-provider -e '' 2>/dev/null && legacy=(--openssl-legacy-provider)
	node "${legacy[@]}" "$S3RVER_JS" -d "$TMPD/store" -a 127.0.0.1 -p "$PORT" --silent \
		>"$TMPD/s3rver.log" 2>&1 &
	S3_PID=$!
	SERVER_DESC="s3rver $S3RVER_VER on node $(node --version)"
fi
for _ in $(seq 1 200); do
	[ -n "$(ss -Hltn "sport = :$PORT")" ] && break
	kill -0 "$S3_PID" 2>/dev/null || { cat "$TMPD/s3rver.log" >&2; die "the S3 server exited"; }
	sleep 0.05
done
[ -n "$(ss -Hltn "sport = :$PORT")" ] || die "the S3 server does not listen on $PORT"
EP=http://127.0.0.1:$PORT
BUCKET=rdxbench

# ---------------------------------------------------------------- clients
export AWS_ACCESS_KEY_ID=S3RVER AWS_SECRET_ACCESS_KEY=S3RVER AWS_EC2_METADATA_DISABLED=true
R3=("$RDS3" --endpoint "$EP" --region us-east-1)
AW=("$AWS" --endpoint-url "$EP" --region us-east-1)
export RCLONE_CONFIG=/dev/null RCLONE_CONFIG_BS3_TYPE=s3 RCLONE_CONFIG_BS3_PROVIDER=Other \
	RCLONE_CONFIG_BS3_ENDPOINT=$EP RCLONE_CONFIG_BS3_REGION=us-east-1 \
	RCLONE_CONFIG_BS3_ACCESS_KEY_ID=S3RVER RCLONE_CONFIG_BS3_SECRET_ACCESS_KEY=S3RVER \
	RCLONE_CONFIG_BS3_FORCE_PATH_STYLE=true
cat >"$TMPD/s3cfg" <<EOF
[default]
access_key = S3RVER
secret_key = S3RVER
host_base = 127.0.0.1:$PORT
host_bucket = 127.0.0.1:$PORT
use_https = False
signature_v2 = False
bucket_location = us-east-1
EOF
SC=(s3cmd -c "$TMPD/s3cfg" --no-progress -q)

"${R3[@]}" mb "s3://$BUCKET" 2>"$TMPD/mb.err" || { cat "$TMPD/mb.err" >&2; die "rds3 mb failed"; }

# How rds3 moves many objects: a tree command if this build has one.  (The
# help is read whole first: `rds3 --help | grep -q` under pipefail fails
# whenever grep exits before rds3 has written it all.)
R3_HELP=$("$RDS3" --help 2>&1 || true)
if grep -qE '^ +sync ' <<<"$R3_HELP"; then
	RDS3_MANY=sync
	RDS3_MANY_DESC="rds3 sync DIR s3://... / rds3 sync s3://... DIR"
elif grep -qE -- '--recursive.*cp' <<<"$R3_HELP"; then
	RDS3_MANY=cpr
	RDS3_MANY_DESC="rds3 cp -r DIR s3://... / rds3 cp -r s3://... DIR"
else
	RDS3_MANY="xargs"
	RDS3_MANY_DESC="no tree copy in this rds3 (no cp -r, no sync): xargs -P $PAR of one rds3 put/get per object, the download listing with rds3 ls -r first"
fi
export R3_LINE="${R3[*]}" PAR

# cmd_TOOL CASE SRC DST: fills CMD with the command of one row
cmd_rds3() {
	case $1 in
	one-up) CMD=("${R3[@]}" put "$2" "$3") ;;
	one-down) CMD=("${R3[@]}" get "$2" "$3") ;;
	many-*)
		case $RDS3_MANY in
		sync) CMD=("${R3[@]}" sync "$2" "$3") ;;
		cpr) CMD=("${R3[@]}" cp -r "$2" "$3") ;;
		*)
			if [ "$1" = many-up ]; then
				# shellcheck disable=SC2016 # expanded by the inner bash
				CMD=(bash -c 'cd "$1" && ls | xargs -d "\n" -P "$PAR" -I{} $R3_LINE put {} "$2{}"' bash "$2" "$3")
			else
				# shellcheck disable=SC2016
				CMD=(bash -c 'set -o pipefail; $R3_LINE ls -r "$1" |
					awk -v b="$2" -v d="$3" "{k = \$4; n = k; sub(/.*\\//, \"\", n); print \"s3://\" b \"/\" k; print d \"/\" n}" |
					xargs -d "\n" -n 2 -P "$PAR" $R3_LINE get' bash "$2" "$BUCKET" "$3")
			fi
			;;
		esac
		;;
	esac
}
cmd_aws() {
	case $1 in
	one-*) CMD=("${AW[@]}" s3 cp --only-show-errors "$2" "$3") ;;
	many-*) CMD=("${AW[@]}" s3 cp --only-show-errors --recursive "$2" "$3") ;;
	esac
}
cmd_rclone() {
	local a=$2 b=$3
	[[ $a == s3://* ]] && a=bs3:${a#s3://}
	[[ $b == s3://* ]] && b=bs3:${b#s3://}
	case $1 in
	one-*) CMD=(rclone copyto "$a" "$b") ;;
	many-*) CMD=(rclone copy "$a" "$b") ;;
	esac
}
cmd_s3cmd() {
	case $1 in
	one-up) CMD=("${SC[@]}" put "$2" "$3") ;;
	one-down) CMD=("${SC[@]}" get "$2" "$3") ;;
	many-up) CMD=("${SC[@]}" put --recursive "$2/" "$3") ;;
	many-down) CMD=("${SC[@]}" get --recursive "$2" "$3/") ;;
	esac
}

# ---------------------------------------------------------------- data
SRC=$TMPD/one.bin
MANY=$TMPD/many
log "generating $BYTES bytes and $COUNT x $OBJ-byte objects in $TMPD"
mkdata "$SRC" "$BYTES"
mkdata "$TMPD/pool" $((COUNT * OBJ))
mkdir -p "$MANY"
split -b "$OBJ" -a 6 -d "$TMPD/pool" "$MANY/o"
rm -f "$TMPD/pool"
[ "$(find "$MANY" -type f | wc -l)" -eq "$COUNT" ] || die "could not cut $COUNT objects"
cat "$SRC" "$MANY"/* >/dev/null

# listed PREFIX N BYTES: s3://BUCKET/PREFIX holds N objects, BYTES in all
listed() {
	local got
	got=$("${R3[@]}" ls -r "s3://$BUCKET/$1" 2>"$TMPD/r/err" | awk '{n++; s += $3} END {printf "%d %d", n, s}')
	[ "$got" = "$2 $3" ] || { LIST_GOT=$got; return 1; }
}

# ---------------------------------------------------------------- rows
# row TOOL CASE: one timed command, checked; RECORD=0 runs it untimed
# (the upload a selected down row needs)
row() {
	local tool=$1 c=$2 name="$1 $2" d=$TMPD/r rc=0 f0 f1 far src dst
	rm -rf "$d" "$TMPD/dl"
	mkdir -p "$d"
	case $c in
	one-up) src=$SRC dst=s3://$BUCKET/$tool/one.bin ;;
	one-down) src=s3://$BUCKET/$tool/one.bin dst=$TMPD/dl/one.bin ;;
	many-up) src=$MANY dst=s3://$BUCKET/$tool/many/ ;;
	many-down) src=s3://$BUCKET/$tool/many/ dst=$TMPD/dl/many ;;
	esac
	case $c in
	one-down) mkdir -p "$TMPD/dl" ;;
	many-down) mkdir -p "$TMPD/dl/many" ;; # s3cmd wants it to exist
	esac
	"cmd_$tool" "$c" "$src" "$dst"
	f0=$(proc_cpu "$S3_PID")
	timed "$d" "${CMD[@]}" || rc=$?
	f1=$(proc_cpu "$S3_PID")
	far=$(awk -v a="$f0" -v b="$f1" 'BEGIN {printf "%.2f", b - a}')
	if [ "$rc" -ne 0 ]; then
		fail_row "$name" "$d" "exit $rc: ${CMD[*]:0:6} ..."
		return 1
	fi
	case $c in
	one-up)
		listed "$tool/one.bin" 1 "$BYTES" ||
			{ fail_row "$name" "$d" "listing shows '$LIST_GOT' objects/bytes, want 1 $BYTES"; return 1; } ;;
	many-up)
		listed "$tool/many/" "$COUNT" $((COUNT * OBJ)) ||
			{ fail_row "$name" "$d" "listing shows '$LIST_GOT' objects/bytes, want $COUNT $((COUNT * OBJ))"; return 1; } ;;
	one-down)
		cmp -s "$SRC" "$dst" || { fail_row "$name" "$d" "download differs from the source"; return 1; } ;;
	many-down)
		diff -rq "$MANY" "$dst" >"$d/diff" 2>&1 ||
			{ fail_row "$name" "$d" "download differs from the source: $(head -n3 "$d/diff" | tr '\n' ' ')"; return 1; } ;;
	esac
	rm -rf "$TMPD/dl"
	[ "${RECORD:-1}" -eq 1 ] || return 0
	record "$name" "$T_WALL" "$T_CPU" "$T_RSS" "$far"
}

log "server: $SERVER_DESC, $EP, store $TMPD/store"
log "rds3 many objects: $RDS3_MANY_DESC"
log "size $BYTES bytes, $COUNT x $OBJ bytes, runs $RUNS, timeout ${TIMEOUT}s"

for run in $(seq 1 "$RUNS"); do
	[ "$RUNS" -gt 1 ] && log "--- run $run/$RUNS"
	for tool in "${TOOLS[@]}"; do
		for kind in one many; do
			up=0 down=0
			want "$tool $kind-up" && up=1
			want "$tool $kind-down" && down=1
			[ $up -eq 1 ] || [ $down -eq 1 ] || continue
			ok=0
			if [ $up -eq 1 ]; then
				row "$tool" "$kind-up" && ok=1
			else
				RECORD=0 row "$tool" "$kind-up" && ok=1
			fi
			if [ $down -eq 1 ]; then
				if [ $ok -eq 1 ]; then
					row "$tool" "$kind-down" || true
				else
					fail_row "$tool $kind-down" "$TMPD/r" "its upload failed"
				fi
			fi
		done
		"${R3[@]}" rm -r "s3://$BUCKET/$tool/" >/dev/null 2>&1 || true
	done
done

# ---------------------------------------------------------------- report
echo
echo "rdxfer S3 bench, $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, $(uname -r)"
echo "server: $SERVER_DESC, $EP (loopback, no proxy)"
echo "clients: rds3 ($("$RDS3" --version 2>&1 | head -n1)), $("$AWS" --version 2>&1 | head -n1 | cut -d' ' -f1), $(rclone version 2>/dev/null | head -n1), $(s3cmd --version)"
echo "rds3 many objects: $RDS3_MANY_DESC"
echo "one object: $BYTES bytes; many: $COUNT x $OBJ bytes; best of $RUNS run(s)"
echo
echo "| case | tool | s | rate | × aws | CPU s | peak RSS MiB | server CPU s |"
echo "|---|---|---:|---:|---:|---:|---:|---:|"
for c in "${CASES[@]}"; do
	case $c in
	one-up) label="1 × $((BYTES / 1048576)) MiB up" ;;
	one-down) label="1 × $((BYTES / 1048576)) MiB down" ;;
	many-up) label="$COUNT × 256 KiB up" ;;
	many-down) label="$COUNT × 256 KiB down" ;;
	esac
	ref=${R_WALL["aws $c"]:-}
	for tool in "${TOOLS[@]}"; do
		n="$tool $c"
		if [ -n "${R_WALL[$n]:-}" ]; then
			w=${R_WALL[$n]}
			if [[ $c == one-* ]]; then
				rate=$(awk -v b="$BYTES" -v w="$w" 'BEGIN {printf "%.3f GB/s", b / w / 1e9}')
			else
				rate=$(awk -v n="$COUNT" -v w="$w" 'BEGIN {printf "%.0f obj/s", n / w}')
			fi
			r=n/a
			[ -z "$ref" ] || r=$(ratio "$w" "$ref")
			rss=$(awk -v k="${R_RSS[$n]}" 'BEGIN {printf "%.1f", k / 1024}')
			echo "| $label | $tool | $w | $rate | $r | ${R_CPU[$n]} | $rss | ${R_FAR[$n]} |"
		elif [ -n "${R_NOTE[$n]:-}" ]; then
			echo "| $label | $tool | ${R_NOTE[$n]} | | | | | |"
		fi
	done
done
[ ${#FAILED[@]} -eq 0 ] || { echo; echo "FAILED ROWS: ${FAILED[*]}"; }
[ ${#FAILED[@]} -eq 0 ]
