//! The browser API's TypeScript declarations, generated from the Rust types
//! the page receives and sends (issue 33 part 5), so that a field renamed or
//! removed on the Rust side cannot drift from what an embedder compiles
//! against.
//!
//! Each crate that owns a serialized type derives [`ts_rs::TS`] behind its
//! `ts` feature (off in every ordinary build); the derive reads the same
//! serde attributes that shape the JSON (`rename_all`, `tag`, `default` with
//! `skip_serializing_if` for a field that may be absent). The few types
//! whose serialization is written by hand implement `TS` by hand beside
//! their `Serialize` (`agent_capabilities::Origin`, [`PendingView`]).
//!
//! [`declarations`] starts from the types the API names and follows every
//! type they contain, so a new field's type is declared without being
//! listed. `examples/ts_types.rs` writes the text to
//! `host-browser/src/api/generated.d.ts` (committed; the wasm bundle's
//! `.d.ts` includes it) or, with `--check`, fails when the committed file
//! differs from what the Rust types give. The browser host's own types (its
//! configuration, events and error codes) are written by hand in
//! `host-browser/src/api/types.d.ts` and refer to these by name.
//!
//! ```
//! let text = agent_assembly::typescript::declarations();
//! assert!(text.contains("export type AgentRun = {"));
//! // Rust's u64 counters and timestamps are JSON numbers for the page.
//! assert!(text.contains("created_at_ms: number"));
//! // An `Option` serde leaves out when `None` is absent, never `null`.
//! assert!(text.contains("output?: string,"));
//! ```

use std::any::TypeId;
use std::collections::{BTreeMap, HashSet};

use ts_rs::{Config, TS, TypeVisitor};

use crate::view::PendingView;

/// The first line of the generated file.
pub const HEADER: &str = "// Generated from the Rust types by `cargo run -p agent-assembly --features ts \
     --example ts_types -- host-browser/src/api/generated.d.ts`: do not edit.";

/// Every declaration the browser API needs, sorted by name, each with its
/// doc comment, as one TypeScript module text starting with [`HEADER`].
pub fn declarations() -> String {
    // serde_json writes u64 as a JSON number: every counter, size and
    // timestamp here is far below 2^53.
    let cfg = Config::new().with_large_int("number");
    let mut found = Found {
        cfg: &cfg,
        seen: HashSet::new(),
        decls: BTreeMap::new(),
    };
    roots(&mut found);
    let mut out = String::from(HEADER);
    out.push_str("\n\n");
    for decl in found.decls.values() {
        out.push_str(&open_multiline_blocks(&absent_not_null(decl)));
        out.push_str("\n\n");
    }
    out.truncate(out.trim_end().len());
    out.push('\n');
    out
}

/// Compare the committed file's text with [`declarations`]: `Err` names the
/// first line where they differ, with both versions and how to write the
/// file again.
pub fn check(path: &str, committed: &str) -> Result<(), String> {
    let generated = declarations();
    if committed == generated {
        return Ok(());
    }
    let line = committed
        .lines()
        .zip(generated.lines())
        .position(|(a, b)| a != b)
        .unwrap_or(committed.lines().count().min(generated.lines().count()));
    Err(format!(
        "{path} differs from the Rust types (first at line {}):\n  committed: {}\n  generated: {}\n\
         write it again: cargo run -p agent-assembly --features ts --example ts_types -- {path}",
        line + 1,
        committed.lines().nth(line).unwrap_or("(end of file)"),
        generated.lines().nth(line).unwrap_or("(end of file)"),
    ))
}

/// The types the API hands to the page or takes from it; what they contain
/// is found by following them.
fn roots(v: &mut impl TypeVisitor) {
    v.visit::<crate::RunView>();
    v.visit::<PendingView>();
    v.visit::<agent_supervisor::Choice>();
    v.visit::<agent_kernel::budget::BudgetPreset>();
    v.visit::<agent_kernel::protocol::ToolProgress>();
    v.visit::<agent_kernel::reasoning::ReasoningEffort>();
    v.visit::<agent_capabilities::ApprovalMode>();
    v.visit::<agent_capabilities::Sensitivity>();
    v.visit::<crate::SessionSummary>();
    v.visit::<agent_workspace::FileEntry>();
    v.visit::<agent_workspace::Artifact>();
    v.visit::<agent_workspace::CopyReport>();
    v.visit::<agent_workspace::DeleteReport>();
    v.visit::<agent_memory::MemoryRecord>();
    v.visit::<agent_research::view::ResearchView>();
    v.visit::<agent_profiles::Revision>();
    v.visit::<agent_profiles::RunUse>();
    v.visit::<agent_profiles::FieldChange>();
    v.visit::<agent_profiles::ProfileSummary>();
    v.visit::<agent_profiles::Refused>();
}

/// `name?: T | null` becomes `name?: T`. ts-rs writes the former for an
/// `Option` field with `#[serde(default, skip_serializing_if = ...)]`, but
/// serde then leaves `None` out instead of writing `null`, so the page never
/// sees `null` there (and `tsc` with `exactOptionalPropertyTypes` should
/// refuse a `null`, as it does for a value generated from a real run).
/// Fields without `?` keep their `| null`: serde writes it.
fn absent_not_null(decl: &str) -> String {
    const NULL: &str = " | null";
    let mut out = String::with_capacity(decl.len());
    let mut rest = decl;
    while let Some(at) = rest.find("?: ") {
        let (head, tail) = rest.split_at(at + 3);
        out.push_str(head);
        // The field's type ends at the first `,` or `}` outside brackets.
        let mut depth = 0usize;
        let end = tail
            .char_indices()
            .find(|&(_, c)| {
                match c {
                    '{' | '[' | '(' | '<' => depth += 1,
                    '}' | ']' | ')' | '>' if depth > 0 => depth -= 1,
                    ',' | '}' if depth == 0 => return true,
                    _ => {}
                }
                false
            })
            .map_or(tail.len(), |(i, _)| i);
        let ty = &tail[..end];
        // An inline object type may hold optional fields of its own.
        out.push_str(&absent_not_null(ty.strip_suffix(NULL).unwrap_or(ty)));
        rest = &tail[end..];
    }
    out.push_str(rest);
    out
}

