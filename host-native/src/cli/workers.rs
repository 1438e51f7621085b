//! Runs through a shared store: `run --detach` and `resume --detach` queue
//! one, `worker` executes the queue, `queue` and `workers` report on them.

use std::io::Write;

use agent_host_native::app::{AppOptions, ProviderSpec};
use agent_host_native::script_sandbox;
use agent_host_native::workers::queue::{
    NewRun, QueueError, QueuedProvider, StartRequest, enqueue_resume, enqueue_start, read_queue,
};
use agent_host_native::workers::status::read_workers;
use agent_host_native::workers::worker::{Worker, WorkerOptions};
use agent_kernel::{RunId, SessionId};
use agent_supervisor::{RunConfig, RunError};
use anyhow::Context;

use super::args::Cli;
use super::exit::{code, usage};
use super::open::{data_dir, load_config, open_host, store_url};
use super::render::format_time;

/// A queue refusal as the command line reports it.
pub(crate) fn queue_error(e: QueueError) -> anyhow::Error {
    match e {
        QueueError::NotFound(run) => anyhow::Error::new(RunError::NotFound(run)),
        QueueError::Storage(e) => anyhow::Error::new(e),
        other @ (QueueError::NotInterrupted { .. }
        | QueueError::NoLaunch(_)
        | QueueError::Config(_)
        | QueueError::ExplicitEndpoint(_)
        | QueueError::Provider(_)
        | QueueError::Encode(_)) => usage(other.to_string()),
        other => anyhow::Error::new(other),
    }
}

/// `agentrt run --detach`: queue the run for the workers, print its id.
pub(crate) async fn enqueue_run(
    cli: &Cli,
    spec: ProviderSpec,
    prompt: &str,
    run_config: RunConfig,
    session: Option<SessionId>,
    is_demo: bool,
) -> anyhow::Result<u8> {
    let host = open_host(cli).await?;
    let entropy = host.host().entropy.clone();
    let session = match session {
        Some(s) => s,
        None => SessionId::new(agent_kernel::host::random_id(entropy.as_ref(), "session-"))?,
    };
    let run = RunId::new(agent_kernel::host::random_id(entropy.as_ref(), "run-"))?;
    let provider = QueuedProvider::from_spec(&spec).map_err(|e| {
        usage(format!(
            "this run cannot be queued: {e}; give --scenario FILE or --provider-name NAME"
        ))
    })?;
    let request = StartRequest {
        config: run_config,
        history: None,
    };
    let entry = enqueue_start(
        host.host().storage.as_ref(),
        NewRun {
            run,
            session,
            prompt,
            request: &request,
            provider,
            demo: is_demo,
        },
        host.host().clock.wall_ms(),
    )
    .await
    .map_err(queue_error)?;
    print_queued(cli, &entry)?;
    Ok(code::OK)
}

/// `agentrt resume --detach`: queue the person's Resume for the workers.
pub(crate) async fn enqueue_resume_of(cli: &Cli, run: &RunId) -> anyhow::Result<u8> {
    let host = open_host(cli).await?;
    let entry = enqueue_resume(
        host.host().storage.as_ref(),
        run,
        host.host().clock.wall_ms(),
    )
    .await
    .map_err(queue_error)?;
    print_queued(cli, &entry)?;
    Ok(code::OK)
}

pub(crate) fn print_queued(
    cli: &Cli,
    entry: &agent_host_native::workers::queue::QueuedRun,
) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    if cli.json {
        writeln!(
            out,
            "{}",
            serde_json::json!({"event": "queued", "run": entry.run, "session": entry.session,
                "action": entry.action_name()})
        )?;
    } else {
        writeln!(out, "{}", entry.run)?;
        eprintln!(
            "run {} queued ({}) in session {}; an `agentrt worker` sharing this store executes it (see `agentrt queue`, `agentrt show {}`)",
            entry.run,
            entry.action_name(),
            entry.session,
            entry.run
        );
    }
    out.flush()?;
    Ok(())
}

