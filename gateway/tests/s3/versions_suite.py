#!/usr/bin/env python3
"""S3 bucket versioning held to AWS's documented behaviour (issue 32).

Written from the AWS S3 API reference and from responses recorded against
AWS itself, not from our implementation, so it can stand in for the external
conformance suite that will judge our versioning:

    versions_suite.py --endpoint http://127.0.0.1:PORT --access-key ID --secret SECRET

Every case prints one line (`ok <case>`); the first failure prints what was
sent, what was expected and what came back, and exits 1 (with --keep-going,
every case runs and the failures are listed at the end).

Buckets are named `<prefix>-<what>` with a random prefix, so two runs
against one server do not meet; every case makes its own buckets, and the
cleanup deletes every version and delete marker before the bucket.

Sources cited below:
  [GetObject]    https://docs.aws.amazon.com/AmazonS3/latest/API/API_GetObject.html
  [HeadObject]   https://docs.aws.amazon.com/AmazonS3/latest/API/API_HeadObject.html
  [PutObject]    https://docs.aws.amazon.com/AmazonS3/latest/API/API_PutObject.html
                 (its "versioning suspended" sample answer has no x-amz-version-id)
  [DeleteObject] https://docs.aws.amazon.com/AmazonS3/latest/API/API_DeleteObject.html
  [LOV]          https://docs.aws.amazon.com/AmazonS3/latest/API/API_ListObjectVersions.html
  [DeleteMarker] https://docs.aws.amazon.com/AmazonS3/latest/userguide/DeleteMarker.html
  [Suspended]    https://docs.aws.amazon.com/AmazonS3/latest/userguide/AddingObjectstoVersionSuspendedBuckets.html
  [LS]           localstack/localstack tests/aws/services/s3/test_s3_api.py,
                 test_s3.py and test_s3_list_operations.py: tests marked
                 `aws.validated` whose *.snapshot.json hold the answers AWS
                 gave (status, error code and message, which fields are there).
  [ceph]         ceph/s3-tests s3tests/functional/test_s3.py test_versioning_*.
"""

import base64
import hashlib
import os
import urllib.error
import urllib.parse
import urllib.request
import xml.etree.ElementTree as ET

from suite_harness import BaseSuite, case_registry, main as run_suite
from suite_harness import check, eq, error_of, etag_of, expect_error, fail, headers_of, lacks_header, status_of

MIB = 1 << 20
S3_NS = "{http://s3.amazonaws.com/doc/2006-03-01/}"


def multipart_etag(parts):
    digests = b"".join(hashlib.md5(p).digest() for p in parts)
    return f'"{hashlib.md5(digests).hexdigest()}-{len(parts)}"'


def has_header(response, name, value, what):
    got = headers_of(response).get(name)
    if got != value:
        fail(f"{what}: header {name}: expected {value!r}, got {got!r} (headers {dict(headers_of(response))})")


def real_version_id(vid, what):
    """A version id made under Enabled: present, not `null`, at most 1024 bytes."""
    check(isinstance(vid, str) and vid and vid != "null", f"{what}: expected a version id, got {vid!r}")
    check(len(vid.encode()) <= 1024, f"{what}: version id over 1024 bytes")
    return vid


# ---------------------------------------------------------------------------
# Clients.


class Suite(BaseSuite):
    PREFIX = "vs"

    def versioning(self, bucket, status):
        super().versioning(bucket, status)
        eq(self.s3.get_bucket_versioning(Bucket=bucket).get("Status"), status, f"GetBucketVersioning after {status}")

    def signed(self, method, url, headers=None, body=b""):
        """Send a request signed with SigV4 by hand (urllib); returns (status, headers, body)."""
        return fetch(method, url, self.signed_headers(method, url, headers, body), body)

    def raw_versions(self, bucket, **params):
        """GET /bucket?versions&... signed by hand: (status, parsed root or None, body).

        boto3 always sends encoding-type=url and splits versions from markers;
        the raw XML keeps the order the server gave, which is what paging is
        about. Parameter names use `_` for `-` (key_marker=...)."""
        query = "versions"
        for name, value in params.items():
            query += f"&{name.replace('_', '-')}={urllib.parse.quote(str(value), safe='')}"
        status, _headers, body = self.signed("GET", self.url(bucket, query=query))
        try:
            root = ET.fromstring(body)
        except ET.ParseError:
            root = None
        return status, root, body


def fetch(method, url, headers=None, body=None):
    """An HTTP request by urllib: (status, headers, body), errors included."""
    request = urllib.request.Request(url, data=body or None, method=method, headers=headers or {})
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


def child_text(element, name):
    found = element.find(S3_NS + name)
    if found is None:
        found = element.find(name)
    return None if found is None else (found.text or "")


def raw_entries(root):
    """The ListVersionsResult's Version, DeleteMarker and CommonPrefixes, in document order.

    Each is (kind, key, version id, is latest) with kind `V` or `D`, or
    (`P`, prefix, None, None)."""
    entries = []
    for child in root:
        tag = child.tag.replace(S3_NS, "")
        if tag in ("Version", "DeleteMarker"):
            entries.append(
                (tag[0], child_text(child, "Key"), child_text(child, "VersionId"), child_text(child, "IsLatest"))
            )
        elif tag == "CommonPrefixes":
            entries.append(("P", child_text(child, "Prefix"), None, None))
    return entries


def boto_entries(listing):
    """A boto3 ListObjectVersions page as (kind, key, version id, is latest);
    boto3 splits versions from markers, so the order across the two is lost."""
    out = [("V", v["Key"], v["VersionId"], v["IsLatest"]) for v in listing.get("Versions", [])]
    out += [("D", d["Key"], d["VersionId"], d["IsLatest"]) for d in listing.get("DeleteMarkers", [])]
    return out


def put_versions(t, bucket, key, bodies):
    """PutObject each body in turn; returns the version ids, oldest first."""
    ids = []
    for i, body in enumerate(bodies):
        answer = t.s3.put_object(Bucket=bucket, Key=key, Body=body)
        vid = real_version_id(answer.get("VersionId"), f"PutObject #{i + 1} of {key!r} on an Enabled bucket")
        has_header(answer, "x-amz-version-id", vid, f"PutObject #{i + 1} of {key!r}")
        eq(answer.get("ETag"), etag_of(body), f"PutObject #{i + 1} ETag")
        ids.append(vid)
    eq(len(set(ids)), len(ids), f"version ids of {len(bodies)} PUTs of {key!r} are distinct: {ids}")
    return ids


def get_body(t, bucket, key, **kwargs):
    answer = t.s3.get_object(Bucket=bucket, Key=key, **kwargs)
    return answer, answer["Body"].read()


# ---------------------------------------------------------------------------
# Cases, in the order they run.

CASES, case = case_registry()


@case
def versioning_new_bucket_is_unconfigured(t):
    # A bucket never configured answers 200 with an empty configuration:
    # no Status and no MfaDelete [LS test_bucket_versioning_crud "get-versioning-before"].
    name = t.bucket("vnew")
    answer = t.s3.get_bucket_versioning(Bucket=name)
    eq(status_of(answer), 200, "GetBucketVersioning of a new bucket")
    check("Status" not in answer, f"a new bucket has no versioning Status, got {answer.get('Status')!r}")
    check("MFADelete" not in answer, f"a new bucket has no MFADelete, got {answer.get('MFADelete')!r}")
    status, _headers, body = t.signed("GET", t.url(name, query="versioning"))
    eq(status, 200, "raw GET ?versioning")
    root = ET.fromstring(body)
    eq(root.tag.replace(S3_NS, ""), "VersioningConfiguration", "root element of GET ?versioning")
    check(child_text(root, "Status") is None, f"raw GET ?versioning of a new bucket has a Status: {body!r}")


