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

/// The tables that keep no owner's rows; every other table of the schema
/// is in the cascades' one list (`owners::TABLES`).
const NOT_AN_OWNERS: [&str; 6] = [
    "blobs",
    "retired_segments",
    "secrets",
    "memory_samples",
    "process_samples",
    "footprints",
];

/// The columns by which a table can name an owner (or their uploads).
const OWNER_COLUMNS: [&str; 3] = ["owner", "user_id", "upload_id"];

/// Every table of the schema with its columns, read from the database's
/// catalogue (sqlx's migration bookkeeping left out).
async fn schema(
    volume: &Volume,
    backend: &Backend,
) -> std::collections::BTreeMap<String, Vec<String>> {
    let sql = match backend {
        Backend::SqliteLocal => {
            "SELECT m.name, c.name FROM sqlite_master AS m, pragma_table_info(m.name) AS c
             WHERE m.type = 'table' AND m.name NOT LIKE 'sqlite_%'"
        }
        Backend::PostgresS3(_) => {
            "SELECT CAST(table_name AS TEXT), CAST(column_name AS TEXT)
             FROM information_schema.columns WHERE table_schema = current_schema()"
        }
    };
    let rows: Vec<(String, String)> = crate::db::sql::query_as(sql)
        .fetch_all(volume.db().pool())
        .await
        .unwrap();
    let mut tables = std::collections::BTreeMap::<String, Vec<String>>::new();
    for (table, column) in rows {
        if !table.starts_with("_sqlx") {
            tables.entry(table).or_default().push(column);
        }
    }
    tables
}

/// How many rows of `table` (with `columns`) are `owner`'s, or of the
/// uploads `uploads`.
async fn rows_of(
    volume: &Volume,
    table: &str,
    columns: &[String],
    owner: Owner,
    uploads: &[String],
) -> i64 {
    let id = owner.id();
    let has = |column: &str| columns.iter().any(|c| c == column);
    let clause = if table == "users" {
        format!("id = {id}")
    } else if has("owner") {
        format!("owner = {id}")
    } else if has("user_id") {
        format!("user_id = {id}")
    } else if has("upload_id") {
        // No upload id is empty: an empty list matches nothing.
        let ids: Vec<String> = uploads.iter().map(|id| format!("'{id}'")).collect();
        format!(
            "upload_id IN ({})",
            [vec!["''".to_owned()], ids].concat().join(", ")
        )
    } else {
        panic!("{table} names no owner: {columns:?}")
    };
    let (count,): (i64,) =
        crate::db::sql::query_as(&format!("SELECT COUNT(*) FROM {table} WHERE {clause}"))
            .fetch_one(volume.db().pool())
            .await
            .unwrap();
    count
}

/// For every table of the schema but those that keep no owner's rows
/// (whether or not the cascades list it), how many rows are `owner`'s.
async fn owned_rows(
    volume: &Volume,
    backend: &Backend,
    owner: Owner,
    uploads: &[String],
) -> Vec<(String, i64)> {
    let mut counts = Vec::new();
    for (table, columns) in schema(volume, backend).await {
        if !NOT_AN_OWNERS.contains(&table.as_str()) {
            let count = rows_of(volume, &table, &columns, owner, uploads).await;
            counts.push((table, count));
        }
    }
    counts
}

