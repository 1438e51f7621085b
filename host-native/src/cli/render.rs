//! Rendering: the run card of `agentrt show` (text or JSON, built from the
//! assembly's `RunView`, the view the browser's `readRun` shows too: the
//! journal with each call's target summary, the evidence with its trust and
//! provenance, the plan's steps, the final answer), status
//! and activity lines, pending-request hints, times, JSON events.

use std::io::Write;

use agent_assembly::RunView;
use agent_kernel::RunId;
use agent_kernel::journal::CallState;
use agent_kernel::run::{ActivityKind, AgentRun, PendingKind, PendingRequest, StopReason};
use agent_supervisor::RunEvent;

use super::args::Cli;

pub(crate) fn status_text(run: &AgentRun) -> String {
    let status = serde_json::to_value(run.status)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default();
    match &run.stop_reason {
        Some(reason) => format!("{status} ({})", reason_text(reason)),
        None => status,
    }
}

pub(crate) fn reason_text(reason: &StopReason) -> String {
    match reason {
        StopReason::Completed => "completed".into(),
        StopReason::UserStopped => "user_stopped".into(),
        StopReason::BudgetExhausted { dimension } => format!("budget_exhausted: {dimension:?}"),
        StopReason::Offline => "offline".into(),
        StopReason::PageInterrupted => "page_interrupted".into(),
        StopReason::EffectUnknown { call_id } => format!("effect_unknown: call {call_id}"),
        StopReason::RuntimeError { actor, message } => {
            format!("runtime_error in {actor}: {message}")
        }
        StopReason::ProviderUnavailable { provider, message } => {
            format!("provider_unavailable ({provider}): {message}; resume when it is back")
        }
        StopReason::OutputLimit => {
            "output_limit: the answer was cut at the model's output limit".into()
        }
        StopReason::ContentFiltered { provider } => {
            format!("content_filtered: {provider} withheld the answer")
        }
    }
}

pub(crate) fn format_time(ms: u64) -> String {
    let secs = ms / 1000;
    let (days, rem) = (secs / 86_400, secs % 86_400);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

pub(crate) fn state_text(state: CallState) -> String {
    serde_json::to_value(state)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default()
}

/// The run card of `agentrt show` (and of a settled demo run).
pub(crate) fn print_card(card: &RunView, json: bool) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    let run = &card.run;
    if json {
        writeln!(
            out,
            "{}",
            serde_json::json!({
                "run": run.id, "session": run.session, "prompt": card.prompt, "status": run.status,
                "stop_reason": run.stop_reason, "usage": run.usage, "budget": run.budget,
                "activities": card.activities, "journal": card.journal,
                "pending": card.pending_requests(), "output": card.output,
                "output_incomplete": card.output_incomplete,
                "answer": card.output, "evidence": card.evidence, "plan": card.plan,
                "failures": card.failures, "reasoning": card.reasoning,
            })
        )?;
        return Ok(());
    }
    writeln!(out, "run {}  (session {})", run.id, run.session)?;
    writeln!(out, "  status:   {}", status_text(run))?;
    let b = &run.budget;
    let u = &run.usage;
    writeln!(
        out,
        "  usage:    {}/{} tool rounds, {}/{} tool calls, {} tokens{}, {:.1} s active{}",
        u.tool_rounds,
        b.max_tool_rounds,
        u.tool_calls,
        b.max_tool_calls,
        u.total_tokens(),
        b.max_tokens.map(|t| format!("/{t}")).unwrap_or_default(),
        u.active_ms as f64 / 1000.0,
        b.max_duration_ms
            .map(|d| format!("/{:.0} s", d as f64 / 1000.0))
            .unwrap_or_default()
    )?;
    if u.reasoning_tokens > 0 || u.cached_input_tokens > 0 || u.cache_write_tokens > 0 {
        writeln!(
            out,
            "  tokens:   {} input ({} read from the prompt cache, {} written to it), {} output ({} reasoning)",
            u.input_tokens,
            u.cached_input_tokens,
            u.cache_write_tokens,
            u.output_tokens,
            u.reasoning_tokens
        )?;
    }
    writeln!(out, "  activities:")?;
    for a in &card.activities {
        writeln!(out, "    {:>3}  {}", a.seq, activity_text(&a.kind))?;
    }
    writeln!(out, "  journal:")?;
    for j in &card.journal {
        writeln!(
            out,
            "    {:<24} {:<22} {:<15} attempt {}{}",
            j.call_id.as_str(),
            j.tool,
            state_text(j.state),
            j.attempt,
            j.target_summary
                .as_deref()
                .map(|t| format!("  on {t}"))
                .unwrap_or_default()
        )?;
    }
    if !card.evidence.is_empty() {
        writeln!(out, "  evidence:")?;
        for e in &card.evidence {
            writeln!(
                out,
                "    {:<24} {:<22} {}",
                e.call_id.as_str(),
                e.tool,
                serde_json::to_value(e.trust)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_owned))
                    .unwrap_or_default()
            )?;
        }
    }
    if let Some(plan) = &card.plan {
        writeln!(out, "  plan:")?;
        for step in &plan.steps {
            writeln!(
                out,
                "    [{}] {}",
                serde_json::to_value(step.status)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_owned))
                    .unwrap_or_default(),
                step.title
            )?;
        }
    }
    for failure in &card.failures {
        writeln!(out, "  refused:  {}: {}", failure.call_id, failure.reason)?;
    }
    // The model's reasoning, apart from the answer and marked as such (S13.4).
    for r in &card.reasoning {
        writeln!(out, "  reasoning (round {}):", r.round)?;
        for line in r.text.lines() {
            writeln!(out, "    | {line}")?;
        }
    }
    if let Some(text) = &card.output {
        let first = text.lines().next().unwrap_or("");
        if card.output_incomplete {
            writeln!(out, "  answer:   {first}  [incomplete: stopped mid-answer]")?;
        } else {
            writeln!(out, "  answer:   {first}")?;
        }
    }
    for p in card.pending_requests() {
        writeln!(out, "  pending:  {}", pending_text(&run.id, p))?;
    }
    Ok(())
}

