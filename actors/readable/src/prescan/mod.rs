//! The pre-scan: a linear, iterative pass over HTML markup that refuses a
//! document before any parser sees it when its nesting depth or element
//! count could exceed the limits.
//!
//! It owns the *conservative estimate* of the tree an HTML5 parser builds.
//! The estimate must never be lower than the real tree for the markup it is
//! shown, so it follows one rule: **an element stays open unless the markup
//! proves the parser closes it.** Concretely:
//!
//! - Tokens are found as the HTML tokenizer finds them: comments (`<!--`
//!   ... `-->`, `--!>`, the abrupt `<!-->`), bogus comments (`<!...>`,
//!   `<?...>`, `</ ...>`), start and end tags with quoted and unquoted
//!   attribute values (a `>` inside quotes does not end a tag), and a tag cut
//!   off by the end of input is no tag. Raw text (`script`, `style`,
//!   `textarea`, `title`, `xmp`, `iframe`, `noembed`, `noframes`) runs to the
//!   first `</name` followed by a delimiter; for `script` the parser may run
//!   longer (its escape states), so scanning the rest as markup can only
//!   count more. `plaintext` ends all markup.
//! - A start tag of a non-void element pushes it; void elements (and
//!   self-closing elements inside SVG or MathML, where `/>` is honoured)
//!   count as elements but do not nest. `<td>`, `<tr>` or `<col>` also
//!   counts the `tbody`/`tr`/`colgroup` the parser may insert, unless the
//!   current element is that one. Once an end tag inside SVG/MathML
//!   was ignored, the parser may already have left it: until the scan
//!   leaves it too, `/>` and the HTML tags that end SVG/MathML close
//!   nothing, and new elements count as HTML ones.
//! - A table-structure start tag (`<tr>`, `<td>`, `<tbody>`, ...) may clear
//!   the parser's stack back to the table, closing formatting elements it
//!   later re-creates: the scan keeps them open and also counts them as
//!   re-created.
//! - An end tag closes only what the parser provably closes: the nearest
//!   open element of its name, if every element above it is one whose end
//!   tag the parser implies (`p`, `li`, `dd`, `dt`, `option`, `optgroup`,
//!   ruby parts; for table end tags also the table's own parts) or a
//!   formatting element (`b`, `a`, `font`, ...). An end tag that does not
//!   match that way is ignored, as if the parser ignored it, and counts as
//!   one element (`</p>` and `</br>` can create one).
//! - Formatting elements closed that way stay in the parser's list of
//!   active formatting elements, which the parser re-creates ("reconstructs")
//!   at the next text or start tag: the scan pushes them again and counts
//!   them as new elements (that is how `<b>` ... `</div>x` repeated makes
//!   many elements from little markup).
//! - Implied closes are applied only where the element closed is the
//!   current one: a new `<li>` closes an open `<li>`, `<dt>`/`<dd>` each
//!   other, `<option>` an `<option>`, a new cell a cell, a new row a cell
//!   and a row, and a block start (`<div>`, `<p>`, `<ul>`, headings, ...)
//!   an open `<p>`. Everything else the parser might close stays open.
//! - Every document has `html` and `body` (the parser inserts them without
//!   tags, and later `<html>`/`<body>` tags only add attributes): the scan
//!   starts with both open (and `head` counted), ignores those start tags,
//!   and never closes them (`</body>` and `</html>` leave them open, as the
//!   parser puts later content back into the body).
//!
//! Attributes are counted as the tokenizer begins each attribute name,
//! per tag and in all, and refused over
//! [`HtmlLimits::max_attributes_per_element`] and
//! [`HtmlLimits::max_attributes`]: the parser's cost for one tag grows with
//! the square of its attributes (each is checked against the earlier ones).
//!
//! The estimate also sums every element's depth (as it is created), the
//! measure of work for pages both deep and large. It is checked as it grows, so the scan stops at the first
//! element over a limit; its work is linear in the input plus the element
//! limit (re-created formatting elements are counted, and counting stops at
//! the limit). The tree the parser then builds is measured exactly
//! ([`crate::tree`]) before readability runs: that check does not depend on
//! this estimate being right, the estimate bounds the parser's own work.
//!
//! This module owns the estimate and its rules; the element classes they
//! read are in `elements`, the tokenizer in `tokens`.

