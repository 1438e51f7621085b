//! The one tool-actor shell (`agent_kernel::tool`, SPEC S5.3, S5.4) on the
//! deterministic memory host, with capabilities minted by a real
//! `Authority`: every refusal happens before the tool's `call` runs (a
//! counter proves it), a panic is an error, calls run at once, and a
//! `ToolMsg::Cancel` ends exactly its run's read-only calls.
#![cfg(not(target_arch = "wasm32"))]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::{Value, json};

use agent_capabilities::{
    Authority, Capability, EffectClass, Grant, Idempotency, Target, TargetScope, Uses,
};
use agent_kernel::memory::MemoryHost;
use agent_kernel::protocol::{
    InvocationDraft, MAX_PROGRESS_MESSAGE_BYTES, ProgressSink, TargetRule, ToolAddr,
    ToolDefinition, ToolFailure, ToolInvocation, ToolMsg, ToolProgress, ToolResult, ToolSuccess,
};
use agent_kernel::tool::validate::{canonicalise, derive_target};
use agent_kernel::tool::{Tool, ToolContext, codes, spawn_tool};
use agent_kernel::{CallId, RunId, SessionId};

const RUN: &str = "run-1";
const KEY: [u8; 32] = [7; 32];

/// What the probe's calls share with the test.
#[derive(Default)]
struct Probe {
    /// Calls that reached `call` (every check passed).
    calls: AtomicUsize,
    /// Each call in `wait` mode says here that it started...
    entered: Option<async_channel::Sender<()>>,
    /// ...then waits until this is closed (or its run is cancelled).
    gate: Option<async_channel::Receiver<()>>,
}

/// A tool over one workspace path whose behaviour its `mode` argument picks.
struct ProbeTool {
    name: &'static str,
    effect: EffectClass,
    probe: Arc<Probe>,
}

fn probe_definition(name: &str, effect: EffectClass) -> ToolDefinition {
    ToolDefinition::builder(name)
        .description("A probe of the tool-actor shell.")
        .parameters(json!({
            "type": "object",
            "properties": {
                "path": {"type": "string"},
                "mode": {"enum": ["ok", "panic", "wait", "observe", "progress"]}
            },
            "required": ["path", "mode"],
            "additionalProperties": false
        }))
        .effect(effect)
        .idempotency(Idempotency::Idempotent)
        .target(TargetRule::WorkspacePathArg {
            field: "path".into(),
        })
        .build()
}

#[derive(serde::Deserialize)]
struct ProbeArgs {
    path: String,
    mode: String,
}

#[async_trait::async_trait]
impl Tool for ProbeTool {
    type Args = ProbeArgs;

    fn definition(&self) -> ToolDefinition {
        probe_definition(self.name, self.effect)
    }

    async fn call(&self, ctx: &ToolContext, args: ProbeArgs) -> Result<ToolSuccess, ToolFailure> {
        self.probe.calls.fetch_add(1, Ordering::SeqCst);
        match args.mode.as_str() {
            "panic" => panic!("probe exploded"),
            "wait" => {
                if let Some(entered) = &self.probe.entered {
                    entered.send(()).await.expect("the test listens");
                }
                if let Some(gate) = &self.probe.gate {
                    // Closed by the test: every waiting call goes on.
                    let _ = gate.recv().await;
                }
                Ok(ctx.ok(json!({"path": args.path, "waited": true})))
            }
            // An effectful call decides itself what a stop means.
            "observe" => {
                if let Some(entered) = &self.probe.entered {
                    entered.send(()).await.expect("the test listens");
                }
                ctx.cancelled().await;
                assert!(ctx.is_cancelled());
                Err(ctx.fail("stopped_before_writing", "the run was stopped first"))
            }
            "progress" => {
                for step in 1..=3 {
                    ctx.report_progress(ToolProgress {
                        progress: f64::from(step),
                        total: Some(3.0),
                        message: Some(format!("step {step} {}", "é".repeat(400))),
                    });
                }
                // Not a number: dropped by the sink, never passed on.
                ctx.report_progress(ToolProgress {
                    progress: f64::NAN,
                    total: None,
                    message: None,
                });
                Ok(ctx.ok(json!({"path": args.path})))
            }
            _ => Ok(ctx.ok(json!({"path": args.path}))),
        }
    }
}

