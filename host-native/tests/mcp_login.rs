//! `agentrt mcp login` end to end, natively (issue 35 parts 1 and 2): an
//! MCP server and its authorization server written here, on loopback with
//! real HTTP. The login discovers the protected resource metadata from the
//! 401's `WWW-Authenticate` (RFC 9728), the authorization server's metadata
//! (RFC 8414), registers (RFC 7591), sends the browser (this test) to the
//! authorization URL with PKCE S256, `state` and `resource` (RFC 8707),
//! and receives the answer on its loopback listener; a 403
//! `insufficient_scope` steps up to the wider scope with a second login.
//! The tokens land in the credentials file (mode 0600); a later run whose
//! access token was revoked refreshes it and calls the tool. No token
//! appears in the SQLite store, the events, the logs or the run card
//! (S5.10). `agentrt mcp logout` forgets them.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::{Form, Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

const BIN: &str = env!("CARGO_BIN_EXE_agentrt");

/// What the authorization server and the MCP server remember.
#[derive(Default)]
struct Auth {
    base: String,
    clients: Vec<String>,
    /// code → (challenge, redirect_uri, scopes)
    codes: BTreeMap<String, (String, String, Vec<String>)>,
    /// access token → scopes (revoked ones removed)
    access: BTreeMap<String, Vec<String>>,
    /// refresh token → scopes
    refresh: BTreeMap<String, Vec<String>>,
    /// Every token ever issued (to look for in stored bytes).
    issued: Vec<String>,
    authorizations: Vec<BTreeMap<String, String>>,
    refreshes: usize,
    counter: usize,
    errors: Vec<String>,
}

type Shared = Arc<Mutex<Auth>>;

impl Auth {
    fn mint(&mut self, kind: &str) -> String {
        self.counter += 1;
        let token = format!("{kind}-{}-e2e-secret-token-value", self.counter);
        self.issued.push(token.clone());
        token
    }
    fn resource(&self) -> String {
        format!("{}/mcp", self.base)
    }
}

fn challenge(base: &str, extra: &str) -> String {
    format!("Bearer resource_metadata=\"{base}/.well-known/oauth-protected-resource/mcp\"{extra}")
}

async fn mcp(State(s): State<Shared>, headers: HeaderMap, body: String) -> Response {
    let msg: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
    let method = msg["method"].as_str().unwrap_or("").to_owned();
    let (base, scopes) = {
        let a = s.lock().unwrap();
        let token = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .unwrap_or("");
        (a.base.clone(), a.access.get(token).cloned())
    };
    let Some(scopes) = scopes else {
        return (
            StatusCode::UNAUTHORIZED,
            [(
                header::WWW_AUTHENTICATE,
                challenge(&base, ", scope=\"mcp:basic\""),
            )],
            "{\"error\":\"invalid_token\"}",
        )
            .into_response();
    };
    if method.starts_with("tools/") && !scopes.iter().any(|s| s == "mcp:read") {
        return (
            StatusCode::FORBIDDEN,
            [(
                header::WWW_AUTHENTICATE,
                challenge(
                    &base,
                    ", error=\"insufficient_scope\", scope=\"mcp:basic mcp:read\"",
                ),
            )],
            "{\"error\":\"insufficient_scope\"}",
        )
            .into_response();
    }
    let id = msg["id"].clone();
    let result = match method.as_str() {
        "initialize" => json!({
            "protocolVersion": "2025-11-25",
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "guarded", "version": "1"}
        }),
        "tools/list" => json!({"tools": [{
            "name": "whoami",
            "description": "Says that the caller is logged in.",
            "inputSchema": {"type": "object"}
        }]}),
        "tools/call" => json!({"content": [{"type": "text", "text": "you are logged in"}]}),
        _ if id.is_null() => return StatusCode::ACCEPTED.into_response(),
        _ => json!({}),
    };
    (
        [(header::CONTENT_TYPE, "application/json")],
        json!({"jsonrpc": "2.0", "id": id, "result": result}).to_string(),
    )
        .into_response()
}

async fn resource_metadata(State(s): State<Shared>) -> Response {
    let a = s.lock().unwrap();
    axum::Json(json!({
        "resource": a.resource(),
        "authorization_servers": [a.base],
        "scopes_supported": ["mcp:basic", "mcp:read"]
    }))
    .into_response()
}

