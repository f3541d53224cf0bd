#!/usr/bin/env python3
"""A web page on another origin uses the store, in a real headless Chromium.

    cross_origin.py --s3 http://127.0.0.1:S3PORT --rest http://127.0.0.1:RESTPORT \\
        --page-port PAGEPORT --access-key ID --secret SECRET --token TOKEN

The gateway under test runs with `--cors-origins http://127.0.0.1:PAGEPORT`.
This script serves a page from http://127.0.0.1:PAGEPORT (and the same page
from http://127.0.0.1:PAGEPORT+1, an origin allowed nowhere), drives Chromium
to it with Selenium, and has the page's own JavaScript talk to the S3 port
and the REST port: every request below is a cross-origin request made by the
browser, which enforces CORS as a user's browser does. Python only prepares
(boto3 makes the bucket, its CORS rules, the presigned URLs) and checks what
was stored afterwards.

Every case prints one line (`ok <case>`); the first failure prints what was
sent, what was expected and what came back, with the browser's console (where
Chromium says why it blocked a request), and exits 1 (with --keep-going,
every case runs and the failures are listed at the end). `all passed` ends a
good run. Every wait is bounded: a case fails within about a minute, and the
whole run is stopped after --deadline seconds (240 by default).

Setup: a bucket `xo-<random>` whose PutBucketCors allows origin
http://127.0.0.1:PAGEPORT, methods GET PUT POST DELETE HEAD, any header
(`AllowedHeaders: *`), and exposes `ETag` and `x-amz-version-id`. The page's
server also serves the Uppy bundle (uppy@6.0.1 `dist/uppy.min.js`,
`dist/uppy.min.css`) and tus-js-client (4.3.1 `dist/tus.min.js`) from
.tools/node/node_modules, the test payloads (`/payload/<name>`, same origin,
so reading them needs no CORS), and a small signer (`POST /sign`) that turns
Uppy's signing requests into boto3 presigned URLs.

What each case proves, and why it fails without CORS:

presigned_put
    A presigned PUT URL (boto3) used by `fetch(url, {method: 'PUT', body})`.
    PUT is not a CORS-safelisted method, so Chromium first sends an OPTIONS
    preflight (Origin, Access-Control-Request-Method: PUT) to the S3 port and
    sends the PUT only if the answer allows the origin and the method. The
    page then reads the answer's status and its ETag header (readable only if
    the answer carries Access-Control-Allow-Origin and exposes ETag); boto3
    reads back the exact bytes. Without CORS: the preflight is refused, the
    PUT never leaves the browser, fetch rejects with a TypeError.

presigned_get
    A presigned GET URL fetched by the page, which reads the body and hands it
    back in base64: it must equal what boto3 stored. A GET without custom
    headers needs no preflight, but a script may read the answer only if it
    carries Access-Control-Allow-Origin for the page's origin. Without it:
    fetch rejects with a TypeError although the server sent the bytes.

presigned_post_form / presigned_post_too_large
    The HTML form upload (POST Object) with a policy signed by boto3's
    generate_presigned_post (`content-length-range` 1..1 MiB,
    `success_action_status` 201): the page builds a FormData (the fields, then
    `file` last, a Blob) and POSTs it to the bucket URL. A multipart/form-data
    POST is a "simple" request (no preflight), but the page reads the 201 and
    the XML's <Key>, which needs Access-Control-Allow-Origin on POST Object's
    answer; the object reads back exactly. A file of 1 MiB + 1 byte violates
    the policy: the page must see 400 EntityTooLarge (readable only through
    CORS as well, on an error answer) and nothing is stored. Without CORS:
    both fetches reject with a TypeError.

uppy_tus
    Uppy (core + Tus plugin, default unlimited chunk size) uploads a 3 MiB
    file to REST `/uploads/` with `Authorization: Bearer TOKEN`. Every tus
    request carries Authorization and Tus-Resumable headers, so each is
    preflighted against the REST port (`--cors-origins`), and tus-js-client
    must read the Location, Upload-Offset and Tus-Resumable answer headers
    (exposed by the gateway). Where the file lands follows the tus metadata
    (docs/api.md, api/rest/src/uploads.rs): `path`, else `filename` in
    `folder`, else `filename` at the root of the caller's tree. Uppy sends
    `filename` (the file's name) and every meta field; the page sets
    `folder` to the test's bucket, so the file is `/files/<bucket>/<name>`
    (and the S3 object `<bucket>/<name>`): read back with the token by urllib
    and by boto3, exact bytes. Without CORS: the creation's preflight is
    refused, Uppy reports the upload failed. These requests carry the
    browser's `Origin` and `Sec-Fetch-Site: same-site` (the page and the
    gateway share the host 127.0.0.1; from a page on another host it is
    `cross-site`): a state-changing request with its own `Authorization`
    from an origin in --cors-origins must be served, not refused as another
    site's form post.

uppy_s3_multipart
    Uppy's AwsS3 plugin (@uppy/aws-s3 6.1.0, the one in uppy 6.0.1) with
    `shouldUseMultipart: true` uploads a 12 MiB file in three parts (5, 5
    and 2 MiB: the plugin's minimum part size is 5 MiB). In this version the
    plugin makes every S3 request itself from the browser, each to a URL
    that its `signRequest` callback obtains: the page's callback asks the
    page's server (`POST /sign`), which answers with boto3
    generate_presigned_url for create_multipart_upload, upload_part,
    complete_multipart_upload (and list_parts, abort_multipart_upload,
    put_object, delete_object, should the plugin need them). So the
    browser sends straight to the S3 port: CreateMultipartUpload (POST
    ?uploads, preflighted: its Content-Type is not a simple one), the part
    PUTs (preflighted), reading each part's ETag from the answer (only
    possible because the bucket's CORS exposes ETag), and
    CompleteMultipartUpload (POST with an XML body). The object reads back
    with the same SHA-256 and a three-part ETag. Without CORS: the first
    preflight is refused and the upload fails; without ETag exposed, the
    plugin fails with "Missing ETag in uploadPart response headers".

other_origin_refused
    The same page served from http://127.0.0.1:PAGEPORT+1, an origin in
    neither the bucket's CORS rules nor --cors-origins: a presigned GET that
    works from Python (and worked from the allowed origin) rejects with a
    TypeError in the page, a presigned PUT is stopped at its preflight (the
    object is not created), and a tus upload (tus-js-client) to /uploads/
    fails (the file does not appear). Chromium's console must say each was
    blocked by CORS policy, so a refused connection or another network error
    does not pass for the browser's enforcement. This is what keeps the cases
    above honest: it shows the browser does enforce CORS here, so their
    success is owed to the server's CORS answers.

At the end the bucket is emptied (every version and delete marker,
unfinished multipart uploads aborted) and deleted.
"""

