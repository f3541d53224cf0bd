//! The files API's request parameters and preconditions: listing
//! parameters, Range (RFC 9110 14) and If-None-Match (RFC 9110 13.1.2).

use crate::support::{Area, Case, Phase, TEXT_SIZE, case, get, put};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_listings_ranges_and_conditionals_write_nothing() {
    Area {
        name: "files",
        both: cases,
        accounts: |_| Vec::new(),
    }
    .check()
    .await;
}

/// In both modes: `p.user` is the credential line; `p.text_sha` is the
/// digest of `keep/a.txt` (1000 bytes) in the tree it reaches.
fn cases(p: &Phase<'_>) -> Vec<Case> {
    let u = p.user;
    let text_sha = p.text_sha;
    vec![
        // ---- Listing parameters.
        case(
            "GET limit=abc",
            get("/files/keep/?limit=abc", u, ""),
            &[400],
        )
        .error("bad_request"),
        case(
            "GET limit=2^40",
            get("/files/keep/?limit=1099511627776", u, ""),
            &[400],
        )
        .error("bad_request"),
        // ---- Range (RFC 9110 14): a malformed or unsupported Range is
        // ignored (200, the whole file); one that cannot be met is 416.
        case(
            "Range bytes=999999-",
            get("/files/keep/a.txt", u, "Range: bytes=999999-\r\n"),
            &[416],
        )
        .error("range_not_satisfiable")
        .header("content-range", format!("bytes */{TEXT_SIZE}")),
        case(
            "Range bytes=18446744073709551615-",
            get(
                "/files/keep/a.txt",
                u,
                "Range: bytes=18446744073709551615-\r\n",
            ),
            &[416],
        )
        .error("range_not_satisfiable"),
        // A zero-length suffix selects nothing: unsatisfiable (14.1.1).
        case(
            "Range bytes=-0",
            get("/files/keep/a.txt", u, "Range: bytes=-0\r\n"),
            &[416],
        )
        .error("range_not_satisfiable"),
        case(
            "Range bytes=abc",
            get("/files/keep/a.txt", u, "Range: bytes=abc\r\n"),
            &[200],
        ),
        case(
            "Range bytes=5-1",
            get("/files/keep/a.txt", u, "Range: bytes=5-1\r\n"),
            &[200],
        ),
        case(
            "Range items=0-1",
            get("/files/keep/a.txt", u, "Range: items=0-1\r\n"),
            &[200],
        ),
        // Several ranges may be served (206 multipart) or ignored (200).
        case(
            "Range bytes=0-1,5-6",
            get("/files/keep/a.txt", u, "Range: bytes=0-1,5-6\r\n"),
            &[200, 206],
        ),
        // A last-pos past the end is valid and means "to the end"; one
        // that does not fit in 64 bits may also be ignored as malformed.
        case(
            "Range bytes=0-<overflow>",
            get(
                "/files/keep/a.txt",
                u,
                "Range: bytes=0-99999999999999999999999\r\n",
            ),
            &[206, 200],
        ),
        // A suffix longer than the file means the whole file (14.1.2).
        case(
            "Range bytes=-u64::MAX",
            get(
                "/files/keep/a.txt",
                u,
                "Range: bytes=-18446744073709551615\r\n",
            ),
            &[206, 200],
        ),
        // Thousands of overlapping ranges: ignore them (200), or refuse
        // (416, RFC 9110 14.2); never amplify.
        case(
            "Range with 2000 ranges",
            get(
                "/files/keep/a.txt",
                u,
                &format!("Range: bytes={}\r\n", vec!["0-1"; 2000].join(",")),
            ),
            &[200, 416],
        ),
        // ---- If-None-Match (RFC 9110 13.1.2): `*` matches any current
        // file, so a GET gets 304; a weak tag compares weakly.
        case(
            "If-None-Match * on GET",
            get("/files/keep/a.txt", u, "If-None-Match: *\r\n"),
            &[304],
        ),
        case(
            "If-None-Match W/tag",
            get(
                "/files/keep/a.txt",
                u,
                &format!("If-None-Match: W/\"{text_sha}\"\r\n"),
            ),
            &[304],
        ),
        case(
            "If-None-Match unterminated",
            get("/files/keep/a.txt", u, "If-None-Match: \"unterminated\r\n"),
            &[200],
        ),
        case(
            "If-None-Match 8 KiB of commas",
            get(
                "/files/keep/a.txt",
                u,
                &format!("If-None-Match: {}\r\n", ",".repeat(8 << 10)),
            ),
            &[200],
        ),
        case(
            "If-None-Match * on PUT over a file",
            put("/files/keep/a.txt", u, "If-None-Match: *\r\n", b"other"),
            &[412],
        )
        .error("already_exists"),
    ]
}
