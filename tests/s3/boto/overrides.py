"""boto3 against rds3 serve: GetObject's response-* parameters set the
answer's headers in place of the object's own (signed requests; an
anonymous one is refused, tests/cli/s3serve.bats)."""

import datetime

from s3t import case, equal, error_of, run


@case
def overrides(s3, b):
    s3.put_object(Bucket=b, Key="k", Body=b"body", ContentType="text/plain",
                  CacheControl="no-cache", ContentLanguage="en")
    when = datetime.datetime(2030, 1, 2, 3, 4, 5, tzinfo=datetime.timezone.utc)
    r = s3.get_object(Bucket=b, Key="k", ResponseContentType="application/x-test",
                      ResponseContentLanguage="fr", ResponseExpires=when,
                      ResponseCacheControl="max-age=60",
                      ResponseContentDisposition='attachment; filename="a b.txt"',
                      ResponseContentEncoding="identity")
    equal("body", r["Body"].read(), b"body")
    h = r["ResponseMetadata"]["HTTPHeaders"]
    equal("Content-Type", h.get("content-type"), "application/x-test")
    equal("Content-Language", h.get("content-language"), "fr")
    equal("Expires", h.get("expires"), "Wed, 02 Jan 2030 03:04:05 GMT")
    equal("Cache-Control", h.get("cache-control"), "max-age=60")
    equal("Content-Disposition", h.get("content-disposition"), 'attachment; filename="a b.txt"')
    equal("Content-Encoding", h.get("content-encoding"), "identity")
    # Only what was asked is replaced; the object keeps its own.
    r = s3.get_object(Bucket=b, Key="k", ResponseContentDisposition="inline")
    h = r["ResponseMetadata"]["HTTPHeaders"]
    equal("own Content-Type", h.get("content-type"), "text/plain")
    equal("own Cache-Control", h.get("cache-control"), "no-cache")
    equal("Content-Disposition", h.get("content-disposition"), "inline")
    r = s3.get_object(Bucket=b, Key="k")
    equal("stored Content-Type unchanged", r["ContentType"], "text/plain")
    equal("a control character", error_of(
        s3.get_object, Bucket=b, Key="k", ResponseContentType="a\r\nX-Evil: 1"),
        (400, "InvalidArgument"))
    # With a range too.
    r = s3.get_object(Bucket=b, Key="k", Range="bytes=1-2", ResponseContentType="x/y")
    equal("ranged body", r["Body"].read(), b"od")
    equal("ranged Content-Type", r["ContentType"], "x/y")


if __name__ == "__main__":
    run()
