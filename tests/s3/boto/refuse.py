"""rds3 serve never answers 200 for what it does not do (issue 24, part 1,
and the listing and error-document bugs of part 2): every header of
encryption, object lock, ACL grants, storage classes and versioning is
either carried out or refused with 501 NotImplemented, and nothing is
stored or made by a refused request."""

import datetime
import os
import socket
import urllib.parse
import urllib.request

from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from s3t import case, check, equal, error_of, fails, run

NI = (501, "NotImplemented")


def refused(what, fn, **kw):
    got = error_of(fn, **kw)
    return check(what, got == NI, f"got {got}, want {NI}")


def absent(s3, b, key):
    equal(f"{key} not stored", error_of(s3.head_object, Bucket=b, Key=key)[0], 404)


@case
def encryption(s3, b):
    refused("SSE-S3", s3.put_object, Bucket=b, Key="s3", Body=b"x",
            ServerSideEncryption="AES256")
    absent(s3, b, "s3")
    refused("SSE-KMS", s3.put_object, Bucket=b, Key="kms", Body=b"x",
            ServerSideEncryption="aws:kms", SSEKMSKeyId="k")
    absent(s3, b, "kms")
    refused("SSE-C", s3.put_object, Bucket=b, Key="c", Body=b"x",
            SSECustomerAlgorithm="AES256", SSECustomerKey="k" * 32)
    absent(s3, b, "c")
    s3.put_object(Bucket=b, Key="plain", Body=b"x")
    refused("GET with an SSE-C key", s3.get_object, Bucket=b, Key="plain",
            SSECustomerAlgorithm="AES256", SSECustomerKey="k" * 32)
    refused("CopyObject to SSE", s3.copy_object, Bucket=b, Key="cp",
            CopySource={"Bucket": b, "Key": "plain"}, ServerSideEncryption="AES256")
    absent(s3, b, "cp")
    refused("CopyObject from SSE-C", s3.copy_object, Bucket=b, Key="cp",
            CopySource={"Bucket": b, "Key": "plain"},
            CopySourceSSECustomerAlgorithm="AES256",
            CopySourceSSECustomerKey="k" * 32)
    absent(s3, b, "cp")
    refused("CreateMultipartUpload with SSE", s3.create_multipart_upload,
            Bucket=b, Key="mp", ServerSideEncryption="AES256")
    equal("no upload begun", s3.list_multipart_uploads(Bucket=b).get("Uploads", []), [])


@case
def object_lock(s3, b):
    name = b + "-lock"
    refused("bucket with object lock", s3.create_bucket, Bucket=name,
            ObjectLockEnabledForBucket=True)
    equal("no bucket made", error_of(s3.head_bucket, Bucket=name)[0], 404)
    until = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(days=1)
    refused("COMPLIANCE retention", s3.put_object, Bucket=b, Key="l", Body=b"x",
            ObjectLockMode="COMPLIANCE", ObjectLockRetainUntilDate=until)
    absent(s3, b, "l")
    refused("legal hold", s3.put_object, Bucket=b, Key="l", Body=b"x",
            ObjectLockLegalHoldStatus="ON")
    absent(s3, b, "l")
    s3.put_object(Bucket=b, Key="x", Body=b"x")
    s3.put_object(Bucket=b, Key="y", Body=b"y")
    # No retention is kept, so a delete that bypasses it is a delete.
    s3.delete_object(Bucket=b, Key="x", BypassGovernanceRetention=True)
    absent(s3, b, "x")
    s3.delete_objects(Bucket=b, Delete={"Objects": [{"Key": "y"}]},
                      BypassGovernanceRetention=True)
    absent(s3, b, "y")
    s3.put_object(Bucket=b, Key="x", Body=b"x")
    refused("GET ?object-lock", s3.get_object_lock_configuration, Bucket=b)
    refused("PUT ?retention", s3.put_object_retention, Bucket=b, Key="x",
            Retention={"Mode": "GOVERNANCE", "RetainUntilDate": until})


