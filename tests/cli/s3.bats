#!/usr/bin/env bats
# rds3 against a real third-party S3 server: s3rver (npm, pinned in
# tests/s3/package-lock.json) on 127.0.0.1, behind tests/s3/proxy.js, which
# verifies every signed request with AWS's own JS signer
# (@smithy/signature-v4) and can inject faults.  The Debian awscli client
# cross-checks what rds3 writes.  One server pair serves the whole file.

load ../lib/common
load ../lib/s3

# open_uploads N: aws's ListMultipartUploads of the bucket lists N uploads
# (aws prints nothing at all for an empty listing).
open_uploads() {
	run_t "$AWS" --endpoint-url "http://127.0.0.1:$PROXY_PORT" --region us-east-1 \
		s3api list-multipart-uploads --bucket "$B"
	assert_status 0
	[ -n "$output" ] || output='{}'
	[ "$(jq '.Uploads // [] | length' <<<"$output")" -eq "$1" ] ||
		fail "expected $1 open uploads: $output"
}

# ------------------------------------------------------------------ data

@test "put and get: 0 bytes, 1 byte, 3 MiB, byte-identical, every request verified" {
	for size in 0 1 3M; do
		mkrand "$D/src.$size" "$size"
		rds3 put "$D/src.$size" "s3://$B/obj.$size"
		assert_status 0
		[ -z "$output" ] || fail "put wrote to stdout: $output"
		rds3 get "s3://$B/obj.$size" "$D/dst.$size"
		assert_status 0
		assert_same "$D/src.$size" "$D/dst.$size"
		assert_no_temp "$D/dst.$size"
	done
	[ "$(jq .verified <<<"$(proxy_stats)")" -gt "$(jq .verified <<<"$stats0")" ]
}

@test "get into a name of 255 bytes (NAME_MAX), new and over an old file" {
	local long
	long=$D/$(printf 'g%.0s' $(seq 255))
	mkrand "$D/src" 100000
	rds3 put "$D/src" "s3://$B/long"
	assert_status 0
	rds3 get "s3://$B/long" "$long"
	assert_status 0
	assert_same "$D/src" "$long"
	echo old >"$long"
	rds3 get "s3://$B/long" "$long"
	assert_status 0
	assert_same "$D/src" "$long"
	[ -z "$(find "$D" -maxdepth 1 -name '.ggg*')" ] || fail "left: $(ls -A "$D")"
}

@test "put from stdin (unknown length), cat to stdout" {
	mkrand "$D/src" 1234567
	run_t bash -c 'cat "$1" | "$2" put - "$3"' _ "$D/src" "$RDS3" "s3://$B/from-stdin"
	assert_status 0
	run_t bash -c '"$1" cat "$2" >"$3"' _ "$RDS3" "s3://$B/from-stdin" "$D/out"
	assert_status 0
	assert_same "$D/src" "$D/out"
	: | xrun "$RDS3" put - "s3://$B/empty-stdin"
	rds3 stat "s3://$B/empty-stdin"
	assert_status 0
	assert_match "$output" '^size: 0$'
}

@test "keys with spaces, unicode, +, %, =, ~, () and runs of / round-trip" {
	mkrand "$D/src" 1000
	keys=("a b/c d" "ünï/cödé ✓" "plus+and=eq" "pct%41%2F%" "tilde~(paren)!*'"
		"q?x#y&z" "sp  ace " "semi;colon,comma@at\$dollar")
	for k in "${keys[@]}"; do
		rds3 put "$D/src" "s3://$B/$k"
		assert_status 0
	done
	for k in "${keys[@]}"; do
		rm -f "$D/out"
		rds3 get "s3://$B/$k" "$D/out"
		assert_status 0
		assert_same "$D/src" "$D/out"
	done
	rds3 ls --recursive --json "s3://$B"
	assert_status 0
	for k in "${keys[@]}"; do
		jq_any '.key == $k and .size == 1000' --arg k "$k" <<<"$output" ||
			fail "ls --json lacks key '$k': $output"
	done
	[ "$(grep -c '' <<<"$output")" -eq "${#keys[@]}" ]
}

@test "runs of / and a leading / are signed as S3 keeps them (verified by the proxy)" {
	mkrand "$D/src" 100
	for k in "a//b///c" "/lead" "x/./y/../z"; do
		# s3rver stores keys as paths and cannot keep every such key;
		# what matters here is that the signature matches the URL sent.
		run_t "$RDS3" put "$D/src" "s3://$B/$k"
		enc=$(jq -rn --arg k "$k" '$k | @uri | gsub("%2F"; "/")')
		grep -qF "PUT /$B/$enc -> verified" "$BATS_FILE_TMPDIR/proxy.log" ||
			fail "PUT of '$k' was not verified: $(tail -n 3 "$BATS_FILE_TMPDIR/proxy.log")"
	done
}

@test "put to a key ending in / takes the file's name; get to a directory too" {
	mkrand "$D/file.bin" 100
	rds3 put "$D/file.bin" "s3://$B/dir/"
	assert_status 0
	mkdir "$D/into"
	rds3 get "s3://$B/dir/file.bin" "$D/into"
	assert_status 0
	assert_same "$D/file.bin" "$D/into/file.bin"
	(cd "$D/into" && rm file.bin && xrun "$RDS3" get "s3://$B/dir/file.bin") || fail "get without FILE"
	assert_same "$D/file.bin" "$D/into/file.bin"
}

