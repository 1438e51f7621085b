//! `agentrt demo`: the embedded scripted scenario (issue 8 item 4). It
//! updates a plan, writes workspace files, computes with `run_javascript`,
//! tries to fetch a private address (the policy refuses it), publishes an
//! Artifact, and then empties the workspace trash — a destructive step that
//! asks for approval.

/// The demo's prompt (stored as a blob, like any prompt).
pub const PROMPT: &str = "Show me what the trusted agent runtime does, step by step.";

/// The scripted model answers (the supervisor's scenario format).
pub const SCENARIO: &str = r##"{"turns": [
  {"text": "First a plan, then notes in the workspace.",
   "tool_calls": [
     {"name": "update_plan", "arguments": {"steps": [
        {"title": "Write notes", "status": "in_progress"},
        {"title": "Compute a total", "status": "pending"},
        {"title": "Try a private address", "status": "pending"},
        {"title": "Publish the report", "status": "pending"},
        {"title": "Clean up", "status": "pending"}]}},
     {"name": "workspace_write", "arguments": {"path": "notes/report.md",
        "content": "# Demo report\n\nThe runtime journals every tool call.\n"}},
     {"name": "workspace_write", "arguments": {"path": "notes/draft.md",
        "content": "scratch text to throw away\n"}}]},
  {"text": "Now a bounded computation.",
   "tool_calls": [
     {"name": "run_javascript", "arguments": {"code": "input.reduce((a, b) => a + b, 0)",
        "input": [3, 5, 8, 13, 21]}}]},
  {"text": "Next, a private address: the URL policy must refuse it.",
   "tool_calls": [
     {"name": "fetch_url", "arguments": {"url": "http://127.0.0.1/"}}]},
  {"text": "Publishing the report as an immutable Artifact.",
   "tool_calls": [
     {"name": "publish_artifact", "arguments": {"name": "report.md", "path": "notes/report.md"}}]},
  {"text": "Cleaning up: the draft goes to the trash, then the trash is emptied.",
   "tool_calls": [
     {"name": "workspace_delete", "arguments": {"path": "notes/draft.md"}},
     {"name": "workspace_empty_trash", "arguments": {}}]},
  {"text": "Done: a plan, two notes, a computed total of 50, a refused private fetch, a published Artifact and an approved clean-up."}
]}"##;

#[cfg(test)]
mod tests {
    #[test]
    fn the_demo_scenario_parses() {
        agent_supervisor::Scenario::from_json(super::SCENARIO).expect("valid scenario");
    }
}
