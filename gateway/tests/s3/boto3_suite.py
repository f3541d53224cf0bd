#!/usr/bin/env python3
"""The S3 API of the gateway held to boto3, operation by operation.

Run by gateway/tests/s3.rs against a real gateway on a loopback port:

    boto3_suite.py --endpoint http://127.0.0.1:PORT --access-key ID --secret SECRET

Every case prints one line (`ok <case>`); the first failure prints what was
sent, what was expected and what came back, and exits 1 (with --keep-going,
every case runs and the failures are listed at the end).

Buckets are named `<prefix>-<what>` with a random prefix, so two runs
against one gateway do not meet.
"""

import argparse
import base64
import binascii
import datetime
import hashlib
import io
import json
import os
import random
import socket
import string
import sys
import time
import traceback
import urllib.error
import urllib.parse
import urllib.request
import xml.etree.ElementTree as ET
import zlib

import boto3
import botocore
import botocore.httpchecksum
from botocore import UNSIGNED
from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.config import Config
from botocore.credentials import Credentials
from botocore.exceptions import ClientError

MIB = 1 << 20
S3_NS = "{http://s3.amazonaws.com/doc/2006-03-01/}"

# The checks every suite of this folder shares.
from suite_harness import Failure, check, eq, error_of, expect_error, fail, md5_hex, show_call  # noqa: E402


def b64(data):
    return base64.b64encode(data).decode()


def crc32_b64(data):
    return b64(zlib.crc32(data).to_bytes(4, "big"))


def sha256_b64(data):
    return b64(hashlib.sha256(data).digest())


def sha1_b64(data):
    return b64(hashlib.sha1(data).digest())


def _crc_reflected(data, poly, width):
    """A reflected CRC (init and xor-out all ones), bit by bit: small inputs only."""
    mask = (1 << width) - 1
    crc = mask
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ poly if crc & 1 else crc >> 1
    return (crc ^ mask) & mask


def crc32c_b64(data):
    return b64(_crc_reflected(data, 0x82F63B78, 32).to_bytes(4, "big"))


def crc64nvme_b64(data):
    return b64(_crc_reflected(data, 0x9A6C9329AC4BC9B5, 64).to_bytes(8, "big"))


CHECKSUMS = {
    "CRC32": crc32_b64,
    "CRC32C": crc32c_b64,
    "CRC64NVME": crc64nvme_b64,
    "SHA1": sha1_b64,
    "SHA256": sha256_b64,
}


def multipart_etag(parts):
    digests = b"".join(hashlib.md5(p).digest() for p in parts)
    return f'"{hashlib.md5(digests).hexdigest()}-{len(parts)}"'


# ---------------------------------------------------------------------------
# Clients.


class Suite:
    def __init__(self, args):
        self.endpoint = args.endpoint.rstrip("/")
        self.access_key = args.access_key
        self.secret = args.secret
        self.region = "us-east-1"
        self.prefix = args.prefix or "b3" + "".join(
            random.choice(string.ascii_lowercase + string.digits) for _ in range(8)
        )
        self.s3 = self.client()
        self.buckets = []

    def client(self, access_key=None, secret=None, unsigned=False, **config):
        cfg = Config(
            signature_version=UNSIGNED if unsigned else "s3v4",
            s3={"addressing_style": "virtual" if ARGS.virtual_host else "path"},
            retries={"max_attempts": 1, "mode": "standard"},
            connect_timeout=10,
            read_timeout=60,
            **config,
        )
        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            region_name=self.region,
            aws_access_key_id=access_key or self.access_key,
            aws_secret_access_key=secret or self.secret,
            config=cfg,
        )

    def bucket(self, what):
        name = f"{self.prefix}-{what}"
        if name in self.buckets:
            name = f"{name}-{len(self.buckets)}"
        self.s3.create_bucket(Bucket=name)
        self.buckets.append(name)
        return name

    def url(self, bucket, key=""):
        return f"{self.endpoint}/{bucket}/{urllib.parse.quote(key, safe='/~')}"

    def signed(self, method, url, headers=None, body=b"", trailer=False):
        """Send a request signed with SigV4 by hand (urllib); returns (status, headers, body)."""
        request = AWSRequest(method=method, url=url, headers=dict(headers or {}), data=body)
        if trailer:
            request.context["checksum"] = {"request_algorithm": {"in": "trailer"}}
        S3SigV4Auth(Credentials(self.access_key, self.secret), "s3", self.region).add_auth(request)
        return fetch(method, url, dict(request.headers.items()), body)

    def cleanup(self):
        for bucket in self.buckets:
            try:
                for page in self.s3.get_paginator("list_objects_v2").paginate(Bucket=bucket):
                    keys = [{"Key": o["Key"]} for o in page.get("Contents", [])]
                    if keys:
                        self.s3.delete_objects(Bucket=bucket, Delete={"Objects": keys, "Quiet": True})
                for upload in self.s3.list_multipart_uploads(Bucket=bucket).get("Uploads", []):
                    self.s3.abort_multipart_upload(
                        Bucket=bucket, Key=upload["Key"], UploadId=upload["UploadId"]
                    )
                self.s3.delete_bucket(Bucket=bucket)
            except Exception as exc:  # noqa: BLE001 - cleanup is best effort
                print(f"cleanup of {bucket}: {exc}", file=sys.stderr)


