"""boto3 against rds3 serve --users: three users of one server
(tests/cli/s3boto.bats gives it a users file; S3_KEY is the first user,
S3_KEY2 and S3_KEY3 the others).  A bucket is its creator's: another
user's requests on it are 403 AccessDenied and change nothing, its name
is 409 BucketAlreadyExists to them, ListBuckets shows each user their own
(sorted, max-buckets and continuation-token pages), the Owner in the
listings is the bucket's, and the owner's record (.rds3-owner) is no key."""

import os
import urllib.error
import urllib.request
import uuid
import xml.etree.ElementTree as ET

from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from s3t import case, check, client, equal, fails, new_bucket, run

NS = "{http://s3.amazonaws.com/doc/2006-03-01/}"
K1, S1 = os.environ["S3_KEY"], os.environ["S3_SECRET"]
K2, S2 = os.environ["S3_KEY2"], os.environ["S3_SECRET2"]
K3, S3 = os.environ["S3_KEY3"], os.environ["S3_SECRET3"]


def raw(key, secret, path, query=""):
    """A GET signed by key/secret: (status, parsed XML or None).  For what
    boto3 1.26 cannot send (ListBuckets' max-buckets came later)."""
    url = os.environ["S3_URL"] + path + ("?" + query if query else "")
    req = AWSRequest(method="GET", url=url,
                     headers={"x-amz-content-sha256": "UNSIGNED-PAYLOAD"})
    SigV4Auth(Credentials(key, secret), "s3", "us-east-1").add_auth(req)
    r = urllib.request.Request(url, headers=dict(req.headers.items()))
    try:
        with urllib.request.urlopen(r, timeout=30) as resp:
            return resp.status, ET.fromstring(resp.read())
    except urllib.error.HTTPError as e:
        body = e.read()
        return e.code, ET.fromstring(body) if body else None


def names(s3):
    return [b["Name"] for b in s3.list_buckets()["Buckets"]]


@case
def others_bucket_is_403(s3, b):
    two = client(K2, S2)
    s3.put_object(Bucket=b, Key="k", Body=b"one's")
    b2 = new_bucket(two)
    two.put_object(Bucket=b2, Key="k", Body=b"two's")
    fails("HeadBucket", 403, "403", two.head_bucket, Bucket=b)
    fails("ListObjectsV2", 403, "AccessDenied", two.list_objects_v2, Bucket=b)
    fails("ListObjects", 403, "AccessDenied", two.list_objects, Bucket=b)
    fails("GetObject", 403, "AccessDenied", two.get_object, Bucket=b, Key="k")
    fails("HeadObject", 403, "403", two.head_object, Bucket=b, Key="k")
    fails("PutObject", 403, "AccessDenied", two.put_object, Bucket=b,
          Key="planted", Body=b"x")
    fails("DeleteObject", 403, "AccessDenied", two.delete_object, Bucket=b,
          Key="k")
    fails("DeleteObjects", 403, "AccessDenied", two.delete_objects, Bucket=b,
          Delete={"Objects": [{"Key": "k"}]})
    fails("CreateMultipartUpload", 403, "AccessDenied",
          two.create_multipart_upload, Bucket=b, Key="m")
    fails("ListMultipartUploads", 403, "AccessDenied",
          two.list_multipart_uploads, Bucket=b)
    fails("GetBucketLocation", 403, "AccessDenied", two.get_bucket_location,
          Bucket=b)
    fails("DeleteBucket", 403, "AccessDenied", two.delete_bucket, Bucket=b)
    # A copy out of another's bucket into one's own reads what is not theirs.
    fails("CopyObject from another's bucket", 403, "AccessDenied",
          two.copy_object, Bucket=b2, Key="stolen",
          CopySource={"Bucket": b, "Key": "k"})
    fails("... and the copy is not there", 404, "NoSuchKey", two.get_object,
          Bucket=b2, Key="stolen")
    # The other way round as well, and a presigned URL of the wrong user.
    fails("the first user on the second's", 403, "AccessDenied", s3.get_object,
          Bucket=b2, Key="k")
    url = two.generate_presigned_url("get_object",
                                     Params={"Bucket": b, "Key": "k"})
    try:
        urllib.request.urlopen(url, timeout=30)
        check("a presigned URL of another user", False, "was served")
    except urllib.error.HTTPError as e:
        equal("a presigned URL of another user", e.code, 403)
    # Nothing changed.
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket=b)["Contents"]]
    equal("the first user's keys", keys, ["k"])
    equal("the first user's object", s3.get_object(Bucket=b, Key="k")["Body"].read(),
          b"one's")
    fails("no such bucket is 404 to anyone", 404, "NoSuchBucket",
          two.list_objects_v2, Bucket="no-such-" + uuid.uuid4().hex[:12])


