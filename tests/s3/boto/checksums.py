"""Additional checksums (x-amz-checksum-*) as S3 keeps them: a PutObject's,
given back with x-amz-checksum-mode: ENABLED for the whole object only;
a multipart upload's algorithm and type, its parts' checksums checked at
Complete and made into the object's (COMPOSITE: the digest of the parts'
digests, "-N"; FULL_OBJECT: the CRC of all the bytes); copies; and
GetObjectAttributes (ETag, Checksum, ObjectParts paged, StorageClass,
ObjectSize).  Debian's botocore 1.29 knows neither x-amz-checksum-type
nor CRC64NVME: those go as raw headers."""

import base64
import hashlib
import os
import zlib

from s3t import case, check, client, equal, fails, run

MIB = 1 << 20


def b64(d):
    return base64.b64encode(d).decode()


def sha256(d):
    return hashlib.sha256(d).digest()


def crc32(d):
    return zlib.crc32(d).to_bytes(4, "big")


def headers(r):
    return r["ResponseMetadata"]["HTTPHeaders"]


def with_headers(extra):
    """A client that adds the headers extra to every request."""
    s3 = client()

    def add(request, **kw):
        for k, v in extra.items():
            request.headers[k] = v
    s3.meta.events.register("before-sign.s3", add)
    return s3


@case
def put_checksum_kept(s3, b):
    body = os.urandom(3000)
    r = s3.put_object(Bucket=b, Key="k", Body=body, ChecksumAlgorithm="SHA256")
    equal("PutObject echoes its SHA256", r.get("ChecksumSHA256"), b64(sha256(body)))
    r = s3.head_object(Bucket=b, Key="k")
    check("no checksum without x-amz-checksum-mode", "ChecksumSHA256" not in r, r)
    r = s3.head_object(Bucket=b, Key="k", ChecksumMode="ENABLED")
    equal("HEAD with checksum mode", r.get("ChecksumSHA256"), b64(sha256(body)))
    equal("its type", headers(r).get("x-amz-checksum-type"), "FULL_OBJECT")
    # botocore checks the body against the checksum it is given.
    r = s3.get_object(Bucket=b, Key="k", ChecksumMode="ENABLED")
    equal("GET with checksum mode: the bytes", r["Body"].read(), body)
    equal("GET with checksum mode: the checksum", r.get("ChecksumSHA256"), b64(sha256(body)))
    r = s3.get_object(Bucket=b, Key="k", ChecksumMode="ENABLED", Range="bytes=0-9")
    check("no checksum for a range", "x-amz-checksum-sha256" not in headers(r), headers(r))
    equal("the range", r["Body"].read(), body[:10])
    # The checksum sent as a header, CRC32; replaced by a plain put.
    s3.put_object(Bucket=b, Key="c", Body=body, ChecksumCRC32=b64(crc32(body)))
    r = s3.head_object(Bucket=b, Key="c", ChecksumMode="ENABLED")
    equal("a CRC32 header kept", r.get("ChecksumCRC32"), b64(crc32(body)))
    # A value sent wins over the algorithm named, as S3 takes it.
    r = with_headers({"x-amz-sdk-checksum-algorithm": "SHA256"}).put_object(
        Bucket=b, Key="w", Body=body, ChecksumCRC32=b64(crc32(body)))
    equal("the CRC32 sent, the SHA256 named", r.get("ChecksumCRC32"), b64(crc32(body)))
    s3.put_object(Bucket=b, Key="c", Body=b"plain")
    r = s3.head_object(Bucket=b, Key="c", ChecksumMode="ENABLED")
    check("a put without a checksum keeps none", "x-amz-checksum-crc32" not in headers(r), headers(r))
    # Named without a value: computed by the server (CRC64NVME is past
    # this botocore: a raw header).
    s3n = with_headers({"x-amz-checksum-algorithm": "CRC64NVME"})
    r = s3n.put_object(Bucket=b, Key="n", Body=b"A" * 1024)
    equal("CRC64NVME computed when only named", headers(r).get("x-amz-checksum-crc64nvme"), "Qeh8oXvGiSo=")
    r = s3.head_object(Bucket=b, Key="n", ChecksumMode="ENABLED")
    equal("and kept", headers(r).get("x-amz-checksum-crc64nvme"), "Qeh8oXvGiSo=")
    fails("an unknown algorithm", 400, "InvalidRequest",
          with_headers({"x-amz-checksum-algorithm": "MD5"}).put_object, Bucket=b, Key="x", Body=b"x")


