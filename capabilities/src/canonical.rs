//! Canonical JSON (RFC 8785, JCS) and SHA-256 fingerprints of it: the one
//! byte form that tool definitions, arguments, approval identities and
//! capability tokens are hashed and MACed over.
//!
//! # Why `serde_json_canonicalizer`
//!
//! JCS is subtle in two places: object keys sort by UTF-16 code units (not
//! by bytes or chars), and numbers print exactly as ECMAScript's
//! `Number.prototype.toString` does. `serde_json_canonicalizer` implements
//! both (number formatting through `ryu-js`, tested against the RFC's
//! vectors and the reference implementation's 100-million-number file),
//! works straight from any `Serialize` value without an intermediate tree,
//! is pure Rust with no I/O, and builds for `wasm32-unknown-unknown`.
//!
//! # Numbers: integers beyond 2^53 lose precision
//!
//! RFC 8785 treats every JSON number as an IEEE-754 double. The crate
//! follows that for every integer type (it converts `u64`, `i64`, `u128`
//! and `i128` with `as f64`), so integers beyond ±2^53 are **rounded, not
//! refused**: `9007199254740993` (2^53 + 1) canonicalises to
//! `9007199254740992`, and `u64::MAX` to `18446744073709552000`. Two
//! different large integers can therefore share a canonical form and a
//! [`Fingerprint`]. A tool that needs exact large integers must pass them as
//! strings. NaN and the infinities are refused with an error.

use std::fmt;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// Canonicalisation or fingerprint parsing failed.
#[derive(Debug, thiserror::Error)]
pub enum CanonicalError {
    /// The value cannot be written as JSON at all (a map with non-string
    /// keys, NaN or an infinity, or a failing `Serialize` impl).
    #[error(
        "cannot write the value as canonical JSON: {0}; use string map keys and finite numbers"
    )]
    Json(#[from] serde_json::Error),
    /// A fingerprint was not 64 lowercase hex digits.
    #[error("invalid fingerprint {0:?}: expected 64 lowercase hex digits (a SHA-256)")]
    InvalidFingerprint(String),
}

/// The RFC 8785 canonical text of a JSON value.
pub fn canonical_json(value: &serde_json::Value) -> Result<String, CanonicalError> {
    Ok(serde_json_canonicalizer::to_string(value)?)
}

/// The RFC 8785 canonical UTF-8 bytes of any serialisable value.
pub fn canonical_bytes<T: Serialize + ?Sized>(value: &T) -> Result<Vec<u8>, CanonicalError> {
    Ok(serde_json_canonicalizer::to_vec(&value)?)
}

/// SHA-256 of `bytes` as 64 lowercase hex digits.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// A SHA-256 of a value's canonical JSON, as 64 lowercase hex digits.
///
/// Serialised as a plain string; deserialisation checks the form.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(transparent)]
pub struct Fingerprint(#[serde(deserialize_with = "deserialize_hex")] String);

fn deserialize_hex<'de, D: serde::Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    let s = String::deserialize(d)?;
    Fingerprint::from_hex(&s)
        .map(|f| f.0)
        .map_err(serde::de::Error::custom)
}

impl Fingerprint {
    /// The fingerprint of `value`: SHA-256 of its canonical bytes.
    pub fn of<T: Serialize + ?Sized>(value: &T) -> Result<Fingerprint, CanonicalError> {
        Ok(Fingerprint(sha256_hex(&canonical_bytes(value)?)))
    }

    /// Accepts exactly 64 lowercase hex digits.
    pub fn from_hex(s: &str) -> Result<Fingerprint, CanonicalError> {
        let ok = s.len() == 64 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
        if ok {
            Ok(Fingerprint(s.to_owned()))
        } else {
            Err(CanonicalError::InvalidFingerprint(s.to_owned()))
        }
    }

    /// The 64 hex digits.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Canonical bytes of a value built only from strings, booleans, unit
/// enums, sets, sequences and integers: such values always serialise.
pub(crate) fn canonical_bytes_of_plain<T: Serialize + ?Sized>(value: &T) -> Vec<u8> {
    // Invariant: callers pass only the crate's own plain data types (no
    // floats, no maps with non-string keys), which the canonicaliser never
    // refuses.
    #[allow(clippy::expect_used)]
    canonical_bytes(value).expect("plain data always canonicalises")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn canon_str(text: &str) -> String {
        let value: serde_json::Value = serde_json::from_str(text).unwrap();
        canonical_json(&value).unwrap()
    }

    #[test]
    fn rfc8785_sorting_example_orders_keys_by_utf16_code_units() {
        let input = r#"{
            "\u20ac": "Euro Sign",
            "\r": "Carriage Return",
            "\ufb33": "Hebrew Letter Dalet With Dagesh",
            "1": "One",
            "\ud83d\ude00": "Emoji: Grinning Face",
            "\u0080": "Control",
            "\u00f6": "Latin Small Letter O With Diaeresis"
        }"#;
        let expected = "{\"\\r\":\"Carriage Return\",\"1\":\"One\",\"\u{80}\":\"Control\",\
                        \"\u{f6}\":\"Latin Small Letter O With Diaeresis\",\
                        \"\u{20ac}\":\"Euro Sign\",\"\u{1f600}\":\"Emoji: Grinning Face\",\
                        \"\u{fb33}\":\"Hebrew Letter Dalet With Dagesh\"}";
        assert_eq!(canon_str(input), expected);
    }

