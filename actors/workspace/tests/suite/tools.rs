//! S5.3, S6.1, S5.8: the model-facing tools end to end through the tool
//! actor, with capabilities minted by a real `Authority`.

use std::collections::BTreeSet;

use serde_json::{Value, json};

use agent_capabilities::{
    ApprovalIdentity, ApprovalMode, Authority, Decision, EffectClass, Grant, Origin, PolicyInput,
    Target, TargetScope, Trust, Uses, decide, sha256_hex,
};
use agent_kernel::protocol::{
    InvocationDraft, ReferenceKind, ResultSpill, TargetRule, ToolAddr, ToolDefinition,
    ToolInvocation, ToolMsg, ToolResult, ToolSuccess,
};
use agent_kernel::tool::codes;
use agent_kernel::tool::validate::{canonicalise, derive_target};
use agent_kernel::{CallId, RunId};
use agent_workspace::limits::MAX_SUMMARY_CHARS;
use agent_workspace::{
    Quotas, SpillTarget, ToolDeps, WorkspaceDirectory, WorkspaceSpill, all_tool_definitions,
    bounded_summary, builtin_tools,
};

use super::{Env, p};

const RUN: &str = "run-1";

fn definition(name: &str) -> ToolDefinition {
    all_tool_definitions()
        .into_iter()
        .find(|d| d.name == name)
        .unwrap_or_else(|| panic!("no tool {name}"))
}

struct Harness {
    env: Env,
    dir: WorkspaceDirectory,
    /// Each workspace tool's actor, by tool name.
    tools: std::collections::BTreeMap<String, ToolAddr>,
    authority: Authority,
}

impl Harness {
    fn new() -> Harness {
        let env = Env::new("s1");
        let dir = env.directory(Quotas::default());
        let deps = ToolDeps {
            directory: dir.clone(),
        };
        let tools = builtin_tools(&env.host, deps)
            .expect("the workspace definitions are valid")
            .into_iter()
            .map(|t| (t.definition.name, t.addr))
            .collect();
        Harness {
            env,
            dir,
            tools,
            authority: Authority::new(RUN, [7; 32]),
        }
    }

    fn grant(&self, tool: &str, scope: TargetScope, uses: Uses) -> agent_capabilities::Capability {
        let def = definition(tool);
        self.authority.mint(Grant {
            tool: tool.into(),
            fingerprint: def.fingerprint().unwrap(),
            origin: Origin::Builtin,
            effects: def.effects.clone(),
            scope,
            uses,
            expires_at_ms: self.env.now_ms() + 60_000,
        })
    }

    fn invocation(
        &self,
        tool: &str,
        call: &str,
        arguments: Value,
        cap: agent_capabilities::Capability,
    ) -> ToolInvocation {
        let def = definition(tool);
        // What the tools actor prepares: the canonical hash, and the target
        // and scope the definition's rule gives for these arguments.
        let canonical = canonicalise(&arguments).expect("canonical arguments");
        let (target, scope) = derive_target(&def.target, &canonical.value).unwrap_or((
            Target::Nothing,
            TargetScope::Workspace {
                prefix: String::new(),
            },
        ));
        let draft = InvocationDraft {
            run: RunId::new(RUN).unwrap(),
            session: self.env.session.clone(),
            call_id: CallId::new(call).unwrap(),
            tool: tool.into(),
            fingerprint: def.fingerprint().unwrap(),
            args_hash: canonical.hash,
            arguments: canonical.value,
            effects: def.effects.clone(),
            idempotency: def.idempotency,
            sensitivity: def.sensitivity,
            origin: def.origin.clone(),
            provider: None,
            target,
            scope,
            attempt: 1,
            idempotency_key: call.into(),
        };
        ToolInvocation {
            draft,
            capability: cap,
            verifier: self.authority.verifier(),
            progress: Default::default(),
        }
    }

    /// Send to the actor of the draft's tool.
    fn send(&self, invocation: ToolInvocation) -> ToolResult {
        let tool = invocation.draft.tool.clone();
        self.send_to(&tool, invocation)
    }

    /// Send to the actor of `tool`, whatever the draft names.
    fn send_to(&self, tool: &str, invocation: ToolInvocation) -> ToolResult {
        let addr = self.tools.get(tool).expect("a workspace tool");
        self.env
            .run(addr.ask(|reply| ToolMsg::Invoke { invocation, reply }))
            .unwrap()
    }

