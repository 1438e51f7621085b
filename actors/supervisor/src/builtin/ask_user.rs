//! `ask_user`: a structured question for the person, with optional choices
//! and an optional JSON Schema for the answer. The supervisor carries out
//! its effect (the run waits in `awaiting_input` until `respond`); this
//! module owns the definition, the validation of its arguments and of the
//! answer, and how the person's typed text becomes the answer.

use std::collections::BTreeSet;

use agent_capabilities::{Idempotency, Origin, Sensitivity, Trust};
use agent_kernel::protocol::{TargetRule, ToolDefinition, ToolResult};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// The tool's name as registered.
pub const TOOL_NAME: &str = "ask_user";

/// Longest question, in characters.
pub const MAX_QUESTION_CHARS: usize = 2_000;
/// Most choices.
pub const MAX_CHOICES: usize = 20;
/// Longest choice, in characters.
pub const MAX_CHOICE_CHARS: usize = 200;
/// Largest answer schema, in bytes of JSON.
pub const MAX_SCHEMA_BYTES: usize = 16 * 1024;
/// Largest answer, in bytes of JSON.
pub const MAX_ANSWER_BYTES: usize = 64 * 1024;

/// The `ask_user` tool definition: no effect outside the run.
pub fn definition() -> ToolDefinition {
    ToolDefinition {
        name: TOOL_NAME.to_owned(),
        description: "Ask the person a question and wait for the answer. Use it when you \
                      need a decision or information only they have. Offer `choices` for a \
                      pick-one question, or an `answer_schema` (JSON Schema) when the \
                      answer must be structured."
            .to_owned(),
        parameters: json!({
            "type": "object",
            "properties": {
                "question": {
                    "type": "string",
                    "minLength": 1,
                    "maxLength": MAX_QUESTION_CHARS,
                },
                "choices": {
                    "type": "array",
                    "items": { "type": "string", "minLength": 1, "maxLength": MAX_CHOICE_CHARS },
                    "minItems": 1,
                    "maxItems": MAX_CHOICES,
                    "uniqueItems": true,
                },
                "answer_schema": {
                    "type": "object",
                    "description": "A JSON Schema the answer must satisfy."
                }
            },
            "required": ["question"],
            "additionalProperties": false,
        }),
        origin: Origin::Builtin,
        provider: None,
        effects: BTreeSet::new(),
        idempotency: Idempotency::Idempotent,
        sensitivity: Sensitivity::Private,
        target: TargetRule::None,
        annotations: None,
    }
}

/// A validated question.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AskUserRequest {
    pub question: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub choices: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer_schema: Option<Value>,
}

/// The arguments of `ask_user` were not acceptable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AskUserError {
    #[error("ask_user takes an object with `question` and optional `choices` and `answer_schema`")]
    NotAnObject,
    #[error("ask_user has no argument `{0}`; it takes question, choices and answer_schema")]
    UnknownField(String),
    #[error("`question` is required and must be a non-empty string")]
    MissingQuestion,
    #[error("`{field}` is {len} characters, over the limit of {limit}")]
    TooLong {
        field: String,
        len: usize,
        limit: usize,
    },
    #[error("`choices` must be 1 to {MAX_CHOICES} distinct non-empty strings: {0}")]
    BadChoices(String),
    #[error("`answer_schema` is not a usable JSON Schema: {0}")]
    InvalidSchema(String),
}

/// The person's answer does not fit the question.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AnswerError {
    #[error("the answer is {len} bytes of JSON, over the limit of {limit}")]
    TooLarge { len: usize, limit: usize },
    #[error("the answer must be one of the offered choices: {}", .choices.join(", "))]
    NotAChoice { choices: Vec<String> },
    #[error("the answer must be a non-empty text")]
    NotText,
    #[error("the answer does not match the requested format: {}", .errors.join("; "))]
    SchemaMismatch { errors: Vec<String> },
}

