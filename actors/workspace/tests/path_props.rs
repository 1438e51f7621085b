//! S7.1 property tests (native): `WorkspacePath::parse` never panics and
//! never accepts a traversal, an absolute form or a control character.
//! Inputs are built from an enum of hostile tokens (the cap-std fuzzing
//! style) as well as arbitrary strings.

#![cfg(not(target_arch = "wasm32"))]

use proptest::prelude::*;
use unicode_normalization::UnicodeNormalization;

use agent_workspace::WorkspacePath;
use agent_workspace::limits::{MAX_DEPTH, MAX_PATH_BYTES, MAX_SEGMENT_BYTES};

#[derive(Debug, Clone)]
enum Token {
    Slash,
    Backslash,
    Dot,
    DotDot,
    Nul,
    Control(u8),
    C1Control,
    Colon,
    DriveLetter,
    Name(String),
    NonAscii,
    CombiningAcute,
    Invisible(char),
    Reserved(&'static str),
    Space,
    Forbidden(char),
    FullwidthDot,
    PercentDot,
    LongName(usize),
}

impl Token {
    fn text(&self) -> String {
        match self {
            Token::Slash => "/".into(),
            Token::Backslash => "\\".into(),
            Token::Dot => ".".into(),
            Token::DotDot => "..".into(),
            Token::Nul => "\0".into(),
            Token::Control(b) => char::from(*b).to_string(),
            Token::C1Control => "\u{85}".into(),
            Token::Colon => ":".into(),
            Token::DriveLetter => "C:".into(),
            Token::Name(s) => s.clone(),
            Token::NonAscii => "é日本".into(),
            Token::CombiningAcute => "\u{301}".into(),
            Token::Invisible(c) => c.to_string(),
            Token::Reserved(s) => (*s).into(),
            Token::Space => " ".into(),
            Token::Forbidden(c) => c.to_string(),
            Token::FullwidthDot => "\u{ff0e}".into(),
            Token::PercentDot => "%2e".into(),
            Token::LongName(n) => "x".repeat(*n),
        }
    }
}

fn token() -> impl Strategy<Value = Token> {
    prop_oneof![
        4 => Just(Token::Slash),
        2 => Just(Token::Backslash),
        2 => Just(Token::Dot),
        3 => Just(Token::DotDot),
        1 => Just(Token::Nul),
        1 => (1u8..0x20).prop_map(Token::Control),
        1 => Just(Token::C1Control),
        1 => Just(Token::Colon),
        1 => Just(Token::DriveLetter),
        6 => "[a-zA-Z0-9_-]{1,8}".prop_map(Token::Name),
        2 => Just(Token::NonAscii),
        1 => Just(Token::CombiningAcute),
        1 => prop::sample::select(vec!['\u{200b}', '\u{202e}', '\u{feff}', '\u{2028}']).prop_map(Token::Invisible),
        1 => prop::sample::select(vec!["CON", "nul.txt", "COM1", "lpt9", "AUX"]).prop_map(Token::Reserved),
        1 => Just(Token::Space),
        1 => prop::sample::select(vec!['<', '>', '"', '|', '?', '*']).prop_map(Token::Forbidden),
        1 => Just(Token::FullwidthDot),
        1 => Just(Token::PercentDot),
        1 => (200usize..300).prop_map(Token::LongName),
    ]
}

/// What every accepted path must satisfy.
fn check_accepted(input: &str, path: &WorkspacePath) {
    let s = path.as_str();
    assert!(!s.is_empty());
    assert!(!s.starts_with('/'), "absolute accepted: {input:?}");
    assert!(!s.contains('\\'), "backslash accepted: {input:?}");
    assert!(!s.contains(':'), "drive or colon accepted: {input:?}");
    assert!(
        !s.chars().any(char::is_control),
        "control accepted: {input:?}"
    );
    assert!(s.len() <= MAX_PATH_BYTES);
    let segments: Vec<&str> = s.split('/').collect();
    assert!(segments.len() <= MAX_DEPTH);
    for seg in &segments {
        assert!(
            !seg.is_empty() && *seg != "." && *seg != "..",
            "segment {seg:?} from {input:?}"
        );
        assert!(seg.len() <= MAX_SEGMENT_BYTES);
        assert!(!seg.ends_with('.') && !seg.ends_with(' '));
    }
    // The stored form is NFC and parses to itself.
    assert_eq!(s, s.nfc().collect::<String>());
    assert_eq!(&WorkspacePath::parse(s).unwrap(), path);
}

/// Traversal, absolute forms and control characters as they appear in the
/// normalised input: any of them means the input must be refused.
fn is_hostile(input: &str) -> bool {
    let n: String = input.nfc().collect();
    n.starts_with('/')
        || n.starts_with('\\')
        || n.chars().any(char::is_control)
        || n.split(['/', '\\']).any(|s| s == ".." || s == ".")
        || (n.len() >= 2 && n.as_bytes()[1] == b':')
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2_000, .. ProptestConfig::default() })]

    #[test]
    fn s7_1_token_paths_never_panic_and_never_accept_hostile_forms(tokens in prop::collection::vec(token(), 0..14)) {
        let input: String = tokens.iter().map(Token::text).collect();
        match WorkspacePath::parse(&input) {
            Ok(path) => {
                prop_assert!(!is_hostile(&input), "hostile input accepted: {input:?}");
                check_accepted(&input, &path);
            }
            Err(e) => {
                // Every refusal names a reason and never panics while formatting.
                prop_assert!(!e.kind().code().is_empty());
                prop_assert!(e.to_string().starts_with("workspace path"));
            }
        }
    }

    #[test]
    fn s7_1_arbitrary_strings_never_panic(input in any::<String>()) {
        if let Ok(path) = WorkspacePath::parse(&input) {
            prop_assert!(!is_hostile(&input));
            check_accepted(&input, &path);
        }
    }

    #[test]
    fn s7_1_nfd_and_nfc_spellings_are_one_path(name in "[a-zA-Z]{0,4}[éüåñ][a-z]{0,4}") {
        let nfd: String = name.nfd().collect();
        prop_assert_eq!(WorkspacePath::parse(&nfd).unwrap(), WorkspacePath::parse(&name).unwrap());
    }
}
