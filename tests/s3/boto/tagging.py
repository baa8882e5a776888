"""boto3 against rds3 serve: object tags (x-amz-tagging on PutObject,
CopyObject and CreateMultipartUpload; GET, PUT and DELETE ?tagging;
x-amz-tagging-count) with S3's limits and errors."""

from s3t import case, equal, error_of, fails, run

BAD = (400, "InvalidTag")


def tags(s3, b, key):
    r = s3.get_object_tagging(Bucket=b, Key=key)
    return {t["Key"]: t["Value"] for t in r["TagSet"]}


def tag_count(s3, b, key):
    """x-amz-tagging-count of GET and of HEAD (None: absent)."""
    g = s3.get_object(Bucket=b, Key=key)
    g["Body"].read()
    h = s3.head_object(Bucket=b, Key=key)
    return (g.get("TagCount"),
            h["ResponseMetadata"]["HTTPHeaders"].get("x-amz-tagging-count"))


def tagset(d):
    return {"TagSet": [{"Key": k, "Value": v} for k, v in d.items()]}


@case
def put_get_delete(s3, b):
    s3.put_object(Bucket=b, Key="k", Body=b"x", Tagging="a=1&b=two%20words&c=")
    equal("tags of the put", tags(s3, b, "k"), {"a": "1", "b": "two words", "c": ""})
    equal("tagging count", tag_count(s3, b, "k"), (3, "3"))
    r = s3.put_object_tagging(Bucket=b, Key="k", Tagging=tagset({"x": "y"}))
    equal("PutObjectTagging status", r["ResponseMetadata"]["HTTPStatusCode"], 200)
    equal("tags replaced", tags(s3, b, "k"), {"x": "y"})
    equal("object kept", s3.get_object(Bucket=b, Key="k")["Body"].read(), b"x")
    r = s3.delete_object_tagging(Bucket=b, Key="k")
    equal("DeleteObjectTagging status", r["ResponseMetadata"]["HTTPStatusCode"], 204)
    equal("tags deleted", tags(s3, b, "k"), {})
    equal("no tagging count", tag_count(s3, b, "k"), (None, None))
    s3.put_object_tagging(Bucket=b, Key="k", Tagging=tagset({"x": "y"}))
    s3.put_object(Bucket=b, Key="k", Body=b"new")
    equal("a new object has no tags", tags(s3, b, "k"), {})
    nokey = (404, "NoSuchKey")
    equal("GET ?tagging of no object", error_of(
        s3.get_object_tagging, Bucket=b, Key="none"), nokey)
    equal("PUT ?tagging of no object", error_of(
        s3.put_object_tagging, Bucket=b, Key="none", Tagging=tagset({"a": "b"})), nokey)
    equal("DELETE ?tagging of no object", error_of(
        s3.delete_object_tagging, Bucket=b, Key="none"), nokey)


