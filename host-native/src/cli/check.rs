//! `agentrt check url|path`: whether the URL policy lets `fetch_url` read a
//! URL, or whether a text is a valid workspace path.

use std::sync::Arc;

use agent_host_native::host::TokioExecutor;
use anyhow::anyhow;

use super::args::{CheckWhat, Cli};
use super::exit::code;

pub(crate) async fn check(cli: &Cli, what: &CheckWhat) -> anyhow::Result<u8> {
    let (subject, verdict): (String, Result<String, String>) = match what {
        CheckWhat::Url { url } => {
            let executor = TokioExecutor::current().ok_or_else(|| anyhow!("no async runtime"))?;
            let policy = agent_fetch::UrlPolicy::public_web(Arc::new(
                agent_fetch::SystemResolver::new(Arc::new(executor)),
            ));
            let verdict = match policy.check(url).await {
                Ok(checked) => Ok(format!(
                    "public address; fetch_url may read {}",
                    checked.url()
                )),
                Err(e) => Err(e.to_string()),
            };
            (url.clone(), verdict)
        }
        CheckWhat::Path { path } => {
            let verdict = match agent_workspace::WorkspacePath::parse(path) {
                Ok(p) => Ok(format!("valid workspace path {:?}", p.as_str())),
                Err(e) => Err(e.to_string()),
            };
            (path.clone(), verdict)
        }
    };
    let kind = match what {
        CheckWhat::Url { .. } => "url",
        CheckWhat::Path { .. } => "path",
    };
    let allowed = verdict.is_ok();
    let reason = match &verdict {
        Ok(r) | Err(r) => r.clone(),
    };
    if cli.json {
        println!(
            "{}",
            serde_json::json!({"check": kind, "input": subject, "allowed": allowed, "reason": reason})
        );
    } else if allowed {
        println!("allowed: {subject}: {reason}");
    } else {
        println!("refused: {subject}: {reason}");
    }
    Ok(if allowed { code::OK } else { code::WAITING })
}
