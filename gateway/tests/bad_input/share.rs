//! Share links: making one with a bad expiry, and tokens that are
//! garbage, tampered with, or used for what they do not allow.

use crate::support::{Accounts, Area, Case, Phase, TEXT_SIZE, bearer, case, get, put, request};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_share_links_are_refused_and_write_nothing() {
    Area {
        name: "share",
        both: cases,
        accounts: account_cases,
    }
    .check()
    .await;
}

/// In both modes: `p.user` is the credential line.
fn cases(p: &Phase<'_>) -> Vec<Case> {
    let u = p.user;
    vec![
        // ---- Making a link: the expiry must be a number of seconds that fits.
        case(
            "POST share expires=0",
            request(
                "POST",
                "/files/keep/a.txt?share&expires=0",
                u,
                "",
                Some(&b""[..]),
            ),
            &[400],
        )
        .error("bad_request"),
        case(
            "POST share expires overflow",
            request(
                "POST",
                "/files/keep/a.txt?share&expires=99999999999999999999",
                u,
                "",
                Some(&b""[..]),
            ),
            &[400],
        )
        .error("bad_request"),
    ]
}

/// With users: `a.share` is alice's live link to her `keep/a.txt`.
fn account_cases(a: &Accounts) -> Vec<Case> {
    let alice = bearer(&a.alice);
    let root = bearer(&a.root);
    let share = &a.share;
    let (id, rest) = share.split_once('.').unwrap();
    let (expires, signature) = rest.split_once('.').unwrap();
    let mut flipped_id = id.to_owned();
    let last = flipped_id.pop().unwrap();
    flipped_id.push(if last == 'A' { 'B' } else { 'A' });
    vec![
        // ---- Share links: a token whose signature does not verify is
        // 403 bad_share, whatever was changed.
        case("share: garbage", get("/share/garbage", "", ""), &[403]).error("bad_share"),
        case(
            "share: tampered expiry",
            get(&format!("/share/{id}.1{expires}.{signature}"), "", ""),
            &[403],
        )
        .error("bad_share"),
        case(
            "share: tampered id",
            get(
                &format!("/share/{flipped_id}.{expires}.{signature}"),
                "",
                "",
            ),
            &[403],
        )
        .error("bad_share"),
        case(
            "share: signature cut short",
            get(&format!("/share/{}", &share[..share.len() - 4]), "", ""),
            &[403],
        )
        .error("bad_share"),
        case(
            "share: extra part",
            get(&format!("/share/{share}.x"), "", ""),
            &[403],
        )
        .error("bad_share"),
        case(
            "share: 5000-char token",
            get(&format!("/share/{}", "a.".repeat(2500)), "", ""),
            &[403],
        )
        .error("bad_share"),
        // Not a share token at all: no such resource.
        case("share: empty token", get("/share/", "", ""), &[404]),
        // Not UTF-8 once decoded: axum's 400, or refused as tampered.
        case("share: %ff", get("/share/%ff", "", ""), &[400, 403]),
        case(
            "share: traversal after the token",
            get(&format!("/share/{share}/../../files/keep/a.txt"), "", ""),
            &[404, 400],
        ),
        case(
            "share: Range bytes=999999-",
            get(&format!("/share/{share}"), "", "Range: bytes=999999-\r\n"),
            &[416],
        )
        .error("range_not_satisfiable")
        .header("content-range", format!("bytes */{TEXT_SIZE}")),
        case(
            "share: PUT",
            put(&format!("/share/{share}"), "", "", b"x"),
            &[405],
        ),
        case(
            "share: DELETE without credentials",
            request("DELETE", &format!("/share/{share}"), "", "", None),
            &[401],
        )
        .error("unauthorized"),
        // Only the owner may revoke; to anyone else the link is not found.
        case(
            "share: DELETE by another user",
            request("DELETE", &format!("/share/{share}"), &root, "", None),
            &[404],
        )
        .error("not_found"),
        case(
            "share: DELETE garbage",
            request("DELETE", "/share/garbage", &alice, "", None),
            &[403],
        )
        .error("bad_share"),
    ]
}
