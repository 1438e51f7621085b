//! Which IP addresses a public web read may connect to: global unicast only.
//! Every refused IPv4 and IPv6 range has a name, and IPv6 forms that embed an
//! IPv4 address (mapped, compatible, NAT64, 6to4, Teredo) are judged by it.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// A special-purpose address range that a public web read never connects to.
///
/// The names follow the IANA special-purpose registries (RFC 6890 and
/// successors); `Display` prints the range and its name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RefusedRange {
    /// 0.0.0.0/8 (and 0.0.0.0 itself): "this network", never a destination.
    ThisNetwork,
    /// 10/8, 172.16/12, 192.168/16 (RFC 1918).
    Private,
    /// 100.64/10, carrier-grade NAT (RFC 6598).
    Shared,
    /// 127/8 and ::1.
    Loopback,
    /// 169.254/16 (cloud metadata lives here) and fe80::/10.
    LinkLocal,
    /// 192.0.0/24, IETF protocol assignments.
    ProtocolAssignments,
    /// 192.0.2/24, 198.51.100/24, 203.0.113/24, 2001:db8::/32, 3fff::/20.
    Documentation,
    /// 192.88.99/24, the retired 6to4 relay anycast prefix.
    SixToFourRelay,
    /// 198.18/15 and 2001:2::/48.
    Benchmarking,
    /// 224/4 and ff00::/8.
    Multicast,
    /// 255.255.255.255.
    Broadcast,
    /// 240/4 and IPv6 space outside 2000::/3 not named otherwise.
    Reserved,
    /// :: (IPv6 unspecified).
    Unspecified,
    /// fc00::/7 (unique local addresses).
    UniqueLocal,
    /// fec0::/10 (deprecated site-local).
    SiteLocal,
    /// 100::/64, discard-only.
    DiscardOnly,
    /// 64:ff9b:1::/48, local-use NAT64 (RFC 8215): not globally reachable.
    LocalNat64,
    /// 2001::/23 outside Teredo (ORCHID, AMT, and other protocol assignments).
    Ietf6Assignments,
    /// 5f00::/16, SRv6 SIDs (RFC 9602).
    Srv6,
}

impl RefusedRange {
    /// A short human name with the CIDR blocks it covers.
    pub fn describe(self) -> &'static str {
        match self {
            RefusedRange::ThisNetwork => "\"this network\" (0.0.0.0/8)",
            RefusedRange::Private => "private (10/8, 172.16/12, 192.168/16)",
            RefusedRange::Shared => "shared carrier-grade NAT (100.64/10)",
            RefusedRange::Loopback => "loopback (127/8, ::1)",
            RefusedRange::LinkLocal => "link-local (169.254/16, fe80::/10)",
            RefusedRange::ProtocolAssignments => "IETF protocol assignments (192.0.0/24)",
            RefusedRange::Documentation => "documentation (TEST-NET, 2001:db8::/32, 3fff::/20)",
            RefusedRange::SixToFourRelay => "6to4 relay anycast (192.88.99/24)",
            RefusedRange::Benchmarking => "benchmarking (198.18/15, 2001:2::/48)",
            RefusedRange::Multicast => "multicast (224/4, ff00::/8)",
            RefusedRange::Broadcast => "broadcast (255.255.255.255)",
            RefusedRange::Reserved => "reserved (240/4, IPv6 outside 2000::/3)",
            RefusedRange::Unspecified => "unspecified (::)",
            RefusedRange::UniqueLocal => "unique local (fc00::/7)",
            RefusedRange::SiteLocal => "site-local (fec0::/10)",
            RefusedRange::DiscardOnly => "discard-only (100::/64)",
            RefusedRange::LocalNat64 => "local-use NAT64 (64:ff9b:1::/48)",
            RefusedRange::Ietf6Assignments => "IETF protocol assignments (2001::/23)",
            RefusedRange::Srv6 => "SRv6 SIDs (5f00::/16)",
        }
    }
}

impl std::fmt::Display for RefusedRange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.describe())
    }
}

