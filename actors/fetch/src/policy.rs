//! The URL policy for model-supplied URLs (S8.1): WHATWG parsing, http(s)
//! only, no user info, and a host that resolves only to global unicast
//! addresses. The checked addresses are the only ones a read may connect to.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};
use url::{Host, Url};

use crate::addr::{self, AddressRefusal};

/// The longest URL the policy accepts, in bytes.
pub const MAX_URL_LEN: usize = 8 * 1024;

/// Names that never denote a public host, whatever DNS says (RFC 6761, 6762,
/// 8375, 7686, and the common internal suffix).
const FORBIDDEN_SUFFIXES: &[&str] = &[
    "localhost",
    "local",
    "home.arpa",
    "internal",
    "onion",
    "invalid",
];

/// Why a URL may not be read. Messages say what was wrong and what to do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[non_exhaustive]
pub enum PolicyViolation {
    #[error("not a valid URL ({reason}); give an absolute http:// or https:// URL")]
    Unparsable { reason: String },
    #[error("URL is {len} bytes long; at most {max} are accepted")]
    TooLong { len: usize, max: usize },
    #[error("scheme {scheme:?} is not allowed; only http and https URLs can be read")]
    Scheme { scheme: String },
    #[error("URLs with a user name or password are refused; remove the user info")]
    UserInfo,
    #[error("URL has no host; give an absolute URL with a public host name")]
    NoHost,
    #[error("host {host:?} is {why}; only public host names can be read")]
    ForbiddenName { host: String, why: String },
    #[error(
        "host {host:?} resolves to {addr}, which is {range}; only public addresses can be read"
    )]
    RefusedAddress {
        host: String,
        addr: IpAddr,
        range: String,
    },
    #[error("host {host:?} has no addresses; the read is refused (fail closed)")]
    NoAddresses { host: String },
    #[error("host {host:?} could not be resolved ({detail}); the read is refused (fail closed)")]
    ResolveFailed { host: String, detail: String },
}

/// A DNS lookup failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ResolveError(pub String);

/// Name resolution for the policy. Natively [`SystemResolver`]; tests script
/// answers with [`ScriptedResolver`]. The policy, not the resolver, decides
/// which answers are acceptable, so any resolver is safe to plug in.
#[cfg_attr(target_arch = "wasm32", async_trait::async_trait(?Send))]
#[cfg_attr(not(target_arch = "wasm32"), async_trait::async_trait)]
pub trait Resolver: agent_kernel::MaybeSend + agent_kernel::MaybeSync {
    /// Every address of `host` (a domain name, never an IP literal).
    async fn resolve(&self, host: &str) -> Result<Vec<IpAddr>, ResolveError>;
}

/// Answers scripted per host: each lookup takes the next answer of that host
/// (the last one repeats). Counts lookups, so tests can prove that a read
/// asked DNS once and connected to what it checked.
#[derive(Debug, Clone, Default)]
pub struct ScriptedResolver {
    inner: Arc<Mutex<ScriptState>>,
}

#[derive(Debug, Default)]
struct ScriptState {
    answers: HashMap<String, VecDeque<Result<Vec<IpAddr>, String>>>,
    lookups: usize,
}

impl ScriptedResolver {
    pub fn new() -> Self {
        Self::default()
    }

    /// Queue `addrs` as the next answer for `host` (lowercase, no trailing dot).
    pub fn answer(self, host: &str, addrs: impl IntoIterator<Item = IpAddr>) -> Self {
        if let Ok(mut st) = self.inner.lock() {
            st.answers
                .entry(host.to_owned())
                .or_default()
                .push_back(Ok(addrs.into_iter().collect()));
        }
        self
    }

    /// Queue a lookup failure for `host`.
    pub fn fail(self, host: &str, detail: &str) -> Self {
        if let Ok(mut st) = self.inner.lock() {
            st.answers
                .entry(host.to_owned())
                .or_default()
                .push_back(Err(detail.to_owned()));
        }
        self
    }

    /// How many lookups were made so far.
    pub fn lookups(&self) -> usize {
        self.inner.lock().map(|s| s.lookups).unwrap_or(0)
    }
}

