//! The transports: [`http`] (Streamable HTTP, both targets) and, natively,
//! [`stdio`] (a child process). A transport sends one JSON-RPC message at a
//! time and delivers everything the server sends, in order, to the client's
//! router as [`Inbound`] items on one channel.

pub mod http;
#[cfg(not(target_arch = "wasm32"))]
pub mod stdio;

use serde_json::Value;

use agent_kernel::{MaybeSend, MaybeSync};

use crate::error::McpError;
use crate::jsonrpc::{RequestId, ServerMessage};

/// What a transport hands the router.
#[derive(Debug)]
pub enum Inbound {
    /// A message from the server.
    Message(ServerMessage),
    /// A request from the server that came on the event stream of our
    /// `request` (HTTP): it belongs to that request (elicitation during a
    /// `tools/call`).
    Related {
        request: RequestId,
        message: ServerMessage,
    },
    /// The stream that was to carry the answer to `request` failed or ended
    /// without it.
    StreamFailed { request: RequestId, error: McpError },
    /// The connection is gone (the process ended, an oversized line): every
    /// pending request fails with this.
    Closed(McpError),
}

/// Sends messages to one server.
#[cfg_attr(target_arch = "wasm32", async_trait::async_trait(?Send))]
#[cfg_attr(not(target_arch = "wasm32"), async_trait::async_trait)]
pub trait Transport: MaybeSend + MaybeSync {
    /// Send `message`; when it is a request, `request` is its id and its
    /// answer arrives as an [`Inbound`]. An HTTP session that expired is
    /// [`McpError::SessionExpired`] (nothing was processed).
    async fn send(&self, message: &Value, request: Option<&RequestId>) -> Result<(), McpError>;
    /// The handshake finished with `version`: HTTP sends it as a header from
    /// now on and opens its optional notification stream.
    async fn initialized(&self, version: &str);
    /// Forget the session before initializing again (HTTP).
    fn reset_session(&self);
    /// A short description of the far end for error messages (never a secret).
    fn describe(&self) -> String;
    /// The client stopped waiting for `request` (it timed out or was
    /// cancelled): whatever still reads toward its answer stops (HTTP drops
    /// the request's event stream, closing its connection).
    fn abandon(&self, _request: &RequestId) {}
}

/// Where a transport delivers what it receives: the router's one mailbox,
/// shared with the client's registrations so that a request is always
/// registered before its answer can arrive.
#[derive(Clone)]
pub struct InboundSink(pub(crate) async_channel::Sender<crate::client::RouterMsg>);

impl InboundSink {
    /// Deliver (waits while the router's mailbox is full). A router that is
    /// gone means nobody waits for anything: dropped on purpose.
    pub async fn deliver(&self, item: Inbound) {
        let _ = self.0.send(crate::client::RouterMsg::Inbound(item)).await;
    }

    /// [`InboundSink::deliver`] from a thread (stdio's pipe readers).
    #[cfg(not(target_arch = "wasm32"))]
    pub fn deliver_blocking(&self, item: Inbound) -> bool {
        self.0
            .send_blocking(crate::client::RouterMsg::Inbound(item))
            .is_ok()
    }
}
