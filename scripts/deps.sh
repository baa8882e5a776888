#!/usr/bin/env bash
# Installs the Debian packages rdxfer needs to build and test.
# Idempotent: packages already present are not touched, and apt-get runs
# only when something is missing.  Usage: scripts/deps.sh [build|test|bench]
set -euo pipefail

build_pkgs=(gcc make pkg-config libzstd-dev libssl-dev libcurl4-openssl-dev libexpat1-dev libxxhash-dev libibverbs-dev librdmacm-dev libssh-dev libarchive-dev ibverbs-providers iproute2 coreutils)
test_pkgs=(bats parallel valgrind openssh-server openssh-client openssl iproute2 nftables xxhash coreutils util-linux procps psmisc jq zsh man-db groff-base socat clang libclang-rt-14-dev nodejs awscli curl python3-boto3 s3fs)
# bench/stream.sh: iperf3 socat nc mbuffer; bench/s3.sh: rclone s3cmd
# (awscli is in test); bench/rdcp.sh: rsync (scp, ssh: openssh-client);
# bench/rxe.sh: perftest (ib_send_bw, ib_write_bw; the guests run the host's)
bench_pkgs=(iperf3 socat netcat-openbsd mbuffer time rclone s3cmd rsync perftest)

want=("${build_pkgs[@]}")
case "${1:-build}" in
build) ;;
test)
	want+=("${test_pkgs[@]}")
	# npm installs the S3 tests' server (tests/s3/setup.sh); some nodejs
	# builds bundle it, and Debian's npm would conflict with those.
	command -v npm >/dev/null 2>&1 || want+=(npm) ;;
bench)
	want+=("${test_pkgs[@]}" "${bench_pkgs[@]}")
	command -v npm >/dev/null 2>&1 || want+=(npm) ;;
*) echo "usage: $0 [build|test|bench]" >&2; exit 2 ;;
esac

missing=()
for p in "${want[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "deps: installing ${missing[*]}" >&2
sudo=
[ "$(id -u)" -eq 0 ] || sudo=sudo
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
