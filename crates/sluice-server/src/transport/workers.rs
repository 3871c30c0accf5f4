//! The serving threads of the MCP listener: one single-threaded tokio runtime per thread, each
//! running the connections handed to it from accept to close, so a call's tasks, timers and
//! upstream connections stay on the thread that read it (no task moves between CPUs, no
//! worker wakes another to steal it).
//!
//! The accept loop (`listener.rs`) gives each new connection to the thread serving the fewest.
//! With `--pin` and one thread per CPU the process may use, thread `i` is pinned to the `i`-th
//! of those CPUs: two serving threads left on one CPU take turns in scheduler slices (about
//! 4 ms), and the connections of the one waiting stall for that long. Not by default: a pinned
//! thread cannot move away from a CPU that a busy upstream (a stdio child, a Node server on the
//! same machine) holds, which costs far more than the rare stall (see docs/deployment.md).
//! Everything a connection spawns (a request's work, a hook process, a per-session upstream)
//! runs on its thread, and so do the upstreams' supervisors (`control.rs::start_slots`, one
//! upstream after another in turn, through [`Workers::handles`]); what the main runtime runs
//! (the accept loop, the admin listener, the watchers) is reached through channels. The threads outlive the drain: they stop
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
pub(crate) struct Workers {
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
pub(crate) struct Place {
    /// The thread's runtime.
    pub(crate) handle: Handle,
    open: Arc<AtomicUsize>,
}

impl Drop for Place {
    fn drop(&mut self) {
        self.open.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Workers {
    /// Start `n` serving threads (at least one); with `pin`, and `n` equal to the number of
    /// CPUs this process may use, each on a CPU of its own.
    pub(crate) fn start(n: usize, pin: bool) -> std::io::Result<Workers> {
        let n = n.max(1);
        let cpus = allowed_cpus();
        let pinned = pin && cpus.len() == n;
        if pinned {
            tracing::debug!(?cpus, "serving threads pinned, one per CPU");
        }
        let mut threads = Vec::with_capacity(n);
        for i in 0..n {
            let cpu = cpus.get(i).copied().filter(|_| pinned);
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
                    if let Some(cpu) = cpu {
                        pin_to(cpu);
                    }
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

    /// Each thread's runtime, in thread order.
    pub(crate) fn handles(&self) -> Vec<Handle> {
        self.threads.iter().map(|w| w.handle.clone()).collect()
    }

    /// A place on the thread serving the fewest connections (the first of equals).
    pub(crate) fn pick(&self) -> Place {
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
    pub(crate) async fn stop(self) {
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

/// One serving thread per CPU, or `TOKIO_WORKER_THREADS` (as tokio sizes its runtime).
pub fn default_count() -> usize {
    std::env::var("TOKIO_WORKER_THREADS")
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .filter(|&n: &usize| n > 0)
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// The CPUs this process may run on, in order (empty where that cannot be read).
fn allowed_cpus() -> Vec<usize> {
    #[cfg(target_os = "linux")]
    {
        use nix::sched::{sched_getaffinity, CpuSet};
        use nix::unistd::Pid;
        if let Ok(set) = sched_getaffinity(Pid::from_raw(0)) {
            return (0..CpuSet::count())
                .filter(|&i| set.is_set(i).unwrap_or(false))
                .collect();
        }
    }
    Vec::new()
}

/// Keep the calling thread on `cpu` (a failure leaves it where the kernel puts it).
fn pin_to(cpu: usize) {
    #[cfg(target_os = "linux")]
    {
        use nix::sched::{sched_setaffinity, CpuSet};
        use nix::unistd::Pid;
        let mut set = CpuSet::new();
        let done = set
            .set(cpu)
            .and_then(|()| sched_setaffinity(Pid::from_raw(0), &set));
        if let Err(e) = done {
            tracing::debug!(cpu, "cannot pin a serving thread: {e}");
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = cpu;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn places_go_to_the_least_loaded_thread_and_tasks_run_there() {
        let workers = Workers::start(2, false).expect("start");
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
        let workers = Workers::start(1, false).expect("start");
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

    /// The CPUs the thread running on `place` may use.
    fn cpus_of(place: &Place) -> Vec<usize> {
        let (tx, rx) = std::sync::mpsc::channel();
        place.handle.spawn(async move {
            let _ = tx.send(allowed_cpus());
        });
        rx.recv_timeout(Duration::from_secs(5)).expect("ran")
    }

    /// One thread per allowed CPU: each is pinned to its own, in order; unpinned (or fewer
    /// threads than CPUs), every thread may use them all.
    #[tokio::test]
    async fn one_thread_per_cpu_is_pinned_one_to_each() {
        let cpus = allowed_cpus();
        assert!(!cpus.is_empty(), "the process's CPUs are readable");
        let workers = Workers::start(cpus.len(), true).expect("start");
        let places: Vec<Place> = cpus.iter().map(|_| workers.pick()).collect();
        let on: Vec<Vec<usize>> = places.iter().map(cpus_of).collect();
        let expected: Vec<Vec<usize>> = cpus.iter().map(|&c| vec![c]).collect();
        assert_eq!(on, expected);
        drop(places);
        workers.stop().await;

        let workers = Workers::start(cpus.len(), false).expect("start");
        let place = workers.pick();
        assert_eq!(cpus_of(&place), cpus);
        drop(place);
        workers.stop().await;
        if cpus.len() > 1 {
            let workers = Workers::start(cpus.len() - 1, true).expect("start");
            let place = workers.pick();
            assert_eq!(cpus_of(&place), cpus, "fewer threads than CPUs: not pinned");
            drop(place);
            workers.stop().await;
        }
    }
}
