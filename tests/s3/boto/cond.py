"""boto3 against rds3 serve: conditional writes (If-None-Match: *, If-Match
on PutObject, CopyObject and CompleteMultipartUpload, atomic against
concurrent writers), a copy's source conditions (x-amz-copy-source-if-*),
a repeated CompleteMultipartUpload, and UploadPartCopy's ranges, with S3's
statuses and codes."""

import threading

from s3t import case, check, client, equal, error_of, fails, run, with_headers

PRE = (412, "PreconditionFailed")


def body(s3, b, key):
    return s3.get_object(Bucket=b, Key=key)["Body"].read()


def upload_one_part(s3, b, key, data):
    """A multipart upload of key with one part: (upload id, parts list)."""
    uid = s3.create_multipart_upload(Bucket=b, Key=key)["UploadId"]
    etag = s3.upload_part(Bucket=b, Key=key, UploadId=uid, PartNumber=1,
                          Body=data)["ETag"]
    return uid, [{"PartNumber": 1, "ETag": etag}]


@case
def put_if_none_match(s3, b):
    r = with_headers(s3, {"If-None-Match": "*"}, s3.put_object,
                     Bucket=b, Key="k", Body=b"first")
    equal("first If-None-Match: * put", r["ResponseMetadata"]["HTTPStatusCode"], 200)
    equal("second If-None-Match: * put", error_of(
        with_headers, s3, {"If-None-Match": "*"}, s3.put_object,
        Bucket=b, Key="k", Body=b"second"), PRE)
    equal("object after the refused put", body(s3, b, "k"), b"first")
    # If-None-Match with ETags, as HTTP (and RGW, and the s3-tests) have
    # it: refused while the object has one of them.
    etag = s3.head_object(Bucket=b, Key="k")["ETag"]
    equal("If-None-Match: its ETag", error_of(
        with_headers, s3, {"If-None-Match": etag}, s3.put_object,
        Bucket=b, Key="k", Body=b"x"), PRE)
    equal("object after the refused put", body(s3, b, "k"), b"first")
    r = with_headers(s3, {"If-None-Match": '"0123456789abcdef0123456789abcdef"'},
                     s3.put_object, Bucket=b, Key="k", Body=b"third")
    equal("If-None-Match: another ETag", r["ResponseMetadata"]["HTTPStatusCode"], 200)
    equal("object replaced", body(s3, b, "k"), b"third")
    r = with_headers(s3, {"If-None-Match": etag}, s3.put_object, Bucket=b, Key="n", Body=b"n")
    equal("If-None-Match: ETag, no object", r["ResponseMetadata"]["HTTPStatusCode"], 200)
    equal("If-Match with If-None-Match: * on no object", error_of(
        with_headers, s3, {"If-None-Match": "*", "If-Match": etag}, s3.put_object,
        Bucket=b, Key="k2", Body=b"x"), (404, "NoSuchKey"))
    fails("k2 was not made", 404, "NoSuchKey", s3.get_object, Bucket=b, Key="k2")


@case
def put_if_match(s3, b):
    equal("If-Match on a missing key", error_of(
        with_headers, s3, {"If-Match": '"0123456789abcdef0123456789abcdef"'},
        s3.put_object, Bucket=b, Key="k", Body=b"x"), (404, "NoSuchKey"))
    fails("no object made", 404, "NoSuchKey", s3.get_object, Bucket=b, Key="k")
    etag = s3.put_object(Bucket=b, Key="k", Body=b"one")["ETag"]
    equal("If-Match another ETag", error_of(
        with_headers, s3, {"If-Match": '"0123456789abcdef0123456789abcdef"'},
        s3.put_object, Bucket=b, Key="k", Body=b"x"), PRE)
    equal("object after the 412", body(s3, b, "k"), b"one")
    r = with_headers(s3, {"If-Match": etag}, s3.put_object, Bucket=b, Key="k", Body=b"two")
    equal("If-Match the ETag", r["ResponseMetadata"]["HTTPStatusCode"], 200)
    equal("object after If-Match", body(s3, b, "k"), b"two")
    equal("If-Match the old ETag", error_of(
        with_headers, s3, {"If-Match": etag}, s3.put_object,
        Bucket=b, Key="k", Body=b"three"), PRE)


