//! Elicitation (MCP 2025-11-25, form mode): a server's
//! `elicitation/create` asks the person for structured input during a
//! request. This module owns the request as the client reads it
//! ([`ElicitationRequest`]: the message, which is `external_untrusted`
//! text from the server, and the requested schema, a flat object of
//! primitive fields), the answer ([`ElicitationAnswer`]: accept with
//! content, decline, cancel), the check of accepted content against the
//! requested schema, and the host's part ([`ElicitationHandler`]: show it
//! to the person once and bring the answer back). A client without a
//! handler does not declare the capability and answers -32601.

use serde_json::{Map, Value, json};

use agent_kernel::tool::validate::CompiledSchema;
use agent_kernel::{MaybeSend, MaybeSync};

/// The longest message shown, in characters (longer is truncated, marked).
pub const MAX_MESSAGE_CHARS: usize = 2_000;
/// The most fields a requested schema may have.
pub const MAX_FIELDS: usize = 32;

/// The call a server's request belongs to: the run and call id its host
/// passed with the request ([`crate::client::RequestOptions::origin`]), so
/// that a host can make the elicitation a pending request of that run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ElicitationOrigin {
    pub run: String,
    pub call_id: String,
}

/// A server's request for input, checked.
#[derive(Debug, Clone, PartialEq)]
pub struct ElicitationRequest {
    /// The configured id of the server that asks.
    pub server_id: String,
    /// The request of ours it came with: the one whose event stream carried
    /// it, else the only request in flight that named an origin; None when
    /// neither tells (the host then has no run to ask in).
    pub origin: Option<ElicitationOrigin>,
    /// What the server says to the person: untrusted text.
    pub message: String,
    /// The requested schema (an object of primitive fields).
    pub requested_schema: Value,
}

/// The person's answer.
#[derive(Debug, Clone, PartialEq)]
pub enum ElicitationAnswer {
    /// Submitted: `content` matches the requested schema.
    Accept(Value),
    /// Explicitly refused.
    Decline,
    /// Dismissed without a choice.
    Cancel,
}

impl ElicitationAnswer {
    /// The `elicitation/create` result.
    pub fn to_result(&self) -> Value {
        match self {
            ElicitationAnswer::Accept(content) => json!({"action": "accept", "content": content}),
            ElicitationAnswer::Decline => json!({"action": "decline"}),
            ElicitationAnswer::Cancel => json!({"action": "cancel"}),
        }
    }
}

/// Why a request or an answer was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ElicitationError {
    #[error("elicitation/create: {0}")]
    BadRequest(String),
    #[error("the answer does not match the requested schema: {0}")]
    Mismatch(String),
}

const PRIMITIVES: [&str; 4] = ["string", "number", "integer", "boolean"];

impl ElicitationRequest {
    /// Read the params of `elicitation/create` (form mode).
    pub fn from_params(
        server_id: &str,
        params: &Value,
    ) -> Result<ElicitationRequest, ElicitationError> {
        let bad = |why: &str| ElicitationError::BadRequest(why.to_owned());
        if let Some(mode) = params.get("mode").and_then(Value::as_str)
            && mode != "form"
        {
            return Err(bad("only form mode is supported"));
        }
        let message = params
            .get("message")
            .and_then(Value::as_str)
            .ok_or_else(|| bad("no message"))?;
        let mut shown: String = message.chars().take(MAX_MESSAGE_CHARS).collect();
        if shown.len() < message.len() {
            shown.push('…');
        }
        let schema = params
            .get("requestedSchema")
            .cloned()
            .ok_or_else(|| bad("no requestedSchema"))?;
        let properties = schema
            .get("properties")
            .and_then(Value::as_object)
            .ok_or_else(|| bad("requestedSchema must be an object schema with properties"))?;
        if schema.get("type").and_then(Value::as_str) != Some("object") {
            return Err(bad("requestedSchema must have type object"));
        }
        if properties.len() > MAX_FIELDS {
            return Err(bad(&format!("more than {MAX_FIELDS} fields")));
        }
        for (name, field) in properties {
            let kind = field.get("type").and_then(Value::as_str).unwrap_or("");
            if !PRIMITIVES.contains(&kind) {
                return Err(bad(&format!(
                    "field {name:?} is not a string, number, integer or boolean"
                )));
            }
        }
        CompiledSchema::compile(&schema).map_err(|e| bad(&e))?;
        Ok(ElicitationRequest {
            server_id: server_id.to_owned(),
            origin: None,
            message: shown,
            requested_schema: schema,
        })
    }

    /// The content made of the schema's `default` values (SEP-1034: a
    /// form starts pre-filled with them).
    pub fn defaults(&self) -> Value {
        let mut out = Map::new();
        if let Some(properties) = self
            .requested_schema
            .get("properties")
            .and_then(Value::as_object)
        {
            for (name, field) in properties {
                if let Some(default) = field.get("default") {
                    out.insert(name.clone(), default.clone());
                }
            }
        }
        Value::Object(out)
    }

    /// Check accepted `content` against the requested schema.
    pub fn check(&self, content: &Value) -> Result<(), ElicitationError> {
        let schema =
            CompiledSchema::compile(&self.requested_schema).map_err(ElicitationError::Mismatch)?;
        schema
            .check(content)
            .map_err(|e| ElicitationError::Mismatch(e.to_string()))
    }
}

/// The host's part: show the request to the person once, bring back the
/// answer (a run keeps it as a pending request, like `ask_user`).
#[cfg_attr(target_arch = "wasm32", async_trait::async_trait(?Send))]
#[cfg_attr(not(target_arch = "wasm32"), async_trait::async_trait)]
pub trait ElicitationHandler: MaybeSend + MaybeSync {
    async fn elicit(&self, request: ElicitationRequest) -> ElicitationAnswer;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn form() -> Value {
        json!({
            "message": "Who are you?",
            "requestedSchema": {
                "type": "object",
                "properties": {
                    "name": {"type": "string", "default": "John Doe"},
                    "age": {"type": "integer", "minimum": 0, "default": 30}
                },
                "required": ["name"]
            }
        })
    }

    #[test]
    fn a_form_is_read_with_its_defaults_and_answers_are_checked() {
        let r = ElicitationRequest::from_params("s", &form()).unwrap();
        assert_eq!(r.defaults(), json!({"name": "John Doe", "age": 30}));
        assert!(r.check(&json!({"name": "Ann", "age": 4})).is_ok());
        assert!(r.check(&json!({"age": 4})).is_err());
        assert!(r.check(&json!({"name": "Ann", "age": -1})).is_err());
        assert_eq!(
            ElicitationAnswer::Decline.to_result(),
            json!({"action": "decline"})
        );
    }

    #[test]
    fn nested_or_url_requests_are_refused() {
        let mut nested = form();
        nested["requestedSchema"]["properties"]["name"] = json!({"type": "object"});
        assert!(ElicitationRequest::from_params("s", &nested).is_err());
        let mut url = form();
        url["mode"] = json!("url");
        assert!(ElicitationRequest::from_params("s", &url).is_err());
        assert!(ElicitationRequest::from_params("s", &json!({})).is_err());
    }
}
