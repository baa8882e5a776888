"""rds3 serve's ListMultipartUploads pages as S3 does: key order, then the
order uploads began; prefix, delimiter, key-marker with upload-id-marker,
max-uploads (the parameters it used to answer without applying)."""

from s3t import case, check, equal, fails, run


def begin(s3, b, key):
    return s3.create_multipart_upload(Bucket=b, Key=key)["UploadId"]


def page(s3, b, **kw):
    r = s3.list_multipart_uploads(Bucket=b, **kw)
    ups = [(u["Key"], u["UploadId"]) for u in r.get("Uploads", [])]
    pre = [p["Prefix"] for p in r.get("CommonPrefixes", [])]
    return r, ups, pre


@case
def pages(s3, b):
    a1 = begin(s3, b, "a")
    a2 = begin(s3, b, "a")
    b1 = begin(s3, b, "d/1")
    b2 = begin(s3, b, "d/2")
    c1 = begin(s3, b, "c")
    every = [("a", a1), ("a", a2), ("c", c1), ("d/1", b1), ("d/2", b2)]
    r, ups, _ = page(s3, b)
    equal("all, in order", ups, every)
    equal("not truncated", r["IsTruncated"], False)
    got, kw = [], {}
    for _ in range(5):
        r, ups, _ = page(s3, b, MaxUploads=2, **kw)
        got += ups
        if not r["IsTruncated"]:
            break
        check("a page of 2", len(ups) == 2, ups)
        kw = {"KeyMarker": r["NextKeyMarker"], "UploadIdMarker": r["NextUploadIdMarker"]}
    equal("pages of 2 give them all once", got, every)
    r, ups, _ = page(s3, b, KeyMarker="a", UploadIdMarker=a1)
    equal("after a's first upload", ups, every[1:])
    r, ups, _ = page(s3, b, KeyMarker="a")
    equal("after key a", ups, every[2:])
    r, ups, _ = page(s3, b, Prefix="d/")
    equal("prefix", ups, every[3:])
    r, ups, pre = page(s3, b, Delimiter="/")
    equal("delimiter: keys", ups, every[:3])
    equal("delimiter: prefixes", pre, ["d/"])
    r, ups, pre = page(s3, b, Delimiter="/", MaxUploads=3)
    equal("3 entries, the prefix left for the next page", (ups, pre, r["IsTruncated"]),
          (every[:3], [], True))
    r, ups, pre = page(s3, b, Delimiter="/", KeyMarker=r["NextKeyMarker"],
                       UploadIdMarker=r["NextUploadIdMarker"])
    equal("the next page: the prefix", (ups, pre, r["IsTruncated"]), ([], ["d/"], False))
    r, ups, pre = page(s3, b, Delimiter="/", KeyMarker="d/")
    equal("after the prefix: nothing", (ups, pre), ([], []))
    r, ups, _ = page(s3, b, MaxUploads=0)
    equal("max-uploads=0", (ups, r["IsTruncated"]), ([], False))
    s3.abort_multipart_upload(Bucket=b, Key="a", UploadId=a1)
    r, ups, _ = page(s3, b, Prefix="a")
    equal("an aborted upload is gone", ups, [("a", a2)])


@case
def parts(s3, b):
    up = begin(s3, b, "k")
    body = {n: bytes([n]) * (5 << 20 if n < 4 else 10) for n in (1, 2, 3, 4)}
    etags = {}
    for n in (3, 1, 4, 2):  # listed by number, not as they came
        etags[n] = s3.upload_part(Bucket=b, Key="k", UploadId=up, PartNumber=n,
                                  Body=body[n])["ETag"]
    r = s3.list_parts(Bucket=b, Key="k", UploadId=up)
    equal("all parts", [(p["PartNumber"], p["ETag"], p["Size"]) for p in r["Parts"]],
          [(n, etags[n], len(body[n])) for n in (1, 2, 3, 4)])
    equal("not truncated", r["IsTruncated"], False)
    r = s3.list_parts(Bucket=b, Key="k", UploadId=up, MaxParts=2)
    equal("a page of 2", ([p["PartNumber"] for p in r["Parts"]], r["IsTruncated"],
                          r.get("NextPartNumberMarker")), ([1, 2], True, 2))
    r = s3.list_parts(Bucket=b, Key="k", UploadId=up, PartNumberMarker=2)
    equal("after 2", [p["PartNumber"] for p in r["Parts"]], [3, 4])
    fails("another key's upload", 404, "NoSuchUpload", s3.list_parts, Bucket=b,
          Key="other", UploadId=up)
    fails("no such upload", 404, "NoSuchUpload", s3.list_parts, Bucket=b, Key="k",
          UploadId="0" * 32)
    s3.complete_multipart_upload(
        Bucket=b, Key="k", UploadId=up,
        MultipartUpload={"Parts": [{"PartNumber": n, "ETag": etags[n]} for n in (1, 2, 3, 4)]})
    fails("completed: no parts", 404, "NoSuchUpload", s3.list_parts, Bucket=b, Key="k",
          UploadId=up)


if __name__ == "__main__":
    run()
