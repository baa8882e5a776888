"""aws-chunked uploads (x-amz-content-sha256: STREAMING-*) to rds3 serve,
built by hand so that each can be broken in one place: signed chunks in
their chain (STREAMING-AWS4-HMAC-SHA256-PAYLOAD), with a signed trailer
(...-TRAILER), unsigned with a checksum trailer of every algorithm
(STREAMING-UNSIGNED-PAYLOAD-TRAILER), inside HTTP chunked as AWS's SDKs
send it; then a flipped chunk signature, a flipped data byte, wrong
decoded lengths, bad trailers and framing.  A refused upload must leave
the object that was there, and make none where there was none (the bats
file checks that no temporary is left).  With S3_TLS_URL (a TLS proxy in
front of the server) boto3's own aws-chunked upload is checked too: it
sends one over TLS only."""

import base64
import datetime
import hashlib
import hmac
import http.client
import os
import urllib.parse
import zlib

from s3t import case, check, client, equal, fails, run

REGION = "us-east-1"
URL = urllib.parse.urlsplit(os.environ["S3_URL"])
KEY, SECRET = os.environ["S3_KEY"], os.environ["S3_SECRET"]
EMPTY = hashlib.sha256(b"").hexdigest()


def _crc(poly, bits):
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ poly if c & 1 else c >> 1
        table.append(c)
    mask = (1 << bits) - 1

    def crc(data):
        c = mask
        for b in data:
            c = table[(c ^ b) & 0xFF] ^ (c >> 8)
        return (c ^ mask).to_bytes(bits // 8, "big")
    return crc


CHECKSUMS = {
    "crc32": lambda d: zlib.crc32(d).to_bytes(4, "big"),
    "crc32c": _crc(0x82F63B78, 32),
    "crc64nvme": _crc(0x9A6C9329AC4BC9B5, 64),
    "sha1": lambda d: hashlib.sha1(d).digest(),
    "sha256": lambda d: hashlib.sha256(d).digest(),
}


def checksum(alg, data):
    return base64.b64encode(CHECKSUMS[alg](data)).decode()


def _hmac(key, msg):
    return hmac.new(key, msg.encode(), hashlib.sha256).digest()


class Signer:
    """SigV4 for one request, and the chain its chunks continue."""

    def __init__(self):
        now = datetime.datetime.now(datetime.timezone.utc)
        self.date = now.strftime("%Y%m%dT%H%M%SZ")
        self.scope = f"{self.date[:8]}/{REGION}/s3/aws4_request"
        k = _hmac(("AWS4" + SECRET).encode(), self.date[:8])
        for part in (REGION, "s3", "aws4_request"):
            k = _hmac(k, part)
        self.key = k

    def authorization(self, method, path, query, headers, payload):
        q = "&".join(f"{urllib.parse.quote(k, safe='-_.~')}={urllib.parse.quote(v, safe='-_.~')}"
                      for k, v in sorted(query.items()))
        h = {k.lower(): str(v).strip() for k, v in headers.items()}
        names = ";".join(sorted(h))
        creq = "\n".join([method, urllib.parse.quote(path, safe="/-_.~"), q,
                          "".join(f"{k}:{h[k]}\n" for k in sorted(h)), names, payload])
        sts = "\n".join(["AWS4-HMAC-SHA256", self.date, self.scope,
                         hashlib.sha256(creq.encode()).hexdigest()])
        self.prev = hmac.new(self.key, sts.encode(), hashlib.sha256).hexdigest()
        return (f"AWS4-HMAC-SHA256 Credential={KEY}/{self.scope}, "
                f"SignedHeaders={names}, Signature={self.prev}")

    def chunk(self, data):
        sts = "\n".join(["AWS4-HMAC-SHA256-PAYLOAD", self.date, self.scope, self.prev,
                         EMPTY, hashlib.sha256(data).hexdigest()])
        self.prev = hmac.new(self.key, sts.encode(), hashlib.sha256).hexdigest()
        return self.prev

    def trailer(self, lines):
        sts = "\n".join(["AWS4-HMAC-SHA256-TRAILER", self.date, self.scope, self.prev,
                         hashlib.sha256(lines.encode()).hexdigest()])
        return hmac.new(self.key, sts.encode(), hashlib.sha256).hexdigest()


def put(bucket, key, data, mode="signed", sizes=(65536,), trailer=None,
        query=None, headers=None, bad=None, http_chunked=False):
    """Sends data aws-chunked in chunks of sizes (the last repeated) as
    mode: "signed", "signed-trailer" or "unsigned-trailer"; trailer the
    checksum algorithm.  bad breaks one thing: "sig" (the second chunk's
    signature), "data" (a byte after signing), "trailer-sig",
    "trailer-sum" (a wrong value, signed), "framing", "no-trailer",
    "after" (bytes after the end).  Returns (status, code, headers)."""
    s = Signer()
    sha = {"signed": "STREAMING-AWS4-HMAC-SHA256-PAYLOAD",
           "signed-trailer": "STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER",
           "unsigned-trailer": "STREAMING-UNSIGNED-PAYLOAD-TRAILER"}.get(mode, mode)
    h = {"Host": URL.netloc, "x-amz-date": s.date, "x-amz-content-sha256": sha,
         "Content-Encoding": "aws-chunked", "x-amz-decoded-content-length": str(len(data))}
    if trailer:
        h["x-amz-trailer"] = "x-amz-checksum-" + trailer
    h.update(headers or {})
    h = {k: v for k, v in h.items() if v is not None}
    path = f"/{bucket}/{key}"
    auth = s.authorization("PUT", path, query or {}, h, sha)
    signed = mode.startswith("signed")
    pieces, off, i = [], 0, 0
    while True:
        n = min(sizes[min(i, len(sizes) - 1)], len(data) - off)
        chunk = data[off:off + n]
        head = f"{n:x}"
        if signed:
            sig = s.chunk(chunk)
            if bad == "sig" and i == 1:
                sig = sig[:10] + ("0" if sig[10] != "0" else "1") + sig[11:]
            head += ";chunk-signature=" + sig
        if bad == "data" and i == 1:
            chunk = bytes([chunk[0] ^ 1]) + chunk[1:]
        if bad == "framing" and i == 1:
            head = "zz" + head
        pieces.append(head.encode() + b"\r\n" + chunk + (b"\r\n" if n else b""))
        off += n
        i += 1
        if not n:
            break
    if trailer and bad != "no-trailer":
        value = checksum(trailer, data)
        if bad == "trailer-sum":
            value = checksum(trailer, data + b"x")
        lines = f"x-amz-checksum-{trailer}:{value}\n"
        pieces.append(lines.replace("\n", "\r\n").encode())
        if signed:
            sig = s.trailer(lines)
            if bad == "trailer-sig":
                sig = "0" * 64
            pieces.append(f"x-amz-trailer-signature:{sig}\r\n".encode())
    pieces.append(b"\r\n")
    if bad == "after":
        pieces.append(b"0\r\n\r\n")
    body = b"".join(pieces)
    conn = http.client.HTTPConnection(URL.hostname, URL.port, timeout=30)
    target = path + ("?" + urllib.parse.urlencode(query) if query else "")
    conn.putrequest("PUT", target, skip_host=True, skip_accept_encoding=True)
    for k, v in h.items():
        conn.putheader(k, v)
    conn.putheader("Authorization", auth)
    if http_chunked:  # as the SDKs do: HTTP chunks of their own around it
        conn.putheader("Transfer-Encoding", "chunked")
        conn.endheaders()
        cut = len(body) - 100 if http_chunked == "short" else len(body)
        for at in range(0, cut, 9000):
            part = body[at:min(at + 9000, cut)]
            conn.send(f"{len(part):x}\r\n".encode() + part + b"\r\n")
        conn.send(b"0\r\n\r\n")
    else:
        conn.putheader("Content-Length", str(len(body)))
        conn.endheaders()
        conn.send(body)
    r = conn.getresponse()
    text = r.read().decode(errors="replace")
    code = text.split("<Code>")[1].split("</Code>")[0] if "<Code>" in text else None
    out = (r.status, code, {k.lower(): v for k, v in r.getheaders()})
    conn.close()
    return out


def body_of(s3, b, k):
    return s3.get_object(Bucket=b, Key=k)["Body"].read()


def payload(n, seed=1):
    return hashlib.shake_256(str(seed).encode()).digest(n)


@case
def signed_chain(s3, b):
    data = payload(150000)
    st, code, h = put(b, "s", data, sizes=(65536, 65536, 8192),
                      headers={"Content-Encoding": "gzip, aws-chunked", "Content-Type": "text/x-t"})
    equal("signed chunks: status", (st, code), (200, None))
    equal("signed chunks: ETag", h.get("etag"), '"%s"' % hashlib.md5(data).hexdigest())
    equal("signed chunks: the bytes", body_of(s3, b, "s"), data)
    r = s3.head_object(Bucket=b, Key="s")
    equal("gzip, aws-chunked is stored as gzip", r.get("ContentEncoding"), "gzip")
    equal("Content-Type kept", r.get("ContentType"), "text/x-t")
    st, code, h = put(b, "plain", b"")
    equal("an empty signed body", (st, code), (200, None))
    check("aws-chunked alone stores no Content-Encoding",
          "ContentEncoding" not in s3.head_object(Bucket=b, Key="plain"))
    # One 12 MiB chunk: read straight into the server's buffer.
    big = payload(12 << 20, 2)
    st, code, h = put(b, "big", big, sizes=(12 << 20,))
    equal("one 12 MiB signed chunk", (st, code), (200, None))
    equal("one 12 MiB signed chunk: ETag", h.get("etag"), '"%s"' % hashlib.md5(big).hexdigest())


@case
def signed_trailer(s3, b):
    data = payload(70000)
    st, code, h = put(b, "t", data, mode="signed-trailer", trailer="crc32c", sizes=(65536,))
    equal("signed trailer: status", (st, code), (200, None))
    equal("signed trailer: the checksum echoed", h.get("x-amz-checksum-crc32c"), checksum("crc32c", data))
    equal("signed trailer: the bytes", body_of(s3, b, "t"), data)


@case
def unsigned_trailers(s3, b):
    data = payload(20000, 3)
    for alg in CHECKSUMS:
        st, code, h = put(b, alg, data, mode="unsigned-trailer", trailer=alg, sizes=(8192,))
        equal(f"unsigned {alg} trailer: status", (st, code), (200, None))
        equal(f"unsigned {alg} trailer: echoed", h.get("x-amz-checksum-" + alg), checksum(alg, data))
        equal(f"unsigned {alg} trailer: the bytes", body_of(s3, b, alg), data)
    st, code, h = put(b, "in-http-chunked", data, mode="unsigned-trailer", trailer="crc32",
                      http_chunked=True)
    equal("inside HTTP chunked: status", (st, code), (200, None))
    equal("inside HTTP chunked: the bytes", body_of(s3, b, "in-http-chunked"), data)
    equal("known check values: CRC32C, CRC64NVME of 123456789",
          (CHECKSUMS["crc32c"](b"123456789").hex(), CHECKSUMS["crc64nvme"](b"123456789").hex()),
          ("e3069283", "ae8b14860a799888"))


def refused(s3, b, what, want, **kw):
    """put(**kw) over an existing object and a new key: the answer is want
    (status, code) and neither key changes."""
    s3.put_object(Bucket=b, Key="old", Body=b"old value")
    data = kw.pop("data", payload(100000, 4))
    got = put(b, "old", data, **kw)[:2]
    check(what, got == want, f"got {got}, want {want}")
    equal(f"{what}: the object there is kept", body_of(s3, b, "old"), b"old value")
    got = put(b, "new", data, **kw)[:2]
    check(f"{what} (new key)", got == want, f"got {got}, want {want}")
    fails(f"{what}: no object is made", 404, "NoSuchKey", s3.get_object, Bucket=b, Key="new")


@case
def refusals(s3, b):
    sigmm = (403, "SignatureDoesNotMatch")
    refused(s3, b, "a flipped chunk signature", sigmm, bad="sig")
    refused(s3, b, "a flipped data byte", sigmm, bad="data")
    refused(s3, b, "a flipped data byte, signed trailer", sigmm, bad="data",
            mode="signed-trailer", trailer="sha256")
    refused(s3, b, "a wrong trailer signature", sigmm, mode="signed-trailer",
            trailer="crc32", bad="trailer-sig")
    refused(s3, b, "a wrong checksum, signed", (400, "BadDigest"), mode="signed-trailer",
            trailer="crc32", bad="trailer-sum")
    refused(s3, b, "a wrong checksum trailer", (400, "BadDigest"), mode="unsigned-trailer",
            trailer="crc64nvme", bad="trailer-sum")
    refused(s3, b, "a declared trailer missing", (400, "MalformedTrailerError"),
            mode="unsigned-trailer", trailer="crc32", bad="no-trailer")
    refused(s3, b, "decoded length one more", (400, "IncompleteBody"),
            headers={"x-amz-decoded-content-length": "100001"})
    refused(s3, b, "decoded length one less", (400, "IncompleteBody"),
            headers={"x-amz-decoded-content-length": "99999"})
    refused(s3, b, "no decoded length", (411, "MissingContentLength"),
            headers={"x-amz-decoded-content-length": None})
    refused(s3, b, "a decoded length past 5 GiB", (400, "EntityTooLarge"),
            headers={"x-amz-decoded-content-length": str((5 << 30) + 1)})
    refused(s3, b, "malformed framing", (400, "IncompleteBody"), bad="framing")
    refused(s3, b, "bytes after the end", (400, "IncompleteBody"), bad="after")
    refused(s3, b, "HTTP's body ends inside the framing", (400, "IncompleteBody"),
            mode="unsigned-trailer", trailer="crc32", http_chunked="short")
    refused(s3, b, "a trailer and an x-amz-checksum header", (400, "InvalidRequest"),
            mode="unsigned-trailer", trailer="crc32",
            headers={"x-amz-checksum-sha1": checksum("sha1", b"")})
    refused(s3, b, "SigV4a streaming", (501, "NotImplemented"),
            mode="STREAMING-AWS4-ECDSA-P256-SHA256-PAYLOAD")
    # Content-Encoding aws-chunked on a plain body (no STREAMING-*): the
    # body is the object, as S3 stores it, and aws-chunked is dropped.
    s3.put_object(Bucket=b, Key="plain", Body=b"plain bytes", ContentEncoding="gzip, aws-chunked")
    r = s3.get_object(Bucket=b, Key="plain")
    equal("a plain body under aws-chunked", (r["Body"].read(), r.get("ContentEncoding")),
          (b"plain bytes", "gzip"))


@case
def upload_part(s3, b):
    parts = [payload(5 << 20, 5), payload(300000, 6)]
    up = s3.create_multipart_upload(Bucket=b, Key="m")["UploadId"]
    etags = []
    for n, (data, mode) in enumerate(zip(parts, ("signed", "unsigned-trailer")), 1):
        st, code, h = put(b, "m", data, mode=mode, trailer="crc32" if mode != "signed" else None,
                          query={"partNumber": str(n), "uploadId": up})
        equal(f"UploadPart {n} ({mode}): status", (st, code), (200, None))
        equal(f"UploadPart {n}: ETag", h.get("etag"), '"%s"' % hashlib.md5(data).hexdigest())
        etags.append(h.get("etag"))
    st, code, _ = put(b, "m", parts[1], bad="sig", query={"partNumber": "3", "uploadId": up})
    equal("UploadPart with a flipped chunk signature", (st, code), (403, "SignatureDoesNotMatch"))
    fails("the refused part 3 is not there", 400, "InvalidPart", s3.complete_multipart_upload,
          Bucket=b, Key="m", UploadId=up, MultipartUpload={"Parts": [
              {"ETag": etags[0], "PartNumber": 1}, {"ETag": etags[1], "PartNumber": 3}]})
    s3.complete_multipart_upload(Bucket=b, Key="m", UploadId=up, MultipartUpload={
        "Parts": [{"ETag": e, "PartNumber": n} for n, e in enumerate(etags, 1)]})
    equal("the multipart object", body_of(s3, b, "m"), b"".join(parts))


@case
def boto3_over_tls(s3, b):
    """Debian's boto3 sends aws-chunked (STREAMING-UNSIGNED-PAYLOAD-TRAILER)
    when asked for a checksum, over https only."""
    url = os.environ.get("S3_TLS_URL")
    if not check("S3_TLS_URL is set (tests/cli/s3boto.bats's TLS proxy)", url):
        return
    import urllib3
    urllib3.disable_warnings()
    import boto3
    from botocore.config import Config
    tls = boto3.client("s3", endpoint_url=url, region_name=REGION, verify=False,
                       aws_access_key_id=KEY, aws_secret_access_key=SECRET,
                       config=Config(signature_version="s3v4", s3={"addressing_style": "path"},
                                     retries={"max_attempts": 1}))
    sent = {}
    tls.meta.events.register("before-send.s3.PutObject",
                             lambda request, **_: sent.update(
                                 (k.lower(), v.decode() if isinstance(v, bytes) else v)
                                 for k, v in request.headers.items()))
    data = payload(300000, 7)
    for alg in ("CRC32", "CRC32C", "SHA1", "SHA256"):
        r = tls.put_object(Bucket=b, Key=alg, Body=data, ChecksumAlgorithm=alg)
        equal(f"boto3 {alg}: sent aws-chunked", sent.get("x-amz-content-sha256"),
              "STREAMING-UNSIGNED-PAYLOAD-TRAILER")
        equal(f"boto3 {alg}: the checksum echoed", r.get("Checksum" + alg), checksum(alg.lower(), data))
        equal(f"boto3 {alg}: the bytes", body_of(s3, b, alg), data)
    r = tls.create_multipart_upload(Bucket=b, Key="m")
    part = tls.upload_part(Bucket=b, Key="m", UploadId=r["UploadId"], PartNumber=1, Body=data,
                           ChecksumAlgorithm="CRC32")
    equal("boto3 UploadPart: the checksum echoed", part.get("ChecksumCRC32"), checksum("crc32", data))
    tls.complete_multipart_upload(Bucket=b, Key="m", UploadId=r["UploadId"], MultipartUpload={
        "Parts": [{"ETag": part["ETag"], "PartNumber": 1}]})
    equal("boto3 multipart over TLS: the bytes", body_of(s3, b, "m"), data)


if __name__ == "__main__":
    run()