def fetch(method, url, headers=None, body=None):
    """An HTTP request by urllib: (status, headers, body), errors included."""
    request = urllib.request.Request(url, data=body, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, response.headers, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers, exc.read()


def xml_code(body):
    try:
        root = ET.fromstring(body)
    except ET.ParseError:
        return None
    code = root.find("Code")
    return code.text if code is not None else None


class https_for_checksums:
    """Make botocore believe the endpoint is HTTPS where it picks where a
    checksum goes, so it sends what it sends to AWS: the body aws-chunked
    (`STREAMING-UNSIGNED-PAYLOAD-TRAILER`) with the checksum in a trailer."""

    def __enter__(self):
        self.original = botocore.httpchecksum.urlparse

        def urlparse(url, *args, **kwargs):
            parsed = self.original(url, *args, **kwargs)
            return parsed._replace(scheme="https") if parsed.scheme == "http" else parsed

        botocore.httpchecksum.urlparse = urlparse
        return self

    def __exit__(self, *exc):
        botocore.httpchecksum.urlparse = self.original


def resolve_under(domain):
    """Every name under `domain` (and `domain` itself) resolves to 127.0.0.1,
    as a wildcard DNS record would make it."""
    import socket as _socket

    original = _socket.getaddrinfo

    def getaddrinfo(host, *args, **kwargs):
        if isinstance(host, str) and (host == domain or host.endswith("." + domain)):
            host = "127.0.0.1"
        return original(host, *args, **kwargs)

    _socket.getaddrinfo = getaddrinfo


# ---------------------------------------------------------------------------
# Cases, in the order they run.

CASES = []


def case(fn):
    CASES.append(fn)
    return fn


@case
def buckets_create_list_head_location(t):
    name = t.bucket("basics")
    listed = t.s3.list_buckets()
    names = [b["Name"] for b in listed["Buckets"]]
    check(name in names, f"ListBuckets lacks {name}: {names}")
    entry = next(b for b in listed["Buckets"] if b["Name"] == name)
    check(isinstance(entry.get("CreationDate"), datetime.datetime), f"no CreationDate: {entry}")
    eq(t.s3.head_bucket(Bucket=name)["ResponseMetadata"]["HTTPStatusCode"], 200, "HeadBucket")
    location = t.s3.get_bucket_location(Bucket=name)
    check(
        location.get("LocationConstraint") in (None, "", "us-east-1"),
        f"GetBucketLocation: {location.get('LocationConstraint')!r}",
    )
    eq(t.s3.list_objects_v2(Bucket=name).get("KeyCount"), 0, "KeyCount of a new bucket")


@case
def bucket_duplicate_is_already_owned(t):
    name = t.bucket("dup")
    expect_error("BucketAlreadyOwnedByYou", t.s3.create_bucket, Bucket=name, status=409)


@case
def bucket_invalid_names(t):
    for bad in ["ab", "a" * 64, "UPPER", "under_score", "-lead", "trail-", "a..b", "192.168.5.4", ".dot", "dot."]:
        expect_error("InvalidBucketName", t.s3.create_bucket, Bucket=bad, status=400)
        listed = [b["Name"] for b in t.s3.list_buckets()["Buckets"]]
        check(bad not in listed, f"invalid bucket {bad!r} was created anyway")


@case
def bucket_missing(t):
    missing = f"{t.prefix}-missing"
    expect_error("404", t.s3.head_bucket, Bucket=missing, status=404)
    expect_error("NoSuchBucket", t.s3.list_objects_v2, Bucket=missing, status=404)
    expect_error("NoSuchBucket", t.s3.list_objects, Bucket=missing, status=404)
    expect_error("NoSuchBucket", t.s3.get_object, Bucket=missing, Key="k", status=404)
    expect_error("NoSuchBucket", t.s3.put_object, Bucket=missing, Key="k", Body=b"x", status=404)
    expect_error("NoSuchBucket", t.s3.delete_bucket, Bucket=missing, status=404)
    expect_error("NoSuchBucket", t.s3.create_multipart_upload, Bucket=missing, Key="k", status=404)
    expect_error("NoSuchBucket", t.s3.get_bucket_location, Bucket=missing, status=404)
    expect_error("NoSuchBucket", t.s3.list_multipart_uploads, Bucket=missing, status=404)
    expect_error("404", t.s3.head_object, Bucket=missing, Key="k", status=404)
    expect_error("NoSuchBucket", t.s3.delete_objects, Bucket=missing, Delete={"Objects": [{"Key": "k"}]}, status=404)
    expect_error("NoSuchBucket", t.s3.delete_object, Bucket=missing, Key="k", status=404)
    expect_error("NoSuchBucket", t.s3.copy_object, Bucket=missing, Key="k", CopySource={"Bucket": missing, "Key": "x"}, status=404)
    names = [b["Name"] for b in t.s3.list_buckets()["Buckets"]]
    check(missing not in names, f"a bucket appeared from requests to it: {names}")


@case
def bucket_delete_rules(t):
    name = t.bucket("del")
    t.s3.put_object(Bucket=name, Key="deep/down/file", Body=b"x")
    expect_error("BucketNotEmpty", t.s3.delete_bucket, Bucket=name, status=409)
    t.s3.delete_object(Bucket=name, Key="deep/down/file")
    eq(t.s3.list_objects_v2(Bucket=name).get("KeyCount"), 0, "KeyCount after the delete")
    eq(t.s3.delete_bucket(Bucket=name)["ResponseMetadata"]["HTTPStatusCode"], 204, "DeleteBucket status")
    t.buckets.remove(name)
    expect_error("404", t.s3.head_bucket, Bucket=name, status=404)
    names = [b["Name"] for b in t.s3.list_buckets()["Buckets"]]
    check(name not in names, f"deleted bucket still listed: {names}")


@case
def object_round_trip(t):
    name = t.bucket("obj")
    body = os.urandom(100_000)
    put = t.s3.put_object(
        Bucket=name,
        Key="a/b/c.bin",
        Body=body,
        ContentType="application/x-test",
        Metadata={"colour": "blue", "Mixed-Case": "Value with spaces"},
        CacheControl="max-age=60",
        ContentDisposition='attachment; filename="c.bin"',
    )
    eq(put["ETag"], f'"{md5_hex(body)}"', "PutObject ETag")
    got = t.s3.get_object(Bucket=name, Key="a/b/c.bin")
    eq(got["Body"].read(), body, "GetObject body")
    eq(got["ETag"], f'"{md5_hex(body)}"', "GetObject ETag")
    eq(got["ContentLength"], len(body), "GetObject ContentLength")
    eq(got["ContentType"], "application/x-test", "GetObject ContentType")
    eq(got["Metadata"], {"colour": "blue", "mixed-case": "Value with spaces"}, "GetObject Metadata")
    eq(got.get("CacheControl"), "max-age=60", "GetObject CacheControl")
    eq(got.get("ContentDisposition"), 'attachment; filename="c.bin"', "GetObject ContentDisposition")
    check(isinstance(got.get("LastModified"), datetime.datetime), "GetObject LastModified")
    eq(got.get("AcceptRanges"), "bytes", "GetObject AcceptRanges")
    head = t.s3.head_object(Bucket=name, Key="a/b/c.bin")
    eq(head["ContentLength"], len(body), "HeadObject ContentLength")
    eq(head["ETag"], f'"{md5_hex(body)}"', "HeadObject ETag")
    eq(head["Metadata"], {"colour": "blue", "mixed-case": "Value with spaces"}, "HeadObject Metadata")
    eq(head["ContentType"], "application/x-test", "HeadObject ContentType")
    # Overwrite: new content, new ETag, metadata of the new PUT only.
    t.s3.put_object(Bucket=name, Key="a/b/c.bin", Body=b"second")
    got = t.s3.get_object(Bucket=name, Key="a/b/c.bin")
    eq(got["Body"].read(), b"second", "body after overwrite")
    eq(got["ETag"], f'"{md5_hex(b"second")}"', "ETag after overwrite")
    eq(got["Metadata"], {}, "Metadata after overwrite without metadata")


@case
def object_empty(t):
    name = t.bucket("empty")
    put = t.s3.put_object(Bucket=name, Key="empty", Body=b"")
    eq(put["ETag"], f'"{md5_hex(b"")}"', "ETag of an empty object")
    got = t.s3.get_object(Bucket=name, Key="empty")
    eq(got["Body"].read(), b"", "empty body")
    eq(got["ContentLength"], 0, "ContentLength of an empty object")
    eq(t.s3.head_object(Bucket=name, Key="empty")["ContentLength"], 0, "HEAD ContentLength")
    listed = t.s3.list_objects_v2(Bucket=name)["Contents"]
    eq([(o["Key"], o["Size"]) for o in listed], [("empty", 0)], "listing of an empty object")


ODD_KEYS = [
    "with space",
    "plus+sign",
    "per%cent",
    "per%20cent-encoded-looking",
    "question?mark",
    "hash#tag",
    "emoji-😀-🎉",
    "ünïcödé/κλειδί/ключ",
    "amp&and=eq;semi",
    "tilde~star*quote'paren()",
    "dir with space/file with space",
    "sub/a+b c%",
    "comma,colon:at@dollar$",
    "brackets[]{}",
]


@case
def object_odd_keys(t):
    name = t.bucket("odd")
    for key in ODD_KEYS:
        body = key.encode() * 3
        t.s3.put_object(Bucket=name, Key=key, Body=body)
        got = t.s3.get_object(Bucket=name, Key=key)
        eq(got["Body"].read(), body, f"body of {key!r}")
        eq(t.s3.head_object(Bucket=name, Key=key)["ContentLength"], len(body), f"HEAD of {key!r}")
    # boto3 asks for encoding-type=url and decodes.
    listed = [o["Key"] for o in t.s3.list_objects_v2(Bucket=name)["Contents"]]
    expected = sorted(ODD_KEYS, key=lambda k: k.encode())
    eq(listed, expected, "ListObjectsV2 (encoding-type=url, decoded) of odd keys")
    listed = [o["Key"] for o in t.s3.list_objects(Bucket=name)["Contents"]]
    eq(listed, expected, "ListObjects v1 of odd keys")
    # Explicit encoding-type=url: boto3 leaves the keys as sent.
    raw = t.s3.list_objects_v2(Bucket=name, EncodingType="url")
    eq(raw.get("EncodingType"), "url", "EncodingType echoed")
    decoded = [urllib.parse.unquote_plus(o["Key"]) for o in raw["Contents"]]
    eq(decoded, expected, "url-encoded keys, decoded")
    check(
        all(" " not in o["Key"] and "😀" not in o["Key"] for o in raw["Contents"]),
        f"keys not url-encoded: {[o['Key'] for o in raw['Contents']]}",
    )
    # No encoding asked: the XML carries the keys themselves.
    status, _, body = t.signed("GET", f"{t.url(name)}?list-type=2")
    eq(status, 200, "raw ListObjectsV2 status")
    root = ET.fromstring(body)
    keys = [c.findtext(f"{S3_NS}Key") for c in root.iter(f"{S3_NS}Contents")]
    eq(keys, expected, "raw ListObjectsV2 keys without encoding-type")
    # Common prefixes with odd characters, url-encoded by the server and decoded by boto3.
    top = t.s3.list_objects_v2(Bucket=name, Delimiter="/")
    eq(
        [c["Prefix"] for c in top.get("CommonPrefixes", [])],
        ["dir with space/", "sub/", "ünïcödé/"],
        "odd common prefixes",
    )
    # Prefix with odd characters.
    listed = t.s3.list_objects_v2(Bucket=name, Prefix="dir with space/")
    eq([o["Key"] for o in listed["Contents"]], ["dir with space/file with space"], "Prefix with a space")
    for key in ODD_KEYS:
        t.s3.delete_object(Bucket=name, Key=key)
        expect_error("404", t.s3.head_object, Bucket=name, Key=key)
    eq(t.s3.list_objects_v2(Bucket=name).get("KeyCount"), 0, "KeyCount after deleting the odd keys")


NESTED = [
    "p/a/1",
    "p/a/2",
    "p/a/3/deep",
    "p/b/1",
    "p/c",
    "p/d",
    "p/e/f/g",
    "p/e/h",
    "p/f",
    "p/g-1",
    "p/g/x",
    "p/g0",
    "q/1",
    "r",
]


def nested_bucket(t):
    name = t.bucket("list")
    for key in NESTED:
        t.s3.put_object(Bucket=name, Key=key, Body=key.encode())
    return name


def pages_v2(t, **params):
    """Every page of ListObjectsV2, driven by hand through ContinuationToken."""
    pages = []
    token = None
    while True:
        kwargs = dict(params)
        if token:
            kwargs["ContinuationToken"] = token
        page = t.s3.list_objects_v2(**kwargs)
        pages.append(page)
        check(len(pages) < 100, f"ListObjectsV2 {params}: no end after 100 pages")
        if not page["IsTruncated"]:
            check("NextContinuationToken" not in page, f"last page has a NextContinuationToken: {page}")
            return pages
        token = page.get("NextContinuationToken")
        check(token, f"truncated page without NextContinuationToken: {page}")


def flatten(pages):
    keys = [o["Key"] for p in pages for o in p.get("Contents", [])]
    prefixes = [c["Prefix"] for p in pages for c in p.get("CommonPrefixes", [])]
    return keys, prefixes


@case
def list_v2_pagination(t):
    name = nested_bucket(t)
    everything = sorted(NESTED, key=lambda k: k.encode())
    # All at once, then 2 by 2.
    one = t.s3.list_objects_v2(Bucket=name)
    eq([o["Key"] for o in one["Contents"]], everything, "ListObjectsV2 byte order")
    eq(one["KeyCount"], len(NESTED), "KeyCount")
    eq(one["IsTruncated"], False, "IsTruncated")
    for o in one["Contents"]:
        eq(o["Size"], len(o["Key"]), f"Size of {o['Key']}")
        eq(o["ETag"], f'"{md5_hex(o["Key"].encode())}"', f"ETag of {o['Key']}")
    pages = pages_v2(t, Bucket=name, MaxKeys=2)
    eq(flatten(pages), (everything, []), "MaxKeys=2 pages")
    for p in pages:
        check(p["KeyCount"] <= 2 and p["MaxKeys"] == 2, f"page: KeyCount {p['KeyCount']} MaxKeys {p['MaxKeys']}")
        eq(p["KeyCount"], len(p.get("Contents", [])), "KeyCount of a page")
    # Delimiter at the top.
    top = t.s3.list_objects_v2(Bucket=name, Delimiter="/")
    eq(flatten([top]), (["r"], ["p/", "q/"]), "Delimiter=/ at the top")
    eq(top["KeyCount"], 3, "KeyCount counts common prefixes")
    # Delimiter under a prefix, two by two: prefixes and keys interleaved in byte order.
    expected_keys = ["p/c", "p/d", "p/f", "p/g-1", "p/g0"]
    expected_prefixes = ["p/a/", "p/b/", "p/e/", "p/g/"]
    pages = pages_v2(t, Bucket=name, Prefix="p/", Delimiter="/", MaxKeys=2)
    eq(flatten(pages), (expected_keys, expected_prefixes), "Prefix=p/ Delimiter=/ MaxKeys=2")
    entries = []
    for p in pages:
        n = len(p.get("Contents", [])) + len(p.get("CommonPrefixes", []))
        check(1 <= n <= 2 or not p["IsTruncated"], f"a page of {n} entries: {p}")
        eq(p["KeyCount"], n, "KeyCount of a delimited page")
        entries += [o["Key"] for o in p.get("Contents", [])] + [c["Prefix"] for c in p.get("CommonPrefixes", [])]
        eq(p.get("Prefix"), "p/", "Prefix echoed")
        eq(p.get("Delimiter"), "/", "Delimiter echoed")
    merged = sorted(expected_keys + expected_prefixes, key=lambda k: k.encode())
    eq(sorted(entries, key=lambda k: k.encode()), merged, "entries across pages")
    # Each page's entries come after the previous page's.
    last = ""
    for p in pages:
        page_entries = sorted(
            [o["Key"] for o in p.get("Contents", [])] + [c["Prefix"] for c in p.get("CommonPrefixes", [])],
            key=lambda k: k.encode(),
        )
        if page_entries:
            check(page_entries[0].encode() > last.encode(), f"page starts at {page_entries[0]!r} after {last!r}")
            last = page_entries[-1]
    # A prefix that is not a folder boundary.
    eq(
        flatten([t.s3.list_objects_v2(Bucket=name, Prefix="p/g")]),
        (["p/g-1", "p/g/x", "p/g0"], []),
        "Prefix=p/g",
    )
    eq(
        flatten([t.s3.list_objects_v2(Bucket=name, Prefix="p/g", Delimiter="/")]),
        (["p/g-1", "p/g0"], ["p/g/"]),
        "Prefix=p/g Delimiter=/",
    )
    eq(flatten([t.s3.list_objects_v2(Bucket=name, Prefix="p/e/f/g")]), (["p/e/f/g"], []), "Prefix = a whole key")
    eq(t.s3.list_objects_v2(Bucket=name, Prefix="nothing/").get("KeyCount"), 0, "Prefix matching nothing")
    # StartAfter, alone and with a delimiter and pages.
    eq(
        flatten([t.s3.list_objects_v2(Bucket=name, StartAfter="p/e/h")])[0],
        [k for k in everything if k.encode() > b"p/e/h"],
        "StartAfter=p/e/h",
    )
    eq(
        flatten([t.s3.list_objects_v2(Bucket=name, StartAfter="p/b")])[0],
        [k for k in everything if k.encode() > b"p/b"],
        "StartAfter not a key",
    )
    pages = pages_v2(t, Bucket=name, StartAfter="p/a/2", MaxKeys=3)
    eq(flatten(pages)[0], [k for k in everything if k.encode() > b"p/a/2"], "StartAfter with MaxKeys=3 pages")
    eq(pages[0].get("StartAfter"), "p/a/2", "StartAfter echoed")
    pages = pages_v2(t, Bucket=name, Prefix="p/", Delimiter="/", StartAfter="p/b/1", MaxKeys=2)
    eq(flatten(pages), (expected_keys, ["p/e/", "p/g/"]), "StartAfter=p/b/1 with a delimiter")
    # MaxKeys=0 and a delimiter other than '/'.
    zero = t.s3.list_objects_v2(Bucket=name, MaxKeys=0)
    eq((zero["KeyCount"], zero.get("Contents", [])), (0, []), "MaxKeys=0")
    eq(
        flatten([t.s3.list_objects_v2(Bucket=name, Prefix="p/", Delimiter="-")]),
        ([k for k in everything if k.startswith("p/") and k != "p/g-1"], ["p/g-"]),
        "Delimiter=-",
    )
    # The paginator agrees.
    paginated = t.s3.get_paginator("list_objects_v2").paginate(
        Bucket=name, Prefix="p/", Delimiter="/", PaginationConfig={"PageSize": 2}
    )
    eq(flatten(list(paginated)), (expected_keys, expected_prefixes), "boto3 paginator")


@case
def list_fetch_owner(t):
    name = t.bucket("owner")
    t.s3.put_object(Bucket=name, Key="k", Body=b"")
    owned = t.s3.list_objects_v2(Bucket=name, FetchOwner=True)
    check("Owner" in owned["Contents"][0], f"ListObjectsV2 FetchOwner=True without Owner: {owned['Contents'][0]}")
    plain = t.s3.list_objects_v2(Bucket=name)
    check("Owner" not in plain["Contents"][0], f"ListObjectsV2 without FetchOwner has an Owner: {plain['Contents'][0]}")
    v1 = t.s3.list_objects(Bucket=name)
    check("Owner" in v1["Contents"][0], f"ListObjects (v1) without Owner: {v1['Contents'][0]}")


@case
def list_bad_arguments(t):
    """A continuation token not from the server, a negative max-keys: 400s;
    a StartAfter past every key: an empty last page."""
    name = t.bucket("badlist")
    t.s3.put_object(Bucket=name, Key="a", Body=b"")
    expect_error("InvalidArgument", t.s3.list_objects_v2, Bucket=name, ContinuationToken="not-a-token!", status=400)
    status, _, body = t.signed("GET", f"{t.url(name)}?list-type=2&max-keys=-1")
    eq((status, xml_code(body)), (400, "InvalidArgument"), "max-keys=-1")
    past = t.s3.list_objects_v2(Bucket=name, StartAfter="zzz")
    eq((past["KeyCount"], past["IsTruncated"], past.get("Contents", [])), (0, False, []), "StartAfter past every key")
    # Under an object's name: no such key, not an error of the server.
    expect_error("NoSuchKey", t.s3.get_object, Bucket=name, Key="a/below", status=404)
    expect_error("404", t.s3.head_object, Bucket=name, Key="a/below", status=404)
    eq(t.s3.list_objects_v2(Bucket=name, Prefix="a/").get("KeyCount"), 0, "a prefix under an object's name")


@case
def list_v1_markers(t):
    name = nested_bucket(t)
    everything = sorted(NESTED, key=lambda k: k.encode())
    # Without a delimiter: no NextMarker; the next Marker is the last key.
    keys, marker, rounds = [], None, 0
    while True:
        kwargs = {"Bucket": name, "MaxKeys": 2}
        if marker is not None:
            kwargs["Marker"] = marker
        page = t.s3.list_objects(**kwargs)
        got = [o["Key"] for o in page.get("Contents", [])]
        check(len(got) <= 2, f"v1 page of {len(got)} with MaxKeys=2")
        eq(page.get("Marker", ""), marker or "", "Marker echoed")
        keys += got
        rounds += 1
        check(rounds < 50, "v1 listing never ends")
        if not page["IsTruncated"]:
            break
        marker = got[-1]
    eq(keys, everything, "v1 MaxKeys=2 by Marker")
    # With a delimiter: NextMarker names where to go on.
    keys, prefixes, marker, rounds = [], [], None, 0
    while True:
        kwargs = {"Bucket": name, "MaxKeys": 2, "Prefix": "p/", "Delimiter": "/"}
        if marker is not None:
            kwargs["Marker"] = marker
        page = t.s3.list_objects(**kwargs)
        keys += [o["Key"] for o in page.get("Contents", [])]
        prefixes += [c["Prefix"] for c in page.get("CommonPrefixes", [])]
        rounds += 1
        check(rounds < 50, "v1 delimited listing never ends")
        if not page["IsTruncated"]:
            check(not page.get("NextMarker"), f"NextMarker on the last page: {page.get('NextMarker')}")
            break
        marker = page.get("NextMarker")
        check(marker, f"truncated delimited v1 page without NextMarker: {page}")
    eq(
        (keys, prefixes),
        (["p/c", "p/d", "p/f", "p/g-1", "p/g0"], ["p/a/", "p/b/", "p/e/", "p/g/"]),
        "v1 Prefix=p/ Delimiter=/ MaxKeys=2 by NextMarker",
    )
    eq(
        [o["Key"] for o in t.s3.list_objects(Bucket=name, Marker="p/e/f/g")["Contents"]],
        [k for k in everything if k.encode() > b"p/e/f/g"],
        "v1 Marker",
    )
    paginated = t.s3.get_paginator("list_objects").paginate(
        Bucket=name, Prefix="p/", Delimiter="/", PaginationConfig={"PageSize": 2}
    )
    eq(
        flatten(list(paginated)),
        (["p/c", "p/d", "p/f", "p/g-1", "p/g0"], ["p/a/", "p/b/", "p/e/", "p/g/"]),
        "v1 boto3 paginator",
    )


@case
def list_byte_order(t):
    name = t.bucket("order")
    keys = ["B", "a", "b-1", "b/x", "b0", "~", "é", "😀", "Z/z", "a.b", "a_b"]
    for key in keys:
        t.s3.put_object(Bucket=name, Key=key, Body=b"")
    listed = [o["Key"] for o in t.s3.list_objects_v2(Bucket=name)["Contents"]]
    eq(listed, sorted(keys, key=lambda k: k.encode()), "UTF-8 byte order")
    pages = pages_v2(t, Bucket=name, MaxKeys=1)
    eq(flatten(pages)[0], sorted(keys, key=lambda k: k.encode()), "byte order one by one")


def conditional_bucket(t):
    name = t.bucket("cond")
    body = b"0123456789abcdefghij"
    etag = t.s3.put_object(Bucket=name, Key="obj", Body=body)["ETag"]
    return name, body, etag


@case
def conditional_get_head(t):
    name, body, etag = conditional_bucket(t)
    modified = t.s3.head_object(Bucket=name, Key="obj")["LastModified"]
    past = modified - datetime.timedelta(days=1)
    future = modified + datetime.timedelta(days=1)
    for op, ok in ((t.s3.get_object, "GetObject"), (t.s3.head_object, "HeadObject")):
        # HEAD has no body, so boto3 names its errors by their status.
        eq(op(Bucket=name, Key="obj", IfMatch=etag)["ResponseMetadata"]["HTTPStatusCode"], 200, f"{ok} If-Match")
        eq(op(Bucket=name, Key="obj", IfMatch="*")["ResponseMetadata"]["HTTPStatusCode"], 200, f"{ok} If-Match *")
        wrong_code = "PreconditionFailed" if ok == "GetObject" else "412"
        expect_error(wrong_code, op, Bucket=name, Key="obj", IfMatch='"0123"', status=412)
        expect_error("304", op, Bucket=name, Key="obj", IfNoneMatch=etag, status=304)
        expect_error("304", op, Bucket=name, Key="obj", IfNoneMatch="*", status=304)
        eq(
            op(Bucket=name, Key="obj", IfNoneMatch='"0123"')["ResponseMetadata"]["HTTPStatusCode"],
            200,
            f"{ok} If-None-Match other",
        )
        expect_error("304", op, Bucket=name, Key="obj", IfModifiedSince=future, status=304)
        expect_error("304", op, Bucket=name, Key="obj", IfModifiedSince=modified, status=304)
        eq(
            op(Bucket=name, Key="obj", IfModifiedSince=past)["ResponseMetadata"]["HTTPStatusCode"],
            200,
            f"{ok} If-Modified-Since past",
        )
        expect_error(wrong_code, op, Bucket=name, Key="obj", IfUnmodifiedSince=past, status=412)
        eq(
            op(Bucket=name, Key="obj", IfUnmodifiedSince=future)["ResponseMetadata"]["HTTPStatusCode"],
            200,
            f"{ok} If-Unmodified-Since future",
        )
        # RFC 7232 / S3: If-Match true wins over If-Unmodified-Since false;
        # If-None-Match false wins over If-Modified-Since true.
        eq(
            op(Bucket=name, Key="obj", IfMatch=etag, IfUnmodifiedSince=past)["ResponseMetadata"]["HTTPStatusCode"],
            200,
            f"{ok} If-Match + If-Unmodified-Since past",
        )
        expect_error("304", op, Bucket=name, Key="obj", IfNoneMatch=etag, IfModifiedSince=past, status=304)


@case
def not_modified_carries_etag(t):
    """RFC 9110 15.4.5: a 304 has the ETag a 200 would have had (S3 sends it)."""
    name, body, etag = conditional_bucket(t)
    for op in (t.s3.get_object, t.s3.head_object):
        exc = expect_error("304", op, Bucket=name, Key="obj", IfNoneMatch=etag, status=304)
        headers = exc.response["ResponseMetadata"].get("HTTPHeaders", {})
        eq(headers.get("etag"), etag, f"ETag of a 304 to {op.__name__}")


@case
def conditional_put(t):
    """PutObject with If-None-Match: * (S3 since 2024): never overwrites."""
    name, body, etag = conditional_bucket(t)
    expect_error("PreconditionFailed", t.s3.put_object, Bucket=name, Key="obj", Body=b"new", IfNoneMatch="*", status=412)
    eq(t.s3.get_object(Bucket=name, Key="obj")["Body"].read(), body, "body after a refused conditional PUT")
    t.s3.put_object(Bucket=name, Key="fresh", Body=b"new", IfNoneMatch="*")
    eq(t.s3.get_object(Bucket=name, Key="fresh")["Body"].read(), b"new", "conditional PUT of a new key")


@case
def ranges(t):
    name, body, etag = conditional_bucket(t)
    n = len(body)

    def get(r):
        got = t.s3.get_object(Bucket=name, Key="obj", Range=r)
        return got["ResponseMetadata"]["HTTPStatusCode"], got.get("ContentRange"), got["Body"].read(), got

    for r, start, end in [
        ("bytes=0-0", 0, 0),
        ("bytes=0-4", 0, 4),
        ("bytes=5-9", 5, 9),
        (f"bytes={n - 1}-{n - 1}", n - 1, n - 1),
        ("bytes=-5", n - 5, n - 1),
        (f"bytes=-{n + 10}", 0, n - 1),
        ("bytes=3-", 3, n - 1),
        (f"bytes=10-{n + 100}", 10, n - 1),
    ]:
        status, content_range, data, got = get(r)
        eq(status, 206, f"status of Range {r}")
        eq(content_range, f"bytes {start}-{end}/{n}", f"Content-Range of {r}")
        eq(data, body[start : end + 1], f"body of Range {r}")
        eq(got["ContentLength"], end - start + 1, f"ContentLength of {r}")
        eq(got["ETag"], etag, f"ETag of Range {r}")
    for r in [f"bytes={n}-", f"bytes={n + 5}-{n + 10}"]:
        expect_error("InvalidRange", t.s3.get_object, Bucket=name, Key="obj", Range=r, status=416)
    # Range with a matching and a failing If-Match.
    eq(get("bytes=0-0")[2], b"0", "Range")
    got = t.s3.get_object(Bucket=name, Key="obj", Range="bytes=1-2", IfMatch=etag)
    eq(got["Body"].read(), body[1:3], "Range with If-Match")
    expect_error("PreconditionFailed", t.s3.get_object, Bucket=name, Key="obj", Range="bytes=1-2", IfMatch='"x"', status=412)
    # Empty object: any range is unsatisfiable.
    t.s3.put_object(Bucket=name, Key="empty", Body=b"")
    expect_error("InvalidRange", t.s3.get_object, Bucket=name, Key="empty", Range="bytes=0-0", status=416)


@case
def unusable_ranges_are_ignored(t):
    """A Range the server cannot use (end before start, several ranges,
    another unit) is ignored: 200 and the whole object (RFC 9110 14.2; AWS
    and MinIO do so), not a 400."""
    name, body, _ = conditional_bucket(t)
    for r in ["bytes=5-2", "bytes=0-1,3-4", "items=0-1"]:
        try:
            got = t.s3.get_object(Bucket=name, Key="obj", Range=r)
        except ClientError as exc:
            code, status, message = error_of(exc)
            fail(f"Range {r}: {code} ({status}) {message}")
        eq((got["ResponseMetadata"]["HTTPStatusCode"], got["Body"].read()), (200, body), f"Range {r}")


@case
def head_with_range(t):
    """HeadObject with a Range answers as GetObject would, without the body (AWS: 206)."""
    name, body, etag = conditional_bucket(t)
    head = t.s3.head_object(Bucket=name, Key="obj", Range="bytes=2-5")
    eq(head["ResponseMetadata"]["HTTPStatusCode"], 206, "HEAD with Range status")
    eq(head["ContentLength"], 4, "HEAD with Range ContentLength")
    eq(head.get("ContentRange"), f"bytes 2-5/{len(body)}", "HEAD with Range Content-Range")


@case
def response_overrides(t):
    name, body, _ = conditional_bucket(t)
    got = t.s3.get_object(
        Bucket=name,
        Key="obj",
        ResponseContentType="text/x-override",
        ResponseContentDisposition='attachment; filename="report.txt"',
        ResponseCacheControl="no-cache",
        ResponseContentLanguage="fr",
        ResponseContentEncoding="identity",
        ResponseExpires=datetime.datetime(2030, 1, 2, 3, 4, 5, tzinfo=datetime.timezone.utc),
    )
    eq(got["Body"].read(), body, "body with overrides")
    eq(got["ContentType"], "text/x-override", "response-content-type")
    eq(got["ContentDisposition"], 'attachment; filename="report.txt"', "response-content-disposition")
    eq(got["CacheControl"], "no-cache", "response-cache-control")
    eq(got["ContentLanguage"], "fr", "response-content-language")
    eq(got["ContentEncoding"], "identity", "response-content-encoding")
    headers = got["ResponseMetadata"]["HTTPHeaders"]
    eq(headers.get("expires"), "Wed, 02 Jan 2030 03:04:05 GMT", "response-expires")
    # Overrides are for that response only.
    stored = t.s3.head_object(Bucket=name, Key="obj")["ContentType"]
    check(stored != "text/x-override", f"an override was stored: {stored}")


@case
def default_content_type(t):
    """An object PUT without a Content-Type is binary/octet-stream (AWS;
    MinIO says application/octet-stream): not a type guessed from its bytes."""
    name = t.bucket("ctype")
    for key, body in [("text-like", b"0123456789abcdefghij"), ("notes.txt", b"plain words"), ("bytes", os.urandom(64))]:
        t.s3.put_object(Bucket=name, Key=key, Body=body)
        got = t.s3.head_object(Bucket=name, Key=key)["ContentType"]
        check(got in ("binary/octet-stream", "application/octet-stream"), f"Content-Type of {key!r} PUT without one: {got}")


@case
def metadata_round_trip(t):
    name = t.bucket("meta")
    metadata = {"one": "1", "two-words": "a b", "ascii-punct": "!#$&'()*+,;=?@[]"}
    t.s3.put_object(Bucket=name, Key="m", Body=b"m", Metadata=metadata, ContentLanguage="de", ContentEncoding="identity")
    head = t.s3.head_object(Bucket=name, Key="m")
    eq(head["Metadata"], metadata, "user metadata")
    eq(head.get("ContentLanguage"), "de", "Content-Language")
    got = t.s3.get_object(Bucket=name, Key="m")
    eq(got["Metadata"], metadata, "user metadata on GET")
    got["Body"].read()


@case
def metadata_too_large(t):
    """User metadata over 2 KB: MetadataTooLarge, nothing stored (AWS)."""
    name = t.bucket("bigmeta")
    expect_error(
        "MetadataTooLarge",
        t.s3.put_object,
        Bucket=name,
        Key="big-meta",
        Body=b"x",
        Metadata={"big": "x" * 3000},
        status=400,
    )
    expect_error("404", t.s3.head_object, Bucket=name, Key="big-meta")


@case
def copy_object(t):
    name = t.bucket("copy")
    other = t.bucket("copy2")
    body = os.urandom(4096)
    t.s3.put_object(Bucket=name, Key="src", Body=body, ContentType="text/plain", Metadata={"k": "v"})
    # COPY (the default): content, type and metadata come along.
    copied = t.s3.copy_object(Bucket=name, Key="dst", CopySource={"Bucket": name, "Key": "src"})
    eq(copied["CopyObjectResult"]["ETag"], f'"{md5_hex(body)}"', "CopyObject ETag")
    check(isinstance(copied["CopyObjectResult"].get("LastModified"), datetime.datetime), "CopyObject LastModified")
    got = t.s3.get_object(Bucket=name, Key="dst")
    eq(got["Body"].read(), body, "copied body")
    eq(got["ContentType"], "text/plain", "COPY keeps Content-Type")
    eq(got["Metadata"], {"k": "v"}, "COPY keeps metadata")
    # COPY ignores the metadata sent with it.
    t.s3.copy_object(
        Bucket=name, Key="dst2", CopySource={"Bucket": name, "Key": "src"}, Metadata={"ignored": "yes"}, MetadataDirective="COPY"
    )
    eq(t.s3.head_object(Bucket=name, Key="dst2")["Metadata"], {"k": "v"}, "COPY with metadata sent")
    # REPLACE: the request's metadata and type instead.
    t.s3.copy_object(
        Bucket=other,
        Key="deep/dst",
        CopySource={"Bucket": name, "Key": "src"},
        MetadataDirective="REPLACE",
        Metadata={"new": "meta"},
        ContentType="application/x-new",
    )
    head = t.s3.head_object(Bucket=other, Key="deep/dst")
    eq(head["Metadata"], {"new": "meta"}, "REPLACE metadata")
    eq(head["ContentType"], "application/x-new", "REPLACE Content-Type")
    eq(head["ETag"], f'"{md5_hex(body)}"', "ETag of a cross-bucket copy")
    eq(t.s3.get_object(Bucket=other, Key="deep/dst")["Body"].read(), body, "cross-bucket copy body")
    # The source is untouched.
    eq(t.s3.head_object(Bucket=name, Key="src")["Metadata"], {"k": "v"}, "source metadata after copies")
    # To itself: REPLACE is how metadata changes; COPY is refused.
    t.s3.copy_object(
        Bucket=name, Key="src", CopySource={"Bucket": name, "Key": "src"}, MetadataDirective="REPLACE", Metadata={"k": "v2"}
    )
    eq(t.s3.head_object(Bucket=name, Key="src")["Metadata"], {"k": "v2"}, "metadata after a copy onto itself")
    eq(t.s3.get_object(Bucket=name, Key="src")["Body"].read(), body, "body after a copy onto itself")
    expect_error("InvalidRequest", t.s3.copy_object, Bucket=name, Key="src", CopySource={"Bucket": name, "Key": "src"}, status=400)
    # Odd keys as the source (x-amz-copy-source is URL-encoded).
    t.s3.put_object(Bucket=name, Key="odd src+😀 %?#", Body=b"odd")
    t.s3.copy_object(Bucket=name, Key="odd dst+😀 %?#", CopySource={"Bucket": name, "Key": "odd src+😀 %?#"})
    eq(t.s3.get_object(Bucket=name, Key="odd dst+😀 %?#")["Body"].read(), b"odd", "copy of an odd key")
    # Conditional copies.
    etag = f'"{md5_hex(body)}"'
    t.s3.copy_object(Bucket=name, Key="cond", CopySource={"Bucket": name, "Key": "src"}, CopySourceIfMatch=etag)
    expect_error(
        "PreconditionFailed",
        t.s3.copy_object,
        Bucket=name,
        Key="cond2",
        CopySource={"Bucket": name, "Key": "src"},
        CopySourceIfMatch='"nope"',
        status=412,
    )
    expect_error(
        "PreconditionFailed",
        t.s3.copy_object,
        Bucket=name,
        Key="cond2",
        CopySource={"Bucket": name, "Key": "src"},
        CopySourceIfNoneMatch=etag,
        status=412,
    )
    expect_error("404", t.s3.head_object, Bucket=name, Key="cond2")
    # Missing source, missing source bucket, missing destination bucket.
    expect_error("NoSuchKey", t.s3.copy_object, Bucket=name, Key="x", CopySource={"Bucket": name, "Key": "nope"}, status=404)
    expect_error(
        "NoSuchBucket", t.s3.copy_object, Bucket=name, Key="x", CopySource={"Bucket": f"{t.prefix}-nobucket", "Key": "src"}, status=404
    )
    expect_error(
        "NoSuchBucket", t.s3.copy_object, Bucket=f"{t.prefix}-nobucket", Key="x", CopySource={"Bucket": name, "Key": "src"}, status=404
    )


@case
def delete_objects(t):
    name = t.bucket("multidel")
    keys = [f"d/{i}" for i in range(10)] + ["odd key+😀"]
    for key in keys:
        t.s3.put_object(Bucket=name, Key=key, Body=b"x")
    # Not quiet: every key reported, missing ones too.
    answer = t.s3.delete_objects(
        Bucket=name, Delete={"Objects": [{"Key": k} for k in keys[:5] + ["missing", "odd key+😀"]]}
    )
    eq(
        sorted(d["Key"] for d in answer.get("Deleted", [])),
        sorted(keys[:5] + ["missing", "odd key+😀"]),
        "DeleteObjects Deleted",
    )
    eq(answer.get("Errors", []), [], "DeleteObjects Errors")
    # Quiet: nothing reported on success.
    answer = t.s3.delete_objects(Bucket=name, Delete={"Objects": [{"Key": k} for k in keys[5:10]], "Quiet": True})
    eq(answer.get("Deleted", []), [], "quiet DeleteObjects Deleted")
    eq(answer.get("Errors", []), [], "quiet DeleteObjects Errors")
    eq(t.s3.list_objects_v2(Bucket=name).get("KeyCount"), 0, "KeyCount after DeleteObjects")
    # Single delete of a missing key: 204 as for any.
    eq(t.s3.delete_object(Bucket=name, Key="never")["ResponseMetadata"]["HTTPStatusCode"], 204, "DeleteObject of a missing key")
    # The folders emptied by deletes do not linger as prefixes.
    eq(t.s3.list_objects_v2(Bucket=name, Delimiter="/").get("CommonPrefixes", []), [], "prefixes left after deletes")
    # Over 1000 keys is refused.
    expect_error(
        "MalformedXML",
        t.s3.delete_objects,
        Bucket=name,
        Delete={"Objects": [{"Key": f"k{i}"} for i in range(1001)]},
        status=400,
    )


@case
def error_codes(t):
    name = t.bucket("errors")
    exc = expect_error("NoSuchKey", t.s3.get_object, Bucket=name, Key="nope", status=404)
    check(exc.response["ResponseMetadata"].get("RequestId"), f"no request id on an error: {exc.response}")
    expect_error("404", t.s3.head_object, Bucket=name, Key="nope", status=404)
    expect_error("NoSuchUpload", t.s3.list_parts, Bucket=name, Key="k", UploadId="nonexistent-upload", status=404)
    expect_error(
        "NoSuchUpload", t.s3.upload_part, Bucket=name, Key="k", UploadId="nonexistent-upload", PartNumber=1, Body=b"x", status=404
    )
    expect_error("NoSuchUpload", t.s3.abort_multipart_upload, Bucket=name, Key="k", UploadId="nonexistent-upload", status=404)
    expect_error(
        "NoSuchUpload",
        t.s3.complete_multipart_upload,
        Bucket=name,
        Key="k",
        UploadId="nonexistent-upload",
        MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": '"x"'}]},
        status=404,
    )
    # The raw answer is S3 XML with a request id.
    status, headers, body = t.signed("GET", t.url(name, "nope"))
    eq(status, 404, "raw GET of a missing key")
    eq(xml_code(body), "NoSuchKey", f"XML code of a missing key: {body[:300]!r}")
    check(b"<RequestId>" in body or headers.get("x-amz-request-id"), f"no request id: {headers} {body[:300]!r}")
    check(headers.get("x-amz-request-id"), f"no x-amz-request-id header: {dict(headers)}")
    check((headers.get("content-type") or "").startswith(("application/xml", "text/xml")), f"Content-Type {headers.get('content-type')}")
    # An object key that is a folder's name is no object.
    t.s3.put_object(Bucket=name, Key="folder/inside", Body=b"x")
    expect_error("NoSuchKey", t.s3.get_object, Bucket=name, Key="folder", status=404)
    expect_error("404", t.s3.head_object, Bucket=name, Key="folder", status=404)
    # A key under an object's name cannot exist beside it in a tree; the answer is an S3 error, not a 500.
    try:
        t.s3.put_object(Bucket=name, Key="folder/inside/below", Body=b"x")
    except ClientError as exc:
        code, status, message = error_of(exc)
        check(status is not None and 400 <= status < 500, f"PUT under an object's name: {code} {status} {message}")


def part_body(n, size=5 * MIB):
    return bytes([n]) * size


def complete_parts(parts):
    """What CompleteMultipartUpload needs from UploadPart answers."""
    out = []
    for number, answer in sorted(parts.items()):
        entry = {"PartNumber": number, "ETag": answer["ETag"]}
        for k in ("ChecksumCRC32", "ChecksumCRC32C", "ChecksumCRC64NVME", "ChecksumSHA1", "ChecksumSHA256"):
            if answer.get(k):
                entry[k] = answer[k]
        out.append(entry)
    return out


@case
def multipart_upload(t):
    name = t.bucket("mpu")
    created = t.s3.create_multipart_upload(Bucket=name, Key="big/file.bin", ContentType="video/x-test", Metadata={"m": "1"})
    upload = created["UploadId"]
    eq(created["Key"], "big/file.bin", "CreateMultipartUpload Key")
    eq(created["Bucket"], name, "CreateMultipartUpload Bucket")
    uploads = t.s3.list_multipart_uploads(Bucket=name)["Uploads"]
    eq([(u["Key"], u["UploadId"]) for u in uploads], [("big/file.bin", upload)], "ListMultipartUploads")
    eq(
        t.s3.list_multipart_uploads(Bucket=name, Prefix="other/").get("Uploads", []),
        [],
        "ListMultipartUploads with another prefix",
    )
    # Out of order: 3, 1, then 2 twice (the second one counts).
    bodies = {1: part_body(1), 2: part_body(9), 3: os.urandom(1234)}
    parts = {}
    for number in (3, 1):
        parts[number] = t.s3.upload_part(Bucket=name, Key="big/file.bin", UploadId=upload, PartNumber=number, Body=bodies[number])
        eq(parts[number]["ETag"], f'"{md5_hex(bodies[number])}"', f"ETag of part {number}")
    t.s3.upload_part(Bucket=name, Key="big/file.bin", UploadId=upload, PartNumber=2, Body=part_body(2))
    parts[2] = t.s3.upload_part(Bucket=name, Key="big/file.bin", UploadId=upload, PartNumber=2, Body=bodies[2])
    listed = t.s3.list_parts(Bucket=name, Key="big/file.bin", UploadId=upload)
    eq(
        [(p["PartNumber"], p["Size"], p["ETag"]) for p in listed["Parts"]],
        [(n, len(bodies[n]), f'"{md5_hex(bodies[n])}"') for n in (1, 2, 3)],
        "ListParts",
    )
    eq(listed.get("IsTruncated"), False, "ListParts IsTruncated")
    # ListParts two at a time.
    page = t.s3.list_parts(Bucket=name, Key="big/file.bin", UploadId=upload, MaxParts=2)
    eq([p["PartNumber"] for p in page["Parts"]], [1, 2], "ListParts MaxParts=2")
    eq(page["IsTruncated"], True, "ListParts IsTruncated with MaxParts=2")
    page = t.s3.list_parts(
        Bucket=name, Key="big/file.bin", UploadId=upload, MaxParts=2, PartNumberMarker=page["NextPartNumberMarker"]
    )
    eq([p["PartNumber"] for p in page["Parts"]], [3], "ListParts after NextPartNumberMarker")
    # Nothing is visible before completion.
    expect_error("NoSuchKey", t.s3.get_object, Bucket=name, Key="big/file.bin", status=404)
    listed_parts = complete_parts(parts)
    done = t.s3.complete_multipart_upload(
        Bucket=name, Key="big/file.bin", UploadId=upload, MultipartUpload={"Parts": listed_parts}
    )
    whole = bodies[1] + bodies[2] + bodies[3]
    expected_etag = multipart_etag([bodies[1], bodies[2], bodies[3]])
    eq(done["ETag"], expected_etag, "CompleteMultipartUpload ETag")
    eq(done["Key"], "big/file.bin", "CompleteMultipartUpload Key")
    head = t.s3.head_object(Bucket=name, Key="big/file.bin")
    eq(head["ContentLength"], len(whole), "size of the completed object")
    eq(head["ETag"], expected_etag, "HEAD ETag of the completed object")
    eq(head["ContentType"], "video/x-test", "Content-Type from CreateMultipartUpload")
    eq(head["Metadata"], {"m": "1"}, "metadata from CreateMultipartUpload")
    got = t.s3.get_object(Bucket=name, Key="big/file.bin")
    data = got["Body"].read()
    check(data == whole, f"completed object differs (got {len(data)} bytes, sha256 {hashlib.sha256(data).hexdigest()})")
    ranged = t.s3.get_object(Bucket=name, Key="big/file.bin", Range=f"bytes={5 * MIB - 2}-{5 * MIB + 1}")
    eq(ranged["Body"].read(), whole[5 * MIB - 2 : 5 * MIB + 2], "a range across the parts")
    eq(t.s3.list_multipart_uploads(Bucket=name).get("Uploads", []), [], "uploads after completion")
    expect_error("NoSuchUpload", t.s3.list_parts, Bucket=name, Key="big/file.bin", UploadId=upload, status=404)
    listed = t.s3.list_objects_v2(Bucket=name)["Contents"]
    eq([(o["Key"], o["Size"], o["ETag"]) for o in listed], [("big/file.bin", len(whole), expected_etag)], "listing after completion")


@case
def multipart_part_order(t):
    """Complete with the parts not in ascending order: InvalidPartOrder,
    whatever their sizes; the upload stays."""
    name = t.bucket("mpuorder")
    upload = t.s3.create_multipart_upload(Bucket=name, Key="k")["UploadId"]
    parts = {n: t.s3.upload_part(Bucket=name, Key="k", UploadId=upload, PartNumber=n, Body=part_body(n)) for n in (1, 2)}
    parts[3] = t.s3.upload_part(Bucket=name, Key="k", UploadId=upload, PartNumber=3, Body=b"tail")
    expect_error(
        "InvalidPartOrder",
        t.s3.complete_multipart_upload,
        Bucket=name,
        Key="k",
        UploadId=upload,
        MultipartUpload={"Parts": list(reversed(complete_parts(parts)))},
        status=400,
    )
    eq(len(t.s3.list_parts(Bucket=name, Key="k", UploadId=upload)["Parts"]), 3, "parts after InvalidPartOrder")
    # A part named twice is out of order too.
    twice = complete_parts(parts)
    expect_error(
        "InvalidPartOrder",
        t.s3.complete_multipart_upload,
        Bucket=name,
        Key="k",
        UploadId=upload,
        MultipartUpload={"Parts": [twice[0], twice[0], twice[1], twice[2]]},
        status=400,
    )
    t.s3.abort_multipart_upload(Bucket=name, Key="k", UploadId=upload)


@case
def multipart_get_part_number(t):
    """GetObject/HeadObject with partNumber: that part's bytes, its range, the parts count."""
    name = t.bucket("partnum")
    upload = t.s3.create_multipart_upload(Bucket=name, Key="k")["UploadId"]
    bodies = {1: part_body(1), 2: part_body(2), 3: b"three"}
    parts = {n: t.s3.upload_part(Bucket=name, Key="k", UploadId=upload, PartNumber=n, Body=b) for n, b in bodies.items()}
    t.s3.complete_multipart_upload(Bucket=name, Key="k", UploadId=upload, MultipartUpload={"Parts": complete_parts(parts)})
    total = sum(len(b) for b in bodies.values())
    start = 0
    for n in (1, 2, 3):
        got = t.s3.get_object(Bucket=name, Key="k", PartNumber=n)
        end = start + len(bodies[n]) - 1
        eq(got["ResponseMetadata"]["HTTPStatusCode"], 206, f"status of part {n}")
        eq(got.get("ContentRange"), f"bytes {start}-{end}/{total}", f"Content-Range of part {n}")
        eq(got.get("PartsCount"), 3, f"PartsCount with part {n}")
        data = got["Body"].read()
        check(data == bodies[n], f"part {n}: {len(data)} bytes, not its own")
        head = t.s3.head_object(Bucket=name, Key="k", PartNumber=n)
        eq((head["ContentLength"], head.get("PartsCount")), (len(bodies[n]), 3), f"HEAD of part {n}")
        start = end + 1
    expect_error(("InvalidPartNumber", "InvalidRange"), t.s3.get_object, Bucket=name, Key="k", PartNumber=4, status=416)
    # A single-part object is its own part 1.
    t.s3.put_object(Bucket=name, Key="single", Body=b"single")
    got = t.s3.get_object(Bucket=name, Key="single", PartNumber=1)
    eq(got["Body"].read(), b"single", "part 1 of a single-part object")


@case
def multipart_uploads_listing(t):
    """ListMultipartUploads: by key then initiation, Prefix, Delimiter, MaxUploads paging."""
    name = t.bucket("uploads")
    ids = {}
    for key in ["b/2", "a/1", "a/2", "c", "a/1"]:
        ids.setdefault(key, []).append(t.s3.create_multipart_upload(Bucket=name, Key=key)["UploadId"])
    listed = t.s3.list_multipart_uploads(Bucket=name)["Uploads"]
    eq([u["Key"] for u in listed], ["a/1", "a/1", "a/2", "b/2", "c"], "uploads by key")
    eq(
        sorted(u["UploadId"] for u in listed if u["Key"] == "a/1"),
        sorted(ids["a/1"]),
        "both uploads of a/1",
    )
    eq([u["Key"] for u in t.s3.list_multipart_uploads(Bucket=name, Prefix="a/")["Uploads"]], ["a/1", "a/1", "a/2"], "Prefix=a/")
    top = t.s3.list_multipart_uploads(Bucket=name, Delimiter="/")
    eq(([u["Key"] for u in top.get("Uploads", [])], [p["Prefix"] for p in top.get("CommonPrefixes", [])]), (["c"], ["a/", "b/"]), "Delimiter=/")
    seen, kwargs = [], {"Bucket": name, "MaxUploads": 2}
    for _ in range(10):
        page = t.s3.list_multipart_uploads(**kwargs)
        check(len(page.get("Uploads", [])) <= 2, f"a page of {len(page.get('Uploads', []))} with MaxUploads=2")
        seen += [(u["Key"], u["UploadId"]) for u in page.get("Uploads", [])]
        if not page["IsTruncated"]:
            break
        kwargs.update(KeyMarker=page["NextKeyMarker"], UploadIdMarker=page["NextUploadIdMarker"])
    eq(seen, [(u["Key"], u["UploadId"]) for u in listed], "uploads paged two by two")
    for key, uploads in ids.items():
        for upload in uploads:
            t.s3.abort_multipart_upload(Bucket=name, Key=key, UploadId=upload)


@case
def folder_markers(t):
    """A key ending in / with no content (what consoles make for a folder):
    listed as an empty object, a common prefix under a delimiter, and
    deleting it keeps what is in the folder."""
    name = t.bucket("markers")
    t.s3.put_object(Bucket=name, Key="empty dir/", Body=b"")
    t.s3.put_object(Bucket=name, Key="full/", Body=b"")
    t.s3.put_object(Bucket=name, Key="full/inside", Body=b"x")
    listed = t.s3.list_objects_v2(Bucket=name)["Contents"]
    eq([(o["Key"], o["Size"]) for o in listed], [("empty dir/", 0), ("full/", 0), ("full/inside", 1)], "markers listed")
    top = t.s3.list_objects_v2(Bucket=name, Delimiter="/")
    eq(([o["Key"] for o in top.get("Contents", [])], [p["Prefix"] for p in top["CommonPrefixes"]]), ([], ["empty dir/", "full/"]), "markers under a delimiter")
    inside = t.s3.list_objects_v2(Bucket=name, Prefix="full/", Delimiter="/")
    eq([o["Key"] for o in inside["Contents"]], ["full/", "full/inside"], "a marker under its own prefix")
    eq(t.s3.head_object(Bucket=name, Key="empty dir/")["ContentLength"], 0, "HEAD of a marker")
    t.s3.delete_object(Bucket=name, Key="full/")
    eq([o["Key"] for o in t.s3.list_objects_v2(Bucket=name)["Contents"]], ["empty dir/", "full/inside"], "after deleting a marker")
    t.s3.delete_object(Bucket=name, Key="empty dir/")
    eq([o["Key"] for o in t.s3.list_objects_v2(Bucket=name)["Contents"]], ["full/inside"], "after deleting the empty marker")
    expect_error("404", t.s3.head_object, Bucket=name, Key="empty dir/", status=404)


@case
def multipart_subset_of_parts(t):
    name = t.bucket("mpusub")
    upload = t.s3.create_multipart_upload(Bucket=name, Key="k")["UploadId"]
    parts = {}
    bodies = {1: part_body(1), 2: part_body(2), 4: b"tail"}
    for n, b in bodies.items():
        parts[n] = t.s3.upload_part(Bucket=name, Key="k", UploadId=upload, PartNumber=n, Body=b)
    # Complete with parts 1 and 4 only (gaps are allowed; 2 is dropped).
    chosen = [p for p in complete_parts(parts) if p["PartNumber"] in (1, 4)]
    done = t.s3.complete_multipart_upload(Bucket=name, Key="k", UploadId=upload, MultipartUpload={"Parts": chosen})
    eq(done["ETag"], multipart_etag([bodies[1], bodies[4]]), "ETag of parts 1 and 4")
    eq(t.s3.get_object(Bucket=name, Key="k")["Body"].read(), bodies[1] + bodies[4], "body of parts 1 and 4")


@case
def multipart_abort(t):
    name = t.bucket("mpuabort")
    upload = t.s3.create_multipart_upload(Bucket=name, Key="gone")["UploadId"]
    t.s3.upload_part(Bucket=name, Key="gone", UploadId=upload, PartNumber=1, Body=part_body(1, 1000))
    eq(
        t.s3.abort_multipart_upload(Bucket=name, Key="gone", UploadId=upload)["ResponseMetadata"]["HTTPStatusCode"],
        204,
        "AbortMultipartUpload status",
    )
    expect_error("NoSuchUpload", t.s3.list_parts, Bucket=name, Key="gone", UploadId=upload, status=404)
    expect_error(
        "NoSuchUpload", t.s3.upload_part, Bucket=name, Key="gone", UploadId=upload, PartNumber=2, Body=b"x", status=404
    )
    expect_error(
        "NoSuchUpload",
        t.s3.complete_multipart_upload,
        Bucket=name,
        Key="gone",
        UploadId=upload,
        MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": f'"{md5_hex(part_body(1, 1000))}"'}]},
        status=404,
    )
    expect_error("NoSuchKey", t.s3.get_object, Bucket=name, Key="gone", status=404)
    eq(t.s3.list_multipart_uploads(Bucket=name).get("Uploads", []), [], "uploads after abort")
    # An upload of a bucket is not an upload of another key.
    upload = t.s3.create_multipart_upload(Bucket=name, Key="one")["UploadId"]
    expect_error("NoSuchUpload", t.s3.list_parts, Bucket=name, Key="another", UploadId=upload, status=404)
    t.s3.abort_multipart_upload(Bucket=name, Key="one", UploadId=upload)


@case
def multipart_errors(t):
    name = t.bucket("mpuerr")
    # A wrong ETag in Complete: InvalidPart; the upload stays.
    upload = t.s3.create_multipart_upload(Bucket=name, Key="k")["UploadId"]
    p1 = t.s3.upload_part(Bucket=name, Key="k", UploadId=upload, PartNumber=1, Body=part_body(1))
    p2 = t.s3.upload_part(Bucket=name, Key="k", UploadId=upload, PartNumber=2, Body=b"last")
    expect_error(
        "InvalidPart",
        t.s3.complete_multipart_upload,
        Bucket=name,
        Key="k",
        UploadId=upload,
        MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": f'"{md5_hex(b"other")}"'}, {"PartNumber": 2, "ETag": p2["ETag"]}]},
        status=400,
    )
    expect_error(
        "InvalidPart",
        t.s3.complete_multipart_upload,
        Bucket=name,
        Key="k",
        UploadId=upload,
        MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": p1["ETag"]}, {"PartNumber": 3, "ETag": p2["ETag"]}]},
        status=400,
    )
    expect_error("NoSuchKey", t.s3.get_object, Bucket=name, Key="k", status=404)
    eq(len(t.s3.list_parts(Bucket=name, Key="k", UploadId=upload)["Parts"]), 2, "parts after a refused Complete")
    done = t.s3.complete_multipart_upload(
        Bucket=name, Key="k", UploadId=upload, MultipartUpload={"Parts": complete_parts({1: p1, 2: p2})}
    )
    eq(done["ETag"], multipart_etag([part_body(1), b"last"]), "ETag after a refused Complete then a good one")
    # A part under 5 MiB that is not the last: EntityTooSmall.
    upload = t.s3.create_multipart_upload(Bucket=name, Key="small")["UploadId"]
    small = {
        n: t.s3.upload_part(Bucket=name, Key="small", UploadId=upload, PartNumber=n, Body=bytes([n]) * 1024) for n in (1, 2)
    }
    expect_error(
        "EntityTooSmall",
        t.s3.complete_multipart_upload,
        Bucket=name,
        Key="small",
        UploadId=upload,
        MultipartUpload={"Parts": complete_parts(small)},
        status=400,
    )
    expect_error("NoSuchKey", t.s3.get_object, Bucket=name, Key="small", status=404)
    # One small part alone is the last part: fine.
    done = t.s3.complete_multipart_upload(
        Bucket=name,
        Key="small",
        UploadId=upload,
        MultipartUpload={"Parts": [p for p in complete_parts(small) if p["PartNumber"] == 1]},
    )
    eq(t.s3.get_object(Bucket=name, Key="small")["Body"].read(), bytes([1]) * 1024, "a one-part upload")
    # Part numbers outside 1..10000.
    upload = t.s3.create_multipart_upload(Bucket=name, Key="nums")["UploadId"]
    for bad in (0, 10001):
        expect_error(
            ("InvalidArgument", "InvalidRequest"),
            t.s3.upload_part,
            Bucket=name,
            Key="nums",
            UploadId=upload,
            PartNumber=bad,
            Body=b"x",
            status=400,
        )
    # Complete with no parts.
    expect_error(
        ("MalformedXML", "InvalidRequest"),
        t.s3.complete_multipart_upload,
        Bucket=name,
        Key="nums",
        UploadId=upload,
        MultipartUpload={"Parts": []},
        status=400,
    )
    t.s3.abort_multipart_upload(Bucket=name, Key="nums", UploadId=upload)


@case
def multipart_upload_part_copy(t):
    name = t.bucket("mpucopy")
    source = os.urandom(6 * MIB)
    t.s3.put_object(Bucket=name, Key="source", Body=source)
    upload = t.s3.create_multipart_upload(Bucket=name, Key="assembled")["UploadId"]
    copied = t.s3.upload_part_copy(
        Bucket=name,
        Key="assembled",
        UploadId=upload,
        PartNumber=1,
        CopySource={"Bucket": name, "Key": "source"},
        CopySourceRange=f"bytes=0-{5 * MIB - 1}",
    )
    eq(copied["CopyPartResult"]["ETag"], f'"{md5_hex(source[: 5 * MIB])}"', "UploadPartCopy ETag")
    whole = t.s3.upload_part_copy(
        Bucket=name, Key="assembled", UploadId=upload, PartNumber=2, CopySource={"Bucket": name, "Key": "source"}
    )
    eq(whole["CopyPartResult"]["ETag"], f'"{md5_hex(source)}"', "UploadPartCopy of a whole object")
    tail = t.s3.upload_part(Bucket=name, Key="assembled", UploadId=upload, PartNumber=3, Body=b"tail")
    expect_error(
        "InvalidRange",
        t.s3.upload_part_copy,
        Bucket=name,
        Key="assembled",
        UploadId=upload,
        PartNumber=4,
        CopySource={"Bucket": name, "Key": "source"},
        CopySourceRange=f"bytes={6 * MIB}-{6 * MIB + 10}",
        status=416,
    )
    parts = [
        {"PartNumber": 1, "ETag": copied["CopyPartResult"]["ETag"]},
        {"PartNumber": 2, "ETag": whole["CopyPartResult"]["ETag"]},
        {"PartNumber": 3, "ETag": tail["ETag"]},
    ]
    done = t.s3.complete_multipart_upload(Bucket=name, Key="assembled", UploadId=upload, MultipartUpload={"Parts": parts})
    expected = source[: 5 * MIB] + source + b"tail"
    eq(done["ETag"], multipart_etag([source[: 5 * MIB], source, b"tail"]), "ETag of an UploadPartCopy upload")
    data = t.s3.get_object(Bucket=name, Key="assembled")["Body"].read()
    check(data == expected, f"UploadPartCopy object differs ({len(data)} bytes, {len(expected)} expected)")


@case
def transfer_manager(t):
    """boto3's own upload_fileobj/download_fileobj: multipart with threads."""
    from boto3.s3.transfer import TransferConfig

    name = t.bucket("transfer")
    data = os.urandom(17 * MIB + 123)
    config = TransferConfig(multipart_threshold=5 * MIB, multipart_chunksize=5 * MIB, max_concurrency=4)
    t.s3.upload_fileobj(io.BytesIO(data), name, "transfer/file.bin", Config=config)
    head = t.s3.head_object(Bucket=name, Key="transfer/file.bin")
    eq(head["ContentLength"], len(data), "size after upload_fileobj")
    check(head["ETag"].endswith('-4"'), f"ETag of a 4-part upload: {head['ETag']}")
    out = io.BytesIO()
    t.s3.download_fileobj(name, "transfer/file.bin", out, Config=config)
    check(out.getvalue() == data, "download_fileobj differs from what was uploaded")


def checksum_of(head, algorithm):
    return head.get(f"Checksum{algorithm}")


@case
def checksums_default_crc32(t):
    name = t.bucket("crc")
    data = os.urandom(10_000)
    # boto3's default: a CRC32 it computes itself (a header over plain HTTP).
    put = t.s3.put_object(Bucket=name, Key="default", Body=data)
    eq(put.get("ChecksumCRC32"), crc32_b64(data), "PutObject ChecksumCRC32 (default)")
    head = t.s3.head_object(Bucket=name, Key="default", ChecksumMode="ENABLED")
    eq(checksum_of(head, "CRC32"), crc32_b64(data), "HeadObject ChecksumCRC32")
    got = t.s3.get_object(Bucket=name, Key="default", ChecksumMode="ENABLED")
    eq(got.get("ChecksumCRC32"), crc32_b64(data), "GetObject ChecksumCRC32")
    eq(got["Body"].read(), data, "GetObject body with checksum mode (validated by boto3)")
    # Without checksum mode, no checksum header.
    head = t.s3.head_object(Bucket=name, Key="default")
    check(not checksum_of(head, "CRC32"), f"a checksum without x-amz-checksum-mode: {head.get('ChecksumCRC32')}")
    # As AWS is sent over TLS: aws-chunked, the CRC32 in a trailer.
    with https_for_checksums():
        trailing = t.client()
        put = trailing.put_object(Bucket=name, Key="trailer", Body=data)
    eq(put.get("ChecksumCRC32"), crc32_b64(data), "PutObject ChecksumCRC32 (trailer)")
    got = t.s3.get_object(Bucket=name, Key="trailer", ChecksumMode="ENABLED")
    eq(got["Body"].read(), data, "body sent aws-chunked")
    eq(got.get("ChecksumCRC32"), crc32_b64(data), "stored trailing CRC32")
    eq(got["ContentLength"], len(data), "ContentLength of an aws-chunked upload")
    eq(got["ETag"], f'"{md5_hex(data)}"', "ETag of an aws-chunked upload")


@case
def checksums_algorithms(t):
    name = t.bucket("algos")
    data = os.urandom(3000)
    for algorithm, compute in CHECKSUMS.items():
        for trailer in (False, True):
            key = f"{algorithm.lower()}-{'trailer' if trailer else 'header'}"
            if trailer:
                with https_for_checksums():
                    put = t.client().put_object(Bucket=name, Key=key, Body=data, ChecksumAlgorithm=algorithm)
            else:
                put = t.s3.put_object(Bucket=name, Key=key, Body=data, ChecksumAlgorithm=algorithm)
            eq(put.get(f"Checksum{algorithm}"), compute(data), f"PutObject Checksum{algorithm} ({key})")
            head = t.s3.head_object(Bucket=name, Key=key, ChecksumMode="ENABLED")
            eq(checksum_of(head, algorithm), compute(data), f"HeadObject Checksum{algorithm} ({key})")
            got = t.s3.get_object(Bucket=name, Key=key, ChecksumMode="ENABLED")
            eq(got["Body"].read(), data, f"body of {key}")
            eq(got.get(f"Checksum{algorithm}"), compute(data), f"GetObject Checksum{algorithm} ({key})")
    # A checksum value computed by the caller, sent as a header.
    t.s3.put_object(Bucket=name, Key="given", Body=data, ChecksumSHA256=sha256_b64(data))
    eq(
        t.s3.head_object(Bucket=name, Key="given", ChecksumMode="ENABLED").get("ChecksumSHA256"),
        sha256_b64(data),
        "a given SHA256",
    )


@case
def checksums_wrong(t):
    name = t.bucket("badsum")
    data = b"the real content"
    for algorithm, compute in CHECKSUMS.items():
        wrong = compute(b"something else")
        key = f"wrong-{algorithm.lower()}"
        expect_error(
            ("BadDigest", "InvalidRequest"),
            t.s3.put_object,
            Bucket=name,
            Key=key,
            Body=data,
            **{f"Checksum{algorithm}": wrong},
            status=400,
        )
        expect_error("404", t.s3.head_object, Bucket=name, Key=key, status=404)
    # A wrong checksum over an existing object leaves it as it was.
    t.s3.put_object(Bucket=name, Key="kept", Body=b"original")
    expect_error(
        ("BadDigest", "InvalidRequest"), t.s3.put_object, Bucket=name, Key="kept", Body=data, ChecksumCRC32=crc32_b64(b"x"), status=400
    )
    eq(t.s3.get_object(Bucket=name, Key="kept")["Body"].read(), b"original", "object after a refused overwrite")
    # A malformed checksum value.
    expect_error(("InvalidRequest", "InvalidArgument", "BadDigest"), t.s3.put_object, Bucket=name, Key="malformed", Body=data, ChecksumCRC32="not base64!", status=400)
    expect_error("404", t.s3.head_object, Bucket=name, Key="malformed", status=404)
    # A wrong trailing checksum (aws-chunked, unsigned payload), by hand.
    chunked = f"{len(data):x}\r\n".encode() + data + b"\r\n0\r\nx-amz-checksum-crc32:" + crc32_b64(b"nope").encode() + b"\r\n\r\n"
    headers = {
        "Content-Encoding": "aws-chunked",
        "x-amz-decoded-content-length": str(len(data)),
        "x-amz-trailer": "x-amz-checksum-crc32",
        "x-amz-sdk-checksum-algorithm": "CRC32",
        "Content-Length": str(len(chunked)),
    }
    status, _, body = t.signed("PUT", t.url(name, "trailer-wrong"), headers, chunked, trailer=True)
    check(status == 400 and xml_code(body) in ("BadDigest", "InvalidRequest"), f"wrong trailing CRC32: {status} {body[:300]!r}")
    expect_error("404", t.s3.head_object, Bucket=name, Key="trailer-wrong", status=404)
    # The same request with the right trailer is stored.
    chunked = chunked.replace(crc32_b64(b"nope").encode(), crc32_b64(data).encode())
    status, _, body = t.signed("PUT", t.url(name, "trailer-right"), headers, chunked, trailer=True)
    eq((status, body[:300]), (200, body[:300]), "a right trailing CRC32 by hand")
    eq(t.s3.get_object(Bucket=name, Key="trailer-right")["Body"].read(), data, "body of the hand-made aws-chunked PUT")
    # A multipart part with a wrong checksum.
    upload = t.s3.create_multipart_upload(Bucket=name, Key="mpu")["UploadId"]
    expect_error(
        ("BadDigest", "InvalidRequest"),
        t.s3.upload_part,
        Bucket=name,
        Key="mpu",
        UploadId=upload,
        PartNumber=1,
        Body=data,
        ChecksumSHA256=sha256_b64(b"x"),
        status=400,
    )
    eq(t.s3.list_parts(Bucket=name, Key="mpu", UploadId=upload).get("Parts", []), [], "parts after a bad checksum")
    t.s3.abort_multipart_upload(Bucket=name, Key="mpu", UploadId=upload)


@case
def checksums_multipart(t):
    name = t.bucket("mpusum")
    upload = t.s3.create_multipart_upload(Bucket=name, Key="k", ChecksumAlgorithm="SHA256")
    upload_id = upload["UploadId"]
    eq(upload.get("ChecksumAlgorithm"), "SHA256", "CreateMultipartUpload ChecksumAlgorithm")
    bodies = {1: part_body(3), 2: b"end"}
    parts = {}
    for n, b in bodies.items():
        parts[n] = t.s3.upload_part(Bucket=name, Key="k", UploadId=upload_id, PartNumber=n, Body=b, ChecksumAlgorithm="SHA256")
        eq(parts[n].get("ChecksumSHA256"), sha256_b64(b), f"UploadPart ChecksumSHA256 of part {n}")
    listed = t.s3.list_parts(Bucket=name, Key="k", UploadId=upload_id)["Parts"]
    eq([p.get("ChecksumSHA256") for p in listed], [sha256_b64(bodies[1]), sha256_b64(bodies[2])], "ListParts checksums")
    t.s3.complete_multipart_upload(Bucket=name, Key="k", UploadId=upload_id, MultipartUpload={"Parts": complete_parts(parts)})
    head = t.s3.head_object(Bucket=name, Key="k", ChecksumMode="ENABLED")
    composite = b64(hashlib.sha256(b"".join(hashlib.sha256(bodies[n]).digest() for n in (1, 2))).digest()) + "-2"
    eq(head.get("ChecksumSHA256"), composite, "composite SHA256 of a multipart object")
    data = t.s3.get_object(Bucket=name, Key="k")["Body"].read()
    check(data == bodies[1] + bodies[2], "multipart-with-checksums body differs")


@case
def content_md5(t):
    name = t.bucket("md5")
    data = b"content with an MD5"
    t.s3.put_object(Bucket=name, Key="good", Body=data, ContentMD5=b64(hashlib.md5(data).digest()))
    eq(t.s3.get_object(Bucket=name, Key="good")["Body"].read(), data, "body with a right Content-MD5")
    expect_error("BadDigest", t.s3.put_object, Bucket=name, Key="bad", Body=data, ContentMD5=b64(hashlib.md5(b"x").digest()), status=400)
    expect_error("404", t.s3.head_object, Bucket=name, Key="bad", status=404)
    expect_error("InvalidDigest", t.s3.put_object, Bucket=name, Key="bad", Body=data, ContentMD5="not-an-md5", status=400)
    expect_error("404", t.s3.head_object, Bucket=name, Key="bad", status=404)
    # UploadPart checks it too.
    upload = t.s3.create_multipart_upload(Bucket=name, Key="mpu")["UploadId"]
    expect_error(
        "BadDigest",
        t.s3.upload_part,
        Bucket=name,
        Key="mpu",
        UploadId=upload,
        PartNumber=1,
        Body=data,
        ContentMD5=b64(hashlib.md5(b"x").digest()),
        status=400,
    )
    t.s3.abort_multipart_upload(Bucket=name, Key="mpu", UploadId=upload)
    # DeleteObjects carries a Content-MD5 (or a checksum) boto3 computes: it works.
    t.s3.delete_objects(Bucket=name, Delete={"Objects": [{"Key": "good"}]})
    expect_error("404", t.s3.head_object, Bucket=name, Key="good", status=404)


@case
def presigned_urls(t):
    name = t.bucket("presign")
    data = os.urandom(2000)
    t.s3.put_object(Bucket=name, Key="dir/pre signed+😀", Body=data)
    url = t.s3.generate_presigned_url("get_object", Params={"Bucket": name, "Key": "dir/pre signed+😀"}, ExpiresIn=300)
    status, headers, body = fetch("GET", url)
    eq((status, body == data), (200, True), f"presigned GET {url}")
    # With a response override in the signed query.
    url = t.s3.generate_presigned_url(
        "get_object",
        Params={"Bucket": name, "Key": "dir/pre signed+😀", "ResponseContentDisposition": "attachment; filename=x.bin"},
        ExpiresIn=300,
    )
    status, headers, body = fetch("GET", url)
    eq((status, headers.get("content-disposition")), (200, "attachment; filename=x.bin"), "presigned GET with an override")
    # A tampered query is refused.
    status, _, body = fetch("GET", url.replace("x.bin", "y.bin"))
    eq(status, 403, "presigned GET with a tampered query")
    eq(xml_code(body), "SignatureDoesNotMatch", "code of a tampered presigned URL")
    # Presigned PUT.
    put_url = t.s3.generate_presigned_url("put_object", Params={"Bucket": name, "Key": "uploaded by url"}, ExpiresIn=300)
    status, headers, body = fetch("PUT", put_url, {"Content-Type": "application/octet-stream"}, data[:1000])
    eq(status, 200, f"presigned PUT: {body[:300]!r}")
    eq(headers.get("etag"), f'"{md5_hex(data[:1000])}"', "presigned PUT ETag")
    eq(t.s3.get_object(Bucket=name, Key="uploaded by url")["Body"].read(), data[:1000], "object PUT by a presigned URL")
    # A presigned GET is not a presigned PUT.
    status, _, _ = fetch("PUT", url, {}, b"nope")
    eq(status, 403, "presigned GET URL used for a PUT")
    # Expired.
    expired = t.s3.generate_presigned_url("get_object", Params={"Bucket": name, "Key": "dir/pre signed+😀"}, ExpiresIn=1)
    time.sleep(2.5)
    status, _, body = fetch("GET", expired)
    eq(status, 403, f"expired presigned GET: {body[:300]!r}")
    eq(xml_code(body), "AccessDenied", "code of an expired presigned URL")
    # Signed with a wrong secret.
    bad = t.client(secret="wrong-" + t.secret).generate_presigned_url(
        "get_object", Params={"Bucket": name, "Key": "dir/pre signed+😀"}, ExpiresIn=300
    )
    status, _, body = fetch("GET", bad)
    eq((status, xml_code(body)), (403, "SignatureDoesNotMatch"), "presigned URL with a wrong secret")
    # No signature at all, once users exist, is refused.


@case
def credentials_refused(t):
    name = t.bucket("creds")
    t.s3.put_object(Bucket=name, Key="k", Body=b"secret")
    wrong = t.client(secret=t.secret + "x")
    expect_error("SignatureDoesNotMatch", wrong.get_object, Bucket=name, Key="k", status=403)
    expect_error("SignatureDoesNotMatch", wrong.put_object, Bucket=name, Key="k", Body=b"overwritten", status=403)
    expect_error("SignatureDoesNotMatch", wrong.list_buckets, status=403)
    unknown = t.client(access_key="AKIAUNKNOWNKEY000000", secret=t.secret)
    expect_error("InvalidAccessKeyId", unknown.get_object, Bucket=name, Key="k", status=403)
    expect_error("InvalidAccessKeyId", unknown.list_buckets, status=403)
    eq(t.s3.get_object(Bucket=name, Key="k")["Body"].read(), b"secret", "object after refused writes")


@case
def payload_hash_mismatch(t):
    """A body that is not the one x-amz-content-sha256 signed:
    XAmzContentSHA256Mismatch (AWS), nothing stored."""
    name = t.bucket("tamper")
    data = b"signed body"
    request = AWSRequest(method="PUT", url=t.url(name, "tampered"), data=data)
    S3SigV4Auth(Credentials(t.access_key, t.secret), "s3", t.region).add_auth(request)
    status, _, body = fetch("PUT", t.url(name, "tampered"), dict(request.headers.items()), b"signed bodx")
    check(status in (400, 403), f"a body not matching x-amz-content-sha256: {status} {body[:300]!r}")
    check(xml_code(body) in ("XAmzContentSHA256Mismatch", "SignatureDoesNotMatch", "BadDigest"), f"code: {body[:300]!r}")
    expect_error("404", t.s3.head_object, Bucket=name, Key="tampered", status=404)


def sigv4_streaming_put(t, url, data, chunk_size, trailer=None, tamper=None):
    """PUT `data` signed chunk by chunk (STREAMING-AWS4-HMAC-SHA256-PAYLOAD,
    or ...-PAYLOAD-TRAILER with `trailer` = (header, value)), as the Java and
    Go SDKs v1 and minio-go send over plain HTTP; written by hand from the
    SigV4 documentation. `tamper` changes one byte of the second chunk after
    signing. Returns (status, body)."""
    import hmac

    def h(data):
        return hashlib.sha256(data).hexdigest()

    def mac(key, msg):
        return hmac.new(key, msg.encode(), hashlib.sha256).digest()

    now = datetime.datetime.now(datetime.timezone.utc)
    amz_date, day = now.strftime("%Y%m%dT%H%M%SZ"), now.strftime("%Y%m%d")
    scope = f"{day}/{t.region}/s3/aws4_request"
    key = mac(mac(mac(mac(f"AWS4{t.secret}".encode(), day), t.region), "s3"), "aws4_request")
    parts = urllib.parse.urlsplit(url)
    mode = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD" + ("-TRAILER" if trailer else "")
    chunks = [data[i : i + chunk_size] for i in range(0, len(data), chunk_size)] + [b""]

    def frame(chunk, signature):
        return f"{len(chunk):x};chunk-signature={signature}\r\n".encode() + chunk + (b"\r\n" if chunk or not trailer else b"")

    # The encoded length must be known before signing: frame with dummy signatures.
    trailer_block = f"{trailer[0]}:{trailer[1]}\r\n".encode() + b"x-amz-trailer-signature:" + b"0" * 64 + b"\r\n\r\n" if trailer else b""
    length = sum(len(frame(c, "0" * 64)) for c in chunks) + len(trailer_block)
    headers = {
        "host": parts.netloc,
        "x-amz-content-sha256": mode,
        "x-amz-date": amz_date,
        "x-amz-decoded-content-length": str(len(data)),
        "content-encoding": "aws-chunked",
        "content-length": str(length),
    }
    if trailer:
        headers["x-amz-trailer"] = trailer[0]
    signed = sorted(headers)
    canonical = "\n".join(
        [
            "PUT",
            parts.path,
            "",
            "".join(f"{k}:{headers[k]}\n" for k in signed),
            ";".join(signed),
            mode,
        ]
    )
    previous = hmac.new(key, f"AWS4-HMAC-SHA256\n{amz_date}\n{scope}\n{h(canonical.encode())}".encode(), hashlib.sha256).hexdigest()
    headers["authorization"] = (
        f"AWS4-HMAC-SHA256 Credential={t.access_key}/{scope}, SignedHeaders={';'.join(signed)}, Signature={previous}"
    )
    body = b""
    for n, chunk in enumerate(chunks):
        to_sign = f"AWS4-HMAC-SHA256-PAYLOAD\n{amz_date}\n{scope}\n{previous}\n{h(b'')}\n{h(chunk)}"
        previous = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
        if tamper and n == 1:
            chunk = bytes([chunk[0] ^ 1]) + chunk[1:]
        body += frame(chunk, previous)
    if trailer:
        lines = f"{trailer[0]}:{trailer[1]}\n"
        to_sign = f"AWS4-HMAC-SHA256-TRAILER\n{amz_date}\n{scope}\n{previous}\n{h(lines.encode())}"
        signature = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
        body += f"{trailer[0]}:{trailer[1]}\r\n".encode() + f"x-amz-trailer-signature:{signature}\r\n\r\n".encode()
    check(len(body) == length, f"encoded length {len(body)} != {length}")
    headers.pop("host")
    status, _, answer = fetch("PUT", url, headers, body)
    return status, answer


@case
def signed_streaming_chunks(t):
    """aws-chunked bodies with a signature per chunk (and per trailer): each
    chunk checked, a tampered one refused, nothing stored."""
    name = t.bucket("chunks")
    data = os.urandom(200_000)
    status, answer = sigv4_streaming_put(t, t.url(name, "signed chunks"), data, 64 * 1024)
    eq((status, answer[:300]), (200, answer[:300]), "a PUT in signed chunks")
    got = t.s3.get_object(Bucket=name, Key="signed chunks")
    eq(got["Body"].read() == data, True, "the body of a PUT in signed chunks")
    eq(got["ETag"], f'"{md5_hex(data)}"', "ETag of a PUT in signed chunks")
    status, answer = sigv4_streaming_put(t, t.url(name, "empty"), b"", 64 * 1024)
    eq((status, answer[:300]), (200, answer[:300]), "an empty PUT in signed chunks")
    eq(t.s3.head_object(Bucket=name, Key="empty")["ContentLength"], 0, "an empty PUT in signed chunks")
    # Signed chunks with a signed trailing checksum.
    status, answer = sigv4_streaming_put(
        t, t.url(name, "with trailer"), data, 64 * 1024, trailer=("x-amz-checksum-crc32", crc32_b64(data))
    )
    eq((status, answer[:300]), (200, answer[:300]), "signed chunks with a signed trailer")
    got = t.s3.get_object(Bucket=name, Key="with trailer", ChecksumMode="ENABLED")
    eq(got["Body"].read() == data, True, "the body of signed chunks with a trailer")
    eq(got.get("ChecksumCRC32"), crc32_b64(data), "the trailing CRC32 kept")
    status, answer = sigv4_streaming_put(
        t, t.url(name, "wrong trailer"), data, 64 * 1024, trailer=("x-amz-checksum-crc32", crc32_b64(b"other"))
    )
    check(status == 400 and xml_code(answer) in ("BadDigest", "InvalidRequest"), f"a wrong signed trailer: {status} {answer[:300]!r}")
    expect_error("404", t.s3.head_object, Bucket=name, Key="wrong trailer", status=404)


@case
def signed_chunk_tampered(t):
    """A chunk changed after signing: SignatureDoesNotMatch (403, as AWS), nothing stored."""
    name = t.bucket("tamperchunk")
    data = os.urandom(200_000)
    status, answer = sigv4_streaming_put(t, t.url(name, "tampered"), data, 64 * 1024, tamper=True)
    expect_error("404", t.s3.head_object, Bucket=name, Key="tampered", status=404)
    check(status == 403 and xml_code(answer) == "SignatureDoesNotMatch", f"a tampered chunk: {status} {answer[:300]!r}")


def sigv4_at(t, method, url, when, body=b""):
    """Headers of a SigV4 request signed as if at `when` (by hand, from the
    SigV4 documentation), for clock-skew checks."""
    import hmac

    def mac(key, msg):
        return hmac.new(key, msg.encode(), hashlib.sha256).digest()

    amz_date, day = when.strftime("%Y%m%dT%H%M%SZ"), when.strftime("%Y%m%d")
    scope = f"{day}/{t.region}/s3/aws4_request"
    key = mac(mac(mac(mac(f"AWS4{t.secret}".encode(), day), t.region), "s3"), "aws4_request")
    parts = urllib.parse.urlsplit(url)
    payload = hashlib.sha256(body).hexdigest()
    headers = {"host": parts.netloc, "x-amz-content-sha256": payload, "x-amz-date": amz_date}
    signed = sorted(headers)
    query = "&".join(sorted(parts.query.split("&"))) if parts.query else ""
    canonical = "\n".join([method, parts.path, query, "".join(f"{k}:{headers[k]}\n" for k in signed), ";".join(signed), payload])
    to_sign = f"AWS4-HMAC-SHA256\n{amz_date}\n{scope}\n{hashlib.sha256(canonical.encode()).hexdigest()}"
    signature = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
    headers["authorization"] = f"AWS4-HMAC-SHA256 Credential={t.access_key}/{scope}, SignedHeaders={';'.join(signed)}, Signature={signature}"
    headers.pop("host")
    return headers


@case
def clock_skew(t):
    """A request signed 20 minutes ago or ahead: RequestTimeTooSkewed (403);
    one signed now by the same code: served."""
    name = t.bucket("skew")
    t.s3.put_object(Bucket=name, Key="k", Body=b"skew")
    now = datetime.datetime.now(datetime.timezone.utc)
    url = t.url(name, "k")
    status, _, body = fetch("GET", url, sigv4_at(t, "GET", url, now))
    eq((status, body), (200, b"skew"), "a GET signed now by hand")
    for offset in (-20, 20):
        status, _, body = fetch("GET", url, sigv4_at(t, "GET", url, now + datetime.timedelta(minutes=offset)))
        eq((status, xml_code(body)), (403, "RequestTimeTooSkewed"), f"a GET signed {offset} minutes off")


@case
def presign_longer_than_a_week(t):
    """A presigned URL valid for more than 7 days is refused (AWS:
    AuthorizationQueryParametersError, 400): a leaked URL must not work for months."""
    name = t.bucket("week")
    t.s3.put_object(Bucket=name, Key="k", Body=b"week")
    week = t.s3.generate_presigned_url("get_object", Params={"Bucket": name, "Key": "k"}, ExpiresIn=8 * 24 * 3600)
    status, _, body = fetch("GET", week)
    check(status in (400, 403) and xml_code(body) in ("AuthorizationQueryParametersError", "AccessDenied", "InvalidArgument"), f"a presigned URL for 8 days: {status} {body[:300]!r}")


@case
def cut_body_stores_nothing(t):
    """A PUT whose connection ends before Content-Length bytes came (and one
    cut inside an aws-chunked body): nothing stored, the old object kept."""
    name = t.bucket("cut")
    t.s3.put_object(Bucket=name, Key="kept", Body=b"before")
    host, port = urllib.parse.urlsplit(t.endpoint).netloc.rsplit(":", 1)
    for key, chunked in (("control", False), ("new", False), ("kept", False), ("chunked", True)):
        path = urllib.parse.urlsplit(t.url(name, key)).path
        request = AWSRequest(method="PUT", url=t.url(name, key), headers={"x-amz-content-sha256": "UNSIGNED-PAYLOAD"})
        if chunked:
            request.context["checksum"] = {"request_algorithm": {"in": "trailer"}}
            request.headers["Content-Encoding"] = "aws-chunked"
            request.headers["x-amz-decoded-content-length"] = "100000"
            request.headers["x-amz-trailer"] = "x-amz-checksum-crc32"
        auth = S3SigV4Auth(Credentials(t.access_key, t.secret), "s3", t.region)
        auth._should_sha256_sign_payload = lambda request: False
        auth.add_auth(request)
        lines = [f"PUT {path} HTTP/1.1", f"Host: {host}:{port}"] + [f"{k}: {v}" for k, v in request.headers.items()]
        # The control sends its whole body: the request is good but for its end.
        body = (f"{100000:x}\r\n".encode() + b"c" * 50000) if chunked else b"c" * (100000 if key == "control" else 50000)
        lines.append(f"Content-Length: {100000 + 200 if chunked else 100000}")
        with socket.create_connection((host, int(port)), timeout=10) as sock:
            sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode() + body)
            sock.shutdown(socket.SHUT_WR)
            try:
                while sock.recv(65536):
                    pass
            except OSError:
                pass
    time.sleep(0.5)
    eq(t.s3.head_object(Bucket=name, Key="control")["ContentLength"], 100000, "the same request with its whole body")
    expect_error("404", t.s3.head_object, Bucket=name, Key="new", status=404)
    expect_error("404", t.s3.head_object, Bucket=name, Key="chunked", status=404)
    eq(t.s3.get_object(Bucket=name, Key="kept")["Body"].read(), b"before", "an object after a cut overwrite")


