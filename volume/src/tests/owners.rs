//! Owners: each user's own tree, quotas, tokens, sessions, share links and
//! secrets.

use super::*;

async fn each_owner_has_their_own_tree(backend: &Backend) {
    let (_dir, volume) = backend.open().await;
    let alice = add_user(&volume, "alice", None).await.owner();
    let bob = add_user(&volume, "bob", None).await.owner();
    put_as(&volume, alice, "a.txt", b"alice's").await.unwrap();
    put_as(&volume, bob, "a.txt", b"bob's").await.unwrap();
    put(&volume, "a.txt", b"open").await.unwrap();
    let (alice_meta, _) = volume.read(alice, &path("a.txt")).await.unwrap();
    assert_eq!(alice_meta.sha256, digest_of(b"alice's").as_str());
    let (bob_meta, _) = volume.read(bob, &path("a.txt")).await.unwrap();
    assert_eq!(bob_meta.sha256, digest_of(b"bob's").as_str());
    put_as(&volume, alice, "only/alice.txt", b"x")
        .await
        .unwrap();
    assert!(matches!(
        volume.stat(bob, &path("only/alice.txt")).await,
        Err(VolumeError::NotFound(_))
    ));
    assert!(matches!(
        volume.delete(bob, &path("only/alice.txt")).await,
        Err(VolumeError::NotFound(_))
    ));
    let names = |listing: Listing| -> Vec<String> {
        listing
            .entries
            .iter()
            .map(|e| e.name().to_owned())
            .collect()
    };
    let bobs = volume.list(bob, &Prefix::root(), None, 10).await.unwrap();
    assert_eq!(names(bobs), ["a.txt"]);
    let alices = volume.list(alice, &Prefix::root(), None, 10).await.unwrap();
    assert_eq!(names(alices), ["a.txt", "only/"]);
    // Removing a user takes their files; the next collection their blobs.
    assert!(volume.accounts().remove_user("alice").await.unwrap());
    assert!(
        volume
            .list(alice, &Prefix::root(), None, 10)
            .await
            .unwrap()
            .entries
            .is_empty()
    );
    volume.collect_garbage().await.unwrap();
    assert!(!exists(&volume, &digest_of(b"alice's")).await);
    assert!(exists(&volume, &digest_of(b"bob's")).await);
}

async fn a_quota_refuses_what_would_exceed_it(backend: &Backend) {
    let (_dir, volume) = backend.open().await;
    // Each file costs its bytes and an entry's overhead.
    const ENTRY: u64 = crate::ENTRY_OVERHEAD;
    let carol = add_user(&volume, "carol", Some(2 * ENTRY + 10))
        .await
        .owner();
    put_as(&volume, carol, "six", b"123456").await.unwrap();
    let refused = put_as(&volume, carol, "five", b"12345678901").await;
    assert!(
        matches!(
            refused,
            Err(VolumeError::QuotaExceeded {
                quota,
                used,
                size,
            }) if quota == 2 * ENTRY + 10 && used == ENTRY + 6 && size == ENTRY + 11
        ),
        "{refused:?}"
    );
    // Nothing of the refused upload stays: no row, and (collected) no blob.
    assert!(matches!(
        volume.stat(carol, &path("five")).await,
        Err(VolumeError::NotFound(_))
    ));
    assert!(!exists(&volume, &digest_of(b"12345678901")).await);
    // Replacing a file counts its new size instead of its old one.
    put_as(&volume, carol, "six", b"1234567890").await.unwrap();
    assert_eq!(volume.accounts().usage(carol).await.unwrap(), ENTRY + 10);
    // Empty things are not free: a folder and an empty file fill it.
    assert!(
        volume
            .make_folder(carol, &Prefix::parse("empty/").unwrap())
            .await
            .unwrap()
    );
    let refused = put_as(&volume, carol, "nothing", b"").await;
    assert!(
        matches!(refused, Err(VolumeError::QuotaExceeded { .. })),
        "{refused:?}"
    );
    let refused = volume
        .make_folder(carol, &Prefix::parse("other/").unwrap())
        .await;
    assert!(
        matches!(refused, Err(VolumeError::QuotaExceeded { .. })),
        "{refused:?}"
    );
    // A folder there already costs nothing more.
    assert!(
        !volume
            .make_folder(carol, &Prefix::parse("empty/").unwrap())
            .await
            .unwrap()
    );
    assert_eq!(
        volume.accounts().usage(carol).await.unwrap(),
        2 * ENTRY + 10
    );
    // The open tree has no quota.
    put(&volume, "big", &[7; 64]).await.unwrap();
}