/// An object type that spans lines (a field with a doc comment) gets its
/// `{` at the end of a line and its `}` at the start of one. wasm-bindgen
/// re-indents the `.d.ts` by those two marks; ts-rs writes `{ a: T,` and
/// `b: U, };`, which left every later declaration indented one step more.
/// One-line object types stay as they are. Braces inside string and
/// template literal types and inside comments are not blocks.
fn open_multiline_blocks(decl: &str) -> String {
    let mut out = String::with_capacity(decl.len() + 16);
    let mut opened: Vec<usize> = Vec::new();
    let mut quote: Option<char> = None;
    let mut comment = false;
    let mut chars = decl.chars().peekable();
    while let Some(c) = chars.next() {
        out.push(c);
        if comment {
            comment = !(c == '*' && chars.peek() == Some(&'/'));
            if !comment {
                out.push(chars.next().unwrap_or('/'));
            }
            continue;
        }
        match (quote, c) {
            (Some(q), _) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '"' | '`') => quote = Some(c),
            (None, '/') if chars.peek() == Some(&'*') => comment = true,
            (None, '{') => opened.push(out.len() - 1),
            (None, '}') => {
                let Some(start) = opened.pop() else { continue };
                let close = out.len() - 1;
                let inner = &out[start + 1..close];
                if inner.contains('\n') {
                    let block = format!("{{\n{}\n}}", inner.trim());
                    out.replace_range(start.., &block);
                }
            }
            _ => {}
        }
    }
    out.lines()
        .map(str::trim_end)
        .collect::<Vec<_>>()
        .join("\n")
}

/// The declarations reached so far, by TypeScript name.
struct Found<'a> {
    cfg: &'a Config,
    seen: HashSet<TypeId>,
    decls: BTreeMap<String, String>,
}

impl TypeVisitor for Found<'_> {
    fn visit<T: TS + 'static + ?Sized>(&mut self) {
        if !self.seen.insert(TypeId::of::<T>()) {
            return;
        }
        // A type with a file of its own is a declaration; the others
        // (String, Vec, Option, maps) only lead to their parameters' types.
        if T::output_path().is_some() {
            let name = T::ident(self.cfg);
            let docs = T::docs().unwrap_or_default();
            let decl = format!("{docs}export {}", T::decl(self.cfg));
            // serde_json's `Value` declares itself through a stand-in type
            // with the same text; two different texts are two Rust types
            // under one name, which the page could not tell apart.
            if let Some(other) = self.decls.insert(name.clone(), decl.clone())
                && other != decl
            {
                panic!("two Rust types are both `{name}` in TypeScript:\n{other}\n{decl}");
            }
        }
        T::visit_dependencies(self);
        T::visit_generics(self);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_optional_field_loses_its_null_and_a_required_one_keeps_it() {
        let decl = "type T = { a?: string | null, b: string | null, c?: { x: number | null, y?: Array<string> | null, } | null, d?: Array<number>, };";
        assert_eq!(
            absent_not_null(decl),
            "type T = { a?: string, b: string | null, c?: { x: number | null, y?: Array<string>, }, d?: Array<number>, };"
        );
    }

    #[test]
    fn a_block_over_lines_opens_and_closes_on_lines_of_its_own() {
        let decl = "type T = { a: string, \n/**\n * B {not a block}.\n */\nb: { c: `x${string}`, d: \"}\" }, } | { e: number, };";
        assert_eq!(
            open_multiline_blocks(decl),
            "type T = {\na: string,\n/**\n * B {not a block}.\n */\nb: { c: `x${string}`, d: \"}\" },\n} | { e: number, };"
        );
    }

    #[test]
    fn a_field_renamed_on_either_side_is_drift() {
        let text = declarations();
        assert_eq!(check("x.d.ts", &text), Ok(()));
        let renamed = text.replacen("next_activity: number", "next_activty: number", 1);
        assert_ne!(renamed, text);
        let err = check("x.d.ts", &renamed).unwrap_err();
        assert!(err.contains("next_activty"), "{err}");
        assert!(err.contains("next_activity"), "{err}");
        assert!(check("x.d.ts", "").is_err());
    }

    #[test]
    fn every_declaration_is_exported_once_and_no_optional_field_is_null() {
        let text = declarations();
        assert!(text.starts_with(HEADER));
        for name in [
            "RunView",
            "AgentRun",
            "PendingRequest",
            "PendingKind",
            "ToolOrigin",
            "FileEntry",
        ] {
            let decl = format!("export type {name} = ");
            assert_eq!(text.matches(&decl).count(), 1, "{name}");
        }
        assert!(!text.contains("?: BlobRef | null"));
        // serde writes these `None`s as null: no `skip_serializing_if`.
        assert!(text.contains("text: BlobRef | null"));
        assert!(text.contains("provider: string | null"));
    }
}
