"""boto3 against rds3 serve: folder markers, the keys ending in '/' that
s3fs, rclone and the AWS console make for an empty "folder".  The server
keeps one as the file .rds3-folder in the directory of that name (one
with bytes too: slash.py); a directory there only because keys live under
it is no key.  A key and key/ cannot
both exist (a file and a directory of one name): the second is refused.
SERVE_DIR (the served directory, from tests/cli/s3boto.bats) lets the
cases look at the disk."""

import os

from s3t import case, check, equal, error_of, fails, run

EMPTY_ETAG = '"d41d8cd98f00b204e9800998ecf8427e"'


def on_disk(b, key):
    return os.path.join(os.environ["SERVE_DIR"], b, key)


def keys(s3, b, **kw):
    """(Contents keys, CommonPrefixes) of one ListObjectsV2 page."""
    r = s3.list_objects_v2(Bucket=b, **kw)
    return ([o["Key"] for o in r.get("Contents", [])],
            [p["Prefix"] for p in r.get("CommonPrefixes", [])])


def marker(s3, b, key, **kw):
    return s3.put_object(Bucket=b, Key=key, Body=b"", **kw)


@case
def put_get_head(s3, b):
    r = marker(s3, b, "a/b/", ContentType="application/x-directory",
               Metadata={"mode": "16877", "uid": "0", "mtime": "1700000000"})
    equal("put etag", r["ETag"], EMPTY_ETAG)
    check("the folder's file on disk", os.path.isfile(on_disk(b, "a/b/.rds3-folder")))
    for what, r in (("head", s3.head_object(Bucket=b, Key="a/b/")),
                    ("get", s3.get_object(Bucket=b, Key="a/b/"))):
        equal(what + " etag", r["ETag"], EMPTY_ETAG)
        equal(what + " length", r["ContentLength"], 0)
        equal(what + " content type", r["ContentType"], "application/x-directory")
        equal(what + " metadata", r["Metadata"],
              {"mode": "16877", "uid": "0", "mtime": "1700000000"})
    equal("get body", s3.get_object(Bucket=b, Key="a/b/")["Body"].read(), b"")
    fails("If-None-Match its etag", 304, "304", s3.head_object, Bucket=b,
          Key="a/b/", IfNoneMatch=EMPTY_ETAG)
    # The parent made for it is no marker, the other name no key.
    fails("head a/", 404, "404", s3.head_object, Bucket=b, Key="a/")
    fails("head a/b", 404, "404", s3.head_object, Bucket=b, Key="a/b")
    fails("get a/b", 404, "NoSuchKey", s3.get_object, Bucket=b, Key="a/b")
    # Put again: metadata replaced.
    marker(s3, b, "a/b/", Metadata={"mode": "16832"})
    equal("metadata put again", s3.head_object(Bucket=b, Key="a/b/")["Metadata"],
          {"mode": "16832"})
    equal("tagging", s3.get_object_tagging(Bucket=b, Key="a/b/")["TagSet"], [])


@case
def then_a_body(s3, b):
    """An empty PUT asks 100 Continue (botocore) and is answered without a
    body to wait for; the next PUT with a body on that connection must
    not wait for the read timeout and try again."""
    marker(s3, b, "k/")
    r = s3.put_object(Bucket=b, Key="k/f", Body=b"body")
    equal("tries of the put after the marker", r["ResponseMetadata"]["RetryAttempts"], 0)
    s3.put_object(Bucket=b, Key="e", Body=b"")
    r = s3.put_object(Bucket=b, Key="f", Body=b"body")
    equal("tries of the put after an empty one", r["ResponseMetadata"]["RetryAttempts"], 0)


