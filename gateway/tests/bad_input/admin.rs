//! The admin API: settings that are not valid settings, and users who
//! are not admins.

use crate::support::{Accounts, Area, Case, Phase, admin_json, bearer, case, get};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_admin_requests_change_no_setting() {
    Area {
        name: "admin",
        both: cases,
        accounts: account_cases,
    }
    .check()
    .await;
}

/// In both modes: `p.admin` is the credential line (root's token with users).
fn cases(p: &Phase<'_>) -> Vec<Case> {
    let admin = p.admin;
    vec![
        // ---- PUT /admin/estimator: anything but valid settings is 400,
        // and nothing changes.
        case("estimator: invalid JSON", admin_json(admin, b"{"), &[400]).error("bad_request"),
        case("estimator: empty body", admin_json(admin, b""), &[400]).error("bad_request"),
        case(
            "estimator: alpha a string",
            admin_json(admin, br#"{"alpha":"high"}"#),
            &[400],
        )
        .error("bad_request"),
        case(
            "estimator: alpha negative",
            admin_json(admin, br#"{"alpha":-0.5}"#),
            &[400],
        )
        .error("bad_request"),
        case(
            "estimator: threshold negative",
            admin_json(admin, br#"{"threshold":-1}"#),
            &[400],
        )
        .error("bad_request"),
        case(
            "estimator: unknown field",
            admin_json(admin, br#"{"bogus":true}"#),
            &[400],
        )
        .error("bad_request"),
        case(
            "estimator: threshold 1e400",
            admin_json(admin, br#"{"threshold":1e400}"#),
            &[400],
        )
        .error("bad_request"),
        case(
            "estimator: threshold 2^64",
            admin_json(admin, br#"{"threshold":18446744073709551616}"#),
            &[400],
        )
        .error("bad_request"),
        case(
            "estimator: restart_budget 1e308",
            admin_json(admin, br#"{"restart_budget":1e308}"#),
            &[400],
        )
        .error("bad_request"),
        case(
            "estimator: fixed without threshold",
            admin_json(admin, br#"{"mode":"fixed","threshold":0}"#),
            &[400],
        )
        .error("bad_request"),
        case(
            "estimator: NaN",
            admin_json(admin, br#"{"alpha":NaN}"#),
            &[400],
        )
        .error("bad_request"),
        // Deep nesting that fits the 64 KiB limit meets serde_json's
        // recursion limit (128): 400, no stack overflow.
        case(
            "estimator: nested 50000 deep",
            admin_json(
                admin,
                format!("{{\"mode\":{}", "[".repeat(50_000)).as_bytes(),
            ),
            &[400],
        )
        .error("bad_request"),
        // Settings are a few fields: a body past 64 KiB is refused unread.
        case(
            "estimator: 2 MB body",
            admin_json(
                admin,
                format!("{{\"mode\":\"{}\"}}", "m".repeat(2_000_000 - 11)).as_bytes(),
            ),
            &[413],
        )
        .error("body_too_large"),
    ]
}

/// With users: alice is signed in but no admin.
fn account_cases(a: &Accounts) -> Vec<Case> {
    let alice = bearer(&a.alice);
    vec![
        // ---- Signed in, but not allowed.
        case(
            "alice: GET /admin/pool",
            get("/admin/pool", &alice, ""),
            &[403],
        )
        .error("forbidden"),
        case(
            "alice: PUT /admin/estimator",
            admin_json(&alice, br#"{"mode":"monitor"}"#),
            &[403],
        )
        .error("forbidden"),
        // Another user's file is not found, never forbidden (names do not leak).
    ]
}