@case
def versioning_enable_suspend(t):
    name = t.bucket("vset")
    # Suspended straight from never-configured is allowed [LS "put-versioning-suspended-before"].
    t.versioning(name, "Suspended")
    t.versioning(name, "Enabled")
    t.versioning(name, "Enabled")
    t.versioning(name, "Suspended")
    t.versioning(name, "Enabled")
    status, _headers, body = t.signed("GET", t.url(name, query="versioning"))
    eq(status, 200, "raw GET ?versioning")
    eq(child_text(ET.fromstring(body), "Status"), "Enabled", f"raw Status in {body!r}")


def _put_versioning_raw(t, bucket, xml):
    body = xml.encode()
    headers = {
        "Content-Type": "application/xml",
        "Content-MD5": base64.b64encode(hashlib.md5(body).digest()).decode(),
    }
    return t.signed("PUT", t.url(bucket, query="versioning"), headers, body)


@case
def versioning_invalid_status(t):
    name = t.bucket("vbad")
    t.versioning(name, "Enabled")
    # Status is the enum Enabled | Suspended, case sensitive: `enabled` and
    # `Disabled` are 400 MalformedXML [LS test_bucket_versioning_crud
    # "put-versioning-enabled-lowercase", "put-versioning-disabled"].
    for bad in ("Bogus", "enabled", "Disabled", ""):
        xml = f'<VersioningConfiguration xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Status>{bad}</Status></VersioningConfiguration>'
        status, _headers, body = _put_versioning_raw(t, name, xml)
        eq((status, xml_code(body)), (400, "MalformedXML"), f"PUT ?versioning with Status {bad!r}: {body[:300]!r}")
    # Not XML at all: MalformedXML too.
    status, _headers, body = _put_versioning_raw(t, name, "<VersioningConfiguration><Status>Enabled")
    eq((status, xml_code(body)), (400, "MalformedXML"), f"PUT ?versioning with broken XML: {body[:300]!r}")
    # An empty configuration: 400 IllegalVersioningConfigurationException,
    # "The Versioning element must be specified" [LS "put-versioning-empty"].
    expect_error(
        "IllegalVersioningConfigurationException",
        t.s3.put_bucket_versioning,
        Bucket=name,
        VersioningConfiguration={},
        status=400,
    )
    eq(t.s3.get_bucket_versioning(Bucket=name).get("Status"), "Enabled", "Status after refused PUTs")


@case
def versioning_missing_bucket(t):
    missing = f"{t.prefix}-vmissing"
    # [LS "put-versioning-no-bucket", "get-versioning-no-bucket"]
    expect_error("NoSuchBucket", t.s3.get_bucket_versioning, Bucket=missing, status=404)
    expect_error(
        "NoSuchBucket",
        t.s3.put_bucket_versioning,
        Bucket=missing,
        VersioningConfiguration={"Status": "Enabled"},
        status=404,
    )
    expect_error("NoSuchBucket", t.s3.list_object_versions, Bucket=missing, status=404)


@case
def enabled_three_versions(t):
    name = t.bucket("three", "Enabled")
    key = "doc.txt"
    bodies = [b"first", b"second body", b"third body, longest"]
    ids = put_versions(t, name, key, bodies)

    listing = t.s3.list_object_versions(Bucket=name)
    eq(status_of(listing), 200, "ListObjectVersions")
    versions = listing.get("Versions", [])
    check("DeleteMarkers" not in listing, f"no markers yet: {listing.get('DeleteMarkers')}")
    # Newest first within a key [LOV: "versions ... sorted from the most recent"].
    eq([v["VersionId"] for v in versions], ids[::-1], "ListObjectVersions order (newest first)")
    eq([v["IsLatest"] for v in versions], [True, False, False], "IsLatest")
    eq([v["Key"] for v in versions], [key] * 3, "Keys")
    eq([v["ETag"] for v in versions], [etag_of(b) for b in bodies[::-1]], "ETags")
    eq([v["Size"] for v in versions], [len(b) for b in bodies[::-1]], "Sizes")
    for v in versions:
        check(v.get("LastModified") is not None, f"a version without LastModified: {v}")
        check(v.get("StorageClass"), f"a version without StorageClass: {v}")
    eq(listing.get("IsTruncated"), False, "IsTruncated")
    eq(listing.get("Name"), name, "Name")
    eq(listing.get("MaxKeys"), 1000, "MaxKeys default [LOV]")

    for vid, body in zip(ids, bodies):
        answer, got = get_body(t, name, key, VersionId=vid)
        eq(got, body, f"GetObject VersionId={vid}")
        eq(answer.get("VersionId"), vid, "GetObject VersionId")
        has_header(answer, "x-amz-version-id", vid, "GetObject by version")
        eq(answer.get("ETag"), etag_of(body), "GetObject ETag by version")
        head = t.s3.head_object(Bucket=name, Key=key, VersionId=vid)
        eq(head.get("ContentLength"), len(body), f"HeadObject ContentLength of {vid}")
        eq(head.get("ETag"), etag_of(body), f"HeadObject ETag of {vid}")
        has_header(head, "x-amz-version-id", vid, "HeadObject by version")
    answer, got = get_body(t, name, key)
    eq(got, bodies[-1], "GetObject without VersionId reads the newest")
    has_header(answer, "x-amz-version-id", ids[-1], "GetObject of the current version")
    head = t.s3.head_object(Bucket=name, Key=key)
    has_header(head, "x-amz-version-id", ids[-1], "HeadObject of the current version")
    # ListObjectsV2 shows the key once, with the newest size.
    contents = t.s3.list_objects_v2(Bucket=name).get("Contents", [])
    eq([(o["Key"], o["Size"]) for o in contents], [(key, len(bodies[-1]))], "ListObjectsV2")


@case
def enabled_get_version_with_range(t):
    name = t.bucket("range", "Enabled")
    old = b"0123456789abcdefghij"
    ids = put_versions(t, name, "r", [old, b"new and different content, longer than the old"])
    answer = t.s3.get_object(Bucket=name, Key="r", VersionId=ids[0], Range="bytes=5-9")
    eq(status_of(answer), 206, "GetObject VersionId+Range status")
    eq(answer["Body"].read(), old[5:10], "GetObject VersionId+Range body")
    eq(answer.get("ContentRange"), f"bytes 5-9/{len(old)}", "Content-Range of the old version")
    has_header(answer, "x-amz-version-id", ids[0], "GetObject VersionId+Range")


