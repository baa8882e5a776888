#!/usr/bin/env bash
# rxe-vm.sh: run a script on real kernel verbs (Soft-RoCE, rdma_rxe) inside
# QEMU guest(s) booted from Debian's own kernel, under TCG (no KVM needed).
# The guests see the host's root read-only, so they run the host's freshly
# built binaries and rdma-core.  How it works: docs/RXE-VM.md.
#
#   scripts/rxe-vm.sh fetch                       fill the cache (idempotent)
#   scripts/rxe-vm.sh run [--two] SCRIPT [ARGS]   boot, run SCRIPT, exit with its status
#   scripts/rxe-vm.sh clean                       remove the cache
#
# Environment: RDX_RXE_CACHE (cache dir, default ~/.cache/rdxfer-rxe),
# RDX_RXE_LOG (console log, default $RDX_RXE_CACHE/last-run.log),
# RDX_RXE_TIMEOUT (seconds per run, default 300), RDX_RXE_VERBOSE=1 (stream
# the console), RDX_RXE_GRACE (seconds the second guest may outlive the
# first with --two, default 30), RDX_RXE_ACCEL (default tcg,thread=multi).
set -euo pipefail

prog=rxe-vm
CACHE=${RDX_RXE_CACHE:-${HOME:?HOME is not set}/.cache/rdxfer-rxe}
TIMEOUT=${RDX_RXE_TIMEOUT:-300}
GRACE=${RDX_RXE_GRACE:-30}
VERBOSE=${RDX_RXE_VERBOSE:-0}
ACCEL=${RDX_RXE_ACCEL:-tcg,thread=multi}
LOG=${RDX_RXE_LOG:-$CACHE/last-run.log}
TAIL_LINES=40

# Guest modules, loaded by insmod in this order after whatever each one
# depends on (read from the module's own modinfo; there is no modprobe or
# modules.dep in the guest).  crc32_generic first: rdma_rxe needs the crc32
# shash and nothing would autoload it.
MODULES=(crc32_generic virtio_ring virtio virtio_pci_modern_dev virtio_pci_legacy_dev
	virtio_pci 9pnet 9pnet_virtio netfs fscache 9p udp_tunnel ip6_udp_tunnel ib_core
	ib_uverbs rdma_rxe configfs ib_cm iw_cm rdma_cm rdma_ucm veth sch_netem failover
	net_failover virtio_net)

# Packages unpacked into $CACHE/host (run on the host) and $CACHE/guest.
# Libraries qemu-system-x86 needs that the host lacks are added at fetch time.
HOST_ROOTS=(qemu-system-x86 qemu-system-common qemu-system-data seabios cpio)
GUEST_ROOTS=(busybox-static) # + the kernel behind linux-image-amd64

RUNDIR=
STAGES=()
PIDS=()
TAILS=()
cleanup() {
	local p
	for p in "${PIDS[@]}" "${TAILS[@]}"; do
		kill "$p" 2>/dev/null || true
	done
	wait 2>/dev/null || true
	rm -rf "${STAGES[@]}" ${RUNDIR:+"$RUNDIR"}
}

die() {
	echo "$prog: $*" >&2
	exit 125
}
say() { echo "$prog: $*" >&2; }
bad_usage() {
	echo "$prog: $*" >&2
	exit 2
}
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

usage() {
	sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"
	exit "${1:-2}"
}

lock_cache() {
	case $CACHE in *,* | *[[:space:]]*) die "RDX_RXE_CACHE must not contain commas or spaces (qemu option syntax)" ;; esac
	mkdir -p "$CACHE"
	exec 9>"$CACHE/.lock"
	flock 9
}

# ---------------------------------------------------------------- fetch

is_installed() { dpkg-query -W -f='${db:Status-Abbrev}\n' "$1" 2>/dev/null | grep -q '^ii'; }

# apt-cache is slow (lists are decompressed on every call), so ask it about
# many packages at once.