@case
def anonymous_refused(t):
    """Checked only when the suite runs as a user (`--users`)."""
    if not ARGS.users:
        print("  (skipped: no users)")
        return
    name = t.bucket("anon")
    t.s3.put_object(Bucket=name, Key="k", Body=b"private")
    anonymous = t.client(unsigned=True)
    expect_error("AccessDenied", anonymous.get_object, Bucket=name, Key="k", status=403)
    expect_error("AccessDenied", anonymous.put_object, Bucket=name, Key="new", Body=b"x", status=403)
    expect_error("AccessDenied", anonymous.list_objects_v2, Bucket=name, status=403)
    status, _, body = fetch("GET", t.url(name, "k"))
    eq((status, xml_code(body)), (403, "AccessDenied"), "plain unsigned GET")


@case
def refused_before_the_body_then_reused(t):
    """boto3 sends PUTs with `Expect: 100-continue` and, answered at once with
    an error, never sends the body. The connection must then serve the next
    request as sent (or be closed): not eat its first bytes as that body."""
    name = t.bucket("expect")
    upload = t.s3.create_multipart_upload(Bucket=name, Key="k")["UploadId"]
    failures = []
    for _ in range(200):
        try:
            t.s3.upload_part(Bucket=name, Key="k", UploadId=upload, PartNumber=0, Body=b"x")
            failures.append(("PartNumber=0", "served"))
        except ClientError as exc:
            if error_of(exc)[0] != "InvalidArgument":
                failures.append(("PartNumber=0",) + error_of(exc))
        try:
            t.s3.upload_part(Bucket=name, Key="k", UploadId=upload, PartNumber=1, Body=b"y")
        except ClientError as exc:
            failures.append(("PartNumber=1",) + error_of(exc))
    # The same by hand, with no pause between the 400 and the next request:
    # the server must close the connection, or read the next request as sent.
    host, port = urllib.parse.urlsplit(t.endpoint).netloc.rsplit(":", 1)

    def head(part):
        path = f"/{name}/k?uploadId={upload}&partNumber={part}"
        request = AWSRequest(method="PUT", url=f"{t.endpoint}{path}", data=b"x")
        S3SigV4Auth(Credentials(t.access_key, t.secret), "s3", t.region).add_auth(request)
        lines = [f"PUT {path} HTTP/1.1", f"Host: {host}:{port}"]
        lines += [f"{k}: {v}" for k, v in request.headers.items()]
        lines += ["Expect: 100-continue", "Content-Length: 1", "", ""]
        return "\r\n".join(lines).encode()

    def status_line(sock):
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = sock.recv(65536)
            if not chunk:
                return "closed"
            data += chunk
        return data.split(b"\r\n")[0].decode()

    raw = []
    for _ in range(100):
        with socket.create_connection((host, int(port)), timeout=10) as sock:
            # A good part first, as on a connection boto3 reuses.
            sock.sendall(head(1))
            eq(status_line(sock), "HTTP/1.1 100 Continue", "a part's 100 Continue")
            sock.sendall(b"x")
            eq(status_line(sock), "HTTP/1.1 200 OK", "a part's answer")
            sock.sendall(head(0))
            first = status_line(sock)
            try:
                sock.sendall(head(1))
                second = status_line(sock)
            except OSError as exc:
                second = type(exc).__name__
            if not first.startswith("HTTP/1.1 400") or second not in ("closed", "HTTP/1.1 100 Continue", "ConnectionResetError", "BrokenPipeError"):
                raw.append((first, second))
    t.s3.abort_multipart_upload(Bucket=name, Key="k", UploadId=upload)
    check(
        not failures and not raw,
        f"boto3: {len(failures)} of 400 answers wrong {failures[:2]}; "
        f"by hand: {len(raw)} of 100 connections read the next request wrong {raw[:2]}",
    )


