"""boto3 against rds3 serve: the directories under a bucket come and go
with the keys that need them, as S3 has no directories.  A put that fails
(a wrong Content-MD5, a condition not met) takes away the directories it
made; then the bucket, empty, can be deleted.  A delete that prunes the
directory a put is still writing into (its temporary is unnamed, so the
directory looks empty) does not fail that put: the commit makes the
directory again.  SERVE_DIR and SERVE_PID (from tests/cli/s3boto.bats)
let the cases look at the disk and at the server's open files."""

import base64
import hashlib
import http.client
import os
import time
import urllib.parse

from s3t import case, check, equal, error_of, fails, run, with_headers


def on_disk(b, key=""):
    return os.path.join(os.environ["SERVE_DIR"], b, key)


def writing_into(path):
    """Whether the server holds an unnamed temporary in directory path
    open: what /proc shows of an O_TMPFILE file, "PATH/#INODE (deleted)"."""
    fds = f"/proc/{os.environ['SERVE_PID']}/fd"
    for fd in os.listdir(fds):
        try:
            target = os.readlink(os.path.join(fds, fd))
        except OSError:
            continue
        if target.startswith(path + "/#") and target.endswith(" (deleted)"):
            return True
    return False


@case
def failed_put_takes_its_directories(s3, b):
    s3.put_object(Bucket=b, Key="keep/a", Body=b"a")
    wrong = base64.b64encode(hashlib.md5(b"other").digest()).decode()
    fails("a wrong Content-MD5", 400, "BadDigest", s3.put_object, Bucket=b,
          Key="d1/d2/obj", Body=b"data", ContentMD5=wrong)
    check("d1 is gone with the failed put", not os.path.exists(on_disk(b, "d1")))
    fails("a wrong Content-MD5 under a directory with a key", 400, "BadDigest",
          s3.put_object, Bucket=b, Key="keep/sub/x", Body=b"data", ContentMD5=wrong)
    check("keep/sub is gone", not os.path.exists(on_disk(b, "keep/sub")))
    equal("keep/a stays", s3.get_object(Bucket=b, Key="keep/a")["Body"].read(), b"a")
    s3.delete_object(Bucket=b, Key="keep/a")
    # DeleteBucket finds nothing in it: the failed puts left no folders.
    equal("the emptied bucket is deleted", error_of(s3.delete_bucket, Bucket=b)[1], None)


@case
def failed_condition_takes_its_directories(s3, b):
    got = error_of(with_headers, s3, {"If-Match": '"0123456789abcdef0123456789abcdef"'},
                   s3.put_object, Bucket=b, Key="e1/e2/k", Body=b"x")
    check("If-Match on a key that is not there fails", got[0] in (404, 412), got)
    check("e1 is gone with the refused put", not os.path.exists(on_disk(b, "e1")))


@case
def delete_pruning_a_put_in_flight(s3, b):
    s3.put_object(Bucket=b, Key="r/old", Body=b"old")
    data = os.urandom(256 * 1024)
    url = urllib.parse.urlsplit(s3.generate_presigned_url(
        "put_object", Params={"Bucket": b, "Key": "r/new"}, ExpiresIn=300))
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=30)
    conn.putrequest("PUT", url.path + "?" + url.query, skip_accept_encoding=True)
    conn.putheader("Content-Length", str(len(data)))
    conn.endheaders()
    conn.send(data[:1024])
    # The server has begun the put when its temporary is open in r/.
    deadline = time.monotonic() + 20
    while not writing_into(on_disk(b, "r")) and time.monotonic() < deadline:
        time.sleep(0.02)
    if not check("the put's unnamed temporary is open in r/", writing_into(on_disk(b, "r"))):
        conn.close()
        return
    s3.delete_object(Bucket=b, Key="r/old")
    # The last key of r/ is gone, and with it the directory the put
    # writes into: the race this case is about.
    check("the delete pruned r/", not os.path.exists(on_disk(b, "r")))
    conn.send(data[1024:])
    r = conn.getresponse()
    r.read()
    conn.close()
    equal("the put in flight succeeds", r.status, 200)
    equal("its bytes are the object", s3.get_object(Bucket=b, Key="r/new")["Body"].read(), data)


run()