# "pkg version" for each package with a candidate.
candidates() {
	apt-cache policy "$@" 2>/dev/null | awk '
		/^[^ ]/ { p = $1; sub(/:$/, "", p) }
		$1 == "Candidate:" && $2 != "(none)" { print p, $2 }'
}

# One line per dependency (Depends and Pre-Depends) of the packages given,
# the alternatives of an or-group on the same line.
dep_groups() {
	apt-cache depends --no-recommends --no-suggests --no-conflicts --no-breaks \
		--no-replaces --no-enhances "$@" 2>/dev/null |
		awk '$1 ~ /^\|?(Pre)?Depends:$/ {
			g = g (g == "" ? "" : " ") $2
			if ($1 !~ /^\|/) { print g; g = "" }
		}'
}

# Libraries (lib*) qemu-system-x86 needs, recursively, that are not
# installed on the host.  Non-library dependencies (qemu-system-common and
# the firmware) are in HOST_ROOTS; their own dependencies serve display,
# audio and USB modules a headless guest never loads.
missing_libs() {
	local -A seen=()
	local level=(qemu-system-x86) next group alt pick
	while [ ${#level[@]} -gt 0 ]; do
		next=()
		while read -r group; do
			pick=
			for alt in $group; do
				case $alt in '<'*) continue ;; esac
				if is_installed "$alt"; then
					pick=
					break
				fi
				[ -n "$pick" ] || pick=$alt
			done
			[ -n "$pick" ] || continue
			case $pick in lib*) ;; *) continue ;; esac
			[ -z "${seen[$pick]:-}" ] || continue
			seen[$pick]=1
			echo "$pick"
			next+=("$pick")
		done < <(dep_groups "${level[@]}")
		level=("${next[@]}")
	done
}

