//! `agentrt serve` serves the demo page on the gateway's own origin (issue 9,
//! S8.1 through the gateway): `host-browser/www` at `/`, the wasm bundle at
//! `/pkg/`, no path outside those directories, and the gateway's token still
//! required under `/v1/`. Each test starts the real binary on a free port
//! and talks raw HTTP to it, so traversal paths reach the server unnormalised.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_agentrt");

struct Server {
    child: Child,
    port: u16,
    token: String,
    page: String,
    _data: tempfile::TempDir,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn serve(args: &[&str]) -> Server {
    let data = tempfile::tempdir().expect("data dir");
    let mut child = Command::new(BIN)
        .args(["--json", "serve", "--port", "0"])
        .args(args)
        .env("AGENTRT_DATA_DIR", data.path())
        .env_remove("AGENTRT_WWW")
        .env_remove("AGENTRT_PKG")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn agentrt serve");
    let stdout = child.stdout.take().expect("stdout");
    let mut line = String::new();
    BufReader::new(stdout)
        .read_line(&mut line)
        .expect("listening line");
    let v: serde_json::Value = serde_json::from_str(&line).expect("json listening line");
    let url = v["url"].as_str().expect("url");
    let port = url
        .strip_prefix("http://127.0.0.1:")
        .and_then(|p| p.parse().ok())
        .expect("a 127.0.0.1 port");
    Server {
        child,
        port,
        token: v["token"].as_str().expect("token").to_owned(),
        page: v["page"].as_str().unwrap_or_default().to_owned(),
        _data: data,
    }
}

struct Reply {
    status: u16,
    headers: String,
    body: Vec<u8>,
}

impl Reply {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
    fn header(&self, name: &str) -> Option<String> {
        self.headers.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.trim()
                .eq_ignore_ascii_case(name)
                .then(|| v.trim().to_owned())
        })
    }
}

/// One raw HTTP/1.1 request; `target` is sent exactly as given.
fn request(port: u16, method: &str, target: &str, extra: &[(&str, &str)], body: &str) -> Reply {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .expect("timeout");
    let mut req = format!(
        "{method} {target} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (k, v) in extra {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    req.push_str(body);
    stream.write_all(req.as_bytes()).expect("write");
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).expect("read");
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("end of headers");
    let head = String::from_utf8_lossy(&raw[..split]).into_owned();
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .expect("status");
    Reply {
        status,
        headers: head,
        body: raw[split + 4..].to_vec(),
    }
}

