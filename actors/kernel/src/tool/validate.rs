//! Argument handling before dispatch (S5.3): parse the model's argument text,
//! canonicalise it (RFC 8785) and hash it, validate it against the tool's JSON
//! Schema, and derive the invocation's target and scope from its `TargetRule`.
//!
//! Validation uses the maintained `jsonschema` crate (default features off, so
//! it neither fetches remote `$ref`s nor needs a TLS stack, and it builds for
//! wasm32) instead of a hand-written validator.

use std::collections::BTreeSet;
use std::sync::{Arc, OnceLock};

use serde_json::Value;

use crate::protocol::TargetRule;
use agent_capabilities::{Target, TargetScope, canonical_json, sha256_hex};

/// Largest accepted argument text of one call, in bytes (64 KiB). Larger
/// inputs belong in the workspace, referenced by path.
pub const MAX_ARGUMENTS_BYTES: usize = 64 * 1024;

/// How many individual schema problems an error message lists.
const MAX_LISTED_PROBLEMS: usize = 8;

/// The model's arguments could not be accepted. Nothing was dispatched.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ArgumentError {
    #[error(
        "arguments are {size} bytes, above the limit of {limit} bytes; put large content in a workspace file and pass its path"
    )]
    TooLarge { size: usize, limit: usize },
    #[error("arguments are not valid JSON ({detail}); send a single JSON object")]
    NotJson { detail: String },
    #[error(
        "arguments must be a JSON object, not {found}; send an object whose fields the schema names"
    )]
    NotObject { found: &'static str },
    #[error("arguments cannot be canonicalised ({detail}); use finite numbers")]
    NotCanonical { detail: String },
    #[error("arguments do not match the tool's schema: {}; fix these fields and call again", problems.join("; "))]
    Schema { problems: Vec<String> },
}

/// The target of a call could not be derived from its arguments.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TargetError {
    #[error("argument {field:?} is missing or not a string, but it names the call's target")]
    MissingField { field: String },
    #[error("workspace path {path:?} is refused by the workspace path policy: {reason}")]
    BadPath { path: String, reason: String },
    #[error("URL {url:?} is not an absolute http or https URL with a host: {why}")]
    BadUrl { url: String, why: String },
    #[error("argument {field:?} is empty, but it names the call's target in the page")]
    EmptyPageItem { field: String },
}

impl TargetError {
    /// The stable code: `invalid_path` for a path the workspace path policy
    /// refuses (the code the workspace gives), `invalid_target` otherwise.
    pub fn code(&self) -> &'static str {
        match self {
            TargetError::BadPath { .. } => super::codes::INVALID_PATH,
            TargetError::MissingField { .. }
            | TargetError::BadUrl { .. }
            | TargetError::EmptyPageItem { .. } => super::codes::INVALID_TARGET,
        }
    }
}

/// Canonical, hashed arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CanonicalArguments {
    /// The arguments with canonical number forms.
    pub value: Value,
    /// Their RFC 8785 text.
    pub canonical: String,
    /// SHA-256 of `canonical`, lowercase hex.
    pub hash: String,
}

fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Parse the model's argument text into a canonical object. Empty text is `{}`
/// (some models send nothing for a tool without parameters).
pub fn parse_arguments(text: &str) -> Result<CanonicalArguments, ArgumentError> {
    if text.len() > MAX_ARGUMENTS_BYTES {
        return Err(ArgumentError::TooLarge {
            size: text.len(),
            limit: MAX_ARGUMENTS_BYTES,
        });
    }
    let value: Value = if text.trim().is_empty() {
        Value::Object(Default::default())
    } else {
        serde_json::from_str(text).map_err(|e| ArgumentError::NotJson {
            detail: e.to_string(),
        })?
    };
    canonicalise(&value)
}

/// Canonicalise an already parsed value (used again at dispatch).
pub fn canonicalise(value: &Value) -> Result<CanonicalArguments, ArgumentError> {
    if !value.is_object() {
        return Err(ArgumentError::NotObject {
            found: kind_of(value),
        });
    }
    let canonical = canonical_json(value).map_err(|e| ArgumentError::NotCanonical {
        detail: e.to_string(),
    })?;
    if canonical.len() > MAX_ARGUMENTS_BYTES {
        return Err(ArgumentError::TooLarge {
            size: canonical.len(),
            limit: MAX_ARGUMENTS_BYTES,
        });
    }
    // Re-reading the canonical text gives canonical number forms (1.0 -> 1).
    let value = serde_json::from_str(&canonical).map_err(|e| ArgumentError::NotCanonical {
        detail: e.to_string(),
    })?;
    let hash = sha256_hex(canonical.as_bytes());
    Ok(CanonicalArguments {
        value,
        canonical,
        hash,
    })
}

