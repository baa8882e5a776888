#!/usr/bin/env bats
# A bucket of `rds3 serve` mounted with s3fs (FUSE; Debian's s3fs, in
# scripts/deps.sh): directories are folder markers, keys ending in '/'
# (docs/S3.md, "rds3 serve").  What s3fs does through the mount is
# checked on the served directory's disk and in rds3's own listing.
# s3fs runs in the foreground of a background job, every command on the
# mount under a timeout, and the mount is taken down in teardown: a hung
# s3fs fails the test, never the suite.

load ../lib/common
load ../lib/s3
load ../lib/s3serve

SERVE_KEY=RDS3S3FSKEY
SERVE_SECRET='s3fs/Secret+1'

setup_file() {
	serve_signed_file
}

teardown_file() {
	serve_stop signed
}

setup() {
	common_setup
	[ -x "$RDS3" ] || fail "rds3 not built: $RDS3"
	command -v s3fs >/dev/null || fail "s3fs is not installed (scripts/deps.sh test installs it)"
	[ -c /dev/fuse ] || skip "no /dev/fuse here"
	MNT=$D/mnt S3FS_PID=
	B=fs$BATS_TEST_NUMBER-$RANDOM
	mkdir "$SERVE_DIR/$B" "$MNT"
	serve_log_mark
}

teardown() {
	if [ -n "${S3FS_PID:-}" ]; then
		timeout -k 2 10 fusermount -u "$MNT" 2>/dev/null || umount -l "$MNT" 2>/dev/null || true
		wait_exit "$S3FS_PID" 10
	fi
	if [ -z "${BATS_TEST_COMPLETED:-}" ]; then
		serve_log_since
		echo "--- s3fs log (last 40 lines):" >&2
		tail -n 40 "$D/s3fs.log" >&2 2>/dev/null
	fi
	common_teardown
}

# mount_bucket: $B on $MNT by s3fs, up when its root is a FUSE file
# system that answers (s3fs checks the bucket as it starts and leaves
# when that fails: the directory underneath must not be taken for it).
mount_bucket() {
	echo "$SERVE_KEY:$SERVE_SECRET" >"$D/passwd"
	chmod 600 "$D/passwd"
	MOUNTS+=("$MNT")
	bg_start s3fs env -u AWSACCESSKEYID -u AWSSECRETACCESSKEY -u AWS_ACCESS_KEY_ID \
		-u AWS_SECRET_ACCESS_KEY -u AWS_CREDENTIAL_FILE HOME="$D" \
		s3fs "$B" "$MNT" -f -o "url=$SERVE_URL,use_path_request_style,sigv4,endpoint=us-east-1" \
		-o "passwd_file=$D/passwd,retries=1,connect_timeout=5,readwrite_timeout=10" \
		-o "logfile=$D/s3fs.log,dbglevel=info"
	S3FS_PID=$BG_PID
	for _ in $(seq 1 100); do
		alive "$S3FS_PID" || fail "s3fs left: $(tail -n 5 "$D/s3fs.log" "$D/s3fs.err" 2>/dev/null)" || return 1
		case $(timeout 5 stat -f -c %T "$MNT" 2>/dev/null) in
		fuse*) timeout 5 ls "$MNT" >/dev/null 2>&1 && return 0 ;;
		esac
		sleep 0.1
	done
	fail "s3fs did not mount $B on $MNT"
}

# on MOUNT-CMD...: CMD (a file command on the mount) under a timeout.
on() {
	run_t --secs 20 "$@"
	if [ "$status" -eq 124 ] || [ "$status" -eq 137 ]; then
		fail "timed out: $*"
	fi
}

# keys: rds3's own recursive listing of $B, keys only, one a line.
keys() {
	run_t --secs 20 env -u AWS_PROFILE HOME="$D" AWS_ACCESS_KEY_ID="$SERVE_KEY" \
		AWS_SECRET_ACCESS_KEY="$SERVE_SECRET" "$RDS3" --endpoint "$SERVE_URL" ls -r "s3://$B/"
	assert_status 0 || return 1
	awk '{ print $NF }' <<<"$output"
}

# is_marker DIR: DIR under the bucket is a directory holding the folder
# marker's file with its record.
is_marker() {
	[ -f "$SERVE_DIR/$B/$1/.rds3-folder" ] &&
		python3 -c 'import os, sys; os.getxattr(sys.argv[1], "user.rds3")' "$SERVE_DIR/$B/$1/.rds3-folder" 2>/dev/null
}

