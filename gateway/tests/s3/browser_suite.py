#!/usr/bin/env python3
"""What a browser needs from S3, held to AWS's documented and recorded behaviour:
CORS (configuration, preflights, headers on real requests), POST Object (the
HTML form upload with a signed policy), bucket policies that make a bucket or
a prefix publicly readable, object and bucket tagging, and the answers S3
gives for the bucket configurations a console or SDK reads on every bucket.

Written from the AWS S3 API reference, from answers recorded against AWS
itself and from ceph/s3-tests, not from our implementation:

    browser_suite.py --endpoint http://127.0.0.1:PORT --access-key ID --secret SECRET

Every case prints one line (`ok <case>`); the first failure prints what was
sent, what was expected and what came back, and exits 1 (with --keep-going,
every case runs and the failures are listed at the end).

Buckets are named `<prefix>-<what>` with a random prefix, so two runs
against one server do not meet; every case makes its own buckets, and the
cleanup deletes every version and delete marker, then the bucket (which
takes its CORS configuration, policy and tags with it).

Browsers send some of these requests without credentials (a CORS preflight,
an anonymous GET of a public object), and on this store buckets belong to a
user: a preflight is tried both against a presigned URL (whose query names
the access key) and against the plain object URL, and anonymous reads go to
the plain URL.

Sources cited below:
  [CORS]         https://docs.aws.amazon.com/AmazonS3/latest/userguide/cors.html
                 and ManageCorsUsing.html (rule matching: origin with at most
                 one `*`, method, every requested header; first matching rule wins)
  [PutCORS]      https://docs.aws.amazon.com/AmazonS3/latest/API/API_PutBucketCors.html
  [POST]         https://docs.aws.amazon.com/AmazonS3/latest/API/RESTObjectPOST.html
                 and sigv4-HTTPPOSTConstructPolicy.html ("Each form field that you
                 specify in a form (except x-amz-signature, file, policy, and field
                 names that have an x-ignore- prefix) must appear in the list of
                 conditions"; success_action_status 200, 201 or 204; redirect 303)
  [GetObject]    https://docs.aws.amazon.com/AmazonS3/latest/API/API_GetObject.html
                 (no such key: 404 with s3:ListBucket, 403 AccessDenied without)
  [Policy]       https://docs.aws.amazon.com/AmazonS3/latest/userguide/example-bucket-policies.html
                 (granting read-only permission to anonymous users)
  [Tagging]      https://docs.aws.amazon.com/AmazonS3/latest/userguide/object-tagging.html
                 (10 tags per object, keys up to 128 and values up to 256 characters)
  [Ownership]    https://docs.aws.amazon.com/AmazonS3/latest/userguide/object-ownership-error-responses.html
                 (BucketOwnerEnforced, the default for new buckets since April 2023:
                 ACL writes answer 400 AccessControlListNotSupported; ACL reads show
                 full control for the bucket owner)
  [LS]           localstack/localstack tests/aws/services/s3/test_s3_cors.py,
                 test_s3.py (TestS3PresignedPost, bucket policy, ACL, copy tagging
                 directive) and test_s3_api.py (TestS3BucketObjectTagging,
                 TestS3BucketPolicy, ownership controls, public access block,
                 accelerate): tests marked `aws.validated` whose *.snapshot.json hold
                 the answers AWS gave (status, code, message, headers), commit
                 8b9a79f0, March 2026.
  [ceph]         ceph/s3-tests s3tests/functional/test_s3.py test_cors_*,
                 test_post_object_*, test_bucket_policy*, test_*_tags,
                 test_get_obj_tagging, test_bucket_acl_default, test_object_acl_default
                 (commit 8f0ae7b4, May 2026).

Choices where AWS's answer is not what this store gives, each checked in a case
of its own whose name starts with `store_`, so a run against another S3 shows
them apart:
  - store_public_reads_are_sandboxed: an anonymous read of a public object
    carries `X-Content-Type-Options: nosniff` and a `Content-Security-Policy`
    with `sandbox` (the store serves user files from its own origin; AWS sends
    neither).
  - store_policy_outside_subset_refused: this store honours only public-read
    policies (Allow, Principal *, s3:GetObject / s3:ListBucket /
    s3:GetBucketLocation on the bucket or a prefix, no Condition). Anything else
    is refused with 400 MalformedPolicy or 501 NotImplemented and a message
    naming what is supported, never stored and silently ignored. AWS accepts
    Deny, Conditions, other principals and actions.
  - store_acl_private_accepted: PutBucketAcl / PutObjectAcl with the `private`
    canned ACL answer 200 (it is what the bucket already has; clients such as
    rclone send it). AWS, on a BucketOwnerEnforced bucket, refuses every ACL
    write with AccessControlListNotSupported (hashicorp/terraform-provider-aws
    issue 34079: `acl = "private"` fails that way).
Where AWS's own answer is less certain (documented or recorded only in part), the
choice made and its source:
  - POST Object answers 204 with a Location header (the object's absolute URL), as
    it does with 201 [LS test_s3_presigned_post_success_action_status_201_response
    checks the header on a 201; LocalStack's provider sends it on every status];
    a path-style URL or a virtual-hosted one are both accepted, a relative one is not.
  - success_action_redirect keeps the URL's own query and adds bucket, key and etag
    ([POST]: S3 "appends" them; LocalStack's create_redirect_for_post_request).
  - A policy document S3 cannot read (no expiration, no conditions, a condition with
    no or two properties, a bad date): 400 [ceph]; the code is AWS's
    InvalidPolicyDocument where LS recorded it, and InvalidArgument or
    MalformedPOSTRequest are accepted too.
  - Allowed origins with a `*` anywhere and no scheme, and CORS headers on an error
    answer to an allowed origin: [ceph test_cors_origin_response], not recorded
    against AWS by LocalStack.
Choices where AWS has changed its defaults (see the cases for the sources):
  - GetBucketOwnershipControls of a new bucket: 200 BucketOwnerEnforced, as AWS
    answers since April 2023 and as this store behaves (ACLs do not grant).
  - GetBucketEncryption of a new bucket: 404
    ServerSideEncryptionConfigurationNotFoundError, S3's answer for a bucket
    without default encryption. AWS now encrypts every bucket (SSE-S3) and
    answers 200 AES256; this store does not encrypt at rest, so saying AES256
    would be false.
  - GetPublicAccessBlock of a new bucket: 404
    NoSuchPublicAccessBlockConfiguration, S3's answer for a bucket without
    one. AWS's new buckets answer 200 with all four blocks on, under which a
    public policy would be refused; this store allows public-read policies.
"""

import base64
import datetime
import hashlib
import hmac
import http.client
import json
import os
import random
import string
import urllib.parse
import xml.etree.ElementTree as ET

from botocore.exceptions import ClientError

from suite_harness import BaseSuite, case_registry, main as run_suite
from suite_harness import check, eq, error_of, etag_of, expect_error, fail, headers_of, show_call, status_of

MIB = 1 << 20
UTC = datetime.timezone.utc
# AWS's message for a preflight no rule allows [LS test_cors_match_origins "opt-wrong-origin"];
# the typo ("evalution") is AWS's own.
CORS_REFUSED = "CORSResponse: This CORS request is not allowed."
CORS_VARY = {"origin", "access-control-request-headers", "access-control-request-method"}


def expect_status(status, fn, *args, **kwargs):
    """Call fn; it must fail with HTTP `status` whatever the code (HEAD answers carry no body)."""
    try:
        result = fn(*args, **kwargs)
    except ClientError as exc:
        got = error_of(exc)[1]
        if got != status:
            fail(f"{fn.__name__}({show_call(args, kwargs)}): expected {status}, got {got} ({error_of(exc)[0]})")
        return exc
    fail(f"{fn.__name__}({show_call(args, kwargs)}): expected {status}, but it succeeded with {status_of(result)}")


# ---------------------------------------------------------------------------
# Raw HTTP: what a browser sends, byte for byte, without redirects.


class Answer:
    def __init__(self, status, headers, body):
        self.status = status
        self.headers = headers
        self.body = body

    def header(self, name):
        """Every value of a header joined by ", " (as HTTP allows), or None."""
        values = self.headers.get_all(name)
        return None if not values else ", ".join(values)

    def cors(self):
        """The Access-Control-* headers, names lower case."""
        return {k.lower(): v for k, v in self.headers.items() if k.lower().startswith("access-control-")}

    def error(self):
        """(Code, Message, the whole Error element as a dict) of an S3 XML error body."""
        try:
            root = ET.fromstring(self.body)
        except ET.ParseError:
            return None, None, {}
        fields = {strip_ns(child.tag): child.text for child in root}
        return fields.get("Code"), fields.get("Message"), fields

    def show(self):
        return f"{self.status} {dict(self.headers.items())} {self.body[:400]!r}"


def strip_ns(tag):
    return tag.split("}", 1)[1] if tag.startswith("{") else tag


def raw(method, url, headers=None, body=None, timeout=120):
    """One HTTP request (http.client: the URL goes out as given, no redirect is followed)."""
    parts = urllib.parse.urlsplit(url)
    cls = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    conn = cls(parts.hostname, parts.port, timeout=timeout)
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    try:
        conn.request(method, target, body=body, headers=dict(headers or {}))
        response = conn.getresponse()
        return Answer(response.status, response.headers, response.read())
    finally:
        conn.close()


def tokens(value, lower=False):
    """A comma-separated header value as a list of its items."""
    if value is None:
        return None
    items = [item.strip() for item in value.split(",") if item.strip()]
    return [item.lower() for item in items] if lower else items


def expect_raw_error(answer, status, codes, what, message_prefix=None):
    """An S3 XML error with this status and one of these codes (and message prefix)."""
    if isinstance(codes, str):
        codes = (codes,)
    code, message, _fields = answer.error()
    if answer.status != status or code not in codes:
        fail(f"{what}: expected {status} {'/'.join(codes)}, got {answer.show()}")
    if message_prefix is not None and not (message or "").startswith(message_prefix):
        fail(f"{what}: message should start {message_prefix!r}, got {message!r}")
    return answer.error()


# ---------------------------------------------------------------------------
# Clients.


class Suite(BaseSuite):
    PREFIX = "br"
    READ_TIMEOUT = 120

    def __init__(self, args):
        super().__init__(args)
        self.anon = self.client(unsigned=True)

    def missing(self, what="missing"):
        """A bucket name nobody has made."""
        return f"{self.prefix}-{what}-" + "".join(random.choice(string.ascii_lowercase) for _ in range(6))

    def signed(self, method, url, headers=None, body=b""):
        """A request signed with SigV4 in the Authorization header, sent by http.client."""
        signed = self.signed_headers(method, url, headers, body)
        return raw(method, url, signed, body if method in ("PUT", "POST") else None)

    def presign(self, method, bucket, key, **params):
        client_method = {"GET": "get_object", "PUT": "put_object", "HEAD": "head_object", "DELETE": "delete_object"}[method]
        return self.s3.generate_presigned_url(
            client_method, Params={"Bucket": bucket, "Key": key, **params}, ExpiresIn=900, HttpMethod=method
        )

    def put(self, bucket, key, body=b"x", **kwargs):
        answer = self.s3.put_object(Bucket=bucket, Key=key, Body=body, **kwargs)
        eq(status_of(answer), 200, f"PutObject {key!r}")
        return answer


# ---------------------------------------------------------------------------
# CORS helpers.


def preflight(url, origin=None, method=None, request_headers=None):
    """An OPTIONS request as a browser sends it: unsigned, no cookies, only these headers."""
    headers = {}
    if origin is not None:
        headers["Origin"] = origin
    if method is not None:
        headers["Access-Control-Request-Method"] = method
    if request_headers is not None:
        headers["Access-Control-Request-Headers"] = request_headers
    return raw("OPTIONS", url, headers)


def check_vary(answer, what):
    vary = set(tokens(answer.header("Vary"), lower=True) or [])
    missing = CORS_VARY - vary
    check(not missing, f"{what}: Vary must name {sorted(CORS_VARY)}, got {answer.header('Vary')!r}")


def check_cors_allowed(answer, what, origin, methods, request_headers=None, max_age=None, expose=None):
    """The Access-Control-* headers of an answer a rule matched [LS test_cors_match_origins,
    test_cors_match_headers, test_cors_expose_headers, test_put_cors_default_values]:
    the origin (or `*` when the rule's origin is `*`, then without credentials), the
    rule's methods in its order, the requested headers (lower case), Max-Age and
    Expose-Headers only when the rule has them, and Vary."""
    got = answer.cors()
    eq(got.get("access-control-allow-origin"), origin, f"{what}: Access-Control-Allow-Origin ({got})")
    eq(tokens(got.get("access-control-allow-methods")), methods, f"{what}: Access-Control-Allow-Methods")
    if request_headers is None:
        check("access-control-allow-headers" not in got, f"{what}: no header was requested, yet {got}")
    else:
        eq(
            tokens(got.get("access-control-allow-headers"), lower=True),
            tokens(request_headers, lower=True),
            f"{what}: Access-Control-Allow-Headers",
        )
    eq(got.get("access-control-max-age"), None if max_age is None else str(max_age), f"{what}: Access-Control-Max-Age")
    eq(
        tokens(got.get("access-control-expose-headers"), lower=True),
        None if expose is None else [e.lower() for e in expose],
        f"{what}: Access-Control-Expose-Headers",
    )
    eq(
        got.get("access-control-allow-credentials"),
        None if origin == "*" else "true",
        f"{what}: Access-Control-Allow-Credentials",
    )
    check_vary(answer, what)


