//! Picking free loopback ports.

use std::collections::HashSet;
use std::net::{Ipv4Addr, TcpListener};
use std::sync::{Mutex, PoisonError};

/// Offset SeaweedFS adds to an HTTP port to derive its gRPC port.
pub(crate) const GRPC_OFFSET: u16 = 10000;

/// Ports already handed out by this process, so two servers started at the
/// same time never get the same one.
static HANDED_OUT: Mutex<Option<HashSet<u16>>> = Mutex::new(None);

/// Asks the OS for an unused port on 127.0.0.1 that this process has not
/// handed out before. The port is released before returning, so another
/// program could still take it: start the server promptly.
pub fn free_port() -> u16 {
    try_free_port(|_| true).expect("no free loopback port")
}

/// Like [`free_port`], but also `port + 10000` is free and a valid port, as
/// SeaweedFS derives gRPC ports that way.
pub fn free_port_with_grpc() -> u16 {
    try_free_port(|p| {
        p.checked_add(GRPC_OFFSET)
            .is_some_and(|g| TcpListener::bind((Ipv4Addr::LOCALHOST, g)).is_ok())
    })
    .expect("no free loopback port p with p + 10000 free too")
}

/// Returns a fresh OS-chosen port accepted by `ok`, reserving it (and its
/// gRPC twin) in [`HANDED_OUT`].
fn try_free_port(ok: impl Fn(u16) -> bool) -> Option<u16> {
    for _ in 0..1000 {
        let port = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .and_then(|l| l.local_addr())
            .ok()?
            .port();
        let mut guard = HANDED_OUT.lock().unwrap_or_else(PoisonError::into_inner);
        let seen = guard.get_or_insert_with(HashSet::new);
        let twin = port.checked_add(GRPC_OFFSET);
        if seen.contains(&port) || twin.is_some_and(|t| seen.contains(&t)) || !ok(port) {
            continue;
        }
        seen.insert(port);
        seen.extend(twin);
        return Some(port);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// These tests bind the ports they were handed; while one does, the
    /// other's `bind(0)` may briefly hold that very port (the OS hands a
    /// released port out again), so they take turns.
    static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

    /// Whether `port` can be bound now. Another program on the machine may
    /// take a handed-out port at any moment (the functions above say so,
    /// and CI twice saw a pick taken before the test bound it), so the tests
    /// ask that nearly all picks are still free, not every one.
    fn bindable(port: u16) -> bool {
        TcpListener::bind((Ipv4Addr::LOCALHOST, port)).is_ok()
    }

    #[test]
    fn ports_are_distinct_and_bindable() {
        let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(PoisonError::into_inner);
        let ports: HashSet<u16> = (0..50).map(|_| free_port()).collect();
        assert_eq!(ports.len(), 50);
        assert!(ports.iter().all(|&p| p != 0));
        let free = ports.iter().filter(|&&p| bindable(p)).count();
        assert!(free >= 45, "only {free} of 50 handed-out ports were free");
    }

    #[test]
    fn grpc_twin_is_free() {
        let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(PoisonError::into_inner);
        let mut free = 0;
        for _ in 0..20 {
            let p = free_port_with_grpc();
            let g = p.checked_add(GRPC_OFFSET).expect("twin fits in u16");
            free += usize::from(bindable(p) && bindable(g));
        }
        assert!(
            free >= 16,
            "only {free} of 20 ports and their twins were free"
        );
    }
}