    /// Invoke with a whole-workspace, for-run capability.
    fn call(&self, tool: &str, call: &str, arguments: Value) -> ToolResult {
        let cap = self.grant(
            tool,
            TargetScope::Workspace {
                prefix: String::new(),
            },
            Uses::ForRun,
        );
        self.send(self.invocation(tool, call, arguments, cap))
    }
}

fn ok(r: ToolResult) -> ToolSuccess {
    match r {
        ToolResult::Success(s) => s,
        ToolResult::Error(e) => panic!("expected success, got {}: {}", e.code, e.message),
    }
}

fn err(r: ToolResult) -> (String, String) {
    match r {
        ToolResult::Error(e) => (e.code, e.message),
        ToolResult::Success(s) => panic!("expected an error, got {:?}", s.content),
    }
}

pub fn s5_3_definitions_declare_effects_and_targets() {
    let defs = all_tool_definitions();
    let names: Vec<&str> = defs.iter().map(|d| d.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "workspace_list",
            "workspace_read",
            "workspace_write",
            "workspace_move",
            "workspace_delete",
            "workspace_restore",
            "workspace_empty_trash",
            "publish_artifact"
        ]
    );
    let effects = |n: &str| -> Vec<EffectClass> { definition(n).effects.into_iter().collect() };
    assert_eq!(effects("workspace_list"), [EffectClass::ReadLocal]);
    assert_eq!(effects("workspace_read"), [EffectClass::ReadLocal]);
    for w in [
        "workspace_write",
        "workspace_move",
        "workspace_delete",
        "workspace_restore",
    ] {
        assert_eq!(effects(w), [EffectClass::WriteLocal], "{w}");
    }
    assert_eq!(
        effects("workspace_empty_trash"),
        [EffectClass::DestructiveLocal]
    );
    assert_eq!(
        effects("publish_artifact"),
        [EffectClass::ReadLocal, EffectClass::WriteLocal]
    );
    for d in &defs {
        assert_eq!(d.origin, Origin::Builtin);
        assert_eq!(d.parameters["type"], "object", "{}", d.name);
        assert_eq!(d.parameters["additionalProperties"], false, "{}", d.name);
    }
    assert_eq!(
        definition("workspace_write").target,
        TargetRule::WorkspacePathArg {
            field: "path".into()
        }
    );
    for d in ["workspace_read", "workspace_delete", "workspace_restore"] {
        assert_eq!(
            definition(d).target,
            TargetRule::WorkspacePathArg {
                field: "path".into()
            }
        );
    }
    let whole = TargetRule::Fixed {
        scope: TargetScope::Workspace {
            prefix: String::new(),
        },
    };
    for d in [
        "workspace_list",
        "workspace_move",
        "workspace_empty_trash",
        "publish_artifact",
    ] {
        assert_eq!(definition(d).target, whole, "{d}");
    }
    let fps: BTreeSet<String> = defs
        .iter()
        .map(|d| d.fingerprint().unwrap().as_str().to_owned())
        .collect();
    assert_eq!(fps.len(), defs.len(), "fingerprints are distinct");
    assert_eq!(
        definition("workspace_read").fingerprint().unwrap(),
        definition("workspace_read").fingerprint().unwrap()
    );
}

fn policy(def: &ToolDefinition, mode: ApprovalMode) -> Decision {
    let scope = TargetScope::Workspace {
        prefix: String::new(),
    };
    let input = PolicyInput {
        identity: ApprovalIdentity {
            origin: def.origin.clone(),
            provider: None,
            tool: def.name.clone(),
            fingerprint: def.fingerprint().unwrap(),
            effects: def.effects.clone(),
            scope: scope.clone(),
        },
        allowed: true,
        trusted_external: false,
        unknown_mcp_function: false,
        target_summary: scope.summary(),
    };
    decide(mode, &input)
}