/// Why an address is refused: its own range, or the range of the IPv4
/// address that an IPv6 form embeds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AddressRefusal {
    /// The range the refused (possibly embedded) address is in.
    pub range: RefusedRange,
    /// For IPv6 forms that embed IPv4: the form and the embedded address.
    pub embedded: Option<(Embedding, Ipv4Addr)>,
}

impl std::fmt::Display for AddressRefusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.embedded {
            None => write!(f, "{}", self.range),
            Some((form, v4)) => write!(f, "{form} embedding {v4}, which is {}", self.range),
        }
    }
}

/// The IPv6 forms that carry an IPv4 address inside.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Embedding {
    /// ::ffff:a.b.c.d
    Mapped,
    /// ::a.b.c.d (deprecated IPv4-compatible)
    Compatible,
    /// 64:ff9b::a.b.c.d (RFC 6052 well-known prefix)
    Nat64,
    /// 2002:aabb:ccdd::/48
    SixToFour,
    /// 2001:0000:server:flags:port:client (client address inverted)
    Teredo,
}

impl std::fmt::Display for Embedding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Embedding::Mapped => "IPv4-mapped IPv6 (::ffff:0:0/96)",
            Embedding::Compatible => "IPv4-compatible IPv6 (::/96)",
            Embedding::Nat64 => "NAT64 (64:ff9b::/96)",
            Embedding::SixToFour => "6to4 (2002::/16)",
            Embedding::Teredo => "Teredo (2001::/32)",
        })
    }
}

/// `None` when `ip` is global unicast; otherwise why it is refused.
pub fn refusal(ip: IpAddr) -> Option<AddressRefusal> {
    match ip {
        IpAddr::V4(v4) => refusal_v4(v4).map(|range| AddressRefusal {
            range,
            embedded: None,
        }),
        IpAddr::V6(v6) => refusal_v6(v6),
    }
}

/// True when `ip` is a global unicast address a public read may reach.
pub fn is_public(ip: IpAddr) -> bool {
    refusal(ip).is_none()
}

fn in_v4(ip: Ipv4Addr, net: [u8; 4], bits: u32) -> bool {
    let mask = if bits == 0 {
        0
    } else {
        u32::MAX << (32 - bits)
    };
    (u32::from(ip) & mask) == (u32::from(Ipv4Addr::from(net)) & mask)
}

/// The IPv4 range `ip` is in, if it is not global unicast.
pub fn refusal_v4(ip: Ipv4Addr) -> Option<RefusedRange> {
    use RefusedRange as R;
    const TABLE: &[([u8; 4], u32, RefusedRange)] = &[
        ([255, 255, 255, 255], 32, R::Broadcast),
        ([0, 0, 0, 0], 8, R::ThisNetwork),
        ([10, 0, 0, 0], 8, R::Private),
        ([100, 64, 0, 0], 10, R::Shared),
        ([127, 0, 0, 0], 8, R::Loopback),
        ([169, 254, 0, 0], 16, R::LinkLocal),
        ([172, 16, 0, 0], 12, R::Private),
        ([192, 0, 0, 0], 24, R::ProtocolAssignments),
        ([192, 0, 2, 0], 24, R::Documentation),
        ([192, 88, 99, 0], 24, R::SixToFourRelay),
        ([192, 168, 0, 0], 16, R::Private),
        ([198, 18, 0, 0], 15, R::Benchmarking),
        ([198, 51, 100, 0], 24, R::Documentation),
        ([203, 0, 113, 0], 24, R::Documentation),
        ([224, 0, 0, 0], 4, R::Multicast),
        ([240, 0, 0, 0], 4, R::Reserved),
    ];
    TABLE
        .iter()
        .find(|(net, bits, _)| in_v4(ip, *net, *bits))
        .map(|(_, _, range)| *range)
}

fn v4_from(hi: u16, lo: u16) -> Ipv4Addr {
    Ipv4Addr::from((u32::from(hi) << 16) | u32::from(lo))
}

