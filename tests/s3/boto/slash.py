"""boto3 against rds3 serve: keys ending in '/' that carry bytes (PUT
`asdf/` with a body), as S3 takes them.  The server keeps such a key as
the file .rds3-folder inside the directory of that name (an empty folder
marker too), so its bytes, ETag, headers, tags and checksum are an
object's like any other: GET, HEAD, ranges, listings (once, with its size
and ETag), CopyObject both ways, a multipart upload, conditional writes
and deletes.  No key can name that file, and no listing shows it.
SERVE_DIR (the served directory, from tests/cli/s3boto.bats) lets the
cases look at the disk."""

import base64
import hashlib
import os

from s3t import case, check, equal, error_of, fails, run, with_headers

EMPTY_ETAG = '"d41d8cd98f00b204e9800998ecf8427e"'
PRE = (412, "PreconditionFailed")


def on_disk(b, key):
    return os.path.join(os.environ["SERVE_DIR"], b, key)


def md5q(data):
    return '"' + hashlib.md5(data).hexdigest() + '"'


def body(s3, b, key, **kw):
    return s3.get_object(Bucket=b, Key=key, **kw)["Body"].read()


def listing(s3, b, **kw):
    """[(key, size, etag)] and CommonPrefixes of one ListObjectsV2 page."""
    r = s3.list_objects_v2(Bucket=b, **kw)
    return ([(o["Key"], o["Size"], o["ETag"]) for o in r.get("Contents", [])],
            [p["Prefix"] for p in r.get("CommonPrefixes", [])])


@case
def put_get_head(s3, b):
    r = s3.put_object(Bucket=b, Key="asdf/", Body=b"asdf/", ContentType="text/x-dir",
                      Metadata={"m": "1"}, Tagging="t=v")
    equal("put etag", r["ETag"], md5q(b"asdf/"))
    check("its bytes in the folder's file",
          open(on_disk(b, "asdf/.rds3-folder"), "rb").read() == b"asdf/")
    equal("get", body(s3, b, "asdf/"), b"asdf/")
    r = s3.head_object(Bucket=b, Key="asdf/")
    equal("head", (r["ContentLength"], r["ETag"], r["ContentType"], r["Metadata"]),
          (5, md5q(b"asdf/"), "text/x-dir", {"m": "1"}))
    equal("range", body(s3, b, "asdf/", Range="bytes=1-3"), b"sdf")
    equal("tags", s3.get_object_tagging(Bucket=b, Key="asdf/")["TagSet"],
          [{"Key": "t", "Value": "v"}])
    fails("asdf (no slash)", 404, "NoSuchKey", s3.get_object, Bucket=b, Key="asdf")
    # Put again: the new bytes; then empty: a plain marker, still there.
    s3.put_object(Bucket=b, Key="asdf/", Body=b"longer body")
    equal("put again", body(s3, b, "asdf/"), b"longer body")
    s3.put_object(Bucket=b, Key="asdf/", Body=b"")
    r = s3.head_object(Bucket=b, Key="asdf/")
    equal("emptied", (r["ContentLength"], r["ETag"]), (0, EMPTY_ETAG))
    s3.put_object(Bucket=b, Key="asdf/", Body=b"again")
    equal("filled again", body(s3, b, "asdf/"), b"again")


@case
def checksum_kept(s3, b):
    data = b"checksummed"
    s3.put_object(Bucket=b, Key="c/", Body=data, ChecksumAlgorithm="SHA256")
    r = s3.head_object(Bucket=b, Key="c/", ChecksumMode="ENABLED")
    equal("sha256", r.get("ChecksumSHA256"),
          base64.b64encode(hashlib.sha256(data).digest()).decode())


@case
def listed_once(s3, b):
    """The suite's test_bucket_list_delimiter_prefix_ends_with_delimiter
    and test_bucket_list_delimiter_not_skip_special."""
    s3.put_object(Bucket=b, Key="asdf/", Body=b"asdf/")
    one = [("asdf/", 5, md5q(b"asdf/"))]
    equal("prefix asdf/, delimiter /", listing(s3, b, Prefix="asdf/", Delimiter="/"), (one, []))
    equal("all", listing(s3, b), (one, []))
    r = s3.list_objects(Bucket=b, Prefix="asdf/", Delimiter="/")
    equal("v1", [(o["Key"], o["Size"]) for o in r.get("Contents", [])], [("asdf/", 5)])
    for k in ["0/"] + ["0/%d" % i for i in range(1000, 1010)] + ["1999", "1999#", "2000"]:
        s3.put_object(Bucket=b, Key=k, Body=k.encode())
    equal("delimiter /", listing(s3, b, Delimiter="/"),
          ([("1999", 4, md5q(b"1999")), ("1999#", 5, md5q(b"1999#")),
            ("2000", 4, md5q(b"2000"))], ["0/", "asdf/"]))
    got = listing(s3, b, Prefix="0/")[0]
    equal("0/ first, then its keys", [k for k, _, _ in got][:3], ["0/", "0/1000", "0/1001"])
    equal("0/'s size", got[0][1], 2)


