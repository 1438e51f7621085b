//! `agentrt serve --allow-origin ORIGIN` and `--listen ADDR` through the
//! real binary (issue 14 item 9): each allowed origin reads a public page
//! with the token, and every check that holds for the gateway's own page
//! (token, Host, Origin, URL policy, body limit) holds for each of them; a
//! bad origin is a usage error; the default stays loopback, and listening
//! beyond it says once that TLS belongs to a reverse proxy in front.
//!
//! The "public page" is read through a Jina-compatible reader on loopback
//! started here (a reader is user configuration, so loopback is allowed for
//! it), so nothing off this machine is contacted.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

mod common;

const BIN: &str = env!("CARGO_BIN_EXE_agentrt");
const PAGE_TEXT: &str = "This domain is for use in examples.";
/// A public address literal (no DNS): the URL policy lets it through.
const PUBLIC_URL: &str = "https://93.184.216.34/";

fn private_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("dir");
    std::fs::set_permissions(
        dir.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o700),
    )
    .expect("chmod");
    dir
}

/// A Jina-compatible reader on loopback that counts its requests, and a
/// config file naming it.
fn reader(dir: &Path) -> (std::path::PathBuf, Arc<AtomicUsize>) {
    let hits = Arc::new(AtomicUsize::new(0));
    let h = hits.clone();
    let app = axum::Router::new().fallback(move || {
        h.fetch_add(1, Ordering::SeqCst);
        async {
            axum::Json(serde_json::json!({
                "code": 200, "status": 20000,
                "data": {"title": "Example Domain", "url": PUBLIC_URL, "content": PAGE_TEXT}
            }))
        }
    });
    let port = common::serve_on_loopback(app);
    let config = dir.join("agentrt.toml");
    std::fs::write(
        &config,
        format!("[reader]\nendpoint = \"http://127.0.0.1:{port}/\"\n"),
    )
    .expect("config");
    (config, hits)
}

/// `agentrt serve` running; killed when dropped.
struct Serve {
    child: Child,
    addr: SocketAddr,
    token: String,
    listening: serde_json::Value,
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn serve(data: &Path, global: &[&str], args: &[&str]) -> Serve {
    let mut child = Command::new(BIN)
        .arg("--json")
        .args(global)
        .arg("serve")
        .args(args)
        .env("AGENTRT_DATA_DIR", data)
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn agentrt serve");
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("listening line");
    let listening: serde_json::Value = serde_json::from_str(&line)
        .unwrap_or_else(|e| panic!("{e}: not the listening line: {line:?}"));
    let addr = listening["url"]
        .as_str()
        .and_then(|u| u.strip_prefix("http://"))
        .and_then(|a| a.parse().ok())
        .expect("url");
    Serve {
        child,
        addr,
        token: listening["token"].as_str().expect("token").to_owned(),
        listening,
    }
}

impl Serve {
    /// Stop the server and return what it wrote on stderr.
    fn stop(mut self) -> String {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let mut err = String::new();
        if let Some(mut e) = self.child.stderr.take() {
            e.read_to_string(&mut err).expect("stderr");
        }
        err
    }
}

struct Reply {
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
}

impl Reply {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
    fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("{e}: {}", self.body))
    }
}

/// One HTTP/1.1 request with exactly these headers, read to the end.
fn request(addr: SocketAddr, method: &str, headers: &[(&str, &str)], body: &str) -> Reply {
    let mut stream = TcpStream::connect(addr).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .expect("timeout");
    let mut head = format!("{method} /v1/fetch HTTP/1.1\r\nConnection: close\r\n");
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str(&format!("Content-Length: {}\r\n\r\n", body.len()));
    stream.write_all(head.as_bytes()).expect("write head");
    // A body over the limit may be refused before it is all sent.
    let _ = stream.write_all(body.as_bytes());
    let mut raw = Vec::new();
    let _ = stream.read_to_end(&mut raw);
    let raw = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = raw.split_once("\r\n\r\n").expect("a reply");
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|s| s.parse().ok())
        .expect("status");
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
        .collect();
    Reply {
        status,
        headers,
        body: body.to_owned(),
    }
}

fn fetch_body(url: &str) -> String {
    serde_json::json!({ "url": url }).to_string()
}

/// A bad `--allow-origin` is a usage error (exit 2, one line) and nothing listens.
#[test]
fn a_bad_allowed_origin_is_a_usage_error() {
    let dir = private_dir();
    for bad in [
        "*",
        "https://*.chat.example",
        "null",
        "https://chat.example/app",
        "ftp://chat.example",
        "chat.example",
        "https://user:pw@chat.example",
    ] {
        let out = Command::new(BIN)
            .args([
                "serve",
                "--port",
                "0",
                "--allow-origin",
                "https://ok.example",
            ])
            .args(["--allow-origin", bad])
            .env("AGENTRT_DATA_DIR", dir.path())
            .env_remove("RUST_LOG")
            .stdin(Stdio::null())
            .output()
            .expect("agentrt");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{bad}: {err}");
        assert_eq!(err.lines().count(), 1, "{bad}: {err}");
        assert!(err.starts_with("agentrt: --allow-origin"), "{bad}: {err}");
        assert!(out.stdout.is_empty(), "{bad}: nothing listens");
    }
}