use crate::{HtmlLimits, HtmlRefusal};

mod elements;
mod tokens;

use elements::{
    breaks_out_of_foreign, closes_p, has_implied_end, is_formatting, is_integration_point,
    is_plain_inline, is_raw_text, is_special, is_table_part, is_void,
};
use tokens::{Token, comment_end, lowercase_name, raw_text_end, skip_past, tag_end, tag_name};

/// What the pre-scan estimated for a document within the limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Estimate {
    /// The deepest nesting the parser could build, `html` counted as 1.
    pub depth: usize,
    /// The most elements the parser could create.
    pub elements: usize,
    /// The largest sum of all elements' depths.
    pub depth_sum: usize,
    /// Attributes on all tags (start and end tags).
    pub attributes: usize,
}

/// One element the scan holds open.
struct Open {
    name: String,
    /// Surely in the SVG or MathML namespace, where `/>` closes an element.
    foreign: bool,
}

/// The estimate as it grows.
struct Scan<'l> {
    limits: &'l HtmlLimits,
    open: Vec<Open>,
    /// Formatting elements closed by an end tag of another element: the
    /// parser re-creates them at the next text or start tag.
    to_reconstruct: Vec<String>,
    /// Open elements that are `svg` or `math` (or inside one).
    in_foreign_subtree: usize,
    /// An end tag was ignored inside SVG/MathML: the parser may have left
    /// that content already, so `/>` and breakout tags are no longer
    /// trusted to close anything until the scan leaves it too.
    foreign_uncertain: bool,
    elements: usize,
    deepest: usize,
    depth_sum: usize,
    attributes: usize,
}