# --------------------------------------------------------------- listing

@test "ls: buckets, prefixes and keys, --recursive, --json" {
	mkrand "$D/f" 10
	for k in top d1/x d1/y d1/sub/z d2/w; do
		xrun "$RDS3" put "$D/f" "s3://$B/$k" || fail "put $k"
	done
	rds3 ls
	assert_status 0
	assert_match "$output" "^[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9:]{8} $B$"
	rds3 ls --json
	jq_any '.bucket == $b' --arg b "$B" <<<"$output" || fail "ls --json: $output"
	rds3 ls "s3://$B"
	assert_status 0
	assert_match "$output" "^ +PRE d1/$"
	assert_match "$output" "^ +PRE d2/$"
	assert_match "$output" "^[0-9-]{10} [0-9:]{8} +10 top$"
	[ "$(grep -c '' <<<"$output")" -eq 3 ]
	rds3 ls "s3://$B/d1/"
	assert_match "$output" "^ +PRE d1/sub/$"
	assert_match "$output" " 10 d1/x$"
	[ "$(grep -c '' <<<"$output")" -eq 3 ]
	rds3 ls -r "s3://$B/d1"
	[ "$(grep -c '' <<<"$output")" -eq 3 ]
	rds3 ls -r --json "s3://$B"
	assert_status 0
	[ "$(jq -s 'length' <<<"$output")" -eq 5 ]
	jq_any '.key == "d1/sub/z" and .size == 10 and (.etag | test("^\"[0-9a-f]{32}\"$"))' <<<"$output" ||
		fail "ls --json: $output"
	rds3 ls --json "s3://$B"
	jq_any '.prefix == "d2/"' <<<"$output" || fail "no prefix d2/: $output"
}

@test "stat and head: size, ETag, date; --json" {
	printf 'hello\n' >"$D/f"
	xrun "$RDS3" put "$D/f" "s3://$B/k"
	rds3 stat "s3://$B/k"
	assert_status 0
	assert_match "$output" '^size: 6$'
	assert_match "$output" '^etag: "b1946ac92492d2347c6235b4d2611184"$'
	rds3 head --json "s3://$B/k"
	assert_status 0
	[ "$(jq -r .size <<<"$output")" = 6 ]
	[ "$(jq -r .url <<<"$output")" = "s3://$B/k" ]
}

@test "rm: one, several, --recursive; then the keys are gone" {
	mkrand "$D/f" 10
	for k in a b c p/1 p/2 p/q/3 keep; do
		xrun "$RDS3" put "$D/f" "s3://$B/$k"
	done
	rds3 rm "s3://$B/a"
	assert_status 0
	rds3 rm "s3://$B/b" "s3://$B/c"
	assert_status 0
	rds3 rm --recursive "s3://$B/p/"
	assert_status 0
	rds3 ls -r "s3://$B"
	[ "$output" != "${output/keep/}" ] || fail "keep went too: $output"
	[ "$(grep -c '' <<<"$output")" -eq 1 ] || fail "left: $output"
	rds3 get "s3://$B/a" "$D/out"
	assert_status 5
	assert_one_line_error "$stderr" rds3
	assert_match "$stderr" "^rds3: get s3://$B/a: NoSuchKey: "
	assert_no_output_file "$D/out"
}

@test "mb, rb: a new bucket is listed; a non-empty one is not removed" {
	rds3 mb "s3://$B-new"
	assert_status 0
	rds3 ls
	assert_match "$output" " $B-new$"
	mkrand "$D/f" 10
	xrun "$RDS3" put "$D/f" "s3://$B-new/k"
	rds3 rb "s3://$B-new"
	assert_status 5
	assert_match "$stderr" "^rds3: rb s3://$B-new: BucketNotEmpty: "
	xrun "$RDS3" rm "s3://$B-new/k"
	rds3 rb "s3://$B-new"
	assert_status 0
	rds3 ls
	[ "$output" = "${output/ $B-new/}" ] || fail "still listed: $output"
}

# ---------------------------------------------------------------- errors

@test "missing bucket and key: one clear line, exit 5, no file written" {
	rds3 get "s3://$B/nope" "$D/out"
	assert_status 5
	assert_one_line_error "$stderr" rds3
	assert_match "$stderr" "^rds3: get s3://$B/nope: NoSuchKey: "
	assert_no_output_file "$D/out"
	rds3 get "s3://no-such-bucket-$B/k" "$D/out"
	assert_status 5
	assert_match "$stderr" "^rds3: get s3://no-such-bucket-$B/k: NoSuchBucket: "
	assert_no_output_file "$D/out"
	rds3 stat "s3://$B/nope"
	assert_status 5
	assert_one_line_error "$stderr" rds3
	assert_match "$stderr" "^rds3: stat s3://$B/nope: NotFound: "
	rds3 ls "s3://no-such-bucket-$B"
	assert_status 5
	assert_match "$stderr" "NoSuchBucket"
	mkrand "$D/f" 10
	rds3 put "$D/f" "s3://no-such-bucket-$B/k"
	assert_status 5
	assert_match "$stderr" "^rds3: put s3://no-such-bucket-$B/k: NoSuchBucket: "
}

