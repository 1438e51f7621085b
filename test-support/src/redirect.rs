//! Two loopback HTTP servers on two ports — two origins — for the redirect
//! tests of S13.5: the *endpoint* answers every request with one redirect
//! status pointing at the *elsewhere* server, which records every request
//! that reaches it (method, path, headers, body). A test sends a request
//! carrying a credential to the endpoint and asserts the elsewhere server
//! saw nothing. Plain HTTP/1.1 over tokio's TCP, one request per
//! connection, so no client behaviour is assumed beyond the wire.

use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// The statuses that send a client elsewhere and that clients follow.
pub const REDIRECT_STATUSES: [u16; 5] = [301, 302, 303, 307, 308];

/// One request as it arrived.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub method: String,
    pub path: String,
    /// Header names in lower case, with their values.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Recorded {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// A loopback server recording every request; answers each with `answer`.
pub struct RecordingServer {
    pub addr: std::net::SocketAddr,
    requests: Arc<Mutex<Vec<Recorded>>>,
}

impl RecordingServer {
    /// `http://127.0.0.1:PORT`
    pub fn origin(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Every request so far.
    pub fn requests(&self) -> Vec<Recorded> {
        self.requests.lock().map(|r| r.clone()).unwrap_or_default()
    }

    /// Start a server whose every answer is built by `answer` from the request.
    pub async fn start(
        answer: impl Fn(&Recorded) -> Vec<u8> + Send + Sync + 'static,
    ) -> RecordingServer {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind loopback");
        let addr = listener.local_addr().expect("local addr");
        let requests = Arc::new(Mutex::new(Vec::new()));
        let seen = requests.clone();
        let answer = Arc::new(answer);
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let seen = seen.clone();
                let answer = answer.clone();
                tokio::spawn(async move {
                    let _ = serve_one(stream, &seen, &*answer).await;
                });
            }
        });
        RecordingServer { addr, requests }
    }
}

async fn serve_one(
    mut stream: TcpStream,
    seen: &Mutex<Vec<Recorded>>,
    answer: &(dyn Fn(&Recorded) -> Vec<u8> + Send + Sync),
) -> std::io::Result<()> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i;
        }
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            return Ok(());
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let mut first = lines.next().unwrap_or("").split(' ');
    let method = first.next().unwrap_or("").to_owned();
    let path = first.next().unwrap_or("").to_owned();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let length: usize = headers
        .iter()
        .find(|(n, _)| n == "content-length")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    let mut body = buf[head_end + 4..].to_vec();
    while body.len() < length {
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            break;
        }
        body.extend_from_slice(&chunk[..n]);
    }
    let recorded = Recorded {
        method,
        path,
        headers,
        body,
    };
    let reply = answer(&recorded);
    if let Ok(mut all) = seen.lock() {
        all.push(recorded);
    }
    stream.write_all(&reply).await?;
    stream.shutdown().await
}

/// A complete HTTP/1.1 answer.
pub fn http_answer(status: u16, extra_headers: &[(&str, &str)], body: &[u8]) -> Vec<u8> {
    let mut out = format!("HTTP/1.1 {status} Status\r\n");
    for (n, v) in extra_headers {
        out.push_str(&format!("{n}: {v}\r\n"));
    }
    out.push_str(&format!(
        "content-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    ));
    let mut out = out.into_bytes();
    out.extend_from_slice(body);
    out
}

/// The endpoint and the other origin it redirects to.
pub struct RedirectPair {
    /// Answers every request with the redirect status.
    pub endpoint: RecordingServer,
    /// Records whatever reaches it; answers 200 with a small JSON body.
    pub elsewhere: RecordingServer,
}

impl RedirectPair {
    /// An endpoint answering `status` with `Location:` the same path on the
    /// other origin.
    pub async fn start(status: u16) -> RedirectPair {
        let elsewhere = RecordingServer::start(|_| {
            http_answer(200, &[("content-type", "application/json")], b"{}")
        })
        .await;
        let target = elsewhere.origin();
        let endpoint = RecordingServer::start(move |req| {
            let location = format!("{target}{}", req.path);
            http_answer(status, &[("location", location.as_str())], b"")
        })
        .await;
        RedirectPair {
            endpoint,
            elsewhere,
        }
    }

    /// Panics (this is a test helper) when anything reached the other
    /// origin, naming what did: `secrets` are values that must not appear
    /// in any header or body there.
    pub fn assert_nothing_elsewhere(&self, status: u16, secrets: &[&str]) {
        let reached = self.elsewhere.requests();
        for r in &reached {
            for secret in secrets {
                assert!(
                    !r.headers.iter().any(|(_, v)| v.contains(secret)),
                    "after {status}, a credential header reached the other origin: {:?}",
                    r.headers.iter().map(|(n, _)| n).collect::<Vec<_>>()
                );
                assert!(
                    !String::from_utf8_lossy(&r.body).contains(secret),
                    "after {status}, the body reached the other origin"
                );
            }
        }
        assert!(
            reached.is_empty(),
            "after {status}, {} request(s) reached the other origin: {:?}",
            reached.len(),
            reached
                .iter()
                .map(|r| format!("{} {} ({} body bytes)", r.method, r.path, r.body.len()))
                .collect::<Vec<_>>()
        );
        assert!(
            !self.endpoint.requests().is_empty(),
            "the endpoint itself was never asked: the test sent nothing"
        );
    }
}
