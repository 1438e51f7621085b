//! S8.1: the URL policy as a table — at least 80 refused URLs covering every
//! range and spelling, at least 10 public URLs accepted (scripted DNS, no
//! connection made), redirect chains ending at refused addresses, and DNS
//! rebinding between check and connect.
#![cfg(not(target_arch = "wasm32"))] // loopback servers need tokio and axum

mod common;

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use agent_fetch::addr::RefusedRange;
use agent_fetch::{CancelToken, FetchError, PolicyViolation, ScriptedResolver, UrlPolicy};
use agent_kernel::host::ManualClock;
use axum::Router;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use common::*;

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

/// What a refused row must fail with.
#[derive(Debug, Clone, Copy)]
enum Want {
    Range(RefusedRange),
    Scheme,
    UserInfo,
    Unparsable,
    TooLong,
    Name,
    NoAddresses,
    ResolveFailed,
}

fn scripted() -> ScriptedResolver {
    ScriptedResolver::new()
        .answer("metadata.example", [ip("169.254.169.254")])
        .answer("ten.example", [ip("10.0.0.1")])
        .answer("loopback.example", [ip("127.0.0.1")])
        .answer("mapped.example", [ip("::ffff:127.0.0.1")])
        .answer("mixed.example", [ip("93.184.216.34"), ip("10.0.0.1")])
        .answer("mixed6.example", [ip("2606:2800:220:1::1"), ip("::1")])
        .answer("cgnat.example", [ip("100.64.1.1")])
        .answer("ula.example", [ip("fd00::1")])
        .answer("empty.example", [])
        .fail("nxdomain.example", "NXDOMAIN")
        // Accepted names.
        .answer("example.com", [ip("93.184.216.34")])
        .answer(
            "multi.example",
            [
                ip("93.184.216.34"),
                ip("2606:2800:220:1:248:1893:25c8:1946"),
            ],
        )
        .answer("xn--bcher-kva.example", [ip("151.101.1.1")])
}

