//! Issue 12, item 3: plugin path placeholders cannot climb out of their
//! function. A real loopback server records every request line it receives;
//! each encoding of `..`, `.` and of a separator is `invalid_arguments` with
//! nothing sent, legitimate values arrive intact at exactly their path, and
//! a property test over a hostile alphabet shows every accepted value lands
//! below the base path plus the function's fixed prefix (S5.3: arguments are
//! checked right before dispatch; S6.2: approval is bound to the target
//! scope, which a placeholder must not widen).

#![cfg(not(target_arch = "wasm32"))]

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};

use proptest::prelude::*;
use serde_json::{Value, json};

use agent_capabilities::{ApprovalMode, EffectClass, Idempotency, Uses};
use agent_kernel::protocol::ToolResult;
use agent_tools::codes;
use agent_tools::plugin::{HttpMethod, PluginAuth, PluginManifest, SecretHandle};
use agent_tools::plugin_path::PathTemplate;
use agent_tools::registry::Registry;
use agent_tools::{ToolsOptions, spawn_plugin, spawn_tools};
use common::*;

// ----------------------------------------------------------------------------
// A server that records request lines
// ----------------------------------------------------------------------------

/// A plain HTTP/1.1 server on 127.0.0.1 recording the request line (`GET
/// /target HTTP/1.1`) and headers of everything it receives, answering 200
/// `{"ok":true}` and closing each connection. No framework sits between the
/// wire and the record, so nothing is normalised before the test sees it.
struct LineServer {
    origin: String,
    lines: Arc<Mutex<Vec<String>>>,
    headers: Arc<Mutex<Vec<Vec<String>>>>,
}

impl LineServer {
    fn start() -> LineServer {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let origin = format!("http://{}", listener.local_addr().unwrap());
        let lines: Arc<Mutex<Vec<String>>> = Arc::default();
        let headers: Arc<Mutex<Vec<Vec<String>>>> = Arc::default();
        let (l, h) = (lines.clone(), headers.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                let (l, h) = (l.clone(), h.clone());
                std::thread::spawn(move || {
                    let _ = serve_one(stream, &l, &h);
                });
            }
        });
        LineServer {
            origin,
            lines,
            headers,
        }
    }

    /// Every request line received so far, in order.
    fn lines(&self) -> Vec<String> {
        self.lines.lock().unwrap().clone()
    }

    /// The request targets (path and query) received so far.
    fn targets(&self) -> Vec<String> {
        self.lines()
            .iter()
            .map(|l| l.split(' ').nth(1).unwrap_or("").to_owned())
            .collect()
    }
}

fn serve_one(
    stream: std::net::TcpStream,
    lines: &Mutex<Vec<String>>,
    headers: &Mutex<Vec<Vec<String>>>,
) -> std::io::Result<()> {
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut line = String::new();
    reader.read_line(&mut line)?;
    let mut seen = Vec::new();
    let mut length = 0usize;
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h)? == 0 || h == "\r\n" {
            break;
        }
        let h = h.trim_end().to_owned();
        if let Some((name, value)) = h.split_once(':')
            && name.eq_ignore_ascii_case("content-length")
        {
            length = value.trim().parse().unwrap_or(0);
        }
        seen.push(h);
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body)?;
    lines.lock().unwrap().push(line.trim_end().to_owned());
    headers.lock().unwrap().push(seen);
    let answer = r#"{"ok":true}"#;
    let mut stream = stream;
    write!(
        stream,
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{answer}",
        answer.len()
    )?;
    stream.flush()
}

// ----------------------------------------------------------------------------
// The plugin under attack
// ----------------------------------------------------------------------------

const SECRET: &str = "MARKER-plugin-path-7f3a";

fn id_schema(extra: Value) -> Value {
    let mut properties = json!({"id": {"type": ["string", "number"]}});
    if let (Some(p), Some(e)) = (properties.as_object_mut(), extra.as_object()) {
        p.extend(e.clone());
    }
    json!({"type": "object", "properties": properties, "required": ["id"], "additionalProperties": false})
}

