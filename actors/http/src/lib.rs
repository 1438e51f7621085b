//! The HTTP leaf library every crate that talks HTTP uses (S13.5). It owns
//! three rules, each in one place:
//!
//! - [`client`]: the one client constructor. Natively no redirect is ever
//!   followed (`redirect::Policy::none()`), the timeouts are parameters,
//!   and a client that cannot be built is a typed [`ClientBuildError`] —
//!   never a fallback to a client with other rules.
//! - [`send`](mod@send): the one way a request carrying a credential is sent. A
//!   redirect answer is the typed [`SendError::Redirected`], never
//!   followed: natively a 3xx arrives as an answer and is refused here; in
//!   the browser reqwest cannot set the fetch `redirect` mode, so the
//!   request goes through the page's own `fetch` with `redirect: "manual"`
//!   (the browser then neither follows the hop nor sends anything to its
//!   target, and answers an opaque redirect that is refused here).
//! - [`sse`]: the one Server-Sent Events decoder, bounded in line and
//!   event size.
//!
//! A caller that must follow redirects (the fetch tool's reader) follows
//! them itself, hop by hop, on a client from [`client`], and sends no
//! credential across origins.
//!
//! A leaf library: it depends on no crate of the workspace, so any crate
//! may use it (the layering check, `cargo xtask layering`).
//!
//! # Example
//!
//! The SSE decoder takes bytes as they arrive, split anywhere, and returns
//! each completed event's data; an event over its bound is an error, not an
//! allocation:
//!
//! ```
//! use agent_http::sse::{SseDecoder, SseError};
//!
//! let mut sse = SseDecoder::new(1024);
//! let mut events = Vec::new();
//! sse.push(b"data: {\"a\":", &mut events).unwrap();
//! assert!(events.is_empty());
//! sse.push(b"1}\n\ndata: done\n\n", &mut events).unwrap();
//! assert_eq!(events, ["{\"a\":1}", "done"]);
//!
//! // An event over the bound is an error; what came before it is kept.
//! let mut small = SseDecoder::new(4);
//! let mut events = Vec::new();
//! let pushed = small.push(b"data: ok\n\ndata: far too long\n\n", &mut events);
//! assert!(matches!(pushed, Err(SseError::EventTooLarge { .. })));
//! assert_eq!(events, ["ok"]);
//! ```

pub mod client;
pub mod send;
pub mod sse;

pub use client::{ClientBuildError, ClientOptions, build_client, strict_builder, strict_client};
pub use send::{ByteStream, Response, SendError, is_redirect, send};
pub use sse::{SseDecoder, SseError};
