//! Large tool results (S5.8): [`WorkspaceSpill`] stores a result that is
//! too large for the model context as a workspace file under the reserved
//! folder `.results/<run>/<call>.<ext>` (or as an Artifact) and returns a
//! `Reference`; [`bounded_summary`] makes the bounded text that enters the
//! model context in its place.

use serde::{Deserialize, Serialize};

use agent_kernel::protocol::{Reference, ReferenceKind, ResultSpill};
use agent_kernel::{CallId, RunId, SessionId};

use crate::actor::WorkspaceDirectory;
use crate::error::WorkspaceError;
use crate::limits::{MAX_SUMMARY_CHARS, RESULTS_FOLDER};
use crate::manifest::Source;
use crate::mime::is_text;
use crate::path::WorkspacePath;
use crate::store::Expect;

/// Where spilled results go.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SpillTarget {
    /// A workspace file under `.results/` (readable with `workspace_read`).
    #[default]
    Workspace,
    /// An immutable Artifact.
    Artifact,
}

/// The `ResultSpill` the host hands to the tools actor.
#[derive(Debug, Clone)]
pub struct WorkspaceSpill {
    directory: WorkspaceDirectory,
    target: SpillTarget,
}

/// A path segment for an id: the id itself when it is a valid single
/// segment, otherwise `x-` and its bytes in hex (ids may hold `:`).
fn segment_for(id: &str) -> String {
    match WorkspacePath::parse(id) {
        Ok(p) if p.depth() == 1 && p.as_str() == id => id.to_owned(),
        _ => {
            let hex: String = id.bytes().map(|b| format!("{b:02x}")).collect();
            format!("x-{hex}")
        }
    }
}

fn extension_for(mime: &str) -> &'static str {
    let essence = mime.split(';').next().unwrap_or_default().trim();
    match essence {
        "application/json" => "json",
        "text/markdown" => "md",
        "text/html" => "html",
        "text/csv" => "csv",
        _ if essence.ends_with("+json") => "json",
        _ if essence.starts_with("text/") => "txt",
        _ => "bin",
    }
}

/// The reserved path of the spilled result of `call` in `run`.
pub fn spill_path(run: &RunId, call: &CallId, mime: &str) -> Result<WorkspacePath, WorkspaceError> {
    Ok(WorkspacePath::parse(&format!(
        "{RESULTS_FOLDER}/{}/{}.{}",
        segment_for(run.as_str()),
        segment_for(call.as_str()),
        extension_for(mime)
    ))?)
}

impl WorkspaceSpill {
    pub fn new(directory: WorkspaceDirectory, target: SpillTarget) -> WorkspaceSpill {
        WorkspaceSpill { directory, target }
    }

    /// Store `bytes` and return a reference (the typed form of [`ResultSpill::spill`]).
    /// Spilling the same call again with the same bytes returns the same
    /// reference; with other bytes (a retried call) it replaces the file.
    pub async fn store(
        &self,
        session: &SessionId,
        run: &RunId,
        call: &CallId,
        tool: &str,
        mime: &str,
        bytes: Vec<u8>,
    ) -> Result<Reference, WorkspaceError> {
        let actors =
            self.directory
                .get(session)
                .ok_or_else(|| WorkspaceError::InvalidArgument {
                    field: "session",
                    reason: format!("the workspace of session {session} is not open on this host"),
                })?;
        let source = Source::Tool {
            tool: tool.to_owned(),
            run: run.clone(),
            call_id: call.clone(),
        };
        match self.target {
            SpillTarget::Artifact => {
                let name = format!("{tool} result ({call})");
                let published = actors
                    .artifacts
                    .publish(bytes, &name, mime, source, None)
                    .await?;
                let a = published.artifact;
                Ok(Reference {
                    kind: ReferenceKind::Artifact,
                    id: a.id.clone(),
                    name: Some(a.name),
                    mime: Some(a.mime),
                    size: a.size,
                    hash: a.id,
                })
            }
            SpillTarget::Workspace => {
                let path = spill_path(run, call, mime)?;
                let ws = &actors.workspace;
                let entry = match ws
                    .write(
                        &path,
                        bytes.clone(),
                        mime,
                        Expect::MustNotExist,
                        source.clone(),
                    )
                    .await
                {
                    Ok((entry, _)) => entry,
                    Err(WorkspaceError::AlreadyExists { latest }) if latest.source == source => {
                        if latest.hash == agent_capabilities::sha256_hex(&bytes) {
                            *latest
                        } else {
                            ws.write(
                                &path,
                                bytes,
                                mime,
                                Expect::Revision(latest.revision),
                                source,
                            )
                            .await?
                            .0
                        }
                    }
                    Err(e) => return Err(e),
                };
                Ok(Reference {
                    kind: ReferenceKind::WorkspaceFile,
                    id: entry.path.to_string(),
                    name: Some(entry.path.name().to_owned()),
                    mime: Some(entry.mime),
                    size: entry.size,
                    hash: entry.hash,
                })
            }
        }
    }
}