/// `base_url` = `{origin}/api/v1/`, a read `GET /items/{id}` (with an
/// optional query argument `q`) and an idempotent write `PUT /items/{id}`,
/// with a credential bound to the server's origin.
fn items_plugin(server: &LineServer) -> (PluginManifest, Arc<TestSecrets>) {
    let read = function(
        "shop_get_item",
        "Get an item",
        HttpMethod::Get,
        "/items/{id}",
        id_schema(json!({"q": {"type": "string"}})),
        effects(&[EffectClass::ReadNetwork]),
        Idempotency::Idempotent,
    );
    let write = function(
        "shop_put_item",
        "Replace an item",
        HttpMethod::Put,
        "/items/{id}",
        id_schema(json!({"name": {"type": "string"}})),
        effects(&[EffectClass::WriteExternal]),
        Idempotency::Idempotent,
    );
    let mut m = manifest(
        "shop",
        &format!("{}/api/v1/", server.origin),
        vec![read, write],
    );
    m.auth = Some(PluginAuth {
        header: "Authorization".into(),
        secret: SecretHandle("shop-key".into()),
        prefix: "Bearer ".into(),
    });
    (
        trusted(m),
        TestSecrets::with("shop-key", SECRET, &server.origin),
    )
}

async fn plugin_run(server: &LineServer, run_id: &str) -> Run {
    let (m, secrets) = items_plugin(server);
    let regs = spawn_plugin(executor(), clock(), &m, secrets).unwrap();
    let names: Vec<String> = regs.iter().map(|r| r.definition.name.clone()).collect();
    let mut registry = Registry::new();
    registry.register_all(regs).unwrap();
    let tools = spawn_tools(executor(), clock(), registry, ToolsOptions::default());
    let mut run = Run::new(tools, run_id);
    run.config.approval = ApprovalMode::Permissive;
    let r = run
        .call("load", "load_tools", &json!({ "names": names }).to_string())
        .await;
    assert!(r.is_success(), "{}", text(&r));
    run.schemas().await;
    run
}

/// Prepare attempt `attempt` of call `call_id`, approve once, dispatch.
async fn call_attempt(
    run: &Run,
    call_id: &str,
    tool: &str,
    args: &Value,
    attempt: u32,
) -> ToolResult {
    match run
        .prepare_attempt(call_id, tool, &args.to_string(), attempt)
        .await
    {
        Ok(p) => {
            let cap = run.mint(&p, Uses::Once);
            run.dispatch(&p, cap).await
        }
        Err(e) => e,
    }
}

/// Each form of `.`, `..` and of a separator, by name.
const ESCAPES: &[(&str, &str)] = &[
    ("dot", "."),
    ("dot dot", ".."),
    ("three dots", "..."),
    ("dot dot with spaces", " .. "),
    ("%2E", "%2E"),
    ("%2e", "%2e"),
    ("%2E%2E", "%2E%2E"),
    ("%2e%2e", "%2e%2e"),
    ("mixed .%2E", ".%2E"),
    ("mixed %2E.", "%2E."),
    ("mixed %2e%2E", "%2e%2E"),
    ("double %252E", "%252E"),
    ("double %252E%252E", "%252E%252E"),
    ("double %252e.", "%252e."),
    ("triple %25252E%25252E", "%25252E%25252E"),
    ("fullwidth dot dot", "\u{FF0E}\u{FF0E}"),
    ("fullwidth dot", "\u{FF0E}"),
    ("fullwidth dot encoded", "%EF%BC%8E%EF%BC%8E"),
    ("one-dot leader", "\u{2024}\u{2024}"),
    ("two-dot leader", "\u{2025}"),
    ("small full stop", "\u{FE52}\u{FE52}"),
    ("ideographic full stop", "\u{3002}\u{3002}"),
    ("overlong UTF-8 dot", "%C0%AE%C0%AE"),
    ("..;", "..;"),
    ("..;param", "..;jsessionid=x"),
    ("..%3B", "..%3B"),
    ("slash", "/"),
    ("dot dot slash", "../admin"),
    ("slash inside", "a/b"),
    ("%2F", "%2F"),
    ("%2f", "%2f"),
    ("double %252F", "%252F"),
    ("..%2F", "..%2Fadmin"),
    ("%2E%2E%2F", "%2E%2E%2Fadmin"),
    ("backslash", "\\"),
    ("dot dot backslash", "..\\admin"),
    ("%5C", "%5C"),
    ("%5c", "%5c"),
    ("double %255C", "%255C"),
    ("fullwidth slash", "\u{FF0F}"),
    ("fullwidth backslash", "\u{FF3C}"),
    ("division slash", "\u{2215}"),
    ("fraction slash", "\u{2044}"),
    ("NUL", "\0"),
    ("%00", "%00"),
    ("dot dot %00", "..%00"),
    ("double %2500", "%2500"),
    ("CR LF", "%0D%0A"),
    ("newline", "a\nb"),
    ("empty", ""),
];

// ----------------------------------------------------------------------------
// Tests
// ----------------------------------------------------------------------------

