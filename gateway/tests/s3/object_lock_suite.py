#!/usr/bin/env python3
"""S3 Object Lock held to AWS's documented behaviour.

Written from the AWS S3 API reference, from answers recorded against AWS
itself and from ceph/s3-tests, not from our implementation, so it can stand
in for the external conformance suites that will judge our object lock:

    object_lock_suite.py --endpoint http://127.0.0.1:PORT --access-key ID --secret SECRET

Every case prints one line (`ok <case>`); the first failure prints what was
sent, what was expected and what came back, and exits 1 (with --keep-going,
every case runs and the failures are listed at the end).

Buckets are named `<prefix>-<what>` with a random prefix, so two runs
against one server do not meet; every case makes its own buckets. The
cleanup turns every legal hold off and deletes every version and delete
marker with x-amz-bypass-governance-retention (only on locked buckets: AWS
refuses the header elsewhere), then the bucket. COMPLIANCE mode is only ever
used with a retain-until date a few seconds ahead; the cleanup waits for the
last of those dates to pass. A bucket it still cannot empty is left behind
and named on stderr.

Sources cited below:
  [OL]           https://docs.aws.amazon.com/AmazonS3/latest/userguide/object-lock.html
                 (modes, legal holds, "bypass governance", compliance cannot be
                 shortened or changed by any user)
  [OLM]          https://docs.aws.amazon.com/AmazonS3/latest/userguide/object-lock-managing.html
  [PutOLC]       https://docs.aws.amazon.com/AmazonS3/latest/API/API_PutObjectLockConfiguration.html
  [GetOLC]       https://docs.aws.amazon.com/AmazonS3/latest/API/API_GetObjectLockConfiguration.html
  [PutRet]       https://docs.aws.amazon.com/AmazonS3/latest/API/API_PutObjectRetention.html
  [GetRet]       https://docs.aws.amazon.com/AmazonS3/latest/API/API_GetObjectRetention.html
  [PutLH]        https://docs.aws.amazon.com/AmazonS3/latest/API/API_PutObjectLegalHold.html
  [GetLH]        https://docs.aws.amazon.com/AmazonS3/latest/API/API_GetObjectLegalHold.html
  [PutObject]    https://docs.aws.amazon.com/AmazonS3/latest/API/API_PutObject.html
                 (x-amz-object-lock-mode, -retain-until-date: ISO 8601, -legal-hold)
  [HeadObject]   https://docs.aws.amazon.com/AmazonS3/latest/API/API_HeadObject.html
                 ("x-amz-object-lock-legal-hold ... not returned if the specified
                 version of this object has never had a legal hold applied")
  [ceph]         ceph/s3-tests s3tests/functional/test_s3.py test_object_lock_*
                 (commit 8f0ae7b4, May 2026).
  [LS]           localstack/localstack tests/aws/services/s3/test_s3.py classes
                 TestS3ObjectLockRetention and TestS3ObjectLockLegalHold, and
                 test_s3_api.py class TestS3ObjectLock: tests marked
                 `aws.validated` whose *.snapshot.json hold the answers AWS gave
                 (status, code, message), commit 8b9a79f0, March 2026.
  [versitygw]    versity/versitygw s3err/errors.go
                 ErrMissingObjectLockConfigurationNoSpaces and its integration
                 tests PutObject_missing_bucket_lock / CopyObject_missing_bucket_lock
                 (PR 1755: "to maintain compatibility with S3"): lock headers on a
                 bucket without object lock are 400 InvalidRequest.

Choices where AWS's reference is silent:
  - GetObjectLegalHold of a version that never had a hold: 404
    NoSuchObjectLockConfiguration, as AWS answered in [LS]
    test_put_get_object_legal_hold "get-legal-hold-unset" (ceph/s3-tests has
    no test for it; ceph's own RGW agrees: rgw_op.cc RGWGetObjLegalHold::execute
    answers ERR_NO_SUCH_OBJECT_LOCK_CONFIGURATION); GetObjectRetention of a
    version without retention likewise ([LS] "get-object-retention-never-set").
  - Object Lock's "Days" and "Years" are calendar days of 24 hours, never
    the shortened "day" a lifecycle test server may use.
"""

import datetime
import re
import time

from botocore.exceptions import ClientError

from suite_harness import BaseSuite, all_versions, case_registry, empty_locked_bucket, main as run_suite
from suite_harness import check, eq, error_of, expect_error, fail, headers_of, status_of

UTC = datetime.timezone.utc
# How far a server-set date may be from the one we expect (clock skew, request time).
SLACK = datetime.timedelta(minutes=2)
# COMPLIANCE retention is never set further ahead than this.
COMPLIANCE_SECONDS = 3


ISO8601 = re.compile(
    r"^(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)(?:\.(\d{1,9}))?(Z|[+-]\d\d:?\d\d)$"
)


def parse_iso8601(text, what):
    """An ISO 8601 date-time with a zone (what x-amz-object-lock-retain-until-date carries) as an aware datetime."""
    m = ISO8601.match(text or "")
    check(m, f"{what}: {text!r} is not an ISO 8601 date-time with a time zone")
    year, month, day, hour, minute, second = (int(g) for g in m.groups()[:6])
    frac = m.group(7) or "0"
    micro = int((frac + "000000")[:6])
    zone = m.group(8)
    if zone == "Z":
        tz = UTC
    else:
        sign = 1 if zone[0] == "+" else -1
        digits = zone[1:].replace(":", "")
        tz = datetime.timezone(sign * datetime.timedelta(hours=int(digits[:2]), minutes=int(digits[2:])))
    return datetime.datetime(year, month, day, hour, minute, second, micro, tzinfo=tz)


def lock_headers(response, what):
    """(mode, retain-until as datetime or None, legal hold) from the raw x-amz-object-lock-* headers."""
    headers = headers_of(response)
    until = headers.get("x-amz-object-lock-retain-until-date")
    return (
        headers.get("x-amz-object-lock-mode"),
        None if until is None else parse_iso8601(until, f"{what}: x-amz-object-lock-retain-until-date"),
        headers.get("x-amz-object-lock-legal-hold"),
    )


def now():
    return datetime.datetime.now(UTC).replace(microsecond=0)


def future(days=0, years=0, seconds=0):
    """A retain-until date `days`/`years`/`seconds` ahead, whole seconds."""
    base = now()
    if years:
        base = base.replace(year=base.year + years)
    return base + datetime.timedelta(days=days, seconds=seconds)


def near(got, expected, what, slack=SLACK):
    check(got is not None, f"{what}: expected about {expected.isoformat()}, got nothing")
    if abs(got - expected) > slack:
        fail(f"{what}: expected {expected.isoformat()} (± {slack}), got {got.isoformat()}")


# ---------------------------------------------------------------------------
# Clients.