impl Scan<'_> {
    /// Count the `count` attributes of one tag, against both attribute
    /// limits, before the tag is handed on.
    fn attributes(&mut self, count: usize) -> Result<(), HtmlRefusal> {
        if count > self.limits.max_attributes_per_element {
            return Err(HtmlRefusal::TooManyAttributesOnElement {
                limit: self.limits.max_attributes_per_element,
            });
        }
        self.attributes += count;
        if self.attributes > self.limits.max_attributes {
            return Err(HtmlRefusal::TooManyAttributes {
                limit: self.limits.max_attributes,
            });
        }
        Ok(())
    }

    fn count_element(&mut self) -> Result<(), HtmlRefusal> {
        self.elements += 1;
        if self.elements > self.limits.max_elements {
            return Err(HtmlRefusal::TooManyElements {
                limit: self.limits.max_elements,
            });
        }
        Ok(())
    }

    /// An element that does not stay open (void, or self-closed SVG/MathML):
    /// it counts, and it is one level deeper than the open elements.
    fn leaf(&mut self) -> Result<(), HtmlRefusal> {
        self.count_element()?;
        self.check_depth(self.open.len() + 1)
    }

    /// Record an element created at `depth`.
    fn check_depth(&mut self, depth: usize) -> Result<(), HtmlRefusal> {
        self.deepest = self.deepest.max(depth);
        if depth > self.limits.max_depth {
            return Err(HtmlRefusal::TooDeep {
                limit: self.limits.max_depth,
            });
        }
        self.depth_sum = self.depth_sum.saturating_add(depth);
        if self.depth_sum > self.limits.max_depth_sum {
            return Err(HtmlRefusal::TooMuchNesting {
                limit: self.limits.max_depth_sum,
            });
        }
        Ok(())
    }

    fn push(&mut self, name: &str, foreign: bool) -> Result<(), HtmlRefusal> {
        self.count_element()?;
        let maybe_foreign = foreign || name == "svg" || name == "math";
        if maybe_foreign || self.in_foreign_subtree > 0 {
            self.in_foreign_subtree += 1;
        }
        self.open.push(Open {
            name: name.to_owned(),
            foreign,
        });
        self.check_depth(self.open.len())
    }

    fn pop(&mut self) -> Option<Open> {
        let top = self.open.pop()?;
        if self.in_foreign_subtree > 0 {
            self.in_foreign_subtree -= 1;
            if self.in_foreign_subtree == 0 {
                self.foreign_uncertain = false;
            }
        }
        Some(top)
    }

    fn top_is(&self, names: &[&str]) -> bool {
        self.open
            .last()
            .is_some_and(|top| names.contains(&top.name.as_str()))
    }

    fn pop_if_top(&mut self, names: &[&str]) {
        if self.top_is(names) {
            self.pop();
        }
    }

    /// Text (or a start tag that reconstructs): the formatting elements the
    /// parser keeps in its active list are created again, nested.
    fn reconstruct(&mut self) -> Result<(), HtmlRefusal> {
        if self.to_reconstruct.is_empty() {
            return Ok(());
        }
        let names = std::mem::take(&mut self.to_reconstruct);
        for name in &names {
            self.push(name, false)?;
        }
        Ok(())
    }

    fn start_tag(&mut self, name: &str, self_closing: bool) -> Result<(), HtmlRefusal> {
        let in_foreign_content = self
            .open
            .last()
            .is_some_and(|t| t.foreign && !is_integration_point(&t.name));
        // Closes only where the scan is sure to be where the parser is.
        let trusted_foreign = in_foreign_content && !self.foreign_uncertain;
        if !in_foreign_content && matches!(name, "html" | "body") {
            // Already open: the parser only adds attributes.
            return Ok(());
        }
        if trusted_foreign && breaks_out_of_foreign(name) {
            // The parser pops SVG/MathML elements up to an HTML element or
            // an integration point.
            while self
                .open
                .last()
                .is_some_and(|t| t.foreign && !is_integration_point(&t.name))
            {
                self.pop();
            }
        }
        let foreign =
            name == "svg" || name == "math" || (trusted_foreign && !breaks_out_of_foreign(name));
        if !foreign {
            if matches!(
                name,
                "tr" | "td" | "th" | "tbody" | "thead" | "tfoot" | "caption" | "colgroup" | "col"
            ) {
                self.may_clear_to_table();
            }
            self.implied_closes(name);
            self.implied_opens(name)?;
        }
        if is_void(name) || (foreign && self_closing && !self.foreign_uncertain) {
            self.reconstruct()?;
            return self.leaf();
        }
        self.push(name, foreign)?;
        // The parser re-creates active formatting elements before some start
        // tags and not others (then at the first text inside). Re-creating
        // them inside the new element can only count more: when it closes,
        // they are closed with it and counted again when re-created.
        self.reconstruct()
    }

    /// Close the nearest open element named in `targets` if only elements
    /// that `passable` accepts lie above it; formatting elements closed on
    /// the way are re-created later. True when something was closed.
    fn close_through(&mut self, targets: &[&str], passable: impl Fn(&Open) -> bool) -> bool {
        let mut at = None;
        for (index, open) in self.open.iter().enumerate().rev() {
            // SVG/MathML elements match by name too (`</svg>`, `</g>`); no
            // HTML name that `targets` holds is ever an SVG/MathML element.
            if targets.contains(&open.name.as_str()) {
                at = Some(index);
                break;
            }
            if !passable(open) {
                break;
            }
        }
        let Some(at) = at else {
            return false;
        };
        let mut still_active = Vec::new();
        while self.open.len() > at + 1 {
            if let Some(closed) = self.pop()
                && is_formatting(&closed.name)
                && !closed.foreign
            {
                still_active.push(closed.name);
            }
        }
        self.pop();
        // Outermost first, as the parser's list keeps them.
        self.to_reconstruct.extend(still_active.into_iter().rev());
        true
    }

    /// The parser may pop the formatting elements above the nearest table
    /// part ("clear the stack back to a table context") and re-create them
    /// later; they stay open here and are also queued for re-creation.
    fn may_clear_to_table(&mut self) {
        let mut above = Vec::new();
        for open in self.open.iter().rev() {
            if matches!(
                open.name.as_str(),
                "table"
                    | "tbody"
                    | "thead"
                    | "tfoot"
                    | "tr"
                    | "td"
                    | "th"
                    | "caption"
                    | "template"
                    | "html"
            ) {
                break;
            }
            if !open.foreign && is_formatting(&open.name) {
                above.push(open.name.clone());
            }
        }
        self.to_reconstruct.extend(above.into_iter().rev());
    }

    /// Closes the parser surely makes for this start tag.
    fn implied_closes(&mut self, name: &str) {
        let formatting_or_p = |o: &Open| !o.foreign && (is_formatting(&o.name) || o.name == "p");
        if closes_p(name) {
            self.close_through(&["p"], |o| {
                !o.foreign && (is_formatting(&o.name) || has_implied_end(&o.name))
            });
        }
        match name {
            "li" => {
                self.close_through(&["li"], formatting_or_p);
            }
            "dd" | "dt" => {
                self.close_through(&["dd", "dt"], formatting_or_p);
            }
            "option" => self.pop_if_top(&["option"]),
            "optgroup" => {
                self.pop_if_top(&["option"]);
                self.pop_if_top(&["optgroup"]);
            }
            "td" | "th" => self.pop_if_top(&["td", "th"]),
            "tr" => {
                self.pop_if_top(&["td", "th"]);
                self.pop_if_top(&["tr"]);
            }
            "tbody" | "thead" | "tfoot" => {
                self.pop_if_top(&["td", "th"]);
                self.pop_if_top(&["tr"]);
                self.pop_if_top(&["tbody", "thead", "tfoot"]);
            }
            "h1" | "h2" | "h3" | "h4" | "h5" | "h6" => {
                self.pop_if_top(&["h1", "h2", "h3", "h4", "h5", "h6"]);
            }
            _ => {}
        }
    }

    /// Elements the parser may insert for this start tag without a tag of
    /// their own: assumed unless the current element proves them present.
    fn implied_opens(&mut self, name: &str) -> Result<(), HtmlRefusal> {
        match name {
            "td" | "th" => {
                if !self.top_is(&["tr", "tbody", "thead", "tfoot"]) {
                    self.push("tbody", false)?;
                }
                if !self.top_is(&["tr"]) {
                    self.push("tr", false)?;
                }
            }
            "tr" if !self.top_is(&["tbody", "thead", "tfoot"]) => self.push("tbody", false)?,
            "col" if !self.top_is(&["colgroup"]) => self.push("colgroup", false)?,
            _ => {}
        }
        Ok(())
    }

    fn end_tag(&mut self, name: &str) -> Result<(), HtmlRefusal> {
        if matches!(name, "html" | "body") {
            // They stay open (also from SVG/MathML: the parser handles them
            // as HTML, and only changes its mode): later content goes back
            // into the body.
            return Ok(());
        }
        let table_end = matches!(
            name,
            "table" | "tbody" | "thead" | "tfoot" | "tr" | "td" | "th" | "caption" | "colgroup"
        );
        let formatting_end = is_formatting(name);
        // End tags the parser handles "in scope" (generating implied end
        // tags on the way); any other end tag stops at a special element.
        let scoped_end = closes_p(name)
            || matches!(
                name,
                "p" | "button" | "form" | "applet" | "marquee" | "object" | "template"
            );
        // What the parser surely pops on its way to the element: elements
        // whose end it implies (not for a formatting end tag, whose
        // adoption agency keeps special elements such as `p` open), other
        // formatting and plain inline elements, a table's parts for a table
        // end tag, and SVG/MathML elements that are not integration points.
        let passable = |o: &Open| {
            if o.foreign {
                return !is_integration_point(&o.name);
            }
            is_formatting(&o.name)
                || is_plain_inline(&o.name)
                || (!formatting_end
                    && has_implied_end(&o.name)
                    && (scoped_end || !is_special(&o.name)))
                || (table_end && is_table_part(&o.name))
        };
        const HEADINGS: &[&str] = &["h1", "h2", "h3", "h4", "h5", "h6"];
        let targets: &[&str] = if HEADINGS.contains(&name) {
            // Any heading end tag closes the open heading.
            HEADINGS
        } else {
            &[name]
        };
        if !self.close_through(targets, passable) {
            if self.in_foreign_subtree > 0 {
                self.foreign_uncertain = true;
            }
            // Ignored, or `</p>`/`</br>` creating an element (a leaf).
            return self.leaf();
        }
        if formatting_end {
            // Its own end tag removes it from the active list.
            if let Some(i) = self.to_reconstruct.iter().rposition(|n| n == name) {
                self.to_reconstruct.remove(i);
            }
        }
        Ok(())
    }
}