pub fn s6_1_empty_trash_asks_for_approval_and_writes_do_not() {
    let empty = definition("workspace_empty_trash");
    for mode in [ApprovalMode::Permissive, ApprovalMode::Strict] {
        assert!(
            matches!(policy(&empty, mode), Decision::AskOnce { .. }),
            "{mode:?}"
        );
        for read in ["workspace_list", "workspace_read"] {
            assert!(matches!(
                policy(&definition(read), mode),
                Decision::Automatic { .. }
            ));
        }
    }
    for write in [
        "workspace_write",
        "workspace_move",
        "workspace_delete",
        "workspace_restore",
        "publish_artifact",
    ] {
        let def = definition(write);
        assert!(
            matches!(
                policy(&def, ApprovalMode::Permissive),
                Decision::Automatic { .. }
            ),
            "{write}"
        );
        assert!(
            matches!(policy(&def, ApprovalMode::Strict), Decision::AskOnce { .. }),
            "{write}"
        );
    }
    // Without the approved destructive capability the trash is not emptied:
    // a write_local grant is refused for it.
    let h = Harness::new();
    ok(h.call(
        "workspace_write",
        "c1",
        json!({"path": "a.txt", "content": "x"}),
    ));
    ok(h.call("workspace_delete", "c2", json!({"path": "a.txt"})));
    let wrong = h.authority.mint(Grant {
        tool: "workspace_empty_trash".into(),
        fingerprint: empty.fingerprint().unwrap(),
        origin: Origin::Builtin,
        effects: [EffectClass::WriteLocal].into(),
        scope: TargetScope::Workspace {
            prefix: String::new(),
        },
        uses: Uses::Once,
        expires_at_ms: h.env.now_ms() + 1_000,
    });
    let trashed = h
        .env
        .run(h.dir.get(&h.env.session).unwrap().workspace.list_trash())
        .unwrap();
    let (code, _) = err(h.send(h.invocation("workspace_empty_trash", "c3", json!({}), wrong)));
    assert_eq!(code, "capability_refused");
    assert_eq!(
        h.env
            .run(h.dir.get(&h.env.session).unwrap().workspace.list_trash())
            .unwrap()
            .len(),
        1
    );
    // Nothing deleted: the trash record and its blob are still stored.
    assert_eq!(h.env.table_len(agent_kernel::host::Table::Trash), 1);
    assert!(h.env.has_blob(&trashed[0].entry.hash));
    // The one-time approved capability empties it, once.
    let approved = h.grant(
        "workspace_empty_trash",
        TargetScope::Workspace {
            prefix: String::new(),
        },
        Uses::Once,
    );
    let s = ok(h.send(h.invocation("workspace_empty_trash", "c4", json!({}), approved.clone())));
    assert_eq!(s.receipts.len(), 1);
    assert_eq!(s.receipts[0].effect, EffectClass::DestructiveLocal);
    assert_eq!(s.content["removed"], 1);
    let (code, msg) = err(h.send(h.invocation("workspace_empty_trash", "c5", json!({}), approved)));
    assert_eq!(code, "capability_refused");
    assert!(msg.contains("already used"), "{msg}");
}

