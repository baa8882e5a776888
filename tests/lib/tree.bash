# Directory trees for the -r tests: one maker with every kind of entry,
# and one comparison (content with diff -r, then metadata: type, mode,
# size, mtime, symlink target, hard-link groups, sparseness).
# shellcheck disable=SC2034 # globals are used by the .bats files

# mktree DIR [NSMALL]: NSMALL (default 5000) small files of 0-3000 bytes
# spread over 350 directories, three 2-6 MiB files, symlinks (relative,
# absolute, dangling, to a directory), a hard-link group of three,
# empty directories, sparse files (64 MiB, 3 MiB, and 1 MiB of hole only),
# odd modes and hostile names.
mktree() {
	local dir=$1 n=${2:-5000} i d
	mkdir -p "$dir"
	# One mkdir and one awk for all the small files: a fork per file
	# would take minutes.
	local dirs=()
	for i in $(seq 0 349); do dirs+=("$dir/d$((i % 7))/s$((i % 50))"); done
	mkdir -p "${dirs[@]}"
	awk -v dir="$dir" -v n="$n" 'BEGIN {
		for (i = 1; i <= n; i++) {
			f = dir "/d" (i % 7) "/s" (i % 50) "/f" i
			len = (i * 7919) % 3001
			s = sprintf("%c", 65 + i % 26); line = ""
			while (length(line) < len) line = line s s s s s s s s s s s s s s s s
			printf "%s", substr(line, 1, len) > f
			close(f)
		}
	}'
	# 2, 4 and 6 MiB: the last two take the O_DIRECT path for big files.
	for i in 1 2 3; do head -c $((i * 2 * 1024 * 1024 + i)) /dev/urandom >"$dir/large$i"; done
	ln -s large1 "$dir/rel-link"
	ln -s /etc/hostname "$dir/abs-link"
	ln -s does-not-exist "$dir/dangling"
	ln -s d1 "$dir/dir-link"
	echo shared >"$dir/hard-a"
	ln "$dir/hard-a" "$dir/hard-b"
	ln "$dir/hard-a" "$dir/d2/hard-c"
	mkdir -p "$dir/empty" "$dir/nested/empty/deeper"
	truncate -s 64M "$dir/sparse"
	printf 'middle' | dd of="$dir/sparse" bs=1 seek=$((32 * 1024 * 1024)) conv=notrunc 2>/dev/null
	# Under 4 MiB (what the readers read ahead whole): data, a hole, data,
	# a hole to the end; and a file that is one hole.
	printf 'head' >"$dir/sparse-small"
	printf 'mid' | dd of="$dir/sparse-small" bs=1 seek=$((2 * 1024 * 1024)) conv=notrunc 2>/dev/null
	truncate -s 3M "$dir/sparse-small"
	truncate -s 1M "$dir/hole"
	echo private >"$dir/private"
	chmod 600 "$dir/private"
	echo readonly >"$dir/readonly"
	chmod 444 "$dir/readonly"
	echo exec >"$dir/script"
	chmod 751 "$dir/script"
	mkdir "$dir/closed"
	echo inside >"$dir/closed/inside"
	chmod 711 "$dir/closed"
	for name in "a b" "it's" "\$HOME" "semi;colon" "ünïcødé ✓" "-dash" "tab	x"; do
		echo "$name" >"$dir/$name"
	done
	touch -h -d '2001-02-03 04:05:06' "$dir/rel-link" "$dir/private"
	touch -d '1999-12-31 23:59:59' "$dir/empty"
}

# tree_listing DIR: one line per entry, sorted: path, type, mode, size (of
# files), mtime in seconds, symlink target.
tree_listing() {
	(cd "$1" && find . -mindepth 1 -printf '%P|%y|%m|%s|%TY%Tm%Td%TH%TM%TS|%l\n' |
		awk -F'|' 'BEGIN{OFS="|"} { if ($2 == "d" || $2 == "l") $4 = "-"; sub(/\..*/, "", $5); print }' |
		LC_ALL=C sort)
}

# assert_same_tree SRC DST: same content and metadata, hard links still
# linked, the sparse files still sparse, no temporaries left.
assert_same_tree() {
	local src=$1 dst=$2 a b
	diff -r --no-dereference "$src" "$dst" >&2 || fail "contents differ: $src $dst"
	a=$(tree_listing "$src")
	b=$(tree_listing "$dst")
	[ "$a" = "$b" ] || fail "metadata differs: $(diff <(echo "$a") <(echo "$b") | head -20)"
	[ "$(stat -c %i "$dst/hard-a")" = "$(stat -c %i "$dst/hard-b")" ] &&
		[ "$(stat -c %i "$dst/hard-a")" = "$(stat -c %i "$dst/d2/hard-c")" ] ||
		fail "hard links were not kept"
	[ "$(stat -c %b "$dst/sparse")" -lt 1024 ] || fail "sparse file written dense: $(stat -c %b "$dst/sparse") blocks"
	[ "$(stat -c %b "$dst/sparse-small")" -le 64 ] ||
		fail "small sparse file written dense: $(stat -c %b "$dst/sparse-small") blocks"
	[ "$(stat -c %b "$dst/hole")" -eq 0 ] || fail "a file of one hole got $(stat -c %b "$dst/hole") blocks"
	[ -z "$(find "$dst" -name '.*.rdx-*')" ] || fail "temporaries left: $(find "$dst" -name '.*.rdx-*')"
}