/// The refusal of `html` for its size alone, if it is over
/// [`HtmlLimits::max_input_bytes`] (the pre-scan's first check; a host
/// makes it before sending a page elsewhere to be read).
pub fn size_refusal(html: &str, limits: &HtmlLimits) -> Option<HtmlRefusal> {
    (html.len() > limits.max_input_bytes).then_some(HtmlRefusal::TooLarge {
        bytes: html.len(),
        limit: limits.max_input_bytes,
    })
}

/// Check `html` against `limits` without parsing it: the input size, then
/// the estimated depth and element count (see the module documentation).
pub fn prescan(html: &str, limits: &HtmlLimits) -> Result<Estimate, HtmlRefusal> {
    if let Some(refusal) = size_refusal(html, limits) {
        return Err(refusal);
    }
    let b = html.as_bytes();
    let mut scan = Scan {
        limits,
        open: Vec::new(),
        to_reconstruct: Vec::new(),
        in_foreign_subtree: 0,
        foreign_uncertain: false,
        elements: 0,
        deepest: 0,
        depth_sum: 0,
        attributes: 0,
    };
    // html (depth 1), head and body (depth 2).
    for depth in [1, 2, 2] {
        scan.count_element()?;
        scan.check_depth(depth)?;
    }
    for root in ["html", "body"] {
        scan.open.push(Open {
            name: root.to_owned(),
            foreign: false,
        });
    }
    let mut name_buf = String::new();
    let mut i = 0;
    let mut text_since_tag = false;
    while i < b.len() {
        if b[i] != b'<' {
            if !text_since_tag {
                text_since_tag = true;
                scan.reconstruct()?;
            }
            i += 1;
            continue;
        }
        let next = b.get(i + 1).copied();
        let token = match next {
            Some(b'!') => {
                i = if b[i + 2..].starts_with(b"--") {
                    comment_end(b, i + 4)
                } else {
                    skip_past(b, i + 2, b">")
                };
                continue;
            }
            Some(b'?') => {
                i = skip_past(b, i + 2, b">");
                continue;
            }
            Some(b'/') => match b.get(i + 2).copied() {
                Some(c) if c.is_ascii_alphabetic() => {
                    let end = tag_name(b, i + 2);
                    let name = &b[i + 2..end];
                    let Some((after, _, attributes)) = tag_end(b, end) else {
                        break;
                    };
                    scan.attributes(attributes)?;
                    i = after;
                    Token::End { name }
                }
                Some(b'>') => {
                    i += 3;
                    continue;
                }
                None => break,
                Some(_) => {
                    i = skip_past(b, i + 2, b">");
                    continue;
                }
            },
            Some(c) if c.is_ascii_alphabetic() => {
                let end = tag_name(b, i + 1);
                let name = &b[i + 1..end];
                let Some((after, self_closing, attributes)) = tag_end(b, end) else {
                    break;
                };
                scan.attributes(attributes)?;
                i = after;
                Token::Start { name, self_closing }
            }
            _ => {
                // A lone `<` is text.
                if !text_since_tag {
                    text_since_tag = true;
                    scan.reconstruct()?;
                }
                i += 1;
                continue;
            }
        };
        text_since_tag = false;
        match token {
            Token::Start { name, self_closing } => {
                lowercase_name(name, &mut name_buf);
                scan.start_tag(&name_buf, self_closing)?;
                // Raw text (and `plaintext`) only where the element is surely
                // HTML: no SVG/MathML element is open. Inside them the same
                // names are parsed as markup, and scanning text as markup
                // can only count more. `/>` does not end an HTML element.
                if scan.in_foreign_subtree == 0 {
                    if name_buf == "plaintext" {
                        break;
                    }
                    if is_raw_text(&name_buf) {
                        i = raw_text_end(b, i, name);
                    }
                }
            }
            Token::End { name } => {
                lowercase_name(name, &mut name_buf);
                scan.end_tag(&name_buf)?;
            }
        }
    }
    Ok(Estimate {
        depth: scan.deepest,
        elements: scan.elements,
        depth_sum: scan.depth_sum,
        attributes: scan.attributes,
    })
}
