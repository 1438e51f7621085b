//! The exact shape of a parsed document: its element depth, element count
//! and the sum of all elements' depths, measured by an iterative walk (no recursion, whatever the depth)
//! over the tree the parser built, and refused over the limits before
//! readability (which recurses over the tree) sees it.
//!
//! The pre-scan ([`crate::prescan`](mod@crate::prescan)) bounds what the parser may build; this
//! walk checks what it did build, so readability's recursion is bounded by
//! the limits even where the pre-scan's estimate were wrong.

use dom_query::{Document, NodeRef};

use crate::{HtmlLimits, HtmlRefusal};

/// The measured shape of a parsed document.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shape {
    /// Elements on the longest path from the root, `html` counted as 1.
    pub depth: usize,
    /// Element nodes in the document.
    pub elements: usize,
    /// The sum of every element's depth.
    pub depth_sum: usize,
}

/// Walk `document` in document order without recursion: down to the first
/// child, else across to the next sibling, else up until a sibling exists.
/// Stops at the first element over a limit.
pub fn measure(document: &Document, limits: &HtmlLimits) -> Result<Shape, HtmlRefusal> {
    let root = document.root();
    let mut shape = Shape {
        depth: 0,
        elements: 0,
        depth_sum: 0,
    };
    // Element depth of `node` (the root document node is 0).
    let mut depth = 0usize;
    let mut node: Option<NodeRef<'_>> = root.first_child();
    let mut ancestors_are_elements: Vec<bool> = Vec::new();
    while let Some(current) = node {
        let is_element = current.is_element();
        if is_element {
            shape.elements += 1;
            if shape.elements > limits.max_elements {
                return Err(HtmlRefusal::TooManyElements {
                    limit: limits.max_elements,
                });
            }
            let here = depth + 1;
            shape.depth = shape.depth.max(here);
            if here > limits.max_depth {
                return Err(HtmlRefusal::TooDeep {
                    limit: limits.max_depth,
                });
            }
            shape.depth_sum = shape.depth_sum.saturating_add(here);
            if shape.depth_sum > limits.max_depth_sum {
                return Err(HtmlRefusal::TooMuchNesting {
                    limit: limits.max_depth_sum,
                });
            }
        }
        if let Some(child) = current.first_child() {
            ancestors_are_elements.push(is_element);
            if is_element {
                depth += 1;
            }
            node = Some(child);
            continue;
        }
        let mut up = Some(current);
        node = None;
        while let Some(at) = up {
            if let Some(sibling) = at.next_sibling() {
                node = Some(sibling);
                break;
            }
            // Back to the parent; stop at the root.
            match ancestors_are_elements.pop() {
                Some(was_element) => {
                    if was_element {
                        depth -= 1;
                    }
                    up = at.parent();
                }
                None => up = None,
            }
        }
    }
    Ok(shape)
}
