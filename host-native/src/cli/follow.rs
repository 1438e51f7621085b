//! Live follow: progress of a run until it settles (indicatif on a
//! terminal, plain lines otherwise, JSON lines with `--json`), asking for
//! approvals on a terminal, then the run card or the hints of what it waits
//! for, and the final answer once the run has ended (stdout; with `--json`
//! the last event, `{"event":"answer","run":…,"text":…}`).

use std::io::{IsTerminal, Write};
use std::time::Duration;

use agent_host_native::app::App;
use agent_kernel::RunId;
use agent_kernel::journal::CallState;
use agent_kernel::run::{ActivityKind, AgentRun, PendingKind, RunStatus, StopReason};
use agent_supervisor::RunEvent;
use anyhow::Context;

use super::args::Cli;
use super::exit::code_for;
use super::render::{activity_text, hint, pending_text, print_card, print_event, status_text};

/// Show progress until the run settles; on a terminal, ask for approvals;
/// otherwise print the commands that answer what the run waits for.
pub(crate) async fn follow(
    cli: &Cli,
    app: &App,
    run: &RunId,
    events: async_channel::Receiver<RunEvent>,
    show_card: bool,
) -> anyhow::Result<u8> {
    let interactive = std::io::stdin().is_terminal() && !cli.json;
    let fancy = std::io::stderr().is_terminal() && !cli.json;
    // The run's activities shown so far, by sequence number: the live
    // stream and the stored tail below show each once.
    let shown = ShownActivities::default();
    loop {
        let printer = Printer::new(fancy, cli.json, app.runtime().run(run).await.ok());
        let watcher = {
            let events = events.clone();
            let run = run.clone();
            let shown = &shown;
            async move {
                let mut printer = printer;
                while let Ok(event) = events.recv().await {
                    if event.run() == &run && shown.first_time(&event) {
                        printer.event(&event);
                    }
                }
                printer
            }
        };
        let settled = {
            // A server's elicitation during a call is answered meanwhile.
            let waiter =
                super::elicit::while_answering(cli, app, run, app.runtime().wait_settled(run));
            futures::pin_mut!(waiter);
            let watcher = watcher;
            futures::pin_mut!(watcher);
            match futures::future::select(waiter, watcher).await {
                futures::future::Either::Left((settled, _)) => settled?,
                futures::future::Either::Right((_, waiter)) => waiter.await?,
            }
        };
        // Drain what is left of the events of this stretch. The record
        // read may be ahead of the live stream (a commit's activities are
        // announced after it is durable), so the stored activities after
        // the last one shown follow: the store is the source of truth (S1.1).
        while let Ok(event) = events.try_recv() {
            if event.run() == run && cli.json && shown.first_time(&event) {
                print_event(&event);
            }
        }
        if cli.json && shown.any() {
            for activity in app.runtime().activities(run).await? {
                let event = RunEvent::Activity(activity);
                if shown.first_time(&event) {
                    print_event(&event);
                }
            }
        }
        if interactive && settled.status == RunStatus::AwaitingApproval {
            let pending = app.runtime().pending(run).await?;
            if let Some(p) = pending
                .iter()
                .find(|p| matches!(p.kind, PendingKind::Approval { .. }))
                && let PendingKind::Approval {
                    tool,
                    target_summary,
                    reason,
                    ..
                } = &p.kind
            {
                eprint!("{tool} on {target_summary}: {reason}. Approve? [y/N] ");
                let _ = std::io::stderr().flush();
                let mut answer = String::new();
                std::io::stdin()
                    .read_line(&mut answer)
                    .context("reading the answer")?;
                if answer.trim().eq_ignore_ascii_case("y")
                    || answer.trim().eq_ignore_ascii_case("yes")
                {
                    app.runtime().approve(run, &p.id).await?;
                } else {
                    app.runtime().deny(run, &p.id).await?;
                }
                continue;
            }
        }
        let card = app.run_view(run).await?;
        if show_card && !cli.json {
            print_card(&card, false)?;
        } else if !cli.json {
            eprintln!("run {run}: {}", status_text(&card.run));
        }
        if cli.json {
            println!(
                "{}",
                serde_json::json!({"event": "settled", "run": run, "status": card.run.status,
                    "stop_reason": card.run.stop_reason, "usage": card.run.usage,
                    "pending": card.pending_requests()})
            );
        }
        // The final answer, once the run has ended (waiting runs have not):
        // the text on stdout, or with `--json` the last event.
        if run_ended(&card.run)
            && let Some(answer) = card.output.as_deref().filter(|a| !a.trim().is_empty())
        {
            if cli.json {
                println!(
                    "{}",
                    serde_json::json!({"event": "answer", "run": run, "text": answer})
                );
            } else if !show_card {
                println!("{}", answer.trim_end());
            }
        }
        for p in card.pending_requests() {
            match &p.kind {
                PendingKind::Approval { .. } => {
                    hint(
                        cli,
                        &format!(
                            "awaiting approval; to approve run: agentrt approve {run} {}",
                            p.id
                        ),
                    );
                    hint(cli, &format!("to deny run: agentrt deny {run} {}", p.id));
                }
                _ => hint(cli, &pending_text(run, p)),
            }
        }
        return Ok(code_for(&card.run));
    }
}

