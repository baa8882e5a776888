#!/usr/bin/env node
// A verifying proxy in front of s3rver for tests/cli/s3.bats.
//
// s3rver checks little of SigV4, so every signed request is verified here
// with AWS's own JavaScript signer (@smithy/signature-v4): the signature is
// recomputed from the request as S3 would see it (path decoded and
// re-encoded by AWS's rules, query parsed, the client's SignedHeaders) and
// a mismatch is answered 403 SignatureDoesNotMatch without reaching
// s3rver; a body whose SHA-256 is not its x-amz-content-sha256 gets 400
// XAmzContentSHA256Mismatch.  Good requests are forwarded unchanged.
//
// Multipart uploads are what s3rver does least like S3, so the proxy keeps
// them itself: it records each upload and its parts (size, MD5, ETag),
// answers AbortMultipartUpload and ListMultipartUploads (s3rver has
// neither), refuses a CompleteMultipartUpload whose parts are out of order,
// unknown, or under 5 MiB but the last (InvalidPartOrder, InvalidPart,
// EntityTooSmall), and gives the object S3's ETag, the MD5 of the parts'
// MD5s and "-N", in the Complete answer and in GET/HEAD afterwards.  GET
// honours If-Match (412 PreconditionFailed), which s3rver ignores, and a
// range of an empty object is 416 InvalidRange as on S3.
//
// A presigned request (X-Amz-Signature in the query, no Authorization) is
// verified the same way with the signer's presign(): the scope, an expiry
// in 1..604800 s that has not passed, and the signature over the query
// without X-Amz-Signature; a failure is 403 (AccessDenied when expired).
//
// S3 wants Content-MD5 on DeleteObjects (POST ?delete) and at most 1000
// keys: the proxy refuses a request without it (InvalidRequest), with a
// wrong one (BadDigest), or with more keys (MalformedXML).  s3rver never
// reports a key it could not delete, so the proxy can (see deletefail).
// CopyObject's x-amz-copy-source is decoded and re-encoded with encodeURI
// for s3rver, which reads it with decodeURI (that leaves %2B encoded).
// UploadPartCopy, which s3rver lacks, is done by the proxy: the source
// range read from s3rver, stored as an UploadPart (see uploadPartCopy).
// So is HEAD ?partNumber=N of a multipart object (headPart), from the
// part sizes its CompleteMultipartUpload kept.
//
// Control (not forwarded):
//   POST /__proxy/fault?status=503&count=2[&code=SlowDown][&op=UploadPart][&skip=1]
//        the next COUNT S3 requests (of operation OP only, after SKIP of
//        them went through) are answered STATUS with an S3 error
//   POST /__proxy/complete?etag=wrong|kms
//        the next CompleteMultipartUpload answers another MD5-N ETag than
//        the parts make (wrong), or a non-MD5 one with
//        x-amz-server-side-encryption: aws:kms (kms), as S3 does for SSE-KMS
//   POST /__proxy/deletefail?key=K[&code=AccessDenied]
//        the next DeleteObjects that names K reports K as not deleted
//        (an Error entry in its DeleteResult) and does not delete it
//   POST /__proxy/copyerror?code=InternalError
//        the next CopyObject or UploadPartCopy is answered 200 with an
//        Error body, as S3 does when a copy fails after the status went out
//   POST /__proxy/headsize?bytes=N
//        the next HeadObject answers Content-Length N (a huge object
//        without storing one)
//   POST /__proxy/listkey?bucket=B&real=K&key=SHOWN
//        from now on, ListObjectsV2 answers for bucket B show the stored
//        key K as SHOWN (a key s3rver cannot store, 'a/../../x' say, which
//        it would normalize)
//   POST /__proxy/listloop?count=N
//        the next N ListObjectsV2 answers say IsTruncated with the
//        NextContinuationToken "loop", and a request carrying that token
//        is answered the first page again: a server going round in circles
//   POST /__proxy/range416
//        the next 416 for a range of an empty object carries Content-Range:
//        bytes */0, as the HTTP spec suggests
//   POST /__proxy/corrupt?count=N[&op=PutObject|UploadPart|GetObject]
//        the next N such requests have one byte of their body flipped "in
//        flight": an upload's before the proxy's checks (so S3's
//        Content-MD5 check answers BadDigest), a GET's answer on its way
//        back (its length and headers kept)
//   POST /__proxy/slow?bps=N
//        GetObject bodies go back at about N bytes/s (0: at full speed)
//   POST /__proxy/drop?count=N[&op=OP[,OP...]][&after=BYTES]
//        the next N requests (of those operations only) lose their connection
//        once BYTES of their body arrived (0: at once), with no answer
//   POST /__proxy/putetag?etag=wrong|kms
//        the next PutObject answers an ETag other than the body's MD5
//        (wrong), or a random one with x-amz-server-side-encryption:
//        aws:kms (kms)
//   POST /__proxy/setetag?bucket=B&key=K&etag=E
//        GET and HEAD of B/K answer ETag E from now on (If-Match too)
//   GET  /__proxy/stats   {"verified":N,"rejected":N,"unsigned":N,"faults":N,
//                          "uploads":OPEN,"parts":N,"completed":N,"aborted":N,
//                          "ifMatch":N (GETs that carried If-Match),
//                          "connections":N (TCP connections accepted)}
//
// Usage: node proxy.js --port P --upstream PORT --key ID --secret S [--region R]
// Prints "listening PORT" once it listens; logs one line per request to stderr.
"use strict";