/// A compiled argument schema, shared between the registry and dispatch.
///
/// Compiled when made ([`CompiledSchema::compile`]) or at its first check
/// ([`CompiledSchema::deferred`], for the runtime's own definitions). On
/// wasm32 the `jsonschema` crate builds the meta-schema's validator again
/// for every schema it compiles (about 3 ms each in Chromium, where it does
/// not cache it), so compiling every built-in tool's schema when a runtime
/// starts took most of the browser runtime's start; deferred, a tool's
/// schema is compiled the first time a call of it is checked.
#[derive(Clone)]
pub struct CompiledSchema(Arc<SchemaState>);

struct SchemaState {
    /// The schema, kept until a deferred compilation.
    schema: Option<Value>,
    compiled: OnceLock<Result<jsonschema::Validator, String>>,
}

impl std::fmt::Debug for CompiledSchema {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CompiledSchema")
    }
}

fn object_schema(schema: &Value) -> Result<(), String> {
    match schema.get("type") {
        Some(Value::String(t)) if t == "object" => Ok(()),
        _ => Err("the schema's top-level \"type\" must be \"object\"".to_owned()),
    }
}

impl CompiledSchema {
    /// Compile a tool's argument schema. The schema must describe an object.
    pub fn compile(schema: &Value) -> Result<CompiledSchema, String> {
        object_schema(schema)?;
        let validator = jsonschema::validator_for(schema).map_err(|e| e.to_string())?;
        Ok(CompiledSchema(Arc::new(SchemaState {
            schema: None,
            compiled: OnceLock::from(Ok(validator)),
        })))
    }

    /// A schema compiled at its first check: for the runtime's built-in
    /// definitions only, whose schemas their tests compile (a schema that
    /// did not compile would refuse every call with `invalid_arguments`
    /// instead of refusing the definition). It must describe an object.
    pub fn deferred(schema: &Value) -> Result<CompiledSchema, String> {
        object_schema(schema)?;
        Ok(CompiledSchema(Arc::new(SchemaState {
            schema: Some(schema.clone()),
            compiled: OnceLock::new(),
        })))
    }

    /// [`CompiledSchema::deferred`] for a definition the runtime ships
    /// (`Origin::Builtin`). Debug builds (the tests) also compile it at
    /// once and panic if it does not compile: every test that registers
    /// the built-in tools checks their schemas as eager compilation did.
    pub fn builtin(schema: &Value) -> Result<CompiledSchema, String> {
        let deferred = CompiledSchema::deferred(schema)?;
        #[cfg(debug_assertions)]
        if let Err(e) = jsonschema::validator_for(schema) {
            panic!("a built-in tool's argument schema does not compile: {e}");
        }
        Ok(deferred)
    }

    fn validator(&self) -> Result<&jsonschema::Validator, ArgumentError> {
        let state = &*self.0;
        state
            .compiled
            .get_or_init(|| match &state.schema {
                Some(schema) => jsonschema::validator_for(schema).map_err(|e| e.to_string()),
                None => Err("the schema was not kept".to_owned()),
            })
            .as_ref()
            .map_err(|detail| ArgumentError::Schema {
                problems: vec![format!("the tool's own schema does not compile ({detail})")],
            })
    }

    /// Check arguments against the schema, listing what is wrong. Argument
    /// values are masked in the messages: they may be private.
    pub fn check(&self, args: &Value) -> Result<(), ArgumentError> {
        let validator = self.validator()?;
        let mut problems = Vec::new();
        let mut total = 0usize;
        for error in validator.iter_errors(args) {
            total += 1;
            if problems.len() < MAX_LISTED_PROBLEMS {
                let path = error.instance_path().to_string();
                let at = if path.is_empty() {
                    "/".to_owned()
                } else {
                    path
                };
                problems.push(format!("at {at}: {}", error.masked()));
            }
        }
        if total > problems.len() {
            problems.push(format!("and {} more", total - problems.len()));
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(ArgumentError::Schema { problems })
        }
    }
}

