#!/usr/bin/env node
// AWS's JavaScript S3 client (@aws-sdk/client-s3, pinned in package.json)
// against `rds3 serve` (tests/cli/s3boto.bats): S3_URL, S3_KEY, S3_SECRET
// in the environment.  With its defaults the SDK sends a streamed body as
// aws-chunked with a CRC32 trailer (x-amz-content-sha256:
// STREAMING-UNSIGNED-PAYLOAD-TRAILER, HTTP chunked around it); each
// request's headers as signed and sent are recorded, so a run that did not
// go that way fails instead of passing on a plain body.  PutObject and a
// multipart upload go up, GetObject brings them back byte for byte.
// Every failed check is printed; the exit status is 1 when any failed.
"use strict";

const { Readable } = require("stream");
const crypto = require("crypto");
const zlib = require("zlib");
const {
	S3Client,
	CreateBucketCommand,
	PutObjectCommand,
	HeadObjectCommand,
	GetObjectCommand,
	CreateMultipartUploadCommand,
	UploadPartCommand,
	CompleteMultipartUploadCommand,
} = require("@aws-sdk/client-s3");

const failed = [];
const check = (what, ok, detail) => {
	if (!ok) failed.push(`${what}${detail ? ": " + detail : ""}`);
	return ok;
};

// The headers of the last request, as they went out (after signing).
let sent = {};
const s3 = new S3Client({
	endpoint: process.env.S3_URL,
	region: "us-east-1",
	forcePathStyle: true,
	maxAttempts: 1,
	credentials: { accessKeyId: process.env.S3_KEY, secretAccessKey: process.env.S3_SECRET },
});
s3.middlewareStack.add(
	(next) => async (args) => {
		sent = { ...args.request.headers };
		return next(args);
	},
	{ step: "finalizeRequest", priority: "low", name: "rdxRecordHeaders" },
);

// A body the SDK cannot measure by itself: a stream, in pieces of 64 KiB
// and odd ones, so the aws-chunked chunks are of several sizes.
const streamOf = (buf) => {
	const pieces = [];
	for (let off = 0, i = 0; off < buf.length; i++) {
		const n = Math.min(buf.length - off, i % 3 === 2 ? 12345 : 65536);
		pieces.push(buf.subarray(off, off + n));
		off += n;
	}
	return Readable.from(pieces, { objectMode: false });
};

const crc32b64 = (buf) => {
	const b = Buffer.alloc(4);
	b.writeUInt32BE(zlib.crc32(buf) >>> 0);
	return b.toString("base64");
};

const bytesOf = async (body) => Buffer.from(await body.transformToByteArray());

function chunkedTrailer(what) {
	check(`${what}: x-amz-content-sha256`, sent["x-amz-content-sha256"] === "STREAMING-UNSIGNED-PAYLOAD-TRAILER",
		sent["x-amz-content-sha256"]);
	check(`${what}: x-amz-trailer`, sent["x-amz-trailer"] === "x-amz-checksum-crc32", sent["x-amz-trailer"]);
	check(`${what}: Content-Encoding`, /(^|,)\s*aws-chunked$/.test(sent["content-encoding"] || ""),
		sent["content-encoding"]);
}

async function main() {
	const bucket = "sdkjs-" + crypto.randomBytes(6).toString("hex");
	await s3.send(new CreateBucketCommand({ Bucket: bucket }));

	// PutObject: 1 MiB and a bit, streamed; gzip kept, aws-chunked not.
	const one = crypto.randomBytes((1 << 20) + 4321);
	const put = await s3.send(new PutObjectCommand({
		Bucket: bucket, Key: "one", Body: streamOf(one), ContentLength: one.length,
		ContentType: "application/x-test", ContentEncoding: "gzip",
	}));
	chunkedTrailer("PutObject");
	check("PutObject: x-amz-decoded-content-length", sent["x-amz-decoded-content-length"] === String(one.length),
		sent["x-amz-decoded-content-length"]);
	check("PutObject: the ETag is the MD5", put.ETag === `"${crypto.createHash("md5").update(one).digest("hex")}"`,
		put.ETag);
	check("PutObject: the CRC32 trailer echoed", put.ChecksumCRC32 === crc32b64(one), put.ChecksumCRC32);
	const head = await s3.send(new HeadObjectCommand({ Bucket: bucket, Key: "one" }));
	check("HeadObject: the size decoded", head.ContentLength === one.length, head.ContentLength);
	check("HeadObject: Content-Encoding without aws-chunked", head.ContentEncoding === "gzip", head.ContentEncoding);
	check("HeadObject: Content-Type", head.ContentType === "application/x-test", head.ContentType);
	const got = await s3.send(new GetObjectCommand({ Bucket: bucket, Key: "one" }));
	check("GetObject: the bytes put", (await bytesOf(got.Body)).equals(one));

	// An empty object the same way.
	await s3.send(new PutObjectCommand({ Bucket: bucket, Key: "empty", Body: streamOf(Buffer.alloc(0)),
		ContentLength: 0 }));
	const e = await s3.send(new HeadObjectCommand({ Bucket: bucket, Key: "empty" }));
	check("an empty streamed object", e.ContentLength === 0 && !e.ContentEncoding, JSON.stringify(e.ContentEncoding));

	// Multipart: a 5 MiB part and a short last one, each aws-chunked.
	const parts = [crypto.randomBytes(5 << 20), crypto.randomBytes(777777)];
	const up = await s3.send(new CreateMultipartUploadCommand({ Bucket: bucket, Key: "multi" }));
	const done = [];
	for (let i = 0; i < parts.length; i++) {
		const r = await s3.send(new UploadPartCommand({
			Bucket: bucket, Key: "multi", UploadId: up.UploadId, PartNumber: i + 1,
			Body: streamOf(parts[i]), ContentLength: parts[i].length,
		}));
		chunkedTrailer(`UploadPart ${i + 1}`);
		check(`UploadPart ${i + 1}: the CRC32 trailer echoed`, r.ChecksumCRC32 === crc32b64(parts[i]), r.ChecksumCRC32);
		done.push({ ETag: r.ETag, PartNumber: i + 1 });
	}
	await s3.send(new CompleteMultipartUploadCommand({
		Bucket: bucket, Key: "multi", UploadId: up.UploadId, MultipartUpload: { Parts: done },
	}));
	const whole = Buffer.concat(parts);
	const mg = await s3.send(new GetObjectCommand({ Bucket: bucket, Key: "multi" }));
	check("GetObject of the multipart object: the bytes put", (await bytesOf(mg.Body)).equals(whole));
	check("the multipart ETag", /-2"$/.test(mg.ETag), mg.ETag);
}

main()
	.catch((err) => failed.push(`raised: ${err.name}: ${err.message} (${err.$metadata?.httpStatusCode})`))
	.finally(() => {
		for (const f of failed) console.error("FAIL", f);
		console.error(`sdkjs: ${failed.length} failed checks`);
		process.exit(failed.length ? 1 : 0);
	});