@case
def enabled_delete_marker(t):
    name = t.bucket("marker", "Enabled")
    key = "gone.txt"
    bodies = [b"v1", b"v2 body"]
    ids = put_versions(t, name, key, bodies)

    # A simple DELETE on Enabled: 204, x-amz-delete-marker: true and the
    # marker's version id [DeleteObject; LS "delete-object"].
    answer = t.s3.delete_object(Bucket=name, Key=key)
    eq(status_of(answer), 204, "DeleteObject status")
    eq(answer.get("DeleteMarker"), True, "DeleteObject DeleteMarker")
    has_header(answer, "x-amz-delete-marker", "true", "DeleteObject on Enabled")
    marker = real_version_id(answer.get("VersionId"), "the marker's version id")
    check(marker not in ids, "the marker has a new version id")

    # GET/HEAD without version: 404 NoSuchKey with x-amz-delete-marker: true
    # and the marker's id [GetObject DeleteMarker; LS asserts both headers].
    exc = expect_error("NoSuchKey", t.s3.get_object, Bucket=name, Key=key, status=404)
    has_header(exc, "x-amz-delete-marker", "true", "GetObject of a deleted key")
    has_header(exc, "x-amz-version-id", marker, "GetObject of a deleted key")
    exc = expect_error("404", t.s3.head_object, Bucket=name, Key=key, status=404)
    has_header(exc, "x-amz-delete-marker", "true", "HeadObject of a deleted key [ceph test_delete_marker_versioned]")
    # Older versions still read by id.
    answer, got = get_body(t, name, key, VersionId=ids[1])
    eq(got, bodies[1], "GetObject of the version under the marker")
    # GET the marker by id: 405 MethodNotAllowed, x-amz-delete-marker: true,
    # Last-Modified [GetObject], Allow: DELETE and the version id [LS].
    exc = expect_error("MethodNotAllowed", t.s3.get_object, Bucket=name, Key=key, VersionId=marker, status=405)
    has_header(exc, "x-amz-delete-marker", "true", "GetObject of a marker by id")
    has_header(exc, "x-amz-version-id", marker, "GetObject of a marker by id")
    check(headers_of(exc).get("last-modified"), f"GetObject of a marker by id: no Last-Modified {headers_of(exc)}")
    has_header(exc, "allow", "DELETE", "GetObject of a marker by id")

    listing = t.s3.list_object_versions(Bucket=name)
    markers = listing.get("DeleteMarkers", [])
    eq([(m["Key"], m["VersionId"], m["IsLatest"]) for m in markers], [(key, marker, True)], "DeleteMarkers")
    check(markers[0].get("LastModified") is not None, "a marker has LastModified")
    eq([(v["VersionId"], v["IsLatest"]) for v in listing.get("Versions", [])], [(ids[1], False), (ids[0], False)], "Versions under a marker")
    eq(t.s3.list_objects_v2(Bucket=name).get("KeyCount"), 0, "ListObjectsV2 hides a deleted key")
    check("Contents" not in t.s3.list_objects(Bucket=name), "ListObjects (v1) hides a deleted key")

    # Deleting again stacks a second marker [ceph test_versioning_stack_delete_merkers; LS "delete-object-2"].
    second = t.s3.delete_object(Bucket=name, Key=key)
    eq(second.get("DeleteMarker"), True, "second DeleteObject DeleteMarker")
    marker2 = real_version_id(second.get("VersionId"), "second marker id")
    check(marker2 != marker, "second marker has its own id")
    listing = t.s3.list_object_versions(Bucket=name)
    eq(
        [(m["VersionId"], m["IsLatest"]) for m in listing.get("DeleteMarkers", [])],
        [(marker2, True), (marker, False)],
        "two stacked markers, newest first",
    )

    # Deleting a marker by id: 204, x-amz-delete-marker: true and that id [DeleteObject; LS "delete-delete-marker"].
    for m in (marker2, marker):
        answer = t.s3.delete_object(Bucket=name, Key=key, VersionId=m)
        eq(status_of(answer), 204, "DeleteObject of a marker status")
        has_header(answer, "x-amz-delete-marker", "true", "DeleteObject of a marker by id")
        has_header(answer, "x-amz-version-id", m, "DeleteObject of a marker by id")
    answer, got = get_body(t, name, key)
    eq(got, bodies[1], "the object is back after its markers are deleted")
    has_header(answer, "x-amz-version-id", ids[1], "GetObject after the markers are gone")
    check("DeleteMarkers" not in t.s3.list_object_versions(Bucket=name), "no markers left")

    # A simple DELETE of a key that never existed still writes a marker [LS "delete-wrong-key"].
    answer = t.s3.delete_object(Bucket=name, Key="never-there")
    eq(status_of(answer), 204, "DeleteObject of a missing key")
    has_header(answer, "x-amz-delete-marker", "true", "DeleteObject of a missing key on Enabled")
    ghost = real_version_id(answer.get("VersionId"), "marker of a missing key")
    listing = t.s3.list_object_versions(Bucket=name, Prefix="never")
    eq([(m["Key"], m["VersionId"]) for m in listing.get("DeleteMarkers", [])], [("never-there", ghost)], "marker of a missing key")

    # A PUT after a marker makes a new current version; the marker stays, not latest.
    t.s3.delete_object(Bucket=name, Key=key)
    again = t.s3.put_object(Bucket=name, Key=key, Body=b"v3")
    listing = t.s3.list_object_versions(Bucket=name, Prefix=key)
    eq([(v["VersionId"], v["IsLatest"]) for v in listing["Versions"]][0], (again["VersionId"], True), "PUT after a marker is latest")
    eq([m["IsLatest"] for m in listing.get("DeleteMarkers", [])], [False], "the marker under a new PUT is not latest")


@case
def head_delete_marker_version(t):
    name = t.bucket("headdm", "Enabled")
    put_versions(t, name, "k", [b"x"])
    marker = t.s3.delete_object(Bucket=name, Key="k")["VersionId"]
    # HEAD of a marker by id: 405 with x-amz-delete-marker: true [HeadObject;
    # LS "head-object-locked-delete-marker" (405)]. HEAD has no body, so boto3's code is "405".
    exc = expect_error(("405", "MethodNotAllowed"), t.s3.head_object, Bucket=name, Key="k", VersionId=marker, status=405)
    has_header(exc, "x-amz-delete-marker", "true", "HeadObject of a marker by id")
    has_header(exc, "x-amz-version-id", marker, "HeadObject of a marker by id")
    check(headers_of(exc).get("last-modified"), "HeadObject of a marker by id: no Last-Modified [HeadObject]")


@case
def delete_specific_versions(t):
    name = t.bucket("delver", "Enabled")
    key = "k"
    bodies = [b"one", b"two!", b"three"]
    ids = put_versions(t, name, key, bodies)

    # A noncurrent version by id: 204, version id echoed, no marker header [LS "delete-object-version"].
    answer = t.s3.delete_object(Bucket=name, Key=key, VersionId=ids[0])
    eq(status_of(answer), 204, "DeleteObject of a noncurrent version")
    has_header(answer, "x-amz-version-id", ids[0], "DeleteObject by id")
    lacks_header(answer, "x-amz-delete-marker", "DeleteObject of a version (not a marker)")
    listing = t.s3.list_object_versions(Bucket=name)
    eq([(v["VersionId"], v["IsLatest"]) for v in listing["Versions"]], [(ids[2], True), (ids[1], False)], "after removing the oldest")
    check("DeleteMarkers" not in listing, "deleting by id makes no marker")
    # The deleted version is gone: 404 NoSuchVersion, without version or marker headers [LS "get-deleted-object-with-version"].
    exc = expect_error("NoSuchVersion", t.s3.get_object, Bucket=name, Key=key, VersionId=ids[0], status=404)
    lacks_header(exc, "x-amz-delete-marker", "GetObject of a deleted version")
    expect_error("404", t.s3.head_object, Bucket=name, Key=key, VersionId=ids[0], status=404)

    # The current version by id: the previous one becomes current.
    answer = t.s3.delete_object(Bucket=name, Key=key, VersionId=ids[2])
    has_header(answer, "x-amz-version-id", ids[2], "DeleteObject of the current version by id")
    answer, got = get_body(t, name, key)
    eq(got, bodies[1], "previous version is current after the current one is deleted")
    has_header(answer, "x-amz-version-id", ids[1], "the new current version")
    listing = t.s3.list_object_versions(Bucket=name)
    eq([(v["VersionId"], v["IsLatest"]) for v in listing["Versions"]], [(ids[1], True)], "one version left, latest")

    # Deleting a version that is already gone is not an error: DELETE is
    # idempotent [ceph test_versioning_multi_object_delete "should all succeed due to idempotency"].
    answer = t.s3.delete_object(Bucket=name, Key=key, VersionId=ids[0])
    eq(status_of(answer), 204, "DeleteObject of an already deleted version")

    # A malformed version id: 400 InvalidArgument "Invalid version id specified",
    # ArgumentName versionId [LS "delete-with-bad-version", "get-obj-with-version"].
    for bad in ("not-a-version",):
        exc = expect_error("InvalidArgument", t.s3.get_object, Bucket=name, Key=key, VersionId=bad, status=400)
        eq(error_of(exc)[2], "Invalid version id specified", "InvalidArgument message")
        eq(exc.response["Error"].get("ArgumentName"), "versionId", "InvalidArgument ArgumentName")
        expect_error("400", t.s3.head_object, Bucket=name, Key=key, VersionId=bad, status=400)
        expect_error("InvalidArgument", t.s3.delete_object, Bucket=name, Key=key, VersionId=bad, status=400)
    eq(get_body(t, name, key)[1], bodies[1], "refused deletes changed nothing")

    # A version id of another key is no version of this key: 404 NoSuchVersion.
    other = put_versions(t, name, "other", [b"other"])[0]
    expect_error("NoSuchVersion", t.s3.get_object, Bucket=name, Key=key, VersionId=other, status=404)

    # Delete the last version: the key is gone, nothing listed.
    t.s3.delete_object(Bucket=name, Key=key, VersionId=ids[1])
    expect_error("NoSuchKey", t.s3.get_object, Bucket=name, Key=key, status=404)
    listing = t.s3.list_object_versions(Bucket=name)
    eq([v["Key"] for v in listing.get("Versions", [])], ["other"], "only the other key is left")