#[cfg_attr(target_arch = "wasm32", async_trait::async_trait(?Send))]
#[cfg_attr(not(target_arch = "wasm32"), async_trait::async_trait)]
impl Resolver for ScriptedResolver {
    async fn resolve(&self, host: &str) -> Result<Vec<IpAddr>, ResolveError> {
        let mut st = self
            .inner
            .lock()
            .map_err(|_| ResolveError("scripted resolver poisoned".into()))?;
        st.lookups += 1;
        let Some(queue) = st.answers.get_mut(host) else {
            return Err(ResolveError(format!("no scripted answer for {host}")));
        };
        let answer = if queue.len() > 1 {
            queue.pop_front()
        } else {
            queue.front().cloned()
        };
        match answer {
            Some(Ok(addrs)) => Ok(addrs),
            Some(Err(e)) => Err(ResolveError(e)),
            None => Err(ResolveError(format!("no scripted answer for {host}"))),
        }
    }
}

/// The operating system's resolver (`getaddrinfo`), run on a blocking thread
/// of the host's executor. Native only.
#[cfg(not(target_arch = "wasm32"))]
#[derive(Clone)]
pub struct SystemResolver {
    executor: Arc<dyn agent_kernel::host::Executor>,
}

#[cfg(not(target_arch = "wasm32"))]
impl SystemResolver {
    pub fn new(executor: Arc<dyn agent_kernel::host::Executor>) -> Self {
        Self { executor }
    }
}

#[cfg(not(target_arch = "wasm32"))]
#[async_trait::async_trait]
impl Resolver for SystemResolver {
    async fn resolve(&self, host: &str) -> Result<Vec<IpAddr>, ResolveError> {
        use std::net::ToSocketAddrs;
        let name = host.to_owned();
        let answer = agent_kernel::actor::run_blocking(self.executor.as_ref(), move || {
            (name.as_str(), 0u16)
                .to_socket_addrs()
                .map(|it| it.map(|sa| sa.ip()).collect::<Vec<_>>())
                .map_err(|e| e.to_string())
        })
        .await
        .map_err(|e| ResolveError(e.to_string()))?;
        answer.map_err(ResolveError)
    }
}

/// A URL that passed the policy, with the only addresses a read may connect to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckedUrl {
    url: Url,
    host: String,
    addrs: Vec<SocketAddr>,
    ip_literal: bool,
}

impl CheckedUrl {
    /// The normalised URL (WHATWG serialisation, fragment removed).
    pub fn url(&self) -> &Url {
        &self.url
    }
    /// The host as it appears in the normalised URL (IPv6 without brackets).
    pub fn host(&self) -> &str {
        &self.host
    }
    /// The vetted socket addresses (the URL's port on each).
    pub fn addrs(&self) -> &[SocketAddr] {
        &self.addrs
    }
    /// True when the host was an IP literal (no DNS was asked).
    pub fn is_ip_literal(&self) -> bool {
        self.ip_literal
    }
    /// `scheme://host[:port]`, the unit across which credentials are dropped.
    pub fn origin(&self) -> String {
        self.url.origin().ascii_serialization()
    }
}

/// The URL policy. [`UrlPolicy::public_web`] is the only policy reachable from
/// configuration or model input; tests may widen it only through
/// `testing::TestLoopback` (compiled only for tests).
#[derive(Clone)]
pub struct UrlPolicy {
    resolver: Arc<dyn Resolver>,
    /// Exact socket addresses the tests' own servers listen on.
    test_servers: BTreeSet<SocketAddr>,
}

impl std::fmt::Debug for UrlPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UrlPolicy")
            .field("test_servers", &self.test_servers)
            .finish()
    }
}

impl UrlPolicy {
    /// The public-web policy with the given resolver: http(s), no user info,
    /// global unicast addresses only, fail closed.
    pub fn public_web(resolver: Arc<dyn Resolver>) -> Self {
        Self {
            resolver,
            test_servers: BTreeSet::new(),
        }
    }

    /// Also accept exactly these socket addresses (the tests' own loopback
    /// servers). Needs a [`crate::testing::TestLoopback`], which only test
    /// builds can make: nothing in configuration or model input reaches it.
    #[cfg(any(test, feature = "test-loopback"))]
    pub fn allowing_test_servers(
        mut self,
        _marker: crate::testing::TestLoopback,
        servers: impl IntoIterator<Item = SocketAddr>,
    ) -> Self {
        self.test_servers.extend(servers);
        self
    }

