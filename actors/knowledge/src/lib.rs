//! x
pub use bm25;
