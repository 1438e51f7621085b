//! The classes of HTML elements the pre-scan's rules depend on: void and
//! raw-text elements, formatting elements, elements whose end tag the parser
//! implies, table parts, the tags that close a `p` or break out of SVG and
//! MathML, and the integration points inside them (the HTML Standard's
//! tree-construction lists, as the estimate reads them).

pub(super) fn is_void(name: &str) -> bool {
    matches!(
        name,
        "area"
            | "base"
            | "basefont"
            | "bgsound"
            | "br"
            | "col"
            | "embed"
            | "frame"
            | "hr"
            | "image"
            | "img"
            | "input"
            | "keygen"
            | "link"
            | "meta"
            | "param"
            | "source"
            | "track"
            | "wbr"
    )
}

pub(super) fn is_raw_text(name: &str) -> bool {
    matches!(
        name,
        "script" | "style" | "textarea" | "title" | "xmp" | "iframe" | "noembed" | "noframes"
    )
}

pub(super) fn is_formatting(name: &str) -> bool {
    matches!(
        name,
        "a" | "b"
            | "big"
            | "code"
            | "em"
            | "font"
            | "i"
            | "nobr"
            | "s"
            | "small"
            | "strike"
            | "strong"
            | "tt"
            | "u"
    )
}

/// Elements whose end tag the parser generates when a later end tag closes
/// an ancestor ("generate implied end tags").
pub(super) fn has_implied_end(name: &str) -> bool {
    matches!(
        name,
        "p" | "li" | "dd" | "dt" | "option" | "optgroup" | "rb" | "rp" | "rt" | "rtc"
    )
}

/// Inline elements that are neither formatting nor "special": end tags of
/// their ancestors close them.
pub(super) fn is_plain_inline(name: &str) -> bool {
    matches!(
        name,
        "span"
            | "label"
            | "abbr"
            | "acronym"
            | "cite"
            | "q"
            | "sub"
            | "sup"
            | "var"
            | "kbd"
            | "samp"
            | "mark"
            | "time"
            | "ins"
            | "del"
            | "dfn"
            | "bdi"
            | "bdo"
            | "data"
            | "output"
    )
}

/// The elements among those with implied end tags that the parser counts
/// as "special" (an unknown end tag does not pass them).
pub(super) fn is_special(name: &str) -> bool {
    matches!(name, "p" | "li" | "dd" | "dt")
}

pub(super) fn is_table_part(name: &str) -> bool {
    matches!(
        name,
        "td" | "th" | "tr" | "tbody" | "thead" | "tfoot" | "caption" | "colgroup"
    )
}

/// Start tags that close an open `p` ("close a p element" in the parser;
/// not `table`, which does so only in no-quirks mode).
pub(super) fn closes_p(name: &str) -> bool {
    matches!(
        name,
        "address"
            | "article"
            | "aside"
            | "blockquote"
            | "center"
            | "details"
            | "dialog"
            | "dir"
            | "div"
            | "dl"
            | "fieldset"
            | "figcaption"
            | "figure"
            | "footer"
            | "header"
            | "hgroup"
            | "main"
            | "menu"
            | "nav"
            | "ol"
            | "p"
            | "search"
            | "section"
            | "summary"
            | "ul"
            | "h1"
            | "h2"
            | "h3"
            | "h4"
            | "h5"
            | "h6"
            | "pre"
            | "listing"
            | "form"
            | "hr"
            | "xmp"
            | "li"
            | "dd"
            | "dt"
    )
}

/// HTML start tags that end SVG/MathML content ("breakout" tags; `font`
/// breaks out only with some attributes, but counting it always as one can
/// only make the estimate deeper).
pub(super) fn breaks_out_of_foreign(name: &str) -> bool {
    matches!(
        name,
        "b" | "big"
            | "blockquote"
            | "body"
            | "br"
            | "center"
            | "code"
            | "dd"
            | "div"
            | "dl"
            | "dt"
            | "em"
            | "embed"
            | "h1"
            | "h2"
            | "h3"
            | "h4"
            | "h5"
            | "h6"
            | "head"
            | "hr"
            | "i"
            | "img"
            | "li"
            | "listing"
            | "menu"
            | "meta"
            | "nobr"
            | "ol"
            | "p"
            | "pre"
            | "ruby"
            | "s"
            | "small"
            | "span"
            | "strong"
            | "strike"
            | "sub"
            | "sup"
            | "table"
            | "tt"
            | "u"
            | "ul"
            | "var"
            | "font"
    )
}

/// SVG and MathML elements whose children are parsed as HTML.
pub(super) fn is_integration_point(name: &str) -> bool {
    matches!(
        name,
        "foreignobject" | "desc" | "title" | "annotation-xml" | "mi" | "mo" | "mn" | "ms" | "mtext"
    )
}