@case
def suspended_null_version(t):
    name = t.bucket("susp", "Enabled")
    key = "s"
    enabled_bodies = [b"enabled one", b"enabled two"]
    ids = put_versions(t, name, key, enabled_bodies)
    t.versioning(name, "Suspended")
    # Suspending keeps every version [LS "list-suspended"].
    eq(len(t.s3.list_object_versions(Bucket=name).get("Versions", [])), 2, "versions kept by suspending")

    # A PUT under Suspended writes the null version and answers WITHOUT
    # x-amz-version-id [PutObject "versioning suspended" sample; LS
    # test_put_object_on_suspended_bucket "put-object-suspended" has no VersionId;
    # ceph test_versioning_bucket_atomic_upload_return_version_id].
    for i, body in enumerate([b"null one", b"null two, replaces"]):
        answer = t.s3.put_object(Bucket=name, Key=key, Body=body)
        eq(status_of(answer), 200, f"PutObject #{i + 1} under Suspended")
        lacks_header(answer, "x-amz-version-id", f"PutObject #{i + 1} under Suspended")
    # The second null PUT replaced the first: one null version, latest, plus
    # the Enabled versions [Suspended; LS "list-suspended-after-overwrite" (4 = 3 + 1)].
    listing = t.s3.list_object_versions(Bucket=name)
    eq(
        [(v["VersionId"], v["IsLatest"], v["Size"]) for v in listing["Versions"]],
        [("null", True, len(b"null two, replaces")), (ids[1], False, len(enabled_bodies[1])), (ids[0], False, len(enabled_bodies[0]))],
        "versions under Suspended",
    )
    answer, got = get_body(t, name, key)
    eq(got, b"null two, replaces", "GetObject under Suspended reads the null version")
    # Reads of the null version carry x-amz-version-id: null [LS "get-object-current" has a VersionId].
    has_header(answer, "x-amz-version-id", "null", "GetObject of the null version")
    answer, got = get_body(t, name, key, VersionId="null")
    eq(got, b"null two, replaces", "GetObject VersionId=null")
    has_header(answer, "x-amz-version-id", "null", "GetObject VersionId=null")
    head = t.s3.head_object(Bucket=name, Key=key, VersionId="null")
    eq(head.get("ContentLength"), len(b"null two, replaces"), "HeadObject VersionId=null")
    eq(get_body(t, name, key, VersionId=ids[0])[1], enabled_bodies[0], "old Enabled versions still read")

    # A DELETE under Suspended removes the null version and writes a marker
    # whose id is `null` [DeleteObject; Suspended; LS test_delete_object_on_suspended_bucket].
    answer = t.s3.delete_object(Bucket=name, Key=key)
    eq(status_of(answer), 204, "DeleteObject under Suspended")
    has_header(answer, "x-amz-delete-marker", "true", "DeleteObject under Suspended")
    has_header(answer, "x-amz-version-id", "null", "DeleteObject under Suspended")
    listing = t.s3.list_object_versions(Bucket=name)
    eq([(v["VersionId"], v["IsLatest"]) for v in listing["Versions"]], [(ids[1], False), (ids[0], False)], "versions after a Suspended DELETE")
    eq([(m["VersionId"], m["IsLatest"]) for m in listing.get("DeleteMarkers", [])], [("null", True)], "the null marker")
    exc = expect_error("NoSuchKey", t.s3.get_object, Bucket=name, Key=key, status=404)
    has_header(exc, "x-amz-delete-marker", "true", "GetObject behind the null marker")
    exc = expect_error("MethodNotAllowed", t.s3.get_object, Bucket=name, Key=key, VersionId="null", status=405)
    has_header(exc, "x-amz-delete-marker", "true", "GetObject of the null marker by id")

    # A PUT under Suspended replaces the null marker with a null version [LS "list-suspended-put"].
    t.s3.put_object(Bucket=name, Key=key, Body=b"null three")
    listing = t.s3.list_object_versions(Bucket=name)
    check("DeleteMarkers" not in listing, f"the null marker was replaced: {listing.get('DeleteMarkers')}")
    eq([v["VersionId"] for v in listing["Versions"]], ["null", ids[1], ids[0]], "null version back on top")

    # Re-enabled: new PUTs get real ids and the null version stays, noncurrent.
    t.versioning(name, "Enabled")
    new = put_versions(t, name, key, [b"enabled again"])[0]
    listing = t.s3.list_object_versions(Bucket=name)
    eq([(v["VersionId"], v["IsLatest"]) for v in listing["Versions"]], [(new, True), ("null", False), (ids[1], False), (ids[0], False)], "after re-enabling")
    eq(get_body(t, name, key, VersionId="null")[1], b"null three", "the null version after re-enabling")
    # DeleteObject VersionId=null removes exactly the null version.
    answer = t.s3.delete_object(Bucket=name, Key=key, VersionId="null")
    has_header(answer, "x-amz-version-id", "null", "DeleteObject VersionId=null")
    eq([v["VersionId"] for v in t.s3.list_object_versions(Bucket=name)["Versions"]], [new, ids[1], ids[0]], "after deleting the null version")


