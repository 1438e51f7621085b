//! Built-in tools: `run_javascript`, `extract_document`, Skills, `ask_user`, `update_plan`.

pub mod document;
mod invoke;
pub mod javascript;
