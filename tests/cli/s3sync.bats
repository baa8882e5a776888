#!/usr/bin/env bats
# rds3 sync and cp -r against s3rver behind tests/s3/proxy.js (every signed
# request verified with AWS's JS signer; faults on request), the Debian
# awscli cross-checking what rds3 wrote.  One server pair for the file.

load ../lib/common
load ../lib/s3

awss3() {
	run_t "$AWS" --endpoint-url "http://127.0.0.1:$PROXY_PORT" --region us-east-1 "$@"
}

# mktree DIR: a small tree: nested directories, an empty file, a name with
# a space, and one file over a part (multipart with --part-size 5M).
mktree() {
	mkdir -p "$1/d/e" "$1/f"
	mkrand "$1/a" 1000
	mkrand "$1/d/b" 20000
	mkrand "$1/d/e/c" 3
	: >"$1/d/e/empty"
	mkrand "$1/f/sp ace" 10
	mkrand "$1/big" 6M
}

# sent OUTPUT: the N of rds3 -v's "sync: N sent, ..." line.
sent() {
	sed -n 's/^rds3: \(sync\|cp\): \([0-9]*\) sent.*/\2/p' <<<"$1"
}

# awskeys PREFIX: the keys under PREFIX as the Debian aws cli lists them
# (aws s3 ls --recursive), sorted.
awskeys() {
	awss3 s3 ls --recursive "s3://$B/$1"
	assert_status 0
	awk '{ $1 = $2 = $3 = ""; sub(/^ +/, ""); print }' <<<"$output" | sort
}

# keys PREFIX: the same through rds3 ls (quicker: no Python to start).
keys() {
	xrun "$RDS3" ls -r --json "s3://$B/$1" | jq -r .key | sort
}

@test "sync up then down: same tree, mtimes kept, the second run of each sends nothing" {
	mktree "$D/src"
	touch -d '2020-02-02 02:02:02' "$D/src/d/b"
	rds3 -v --part-size 5M sync "$D/src" "s3://$B/p"
	assert_status 0
	[ -z "$output" ] || fail "sync wrote to stdout: $output"
	[ "$(sent "$stderr")" = 6 ] || fail "expected 6 uploads: $stderr"
	[ "$(awskeys p/)" = "$(printf '%s\n' p/a p/big p/d/b p/d/e/c p/d/e/empty 'p/f/sp ace' | sort)" ] ||
		fail "aws lists: $(awskeys p/)"
	# aws reads back what rds3 wrote, metadata included.
	awss3 s3api head-object --bucket "$B" --key p/d/b
	assert_status 0
	[ "$(jq -r .Metadata.mtime <<<"$output")" = "$(stat -c %Y "$D/src/d/b")" ] ||
		fail "x-amz-meta-mtime: $output"
	rds3 -v --part-size 5M sync "$D/src" "s3://$B/p"
	assert_status 0
	[ "$(sent "$stderr")" = 0 ] || fail "second upload sent something: $stderr"
	rds3 -v sync "s3://$B/p/" "$D/dst"
	assert_status 0
	[ "$(sent "$stderr")" = 6 ] || fail "expected 6 downloads: $stderr"
	diff -r "$D/src" "$D/dst" || fail "trees differ"
	[ "$(stat -c %Y "$D/dst/d/b")" = "$(stat -c %Y "$D/src/d/b")" ] || fail "mtime not kept"
	assert_no_temp "$D/dst/a"
	rds3 -v sync "s3://$B/p" "$D/dst"
	assert_status 0
	[ "$(sent "$stderr")" = 0 ] || fail "second download sent something: $stderr"
}

@test "sync: a changed file goes again, also one changed to an older mtime (x-amz-meta-mtime)" {
	mkdir "$D/src"
	echo one >"$D/src/x"
	echo two >"$D/src/y"
	touch -d '2021-01-01' "$D/src/x" "$D/src/y"
	rds3 sync "$D/src" "s3://$B"
	assert_status 0
	echo ONE >"$D/src/x"                    # same size, newer mtime
	echo TWO >"$D/src/y"
	touch -d '2019-01-01' "$D/src/y"        # same size, older mtime
	rds3 -v sync "$D/src" "s3://$B"
	assert_status 0
	[ "$(sent "$stderr")" = 2 ] || fail "expected 2 uploads: $stderr"
	rds3 cat "s3://$B/x"
	[ "$output" = ONE ] || fail "x: $output"
	rds3 cat "s3://$B/y"
	[ "$output" = TWO ] || fail "y: $output"
	# Down: a local file changed to the same size is brought back.
	rds3 sync "s3://$B" "$D/dst"
	echo tWO >"$D/dst/y"
	rds3 -v sync "s3://$B" "$D/dst"
	assert_status 0
	[ "$(sent "$stderr")" = 1 ] || fail "expected 1 download: $stderr"
	[ "$(cat "$D/dst/y")" = TWO ] || fail "y not restored"
}

