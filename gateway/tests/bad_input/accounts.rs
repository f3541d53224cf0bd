//! One user's tree and quota: another user's files are not there, and an
//! upload past the quota is refused.

use crate::common::random_bytes;
use crate::support::{Accounts, Area, Case, bearer, case, chunked, framed, get, request};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn other_trees_and_the_quota_hold() {
    Area {
        name: "accounts",
        both: |_| Vec::new(),
        accounts: account_cases,
    }
    .check()
    .await;
}

/// With users: alice (1 MiB quota, 13336 bytes left) and root's file.
fn account_cases(a: &Accounts) -> Vec<Case> {
    let alice = bearer(&a.alice);
    vec![
        case(
            "alice: GET root's file",
            get("/files/root-only.txt", &alice, ""),
            &[404],
        )
        .error("not_found"),
        case(
            "alice: DELETE root's file",
            request("DELETE", "/files/root-only.txt", &alice, "", None),
            &[404],
        )
        .error("not_found"),
        // ---- Quota: alice has 13336 bytes left (less than --max-body).
        // Declared over it: 507 before the body (none is sent).
        case(
            "quota: declared",
            framed(
                "PUT",
                "/files/over-quota.bin",
                &alice,
                "Content-Length: 30000\r\n",
                b"",
            ),
            &[507],
        )
        .error("quota_exceeded"),
        case(
            "quota: declared POST",
            framed(
                "POST",
                "/files/over-quota.bin",
                &alice,
                "Content-Length: 30000\r\n",
                b"",
            ),
            &[507],
        )
        .error("quota_exceeded"),
        // Undeclared: cut off at the quota.
        case(
            "quota: chunked",
            framed(
                "PUT",
                "/files/over-quota.bin",
                &alice,
                "Transfer-Encoding: chunked\r\n",
                &chunked(&random_bytes(30_000), 4096),
            ),
            &[507],
        )
        .error("quota_exceeded"),
    ]
}
