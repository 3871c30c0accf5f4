//! The gateway's state, in two parts. What is in force: the [`Snapshot`] built from one `Config`
//! (settings, slots, catalog, hook chain, access rules, authenticator, audit log), immutable
//! once built and swapped whole, so a request that loads it once sees one consistent
//! configuration from start to end. What is happening: the [`Runtime`] (sessions, the call
//! table, listen streams, traffic, telemetry, reload statistics, shutdown), which no reload
//! replaces.

use crate::calls::CallTable;
use crate::catalog::Catalog;
use crate::listeners::Listeners;
use crate::session::Session;
pub(crate) use crate::traffic::Traffic;
#[cfg(test)]
pub(crate) use crate::traffic::Watcher;
use arc_swap::ArcSwap;
use foldhash::{HashMap, HashSet};
use parking_lot::Mutex;
use sluice_auth::{Authenticator, Policy};
use sluice_config::{Config, Settings};
use sluice_core::worker::PerThread;
use sluice_hooks::Chain;
use sluice_telemetry::{Audit, Caller, Ended, Exchange, Telemetry};
use sluice_upstream::{Slot, SlotEnv, Timing};
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

/// The whole state: what is in force, and what is happening.
pub(crate) struct State {
    snapshot: ArcSwap<Snapshot>,
    /// Each serving thread's handle on the snapshot in force (see [`State::held`]); emptied
    /// when another is put in force, so none keeps an old one alive.
    held: PerThread<Mutex<Option<Held>>>,
    /// What is happening.
    pub(crate) rt: Runtime,
}

/// The snapshot in force, as a serving thread holds it: an `Arc` of the thread's own around
/// the shared one, so a request's clones and drops write a count only that thread writes
/// (the shared `Arc`'s count is written by every thread's requests).
#[derive(Clone)]
// Not redundant: the outer `Arc` is the thread's own, the point of the type.
#[allow(clippy::redundant_allocation)]
pub(crate) struct Held(Arc<Arc<Snapshot>>);

impl Held {
    /// A handle of a request's own on `snapshot` (an endpoint's, served at `/mcp/<name>`).
    pub(crate) fn of(snapshot: Arc<Snapshot>) -> Held {
        Held(Arc::new(snapshot))
    }
}

impl std::ops::Deref for Held {
    type Target = Snapshot;
    fn deref(&self) -> &Snapshot {
        &self.0
    }
}

impl State {
    /// A state holding `snapshot`.
    pub(crate) fn new(snapshot: Snapshot, rt: Runtime) -> State {
        State {
            snapshot: ArcSwap::from_pointee(snapshot),
            held: PerThread::default(),
            rt,
        }
    }

    /// [`State::snapshot`], through this thread's handle (the hot path's way: see [`Held`]).
    pub(crate) fn held(&self) -> Held {
        let current = self.snapshot.load();
        let mut mine = self.held.mine().lock();
        if let Some(held) = &*mine {
            if Arc::ptr_eq(&*held.0, &*current) {
                return held.clone();
            }
        }
        let held = Held(Arc::new(arc_swap::Guard::into_inner(current)));
        *mine = Some(held.clone());
        held
    }

    /// What is in force now: a request loads it once and passes it down.
    pub(crate) fn snapshot(&self) -> Arc<Snapshot> {
        self.snapshot.load_full()
    }

    /// Put a new snapshot in force (callers hold `rt.swapping`).
    pub(crate) fn store(&self, snapshot: Snapshot) {
        self.store_arc(Arc::new(snapshot));
    }

    /// [`State::store`], of a snapshot already shared.
    pub(crate) fn store_arc(&self, snapshot: Arc<Snapshot>) {
        self.snapshot.store(snapshot);
        for held in self.held.mine_first() {
            let old = held.lock().take();
            // Dropped unlocked: it may be the last handle on the old snapshot.
            drop(old);
        }
    }

    /// Is anyone recording exchanges (the audit log, the admin listener's counters, or a live
    /// traffic subscriber)?
    pub(crate) fn observed(&self, snap: &Snapshot) -> bool {
        snap.audit.enabled() || self.rt.traffic.watched() || self.rt.counted.get().is_some()
    }