import argparse
import base64
import hashlib
import json
import os
import random
import signal
import string
import sys
import tempfile
import threading
import time
import traceback
import urllib.error
import urllib.parse
import urllib.request
import xml.etree.ElementTree as ET
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError

# The checks, the bucket cleanup and the running of one case, shared with the S3 suites (tests/s3/suite_harness.py).
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "s3"))
from suite_harness import (  # noqa: E402 - found through the line above
    Failure,
    case_registry,
    check,
    empty_bucket,
    eq,
    error_of,
    fail,
    run_case,
    summary,
)

MIB = 1 << 20
# How long the page may take over one operation; Selenium's own wait is a
# little longer, so the page's timeout is what reports a stuck case.
JS_TIMEOUT_S = 45
HTTP_TIMEOUT_S = 30


def sha256_hex(data):
    return hashlib.sha256(data).hexdigest()


def short(value, limit=600):
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= limit else text[:limit] + "…"


def same_bytes(got, expected, what):
    if got != expected:
        fail(
            f"{what}: {len(got)} bytes (sha256 {sha256_hex(got)[:16]}…), expected "
            f"{len(expected)} bytes (sha256 {sha256_hex(expected)[:16]}…)"
        )


def http(method, url, headers=None, body=None):
    """An HTTP request by urllib: (status, headers, body), errors included."""
    request = urllib.request.Request(url, data=body, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=HTTP_TIMEOUT_S) as response:
            return response.status, response.headers, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers, exc.read()


def xml_text(body, name):
    """The text of the first element called `name` (any namespace), or None."""
    try:
        root = ET.fromstring(body)
    except ET.ParseError:
        return None
    for element in root.iter():
        if element.tag.rsplit("}", 1)[-1] == name:
            return element.text or ""
    return None


# ---------------------------------------------------------------------------
# The page and its server.

PAGE_HTML = """<!doctype html>
<html><head><meta charset="utf-8"><title>cross-origin client</title>
<link rel="stylesheet" href="/uppy.min.css">
<script src="/uppy.min.js"></script>
<script src="/tus.min.js"></script>
<script src="/page.js"></script>
</head><body><h1>A web app on another origin</h1></body></html>
"""

