//! S7.1: the path policy as tables of refused and accepted inputs.

use std::collections::BTreeSet;

use agent_workspace::limits::{MAX_DEPTH, MAX_PATH_BYTES, MAX_SEGMENT_BYTES};
use agent_workspace::{PathErrorKind, WorkspacePath};

/// Every refusal reason `parse` knows, by code.
const ALL_CODES: [&str; 16] = [
    "empty",
    "absolute",
    "unc",
    "drive_letter",
    "backslash",
    "traversal",
    "dot_segment",
    "empty_segment",
    "control_character",
    "invisible_character",
    "forbidden_character",
    "reserved_name",
    "trailing_dot_or_space",
    "path_too_long",
    "segment_too_long",
    "too_deep",
];

fn refused() -> Vec<(String, &'static str)> {
    let mut t: Vec<(String, &'static str)> = [
        ("", "empty"),
        // absolute
        ("/x", "absolute"),
        ("/", "absolute"),
        ("/etc/passwd", "absolute"),
        ("\\x", "absolute"),
        ("\\Windows\\system32", "absolute"),
        // UNC and network
        ("//host/share", "unc"),
        ("//", "unc"),
        ("\\\\host\\share", "unc"),
        ("\\\\?\\C:\\x", "unc"),
        ("\\\\.\\pipe\\x", "unc"),
        // drive letters
        ("C:", "drive_letter"),
        ("C:\\x", "drive_letter"),
        ("c:/x", "drive_letter"),
        ("Z:file", "drive_letter"),
        // backslashes
        ("a\\b", "backslash"),
        ("notes\\..\\x", "backslash"),
        ("a/b\\", "backslash"),
        // traversal
        ("..", "traversal"),
        ("../x", "traversal"),
        ("a/../b", "traversal"),
        ("a/..", "traversal"),
        ("../../../../etc/passwd", "traversal"),
        // NFC never turns a lookalike into a dot, but a decomposable one is still a dot.
        // dot segments
        (".", "dot_segment"),
        ("./x", "dot_segment"),
        ("a/./b", "dot_segment"),
        ("a/.", "dot_segment"),
        // empty segments
        ("a//b", "empty_segment"),
        ("a/", "empty_segment"),
        ("a/b/", "empty_segment"),
        // control characters
        ("a\0b", "control_character"),
        ("\0", "control_character"),
        ("a\nb", "control_character"),
        ("a\rb", "control_character"),
        ("tab\there", "control_character"),
        ("bell\u{7}", "control_character"),
        ("del\u{7f}", "control_character"),
        ("c1\u{85}", "control_character"),
        ("esc\u{1b}[31m", "control_character"),
        // invisible and direction-changing characters
        ("a\u{200b}b", "invisible_character"),
        ("evil\u{202e}txt.exe", "invisible_character"),
        ("\u{feff}bom.txt", "invisible_character"),
        ("line\u{2028}sep", "invisible_character"),
        ("soft\u{ad}hyphen", "invisible_character"),
        ("iso\u{2066}late", "invisible_character"),
        // forbidden characters
        ("a<b", "forbidden_character"),
        ("a>b", "forbidden_character"),
        ("ab:c", "forbidden_character"),
        ("a\"b", "forbidden_character"),
        ("a|b", "forbidden_character"),
        ("what?", "forbidden_character"),
        ("*.txt", "forbidden_character"),
        ("notes/stream.txt:ads", "forbidden_character"),
        // Windows reserved names
        ("CON", "reserved_name"),
        ("con.txt", "reserved_name"),
        ("PRN", "reserved_name"),
        ("aux.tar.gz", "reserved_name"),
        ("nul", "reserved_name"),
        ("a/NUL.md", "reserved_name"),
        ("COM1", "reserved_name"),
        ("com9.log", "reserved_name"),
        ("LPT1", "reserved_name"),
        ("lpt9.txt", "reserved_name"),
        ("COM\u{b9}", "reserved_name"),
        ("CONIN$", "reserved_name"),
        // trailing dot or space
        ("file.", "trailing_dot_or_space"),
        ("file ", "trailing_dot_or_space"),
        ("dir./x", "trailing_dot_or_space"),
        ("...", "trailing_dot_or_space"),
        (" ", "trailing_dot_or_space"),
        ("a/b /c", "trailing_dot_or_space"),
    ]
    .into_iter()
    .map(|(s, c)| (s.to_owned(), c))
    .collect();
    // lengths and depth
    t.push(("a".repeat(MAX_SEGMENT_BYTES + 1), "segment_too_long"));
    t.push((format!("x/{}", "é".repeat(128)), "segment_too_long"));
    let long = vec!["a".repeat(200); 6].join("/");
    t.push((long, "path_too_long"));
    t.push(("a".repeat(MAX_PATH_BYTES * 4 + 1), "path_too_long"));
    t.push((["d"; MAX_DEPTH + 1].join("/"), "too_deep"));
    t.push((["d"; 100].join("/"), "too_deep"));
    t
}