def check_preflight_ok(answer, what, origin, methods, **kwargs):
    if answer.status != 200:
        fail(f"{what}: expected 200, got {answer.show()}")
    check_cors_allowed(answer, what, origin, methods, **kwargs)


def check_preflight_refused(answer, what, method, resource_type="OBJECT", message=CORS_REFUSED):
    """403 AccessForbidden with AWS's message, the requested method and the resource
    type, and no Access-Control-Allow-Origin [LS test_cors_match_origins "opt-wrong-origin",
    test_cors_options_fails_partial_origin (ResourceType BUCKET on the bucket's URL)]."""
    _code, _message, fields = expect_raw_error(answer, 403, "AccessForbidden", what, message)
    eq(fields.get("Method"), method, f"{what}: <Method> of the error")
    eq(fields.get("ResourceType"), resource_type, f"{what}: <ResourceType> of the error")
    check(
        "access-control-allow-origin" not in answer.cors(),
        f"{what}: a refused preflight allows nothing, got {answer.cors()}",
    )


def check_no_cors(answer, what):
    check(not answer.cors(), f"{what}: no Access-Control-* header expected, got {answer.cors()}")


def put_cors(t, bucket, rules):
    answer = t.s3.put_bucket_cors(Bucket=bucket, CORSConfiguration={"CORSRules": rules})
    eq(status_of(answer), 200, "PutBucketCors")


# ---------------------------------------------------------------------------
# POST Object helpers.


def multipart_form(fields, file_content, filename="upload.bin", file_type=None):
    """multipart/form-data with `fields` (pairs, in order) then the `file` part last, as [POST]
    requires. filename=None sends the file part without a filename. Returns (body, content type)."""
    boundary = "----browsersuite" + "".join(random.choice(string.ascii_letters + string.digits) for _ in range(24))
    out = []
    for name, value in fields:
        out.append(f"--{boundary}\r\n".encode())
        out.append(f'Content-Disposition: form-data; name="{name}"\r\n\r\n'.encode())
        out.append(value.encode() if isinstance(value, str) else value)
        out.append(b"\r\n")
    out.append(f"--{boundary}\r\n".encode())
    disposition = 'form-data; name="file"' + ("" if filename is None else f'; filename="{filename}"')
    out.append(f"Content-Disposition: {disposition}\r\n".encode())
    if file_type is not None:
        out.append(f"Content-Type: {file_type}\r\n".encode())
    out.append(b"\r\n")
    out.append(file_content)
    out.append(f"\r\n--{boundary}--\r\n".encode())
    return b"".join(out), f"multipart/form-data; boundary={boundary}"


def post_form(url, fields, file_content, filename="upload.bin", file_type=None, headers=None):
    """POST a form (fields as a dict or pairs, then the file) as a browser does: unsigned."""
    pairs = list(fields.items()) if isinstance(fields, dict) else list(fields)
    body, content_type = multipart_form(pairs, file_content, filename, file_type)
    all_headers = {"Content-Type": content_type}
    all_headers.update(headers or {})
    return raw("POST", url, all_headers, body)


def presigned_post(t, bucket, key, fields=None, conditions=None, expires=600):
    """boto3's generate_presigned_post (SigV4): returns (url, fields). boto3 adds the
    bucket and key conditions and the x-amz-algorithm/-credential/-date fields."""
    post = t.s3.generate_presigned_post(
        Bucket=bucket, Key=key, Fields=dict(fields or {}), Conditions=list(conditions or []), ExpiresIn=expires
    )
    return post["url"], dict(post["fields"])


def _hmac(key, message):
    return hmac.new(key, message.encode(), hashlib.sha256).digest()


def signed_policy_fields(t, document, add_auth_conditions=True, when=None):
    """Sign a POST policy document by hand (SigV4, [POST]): returns the fields
    policy, x-amz-algorithm, x-amz-credential, x-amz-date, x-amz-signature. With
    add_auth_conditions the document gets the conditions those fields need."""
    when = when or datetime.datetime.now(UTC)
    day = when.strftime("%Y%m%d")
    credential = f"{t.access_key}/{day}/{t.region}/s3/aws4_request"
    amz_date = when.strftime("%Y%m%dT%H%M%SZ")
    document = json.loads(json.dumps(document))
    if add_auth_conditions and isinstance(document.get("conditions"), list):
        document["conditions"] += [
            {"x-amz-algorithm": "AWS4-HMAC-SHA256"},
            {"x-amz-credential": credential},
            {"x-amz-date": amz_date},
        ]
    policy = base64.b64encode(json.dumps(document).encode()).decode()
    key = _hmac(("AWS4" + t.secret).encode(), day)
    for part in (t.region, "s3", "aws4_request"):
        key = _hmac(key, part)
    return {
        "x-amz-algorithm": "AWS4-HMAC-SHA256",
        "x-amz-credential": credential,
        "x-amz-date": amz_date,
        "policy": policy,
        "x-amz-signature": hmac.new(key, policy.encode(), hashlib.sha256).hexdigest(),
    }


def expiration(seconds):
    return (datetime.datetime.now(UTC) + datetime.timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%S.000Z")


def xml_fields(body):
    root = ET.fromstring(body)
    return strip_ns(root.tag), {strip_ns(child.tag): child.text for child in root}


def check_location(location, t, bucket, key, what):
    """Location is the object's absolute URL: path style (endpoint/bucket/key) or
    virtual-hosted (bucket.host/key) [LS test_s3_presigned_post_success_action_status_201_response]."""
    check(location and location.startswith(("http://", "https://")), f"{what}: Location {location!r} is not an absolute URL")
    parts = urllib.parse.urlsplit(location)
    path = urllib.parse.unquote(parts.path)  # AWS may send the key's `/` as %2F
    path_style = path == f"/{bucket}/{key}"
    vhost = bool(parts.hostname) and parts.hostname.startswith(bucket + ".") and path == f"/{key}"
    check(path_style or vhost, f"{what}: Location {location!r} is not the URL of {bucket}/{key}")


def check_no_object(t, bucket, key, what):
    try:
        got = t.s3.head_object(Bucket=bucket, Key=key)
    except ClientError as exc:
        if error_of(exc)[1] != 404:
            fail(f"{what}: HeadObject {key!r}: expected 404, got {error_of(exc)}")
    else:
        fail(f"{what}: {key!r} should not exist, yet HeadObject answered {status_of(got)}")


# ---------------------------------------------------------------------------
# Policy helpers.


def public_read_policy(bucket, resource=None):
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Principal": "*",
                "Action": "s3:GetObject",
                "Resource": resource or f"arn:aws:s3:::{bucket}/*",
            }
        ],
    }


def same_policy(got_text, expected, what):
    """GetBucketPolicy's document is the one put, compared as JSON; a list of one
    item and that item alone mean the same in a policy, so they compare equal."""

    def norm(value):
        if isinstance(value, dict):
            return {k: norm(v) for k, v in value.items()}
        if isinstance(value, list):
            items = [norm(v) for v in value]
            return items[0] if len(items) == 1 else items
        return value

    try:
        got = json.loads(got_text)
    except ValueError:
        fail(f"{what}: GetBucketPolicy's Policy is not JSON: {got_text!r}")
    if norm(got) != norm(expected):
        fail(f"{what}: expected {expected!r}, got {got!r}")


def put_policy(t, bucket, policy):
    text = policy if isinstance(policy, str) else json.dumps(policy)
    answer = t.s3.put_bucket_policy(Bucket=bucket, Policy=text)
    eq(status_of(answer), 204, "PutBucketPolicy")


def anon_get(t, bucket, key):
    return t.anon.get_object(Bucket=bucket, Key=key)


# ---------------------------------------------------------------------------
# Cases, in the order they run.

CASES, case = case_registry()


# --- CORS ------------------------------------------------------------------


BROWSER_RULE = {
    "ID": "browser-app",
    "AllowedOrigins": ["http://*.example.com", "https://app.example.org"],
    "AllowedMethods": ["GET", "PUT", "HEAD"],
    "AllowedHeaders": ["Content-Type", "x-amz-meta-*"],
    "ExposeHeaders": ["ETag", "x-amz-version-id"],
    "MaxAgeSeconds": 600,
}
ANYONE_GET_RULE = {"AllowedOrigins": ["*"], "AllowedMethods": ["GET"]}


@case
def cors_configuration_round_trip(t):
    name = t.bucket("corscfg")
    # No configuration: 404 NoSuchCORSConfiguration "The CORS configuration does not exist"
    # [LS test_get_cors "get-cors-no-set"; ceph test_set_cors].
    exc = expect_error("NoSuchCORSConfiguration", t.s3.get_bucket_cors, Bucket=name, status=404)
    eq(error_of(exc)[2], "The CORS configuration does not exist", "message of NoSuchCORSConfiguration")
    # Deleting a configuration never set: 204 [LS test_delete_cors "delete-cors-before-set"].
    eq(status_of(t.s3.delete_bucket_cors(Bucket=name)), 204, "DeleteBucketCors before any PutBucketCors")
    # Every field comes back as given, rules in order [LS test_put_cors, test_cors_match_headers
    # "get-bucket-cors-casing": header names keep their case].
    rules = [BROWSER_RULE, ANYONE_GET_RULE]
    put_cors(t, name, rules)
    got = t.s3.get_bucket_cors(Bucket=name)
    eq(status_of(got), 200, "GetBucketCors")
    eq(got["CORSRules"], rules, "GetBucketCors after PutBucketCors")
    # A PUT replaces the whole configuration.
    put_cors(t, name, [ANYONE_GET_RULE])
    eq(t.s3.get_bucket_cors(Bucket=name)["CORSRules"], [ANYONE_GET_RULE], "GetBucketCors after a second PutBucketCors")
    # [LS test_delete_cors "delete-cors", "get-cors-deleted"]
    eq(status_of(t.s3.delete_bucket_cors(Bucket=name)), 204, "DeleteBucketCors")
    expect_error("NoSuchCORSConfiguration", t.s3.get_bucket_cors, Bucket=name, status=404)


@case
def cors_configuration_refused(t):
    name = t.bucket("corsbad")
    # A method S3 does not know: 400 InvalidRequest "Found unsupported HTTP method in CORS
    # config. Unsupported method is MYMETHOD" [LS test_put_cors_invalid_rules "put-cors-exc"].
    exc = expect_error(
        "InvalidRequest",
        t.s3.put_bucket_cors,
        Bucket=name,
        CORSConfiguration={"CORSRules": [{"AllowedOrigins": ["*"], "AllowedMethods": ["GET", "PATCH"]}]},
        status=400,
    )
    eq(
        error_of(exc)[2],
        "Found unsupported HTTP method in CORS config. Unsupported method is PATCH",
        "message for an unsupported CORS method",
    )
    # No rule at all: 400 MalformedXML [LS "put-cors-exc-empty"].
    expect_error("MalformedXML", t.s3.put_bucket_cors, Bucket=name, CORSConfiguration={"CORSRules": []}, status=400)
    # Nothing was stored by the refused PUTs.
    expect_error("NoSuchCORSConfiguration", t.s3.get_bucket_cors, Bucket=name, status=404)
    # No bucket: 404 NoSuchBucket for all three operations.
    missing = t.missing()
    expect_error("NoSuchBucket", t.s3.get_bucket_cors, Bucket=missing, status=404)
    expect_error(
        "NoSuchBucket", t.s3.put_bucket_cors, Bucket=missing, CORSConfiguration={"CORSRules": [ANYONE_GET_RULE]}, status=404
    )
    expect_error("NoSuchBucket", t.s3.delete_bucket_cors, Bucket=missing, status=404)