# The page's operations; each returns a promise of a JSON-able value. Python
# calls them through `run` (execute_async_script).
PAGE_JS = r"""
'use strict'
window.xo = {
  async payload(name) {
    const answer = await fetch('/payload/' + encodeURIComponent(name), { cache: 'no-store' })
    if (!answer.ok) throw new Error('payload ' + name + ': ' + answer.status)
    return await answer.blob()
  },

  base64(buffer) {
    const bytes = new Uint8Array(buffer)
    let text = ''
    for (let i = 0; i < bytes.length; i += 0x8000) {
      text += String.fromCharCode.apply(null, bytes.subarray(i, i + 0x8000))
    }
    return btoa(text)
  },

  // A fetch whose rejection is reported rather than thrown: the negative
  // cases need the error's name and message.
  async tryFetch(url, init) {
    try {
      const answer = await fetch(url, init)
      const body = await answer.arrayBuffer()
      return {
        fetched: true,
        status: answer.status,
        etag: answer.headers.get('etag'),
        versionId: answer.headers.get('x-amz-version-id'),
        contentType: answer.headers.get('content-type'),
        body: xo.base64(body),
        text: new TextDecoder().decode(body.slice(0, 4096)),
      }
    } catch (err) {
      return { fetched: false, name: err.name, message: String(err.message || err) }
    }
  },

  async presignedPut(url, payloadName) {
    const body = await xo.payload(payloadName)
    const result = await xo.tryFetch(url, { method: 'PUT', body })
    delete result.body
    return result
  },

  async presignedGet(url) {
    return await xo.tryFetch(url)
  },

  async postForm(url, fields, payloadName) {
    const form = new FormData()
    for (const [name, value] of fields) form.append(name, value)
    form.append('file', await xo.payload(payloadName), 'upload.bin')
    const result = await xo.tryFetch(url, { method: 'POST', body: form })
    delete result.body
    return result
  },

  summary(result, events) {
    if (!result) return { successful: [], failed: [], events, note: 'upload() gave no result' }
    return {
      successful: (result.successful || []).map((f) => ({
        name: f.name, size: f.size, uploadURL: f.uploadURL || null,
        body: f.response ? f.response.body : null,
      })),
      failed: (result.failed || []).map((f) => ({ name: f.name, error: String(f.error) })),
      events,
    }
  },

  async uppyTus(endpoint, token, payloadName, fileName, folder) {
    const data = await xo.payload(payloadName)
    const uppy = new Uppy.Uppy({ id: 'tus-' + fileName, autoProceed: false })
    uppy.use(Uppy.Tus, {
      endpoint,
      headers: { Authorization: 'Bearer ' + token },
      storeFingerprintForResuming: false,
      removeFingerprintOnSuccess: true,
    })
    const events = []
    uppy.on('upload-error', (file, err, response) => {
      events.push({ event: 'upload-error', error: String(err), status: response ? response.status : null })
    })
    uppy.on('upload-success', (file, response) => {
      events.push({ event: 'upload-success', uploadURL: response.uploadURL })
    })
    uppy.addFile({ name: fileName, type: 'application/octet-stream', data, meta: { folder }, source: 'cross-origin-test' })
    try {
      return xo.summary(await uppy.upload(), events)
    } finally {
      uppy.destroy()
    }
  },

  async uppyS3(key, payloadName, fileName, bucket) {
    const data = await xo.payload(payloadName)
    const uppy = new Uppy.Uppy({ id: 's3-' + fileName, autoProceed: false })
    uppy.use(Uppy.AwsS3, {
      shouldUseMultipart: true,
      limit: 1,
      generateObjectKey: () => key,
      async signRequest(request) {
        const answer = await fetch('/sign', {
          method: 'POST',
          headers: { 'Content-Type': 'application/json' },
          body: JSON.stringify({ ...request, bucket }),
        })
        if (!answer.ok) throw new Error('signer answered ' + answer.status + ': ' + (await answer.text()))
        return await answer.json()
      },
    })
    const events = []
    uppy.on('s3-multipart:part-uploaded', (file, part) => {
      events.push({ event: 'part-uploaded', partNumber: part.PartNumber, etag: part.ETag })
    })
    uppy.on('upload-error', (file, err) => {
      events.push({ event: 'upload-error', error: String(err), details: err && err.details ? String(err.details) : null })
    })
    uppy.addFile({ name: fileName, type: 'application/octet-stream', data, source: 'cross-origin-test' })
    try {
      return xo.summary(await uppy.upload(), events)
    } finally {
      uppy.destroy()
    }
  },

  async tusPlain(endpoint, token, payloadName, metadata) {
    const data = await xo.payload(payloadName)
    return await new Promise((resolve) => {
      const upload = new tus.Upload(data, {
        endpoint,
        headers: { Authorization: 'Bearer ' + token },
        metadata,
        retryDelays: null,
        storeFingerprintForResuming: false,
        onError(err) {
          const response = err.originalResponse
          resolve({ ok: false, error: String(err), status: response ? response.getStatus() : null })
        },
        onSuccess() { resolve({ ok: true, url: upload.url }) },
      })
      upload.start()
    })
  },
}
window.xoReady = true
"""

# Runs `xo[name](...args)` in the page, bounded by the page's own timer.
RUN_JS = """
const done = arguments[arguments.length - 1]
const [name, args, ms] = [arguments[0], arguments[1], arguments[2]]
let timer
const timeout = new Promise((_, reject) => {
  timer = setTimeout(() => reject(new Error(name + ' did not finish within ' + ms + ' ms')), ms)
})
Promise.race([Promise.resolve().then(() => xo[name](...args)), timeout]).then(
  (value) => { clearTimeout(timer); done({ ok: true, value }) },
  (err) => { clearTimeout(timer); done({ ok: false, name: err && err.name, message: String((err && err.message) || err), stack: err && err.stack ? String(err.stack) : null }) },
)
"""