pub(crate) fn activity_text(kind: &ActivityKind) -> String {
    match kind {
        ActivityKind::StatusChanged { from, to, reason } => format!(
            "status {} -> {}{}",
            serde_json::to_value(from)
                .ok()
                .and_then(|v| v.as_str().map(str::to_owned))
                .unwrap_or_default(),
            serde_json::to_value(to)
                .ok()
                .and_then(|v| v.as_str().map(str::to_owned))
                .unwrap_or_default(),
            reason
                .as_ref()
                .map(|r| format!(" ({})", reason_text(r)))
                .unwrap_or_default()
        ),
        ActivityKind::ModelRequest { round } => format!("model request, round {round}"),
        ActivityKind::ModelResponse {
            round,
            tool_calls,
            reasoning,
            incomplete,
            ..
        } => {
            let apart = if reasoning.is_some() {
                ", reasoning kept apart"
            } else {
                ""
            };
            if *incomplete {
                format!("model response, round {round}, incomplete: stopped mid-answer{apart}")
            } else {
                format!("model response, round {round}, {tool_calls} tool call(s){apart}")
            }
        }
        ActivityKind::ToolCall {
            call_id,
            tool,
            state,
        } => {
            format!("tool {tool} [{call_id}] {}", state_text(*state))
        }
        ActivityKind::ApprovalRequested { request, call_id } => {
            format!("approval requested: {request} for call {call_id}")
        }
        ActivityKind::ApprovalAnswered { request, approved } => format!(
            "approval {request} {}",
            if *approved { "granted" } else { "denied" }
        ),
        ActivityKind::InputRequested { request } => format!("question asked: {request}"),
        ActivityKind::InputAnswered { request } => format!("question answered: {request}"),
        ActivityKind::DecisionRequested { request, call_id } => {
            format!("decision needed: {request} for call {call_id} (effect unknown)")
        }
        ActivityKind::DecisionTaken { request, choice } => format!("decision {request}: {choice}"),
        ActivityKind::PlanUpdated { .. } => "plan updated".into(),
        ActivityKind::ChildStarted { child } => format!("child run {child} started"),
        ActivityKind::ConversationTrimmed {
            dropped_turns,
            kept_turns,
        } => format!(
            "conversation: {dropped_turns} oldest turn(s) left out to fit the context, {kept_turns} kept"
        ),
        ActivityKind::ConversationCompacted {
            turns_covered,
            tokens_before,
            tokens_after,
            ..
        } => format!(
            "conversation compacted: the first {turns_covered} turn(s) summarised, {tokens_before} -> {tokens_after} tokens"
        ),
        ActivityKind::ExecutorLost { executor } => {
            format!("interrupted: the {executor} was lost (resume continues)")
        }
    }
}

