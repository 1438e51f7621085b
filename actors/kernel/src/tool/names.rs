//! The naming rules of tools and providers, one owner for every crate that
//! registers tools (the registry, plugins, MCP servers): model-facing names
//! derived deterministically from function names, the 64-character limit,
//! and the provider ids and tool names reserved for the runtime (S5.5).

use agent_capabilities::sha256_hex;

/// Longest model-facing tool name (the common provider limit).
pub const MAX_TOOL_NAME_LEN: usize = 64;

/// Longest provider id (a plugin or MCP server id; the origin rule's limit).
pub const MAX_PROVIDER_ID_LEN: usize = 64;

/// Provider ids that belong to the runtime: no plugin or MCP server may use them.
pub const RESERVED_PROVIDER_IDS: &[&str] = &[
    "builtin",
    "builtins",
    "runtime",
    "system",
    "user",
    "agent",
    "tools",
    "plugin",
    "plugins",
    "mcp",
    "supervisor",
    "kernel",
    "workspace",
    "artifacts",
    "fetch",
    "javascript",
    "skills",
    "research",
];

/// Tool names that belong to built-in tools: no plugin or MCP function may
/// take one, even when the built-in itself is not registered on this host.
pub const RESERVED_TOOL_NAMES: &[&str] = &[
    "search_tools",
    "load_tools",
    "ask_user",
    "update_plan",
    "run_javascript",
    "extract_document",
    "fetch_url",
    "publish_artifact",
    "start_deep_research",
    "web_search",
];

/// A function or provider name could not be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    #[error("invalid tool name {name:?}: {why}")]
    InvalidName { name: String, why: String },
    #[error(
        "provider id {id:?} is not valid: use 1 to {MAX_PROVIDER_ID_LEN} characters from A-Z a-z 0-9 - _ ."
    )]
    InvalidProviderId { id: String },
    #[error(
        "provider id {id:?} is reserved for the runtime's built-in tools; give the plugin or server another id"
    )]
    ReservedProviderId { id: String },
}

/// Derive the name the model sees for a function: ASCII lowercase, every run
/// of other characters becomes one `_`, no leading or trailing `_`, at most
/// 64 characters (a longer name keeps 55 characters and gets `_` plus 8 hex
/// digits of the SHA-256 of the original). Deterministic: the same function
/// name always gives the same model-facing name, and two names that map to
/// the same result collide explicitly.
pub fn model_facing_name(function: &str) -> Result<String, NameError> {
    let mut out = String::with_capacity(function.len());
    let mut pending_sep = false;
    for c in function.chars() {
        if c.is_ascii_alphanumeric() {
            if pending_sep && !out.is_empty() {
                out.push('_');
            }
            pending_sep = false;
            out.push(c.to_ascii_lowercase());
        } else {
            pending_sep = true;
        }
    }
    if out.is_empty() {
        return Err(NameError::InvalidName {
            name: function.to_owned(),
            why: "it has no ASCII letters or digits".to_owned(),
        });
    }
    if out.len() > MAX_TOOL_NAME_LEN {
        let mut short: String = out.chars().take(55).collect();
        while short.ends_with('_') {
            short.pop();
        }
        let hash = sha256_hex(function.as_bytes());
        out = format!("{short}_{}", &hash[..8]);
    }
    Ok(out)
}

/// True when `name` is already in model-facing form.
pub fn is_model_facing_name(name: &str) -> bool {
    model_facing_name(name).is_ok_and(|n| n == name)
}

/// True when `id` (compared case-insensitively) belongs to the runtime.
pub fn is_reserved_provider_id(id: &str) -> bool {
    RESERVED_PROVIDER_IDS.contains(&id.to_ascii_lowercase().as_str())
}

/// Check a plugin or MCP server id: 1 to 64 characters from
/// `A-Z a-z 0-9 - _ .` (what an origin `plugin:<id>` / `mcp:<id>` accepts)
/// and not reserved.
pub fn check_provider_id(id: &str) -> Result<(), NameError> {
    let valid = !id.is_empty()
        && id.len() <= MAX_PROVIDER_ID_LEN
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.');
    if !valid {
        return Err(NameError::InvalidProviderId { id: id.to_owned() });
    }
    if is_reserved_provider_id(id) {
        return Err(NameError::ReservedProviderId { id: id.to_owned() });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn model_facing_names_are_deterministic() {
        assert_eq!(model_facing_name("Create Issue").unwrap(), "create_issue");
        assert_eq!(model_facing_name("create-issue").unwrap(), "create_issue");
        assert_eq!(model_facing_name("__x..y__").unwrap(), "x_y");
        assert!(model_facing_name("!!!").is_err());
        let long = "a".repeat(100);
        let n = model_facing_name(&long).unwrap();
        assert_eq!(n.len(), 64);
        assert_eq!(n, model_facing_name(&long).unwrap());
        assert_ne!(n, model_facing_name(&"a".repeat(101)).unwrap());
        assert!(is_model_facing_name(&n));
        assert!(is_model_facing_name(&"b".repeat(64)));
        assert!(!is_model_facing_name(&"b".repeat(65)));
    }

    #[test]
    fn provider_ids_are_checked_and_reserved_ones_refused() {
        assert!(check_provider_id("github").is_ok());
        assert!(check_provider_id("my-server.v2_x").is_ok());
        assert!(check_provider_id(&"a".repeat(64)).is_ok());
        assert!(matches!(
            check_provider_id(&"a".repeat(65)),
            Err(NameError::InvalidProviderId { .. })
        ));
        assert!(matches!(
            check_provider_id(""),
            Err(NameError::InvalidProviderId { .. })
        ));
        assert!(matches!(
            check_provider_id("a b"),
            Err(NameError::InvalidProviderId { .. })
        ));
        assert!(matches!(
            check_provider_id("MCP"),
            Err(NameError::ReservedProviderId { .. })
        ));
        assert!(matches!(
            check_provider_id("builtin"),
            Err(NameError::ReservedProviderId { .. })
        ));
    }
}