class PageServer:
    """The page's origin: http://127.0.0.1:PORT, served from a thread."""

    def __init__(self, port, files, payloads, signer):
        self.port = port
        handler = self._handler(files, payloads, signer)
        try:
            self.httpd = ThreadingHTTPServer(("127.0.0.1", port), handler)
        except OSError as exc:
            raise Failure(f"cannot serve the page on 127.0.0.1:{port}: {exc}") from exc
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, name=f"page-{port}", daemon=True)
        self.thread.start()

    @property
    def origin(self):
        return f"http://127.0.0.1:{self.port}"

    def stop(self):
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=10)

    @staticmethod
    def _handler(files, payloads, signer):
        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, fmt, *args):  # noqa: D401 - quiet unless asked
                if ARGS is not None and ARGS.verbose:
                    sys.stderr.write(f"page {self.server.server_port}: {fmt % args}\n")

            def answer(self, status, body, content_type):
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.send_header("Cache-Control", "no-store")
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(body)

            def do_GET(self):  # noqa: N802 - http.server's naming
                path = urllib.parse.urlsplit(self.path).path
                if path in ("/", "/index.html"):
                    return self.answer(200, PAGE_HTML.encode(), "text/html; charset=utf-8")
                if path == "/page.js":
                    return self.answer(200, PAGE_JS.encode(), "text/javascript; charset=utf-8")
                if path in files:
                    file, kind = files[path]
                    return self.answer(200, file.read_bytes(), kind)
                if path.startswith("/payload/"):
                    name = urllib.parse.unquote(path[len("/payload/") :])
                    if name in payloads:
                        return self.answer(200, payloads[name], "application/octet-stream")
                if path == "/favicon.ico":
                    return self.answer(204, b"", "image/x-icon")
                return self.answer(404, b"not found", "text/plain")

            do_HEAD = do_GET  # noqa: N815

            def do_POST(self):  # noqa: N802
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length)
                if urllib.parse.urlsplit(self.path).path != "/sign":
                    return self.answer(404, b"not found", "text/plain")
                try:
                    signed = signer(json.loads(body))
                except Exception as exc:  # noqa: BLE001 - the page reports it
                    return self.answer(400, f"{type(exc).__name__}: {exc}".encode(), "text/plain")
                return self.answer(200, json.dumps(signed).encode(), "application/json")

        return Handler


# ---------------------------------------------------------------------------
# The run's state: boto3, the page servers, the browser.


