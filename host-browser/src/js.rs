//! Small bridges to the browser: the global scope and JS error text, the
//! IndexedDB store's (one owner), re-exported for the rest of this host.

pub use agent_store_indexeddb::{describe, global_property};
