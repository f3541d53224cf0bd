//! kill -9 during a small-write storm, on both backends (SQLite and a local
//! directory; PostgreSQL with blobs in SeaweedFS, real servers started here
//! on loopback ports and stopped by PID).
//!
//! 8 clients PUT, overwrite, PUT again content already stored (under
//! another path, or another client's) and DELETE, each on paths of its own,
//! with bodies of every size class from 0 B to 3 MiB, for 3 s; then the
//! gateway process is killed with SIGKILL while requests are in flight and
//! restarted on the same data. Every path reads either what was last
//! acknowledged or what the request in flight at the kill would have made
//! it, byte for byte; the store takes writes on after the restart; and once
//! the gateway is down for good, one collection past a zero grace leaves
//! nothing for the next one: no orphan blob, no row naming a missing blob.
//!
//! Black box: HTTP and the report of `Volume::open` only, never the layout
//! of the data directory. Needs PostgreSQL and SeaweedFS:
//! `scripts/install-test-deps.sh` installs them.

#![allow(clippy::unwrap_used)]

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::backends::{Backend, BackendKind, GatewayProcess, both_backends, within};
use common::sha256_hex;
use gateway::config::Config;
use rand::rngs::SmallRng;
use rand::{Rng, RngCore, SeedableRng};
use reqwest::StatusCode;
use volume::Volume;

const KIB: usize = 1 << 10;
const MIB: usize = 1 << 20;
/// Every size class a body falls in: empty, one byte, around a page,
/// around a 64 KiB group, a few groups, one and three MiB.
const SIZES: [usize; 11] = [
    0,
    1,
    4095,
    4096,
    4097,
    65535,
    65536,
    65537,
    300 * KIB,
    MIB,
    3 * MIB,
];
/// Random sizes stay below this.
const MAX_SIZE: usize = 3 * MIB;
const CLIENTS: usize = 8;
/// Each client's own paths: no two clients write the same path, so what a
/// path may hold is one client's to say.
const PATHS_PER_CLIENT: usize = 6;
/// How long the clients storm before the kill.
const STORM_FOR: Duration = Duration::from_secs(3);
/// The kill waits (this long at most) until this many requests are in
/// flight, so that it cuts some.
const IN_FLIGHT_AT_KILL: usize = CLIENTS / 2;
const IN_FLIGHT_WAIT: Duration = Duration::from_secs(2);
/// Any one request (a 3 MiB PUT included).
const REQUEST_LIMIT: Duration = Duration::from_secs(20);
/// How long a case may take once its backend's servers are up.
const CASE_LIMIT: Duration = Duration::from_secs(100);
/// The storm's randomness, printed, so a failure can be run again
/// (`SMALL_WRITE_CRASH_SEED` sets another).
const SEED: u64 = 0x5a11_3173;

fn seed() -> u64 {
    std::env::var("SMALL_WRITE_CRASH_SEED")
        .ok()
        .and_then(|seed| seed.parse().ok())
        .unwrap_or(SEED)
}

/// What a path holds: nothing, or content known by its length and SHA-256.
#[derive(Clone, PartialEq, Eq)]
enum State {
    Absent,
    Present { len: usize, sha256: String },
}

impl State {
    fn of(body: &[u8]) -> Self {
        Self::Present {
            len: body.len(),
            sha256: sha256_hex(body),
        }
    }
}

/// Length and a digest prefix: enough to tell bodies apart, never a body.
impl fmt::Debug for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Absent => f.write_str("absent"),
            Self::Present { len, sha256 } => write!(f, "{len} B, sha256 {}…", &sha256[..16]),
        }
    }
}

/// What a path may hold after the kill.
#[derive(Debug)]
struct Expected {
    /// Its state after the last request answered (absent before any).
    acked: State,
    /// What the request the kill cut off would have made it, if one was
    /// sent on it and never answered.
    in_flight: Option<State>,
}

enum Op {
    Put(Bytes),
    Delete,
}

impl Op {
    /// What the path holds once it is done.
    fn target(&self) -> State {
        match self {
            Self::Put(body) => State::of(body),
            Self::Delete => State::Absent,
        }
    }
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Put(body) => write!(f, "PUT of {} B", body.len()),
            Self::Delete => f.write_str("DELETE"),
        }
    }
}

