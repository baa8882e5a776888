#!/usr/bin/env bats
# Soft-RoCE, one guest: S3 over RDMA (docs/S3.md, "S3 over RDMA") between
# rds3 and rds3 serve --rdma on rxe0.  Every transfer must give identical
# bytes, and the bytes must really move by RDMA: the client's -v summary
# ("N bytes by RDMA, M by HTTP") and the server's per-request log (" rdma
# N") count them on both ends.  Declines, abuse and killed clients must
# leave the server serving and no partial object visible.

load ../lib/common
load rxe

T=60
RDS3=$RDX_BUILD/rds3
RDCP=$RDX_BUILD/rdcp
PEER=$RDX_BUILD/tests/s3rdmapeer
BK=rxe-bucket

setup() {
	rxe_setup
	rxe_s3_env
}

# serve NAME [OPTIONS...]: rds3 -v OPTIONS serve $D/store on $RXE_ADDR at a
# free port ($SPORT, $SERVE_PID); the client's endpoint points at it.
serve() {
	local name=$1 i
	shift
	SPORT=$(free_port)
	bg_start "$name" "$RDS3" -v "$@" serve --listen "$RXE_ADDR" --port "$SPORT" "$D/store"
	SERVE_PID=$BG_PID
	for i in $(seq 1 $((T * 10))); do
		[ -s "$D/$name.out" ] && break
		alive "$SERVE_PID" || fail "rds3 serve $* exited: $(cat "$D/$name.err")"
		sleep 0.1
	done
	[ -s "$D/$name.out" ] || fail "rds3 serve $* printed no URL"
	export AWS_ENDPOINT_URL_S3=http://$RXE_ADDR:$SPORT
}

# rdma_sum NAME: the bytes server NAME's log says requests moved by RDMA.
rdma_sum() {
	grep -o ' rdma [0-9]*$' "$D/$1.err" | awk '{ s += $2 } END { print s + 0 }'
}

# by_rdma N: the client's last -v summary says N bytes by RDMA, 0 by HTTP.
by_rdma() {
	assert_match "$stderr" ": $1 bytes by RDMA, 0 by HTTP"
}

# still_serving NAME [OPTIONS...]: server NAME is alive and serves a fresh
# PUT and GET by RDMA (rds3 OPTIONS).
still_serving() {
	local name=$1
	shift
	alive "$SERVE_PID" || fail "rds3 serve is gone: $(tail -n 20 "$D/$name.err")"
	mkrand "$D/probe" 5000
	run_t "$RDS3" -v "$@" put "$D/probe" "s3://$BK/probe"
	assert_status 0
	by_rdma 5000
	run_t "$RDS3" -v "$@" get "s3://$BK/probe" "$D/probe.back"
	assert_status 0
	by_rdma 5000
	assert_same "$D/probe" "$D/probe.back"
}

# no_temps: nothing but objects (and owners, --users) under the store: no
# temporaries left.
no_temps() {
	local left
	left=$(find "$D/store" -name '.rds3-*' -not -path '*/.rds3-uploads*' -not -name .rds3-owner -print)
	[ -z "$left" ] || fail "temporaries left in the store: $left"
}

@test "put and get by RDMA: 0, 1, 4097 bytes and 3 MiB; both ends count the same bytes" {
	local n total=0
	serve srv --rdma
	run_t "$RDS3" mb "s3://$BK"
	assert_status 0
	for n in 0 1 4097 $((3 * 1024 * 1024 + 5)); do
		mkrand "$D/src$n" "$n"
		run_t "$RDS3" -v put "$D/src$n" "s3://$BK/k$n"
		assert_status 0
		[ "$n" -eq 0 ] || by_rdma "$n"
		run_t "$RDS3" -v get "s3://$BK/k$n" "$D/dst$n"
		assert_status 0
		[ "$n" -eq 0 ] || by_rdma "$n"
		assert_same "$D/src$n" "$D/dst$n"
		assert_same "$D/src$n" "$D/store/$BK/k$n"
		total=$((total + 2 * n))
	done
	[ "$(rdma_sum srv)" -eq "$total" ] || fail "the server moved $(rdma_sum srv) bytes by RDMA, want $total"
	no_temps
}

