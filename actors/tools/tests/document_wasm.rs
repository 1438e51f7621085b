//! `extract_document`'s HTML path in headless Chromium (wasm32, issue 12
//! item 1): HTML nested 10x, 100x and 1,000x deeper than the depth limit is
//! the typed `document_too_complex` error, returned without trapping (no
//! stack exhaustion) and without a long freeze (the pre-scan refuses it
//! before any parser runs); a page at the depth limit is still read. Run
//! with `cargo test -p agent-tools --target wasm32-unknown-unknown --test
//! document_wasm` (CHROMEDRIVER and webdriver.json, as in TOOLCHAIN.md).
#![cfg(target_arch = "wasm32")]

use agent_tools::builtin::document::{
    DocumentHint, ExtractError, ExtractLimits, HtmlLimits, HtmlRefusal, extract,
};
use wasm_bindgen_test::{wasm_bindgen_test, wasm_bindgen_test_configure};

wasm_bindgen_test_configure!(run_in_browser);

fn hint() -> DocumentHint<'static> {
    DocumentHint {
        name: Some("page.html"),
        ..DocumentHint::default()
    }
}

#[wasm_bindgen_test]
fn hostile_nesting_is_a_typed_error_in_the_browser() {
    let depth = HtmlLimits::DEFAULT.max_depth;
    for factor in [10, 100, 1_000] {
        let html = format!("<html><body>{}", "<div>".repeat(depth * factor));
        assert_eq!(
            extract(html.as_bytes(), &hint(), &ExtractLimits::DEFAULT),
            Err(ExtractError::TooComplex {
                refusal: HtmlRefusal::TooDeep { limit: depth }
            }),
            "{factor}x"
        );
    }
}

#[wasm_bindgen_test]
fn a_page_at_the_depth_limit_is_read_in_the_browser() {
    // html and body, the divs, and the paragraph: exactly the limit.
    let n = HtmlLimits::DEFAULT.max_depth - 3;
    let html = format!(
        "<html><body>{}<p>The innermost paragraph of a deep but allowed page, with words.</p>{}</body></html>",
        "<div>".repeat(n),
        "</div>".repeat(n)
    );
    let out = extract(html.as_bytes(), &hint(), &ExtractLimits::DEFAULT).expect("read");
    assert!(out.text.contains("innermost paragraph"), "{}", out.text);
}