@test "wrong secret: SignatureDoesNotMatch from the verifying proxy, exit 3" {
	EXPECT_REJECTED=1
	mkrand "$D/f" 100
	AWS_SECRET_ACCESS_KEY=not-the-secret rds3 put "$D/f" "s3://$B/k"
	assert_status 3
	assert_one_line_error "$stderr" rds3
	assert_match "$stderr" "^rds3: put s3://$B/k: SignatureDoesNotMatch: The request signature we calculated"
	AWS_SECRET_ACCESS_KEY=not-the-secret rds3 get "s3://$B/k" "$D/out"
	assert_status 3
	assert_no_output_file "$D/out"
	# Not retried: a 4xx is final.
	[ "$(jq .rejected <<<"$(proxy_stats)")" -eq $(($(jq .rejected <<<"$stats0") + 2)) ]
	# And the object was not written.
	rds3 stat "s3://$B/k"
	assert_status 5
}

@test "503 twice, then success: retried with backoff; --retries 1 gives up" {
	mkrand "$D/f" 200000
	proxy_fault 503 2 SlowDown
	rds3 -v put "$D/f" "s3://$B/k"
	assert_status 0
	[ "$(grep -c 'SlowDown.*retrying' <<<"$stderr")" -eq 2 ] || fail "stderr: $stderr"
	proxy_fault 500 2 InternalError
	rds3 get "s3://$B/k" "$D/out"
	assert_status 0
	assert_same "$D/f" "$D/out"
	proxy_fault 503 2
	rds3 --retries 1 stat "s3://$B/k"
	assert_status 5
	assert_match "$stderr" "^rds3: stat s3://$B/k: ServiceUnavailable: "
	proxy_fault 503 0
	[ "$(jq .faults <<<"$(proxy_stats)")" -eq $(($(jq .faults <<<"$stats0") + 6)) ]
}

@test "a 4xx other than throttling is not retried" {
	proxy_fault 400 1 InvalidRequest
	rds3 -v ls "s3://$B"
	assert_status 5
	assert_match "$stderr" "InvalidRequest: injected"
	! grep -q retrying <<<"$stderr"
	[ "$(jq .faults <<<"$(proxy_stats)")" -eq $(($(jq .faults <<<"$stats0") + 1)) ]
}

@test "no server: retried, then one line and exit 3" {
	p=$(free_port)
	AWS_ENDPOINT_URL_S3=http://127.0.0.1:$p rds3 --retries 2 -v ls "s3://$B"
	assert_status 3
	[ "$(grep -c retrying <<<"$stderr")" -eq 2 ] || fail "stderr: $stderr"
	last=$(tail -n 1 <<<"$stderr")
	assert_match "$last" "^rds3: ls s3://$B: connection failed: "
}

@test "usage errors: exit 2, one line" {
	for args in "" "frob s3://b/k" "put" "put /etc/hostname" "get http://b/k" "get s3://" \
		"get s3://b/" "put - s3://b/" "mb s3://b/k" "--retries 99 ls" "get s3://b*d/k"; do
		# shellcheck disable=SC2086 # split on purpose
		rds3 $args
		[ "$status" -eq 2 ] || fail "rds3 $args: expected 2, got $status: $stderr"
		assert_one_line_error "$stderr" rds3
		[ -z "$output" ]
	done
}

# ---------------------------------------------------------------- config

@test "credentials and endpoint from ~/.aws files and --profile" {
	unset AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY AWS_ENDPOINT_URL_S3
	mkdir -p "$HOME/.aws"
	printf '[default]\naws_access_key_id = S3RVER\naws_secret_access_key = wrong\n[good]\naws_access_key_id=S3RVER\naws_secret_access_key=S3RVER\n' \
		>"$HOME/.aws/credentials"
	printf '[default]\nendpoint_url = http://127.0.0.1:%s\n[profile good]\nregion = us-east-1\nendpoint_url = http://127.0.0.1:%s\n' \
		"$PROXY_PORT" "$PROXY_PORT" >"$HOME/.aws/config"
	EXPECT_REJECTED=1
	rds3 ls "s3://$B"
	assert_status 3
	assert_match "$stderr" SignatureDoesNotMatch
	rds3 --profile good ls "s3://$B"
	assert_status 0
	AWS_PROFILE=good rds3 ls "s3://$B"
	assert_status 0
	rds3 --profile nosuch ls "s3://$B"
	assert_status 2
	assert_match "$stderr" "^rds3: the profile 'nosuch' is in neither"
}

# ----------------------------------------------------- aws cli cross-check

@test "aws cli reads back what rds3 wrote, and rds3 what aws wrote" {
	[ -x "$AWS" ] || fail "awscli is not installed (scripts/deps.sh test)"
	mkrand "$D/src" 2500000
	k="cross/ünï code+x=y z"
	rds3 put "$D/src" "s3://$B/$k"
	assert_status 0
	run_t "$AWS" --endpoint-url "http://127.0.0.1:$PROXY_PORT" --region us-east-1 s3 cp "s3://$B/$k" "$D/by-aws"
	assert_status 0
	assert_same "$D/src" "$D/by-aws"
	run_t "$AWS" --endpoint-url "http://127.0.0.1:$PROXY_PORT" --region us-east-1 s3 cp "$D/src" "s3://$B/from-aws/a b"
	assert_status 0
	rds3 get "s3://$B/from-aws/a b" "$D/by-rds3"
	assert_status 0
	assert_same "$D/src" "$D/by-rds3"
	rds3 stat --json "s3://$B/$k"
	etag=$(jq -r .etag <<<"$output")
	run_t "$AWS" --endpoint-url "http://127.0.0.1:$PROXY_PORT" --region us-east-1 s3api head-object --bucket "$B" --key "$k"
	assert_status 0
	[ "$(jq -r .ETag <<<"$output")" = "$etag" ] || fail "ETag: aws $(jq -r .ETag <<<"$output"), rds3 $etag"
	[ "$(jq -r .ContentLength <<<"$output")" = 2500000 ]
}