@case
def unversioned_bucket(t):
    name = t.bucket("plain")
    answer = t.s3.put_object(Bucket=name, Key="p", Body=b"plain body")
    # A bucket never configured: no x-amz-version-id [LS test_delete_object "put-object"].
    lacks_header(answer, "x-amz-version-id", "PutObject on an unversioned bucket")
    t.s3.put_object(Bucket=name, Key="q", Body=b"q")
    listing = t.s3.list_object_versions(Bucket=name)
    eq(status_of(listing), 200, "ListObjectVersions on an unversioned bucket")
    eq(
        [(v["Key"], v["VersionId"], v["IsLatest"], v["Size"]) for v in listing.get("Versions", [])],
        [("p", "null", True, 10), ("q", "null", True, 1)],
        "ListObjectVersions of an unversioned bucket lists VersionId null",
    )
    check("DeleteMarkers" not in listing, "no markers on an unversioned bucket")
    # GetObject VersionId=null reads it [LS "get-obj-with-null-version"].
    answer, got = get_body(t, name, "p", VersionId="null")
    eq(got, b"plain body", "GetObject VersionId=null on an unversioned bucket")
    head = t.s3.head_object(Bucket=name, Key="p", VersionId="null")
    eq(head.get("ContentLength"), 10, "HeadObject VersionId=null")
    # An id that is not `null` is refused: 400 InvalidArgument [LS "get-obj-with-version"].
    expect_error("InvalidArgument", t.s3.get_object, Bucket=name, Key="p", VersionId="not-a-version", status=400)
    # A plain DELETE removes it: 204, no marker, no version header [LS test_delete_object "delete-object"].
    answer = t.s3.delete_object(Bucket=name, Key="p")
    eq(status_of(answer), 204, "DeleteObject on an unversioned bucket")
    lacks_header(answer, "x-amz-delete-marker", "DeleteObject on an unversioned bucket")
    lacks_header(answer, "x-amz-version-id", "DeleteObject on an unversioned bucket")
    expect_error("NoSuchKey", t.s3.get_object, Bucket=name, Key="p", status=404)
    listing = t.s3.list_object_versions(Bucket=name)
    eq([v["Key"] for v in listing.get("Versions", [])], ["q"], "after deleting p")
    check("DeleteMarkers" not in listing, "an unversioned DELETE leaves no marker")
    # DELETE VersionId=null removes it too.
    answer = t.s3.delete_object(Bucket=name, Key="q", VersionId="null")
    eq(status_of(answer), 204, "DeleteObject VersionId=null on an unversioned bucket")
    check("Versions" not in t.s3.list_object_versions(Bucket=name), "bucket empty")
    # GetBucketVersioning is still unconfigured.
    check("Status" not in t.s3.get_bucket_versioning(Bucket=name), "still no Status")


@case
def null_version_survives_enabling(t):
    # An object from before versioning keeps VersionId null once versioning is
    # on [ceph test_versioning_obj_plain_null_version_overwrite; Suspended guide].
    name = t.bucket("prenull")
    t.s3.put_object(Bucket=name, Key="old", Body=b"from before")
    t.versioning(name, "Enabled")
    new = put_versions(t, name, "old", [b"after enabling"])[0]
    listing = t.s3.list_object_versions(Bucket=name)
    eq([(v["VersionId"], v["IsLatest"]) for v in listing["Versions"]], [(new, True), ("null", False)], "null version kept")
    eq(get_body(t, name, "old", VersionId="null")[1], b"from before", "GetObject VersionId=null")
    t.s3.delete_object(Bucket=name, Key="old", VersionId=new)
    eq(get_body(t, name, "old")[1], b"from before", "the null version is current again")
    t.s3.delete_object(Bucket=name, Key="old", VersionId="null")
    expect_error("NoSuchKey", t.s3.get_object, Bucket=name, Key="old", status=404)
    check("Versions" not in t.s3.list_object_versions(Bucket=name), "no versions left")


def _paging_bucket(t):
    """3 keys x 3 versions, a marker on b, and keys under dir/. Returns
    (bucket, expected raw entries in S3 order, without prefixes)."""
    name = t.bucket("paging", "Enabled")
    ids = {}
    for key in ("a", "b", "c"):
        ids[key] = put_versions(t, name, key, [f"{key}{i}".encode() * (i + 1) for i in range(3)])
    marker = t.s3.delete_object(Bucket=name, Key="b")["VersionId"]
    dir_ids = {}
    for key in ("dir/x", "dir/y"):
        dir_ids[key] = put_versions(t, name, key, [key.encode()])[0]
    expected = []
    for key in ("a", "b", "c"):
        if key == "b":
            expected.append(("D", "b", marker, "true"))
        for j, vid in enumerate(reversed(ids[key])):
            expected.append(("V", key, vid, "true" if j == 0 and key != "b" else "false"))
    for key in ("dir/x", "dir/y"):
        expected.append(("V", key, dir_ids[key], "true"))
    return name, expected, ids, marker


def _walk(t, name, max_keys, **params):
    """Every page of a raw ListObjectVersions; checks the paging fields on the way."""
    entries, pages = [], 0
    key_marker = version_marker = None
    while True:
        query = dict(params, max_keys=max_keys)
        if key_marker is not None:
            query["key_marker"] = key_marker
        if version_marker is not None:
            query["version_id_marker"] = version_marker
        status, root, body = t.raw_versions(name, **query)
        eq(status, 200, f"page {pages + 1} status ({query}): {body[:300]!r}")
        page = raw_entries(root)
        pages += 1
        check(len(page) <= max_keys, f"page {pages} has {len(page)} entries, over MaxKeys {max_keys}")
        eq(child_text(root, "MaxKeys"), str(max_keys), f"page {pages} MaxKeys")
        eq(child_text(root, "KeyMarker") or "", key_marker or "", f"page {pages} echoes KeyMarker")
        eq(child_text(root, "VersionIdMarker") or "", version_marker or "", f"page {pages} echoes VersionIdMarker")
        entries += page
        truncated = child_text(root, "IsTruncated")
        if truncated == "false":
            check(child_text(root, "NextKeyMarker") is None, f"last page has a NextKeyMarker: {body[:400]!r}")
            return entries, pages
        eq(truncated, "true", f"page {pages} IsTruncated")
        check(page, f"page {pages} is truncated but empty")
        # NextKeyMarker/NextVersionIdMarker name the last entry of the page;
        # after a CommonPrefix, the prefix and no version marker [LS "list-object-versions-start"].
        last = page[-1]
        eq(child_text(root, "NextKeyMarker"), last[1], f"page {pages} NextKeyMarker")
        if last[0] == "P":
            check(not child_text(root, "NextVersionIdMarker"), f"page {pages} ends in a prefix but has a NextVersionIdMarker")
        else:
            eq(child_text(root, "NextVersionIdMarker"), last[2], f"page {pages} NextVersionIdMarker")
        key_marker, version_marker = last[1], (None if last[0] == "P" else last[2])
        check(pages < 50, "paging does not end")


