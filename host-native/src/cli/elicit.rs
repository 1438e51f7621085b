//! Answering an MCP server's elicitation from the command line: while a
//! run is followed, a server's request for input during a call (a pending
//! request of kind `elicitation`) is shown once, the server's message
//! marked as untrusted text, and the person's answer is read from standard
//! input, one line: a JSON object of the requested fields (accept),
//! `decline`, or `cancel`; an empty line or the end of the input cancels.
//! An answer that does not satisfy the requested schema is refused and
//! asked again. The request lives only while the call does: it cannot be
//! answered by a later `agentrt` command.

use std::collections::BTreeSet;
use std::future::Future;
use std::io::Write;

use agent_assembly::PendingView;
use agent_host_native::app::App;
use agent_kernel::RunId;
use agent_kernel::ids::RequestId;
use agent_kernel::run::{ActivityKind, PendingKind, PendingRequest};
use agent_supervisor::{RunError, RunEvent};

use super::args::Cli;
use super::render::{hint, pending_text};

/// Run `fut` (waiting for the run to settle) while answering the run's
/// elicitations; its output once it is done.
pub(crate) async fn while_answering<T>(
    cli: &Cli,
    app: &App,
    run: &RunId,
    fut: impl Future<Output = T>,
) -> T {
    let answering = answer_elicitations(cli, app, run);
    futures::pin_mut!(fut, answering);
    match futures::future::select(fut, answering).await {
        futures::future::Either::Left((out, _)) => out,
        futures::future::Either::Right((never, _)) => match never {},
    }
}

enum Never {}

/// Answer each elicitation of `run` as it comes; never returns.
async fn answer_elicitations(cli: &Cli, app: &App, run: &RunId) -> Never {
    let events = app.runtime().subscribe();
    let mut answered: BTreeSet<RequestId> = BTreeSet::new();
    // One pending before this started (the events came earlier).
    if let Ok(pending) = app.runtime().pending(run).await {
        for p in pending {
            answer_one(cli, app, run, p, &mut answered).await;
        }
    }
    while let Ok(event) = events.recv().await {
        let RunEvent::Activity(activity) = &event else {
            continue;
        };
        if &activity.run != run {
            continue;
        }
        let ActivityKind::InputRequested { request } = &activity.kind else {
            continue;
        };
        let Ok(pending) = app.runtime().pending(run).await else {
            continue;
        };
        if let Some(p) = pending.into_iter().find(|p| &p.id == request) {
            answer_one(cli, app, run, p, &mut answered).await;
        }
    }
    futures::future::pending().await
}

/// Show one elicitation (once) and answer it from standard input.
async fn answer_one(
    cli: &Cli,
    app: &App,
    run: &RunId,
    p: PendingRequest,
    answered: &mut BTreeSet<RequestId>,
) {
    if !matches!(p.kind, PendingKind::Elicitation { .. }) || !answered.insert(p.id.clone()) {
        return;
    }
    hint(cli, &pending_text(run, &p));
    let view = PendingView::read(app.runtime(), p.clone()).await;
    if let Some(text) = &view.question_text {
        hint(
            cli,
            &format!("  the server says (untrusted): {}", one_line(text)),
        );
    }
    if let Some(schema) = &view.answer_schema {
        hint(cli, &format!("  requested fields: {schema}"));
    }
    loop {
        eprint!("answer (JSON object, decline or cancel): ");
        let _ = std::io::stderr().flush();
        let line = read_line().await.unwrap_or_default();
        let text = if line.trim().is_empty() {
            "cancel".to_owned()
        } else {
            line.trim().to_owned()
        };
        match app.runtime().respond(run, &p.id, &text).await {
            Ok(()) => return,
            Err(e @ RunError::InvalidAnswer { .. }) => eprintln!("agentrt: {e}"),
            Err(e) => {
                // The call ended meanwhile: the request was withdrawn.
                eprintln!("agentrt: {e}");
                return;
            }
        }
    }
}

/// One line of standard input, read on a thread of its own (never a
/// runtime's blocking pool: a read still waiting would hold up the exit).
async fn read_line() -> Option<String> {
    let (tx, rx) = futures::channel::oneshot::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let read = std::io::stdin().read_line(&mut line);
        let _ = tx.send(read.ok().filter(|n| *n > 0).map(|_| line));
    });
    rx.await.ok().flatten()
}

/// The server's text on one line (its line breaks shown as spaces).
fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}
