//! What WebDAV asks of a volume: trees copied and moved as rows, dead
//! properties (and what they count against the quota), locks.

use std::sync::Arc;

use super::*;

async fn webdav_copies_and_moves_trees_as_rows(backend: &Backend) {
    use webdav::{Depth, Node, Transfer};
    let (_dir, volume) = backend.open().await;
    let open = Owner::OPEN;
    let folder = |p: &str| Prefix::parse(p).unwrap();
    // Multi-byte names: the engines cut paths by characters, not bytes.
    put(&volume, "é€/a.txt", b"first").await.unwrap();
    put(&volume, "é€/sub/b.txt", b"second").await.unwrap();
    volume.make_folder(open, &folder("é€/empty")).await.unwrap();
    let dav = volume.webdav();
    dav.change_properties(open, "é€/a.txt", &[set("urn:t", "p", "on a")])
        .await
        .unwrap();
    dav.change_properties(open, "é€/", &[set("urn:t", "p", "on the folder")])
        .await
        .unwrap();
    assert!(matches!(
        volume.node(open, Some(&path("é€"))).await.unwrap(),
        Node::Folder(_)
    ));
    assert!(matches!(
        volume.node(open, Some(&path("é€/a.txt"))).await.unwrap(),
        Node::File(_)
    ));
    assert_eq!(
        volume.node(open, Some(&path("nothing"))).await.unwrap(),
        Node::Missing
    );

    let blobs_before = volume.blobs.list().await.unwrap().len();
    let copied = volume
        .copy_node(open, &path("é€"), &path("çà"), Depth::Infinity, false)
        .await
        .unwrap();
    assert_eq!(copied, Transfer::Created);
    assert_eq!(
        volume.blobs.list().await.unwrap().len(),
        blobs_before,
        "rows, not bytes"
    );
    let listing = volume.list(open, &folder("çà"), None, 10).await.unwrap();
    assert_eq!(names_of(listing), ["çà/a.txt", "çà/empty/", "çà/sub/"]);
    assert_eq!(read(&volume, "çà/sub/b.txt").await.unwrap().1, b"second");
    assert_eq!(properties_at(&dav, open, "çà/a.txt").await[0].value, "on a");
    assert_eq!(
        properties_at(&dav, open, "çà/").await[0].value,
        "on the folder"
    );
    assert!(matches!(
        volume
            .copy_node(open, &path("é€"), &path("çà"), Depth::Infinity, false)
            .await,
        Err(VolumeError::AlreadyExists(_))
    ));
    // Depth 0: the folder alone.
    volume
        .copy_node(open, &path("é€"), &path("shallow"), Depth::Zero, false)
        .await
        .unwrap();
    let shallow = volume
        .list(open, &folder("shallow"), None, 10)
        .await
        .unwrap();
    assert!(shallow.entries.is_empty());
    let made = dav
        .folders_made(
            open,
            &[
                "shallow/".to_owned(),
                "çà/empty/".to_owned(),
                "çà/sub/".to_owned(),
            ],
        )
        .await
        .unwrap();
    assert!(made.contains_key("shallow/") && made.contains_key("çà/empty/"));
    assert!(
        !made.contains_key("çà/sub/"),
        "a folder that only holds files has no date"
    );
    assert!(matches!(
        volume.node(open, Some(&path("shallow"))).await.unwrap(),
        Node::Folder(_)
    ));

    // The originals go; the copies keep the content alive.
    volume.delete_folder(open, &folder("é€")).await.unwrap();
    assert!(properties_at(&dav, open, "é€/a.txt").await.is_empty());
    volume.collect_garbage().await.unwrap();
    assert_eq!(read(&volume, "çà/a.txt").await.unwrap().1, b"first");

    // A move renames rows and takes properties along.
    let moved = volume
        .move_node(open, &path("çà"), &path("m"), false)
        .await
        .unwrap();
    assert_eq!(moved, Transfer::Created);
    assert_eq!(
        volume.node(open, Some(&path("çà"))).await.unwrap(),
        Node::Missing
    );
    assert_eq!(read(&volume, "m/sub/b.txt").await.unwrap().1, b"second");
    assert_eq!(properties_at(&dav, open, "m/a.txt").await[0].value, "on a");
    // Over a folder, with overwrite: the folder goes, the file takes its name.
    let replaced = volume
        .move_node(open, &path("m/a.txt"), &path("shallow"), true)
        .await
        .unwrap();
    assert_eq!(replaced, Transfer::Replaced);
    assert!(matches!(
        volume.node(open, Some(&path("shallow"))).await.unwrap(),
        Node::File(_)
    ));
    // A file copied over a file releases what the replaced one named.
    put(&volume, "lonely", b"only here").await.unwrap();
    volume
        .copy_node(
            open,
            &path("shallow"),
            &path("lonely"),
            Depth::Infinity,
            true,
        )
        .await
        .unwrap();
    assert!(!exists(&volume, &digest_of(b"only here")).await);
    assert_eq!(read(&volume, "lonely").await.unwrap().1, b"first");

    // Nothing goes into itself, or onto a folder that holds it.
    assert!(matches!(
        volume
            .move_node(open, &path("m"), &path("m/sub/x"), true)
            .await,
        Err(VolumeError::Nested { .. })
    ));
    assert!(matches!(
        volume
            .copy_node(open, &path("m/sub"), &path("m"), Depth::Infinity, true)
            .await,
        Err(VolumeError::Nested { .. })
    ));
    // No path may grow past the limit on the way.
    let long = format!(
        "p/{}/{}/{}/{}",
        "a".repeat(250),
        "b".repeat(250),
        "c".repeat(250),
        "d".repeat(250)
    );
    put(&volume, &long, b"long").await.unwrap();
    assert!(matches!(
        volume
            .move_node(open, &path("p"), &path(&"q".repeat(40)), false)
            .await,
        Err(VolumeError::InvalidPath(PathError::TooLong(_)))
    ));
    assert_eq!(read(&volume, &long).await.unwrap().1, b"long");
    // What a vanished folder left is dropped for a new one.
    dav.change_properties(open, "gone/", &[set("urn:t", "p", "stale")])
        .await
        .unwrap();
    dav.forget(open, "gone/").await.unwrap();
    assert!(properties_at(&dav, open, "gone/").await.is_empty());

    // A copy counts against the quota, all or nothing.
    let alice = add_user(&volume, "alice", Some(crate::ENTRY_OVERHEAD + 10))
        .await
        .owner();
    put_as(&volume, alice, "d/six", b"123456").await.unwrap();
    assert!(matches!(
        volume
            .copy_node(alice, &path("d"), &path("e"), Depth::Infinity, false)
            .await,
        Err(VolumeError::QuotaExceeded { .. })
    ));
    assert_eq!(
        volume.node(alice, Some(&path("e"))).await.unwrap(),
        Node::Missing
    );
}

