//! How a request's body is framed and sent: Content-Length, chunked
//! coding, Transfer-Encoding, smuggling, bodies past `--max-body`, cut
//! off, or too slow.

use crate::common::random_bytes;
use crate::support::{
    Accounts, Area, CLOSED, Case, MAX_BODY, Mode, Phase, bearer, case, chunked, framed,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lying_bodies_are_refused_and_write_nothing() {
    Area {
        name: "request body",
        both: cases,
        accounts: account_cases,
    }
    .check()
    .await;
}

/// In both modes: `p.user` is the credential line.
fn cases(p: &Phase<'_>) -> Vec<Case> {
    let u = p.user;
    let mut cases = vec![
        // ---- Content-Length: not a number, or two different ones, is
        // hyper's 400 (RFC 9112 6.3: unrecoverable framing error).
        case(
            "Content-Length abc",
            framed("PUT", "/files/cl.bin", u, "Content-Length: abc\r\n", b"xyz"),
            &[400],
        ),
        case(
            "Content-Length -1",
            framed("PUT", "/files/cl.bin", u, "Content-Length: -1\r\n", b""),
            &[400],
        ),
        case(
            "Content-Length +5",
            framed("PUT", "/files/cl.bin", u, "Content-Length: +5\r\n", b"12345"),
            &[400],
        ),
        case(
            "Content-Length 5, 6",
            framed("PUT", "/files/cl.bin", u, "Content-Length: 5, 6\r\n", b"12345"),
            &[400],
        ),
        case(
            "two Content-Lengths",
            framed(
                "PUT",
                "/files/cl.bin",
                u,
                "Content-Length: 5\r\nContent-Length: 6\r\n",
                b"123456",
            ),
            &[400],
        ),
        case(
            "Content-Length overflows u64",
            framed(
                "PUT",
                "/files/cl.bin",
                u,
                "Content-Length: 99999999999999999999999\r\n",
                b"",
            ),
            &[400],
        ),
        // Over --max-body: 413 from the declared length alone; no body is
        // sent, so a server that waited for it would time out instead.
        case(
            "Content-Length max-body + 1",
            framed(
                "PUT",
                "/files/big.bin",
                u,
                &format!("Content-Length: {}\r\n", MAX_BODY + 1),
                b"",
            ),
            &[413],
        )
        .error("body_too_large"),
        case(
            "Content-Length 1 PB",
            framed(
                "PUT",
                "/files/big.bin",
                u,
                "Content-Length: 1000000000000000\r\n",
                b"",
            ),
            &[413],
        )
        .error("body_too_large"),
        // u64::MAX is a length hyper reserves for itself: it answers 431
        // before the application sees the request. 413 would be nicer.
        case(
            "Content-Length u64::MAX",
            framed(
                "POST",
                "/files/big.bin",
                u,
                "Content-Length: 18446744073709551615\r\n",
                b"",
            ),
            &[413, 431],
        ),
        // Expect: 100-continue over the limit: the final 413 comes first,
        // never a 100 that invites the body (RFC 9110 10.1.1).
        case(
            "Expect 100-continue, too large",
            framed(
                "PUT",
                "/files/big.bin",
                u,
                "Expect: 100-continue\r\nContent-Length: 1000000\r\n",
                b"",
            ),
            &[413],
        )
        .error("body_too_large"),
        // ---- Chunked bodies that lie: hyper fails the body, the upload
        // fails with 400 and nothing is stored.
        case(
            "chunk size zz",
            framed(
                "PUT",
                "/files/chunked.bin",
                u,
                "Transfer-Encoding: chunked\r\n",
                b"zz\r\nhello\r\n0\r\n\r\n",
            ),
            &[400],
        )
        .error("bad_request"),
        case(
            "chunk size overflow",
            framed(
                "PUT",
                "/files/chunked.bin",
                u,
                "Transfer-Encoding: chunked\r\n",
                b"fffffffffffffffffff\r\nhello\r\n0\r\n\r\n",
            ),
            &[400],
        )
        .error("bad_request"),
        case(
            "chunk shorter than its size",
            framed(
                "PUT",
                "/files/chunked.bin",
                u,
                "Transfer-Encoding: chunked\r\n",
                b"5\r\n0123456789\r\n0\r\n\r\n",
            ),
            &[400],
        )
        .error("bad_request"),
        case(
            "20 KiB chunk extension",
            framed(
                "PUT",
                "/files/chunked.bin",
                u,
                "Transfer-Encoding: chunked\r\n",
                &[
                    b"5;".as_slice(),
                    "x".repeat(20 << 10).as_bytes(),
                    b"\r\nhello\r\n0\r\n\r\n".as_slice(),
                ]
                .concat(),
            ),
            &[400],
        )
        .error("bad_request"),
        // RFC 9112 6.1: a request whose last transfer coding is not
        // chunked MUST get 400.
        case(
            "Transfer-Encoding gzip",
            framed(
                "PUT",
                "/files/chunked.bin",
                u,
                "Transfer-Encoding: gzip\r\n",
                b"hello",
            ),
            &[400],
        ),
        case(
            "Transfer-Encoding chunked then identity",
            framed(
                "PUT",
                "/files/chunked.bin",
                u,
                "Transfer-Encoding: chunked\r\nTransfer-Encoding: identity\r\n",
                b"5\r\nhello\r\n0\r\n\r\n",
            ),
            &[400],
        ),
        case(
            "Transfer-Encoding with space before colon",
            framed(
                "PUT",
                "/files/chunked.bin",
                u,
                "Transfer-Encoding : chunked\r\n",
                b"5\r\nhello\r\n0\r\n\r\n",
            ),
            &[400],
        ),
        // RFC 9112 6.1: Transfer-Encoding in HTTP/1.0 is faulty framing.
        case(
            "Transfer-Encoding in HTTP/1.0",
            format!(
                "PUT /files/chunked.bin HTTP/1.0\r\nHost: localhost\r\n{u}Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"
            ),
            &[400],
        ),
        // Request smuggling: Content-Length and Transfer-Encoding both.
        // RFC 9112 6.1: go by Transfer-Encoding (an empty body here) or
        // refuse (400), and in either case close the connection, so the
        // DELETE hidden behind the body never runs (one answer only).
        case(
            "CL+TE with a smuggled DELETE",
            [
                format!("PUT /files/keep/a.txt HTTP/1.1\r\nHost: localhost\r\n{u}If-None-Match: *\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"),
                format!("DELETE /files/keep/a.txt HTTP/1.1\r\nHost: localhost\r\n{u}\r\n"),
            ]
            .concat(),
            &[412, 400],
        )
        .error("already_exists"),
        // The client gives up mid-body and half-closes. hyper, which does
        // not keep half-closed connections, may drop it unanswered
        // (status 0); otherwise the failed body is a 400. Nothing stored.
        case(
            "chunked body cut off by EOF",
            framed(
                "PUT",
                "/files/cut.bin",
                u,
                "Transfer-Encoding: chunked\r\n",
                b"a\r\n0123456789\r\n",
            ),
            &[400, CLOSED],
        )
        .error("bad_request")
        .half_close(),
        case(
            "Content-Length body cut off by EOF",
            framed(
                "PUT",
                "/files/cut.bin",
                u,
                "Content-Length: 100\r\n",
                b"0123456789",
            ),
            &[400, CLOSED],
        )
        .error("bad_request")
        .half_close(),
    ];
    // Past --max-body without a length: cut off at the limit, 413. With a
    // quota (alice has less than --max-body left) the cut comes at the
    // quota first: 507.
    let over_max_body = random_bytes(MAX_BODY as usize + 1000);
    let chunked_over = framed(
        "PUT",
        "/files/chunked-big.bin",
        u,
        "Transfer-Encoding: chunked\r\n",
        &chunked(&over_max_body, 16 << 10),
    );
    cases.push(match p.mode {
        Mode::Open => case("chunked past max-body", chunked_over, &[413]).error("body_too_large"),
        Mode::Users => case("chunked past max-body", chunked_over, &[507]).error("quota_exceeded"),
    });
    cases
}

/// With users: alice's uploads.
fn account_cases(a: &Accounts) -> Vec<Case> {
    let alice = bearer(&a.alice);
    vec![
        // An upload that stalls: past the 10 s grace it is slower than
        // --min-body-rate, so 408 request_timeout and nothing stored.
        case(
            "upload that stalls",
            framed(
                "PUT",
                "/files/slow.bin",
                &alice,
                "Content-Length: 1000\r\n",
                b"0123456789",
            ),
            &[408],
        )
        .error("request_timeout")
        .wait(25),
    ]
}
