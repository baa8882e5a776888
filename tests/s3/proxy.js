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
// Control (not forwarded):
//   POST /__proxy/fault?status=503&count=2[&code=SlowDown]
//        the next COUNT S3 requests are answered STATUS with an S3 error
//   GET  /__proxy/stats   {"verified":N,"rejected":N,"unsigned":N,"faults":N}
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
const stats = { verified: 0, rejected: 0, unsigned: 0, faults: 0 };
let fault = { status: 0, count: 0, code: "" };

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

function forward(req, res, body) {
  const up = http.request({ host: "127.0.0.1", port: upstream, method: req.method, path: req.url, headers: req.headers }, (ur) => {
    res.writeHead(ur.statusCode, ur.headers);
    ur.pipe(res);
  });
  up.on("error", (e) => s3error(res, 502, "BadGateway", String(e.message)));
  up.end(body);
}

const server = http.createServer((req, res) => {
  const chunks = [];
  req.on("data", (c) => chunks.push(c));
  req.on("end", async () => {
    const body = Buffer.concat(chunks);
    const line = `${req.method} ${req.url}`;
    if (req.url.startsWith("/__proxy/fault")) {
      const q = parseQuery(req.url.split("?")[1] || "");
      fault = { status: Number(q.status || 503), count: Number(q.count || 1), code: q.code || "ServiceUnavailable" };
      res.end("ok\n");
      return;
    }
    if (req.url === "/__proxy/stats") {
      res.end(JSON.stringify(stats) + "\n");
      return;
    }
    if (fault.count > 0) {
      fault.count--;
      stats.faults++;
      console.error(`${line} -> fault ${fault.status}`);
      s3error(res, fault.status, fault.code, "injected by the test proxy");
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
    forward(req, res, body);
  });
});
server.keepAliveTimeout = 30000;
server.listen(Number(args.port || 0), "127.0.0.1", () => {
  console.log(`listening ${server.address().port}`);
});