async fn webdav_locks_conflict_refresh_and_expire(backend: &Backend) {
    use webdav::{LockOutcome, NewLock};
    let (_dir, volume) = backend.open().await;
    let bob = add_user(&volume, "bob", None).await.owner();
    let dav = volume.webdav();
    let ask = |token: &str, root: &str, infinite: bool, exclusive: bool, timeout_s: u64| NewLock {
        token: token.into(),
        root: root.into(),
        infinite,
        exclusive,
        holder: "<href xmlns=\"DAV:\">me</href>".into(),
        timeout_s,
    };
    let granted = |outcome: LockOutcome| matches!(outcome, LockOutcome::Granted(_));
    assert!(granted(
        dav.lock(bob, ask("urn:1", "a/", true, true, 60))
            .await
            .unwrap()
    ));
    assert_eq!(
        dav.lock(bob, ask("urn:2", "a/b/c", false, false, 60))
            .await
            .unwrap(),
        LockOutcome::Conflict,
        "inside an exclusive depth-infinity lock"
    );
    assert_eq!(
        dav.lock(bob, ask("urn:3", "", true, false, 60))
            .await
            .unwrap(),
        LockOutcome::Conflict,
        "a depth-infinity lock above it"
    );
    assert!(granted(
        dav.lock(bob, ask("urn:4", "x", false, false, 60))
            .await
            .unwrap()
    ));
    assert!(granted(
        dav.lock(bob, ask("urn:5", "x", false, false, 60))
            .await
            .unwrap()
    ));
    assert_eq!(
        dav.lock(bob, ask("urn:6", "x", false, true, 60))
            .await
            .unwrap(),
        LockOutcome::Conflict
    );
    // Another tree's locks are its own.
    assert!(granted(
        dav.lock(Owner::OPEN, ask("urn:7", "x", false, true, 60))
            .await
            .unwrap()
    ));
    let held: Vec<String> = dav
        .locks(bob)
        .await
        .unwrap()
        .into_iter()
        .map(|l| l.token)
        .collect();
    assert_eq!(held.len(), 3);
    let refreshed = dav.refresh_lock(bob, "urn:1", 600).await.unwrap().unwrap();
    assert_eq!(refreshed.timeout_s, 600);
    assert_eq!(
        dav.holders(bob).await.unwrap()["urn:1"],
        "<href xmlns=\"DAV:\">me</href>"
    );
    assert!(dav.refresh_lock(bob, "urn:7", 600).await.unwrap().is_none());
    assert!(dav.unlock(bob, "urn:1").await.unwrap());
    assert!(!dav.unlock(bob, "urn:1").await.unwrap());
    // A lock that expired is no lock.
    assert!(granted(
        dav.lock(bob, ask("urn:8", "old", false, true, 0))
            .await
            .unwrap()
    ));
    tokio::time::sleep(Duration::from_millis(5)).await;
    assert!(granted(
        dav.lock(bob, ask("urn:9", "old", false, true, 60))
            .await
            .unwrap()
    ));
    assert_eq!(dav.clear_expired().await.unwrap(), 1);
    // Deleting a file takes its locks and properties; removing the user all.
    put_as(&volume, bob, "gone", b"g").await.unwrap();
    assert!(granted(
        dav.lock(bob, ask("urn:10", "gone", false, true, 60))
            .await
            .unwrap()
    ));
    dav.change_properties(bob, "gone", &[set("", "n", "v")])
        .await
        .unwrap();
    volume.delete(bob, &path("gone")).await.unwrap();
    assert!(
        dav.locks(bob)
            .await
            .unwrap()
            .iter()
            .all(|l| l.root != "gone")
    );
    assert!(properties_at(&dav, bob, "gone").await.is_empty());
    assert!(volume.accounts().remove_user("bob").await.unwrap());
    assert!(dav.locks(bob).await.unwrap().is_empty());
}

