//! Which IP addresses are on the public internet: the one classification every outgoing
//! request of the server goes through (a callback URL's literal address at submission,
//! every address a host name resolves to at connection).
//!
//! The tables follow IANA's IPv4 and IPv6 Special-Purpose Address Registries (RFC 6890
//! and its updates): a range that is not "globally reachable" there is not public here,
//! and neither is anything outside IPv6 global unicast (`2000::/3`). Addresses that carry
//! an IPv4 address that the network translates to — IPv4-mapped (`::ffff:a.b.c.d`) and
//! the NAT64 well-known prefix (`64:ff9b::/96`) — are judged by that IPv4 address; the
//! deprecated IPv4-compatible form (`::a.b.c.d`), 6to4 (`2002::/16`), Teredo
//! (`2001::/32`) and the local-use NAT64 prefix are never public.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Why an address is not public, or that it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reach {
    Public,
    /// Not on the public internet; the name of the range.
    NotPublic(&'static str),
}

/// IPv4 ranges that are not globally reachable: (network, prefix length, name).
const V4_SPECIAL: &[([u8; 4], u8, &str)] = &[
    ([0, 0, 0, 0], 8, "this network"),
    ([10, 0, 0, 0], 8, "private-use"),
    ([100, 64, 0, 0], 10, "shared address space"),
    ([127, 0, 0, 0], 8, "loopback"),
    ([169, 254, 0, 0], 16, "link-local"),
    ([172, 16, 0, 0], 12, "private-use"),
    ([192, 0, 0, 0], 24, "IETF protocol assignments"),
    ([192, 0, 2, 0], 24, "documentation (TEST-NET-1)"),
    ([192, 88, 99, 0], 24, "6to4 relay anycast (deprecated)"),
    ([192, 168, 0, 0], 16, "private-use"),
    ([198, 18, 0, 0], 15, "benchmarking"),
    ([198, 51, 100, 0], 24, "documentation (TEST-NET-2)"),
    ([203, 0, 113, 0], 24, "documentation (TEST-NET-3)"),
    ([224, 0, 0, 0], 4, "multicast"),
    ([240, 0, 0, 0], 4, "reserved"),
    ([255, 255, 255, 255], 32, "limited broadcast"),
];

/// IPv6 ranges inside global unicast (`2000::/3`) that are not globally reachable.
const V6_SPECIAL: &[([u16; 8], u8, &str)] = &[
    (
        [0x2001, 0, 0, 0, 0, 0, 0, 0],
        23,
        "IETF protocol assignments (incl. Teredo)",
    ),
    ([0x2001, 0x0db8, 0, 0, 0, 0, 0, 0], 32, "documentation"),
    ([0x2002, 0, 0, 0, 0, 0, 0, 0], 16, "6to4"),
    ([0x3fff, 0, 0, 0, 0, 0, 0, 0], 20, "documentation"),
];

/// IPv6 ranges outside global unicast, named (everything else there is "reserved").
const V6_NAMED: &[([u16; 8], u8, &str)] = &[
    ([0, 0, 0, 0, 0, 0, 0, 0], 128, "unspecified"),
    ([0, 0, 0, 0, 0, 0, 0, 1], 128, "loopback"),
    (
        [0x0064, 0xff9b, 0x0001, 0, 0, 0, 0, 0],
        48,
        "local-use NAT64",
    ),
    ([0x0100, 0, 0, 0, 0, 0, 0, 0], 64, "discard-only"),
    ([0x5f00, 0, 0, 0, 0, 0, 0, 0], 16, "SRv6 SIDs"),
    ([0xfc00, 0, 0, 0, 0, 0, 0, 0], 7, "unique local"),
    ([0xfe80, 0, 0, 0, 0, 0, 0, 0], 10, "link-local"),
    ([0xfec0, 0, 0, 0, 0, 0, 0, 0], 10, "site-local (deprecated)"),
    ([0xff00, 0, 0, 0, 0, 0, 0, 0], 8, "multicast"),
];

fn v4_in(ip: Ipv4Addr, network: [u8; 4], prefix: u8) -> bool {
    let mask = u32::MAX.checked_shl(32 - u32::from(prefix)).unwrap_or(0);
    u32::from(ip) & mask == u32::from(Ipv4Addr::from(network)) & mask
}

fn v6_in(ip: Ipv6Addr, network: [u16; 8], prefix: u8) -> bool {
    let mask = u128::MAX.checked_shl(128 - u32::from(prefix)).unwrap_or(0);
    u128::from(ip) & mask == u128::from(Ipv6Addr::from(network)) & mask
}

