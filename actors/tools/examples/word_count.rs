//! A complete tool written with the tool-author API: `word_count` counts the
//! words, lines and characters of a text and lists its most frequent words.
//!
//! The tool itself is the `WordCount` type below (a definition and a `call`).
//! `spawn_tool` gives it argument validation, capability verification,
//! tracing and panic reporting; the tools actor gives it a model-facing
//! schema, the approval policy and the result envelope. `main` shows the
//! whole path a call takes: register, show, prepare, approve (mint), dispatch.
//!
//! Run it with `cargo run -p agent-tools --example word_count`.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::json;

use agent_capabilities::{EffectSet, Idempotency, Origin, Sensitivity};
use agent_kernel::protocol::{TargetRule, ToolDefinition, ToolFailure, ToolSuccess};
use agent_tools::{Tool, ToolContext};

/// Longest text accepted, in characters.
pub const MAX_TEXT_CHARS: usize = 20_000;

/// The tool. It holds no state; a tool that needs some (a client, a cache)
/// keeps it here, shared by every call.
pub struct WordCount;

/// The arguments, decoded with serde after the JSON Schema accepted them.
#[derive(Debug, Deserialize)]
pub struct WordCountArgs {
    pub text: String,
    /// How many of the most frequent words to list (0 to 10).
    #[serde(default)]
    pub top: usize,
}

#[cfg_attr(target_arch = "wasm32", async_trait::async_trait(?Send))]
#[cfg_attr(not(target_arch = "wasm32"), async_trait::async_trait)]
impl Tool for WordCount {
    type Args = WordCountArgs;

    fn definition(&self) -> ToolDefinition {
        ToolDefinition {
            name: "word_count".into(),
            description:
                "Count the words, lines and characters of a text, and list its most frequent words."
                    .into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "text": {"type": "string", "maxLength": MAX_TEXT_CHARS,
                             "description": "The text to count."},
                    "top": {"type": "integer", "minimum": 0, "maximum": 10,
                            "description": "How many of the most frequent words to list."}
                },
                "required": ["text"],
                "additionalProperties": false
            }),
            origin: Origin::User,
            provider: None,
            // Pure computation: no effects, no target, so the policy runs it
            // automatically in every mode.
            effects: EffectSet::new(),
            idempotency: Idempotency::Idempotent,
            sensitivity: Sensitivity::Private,
            target: TargetRule::None,
            annotations: None,
        }
    }

    async fn call(
        &self,
        ctx: &ToolContext,
        args: WordCountArgs,
    ) -> Result<ToolSuccess, ToolFailure> {
        if args.text.trim().is_empty() {
            return Err(ctx.fail("empty_text", "the text is empty; pass the text to count"));
        }
        let mut counts: BTreeMap<String, usize> = BTreeMap::new();
        for word in args.text.split_whitespace() {
            let word: String = word
                .chars()
                .filter(|c| c.is_alphanumeric() || *c == '\'')
                .flat_map(char::to_lowercase)
                .collect();
            if !word.is_empty() {
                *counts.entry(word).or_default() += 1;
            }
        }
        let mut top: Vec<(&String, &usize)> = counts.iter().collect();
        // Most frequent first; equal counts alphabetically, so output is deterministic.
        top.sort_by(|a, b| b.1.cmp(a.1).then_with(|| a.0.cmp(b.0)));
        top.truncate(args.top);
        Ok(ctx.ok(json!({
            "words": counts.values().sum::<usize>(),
            "distinct_words": counts.len(),
            "lines": args.text.lines().count(),
            "characters": args.text.chars().count(),
            "top": top.into_iter().map(|(w, n)| json!({"word": w, "count": n})).collect::<Vec<_>>(),
        })))
    }
}

#[cfg(not(target_arch = "wasm32"))]
pub async fn demo(text: &str) -> agent_kernel::protocol::ToolResult {
    use agent_capabilities::{Authority, Grant, Uses};
    use agent_kernel::ids::{CallId, RunId, SessionId};
    use agent_kernel::protocol::{RunToolConfig, ToolCall, ToolInvocation, ToolsMsg};
    use agent_tools::registry::{Registry, ToolRegistration};
    use agent_tools::{ToolsOptions, spawn_tool, spawn_tools};

    // The tokio test host; a real host (agent-host-native) brings its own.
    let executor = agent_test_support::executor();
    let clock = agent_test_support::clock();

    // 1. The host spawns the tool and registers it.
    let (addr, definition) =
        spawn_tool(executor.clone(), clock.clone(), WordCount).expect("valid definition");
    let mut registry = Registry::new();
    registry
        .register(ToolRegistration::builtin(definition, addr))
        .expect("no collision");
    let tools = spawn_tools(executor, clock.clone(), registry, ToolsOptions::default());

    // 2. The supervisor shows the schemas, then prepares the model's call.
    let run = RunId::new("example-run").expect("valid id");
    let config = RunToolConfig::default();
    let schemas = tools
        .addr
        .ask(|reply| ToolsMsg::Schemas {
            run: run.clone(),
            config: config.clone(),
            reply,
        })
        .await
        .expect("tools actor running");
    println!(
        "schemas shown: {:?}",
        schemas.iter().map(|s| &s.name).collect::<Vec<_>>()
    );
    let call = ToolCall {
        call_id: CallId::new("call-1").expect("valid id"),
        name: "word_count".into(),
        arguments: json!({ "text": text, "top": 3 }).to_string(),
    };
    let prepared = tools
        .addr
        .ask(|reply| ToolsMsg::Prepare {
            run: run.clone(),
            session: SessionId::new("example-session").expect("valid id"),
            call,
            attempt: 1,
            config,
            reply,
        })
        .await
        .expect("tools actor running")
        .expect("valid call");
    println!("policy: {:?}", prepared.decision);

    // 3. The supervisor's Authority mints the capability (after asking, when asked to).
    let authority = Authority::new(run.as_str(), [42; 32]);
    let d = &prepared.draft;
    let capability = authority.mint(Grant {
        tool: d.tool.clone(),
        fingerprint: d.fingerprint.clone(),
        origin: d.origin.clone(),
        effects: d.effects.clone(),
        scope: d.scope.clone(),
        uses: Uses::Once,
        expires_at_ms: clock.wall_ms() + 60_000,
    });

    // 4. Dispatch: re-checked, verified, run, wrapped.
    let invocation = ToolInvocation {
        draft: prepared.draft,
        capability,
        verifier: authority.verifier(),
        progress: Default::default(),
    };
    tools
        .addr
        .ask(|reply| ToolsMsg::Dispatch { invocation, reply })
        .await
        .expect("tools actor running")
}

#[cfg(not(target_arch = "wasm32"))]
pub fn main() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let result = runtime.block_on(demo("the cat sat on the mat\nthe end"));
    println!(
        "{}",
        serde_json::to_string_pretty(&result).unwrap_or_default()
    );
}

#[cfg(target_arch = "wasm32")]
fn main() {}