@test "s3fs over rds3 serve: mkdir, mkdir -p, files in them, ls, rmdir, rm" {
	mount_bucket
	on mkdir "$MNT/d1"
	assert_status 0
	is_marker d1 || fail "d1 is no folder marker on disk"
	on mkdir -p "$MNT/d2/x/y"
	assert_status 0
	on sh -c "echo hello >'$MNT/d2/x/y/f.txt' && touch '$MNT/d1/empty'"
	assert_status 0
	[ "$(cat "$SERVE_DIR/$B/d2/x/y/f.txt")" = hello ] || fail "f.txt on disk: $(cat "$SERVE_DIR/$B/d2/x/y/f.txt")"
	[ -f "$SERVE_DIR/$B/d1/empty" ] && [ ! -s "$SERVE_DIR/$B/d1/empty" ] || fail "d1/empty on disk"
	for d in d2 d2/x d2/x/y; do
		is_marker $d || fail "$d is no folder marker on disk"
	done
	[ "$(keys | tr '\n' ' ')" = "d1/ d1/empty d2/ d2/x/ d2/x/y/ d2/x/y/f.txt " ] ||
		fail "listing: $(keys | tr '\n' ' ')"
	on ls "$MNT"
	assert_status 0
	[ "$(tr '\n' ' ' <<<"$output")" = "d1 d2 " ] || fail "ls: $output"
	on ls "$MNT/d2/x/y"
	[ "$output" = f.txt ] || fail "ls d2/x/y: $output"
	on cat "$MNT/d2/x/y/f.txt"
	[ "$output" = hello ] || fail "cat: $output"
	on stat -c %F "$MNT/d2/x"
	[ "$output" = directory ] || fail "stat d2/x: $output"

	on rmdir "$MNT/d1"
	assert_nonzero
	[ -d "$SERVE_DIR/$B/d1" ] || fail "d1 went with a file in it"
	on rm "$MNT/d1/empty"
	assert_status 0
	is_marker d1 || fail "d1 went with its last file"
	on rmdir "$MNT/d1"
	assert_status 0
	[ ! -e "$SERVE_DIR/$B/d1" ] || fail "d1 is still on disk"
	on rm "$MNT/d2/x/y/f.txt"
	assert_status 0
	[ "$(keys | tr '\n' ' ')" = "d2/ d2/x/ d2/x/y/ " ] || fail "listing: $(keys | tr '\n' ' ')"
	on rm -r "$MNT/d2"
	assert_status 0
	[ -z "$(ls -A "$SERVE_DIR/$B")" ] || fail "left in the bucket: $(find "$SERVE_DIR/$B")"
	[ -z "$(keys)" ] || fail "listing: $(keys)"
	on ls -A "$MNT"
	[ -z "$output" ] || fail "ls: $output"
}

@test "s3fs over rds3 serve: chmod and mv of a directory (copies of markers)" {
	mount_bucket
	on mkdir -p "$MNT/a/b"
	on sh -c "echo data >'$MNT/a/b/f'"
	assert_status 0
	on chmod 700 "$MNT/a/b"
	assert_status 0
	on stat -c %a "$MNT/a/b"
	[ "$output" = 700 ] || fail "mode after chmod: $output"
	# s3fs keeps the mode in x-amz-meta-mode: in the folder's record.
	python3 -c 'import os, re, sys
v = os.getxattr(sys.argv[1], "user.rds3").decode()
m = re.search(r"^x-amz-meta-mode: (\d+)$", v, re.M)
sys.exit(not m or int(m.group(1)) & 0o7777 != 0o700)' "$SERVE_DIR/$B/a/b/.rds3-folder" ||
		fail "mode 700 is not in a/b's record"
	on mv "$MNT/a" "$MNT/c"
	assert_status 0
	[ "$(keys | tr '\n' ' ')" = "c/ c/b/ c/b/f " ] || fail "listing after mv: $(keys | tr '\n' ' ')"
	[ ! -e "$SERVE_DIR/$B/a" ] || fail "a is still on disk"
	on cat "$MNT/c/b/f"
	[ "$output" = data ] || fail "cat after mv: $output"
}