@case
def not_markers(s3, b):
    """Directories that hold keys, or were made by hand, are no keys."""
    s3.put_object(Bucket=b, Key="x/y/z", Body=b"1")
    os.makedirs(on_disk(b, "h/i"))
    fails("head x/y/", 404, "404", s3.head_object, Bucket=b, Key="x/y/")
    fails("head h/i/", 404, "404", s3.head_object, Bucket=b, Key="h/i/")
    equal("list", keys(s3, b), (["x/y/z"], []))
    equal("list x/ /", keys(s3, b, Prefix="x/", Delimiter="/"), ([], ["x/y/"]))
    equal("list / (h/ is empty)", keys(s3, b, Delimiter="/"), ([], ["x/"]))
    equal("delete h/i/ (nothing)",
          error_of(s3.delete_object, Bucket=b, Key="h/i/"), (204, None))
    check("x/y stays", os.path.isdir(on_disk(b, "x/y")))


@case
def listing(s3, b):
    for k in ("a/", "a/b/", "a/b/c", "a/b-c", "a/b0", "a/b/d/", "a/b/d/e", "z/"):
        if k.endswith("/"):
            marker(s3, b, k)
        else:
            s3.put_object(Bucket=b, Key=k, Body=b"data")
    everything = ["a/", "a/b-c", "a/b/", "a/b/c", "a/b/d/", "a/b/d/e", "a/b0", "z/"]
    equal("all, in byte order", keys(s3, b), (everything, []))
    r = s3.list_objects_v2(Bucket=b, Prefix="a/b/")
    sizes = {o["Key"]: (o["Size"], o["ETag"]) for o in r["Contents"]}
    equal("a marker's size and etag", sizes.get("a/b/"), (0, EMPTY_ETAG))
    equal("v1", [o["Key"] for o in s3.list_objects(Bucket=b)["Contents"]], everything)
    equal("/", keys(s3, b, Delimiter="/"), ([], ["a/", "z/"]))
    equal("a/ /", keys(s3, b, Prefix="a/", Delimiter="/"),
          (["a/", "a/b-c", "a/b0"], ["a/b/"]))
    equal("a/b /", keys(s3, b, Prefix="a/b", Delimiter="/"),
          (["a/b-c", "a/b0"], ["a/b/"]))
    equal("a/b/ /", keys(s3, b, Prefix="a/b/", Delimiter="/"),
          (["a/b/", "a/b/c"], ["a/b/d/"]))
    equal("a/b/d/ /", keys(s3, b, Prefix="a/b/d/", Delimiter="/"),
          (["a/b/d/", "a/b/d/e"], []))
    equal("start after a/b/", keys(s3, b, StartAfter="a/b/"), (everything[3:], []))
    # Page by page, one key at a time: the same keys.
    got, token = [], None
    for _ in range(20):
        kw = {"ContinuationToken": token} if token else {}
        r = s3.list_objects_v2(Bucket=b, MaxKeys=1, **kw)
        got += [o["Key"] for o in r.get("Contents", [])]
        if not r["IsTruncated"]:
            break
        token = r["NextContinuationToken"]
    equal("pages of one", got, everything)


@case
def delete(s3, b):
    marker(s3, b, "e/f/")
    s3.delete_object(Bucket=b, Key="e/f/")
    check("an empty marker's directory goes, and its parent",
          not os.path.exists(on_disk(b, "e")))
    marker(s3, b, "m/")
    s3.put_object(Bucket=b, Key="m/k", Body=b"1")
    s3.delete_object(Bucket=b, Key="m/k")
    check("the marker keeps its directory", os.path.isdir(on_disk(b, "m")))
    equal("still a key", keys(s3, b), (["m/"], []))
    s3.put_object(Bucket=b, Key="m/k", Body=b"1")
    s3.delete_object(Bucket=b, Key="m/")
    equal("the marker goes, the key under it stays", keys(s3, b), (["m/k"], []))
    fails("head m/", 404, "404", s3.head_object, Bucket=b, Key="m/")
    s3.delete_object(Bucket=b, Key="m/k")
    check("then the directory goes", not os.path.exists(on_disk(b, "m")))
    for k in ("p/", "p/q/", "p/q/r"):
        s3.put_object(Bucket=b, Key=k, Body=b"")
    r = s3.delete_objects(Bucket=b, Delete={"Objects": [{"Key": "p/q/"}, {"Key": "p/"}]})
    equal("DeleteObjects", sorted(d["Key"] for d in r.get("Deleted", [])), ["p/", "p/q/"])
    equal("after DeleteObjects", keys(s3, b), (["p/q/r"], []))
    marker(s3, b, "s/")
    fails("a bucket with a marker", 409, "BucketNotEmpty", s3.delete_bucket, Bucket=b)
    s3.delete_objects(Bucket=b, Delete={"Objects": [{"Key": "s/"}, {"Key": "p/q/r"}]})
    equal("then empty", error_of(s3.delete_bucket, Bucket=b), (204, None))


