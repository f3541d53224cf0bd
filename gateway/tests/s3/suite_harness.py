"""What the boto3 conformance suites of this folder share.

versions_suite.py, object_lock_suite.py, lifecycle_suite.py and
browser_suite.py each hold their own cases and the helpers only they need;
this module holds the rest. tests/browser/cross_origin.py (one bucket, a
browser to start, a deadline) takes its checks, its bucket cleanup and the
running of one case from here and keeps its own main.

  - the checks a case makes (`fail`, `check`, `eq`, `expect_error`, the
    answer's status and headers) and the exceptions that end a case
    (`Failure`, and `Skipped` for a case the run's options leave out);
  - `BaseSuite`, the run's state handed to every case: a boto3 client for
    the endpoint, buckets named `<prefix>-<what>` under a random prefix (so
    two runs against one server do not meet), and the cleanup that deletes
    every unfinished upload, version and delete marker of each, then the
    bucket (bypassing governance retention in buckets made with object lock);
  - `case_registry`, the list of cases in the order they are defined;
  - `main`: the options every suite takes (--endpoint --access-key --secret
    --prefix --only --skip --keep-going, and a suite's own), then one line a
    case (`ok <case> (Ns)`, `skip <case> (why)`, or `FAIL <case>: ...` with
    what was sent, expected and answered), stopping at the first failure
    unless --keep-going, and last `all passed in Ns` or `N failed: <cases>`
    (`run_case` and `summary` are its parts).

Each suite runs as a script (`python path/to/x_suite.py ...`), so Python
finds this module beside it.
"""

import argparse
import hashlib
import os
import random
import string
import sys
import time
import traceback
import urllib.parse

import boto3
from botocore import UNSIGNED
from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.config import Config
from botocore.credentials import Credentials
from botocore.exceptions import ClientError

# ---------------------------------------------------------------------------
# Checks.


class Failure(Exception):
    pass


class Skipped(Exception):
    """A case that cannot run with this run's options (printed `skip <case> (why)`, not a failure)."""


def fail(message):
    raise Failure(message)


def check(condition, message):
    if not condition:
        fail(message)


def eq(got, expected, what):
    if got != expected:
        fail(f"{what}: expected {expected!r}, got {got!r}")


def md5_hex(data):
    return hashlib.md5(data).hexdigest()


def etag_of(data):
    return f'"{md5_hex(data)}"'


def error_of(exc):
    err = exc.response.get("Error", {})
    meta = exc.response.get("ResponseMetadata", {})
    return err.get("Code"), meta.get("HTTPStatusCode"), err.get("Message")


def headers_of(response):
    """The answer's headers (names lower case), from a boto3 result or a ClientError."""
    if isinstance(response, ClientError):
        response = response.response
    return response.get("ResponseMetadata", {}).get("HTTPHeaders", {})


def status_of(response):
    return response.get("ResponseMetadata", {}).get("HTTPStatusCode")


def expect_error(codes, fn, *args, status=None, **kwargs):
    """Call fn; it must fail with one of `codes` (and `status` if given). Returns the ClientError."""
    if isinstance(codes, str):
        codes = (codes,)
    try:
        result = fn(*args, **kwargs)
    except ClientError as exc:
        code, got_status, message = error_of(exc)
        if code not in codes or (status is not None and got_status != status):
            fail(
                f"{fn.__name__}({show_call(args, kwargs)}): expected {'/'.join(codes)}"
                f"{'' if status is None else f' ({status})'}, got {code} ({got_status}): {message}"
            )
        return exc
    meta = result.get("ResponseMetadata", {}) if isinstance(result, dict) else {}
    fail(
        f"{fn.__name__}({show_call(args, kwargs)}): expected {'/'.join(codes)}"
        f"{'' if status is None else f' ({status})'}, but it succeeded with {meta.get('HTTPStatusCode')}"
    )


def show_call(args, kwargs):
    """A call's arguments as a failure message shows them (long values cut short)."""

    def short(v):
        if isinstance(v, (bytes, bytearray)) and len(v) > 40:
            return f"<{len(v)} bytes>"
        text = repr(v)
        return text if len(text) <= 300 else text[:300] + "…"

    parts = [short(a) for a in args] + [f"{k}={short(v)}" for k, v in kwargs.items()]
    return ", ".join(parts)


def lacks_header(response, name, what):
    got = headers_of(response).get(name)
    if got is not None:
        fail(f"{what}: header {name} must be absent, got {got!r}")


# ---------------------------------------------------------------------------
# The run's state: the client, the buckets, their cleanup.


