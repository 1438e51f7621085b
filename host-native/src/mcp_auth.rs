//! Authorization of MCP servers on this machine: where their tokens live,
//! which URLs a login may reach, and the browser step of `agentrt mcp
//! login`.
//!
//! - [`FileCredentialStore`]: the tokens of every server in one file of the
//!   data directory, [`CREDENTIALS_FILE`], mode 0600, written whole to a
//!   temporary file of mode 0600 and renamed over the old one. Tokens are
//!   credentials (S5.10): this file is their only home; the SQLite store,
//!   events, logs, run cards and exports never see them.
//!   `--no-store-credentials` keeps them in memory for the process only.
//! - [`PolicyGuard`]: every metadata document, registration, token and
//!   authorization URL goes through the URL policy
//!   ([`agent_fetch::UrlPolicy::public_web`]); a server whose `[mcp.auth]`
//!   says `allow_loopback = true` may also reach `localhost` and loopback
//!   addresses, and nothing else private.
//! - [`LoopbackUserAgent`]: prints the authorization URL and waits for the
//!   redirect on a listener at `http://127.0.0.1:PORT/callback` (RFC 8252
//!   §7.3); the `state` check is the flow's (`agent_mcp::auth`).

use std::collections::BTreeMap;
use std::io::Write;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_fetch::UrlPolicy;
use agent_mcp::McpError;
use agent_mcp::auth::store::StoreError;
use agent_mcp::auth::{
    AuthEnv, Callback, CredentialStore, MemoryCredentialStore, StoredCredentials, UrlGuard,
    UserAgent,
};

/// The credentials file in the data directory.
pub const CREDENTIALS_FILE: &str = "mcp-credentials.json";
/// How long a login waits for the browser to come back.
pub const LOGIN_WAIT: Duration = Duration::from_secs(10 * 60);
/// The largest request the redirect listener reads, in bytes.
const MAX_CALLBACK_BYTES: usize = 16 * 1024;

/// The tokens of MCP servers in one file of mode 0600.
#[derive(Debug)]
pub struct FileCredentialStore {
    path: PathBuf,
    /// Serialises read-modify-write within this process.
    lock: tokio::sync::Mutex<()>,
}