impl AskUserRequest {
    /// Validate the model's arguments. An `answer_schema` must compile
    /// (no remote references: the validator fetches nothing).
    pub fn from_arguments(arguments: &Value) -> Result<AskUserRequest, AskUserError> {
        let Some(obj) = arguments.as_object() else {
            return Err(AskUserError::NotAnObject);
        };
        if let Some(extra) = obj
            .keys()
            .find(|k| !matches!(k.as_str(), "question" | "choices" | "answer_schema"))
        {
            return Err(AskUserError::UnknownField(extra.clone()));
        }
        let question = match obj.get("question") {
            Some(Value::String(q)) if !q.trim().is_empty() => q.clone(),
            _ => return Err(AskUserError::MissingQuestion),
        };
        let len = question.chars().count();
        if len > MAX_QUESTION_CHARS {
            return Err(AskUserError::TooLong {
                field: "question".into(),
                len,
                limit: MAX_QUESTION_CHARS,
            });
        }
        let choices = match obj.get("choices") {
            None | Some(Value::Null) => None,
            Some(Value::Array(items)) => {
                if items.is_empty() || items.len() > MAX_CHOICES {
                    return Err(AskUserError::BadChoices(format!("{} given", items.len())));
                }
                let mut seen = BTreeSet::new();
                let mut out = Vec::with_capacity(items.len());
                for (i, item) in items.iter().enumerate() {
                    let Some(choice) = item.as_str().filter(|c| !c.trim().is_empty()) else {
                        return Err(AskUserError::BadChoices(format!(
                            "choice {i} is not a non-empty string"
                        )));
                    };
                    let len = choice.chars().count();
                    if len > MAX_CHOICE_CHARS {
                        return Err(AskUserError::TooLong {
                            field: format!("choices[{i}]"),
                            len,
                            limit: MAX_CHOICE_CHARS,
                        });
                    }
                    if !seen.insert(choice) {
                        return Err(AskUserError::BadChoices(format!(
                            "{choice:?} is offered twice"
                        )));
                    }
                    out.push(choice.to_owned());
                }
                Some(out)
            }
            Some(_) => return Err(AskUserError::BadChoices("not an array".into())),
        };
        let answer_schema = match obj.get("answer_schema") {
            None | Some(Value::Null) => None,
            Some(schema @ Value::Object(_)) => {
                let len = serde_json::to_string(schema)
                    .map(|s| s.len())
                    .unwrap_or(usize::MAX);
                if len > MAX_SCHEMA_BYTES {
                    return Err(AskUserError::TooLong {
                        field: "answer_schema".into(),
                        len,
                        limit: MAX_SCHEMA_BYTES,
                    });
                }
                jsonschema::validator_for(schema)
                    .map_err(|e| AskUserError::InvalidSchema(e.to_string()))?;
                Some(schema.clone())
            }
            Some(_) => {
                return Err(AskUserError::InvalidSchema(
                    "it must be a JSON object".into(),
                ));
            }
        };
        Ok(AskUserRequest {
            question,
            choices,
            answer_schema,
        })
    }

    /// Check the person's answer: against the schema when there is one,
    /// else against the choices, else as non-empty text.
    pub fn validate_answer(&self, answer: &Value) -> Result<(), AnswerError> {
        let len = serde_json::to_string(answer)
            .map(|s| s.len())
            .unwrap_or(usize::MAX);
        if len > MAX_ANSWER_BYTES {
            return Err(AnswerError::TooLarge {
                len,
                limit: MAX_ANSWER_BYTES,
            });
        }
        if let Some(schema) = &self.answer_schema {
            let validator =
                jsonschema::validator_for(schema).map_err(|e| AnswerError::SchemaMismatch {
                    errors: vec![format!("the schema no longer compiles: {e}")],
                })?;
            let errors: Vec<String> = validator
                .iter_errors(answer)
                .take(10)
                .map(|e| {
                    let at = e.instance_path().to_string();
                    if at.is_empty() {
                        e.to_string()
                    } else {
                        format!("at {at}: {e}")
                    }
                })
                .collect();
            return if errors.is_empty() {
                Ok(())
            } else {
                Err(AnswerError::SchemaMismatch { errors })
            };
        }
        if let Some(choices) = &self.choices {
            return match answer.as_str() {
                Some(a) if choices.iter().any(|c| c == a) => Ok(()),
                _ => Err(AnswerError::NotAChoice {
                    choices: choices.clone(),
                }),
            };
        }
        match answer.as_str() {
            Some(a) if !a.trim().is_empty() => Ok(()),
            _ => Err(AnswerError::NotText),
        }
    }

    /// The person's typed text as the answer. With an answer schema the
    /// text counts as JSON when it parses and satisfies the schema, else as
    /// a JSON string (so `4` answers `{"type": "integer"}` and `blue`
    /// answers `{"type": "string"}`); without one it is the text itself,
    /// checked against the choices. Text over [`MAX_ANSWER_BYTES`] is
    /// refused before it is parsed.
    pub fn answer_from_text(&self, text: &str) -> Result<Value, AnswerError> {
        if text.len() > MAX_ANSWER_BYTES {
            return Err(AnswerError::TooLarge {
                len: text.len(),
                limit: MAX_ANSWER_BYTES,
            });
        }
        let as_text = Value::String(text.to_owned());
        if self.answer_schema.is_some()
            && let Ok(parsed) = serde_json::from_str::<Value>(text)
        {
            return match self.validate_answer(&parsed) {
                Ok(()) => Ok(parsed),
                Err(as_json) => self
                    .validate_answer(&as_text)
                    .map(|()| as_text)
                    .map_err(|_| as_json),
            };
        }
        self.validate_answer(&as_text).map(|()| as_text)
    }

    /// The tool result for a valid answer: the person's words, `user` trust.
    pub fn answer_result(&self, answer: &Value) -> Result<ToolResult, AnswerError> {
        self.validate_answer(answer)?;
        Ok(super::success(
            TOOL_NAME,
            "user",
            Trust::User,
            json!({ "answer": answer }),
        ))
    }
}
