#!/usr/bin/env python3
"""S3 bucket lifecycle held to AWS's documented behaviour.

Written from the AWS S3 API reference, from answers recorded against AWS
itself and from ceph/s3-tests, not from our implementation, so it can stand
in for the external conformance suites that will judge our lifecycle:

    lifecycle_suite.py --endpoint http://127.0.0.1:PORT --access-key ID --secret SECRET [--day-seconds N]

Every case prints one line (`ok <case>`, or `skip <case>` for the
time-based ones without --day-seconds); the first failure prints what was
sent, what was expected and what came back, and exits 1 (with --keep-going,
every case runs and the failures are listed at the end).

Time: a server under test may run a lifecycle "day" as N seconds (as ceph's
rgw_lc_debug_interval does); --day-seconds N tells the suite so, and turns
on the cases that wait for rules to act. They poll with a deadline of six
such days plus 30 s; the server must run its lifecycle pass at least once a
"day". Without it (0, the default) those cases are skipped. The
x-amz-expiration header is always checked in calendar days: ceph computes
it from secs_in_a_day even when its debug interval shortens the pass
(rgw_lc.cc s3_expiration_header).

Buckets are named `<prefix>-<what>` with a random prefix, so two runs
against one server do not meet; every case makes its own buckets, and the
cleanup removes the lifecycle configuration, every version and delete
marker (bypassing governance retention in the one object-lock bucket) and
the bucket.

Sources cited below:
  [PutLC]        https://docs.aws.amazon.com/AmazonS3/latest/API/API_PutBucketLifecycleConfiguration.html
                 ("replaces an existing lifecycle configuration")
  [GetLC]        https://docs.aws.amazon.com/AmazonS3/latest/API/API_GetBucketLifecycleConfiguration.html
                 (404 NoSuchLifecycleConfiguration)
  [DelLC]        https://docs.aws.amazon.com/AmazonS3/latest/API/API_DeleteBucketLifecycle.html
  [Rule]         https://docs.aws.amazon.com/AmazonS3/latest/API/API_LifecycleRule.html
                 (ID "up to 255 characters"; Status Enabled | Disabled;
                 NewerNoncurrentVersions "how many noncurrent versions S3 will retain")
  [LCExpire]     https://docs.aws.amazon.com/AmazonS3/latest/userguide/lifecycle-expire-general-considerations.html
                 and intro-lifecycle-rules.html: "Amazon S3 calculates the time by
                 adding the number of days specified in the rule to the object
                 creation time and rounding up the resulting time to the next day
                 midnight UTC"; expiring a current version in a versioned bucket
                 adds a delete marker; an expired object delete marker is one
                 with no noncurrent version under it.
  [PutObject]    https://docs.aws.amazon.com/AmazonS3/latest/API/API_PutObject.html
  [HeadObject]   https://docs.aws.amazon.com/AmazonS3/latest/API/API_HeadObject.html
                 (x-amz-expiration: expiry-date="<RFC 1123>", rule-id="<id>")
  [OLLC]         https://docs.aws.amazon.com/AmazonS3/latest/userguide/object-lock.html
                 ("Lifecycle configurations continue functioning normally on protected
                 objects, including placing delete markers"; a locked version is not deleted)
  [ceph]         ceph/s3-tests s3tests/functional/test_s3.py test_lifecycle_* and
                 check_lifecycle_expiration_header (commit 8f0ae7b4, May 2026).
  [LS]           localstack/localstack tests/aws/services/s3/test_s3.py class
                 TestS3BucketLifecycle: tests marked `aws.validated` whose
                 test_s3.snapshot.json holds the answers AWS gave (commit 8b9a79f0,
                 March 2026).
"""

import datetime
import re
import time

from botocore.exceptions import ClientError

from suite_harness import BaseSuite, Skipped, all_versions, arguments, case_registry, main as run_suite
from suite_harness import check, eq, error_of, expect_error, fail, headers_of, lacks_header, status_of

UTC = datetime.timezone.utc
DAY = datetime.timedelta(days=1)


# ---------------------------------------------------------------------------
# Clients.


