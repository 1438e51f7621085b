//! JSON-RPC 2.0 as MCP uses it: request ids, requests, notifications,
//! responses and errors, and the one bounded parser every message from a
//! server goes through ([`parse_server_message`]: size cap, serde_json's
//! recursion limit for depth, unknown fields ignored, wrong types refused).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::error::McpError;

/// Largest message accepted from a server, in bytes (4 MiB): a JSON body, an
/// SSE event's data or a stdio line. At the limit is accepted; above it is
/// [`McpError::TooLarge`].
pub const MAX_MESSAGE_BYTES: usize = 4 * 1024 * 1024;

/// JSON-RPC "method not found": the answer to server requests this client
/// does not support (sampling, elicitation, roots).
pub const METHOD_NOT_FOUND: i64 = -32601;
/// JSON-RPC's "invalid params".
pub const INVALID_PARAMS: i64 = -32602;

/// A request id: a number or a string (never null in MCP).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(untagged)]
pub enum RequestId {
    Number(i64),
    Text(String),
}

impl std::fmt::Display for RequestId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RequestId::Number(n) => write!(f, "{n}"),
            RequestId::Text(s) => write!(f, "{s:?}"),
        }
    }
}

/// A JSON-RPC error object.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RpcError {
    pub code: i64,
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
}

/// One message from a server, classified.
#[derive(Debug, Clone, PartialEq)]
pub enum ServerMessage {
    /// An answer to one of our requests.
    Response {
        id: RequestId,
        outcome: Result<Value, RpcError>,
    },
    /// A request the server makes of us (sampling, elicitation, roots, ping).
    Request {
        id: RequestId,
        method: String,
        params: Option<Value>,
    },
    /// A notification (progress, list_changed, log messages, ...).
    Notification {
        method: String,
        params: Option<Value>,
    },
}

/// The raw shape of any JSON-RPC message; unknown fields are ignored.
#[derive(Deserialize)]
struct Raw {
    jsonrpc: String,
    #[serde(default)]
    id: Option<RequestId>,
    #[serde(default)]
    method: Option<String>,
    #[serde(default)]
    params: Option<Value>,
    #[serde(default)]
    result: Option<Value>,
    #[serde(default)]
    error: Option<RpcError>,
}

fn classify(raw: Raw) -> Result<ServerMessage, McpError> {
    if raw.jsonrpc != "2.0" {
        return Err(McpError::Protocol(format!(
            "jsonrpc must be \"2.0\", not {:?}",
            raw.jsonrpc
        )));
    }
    if let Some(params) = &raw.params
        && !(params.is_object() || params.is_array())
    {
        return Err(McpError::Protocol(
            "params must be an object or an array".into(),
        ));
    }
    match (raw.id, raw.method) {
        (Some(id), Some(method)) => Ok(ServerMessage::Request {
            id,
            method,
            params: raw.params,
        }),
        (None, Some(method)) => Ok(ServerMessage::Notification {
            method,
            params: raw.params,
        }),
        (Some(id), None) => match (raw.result, raw.error) {
            (Some(result), None) => Ok(ServerMessage::Response {
                id,
                outcome: Ok(result),
            }),
            (None, Some(error)) => Ok(ServerMessage::Response {
                id,
                outcome: Err(error),
            }),
            _ => Err(McpError::Protocol(format!(
                "the response to request {id} must carry exactly one of result and error"
            ))),
        },
        (None, None) => Err(McpError::Protocol(
            "a message with neither id nor method".into(),
        )),
    }
}

/// Parse one message (or a JSON-RPC batch, which 2025-03-26 servers may
/// send) from a server. Refuses more than [`MAX_MESSAGE_BYTES`] before
/// parsing; nesting deeper than serde_json's recursion limit (128) is a
/// typed error, not a stack overflow.
pub fn parse_server_messages(bytes: &[u8]) -> Result<Vec<ServerMessage>, McpError> {
    if bytes.len() > MAX_MESSAGE_BYTES {
        return Err(McpError::TooLarge {
            size: bytes.len(),
            limit: MAX_MESSAGE_BYTES,
        });
    }
    let value: Value =
        serde_json::from_slice(bytes).map_err(|e| McpError::Protocol(format!("not JSON: {e}")))?;
    match value {
        Value::Array(items) => {
            if items.is_empty() {
                return Err(McpError::Protocol("an empty batch".into()));
            }
            items.into_iter().map(parse_value).collect()
        }
        other => Ok(vec![parse_value(other)?]),
    }
}

/// [`parse_server_messages`] for exactly one message.
pub fn parse_server_message(bytes: &[u8]) -> Result<ServerMessage, McpError> {
    let mut all = parse_server_messages(bytes)?;
    if all.len() != 1 {
        return Err(McpError::Protocol(format!(
            "expected one message, got a batch of {}",
            all.len()
        )));
    }
    Ok(all.remove(0))
}

fn parse_value(value: Value) -> Result<ServerMessage, McpError> {
    let raw: Raw = serde_json::from_value(value)
        .map_err(|e| McpError::Protocol(format!("not a JSON-RPC message: {e}")))?;
    classify(raw)
}