const http = require("http");
const crypto = require("crypto");
const { SignatureV4 } = require("@smithy/signature-v4");
const { Hash } = require("@smithy/hash-node");
const { escapeUri } = require("@smithy/core/protocols");

const args = {};
for (let i = 2; i < process.argv.length; i += 2) args[process.argv[i].replace(/^--/, "")] = process.argv[i + 1];
const upstream = Number(args.upstream);
const region = args.region || "us-east-1";
const stats = { connections: 0, verified: 0, presigned: 0, deletes: 0, copies: 0, rejected: 0, unsigned: 0, faults: 0, uploads: 0, parts: 0, completed: 0, aborted: 0, ifMatch: 0, contentMd5: 0, badDigest: 0, corrupted: 0, dropped: 0, partCopies: 0, headParts: 0 };
let fault = { status: 0, count: 0, code: "", op: "", skip: 0 };
const listKeys = new Map(); // "bucket/key" -> the key its listings show
let completeMode = "";
let deleteFail = null; // { key, code }
let copyError = "";
let headSize = "";
let corrupt = { count: 0, op: "" };
let listLoop = 0;     // listings still to send round in circles (listloop)
let range416 = false; // the next 416 says "bytes */SIZE" (range416)
let slowBps = 0;
let drop = { count: 0, op: "", after: 0 };
let putEtag = "";
const uploads = new Map(); // UploadId -> { bucket, key, initiated, parts: Map(n -> {size, md5, etag}) }
const etags = new Map();   // "bucket/key" -> S3's multipart ETag, for GET and HEAD
const partSizes = new Map(); // "bucket/key" -> its parts' sizes, for HEAD ?partNumber=
function forget(k) {
  etags.delete(k);
  partSizes.delete(k);
}
const MIN_PART = 5 << 20;

// "/bucket/key?query" as S3 operation, bucket, key (decoded), query.
function describe(req) {
  const qi = req.url.indexOf("?");
  const q = parseQuery(qi < 0 ? "" : req.url.slice(qi + 1));
  const path = (qi < 0 ? req.url : req.url.slice(0, qi)).split("/").slice(1);
  const bucket = decodeURIComponent(path[0] || "");
  const key = path.length > 1 ? path.slice(1).map(decodeURIComponent).join("/") : "";
  const m = req.method;
  let op = `${m} ${key ? "object" : bucket ? "bucket" : "service"}`;
  if (key && m === "POST" && "uploads" in q) op = "CreateMultipartUpload";
  else if (key && m === "PUT" && "uploadId" in q && req.headers["x-amz-copy-source"] !== undefined) op = "UploadPartCopy";
  else if (key && m === "PUT" && "uploadId" in q) op = "UploadPart";
  else if (key && m === "PUT" && req.headers["x-amz-copy-source"] !== undefined) op = "CopyObject";
  else if (!key && bucket && m === "POST" && "delete" in q) op = "DeleteObjects";
  else if (key && m === "POST" && "uploadId" in q) op = "CompleteMultipartUpload";
  else if (key && m === "DELETE" && "uploadId" in q) op = "AbortMultipartUpload";
  else if (!key && bucket && m === "GET" && "uploads" in q) op = "ListMultipartUploads";
  else if (key && m === "GET") op = "GetObject";
  else if (key && m === "HEAD") op = "HeadObject";
  else if (key && m === "PUT") op = "PutObject";
  else if (key && m === "DELETE") op = "DeleteObject";
  return { op, bucket, key, q };
}