# Sets KPKG, KREL, HOST_SPEC and GUEST_SPEC (sorted "pkg=version" lines).
# Returns 1 when something cannot be resolved (stale or missing lists).
resolve() {
	local host guest cands p
	KPKG=$(apt-cache depends linux-image-amd64 2>/dev/null |
		awk '$1 == "Depends:" && $2 ~ /^linux-image-/ { print $2; exit }')
	[ -n "$KPKG" ] || return 1
	KREL=${KPKG#linux-image-}
	mapfile -t host < <(printf '%s\n' "${HOST_ROOTS[@]}"; missing_libs)
	guest=("$KPKG" "${GUEST_ROOTS[@]}")
	cands=$(candidates "${host[@]}" "${guest[@]}")
	for p in "${host[@]}" "${guest[@]}"; do
		grep -q "^$p " <<<"$cands" || return 1
	done
	HOST_SPEC=$(printf '%s\n' "${host[@]}" | LC_ALL=C sort -u |
		awk 'NR == FNR { v[$1] = $2; next } { print $1 "=" v[$1] }' <(echo "$cands") -)
	GUEST_SPEC=$(printf '%s\n' "${guest[@]}" | LC_ALL=C sort -u |
		awk 'NR == FNR { v[$1] = $2; next } { print $1 "=" v[$1] }' <(echo "$cands") -)
}

# The libraries qemu and its TCG module need must all resolve.
check_host_tree() {
	local dir=$1 lib missing
	lib=$(ld_path "$dir")
	[ -x "$dir/usr/bin/qemu-system-x86_64" ] || die "qemu-system-x86_64 missing from $dir"
	missing=$(for f in "$dir/usr/bin/qemu-system-x86_64" "$dir"/usr/lib/*/qemu/accel-tcg-x86_64.so; do
		LD_LIBRARY_PATH=$lib ldd "$f" | awk '/not found/ { print $1 }'
	done | sort -u)
	[ -z "$missing" ] || die "qemu needs libraries that are neither on the host nor fetched: $(echo "$missing" | tr '\n' ' ')(install the packages holding them)"
	[ -x "$dir/bin/cpio" ] || die "cpio missing from $dir"
}

check_guest_tree() {
	local dir=$1
	[ -f "$dir/boot/vmlinuz-$KREL" ] || die "no boot/vmlinuz-$KREL in $KPKG"
	[ -d "$dir/lib/modules/$KREL" ] || die "no lib/modules/$KREL in $KPKG"
	[ -x "$dir/bin/busybox" ] || die "no bin/busybox in busybox-static"
}

# Downloads and unpacks group $1 (host|guest) with specs $2 unless the cache
# already holds exactly those versions.  Returns 1 when a download fails.
fetch_group() {
	local name=$1 spec=$2 dir=$CACHE/$1 stage dl deb sandbox=() pkgs=()
	if [ -f "$dir/.stamp" ] && [ "$(cat "$dir/.stamp")" = "$spec" ]; then
		return 0
	fi
	stage=$(mktemp -d "$CACHE/.$name.XXXXXX")
	dl=$stage.debs
	STAGES+=("$stage" "$dl")
	mkdir "$dl"
	[ "$(id -u)" -ne 0 ] || sandbox=(-o APT::Sandbox::User=root)
	say "downloading $(echo "$spec" | wc -l) packages for $name: $(echo "$spec" | tr '\n' ' ')"
	mapfile -t pkgs <<<"$spec"
	if ! (cd "$dl" && apt-get download -q "${sandbox[@]}" "${pkgs[@]}" >&2); then
		rm -rf "$stage" "$dl"
		return 1
	fi
	for deb in "$dl"/*.deb; do
		dpkg-deb -x "$deb" "$stage" || die "dpkg-deb -x $deb failed"
	done
	rm -rf "$dl"
	"check_${name}_tree" "$stage"
	echo "$spec" >"$stage/.stamp"
	rm -rf "$dir"
	mv "$stage" "$dir"
	say "$name: unpacked into $dir ($(du -sh "$dir" | cut -f1))"
}

fetch_all() {
	resolve || return 1
	fetch_group host "$HOST_SPEC" || return 1
	fetch_group guest "$GUEST_SPEC" || return 1
	echo "$KREL" >"$CACHE/guest/.krel"
}

apt_update() {
	local sudo=
	[ "$(id -u)" -eq 0 ] || sudo=sudo
	say "apt-get update (package lists missing or stale)"
	$sudo apt-get update -qq >&2 || die "apt-get update failed"
}

# What resolution depends on: the package lists, what the host has installed
# and the package names asked for.
fetch_key() {
	{
		stat -c '%n %s %Y' /var/lib/apt/lists/*Packages* /var/lib/dpkg/status 2>/dev/null || true
		echo "${HOST_ROOTS[*]} ${GUEST_ROOTS[*]}"
	} | sha256sum | cut -c1-16
}

cmd_fetch() {
	local t0 key
	t0=$(now)
	[ "$(dpkg --print-architecture)" = amd64 ] || die "amd64 hosts only"
	for c in apt-get apt-cache dpkg-deb dpkg-query flock ldd; do
		command -v "$c" >/dev/null || die "$c not found (a Debian host is assumed)"
	done
	lock_cache
	# Resolution depends only on the package lists and on what the host has
	# installed: when neither changed since the last fetch, nothing to do.
	key=$(fetch_key)
	if [ -f "$CACHE/host/.stamp" ] && [ -f "$CACHE/guest/.krel" ] &&
		[ "$(cat "$CACHE/.fetched" 2>/dev/null)" = "$key" ]; then
		say "cache up to date in $CACHE: kernel $(cat "$CACHE/guest/.krel")"
		return 0
	fi
	if ! fetch_all; then
		apt_update
		fetch_all || die "cannot fetch the packages even after apt-get update"
		key=$(fetch_key)
	fi
	echo "$key" >"$CACHE/.fetched"
	say "cache ready in $CACHE: kernel $KREL ($(since "$t0") s)"
}

# ---------------------------------------------------------------- initramfs

ld_path() {
	local d out=
	for d in "$1"/usr/lib/*-linux-gnu "$1"/lib/*-linux-gnu; do
		[ -d "$d" ] && out=${out:+$out:}$d
	done
	echo "$out"
}

init_script() {
	cat <<'EOF'
#!/bin/busybox sh
# init of the rxe-vm initramfs (scripts/rxe-vm.sh): modules, host root over
# 9p, then chroot into it and run /run/rxevm/guest.sh from the job share.
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
exec </dev/console >/dev/console 2>&1
finish() {
	echo
	echo "RXEVM EXIT $1"
	sleep 0.3
	poweroff -f
}
fail() {
	echo
	echo "RXEVM SETUP FAIL: $*"
	finish 125
}
while read -r m; do
	insmod "/mods/$m" || fail "insmod $m"
done </modorder
mount -t 9p -o trans=virtio,version=9p2000.L,ro,msize=262144,cache=loose hostroot /host ||
	fail "cannot mount the host root over 9p"
mount -t proc proc /host/proc && mount -t sysfs sysfs /host/sys &&
	mount -t devtmpfs devtmpfs /host/dev || fail "cannot mount proc/sys/dev in /host"
mkdir -p /host/dev/shm /host/dev/pts
mount -t tmpfs -o mode=1777 shm /host/dev/shm && mount -t devpts devpts /host/dev/pts &&
	mount -t tmpfs -o mode=1777 tmp /host/tmp && mount -t tmpfs -o mode=755 run /host/run ||
	fail "cannot mount tmpfs on /host/tmp, /host/run"
mkdir /host/run/rxevm /host/run/rxevm.bin
mount -t 9p -o trans=virtio,version=9p2000.L,ro rxevmjob /host/run/rxevm ||
	fail "cannot mount the job share"
# A work tree under /tmp or /run (hidden by the tmpfs above) comes as its
# own share, mounted back at its path.
if [ -f /host/run/rxevm/cwd_share ]; then
	d=$(cat /host/run/rxevm/cwd_share)
	mkdir -p "/host$d" &&
		mount -t 9p -o trans=virtio,version=9p2000.L,ro,msize=262144,cache=loose rxevmcwd "/host$d" ||
		fail "cannot mount the work tree $d"
fi
cp /bin/busybox /host/run/rxevm.bin/busybox
chroot /host /bin/bash /run/rxevm/guest.sh
finish $?
EOF
}

modcat() {
	case $1 in
	*.xz) xz -dc "$1" ;;
	*.zst) zstd -qdc "$1" ;;
	*.gz) gzip -dc "$1" ;;
	*) cat "$1" ;;
	esac
}

# Appends module $1 to MODFILES after its dependencies.  Modules built into
# the kernel are skipped; a module missing from the kernel package is fatal.
add_module() {
	local m=$1 f d
	[ -z "${MOD_SEEN[$m]:-}" ] || return 0
	MOD_SEEN[$m]=1
	grep -Eq "/${m//_/[_-]}\.ko\$" "$MODDIR/modules.builtin" && return 0
	f=${MOD_PATH[$m]:-}
	[ -n "$f" ] || die "module $m not found under $MODDIR (kernel $KREL): the module list in $0 needs updating for this kernel"
	for d in $(modcat "$f" | tr '\0' '\n' | sed -n 's/^depends=//p' | tr ',' ' '); do
		add_module "$d"
	done
	MODFILES+=("$f")
}

# Builds (or reuses) the initramfs; sets INITRD.  Cached by the hash of the
# init, the module order and the contents of every file that goes in.
build_initrd() {
	local g=$CACHE/guest m f hash stage
	local -A MOD_SEEN=()
	MODFILES=()
	MODDIR=$g/lib/modules/$KREL
	local -A MOD_PATH=()
	while IFS= read -r f; do
		m=${f##*/}
		m=${m%.ko*}
		MOD_PATH[${m//-/_}]=$f
	done < <(find "$MODDIR" -type f -name '*.ko*')
	for m in "${MODULES[@]}"; do
		add_module "$m"
	done
	local files=("${MODFILES[@]}")
	hash=$({
		init_script
		printf '%s\n' "${files[@]##*/}"
		cat "${files[@]}" "$g/bin/busybox"
	} | sha256sum | cut -c1-16)
	INITRD=$CACHE/initrd/$hash.cpio
	[ -f "$INITRD" ] && return 0
	say "building initramfs $hash"
	mkdir -p "$CACHE/initrd"
	stage=$(mktemp -d "$CACHE/initrd/.stage.XXXXXX")
	STAGES+=("$stage" "$stage.part")
	mkdir -p "$stage"/{bin,sbin,proc,sys,dev,host,mods}
	cp "$g/bin/busybox" "$stage/bin/busybox"
	init_script >"$stage/init"
	chmod 755 "$stage/init"
	: >"$stage/modorder"
	for f in "${files[@]}"; do
		m=${f##*/}
		m=${m%.ko*}.ko
		modcat "$f" >"$stage/mods/$m"
		echo "$m" >>"$stage/modorder"
	done
	(cd "$stage" && find . -mindepth 1 | LC_ALL=C sort |
		"$CACHE/host/bin/cpio" -o -H newc -R 0:0 --reproducible --quiet) >"$stage.part"
	rm -rf "$stage"
	find "$CACHE/initrd" -maxdepth 1 -name '*.cpio' -delete
	mv "$stage.part" "$INITRD"
}

# ---------------------------------------------------------------- guest side

# Runs in the guest as bash, chrooted into the host's root; the job file
# beside it sets RXE_* and rxevm_script/args/cwd.
guest_script() {
	cat <<'EOF'
# guest side of scripts/rxe-vm.sh: network + rxe0, then the user's script.
set -u
. /run/rxevm/job || exit 125
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export HOME=/tmp TMPDIR=/tmp TERM=dumb
export RXE_ROLE RXE_ADDR RXE_PEER RXE_DEV RXE_NETDEV RXE_BUSYBOX=/run/rxevm.bin/busybox
setup_fail() {
	echo "RXEVM SETUP FAIL: $*"
	exit 125
}
for t in ip rdma; do
	command -v "$t" >/dev/null || setup_fail "$t not found on the host (install iproute2)"
done
ulimit -l unlimited 2>/dev/null || true
# devtmpfs has no /dev/fd or /dev/std*: bash process substitution (and so
# bats) needs them.
[ -e /dev/fd ] || ln -s /proc/self/fd /dev/fd
n=0
for f in stdin stdout stderr; do
	[ -e /dev/$f ] || ln -s /proc/self/fd/$n /dev/$f
	n=$((n + 1))
done
ip link set lo up || setup_fail "lo"
if [ "$RXE_ROLE" = single ]; then
	ip link add veth0 type veth peer name veth1 && ip addr add "$RXE_ADDR/24" dev veth0 &&
		ip link set veth1 up && ip link set veth0 up || setup_fail "veth pair"
else
	ip addr add "$RXE_ADDR/24" dev "$RXE_NETDEV" && ip link set "$RXE_NETDEV" up ||
		setup_fail "address on $RXE_NETDEV"
fi
rdma link add "$RXE_DEV" type rxe netdev "$RXE_NETDEV" || setup_fail "rdma link add $RXE_DEV"
# Port ACTIVE and the RoCE v2 GID of our IPv4 address (::ffff:a.b.c.d).
IFS=. read -r o1 o2 o3 o4 <<<"$RXE_ADDR"
want=$(printf '0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x' "$o1" "$o2" "$o3" "$o4")
port=/sys/class/infiniband/$RXE_DEV/ports/1
RXE_GID_INDEX=
for _ in $(seq 100); do
	for g in "$port"/gids/*; do
		[ "$(cat "$g" 2>/dev/null)" = "$want" ] || continue
		RXE_GID_INDEX=${g##*/}
		break
	done
	case $(cat "$port/state" 2>/dev/null) in *ACTIVE*) [ -z "$RXE_GID_INDEX" ] || break ;; esac
	sleep 0.1
done
[ -n "$RXE_GID_INDEX" ] || setup_fail "$RXE_DEV: no ACTIVE port with a GID for $RXE_ADDR"
export RXE_GID_INDEX
if [ "$RXE_ROLE" != single ]; then
	end=$(($(date +%s) + rxevm_peer_wait))
	while [ "$(date +%s)" -lt "$end" ]; do
		"$RXE_BUSYBOX" ping -c1 -W1 "$RXE_PEER" >/dev/null 2>&1 && break
		sleep 0.2
	done
	"$RXE_BUSYBOX" ping -c1 -W1 "$RXE_PEER" >/dev/null 2>&1 ||
		setup_fail "peer $RXE_PEER not reachable after ${rxevm_peer_wait}s"
fi
cd "$rxevm_cwd" 2>/dev/null || cd /
echo "rxe-vm guest $RXE_ROLE: $RXE_DEV on $RXE_NETDEV $RXE_ADDR gid $RXE_GID_INDEX, peer $RXE_PEER: $rxevm_name"
if [ -x "$rxevm_script" ]; then
	"$rxevm_script" "${rxevm_args[@]}"
else
	bash "$rxevm_script" "${rxevm_args[@]}"
fi
EOF
}

# ---------------------------------------------------------------- run

# write_job DIR ROLE ADDR PEER NETDEV SCRIPT [ARGS...]
write_job() {
	local dir=$1 role=$2 addr=$3 peer=$4 netdev=$5 script=$6 gscript
	shift 6
	mkdir -p "$dir"
	gscript=$script
	case $script in
	/tmp/* | /run/* | /dev/* | /proc/* | /sys/*)
		# hidden in the guest (tmpfs/proc/sys there): ship a copy
		cp -p "$script" "$dir/script"
		gscript=/run/rxevm/script
		;;
	esac
	guest_script >"$dir/guest.sh"
	case $PWD in
	/tmp/* | /run/*) printf '%s\n' "$PWD" >"$dir/cwd_share" ;;
	esac
	{
		printf 'RXE_ROLE=%q RXE_ADDR=%q RXE_PEER=%q RXE_NETDEV=%q RXE_DEV=rxe0\n' \
			"$role" "$addr" "$peer" "$netdev"
		printf 'rxevm_peer_wait=%q rxevm_cwd=%q rxevm_script=%q rxevm_name=%q\n' \
			60 "$PWD" "$gscript" "$script"
		printf 'rxevm_args=('
		[ $# -eq 0 ] || printf ' %q' "$@"
		printf ' )\n'
	} >"$dir/job"
}

# start_guest NAME SMP MEM JOBDIR LOG [QEMU ARGS...]; appends to PIDS.
start_guest() {
	local name=$1 smp=$2 mem=$3 job=$4 log=$5 h=$CACHE/host
	shift 5
	# shellcheck disable=SC2054 # commas belong to qemu's option syntax
	local cmd=(
		"$h/usr/bin/qemu-system-x86_64" -machine q35 -accel "$ACCEL" -cpu max
		-smp "$smp" -m "$mem" -nographic -no-reboot
		-kernel "$CACHE/guest/boot/vmlinuz-$KREL" -initrd "$INITRD"
		-append "console=ttyS0 rdinit=/init panic=-1 quiet no_timer_check mitigations=off rxevm.role=$name"
		-fsdev local,id=hostroot,path=/,security_model=none,readonly=on,multidevs=remap
		-device virtio-9p-pci,fsdev=hostroot,mount_tag=hostroot
		-fsdev "local,id=job,path=$job,security_model=none,readonly=on"
		-device virtio-9p-pci,fsdev=job,mount_tag=rxevmjob
		-L "$h/usr/share/qemu" -L "$h/usr/share/seabios"
		"$@"
	)
	if [ -f "$job/cwd_share" ]; then
		cmd+=(-fsdev "local,id=cwd,path=$PWD,security_model=none,readonly=on,multidevs=remap"
			-device virtio-9p-pci,fsdev=cwd,mount_tag=rxevmcwd)
	fi
	: >"$log"
	LD_LIBRARY_PATH=$(ld_path "$h") QEMU_MODULE_DIR=$(echo "$h"/usr/lib/*-linux-gnu/qemu) \
		timeout -k 5 "$TIMEOUT" "${cmd[@]}" </dev/null >"$log" 2>&1 &
	PIDS+=($!)
	if [ "$VERBOSE" = 1 ]; then
		tail -n +1 -f --pid=$! "$log" | clean_log -u | sed -u "s/^/$name| /" >&2 &
		TAILS+=($!)
	fi
}

# Console text without CRs and the terminal resets SeaBIOS sends.
clean_log() {
	sed "$@" -e 's/\r$//' -e 's/\x1bc/\n/g' -e 's/\x1b\[[0-9;?]*[A-Za-z]//g'
}

# guest_rc LOG QEMU_STATUS -> the guest's exit status (124: timeout, 125: no status)
guest_rc() {
	local rc
	rc=$(tr -d '\r' <"$1" | sed -n 's/.*RXEVM EXIT \([0-9]\{1,3\}\).*/\1/p' | tail -n1)
	if [ -n "$rc" ]; then
		echo "$rc"
	elif [ "$2" -eq 124 ] || [ "$2" -eq 137 ]; then
		echo 124
	else
		echo 125
	fi
}

WHY=
report() { # NAME LOG QEMU_STATUS RC SECONDS
	local why=$WHY
	WHY=
	if [ -z "$why" ] && ! grep -aq 'RXEVM EXIT' "$2"; then
		case $4 in
		124) why=" (timed out after ${TIMEOUT}s; RDX_RXE_TIMEOUT)" ;;
		*) why=" (no exit status from the guest; qemu exited with $3)" ;;
		esac
	fi
	say "guest $1: exit $4 in $5 s$why"
	if [ "$4" -ne 0 ]; then
		echo "----- last $TAIL_LINES lines of guest $1 console -----" >&2
		clean_log <"$2" | tail -n "$TAIL_LINES" >&2
		echo "-----" >&2
	fi
}