/// Issue 14 item 9: two allowed origins each read a public page with the
/// token; for each of them a missing token, a foreign Host, a private
/// address and an oversized body are refused exactly as for the gateway's
/// own page; a third origin is refused (preflight included).
#[test]
fn each_allowed_origin_reads_with_the_token_and_every_check_holds() {
    let dir = private_dir();
    let (config, hits) = reader(dir.path());
    let apps = ["http://127.0.0.1:5173", "https://chat.example"];
    let server = serve(
        dir.path(),
        &["--config", config.to_str().expect("utf8")],
        &[
            "--port",
            "0",
            "--allow-origin",
            apps[0],
            "--allow-origin",
            "HTTPS://Chat.Example:443/",
        ],
    );
    assert_eq!(server.listening["allowed_origins"], serde_json::json!(apps));
    let host = server.addr.to_string();
    let auth = format!("Bearer {}", server.token);
    let body = fetch_body(PUBLIC_URL);
    let own = format!("http://{}", server.addr);
    for (i, origin) in [own.as_str(), apps[0], apps[1]].into_iter().enumerate() {
        let pre = request(
            server.addr,
            "OPTIONS",
            &[
                ("Host", &host),
                ("Origin", origin),
                ("Access-Control-Request-Method", "POST"),
            ],
            "",
        );
        assert_eq!(pre.status, 204, "{origin}");
        assert_eq!(pre.header("access-control-allow-origin"), Some(origin));

        let json = ("Content-Type", "application/json");
        let read = request(
            server.addr,
            "POST",
            &[
                ("Host", &host),
                ("Origin", origin),
                json,
                ("Authorization", &auth),
            ],
            &body,
        );
        assert_eq!(read.status, 200, "{origin}: {}", read.body);
        assert_eq!(read.header("access-control-allow-origin"), Some(origin));
        assert_eq!(read.json()["outcome"], "page", "{}", read.body);
        assert!(read.body.contains(PAGE_TEXT), "{}", read.body);
        assert_eq!(hits.load(Ordering::SeqCst), i + 1);

        let no_token = request(
            server.addr,
            "POST",
            &[("Host", &host), ("Origin", origin), json],
            &body,
        );
        assert_eq!(no_token.status, 401, "{origin}");
        assert_eq!(no_token.json()["error"], "token_required");
        let wrong_token = request(
            server.addr,
            "POST",
            &[
                ("Host", &host),
                ("Origin", origin),
                json,
                ("Authorization", "Bearer 00"),
            ],
            &body,
        );
        assert_eq!(wrong_token.status, 401, "{origin}");

        for foreign in ["chat.example", "localhost", "rebound.example:80"] {
            let rebound = request(
                server.addr,
                "POST",
                &[
                    ("Host", foreign),
                    ("Origin", origin),
                    json,
                    ("Authorization", &auth),
                ],
                &body,
            );
            assert_eq!(rebound.status, 403, "{origin} Host {foreign}");
            assert_eq!(rebound.json()["error"], "host_refused");
        }

        let private = request(
            server.addr,
            "POST",
            &[
                ("Host", &host),
                ("Origin", origin),
                json,
                ("Authorization", &auth),
            ],
            &fetch_body("http://127.0.0.1:22/"),
        );
        assert_eq!(private.status, 200, "{origin}");
        assert_eq!(private.json()["outcome"], "failure", "{}", private.body);
        assert_eq!(
            private.json()["reason"]["reason"],
            "policy",
            "{}",
            private.body
        );

        let huge = fetch_body(&format!(
            "{PUBLIC_URL}{}",
            "a".repeat(agent_host_native::serve::gateway::MAX_REQUEST_BYTES)
        ));
        let too_big = request(
            server.addr,
            "POST",
            &[
                ("Host", &host),
                ("Origin", origin),
                json,
                ("Authorization", &auth),
            ],
            &huge,
        );
        // Refused before any read: the body is over the gateway's limit.
        assert_eq!(too_big.status, 400, "{origin}");
        assert_eq!(too_big.json()["error"], "bad_request");
        assert!(
            too_big.json()["message"]
                .as_str()
                .is_some_and(|m| m.contains("length limit")),
            "{}",
            too_big.body
        );
        assert_eq!(hits.load(Ordering::SeqCst), i + 1, "nothing more was read");
    }
    for third in [
        "http://127.0.0.1:5174",
        "https://evil.example",
        "https://chat.example.evil.example",
        "http://chat.example",
    ] {
        let pre = request(
            server.addr,
            "OPTIONS",
            &[
                ("Host", &host),
                ("Origin", third),
                ("Access-Control-Request-Method", "POST"),
            ],
            "",
        );
        assert_eq!(pre.status, 403, "{third}");
        let read = request(
            server.addr,
            "POST",
            &[
                ("Host", &host),
                ("Origin", third),
                ("Content-Type", "application/json"),
                ("Authorization", &auth),
            ],
            &body,
        );
        assert_eq!(read.status, 403, "{third}");
        assert_eq!(read.json()["error"], "origin_refused");
        assert_eq!(read.header("access-control-allow-origin"), None);
    }
    assert_eq!(hits.load(Ordering::SeqCst), 3);
    let err = server.stop();
    assert!(!err.contains("TLS"), "loopback says nothing of TLS: {err}");
}

