//! The MCP messages this client speaks (revision 2025-11-25, and
//! 2025-06-18 and 2025-03-26 from older servers), as serde types: initialize and version negotiation,
//! capabilities, tools, content, resources, prompts, progress, and the
//! listing caps. Unknown fields are ignored; a wrong type is an error.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::McpError;

/// The revision offered in `initialize` (the newest supported).
pub const LATEST_PROTOCOL_VERSION: &str = "2025-11-25";
/// Every revision this client accepts from a server, newest first.
pub const SUPPORTED_PROTOCOL_VERSIONS: [&str; 3] = ["2025-11-25", "2025-06-18", "2025-03-26"];
/// Pages read at most for one listing (`tools/list`, ...).
pub const MAX_LIST_PAGES: usize = 50;
/// Items accepted at most for one listing, over all pages.
pub const MAX_LIST_ITEMS: usize = 1_000;

/// Check the version a server answered (S-negotiation: the server may
/// answer another revision; we accept only the ones we support).
pub fn negotiate_version(answered: &str) -> Result<&'static str, McpError> {
    SUPPORTED_PROTOCOL_VERSIONS
        .iter()
        .find(|v| **v == answered)
        .copied()
        .ok_or_else(|| McpError::UnsupportedVersion {
            offered: answered.to_owned(),
            supported: SUPPORTED_PROTOCOL_VERSIONS.to_vec(),
        })
}

/// Name and version of the server.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Implementation {
    pub name: String,
    #[serde(default)]
    pub version: String,
}

/// A capability with a `listChanged` flag.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListCapability {
    #[serde(default)]
    pub list_changed: Option<bool>,
}

/// What the server offers.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ServerCapabilities {
    #[serde(default)]
    pub tools: Option<ListCapability>,
    #[serde(default)]
    pub resources: Option<ListCapability>,
    #[serde(default)]
    pub prompts: Option<ListCapability>,
}

/// The answer to `initialize`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InitializeResult {
    pub protocol_version: String,
    #[serde(default)]
    pub capabilities: ServerCapabilities,
    #[serde(default)]
    pub server_info: Implementation,
    #[serde(default)]
    pub instructions: Option<String>,
}

/// The params of our `initialize`: the newest revision, no client
/// capabilities (no sampling, elicitation or roots: those requests are
/// answered "method not found").
/// The `initialize` params; `elicitation` declares form-mode elicitation.
pub fn initialize_params(elicitation: bool) -> Value {
    let capabilities = if elicitation {
        serde_json::json!({"elicitation": {"form": {}}})
    } else {
        serde_json::json!({})
    };
    serde_json::json!({
        "protocolVersion": LATEST_PROTOCOL_VERSION,
        "capabilities": capabilities,
        "clientInfo": {"name": "agent-runtime", "version": env!("CARGO_PKG_VERSION")}
    })
}

/// One function of a server.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct McpTool {
    pub name: String,
    #[serde(default)]
    pub title: Option<String>,
    #[serde(default)]
    pub description: Option<String>,
    pub input_schema: Value,
    #[serde(default)]
    pub output_schema: Option<Value>,
    /// Display hints only (S6.3).
    #[serde(default)]
    pub annotations: Option<Value>,
}

/// Read one page of `field` (`tools`, `resources`, `prompts`) from a result.
pub fn page_of<T: serde::de::DeserializeOwned>(
    result: Value,
    field: &str,
) -> Result<(Vec<T>, Option<String>), McpError> {
    let Value::Object(mut obj) = result else {
        return Err(McpError::Protocol(format!(
            "a {field} listing must be an object"
        )));
    };
    let items = match obj.remove(field) {
        Some(v) => serde_json::from_value::<Vec<T>>(v)
            .map_err(|e| McpError::Protocol(format!("{field}: {e}")))?,
        None => {
            return Err(McpError::Protocol(format!(
                "a {field} listing without {field}"
            )));
        }
    };
    let next = match obj.remove("nextCursor") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s),
        Some(_) => return Err(McpError::Protocol("nextCursor must be a string".into())),
    };
    Ok((items, next))
}

/// One piece of content in a tool result or prompt message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Content {
    Text {
        text: String,
    },
    Image {
        data: String,
        #[serde(rename = "mimeType")]
        mime_type: String,
    },
    Audio {
        data: String,
        #[serde(rename = "mimeType")]
        mime_type: String,
    },
    ResourceLink {
        uri: String,
        #[serde(default)]
        name: Option<String>,
        #[serde(default)]
        description: Option<String>,
        #[serde(default, rename = "mimeType")]
        mime_type: Option<String>,
    },
    Resource {
        resource: ResourceContents,
    },
}