fn refused_table() -> Vec<(String, Want)> {
    use RefusedRange as R;
    use Want::*;
    let rows: Vec<(&str, Want)> = vec![
        // Schemes and syntax.
        ("ftp://example.com/", Scheme),
        ("file:///etc/passwd", Scheme),
        ("javascript:alert(1)", Scheme),
        ("data:text/html,hi", Scheme),
        ("gopher://example.com/", Scheme),
        ("ws://example.com/", Scheme),
        ("http://user:pass@example.com/", UserInfo),
        ("http://user@example.com/", UserInfo),
        ("https://:pw@example.com/", UserInfo),
        ("not a url", Unparsable),
        ("http://", Unparsable),
        ("", Unparsable),
        ("http://[fe80::1%25eth0]/", Unparsable),
        ("http://[::1/", Unparsable),
        // Loopback, every IPv4 spelling (WHATWG).
        ("http://127.0.0.1/", Range(R::Loopback)),
        ("http://127.1/", Range(R::Loopback)),
        ("http://2130706433/", Range(R::Loopback)),
        ("http://0x7f000001/", Range(R::Loopback)),
        ("http://0x7f.0.0.1/", Range(R::Loopback)),
        ("http://0177.0.0.1/", Range(R::Loopback)),
        ("http://017700000001/", Range(R::Loopback)),
        ("http://127.0.0.1./", Range(R::Loopback)),
        ("http://0x7F.1/", Range(R::Loopback)),
        ("http://127.255.255.254/", Range(R::Loopback)),
        ("https://127.0.0.1:8443/x", Range(R::Loopback)),
        ("http://%31%32%37.0.0.1/", Range(R::Loopback)),
        ("http://127\u{3002}0\u{3002}0\u{3002}1/", Range(R::Loopback)),
        // "This network".
        ("http://0.0.0.0/", Range(R::ThisNetwork)),
        ("http://0/", Range(R::ThisNetwork)),
        ("http://0.1.2.3/", Range(R::ThisNetwork)),
        // Private.
        ("http://10.0.0.1/", Range(R::Private)),
        ("http://10.255.255.255/", Range(R::Private)),
        ("http://0xa.0.0.1/", Range(R::Private)),
        ("http://172.16.0.1/", Range(R::Private)),
        ("http://172.31.255.255/", Range(R::Private)),
        ("http://192.168.0.1/", Range(R::Private)),
        ("http://192.168.1.1:8080/admin", Range(R::Private)),
        ("http://3232235777/", Range(R::Private)),
        // Shared (CGNAT).
        ("http://100.64.0.1/", Range(R::Shared)),
        ("http://100.127.255.254/", Range(R::Shared)),
        // Link-local and cloud metadata.
        (
            "http://169.254.169.254/latest/meta-data/",
            Range(R::LinkLocal),
        ),
        ("http://169.254.0.1/", Range(R::LinkLocal)),
        ("http://0xa9fea9fe/", Range(R::LinkLocal)),
        ("http://2852039166/", Range(R::LinkLocal)),
        ("http://0251.0376.0251.0376/", Range(R::LinkLocal)),
        // Protocol assignments, documentation, relay, benchmarking.
        ("http://192.0.0.8/", Range(R::ProtocolAssignments)),
        ("http://192.0.2.1/", Range(R::Documentation)),
        ("http://198.51.100.7/", Range(R::Documentation)),
        ("http://203.0.113.9/", Range(R::Documentation)),
        ("http://192.88.99.1/", Range(R::SixToFourRelay)),
        ("http://198.18.0.1/", Range(R::Benchmarking)),
        ("http://198.19.255.1/", Range(R::Benchmarking)),
        // Multicast, reserved, broadcast.
        ("http://224.0.0.1/", Range(R::Multicast)),
        ("http://239.255.255.250/", Range(R::Multicast)),
        ("http://240.0.0.1/", Range(R::Reserved)),
        ("http://250.1.2.3/", Range(R::Reserved)),
        ("http://255.255.255.255/", Range(R::Broadcast)),
        ("http://4294967295/", Range(R::Broadcast)),
        // IPv6 and its spellings.
        ("http://[::1]/", Range(R::Loopback)),
        ("http://[0:0:0:0:0:0:0:1]/", Range(R::Loopback)),
        ("http://[0000::0001]:8080/", Range(R::Loopback)),
        ("http://[::]/", Range(R::Unspecified)),
        // Mapped and compatible.
        ("http://[::ffff:127.0.0.1]/", Range(R::Loopback)),
        ("http://[::ffff:7f00:1]/", Range(R::Loopback)),
        ("http://[::ffff:10.0.0.1]/", Range(R::Private)),
        ("http://[::ffff:169.254.169.254]/", Range(R::LinkLocal)),
        ("http://[::ffff:0:0]/", Range(R::ThisNetwork)),
        ("http://[::127.0.0.1]/", Range(R::Loopback)),
        ("http://[::10.0.0.1]/", Range(R::Private)),
        // NAT64.
        ("http://[64:ff9b::127.0.0.1]/", Range(R::Loopback)),
        ("http://[64:ff9b::a9fe:a9fe]/", Range(R::LinkLocal)),
        ("http://[64:ff9b::192.168.0.1]/", Range(R::Private)),
        ("http://[64:ff9b:1::8.8.8.8]/", Range(R::LocalNat64)),
        ("http://[64:ff9b:1::10.0.0.1]/", Range(R::LocalNat64)),
        // 6to4.
        ("http://[2002:7f00:1::]/", Range(R::Loopback)),
        ("http://[2002:a9fe:a9fe::1]/", Range(R::LinkLocal)),
        ("http://[2002:c0a8:101::1]/", Range(R::Private)),
        // Teredo: client 127.0.0.1 (inverted), then server 127.0.0.1.
        (
            "http://[2001:0:4136:e378:8000:63bf:80ff:fffe]/",
            Range(R::Loopback),
        ),
        ("http://[2001:0:7f00:1::1]/", Range(R::Loopback)),
        ("http://[2001:0:0a00:1::1]/", Range(R::Private)),
        // Other IPv6 ranges.
        ("http://[fe80::1]/", Range(R::LinkLocal)),
        ("http://[febf::1]/", Range(R::LinkLocal)),
        ("http://[fc00::1]/", Range(R::UniqueLocal)),
        ("http://[fd12:3456:789a::1]/", Range(R::UniqueLocal)),
        ("http://[fec0::1]/", Range(R::SiteLocal)),
        ("http://[ff02::1]/", Range(R::Multicast)),
        ("http://[ff05::2]/", Range(R::Multicast)),
        ("http://[2001:db8::1]/", Range(R::Documentation)),
        ("http://[3fff::1]/", Range(R::Documentation)),
        ("http://[100::1]/", Range(R::DiscardOnly)),
        ("http://[2001:2::1]/", Range(R::Benchmarking)),
        ("http://[2001:10::1]/", Range(R::Ietf6Assignments)),
        ("http://[5f00::1]/", Range(R::Srv6)),
        ("http://[4000::1]/", Range(R::Reserved)),
        ("http://[::2]/", Range(R::ThisNetwork)),
        // Names.
        ("http://localhost/", Name),
        ("http://LOCALHOST./", Name),
        ("http://app.localhost/", Name),
        ("http://printer.local/", Name),
        ("http://router.home.arpa/", Name),
        ("http://db.internal/", Name),
        ("http://intranet/", Name),
        ("http://metadata.example/", Range(R::LinkLocal)),
        ("http://ten.example/", Range(R::Private)),
        ("http://loopback.example:8080/", Range(R::Loopback)),
        ("http://mapped.example/", Range(R::Loopback)),
        ("http://mixed.example/", Range(R::Private)),
        ("http://mixed6.example/", Range(R::Loopback)),
        ("http://cgnat.example/", Range(R::Shared)),
        ("http://ula.example/", Range(R::UniqueLocal)),
        ("http://empty.example/", NoAddresses),
        ("http://nxdomain.example/", ResolveFailed),
        ("http://unscripted.example/", ResolveFailed),
    ];
    let mut rows: Vec<(String, Want)> = rows.into_iter().map(|(u, w)| (u.to_owned(), w)).collect();
    rows.push((
        format!("https://example.com/{}", "a".repeat(9000)),
        Want::TooLong,
    ));
    rows
}