# --------------------------------------------------------- large objects

# resident FILE: the bytes of FILE in the page cache.
resident() {
	fincore -b -n -o RES "$1" | tr -d ' '
}

@test "get --direct always: ranges land through O_DIRECT on ext4 (aligned or not), not in the page cache; through it where refused" {
	mount_ext4 "$D/disk" 128M
	size=$((24 * 1024 * 1024 + 12345))
	mkrand "$D/src" "$size"
	rds3 --part-size 5M put "$D/src" "s3://$B/mp"
	assert_status 0
	rds3 --part-size 32M put "$D/src" "s3://$B/one" # one PutObject: a plain MD5 ETag
	assert_status 0
	# 5 MiB ranges start on block boundaries; 5300001-byte ones do not
	# (their heads and tails go through the page cache, the rest not).
	for key in mp one; do
		for ps in 5M 5300001; do
			rm -f "$D/disk/dst"
			rds3 -v --direct always --part-size "$ps" get "s3://$B/$key" "$D/disk/dst"
			assert_status 0
			assert_match "$stderr" "bytes in [56] ranges, [0-9]+ at a time, written: O_DIRECT \(--direct always\)$"
			# The plain MD5 is checked by reading the file back, which
			# leaves the page cache again.  (Before cmp reads it.)
			[ "$(resident "$D/disk/dst")" -lt $((1 << 20)) ] ||
				fail "$key, $ps: $(resident "$D/disk/dst") bytes in the page cache"
			assert_same "$D/src" "$D/disk/dst"
			assert_no_temp "$D/disk/dst"
		done
	done
	# Where O_DIRECT is refused (the shim, as FUSE would), the page
	# cache; the same bytes.
	# shellcheck disable=SC2046
	run_t $(shimmed RDX_SHIM_NO_DIRECT=1 RDX_SHIM_LOG="$D/shim.log") \
		"$RDS3" -v --direct always --part-size 5300001 get "s3://$B/mp" "$D/disk/dst2"
	assert_status 0
	assert_match "$stderr" "bytes in 5 ranges, [0-9]+ at a time, written: O_DIRECT \(--direct always\), which the file system refuses: through the page cache"
	grep -q "O_DIRECT refused" "$D/shim.log" || fail "the shim was not in the way"
	assert_same "$D/src" "$D/disk/dst2"
	# Taken at open, refused at the first write: the rest goes through
	# the page cache, the bytes the same.
	# shellcheck disable=SC2046
	run_t $(shimmed RDX_SHIM_DIRECT_EINVAL=1 RDX_SHIM_LOG="$D/shim2.log") \
		"$RDS3" --direct always --part-size 5M get "s3://$B/one" "$D/disk/dst3"
	assert_status 0
	grep -q "O_DIRECT write refused" "$D/shim2.log" || fail "the shim was not in the way"
	assert_same "$D/src" "$D/disk/dst3"
	# A disk without room for the object: said before the ranges run
	# (the space is reserved once the size is known), nothing left.
	mount_ext4 "$D/small" 16M
	rds3 --part-size 5M get "s3://$B/mp" "$D/small/dst"
	assert_status 4
	assert_match "$stderr" "No space left on device"
	assert_no_temp "$D/small/dst"
	[ ! -e "$D/small/dst" ]
}

@test "multipart: part size - 1, part size, + 1, 16 MiB with a short last part; S3's ETag; ranged get" {
	ps=$((5 << 20))
	for size in $((ps - 1)) $ps $((ps + 1)) $((16 << 20)); do
		mkrand "$D/src.$size" "$size"
		rds3 -v --part-size 5M put "$D/src.$size" "s3://$B/mp.$size"
		assert_status 0
		if [ "$size" -le "$ps" ]; then
			! grep -q "multipart upload" <<<"$stderr" || fail "$size bytes went multipart: $stderr"
			want="\"$(md5sum <"$D/src.$size" | cut -c1-32)\""
		else
			assert_match "$stderr" "multipart upload .*: parts of $ps bytes"
			want=$(mp_etag "$D/src.$size" "$ps")
		fi
		assert_match "$stderr" "ETag $want$"
		rds3 stat --json "s3://$B/mp.$size"
		[ "$(jq -r .etag <<<"$output")" = "$want" ] || fail "$size: ETag $(jq -r .etag <<<"$output"), want $want"
		[ "$(jq -r .size <<<"$output")" = "$size" ]
		rds3 -v --part-size 5M get "s3://$B/mp.$size" "$D/dst.$size"
		assert_status 0
		assert_same "$D/src.$size" "$D/dst.$size"
		assert_no_temp "$D/dst.$size"
	done
	# 2 + 4 parts; the gets took 2 and 4 ranges, all but the first with If-Match.
	assert_match "$stderr" "16777216 bytes in 4 ranges"
	[ "$(stat_delta parts)" -eq 6 ] || fail "parts: $(stat_delta parts)"
	[ "$(stat_delta completed)" -eq 2 ]
	[ "$(stat_delta ifMatch)" -eq 4 ] || fail "If-Match GETs: $(stat_delta ifMatch)"
}