/// The answer to `tools/call`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CallToolResult {
    #[serde(default)]
    pub content: Vec<Content>,
    #[serde(default)]
    pub structured_content: Option<Value>,
    #[serde(default)]
    pub is_error: Option<bool>,
}

/// A resource a server lists.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Resource {
    pub uri: String,
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub title: Option<String>,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub mime_type: Option<String>,
}

/// The contents of a resource: text or base64 bytes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceContents {
    pub uri: String,
    #[serde(default)]
    pub mime_type: Option<String>,
    #[serde(default)]
    pub text: Option<String>,
    #[serde(default)]
    pub blob: Option<String>,
}

/// The answer to `resources/read`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReadResourceResult {
    pub contents: Vec<ResourceContents>,
}

/// An argument of a prompt.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PromptArgument {
    pub name: String,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub required: Option<bool>,
}

/// A prompt a server lists.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Prompt {
    pub name: String,
    #[serde(default)]
    pub title: Option<String>,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub arguments: Vec<PromptArgument>,
}

/// One message of a prompt.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PromptMessage {
    pub role: String,
    pub content: Content,
}

/// The answer to `prompts/get`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GetPromptResult {
    #[serde(default)]
    pub description: Option<String>,
    pub messages: Vec<PromptMessage>,
}

/// A progress notification's params.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProgressParams {
    pub progress_token: Value,
    pub progress: f64,
    #[serde(default)]
    pub total: Option<f64>,
    #[serde(default)]
    pub message: Option<String>,
}

/// Decode a result into `T`, naming the method on failure.
pub fn decode<T: serde::de::DeserializeOwned>(method: &str, value: Value) -> Result<T, McpError> {
    serde_json::from_value(value)
        .map_err(|e| McpError::Protocol(format!("the answer to {method} is malformed: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn versions_are_negotiated() {
        assert_eq!(negotiate_version("2025-11-25").unwrap(), "2025-11-25");
        assert_eq!(negotiate_version("2025-06-18").unwrap(), "2025-06-18");
        assert_eq!(negotiate_version("2025-03-26").unwrap(), "2025-03-26");
        assert!(matches!(
            negotiate_version("2024-11-05"),
            Err(McpError::UnsupportedVersion { .. })
        ));
        assert_eq!(initialize_params(false)["protocolVersion"], "2025-11-25");
        assert_eq!(
            initialize_params(true)["capabilities"]["elicitation"],
            serde_json::json!({"form": {}})
        );
    }

    #[test]
    fn content_kinds_decode_and_wrong_types_are_errors() {
        let r: CallToolResult = decode(
            "tools/call",
            json!({"content": [
                {"type": "text", "text": "hi", "annotations": {"audience": ["user"]}},
                {"type": "image", "data": "AAAA", "mimeType": "image/png"},
                {"type": "audio", "data": "AAAA", "mimeType": "audio/wav"},
                {"type": "resource_link", "uri": "test://1", "name": "one"},
                {"type": "resource", "resource": {"uri": "test://2", "text": "two"}}
            ], "structuredContent": {"sum": 3}, "isError": false, "_meta": {}}),
        )
        .unwrap();
        assert_eq!(r.content.len(), 5);
        assert_eq!(r.structured_content, Some(json!({"sum": 3})));
        for bad in [
            json!({"content": [{"type": "text", "text": 5}]}),
            json!({"content": [{"type": "video", "data": ""}]}),
            json!({"content": "text"}),
            json!({"content": [], "isError": "yes"}),
        ] {
            assert!(matches!(
                decode::<CallToolResult>("tools/call", bad),
                Err(McpError::Protocol(_))
            ));
        }
    }

    #[test]
    fn pages_read_items_and_cursor() {
        let (tools, next): (Vec<McpTool>, _) = page_of(
            json!({"tools": [{"name": "a", "inputSchema": {"type": "object"}}], "nextCursor": "c2"}),
            "tools",
        )
        .unwrap();
        assert_eq!(tools[0].name, "a");
        assert_eq!(next.as_deref(), Some("c2"));
        assert!(page_of::<McpTool>(json!({"nextCursor": 1, "tools": []}), "tools").is_err());
        assert!(page_of::<McpTool>(json!({}), "tools").is_err());
        assert!(page_of::<McpTool>(json!({"tools": [{"name": "a"}]}), "tools").is_err());
    }
}
