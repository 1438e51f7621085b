//! The workspace path policy (SPEC S7.1): [`WorkspacePath::parse`] is the one
//! gate every workspace path passes, both in the workspace itself and in
//! capability scopes ([`crate::scope`] parses workspace targets and prefixes
//! with it, so a scope and the workspace always agree on what a path is). It
//! normalises to Unicode NFC and refuses, with a named reason, anything
//! absolute, traversing, non-portable or too long.
//!
//! It lives here, below both its users, because capabilities are the lowest
//! crate: `agent-workspace` re-exports it unchanged.
//!
//! The workspace lives in the host's storage, never on its file system, yet
//! names are held to the portable subset (no Windows reserved names, no
//! `< > : " | ? *`, no trailing dot or space) so that an export can be written
//! to any disk unchanged.

use std::fmt;

use serde::{Deserialize, Serialize};
use unicode_normalization::UnicodeNormalization;

/// Longest accepted workspace path, in UTF-8 bytes after NFC normalisation.
/// 1024 is below every common file-system and URL limit, so an exported
/// workspace can be written to disk as is.
pub const MAX_PATH_BYTES: usize = 1024;

/// Longest accepted path segment (one file or folder name), in UTF-8 bytes
/// after NFC normalisation: the name limit of ext4, APFS and NTFS-in-bytes.
pub const MAX_SEGMENT_BYTES: usize = 255;

/// Most segments in one path (`a/b/c` has 3). Deeper trees are refused.
pub const MAX_DEPTH: usize = 16;

/// Why a path was refused. Each variant is one rule of S7.1.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum PathErrorKind {
    /// The path is empty.
    Empty,
    /// The path starts with `/` or `\` (rooted, not relative to the session).
    Absolute,
    /// The path starts with `//` or `\\` (a UNC or network path).
    Unc,
    /// The path starts with a drive letter such as `C:`.
    DriveLetter { drive: char },
    /// The path contains a backslash (use `/` between folders).
    Backslash,
    /// A `..` segment (traversal out of its folder).
    Traversal,
    /// A `.` segment.
    DotSegment,
    /// An empty segment: `a//b`, or a trailing `/`.
    EmptySegment,
    /// A control character (NUL, U+0001–U+001F, U+007F–U+009F).
    ControlCharacter { code_point: u32 },
    /// An invisible or direction-changing character (zero-width, bidi
    /// override, line separator, BOM) that makes a name look like another.
    InvisibleCharacter { code_point: u32 },
    /// One of `< > : " | ? *`.
    ForbiddenCharacter { character: char },
    /// A Windows reserved device name (CON, PRN, AUX, NUL, COM1–9, LPT1–9,
    /// CONIN$, CONOUT$), with or without an extension.
    ReservedName { segment: String },
    /// A segment ends with a dot or a space.
    TrailingDotOrSpace { segment: String },
    /// The whole path is longer than [`MAX_PATH_BYTES`] after NFC.
    PathTooLong { bytes: usize, limit: usize },
    /// One segment is longer than [`MAX_SEGMENT_BYTES`] after NFC.
    SegmentTooLong { bytes: usize, limit: usize },
    /// More than [`MAX_DEPTH`] segments.
    TooDeep { depth: usize, limit: usize },
}

impl PathErrorKind {
    /// A stable snake_case code for tool error envelopes and tests.
    pub fn code(&self) -> &'static str {
        match self {
            PathErrorKind::Empty => "empty",
            PathErrorKind::Absolute => "absolute",
            PathErrorKind::Unc => "unc",
            PathErrorKind::DriveLetter { .. } => "drive_letter",
            PathErrorKind::Backslash => "backslash",
            PathErrorKind::Traversal => "traversal",
            PathErrorKind::DotSegment => "dot_segment",
            PathErrorKind::EmptySegment => "empty_segment",
            PathErrorKind::ControlCharacter { .. } => "control_character",
            PathErrorKind::InvisibleCharacter { .. } => "invisible_character",
            PathErrorKind::ForbiddenCharacter { .. } => "forbidden_character",
            PathErrorKind::ReservedName { .. } => "reserved_name",
            PathErrorKind::TrailingDotOrSpace { .. } => "trailing_dot_or_space",
            PathErrorKind::PathTooLong { .. } => "path_too_long",
            PathErrorKind::SegmentTooLong { .. } => "segment_too_long",
            PathErrorKind::TooDeep { .. } => "too_deep",
        }
    }
}