class Suite(BaseSuite):
    PREFIX = "ol"

    def __init__(self, args):
        super().__init__(args)
        # The latest COMPLIANCE retain-until date set so far; cleanup waits for it.
        self.compliance_until = None

    def locked_bucket(self, what):
        """A bucket created with x-amz-bucket-object-lock-enabled: true."""
        name = self._name(what)
        answer = self.s3.create_bucket(Bucket=name, ObjectLockEnabledForBucket=True)
        eq(status_of(answer), 200, "CreateBucket with ObjectLockEnabledForBucket")
        self.buckets.append(name)
        self.locked.add(name)
        return name

    def compliance(self, seconds=COMPLIANCE_SECONDS):
        """A COMPLIANCE retain-until date `seconds` ahead, remembered so the cleanup can wait for it."""
        until = future(seconds=seconds)
        if self.compliance_until is None or until > self.compliance_until:
            self.compliance_until = until
        return until

    def wait_for_compliance(self):
        if self.compliance_until is None:
            return
        left = (self.compliance_until - datetime.datetime.now(UTC)).total_seconds()
        if left > -1:
            time.sleep(left + 1.5)

    def empty(self, bucket):
        left = super().empty(bucket)
        if bucket not in self.locked and all_versions(self.s3, bucket):
            # A server that locked something in a bucket without object lock.
            empty_locked_bucket(self.s3, bucket)
        return left

    def cleanup(self):
        self.wait_for_compliance()
        super().cleanup()


def put(t, bucket, key, body=b"abc", **kwargs):
    """PutObject; returns its version id (a locked bucket is always versioned)."""
    answer = t.s3.put_object(Bucket=bucket, Key=key, Body=body, **kwargs)
    eq(status_of(answer), 200, f"PutObject {key!r}")
    vid = answer.get("VersionId")
    check(vid and vid != "null", f"PutObject {key!r} in a locked bucket: expected a version id, got {vid!r}")
    return vid


def config(mode=None, days=None, years=None, enabled="Enabled"):
    conf = {"ObjectLockEnabled": enabled}
    if mode is not None:
        retention = {"Mode": mode}
        if days is not None:
            retention["Days"] = days
        if years is not None:
            retention["Years"] = years
        conf["Rule"] = {"DefaultRetention": retention}
    return conf


def retention_of(t, bucket, key, **kwargs):
    answer = t.s3.get_object_retention(Bucket=bucket, Key=key, **kwargs)
    eq(status_of(answer), 200, "GetObjectRetention")
    return answer.get("Retention")


def legal_hold_of(t, bucket, key, **kwargs):
    answer = t.s3.get_object_legal_hold(Bucket=bucket, Key=key, **kwargs)
    eq(status_of(answer), 200, "GetObjectLegalHold")
    return answer.get("LegalHold")


def expect_no_retention(t, bucket, key, what, **kwargs):
    """GetObjectRetention of a version without retention: 404 (its code is
    held to AWS's by retention_never_set alone, so that one deviation does not
    hide the rest of every case)."""
    exc = expect_error(
        ("NoSuchObjectLockConfiguration", "ObjectLockConfigurationNotFoundError", "NoSuchKey"),
        t.s3.get_object_retention, Bucket=bucket, Key=key, status=404, **kwargs
    )
    check(error_of(exc)[0] != "NoSuchKey", f"{what}: GetObjectRetention answered NoSuchKey")


def version_ids(t, bucket, key):
    listing = t.s3.list_object_versions(Bucket=bucket, Prefix=key)
    return [v["VersionId"] for v in listing.get("Versions", []) if v["Key"] == key]


# ---------------------------------------------------------------------------
# Cases, in the order they run.

CASES, case = case_registry()


# --- Bucket configuration ---------------------------------------------------


@case
def lock_bucket_is_versioned(t):
    # A bucket created with object lock has versioning Enabled [OL; ceph
    # test_object_lock_put_obj_lock] and a configuration of just
    # ObjectLockEnabled=Enabled, no Rule [LS "get-lock-config-start"].
    name = t.locked_bucket("created")
    eq(t.s3.get_bucket_versioning(Bucket=name).get("Status"), "Enabled", "GetBucketVersioning of a lock bucket")
    answer = t.s3.get_object_lock_configuration(Bucket=name)
    eq(status_of(answer), 200, "GetObjectLockConfiguration")
    eq(answer.get("ObjectLockConfiguration"), {"ObjectLockEnabled": "Enabled"}, "the configuration of a new lock bucket")
    # Objects get real version ids.
    put(t, name, "k")


@case
def lock_bucket_versioning_cannot_be_suspended(t):
    # 409 InvalidBucketState "An Object Lock configuration is present on this
    # bucket, so the versioning state cannot be changed." [ceph
    # test_object_lock_suspend_versioning; LS "disable-versioning-on-locked-bucket"].
    name = t.locked_bucket("nosuspend")
    expect_error(
        "InvalidBucketState",
        t.s3.put_bucket_versioning,
        Bucket=name,
        VersioningConfiguration={"Status": "Suspended"},
        status=409,
    )
    eq(t.s3.get_bucket_versioning(Bucket=name).get("Status"), "Enabled", "versioning after the refused suspend")
    # Enabled again is fine [LS "enable-versioning-again-on-locked-bucket"].
    answer = t.s3.put_bucket_versioning(Bucket=name, VersioningConfiguration={"Status": "Enabled"})
    eq(status_of(answer), 200, "PutBucketVersioning Enabled on a lock bucket")


@case
def lock_config_round_trip(t):
    # [ceph test_object_lock_put_obj_lock, test_object_lock_get_obj_lock; LS test_get_put_object_lock_configuration]
    name = t.locked_bucket("config")
    for conf in (config("GOVERNANCE", days=1), config("COMPLIANCE", years=1), config("GOVERNANCE", years=2)):
        answer = t.s3.put_object_lock_configuration(Bucket=name, ObjectLockConfiguration=conf)
        eq(status_of(answer), 200, f"PutObjectLockConfiguration {conf}")
        eq(t.s3.get_object_lock_configuration(Bucket=name).get("ObjectLockConfiguration"), conf, "GetObjectLockConfiguration")
    # Only ObjectLockEnabled: the default retention is gone [LS "get-lock-config-only-enabled"].
    answer = t.s3.put_object_lock_configuration(Bucket=name, ObjectLockConfiguration={"ObjectLockEnabled": "Enabled"})
    eq(status_of(answer), 200, "PutObjectLockConfiguration without a Rule")
    eq(
        t.s3.get_object_lock_configuration(Bucket=name).get("ObjectLockConfiguration"),
        {"ObjectLockEnabled": "Enabled"},
        "GetObjectLockConfiguration after removing the Rule",
    )
    eq(t.s3.get_bucket_versioning(Bucket=name).get("Status"), "Enabled", "versioning stays Enabled")


@case
def lock_config_days_and_years(t):
    # Both Days and Years: 400 MalformedXML [PutOLC "...you cannot specify Days
    # and Years at the same time"; ceph test_object_lock_put_obj_lock_with_days_and_years;
    # LS "put-lock-config-both-days-years"].
    name = t.locked_bucket("daysyears")
    expect_error(
        "MalformedXML",
        t.s3.put_object_lock_configuration,
        Bucket=name,
        ObjectLockConfiguration=config("GOVERNANCE", days=1, years=1),
        status=400,
    )


@case
def lock_config_invalid_period(t):
    # Days 0 or Years -1: 400 InvalidRetentionPeriod [ceph
    # test_object_lock_put_obj_lock_invalid_days / _invalid_years].
    name = t.locked_bucket("period")
    for conf in (config("GOVERNANCE", days=0), config("GOVERNANCE", years=-1)):
        expect_error(
            "InvalidRetentionPeriod", t.s3.put_object_lock_configuration, Bucket=name, ObjectLockConfiguration=conf, status=400
        )
    eq(t.s3.get_object_lock_configuration(Bucket=name).get("ObjectLockConfiguration"), {"ObjectLockEnabled": "Enabled"}, "config after refusals")