pub fn s5_3_tools_round_trip_with_receipts() {
    let h = Harness::new();
    let s = ok(h.call(
        "workspace_write",
        "c1",
        json!({"path": "notes/plan.md", "content": "# Plan"}),
    ));
    assert_eq!(s.content["revision"], 1);
    assert_eq!(s.content["created"], true);
    assert_eq!(s.trust, Trust::Internal);
    assert_eq!(s.provenance.tool, "workspace_write");
    assert_eq!(s.receipts.len(), 1);
    assert_eq!(s.receipts[0].effect, EffectClass::WriteLocal);
    assert_eq!(s.receipts[0].target, "notes/plan.md");
    assert_eq!(s.receipts[0].detail["new_revision"], 1);
    assert_eq!(s.references[0].kind, ReferenceKind::WorkspaceFile);

    let s = ok(h.call("workspace_read", "c2", json!({"path": "notes/plan.md"})));
    assert_eq!(s.content["content"], "# Plan");
    assert_eq!(s.content["mime"], "text/markdown");
    assert_eq!(
        s.trust,
        Trust::ExternalUntrusted,
        "tool-written content is data"
    );
    assert!(s.receipts.is_empty());

    let s = ok(h.call("workspace_write", "c3", json!({"path": "notes/plan.md", "content": "\n- step", "append": true, "expectedRevision": 1})));
    assert_eq!(s.content["revision"], 2);
    let s = ok(h.call(
        "workspace_read",
        "c4",
        json!({"path": "notes/plan.md", "offset": 2, "length": 4}),
    ));
    assert_eq!(s.content["content"], "Plan");
    assert_eq!(s.content["nextOffset"], 6);
    assert_eq!(s.content["truncated"], true);

    let s = ok(h.call("workspace_list", "c5", json!({"folder": ""})));
    assert_eq!(s.content["folders"], json!(["notes"]));
    let s = ok(h.call(
        "workspace_list",
        "c6",
        json!({"folder": "notes/", "recursive": true}),
    ));
    assert_eq!(s.content["files"][0]["path"], "notes/plan.md");

    let s = ok(h.call(
        "workspace_move",
        "c7",
        json!({"from": "notes/plan.md", "to": "archive/plan.md", "expectedRevision": 2}),
    ));
    assert_eq!(s.receipts[0].target, "notes/plan.md -> archive/plan.md");
    let s = ok(h.call("workspace_delete", "c8", json!({"path": "archive/plan.md"})));
    let trash_id = s.content["trashId"].as_str().unwrap().to_owned();
    assert_eq!(s.receipts[0].detail["trash_id"], trash_id.as_str());
    let s = ok(h.call("workspace_list", "c9", json!({"folder": "", "trash": true})));
    assert_eq!(s.content["trash"][0]["path"], "archive/plan.md");
    let s = ok(h.call(
        "workspace_restore",
        "c10",
        json!({"path": "archive/plan.md"}),
    ));
    assert_eq!(s.content["trashId"], trash_id.as_str());

    let s = ok(h.call(
        "publish_artifact",
        "c11",
        json!({"name": "Plan", "path": "archive/plan.md"}),
    ));
    let id = s.content["artifactId"].as_str().unwrap().to_owned();
    assert_eq!(id, sha256_hex(b"# Plan\n- step"));
    assert_eq!(s.references[0].kind, ReferenceKind::Artifact);
    assert_eq!(s.receipts.len(), 1);
    let s = ok(h.call(
        "publish_artifact",
        "c12",
        json!({"name": "Again", "content": "# Plan\n- step"}),
    ));
    assert_eq!(s.content["artifactId"], id.as_str());
    assert_eq!(s.content["created"], false);
    let (code, _) = err(h.call(
        "publish_artifact",
        "c13",
        json!({"name": "Both", "content": "x", "path": "a"}),
    ));
    assert_eq!(code, "invalid_arguments");
    let (code, _) = err(h.call(
        "publish_artifact",
        "c14",
        json!({"name": "Stale", "path": "archive/plan.md", "expectedRevision": 1}),
    ));
    assert_eq!(code, "stale_revision");

    // Bad arguments and paths are typed errors, nothing runs.
    let (code, msg) = err(h.call("workspace_read", "c15", json!({"path": "../etc/passwd"})));
    assert_eq!(code, "invalid_path");
    assert!(msg.contains("traversal") || msg.contains(".."), "{msg}");
    let (code, _) = err(h.call("workspace_read", "c16", json!({"path": "a", "extra": 1})));
    assert_eq!(code, "invalid_arguments");
    // A session that is not open.
    h.dir.close(&h.env.session);
    let (code, _) = err(h.call("workspace_read", "c17", json!({"path": "archive/plan.md"})));
    assert_eq!(code, "workspace_not_open");
}

