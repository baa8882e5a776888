#!/usr/bin/env bash
# bench/s3-conformance.sh: run the public S3 conformance suite ceph/s3-tests
# (boto3 + pytest, s3tests/functional/test_s3.py) against `rds3 serve` and
# print total/passed/failed/errors/skipped plus the pass rate over a "core"
# subset (plain-S3 object, listing, multipart, range, copy, conditional,
# presigned, checksum operations), defined reproducibly below.
#
# Usage:
#   RDS3=./rds3 [S3TESTS=/path/to/s3-tests] [WORK=dir] bench/s3-conformance.sh
#
# Environment:
#   RDS3            the rds3 binary (required)
#   S3TESTS         an s3-tests checkout; default: $WORK/s3-tests, cloned from
#                   S3TESTS_REPO and checked out at S3TESTS_COMMIT
#   S3TESTS_REPO    default https://github.com/ceph/s3-tests.git
#   S3TESTS_COMMIT  default 8f0ae7b404a3a2fcf7038bf1e6bf29544fe9b6a3 (the
#                   commit the baseline was measured on; the core filter's
#                   explicit lists are checked against it)
#   WORK            work dir (venv, server dir and log, s3tests.conf,
#                   junit.xml, pytest.log, summary.txt); default ./s3conf-work
#   SCOPE           core (default: run only the core subset, 215 tests at
#                   8f0ae7b: ~6 min with the serial rerun on a 2-core machine
#                   at load 5) | all (every test in test_s3.py, 835 items with
#                   parameters: ~25 min there; the core numbers are then
#                   taken from the same run)
#   JOBS            pytest-xdist workers (default 2; 0 or 1: no xdist).  Tests
#                   that list all buckets (test_list_buckets_paginated, ...)
#                   see the other worker's buckets, so with JOBS>1 every core
#                   test that did not pass is rerun once serially
#                   (RERUN_SERIAL=1, the default) and the serial outcome
#                   counts; the summary lists every test whose outcome changed.
#   TEST_TIMEOUT    per-test timeout in seconds when pytest-timeout is there (120)
#   PYTHON          interpreter for the venv (default python3)
#   KEEP_BUCKETS=1  do not wipe the served directory before the run
#   CLEANUP_SHIM=0  do not load the cleanup shim (see below)
#   PORT            port for `rds3 serve` (default 0: any free one)
#   SERVE_ARGS      extra arguments for `rds3 serve` (e.g. for multi-user keys)
#   MAIN_KEY/MAIN_SECRET, ALT_KEY/ALT_SECRET, TENANT_KEY/TENANT_SECRET
#                   credentials written to s3tests.conf.  rds3 serve (b651bf4)
#                   serves ONE key, taken from AWS_ACCESS_KEY_ID /
#                   AWS_SECRET_ACCESS_KEY; by default alt and tenant are the
#                   main key, and the tests that need a second identity are
#                   left out of the core subset (MULTIUSER_DESELECT below).
#
# Python: s3-tests' requirements.txt is tried with pip first.  Where PyPI
# cannot be reached (the rdxfer machines reach only Debian's archive and npm),
# the venv is made with --system-site-packages from $PYTHON (on these
# machines pyenv's python3, which ships boto3/botocore 1.43) and whatever is
# still missing (pytest, munch, isodate, lxml, pytz, pytest-xdist,
# pytest-timeout) is taken from Debian 12 packages fetched with
# `apt-get download` and unpacked into $WORK/debs (no root, nothing installed
# system-wide).  Debian 12's own python3-boto3 (1.26/botocore 1.29) is too old
# for the conditional-write and checksum tests; it is used only when $PYTHON
# has no boto3 at all, with a warning.
#
# Cleanup shim: s3-tests empties buckets between tests by listing object
# versions (GET /BUCKET?versions).  Where a server answers that with a plain
# ListBucketResult (rds3 b651bf4 does), boto3 sees no versions, the bucket is
# never emptied, and DeleteBucket fails (409 BucketNotEmpty) in every teardown
# after a test that wrote an object, and in the next test's setup.  The
# shim (a pytest plugin written to $WORK/plugin) falls back to a plain
# ListObjects listing when the versions answer carries no <Version>/
# <DeleteMarker>/<ListVersionsResult>.  It changes no test, only cleanup.
set -euo pipefail