@case
def create_taken_name(s3, b):
    two = client(K2, S2)
    fails("another's name", 409, "BucketAlreadyExists", two.create_bucket,
          Bucket=b)
    # One's own name again: 200, nothing changed (us-east-1's answer).
    s3.put_object(Bucket=b, Key="kept", Body=b"x")
    s3.create_bucket(Bucket=b)
    equal("its object kept", s3.head_object(Bucket=b, Key="kept")["ContentLength"], 1)
    s3.delete_object(Bucket=b, Key="kept")
    s3.delete_bucket(Bucket=b)
    # Once deleted, the name is free: now the second user's.
    two.create_bucket(Bucket=b)
    check("taken over by the second user", b in names(two))
    check("... and gone from the first", b not in names(s3))
    fails("the first user on it now", 403, "AccessDenied", s3.list_objects_v2,
          Bucket=b)
    two.delete_bucket(Bucket=b)
    s3.create_bucket(Bucket=b)  # for the harness


@case
def list_buckets_own_only(s3, b):
    two, three = client(K2, S2), client(K3, S3)
    b2 = new_bucket(two)
    r1, r2 = s3.list_buckets(), two.list_buckets()
    n1 = [x["Name"] for x in r1["Buckets"]]
    n2 = [x["Name"] for x in r2["Buckets"]]
    check("the first user sees its bucket", b in n1)
    check("... not the second's", b2 not in n1)
    check("the second sees its own", b2 in n2 and b not in n2)
    equal("sorted by name", n1, sorted(n1))
    equal("the first user's Owner", r1["Owner"], {"ID": K1, "DisplayName": "boto"})
    equal("the second's Owner", r2["Owner"], {"ID": K2, "DisplayName": "two"})
    check("every bucket listed to the second is its own",
          all(x not in n1 for x in n2))
    # The third user has made none: it sees none of the others'.
    mine = [x for x in names(three) if x in n1 or x in n2]
    equal("the third user sees no one else's", mine, [])
    two.delete_bucket(Bucket=b2)


@case
def owner_in_listings(s3, b):
    s3.put_object(Bucket=b, Key="a", Body=b"a")
    me = {"ID": K1, "DisplayName": "boto"}
    v1 = s3.list_objects(Bucket=b)["Contents"][0]
    equal("ListObjects (v1) has the Owner", v1.get("Owner"), me)
    v2 = s3.list_objects_v2(Bucket=b)["Contents"][0]
    check("ListObjectsV2 has none unless asked", "Owner" not in v2, v2)
    v2 = s3.list_objects_v2(Bucket=b, FetchOwner=True)["Contents"][0]
    equal("ListObjectsV2 with fetch-owner=true", v2.get("Owner"), me)