impl fmt::Display for PathErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PathErrorKind::Empty => f.write_str("it is empty; name a file such as notes/todo.md"),
            PathErrorKind::Absolute => f.write_str(
                "it is absolute; workspace paths are relative to the session root (drop the leading slash)",
            ),
            PathErrorKind::Unc => {
                f.write_str("it is a network (UNC) path; use a path relative to the session root")
            }
            PathErrorKind::DriveLetter { drive } => write!(
                f,
                "it starts with the drive letter {drive}:; use a path relative to the session root"
            ),
            PathErrorKind::Backslash => f.write_str("it contains a backslash; separate folders with /"),
            PathErrorKind::Traversal => {
                f.write_str("it contains a .. segment; paths cannot leave their folder")
            }
            PathErrorKind::DotSegment => f.write_str("it contains a . segment; remove it"),
            PathErrorKind::EmptySegment => {
                f.write_str("it contains an empty segment (// or a trailing /); remove it")
            }
            PathErrorKind::ControlCharacter { code_point } => {
                write!(f, "it contains the control character U+{code_point:04X}; remove it")
            }
            PathErrorKind::InvisibleCharacter { code_point } => write!(
                f,
                "it contains the invisible or direction-changing character U+{code_point:04X}; remove it"
            ),
            PathErrorKind::ForbiddenCharacter { character } => write!(
                f,
                "it contains {character:?}, one of < > : \" | ? * that cannot be stored portably; replace it"
            ),
            PathErrorKind::ReservedName { segment } => write!(
                f,
                "{segment:?} is a reserved device name on Windows; choose another name"
            ),
            PathErrorKind::TrailingDotOrSpace { segment } => write!(
                f,
                "the name {segment:?} ends with a dot or a space; remove it"
            ),
            PathErrorKind::PathTooLong { bytes, limit } => write!(
                f,
                "it is {bytes} bytes long, over the limit of {limit}; use shorter names"
            ),
            PathErrorKind::SegmentTooLong { bytes, limit } => write!(
                f,
                "one name is {bytes} bytes long, over the limit of {limit}; use a shorter name"
            ),
            PathErrorKind::TooDeep { depth, limit } => write!(
                f,
                "it is {depth} folders deep, over the limit of {limit}; use a flatter layout"
            ),
        }
    }
}

/// A path was refused by [`WorkspacePath::parse`]: which input and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathError {
    input: String,
    kind: PathErrorKind,
}

impl PathError {
    fn new(input: &str, kind: PathErrorKind) -> PathError {
        // Keep at most 80 characters of the input for the message.
        let input: String = input.chars().take(80).collect();
        PathError { input, kind }
    }
    /// Why the path was refused.
    pub fn kind(&self) -> &PathErrorKind {
        &self.kind
    }
    /// The refused input (its first 80 characters).
    pub fn input(&self) -> &str {
        &self.input
    }
}

impl fmt::Display for PathError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "workspace path {:?} refused: {}", self.input, self.kind)
    }
}

impl std::error::Error for PathError {}

/// A validated workspace path: relative, NFC-normalised, portable, within
/// [`MAX_PATH_BYTES`], [`MAX_SEGMENT_BYTES`] and [`MAX_DEPTH`]. Segments are separated by `/`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(try_from = "String", into = "String")]
pub struct WorkspacePath(String);