class Suite(BaseSuite):
    PREFIX = "lc"

    def __init__(self, args):
        super().__init__(args)
        self.day_seconds = args.day_seconds

    def lifecycle(self, bucket, rules):
        answer = self.s3.put_bucket_lifecycle_configuration(Bucket=bucket, LifecycleConfiguration={"Rules": rules})
        eq(status_of(answer), 200, "PutBucketLifecycleConfiguration")
        return answer

    def rules(self, bucket):
        answer = self.s3.get_bucket_lifecycle_configuration(Bucket=bucket)
        eq(status_of(answer), 200, "GetBucketLifecycleConfiguration")
        return answer.get("Rules")

    def needs_time(self):
        if not self.day_seconds:
            raise Skipped("needs --day-seconds")

    def wait_until(self, what, condition, days=6):
        """Poll `condition` (returns a true value when met) until `days` lifecycle days plus 30 s have passed."""
        deadline = time.monotonic() + days * self.day_seconds + 30
        pause = max(0.5, min(self.day_seconds / 4, 5))
        last = None
        while True:
            last = condition()
            if last:
                return last
            if time.monotonic() > deadline:
                fail(f"{what}: not within {days} days of {self.day_seconds} s plus 30 s")
            time.sleep(pause)

    def empty(self, bucket):
        """The lifecycle configuration goes first, then what the harness empties."""
        try:
            self.s3.delete_bucket_lifecycle(Bucket=bucket)
        except ClientError:
            pass
        return super().empty(bucket)


def by_id(rules):
    return {r.get("ID"): r for r in rules or []}


def expect_refused(t, bucket, code, rules, what, status=400):
    """PutBucketLifecycleConfiguration of `rules` must fail with `code`."""
    try:
        t.s3.put_bucket_lifecycle_configuration(Bucket=bucket, LifecycleConfiguration={"Rules": rules})
    except ClientError as exc:
        got_code, got_status, message = error_of(exc)
        eq((got_code, got_status), (code, status), f"PutBucketLifecycleConfiguration with {what} ({message})")
        return exc
    fail(f"PutBucketLifecycleConfiguration with {what}: expected {code} ({status}), but it succeeded")


def keys_of(t, bucket, prefix=""):
    out = []
    for page in t.s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        out += [o["Key"] for o in page.get("Contents", [])]
    return sorted(out)


def put_versions(t, bucket, key, count):
    """`count` PUTs of `key`; returns their version ids, oldest first."""
    ids = []
    for i in range(count):
        answer = t.s3.put_object(Bucket=bucket, Key=key, Body=f"{key} v{i}".encode())
        vid = answer.get("VersionId")
        check(vid and vid != "null", f"PutObject {key!r} #{i + 1}: expected a version id, got {vid!r}")
        ids.append(vid)
    return ids


def versions_of(t, bucket, key):
    """Version ids of `key` (not markers), newest first."""
    return [v for k, v, marker, _l in all_versions(t.s3, bucket, key) if k == key and not marker]


def markers_of(t, bucket, key):
    return [(v, latest) for k, v, marker, latest in all_versions(t.s3, bucket, key) if k == key and marker]


EXPIRATION = re.compile(r'^expiry-date="([^"]+)", rule-id="([^"]+)"$')


def expiration_of(response, what):
    """(expiry date, rule id) from x-amz-expiration, or None when the header is absent."""
    header = headers_of(response).get("x-amz-expiration")
    if header is None:
        return None
    m = EXPIRATION.match(header)
    check(m, f"{what}: x-amz-expiration {header!r} is not expiry-date=\"...\", rule-id=\"...\"")
    try:
        date = datetime.datetime.strptime(m.group(1), "%a, %d %b %Y %H:%M:%S GMT").replace(tzinfo=UTC)
    except ValueError:
        fail(f"{what}: expiry-date {m.group(1)!r} is not an RFC 1123 date in GMT")
    return date, m.group(2)


def expected_expiry(created, days):
    """Creation + days, rounded up to the next midnight UTC [LCExpire]; as ceph computes it:
    midnight of the creation day + days + 1 day."""
    midnight = created.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    return midnight + (days + 1) * DAY