fn matches(v: &PolicyViolation, want: Want) -> bool {
    match (v, want) {
        (PolicyViolation::RefusedAddress { range, .. }, Want::Range(r)) => {
            range.contains(r.describe())
        }
        (PolicyViolation::Scheme { .. }, Want::Scheme)
        | (PolicyViolation::UserInfo, Want::UserInfo)
        | (PolicyViolation::Unparsable { .. }, Want::Unparsable)
        | (PolicyViolation::NoHost, Want::Unparsable)
        | (PolicyViolation::TooLong { .. }, Want::TooLong)
        | (PolicyViolation::ForbiddenName { .. }, Want::Name)
        | (PolicyViolation::NoAddresses { .. }, Want::NoAddresses)
        | (PolicyViolation::ResolveFailed { .. }, Want::ResolveFailed) => true,
        _ => false,
    }
}

#[tokio::test]
async fn s8_1_refuses_every_range_and_spelling() {
    let policy = UrlPolicy::public_web(Arc::new(scripted()));
    let table = refused_table();
    assert!(table.len() >= 80, "the table has only {} rows", table.len());
    let mut wrong = Vec::new();
    for (url, want) in &table {
        match policy.check(url).await {
            Ok(checked) => wrong.push(format!("{url}: ACCEPTED as {:?}", checked.addrs())),
            Err(v) if matches(&v, *want) => {}
            Err(v) => wrong.push(format!("{url}: wanted {want:?}, got {v}")),
        }
    }
    assert!(
        wrong.is_empty(),
        "{} rows wrong:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
}

#[tokio::test]
async fn s8_1_refusal_messages_name_the_range_and_embedded_address() {
    let policy = UrlPolicy::public_web(Arc::new(scripted()));
    let err = policy
        .check("http://[64:ff9b::a9fe:a9fe]/")
        .await
        .unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains("NAT64") && msg.contains("169.254.169.254") && msg.contains("link-local"),
        "{msg}"
    );
    let err = policy.check("http://0x7f.1/").await.unwrap_err();
    assert!(err.to_string().contains("127.0.0.1"), "{err}");
}