/// The default stays loopback; `--listen` takes an exact address (an
/// unspecified one is a usage error, as is giving `--port` too).
#[test]
fn listen_is_an_exact_address_and_the_default_stays_loopback() {
    let dir = private_dir();
    let server = serve(dir.path(), &[], &["--port", "0"]);
    assert!(server.addr.ip().is_loopback(), "{}", server.addr);
    drop(server);
    let server = serve(dir.path(), &[], &["--listen", "127.0.0.1:0"]);
    assert_eq!(server.addr.ip().to_string(), "127.0.0.1");
    let err = server.stop();
    assert!(!err.contains("TLS"), "{err}");
    for args in [
        &["--listen", "0.0.0.0:0"][..],
        &["--listen", "[::]:0"],
        &["--listen", "127.0.0.1"],
        &["--listen", "somewhere:80"],
        &["--listen", "127.0.0.1:0", "--port", "0"],
    ] {
        let out = Command::new(BIN)
            .arg("serve")
            .args(args)
            .env("AGENTRT_DATA_DIR", dir.path())
            .env_remove("RUST_LOG")
            .stdin(Stdio::null())
            .output()
            .expect("agentrt");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(out.stdout.is_empty(), "{args:?}");
    }
}

/// This machine's address on its default route (no packet is sent).
fn non_loopback_ip() -> std::net::IpAddr {
    let socket = std::net::UdpSocket::bind("0.0.0.0:0").expect("udp");
    socket
        .connect("198.51.100.1:9")
        .expect("a default route: this test needs a non-loopback address");
    let ip = socket.local_addr().expect("addr").ip();
    assert!(
        !ip.is_loopback() && !ip.is_unspecified(),
        "this test needs a non-loopback address, got {ip}"
    );
    ip
}

/// Beyond loopback only when given: `--listen` on this machine's own
/// address serves there, says once that TLS belongs to a reverse proxy in
/// front, and the Host check names that address (the loopback name is refused).
#[test]
fn listening_beyond_loopback_says_tls_belongs_to_a_reverse_proxy() {
    let dir = private_dir();
    let (config, hits) = reader(dir.path());
    let ip = non_loopback_ip();
    let listen = SocketAddr::new(ip, 0).to_string();
    let server = serve(
        dir.path(),
        &["--config", config.to_str().expect("utf8")],
        &[
            "--listen",
            &listen,
            "--allow-origin",
            "https://chat.example",
        ],
    );
    assert_eq!(server.addr.ip(), ip);
    let host = server.addr.to_string();
    let auth = format!("Bearer {}", server.token);
    let headers = |host: &str| {
        vec![
            ("Host".to_owned(), host.to_owned()),
            ("Origin".to_owned(), "https://chat.example".to_owned()),
            ("Content-Type".to_owned(), "application/json".to_owned()),
            ("Authorization".to_owned(), auth.clone()),
        ]
    };
    let send = |host: &str| {
        let h = headers(host);
        let h: Vec<(&str, &str)> = h.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        request(server.addr, "POST", &h, &fetch_body(PUBLIC_URL))
    };
    let read = send(&host);
    assert_eq!(read.status, 200, "{}", read.body);
    assert!(read.body.contains(PAGE_TEXT), "{}", read.body);
    let loopback_name = format!("127.0.0.1:{}", server.addr.port());
    let refused = send(&loopback_name);
    assert_eq!(refused.status, 403);
    assert_eq!(refused.json()["error"], "host_refused");
    assert_eq!(hits.load(Ordering::SeqCst), 1);
    let err = server.stop();
    assert_eq!(
        err.matches("TLS belongs to a reverse proxy in front")
            .count(),
        1,
        "{err}"
    );
}