@case
def list_versions_paging(t):
    name, expected, ids, marker = _paging_bucket(t)
    status, root, body = t.raw_versions(name)
    eq(status, 200, "ListObjectVersions")
    eq(root.tag.replace(S3_NS, ""), "ListVersionsResult", "root element")
    # Keys ascending, versions (and markers) newest first [LOV].
    eq(raw_entries(root), expected, "the full listing, in order")

    entries, pages = _walk(t, name, 2)
    eq(entries, expected, "MaxKeys=2 pages put together")
    eq(pages, (len(expected) + 1) // 2, "number of pages")
    entries, _ = _walk(t, name, 1)
    eq(entries, expected, "MaxKeys=1 pages put together")

    # boto3's own paginator (what clients use) sees the same.
    seen = []
    for page in t.s3.get_paginator("list_object_versions").paginate(Bucket=name, PaginationConfig={"PageSize": 3}):
        seen += boto_entries(page)
    eq(
        sorted((k, v, kind) for kind, k, v, _l in seen),
        sorted((k, v, kind) for kind, k, v, _l in expected),
        "boto3 paginator with PageSize 3",
    )

    # KeyMarker alone starts after every version of that key [LS "list-objects-next-key-only"].
    _s, root, _b = t.raw_versions(name, key_marker="b")
    eq(raw_entries(root), [e for e in expected if e[1] > "b"], "KeyMarker=b")
    # KeyMarker + VersionIdMarker start after that version [LS "list-objects-both-markers"].
    _s, root, _b = t.raw_versions(name, key_marker="b", version_id_marker=ids["b"][2])
    eq(raw_entries(root), [e for e in expected if e[1] > "b" or (e[1] == "b" and e[2] in ids["b"][:2])], "KeyMarker=b VersionIdMarker=newest b")
    _s, root, _b = t.raw_versions(name, key_marker="b", version_id_marker=marker)
    eq(raw_entries(root), [e for e in expected if e[1] > "b" or (e[1] == "b" and e[0] == "V")], "VersionIdMarker at a marker")
    # A version-id-marker without key-marker: 400 InvalidArgument [LS "list-objects-next-version-only":
    # "A version-id marker cannot be specified without a key marker."].
    expect_error("InvalidArgument", t.s3.list_object_versions, Bucket=name, VersionIdMarker=ids["a"][0], status=400)

    # Prefix filters.
    _s, root, _b = t.raw_versions(name, prefix="dir/")
    eq(raw_entries(root), [e for e in expected if e[1].startswith("dir/")], "Prefix=dir/")
    eq(child_text(root, "Prefix"), "dir/", "Prefix echoed")
    _s, root, _b = t.raw_versions(name, prefix="b")
    eq(raw_entries(root), [e for e in expected if e[1] == "b"], "Prefix=b")
    _s, root, _b = t.raw_versions(name, prefix="zzz")
    eq(raw_entries(root), [], "Prefix matching nothing")


@case
def list_versions_delimiter(t):
    name, expected, _ids, _marker = _paging_bucket(t)
    flat = [e for e in expected if "/" not in e[1]]
    _s, root, body = t.raw_versions(name, delimiter="/")
    entries = raw_entries(root)
    eq([e for e in entries if e[0] != "P"], flat, "entries with Delimiter=/")
    eq([e[1] for e in entries if e[0] == "P"], ["dir/"], f"CommonPrefixes once: {body[:600]!r}")
    eq(child_text(root, "Delimiter"), "/", "Delimiter echoed")
    # Paged, each prefix still appears once, in key order among the entries.
    for max_keys in (1, 2, 3):
        entries, _pages = _walk(t, name, max_keys, delimiter="/")
        eq(entries, flat + [("P", "dir/", None, None)], f"Delimiter=/ MaxKeys={max_keys} pages put together")
    # boto3 parses CommonPrefixes.
    listing = t.s3.list_object_versions(Bucket=name, Delimiter="/")
    eq([p["Prefix"] for p in listing.get("CommonPrefixes", [])], ["dir/"], "boto3 CommonPrefixes")
    listing = t.s3.list_object_versions(Bucket=name, Delimiter="/", Prefix="dir/")
    eq(sorted(v["Key"] for v in listing["Versions"]), ["dir/x", "dir/y"], "Prefix=dir/ Delimiter=/")
    check("CommonPrefixes" not in listing, "no prefixes below dir/")


@case
def list_versions_xml_fields(t):
    name = t.bucket("xmlf", "Enabled")
    vid = put_versions(t, name, "f", [b"12345"])[0]
    marker = t.s3.delete_object(Bucket=name, Key="f")["VersionId"]
    status, root, body = t.raw_versions(name)
    eq(status, 200, "ListObjectVersions")
    eq(root.tag, S3_NS + "ListVersionsResult", "root element in the S3 namespace")
    eq(child_text(root, "Name"), name, "Name")
    eq(child_text(root, "IsTruncated"), "false", "IsTruncated")
    eq(child_text(root, "MaxKeys"), "1000", "MaxKeys")
    version = root.find(S3_NS + "Version")
    dm = root.find(S3_NS + "DeleteMarker")
    check(version is not None and dm is not None, f"a Version and a DeleteMarker: {body!r}")
    for field in ("Key", "VersionId", "IsLatest", "LastModified", "ETag", "Size", "StorageClass"):
        check(child_text(version, field) is not None, f"Version lacks {field}: {body!r}")
    eq(child_text(version, "VersionId"), vid, "Version VersionId")
    eq(child_text(version, "Size"), "5", "Version Size")
    eq(child_text(version, "ETag"), etag_of(b"12345"), "Version ETag")
    for field in ("Key", "VersionId", "IsLatest", "LastModified"):
        check(child_text(dm, field) is not None, f"DeleteMarker lacks {field}: {body!r}")
    for field in ("ETag", "Size", "StorageClass"):
        check(child_text(dm, field) is None, f"a DeleteMarker has no {field} [LOV DeleteMarkerEntry]: {body!r}")
    eq((child_text(dm, "VersionId"), child_text(dm, "IsLatest")), (marker, "true"), "DeleteMarker fields")
    # Timestamps as 2023-11-15T12:02:40.000Z [LS test_s3_list_object_versions_timestamp_precision].
    for element in (version, dm):
        stamp = child_text(element, "LastModified")
        check(
            len(stamp) == 24 and stamp[10] == "T" and stamp.endswith("Z") and stamp[19] == ".",
            f"LastModified not like 2023-11-15T12:02:40.000Z: {stamp!r}",
        )


@case
def list_versions_encoding_url(t):
    name = t.bucket("enc", "Enabled")
    keys = ["a b", "c+d", "e&f<g>", "h\u00e9i", "_", ":", " "]
    for key in keys:
        put_versions(t, name, key, [b"1", b"2"])
    # boto3 sends encoding-type=url and decodes: keys come back as written.
    listing = t.s3.list_object_versions(Bucket=name)
    eq(sorted({v["Key"] for v in listing["Versions"]}), sorted(keys), "keys through boto3 (encoding-type=url)")
    eq(len(listing["Versions"]), 2 * len(keys), "two versions per key")
    # Raw, with encoding-type=url: keys percent-encoded, EncodingType echoed [LOV EncodingType].
    _s, root, body = t.raw_versions(name, encoding_type="url")
    eq(child_text(root, "EncodingType"), "url", "EncodingType echoed")
    got = [e[1] for e in raw_entries(root) if e[0] == "V"]
    for text in got:
        check(" " not in text and "<" not in text and "&" not in text and text.isascii(), f"key not URL-encoded: {text!r}")
    eq(sorted(set(urllib.parse.unquote_plus(k) for k in got)), sorted(keys), "URL-decoded keys")
    # Raw, without it: keys as they are (XML-escaped by the XML itself).
    _s, root, body = t.raw_versions(name)
    check(child_text(root, "EncodingType") is None, "no EncodingType unless asked")
    eq(sorted(set(e[1] for e in raw_entries(root) if e[0] == "V")), sorted(keys), "raw keys")
    # Each key's versions read back by id.
    for v in listing["Versions"]:
        t.s3.head_object(Bucket=name, Key=v["Key"], VersionId=v["VersionId"])


@case
def multi_delete_versions(t):
    name = t.bucket("multi", "Enabled")
    a = put_versions(t, name, "a", [b"a1", b"a2", b"a3"])
    b = put_versions(t, name, "b", [b"b1"])
    # Specific versions: each in Deleted with its VersionId, no marker [LS "delete-objects-version-id"].
    answer = t.s3.delete_objects(
        Bucket=name, Delete={"Objects": [{"Key": "a", "VersionId": a[0]}, {"Key": "a", "VersionId": a[1]}]}
    )
    eq(status_of(answer), 200, "DeleteObjects status")
    check("Errors" not in answer, f"DeleteObjects errors: {answer.get('Errors')}")
    eq(
        sorted((d["Key"], d.get("VersionId"), d.get("DeleteMarker")) for d in answer["Deleted"]),
        sorted([("a", a[0], None), ("a", a[1], None)]),
        "Deleted entries for versions",
    )
    eq([v["VersionId"] for v in t.s3.list_object_versions(Bucket=name, Prefix="a")["Versions"]], [a[2]], "a's last version")

    # Without VersionId on Enabled: a marker each, DeleteMarker true and
    # DeleteMarkerVersionId, no VersionId; a missing key gets one too
    # [LS "delete-objects-no-version-id"; ceph test_versioning_multi_object_delete_with_marker_create].
    answer = t.s3.delete_objects(Bucket=name, Delete={"Objects": [{"Key": "b"}, {"Key": "nothing"}]})
    deleted = {d["Key"]: d for d in answer["Deleted"]}
    eq(sorted(deleted), ["b", "nothing"], "Deleted keys")
    for key, d in deleted.items():
        eq(d.get("DeleteMarker"), True, f"Deleted {key} DeleteMarker")
        real_version_id(d.get("DeleteMarkerVersionId"), f"Deleted {key} DeleteMarkerVersionId")
        check("VersionId" not in d, f"Deleted {key} has a VersionId though none was asked: {d}")
    listing = t.s3.list_object_versions(Bucket=name)
    eq(
        sorted((m["Key"], m["VersionId"], m["IsLatest"]) for m in listing["DeleteMarkers"]),
        sorted((k, d["DeleteMarkerVersionId"], True) for k, d in deleted.items()),
        "markers made by DeleteObjects",
    )
    expect_error("NoSuchKey", t.s3.get_object, Bucket=name, Key="b", status=404)

    # A marker by id: DeleteMarker true, DeleteMarkerVersionId and VersionId both the marker [LS "delete-objects-marker"].
    bm = deleted["b"]["DeleteMarkerVersionId"]
    answer = t.s3.delete_objects(Bucket=name, Delete={"Objects": [{"Key": "b", "VersionId": bm}]})
    eq(
        [(d["Key"], d.get("VersionId"), d.get("DeleteMarker"), d.get("DeleteMarkerVersionId")) for d in answer["Deleted"]],
        [("b", bm, True, bm)],
        "Deleted entry for a marker",
    )
    eq(get_body(t, name, "b")[1], b"b1", "b is back")

    # Already deleted versions again: still Deleted (idempotent) [ceph test_versioning_multi_object_delete].
    answer = t.s3.delete_objects(Bucket=name, Delete={"Objects": [{"Key": "a", "VersionId": a[0]}]})
    check("Errors" not in answer, f"re-deleting a deleted version: {answer.get('Errors')}")
    eq([(d["Key"], d.get("VersionId")) for d in answer["Deleted"]], [("a", a[0])], "re-deleting a deleted version")
    # An id that is no version: NoSuchVersion in Errors, 200 overall [LS "delete-objects-wrong-version-id"].
    bogus = "HPniJFCxqTsMuIH9KX8K8wEjNUgmABCD"
    answer = t.s3.delete_objects(Bucket=name, Delete={"Objects": [{"Key": "a", "VersionId": bogus}]})
    eq(status_of(answer), 200, "DeleteObjects with a bad id")
    eq(
        [(e["Key"], e.get("VersionId"), e["Code"]) for e in answer.get("Errors", [])],
        [("a", bogus, "NoSuchVersion")],
        "Errors for a bad version id",
    )

    # Quiet: successes are not reported.
    c = put_versions(t, name, "c", [b"c1", b"c2"])
    answer = t.s3.delete_objects(
        Bucket=name, Delete={"Quiet": True, "Objects": [{"Key": "c", "VersionId": v} for v in c] + [{"Key": "a"}]}
    )
    eq(status_of(answer), 200, "quiet DeleteObjects")
    check(not answer.get("Deleted") and not answer.get("Errors"), f"quiet DeleteObjects reported: {answer}")
    listing = t.s3.list_object_versions(Bucket=name, Prefix="c")
    check("Versions" not in listing, f"quiet DeleteObjects removed c's versions: {listing.get('Versions')}")
    eq(
        [(m["Key"], m["IsLatest"]) for m in t.s3.list_object_versions(Bucket=name, Prefix="a").get("DeleteMarkers", [])],
        [("a", True)],
        "quiet DeleteObjects marked a",
    )


@case
def copy_versions(t):
    name = t.bucket("copy", "Enabled")
    bodies = [b"copy source one", b"copy source two, newer"]
    ids = put_versions(t, name, "src", bodies)
    # Copy the old version: its bytes; the answer carries
    # x-amz-copy-source-version-id and the new version's id [LS "copy-object-src-target-object-version"].
    answer = t.s3.copy_object(Bucket=name, Key="dst", CopySource={"Bucket": name, "Key": "src", "VersionId": ids[0]})
    eq(status_of(answer), 200, "CopyObject status")
    eq(answer.get("CopySourceVersionId"), ids[0], "CopySourceVersionId")
    has_header(answer, "x-amz-copy-source-version-id", ids[0], "CopyObject of a version")
    new = real_version_id(answer.get("VersionId"), "CopyObject VersionId on an Enabled bucket")
    has_header(answer, "x-amz-version-id", new, "CopyObject")
    eq(answer["CopyObjectResult"]["ETag"], etag_of(bodies[0]), "CopyObject ETag")
    got_answer, got = get_body(t, name, "dst")
    eq(got, bodies[0], "copy of the old version")
    has_header(got_answer, "x-amz-version-id", new, "GetObject of the copy")
    # Copy without VersionId: the current one, and the answer names it.
    answer = t.s3.copy_object(Bucket=name, Key="dst", CopySource={"Bucket": name, "Key": "src"})
    eq(answer.get("CopySourceVersionId"), ids[1], "CopySourceVersionId of the current version")
    eq(get_body(t, name, "dst")[1], bodies[1], "copy of the current version")
    eq(
        [v["VersionId"] for v in t.s3.list_object_versions(Bucket=name, Prefix="dst")["Versions"]],
        [answer["VersionId"], new],
        "each copy is a version",
    )
    # Into an unversioned bucket: no x-amz-version-id, the source version still named.
    plain = t.bucket("copyplain")
    answer = t.s3.copy_object(Bucket=plain, Key="d", CopySource={"Bucket": name, "Key": "src", "VersionId": ids[0]})
    eq(answer.get("CopySourceVersionId"), ids[0], "CopySourceVersionId into an unversioned bucket")
    lacks_header(answer, "x-amz-version-id", "CopyObject into an unversioned bucket")
    eq(get_body(t, plain, "d")[1], bodies[0], "copy into an unversioned bucket")

    # From a marker by id: 400 InvalidRequest "The source of a copy request may
    # not specifically refer to a delete marker by version id." [LS "copy-object-src-target-delete-marker"].
    marker = t.s3.delete_object(Bucket=name, Key="src")["VersionId"]
    expect_error(
        "InvalidRequest",
        t.s3.copy_object,
        Bucket=name,
        Key="x",
        CopySource={"Bucket": name, "Key": "src", "VersionId": marker},
        status=400,
    )
    # From a key whose current version is a marker: 404 NoSuchKey [LS "copy-object-src-delete-marker-current-version"].
    expect_error("NoSuchKey", t.s3.copy_object, Bucket=name, Key="x", CopySource={"Bucket": name, "Key": "src"}, status=404)
    # Old versions still copy from under the marker.
    t.s3.copy_object(Bucket=name, Key="x", CopySource={"Bucket": name, "Key": "src", "VersionId": ids[1]})
    eq(get_body(t, name, "x")[1], bodies[1], "copy of a version under a marker")
    # From a version that no longer exists: 404 NoSuchVersion.
    t.s3.delete_object(Bucket=name, Key="src", VersionId=ids[0])
    expect_error(
        "NoSuchVersion",
        t.s3.copy_object,
        Bucket=name,
        Key="y",
        CopySource={"Bucket": name, "Key": "src", "VersionId": ids[0]},
        status=404,
    )
    # A malformed source version id: 400 InvalidArgument.
    expect_error(
        "InvalidArgument",
        t.s3.copy_object,
        Bucket=name,
        Key="y",
        CopySource={"Bucket": name, "Key": "src", "VersionId": "not-a-version"},
        status=400,
    )


@case
def upload_part_copy_version(t):
    name = t.bucket("partcopy", "Enabled")
    old = b"P" * (64 * 1024)
    ids = put_versions(t, name, "src", [old, b"newer and small"])
    upload = t.s3.create_multipart_upload(Bucket=name, Key="mp")["UploadId"]
    part = t.s3.upload_part_copy(
        Bucket=name, Key="mp", UploadId=upload, PartNumber=1, CopySource={"Bucket": name, "Key": "src", "VersionId": ids[0]}
    )
    eq(part.get("CopySourceVersionId"), ids[0], "UploadPartCopy CopySourceVersionId")
    has_header(part, "x-amz-copy-source-version-id", ids[0], "UploadPartCopy of a version")
    done = t.s3.complete_multipart_upload(
        Bucket=name, Key="mp", UploadId=upload, MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": part["CopyPartResult"]["ETag"]}]}
    )
    real_version_id(done.get("VersionId"), "CompleteMultipartUpload VersionId")
    eq(get_body(t, name, "mp")[1], old, "UploadPartCopy copied the old version")


@case
def multipart_creates_versions(t):
    name = t.bucket("mpu", "Enabled")
    first = put_versions(t, name, "big", [b"small first version"])[0]
    parts = [os.urandom(5 * MIB), os.urandom(1234)]
    upload = t.s3.create_multipart_upload(Bucket=name, Key="big")["UploadId"]
    etags = [
        t.s3.upload_part(Bucket=name, Key="big", UploadId=upload, PartNumber=i + 1, Body=p)["ETag"] for i, p in enumerate(parts)
    ]
    done = t.s3.complete_multipart_upload(
        Bucket=name,
        Key="big",
        UploadId=upload,
        MultipartUpload={"Parts": [{"PartNumber": i + 1, "ETag": e} for i, e in enumerate(etags)]},
    )
    # CompleteMultipartUpload names the new version [CompleteMultipartUpload
    # x-amz-version-id; ceph test_versioning_bucket_multipart_upload_return_version_id].
    vid = real_version_id(done.get("VersionId"), "CompleteMultipartUpload VersionId")
    has_header(done, "x-amz-version-id", vid, "CompleteMultipartUpload")
    check(vid != first, "a new version id")
    listing = t.s3.list_object_versions(Bucket=name)
    eq(
        [(v["VersionId"], v["IsLatest"], v["Size"]) for v in listing["Versions"]],
        [(vid, True, sum(map(len, parts))), (first, False, len(b"small first version"))],
        "versions after a multipart upload",
    )
    eq(listing["Versions"][0]["ETag"], multipart_etag(parts), "multipart ETag in the listing")
    answer, got = get_body(t, name, "big", VersionId=vid)
    check(got == b"".join(parts), "multipart version body")
    eq(get_body(t, name, "big", VersionId=first)[1], b"small first version", "the version before it")
    # Suspended and unversioned: no x-amz-version-id on completion [ceph, same test].
    for label, status in (("Suspended", "Suspended"), ("unversioned", None)):
        bucket = t.bucket("mpu" + label.lower()[:4], status)
        upload = t.s3.create_multipart_upload(Bucket=bucket, Key="k")["UploadId"]
        etag = t.s3.upload_part(Bucket=bucket, Key="k", UploadId=upload, PartNumber=1, Body=b"one part")["ETag"]
        done = t.s3.complete_multipart_upload(
            Bucket=bucket, Key="k", UploadId=upload, MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": etag}]}
        )
        lacks_header(done, "x-amz-version-id", f"CompleteMultipartUpload on a {label} bucket")
        eq(
            [v["VersionId"] for v in t.s3.list_object_versions(Bucket=bucket)["Versions"]],
            ["null"],
            f"multipart on a {label} bucket is the null version",
        )


@case
def version_ids_unique_across_keys_and_buckets(t):
    one = t.bucket("ids1", "Enabled")
    two = t.bucket("ids2", "Enabled")
    seen = []
    for bucket in (one, two):
        for key in ("same", "other"):
            seen += put_versions(t, bucket, key, [b"x", b"x"])
    eq(len(set(seen)), len(seen), f"version ids are unique across keys and buckets: {seen}")
    # One bucket's version id is not a version in another bucket.
    exc = expect_error(("NoSuchVersion", "InvalidArgument"), t.s3.get_object, Bucket=two, Key="same", VersionId=seen[0])
    check(error_of(exc)[1] in (400, 404), "another bucket's version id")


@case
def folder_keys_are_versions_a_cleanup_finds(t):
    # A key ending in '/' (what consoles make) is an object like any other:
    # its null version is listed, so a cleanup that deletes every listed
    # version empties the bucket (suites clean up after each test this way).
    for state in (None, "Enabled"):
        name = t.bucket("folders" + ("v" if state else "u"), state)
        t.s3.put_object(Bucket=name, Key="dir/", Body=b"")
        t.s3.put_object(Bucket=name, Key="dir/file", Body=b"x")
        listing = t.s3.list_object_versions(Bucket=name)
        keys = [(v["Key"], v["VersionId"]) for v in listing.get("Versions", [])]
        check(("dir/", "null") in keys, f"the folder key as the null version: {keys}")
        folder = next(v for v in listing["Versions"] if v["Key"] == "dir/")
        eq(folder["ETag"], '"d41d8cd98f00b204e9800998ecf8427e"', "an empty object's ETag")
        eq(folder["IsLatest"], True, "IsLatest of the folder key")
        for version in listing["Versions"]:
            t.s3.delete_object(Bucket=name, Key=version["Key"], VersionId=version["VersionId"])
        left = t.s3.list_object_versions(Bucket=name)
        eq(left.get("Versions", []) + left.get("DeleteMarkers", []), [], "nothing left")
        eq(status_of(t.s3.delete_bucket(Bucket=name)), 204, "DeleteBucket after the cleanup")
        t.buckets.remove(name)


@case
def delete_bucket_needs_every_version_gone(t):
    # [LS test_delete_versioned_bucket_with_objects: 409 BucketNotEmpty "You must delete all versions in the bucket."]
    name = t.bucket("delbucket", "Enabled")
    vid = put_versions(t, name, "k", [b"x"])[0]
    marker = t.s3.delete_object(Bucket=name, Key="k")["VersionId"]
    expect_error("BucketNotEmpty", t.s3.delete_bucket, Bucket=name, status=409)
    t.s3.delete_object(Bucket=name, Key="k", VersionId=vid)
    expect_error("BucketNotEmpty", t.s3.delete_bucket, Bucket=name, status=409)
    t.s3.delete_object(Bucket=name, Key="k", VersionId=marker)
    eq(status_of(t.s3.delete_bucket(Bucket=name)), 204, "DeleteBucket once empty")
    t.buckets.remove(name)


@case
def versions_many_and_remove_in_every_order(t):
    # [ceph test_versioning_obj_create_read_remove / _remove_all]: remove
    # versions from the middle, the top and the bottom, checking what is left each time.
    name = t.bucket("order", "Enabled")
    bodies = [f"content-{i}".encode() for i in range(6)]
    ids = put_versions(t, name, "k", bodies)
    live = list(zip(ids, bodies))
    for index in (2, -1, 0, 1, -1, 0):
        vid, body = live.pop(index)
        eq(get_body(t, name, "k", VersionId=vid)[1], body, f"version {vid} before its removal")
        t.s3.delete_object(Bucket=name, Key="k", VersionId=vid)
        listing = t.s3.list_object_versions(Bucket=name)
        eq([v["VersionId"] for v in listing.get("Versions", [])], [v for v, _b in reversed(live)], "versions left")
        if live:
            eq(listing["Versions"][0]["IsLatest"], True, "newest left is latest")
            eq(get_body(t, name, "k")[1], live[-1][1], "current body")
    expect_error("NoSuchKey", t.s3.get_object, Bucket=name, Key="k", status=404)


def main():
    run_suite(Suite, CASES)


if __name__ == "__main__":
    main()
