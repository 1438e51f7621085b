//! `AgentProfileV2` validation (S10.1): every bound tested at, below and
//! above it, each error naming its field; strict decoding; credentials
//! redacted from `Debug` and from diffs. Pure: runs natively and on wasm32.

use agent_kernel::budget::{MAX_DURATION_MS, MAX_TOKENS, MAX_TOOL_CALLS, MAX_TOOL_ROUNDS};
use agent_profiles::profile::{
    MAX_CREDENTIALS, MAX_HANDLE_BYTES, MAX_ID_BYTES, MAX_ITEM_BYTES, MAX_LIST_ITEMS,
    MAX_MODEL_BYTES, MAX_NAME_CHARS, MAX_OUTPUT_TOKENS, MAX_PROMPT_ADDITION_BYTES,
    MAX_PROVIDER_BYTES,
};
use agent_profiles::{AgentProfileV2, ProfileError, ProfileId, diff};

#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test as test;
#[cfg(target_arch = "wasm32")]
wasm_bindgen_test::wasm_bindgen_test_configure!(run_in_browser);

fn base() -> AgentProfileV2 {
    AgentProfileV2::new(ProfileId::new("p").unwrap(), "Profile")
}

fn field_of(r: Result<(), ProfileError>) -> Option<&'static str> {
    match r {
        Ok(()) => None,
        Err(ProfileError::Invalid { field, .. }) => Some(field),
        Err(other) => panic!("not a field error: {other}"),
    }
}

fn list(n: usize, len: usize) -> Option<std::collections::BTreeSet<String>> {
    Some(
        (0..n)
            .map(|i| {
                let s = format!("{i:0width$}", width = len.max(1));
                s[s.len() - len..].to_string()
            })
            .collect(),
    )
}

type Edit = Box<dyn Fn(&mut AgentProfileV2)>;

