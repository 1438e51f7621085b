//! Agent Profiles on the command line (S10): `agentrt profile
//! list|show|save|diff|rollback|fork|export|import`. Every rule (bounds,
//! revisions, the narrowing-only import, what an export leaves out, lazy
//! migration of legacy assistants) is `agent-profiles`'; this module reads
//! the person's files, calls the store the assembly opens over this data
//! directory, and prints what it answered (`--json`: one object).

use std::io::Write;
use std::path::Path;

use agent_host_native::app::App;
use agent_profiles::{AgentProfileV2, Layer, ProfileError, ProfileId};
use serde_json::json;

use super::args::ProfileAction;
use super::exit::{code, usage};
use super::render::print_json_or_text;

fn profile_id(text: &str) -> anyhow::Result<ProfileId> {
    ProfileId::new(text).map_err(|e| usage(e.to_string()))
}

/// A store refusal the person can fix is a usage error (exit 2).
fn refused(e: ProfileError) -> anyhow::Error {
    match e {
        ProfileError::Storage(_) => anyhow::Error::new(e),
        other => usage(other.to_string()),
    }
}

fn read(path: &Path) -> anyhow::Result<Vec<u8>> {
    std::fs::read(path).map_err(|e| usage(format!("cannot read {}: {e}", path.display())))
}

/// Run one `agentrt profile` action; `ceiling` is what this host allows an
/// imported profile at most (its defaults as the global layer).
pub(crate) async fn profile(
    json: bool,
    app: &App,
    action: &ProfileAction,
    ceiling: &Layer,
) -> anyhow::Result<u8> {
    let store = app.assembly().profiles();
    match action {
        ProfileAction::List => {
            let list = store.list().await.map_err(refused)?;
            let unreadable: Vec<String> = list.unreadable.iter().map(|e| e.to_string()).collect();
            let lines: Vec<String> = list
                .profiles
                .iter()
                .map(|p| {
                    let fork = p
                        .forked_from
                        .as_ref()
                        .map(|f| format!(", forked from {} r{}", f.id, f.revision))
                        .unwrap_or_default();
                    format!("{}  {}  ({:?}, r{}{fork})", p.id, p.name, p.mode, p.latest)
                })
                .chain(unreadable.iter().map(|e| format!("unreadable: {e}")))
                .collect();
            print_json_or_text(
                json,
                json!({"profiles": list.profiles, "unreadable": unreadable}),
                if lines.is_empty() {
                    "no profiles".into()
                } else {
                    lines.join("\n")
                },
            )?;
        }
        ProfileAction::Show { id, revision } => {
            let id = profile_id(id)?;
            let r = match revision {
                Some(n) => store.get_revision(&id, *n).await,
                None => store.get(&id).await,
            }
            .map_err(refused)?;
            let text = serde_json::to_string_pretty(&r.profile)?;
            print_json_or_text(
                json,
                serde_json::to_value(&r)?,
                format!(
                    "profile {} revision {} ({})\n{text}",
                    id, r.revision, r.hash
                ),
            )?;
        }
        ProfileAction::Save { file } => {
            let profile: AgentProfileV2 = serde_json::from_slice(&read(file)?)
                .map_err(|e| usage(format!("{} is not a profile: {e}", file.display())))?;
            let saved = match store.head(&profile.id).await {
                Ok(head) => store.save(&profile, head.latest).await,
                Err(ProfileError::NotFound { .. }) => store.create(&profile).await,
                Err(e) => Err(e),
            }
            .map_err(refused)?;
            print_json_or_text(
                json,
                json!({"profile": profile.id, "revision": saved.revision, "hash": saved.hash}),
                format!(
                    "saved profile {} as revision {}",
                    profile.id, saved.revision
                ),
            )?;
        }
        ProfileAction::Diff { id, a, b } => {
            let id = profile_id(id)?;
            let changes = store.diff(&id, *a, *b).await.map_err(refused)?;
            let text = changes
                .iter()
                .map(|c| format!("{}: {} -> {}", c.path, c.before, c.after))
                .collect::<Vec<_>>()
                .join("\n");
            print_json_or_text(
                json,
                json!({"profile": id, "from": a, "to": b, "changes": changes}),
                if text.is_empty() {
                    "no difference".into()
                } else {
                    text
                },
            )?;
        }
        ProfileAction::Rollback { id, to } => {
            let id = profile_id(id)?;
            let r = store.rollback(&id, *to).await.map_err(refused)?;
            print_json_or_text(
                json,
                json!({"profile": id, "revision": r.revision, "rolled_back_to": to}),
                format!("profile {id} revision {} equals revision {to}", r.revision),
            )?;
        }
        ProfileAction::Fork { id, new_id, name } => {
            let id = profile_id(id)?;
            let new_id = profile_id(new_id)?;
            let name = name.clone().unwrap_or_else(|| new_id.to_string());
            let r = store
                .fork(&id, new_id.clone(), &name)
                .await
                .map_err(refused)?;
            print_json_or_text(
                json,
                json!({"profile": new_id, "revision": r.revision, "forked_from": id}),
                format!("profile {new_id} forked from {id}"),
            )?;
        }
        ProfileAction::Export { id } => {
            let bytes = store.export(&profile_id(id)?).await.map_err(refused)?;
            let mut out = std::io::stdout().lock();
            out.write_all(&bytes)?;
            writeln!(out)?;
        }
        ProfileAction::Import { file, as_id } => {
            let as_id = match as_id {
                Some(id) => Some(profile_id(id)?),
                None => None,
            };
            let imported = store
                .import(&read(file)?, ceiling, as_id)
                .await
                .map_err(refused)?;
            let narrowed: Vec<String> = imported
                .refused
                .iter()
                .map(|r| format!("{}: kept {}", r.field, r.kept))
                .collect();
            print_json_or_text(
                json,
                json!({
                    "profile": imported.revision.profile.id,
                    "revision": imported.revision.revision,
                    "narrowed": imported.refused,
                }),
                format!(
                    "imported profile {}{}",
                    imported.revision.profile.id,
                    if narrowed.is_empty() {
                        String::new()
                    } else {
                        format!(" (narrowed to this host: {})", narrowed.join("; "))
                    }
                ),
            )?;
        }
    }
    Ok(code::OK)
}