@case
def lock_config_invalid_mode(t):
    # Mode is the enum GOVERNANCE | COMPLIANCE, case sensitive: 400 MalformedXML
    # [ceph test_object_lock_put_obj_lock_invalid_mode; LS "put-lock-config-bad-mode"].
    name = t.locked_bucket("mode")
    for mode in ("abc", "governance", "Compliance"):
        expect_error(
            "MalformedXML",
            t.s3.put_object_lock_configuration,
            Bucket=name,
            ObjectLockConfiguration=config(mode, years=1),
            status=400,
        )


@case
def lock_config_invalid_status(t):
    # ObjectLockEnabled is the enum `Enabled` only: `Disabled` is 400
    # MalformedXML [PutOLC; ceph test_object_lock_put_obj_lock_invalid_status].
    name = t.locked_bucket("status")
    for enabled in ("Disabled", "enabled"):
        expect_error(
            "MalformedXML",
            t.s3.put_object_lock_configuration,
            Bucket=name,
            ObjectLockConfiguration=config("GOVERNANCE", years=1, enabled=enabled),
            status=400,
        )


@case
def lock_config_incomplete(t):
    # Every half-written configuration is 400 MalformedXML [LS
    # test_put_object_lock_configuration_exc: "put-lock-config-no-enabled",
    # "-empty", "-empty-rule", "-empty-retention", "-no-days"].
    name = t.locked_bucket("incomplete")
    for what, conf in (
        ("a Rule without ObjectLockEnabled", {"Rule": {"DefaultRetention": {"Mode": "GOVERNANCE", "Days": 1}}}),
        ("an empty configuration", {}),
        ("an empty Rule", {"ObjectLockEnabled": "Enabled", "Rule": {}}),
        ("an empty DefaultRetention", {"ObjectLockEnabled": "Enabled", "Rule": {"DefaultRetention": {}}}),
        ("a Mode without Days or Years", {"ObjectLockEnabled": "Enabled", "Rule": {"DefaultRetention": {"Mode": "GOVERNANCE"}}}),
    ):
        try:
            t.s3.put_object_lock_configuration(Bucket=name, ObjectLockConfiguration=conf)
        except ClientError as exc:
            code, status, message = error_of(exc)
            eq((code, status), ("MalformedXML", 400), f"PutObjectLockConfiguration with {what} ({message})")
        else:
            fail(f"PutObjectLockConfiguration with {what}: expected MalformedXML (400), but it succeeded")


@case
def lock_config_needs_versioning(t):
    # Object lock on an existing bucket: only once versioning is Enabled,
    # else 409 InvalidBucketState "Versioning must be 'Enabled' on the bucket
    # to apply a Object Lock configuration" [PutOLC; ceph
    # test_object_lock_put_obj_lock_invalid_bucket, _enable_after_create;
    # LS test_put_object_lock_configuration_on_existing_bucket].
    name = t.bucket("later")
    conf = config("GOVERNANCE", days=1)
    expect_error("InvalidBucketState", t.s3.put_object_lock_configuration, Bucket=name, ObjectLockConfiguration=conf, status=409)
    t.s3.put_bucket_versioning(Bucket=name, VersioningConfiguration={"Status": "Suspended"})
    expect_error("InvalidBucketState", t.s3.put_object_lock_configuration, Bucket=name, ObjectLockConfiguration=conf, status=409)
    t.s3.put_bucket_versioning(Bucket=name, VersioningConfiguration={"Status": "Enabled"})
    t.locked.add(name)
    answer = t.s3.put_object_lock_configuration(Bucket=name, ObjectLockConfiguration=conf)
    eq(status_of(answer), 200, "PutObjectLockConfiguration once versioning is Enabled")
    eq(t.s3.get_object_lock_configuration(Bucket=name).get("ObjectLockConfiguration"), conf, "GetObjectLockConfiguration")
    # Now it is a lock bucket: versioning cannot be suspended, and the default applies.
    expect_error(
        "InvalidBucketState", t.s3.put_bucket_versioning, Bucket=name, VersioningConfiguration={"Status": "Suspended"}, status=409
    )
    vid = put(t, name, "k")
    head = t.s3.head_object(Bucket=name, Key="k", VersionId=vid)
    eq(lock_headers(head, "HeadObject")[0], "GOVERNANCE", "the default mode on an object after lock was enabled")


@case
def lock_config_missing(t):
    # A bucket without object lock: 404 ObjectLockConfigurationNotFoundError
    # "Object Lock configuration does not exist for this bucket" [GetOLC;
    # ceph test_object_lock_get_obj_lock_invalid_bucket; LS "get-lock-config-no-enabled"].
    plain = t.bucket("plain")
    expect_error("ObjectLockConfigurationNotFoundError", t.s3.get_object_lock_configuration, Bucket=plain, status=404)
    versioned = t.bucket("plainv", "Enabled")
    expect_error("ObjectLockConfigurationNotFoundError", t.s3.get_object_lock_configuration, Bucket=versioned, status=404)
    # A bucket that does not exist: NoSuchBucket [LS "get-lock-config-bucket-not-exists"].
    expect_error("NoSuchBucket", t.s3.get_object_lock_configuration, Bucket=f"{t.prefix}-missing", status=404)


@case
def retention_and_hold_need_a_lock_bucket(t):
    # 400 InvalidRequest "Bucket is missing Object Lock Configuration" [ceph
    # test_object_lock_put_obj_retention_invalid_bucket, _get_obj_retention_invalid_bucket,
    # _put_legal_hold_invalid_bucket, _get_legal_hold_invalid_bucket; LS
    # "put-object-retention-regular-bucket", "get-object-retention-regular-bucket"].
    _refuses_retention_and_hold(t, t.bucket("noret"))


def _refuses_retention_and_hold(t, *names):
    for name in names:
        t.s3.put_object(Bucket=name, Key="k", Body=b"abc")
        retention = {"Mode": "GOVERNANCE", "RetainUntilDate": future(days=30)}
        expect_error("InvalidRequest", t.s3.put_object_retention, Bucket=name, Key="k", Retention=retention, status=400)
        expect_error("InvalidRequest", t.s3.get_object_retention, Bucket=name, Key="k", status=400)
        expect_error("InvalidRequest", t.s3.put_object_legal_hold, Bucket=name, Key="k", LegalHold={"Status": "ON"}, status=400)
        expect_error("InvalidRequest", t.s3.get_object_legal_hold, Bucket=name, Key="k", status=400)
        # Nothing was locked: a plain delete still works.
        t.s3.delete_object(Bucket=name, Key="k")


@case
def retention_and_hold_need_lock_not_just_versioning(t):
    # Versioning Enabled is not object lock: the same 400 InvalidRequest.
    _refuses_retention_and_hold(t, t.bucket("noretv", "Enabled"))


@case
def retention_and_hold_of_missing_key(t):
    # A key that does not exist: 404 NoSuchKey [LS "put-object-retention-no-key",
    # "put-object-legal-hold-no-key"]; a bucket that does not exist: NoSuchBucket.
    name = t.locked_bucket("nokey")
    retention = {"Mode": "GOVERNANCE", "RetainUntilDate": future(days=30)}
    expect_error("NoSuchKey", t.s3.put_object_retention, Bucket=name, Key="absent", Retention=retention, status=404)
    expect_error("NoSuchKey", t.s3.put_object_legal_hold, Bucket=name, Key="absent", LegalHold={"Status": "ON"}, status=404)
    expect_error(
        "NoSuchBucket", t.s3.put_object_retention, Bucket=f"{t.prefix}-nobucket", Key="k", Retention=retention, status=404
    )