@case
def keys_a_tree_cannot_hold(t):
    """Keys S3 allows that a file tree may not: stored and read back as
    themselves, or refused with a 4xx; never a 5xx, never elsewhere."""
    name = t.bucket("strange")
    other = t.bucket("strange-other")
    for key in ["a//b", "./dot", "x/./y", "x/../y", "../strange-other/escaped", "..", ".", "trailing/", "/leading", "sp /ace ", "tab\tkey", "nul-free\u00a0nbsp", "enc%2Fslash", "enc%2e%2e", "back\\slash"]:
        try:
            t.s3.put_object(Bucket=name, Key=key, Body=b"strange")
        except ClientError as exc:
            code, status, message = error_of(exc)
            check(status is not None and 400 <= status < 500, f"PUT {key!r}: {code} ({status}) {message}")
            continue
        got = t.s3.get_object(Bucket=name, Key=key)
        eq(got["Body"].read(), b"strange", f"GET {key!r} after its PUT")
        keys = [o["Key"] for o in t.s3.list_objects_v2(Bucket=name).get("Contents", [])]
        check(key in keys, f"{key!r} stored but listed as {keys}")
        t.s3.delete_object(Bucket=name, Key=key)
    eq(t.s3.list_objects_v2(Bucket=other).get("KeyCount"), 0, "objects that escaped into another bucket")
    # A file and a folder of one name cannot both exist in a tree: a 4xx, not a 5xx.
    t.s3.put_object(Bucket=name, Key="node/child", Body=b"x")
    for key in ("node", "node/child/grandchild"):
        try:
            t.s3.put_object(Bucket=name, Key=key, Body=b"y")
        except ClientError as exc:
            code, status, message = error_of(exc)
            check(status is not None and 400 <= status < 500, f"PUT {key!r} beside node/child: {code} ({status}) {message}")
    eq(t.s3.get_object(Bucket=name, Key="node/child")["Body"].read(), b"x", "node/child after the clashing PUTs")