class Suite:
    def __init__(self, args):
        self.args = args
        self.s3_url = args.s3.rstrip("/")
        self.rest_url = args.rest.rstrip("/")
        self.token = args.token
        self.region = "us-east-1"
        self.s3 = boto3.client(
            "s3",
            endpoint_url=self.s3_url,
            region_name=self.region,
            aws_access_key_id=args.access_key,
            aws_secret_access_key=args.secret,
            config=Config(
                signature_version="s3v4",
                s3={"addressing_style": "path"},
                retries={"max_attempts": 1, "mode": "standard"},
                connect_timeout=10,
                read_timeout=HTTP_TIMEOUT_S,
            ),
        )
        suffix = "".join(random.choice(string.ascii_lowercase + string.digits) for _ in range(8))
        self.bucket = f"xo-{suffix}"
        self.made_bucket = False
        self.payloads = {}
        self.signed = []  # (method, boto3 operation, part number) the signer answered, in order
        self.servers = []
        self.driver = None
        self.service = None
        self.profile = tempfile.TemporaryDirectory(prefix="cross-origin-")
        self.current = None  # the page server the browser shows
        self.stopped = False  # set when the deadline ended the browser

    # -- setup ---------------------------------------------------------------

    def setup(self):
        node = Path(self.args.node_modules)
        files = {
            "/uppy.min.js": (node / "uppy/dist/uppy.min.js", "text/javascript; charset=utf-8"),
            "/uppy.min.css": (node / "uppy/dist/uppy.min.css", "text/css; charset=utf-8"),
            "/tus.min.js": (node / "tus-js-client/dist/tus.min.js", "text/javascript; charset=utf-8"),
        }
        for file, _kind in files.values():
            check(
                file.is_file(),
                f"{file} is missing: scripts/install-test-deps.sh installs uppy@6.0.1 and "
                f"tus-js-client@4.3.1 under .tools/node",
            )
        self.make_bucket()
        port = self.args.page_port
        self.page = PageServer(port, files, self.payloads, self.sign)
        self.servers.append(self.page)
        self.other = PageServer(port + 1, files, self.payloads, self.sign)
        self.servers.append(self.other)
        self.start_browser()

    def make_bucket(self):
        self.s3.create_bucket(Bucket=self.bucket)
        self.made_bucket = True
        origin = f"http://127.0.0.1:{self.args.page_port}"
        try:
            self.s3.put_bucket_cors(
                Bucket=self.bucket,
                CORSConfiguration={
                    "CORSRules": [
                        {
                            "AllowedOrigins": [origin],
                            "AllowedMethods": ["GET", "PUT", "POST", "DELETE", "HEAD"],
                            "AllowedHeaders": ["*"],
                            "ExposeHeaders": ["ETag", "x-amz-version-id"],
                            "MaxAgeSeconds": 600,
                        }
                    ]
                },
            )
        except ClientError as exc:
            code, status, message = error_of(exc)
            fail(f"PutBucketCors on {self.bucket}: {code} ({status}): {message} (does the server support CORS?)")
        rules = self.s3.get_bucket_cors(Bucket=self.bucket).get("CORSRules", [])
        eq([r.get("AllowedOrigins") for r in rules], [[origin]], "GetBucketCors after PutBucketCors")

    def start_browser(self):
        try:
            from selenium import webdriver
            from selenium.webdriver.chrome.service import Service
        except ImportError as exc:
            fail(f"{exc}: scripts/install-test-deps.sh installs selenium (pinned) into .tools/venv")

        for binary in (self.args.chromium, self.args.chromedriver):
            check(Path(binary).exists(), f"{binary} is missing (Debian: apt-get install chromium chromium-driver)")
        options = webdriver.ChromeOptions()
        options.binary_location = self.args.chromium
        for flag in (
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--no-first-run",
            "--no-default-browser-check",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-quic",
            "--window-size=1280,1000",
            f"--user-data-dir={self.profile.name}/profile",
        ):
            options.add_argument(flag)
        # The console (where Chromium says why it blocked a request) and the
        # network events (the CORS preflights it sent, and their answers).
        options.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
        options.add_experimental_option("perfLoggingPrefs", {"enableNetwork": True, "enablePage": False})
        # Its own session, so the watchdog can end chromedriver and every
        # Chromium process it started at once.
        self.service = Service(
            executable_path=self.args.chromedriver,
            log_output=os.path.join(self.profile.name, "chromedriver.log"),
            popen_kw={"start_new_session": True},
        )
        self.driver = webdriver.Chrome(service=self.service, options=options)
        self.driver.set_page_load_timeout(30)
        self.driver.set_script_timeout(JS_TIMEOUT_S + 10)

    # -- the signer ----------------------------------------------------------

    def sign(self, request):
        """Uppy's signRequest, served by the page's server: a presigned URL."""
        bucket = request.get("bucket")
        check(bucket == self.bucket, f"the signer signs only for {self.bucket}, not {bucket!r}")
        method = request.get("method")
        key = request.get("key")
        check(isinstance(key, str) and key, f"no key in {request!r}")
        upload_id = request.get("uploadId")
        part = request.get("partNumber")
        params = {"Bucket": bucket, "Key": key}
        if method == "POST" and not upload_id:
            operation = "create_multipart_upload"
        elif method == "POST":
            operation, params["UploadId"] = "complete_multipart_upload", upload_id
        elif method == "PUT" and part is not None:
            operation = "upload_part"
            params.update(UploadId=upload_id, PartNumber=int(part))
        elif method == "PUT":
            operation = "put_object"
        elif method == "GET" and upload_id:
            operation, params["UploadId"] = "list_parts", upload_id
        elif method == "DELETE" and upload_id:
            operation, params["UploadId"] = "abort_multipart_upload", upload_id
        elif method == "DELETE":
            operation = "delete_object"
        else:
            fail(f"the signer cannot sign {request!r}")
        expires = min(int(request.get("expiresIn") or 900), 3600)
        url = self.s3.generate_presigned_url(operation, Params=params, ExpiresIn=expires, HttpMethod=method)
        self.signed.append((method, operation, params.get("PartNumber")))
        return {"url": url}

    # -- the browser ---------------------------------------------------------

    def at(self, server):
        """The browser on `server`'s page (loaded if it is not there yet)."""
        if self.current is not server:
            self.open(server)

    def open(self, server):
        self.current = None
        self.driver.get(server.origin + "/")
        give_up = time.monotonic() + 20
        while not self.driver.execute_script("return !!(window.xoReady && window.Uppy && window.tus)"):
            check(time.monotonic() < give_up, f"the page at {server.origin} did not load its scripts")
            time.sleep(0.1)
        self.current = server
        self.console()  # what loading printed or sent is not a case's
        self.preflights()

    def run(self, name, *args, timeout=JS_TIMEOUT_S):
        """`xo[name](...args)` in the page; its value, or a Failure with the page's error."""
        self.driver.set_script_timeout(timeout + 10)
        outcome = self.driver.execute_async_script(RUN_JS, name, list(args), timeout * 1000)
        if not outcome or not outcome.get("ok"):
            fail(f"page's {name}: {outcome!r}{self.console_text()}")
        return outcome["value"]

    def console(self):
        """The browser console's new lines."""
        try:
            return [entry.get("message", "") for entry in self.driver.get_log("browser")]
        except Exception:  # noqa: BLE001 - diagnostics only
            return []

    def preflights(self):
        """The CORS preflights Chromium sent since the last call, with their
        answers: [{url, status, allow_origin}] (from its network events)."""
        try:
            entries = self.driver.get_log("performance")
        except Exception:  # noqa: BLE001 - diagnostics only
            return []
        found = []
        for entry in entries:
            try:
                message = json.loads(entry["message"])["message"]
            except (KeyError, ValueError, TypeError):
                continue
            params = message.get("params", {})
            if message.get("method") == "Network.responseReceived" and params.get("type") == "Preflight":
                response = params.get("response", {})
                headers = {k.lower(): v for k, v in (response.get("headers") or {}).items()}
                found.append(
                    {
                        "url": response.get("url"),
                        "status": response.get("status"),
                        "allow_origin": headers.get("access-control-allow-origin"),
                    }
                )
        return found

    def preflighted(self, url_prefix, what, at_least=1):
        """At least `at_least` preflights to URLs starting with `url_prefix`
        since the last look, each answered 2xx and allowing the page's origin."""
        seen = [p for p in self.preflights() if (p["url"] or "").startswith(url_prefix)]
        check(
            len(seen) >= at_least,
            f"{what}: expected at least {at_least} CORS preflight(s) to {url_prefix}…, Chromium sent {len(seen)}",
        )
        for p in seen:
            check(
                200 <= (p["status"] or 0) < 300 and p["allow_origin"] == self.page.origin,
                f"{what}: the preflight to {p['url']} was answered {p['status']} with "
                f"Access-Control-Allow-Origin {p['allow_origin']!r}",
            )
        return seen

    def console_text(self):
        lines = self.console()
        return ("\nbrowser console:\n  " + "\n  ".join(short(line, 400) for line in lines)) if lines else ""

    # -- helpers -------------------------------------------------------------

    def payload(self, name, size):
        data = os.urandom(size)
        self.payloads[name] = data
        return data

    def presign(self, operation, key, expires=600, **extra):
        return self.s3.generate_presigned_url(
            operation, Params={"Bucket": self.bucket, "Key": key, **extra}, ExpiresIn=expires
        )

    def object_bytes(self, key):
        return self.s3.get_object(Bucket=self.bucket, Key=key)["Body"].read()

    def absent(self, key, what):
        try:
            head = self.s3.head_object(Bucket=self.bucket, Key=key)
        except ClientError as exc:
            code, status, _message = error_of(exc)
            check(status == 404, f"{what}: HeadObject {key!r} answered {code} ({status}), expected 404")
            return
        fail(f"{what}: {key!r} was stored ({head.get('ContentLength')} bytes)")

    def rest_file(self, path):
        url = f"{self.rest_url}/files/{urllib.parse.quote(path, safe='/')}"
        return http("GET", url, {"Authorization": f"Bearer {self.token}"})

    # -- teardown ------------------------------------------------------------

    def kill_browser(self):
        """Ends chromedriver and every Chromium process (their own session)."""
        process = getattr(self.service, "process", None) if self.service else None
        if process is not None and process.poll() is None:
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except OSError:
                pass
            process.wait(timeout=10)

    def cleanup(self):
        if self.driver is not None:
            try:
                self.driver.quit()
            except Exception as exc:  # noqa: BLE001 - cleanup is best effort
                print(f"cleanup: quitting the browser: {exc}", file=sys.stderr)
        self.kill_browser()
        for server in self.servers:
            try:
                server.stop()
            except Exception as exc:  # noqa: BLE001
                print(f"cleanup: stopping the page server: {exc}", file=sys.stderr)
        if self.made_bucket:
            try:
                empty_bucket(self.s3, self.bucket)
                self.s3.delete_bucket(Bucket=self.bucket)
            except Exception as exc:  # noqa: BLE001
                print(f"cleanup of {self.bucket}: {exc}", file=sys.stderr)
        self.profile.cleanup()