# --- Retention ----------------------------------------------------------------


@case
def retention_never_set(t):
    # A version without retention or hold: 404 NoSuchObjectLockConfiguration
    # "The specified object does not have a ObjectLock configuration" for both
    # [LS "get-object-retention-never-set", "get-legal-hold-unset" (AWS's answers)].
    name = t.locked_bucket("never")
    vid = put(t, name, "k")
    expect_error("NoSuchObjectLockConfiguration", t.s3.get_object_retention, Bucket=name, Key="k", status=404)
    expect_error("NoSuchObjectLockConfiguration", t.s3.get_object_retention, Bucket=name, Key="k", VersionId=vid, status=404)
    # A version with only a legal hold has no retention either.
    held = put(t, name, "held", ObjectLockLegalHoldStatus="ON")
    expect_error("NoSuchObjectLockConfiguration", t.s3.get_object_retention, Bucket=name, Key="held", VersionId=held, status=404)
    # Nothing protects the first: deleting the version needs no bypass.
    eq(status_of(t.s3.delete_object(Bucket=name, Key="k", VersionId=vid)), 204, "DeleteObject of an unlocked version")


@case
def legal_hold_never_set(t):
    # [LS test_put_get_object_legal_hold "get-legal-hold-unset": 404
    # NoSuchObjectLockConfiguration]; a version with only a retention has no hold either.
    name = t.locked_bucket("neverheld")
    vid = put(t, name, "k")
    expect_error("NoSuchObjectLockConfiguration", t.s3.get_object_legal_hold, Bucket=name, Key="k", status=404)
    expect_error("NoSuchObjectLockConfiguration", t.s3.get_object_legal_hold, Bucket=name, Key="k", VersionId=vid, status=404)
    retained = put(t, name, "r", ObjectLockMode="GOVERNANCE", ObjectLockRetainUntilDate=future(days=30))
    expect_error("NoSuchObjectLockConfiguration", t.s3.get_object_legal_hold, Bucket=name, Key="r", VersionId=retained, status=404)


@case
def lock_headers_only_when_set(t):
    # HeadObject and GetObject carry x-amz-object-lock-mode and
    # -retain-until-date only for a version with retention, and
    # x-amz-object-lock-legal-hold only for one that has had a hold ("not
    # returned if the specified version of this object has never had a legal
    # hold applied") [HeadObject; LS "head-object-locked" has no legal hold status].
    name = t.locked_bucket("hdrabsent")
    plain = put(t, name, "plain")
    until = future(days=30)
    retained = put(t, name, "ret", ObjectLockMode="GOVERNANCE", ObjectLockRetainUntilDate=until)
    held = put(t, name, "held", ObjectLockLegalHoldStatus="ON")
    for key, vid, expected in (
        ("plain", plain, (None, None, None)),
        ("ret", retained, ("GOVERNANCE", until, None)),
        ("held", held, (None, None, "ON")),
    ):
        eq(lock_headers(t.s3.head_object(Bucket=name, Key=key, VersionId=vid), "HeadObject"), expected, f"HeadObject lock headers of {key!r}")
        eq(lock_headers(t.s3.get_object(Bucket=name, Key=key, VersionId=vid), "GetObject"), expected, f"GetObject lock headers of {key!r}")


@case
def retention_round_trip(t):
    # [ceph test_object_lock_put_obj_retention, _get_obj_retention, _put_obj_retention_versionid; PutRet; GetRet]
    name = t.locked_bucket("retention")
    first = put(t, name, "k", b"first")
    second = put(t, name, "k", b"second")
    until = future(days=365)
    retention = {"Mode": "GOVERNANCE", "RetainUntilDate": until}
    # Without a version id: the current version.
    answer = t.s3.put_object_retention(Bucket=name, Key="k", Retention=retention)
    eq(status_of(answer), 200, "PutObjectRetention")
    eq(retention_of(t, name, "k"), retention, "GetObjectRetention of the current version")
    eq(retention_of(t, name, "k", VersionId=second), retention, "GetObjectRetention by version id")
    # The older version is untouched.
    expect_no_retention(t, name, "k", "the older version", VersionId=first)
    # By version id: only that version.
    older = {"Mode": "GOVERNANCE", "RetainUntilDate": future(days=30)}
    t.s3.put_object_retention(Bucket=name, Key="k", VersionId=first, Retention=older)
    eq(retention_of(t, name, "k", VersionId=first), older, "GetObjectRetention of the older version")
    eq(retention_of(t, name, "k"), retention, "the current version kept its own retention")
    # HeadObject and GetObject show it, the date in ISO 8601 [PutObject; ceph
    # test_object_lock_get_obj_retention_iso8601, test_object_lock_get_obj_metadata].
    for what, answer in (
        ("HeadObject", t.s3.head_object(Bucket=name, Key="k", VersionId=second)),
        ("GetObject", t.s3.get_object(Bucket=name, Key="k", VersionId=second)),
    ):
        mode, got_until, _hold = lock_headers(answer, what)
        eq(mode, "GOVERNANCE", f"{what} x-amz-object-lock-mode")
        eq(got_until, until, f"{what} x-amz-object-lock-retain-until-date")
        eq(answer.get("ObjectLockMode"), "GOVERNANCE", f"{what} ObjectLockMode (boto3)")
        eq(answer.get("ObjectLockRetainUntilDate"), until, f"{what} ObjectLockRetainUntilDate (boto3)")


@case
def retention_invalid_mode(t):
    # [ceph test_object_lock_put_obj_retention_invalid_mode; LS "update-retention-bad-value"]
    name = t.locked_bucket("retmode")
    put(t, name, "k")
    for mode in ("governance", "abc"):
        expect_error(
            "MalformedXML",
            t.s3.put_object_retention,
            Bucket=name,
            Key="k",
            Retention={"Mode": mode, "RetainUntilDate": future(days=30)},
            status=400,
        )
    # A Mode without a date: MalformedXML too [LS "put-object-missing-retention-fields"].
    expect_error(
        "MalformedXML",
        t.s3.put_object_retention,
        Bucket=name,
        Key="k",
        Retention={"Mode": "GOVERNANCE"},
        BypassGovernanceRetention=True,
        status=400,
    )
    expect_no_retention(t, name, "k", "after the refused PutObjectRetention")


@case
def retention_in_the_past(t):
    # 400 InvalidArgument "The retain until date must be in the future!",
    # ArgumentName RetainUntilDate [LS "update-retention-past-date"].
    name = t.locked_bucket("past")
    put(t, name, "k")
    exc = expect_error(
        "InvalidArgument",
        t.s3.put_object_retention,
        Bucket=name,
        Key="k",
        Retention={"Mode": "GOVERNANCE", "RetainUntilDate": datetime.datetime(2020, 1, 1, tzinfo=UTC)},
        status=400,
    )
    arg = exc.response["Error"].get("ArgumentName")
    check(arg in (None, "RetainUntilDate"), f"ArgumentName of a past retain-until date: {arg!r}")
    expect_no_retention(t, name, "k", "after the refused PutObjectRetention")