pub fn s5_3_capability_is_verified_before_any_effect() {
    let h = Harness::new();
    let notes = TargetScope::Workspace {
        prefix: "notes".into(),
    };
    let before = (h.env.blob_count(), h.env.mem.storage().commit_count());
    // Out of scope.
    let cap = h.grant("workspace_write", notes.clone(), Uses::ForRun);
    let (code, msg) = err(h.send(h.invocation(
        "workspace_write",
        "c1",
        json!({"path": "other/x.md", "content": "x"}),
        cap.clone(),
    )));
    assert_eq!(code, "capability_refused");
    assert!(msg.contains("nothing was done"), "{msg}");
    // A capability for another tool.
    let (code, _) = err(h.send(h.invocation(
        "workspace_delete",
        "c2",
        json!({"path": "notes/x.md"}),
        cap.clone(),
    )));
    assert_eq!(code, "capability_refused");
    // A move is checked on both paths.
    let (code, _) = err(h.send(h.invocation(
        "workspace_move",
        "c3",
        json!({"from": "notes/a", "to": "other/b"}),
        h.grant("workspace_move", notes.clone(), Uses::ForRun),
    )));
    assert_eq!(code, "capability_refused");
    // Expired.
    let expired = h.authority.mint(Grant {
        tool: "workspace_write".into(),
        fingerprint: definition("workspace_write").fingerprint().unwrap(),
        origin: Origin::Builtin,
        effects: [EffectClass::WriteLocal].into(),
        scope: notes.clone(),
        uses: Uses::ForRun,
        expires_at_ms: h.env.now_ms(),
    });
    let (code, _) = err(h.send(h.invocation(
        "workspace_write",
        "c4",
        json!({"path": "notes/x.md", "content": "x"}),
        expired,
    )));
    assert_eq!(code, "capability_refused");
    // Minted by another authority (a reload).
    let stranger = Authority::new(RUN, [8; 32]).mint(Grant {
        tool: "workspace_write".into(),
        fingerprint: definition("workspace_write").fingerprint().unwrap(),
        origin: Origin::Builtin,
        effects: [EffectClass::WriteLocal].into(),
        scope: notes.clone(),
        uses: Uses::ForRun,
        expires_at_ms: u64::from(u32::MAX) * 1000,
    });
    let (code, _) = err(h.send(h.invocation(
        "workspace_write",
        "c5",
        json!({"path": "notes/x.md", "content": "x"}),
        stranger,
    )));
    assert_eq!(code, "capability_refused");
    assert_eq!(
        (h.env.blob_count(), h.env.mem.storage().commit_count()),
        before,
        "nothing happened"
    );
    // In scope, it works.
    ok(h.send(h.invocation(
        "workspace_write",
        "c6",
        json!({"path": "notes/x.md", "content": "x"}),
        cap,
    )));
    // A scope spelled in NFD covers the NFC file (the draft's target is the
    // NFC path the definition's rule derives).
    let nfd = "notes/cafe\u{301}.md";
    let inv = h.invocation(
        "workspace_write",
        "c8",
        json!({"path": nfd, "content": "x"}),
        h.grant(
            "workspace_write",
            TargetScope::Workspace { prefix: nfd.into() },
            Uses::Once,
        ),
    );
    let s = ok(h.send(inv));
    assert_eq!(s.content["path"], "notes/caf\u{e9}.md");
    // An unknown tool name is refused by the actor.
    let mut inv = h.invocation(
        "workspace_read",
        "c7",
        json!({"path": "notes/x.md"}),
        h.grant("workspace_read", notes, Uses::ForRun),
    );
    inv.draft.tool = "workspace_format_disk".into();
    // Each tool has its own actor (the shell): one that is handed a draft
    // for a tool it does not serve refuses it before anything runs.
    assert_eq!(
        err(h.send_to("workspace_read", inv)).0,
        codes::DRAFT_MISMATCH
    );
}

pub fn s2_3_replayed_write_is_recognised() {
    let h = Harness::new();
    let args = json!({"path": "a.txt", "content": "once"});
    let first = ok(h.call("workspace_write", "call-1", args.clone()));
    let again = ok(h.call("workspace_write", "call-1", args));
    assert_eq!(again.content["replayed"], true);
    assert_eq!(again.content["revision"], first.content["revision"]);
    // Another call with the same arguments is not a replay.
    let (code, _) = err(h.call(
        "workspace_write",
        "call-2",
        json!({"path": "a.txt", "content": "once"}),
    ));
    assert_eq!(code, "already_exists");
    // Moves and deletes replay too.
    ok(h.call(
        "workspace_move",
        "call-3",
        json!({"from": "a.txt", "to": "b.txt"}),
    ));
    let s = ok(h.call(
        "workspace_move",
        "call-3",
        json!({"from": "a.txt", "to": "b.txt"}),
    ));
    assert_eq!(s.content["replayed"], true);
    ok(h.call("workspace_delete", "call-4", json!({"path": "b.txt"})));
    let s = ok(h.call("workspace_delete", "call-4", json!({"path": "b.txt"})));
    assert_eq!(s.content["replayed"], true);
    assert_eq!(
        h.env
            .run(h.dir.get(&h.env.session).unwrap().workspace.list_trash())
            .unwrap()
            .len(),
        1
    );
}