@test "64 MiB: a multipart upload and parallel ranged GETs by RDMA, byte-identical" {
	local n=$((64 * 1024 * 1024))
	serve srv --rdma
	run_t "$RDS3" mb "s3://$BK"
	mkrand "$D/big" "$n"
	run_t --secs $((3 * T)) "$RDS3" -v --part-size 8M --concurrency 4 put "$D/big" "s3://$BK/big"
	assert_status 0
	assert_match "$stderr" 'multipart upload'
	by_rdma "$n"
	run_t --secs $((3 * T)) "$RDS3" -v --part-size 8M --concurrency 4 get "s3://$BK/big" "$D/big.back"
	assert_status 0
	assert_match "$stderr" '8 ranges'
	by_rdma "$n"
	assert_same "$D/big" "$D/big.back"
	[ "$(rdma_sum srv)" -eq $((2 * n)) ]
	[ "$(grep -c 'PUT .*partNumber=.* 200 0 rdma ' "$D/srv.err")" -eq 8 ] || fail "not 8 parts by RDMA"
}

@test "stdin to put and cat to stdout by RDMA; rdcp FILE s3:// and back" {
	local n=$((2 * 1024 * 1024 + 3))
	serve srv --rdma
	run_t "$RDS3" mb "s3://$BK"
	mkrand "$D/src" "$n"
	run_t bash -c '"$1" -v put - "s3://$2/piped" <"$3"' _ "$RDS3" "$BK" "$D/src"
	assert_status 0
	by_rdma "$n"
	run_t bash -c '"$1" -v cat "s3://$2/piped" >"$3"' _ "$RDS3" "$BK" "$D/out"
	assert_status 0
	by_rdma "$n"
	assert_same "$D/src" "$D/out"
	run_t "$RDCP" -v "$D/src" "s3://$BK/viardcp"
	assert_status 0
	by_rdma "$n"
	run_t "$RDCP" -v "s3://$BK/viardcp" "$D/rdcp.back"
	assert_status 0
	by_rdma "$n"
	assert_same "$D/src" "$D/rdcp.back"
	[ "$(rdma_sum srv)" -eq $((4 * n)) ]
}

@test "sync of a tree down by RDMA, each worker on its own connection" {
	local f
	serve srv --rdma
	run_t "$RDS3" mb "s3://$BK"
	mkdir -p "$D/tree/a/b" "$D/back"
	mkrand "$D/tree/one" 1
	mkrand "$D/tree/a/mid" 70000
	mkrand "$D/tree/a/b/big" $((1024 * 1024 + 1))
	: >"$D/tree/a/empty"
	# Up one by one: sync and cp -r up keep each file's mtime in user
	# metadata, which the guest's tmpfs cannot hold (rds3 serve says 501).
	for f in one a/mid a/b/big a/empty; do
		run_t "$RDS3" put "$D/tree/$f" "s3://$BK/t/$f"
		assert_status 0
	done
	run_t "$RDS3" -v --jobs 4 sync "s3://$BK/t/" "$D/back"
	assert_status 0
	by_rdma $((1 + 70000 + 1024 * 1024 + 1))
	diff -r "$D/tree" "$D/back" || fail "the tree came back different"
	[ "$(rdma_sum srv)" -eq $((2 * (1 + 70000 + 1024 * 1024 + 1))) ]
}

@test "a server without --rdma: the same commands give the same results over HTTP; --rdma on exits 3" {
	local n=$((1024 * 1024 + 7))
	serve plain
	run_t "$RDS3" mb "s3://$BK"
	mkrand "$D/src" "$n"
	run_t "$RDS3" -v put "$D/src" "s3://$BK/k"
	assert_status 0
	run_t "$RDS3" -v get "s3://$BK/k" "$D/back"
	assert_status 0
	assert_same "$D/src" "$D/back"
	! grep -q ' rdma ' "$D/plain.err" || fail "bytes moved by RDMA without --rdma"
	run_t "$RDS3" --rdma --connect-timeout 2 get "s3://$BK/k" "$D/back2"
	assert_status 3
	assert_match "$stderr" '--rdma on: .*RDMA'
	[ ! -e "$D/back2" ] || fail "a file was left by the failed get"
	# The dc provider needs mlx5: Soft-RoCE says no, in one line.
	run_t "$RDS3" --rdma --rdma-dc get "s3://$BK/k" "$D/back2"
	assert_status 3
	assert_match "$stderr" '--rdma on: rxe0 is not an mlx5 \(ConnectX\) device: DC targets need one'
	[ ! -e "$D/back2" ] || fail "a file was left by the failed get"
}