@case
def unicode_forms_and_case_are_distinct_keys(t):
    """S3 keys are bytes: NFC and NFD spellings, and letter case, are different keys."""
    import unicodedata

    name = t.bucket("forms")
    nfc = unicodedata.normalize("NFC", "café/crème")
    nfd = unicodedata.normalize("NFD", "café/crème")
    check(nfc != nfd, "test setup: NFC == NFD")
    keys = {nfc: b"composed", nfd: b"decomposed", "Case": b"upper", "case": b"lower"}
    for key, body in keys.items():
        t.s3.put_object(Bucket=name, Key=key, Body=body)
    for key, body in keys.items():
        eq(t.s3.get_object(Bucket=name, Key=key)["Body"].read(), body, f"body of {key!r}")
    listed = [o["Key"] for o in t.s3.list_objects_v2(Bucket=name)["Contents"]]
    eq(listed, sorted(keys, key=lambda k: k.encode()), "NFC, NFD and case listed apart")


@case
def a_long_segment(t):
    """One path segment over 255 bytes (S3 allows 1024 for the whole key):
    stored and read back, or a 4xx; never a 5xx."""
    name = t.bucket("longseg")
    key = "dir/" + "s" * 300
    try:
        t.s3.put_object(Bucket=name, Key=key, Body=b"long")
    except ClientError as exc:
        code, status, message = error_of(exc)
        check(status is not None and 400 <= status < 500, f"PUT of a 300-byte segment: {code} ({status}) {message}")
        return
    eq(t.s3.get_object(Bucket=name, Key=key)["Body"].read(), b"long", "a 300-byte segment")
    eq([o["Key"] for o in t.s3.list_objects_v2(Bucket=name)["Contents"]], [key], "a 300-byte segment listed")


