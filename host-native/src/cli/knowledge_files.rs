//! `agentrt kb add BASE --file PATH` and `--session ID --workspace PATH |
//! --artifact ID` (issue 37 part 5): a local file's bytes read here
//! (refused over `extract_document`'s input limit before they are read),
//! a session's workspace file or Artifact read by the assembly; either way
//! the assembly's `extract_document` readers extract the text (PDFs in the
//! document sandbox) and the document's provenance names the file and the
//! SHA-256 of its bytes. A file that cannot be added is one line with its
//! code, and adds nothing.

use std::path::PathBuf;

use agent_assembly::knowledge_files::{AddedFile, KnowledgeFileError};
use agent_host_native::app::App;
use agent_knowledge::SourceRef;
use serde_json::json;

use super::exit::{code, usage};
use super::open::parse_session;
use super::render::print_json_or_text;

/// The workspace files and Artifacts of one session to add.
pub(crate) struct SessionFiles<'a> {
    pub(crate) session: Option<&'a str>,
    pub(crate) workspace: &'a [String],
    pub(crate) artifacts: &'a [String],
}

fn refused(e: KnowledgeFileError) -> anyhow::Error {
    usage(format!("{e} ({})", e.code()))
}

fn shown(file: AddedFile) -> serde_json::Value {
    json!({
        "id": file.record.id,
        "source": file.record.source,
        "format": file.format,
        "truncated": file.truncated,
    })
}

/// Add the text files (`texts`, the plain path), documents (`--file`) and
/// a session's files to `base`.
pub(crate) async fn add(
    json: bool,
    app: &App,
    base: &str,
    texts: &[PathBuf],
    documents: &[PathBuf],
    from_session: SessionFiles<'_>,
) -> anyhow::Result<u8> {
    let assembly = app.assembly();
    let limit = assembly.knowledge_file_limit();
    let mut added = Vec::new();
    for file in texts.iter().chain(documents) {
        let name = file
            .file_name()
            .and_then(|n| n.to_str())
            .ok_or_else(|| usage(format!("{}: the name must be UTF-8", file.display())))?
            .to_owned();
        let size = std::fs::metadata(file)
            .map_err(|e| {
                let code = if e.kind() == std::io::ErrorKind::NotFound {
                    "document_not_found"
                } else {
                    "document_store_unavailable"
                };
                usage(format!("cannot read {}: {e} ({code})", file.display()))
            })?
            .len();
        if size > limit as u64 {
            return Err(usage(format!(
                "{} is {size} bytes, over the {limit}-byte document limit (document_too_large)",
                file.display()
            )));
        }
        let bytes = std::fs::read(file)
            .map_err(|e| usage(format!("cannot read {}: {e}", file.display())))?;
        let source = SourceRef::LocalFile {
            name: name.clone(),
            content_hash: String::new(),
        };
        let file = assembly
            .add_knowledge_bytes(base, &name, bytes, None, source)
            .await
            .map_err(refused)?;
        added.push(shown(file));
    }
    if let Some(session) = from_session.session {
        let session = parse_session(session)?;
        for path in from_session.workspace {
            let file = assembly
                .add_knowledge_from_workspace(base, &session, path)
                .await
                .map_err(refused)?;
            added.push(shown(file));
        }
        for id in from_session.artifacts {
            let file = assembly
                .add_knowledge_from_artifact(base, &session, id)
                .await
                .map_err(refused)?;
            added.push(shown(file));
        }
    }
    let count = added.len();
    print_json_or_text(
        json,
        json!({"base": base, "added": count, "documents": added}),
        format!("added {count} document(s) to {base}"),
    )?;
    Ok(code::OK)
}