struct Env {
    mem: MemoryHost,
    authority: Authority,
}

impl Env {
    fn new() -> Env {
        Env {
            mem: MemoryHost::fifo(3),
            authority: Authority::new(RUN, KEY),
        }
    }

    fn spawn(&self, name: &'static str, effect: EffectClass, probe: Arc<Probe>) -> ToolAddr {
        let host = self.mem.host();
        spawn_tool(
            host.executor,
            host.clock,
            ProbeTool {
                name,
                effect,
                probe,
            },
        )
        .expect("a valid definition")
        .0
    }

    fn now(&self) -> u64 {
        self.mem.host().clock.wall_ms()
    }

    /// A capability from `authority` for `def` over `scope`.
    fn grant_from(
        &self,
        authority: &Authority,
        def: &ToolDefinition,
        scope: TargetScope,
    ) -> Capability {
        authority.mint(Grant {
            tool: def.name.clone(),
            fingerprint: def.fingerprint().unwrap(),
            origin: def.origin.clone(),
            effects: def.effects.clone(),
            scope,
            uses: Uses::ForRun,
            expires_at_ms: self.now() + 60_000,
        })
    }

    fn grant(&self, def: &ToolDefinition, scope: TargetScope) -> Capability {
        self.grant_from(&self.authority, def, scope)
    }

    /// The invocation the tools actor would dispatch for `arguments` in
    /// `run`, with `capability`.
    fn invocation(
        &self,
        def: &ToolDefinition,
        run: &str,
        call: &str,
        arguments: Value,
        capability: Capability,
        authority: &Authority,
    ) -> ToolInvocation {
        let canonical = canonicalise(&arguments).unwrap();
        let (target, scope) = derive_target(&def.target, &canonical.value).unwrap();
        ToolInvocation {
            draft: InvocationDraft {
                run: RunId::new(run).unwrap(),
                session: SessionId::new("s1").unwrap(),
                call_id: CallId::new(call).unwrap(),
                tool: def.name.clone(),
                fingerprint: def.fingerprint().unwrap(),
                args_hash: canonical.hash,
                arguments: canonical.value,
                effects: def.effects.clone(),
                idempotency: def.idempotency,
                sensitivity: def.sensitivity,
                origin: def.origin.clone(),
                provider: def.provider.clone(),
                target,
                scope,
                attempt: 1,
                idempotency_key: call.into(),
            },
            capability,
            verifier: authority.verifier(),
            progress: Default::default(),
        }
    }

    fn ask(&self, addr: &ToolAddr, invocation: ToolInvocation) -> ToolResult {
        self.mem
            .block_on(addr.ask(|reply| ToolMsg::Invoke { invocation, reply }))
            .expect("the call ends")
            .expect("the actor answers")
    }
}

fn whole() -> TargetScope {
    TargetScope::Workspace {
        prefix: String::new(),
    }
}

fn code(r: &ToolResult) -> &str {
    match r {
        ToolResult::Error(e) => &e.code,
        ToolResult::Success(s) => panic!("expected an error, got {:?}", s.content),
    }
}

fn args(path: &str, mode: &str) -> Value {
    json!({"path": path, "mode": mode})
}

#[test]
fn s5_3_a_forged_capability_is_refused_before_the_call() {
    let env = Env::new();
    let probe = Arc::new(Probe::default());
    let addr = env.spawn("probe", EffectClass::ReadLocal, probe.clone());
    let def = probe_definition("probe", EffectClass::ReadLocal);
    // Minted for the same run with another key (not the run's authority).
    let forger = Authority::new(RUN, [8; 32]);
    let forged = env.grant_from(&forger, &def, whole());
    let r = env.ask(
        &addr,
        env.invocation(
            &def,
            RUN,
            "c1",
            args("a.md", "ok"),
            forged.clone(),
            &env.authority,
        ),
    );
    assert_eq!(code(&r), codes::CAPABILITY_REFUSED);
    // A token of another run's authority does not verify for this run.
    let other_run = Authority::new("run-2", KEY);
    let r = env.ask(
        &addr,
        env.invocation(
            &def,
            RUN,
            "c2",
            args("a.md", "ok"),
            env.grant_from(&other_run, &def, whole()),
            &other_run,
        ),
    );
    assert_eq!(code(&r), codes::CAPABILITY_REFUSED);
    assert_eq!(probe.calls.load(Ordering::SeqCst), 0, "nothing ran");
    // The run's own capability works.
    let ok = env.ask(
        &addr,
        env.invocation(
            &def,
            RUN,
            "c3",
            args("a.md", "ok"),
            env.grant(&def, whole()),
            &env.authority,
        ),
    );
    assert!(ok.is_success(), "{ok:?}");
    assert_eq!(probe.calls.load(Ordering::SeqCst), 1);
}