@case
def cors_preflight_plain_url(t):
    """A preflight to the object's plain URL (no credentials anywhere in it)."""
    name = t.bucket("corspre")
    t.put(name, "photo.jpg", b"jpeg bytes", ContentType="image/jpeg")
    put_cors(t, name, [BROWSER_RULE, ANYONE_GET_RULE])
    url = t.url(name, "photo.jpg")
    origin = "http://app.example.com"
    # A rule whose wildcard origin, method and every requested header match: 200, empty body
    # [LS test_cors_match_headers "opt-get-two", test_cors_options_match_partial_origin].
    answer = preflight(url, origin, "PUT", "content-type, x-amz-meta-owner")
    check_preflight_ok(
        answer,
        "preflight PUT with two allowed headers",
        origin,
        ["GET", "PUT", "HEAD"],
        request_headers="content-type, x-amz-meta-owner",
        max_age=600,
        expose=["ETag", "x-amz-version-id"],
    )
    eq(answer.body, b"", "body of a successful preflight")
    # Header names match whatever their case, and come back lower case; no space after the
    # comma is the same [LS "opt-get-allowed-diff-casing", "opt-get-allowed-no-space"].
    answer = preflight(url, origin, "GET", "Content-Type,X-Amz-Meta-Owner")
    check_preflight_ok(
        answer,
        "preflight with headers in another case",
        origin,
        ["GET", "PUT", "HEAD"],
        request_headers="content-type, x-amz-meta-owner",
        max_age=600,
        expose=["ETag", "x-amz-version-id"],
    )
    # The second origin of the same rule, and no header requested: no Allow-Headers [LS "opt-right-origin"].
    check_preflight_ok(
        preflight(url, "https://app.example.org", "HEAD"),
        "preflight from the rule's second origin",
        "https://app.example.org",
        ["GET", "PUT", "HEAD"],
        max_age=600,
        expose=["ETag", "x-amz-version-id"],
    )
    # The `*` rule answers `*`, without Allow-Credentials, Max-Age or Expose-Headers when it
    # has none [LS test_put_cors_default_values "opt-get", "opt-random-wildcard-origin"].
    check_preflight_ok(preflight(url, "http://elsewhere.test", "GET"), "preflight matched by the * rule", "*", ["GET"])
    # A key that does not exist: a preflight does not look at the object [LS test_cors_match_methods "opt-put"
    # is on a new key].
    check_preflight_ok(
        preflight(t.url(name, "not/yet/uploaded.bin"), origin, "PUT", "content-type"),
        "preflight for a key not uploaded yet",
        origin,
        ["GET", "PUT", "HEAD"],
        request_headers="content-type",
        max_age=600,
        expose=["ETag", "x-amz-version-id"],
    )
    # The bucket's own URL (a listing, a POST upload) [LS test_cors_options_match_partial_origin].
    check_preflight_ok(
        preflight(t.url(name), origin, "GET"),
        "preflight to the bucket URL",
        origin,
        ["GET", "PUT", "HEAD"],
        max_age=600,
        expose=["ETag", "x-amz-version-id"],
    )
    # Refusals: 403 AccessForbidden, nothing allowed.
    # - an origin no rule names (the `*` rule allows only GET) [LS "opt-wrong-origin"];
    check_preflight_refused(preflight(url, "http://example.net", "PUT"), "preflight from an unknown origin", "PUT")
    # - the scheme is part of the origin;
    check_preflight_refused(preflight(url, "https://app.example.com", "PUT"), "preflight with the wrong scheme", "PUT")
    # - a trailing slash is not the origin [LS test_cors_options_fails_partial_origin];
    check_preflight_refused(preflight(url, "http://app.example.com/", "PUT"), "preflight with a trailing slash", "PUT")
    # - a method no matching rule allows [LS test_cors_match_methods "opt-put"];
    check_preflight_refused(preflight(url, origin, "DELETE"), "preflight for DELETE", "DELETE")
    # - one header the rule does not allow, even beside allowed ones [LS "opt-get-non-allowed",
    #   test_put_cors_default_values "opt-get-headers"; ceph test_cors_header_option];
    check_preflight_refused(
        preflight(url, origin, "PUT", "content-type, x-custom-header"), "preflight with a header not allowed", "PUT"
    )
    check_preflight_refused(
        preflight(url, "http://elsewhere.test", "GET", "x-amz-meta-owner"), "the * rule allows no header", "GET"
    )
    # - refused on the bucket's URL: ResourceType BUCKET [LS test_cors_options_fails_partial_origin].
    check_preflight_refused(
        preflight(t.url(name), "http://example.net", "PUT"), "refused preflight to the bucket URL", "PUT", "BUCKET"
    )
    # No Origin: 400 BadRequest "Insufficient information. Origin request header needed."
    # [LS test_cors_match_origins "opt-no-origin", "opt-referer"].
    expect_raw_error(
        preflight(url, None, "PUT"),
        400,
        "BadRequest",
        "preflight without Origin",
        "Insufficient information. Origin request header needed.",
    )


@case
def cors_preflight_without_configuration(t):
    name = t.bucket("corsnone")
    t.put(name, "k", b"x")
    url = t.url(name, "k")
    # [LS test_cors_http_options_no_config]: 400 BadRequest without Origin; 403 AccessForbidden
    # "CORSResponse: CORS is not enabled for this bucket." with Origin, whether or not a
    # method is asked for (Method OPTIONS then), ResourceType BUCKET.
    expect_raw_error(preflight(url), 400, "BadRequest", "preflight without Origin, bucket without CORS",
                     "Insufficient information. Origin request header needed.")
    check_preflight_refused(
        preflight(url, "http://app.example.com", "PUT"),
        "preflight to a bucket without CORS",
        "PUT",
        "BUCKET",
        "CORSResponse: CORS is not enabled for this bucket.",
    )
    check_preflight_refused(
        preflight(url, "http://app.example.com"),
        "preflight without a method to a bucket without CORS",
        "OPTIONS",
        "BUCKET",
        "CORSResponse: CORS is not enabled for this bucket.",
    )
    # After DeleteBucketCors the bucket is back to that.
    put_cors(t, name, [ANYONE_GET_RULE])
    check_preflight_ok(preflight(url, "http://app.example.com", "GET"), "preflight once configured", "*", ["GET"])
    t.s3.delete_bucket_cors(Bucket=name)
    check_preflight_refused(
        preflight(url, "http://app.example.com", "GET"),
        "preflight after DeleteBucketCors",
        "GET",
        "BUCKET",
        "CORSResponse: CORS is not enabled for this bucket.",
    )
    # No such bucket: 403 "CORSResponse: Bucket not found" [LS test_cors_http_options_non_existent_bucket].
    missing = t.url(t.missing(), "k")
    expect_raw_error(preflight(missing), 400, "BadRequest", "preflight without Origin to a missing bucket")
    check_preflight_refused(
        preflight(missing, "http://app.example.com"),
        "preflight to a missing bucket",
        "OPTIONS",
        "BUCKET",
        "CORSResponse: Bucket not found",
    )


@case
def cors_preflight_presigned_url(t):
    """A preflight to a presigned URL, query and all, as a browser sends it before
    fetch(presignedUrl) [ceph test_cors_presigned_get_object, test_cors_presigned_put_object]."""
    name = t.bucket("corssigned")
    t.put(name, "doc.txt", b"presigned read")
    get_url = t.presign("GET", name, "doc.txt")
    put_url = t.presign("PUT", name, "new.txt")
    check("X-Amz-Credential=" in get_url, f"a SigV4 presigned URL: {get_url}")
    # Without a configuration: 400 without Origin [ceph], 403 with one.
    expect_raw_error(preflight(get_url), 400, "BadRequest", "preflight of a presigned URL without Origin")
    check_preflight_refused(
        preflight(put_url, "http://app.example.com", "PUT"),
        "preflight of a presigned URL, bucket without CORS",
        "PUT",
        "BUCKET",
        "CORSResponse: CORS is not enabled for this bucket.",
    )
    put_cors(t, name, [BROWSER_RULE])
    origin = "http://upload.example.com"
    check_preflight_ok(
        preflight(get_url, origin, "GET"),
        "preflight of a presigned GET",
        origin,
        ["GET", "PUT", "HEAD"],
        max_age=600,
        expose=["ETag", "x-amz-version-id"],
    )
    check_preflight_ok(
        preflight(put_url, origin, "PUT", "content-type"),
        "preflight of a presigned PUT",
        origin,
        ["GET", "PUT", "HEAD"],
        request_headers="content-type",
        max_age=600,
        expose=["ETag", "x-amz-version-id"],
    )
    check_preflight_refused(preflight(put_url, "http://evil.test", "PUT"), "presigned PUT from another origin", "PUT")
    check_preflight_refused(preflight(get_url, origin, "DELETE"), "presigned URL, method not allowed", "DELETE")
    # The presigned PUT then works from that origin and answers with the CORS headers.
    answer = raw("PUT", put_url, {"Origin": origin, "Content-Type": "text/plain"}, b"from the browser")
    if answer.status != 200:
        fail(f"PUT to the presigned URL with Origin: {answer.show()}")
    check_cors_allowed(answer, "PUT to a presigned URL", origin, ["GET", "PUT", "HEAD"], max_age=600,
                       expose=["ETag", "x-amz-version-id"])
    eq(t.s3.get_object(Bucket=name, Key="new.txt")["Body"].read(), b"from the browser", "what the presigned PUT stored")


@case
def cors_headers_on_requests(t):
    """A real (non-preflight) request with Origin gets the Access-Control-* headers when a rule
    matches its origin and method, and none otherwise [LS test_cors_match_origins "get-right-origin",
    "get-wrong-origin", "get-no-origin", test_cors_match_methods "get-op", "put-op";
    ceph test_cors_origin_response]."""
    name = t.bucket("corsreq")
    t.put(name, "page.txt", b"hello browser", ContentType="text/plain")
    put_cors(t, name, [BROWSER_RULE])
    origin = "http://app.example.com"
    expose = ["ETag", "x-amz-version-id"]
    methods = ["GET", "PUT", "HEAD"]
    url = t.presign("GET", name, "page.txt")
    answer = raw("GET", url, {"Origin": origin})
    eq(answer.status, 200, f"presigned GET with Origin ({answer.body[:200]!r})")
    eq(answer.body, b"hello browser", "body of the presigned GET")
    check_cors_allowed(answer, "presigned GET from an allowed origin", origin, methods, max_age=600, expose=expose)
    # Signed in the Authorization header (an SDK in the browser).
    answer = t.signed("GET", t.url(name, "page.txt"), {"Origin": origin})
    eq(answer.status, 200, "signed GET with Origin")
    check_cors_allowed(answer, "signed GET from an allowed origin", origin, methods, max_age=600, expose=expose)
    answer = t.signed("HEAD", t.url(name, "page.txt"), {"Origin": origin})
    eq(answer.status, 200, "signed HEAD with Origin")
    check_cors_allowed(answer, "signed HEAD from an allowed origin", origin, methods, max_age=600, expose=expose)
    answer = t.signed("PUT", t.url(name, "up.txt"), {"Origin": origin, "Content-Type": "text/plain"}, b"uploaded")
    eq(answer.status, 200, f"signed PUT with Origin ({answer.body[:200]!r})")
    check_cors_allowed(answer, "signed PUT from an allowed origin", origin, methods, max_age=600, expose=expose)
    # No Origin, an origin no rule names, a method no rule allows: no CORS header at all.
    check_no_cors(raw("GET", url), "presigned GET without Origin")
    answer = raw("GET", url, {"Origin": "http://evil.test"})
    eq(answer.status, 200, "presigned GET from another origin is still served")
    check_no_cors(answer, "presigned GET from an origin no rule names")
    answer = t.signed("DELETE", t.url(name, "up.txt"), {"Origin": origin})
    eq(answer.status, 204, "signed DELETE with Origin")
    check_no_cors(answer, "DELETE, which no rule allows")
    # An error answer to an allowed origin carries the headers too, so the page can read it
    # [ceph test_cors_origin_response: 404 with Access-Control-Allow-Origin].
    answer = raw("GET", t.presign("GET", name, "absent.txt"), {"Origin": origin})
    eq(answer.status, 404, "presigned GET of a missing key")
    eq(answer.cors().get("access-control-allow-origin"), origin, "Access-Control-Allow-Origin on a 404")
    # A `*` rule answers `*`, never the origin, and no credentials [LS "get-random-wildcard-origin"].
    put_cors(t, name, [{"AllowedOrigins": ["*"], "AllowedMethods": ["GET"], "MaxAgeSeconds": 3000}])
    answer = raw("GET", url, {"Origin": "http://random:1234"})
    eq(answer.status, 200, "presigned GET under a * rule")
    check_cors_allowed(answer, "GET under a * rule", "*", ["GET"], max_age=3000)


