//! Skills (S5.6): declarative manifests with a closed schema (name,
//! description, instructions, allowed tools). A Skill can only narrow the
//! authorised tool set, as a `Caveat::Tools` on the run's capabilities; it
//! never grants a tool, runs code, or carries a secret.

use std::collections::BTreeSet;

use agent_capabilities::{Capability, Caveat};
use agent_kernel::protocol::AppliedSkill;
use serde::Serialize;
use serde_json::Value;

use super::secrets::{SecretKind, find_secret};

/// The manifest's fields; every other field is refused.
pub const SKILL_FIELDS: [&str; 4] = ["name", "description", "instructions", "allowed_tools"];

/// Longest name, in characters (`[a-z0-9_-]`, starting with a letter or digit).
pub const MAX_NAME_CHARS: usize = 64;
/// Longest description, in characters.
pub const MAX_DESCRIPTION_CHARS: usize = 1_024;
/// Longest instruction text, in bytes of UTF-8.
pub const MAX_INSTRUCTIONS_BYTES: usize = 16 * 1024;
/// Most tools a Skill may list.
pub const MAX_ALLOWED_TOOLS: usize = 64;
/// Longest tool name, in characters.
pub const MAX_TOOL_NAME_CHARS: usize = 128;
/// Longest manifest text accepted by [`Skill::parse`], in bytes.
pub const MAX_MANIFEST_BYTES: usize = 64 * 1024;

/// A validated Skill.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Skill {
    name: String,
    description: String,
    instructions: String,
    allowed_tools: BTreeSet<String>,
}

/// Why a manifest was refused. Each message names the field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SkillError {
    #[error("the Skill manifest is not valid JSON: {0}")]
    InvalidJson(String),
    #[error("the Skill manifest is {len} bytes, over the limit of {limit} bytes")]
    ManifestTooLarge { len: usize, limit: usize },
    #[error(
        "a Skill manifest must be a JSON object with name, description, instructions and allowed_tools"
    )]
    NotAnObject,
    #[error(
        "the Skill manifest has an unknown field `{field}`; only name, description, instructions and allowed_tools are allowed"
    )]
    UnknownField { field: String },
    #[error("the Skill manifest is missing the field `{field}`")]
    MissingField { field: &'static str },
    #[error("the Skill field `{field}` must be {expected}")]
    WrongType {
        field: String,
        expected: &'static str,
    },
    #[error("the Skill field `{field}` is empty")]
    Empty { field: &'static str },
    #[error("the Skill field `{field}` is {len} {unit}, over the limit of {limit}")]
    TooLong {
        field: &'static str,
        len: usize,
        limit: usize,
        unit: &'static str,
    },
    #[error("the Skill field `{field}` contains a control character; use plain text")]
    ControlCharacter { field: String },
    #[error("the Skill name must use only a-z, 0-9, `-` and `_` and start with a letter or digit")]
    InvalidName,
    #[error(
        "the Skill field `{field}` is not a valid tool name (1 to {MAX_TOOL_NAME_CHARS} characters from A-Z a-z 0-9 _ - . :)"
    )]
    InvalidToolName { field: String },
    #[error("the Skill lists {count} tools in `allowed_tools`, over the limit of {limit}")]
    TooManyTools { count: usize, limit: usize },
    #[error("the Skill lists the tool `{tool}` twice in `allowed_tools`")]
    DuplicateTool { tool: String },
    #[error(
        "the Skill field `{field}` contains what looks like {kind}; Skills must not hold secrets — remove it and configure credentials in the host instead"
    )]
    SecretLike { field: String, kind: SecretKind },
}

/// The outcome of applying a Skill to an authorised tool set.
#[derive(Debug, Clone)]
pub struct Narrowed {
    /// The run's capability with `Caveat::Tools(tools)` appended.
    pub capability: Capability,
    /// The tools the run may use while the Skill applies: the intersection.
    pub tools: BTreeSet<String>,
    /// Tools the Skill names that were not authorised: granted nothing.
    pub not_granted: BTreeSet<String>,
}

impl Skill {
    /// Parse and validate a manifest from JSON text.
    pub fn parse(text: &str) -> Result<Skill, SkillError> {
        if text.len() > MAX_MANIFEST_BYTES {
            return Err(SkillError::ManifestTooLarge {
                len: text.len(),
                limit: MAX_MANIFEST_BYTES,
            });
        }
        let value: Value =
            serde_json::from_str(text).map_err(|e| SkillError::InvalidJson(e.to_string()))?;
        Skill::from_json(&value)
    }

