//! The storage conformance suite.