@case
def listing_past_a_thousand(t):
    """1,500 keys: pages of 1,000 at most, MaxKeys over 1,000 is 1,000, every key once."""
    from concurrent.futures import ThreadPoolExecutor

    name = t.bucket("many")
    keys = [f"k/{i:05d}" for i in range(1500)]
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda k: t.s3.put_object(Bucket=name, Key=k, Body=b""), keys))
    first = t.s3.list_objects_v2(Bucket=name)
    eq((first["KeyCount"], first["IsTruncated"]), (1000, True), "the first page by default")
    big = t.s3.list_objects_v2(Bucket=name, MaxKeys=5000)
    eq(big["KeyCount"], 1000, "MaxKeys=5000 gives 1,000")
    pages = pages_v2(t, Bucket=name)
    eq(flatten(pages)[0], keys, "every key once, in order")
    v1 = list(t.s3.get_paginator("list_objects").paginate(Bucket=name))
    eq([o["Key"] for p in v1 for o in p.get("Contents", [])], keys, "v1: every key once, in order")
    answer = t.s3.delete_objects(Bucket=name, Delete={"Objects": [{"Key": k} for k in keys[:1000]], "Quiet": True})
    eq(answer.get("Errors", []), [], "deleting 1,000 at once")
    eq(t.s3.list_objects_v2(Bucket=name)["KeyCount"], 500, "500 left")


