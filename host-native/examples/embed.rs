//! Embedding the runtime in a Rust program: the book's "Embedding from
//! Rust" chapter shows this file, and `cargo test` builds it, so the chapter
//! cannot drift from the API.
//!
//! It opens the native host over a data directory (SQLite, process leases,
//! the tokio executor), wires every tool actor with [`App::open`], takes a
//! session, starts one run with a scripted model, follows its events, waits
//! for it to settle and prints the run card's answer.
//!
//! ```sh
//! cargo run -p agent-host-native --example embed
//! ```

use std::sync::Arc;

use agent_host_native::app::{App, AppOptions};
use agent_host_native::host::SystemClock;
use agent_kernel::SessionId;
use agent_kernel::run::RunStatus;
use agent_supervisor::{ModelProvider, RunConfig, RunEvent, Scenario, ScriptedProvider};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    // Where the runs live: a SQLite file under this directory. A real
    // embedder keeps it (`dirs::data_dir()`); the example throws it away.
    let scratch = tempfile::tempdir()?;
    // A directory the runtime creates itself is private (0700).
    let data_dir = scratch.path().join("agentrt");

    // The model. A scripted one answers without a network; a real embedder
    // builds `RemoteModel { kind, base_url, api_key, capabilities }.provider(clock)`
    // (see the "Adding a provider" chapter for where providers are chosen).
    let scenario = Scenario::from_json(
        r#"{"turns": [
            {"text": "Writing the note.", "tool_calls": [
                {"name": "workspace_write", "arguments": {"path": "notes/hello.md", "content": "Hello."}}]},
            {"text": "The note is written."}
        ]}"#,
    )?;
    let clock = Arc::new(SystemClock::new(tokio::runtime::Handle::current()));
    let provider: Arc<dyn ModelProvider> = Arc::new(ScriptedProvider::new(scenario, clock));

    // The host and every tool actor, wired as `agentrt` wires them.
    let app = App::open(&data_dir, AppOptions::default(), provider).await?;

    // One process executes a session at a time: keep the guard while working.
    let session = SessionId::new("embed-example")?;
    let _opened = app.open_session(&session).await?;

    // Events of every run of this runtime: text deltas, activities, statuses.
    let events = app.runtime().subscribe();
    let run = app
        .runtime()
        .start(&session, "Write a hello note.", RunConfig::default())
        .await?;
    let watched = run.clone();
    let follow = tokio::spawn(async move {
        let mut mid_line = false;
        while let Ok(event) = events.recv().await {
            match event {
                RunEvent::TextDelta { run, text } if run == watched => {
                    print!("{text}");
                    mid_line = true;
                }
                RunEvent::Activity(activity) if activity.run == watched => {
                    if std::mem::take(&mut mid_line) {
                        println!();
                    }
                    println!("[activity {} recorded]", activity.seq);
                }
                _ => {}
            }
        }
    });

    // The run ends `completed` (or waits for the person: `awaiting_approval`
    // is settled too, and `app.runtime().approve(&run, &request)` goes on).
    let record = app.runtime().wait_settled(&run).await?;
    assert_eq!(record.status, RunStatus::Completed);
    let view = app.run_view(&run).await?;
    println!("answer: {}", view.output.unwrap_or_default());
    println!("journal records: {}", view.journal.len());
    follow.abort();
    app.native().shut_down();
    Ok(())
}
