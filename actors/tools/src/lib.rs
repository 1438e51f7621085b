//! `agent-tools`: the tool registry, discovery, the invocation pipeline and
//! result envelope, HTTP plugins, the tool-author API, and the built-in tools.

pub mod builtin;
