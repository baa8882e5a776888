#!/usr/bin/env bash
# bench/pack-tools.sh -- pack this machine's rdcp, rdsend, rdrecv and the
# tools bench/rdcp.sh compares them with (OpenSSH's ssh, scp, sshd,
# ssh-keygen; rsync; iproute2's ip and ss; GNU time), and perf and strace
# where this machine has them, with every shared
# library they load except glibc's, for a benchmark host that has no
# package manager or no network (a lent machine with many cores, say).
#
# With --s3, instead: rds3, GNU time and ss, and what bench/s3.sh
# (SERVER=rds3) compares rds3 with: rclone, and Debian's aws (awscli 2) and s3cmd with the Python 3.11
# they run on, relocated to /opt/rdx-tools/py (its standard library and
# only the dist-packages the two import), so that a host's own Python and
# its packages are neither used nor touched.
#
# Usage:   bash bench/pack-tools.sh [--s3] OUT.tar.xz
# There:   tar xJf OUT.tar.xz -C DIR && bash DIR/rdx-tools/install.sh
#          RDCP=/opt/rdx-tools/bin/rdcp bash bench/rdcp.sh
#          PATH=/opt/rdx-tools/bin:$PATH AWS=/opt/rdx-tools/bin/aws \
#            RDS3=/opt/rdx-tools/bin/rds3 SERVER=rds3 bash bench/s3.sh
#
# install.sh (root) puts rdxfer's tools (and the S3 clients) in
# /opt/rdx-tools/bin, copies each other tool to its usual path only where that path
# is empty, puts the libraries in /opt/rdx-tools/lib behind the host's own
# (ld.so.conf.d, last: a library the host has is the host's), and adds the
# user sshd needs for privilege separation.  The host's glibc must be at
# least as new as this machine's.
set -euo pipefail
s3=0
[ "${1:-}" != --s3 ] || { s3=1; shift; }
out=${1:?usage: pack-tools.sh [--s3] OUT.tar.xz}
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
tools=(/usr/sbin/sshd /usr/bin/ssh /usr/bin/scp /usr/bin/ssh-keygen
	/usr/bin/rsync /usr/bin/time /usr/bin/ip /usr/bin/ss)
ours=("$repo"/build/rdcp "$repo"/build/rdsend "$repo"/build/rdrecv)
# What Debian's aws and s3cmd import from /usr/lib/python3/dist-packages
# (every module loaded by bench/s3.sh's rows, recorded with a sitecustomize).
py_pkgs=(awscli awscrt _awscrt.cpython-311-x86_64-linux-gnu.so colorama cryptography
	_cffi_backend.cpython-311-x86_64-linux-gnu.so OpenSSL dateutil distro docutils
	jmespath prompt_toolkit wcwidth ruamel _ruamel_yaml.cpython-311-x86_64-linux-gnu.so
	six.py roman.py urllib3 _distutils_hack S3 magic)
if [ "$s3" -eq 1 ]; then
	# only what bench/s3.sh needs besides the host's coreutils and openssl
	tools=(/usr/bin/time /usr/bin/ss)
	ours=("$repo"/build/rds3)
	for f in /usr/bin/rclone /usr/bin/python3.11 /usr/bin/aws /usr/bin/s3cmd /usr/lib/file/magic.mgc; do
		[ -e "$f" ] || { echo "pack-tools: $f missing (scripts/deps.sh bench)" >&2; exit 1; }
	done
fi
for f in "${tools[@]}" "${ours[@]}"; do
	[ -x "$f" ] || { echo "pack-tools: $f missing (scripts/deps.sh bench; make)" >&2; exit 1; }
done
for f in /usr/bin/perf /usr/bin/strace; do
	[ "$s3" -eq 0 ] && [ -x "$f" ] && tools+=("$f")
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
sofiles=()
if [ "$s3" -eq 1 ]; then
	py=$t/py
	mkdir -p "$py/bin" "$py/lib/python3/dist-packages" "$py/scripts" "$t/root/usr/lib/file"
	cp /usr/bin/python3.11 "$py/bin/"
	# the standard library, less what no client imports
	(cd /usr/lib && tar cf - --exclude=__pycache__ --exclude=python3.11/test \
		--exclude=python3.11/idlelib --exclude=python3.11/tkinter \
		--exclude=python3.11/lib2to3 --exclude=python3.11/ensurepip \
		--exclude='python3.11/config-*' python3.11) | tar xf - -C "$py/lib"
	for p in "${py_pkgs[@]}"; do
		[ -e "/usr/lib/python3/dist-packages/$p" ] ||
			{ echo "pack-tools: dist-packages/$p missing (scripts/deps.sh bench)" >&2; exit 1; }
		(cd /usr/lib/python3/dist-packages && tar cf - --exclude=__pycache__ "$p") |
			tar xf - -C "$py/lib/python3/dist-packages"
	done
	for f in aws s3cmd; do
		cp "/usr/bin/$f" "$py/scripts/"
		printf '#!/bin/sh\nexec /opt/rdx-tools/py/bin/python3.11 /opt/rdx-tools/py/scripts/%s "$@"\n' \
			"$f" >"$t/bin/$f"
		chmod 755 "$t/bin/$f"
	done
	cp /usr/bin/rclone "$t/bin/"
	cp /usr/lib/file/magic.mgc "$t/root/usr/lib/file/" # python3-magic's libmagic
	mapfile -t sofiles < <(find "$py" -name '*.so' -o -name '*.so.*')
	sofiles+=("$py/bin/python3.11" /usr/lib/x86_64-linux-gnu/libmagic.so.1)
	cp -L /usr/lib/x86_64-linux-gnu/libmagic.so.1 "$t/lib/"
fi
# every library but glibc's own, resolved through symlinks
ldd "${tools[@]}" "${ours[@]}" "${sofiles[@]}" 2>/dev/null | awk '/=> \// {print $3}' | sort -u |
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
if [ -d "$here/py" ]; then
	rm -rf /opt/rdx-tools/py
	cp -a "$here/py" /opt/rdx-tools/py
	# the bytecode, once (the pack has none): each aws start would compile
	/opt/rdx-tools/py/bin/python3.11 -m compileall -q -j0 /opt/rdx-tools/py/lib >/dev/null || true
fi
mkdir -p /opt/rdx-tools/bin
cp "$here"/bin/* /opt/rdx-tools/bin/
id sshd >/dev/null 2>&1 || useradd -r -M -d /run/sshd -s /usr/sbin/nologin sshd
mkdir -p /run/sshd /var/empty
chmod 755 /run/sshd
EOS
XZ_OPT=-T0 tar cJf "$out" -C "$stage" rdx-tools
ls -l "$out"