# ---------------------------------------------------------------------------
# Cases, in the order they run.

CASES, case = case_registry()


# --- Configuration --------------------------------------------------------------


@case
def lifecycle_missing(t):
    # No configuration: 404 NoSuchLifecycleConfiguration "The lifecycle
    # configuration does not exist" [GetLC; ceph test_lifecycle_delete; LS
    # "get-bucket-lifecycle-exc-1"]; deleting none is still 204 [ceph
    # "returns 204 even if there is no lifecycle config"].
    name = t.bucket("missing")
    expect_error("NoSuchLifecycleConfiguration", t.s3.get_bucket_lifecycle_configuration, Bucket=name, status=404)
    eq(status_of(t.s3.delete_bucket_lifecycle(Bucket=name)), 204, "DeleteBucketLifecycle without a configuration")
    expect_error("NoSuchLifecycleConfiguration", t.s3.get_bucket_lifecycle_configuration, Bucket=name, status=404)
    expect_error("NoSuchBucket", t.s3.get_bucket_lifecycle_configuration, Bucket=f"{t.prefix}-absent", status=404)


@case
def lifecycle_round_trip_filters(t):
    # What is PUT comes back on GET [ceph test_lifecycle_get, test_lifecycle_set_filter,
    # test_lifecycle_set_empty_filter; LS get-bucket-lifecycle-conf with
    # "Filter": {"Prefix": ""}, "Filter": {}, ObjectSizeGreaterThan / LessThan].
    name = t.bucket("filters")
    rules = [
        {"ID": "prefix", "Filter": {"Prefix": "logs/"}, "Status": "Enabled", "Expiration": {"Days": 31}},
        {"ID": "empty-prefix", "Filter": {"Prefix": ""}, "Status": "Enabled", "Expiration": {"Days": 400}},
        {"ID": "empty", "Filter": {}, "Status": "Disabled", "Expiration": {"Days": 365}},
        {"ID": "size", "Filter": {"ObjectSizeGreaterThan": 500}, "Status": "Enabled", "Expiration": {"Days": 3}},
        {
            "ID": "and",
            "Filter": {"And": {"Prefix": "big/", "ObjectSizeGreaterThan": 1024, "ObjectSizeLessThan": 1048576}},
            "Status": "Enabled",
            "Expiration": {"Days": 7},
        },
    ]
    t.lifecycle(name, rules)
    got = t.rules(name)
    eq(sorted(by_id(got)), sorted(by_id(rules)), "rule IDs on GET")
    for rid, rule in by_id(rules).items():
        eq(by_id(got)[rid], rule, f"rule {rid!r} on GET")


@case
def lifecycle_round_trip_legacy_prefix(t):
    # The older form, a rule-level Prefix without Filter, comes back as it was
    # sent [ceph test_lifecycle_get (asserts response['Rules'] == rules)].
    name = t.bucket("legacy")
    rules = [
        {"ID": "test1/", "Expiration": {"Days": 31}, "Prefix": "test1/", "Status": "Enabled"},
        {"ID": "test2/", "Expiration": {"Days": 120}, "Prefix": "test2/", "Status": "Disabled"},
    ]
    t.lifecycle(name, rules)
    eq(t.rules(name), rules, "GetBucketLifecycleConfiguration of rules with a rule-level Prefix")


@case
def lifecycle_rule_without_id(t):
    # A rule without ID gets one: GET shows an ID on every rule [Rule "ID ... up
    # to 255 characters"; ceph test_lifecycle_get_no_id].
    name = t.bucket("noid")
    for rules in (
        [
            {"Expiration": {"Days": 31}, "Prefix": "test1/", "Status": "Enabled"},
            {"Expiration": {"Days": 120}, "Prefix": "test2/", "Status": "Enabled"},
        ],
        [
            {"Expiration": {"Days": 31}, "Filter": {"Prefix": "a/"}, "Status": "Enabled"},
            {"Expiration": {"Days": 5}, "Filter": {"Prefix": "b/"}, "Status": "Enabled"},
        ],
    ):
        t.lifecycle(name, rules)
        got = t.rules(name)
        eq(len(got), 2, f"rules on GET: {got}")
        ids = [r.get("ID") for r in got]
        for rid in ids:
            check(isinstance(rid, str) and 0 < len(rid) <= 255, f"a generated rule ID: {rid!r}")
        eq(len(set(ids)), 2, f"generated IDs are distinct: {ids}")
        days = sorted(r["Expiration"]["Days"] for r in got)
        eq(days, sorted(r["Expiration"]["Days"] for r in rules), "the rules' days")


