#!/usr/bin/env bats
# rds3 serve against boto3 (Debian's python3-boto3): each test runs one
# script of tests/s3/boto, whose cases each get a fresh bucket and report
# every failed check (tests/s3/boto/s3t.py).  One signed server per file,
# with three users (--users): the scripts sign as the first, users.py as
# all three.  After every test the server must still run and no temporary
# may be left in its store.

load ../lib/common
load ../lib/s3
load ../lib/s3serve

SERVE_KEY=RDS3BOTOKEY
SERVE_SECRET='boto/Secret+1'
# Debian's Python and boto3 (scripts/deps.sh), not whatever python3 is first
# on PATH: the client's version decides what it sends.
PY=${RDX_PYTHON:-/usr/bin/python3}

setup_file() {
	local t=$BATS_FILE_TMPDIR
	export S3_KEY2=RDS3BOTOTWO S3_SECRET2='two/Secret+2' S3_KEY3=RDS3BOTOTHREE S3_SECRET3='three/Secret+3'
	# An AWS credentials file; the first profile is the scripts' user.
	(umask 077 && printf '[boto]\naws_access_key_id = %s\naws_secret_access_key = %s\n[two]\naws_access_key_id = %s\naws_secret_access_key = %s\nregion = us-east-1\n[profile three]\naws_access_key_id = %s\naws_secret_access_key = %s\n' \
		"$SERVE_KEY" "$SERVE_SECRET" "$S3_KEY2" "$S3_SECRET2" "$S3_KEY3" "$S3_SECRET3" >"$t/users")
	serve_signed_file --users "$t/users"
}

teardown_file() {
	serve_stop signed
}

setup() {
	common_setup
	[ -x "$RDS3" ] || fail "rds3 not built: $RDS3"
	serve_log_mark
}

teardown() {
	local bad= left
	alive "$SERVE_PID" || { echo "rds3 serve is gone" >&2 && bad=1; }
	left=$(find "$SERVE_DIR" -name '.*.rdx-*' 2>/dev/null)
	[ -z "$left" ] || { echo "temporaries left in the store: $left" >&2 && bad=1; }
	if [ -n "$bad" ] || [ -z "${BATS_TEST_COMPLETED:-}" ]; then
		serve_log_since
	fi
	common_teardown
	[ -z "$bad" ]
}

# boto SCRIPT [CASE...]: runs tests/s3/boto/SCRIPT.py against the server.
boto() {
	local script=$1
	shift
	run_t --secs 120 env -u AWS_PROFILE -u AWS_CONFIG_FILE -u AWS_SHARED_CREDENTIALS_FILE \
		HOME="$D" AWS_EC2_METADATA_DISABLED=true PYTHONPATH="$RDX_REPO/tests/s3/boto" \
		S3_URL="$SERVE_URL" S3_KEY="$SERVE_KEY" S3_SECRET="$SERVE_SECRET" \
		"$PY" "$RDX_REPO/tests/s3/boto/$script.py" "$@"
	[ "$status" -eq 0 ] || fail "tests/s3/boto/$script.py: exit $status
${stderr:-$output}"
}

@test "boto3: put, get, head, a wrong secret (the harness itself)" {
	boto basics
}

@test "boto3: encryption, object lock, ACLs, storage classes, versioning and unknown sub-resources are refused (501), nothing stored; listings and errors as S3" {
	boto refuse
}

@test "boto3: ListMultipartUploads and ListParts in pages (max-uploads, key-marker, upload-id-marker, max-parts, part-number-marker), under a prefix, rolled up at a delimiter" {
	boto uploads
}

@test "boto3: conditional writes (If-None-Match: *, If-Match, racing writers), copy-source conditions, a repeated Complete, UploadPartCopy ranges" {
	boto cond
}

@test "boto3: object tags (x-amz-tagging, ?tagging, x-amz-tagging-count) and S3's limits" {
	boto tagging
}

@test "boto3: GetObject's response-* overrides" {
	boto overrides
}

@test "boto3: folder markers (keys ending in /): put, get, list, delete, conflicts, copies" {
	boto dirs
}

# ------------------------------------------------ aws-chunked (issue 24)

@test "aws-chunked by hand: signed chunks in their chain, signed and unsigned trailers of every checksum, in HTTP chunked, UploadPart; a bad signature, byte, length, trailer or framing stores nothing" {
	boto chunked signed_chain signed_trailer unsigned_trailers refusals upload_part
}

