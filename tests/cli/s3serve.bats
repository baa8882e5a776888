#!/usr/bin/env bats
# rds3 serve: a directory served as an S3 endpoint (docs/S3.md, "rds3
# serve").  Two servers per file (setup_file), each on its own store under
# $BATS_FILE_TMPDIR: "signed", which answers requests signed with
# $SERVE_KEY/$SERVE_SECRET only, and "open" (--no-sign-request) for raw
# curl.  Clients: rds3 itself, the Debian AWS CLI ($AWS), curl, bash's
# /dev/tcp for requests no client would send, and a SigV4 signer written
# here with openssl (independent of rds3's).  A fresh bucket $B per test on
# the signed server; a test that wants one on the open server makes it.
# After every test both servers must still run and no temporary
# (.NAME.rdx-*) may be left in either store.

load ../lib/common
# For $RDS3, $AWS, rds3(), jq_any and mp_etag; its setup_file/setup/
# teardown (s3rver behind the verifying proxy) are replaced below.
load ../lib/s3
load ../lib/s3serve

SERVE_KEY=RDS3SERVEKEY
SERVE_SECRET='serve/Secret+1'

setup_file() {
	local t=$BATS_FILE_TMPDIR
	mkdir -p "$t/store" "$t/open"
	serve_start signed "$t/store" || return 1
	SERVE_URL=$SERVED_URL
	serve_start open "$t/open" --no-sign-request || return 1
	OPEN_URL=$SERVED_URL
	export SERVE_URL OPEN_URL SERVE_DIR=$t/store OPEN_DIR=$t/open SERVE_PID OPEN_PID
	SERVE_PID=$(cat "$t/signed.pid")
	OPEN_PID=$(cat "$t/open.pid")
}

teardown_file() {
	serve_stop signed
	serve_stop open
}

setup() {
	common_setup
	[ -x "$RDS3" ] || fail "rds3 not built: $RDS3"
	unset AWS_PROFILE AWS_REGION AWS_DEFAULT_REGION AWS_ENDPOINT_URL AWS_SESSION_TOKEN
	export HOME=$D/home AWS_SHARED_CREDENTIALS_FILE=$D/home/.aws/credentials
	export AWS_CONFIG_FILE=$D/home/.aws/config AWS_PAGER='' AWS_EC2_METADATA_DISABLED=true
	mkdir -p "$HOME/.aws"
	export AWS_ACCESS_KEY_ID=$SERVE_KEY AWS_SECRET_ACCESS_KEY=$SERVE_SECRET
	export AWS_ENDPOINT_URL_S3=$SERVE_URL
	LOG0_SIGNED=$(grep -c '' "$BATS_FILE_TMPDIR/signed.err")
	LOG0_OPEN=$(grep -c '' "$BATS_FILE_TMPDIR/open.err")
	B=t$BATS_TEST_NUMBER-$RANDOM
	xrun "$RDS3" mb "s3://$B" >"$D/mb.log" 2>&1 || fail "cannot make bucket $B: $(cat "$D/mb.log")"
}

teardown() {
	local bad= left n
	alive "$SERVE_PID" || { echo "rds3 serve (signed) is gone" >&2 && bad=1; }
	alive "$OPEN_PID" || { echo "rds3 serve (open) is gone" >&2 && bad=1; }
	left=$(find "$SERVE_DIR" "$OPEN_DIR" -name '.*.rdx-*' 2>/dev/null)
	[ -z "$left" ] || { echo "temporaries left in the stores: $left" >&2 && bad=1; }
	if [ -n "$bad" ] || [ -z "${BATS_TEST_COMPLETED:-}" ]; then
		for n in signed open; do
			echo "--- rds3 serve ($n) stderr during this test (last 40 lines):" >&2
			if [ $n = signed ]; then
				tail -n +$((LOG0_SIGNED + 1)) "$BATS_FILE_TMPDIR/$n.err" | tail -n 40 >&2
			else
				tail -n +$((LOG0_OPEN + 1)) "$BATS_FILE_TMPDIR/$n.err" | tail -n 40 >&2
			fi
		done
	fi
	common_teardown
	[ -z "$bad" ]
}

# ---------------------------------------------------------------- helpers

# aws_ ARGS...: the AWS CLI against the signed server (its stderr cut to
# 4000 bytes: it can quote a whole response body).
aws_() {
	run_t "$AWS" --endpoint-url "$SERVE_URL" --region us-east-1 "$@"
	stderr=${stderr:0:4000}
}

# aws_5mb: aws goes multipart from 5 MiB on, in parts of 5 MiB.
aws_5mb() {
	printf '[default]\ns3 =\n  multipart_threshold = 5MB\n  multipart_chunksize = 5MB\n' >"$AWS_CONFIG_FILE"
}

# aws_json: $output as JSON (aws prints nothing at all for some empty answers).
aws_json() {
	if [ -n "$output" ]; then printf '%s\n' "$output"; else echo '{}'; fi
}

md5_of() {
	md5sum <"$1" | cut -c1-32
}

# hcurl ARGS...: curl (path as is); the HTTP status in $output, the body
# in $D/body, the headers in $D/hdr, curl's exit in $status.
hcurl() {
	rm -f "$D/body" "$D/hdr"
	run_t --secs 20 curl -sS --path-as-is --max-time 15 -o "$D/body" -D "$D/hdr" -w '%{http_code}' "$@"
	[ -f "$D/body" ] || : >"$D/body"
}

# want_code CODE...: the last hcurl was answered one of CODE.
want_code() {
	local c
	for c in "$@"; do
		[ "$output" = "$c" ] && return 0
	done
	{
		echo "expected HTTP $*, got '$output' (curl exit $status${stderr:+: $stderr})"
		echo "response headers:"
		cat "$D/hdr" 2>/dev/null
		echo "response body:"
		head -c 2000 "$D/body" 2>/dev/null
		echo
	} >&2
	return 1
}

# hdr NAME: the last hcurl's response header NAME (the last such line).
hdr() {
	grep -i "^$1:" "$D/hdr" 2>/dev/null | tail -n 1 | cut -d: -f2- | sed 's/^ *//' | tr -d '\r'
}

# body_code: the <Code> of the last hcurl's error document.
body_code() {
	sed -n 's:.*<Code>\([^<]*\)</Code>.*:\1:p' "$D/body"
}