/// What the storm's clients share.
struct Storm {
    client: reqwest::Client,
    addr: SocketAddr,
    /// Set just before the kill: a transport error before it is a failure.
    killing: AtomicBool,
    /// Requests sent and not answered yet.
    in_flight: AtomicUsize,
    /// Bodies any client may PUT, so that the same content is uploaded
    /// through several paths at once (and deleted under one while uploaded
    /// under another).
    shared: Vec<Bytes>,
}

/// What one client did.
#[derive(Default)]
struct Done {
    expected: BTreeMap<String, Expected>,
    puts: usize,
    deletes: usize,
    /// Sizes of the acknowledged PUTs among [`SIZES`].
    classes: BTreeSet<usize>,
    /// The request the kill cut off: path and what it was.
    cut: Option<(String, String)>,
}

fn url(addr: SocketAddr, path: &str) -> String {
    format!("http://{addr}/files/{path}")
}

/// `len` bytes from `rng`.
fn body(rng: &mut SmallRng, len: usize) -> Bytes {
    let mut bytes = vec![0; len];
    rng.fill_bytes(&mut bytes);
    Bytes::from(bytes)
}

/// A random size below [`MAX_SIZE`], most of them small: a bound that is a
/// random power of two, then a size below it.
fn random_size(rng: &mut SmallRng) -> usize {
    let bound = (1usize << rng.random_range(1..=22u32)).min(MAX_SIZE);
    rng.random_range(0..bound)
}

/// One client's storm on its own paths, until a request fails because the
/// gateway was killed.
async fn storm_client(storm: Arc<Storm>, id: usize, seed: u64) -> Done {
    let mut rng = SmallRng::seed_from_u64(seed.wrapping_add(id as u64 + 1));
    let paths: Vec<String> = (0..PATHS_PER_CLIENT)
        .map(|p| format!("storm/c{id}/p{p}.bin"))
        .collect();
    let mut done = Done {
        expected: paths
            .iter()
            .map(|path| {
                let expected = Expected {
                    acked: State::Absent,
                    in_flight: None,
                };
                (path.clone(), expected)
            })
            .collect(),
        ..Done::default()
    };
    // This client's last few bodies, to store again under another path.
    let mut mine: Vec<Bytes> = Vec::new();
    let mut fresh = 0usize;
    loop {
        let path = &paths[rng.random_range(0..PATHS_PER_CLIENT)];
        let roll = rng.random_range(0..100);
        let op = if roll < 30 {
            Op::Delete
        } else if roll < 45 {
            Op::Put(storm.shared[rng.random_range(0..storm.shared.len())].clone())
        } else if roll < 60 && !mine.is_empty() {
            Op::Put(mine[rng.random_range(0..mine.len())].clone())
        } else {
            // Every other new body walks the size classes (from a place of
            // its own per client, so that together they cover them all
            // early), the others are of a random size.
            let size = if fresh.is_multiple_of(2) {
                SIZES[(fresh / 2 + id) % SIZES.len()]
            } else {
                random_size(&mut rng)
            };
            fresh += 1;
            let new = body(&mut rng, size);
            if mine.len() == 4 {
                mine.remove(0);
            }
            mine.push(new.clone());
            Op::Put(new)
        };
        let target = op.target();
        let request = match &op {
            Op::Put(body) => storm.client.put(url(storm.addr, path)).body(body.clone()),
            Op::Delete => storm.client.delete(url(storm.addr, path)),
        };
        storm.in_flight.fetch_add(1, Ordering::SeqCst);
        let answer = request.send().await;
        storm.in_flight.fetch_sub(1, Ordering::SeqCst);
        let expected = done.expected.get_mut(path).unwrap();
        match answer {
            Ok(answer) => {
                let status = answer.status();
                // The status is the gateway's word: read the rest (a JSON
                // view), which the kill may cut, only so the connection is
                // reused.
                let _ = answer.bytes().await;
                match (&op, status) {
                    (Op::Put(body), status) if status.is_success() => {
                        done.puts += 1;
                        if SIZES.contains(&body.len()) {
                            done.classes.insert(body.len());
                        }
                    }
                    (Op::Delete, StatusCode::NO_CONTENT | StatusCode::NOT_FOUND) => {
                        done.deletes += 1;
                    }
                    (op, status) => panic!("{op} {path}: {status}"),
                }
                expected.acked = target;
            }
            Err(error) => {
                assert!(
                    storm.killing.load(Ordering::SeqCst),
                    "{op} {path} failed while the gateway was up: {error}"
                );
                // Refused at connect: never sent, nothing in flight. Else
                // the gateway may have done it or not.
                if !error.is_connect() {
                    expected.in_flight = Some(target);
                    done.cut = Some((path.clone(), op.to_string()));
                }
                return done;
            }
        }
    }
}

