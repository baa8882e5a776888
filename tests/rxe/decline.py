#!/usr/bin/env python3
"""An S3 endpoint that declines S3 over RDMA, for tests/rxe/s3.bats.

    decline.py ADDR PORT UPSTREAM_PORT MODE_FILE COUNT_FILE

Forwards every request to rds3 serve at ADDR:UPSTREAM_PORT, but answers a
request that carries x-amz-rdma-token the way the mode says a server
declines (read from MODE_FILE at each request, so one proxy serves every
mode: Python starts slowly under emulation):

    s3-400      400 S3InvalidRdmaToken      (NooBaa's errors)
    s3-501      501 S3RdmaNotSupported
    s3-500      500 S3RdmaIoError
    reply-501   200 with x-amz-rdma-reply: 501 and no body
    ignore      forwarded without the RDMA headers: the server answers as
                if none were sent (a PUT stores the empty body it got)
    no-count    200 with x-amz-rdma-reply: 200 but no
                x-amz-rdma-bytes-transferred: no decline, a broken server

and writes the count of declines so far to COUNT_FILE.NAME, NAME the mode.  rds3 finds the
server's RDMA port through RDS3_RDMA_PORT.  Used against an unsigned
server (ignore changes signed headers).
"""
import http.client
import http.server
import sys
import threading

ADDR, PORT, UP, MODE_FILE, COUNT = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
ERRORS = {"s3-400": (400, "S3InvalidRdmaToken"), "s3-501": (501, "S3RdmaNotSupported"),
          "s3-500": (500, "S3RdmaIoError")}
lock = threading.Lock()
declined = {}


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def answer(self, status, headers, body):
        self.send_response_only(status)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def handle_any(self):
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n) if n else b""
        headers = [(k, v) for k, v in self.headers.items()]
        with open(MODE_FILE) as f:
            MODE = f.read().strip()
        if self.headers.get("x-amz-rdma-token"):
            with lock:
                declined[MODE] = declined.get(MODE, 0) + 1
                with open(COUNT + "." + MODE, "w") as f:
                    f.write("%d\n" % declined[MODE])
            if MODE in ERRORS:
                st, code = ERRORS[MODE]
                xml = ("<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>%s</Code>"
                       "<Message>declined by the test</Message></Error>" % code).encode()
                return self.answer(st, [("Content-Type", "application/xml")], xml)
            if MODE == "reply-501":
                return self.answer(200, [("x-amz-rdma-reply", "501")], b"")
            if MODE == "no-count":
                return self.answer(200, [("x-amz-rdma-reply", "200"), ("ETag", '"0"')], b"")
            headers = [(k, v) for k, v in headers if not k.lower().startswith("x-amz-rdma-")
                       and k.lower() != "x-amz-decoded-content-length"]
        c = http.client.HTTPConnection(ADDR, UP, timeout=60)
        c.putrequest(self.command, self.path, skip_host=True, skip_accept_encoding=True)
        for k, v in headers:
            c.putheader(k, v)
        c.endheaders(body)
        r = c.getresponse()
        data = r.read()
        out = [(k, v) for k, v in r.getheaders()
               if k.lower() not in ("content-length", "connection", "transfer-encoding")]
        self.send_response_only(r.status, r.reason)
        for k, v in out:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)
        c.close()

    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = handle_any


srv = http.server.ThreadingHTTPServer((ADDR, PORT), Handler)
print("listening", flush=True)
srv.serve_forever()