def race(b, key, headers, n=8):
    """n clients put key at once, each with headers and a body of its own:
    {status: count} and the bodies that were answered 200."""
    clients = [client() for _ in range(n)]
    start = threading.Barrier(n)
    got = [None] * n

    def one(i):
        start.wait()
        got[i] = error_of(with_headers, clients[i], headers, clients[i].put_object,
                          Bucket=b, Key=key, Body=b"writer %d" % i)
    ts = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    counts = {}
    for g in got:
        counts[g] = counts.get(g, 0) + 1
    return counts, [b"writer %d" % i for i in range(n) if got[i] == (200, None)]


@case
def racing_creates(s3, b):
    # How tools take a lock in S3: exactly one creator wins.
    counts, won = race(b, "lock", {"If-None-Match": "*"})
    equal("8 racing If-None-Match: * puts", counts, {(200, None): 1, PRE: 7})
    equal("the object is the winner's", [body(s3, b, "lock")], won)


@case
def racing_swaps(s3, b):
    # Compare-and-swap: of 8 writers that read the same ETag, one wins.
    etag = s3.put_object(Bucket=b, Key="ref", Body=b"v0")["ETag"]
    counts, won = race(b, "ref", {"If-Match": etag})
    equal("8 racing If-Match puts", counts, {(200, None): 1, PRE: 7})
    equal("the object is the winner's", [body(s3, b, "ref")], won)


@case
def complete_conditions(s3, b):
    uid, parts = upload_one_part(s3, b, "m", b"multipart body")
    s3.put_object(Bucket=b, Key="m", Body=b"put meanwhile")
    equal("Complete If-None-Match: * over an object", error_of(
        with_headers, s3, {"If-None-Match": "*"}, s3.complete_multipart_upload,
        Bucket=b, Key="m", UploadId=uid, MultipartUpload={"Parts": parts}), PRE)
    equal("object after the 412", body(s3, b, "m"), b"put meanwhile")
    ups = s3.list_multipart_uploads(Bucket=b).get("Uploads", [])
    equal("the upload stays after a 412", [u["UploadId"] for u in ups], [uid])
    equal("Complete If-Match another ETag", error_of(
        with_headers, s3, {"If-Match": '"0123456789abcdef0123456789abcdef"'},
        s3.complete_multipart_upload, Bucket=b, Key="m", UploadId=uid,
        MultipartUpload={"Parts": parts}), PRE)
    etag = s3.head_object(Bucket=b, Key="m")["ETag"]
    r = with_headers(s3, {"If-Match": etag}, s3.complete_multipart_upload,
                     Bucket=b, Key="m", UploadId=uid, MultipartUpload={"Parts": parts})
    equal("Complete If-Match the ETag", r["ResponseMetadata"]["HTTPStatusCode"], 200)
    equal("object after the Complete", body(s3, b, "m"), b"multipart body")
    uid, parts = upload_one_part(s3, b, "new", b"fresh")
    r = with_headers(s3, {"If-None-Match": "*"}, s3.complete_multipart_upload,
                     Bucket=b, Key="new", UploadId=uid, MultipartUpload={"Parts": parts})
    equal("Complete If-None-Match: * of a new key", r["ResponseMetadata"]["HTTPStatusCode"], 200)
    uid, parts = upload_one_part(s3, b, "nokey", b"x")
    equal("Complete If-Match of a missing key", error_of(
        with_headers, s3, {"If-Match": etag}, s3.complete_multipart_upload,
        Bucket=b, Key="nokey", UploadId=uid, MultipartUpload={"Parts": parts}),
        (404, "NoSuchKey"))