# ---------------------------------------------------------------------------
# Cases, in the order they run.

CASES, case = case_registry()


@case
def presigned_put(t):
    t.at(t.page)
    key = "put/presigned.bin"
    data = t.payload("put", 300_001)
    url = t.presign("put_object", key)
    got = t.run("presignedPut", url, "put")
    check(
        got.get("fetched"),
        f"PUT {url} from {t.page.origin}: fetch rejected ({got.get('name')}: {got.get('message')}); "
        f"the preflight (OPTIONS, Access-Control-Request-Method: PUT) was not answered with "
        f"Access-Control-Allow-Origin: {t.page.origin}{t.console_text()}",
    )
    eq(got.get("status"), 200, f"status of the presigned PUT seen by the page (body {short(got.get('text'))!r})")
    t.preflighted(f"{t.s3_url}/{t.bucket}/{key}?", "the presigned PUT")
    eq(got.get("etag"), f'"{hashlib.md5(data).hexdigest()}"', "the ETag header the page read (ExposeHeaders ETag)")
    same_bytes(t.object_bytes(key), data, f"GetObject {key} after the page's PUT")


@case
def presigned_get(t):
    t.at(t.page)
    key = "get/presigned.bin"
    data = os.urandom(200_003)
    t.s3.put_object(Bucket=t.bucket, Key=key, Body=data)
    url = t.presign("get_object", key)
    got = t.run("presignedGet", url)
    check(
        got.get("fetched"),
        f"GET {url} from {t.page.origin}: fetch rejected ({got.get('name')}: {got.get('message')}): "
        f"no Access-Control-Allow-Origin on the answer{t.console_text()}",
    )
    eq(got.get("status"), 200, f"status of the presigned GET (body {short(got.get('text'))!r})")
    same_bytes(base64.b64decode(got.get("body") or ""), data, "the body the page read")
    eq(got.get("etag"), f'"{hashlib.md5(data).hexdigest()}"', "the ETag header the page read")


def presigned_post(t, key, size):
    post = t.s3.generate_presigned_post(
        t.bucket,
        key,
        Fields={"success_action_status": "201"},
        Conditions=[["content-length-range", 1, MIB], {"success_action_status": "201"}],
        ExpiresIn=600,
    )
    name = f"post-{size}"
    data = t.payload(name, size)
    fields = list(post["fields"].items())
    return post["url"], data, t.run("postForm", post["url"], fields, name)