@test "multipart from stdin of unknown length; cat in ranges to stdout, in order" {
	size=$(((11 << 20) + 12345))
	mkrand "$D/src" "$size"
	run_t bash -c 'cat "$1" | "$2" -v --part-size 5M --concurrency 2 put - "$3"' _ "$D/src" "$RDS3" "s3://$B/k"
	assert_status 0
	assert_match "$stderr" "put - s3://$B/k: $size bytes, ETag $(mp_etag "$D/src" $((5 << 20)))$"
	[ "$(stat_delta parts)" -eq 3 ]
	run_t bash -c '"$1" --part-size 5M --concurrency 3 cat "$2" >"$3"' _ "$RDS3" "s3://$B/k" "$D/out"
	assert_status 0
	assert_same "$D/src" "$D/out"
	[ "$(stat_delta ifMatch)" -eq 2 ]
}

@test "stdin upload: memory stays at concurrency x part size (40 MiB through 2 x 5 MiB)" {
	[ -z "${RDX_SANITIZED:-}" ] || skip "ASan's runtime has its own memory use"
	mkfifo "$D/fifo"
	mkrand "$D/src" 40M
	BG_STDIN=$D/fifo bg_start put "$RDS3" --part-size 5M --concurrency 2 put - "s3://$B/k"
	exec 5>"$D/fifo"
	cat "$D/src" >&5
	# All but what the buffers hold has gone up; the peak so far is the
	# peak of the upload.
	hwm=$(awk '/^VmHWM:/ {print $2}' "/proc/$BG_PID/status")
	exec 5>&-
	wait_exit "$BG_PID" 30
	assert_rc put "$WAIT_RC" 0
	[ "$hwm" -lt $((28 << 10)) ] || fail "peak RSS ${hwm} KiB for 2 parts of 5 MiB"
	[ "$(stat_delta parts)" -eq 8 ]
	rds3 stat --json "s3://$B/k"
	[ "$(jq -r .etag <<<"$output")" = "$(mp_etag "$D/src" $((5 << 20)))" ]
}

@test "aws cli reads back a multipart upload byte-identical; rds3 gets aws's in ranges" {
	[ -x "$AWS" ] || fail "awscli is not installed (scripts/deps.sh test)"
	mkrand "$D/src" 16M
	rds3 --part-size 5M put "$D/src" "s3://$B/by-rds3"
	assert_status 0
	run_t "$AWS" --endpoint-url "http://127.0.0.1:$PROXY_PORT" --region us-east-1 s3 cp "s3://$B/by-rds3" "$D/by-aws"
	assert_status 0
	assert_same "$D/src" "$D/by-aws"
	run_t "$AWS" --endpoint-url "http://127.0.0.1:$PROXY_PORT" --region us-east-1 s3api head-object --bucket "$B" --key by-rds3
	assert_status 0
	[ "$(jq -r .ETag <<<"$output")" = "$(mp_etag "$D/src" $((5 << 20)))" ] || fail "aws sees ETag $(jq -r .ETag <<<"$output")"
	# aws uploads 16 MiB in parts of 8 MiB.
	run_t "$AWS" --endpoint-url "http://127.0.0.1:$PROXY_PORT" --region us-east-1 s3 cp "$D/src" "s3://$B/by-aws"
	assert_status 0
	rds3 -v --part-size 5M get "s3://$B/by-aws" "$D/by-rds3"
	assert_status 0
	assert_same "$D/src" "$D/by-rds3"
	assert_match "$stderr" "ETag $(mp_etag "$D/src" $((8 << 20)))$"
}

@test "a part failing past its retries, or refused: clear error, the upload aborted" {
	mkrand "$D/src" 16M
	proxy_fault 500 100 InternalError UploadPart 1
	rds3 -v --retries 1 --part-size 5M put "$D/src" "s3://$B/k"
	proxy_fault 500 0
	assert_status 5
	last=$(tail -n 1 <<<"$stderr")
	assert_match "$last" "^rds3: put s3://$B/k: InternalError: part [1-4]: injected by the test proxy$"
	assert_match "$stderr" "aborted the multipart upload"
	proxy_fault 403 1 AccessDenied UploadPart
	rds3 --part-size 5M put "$D/src" "s3://$B/k"
	assert_status 3
	assert_one_line_error "$stderr" rds3
	assert_match "$stderr" "^rds3: put s3://$B/k: AccessDenied: part [1-4]: injected"
	[ "$(stat_delta aborted)" -eq 2 ]
	[ "$(stat_delta completed)" -eq 0 ]
	[ "$(proxy_stats | jq .uploads)" -eq 0 ]
	open_uploads 0
	rds3 stat "s3://$B/k"
	assert_status 5
}

@test "a multipart ETag other than the parts': exit 6; a KMS one is not checked" {
	mkrand "$D/src" 11M
	curl -sf -X POST "http://127.0.0.1:$PROXY_PORT/__proxy/complete?etag=wrong" >/dev/null
	rds3 --part-size 5M put "$D/src" "s3://$B/k"
	assert_status 6
	assert_one_line_error "$stderr" rds3
	assert_match "$stderr" "^rds3: put s3://$B/k: .*: the object's ETag is \"[0-9a-f]{32}-3\", its parts make \"[0-9a-f]{32}-3\"$"
	curl -sf -X POST "http://127.0.0.1:$PROXY_PORT/__proxy/complete?etag=kms" >/dev/null
	rds3 -v --part-size 5M put "$D/src" "s3://$B/k"
	assert_status 0
	assert_match "$stderr" "encrypted with KMS or a customer key: not checked"
}