@test "every way of declining brings the same request over HTTP, with the same result" {
	local mode n=$((1024 * 1024 + 9)) ppt
	serve srv --rdma --no-sign-request
	run_t "$RDS3" --no-sign-request mb "s3://$BK"
	mkrand "$D/src" "$n"
	ppt=$(free_port)
	echo s3-400 >"$D/mode"
	bg_start proxy python3 "$BATS_TEST_DIRNAME/decline.py" "$RXE_ADDR" "$ppt" "$SPORT" \
		"$D/mode" "$D/declined"
	wait_listen "$ppt" 60
	# via_proxy CMD...: rds3 CMD over HTTP through the proxy, RDMA to the server.
	via_proxy() {
		run_t env AWS_ENDPOINT_URL_S3="http://$RXE_ADDR:$ppt" RDS3_RDMA_PORT="$SPORT" \
			"$RDS3" --no-sign-request --retries 0 "$@"
	}
	for mode in s3-400 s3-501 s3-500 reply-501 ignore; do
		echo "$mode" >"$D/mode"
		via_proxy -v put "$D/src" "s3://$BK/$mode"
		assert_status 0
		assert_match "$stderr" ": 0 bytes by RDMA, $n by HTTP"
		via_proxy -v get "s3://$BK/$mode" "$D/back-$mode"
		assert_status 0
		assert_match "$stderr" ": 0 bytes by RDMA, $n by HTTP"
		assert_same "$D/src" "$D/back-$mode"
		assert_same "$D/src" "$D/store/$BK/$mode"
		[ "$(cat "$D/declined.$mode")" -ge 2 ] || fail "$mode: the proxy saw no token"
	done
	# A success that does not say what moved is no decline: a protocol
	# error, exit 3, never "no data".
	echo no-count >"$D/mode"
	via_proxy put "$D/src" "s3://$BK/bad"
	assert_status 3
	assert_match "$stderr" 'makes no sense'
	via_proxy get "s3://$BK/ignore" "$D/bad-back"
	assert_status 3
	assert_match "$stderr" 'makes no sense'
	[ ! -e "$D/bad-back" ] || fail "a file was left by the failed get"
	[ "$(rdma_sum srv)" -eq 0 ] || fail "declined requests moved bytes by RDMA"
}

@test "abuse: forged rkey, range past the buffer, malformed or replayed token: S3InvalidRdmaToken, nothing read or written; plain curl still served" {
	local tok bad url code
	serve srv --rdma --no-sign-request
	run_t "$RDS3" --no-sign-request mb "s3://$BK"
	mkrand "$D/obj" 3000
	run_t "$RDS3" --no-sign-request put "$D/obj" "s3://$BK/obj"
	assert_status 0
	url=http://$RXE_ADDR:$SPORT/$BK
	# A server with --rdma is still a plain S3 server: curl puts and gets.
	run_t curl -sf -T "$D/obj" "$url/by-curl"
	assert_status 0
	run_t curl -sf -o "$D/curl.back" "$url/by-curl"
	assert_status 0
	assert_same "$D/obj" "$D/curl.back"
	mkfifo "$D/peer.in"
	BG_STDIN=$D/peer.in bg_start peer env -u AWS_ACCESS_KEY_ID -u AWS_SECRET_ACCESS_KEY \
		"$PEER" "$RXE_ADDR:$SPORT" 4096
	exec 5>"$D/peer.in"
	wait_until 30 grep -q '^token ' "$D/peer.out" || fail "no token: $(cat "$D/peer.out" "$D/peer.err")"
	tok=$(sed -n 's/^token //p' "$D/peer.out")
	# cput NAME TOKEN LEN: an RDMA PutObject of LEN bytes with TOKEN.
	cput() {
		curl -s -o "$D/$1.xml" -w '%{http_code}' -X PUT -H 'Content-Length: 0' \
			-H "x-amz-rdma-token: $2" -H 'x-amz-rdma-agent: rdxfer' \
			-H "x-amz-decoded-content-length: $3" "$url/$1"
	}
	# A forged rkey (another value in the rkey field), a range past the
	# 1 MiB the connection registered, a malformed token.
	bad="${tok:0:26}$(printf %08x $((0x${tok:26:8} ^ 0x100)))${tok:34}"
	code=$(cput forged "$bad" 4096)
	[ "$code" = 400 ] && grep -q S3InvalidRdmaToken "$D/forged.xml" || fail "forged rkey: $code $(cat "$D/forged.xml")"
	bad="$(printf %016x $((0x${tok:0:16} + 1048000))):00001000${tok:25}"
	code=$(cput past "$bad" 4096)
	[ "$code" = 400 ] && grep -q S3InvalidRdmaToken "$D/past.xml" || fail "past the buffer: $code"
	code=$(cput junk "${tok:0:80}" 4096)
	[ "$code" = 400 ] && grep -q S3InvalidRdmaToken "$D/junk.xml" || fail "malformed: $code"
	# The size said twice must agree.
	code=$(cput twice "$tok" 4095)
	[ "$code" = 400 ] || fail "a decoded length other than the token's: $code"
	for k in forged past junk twice; do
		[ ! -e "$D/store/$BK/$k" ] || fail "object $k was written"
	done
	# A GET past nothing: the buffer is untouched by refused requests.
	echo "sum 4096" >&5
	wait_until 10 grep -q '^sum ' "$D/peer.out"
	[ "$(sed -n 's/^sum //p' "$D/peer.out")" = "$(head -c 4096 /dev/zero | tr '\0' P | sha256sum | cut -c1-64)" ] ||
		fail "the client's buffer changed"
	# The real token works: the server reads the client's 'P's ...
	code=$(cput good "$tok" 4096)
	[ "$code" = 200 ] || fail "a good token was refused: $code $(cat "$D/good.xml")"
	cmp -s "$D/store/$BK/good" <(head -c 4096 /dev/zero | tr '\0' P) || fail "the RDMA PUT stored other bytes"
	# ... and writes an object into its buffer.
	code=$(curl -s -o "$D/get.body" -w '%{http_code}' -H "x-amz-rdma-token: $tok" "$url/obj")
	[ "$code" = 200 ] && [ ! -s "$D/get.body" ] || fail "an RDMA GET: $code"
	echo "sum 3000" >&5
	two_sums() { [ "$(grep -c '^sum ' "$D/peer.out")" -eq 2 ]; }
	wait_until 10 two_sums
	[ "$(sed -n 's/^sum //p' "$D/peer.out" | tail -n 1)" = "$(sha256sum <"$D/obj" | cut -c1-64)" ] ||
		fail "the RDMA GET wrote other bytes"
	# Replayed once its connection closed: refused.
	echo close >&5
	wait_until 10 grep -q '^closed' "$D/peer.out"
	sleep 1
	code=$(cput replay "$tok" 4096)
	[ "$code" = 400 ] && grep -q S3InvalidRdmaToken "$D/replay.xml" || fail "replayed: $code"
	[ ! -e "$D/store/$BK/replay" ] || fail "the replayed token wrote an object"
	exec 5>&-
	still_serving srv --no-sign-request
	no_temps
}

