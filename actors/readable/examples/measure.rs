//! Measures the cost of readable text at a nesting depth: CPU time, and
//! whether it fits a given thread stack (a stack overflow aborts the
//! process, so the caller runs this once per size and reads the exit code).
//!
//! `cargo run --release -p agent-readable --example measure -- DEPTH STACK_KIB [SHAPE]`
//! SHAPE is `divs` (nested divs around a paragraph, the default), `flat`
//! (N paragraphs side by side), `tinyflat` (N `<p>x</p>`), `deepwide` (N
//! short paragraphs inside 500 nested divs), `attrs` (N paragraphs of
//! 1,000 attributes each) or `mixed` (nested lists, tables and formatting).

use std::time::Instant;

use agent_readable::{HtmlLimits, TextStyle, readable_text};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let depth: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(512);
    let stack_kib: usize = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(8192);
    let shape = args.get(3).cloned().unwrap_or_else(|| "divs".into());
    let html = match shape.as_str() {
        "flat" => (0..depth)
            .map(|i| format!("<p>Paragraph {i} of a flat page, with words enough to score.</p>"))
            .collect::<String>(),
        "deepwide" => {
            // 500 nested divs around DEPTH short paragraphs (each at depth ~503).
            let mut h = "<div>".repeat(500);
            for i in 0..depth {
                h.push_str(&format!("<p>p{i} words here.</p>"));
            }
            h
        }
        "tinyflat" => "<p>x</p>".repeat(depth),
        "attrs" => {
            // DEPTH paragraphs, each with 1,000 distinct attributes (the
            // per-tag limit): the worst attribute page within the limits
            // at DEPTH = 400 (400,000 attributes in all).
            let mut h = String::new();
            for i in 0..depth {
                h.push_str("<p");
                for a in 0..1000 {
                    h.push_str(&format!(" a{a}=\"{i}\""));
                }
                h.push_str(&format!(">Paragraph {i} with words enough to score.</p>"));
            }
            h
        }
        "mixed" => {
            let mut h = String::new();
            for i in 0..depth / 4 {
                h.push_str(&format!("<ul><li><b><table><tr><td>cell {i} "));
            }
            h
        }
        _ => {
            let mut h = "<div>".repeat(depth);
            h.push_str(
                "<p>The innermost paragraph, long enough to be read as the article text.</p>",
            );
            h.push_str(&"</div>".repeat(depth));
            h
        }
    };
    let limits = HtmlLimits {
        max_input_bytes: usize::MAX,
        max_depth: usize::MAX,
        max_elements: usize::MAX,
        max_depth_sum: usize::MAX,
        max_attributes_per_element: usize::MAX,
        max_attributes: usize::MAX,
    };
    let bytes = html.len();
    let worker = std::thread::Builder::new()
        .stack_size(stack_kib * 1024)
        .spawn(move || {
            let start = Instant::now();
            let prescan = agent_readable::prescan(&html, &limits).expect("no limits");
            let scanned = start.elapsed();
            let out = readable_text(&html, None, TextStyle::Markdown, &limits);
            (prescan, scanned, start.elapsed(), out.map(|r| r.text.len()))
        })
        .expect("thread");
    let (estimate, scanned, total, out) = worker.join().expect("joined");
    println!(
        "shape={shape} n={depth} bytes={bytes} stack={stack_kib}KiB estimate={estimate:?} prescan={scanned:?} total={total:?} text={out:?}"
    );
}