async fn server_metadata(State(s): State<Shared>) -> Response {
    let base = s.lock().unwrap().base.clone();
    axum::Json(json!({
        "issuer": base,
        "authorization_endpoint": format!("{base}/authorize"),
        "token_endpoint": format!("{base}/token"),
        "registration_endpoint": format!("{base}/register"),
        "response_types_supported": ["code"],
        "grant_types_supported": ["authorization_code", "refresh_token"],
        "code_challenge_methods_supported": ["S256"],
        "token_endpoint_auth_methods_supported": ["none"]
    }))
    .into_response()
}

async fn register(State(s): State<Shared>, axum::Json(body): axum::Json<Value>) -> Response {
    let mut a = s.lock().unwrap();
    let id = format!("client-{}", a.clients.len() + 1);
    a.clients.push(id.clone());
    (
        StatusCode::CREATED,
        axum::Json(json!({
            "client_id": id,
            "redirect_uris": body["redirect_uris"],
            "token_endpoint_auth_method": "none"
        })),
    )
        .into_response()
}

async fn authorize(State(s): State<Shared>, Query(q): Query<BTreeMap<String, String>>) -> Response {
    let mut a = s.lock().unwrap();
    a.authorizations.push(q.clone());
    let field = |k: &str| q.get(k).cloned().unwrap_or_default();
    if field("response_type") != "code"
        || field("code_challenge_method") != "S256"
        || field("resource") != a.resource()
        || !a.clients.contains(&field("client_id"))
        || field("state").is_empty()
    {
        a.errors.push(format!("a bad authorization request: {q:?}"));
        return StatusCode::BAD_REQUEST.into_response();
    }
    let code = a.mint("code");
    let scopes = field("scope").split(' ').map(str::to_owned).collect();
    a.codes.insert(
        code.clone(),
        (field("code_challenge"), field("redirect_uri"), scopes),
    );
    let mut target = url::Url::parse(&field("redirect_uri")).unwrap();
    target
        .query_pairs_mut()
        .append_pair("code", &code)
        .append_pair("state", &field("state"));
    (StatusCode::FOUND, [(header::LOCATION, target.to_string())]).into_response()
}

async fn token(State(s): State<Shared>, Form(f): Form<BTreeMap<String, String>>) -> Response {
    let mut a = s.lock().unwrap();
    let field = |k: &str| f.get(k).cloned().unwrap_or_default();
    if field("resource") != a.resource() {
        a.errors.push(format!(
            "a token request without the resource: {:?}",
            f.keys()
        ));
        return StatusCode::BAD_REQUEST.into_response();
    }
    let scopes = match field("grant_type").as_str() {
        "authorization_code" => {
            let Some((challenge, redirect, scopes)) = a.codes.remove(&field("code")) else {
                return (
                    StatusCode::BAD_REQUEST,
                    axum::Json(json!({"error": "invalid_grant"})),
                )
                    .into_response();
            };
            let computed =
                URL_SAFE_NO_PAD.encode(Sha256::digest(field("code_verifier").as_bytes()));
            if computed != challenge || redirect != field("redirect_uri") {
                a.errors.push("PKCE or redirect_uri mismatch".into());
                return (
                    StatusCode::BAD_REQUEST,
                    axum::Json(json!({"error": "invalid_grant"})),
                )
                    .into_response();
            }
            scopes
        }
        "refresh_token" => {
            let Some(scopes) = a.refresh.remove(&field("refresh_token")) else {
                return (
                    StatusCode::BAD_REQUEST,
                    axum::Json(json!({"error": "invalid_grant"})),
                )
                    .into_response();
            };
            a.refreshes += 1;
            scopes
        }
        other => {
            a.errors.push(format!("grant {other}"));
            return StatusCode::BAD_REQUEST.into_response();
        }
    };
    let access = a.mint("access");
    let refresh = a.mint("refresh");
    a.access.insert(access.clone(), scopes.clone());
    a.refresh.insert(refresh.clone(), scopes.clone());
    axum::Json(json!({
        "access_token": access,
        "token_type": "Bearer",
        "expires_in": 3600,
        "refresh_token": refresh,
        "scope": scopes.join(" ")
    }))
    .into_response()
}

