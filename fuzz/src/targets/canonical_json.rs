//! Canonical JSON (RFC 8785, `agent_capabilities::canonical`).
//!
//! Properties: every JSON value serde_json parses has a canonical form;
//! parsing the canonical form gives the same value (numbers compared as the
//! IEEE-754 doubles RFC 8785 makes of them); canonicalising again gives the
//! same bytes (idempotent); the text and byte forms agree, and so do the
//! fingerprints of the value and of its canonical re-parse.

use agent_capabilities::canonical::{Fingerprint, canonical_bytes, canonical_json};
use serde_json::Value;

/// Equal as RFC 8785 reads JSON: numbers are doubles.
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| same(a, b))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same(v, w)))
        }
        _ => a == b,
    }
}

pub fn check(data: &[u8]) {
    let Ok(value) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    let canonical = canonical_json(&value)
        .unwrap_or_else(|e| panic!("a parsed JSON value has no canonical form: {e}"));
    let bytes = canonical_bytes(&value).unwrap_or_else(|e| panic!("canonical_bytes: {e}"));
    assert_eq!(
        canonical.as_bytes(),
        &bytes[..],
        "text and byte forms differ"
    );
    let again: Value = serde_json::from_str(&canonical)
        .unwrap_or_else(|e| panic!("the canonical form {canonical:?} does not parse: {e}"));
    assert!(
        same(&value, &again),
        "parse(canonical(v)) != v: {value} became {again}"
    );
    let twice = canonical_json(&again).unwrap_or_else(|e| panic!("second canonical: {e}"));
    assert_eq!(canonical, twice, "canonical JSON is not idempotent");
    let (Ok(f1), Ok(f2)) = (Fingerprint::of(&value), Fingerprint::of(&again)) else {
        panic!("a fingerprint failed where the canonical form did not");
    };
    assert_eq!(f1, f2, "fingerprints of one value differ");
    // RFC 8785 output has no insignificant white space outside strings.
    let mut in_string = false;
    let mut escaped = false;
    for c in canonical.chars() {
        if in_string {
            match (escaped, c) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '"') => in_string = false,
                _ => {}
            }
        } else if c == '"' {
            in_string = true;
        } else {
            assert!(!c.is_whitespace(), "white space in canonical {canonical:?}");
        }
    }
}
