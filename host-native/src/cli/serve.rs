//! `agentrt serve`: the flags checked, the gateway wired (reader, relay,
//! MCP through the gateway, the demo page) and served until stopped.

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

use agent_host_native::document_sandbox;
use agent_host_native::host::TokioExecutor;
use anyhow::{Context, anyhow};

use super::args::Cli;
use super::exit::{code, usage};
use super::open::load_config;

pub(crate) async fn serve(
    cli: &Cli,
    listen: std::net::SocketAddr,
    allow_origins: &[String],
    relays: &[String],
    www: Option<PathBuf>,
    pkg: Option<PathBuf>,
) -> anyhow::Result<u8> {
    use agent_host_native::serve::{gateway, page, relay};
    let allowed = allow_origins
        .iter()
        .map(|o| gateway::AllowedOrigin::parse(o).map_err(|e| usage(e.to_string())))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let listen = gateway::ListenAddress::check(listen).map_err(|e| usage(e.to_string()))?;
    let relay = relays
        .iter()
        .map(|spec| relay::RelayTarget::parse(spec, |var| std::env::var(var).ok()))
        .collect::<Result<Vec<_>, _>>()
        .and_then(relay::Relay::new)
        .map_err(|e| usage(e.to_string()))?;
    let config = load_config(cli)?;
    let executor: Arc<dyn agent_kernel::host::Executor> =
        Arc::new(TokioExecutor::current().ok_or_else(|| anyhow!("no async runtime"))?);
    let clock = Arc::new(agent_host_native::host::SystemClock::new(
        tokio::runtime::Handle::current(),
    ));
    let policy = agent_fetch::UrlPolicy::public_web(Arc::new(agent_fetch::SystemResolver::new(
        executor.clone(),
    )));
    let reader_config = match &config.reader {
        Some(r) => agent_fetch::ReaderConfig {
            jina_base: Some(r.endpoint.trim_end_matches('/').to_owned()),
            jina_key: r.api_key_env.as_ref().and_then(|v| std::env::var(v).ok()),
        },
        None => agent_fetch::ReaderConfig::direct_only(),
    };
    // Pages the gateway reads for the browser are extracted in the
    // document sandbox too (capped, killed at the deadline).
    let documents = document_sandbox::DocumentSandbox::new(
        document_sandbox::DocumentSandbox::command(
            std::env::current_exe().context("cannot find the agentrt executable")?,
        ),
        agent_readable::ExtractionSlots::SHARED_SLOTS,
    )
    .context("cannot prepare the document sandbox")?;
    let reader = agent_fetch::WebReader::new(policy, reader_config, Default::default(), clock)
        .with_blocking(executor)
        .with_readable_extractor(Arc::new(documents));
    for (flag, dir) in [("--www", &www), ("--pkg", &pkg)] {
        if let Some(dir) = dir.as_ref().filter(|d| !d.is_dir()) {
            return Err(usage(format!(
                "{flag} {}: not a directory; give host-browser/www (--www) or the built bundle host-browser/pkg (--pkg)",
                dir.display()
            )));
        }
    }
    let dirs = page::PageDirs::resolve(www, pkg);
    let listener = listen.bind().await.map_err(|e| {
        usage(format!(
            "cannot listen on {}: {e}; choose another --port or --listen address",
            listen.addr()
        ))
    })?;
    let addr = listener.local_addr()?;
    if !listen.is_loopback() {
        eprintln!(
            "agentrt: listening beyond loopback on {addr} over plain HTTP: TLS belongs to a reverse proxy in front, which must send Host: {addr}"
        );
    }
    let entropy = agent_host_native::host::OsEntropy::probe()?;
    let token = gateway::random_token(&entropy);
    let origin = gateway::page_origin(addr);
    // The page's MCP requests: to the [[mcp]] servers with their own
    // credentials, anywhere else only through the public-address policy.
    let mcp_servers = agent_host_native::serve::mcp_gateway::configured_servers(
        &config.mcp,
        &*config.secret_resolver(),
    )
    .await
    .map_err(|e| usage(format!("[[mcp]]: {e}")))?;
    let mcp_policy =
        agent_fetch::UrlPolicy::public_web(Arc::new(agent_fetch::SystemResolver::new(Arc::new(
            TokioExecutor::current().ok_or_else(|| anyhow!("no async runtime"))?,
        ))));
    let mcp = agent_host_native::serve::mcp_gateway::McpGateway::new(
        mcp_servers,
        Some(Arc::new(mcp_policy)),
    );
    let state = gateway::GatewayState::new(Arc::new(reader), token.clone(), [origin.clone()])
        .also_allowing(&allowed)
        .with_relay(relay.clone())
        .with_mcp(mcp);
    let page_url = dirs
        .as_ref()
        .map(|_| format!("{origin}/#gateway-token={token}"));
    if cli.json {
        println!(
            "{}",
            serde_json::json!({"event": "listening", "url": origin, "token": token, "page": page_url,
                "allowed_origins": allowed.iter().map(|o| o.as_str()).collect::<Vec<_>>(),
                "relay": relay.providers()})
        );
    } else {
        println!("gateway listening on {origin}");
        for o in &allowed {
            println!("also allowing pages of {}", o.as_str());
        }
        for p in relay.providers() {
            println!(
                "relaying {p} model requests at {origin}{}/{p} (the page sends the token as its key)",
                relay::RELAY_PREFIX
            );
        }
        println!("token: {token}");
        match (&page_url, &dirs) {
            (Some(url), Some(dirs)) => {
                println!("demo page: {url}");
                if !dirs.pkg.join("agent_host_browser.js").is_file() {
                    eprintln!(
                        "agentrt: the wasm bundle is not built in {}; run `cargo xtask demo` (or node host-browser/e2e/build.mjs)",
                        dirs.pkg.display()
                    );
                }
            }
            _ => eprintln!(
                "agentrt: no demo page directory found; pass --www DIR (host-browser/www) to serve the page"
            ),
        }
    }
    std::io::stdout().flush()?;
    // Host/Origin checks, framing headers and connection limits cover the page too.
    let app = match dirs {
        Some(dirs) => gateway::router_with_page(state, page::router(dirs)),
        None => gateway::router(state),
    };
    gateway::serve_app(listener, app, gateway::ServeLimits::default()).await?;
    Ok(code::OK)
}
