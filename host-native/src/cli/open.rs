//! Where the command line's data lives and what it opens there: the data
//! directory, the store (`--store`, `AGENTRT_STORE`, the config's
//! `[store]`), the configuration file, the host, and the runtime wired
//! with a model ([`open_app`]) or without one ([`open_viewer`]); and the
//! ids typed on the command line.

use std::path::PathBuf;
use std::sync::Arc;

use agent_assembly::NoModel;
use agent_host_native::app::{App, AppOptions, ProviderSpec, provider_for};
use agent_host_native::config::Config;
use agent_host_native::host::NativeHost;
#[cfg(feature = "test-hooks")]
use agent_host_native::pause;
use agent_host_native::script_sandbox;
use agent_kernel::host::{Storage, StorageExt};
use agent_kernel::run::{AgentRun, RunMode};
use agent_kernel::{RunId, SessionId};
use agent_supervisor::RunError;
use anyhow::Context;

use super::args::{Cli, ModeArg, Source};
use super::exit::usage;

/// Where runs are stored: `--store`, else `AGENTRT_STORE`, else the
/// config's `[store] url`, else (`None`) SQLite in the data directory.
pub(crate) fn store_url(cli: &Cli, config: &Config) -> Option<String> {
    cli.store
        .clone()
        .or_else(|| std::env::var("AGENTRT_STORE").ok())
        .filter(|s| !s.trim().is_empty())
        .or_else(|| config.store.clone())
}

/// Where data lives: `--data-dir`, else `AGENTRT_DATA_DIR`, else the platform's data directory.
pub(crate) fn data_dir(cli: &Cli) -> anyhow::Result<PathBuf> {
    if let Some(dir) = &cli.data_dir {
        return Ok(dir.clone());
    }
    if let Some(dir) = std::env::var_os("AGENTRT_DATA_DIR").filter(|d| !d.is_empty()) {
        return Ok(PathBuf::from(dir));
    }
    dirs::data_dir().map(|d| d.join("agentrt")).ok_or_else(|| {
        usage("no platform data directory is known here; pass --data-dir or set AGENTRT_DATA_DIR")
    })
}

pub(crate) fn load_config(cli: &Cli) -> anyhow::Result<Config> {
    let mut config = match &cli.config {
        Some(path) => Config::load(path)?,
        None => Config::default(),
    };
    if !config.mcp.is_empty() {
        config.mcp_auth = Some(crate::cli::mcp_login::run_auth_env(cli)?);
    }
    Ok(config)
}

/// The run mode `--mode` names.
pub(crate) fn run_mode(mode: ModeArg) -> RunMode {
    match mode {
        ModeArg::Agent => RunMode::Agent,
        ModeArg::Chat => RunMode::Chat,
    }
}

pub(crate) fn parse_session(text: &str) -> anyhow::Result<SessionId> {
    SessionId::new(text).map_err(|e| usage(e.to_string()))
}

pub(crate) fn parse_run_id(text: &str) -> anyhow::Result<RunId> {
    RunId::new(text).map_err(|e| usage(e.to_string()))
}

pub(crate) async fn open_host(cli: &Cli) -> anyhow::Result<NativeHost> {
    let config = load_config(cli)?;
    let mut options = agent_host_native::host::NativeHostOptions::default();
    if let Some(ttl) = config.lease_ttl {
        options.lease_ttl = ttl;
    }
    options.store = store_url(cli, &config);
    Ok(NativeHost::open_with(data_dir(cli)?, options).await?)
}

pub(crate) async fn load_run(storage: &dyn Storage, run: &RunId) -> anyhow::Result<AgentRun> {
    storage
        .get_record::<AgentRun>(run.as_str())
        .await?
        .ok_or_else(|| anyhow::Error::new(RunError::NotFound(run.clone())))
}

/// The runtime wired without a model ([`NoModel`]), for what never drives
/// a run: showing one, and a person's session actions.
pub(crate) async fn open_viewer(cli: &Cli) -> anyhow::Result<App> {
    let native = open_host(cli).await?;
    let options = AppOptions {
        config: load_config(cli)?,
        ..AppOptions::default()
    };
    Ok(App::on_host(native, options, Arc::new(NoModel)).await?)
}

pub(crate) async fn open_app(
    cli: &Cli,
    config: Config,
    spec: &ProviderSpec,
) -> anyhow::Result<App> {
    open_app_with(cli, config, spec, OnSignal::InterruptRuns).await
}

/// What a signal (SIGTERM, SIGINT) does to the command that opened the app.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OnSignal {
    /// The runs in progress are interrupted and continue on resume (S2.5).
    InterruptRuns,
    /// The command handles it itself (Deep Research stops its task, S9.6).
    Command,
}

pub(crate) async fn open_app_with(
    cli: &Cli,
    config: Config,
    spec: &ProviderSpec,
    on_signal: OnSignal,
) -> anyhow::Result<App> {
    let mut host_options = agent_host_native::host::NativeHostOptions::default();
    if let Some(ttl) = config.lease_ttl {
        host_options.lease_ttl = ttl;
    }
    host_options.store = store_url(cli, &config);
    let native = NativeHost::open_with(data_dir(cli)?, host_options).await?;
    // Stopped by a signal, the run in progress is interrupted, not lost (S2.5).
    if on_signal == OnSignal::InterruptRuns {
        native.shut_down_on_signal();
    }
    #[cfg(feature = "test-hooks")]
    if let Some(sqlite) = native.storage() {
        pause::install_from_env(sqlite);
    }
    let provider = provider_for(
        spec,
        &config,
        native.host().storage.as_ref(),
        native.host().clock.clone(),
    )
    .await?;
    let options = AppOptions {
        config,
        url_policy: None,
        script_sandbox: Some(
            script_sandbox::SandboxCommand::current_exe()
                .context("cannot find the agentrt executable for the script sandbox")?,
        ),
    };
    let app = App::on_host(native, options, provider).await?;
    // A server that cannot be reached leaves its tools out of this run;
    // the person is told why, and the next command tries again.
    for status in app.assembly().connect_mcp().await {
        if let Some(error) = &status.error {
            eprintln!("agentrt: MCP server {}: not connected: {error}", status.id);
        }
        for refused in &status.refused {
            eprintln!(
                "agentrt: MCP server {}: function {} not offered: {}",
                status.id, refused.name, refused.why
            );
        }
    }
    Ok(app)
}

/// The provider a run is launched with: the configured one, or a scripted
/// scenario stored first as a blob (through a host) so that the run's
/// launch record can name it.
pub(crate) async fn launch_spec(cli: &Cli, source: Source) -> anyhow::Result<ProviderSpec> {
    match source {
        Source::Provider(spec) => Ok(spec),
        Source::Scenario(text) => {
            let host = open_host(cli).await?;
            let blob = agent_kernel::host::BlobRef::of(text.as_bytes());
            host.host()
                .storage
                .put_blob(&blob.hash, text.into_bytes())
                .await?;
            Ok(ProviderSpec::Scripted { scenario: blob })
        }
    }
}
