//! `update_plan`: the run's plan as a list of steps with statuses. The
//! supervisor keeps the latest plan on the run record (a blob, read back by
//! `Runtime::plan`); this module owns the definition, the `Plan` type it
//! stores, and the validation of the arguments.

use std::collections::BTreeSet;

use agent_capabilities::{Idempotency, Origin, Sensitivity};
use agent_kernel::protocol::{TargetRule, ToolDefinition};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// The tool's name as registered.
pub const TOOL_NAME: &str = "update_plan";

/// Most steps in a plan.
pub const MAX_STEPS: usize = 50;
/// Longest step title, in characters.
pub const MAX_STEP_CHARS: usize = 300;
/// Longest explanation, in characters.
pub const MAX_EXPLANATION_CHARS: usize = 1_000;

/// Where a step stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "snake_case")]
pub enum StepStatus {
    Pending,
    InProgress,
    Completed,
    Cancelled,
}

impl StepStatus {
    pub const ALL: [StepStatus; 4] = [
        StepStatus::Pending,
        StepStatus::InProgress,
        StepStatus::Completed,
        StepStatus::Cancelled,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            StepStatus::Pending => "pending",
            StepStatus::InProgress => "in_progress",
            StepStatus::Completed => "completed",
            StepStatus::Cancelled => "cancelled",
        }
    }
}

/// One step.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct PlanStep {
    pub title: String,
    pub status: StepStatus,
}

/// The plan as the run record keeps it; each `update_plan` replaces it whole.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct Plan {
    pub steps: Vec<PlanStep>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub explanation: Option<String>,
}

/// The arguments of `update_plan` were not acceptable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    #[error("update_plan takes an object with `steps` and an optional `explanation`")]
    NotAnObject,
    #[error("update_plan has no argument `{0}`; it takes steps and explanation")]
    UnknownField(String),
    #[error("`steps` must be an array of 1 to {MAX_STEPS} steps; {0}")]
    BadSteps(String),
    #[error("`{field}` is invalid: {reason}")]
    BadStep { field: String, reason: String },
    #[error("`{field}` is {len} characters, over the limit of {limit}")]
    TooLong {
        field: String,
        len: usize,
        limit: usize,
    },
    #[error("at most one step may be in_progress; steps {0:?} are")]
    SeveralInProgress(Vec<usize>),
    #[error("the step {0:?} appears twice; give each step a distinct title")]
    DuplicateStep(String),
}

/// The `update_plan` tool definition: no effect outside the run.
pub fn definition() -> ToolDefinition {
    let statuses: Vec<&str> = StepStatus::ALL.iter().map(|s| s.as_str()).collect();
    ToolDefinition {
        name: TOOL_NAME.to_owned(),
        description: "Record the plan for this task as a list of steps with statuses \
                      (pending, in_progress, completed, cancelled). Send the whole plan each \
                      time; at most one step is in_progress."
            .to_owned(),
        parameters: json!({
            "type": "object",
            "properties": {
                "steps": {
                    "type": "array",
                    "minItems": 1,
                    "maxItems": MAX_STEPS,
                    "items": {
                        "type": "object",
                        "properties": {
                            "title": { "type": "string", "minLength": 1, "maxLength": MAX_STEP_CHARS },
                            "status": { "type": "string", "enum": statuses },
                        },
                        "required": ["title", "status"],
                        "additionalProperties": false,
                    }
                },
                "explanation": { "type": "string", "maxLength": MAX_EXPLANATION_CHARS }
            },
            "required": ["steps"],
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

impl Plan {
    /// Validate the model's arguments into a plan.
    pub fn from_arguments(arguments: &Value) -> Result<Plan, PlanError> {
        let Some(obj) = arguments.as_object() else {
            return Err(PlanError::NotAnObject);
        };
        if let Some(extra) = obj
            .keys()
            .find(|k| !matches!(k.as_str(), "steps" | "explanation"))
        {
            return Err(PlanError::UnknownField(extra.clone()));
        }
        let explanation = match obj.get("explanation") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => {
                let len = s.chars().count();
                if len > MAX_EXPLANATION_CHARS {
                    return Err(PlanError::TooLong {
                        field: "explanation".into(),
                        len,
                        limit: MAX_EXPLANATION_CHARS,
                    });
                }
                Some(s.clone())
            }
            Some(_) => {
                return Err(PlanError::BadStep {
                    field: "explanation".into(),
                    reason: "must be a string".into(),
                });
            }
        };
        let items = match obj.get("steps") {
            Some(Value::Array(items)) => items,
            Some(_) => return Err(PlanError::BadSteps("it is not an array".into())),
            None => return Err(PlanError::BadSteps("it is missing".into())),
        };
        if items.is_empty() || items.len() > MAX_STEPS {
            return Err(PlanError::BadSteps(format!("{} given", items.len())));
        }
        let mut steps = Vec::with_capacity(items.len());
        let mut titles = BTreeSet::new();
        for (i, item) in items.iter().enumerate() {
            let field = format!("steps[{i}]");
            let Some(step) = item.as_object() else {
                return Err(PlanError::BadStep {
                    field,
                    reason: "must be an object with title and status".into(),
                });
            };
            if let Some(extra) = step
                .keys()
                .find(|k| !matches!(k.as_str(), "title" | "status"))
            {
                return Err(PlanError::BadStep {
                    field,
                    reason: format!("has no field `{extra}`"),
                });
            }
            let title = match step.get("title") {
                Some(Value::String(t)) if !t.trim().is_empty() => t.trim().to_owned(),
                _ => {
                    return Err(PlanError::BadStep {
                        field: format!("{field}.title"),
                        reason: "must be a non-empty string".into(),
                    });
                }
            };
            let len = title.chars().count();
            if len > MAX_STEP_CHARS {
                return Err(PlanError::TooLong {
                    field: format!("{field}.title"),
                    len,
                    limit: MAX_STEP_CHARS,
                });
            }
            let status = step
                .get("status")
                .cloned()
                .and_then(|s| serde_json::from_value::<StepStatus>(s).ok())
                .ok_or_else(|| PlanError::BadStep {
                    field: format!("{field}.status"),
                    reason: "must be pending, in_progress, completed or cancelled".into(),
                })?;
            if !titles.insert(title.clone()) {
                return Err(PlanError::DuplicateStep(title));
            }
            steps.push(PlanStep { title, status });
        }
        let in_progress: Vec<usize> = steps
            .iter()
            .enumerate()
            .filter(|(_, s)| s.status == StepStatus::InProgress)
            .map(|(i, _)| i)
            .collect();
        if in_progress.len() > 1 {
            return Err(PlanError::SeveralInProgress(in_progress));
        }
        Ok(Plan { steps, explanation })
    }

    /// How many steps have each status, for the run card: (completed, total).
    pub fn progress(&self) -> (usize, usize) {
        let done = self
            .steps
            .iter()
            .filter(|s| s.status == StepStatus::Completed)
            .count();
        (done, self.steps.len())
    }

    /// The step being worked on, if any.
    pub fn current(&self) -> Option<&PlanStep> {
        self.steps
            .iter()
            .find(|s| s.status == StepStatus::InProgress)
    }
}