@case
def presigned_post_form(t):
    t.at(t.page)
    key = "post/form.bin"
    url, data, got = presigned_post(t, key, 70_001)
    check(
        got.get("fetched"),
        f"POST {url} (form) from {t.page.origin}: fetch rejected ({got.get('name')}: {got.get('message')}): "
        f"no Access-Control-Allow-Origin on POST Object's answer{t.console_text()}",
    )
    eq(got.get("status"), 201, f"status of the form POST (body {short(got.get('text'))!r})")
    eq(xml_text(got.get("text", "").encode(), "Key"), key, f"<Key> in the answer {short(got.get('text'))!r}")
    same_bytes(t.object_bytes(key), data, f"GetObject {key} after the form POST")


@case
def presigned_post_too_large(t):
    t.at(t.page)
    key = "post/too-large.bin"
    url, _data, got = presigned_post(t, key, MIB + 1)
    check(
        got.get("fetched"),
        f"POST {url} (form, {MIB + 1} bytes, over content-length-range) from {t.page.origin}: fetch rejected "
        f"({got.get('name')}: {got.get('message')}); the page must be able to read the 400{t.console_text()}",
    )
    eq(
        (got.get("status"), xml_text(got.get("text", "").encode(), "Code")),
        (400, "EntityTooLarge"),
        f"the form POST over the policy's range (body {short(got.get('text'))!r})",
    )
    t.absent(key, "after the refused form POST")


@case
def uppy_tus(t):
    t.at(t.page)
    name = "tus-3mib.bin"
    data = t.payload("tus", 3 * MIB)
    got = t.run("uppyTus", f"{t.rest_url}/uploads/", t.token, "tus", name, t.bucket)
    ok = got.get("successful") or []
    check(
        len(ok) == 1 and not got.get("failed"),
        f"Uppy Tus to {t.rest_url}/uploads/ from {t.page.origin}: {short(got, 1500)}{t.console_text()}",
    )
    upload_url = ok[0].get("uploadURL") or ""
    check(
        upload_url.startswith(f"{t.rest_url}/uploads/"),
        f"the upload's URL (from the Location header the page read) is {upload_url!r}",
    )
    # The creation (POST /uploads/) and the PATCH (/uploads/ID) each send
    # Authorization and Tus-Resumable: two preflights at least.
    t.preflighted(f"{t.rest_url}/uploads", "the tus upload", at_least=2)
    path = f"{t.bucket}/{name}"
    status, _headers, body = t.rest_file(path)
    eq(status, 200, f"GET /files/{path} with the token (tus metadata filename={name!r} folder={t.bucket!r})")
    same_bytes(body, data, f"GET /files/{path}")
    same_bytes(t.object_bytes(name), data, f"GetObject {t.bucket}/{name} (the same file over S3)")


@case
def uppy_s3_multipart(t):
    t.at(t.page)
    key = "uppy/multipart-12mib.bin"
    data = t.payload("s3", 12 * MIB)
    t.signed.clear()
    got = t.run("uppyS3", key, "s3", "multipart-12mib.bin", t.bucket, timeout=50)
    ok = got.get("successful") or []
    check(
        len(ok) == 1 and not got.get("failed"),
        f"Uppy AwsS3 (multipart) to {t.s3_url}/{t.bucket}/{key} from {t.page.origin}: {short(got, 1500)}; "
        f"signed {t.signed}{t.console_text()}",
    )
    operations = [op for _method, op, _part in t.signed]
    eq(
        operations,
        ["create_multipart_upload", "upload_part", "upload_part", "upload_part", "complete_multipart_upload"],
        "the S3 requests the page had signed (and then sent)",
    )
    # CreateMultipartUpload, the three part PUTs and CompleteMultipartUpload
    # are each preflighted (a unique presigned URL each: none is cached).
    t.preflighted(f"{t.s3_url}/{t.bucket}/{key}?", "the multipart upload's requests", at_least=5)
    parts = [e for e in got.get("events", []) if e.get("event") == "part-uploaded"]
    expected = [data[0 : 5 * MIB], data[5 * MIB : 10 * MIB], data[10 * MIB :]]
    eq(
        [(p.get("partNumber"), (p.get("etag") or "").strip('"')) for p in parts],
        [(i + 1, hashlib.md5(part).hexdigest()) for i, part in enumerate(expected)],
        "the parts' ETags the page read from the part PUTs' answers",
    )
    answer = t.s3.get_object(Bucket=t.bucket, Key=key)
    body = answer["Body"].read()
    eq(sha256_hex(body), sha256_hex(data), f"SHA-256 of {key} ({len(body)} bytes, expected {len(data)})")
    digests = b"".join(hashlib.md5(p).digest() for p in expected)
    eq(answer.get("ETag"), f'"{hashlib.md5(digests).hexdigest()}-3"', f"ETag of {key}")


def blocked_in_console(lines, url_prefix):
    return [line for line in lines if "CORS policy" in line and url_prefix in line]