@case
def acls_and_classes(s3, b):
    s3.put_object(Bucket=b, Key="private", Body=b"x", ACL="private")
    s3.put_object(Bucket=b, Key="owner", Body=b"x", ACL="bucket-owner-full-control")
    refused("public-read", s3.put_object, Bucket=b, Key="pub", Body=b"x",
            ACL="public-read")
    absent(s3, b, "pub")
    refused("a grant", s3.put_object, Bucket=b, Key="g", Body=b"x",
            GrantRead='uri="http://acs.amazonaws.com/groups/global/AllUsers"')
    absent(s3, b, "g")
    refused("bucket public-read", s3.create_bucket, Bucket=b + "-pub",
            ACL="public-read")
    equal("no public bucket", error_of(s3.head_bucket, Bucket=b + "-pub")[0], 404)
    refused("PUT ?acl", s3.put_object_acl, Bucket=b, Key="private", ACL="public-read")
    refused("GLACIER", s3.put_object, Bucket=b, Key="cold", Body=b"x",
            StorageClass="GLACIER")
    absent(s3, b, "cold")
    s3.put_object(Bucket=b, Key="std", Body=b"x", StorageClass="STANDARD")
    refused("website redirect", s3.put_object, Bucket=b, Key="w", Body=b"x",
            WebsiteRedirectLocation="/elsewhere")
    absent(s3, b, "w")


@case
def bucket_sub_resources(s3, b):
    s3.put_object(Bucket=b, Key="k", Body=b"x")
    equal("versioning never enabled",
          {k: v for k, v in s3.get_bucket_versioning(Bucket=b).items()
           if k != "ResponseMetadata"}, {})
    refused("PUT ?versioning", s3.put_bucket_versioning, Bucket=b,
            VersioningConfiguration={"Status": "Enabled"})
    refused("GET ?acl", s3.get_bucket_acl, Bucket=b)
    refused("PUT ?policy", s3.put_bucket_policy, Bucket=b, Policy="{}")
    refused("PUT ?lifecycle", s3.put_bucket_lifecycle_configuration, Bucket=b,
            LifecycleConfiguration={"Rules": [{"ID": "r", "Status": "Enabled",
                                               "Filter": {"Prefix": ""},
                                               "Expiration": {"Days": 1}}]})
    refused("PUT bucket ?tagging", s3.put_bucket_tagging, Bucket=b,
            Tagging={"TagSet": [{"Key": "a", "Value": "b"}]})
    refused("GET ?cors", s3.get_bucket_cors, Bucket=b)
    refused("GET ?encryption", s3.get_bucket_encryption, Bucket=b)
    refused("PUT ?notification", s3.put_bucket_notification_configuration, Bucket=b,
            NotificationConfiguration={})
    refused("RestoreObject", s3.restore_object, Bucket=b, Key="k",
            RestoreRequest={"Days": 1})
    refused("GET ?acl of an object", s3.get_object_acl, Bucket=b, Key="k")
    st, body = raw(s3, "POST", f"/{b}/k?select&select-type=2", body=b"<x/>")
    check("SelectObjectContent", st == 501, f"{st} {body[:200]!r}")
    refused("GET ?versionId=abc", s3.get_object, Bucket=b, Key="k", VersionId="abc")
    equal("?versionId=null is the object",
          s3.get_object(Bucket=b, Key="k", VersionId="null")["Body"].read(), b"x")
    # A raw query: a sub-resource with a listing's parameter is no listing.
    for q in ("acl&max-keys=5", "cors&encoding-type=url", "policy&prefix=a",
              "versions&list-type=2"):
        st, body = raw(s3, "GET", f"/{b}?{q}")
        check(f"GET ?{q}", st == 501 and b"<Code>NotImplemented</Code>" in body,
              f"{st} {body[:200]!r}")


@case
def versions(s3, b):
    """A bucket that never had versioning lists each object as its one
    version, "null", the latest (S3's ListObjectVersions there)."""
    for k in ("a", "b/1", "b/2", "c"):
        s3.put_object(Bucket=b, Key=k, Body=k.encode())
    r = s3.list_object_versions(Bucket=b)
    equal("every object once, version null, latest",
          [(v["Key"], v["VersionId"], v["IsLatest"], v["Size"]) for v in r["Versions"]],
          [("a", "null", True, 1), ("b/1", "null", True, 3), ("b/2", "null", True, 3),
           ("c", "null", True, 1)])
    equal("no delete markers", r.get("DeleteMarkers", []), [])
    r = s3.list_object_versions(Bucket=b, Delimiter="/", MaxKeys=2)
    equal("a page of 2 with a prefix", ([v["Key"] for v in r["Versions"]],
                                         [p["Prefix"] for p in r["CommonPrefixes"]],
                                         r["IsTruncated"], r["NextKeyMarker"],
                                         r["NextVersionIdMarker"]),
          (["a"], ["b/"], True, "b/", "null"))
    r = s3.list_object_versions(Bucket=b, Delimiter="/", KeyMarker="b/",
                                VersionIdMarker="null")
    equal("the next page", [v["Key"] for v in r["Versions"]], ["c"])
    fails("another version id", 400, "InvalidArgument", s3.list_object_versions,
          Bucket=b, KeyMarker="a", VersionIdMarker="3HL4kqtJlcpXroDTDmJ")
    fails("a version id marker alone", 400, "InvalidArgument", s3.list_object_versions,
          Bucket=b, VersionIdMarker="null")


