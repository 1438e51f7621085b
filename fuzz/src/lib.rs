//! `agent-fuzz`: one coverage-guided fuzz target for every parser of outside
//! input (issue 40, parts 3 and 4), and the checks each asserts.
//!
//! This crate owns the *properties* the fuzzers check, not the parsers: each
//! target calls the owning crate's public entry point and asserts what that
//! crate promises (a path the gate accepts stays under the root; a URL the
//! policy accepts never reaches a private or loopback address; canonical
//! JSON round-trips; decoders answer malformed input with a typed error and
//! bounded output; ...). A violated property is a panic, which AFL++ records
//! as a crash.
//!
//! Every target is a `fn check(data: &[u8])` in [`targets`]. Two callers
//! share them:
//!
//! - `src/main.rs` (feature `afl`), the AFL++ harness: `cargo xtask fuzz
//!   TARGET --time N` builds it with `cargo afl build` and runs `cargo afl
//!   fuzz` with the target named in [`TARGET_ENV`];
//! - `tests/corpus.rs`, which replays every committed seed (`corpus/TARGET/`)
//!   and every crash found so far (`regressions/TARGET/`) through the same
//!   check under plain `cargo test`, without AFL.
//!
//! The crate is a workspace of its own so that the main workspace's builds
//! never compile it (AFL's instrumentation flags would also rebuild every
//! dependency).

pub mod targets;

/// The environment variable that names the target the AFL++ harness runs.
pub const TARGET_ENV: &str = "AGENT_FUZZ_TARGET";

/// One fuzz target: its name (also its corpus folder) and its check.
#[derive(Clone, Copy)]
pub struct Target {
    pub name: &'static str,
    /// What the target feeds and asserts, in one line.
    pub about: &'static str,
    pub check: fn(&[u8]),
}

impl std::fmt::Debug for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name)
    }
}

/// Every target, in the order `cargo xtask fuzz --all` runs them.
pub const TARGETS: &[Target] = &[
    Target {
        name: "url_policy",
        about: "agent-fetch's URL policy: an accepted URL never names or resolves to a non-public address, in any IP spelling",
        check: targets::url_policy::check,
    },
    Target {
        name: "workspace_path",
        about: "the workspace path gate: an accepted path is normalised and stays under the root",
        check: targets::workspace_path::check,
    },
    Target {
        name: "canonical_json",
        about: "RFC 8785 canonical JSON: parse, canonical, parse gives the same value; canonical is idempotent",
        check: targets::canonical_json::check,
    },
    Target {
        name: "readable_html",
        about: "agent-readable: the pre-scan's estimate bounds the parsed tree; answers are bounded",
        check: targets::readable_html::check,
    },
    Target {
        name: "pdf",
        about: "extract_document's PDF reader: the pre-scan's refusals hold, answers are bounded, no panic",
        check: targets::pdf::check,
    },
    Target {
        name: "sse",
        about: "agent-http's SSE decoder: any split gives the same events, line and event bounds hold",
        check: targets::sse::check,
    },
    Target {
        name: "mcp_jsonrpc",
        about: "MCP JSON-RPC messages from a server: typed errors, accepted messages re-encode to themselves",
        check: targets::mcp_jsonrpc::check,
    },
    Target {
        name: "provider_anthropic",
        about: "the Anthropic Messages stream decoder, through the SSE decoder",
        check: targets::provider::check_anthropic,
    },
    Target {
        name: "provider_openai",
        about: "the OpenAI Chat Completions stream decoder, through the SSE decoder",
        check: targets::provider::check_openai,
    },
    Target {
        name: "provider_gemini",
        about: "the Gemini streamGenerateContent decoder, through the SSE decoder",
        check: targets::provider::check_gemini,
    },
    Target {
        name: "plugin_path",
        about: "plugin path placeholders: a filled or admitted URL stays inside its function",
        check: targets::plugin_path::check,
    },
    Target {
        name: "stored_records",
        about: "stored records (SQLite rows, IndexedDB values): decode(encode(x)) == x, garbage is a typed error",
        check: targets::stored_records::check,
    },
];

/// The target called `name`.
pub fn target(name: &str) -> Option<&'static Target> {
    TARGETS.iter().find(|t| t.name == name)
}