/// Give `owner` a row in every table that keeps an owner's rows (tokens
/// and sessions only for a user); the ids of their uploads.
async fn fill(volume: &Volume, owner: Owner, tag: &str) -> Vec<String> {
    let accounts = volume.accounts();
    let dav = volume.webdav();
    let in_an_hour = now_ms() + 3_600_000;
    let file = put_as(volume, owner, "f.txt", tag.as_bytes())
        .await
        .unwrap();
    volume
        .make_folder(owner, &Prefix::parse("made/").unwrap())
        .await
        .unwrap();
    // A bucket that keeps versions, and a file of it in the trash.
    volume
        .set_bucket_versioning(owner, "kept", Versioning::Enabled)
        .await
        .unwrap();
    put_as(volume, owner, "kept/v.txt", tag.as_bytes())
        .await
        .unwrap();
    volume.delete(owner, &path("kept/v.txt")).await.unwrap();
    // Object lock on it (a legal hold set and taken off: a lock row that
    // holds nothing, so the user may go), and a lifecycle rule.
    volume
        .set_bucket_lock(owner, "kept", crate::BucketLock::default(), false)
        .await
        .unwrap();
    put_as(volume, owner, "kept/l.txt", tag.as_bytes())
        .await
        .unwrap();
    volume
        .set_legal_hold(owner, &path("kept/l.txt"), None, false)
        .await
        .unwrap();
    let rule = crate::LifecycleRule {
        id: tag.to_owned(),
        enabled: true,
        prefix: Some(String::new()),
        abort_multipart_days: Some(1),
        ..crate::LifecycleRule::default()
    };
    volume
        .set_bucket_lifecycle(owner, "kept", &crate::Lifecycle { rules: vec![rule] })
        .await
        .unwrap();
    dav.change_properties(owner, "f.txt", &[set("urn:x", "n", tag)])
        .await
        .unwrap();
    let lock = webdav::NewLock {
        token: format!("urn:{tag}"),
        root: "f.txt".into(),
        infinite: false,
        exclusive: true,
        holder: "me".into(),
        timeout_s: 60,
    };
    assert!(matches!(
        dav.lock(owner, lock).await.unwrap(),
        webdav::LockOutcome::Granted(_)
    ));
    accounts
        .add_share(
            &format!("sh-{tag}"),
            owner,
            &path("f.txt"),
            file.created_ms,
            None,
        )
        .await
        .unwrap();
    accounts
        .add_s3_key(&accounts::S3Key {
            access_key: format!("AK-{tag}"),
            owner,
            label: tag.into(),
            sealed: "sealed".into(),
            created_ms: now_ms(),
        })
        .await
        .unwrap();
    if let Some(user) = owner.user_id() {
        accounts
            .add_token(user, &format!("t-{tag}"), &format!("h-{tag}"), tag)
            .await
            .unwrap();
        accounts
            .add_session(user, &format!("s-{tag}"), "csrf", in_an_hour)
            .await
            .unwrap();
    }
    let mut uploads = Vec::new();
    for kind in [
        crate::uploads::UploadKind::Tus,
        crate::uploads::UploadKind::Multipart,
    ] {
        let id = format!("{kind:?}-{tag}");
        let new = crate::uploads::NewUpload {
            kind,
            owner,
            path: path("up.bin"),
            length: None,
            content_type: String::new(),
            create_only: false,
            metadata: String::new(),
            expires_ms: in_an_hour,
        };
        volume.create_upload(&id, &new).await.unwrap().unwrap();
        let mut staged = volume.stage();
        staged.write(b"part").await.unwrap();
        let kept = match kind {
            crate::uploads::UploadKind::Tus | crate::uploads::UploadKind::TusPartial => {
                let kept = append_bytes(volume, owner, &id, 0, b"part", None, in_an_hour)
                    .await
                    .unwrap()
                    .is_some();
                if volume.upload_parts(&id).await.unwrap().is_empty() {
                    // Appended in place (a local store): a part row as one
                    // kept before that was, so the table is filled too.
                    crate::db::sql::query(
                        "INSERT INTO upload_parts (upload_id, offset_at, size, name) \
                         VALUES ($1, 0, 4, 'legacy')",
                    )
                    .bind(&id)
                    .execute(volume.db().pool())
                    .await
                    .unwrap();
                }
                kept
            }
            crate::uploads::UploadKind::Multipart => volume
                .store_multipart_part(owner, &id, 1, staged, "e".into(), String::new(), in_an_hour)
                .await
                .unwrap()
                .is_some(),
        };
        assert!(kept);
        uploads.push(id);
    }
    uploads
}

