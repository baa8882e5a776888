#!/usr/bin/env bats
# The README's Layout section names exactly the folders under src/: a new
# layer gets its line there, and a line never names a folder that is gone.

load ../lib/common

# layout_section: the lines of README.md between "## Layout" and the next
# "## " heading.
layout_section() {
	sed -n '/^## Layout$/,/^## /p' "$BATS_TEST_DIRNAME/../../README.md"
}

@test "layout: every folder under src/ has its line in the README's Layout section" {
	local repo=$BATS_TEST_DIRNAME/../.. dir missing=
	section=$(layout_section)
	[ -n "$section" ] || fail "README.md has no '## Layout' section"
	while read -r dir; do
		grep -q "^${dir}/ " <<<"$section" || missing="$missing $dir/"
	done < <(cd "$repo" && find src -mindepth 1 -type d | sort)
	[ -z "$missing" ] || fail "folders missing from the README's Layout section:$missing"
}

@test "layout: every src/ folder the Layout section names exists" {
	local repo=$BATS_TEST_DIRNAME/../.. dir gone=
	while read -r dir; do
		[ -d "$repo/$dir" ] || gone="$gone $dir"
	done < <(layout_section | grep -o '^src/[^ ]*/')
	[ -z "$gone" ] || fail "the Layout section names folders that do not exist:$gone"
}