free_port() {
	local p
	for _ in $(seq 50); do
		p=$(shuf -i 20000-60999 -n 1)
		ss -Htan "sport = :$p" 2>/dev/null | grep -q . || {
			echo "$p"
			return 0
		}
	done
	die "no free TCP port found"
}

listening() { ss -Htln "sport = :$1" 2>/dev/null | grep -q .; }

host_preflight() {
	local t
	for t in timeout ss shuf sha256sum find; do
		command -v "$t" >/dev/null || die "$t not found on the host"
	done
	for t in bash ip rdma; do
		command -v "$t" >/dev/null || die "$t not found: the guest runs the host's $t (install iproute2)"
	done
	compgen -G '/usr/lib/*-linux-gnu/libibverbs/librxe-rdmav*.so' >/dev/null ||
		say "warning: no rxe provider for libibverbs on the host (install ibverbs-providers); verbs programs will find no device"
	case $TIMEOUT in '' | *[!0-9]*) die "RDX_RXE_TIMEOUT must be a number of seconds" ;; esac
	case $GRACE in '' | *[!0-9]*) die "RDX_RXE_GRACE must be a number of seconds" ;; esac
}

cmd_run() {
	local two=0 script t0 rc
	while [ $# -gt 0 ]; do
		case $1 in
		--two) two=1 ;;
		--) shift; break ;;
		-h | --help) usage 0 ;;
		-*) bad_usage "run: unknown option $1" ;;
		*) break ;;
		esac
		shift
	done
	[ $# -ge 1 ] || usage
	{ [ -f "$1" ] && [ -r "$1" ]; } || bad_usage "run: $1 is not a readable file"
	script=$(readlink -f -- "$1")
	shift
	host_preflight
	if [ ! -f "$CACHE/host/.stamp" ] || [ ! -f "$CACHE/guest/.krel" ]; then
		cmd_fetch
	fi
	KREL=$(cat "$CACHE/guest/.krel")
	lock_cache
	build_initrd
	exec 9>&-
	mkdir -p "$CACHE/runs" "$(dirname "$LOG")"
	RUNDIR=$(mktemp -d "$CACHE/runs/XXXXXX")
	t0=$(now)
	if [ $two = 0 ]; then
		write_job "$RUNDIR/single" single 192.0.2.1 192.0.2.1 veth0 "$script" "$@"
		start_guest single 2 2048 "$RUNDIR/single" "$RUNDIR/single.log" -nic none
		local qs=0
		wait "${PIDS[0]}" || qs=$?
		clean_log <"$RUNDIR/single.log" >"$LOG"
		rc=$(guest_rc "$LOG" "$qs")
		report single "$LOG" "$qs" "$rc" "$(since "$t0")"
		say "console log: $LOG"
		exit "$rc"
	fi

	# Two guests joined by a socket netdev on 127.0.0.1: a listens, b connects.
	write_job "$RUNDIR/a" a 192.0.2.1 192.0.2.2 eth0 "$script" "$@"
	write_job "$RUNDIR/b" b 192.0.2.2 192.0.2.1 eth0 "$script" "$@"
	local port tries=0 up
	while :; do
		port=$(free_port)
		start_guest a 1 1536 "$RUNDIR/a" "$RUNDIR/a.log" -nic none \
			-netdev "socket,id=n0,listen=127.0.0.1:$port" \
			-device virtio-net-pci,netdev=n0,mac=52:54:00:00:00:0a,romfile=
		up=0
		for _ in $(seq 100); do
			listening "$port" && up=1 && break
			kill -0 "${PIDS[0]}" 2>/dev/null || break
			sleep 0.1
		done
		[ $up = 0 ] || break
		kill "${PIDS[0]}" 2>/dev/null || true
		wait "${PIDS[0]}" || true
		PIDS=()
		tries=$((tries + 1))
		if [ $tries -ge 5 ]; then
			clean_log <"$RUNDIR/a.log" | tail -n "$TAIL_LINES" >&2
			die "guest a never listened on 127.0.0.1:$port"
		fi
	done
	start_guest b 1 1536 "$RUNDIR/b" "$RUNDIR/b.log" -nic none \
		-netdev "socket,id=n0,connect=127.0.0.1:$port" \
		-device virtio-net-pci,netdev=n0,mac=52:54:00:00:00:0b,romfile=

	# When one guest is done the other gets RDX_RXE_GRACE seconds more.
	local -A qs=() secs=()
	local done_pid left name i p
	wait -n -p done_pid "${PIDS[@]}" && qs[$done_pid]=0 || qs[$done_pid]=$?
	secs[$done_pid]=$(since "$t0")
	for p in "${PIDS[@]}"; do
		[ "$p" != "$done_pid" ] || continue
		left=$p
	done
	for _ in $(seq "$((GRACE * 10))"); do
		kill -0 "$left" 2>/dev/null || break
		sleep 0.1
	done
	local stopped=
	if kill -0 "$left" 2>/dev/null; then
		stopped=$left
		kill "$left" 2>/dev/null || true
	fi
	wait "$left" && qs[$left]=0 || qs[$left]=$?
	secs[$left]=$(since "$t0")
	{
		for name in a b; do
			echo "===== guest $name ====="
			clean_log <"$RUNDIR/$name.log"
		done
	} >"$LOG"
	rc=0
	i=0
	for name in a b; do
		p=${PIDS[$i]}
		i=$((i + 1))
		local r
		r=$(guest_rc "$RUNDIR/$name.log" "${qs[$p]}")
		if [ "$p" = "$stopped" ] && ! grep -aq 'RXEVM EXIT' "$RUNDIR/$name.log"; then
			r=124
			WHY=" (stopped ${GRACE}s after the other guest ended; RDX_RXE_GRACE)"
		fi
		report "$name" "$RUNDIR/$name.log" "${qs[$p]}" "$r" "${secs[$p]}"
		[ "$r" -le "$rc" ] || rc=$r
	done
	say "console log: $LOG"
	exit "$rc"
}

trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
case ${1:-} in
fetch)
	[ $# -eq 1 ] || usage
	cmd_fetch
	;;
run)
	shift
	cmd_run "$@"
	;;
clean)
	[ $# -eq 1 ] || usage
	rm -rf "$CACHE"
	;;
-h | --help | help) usage 0 ;;
*) usage ;;
esac