@case
def cors_origin_wildcards(t):
    """One `*` anywhere in an allowed origin [CORS; ceph test_cors_origin_response]."""
    name = t.bucket("corswild")
    put_cors(
        t,
        name,
        [
            {"AllowedMethods": ["GET"], "AllowedOrigins": ["*suffix"]},
            {"AllowedMethods": ["GET"], "AllowedOrigins": ["start*end"]},
            {"AllowedMethods": ["GET"], "AllowedOrigins": ["prefix*"]},
            {"AllowedMethods": ["PUT"], "AllowedOrigins": ["*.put"]},
        ],
    )
    url = t.url(name, "bar")
    allowed = [
        ("foo.suffix", "GET"),
        ("startend", "GET"),
        ("start1end", "GET"),
        ("start12end", "GET"),
        ("prefix", "GET"),
        ("prefix.suffix", "GET"),
        ("foo.put", "PUT"),
    ]
    for origin, method in allowed:
        check_preflight_ok(preflight(url, origin, method), f"preflight {method} from {origin!r}", origin, [method])
    refused = [
        ("foo.bar", "GET"),
        ("foo.suffix.get", "GET"),
        ("0start12end", "GET"),
        ("bla.prefix", "GET"),
        ("foo.put", "GET"),
        ("foo.suffix", "PUT"),
    ]
    for origin, method in refused:
        check_preflight_refused(preflight(url, origin, method), f"preflight {method} from {origin!r}", method)


# --- POST Object ------------------------------------------------------------


@case
def post_object_upload(t):
    """A form upload with the policy a backend signs for a browser: 204 No Content with ETag
    and Location; the object carries the form's Content-Type and x-amz-meta-* [POST;
    LS test_post_object_with_files, test_post_object_with_metadata; ceph
    test_post_object_authenticated_request, test_post_object_user_specified_header]."""
    name = t.bucket("post")
    url, fields = presigned_post(
        t,
        name,
        "uploads/${filename}",
        fields={"Content-Type": "text/plain", "x-amz-meta-owner": "alice", "Content-Disposition": "inline"},
        conditions=[
            ["content-length-range", 1, 1024],
            ["starts-with", "$Content-Type", "text/"],
            {"x-amz-meta-owner": "alice"},
            ["eq", "$Content-Disposition", "inline"],
        ],
    )
    eq(url, t.url(name), "boto3's POST URL is the bucket's")
    data = b"hello from a form\n"
    answer = post_form(url, fields, data, filename="report.txt")
    if answer.status != 204:
        fail(f"POST Object: expected 204, got {answer.show()}")
    eq(answer.body, b"", "body of a 204 POST")
    eq(answer.header("ETag"), etag_of(data), "ETag of the POST answer")
    # `${filename}` in the key is the file part's filename [ceph test_post_object_set_key_from_filename].
    check_location(answer.header("Location"), t, name, "uploads/report.txt", "Location of the POST answer")
    got = t.s3.get_object(Bucket=name, Key="uploads/report.txt")
    eq(got["Body"].read(), data, "the object POST stored")
    eq(got["ContentType"], "text/plain", "Content-Type from the form")
    eq(got["Metadata"], {"owner": "alice"}, "x-amz-meta-* from the form")
    eq(got.get("ContentDisposition"), "inline", "Content-Disposition from the form")
    eq(got["ETag"], etag_of(data), "ETag of the stored object")
    # A file part without a filename leaves `${filename}` as it is [LS test_post_object_with_file_as_string].
    url, fields = presigned_post(t, name, "literal-${filename}", conditions=[["content-length-range", 0, 1024]])
    answer = post_form(url, fields, b"no name", filename=None)
    if answer.status != 204:
        fail(f"POST Object without a filename: {answer.show()}")
    eq(t.s3.get_object(Bucket=name, Key="literal-${filename}")["Body"].read(), b"no name", "key kept literally")
    # A plain key, an empty file, and a key with characters to escape.
    url, fields = presigned_post(t, name, "dir/naïve file+1.txt")
    answer = post_form(url, fields, b"", filename="ignored.txt")
    if answer.status != 204:
        fail(f"POST Object of an empty file: {answer.show()}")
    check_location(answer.header("Location"), t, name, "dir/naïve file+1.txt", "Location of a key with escapes")
    eq(t.s3.head_object(Bucket=name, Key="dir/naïve file+1.txt")["ContentLength"], 0, "an empty file through POST")


@case
def post_object_signature_v2(t):
    """A form signed with Signature Version 2 (what boto3's generate_presigned_post signs
    when the client is not configured for s3v4, and what older SDKs send): `AWSAccessKeyId`,
    `policy`, `signature` = base64(HMAC-SHA1(secret, policy)) [POST V2:
    https://docs.aws.amazon.com/AmazonS3/latest/userguide/HTTPPOSTForms.html]. Stored, and a
    tampered signature is 403 SignatureDoesNotMatch."""
    name = t.bucket("postv2")
    policy = base64.b64encode(json.dumps({
        "expiration": (datetime.datetime.now(UTC) + datetime.timedelta(minutes=10)).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "conditions": [{"bucket": name}, ["starts-with", "$key", "v2/"], ["content-length-range", 1, 1024]],
    }).encode()).decode()
    signature = base64.b64encode(hmac.new(t.secret.encode(), policy.encode(), hashlib.sha1).digest()).decode()
    fields = {"key": "v2/${filename}", "AWSAccessKeyId": t.access_key, "policy": policy, "signature": signature}
    data = b"signed the old way\n"
    answer = post_form(t.url(name), fields, data, filename="old.txt")
    if answer.status != 204:
        fail(f"POST Object signed with SigV2: expected 204, got {answer.show()}")
    eq(t.s3.get_object(Bucket=name, Key="v2/old.txt")["Body"].read(), data, "the object a SigV2 form stored")
    forged = dict(fields, signature=base64.b64encode(b"x" * 20).decode())
    answer = post_form(t.url(name), forged, data, filename="forged.txt")
    expect_raw_error(answer, 403, "SignatureDoesNotMatch", "a SigV2 form with a wrong signature")


@case
def post_object_success_action_status(t):
    """success_action_status 201: an XML PostResponse; 200: empty 200; anything else: 204
    [POST; LS test_s3_presigned_post_success_action_status_201_response; ceph
    test_post_object_set_success_code, test_post_object_set_invalid_success_code]."""
    name = t.bucket("post201")
    data = b"something body"
    url, fields = presigned_post(
        t, name, "key-${filename}", fields={"success_action_status": "201"},
        conditions=[["eq", "$success_action_status", "201"]],
    )
    answer = post_form(url, fields, data, filename="my-file")
    if answer.status != 201:
        fail(f"POST with success_action_status 201: {answer.show()}")
    root, got = xml_fields(answer.body)
    eq(root, "PostResponse", "root element of the 201 answer")
    eq(got.get("Bucket"), name, "PostResponse Bucket")
    eq(got.get("Key"), "key-my-file", "PostResponse Key")
    eq(got.get("ETag"), etag_of(data), "PostResponse ETag")
    eq(answer.header("ETag"), etag_of(data), "ETag header of the 201 answer")
    check_location(got.get("Location"), t, name, "key-my-file", "PostResponse Location")
    eq(answer.header("Location"), got.get("Location"), "Location header and element")
    for status, expected in (("200", 200), ("204", 204), ("404", 204)):
        url, fields = presigned_post(
            t, name, f"status-{status}", fields={"success_action_status": status},
            conditions=[["eq", "$success_action_status", status]],
        )
        answer = post_form(url, fields, data)
        eq((answer.status, answer.body), (expected, b""), f"POST with success_action_status {status}")
    eq(t.s3.get_object(Bucket=name, Key="status-404")["Body"].read(), data, "stored despite an unknown status")


@case
def post_object_success_action_redirect(t):
    """success_action_redirect: 303 See Other to that URL with bucket, key and etag in the
    query; a URL S3 cannot use is ignored (204) [POST; LS test_s3_presigned_post_success_action_redirect;
    ceph test_post_object_success_redirect_action]."""
    name = t.bucket("post303")
    data = b"redirected upload"
    target = "http://localhost.test/done?from=form"
    url, fields = presigned_post(
        t, name, "r/${filename}", fields={"success_action_redirect": target},
        conditions=[["eq", "$success_action_redirect", target]],
    )
    answer = post_form(url, fields, data, filename="a b.txt")
    if answer.status != 303:
        fail(f"POST with success_action_redirect: {answer.show()}")
    location = answer.header("Location") or ""
    check(location.startswith("http://localhost.test/done?"), f"303 Location {location!r}")
    query = urllib.parse.parse_qs(urllib.parse.urlsplit(location).query)
    eq(query.get("from"), ["form"], "the redirect URL's own query is kept")
    eq(query.get("bucket"), [name], "bucket in the redirect")
    eq(query.get("key"), ["r/a b.txt"], "key in the redirect")
    eq(query.get("etag"), [etag_of(data)], "etag in the redirect (quoted, as ceph expects)")
    eq(t.s3.get_object(Bucket=name, Key="r/a b.txt")["Body"].read(), data, "the redirected upload is stored")
    wrong = "/wrong/redirect/relative"
    url, fields = presigned_post(
        t, name, "r2", fields={"success_action_redirect": wrong}, conditions=[["eq", "$success_action_redirect", wrong]]
    )
    answer = post_form(url, fields, data)
    eq(answer.status, 204, f"POST with a relative success_action_redirect ({answer.body[:200]!r})")


@case
def post_object_policy_conditions(t):
    """Every condition holds, and every form field is named by a condition: otherwise 403
    AccessDenied "Invalid according to Policy: ..." and nothing is stored [POST; LS
    test_post_object_policy_conditions_validation_eq and _starts_with; ceph
    test_post_object_request_missing_policy_specified_field, test_post_object_invalid_request_field_value,
    test_post_object_ignored_header, test_post_object_wrong_bucket]."""
    name = t.bucket("postpol")
    conditions = [
        ["content-length-range", 1, 1024],
        ["starts-with", "$Content-Type", "image/"],
        {"x-amz-meta-owner": "alice"},
    ]
    url, fields = presigned_post(
        t, name, "photos/${filename}", fields={"Content-Type": "image/png", "x-amz-meta-owner": "alice"},
        conditions=conditions,
    )
    failed = "Invalid according to Policy: Policy Condition failed: "

    def refused(changes, what, message=failed, drop=()):
        form = dict(fields)
        form.update(changes)
        for field in drop:
            form.pop(field)
        answer = post_form(url, form, b"png bytes", filename="cat.png")
        expect_raw_error(answer, 403, "AccessDenied", what, message)

    refused({"key": "elsewhere/cat.png"}, "a key outside the starts-with prefix")
    refused({"Content-Type": "text/html"}, "a Content-Type outside the starts-with prefix")
    refused({"x-amz-meta-owner": "mallory"}, "a field that differs from its eq condition")
    # Prefix comparison is case sensitive [LS "invalid-condition-starts-with-casing"].
    refused({"key": "Photos/cat.png"}, "a key prefix in another case")
    # A field the policy names but the form lacks [ceph test_post_object_request_missing_policy_specified_field].
    refused({}, "a field the policy requires is missing", drop=("x-amz-meta-owner",))
    # A field the policy does not name: "Extra input fields" [POST: every field must appear in the conditions].
    refused({"x-amz-meta-extra": "1"}, "a field the policy does not name", "Invalid according to Policy: Extra input fields:")
    check(not t.s3.list_objects_v2(Bucket=name).get("Contents"), "nothing stored by refused POSTs")
    # Field names starting x-ignore- are exempt [ceph test_post_object_ignored_header].
    form = dict(fields)
    form["x-ignore-tracking"] = "whatever"
    answer = post_form(url, form, b"png bytes", filename="ok.png")
    eq(answer.status, 204, f"POST with an x-ignore- field ({answer.body[:300]!r})")
    eq(t.s3.head_object(Bucket=name, Key="photos/ok.png")["Metadata"], {"owner": "alice"}, "metadata of the accepted POST")
    # A policy for one bucket posted to another [ceph test_post_object_wrong_bucket].
    other = t.bucket("postother")
    answer = post_form(t.url(other), fields, b"png bytes", filename="cat.png")
    expect_raw_error(answer, 403, "AccessDenied", "a policy signed for another bucket")
    check(not t.s3.list_objects_v2(Bucket=other).get("Contents"), "nothing stored in the other bucket")


@case
def post_object_size_limits(t):
    """content-length-range: 400 EntityTooLarge above, 400 EntityTooSmall below, both bounds
    inclusive [LS test_post_object_policy_validation_size; ceph
    test_post_object_upload_size_limit_exceeded, test_post_object_upload_size_below_minimum]."""
    name = t.bucket("postsize")
    url, fields = presigned_post(t, name, "sized", conditions=[["content-length-range", 5, 10]])
    answer = post_form(url, fields, b"a" * 12)
    _code, _message, error = expect_raw_error(
        answer, 400, "EntityTooLarge", "a file over content-length-range", "Your proposed upload exceeds the maximum allowed size"
    )
    eq((error.get("ProposedSize"), error.get("MaxSizeAllowed")), ("12", "10"), "sizes named by EntityTooLarge")
    answer = post_form(url, fields, b"a")
    _code, _message, error = expect_raw_error(
        answer, 400, "EntityTooSmall", "a file under content-length-range", "Your proposed upload is smaller than the minimum allowed size"
    )
    eq((error.get("ProposedSize"), error.get("MinSizeAllowed")), ("1", "5"), "sizes named by EntityTooSmall")
    check_no_object(t, name, "sized", "nothing stored by a refused size")
    for size in (5, 10):
        answer = post_form(url, fields, b"b" * size)
        eq(answer.status, 204, f"a {size}-byte file within [5, 10] ({answer.body[:300]!r})")
    eq(t.s3.get_object(Bucket=name, Key="sized")["Body"].read(), b"b" * 10, "the last accepted upload")
    # Bounds written as strings are numbers too [LS "try with string values"].
    url, fields = presigned_post(t, name, "sized2", conditions=[["content-length-range", "5", "10"]])
    eq(post_form(url, fields, b"c" * 10).status, 204, "content-length-range with string bounds")


