//! The book in `docs/` (mdBook): the steps of the lint group that build it
//! and check it, and the internal-link checker (`cargo xtask check-links`).
//!
//! mdbook does not fail on a link to a missing page or anchor, so the
//! checker walks every Markdown file under `docs/src` (with its
//! `{{#include}}`s expanded, as mdbook renders them) and checks that every
//! relative link names a file of the book and every `#anchor` a heading or
//! an `id` of its target. Links in code blocks and code spans are text, not
//! links; links with a scheme (`https:`) are outside the book and are not
//! fetched. Heading ids follow mdbook's rule: the heading's text,
//! lowercased, spaces to `-`, every character but alphanumerics, `-` and
//! `_` dropped, a repeated id numbered `-1`, `-2`, ….

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Component, Path, PathBuf};

use crate::runner::Step;

/// The book's folder, from the repository root.
pub(crate) const BOOK_DIR: &str = "docs";
/// The mdbook release the lint group installs and builds with.
pub(crate) const MDBOOK_VERSION: &str = "0.5.4";

/// The lint group's steps for the book and the API docs: build the book,
/// check its internal links, and build every crate's docs with warnings as
/// errors.
pub(crate) fn book_steps() -> Vec<Step> {
    vec![
        Step::new("book: mdbook build", "mdbook", &["build", BOOK_DIR]),
        Step::cargo("book: internal links", &["xtask", "check-links"]),
        Step::cargo(
            "cargo doc (warnings are errors)",
            &["doc", "--no-deps", "--workspace"],
        )
        .env("RUSTDOCFLAGS", "-D warnings"),
    ]
}

/// One broken link: the file it is in, the target as written, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BrokenLink {
    pub(crate) file: PathBuf,
    pub(crate) target: String,
    pub(crate) reason: String,
}

impl std::fmt::Display for BrokenLink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: ({}) {}",
            self.file.display(),
            self.target,
            self.reason
        )
    }
}

/// Check every internal link of the book whose sources are in `src`; the
/// broken ones, or an error if the book cannot be read.
pub(crate) fn check_links(src: &Path) -> Result<Vec<BrokenLink>, String> {
    let mut files = Vec::new();
    markdown_files(src, &mut files)?;
    if files.is_empty() {
        return Err(format!("no Markdown file under {}", src.display()));
    }
    let mut pages: BTreeMap<PathBuf, String> = BTreeMap::new();
    for file in &files {
        let text =
            fs::read_to_string(file).map_err(|e| format!("cannot read {}: {e}", file.display()))?;
        let expanded = expand_includes(&text, file.parent().unwrap_or(src))?;
        pages.insert(normalise(file), expanded);
    }
    let anchors: BTreeMap<&PathBuf, BTreeSet<String>> = pages
        .iter()
        .map(|(path, text)| (path, anchors_of(text)))
        .collect();
    let mut broken = Vec::new();
    for (path, text) in &pages {
        let dir = path.parent().unwrap_or(src);
        for target in links_of(text) {
            if has_scheme(&target) {
                continue;
            }
            let (file_part, anchor) = match target.split_once('#') {
                Some((f, a)) => (f, Some(a)),
                None => (target.as_str(), None),
            };
            let target_path = if file_part.is_empty() {
                path.clone()
            } else {
                normalise(&dir.join(file_part))
            };
            let fail = |reason: String| BrokenLink {
                file: path.clone(),
                target: target.clone(),
                reason,
            };
            if !target_path.starts_with(normalise(src)) {
                broken.push(fail("points outside the book".into()));
                continue;
            }
            if !target_path.exists() {
                broken.push(fail(format!("{} does not exist", target_path.display())));
                continue;
            }
            let Some(anchor) = anchor else { continue };
            match anchors.get(&target_path) {
                Some(ids) if ids.contains(anchor) => {}
                Some(_) => broken.push(fail(format!(
                    "no heading or id `{anchor}` in {}",
                    target_path.display()
                ))),
                None => broken.push(fail(format!(
                    "`#{anchor}` names an anchor in a file that is not a page"
                ))),
            }
        }
    }
    Ok(broken)
}