/// Where `ip` leads.
pub fn classify(ip: IpAddr) -> Reach {
    match ip {
        IpAddr::V4(ip) => classify_v4(ip),
        IpAddr::V6(ip) => classify_v6(ip),
    }
}

/// Whether `ip` is on the public internet.
pub fn is_public(ip: IpAddr) -> bool {
    classify(ip) == Reach::Public
}

fn classify_v4(ip: Ipv4Addr) -> Reach {
    V4_SPECIAL
        .iter()
        .find(|(network, prefix, _)| v4_in(ip, *network, *prefix))
        .map_or(Reach::Public, |(_, _, name)| Reach::NotPublic(name))
}

fn classify_v6(ip: Ipv6Addr) -> Reach {
    let bits = u128::from(ip);
    // IPv4-mapped ::ffff:a.b.c.d: the IPv4 address is where it leads.
    if let Some(v4) = ip.to_ipv4_mapped() {
        return classify_v4(v4);
    }
    // NAT64 well-known prefix 64:ff9b::/96: translated to the embedded IPv4 address.
    if v6_in(ip, [0x0064, 0xff9b, 0, 0, 0, 0, 0, 0], 96) {
        return classify_v4(Ipv4Addr::from((bits & 0xffff_ffff) as u32));
    }
    if let Some((_, _, name)) = V6_NAMED
        .iter()
        .find(|(network, prefix, _)| v6_in(ip, *network, *prefix))
    {
        return Reach::NotPublic(name);
    }
    // The deprecated IPv4-compatible form ::a.b.c.d (and the rest of ::/96).
    if v6_in(ip, [0; 8], 96) {
        return Reach::NotPublic("IPv4-compatible (deprecated)");
    }
    if !v6_in(ip, [0x2000, 0, 0, 0, 0, 0, 0, 0], 3) {
        return Reach::NotPublic("reserved by the IETF");
    }
    if let Some((_, _, name)) = V6_SPECIAL
        .iter()
        .find(|(network, prefix, _)| v6_in(ip, *network, *prefix))
    {
        return Reach::NotPublic(name);
    }
    Reach::Public
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reach(text: &str) -> Reach {
        classify(text.parse().expect("an address"))
    }

    #[test]
    fn public_addresses_are_public() {
        for ip in [
            "8.8.8.8",
            "93.184.216.34",
            "1.1.1.1",
            "100.63.255.255",
            "100.128.0.0",
            "172.15.255.255",
            "172.32.0.0",
            "192.0.3.1",
            "198.17.255.255",
            "198.20.0.0",
            "223.255.255.255",
            "2606:4700::1111",
            "2a00:1450:4001:80b::200e",
            "2001:4860:4860::8888",
            "::ffff:8.8.8.8",
            "64:ff9b::808:808",
        ] {
            assert_eq!(reach(ip), Reach::Public, "{ip}");
        }
    }

    #[test]
    fn every_special_range_of_both_registries_is_not_public() {
        for ip in [
            "0.0.0.0",
            "0.1.2.3",
            "10.1.2.3",
            "100.64.0.1",
            "100.127.255.255",
            "127.0.0.1",
            "127.255.255.254",
            "169.254.169.254",
            "172.16.0.1",
            "172.31.255.255",
            "192.0.0.1",
            "192.0.2.7",
            "192.88.99.1",
            "192.168.1.1",
            "198.18.0.1",
            "198.19.255.255",
            "198.51.100.1",
            "203.0.113.9",
            "224.0.0.1",
            "239.255.255.250",
            "240.0.0.1",
            "255.255.255.255",
            "::",
            "::1",
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
            "::ffff:169.254.169.254",
            "::127.0.0.1",
            "::8.8.8.8",
            "64:ff9b::7f00:1",
            "64:ff9b::a00:1",
            "64:ff9b:1::1",
            "100::1",
            "2001::1",
            "2001:0:4136:e378:8000:63bf:3fff:fdd2",
            "2001:db8::1",
            "2002:7f00:1::1",
            "2002:808:808::1",
            "3fff::1",
            "5f00::1",
            "fc00::1",
            "fd12:3456::1",
            "fe80::1",
            "febf::1",
            "fec0::1",
            "ff02::1",
            "4000::1",
            "1::1",
        ] {
            assert!(
                matches!(reach(ip), Reach::NotPublic(_)),
                "{ip} must not be public, got {:?}",
                reach(ip)
            );
        }
    }
}