#[tokio::test]
async fn s8_1_accepts_public_addresses_without_connecting() {
    let resolver = scripted();
    let policy = UrlPolicy::public_web(Arc::new(resolver.clone()));
    let rows: Vec<(&str, Vec<&str>)> = vec![
        ("http://93.184.216.34/", vec!["93.184.216.34:80"]),
        ("https://8.8.8.8/", vec!["8.8.8.8:443"]),
        ("http://1.1.1.1:8080/path?q=1", vec!["1.1.1.1:8080"]),
        ("http://172.32.0.1/", vec!["172.32.0.1:80"]),
        ("http://100.128.0.1/", vec!["100.128.0.1:80"]),
        (
            "http://[2606:4700:4700::1111]/",
            vec!["[2606:4700:4700::1111]:80"],
        ),
        ("http://[::ffff:8.8.8.8]/", vec!["[::ffff:8.8.8.8]:80"]),
        ("http://[64:ff9b::8.8.8.8]/", vec!["[64:ff9b::808:808]:80"]),
        ("http://[2002:808:808::1]/", vec!["[2002:808:808::1]:80"]),
        (
            "http://[2001:0:808:808::f7f7:f7f7]/",
            vec!["[2001:0:808:808::f7f7:f7f7]:80"],
        ),
        ("http://example.com/", vec!["93.184.216.34:80"]),
        ("https://EXAMPLE.com./a#frag", vec!["93.184.216.34:443"]),
        (
            "https://multi.example/",
            vec![
                "93.184.216.34:443",
                "[2606:2800:220:1:248:1893:25c8:1946]:443",
            ],
        ),
        ("http://bücher.example/", vec!["151.101.1.1:80"]),
    ];
    assert!(rows.len() >= 10);
    for (url, want) in rows {
        let checked = policy
            .check(url)
            .await
            .unwrap_or_else(|e| panic!("{url}: {e}"));
        let want: Vec<SocketAddr> = want.iter().map(|s| s.parse().unwrap()).collect();
        assert_eq!(checked.addrs(), want.as_slice(), "{url}");
        assert!(checked.url().fragment().is_none());
    }
    // The literals asked no DNS; the four names asked once each.
    assert_eq!(resolver.lookups(), 4);
}

// ---- redirect chains (S8.1: every hop checked before it is followed) ----

async fn redirect_to(location: String) -> impl IntoResponse {
    (StatusCode::FOUND, [(header::LOCATION, location)])
}