    /// Validate a manifest: the closed schema first, then a scan of every
    /// string for secret-looking values, then types and limits.
    pub fn from_json(value: &Value) -> Result<Skill, SkillError> {
        let Some(obj) = value.as_object() else {
            return Err(SkillError::NotAnObject);
        };
        if let Some(field) = obj.keys().find(|k| !SKILL_FIELDS.contains(&k.as_str())) {
            return Err(SkillError::UnknownField {
                field: field.clone(),
            });
        }
        for (field, v) in obj {
            scan_for_secrets(field, v)?;
        }
        let name = string_field(obj, "name")?;
        let description = string_field(obj, "description")?;
        let instructions = string_field(obj, "instructions")?;
        let tools = match obj.get("allowed_tools") {
            None => {
                return Err(SkillError::MissingField {
                    field: "allowed_tools",
                });
            }
            Some(Value::Array(items)) => items,
            Some(_) => {
                return Err(SkillError::WrongType {
                    field: "allowed_tools".into(),
                    expected: "an array of tool names",
                });
            }
        };

        check_len("name", name.chars().count(), MAX_NAME_CHARS, "characters")?;
        let mut chars = name.chars();
        let valid_name = chars
            .next()
            .is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
            && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_');
        if !valid_name {
            return Err(SkillError::InvalidName);
        }
        check_len(
            "description",
            description.chars().count(),
            MAX_DESCRIPTION_CHARS,
            "characters",
        )?;
        check_text("description", &description)?;
        check_len(
            "instructions",
            instructions.len(),
            MAX_INSTRUCTIONS_BYTES,
            "bytes",
        )?;
        check_text("instructions", &instructions)?;

        if tools.len() > MAX_ALLOWED_TOOLS {
            return Err(SkillError::TooManyTools {
                count: tools.len(),
                limit: MAX_ALLOWED_TOOLS,
            });
        }
        let mut allowed_tools = BTreeSet::new();
        for (i, item) in tools.iter().enumerate() {
            let field = format!("allowed_tools[{i}]");
            let Value::String(tool) = item else {
                return Err(SkillError::WrongType {
                    field,
                    expected: "a tool name (a string)",
                });
            };
            let valid = !tool.is_empty()
                && tool.chars().count() <= MAX_TOOL_NAME_CHARS
                && tool
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | ':'));
            if !valid {
                return Err(SkillError::InvalidToolName { field });
            }
            if !allowed_tools.insert(tool.clone()) {
                return Err(SkillError::DuplicateTool { tool: tool.clone() });
            }
        }
        Ok(Skill {
            name,
            description,
            instructions,
            allowed_tools,
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn description(&self) -> &str {
        &self.description
    }

    /// The instruction text: declarative guidance for the model, nothing executable.
    pub fn instructions(&self) -> &str {
        &self.instructions
    }

    /// The tools the Skill allows (before intersecting with what is authorised).
    pub fn allowed_tools(&self) -> &BTreeSet<String> {
        &self.allowed_tools
    }

    /// The Skill as a run applies it (`RunConfig::skill`): the supervisor
    /// narrows the run's tools to `allowed_tools` and puts the caveat on
    /// every capability it mints.
    pub fn applied(&self) -> AppliedSkill {
        AppliedSkill {
            name: self.name.clone(),
            instructions: self.instructions.clone(),
            tools: self.allowed_tools.clone(),
        }
    }

    /// The authorised tools this Skill keeps: `authorised ∩ allowed_tools`.
    /// Never larger than `authorised`.
    pub fn narrow_tools(&self, authorised: &BTreeSet<String>) -> BTreeSet<String> {
        authorised
            .intersection(&self.allowed_tools)
            .cloned()
            .collect()
    }

    /// The caveat that applies this Skill to capabilities of a run whose
    /// authorised tools are `authorised`.
    pub fn caveat(&self, authorised: &BTreeSet<String>) -> Caveat {
        Caveat::Tools(self.narrow_tools(authorised))
    }

    /// Apply the Skill: `capability` gains `Caveat::Tools(authorised ∩
    /// allowed_tools)`, which verification enforces, and the run's tool set
    /// becomes that intersection. Tools the Skill names outside `authorised`
    /// are reported in `not_granted` and granted nothing.
    pub fn narrow(&self, capability: &Capability, authorised: &BTreeSet<String>) -> Narrowed {
        let tools = self.narrow_tools(authorised);
        let not_granted = self.allowed_tools.difference(authorised).cloned().collect();
        Narrowed {
            capability: capability.attenuate(Caveat::Tools(tools.clone())),
            tools,
            not_granted,
        }
    }
}

fn string_field(
    obj: &serde_json::Map<String, Value>,
    field: &'static str,
) -> Result<String, SkillError> {
    match obj.get(field) {
        None => Err(SkillError::MissingField { field }),
        Some(Value::String(s)) if s.trim().is_empty() => Err(SkillError::Empty { field }),
        Some(Value::String(s)) => Ok(s.clone()),
        Some(_) => Err(SkillError::WrongType {
            field: field.into(),
            expected: "a string",
        }),
    }
}

fn check_len(
    field: &'static str,
    len: usize,
    limit: usize,
    unit: &'static str,
) -> Result<(), SkillError> {
    if len > limit {
        Err(SkillError::TooLong {
            field,
            len,
            limit,
            unit,
        })
    } else {
        Ok(())
    }
}

/// Text fields may hold newlines and tabs, no other control characters.
fn check_text(field: &str, text: &str) -> Result<(), SkillError> {
    if text
        .chars()
        .any(|c| c.is_control() && c != '\n' && c != '\t' && c != '\r')
    {
        return Err(SkillError::ControlCharacter {
            field: field.to_owned(),
        });
    }
    Ok(())
}

/// Refuse a secret-looking value anywhere in `value`, naming the field
/// (`allowed_tools[2]` for an array item).
fn scan_for_secrets(field: &str, value: &Value) -> Result<(), SkillError> {
    match value {
        Value::String(s) => match find_secret(s) {
            Some(kind) => Err(SkillError::SecretLike {
                field: field.to_owned(),
                kind,
            }),
            None => Ok(()),
        },
        Value::Array(items) => items
            .iter()
            .enumerate()
            .try_for_each(|(i, v)| scan_for_secrets(&format!("{field}[{i}]"), v)),
        Value::Object(map) => map
            .iter()
            .try_for_each(|(k, v)| scan_for_secrets(&format!("{field}.{k}"), v)),
        _ => Ok(()),
    }
}