@case
def copy_destination_conditions(s3, b):
    s3.put_object(Bucket=b, Key="src", Body=b"source")
    s3.put_object(Bucket=b, Key="dst", Body=b"destination")
    src = {"Bucket": b, "Key": "src"}
    equal("copy If-None-Match: * over an object", error_of(
        with_headers, s3, {"If-None-Match": "*"}, s3.copy_object,
        Bucket=b, Key="dst", CopySource=src), PRE)
    equal("destination after the 412", body(s3, b, "dst"), b"destination")
    r = with_headers(s3, {"If-None-Match": "*"}, s3.copy_object,
                     Bucket=b, Key="dst2", CopySource=src)
    equal("copy If-None-Match: * to a new key", r["ResponseMetadata"]["HTTPStatusCode"], 200)
    etag = s3.head_object(Bucket=b, Key="dst")["ETag"]
    r = with_headers(s3, {"If-Match": etag}, s3.copy_object,
                     Bucket=b, Key="dst", CopySource=src)
    equal("copy If-Match the destination's ETag", r["ResponseMetadata"]["HTTPStatusCode"], 200)
    equal("destination after it", body(s3, b, "dst"), b"source")


@case
def copy_source_conditions(s3, b):
    s3.put_object(Bucket=b, Key="src", Body=b"source")
    h = s3.head_object(Bucket=b, Key="src")
    etag, mtime = h["ETag"], h["LastModified"]
    other = '"0123456789abcdef0123456789abcdef"'
    past = "Sat, 01 Jan 2000 00:00:00 GMT"
    src = {"Bucket": b, "Key": "src"}

    def copy(**cond):
        return error_of(s3.copy_object, Bucket=b, Key="dst", CopySource=src, **cond)

    ok = (200, None)
    equal("if-match the ETag", copy(CopySourceIfMatch=etag), ok)
    equal("if-match another", copy(CopySourceIfMatch=other), PRE)
    equal("if-none-match another", copy(CopySourceIfNoneMatch=other), ok)
    equal("if-none-match the ETag", copy(CopySourceIfNoneMatch=etag), PRE)
    equal("if-modified-since 2000", copy(CopySourceIfModifiedSince=past), ok)
    equal("if-modified-since its time", copy(CopySourceIfModifiedSince=mtime), PRE)
    equal("if-unmodified-since its time", copy(CopySourceIfUnmodifiedSince=mtime), ok)
    equal("if-unmodified-since 2000", copy(CopySourceIfUnmodifiedSince=past), PRE)
    # S3's precedence: if-match true wins over if-unmodified-since false,
    # if-none-match false over if-modified-since true.
    equal("if-match true, if-unmodified-since false",
          copy(CopySourceIfMatch=etag, CopySourceIfUnmodifiedSince=past), ok)
    equal("if-none-match false, if-modified-since true",
          copy(CopySourceIfNoneMatch=etag, CopySourceIfModifiedSince=past), PRE)
    uid = s3.create_multipart_upload(Bucket=b, Key="mp")["UploadId"]
    equal("UploadPartCopy if-match another", error_of(
        s3.upload_part_copy, Bucket=b, Key="mp", UploadId=uid, PartNumber=1,
        CopySource=src, CopySourceIfMatch=other), PRE)
    equal("UploadPartCopy if-none-match the ETag", error_of(
        s3.upload_part_copy, Bucket=b, Key="mp", UploadId=uid, PartNumber=1,
        CopySource=src, CopySourceIfNoneMatch=etag), PRE)
    equal("UploadPartCopy if-unmodified-since its time", error_of(
        s3.upload_part_copy, Bucket=b, Key="mp", UploadId=uid, PartNumber=1,
        CopySource=src, CopySourceIfUnmodifiedSince=mtime), ok)