@case
def lifecycle_id_too_long(t):
    # 256 characters: 400 InvalidArgument [ceph test_lifecycle_id_too_long]; 255 is the limit [Rule].
    name = t.bucket("longid")
    expect_refused(
        t, name, "InvalidArgument",
        [{"ID": 256 * "a", "Expiration": {"Days": 2}, "Filter": {"Prefix": "test1/"}, "Status": "Enabled"}],
        "a 256-character ID",
    )
    expect_error("NoSuchLifecycleConfiguration", t.s3.get_bucket_lifecycle_configuration, Bucket=name, status=404)
    rules = [{"ID": 255 * "a", "Expiration": {"Days": 2}, "Filter": {"Prefix": "test1/"}, "Status": "Enabled"}]
    t.lifecycle(name, rules)
    eq(t.rules(name), rules, "a 255-character ID")


@case
def lifecycle_same_id(t):
    # [ceph test_lifecycle_same_id: 400 InvalidArgument]
    name = t.bucket("sameid")
    expect_refused(
        t, name, "InvalidArgument",
        [
            {"ID": "rule1", "Expiration": {"Days": 1}, "Filter": {"Prefix": "test1/"}, "Status": "Enabled"},
            {"ID": "rule1", "Expiration": {"Days": 2}, "Filter": {"Prefix": "test2/"}, "Status": "Enabled"},
        ],
        "two rules with one ID",
    )
    expect_error("NoSuchLifecycleConfiguration", t.s3.get_bucket_lifecycle_configuration, Bucket=name, status=404)


@case
def lifecycle_invalid_status(t):
    # Status is the enum Enabled | Disabled, case sensitive [Rule; ceph test_lifecycle_invalid_status].
    name = t.bucket("status")
    for status in ("enabled", "disabled", "invalid"):
        expect_refused(
            t, name, "MalformedXML",
            [{"ID": "rule1", "Expiration": {"Days": 2}, "Prefix": "test1/", "Status": status}],
            f"Status {status!r}",
        )


@case
def lifecycle_expiration_days_zero(t):
    # "'Days' for Expiration action must be a positive integer": 400
    # InvalidArgument [ceph test_lifecycle_expiration_days0].
    name = t.bucket("days0")
    expect_refused(
        t, name, "InvalidArgument",
        [{"ID": "rule1", "Expiration": {"Days": 0}, "Prefix": "days0/", "Status": "Enabled"}],
        "Expiration Days 0",
    )


@case
def lifecycle_expiration_date(t):
    # An Expiration Date at midnight UTC is taken and comes back [ceph
    # test_lifecycle_set_date; LS test_bucket_lifecycle_configuration_date];
    # any other time is 400 InvalidArgument "'Date' must be at midnight GMT"
    # [LS "wrong-data-no-midnight"].
    name = t.bucket("date")
    for date in (datetime.datetime(2017, 9, 27, tzinfo=UTC), datetime.datetime(2040, 1, 1, tzinfo=UTC)):
        rules = [{"ID": "rule1", "Expiration": {"Date": date}, "Filter": {"Prefix": "test1/"}, "Status": "Enabled"}]
        t.lifecycle(name, rules)
        got = t.rules(name)
        eq(got[0]["Expiration"].get("Date"), date, "Expiration Date on GET")
    expect_refused(
        t, name, "InvalidArgument",
        [{"ID": "rule2", "Expiration": {"Date": datetime.datetime(2040, 1, 1, 2, 2, tzinfo=UTC)}, "Filter": {}, "Status": "Enabled"}],
        "an Expiration Date not at midnight",
    )


