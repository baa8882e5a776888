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
	mkdir -p "$t/store"
	export S3_KEY2=RDS3BOTOTWO S3_SECRET2='two/Secret+2' S3_KEY3=RDS3BOTOTHREE S3_SECRET3='three/Secret+3'
	# An AWS credentials file; the first profile is the scripts' user.
	(umask 077 && printf '[boto]\naws_access_key_id = %s\naws_secret_access_key = %s\n[two]\naws_access_key_id = %s\naws_secret_access_key = %s\nregion = us-east-1\n[profile three]\naws_access_key_id = %s\naws_secret_access_key = %s\n' \
		"$SERVE_KEY" "$SERVE_SECRET" "$S3_KEY2" "$S3_SECRET2" "$S3_KEY3" "$S3_SECRET3" >"$t/users")
	serve_start signed "$t/store" --users "$t/users" || return 1
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

@test "boto3: three users (--users): own buckets only, 403 on another's, 409 names, owners, max-buckets pages" {
	boto users
	# The secrets are in the users file only: not in the log, not on the
	# command line.
	! grep -qF -e "$SERVE_SECRET" -e "$S3_SECRET2" "$BATS_FILE_TMPDIR/signed.err" ||
		fail "a secret is in the server's log"
	! tr '\0' ' ' <"/proc/$SERVE_PID/cmdline" | grep -qF "$S3_SECRET2" || fail "a secret is on the command line"
}
