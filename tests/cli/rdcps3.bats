#!/usr/bin/env bats
# rdcp with s3://BUCKET/KEY on either side runs rds3's own code (cp, or
# sync for --sync and what implies it), against s3rver behind
# tests/s3/proxy.js, which verifies every signed request.

load ../lib/common
load ../lib/s3

RDCP=$RDX_BUILD/rdcp

# sent OUTPUT: the N of -v's "sync: N sent, ..." line.
sent() {
	sed -n 's/^rdcp: \(sync\|cp\): \([0-9]*\) sent.*/\2/p' <<<"$1"
}

@test "rdcp FILE s3://, s3:// FILE, s3:// s3://: the same bytes each way" {
	for n in 0 1 $((3 * 1024 * 1024 + 1)); do
		mkrand "$D/src" "$n"
		run_t "$RDCP" "$D/src" "s3://$B/dir/k"
		assert_status 0
		[ -z "$stderr" ] || fail "stderr: $stderr"
		run_t "$RDS3" get "s3://$B/dir/k" "$D/check"
		assert_status 0
		assert_same "$D/src" "$D/check"
		rm -f "$D/back"
		run_t "$RDCP" "s3://$B/dir/k" "$D/back"
		assert_status 0
		assert_same "$D/src" "$D/back"
		assert_no_temp "$D/back"
	done
	# A key ending in '/' gets the file's name; s3 to s3 is a server-side copy.
	run_t "$RDCP" "$D/src" "s3://$B/dir/"
	assert_status 0
	run_t "$RDCP" "s3://$B/dir/src" "s3://$B/copy"
	assert_status 0
	run_t "$RDS3" get "s3://$B/copy" "$D/copy"
	assert_status 0
	assert_same "$D/src" "$D/copy"
	# Standard input and output.
	run_t bash -c "'$RDCP' - 's3://$B/piped' <'$D/src' && '$RDCP' 's3://$B/piped' - >'$D/piped'"
	assert_status 0
	assert_same "$D/src" "$D/piped"
}

@test "rdcp -r and --sync with s3://: a tree up and down, a second sync sends nothing, --delete" {
	mkdir -p "$D/t/d/e"
	mkrand "$D/t/a" 1000
	mkrand "$D/t/d/b" 20000
	mkrand "$D/t/d/e/c" 3
	run_t "$RDCP" -r "$D/t" "s3://$B/p"
	assert_status 0
	run_t "$RDS3" ls -r "s3://$B/p/"
	assert_status 0
	[ "$(grep -c . <<<"$output")" -eq 3 ] || fail "listing: $output"
	run_t "$RDCP" --sync "s3://$B/p" "$D/down"
	assert_status 0
	diff -r "$D/t" "$D/down" || fail "the tree came back different"
	run_t "$RDCP" -v --sync "$D/t" "s3://$B/p"
	assert_status 0
	[ "$(sent "$stderr")" = 0 ] || fail "a second sync sent something: $stderr"
	rm "$D/t/a"
	echo new >"$D/t/new"
	run_t "$RDCP" --dry-run --delete "$D/t" "s3://$B/p"
	assert_status 0
	[ "$(sort <<<"$output")" = "$(printf '%s\n' "(dryrun) delete: s3://$B/p/a" \
		"(dryrun) upload: $D/t/new to s3://$B/p/new")" ] || fail "dry run: $output"
	run_t "$RDCP" --delete --exclude 'd/*' "$D/t" "s3://$B/p"
	assert_status 0
	run_t "$RDS3" ls -r --json "s3://$B/p/"
	[ "$(jq -r .key <<<"$output" | sort | tr '\n' ' ')" = "p/d/b p/d/e/c p/new " ] ||
		fail "after --delete: $output"
}