@case
def lifecycle_other_actions(t):
    # NoncurrentVersionExpiration (with NewerNoncurrentVersions),
    # ExpiredObjectDeleteMarker and AbortIncompleteMultipartUpload are taken
    # and come back [ceph test_lifecycle_set_noncurrent, _set_deletemarker,
    # _set_multipart, test_lifecycle_expiration_newer_noncurrent; LS
    # test_bucket_lifecycle_configuration_object_expiry_versioned].
    name = t.bucket("actions", "Enabled")
    rules = [
        {"ID": "noncurrent", "Filter": {"Prefix": "past/"}, "Status": "Enabled", "NoncurrentVersionExpiration": {"NoncurrentDays": 2}},
        {
            "ID": "newer",
            "Filter": {"Prefix": "future/"},
            "Status": "Enabled",
            "NoncurrentVersionExpiration": {"NoncurrentDays": 3, "NewerNoncurrentVersions": 5},
        },
        {"ID": "marker", "Filter": {"Prefix": "test1/"}, "Status": "Enabled", "Expiration": {"ExpiredObjectDeleteMarker": True}},
        {
            "ID": "marker-and-noncurrent",
            "Filter": {"Prefix": "test2/"},
            "Status": "Enabled",
            "Expiration": {"ExpiredObjectDeleteMarker": True},
            "NoncurrentVersionExpiration": {"NoncurrentDays": 1},
        },
        {"ID": "multipart", "Filter": {"Prefix": "mp1/"}, "Status": "Enabled", "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": 2}},
        {"ID": "multipart-off", "Filter": {"Prefix": "mp2/"}, "Status": "Disabled", "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": 3}},
    ]
    t.lifecycle(name, rules)
    got = by_id(t.rules(name))
    eq(sorted(got), sorted(by_id(rules)), "rule IDs on GET")
    for rid, rule in by_id(rules).items():
        eq(got[rid], rule, f"rule {rid!r} on GET")


@case
def lifecycle_malformed(t):
    # Each 400 MalformedXML, "The XML you provided was not well-formed or did
    # not validate against our published schema" [LS test_put_bucket_lifecycle_conf_exc:
    # "missing-filter", "wrong-filter-and-plus-prefix", "wrong-filter-and-and-object-size",
    # "expired-delete-marker-and-days", "missing-noncurrent-version-expiration-data"].
    name = t.bucket("malformed")
    for what, rule in (
        ("a rule with neither Filter nor Prefix", {"ID": "r", "Expiration": {"Days": 7}, "Status": "Enabled"}),
        ("a Filter with And and Prefix", {"ID": "r", "Expiration": {"Days": 7}, "Filter": {"And": {"Prefix": "test"}, "Prefix": ""}, "Status": "Enabled"}),
        ("a Filter with a size and a Prefix outside And", {"ID": "r", "Expiration": {"Days": 7}, "Filter": {"ObjectSizeGreaterThan": 500, "Prefix": ""}, "Status": "Enabled"}),
        ("Expiration with Days and ExpiredObjectDeleteMarker", {"ID": "r", "Filter": {}, "Status": "Enabled", "Expiration": {"Days": 1, "ExpiredObjectDeleteMarker": True}}),
        ("an empty NoncurrentVersionExpiration", {"ID": "r", "Filter": {}, "Status": "Enabled", "Expiration": {"Days": 7}, "NoncurrentVersionExpiration": {}}),
    ):
        expect_refused(t, name, "MalformedXML", [rule], what)
    expect_error("NoSuchLifecycleConfiguration", t.s3.get_bucket_lifecycle_configuration, Bucket=name, status=404)


@case
def lifecycle_put_replaces(t):
    # A PUT replaces the whole configuration [PutLC].
    name = t.bucket("replace")
    t.lifecycle(name, [{"ID": "old", "Filter": {"Prefix": "a/"}, "Status": "Enabled", "Expiration": {"Days": 1}}])
    new = [{"ID": "new", "Filter": {"Prefix": "b/"}, "Status": "Enabled", "Expiration": {"Days": 2}}]
    t.lifecycle(name, new)
    eq(t.rules(name), new, "the configuration after a second PUT")