@case
def post_object_large_file(t):
    """A file of a little over 5 MiB (past any 4 MiB chunk of the server's) [ceph
    test_post_object_upload_larger_than_chunk, test_post_object_upload_size_rgw_chunk_size_bug]."""
    name = t.bucket("postbig")
    data = os.urandom(5 * MIB + 200)
    url, fields = presigned_post(
        t, name, "big.bin", fields={"Content-Type": "application/octet-stream"},
        conditions=[["content-length-range", 1, 10 * MIB], ["eq", "$Content-Type", "application/octet-stream"]],
    )
    answer = post_form(url, fields, data, filename="big.bin", file_type="application/octet-stream")
    if answer.status != 204:
        fail(f"POST of {len(data)} bytes: {answer.show()}")
    eq(answer.header("ETag"), etag_of(data), "ETag of a 5 MiB POST")
    got = t.s3.get_object(Bucket=name, Key="big.bin")
    check(got["Body"].read() == data, "the 5 MiB object reads back byte for byte")
    eq(got["ContentLength"], len(data), "its length")


@case
def post_object_expired_policy(t):
    """403 AccessDenied "Invalid according to Policy: Policy expired." [LS test_post_request_expires;
    ceph test_post_object_expired_policy]."""
    name = t.bucket("postexp")
    document = {"expiration": expiration(-600), "conditions": [{"bucket": name}, {"key": "late.txt"}]}
    form = {"key": "late.txt", **signed_policy_fields(t, document)}
    answer = post_form(t.url(name), form, b"too late")
    expect_raw_error(answer, 403, "AccessDenied", "an expired policy", "Invalid according to Policy: Policy expired.")
    check_no_object(t, name, "late.txt", "nothing stored")
    # The same form with a future expiration is accepted: the hand-signed policy is right.
    document["expiration"] = expiration(600)
    form = {"key": "late.txt", **signed_policy_fields(t, document)}
    answer = post_form(t.url(name), form, b"in time")
    eq(answer.status, 204, f"the same policy, not expired ({answer.body[:300]!r})")


@case
def post_object_bad_signature(t):
    """403 SignatureDoesNotMatch for a wrong signature or a policy changed after signing, 403
    InvalidAccessKeyId for a key nobody has [LS test_post_request_malformed_policy; ceph
    test_post_object_invalid_signature, test_post_object_invalid_access_key]."""
    name = t.bucket("postsig")
    url, fields = presigned_post(t, name, "sig.txt")
    form = dict(fields)
    form["x-amz-signature"] = ("0" if fields["x-amz-signature"][0] != "0" else "1") + fields["x-amz-signature"][1:]
    expect_raw_error(post_form(url, form, b"x"), 403, "SignatureDoesNotMatch", "a wrong signature")
    form = dict(fields)
    document = json.loads(base64.b64decode(fields["policy"]))
    document["conditions"].append(["content-length-range", 0, 1 << 30])
    form["policy"] = base64.b64encode(json.dumps(document).encode()).decode()
    expect_raw_error(post_form(url, form, b"x"), 403, "SignatureDoesNotMatch", "a policy changed after signing")
    form = dict(fields)
    form["policy"] = fields["policy"][:-2]
    expect_raw_error(post_form(url, form, b"x"), 403, "SignatureDoesNotMatch", "a truncated policy")
    form = dict(fields)
    form["x-amz-credential"] = fields["x-amz-credential"].replace(t.access_key, "AKIANOSUCHKEY0000000", 1)
    expect_raw_error(post_form(url, form, b"x"), 403, ("InvalidAccessKeyId", "AccessDenied"), "an unknown access key")
    check_no_object(t, name, "sig.txt", "nothing stored")


@case
def post_object_malformed_forms(t):
    """Forms S3 refuses before looking at the policy's conditions [LS test_post_request_missing_signature,
    test_post_request_missing_fields, test_post_object_with_wrong_content_type,
    test_post_object_policy_conditions_validation_eq "invalid-condition-wrong-condition";
    ceph test_post_object_no_key_specified, test_post_object_missing_expires_condition,
    test_post_object_missing_conditions_list, test_post_object_condition_is_case_sensitive,
    test_post_object_expires_is_case_sensitive, test_post_object_invalid_date_format,
    test_post_object_empty_conditions]."""
    name = t.bucket("postbad")
    url, fields = presigned_post(t, name, "m.txt")
    must = "Bucket POST must contain a field named '{}'.  If it is specified, please check the order of the fields."
    form = {k: v for k, v in fields.items() if k != "x-amz-signature"}
    _code, _message, error = expect_raw_error(
        post_form(url, form, b"x"), 400, "InvalidArgument", "no x-amz-signature", must.format("X-Amz-Signature")
    )
    eq(error.get("ArgumentName"), "X-Amz-Signature", "ArgumentName of the missing signature")
    form = {k: v for k, v in fields.items() if k not in ("x-amz-algorithm", "x-amz-credential")}
    expect_raw_error(post_form(url, form, b"x"), 400, "InvalidArgument", "no x-amz-algorithm", must.format("X-Amz-Algorithm"))
    # Only key and policy: an anonymous POST to a private bucket [LS "exception-no-sig-related-fields"].
    form = {k: v for k, v in fields.items() if k in ("key", "policy")}
    expect_raw_error(post_form(url, form, b"x"), 403, "AccessDenied", "no signature fields at all")
    # No key field [ceph test_post_object_no_key_specified].
    form = {k: v for k, v in fields.items() if k != "key"}
    expect_raw_error(post_form(url, form, b"x"), 400, "InvalidArgument", "no key field", must.format("key"))
    # A body that is not multipart/form-data: 412 PreconditionFailed [LS test_post_object_with_wrong_content_type].
    body, _content_type = multipart_form(list(fields.items()), b"x")
    answer = raw("POST", url, {"Content-Type": "text/html"}, body)
    expect_raw_error(answer, 412, "PreconditionFailed", "POST that is not multipart/form-data")
    # Policy documents S3 cannot read: 400 (InvalidPolicyDocument where AWS's code is known).
    future = expiration(600)
    documents = {
        "no expiration": {"conditions": [{"bucket": name}, {"key": "m.txt"}]},
        "no conditions": {"expiration": future},
        "CONDITIONS in capitals": {"expiration": future, "CONDITIONS": [{"bucket": name}, {"key": "m.txt"}]},
        "EXPIRATION in capitals": {"EXPIRATION": future, "conditions": [{"bucket": name}, {"key": "m.txt"}]},
        "an expiration that is not ISO 8601": {
            "expiration": str(datetime.datetime.now(UTC) + datetime.timedelta(minutes=10)),
            "conditions": [{"bucket": name}, {"key": "m.txt"}],
        },
        "an empty condition": {"expiration": future, "conditions": [{}]},
        "a condition with two properties": {"expiration": future, "conditions": [{"bucket": name, "key": "m.txt"}]},
        "content-length-range with one bound": {
            "expiration": future, "conditions": [{"bucket": name}, {"key": "m.txt"}, ["content-length-range", 0]]
        },
    }
    for what, document in documents.items():
        form = {"key": "m.txt", **signed_policy_fields(t, document)}
        answer = post_form(url, form, b"x")
        expect_raw_error(answer, 400, ("InvalidPolicyDocument", "InvalidArgument", "MalformedPOSTRequest"), f"a policy with {what}")
    check_no_object(t, name, "m.txt", "nothing stored by malformed forms")
    # No such bucket.
    missing = t.missing()
    url, fields = presigned_post(t, missing, "m.txt")
    expect_raw_error(post_form(url, fields, b"x"), 404, "NoSuchBucket", "POST to a missing bucket")


@case
def post_object_field_name_case(t):
    """Form field names are case insensitive (the policy's values are not) [LS
    test_post_object_policy_casing; ceph test_post_object_case_insensitive_condition_fields]."""
    name = t.bucket("postcase")
    url, fields = presigned_post(t, name, "case.txt", conditions=[["content-length-range", 1, 10]])
    form = dict(fields)
    form["Policy"] = form.pop("policy")
    form["X-Amz-Credential"] = form.pop("x-amz-credential")
    form["X-Amz-Signature"] = form.pop("x-amz-signature")
    form["Key"] = form.pop("key")
    answer = post_form(url, form, b"aaaaa")
    eq(answer.status, 204, f"POST with field names in other cases ({answer.body[:300]!r})")
    eq(t.s3.get_object(Bucket=name, Key="case.txt")["Body"].read(), b"aaaaa", "the object")


@case
def post_object_tagging_and_cors(t):
    """The `tagging` field (XML) tags the object [LS test_post_object_with_tags]; a POST from an
    origin a rule allows gets the CORS headers a page needs to read the answer [CORS]."""
    name = t.bucket("posttag")
    tagging = "<Tagging><TagSet><Tag><Key>TagName</Key><Value>TagValue</Value></Tag></TagSet></Tagging>"
    put_cors(t, name, [{"AllowedOrigins": ["https://app.example.org"], "AllowedMethods": ["POST"], "ExposeHeaders": ["ETag", "Location"]}])
    url, fields = presigned_post(t, name, "tagged.txt", fields={"tagging": tagging}, conditions=[["eq", "$tagging", tagging]])
    origin = "https://app.example.org"
    check_preflight_ok(
        preflight(url, origin, "POST"), "preflight of the POST upload", origin, ["POST"], expose=["ETag", "Location"]
    )
    answer = post_form(url, fields, b"tagged body", headers={"Origin": origin})
    if answer.status != 204:
        fail(f"POST with tagging and Origin: {answer.show()}")
    check_cors_allowed(answer, "POST from an allowed origin", origin, ["POST"], expose=["ETag", "Location"])
    same_tags(t.s3.get_object_tagging(Bucket=name, Key="tagged.txt")["TagSet"],
        [{"Key": "TagName", "Value": "TagValue"}],
        "tags from the POST's tagging field",
    )
    # Not XML: 400 MalformedXML, nothing stored [LS test_post_object_with_tags "tagging-error"].
    url, fields = presigned_post(t, name, "badtag.txt", fields={"tagging": "not-xml"}, conditions=[["eq", "$tagging", "not-xml"]])
    expect_raw_error(post_form(url, fields, b"x"), 400, "MalformedXML", "a tagging field that is not XML")
    check_no_object(t, name, "badtag.txt", "nothing stored")


# --- Bucket policy and anonymous reads --------------------------------------


@case
def policy_round_trip(t):
    name = t.bucket("polcrud")
    # [LS test_bucket_policy_crud "get-bucket-default-policy": 404 NoSuchBucketPolicy
    # "The bucket policy does not exist"]
    exc = expect_error("NoSuchBucketPolicy", t.s3.get_bucket_policy, Bucket=name, status=404)
    eq(error_of(exc)[2], "The bucket policy does not exist", "message of NoSuchBucketPolicy")
    expect_error("NoSuchBucketPolicy", t.s3.get_bucket_policy_status, Bucket=name, status=404)
    policy = public_read_policy(name)
    put_policy(t, name, policy)  # 204 [LS "put-bucket-policy"]
    got = t.s3.get_bucket_policy(Bucket=name)
    eq(status_of(got), 200, "GetBucketPolicy")
    same_policy(got["Policy"], policy, "GetBucketPolicy returns the policy put")
    status = t.s3.get_bucket_policy_status(Bucket=name)
    eq(status.get("PolicyStatus"), {"IsPublic": True}, "GetBucketPolicyStatus of a public-read policy")
    # The principal as {"AWS": "*"} is the same policy [LS _simple_bucket_policy].
    policy["Statement"][0]["Principal"] = {"AWS": "*"}
    put_policy(t, name, policy)
    same_policy(t.s3.get_bucket_policy(Bucket=name)["Policy"], policy, "GetBucketPolicy after replacing it")
    eq(status_of(t.s3.delete_bucket_policy(Bucket=name)), 204, "DeleteBucketPolicy")
    expect_error("NoSuchBucketPolicy", t.s3.get_bucket_policy, Bucket=name, status=404)
    # Deleting again: 204 [LS "delete-bucket-policy-after-delete"].
    eq(status_of(t.s3.delete_bucket_policy(Bucket=name)), 204, "DeleteBucketPolicy without a policy")