impl TryFrom<String> for WorkspacePath {
    type Error = PathError;
    fn try_from(value: String) -> Result<Self, PathError> {
        WorkspacePath::parse(&value)
    }
}

impl From<WorkspacePath> for String {
    fn from(p: WorkspacePath) -> String {
        p.0
    }
}

impl fmt::Display for WorkspacePath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl AsRef<str> for WorkspacePath {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

/// Characters that cannot appear in a portable name.
const FORBIDDEN: [char; 7] = ['<', '>', ':', '"', '|', '?', '*'];

fn is_control(c: char) -> bool {
    c.is_control()
}

/// Zero-width and direction-changing characters, separators and the BOM:
/// they let two different names look the same.
fn is_invisible(c: char) -> bool {
    matches!(
        c,
        '\u{00AD}'
            | '\u{061C}'
            | '\u{180E}'
            | '\u{200B}'..='\u{200F}'
            | '\u{2028}'..='\u{202E}'
            | '\u{2060}'..='\u{2064}'
            | '\u{2066}'..='\u{206F}'
            | '\u{FEFF}'
            | '\u{FFF9}'..='\u{FFFB}'
    )
}

/// Windows device names, reserved whatever the extension and the case.
fn is_reserved(segment: &str) -> bool {
    let stem = segment.split('.').next().unwrap_or(segment);
    let upper = stem.to_uppercase();
    if matches!(
        upper.as_str(),
        "CON" | "PRN" | "AUX" | "NUL" | "CONIN$" | "CONOUT$"
    ) {
        return true;
    }
    for prefix in ["COM", "LPT"] {
        if let Some(rest) = upper.strip_prefix(prefix) {
            // COM1–COM9, LPT1–LPT9, and the superscript digits Windows also reserves.
            let mut chars = rest.chars();
            if let (Some(d), None) = (chars.next(), chars.next())
                && matches!(d, '1'..='9' | '\u{00B9}' | '\u{00B2}' | '\u{00B3}')
            {
                return true;
            }
        }
    }
    false
}

fn check_segment(input: &str, segment: &str) -> Result<(), PathError> {
    match segment {
        "" => return Err(PathError::new(input, PathErrorKind::EmptySegment)),
        "." => return Err(PathError::new(input, PathErrorKind::DotSegment)),
        ".." => return Err(PathError::new(input, PathErrorKind::Traversal)),
        _ => {}
    }
    if let Some(character) = segment.chars().find(|c| FORBIDDEN.contains(c)) {
        return Err(PathError::new(
            input,
            PathErrorKind::ForbiddenCharacter { character },
        ));
    }
    if segment.ends_with('.') || segment.ends_with(' ') {
        return Err(PathError::new(
            input,
            PathErrorKind::TrailingDotOrSpace {
                segment: segment.to_owned(),
            },
        ));
    }
    if is_reserved(segment) {
        return Err(PathError::new(
            input,
            PathErrorKind::ReservedName {
                segment: segment.to_owned(),
            },
        ));
    }
    if segment.len() > MAX_SEGMENT_BYTES {
        return Err(PathError::new(
            input,
            PathErrorKind::SegmentTooLong {
                bytes: segment.len(),
                limit: MAX_SEGMENT_BYTES,
            },
        ));
    }
    Ok(())
}

impl WorkspacePath {
    /// Validate and normalise a model- or user-supplied path (S7.1).
    ///
    /// The input is normalised to NFC first, so that `e` + U+0301 and `é`
    /// name one file; every rule is then checked on the normalised form,
    /// which is what is stored. Refusals, in the order they are checked:
    /// empty; UNC (`//`, `\\`); absolute (`/`, `\`); drive letter (`C:`);
    /// control characters; invisible characters; backslashes; then per
    /// segment: empty, `.`, `..`, `< > : " | ? *`, a trailing dot or space,
    /// Windows reserved names, segment length; then path length and depth.
    pub fn parse(input: &str) -> Result<WorkspacePath, PathError> {
        if input.is_empty() {
            return Err(PathError::new(input, PathErrorKind::Empty));
        }
        // NFC changes a length by a small factor at most; refuse absurd
        // inputs before doing any work on them.
        if input.len() > MAX_PATH_BYTES * 4 {
            return Err(PathError::new(
                input,
                PathErrorKind::PathTooLong {
                    bytes: input.len(),
                    limit: MAX_PATH_BYTES,
                },
            ));
        }
        let normal: String = input.nfc().collect();
        let s = normal.as_str();
        if s.starts_with("//") || s.starts_with("\\\\") {
            return Err(PathError::new(input, PathErrorKind::Unc));
        }
        if s.starts_with('/') || s.starts_with('\\') {
            return Err(PathError::new(input, PathErrorKind::Absolute));
        }
        let mut chars = s.chars();
        if let (Some(drive), Some(':')) = (chars.next(), chars.next())
            && drive.is_ascii_alphabetic()
        {
            return Err(PathError::new(input, PathErrorKind::DriveLetter { drive }));
        }
        if let Some(c) = s.chars().find(|c| is_control(*c)) {
            return Err(PathError::new(
                input,
                PathErrorKind::ControlCharacter {
                    code_point: u32::from(c),
                },
            ));
        }
        if let Some(c) = s.chars().find(|c| is_invisible(*c)) {
            return Err(PathError::new(
                input,
                PathErrorKind::InvisibleCharacter {
                    code_point: u32::from(c),
                },
            ));
        }
        if s.contains('\\') {
            return Err(PathError::new(input, PathErrorKind::Backslash));
        }
        let mut depth = 0usize;
        for segment in s.split('/') {
            check_segment(input, segment)?;
            depth += 1;
        }
        if s.len() > MAX_PATH_BYTES {
            return Err(PathError::new(
                input,
                PathErrorKind::PathTooLong {
                    bytes: s.len(),
                    limit: MAX_PATH_BYTES,
                },
            ));
        }
        if depth > MAX_DEPTH {
            return Err(PathError::new(
                input,
                PathErrorKind::TooDeep {
                    depth,
                    limit: MAX_DEPTH,
                },
            ));
        }
        Ok(WorkspacePath(normal))
    }