# want_error [CODE...]: the last body is an S3 error document (whose Code is one of CODE).
want_error() {
	local got c
	got=$(body_code)
	grep -q '<Error>' "$D/body" || { fail "not an S3 error document: '$(head -c 1000 "$D/body")'"; return 1; }
	[ -n "$got" ] || { fail "an error document without a Code: $(head -c 1000 "$D/body")"; return 1; }
	[ $# -gt 0 ] || return 0
	for c in "$@"; do
		[ "$got" = "$c" ] && return 0
	done
	fail "error Code '$got', expected one of: $* (body: $(head -c 1000 "$D/body"))"
}

# hmac KEYSPEC DATA: hex HMAC-SHA256 (KEYSPEC key:TEXT or hexkey:HEX).
hmac() {
	printf '%s' "$2" | openssl dgst -sha256 -mac HMAC -macopt "$1" | sed 's/^.*= //'
}

# sigv4_sign METHOD PATH PAYLOAD_HASH: signs a request to the signed server
# here, with openssl (not with rds3's signer): host, x-amz-content-sha256
# and x-amz-date signed, no query string, PATH as sent (URI-encoded).
# SIGV4_DATE overrides the date, SIGV4_SIGNED_PATH signs another path than
# PATH.  Sets SIGV4_DATE_H, SIGV4_HASH_H and SIGV4_AUTH_H (header lines).
sigv4_sign() {
	local method=$1 path=$2 phash=$3
	local host=${SERVE_URL#http://} amzdate day scope creq sts k sig
	amzdate=${SIGV4_DATE:-$(date -u +%Y%m%dT%H%M%SZ)}
	day=${amzdate:0:8}
	scope=$day/us-east-1/s3/aws4_request
	creq=$(printf '%s\n%s\n\nhost:%s\nx-amz-content-sha256:%s\nx-amz-date:%s\n\nhost;x-amz-content-sha256;x-amz-date\n%s' \
		"$method" "${SIGV4_SIGNED_PATH:-$path}" "$host" "$phash" "$amzdate" "$phash")
	sts=$(printf 'AWS4-HMAC-SHA256\n%s\n%s\n%s' "$amzdate" "$scope" "$(printf '%s' "$creq" | sha256sum | cut -c1-64)")
	k=$(hmac "key:AWS4$SERVE_SECRET" "$day")
	k=$(hmac "hexkey:$k" us-east-1)
	k=$(hmac "hexkey:$k" s3)
	k=$(hmac "hexkey:$k" aws4_request)
	sig=$(hmac "hexkey:$k" "$sts")
	SIGV4_DATE_H="x-amz-date: $amzdate"
	SIGV4_HASH_H="x-amz-content-sha256: $phash"
	SIGV4_AUTH_H="Authorization: AWS4-HMAC-SHA256 Credential=$SERVE_KEY/$scope, SignedHeaders=host;x-amz-content-sha256;x-amz-date, Signature=$sig"
}

# sigv4 METHOD PATH PAYLOAD_HASH [CURL_ARGS...]: that request, by hcurl.
sigv4() {
	local method=$1 path=$2 phash=$3
	shift 3
	sigv4_sign "$method" "$path" "$phash"
	hcurl -X "$method" -H "$SIGV4_DATE_H" -H "$SIGV4_HASH_H" -H "$SIGV4_AUTH_H" "$@" "$SERVE_URL$path"
}

# raw_send PORT DATA [read]: DATA (printf %b escapes) on a fresh connection
# to 127.0.0.1:PORT, then closed; with "read", what came back before the
# server closed (5 s at most) goes into $RAW.
raw_send() {
	local fd
	exec {fd}<>"/dev/tcp/127.0.0.1/$1" || fail "cannot connect to port $1"
	printf '%b' "$2" >&"$fd"
	RAW=
	if [ "${3:-}" = read ]; then
		RAW=$(timeout 5 cat <&"$fd" | tr -d '\r')
	fi
	exec {fd}>&-
}

# serve_bg NAME DIR [OPTIONS...]: rds3 -v OPTIONS serve DIR in the background
# (our keys), until its URL line is out; sets SRV_URL and SRV_PID.
serve_bg() {
	local name=$1 dir=$2
	shift 2
	# shellcheck disable=SC2046,SC2086 # option lists, split on purpose
	bg_start "$name" env $(serve_env) HOME="$D/serve-home" \
		AWS_CONFIG_FILE="$D/serve-home/.aws/config" AWS_SHARED_CREDENTIALS_FILE="$D/serve-home/.aws/credentials" \
		AWS_ACCESS_KEY_ID="$SERVE_KEY" AWS_SECRET_ACCESS_KEY="$SERVE_SECRET" \
		"$RDS3" -v "$@" serve "$dir"
	SRV_PID=$BG_PID
	wait_until 10 url_line "$D/$name.out" ||
		fail "rds3 serve $* printed no URL line: $(cat "$D/$name.out") / $(cat "$D/$name.err")"
	SRV_URL=$(head -n 1 "$D/$name.out")
}

# soft WHAT CMD...: CMD; when it fails, WHAT is noted in $SOFT (CMD's own
# complaint is on stderr) and the test goes on, so that every case of a
# list is reported; soft_end fails the test if any was noted.
soft() {
	local what=$1
	shift
	"$@" || SOFT+=("$what: $*")
}

soft_end() {
	[ ${#SOFT[@]} -eq 0 ] && return 0
	printf 'FAIL: %s\n' "${SOFT[@]}" >&2
	return 1
}

# want_4xx: the last hcurl was answered 4xx.
want_4xx() {
	[[ $output == 4?? ]] || want_code 4xx
}

# not_leaked: the last hcurl's body holds nothing of the files outside the store.
not_leaked() {
	! grep -qE 'secret outside|in a bucket|^root:' "$D/body"
}

# keys_of_listing: the keys of `rds3 ls -r --json` in $output, one a line.
keys_of_listing() {
	jq -r 'select(.key != null) | .key' <<<"$output"
}

# ====================================================== 1. rds3 client

@test "rds3 put (a small file, 0 bytes, stdin), get, cat, stat: the objects are the files on disk" {
	mkrand "$D/small" 1000
	rds3 put "$D/small" "s3://$B/dir/small"
	assert_status 0
	[ -f "$SERVE_DIR/$B/dir/small" ] || fail "no file $B/dir/small in the store: $(find "$SERVE_DIR/$B")"
	assert_same "$D/small" "$SERVE_DIR/$B/dir/small"
	rds3 get "s3://$B/dir/small" "$D/back"
	assert_status 0
	assert_same "$D/small" "$D/back"
	rds3 stat "s3://$B/dir/small"
	assert_status 0
	assert_match "$output" '^size: 1000$'
	assert_match "$output" "^etag: \"$(md5_of "$D/small")\"$"
	# 0 bytes
	: >"$D/empty"
	rds3 put "$D/empty" "s3://$B/empty"
	assert_status 0
	[ -f "$SERVE_DIR/$B/empty" ] && [ ! -s "$SERVE_DIR/$B/empty" ] || fail "the empty object on disk: $(ls -la "$SERVE_DIR/$B")"
	rds3 get "s3://$B/empty" "$D/empty.back"
	assert_status 0
	[ -f "$D/empty.back" ] && [ ! -s "$D/empty.back" ] || fail "empty object came back as: $(ls -la "$D/empty.back")"
	rds3 stat "s3://$B/empty"
	assert_match "$output" '^size: 0$'
	assert_match "$output" '^etag: "d41d8cd98f00b204e9800998ecf8427e"$'
	# stdin, and cat
	mkrand "$D/piped" 300000
	run_t bash -c 'cat "$1" | "$2" put - "$3"' _ "$D/piped" "$RDS3" "s3://$B/from/stdin"
	assert_status 0
	assert_same "$D/piped" "$SERVE_DIR/$B/from/stdin"
	run_t bash -c '"$1" cat "$2" >"$3"' _ "$RDS3" "s3://$B/from/stdin" "$D/cat.out"
	assert_status 0
	assert_same "$D/piped" "$D/cat.out"
	# Overwriting replaces the file.
	mkrand "$D/small2" 10
	rds3 put "$D/small2" "s3://$B/dir/small"
	assert_status 0
	assert_same "$D/small2" "$SERVE_DIR/$B/dir/small"
	# A file put there by hand is an object.
	mkdir -p "$SERVE_DIR/$B/hand/x"
	printf 'by hand\n' >"$SERVE_DIR/$B/hand/x/y"
	rds3 cat "s3://$B/hand/x/y"
	assert_status 0
	[ "$output" = "by hand" ] || fail "cat of a file made by hand: '$output'"
	rds3 stat "s3://$B/hand/x/y"
	assert_status 0
	assert_match "$output" "^etag: \"$(printf 'by hand\n' | md5sum | cut -c1-32)\"$"
	# A missing key: NoSuchKey, exit 5, nothing written.
	rds3 get "s3://$B/nope" "$D/nope"
	assert_status 5
	assert_match "$stderr" NoSuchKey
	assert_no_output_file "$D/nope"
}

@test "rds3 ls: buckets, a prefix, --recursive in S3's key order; rm one, several, --recursive; rb and mb; a directory made by hand is a bucket" {
	mkrand "$D/f" 10
	for k in top d1/x d1/y d1/sub/z d2/w d1-x d1.x d10; do
		xrun "$RDS3" put "$D/f" "s3://$B/$k" >/dev/null 2>&1 || fail "put $k"
	done
	rds3 ls
	assert_status 0
	assert_match "$output" "^[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9:]{8} $B$"
	rds3 ls "s3://$B"
	assert_status 0
	assert_match "$output" "^ +PRE d1/$"
	assert_match "$output" "^ +PRE d2/$"
	for k in top d1-x 'd1\.x' d10; do
		assert_match "$output" "^[0-9-]{10} [0-9:]{8} +10 $k$"
	done
	[ "$(grep -c '' <<<"$output")" -eq 6 ] || fail "ls s3://$B: $output"
	rds3 ls "s3://$B/d1/"
	assert_status 0
	assert_match "$output" "^ +PRE d1/sub/$"
	assert_match "$output" " 10 d1/x$"
	assert_match "$output" " 10 d1/y$"
	[ "$(grep -c '' <<<"$output")" -eq 3 ] || fail "ls s3://$B/d1/: $output"
	# '-' and '.' sort before '/', '0' after it: the directory d1 is "d1/".
	rds3 ls -r --json "s3://$B"
	assert_status 0
	got=$(keys_of_listing | paste -sd ' ')
	[ "$got" = "d1-x d1.x d1/sub/z d1/x d1/y d10 d2/w top" ] || fail "keys not in S3's order: $got"
	# rm
	rds3 rm "s3://$B/top"
	assert_status 0
	[ ! -e "$SERVE_DIR/$B/top" ] || fail "top is still on disk"
	rds3 rm "s3://$B/d1-x" "s3://$B/d1.x"
	assert_status 0
	rds3 rm --recursive "s3://$B/d1/"
	assert_status 0
	[ -z "$(find "$SERVE_DIR/$B" -type f -path '*/d1/*')" ] || fail "left under d1/: $(find "$SERVE_DIR/$B")"
	rds3 ls "s3://$B"
	assert_status 0
	got=$(sed -E 's/^ +PRE /PRE /; s/^[0-9-]{10} [0-9:]{8} +[0-9]+ //' <<<"$output" | sort | paste -sd ' ')
	[ "$got" = "PRE d2/ d10" ] || fail "after rm, ls s3://$B: $output"
	# Deleting a missing key is not an error (204 as in S3).
	rds3 rm "s3://$B/never-was"
	assert_status 0
	# rb: not empty -> BucketNotEmpty, the directory stays.
	rds3 rb "s3://$B"
	assert_status 5
	assert_match "$stderr" BucketNotEmpty
	[ -f "$SERVE_DIR/$B/d2/w" ] || fail "rb removed files"
	rds3 rm -r "s3://$B"
	assert_status 0
	rds3 ls -r "s3://$B"
	assert_status 0
	[ -z "$output" ] || fail "left after rm -r: $output"
	rds3 rb "s3://$B"
	assert_status 0
	[ ! -e "$SERVE_DIR/$B" ] || fail "rb left $(find "$SERVE_DIR/$B")"
	rds3 ls
	assert_status 0
	! grep -qE " $B$" <<<"$output" || fail "still listed: $output"
	# mb makes the directory; a directory made by hand is a bucket.
	rds3 mb "s3://$B-mb"
	assert_status 0
	[ -d "$SERVE_DIR/$B-mb" ] || fail "mb made no directory"
	mkdir "$SERVE_DIR/$B-hand"
	rds3 ls
	assert_match "$output" " $B-mb$"
	assert_match "$output" " $B-hand$"
	rds3 put "$D/f" "s3://$B-hand/k"
	assert_status 0
	assert_same "$D/f" "$SERVE_DIR/$B-hand/k"
	# No such bucket: exit 5, nothing created.
	rds3 ls "s3://no-such-$B"
	assert_status 5
	assert_match "$stderr" NoSuchBucket
	rds3 put "$D/f" "s3://no-such-$B/k"
	assert_status 5
	assert_match "$stderr" NoSuchBucket
	[ ! -e "$SERVE_DIR/no-such-$B" ] || fail "a put made the bucket's directory"
}

@test "rds3 multipart: 11 MiB in 5 MiB parts comes back byte-identical, ETag of 3 parts, one plain file on disk, no upload left open" {
	mkrand "$D/big" $((11 * 1024 * 1024 + 12345))
	want=$(mp_etag "$D/big" 5242880)
	[[ $want == *-3\" ]] || fail "the test's own ETag: $want"
	rds3 --part-size 5M put "$D/big" "s3://$B/mp/big"
	assert_status 0
	rds3 stat --json "s3://$B/mp/big"
	assert_status 0
	[ "$(jq -r .etag <<<"$output")" = "$want" ] || fail "ETag $(jq -r .etag <<<"$output"), want $want"
	[ "$(jq -r .size <<<"$output")" = "$(fsize "$D/big")" ] || fail "size: $output"
	[ -f "$SERVE_DIR/$B/mp/big" ] || fail "no file mp/big: $(find "$SERVE_DIR/$B")"
	assert_same "$D/big" "$SERVE_DIR/$B/mp/big"
	rds3 --part-size 5M get "s3://$B/mp/big" "$D/back"
	assert_status 0
	assert_same "$D/big" "$D/back"
	rds3 get "s3://$B/mp/big" "$D/back8"
	assert_status 0
	assert_same "$D/big" "$D/back8"
	rds3 ls -r --json "s3://$B"
	assert_status 0
	[ "$(keys_of_listing)" = mp/big ] || fail "listing: $output"
	[ -z "$(find "$SERVE_DIR/$B" -type f ! -path "$SERVE_DIR/$B/mp/big")" ] ||
		fail "other files in the bucket: $(find "$SERVE_DIR/$B" -type f)"
	[ -x "$AWS" ] || fail "awscli is not installed (scripts/deps.sh test)"
	aws_ s3api list-multipart-uploads --bucket "$B"
	assert_status 0
	[ "$(aws_json | jq '.Uploads // [] | length')" -eq 0 ] || fail "uploads left open: $output"
}

@test "rds3 cp s3 to s3 on the server: one CopyObject, and in parts (UploadPartCopy), type and metadata carried over" {
	[ -x "$AWS" ] || fail "awscli is not installed (scripts/deps.sh test)"
	mkrand "$D/s" 5000
	aws_ s3 cp "$D/s" "s3://$B/src/small" --content-type text/x-rdx --metadata k1=v1
	assert_status 0
	rds3 cp "s3://$B/src/small" "s3://$B/dst/small"
	assert_status 0
	assert_same "$D/s" "$SERVE_DIR/$B/dst/small"
	aws_ s3api head-object --bucket "$B" --key dst/small
	assert_status 0
	[ "$(jq -r .ContentType <<<"$output")" = text/x-rdx ] || fail "$output"
	[ "$(jq -c .Metadata <<<"$output")" = '{"k1":"v1"}' ] || fail "$output"
	[ "$(jq -r .ETag <<<"$output")" = "\"$(md5_of "$D/s")\"" ] || fail "$output"
	# More than a part: a multipart copy, S3's ETag of its parts.
	mkrand "$D/big" $((11 * 1024 * 1024 + 7))
	xrun "$RDS3" put "$D/big" "s3://$B/src/big" >/dev/null 2>&1 || fail "put src/big"
	rds3 -v --part-size 5M cp "s3://$B/src/big" "s3://$B/dst/big"
	assert_status 0
	! grep -q 'no UploadPartCopy here' <<<"$stderr" || fail "the server refused UploadPartCopy: $stderr"
	rds3 stat --json "s3://$B/dst/big"
	assert_status 0
	[ "$(jq -r .etag <<<"$output")" = "$(mp_etag "$D/big" 5242880)" ] ||
		fail "copy's ETag $(jq -r .etag <<<"$output"), want $(mp_etag "$D/big" 5242880)"
	assert_same "$D/big" "$SERVE_DIR/$B/dst/big"
	# Into another bucket.
	xrun "$RDS3" mb "s3://$B-2" >/dev/null 2>&1 || fail "mb $B-2"
	rds3 cp "s3://$B/src/small" "s3://$B-2/x"
	assert_status 0
	assert_same "$D/s" "$SERVE_DIR/$B-2/x"
	# A missing source: exit 5, nothing made.
	rds3 cp "s3://$B/nope" "s3://$B/dst/nope"
	assert_status 5
	[ ! -e "$SERVE_DIR/$B/dst/nope" ] || fail "a copy of nothing was made"
}

@test "rds3 sync up (again: nothing sent), down, --delete both ways; the tree on disk is the tree sent" {
	mkdir -p "$D/tree/a/b" "$D/tree/c"
	mkrand "$D/tree/one" 1000
	mkrand "$D/tree/a/two" 20000
	mkrand "$D/tree/a/b/three" 3
	: >"$D/tree/c/empty"
	mkrand "$D/tree/c/four" 4096
	rds3 sync "$D/tree" "s3://$B/p"
	assert_status 0
	diff -r "$D/tree" "$SERVE_DIR/$B/p" >&2 || fail "the store's tree is not the tree sent"
	rds3 -v sync "$D/tree" "s3://$B/p"
	assert_status 0
	! grep -q 'upload:' <<<"$stderr" || fail "a second sync sent again: $stderr"
	rds3 sync "s3://$B/p" "$D/down"
	assert_status 0
	diff -r "$D/tree" "$D/down" >&2 || fail "sync down differs"
	rm "$D/tree/a/two"
	mkrand "$D/tree/new" 77
	mkrand "$D/tree/one" 1001
	rds3 sync --delete "$D/tree" "s3://$B/p"
	assert_status 0
	[ ! -e "$SERVE_DIR/$B/p/a/two" ] || fail "sync --delete left a/two on disk"
	diff -r "$D/tree" "$SERVE_DIR/$B/p" >&2 || fail "the store's tree after sync --delete"
	rds3 ls -r --json "s3://$B/p/"
	assert_status 0
	[ "$(keys_of_listing | paste -sd ' ')" = "p/a/b/three p/c/empty p/c/four p/new p/one" ] || fail "listing: $output"
	rds3 sync --delete "s3://$B/p" "$D/down"
	assert_status 0
	diff -r "$D/tree" "$D/down" >&2 || fail "sync --delete down differs"
}

@test "rds3 presign: curl fetches the object; a changed signature, another key, an expired URL and no signature are refused" {
	mkrand "$D/f" 4321
	xrun "$RDS3" put "$D/f" "s3://$B/pre/sign d" >/dev/null 2>&1 || fail "put"
	rds3 presign "s3://$B/pre/sign d"
	assert_status 0
	url=$output
	[[ $url == "$SERVE_URL/$B/"* ]] || fail "presigned URL: $url"
	hcurl "$url"
	want_code 200
	assert_same "$D/f" "$D/body"
	if [[ $url == *0 ]]; then bad=${url%0}1; else bad=${url%?}0; fi
	hcurl "$bad"
	want_code 403
	want_error SignatureDoesNotMatch
	xrun "$RDS3" put "$D/f" "s3://$B/pre/other" >/dev/null 2>&1 || fail "put"
	other=${url/\/pre\/sign%20d\?//pre/other?}
	[ "$other" != "$url" ] || fail "no key to change in $url"
	hcurl "$other"
	want_code 403
	hcurl "${url%%\?*}"
	want_code 403
	want_error AccessDenied
	rds3 presign --expires 1 "s3://$B/pre/sign d"
	assert_status 0
	sleep 2.2
	hcurl "$output"
	want_code 403
}

# ========================================================== 2. aws cli

@test "aws s3 cp up and down, one part and multipart (5 MiB parts): byte-identical, S3's ETags, type and metadata kept; rds3 agrees" {
	[ -x "$AWS" ] || fail "awscli is not installed (scripts/deps.sh test)"
	aws_5mb
	mkrand "$D/small" 3000
	aws_ s3 cp "$D/small" "s3://$B/aws/small" --content-type text/x-rdx --metadata k1=v1,k2=v2
	assert_status 0
	assert_same "$D/small" "$SERVE_DIR/$B/aws/small"
	aws_ s3api head-object --bucket "$B" --key aws/small
	assert_status 0
	[ "$(jq -r .ContentLength <<<"$output")" = 3000 ] || fail "$output"
	[ "$(jq -r .ETag <<<"$output")" = "\"$(md5_of "$D/small")\"" ] || fail "$output"
	[ "$(jq -r .ContentType <<<"$output")" = text/x-rdx ] || fail "$output"
	[ "$(jq -c .Metadata <<<"$output")" = '{"k1":"v1","k2":"v2"}' ] || fail "$output"
	aws_ s3 cp "s3://$B/aws/small" "$D/small.back"
	assert_status 0
	assert_same "$D/small" "$D/small.back"
	mkrand "$D/big" $((11 * 1024 * 1024 + 99))
	aws_ s3 cp "$D/big" "s3://$B/aws/big"
	assert_status 0
	assert_same "$D/big" "$SERVE_DIR/$B/aws/big"
	aws_ s3api head-object --bucket "$B" --key aws/big
	assert_status 0
	[ "$(jq -r .ETag <<<"$output")" = "$(mp_etag "$D/big" 5242880)" ] || fail "$output, want $(mp_etag "$D/big" 5242880)"
	[ "$(jq -r .ContentLength <<<"$output")" = "$(fsize "$D/big")" ] || fail "$output"
	aws_ s3 cp "s3://$B/aws/big" "$D/big.back"
	assert_status 0
	assert_same "$D/big" "$D/big.back"
	rds3 get "s3://$B/aws/big" "$D/big.rds3"
	assert_status 0
	assert_same "$D/big" "$D/big.rds3"
	# What rds3 wrote in parts, aws reads.
	xrun "$RDS3" --part-size 5M put "$D/big" "s3://$B/rds3/big" >/dev/null 2>&1 || fail "rds3 put"
	aws_ s3 cp "s3://$B/rds3/big" "$D/big.aws2"
	assert_status 0
	assert_same "$D/big" "$D/big.aws2"
	# 0 bytes
	: >"$D/zero"
	aws_ s3 cp "$D/zero" "s3://$B/aws/zero"
	assert_status 0
	[ -f "$SERVE_DIR/$B/aws/zero" ] && [ ! -s "$SERVE_DIR/$B/aws/zero" ] || fail "aws/zero on disk"
	# S3 to S3 by aws: UploadPartCopy above 5 MiB.
	aws_ s3 cp "s3://$B/aws/big" "s3://$B/aws/big-copy"
	assert_status 0
	assert_same "$D/big" "$SERVE_DIR/$B/aws/big-copy"
}

@test "aws s3api multipart: a short part is EntityTooSmall, uploads listed and aborted, UploadPartCopy, Complete's ETag" {
	[ -x "$AWS" ] || fail "awscli is not installed (scripts/deps.sh test)"
	mkrand "$D/p1" 1048576
	mkrand "$D/p2" 1048576
	aws_ s3api create-multipart-upload --bucket "$B" --key mp/small
	assert_status 0
	id=$(jq -r .UploadId <<<"$output")
	[ -n "$id" ] && [ "$id" != null ] || fail "no UploadId: $output"
	aws_ s3api upload-part --bucket "$B" --key mp/small --upload-id "$id" --part-number 1 --body "$D/p1"
	assert_status 0
	e1=$(jq -r .ETag <<<"$output")
	[ "$e1" = "\"$(md5_of "$D/p1")\"" ] || fail "part 1's ETag: $output"
	aws_ s3api upload-part --bucket "$B" --key mp/small --upload-id "$id" --part-number 2 --body "$D/p2"
	assert_status 0
	e2=$(jq -r .ETag <<<"$output")
	aws_ s3api list-multipart-uploads --bucket "$B"
	assert_status 0
	[ "$(aws_json | jq -c '[.Uploads // [] | .[] | [.Key, .UploadId]]')" = "$(jq -cn --arg id "$id" '[["mp/small", $id]]')" ] ||
		fail "list-multipart-uploads: $output"
	parts=$(jq -cn --arg a "$e1" --arg b "$e2" '{Parts: [{PartNumber: 1, ETag: $a}, {PartNumber: 2, ETag: $b}]}')
	aws_ s3api complete-multipart-upload --bucket "$B" --key mp/small --upload-id "$id" --multipart-upload "$parts"
	assert_nonzero
	assert_match "$stderr" EntityTooSmall
	[ ! -e "$SERVE_DIR/$B/mp/small" ] || fail "a refused Complete made the object"
	aws_ s3api abort-multipart-upload --bucket "$B" --key mp/small --upload-id "$id"
	assert_status 0
	aws_ s3api list-multipart-uploads --bucket "$B"
	assert_status 0
	[ "$(aws_json | jq '.Uploads // [] | length')" -eq 0 ] || fail "after abort: $output"
	# UploadPartCopy: an object copied in two ranges.
	mkrand "$D/src" $((6 * 1048576 + 100))
	size=$(fsize "$D/src")
	xrun "$RDS3" put "$D/src" "s3://$B/mp/src" >/dev/null 2>&1 || fail "put mp/src"
	aws_ s3api create-multipart-upload --bucket "$B" --key mp/copy
	assert_status 0
	id=$(jq -r .UploadId <<<"$output")
	aws_ s3api upload-part-copy --bucket "$B" --key mp/copy --upload-id "$id" --part-number 1 \
		--copy-source "$B/mp/src" --copy-source-range bytes=0-5242879
	assert_status 0
	c1=$(jq -r .CopyPartResult.ETag <<<"$output")
	[ "$c1" = "\"$(head -c 5242880 "$D/src" | md5sum | cut -c1-32)\"" ] || fail "part 1 copied: $output"
	aws_ s3api upload-part-copy --bucket "$B" --key mp/copy --upload-id "$id" --part-number 2 \
		--copy-source "$B/mp/src" --copy-source-range "bytes=5242880-$((size - 1))"
	assert_status 0
	c2=$(jq -r .CopyPartResult.ETag <<<"$output")
	parts=$(jq -cn --arg a "$c1" --arg b "$c2" '{Parts: [{PartNumber: 1, ETag: $a}, {PartNumber: 2, ETag: $b}]}')
	aws_ s3api complete-multipart-upload --bucket "$B" --key mp/copy --upload-id "$id" --multipart-upload "$parts"
	assert_status 0
	[ "$(jq -r .ETag <<<"$output")" = "$(mp_etag "$D/src" 5242880)" ] || fail "Complete: $output, want $(mp_etag "$D/src" 5242880)"
	assert_same "$D/src" "$SERVE_DIR/$B/mp/copy"
	aws_ s3api list-multipart-uploads --bucket "$B"
	[ "$(aws_json | jq '.Uploads // [] | length')" -eq 0 ] || fail "left open: $output"
}

@test "aws s3api copy-object (metadata COPY, REPLACE, onto itself), delete-object of a missing key, delete-objects, head-bucket, aws s3 ls" {
	[ -x "$AWS" ] || fail "awscli is not installed (scripts/deps.sh test)"
	mkrand "$D/f" 2000
	aws_ s3 cp "$D/f" "s3://$B/m" --content-type text/x-one --metadata a=1
	assert_status 0
	aws_ s3api copy-object --bucket "$B" --key m-copy --copy-source "$B/m"
	assert_status 0
	[ "$(jq -r .CopyObjectResult.ETag <<<"$output")" = "\"$(md5_of "$D/f")\"" ] || fail "$output"
	aws_ s3api head-object --bucket "$B" --key m-copy
	[ "$(jq -r .ContentType <<<"$output")" = text/x-one ] || fail "COPY: $output"
	[ "$(jq -c .Metadata <<<"$output")" = '{"a":"1"}' ] || fail "COPY: $output"
	aws_ s3api copy-object --bucket "$B" --key m-repl --copy-source "$B/m" --metadata-directive REPLACE \
		--content-type text/x-two --metadata b=2
	assert_status 0
	aws_ s3api head-object --bucket "$B" --key m-repl
	[ "$(jq -r .ContentType <<<"$output")" = text/x-two ] || fail "REPLACE: $output"
	[ "$(jq -c .Metadata <<<"$output")" = '{"b":"2"}' ] || fail "REPLACE: $output"
	assert_same "$D/f" "$SERVE_DIR/$B/m-repl"
	aws_ s3api copy-object --bucket "$B" --key m --copy-source "$B/m" --metadata-directive REPLACE --metadata c=3
	assert_status 0
	aws_ s3api head-object --bucket "$B" --key m
	[ "$(jq -c .Metadata <<<"$output")" = '{"c":"3"}' ] || fail "onto itself: $output"
	assert_same "$D/f" "$SERVE_DIR/$B/m"
	aws_ s3api delete-object --bucket "$B" --key never-was
	assert_status 0
	aws_ s3api delete-objects --bucket "$B" --delete '{"Objects":[{"Key":"m-copy"},{"Key":"m-repl"},{"Key":"never-was"}]}'
	assert_status 0
	[ "$(jq -c '[.Deleted[].Key] | sort' <<<"$output")" = '["m-copy","m-repl","never-was"]' ] || fail "$output"
	[ "$(jq '.Errors // [] | length' <<<"$output")" -eq 0 ] || fail "$output"
	[ ! -e "$SERVE_DIR/$B/m-copy" ] && [ ! -e "$SERVE_DIR/$B/m-repl" ] || fail "delete-objects left files"
	aws_ s3api head-bucket --bucket "$B"
	assert_status 0
	aws_ s3 ls
	assert_status 0
	assert_match "$output" " $B$"
}

@test "aws s3 sync up and down, s3 ls, list-objects(-v2) with delimiter, pages and start-after, s3 rm --recursive, rb" {
	[ -x "$AWS" ] || fail "awscli is not installed (scripts/deps.sh test)"
	mkdir -p "$D/tree/b/x" "$D/tree/d"
	mkrand "$D/tree/a" 100
	mkrand "$D/tree/b/1" 200
	mkrand "$D/tree/b/x/2" 300
	mkrand "$D/tree/c" 400
	mkrand "$D/tree/d/3" 500
	mkrand "$D/tree/d/4" 600
	# A minute old: aws sync compares the file's mtime with LastModified (whole seconds).
	find "$D/tree" -type f -exec touch -d '-1 minute' {} +
	all='["s/a","s/b/1","s/b/x/2","s/c","s/d/3","s/d/4"]'
	aws_ s3 sync "$D/tree" "s3://$B/s"
	assert_status 0
	diff -r "$D/tree" "$SERVE_DIR/$B/s" >&2 || fail "the store's tree is not the tree sent"
	aws_ s3 sync "$D/tree" "s3://$B/s"
	assert_status 0
	[ -z "$output" ] || fail "a second aws sync sent again: $output"
	aws_ s3 ls "s3://$B/s/"
	assert_status 0
	assert_match "$output" '^ +PRE b/$'
	assert_match "$output" '^ +PRE d/$'
	assert_match "$output" ' 100 a$'
	assert_match "$output" ' 400 c$'
	[ "$(grep -c '' <<<"$output")" -eq 4 ] || fail "aws s3 ls: $output"
	aws_ s3 ls --recursive "s3://$B/"
	assert_status 0
	[ "$(awk '{print $4}' <<<"$output" | jq -R . | jq -sc .)" = "$all" ] || fail "aws s3 ls --recursive: $output"
	aws_ s3api list-objects-v2 --bucket "$B" --prefix s/ --delimiter / --page-size 1
	assert_status 0
	[ "$(jq -c '[.Contents[].Key]' <<<"$output")" = '["s/a","s/c"]' ] || fail "delimiter, pages of 1: $output"
	[ "$(jq -c '[.CommonPrefixes[].Prefix]' <<<"$output")" = '["s/b/","s/d/"]' ] || fail "delimiter, pages of 1: $output"
	aws_ s3api list-objects-v2 --bucket "$B" --page-size 2
	assert_status 0
	[ "$(jq -c '[.Contents[].Key]' <<<"$output")" = "$all" ] || fail "v2 in pages of 2: $output"
	aws_ s3api list-objects --bucket "$B" --page-size 2
	assert_status 0
	[ "$(jq -c '[.Contents[].Key]' <<<"$output")" = "$all" ] || fail "v1 in pages of 2 (marker): $output"
	aws_ s3api list-objects-v2 --bucket "$B" --start-after s/b/x/2
	assert_status 0
	[ "$(jq -c '[.Contents[].Key]' <<<"$output")" = '["s/c","s/d/3","s/d/4"]' ] || fail "start-after: $output"
	aws_ s3 sync "s3://$B/s" "$D/down"
	assert_status 0
	diff -r "$D/tree" "$D/down" >&2 || fail "aws sync down differs"
	aws_ s3 rm --recursive "s3://$B/s/"
	assert_status 0
	aws_ s3api list-objects-v2 --bucket "$B"
	assert_status 0
	[ "$(aws_json | jq '.Contents // [] | length')" -eq 0 ] || fail "after rm --recursive: $output"
	[ -z "$(find "$SERVE_DIR/$B" -type f)" ] || fail "files left: $(find "$SERVE_DIR/$B" -type f)"
	aws_ s3 rb "s3://$B"
	assert_status 0
	[ ! -e "$SERVE_DIR/$B" ] || fail "aws s3 rb left the directory"
	aws_ s3 mb "s3://$B-aws"
	assert_status 0
	[ -d "$SERVE_DIR/$B-aws" ] || fail "aws s3 mb made no directory"
}

@test "keys with spaces, + = ~ * ( ) !, unicode, %, XML's & < > ' \", ? # ; and a leading dot round-trip through aws and rds3; the listings are the keys" {
	[ -x "$AWS" ] || fail "awscli is not installed (scripts/deps.sh test)"
	mkrand "$D/src" 777
	keys=("sp ace/a b" "plus+x" "eq=y" "til~de" "star*" "(paren)" "bang!" "ünï/cödé ✓"
		"pct%41%2F%" "mix +=~*()!%" "xml&<>'\"" "q?x#y;z" ".hidden/.dot" "a,b@c\$d:e")
	# Half by aws (one recursive cp of a tree whose names are the keys), half by rds3.
	mkdir "$D/up"
	for i in "${!keys[@]}"; do
		k=${keys[$i]}
		if [ $((i % 2)) -eq 0 ]; then
			mkdir -p "$D/up/$(dirname "$k")"
			cp "$D/src" "$D/up/$k"
		else
			rds3 put "$D/src" "s3://$B/$k"
			assert_status 0
		fi
	done
	aws_ s3 cp --recursive --quiet "$D/up/" "s3://$B/"
	assert_status 0
	for k in "${keys[@]}"; do
		[ -f "$SERVE_DIR/$B/$k" ] || fail "key '$k' is not the file '$B/$k' on disk: $(find "$SERVE_DIR/$B")"
		assert_same "$D/src" "$SERVE_DIR/$B/$k"
	done
	# Back: aws everything, rds3 what aws put.
	aws_ s3 cp --recursive --quiet "s3://$B/" "$D/down/"
	assert_status 0
	for i in "${!keys[@]}"; do
		k=${keys[$i]}
		[ -f "$D/down/$k" ] || fail "aws did not download '$k': $(find "$D/down")"
		assert_same "$D/src" "$D/down/$k"
		if [ $((i % 2)) -eq 0 ]; then
			rm -f "$D/out"
			rds3 get "s3://$B/$k" "$D/out"
			assert_status 0
			assert_same "$D/src" "$D/out"
		fi
	done
	[ "$(find "$D/down" -type f | wc -l)" -eq "${#keys[@]}" ] || fail "aws downloaded: $(find "$D/down" -type f)"
	want=$(printf '%s\n' "${keys[@]}" | LC_ALL=C sort)
	aws_ s3api list-objects-v2 --bucket "$B"
	assert_status 0
	got=$(jq -r '.Contents[].Key' <<<"$output")
	[ "$got" = "$want" ] || fail "list-objects-v2 keys:"$'\n'"$got"$'\n'"want:"$'\n'"$want"
	aws_ s3api list-objects --bucket "$B"
	assert_status 0
	got=$(jq -r '.Contents[].Key' <<<"$output")
	[ "$got" = "$want" ] || fail "list-objects keys:"$'\n'"$got"$'\n'"want:"$'\n'"$want"
	rds3 ls -r --json "s3://$B"
	assert_status 0
	got=$(keys_of_listing)
	[ "$got" = "$want" ] || fail "rds3 ls -r keys:"$'\n'"$got"$'\n'"want:"$'\n'"$want"
}

# =============================================================== 3. auth

@test "auth: a wrong secret is SignatureDoesNotMatch, an unknown key InvalidAccessKeyId, unsigned AccessDenied; nothing changes on disk" {
	mkrand "$D/f" 100
	xrun "$RDS3" put "$D/f" "s3://$B/there" >/dev/null 2>&1 || fail "put"
	AWS_SECRET_ACCESS_KEY=wrong-secret rds3 put "$D/f" "s3://$B/nope"
	assert_status 3
	assert_match "$stderr" SignatureDoesNotMatch
	[ -z "$(find "$SERVE_DIR/$B" -name '*nope*')" ] || fail "written: $(find "$SERVE_DIR/$B")"
	AWS_SECRET_ACCESS_KEY=wrong-secret rds3 get "s3://$B/there" "$D/out"
	assert_status 3
	assert_match "$stderr" SignatureDoesNotMatch
	assert_no_output_file "$D/out"
	AWS_SECRET_ACCESS_KEY=wrong-secret rds3 rm "s3://$B/there"
	assert_status 3
	[ -f "$SERVE_DIR/$B/there" ] || fail "a wrongly signed DELETE removed the file"
	AWS_SECRET_ACCESS_KEY=wrong-secret rds3 mb "s3://$B-wrong"
	assert_status 3
	[ ! -e "$SERVE_DIR/$B-wrong" ] || fail "a wrongly signed CreateBucket made the directory"
	AWS_ACCESS_KEY_ID=NOSUCHKEY rds3 ls "s3://$B"
	assert_status 3
	assert_match "$stderr" InvalidAccessKeyId
	AWS_ACCESS_KEY_ID=NOSUCHKEY rds3 put "$D/f" "s3://$B/nope2"
	assert_status 3
	[ ! -e "$SERVE_DIR/$B/nope2" ] || fail "written with an unknown key"
	rds3 --no-sign-request cat "s3://$B/there"
	assert_status 3
	assert_match "$stderr" AccessDenied
	# Plain curl, unsigned.
	hcurl "$SERVE_URL/$B/there"
	want_code 403
	want_error AccessDenied
	hcurl "$SERVE_URL/"
	want_code 403
	hcurl -X PUT --data-binary @"$D/f" "$SERVE_URL/$B/curl-put"
	want_code 403
	[ ! -e "$SERVE_DIR/$B/curl-put" ] || fail "an unsigned PUT wrote"
	hcurl -X DELETE "$SERVE_URL/$B/there"
	want_code 403
	[ -f "$SERVE_DIR/$B/there" ] || fail "an unsigned DELETE removed the file"
	hcurl -X PUT "$SERVE_URL/$B-curl"
	want_code 403
	[ ! -e "$SERVE_DIR/$B-curl" ] || fail "an unsigned CreateBucket made the directory"
	# aws with a wrong secret
	[ -x "$AWS" ] || fail "awscli is not installed (scripts/deps.sh test)"
	AWS_SECRET_ACCESS_KEY=wrong-secret aws_ s3 cp "$D/f" "s3://$B/aws-nope"
	assert_nonzero
	assert_match "$stderr" SignatureDoesNotMatch
	[ ! -e "$SERVE_DIR/$B/aws-nope" ] || fail "aws with a wrong secret wrote"
}

@test "signed bodies (a signer of the test's own): the right SHA-256 or UNSIGNED-PAYLOAD pass; another SHA-256 is XAmzContentSHA256Mismatch, a wrong Content-MD5 BadDigest, an old date or another path 403; nothing lands" {
	printf 'the body\n' >"$D/in"
	h=$(sha256sum <"$D/in" | cut -c1-64)
	empty=$(: | sha256sum | cut -c1-64)
	# Controls: this signer is right.
	sigv4 PUT "/$B/k/ok" "$h" --data-binary @"$D/in"
	want_code 200
	assert_same "$D/in" "$SERVE_DIR/$B/k/ok"
	[ "$(hdr ETag)" = "\"$(md5_of "$D/in")\"" ] || fail "ETag: $(hdr ETag)"
	sigv4 GET "/$B/k/ok" "$empty"
	want_code 200
	assert_same "$D/in" "$D/body"
	sigv4 PUT "/$B/k/unsigned" UNSIGNED-PAYLOAD --data-binary @"$D/in"
	want_code 200
	assert_same "$D/in" "$SERVE_DIR/$B/k/unsigned"
	sigv4 PUT "/$B/k/md5" "$h" -H "Content-MD5: $(openssl md5 -binary <"$D/in" | base64)" --data-binary @"$D/in"
	want_code 200
	# The signed hash is another body's.
	sigv4 PUT "/$B/k/bad" "$(printf 'other\n' | sha256sum | cut -c1-64)" --data-binary @"$D/in"
	want_code 400
	want_error XAmzContentSHA256Mismatch
	[ -z "$(find "$SERVE_DIR/$B" -name '*bad*')" ] || fail "left: $(find "$SERVE_DIR/$B")"
	# Content-MD5 of other bytes.
	sigv4 PUT "/$B/k/badmd5" "$h" -H "Content-MD5: $(printf 'x' | openssl md5 -binary | base64)" --data-binary @"$D/in"
	want_code 400
	want_error BadDigest
	[ -z "$(find "$SERVE_DIR/$B" -name '*badmd5*')" ] || fail "left: $(find "$SERVE_DIR/$B")"
	# An hour old.
	SIGV4_DATE=$(date -u -d '-1 hour' +%Y%m%dT%H%M%SZ) sigv4 PUT "/$B/k/old" "$h" --data-binary @"$D/in"
	want_code 403
	[ ! -e "$SERVE_DIR/$B/k/old" ] || fail "a request an hour old wrote"
	# Signed for one key, sent to another.
	SIGV4_SIGNED_PATH=/$B/k/a sigv4 PUT "/$B/k/b" "$h" --data-binary @"$D/in"
	want_code 403
	want_error SignatureDoesNotMatch
	[ ! -e "$SERVE_DIR/$B/k/a" ] && [ ! -e "$SERVE_DIR/$B/k/b" ] || fail "a request signed for another path wrote"
}

@test "--no-sign-request: the open server serves rds3 --no-sign-request, plain curl and signed requests alike" {
	o=(--no-sign-request --endpoint "$OPEN_URL")
	rds3 "${o[@]}" mb "s3://$B"
	assert_status 0
	[ -d "$OPEN_DIR/$B" ] || fail "no bucket directory"
	mkrand "$D/f" 2000
	rds3 "${o[@]}" put "$D/f" "s3://$B/k"
	assert_status 0
	assert_same "$D/f" "$OPEN_DIR/$B/k"
	rds3 "${o[@]}" get "s3://$B/k" "$D/back"
	assert_status 0
	assert_same "$D/f" "$D/back"
	rds3 "${o[@]}" ls -r --json "s3://$B"
	assert_status 0
	[ "$(keys_of_listing)" = k ] || fail "$output"
	hcurl "$OPEN_URL/$B/k"
	want_code 200
	assert_same "$D/f" "$D/body"
	hcurl -X PUT --data-binary @"$D/f" "$OPEN_URL/$B/by-curl"
	want_code 200
	assert_same "$D/f" "$OPEN_DIR/$B/by-curl"
	[ "$(hdr ETag)" = "\"$(md5_of "$D/f")\"" ] || fail "ETag: $(hdr ETag)"
	# Signed with any key: nothing is checked.
	AWS_ACCESS_KEY_ID=ANYKEY AWS_SECRET_ACCESS_KEY=any rds3 --endpoint "$OPEN_URL" cat "s3://$B/by-curl"
	assert_status 0
	rds3 "${o[@]}" rm "s3://$B/k" "s3://$B/by-curl"
	assert_status 0
	rds3 "${o[@]}" rb "s3://$B"
	assert_status 0
	[ ! -e "$OPEN_DIR/$B" ] || fail "rb left the directory"
}

@test "serve --profile: the keys of a named profile are the ones accepted" {
	mkdir -p "$D/ph/.aws" "$D/pstore"
	printf '[srv]\naws_access_key_id = PROFKEY\naws_secret_access_key = prof-secret\n' >"$D/ph/.aws/credentials"
	# shellcheck disable=SC2046 # serve_env is a list of options
	bg_start prof env $(serve_env) -u AWS_ACCESS_KEY_ID -u AWS_SECRET_ACCESS_KEY HOME="$D/ph" \
		AWS_SHARED_CREDENTIALS_FILE="$D/ph/.aws/credentials" AWS_CONFIG_FILE="$D/ph/.aws/config" \
		"$RDS3" -v --profile srv serve "$D/pstore"
	wait_until 10 url_line "$D/prof.out" || fail "no URL line: $(cat "$D/prof.err")"
	url=$(head -n 1 "$D/prof.out")
	AWS_ACCESS_KEY_ID=PROFKEY AWS_SECRET_ACCESS_KEY=prof-secret rds3 --endpoint "$url" mb "s3://prof-$B"
	assert_status 0
	[ -d "$D/pstore/prof-$B" ] || fail "no bucket directory"
	rds3 --endpoint "$url" ls
	assert_status 3
	assert_match "$stderr" InvalidAccessKeyId
	AWS_ACCESS_KEY_ID=PROFKEY AWS_SECRET_ACCESS_KEY=wrong rds3 --endpoint "$url" ls
	assert_status 3
	assert_match "$stderr" SignatureDoesNotMatch
}

# ============================================ 4. hostile keys and paths

@test "hostile paths (open server): .. and . components, percent-encoded or not, are 400 and nothing is read or written outside DIR" {
	hcurl -X PUT "$OPEN_URL/$B"
	want_code 200
	hcurl -X PUT "$OPEN_URL/$B-other"
	want_code 200
	printf 'secret outside\n' >"$BATS_FILE_TMPDIR/outside.txt"
	printf 'in a bucket\n' >"$OPEN_DIR/$B-other/inside.txt"
	SOFT=()
	for p in "/$B/../../outside.txt" "/$B/%2e%2e/%2e%2e/outside.txt" "/$B/%2E%2E%2F%2E%2E%2Foutside.txt" \
		"/$B/..%2f..%2foutside.txt" "/$B/x/../../../outside.txt" "/$B/../$B-other/inside.txt" \
		"/$B/%2e%2e/$B-other/inside.txt" "/$B/../../../../../../../../etc/passwd" \
		"/$B/%2e%2e/%2e%2e/%2e%2e/%2e%2e/%2e%2e/%2e%2e/%2e%2e/%2e%2e/etc/passwd" "/$B/./x" "/$B/%2e/x"; do
		hcurl "$OPEN_URL$p"
		soft "GET $p" want_code 400
		soft "GET $p read outside" not_leaked
	done
	for p in "/../outside.txt" "/%2e%2e/outside.txt" "/%2e%2e/%2e%2e/etc/passwd"; do
		hcurl "$OPEN_URL$p"
		soft "GET $p" want_4xx
		soft "GET $p read outside" not_leaked
	done
	for p in "/$B/../../evil1" "/$B/%2e%2e/%2e%2e/evil2" "/$B/a/%2E%2E/%2E%2E/%2E%2E/evil3" \
		"/$B/..%2F..%2Fevil4" "/$B/../$B-other/evil5" "/$B/%2e%2e/$B-other/evil6" "/$B/./evil7" "/$B/a/./evil8"; do
		hcurl -X PUT --data-binary evil "$OPEN_URL$p"
		soft "PUT $p" want_code 400
	done
	for p in "/../evil9" "/%2e%2e/evil10"; do
		hcurl -X PUT --data-binary evil "$OPEN_URL$p"
		soft "PUT $p" want_4xx
	done
	left=$(find "$BATS_FILE_TMPDIR" -name 'evil*')
	[ -z "$left" ] || SOFT+=("written: $left")
	[ "$(cat "$BATS_FILE_TMPDIR/outside.txt")" = "secret outside" ] || SOFT+=("outside.txt changed")
	# DELETE through .. removes nothing.
	hcurl -X DELETE "$OPEN_URL/$B/../$B-other/inside.txt"
	soft "DELETE through .. into another bucket" want_code 400
	[ -f "$OPEN_DIR/$B-other/inside.txt" ] || SOFT+=("DELETE through .. removed a file of another bucket")
	hcurl -X DELETE "$OPEN_URL/$B/../../outside.txt"
	soft "DELETE through .. out of DIR" want_code 400
	[ -f "$BATS_FILE_TMPDIR/outside.txt" ] || SOFT+=("DELETE through .. removed a file outside DIR")
	# Copy from a source through ..
	hcurl -X PUT -H "x-amz-copy-source: /$B/../../outside.txt" "$OPEN_URL/$B/stolen"
	soft "CopyObject from /$B/../../outside.txt" want_code 400 403 404
	[ ! -e "$OPEN_DIR/$B/stolen" ] || SOFT+=("CopyObject copied from outside DIR: $(cat "$OPEN_DIR/$B/stolen")")
	soft_end
}

@test "keys that are no paths (open server): empty components, NUL, a component over 255 bytes, the folder's file are 400; a body on a trailing / and 255 bytes are fine" {
	hcurl -X PUT "$OPEN_URL/$B"
	want_code 200
	SOFT=()
	for k in "a//b" "x/%2F/y" "nul%00byte" "nul%00" "/" "trail/.rds3-folder" ".rds3-folder"; do
		hcurl -X PUT --data-binary x "$OPEN_URL/$B/$k"
		soft "PUT key '$k'" want_code 400
		soft "PUT key '$k'" want_error InvalidArgument KeyTooLongError
	done
	# A key ending in / is the folder's file in the directory of that name.
	hcurl -X PUT --data-binary x "$OPEN_URL/$B/trail/"
	soft "PUT key 'trail/' with a body" want_code 200
	[ "$(cat "$OPEN_DIR/$B/trail/.rds3-folder" 2>/dev/null)" = x ] || SOFT+=("trail/'s bytes are not on disk")
	long=$(printf 'n%.0s' $(seq 256))
	hcurl -X PUT --data-binary x "$OPEN_URL/$B/d/$long"
	soft "PUT a 256-byte component" want_code 400
	soft "PUT a 256-byte component" want_error InvalidArgument KeyTooLongError
	ok=$(printf 'n%.0s' $(seq 255))
	hcurl -X PUT --data-binary x "$OPEN_URL/$B/d/$ok"
	soft "PUT a 255-byte component" want_code 200
	[ "$(cat "$OPEN_DIR/$B/d/$ok" 2>/dev/null)" = x ] || SOFT+=("the 255-byte key is not on disk")
	[ "$(find "$OPEN_DIR/$B" -type f | wc -l)" -eq 2 ] || SOFT+=("files: $(find "$OPEN_DIR/$B" -type f)")
	hcurl "$OPEN_URL/$B?list-type=2"
	want_code 200
	[ "$(grep -o '<Key>[^<]*</Key>' "$D/body" | tr -d '\n')" = "<Key>d/$ok</Key><Key>trail/</Key>" ] || SOFT+=("listing: $(cat "$D/body")")
	soft_end
}

@test "sub-resources that are not served (?tagging, ?acl, ...) are refused, never taken for GetObject or PutObject" {
	printf 'the object\n' >"$D/o"
	xrun "$RDS3" put "$D/o" "s3://$B/k" >/dev/null 2>&1 || fail "put"
	hcurl -X PUT "$OPEN_URL/$B"
	want_code 200
	hcurl -X PUT --data-binary @"$D/o" "$OPEN_URL/$B/k"
	want_code 200
	SOFT=()
	for q in tagging acl torrent retention legal-hold attributes; do
		hcurl "$OPEN_URL/$B/k?$q"
		if cmp -s "$D/o" "$D/body"; then
			SOFT+=("GET ?$q answered the object's bytes as if it were GetObject (HTTP $output)")
		fi
		hcurl -X PUT --data-binary "<x>$q</x>" "$OPEN_URL/$B/k?$q"
		cmp -s "$D/o" "$OPEN_DIR/$B/k" ||
			SOFT+=("PUT ?$q (HTTP $output) replaced the object with its body: $(head -c 100 "$OPEN_DIR/$B/k")")
		cp "$D/o" "$OPEN_DIR/$B/k"
	done
	for q in tagging acl; do
		hcurl "$OPEN_URL/$B?$q"
		grep -q '<ListBucketResult' "$D/body" && SOFT+=("GET bucket?$q answered a listing (HTTP $output)")
	done
	# The clients that send them: aws s3api put-object-tagging, put-object-acl.
	[ -x "$AWS" ] || fail "awscli is not installed (scripts/deps.sh test)"
	aws_ s3api put-object-tagging --bucket "$B" --key k --tagging 'TagSet=[{Key=a,Value=b}]'
	cmp -s "$D/o" "$SERVE_DIR/$B/k" ||
		SOFT+=("aws s3api put-object-tagging (exit $status) replaced the object: $(head -c 200 "$SERVE_DIR/$B/k")")
	cp "$D/o" "$SERVE_DIR/$B/k"
	aws_ s3api put-object-acl --bucket "$B" --key k --acl private
	cmp -s "$D/o" "$SERVE_DIR/$B/k" ||
		SOFT+=("aws s3api put-object-acl (exit $status) replaced the object: $(head -c 200 "$SERVE_DIR/$B/k")")
	cp "$D/o" "$SERVE_DIR/$B/k"
	aws_ s3api get-object-tagging --bucket "$B" --key k
	[[ $stderr != *"Unable to parse response"* ]] ||
		SOFT+=("aws s3api get-object-tagging got the object's bytes: ${stderr:0:300}")
	soft_end
}

@test "a symlink inside the store is never followed: put, multipart, get, cat, cp, rm and ls through it do not reach outside" {
	mkdir -p "$D/outside"
	printf 'outside secret\n' >"$D/outside/secret"
	ln -s "$D/outside" "$SERVE_DIR/$B/link"
	ln -s "$D/outside/secret" "$SERVE_DIR/$B/flink"
	ln -s "$D/outside" "$SERVE_DIR/$B-lbkt"
	mkrand "$D/f" 100
	rds3 put "$D/f" "s3://$B/link/x"
	assert_nonzero
	rds3 put "$D/f" "s3://$B/link/sub/y"
	assert_nonzero
	mkrand "$D/big" $((6 * 1048576))
	rds3 --part-size 5M put "$D/big" "s3://$B/link/big"
	assert_nonzero
	rds3 put "$D/f" "s3://$B-lbkt/z"
	assert_nonzero
	rds3 cp "s3://$B/flink" "s3://$B/link/copied"
	assert_nonzero
	rds3 cat "s3://$B/link/secret"
	assert_nonzero
	[[ $output != *"outside secret"* ]] || fail "read through the link"
	rds3 cat "s3://$B/flink"
	assert_nonzero
	[[ $output != *"outside secret"* ]] || fail "read through the file link"
	rds3 get "s3://$B/link/secret" "$D/got"
	assert_nonzero
	assert_no_output_file "$D/got"
	rds3 cat "s3://$B-lbkt/secret"
	assert_nonzero
	[[ $output != *"outside secret"* ]] || fail "read through the bucket link"
	rds3 cp "s3://$B/link/secret" "s3://$B/stolen"
	assert_nonzero
	[ ! -e "$SERVE_DIR/$B/stolen" ] || fail "copied from outside: $(cat "$SERVE_DIR/$B/stolen")"
	rds3 ls -r --json "s3://$B"
	assert_status 0
	! grep -q 'link/' <<<"$output" || fail "the listing went into the link: $output"
	rds3 ls -r "s3://$B-lbkt"
	[[ $output != *secret* ]] || fail "the listing went into the bucket link: $output"
	rds3 rm "s3://$B/link/secret"
	rds3 rm -r "s3://$B/link/"
	rds3 rm "s3://$B-lbkt/secret"
	[ "$(ls -A "$D/outside")" = secret ] || fail "outside changed: $(ls -la "$D/outside")"
	[ "$(cat "$D/outside/secret")" = "outside secret" ] || fail "outside/secret changed"
	[ -L "$SERVE_DIR/$B/link" ] || fail "the directory link was replaced"
	# A PUT onto the file link may replace the link, never write its target.
	rds3 put "$D/f" "s3://$B/flink"
	[ "$(cat "$D/outside/secret")" = "outside secret" ] || fail "a PUT wrote through the file link"
	[ "$(ls -A "$D/outside")" = secret ] || fail "outside changed: $(ls -la "$D/outside")"
}

@test "a key cannot be both an object and a prefix: a then a/b, c/d then c (put, copy, multipart) refused, the disk unchanged" {
	mkrand "$D/f" 100
	mkrand "$D/g" 200
	rds3 put "$D/f" "s3://$B/a"
	assert_status 0
	rds3 put "$D/g" "s3://$B/a/b"
	assert_status 5
	[ -f "$SERVE_DIR/$B/a" ] || fail "a is no longer a file: $(find "$SERVE_DIR/$B")"
	assert_same "$D/f" "$SERVE_DIR/$B/a"
	rds3 put "$D/f" "s3://$B/c/d"
	assert_status 0
	rds3 put "$D/g" "s3://$B/c"
	assert_status 5
	[ -d "$SERVE_DIR/$B/c" ] || fail "c is no longer a directory"
	assert_same "$D/f" "$SERVE_DIR/$B/c/d"
	rds3 cp "s3://$B/a" "s3://$B/c"
	assert_status 5
	rds3 cp "s3://$B/c/d" "s3://$B/a/x"
	assert_status 5
	mkrand "$D/big" $((6 * 1048576))
	rds3 --part-size 5M put "$D/big" "s3://$B/a/big"
	assert_status 5
	rds3 --part-size 5M put "$D/big" "s3://$B/c"
	assert_status 5
	assert_same "$D/f" "$SERVE_DIR/$B/a"
	assert_same "$D/f" "$SERVE_DIR/$B/c/d"
	[ "$(find "$SERVE_DIR/$B" -type f | sort | paste -sd ' ')" = "$SERVE_DIR/$B/a $SERVE_DIR/$B/c/d" ] ||
		fail "files: $(find "$SERVE_DIR/$B")"
	rds3 ls -r --json "s3://$B"
	assert_status 0
	[ "$(keys_of_listing | paste -sd ' ')" = "a c/d" ] || fail "listing: $output"
	# The statuses themselves.
	hcurl -X PUT "$OPEN_URL/$B"
	want_code 200
	hcurl -X PUT --data-binary x "$OPEN_URL/$B/a"
	want_code 200
	hcurl -X PUT --data-binary y "$OPEN_URL/$B/a/b"
	want_code 400 409
	want_error
	hcurl -X PUT --data-binary x "$OPEN_URL/$B/c/d"
	want_code 200
	hcurl -X PUT --data-binary y "$OPEN_URL/$B/c"
	want_code 400 409
	want_error
	[ "$(cat "$OPEN_DIR/$B/a")" = x ] && [ "$(cat "$OPEN_DIR/$B/c/d")" = x ] || fail "the open store changed"
}

# ========================================================= 5. robustness

@test "a body cut short (Content-Length 1000, 10 bytes, closed; a chunked body cut) leaves no object and no temporary under any name" {
	hcurl -X PUT "$OPEN_URL/$B"
	want_code 200
	port=${OPEN_URL##*:}
	# Control: the same raw request with its whole body makes the object.
	raw_send "$port" "PUT /$B/whole HTTP/1.1\r\nHost: 127.0.0.1:$port\r\nContent-Length: 10\r\nConnection: close\r\n\r\n0123456789" read
	assert_match "$RAW" '^HTTP/1\.1 200' "the answer to a whole PUT"
	[ "$(cat "$OPEN_DIR/$B/whole")" = 0123456789 ] || fail "the whole PUT: $(find "$OPEN_DIR/$B")"
	# Two bodies held open until their temporaries are there (so that what
	# follows checks their removal, not only that nothing was published).
	exec {c1}<>"/dev/tcp/127.0.0.1/$port" {c2}<>"/dev/tcp/127.0.0.1/$port"
	printf 'PUT /%s/short HTTP/1.1\r\nHost: 127.0.0.1:%s\r\nContent-Length: 1000\r\n\r\n0123456789' "$B" "$port" >&"$c1"
	printf 'PUT /%s/deep/er/short2 HTTP/1.1\r\nHost: 127.0.0.1:%s\r\nContent-Length: 1000\r\n\r\n0123456789' "$B" "$port" >&"$c2"
	# Unnamed files (O_TMPFILE), or temporaries where there is none.
	two_temps() {
		[ $(($(find "$OPEN_DIR/$B" -type f ! -name whole | wc -l) + $(unnamed_in "$OPEN_DIR/$B"))) -ge 2 ]
	}
	wait_until 5 two_temps || fail "no temporaries while two bodies are awaited: $(find "$OPEN_DIR/$B" -ls)"
	exec {c1}>&- {c2}>&-
	raw_send "$port" "PUT /$B/chunked HTTP/1.1\r\nHost: 127.0.0.1:$port\r\nTransfer-Encoding: chunked\r\n\r\na\r\n0123456789\r\n"
	raw_send "$port" "PUT /$B/short3 HTTP/1.1\r\nHost: 127.0.0.1:$port\r\nContent-Length: 1000000\r\n\r\n$(head -c 100000 /dev/zero | tr '\0' z)"
	others() { [ -z "$(find "$OPEN_DIR/$B" -type f ! -name whole)" ] && [ "$(unnamed_in "$OPEN_DIR/$B")" = 0 ]; }
	wait_until 5 others || fail "left after cut bodies: $(find "$OPEN_DIR/$B" -ls)"
	sleep 0.5
	others || fail "left after cut bodies: $(find "$OPEN_DIR/$B" -ls)"
	for k in short deep/er/short2 chunked short3; do
		hcurl "$OPEN_URL/$B/$k"
		want_code 404 || fail "GET $k"
	done
	hcurl "$OPEN_URL/$B?list-type=2&delimiter=/"
	want_code 200
	[ "$(grep -oE '<(Key|Prefix)>[^<]+</(Key|Prefix)>' "$D/body")" = "<Key>whole</Key>" ] ||
		fail "the listing after cut bodies: $(cat "$D/body")"
	# The signed server, a signed PUT (UNSIGNED-PAYLOAD) whose body is cut the same way.
	sigv4_sign PUT "/$B/cut" UNSIGNED-PAYLOAD
	exec {c1}<>"/dev/tcp/127.0.0.1/${SERVE_URL##*:}"
	printf 'PUT /%s/cut HTTP/1.1\r\nHost: %s\r\n%s\r\n%s\r\n%s\r\nContent-Length: 1000\r\n\r\n0123456789' \
		"$B" "${SERVE_URL#http://}" "$SIGV4_DATE_H" "$SIGV4_HASH_H" "$SIGV4_AUTH_H" >&"$c1"
	a_temp() { [ -n "$(find "$SERVE_DIR/$B" -type f)" ] || [ "$(unnamed_in "$SERVE_DIR/$B")" != 0 ]; }
	wait_until 5 a_temp || fail "no temporary while a signed body is awaited: $(find "$SERVE_DIR/$B" -ls)"
	exec {c1}>&-
	nothing() { [ -z "$(find "$SERVE_DIR/$B" -type f)" ] && [ "$(unnamed_in "$SERVE_DIR/$B")" = 0 ]; }
	wait_until 5 nothing || fail "left on the signed server: $(find "$SERVE_DIR/$B" -ls)"
}

@test "a 100 KiB header, 200 headers, a 20 KiB request line and garbage are answered 4xx (431 or 400), and the server serves on" {
	big=$(head -c 102400 /dev/zero | tr '\0' a)
	hcurl -H "X-Big: $big" "$OPEN_URL/"
	want_code 431 400 || fail "a 100 KiB header"
	hargs=()
	for i in $(seq 1 200); do hargs+=(-H "X-H$i: v"); done
	hcurl "${hargs[@]}" "$OPEN_URL/"
	want_code 431 400 || fail "200 headers"
	long=$(printf 'seg%.0s/' $(seq 5000))
	hcurl "$OPEN_URL/$B/$long"
	want_code 431 414 400 || fail "a 20 KiB request line"
	port=${OPEN_URL##*:}
	raw_send "$port" "GARBAGE\r\n\r\n" read
	assert_match "$RAW" '^HTTP/1\.1 4[0-9][0-9]' "the answer to garbage"
	hcurl "$OPEN_URL/"
	want_code 200 || fail "the server stopped serving"
	rds3 ls
	assert_status 0
	assert_match "$output" " $B$"
}

@test "an idle connection does not hold up others; --timeout closes one; with --max-connections 1 the next waits for it" {
	port=${SERVE_URL##*:}
	exec {idle1}<>"/dev/tcp/127.0.0.1/$port"
	exec {idle2}<>"/dev/tcp/127.0.0.1/$port"
	printf 'GET / HTTP/1.1\r\nHost: x\r\n' >&"$idle2"
	mkrand "$D/f" 1000
	t0=$SECONDS
	rds3 --timeout 10 put "$D/f" "s3://$B/k"
	assert_status 0
	rds3 --timeout 10 get "s3://$B/k" "$D/back"
	assert_status 0
	assert_same "$D/f" "$D/back"
	[ $((SECONDS - t0)) -lt 5 ] || fail "served in $((SECONDS - t0)) s beside two idle connections"
	exec {idle1}>&- {idle2}>&-
	# A server of its own: one connection at a time, idle ones closed after 1 s.
	mkdir "$D/store"
	serve_bg one "$D/store" --max-connections 1 --timeout 1
	exec {fd}<>"/dev/tcp/127.0.0.1/${SRV_URL##*:}"
	t0=$SECONDS
	run_t --secs 20 "$RDS3" --endpoint "$SRV_URL" --timeout 15 ls
	assert_status 0
	[ $((SECONDS - t0)) -lt 10 ] || fail "waited $((SECONDS - t0)) s"
	run_t --secs 5 bash -c "cat <&$fd >/dev/null"
	[ "$status" -ne 124 ] || fail "the idle connection was not closed by --timeout 1"
	exec {fd}>&-
	kill -TERM "$SRV_PID"
	wait_exit "$SRV_PID" 5
	assert_rc one "$WAIT_RC" 0
}

@test "with no room left, an idle connection or one whose header trickles gives way to a new one; one in the middle of a body does not" {
	mkdir "$D/store"
	serve_bg two "$D/store" --max-connections 2 --timeout 30 --no-sign-request
	port=${SRV_URL##*:}
	hcurl -X PUT "$SRV_URL/gw-$B"
	want_code 200
	# A body under way: its header in whole, half of its 10 bytes.
	exec {body}<>"/dev/tcp/127.0.0.1/$port"
	printf 'PUT /gw-%s/k HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n01234' "$B" >&"$body"
	for stray in idle trickle; do
		exec {s}<>"/dev/tcp/127.0.0.1/$port"
		[ "$stray" = idle ] || printf 'GET / HTTP/1.1\r\nHost: x\r\n' >&"$s"
		sleep 1.5
		# Both places are taken: without giving way this waits 30 s.
		t0=$SECONDS
		run_t --secs 40 "$RDS3" --endpoint "$SRV_URL" --no-sign-request --timeout 35 ls "s3://gw-$B"
		assert_status 0
		[ $((SECONDS - t0)) -lt 10 ] || fail "$stray: waited $((SECONDS - t0)) s for a place"
		run_t --secs 5 bash -c "cat <&$s >/dev/null"
		[ "$status" -ne 124 ] || fail "the $stray connection is still open"
		exec {s}>&-
	done
	# The body under way was kept: it ends, and gets its answer.
	printf '56789' >&"$body"
	got=$(timeout 5 head -c 12 <&"$body")
	[ "$got" = "HTTP/1.1 200" ] || fail "the connection in the middle of a body: '$got'"
	exec {body}>&-
	kill -TERM "$SRV_PID"
	wait_exit "$SRV_PID" 5
	assert_rc two "$WAIT_RC" 0
}

@test "slowloris: 100 connections trickling their headers from one address; a real client is served within 5 s, the strays time out and are capped" {
	[ -x "$RDX_BUILD/tests/badpeer" ] || fail "badpeer not built"
	mkdir "$D/store"
	serve_bg slow "$D/store" --max-connections 16 --header-timeout 3 --no-sign-request
	port=${SRV_URL##*:}
	hcurl -X PUT "$SRV_URL/sl-$B"
	want_code 200
	BADPEER_BIND=127.0.0.2 bg_start loris "$RDX_BUILD/tests/badpeer" slowloris 100 127.0.0.1 "$port"
	sleep 3
	for i in 1 2 3; do
		t0=$(date +%s%N)
		hcurl "$SRV_URL/sl-$B?list-type=2"
		want_code 200
		ms=$((($(date +%s%N) - t0) / 1000000))
		echo "# a real request under the attack took $ms ms" >&3
		[ "$ms" -le 5000 ] || fail "a real request took $ms ms under the attack"
		sleep 1
	done
	assert_file_match "$D/slow.err" "127\.0\.0\.2:[0-9]+: turned away: its address holds 12 connections"
}

@test "the URL line (--port, --listen ::1), -v: one line a request, SIGTERM and SIGINT exit 0, a PUT in flight at the stop or a SIGKILL leaves nothing" {
	mkdir "$D/s"
	p=$(free_port)
	serve_bg s1 "$D/s" --port "$p" --no-sign-request
	[ "$SRV_URL" = "http://127.0.0.1:$p" ] || fail "URL line: $SRV_URL"
	[ "$(grep -c '' "$D/s1.out")" -eq 1 ] || fail "stdout: $(cat "$D/s1.out")"
	n0=$(grep -cE ' (GET|PUT|HEAD|POST|DELETE) /' "$D/s1.err" || true)
	hcurl -X PUT "$SRV_URL/vb-$B"
	want_code 200
	hcurl -X PUT --data-binary x "$SRV_URL/vb-$B/k"
	want_code 200
	hcurl "$SRV_URL/vb-$B/k"
	want_code 200
	n=$(grep -cE ' (GET|PUT|HEAD|POST|DELETE) /' "$D/s1.err" || true)
	[ $((n - n0)) -eq 3 ] || fail "-v: $((n - n0)) request lines for 3 requests: $(cat "$D/s1.err")"
	kill -TERM "$SRV_PID"
	wait_exit "$SRV_PID" 5
	assert_rc s1 "$WAIT_RC" 0
	[ "$(grep -c '' "$D/s1.out")" -eq 1 ] || fail "stdout: $(cat "$D/s1.out")"
	# IPv6 loopback, SIGINT.
	serve_bg s2 "$D/s" --listen ::1 --no-sign-request
	[[ $SRV_URL =~ ^http://\[::1\]:[0-9]+$ ]] || fail "URL line: $SRV_URL"
	hcurl "$SRV_URL/vb-$B/k"
	want_code 200
	[ "$(cat "$D/body")" = x ] || fail "over ::1: $(cat "$D/body")"
	kill -INT "$SRV_PID"
	wait_exit "$SRV_PID" 5
	assert_rc s2 "$WAIT_RC" 0
	# A PUT whose body is still coming when the server is stopped.
	serve_bg s3 "$D/s" --no-sign-request
	exec {fd}<>"/dev/tcp/127.0.0.1/${SRV_URL##*:}"
	printf 'PUT /vb-%s/inflight HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000\r\n\r\n0123456789' "$B" >&"$fd"
	# The object is written unnamed (O_TMPFILE), or under a temporary.
	a_temp() { [ -n "$(find "$D/s/vb-$B" -type f ! -name k)" ] || has_unnamed "$D/s/vb-$B"; }
	wait_until 5 a_temp || fail "no temporary while the body is awaited: $(find "$D/s" -ls)"
	kill -TERM "$SRV_PID"
	wait_exit "$SRV_PID" 5
	assert_rc s3 "$WAIT_RC" 0
	exec {fd}>&-
	[ "$(find "$D/s/vb-$B" -type f | paste -sd ' ')" = "$D/s/vb-$B/k" ] ||
		fail "left after a stop in flight: $(find "$D/s/vb-$B" -ls)"
	# Killed with SIGKILL mid-PUT, it cleans nothing up: nothing to clean.
	serve_bg s4 "$D/s" --no-sign-request
	exec {fd}<>"/dev/tcp/127.0.0.1/${SRV_URL##*:}"
	printf 'PUT /vb-%s/killed HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000\r\n\r\n0123456789' "$B" >&"$fd"
	wait_until 5 a_temp || fail "no file while the body is awaited: $(find "$D/s" -ls)"
	kill -KILL "$SRV_PID"
	wait_exit "$SRV_PID" 5
	exec {fd}>&-
	[ "$(find "$D/s/vb-$B" -type f | paste -sd ' ')" = "$D/s/vb-$B/k" ] ||
		fail "left after SIGKILL in flight: $(find "$D/s/vb-$B" -ls)"
	# A symlink where the uploads go: refused at the start, not a 500 a request.
	ln -s /tmp "$D/s/.rds3-uploads"
	run_t "$RDS3" serve --no-sign-request "$D/s"
	assert_status 4
	assert_match "$stderr" "cannot serve '$D/s': '$D/s/.rds3-uploads' is a symlink, not a directory \\(remove it\\)"
}

@test "--expire-uploads: old incomplete multipart uploads and a killed server's part temporaries go at the start; fresh ones stay" {
	mkdir -p "$D/s/b" "$D/s/.rds3-uploads"
	local old=0123456789abcdef0123456789abcdef fresh=fedcba9876543210fedcba9876543210
	for id in $old $fresh; do
		mkdir "$D/s/.rds3-uploads/$id"
		printf 'b\nk\n' >"$D/s/.rds3-uploads/$id/key"
		: >"$D/s/.rds3-uploads/$id/headers"
		echo part >"$D/s/.rds3-uploads/$id/00001"
	done
	echo half >"$D/s/.rds3-uploads/$fresh/.00002.rdx-0badf00d"
	touch -d '8 days ago' "$D/s/.rds3-uploads/$old/key"
	serve_bg ex "$D/s" --no-sign-request --expire-uploads 7
	[ ! -e "$D/s/.rds3-uploads/$old" ] || fail "the 8-day-old upload is still there"
	[ -e "$D/s/.rds3-uploads/$fresh/00001" ] || fail "the fresh upload's part is gone"
	[ ! -e "$D/s/.rds3-uploads/$fresh/.00002.rdx-0badf00d" ] || fail "the left temporary is still there"
	assert_file_match "$D/ex.err" "removed 1 incomplete multipart upload begun over 7 days ago"
	kill -TERM "$SRV_PID"
	wait_exit "$SRV_PID" 5
	# 0: never; and the fresh upload still completes its listing.
	touch -d '30 days ago' "$D/s/.rds3-uploads/$fresh/key"
	serve_bg ex2 "$D/s" --no-sign-request --expire-uploads 0
	[ -e "$D/s/.rds3-uploads/$fresh" ] || fail "--expire-uploads 0 removed an upload"
	kill -TERM "$SRV_PID"
	wait_exit "$SRV_PID" 5
	run_t "$RDS3" --expire-uploads x serve "$D/s"
	assert_status 2
}

# ================================== 6. ranges, conditionals, errors (curl)

@test "Range (open server): bytes=0-0, 5-, -3, a clamped end, past the end 416; partNumber of a multipart object" {
	hcurl -X PUT "$OPEN_URL/$B"
	want_code 200
	printf '0123456789abcdef' >"$D/o"
	hcurl -X PUT --data-binary @"$D/o" "$OPEN_URL/$B/r"
	want_code 200
	hcurl "$OPEN_URL/$B/r"
	want_code 200
	assert_same "$D/o" "$D/body"
	[ "$(hdr Content-Length)" = 16 ] || fail "Content-Length $(hdr Content-Length)"
	[ "$(hdr ETag)" = "\"$(md5_of "$D/o")\"" ] || fail "ETag $(hdr ETag)"
	range_is() { # RANGE BODY CONTENT-RANGE
		hcurl -H "Range: $1" "$OPEN_URL/$B/r"
		want_code 206 || fail "Range: $1"
		[ "$(cat "$D/body")" = "$2" ] || fail "Range $1: '$(cat "$D/body")', want '$2'"
		[ "$(hdr Content-Range)" = "$3" ] || fail "Range $1: Content-Range '$(hdr Content-Range)', want '$3'"
		[ "$(hdr Content-Length)" = "${#2}" ] || fail "Range $1: Content-Length $(hdr Content-Length)"
	}
	range_is bytes=0-0 0 "bytes 0-0/16"
	range_is bytes=5- 56789abcdef "bytes 5-15/16"
	range_is bytes=-3 def "bytes 13-15/16"
	range_is bytes=10-100 abcdef "bytes 10-15/16"
	range_is bytes=15-15 f "bytes 15-15/16"
	for r in bytes=16- bytes=100-200 bytes=16-20; do
		hcurl -H "Range: $r" "$OPEN_URL/$B/r"
		want_code 416 || fail "Range: $r"
		want_error InvalidRange
	done
	hcurl -X PUT --data-binary @/dev/null "$OPEN_URL/$B/empty"
	want_code 200
	hcurl -H "Range: bytes=0-0" "$OPEN_URL/$B/empty"
	want_code 416 || fail "Range: bytes=0-0 of an empty object"
	# partNumber
	mkrand "$D/big" $((11 * 1048576 + 5))
	size=$(fsize "$D/big")
	xrun "$RDS3" --no-sign-request --endpoint "$OPEN_URL" --part-size 5M put "$D/big" "s3://$B/big" >/dev/null 2>&1 ||
		fail "rds3 put to the open server"
	dd if="$D/big" of="$D/part2" bs=1M skip=5 count=5 status=none
	dd if="$D/big" of="$D/part3" bs=1M skip=10 status=none
	hcurl "$OPEN_URL/$B/big?partNumber=2"
	want_code 206 || fail "partNumber=2"
	assert_same "$D/part2" "$D/body"
	[ "$(hdr Content-Range)" = "bytes 5242880-10485759/$size" ] || fail "partNumber=2: Content-Range $(hdr Content-Range)"
	[ "$(hdr x-amz-mp-parts-count)" = 3 ] || fail "partNumber=2: x-amz-mp-parts-count '$(hdr x-amz-mp-parts-count)'"
	hcurl "$OPEN_URL/$B/big?partNumber=3"
	want_code 206 || fail "partNumber=3"
	assert_same "$D/part3" "$D/body"
	[ "$(hdr Content-Range)" = "bytes 10485760-$((size - 1))/$size" ] || fail "partNumber=3: $(hdr Content-Range)"
	hcurl -I "$OPEN_URL/$B/big?partNumber=1"
	want_code 206 || fail "HEAD partNumber=1"
	[ "$(hdr Content-Length)" = 5242880 ] || fail "HEAD partNumber=1: Content-Length $(hdr Content-Length)"
	hcurl "$OPEN_URL/$B/big?partNumber=4"
	want_code 400 && want_error InvalidPart || fail "partNumber=4 of 3"
}

@test "conditional GET and HEAD (open server): If-Match, If-None-Match, If-Modified-Since, If-Unmodified-Since" {
	hcurl -X PUT "$OPEN_URL/$B"
	want_code 200
	printf 'conditional\n' >"$D/o"
	hcurl -X PUT --data-binary @"$D/o" "$OPEN_URL/$B/c"
	want_code 200
	etag="\"$(md5_of "$D/o")\""
	hcurl "$OPEN_URL/$B/c"
	want_code 200
	lm=$(hdr Last-Modified)
	[ -n "$lm" ] || fail "no Last-Modified"
	hcurl -H 'If-Match: "00000000000000000000000000000000"' "$OPEN_URL/$B/c"
	want_code 412 || fail "If-Match a wrong ETag"
	want_error PreconditionFailed
	hcurl -H "If-Match: $etag" "$OPEN_URL/$B/c"
	want_code 200 || fail "If-Match the ETag"
	assert_same "$D/o" "$D/body"
	hcurl -H "If-None-Match: $etag" "$OPEN_URL/$B/c"
	want_code 304 || fail "If-None-Match the ETag"
	[ ! -s "$D/body" ] || fail "a 304 with a body: $(cat "$D/body")"
	hcurl -H 'If-None-Match: "00000000000000000000000000000000"' "$OPEN_URL/$B/c"
	want_code 200 || fail "If-None-Match another ETag"
	hcurl -H "If-Modified-Since: $lm" "$OPEN_URL/$B/c"
	want_code 304 || fail "If-Modified-Since its Last-Modified"
	hcurl -H "If-Modified-Since: Sat, 01 Jan 2000 00:00:00 GMT" "$OPEN_URL/$B/c"
	want_code 200 || fail "If-Modified-Since 2000"
	hcurl -H "If-Unmodified-Since: Sat, 01 Jan 2000 00:00:00 GMT" "$OPEN_URL/$B/c"
	want_code 412 || fail "If-Unmodified-Since 2000"
	hcurl -H "If-Unmodified-Since: $lm" "$OPEN_URL/$B/c"
	want_code 200 || fail "If-Unmodified-Since its Last-Modified"
	hcurl -I -H 'If-Match: "00000000000000000000000000000000"' "$OPEN_URL/$B/c"
	want_code 412 || fail "HEAD If-Match a wrong ETag"
	hcurl -I -H "If-None-Match: $etag" "$OPEN_URL/$B/c"
	want_code 304 || fail "HEAD If-None-Match the ETag"
	hcurl -H "If-Match: $etag" -H "Range: bytes=2-4" "$OPEN_URL/$B/c"
	want_code 206 || fail "If-Match the ETag with a Range"
	[ "$(cat "$D/body")" = ndi ] || fail "range: $(cat "$D/body")"
}

@test "plain requests (open server): S3 XML errors, Content-MD5, Content-Type and x-amz-meta-* kept, ListBuckets, HeadBucket, location, DeleteObject 204, DeleteBucket 409" {
	hcurl -X PUT "$OPEN_URL/$B"
	want_code 200
	hcurl "$OPEN_URL/$B/nope"
	want_code 404
	want_error NoSuchKey
	hcurl "$OPEN_URL/no-such-$B/k"
	want_code 404
	want_error NoSuchBucket
	hcurl -I "$OPEN_URL/$B/nope"
	want_code 404
	hcurl -I "$OPEN_URL/$B"
	want_code 200 || fail "HeadBucket"
	hcurl -I "$OPEN_URL/no-such-$B"
	want_code 404 || fail "HeadBucket of a missing bucket"
	hcurl "$OPEN_URL/$B?location"
	want_code 200 || fail "GetBucketLocation"
	grep -q '<LocationConstraint' "$D/body" || fail "GetBucketLocation: $(cat "$D/body")"
	hcurl "$OPEN_URL/"
	want_code 200 || fail "ListBuckets"
	grep -q "<Name>$B</Name>" "$D/body" || fail "ListBuckets: $(cat "$D/body")"
	printf 'metadata\n' >"$D/o"
	hcurl -X PUT -H 'Content-Type: text/x-curl' -H 'x-amz-meta-color: blue' -H 'x-amz-meta-Shape: round' \
		-H "Content-MD5: $(openssl md5 -binary <"$D/o" | base64)" --data-binary @"$D/o" "$OPEN_URL/$B/m"
	want_code 200
	hcurl "$OPEN_URL/$B/m"
	want_code 200
	[ "$(hdr Content-Type)" = text/x-curl ] || fail "Content-Type '$(hdr Content-Type)'"
	[ "$(hdr x-amz-meta-color)" = blue ] || fail "x-amz-meta-color '$(hdr x-amz-meta-color)'"
	[ "$(hdr x-amz-meta-shape)" = round ] || fail "x-amz-meta-shape '$(hdr x-amz-meta-shape)'"
	hcurl -I "$OPEN_URL/$B/m"
	want_code 200
	[ "$(hdr x-amz-meta-color)" = blue ] || fail "HEAD: x-amz-meta-color '$(hdr x-amz-meta-color)'"
	[ "$(hdr Content-Length)" = 9 ] || fail "HEAD: Content-Length '$(hdr Content-Length)'"
	hcurl -X PUT -H "Content-MD5: $(printf x | openssl md5 -binary | base64)" --data-binary @"$D/o" "$OPEN_URL/$B/bad"
	want_code 400
	want_error BadDigest
	[ -z "$(find "$OPEN_DIR/$B" -name '*bad*')" ] || fail "left: $(find "$OPEN_DIR/$B")"
	hcurl -X PUT -H "Content-MD5: not-base64!" --data-binary @"$D/o" "$OPEN_URL/$B/bad2"
	want_code 400
	[ ! -e "$OPEN_DIR/$B/bad2" ] || fail "an invalid Content-MD5 wrote"
	hcurl -X DELETE "$OPEN_URL/$B/never-was"
	want_code 204
	hcurl -X DELETE "$OPEN_URL/$B"
	want_code 409
	want_error BucketNotEmpty
	hcurl -X DELETE "$OPEN_URL/$B/m"
	want_code 204
	[ ! -e "$OPEN_DIR/$B/m" ] || fail "DELETE left the file"
	hcurl -X DELETE "$OPEN_URL/$B"
	want_code 204
	[ ! -e "$OPEN_DIR/$B" ] || fail "DeleteBucket left the directory"
}

@test "x-amz-checksum-* (open server): CRC32, CRC32C, CRC64NVME, SHA1 and SHA256 checked and echoed; a wrong one BadDigest, two or an unknown one InvalidRequest; nothing lands" {
	hcurl -X PUT "$OPEN_URL/$B"
	want_code 200
	printf 123456789 >"$D/o"
	# The CRC catalogue's check values of "123456789", big-endian, base64.
	for pair in crc32=y/Q5Jg== crc32c=4waSgw== crc64nvme=rosUhgp5mIg= \
		sha1="$(openssl sha1 -binary <"$D/o" | base64)" \
		sha256="$(openssl sha256 -binary <"$D/o" | base64)"; do
		alg=${pair%%=*} v=${pair#*=}
		hcurl -X PUT -H "x-amz-checksum-$alg: $v" --data-binary @"$D/o" "$OPEN_URL/$B/ok-$alg"
		want_code 200 || fail "$alg"
		[ "$(hdr "x-amz-checksum-$alg")" = "$v" ] || fail "$alg not echoed: $(cat "$D/hdr")"
		assert_same "$D/o" "$OPEN_DIR/$B/ok-$alg"
		# The same value for other bytes.
		hcurl -X PUT -H "X-Amz-Checksum-${alg^^}: $v" --data-binary 12345678 "$OPEN_URL/$B/bad-$alg"
		want_code 400
		want_error BadDigest
		grep -q "The ${alg^^} you specified did not match" "$D/body" || fail "$alg: $(cat "$D/body")"
	done
	# A part of a multipart upload is checked too.
	hcurl -X POST "$OPEN_URL/$B/mp?uploads"
	want_code 200
	id=$(sed -n 's:.*<UploadId>\([^<]*\)</UploadId>.*:\1:p' "$D/body")
	[ -n "$id" ] || fail "no UploadId: $(cat "$D/body")"
	hcurl -X PUT -H 'x-amz-checksum-crc32: AAAAAA==' --data-binary @"$D/o" "$OPEN_URL/$B/mp?partNumber=1&uploadId=$id"
	want_code 400
	want_error BadDigest
	hcurl -X PUT -H 'x-amz-checksum-crc32: y/Q5Jg==' --data-binary @"$D/o" "$OPEN_URL/$B/mp?partNumber=1&uploadId=$id"
	want_code 200
	[ "$(hdr x-amz-checksum-crc32)" = y/Q5Jg== ] || fail "part: $(cat "$D/hdr")"
	# Complete with a whole-object checksum, of an upload begun without
	# x-amz-checksum-algorithm: no part checksums to check it against,
	# refused.
	etag=$(hdr ETag)
	printf '<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>%s</ETag></Part></CompleteMultipartUpload>' "$etag" >"$D/c.xml"
	hcurl -X POST -H 'x-amz-checksum-crc32: y/Q5Jg==' --data-binary @"$D/c.xml" "$OPEN_URL/$B/mp?uploadId=$id"
	want_code 501
	want_error NotImplemented
	hcurl -X DELETE "$OPEN_URL/$B/mp?uploadId=$id"
	want_code 204
	# DeleteObjects: the checksum is the body's.
	printf '<Delete><Object><Key>ok-crc32</Key></Object></Delete>' >"$D/d.xml"
	hcurl -X POST -H "Content-MD5: $(openssl md5 -binary <"$D/d.xml" | base64)" -H 'x-amz-checksum-crc32: AAAAAA==' \
		--data-binary @"$D/d.xml" "$OPEN_URL/$B?delete"
	want_code 400
	want_error BadDigest
	[ -e "$OPEN_DIR/$B/ok-crc32" ] || fail "a delete with a wrong checksum deleted"
	# Two digests, one S3 does not know, and a value that is no digest.
	hcurl -X PUT -H 'x-amz-checksum-crc32: y/Q5Jg==' -H 'x-amz-checksum-crc32c: 4waSgw==' \
		--data-binary @"$D/o" "$OPEN_URL/$B/two"
	want_code 400
	want_error InvalidRequest
	hcurl -X PUT -H 'x-amz-checksum-md5: AAAAAA==' --data-binary @"$D/o" "$OPEN_URL/$B/md5"
	want_code 400
	want_error InvalidRequest
	hcurl -X PUT -H 'x-amz-checksum-crc32: y/Q5' --data-binary @"$D/o" "$OPEN_URL/$B/short"
	want_code 400
	want_error BadDigest
	[ -z "$(find "$OPEN_DIR/$B" -name 'bad-*' -o -name two -o -name md5 -o -name short -o -name '*.rds3*' -o -name 'mp')" ] ||
		fail "left: $(find "$OPEN_DIR/$B")"
}

@test "S3 over RDMA where there is no RDMA: a token is declined 501; --rdma exits 3 on both sides; auto and off go over HTTP" {
	local tok=0000000000001000:00001000:00000007:0000:000011:0:00000000000000000000000000000000
	o=(--no-sign-request --endpoint "$OPEN_URL")
	rds3 "${o[@]}" mb "s3://$B"
	assert_status 0
	# A server without --rdma refuses a token as NooBaa does, and writes
	# nothing (a server that took the empty body would store it).
	hcurl -X PUT -H 'Content-Length: 0' -H "x-amz-rdma-token: $tok" \
		-H 'x-amz-decoded-content-length: 4096' "$OPEN_URL/$B/tok"
	want_code 501
	[ "$(body_code)" = S3RdmaNotSupported ] || fail "$(cat "$D/body")"
	[ ! -e "$OPEN_DIR/$B/tok" ] || fail "the declined PUT wrote an object"
	hcurl -H "x-amz-rdma-token: $tok" "$OPEN_URL/$B/tok"
	want_code 501
	# Usage.
	rds3 --rdma=yes ls
	assert_status 2
	assert_match "$stderr" "invalid value 'yes' for --rdma"
	RDS3_RDMA=maybe rds3 "${o[@]}" get "s3://$B/x" "$D/x"
	assert_status 2
	assert_match "$stderr" "invalid RDS3_RDMA 'maybe'"
	rds3 --rdma-connections 4 ls
	assert_status 2
	mkrand "$D/f" 70000
	mkdir -p "$D/rstore"
	if [ -z "$(ls /sys/class/infiniband 2>/dev/null)" ]; then
		# No device on this host: on is an error, on both sides, in one line.
		run_t "$RDS3" --rdma serve "$D/rstore"
		assert_status 3
		assert_match "$stderr" '^rds3: --rdma: no RDMA device'
		[ "$(grep -c '' <<<"$stderr")" -eq 1 ] || fail "more than one line: $stderr"
		rds3 "${o[@]}" --rdma put "$D/f" "s3://$B/on"
		assert_status 3
		assert_match "$stderr" '^rds3: put .*--rdma on: no RDMA device'
		[ "$(grep -c '' <<<"$stderr")" -eq 1 ] || fail "more than one line: $stderr"
		# auto: a server without RDMA serves HTTP, says why with -v.
		serve_bg auto "$D/rstore" --rdma=auto
		grep -q 'not serving S3 over RDMA: no RDMA device' "$D/auto.err" || fail "$(cat "$D/auto.err")"
	fi
	# auto (the default) and off: over HTTP, silently.
	for m in auto off; do
		rds3 "${o[@]}" -v --rdma="$m" put "$D/f" "s3://$B/$m"
		assert_status 0
		! grep -q 'by RDMA' <<<"$stderr" || fail "$m: $stderr"
		rds3 "${o[@]}" --rdma="$m" get "s3://$B/$m" "$D/$m.back"
		assert_status 0
		assert_same "$D/f" "$D/$m.back"
	done
}

@test "response-* overrides (open server): refused on an anonymous GET as S3 refuses them, applied on a signed one" {
	hcurl -X PUT "$OPEN_URL/$B"
	want_code 200
	hcurl -X PUT -H 'Content-Type: text/plain' --data-binary x "$OPEN_URL/$B/k"
	want_code 200
	hcurl "$OPEN_URL/$B/k?response-content-type=text%2Fhtml"
	want_code 400 && want_error InvalidRequest
	# This server checks no signature: one that carries one is not
	# anonymous, as S3 tells them apart.
	hcurl -H 'Authorization: AWS4-HMAC-SHA256 Credential=x/20260101/us-east-1/s3/aws4_request' \
		"$OPEN_URL/$B/k?response-content-type=text%2Fhtml"
	want_code 200
	grep -qi '^Content-Type: text/html' "$D/hdr" || fail "headers: $(cat "$D/hdr")"
	hcurl "$OPEN_URL/$B/k"
	want_code 200
	grep -qi '^Content-Type: text/plain' "$D/hdr" || fail "headers: $(cat "$D/hdr")"
}

@test "serve --users: a file of KEY SECRET lines serves each key; a malformed file, a key twice, a file others may read: refused at the start, the line named, no secret said" {
	local f=$D/users out
	mkdir -p "$D/ustore"
	# users: the file's text; then serve must refuse it (exit 2) saying $2.
	refused() {
		rm -f "$f"
		(umask 077 && printf "$1" >"$f")
		run_t env -u AWS_ACCESS_KEY_ID -u AWS_SECRET_ACCESS_KEY "$RDS3" --users "$f" serve "$D/ustore"
		assert_status 2
		assert_match "$stderr" "^rds3: --users '.*': $2"
		! grep -q SECRETX <<<"$stderr" || fail "a secret in: $stderr"
	}
	refused 'AK1 SECRETX1\nAK2\n' 'line 2: expected ACCESS_KEY SECRET'
	refused 'AK1 SECRETX1\nAK1 SECRETX2\n' "the access key 'AK1' is given twice"
	refused '[a]\naws_access_key_id = AK1\n' 'line 1: the profile .a. has aws_access_key_id but no aws_secret_access_key'
	refused '# nobody\n' 'no users in it'
	printf 'AK1 SECRETX1\n' >"$f"
	chmod 644 "$f"
	run_t "$RDS3" --users "$f" serve "$D/ustore"
	assert_status 2
	assert_match "$stderr" 'group or others may use it \(mode 0644\): chmod 600 it'
	run_t "$RDS3" --users "$D/none" serve "$D/ustore"
	assert_status 4
	run_t "$RDS3" --users "$f" --no-sign-request serve "$D/ustore"
	assert_status 2
	run_t "$RDS3" --users "$f" ls
	assert_status 2
	assert_match "$stderr" 'are for serve'
	# The plain form: two users, neither of them the environment's.
	rm -f "$f"
	(umask 077 && printf '# two\nPAIRONE\tone/Secret\n\nPAIRTWO two/Secret\n' >"$f")
	serve_bg pairs "$D/ustore" --users "$f"
	grep -q "2 users from '$f'" "$D/pairs.err" || fail "$(cat "$D/pairs.err")"
	for u in ONE:one TWO:two; do
		out=$(env AWS_ACCESS_KEY_ID="PAIR${u%%:*}" AWS_SECRET_ACCESS_KEY="${u#*:}/Secret" \
			"$RDS3" --endpoint "$SRV_URL" mb "s3://pair-${u#*:}" 2>&1) || fail "mb as $u: $out"
	done
	out=$(env AWS_ACCESS_KEY_ID=PAIRTWO AWS_SECRET_ACCESS_KEY=two/Secret "$RDS3" --endpoint "$SRV_URL" ls 2>&1)
	[ "$(grep -c '' <<<"$out")" -eq 1 ] && grep -q ' pair-two$' <<<"$out" ||
		fail "the second user's buckets: $out"
	run_t env AWS_ACCESS_KEY_ID=PAIRTWO AWS_SECRET_ACCESS_KEY=two/Secret "$RDS3" --endpoint "$SRV_URL" ls s3://pair-one
	assert_status 3
	assert_match "$stderr" 'AccessDenied'
	run_t env AWS_ACCESS_KEY_ID="$SERVE_KEY" AWS_SECRET_ACCESS_KEY="$SERVE_SECRET" "$RDS3" --endpoint "$SRV_URL" ls
	assert_status 3
	assert_match "$stderr" 'InvalidAccessKeyId'
	# One key again (this file's server): an owner record left from serving
	# several users is no key, and does not keep its bucket from going.
	echo PAIRTWO >"$SERVE_DIR/$B/.rds3-owner"
	rds3 ls "s3://$B"
	assert_status 0
	[ -z "$output" ] || fail "listed: $output"
	rds3 rb "s3://$B"
	assert_status 0
	[ ! -e "$SERVE_DIR/$B" ] || fail "the bucket is still there"
}
