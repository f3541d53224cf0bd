//! Which proxies may say who the client is: a request whose connection
//! comes from a trusted proxy is counted against the address that proxy
//! (and any trusted proxy before it) names in `X-Forwarded-For`; from
//! anyone else that header is ignored, since a client can write anything
//! there.

use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;

use axum::http::HeaderMap;

/// One address or a CIDR block: `127.0.0.1`, `10.0.0.0/8`, `fd00::/8`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Network {
    address: IpAddr,
    prefix: u8,
}

impl Network {
    pub fn contains(&self, ip: IpAddr) -> bool {
        match (self.address, ip) {
            (IpAddr::V4(net), IpAddr::V4(ip)) => {
                let mask = u32::MAX
                    .checked_shl(32 - u32::from(self.prefix))
                    .unwrap_or(0);
                u32::from(net) & mask == u32::from(ip) & mask
            }
            (IpAddr::V6(net), IpAddr::V6(ip)) => {
                let mask = u128::MAX
                    .checked_shl(128 - u32::from(self.prefix))
                    .unwrap_or(0);
                u128::from(net) & mask == u128::from(ip) & mask
            }
            _ => false,
        }
    }
}

impl FromStr for Network {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let (address, prefix) = match text.trim().split_once('/') {
            Some((address, prefix)) => (address, Some(prefix)),
            None => (text.trim(), None),
        };
        let address: IpAddr = address
            .parse()
            .map_err(|_| format!("{text:?} is not an IP address or CIDR block"))?;
        let most = if address.is_ipv4() { 32 } else { 128 };
        let prefix = match prefix {
            None => most,
            Some(prefix) => prefix
                .parse::<u8>()
                .ok()
                .filter(|prefix| *prefix <= most)
                .ok_or_else(|| format!("{text:?}: the prefix must be 0 to {most}"))?,
        };
        Ok(Self { address, prefix })
    }
}

impl fmt::Display for Network {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.address, self.prefix)
    }
}

/// The client of a request that came from `peer`: `peer` itself, unless it
/// is a trusted proxy; then, walking `X-Forwarded-For` from the right (each
/// proxy appends the address it heard from), the first address that is not
/// a trusted proxy. Anything left of it is the client's own writing and is
/// never believed: an entry that does not parse ends the walk at the last
/// trusted hop. IPv4-mapped IPv6 addresses count as the IPv4 ones.
pub fn client(peer: IpAddr, headers: &HeaderMap, trusted: &[Network]) -> IpAddr {
    let is_trusted = |ip: IpAddr| trusted.iter().any(|network| network.contains(ip));
    let mut client = peer.to_canonical();
    if !is_trusted(client) {
        return client;
    }
    let entries: Vec<&str> = headers
        .get_all("x-forwarded-for")
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .map(str::trim)
        .collect();
    for entry in entries.into_iter().rev() {
        let Ok(hop) = entry.parse::<IpAddr>().map(|ip| ip.to_canonical()) else {
            break;
        };
        client = hop;
        if !is_trusted(hop) {
            break;
        }
    }
    client
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap_or(IpAddr::from([0, 0, 0, 0]))
    }

    #[test]
    fn networks_parse_and_contain() {
        let net: Network = "10.1.0.0/16".parse().unwrap_or_else(|e| panic!("{e}"));
        assert!(net.contains(ip("10.1.200.3")));
        assert!(!net.contains(ip("10.2.0.1")));
        let one: Network = "127.0.0.1".parse().unwrap_or_else(|e| panic!("{e}"));
        assert!(one.contains(ip("127.0.0.1")) && !one.contains(ip("127.0.0.2")));
        let v6: Network = "fd00::/8".parse().unwrap_or_else(|e| panic!("{e}"));
        assert!(v6.contains(ip("fd12::1")) && !v6.contains(ip("10.0.0.1")));
        let all: Network = "0.0.0.0/0".parse().unwrap_or_else(|e| panic!("{e}"));
        assert!(all.contains(ip("8.8.8.8")));
        for bad in ["", "x", "10.0.0.0/33", "::/129", "10.0.0.0/-1"] {
            assert!(bad.parse::<Network>().is_err(), "{bad}");
        }
    }

    #[test]
    fn a_client_cannot_choose_its_address() {
        let trusted: Vec<Network> = ["10.0.0.0/8"]
            .iter()
            .filter_map(|n| n.parse().ok())
            .collect();
        // An empty entry or junk the client wrote ends the walk at the proxy.
        for written in ["1.2.3.4, ", "1.2.3.4, x"] {
            let mut headers = HeaderMap::new();
            headers.append(
                "x-forwarded-for",
                HeaderValue::from_str(written).unwrap_or(HeaderValue::from_static("x")),
            );
            headers.append("x-forwarded-for", HeaderValue::from_static("203.0.113.7"));
            assert_eq!(
                client(ip("10.0.0.2"), &headers, &trusted),
                ip("203.0.113.7"),
                "{written}"
            );
        }
        let mut headers = HeaderMap::new();
        headers.insert("x-forwarded-for", HeaderValue::from_static("1.2.3.4, x"));
        assert_eq!(client(ip("10.0.0.2"), &headers, &trusted), ip("10.0.0.2"));
        // IPv4-mapped addresses are the IPv4 ones, peer and hops alike.
        let mut headers = HeaderMap::new();
        headers.insert(
            "x-forwarded-for",
            HeaderValue::from_static("::ffff:203.0.113.9"),
        );
        assert_eq!(
            client(ip("::ffff:10.0.0.2"), &headers, &trusted),
            ip("203.0.113.9")
        );
    }

    #[test]
    fn only_trusted_proxies_name_the_client() {
        let trusted: Vec<Network> = ["10.0.0.0/8"]
            .iter()
            .filter_map(|n| n.parse().ok())
            .collect();
        let mut headers = HeaderMap::new();
        headers.insert(
            "x-forwarded-for",
            HeaderValue::from_static("6.6.6.6, 203.0.113.7, 10.0.0.9"),
        );
        // From a trusted proxy: the last untrusted hop, not what the client wrote first.
        assert_eq!(
            client(ip("10.0.0.2"), &headers, &trusted),
            ip("203.0.113.7")
        );
        // From anyone else: the header is ignored.
        assert_eq!(
            client(ip("198.51.100.1"), &headers, &trusted),
            ip("198.51.100.1")
        );
        // No header: the proxy itself.
        assert_eq!(
            client(ip("10.0.0.2"), &HeaderMap::new(), &trusted),
            ip("10.0.0.2")
        );
    }
}