@test "rdcp with s3://: one line and exit 2 for what has no meaning there; S3's errors as rds3's" {
	mkrand "$D/src" 10
	run_t "$RDCP" --encrypt "$D/src" "s3://$B/k"
	assert_status 2
	assert_one_line_error "$stderr" rdcp
	assert_match "$stderr" "--encrypt has no meaning for a copy with s3://"
	run_t "$RDCP" -P 2222 "s3://$B/k" "$D/x"
	assert_status 2
	assert_match "$stderr" "--ssh-port has no meaning for a copy with s3://"
	run_t "$RDCP" "$D/src" "$D/src" "s3://$B/k"
	assert_status 2
	assert_match "$stderr" "several SRCs: 's3://$B/k' is not a directory or an s3:// prefix ending in '/'"
	run_t "$RDCP" -r "$D/src" "$D/src" "s3://$B/k/"
	assert_status 2
	assert_match "$stderr" "takes one SRC with -r or --sync"
	run_t "$RDCP" "s3://$B/k"
	assert_status 2
	run_t "$RDCP" "s3://$B/k" "somehost:/tmp/x"
	assert_status 2
	assert_match "$stderr" "cannot copy between s3:// and a remote host \\('somehost:/tmp/x'\\)"
	run_t "$RDCP" "s3://$B/no-such-key" "$D/x"
	assert_status 5
	assert_one_line_error "$stderr" rdcp
	assert_match "$stderr" "^rdcp: .*s3://$B/no-such-key: NoSuchKey"
	[ ! -e "$D/x" ] || fail "a file for a missing key"
	EXPECT_REJECTED=1
	AWS_SECRET_ACCESS_KEY=wrong run_t "$RDCP" "$D/src" "s3://$B/k"
	assert_status 3
	assert_match "$stderr" "SignatureDoesNotMatch"
}

@test "rdcp with several SRCs: files into an s3:// prefix, keys into a directory; one missing is named, the rest copied" {
	mkrand "$D/a" 1000
	mkrand "$D/b" 70000
	run_t "$RDCP" "$D/a" "$D/b" "s3://$B/multi/"
	assert_status 0
	mkdir "$D/down"
	run_t "$RDCP" "s3://$B/multi/a" "s3://$B/multi/b" "$D/down"
	assert_status 0
	assert_same "$D/a" "$D/down/a"
	assert_same "$D/b" "$D/down/b"
	mkdir "$D/down2"
	run_t "$RDCP" "s3://$B/multi/a" "s3://$B/multi/nope" "s3://$B/multi/b" "$D/down2"
	assert_status 5
	assert_match "$stderr" "s3://$B/multi/nope: NoSuchKey"
	assert_same "$D/a" "$D/down2/a"
	assert_same "$D/b" "$D/down2/b"
}

@test "rdcp --profile --endpoint --region --path-style: an S3 copy with nothing from the environment" {
	mkrand "$D/src" 5000
	mkdir -p "$HOME/.aws"
	printf '[tp]\naws_access_key_id = S3RVER\naws_secret_access_key = S3RVER\n' >"$HOME/.aws/credentials"
	unset AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY AWS_ENDPOINT_URL_S3
	local opts=(--profile tp --endpoint "http://127.0.0.1:$PROXY_PORT" --region us-east-1 --path-style)
	run_t "$RDCP" "${opts[@]}" "$D/src" "s3://$B/opt/k"
	assert_status 0
	run_t "$RDCP" "${opts[@]}" "s3://$B/opt/k" "$D/back"
	assert_status 0
	assert_same "$D/src" "$D/back"
	# The profile is what signs: a wrong secret in it is refused.
	printf '[bad]\naws_access_key_id = S3RVER\naws_secret_access_key = wrong\n' >>"$HOME/.aws/credentials"
	EXPECT_REJECTED=1
	run_t "$RDCP" --profile bad --endpoint "http://127.0.0.1:$PROXY_PORT" --region us-east-1 \
		"$D/src" "s3://$B/opt/k2"
	assert_status 3
	assert_match "$stderr" "SignatureDoesNotMatch"
	# Between hosts and local paths they mean nothing: one line, exit 2.
	run_t "$RDCP" --endpoint "http://127.0.0.1:$PROXY_PORT" "$D/src" "$D/copy"
	assert_status 2
	assert_one_line_error "$stderr" rdcp
	assert_match "$stderr" "--endpoint is for copies with s3://"
	[ ! -e "$D/copy" ] || fail "copied anyway"
}
