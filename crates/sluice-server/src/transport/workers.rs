//! The serving threads of the MCP listener: one single-threaded tokio runtime per thread, each
//! running the connections handed to it from accept to close, so a call's tasks, timers and
//! upstream connections stay on the thread that read it (no task moves between CPUs, no
//! worker wakes another to steal it).
//!
//! The accept loop (`listener.rs`) gives each new connection to the thread serving the fewest.
//! Everything a connection spawns (a request's work, a hook process, a per-session upstream)
//! runs on its thread; what the main runtime runs (shared upstreams, the admin listener, the
//! watchers) is reached through channels as before. The threads outlive the drain: they stop
//! at [`Workers::stop`], after the gateway's shutdown has ended the sessions whose tasks they
//! run.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::runtime::Handle;
use tokio::sync::oneshot;

/// How long a stopping thread waits for its blocking tasks.
const STOP_WITHIN: Duration = Duration::from_secs(1);

/// The serving threads.
pub struct Workers {
    threads: Vec<Worker>,
}

struct Worker {
    handle: Handle,
    /// Connections this thread serves now.
    open: Arc<AtomicUsize>,
    stop: oneshot::Sender<()>,
    stopped: oneshot::Receiver<()>,
}

/// A place on one serving thread, given back when its connection ends.
pub struct Place {
    /// The thread's runtime.
    pub handle: Handle,
    open: Arc<AtomicUsize>,
}

impl Drop for Place {
    fn drop(&mut self) {
        self.open.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Workers {
    /// Start `n` serving threads (at least one).
    pub fn start(n: usize) -> std::io::Result<Workers> {
        let mut threads = Vec::with_capacity(n.max(1));
        for i in 0..n.max(1) {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            let handle = rt.handle().clone();
            let (stop, stop_rx) = oneshot::channel::<()>();
            let (stopped_tx, stopped) = oneshot::channel::<()>();
            let number = u32::try_from(i + 1).unwrap_or(u32::MAX);
            std::thread::Builder::new()
                .name(format!("sluice-serve-{number}"))
                .spawn(move || {
                    sluice_core::worker::mark(number);
                    rt.block_on(async move {
                        let _ = stop_rx.await;
                    });
                    rt.shutdown_timeout(STOP_WITHIN);
                    let _ = stopped_tx.send(());
                })?;
            threads.push(Worker {
                handle,
                open: Arc::new(AtomicUsize::new(0)),
                stop,
                stopped,
            });
        }
        Ok(Workers { threads })
    }

    /// A place on the thread serving the fewest connections (the first of equals).
    pub fn pick(&self) -> Place {
        let w = self
            .threads
            .iter()
            .min_by_key(|w| w.open.load(Ordering::Relaxed))
            .expect("at least one serving thread");
        w.open.fetch_add(1, Ordering::Relaxed);
        Place {
            handle: w.handle.clone(),
            open: w.open.clone(),
        }
    }

    /// Stop every thread: the tasks still on them are dropped (bounded by a second each for
    /// their blocking work).
    pub async fn stop(self) {
        let mut waits = Vec::with_capacity(self.threads.len());
        for w in self.threads {
            let _ = w.stop.send(());
            waits.push(w.stopped);
        }
        for w in waits {
            let _ = tokio::time::timeout(STOP_WITHIN * 2, w).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn places_go_to_the_least_loaded_thread_and_tasks_run_there() {
        let workers = Workers::start(2).expect("start");
        assert_eq!(workers.threads.len(), 2);
        let a = workers.pick();
        let b = workers.pick();
        // Two places: one on each thread.
        let on = |p: &Place| {
            let (tx, rx) = std::sync::mpsc::channel();
            p.handle.spawn(async move {
                let _ = tx.send((
                    std::thread::current().name().map(str::to_string),
                    sluice_core::worker::current(),
                ));
            });
            rx.recv_timeout(Duration::from_secs(5)).expect("ran")
        };
        let (name_a, n_a) = on(&a);
        let (name_b, n_b) = on(&b);
        assert_eq!(name_a.as_deref(), Some("sluice-serve-1"));
        assert_eq!(n_a, 1);
        assert_eq!(name_b.as_deref(), Some("sluice-serve-2"));
        assert_eq!(n_b, 2);
        // Thread 1 freed: the next place is on it again.
        drop(a);
        let c = workers.pick();
        assert_eq!(on(&c).1, 1);
        drop((b, c));
        workers.stop().await;
    }

    #[tokio::test]
    async fn stopping_drops_the_tasks_left_on_the_threads() {
        let workers = Workers::start(1).expect("start");
        let place = workers.pick();
        let (tx, rx) = oneshot::channel::<()>();
        // A task that never ends: its sender is dropped with it when its thread stops.
        place.handle.spawn(async move {
            let _keep = tx;
            std::future::pending::<()>().await;
        });
        workers.stop().await;
        assert!(rx.await.is_err(), "the task was dropped");
    }
}