/// The IPv6 refusal, judging embedded IPv4 addresses by their own range.
pub fn refusal_v6(ip: Ipv6Addr) -> Option<AddressRefusal> {
    use RefusedRange as R;
    let s = ip.segments();
    let own = |range| {
        Some(AddressRefusal {
            range,
            embedded: None,
        })
    };
    let embedded = |form: Embedding, v4: Ipv4Addr| {
        refusal_v4(v4).map(|range| AddressRefusal {
            range,
            embedded: Some((form, v4)),
        })
    };

    if ip.is_unspecified() {
        return own(R::Unspecified);
    }
    if ip.is_loopback() {
        return own(R::Loopback);
    }
    // ::ffff:a.b.c.d
    if s[..5] == [0, 0, 0, 0, 0] && s[5] == 0xffff {
        return embedded(Embedding::Mapped, v4_from(s[6], s[7]));
    }
    // ::a.b.c.d (the first 96 bits zero; :: and ::1 handled above)
    if s[..6] == [0, 0, 0, 0, 0, 0] {
        return embedded(Embedding::Compatible, v4_from(s[6], s[7]));
    }
    // 64:ff9b::/96
    if s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        return embedded(Embedding::Nat64, v4_from(s[6], s[7]));
    }
    // 64:ff9b:1::/48, local-use: never global, whatever it embeds.
    if s[0] == 0x64 && s[1] == 0xff9b && s[2] == 1 {
        return own(R::LocalNat64);
    }
    // 2002::/16: the IPv4 address is bits 16..48.
    if s[0] == 0x2002 {
        return embedded(Embedding::SixToFour, v4_from(s[1], s[2]));
    }
    // 2001::/32 Teredo: server in bits 32..64, client inverted in the last 32.
    if s[0] == 0x2001 && s[1] == 0 {
        let server = v4_from(s[2], s[3]);
        let client = v4_from(!s[6], !s[7]);
        return embedded(Embedding::Teredo, server).or_else(|| embedded(Embedding::Teredo, client));
    }
    if s[0] == 0x2001 && s[1] == 0x2 && s[2] == 0 {
        return own(R::Benchmarking);
    }
    if s[0] == 0x2001 && s[1] == 0xdb8 {
        return own(R::Documentation);
    }
    // 2001::/23: the rest of the IETF protocol assignments.
    if s[0] == 0x2001 && s[1] < 0x200 {
        return own(R::Ietf6Assignments);
    }
    if s[0] & 0xfff0 == 0x3ff0 {
        return own(R::Documentation);
    }
    if s[0] == 0x5f00 {
        return own(R::Srv6);
    }
    if s[..4] == [0x100, 0, 0, 0] {
        return own(R::DiscardOnly);
    }
    if s[0] & 0xfe00 == 0xfc00 {
        return own(R::UniqueLocal);
    }
    if s[0] & 0xffc0 == 0xfe80 {
        return own(R::LinkLocal);
    }
    if s[0] & 0xffc0 == 0xfec0 {
        return own(R::SiteLocal);
    }
    if s[0] & 0xff00 == 0xff00 {
        return own(R::Multicast);
    }
    // Global unicast is 2000::/3; everything else is reserved.
    if s[0] & 0xe000 != 0x2000 {
        return own(R::Reserved);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v4(s: &str) -> Ipv4Addr {
        s.parse().unwrap()
    }
    fn v6(s: &str) -> Ipv6Addr {
        s.parse().unwrap()
    }

    #[test]
    fn range_edges_v4() {
        // One past each end of 172.16/12 is public; the ends are not.
        assert_eq!(refusal_v4(v4("172.16.0.0")), Some(RefusedRange::Private));
        assert_eq!(
            refusal_v4(v4("172.31.255.255")),
            Some(RefusedRange::Private)
        );
        assert_eq!(refusal_v4(v4("172.15.255.255")), None);
        assert_eq!(refusal_v4(v4("172.32.0.0")), None);
        assert_eq!(refusal_v4(v4("100.63.255.255")), None);
        assert_eq!(refusal_v4(v4("100.64.0.0")), Some(RefusedRange::Shared));
        assert_eq!(
            refusal_v4(v4("100.127.255.255")),
            Some(RefusedRange::Shared)
        );
        assert_eq!(refusal_v4(v4("100.128.0.0")), None);
        assert_eq!(refusal_v4(v4("198.17.255.255")), None);
        assert_eq!(
            refusal_v4(v4("198.19.255.255")),
            Some(RefusedRange::Benchmarking)
        );
        assert_eq!(refusal_v4(v4("198.20.0.0")), None);
        assert_eq!(refusal_v4(v4("223.255.255.255")), None);
        assert_eq!(
            refusal_v4(v4("255.255.255.255")),
            Some(RefusedRange::Broadcast)
        );
        assert_eq!(
            refusal_v4(v4("255.255.255.254")),
            Some(RefusedRange::Reserved)
        );
    }

    #[test]
    fn embedded_forms_follow_the_embedded_address() {
        assert!(refusal_v6(v6("::ffff:8.8.8.8")).is_none());
        assert!(refusal_v6(v6("64:ff9b::8.8.8.8")).is_none());
        assert!(refusal_v6(v6("2002:0808:0808::1")).is_none());
        let r = refusal_v6(v6("2002:7f00:1::1")).unwrap();
        assert_eq!(r.embedded, Some((Embedding::SixToFour, v4("127.0.0.1"))));
        // Teredo: server 8.8.8.8, client 10.0.0.1 inverted = f5ff:fffe.
        let r = refusal_v6(v6("2001:0:808:808:0:0:f5ff:fffe")).unwrap();
        assert_eq!(r.embedded, Some((Embedding::Teredo, v4("10.0.0.1"))));
        assert!(refusal_v6(v6("2001:0:808:808:0:0:f7f7:f7f7")).is_none());
    }

    /// Every embedding of an IPv4 address is judged exactly as the address
    /// itself, over a deterministic sample of the whole IPv4 space.
    #[test]
    fn embeddings_agree_with_the_embedded_address() {
        let mut state = 0x5EED_u64;
        let mut next = || {
            state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            (z ^ (z >> 31)) as u32
        };
        let public_server = u32::from(v4("8.8.8.8"));
        for _ in 0..50_000 {
            let n = next();
            let a = Ipv4Addr::from(n);
            let own = refusal_v4(a);
            let (hi, lo) = ((n >> 16) as u16, n as u16);
            let forms = [
                (
                    Embedding::Mapped,
                    Ipv6Addr::new(0, 0, 0, 0, 0, 0xffff, hi, lo),
                ),
                (
                    Embedding::Nat64,
                    Ipv6Addr::new(0x64, 0xff9b, 0, 0, 0, 0, hi, lo),
                ),
                (
                    Embedding::SixToFour,
                    Ipv6Addr::new(0x2002, hi, lo, 0, 0, 0, 0, 1),
                ),
                (
                    Embedding::Teredo,
                    Ipv6Addr::new(
                        0x2001,
                        0,
                        (public_server >> 16) as u16,
                        public_server as u16,
                        0,
                        0,
                        !hi,
                        !lo,
                    ),
                ),
            ];
            for (form, v6) in forms {
                let got = refusal_v6(v6);
                assert_eq!(got.map(|r| r.range), own, "{form} of {a} ({v6})");
                if let Some(r) = got {
                    assert_eq!(r.embedded, Some((form, a)));
                }
            }
            // Compatible form: :: and ::1 are their own ranges; the rest follow the address.
            if n > 1 {
                let v6 = Ipv6Addr::new(0, 0, 0, 0, 0, 0, hi, lo);
                assert_eq!(refusal_v6(v6).map(|r| r.range), own, "{v6}");
            }
        }
    }

    #[test]
    fn global_unicast_v6_is_public() {
        assert!(refusal_v6(v6("2606:4700:4700::1111")).is_none());
        assert!(refusal_v6(v6("2a00:1450:4001:80b::200e")).is_none());
        assert_eq!(
            refusal_v6(v6("4000::1")).map(|r| r.range),
            Some(RefusedRange::Reserved)
        );
    }
}
