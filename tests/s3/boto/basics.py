"""boto3 against rds3 serve: the plain operations, as the harness's own
check (tests/cli/s3boto.bats)."""

from s3t import case, client, equal, fails, run


@case
def put_get_head(s3, b):
    s3.put_object(Bucket=b, Key="a/b.txt", Body=b"hello",
                  ContentType="text/plain", Metadata={"k": "v"})
    r = s3.get_object(Bucket=b, Key="a/b.txt")
    equal("body", r["Body"].read(), b"hello")
    equal("content type", r["ContentType"], "text/plain")
    equal("metadata", r["Metadata"], {"k": "v"})
    fails("missing key", 404, "NoSuchKey", s3.get_object, Bucket=b, Key="nope")


@case
def wrong_secret(s3, b):
    bad = client(secret="not-the-secret")
    fails("bad signature", 403, "SignatureDoesNotMatch", bad.list_objects_v2,
          Bucket=b)


if __name__ == "__main__":
    run()