class BaseSuite:
    """What every case gets as `t`. A suite subclasses it, naming its bucket
    prefix (PREFIX, followed by 8 random characters unless --prefix) and
    adding what its own cases need."""

    PREFIX = "s3"
    READ_TIMEOUT = 60

    def __init__(self, args):
        self.endpoint = args.endpoint.rstrip("/")
        self.access_key = args.access_key
        self.secret = args.secret
        self.region = "us-east-1"
        self.prefix = args.prefix or self.PREFIX + "".join(
            random.choice(string.ascii_lowercase + string.digits) for _ in range(8)
        )
        self.s3 = self.client()
        self.buckets = []
        # Buckets where object lock is (or may have been) turned on: their cleanup bypasses governance.
        self.locked = set()

    def client(self, unsigned=False):
        cfg = Config(
            signature_version=UNSIGNED if unsigned else "s3v4",
            s3={"addressing_style": "path"},
            retries={"max_attempts": 1, "mode": "standard"},
            connect_timeout=10,
            read_timeout=self.READ_TIMEOUT,
        )
        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            region_name=self.region,
            aws_access_key_id=self.access_key,
            aws_secret_access_key=self.secret,
            config=cfg,
        )

    def _name(self, what):
        name = f"{self.prefix}-{what}"
        if name in self.buckets:
            name = f"{name}-{len(self.buckets)}"
        return name

    def bucket(self, what, versioning=None, lock=False):
        """A new bucket `<prefix>-<what>` (with object lock if `lock`), optionally with versioning set."""
        name = self._name(what)
        if lock:
            self.s3.create_bucket(Bucket=name, ObjectLockEnabledForBucket=True)
            self.locked.add(name)
        else:
            self.s3.create_bucket(Bucket=name)
        self.buckets.append(name)
        if versioning:
            self.versioning(name, versioning)
        return name

    def versioning(self, bucket, status):
        """PutBucketVersioning `status` (Enabled or Suspended), which must answer 200."""
        answer = self.s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": status})
        eq(status_of(answer), 200, f"PutBucketVersioning {status}")

    def url(self, bucket, key="", query=""):
        url = f"{self.endpoint}/{bucket}"
        if key:
            url += "/" + urllib.parse.quote(key, safe="/~")
        return url + (f"?{query}" if query else "")

    def signed_headers(self, method, url, headers=None, body=b""):
        """The headers of a request signed with SigV4 in the Authorization header, for sending by hand."""
        request = AWSRequest(method=method, url=url, headers=dict(headers or {}), data=body)
        S3SigV4Auth(Credentials(self.access_key, self.secret), "s3", self.region).add_auth(request)
        return dict(request.headers.items())

    def empty(self, bucket):
        """Delete everything in a bucket of this run; returns what could not be deleted."""
        if bucket in self.locked:
            return empty_locked_bucket(self.s3, bucket)
        empty_bucket(self.s3, bucket)
        return []

    def cleanup(self):
        """Empty and delete every bucket of the run (best effort: what fails is named on stderr)."""
        for bucket in self.buckets:
            try:
                left = self.empty(bucket)
                if left:
                    print(f"cleanup of {bucket}: left behind, {len(left)} versions could not be deleted: {left[:5]}", file=sys.stderr)
                    continue
                self.s3.delete_bucket(Bucket=bucket)
            except ClientError as exc:
                if error_of(exc)[0] != "NoSuchBucket":  # a case may have deleted it
                    print(f"cleanup of {bucket}: {exc}", file=sys.stderr)
            except Exception as exc:  # noqa: BLE001 - cleanup is best effort
                print(f"cleanup of {bucket}: {exc}", file=sys.stderr)


def all_versions(s3, bucket, prefix=""):
    """Every (key, version id, is a marker, is latest) of a bucket, in listing order per kind."""
    params = {"Prefix": prefix} if prefix else {}
    out = []
    for page in s3.get_paginator("list_object_versions").paginate(Bucket=bucket, **params):
        out += [(v["Key"], v["VersionId"], False, v["IsLatest"]) for v in page.get("Versions", [])]
        out += [(d["Key"], d["VersionId"], True, d["IsLatest"]) for d in page.get("DeleteMarkers", [])]
    return out


def abort_uploads(s3, bucket):
    for upload in s3.list_multipart_uploads(Bucket=bucket).get("Uploads", []):
        try:
            s3.abort_multipart_upload(Bucket=bucket, Key=upload["Key"], UploadId=upload["UploadId"])
        except ClientError:
            pass


def empty_bucket(s3, bucket):
    """Delete every version and delete marker (and unfinished upload) of a bucket without object lock."""
    abort_uploads(s3, bucket)
    for _ in range(5):
        objects = [{"Key": k, "VersionId": v} for k, v, _m, _l in all_versions(s3, bucket)]
        if not objects:
            break
        for i in range(0, len(objects), 1000):
            s3.delete_objects(Bucket=bucket, Delete={"Objects": objects[i : i + 1000], "Quiet": True})
    # Servers whose ListObjectVersions misses something: plain deletes too.
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket):
        keys = [{"Key": o["Key"]} for o in page.get("Contents", [])]
        if keys:
            s3.delete_objects(Bucket=bucket, Delete={"Objects": keys, "Quiet": True})