    /// Parse a folder argument: `""` is the session root and gives `None`;
    /// one trailing `/` is allowed (`notes/`); anything else follows
    /// [`WorkspacePath::parse`] (so `"/"` is refused as absolute).
    pub fn parse_folder(input: &str) -> Result<Option<WorkspacePath>, PathError> {
        if input.is_empty() {
            return Ok(None);
        }
        let trimmed = input.strip_suffix('/').unwrap_or(input);
        if trimmed.is_empty() {
            return Err(PathError::new(input, PathErrorKind::Absolute));
        }
        WorkspacePath::parse(trimmed).map(Some)
    }

    /// The normalised path.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The segments, outermost first.
    pub fn segments(&self) -> impl Iterator<Item = &str> {
        self.0.split('/')
    }

    /// How many segments the path has.
    pub fn depth(&self) -> usize {
        self.segments().count()
    }

    /// The last segment (the file or folder name).
    pub fn name(&self) -> &str {
        self.0.rsplit('/').next().unwrap_or(&self.0)
    }

    /// The containing folder, `None` at the session root.
    pub fn parent(&self) -> Option<WorkspacePath> {
        self.0
            .rsplit_once('/')
            .map(|(parent, _)| WorkspacePath(parent.to_owned()))
    }

    /// True when `self` is `folder` or below it, segment-wise.
    pub fn is_within(&self, folder: &WorkspacePath) -> bool {
        self.0 == folder.0
            || (self.0.starts_with(&folder.0)
                && self.0.as_bytes().get(folder.0.len()) == Some(&b'/'))
    }

    /// The key under which names that differ only by case collide: the
    /// lowercase of the NFC form (full Unicode lowercase mapping).
    pub fn fold_key(&self) -> String {
        self.0.to_lowercase()
    }

