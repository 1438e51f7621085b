//! The single escape hatch of the URL policy: a marker that lets a test's own
//! loopback servers through. Compiled only in this crate's tests and under
//! the `test-loopback` feature, which only dev-dependencies enable.

/// Permission to let exact loopback socket addresses through the URL policy.
///
/// # Escape hatch
///
/// This is the only way to widen [`crate::UrlPolicy::public_web`], and
/// [`TestLoopback::for_tests_only`] is the only way to make one. It exists
/// so that tests can read from servers they start on 127.0.0.1; it does not
/// exist in normal builds, and no configuration or model input can produce
/// it. A grep for `TestLoopback` finds every place where it is used.
#[derive(Debug, Clone, Copy)]
pub struct TestLoopback(());

impl TestLoopback {
    /// Make the marker. Call it only in test code.
    pub fn for_tests_only() -> Self {
        TestLoopback(())
    }
}
