//! The demo page's static routes on the gateway's own origin (`agentrt
//! serve`): `www` at `/` and the wasm bundle at `/pkg/`. A request path is
//! resolved one component at a time below its directory; `.`/`..`, hidden
//! names, encoded separators and symbolic links are refused. The Host and
//! Origin checks, the framing headers and the connection limits are the
//! gateway's ([`crate::serve::gateway::router_with_page`]), applied to these routes
//! as to its own.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use axum::Json;
use axum::Router;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};

/// The environment variable naming the page directory when `--www` is not given.
pub const WWW_ENV: &str = "AGENTRT_WWW";
/// The environment variable naming the bundle directory when `--pkg` is not given.
pub const PKG_ENV: &str = "AGENTRT_PKG";

/// The largest file served (the wasm bundle is about 8 MiB).
pub const MAX_FILE_BYTES: u64 = 64 * 1024 * 1024;

/// The two directories the page is served from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PageDirs {
    /// Served at `/` (`index.html` for `/`).
    pub www: PathBuf,
    /// Served at `/pkg/` (the output of `host-browser/e2e/build.mjs`).
    pub pkg: PathBuf,
}

impl PageDirs {
    /// The directories to serve: each explicit one, else its environment
    /// variable, else the repository's `host-browser/www` / `host-browser/pkg`
    /// (below the working directory, then below the checkout this binary was
    /// built from). `None` when no page directory exists.
    pub fn resolve(www: Option<PathBuf>, pkg: Option<PathBuf>) -> Option<PageDirs> {
        let pick = |given: Option<PathBuf>, env: &str, leaf: &str| -> Option<PathBuf> {
            if let Some(p) = given.or_else(|| std::env::var_os(env).map(PathBuf::from)) {
                return Some(p);
            }
            let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
            [PathBuf::from("host-browser"), repo.join("host-browser")]
                .into_iter()
                .map(|base| base.join(leaf))
                .find(|p| p.is_dir())
        };
        let www = pick(www, WWW_ENV, "www")?;
        let pkg = pick(pkg, PKG_ENV, "pkg").unwrap_or_else(|| www.join("..").join("pkg"));
        Some(PageDirs { www, pkg })
    }
}

/// The page's routes: a fallback for every path outside the gateway's own
/// routes. Paths under `/v1/` are never files (the gateway answers them).
pub fn router(dirs: PageDirs) -> Router {
    Router::new()
        .fallback(serve_file)
        .with_state(Arc::new(dirs))
}

fn refuse(status: StatusCode, code: &str, message: &str) -> Response {
    let body = serde_json::json!({ "error": code, "message": message });
    (status, Json(body)).into_response()
}

fn not_found() -> Response {
    refuse(
        StatusCode::NOT_FOUND,
        "not_found",
        "no such file on the demo page",
    )
}

/// Why a request path cannot name a file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PathRefused {
    #[error("a percent escape in the path is malformed or not UTF-8")]
    BadEscape,
    #[error(
        "the path component {0:?} is not allowed (no `.`, `..`, hidden names, empty components or separators)"
    )]
    Component(String),
}

/// Decode `%XX` escapes of one path component.
fn percent_decode(segment: &str) -> Result<String, PathRefused> {
    let bytes = segment.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = bytes
                .get(i + 1..i + 3)
                .and_then(|h| std::str::from_utf8(h).ok())
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or(PathRefused::BadEscape)?;
            out.push(hex);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| PathRefused::BadEscape)
}

/// Split a raw (still percent-encoded) request path relative to its base
/// into checked components.
pub fn components(raw: &str) -> Result<Vec<String>, PathRefused> {
    raw.split('/')
        .map(|segment| {
            let name = percent_decode(segment)?;
            let bad =
                name.is_empty() || name.starts_with('.') || name.contains(['/', '\\', '\0', ':']);
            if bad {
                Err(PathRefused::Component(name))
            } else {
                Ok(name)
            }
        })
        .collect()
}

/// Walk `names` below `base` one at a time, refusing symbolic links; the
/// last must be a regular file.
async fn resolve_below(base: &Path, names: &[String]) -> Option<PathBuf> {
    let mut path = base.to_path_buf();
    for (i, name) in names.iter().enumerate() {
        path.push(name);
        let meta = tokio::fs::symlink_metadata(&path).await.ok()?;
        let last = i + 1 == names.len();
        let ok = if last { meta.is_file() } else { meta.is_dir() };
        if !ok || meta.file_type().is_symlink() {
            return None;
        }
    }
    Some(path)
}

fn content_type(path: &Path) -> &'static str {
    match path.extension().and_then(|e| e.to_str()) {
        Some("html") => "text/html; charset=utf-8",
        Some("js" | "mjs") => "text/javascript; charset=utf-8",
        Some("css") => "text/css; charset=utf-8",
        Some("json") => "application/json",
        Some("wasm") => "application/wasm",
        Some("svg") => "image/svg+xml",
        Some("png") => "image/png",
        Some("ts" | "txt" | "md") => "text/plain; charset=utf-8",
        _ => "application/octet-stream",
    }
}

async fn serve_file(State(dirs): State<Arc<PageDirs>>, request: Request) -> Response {
    if request.method() != Method::GET && request.method() != Method::HEAD {
        return refuse(
            StatusCode::METHOD_NOT_ALLOWED,
            "method_not_allowed",
            "the demo page is read with GET",
        );
    }
    let raw = request.uri().path();
    if raw.starts_with("/v1/") {
        return not_found();
    }
    let (base, rel) = match raw.strip_prefix("/pkg/") {
        Some(rel) => (&dirs.pkg, rel),
        None if raw == "/" => (&dirs.www, "index.html"),
        None => (&dirs.www, raw.strip_prefix('/').unwrap_or(raw)),
    };
    let names = match components(rel) {
        Ok(names) => names,
        Err(e) => return refuse(StatusCode::BAD_REQUEST, "bad_path", &e.to_string()),
    };
    let Some(path) = resolve_below(base, &names).await else {
        return not_found();
    };
    match tokio::fs::metadata(&path).await {
        Ok(m) if m.len() <= MAX_FILE_BYTES => {}
        _ => return not_found(),
    }
    let Ok(body) = tokio::fs::read(&path).await else {
        return not_found();
    };
    let mut resp = body.into_response();
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(content_type(&path)),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn components_refuse_traversal_and_hidden_names() {
        assert_eq!(components("a/b.js").unwrap(), vec!["a", "b.js"]);
        assert_eq!(components("x%20y.js").unwrap(), vec!["x y.js"]);
        for bad in [
            "..",
            "../Cargo.toml",
            "%2e%2e/Cargo.toml",
            "..%2f..%2fCargo.toml",
            "a/%2E/b",
            ".git/config",
            "a//b",
            "a%5cb",
            "a%00b",
            "a/",
            "%zz",
            "%ff",
        ] {
            assert!(components(bad).is_err(), "{bad} was accepted");
        }
    }

    #[test]
    fn content_types_follow_the_extension() {
        assert_eq!(content_type(Path::new("a.wasm")), "application/wasm");
        assert_eq!(
            content_type(Path::new("agent_host_browser.js")),
            "text/javascript; charset=utf-8"
        );
        assert_eq!(content_type(Path::new("noext")), "application/octet-stream");
    }
}
