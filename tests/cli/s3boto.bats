#!/usr/bin/env bats
# rds3 serve against boto3 (Debian's python3-boto3): each test runs one
# script of tests/s3/boto, whose cases each get a fresh bucket and report
# every failed check (tests/s3/boto/s3t.py).  One signed server per file.
# After every test the server must still run and no temporary may be left
# in its store.

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
	mkdir -p "$t/store"
	serve_start signed "$t/store" || return 1
	export SERVE_URL=$SERVED_URL SERVE_DIR=$t/store SERVE_PID
	SERVE_PID=$(cat "$t/signed.pid")
}

teardown_file() {
	serve_stop signed
}

setup() {
	common_setup
	[ -x "$RDS3" ] || fail "rds3 not built: $RDS3"
	LOG0=$(grep -c '' "$BATS_FILE_TMPDIR/signed.err")
}

teardown() {
	local bad= left
	alive "$SERVE_PID" || { echo "rds3 serve is gone" >&2 && bad=1; }
	left=$(find "$SERVE_DIR" -name '.*.rdx-*' 2>/dev/null)
	[ -z "$left" ] || { echo "temporaries left in the store: $left" >&2 && bad=1; }
	if [ -n "$bad" ] || [ -z "${BATS_TEST_COMPLETED:-}" ]; then
		echo "--- rds3 serve stderr during this test (last 40 lines):" >&2
		tail -n +$((LOG0 + 1)) "$BATS_FILE_TMPDIR/signed.err" | tail -n 40 >&2
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
