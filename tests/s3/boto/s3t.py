"""What every tests/s3/boto script shares: a boto3 client for the `rds3
serve` that tests/cli/s3boto.bats started (S3_URL, S3_KEY, S3_SECRET in the
environment), a fresh bucket, and checks that count their failures instead
of stopping at the first, so one run names every behaviour that is wrong.

A script is a list of functions decorated with @case; run() calls each
with a fresh bucket and exits 1 when any check failed."""

import os
import sys
import traceback
import uuid

import boto3
import botocore
from botocore.config import Config

_cases = []
_failed = []


def client(key=None, secret=None, **cfg):
    """A path-style SigV4 client of the server, as key/secret (default:
    the server's first user)."""
    conf = Config(signature_version="s3v4", s3={"addressing_style": "path"},
                  retries={"max_attempts": 1}, connect_timeout=10,
                  read_timeout=30, **cfg)
    return boto3.client("s3", endpoint_url=os.environ["S3_URL"],
                        region_name="us-east-1",
                        aws_access_key_id=key or os.environ["S3_KEY"],
                        aws_secret_access_key=secret or os.environ["S3_SECRET"],
                        config=conf)


def case(fn):
    _cases.append(fn)
    return fn


def check(what, ok, detail=""):
    """Records what as failed unless ok."""
    if not ok:
        _failed.append(f"{what}{': ' + str(detail) if detail else ''}")
    return ok


def equal(what, got, want):
    return check(what, got == want, f"got {got!r}, want {want!r}")


def error_of(fn, *args, **kw):
    """Calls fn; returns (HTTP status, S3 error code) of the error it
    raised, or (200-ish status, None) when it succeeded."""
    try:
        r = fn(*args, **kw)
        return (r.get("ResponseMetadata", {}).get("HTTPStatusCode", 200), None)
    except botocore.exceptions.ClientError as e:
        return (e.response["ResponseMetadata"]["HTTPStatusCode"],
                e.response["Error"].get("Code"))


def fails(what, status, code, fn, *args, **kw):
    """Checks that fn(*args, **kw) fails with HTTP status and S3 code."""
    got = error_of(fn, *args, **kw)
    return check(what, got == (status, code),
                 f"got {got}, want {(status, code)}")


def with_headers(s3, headers, fn, **kw):
    """fn(**kw) with extra request headers: Debian's boto3 1.26 predates
    IfNoneMatch and IfMatch on writes."""
    def add(request, **_):
        for k, v in headers.items():
            request.headers[k] = v
    s3.meta.events.register("before-sign.s3", add, unique_id="s3t-hdrs")
    try:
        return fn(**kw)
    finally:
        s3.meta.events.unregister("before-sign.s3", unique_id="s3t-hdrs")


def new_bucket(s3=None):
    s3 = s3 or client()
    name = "b" + uuid.uuid4().hex[:20]
    s3.create_bucket(Bucket=name)
    return name


def run():
    only = sys.argv[1:]
    for fn in _cases:
        if only and fn.__name__ not in only:
            continue
        before = len(_failed)
        try:
            fn(client(), new_bucket())
        except Exception:  # a case that blew up is one failure, the rest run
            _failed.append(f"{fn.__name__}: raised\n{traceback.format_exc()}")
        else:
            for i in range(before, len(_failed)):
                _failed[i] = f"{fn.__name__}: {_failed[i]}"
    for f in _failed:
        print("FAIL", f, file=sys.stderr)
    print(f"{len(_cases)} cases, {len(_failed)} failed checks", file=sys.stderr)
    sys.exit(1 if _failed else 0)