    /// Parse `input` as browsers do and check it (syntax only, no DNS): the
    /// checks shared by [`UrlPolicy::check`] and by hosts that cannot resolve.
    pub fn parse(input: &str) -> Result<Url, PolicyViolation> {
        if input.len() > MAX_URL_LEN {
            return Err(PolicyViolation::TooLong {
                len: input.len(),
                max: MAX_URL_LEN,
            });
        }
        let mut url = Url::parse(input.trim()).map_err(|e| PolicyViolation::Unparsable {
            reason: e.to_string(),
        })?;
        if url.scheme() != "http" && url.scheme() != "https" {
            return Err(PolicyViolation::Scheme {
                scheme: url.scheme().to_owned(),
            });
        }
        if !url.username().is_empty() || url.password().is_some() {
            return Err(PolicyViolation::UserInfo);
        }
        if url.host().is_none() {
            return Err(PolicyViolation::NoHost);
        }
        url.set_fragment(None);
        Ok(url)
    }

    /// Check a URL given as text: parse it (WHATWG) and check the result.
    pub async fn check(&self, input: &str) -> Result<CheckedUrl, PolicyViolation> {
        let url = Self::parse(input)?;
        self.check_url(url).await
    }

    /// Check an already parsed URL (a redirect target): every rule again.
    pub async fn check_url(&self, url: Url) -> Result<CheckedUrl, PolicyViolation> {
        let url = Self::parse(url.as_str())?;
        let port = url.port_or_known_default().unwrap_or(80);
        let (host, ips, ip_literal) = match url.host() {
            Some(Host::Ipv4(v4)) => (v4.to_string(), vec![IpAddr::V4(v4)], true),
            Some(Host::Ipv6(v6)) => (v6.to_string(), vec![IpAddr::V6(v6)], true),
            Some(Host::Domain(name)) => {
                let name = name.trim_end_matches('.').to_ascii_lowercase();
                forbidden_name(&name)?;
                let ips = self.resolver.resolve(&name).await.map_err(|e| {
                    PolicyViolation::ResolveFailed {
                        host: name.clone(),
                        detail: e.0,
                    }
                })?;
                (name, ips, false)
            }
            None => return Err(PolicyViolation::NoHost),
        };
        if ips.is_empty() {
            return Err(PolicyViolation::NoAddresses { host });
        }
        let mut addrs = Vec::with_capacity(ips.len());
        for ip in ips {
            let sa = SocketAddr::new(ip, port);
            if !self.test_servers.contains(&sa)
                && let Some(refusal) = addr::refusal(ip)
            {
                return Err(refused(&host, ip, refusal));
            }
            if !addrs.contains(&sa) {
                addrs.push(sa);
            }
        }
        Ok(CheckedUrl {
            url,
            host,
            addrs,
            ip_literal,
        })
    }
}

fn refused(host: &str, ip: IpAddr, refusal: AddressRefusal) -> PolicyViolation {
    PolicyViolation::RefusedAddress {
        host: host.to_owned(),
        addr: ip,
        range: refusal.to_string(),
    }
}

fn forbidden_name(name: &str) -> Result<(), PolicyViolation> {
    let forbid = |why: &str| {
        Err(PolicyViolation::ForbiddenName {
            host: name.to_owned(),
            why: why.to_owned(),
        })
    };
    if name.is_empty() {
        return forbid("empty");
    }
    if !name.contains('.') {
        return forbid("a single-label name (resolved through local search domains)");
    }
    for suffix in FORBIDDEN_SUFFIXES {
        if name == *suffix || name.ends_with(&format!(".{suffix}")) {
            return forbid(&format!("under .{suffix}, which is never a public name"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_normalises_ipv4_spellings() {
        for s in [
            "http://2130706433/",
            "http://0x7f.1/",
            "http://0177.0.0.1/",
            "http://127.1/",
            "http://127.0.0.1./",
        ] {
            let url = UrlPolicy::parse(s).unwrap();
            assert_eq!(url.host_str(), Some("127.0.0.1"), "{s}");
        }
    }

    #[test]
    fn forbidden_names() {
        assert!(forbidden_name("localhost").is_err());
        assert!(forbidden_name("a.localhost").is_err());
        assert!(forbidden_name("printer.local").is_err());
        assert!(forbidden_name("intranet").is_err());
        assert!(forbidden_name("example.com").is_ok());
    }
}
