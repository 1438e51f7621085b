//! The URL policy (`agent_fetch::policy`, S8.1).
//!
//! Property: a URL the policy accepts never names, nor resolves to, a
//! private, loopback, link-local, unspecified, multicast or reserved
//! address. The judge here is independent of `agent_fetch::addr`: it uses
//! the standard library's classification plus the few ranges it lacks, and
//! unwraps the IPv6 forms that embed an IPv4 address.
//!
//! Input, by its first byte:
//! - even: free text. The next byte says how many addresses (0 to 3) the
//!   resolver answers for any name, 17 bytes each (a family byte and 16
//!   address bytes); the rest is the URL.
//! - odd: an address (4 or 16 bytes from the input) written in one of the
//!   spellings WHATWG parsing accepts (decimal, octal, hex, shortened,
//!   percent-encoded, IPv4-mapped, -compatible, NAT64, 6to4), which must
//!   parse to that very address and be refused exactly when it is not public.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::Arc;

use agent_fetch::policy::{ResolveError, Resolver, UrlPolicy};

/// Answers every name with the addresses taken from the input.
struct InputResolver(Vec<IpAddr>);

#[async_trait::async_trait]
impl Resolver for InputResolver {
    async fn resolve(&self, _host: &str) -> Result<Vec<IpAddr>, ResolveError> {
        Ok(self.0.clone())
    }
}

/// The independent judge: true when `ip` is not a global unicast address
/// by the standard library's reading (and RFC 6598, 0/8, 240/4).
pub fn not_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => not_public_v4(v4),
        IpAddr::V6(v6) => not_public_v6(v6),
    }
}

fn not_public_v4(ip: Ipv4Addr) -> bool {
    let [a, b, ..] = ip.octets();
    ip.is_private()
        || ip.is_loopback()
        || ip.is_link_local()
        || ip.is_unspecified()
        || ip.is_broadcast()
        || ip.is_multicast()
        || a == 0
        || (a == 100 && (64..128).contains(&b))
        || a >= 240
}

fn not_public_v6(ip: Ipv6Addr) -> bool {
    let s = ip.segments();
    if let Some(v4) = ip.to_ipv4_mapped() {
        return not_public_v4(v4);
    }
    let embedded = Ipv4Addr::from((u32::from(s[6]) << 16) | u32::from(s[7]));
    // IPv4-compatible (::a.b.c.d) and NAT64 (64:ff9b::/96).
    if s[..6] == [0; 6] && !ip.is_loopback() && !ip.is_unspecified() {
        return not_public_v4(embedded);
    }
    if s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        return not_public_v4(embedded);
    }
    if s[0] == 0x2002 {
        return not_public_v4(Ipv4Addr::from((u32::from(s[1]) << 16) | u32::from(s[2])));
    }
    ip.is_loopback()
        || ip.is_unspecified()
        || ip.is_multicast()
        || s[0] & 0xfe00 == 0xfc00
        || s[0] & 0xffc0 == 0xfe80
}

fn address(family: u8, bytes: &[u8]) -> IpAddr {
    let mut b = [0u8; 16];
    b[..bytes.len().min(16)].copy_from_slice(&bytes[..bytes.len().min(16)]);
    if family.is_multiple_of(2) {
        IpAddr::V4(Ipv4Addr::new(b[0], b[1], b[2], b[3]))
    } else {
        IpAddr::V6(Ipv6Addr::from(b))
    }
}

pub fn check(data: &[u8]) {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    if mode.is_multiple_of(2) {
        free_text(rest);
    } else {
        spelled(mode / 2, rest);
    }
}

fn free_text(data: &[u8]) {
    let Some((&count, mut rest)) = data.split_first() else {
        return;
    };
    let mut answers = Vec::new();
    for _ in 0..count % 4 {
        if rest.len() < 17 {
            break;
        }
        answers.push(address(rest[0], &rest[1..17]));
        rest = &rest[17..];
    }
    let Some(url) = super::text(rest) else {
        return;
    };
    judge(url, answers);
}

/// Check `url` with a resolver answering `answers`; assert the property on
/// what is accepted. Returns whether it was accepted.
fn judge(url: &str, answers: Vec<IpAddr>) -> bool {
    let policy = UrlPolicy::public_web(Arc::new(InputResolver(answers)));
    let Ok(checked) = futures::executor::block_on(policy.check(url)) else {
        return false;
    };
    assert!(
        matches!(checked.url().scheme(), "http" | "https"),
        "accepted scheme {:?} of {url:?}",
        checked.url().scheme()
    );
    assert!(
        checked.url().username().is_empty() && checked.url().password().is_none(),
        "accepted user info in {url:?}"
    );
    assert!(
        !checked.addrs().is_empty(),
        "accepted {url:?} with no address"
    );
    for addr in checked.addrs() {
        assert!(
            !not_public(addr.ip()),
            "{url:?} accepted, connecting to non-public {}",
            addr.ip()
        );
    }
    match checked.url().host() {
        Some(url::Host::Ipv4(v4)) => assert!(!not_public_v4(v4), "{url:?} names {v4}"),
        Some(url::Host::Ipv6(v6)) => assert!(!not_public_v6(v6), "{url:?} names {v6}"),
        Some(url::Host::Domain(name)) => {
            let name = name.trim_end_matches('.').to_ascii_lowercase();
            assert!(
                name != "localhost" && !name.ends_with(".localhost"),
                "{url:?} accepted as the loopback name {name:?}"
            );
            assert!(name.contains('.'), "{url:?} accepted a single-label name");
        }
        None => panic!("{url:?} accepted without a host"),
    }
    true
}