@case
def listing(s3, b):
    for k in ("a", "b", "c"):
        s3.put_object(Bucket=b, Key=k, Body=b"x")
    r = s3.list_objects_v2(Bucket=b, MaxKeys=0)
    equal("max-keys=0: not truncated", r["IsTruncated"], False)
    equal("max-keys=0: no keys", r.get("Contents", []), [])
    r1 = s3.list_objects_v2(Bucket=b, MaxKeys=1, StartAfter="a")
    equal("first page", [o["Key"] for o in r1["Contents"]], ["b"])
    r2 = s3.list_objects_v2(Bucket=b, MaxKeys=1, StartAfter="a",
                            ContinuationToken=r1["NextContinuationToken"])
    equal("StartAfter echoed beside a token", r2.get("StartAfter"), "a")
    equal("second page", [o["Key"] for o in r2["Contents"]], ["c"])
    r = s3.list_objects(Bucket=b, MaxKeys=0)
    equal("V1 max-keys=0: not truncated", r["IsTruncated"], False)


def raw(s3, method, path, headers=None, body=b"", sign=True):
    """A request signed here with botocore's signer (UNSIGNED-PAYLOAD),
    its body sent whole before the answer is read, as a client without
    Expect: 100-continue does.  Returns (status, body)."""
    url = os.environ["S3_URL"] + path
    h = {"x-amz-content-sha256": "UNSIGNED-PAYLOAD", **(headers or {})}
    if body:
        h["Content-Length"] = str(len(body))
    req = AWSRequest(method=method, url=url, headers=h)
    if sign:
        S3SigV4Auth(Credentials(os.environ["S3_KEY"], os.environ["S3_SECRET"]),
                    "s3", "us-east-1").add_auth(req)
    u = urllib.parse.urlsplit(url)
    with socket.create_connection((u.hostname, u.port), timeout=30) as c:
        head = f"{method} {u.path}{'?' + u.query if u.query else ''} HTTP/1.1\r\n"
        head += f"Host: {u.netloc}\r\nConnection: close\r\n"
        head += "".join(f"{k}: {v}\r\n" for k, v in req.headers.items() if k.lower() != "host")
        c.sendall(head.encode() + b"\r\n")
        try:
            c.sendall(body)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the answer may still be there to read
        data = b""
        while True:
            try:
                got = c.recv(65536)
            except ConnectionResetError:
                return (-1, data)
            if not got:
                break
            data += got
    status = int(data.split(b" ", 2)[1]) if data.startswith(b"HTTP/1.1 ") else -1
    return (status, data.split(b"\r\n\r\n", 1)[-1])


@case
def other_headers(s3, b):
    st, body = raw(s3, "PUT", f"/{b}/app", {"x-amz-write-offset-bytes": "0"}, b"x")
    check("an append", st == 501 and b"x-amz-write-offset-bytes" in body, f"{st} {body[:300]!r}")
    absent(s3, b, "app")
    s3.put_object(Bucket=b, Key="k", Body=b"x")
    st, body = raw(s3, "DELETE", f"/{b}/k", {"x-amz-if-match-size": "2"})
    check("a delete on a size", st == 501 and b"NotImplemented" in body, f"{st} {body[:300]!r}")
    equal("k kept", s3.head_object(Bucket=b, Key="k")["ContentLength"], 1)


@case
def locations(s3, b):
    """Every bucket here is in us-east-1: another LocationConstraint is
    refused as S3's regional endpoints refuse one of another region."""
    fails("eu-west-1", 400, "IllegalLocationConstraintException", s3.create_bucket,
          Bucket=b + "-eu", CreateBucketConfiguration={"LocationConstraint": "eu-west-1"})
    equal("no bucket made", error_of(s3.head_bucket, Bucket=b + "-eu")[0], 404)
    equal("where the others are", s3.get_bucket_location(Bucket=b).get("LocationConstraint"),
          None)