: "${RDS3:?set RDS3 to the rds3 binary}"
RDS3=$(readlink -f "$RDS3")
WORK=${WORK:-$PWD/s3conf-work}
S3TESTS_REPO=${S3TESTS_REPO:-https://github.com/ceph/s3-tests.git}
S3TESTS_COMMIT=${S3TESTS_COMMIT:-8f0ae7b404a3a2fcf7038bf1e6bf29544fe9b6a3}
SCOPE=${SCOPE:-core}
JOBS=${JOBS:-2}
TEST_TIMEOUT=${TEST_TIMEOUT:-120}
PYTHON=${PYTHON:-python3}
CLEANUP_SHIM=${CLEANUP_SHIM:-1}
NICE="nice -n 10"
MAIN_KEY=${MAIN_KEY:-0555b35654ad1656d804}
MAIN_SECRET=${MAIN_SECRET:-h7GhxuBLTrlhVUyxSPUKUV8r/2EI4ngqJxD7iBdBYLhwluN30JaT3Q==}
ALT_KEY=${ALT_KEY:-$MAIN_KEY};       ALT_SECRET=${ALT_SECRET:-$MAIN_SECRET}
TENANT_KEY=${TENANT_KEY:-$MAIN_KEY}; TENANT_SECRET=${TENANT_SECRET:-$MAIN_SECRET}

mkdir -p "$WORK"
WORK=$(readlink -f "$WORK")
log() { printf 's3-conformance: %s\n' "$*" >&2; }

# ---------------------------------------------------------------- the core subset
# Marker expression: markers from s3-tests' pytest.ini.  Each exclusion:
#   fails_on_aws            RGW-only behaviour or extensions AWS itself fails
#   versioning, delete_marker                     versioning (rds3: 501)
#   lifecycle*, cloud_*, target_by_bucket          lifecycle/transition/restore (501)
#   encryption, sse_s3, bucket_encryption          SSE-C/SSE-S3/SSE-KMS (501 / not served)
#   bucket_policy                                  bucket policies (501)
#   bucket_logging, bucket_logging_cleanup         server access logging (501)
#   tagging                                        object/bucket tagging
#   object_ownership                               ownership controls (ACL model)
#   iam_user, iam_account                          IAM users/accounts
CORE_MARKERS='not fails_on_aws and not versioning and not delete_marker
 and not lifecycle and not lifecycle_expiration and not lifecycle_transition
 and not cloud_transition and not cloud_restore and not target_by_bucket
 and not encryption and not sse_s3 and not bucket_encryption
 and not bucket_policy and not bucket_logging and not bucket_logging_cleanup
 and not tagging and not object_ownership and not iam_user and not iam_account'
# Name patterns (pytest -k: case-insensitive substrings of the test name),
# for tests of the same features that carry no marker:
#   version                versioning, versioned objects/copies, version ids
#   object_lock            object lock, retention, legal hold
#   acl, grant, public, access_bucket
#                          ACLs, grants, public-access-block, the ACL access matrix
#   policy                 bucket policy / policy status (POST-form policies are
#                          left out by post_object anyway)
#   sse, encrypt, kms, enc_conflict, test_copy_enc, test_copy_part_enc
#                          server-side encryption
#   lifecycle, restore, read_through                lifecycle, cloud tier restore
#   tagging, tags          object/bucket tagging (not "tag": ETag tests stay)
#   cors                   CORS configuration and preflight
#   logging                bucket logging
#   tenant                 RGW tenants
#   ownership              bucket ownership controls
#   torrent, usage         RGW torrent and usage-statistics extensions
#   post_object            browser-form POST uploads (S3 POST policy): not a
#                          core operation; rds3 does not serve POST object
CORE_K='not version and not object_lock and not acl and not grant and not public
 and not access_bucket and not policy and not sse and not encrypt and not kms
 and not enc_conflict and not test_copy_enc and not test_copy_part_enc
 and not lifecycle and not restore and not read_through and not tagging
 and not tags and not cors and not logging and not tenant and not ownership
 and not torrent and not usage and not post_object'
# Explicit deselections (exact test names, matched by the small plugin
# rds3_s3tests_select below: pytest's own --deselect matches node-id
# prefixes, and test_object_raw_get would also drop test_object_raw_get_x_*):
# ACL-dependent: the test needs a public canned ACL to take effect for an
# unsigned client, or reads an ACL back (rds3 has no ACLs):
ACL_DESELECT='test_bucket_list_return_data test_bucket_list_objects_anonymous
 test_bucket_listv2_objects_anonymous test_expected_bucket_owner
 test_object_raw_get test_object_raw_get_bucket_gone
 test_object_delete_key_bucket_gone test_object_raw_get_object_gone
 test_object_anon_put_write_access test_100_continue
 test_bucket_create_special_key_names test_object_raw_authenticated
 test_object_raw_authenticated_bucket_gone test_object_raw_authenticated_object_gone
 test_object_raw_get_x_amz_expires_not_expired test_object_raw_get_x_amz_expires_out_max_range
 test_object_raw_get_x_amz_expires_out_positive_range
 test_object_raw_get_x_amz_expires_out_range_zero test_list_multipart_upload_owner
 test_object_copy_not_owned_object_bucket'
# (test_bucket_create_special_key_names: all but its closing PutObjectAcl is core;
#  test_100_continue: its second half needs a public-read-write bucket ACL;
#  test_object_raw_*: their bucket is made public-read first, which rds3 serve
#  refuses (501) rather than ignores; test_list_multipart_upload_owner and
#  test_object_copy_not_owned_object_bucket put a bucket ACL)
# Versioning-dependent conditional writes (they enable versioning first):
VERSIONING_DESELECT='test_put_current_object_if_none_match
 test_multipart_put_current_object_if_none_match test_put_current_object_if_match
 test_multipart_put_current_object_if_match test_put_object_current_if_match'
# Need a second identity (alt user denied, other owner): only deselected when
# the alt key is the main key:
MULTIUSER_DESELECT='test_bucket_create_exists_nonowner
 test_object_copy_not_owned_bucket'

TESTFILE=s3tests/functional/test_s3.py
core_args() {
    local t
    printf '%s\0' -m "$(echo $CORE_MARKERS)" -k "$(echo $CORE_K)"
    for t in $ACL_DESELECT $VERSIONING_DESELECT; do printf '%s\0' --deselect-name "$t"; done
    if [ "$ALT_KEY" = "$MAIN_KEY" ]; then
        for t in $MULTIUSER_DESELECT; do printf '%s\0' --deselect-name "$t"; done
    fi
}

# ---------------------------------------------------------------- s3-tests checkout
if [ -z "${S3TESTS:-}" ]; then
    S3TESTS=$WORK/s3-tests
    if [ ! -d "$S3TESTS/.git" ]; then
        log "cloning $S3TESTS_REPO"
        git clone -q "$S3TESTS_REPO" "$S3TESTS"
    fi
    git -C "$S3TESTS" checkout -q "$S3TESTS_COMMIT"
fi
S3TESTS=$(readlink -f "$S3TESTS")
[ -f "$S3TESTS/$TESTFILE" ] || { log "no $TESTFILE under $S3TESTS"; exit 2; }
S3_COMMIT=$(git -C "$S3TESTS" rev-parse HEAD 2>/dev/null || echo unknown)
[ "$S3_COMMIT" = "$S3TESTS_COMMIT" ] ||
    log "warning: s3-tests is at $S3_COMMIT, the core filter was checked at $S3TESTS_COMMIT"

# ---------------------------------------------------------------- python env
VENV=$WORK/venv
PY=$VENV/bin/python
need_mods='boto3 botocore pytest munch isodate lxml.etree pytz yaml dateutil requests'
have_mod() { "$PY" -c "import $1" >/dev/null 2>&1; }
env_ok() { local m; for m in $need_mods; do have_mod "$m" || return 1; done; }

if [ ! -x "$PY" ]; then
    log "creating venv $VENV from $PYTHON"
    $NICE "$PYTHON" -m venv --system-site-packages "$VENV"
fi
if ! env_ok; then
    log "pip install -r requirements.txt"
    if $NICE "$PY" -m pip install -q --retries 0 --timeout 15 -r "$S3TESTS/requirements.txt" \
            pytest-xdist pytest-timeout >"$WORK/pip.log" 2>&1; then
        log "pip: ok"
    else
        why=$(grep -m1 -oE 'Errno -?[0-9]+\] [A-Za-z ]+' "$WORK/pip.log" || grep -m1 ERROR "$WORK/pip.log" || tail -1 "$WORK/pip.log")
        log "pip failed, PyPI unreachable or a package missing ($why): using Debian packages"
        declare -A deb=( [pytest]="python3-pytest python3-pluggy python3-iniconfig python3-packaging python3-py"
            [munch]=python3-munch [isodate]=python3-isodate [lxml.etree]=python3-lxml
            [pytz]=python3-tz [yaml]=python3-yaml [dateutil]=python3-dateutil
            [requests]="python3-requests python3-urllib3 python3-idna python3-certifi python3-charset-normalizer python3-chardet"
            [boto3]="python3-boto3 python3-botocore python3-s3transfer python3-jmespath"
            [xdist]="python3-pytest-xdist python3-execnet" [pytest_timeout]=python3-pytest-timeout )
        pkgs=
        for m in $need_mods xdist pytest_timeout; do
            [ "$m" = botocore ] && continue
            have_mod "$m" || pkgs="$pkgs ${deb[$m]}"
        done
        case " $pkgs " in *" python3-boto3 "*)
            log "warning: $PYTHON has no boto3; Debian 12's boto3 1.26/botocore 1.29 is older than"
            log "         s3-tests expects: IfNoneMatch/IfMatch and checksum tests fail client-side" ;; esac
        mkdir -p "$WORK/debs"
        (cd "$WORK/debs" && $NICE apt-get download $pkgs >"$WORK/apt.log" 2>&1) ||
            { log "apt-get download failed, see $WORK/apt.log"; exit 2; }
        for f in "$WORK"/debs/*.deb; do dpkg -x "$f" "$WORK/debs/root"; done
        site=$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
        echo "$WORK/debs/root/usr/lib/python3/dist-packages" >"$site/zz-s3conf-debian.pth"
    fi
    env_ok || { log "python env still lacks one of: $need_mods"; exit 2; }
fi
"$PY" - >"$WORK/env.txt" <<'EOF'
import sys, boto3, botocore, pytest, lxml.etree
print("python", sys.version.split()[0], sys.executable)
print("boto3", boto3.__version__, "botocore", botocore.__version__, "pytest", pytest.__version__)
for m in ("xdist", "pytest_timeout", "awscrt"):
    try:
        mod = __import__(m); print(m, getattr(mod, "__version__", "present"))
    except Exception:
        print(m, "absent")
EOF
log "$(tr '\n' ';' <"$WORK/env.txt")"

# ---------------------------------------------------------------- cleanup shim
mkdir -p "$WORK/plugin"
cat >"$WORK/plugin/rds3_s3tests_shim.py" <<'EOF'
"""Loaded with -p: makes s3-tests' bucket cleanup work on servers whose
GET ?versions answer is not a ListVersionsResult (changes no test)."""
import sys

def _patch():
    f = sys.modules.get("s3tests.functional")
    if f is None or getattr(f, "_rds3_shim", False):
        return
    from botocore.exceptions import ClientError
    orig = f.list_versions
    def list_versions(client, bucket, batch_size):
        raw = {}
        def grab(http_response, **kw):
            raw["body"] = http_response.content
        client.meta.events.register("after-call.s3.ListObjectVersions", grab)
        try:
            client.list_object_versions(Bucket=bucket, MaxKeys=batch_size)
            versioned = b"ListVersionsResult" in raw.get("body", b"")
        except ClientError:
            versioned = False
        finally:
            client.meta.events.unregister("after-call.s3.ListObjectVersions", grab)
        if versioned:
            yield from orig(client, bucket, batch_size)
            return
        marker = ""
        while True:
            r = client.list_objects(Bucket=bucket, MaxKeys=batch_size, Marker=marker)
            keys = [o["Key"] for o in r.get("Contents", [])]
            if keys:
                yield [{"Key": k} for k in keys]
            if not r.get("IsTruncated") or not keys:
                break
            marker = r.get("NextMarker") or keys[-1]
    f.list_versions = list_versions
    f._rds3_shim = True

def pytest_collection_finish(session):
    _patch()

def pytest_runtest_setup(item):
    _patch()
EOF

cat >"$WORK/plugin/rds3_s3tests_select.py" <<'EOF'
"""Loaded with -p: --deselect-name NAME deselects the tests whose function
name is exactly NAME (all its parametrizations)."""
def pytest_addoption(parser):
    parser.addoption("--deselect-name", action="append", default=[],
                     help="deselect tests whose function name is exactly this")

def pytest_collection_modifyitems(session, config, items):
    names = set(config.getoption("deselect_name") or ())
    if not names:
        return
    keep, drop = [], []
    for it in items:
        (drop if getattr(it, "originalname", it.name) in names else keep).append(it)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep
EOF

# ---------------------------------------------------------------- rds3 serve
DATA=$WORK/data
[ "${KEEP_BUCKETS:-0}" = 1 ] || rm -rf "$DATA"
mkdir -p "$DATA"
"$RDS3" --version >"$WORK/rds3-version.txt" 2>&1 || true
"$RDS3" serve --help >"$WORK/serve-help.txt" 2>&1 || true
if [ "$ALT_KEY" = "$MAIN_KEY" ]; then
    if grep -qiE -- '--(users?|keys?|credentials)[ =]' "$WORK/serve-help.txt"; then
        log "note: serve --help mentions more keys; set SERVE_ARGS and ALT_KEY/ALT_SECRET to use them"
    fi
    log "one key: [s3 alt] and [s3 tenant] use the main key; second-identity tests deselected from core"
fi
SERVER_PID=
stop_server() {
    if [ -n "$SERVER_PID" ] && kill -0 "$SERVER_PID" 2>/dev/null; then
        kill -TERM "$SERVER_PID" 2>/dev/null || true
        wait "$SERVER_PID" 2>/dev/null || true
    fi
}
trap stop_server EXIT
: >"$WORK/serve.url"; : >"$WORK/empty.aws"
env -u AWS_PROFILE -u AWS_SESSION_TOKEN -u AWS_ENDPOINT_URL \
    AWS_ACCESS_KEY_ID="$MAIN_KEY" AWS_SECRET_ACCESS_KEY="$MAIN_SECRET" \
    AWS_CONFIG_FILE="$WORK/empty.aws" AWS_SHARED_CREDENTIALS_FILE="$WORK/empty.aws" \
    $NICE "$RDS3" -vv serve --port "${PORT:-0}" ${SERVE_ARGS:-} "$DATA" \
    >"$WORK/serve.url" 2>"$WORK/serve.log" &
SERVER_PID=$!
for _ in $(seq 100); do
    grep -q '^http' "$WORK/serve.url" && break
    kill -0 "$SERVER_PID" 2>/dev/null || { log "rds3 serve exited:"; cat "$WORK/serve.log" >&2; exit 2; }
    sleep 0.1
done
URL=$(grep -m1 '^http' "$WORK/serve.url") || { log "rds3 serve printed no URL"; exit 2; }
PORT_USED=${URL##*:}; PORT_USED=${PORT_USED%%/*}
log "rds3 serve (pid $SERVER_PID) at $URL, data $DATA, log $WORK/serve.log"

# ---------------------------------------------------------------- s3tests.conf
cat >"$WORK/s3tests.conf" <<EOF
[DEFAULT]
host = 127.0.0.1
port = $PORT_USED
is_secure = False
ssl_verify = False

[fixtures]
bucket prefix = rds3-{random}-

[s3 main]
display_name = rds3 main
user_id = rds3main
email = main@example.com
api_name = default
access_key = $MAIN_KEY
secret_key = $MAIN_SECRET

[s3 alt]
display_name = rds3 alt
user_id = rds3alt
email = alt@example.com
access_key = $ALT_KEY
secret_key = $ALT_SECRET

[s3 tenant]
display_name = rds3 tenant
user_id = rds3tenant
email = tenant@example.com
access_key = $TENANT_KEY
secret_key = $TENANT_SECRET
tenant = testx

[iam]
email = iam@example.com
user_id = rds3iam
access_key = $MAIN_KEY
secret_key = $MAIN_SECRET
display_name = rds3 iam

[iam root]
access_key = $MAIN_KEY
secret_key = $MAIN_SECRET
user_id = RGW11111111111111111
email = root@example.com

[iam alt root]
access_key = $ALT_KEY
secret_key = $ALT_SECRET
user_id = RGW22222222222222222
email = altroot@example.com
EOF
# path-style addressing (boto3 also picks it for an IP endpoint), us-east-1
printf '[default]\nregion = us-east-1\ns3 =\n    addressing_style = path\n' >"$WORK/aws.config"

# ---------------------------------------------------------------- pytest
run_env=(env -u AWS_ACCESS_KEY_ID -u AWS_SECRET_ACCESS_KEY -u AWS_SESSION_TOKEN -u AWS_PROFILE
    -u AWS_ENDPOINT_URL -u AWS_ENDPOINT_URL_S3 -u AWS_REQUEST_CHECKSUM_CALCULATION
    -u AWS_RESPONSE_CHECKSUM_VALIDATION
    S3TEST_CONF="$WORK/s3tests.conf" AWS_CONFIG_FILE="$WORK/aws.config"
    AWS_SHARED_CREDENTIALS_FILE="$WORK/empty.aws" PYTHONPATH="$WORK/plugin" PYTHONDONTWRITEBYTECODE=1)
common=(-p no:cacheprovider -o "junit_family=xunit1" -p rds3_s3tests_select)
[ "$CLEANUP_SHIM" = 1 ] && common+=(-p rds3_s3tests_shim)

mapfile -d '' CORE < <(core_args)
( cd "$S3TESTS" && "${run_env[@]}" "$PY" -m pytest "${common[@]}" --collect-only -q "${CORE[@]}" "$TESTFILE" ) \
    2>&1 | grep '::' | sed 's/.*:://' >"$WORK/core-tests.txt"
log "core subset: $(wc -l <"$WORK/core-tests.txt") tests (list: $WORK/core-tests.txt)"

run=(-rA --junitxml="$WORK/junit.xml")
rm -f "$WORK/junit-rerun.xml" "$WORK/pytest-rerun.log"
parallel=0
if [ "$JOBS" -gt 1 ] && have_mod xdist; then run+=(-n "$JOBS"); parallel=1; fi
have_mod pytest_timeout && run+=(--timeout "$TEST_TIMEOUT")
[ "$SCOPE" = core ] && run+=("${CORE[@]}")
printf '%q ' "${run_env[@]}" "$PY" -m pytest "${common[@]}" "${run[@]}" "$TESTFILE" >"$WORK/command.txt"
echo >>"$WORK/command.txt"
log "pytest (SCOPE=$SCOPE) -> $WORK/pytest.log"
start=$(date +%s)
( cd "$S3TESTS" && $NICE "${run_env[@]}" "$PY" -m pytest "${common[@]}" "${run[@]}" "$TESTFILE" ) \
    >"$WORK/pytest.log" 2>&1 || true
log "pytest took $(( $(date +%s) - start )) s: $(tail -1 "$WORK/pytest.log")"
if [ "$parallel" = 1 ] && [ "${RERUN_SERIAL:-1}" = 1 ]; then
    mapfile -t again < <("$PY" - "$WORK/junit.xml" "$TESTFILE" "$WORK/core-tests.txt" <<'EOF'
import sys, xml.etree.ElementTree as ET
core = set(l.strip() for l in open(sys.argv[3]))
for tc in ET.parse(sys.argv[1]).iter("testcase"):
    if tc.get("name") in core and any(c.tag in ("failure", "error") for c in tc):
        print(sys.argv[2] + "::" + tc.get("name"))
EOF
    )
    if [ "${#again[@]}" -gt 0 ]; then
        log "rerunning ${#again[@]} failed core tests serially -> $WORK/pytest-rerun.log"
        start=$(date +%s)
        tmo=(); have_mod pytest_timeout && tmo=(--timeout "$TEST_TIMEOUT")
        ( cd "$S3TESTS" && $NICE "${run_env[@]}" "$PY" -m pytest "${common[@]}" -p no:xdist -rA \
            --junitxml="$WORK/junit-rerun.xml" "${tmo[@]}" "${again[@]}" ) >"$WORK/pytest-rerun.log" 2>&1 || true
        log "serial rerun took $(( $(date +%s) - start )) s: $(tail -1 "$WORK/pytest-rerun.log")"
    fi
fi
stop_server

# ---------------------------------------------------------------- summary
"$PY" - "$WORK" "$S3_COMMIT" "$RDS3" >"$WORK/summary.txt" <<'EOF'
import sys, os, re, collections, xml.etree.ElementTree as ET
work, commit, rds3 = sys.argv[1:4]
core = set(l.strip() for l in open(os.path.join(work, "core-tests.txt")) if l.strip())
def load(path):
    res = {}
    for tc in ET.parse(path).iter("testcase"):
        name = tc.get("name")
        kids = {c.tag: c for c in tc}
        if "failure" in kids:
            out, why = "failed", kids["failure"].get("message", "")
        elif "error" in kids:
            msg = kids["error"].get("message", "")
            out = "error-teardown" if "teardown" in msg else "error"
            why = msg
        elif "skipped" in kids:
            out, why = "skipped", kids["skipped"].get("message", "")
        else:
            out, why = "passed", ""
        if name in res and res[name][0] == "failed":
            continue
        res[name] = (out, why)
    return res
res = load(os.path.join(work, "junit.xml"))
changed = []
rerun = os.path.join(work, "junit-rerun.xml")
if os.path.exists(rerun):
    for name, r in load(rerun).items():
        if name in res and res[name][0] != r[0]:
            changed.append((name, res[name][0], r[0]))
        res[name] = r
def stats(names):
    c = collections.Counter(res[n][0] for n in names)
    return c, len(names)
def line(label, names):
    c, n = stats(names)
    errs = c["error"] + c["error-teardown"]
    ran = n - c["skipped"]
    rate = 100.0 * c["passed"] / ran if ran else 0.0
    return (f"{label}: total {n}  passed {c['passed']}  failed {c['failed']}  "
            f"errors {errs} (teardown {c['error-teardown']})  skipped {c['skipped']}  "
            f"pass rate {c['passed']}/{ran} = {rate:.1f}%")
print(f"rds3: {rds3}")
print(f"s3-tests: {commit}")
print(line("ran  ", list(res)))
missing = sorted(core - set(res))
print(line("core ", [n for n in core if n in res]) + (f"  (not run: {len(missing)})" if missing else ""))
if changed:
    print(f"\noutcome changed on the serial rerun ({len(changed)}; the serial one counts):")
    for n, a, b in sorted(changed):
        print(f"  {n}: {a} -> {b}")
bad = sorted(n for n in core if n in res and res[n][0] not in ("passed", "skipped"))
if bad:
    print(f"\nfailing core tests ({len(bad)}):")
    for n in bad:
        out, why = res[n]
        why = re.sub(r"\s+", " ", why)[:160]
        print(f"  {out:14s} {n}: {why}")
EOF
cat "$WORK/summary.txt"
log "junit: $WORK/junit.xml (+ junit-rerun.xml)  -rA log: $WORK/pytest.log (+ pytest-rerun.log)  server log: $WORK/serve.log"