/// On PostgreSQL, sqlx prepares each SQL text once per connection, typed by
/// its first use's arguments, and reuses it. A file move bound three
/// arguments to a two-placeholder `DELETE FROM dav_locks …` that a delete
/// binds two: whichever came second on a connection failed (`bind message
/// supplies 3 parameters, but prepared statement "sqlx_s_22" requires 2`).
async fn moves_deletes_and_forgets_interleave_on_one_connection(backend: &Backend) {
    let (_dir, volume) = backend.open().await;
    let open = Owner::OPEN;
    for _ in 0..4 {
        put(&volume, "a", b"moved").await.unwrap();
        put(&volume, "gone", b"deleted").await.unwrap();
        volume.delete(open, &path("gone")).await.unwrap();
        volume
            .move_node(open, &path("a"), &path("b"), true)
            .await
            .unwrap();
        volume.webdav().forget(open, "a").await.unwrap();
        volume.delete(open, &path("b")).await.unwrap();
    }
}

/// Dead properties count against their owner's quota as files do (the
/// bytes of namespace, name and value): a change that would pass it is
/// refused whole, an upload and a copy weigh them, and removing them, or
/// the file they are on, frees their bytes.
async fn properties_count_against_the_quota(backend: &Backend) {
    let (_dir, volume) = backend.open().await;
    let dav = volume.webdav();
    // Each file also costs an entry's overhead: room for three of them.
    const E: u64 = crate::ENTRY_OVERHEAD;
    let erin = add_user(&volume, "erin", Some(1000 + 3 * E)).await.owner();
    let usage = || async { volume.accounts().usage(erin).await.unwrap() };
    put_as(&volume, erin, "a", &[1; 600]).await.unwrap();
    put_as(&volume, erin, "empty", b"").await.unwrap();
    // "urn:x" + "p" + 300: 306 bytes.
    let p = set("urn:x", "p", &"v".repeat(300));
    dav.change_properties(erin, "empty", &[p]).await.unwrap();
    assert_eq!(usage().await, 906 + 2 * E);
    // 11 bytes, then 206 + E past the quota: neither is kept.
    let refused = dav
        .change_properties(
            erin,
            "empty",
            &[
                set("urn:x", "q", "small"),
                set("urn:x", "r", &"v".repeat(200 + E as usize)),
            ],
        )
        .await;
    assert!(
        matches!(
            refused,
            Err(VolumeError::QuotaExceeded {
                quota,
                used,
                size,
            }) if quota == 1000 + 3 * E && used == 906 + 2 * E && size == 217 + E
        ),
        "{refused:?}"
    );
    assert_eq!(properties_at(&dav, erin, "empty").await.len(), 1);
    assert_eq!(usage().await, 906 + 2 * E);
    // An upload weighs the properties too.
    let refused = put_as(&volume, erin, "b", &[2; 100]).await;
    assert!(
        matches!(
            refused,
            Err(VolumeError::QuotaExceeded {
                quota: _,
                used,
                size,
            }) if used == 906 + 2 * E && size == 100 + E
        ),
        "{refused:?}"
    );
    // A smaller value frees bytes: 600 + 10.
    let tiny = set("urn:x", "p", "tiny");
    dav.change_properties(erin, "empty", &[tiny]).await.unwrap();
    assert_eq!(usage().await, 610 + 2 * E);
    put_as(&volume, erin, "b", &[2; 100]).await.unwrap();
    // Deleting a file takes its properties along: 600 + 100.
    volume.delete(erin, &path("empty")).await.unwrap();
    assert_eq!(usage().await, 700 + 2 * E);
    // A copy counts the properties it copies: 100 + 156 more is too much.
    let on_b = set("urn:x", "b", &"v".repeat(150));
    dav.change_properties(erin, "b", &[on_b]).await.unwrap();
    assert_eq!(usage().await, 856 + 2 * E);
    let refused = volume
        .copy_node(erin, &path("b"), &path("c"), webdav::Depth::Infinity, false)
        .await;
    assert!(
        matches!(
            refused,
            Err(VolumeError::QuotaExceeded {
                quota: _,
                used,
                size,
            }) if used == 856 + 2 * E && size == 256 + E
        ),
        "{refused:?}"
    );
    let remove = webdav::PropertyChange::Remove {
        namespace: "urn:x".into(),
        name: "b".into(),
    };
    dav.change_properties(erin, "b", &[remove]).await.unwrap();
    assert_eq!(usage().await, 700 + 2 * E);
    volume
        .copy_node(erin, &path("b"), &path("c"), webdav::Depth::Infinity, false)
        .await
        .unwrap();
    assert_eq!(usage().await, 800 + 3 * E);
    // The open tree has no quota.
    let big = set("urn:x", "big", &"v".repeat(4096));
    dav.change_properties(Owner::OPEN, "anything", &[big])
        .await
        .unwrap();
}