@case
def retention_extend_and_shorten(t):
    # Extending never needs a bypass; shortening GOVERNANCE needs
    # x-amz-bypass-governance-retention, else 403 AccessDenied [OL; ceph
    # test_object_lock_put_obj_retention_increase_period, _shorten_period,
    # _shorten_period_bypass; LS test_object_lock_extend_duration].
    name = t.locked_bucket("extend")
    vid = put(t, name, "k")
    base = future(days=10)
    t.s3.put_object_retention(Bucket=name, Key="k", Retention={"Mode": "GOVERNANCE", "RetainUntilDate": base})
    longer = {"Mode": "GOVERNANCE", "RetainUntilDate": base + datetime.timedelta(days=2)}
    eq(status_of(t.s3.put_object_retention(Bucket=name, Key="k", Retention=longer)), 200, "extending GOVERNANCE")
    eq(retention_of(t, name, "k"), longer, "after extending")
    shorter = {"Mode": "GOVERNANCE", "RetainUntilDate": base}
    exc = expect_error("AccessDenied", t.s3.put_object_retention, Bucket=name, Key="k", VersionId=vid, Retention=shorter, status=403)
    eq(retention_of(t, name, "k"), longer, f"a refused shortening changed nothing ({error_of(exc)[2]})")
    # The same date again is not a shortening.
    eq(status_of(t.s3.put_object_retention(Bucket=name, Key="k", Retention=longer)), 200, "the same date again")
    answer = t.s3.put_object_retention(Bucket=name, Key="k", Retention=shorter, BypassGovernanceRetention=True)
    eq(status_of(answer), 200, "shortening GOVERNANCE with bypass")
    eq(retention_of(t, name, "k"), shorter, "after shortening with bypass")


@case
def retention_removed_with_bypass(t):
    # An empty Retention with bypass removes a GOVERNANCE retention: AWS
    # answers 200 and then takes any date without bypass [LS test_s3_object_retention
    # "put-object-empty-retention", "update-retention-object"].
    name = t.locked_bucket("remove")
    vid = put(t, name, "k", ObjectLockMode="GOVERNANCE", ObjectLockRetainUntilDate=future(days=30))
    eq(
        status_of(t.s3.put_object_retention(Bucket=name, Key="k", Retention={}, BypassGovernanceRetention=True)),
        200,
        "PutObjectRetention with an empty Retention and bypass",
    )
    soon = {"Mode": "GOVERNANCE", "RetainUntilDate": future(days=1)}
    eq(status_of(t.s3.put_object_retention(Bucket=name, Key="k", VersionId=vid, Retention=soon)), 200, "a shorter date after removal, no bypass")
    eq(retention_of(t, name, "k", VersionId=vid), soon, "the new retention")


@case
def retention_governance_to_compliance(t):
    # Changing the mode of a GOVERNANCE version needs the bypass [ceph
    # test_object_lock_changing_mode_from_governance_without_bypass (403
    # AccessDenied) and _with_bypass (200)].
    name = t.locked_bucket("g2c")
    until = t.compliance()
    vid = put(t, name, "k", ObjectLockMode="GOVERNANCE", ObjectLockRetainUntilDate=until)
    compliance = {"Mode": "COMPLIANCE", "RetainUntilDate": until}
    expect_error("AccessDenied", t.s3.put_object_retention, Bucket=name, Key="k", Retention=compliance, status=403)
    eq(retention_of(t, name, "k")["Mode"], "GOVERNANCE", "the mode after a refused change")
    answer = t.s3.put_object_retention(Bucket=name, Key="k", Retention=compliance, BypassGovernanceRetention=True)
    eq(status_of(answer), 200, "GOVERNANCE to COMPLIANCE with bypass")
    eq(retention_of(t, name, "k", VersionId=vid), compliance, "the retention after the change")


@case
def retention_compliance_is_final(t):
    # COMPLIANCE: nobody shortens it, changes its mode or deletes the version
    # before the date, bypass or not; extending is allowed [OL "In compliance
    # mode ... its retention mode can't be changed, and its retention period
    # can't be shortened"; ceph test_object_lock_changing_mode_from_compliance;
    # LS test_s3_object_retention_compliance_mode ("delete-locked-2",
    # "update-retention-shortened", "update-retention-less-restrictive",
    # "delete-obj-after-lock-expiration")].
    name = t.locked_bucket("compliance")
    vid = put(t, name, "k")
    until = t.compliance()
    t.s3.put_object_retention(Bucket=name, Key="k", Retention={"Mode": "COMPLIANCE", "RetainUntilDate": until})
    refused = []
    for what, retention, bypass in (
        ("COMPLIANCE to GOVERNANCE", {"Mode": "GOVERNANCE", "RetainUntilDate": until + datetime.timedelta(seconds=1)}, False),
        ("COMPLIANCE to GOVERNANCE with bypass", {"Mode": "GOVERNANCE", "RetainUntilDate": until + datetime.timedelta(seconds=1)}, True),
        ("shortening COMPLIANCE with bypass", {"Mode": "COMPLIANCE", "RetainUntilDate": until - datetime.timedelta(seconds=1)}, True),
    ):
        kwargs = {"BypassGovernanceRetention": True} if bypass else {}
        try:
            t.s3.put_object_retention(Bucket=name, Key="k", VersionId=vid, Retention=retention, **kwargs)
        except ClientError as exc:
            code, status, _message = error_of(exc)
            if (code, status) != ("AccessDenied", 403):
                refused.append(f"{what}: expected AccessDenied (403), got {code} ({status})")
        else:
            refused.append(f"{what}: expected AccessDenied (403), but it succeeded")
    check(not refused, "; ".join(refused))
    expect_error("AccessDenied", t.s3.delete_object, Bucket=name, Key="k", VersionId=vid, status=403)
    expect_error(
        "AccessDenied", t.s3.delete_object, Bucket=name, Key="k", VersionId=vid, BypassGovernanceRetention=True, status=403
    )
    eq(retention_of(t, name, "k", VersionId=vid), {"Mode": "COMPLIANCE", "RetainUntilDate": until}, "COMPLIANCE retention unchanged")
    # Extending is allowed (by a second, to keep the wait short).
    longer = t.compliance(COMPLIANCE_SECONDS + 1)
    extended = {"Mode": "COMPLIANCE", "RetainUntilDate": max(longer, until + datetime.timedelta(seconds=1))}
    eq(status_of(t.s3.put_object_retention(Bucket=name, Key="k", VersionId=vid, Retention=extended)), 200, "extending COMPLIANCE")
    # Once the date has passed, the version deletes without bypass.
    t.wait_for_compliance()
    eq(status_of(t.s3.delete_object(Bucket=name, Key="k", VersionId=vid)), 204, "DeleteObject after COMPLIANCE expired")
    eq(version_ids(t, name, "k"), [], "no version left")


# --- Deletes --------------------------------------------------------------------


@case
def delete_retained_version(t):
    # [ceph test_object_lock_delete_object_with_retention, _with_retention_and_marker;
    # LS test_s3_object_retention "delete-obj-locked" (403 AccessDenied "Access
    # Denied because object protected by object lock."), "delete-obj-locked-bypass" (204)].
    name = t.locked_bucket("delret")
    body = b"retained body"
    vid = put(t, name, "k", body)
    t.s3.put_object_retention(Bucket=name, Key="k", Retention={"Mode": "GOVERNANCE", "RetainUntilDate": future(days=30)})
    expect_error("AccessDenied", t.s3.delete_object, Bucket=name, Key="k", VersionId=vid, status=403)
    # A simple DELETE only writes a delete marker: allowed [OL; LS "put-delete-marker"].
    answer = t.s3.delete_object(Bucket=name, Key="k")
    eq(status_of(answer), 204, "DeleteObject without version id in a lock bucket")
    eq(answer.get("DeleteMarker"), True, "DeleteObject made a delete marker")
    marker = answer.get("VersionId")
    check(marker and marker != vid, f"the marker has its own version id: {marker!r}")
    expect_error("NoSuchKey", t.s3.get_object, Bucket=name, Key="k", status=404)
    got = t.s3.get_object(Bucket=name, Key="k", VersionId=vid)
    eq(got["Body"].read(), body, "the retained version still reads by version id")
    # The marker itself is not locked; the version under it still is.
    eq(status_of(t.s3.delete_object(Bucket=name, Key="k", VersionId=marker)), 204, "DeleteObject of the marker")
    expect_error("AccessDenied", t.s3.delete_object, Bucket=name, Key="k", VersionId=vid, status=403)
    answer = t.s3.delete_object(Bucket=name, Key="k", VersionId=vid, BypassGovernanceRetention=True)
    eq(status_of(answer), 204, "DeleteObject with bypass")
    eq(version_ids(t, name, "k"), [], "the version is gone")