/// `scheme://host[:port]` of an http(s) URL, lowercase, default port omitted.
pub fn url_origin(url: &url::Url) -> Option<(String, String)> {
    if !matches!(url.scheme(), "http" | "https") {
        return None;
    }
    let host = url.host_str()?.to_ascii_lowercase();
    let origin = match url.port() {
        Some(port) => format!("{}://{}:{}", url.scheme(), host, port),
        None => format!("{}://{}", url.scheme(), host),
    };
    Some((origin, host))
}

fn string_field<'a>(args: &'a Value, field: &str) -> Result<&'a str, TargetError> {
    args.get(field)
        .and_then(Value::as_str)
        .ok_or_else(|| TargetError::MissingField {
            field: field.to_owned(),
        })
}

/// Derive what a call touches, and the narrowest scope that covers it.
pub fn derive_target(
    rule: &TargetRule,
    args: &Value,
) -> Result<(Target, TargetScope), TargetError> {
    match rule {
        TargetRule::None => Ok((Target::Nothing, TargetScope::NoTarget)),
        TargetRule::WorkspacePathArg { field } => {
            let raw = string_field(args, field)?;
            // The workspace's own path policy, so that the capability's scope
            // names exactly the path (NFC, no traversal) the workspace will touch.
            let path = agent_capabilities::WorkspacePath::parse(raw)
                .map_err(|e| TargetError::BadPath {
                    path: raw.to_owned(),
                    reason: e.to_string(),
                })?
                .as_str()
                .to_owned();
            Ok((
                Target::WorkspacePath { path: path.clone() },
                TargetScope::Workspace { prefix: path },
            ))
        }
        TargetRule::UrlArg { field } => {
            let raw = string_field(args, field)?;
            let url = url::Url::parse(raw).map_err(|e| TargetError::BadUrl {
                url: raw.to_owned(),
                why: e.to_string(),
            })?;
            let (origin, host) = url_origin(&url).ok_or_else(|| TargetError::BadUrl {
                url: raw.to_owned(),
                why: "only http and https URLs with a host are accepted".to_owned(),
            })?;
            Ok((
                Target::Url {
                    origin: origin.clone(),
                    host,
                },
                TargetScope::Origins {
                    origins: BTreeSet::from([origin]),
                },
            ))
        }
        TargetRule::PageArg { field } => {
            let item = string_field(args, field)?.to_owned();
            if item.is_empty() {
                return Err(TargetError::EmptyPageItem {
                    field: field.clone(),
                });
            }
            Ok((
                Target::PageItem { item: item.clone() },
                TargetScope::PageItems {
                    items: BTreeSet::from([item]),
                },
            ))
        }
        TargetRule::Endpoint { origin } => {
            let url = url::Url::parse(origin).map_err(|e| TargetError::BadUrl {
                url: origin.clone(),
                why: e.to_string(),
            })?;
            let (origin, host) = url_origin(&url).ok_or_else(|| TargetError::BadUrl {
                url: origin.clone(),
                why: "a plugin endpoint must be an http or https origin".to_owned(),
            })?;
            Ok((
                Target::Url {
                    origin: origin.clone(),
                    host,
                },
                TargetScope::Origins {
                    origins: BTreeSet::from([origin]),
                },
            ))
        }
        TargetRule::Fixed { scope } => Ok((Target::Nothing, scope.clone())),
        TargetRule::Process { .. } => Ok((Target::Nothing, TargetScope::NoTarget)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn canonical_form_sorts_keys_and_normalises_numbers() {
        let a = parse_arguments(r#"{"b": 1.0, "a": "x"}"#).unwrap();
        let b = parse_arguments(r#"{"a":"x","b":1}"#).unwrap();
        assert_eq!(a.canonical, r#"{"a":"x","b":1}"#);
        assert_eq!(a.hash, b.hash);
        assert_eq!(parse_arguments("").unwrap().canonical, "{}");
    }

    #[test]
    fn argument_size_limit_at_below_and_above() {
        // S5.3: the limit is on the raw text.
        let pad = |n: usize| format!(r#"{{"t":"{}"}}"#, "a".repeat(n - 8));
        assert!(parse_arguments(&pad(MAX_ARGUMENTS_BYTES - 1)).is_ok());
        assert!(parse_arguments(&pad(MAX_ARGUMENTS_BYTES)).is_ok());
        assert!(matches!(
            parse_arguments(&pad(MAX_ARGUMENTS_BYTES + 1)),
            Err(ArgumentError::TooLarge { .. })
        ));
    }

    #[test]
    fn non_objects_and_bad_json_are_refused() {
        assert!(matches!(
            parse_arguments("[1]"),
            Err(ArgumentError::NotObject { found: "an array" })
        ));
        assert!(matches!(
            parse_arguments("{"),
            Err(ArgumentError::NotJson { .. })
        ));
    }

    #[test]
    fn schema_problems_are_listed_with_masked_values() {
        let schema = CompiledSchema::compile(&json!({
            "type": "object",
            "properties": {"n": {"type": "integer"}},
            "required": ["n"],
            "additionalProperties": false
        }))
        .unwrap();
        let err = schema
            .check(&json!({"n": "secret-ish", "x": 1}))
            .unwrap_err();
        let text = err.to_string();
        assert!(text.contains("/n"), "{text}");
        assert!(!text.contains("secret-ish"), "{text}");
        assert!(CompiledSchema::compile(&json!({"type": "string"})).is_err());
    }

    #[test]
    fn a_deferred_schema_checks_as_a_compiled_one() {
        let schema = json!({
            "type": "object",
            "properties": {"n": {"type": "integer"}},
            "required": ["n"],
            "additionalProperties": false
        });
        let now = CompiledSchema::compile(&schema).unwrap();
        let later = CompiledSchema::deferred(&schema).unwrap();
        for args in [json!({"n": 1}), json!({"n": "x", "x": 1}), json!({})] {
            assert_eq!(now.check(&args), later.check(&args), "{args}");
        }
        assert!(CompiledSchema::deferred(&json!({"type": "string"})).is_err());
        // A schema that does not compile refuses every call.
        let broken =
            CompiledSchema::deferred(&json!({"type": "object", "minLength": "x"})).unwrap();
        assert!(matches!(
            broken.check(&json!({})),
            Err(ArgumentError::Schema { .. })
        ));
    }

    #[test]
    fn targets_are_derived_and_bad_ones_refused() {
        let rule = TargetRule::WorkspacePathArg {
            field: "path".into(),
        };
        // An NFD spelling is scoped as the NFC path the workspace stores.
        let (t, _) = derive_target(&rule, &json!({"path": "notes/e\u{301}t\u{e9}.md"})).unwrap();
        assert_eq!(
            t,
            Target::WorkspacePath {
                path: "notes/\u{e9}t\u{e9}.md".into()
            }
        );
        for bad in [
            "/etc/passwd",
            "a/../b",
            "a//b",
            "",
            "./notes/a.md",
            "C:/x",
            "nul.txt",
        ] {
            assert!(
                derive_target(&rule, &json!({ "path": bad })).is_err(),
                "{bad}"
            );
        }
        let rule = TargetRule::UrlArg {
            field: "url".into(),
        };
        let (t, s) = derive_target(&rule, &json!({"url": "https://Example.com:8443/x?y"})).unwrap();
        assert_eq!(
            t,
            Target::Url {
                origin: "https://example.com:8443".into(),
                host: "example.com".into()
            }
        );
        assert!(s.covers(&t));
        assert!(derive_target(&rule, &json!({"url": "file:///etc/passwd"})).is_err());
    }

    #[test]
    fn a_page_argument_names_the_page_item_and_its_summary_is_bounded() {
        let rule = TargetRule::PageArg {
            field: "card".into(),
        };
        let (t, s) = derive_target(&rule, &json!({"card": "order 42"})).unwrap();
        assert_eq!(t.summary(), "page order 42");
        assert_eq!(s.summary(), "page order 42");
        assert!(s.covers(&t));
        let other = Target::PageItem {
            item: "order 43".into(),
        };
        assert!(!s.covers(&other));
        // At the summary bound the item is shown whole; above it, cut.
        let bound = agent_capabilities::scope::PAGE_ITEM_SUMMARY_CHARS;
        for (len, whole) in [(bound - 1, true), (bound, true), (bound + 1, false)] {
            let item = "é".repeat(len);
            let (t, s) = derive_target(&rule, &json!({ "card": item })).unwrap();
            let summary = t.summary();
            assert_eq!(summary == format!("page {item}"), whole, "{len}");
            assert!(
                summary.chars().count() <= "page ".len() + bound + 1,
                "{len}"
            );
            assert!(s.covers(&t), "the scope names the whole item");
        }
        for bad in [
            json!({}),
            json!({"card": 7}),
            json!({"card": null}),
            json!({"card": ""}),
        ] {
            let err = derive_target(&rule, &bad).unwrap_err();
            assert_eq!(err.code(), crate::tool::codes::INVALID_TARGET, "{bad}");
        }
    }
}