@case
def lifecycle_delete(t):
    # [ceph test_lifecycle_delete; LS test_delete_bucket_lifecycle_configuration; DelLC: 204]
    name = t.bucket("delete")
    rules = [
        {"ID": "test1/", "Expiration": {"Days": 31}, "Prefix": "test1/", "Status": "Enabled"},
        {"ID": "test2/", "Expiration": {"Days": 120}, "Prefix": "test2/", "Status": "Enabled"},
    ]
    t.lifecycle(name, rules)
    t.rules(name)
    eq(status_of(t.s3.delete_bucket_lifecycle(Bucket=name)), 204, "DeleteBucketLifecycle")
    expect_error("NoSuchLifecycleConfiguration", t.s3.get_bucket_lifecycle_configuration, Bucket=name, status=404)
    eq(status_of(t.s3.delete_bucket_lifecycle(Bucket=name)), 204, "DeleteBucketLifecycle again")


# --- x-amz-expiration ---------------------------------------------------------------


@case
def expiration_header(t):
    # PutObject, HeadObject and GetObject of an object an Expiration rule
    # covers carry x-amz-expiration: expiry-date="<RFC 1123, midnight GMT>",
    # rule-id="<id>", the date being creation + Days rounded up to the next
    # midnight UTC [PutObject; HeadObject; LCExpire; ceph
    # test_lifecycle_expiration_header_put / _head and check_lifecycle_expiration_header;
    # LS test_bucket_lifecycle_configuration_object_expiry]. Objects no
    # enabled rule covers carry none [LS "put-object-no-match"].
    name = t.bucket("header")
    t.lifecycle(
        name,
        [
            {"ID": "rule1", "Filter": {"Prefix": "days1/"}, "Status": "Enabled", "Expiration": {"Days": 1}},
            {"ID": "rule3", "Filter": {"Prefix": "days3/"}, "Status": "Enabled", "Expiration": {"Days": 3}},
            {"ID": "off", "Filter": {"Prefix": "off/"}, "Status": "Disabled", "Expiration": {"Days": 1}},
        ],
    )
    for key, rule_id, days in (("days1/foo", "rule1", 1), ("days3/foo", "rule3", 3)):
        put = t.s3.put_object(Bucket=name, Key=key, Body=b"bar")
        head = t.s3.head_object(Bucket=name, Key=key)
        expected = expected_expiry(head["LastModified"], days)
        for what, answer in (
            ("PutObject", put),
            ("HeadObject", head),
            ("GetObject", t.s3.get_object(Bucket=name, Key=key)),
        ):
            got = expiration_of(answer, f"{what} {key!r}")
            check(got is not None, f"{what} {key!r}: no x-amz-expiration (headers {dict(headers_of(answer))})")
            eq(got, (expected, rule_id), f"{what} {key!r} x-amz-expiration (created {head['LastModified'].isoformat()})")
    for key in ("other/foo", "off/foo", "days1"):
        put = t.s3.put_object(Bucket=name, Key=key, Body=b"bar")
        lacks_header(put, "x-amz-expiration", f"PutObject of {key!r}, which no enabled rule covers")
        lacks_header(t.s3.head_object(Bucket=name, Key=key), "x-amz-expiration", f"HeadObject of {key!r}")
    # Once the configuration is gone, so is the header.
    t.s3.delete_bucket_lifecycle(Bucket=name)
    lacks_header(t.s3.head_object(Bucket=name, Key="days1/foo"), "x-amz-expiration", "HeadObject after DeleteBucketLifecycle")


# --- Rules acting over time (--day-seconds) ------------------------------------------