@case
def delete_marker_has_no_retention(t):
    # Retention calls on a delete marker: 405 MethodNotAllowed [LS
    # test_object_lock_delete_markers "put-object-retention-delete-marker",
    # "get-object-retention-delete-marker"].
    name = t.locked_bucket("dmret")
    put(t, name, "k", ObjectLockMode="GOVERNANCE", ObjectLockRetainUntilDate=future(days=30))
    marker = t.s3.delete_object(Bucket=name, Key="k")["VersionId"]
    retention = {"Mode": "GOVERNANCE", "RetainUntilDate": future(days=30)}
    expect_error("MethodNotAllowed", t.s3.put_object_retention, Bucket=name, Key="k", VersionId=marker, Retention=retention, status=405)
    expect_error("MethodNotAllowed", t.s3.get_object_retention, Bucket=name, Key="k", VersionId=marker, status=405)


@case
def delete_objects_retained(t):
    # DeleteObjects answers 200 with a per-key Error AccessDenied for the
    # locked version and deletes the other; with bypass it deletes it [ceph
    # test_object_lock_multi_delete_object_with_retention; LS "delete-objects-locked"].
    name = t.locked_bucket("multidel")
    v1 = put(t, name, "file1")
    v2 = put(t, name, "file2")
    t.s3.put_object_retention(Bucket=name, Key="file1", Retention={"Mode": "GOVERNANCE", "RetainUntilDate": future(days=30)})
    answer = t.s3.delete_objects(
        Bucket=name, Delete={"Objects": [{"Key": "file1", "VersionId": v1}, {"Key": "file2", "VersionId": v2}]}
    )
    eq(status_of(answer), 200, "DeleteObjects status")
    errors = answer.get("Errors", [])
    eq([(e.get("Key"), e.get("VersionId"), e.get("Code")) for e in errors], [("file1", v1, "AccessDenied")], "DeleteObjects Errors")
    eq([(d.get("Key"), d.get("VersionId")) for d in answer.get("Deleted", [])], [("file2", v2)], "DeleteObjects Deleted")
    eq(version_ids(t, name, "file1"), [v1], "the locked version is still there")
    answer = t.s3.delete_objects(
        Bucket=name, Delete={"Objects": [{"Key": "file1", "VersionId": v1}]}, BypassGovernanceRetention=True
    )
    eq(answer.get("Errors", []), [], "DeleteObjects with bypass: no Errors")
    eq([(d.get("Key"), d.get("VersionId")) for d in answer.get("Deleted", [])], [("file1", v1)], "DeleteObjects with bypass Deleted")
    eq(version_ids(t, name, "file1"), [], "the version is gone")


@case
def bypass_header_on_plain_bucket(t):
    # x-amz-bypass-governance-retention on a bucket without object lock, true or
    # false: 400 InvalidArgument "x-amz-bypass-governance-retention is only
    # applicable to Object Lock enabled buckets." [LS test_delete_object_with_no_locking].
    name = t.bucket("bypassplain")
    t.s3.put_object(Bucket=name, Key="k", Body=b"abc")
    for bypass in (True, False):
        expect_error(
            "InvalidArgument", t.s3.delete_object, Bucket=name, Key="k", BypassGovernanceRetention=bypass, status=400
        )
    expect_error(
        "InvalidArgument",
        t.s3.delete_objects,
        Bucket=name,
        Delete={"Objects": [{"Key": "k"}]},
        BypassGovernanceRetention=True,
        status=400,
    )
    eq(t.s3.get_object(Bucket=name, Key="k")["Body"].read(), b"abc", "the object is still there")


# --- Legal hold -----------------------------------------------------------------


@case
def legal_hold_round_trip(t):
    # [ceph test_object_lock_put_legal_hold, _get_legal_hold; LS
    # test_put_get_object_legal_hold, test_s3_legal_hold_lock_versioned]
    name = t.locked_bucket("hold")
    vid = put(t, name, "k")
    answer = t.s3.put_object_legal_hold(Bucket=name, Key="k", LegalHold={"Status": "ON"})
    eq(status_of(answer), 200, "PutObjectLegalHold ON")
    eq(legal_hold_of(t, name, "k"), {"Status": "ON"}, "GetObjectLegalHold")
    eq(legal_hold_of(t, name, "k", VersionId=vid), {"Status": "ON"}, "GetObjectLegalHold by version id")
    head = t.s3.head_object(Bucket=name, Key="k")
    eq(lock_headers(head, "HeadObject"), (None, None, "ON"), "HeadObject lock headers of a held version")
    # A hold alone, no retention: GetObjectRetention still has none.
    expect_no_retention(t, name, "k", "a version with a hold only")
    answer = t.s3.put_object_legal_hold(Bucket=name, Key="k", VersionId=vid, LegalHold={"Status": "OFF"})
    eq(status_of(answer), 200, "PutObjectLegalHold OFF")
    eq(legal_hold_of(t, name, "k"), {"Status": "OFF"}, "GetObjectLegalHold after OFF")
    # After OFF the header says OFF [LS "head-object-ver1-no-lock"].
    head = t.s3.head_object(Bucket=name, Key="k", VersionId=vid)
    eq(lock_headers(head, "HeadObject")[2], "OFF", "x-amz-object-lock-legal-hold after OFF")
    # Holds are per version.
    newer = put(t, name, "k", b"newer")
    t.s3.put_object_legal_hold(Bucket=name, Key="k", VersionId=newer, LegalHold={"Status": "ON"})
    eq(legal_hold_of(t, name, "k", VersionId=vid), {"Status": "OFF"}, "the older version's hold")
    eq(legal_hold_of(t, name, "k", VersionId=newer), {"Status": "ON"}, "the newer version's hold")
    t.s3.put_object_legal_hold(Bucket=name, Key="k", VersionId=newer, LegalHold={"Status": "OFF"})


@case
def legal_hold_invalid_status(t):
    # [ceph test_object_lock_put_legal_hold_invalid_status: 400 MalformedXML;
    # LS "put-object-retention-empty": no LegalHold at all is MalformedXML too]
    name = t.locked_bucket("holdbad")
    put(t, name, "k")
    for status in ("abc", "on"):
        expect_error("MalformedXML", t.s3.put_object_legal_hold, Bucket=name, Key="k", LegalHold={"Status": status}, status=400)
    expect_error(
        ("NoSuchObjectLockConfiguration", "NoSuchObjectLegalHold"), t.s3.get_object_legal_hold, Bucket=name, Key="k", status=404
    )