#[tokio::test]
async fn each_encoding_of_dots_and_separators_is_refused_and_nothing_is_sent() {
    let server = LineServer::start();
    let run = plugin_run(&server, "run-escape").await;
    for (n, (name, value)) in ESCAPES.iter().enumerate() {
        let call_id = format!("read-{n}");
        let r = call_attempt(&run, &call_id, "shop_get_item", &json!({ "id": value }), 1).await;
        assert_eq!(code(&r), codes::INVALID_ARGUMENTS, "{name}: {}", text(&r));
        assert!(text(&r).contains("\"id\""), "{name}: {}", text(&r));
        // A person-chosen retry of the same call, and the write function.
        let r = call_attempt(&run, &call_id, "shop_get_item", &json!({ "id": value }), 2).await;
        assert_eq!(code(&r), codes::INVALID_ARGUMENTS, "{name} (retry)");
        let args = json!({ "id": value, "name": "x" });
        let r = call_attempt(&run, &format!("write-{n}"), "shop_put_item", &args, 1).await;
        assert_eq!(code(&r), codes::INVALID_ARGUMENTS, "{name} (write)");
        let r = call_attempt(&run, &format!("write-{n}"), "shop_put_item", &args, 2).await;
        assert_eq!(code(&r), codes::INVALID_ARGUMENTS, "{name} (write retry)");
        assert_eq!(
            server.lines(),
            Vec::<String>::new(),
            "{name}: the server saw a request"
        );
    }
    // The server is up and reachable: a legitimate value arrives, alone.
    let r = call_attempt(&run, "ok", "shop_get_item", &json!({ "id": "42" }), 1).await;
    assert!(r.is_success(), "{}", text(&r));
    assert_eq!(
        server.lines(),
        vec!["GET /api/v1/items/42 HTTP/1.1".to_owned()]
    );
    let auth = server.headers.lock().unwrap()[0]
        .iter()
        .any(|h| h.eq_ignore_ascii_case(&format!("authorization: Bearer {SECRET}")));
    assert!(
        auth,
        "the credential went with the one request that was sent"
    );
}

#[tokio::test]
async fn legitimate_values_arrive_intact_at_exactly_their_path() {
    let server = LineServer::start();
    let run = plugin_run(&server, "run-legit").await;
    let cases: &[(Value, &str)] = &[
        (json!({"id": "42"}), "/api/v1/items/42"),
        (json!({"id": 7}), "/api/v1/items/7"),
        (json!({"id": "a b"}), "/api/v1/items/a%20b"),
        (json!({"id": "100%"}), "/api/v1/items/100%25"),
        (json!({"id": "%zz"}), "/api/v1/items/%25zz"),
        (
            json!({"id": "Zoë 東京"}),
            "/api/v1/items/Zo%C3%AB%20%E6%9D%B1%E4%BA%AC",
        ),
        (json!({"id": "a?b#c"}), "/api/v1/items/a%3Fb%23c"),
        (json!({"id": "a;b"}), "/api/v1/items/a%3Bb"),
        (json!({"id": ".hidden"}), "/api/v1/items/.hidden"),
        (json!({"id": "v1.2"}), "/api/v1/items/v1.2"),
        // Query arguments stay inside their one parameter.
        (
            json!({"id": "1", "q": "a&b=c#d ../%2F"}),
            "/api/v1/items/1?q=a%26b%3Dc%23d+..%2F%252F",
        ),
    ];
    for (n, (args, target)) in cases.iter().enumerate() {
        let r = call_attempt(&run, &format!("c{n}"), "shop_get_item", args, 1).await;
        assert!(r.is_success(), "{args}: {}", text(&r));
        assert_eq!(
            server.lines()[n],
            format!("GET {target} HTTP/1.1"),
            "{args}"
        );
    }
    let r = call_attempt(
        &run,
        "w",
        "shop_put_item",
        &json!({"id": "a b", "name": "x"}),
        1,
    )
    .await;
    assert!(r.is_success(), "{}", text(&r));
    assert_eq!(
        server.lines().last().unwrap(),
        "PUT /api/v1/items/a%20b HTTP/1.1"
    );
    for target in server.targets() {
        assert!(target.starts_with("/api/v1/items/"), "{target}");
    }
}

// ----------------------------------------------------------------------------
// Properties
// ----------------------------------------------------------------------------

/// Characters that build escapes: dots, separators, `%` and hex digits of
/// `%2E`, `%2F`, `%5C`, `%25`, `%3B`, `%00`, a fullwidth dot and plain text.
const ALPHABET: &[char] = &[
    '.', '.', '/', '%', '%', '2', '5', 'E', 'e', 'F', 'f', 'C', 'c', '\\', ';', '3', 'B', '0', 'a',
    ' ', '\u{FF0E}',
];