/// Spellings of an IPv4 address that the WHATWG host parser reads as it.
fn spellings_v4(ip: Ipv4Addr) -> Vec<String> {
    let n = u32::from(ip);
    let [a, b, c, d] = ip.octets();
    let (hi, lo) = (n >> 16, n & 0xffff);
    vec![
        format!("{a}.{b}.{c}.{d}"),
        format!("{n}"),
        format!("0x{n:x}"),
        format!("0X{n:X}"),
        format!("0{n:o}"),
        format!("0{a:o}.0{b:o}.0{c:o}.0{d:o}"),
        format!("0x{a:x}.0x{b:x}.0x{c:x}.0x{d:x}"),
        format!("{a}.{b}.{}", (u32::from(c) << 8) | u32::from(d)),
        format!("{a}.{}", n & 0x00ff_ffff),
        format!("0x{a:02x}.{b}.0{c:o}.{d}"),
        format!("{a}.{b}.{c}.{d}."),
        percent_encoded_first(&format!("{a}.{b}.{c}.{d}")),
        format!("[::ffff:{a}.{b}.{c}.{d}]"),
        format!("[::ffff:{hi:x}:{lo:x}]"),
        format!("[0:0:0:0:0:FFFF:{hi:X}:{lo:X}]"),
        format!("[::{a}.{b}.{c}.{d}]"),
        format!("[64:ff9b::{a}.{b}.{c}.{d}]"),
        format!("[2002:{hi:x}:{lo:x}::1]"),
    ]
}

/// `text` with its first byte percent-encoded (hosts are percent-decoded
/// before the IPv4 parser reads them).
fn percent_encoded_first(text: &str) -> String {
    format!("%{:02X}{}", text.as_bytes()[0], &text[1..])
}

fn spelled(which: u8, data: &[u8]) {
    if data.len() >= 16 && which >= 64 {
        // An IPv6 literal, full and compressed.
        let v6 = Ipv6Addr::from(<[u8; 16]>::try_from(&data[..16]).unwrap_or([0; 16]));
        let text = if which.is_multiple_of(2) {
            format!("[{v6}]")
        } else {
            let s = v6.segments();
            format!(
                "[{:x}:{:x}:{:x}:{:x}:{:x}:{:x}:{:x}:{:x}]",
                s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7]
            )
        };
        let url = format!("http://{text}/");
        let parsed = UrlPolicy::parse(&url);
        assert!(
            matches!(parsed.as_ref().map(|u| u.host()), Ok(Some(url::Host::Ipv6(h))) if h == v6),
            "{url:?} did not parse to {v6}: {parsed:?}"
        );
        let accepted = judge(&url, Vec::new());
        assert_eq!(accepted, public_by_policy(v6.into()), "{url:?}");
        return;
    }
    if data.len() < 4 {
        return;
    }
    let v4 = Ipv4Addr::new(data[0], data[1], data[2], data[3]);
    let all = spellings_v4(v4);
    let text = &all[usize::from(which) % all.len()];
    let url = format!("http://{text}:8080/x");
    let parsed = UrlPolicy::parse(&url).unwrap_or_else(|e| panic!("{url:?} refused: {e}"));
    let accepted = judge(&url, Vec::new());
    match parsed.host() {
        Some(url::Host::Ipv4(h)) => {
            assert_eq!(h, v4, "{url:?} parsed to another address");
            assert_eq!(accepted, public_by_policy(v4.into()), "{url:?}");
        }
        Some(url::Host::Ipv6(h)) => {
            // The IPv6 forms embedding v4: refused whenever v4 is not public.
            if not_public_v4(v4) {
                assert!(!accepted, "{url:?} ({h}) embeds non-public {v4}");
            }
        }
        other => panic!("{url:?} parsed to host {other:?}, not an address"),
    }
}

/// Whether the policy's own table calls `ip` public (the judge above is a
/// floor: the policy may refuse more, such as documentation ranges).
fn public_by_policy(ip: IpAddr) -> bool {
    agent_fetch::addr::is_public(ip)
}