#[test]
fn s5_3_a_capability_for_another_tool_definition_or_target_is_refused() {
    let env = Env::new();
    let probe = Arc::new(Probe::default());
    let addr = env.spawn("probe", EffectClass::ReadLocal, probe.clone());
    let def = probe_definition("probe", EffectClass::ReadLocal);
    // For another tool.
    let other_tool = probe_definition("other", EffectClass::ReadLocal);
    let r = env.ask(
        &addr,
        env.invocation(
            &def,
            RUN,
            "c1",
            args("a.md", "ok"),
            env.grant(&other_tool, whole()),
            &env.authority,
        ),
    );
    assert_eq!(code(&r), codes::CAPABILITY_REFUSED);
    // For another definition of this tool (its fingerprint differs).
    let mut changed = def.clone();
    changed.description = "A changed description.".into();
    let r = env.ask(
        &addr,
        env.invocation(
            &def,
            RUN,
            "c2",
            args("a.md", "ok"),
            env.grant(&changed, whole()),
            &env.authority,
        ),
    );
    assert_eq!(code(&r), codes::CAPABILITY_REFUSED);
    // For another target: its scope does not cover the path.
    let r = env.ask(
        &addr,
        env.invocation(
            &def,
            RUN,
            "c3",
            args("secret/a.md", "ok"),
            env.grant(
                &def,
                TargetScope::Workspace {
                    prefix: "notes".into(),
                },
            ),
            &env.authority,
        ),
    );
    assert_eq!(code(&r), codes::CAPABILITY_REFUSED);
    assert_eq!(probe.calls.load(Ordering::SeqCst), 0, "nothing ran");
}

#[test]
fn s5_3_a_draft_whose_target_is_not_what_its_arguments_give_is_refused() {
    let env = Env::new();
    let probe = Arc::new(Probe::default());
    let addr = env.spawn("probe", EffectClass::ReadLocal, probe.clone());
    let def = probe_definition("probe", EffectClass::ReadLocal);
    let notes = TargetScope::Workspace {
        prefix: "notes".into(),
    };
    // The capability covers notes/; the draft claims notes/a.md, but its
    // arguments name secret/a.md.
    let mut inv = env.invocation(
        &def,
        RUN,
        "c1",
        args("secret/a.md", "ok"),
        env.grant(&def, notes.clone()),
        &env.authority,
    );
    inv.draft.target = Target::WorkspacePath {
        path: "notes/a.md".into(),
    };
    inv.draft.scope = notes;
    assert_eq!(code(&env.ask(&addr, inv)), codes::TARGET_MISMATCH);
    assert_eq!(probe.calls.load(Ordering::SeqCst), 0, "nothing ran");
}

#[test]
fn s5_3_a_draft_for_a_changed_definition_is_refused() {
    let env = Env::new();
    let probe = Arc::new(Probe::default());
    let addr = env.spawn("probe", EffectClass::ReadLocal, probe.clone());
    let def = probe_definition("probe", EffectClass::ReadLocal);
    // Prepared and granted for a definition the actor no longer has.
    let mut old = def.clone();
    old.description = "What the model was shown before.".into();
    let inv = env.invocation(
        &old,
        RUN,
        "c1",
        args("a.md", "ok"),
        env.grant(&old, whole()),
        &env.authority,
    );
    assert_eq!(code(&env.ask(&addr, inv)), codes::DEFINITION_CHANGED);
    assert_eq!(probe.calls.load(Ordering::SeqCst), 0, "nothing ran");
}

