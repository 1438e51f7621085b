//! Discovery (S5.2): a deterministic BM25 index over the names, providers and
//! descriptions of discoverable (plugin and MCP) tools for `search_tools`, and
//! the capacity rule of `load_tools` (at most 64 schemas per model request).
//!
//! BM25 (k1 = 1.2, b = 0.75) is small enough to write here; ties are broken by
//! name, and every loop runs in a fixed order, so equal inputs rank equally.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use crate::registry::MAX_SCHEMAS_PER_REQUEST;

const K1: f64 = 1.2;
const B: f64 = 0.75;
/// Name tokens count this many times: a query word in the name matters more.
const NAME_WEIGHT: usize = 3;

/// Most results one `search_tools` call returns.
pub const MAX_SEARCH_LIMIT: usize = 20;
/// Results when the model gives no limit.
pub const DEFAULT_SEARCH_LIMIT: usize = 5;
/// Longest query accepted, in bytes.
pub const MAX_QUERY_BYTES: usize = 512;
/// Characters of a description shown in a search hit.
const HIT_DESCRIPTION_CHARS: usize = 300;

const STOPWORDS: &[&str] = &[
    "a", "an", "and", "are", "as", "at", "be", "by", "can", "do", "for", "from", "i", "in", "into",
    "is", "it", "its", "me", "my", "of", "on", "or", "so", "that", "the", "this", "to", "want",
    "we", "what", "which", "with", "you", "your", "please", "some", "all",
];

/// Split text into lowercase word stems: camelCase and non-alphanumerics
/// separate words; stopwords are dropped; plurals and common suffixes are cut.
pub fn tokenize(text: &str) -> Vec<String> {
    tokenize_raw(text).iter().map(|w| stem(w)).collect()
}

/// The index terms of a text: every stem, plus the exact word (marked with
/// `=`) where stemming changed it, so that an exact match outranks a match
/// of the stem alone ("play" is closer to "play" than to "played").
fn terms(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for word in tokenize_raw(text) {
        let stemmed = stem(&word);
        if stemmed != word {
            out.push(format!("={word}"));
        } else {
            out.push(format!("={stemmed}"));
        }
        out.push(stemmed);
    }
    out
}

fn tokenize_raw(text: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut prev_lower = false;
    for c in text.chars() {
        if c.is_alphanumeric() {
            if c.is_uppercase() && prev_lower && !cur.is_empty() {
                words.push(std::mem::take(&mut cur));
            }
            prev_lower = c.is_lowercase() || c.is_numeric();
            cur.extend(c.to_lowercase());
        } else {
            prev_lower = false;
            if !cur.is_empty() {
                words.push(std::mem::take(&mut cur));
            }
        }
    }
    if !cur.is_empty() {
        words.push(cur);
    }
    words.retain(|w| !STOPWORDS.contains(&w.as_str()));
    words
}

/// A light suffix stripper (enough to match "issues"/"issue", "sending"/"send").
fn stem(word: &str) -> String {
    let w = word;
    let n = w.chars().count();
    if !w.is_ascii() || n <= 3 {
        return w.to_owned();
    }
    for (suffix, repl, min) in [
        ("ies", "y", 5),
        ("sses", "ss", 5),
        ("ing", "", 6),
        ("ed", "", 5),
        ("es", "", 5),
        ("s", "", 4),
    ] {
        if n >= min
            && let Some(base) = w.strip_suffix(suffix)
        {
            if suffix == "s" && (base.ends_with('s') || base.ends_with('u')) {
                continue;
            }
            if suffix == "es"
                && !(base.ends_with("ch") || base.ends_with("sh") || base.ends_with('x'))
            {
                continue;
            }
            return format!("{base}{repl}");
        }
    }
    w.to_owned()
}

/// One searchable tool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SearchDoc {
    pub name: String,
    pub provider: String,
    pub description: String,
}

#[derive(Debug, Clone)]
struct Indexed {
    doc: SearchDoc,
    tf: BTreeMap<String, usize>,
    len: usize,
}

