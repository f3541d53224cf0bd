//! Object lock and lifecycle: a held version survives every way a version
//! can go (a delete by id, the trash, a move, lifecycle, retention), with
//! governance yielding only to a bypass and legal holds to nothing; and
//! lifecycle rules expire current versions, thin noncurrent ones and
//! remove lone delete markers on a test clock.

use std::time::Duration;

use super::*;

fn prefix(p: &str) -> crate::Prefix {
    crate::Prefix::parse(p).unwrap()
}
use crate::{
    BucketLock, DefaultRetention, Expiration, Lifecycle, LifecycleRule, LockMode,
    NoncurrentExpiration, Retention, RetentionPeriod, RuleFilter, Versioning, now_ms,
};

const DAY: Duration = Duration::from_secs(24 * 3600);

fn is_locked<T: std::fmt::Debug>(result: Result<T, VolumeError>) -> bool {
    matches!(result, Err(VolumeError::Locked { .. }))
}

async fn held_versions_survive_every_removal(backend: &Backend) {
    let (_dir, volume, _) = backend.open_keeping_versions(DAY).await;
    let owner = Owner::OPEN;
    volume.make_folder(owner, &prefix("b/")).await.unwrap();
    // Lock needs versioning on: asked of an unversioned bucket, refused.
    volume
        .set_bucket_versioning(owner, "b", Versioning::Unversioned)
        .await
        .unwrap();
    let governance = BucketLock {
        default: Some(DefaultRetention {
            mode: LockMode::Governance,
            period: RetentionPeriod::Days(1),
        }),
    };
    assert!(matches!(
        volume.set_bucket_lock(owner, "b", governance, false).await,
        Err(VolumeError::InvalidBucketState(_))
    ));
    volume
        .set_bucket_lock(owner, "b", governance, true)
        .await
        .unwrap();
    assert!(matches!(
        volume
            .set_bucket_versioning(owner, "b", Versioning::Suspended)
            .await,
        Err(VolumeError::InvalidBucketState(_))
    ));

    // Every new version gets the default retention.
    let first = put(&volume, "b/k", b"one").await.unwrap();
    let second = put(&volume, "b/k", b"two").await.unwrap();
    let (_, lock) = volume
        .version_lock(owner, &path("b/k"), Some(&first.version_id))
        .await
        .unwrap();
    let retention = lock.retention.unwrap();
    assert_eq!(retention.mode, LockMode::Governance);
    assert!((retention.until_ms - now_ms() - 86_400_000).abs() < 60_000);

    // Governance: refused, then yields to a bypass.
    assert!(is_locked(
        volume
            .delete_version(owner, &path("b/k"), &first.version_id, false)
            .await
    ));
    volume
        .delete_version(owner, &path("b/k"), &first.version_id, true)
        .await
        .unwrap()
        .unwrap();

    // Governance becomes compliance only with a bypass; compliance is
    // extended, never shortened, not even with a bypass.
    let until = now_ms() + 2 * 86_400_000;
    let compliance = Some(Retention {
        mode: LockMode::Compliance,
        until_ms: until,
    });
    assert!(is_locked(
        volume
            .set_retention(owner, &path("b/k"), None, compliance, false)
            .await
    ));
    volume
        .set_retention(owner, &path("b/k"), None, compliance, true)
        .await
        .unwrap();
    let sooner = Some(Retention {
        mode: LockMode::Compliance,
        until_ms: until - 1000,
    });
    assert!(is_locked(
        volume
            .set_retention(owner, &path("b/k"), None, sooner, true)
            .await
    ));
    assert!(is_locked(
        volume
            .delete_version(owner, &path("b/k"), &second.version_id, true)
            .await
    ));

    // A delete leaves a marker; the trash cannot purge what is held, a
    // move cannot take it away, and the bytes still read by version.
    volume.delete(owner, &path("b/k")).await.unwrap();
    let trash = volume.trash(owner, None, 10).await.unwrap();
    assert_eq!(trash.items.len(), 1);
    assert!(is_locked(
        volume.purge_trashed(owner, trash.items[0].id).await
    ));
    assert_eq!(volume.empty_trash(owner).await.unwrap(), 0);
    put(&volume, "b/k", b"three").await.unwrap();
    assert!(is_locked(
        volume
            .move_node(owner, &path("b/k"), &path("b/moved"), false)
            .await
    ));
    assert!(is_locked(
        volume
            .move_node(owner, &path("b"), &path("elsewhere"), false)
            .await
    ));
    let kept = volume
        .version(owner, &path("b/k"), &second.version_id)
        .await
        .unwrap();
    let Version::File { meta, .. } = kept else {
        panic!("{kept:?}")
    };
    assert_eq!(meta.sha256, digest_of(b"two").as_str());

    // A legal hold holds against a bypass; off, governance yields again.
    let third = volume.stat(owner, &path("b/k")).await.unwrap();
    volume
        .set_legal_hold(owner, &path("b/k"), Some(&third.version_id), true)
        .await
        .unwrap();
    assert!(is_locked(
        volume
            .delete_version(owner, &path("b/k"), &third.version_id, true)
            .await
    ));
    volume
        .set_legal_hold(owner, &path("b/k"), Some(&third.version_id), false)
        .await
        .unwrap();
    volume
        .delete_version(owner, &path("b/k"), &third.version_id, true)
        .await
        .unwrap()
        .unwrap();

    // Asked of a bucket without lock: refused.
    volume.make_folder(owner, &prefix("plain/")).await.unwrap();
    put(&volume, "plain/f", b"x").await.unwrap();
    assert!(matches!(
        volume
            .set_legal_hold(owner, &path("plain/f"), None, true)
            .await,
        Err(VolumeError::NoObjectLock(_))
    ));
    // Collections leave every held blob.
    volume.collect_garbage().await.unwrap();
    assert!(exists(&volume, &digest_of(b"two")).await);
}