/// The cascades' list names every table of the schema that can keep an
/// owner's rows: a new one without a line there fails here.
async fn every_table_is_in_the_cascades_or_keeps_no_owners_rows(backend: &Backend) {
    let (_dir, volume) = backend.open().await;
    let schema = schema(&volume, backend).await;
    let listed: Vec<&str> = crate::owners::TABLES.iter().map(|t| t.name).collect();
    let mut distinct = listed.clone();
    distinct.sort_unstable();
    distinct.dedup();
    assert_eq!(
        distinct.len(),
        listed.len(),
        "a table listed twice: {listed:?}"
    );
    for (table, columns) in &schema {
        let in_cascades = listed.contains(&table.as_str());
        let keeps_none = NOT_AN_OWNERS.contains(&table.as_str());
        assert!(
            in_cascades != keeps_none,
            "{table} must be in owners::TABLES or in NOT_AN_OWNERS (and not both)"
        );
        if keeps_none {
            assert!(
                !columns.iter().any(|c| OWNER_COLUMNS.contains(&c.as_str())),
                "{table} names an owner: {columns:?}"
            );
        }
    }
    for table in listed.iter().chain(&NOT_AN_OWNERS) {
        assert!(schema.contains_key(*table), "{table} is not in the schema");
    }
}

/// Removing a user leaves no row of theirs in any table of the cascades,
/// and every other owner's rows where they were.
async fn removing_a_user_leaves_no_row_of_theirs(backend: &Backend) {
    let (_dir, volume) = backend.open().await;
    let erin = add_user(&volume, "erin", None).await.owner();
    let fred = add_user(&volume, "fred", None).await.owner();
    let erins = fill(&volume, erin, "erin").await;
    let freds = fill(&volume, fred, "fred").await;
    let before = owned_rows(&volume, backend, erin, &erins).await;
    assert!(
        before.iter().all(|(_, n)| *n > 0),
        "not every table filled: {before:?}"
    );
    let freds_before = owned_rows(&volume, backend, fred, &freds).await;
    assert!(volume.accounts().remove_user("erin").await.unwrap());
    let after = owned_rows(&volume, backend, erin, &erins).await;
    assert!(after.iter().all(|(_, n)| *n == 0), "left behind: {after:?}");
    assert_eq!(
        owned_rows(&volume, backend, fred, &freds).await,
        freds_before
    );
}

/// Adopting the open tree gives a user every row of it that a table of the
/// cascades adopts, and leaves the rest (its unfinished uploads) its own.
async fn adopting_the_open_tree_moves_every_adoptable_row(backend: &Backend) {
    let (_dir, volume) = backend.open().await;
    let open = fill(&volume, Owner::OPEN, "open").await;
    let gail = add_user(&volume, "gail", None).await;
    let before = owned_rows(&volume, backend, Owner::OPEN, &open).await;
    // Its two current files: f.txt and kept/l.txt.
    assert_eq!(volume.accounts().adopt_open_tree(gail.id).await.unwrap(), 2);
    let after = owned_rows(&volume, backend, Owner::OPEN, &open).await;
    let gails = owned_rows(&volume, backend, gail.owner(), &[]).await;
    for (((table, was), (_, left)), (_, moved)) in before.iter().zip(&after).zip(&gails) {
        let adopts = crate::owners::TABLES
            .iter()
            .any(|t| t.name == *table && t.adopts());
        match table.as_str() {
            // A user's own rows: the open tree has none.
            "tokens" | "sessions" | "users" => assert_eq!((*was, *left), (0, 0), "{table}"),
            _ if adopts => {
                assert!(*was > 0, "{table} not filled");
                assert_eq!((*left, *moved), (0, *was), "{table}");
            }
            _ => assert_eq!(left, was, "{table}: the open tree's stay"),
        }
    }
}

suite!(
    each_owner_has_their_own_tree,
    a_quota_refuses_what_would_exceed_it,
    accounts_keep_tokens_sessions_shares_and_secrets,
    every_table_is_in_the_cascades_or_keeps_no_owners_rows,
    removing_a_user_leaves_no_row_of_theirs,
    adopting_the_open_tree_moves_every_adoptable_row,
);