/// Property changes racing on one owner are weighed one at a time (each
/// takes the owner's user row first, as an upload does): together they
/// never take the owner past the quota.
async fn concurrent_property_changes_never_pass_the_quota(backend: &Backend) {
    let (_dir, volume) = backend.open().await;
    let fay = add_user(&volume, "fay", Some(1000)).await.owner();
    let volume = Arc::new(volume);
    // 206 bytes each: four fit, the fifth would not.
    let changes: Vec<_> = (0..10)
        .map(|n| {
            let volume = volume.clone();
            tokio::spawn(async move {
                let property = set("urn:x", "p", &"v".repeat(200));
                let key = format!("file{n}");
                volume
                    .webdav()
                    .change_properties(fay, &key, &[property])
                    .await
            })
        })
        .collect();
    let mut granted = 0;
    for change in changes {
        match change.await.unwrap() {
            Ok(()) => granted += 1,
            Err(VolumeError::QuotaExceeded { .. }) => {}
            Err(other) => panic!("{other}"),
        }
    }
    assert_eq!(granted, 4);
    assert_eq!(volume.accounts().usage(fay).await.unwrap(), 4 * 206);
}

/// Requests cut off at any point (a client hanging up mid-`MOVE`) leave
/// every pooled connection usable: each cancelled operation's transaction
/// is all there or not at all, and the next operations, which reuse those
/// connections, succeed.
async fn cancelled_operations_leave_every_connection_usable(backend: &Backend) {
    use webdav::Depth;
    let (_dir, volume) = backend.open().await;
    let volume = Arc::new(volume);
    let open = Owner::OPEN;
    let gone_or_done = |outcome: Result<(), VolumeError>| match outcome {
        Ok(()) | Err(VolumeError::NotFound(_)) => {}
        Err(other) => panic!("{other}"),
    };
    for round in 0..40_u64 {
        put(&volume, "src/a", b"a").await.unwrap();
        let property = set("urn:x", "p", "v");
        let dav = volume.webdav();
        dav.change_properties(open, "src/a", &[property])
            .await
            .unwrap();
        // Cut off after 0 to 1.9 ms: before, during or after each step.
        let cut = Duration::from_micros(100 * (round % 20));
        let cancelled = volume.clone();
        let _ = tokio::time::timeout(cut, async move {
            cancelled
                .move_node(open, &path("src"), &path("dst"), true)
                .await?;
            let (from, to) = (path("dst"), path("src"));
            cancelled
                .copy_node(open, &from, &to, Depth::Infinity, true)
                .await?;
            cancelled.webdav().forget(open, "dst/").await?;
            let dst = Prefix::parse("dst/").unwrap();
            cancelled.delete_folder(open, &dst).await
        })
        .await;
        // Whatever the cut left, the same steps run whole now: at once, not
        // stuck behind a transaction a cancelled step left open on a
        // pooled connection (the bound only turns such a hang into a
        // failure).
        let again = async {
            let moved = volume
                .move_node(open, &path("src"), &path("dst"), true)
                .await;
            gone_or_done(moved.map(drop));
            assert!(matches!(
                volume.node(open, Some(&path("dst/a"))).await.unwrap(),
                webdav::Node::File(_)
            ));
            assert_eq!(properties_at(&dav, open, "dst/a").await.len(), 1);
            volume.webdav().forget(open, "dst/").await.unwrap();
            let dst = Prefix::parse("dst/").unwrap();
            gone_or_done(volume.delete_folder(open, &dst).await.map(drop));
            let src = Prefix::parse("src/").unwrap();
            gone_or_done(volume.delete_folder(open, &src).await.map(drop));
            assert!(
                volume
                    .list(open, &Prefix::root(), None, 10)
                    .await
                    .unwrap()
                    .entries
                    .is_empty()
            );
        };
        tokio::time::timeout(Duration::from_secs(60), again)
            .await
            .expect("no cancelled transaction is left holding locks");
    }
}