@test "a wrong secret: the login is refused; auto goes over HTTP, on exits 3" {
	serve srv --rdma
	run_t "$RDS3" mb "s3://$BK"
	mkrand "$D/src" 100000
	run_t env AWS_SECRET_ACCESS_KEY=wrong "$RDS3" -v --rdma=on put "$D/src" "s3://$BK/k"
	assert_status 3
	assert_match "$stderr" '--rdma on: the server could not prove it holds the secret key'
	# auto: the same bad login, and the request itself is refused as any
	# wrongly signed one.
	run_t env AWS_SECRET_ACCESS_KEY=wrong "$RDS3" -v put "$D/src" "s3://$BK/k"
	assert_status 3
	assert_match "$stderr" 'SignatureDoesNotMatch'
	[ "$(rdma_sum srv)" -eq 0 ]
	still_serving srv
}

@test "the client killed mid-PUT and mid-GET: the server keeps serving, no partial object" {
	local n=$((32 * 1024 * 1024))
	serve srv --rdma
	run_t "$RDS3" mb "s3://$BK"
	mkrand "$D/big" "$n"
	bg_start put "$RDS3" -v --part-size 8M --concurrency 2 put "$D/big" "s3://$BK/cut"
	wait_until $T grep -q 'partNumber=.* rdma ' "$D/srv.err" || fail "no part moved: $(cat "$D/put.err")"
	kill -KILL "$BG_PID"
	[ ! -e "$D/store/$BK/cut" ] || fail "a partial object is visible"
	run_t "$RDS3" -v put "$D/big" "s3://$BK/whole"
	assert_status 0
	bg_start get "$RDS3" -v --part-size 8M --concurrency 2 get "s3://$BK/whole" "$D/cut.back"
	wait_until $T grep -q 'GET /rxe-bucket/whole 206 0 rdma' "$D/srv.err" || fail "no range moved"
	kill -KILL "$BG_PID"
	[ ! -e "$D/cut.back" ] || fail "the killed get left its final file"
	still_serving srv
	[ ! -e "$D/store/$BK/cut" ]
	no_temps
}