@case
def expiration_removes_current_objects(t):
    # Expiration Days=1 deletes objects once a day old; keys outside the prefix
    # stay [LCExpire; ceph test_lifecycle_expiration].
    t.needs_time()
    name = t.bucket("expire")
    for key in ("expire/a", "expire/b", "keep/c", "expire-not/d"):
        t.s3.put_object(Bucket=name, Key=key, Body=b"x")
    t.lifecycle(name, [{"ID": "rule1", "Filter": {"Prefix": "expire/"}, "Status": "Enabled", "Expiration": {"Days": 1}}])
    # Not a day old yet: nothing has gone.
    eq(keys_of(t, name), ["expire-not/d", "expire/a", "expire/b", "keep/c"], "objects right after the rule was set")
    t.wait_until("expire/ objects deleted", lambda: not keys_of(t, name, "expire/"))
    eq(keys_of(t, name), ["expire-not/d", "keep/c"], "objects outside the prefix stay")


@case
def expiration_in_versioned_bucket_adds_markers(t):
    # In a versioned bucket, expiring the current version writes a delete
    # marker; the versions stay, noncurrent [LCExpire; ceph
    # test_lifecycle_expiration_versioning_enabled].
    t.needs_time()
    name = t.bucket("expirev", "Enabled")
    ids = put_versions(t, name, "expire/a", 2)
    keep = put_versions(t, name, "keep/b", 1)
    t.lifecycle(name, [{"ID": "rule1", "Filter": {"Prefix": "expire/"}, "Status": "Enabled", "Expiration": {"Days": 1}}])
    t.wait_until("a delete marker on expire/a", lambda: [m for m in markers_of(t, name, "expire/a") if m[1]])
    eq(len(markers_of(t, name, "expire/a")), 1, "one delete marker on expire/a")
    eq(versions_of(t, name, "expire/a"), ids[::-1], "expire/a keeps its versions, noncurrent")
    expect_error("NoSuchKey", t.s3.get_object, Bucket=name, Key="expire/a", status=404)
    eq(versions_of(t, name, "keep/b"), keep, "keep/b untouched")
    eq(markers_of(t, name, "keep/b"), [], "no marker on keep/b")


@case
def noncurrent_versions_expire(t):
    # NoncurrentVersionExpiration NoncurrentDays=1 removes noncurrent versions a
    # day after they became noncurrent; NewerNoncurrentVersions=1 keeps the
    # newest noncurrent one [Rule; ceph test_lifecycle_noncur_expiration,
    # test_lifecycle_expiration_newer_noncurrent].
    t.needs_time()
    name = t.bucket("noncurrent", "Enabled")
    all_nc = put_versions(t, name, "nc/a", 4)
    newer = put_versions(t, name, "nn/b", 4)
    keep = put_versions(t, name, "keep/c", 2)
    t.lifecycle(
        name,
        [
            {"ID": "nc", "Filter": {"Prefix": "nc/"}, "Status": "Enabled", "NoncurrentVersionExpiration": {"NoncurrentDays": 1}},
            {
                "ID": "nn",
                "Filter": {"Prefix": "nn/"},
                "Status": "Enabled",
                "NoncurrentVersionExpiration": {"NoncurrentDays": 1, "NewerNoncurrentVersions": 1},
            },
        ],
    )
    t.wait_until(
        "noncurrent versions expired",
        lambda: versions_of(t, name, "nc/a") == [all_nc[-1]] and versions_of(t, name, "nn/b") == [newer[-1], newer[-2]],
    )
    eq(t.s3.get_object(Bucket=name, Key="nc/a")["VersionId"], all_nc[-1], "the current version of nc/a stays current")
    eq(versions_of(t, name, "keep/c"), keep[::-1], "keep/c keeps every version")
    eq(markers_of(t, name, "nc/a") + markers_of(t, name, "nn/b"), [], "no delete markers")