# tls_proxy: socat with a throwaway certificate in front of the server
# (boto3 and the aws CLI send aws-chunked over https only), its -v
# transcript of what crossed in $D/tls.log; sets TLS_URL.
tls_proxy() {
	local p
	openssl req -x509 -newkey rsa:2048 -nodes -keyout "$D/tls.key" -out "$D/tls.crt" \
		-days 1 -subj /CN=127.0.0.1 2>/dev/null || fail "openssl could not make a certificate"
	cat "$D/tls.key" "$D/tls.crt" >"$D/tls.pem"
	p=$(free_port)
	bg_start tls socat -v "OPENSSL-LISTEN:$p,bind=127.0.0.1,reuseaddr,fork,cert=$D/tls.pem,verify=0" \
		"TCP:${SERVE_URL#http://}"
	LISTEN_PID=$BG_PID wait_listen "$p" || fail "socat did not listen: $(cat "$D/tls.err")"
	TLS_URL=https://127.0.0.1:$p
}

@test "AWS's clients send aws-chunked: the JavaScript SDK v3 by default (CRC32 trailer, PutObject and UploadPart), boto3 and the aws CLI over TLS; all read back byte for byte" {
	bash "$RDX_REPO/tests/s3/setup.sh" >"$D/npm.log" 2>&1 || fail "tests/s3/setup.sh: $(cat "$D/npm.log")"
	run_t --secs 120 env NODE_NO_WARNINGS=1 S3_URL="$SERVE_URL" S3_KEY="$SERVE_KEY" \
		S3_SECRET="$SERVE_SECRET" node "$RDX_REPO/tests/s3/sdkjs.js"
	[ "$status" -eq 0 ] || fail "tests/s3/sdkjs.js: exit $status
${stderr:-$output}"
	tls_proxy
	# The aws CLI (Debian's) sends the checksum as a header over http,
	# as an aws-chunked trailer over https.  First through the proxy: its
	# transcript is the CLI's alone.
	head -c 300000 /dev/urandom >"$D/f"
	run_t --secs 60 env -u AWS_PROFILE -u AWS_CONFIG_FILE -u AWS_SHARED_CREDENTIALS_FILE \
		HOME="$D" AWS_EC2_METADATA_DISABLED=true AWS_DEFAULT_REGION=us-east-1 \
		AWS_ACCESS_KEY_ID="$SERVE_KEY" AWS_SECRET_ACCESS_KEY="$SERVE_SECRET" PYTHONWARNINGS=ignore \
		"$AWS" --endpoint-url "$TLS_URL" --no-verify-ssl s3api create-bucket --bucket awscli-chunked
	[ "$status" -eq 0 ] || fail "aws s3api create-bucket: $stderr"
	run_t --secs 60 env -u AWS_PROFILE -u AWS_CONFIG_FILE -u AWS_SHARED_CREDENTIALS_FILE \
		HOME="$D" AWS_EC2_METADATA_DISABLED=true AWS_DEFAULT_REGION=us-east-1 \
		AWS_ACCESS_KEY_ID="$SERVE_KEY" AWS_SECRET_ACCESS_KEY="$SERVE_SECRET" PYTHONWARNINGS=ignore \
		"$AWS" --endpoint-url "$TLS_URL" --no-verify-ssl s3api put-object --bucket awscli-chunked \
		--key f --body "$D/f" --checksum-algorithm CRC32
	[ "$status" -eq 0 ] || fail "aws s3api put-object --checksum-algorithm CRC32: $stderr"
	[ "$(jq -r .ChecksumCRC32 <<<"$output")" = "$(python3 -c 'import sys,zlib,base64;print(base64.b64encode(zlib.crc32(open(sys.argv[1],"rb").read()).to_bytes(4,"big")).decode())' "$D/f")" ] ||
		fail "aws put-object: no CRC32 echoed: $output"
	grep -aqi '^x-amz-content-sha256: STREAMING-UNSIGNED-PAYLOAD-TRAILER' "$D/tls.err" ||
		fail "the aws CLI did not send aws-chunked: $(grep -ai '^x-amz-content-sha256' "$D/tls.err")"
	cmp "$D/f" "$SERVE_DIR/awscli-chunked/f" || fail "the object stored is not the file sent"
	S3_TLS_URL=$TLS_URL boto chunked boto3_over_tls
}

@test "boto3: three users (--users): own buckets only, 403 on another's, 409 names, owners, max-buckets pages" {
	boto users
	# The secrets are in the users file only: not in the log, not on the
	# command line.
	! grep -qF -e "$SERVE_SECRET" -e "$S3_SECRET2" "$BATS_FILE_TMPDIR/signed.err" ||
		fail "a secret is in the server's log"
	! tr '\0' ' ' <"/proc/$SERVE_PID/cmdline" | grep -qF "$S3_SECRET2" || fail "a secret is on the command line"
}

@test "boto3: checksums kept (x-amz-checksum-mode), multipart COMPOSITE and FULL_OBJECT checked at Complete, copies, GetObjectAttributes paged" {
	boto checksums
}

@test "boto3: keys ending in / that carry bytes: get, head, range, listed once, copies, multipart, conditions, tags, checksums; the folder's file no key names" {
	boto slash
}

@test "boto3: a failed put takes the directories it made, an emptied bucket can be deleted; a delete that prunes a put's directory mid-write does not fail that put" {
	boto prune
}