/// What `path` holds now; any answer but 200 and 404 fails.
async fn read(client: &reqwest::Client, addr: SocketAddr, path: &str) -> State {
    let answer = client.get(url(addr, path)).send().await.unwrap();
    match answer.status() {
        StatusCode::OK => State::of(&answer.bytes().await.unwrap()),
        StatusCode::NOT_FOUND => State::Absent,
        other => panic!(
            "GET {path}: {other}: {}",
            answer.text().await.unwrap_or_default()
        ),
    }
}

async fn put(client: &reqwest::Client, addr: SocketAddr, path: &str, body: &Bytes) -> State {
    let answer = client
        .put(url(addr, path))
        .body(body.clone())
        .send()
        .await
        .unwrap();
    assert!(
        answer.status().is_success(),
        "PUT of {} B to {path} after the restart: {}",
        body.len(),
        answer.status()
    );
    State::of(body)
}

async fn delete(client: &reqwest::Client, addr: SocketAddr, path: &str) -> State {
    let status = client
        .delete(url(addr, path))
        .send()
        .await
        .unwrap()
        .status();
    assert!(
        matches!(status, StatusCode::NO_CONTENT | StatusCode::NOT_FOUND),
        "DELETE {path} after the restart: {status}"
    );
    State::Absent
}