@case
def concurrent_writes_to_one_key(t):
    """Eight PUTs of one key at once: the object is one of them whole, its
    ETag and length those of that one."""
    from concurrent.futures import ThreadPoolExecutor

    name = t.bucket("race")
    bodies = [bytes([i]) * (100_000 + i * 37_000) for i in range(8)]

    def put(body):
        client = t.client()
        return client.put_object(Bucket=name, Key="contended", Body=body)["ETag"]

    with ThreadPoolExecutor(8) as pool:
        etags = list(pool.map(put, bodies))
    eq(etags, [f'"{md5_hex(b)}"' for b in bodies], "each PUT's own ETag")
    got = t.s3.get_object(Bucket=name, Key="contended")
    data = got["Body"].read()
    check(data in bodies, f"the object is none of the bodies whole ({len(data)} bytes)")
    eq(got["ETag"], f'"{md5_hex(data)}"', "the ETag of what is stored")
    eq(got["ContentLength"], len(data), "the length of what is stored")


@case
def read_while_overwritten(t):
    """A GET in progress while the key is replaced: the old content whole (or
    an error), never a mix; afterwards the new content."""
    import threading

    name = t.bucket("overwrite")
    old, new = b"o" * (8 * MIB), b"n" * (8 * MIB)
    t.s3.put_object(Bucket=name, Key="k", Body=old)
    got = t.s3.get_object(Bucket=name, Key="k")
    first = got["Body"].read(1 << 20)
    writer = threading.Thread(target=lambda: t.client().put_object(Bucket=name, Key="k", Body=new))
    writer.start()
    writer.join()
    try:
        rest = got["Body"].read()
        data = first + rest
        check(data == old, f"a read across an overwrite mixed contents ({data.count(b'o')} old, {data.count(b'n')} new bytes)")
    except Exception as exc:  # noqa: BLE001 - a cut read is allowed, a mixed one is not
        print(f"  (the read in progress ended: {type(exc).__name__})")
    eq(t.s3.get_object(Bucket=name, Key="k")["Body"].read() == new, True, "the new content after the overwrite")