fn rule(id: &str, prefix: &str) -> LifecycleRule {
    LifecycleRule {
        id: id.to_owned(),
        enabled: true,
        filter: Some(RuleFilter {
            prefix: Some(prefix.to_owned()),
            ..RuleFilter::default()
        }),
        ..LifecycleRule::default()
    }
}

async fn lifecycle_expires_thins_and_never_takes_held_versions(backend: &Backend) {
    let dir = tempfile::tempdir().unwrap();
    let mut config = backend.config(dir.path());
    config.history.versions = true;
    // A "day" of 50 ms.
    config.lifecycle_day = Duration::from_millis(50);
    let (volume, _) = Volume::open(&config).await.unwrap();
    let owner = Owner::OPEN;
    volume.make_folder(owner, &prefix("lc/")).await.unwrap();
    volume
        .set_bucket_versioning(owner, "lc", Versioning::Enabled)
        .await
        .unwrap();
    let lifecycle = Lifecycle {
        rules: vec![
            LifecycleRule {
                expiration: Some(Expiration {
                    days: Some(1),
                    ..Expiration::default()
                }),
                ..rule("old", "old/")
            },
            LifecycleRule {
                noncurrent: Some(NoncurrentExpiration {
                    days: Some(1),
                    newer_versions: Some(1),
                }),
                ..rule("thin", "v/")
            },
            LifecycleRule {
                expiration: Some(Expiration {
                    expired_object_delete_marker: Some(true),
                    ..Expiration::default()
                }),
                ..rule("markers", "gone/")
            },
        ],
    };
    volume
        .set_bucket_lifecycle(owner, "lc", &lifecycle)
        .await
        .unwrap();
    assert_eq!(
        volume.bucket_lifecycle(owner, "lc").await.unwrap(),
        Some(lifecycle)
    );
    put(&volume, "lc/old/a", b"a").await.unwrap();
    put(&volume, "lc/keep/b", b"b").await.unwrap();
    for content in [&b"v1"[..], b"v2", b"v3", b"v4"] {
        put(&volume, "lc/v/x", content).await.unwrap();
    }
    put(&volume, "lc/gone/g", b"g").await.unwrap();
    let gone = volume.stat(owner, &path("lc/gone/g")).await.unwrap();
    volume.delete(owner, &path("lc/gone/g")).await.unwrap();
    volume
        .delete_version(owner, &path("lc/gone/g"), &gone.version_id, false)
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(150)).await;

    let report = volume.run_lifecycle().await.unwrap();
    assert_eq!(report.expired, 1, "{report:?}");
    assert_eq!(report.noncurrent_removed, 2, "{report:?}");
    assert_eq!(report.markers_removed, 1, "{report:?}");
    assert!(volume.stat(owner, &path("lc/old/a")).await.is_err());
    assert!(volume.stat(owner, &path("lc/keep/b")).await.is_ok());
    let x = volume.versions_of(owner, &path("lc/v/x")).await.unwrap();
    assert_eq!(x.len(), 2, "the current and one noncurrent: {x:?}");
    assert!(
        volume
            .versions_of(owner, &path("lc/gone/g"))
            .await
            .unwrap()
            .is_empty()
    );
    // Nothing left to do.
    assert_eq!(
        volume.run_lifecycle().await.unwrap().expired,
        0,
        "the marker it left is the latest, not a current file"
    );

    // In a locked bucket, held versions stay whatever the rules say.
    volume.make_folder(owner, &prefix("ll/")).await.unwrap();
    let locked = BucketLock {
        default: Some(DefaultRetention {
            mode: LockMode::Compliance,
            period: RetentionPeriod::Days(1),
        }),
    };
    volume
        .set_bucket_lock(owner, "ll", locked, true)
        .await
        .unwrap();
    let thin_all = Lifecycle {
        rules: vec![LifecycleRule {
            noncurrent: Some(NoncurrentExpiration {
                days: Some(1),
                newer_versions: None,
            }),
            ..rule("all", "")
        }],
    };
    volume
        .set_bucket_lifecycle(owner, "ll", &thin_all)
        .await
        .unwrap();
    put(&volume, "ll/k", b"l1").await.unwrap();
    put(&volume, "ll/k", b"l2").await.unwrap();
    tokio::time::sleep(Duration::from_millis(150)).await;
    let report = volume.run_lifecycle().await.unwrap();
    assert_eq!(report.held, 1, "{report:?}");
    assert_eq!(
        volume
            .versions_of(owner, &path("ll/k"))
            .await
            .unwrap()
            .len(),
        2
    );
    assert!(
        volume
            .delete_bucket_config(owner, "ll", Some(crate::ConfigKind::Lifecycle))
            .await
            .unwrap()
    );
    assert_eq!(volume.bucket_lifecycle(owner, "ll").await.unwrap(), None);
}

suite!(
    held_versions_survive_every_removal,
    lifecycle_expires_thins_and_never_takes_held_versions,
);