@case
def part_copy_ranges(s3, b):
    s3.put_object(Bucket=b, Key="src", Body=b"0123456789")
    uid = s3.create_multipart_upload(Bucket=b, Key="mp")["UploadId"]

    def part(rng):
        return error_of(s3.upload_part_copy, Bucket=b, Key="mp", UploadId=uid,
                        PartNumber=1, CopySource={"Bucket": b, "Key": "src"},
                        CopySourceRange=rng)
    equal("bytes=2-5", part("bytes=2-5"), (200, None))
    equal("bytes=0-9", part("bytes=0-9"), (200, None))
    # S3: 400 InvalidArgument "Range specified is not valid for source
    # object of size: 10", not a GET's 416.
    bad = (400, "InvalidArgument")
    equal("bytes=5-10 (past the end)", part("bytes=5-10"), bad)
    equal("bytes=10-12 (past the end)", part("bytes=10-12"), bad)
    equal("bytes=5-2", part("bytes=5-2"), bad)
    equal("bytes=-5", part("bytes=-5"), bad)
    equal("0-5", part("0-5"), bad)
    try:
        s3.upload_part_copy(Bucket=b, Key="mp", UploadId=uid, PartNumber=1,
                            CopySource={"Bucket": b, "Key": "src"},
                            CopySourceRange="bytes=5-10")
    except Exception as e:
        check("the message names the source's size",
              "size: 10" in e.response["Error"].get("Message", ""), e.response["Error"])


@case
def complete_again(s3, b):
    uid, parts = upload_one_part(s3, b, "m", b"multipart body")
    first = s3.complete_multipart_upload(Bucket=b, Key="m", UploadId=uid,
                                         MultipartUpload={"Parts": parts})
    # A client whose answer was lost asks again: the same answer.
    again = s3.complete_multipart_upload(Bucket=b, Key="m", UploadId=uid,
                                         MultipartUpload={"Parts": parts})
    equal("repeated Complete's ETag", again["ETag"], first["ETag"])
    equal("object", body(s3, b, "m"), b"multipart body")
    equal("listed uploads", s3.list_multipart_uploads(Bucket=b).get("Uploads", []), [])
    nosuch = (404, "NoSuchUpload")
    other = [{"PartNumber": 1, "ETag": '"0123456789abcdef0123456789abcdef"'}]
    equal("repeat with other parts", error_of(
        s3.complete_multipart_upload, Bucket=b, Key="m", UploadId=uid,
        MultipartUpload={"Parts": other}), nosuch)
    equal("repeat with more parts", error_of(
        s3.complete_multipart_upload, Bucket=b, Key="m", UploadId=uid,
        MultipartUpload={"Parts": parts + [{"PartNumber": 2, "ETag": parts[0]["ETag"]}]}),
        nosuch)
    equal("UploadPart after Complete", error_of(
        s3.upload_part, Bucket=b, Key="m", UploadId=uid, PartNumber=2, Body=b"x"), nosuch)
    equal("Abort after Complete", error_of(
        s3.abort_multipart_upload, Bucket=b, Key="m", UploadId=uid), nosuch)
    again = s3.complete_multipart_upload(Bucket=b, Key="m", UploadId=uid,
                                         MultipartUpload={"Parts": parts})
    equal("repeat after those", again["ETag"], first["ETag"])
    # Once the key holds another object, the upload is gone.
    s3.put_object(Bucket=b, Key="m", Body=b"replaced")
    equal("repeat once replaced", error_of(
        s3.complete_multipart_upload, Bucket=b, Key="m", UploadId=uid,
        MultipartUpload={"Parts": parts}), nosuch)
    equal("object", body(s3, b, "m"), b"replaced")
    # Aborted: gone at once.
    uid, parts = upload_one_part(s3, b, "a", b"x")
    s3.abort_multipart_upload(Bucket=b, Key="a", UploadId=uid)
    equal("Complete after Abort", error_of(
        s3.complete_multipart_upload, Bucket=b, Key="a", UploadId=uid,
        MultipartUpload={"Parts": parts}), nosuch)


if __name__ == "__main__":
    run()