/// A line telling the person what to type next: on stdout, or on stderr
/// with `--json` so that stdout stays one JSON object per line.
pub(crate) fn hint(cli: &Cli, line: &str) {
    if cli.json {
        eprintln!("{line}");
    } else {
        println!("{line}");
    }
}

pub(crate) fn pending_text(run: &RunId, p: &PendingRequest) -> String {
    match &p.kind {
        PendingKind::Approval {
            tool,
            target_summary,
            reason,
            ..
        } => format!(
            "approval {} for {tool} on {target_summary} ({reason})",
            p.id
        ),
        PendingKind::Input {
            choices: Some(choices),
            ..
        } => format!(
            "question {} (one of: {}); answer with `agentrt respond {run} TEXT`",
            p.id,
            choices.join(", ")
        ),
        PendingKind::Input {
            schema: Some(_), ..
        } => format!(
            "question {} (the answer must satisfy its JSON Schema); answer with `agentrt respond {run} JSON`",
            p.id
        ),
        PendingKind::Input { .. } => format!(
            "question {}; answer with `agentrt respond {run} TEXT`",
            p.id
        ),
        PendingKind::Decision { call_id, tool } => format!(
            "call {call_id} ({tool}) may or may not have happened; decide with `agentrt decide {run} {call_id} retry|done|abandon`"
        ),
        PendingKind::Elicitation {
            call_id, server, ..
        } => format!(
            "MCP server {server} asks for input during call {call_id} (request {}); answer with a JSON object of the requested fields, `decline` or `cancel`",
            p.id
        ),
    }
}

pub(crate) fn print_event(event: &RunEvent) {
    match event {
        RunEvent::Activity(a) => println!(
            "{}",
            serde_json::json!({"event": "activity", "activity": a})
        ),
        RunEvent::TextDelta { run, text } => {
            println!(
                "{}",
                serde_json::json!({"event": "text", "run": run, "text": text})
            );
        }
        RunEvent::ReasoningDelta { run, text } => {
            println!(
                "{}",
                serde_json::json!({"event": "reasoning", "run": run, "text": text})
            );
        }
        RunEvent::ToolProgress {
            run,
            call_id,
            tool,
            progress,
        } => println!(
            "{}",
            serde_json::json!({"event": "tool_progress", "run": run, "call_id": call_id, "tool": tool, "progress": progress})
        ),
        RunEvent::Research { run, task, phase } => println!(
            "{}",
            serde_json::json!({"event": "research", "run": run, "task": task, "phase": phase})
        ),
    }
}

/// Print `value` as one JSON line with `--json`, else `text` for a person.
pub(crate) fn print_json_or_text(
    json: bool,
    value: serde_json::Value,
    text: String,
) -> anyhow::Result<()> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    if json {
        writeln!(out, "{value}")?;
    } else {
        writeln!(out, "{text}")?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use agent_kernel::host::BlobRef;

    use super::*;

    /// Issue 37 part 6 and S12.4: the run card says when an answer was cut
    /// off by a Stop, and what a compaction did.
    #[test]
    fn the_card_marks_an_incomplete_answer_and_a_compaction() {
        let text = Some(BlobRef::of(b"The first half"));
        let stopped = ActivityKind::ModelResponse {
            round: 1,
            text: text.clone(),
            tool_calls: 0,
            reasoning: None,
            incomplete: true,
        };
        assert_eq!(
            activity_text(&stopped),
            "model response, round 1, incomplete: stopped mid-answer"
        );
        let whole = ActivityKind::ModelResponse {
            round: 2,
            text,
            tool_calls: 1,
            reasoning: None,
            incomplete: false,
        };
        assert_eq!(
            activity_text(&whole),
            "model response, round 2, 1 tool call(s)"
        );
        let compacted = ActivityKind::ConversationCompacted {
            turns_covered: 12,
            tokens_before: 900,
            tokens_after: 300,
            summary: BlobRef::of(b"s"),
        };
        assert_eq!(
            activity_text(&compacted),
            "conversation compacted: the first 12 turn(s) summarised, 900 -> 300 tokens"
        );
    }
}
