//! The fuzz targets of `fuzz/` on stable, on every `cargo test`: each
//! function of `gateway::fuzzing` gets arbitrary bytes and inputs built to
//! sit near the valid ones (where the parsers' edge cases are), and panics
//! if an invariant of its answer breaks.
//!
//! `FUZZ_CASES` sets the cases per function (default 20 000);
//! `scripts/fuzz.sh` runs the same functions under libFuzzer for longer.

#![allow(clippy::unwrap_used)]

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use gateway::auth::secrets::{ShareSigner, ShareToken};
use gateway::fuzzing;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};

const DEFAULT_CASES: u32 = 20_000;

/// Run `check` on `cases` inputs from `strategy`; a panic fails the test
/// with the (shrunk) input that caused it.
fn fuzz(strategy: impl Strategy<Value = Vec<u8>>, check: fn(&[u8])) {
    let cases = std::env::var("FUZZ_CASES")
        .ok()
        .and_then(|cases| cases.parse().ok())
        .unwrap_or(DEFAULT_CASES);
    let config = Config {
        cases,
        // The inputs are cheap; most rejections would mean a bad strategy.
        max_global_rejects: cases,
        ..Config::default()
    };
    let mut runner = TestRunner::new(config);
    let result = runner.run(&strategy, |input| {
        check(&input);
        Ok(())
    });
    if let Err(failure) = result {
        panic!("{failure}");
    }
}

/// Arbitrary bytes, mostly short, sometimes long.
fn bytes() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        4 => prop::collection::vec(any::<u8>(), 0..64),
        1 => prop::collection::vec(any::<u8>(), 0..4096),
    ]
}

/// Concatenations of `pieces`: the alphabet of a near-valid input.
fn built_from(pieces: Vec<String>, max: usize) -> impl Strategy<Value = String> {
    prop::collection::vec(prop::sample::select(pieces), 0..max).prop_map(|parts| parts.concat())
}

fn strings(pieces: &[&str]) -> Vec<String> {
    pieces.iter().map(|&piece| piece.to_owned()).collect()
}

/// A decimal number near the edges: small, around `u64::MAX` / `i64::MAX`,
/// beyond them, with signs and leading zeros.
fn number() -> impl Strategy<Value = String> {
    prop_oneof![
        (0u64..1000).prop_map(|n| n.to_string()),
        any::<u64>().prop_map(|n| n.to_string()),
        any::<i64>().prop_map(|n| n.to_string()),
        prop::sample::select(strings(&[
            "18446744073709551615",
            "18446744073709551616",
            "99999999999999999999999",
            "9223372036854775807",
            "9223372036854775808",
            "-9223372036854775808",
            "+5",
            "-0",
            "007",
            "",
        ])),
    ]
}

#[test]
fn file_path() {
    let segment = prop_oneof![
        prop::sample::select(strings(&[
            "a",
            "b.txt",
            "..",
            ".",
            "...",
            "%2e",
            "%2E%2e",
            "%2e%2e",
            "%2f",
            "%2F",
            "%5c",
            "%5C",
            "%00",
            "%01",
            "%7f",
            "%25",
            "%252e",
            "%252e%252e",
            "%252f",
            "%",
            "%2",
            "%zz",
            "%g0",
            "%C3%BC",
            "%c3",
            "%ff",
            "%e2%80%8b",
            " ",
            "%20",
            "\\",
            "\t",
            "ü",
            "",
            "?",
            "#",
            "a%2f..%2fb",
        ])),
        "[a-z.%0-9A-F]{1,8}",
        (250usize..260).prop_map(|len| "x".repeat(len)),
    ];
    let path = (
        prop::sample::select(strings(&["", "/", "//"])),
        prop::collection::vec(segment, 0..8),
        prop::sample::select(strings(&["", "/", "//"])),
        0usize..1100,
    )
        .prop_map(|(lead, segments, trail, padding)| {
            let mut path = format!("{lead}{}{trail}", segments.join("/"));
            // Now and then, around the length limit.
            if padding > 1000 {
                path.push_str(&"y/".repeat(padding / 2));
            }
            path.into_bytes()
        });
    fuzz(prop_oneof![bytes(), path], fuzzing::file_path);
}

#[test]
fn byte_range() {
    let range = (
        prop::sample::select(strings(&[
            "bytes=", "bytes=", " bytes=", "Bytes=", "bytes", "",
        ])),
        built_from(strings(&["-", ",", " ", "\t", "=", "*", "+"]), 3),
        number(),
        built_from(strings(&["-", "-", " ", ",", "--"]), 3),
        number(),
        built_from(strings(&[",", " ", "-", "0-1", ", 5-"]), 3),
    )
        .prop_map(|(unit, a, first, dash, last, tail)| {
            format!("{unit}{a}{first}{dash}{last}{tail}").into_bytes()
        });
    fuzz(prop_oneof![bytes(), range], fuzzing::byte_range);
}