async fn accounts_keep_tokens_sessions_shares_and_secrets(backend: &Backend) {
    let (_dir, volume) = backend.open().await;
    let accounts = volume.accounts();
    assert_eq!(accounts.user_count().await.unwrap(), 0);
    let dave = add_user(&volume, "dave", Some(1 << 20)).await;
    assert!(matches!(
        accounts
            .add_user(&accounts::NewUser {
                name: "dave",
                password_hash: "x",
                admin: true,
                quota: None,
            })
            .await,
        Err(VolumeError::AlreadyExists(_))
    ));
    assert_eq!(
        accounts.user_named("dave").await.unwrap(),
        Some(dave.clone())
    );
    accounts
        .add_token(dave.id, "t1", "hash-1", "laptop")
        .await
        .unwrap();
    assert_eq!(
        accounts.token_user("hash-1").await.unwrap(),
        Some(dave.clone())
    );
    assert_eq!(accounts.token_user("hash-2").await.unwrap(), None);
    assert_eq!(accounts.tokens(dave.id).await.unwrap()[0].label, "laptop");
    assert!(accounts.revoke_token("t1", "").await.unwrap());
    assert_eq!(accounts.token_user("hash-1").await.unwrap(), None);

    accounts
        .add_session(dave.id, "s1", "csrf-1", now_ms() + 60_000)
        .await
        .unwrap();
    accounts
        .add_session(dave.id, "s0", "csrf-0", now_ms() - 1)
        .await
        .unwrap();
    assert_eq!(
        accounts.session("s1").await.unwrap(),
        Some((dave.clone(), "csrf-1".to_owned()))
    );
    assert_eq!(accounts.session("s0").await.unwrap(), None, "expired");
    accounts.remove_session("s1").await.unwrap();
    assert_eq!(accounts.session("s1").await.unwrap(), None);

    accounts
        .add_share("sh1", dave.owner(), &path("a/b.txt"), 7, None)
        .await
        .unwrap();
    let share = accounts.share("sh1").await.unwrap().unwrap();
    assert_eq!(
        (share.owner, share.path.as_str()),
        (dave.owner(), "a/b.txt")
    );
    assert!(share.is_live(now_ms()));
    assert!(!accounts.revoke_share("sh1", Owner::OPEN).await.unwrap());
    assert!(accounts.revoke_share("sh1", dave.owner()).await.unwrap());
    assert_eq!(accounts.share("sh1").await.unwrap(), None);

    let first = accounts.secret("share-key", "one").await.unwrap();
    assert_eq!(first, "one");
    assert_eq!(accounts.secret("share-key", "two").await.unwrap(), "one");
    let users = accounts.users().await.unwrap();
    assert_eq!(users.len(), 1);
    // Sessions past the cap end the oldest.
    for n in 0..accounts::MAX_SESSIONS_PER_USER + 3 {
        let hash = format!("cap{n}");
        accounts
            .add_session(dave.id, &hash, "c", now_ms() + 60_000 + n)
            .await
            .unwrap();
    }
    assert_eq!(accounts.session("cap0").await.unwrap(), None);
    assert!(accounts.session("cap34").await.unwrap().is_some());
    // The open tree can be adopted by a user.
    put(&volume, "open.txt", b"from the open tree")
        .await
        .unwrap();
    assert_eq!(accounts.adopt_open_tree(dave.id).await.unwrap(), 1);
    assert!(volume.stat(dave.owner(), &path("open.txt")).await.is_ok());
    assert!(volume.stat(Owner::OPEN, &path("open.txt")).await.is_err());
    assert!(accounts.remove_user("dave").await.unwrap());
    assert!(!accounts.remove_user("dave").await.unwrap());
    assert_eq!(accounts.user_count().await.unwrap(), 0);
}

suite!(
    each_owner_has_their_own_tree,
    a_quota_refuses_what_would_exceed_it,
    accounts_keep_tokens_sessions_shares_and_secrets,
);