    /// Record one exchange (`task`: the gateway id of a task it created or collected): to the
    /// audit log, the admin listener's counters and live traffic subscribers. Only a call's
    /// finish calls it (`proxy/call.rs`).
    pub(crate) fn record(
        &self,
        snap: &Snapshot,
        session: &Session,
        call: Ended<'_>,
        task: Option<&str>,
    ) {
        let watchers = self.rt.traffic.watched();
        let counted = self.rt.counted.get();
        if !snap.audit.enabled() && !watchers && counted.is_none() {
            return;
        }
        let principal = session.principal();
        let caller = Caller {
            session: &session.id,
            client: session.init.client_info.get("name"),
            principal: principal.as_ref().map(|p| p.id.as_str()),
        };
        let mut exchange = Exchange::new(caller, call);
        exchange.task = task.map(str::to_string);
        exchange.endpoint = snap.endpoint_name().map(str::to_string);
        snap.audit.write(&exchange);
        if !watchers && counted.is_none() {
            return;
        }
        let exchange = Arc::new(exchange);
        if let Some(metrics) = counted {
            metrics.observe(exchange.clone());
        }
        if watchers {
            self.rt.traffic.send(exchange);
        }
    }
}

/// What is happening: the live tables and channels of the running gateway.
pub(crate) struct Runtime {
    /// Client sessions by id.
    sessions: Sessions,
    /// Calls in flight upstream.
    calls: CallTable,
    /// `subscriptions/listen` streams of 2026-07-28 clients.
    listeners: Listeners,
    /// Live traffic: every recorded exchange (serialized, the audit line's shape).
    traffic: Traffic,
    /// The admin listener's counters, once it runs: every recorded exchange is counted in
    /// the thread that served it (no hand-over to another task, no wake-up per call).
    counted: std::sync::OnceLock<Arc<sluice_telemetry::Metrics>>,
    /// Lists that changed (the notifications to send), for the inbound driver to announce.
    changes: mpsc::UnboundedSender<Changed>,
    /// The trace exporter (None: tracing is off; `sluice.json` changes need a restart).
    telemetry: Option<Arc<Telemetry>>,
    /// Cancelled when the gateway shuts down.
    shutdown: CancellationToken,
    /// Cancelled when the HTTP listener starts draining (SIGTERM): GET and listen streams end,
    /// calls in flight finish; `shutdown` follows after the drain.
    draining: CancellationToken,
    /// Results of live reloads of the tree (for metrics and the admin page).
    reloads: ReloadStats,
    /// The address the MCP listener is bound to (the default resource URI names it).
    bound: Mutex<Option<String>>,
    /// What every slot is given (its event channel, timing, shutdown).
    slot_env: SlotEnv,
    /// The timing settings slots read (updated by a reload).
    timing: watch::Sender<Timing>,
    /// Serialises snapshot swaps (load, build, store).
    swapping: Mutex<()>,
    /// Serialises reloads.
    reloading: tokio::sync::Mutex<()>,
    /// Numbers catalogs (part of cursors).
    catalog_version: AtomicU64,
    /// Tasks clients created through the gateway (`proxy/tasks/table.rs`).
    tasks: crate::task_table::Tasks,
    /// This replica's part of a cluster (`cluster` in `sluice.json`; needs a restart).
    cluster: Option<Arc<crate::cluster::Cluster>>,
    /// The faces' one seam to scale-out: alone, or that cluster (`replicas/scale.rs`).
    scale: crate::scale::Scale,
    /// The serving threads' runtimes, when the MCP listener has them: upstream supervisors run
    /// on them (one upstream after another, in turn), so a call to a shared stdio upstream
    /// from a connection on the same thread never crosses to another.
    serving: std::sync::OnceLock<Vec<tokio::runtime::Handle>>,
    /// The gateway's load and the overload actions it took (`overload.rs`).
    overload: Arc<crate::overload::Overload>,
}

impl Runtime {
    /// The running tables and channels of a gateway being built: `changes` announces changed
    /// lists, `slot_env` is what every slot is given, `timing` the timing slots read; the rest
    /// start empty.
    pub(crate) fn new(
        changes: mpsc::UnboundedSender<Changed>,
        telemetry: Option<Arc<Telemetry>>,
        shutdown: CancellationToken,
        slot_env: SlotEnv,
        timing: watch::Sender<Timing>,
        cluster: Option<Arc<crate::cluster::Cluster>>,
    ) -> Runtime {
        Runtime {
            sessions: Sessions::default(),
            calls: Default::default(),
            listeners: Listeners::default(),
            traffic: Traffic::new(4096),
            counted: Default::default(),
            changes,
            telemetry,
            shutdown,
            draining: CancellationToken::new(),
            reloads: ReloadStats::default(),
            overload: Arc::default(),
            bound: Mutex::new(None),
            slot_env,
            timing,
            swapping: Mutex::new(()),
            reloading: tokio::sync::Mutex::new(()),
            catalog_version: AtomicU64::new(0),
            tasks: Default::default(),
            scale: crate::scale::Scale::of(cluster.clone()),
            cluster,
            serving: Default::default(),
        }
    }