both_backends!(a_gateway_killed_mid_storm_keeps_every_acknowledged_write);
/// See the file's doc.
async fn a_gateway_killed_mid_storm_keeps_every_acknowledged_write(kind: BackendKind) {
    let backend = Backend::start(kind, "small-write-crash").await;
    within(CASE_LIMIT, async {
        let scratch = tempfile::tempdir().unwrap();
        let data_dir = scratch.path().join("data");
        // No versions kept: a replace or a delete is a blob's removal, which
        // the kill may cut off too.
        let mut gateway = GatewayProcess::new(&data_dir, &scratch.path().join("gateway.log"))
            .arg("--versions=false")
            .started(&backend)
            .await;
        let client = reqwest::Client::builder()
            .no_proxy()
            .timeout(REQUEST_LIMIT)
            .build()
            .unwrap();
        let seed = seed();
        eprintln!("{kind:?}: seed {seed}");

        // 1. The storm, and the kill in its midst.
        let mut rng = SmallRng::seed_from_u64(seed);
        let shared = [1, 4096, 65535, 65537, 300 * KIB, MIB]
            .into_iter()
            .map(|size| body(&mut rng, size))
            .collect();
        let storm = Arc::new(Storm {
            client: client.clone(),
            addr: gateway.addr,
            killing: AtomicBool::new(false),
            in_flight: AtomicUsize::new(0),
            shared,
        });
        let clients: Vec<_> = (0..CLIENTS)
            .map(|id| tokio::spawn(storm_client(storm.clone(), id, seed)))
            .collect();
        tokio::time::sleep(STORM_FOR).await;
        let waited = Instant::now();
        while storm.in_flight.load(Ordering::SeqCst) < IN_FLIGHT_AT_KILL
            && waited.elapsed() < IN_FLIGHT_WAIT
        {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        storm.killing.store(true, Ordering::SeqCst);
        let in_flight_at_kill = storm.in_flight.load(Ordering::SeqCst);
        gateway.kill().await;

        let mut expected = BTreeMap::new();
        let (mut puts, mut deletes) = (0, 0);
        let mut classes = BTreeSet::new();
        let mut cut = Vec::new();
        for client in clients {
            let done = tokio::time::timeout(REQUEST_LIMIT, client)
                .await
                .expect("a client still hangs after the kill")
                .unwrap();
            expected.extend(done.expected);
            puts += done.puts;
            deletes += done.deletes;
            classes.extend(done.classes);
            cut.extend(done.cut);
        }
        eprintln!(
            "{kind:?}: acknowledged before the kill: {puts} PUT, {deletes} DELETE; \
             {in_flight_at_kill} requests in flight at the kill, cut off: {cut:?}"
        );
        assert!(
            !cut.is_empty(),
            "the kill cut no request off; the test's timing is off"
        );
        let missing: Vec<_> = SIZES.iter().filter(|s| !classes.contains(s)).collect();
        assert!(
            missing.is_empty(),
            "no PUT of these sizes was acknowledged before the kill: {missing:?}"
        );

        // 2. Restarted on the same data: every path reads what was
        // acknowledged, or what the request cut off would have made it.
        gateway.restart(&backend).await;
        let mut known = BTreeMap::new();
        let mut wrong = Vec::new();
        let mut took_in_flight = 0;
        for (path, expected) in &expected {
            let now = read(&client, gateway.addr, path).await;
            if now != expected.acked {
                if expected.in_flight.as_ref() == Some(&now) {
                    took_in_flight += 1;
                } else {
                    wrong.push(format!("{path}: reads {now:?}, expected {expected:?}"));
                }
            }
            known.insert(path.clone(), now);
        }
        assert!(
            wrong.is_empty(),
            "after the restart:\n{}\nthe gateway's log:\n{}",
            wrong.join("\n"),
            gateway.log_text()
        );
        eprintln!(
            "{kind:?}: after the restart, {} paths read as acknowledged ({} present), {took_in_flight} as \
             the request cut off left them",
            expected.len() - took_in_flight,
            known.values().filter(|s| **s != State::Absent).count()
        );

        // 3. The store works on: a body of every size class, one stored
        // again under another path, deletes; all read back exactly.
        let mut rng = SmallRng::seed_from_u64(seed ^ 0xa5a5);
        let mut again = None;
        for (i, &size) in SIZES.iter().enumerate() {
            let path = format!("storm/c{}/p{}.bin", i % CLIENTS, i / CLIENTS);
            let new = body(&mut rng, size);
            known.insert(path.clone(), put(&client, gateway.addr, &path, &new).await);
            if size == MIB {
                again = Some(new);
            }
        }
        let again = again.unwrap();
        for c in 0..CLIENTS {
            let path = format!("storm/c{c}/p4.bin");
            known.insert(path.clone(), delete(&client, gateway.addr, &path).await);
        }
        let path = format!("storm/c0/p{}.bin", PATHS_PER_CLIENT - 1);
        known.insert(
            path.clone(),
            put(&client, gateway.addr, &path, &again).await,
        );
        for (path, state) in &known {
            assert_eq!(
                &read(&client, gateway.addr, path).await,
                state,
                "{path} after the writes that followed the restart"
            );
        }

        // 4. Down for good: one collection past a zero grace takes all the
        // crash left, and the next finds nothing more.
        gateway.kill().await;
        gateway.assert_no_panic();
        let mut config = Config::for_data_dir(&data_dir);
        backend.configure(&mut config);
        config.versions = false;
        config.orphan_grace = Duration::ZERO;
        config.removal_lease = Duration::ZERO;
        let config = config.volume_config();
        let (volume, first) = Volume::open(&config).await.unwrap();
        volume.close().await;
        // Dropped before the next open: the data directory's id is held by
        // one volume at a time, and only its holder finishes its removals.
        drop(volume);
        eprintln!("{kind:?}: the first collection after the gateway stopped: {first:?}");
        assert_eq!(
            first.files_missing_blobs, 0,
            "rows name blobs the store lacks"
        );
        let (volume, second) = Volume::open(&config).await.unwrap();
        volume.close().await;
        eprintln!("{kind:?}: the second: {second:?}");
        assert_eq!(
            second.orphan_blobs_removed, 0,
            "orphans left after one collection past the grace"
        );
        assert_eq!(
            second.files_missing_blobs, 0,
            "rows name blobs the store lacks"
        );
    })
    .await;
}