/// Start both servers on one loopback port; returns the shared state and
/// the runtime that serves them.
fn start() -> (Shared, tokio::runtime::Runtime) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime");
    let listener = runtime
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .expect("bind");
    let base = format!(
        "http://127.0.0.1:{}",
        listener.local_addr().expect("addr").port()
    );
    let shared: Shared = Arc::new(Mutex::new(Auth {
        base,
        ..Auth::default()
    }));
    let app = Router::new()
        .route(
            "/mcp",
            post(mcp).get(|| async { StatusCode::METHOD_NOT_ALLOWED }),
        )
        .route(
            "/.well-known/oauth-protected-resource/mcp",
            get(resource_metadata),
        )
        .route(
            "/.well-known/oauth-authorization-server",
            get(server_metadata),
        )
        .route("/register", post(register))
        .route("/authorize", get(authorize))
        .route("/token", post(token))
        .with_state(shared.clone());
    runtime.spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (shared, runtime)
}

fn command(dir: &Path, args: &[&str]) -> Command {
    let mut c = Command::new(BIN);
    c.arg("--config")
        .arg(dir.join("agentrt.toml"))
        .args(args)
        .env("AGENTRT_DATA_DIR", dir.join("data"))
        .env_remove("AGENTRT_TEST_PAUSE")
        .stdin(Stdio::null());
    c
}