/// A BM25 index over a fixed set of tools.
#[derive(Debug, Clone, Default)]
pub struct SearchIndex {
    docs: Vec<Indexed>,
    df: BTreeMap<String, usize>,
    avg_len: f64,
}

/// One search result.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SearchHit {
    pub name: String,
    pub provider: String,
    pub description: String,
    /// BM25 score rounded to 4 decimals (for display and stable comparison).
    pub score: f64,
}

impl SearchIndex {
    /// Build an index; the documents are sorted by name first.
    pub fn build(mut docs: Vec<SearchDoc>) -> SearchIndex {
        docs.sort_by(|a, b| a.name.cmp(&b.name));
        let mut df: BTreeMap<String, usize> = BTreeMap::new();
        let mut indexed = Vec::with_capacity(docs.len());
        for doc in docs {
            let mut tokens = Vec::new();
            let name_tokens = terms(&doc.name);
            for _ in 0..NAME_WEIGHT {
                tokens.extend(name_tokens.iter().cloned());
            }
            tokens.extend(terms(&doc.provider));
            tokens.extend(terms(&doc.description));
            let mut tf: BTreeMap<String, usize> = BTreeMap::new();
            for t in &tokens {
                *tf.entry(t.clone()).or_default() += 1;
            }
            for t in tf.keys() {
                *df.entry(t.clone()).or_default() += 1;
            }
            indexed.push(Indexed {
                doc,
                len: tokens.len(),
                tf,
            });
        }
        let avg_len = if indexed.is_empty() {
            0.0
        } else {
            indexed.iter().map(|d| d.len as f64).sum::<f64>() / indexed.len() as f64
        };
        SearchIndex {
            docs: indexed,
            df,
            avg_len,
        }
    }

    /// How many tools are indexed.
    pub fn len(&self) -> usize {
        self.docs.len()
    }

    /// True when nothing is indexed.
    pub fn is_empty(&self) -> bool {
        self.docs.is_empty()
    }

    /// The best `limit` matches with a positive score among tools `visible`
    /// accepts, best first; equal scores by name.
    pub fn search(
        &self,
        query: &str,
        limit: usize,
        visible: impl Fn(&str) -> bool,
    ) -> Vec<SearchHit> {
        let mut terms: Vec<String> = Vec::new();
        for t in self::terms(query) {
            if !terms.contains(&t) {
                terms.push(t);
            }
        }
        let n = self.docs.len() as f64;
        let mut scored: Vec<(f64, &Indexed)> = Vec::new();
        for d in self.docs.iter().filter(|d| visible(&d.doc.name)) {
            let mut score = 0.0;
            for t in &terms {
                let Some(&tf) = d.tf.get(t) else { continue };
                let df = self.df.get(t).copied().unwrap_or(0) as f64;
                let idf = (1.0 + (n - df + 0.5) / (df + 0.5)).ln();
                let tf = tf as f64;
                let norm = 1.0 - B + B * d.len as f64 / self.avg_len.max(1.0);
                score += idf * tf * (K1 + 1.0) / (tf + K1 * norm);
            }
            if score > 0.0 {
                scored.push((score, d));
            }
        }
        scored.sort_by(|a, b| {
            b.0.total_cmp(&a.0)
                .then_with(|| a.1.doc.name.cmp(&b.1.doc.name))
        });
        scored
            .into_iter()
            .take(limit)
            .map(|(score, d)| SearchHit {
                name: d.doc.name.clone(),
                provider: d.doc.provider.clone(),
                description: d
                    .doc
                    .description
                    .chars()
                    .take(HIT_DESCRIPTION_CHARS)
                    .collect(),
                score: (score * 10_000.0).round() / 10_000.0,
            })
            .collect()
    }
}