def empty_locked_bucket(s3, bucket):
    """Turn every legal hold off, then delete every version and marker bypassing
    governance retention. Returns what could not be deleted."""
    abort_uploads(s3, bucket)
    left = []
    for key, vid, marker, _latest in all_versions(s3, bucket):
        if not marker:
            try:
                s3.put_object_legal_hold(Bucket=bucket, Key=key, VersionId=vid, LegalHold={"Status": "OFF"})
            except ClientError:
                pass
        try:
            s3.delete_object(Bucket=bucket, Key=key, VersionId=vid, BypassGovernanceRetention=True)
        except ClientError as exc:
            left.append((key, vid, error_of(exc)[0]))
    return left


# ---------------------------------------------------------------------------
# Cases and the run.


def case_registry():
    """A suite's list of cases and the decorator (`@case`) that adds to it: they run in the order defined."""
    cases = []

    def case(fn):
        cases.append(fn)
        return fn

    return cases, case


def arguments():
    """The options every suite takes before its own (--only, --skip and --keep-going come after)."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--endpoint", required=True)
    parser.add_argument("--access-key", required=True)
    parser.add_argument("--secret", required=True)
    parser.add_argument("--prefix", help="bucket name prefix (random by default)")
    return parser


def main(suite_class, cases, parser=None, check_args=None):
    """Parse the options (`parser` from arguments(), with a suite's own added;
    `check_args(parser, args)` may refuse them), run the cases, clean up, exit."""
    parser = parser or arguments()
    parser.add_argument("--only", action="append", help="run only these cases")
    parser.add_argument("--skip", action="append", default=[], help="run every case but these")
    parser.add_argument("--keep-going", action="store_true", help="run every case, list the failures at the end")
    args = parser.parse_args()
    if check_args is not None:
        check_args(parser, args)
    for var in ("AWS_CA_BUNDLE", "AWS_PROFILE", "AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE"):
        os.environ.pop(var, None)
    unknown = [n for n in (args.only or []) + args.skip if n not in {fn.__name__ for fn in cases}]
    if unknown:
        parser.error(f"no such case: {' '.join(unknown)}")
    sys.exit(run(suite_class(args), cases, args))


def run(t, cases, args):
    """Run the cases --only and --skip leave, one line each; clean up; returns the exit status."""
    failures = []
    skipped = []
    started = time.monotonic()
    try:
        for fn in cases:
            if (args.only and fn.__name__ not in args.only) or fn.__name__ in args.skip:
                continue
            outcome = run_case(fn, t)
            if outcome == "skipped":
                skipped.append(fn.__name__)
            elif outcome != "ok":
                failures.append(fn.__name__)
                if not args.keep_going:
                    break
    finally:
        t.cleanup()
    return summary(failures, started, skipped)


def summary(failures, started, skipped=()):
    """Print the run's last line (`all passed in Ns` or `N failed: <cases>`, and
    which were skipped); returns the exit status."""
    note = f" ({len(skipped)} skipped: {' '.join(skipped)})" if skipped else ""
    print(
        f"{len(failures)} failed: {' '.join(failures)}{note}"
        if failures
        else f"all passed in {time.monotonic() - started:.1f}s{note}"
    )
    return 1 if failures else 0


def run_case(fn, t, stopped=None):
    """Run one case and print its line: `ok <case> (Ns)`, `skip <case> (why)` or
    `FAIL <case>: ...`. Returns "ok", "skipped", "failed", or "stopped" when an
    unexpected exception comes while `stopped()` gives a reason (the run was cut
    short from outside: the line gives that reason, no traceback)."""
    case_start = time.monotonic()
    try:
        fn(t)
    except Skipped as exc:
        print(f"skip {fn.__name__} ({exc})", flush=True)
        return "skipped"
    except Failure as exc:
        print(f"FAIL {fn.__name__}: {exc}", flush=True)
    except ClientError as exc:
        code, status, message = error_of(exc)
        print(
            f"FAIL {fn.__name__}: unexpected {code} ({status}) from {exc.operation_name}: {message}\n"
            f"{traceback.format_exc()}",
            flush=True,
        )
    except Exception:  # noqa: BLE001 - every other failure is a failure too
        reason = stopped() if stopped is not None else None
        if reason:
            print(f"FAIL {fn.__name__}: {reason}", flush=True)
            return "stopped"
        print(f"FAIL {fn.__name__}:\n{traceback.format_exc()}", flush=True)
    else:
        print(f"ok {fn.__name__} ({time.monotonic() - case_start:.1f}s)", flush=True)
        return "ok"
    return "failed"