@case
def max_buckets_pages(s3, b):
    pre = "p" + uuid.uuid4().hex[:10] + "-"
    want = sorted(pre + c for c in ("e", "a", "d", "b", "c"))
    three = client(K3, S3)
    for n in want:
        three.create_bucket(Bucket=n)
    got, token, pages = [], None, 0
    while pages < 10:
        q = "max-buckets=2&prefix=" + pre
        if token:
            q += "&continuation-token=" + token
        st, x = raw(K3, S3, "/", q)
        equal("page status", st, 200)
        pages += 1
        got += [e.text for e in x.iter(NS + "Name")]
        equal("the page's Prefix", x.findtext(NS + "Prefix"), pre)
        token = x.findtext(NS + "ContinuationToken")
        if not token:
            break
        equal("a full page before a token", len(x.findall(f"{NS}Buckets/{NS}Bucket")), 2)
    equal("the pages in order, each once", got, want)
    equal("pages of 2 for 5 buckets", pages, 3)
    st, x = raw(K3, S3, "/", "max-buckets=10000&prefix=" + pre)
    equal("max-buckets 10000", [e.text for e in x.iter(NS + "Name")], want)
    check("no token when all fit", x.find(NS + "ContinuationToken") is None)
    # Another user's pages hold none of these.
    st, x = raw(K2, S2, "/", "max-buckets=1000&prefix=" + pre)
    equal("another user's pages", [e.text for e in x.iter(NS + "Name")], [])
    for q, what in (("max-buckets=0", "max-buckets 0"),
                    ("max-buckets=10001", "max-buckets 10001"),
                    ("max-buckets=x", "max-buckets x"),
                    ("continuation-token=zz", "a token that is no token")):
        st, x = raw(K3, S3, "/", q)
        equal(what, (st, x.findtext("Code") if x is not None else None),
              (400, "InvalidArgument"))
    for n in want:
        three.delete_bucket(Bucket=n)


@case
def owner_record_is_no_key(s3, b):
    path = os.path.join(os.environ["SERVE_DIR"], b, ".rds3-owner")
    with open(path) as f:
        equal("the owner on disk", f.read(), K1 + "\n")
    s3.put_object(Bucket=b, Key="k", Body=b"k")
    equal("not listed", [o["Key"] for o in s3.list_objects_v2(Bucket=b)["Contents"]],
          ["k"])
    fails("not read as a key", 400, "InvalidArgument", s3.get_object, Bucket=b,
          Key=".rds3-owner")
    fails("not written as a key", 400, "InvalidArgument", s3.put_object,
          Bucket=b, Key=".rds3-owner", Body=b"K2")
    fails("not deleted as a key", 400, "InvalidArgument", s3.delete_object,
          Bucket=b, Key=".rds3-owner")
    fails("a bucket with a key is not deleted", 409, "BucketNotEmpty",
          s3.delete_bucket, Bucket=b)
    fails("... and stays its owner's", 403, "AccessDenied",
          client(K2, S2).list_objects_v2, Bucket=b)
    s3.delete_object(Bucket=b, Key="k")
    s3.delete_bucket(Bucket=b)
    check("an empty one is, owner and all",
          not os.path.exists(os.path.dirname(path)))
    s3.create_bucket(Bucket=b)  # for the harness


@case
def keys_checked(s3, b):
    fails("an unknown access key", 403, "InvalidAccessKeyId",
          client("NOSUCHKEY", S1).list_objects_v2, Bucket=b)
    fails("a user's key with another's secret", 403, "SignatureDoesNotMatch",
          client(K2, S1).list_buckets)


@case
def unowned_directory_is_the_first_users(s3, b):
    d = "hand-" + uuid.uuid4().hex[:12]
    os.mkdir(os.path.join(os.environ["SERVE_DIR"], d))
    check("listed to the first user", d in names(s3))
    s3.put_object(Bucket=d, Key="k", Body=b"x")
    fails("another user on it", 403, "AccessDenied", client(K2, S2).get_object,
          Bucket=d, Key="k")
    check("not listed to another", d not in names(client(K2, S2)))
    s3.delete_object(Bucket=d, Key="k")
    s3.delete_bucket(Bucket=d)


if __name__ == "__main__":
    run()
