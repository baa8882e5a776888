#!/usr/bin/env bash
# bench/pack-tools.sh -- pack this machine's rdcp, rdsend, rdrecv and the
# tools bench/rdcp.sh compares them with (OpenSSH's ssh, scp, sshd,
# ssh-keygen; rsync; iproute2's ip and ss; GNU time), and perf and strace
# where this machine has them, with every shared
# library they load except glibc's, for a benchmark host that has no
# package manager or no network (a lent machine with many cores, say).
#
# Usage:   bash bench/pack-tools.sh OUT.tar.xz
# There:   tar xJf OUT.tar.xz -C DIR && bash DIR/rdx-tools/install.sh
#          RDCP=DIR/rdx-tools/bin/rdcp bash bench/rdcp.sh
#
# install.sh (root) copies each tool to its usual path only where that path
# is empty, puts the libraries in /opt/rdx-tools/lib behind the host's own
# (ld.so.conf.d, last: a library the host has is the host's), and adds the
# user sshd needs for privilege separation.  The host's glibc must be at
# least as new as this machine's.
set -euo pipefail
out=${1:?usage: pack-tools.sh OUT.tar.xz}
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
tools=(/usr/sbin/sshd /usr/bin/ssh /usr/bin/scp /usr/bin/ssh-keygen
	/usr/bin/rsync /usr/bin/time /usr/bin/ip /usr/bin/ss)
ours=("$repo"/build/rdcp "$repo"/build/rdsend "$repo"/build/rdrecv)
for f in "${tools[@]}" "${ours[@]}"; do
	[ -x "$f" ] || { echo "pack-tools: $f missing (scripts/deps.sh bench; make)" >&2; exit 1; }
done
for f in /usr/bin/perf /usr/bin/strace; do
	[ -x "$f" ] && tools+=("$f")
done
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
t=$stage/rdx-tools
mkdir -p "$t/bin" "$t/lib" "$t/root"
cp "${ours[@]}" "$t/bin/"
for f in "${tools[@]}"; do
	mkdir -p "$t/root$(dirname "$f")"
	cp "$f" "$t/root$f"
done
# every library but glibc's own, resolved through symlinks
ldd "${tools[@]}" "${ours[@]}" 2>/dev/null | awk '/=> \// {print $3}' | sort -u |
	grep -vE '/(libc|libm|libresolv|libpthread|libdl|librt|ld-linux[^/]*)\.so' |
	while read -r lib; do cp -L "$lib" "$t/lib/"; done
cat >"$t/install.sh" <<'EOS'
#!/usr/bin/env bash
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
mkdir -p /opt/rdx-tools/lib
cp -n "$here"/lib/* /opt/rdx-tools/lib/
echo /opt/rdx-tools/lib >/etc/ld.so.conf.d/zz-rdx-tools.conf
ldconfig
(cd "$here/root" && find . -type f) | while read -r f; do
	f=${f#.}
	[ -e "$f" ] || { mkdir -p "$(dirname "$f")"; cp "$here/root$f" "$f"; }
done
id sshd >/dev/null 2>&1 || useradd -r -M -d /run/sshd -s /usr/sbin/nologin sshd
mkdir -p /run/sshd /var/empty
chmod 755 /run/sshd
EOS
tar cJf "$out" -C "$stage" rdx-tools
ls -l "$out"