#[test]
fn a_panicking_tool_is_an_error_and_the_actor_keeps_serving() {
    let env = Env::new();
    let probe = Arc::new(Probe::default());
    let addr = env.spawn("probe", EffectClass::WriteLocal, probe.clone());
    let def = probe_definition("probe", EffectClass::WriteLocal);
    let cap = env.grant(&def, whole());
    let r = env.ask(
        &addr,
        env.invocation(
            &def,
            RUN,
            "c1",
            args("a.md", "panic"),
            cap.clone(),
            &env.authority,
        ),
    );
    let ToolResult::Error(failure) = &r else {
        panic!("{r:?}")
    };
    assert_eq!(failure.code, codes::EXECUTOR_LOST);
    assert!(
        failure.message.contains("probe exploded"),
        "{}",
        failure.message
    );
    assert!(
        failure.effect_may_have_happened,
        "an effectful tool that panicked may have written"
    );
    let r = env.ask(
        &addr,
        env.invocation(&def, RUN, "c2", args("a.md", "ok"), cap, &env.authority),
    );
    assert!(r.is_success(), "{r:?}");
}

#[test]
fn a_tools_progress_reaches_the_dispatchers_sink_bounded_and_in_order() {
    let env = Env::new();
    let probe = Arc::new(Probe::default());
    let addr = env.spawn("probe", EffectClass::ReadLocal, probe.clone());
    let def = probe_definition("probe", EffectClass::ReadLocal);
    let cap = env.grant(&def, whole());
    let (tx, rx) = async_channel::unbounded();
    let mut invocation = env.invocation(
        &def,
        RUN,
        "c1",
        args("a.md", "progress"),
        cap,
        &env.authority,
    );
    invocation.progress = ProgressSink::new(move |p| {
        tx.try_send(p).expect("the test listens");
    });
    assert!(env.ask(&addr, invocation).is_success());
    let reports: Vec<ToolProgress> = std::iter::from_fn(|| rx.try_recv().ok()).collect();
    assert_eq!(
        reports.iter().map(|p| p.progress).collect::<Vec<_>>(),
        [1.0, 2.0, 3.0],
        "in order, and the NaN report was dropped"
    );
    for p in &reports {
        let message = p.message.as_deref().unwrap();
        assert!(
            message.len() <= MAX_PROGRESS_MESSAGE_BYTES,
            "{}",
            message.len()
        );
        assert!(
            message.len() > MAX_PROGRESS_MESSAGE_BYTES - 2,
            "cut at a character boundary only"
        );
        assert_eq!(p.total, Some(3.0));
    }
    // Without a sink the same call reports into nothing and still succeeds.
    let cap = env.grant(&def, whole());
    let invocation = env.invocation(
        &def,
        RUN,
        "c2",
        args("a.md", "progress"),
        cap,
        &env.authority,
    );
    assert!(env.ask(&addr, invocation).is_success());
}

#[test]
fn calls_run_at_the_same_time() {
    let env = Env::new();
    let (entered_tx, entered_rx) = async_channel::unbounded();
    let (gate_tx, gate_rx) = async_channel::unbounded::<()>();
    let probe = Arc::new(Probe {
        entered: Some(entered_tx),
        gate: Some(gate_rx),
        ..Probe::default()
    });
    let addr = env.spawn("probe", EffectClass::ReadLocal, probe.clone());
    let def = probe_definition("probe", EffectClass::ReadLocal);
    let cap = env.grant(&def, whole());
    let first = env.invocation(
        &def,
        RUN,
        "c1",
        args("a.md", "wait"),
        cap.clone(),
        &env.authority,
    );
    let second = env.invocation(&def, RUN, "c2", args("b.md", "wait"), cap, &env.authority);
    let results = env
        .mem
        .block_on(async {
            let calls = futures::future::join(
                addr.ask(|reply| ToolMsg::Invoke {
                    invocation: first,
                    reply,
                }),
                addr.ask(|reply| ToolMsg::Invoke {
                    invocation: second,
                    reply,
                }),
            );
            let release = async {
                // Both calls are inside `call` at once before either ends.
                entered_rx.recv().await.unwrap();
                entered_rx.recv().await.unwrap();
                gate_tx.close();
            };
            futures::future::join(calls, release).await.0
        })
        .expect("both calls were in flight together, so the gate opened");
    assert!(results.0.unwrap().is_success());
    assert!(results.1.unwrap().is_success());
    assert_eq!(probe.calls.load(Ordering::SeqCst), 2);
}

