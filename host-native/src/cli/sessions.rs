//! A person's session actions on the command line: `agentrt attach`,
//! `run --attach`, `session list|files|copy|delete`. Every rule (the path
//! gate, quotas, names, the MIME guess, S7.5's Artifact references, the
//! lease) is the assembly's; this module reads the person's file, calls the
//! assembly and prints what it answered.

use std::io::Write;
use std::path::Path;

use agent_assembly::Attachment;
use agent_host_native::app::App;
use agent_kernel::SessionId;
use agent_kernel::host::LeaseGuard;
use agent_workspace::manifest::FileEntry;

use super::args::Cli;
use super::exit::{session_action, usage};
use super::render::format_time;

/// Read the person's `file`; its base name is the attachment's name.
pub(crate) fn read_attachment(file: &Path) -> anyhow::Result<(Vec<u8>, String)> {
    let name = file
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| {
            usage(format!(
                "{}: the file's name must be UTF-8 text",
                file.display()
            ))
        })?
        .to_owned();
    let bytes =
        std::fs::read(file).map_err(|e| usage(format!("cannot read {}: {e}", file.display())))?;
    Ok((bytes, name))
}

/// Bring `file` into the session `held` is the lease of, at `path` (default:
/// its base name), through [`agent_assembly::Assembly::import_file`].
pub(crate) async fn attach(
    app: &App,
    held: &LeaseGuard,
    file: &Path,
    path: Option<&str>,
    mime: Option<&str>,
) -> anyhow::Result<FileEntry> {
    let (bytes, name) = read_attachment(file)?;
    let attachment = Attachment {
        path: path.unwrap_or(&name),
        bytes,
        mime,
        name: Some(&name),
    };
    app.assembly()
        .import_file(held, attachment)
        .await
        .map_err(session_action)
}

/// One line (or JSON object) telling what was attached.
pub(crate) fn print_attached(cli: &Cli, entry: &FileEntry, to_stderr: bool) -> anyhow::Result<()> {
    let line = if cli.json {
        serde_json::json!({"event": "attached", "file": entry}).to_string()
    } else {
        format!(
            "attached {} to session {} ({} bytes, {})",
            entry.path, entry.session, entry.size, entry.mime
        )
    };
    if to_stderr && !cli.json {
        eprintln!("{line}");
    } else {
        writeln!(std::io::stdout().lock(), "{line}")?;
    }
    Ok(())
}

/// `agentrt session list`.
pub(crate) async fn list(cli: &Cli, app: &App) -> anyhow::Result<()> {
    let sessions = app.assembly().sessions().await.map_err(session_action)?;
    let mut out = std::io::stdout().lock();
    for s in &sessions {
        if cli.json {
            writeln!(out, "{}", serde_json::to_string(s)?)?;
        } else {
            writeln!(
                out,
                "{}  {} run(s), {} file(s), {} Artifact(s){}",
                s.session,
                s.runs,
                s.files,
                s.artifacts,
                s.last_run_at_ms
                    .map(|t| format!(", last run {}", format_time(t)))
                    .unwrap_or_default()
            )?;
        }
    }
    if sessions.is_empty() && !cli.json {
        writeln!(out, "no sessions yet")?;
    }
    Ok(())
}

/// `agentrt session files SESSION`.
pub(crate) async fn files(cli: &Cli, app: &App, session: &SessionId) -> anyhow::Result<()> {
    let files = app
        .assembly()
        .files(session)
        .await
        .map_err(session_action)?;
    let mut out = std::io::stdout().lock();
    for f in &files {
        if cli.json {
            writeln!(out, "{}", serde_json::to_string(f)?)?;
        } else {
            let source = serde_json::to_value(&f.source)
                .ok()
                .and_then(|v| v.get("kind").and_then(|k| k.as_str()).map(str::to_owned))
                .unwrap_or_default();
            writeln!(
                out,
                "{:<40} {:>10} bytes  {:<28} {}",
                f.path.as_str(),
                f.size,
                f.mime,
                source
            )?;
        }
    }
    if files.is_empty() && !cli.json {
        writeln!(out, "session {session} has no files")?;
    }
    Ok(())
}

/// `agentrt session copy FROM TO` (`to` held).
pub(crate) async fn copy(
    cli: &Cli,
    app: &App,
    from: &SessionId,
    to: &LeaseGuard,
) -> anyhow::Result<()> {
    let report = app
        .assembly()
        .copy_session(from, to)
        .await
        .map_err(session_action)?;
    if cli.json {
        println!(
            "{}",
            serde_json::json!({"event": "copied", "from": from, "to": to.session(), "report": report})
        );
    } else {
        println!(
            "copied session {from} to {}: {} file(s), {} trash entr(ies), {} Artifact(s)",
            to.session(),
            report.files,
            report.trash_entries,
            report.artifacts
        );
    }
    Ok(())
}

/// `agentrt session delete SESSION` (held).
pub(crate) async fn delete(cli: &Cli, app: &App, held: &LeaseGuard) -> anyhow::Result<()> {
    let report = app
        .assembly()
        .delete_session(held)
        .await
        .map_err(session_action)?;
    if cli.json {
        println!(
            "{}",
            serde_json::json!({"event": "deleted", "session": held.session(), "report": report})
        );
    } else {
        println!(
            "deleted session {}: {} file(s), {} trash entr(ies), {} Artifact reference(s), {} blob(s) freed",
            held.session(),
            report.files,
            report.trash_entries,
            report.artifacts,
            report.blobs_freed.len()
        );
    }
    Ok(())
}