@case
def names_and_forms(s3, b):
    for name in ("192.168.5.123", "foo.-bar", "foo-.bar", "a..b", "xn--abc"):
        st, body = raw(s3, "PUT", f"/{name}")
        check(f"bucket name {name}", st == 400 and b"InvalidBucketName" in body,
              f"{st} {body[:200]!r}")
    st, body = raw(s3, "GET", f"/{b}/%AE%8A-")
    check("a key that is no UTF-8", st == 400 and b"InvalidURI" in body, f"{st} {body[:200]!r}")
    st, body = raw(s3, "POST", f"/{b}", {"Content-Type": "multipart/form-data; boundary=x"},
                   b"--x\r\nContent-Disposition: form-data; name=\"key\"\r\n\r\nk\r\n--x--\r\n",
                   sign=False)
    check("a form upload", st == 501 and b"POST Object" in body, f"{st} {body[:200]!r}")
    absent(s3, b, "k")


@case
def conditional_deletes(s3, b):
    """If-Match on DeleteObject and ETag in DeleteObjects delete only the
    object as the client saw it; the conditions not served are refused."""
    etag = s3.put_object(Bucket=b, Key="k", Body=b"x")["ETag"]
    st, body = raw(s3, "DELETE", f"/{b}/k", {"If-Match": '"0123456789abcdef0123456789abcdef"'})
    check("another ETag: 412", st == 412 and b"PreconditionFailed" in body, f"{st} {body[:200]!r}")
    equal("k kept", s3.head_object(Bucket=b, Key="k")["ETag"], etag)
    st, body = raw(s3, "DELETE", f"/{b}/k", {"If-None-Match": "*"})
    check("If-None-Match refused", st == 501, f"{st} {body[:200]!r}")
    st, body = raw(s3, "DELETE", f"/{b}/k", {"If-Match": etag})
    check("its ETag: 204", st == 204, f"{st} {body[:200]!r}")
    absent(s3, b, "k")
    st, body = raw(s3, "DELETE", f"/{b}/k", {"If-Match": etag})
    check("gone: 404", st == 404 and b"NoSuchKey" in body, f"{st} {body[:200]!r}")
    for key in ("a", "b", "c", "d"):
        s3.put_object(Bucket=b, Key=key, Body=key.encode())
    ea = s3.head_object(Bucket=b, Key="a")["ETag"]
    xml = ("<Delete><Object><Key>a</Key><ETag>%s</ETag></Object>"
           "<Object><Key>b</Key><ETag>\"00000000000000000000000000000000\"</ETag></Object>"
           "<Object><Key>c</Key><Size>1</Size></Object>"
           "<Object><Key>d</Key><VersionId>v2</VersionId></Object></Delete>") % ea
    st, body = raw(s3, "POST", f"/{b}?delete", {"Content-Type": "application/xml"}, xml.encode())
    check("DeleteObjects answered", st == 200, f"{st} {body[:300]!r}")
    check("a deleted on its ETag", b"<Deleted><Key>a</Key>" in body, body)
    check("b kept: 412", b"<Error><Key>b</Key><Code>PreconditionFailed</Code>" in body, body)
    check("c kept: a size condition refused", b"<Error><Key>c</Key><Code>NotImplemented</Code>" in body, body)
    check("d kept: no version v2", b"<Error><Key>d</Key><Code>InvalidArgument</Code>" in body, body)
    absent(s3, b, "a")
    equal("b, c, d kept", sorted(o["Key"] for o in s3.list_objects_v2(Bucket=b)["Contents"]),
          ["b", "c", "d"])


@case
def early_answers(s3, b):
    big = b"z" * (16 << 20)
    st, body = raw(s3, "PUT", f"/{b}/big", body=big, sign=False)
    check("unsigned 16 MiB PUT: 403 read, not a reset",
          st == 403 and b"<Code>AccessDenied</Code>" in body, f"{st} {body[:200]!r}")
    st, body = raw(s3, "PUT", f"/{b}-none/big", body=big)
    check("16 MiB PUT to no bucket: 404 read, not a reset",
          st == 404 and b"<Code>NoSuchBucket</Code>" in body, f"{st} {body[:200]!r}")
    absent(s3, b, "big")


@case
def request_ids(s3, b):
    u = os.environ["S3_URL"] + f"/{b}/nope"
    ids = []
    for _ in range(2):
        try:
            urllib.request.urlopen(u, timeout=30)
        except urllib.error.HTTPError as e:
            body = e.read().decode()
            hid = e.headers.get("x-amz-request-id")
            check("an id header", hid, e.headers)
            check("RequestId in the error document",
                  f"<RequestId>{hid}</RequestId>" in body, body)
            ids.append(hid)
    check("ids differ", len(set(ids)) == 2, ids)
    r = s3.list_objects_v2(Bucket=b)
    check("a success has one too", r["ResponseMetadata"].get("RequestId"), r)


if __name__ == "__main__":
    run()
