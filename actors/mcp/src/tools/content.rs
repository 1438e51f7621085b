//! The model-facing text of results: call results, resource contents and
//! prompt messages made into JSON whose text is bounded to
//! [`MAX_TEXT_CHARS`] per result, truncation marked.

use serde_json::{Map, Value, json};

use super::MAX_TEXT_CHARS;
use crate::protocol::{CallToolResult, Content, ResourceContents};
use agent_capabilities::sha256_hex;

/// Bounds the text of one result.
pub(super) struct Budget {
    left: usize,
    pub(super) truncated: bool,
}

impl Budget {
    pub(super) fn new() -> Budget {
        Budget {
            left: MAX_TEXT_CHARS,
            truncated: false,
        }
    }

    pub(super) fn text(&mut self, text: &str) -> Value {
        let count = text.chars().count();
        if count <= self.left {
            self.left -= count;
            return Value::String(text.to_owned());
        }
        let cut: String = text.chars().take(self.left).collect();
        self.left = 0;
        self.truncated = true;
        Value::String(cut)
    }

    /// A JSON value, whole when its text fits, else cut text marked.
    pub(super) fn json(&mut self, value: &Value) -> Value {
        let text = value.to_string();
        let count = text.chars().count();
        if count <= self.left {
            self.left -= count;
            return value.clone();
        }
        json!({"truncated_json": self.text(&text)})
    }
}

pub(super) fn resource_json(r: &ResourceContents, budget: &mut Budget) -> Value {
    let mut m = Map::new();
    m.insert("uri".into(), budget.text(&r.uri));
    if let Some(t) = &r.mime_type {
        m.insert("mimeType".into(), Value::String(t.clone()));
    }
    if let Some(text) = &r.text {
        m.insert("text".into(), budget.text(text));
    }
    if let Some(blob) = &r.blob {
        // Bytes never reach the model: their size and hash do.
        m.insert("blob_base64_chars".into(), blob.len().into());
        m.insert("blob_sha256".into(), sha256_hex(blob.as_bytes()).into());
    }
    Value::Object(m)
}

pub(super) fn content_json(c: &Content, budget: &mut Budget) -> Value {
    match c {
        Content::Text { text } => json!({"type": "text", "text": budget.text(text)}),
        Content::Image { data, mime_type } | Content::Audio { data, mime_type } => {
            let kind = if matches!(c, Content::Image { .. }) {
                "image"
            } else {
                "audio"
            };
            json!({"type": kind, "mimeType": mime_type, "base64_chars": data.len(), "sha256": sha256_hex(data.as_bytes())})
        }
        Content::ResourceLink {
            uri,
            name,
            description,
            mime_type,
        } => {
            let mut m = Map::new();
            m.insert("type".into(), "resource_link".into());
            m.insert("uri".into(), budget.text(uri));
            if let Some(n) = name {
                m.insert("name".into(), budget.text(n));
            }
            if let Some(d) = description {
                m.insert("description".into(), budget.text(d));
            }
            if let Some(t) = mime_type {
                m.insert("mimeType".into(), Value::String(t.clone()));
            }
            Value::Object(m)
        }
        Content::Resource { resource } => {
            let mut v = resource_json(resource, budget);
            if let Some(m) = v.as_object_mut() {
                m.insert("type".into(), "resource".into());
            }
            v
        }
    }
}

/// The model-facing content of a call result, and whether it was cut.
pub fn call_result_content(result: &CallToolResult) -> (Value, bool) {
    let mut budget = Budget::new();
    let content: Vec<Value> = result
        .content
        .iter()
        .map(|c| content_json(c, &mut budget))
        .collect();
    let mut m = Map::new();
    m.insert("content".into(), Value::Array(content));
    if let Some(s) = &result.structured_content {
        m.insert("structuredContent".into(), budget.json(s));
    }
    if budget.truncated {
        m.insert("truncated".into(), true.into());
    }
    (Value::Object(m), budget.truncated)
}