@case
def policy_refused_documents(t):
    name = t.bucket("polbad")
    # [LS test_bucket_policy_exc]: not JSON: "Policies must be valid JSON and the first byte
    # must be '{'"; `{}`: "Missing required field Statement".
    for text in ("invalid json", "[]"):
        exc = expect_error("MalformedPolicy", t.s3.put_bucket_policy, Bucket=name, Policy=text, status=400)
        eq(error_of(exc)[2], "Policies must be valid JSON and the first byte must be '{'", f"message for {text!r}")
    exc = expect_error("MalformedPolicy", t.s3.put_bucket_policy, Bucket=name, Policy="{}", status=400)
    eq(error_of(exc)[2], "Missing required field Statement", "message for {}")
    expect_error("MalformedPolicy", t.s3.put_bucket_policy, Bucket=name, Policy='{"Statement": [', status=400)
    # A resource outside the bucket: "Policy has invalid resource".
    other = public_read_policy(name, "arn:aws:s3:::some-other-bucket/*")
    exc = expect_error("MalformedPolicy", t.s3.put_bucket_policy, Bucket=name, Policy=json.dumps(other), status=400)
    eq(error_of(exc)[2], "Policy has invalid resource", "message for another bucket's resource")
    # An object action on the bucket's own ARN: "Action does not apply to any resource(s) in statement"
    # (versity/versitygw issue 645, from AWS's answer); an Effect that is neither Allow nor Deny:
    # "Invalid effect: hello" (versitygw issue 647).
    mismatch = public_read_policy(name, f"arn:aws:s3:::{name}")
    exc = expect_error("MalformedPolicy", t.s3.put_bucket_policy, Bucket=name, Policy=json.dumps(mismatch), status=400)
    eq(error_of(exc)[2], "Action does not apply to any resource(s) in statement", "message for GetObject on the bucket ARN")
    effect = public_read_policy(name)
    effect["Statement"][0]["Effect"] = "hello"
    exc = expect_error("MalformedPolicy", t.s3.put_bucket_policy, Bucket=name, Policy=json.dumps(effect), status=400)
    eq(error_of(exc)[2], "Invalid effect: hello", "message for an unknown Effect")
    expect_error("NoSuchBucketPolicy", t.s3.get_bucket_policy, Bucket=name, status=404)
    missing = t.missing()
    for fn, kwargs in (
        (t.s3.get_bucket_policy, {}),
        (t.s3.put_bucket_policy, {"Policy": json.dumps(public_read_policy(missing))}),
        (t.s3.delete_bucket_policy, {}),
        (t.s3.get_bucket_policy_status, {}),
    ):
        expect_error("NoSuchBucket", fn, Bucket=missing, status=404, **kwargs)


@case
def policy_public_read_anonymous(t):
    """An anonymous (unsigned) client reads a public-read bucket's objects and nothing more
    [Policy; GetObject; ceph test_bucket_policy]."""
    name = t.bucket("polpub")
    data = b"public bytes " * 100
    t.put(name, "docs/readme.txt", data, ContentType="text/plain")
    # Without a policy an anonymous client gets 403 AccessDenied for everything.
    expect_error("AccessDenied", anon_get, t, name, "docs/readme.txt", status=403)
    expect_status(403, t.anon.head_object, Bucket=name, Key="docs/readme.txt")
    expect_error("AccessDenied", t.anon.list_objects_v2, Bucket=name, status=403)
    put_policy(t, name, public_read_policy(name))
    got = anon_get(t, name, "docs/readme.txt")
    eq(got["Body"].read(), data, "anonymous GET of a public object")
    eq(got["ContentType"], "text/plain", "its Content-Type")
    eq(got["ETag"], etag_of(data), "its ETag")
    head = t.anon.head_object(Bucket=name, Key="docs/readme.txt")
    eq(head["ContentLength"], len(data), "anonymous HEAD")
    got = t.anon.get_object(Bucket=name, Key="docs/readme.txt", Range="bytes=0-5")
    eq((status_of(got), got["Body"].read()), (206, data[:6]), "anonymous ranged GET")
    # The plain URL, as a browser's <img src> or fetch() sends it.
    answer = raw("GET", t.url(name, "docs/readme.txt"))
    eq((answer.status, answer.body), (200, data), "plain GET of the object's URL")
    # A missing key without s3:ListBucket: 403, so a stranger cannot tell what exists [GetObject].
    expect_error("AccessDenied", anon_get, t, name, "docs/absent.txt", status=403)
    expect_status(403, t.anon.head_object, Bucket=name, Key="docs/absent.txt")
    # Writes, deletes, listings and the policy itself stay the owner's.
    expect_error("AccessDenied", t.anon.put_object, Bucket=name, Key="docs/readme.txt", Body=b"defaced", status=403)
    expect_error("AccessDenied", t.anon.put_object, Bucket=name, Key="new.txt", Body=b"spam", status=403)
    expect_error("AccessDenied", t.anon.delete_object, Bucket=name, Key="docs/readme.txt", status=403)
    expect_error("AccessDenied", t.anon.list_objects_v2, Bucket=name, status=403)
    expect_error("AccessDenied", t.anon.get_bucket_policy, Bucket=name, status=403)
    expect_error("AccessDenied", t.anon.delete_bucket_policy, Bucket=name, status=403)
    eq(t.s3.get_object(Bucket=name, Key="docs/readme.txt")["Body"].read(), data, "the object after refused writes")
    check_no_object(t, name, "new.txt", "no anonymous upload")
    # Another bucket of the same owner stays private.
    private = t.bucket("polpriv")
    t.put(private, "docs/readme.txt", b"secret")
    expect_error("AccessDenied", anon_get, t, private, "docs/readme.txt", status=403)
    # DeleteBucketPolicy makes the bucket private again.
    t.s3.delete_bucket_policy(Bucket=name)
    expect_error("AccessDenied", anon_get, t, name, "docs/readme.txt", status=403)
    expect_status(403, t.anon.head_object, Bucket=name, Key="docs/readme.txt")


@case
def policy_prefix_only(t):
    """Resource arn:aws:s3:::BUCKET/public/* opens that prefix and nothing else [Policy]."""
    name = t.bucket("polprefix")
    for key in ("public/a.txt", "public/sub/b.txt", "private/c.txt", "top.txt", "publicity.txt"):
        t.put(name, key, key.encode())
    put_policy(t, name, public_read_policy(name, f"arn:aws:s3:::{name}/public/*"))
    for key in ("public/a.txt", "public/sub/b.txt"):
        eq(anon_get(t, name, key)["Body"].read(), key.encode(), f"anonymous GET of {key}")
    for key in ("private/c.txt", "top.txt", "publicity.txt"):
        expect_error("AccessDenied", anon_get, t, name, key, status=403)
    expect_error("AccessDenied", t.anon.list_objects_v2, Bucket=name, Prefix="public/", status=403)


@case
def policy_list_bucket(t):
    """s3:ListBucket on arn:aws:s3:::BUCKET lets anyone list; with it a missing key is 404
    NoSuchKey rather than 403 [Policy; GetObject; ceph test_bucket_policy]."""
    name = t.bucket("pollist")
    for key in ("a.txt", "dir/b.txt"):
        t.put(name, key, key.encode())
    policy = {
        "Version": "2012-10-17",
        "Statement": [
            {"Effect": "Allow", "Principal": "*", "Action": "s3:ListBucket", "Resource": f"arn:aws:s3:::{name}"},
            {"Effect": "Allow", "Principal": "*", "Action": "s3:GetObject", "Resource": f"arn:aws:s3:::{name}/*"},
        ],
    }
    put_policy(t, name, policy)
    same_policy(t.s3.get_bucket_policy(Bucket=name)["Policy"], policy, "GetBucketPolicy of two statements")
    listing = t.anon.list_objects_v2(Bucket=name)
    eq([o["Key"] for o in listing.get("Contents", [])], ["a.txt", "dir/b.txt"], "anonymous ListObjectsV2")
    listing = t.anon.list_objects_v2(Bucket=name, Delimiter="/")
    eq([p["Prefix"] for p in listing.get("CommonPrefixes", [])], ["dir/"], "anonymous listing with a delimiter")
    eq(anon_get(t, name, "dir/b.txt")["Body"].read(), b"dir/b.txt", "anonymous GET")
    expect_error("NoSuchKey", anon_get, t, name, "absent.txt", status=404)
    expect_status(404, t.anon.head_object, Bucket=name, Key="absent.txt")
    expect_error("AccessDenied", t.anon.put_object, Bucket=name, Key="x", Body=b"x", status=403)
    # ListBucket alone lists but does not read.
    put_policy(t, name, {"Version": "2012-10-17", "Statement": [policy["Statement"][0]]})
    eq(len(t.anon.list_objects_v2(Bucket=name).get("Contents", [])), 2, "listing with ListBucket only")
    expect_error("AccessDenied", anon_get, t, name, "a.txt", status=403)


@case
def policy_mc_download_shape(t):
    """The policy `mc anonymous set download` writes (minio-go's readonly policy): two statements,
    Principal {"AWS": ["*"]}, actions and resources as lists."""
    name = t.bucket("polmc")
    t.put(name, "file.txt", b"mc shape")
    policy = {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Principal": {"AWS": ["*"]},
                "Action": ["s3:GetBucketLocation", "s3:ListBucket"],
                "Resource": [f"arn:aws:s3:::{name}"],
            },
            {
                "Effect": "Allow",
                "Principal": {"AWS": ["*"]},
                "Action": ["s3:GetObject"],
                "Resource": [f"arn:aws:s3:::{name}/*"],
            },
        ],
    }
    put_policy(t, name, policy)
    same_policy(t.s3.get_bucket_policy(Bucket=name)["Policy"], policy, "GetBucketPolicy of mc's policy")
    eq(t.s3.get_bucket_policy_status(Bucket=name).get("PolicyStatus"), {"IsPublic": True}, "mc's policy is public")
    eq([o["Key"] for o in t.anon.list_objects_v2(Bucket=name).get("Contents", [])], ["file.txt"], "anonymous listing")
    eq(anon_get(t, name, "file.txt")["Body"].read(), b"mc shape", "anonymous GET")
    location = t.anon.get_bucket_location(Bucket=name)
    eq(status_of(location), 200, "anonymous GetBucketLocation")
    expect_error("AccessDenied", t.anon.put_object, Bucket=name, Key="x", Body=b"x", status=403)
    expect_error("AccessDenied", t.anon.delete_object, Bucket=name, Key="file.txt", status=403)


@case
def store_public_reads_are_sandboxed(t):
    """[this store, not AWS] A public object is served from the store's own origin, so an anonymous
    read says `X-Content-Type-Options: nosniff` and a Content-Security-Policy with `sandbox`: an
    uploaded HTML or SVG page cannot run script as the store."""
    name = t.bucket("polsafe")
    t.put(name, "page.html", b"<script>alert(document.cookie)</script>", ContentType="text/html")
    t.put(name, "pic.svg", b"<svg xmlns='http://www.w3.org/2000/svg'><script>1</script></svg>", ContentType="image/svg+xml")
    put_policy(t, name, public_read_policy(name))
    for key in ("page.html", "pic.svg"):
        for method in ("GET", "HEAD"):
            answer = raw(method, t.url(name, key))
            eq(answer.status, 200, f"anonymous {method} of {key}")
            eq(answer.header("X-Content-Type-Options"), "nosniff", f"X-Content-Type-Options of an anonymous {method} of {key}")
            csp = answer.header("Content-Security-Policy") or ""
            check("sandbox" in csp, f"Content-Security-Policy of an anonymous {method} of {key} must sandbox it: {csp!r}")


@case
def store_policy_outside_subset_refused(t):
    """[this store, not AWS] A policy this store cannot honour is refused (400 MalformedPolicy or 501
    NotImplemented, with a message naming what it supports), never stored: a Deny, a Condition, a
    principal other than *, a write or wildcard action, NotPrincipal / NotAction."""
    name = t.bucket("polsubset")
    good = public_read_policy(name)
    put_policy(t, name, good)
    statement = good["Statement"][0]
    refused = {
        "Effect Deny": {**statement, "Effect": "Deny"},
        "a Condition": {**statement, "Condition": {"IpAddress": {"aws:SourceIp": "192.0.2.0/24"}}},
        "an account principal": {**statement, "Principal": {"AWS": "arn:aws:iam::111122223333:root"}},
        "s3:PutObject": {**statement, "Action": "s3:PutObject"},
        "s3:*": {**statement, "Action": "s3:*"},
        "s3:DeleteObject beside s3:GetObject": {**statement, "Action": ["s3:GetObject", "s3:DeleteObject"]},
        "NotPrincipal": {k: v for k, v in {**statement, "NotPrincipal": {"AWS": "*"}}.items() if k != "Principal"},
        "NotAction": {k: v for k, v in {**statement, "NotAction": "s3:PutObject"}.items() if k != "Action"},
    }
    for what, bad in refused.items():
        document = {"Version": "2012-10-17", "Statement": [bad]}
        try:
            answer = t.s3.put_bucket_policy(Bucket=name, Policy=json.dumps(document))
        except ClientError as exc:
            code, status, message = error_of(exc)
            check(
                (status, code) in ((400, "MalformedPolicy"), (501, "NotImplemented")),
                f"a policy with {what}: expected 400 MalformedPolicy or 501 NotImplemented, got {code} ({status}): {message}",
            )
            check(message and "GetObject" in message, f"a policy with {what}: the message should name what is supported, got {message!r}")
        else:
            fail(f"a policy with {what} was accepted ({status_of(answer)}); this store cannot honour it")
        same_policy(t.s3.get_bucket_policy(Bucket=name)["Policy"], good, f"the policy in force after refusing {what}")