#[test]
fn if_none_match() {
    let tags = built_from(
        strings(&[
            "\"",
            "W/",
            "w/",
            ",",
            " ",
            "\t",
            "*",
            "abc",
            "\"\"",
            "\"abc\"",
            "W/\"def\"",
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
            "\u{e9}",
        ]),
        12,
    )
    .prop_map(String::into_bytes);
    fuzz(prop_oneof![bytes(), tags], fuzzing::if_none_match);
}

#[test]
fn authorization() {
    let scheme = prop::sample::select(strings(&[
        "Basic", "basic", "BASIC", "Bearer", "bearer", "Digest", "", "Basic:",
    ]));
    let space = prop::sample::select(strings(&["", " ", "  ", "\t", " \t "]));
    let credentials = prop_oneof![
        // base64 of `name:secret`, with `:` and the token prefix about.
        ("[a-z:]{0,6}", "(wst_)?[a-zA-Z0-9:]{0,12}", any::<bool>()).prop_map(
            |(name, secret, colon)| {
                let pair = if colon {
                    format!("{name}:{secret}")
                } else {
                    name
                };
                STANDARD.encode(pair)
            }
        ),
        // base64 of arbitrary bytes (not always UTF-8).
        prop::collection::vec(any::<u8>(), 0..40).prop_map(|raw| STANDARD.encode(raw)),
        // Tokens around the length limit, and base64-ish noise.
        (500usize..520).prop_map(|len| format!("wst_{}", "a".repeat(len - 4))),
        (2040usize..2060).prop_map(|len| "QUFB".repeat(len / 4 + 1)[..len].to_owned()),
        "[A-Za-z0-9+/=:_ -]{0,24}",
    ];
    let header =
        (scheme, space.clone(), credentials, space).prop_map(|(scheme, gap, credentials, end)| {
            format!("{scheme}{gap}{credentials}{end}").into_bytes()
        });
    fuzz(prop_oneof![bytes(), header], fuzzing::authorization);
}

#[test]
fn admin_json() {
    let value = prop_oneof![
        prop::sample::select(strings(&[
            "0",
            "1",
            "-1",
            "0.5",
            "0.05",
            "1.0",
            "0.999999",
            "1e-320",
            "1e308",
            "1e309",
            "-0.0",
            "18446744073709551615",
            "18446744073709551616",
            "1048576",
            "null",
            "true",
            "\"\"",
            "\"fixed\"",
            "\"monitor\"",
            "\"calibrate\"",
            "\"rolling\"",
            "\"restart-budget\"",
            "\"ci-mean\"",
            "\"prediction\"",
            "\"quantile\"",
            "\"Fixed\"",
            "\"restart_budget\"",
            "[]",
            "{}",
            "\"NaN\"",
        ])),
        any::<f64>().prop_map(|x| x.to_string()),
        any::<u64>().prop_map(|n| n.to_string()),
    ];
    let field = (
        prop::sample::select(strings(&[
            "mode",
            "method",
            "alpha",
            "restart_budget",
            "threshold",
            "unknown",
            "Mode",
        ])),
        value,
    )
        .prop_map(|(key, value)| format!("\"{key}\":{value}"));
    let object = (
        prop::collection::vec(field, 0..6),
        prop::sample::select(strings(&["", " ", ",", "}"])),
    )
        .prop_map(|(fields, tail)| format!("{{{}}}{tail}", fields.join(",")).into_bytes());
    fuzz(prop_oneof![bytes(), object], fuzzing::admin_json);
}

#[test]
fn share_token() {
    // Signed with the key `fuzzing::share_token` checks against, then
    // perhaps altered: the path past the signature check gets exercised too.
    let signer = ShareSigner::new(b"fuzzing key");
    let signed = (
        "[A-Za-z0-9_-]{1,70}",
        prop::option::of(any::<i64>()),
        0usize..6,
        any::<prop::sample::Index>(),
        any::<u8>(),
    )
        .prop_map(move |(id, expires_ms, edit, at, byte)| {
            let mut token = signer.sign(&ShareToken { id, expires_ms }).into_bytes();
            let at = at.index(token.len());
            match edit {
                0 | 1 => {}
                2 => token[at] = byte,
                3 => token.truncate(at),
                4 => token.insert(at, b'.'),
                _ => token.extend_from_slice(b".x"),
            }
            token
        });
    let made_up = (
        "[A-Za-z0-9.%\u{0}-]{0,70}",
        number(),
        "[A-Za-z0-9_=+/.-]{0,50}",
        prop::sample::select(strings(&["", ".", ".."])),
    )
        .prop_map(|(id, expires, signature, extra)| {
            format!("{id}.{expires}.{signature}{extra}").into_bytes()
        });
    fuzz(prop_oneof![bytes(), signed, made_up], fuzzing::share_token);
}