@case
def legal_hold_blocks_delete(t):
    # A hold blocks deleting the version, and the governance bypass does not
    # lift it [OL "A legal hold ... remains in effect until removed"; ceph
    # test_object_lock_delete_object_with_legal_hold_on / _off; LS
    # test_delete_locked_object ("delete-object-locked", "delete-objects-locked")].
    name = t.locked_bucket("holddel")
    vid = put(t, name, "k")
    t.s3.put_object_legal_hold(Bucket=name, Key="k", LegalHold={"Status": "ON"})
    expect_error("AccessDenied", t.s3.delete_object, Bucket=name, Key="k", VersionId=vid, status=403)
    expect_error(
        "AccessDenied", t.s3.delete_object, Bucket=name, Key="k", VersionId=vid, BypassGovernanceRetention=True, status=403
    )
    answer = t.s3.delete_objects(
        Bucket=name, Delete={"Objects": [{"Key": "k", "VersionId": vid}]}, BypassGovernanceRetention=True
    )
    eq(
        [(e.get("Key"), e.get("VersionId"), e.get("Code")) for e in answer.get("Errors", [])],
        [("k", vid, "AccessDenied")],
        "DeleteObjects of a held version, with bypass",
    )
    eq(version_ids(t, name, "k"), [vid], "the held version is still there")
    t.s3.put_object_legal_hold(Bucket=name, Key="k", VersionId=vid, LegalHold={"Status": "OFF"})
    eq(status_of(t.s3.delete_object(Bucket=name, Key="k", VersionId=vid)), 204, "DeleteObject once the hold is OFF")
    eq(version_ids(t, name, "k"), [], "the version is gone")


# --- Lock headers on writes -----------------------------------------------------


@case
def put_object_with_lock_headers(t):
    # x-amz-object-lock-mode, -retain-until-date and -legal-hold on PutObject;
    # HeadObject and GetObject give them back, the date in ISO 8601 [PutObject;
    # HeadObject; ceph test_object_lock_uploading_obj, _get_obj_retention_iso8601].
    name = t.locked_bucket("puthdr")
    until = future(days=400)
    vid = put(t, name, "k", b"locked", ObjectLockMode="GOVERNANCE", ObjectLockRetainUntilDate=until, ObjectLockLegalHoldStatus="ON")
    for what, answer in (
        ("HeadObject", t.s3.head_object(Bucket=name, Key="k")),
        ("HeadObject by version", t.s3.head_object(Bucket=name, Key="k", VersionId=vid)),
        ("GetObject", t.s3.get_object(Bucket=name, Key="k")),
    ):
        eq(lock_headers(answer, what), ("GOVERNANCE", until, "ON"), f"{what} x-amz-object-lock-* headers")
        eq(
            (answer.get("ObjectLockMode"), answer.get("ObjectLockRetainUntilDate"), answer.get("ObjectLockLegalHoldStatus")),
            ("GOVERNANCE", until, "ON"),
            f"{what} as boto3 reads it",
        )
    eq(retention_of(t, name, "k"), {"Mode": "GOVERNANCE", "RetainUntilDate": until}, "GetObjectRetention")
    eq(legal_hold_of(t, name, "k"), {"Status": "ON"}, "GetObjectLegalHold")
    expect_error("AccessDenied", t.s3.delete_object, Bucket=name, Key="k", VersionId=vid, BypassGovernanceRetention=True, status=403)
    # A COMPLIANCE write, and one with a hold only.
    c_until = t.compliance()
    cv = put(t, name, "c", ObjectLockMode="COMPLIANCE", ObjectLockRetainUntilDate=c_until)
    eq(lock_headers(t.s3.head_object(Bucket=name, Key="c", VersionId=cv), "HeadObject")[:2], ("COMPLIANCE", c_until), "COMPLIANCE on PutObject")
    eq(retention_of(t, name, "c", VersionId=cv), {"Mode": "COMPLIANCE", "RetainUntilDate": c_until}, "GetObjectRetention of COMPLIANCE")
    hv = put(t, name, "h", ObjectLockLegalHoldStatus="ON")
    eq(lock_headers(t.s3.head_object(Bucket=name, Key="h", VersionId=hv), "HeadObject"), (None, None, "ON"), "a hold alone on PutObject")
    expect_no_retention(t, name, "h", "a version written with a hold only")


@case
def put_object_lock_headers_need_a_lock_bucket(t):
    # Lock headers on a bucket without object lock: 400 InvalidRequest "Bucket
    # is missing ObjectLockConfiguration" [versitygw PutObject_missing_bucket_lock,
    # CopyObject_missing_bucket_lock and its CreateMultipartUpload test].
    name = t.bucket("hdrplain", "Enabled")
    until = future(days=30)
    for what, kwargs in (
        ("mode and date", {"ObjectLockMode": "GOVERNANCE", "ObjectLockRetainUntilDate": until}),
        ("legal hold", {"ObjectLockLegalHoldStatus": "ON"}),
    ):
        expect_error("InvalidRequest", t.s3.put_object, Bucket=name, Key="k", Body=b"x", status=400, **kwargs)
    t.s3.put_object(Bucket=name, Key="src", Body=b"x")
    expect_error(
        "InvalidRequest",
        t.s3.copy_object,
        Bucket=name,
        Key="dst",
        CopySource={"Bucket": name, "Key": "src"},
        ObjectLockMode="GOVERNANCE",
        ObjectLockRetainUntilDate=until,
        status=400,
    )
    # None of the refused writes wrote anything.
    expect_error("NoSuchKey", t.s3.get_object, Bucket=name, Key="k", status=404)
    expect_error("NoSuchKey", t.s3.get_object, Bucket=name, Key="dst", status=404)
    for what, kwargs in (
        ("mode and date", {"ObjectLockMode": "GOVERNANCE", "ObjectLockRetainUntilDate": until}),
        ("legal hold", {"ObjectLockLegalHoldStatus": "ON"}),
    ):
        expect_error("InvalidRequest", t.s3.create_multipart_upload, Bucket=name, Key="k", status=400, **kwargs)


@case
def put_object_lock_headers_incomplete(t):
    # Mode without date or date without mode: 400 InvalidArgument
    # "x-amz-object-lock-retain-until-date and x-amz-object-lock-mode must both
    # be supplied"; an unknown mode: 400 InvalidArgument "Unknown wormMode
    # directive." [LS test_s3_object_lock_mode_validation, test_bucket_config_default_retention
    # "put-object-with-lock-no-date"].
    name = t.locked_bucket("hdrhalf")
    until = future(days=30)
    for what, kwargs in (
        ("a mode without a date", {"ObjectLockMode": "GOVERNANCE"}),
        ("a date without a mode", {"ObjectLockRetainUntilDate": until}),
        ("an unknown mode", {"ObjectLockMode": "BAD-VALUE", "ObjectLockRetainUntilDate": until}),
    ):
        try:
            t.s3.put_object(Bucket=name, Key="k", Body=b"x", **kwargs)
        except ClientError as exc:
            code, status, message = error_of(exc)
            eq((code, status), ("InvalidArgument", 400), f"PutObject with {what} ({message})")
        else:
            fail(f"PutObject with {what}: expected InvalidArgument (400), but it succeeded")
    expect_error(
        "InvalidArgument",
        t.s3.create_multipart_upload,
        Bucket=name,
        Key="k",
        ObjectLockMode="BAD-VALUE",
        ObjectLockRetainUntilDate=until,
        status=400,
    )
    eq(version_ids(t, name, "k"), [], "no refused PutObject wrote a version")