@case
def record_before_checksums(s3, b):
    """A record written before checksums were kept still reads: its
    headers stay, no checksum is claimed."""
    body = b"an object from before\n"
    s3.put_object(Bucket=b, Key="old", Body=body)
    path = os.path.join(os.environ["SERVE_DIR"], b, "old")
    st = os.stat(path)
    rec = (f"rds3 1\netag {hashlib.md5(body).hexdigest()}\nsize {st.st_size}\n"
           f"mtime {st.st_mtime_ns}\nparts 0 0\n\nContent-Type: text/x-old\n")
    os.setxattr(path, "user.rds3", rec.encode())
    r = s3.head_object(Bucket=b, Key="old", ChecksumMode="ENABLED")
    equal("the old record's Content-Type", r.get("ContentType"), "text/x-old")
    check("no checksum", not any(h.startswith("x-amz-checksum-") for h in headers(r)), headers(r))
    r = s3.get_object_attributes(Bucket=b, Key="old", ObjectAttributes=["ETag", "Checksum", "ObjectSize"])
    check("GetObjectAttributes: no Checksum", "Checksum" not in r, r)
    equal("its ETag", r.get("ETag"), hashlib.md5(body).hexdigest())


@case
def multipart_composite(s3, b):
    p1, p2 = os.urandom(5 * MIB), os.urandom(1000)
    r = s3.create_multipart_upload(Bucket=b, Key="m", ChecksumAlgorithm="SHA256")
    equal("the upload's algorithm", r.get("ChecksumAlgorithm"), "SHA256")
    equal("its type", headers(r).get("x-amz-checksum-type"), "COMPOSITE")
    uid = r["UploadId"]
    r1 = s3.upload_part(Bucket=b, Key="m", UploadId=uid, PartNumber=1, Body=p1, ChecksumAlgorithm="SHA256")
    equal("part 1's checksum", r1.get("ChecksumSHA256"), b64(sha256(p1)))
    # A part sent without one gets it computed, as S3 does.
    r2 = s3.upload_part(Bucket=b, Key="m", UploadId=uid, PartNumber=2, Body=p2)
    equal("part 2's checksum, computed", r2.get("ChecksumSHA256"), b64(sha256(p2)))
    fails("a part of another algorithm", 400, "InvalidRequest", s3.upload_part, Bucket=b, Key="m",
          UploadId=uid, PartNumber=3, Body=p2, ChecksumAlgorithm="CRC32")
    r = s3.list_parts(Bucket=b, Key="m", UploadId=uid)
    equal("ListParts: each part's checksum", [p.get("ChecksumSHA256") for p in r.get("Parts", [])],
          [b64(sha256(p1)), b64(sha256(p2))])
    parts = [{"PartNumber": 1, "ETag": r1["ETag"], "ChecksumSHA256": r1["ChecksumSHA256"]},
             {"PartNumber": 2, "ETag": r2["ETag"], "ChecksumSHA256": r2["ChecksumSHA256"]}]
    whole = b64(sha256(sha256(p1) + sha256(p2))) + "-2"
    bad = [dict(parts[0]), parts[1]]
    bad[0]["ChecksumSHA256"] = b64(sha256(b"other"))
    fails("Complete listing a part's wrong checksum", 400, "InvalidPart", s3.complete_multipart_upload,
          Bucket=b, Key="m", UploadId=uid, MultipartUpload={"Parts": bad})
    fails("Complete with a wrong whole checksum", 400, "BadDigest", s3.complete_multipart_upload,
          Bucket=b, Key="m", UploadId=uid, MultipartUpload={"Parts": parts},
          ChecksumSHA256=b64(sha256(b"x")) + "-2")
    r = s3.complete_multipart_upload(Bucket=b, Key="m", UploadId=uid, MultipartUpload={"Parts": parts},
                                     ChecksumSHA256=whole)
    equal("Complete: the COMPOSITE checksum", r.get("ChecksumSHA256"), whole)
    r = s3.complete_multipart_upload(Bucket=b, Key="m", UploadId=uid, MultipartUpload={"Parts": parts},
                                     ChecksumSHA256=whole)
    equal("a repeated Complete: the same", r.get("ChecksumSHA256"), whole)
    r = s3.head_object(Bucket=b, Key="m", ChecksumMode="ENABLED")
    equal("HEAD: the COMPOSITE checksum", r.get("ChecksumSHA256"), whole)
    equal("HEAD: its type", headers(r).get("x-amz-checksum-type"), "COMPOSITE")
    r = s3.get_object(Bucket=b, Key="m", PartNumber=2, ChecksumMode="ENABLED")
    equal("GET of part 2: its bytes", r["Body"].read(), p2)
    equal("GET of part 2: its checksum", r.get("ChecksumSHA256"), b64(sha256(p2)))
    r = s3.get_object_attributes(Bucket=b, Key="m",
                                 ObjectAttributes=["ETag", "Checksum", "ObjectParts", "StorageClass", "ObjectSize"])
    equal("attributes: Checksum", r.get("Checksum", {}).get("ChecksumSHA256"), whole)
    equal("attributes: ObjectSize", r.get("ObjectSize"), len(p1) + len(p2))
    op = r.get("ObjectParts", {})
    equal("attributes: parts", op.get("TotalPartsCount"), 2)
    equal("attributes: each part's size and checksum",
          [(p.get("PartNumber"), p.get("Size"), p.get("ChecksumSHA256")) for p in op.get("Parts", [])],
          [(1, len(p1), b64(sha256(p1))), (2, len(p2), b64(sha256(p2)))])
    # A copy cannot keep a checksum of parts it does not have: the same
    # algorithm over all its bytes.
    r = s3.copy_object(Bucket=b, Key="copy", CopySource={"Bucket": b, "Key": "m"})
    equal("a copy of it: SHA256 of the whole", r["CopyObjectResult"].get("ChecksumSHA256"),
          b64(sha256(p1 + p2)))