@test "CompleteMultipartUpload answered 200 with an Error: retried; when it persists, aborted" {
	mkrand "$D/src" 11M
	proxy_fault 200 1 InternalError CompleteMultipartUpload
	rds3 -v --part-size 5M put "$D/src" "s3://$B/k"
	assert_status 0
	assert_match "$stderr" "InternalError: injected by the test proxy"
	proxy_fault 200 100 InternalError CompleteMultipartUpload
	rds3 --retries 1 --part-size 5M put "$D/src" "s3://$B/k2"
	proxy_fault 500 0
	assert_status 5
	assert_one_line_error "$stderr" rds3
	assert_match "$stderr" "^rds3: put s3://$B/k2: InternalError: injected by the test proxy$"
	[ "$(stat_delta completed)" -eq 1 ]
	[ "$(stat_delta aborted)" -eq 1 ]
	open_uploads 0
}

@test "SIGINT during a multipart upload from stdin: exit 130, the upload aborted" {
	mkfifo "$D/fifo"
	mkrand "$D/src" 6M
	BG_STDIN=$D/fifo bg_start put "$RDS3" -v --part-size 5M put - "s3://$B/k"
	exec 5>"$D/fifo"
	cat "$D/src" >&5
	# Part 1 is up, part 2 waits for more input.
	wait_until 10 eval '[ "$(stat_delta parts)" -ge 1 ]' || fail "no part went up: $(cat "$D/put.err")"
	open_uploads 1
	kill -INT "$BG_PID"
	wait_exit "$BG_PID" 10
	exec 5>&-
	assert_rc put "$WAIT_RC" 130
	assert_file_match "$D/put.err" "aborted the multipart upload"
	assert_file_match "$D/put.err" "^rds3: put s3://$B/k: interrupted$"
	[ "$(stat_delta aborted)" -eq 1 ]
	open_uploads 0
}

@test "the object changing between ranges (If-Match refused): exit 5, no file" {
	mkrand "$D/src" 11M
	xrun "$RDS3" --part-size 5M put "$D/src" "s3://$B/k" || fail "put"
	proxy_fault 412 1 PreconditionFailed GetObject 1
	rds3 --part-size 5M get "s3://$B/k" "$D/out"
	proxy_fault 500 0
	assert_status 5
	assert_one_line_error "$stderr" rds3
	assert_match "$stderr" "^rds3: get s3://$B/k: PreconditionFailed: "
	assert_no_output_file "$D/out"
}

# ------------------------------------------------- presign, cp, batch rm

@test "presign: curl fetches the object through the verifying proxy; a tampered URL is refused" {
	mkrand "$D/f" 3000
	xrun "$RDS3" put "$D/f" "s3://$B/dir/a b+c"
	rds3 presign "s3://$B/dir/a b+c"
	assert_status 0
	url=$output
	assert_match "$url" "^http://127\.0\.0\.1:$PROXY_PORT/$B/dir/a%20b%2Bc\?X-Amz-Algorithm=AWS4-HMAC-SHA256&"
	assert_match "$url" "X-Amz-Expires=3600&"
	curl -sf -o "$D/out" "$url" || fail "curl failed on $url"
	cmp "$D/f" "$D/out"
	[ "$(stat_delta presigned)" -eq 1 ] || fail "the proxy verified no presigned request"
	# Each part of the URL is signed: another expiry, key or signature fails.
	EXPECT_REJECTED=1
	for bad in "${url/X-Amz-Expires=3600/X-Amz-Expires=7200}" "${url/a%20b/a%20B}" \
		"${url%?}$([ "${url: -1}" = 0 ] && echo 1 || echo 0)"; do
		code=$(curl -s -o "$D/err" -w '%{http_code}' "$bad")
		[ "$code" = 403 ] || fail "a tampered URL got $code: $bad"
		grep -q SignatureDoesNotMatch "$D/err" || fail "$(cat "$D/err")"
	done
	[ "$(stat_delta rejected)" -eq 3 ] || fail "rejected $(stat_delta rejected)"
	rds3 presign --expires 1 "s3://$B/dir/a b+c"
	assert_status 0
	assert_match "$output" "X-Amz-Expires=1&"
	sleep 2.1
	code=$(curl -s -o "$D/err" -w '%{http_code}' "$output")
	[ "$code" = 403 ] && grep -q AccessDenied "$D/err" || fail "an expired URL got $code"
	for e in 0 604801 x; do
		rds3 presign --expires "$e" "s3://$B/dir/a b+c"
		assert_status 2
		assert_one_line_error "$stderr" rds3
	done
	rds3 presign "s3://$B/dir/"
	assert_status 2
	rds3 presign --no-sign-request "s3://$B/k"
	assert_status 2
}