/// S10.1: (what, edit, field named or None when valid).
fn cases() -> Vec<(&'static str, Edit, Option<&'static str>)> {
    vec![
        ("defaults", Box::new(|_| {}), None),
        // name: 1..=100 characters, not blank, no control characters.
        (
            "name at bound",
            Box::new(|p| p.name = "é".repeat(MAX_NAME_CHARS)),
            None,
        ),
        (
            "name below bound",
            Box::new(|p| p.name = "n".repeat(MAX_NAME_CHARS - 1)),
            None,
        ),
        (
            "name above bound",
            Box::new(|p| p.name = "n".repeat(MAX_NAME_CHARS + 1)),
            Some("name"),
        ),
        (
            "name empty",
            Box::new(|p| p.name = String::new()),
            Some("name"),
        ),
        (
            "name blank",
            Box::new(|p| p.name = "  ".into()),
            Some("name"),
        ),
        (
            "name control",
            Box::new(|p| p.name = "a\u{7}b".into()),
            Some("name"),
        ),
        // model: 1..=200 bytes, no whitespace.
        (
            "model at bound",
            Box::new(|p| p.model.model = "m".repeat(MAX_MODEL_BYTES)),
            None,
        ),
        (
            "model below bound",
            Box::new(|p| p.model.model = "m".repeat(MAX_MODEL_BYTES - 1)),
            None,
        ),
        (
            "model above bound",
            Box::new(|p| p.model.model = "m".repeat(MAX_MODEL_BYTES + 1)),
            Some("model.model"),
        ),
        (
            "model empty",
            Box::new(|p| p.model.model = String::new()),
            Some("model.model"),
        ),
        (
            "model whitespace",
            Box::new(|p| p.model.model = "gpt 4".into()),
            Some("model.model"),
        ),
        (
            "provider at bound",
            Box::new(|p| p.model.provider = Some("p".repeat(MAX_PROVIDER_BYTES))),
            None,
        ),
        (
            "provider above bound",
            Box::new(|p| p.model.provider = Some("p".repeat(MAX_PROVIDER_BYTES + 1))),
            Some("model.provider"),
        ),
        (
            "provider empty",
            Box::new(|p| p.model.provider = Some(String::new())),
            Some("model.provider"),
        ),
        (
            "output tokens 1",
            Box::new(|p| p.model.max_output_tokens = Some(1)),
            None,
        ),
        (
            "output tokens 0",
            Box::new(|p| p.model.max_output_tokens = Some(0)),
            Some("model.max_output_tokens"),
        ),
        (
            "output tokens at bound",
            Box::new(|p| p.model.max_output_tokens = Some(MAX_OUTPUT_TOKENS)),
            None,
        ),
        (
            "output tokens above bound",
            Box::new(|p| p.model.max_output_tokens = Some(MAX_OUTPUT_TOKENS + 1)),
            Some("model.max_output_tokens"),
        ),
        // budget: the kernel's bounds (S4.4), named under `budget.`.
        ("rounds 1", Box::new(|p| p.budget.max_tool_rounds = 1), None),
        (
            "rounds 0",
            Box::new(|p| p.budget.max_tool_rounds = 0),
            Some("budget.max_tool_rounds"),
        ),
        (
            "rounds at bound",
            Box::new(|p| p.budget.max_tool_rounds = MAX_TOOL_ROUNDS as u32),
            None,
        ),
        (
            "rounds above bound",
            Box::new(|p| p.budget.max_tool_rounds = MAX_TOOL_ROUNDS as u32 + 1),
            Some("budget.max_tool_rounds"),
        ),
        (
            "calls 0",
            Box::new(|p| p.budget.max_tool_calls = 0),
            Some("budget.max_tool_calls"),
        ),
        (
            "calls at bound",
            Box::new(|p| p.budget.max_tool_calls = MAX_TOOL_CALLS as u32),
            None,
        ),
        (
            "calls above bound",
            Box::new(|p| p.budget.max_tool_calls = MAX_TOOL_CALLS as u32 + 1),
            Some("budget.max_tool_calls"),
        ),
        (
            "tokens at bound",
            Box::new(|p| p.budget.max_tokens = Some(MAX_TOKENS)),
            None,
        ),
        (
            "tokens above bound",
            Box::new(|p| p.budget.max_tokens = Some(MAX_TOKENS + 1)),
            Some("budget.max_tokens"),
        ),
        (
            "tokens 0",
            Box::new(|p| p.budget.max_tokens = Some(0)),
            Some("budget.max_tokens"),
        ),
        (
            "duration at bound",
            Box::new(|p| p.budget.max_duration_ms = Some(MAX_DURATION_MS)),
            None,
        ),
        (
            "duration above bound",
            Box::new(|p| p.budget.max_duration_ms = Some(MAX_DURATION_MS + 1)),
            Some("budget.max_duration_ms"),
        ),
        // allowlists: at most 256 entries of 1..=128 bytes without whitespace.
        (
            "tools at count bound",
            Box::new(|p| p.tools = list(MAX_LIST_ITEMS, 8)),
            None,
        ),
        (
            "tools below count bound",
            Box::new(|p| p.tools = list(MAX_LIST_ITEMS - 1, 8)),
            None,
        ),
        (
            "tools above count bound",
            Box::new(|p| p.tools = list(MAX_LIST_ITEMS + 1, 8)),
            Some("tools"),
        ),
        ("tools empty set", Box::new(|p| p.tools = list(0, 8)), None),
        (
            "tool name at bound",
            Box::new(|p| p.tools = list(1, MAX_ITEM_BYTES)),
            None,
        ),
        (
            "tool name above bound",
            Box::new(|p| p.tools = list(1, MAX_ITEM_BYTES + 1)),
            Some("tools"),
        ),
        (
            "tool name empty",
            Box::new(|p| p.tools = Some([String::new()].into())),
            Some("tools"),
        ),
        (
            "plugins above count bound",
            Box::new(|p| p.plugins = list(MAX_LIST_ITEMS + 1, 8)),
            Some("plugins"),
        ),
        (
            "plugin name with space",
            Box::new(|p| p.plugins = Some(["a b".to_string()].into())),
            Some("plugins"),
        ),
        (
            "mcp at count bound",
            Box::new(|p| p.mcp_servers = list(MAX_LIST_ITEMS, 8)),
            None,
        ),
        (
            "mcp name above bound",
            Box::new(|p| p.mcp_servers = list(1, MAX_ITEM_BYTES + 1)),
            Some("mcp_servers"),
        ),
        (
            "knowledge above count bound",
            Box::new(|p| p.knowledge = list(MAX_LIST_ITEMS + 1, 8)),
            Some("knowledge"),
        ),
        (
            "knowledge name control",
            Box::new(|p| p.knowledge = Some(["kb\u{0}".to_string()].into())),
            Some("knowledge"),
        ),
        (
            "skills at count bound",
            Box::new(|p| p.skills = list(MAX_LIST_ITEMS, 8)),
            None,
        ),
        (
            "skills above count bound",
            Box::new(|p| p.skills = list(MAX_LIST_ITEMS + 1, 8)),
            Some("skills"),
        ),
        // system prompt addition: at most 16 KiB, line breaks and tabs only.
        (
            "prompt at bound",
            Box::new(|p| p.system_prompt_addition = Some("x".repeat(MAX_PROMPT_ADDITION_BYTES))),
            None,
        ),
        (
            "prompt below bound",
            Box::new(|p| {
                p.system_prompt_addition = Some("x".repeat(MAX_PROMPT_ADDITION_BYTES - 1))
            }),
            None,
        ),
        (
            "prompt above bound",
            Box::new(|p| {
                p.system_prompt_addition = Some("x".repeat(MAX_PROMPT_ADDITION_BYTES + 1))
            }),
            Some("system_prompt_addition"),
        ),
        (
            "prompt line breaks",
            Box::new(|p| p.system_prompt_addition = Some("a\r\n\tb".into())),
            None,
        ),
        (
            "prompt control",
            Box::new(|p| p.system_prompt_addition = Some("a\u{1b}[2J".into())),
            Some("system_prompt_addition"),
        ),
        // credentials: at most 16 handles of 1..=128 bytes.
        (
            "credentials at count bound",
            Box::new(|p| {
                p.credentials.handles = (0..MAX_CREDENTIALS)
                    .map(|i| (format!("k{i}"), format!("h{i}")))
                    .collect();
            }),
            None,
        ),
        (
            "credentials above count bound",
            Box::new(|p| {
                p.credentials.handles = (0..=MAX_CREDENTIALS)
                    .map(|i| (format!("k{i}"), format!("h{i}")))
                    .collect();
            }),
            Some("credentials"),
        ),
        (
            "handle at bound",
            Box::new(|p| {
                p.credentials
                    .handles
                    .insert("k".into(), "h".repeat(MAX_HANDLE_BYTES));
            }),
            None,
        ),
        (
            "handle above bound",
            Box::new(|p| {
                p.credentials
                    .handles
                    .insert("k".into(), "h".repeat(MAX_HANDLE_BYTES + 1));
            }),
            Some("credentials"),
        ),
        (
            "purpose above bound",
            Box::new(|p| {
                p.credentials
                    .handles
                    .insert("k".repeat(MAX_HANDLE_BYTES + 1), "h".into());
            }),
            Some("credentials"),
        ),
        (
            "handle empty",
            Box::new(|p| {
                p.credentials.handles.insert("k".into(), String::new());
            }),
            Some("credentials"),
        ),
    ]
}

