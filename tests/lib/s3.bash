# What the S3 test files share: one s3rver (npm, pinned in
# tests/s3/package-lock.json) on 127.0.0.1 behind tests/s3/proxy.js, which
# verifies every signed request with AWS's own JS signer
# (@smithy/signature-v4) and can inject faults; one server pair per file
# (setup_file), a fresh bucket $B per test (setup), and a teardown that
# fails a test whose requests the proxy rejected (unless EXPECT_REJECTED).
# Load after ../lib/common.

RDS3=$RDX_BUILD/rds3
AWS=/usr/bin/aws

setup_file() {
	local dir=$BATS_FILE_TMPDIR p
	bash "$BATS_TEST_DIRNAME/../s3/setup.sh" >"$dir/setup.log" 2>&1 || {
		cat "$dir/setup.log" >&3
		return 1
	}
	p=$(free_port)
	# s3rver's ListObjectsV2 continuation token is DES, which OpenSSL 3
	# keeps in its legacy provider: without it a listing past 1000 keys
	# is a 500.
	local legacy=()
	node --openssl-legacy-provider -e '' 2>/dev/null && legacy=(--openssl-legacy-provider)
	node "${legacy[@]}" "$BATS_TEST_DIRNAME/../s3/node_modules/s3rver/bin/s3rver.js" \
		-d "$dir/data" -a 127.0.0.1 -p "$p" --silent >"$dir/s3rver.log" 2>&1 3>&- &
	echo $! >"$dir/s3rver.pid"
	export S3RVER_PORT=$p
	: >"$dir/proxy.out"
	node "$BATS_TEST_DIRNAME/../s3/proxy.js" --port 0 --upstream "$p" \
		--key S3RVER --secret S3RVER >"$dir/proxy.out" 2>"$dir/proxy.log" 3>&- &
	echo $! >"$dir/proxy.pid"
	local i
	for i in $(seq 1 100); do
		grep -q '^listening' "$dir/proxy.out" && is_listening "$p" && break
		sleep 0.1
	done
	PROXY_PORT=$(sed -n 's/^listening //p' "$dir/proxy.out")
	[ -n "$PROXY_PORT" ] || { cat "$dir/proxy.log" "$dir/s3rver.log" >&3; return 1; }
	export PROXY_PORT
}

teardown_file() {
	local f
	for f in proxy s3rver; do
		[ -f "$BATS_FILE_TMPDIR/$f.pid" ] && kill "$(cat "$BATS_FILE_TMPDIR/$f.pid")" 2>/dev/null
	done
	return 0
}

setup() {
	common_setup
	[ -x "$RDS3" ] || fail "rds3 not built: $RDS3"
	# Only what the test gives: no user's ~/.aws, no stray AWS_* variables.
	unset AWS_PROFILE AWS_REGION AWS_DEFAULT_REGION AWS_ENDPOINT_URL AWS_SESSION_TOKEN
	export HOME=$D/home AWS_SHARED_CREDENTIALS_FILE=$D/home/.aws/credentials
	export AWS_CONFIG_FILE=$D/home/.aws/config
	mkdir -p "$HOME"
	export AWS_ACCESS_KEY_ID=S3RVER AWS_SECRET_ACCESS_KEY=S3RVER
	export AWS_ENDPOINT_URL_S3=http://127.0.0.1:$PROXY_PORT
	B=t$BATS_TEST_NUMBER-$RANDOM
	xrun "$RDS3" mb "s3://$B" || fail "cannot make bucket $B"
	stats0=$(proxy_stats)
}

teardown() {
	# Every signed request of a passing test was verified by the proxy.
	if [ -n "${BATS_TEST_COMPLETED:-}" ] && [ -z "${EXPECT_REJECTED:-}" ]; then
		local now
		now=$(proxy_stats)
		[ "$(jq .rejected <<<"$now")" = "$(jq .rejected <<<"$stats0")" ] ||
			{ echo "the proxy rejected requests:" >&2; tail -n 20 "$BATS_FILE_TMPDIR/proxy.log" >&2; return 1; }
	fi
	common_teardown
}

proxy_stats() {
	curl -sf "http://127.0.0.1:$PROXY_PORT/__proxy/stats"
}

proxy_fault() { # proxy_fault STATUS COUNT [CODE [OP [SKIP]]]
	curl -sf -X POST "http://127.0.0.1:$PROXY_PORT/__proxy/fault?status=$1&count=$2&code=${3:-ServiceUnavailable}&op=${4:-}&skip=${5:-0}" >/dev/null
}

# stat_delta FIELD: how much the proxy's counter FIELD grew in this test.
stat_delta() {
	echo $(($(proxy_stats | jq ".$1") - $(jq ".$1" <<<"$stats0")))
}

rds3() {
	run_t "$RDS3" "$@"
}

# jq_any FILTER [ARGS...] <JSONL: some line satisfies FILTER (jq 1.6's -e
# looks only at the last input).
jq_any() {
	local f=$1
	shift
	jq -e -s "$@" "any(.[]; $f)" >/dev/null
}

# mp_etag FILE PART_BYTES: S3's ETag for FILE uploaded in parts of
# PART_BYTES: the MD5 of the parts' MD5s, then -N.
mp_etag() {
	local size off=0 n=0 hex=""
	size=$(stat -c %s "$1")
	while [ "$off" -lt "$size" ]; do
		hex+=$(dd if="$1" bs=1M iflag=skip_bytes,count_bytes skip="$off" count="$2" status=none |
			md5sum | cut -c1-32)
		off=$((off + $2))
		n=$((n + 1))
	done
	printf '"%s-%d"' "$(perl -e 'print pack("H*", $ARGV[0])' "$hex" | md5sum | cut -c1-32)" "$n"
}