/// The highest activity sequence number of the followed run shown so far.
#[derive(Default)]
struct ShownActivities(std::cell::Cell<Option<u64>>);

impl ShownActivities {
    fn any(&self) -> bool {
        self.0.get().is_some()
    }

    /// Whether `event` is to be shown: every live-only event, and an
    /// activity newer than every activity shown (which it then is).
    fn first_time(&self, event: &RunEvent) -> bool {
        let RunEvent::Activity(activity) = event else {
            return true;
        };
        if self.0.get().is_some_and(|seq| activity.seq <= seq) {
            return false;
        }
        self.0.set(Some(activity.seq));
        true
    }
}

/// True when the run will not go on by itself or by a person's answer:
/// completed, failed, cancelled, or interrupted (not waiting for a decision).
fn run_ended(run: &AgentRun) -> bool {
    match run.status {
        RunStatus::Completed | RunStatus::Failed | RunStatus::Cancelled => true,
        RunStatus::Interrupted => {
            !matches!(run.stop_reason, Some(StopReason::EffectUnknown { .. }))
        }
        RunStatus::AwaitingApproval | RunStatus::AwaitingInput | RunStatus::Running => false,
    }
}

/// Live progress: indicatif on a terminal, plain lines otherwise, JSON lines with `--json`.
pub(crate) struct Printer {
    bar: Option<indicatif::ProgressBar>,
    json: bool,
    run: Option<AgentRun>,
    rounds: u64,
    calls: u64,
    tool: String,
}

impl Printer {
    fn new(fancy: bool, json: bool, run: Option<AgentRun>) -> Printer {
        let bar = fancy.then(|| {
            let bar = indicatif::ProgressBar::new_spinner();
            bar.set_style(
                indicatif::ProgressStyle::with_template("{spinner} [{elapsed}] {msg}")
                    .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner()),
            );
            bar.enable_steady_tick(Duration::from_millis(120));
            bar
        });
        let (rounds, calls) = run
            .as_ref()
            .map(|r| (r.usage.tool_rounds, r.usage.tool_calls))
            .unwrap_or((0, 0));
        Printer {
            bar,
            json,
            run,
            rounds,
            calls,
            tool: String::new(),
        }
    }

    fn event(&mut self, event: &RunEvent) {
        if self.json {
            print_event(event);
            return;
        }
        let RunEvent::Activity(activity) = event else {
            return;
        };
        match &activity.kind {
            ActivityKind::ModelResponse { tool_calls, .. } if *tool_calls > 0 => self.rounds += 1,
            ActivityKind::ToolCall { tool, state, .. } => {
                if *state == CallState::Running {
                    self.calls += 1;
                }
                self.tool = tool.clone();
            }
            _ => {}
        }
        let line = format!("{:>3}  {}", activity.seq, activity_text(&activity.kind));
        match &self.bar {
            Some(bar) => {
                let (max_rounds, max_calls) = self
                    .run
                    .as_ref()
                    .map(|r| (r.budget.max_tool_rounds, r.budget.max_tool_calls))
                    .unwrap_or((0, 0));
                bar.println(line);
                bar.set_message(format!(
                    "rounds {}/{max_rounds}  calls {}/{max_calls}  {}",
                    self.rounds, self.calls, self.tool
                ));
            }
            None => eprintln!("{line}"),
        }
    }
}

impl Drop for Printer {
    fn drop(&mut self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}
