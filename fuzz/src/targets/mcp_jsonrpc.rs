//! MCP JSON-RPC messages from a server (`agent_mcp::jsonrpc`).
//!
//! Properties: any bytes give messages or a typed error (`Protocol` or
//! `TooLarge`), never a panic; a batch gives one message per element; every
//! accepted message, written again as JSON-RPC 2.0, parses to itself; the
//! single-message parser agrees with the batch parser.

use agent_mcp::McpError;
use agent_mcp::jsonrpc::{
    ServerMessage, notification, parse_server_message, parse_server_messages, request,
};
use serde_json::{Value, json};

/// `message` written as a server would send it.
fn encode(message: &ServerMessage) -> Value {
    match message {
        ServerMessage::Request { id, method, params } => request(id, method, params.clone()),
        ServerMessage::Notification { method, params } => notification(method, params.clone()),
        ServerMessage::Response {
            id,
            outcome: Ok(result),
        } => {
            json!({"jsonrpc": "2.0", "id": id, "result": result})
        }
        ServerMessage::Response {
            id,
            outcome: Err(error),
        } => {
            json!({"jsonrpc": "2.0", "id": id, "error": error})
        }
    }
}

pub fn check(data: &[u8]) {
    let parsed = parse_server_messages(data);
    let single = parse_server_message(data);
    match &parsed {
        Ok(messages) => {
            assert!(!messages.is_empty(), "no message and no error");
            if let Ok(Value::Array(items)) = serde_json::from_slice::<Value>(data) {
                assert_eq!(
                    items.len(),
                    messages.len(),
                    "a batch lost or gained messages"
                );
            }
            match &single {
                Ok(one) => assert_eq!(messages.as_slice(), std::slice::from_ref(one)),
                Err(McpError::Protocol(_)) => assert!(messages.len() > 1 || is_batch(data)),
                Err(e) => panic!("one message of a good batch refused with {e:?}"),
            }
            for message in messages {
                let wire = serde_json::to_vec(&encode(message)).unwrap_or_default();
                let again = parse_server_message(&wire)
                    .unwrap_or_else(|e| panic!("{message:?} written again does not parse: {e}"));
                assert_eq!(&again, message, "a message changed when written again");
            }
        }
        Err(McpError::Protocol(_) | McpError::TooLarge { .. }) => {
            assert!(
                single.is_err(),
                "the single parser accepted a refused message"
            );
        }
        Err(other) => panic!("an untyped refusal: {other:?}"),
    }
}

fn is_batch(data: &[u8]) -> bool {
    matches!(serde_json::from_slice::<Value>(data), Ok(Value::Array(_)))
}