#[tokio::test]
async fn s8_1_redirect_chains_ending_at_refused_addresses() {
    // A counting listener on 127.0.0.1 that is NOT one of the allowed servers.
    let victim = counting_listener("127.0.0.1:0".parse().unwrap()).await;
    let vport = victim.addr.port();
    let app = Router::new()
        .route("/a", get(|| redirect_to("/b".into())))
        .route(
            "/b",
            get(move || redirect_to(format!("http://127.0.0.1:{vport}/secret"))),
        )
        .route("/meta1", get(|| redirect_to("/meta2".into())))
        .route(
            "/meta2",
            get(|| redirect_to("http://169.254.169.254/latest/meta-data/".into())),
        )
        .route(
            "/v6",
            get(move || redirect_to(format!("http://[::1]:{vport}/"))),
        )
        .route(
            "/decimal",
            get(move || redirect_to(format!("http://2130706433:{vport}/"))),
        )
        .route(
            "/name",
            get(move || redirect_to(format!("http://localhost:{vport}/"))),
        )
        .route("/scheme", get(|| redirect_to("file:///etc/passwd".into())))
        .route(
            "/userinfo",
            get(|| redirect_to("http://u:p@example.com/".into())),
        );
    let server = serve(app).await;
    let policy = test_policy(ScriptedResolver::new(), &[server]);
    let clock = ManualClock::new(0);
    let reader = reader(policy, None, &clock);
    type Check = fn(&PolicyViolation) -> bool;
    let cases: Vec<(&str, Check)> = vec![
        (
            "/a",
            |v| matches!(v, PolicyViolation::RefusedAddress { addr, .. } if *addr == ip("127.0.0.1")),
        ),
        (
            "/meta1",
            |v| matches!(v, PolicyViolation::RefusedAddress { addr, .. } if *addr == ip("169.254.169.254")),
        ),
        (
            "/v6",
            |v| matches!(v, PolicyViolation::RefusedAddress { addr, .. } if *addr == ip("::1")),
        ),
        (
            "/decimal",
            |v| matches!(v, PolicyViolation::RefusedAddress { addr, .. } if *addr == ip("127.0.0.1")),
        ),
        ("/name", |v| {
            matches!(v, PolicyViolation::ForbiddenName { .. })
        }),
        ("/scheme", |v| matches!(v, PolicyViolation::Scheme { .. })),
        ("/userinfo", |v| matches!(v, PolicyViolation::UserInfo)),
    ];
    for (path, check) in cases {
        let failure = reader
            .read(&format!("http://{server}{path}"), CancelToken::never())
            .await
            .expect_err(path);
        match &failure.reason {
            FetchError::RedirectRefused { violation, .. } if check(violation) => {}
            other => panic!("{path}: unexpected {other:?}"),
        }
    }
    assert_eq!(
        victim.count(),
        0,
        "a refused redirect target was connected to"
    );
}

// ---- DNS rebinding ----

#[tokio::test]
async fn s8_1_rebinding_cannot_redirect_the_connection() {
    let hits = Hits::default();
    let h = hits.clone();
    let app = Router::new().route(
        "/",
        get(move |headers: HeaderMap| async move {
            h.record(&headers);
            ([(header::CONTENT_TYPE, "text/plain")], "public content")
        }),
    );
    let public = serve(app).await;
    // The "private" address: the same port on 127.0.0.2, counting connections.
    let private = counting_listener(SocketAddr::new(ip("127.0.0.2"), public.port())).await;
    let host = "rebind.example";
    let url = format!("http://{host}:{}/", public.port());

    // Control: a client that asks DNS at connect time lands on the private
    // address once DNS changes its answer — the attack this test guards against.
    let naive = ScriptedResolver::new()
        .answer(host, [LOCALHOST])
        .answer(host, [ip("127.0.0.2")]);
    {
        use agent_fetch::Resolver;
        let _checked_answer = naive.resolve(host).await.unwrap();
        let connect_answer = naive.resolve(host).await.unwrap();
        let client = reqwest::Client::builder()
            .no_proxy()
            .resolve_to_addrs(host, &[SocketAddr::new(connect_answer[0], public.port())])
            .build()
            .unwrap();
        let _ = tokio::time::timeout(
            std::time::Duration::from_millis(300),
            client.get(&url).send(),
        )
        .await;
        assert_eq!(
            private.count(),
            1,
            "control: the naive client should reach the private address"
        );
    }

    // The policy's reader: the check answers public, every later lookup private.
    let resolver = ScriptedResolver::new()
        .answer(host, [LOCALHOST])
        .answer(host, [ip("127.0.0.2")]);
    let policy = test_policy(resolver.clone(), &[public]);
    let clock = ManualClock::new(0);
    let page = reader(policy.clone(), None, &clock)
        .read(&url, CancelToken::never())
        .await
        .expect("the vetted address serves the page");
    assert_eq!(page.text, "public content");
    assert_eq!(hits.get(), 1);
    assert_eq!(
        resolver.lookups(),
        1,
        "the read asked DNS exactly once, at the check"
    );
    assert_eq!(
        private.count(),
        1,
        "no new connection reached the private address"
    );
    // A second check of the same name now sees the private answer and refuses it.
    let err = policy.check(&url).await.unwrap_err();
    assert!(
        matches!(err, PolicyViolation::RefusedAddress { .. }),
        "{err}"
    );
}
