//! The tokenizer of the pre-scan: finds start and end tags, comments and
//! the end of raw text the way the HTML tokenizer does, over bytes, without
//! building anything (quoted attribute values, tags cut off by the end of
//! input, bogus comments).

/// The tokens the scan reacts to.
pub(super) enum Token<'a> {
    Start { name: &'a [u8], self_closing: bool },
    End { name: &'a [u8] },
}

fn is_space(b: u8) -> bool {
    matches!(b, b'\t' | b'\n' | b'\x0c' | b'\r' | b' ')
}

/// The end of the tag whose name ends at `i` (the index just past `>`) and
/// whether it was self-closing, or `None` when the input ends inside it.
pub(super) fn tag_end(b: &[u8], mut i: usize) -> Option<(usize, bool, usize)> {
    #[derive(Clone, Copy)]
    enum S {
        BeforeName,
        Name,
        AfterName,
        BeforeValue,
        Double,
        Single,
        Unquoted,
        AfterQuoted,
        SelfClosing,
    }
    let mut s = S::BeforeName;
    // Attribute names begun (the tokenizer's "attribute name" state is
    // entered once per attribute).
    let mut attributes = 0usize;
    // The state right after the tag name behaves like "before attribute
    // name" except that `/` goes to self-closing; both do here.
    while i < b.len() {
        let c = b[i];
        match s {
            S::BeforeName => match c {
                c if is_space(c) => {}
                b'/' => s = S::SelfClosing,
                b'>' => return Some((i + 1, false, attributes)),
                _ => {
                    attributes += 1;
                    s = S::Name;
                }
            },
            S::Name => match c {
                c if is_space(c) => s = S::AfterName,
                b'/' => s = S::SelfClosing,
                b'>' => return Some((i + 1, false, attributes)),
                b'=' => s = S::BeforeValue,
                _ => {}
            },
            S::AfterName => match c {
                c if is_space(c) => {}
                b'/' => s = S::SelfClosing,
                b'=' => s = S::BeforeValue,
                b'>' => return Some((i + 1, false, attributes)),
                _ => {
                    attributes += 1;
                    s = S::Name;
                }
            },
            S::BeforeValue => match c {
                c if is_space(c) => {}
                b'"' => s = S::Double,
                b'\'' => s = S::Single,
                b'>' => return Some((i + 1, false, attributes)),
                _ => s = S::Unquoted,
            },
            S::Double => {
                if c == b'"' {
                    s = S::AfterQuoted;
                }
            }
            S::Single => {
                if c == b'\'' {
                    s = S::AfterQuoted;
                }
            }
            S::Unquoted => match c {
                c if is_space(c) => s = S::BeforeName,
                b'>' => return Some((i + 1, false, attributes)),
                _ => {}
            },
            S::AfterQuoted => match c {
                c if is_space(c) => s = S::BeforeName,
                b'/' => s = S::SelfClosing,
                b'>' => return Some((i + 1, false, attributes)),
                _ => {
                    s = S::BeforeName;
                    continue; // reconsume
                }
            },
            S::SelfClosing => match c {
                b'>' => return Some((i + 1, true, attributes)),
                _ => {
                    s = S::BeforeName;
                    continue; // reconsume
                }
            },
        }
        i += 1;
    }
    None
}

/// The index just past the first `needle` at or after `from` (ASCII
/// case-insensitive), or the input's end.
pub(super) fn skip_past(b: &[u8], from: usize, needle: &[u8]) -> usize {
    let mut i = from;
    while i + needle.len() <= b.len() {
        if b[i..i + needle.len()].eq_ignore_ascii_case(needle) {
            return i + needle.len();
        }
        i += 1;
    }
    b.len()
}

/// Where a comment that starts at `from` (just past `<!--`) ends.
pub(super) fn comment_end(b: &[u8], from: usize) -> usize {
    // `<!-->` and `<!--->` end at once.
    if b[from..].starts_with(b">") {
        return from + 1;
    }
    if b[from..].starts_with(b"->") {
        return from + 2;
    }
    let mut i = from;
    while i < b.len() {
        if b[i..].starts_with(b"-->") {
            return i + 3;
        }
        if b[i..].starts_with(b"--!>") {
            return i + 4;
        }
        i += 1;
    }
    b.len()
}

/// Where raw text of element `name` that starts at `from` ends: at the
/// first `</name` followed by a space, `/` or `>` (the end tag itself is
/// then scanned as a token), or at the input's end.
pub(super) fn raw_text_end(b: &[u8], from: usize, name: &[u8]) -> usize {
    let mut i = from;
    while i + 2 + name.len() <= b.len() {
        if b[i] == b'<'
            && b[i + 1] == b'/'
            && b[i + 2..i + 2 + name.len()].eq_ignore_ascii_case(name)
        {
            let after = b.get(i + 2 + name.len()).copied();
            if after.is_none_or(|c| is_space(c) || c == b'/' || c == b'>') {
                return i;
            }
        }
        i += 1;
    }
    b.len()
}

/// A tag name as the tokenizer keeps it: ASCII letters lowercased, other
/// bytes as they are (a name that is not UTF-8 matches no rule).
pub(super) fn lowercase_name(name: &[u8], into: &mut String) {
    into.clear();
    match std::str::from_utf8(name) {
        Ok(name) => into.extend(name.chars().map(|c| c.to_ascii_lowercase())),
        Err(_) => into.push_str(&String::from_utf8_lossy(name)),
    }
}

/// The tag name starting at `from`: up to a space, `/` or `>`.
pub(super) fn tag_name(b: &[u8], from: usize) -> usize {
    let mut i = from;
    while i < b.len() && !is_space(b[i]) && b[i] != b'/' && b[i] != b'>' {
        i += 1;
    }
    i
}
