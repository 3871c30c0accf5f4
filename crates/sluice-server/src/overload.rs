//! What the gateway knows of its own load, beside the listener's connections: the counters of
//! the overload actions, the open connections (the listener writes them), the resident memory
//! against `max_memory_mb` (sampled from `/proc/self/statm` on a timer, never per request),
//! and the requests in flight per principal against `max_inflight_per_principal`.
//!
//! Free when unused: a request reads the ceiling's flag (one atomic load) only when
//! `max_memory_mb` is set, and takes a place per principal only when
//! `max_inflight_per_principal` is set and the request has a principal.

use foldhash::HashMap;
use parking_lot::Mutex;
use sluice_config::Settings;
use sluice_core::worker::Sharded;
use sluice_telemetry::{Action, OverloadActions, OverloadCounts};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// How often the resident memory is read while `max_memory_mb` is set.
pub(crate) const SAMPLE_EVERY: Duration = Duration::from_millis(250);

/// The gateway's load and the actions it took (one per runtime).
#[derive(Default)]
pub(crate) struct Overload {
    /// Each action's count.
    pub(crate) actions: OverloadActions,
    /// Connections open on the MCP listener (written by its accept loop and connections).
    pub(crate) open: AtomicUsize,
    /// Open connections asked to close at the cap and not closed yet (they make room for the
    /// connections served meanwhile).
    pub(crate) shedding: AtomicUsize,
    /// Resident memory at the last sample, bytes (0: not sampled).
    resident: AtomicU64,
    /// Past `max_memory_mb` at the last sample.
    over_memory: AtomicBool,
    /// Requests in flight per principal (`kind:id`), when `max_inflight_per_principal` is set.
    inflight: Sharded<Mutex<HashMap<String, u64>>>,
}

impl Overload {
    /// Count one action.
    pub(crate) fn count(&self, action: Action) {
        self.actions.count(action);
    }

    /// Are the open connections at or past the overload threshold of `settings`?
    /// Connections asked to close and not closed yet do not count.
    pub(crate) fn pressed(&self, settings: &Settings) -> bool {
        let threshold = settings.overload.threshold(settings.max_connections);
        let open = self.open.load(Ordering::SeqCst);
        open.saturating_sub(self.shedding.load(Ordering::SeqCst)) as u64 >= threshold
    }

    /// Take one connection out of the count under overload, for a connection about to close
    /// on the overload idle timeout: true (and one more in `shedding`, which its owner takes
    /// off when it closes) while the open connections are still at the threshold. Connections
    /// that reach the timeout together close only as many as bring the count under it.
    pub(crate) fn claim_close(&self, settings: &Settings) -> bool {
        let threshold = settings.overload.threshold(settings.max_connections);
        let mut shedding = self.shedding.load(Ordering::SeqCst);
        loop {
            let open = self.open.load(Ordering::SeqCst);
            if (open.saturating_sub(shedding) as u64) < threshold {
                return false;
            }
            match self.shedding.compare_exchange(
                shedding,
                shedding + 1,
                Ordering::SeqCst,
                Ordering::SeqCst,
            ) {
                Ok(_) => return true,
                Err(now) => shedding = now,
            }
        }
    }

    /// Is the resident memory past the ceiling (as last sampled)?
    pub(crate) fn over_memory(&self) -> bool {
        self.over_memory.load(Ordering::Relaxed)
    }

    /// Record a sample: `resident` bytes against a ceiling of `max` bytes (None: no ceiling).
    /// True when it is past the ceiling.
    pub(crate) fn sampled(&self, resident: u64, max: Option<u64>) -> bool {
        self.resident.store(resident, Ordering::Relaxed);
        let over = max.is_some_and(|m| resident > m);
        self.over_memory.store(over, Ordering::Relaxed);
        over
    }

    /// The counts and the state now (under `settings`), for `/metrics` and the admin page.
    pub(crate) fn counts(&self, settings: &Settings) -> OverloadCounts {
        let resident = self.resident.load(Ordering::Relaxed);
        OverloadCounts {
            open_connections: self.open.load(Ordering::Relaxed) as u64,
            active: self.pressed(settings),
            resident_bytes: (resident != 0).then_some(resident),
            over_memory: self.over_memory(),
            ..self.actions.snapshot()
        }
    }

