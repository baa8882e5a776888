# Starting `rds3 serve` for a test file (tests/cli/s3serve.bats,
# tests/cli/s3boto.bats): serve_start NAME DIR [RDS3 OPTIONS...] runs it in
# the background on DIR with $SERVE_KEY/$SERVE_SECRET, stdout in
# $BATS_FILE_TMPDIR/NAME.out, stderr (its -v log) in NAME.err, its pid in
# NAME.pid, and waits for its one "http://127.0.0.1:PORT" line, which it
# puts in $SERVED_URL.  serve_stop NAME kills it.
# shellcheck disable=SC2034 # SERVED_URL is the caller's

# serve_env: the environment a server starts with: our keys, no user's
# ~/.aws, no stray AWS_* variables (a command prefix for env(1)).
serve_env() {
	echo -u AWS_PROFILE -u AWS_REGION -u AWS_DEFAULT_REGION -u AWS_SESSION_TOKEN \
		-u AWS_ENDPOINT_URL -u AWS_ENDPOINT_URL_S3
}

# url_line FILE: FILE holds a whole first line starting http://.
url_line() {
	grep -q '^http://' "$1" 2>/dev/null && [ -z "$(tail -c1 "$1")" ]
}

serve_start() {
	local name=$1 dir=$2 t=$BATS_FILE_TMPDIR i
	shift 2
	mkdir -p "$t/home"
	# shellcheck disable=SC2046 # serve_env is a list of options
	env $(serve_env) --default-signal=INT,TERM,PIPE HOME="$t/home" \
		AWS_CONFIG_FILE="$t/home/.aws/config" AWS_SHARED_CREDENTIALS_FILE="$t/home/.aws/credentials" \
		AWS_ACCESS_KEY_ID="$SERVE_KEY" AWS_SECRET_ACCESS_KEY="$SERVE_SECRET" \
		"$RDS3" -v "$@" serve "$dir" </dev/null >"$t/$name.out" 2>"$t/$name.err" 3>&- &
	echo $! >"$t/$name.pid"
	for i in $(seq 1 200); do
		url_line "$t/$name.out" && break
		kill -0 "$(cat "$t/$name.pid")" 2>/dev/null || break
		sleep 0.05
	done
	if ! url_line "$t/$name.out" || [ "$(grep -c '' "$t/$name.out")" -ne 1 ] ||
		! grep -qE '^http://127\.0\.0\.1:[0-9]+$' "$t/$name.out"; then
		{
			echo "rds3 serve ($name) did not print one URL line; stdout:"
			cat "$t/$name.out"
			echo "stderr:"
			cat "$t/$name.err"
		} >&3
		return 1
	fi
	SERVED_URL=$(cat "$t/$name.out")
}

# serve_signed_file [RDS3 OPTIONS...]: setup_file's one signed server on
# $BATS_FILE_TMPDIR/store: exports SERVE_URL, SERVE_DIR and SERVE_PID.
serve_signed_file() {
	mkdir -p "$BATS_FILE_TMPDIR/store"
	serve_start signed "$BATS_FILE_TMPDIR/store" "$@" || return 1
	export SERVE_URL=$SERVED_URL SERVE_DIR=$BATS_FILE_TMPDIR/store SERVE_PID
	SERVE_PID=$(cat "$BATS_FILE_TMPDIR/signed.pid")
}

# serve_log_mark / serve_log_since: the signed server's stderr from the
# mark on (the last 40 lines), for a failing test's teardown.
serve_log_mark() {
	LOG0=$(grep -c '' "$BATS_FILE_TMPDIR/signed.err")
}

serve_log_since() {
	echo "--- rds3 serve stderr during this test (last 40 lines):" >&2
	tail -n +$((LOG0 + 1)) "$BATS_FILE_TMPDIR/signed.err" | tail -n 40 >&2
}

serve_stop() {
	[ -f "$BATS_FILE_TMPDIR/$1.pid" ] && kill "$(cat "$BATS_FILE_TMPDIR/$1.pid")" 2>/dev/null
	return 0
}