# --- Tagging -----------------------------------------------------------------


def same_tags(got, expected, what):
    """A TagSet, in any order: S3 promises no order for tags."""
    eq(sorted(got, key=lambda tag: tag["Key"]), sorted(expected, key=lambda tag: tag["Key"]), what)


def tag_count(response):
    return headers_of(response).get("x-amz-tagging-count")


@case
def object_tagging_round_trip(t):
    """[LS test_object_tagging_crud, test_head_object_with_tags; ceph test_get_obj_tagging,
    test_get_obj_head_tagging, test_put_modify_tags, test_put_delete_tags]"""
    name = t.bucket("tags")
    t.put(name, "k", b"tagged")
    got = t.s3.get_object_tagging(Bucket=name, Key="k")
    eq((status_of(got), got["TagSet"]), (200, []), "GetObjectTagging of an untagged object")
    eq(tag_count(t.s3.head_object(Bucket=name, Key="k")), None, "x-amz-tagging-count of an untagged object")
    tags = [{"Key": "tag1", "Value": "tag1"}, {"Key": "tag2", "Value": ""}]
    answer = t.s3.put_object_tagging(Bucket=name, Key="k", Tagging={"TagSet": tags})
    eq(status_of(answer), 200, "PutObjectTagging")
    same_tags(t.s3.get_object_tagging(Bucket=name, Key="k")["TagSet"], tags, "GetObjectTagging after PutObjectTagging")
    eq(tag_count(t.s3.head_object(Bucket=name, Key="k")), "2", "x-amz-tagging-count on HeadObject")
    got = t.s3.get_object(Bucket=name, Key="k")
    eq((tag_count(got), got.get("TagCount")), ("2", 2), "x-amz-tagging-count on GetObject")
    eq(got["Body"].read(), b"tagged", "tagging leaves the body alone")
    tags = [{"Key": "tag3", "Value": "tag3"}]
    t.s3.put_object_tagging(Bucket=name, Key="k", Tagging={"TagSet": tags})
    same_tags(t.s3.get_object_tagging(Bucket=name, Key="k")["TagSet"], tags, "a second PutObjectTagging replaces the set")
    eq(tag_count(t.s3.get_object(Bucket=name, Key="k")), "1", "x-amz-tagging-count after replacing")
    eq(status_of(t.s3.delete_object_tagging(Bucket=name, Key="k")), 204, "DeleteObjectTagging")
    same_tags(t.s3.get_object_tagging(Bucket=name, Key="k")["TagSet"], [], "GetObjectTagging after DeleteObjectTagging")
    eq(tag_count(t.s3.get_object(Bucket=name, Key="k")), None, "no x-amz-tagging-count once untagged")
    # An empty TagSet removes the tags too [LS test_head_object_with_tags "head-obj-after-removal"].
    t.s3.put_object_tagging(Bucket=name, Key="k", Tagging={"TagSet": tags})
    t.s3.put_object_tagging(Bucket=name, Key="k", Tagging={"TagSet": []})
    same_tags(t.s3.get_object_tagging(Bucket=name, Key="k")["TagSet"], [], "after an empty PutObjectTagging")
    # Letters of any script, digits, spaces and + - = . _ : / @ are allowed [Tagging].
    tags = [{"Key": "projet été", "Value": "a+b=c.d_e:f/g@h-i"}, {"Key": "path/x", "Value": "1 + 1 = 2"}]
    t.s3.put_object_tagging(Bucket=name, Key="k", Tagging={"TagSet": tags})
    same_tags(t.s3.get_object_tagging(Bucket=name, Key="k")["TagSet"], tags, "tags with every allowed punctuation")
    # [LS test_object_tagging_exc]
    for fn, kwargs in (
        (t.s3.get_object_tagging, {}),
        (t.s3.put_object_tagging, {"Tagging": {"TagSet": []}}),
        (t.s3.delete_object_tagging, {}),
    ):
        expect_error("NoSuchKey", fn, Bucket=name, Key="absent", status=404, **kwargs)
        expect_error("NoSuchBucket", fn, Bucket=t.missing(), Key="k", status=404, **kwargs)


@case
def object_tagging_on_put(t):
    """x-amz-tagging on PutObject (a URL-encoded query string) [LS test_put_object_with_tags,
    test_object_tags_delete_or_overwrite_object, test_object_tagging_exc; ceph test_put_obj_with_tags]."""
    name = t.bucket("tagput")
    answer = t.put(name, "k", b"body", Tagging="tag1=tag1&tag2=tag2&tag=")
    got = sorted(t.s3.get_object_tagging(Bucket=name, Key="k")["TagSet"], key=lambda tag: tag["Key"])
    eq(got, [{"Key": "tag", "Value": ""}, {"Key": "tag1", "Value": "tag1"}, {"Key": "tag2", "Value": "tag2"}], "tags from x-amz-tagging")
    eq(tag_count(t.s3.head_object(Bucket=name, Key="k")), "3", "x-amz-tagging-count")
    eq(tag_count(answer), None, "PutObject's own answer has no x-amz-tagging-count")
    t.put(name, "enc", b"body", Tagging=urllib.parse.urlencode({"a b": "c+d", "é": "1=1/2"}))
    got = sorted(t.s3.get_object_tagging(Bucket=name, Key="enc")["TagSet"], key=lambda tag: tag["Key"])
    eq(got, [{"Key": "a b", "Value": "c+d"}, {"Key": "é", "Value": "1=1/2"}], "URL-encoded tag keys and values")
    # A new PutObject of the key starts untagged; so does a key deleted and put again.
    t.put(name, "k", b"overwritten")
    same_tags(t.s3.get_object_tagging(Bucket=name, Key="k")["TagSet"], [], "tags after overwriting the object")
    # Duplicate keys: 400 InvalidArgument naming x-amz-tagging.
    exc = expect_error("InvalidArgument", t.s3.put_object, Bucket=name, Key="dup", Body=b"x", Tagging="key1=val1&key1=val2", status=400)
    eq(exc.response["Error"].get("ArgumentName"), "x-amz-tagging", "ArgumentName of a bad x-amz-tagging")
    check_no_object(t, name, "dup", "no object from a refused PutObject")
    # A multipart upload takes the tags at creation [ceph test_set_multipart_tagging].
    upload = t.s3.create_multipart_upload(Bucket=name, Key="mp", Tagging="Hello=World&foo=bar")["UploadId"]
    part = t.s3.upload_part(Bucket=name, Key="mp", UploadId=upload, PartNumber=1, Body=b"part")
    t.s3.complete_multipart_upload(
        Bucket=name, Key="mp", UploadId=upload, MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": part["ETag"]}]}
    )
    got = sorted(t.s3.get_object_tagging(Bucket=name, Key="mp")["TagSet"], key=lambda tag: tag["Key"])
    eq(got, [{"Key": "Hello", "Value": "World"}, {"Key": "foo", "Value": "bar"}], "tags of a multipart upload")


@case
def object_tagging_copy(t):
    """CopyObject copies the source's tags (x-amz-tagging ignored) unless
    x-amz-tagging-directive is REPLACE, which takes x-amz-tagging or nothing [LS
    test_s3_copy_tagging_directive[COPY|REPLACE|None]]."""
    name = t.bucket("tagcopy")
    t.put(name, "src", b"test", Tagging="key1=value1")
    source = {"Bucket": name, "Key": "src"}
    tag1 = [{"Key": "key1", "Value": "value1"}]
    tag2 = [{"Key": "key2", "Value": "value2"}]
    for directive, with_tagging, expected in (
        (None, True, tag1),
        (None, False, tag1),
        ("COPY", True, tag1),
        ("REPLACE", True, tag2),
        ("REPLACE", False, []),
    ):
        kwargs = {"TaggingDirective": directive} if directive else {}
        if with_tagging:
            kwargs["Tagging"] = "key2=value2"
        key = f"copy-{directive}-{with_tagging}"
        t.s3.copy_object(Bucket=name, Key=key, CopySource=source, **kwargs)
        same_tags(t.s3.get_object_tagging(Bucket=name, Key=key)["TagSet"], expected, f"tags of a copy ({directive}, Tagging={with_tagging})")
    same_tags(t.s3.get_object_tagging(Bucket=name, Key="src")["TagSet"], tag1, "the source keeps its tags")


@case
def object_tagging_versions(t):
    """Tags belong to a version [LS test_object_tagging_versioned]."""
    name = t.bucket("tagver", "Enabled")
    v1 = t.put(name, "k", b"test-0", Tagging="test_tag=tagv1")["VersionId"]
    v2 = t.put(name, "k", b"test-1")["VersionId"]
    tags3 = [{"Key": "tag3", "Value": "tag3"}]
    answer = t.s3.put_object_tagging(Bucket=name, Key="k", Tagging={"TagSet": tags3})
    eq(answer.get("VersionId"), v2, "PutObjectTagging without a version tags the current one")
    got = t.s3.get_object_tagging(Bucket=name, Key="k")
    eq((got["TagSet"], got.get("VersionId")), (tags3, v2), "GetObjectTagging of the current version")
    got = t.s3.get_object_tagging(Bucket=name, Key="k", VersionId=v1)
    eq((got["TagSet"], got.get("VersionId")), ([{"Key": "test_tag", "Value": "tagv1"}], v1), "the older version's tags")
    tags1 = [{"Key": "tag1", "Value": "tag1"}]
    answer = t.s3.put_object_tagging(Bucket=name, Key="k", VersionId=v1, Tagging={"TagSet": tags1})
    eq(answer.get("VersionId"), v1, "PutObjectTagging by version id")
    same_tags(t.s3.get_object_tagging(Bucket=name, Key="k", VersionId=v1)["TagSet"], tags1, "tags of v1 after tagging it")
    same_tags(t.s3.get_object_tagging(Bucket=name, Key="k")["TagSet"], tags3, "v2 keeps its own tags")
    eq(tag_count(t.s3.head_object(Bucket=name, Key="k", VersionId=v1)), "1", "x-amz-tagging-count of v1")
    t.s3.delete_object_tagging(Bucket=name, Key="k", VersionId=v1)
    same_tags(t.s3.get_object_tagging(Bucket=name, Key="k", VersionId=v1)["TagSet"], [], "v1 after DeleteObjectTagging by id")
    same_tags(t.s3.get_object_tagging(Bucket=name, Key="k")["TagSet"], tags3, "v2 untouched")
    # A delete marker has no tags: 405 MethodNotAllowed, by id or as the current version.
    marker = t.s3.delete_object(Bucket=name, Key="k")["VersionId"]
    for version in ({"VersionId": marker}, {}):
        expect_error("MethodNotAllowed", t.s3.get_object_tagging, Bucket=name, Key="k", status=405, **version)
        expect_error("MethodNotAllowed", t.s3.put_object_tagging, Bucket=name, Key="k", Tagging={"TagSet": tags1}, status=405, **version)
        expect_error("MethodNotAllowed", t.s3.delete_object_tagging, Bucket=name, Key="k", status=405, **version)
    same_tags(t.s3.get_object_tagging(Bucket=name, Key="k", VersionId=v2)["TagSet"], tags3, "v2 under the delete marker")