@case
def reserved_name(s3, b):
    """No key names the folder's file, and no listing gives it."""
    s3.put_object(Bucket=b, Key="d/", Body=b"bytes")
    for k in ("d/.rds3-folder", ".rds3-folder", "x/.rds3-folder/y"):
        fails("put " + k, 400, "InvalidArgument", s3.put_object, Bucket=b, Key=k, Body=b"x")
        fails("get " + k, 400, "InvalidArgument", s3.get_object, Bucket=b, Key=k)
    fails("copy from it", 400, "InvalidArgument", s3.copy_object, Bucket=b, Key="z",
          CopySource={"Bucket": b, "Key": "d/.rds3-folder"})
    equal("listed as d/ only", listing(s3, b), ([("d/", 5, md5q(b"bytes"))], []))
    equal("prefix d/.", listing(s3, b, Prefix="d/."), ([], []))
    equal("start after d/", listing(s3, b, StartAfter="d/"), ([], []))
    check("on disk", os.path.isfile(on_disk(b, "d/.rds3-folder")))


@case
def delete_and_bucket(s3, b):
    s3.put_object(Bucket=b, Key="e/f/", Body=b"1")
    s3.put_object(Bucket=b, Key="e/f/g", Body=b"2")
    fails("a bucket with it", 409, "BucketNotEmpty", s3.delete_bucket, Bucket=b)
    s3.delete_object(Bucket=b, Key="e/f/")
    equal("the key under it stays", listing(s3, b), ([("e/f/g", 1, md5q(b"2"))], []))
    fails("head e/f/", 404, "404", s3.head_object, Bucket=b, Key="e/f/")
    s3.put_object(Bucket=b, Key="e/f/", Body=b"1")
    s3.delete_object(Bucket=b, Key="e/f/g")
    check("its directory stays", os.path.isdir(on_disk(b, "e/f")))
    s3.delete_objects(Bucket=b, Delete={"Objects": [{"Key": "e/f/"}]})
    check("then goes, with its parent", not os.path.exists(on_disk(b, "e")))
    equal("then the bucket goes", error_of(s3.delete_bucket, Bucket=b), (204, None))


@case
def conflicts(s3, b):
    """key and key/ are a file and a directory of one name."""
    s3.put_object(Bucket=b, Key="c/", Body=b"dir bytes")
    fails("put c over c/", 409, "InvalidRequest", s3.put_object, Bucket=b, Key="c", Body=b"x")
    s3.put_object(Bucket=b, Key="d", Body=b"data")
    fails("put d/ over d", 409, "InvalidRequest", s3.put_object, Bucket=b, Key="d/", Body=b"x")
    equal("both kept", (body(s3, b, "c/"), body(s3, b, "d")), (b"dir bytes", b"data"))


@case
def copies(s3, b):
    s3.put_object(Bucket=b, Key="src", Body=b"source bytes", Metadata={"a": "1"})
    r = s3.copy_object(Bucket=b, Key="to/", CopySource={"Bucket": b, "Key": "src"})
    equal("copy etag", r["CopyObjectResult"]["ETag"], md5q(b"source bytes"))
    r = s3.get_object(Bucket=b, Key="to/")
    equal("an object to a key ending /", (r["Body"].read(), r["Metadata"]),
          (b"source bytes", {"a": "1"}))
    s3.copy_object(Bucket=b, Key="back", CopySource={"Bucket": b, "Key": "to/"})
    equal("and back", body(s3, b, "back"), b"source bytes")
    s3.copy_object(Bucket=b, Key="to/", CopySource={"Bucket": b, "Key": "to/"},
                   MetadataDirective="REPLACE", Metadata={"a": "2"})
    r = s3.get_object(Bucket=b, Key="to/")
    equal("onto itself, REPLACE", (r["Body"].read(), r["Metadata"]),
          (b"source bytes", {"a": "2"}))


@case
def multipart(s3, b):
    part = b"p" * (5 << 20)
    uid = s3.create_multipart_upload(Bucket=b, Key="mp/")["UploadId"]
    e1 = s3.upload_part(Bucket=b, Key="mp/", UploadId=uid, PartNumber=1, Body=part)["ETag"]
    e2 = s3.upload_part(Bucket=b, Key="mp/", UploadId=uid, PartNumber=2, Body=b"tail")["ETag"]
    s3.complete_multipart_upload(Bucket=b, Key="mp/", UploadId=uid, MultipartUpload={
        "Parts": [{"PartNumber": 1, "ETag": e1}, {"PartNumber": 2, "ETag": e2}]})
    r = s3.head_object(Bucket=b, Key="mp/")
    equal("size and etag", (r["ContentLength"], r["ETag"].endswith('-2"')), (len(part) + 4, True))
    equal("part 2", body(s3, b, "mp/", PartNumber=2), b"tail")
    equal("listed", [k for k, _, _ in listing(s3, b)[0]], ["mp/"])


@case
def conditions(s3, b):
    put = lambda **kw: s3.put_object(Bucket=b, Key="w/", **kw)  # noqa: E731
    with_headers(s3, {"If-None-Match": "*"}, put, Body=b"first")
    equal("If-None-Match * again", error_of(with_headers, s3, {"If-None-Match": "*"}, put,
                                              Body=b"second"), PRE)
    equal("If-Match another etag", error_of(with_headers, s3, {"If-Match": md5q(b"x")}, put,
                                              Body=b"second"), PRE)
    equal("kept", body(s3, b, "w/"), b"first")
    with_headers(s3, {"If-Match": md5q(b"first")}, put, Body=b"second")
    equal("If-Match its etag", body(s3, b, "w/"), b"second")
    d = lambda: s3.delete_object(Bucket=b, Key="w/")  # noqa: E731
    equal("delete, If-Match another", error_of(with_headers, s3, {"If-Match": md5q(b"x")}, d), PRE)
    equal("delete, If-Match its etag",
          error_of(with_headers, s3, {"If-Match": md5q(b"second")}, d), (204, None))
    fails("gone", 404, "404", s3.head_object, Bucket=b, Key="w/")


if __name__ == "__main__":
    run()