/// Why `load_tools` refused. Nothing was loaded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LoadError {
    #[error("load_tools needs a non-empty list of tool names (use search_tools to find them)")]
    Empty,
    #[error(
        "unknown tool name(s): {}; nothing was loaded. Use search_tools to find the exact names",
        unknown.join(", ")
    )]
    Unknown { unknown: Vec<String> },
    #[error(
        "loading {requested} more tool(s) would put {would_be} schemas in one request, above the limit of {max}; nothing was loaded. {always_on} built-in schemas are always present and these tools are loaded: [{}]",
        loaded.join(", ")
    )]
    Capacity {
        requested: usize,
        would_be: usize,
        max: usize,
        always_on: usize,
        loaded: Vec<String>,
    },
}

/// What loading would add. Pure: the caller applies it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadPlan {
    /// Names to add, ordered.
    pub new: BTreeSet<String>,
    /// Names that were already present (loaded, or always on).
    pub already: BTreeSet<String>,
    /// Schemas per request after loading.
    pub total: usize,
}

/// Decide a `load_tools` request. `known` tells whether a name is a
/// discoverable tool this run may use; `always_on` lists the schemas every
/// request carries (built-ins and the discovery tools).
pub fn plan_load(
    names: &[String],
    known: impl Fn(&str) -> bool,
    always_on: &BTreeSet<String>,
    loaded: &BTreeSet<String>,
) -> Result<LoadPlan, LoadError> {
    if names.is_empty() {
        return Err(LoadError::Empty);
    }
    let mut unknown = Vec::new();
    let mut new = BTreeSet::new();
    let mut already = BTreeSet::new();
    for n in names {
        if always_on.contains(n) || loaded.contains(n) {
            already.insert(n.clone());
        } else if known(n) {
            new.insert(n.clone());
        } else if !unknown.contains(n) {
            unknown.push(n.clone());
        }
    }
    if !unknown.is_empty() {
        return Err(LoadError::Unknown { unknown });
    }
    let total = always_on.len() + loaded.len() + new.len();
    if total > MAX_SCHEMAS_PER_REQUEST {
        return Err(LoadError::Capacity {
            requested: new.len(),
            would_be: total,
            max: MAX_SCHEMAS_PER_REQUEST,
            always_on: always_on.len(),
            loaded: loaded.iter().cloned().collect(),
        });
    }
    Ok(LoadPlan {
        new,
        already,
        total,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokenizer_splits_and_stems() {
        assert_eq!(tokenize("createIssue"), vec!["create", "issue"]);
        assert_eq!(tokenize("List the Issues"), vec!["list", "issue"]);
        assert_eq!(tokenize("sending e-mails"), vec!["send", "e", "mail"]);
        assert_eq!(tokenize("categories"), vec!["category"]);
    }

    #[test]
    fn bm25_prefers_name_matches_and_breaks_ties_by_name() {
        let idx = SearchIndex::build(vec![
            SearchDoc {
                name: "b_tool".into(),
                provider: "p".into(),
                description: "weather forecast".into(),
            },
            SearchDoc {
                name: "a_tool".into(),
                provider: "p".into(),
                description: "weather forecast".into(),
            },
            SearchDoc {
                name: "weather_now".into(),
                provider: "p".into(),
                description: "current conditions".into(),
            },
        ]);
        let hits = idx.search("weather", 10, |_| true);
        assert_eq!(hits[0].name, "weather_now");
        assert_eq!(hits[1].name, "a_tool");
        assert_eq!(hits[2].name, "b_tool");
        assert!(idx.search("weather", 10, |n| n != "weather_now")[0].name == "a_tool");
        assert!(idx.search("zebra", 10, |_| true).is_empty());
    }

    #[test]
    fn load_plan_counts_always_on_and_refuses_unknown() {
        let always: BTreeSet<String> = ["search_tools", "load_tools"].map(String::from).into();
        let loaded = BTreeSet::new();
        let plan = plan_load(
            &["x".into(), "load_tools".into()],
            |n| n == "x",
            &always,
            &loaded,
        )
        .unwrap();
        assert_eq!(plan.total, 3);
        assert_eq!(plan.already.len(), 1);
        let err =
            plan_load(&["x".into(), "nope".into()], |n| n == "x", &always, &loaded).unwrap_err();
        assert_eq!(
            err,
            LoadError::Unknown {
                unknown: vec!["nope".into()]
            }
        );
    }
}