pub fn s7_3_tool_write_needs_expected_revision_to_overwrite() {
    let h = Harness::new();
    ok(h.call(
        "workspace_write",
        "c1",
        json!({"path": "a.txt", "content": "v1"}),
    ));
    let (code, msg) = err(h.call(
        "workspace_write",
        "c2",
        json!({"path": "a.txt", "content": "v2"}),
    ));
    assert_eq!(code, "already_exists");
    assert!(msg.contains("expectedRevision 1"), "{msg}");
    assert!(
        msg.contains("\"revision\":1"),
        "the latest state is returned: {msg}"
    );
    ok(h.call(
        "workspace_write",
        "c3",
        json!({"path": "a.txt", "content": "v2", "expectedRevision": 1}),
    ));
    let (code, msg) = err(h.call(
        "workspace_write",
        "c4",
        json!({"path": "a.txt", "content": "v3", "expectedRevision": 1}),
    ));
    assert_eq!(code, "stale_revision");
    assert!(msg.contains("\"revision\":2"), "{msg}");
    let s = ok(h.call("workspace_read", "c5", json!({"path": "a.txt"})));
    assert_eq!(s.content["content"], "v2");
}

pub fn s5_8_spill_stores_large_results_and_summarises() {
    let h = Harness::new();
    let big = format!("[{}]", vec!["\"row\""; 5_000].join(","));
    let run = RunId::new(RUN).unwrap();
    let call = CallId::new("call-9").unwrap();
    let spill = WorkspaceSpill::new(h.dir.clone(), SpillTarget::Workspace);
    let r = h
        .env
        .run(spill.spill(
            &h.env.session,
            &run,
            &call,
            "fetch_url",
            "application/json",
            big.clone().into_bytes(),
        ))
        .unwrap();
    assert_eq!(r.kind, ReferenceKind::WorkspaceFile);
    assert_eq!(r.id, ".results/run-1/call-9.json");
    assert_eq!(
        (r.size, r.hash.clone()),
        (big.len() as u64, sha256_hex(big.as_bytes()))
    );
    // Spilling the same call again gives the same reference (a retry).
    let again = h
        .env
        .run(spill.spill(
            &h.env.session,
            &run,
            &call,
            "fetch_url",
            "application/json",
            big.clone().into_bytes(),
        ))
        .unwrap();
    assert_eq!(again, r);
    // The model reads it in windows.
    let s = ok(h.call("workspace_read", "c1", json!({"path": r.id})));
    assert_eq!(s.content["truncated"], false);
    assert_eq!(s.content["content"].as_str().unwrap().len(), big.len());
    // Only a bounded summary enters the context.
    let summary = bounded_summary(big.as_bytes(), &r, 10_000);
    assert!(summary.chars().count() <= MAX_SUMMARY_CHARS);
    assert!(summary.contains(".results/run-1/call-9.json"));
    // As an Artifact instead.
    let spill = WorkspaceSpill::new(h.dir.clone(), SpillTarget::Artifact);
    let r = h
        .env
        .run(spill.spill(
            &h.env.session,
            &run,
            &call,
            "fetch_url",
            "application/json",
            big.clone().into_bytes(),
        ))
        .unwrap();
    assert_eq!(
        (r.kind, r.id.as_str()),
        (ReferenceKind::Artifact, sha256_hex(big.as_bytes()).as_str())
    );
    assert_eq!(h.env.blob_count(), 1, "the same bytes are one blob");
    // A closed session is an error, not a panic.
    let other = agent_kernel::SessionId::new("closed").unwrap();
    assert!(
        h.env
            .run(spill.spill(&other, &run, &call, "t", "text/plain", vec![1]))
            .is_err()
    );
}