#[test]
fn every_bound_at_below_and_above() {
    for (what, edit, expected) in cases() {
        let mut p = base();
        edit(&mut p);
        assert_eq!(field_of(p.validate()), expected, "{what}");
    }
}

/// S10.1: ids are bounded and safe in storage keys.
#[test]
fn profile_ids() {
    assert!(ProfileId::new("a".repeat(MAX_ID_BYTES)).is_ok());
    assert!(ProfileId::new("a".repeat(MAX_ID_BYTES - 1)).is_ok());
    for bad in [
        "a".repeat(MAX_ID_BYTES + 1),
        String::new(),
        "-lead".into(),
        "a/b".into(),
        "a b".into(),
        "é".into(),
        "../x".into(),
    ] {
        assert!(
            matches!(
                ProfileId::new(bad.clone()),
                Err(ProfileError::Invalid { field: "id", .. })
            ),
            "{bad:?}"
        );
    }
    assert!(ProfileId::new("work.profile-2_b").is_ok());
}

/// S10.1: decoding is strict (unknown fields refused, ids checked) and an
/// error never echoes a credential value.
#[test]
fn decoding_is_strict_and_errors_keep_secrets_out() {
    let ok = serde_json::json!({"id": "p", "name": "P"});
    let p: AgentProfileV2 = serde_json::from_value(ok).unwrap();
    assert_eq!(p, base().clone_with_name("P"));
    for bad in [
        serde_json::json!({"id": "p", "name": "P", "admin": true}),
        serde_json::json!({"id": "a/b", "name": "P"}),
        serde_json::json!({"id": "p", "name": "P", "model": {"model": "m", "url": "http://x"}}),
        serde_json::json!({"id": "p", "name": "P", "approval": "yolo"}),
    ] {
        assert!(
            serde_json::from_value::<AgentProfileV2>(bad.clone()).is_err(),
            "{bad}"
        );
    }
    let mut p = base();
    p.credentials
        .handles
        .insert("provider_api_key".into(), "sk live 123".into());
    let err = p.validate().unwrap_err().to_string();
    assert!(!err.contains("sk live"), "{err}");
    assert!(!format!("{p:?}").contains("sk live"));
}

/// S10.3: a diff shows that a credential handle changed, never its value.
#[test]
fn diff_redacts_credentials() {
    let a = base();
    let mut b = base();
    b.credentials
        .handles
        .insert("provider_api_key".into(), "handle-secret".into());
    b.approval = agent_capabilities::ApprovalMode::Strict;
    let changes = diff(&a, &b);
    let text = serde_json::to_string(&changes).unwrap();
    assert!(!text.contains("handle-secret"), "{text}");
    let paths: Vec<&str> = changes.iter().map(|c| c.path.as_str()).collect();
    assert_eq!(paths, ["approval", "credentials.handles.provider_api_key"]);
    assert_eq!(changes[1].before, serde_json::Value::Null);
    assert_eq!(changes[1].after, serde_json::json!("<redacted>"));
}

trait WithName {
    fn clone_with_name(&self, name: &str) -> AgentProfileV2;
}

impl WithName for AgentProfileV2 {
    fn clone_with_name(&self, name: &str) -> AgentProfileV2 {
        AgentProfileV2 {
            name: name.into(),
            ..self.clone()
        }
    }
}