@case
def unsupported_operations_say_so(t):
    """Operations outside the spec (ACLs, tagging, policies, lifecycle,
    CORS...): NotImplemented (501) or another 4xx, never a 5xx that a client
    would retry, never a silent success that changes nothing. (Versioning is
    served: versions_suite.py holds it to S3's rules.)"""
    name = t.bucket("unsupported")
    t.s3.put_object(Bucket=name, Key="k", Body=b"x")
    calls = {
        "GetObjectTagging": lambda: t.s3.get_object_tagging(Bucket=name, Key="k"),
        "PutObjectTagging": lambda: t.s3.put_object_tagging(Bucket=name, Key="k", Tagging={"TagSet": [{"Key": "a", "Value": "b"}]}),
        "GetBucketPolicy": lambda: t.s3.get_bucket_policy(Bucket=name),
        "PutBucketLifecycleConfiguration": lambda: t.s3.put_bucket_lifecycle_configuration(
            Bucket=name, LifecycleConfiguration={"Rules": [{"ID": "r", "Status": "Enabled", "Filter": {"Prefix": ""}, "Expiration": {"Days": 1}}]}
        ),
        "GetBucketCors": lambda: t.s3.get_bucket_cors(Bucket=name),
        "PutObjectAcl": lambda: t.s3.put_object_acl(Bucket=name, Key="k", ACL="public-read"),
    }
    outcomes = {}
    for op, call in calls.items():
        try:
            result = call()
            outcomes[op] = ("served", result["ResponseMetadata"]["HTTPStatusCode"])
        except ClientError as exc:
            code, status, _ = error_of(exc)
            outcomes[op] = (code, status)
    bad = {op: o for op, o in outcomes.items() if o[1] is None or o[1] >= 500 and o[1] != 501}
    check(not bad, f"unsupported operations answered with a 5xx: {bad} (all: {outcomes})")
    # A public-read ACL must not have made the object public.
    status, _, _ = fetch("GET", t.url(name, "k"))
    check(status == 403 or not ARGS.users, f"an unsigned GET after PutObjectAcl public-read: {status}")
    print(f"  {outcomes}")


@case
def long_keys(t):
    name = t.bucket("long")
    key = "/".join(["segment%02d" % i for i in range(40)]) + "/" + "x" * 200
    check(len(key.encode()) <= 1024, "test key too long")
    t.s3.put_object(Bucket=name, Key=key, Body=b"deep")
    eq(t.s3.get_object(Bucket=name, Key=key)["Body"].read(), b"deep", "a 40-level key")
    eq([o["Key"] for o in t.s3.list_objects_v2(Bucket=name)["Contents"]], [key], "listing a deep key")
    # Over 1024 bytes: KeyTooLongError.
    expect_error("KeyTooLongError", t.s3.put_object, Bucket=name, Key="k" * 1025, Body=b"x", status=400)


def main():
    global ARGS
    parser = argparse.ArgumentParser()
    parser.add_argument("--endpoint", required=True)
    parser.add_argument("--access-key", required=True)
    parser.add_argument("--secret", required=True)
    parser.add_argument("--prefix", help="bucket name prefix (random by default)")
    parser.add_argument("--users", action="store_true", help="the gateway has users: unsigned requests are refused")
    parser.add_argument(
        "--virtual-host",
        metavar="DOMAIN",
        help="address buckets as BUCKET.DOMAIN (the endpoint's host must be DOMAIN; "
        "every name under DOMAIN resolves to the endpoint's address)",
    )
    parser.add_argument("--only", action="append", help="run only these cases")
    parser.add_argument("--skip", action="append", default=[], help="run every case but these")
    parser.add_argument("--keep-going", action="store_true", help="run every case, list the failures at the end")
    ARGS = parser.parse_args()
    for var in ("AWS_CA_BUNDLE", "AWS_PROFILE", "AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE"):
        os.environ.pop(var, None)
    if ARGS.virtual_host:
        resolve_under(ARGS.virtual_host)
    t = Suite(ARGS)
    failures = []
    started = time.monotonic()
    try:
        for fn in CASES:
            if (ARGS.only and fn.__name__ not in ARGS.only) or fn.__name__ in ARGS.skip:
                continue
            case_start = time.monotonic()
            try:
                fn(t)
            except Failure as exc:
                print(f"FAIL {fn.__name__}: {exc}", flush=True)
                failures.append(fn.__name__)
            except ClientError as exc:
                code, status, message = error_of(exc)
                print(
                    f"FAIL {fn.__name__}: unexpected {code} ({status}) from {exc.operation_name}: {message}\n"
                    f"{traceback.format_exc()}",
                    flush=True,
                )
                failures.append(fn.__name__)
            except Exception:  # noqa: BLE001 - every other failure is a failure too
                print(f"FAIL {fn.__name__}:\n{traceback.format_exc()}", flush=True)
                failures.append(fn.__name__)
            else:
                print(f"ok {fn.__name__} ({time.monotonic() - case_start:.1f}s)", flush=True)
                continue
            if not ARGS.keep_going:
                break
    finally:
        t.cleanup()
    print(f"{len(failures)} failed: {' '.join(failures)}" if failures else f"all passed in {time.monotonic() - started:.1f}s")
    sys.exit(1 if failures else 0)


ARGS = None

if __name__ == "__main__":
    main()
