//! `agent-fetch`: public web reads for agents (SPEC S8).
//!
//! A model-supplied URL is read only through [`UrlPolicy`]: it is parsed as
//! browsers parse it (WHATWG, the `url` crate), so every IPv4 and IPv6
//! spelling is normalised before it is judged; only http and https without
//! user info pass; the host must resolve only to global unicast addresses
//! ([`addr`] names every refused range, including IPv6 forms that embed
//! IPv4); a name without answers is refused (fail closed). The read then
//! connects only to the addresses that were checked — natively a reqwest
//! resolver returns exactly them, so DNS rebinding between check and connect
//! is impossible — with no proxy, and follows redirects by hand, checking
//! every hop before it is followed (at most five), dropping credentials,
//! cookies and authorisation headers across origins.
//!
//! [`WebReader`] runs the flow of S8.3–S8.5: Jina Reader first for up to 15
//! seconds within a 30-second total, then — only after a network failure, a
//! stage timeout, a Jina 5xx or a challenge by Jina itself — one direct read
//! with the time left. Every outcome has its own typed [`FetchError`]. All
//! time comes from the host [`agent_kernel::host::Clock`], so deadlines are
//! tested on a manual clock.
//!
//! Readable text comes from `agent-readable` (the owner of the HTML limits:
//! input bytes, nesting depth and elements, checked before any parser runs;
//! a page over one is [`FetchError::PageTooComplex`]) and, through it, from
//! `dom_smoothie`, a maintained Rust port of
//! Mozilla's readability.js (the algorithm behind Firefox Reader View). It
//! only parses HTML — no page JavaScript runs — builds for wasm32, and can
//! emit Markdown directly, so the model gets headings, lists and links
//! instead of a flat text dump. Charsets are decoded with `encoding_rs`
//! (the WHATWG Encoding Standard implementation used by Firefox).
//!
//! [`tool`] exports `fetch_url` (definition and actor) for hosts to register.
//! In the browser the actor's [`FetchBackend`] is a [`GatewayClient`]: the
//! native gateway (`agentrt serve`, `POST /v1/fetch`) applies this same
//! policy, so the browser never fetches a model-supplied URL itself.
//!
//! ```no_run
//! # async fn demo(clock: std::sync::Arc<dyn agent_kernel::host::Clock>,
//! #               executor: std::sync::Arc<dyn agent_kernel::host::Executor>) {
//! use std::sync::Arc;
//! use agent_fetch::{CancelToken, Limits, ReaderConfig, SystemResolver, UrlPolicy, WebReader};
//! let policy = UrlPolicy::public_web(Arc::new(SystemResolver::new(executor)));
//! let reader = WebReader::new(policy, ReaderConfig::jina_public(), Limits::spec(), clock);
//! match reader.read("https://example.com/", CancelToken::never()).await {
//!     Ok(page) => println!("{} chars from {}", page.text.len(), page.final_url),
//!     Err(failure) => println!("{} ({:?})", failure, failure.stage),
//! }
//! # }
//! ```

// A failed read carries its typed reason (with the refused address, the
// Jina message, ...) across the gateway as JSON; failures are rare, so the
// size of the `Err` variant is not worth boxing every reason.
#![allow(clippy::result_large_err)]

pub mod addr;
pub mod backend;
pub mod content;
pub mod jina;
pub mod model;
pub mod policy;
#[cfg(not(target_arch = "wasm32"))]
pub mod reader;
#[cfg(any(test, feature = "test-loopback"))]
pub mod testing;
pub mod tool;

/// The cancellation signal of a read is the tool shell's (one owner).
pub use agent_kernel::tool::{CancelHandle, CancelToken};
pub use agent_readable::{ExtractionSlots, HtmlLimits, HtmlRefusal};
pub use backend::{FetchBackend, GATEWAY_FETCH_PATH, GatewayClient, GatewayReply, GatewayRequest};
pub use model::{
    FallbackReason, FetchError, FlowFailure, Limits, Page, ReaderConfig, ReaderUsed, Stage,
};
#[cfg(not(target_arch = "wasm32"))]
pub use policy::SystemResolver;
pub use policy::{
    CheckedUrl, PolicyViolation, ResolveError, Resolver, ScriptedResolver, UrlPolicy,
};
#[cfg(not(target_arch = "wasm32"))]
pub use reader::{DirectReader, RawResponse, WebReader, pinned_client_builder};
pub use tool::{
    FETCH_URL, FetchActor, FetchArgs, SUMMARY_CHARS, TOOL_MODES, ToolDeps, builtin_tools,
    fetch_url_definition,
};