/// The relative links of the README at `readme` that name no file (the
/// README links into the book; a moved chapter must not leave it dangling).
pub(crate) fn check_readme_links(readme: &Path) -> Result<Vec<BrokenLink>, String> {
    let text =
        fs::read_to_string(readme).map_err(|e| format!("cannot read {}: {e}", readme.display()))?;
    let dir = readme.parent().unwrap_or(Path::new("."));
    Ok(links_of(&text)
        .into_iter()
        .filter(|t| !has_scheme(t) && !t.starts_with('#'))
        .filter_map(|target| {
            let file = target.split('#').next().unwrap_or_default();
            let path = normalise(&dir.join(file));
            (!path.exists()).then(|| BrokenLink {
                file: readme.to_path_buf(),
                reason: format!("{} does not exist", path.display()),
                target,
            })
        })
        .collect())
}

fn markdown_files(dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), String> {
    let entries = fs::read_dir(dir).map_err(|e| format!("cannot list {}: {e}", dir.display()))?;
    let mut paths: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    paths.sort();
    for path in paths {
        if path.is_dir() {
            markdown_files(&path, out)?;
        } else if path.extension().is_some_and(|e| e == "md") {
            out.push(path);
        }
    }
    Ok(())
}

/// `path` with `.` and `..` resolved lexically.
fn normalise(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

fn has_scheme(target: &str) -> bool {
    match target.split_once(':') {
        Some((scheme, _)) => {
            !scheme.is_empty()
                && scheme
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
        }
        None => false,
    }
}

/// `text` with each `{{#include PATH[:FROM[:TO]]}}` replaced by the lines
/// of PATH (relative to `dir`) that mdbook would include.
fn expand_includes(text: &str, dir: &Path) -> Result<String, String> {
    const OPEN: &str = "{{#include ";
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find(OPEN) {
        out.push_str(&rest[..start]);
        let after = &rest[start + OPEN.len()..];
        let end = after
            .find("}}")
            .ok_or_else(|| format!("an unclosed {{{{#include in {}", dir.display()))?;
        let spec = after[..end].trim();
        let mut parts = spec.splitn(3, ':');
        let file = parts.next().unwrap_or_default();
        let from: Option<usize> = parts.next().and_then(|n| n.parse().ok());
        let to: Option<usize> = parts.next().and_then(|n| n.parse().ok());
        let path = dir.join(file);
        let included = fs::read_to_string(&path).map_err(|e| {
            format!(
                "{{{{#include {spec}}}}}: cannot read {}: {e}",
                path.display()
            )
        })?;
        let lines: Vec<&str> = included.lines().collect();
        let first = from.map_or(0, |n| n.saturating_sub(1));
        let last = to.unwrap_or(lines.len()).min(lines.len());
        if first < last {
            out.push_str(&lines[first..last].join("\n"));
        }
        rest = &after[end + 2..];
    }
    out.push_str(rest);
    Ok(out)
}

/// `text` with fenced code blocks blanked (their lines kept, so that nothing
/// inside them reads as a heading or a link).
fn without_code_blocks(text: &str) -> Vec<&str> {
    let mut fence: Option<&str> = None;
    text.lines()
        .map(|line| {
            let trimmed = line.trim_start();
            match fence {
                Some(open) => {
                    if trimmed.starts_with(open) {
                        fence = None;
                    }
                    ""
                }
                None if trimmed.starts_with("```") || trimmed.starts_with("~~~") => {
                    fence = Some(&trimmed[..3]);
                    ""
                }
                None => line,
            }
        })
        .collect()
}

/// `line` with its code spans removed (a run of backticks up to the next
/// run of the same length).
fn without_code_spans(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut rest = line;
    while let Some(start) = rest.find('`') {
        out.push_str(&rest[..start]);
        let run = rest[start..].chars().take_while(|&c| c == '`').count();
        let ticks = &rest[start..start + run];
        let after = &rest[start + run..];
        match after.find(ticks) {
            Some(end) => {
                // Keep the span's text (headings use it), drop what could
                // read as a link.
                out.push_str(&after[..end].replace(['[', ']', '(', ')'], " "));
                rest = &after[end + run..];
            }
            None => {
                out.push_str(ticks);
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// The ids of a page: its headings' (mdbook's rule) and every `id="…"`.
fn anchors_of(text: &str) -> BTreeSet<String> {
    let mut ids = BTreeSet::new();
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for line in without_code_blocks(text) {
        let line = without_code_spans(line);
        let hashes = line.chars().take_while(|&c| c == '#').count();
        if (1..=6).contains(&hashes) && line[hashes..].starts_with(' ') {
            let id = heading_id(&heading_text(&line[hashes..]));
            let n = counts.entry(id.clone()).or_insert(0);
            ids.insert(if *n == 0 {
                id.clone()
            } else {
                format!("{id}-{n}")
            });
            *n += 1;
        }
        let mut rest = line.as_str();
        while let Some(at) = rest.find("id=\"") {
            let value = &rest[at + 4..];
            if let Some(end) = value.find('"') {
                ids.insert(value[..end].to_string());
                rest = &value[end..];
            } else {
                break;
            }
        }
    }
    ids
}

/// The visible text of a heading: links reduced to their text, emphasis and
/// HTML tags dropped.
fn heading_text(raw: &str) -> String {
    let mut text = String::new();
    let mut chars = raw.trim().chars().peekable();
    let mut in_tag = false;
    while let Some(c) = chars.next() {
        match c {
            '<' => in_tag = true,
            '>' if in_tag => in_tag = false,
            _ if in_tag => {}
            ']' if chars.peek() == Some(&'(') => {
                for d in chars.by_ref() {
                    if d == ')' {
                        break;
                    }
                }
            }
            '[' | ']' | '*' => {}
            other => text.push(other),
        }
    }
    text
}

/// mdbook's id of a heading text.
fn heading_id(text: &str) -> String {
    text.trim()
        .chars()
        .filter_map(|c| {
            if c.is_alphanumeric() || c == '_' || c == '-' {
                Some(c.to_ascii_lowercase())
            } else if c.is_whitespace() {
                Some('-')
            } else {
                None
            }
        })
        .flat_map(char::to_lowercase)
        .collect()
}

/// The targets of the page's inline links (`[text](target "title")`) and
/// `href="…"` attributes, outside code.
fn links_of(text: &str) -> Vec<String> {
    let prose: Vec<String> = without_code_blocks(text)
        .into_iter()
        .map(without_code_spans)
        .collect();
    let prose = prose.join("\n");
    let mut targets = Vec::new();
    let mut rest = prose.as_str();
    while let Some(at) = rest.find("](") {
        let after = &rest[at + 2..];
        let end = after.find(')').unwrap_or(after.len());
        let inside = after[..end].trim();
        let target = inside
            .split_whitespace()
            .next()
            .unwrap_or_default()
            .trim_matches(|c| c == '<' || c == '>');
        if !target.is_empty() {
            targets.push(target.to_string());
        }
        rest = &after[end..];
    }
    let mut rest = prose.as_str();
    while let Some(at) = rest.find("href=\"") {
        let value = &rest[at + 6..];
        let end = value.find('"').unwrap_or(value.len());
        targets.push(value[..end].to_string());
        rest = &value[end..];
    }
    targets
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A book in a fresh temporary folder: `files` are (path, text) pairs.
    fn book(name: &str, files: &[(&str, &str)]) -> PathBuf {
        let root = std::env::temp_dir().join(format!("xtask-book-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&root);
        for (path, text) in files {
            let path = root.join(path);
            fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
            fs::write(path, text).expect("write");
        }
        root
    }

    fn broken(root: &Path) -> Vec<String> {
        let found = check_links(&root.join("src")).expect("readable book");
        fs::remove_dir_all(root).expect("clean up");
        found.into_iter().map(|b| b.target).collect()
    }

    #[test]
    fn good_links_pass() {
        let root = book(
            "good",
            &[
                (
                    "src/SUMMARY.md",
                    "- [Intro](intro.md)\n- [Guide](guide/run.md)\n",
                ),
                (
                    "src/intro.md",
                    "# Intro\n\nSee [running](guide/run.md#the-agentrt-cli-s14), \
                     [the top](#intro), [an id](guide/run.md#policy) and \
                     [a site](https://example.org/x.md).\n",
                ),
                (
                    "src/guide/run.md",
                    "# Run\n\n## The `agentrt` CLI (S14)\n\n<a id=\"policy\"></a>\n\
                     Back to [the intro](../intro.md).\n",
                ),
            ],
        );
        assert_eq!(broken(&root), Vec::<String>::new());
    }

    #[test]
    fn a_link_to_a_missing_page_fails() {
        let root = book(
            "missing-page",
            &[(
                "src/a.md",
                "# A\n\n[gone](b.md) and [also](../outside.md)\n",
            )],
        );
        assert_eq!(broken(&root), ["b.md", "../outside.md"]);
    }

    #[test]
    fn a_link_to_a_missing_anchor_fails() {
        let root = book(
            "missing-anchor",
            &[
                (
                    "src/a.md",
                    "# A\n\n[there](b.md#nowhere) [here](#nor-here)\n",
                ),
                ("src/b.md", "# B\n"),
            ],
        );
        assert_eq!(broken(&root), ["b.md#nowhere", "#nor-here"]);
    }

    #[test]
    fn links_in_code_are_text_and_included_files_count() {
        let root = book(
            "code",
            &[
                (
                    "src/a.md",
                    "# A\n\n`[not](a link)` and\n\n```md\n[neither](x.md)\n## Not a heading\n```\n\n\
                     {{#include ../extra.md:2:}}\n\n[spans\nlines](#included-heading)\n",
                ),
                (
                    "extra.md",
                    "# skipped line\n## Included heading\n[inner](missing.md)\n",
                ),
            ],
        );
        assert_eq!(broken(&root), ["missing.md"]);
    }

    #[test]
    fn a_readme_link_to_a_moved_chapter_fails() {
        let root = book(
            "readme",
            &[
                (
                    "README.md",
                    "[run](docs/src/run.md) [gone](docs/src/old.md#x) [web](https://e.org)\n",
                ),
                ("docs/src/run.md", "# Run\n"),
            ],
        );
        let found = check_readme_links(&root.join("README.md")).expect("readable");
        fs::remove_dir_all(&root).expect("clean up");
        let targets: Vec<String> = found.into_iter().map(|b| b.target).collect();
        assert_eq!(targets, ["docs/src/old.md#x"]);
    }

    #[test]
    fn heading_ids_follow_mdbook() {
        assert_eq!(
            heading_id(&heading_text("Native host and the agentrt CLI")),
            "native-host-and-the-agentrt-cli"
        );
        assert_eq!(heading_id("Profiles (S10)"), "profiles-s10");
        assert_eq!(
            heading_id(&heading_text("[Linked](x.md) *text*")),
            "linked-text"
        );
        let ids = anchors_of("# Same\n## Same\n### Same\n");
        assert!(
            ["same", "same-1", "same-2"]
                .iter()
                .all(|i| ids.contains(*i))
        );
    }

    #[test]
    fn the_lint_group_builds_the_book_checks_links_and_documents_the_api() {
        let steps = book_steps();
        assert_eq!(steps[0].program, "mdbook");
        assert_eq!(steps[1].args, ["xtask", "check-links"]);
        assert_eq!(steps[2].args[0], "doc");
        assert!(
            steps[2]
                .envs
                .iter()
                .any(|(k, v)| k == "RUSTDOCFLAGS" && v == "-D warnings")
        );
    }
}
