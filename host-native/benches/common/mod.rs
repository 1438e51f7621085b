//! What the native benches share: their machine-readable output. With
//! `BENCH_JSON=<file>` set, every figure a bench prints is also appended to
//! that file as one JSON line (`cargo xtask bench` collects them):
//!
//! ```text
//! {"bench":"runtime","name":"round_memory_100","label":"…","value":41.2,"unit":"us", …}
//! ```
//!
//! `name` is stable (the aims in `xtask/src/bench/aims.rs` key on it), `label`
//! is what the table shows, `value` is a number in `unit`; any further
//! fields are details (counts, the first and last tenth of a run, notes).
//! Without `BENCH_JSON` nothing is written and the benches only print prose.

use std::io::Write;

use serde_json::{Map, Value, json};

/// Appends one figure to `$BENCH_JSON` (when set). `extra` must be a JSON
/// object (or `null`); its fields ride along with the figure.
pub fn emit(bench: &str, name: &str, label: &str, value: f64, unit: &str, extra: Value) {
    let Some(path) = std::env::var_os("BENCH_JSON") else {
        return;
    };
    let mut line = Map::new();
    line.insert("bench".into(), json!(bench));
    line.insert("name".into(), json!(name));
    line.insert("label".into(), json!(label));
    line.insert("value".into(), finite(value));
    line.insert("unit".into(), json!(unit));
    if let Value::Object(fields) = extra {
        for (key, value) in fields {
            line.entry(key).or_insert(value);
        }
    }
    let mut text = Value::Object(line).to_string();
    text.push('\n');
    let written = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .and_then(|mut file| file.write_all(text.as_bytes()));
    if let Err(e) = written {
        eprintln!(
            "BENCH_JSON: cannot append to {}: {e}",
            path.to_string_lossy()
        );
    }
}

/// A number JSON can carry (NaN and infinities become `null`).
fn finite(value: f64) -> Value {
    serde_json::Number::from_f64(value).map_or(Value::Null, Value::Number)
}