@test "cp: file to S3, S3 to file, S3 to S3 server side (CopyObject), byte-identical" {
	mkrand "$D/f" 70000
	rds3 cp "$D/f" "s3://$B/src/x y+z"
	assert_status 0
	rds3 cp "s3://$B/src/x y+z" "$D/back"
	assert_status 0
	cmp "$D/f" "$D/back"
	rds3 cp "s3://$B/src/x y+z" "s3://$B/dst/copy"
	assert_status 0
	rds3 cp "s3://$B/src/x y+z" "s3://$B/dst/"
	assert_status 0
	[ "$(stat_delta copies)" -eq 2 ] || fail "copies: $(stat_delta copies)"
	rds3 get "s3://$B/dst/copy" "$D/c1"
	cmp "$D/f" "$D/c1"
	rds3 get "s3://$B/dst/x y+z" "$D/c2"
	cmp "$D/f" "$D/c2"
	# Another bucket, and aws reads the copy back.
	xrun "$RDS3" mb "s3://$B-2"
	rds3 cp "s3://$B/dst/copy" "s3://$B-2/k"
	assert_status 0
	xrun "$AWS" --endpoint-url "http://127.0.0.1:$PROXY_PORT" --region us-east-1 \
		s3 cp "s3://$B-2/k" "$D/c3" >/dev/null
	cmp "$D/f" "$D/c3"
	xrun "$RDS3" rm -r "s3://$B-2" && xrun "$RDS3" rb "s3://$B-2"
}

# aws_s3 ARGS...: the AWS CLI against the proxy.
aws_s3() {
	run_t "$AWS" --endpoint-url "http://127.0.0.1:$PROXY_PORT" --region us-east-1 "$@"
}

# head_json KEY: aws's HeadObject of s3://$B/KEY into $output.
head_json() {
	aws_s3 s3api head-object --bucket "$B" --key "$1"
	assert_status 0
}

@test "cp S3 to S3 of more than a part: UploadPartCopy in parallel, metadata carried over, the same ETag as aws's copy" {
	mkrand "$D/f" $((17 * 1024 * 1024 + 5))
	aws_s3 s3 cp "$D/f" "s3://$B/src" --content-type text/x-rdx --cache-control max-age=60 \
		--content-disposition 'attachment; filename="f"' --metadata k1=v1,k2=v2,k3=
	assert_status 0
	rds3 -v --part-size 5M --concurrency 3 cp "s3://$B/src" "s3://$B/dir/copy"
	assert_status 0
	assert_match "$stderr" "multipart copy [^ ]+: 4 parts of 5242880 bytes, 3 at a time"
	assert_match "$stderr" "copied s3://$B/src to s3://$B/dir/copy: 17825797 bytes, ETag $(mp_etag "$D/f" 5242880)"
	[ "$(stat_delta partCopies)" -eq 4 ] || fail "part copies: $(stat_delta partCopies)"
	[ "$(stat_delta copies)" -eq 0 ] || fail "CopyObject was used"
	open_uploads 0
	rds3 get "s3://$B/dir/copy" "$D/back"
	assert_status 0
	cmp "$D/f" "$D/back"
	head_json dir/copy
	[ "$(jq -r .ContentType <<<"$output")" = text/x-rdx ] || fail "$output"
	[ "$(jq -r .CacheControl <<<"$output")" = max-age=60 ] || fail "$output"
	[ "$(jq -r .ContentDisposition <<<"$output")" = 'attachment; filename="f"' ] || fail "$output"
	[ "$(jq -c .Metadata <<<"$output")" = '{"k1":"v1","k2":"v2","k3":""}' ] || fail "$output"
	# aws copies it the same way (8 MiB parts, UploadPartCopy): the
	# same parts make the same ETag.
	aws_s3 s3 cp "s3://$B/src" "s3://$B/by-aws"
	assert_status 0
	rds3 --part-size 8M cp "s3://$B/src" "s3://$B/by-rds3"
	assert_status 0
	head_json by-aws
	want=$(jq -r .ETag <<<"$output")
	[ "$want" = "$(mp_etag "$D/f" 8388608)" ] || fail "aws's copy: $want"
	head_json by-rds3
	[ "$(jq -r .ETag <<<"$output")" = "$want" ] || fail "rds3's copy: $output, aws's $want"
	# Up to a part, one CopyObject.
	rds3 --part-size 32M cp "s3://$B/src" "s3://$B/one"
	assert_status 0
	[ "$(stat_delta copies)" -eq 1 ] || fail "copies: $(stat_delta copies)"
}

@test "cp S3 to S3 in parts: a failed part (403, a 200 with an Error body) aborts the upload; a 503 is retried; no UploadPartCopy, one CopyObject" {
	mkrand "$D/f" $((12 * 1024 * 1024))
	xrun "$RDS3" --part-size 5M put "$D/f" "s3://$B/src"
	proxy_fault 403 1 AccessDenied UploadPartCopy 1
	rds3 --part-size 5M --concurrency 1 cp "s3://$B/src" "s3://$B/c"
	assert_status 3
	assert_one_line_error "$stderr" rds3
	assert_match "$stderr" "^rds3: cp s3://$B/src to s3://$B/c: AccessDenied: part 2: injected by the test proxy"
	[ "$(stat_delta aborted)" -eq 1 ] || fail "aborted: $(stat_delta aborted)"
	open_uploads 0
	rds3 stat "s3://$B/c"
	assert_status 5
	curl -sf -X POST "http://127.0.0.1:$PROXY_PORT/__proxy/copyerror?code=InternalError" >/dev/null
	rds3 --retries 0 --part-size 5M cp "s3://$B/src" "s3://$B/c"
	assert_status 5
	assert_match "$stderr" "InternalError: part [123]: injected by the test proxy"
	[ "$(stat_delta aborted)" -eq 2 ] || fail "aborted: $(stat_delta aborted)"
	rds3 stat "s3://$B/c"
	assert_status 5
	proxy_fault 503 1 SlowDown UploadPartCopy
	rds3 --part-size 5M cp "s3://$B/src" "s3://$B/c"
	assert_status 0
	rds3 get "s3://$B/c" "$D/back"
	cmp "$D/f" "$D/back"
	open_uploads 0
	# A server without UploadPartCopy (501 NotImplemented, not retried):
	# the upload is aborted and one CopyObject does it.
	copies=$(stat_delta copies)
	proxy_fault 501 1 NotImplemented UploadPartCopy
	rds3 -v --part-size 5M --concurrency 1 cp "s3://$B/src" "s3://$B/d"
	assert_status 0
	assert_match "$stderr" "cp s3://$B/src: no UploadPartCopy here: one CopyObject"
	[ "$(stat_delta copies)" -eq $((copies + 1)) ] || fail "CopyObject: $(stat_delta copies)"
	[ "$(stat_delta aborted)" -eq 3 ] || fail "aborted: $(stat_delta aborted)"
	rds3 get "s3://$B/d" "$D/back2"
	cmp "$D/f" "$D/back2"
	open_uploads 0
}