/// A request we send.
pub fn request(id: &RequestId, method: &str, params: Option<Value>) -> Value {
    let mut m = Map::new();
    m.insert("jsonrpc".into(), "2.0".into());
    m.insert("id".into(), serde_json::to_value(id).unwrap_or(Value::Null));
    m.insert("method".into(), method.into());
    if let Some(p) = params {
        m.insert("params".into(), p);
    }
    Value::Object(m)
}

/// A notification we send.
pub fn notification(method: &str, params: Option<Value>) -> Value {
    let mut m = Map::new();
    m.insert("jsonrpc".into(), "2.0".into());
    m.insert("method".into(), method.into());
    if let Some(p) = params {
        m.insert("params".into(), p);
    }
    Value::Object(m)
}

/// Our answer to a server request: a result.
pub fn response(id: &RequestId, result: Value) -> Value {
    serde_json::json!({"jsonrpc": "2.0", "id": id, "result": result})
}

/// Our answer to a server request: an error.
pub fn error_response(id: &RequestId, code: i64, message: &str) -> Value {
    serde_json::json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_classified_and_unknown_fields_ignored() {
        let r = parse_server_message(br#"{"jsonrpc":"2.0","id":1,"result":{"a":1},"extra":true}"#)
            .unwrap();
        assert_eq!(
            r,
            ServerMessage::Response {
                id: RequestId::Number(1),
                outcome: Ok(serde_json::json!({"a":1}))
            }
        );
        let e = parse_server_message(
            br#"{"jsonrpc":"2.0","id":"x","error":{"code":-1,"message":"no","x":2}}"#,
        )
        .unwrap();
        assert!(matches!(
            e,
            ServerMessage::Response {
                outcome: Err(RpcError { code: -1, .. }),
                ..
            }
        ));
        let n = parse_server_message(
            br#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}"#,
        )
        .unwrap();
        assert!(matches!(n, ServerMessage::Notification { .. }));
        let q = parse_server_message(
            br#"{"jsonrpc":"2.0","id":7,"method":"sampling/createMessage","params":{}}"#,
        )
        .unwrap();
        assert!(matches!(q, ServerMessage::Request { .. }));
        let batch = parse_server_messages(
            br#"[{"jsonrpc":"2.0","method":"a"},{"jsonrpc":"2.0","id":2,"result":{}}]"#,
        )
        .unwrap();
        assert_eq!(batch.len(), 2);
    }

    #[test]
    fn malformed_messages_are_typed_errors() {
        for bad in [
            &br#"{"jsonrpc":"1.0","id":1,"result":{}}"#[..],
            br#"{"jsonrpc":"2.0","id":1}"#,
            br#"{"jsonrpc":"2.0","id":1,"result":{},"error":{"code":1,"message":"m"}}"#,
            br#"{"jsonrpc":"2.0"}"#,
            br#"{"jsonrpc":"2.0","id":true,"result":{}}"#,
            br#"{"jsonrpc":"2.0","id":1,"error":{"code":"x","message":"m"}}"#,
            br#"{"jsonrpc":"2.0","method":5}"#,
            br#"{"jsonrpc":"2.0","method":"m","params":3}"#,
            br#"[]"#,
            br#"not json"#,
            br#""#,
        ] {
            let e = parse_server_messages(bad).unwrap_err();
            assert!(
                matches!(e, McpError::Protocol(_)),
                "{:?}: {e:?}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    #[test]
    fn deep_nesting_is_a_typed_error_not_a_stack_overflow() {
        let depth = 100_000;
        let text = format!(
            r#"{{"jsonrpc":"2.0","id":1,"result":{}{}}}"#,
            "[".repeat(depth),
            "]".repeat(depth)
        );
        let e = parse_server_messages(text.as_bytes()).unwrap_err();
        assert!(
            matches!(e, McpError::Protocol(ref m) if m.contains("recursion")),
            "{e:?}"
        );
        // Within the limit it parses.
        let ok = format!(
            r#"{{"jsonrpc":"2.0","id":1,"result":{{"a":{}{}}}}}"#,
            "[".repeat(100),
            "]".repeat(100)
        );
        assert!(parse_server_messages(ok.as_bytes()).is_ok());
    }

    /// A response padded to exactly `size` bytes.
    fn padded(size: usize) -> Vec<u8> {
        let head = r#"{"jsonrpc":"2.0","id":1,"result":{"t":""#;
        let tail = r#""}}"#;
        let mut s = String::from(head);
        s.push_str(&"a".repeat(size - head.len() - tail.len()));
        s.push_str(tail);
        assert_eq!(s.len(), size);
        s.into_bytes()
    }

    #[test]
    fn message_size_limit_at_below_and_above() {
        assert!(parse_server_messages(&padded(MAX_MESSAGE_BYTES - 1)).is_ok());
        assert!(parse_server_messages(&padded(MAX_MESSAGE_BYTES)).is_ok());
        assert!(matches!(
            parse_server_messages(&padded(MAX_MESSAGE_BYTES + 1)),
            Err(McpError::TooLarge { size, limit: MAX_MESSAGE_BYTES }) if size == MAX_MESSAGE_BYTES + 1
        ));
    }
}