#[cfg_attr(target_arch = "wasm32", async_trait::async_trait(?Send))]
#[cfg_attr(not(target_arch = "wasm32"), async_trait::async_trait)]
impl ResultSpill for WorkspaceSpill {
    async fn spill(
        &self,
        session: &SessionId,
        run: &RunId,
        call: &CallId,
        tool: &str,
        mime: &str,
        bytes: Vec<u8>,
    ) -> Result<Reference, String> {
        self.store(session, run, call, tool, mime, bytes)
            .await
            .map_err(|e| e.to_string())
    }
}

/// The text that enters the model context instead of a spilled result: the
/// start of the content (text only) and a footer naming the reference. At
/// most `max_chars` characters (and never more than [`MAX_SUMMARY_CHARS`]).
pub fn bounded_summary(bytes: &[u8], reference: &Reference, max_chars: usize) -> String {
    let max_chars = max_chars.min(MAX_SUMMARY_CHARS);
    let mime = reference
        .mime
        .as_deref()
        .unwrap_or("application/octet-stream");
    let hash: String = reference.hash.chars().take(12).collect();
    let how = match reference.kind {
        ReferenceKind::WorkspaceFile => format!(
            "workspace file {} (read it with workspace_read and an offset)",
            reference.id
        ),
        ReferenceKind::Artifact => format!("Artifact {}", reference.id),
        ReferenceKind::Blob => format!("blob {}", reference.id),
    };
    let footer = format!(
        "\n[{} bytes of {mime} in total, sha256 {hash}…; the full result is stored as {how}]",
        reference.size
    );
    let footer_chars = footer.chars().count();
    if footer_chars >= max_chars {
        return footer.chars().take(max_chars).collect();
    }
    let budget = max_chars - footer_chars;
    let head = match std::str::from_utf8(bytes) {
        Ok(text) if is_text(mime) || !text.is_empty() => {
            let mut head: String = text.chars().take(budget).collect();
            if head.chars().count() < text.chars().count() && budget > 0 {
                // Mark the cut inside the budget.
                head = head.chars().take(budget.saturating_sub(1)).collect();
                head.push('…');
            }
            head
        }
        _ => format!("[binary result: {mime}]")
            .chars()
            .take(budget)
            .collect(),
    };
    format!("{head}{footer}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reference(size: u64) -> Reference {
        Reference {
            kind: ReferenceKind::WorkspaceFile,
            id: ".results/r/c.txt".into(),
            name: None,
            mime: Some("text/plain".into()),
            size,
            hash: "ab".repeat(32),
        }
    }

    #[test]
    fn s5_8_summary_is_bounded_at_below_and_above() {
        let text = "x".repeat(10_000);
        for max in [
            0,
            1,
            50,
            200,
            500,
            MAX_SUMMARY_CHARS,
            MAX_SUMMARY_CHARS + 1,
            1_000_000,
        ] {
            let s = bounded_summary(text.as_bytes(), &reference(10_000), max);
            assert!(s.chars().count() <= max.min(MAX_SUMMARY_CHARS), "{max}");
        }
        let s = bounded_summary(text.as_bytes(), &reference(10_000), 500);
        assert_eq!(s.chars().count(), 500);
        assert!(s.contains(".results/r/c.txt"));
        assert!(s.starts_with("xxx"));
        // A short result is shown whole.
        let s = bounded_summary(b"short", &reference(5), 500);
        assert!(s.starts_with("short\n["));
    }

    #[test]
    fn binary_summary_shows_no_bytes() {
        let mut r = reference(3);
        r.mime = Some("image/png".into());
        let s = bounded_summary(&[0xff, 0xfe, 0x00], &r, 300);
        assert!(s.starts_with("[binary result: image/png]"));
    }

    #[test]
    fn ids_become_safe_segments() {
        let run = RunId::new("run:1").unwrap();
        let call = CallId::new("CON").unwrap();
        let p = spill_path(&run, &call, "application/json").unwrap();
        assert_eq!(p.as_str(), ".results/x-72756e3a31/x-434f4e.json");
        let p = spill_path(
            &RunId::new("r1").unwrap(),
            &CallId::new("c.2").unwrap(),
            "text/plain",
        )
        .unwrap();
        assert_eq!(p.as_str(), ".results/r1/c.2.txt");
        let p = spill_path(
            &RunId::new("..").unwrap(),
            &CallId::new("a.").unwrap(),
            "x/y",
        )
        .unwrap();
        assert_eq!(p.as_str(), ".results/x-2e2e/x-612e.bin");
    }
}