impl FileCredentialStore {
    /// The store at `data_dir`/[`CREDENTIALS_FILE`].
    pub fn in_data_dir(data_dir: &Path) -> FileCredentialStore {
        FileCredentialStore {
            path: data_dir.join(CREDENTIALS_FILE),
            lock: tokio::sync::Mutex::new(()),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn read(&self) -> Result<BTreeMap<String, StoredCredentials>, StoreError> {
        match std::fs::read(&self.path) {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| {
                StoreError(format!(
                    "{} is not a credentials file: {e}",
                    self.path.display()
                ))
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(BTreeMap::new()),
            Err(e) => Err(StoreError(format!("{}: {e}", self.path.display()))),
        }
    }

    fn write(&self, entries: &BTreeMap<String, StoredCredentials>) -> Result<(), StoreError> {
        use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
        let fail = |e: std::io::Error| StoreError(format!("{}: {e}", self.path.display()));
        if let Some(dir) = self.path.parent() {
            std::fs::create_dir_all(dir).map_err(fail)?;
        }
        let temporary = self.path.with_extension("json.tmp");
        let _ = std::fs::remove_file(&temporary);
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&temporary)
            .map_err(fail)?;
        // The mode at creation is masked by the umask; set it outright.
        file.set_permissions(std::fs::Permissions::from_mode(0o600))
            .map_err(fail)?;
        let bytes = serde_json::to_vec_pretty(entries)
            .map_err(|e| StoreError(format!("cannot encode credentials: {e}")))?;
        file.write_all(&bytes).map_err(fail)?;
        file.sync_all().map_err(fail)?;
        std::fs::rename(&temporary, &self.path).map_err(fail)
    }
}

#[async_trait::async_trait]
impl CredentialStore for FileCredentialStore {
    async fn load(&self, server_id: &str) -> Result<Option<StoredCredentials>, StoreError> {
        let _held = self.lock.lock().await;
        Ok(self.read()?.remove(server_id))
    }
    async fn save(
        &self,
        server_id: &str,
        credentials: &StoredCredentials,
    ) -> Result<(), StoreError> {
        let _held = self.lock.lock().await;
        let mut entries = self.read()?;
        entries.insert(server_id.to_owned(), credentials.clone());
        self.write(&entries)
    }
    async fn remove(&self, server_id: &str) -> Result<bool, StoreError> {
        let _held = self.lock.lock().await;
        let mut entries = self.read()?;
        let removed = entries.remove(server_id).is_some();
        if removed {
            self.write(&entries)?;
        }
        Ok(removed)
    }
}

/// The URL policy for authorization, with loopback for servers configured
/// to allow it.
pub struct PolicyGuard {
    policy: UrlPolicy,
}

impl PolicyGuard {
    pub fn new(policy: UrlPolicy) -> PolicyGuard {
        PolicyGuard { policy }
    }
}

/// The loopback address `url` names, if it names one (`localhost` is
/// 127.0.0.1 here, never asked of DNS).
fn loopback_target(url: &url::Url) -> Option<SocketAddr> {
    let port = url.port_or_known_default()?;
    let ip: IpAddr = match url.host()? {
        url::Host::Domain(name) if name.eq_ignore_ascii_case("localhost") => [127, 0, 0, 1].into(),
        url::Host::Ipv4(v4) => v4.into(),
        url::Host::Ipv6(v6) => v6.into(),
        url::Host::Domain(_) => return None,
    };
    ip.is_loopback().then_some(SocketAddr::new(ip, port))
}

#[async_trait::async_trait]
impl UrlGuard for PolicyGuard {
    async fn check(&self, url: &url::Url, allow_loopback: bool) -> Result<Vec<SocketAddr>, String> {
        if allow_loopback
            && (url.scheme() == "http" || url.scheme() == "https")
            && url.username().is_empty()
            && url.password().is_none()
            && let Some(addr) = loopback_target(url)
        {
            return Ok(vec![addr]);
        }
        self.policy
            .check_url(url.clone())
            .await
            .map(|checked| checked.addrs().to_vec())
            .map_err(|violation| violation.to_string())
    }
}

/// The browser step natively: print the URL, wait for the redirect on a
/// loopback listener.
pub struct LoopbackUserAgent {
    listener: Mutex<Option<tokio::net::TcpListener>>,
    out: Mutex<Box<dyn Write + Send>>,
}

impl LoopbackUserAgent {
    /// A user agent printing to `out` (the terminal).
    pub fn new(out: Box<dyn Write + Send>) -> LoopbackUserAgent {
        LoopbackUserAgent {
            listener: Mutex::new(None),
            out: Mutex::new(out),
        }
    }
}

fn ua_error(why: impl Into<String>) -> McpError {
    McpError::Auth {
        id: "login".into(),
        why: why.into(),
    }
}

#[async_trait::async_trait]
impl UserAgent for LoopbackUserAgent {
    async fn redirect_uri(&self) -> Result<String, McpError> {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0))
            .await
            .map_err(|e| ua_error(format!("no loopback listener for the login: {e}")))?;
        let port = listener
            .local_addr()
            .map_err(|e| ua_error(e.to_string()))?
            .port();
        *self.listener.lock().map_err(|_| ua_error("poisoned"))? = Some(listener);
        Ok(format!("http://127.0.0.1:{port}/callback"))
    }

    async fn authorize(&self, authorization_url: &url::Url) -> Result<Callback, McpError> {
        let listener = self
            .listener
            .lock()
            .map_err(|_| ua_error("poisoned"))?
            .take()
            .ok_or_else(|| ua_error("the redirect listener was not opened"))?;
        {
            let mut out = self.out.lock().map_err(|_| ua_error("poisoned"))?;
            let _ = writeln!(
                out,
                "Open this URL in a browser to log in, then come back here:\n{authorization_url}"
            );
            let _ = out.flush();
        }
        tokio::time::timeout(LOGIN_WAIT, wait_for_callback(listener))
            .await
            .map_err(|_| ua_error("no answer came back from the browser within 10 minutes"))?
    }
}

/// Serve the redirect listener until a `GET /callback?...` arrives; other
/// requests (a favicon) are answered 404 and waited past.
async fn wait_for_callback(listener: tokio::net::TcpListener) -> Result<Callback, McpError> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    loop {
        let (mut socket, _) = listener
            .accept()
            .await
            .map_err(|e| ua_error(format!("the redirect listener failed: {e}")))?;
        let mut request = Vec::new();
        let mut buf = [0u8; 2048];
        while !request.windows(4).any(|w| w == b"\r\n\r\n") && request.len() < MAX_CALLBACK_BYTES {
            match socket.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => request.extend_from_slice(&buf[..n]),
            }
        }
        let line = String::from_utf8_lossy(&request);
        let target = line
            .lines()
            .next()
            .and_then(|l| l.strip_prefix("GET "))
            .and_then(|l| l.split(' ').next())
            .unwrap_or("");
        let Some(query) = target.strip_prefix("/callback?") else {
            let _ = socket
                .write_all(
                    b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
                )
                .await;
            continue;
        };
        let params: Vec<(String, String)> = url::form_urlencoded::parse(query.as_bytes())
            .map(|(k, v)| (k.into_owned(), v.into_owned()))
            .collect();
        let body = "The login reached agentrt. You can close this tab.";
        let answer = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: text/plain; charset=utf-8\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        );
        let _ = socket.write_all(answer.as_bytes()).await;
        return Ok(Callback { params });
    }
}