@case
def conflicts(s3, b):
    """key and key/ cannot both be: the second is refused, the first kept."""
    marker(s3, b, "c/")
    fails("put c over marker c/", 409, "InvalidRequest", s3.put_object,
          Bucket=b, Key="c", Body=b"x")
    s3.put_object(Bucket=b, Key="src", Body=b"")
    fails("copy to c over marker c/", 409, "InvalidRequest", s3.copy_object,
          Bucket=b, Key="c", CopySource={"Bucket": b, "Key": "src"})
    check("c/ kept", os.path.isdir(on_disk(b, "c")))
    equal("c/ still a key", error_of(s3.head_object, Bucket=b, Key="c/"), (200, None))
    s3.put_object(Bucket=b, Key="d", Body=b"data")
    fails("put d/ over object d", 409, "InvalidRequest", marker, s3, b, "d/")
    fails("put d/e/ under object d", 409, "InvalidRequest", marker, s3, b, "d/e/")
    equal("d kept", s3.get_object(Bucket=b, Key="d")["Body"].read(), b"data")
    marker(s3, b, "g/h/")
    fails("put g over g/h/'s directory", 409, "InvalidRequest", s3.put_object,
          Bucket=b, Key="g", Body=b"x")
    equal("all kept", keys(s3, b), (["c/", "d", "g/h/", "src"], []))


@case
def bad_names(s3, b):
    fails("an empty key component", 400, "InvalidArgument", marker, s3, b, "n//")
    fails("the key '/'", 400, "InvalidArgument", marker, s3, b, "/")
    equal("none listed", keys(s3, b), ([], []))


@case
def copies(s3, b):
    marker(s3, b, "s/", ContentType="application/x-directory", Metadata={"mode": "1"})
    r = s3.copy_object(Bucket=b, Key="t/", CopySource={"Bucket": b, "Key": "s/"})
    equal("copy etag", r["CopyObjectResult"]["ETag"], EMPTY_ETAG)
    r = s3.head_object(Bucket=b, Key="t/")
    equal("marker to marker", (r["ContentType"], r["Metadata"]),
          ("application/x-directory", {"mode": "1"}))
    s3.copy_object(Bucket=b, Key="u", CopySource={"Bucket": b, "Key": "s/"})
    r = s3.get_object(Bucket=b, Key="u")
    equal("marker to object", (r["Body"].read(), r["ContentType"], r["ETag"]),
          (b"", "application/x-directory", EMPTY_ETAG))
    check("u a file", os.path.isfile(on_disk(b, "u")))
    # What s3fs does for chmod: a copy onto itself with new metadata.
    s3.copy_object(Bucket=b, Key="s/", CopySource={"Bucket": b, "Key": "s/"},
                   MetadataDirective="REPLACE", Metadata={"mode": "2"})
    equal("onto itself, REPLACE", s3.head_object(Bucket=b, Key="s/")["Metadata"],
          {"mode": "2"})
    fails("onto itself, COPY", 400, "InvalidRequest", s3.copy_object, Bucket=b,
          Key="s/", CopySource={"Bucket": b, "Key": "s/"})
    s3.put_object(Bucket=b, Key="full", Body=b"bytes")
    fails("from a marker that is not", 404, "NoSuchKey", s3.copy_object,
          Bucket=b, Key="x", CopySource={"Bucket": b, "Key": "none/"})
    equal("keys", keys(s3, b), (["full", "s/", "t/", "u"], []))


if __name__ == "__main__":
    run()