fn agentrt(dir: &Path, args: &[&str]) -> Output {
    command(dir, args).output().expect("agentrt")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The browser: open the authorization URL, follow its one redirect to
/// the loopback listener of `agentrt mcp login`.
fn browse(runtime: &tokio::runtime::Runtime, url: &str) {
    runtime.block_on(async {
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .expect("client");
        let answer = client.get(url).send().await.expect("authorize");
        assert_eq!(answer.status(), 302, "{url}");
        let location = answer.headers()[header::LOCATION]
            .to_str()
            .expect("location")
            .to_owned();
        assert!(location.starts_with("http://127.0.0.1:"), "{location}");
        let back = client.get(&location).send().await.expect("callback");
        assert_eq!(back.status(), 200);
    });
}

/// Run `agentrt mcp login guarded`, acting as the browser for every URL it
/// prints; returns its stdout.
fn login(dir: &Path, runtime: &tokio::runtime::Runtime) -> String {
    let mut child = command(dir, &["mcp", "login", "guarded"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("login");
    let stdout = child.stdout.take().expect("stdout");
    let mut printed = String::new();
    for line in BufReader::new(stdout).lines() {
        let line = line.expect("line");
        printed.push_str(&line);
        printed.push('\n');
        if line.starts_with("http://") {
            browse(runtime, &line);
        }
    }
    let out = child.wait_with_output().expect("wait");
    assert!(
        out.status.success(),
        "login: {printed}\n{}",
        text(&out.stderr)
    );
    printed.push_str(&text(&out.stderr));
    printed
}

fn settled(out: &Output) -> Value {
    text(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .rfind(|e| e["event"] == "settled")
        .unwrap_or_else(|| {
            panic!(
                "no settled event: {}\n{}",
                text(&out.stdout),
                text(&out.stderr)
            )
        })
}

/// Every file under `dir` but the credentials file, with its bytes.
fn stored_bytes(dir: &Path, out: &mut Vec<(String, Vec<u8>)>) {
    for entry in std::fs::read_dir(dir).expect("read_dir") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            stored_bytes(&path, out);
        } else if path.file_name().and_then(|n| n.to_str())
            != Some(agent_host_native::mcp_auth::CREDENTIALS_FILE)
        {
            out.push((
                path.display().to_string(),
                std::fs::read(&path).expect("read"),
            ));
        }
    }
}

fn contains(hay: &[u8], needle: &str) -> bool {
    hay.windows(needle.len()).any(|w| w == needle.as_bytes())
}

#[test]
fn login_with_registration_pkce_step_up_then_refresh_and_no_token_outside_the_credentials_file() {
    let (shared, runtime) = start();
    let base = shared.lock().unwrap().base.clone();
    let dir = tempfile::tempdir().expect("dir");
    std::fs::write(
        dir.path().join("agentrt.toml"),
        format!(
            "approval = \"permissive\"\n\n[[mcp]]\nid = \"guarded\"\nurl = \"{base}/mcp\"\n[mcp.auth]\nallow_loopback = true\n"
        ),
    )
    .expect("config");
    std::fs::write(
        dir.path().join("scenario.json"),
        r#"{"turns": [
  {"text": "Loading.", "tool_calls": [{"name": "load_tools", "arguments": {"names": ["whoami"]}}]},
  {"text": "Asking.", "tool_calls": [{"name": "whoami", "arguments": {}}]},
  {"text": "Done."}
]}"#,
    )
    .expect("scenario");

    // A run before any login: the server is left out, saying how to log in.
    let scenario = dir.path().join("scenario.json");
    let scenario = scenario.to_str().expect("utf8");
    let before = agentrt(
        dir.path(),
        &["--json", "run", "who am I", "--scenario", scenario],
    );
    assert!(
        text(&before.stderr).contains("agentrt mcp login guarded"),
        "{}",
        text(&before.stderr)
    );

    let mut printed = login(dir.path(), &runtime);
    {
        let a = shared.lock().unwrap();
        assert!(a.errors.is_empty(), "{:?}", a.errors);
        // The first login asked for the challenge's scope; the 403 on
        // tools/list stepped up to the wider one.
        assert_eq!(a.authorizations.len(), 2, "{:?}", a.authorizations);
        assert_eq!(a.authorizations[0]["scope"], "mcp:basic");
        assert_eq!(a.authorizations[1]["scope"], "mcp:basic mcp:read");
        assert_ne!(a.authorizations[0]["state"], a.authorizations[1]["state"]);
        assert_eq!(a.authorizations[0]["resource"], format!("{base}/mcp"));
    }
    assert!(printed.contains("Logged in to guarded"), "{printed}");

    // The credentials file: mode 0600, holding the latest tokens.
    let file = dir
        .path()
        .join("data")
        .join(agent_host_native::mcp_auth::CREDENTIALS_FILE);
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&file)
            .expect("credentials file")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600, "{mode:o}");
    }
    let latest = shared
        .lock()
        .unwrap()
        .issued
        .iter()
        .rfind(|t| t.starts_with("access"))
        .cloned();
    let stored = std::fs::read(&file).expect("read");
    assert!(contains(&stored, &latest.expect("an access token")));

    // The server revokes every access token: the next run refreshes.
    shared.lock().unwrap().access.clear();
    let out = agentrt(
        dir.path(),
        &["--json", "run", "who am I", "--scenario", scenario],
    );
    printed.push_str(&text(&out.stdout));
    printed.push_str(&text(&out.stderr));
    let card = settled(&out);
    assert_eq!(
        card["status"],
        "awaiting_approval",
        "{card}\n{}",
        text(&out.stderr)
    );
    assert_eq!(shared.lock().unwrap().refreshes, 1);
    let run = card["run"].as_str().expect("run").to_owned();
    let request = card["pending"][0]["id"]
        .as_str()
        .expect("request")
        .to_owned();
    let approved = agentrt(dir.path(), &["--json", "approve", &run, &request]);
    printed.push_str(&text(&approved.stdout));
    printed.push_str(&text(&approved.stderr));
    assert_eq!(
        settled(&approved)["status"],
        "completed",
        "{}",
        text(&approved.stderr)
    );
    let shown = agentrt(dir.path(), &["--json", "show", &run]);
    printed.push_str(&text(&shown.stdout));
    let view: Value = serde_json::from_slice(&shown.stdout).expect("show --json");
    let evidence = view["evidence"]
        .as_array()
        .and_then(|e| e.iter().find(|e| e["tool"] == "whoami").cloned())
        .unwrap_or_else(|| panic!("{view}"));
    assert_eq!(evidence["provenance"]["origin"], "mcp:guarded");

    // No token in any stored byte but the credentials file's, nor in what
    // the commands printed (events, logs, the run card).
    let mut files = Vec::new();
    stored_bytes(&dir.path().join("data"), &mut files);
    assert!(
        files
            .iter()
            .any(|(p, _)| p.contains("sqlite") || p.ends_with(".db")),
        "{:?}",
        files.iter().map(|f| &f.0).collect::<Vec<_>>()
    );
    let issued = shared.lock().unwrap().issued.clone();
    assert!(issued.len() >= 6, "{issued:?}");
    for token in &issued {
        assert!(!printed.contains(token.as_str()), "{token} was printed");
        for (path, bytes) in &files {
            assert!(!contains(bytes, token), "{token} is in {path}");
        }
    }

    // Logout forgets them; the next run cannot connect without a login.
    let out = agentrt(dir.path(), &["mcp", "logout", "guarded"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stored = std::fs::read(&file).expect("read");
    assert!(!contains(&stored, "guarded"), "{}", text(&stored));
    let after = agentrt(
        dir.path(),
        &["--json", "run", "who am I", "--scenario", scenario],
    );
    assert!(
        text(&after.stderr).contains("agentrt mcp login guarded"),
        "{}",
        text(&after.stderr)
    );
}