@case
def multipart_full_object(s3, b):
    p1, p2 = os.urandom(5 * MIB), os.urandom(777)
    s3f = with_headers({"x-amz-checksum-type": "FULL_OBJECT"})
    r = s3f.create_multipart_upload(Bucket=b, Key="f", ChecksumAlgorithm="CRC32")
    equal("FULL_OBJECT asked", headers(r).get("x-amz-checksum-type"), "FULL_OBJECT")
    uid = r["UploadId"]
    r1 = s3.upload_part(Bucket=b, Key="f", UploadId=uid, PartNumber=1, Body=p1, ChecksumAlgorithm="CRC32")
    r2 = s3.upload_part(Bucket=b, Key="f", UploadId=uid, PartNumber=2, Body=p2, ChecksumAlgorithm="CRC32")
    parts = [{"PartNumber": 1, "ETag": r1["ETag"], "ChecksumCRC32": r1["ChecksumCRC32"]},
             {"PartNumber": 2, "ETag": r2["ETag"], "ChecksumCRC32": r2["ChecksumCRC32"]}]
    whole = b64(crc32(p1 + p2))
    r = s3.complete_multipart_upload(Bucket=b, Key="f", UploadId=uid, MultipartUpload={"Parts": parts},
                                     ChecksumCRC32=whole)
    equal("Complete: the CRC32 of all the bytes, combined from the parts'", r.get("ChecksumCRC32"), whole)
    r = s3.get_object(Bucket=b, Key="f", ChecksumMode="ENABLED")
    equal("GET: the bytes, checked by botocore", r["Body"].read(), p1 + p2)
    equal("GET: the whole's CRC32", r.get("ChecksumCRC32"), whole)
    equal("GET: FULL_OBJECT", headers(r).get("x-amz-checksum-type"), "FULL_OBJECT")
    fails("FULL_OBJECT with SHA256", 400, "InvalidRequest", s3f.create_multipart_upload,
          Bucket=b, Key="x", ChecksumAlgorithm="SHA256")
    fails("COMPOSITE with CRC64NVME", 400, "InvalidRequest",
          with_headers({"x-amz-checksum-algorithm": "CRC64NVME", "x-amz-checksum-type": "COMPOSITE"})
          .create_multipart_upload, Bucket=b, Key="x")
    # Without an algorithm there is nothing to check a whole value against.
    uid = s3.create_multipart_upload(Bucket=b, Key="p")["UploadId"]
    r1 = s3.upload_part(Bucket=b, Key="p", UploadId=uid, PartNumber=1, Body=p2)
    fails("a whole checksum on an upload without one", 501, "NotImplemented",
          s3.complete_multipart_upload, Bucket=b, Key="p", UploadId=uid,
          MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": r1["ETag"]}]}, ChecksumCRC32=b64(crc32(p2)))


@case
def attributes_parts_paged(s3, b):
    sizes = [6 * MIB, 5 * MIB, 1]  # unequal: the sizes are kept, not derived
    uid = s3.create_multipart_upload(Bucket=b, Key="u")["UploadId"]
    parts = []
    for n, size in enumerate(sizes, 1):
        r = s3.upload_part(Bucket=b, Key="u", UploadId=uid, PartNumber=n, Body=b"z" * size)
        parts.append({"PartNumber": n, "ETag": r["ETag"]})
    etag = s3.complete_multipart_upload(Bucket=b, Key="u", UploadId=uid,
                                        MultipartUpload={"Parts": parts})["ETag"].strip('"')
    want = ["ETag", "Checksum", "ObjectParts", "StorageClass", "ObjectSize"]
    r = s3.get_object_attributes(Bucket=b, Key="u", ObjectAttributes=want, MaxParts=1, PartNumberMarker=1)
    op = r.get("ObjectParts", {})
    equal("ETag, unquoted", r.get("ETag"), etag)
    equal("StorageClass", r.get("StorageClass"), "STANDARD")
    check("no Checksum", "Checksum" not in r, r)
    equal("a page of one after part 1",
          (op.get("TotalPartsCount"), op.get("PartNumberMarker"), op.get("NextPartNumberMarker"),
           op.get("MaxParts"), op.get("IsTruncated"),
           [(p["PartNumber"], p["Size"]) for p in op.get("Parts", [])]),
          (3, 1, 2, 1, True, [(2, 5 * MIB)]))
    r = s3.get_object_attributes(Bucket=b, Key="u", ObjectAttributes=want, PartNumberMarker=2)
    op = r.get("ObjectParts", {})
    equal("the last page", (op.get("IsTruncated"), [(p["PartNumber"], p["Size"]) for p in op.get("Parts", [])]),
          (False, [(3, 1)]))
    r = s3.get_object(Bucket=b, Key="u", PartNumber=2)
    equal("GET of part 2 of unequal ones", (r["ContentLength"], r["ContentRange"]),
          (5 * MIB, f"bytes {6 * MIB}-{11 * MIB - 1}/{11 * MIB + 1}"))
    s3.put_object(Bucket=b, Key="one", Body=b"foo")
    r = s3.get_object_attributes(Bucket=b, Key="one", ObjectAttributes=want)
    check("a PutObject's: no ObjectParts", "ObjectParts" not in r, r)
    equal("its size", r.get("ObjectSize"), 3)
    fails("an unknown attribute", 400, "InvalidArgument", s3.get_object_attributes,
          Bucket=b, Key="one", ObjectAttributes=["Bogus"])
    fails("no such key", 404, "NoSuchKey", s3.get_object_attributes,
          Bucket=b, Key="nope", ObjectAttributes=["ETag"])


@case
def copy_checksums(s3, b):
    body = os.urandom(2000)
    s3.put_object(Bucket=b, Key="s", Body=body, ChecksumAlgorithm="SHA1")
    r = s3.copy_object(Bucket=b, Key="d", CopySource={"Bucket": b, "Key": "s"})
    equal("a copy keeps the source's checksum", r["CopyObjectResult"].get("ChecksumSHA1"),
          b64(hashlib.sha1(body).digest()))
    r = s3.head_object(Bucket=b, Key="d", ChecksumMode="ENABLED")
    equal("and HEAD gives it", r.get("ChecksumSHA1"), b64(hashlib.sha1(body).digest()))
    r = s3.copy_object(Bucket=b, Key="e", CopySource={"Bucket": b, "Key": "s"}, ChecksumAlgorithm="CRC32")
    equal("a copy asked for CRC32 computes it", r["CopyObjectResult"].get("ChecksumCRC32"), b64(crc32(body)))
    r = s3.head_object(Bucket=b, Key="e", ChecksumMode="ENABLED")
    check("and keeps only that", r.get("ChecksumCRC32") == b64(crc32(body)) and "ChecksumSHA1" not in r, r)


run()