@test "sync --checksum: same size and mtime but new content is sent; a multipart ETag matches" {
	mkdir "$D/src"
	echo aaaa >"$D/src/s"
	mkrand "$D/src/big" 11M
	rds3 --part-size 5M sync "$D/src" "s3://$B"
	assert_status 0
	awss3 s3api head-object --bucket "$B" --key big
	[[ $(jq -r .ETag <<<"$output") == *-3\" ]] || fail "not a 3-part ETag: $output"
	touch -r "$D/src/s" "$D/ref"
	echo bbbb >"$D/src/s"
	touch -r "$D/ref" "$D/src/s"
	rds3 -v --part-size 5M sync "$D/src" "s3://$B"
	[ "$(sent "$stderr")" = 0 ] || fail "size and mtime alone should see no change: $stderr"
	rds3 -v --part-size 5M sync --checksum "$D/src" "s3://$B"
	assert_status 0
	[ "$(sent "$stderr")" = 1 ] || fail "--checksum should send s only: $stderr"
	rds3 cat "s3://$B/s"
	[ "$output" = bbbb ]
	# Down: the local copy of big, 3 parts of 5 MiB, matches by content.
	mkdir "$D/dst"
	cp "$D/src/big" "$D/dst/big"
	rds3 -v --part-size 5M sync --checksum "s3://$B" "$D/dst"
	assert_status 0
	[ "$(sent "$stderr")" = 1 ] || fail "only s should come down: $stderr"
}

@test "sync --delete, both ways; excluded names are not deleted" {
	mkdir -p "$D/src/sub"
	echo a >"$D/src/a"
	echo b >"$D/src/sub/b"
	rds3 sync "$D/src" "s3://$B/p"
	xrun "$RDS3" put "$D/src/a" "s3://$B/p/extra"
	xrun "$RDS3" put "$D/src/a" "s3://$B/p/keep.log"
	xrun "$RDS3" put "$D/src/a" "s3://$B/other"
	rds3 sync "$D/src" "s3://$B/p"
	[ "$(keys p/ | wc -l)" = 4 ] || fail "without --delete nothing goes: $(keys p/)"
	rds3 sync --delete --exclude '*.log' "$D/src" "s3://$B/p"
	assert_status 0
	[ "$(keys "")" = "$(printf '%s\n' other p/a p/keep.log p/sub/b)" ] || fail "left: $(keys "")"
	mkdir -p "$D/dst/sub"
	echo x >"$D/dst/stale"
	echo x >"$D/dst/sub/stale2"
	rds3 sync --delete "s3://$B/p" "$D/dst"
	assert_status 0
	[ "$(cd "$D/dst" && find . -type f | sort)" = "$(printf '%s\n' ./a ./keep.log ./sub/b)" ] ||
		fail "left: $(cd "$D/dst" && find . -type f)"
}

@test "sync --dry-run lists each action on stdout and changes nothing" {
	mkdir "$D/src"
	echo a >"$D/src/a"
	echo b >"$D/src/b"
	xrun "$RDS3" put "$D/src/a" "s3://$B/p/gone"
	rds3 sync --dry-run --delete "$D/src" "s3://$B/p"
	assert_status 0
	[ "$(sort <<<"$output")" = "$(printf '%s\n' "(dryrun) delete: s3://$B/p/gone" \
		"(dryrun) upload: $D/src/a to s3://$B/p/a" "(dryrun) upload: $D/src/b to s3://$B/p/b")" ] ||
		fail "dry run said: $output"
	[ "$(keys p/)" = p/gone ] || fail "the dry run changed the bucket: $(keys p/)"
	rds3 sync --dry-run --delete "s3://$B/p" "$D/src"
	assert_status 0
	[ "$(sort <<<"$output")" = "$(printf '%s\n' "(dryrun) delete: $D/src/a" "(dryrun) delete: $D/src/b" \
		"(dryrun) download: s3://$B/p/gone to $D/src/gone")" ] || fail "dry run said: $output"
	[ "$(ls "$D/src")" = "$(printf 'a\nb')" ] || fail "the dry run changed the directory"
	rds3 sync --dry-run "s3://$B/p" "$D/new"
	assert_status 0
	[ ! -e "$D/new" ] || fail "the dry run made the destination"
}

@test "sync and cp -r: --include and --exclude, the last matching rule wins" {
	mkdir -p "$D/src/logs"
	for f in a.txt b.txt c.log logs/x.log logs/keep.log; do echo "$f" >"$D/src/$f"; done
	rds3 sync --exclude '*.log' --include 'logs/keep*' "$D/src" "s3://$B/s"
	assert_status 0
	[ "$(keys s/)" = "$(printf '%s\n' s/a.txt s/b.txt s/logs/keep.log)" ] || fail "got $(keys s/)"
	rds3 cp -r --exclude '*' --include '*.log' "$D/src" "s3://$B/c"
	assert_status 0
	[ "$(keys c/)" = "$(printf '%s\n' c/c.log c/logs/keep.log c/logs/x.log)" ] || fail "got $(keys c/)"
	rds3 sync --exclude 'logs/*' "s3://$B/c" "$D/down"
	assert_status 0
	[ "$(cd "$D/down" && find . -type f)" = ./c.log ] || fail "got $(cd "$D/down" && find . -type f)"
}

@test "cp -r: directory to prefix, prefix to directory, prefix to prefix (server side, in parts above one), everything again" {
	mktree "$D/src"
	touch -d '2020-01-02 03:04:05' "$D/src/big" # not "now", whatever else is
	rds3 -v --part-size 5M cp -r "$D/src" "s3://$B/up"
	assert_status 0
	[ "$(sent "$stderr")" = 6 ] || fail "$stderr"
	rds3 -v --part-size 5M cp --recursive "$D/src" "s3://$B/up"
	[ "$(sent "$stderr")" = 6 ] || fail "cp -r copies everything again: $stderr"
	stats1=$(proxy_stats)
	rds3 -v cp -r "s3://$B/up" "s3://$B/copy/"
	assert_status 0
	[ "$(sent "$stderr")" = 6 ] || fail "$stderr"
	[ $(($(jq .copies <<<"$(proxy_stats)") - $(jq .copies <<<"$stats1"))) = 6 ] ||
		fail "expected 6 CopyObject"
	rds3 cp -r "s3://$B/copy" "$D/dst"
	assert_status 0
	diff -r "$D/src" "$D/dst" || fail "trees differ"
	# With 5 MiB parts, the 6 MiB object is copied in two parts
	# (UploadPartCopy), its x-amz-meta-mtime carried over: it comes
	# down with the source's mtime.
	stats1=$(proxy_stats)
	rds3 -v --part-size 5M cp -r "s3://$B/up" "s3://$B/copy5/"
	assert_status 0
	assert_match "$stderr" "multipart copy [^ ]+: 2 parts of 5242880 bytes"
	[ $(($(jq .copies <<<"$(proxy_stats)") - $(jq .copies <<<"$stats1"))) = 5 ] ||
		fail "expected 5 CopyObject"
	[ $(($(jq .partCopies <<<"$(proxy_stats)") - $(jq .partCopies <<<"$stats1"))) = 2 ] ||
		fail "expected 2 UploadPartCopy"
	rds3 cp -r "s3://$B/copy5" "$D/dst5"
	assert_status 0
	diff -r "$D/src" "$D/dst5" || fail "trees differ"
	[ "$(stat -c %Y "$D/dst5/big")" = "$(stat -c %Y "$D/src/big")" ] ||
		fail "mtime not carried: $(stat -c %Y "$D/dst5/big") vs $(stat -c %Y "$D/src/big")"
	# sync between prefixes: nothing while the copies are newer; a
	# source object written since is copied again.
	rds3 -v sync "s3://$B/up" "s3://$B/copy"
	assert_status 0
	[ "$(sent "$stderr")" = 0 ] || fail "$stderr"
	sleep 1 # Last-Modified counts whole seconds
	mkrand "$D/new" 1000
	xrun "$RDS3" put "$D/new" "s3://$B/up/a"
	rds3 -v sync "s3://$B/up" "s3://$B/copy"
	assert_status 0
	[ "$(sent "$stderr")" = 1 ] || fail "$stderr"
	xrun "$RDS3" get "s3://$B/copy/a" "$D/got" || fail "get"
	assert_same "$D/new" "$D/got"
	rds3 cp -r "$D/src" "$D/elsewhere"
	assert_status 2
	rds3 cp -r --delete "$D/src" "s3://$B/up"
	assert_status 2
}

@test "sync: keys with spaces, unicode, +, %, =, ~ and () both ways" {
	mkdir -p "$D/src/ünï cödé" "$D/src/p+q"
	names=("a b" "ünï cödé/✓ x" "p+q/1+1=2" "pct%41%2F%" "tilde~(paren)!" "p+q/semi;colon,@\$")
	for n in "${names[@]}"; do mkrand "$D/src/$n" 100; done
	rds3 sync "$D/src" "s3://$B/k k"
	assert_status 0
	listed=$(awskeys "k k/")
	for n in "${names[@]}"; do
		grep -qxF "k k/$n" <<<"$listed" || fail "aws does not list 'k k/$n': $listed"
	done
	rds3 sync "s3://$B/k k" "$D/dst"
	assert_status 0
	diff -r "$D/src" "$D/dst" || fail "trees differ"
	rds3 -v sync "$D/src" "s3://$B/k k"
	[ "$(sent "$stderr")" = 0 ] || fail "$stderr"
}

@test "sync down: hostile keys are refused with a warning each and nothing leaves the destination" {
	mkdir -p "$D/in/sub" "$D/outside"
	echo ok >"$D/in/fine"
	for k in k1 k2 k3 k4; do echo "$k" >"$D/in/$k"; done
	rds3 sync "$D/in" "s3://$B/p"
	assert_status 0
	# s3rver would normalize such keys: the proxy shows stored ones so.
	for pair in "k1 p/a/../../x" "k2 p/../escape" "k3 p//abs" "k4 p/./dot"; do
		set -- $pair
		curl -sf -X POST "http://127.0.0.1:$PROXY_PORT/__proxy/listkey?bucket=$B&real=p/$1&key=$(jq -rn --arg k "$2" '$k|@uri')" >/dev/null
	done
	mkdir "$D/work"
	rds3 sync "s3://$B/p" "$D/work/dst"
	assert_status 1
	assert_match "$stderr" "warning: skipping s3://$B/p/a/\\.\\./\\.\\./x: a '\\.\\.' component"
	[ "$(grep -c 'warning: skipping' <<<"$stderr")" = 4 ] || fail "expected 4 refused keys: $stderr"
	assert_match "$stderr" "4 keys refused"
	[ "$(cd "$D/work/dst" && find . -type f)" = ./fine ] || fail "wrote $(find "$D/work")"
	[ ! -e "$D/work/x" ] && [ ! -e "$D/x" ] && [ ! -e "$D/work/escape" ] || fail "a key escaped"
	# A symlink inside the destination is not written through.
	xrun "$RDS3" put "$D/in/fine" "s3://$B/q/sub/f"
	mkdir "$D/q"
	ln -s "$D/outside" "$D/q/sub"
	rds3 sync "s3://$B/q" "$D/q"
	assert_status 1
	assert_match "$stderr" "skipping s3://$B/q/sub/f: .* would be written through a symlink"
	[ -z "$(ls "$D/outside")" ] || fail "wrote through the symlink"
}

# A local user swaps the directory a download was checked into for a
# symlink out just before its temporary is made (the shim's
# RDX_SHIM_RACE): the file lands in the directory that was checked.
@test "sync down: a directory swapped for a symlink out mid-download: nothing written outside" {
	[ -x "$RDX_BUILD/tests/shim.so" ] || fail "shim not built: $RDX_BUILD/tests/shim.so"
	mkdir -p "$D/outside" "$D/dst/sub"
	echo raced >"$D/f"
	xrun "$RDS3" put "$D/f" "s3://$B/r/sub/victim"
	# shellcheck disable=SC2046 # shimmed is a command prefix
	run_t $(shimmed RDX_SHIM_RACE=victim RDX_SHIM_RACE_DIR="$D/dst/sub" \
		RDX_SHIM_RACE_TO="$D/outside") "$RDS3" sync "s3://$B/r" "$D/dst"
	[ -L "$D/dst/sub" ] || fail "the shim did not swap the directory"
	[ -z "$(ls -A "$D/outside")" ] || fail "written outside: $(ls -A "$D/outside")"
	[ "$(cat "$D/dst/sub.moved/victim")" = raced ] || fail "not in the directory checked: $(ls -A "$D/dst/sub.moved")"
}

@test "sync up: a symlink in the source is skipped with a warning" {
	mkdir "$D/src"
	echo a >"$D/src/a"
	ln -s /etc/hostname "$D/src/link"
	rds3 sync "$D/src" "s3://$B"
	assert_status 0
	assert_match "$stderr" "warning: skipping '$D/src/link': a symlink"
	[ "$(keys "")" = a ] || fail "got $(keys "")"
	# -q: errors only.
	rds3 -q sync "$D/src" "s3://$B"
	assert_status 0
	[ -z "$stderr" ] || fail "-q printed: $stderr"
}

@test "2000 small objects up and down with --jobs 16 on kept-alive connections; aws counts them and reads a sample" {
	# The sanitizer pass checks the same code on fewer (the server is
	# the bottleneck, not rds3), still more than one listing page.
	local per=100 n=2000
	[ -z "${RDX_SANITIZED:-}" ] || { per=60 n=1200; }
	mkdir -p "$D/src"
	for d in $(seq 0 19); do
		mkdir "$D/src/d$d"
		for f in $(seq 0 $((per - 1))); do printf 'object %d/%d\n' "$d" "$f" >"$D/src/d$d/f$f"; done
	done
	stats1=$(proxy_stats)
	rds3 -v --jobs 16 sync "$D/src" "s3://$B/many"
	assert_status 0
	[ "$(sent "$stderr")" = "$n" ] || fail "$(tail -n 3 <<<"$stderr")"
	# Each worker kept its connection: 16, the listing's, and the one
	# asking the proxy for its counters.
	conns=$(($(jq .connections <<<"$(proxy_stats)") - $(jq .connections <<<"$stats1")))
	[ "$conns" -le 18 ] || fail "$n objects took $conns connections"
	[ "$(awskeys many/ | wc -l)" = "$n" ] || fail "aws lists $(awskeys many/ | wc -l) keys"
	awss3 s3 cp --recursive --exclude '*' --include d0/f0 --include d7/f42 --include d19/f49 \
		"s3://$B/many" "$D/sample"
	assert_status 0
	for s in d0/f0 d7/f42 d19/f49; do
		assert_same "$D/src/$s" "$D/sample/$s"
	done
	stats2=$(proxy_stats)
	rds3 -v --jobs 16 sync "s3://$B/many" "$D/dst"
	assert_status 0
	[ "$(sent "$stderr")" = "$n" ] || fail "$(tail -n 3 <<<"$stderr")"
	conns=$(($(jq .connections <<<"$(proxy_stats)") - $(jq .connections <<<"$stats2")))
	[ "$conns" -le 18 ] || fail "$n downloads took $conns connections"
	diff -r "$D/src" "$D/dst" || fail "trees differ"
	[ "$(jq .rejected <<<"$(proxy_stats)")" = "$(jq .rejected <<<"$stats1")" ]
}

@test "a failing object is named, the others go on, and the exit status says so" {
	mkdir "$D/src"
	for i in $(seq 1 20); do echo "$i" >"$D/src/f$i"; done
	proxy_fault 400 1 InvalidRequest PutObject 5
	rds3 --jobs 4 sync "$D/src" "s3://$B"
	assert_status 5
	[ "$(grep -c 'InvalidRequest: injected by the test proxy' <<<"$stderr")" = 1 ] || fail "$stderr"
	assert_match "$stderr" "rds3: upload $D/src/f[0-9]* to s3://$B/f[0-9]*: InvalidRequest"
	assert_match "$stderr" "sync: 1 object failed"
	[ "$(keys "" | wc -l)" = 19 ] || fail "expected 19 keys: $(keys "")"
	# The next run sends the missing one only.
	rds3 -v sync "$D/src" "s3://$B"
	assert_status 0
	[ "$(sent "$stderr")" = 1 ] || fail "$stderr"
	# Down, one GET fails: the rest land, no temporary is left.
	proxy_fault 400 1 InvalidRequest GetObject 3
	rds3 --jobs 4 sync "s3://$B" "$D/dst"
	assert_status 5
	[ "$(find "$D/dst" -type f | wc -l)" = 19 ] || fail "$(ls -a "$D/dst")"
	[ -z "$(find "$D/dst" -name '.*.rdx-*')" ] || fail "a temporary was left"
}

@test "sync up: a (sparse) file over 5 TiB is refused by name, the rest go" {
	mkdir "$D/src"
	echo a >"$D/src/a"
	truncate -s $(((5 << 40) + 1)) "$D/src/huge" || fail "no sparse 5 TiB file here"
	rds3 sync "$D/src" "s3://$B"
	assert_status 4
	assert_match "$stderr" "^rds3: cannot upload '$D/src/huge': larger than S3's 5 TiB$"
	[ "$(keys "")" = a ] || fail "got $(keys "")"
}

@test "sync up: an unreadable directory is named, the rest goes, --delete deletes nothing" {
	# As root every directory can be read: rds3 runs as nobody, from a
	# directory nobody can reach.
	PERM=$(mktemp -d /tmp/rds3-sync-perm.XXXXXX)
	CLEANUPS+=(rm_perm)
	chmod 755 "$PERM"
	cp "$RDS3" "$PERM/rds3"
	mkdir -p "$PERM/src/open" "$PERM/src/locked"
	echo a >"$PERM/src/open/a"
	echo b >"$PERM/src/locked/b"
	xrun "$RDS3" sync "$PERM/src" "s3://$B" || fail "first sync"
	echo c >"$PERM/src/open/c"
	chmod -R a+rX "$PERM/src"
	chmod 000 "$PERM/src/locked"
	run_t env HOME=/nonexistent AWS_SHARED_CREDENTIALS_FILE=/nonexistent AWS_CONFIG_FILE=/nonexistent \
		setpriv --reuid=65534 --regid=65534 --clear-groups "$PERM/rds3" sync --delete "$PERM/src" "s3://$B"
	assert_status 4
	assert_match "$stderr" "^rds3: cannot read '$PERM/src/locked': Permission denied$"
	assert_match "$stderr" "warning: not deleting anything: part of '$PERM/src' could not be read"
	[ "$(keys "")" = "$(printf '%s\n' locked/b open/a open/c)" ] || fail "got $(keys "")"
}

rm_perm() {
	chmod -R u+rwx "$PERM" 2>/dev/null
	rm -rf "$PERM"
}

@test "SIGINT during sync: exit 130, one line, no temporary left" {
	mkdir "$D/src"
	for i in $(seq 1 10); do echo "$i" >"$D/src/f$i"; done
	rds3 sync "$D/src" "s3://$B"
	assert_status 0
	# The fourth GET on and every later one fail, retried with backoff:
	# the sync is still running when the signal comes.
	CLEANUPS+=(clear_fault)
	proxy_fault 503 1000 ServiceUnavailable GetObject 3
	bg_start sync "$RDS3" --retries 20 --jobs 2 sync "s3://$B" "$D/dst"
	wait_until 10 eval '[ "$(stat_delta faults)" -ge 1 ]' || fail "no fault: $(cat "$D/sync.err")"
	kill -INT "$BG_PID"
	wait_exit "$BG_PID" 10
	assert_rc sync "$WAIT_RC" 130
	[ "$(cat "$D/sync.err")" = "rds3: sync: interrupted" ] || fail "$(cat "$D/sync.err")"
	[ "$(find "$D/dst" -type f | wc -l)" = 3 ] || fail "$(ls -a "$D/dst")"
	[ -z "$(find "$D/dst" -name '.*.rdx-*')" ] || fail "a temporary was left"
}

clear_fault() {
	proxy_fault 503 0
}

@test "sync: usage errors" {
	rds3 sync "$D" "$D"
	assert_status 2
	rds3 sync "s3://$B"
	assert_status 2
	echo x >"$D/file"
	rds3 sync "$D/file" "s3://$B"
	assert_status 2
	assert_match "$stderr" "not a directory"
	rds3 --dry-run ls "s3://$B"
	assert_status 2
	rds3 --jobs 0 sync "$D" "s3://$B"
	assert_status 2
}
