//! Readable HTML (`agent-readable`): the pre-scan, the exact measurement of
//! the parsed tree, and the extraction with its character bound.
//!
//! Properties, with small limits so that the fuzzer reaches them:
//! - the pre-scan's estimate is conservative (its documented rule): when it
//!   admits a document, the tree html5ever builds is no deeper, has no more
//!   elements and no larger depth sum than estimated, so the measurement
//!   admits it too;
//! - a document the pre-scan refuses is refused by the extraction with the
//!   same refusal, never parsed;
//! - an answer carries at most `max_chars` characters of text and of title,
//!   with counts that match the text.
//!
//! Input: one byte picks the style and the character bound; the rest is
//! the page (UTF-8, as the tools hand it over after charset decoding).

use agent_readable::extractor::{ReadableRequest, answer};
use agent_readable::{HtmlLimits, ReadableError, TextStyle, measure, prescan};

/// Small limits: every refusal is a few hundred bytes of markup away.
pub const LIMITS: HtmlLimits = HtmlLimits {
    max_input_bytes: 64 * 1024,
    max_depth: 24,
    max_elements: 400,
    max_depth_sum: 3_000,
    max_attributes_per_element: 12,
    max_attributes: 200,
};

pub fn check(data: &[u8]) {
    let Some((&knob, rest)) = data.split_first() else {
        return;
    };
    let Some(html) = super::text(rest) else {
        return;
    };
    let style = if knob.is_multiple_of(2) {
        TextStyle::Markdown
    } else {
        TextStyle::Formatted
    };
    let max_chars = usize::from(knob / 2) * 4;

    let estimate = prescan(html, &LIMITS);
    if let Ok(estimate) = &estimate {
        let document = dom_query::Document::from(html);
        let shape = measure(&document, &LIMITS).unwrap_or_else(|refusal| {
            panic!("the pre-scan admitted ({estimate:?}) what the measurement refuses: {refusal}")
        });
        assert!(
            shape.depth <= estimate.depth
                && shape.elements <= estimate.elements
                && shape.depth_sum <= estimate.depth_sum,
            "the pre-scan's estimate {estimate:?} is below the parsed tree {shape:?}"
        );
    }
    let request = ReadableRequest {
        html: html.to_owned(),
        url: Some("https://example.com/a/page.html".to_owned()),
        style,
        limits: LIMITS,
        max_chars,
    };
    match (answer(&request), estimate) {
        (Ok(got), Ok(_)) => {
            assert!(
                got.chars <= max_chars,
                "{} chars over {max_chars}",
                got.chars
            );
            assert_eq!(got.text.chars().count(), got.chars, "chars miscounted");
            assert!(got.total_chars >= got.chars);
            assert_eq!(got.truncated, got.total_chars > got.chars);
            if let Some(title) = &got.title {
                assert!(title.chars().count() <= max_chars, "title over {max_chars}");
            }
        }
        (Ok(_), Err(refusal)) => panic!("extracted a page the pre-scan refused: {refusal}"),
        (Err(ReadableError::Refused(got)), Err(refusal)) => {
            assert_eq!(got, refusal, "the extraction refused for another reason");
        }
        (Err(_), Err(refusal)) => panic!("the pre-scan refused ({refusal}) but the page was read"),
        (Err(ReadableError::Refused(_) | ReadableError::NoArticle { .. }), Ok(_)) => {}
    }
}
