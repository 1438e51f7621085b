//! Readable-text extraction throughput (S8.2's HTML path: decode, the
//! `agent-readable` pre-scan and tree check within the default HTML limits,
//! dom_smoothie readability to Markdown, the 40,000-character cut) over a corpus of
//! generated article pages of 50–300 KB each, with navigation, inline
//! scripts and styles, comments, nested markup, sidebars and footers.
//! Run: `cargo bench -p agent-fetch --bench readable`.
//!
//! With `BENCH_JSON=<file>`, the throughput of criterion's median in this
//! run (its `estimates.json`) is also appended to that file as a JSON line
//! in MB/s (10^6 bytes; `cargo xtask bench` collects it); `-- --quick` is
//! criterion's quick mode.

#![cfg_attr(target_arch = "wasm32", allow(dead_code, unused_imports))]

#[cfg(target_arch = "wasm32")]
fn main() {} // criterion is a native dev-dependency; the bench runs natively.

#[cfg(not(target_arch = "wasm32"))]
use std::hint::black_box;
#[cfg(not(target_arch = "wasm32"))]
use std::time::Duration;

#[cfg(not(target_arch = "wasm32"))]
use criterion::{Criterion, Throughput, criterion_group};

/// A small deterministic generator (SplitMix64), so every run sees the same corpus.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

const WORDS: &[&str] = &[
    "the",
    "runtime",
    "agent",
    "reads",
    "public",
    "pages",
    "through",
    "a",
    "policy",
    "that",
    "checks",
    "every",
    "address",
    "before",
    "connecting",
    "and",
    "researchers",
    "found",
    "that",
    "readability",
    "heuristics",
    "score",
    "paragraphs",
    "by",
    "their",
    "commas",
    "length",
    "density",
    "of",
    "links",
    "within",
    "them",
    "while",
    "navigation",
    "menus",
    "sidebars",
    "footers",
    "are",
    "discarded",
    "because",
    "they",
    "rarely",
    "carry",
    "the",
    "story",
    "itself",
    "économie",
    "naïve",
    "Zürich",
    "données",
];

fn sentence(rng: &mut Rng) -> String {
    let n = 8 + rng.below(18);
    let mut s = String::new();
    for i in 0..n {
        if i > 0 {
            s.push(if rng.below(9) == 0 { ',' } else { ' ' });
            if s.ends_with(',') {
                s.push(' ');
            }
        }
        s.push_str(WORDS[rng.below(WORDS.len())]);
    }
    s.push('.');
    s
}

fn paragraph(rng: &mut Rng) -> String {
    let mut p = String::from("<p>");
    for _ in 0..(2 + rng.below(5)) {
        if rng.below(6) == 0 {
            p.push_str(&format!(
                "<a href=\"/wiki/{}\">{}</a> ",
                rng.next() % 10_000,
                sentence(rng)
            ));
        } else if rng.below(8) == 0 {
            p.push_str(&format!(
                "<em>{}</em> <strong>{}</strong> ",
                sentence(rng),
                sentence(rng)
            ));
        } else {
            p.push_str(&sentence(rng));
            p.push(' ');
        }
    }
    p.push_str("</p>\n");
    p
}

