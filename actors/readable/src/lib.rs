//! `agent-readable`: bounded readable text from untrusted HTML, for every
//! tool that reads web pages or documents (`fetch_url` in `agent-fetch`,
//! `extract_document` in `agent-tools`). It owns the rule "HTML reaches the
//! readability extractor only within the limits", in one place for both.
//!
//! A leaf library: it depends on no crate of this workspace, and the two
//! actor crates that use it do not depend on each other through it, so the
//! direction hosts → actors → kernel → capabilities is unchanged.
//!
//! Readable text comes from [`dom_smoothie`] (a Rust port of Mozilla's
//! readability.js) over a [`dom_query`] document parsed by html5ever. Both
//! recurse over the tree, and some of their steps grow faster than linearly
//! with depth: 2,000 nested `<div>`s took 8 s of CPU and about 12,000
//! overflowed a 2 MiB thread stack (a process abort, not a panic). So:
//!
//! 1. [`prescan`](mod@prescan) reads the markup once, linearly and without recursion,
//!    and refuses it over [`HtmlLimits`] (input bytes, nesting depth,
//!    elements, depth sum, attributes per tag and in all) **before any
//!    parser runs**, with a conservative estimate of the tree the parser
//!    could build (see [`prescan`](mod@prescan) for the rule).
//! 2. The parsed tree is measured exactly and without recursion
//!    ([`tree::measure`]) and refused over the same limits before
//!    readability runs.
//! 3. The work runs where it can be stopped: both tools hand HTML to a
//!    host's [`ReadableExtractor`] ([`extractor`]), natively a sandbox
//!    process with an address-space cap that the host kills at the
//!    deadline (`agentrt __document-sandbox`), in the browser a Worker
//!    terminated at the deadline. Every such place computes the same
//!    [`answer`]. [`ExtractionSlots`] lets only a fixed number of
//!    extractions run at once; a call holds its slot while its place
//!    works, so a stopped place frees it at once. Without an extractor
//!    (tests of the tools) the work runs in process, natively on a thread
//!    of its own with a known stack ([`on_extraction_stack`],
//!    [`EXTRACTION_STACK_BYTES`], several times the measured need at the
//!    depth limit), which the sandbox child uses too; a caller's deadline
//!    there only answers early, and the work it leaves behind is bounded
//!    by the limits.
//!
//! The same code builds for wasm32: the same pre-scan and measurement
//! bound the work wherever it runs, so a hostile page can neither run for
//! long nor exhaust the wasm stack.
//!
//! A page over a limit is [`ReadableError::Refused`] with its own
//! [`HtmlRefusal`]; the tools turn it into their typed outcomes.
//!
//! # Example
//!
//! ```
//! use agent_readable::{HtmlLimits, ReadableError, TextStyle, readable_text};
//!
//! let page = "<html><head><title>Notes</title></head><body><article>\
//!             <h1>Notes</h1><p>The runtime reads pages as data, never as instructions.</p>\
//!             </article></body></html>";
//! let readable = readable_text(page, None, TextStyle::Markdown, &HtmlLimits::DEFAULT).unwrap();
//! assert!(readable.text.contains("never as instructions"));
//!
//! // Too deep for the limits: refused by the pre-scan, before any parser runs.
//! let limits = HtmlLimits { max_depth: 16, ..HtmlLimits::DEFAULT };
//! let deep = "<div>".repeat(100);
//! let refused = readable_text(&deep, None, TextStyle::Markdown, &limits);
//! assert!(matches!(refused, Err(ReadableError::Refused(_))));
//! ```

pub mod extractor;
pub mod prescan;
mod slots;
pub mod tree;

use dom_smoothie::{Config, ParsePolicy, Readability, ReadabilityError, TextMode};
use serde::{Deserialize, Serialize};

pub use extractor::{
    BoundedReadable, ExtractorError, ReadableExtractor, ReadableRequest, answer, answer_limit,
    clip_chars,
};
pub use prescan::{Estimate, prescan};
pub use slots::{
    EXTRACTION_STACK_BYTES, ExtractionLost, ExtractionSlot, ExtractionSlots, on_extraction_stack,
};
pub use tree::{Shape, measure};

