//! A [`SafeClient`] built on first use.
//!
//! Building a client costs a few milliseconds (TLS roots are loaded), and a process that may never
//! fetch anything (`portico mcp` answering an IDE's `initialize`) should not pay that at start.

use std::sync::{Arc, OnceLock};

use crate::{NetError, SafeClient};

type Make = Box<dyn Fn() -> Result<SafeClient, NetError> + Send + Sync>;

/// A [`SafeClient`] made by `make` the first time it is needed, then shared. Cheap to clone.
#[derive(Clone)]
pub struct LazyClient {
    inner: Arc<Inner>,
}

struct Inner {
    cell: OnceLock<Result<SafeClient, String>>,
    make: Make,
}

impl std::fmt::Debug for LazyClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LazyClient")
            .field("built", &self.inner.cell.get().is_some())
            .finish()
    }
}

impl LazyClient {
    pub fn new(make: impl Fn() -> Result<SafeClient, NetError> + Send + Sync + 'static) -> Self {
        LazyClient {
            inner: Arc::new(Inner {
                cell: OnceLock::new(),
                make: Box::new(make),
            }),
        }
    }

    /// A client that is already built.
    pub fn ready(client: SafeClient) -> Self {
        let lazy = LazyClient::new(|| unreachable!("a ready client is never built again"));
        let _ = lazy.inner.cell.set(Ok(client));
        lazy
    }

    /// The client, building it now if this is the first use. A build failure is kept and returned
    /// to every caller as its message.
    pub fn get(&self) -> Result<SafeClient, String> {
        self.inner
            .cell
            .get_or_init(|| (self.inner.make)().map_err(|e| e.to_string()))
            .clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::NetPolicy;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn builds_once_on_first_use() {
        let builds = Arc::new(AtomicUsize::new(0));
        let counter = builds.clone();
        let lazy = LazyClient::new(move || {
            counter.fetch_add(1, Ordering::SeqCst);
            SafeClient::new(NetPolicy::public_only())
        });
        assert_eq!(
            builds.load(Ordering::SeqCst),
            0,
            "nothing is built up front"
        );
        let copy = lazy.clone();
        assert!(lazy.get().is_ok());
        assert!(copy.get().is_ok());
        assert_eq!(builds.load(Ordering::SeqCst), 1);
        assert!(
            LazyClient::ready(SafeClient::new(NetPolicy::public_only()).unwrap())
                .get()
                .is_ok()
        );
    }
}