pub fn s7_1_refused_table_names_each_reason() {
    let table = refused();
    assert!(table.len() >= 60, "only {} refused inputs", table.len());
    let mut seen = BTreeSet::new();
    for (input, code) in &table {
        match WorkspacePath::parse(input) {
            Ok(p) => panic!("{input:?} was accepted as {p:?}; expected {code}"),
            Err(e) => {
                assert_eq!(e.kind().code(), *code, "{input:?}: {e}");
                // Every message names the input and the reason.
                let msg = e.to_string();
                assert!(msg.starts_with("workspace path"), "{msg}");
                seen.insert(e.kind().code());
            }
        }
    }
    let all: BTreeSet<&str> = ALL_CODES.into_iter().collect();
    assert_eq!(seen, all, "every refusal reason is covered");
}

pub fn s7_1_accepted_table_normalises_to_nfc() {
    // (input, stored form)
    let table: Vec<(&str, &str)> = vec![
        ("a", "a"),
        ("notes/todo.md", "notes/todo.md"),
        ("a/b/c/d.txt", "a/b/c/d.txt"),
        (".hidden", ".hidden"),
        (".results/r/c.json", ".results/r/c.json"),
        ("a..b", "a..b"),
        ("..a", "..a"),
        ("with space.txt", "with space.txt"),
        (" leading", " leading"),
        ("UPPER/lower", "UPPER/lower"),
        ("CONSOLE.txt", "CONSOLE.txt"),
        ("COM10", "COM10"),
        ("LPT0", "LPT0"),
        ("null", "null"),
        ("über/straße.md", "über/straße.md"),
        ("日本語/ファイル.txt", "日本語/ファイル.txt"),
        ("Ελληνικά", "Ελληνικά"),
        ("emoji-😀.md", "emoji-😀.md"),
        ("%2e%2e/x", "%2e%2e/x"),
        ("a~b#c&d", "a~b#c&d"),
        // NFC/NFD pairs: decomposed input is stored composed.
        ("cafe\u{301}.md", "caf\u{e9}.md"),
        ("caf\u{e9}.md", "caf\u{e9}.md"),
        ("A\u{30a}ngstro\u{308}m", "\u{c5}ngstr\u{f6}m"),
        ("\u{1100}\u{1161}\u{11a8}", "\u{ac01}"),
        // A fullwidth full stop is not a dot: it is a name, not traversal.
        ("\u{ff0e}\u{ff0e}", "\u{ff0e}\u{ff0e}"),
    ];
    assert!(table.len() >= 20);
    for (input, stored) in &table {
        let parsed = WorkspacePath::parse(input).unwrap_or_else(|e| panic!("{input:?}: {e}"));
        assert_eq!(parsed.as_str(), *stored, "{input:?}");
        // Parsing the stored form gives the same path.
        assert_eq!(WorkspacePath::parse(parsed.as_str()).unwrap(), parsed);
    }
    assert_eq!(
        WorkspacePath::parse("cafe\u{301}.md").unwrap(),
        WorkspacePath::parse("caf\u{e9}.md").unwrap()
    );
}

pub fn s7_1_limits_at_below_and_above() {
    let ok = |s: &str| WorkspacePath::parse(s).unwrap_or_else(|e| panic!("{e}"));
    let code = |s: &str| WorkspacePath::parse(s).unwrap_err().kind().code();
    // Segment length, in bytes after NFC.
    ok(&"a".repeat(MAX_SEGMENT_BYTES - 1));
    ok(&"a".repeat(MAX_SEGMENT_BYTES));
    assert_eq!(code(&"a".repeat(MAX_SEGMENT_BYTES + 1)), "segment_too_long");
    // 127 decomposed é are 381 bytes as typed, 254 after NFC: accepted.
    ok(&"e\u{301}".repeat(127));
    assert_eq!(code(&"é".repeat(128)), "segment_too_long");
    // Path length.
    let path_of = |n: usize| {
        let mut s = vec!["a".repeat(250); n / 251].join("/");
        let rest = n - s.len();
        if rest > 0 {
            s.push('/');
            s.push_str(&"b".repeat(rest - 1));
        }
        assert_eq!(s.len(), n);
        s
    };
    ok(&path_of(MAX_PATH_BYTES - 1));
    ok(&path_of(MAX_PATH_BYTES));
    assert_eq!(code(&path_of(MAX_PATH_BYTES + 1)), "path_too_long");
    // Depth.
    ok(&["d"; MAX_DEPTH - 1].join("/"));
    assert_eq!(ok(&["d"; MAX_DEPTH].join("/")).depth(), MAX_DEPTH);
    assert_eq!(code(&["d"; MAX_DEPTH + 1].join("/")), "too_deep");
    let e = WorkspacePath::parse(&["d"; MAX_DEPTH + 1].join("/")).unwrap_err();
    assert_eq!(
        e.kind(),
        &PathErrorKind::TooDeep {
            depth: MAX_DEPTH + 1,
            limit: MAX_DEPTH
        }
    );
}