fn get(port: u16, target: &str) -> Reply {
    request(port, "GET", target, &[], "")
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// A site whose every parent holds a `Cargo.toml` with a secret, so that
/// any traversal that worked would show it.
struct Site {
    _root: tempfile::TempDir,
    www: PathBuf,
    pkg: PathBuf,
}

const SECRET: &str = "SECRET-CARGO-TOML";
const GLUE: &str = "export default async function init() { /* fixture glue */ }\n";

fn site() -> Site {
    let root = tempfile::tempdir().expect("site");
    let site = root.path().join("site");
    let www = site.join("www");
    let pkg = site.join("pkg");
    std::fs::create_dir_all(www.join("scenarios")).expect("www");
    std::fs::create_dir_all(&pkg).expect("pkg");
    std::fs::write(root.path().join("Cargo.toml"), SECRET).expect("secret");
    std::fs::write(site.join("Cargo.toml"), SECRET).expect("secret");
    std::fs::write(www.join(".hidden"), SECRET).expect("hidden");
    std::fs::write(
        www.join("index.html"),
        "<!doctype html><title>fixture</title>",
    )
    .expect("index");
    std::fs::write(www.join("scenarios").join("demo.json"), "{}").expect("scenario");
    std::fs::write(pkg.join("agent_host_browser.js"), GLUE).expect("glue");
    #[cfg(unix)]
    std::os::unix::fs::symlink(site.join("Cargo.toml"), www.join("link.txt")).expect("symlink");
    Site {
        _root: root,
        www,
        pkg,
    }
}

fn dir_args(site: &Site) -> Vec<String> {
    vec![
        "--www".into(),
        site.www.display().to_string(),
        "--pkg".into(),
        site.pkg.display().to_string(),
    ]
}

#[test]
fn serve_page_serves_the_repo_page_and_the_bundle_glue() {
    // The real bundle when `build.mjs` has run; otherwise nothing is built
    // here and a fixture glue passed with --pkg stands in for it.
    let built = repo().join("host-browser/pkg/agent_host_browser.js");
    let fixture = site();
    let args: Vec<String> = if built.is_file() {
        Vec::new()
    } else {
        vec!["--pkg".into(), fixture.pkg.display().to_string()]
    };
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let server = serve(&args);
    assert_eq!(
        server.page,
        format!(
            "http://127.0.0.1:{}/#gateway-token={}",
            server.port, server.token
        )
    );

    let index = get(server.port, "/");
    assert_eq!(index.status, 200, "{}", index.text());
    assert_eq!(
        index.header("content-type").as_deref(),
        Some("text/html; charset=utf-8")
    );
    let expected =
        std::fs::read_to_string(repo().join("host-browser/www/index.html")).expect("index.html");
    assert_eq!(index.text(), expected, "/ is host-browser/www/index.html");

    let app = get(server.port, "/app.js");
    assert_eq!(app.status, 200);
    assert!(
        app.text().contains("gateway-token"),
        "the page reads the token from the fragment"
    );

    let glue = get(server.port, "/pkg/agent_host_browser.js");
    assert_eq!(glue.status, 200, "{}", glue.text());
    assert_eq!(
        glue.header("content-type").as_deref(),
        Some("text/javascript; charset=utf-8")
    );
    if built.is_file() {
        assert_eq!(glue.body, std::fs::read(&built).expect("glue"));
        let wasm = get(server.port, "/pkg/agent_host_browser_bg.wasm");
        assert_eq!(wasm.status, 200);
        assert_eq!(
            wasm.header("content-type").as_deref(),
            Some("application/wasm")
        );
        assert_eq!(&wasm.body[..4], b"\0asm");
    } else {
        assert_eq!(glue.text(), GLUE);
    }
    assert_eq!(get(server.port, "/pkg/missing.js").status, 404);
    assert_eq!(get(server.port, "/missing.html").status, 404);
}

#[test]
fn serve_page_refuses_paths_outside_its_directories() {
    let site = site();
    let args = dir_args(&site);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let server = serve(&args);
    assert_eq!(
        get(server.port, "/").text(),
        "<!doctype html><title>fixture</title>"
    );
    assert_eq!(get(server.port, "/scenarios/demo.json").status, 200);
    assert_eq!(get(server.port, "/pkg/agent_host_browser.js").text(), GLUE);

    for target in [
        "/../Cargo.toml",
        "/%2e%2e/Cargo.toml",
        "/%2e%2e/",
        "/%2E%2E%2FCargo.toml",
        "/..%2fCargo.toml",
        "/pkg/../Cargo.toml",
        "/pkg/..%2f..%2fCargo.toml",
        "/pkg/%2e%2e/%2e%2e/Cargo.toml",
        "/pkg/..%5c..%5cCargo.toml",
        "/scenarios/../../Cargo.toml",
        "/./index.html",
        "//etc/passwd",
        "/%2fetc%2fpasswd",
        "/.hidden",
        "/link.txt",
        "/index.html%00.js",
        "/%zz",
    ] {
        let reply = get(server.port, target);
        assert!(
            reply.status == 400 || reply.status == 404,
            "{target} answered {}",
            reply.status
        );
        assert!(!reply.text().contains(SECRET), "{target} leaked a file");
    }
    // Writes are not file reads.
    assert_eq!(
        request(server.port, "POST", "/index.html", &[], "").status,
        405
    );
}

#[test]
fn serve_page_leaves_the_gateway_token_on_v1() {
    let site = site();
    let args = dir_args(&site);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let server = serve(&args);
    let origin = format!("http://127.0.0.1:{}", server.port);
    let body = r#"{"url":"http://127.0.0.1:1/"}"#;
    let json = [
        ("Content-Type", "application/json"),
        ("Origin", origin.as_str()),
    ];

    // The page needs no token; the gateway does.
    assert_eq!(get(server.port, "/").status, 200);
    let refused = request(server.port, "POST", "/v1/fetch", &json, body);
    assert_eq!(refused.status, 401, "{}", refused.text());
    let bearer = format!("Bearer {}", server.token);
    let mut with_token = json.to_vec();
    with_token.push(("Authorization", bearer.as_str()));
    let wrong = request(
        server.port,
        "POST",
        "/v1/fetch",
        &[("Authorization", "Bearer 00"), json[0], json[1]],
        body,
    );
    assert_eq!(wrong.status, 401);
    // With the token the policy answers: a private address is refused (S8.1).
    let answered = request(server.port, "POST", "/v1/fetch", &with_token, body);
    assert_eq!(answered.status, 200, "{}", answered.text());
    let reply: serde_json::Value = serde_json::from_slice(&answered.body).expect("json reply");
    assert_eq!(reply["outcome"], "failure", "{reply}");
    let reason = reply["reason"].to_string();
    assert!(
        reason.contains("private") || reason.contains("refused") || reason.contains("loopback"),
        "{reply}"
    );
    // Other /v1/ paths are never files.
    assert_eq!(get(server.port, "/v1/index.html").status, 404);
}

#[test]
fn serve_refuses_a_page_directory_that_does_not_exist() {
    let data = tempfile::tempdir().expect("data");
    for flag in ["--www", "--pkg"] {
        let out = Command::new(BIN)
            .args(["serve", "--port", "0", flag, "/nonexistent/agentrt-page"])
            .env("AGENTRT_DATA_DIR", data.path())
            .stdin(Stdio::null())
            .output()
            .expect("run");
        assert_eq!(out.status.code(), Some(2), "{flag}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains(flag) && err.contains("not a directory"),
            "{err}"
        );
    }
}
