//! Live traffic: every recorded exchange broadcast to whoever watches (the admin page's Live
//! traffic), and a count of watchers a call only reads.

use sluice_telemetry::Exchange;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use tokio::sync::broadcast;

/// Live traffic: a broadcast of every recorded exchange, and how many watch it, in a count
/// that a call only reads (a broadcast channel's own count is behind its lock).
pub(crate) struct Traffic {
    tx: broadcast::Sender<Arc<Exchange>>,
    watchers: Arc<AtomicUsize>,
}

impl Traffic {
    /// A channel keeping the last `capacity` exchanges for slow watchers.
    pub(crate) fn new(capacity: usize) -> Traffic {
        Traffic {
            tx: broadcast::channel(capacity).0,
            watchers: Arc::new(AtomicUsize::new(0)),
        }
    }

    /// Does anyone watch?
    pub(crate) fn watched(&self) -> bool {
        self.watchers.load(Ordering::Relaxed) > 0
    }

    /// Watch from now on, until the watcher is dropped.
    pub(crate) fn subscribe(&self) -> Watcher {
        self.watchers.fetch_add(1, Ordering::Relaxed);
        Watcher {
            rx: self.tx.subscribe(),
            watchers: self.watchers.clone(),
        }
    }

    pub(crate) fn send(&self, exchange: Arc<Exchange>) {
        let _ = self.tx.send(exchange);
    }
}

/// One watcher of the live traffic.
pub(crate) struct Watcher {
    rx: broadcast::Receiver<Arc<Exchange>>,
    watchers: Arc<AtomicUsize>,
}

impl Watcher {
    /// The next exchange (`Lagged`: this many were missed).
    pub(crate) async fn recv(&mut self) -> Result<Arc<Exchange>, broadcast::error::RecvError> {
        self.rx.recv().await
    }

    /// The next exchange if one is there (the tests').
    #[cfg(test)]
    pub(crate) fn try_recv(&mut self) -> Result<Arc<Exchange>, broadcast::error::TryRecvError> {
        self.rx.try_recv()
    }
}

impl Drop for Watcher {
    fn drop(&mut self) {
        self.watchers.fetch_sub(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Live traffic counts its watchers as they come and go.
    #[test]
    fn traffic_is_watched_while_a_watcher_lives() {
        let traffic = Traffic::new(4);
        assert!(!traffic.watched());
        let one = traffic.subscribe();
        let two = traffic.subscribe();
        drop(one);
        assert!(traffic.watched(), "one watcher is left");
        drop(two);
        assert!(!traffic.watched());
    }
}
