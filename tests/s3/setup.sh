#!/usr/bin/env bash
# Installs the S3 tests' node packages (s3rver, @smithy/signature-v4, ...)
# into tests/s3/node_modules from the pinned package-lock.json, once: a
# stamp of the lock file's hash skips the work when nothing changed.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
command -v npm >/dev/null || { echo "setup.sh: npm is not installed (scripts/deps.sh test)" >&2; exit 1; }
stamp=node_modules/.rdx-lock-sha256
want=$(sha256sum package-lock.json | cut -c1-64)
# Test files run side by side (tests/run.sh, RDX_JOBS) and each calls
# this: one installs while the others wait, then find the stamp.  npm ci
# empties node_modules first, so none may use it meanwhile.
exec 9>.rdx-setup.lock
flock 9
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
	exit 0
fi
npm ci --no-audit --no-fund --loglevel=error >&2
echo "$want" >"$stamp"