@case
def other_origin_refused(t):
    t.at(t.other)
    origin = t.other.origin
    # A presigned GET: works from Python, not readable from this origin.
    key = "get/other-origin.bin"
    data = os.urandom(10_007)
    t.s3.put_object(Bucket=t.bucket, Key=key, Body=data)
    url = t.presign("get_object", key)
    status, _headers, body = http("GET", url)
    eq((status, body == data), (200, True), "the presigned GET from Python (the URL itself is good)")
    got = t.run("presignedGet", url)
    check(
        not got.get("fetched"),
        f"GET {url} from {origin} (allowed nowhere) was readable: status {got.get('status')}",
    )
    eq(got.get("name"), "TypeError", f"the error of the blocked GET ({got.get('message')})")
    lines = t.console()
    check(
        blocked_in_console(lines, f"{t.s3_url}/{t.bucket}/{key}"),
        f"the console does not say the GET was blocked by CORS policy: {lines}",
    )

    # A presigned PUT: stopped at its preflight, nothing stored.
    put_key = "put/other-origin.bin"
    t.payload("put-other", 4_099)
    got = t.run("presignedPut", t.presign("put_object", put_key), "put-other")
    check(not got.get("fetched"), f"PUT from {origin} went through: status {got.get('status')}")
    eq(got.get("name"), "TypeError", f"the error of the blocked PUT ({got.get('message')})")
    t.absent(put_key, f"after the PUT from {origin}")
    lines = t.console()
    check(
        blocked_in_console(lines, f"{t.s3_url}/{t.bucket}/{put_key}"),
        f"the console does not say the PUT was blocked by CORS policy: {lines}",
    )

    # A tus upload to /uploads/: its creation's preflight is refused.
    name = "tus-other-origin.bin"
    t.payload("tus-other", 64 * 1024)
    got = t.run(
        "tusPlain", f"{t.rest_url}/uploads/", t.token, "tus-other", {"filename": name, "folder": t.bucket}
    )
    check(not got.get("ok"), f"a tus upload from {origin} succeeded: {got}")
    lines = t.console()
    check(
        blocked_in_console(lines, f"{t.rest_url}/uploads/"),
        f"the console does not say the tus creation was blocked by CORS policy ({got}): {lines}",
    )
    status, _headers, _body = t.rest_file(f"{t.bucket}/{name}")
    eq(status, 404, f"GET /files/{t.bucket}/{name} after the refused tus upload")


# ---------------------------------------------------------------------------


def main():
    global ARGS
    root = Path(__file__).resolve().parents[3]
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--s3", required=True, help="the gateway's S3 endpoint, http://127.0.0.1:PORT")
    parser.add_argument("--rest", required=True, help="the gateway's REST endpoint, http://127.0.0.1:PORT")
    parser.add_argument("--page-port", type=int, required=True, help="the page's port (PORT+1 serves the refused origin)")
    parser.add_argument("--access-key", required=True)
    parser.add_argument("--secret", required=True)
    parser.add_argument("--token", required=True, help="a REST token of the same user (Authorization: Bearer)")
    parser.add_argument("--node-modules", default=str(root / ".tools/node/node_modules"))
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    parser.add_argument("--chromedriver", default="/usr/bin/chromedriver")
    parser.add_argument("--deadline", type=float, default=240, help="seconds after which the run is stopped")
    parser.add_argument("--only", action="append", help="run only these cases")
    parser.add_argument("--keep-going", action="store_true", help="run every case, list the failures at the end")
    parser.add_argument("--verbose", action="store_true", help="log the page server's requests")
    ARGS = parser.parse_args()
    for var in ("AWS_CA_BUNDLE", "AWS_PROFILE", "AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE"):
        os.environ.pop(var, None)
    # Selenium must not look for (or download) a driver of its own.
    os.environ["SE_OFFLINE"] = "true"
    unknown = [n for n in ARGS.only or [] if n not in {fn.__name__ for fn in CASES}]
    if unknown:
        parser.error(f"no such case: {' '.join(unknown)}")

    t = Suite(ARGS)
    started = time.monotonic()

    # The deadline: end the browser (which makes the case that waits on it
    # fail, so the cleanup runs), then give the cleanup 30 s.
    def overdue():
        print(f"FAIL: the run took over {ARGS.deadline:.0f} s; stopping the browser", flush=True)
        t.stopped = True
        t.kill_browser()

    def hard_stop():
        print("FAIL: the cleanup did not finish in time", flush=True)
        t.kill_browser()
        os._exit(1)

    # A case that fails once the browser is ended says so, without a traceback.
    def at_deadline():
        return f"stopped at the deadline ({ARGS.deadline:.0f} s)" if t.stopped else None

    timers = [threading.Timer(ARGS.deadline, overdue), threading.Timer(ARGS.deadline + 30, hard_stop)]
    for timer in timers:
        timer.daemon = True
        timer.start()

    failures = []
    try:
        try:
            t.setup()
        except Exception as exc:  # noqa: BLE001 - a failed setup fails the run
            detail = str(exc) if isinstance(exc, Failure) else traceback.format_exc()
            print(f"FAIL setup: {detail}", flush=True)
            failures.append("setup")
        else:
            for fn in CASES:
                if ARGS.only and fn.__name__ not in ARGS.only:
                    continue
                outcome = run_case(fn, t, stopped=at_deadline)
                if outcome == "ok":
                    continue
                failures.append(fn.__name__)
                if outcome == "stopped" or not ARGS.keep_going:
                    break
    finally:
        t.cleanup()
        for timer in timers:
            timer.cancel()
    sys.exit(summary(failures, started))


ARGS = None

if __name__ == "__main__":
    main()