@case
def default_retention_applies(t):
    # With a DefaultRetention, a new object gets that mode and a retain-until
    # date of its creation + the period (precise, not rounded) [OL "Bucket
    # configuration"; LS test_bucket_config_default_retention (asserts ±2 min
    # around LastModified + 1 day)]. Explicit headers or a later
    # PutObjectRetention win [ceph test_object_lock_put_obj_retention_override_default_retention].
    name = t.locked_bucket("default")
    t.s3.put_object_lock_configuration(Bucket=name, ObjectLockConfiguration=config("GOVERNANCE", days=1))
    vid = put(t, name, "k", b"default")
    head = t.s3.head_object(Bucket=name, Key="k", VersionId=vid)
    mode, until, _hold = lock_headers(head, "HeadObject")
    eq(mode, "GOVERNANCE", "the default mode")
    near(until, head["LastModified"] + datetime.timedelta(days=1), "the default retain-until date")
    got = retention_of(t, name, "k", VersionId=vid)
    eq(got["Mode"], "GOVERNANCE", "GetObjectRetention Mode of a defaulted object")
    near(got["RetainUntilDate"], head["LastModified"] + datetime.timedelta(days=1), "GetObjectRetention date of a defaulted object")
    expect_error("AccessDenied", t.s3.delete_object, Bucket=name, Key="k", VersionId=vid, status=403)
    # Explicit headers win over the default.
    until = future(days=20)
    explicit = put(t, name, "k", b"explicit", ObjectLockMode="GOVERNANCE", ObjectLockRetainUntilDate=until)
    eq(lock_headers(t.s3.head_object(Bucket=name, Key="k", VersionId=explicit), "HeadObject")[:2], ("GOVERNANCE", until), "headers over the default")
    # A Years default.
    t.s3.put_object_lock_configuration(Bucket=name, ObjectLockConfiguration=config("GOVERNANCE", years=1))
    yearly = put(t, name, "y")
    head = t.s3.head_object(Bucket=name, Key="y", VersionId=yearly)
    lm = head["LastModified"]
    try:
        a_year = lm.replace(year=lm.year + 1)
    except ValueError:  # 29 February
        a_year = lm + datetime.timedelta(days=365)
    near(lock_headers(head, "HeadObject")[1], a_year, "the retain-until of a Years=1 default", slack=datetime.timedelta(days=1, minutes=2))
    # Without a Rule again: new objects carry no retention.
    t.s3.put_object_lock_configuration(Bucket=name, ObjectLockConfiguration={"ObjectLockEnabled": "Enabled"})
    bare = put(t, name, "bare")
    expect_no_retention(t, name, "bare", "an object written after the Rule was removed", VersionId=bare)


@case
def multipart_with_lock_headers(t):
    # CreateMultipartUpload takes the lock headers; the completed object carries
    # them and cannot be deleted by version without bypass [ceph
    # test_object_lock_delete_multipart_object_with_retention, _with_legal_hold_on].
    name = t.locked_bucket("mpu")
    until = future(days=60)
    results = {}
    for key, kwargs in (
        ("ret", {"ObjectLockMode": "GOVERNANCE", "ObjectLockRetainUntilDate": until}),
        ("hold", {"ObjectLockLegalHoldStatus": "ON"}),
    ):
        upload = t.s3.create_multipart_upload(Bucket=name, Key=key, **kwargs)["UploadId"]
        part = t.s3.upload_part(Bucket=name, Key=key, UploadId=upload, PartNumber=1, Body=b"abc")
        done = t.s3.complete_multipart_upload(
            Bucket=name, Key=key, UploadId=upload, MultipartUpload={"Parts": [{"ETag": part["ETag"], "PartNumber": 1}]}
        )
        vid = done.get("VersionId")
        check(vid and vid != "null", f"CompleteMultipartUpload of {key!r}: a version id, got {vid!r}")
        results[key] = vid
    head = t.s3.head_object(Bucket=name, Key="ret", VersionId=results["ret"])
    eq(lock_headers(head, "HeadObject")[:2], ("GOVERNANCE", until), "lock headers of the completed upload")
    eq(retention_of(t, name, "ret"), {"Mode": "GOVERNANCE", "RetainUntilDate": until}, "GetObjectRetention of the completed upload")
    head = t.s3.head_object(Bucket=name, Key="hold", VersionId=results["hold"])
    eq(lock_headers(head, "HeadObject"), (None, None, "ON"), "lock headers of the held upload")
    for key, vid in results.items():
        expect_error("AccessDenied", t.s3.delete_object, Bucket=name, Key=key, VersionId=vid, status=403)
    eq(status_of(t.s3.delete_object(Bucket=name, Key="ret", VersionId=results["ret"], BypassGovernanceRetention=True)), 204, "bypass deletes it")
    t.s3.put_object_legal_hold(Bucket=name, Key="hold", VersionId=results["hold"], LegalHold={"Status": "OFF"})
    eq(status_of(t.s3.delete_object(Bucket=name, Key="hold", VersionId=results["hold"])), 204, "deleting once the hold is OFF")


@case
def copy_object_with_lock_headers(t):
    # CopyObject takes the lock headers for the new object; without them the
    # copy does not inherit the source's lock [LS test_s3_copy_object_retention_lock
    # and test_s3_copy_object_legal_hold: "the destination key did not keep the lock"].
    name = t.locked_bucket("copy")
    put(t, name, "src", b"source body")
    until = future(days=15)
    copied = t.s3.copy_object(
        Bucket=name,
        Key="dst",
        CopySource={"Bucket": name, "Key": "src"},
        ObjectLockMode="GOVERNANCE",
        ObjectLockRetainUntilDate=until,
        ObjectLockLegalHoldStatus="ON",
    )
    vid = copied.get("VersionId")
    head = t.s3.head_object(Bucket=name, Key="dst", VersionId=vid)
    eq(lock_headers(head, "HeadObject"), ("GOVERNANCE", until, "ON"), "a copy with lock headers")
    eq(t.s3.get_object(Bucket=name, Key="dst")["Body"].read(), b"source body", "the copy's body")
    eq(retention_of(t, name, "dst", VersionId=vid), {"Mode": "GOVERNANCE", "RetainUntilDate": until}, "GetObjectRetention of the copy")
    expect_error("AccessDenied", t.s3.delete_object, Bucket=name, Key="dst", VersionId=vid, BypassGovernanceRetention=True, status=403)


@case
def copy_object_does_not_inherit_lock(t):
    # Without lock headers a copy carries no retention and no hold, whatever the
    # source has [LS test_s3_copy_object_retention_lock "head-dest-key",
    # test_s3_copy_object_legal_hold "head-dest-key": no ObjectLock* fields].
    name = t.locked_bucket("copyplain")
    src = put(
        t, name, "src", b"source body",
        ObjectLockMode="GOVERNANCE", ObjectLockRetainUntilDate=future(days=10), ObjectLockLegalHoldStatus="ON",
    )
    plain = t.s3.copy_object(Bucket=name, Key="plain", CopySource={"Bucket": name, "Key": "src", "VersionId": src})
    head = t.s3.head_object(Bucket=name, Key="plain", VersionId=plain["VersionId"])
    eq(lock_headers(head, "HeadObject"), (None, None, None), "lock headers of a copy made without lock headers")
    eq(status_of(t.s3.delete_object(Bucket=name, Key="plain", VersionId=plain["VersionId"])), 204, "the copy deletes without bypass")


def main():
    run_suite(Suite, CASES)


if __name__ == "__main__":
    main()