/// One article page of about `target` bytes.
fn page(seed: u64, target: usize) -> String {
    let mut rng = Rng(seed);
    let mut html = String::with_capacity(target + 16 * 1024);
    html.push_str("<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">");
    html.push_str(&format!(
        "<title>Article {seed}: how public web reads stay bounded</title>"
    ));
    html.push_str("<meta name=\"description\" content=\"A long article.\">");
    html.push_str(
        "<style>body{font-family:sans-serif}.nav a{margin:0 4px}.ad{display:none}</style>",
    );
    // Analytics and hydration scripts: large and irrelevant.
    html.push_str("<script>window.__STATE__ = {\"items\":[");
    for i in 0..(200 + rng.below(400)) {
        html.push_str(&format!("{{\"id\":{i},\"v\":\"{}\"}},", rng.next()));
    }
    html.push_str("]};</script><script async src=\"/analytics.js\"></script></head><body>");
    // Header navigation with many links.
    html.push_str("<header><div class=\"nav\"><ul>");
    for i in 0..(60 + rng.below(60)) {
        html.push_str(&format!(
            "<li><a href=\"/section/{i}\">Section {i}</a></li>"
        ));
    }
    html.push_str("</ul></div></header><!-- begin main content: rendered by template v2 -->");
    html.push_str(
        "<div id=\"page\"><div class=\"layout\"><aside class=\"sidebar\"><h3>Trending</h3><ul>",
    );
    for i in 0..(20 + rng.below(20)) {
        html.push_str(&format!(
            "<li><a href=\"/t/{i}\">{}</a></li>",
            sentence(&mut rng)
        ));
    }
    html.push_str("</ul><div class=\"ad\">Advertisement</div></aside>");
    html.push_str(
        "<main><article class=\"post-content\"><h1>How public web reads stay bounded</h1>",
    );
    html.push_str("<p class=\"byline\">By A. Writer</p>");
    let mut section = 0;
    while html.len() < target {
        if rng.below(7) == 0 {
            section += 1;
            html.push_str(&format!("<h2>Section {section}</h2>"));
        }
        match rng.below(12) {
            0 => {
                html.push_str("<ul>");
                for _ in 0..(3 + rng.below(5)) {
                    html.push_str(&format!("<li>{}</li>", sentence(&mut rng)));
                }
                html.push_str("</ul>");
            }
            1 => {
                html.push_str("<table><tr><th>Limit</th><th>Value</th></tr>");
                for _ in 0..(3 + rng.below(4)) {
                    html.push_str(&format!("<tr><td>{}</td><td>{}</td></tr>", WORDS[rng.below(WORDS.len())], rng.next() % 1000));
                }
                html.push_str("</table>");
            }
            2 => html.push_str(&format!(
                "<figure><img src=\"/img/{}.jpg\" alt=\"figure\"><figcaption>{}</figcaption></figure>",
                rng.next() % 1000,
                sentence(&mut rng)
            )),
            3 => html.push_str(&format!("<!-- {} -->", sentence(&mut rng))),
            4 => html.push_str(&format!(
                "<div class=\"inline-note\"><div><span>{}</span></div></div>",
                sentence(&mut rng)
            )),
            _ => html.push_str(&paragraph(&mut rng)),
        }
    }
    html.push_str("</article><section class=\"comments\"><h3>Comments</h3>");
    for _ in 0..(5 + rng.below(10)) {
        html.push_str(&format!(
            "<div class=\"comment\"><p>{}</p></div>",
            sentence(&mut rng)
        ));
    }
    html.push_str("</section></main></div></div><footer><ul>");
    for i in 0..40 {
        html.push_str(&format!("<li><a href=\"/about/{i}\">About {i}</a></li>"));
    }
    html.push_str("</ul><p>Copyright.</p></footer><script>trackPageView();</script></body></html>");
    html
}

fn corpus() -> Vec<Vec<u8>> {
    [50, 80, 120, 160, 200, 240, 280, 300]
        .iter()
        .enumerate()
        .map(|(i, kb)| page(i as u64 + 1, kb * 1024).into_bytes())
        .collect()
}

#[cfg(not(target_arch = "wasm32"))]
fn bench(c: &mut Criterion) {
    let pages = corpus();
    let total: usize = pages.iter().map(Vec::len).sum();
    for p in &pages {
        let len = p.len();
        assert!(
            (50 * 1024..=310 * 1024).contains(&len),
            "page of {len} bytes"
        );
        let out = agent_fetch::content::extract(
            Some("text/html; charset=utf-8"),
            p,
            "https://news.example/a",
            40_000,
            &agent_fetch::HtmlLimits::DEFAULT,
        )
        .expect("an article page is readable");
        assert!(out.text.len() > 1_000, "extraction found too little text");
        assert!(
            !out.text.contains("__STATE__"),
            "a script leaked into the text"
        );
    }
    let mut group = c.benchmark_group("readable");
    group.throughput(Throughput::Bytes(total as u64));
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(8));
    group.bench_function("article_corpus_50_300kb", |b| {
        b.iter(|| {
            for p in &pages {
                let out = agent_fetch::content::extract(
                    Some("text/html; charset=utf-8"),
                    black_box(p),
                    "https://news.example/a",
                    40_000,
                    &agent_fetch::HtmlLimits::DEFAULT,
                );
                black_box(out.map(|o| o.text.len()).unwrap_or(0));
            }
        })
    });
    group.finish();
}

#[cfg(not(target_arch = "wasm32"))]
criterion_group!(benches, bench);

#[cfg(not(target_arch = "wasm32"))]
fn main() {
    // What `criterion_main!` does, then the machine-readable figure.
    let started = std::time::SystemTime::now();
    benches();
    Criterion::default().configure_from_args().final_summary();
    emit_json(started);
}

/// Appends the corpus throughput at criterion's median to `$BENCH_JSON`,
/// when set: `{"bench","name","label","value","unit"}`.
#[cfg(not(target_arch = "wasm32"))]
fn emit_json(started: std::time::SystemTime) {
    let Some(out) = std::env::var_os("BENCH_JSON") else {
        return;
    };
    let Some(ns) = criterion_median_ns("readable/article_corpus_50_300kb", started) else {
        eprintln!("BENCH_JSON: no estimate of readable/article_corpus_50_300kb from this run");
        return;
    };
    let bytes: usize = corpus().iter().map(Vec::len).sum();
    let line = serde_json::json!({
        "bench": "readable", "name": "readable_throughput",
        "label": "readable-text extraction, 50–300 KB article pages (one core)",
        "value": bytes as f64 / (ns / 1e9) / 1e6, "unit": "MB/s",
    });
    use std::io::Write;
    let written = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&out)
        .and_then(|mut f| writeln!(f, "{line}"));
    if let Err(e) = written {
        eprintln!(
            "BENCH_JSON: cannot append to {}: {e}",
            out.to_string_lossy()
        );
    }
}

/// The median point estimate (ns) criterion wrote for `directory` in this
/// run (`$CRITERION_HOME`, else `$CARGO_TARGET_DIR/criterion`, else the
/// workspace's `target/criterion`).
#[cfg(not(target_arch = "wasm32"))]
fn criterion_median_ns(directory: &str, since: std::time::SystemTime) -> Option<f64> {
    let home = std::env::var_os("CRITERION_HOME")
        .map(std::path::PathBuf::from)
        .or_else(|| {
            std::env::var_os("CARGO_TARGET_DIR")
                .map(|t| std::path::PathBuf::from(t).join("criterion"))
        })
        .unwrap_or_else(|| {
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/criterion")
        });
    let file = home.join(directory).join("new/estimates.json");
    let fresh = std::fs::metadata(&file)
        .and_then(|m| m.modified())
        .is_ok_and(|modified| modified >= since);
    if !fresh {
        return None;
    }
    let estimates: serde_json::Value = serde_json::from_slice(&std::fs::read(&file).ok()?).ok()?;
    estimates["median"]["point_estimate"].as_f64()
}