@case
def limits(s3, b):
    s3.put_object(Bucket=b, Key="k", Body=b"x")
    ok = {"k" * 128: "v" * 256, "ключ": "значение", "a+-=._:/@ z": "1"}
    s3.put_object_tagging(Bucket=b, Key="k", Tagging=tagset(ok))
    equal("longest key and value, UTF-8, S3's punctuation", tags(s3, b, "k"), ok)
    ten = {"k%d" % i: "v" for i in range(10)}
    s3.put_object_tagging(Bucket=b, Key="k", Tagging=tagset(ten))
    equal("10 tags", len(tags(s3, b, "k")), 10)

    def put(t):
        return error_of(s3.put_object_tagging, Bucket=b, Key="k", Tagging=t)
    equal("11 tags", put(tagset({"k%d" % i: "v" for i in range(11)})), (400, "BadRequest"))
    equal("a 129-character key", put(tagset({"k" * 129: "v"})), BAD)
    equal("a 257-character value", put(tagset({"k": "v" * 257})), BAD)
    equal("a key with #", put(tagset({"a#b": "v"})), BAD)
    equal("a value with !", put(tagset({"a": "b!"})), BAD)
    equal("an aws: key", put(tagset({"aws:x": "v"})), BAD)
    equal("duplicate keys", put({"TagSet": [{"Key": "a", "Value": "1"},
                                            {"Key": "a", "Value": "2"}]}), BAD)
    equal("tags after the refusals", len(tags(s3, b, "k")), 10)
    # The same checks on x-amz-tagging; a header that is no query string
    # of distinct keys is S3's InvalidArgument.  Nothing is written.
    hdr_bad = (400, "InvalidArgument")
    for what, hdr, want in [
            ("11 tags", "&".join("k%d=v" % i for i in range(11)), (400, "BadRequest")),
            ("a key with #", "a%23b=1", BAD), ("a 257-character value", "a=" + "v" * 257, BAD),
            ("an aws: key", "aws%3Ax=1", BAD), ("duplicate keys", "a=1&a=2", hdr_bad),
            ("an empty key", "=v", hdr_bad), ("not UTF-8", "a=%FF", hdr_bad),
            ("a bad escape", "a=%G1", hdr_bad)]:
        equal("PutObject x-amz-tagging: " + what, error_of(
            s3.put_object, Bucket=b, Key="bad", Body=b"x", Tagging=hdr), want)
    fails("no object from a refused put", 404, "NoSuchKey", s3.get_object,
          Bucket=b, Key="bad")


@case
def copy_and_multipart(s3, b):
    s3.put_object(Bucket=b, Key="src", Body=b"x", Tagging="a=1")
    src = {"Bucket": b, "Key": "src"}
    s3.copy_object(Bucket=b, Key="c1", CopySource=src)
    equal("copy (COPY by default)", tags(s3, b, "c1"), {"a": "1"})
    s3.copy_object(Bucket=b, Key="c2", CopySource=src, TaggingDirective="REPLACE",
                   Tagging="b=2")
    equal("copy REPLACE", tags(s3, b, "c2"), {"b": "2"})
    s3.copy_object(Bucket=b, Key="c3", CopySource=src, TaggingDirective="REPLACE")
    equal("copy REPLACE with none", tags(s3, b, "c3"), {})
    s3.copy_object(Bucket=b, Key="c4", CopySource=src, TaggingDirective="COPY",
                   Tagging="b=2")
    equal("copy COPY with x-amz-tagging", tags(s3, b, "c4"), {"a": "1"})
    equal("an unknown directive", error_of(
        s3.copy_object, Bucket=b, Key="c5", CopySource=src, TaggingDirective="MERGE"),
        (400, "InvalidArgument"))
    equal("copy REPLACE with a bad tag", error_of(
        s3.copy_object, Bucket=b, Key="c5", CopySource=src, TaggingDirective="REPLACE",
        Tagging="aws:x=1"), BAD)
    s3.copy_object(Bucket=b, Key="src", CopySource=src, MetadataDirective="REPLACE",
                   Metadata={"m": "1"})
    equal("tags kept by a copy onto itself", tags(s3, b, "src"), {"a": "1"})

    uid = s3.create_multipart_upload(Bucket=b, Key="mp", Tagging="p=q&r=s")["UploadId"]
    e = s3.upload_part(Bucket=b, Key="mp", UploadId=uid, PartNumber=1, Body=b"data")["ETag"]
    s3.complete_multipart_upload(Bucket=b, Key="mp", UploadId=uid, MultipartUpload={
        "Parts": [{"PartNumber": 1, "ETag": e}]})
    equal("multipart object's tags", tags(s3, b, "mp"), {"p": "q", "r": "s"})
    equal("multipart tagging count", tag_count(s3, b, "mp"), (2, "2"))
    equal("CreateMultipartUpload with a bad tag", error_of(
        s3.create_multipart_upload, Bucket=b, Key="mp2", Tagging="a#=1"), BAD)
    equal("no upload begun", s3.list_multipart_uploads(Bucket=b).get("Uploads", []), [])


if __name__ == "__main__":
    run()