@case
def expired_delete_marker_removed(t):
    # ExpiredObjectDeleteMarker removes a delete marker with no version under
    # it; a marker over a noncurrent version stays [LCExpire; ceph
    # test_lifecycle_deletemarker_expiration].
    t.needs_time()
    name = t.bucket("marker", "Enabled")
    lone = put_versions(t, name, "dm/a", 1)[0]
    t.s3.delete_object(Bucket=name, Key="dm/a")
    t.s3.delete_object(Bucket=name, Key="dm/a", VersionId=lone)
    under = put_versions(t, name, "dm/b", 1)[0]
    t.s3.delete_object(Bucket=name, Key="dm/b")
    eq(len(markers_of(t, name, "dm/a")), 1, "the lone marker of dm/a")
    t.lifecycle(name, [{"ID": "dm", "Filter": {"Prefix": "dm/"}, "Status": "Enabled", "Expiration": {"ExpiredObjectDeleteMarker": True}}])
    t.wait_until("the lone delete marker removed", lambda: not all_versions(t.s3, name, "dm/a"))
    eq(versions_of(t, name, "dm/b"), [under], "dm/b keeps its version")
    eq(len(markers_of(t, name, "dm/b")), 1, "dm/b keeps its marker (a version is under it)")


@case
def incomplete_uploads_aborted(t):
    # AbortIncompleteMultipartUpload DaysAfterInitiation=1 aborts uploads a day
    # old; others stay [Rule; ceph test_lifecycle_multipart_expiration].
    t.needs_time()
    name = t.bucket("multipart")
    upload = t.s3.create_multipart_upload(Bucket=name, Key="mp/a")["UploadId"]
    t.s3.upload_part(Bucket=name, Key="mp/a", UploadId=upload, PartNumber=1, Body=b"part")
    other = t.s3.create_multipart_upload(Bucket=name, Key="other/b")["UploadId"]
    t.lifecycle(name, [{"ID": "mp", "Filter": {"Prefix": "mp/"}, "Status": "Enabled", "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": 1}}])

    def uploads(prefix):
        return [u["UploadId"] for u in t.s3.list_multipart_uploads(Bucket=name, Prefix=prefix).get("Uploads", [])]

    eq(uploads("mp/"), [upload], "the upload right after the rule was set")
    t.wait_until("the mp/ upload aborted", lambda: not uploads("mp/"))
    expect_error("NoSuchUpload", t.s3.list_parts, Bucket=name, Key="mp/a", UploadId=upload, status=404)
    eq(uploads("other/"), [other], "the upload outside the prefix stays")
    t.s3.abort_multipart_upload(Bucket=name, Key="other/b", UploadId=other)
    eq(t.s3.list_multipart_uploads(Bucket=name).get("Uploads", []), [], "ListMultipartUploads empty at the end")


@case
def locked_versions_never_expire(t):
    # In an object-lock bucket lifecycle goes on working, but a version under
    # retention is never deleted by it [OLLC]. The unlocked key shows the
    # rules ran: its current version is expired (a marker), then removed as noncurrent.
    t.needs_time()
    name = t.bucket("locked", lock=True)
    until = datetime.datetime.now(UTC).replace(microsecond=0) + datetime.timedelta(days=30)
    retained = t.s3.put_object(
        Bucket=name, Key="lk/kept", Body=b"retained", ObjectLockMode="GOVERNANCE", ObjectLockRetainUntilDate=until
    )["VersionId"]
    free = put_versions(t, name, "lk/free", 1)[0]
    t.lifecycle(
        name,
        [
            {
                "ID": "lk",
                "Filter": {"Prefix": "lk/"},
                "Status": "Enabled",
                "Expiration": {"Days": 1},
                "NoncurrentVersionExpiration": {"NoncurrentDays": 1},
            }
        ],
    )
    t.wait_until("the unlocked version removed", lambda: free not in versions_of(t, name, "lk/free"))
    # One more lifecycle day and a pass, for the locked version to have had every chance.
    time.sleep(t.day_seconds + 1)
    eq(versions_of(t, name, "lk/kept"), [retained], "the retained version is still there")
    got = t.s3.get_object(Bucket=name, Key="lk/kept", VersionId=retained)
    eq(got["Body"].read(), b"retained", "the retained version still reads")


def main():
    parser = arguments()
    parser.add_argument(
        "--day-seconds",
        type=float,
        default=0,
        help="the server runs a lifecycle day as this many seconds; 0 (default) skips the cases that wait for rules to act",
    )

    def check_args(parser, args):
        if args.day_seconds < 0:
            parser.error("--day-seconds must be 0 or more")

    run_suite(Suite, CASES, parser, check_args)


if __name__ == "__main__":
    main()