function xmlUnescape(s) {
  return String(s).replace(/&lt;/g, "<").replace(/&gt;/g, ">").replace(/&quot;/g, '"')
    .replace(/&apos;/g, "'").replace(/&#(\d+);/g, (m, n) => String.fromCodePoint(Number(n))).replace(/&amp;/g, "&");
}

// A ListObjectsV2 answer as S3 would give it: multipart objects' ETags are
// S3's MD5-N (as on GET and HEAD), and keys set by listkey are shown so.
function rewriteListing(bucket, xml) {
  return xml.replace(/<Contents>([\s\S]*?)<\/Contents>/g, (all, inner) => {
    const m = /<Key>([^<]*)<\/Key>/.exec(inner);
    if (!m) return all;
    const id = `${bucket}/${xmlUnescape(m[1])}`;
    const mp = etags.get(id);
    if (mp) inner = inner.replace(/<ETag>[^<]*<\/ETag>/, `<ETag>${xmlEscape(mp)}</ETag>`);
    if (listKeys.has(id)) inner = inner.replace(m[0], `<Key>${xmlEscape(listKeys.get(id))}</Key>`);
    return `<Contents>${inner}</Contents>`;
  });
}

function xmlEscape(s) {
  return String(s).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");
}

function sendXml(res, status, xml) {
  const body = `<?xml version="1.0" encoding="UTF-8"?>\n${xml}`;
  res.writeHead(status, { "Content-Type": "application/xml", "Content-Length": Buffer.byteLength(body) });
  res.end(body);
}

function listUploads(res, bucket) {
  let xml = `<ListMultipartUploadsResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Bucket>${xmlEscape(bucket)}</Bucket><IsTruncated>false</IsTruncated>`;
  for (const [id, u] of uploads) {
    if (u.bucket !== bucket) continue;
    xml += `<Upload><Key>${xmlEscape(u.key)}</Key><UploadId>${id}</UploadId><Initiated>${u.initiated}</Initiated><StorageClass>STANDARD</StorageClass></Upload>`;
  }
  sendXml(res, 200, xml + "</ListMultipartUploadsResult>");
}

// Checks a CompleteMultipartUpload body against the parts seen; returns
// [code, message] of S3's error, or null and the parts in order.
function checkComplete(u, body) {
  const parts = [];
  const re = /<Part>([\s\S]*?)<\/Part>/g;
  let m;
  while ((m = re.exec(body.toString()))) {
    const n = /<PartNumber>(\d+)<\/PartNumber>/.exec(m[1]);
    const e = /<ETag>([^<]*)<\/ETag>/.exec(m[1]);
    if (!n || !e) return [["MalformedXML", "a Part without PartNumber or ETag"], null];
    parts.push({ n: Number(n[1]), etag: e[1].replace(/&quot;/g, '"') });
  }
  if (!parts.length) return [["MalformedXML", "no parts"], null];
  for (let i = 0; i < parts.length; i++) {
    const seen = u.parts.get(parts[i].n);
    if (i && parts[i].n <= parts[i - 1].n) return [["InvalidPartOrder", `part ${parts[i].n} after ${parts[i - 1].n}`], null];
    if (!seen || seen.etag.replace(/"/g, "") !== parts[i].etag.replace(/"/g, ""))
      return [["InvalidPart", `part ${parts[i].n}: unknown or wrong ETag ${parts[i].etag}`], null];
    if (i < parts.length - 1 && seen.size < MIN_PART)
      return [["EntityTooSmall", `part ${parts[i].n} is ${seen.size} bytes`], null];
  }
  return [null, parts.map((p) => u.parts.get(p.n))];
}

function s3error(res, status, code, message) {
  const body = `<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>${code}</Code><Message>${message}</Message><RequestId>proxy</RequestId></Error>`;
  res.writeHead(status, { "Content-Type": "application/xml", "Content-Length": Buffer.byteLength(body) });
  res.end(body);
}

// The path as S3 canonicalizes it: each segment decoded, then encoded by
// AWS's rules.  A client that sent another encoding ("+" raw, "%2b")
// signed a different string and fails, as it would against S3.
function canonicalPath(raw) {
  return raw.split("/").map((seg) => escapeUri(decodeURIComponent(seg))).join("/");
}

function parseQuery(raw) {
  const q = {};
  if (!raw) return q;
  for (const part of raw.split("&")) {
    if (!part) continue;
    const eq = part.indexOf("=");
    const k = decodeURIComponent(eq < 0 ? part : part.slice(0, eq));
    const v = eq < 0 ? "" : decodeURIComponent(part.slice(eq + 1));
    if (k in q) q[k] = [].concat(q[k], v);
    else q[k] = v;
  }
  return q;
}

async function verify(req, body) {
  const auth = req.headers.authorization;
  const m = /^AWS4-HMAC-SHA256 Credential=([^/]+)\/(\d{8})\/([^/]+)\/([^/]+)\/aws4_request, ?SignedHeaders=([^,]+), ?Signature=([0-9a-f]{64})$/.exec(auth || "");
  if (!m) return "the Authorization header is malformed";
  const [, keyId, , scopeRegion, service, signedHeaders, signature] = m;
  if (keyId !== args.key) return "unknown access key id";
  if (scopeRegion !== region || service !== "s3") return `scope ${scopeRegion}/${service}`;
  const amzDate = req.headers["x-amz-date"];
  if (!/^\d{8}T\d{6}Z$/.test(amzDate || "")) return "no x-amz-date";
  const payloadHash = req.headers["x-amz-content-sha256"];
  if (!payloadHash) return "no x-amz-content-sha256";
  if (payloadHash !== "UNSIGNED-PAYLOAD" &&
      crypto.createHash("sha256").update(body).digest("hex") !== payloadHash)
    return "XAmzContentSHA256Mismatch";
  const names = signedHeaders.split(";");
  if (!names.includes("host")) return "host is not signed";
  const headers = {};
  for (const n of names) {
    if (req.headers[n] === undefined) return `signed header ${n} is missing`;
    headers[n] = req.headers[n];
  }
  const url = req.url;
  const qi = url.indexOf("?");
  const signer = new SignatureV4({
    credentials: { accessKeyId: args.key, secretAccessKey: args.secret, sessionToken: req.headers["x-amz-security-token"] },
    region, service: "s3", sha256: Hash.bind(null, "sha256"), uriEscapePath: false, applyChecksum: false,
  });
  const d = amzDate;
  const signingDate = new Date(Date.UTC(+d.slice(0, 4), +d.slice(4, 6) - 1, +d.slice(6, 8), +d.slice(9, 11), +d.slice(11, 13), +d.slice(13, 15)));
  const signed = await signer.sign({
    method: req.method, protocol: "http:", hostname: "h", path: canonicalPath(qi < 0 ? url : url.slice(0, qi)),
    query: parseQuery(qi < 0 ? "" : url.slice(qi + 1)), headers,
  }, { signingDate, signableHeaders: new Set(names) });
  const want = signed.headers.authorization;
  const wm = /SignedHeaders=([^,]+), Signature=([0-9a-f]{64})/.exec(want);
  if (!wm || wm[1] !== signedHeaders || wm[2] !== signature) return "SignatureDoesNotMatch";
  return null;
}

// Verifies a presigned URL; returns null or why not (as verify()).
async function verifyPresigned(req) {
  const url = req.url;
  const qi = url.indexOf("?");
  const q = parseQuery(url.slice(qi + 1));
  for (const k of Object.keys(q)) if (Array.isArray(q[k])) return `repeated ${k}`;
  if (q["X-Amz-Algorithm"] !== "AWS4-HMAC-SHA256") return "X-Amz-Algorithm";
  const cm = /^([^/]+)\/(\d{8})\/([^/]+)\/([^/]+)\/aws4_request$/.exec(q["X-Amz-Credential"] || "");
  if (!cm) return "the X-Amz-Credential is malformed";
  if (cm[1] !== args.key) return "unknown access key id";
  if (cm[3] !== region || cm[4] !== "s3") return `scope ${cm[3]}/${cm[4]}`;
  const d = q["X-Amz-Date"] || "";
  if (!/^\d{8}T\d{6}Z$/.test(d) || d.slice(0, 8) !== cm[2]) return "X-Amz-Date";
  const expires = q["X-Amz-Expires"] || "";
  if (!/^\d{1,6}$/.test(expires) || +expires < 1 || +expires > 604800) return "X-Amz-Expires";
  const signature = q["X-Amz-Signature"] || "";
  if (!/^[0-9a-f]{64}$/.test(signature)) return "X-Amz-Signature";
  const signingDate = new Date(Date.UTC(+d.slice(0, 4), +d.slice(4, 6) - 1, +d.slice(6, 8), +d.slice(9, 11), +d.slice(11, 13), +d.slice(13, 15)));
  if (Date.now() > signingDate.getTime() + 1000 * +expires) return "expired";
  const names = (q["X-Amz-SignedHeaders"] || "").split(";");
  if (!names.includes("host")) return "host is not signed";
  const headers = { "x-amz-content-sha256": "UNSIGNED-PAYLOAD" };
  for (const n of names) {
    if (req.headers[n] === undefined) return `signed header ${n} is missing`;
    headers[n] = req.headers[n];
  }
  delete q["X-Amz-Signature"];
  const signer = new SignatureV4({
    credentials: { accessKeyId: args.key, secretAccessKey: args.secret, sessionToken: q["X-Amz-Security-Token"] },
    region, service: "s3", sha256: Hash.bind(null, "sha256"), uriEscapePath: false, applyChecksum: false,
  });
  const keep = new Set(["x-amz-content-sha256"]);
  const signed = await signer.presign({
    method: req.method, protocol: "http:", hostname: "h", path: canonicalPath(url.slice(0, qi)), query: q, headers,
  }, { signingDate, expiresIn: +expires, signableHeaders: new Set(names), unsignableHeaders: keep, unhoistableHeaders: keep });
  if (signed.query["X-Amz-SignedHeaders"] !== names.join(";") || signed.query["X-Amz-Signature"] !== signature)
    return "SignatureDoesNotMatch";
  return null;
}

// DeleteObjects as S3 checks it (see the top); returns [code, message] or
// null, and the keys.
function checkDelete(req, body) {
  const md5 = req.headers["content-md5"];
  if (!md5) return [["InvalidRequest", "Missing required header for this request: Content-MD5"], null];
  if (crypto.createHash("md5").update(body).digest("base64") !== md5)
    return [["BadDigest", "The Content-MD5 you specified did not match what we received"], null];
  const keys = [];
  const re = /<Key>([\s\S]*?)<\/Key>/g;
  let m;
  while ((m = re.exec(body.toString())))
    keys.push(m[1].replace(/&#(\d+);/g, (_, c) => String.fromCharCode(+c)).replace(/&lt;/g, "<").replace(/&gt;/g, ">")
      .replace(/&quot;/g, '"').replace(/&apos;/g, "'").replace(/&amp;/g, "&"));
  if (!keys.length || keys.length > 1000) return [["MalformedXML", `${keys.length} keys`], null];
  return [null, keys];
}

function deleteObjects(req, res, body, d) {
  const [err, keys] = checkDelete(req, body);
  if (err) {
    s3error(res, 400, err[0], err[1]);
    return;
  }
  stats.deletes++;
  for (const k of keys) forget(`${d.bucket}/${k}`);
  const f = deleteFail && keys.includes(deleteFail.key) ? deleteFail : null;
  if (f) deleteFail = null;
  let fwd = body;
  if (f) {
    const kept = keys.filter((k) => k !== f.key);
    if (!kept.length) {
      sendXml(res, 200, `<DeleteResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Error><Key>${xmlEscape(f.key)}</Key><Code>${f.code}</Code><Message>injected by the test proxy</Message></Error></DeleteResult>`);
      return;
    }
    fwd = Buffer.from(`<Delete>${kept.map((k) => `<Object><Key>${xmlEscape(k)}</Key></Object>`).join("")}</Delete>`);
    req.headers["content-length"] = String(fwd.length);
    req.headers["content-md5"] = crypto.createHash("md5").update(fwd).digest("base64");
  }
  forward(req, res, fwd, d, (ur, b) => {
    if (ur.statusCode !== 200 || !f) return { status: ur.statusCode, body: b };
    const err = `<Error><Key>${xmlEscape(f.key)}</Key><Code>${f.code}</Code><Message>injected by the test proxy</Message></Error>`;
    return { status: 200, body: b.toString().replace("</DeleteResult>", `${err}</DeleteResult>`) };
  });
}

// Forwards to s3rver; after(ur, body) may rewrite a whole answer (status,
// headers, body), else it is piped.
function forward(req, res, body, d, after) {
  const up = http.request({ host: "127.0.0.1", port: upstream, method: req.method, path: req.url, headers: req.headers }, (ur) => {
    const mp = d && etags.get(`${d.bucket}/${d.key}`);
    if (mp && (d.op === "GetObject" || d.op === "HeadObject") && ur.headers.etag) ur.headers.etag = mp;
    const ifMatch = req.headers["if-match"];
    if (ifMatch && d && d.op === "GetObject") stats.ifMatch++;
    if (ifMatch && d && d.op === "GetObject" && ur.statusCode < 300 && ur.headers.etag !== ifMatch) {
      ur.resume();
      s3error(res, 412, "PreconditionFailed", "At least one of the pre-conditions you specified did not hold");
      return;
    }
    if (d && d.op === "GetObject" && ur.statusCode === 206 && /\/0$/.test(ur.headers["content-range"] || "")) {
      // s3rver answers a range of an empty object "206, bytes 0-0/0,
      // Content-Length: 1" and sends no byte; S3 answers 416.
      ur.destroy();
      if (range416) {
        range416 = false;
        res.setHeader("Content-Range", "bytes */0");
      }
      s3error(res, 416, "InvalidRange", "The requested range is not satisfiable");
      return;
    }
    if (d && d.op === "HeadObject" && headSize && ur.statusCode === 200) {
      ur.headers["content-length"] = headSize;
      headSize = "";
    }
    const flip = d && d.op === "GetObject" && ur.statusCode < 300 && corrupt.count > 0 &&
      (!corrupt.op || corrupt.op === "GetObject");
    if (flip) corrupt.count--;
    if (!after && (flip || (slowBps && d && d.op === "GetObject"))) {
      // Chunk by chunk: one byte flipped, or paced to slowBps.
      let first = true;
      res.writeHead(ur.statusCode, ur.headers);
      res.on("close", () => ur.destroy());
      ur.on("data", (c) => {
        if (flip && first && c.length) {
          c = Buffer.from(c);
          c[0] ^= 0xff;
          stats.corrupted++;
        }
        first = false;
        res.write(c);
        if (slowBps) {
          ur.pause();
          setTimeout(() => ur.resume(), Math.ceil((c.length * 1000) / slowBps));
        }
      });
      ur.on("end", () => res.end());
      return;
    }
    if (!after) {
      res.writeHead(ur.statusCode, ur.headers);
      ur.pipe(res);
      return;
    }
    const chunks = [];
    ur.on("data", (c) => chunks.push(c));
    ur.on("end", () => {
      const r = after(ur, Buffer.concat(chunks));
      const h = { ...ur.headers };
      delete h["transfer-encoding"];
      h["content-length"] = Buffer.byteLength(r.body);
      res.writeHead(r.status, h);
      res.end(r.body);
    });
  });
  up.on("error", (e) => s3error(res, 502, "BadGateway", String(e.message)));
  up.end(body);
}

// UploadPartCopy, which s3rver answers NotImplemented, done as S3 would:
// the source's range (x-amz-copy-source-range, else all of it) is read from
// s3rver, checked against x-amz-copy-source-if-match (412
// PreconditionFailed), and stored as the part with an UploadPart of our
// own; the answer is S3's CopyPartResult with the part's MD5 as its ETag.
function uploadPartCopy(req, res, d, u) {
  const n = Number(d.q.partNumber);
  if (copyError) {
    const code = copyError;
    copyError = "";
    sendXml(res, 200, `<Error><Code>${code}</Code><Message>injected by the test proxy</Message><RequestId>proxy</RequestId></Error>`);
    return;
  }
  let src = decodeURIComponent(req.headers["x-amz-copy-source"].split("?")[0]);
  if (src.startsWith("/")) src = src.slice(1);
  const slash = src.indexOf("/");
  if (!(n >= 1 && n <= 10000) || slash <= 0) {
    s3error(res, 400, "InvalidArgument", "Bad part number or x-amz-copy-source");
    return;
  }
  const sbucket = src.slice(0, slash), skey = src.slice(slash + 1);
  const range = req.headers["x-amz-copy-source-range"];
  if (range !== undefined && !/^bytes=\d+-\d+$/.test(range)) {
    s3error(res, 400, "InvalidArgument", "The x-amz-copy-source-range value must be of the form bytes=first-last");
    return;
  }
  const path = "/" + encodeURIComponent(sbucket) + "/" + skey.split("/").map(encodeURIComponent).join("/");
  const headers = { authorization: req.headers.authorization, "x-amz-date": req.headers["x-amz-date"],
    "x-amz-content-sha256": "UNSIGNED-PAYLOAD" };
  if (range) headers.range = range;
  const get = http.request({ host: "127.0.0.1", port: upstream, method: "GET", path, headers }, (gr) => {
    const chunks = [];
    gr.on("data", (c) => chunks.push(c));
    gr.on("end", () => {
      const data = Buffer.concat(chunks);
      if (gr.statusCode >= 300) {
        res.writeHead(gr.statusCode, { "content-type": "application/xml" });
        res.end(data);
        return;
      }
      const etag = etags.get(`${sbucket}/${skey}`) || gr.headers.etag;
      const want = req.headers["x-amz-copy-source-if-match"];
      if (want !== undefined && want !== etag) {
        s3error(res, 412, "PreconditionFailed", "At least one of the pre-conditions you specified did not hold");
        return;
      }
      if (range) {
        const [a, b] = range.slice(6).split("-").map(Number);
        const total = Number((gr.headers["content-range"] || "/0").split("/")[1]);
        if (gr.statusCode !== 206 || b >= total || data.length !== b - a + 1) {
          s3error(res, 400, "InvalidRange", "The x-amz-copy-source-range is not within the source object");
          return;
        }
      }
      const ph = { ...req.headers, "content-length": data.length, "x-amz-content-sha256": "UNSIGNED-PAYLOAD" };
      for (const h of Object.keys(ph))
        if (h.startsWith("x-amz-copy-source")) delete ph[h];
      const put = http.request({ host: "127.0.0.1", port: upstream, method: "PUT", path: req.url, headers: ph }, (pr) => {
        const pc = [];
        pr.on("data", (c) => pc.push(c));
        pr.on("end", () => {
          if (pr.statusCode !== 200) {
            res.writeHead(pr.statusCode, { "content-type": "application/xml" });
            res.end(Buffer.concat(pc));
            return;
          }
          const md5 = crypto.createHash("md5").update(data).digest();
          const pe = `"${md5.toString("hex")}"`;
          u.parts.set(n, { size: data.length, md5, etag: pe });
          stats.partCopies++;
          sendXml(res, 200, `<CopyPartResult><LastModified>${new Date().toISOString()}</LastModified><ETag>${xmlEscape(pe)}</ETag></CopyPartResult>`);
        });
      });
      put.on("error", (e) => s3error(res, 502, "BadGateway", String(e.message)));
      put.end(data);
    });
  });
  get.on("error", (e) => s3error(res, 502, "BadGateway", String(e.message)));
  get.end();
}

// HeadObject ?partNumber=N, which s3rver ignores, as S3 answers it: for an
// object made by a multipart upload, 206 with part N's size as
// Content-Length, its Content-Range and x-amz-mp-parts-count; another
// object is its own part 1 (the whole of it), and has no part 2.
function headPart(req, res, d) {
  const n = Number(d.q.partNumber);
  const sizes = partSizes.get(`${d.bucket}/${d.key}`);
  stats.headParts++;
  if (!(n >= 1 && n <= (sizes ? sizes.length : 1))) {
    s3error(res, 416, "InvalidPartNumber", "The requested partnumber is not satisfiable");
    return;
  }
  const up = http.request({ host: "127.0.0.1", port: upstream, method: "HEAD", path: req.url, headers: req.headers }, (ur) => {
    ur.resume();
    const h = { ...ur.headers };
    if (!sizes || ur.statusCode !== 200) {
      res.writeHead(ur.statusCode, h);
      res.end();
      return;
    }
    const from = sizes.slice(0, n - 1).reduce((a, b) => a + b, 0);
    const total = sizes.reduce((a, b) => a + b, 0);
    h.etag = etags.get(`${d.bucket}/${d.key}`) || h.etag;
    h["content-length"] = String(sizes[n - 1]);
    h["content-range"] = `bytes ${from}-${from + sizes[n - 1] - 1}/${total}`;
    h["x-amz-mp-parts-count"] = String(sizes.length);
    res.writeHead(206, h);
    res.end();
  });
  up.on("error", (e) => s3error(res, 502, "BadGateway", String(e.message)));
  up.end();
}

// The multipart bookkeeping around forward() (see the top).
function multipart(req, res, body, d) {
  const u = d.q.uploadId !== undefined ? uploads.get(d.q.uploadId) : null;
  if (["UploadPart", "UploadPartCopy", "CompleteMultipartUpload", "AbortMultipartUpload"].includes(d.op) &&
      (!u || u.bucket !== d.bucket || u.key !== d.key)) {
    s3error(res, 404, "NoSuchUpload", "The specified upload does not exist");
    return;
  }
  switch (d.op) {
  case "ListMultipartUploads":
    listUploads(res, d.bucket);
    return;
  case "AbortMultipartUpload":
    uploads.delete(d.q.uploadId);
    stats.aborted++;
    res.writeHead(204);
    res.end();
    return;
  case "CreateMultipartUpload":
    forward(req, res, body, d, (ur, b) => {
      const m = /<UploadId>([^<]+)<\/UploadId>/.exec(b.toString());
      if (ur.statusCode === 200 && m)
        uploads.set(m[1], { bucket: d.bucket, key: d.key, initiated: new Date().toISOString(), parts: new Map() });
      return { status: ur.statusCode, body: b };
    });
    return;
  case "UploadPart": {
    const n = Number(d.q.partNumber);
    if (!(n >= 1 && n <= 10000)) {
      s3error(res, 400, "InvalidArgument", "Part number must be an integer between 1 and 10000, inclusive");
      return;
    }
    forward(req, res, body, d, (ur, b) => {
      if (ur.statusCode === 200) {
        stats.parts++;
        u.parts.set(n, { size: body.length, md5: crypto.createHash("md5").update(body).digest(), etag: ur.headers.etag || "" });
      }
      return { status: ur.statusCode, body: b };
    });
    return;
  }
  case "UploadPartCopy":
    uploadPartCopy(req, res, d, u);
    return;
  case "CompleteMultipartUpload": {
    const [err, parts] = checkComplete(u, body);
    if (err) {
      s3error(res, 400, err[0], err[1]);
      return;
    }
    const md5 = crypto.createHash("md5");
    for (const p of parts) md5.update(p.md5);
    let etag = `"${md5.digest("hex")}-${parts.length}"`;
    const mode = completeMode;
    completeMode = "";
    if (mode === "wrong") etag = `"${crypto.createHash("md5").update(etag).digest("hex")}-${parts.length}"`;
    if (mode === "kms") etag = `"${crypto.randomBytes(16).toString("hex")}-${parts.length}"`;
    forward(req, res, body, d, (ur, b) => {
      if (ur.statusCode !== 200) return { status: ur.statusCode, body: b };
      if (mode === "kms") ur.headers["x-amz-server-side-encryption"] = "aws:kms";
      uploads.delete(d.q.uploadId);
      stats.completed++;
      etags.set(`${d.bucket}/${d.key}`, etag);
      partSizes.set(`${d.bucket}/${d.key}`, parts.map((p) => p.size));
      return { status: 200, body: b.toString().replace(/<ETag>[^<]*<\/ETag>/, `<ETag>${xmlEscape(etag)}</ETag>`) };
    });
    return;
  }
  case "DeleteObjects":
    deleteObjects(req, res, body, d);
    return;
  case "GET bucket": {
    const loop = listLoop > 0 && /[?&]list-type=2/.test(req.url);
    if (loop) {
      listLoop--;
      req.url = req.url.replace(/([?&])continuation-token=loop(&|$)/, (m, a, b) => (b ? a : ""));
    }
    forward(req, res, body, d, (ur, b) => {
      let xml = ur.statusCode === 200 ? rewriteListing(d.bucket, b.toString()) : b;
      if (loop && ur.statusCode === 200)
        xml = xml.replace(/<IsTruncated>[^<]*<\/IsTruncated>/, "<IsTruncated>true</IsTruncated>")
          .replace(/<NextContinuationToken>[^<]*<\/NextContinuationToken>/, "")
          .replace("</IsTruncated>", "</IsTruncated><NextContinuationToken>loop</NextContinuationToken>");
      return { status: ur.statusCode, body: xml };
    });
    return;
  }
  case "CopyObject":
    stats.copies++;
    if (copyError) {
      const code = copyError;
      copyError = "";
      sendXml(res, 200, `<Error><Code>${code}</Code><Message>injected by the test proxy</Message><RequestId>proxy</RequestId></Error>`);
      return;
    }
    // S3 decodes the source; s3rver applies decodeURI, which a re-encoding with encodeURI survives.
    req.headers["x-amz-copy-source"] = encodeURI(decodeURIComponent(req.headers["x-amz-copy-source"]));
    forget(`${d.bucket}/${d.key}`);
    break;
  case "PutObject":
    forget(`${d.bucket}/${d.key}`);
    if (putEtag) {
      const mode = putEtag;
      putEtag = "";
      forward(req, res, body, d, (ur, b) => {
        if (mode === "kms") {
          ur.headers.etag = `"${crypto.randomBytes(16).toString("hex")}"`;
          ur.headers["x-amz-server-side-encryption"] = "aws:kms";
        } else {
          ur.headers.etag = `"${crypto.createHash("md5").update(String(ur.headers.etag)).digest("hex")}"`;
        }
        return { status: ur.statusCode, body: b };
      });
      return;
    }
    break;
  case "DeleteObject":
    forget(`${d.bucket}/${d.key}`);
    break;
  case "HeadObject":
    if (d.q.partNumber !== undefined) {
      headPart(req, res, d);
      return;
    }
    break;
  }
  forward(req, res, body, d);
}

const server = http.createServer((req, res) => {
  const chunks = [];
  // drop: this request's connection goes once `after` body bytes are in.
  let cut = -1, got = 0;
  if (drop.count > 0 && !req.url.startsWith("/__proxy/")) {
    let op = "";
    try {
      op = describe(req).op;
    } catch (e) {
      op = "unparsable";
    }
    if (!drop.op || drop.op.split(",").includes(op)) {
      drop.count--;
      stats.dropped++;
      cut = drop.after;
      console.error(`${req.method} ${req.url} -> dropped after ${cut} bytes`);
      if (!cut) {
        req.socket.destroy();
        return;
      }
    }
  }
  req.on("data", (c) => {
    got += c.length;
    if (cut >= 0 && got >= cut) req.socket.destroy();
    else chunks.push(c);
  });
  req.on("end", async () => {
    if (cut >= 0) return;
    const body = Buffer.concat(chunks);
    const line = `${req.method} ${req.url}${req.headers.range ? ` [${req.headers.range}]` : ""}`;
    if (req.url.startsWith("/__proxy/corrupt")) {
      const q = parseQuery(req.url.split("?")[1] || "");
      corrupt = { count: Number(q.count || 1), op: q.op || "" };
      res.end("ok\n");
      return;
    }
    if (req.url.startsWith("/__proxy/slow")) {
      slowBps = Number(parseQuery(req.url.split("?")[1] || "").bps || 0);
      res.end("ok\n");
      return;
    }
    if (req.url.startsWith("/__proxy/drop")) {
      const q = parseQuery(req.url.split("?")[1] || "");
      drop = { count: Number(q.count || 1), op: q.op || "", after: Number(q.after || 0) };
      res.end("ok\n");
      return;
    }
    if (req.url.startsWith("/__proxy/putetag")) {
      putEtag = parseQuery(req.url.split("?")[1] || "").etag || "";
      res.end("ok\n");
      return;
    }
    if (req.url.startsWith("/__proxy/setetag")) {
      const q = parseQuery(req.url.split("?")[1] || "");
      etags.set(`${q.bucket}/${q.key}`, q.etag);
      res.end("ok\n");
      return;
    }
    if (req.url.startsWith("/__proxy/fault")) {
      const q = parseQuery(req.url.split("?")[1] || "");
      fault = { status: Number(q.status || 503), count: Number(q.count || 1), code: q.code || "ServiceUnavailable",
        op: q.op || "", skip: Number(q.skip || 0) };
      res.end("ok\n");
      return;
    }
    if (req.url.startsWith("/__proxy/complete")) {
      completeMode = parseQuery(req.url.split("?")[1] || "").etag || "";
      res.end("ok\n");
      return;
    }
    if (req.url.startsWith("/__proxy/deletefail")) {
      const q = parseQuery(req.url.split("?")[1] || "");
      deleteFail = { key: q.key || "", code: q.code || "AccessDenied" };
      res.end("ok\n");
      return;
    }
    if (req.url.startsWith("/__proxy/headsize")) {
      headSize = String(Number(parseQuery(req.url.split("?")[1] || "").bytes || 0));
      res.end("ok\n");
      return;
    }
    if (req.url.startsWith("/__proxy/listloop")) {
      listLoop = Number(parseQuery(req.url.split("?")[1] || "").count || 1);
      res.end("ok\n");
      return;
    }
    if (req.url.startsWith("/__proxy/range416")) {
      range416 = true;
      res.end("ok\n");
      return;
    }
    if (req.url.startsWith("/__proxy/listkey")) {
      const q = parseQuery(req.url.split("?")[1] || "");
      listKeys.set(`${q.bucket}/${q.real}`, q.key);
      res.end("ok\n");
      return;
    }
    if (req.url.startsWith("/__proxy/copyerror")) {
      copyError = parseQuery(req.url.split("?")[1] || "").code || "InternalError";
      res.end("ok\n");
      return;
    }
    if (req.url === "/__proxy/stats") {
      stats.uploads = uploads.size;
      res.end(JSON.stringify(stats) + "\n");
      return;
    }
    let d;
    try {
      d = describe(req);
    } catch (e) {
      d = { op: "unparsable", bucket: "", key: "", q: {} };
    }
    if ((d.op === "PutObject" || d.op === "UploadPart") && corrupt.count > 0 &&
        (!corrupt.op || corrupt.op === d.op) && body.length) {
      corrupt.count--;
      stats.corrupted++;
      body[body.length >> 1] ^= 0xff;
      console.error(`${line} -> one byte of the body flipped`);
    }
    // S3 checks Content-MD5 against the body it received; s3rver does not.
    if ((d.op === "PutObject" || d.op === "UploadPart") && req.headers["content-md5"] !== undefined) {
      if (crypto.createHash("md5").update(body).digest("base64") !== req.headers["content-md5"]) {
        stats.badDigest++;
        console.error(`${line} -> BadDigest`);
        s3error(res, 400, "BadDigest", "The Content-MD5 you specified did not match what we received.");
        return;
      }
      stats.contentMd5++;
    }
    if (fault.count > 0 && (!fault.op || fault.op === d.op) && fault.skip > 0) {
      fault.skip--;
    } else if (fault.count > 0 && (!fault.op || fault.op === d.op)) {
      fault.count--;
      stats.faults++;
      console.error(`${line} -> fault ${fault.status}`);
      s3error(res, fault.status, fault.code, "injected by the test proxy");
      return;
    }
    if (!req.headers.authorization && /[?&]X-Amz-Signature=/.test(req.url)) {
      let why;
      try {
        why = await verifyPresigned(req);
      } catch (e) {
        why = `verifier error: ${e.message}`;
      }
      if (why) {
        stats.rejected++;
        console.error(`${line} -> presigned rejected: ${why}`);
        if (why === "expired") s3error(res, 403, "AccessDenied", "Request has expired");
        else s3error(res, 403, "SignatureDoesNotMatch", `The request signature we calculated does not match the signature you provided. (${why})`);
        return;
      }
      stats.presigned++;
      console.error(`${line} -> presigned, verified`);
      multipart(req, res, body, d);
      return;
    }
    if (!req.headers.authorization) {
      stats.unsigned++;
      console.error(`${line} -> unsigned`);
      forward(req, res, body);
      return;
    }
    let why;
    try {
      why = await verify(req, body);
    } catch (e) {
      why = `verifier error: ${e.message}`;
    }
    if (why) {
      stats.rejected++;
      console.error(`${line} -> rejected: ${why}`);
      if (why === "XAmzContentSHA256Mismatch")
        s3error(res, 400, why, "The provided 'x-amz-content-sha256' header does not match what was computed.");
      else
        s3error(res, 403, "SignatureDoesNotMatch",
          `The request signature we calculated does not match the signature you provided. Check your key and signing method. (${why})`);
      return;
    }
    stats.verified++;
    console.error(`${line} -> verified`);
    multipart(req, res, body, d);
  });
});
server.on("connection", () => stats.connections++);
server.keepAliveTimeout = 30000;
server.listen(Number(args.port || 0), "127.0.0.1", () => {
  console.log(`listening ${server.address().port}`);
});