#[test]
fn a_cancel_ends_its_runs_read_only_call_and_not_another_runs() {
    let env = Env::new();
    let (entered_tx, entered_rx) = async_channel::unbounded();
    let (gate_tx, gate_rx) = async_channel::unbounded::<()>();
    let probe = Arc::new(Probe {
        entered: Some(entered_tx),
        gate: Some(gate_rx),
        ..Probe::default()
    });
    let addr = env.spawn("probe", EffectClass::ReadLocal, probe.clone());
    let def = probe_definition("probe", EffectClass::ReadLocal);
    let other = Authority::new("run-2", KEY);
    let stopped = env.invocation(
        &def,
        RUN,
        "c1",
        args("a.md", "wait"),
        env.grant(&def, whole()),
        &env.authority,
    );
    let kept = env.invocation(
        &def,
        "run-2",
        "c1",
        args("b.md", "wait"),
        env.grant_from(&other, &def, whole()),
        &other,
    );
    let (stopped, kept) = env
        .mem
        .block_on(async {
            use futures::FutureExt;
            let mut kept_call = Box::pin(
                addr.ask(|reply| ToolMsg::Invoke {
                    invocation: kept,
                    reply,
                })
                .fuse(),
            );
            let stopped_call = addr.ask(|reply| ToolMsg::Invoke {
                invocation: stopped,
                reply,
            });
            let cancel_run_1 = async {
                // Both calls are inside `call`, waiting at the closed gate.
                entered_rx.recv().await.unwrap();
                entered_rx.recv().await.unwrap();
                addr.send(ToolMsg::Cancel {
                    run: RunId::new(RUN).unwrap(),
                })
                .await
                .unwrap();
            };
            let first = futures::future::join(stopped_call, cancel_run_1).fuse();
            futures::pin_mut!(first);
            let stopped = futures::select! {
                (stopped, ()) = first => stopped,
                kept = kept_call => panic!("run-2's call ended before the gate opened: {kept:?}"),
            };
            // run-2's call was not touched: it still waits, and goes on
            // when the gate opens.
            gate_tx.close();
            (stopped, kept_call.await)
        })
        .expect("the cancelled call ended without the gate");
    let stopped = stopped.unwrap();
    assert_eq!(code(&stopped), codes::CANCELLED);
    let ToolResult::Error(failure) = &stopped else {
        unreachable!()
    };
    assert!(!failure.effect_may_have_happened, "a read has no effect");
    let kept = kept.unwrap();
    assert!(kept.is_success(), "{kept:?}");
    assert_eq!(probe.calls.load(Ordering::SeqCst), 2);
}

#[test]
fn a_cancel_reaches_an_effectful_call_which_decides_itself() {
    let env = Env::new();
    let (entered_tx, entered_rx) = async_channel::unbounded();
    let probe = Arc::new(Probe {
        entered: Some(entered_tx),
        ..Probe::default()
    });
    let addr = env.spawn("probe", EffectClass::WriteLocal, probe.clone());
    let def = probe_definition("probe", EffectClass::WriteLocal);
    let inv = env.invocation(
        &def,
        RUN,
        "c1",
        args("a.md", "observe"),
        env.grant(&def, whole()),
        &env.authority,
    );
    let (result, ()) = env
        .mem
        .block_on(futures::future::join(
            addr.ask(|reply| ToolMsg::Invoke {
                invocation: inv,
                reply,
            }),
            async {
                entered_rx.recv().await.unwrap();
                addr.send(ToolMsg::Cancel {
                    run: RunId::new(RUN).unwrap(),
                })
                .await
                .unwrap();
            },
        ))
        .expect("the call saw its cancellation signal");
    // The shell did not end the call: the tool's own answer came back.
    assert_eq!(code(&result.unwrap()), "stopped_before_writing");
}