/// `agentrt worker`: execute queued runs until SIGTERM or SIGINT; a second
/// signal exits at once (130).
pub(crate) async fn run_worker(cli: &Cli, options: WorkerOptions) -> anyhow::Result<u8> {
    let mut config = load_config(cli)?;
    config.store = store_url(cli, &config);
    let app_options = AppOptions {
        config,
        url_policy: None,
        script_sandbox: Some(
            script_sandbox::SandboxCommand::current_exe()
                .context("cannot find the agentrt executable for the script sandbox")?,
        ),
    };
    let worker = Worker::open(&data_dir(cli)?, app_options, options)
        .await
        .map_err(|e| match e {
            agent_host_native::workers::worker::WorkerError::Concurrency => usage(e.to_string()),
            agent_host_native::workers::worker::WorkerError::App(e) => anyhow::Error::new(e),
            other => anyhow::Error::new(other),
        })?;
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(async move {
        let Ok(mut term) =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        else {
            return;
        };
        let mut stop_tx = Some(stop_tx);
        loop {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
            match stop_tx.take() {
                Some(tx) => {
                    eprintln!(
                        "agentrt worker: stopping: no new runs; the runs held finish or are interrupted (signal again to exit at once)"
                    );
                    let _ = tx.send(());
                }
                None => std::process::exit(130),
            }
        }
    });
    if !cli.json {
        eprintln!(
            "agentrt worker {} (pid {}) executing queued runs; SIGTERM stops it",
            worker.status().owner,
            worker.status().pid
        );
    }
    let status = worker
        .run(async {
            let _ = stop_rx.await;
        })
        .await;
    if cli.json {
        println!("{}", serde_json::to_string(&status)?);
    } else {
        eprintln!(
            "agentrt worker stopped: {} completed, {} interrupted, {} waiting, {} failed, {} refused; {} stale writes refused by the fence",
            status.completed,
            status.interrupted,
            status.waiting,
            status.failed,
            status.refused,
            status.stale_refusals
        );
    }
    Ok(code::OK)
}

/// `agentrt queue`: the queued requests, oldest first.
pub(crate) async fn list_queue(cli: &Cli) -> anyhow::Result<u8> {
    let host = open_host(cli).await?;
    let queue = read_queue(host.host().storage.as_ref()).await?;
    let mut out = std::io::stdout().lock();
    for e in queue.runs() {
        if cli.json {
            writeln!(
                out,
                "{}",
                serde_json::json!({"run": e.run, "session": e.session, "action": e.action_name(),
                    "enqueued_at_ms": e.enqueued_at_ms})
            )?;
        } else {
            writeln!(
                out,
                "{}  {:<6} {}  {}",
                e.run,
                e.action_name(),
                e.session,
                format_time(e.enqueued_at_ms)
            )?;
        }
    }
    if !cli.json {
        writeln!(out, "{} queued", queue.runs().count())?;
    }
    for r in queue.refused() {
        // S14.2: a worker drops it without building any provider.
        eprintln!(
            "agentrt: the queued {} of run {} is refused: {}; a worker removes it",
            r.action, r.run, r.error
        );
    }
    for key in &queue.corrupt {
        eprintln!("agentrt: queue entry {key:?} does not decode; it is never taken (delete it)");
    }
    Ok(code::OK)
}

/// `agentrt workers`: every worker that reported to the store.
pub(crate) async fn list_workers(cli: &Cli) -> anyhow::Result<u8> {
    let host = open_host(cli).await?;
    let (workers, corrupt) = read_workers(host.host().storage.as_ref()).await?;
    let now = host.host().clock.wall_ms();
    let mut out = std::io::stdout().lock();
    for w in &workers {
        // A running worker writes its status every second.
        let fresh = now.saturating_sub(w.updated_at_ms) < 10_000;
        let state = match (w.state.as_str(), fresh) {
            ("stopped", _) => "stopped",
            (_, true) => w.state.as_str(),
            (_, false) => "silent",
        };
        if cli.json {
            let mut v = serde_json::to_value(w)?;
            v["seen"] = state.into();
            writeln!(out, "{v}")?;
        } else {
            writeln!(
                out,
                "pid {:<7} {:<8} held {:<3} completed {:<5} interrupted {:<4} waiting {:<4} failed {:<4} fence refusals {:<3} last seen {}  {}",
                w.pid,
                state,
                w.runs_held,
                w.completed,
                w.interrupted,
                w.waiting,
                w.failed,
                w.stale_refusals,
                format_time(w.updated_at_ms),
                w.owner
            )?;
        }
    }
    if workers.is_empty() && !cli.json {
        writeln!(out, "no worker has reported to this store")?;
    }
    for key in &corrupt {
        eprintln!("agentrt: worker record {key:?} does not decode (delete it)");
    }
    Ok(code::OK)
}