@test "cp: a missing source, a 200 with an Error body, usage errors: clear and non-zero" {
	mkrand "$D/f" 10
	xrun "$RDS3" put "$D/f" "s3://$B/a"
	rds3 cp "s3://$B/nope" "s3://$B/b"
	assert_status 5
	assert_one_line_error "$stderr" rds3
	assert_match "$stderr" "^rds3: cp s3://$B/nope to s3://$B/b: NotFound: "
	curl -sf -X POST "http://127.0.0.1:$PROXY_PORT/__proxy/copyerror?code=InternalError" >/dev/null
	rds3 --retries 0 cp "s3://$B/a" "s3://$B/b"
	assert_status 5
	assert_one_line_error "$stderr" rds3
	assert_match "$stderr" "^rds3: cp s3://$B/a to s3://$B/b: InternalError: injected by the test proxy"
	rds3 stat "s3://$B/b"
	assert_status 5
	[ "$(stat_delta copies)" -eq 1 ] || fail "copies: $(stat_delta copies)"
	rds3 cp "$D/f" "$D/g"
	assert_status 2
	assert_one_line_error "$stderr" rds3
	rds3 cp "s3://$B/a"
	assert_status 2
	rds3 cp "s3://$B/" "s3://$B/b"
	assert_status 2
}

@test "rm --recursive: 1000 keys per DeleteObjects with Content-MD5; a refused key is reported, exit 5" {
	local n=1050 i
	mkdir -p "$D/tree/p"
	for i in $(seq 1 $n); do printf '%s' "$i" >"$D/tree/p/$i"; done
	printf x >"$D/tree/p/a&b c"
	t0=$SECONDS
	xrun "$AWS" --endpoint-url "http://127.0.0.1:$PROXY_PORT" --region us-east-1 \
		s3 cp --recursive --quiet "$D/tree/p" "s3://$B/p/"
	echo "# uploaded $((n + 1)) objects in $((SECONDS - t0)) s" >&3
	mkrand "$D/f" 10
	xrun "$RDS3" put "$D/f" "s3://$B/keep"
	curl -sf -X POST "http://127.0.0.1:$PROXY_PORT/__proxy/deletefail?key=p/7&code=AccessDenied" >/dev/null
	rds3 -v rm --recursive "s3://$B/p/"
	assert_status 5
	[ "$(grep -c '' <<<"$stderr")" -ge 2 ] || fail "$stderr"
	grep -qx "rds3: rm s3://$B/p/7: AccessDenied: injected by the test proxy" <<<"$stderr" || fail "$stderr"
	grep -qx "rds3: rm: 1 key not deleted" <<<"$stderr" || fail "$stderr"
	[ "$(stat_delta deletes)" -eq 2 ] || fail "DeleteObjects requests: $(stat_delta deletes)"
	rds3 ls -r "s3://$B"
	assert_status 0
	[ "$(grep -c '' <<<"$output")" -eq 2 ] || fail "left: $output"
	assert_match "$output" " p/7$"
	assert_match "$output" " keep$"
	rds3 rm -r "s3://$B/p/"
	assert_status 0
	rds3 ls -r "s3://$B/p/"
	[ -z "$output" ] || fail "left: $output"
}

@test "--progress on a terminal: put shows a percent and rate, get a rate; not on a pipe" {
	command -v script >/dev/null || fail "script (bsdutils) not installed"
	mkrand "$D/src" $((24 * 1024 * 1024))
	# script(1) gives rds3 a pty as stdout and stderr.
	run_t --secs 60 script -qec "$(printf '%q ' "$RDS3" --progress put "$D/src" "s3://$B/p")" "$D/ts1"
	assert_status 0
	bar=$(tr '\r' '\n' <"$D/ts1")
	assert_match "$bar" '[0-9]+% .* / 24\.00 MiB +[0-9.]+ GB/s +ETA' "put's progress line"
	run_t --secs 60 script -qec "$(printf '%q ' "$RDS3" --progress get "s3://$B/p" "$D/back")" "$D/ts2"
	assert_status 0
	assert_match "$(tr '\r' '\n' <"$D/ts2")" '[0-9.]+ [KMG]?i?B +[0-9.]+ GB/s' "get's progress line"
	assert_same "$D/src" "$D/back"
	rds3 --progress get "s3://$B/p" "$D/back2"
	assert_status 0
	[ -z "$stderr" ] || fail "--progress on a pipe wrote: $stderr"
}