/// The bounds on one HTML document. [`HtmlLimits::DEFAULT`] is what both
/// tools use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct HtmlLimits {
    /// Bytes of HTML (after charset decoding, as UTF-8) accepted at most.
    pub max_input_bytes: usize,
    /// Elements on one path from the root, `html` counted as 1.
    pub max_depth: usize,
    /// Element nodes in the whole document.
    pub max_elements: usize,
    /// The sum over all elements of their depth (the number of
    /// element-ancestor links readability may walk). Readability's time
    /// grows with it — about 1 µs per unit natively — so it bounds pages
    /// that are both deep and large, which depth and count alone do not:
    /// 200,000 paragraphs inside 500 nested `<div>`s are within both and
    /// took 111 s.
    pub max_depth_sum: usize,
    /// Attributes on one tag. html5ever checks each new attribute of a tag
    /// against all earlier ones (to drop duplicates), so one tag costs the
    /// square of its attribute count: one `<p>` with 200,000 attributes
    /// took 7.7 s, 1.4 million about 6 minutes.
    #[serde(default = "default_max_attributes_per_element")]
    pub max_attributes_per_element: usize,
    /// Attributes on all tags of the document together (end tags included:
    /// the tokenizer reads theirs too).
    #[serde(default = "default_max_attributes")]
    pub max_attributes: usize,
}

fn default_max_attributes_per_element() -> usize {
    HtmlLimits::DEFAULT.max_attributes_per_element
}

fn default_max_attributes() -> usize {
    HtmlLimits::DEFAULT.max_attributes
}

impl HtmlLimits {
    /// 8 MiB, depth 512 (Chromium's HTML parser also stops nesting at 512),
    /// 200,000 elements, a depth sum of 2,000,000, 1,000 attributes on one
    /// tag and 400,000 in all (two per element at the element limit; a
    /// large article page has well under one per element on average).
    /// The slowest attribute page within them, 400 tags of 1,000
    /// attributes each (`examples/measure.rs`, shape `attrs`), took 0.33 s
    /// in a release build (0.01 s of it the pre-scan).
    /// Measured with
    /// `examples/measure.rs` (release, this project's 2-core VM): the
    /// slowest pages within them take about 1.5 s (200,000 tiny paragraphs;
    /// 3,700 paragraphs inside 500 nested `<div>`s), 512 nested `<div>`s
    /// 0.2 s and under 64 KiB of stack.
    pub const DEFAULT: HtmlLimits = HtmlLimits {
        max_input_bytes: 8 * 1024 * 1024,
        max_depth: 512,
        max_elements: 200_000,
        max_depth_sum: 2_000_000,
        max_attributes_per_element: 1_000,
        max_attributes: 400_000,
    };
}

impl Default for HtmlLimits {
    fn default() -> Self {
        HtmlLimits::DEFAULT
    }
}

/// Why a document was not handed to the readability extractor.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[serde(tag = "exceeded", rename_all = "snake_case")]
pub enum HtmlRefusal {
    #[error("the HTML is {bytes} bytes, over the limit of {limit} bytes")]
    TooLarge { bytes: usize, limit: usize },
    #[error("the HTML nests elements more than {limit} deep")]
    TooDeep { limit: usize },
    #[error("the HTML has more than {limit} elements")]
    TooManyElements { limit: usize },
    #[error(
        "the HTML's elements are nested more than {limit} levels in sum (elements times their depth)"
    )]
    TooMuchNesting { limit: usize },
    #[error("a tag of the HTML has more than {limit} attributes")]
    TooManyAttributesOnElement { limit: usize },
    #[error("the HTML has more than {limit} attributes in all")]
    TooManyAttributes { limit: usize },
    /// The place that extracted it ended without an answer on its own
    /// (natively: the sandbox process reached its address-space cap, or
    /// overflowed its stack): the document needs more than it may use.
    #[error("the extraction needed more than the extractor may use ({detail})")]
    OverMemoryCap { detail: String },
}