    /// True when `self` and `other` differ, but some leading segments of
    /// both differ only by case: two names in one folder that differ only by
    /// case, which the workspace treats as a conflict.
    pub fn case_conflicts_with(&self, other: &WorkspacePath) -> bool {
        for (a, b) in self.segments().zip(other.segments()) {
            if a == b {
                continue;
            }
            return a.to_lowercase() == b.to_lowercase();
        }
        false
    }

    /// `self` with its leading `from` folder replaced by `to` (used when a
    /// folder is moved). `None` when `self` is not within `from` or the
    /// result breaks a limit.
    pub fn rebase(&self, from: &WorkspacePath, to: &WorkspacePath) -> Option<WorkspacePath> {
        if !self.is_within(from) {
            return None;
        }
        let rest = &self.0[from.0.len()..];
        WorkspacePath::parse(&format!("{}{}", to.0, rest)).ok()
    }

    /// Join a relative child path below this folder.
    pub fn join(&self, child: &str) -> Result<WorkspacePath, PathError> {
        WorkspacePath::parse(&format!("{}/{}", self.0, child))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn s7_1_nfd_and_nfc_are_one_path() {
        let nfc = WorkspacePath::parse("caf\u{e9}.md").unwrap();
        let nfd = WorkspacePath::parse("cafe\u{301}.md").unwrap();
        assert_eq!(nfc, nfd);
        assert_eq!(nfc.as_str(), "caf\u{e9}.md");
    }

    #[test]
    fn s7_1_case_conflict_is_per_segment() {
        let a = WorkspacePath::parse("Notes/a.md").unwrap();
        let b = WorkspacePath::parse("notes/b.md").unwrap();
        let c = WorkspacePath::parse("notes/A.md").unwrap();
        let d = WorkspacePath::parse("other/a.md").unwrap();
        assert!(a.case_conflicts_with(&b));
        assert!(b.case_conflicts_with(&a));
        assert!(!b.case_conflicts_with(&c));
        assert!(
            WorkspacePath::parse("notes/a.md")
                .unwrap()
                .case_conflicts_with(&c)
        );
        assert!(!a.case_conflicts_with(&d));
        assert!(!a.case_conflicts_with(&a));
    }

    #[test]
    fn parent_name_within_rebase() {
        let p = WorkspacePath::parse("a/b/c.txt").unwrap();
        assert_eq!(p.name(), "c.txt");
        assert_eq!(p.parent().unwrap().as_str(), "a/b");
        assert_eq!(WorkspacePath::parse("x").unwrap().parent(), None);
        let a = WorkspacePath::parse("a").unwrap();
        let ab = WorkspacePath::parse("ab").unwrap();
        assert!(p.is_within(&a));
        assert!(!p.is_within(&ab));
        let z = WorkspacePath::parse("z/y").unwrap();
        assert_eq!(p.rebase(&a, &z).unwrap().as_str(), "z/y/b/c.txt");
        assert_eq!(p.rebase(&ab, &z), None);
    }

    #[test]
    fn parse_folder_root_and_trailing_slash() {
        assert_eq!(WorkspacePath::parse_folder("").unwrap(), None);
        assert_eq!(
            WorkspacePath::parse_folder("notes/")
                .unwrap()
                .unwrap()
                .as_str(),
            "notes"
        );
        assert_eq!(
            WorkspacePath::parse_folder("/").unwrap_err().kind(),
            &PathErrorKind::Absolute
        );
        assert!(WorkspacePath::parse_folder("notes//").is_err());
    }

    #[test]
    fn serde_round_trip_validates() {
        let p: WorkspacePath = serde_json::from_str("\"a/b\"").unwrap();
        assert_eq!(p.as_str(), "a/b");
        assert!(serde_json::from_str::<WorkspacePath>("\"../x\"").is_err());
    }
}