    #[test]
    fn utf16_order_differs_from_byte_order() {
        // U+1F600 is D83D DE00 in UTF-16, so it sorts before U+FB33 even
        // though its UTF-8 bytes sort after.
        let v = json!({"\u{fb33}": 1, "\u{1f600}": 2, "\u{e9}": 3});
        assert_eq!(
            canonical_json(&v).unwrap(),
            "{\"\u{e9}\":3,\"\u{1f600}\":2,\"\u{fb33}\":1}"
        );
    }

    #[test]
    fn rfc8785_example_with_literals_and_escapes() {
        let input = r#"{
            "numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],
            "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
            "literals": [null, true, false]
        }"#;
        let expected = r#"{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\u000f\nA'B\"\\\\\"/"}"#;
        assert_eq!(canon_str(input), expected);
    }

    #[test]
    fn string_escapes() {
        let v = json!("\u{8}\u{9}\u{a}\u{c}\u{d}\"\\/\u{1}\u{1f}\u{7f}é");
        assert_eq!(
            canonical_json(&v).unwrap(),
            "\"\\b\\t\\n\\f\\r\\\"\\\\/\\u0001\\u001f\u{7f}é\""
        );
    }

    /// RFC 8785 Appendix B: IEEE-754 bit patterns and their canonical text.
    const NUMBER_VECTORS: &[(u64, &str)] = &[
        (0x0000000000000000, "0"),
        (0x8000000000000000, "0"),
        (0x0000000000000001, "5e-324"),
        (0x8000000000000001, "-5e-324"),
        (0x7fefffffffffffff, "1.7976931348623157e+308"),
        (0xffefffffffffffff, "-1.7976931348623157e+308"),
        (0x4340000000000000, "9007199254740992"),
        (0xc340000000000000, "-9007199254740992"),
        (0x4430000000000000, "295147905179352830000"),
        (0x44b52d02c7e14af5, "9.999999999999997e+22"),
        (0x44b52d02c7e14af6, "1e+23"),
        (0x44b52d02c7e14af7, "1.0000000000000001e+23"),
        (0x444b1ae4d6e2ef4e, "999999999999999700000"),
        (0x444b1ae4d6e2ef4f, "999999999999999900000"),
        (0x444b1ae4d6e2ef50, "1e+21"),
        (0x3eb0c6f7a0b5ed8c, "9.999999999999997e-7"),
        (0x3eb0c6f7a0b5ed8d, "0.000001"),
        (0x41b3de4355555553, "333333333.3333332"),
        (0x41b3de4355555554, "333333333.33333325"),
        (0x41b3de4355555555, "333333333.3333333"),
        (0x41b3de4355555556, "333333333.3333334"),
        (0x41b3de4355555557, "333333333.33333343"),
        (0xbecbf647612f3696, "-0.0000033333333333333333"),
        (0x43143ff3c1cb0959, "1424953923781206.2"),
    ];

    #[test]
    fn rfc8785_number_vectors() {
        for &(bits, expected) in NUMBER_VECTORS {
            let value = f64::from_bits(bits);
            let text = String::from_utf8(canonical_bytes(&value).unwrap()).unwrap();
            assert_eq!(text, expected, "bits {bits:#018x}");
            // The same through a serde_json::Value.
            let via_value = canonical_json(&json!(value)).unwrap();
            assert_eq!(via_value, expected, "bits {bits:#018x} via Value");
        }
    }

    #[test]
    fn nan_and_infinities_are_refused() {
        for bits in [
            0x7fffffffffffffff_u64,
            0x7ff0000000000000,
            0xfff0000000000000,
        ] {
            assert!(canonical_bytes(&f64::from_bits(bits)).is_err());
        }
    }

    #[test]
    fn integers_beyond_2_pow_53_are_rounded_to_doubles() {
        let exact = 9_007_199_254_740_992_u64; // 2^53
        let above = exact + 1;
        assert_eq!(canonical_bytes(&above).unwrap(), b"9007199254740992");
        assert_eq!(canonical_json(&json!(above)).unwrap(), "9007199254740992");
        assert_eq!(canonical_bytes(&u64::MAX).unwrap(), b"18446744073709552000");
        assert_eq!(canonical_bytes(&i64::MIN).unwrap(), b"-9223372036854776000");
        // Hence two different integers share a fingerprint...
        assert_eq!(
            Fingerprint::of(&json!({"n": exact})).unwrap(),
            Fingerprint::of(&json!({"n": above})).unwrap()
        );
        // ...and exact large integers must travel as strings.
        assert_ne!(
            Fingerprint::of(&json!({"n": exact.to_string()})).unwrap(),
            Fingerprint::of(&json!({"n": above.to_string()})).unwrap()
        );
    }

    #[test]
    fn non_string_map_keys_are_an_error_not_a_panic() {
        let mut map = std::collections::BTreeMap::new();
        map.insert(vec![1u8], 1);
        assert!(matches!(
            canonical_bytes(&map),
            Err(CanonicalError::Json(_))
        ));
    }

    #[test]
    fn sha256_hex_known_answer() {
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(sha256_hex(b"").len(), 64);
    }

    #[test]
    fn fingerprint_of_is_sha256_of_canonical_bytes() {
        let v = json!({"b": 1, "a": [true, null]});
        let fp = Fingerprint::of(&v).unwrap();
        assert_eq!(fp.as_str(), sha256_hex(br#"{"a":[true,null],"b":1}"#));
        assert_eq!(fp.to_string(), fp.as_str());
        assert_eq!(serde_json::to_string(&fp).unwrap(), format!("\"{fp}\""));
    }

    #[test]
    fn fingerprint_from_hex_validates() {
        let good = "a".repeat(64);
        assert!(Fingerprint::from_hex(&good).is_ok());
        for bad in [
            "",
            &"A".repeat(64),
            &"a".repeat(63),
            &"g".repeat(64),
            &"a".repeat(65),
        ] {
            assert!(matches!(
                Fingerprint::from_hex(bad),
                Err(CanonicalError::InvalidFingerprint(_))
            ));
        }
        let parsed: Fingerprint = serde_json::from_str(&format!("\"{good}\"")).unwrap();
        assert_eq!(parsed.as_str(), good);
        assert!(serde_json::from_str::<Fingerprint>("\"ABC\"").is_err());
    }

    #[cfg(not(target_arch = "wasm32"))]
    mod props {
        use super::super::*;
        use proptest::prelude::*;
        use serde_json::Value;

        fn arb_json() -> impl Strategy<Value = Value> {
            let leaf = prop_oneof![
                Just(Value::Null),
                any::<bool>().prop_map(Value::Bool),
                any::<i64>().prop_map(Value::from),
                any::<f64>()
                    .prop_filter("finite", |f| f.is_finite())
                    .prop_map(Value::from),
                any::<String>().prop_map(Value::String),
            ];
            leaf.prop_recursive(3, 32, 6, |inner| {
                prop_oneof![
                    prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                    prop::collection::vec((any::<String>(), inner), 0..6)
                        .prop_map(|kv| Value::Object(kv.into_iter().collect())),
                ]
            })
        }

        /// An object serialised with its keys in exactly the given order
        /// (serde_json's own maps are always sorted, so they cannot show
        /// insertion order).
        struct InOrder(Vec<(String, Value)>);

        impl Serialize for InOrder {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                use serde::ser::SerializeMap;
                let mut map = s.serialize_map(Some(self.0.len()))?;
                for (k, v) in &self.0 {
                    map.serialize_entry(k, v)?;
                }
                map.end()
            }
        }

        /// Keys where UTF-8 byte order and UTF-16 code-unit order disagree
        /// (U+E000..U+FFFF against supplementary characters), plus ASCII.
        fn arb_key() -> impl Strategy<Value = String> {
            prop_oneof![
                "[a-c\u{e000}-\u{ffff}\u{10000}-\u{10ffff}]{0,3}",
                any::<String>(),
            ]
        }

        proptest! {
            #[test]
            fn canonicalisation_is_idempotent(v in arb_json()) {
                let once = canonical_json(&v).unwrap();
                let reparsed: Value = serde_json::from_str(&once).unwrap();
                prop_assert_eq!(canonical_json(&reparsed).unwrap(), once);
            }

            #[test]
            fn keys_sort_by_utf16_code_units_whatever_the_insertion_order(
                entries in prop::collection::btree_map(arb_key(), arb_json(), 0..8),
                rotate in 0usize..8,
            ) {
                let mut entries: Vec<(String, Value)> = entries.into_iter().collect();
                let mut expected = entries.clone();
                expected.sort_by(|a, b| a.0.encode_utf16().cmp(b.0.encode_utf16()));
                let expected = format!(
                    "{{{}}}",
                    expected
                        .iter()
                        .map(|(k, v)| format!(
                            "{}:{}",
                            canonical_json(&Value::String(k.clone())).unwrap(),
                            canonical_json(v).unwrap()
                        ))
                        .collect::<Vec<_>>()
                        .join(",")
                );
                if !entries.is_empty() {
                    let by = rotate % entries.len();
                    entries.rotate_left(by);
                }
                let forwards = canonical_bytes(&InOrder(entries.clone())).unwrap();
                entries.reverse();
                let backwards = canonical_bytes(&InOrder(entries)).unwrap();
                prop_assert_eq!(String::from_utf8(forwards.clone()).unwrap(), expected);
                prop_assert_eq!(forwards, backwards);
            }
        }
    }
}