impl HtmlRefusal {
    /// A stable snake_case name of the limit.
    pub fn code(&self) -> &'static str {
        match self {
            HtmlRefusal::TooLarge { .. } => "too_large",
            HtmlRefusal::TooDeep { .. } => "too_deep",
            HtmlRefusal::TooManyElements { .. } => "too_many_elements",
            HtmlRefusal::TooMuchNesting { .. } => "too_much_nesting",
            HtmlRefusal::TooManyAttributesOnElement { .. } => "too_many_attributes_on_element",
            HtmlRefusal::TooManyAttributes { .. } => "too_many_attributes",
            HtmlRefusal::OverMemoryCap { .. } => "over_memory_cap",
        }
    }
}

/// The output form of readable text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TextStyle {
    /// Markdown: headings, lists and links (what `fetch_url` returns).
    Markdown,
    /// Plain text with paragraph breaks (what `extract_document` returns).
    Formatted,
}

/// Readable text and the title of a page.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Readable {
    pub title: Option<String>,
    /// Trimmed; may be empty when the article has no text.
    pub text: String,
}

/// Why no readable text came out.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReadableError {
    /// Over a limit: never parsed, or never handed to readability.
    #[error("{0}")]
    Refused(#[from] HtmlRefusal),
    /// Within the limits, but neither readability nor its raw policy found
    /// an article.
    #[error("no readable content was found in the page")]
    NoArticle { title: Option<String> },
}

fn non_empty(text: &str) -> Option<String> {
    Some(text.trim().to_owned()).filter(|t| !t.is_empty())
}

/// Parse `html` after the pre-scan and check the tree before readability.
fn checked_document(html: &str, limits: &HtmlLimits) -> Result<dom_query::Document, HtmlRefusal> {
    let document = dom_query::Document::from(html);
    tree::measure(&document, limits)?;
    Ok(document)
}

/// Readable text of `html` within `limits`: the pre-scan, the parse, the
/// exact measurement, then readability (its raw policy when the heuristics
/// find no article). `url` resolves relative links; an unusable one is
/// ignored. No page script runs: the document is only parsed.
pub fn readable_text(
    html: &str,
    url: Option<&str>,
    style: TextStyle,
    limits: &HtmlLimits,
) -> Result<Readable, ReadableError> {
    prescan(html, limits)?;
    let config = || Config {
        text_mode: match style {
            TextStyle::Markdown => TextMode::Markdown,
            TextStyle::Formatted => TextMode::Formatted,
        },
        max_elements_to_parse: limits.max_elements,
        ..Config::default()
    };
    // `parse` changes the document, so each attempt parses afresh (the
    // checks hold for every parse of the same markup; they are repeated
    // because they are cheap).
    let reader = |url: Option<&str>| -> Result<Readability, ReadableError> {
        let document = checked_document(html, limits)?;
        match Readability::with_document(document, url, Some(config())) {
            Ok(reader) => Ok(reader),
            // Only the URL can be refused: read without it.
            Err(_) => Ok(Readability::with_document(
                checked_document(html, limits)?,
                None,
                Some(config()),
            )
            .map_err(|_| ReadableError::NoArticle { title: None })?),
        }
    };
    // The measurement already refused more elements; readability's own
    // count is the same rule, kept as a second line.
    let refused = || {
        ReadableError::Refused(HtmlRefusal::TooManyElements {
            limit: limits.max_elements,
        })
    };
    let mut first = reader(url)?;
    let article = match first.parse() {
        Ok(article) => article,
        Err(ReadabilityError::TooManyElements(..)) => return Err(refused()),
        Err(_) => {
            let mut raw = reader(url)?;
            match raw.parse_with_policy(ParsePolicy::Raw) {
                Ok(article) => article,
                Err(ReadabilityError::TooManyElements(..)) => return Err(refused()),
                Err(_) => {
                    return Err(ReadableError::NoArticle {
                        title: non_empty(&raw.get_article_title()),
                    });
                }
            }
        }
    };
    Ok(Readable {
        title: non_empty(&article.title),
        text: article.text_content.trim().to_owned(),
    })
}