    /// See the field `sessions`.
    pub(crate) fn sessions(&self) -> &Sessions {
        &self.sessions
    }

    /// See the field `calls`.
    pub(crate) fn calls(&self) -> &CallTable {
        &self.calls
    }

    /// See the field `listeners`.
    pub(crate) fn listeners(&self) -> &Listeners {
        &self.listeners
    }

    /// See the field `traffic`.
    pub(crate) fn traffic(&self) -> &Traffic {
        &self.traffic
    }

    /// See the field `counted`.
    pub(crate) fn counted(&self) -> &std::sync::OnceLock<Arc<sluice_telemetry::Metrics>> {
        &self.counted
    }

    /// See the field `changes`.
    pub(crate) fn changes(&self) -> &mpsc::UnboundedSender<Changed> {
        &self.changes
    }

    /// See the field `telemetry`.
    pub(crate) fn telemetry(&self) -> &Option<Arc<Telemetry>> {
        &self.telemetry
    }

    /// See the field `shutdown`.
    pub(crate) fn shutdown(&self) -> &CancellationToken {
        &self.shutdown
    }

    /// See the field `draining`.
    pub(crate) fn draining(&self) -> &CancellationToken {
        &self.draining
    }

    /// See the field `overload`.
    pub(crate) fn overload(&self) -> &Arc<crate::overload::Overload> {
        &self.overload
    }

    /// See the field `reloads`.
    pub(crate) fn reloads(&self) -> &ReloadStats {
        &self.reloads
    }

    /// See the field `bound`.
    pub(crate) fn bound(&self) -> &Mutex<Option<String>> {
        &self.bound
    }

    /// See the field `slot_env`.
    pub(crate) fn slot_env(&self) -> &SlotEnv {
        &self.slot_env
    }

    /// See the field `timing`.
    pub(crate) fn timing(&self) -> &watch::Sender<Timing> {
        &self.timing
    }

    /// See the field `swapping`.
    pub(crate) fn swapping(&self) -> &Mutex<()> {
        &self.swapping
    }

    /// See the field `reloading`.
    pub(crate) fn reloading(&self) -> &tokio::sync::Mutex<()> {
        &self.reloading
    }

    /// See the field `catalog_version`.
    pub(crate) fn catalog_version(&self) -> &AtomicU64 {
        &self.catalog_version
    }

    /// See the field `tasks`.
    pub(crate) fn tasks(&self) -> &crate::task_table::Tasks {
        &self.tasks
    }

    /// See the field `cluster`.
    pub(crate) fn cluster(&self) -> &Option<Arc<crate::cluster::Cluster>> {
        &self.cluster
    }

    /// How this gateway scales (what the faces call instead of asking for the cluster).
    pub(crate) fn scale(&self) -> &crate::scale::Scale {
        &self.scale
    }

    /// See the field `serving`.
    pub(crate) fn serving(&self) -> &std::sync::OnceLock<Vec<tokio::runtime::Handle>> {
        &self.serving
    }
}

/// Lists that changed: the notifications that say so, and the catalog version that changed them
/// (a session that began on that catalog or a later one has nothing to hear).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Changed {
    /// The catalog version the change produced.
    pub version: u64,
    /// `notifications/…/list_changed`, one per list (for `/mcp`'s sessions).
    pub lists: Vec<&'static str>,
    /// What changed for each endpoint's sessions, by endpoint name (an endpoint not named:
    /// nothing).
    pub endpoints: Vec<(String, Vec<&'static str>)>,
}

/// The registry of live client sessions: one table for all, and what each serving thread has
/// found in it, so that a request finds its session without the lock every thread takes.
#[derive(Default)]
pub(crate) struct Sessions {
    all: Mutex<HashMap<String, Arc<Session>>>,
    /// Sessions each thread has looked up (filled under `all`'s lock, and emptied of a session
    /// under it when the session is forgotten).
    seen: PerThread<Mutex<HashSet<ById>>>,
}

/// A session, found by its id.
struct ById(Arc<Session>);

impl std::borrow::Borrow<str> for ById {
    fn borrow(&self) -> &str {
        &self.0.id
    }
}

impl std::hash::Hash for ById {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.0.id.as_str().hash(state);
    }
}

impl PartialEq for ById {
    fn eq(&self, other: &ById) -> bool {
        self.0.id == other.0.id
    }
}

impl Eq for ById {}

