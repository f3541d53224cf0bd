//! Starts each real server, uses it, and checks that dropping it leaves no
//! process behind.

use std::fs;
use std::path::Path;
use std::process::Command;
use std::thread::sleep;
use std::time::{Duration, Instant};

use testsupport::{Postgres, Seaweed, process_group_members};

#[test]
fn postgres_creates_a_database_and_answers_queries() {
    let started = Instant::now();
    let pg = Postgres::start().expect("start postgres");
    eprintln!("Postgres::start took {:?}", started.elapsed());
    let pid = pg.pid();
    assert!(alive(pid));

    let url = pg.create_database("app_test").expect("create database");
    assert_eq!(
        url,
        format!("postgres://postgres@127.0.0.1:{}/app_test", pg.port())
    );
    assert_eq!(pg.psql("app_test", "SELECT 1").expect("select"), "1\n");
    let err = pg
        .create_database("app_test")
        .expect_err("duplicate database");
    assert!(err.to_string().contains("already exists"), "{err:#}");
    assert!(pg.create_database("bad-name").is_err());
    let dir = pg.dir().to_owned();

    let started = Instant::now();
    drop(pg);
    eprintln!("Postgres drop took {:?}", started.elapsed());
    assert_gone(pid);
    assert!(!dir.exists(), "temp dir removed");
}

#[test]
fn seaweed_stores_objects_with_conditional_put() {
    let started = Instant::now();
    let weed = Seaweed::start("test-bucket").expect("start weed mini");
    eprintln!("Seaweed::start took {:?}", started.elapsed());
    let pid = weed.pid();
    assert!(alive(pid));
    let env = weed.env();
    assert!(env.contains(&("AWS_ENDPOINT_URL".to_owned(), weed.endpoint())));
    assert!(env.contains(&("AWS_ALLOW_HTTP".to_owned(), "true".to_owned())));

    let body = weed.dir().join("body.txt");
    fs::write(&body, "hello seaweed").expect("write body");
    let url = format!("{}/{}/some/key.txt", weed.endpoint(), weed.bucket());
    assert_eq!(curl(&weed, &["-T", path(&body), &url]).0, "200");
    assert_eq!(
        curl(&weed, &[&url]),
        ("200".to_owned(), "hello seaweed".to_owned())
    );
    let if_none_match = ["-H", "If-None-Match: *", "-T", path(&body)];
    assert_eq!(
        curl(&weed, &[&if_none_match[..], &[&url]].concat()).0,
        "412"
    );
    let fresh = format!("{url}.new");
    assert_eq!(
        curl(&weed, &[&if_none_match[..], &[&fresh]].concat()).0,
        "200"
    );
    let missing = format!("{url}.missing");
    assert_eq!(curl(&weed, &[&missing]).0, "404");

    let started = Instant::now();
    drop(weed);
    eprintln!("Seaweed drop took {:?}", started.elapsed());
    assert_gone(pid);
}

/// Runs a signed `curl` against `weed`; returns (HTTP status, body).
fn curl(weed: &Seaweed, args: &[&str]) -> (String, String) {
    let out = Command::new("curl")
        .args(["-s", "--max-time", "10", "-w", "\n%{http_code}"])
        .arg("--aws-sigv4")
        .arg(format!("aws:amz:{}:s3", weed.region()))
        .arg("--user")
        .arg(format!("{}:{}", weed.access_key(), weed.secret_key()))
        .args(args)
        .output()
        .expect("run curl");
    let text = String::from_utf8_lossy(&out.stdout);
    let (body, status) = text.rsplit_once('\n').expect("status line");
    (status.to_owned(), body.to_owned())
}

fn path(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

/// Whether `pid` exists and is not a zombie.
fn alive(pid: u32) -> bool {
    fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        s.rsplit_once(')')
            .is_some_and(|(_, r)| !r.trim_start().starts_with('Z'))
    })
}

/// Asserts the server was reaped and nothing is left in its process group.
fn assert_gone(pid: u32) {
    // Reaping is synchronous in Drop, but allow the kernel a moment.
    for _ in 0..50 {
        if !Path::new(&format!("/proc/{pid}")).exists() && process_group_members(pid).is_empty() {
            return;
        }
        sleep(Duration::from_millis(20));
    }
    panic!(
        "pid {pid} or its group {:?} still present",
        process_group_members(pid)
    );
}