/// Two moves of one folder over one destination at once (two clients, or
/// two gateways): one moves it, the other finds it gone. Neither may
/// replace the destination the first just made with nothing (on
/// PostgreSQL the second used to find the source, wait for its rows, find
/// them moved, clear the destination and move nothing).
async fn racing_moves_of_one_tree_lose_nothing(backend: &Backend) {
    let (_dir, volume) = backend.open().await;
    let volume = Arc::new(volume);
    let open = Owner::OPEN;
    for _ in 0..10 {
        put(&volume, "src/a", b"a").await.unwrap();
        put(&volume, "dst/old", b"old").await.unwrap();
        let moves: Vec<_> = (0..2)
            .map(|_| {
                let volume = volume.clone();
                tokio::spawn(async move {
                    volume
                        .move_node(open, &path("src"), &path("dst"), true)
                        .await
                })
            })
            .collect();
        let mut moved = 0;
        for outcome in moves {
            match outcome.await.unwrap() {
                Ok(_) => moved += 1,
                Err(VolumeError::NotFound(_)) => {}
                Err(other) => panic!("{other}"),
            }
        }
        assert_eq!(moved, 1);
        assert_eq!(read(&volume, "dst/a").await.unwrap().1, b"a");
        let dst = Prefix::parse("dst/").unwrap();
        volume.delete_folder(open, &dst).await.unwrap();
    }
}

/// A write transaction whose caller is cancelled while it begins (a client
/// hanging up at that moment) leaves no transaction open on the
/// connection: the next statements on it commit as they run, and another
/// connection sees them at once.
async fn a_cancelled_begin_leaves_no_transaction_open(backend: &Backend) {
    let (_dir, volume) = backend.open().await;
    let open = Owner::OPEN;
    for round in 0..400_u64 {
        let cut = Duration::from_micros(10 * (round % 50));
        let _ = tokio::time::timeout(cut, volume.db().begin_write()).await;
        let folder = Prefix::parse(&format!("f{round}/")).unwrap();
        assert!(volume.make_folder(open, &folder).await.unwrap());
        assert!(
            volume.folder_exists(open, &folder).await.unwrap(),
            "round {round}: a folder made on a pooled connection is not seen"
        );
    }
}

suite!(
    webdav_copies_and_moves_trees_as_rows,
    webdav_locks_conflict_refresh_and_expire,
    moves_deletes_and_forgets_interleave_on_one_connection,
    properties_count_against_the_quota,
    concurrent_property_changes_never_pass_the_quota,
    cancelled_operations_leave_every_connection_usable,
    racing_moves_of_one_tree_lose_nothing,
    a_cancelled_begin_leaves_no_transaction_open,
);
