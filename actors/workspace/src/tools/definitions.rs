//! The definitions of the workspace and Artifact tools: the schema of each
//! tool's arguments, its declared effects, idempotency and target rule (the
//! table in [`crate::tools`]).

use serde_json::{Value, json};

use agent_capabilities::{EffectClass, EffectSet, Idempotency, Origin, Sensitivity, TargetScope};
use agent_kernel::protocol::{TargetRule, ToolDefinition};

use crate::limits::MAX_READ_BYTES;
use crate::tool_names::{DELETE, EMPTY_TRASH, LIST, MOVE, PUBLISH, READ, RESTORE, WRITE};

fn def(
    name: &str,
    description: &str,
    parameters: Value,
    effects: &[EffectClass],
    idempotency: Idempotency,
    target: TargetRule,
) -> ToolDefinition {
    ToolDefinition {
        name: name.to_owned(),
        description: description.to_owned(),
        parameters,
        origin: Origin::Builtin,
        provider: None,
        effects: effects.iter().copied().collect::<EffectSet>(),
        idempotency,
        sensitivity: Sensitivity::Private,
        target,
        annotations: None,
    }
}

fn path_arg(field: &str) -> TargetRule {
    TargetRule::WorkspacePathArg {
        field: field.to_owned(),
    }
}

fn whole_workspace() -> TargetRule {
    TargetRule::Fixed {
        scope: TargetScope::Workspace {
            prefix: String::new(),
        },
    }
}

const PATH_DOC: &str =
    "Path relative to the session workspace root, folders separated by /, e.g. notes/plan.md";

/// The definitions of every workspace and Artifact tool, for hosts to register.
pub fn all_tool_definitions() -> Vec<ToolDefinition> {
    use EffectClass::*;
    use Idempotency::*;
    vec![
        def(
            LIST,
            "List the files and sub-folders of a workspace folder (\"\" is the root), or the trash.",
            json!({"type": "object", "additionalProperties": false, "required": ["folder"],
            "properties": {
                "folder": {"type": "string", "description": "Folder to list; \"\" for the root."},
                "recursive": {"type": "boolean", "description": "List every file below the folder."},
                "trash": {"type": "boolean", "description": "List the trash instead (folder must be \"\")."}
            }}),
            &[ReadLocal],
            Idempotent,
            // "" (the root) is not a path the pipeline's path rule accepts.
            whole_workspace(),
        ),
        def(
            READ,
            "Read a workspace file. Returns its text (up to 65536 bytes per call; use offset to read on), revision and MIME type.",
            json!({"type": "object", "additionalProperties": false, "required": ["path"],
            "properties": {
                "path": {"type": "string", "description": PATH_DOC},
                "offset": {"type": "integer", "minimum": 0},
                "length": {"type": "integer", "minimum": 1, "maximum": MAX_READ_BYTES}
            }}),
            &[ReadLocal],
            Idempotent,
            path_arg("path"),
        ),
        def(
            WRITE,
            "Create a workspace file, or replace or append to one. Replacing or appending to an existing file needs its current revision as expectedRevision; a stale revision fails and returns the latest state.",
            json!({"type": "object", "additionalProperties": false, "required": ["path", "content"],
            "properties": {
                "path": {"type": "string", "description": PATH_DOC},
                "content": {"type": "string"},
                "mime": {"type": "string", "description": "MIME type; guessed from the extension when absent."},
                "expectedRevision": {"type": "integer", "minimum": 1},
                "append": {"type": "boolean"}
            }}),
            &[WriteLocal],
            Idempotent,
            path_arg("path"),
        ),
        def(
            MOVE,
            "Move or rename a workspace file. The destination must not exist.",
            json!({"type": "object", "additionalProperties": false, "required": ["from", "to"],
            "properties": {
                "from": {"type": "string", "description": PATH_DOC},
                "to": {"type": "string", "description": PATH_DOC},
                "expectedRevision": {"type": "integer", "minimum": 1}
            }}),
            &[WriteLocal],
            Idempotent,
            whole_workspace(),
        ),
        def(
            DELETE,
            "Move a workspace file to the trash (it can be restored until the trash is emptied).",
            json!({"type": "object", "additionalProperties": false, "required": ["path"],
            "properties": {
                "path": {"type": "string", "description": PATH_DOC},
                "expectedRevision": {"type": "integer", "minimum": 1}
            }}),
            &[WriteLocal],
            Idempotent,
            path_arg("path"),
        ),
        def(
            RESTORE,
            "Restore a file from the trash to its original path (the most recently deleted one, or trashId).",
            json!({"type": "object", "additionalProperties": false, "required": ["path"],
            "properties": {
                "path": {"type": "string", "description": "The file's original path."},
                "trashId": {"type": "string"}
            }}),
            &[WriteLocal],
            NonIdempotent,
            path_arg("path"),
        ),
        def(
            EMPTY_TRASH,
            "Permanently delete everything in the workspace trash. Cannot be undone; asks the person first.",
            json!({"type": "object", "additionalProperties": false, "properties": {}}),
            &[DestructiveLocal],
            NonIdempotent,
            whole_workspace(),
        ),
        def(
            PUBLISH,
            "Publish an immutable Artifact from a workspace file (path) or from content. Later edits of the file never change it; the same bytes give the same Artifact id.",
            json!({"type": "object", "additionalProperties": false, "required": ["name"],
            "properties": {
                "name": {"type": "string", "minLength": 1, "maxLength": 255},
                "mime": {"type": "string"},
                "path": {"type": "string", "description": PATH_DOC},
                "expectedRevision": {"type": "integer", "minimum": 1},
                "content": {"type": "string"}
            }}),
            &[ReadLocal, WriteLocal],
            Idempotent,
            whole_workspace(),
        ),
    ]
}