/// A cap on live sessions that a new one would pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SessionCap {
    /// `max_sessions`: live sessions in all.
    Global(u64),
    /// `max_sessions_per_principal`: live sessions of the caller's principal.
    PerPrincipal(u64),
}

impl Sessions {
    /// Register a new session.
    pub(crate) fn add(&self, session: Arc<Session>) {
        self.all.lock().insert(session.id.clone(), session);
    }

    /// Would one more session of `principal` pass a cap? `per_principal` applies only to an
    /// authenticated principal (`None` is every unauthenticated client at once: the global cap
    /// bounds it).
    pub(crate) fn over_cap(
        &self,
        principal: Option<&sluice_core::Principal>,
        max: u64,
        per_principal: u64,
    ) -> Option<SessionCap> {
        cap_passed(&self.all.lock(), principal, max, per_principal)
    }

    /// Register a new session unless it would pass a cap (checked and added under one lock).
    pub(crate) fn try_add(
        &self,
        session: Arc<Session>,
        max: u64,
        per_principal: u64,
    ) -> Result<(), SessionCap> {
        let principal = session.principal();
        let mut sessions = self.all.lock();
        if let Some(cap) = cap_passed(&sessions, principal.as_deref(), max, per_principal) {
            return Err(cap);
        }
        sessions.insert(session.id.clone(), session);
        Ok(())
    }

    /// Register `session` unless one with its id is there already; the one registered.
    pub(crate) fn get_or_add(&self, session: Arc<Session>) -> Arc<Session> {
        self.all
            .lock()
            .entry(session.id.clone())
            .or_insert(session)
            .clone()
    }

    /// Find a live session: among those this thread has found before, else in the table.
    pub(crate) fn get(&self, id: &str) -> Option<Arc<Session>> {
        if let Some(s) = self.seen.mine().lock().get(id) {
            if !s.0.is_closed() {
                return Some(s.0.clone());
            }
        }
        let all = self.all.lock();
        let mut seen = self.seen.mine().lock();
        match all.get(id) {
            Some(s) => {
                seen.replace(ById(s.clone()));
                Some(s.clone())
            }
            None => {
                seen.remove(id);
                None
            }
        }
    }

    /// Forget a session.
    pub(crate) fn remove(&self, id: &str) -> Option<Arc<Session>> {
        let mut all = self.all.lock();
        for seen in self.seen.mine_first() {
            seen.lock().remove(id);
        }
        all.remove(id)
    }

    /// Every live session.
    pub(crate) fn all(&self) -> Vec<Arc<Session>> {
        self.all.lock().values().cloned().collect()
    }

    /// How many sessions are live.
    pub(crate) fn len(&self) -> usize {
        self.all.lock().len()
    }
}

fn cap_passed(
    sessions: &HashMap<String, Arc<Session>>,
    principal: Option<&sluice_core::Principal>,
    max: u64,
    per_principal: u64,
) -> Option<SessionCap> {
    if sessions.len() as u64 >= max {
        return Some(SessionCap::Global(max));
    }
    let p = principal?;
    let same = sessions
        .values()
        .filter(|s| {
            s.principal()
                .is_some_and(|o| o.id == p.id && o.kind == p.kind)
        })
        .count() as u64;
    (same >= per_principal).then_some(SessionCap::PerPrincipal(per_principal))
}

/// How live reloads went.
#[derive(Debug, Default)]
pub(crate) struct ReloadStats {
    /// Edits applied.
    pub ok: AtomicU64,
    /// Edits refused (the running configuration was kept).
    pub failed: AtomicU64,
    /// The errors of the last refused edit (cleared by a good one).
    pub last_error: Mutex<Option<String>>,
}

/// Everything a configuration puts in force. A reload or a catalog rebuild makes a new one;
/// nothing in it changes after it is built.
pub struct Snapshot {
    /// The configuration (its `settings` are the ones in force: `listen`, `admin`,
    /// `admin_token` and `telemetry` keep their start-up values across reloads).
    pub config: Arc<Config>,
    /// One slot per configured upstream, in order.
    pub slots: Arc<[Arc<Slot>]>,
    /// The merged catalog over these slots.
    pub catalog: Arc<Catalog>,
    /// The hook chain.
    pub chain: Arc<Chain>,
    /// The access rules.
    pub policy: Arc<Policy>,
    /// Authentication of the HTTP listener (None: off).
    pub auth: Option<Arc<Authenticator>>,
    /// The audit log.
    pub audit: Arc<Audit>,
    /// The funnel's meta-tool prefix, when the funnel is on.
    pub funnel_prefix: Option<String>,
    /// The endpoint this snapshot serves (`mcp/endpoints.json`); `None`: `/mcp`.
    pub endpoint: Option<Arc<sluice_config::Endpoint>>,
    /// `/mcp`'s snapshot: the snapshot of each endpoint, in file order (built by
    /// `control/endpoints.rs`); an endpoint's own has none.
    pub endpoints: Arc<[Arc<Snapshot>]>,
}

