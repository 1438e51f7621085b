//! The workspace path gate (`WorkspacePath`, S7.1; owned by
//! `agent_capabilities::path`, re-exported by `agent-workspace`).
//!
//! Property: a path the gate accepts is already normalised (NFC, parsing it
//! again gives itself), relative, has no empty, `.` or `..` segment and no
//! backslash, and joined below a root directory it stays under that root,
//! component by component. Joining a child below an accepted folder and
//! rebasing keep the result within the new folder.
//!
//! Input: a folder and a child separated by the first NUL byte (a path
//! never holds NUL); without a NUL the whole input is one path.

use std::path::{Component, Path};

use agent_workspace::WorkspacePath;
use unicode_normalization::UnicodeNormalization;

const ROOT: &str = "/srv/workspace/session";

/// Assert everything an accepted path promises.
fn accepted(input: &str, path: &WorkspacePath) {
    let s = path.as_str();
    assert!(!s.is_empty(), "{input:?} accepted as empty");
    assert!(
        !s.starts_with('/') && !s.contains('\\'),
        "{input:?} accepted as {s:?}"
    );
    assert_eq!(
        s.nfc().collect::<String>(),
        s,
        "{input:?} not stored in NFC"
    );
    assert!(
        !s.contains('\0') && !s.chars().any(char::is_control),
        "{input:?} kept a control character"
    );
    for segment in s.split('/') {
        assert!(
            !matches!(segment, "" | "." | ".."),
            "{input:?} accepted with segment {segment:?}"
        );
        assert!(
            !segment.contains(':'),
            "{input:?}: a drive or stream in {segment:?}"
        );
    }
    assert_eq!(
        WorkspacePath::parse(s).as_ref(),
        Ok(path),
        "{input:?}: the stored form is not a fixed point"
    );
    // Below a real root, every component is a plain name and the result
    // stays under the root.
    let root = Path::new(ROOT);
    let joined = root.join(s);
    assert!(
        joined.starts_with(root),
        "{input:?} left the root: {joined:?}"
    );
    let below: Vec<Component<'_>> = joined
        .strip_prefix(root)
        .map(|p| p.components().collect())
        .unwrap_or_default();
    assert_eq!(
        below.len(),
        path.depth(),
        "{input:?}: components differ from segments"
    );
    for c in below {
        assert!(
            matches!(c, Component::Normal(_)),
            "{input:?} reaches {c:?} below the root"
        );
    }
}

pub fn check(data: &[u8]) {
    let Some(text) = super::text(data) else {
        return;
    };
    let (first, child) = match text.split_once('\0') {
        Some((a, b)) => (a, Some(b)),
        None => (text, None),
    };
    let path = WorkspacePath::parse(first);
    if let Ok(path) = &path {
        accepted(first, path);
        if let Some(parent) = path.parent() {
            assert!(path.is_within(&parent), "{first:?} not within its parent");
            accepted(first, &parent);
        }
    }
    if let Ok(Some(folder)) = WorkspacePath::parse_folder(first) {
        accepted(first, &folder);
        if let Some(child) = child
            && let Ok(joined) = folder.join(child)
        {
            accepted(child, &joined);
            assert!(
                joined.is_within(&folder),
                "{child:?} joined below {folder} left it: {joined}"
            );
            if let Ok(to) = WorkspacePath::parse("moved")
                && let Some(rebased) = joined.rebase(&folder, &to)
            {
                accepted(child, &rebased);
                assert!(rebased.is_within(&to), "{rebased} not within {to}");
            }
        }
    }
}