fn hostile() -> impl Strategy<Value = String> {
    proptest::collection::vec(proptest::sample::select(ALPHABET), 0..10)
        .prop_map(|cs| cs.into_iter().collect())
}

/// Percent-decode once (an oracle independent of the module under test:
/// lossy, ASCII hex digits of either case).
fn decode_once(s: &str) -> String {
    let b = s.as_bytes();
    let hex = |j: usize| b.get(j).and_then(|c| (*c as char).to_digit(16));
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%'
            && let (Some(h), Some(l)) = (hex(i + 1), hex(i + 2))
        {
            out.push((h * 16 + l) as u8);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Percent-decode until nothing changes.
fn decode_fully(s: &str) -> String {
    let mut cur = s.to_owned();
    loop {
        let next = decode_once(&cur);
        if next == cur {
            return cur;
        }
        cur = next;
    }
}

/// The oracle: after `url`'s own normalisation, the path is the three
/// prefix segments and one more, which fully decoded is no dot segment and
/// holds no separator.
fn lands_inside(target_path: &str) -> Result<(), String> {
    let url =
        url::Url::parse(&format!("http://h.example{target_path}")).map_err(|e| e.to_string())?;
    let segments: Vec<&str> = url.path_segments().unwrap().collect();
    if segments.len() != 4 || segments[..3] != ["api", "v1", "items"] {
        return Err(format!("{target_path} is not /api/v1/items/<one segment>"));
    }
    let last = decode_fully(segments[3]);
    if last.is_empty() || last == "." || last == ".." || last.contains(['/', '\\']) {
        return Err(format!("{target_path}: last segment decodes to {last:?}"));
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 4096, ..ProptestConfig::default() })]

    /// Every accepted value yields a URL whose normalised path is inside the
    /// function, which the second check also admits, and the value comes
    /// back from one percent-decoding of its segment.
    #[test]
    fn accepted_values_stay_below_the_function_prefix(value in hostile()) {
        let base = url::Url::parse("http://h.example/api/v1/").unwrap();
        let template = PathTemplate::new(&base, "/items/{id}").unwrap();
        let args = json!({ "id": value });
        if let Ok(url) = template.fill(args.as_object().unwrap()) {
            prop_assert!(lands_inside(url.path()).is_ok(), "{:?}: {:?}", value, lands_inside(url.path()));
            let segment = url.path_segments().unwrap().nth(3).unwrap().to_owned();
            prop_assert_eq!(decode_once(&segment), value.clone());
            prop_assert!(template.admit(url).is_ok(), "check 2 refused what check 1 accepted: {:?}", value);
        }
    }
}

/// The same property end to end: through the tools actor and the plugin
/// actor to the loopback server, each value is either refused with nothing
/// sent or arrives below `/api/v1/items/`.
#[test]
fn hostile_values_through_the_server_never_leave_the_function() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let server = LineServer::start();
    let run = rt.block_on(plugin_run(&server, "run-prop"));
    let counter = std::sync::atomic::AtomicUsize::new(0);
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig {
        cases: 192,
        ..ProptestConfig::default()
    });
    let outcomes = Mutex::new((0usize, 0usize));
    runner
        .run(&hostile(), |value| {
            let n = counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let before = server.lines().len();
            let r = rt.block_on(call_attempt(
                &run,
                &format!("p{n}"),
                "shop_get_item",
                &json!({ "id": value }),
                1,
            ));
            let lines = server.lines();
            match &r {
                ToolResult::Success(_) => {
                    prop_assert_eq!(lines.len(), before + 1);
                    let target = lines[before].split(' ').nth(1).unwrap_or("").to_owned();
                    prop_assert!(
                        lands_inside(&target).is_ok(),
                        "{:?}: {:?}",
                        value,
                        lands_inside(&target)
                    );
                    outcomes.lock().unwrap().0 += 1;
                }
                ToolResult::Error(e) => {
                    prop_assert_eq!(
                        e.code.as_str(),
                        codes::INVALID_ARGUMENTS,
                        "{:?}: {}",
                        value,
                        e.message
                    );
                    prop_assert_eq!(lines.len(), before, "{:?} was refused but sent", value);
                    outcomes.lock().unwrap().1 += 1;
                }
            }
            Ok(())
        })
        .unwrap();
    let (accepted, refused) = *outcomes.lock().unwrap();
    // The alphabet must exercise both sides, or the property tests nothing.
    assert!(
        accepted > 10 && refused > 10,
        "accepted {accepted}, refused {refused}"
    );
}
