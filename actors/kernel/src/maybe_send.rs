//! `MaybeSend`/`MaybeSync`: `Send`/`Sync` natively, nothing on wasm32, so that
//! shared code runs on tokio's threads and in a single-threaded browser tab.

use std::future::Future;
use std::pin::Pin;

#[cfg(not(target_arch = "wasm32"))]
mod imp {
    /// `Send` natively; no bound on wasm32.
    pub trait MaybeSend: Send {}
    impl<T: Send + ?Sized> MaybeSend for T {}
    /// `Sync` natively; no bound on wasm32.
    pub trait MaybeSync: Sync {}
    impl<T: Sync + ?Sized> MaybeSync for T {}
}

#[cfg(target_arch = "wasm32")]
mod imp {
    /// `Send` natively; no bound on wasm32.
    pub trait MaybeSend {}
    impl<T: ?Sized> MaybeSend for T {}
    /// `Sync` natively; no bound on wasm32.
    pub trait MaybeSync {}
    impl<T: ?Sized> MaybeSync for T {}
}

pub use imp::{MaybeSend, MaybeSync};

/// A boxed future that is `Send` natively and unconstrained on wasm32.
#[cfg(not(target_arch = "wasm32"))]
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;
/// A boxed future that is `Send` natively and unconstrained on wasm32.
#[cfg(target_arch = "wasm32")]
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + 'a>>;

/// Box a future with the platform's `MaybeSend` bound.
pub fn boxed<'a, T>(fut: impl Future<Output = T> + MaybeSend + 'a) -> BoxFuture<'a, T> {
    Box::pin(fut)
}