pub fn reserved_results_folder_is_read_only_for_the_model() {
    let h = Harness::new();
    let spill = WorkspaceSpill::new(h.dir.clone(), SpillTarget::Workspace);
    let r = h
        .env
        .run(spill.spill(
            &h.env.session,
            &RunId::new(RUN).unwrap(),
            &CallId::new("c0").unwrap(),
            "t",
            "text/plain",
            b"result".to_vec(),
        ))
        .unwrap();
    for (tool, args) in [
        (
            "workspace_write",
            json!({"path": ".results/x.txt", "content": "x"}),
        ),
        (
            "workspace_write",
            json!({"path": ".Results/x.txt", "content": "x"}),
        ),
        (
            "workspace_write",
            json!({"path": r.id, "content": "x", "expectedRevision": 1}),
        ),
    ] {
        assert_eq!(err(h.call(tool, "c1", args)).0, "reserved_path");
    }
    ok(h.call(
        "workspace_write",
        "c2",
        json!({"path": "mine.txt", "content": "m"}),
    ));
    assert_eq!(
        err(h.call(
            "workspace_move",
            "c3",
            json!({"from": "mine.txt", "to": ".results/mine.txt"})
        ))
        .0,
        "reserved_path"
    );
    ok(h.call("workspace_read", "c4", json!({"path": r.id})));
    ok(h.call("workspace_delete", "c5", json!({"path": r.id})));
    let _ = p("unused");
}

pub fn read_window_and_list_size_at_below_and_above() {
    use agent_workspace::limits::MAX_READ_BYTES;
    use agent_workspace::tools::MAX_LIST_ENTRIES;
    let h = Harness::new();
    let ws = h.dir.get(&h.env.session).unwrap().workspace;
    let max = usize::try_from(MAX_READ_BYTES).unwrap();
    for (name, len, truncated) in [
        ("below", max - 1, false),
        ("at", max, false),
        ("above", max + 1, true),
    ] {
        h.env
            .run(ws.create(&p(name), vec![b'a'; len], "text/plain", super::user()))
            .unwrap();
        let s = ok(h.call("workspace_read", "r", json!({"path": name})));
        assert_eq!(s.content["truncated"], truncated, "{name}");
        assert_eq!(
            s.content["content"].as_str().unwrap().len(),
            len.min(max),
            "{name}"
        );
    }
    let s = ok(h.call(
        "workspace_read",
        "r",
        json!({"path": "above", "offset": max}),
    ));
    assert_eq!(
        (
            s.content["content"].as_str().unwrap(),
            &s.content["truncated"]
        ),
        ("a", &json!(false))
    );
    // A window that would cut a character ends before it.
    h.env
        .run(ws.create(
            &p("utf8.txt"),
            "aé".as_bytes().to_vec(),
            "text/plain",
            super::user(),
        ))
        .unwrap();
    let s = ok(h.call(
        "workspace_read",
        "r",
        json!({"path": "utf8.txt", "length": 2}),
    ));
    assert_eq!(
        (
            s.content["content"].as_str().unwrap(),
            &s.content["nextOffset"]
        ),
        ("a", &json!(1))
    );
    // Binary content is not shown.
    h.env
        .run(ws.create(
            &p("img.png"),
            vec![0x89, 0xff, 0x00],
            "image/png",
            super::user(),
        ))
        .unwrap();
    let s = ok(h.call("workspace_read", "r", json!({"path": "img.png"})));
    assert_eq!(
        (s.content["binary"].clone(), s.content["content"].clone()),
        (json!(true), Value::Null)
    );

    // Listing: at most MAX_LIST_ENTRIES entries reach the model.
    for i in 0..MAX_LIST_ENTRIES - 1 {
        h.env
            .run(ws.create(
                &p(&format!("many/{i:04}")),
                vec![],
                "text/plain",
                super::user(),
            ))
            .unwrap();
    }
    let list = |h: &Harness| ok(h.call("workspace_list", "l", json!({"folder": "many"}))).content;
    let c = list(&h);
    assert_eq!(
        (c["files"].as_array().unwrap().len(), &c["truncated"]),
        (MAX_LIST_ENTRIES - 1, &json!(false))
    );
    h.env
        .run(ws.create(&p("many/at"), vec![], "text/plain", super::user()))
        .unwrap();
    let c = list(&h);
    assert_eq!(
        (c["files"].as_array().unwrap().len(), &c["truncated"]),
        (MAX_LIST_ENTRIES, &json!(false))
    );
    h.env
        .run(ws.create(&p("many/above"), vec![], "text/plain", super::user()))
        .unwrap();
    let c = list(&h);
    assert_eq!(
        (c["files"].as_array().unwrap().len(), &c["truncated"]),
        (MAX_LIST_ENTRIES, &json!(true))
    );
    assert_eq!(c["total"], MAX_LIST_ENTRIES + 1);
}