/// The authorization environment of this machine: the credentials file in
/// `data_dir` (or memory only when `store_credentials` is false), the URL
/// policy, the OS's random bytes, and `user_agent` for a login.
pub fn auth_env(
    data_dir: &Path,
    store_credentials: bool,
    policy: UrlPolicy,
    user_agent: Option<Arc<dyn UserAgent>>,
) -> Result<AuthEnv, crate::host::HostError> {
    let store: Arc<dyn CredentialStore> = if store_credentials {
        Arc::new(FileCredentialStore::in_data_dir(data_dir))
    } else {
        Arc::new(MemoryCredentialStore::new())
    };
    Ok(AuthEnv {
        store,
        guard: Arc::new(PolicyGuard::new(policy)),
        entropy: Arc::new(crate::host::OsEntropy::probe()?),
        user_agent,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn guard() -> PolicyGuard {
        let resolver = agent_fetch::ScriptedResolver::new()
            .answer("public.example", [IpAddr::from([93, 184, 215, 14])])
            .answer("inside.example", [IpAddr::from([10, 0, 0, 7])]);
        PolicyGuard::new(UrlPolicy::public_web(Arc::new(resolver)))
    }

    fn u(s: &str) -> url::Url {
        url::Url::parse(s).expect("url")
    }

    #[tokio::test]
    async fn loopback_only_where_the_server_allows_it_and_private_never() {
        let g = guard();
        assert_eq!(
            g.check(&u("https://public.example/token"), false).await,
            Ok(vec![SocketAddr::from(([93, 184, 215, 14], 443))])
        );
        for (url, allow) in [
            ("http://127.0.0.1:8080/token", false),
            ("http://localhost:8080/token", false),
            ("http://10.0.0.7/token", true),
            ("https://inside.example/token", true),
            ("http://192.168.1.1/authorize", true),
            ("http://user:pw@127.0.0.1/token", true),
        ] {
            assert!(
                g.check(&u(url), allow).await.is_err(),
                "{url} allow={allow}"
            );
        }
        assert_eq!(
            g.check(&u("http://localhost:8080/token"), true).await,
            Ok(vec![SocketAddr::from(([127, 0, 0, 1], 8080))])
        );
        assert_eq!(
            g.check(&u("http://[::1]:9/token"), true).await,
            Ok(vec![SocketAddr::new(
                IpAddr::from(std::net::Ipv6Addr::LOCALHOST),
                9
            )])
        );
    }

    fn credentials(token: &str) -> StoredCredentials {
        StoredCredentials {
            server_url: "https://mcp.example/mcp".into(),
            resource: "https://mcp.example/mcp".into(),
            token_endpoint: "https://auth.example/token".into(),
            client_id: "c".into(),
            client_secret: None,
            token_endpoint_auth_method: "none".into(),
            access_token: token.into(),
            refresh_token: Some(format!("{token}-refresh")),
            expires_at_ms: None,
            scopes: vec![],
        }
    }

    #[tokio::test]
    async fn the_credentials_file_is_mode_0600_and_forgets_on_remove() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("dir");
        let store = FileCredentialStore::in_data_dir(dir.path());
        assert_eq!(store.load("a").await, Ok(None));
        store.save("a", &credentials("tok-a")).await.expect("save");
        store.save("b", &credentials("tok-b")).await.expect("save");
        let mode = std::fs::metadata(store.path())
            .expect("file")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600, "{mode:o}");
        assert_eq!(
            store.load("a").await.expect("load").map(|c| c.access_token),
            Some("tok-a".to_owned())
        );
        assert_eq!(store.remove("a").await, Ok(true));
        assert_eq!(store.remove("a").await, Ok(false));
        let bytes = std::fs::read_to_string(store.path()).expect("read");
        assert!(
            !bytes.contains("tok-a") && bytes.contains("tok-b"),
            "{bytes}"
        );
        // A file that is not a credentials file is an error, not a reset.
        std::fs::write(store.path(), b"{not json").expect("write");
        assert!(store.load("b").await.is_err());
    }

    #[tokio::test]
    async fn without_storing_nothing_reaches_the_data_directory() {
        let dir = tempfile::tempdir().expect("dir");
        let env = auth_env(
            dir.path(),
            false,
            UrlPolicy::public_web(Arc::new(agent_fetch::ScriptedResolver::new())),
            None,
        )
        .expect("env");
        env.store
            .save("a", &credentials("tok-a"))
            .await
            .expect("save");
        assert!(env.store.load("a").await.expect("load").is_some());
        assert!(!dir.path().join(CREDENTIALS_FILE).exists());
    }
}