    /// Take a place for a request of `principal` under a cap of `max` in flight; None (counted)
    /// when the principal already has `max` in flight.
    pub(crate) fn begin_request(self: &Arc<Self>, principal: &str, max: u64) -> Option<Inflight> {
        {
            let mut shard = self.inflight.of(principal).lock();
            match shard.get_mut(principal) {
                Some(n) if *n >= max => {
                    drop(shard);
                    self.count(Action::InflightRefused);
                    return None;
                }
                Some(n) => *n += 1,
                None => {
                    shard.insert(principal.to_string(), 1);
                }
            }
        }
        Some(Inflight {
            overload: self.clone(),
            principal: principal.to_string(),
        })
    }

    /// Requests `principal` has in flight now.
    #[cfg(test)]
    pub(crate) fn inflight_of(&self, principal: &str) -> u64 {
        let shard = self.inflight.of(principal).lock();
        shard.get(principal).copied().unwrap_or(0)
    }
}

/// A request's place under `max_inflight_per_principal`, given back when dropped.
pub(crate) struct Inflight {
    overload: Arc<Overload>,
    principal: String,
}

impl Drop for Inflight {
    fn drop(&mut self) {
        let mut shard = self.overload.inflight.of(&self.principal).lock();
        if let Some(n) = shard.get_mut(&self.principal) {
            *n -= 1;
            if *n == 0 {
                shard.remove(&self.principal);
            }
        }
    }
}

/// The resident memory of this process, bytes (`/proc/self/statm`'s second field, in pages
/// of 4 KiB, the page size of every platform Sluice is built for); None where it cannot be read.
pub(crate) fn resident_bytes() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = text.split_whitespace().nth(1)?.parse().ok()?;
    Some(pages * 4096)
}

/// How long a client should wait before trying again past the memory ceiling, seconds.
pub(crate) const MEMORY_RETRY_AFTER_SECS: u64 = 1;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_principal_gets_max_places_and_each_comes_back_when_dropped() {
        let o = Arc::new(Overload::default());
        let a = o.begin_request("token:a", 2).expect("first");
        let b = o.begin_request("token:a", 2).expect("second");
        assert!(o.begin_request("token:a", 2).is_none(), "a third past 2");
        let other = o.begin_request("token:b", 2).expect("another principal");
        assert_eq!(o.actions.get(Action::InflightRefused), 1);
        drop(a);
        assert_eq!(o.inflight_of("token:a"), 1);
        let c = o.begin_request("token:a", 2).expect("a place came back");
        drop((b, c, other));
        assert_eq!(o.inflight_of("token:a"), 0);
        assert!(o.inflight.all().all(|s| s.lock().is_empty()));
    }

    #[test]
    fn pressure_and_memory_follow_what_is_recorded() {
        let o = Overload::default();
        let settings = Settings {
            max_connections: 4,
            ..Settings::default()
        };
        o.open.store(2, Ordering::Relaxed);
        assert!(!o.pressed(&settings), "2 of 4, under 80%");
        o.open.store(4, Ordering::Relaxed);
        assert!(o.pressed(&settings));
        assert!(!o.sampled(10, None));
        assert!(o.sampled(10, Some(5)));
        assert!(o.over_memory());
        let c = o.counts(&settings);
        assert_eq!(
            (c.resident_bytes, c.active, c.over_memory),
            (Some(10), true, true)
        );
        assert!(resident_bytes().is_some_and(|b| b > 0));
    }

    #[test]
    fn connections_idle_together_claim_only_enough_closes_to_end_the_overload() {
        let o = Overload::default();
        let settings = Settings {
            max_connections: 4,
            ..Settings::default()
        };
        // 80% of 4 is 3: with 4 open, two closes bring the count under it.
        o.open.store(4, Ordering::SeqCst);
        assert!(o.claim_close(&settings));
        assert!(o.pressed(&settings), "3 counted: still at the threshold");
        assert!(o.claim_close(&settings));
        assert!(!o.pressed(&settings), "2 counted");
        assert!(!o.claim_close(&settings), "a third close is not needed");
        assert_eq!(o.shedding.load(Ordering::SeqCst), 2);
    }
}