@case
def object_tagging_limits(t):
    """10 tags, keys of 128 and values of 256 characters; past that 400 InvalidTag (or
    BadRequest for the count), and the tags stay as they were [Tagging; ceph test_put_max_tags,
    test_put_excess_tags, test_put_max_kvsize_tags, test_put_excess_key_tags,
    test_put_excess_val_tags; LS test_tagging_validation]."""
    name = t.bucket("taglim")
    t.put(name, "k", b"x")
    ten = [{"Key": str(i), "Value": str(i)} for i in range(10)]
    t.s3.put_object_tagging(Bucket=name, Key="k", Tagging={"TagSet": ten})
    same_tags(t.s3.get_object_tagging(Bucket=name, Key="k")["TagSet"], ten, "10 tags")
    big = [{"Key": f"{i}" + "k" * 127, "Value": "v" * 256} for i in range(10)]
    t.s3.put_object_tagging(Bucket=name, Key="k", Tagging={"TagSet": big})
    same_tags(t.s3.get_object_tagging(Bucket=name, Key="k")["TagSet"], big, "keys of 128 and values of 256 characters")
    refused = {
        "11 tags": ([{"Key": str(i), "Value": str(i)} for i in range(11)], ("InvalidTag", "BadRequest")),
        "a key of 129 characters": ([{"Key": "k" * 129, "Value": "v"}], ("InvalidTag",)),
        "a value of 257 characters": ([{"Key": "k", "Value": "v" * 257}], ("InvalidTag",)),
        "a duplicate key": ([{"Key": "Key1", "Value": "Val1"}, {"Key": "Key1", "Value": "Val1"}], ("InvalidTag",)),
        "an aws: key": ([{"Key": "aws:prefixed", "Value": "Val1"}], ("InvalidTag",)),
        "a comma in the key": ([{"Key": "Key1,Key2", "Value": "Val1"}], ("InvalidTag",)),
    }
    for what, (tagset, codes) in refused.items():
        expect_error(codes, t.s3.put_object_tagging, Bucket=name, Key="k", Tagging={"TagSet": tagset}, status=400)
        same_tags(t.s3.get_object_tagging(Bucket=name, Key="k")["TagSet"], big, f"tags after refusing {what}")
    expect_error(
        ("InvalidTag", "BadRequest", "InvalidArgument"),
        t.s3.put_object,
        Bucket=name,
        Key="many",
        Body=b"x",
        Tagging="&".join(f"k{i}=v" for i in range(11)),
        status=400,
    )
    check_no_object(t, name, "many", "no object from a PutObject with 11 tags")


@case
def bucket_tagging_round_trip(t):
    """[LS test_bucket_tagging_crud, test_bucket_tagging_exc, test_tagging_validation;
    ceph test_set_bucket_tagging]"""
    name = t.bucket("btags")
    exc = expect_error("NoSuchTagSet", t.s3.get_bucket_tagging, Bucket=name, status=404)
    eq(error_of(exc)[2], "The TagSet does not exist", "message of NoSuchTagSet")
    tags = [{"Key": "tag1", "Value": "tag1"}, {"Key": "tag2", "Value": ""}]
    eq(status_of(t.s3.put_bucket_tagging(Bucket=name, Tagging={"TagSet": tags})), 204, "PutBucketTagging")
    same_tags(t.s3.get_bucket_tagging(Bucket=name)["TagSet"], tags, "GetBucketTagging")
    tags = [{"Key": "tag3", "Value": "tag3"}]
    t.s3.put_bucket_tagging(Bucket=name, Tagging={"TagSet": tags})
    same_tags(t.s3.get_bucket_tagging(Bucket=name)["TagSet"], tags, "GetBucketTagging after replacing")
    eq(status_of(t.s3.delete_bucket_tagging(Bucket=name)), 204, "DeleteBucketTagging")
    eq(status_of(t.s3.delete_bucket_tagging(Bucket=name)), 204, "DeleteBucketTagging again")
    expect_error("NoSuchTagSet", t.s3.get_bucket_tagging, Bucket=name, status=404)
    # An empty TagSet is no tag set [LS "put-bucket-tags-empty"].
    eq(status_of(t.s3.put_bucket_tagging(Bucket=name, Tagging={"TagSet": []})), 204, "PutBucketTagging with no tag")
    expect_error("NoSuchTagSet", t.s3.get_bucket_tagging, Bucket=name, status=404)
    # Refused [LS test_tagging_validation "put-bucket-tags-duplicate-keys", "-aws-prefixed", "-invalid-key"].
    t.s3.put_bucket_tagging(Bucket=name, Tagging={"TagSet": tags})
    for tagset in (
        [{"Key": "Key1", "Value": "Val1"}, {"Key": "Key1", "Value": "Val1"}],
        [{"Key": "aws:prefixed", "Value": "Val1"}],
        [{"Key": "Key1,Key2", "Value": "Val1"}],
        [{"Key": "k" * 129, "Value": "v"}],
    ):
        expect_error("InvalidTag", t.s3.put_bucket_tagging, Bucket=name, Tagging={"TagSet": tagset}, status=400)
    same_tags(t.s3.get_bucket_tagging(Bucket=name)["TagSet"], tags, "bucket tags after refused PUTs")
    # Bucket tags are not object tags.
    t.put(name, "obj", b"x")
    same_tags(t.s3.get_object_tagging(Bucket=name, Key="obj")["TagSet"], [], "an object does not inherit bucket tags")
    missing = t.missing()
    expect_error("NoSuchBucket", t.s3.get_bucket_tagging, Bucket=missing, status=404)
    expect_error("NoSuchBucket", t.s3.delete_bucket_tagging, Bucket=missing, status=404)
    expect_error("NoSuchBucket", t.s3.put_bucket_tagging, Bucket=missing, Tagging={"TagSet": []}, status=404)


# --- What S3 answers for a bucket's other configurations ---------------------


@case
def bucket_configuration_of_missing_bucket(t):
    """Every bucket-level read of a bucket that does not exist: 404 NoSuchBucket [LS
    test_s3_default_bucket_encryption_exc, test_bucket_tagging_exc, and the NoSuchBucket
    answers recorded throughout test_s3.py]."""
    missing = t.missing()
    for op in (
        "get_bucket_policy",
        "get_bucket_policy_status",
        "get_bucket_cors",
        "get_bucket_tagging",
        "get_bucket_acl",
        "get_object_lock_configuration",
        "get_bucket_lifecycle_configuration",
        "get_bucket_encryption",
        "get_bucket_website",
        "get_public_access_block",
        "get_bucket_ownership_controls",
        "get_bucket_notification_configuration",
        "get_bucket_logging",
        "get_bucket_request_payment",
        "get_bucket_accelerate_configuration",
        "get_bucket_versioning",
        "get_bucket_location",
    ):
        exc = expect_error("NoSuchBucket", getattr(t.s3, op), Bucket=missing, status=404)
        eq(error_of(exc)[2], "The specified bucket does not exist", f"message of NoSuchBucket from {op}")


@case
def bucket_configuration_defaults(t):
    """What a new bucket answers for the configurations it does not have."""
    name = t.bucket("defaults")
    # [LS test_s3_default_bucket_encryption_exc codes; see the module docstring for why 404]
    expect_error("ServerSideEncryptionConfigurationNotFoundError", t.s3.get_bucket_encryption, Bucket=name, status=404)
    expect_error("NoSuchWebsiteConfiguration", t.s3.get_bucket_website, Bucket=name, status=404)
    # [LS test_crud_public_access_block "get-public-access-block-after-delete"]
    expect_error("NoSuchPublicAccessBlockConfiguration", t.s3.get_public_access_block, Bucket=name, status=404)
    # [LS test_crud_bucket_ownership_controls "default-ownership"; Ownership]
    got = t.s3.get_bucket_ownership_controls(Bucket=name)
    eq(got["OwnershipControls"], {"Rules": [{"ObjectOwnership": "BucketOwnerEnforced"}]}, "GetBucketOwnershipControls")
    expect_error("NoSuchLifecycleConfiguration", t.s3.get_bucket_lifecycle_configuration, Bucket=name, status=404)
    expect_error("ObjectLockConfigurationNotFoundError", t.s3.get_object_lock_configuration, Bucket=name, status=404)
    expect_error("NoSuchBucketPolicy", t.s3.get_bucket_policy, Bucket=name, status=404)
    expect_error("NoSuchCORSConfiguration", t.s3.get_bucket_cors, Bucket=name, status=404)
    expect_error("NoSuchTagSet", t.s3.get_bucket_tagging, Bucket=name, status=404)
    # 200 with an empty configuration.
    got = t.s3.get_bucket_notification_configuration(Bucket=name)
    eq(status_of(got), 200, "GetBucketNotificationConfiguration")
    for field in ("TopicConfigurations", "QueueConfigurations", "LambdaFunctionConfigurations", "EventBridgeConfiguration"):
        check(not got.get(field), f"GetBucketNotificationConfiguration of a new bucket has {field}: {got.get(field)!r}")
    got = t.s3.get_bucket_logging(Bucket=name)
    eq(status_of(got), 200, "GetBucketLogging")
    check("LoggingEnabled" not in got, f"GetBucketLogging of a new bucket: {got.get('LoggingEnabled')!r}")
    got = t.s3.get_bucket_request_payment(Bucket=name)
    eq((status_of(got), got.get("Payer")), (200, "BucketOwner"), "GetBucketRequestPayment")
    # [LS test_bucket_acceleration_configuration_crud "get-bucket-default-accelerate-config"]
    got = t.s3.get_bucket_accelerate_configuration(Bucket=name)
    eq(status_of(got), 200, "GetBucketAccelerateConfiguration")
    check("Status" not in got, f"GetBucketAccelerateConfiguration of a new bucket has Status {got.get('Status')!r}")


def check_owner_only_acl(acl, what):
    eq(status_of(acl), 200, what)
    owner = acl.get("Owner", {}).get("ID")
    check(owner, f"{what}: an Owner ID, got {acl.get('Owner')!r}")
    grants = acl.get("Grants", [])
    eq(len(grants), 1, f"{what}: one grant ({grants})")
    grant = grants[0]
    eq(grant.get("Permission"), "FULL_CONTROL", f"{what}: the permission")
    eq(grant.get("Grantee", {}).get("Type"), "CanonicalUser", f"{what}: the grantee type")
    eq(grant.get("Grantee", {}).get("ID"), owner, f"{what}: the grantee is the owner")
    return owner


@case
def acl_reads_show_the_owner(t):
    """GetBucketAcl / GetObjectAcl: the owner with FULL_CONTROL and nothing else [Ownership:
    "Requests to read ACLs always return a response that shows full control for the bucket
    owner"; ceph test_bucket_acl_default, test_object_acl_default; LS test_s3_multipart_upload_acls]."""
    name = t.bucket("acl")
    t.put(name, "k", b"x")
    owner = check_owner_only_acl(t.s3.get_bucket_acl(Bucket=name), "GetBucketAcl")
    eq(check_owner_only_acl(t.s3.get_object_acl(Bucket=name, Key="k"), "GetObjectAcl"), owner, "object and bucket owner")
    listed = t.s3.list_buckets().get("Owner", {}).get("ID")
    if listed is not None:
        eq(listed, owner, "ListBuckets' Owner ID is the ACL's")
    expect_error("NoSuchKey", t.s3.get_object_acl, Bucket=name, Key="absent", status=404)
    # ACL writes other than `private` or owner full control: 400 AccessControlListNotSupported [Ownership].
    for acl in ("public-read", "public-read-write", "authenticated-read"):
        expect_error("AccessControlListNotSupported", t.s3.put_bucket_acl, Bucket=name, ACL=acl, status=400)
        expect_error("AccessControlListNotSupported", t.s3.put_object_acl, Bucket=name, Key="k", ACL=acl, status=400)
    expect_error(
        "AccessControlListNotSupported", t.s3.put_object, Bucket=name, Key="pub", Body=b"x", ACL="public-read", status=400
    )
    check_no_object(t, name, "pub", "no object from a PutObject with a public ACL")
    # bucket-owner-full-control is accepted on PutObject [Ownership].
    t.put(name, "bofc", b"x", ACL="bucket-owner-full-control")
    check_owner_only_acl(t.s3.get_object_acl(Bucket=name, Key="bofc"), "GetObjectAcl of a bucket-owner-full-control PUT")
    check_owner_only_acl(t.s3.get_bucket_acl(Bucket=name), "GetBucketAcl after refused writes")
    expect_error("AccessDenied", anon_get, t, name, "k", status=403)


@case
def store_acl_private_accepted(t):
    """[this store; AWS refuses these on BucketOwnerEnforced buckets] PutBucketAcl and
    PutObjectAcl with the `private` canned ACL answer 200 and change nothing."""
    name = t.bucket("aclpriv")
    t.put(name, "k", b"x")
    eq(status_of(t.s3.put_bucket_acl(Bucket=name, ACL="private")), 200, "PutBucketAcl private")
    eq(status_of(t.s3.put_object_acl(Bucket=name, Key="k", ACL="private")), 200, "PutObjectAcl private")
    check_owner_only_acl(t.s3.get_bucket_acl(Bucket=name), "GetBucketAcl after PutBucketAcl private")
    check_owner_only_acl(t.s3.get_object_acl(Bucket=name, Key="k"), "GetObjectAcl after PutObjectAcl private")
    expect_error("NoSuchKey", t.s3.put_object_acl, Bucket=name, Key="absent", ACL="private", status=404)


def main():
    run_suite(Suite, CASES)


if __name__ == "__main__":
    main()