@test "abuse: a token of another user's connection (--users): S3InvalidRdmaToken, nothing read or written; its own user's request is served" {
	local tok code url two=rxe-two two_secret='rxe-two/Secret+2'
	# The environment's key is the first user, the peer logs in as the second.
	(umask 077 && printf '%s %s\n%s %s\n' "$AWS_ACCESS_KEY_ID" "$AWS_SECRET_ACCESS_KEY" \
		"$two" "$two_secret" >"$D/users")
	serve srv --rdma --users "$D/users"
	url=http://$RXE_ADDR:$SPORT
	run_t "$RDS3" mb "s3://$BK"
	assert_status 0
	mkrand "$D/obj" 3000
	run_t "$RDS3" --rdma=off put "$D/obj" "s3://$BK/obj"
	assert_status 0
	run_t env AWS_ACCESS_KEY_ID=$two AWS_SECRET_ACCESS_KEY=$two_secret "$RDS3" mb s3://rxe-two-bucket
	assert_status 0
	mkfifo "$D/peer.in"
	BG_STDIN=$D/peer.in bg_start peer env AWS_ACCESS_KEY_ID=$two AWS_SECRET_ACCESS_KEY=$two_secret \
		"$PEER" "$RXE_ADDR:$SPORT" 4096
	exec 5>"$D/peer.in"
	wait_until 30 grep -q '^token ' "$D/peer.out" || fail "no token: $(cat "$D/peer.out" "$D/peer.err")"
	tok=$(sed -n 's/^token //p' "$D/peer.out")
	grep -q "logged in as '$two'" "$D/srv.err" || fail "the login is not the second user's: $(cat "$D/srv.err")"
	# as KEY:SECRET NAME METHOD PATH [CURL ARGS]: a request signed (SigV4)
	# by KEY carrying the peer's token; its status, the body in $D/NAME.xml.
	as() {
		local who=$1 name=$2 method=$3 path=$4
		shift 4
		curl -s -o "$D/$name.xml" -w '%{http_code}' --aws-sigv4 aws:amz:us-east-1:s3 --user "$who" \
			-H 'x-amz-content-sha256: UNSIGNED-PAYLOAD' -H "x-amz-rdma-token: $tok" \
			-H 'x-amz-rdma-agent: rdxfer' -X "$method" "$@" "$url$path"
	}
	# The first user signs, the token names the second's connection: a PUT
	# (the server would READ the second user's buffer) and a GET (it would
	# WRITE the first user's object into it).
	code=$(as "$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY" cross-put PUT "/$BK/cross" \
		-H 'Content-Length: 0' -H 'x-amz-decoded-content-length: 4096')
	[ "$code" = 400 ] && grep -q S3InvalidRdmaToken "$D/cross-put.xml" ||
		fail "a PUT with another user's token: $code $(cat "$D/cross-put.xml")"
	[ ! -e "$D/store/$BK/cross" ] || fail "the other user's buffer was stored"
	code=$(as "$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY" cross-get GET "/$BK/obj")
	[ "$code" = 400 ] && grep -q S3InvalidRdmaToken "$D/cross-get.xml" ||
		fail "a GET with another user's token: $code $(cat "$D/cross-get.xml")"
	echo "sum 4096" >&5
	wait_until 10 grep -q '^sum ' "$D/peer.out"
	[ "$(sed -n 's/^sum //p' "$D/peer.out")" = "$(head -c 4096 /dev/zero | tr '\0' P | sha256sum | cut -c1-64)" ] ||
		fail "the second user's buffer changed"
	grep -q 'RDMA declined: no RDMA connection of this client' "$D/srv.err" || fail "$(cat "$D/srv.err")"
	# The same token, signed by its connection's user, is served: the
	# refusals above were the principal's, not the token's.
	code=$(as "$two:$two_secret" own-put PUT /rxe-two-bucket/own \
		-H 'Content-Length: 0' -H 'x-amz-decoded-content-length: 4096')
	[ "$code" = 200 ] || fail "the token's own user was refused: $code $(cat "$D/own-put.xml")"
	cmp -s "$D/store/rxe-two-bucket/own" <(head -c 4096 /dev/zero | tr '\0' P) || fail "the RDMA PUT stored other bytes"
	# A login with a key the file does not have is refused.
	run_t env AWS_ACCESS_KEY_ID=rxe-nobody AWS_SECRET_ACCESS_KEY=x "$PEER" "$RXE_ADDR:$SPORT" 4096
	assert_status 1
	assert_match "$output" '^failed '
	exec 5>&-
	[ "$(rdma_sum srv)" -eq 4096 ] || fail "the server moved $(rdma_sum srv) bytes by RDMA, want 4096"
	still_serving srv
	no_temps
}