impl Snapshot {
    /// The server settings in force.
    pub fn settings(&self) -> &Settings {
        &self.config.settings
    }

    /// The slot of the upstream with this id.
    pub fn slot(&self, id: &str) -> Option<&Arc<Slot>> {
        self.slots.iter().find(|s| s.spec.id == id)
    }

    /// This snapshot with another catalog (an upstream's lists changed).
    pub fn with_catalog(&self, catalog: Catalog) -> Snapshot {
        Snapshot {
            catalog: Arc::new(catalog),
            ..self.clone_parts()
        }
    }

    /// This snapshot with another authenticator (the listener's real address is known), its
    /// endpoints' too.
    pub fn with_auth(&self, auth: Option<Arc<Authenticator>>) -> Snapshot {
        let endpoints = self
            .endpoints
            .iter()
            .map(|e| Arc::new(e.with_auth(auth.clone())))
            .collect();
        Snapshot {
            auth,
            endpoints,
            ..self.clone_parts()
        }
    }

    pub(crate) fn clone_parts(&self) -> Snapshot {
        Snapshot {
            config: self.config.clone(),
            slots: self.slots.clone(),
            catalog: self.catalog.clone(),
            chain: self.chain.clone(),
            policy: self.policy.clone(),
            auth: self.auth.clone(),
            audit: self.audit.clone(),
            funnel_prefix: self.funnel_prefix.clone(),
            endpoint: self.endpoint.clone(),
            endpoints: self.endpoints.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing;

    /// A session found on two serving threads is found again on each; once forgotten, on
    /// neither; and a new session under an ended one's id is the one found.
    #[test]
    fn each_thread_finds_a_session_until_it_is_forgotten() {
        let sessions = Sessions::default();
        let (s, _out) = testing::session();
        sessions.add(s.clone());
        let on = |n: u32, id: &str| {
            std::thread::scope(|t| {
                t.spawn(|| {
                    sluice_core::worker::mark(n);
                    sessions.get(id)
                })
                .join()
                .expect("thread")
            })
        };
        for _ in 0..2 {
            for n in [1, 2] {
                assert!(Arc::ptr_eq(&on(n, "unit").expect("found"), &s));
            }
        }
        assert!(on(1, "other").is_none());
        assert!(Arc::ptr_eq(&sessions.remove("unit").expect("removed"), &s));
        for n in [1, 2] {
            assert!(on(n, "unit").is_none(), "forgotten on thread {n}");
        }
        assert_eq!(Arc::strong_count(&s), 1, "no thread keeps it");
        // An ended session a thread still holds is not found in place of a new one.
        let (again, _out) = testing::session();
        sessions.add(again.clone());
        assert!(Arc::ptr_eq(&on(1, "unit").expect("found"), &again));
        assert!(again.mark_closed());
        let (third, _out) = testing::session();
        sessions.add(third.clone());
        assert!(Arc::ptr_eq(&on(1, "unit").expect("found"), &third));
    }

    /// A serving thread's requests share one handle of its own on the snapshot in force; a
    /// new snapshot empties every thread's handle, so none keeps the old one alive.
    #[test]
    fn each_thread_holds_the_snapshot_in_force_and_none_keeps_an_old_one() {
        let st = testing::state(&[], &[]);
        let on = |n: u32| {
            std::thread::scope(|t| {
                t.spawn(|| {
                    sluice_core::worker::mark(n);
                    st.held()
                })
                .join()
                .expect("thread")
            })
        };
        let (a, again, b) = (on(1), on(1), on(2));
        assert!(Arc::ptr_eq(&a.0, &again.0), "one handle per thread");
        assert!(!Arc::ptr_eq(&a.0, &b.0), "each thread its own handle");
        assert!(Arc::ptr_eq(&*a.0, &*b.0), "on one snapshot");
        assert!(Arc::ptr_eq(&*a.0, &st.snapshot()), "the one in force");
        let old = Arc::downgrade(&*a.0);
        drop((a, again, b));
        crate::control::rebuild_catalog(&st, None);
        assert!(old.upgrade().is_none(), "no thread keeps the old snapshot");
        let now = on(1);
        assert!(Arc::ptr_eq(&*now.0, &st.snapshot()), "the new one in force");
    }
}
