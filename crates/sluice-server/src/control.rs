//! Control: putting a configuration in force and keeping it there. Builds the [`State`] from a
//! `Config`; starts and stops slots; rebuilds the catalog when an upstream's lists change;
//! reloads by a plan worked out first from the running and the new configuration
//! (`control/plan.rs`), then applied in one swap; watches the tree; ends and reaps sessions;
//! shuts down. [`apply_tree`] is the one way an edit of the tree becomes live, whichever face
//! made it.

mod endpoints;
mod plan;

pub(crate) use plan::ReloadReport;

use crate::catalog::{Catalog, ListKind};
use crate::gateway_tools;
use crate::state::{Changed, Runtime, Snapshot, State};
use plan::{ReloadPlan, UpstreamChange};
use sluice_auth::{Authenticator, Policy};
use sluice_config::{Config, ConfigError, ConfigErrors, Settings, Transport, UpstreamSpec};
use sluice_hooks::Chain;
use sluice_telemetry::Audit;
use sluice_upstream::{Slot, SlotEnv, SlotEvent, Timing};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

/// The receiving ends of the state's channels, for the inbound driver.
pub(crate) struct Inbound {
    /// What the slots report.
    pub slots: mpsc::UnboundedReceiver<SlotEvent>,
    /// Lists that changed.
    pub changes: mpsc::UnboundedReceiver<Changed>,
}

/// Who applies an edit of the tree, that is which face made it live (for the log).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Applier {
    /// The file watcher (an edit on disk, by hand or by the CLI).
    Watcher,
    /// The admin API.
    Admin,
    /// The MCP management tools.
    Management,
}

const ALL_LISTS: [&str; 3] = [
    "notifications/tools/list_changed",
    "notifications/prompts/list_changed",
    "notifications/resources/list_changed",
];

/// Build the state from a configuration (nothing is started yet).
pub(crate) fn build(mut config: Config) -> (Arc<State>, Inbound) {
    add_local_upstream(&mut config);
    let (slot_tx, slot_rx) = mpsc::unbounded_channel();
    let (changes_tx, changes_rx) = mpsc::unbounded_channel();
    let (timing, timing_rx) = watch::channel(timing_of(&config.settings));
    let shutdown = CancellationToken::new();
    let cluster = config.settings.cluster.as_ref().and_then(|c| {
        crate::cluster::Cluster::new(c)
            .map_err(|e| tracing::error!("cluster: {e}"))
            .ok()
            .map(Arc::new)
    });
    let slot_env = SlotEnv {
        events: slot_tx,
        timing: timing_rx,
        shutdown: shutdown.clone(),
        shared: cluster.clone().map(crate::shared_upstreams::shared),
        oauth: crate::upstream_oauth::context(&config),
    };
    let rt = Runtime::new(
        changes_tx,
        sluice_telemetry::Telemetry::start(&config.settings.telemetry),
        shutdown,
        slot_env,
        timing,
        cluster,
    );
    let slots: Arc<[Arc<Slot>]> = config
        .expose
        .upstreams
        .iter()
        .map(|s| Arc::new(Slot::new(s.clone(), rt.slot_env().clone())))
        .collect();
    let listen = config.settings.listen.clone();
    let tools = crate::hook_tools::HookTools::unbound();
    let snapshot = Snapshot {
        funnel_prefix: funnel_prefix_of(&config),
        chain: Arc::new(build_chain(&config, Some(tools.clone()))),
        audit: Arc::new(build_audit(&config)),
        auth: Authenticator::new(&config.auth, &listen),
        policy: Arc::new(Policy::new(&config.auth.rules)),
        slots,
        catalog: Arc::new(Catalog::default()),
        config: Arc::new(config),
        endpoint: None,
        endpoints: Arc::new([]),
    };
    let inbound = Inbound {
        slots: slot_rx,
        changes: changes_rx,
    };
    let st = Arc::new(State::new(snapshot, rt));
    tools.bind(&st);
    (st, inbound)
}

/// Start every enabled upstream and wait (at most the connect timeout) until each has made its
/// first attempt; then build the catalog and start reaping idle sessions.
pub(crate) async fn start(st: &Arc<State>) {
    let slots = st.snapshot().slots.clone();
    start_slots(st, &slots).await;
    // With no upstream coming up, the catalog (meta-tools, down routes) is built here.
    rebuild_catalog(st, None);
    tokio::spawn(reap_idle_sessions(st.clone()));
    if let Some(c) = st.rt.cluster().clone() {
        tracing::info!(replica = %c.replica, redis = %c.store.shown(), key = %c.keys.sealing_kid(), "cluster replica");
        let stop = st.rt.shutdown().clone();
        tokio::spawn(async move {
            c.store
                .watch(Duration::from_secs(1), stop.cancelled_owned())
                .await
        });
    }
}

/// Start the given slots' supervisors and wait (bounded) for their first attempts.
async fn start_slots(st: &State, slots: &[Arc<Slot>]) {
    let wait = Duration::from_millis(st.snapshot().settings().connect_timeout_ms + 1000);
    let mut waits = Vec::new();
    let serving = st.rt.serving().get().filter(|h| !h.is_empty());
    for (i, slot) in slots.iter().enumerate() {
        if !slot.spec.enabled {
            continue;
        }
        let attempted = slot.attempted.notified();
        waits.push(async move {
            let _ = tokio::time::timeout(wait, attempted).await;
        });
        // On a serving thread when there are some (its connection's tasks with it).
        match serving {
            Some(threads) => drop(threads[i % threads.len()].spawn(slot.clone().supervise())),
            None => drop(tokio::spawn(slot.clone().supervise())),
        }
    }
    futures_util::future::join_all(waits).await;
}

/// The timing settings slots work with.
fn timing_of(settings: &Settings) -> Timing {
    Timing {
        request_timeout_ms: settings.request_timeout_ms,
        connect_timeout_ms: settings.connect_timeout_ms,
        restart_initial_ms: settings.restart_initial_ms,
        restart_max_ms: settings.restart_max_ms,
    }
}

/// Rebuild the catalog from the slots' lists, swap it in, and publish what changed (with
/// `also`, an upstream's own list_changed, passed on even when the merged lists look the same).
pub(crate) fn rebuild_catalog(st: &State, also: Option<&'static str>) -> Vec<&'static str> {
    let (old, new) = {
        let _swap = st.rt.swapping().lock();
        let now = st.snapshot();
        let catalog = build_catalog(st, &now.config, &now.slots, now.funnel_prefix.is_some());
        let next = Arc::new(endpoints::attach(now.with_catalog(catalog), &now));
        st.store_arc(next.clone());
        (now, next)
    };
    let mut changed = changed_lists(&old.catalog, &new.catalog);
    let mut per_endpoint = endpoints::changes(&old, &new, false);
    if let Some(said) = also {
        for lists in std::iter::once(&mut changed).chain(per_endpoint.iter_mut().map(|e| &mut e.1))
        {
            if !lists.contains(&said) {
                lists.push(said);
            }
        }
    }
    publish(st, new.catalog.version, changed.clone(), per_endpoint);
    changed
}

/// Hand changed lists (`/mcp`'s, and each endpoint's) to the inbound driver, which tells
/// sessions and listen streams.
fn publish(
    st: &State,
    version: u64,
    lists: Vec<&'static str>,
    endpoints: Vec<(String, Vec<&'static str>)>,
) {
    let changed = Changed {
        version,
        lists,
        endpoints,
    };
    if !changed.is_empty() {
        let _ = st.rt.changes().send(changed);
    }
}

/// A catalog over `slots`' current lists (and what they offer recorded against the pins).
fn build_catalog(st: &State, config: &Config, slots: &Arc<[Arc<Slot>]>, funnel: bool) -> Catalog {
    let lists: Vec<_> = slots.iter().map(|s| s.state.lock().lists.clone()).collect();
    let pairs: Vec<_> = slots
        .iter()
        .zip(lists.iter())
        .map(|(s, l)| (&s.spec, l.as_ref()))
        .collect();
    let version = st.rt.catalog_version().fetch_add(1, Ordering::Relaxed) + 1;
    let (catalog, warnings) = catalog_over(config, slots, &pairs, version, funnel, None);
    let specs: Vec<_> = slots.iter().map(|s| &s.spec).collect();
    crate::pins::record(&st.snapshot().audit, config, &specs, &lists);
    for w in warnings {
        tracing::warn!("{w}");
    }
    catalog
}

/// The catalog of `config` over these lists of `slots`, as the pins let them be listed (nothing
/// recorded, no new version): the gateway's, or one session's view (`views.rs`). Returns it and
/// its warnings.
pub(crate) fn catalog_over(
    config: &Config,
    slots: &Arc<[Arc<Slot>]>,
    pairs: &[(
        &sluice_config::UpstreamSpec,
        Option<&sluice_upstream::UpstreamLists>,
    )],
    version: u64,
    funnel: bool,
    endpoint: Option<&sluice_config::Endpoint>,
) -> (Catalog, Vec<String>) {
    let settings = &config.settings;
    let mut own = Vec::new();
    if settings.management_tools {
        own.extend(gateway_tools::management_tools(&settings.funnel_prefix));
    }
    let prefix = &settings.funnel_prefix;
    let discovery = settings.discovery == sluice_config::Discovery::Search;
    if funnel {
        own.extend(gateway_tools::funnel_tools(prefix));
    } else if discovery {
        own.push(gateway_tools::run_tool(prefix));
    }
    let search = settings.tool_search || discovery;
    if search {
        own.push(gateway_tools::search_tool(prefix, 0, &[]));
    }
    // A user's own connections, when some upstream connects each user as themselves.
    let per_user = |u: &UpstreamSpec| {
        u.enabled && u.oauth.as_ref().map(|o| o.mode) == Some(sluice_config::OAuthMode::PerUser)
    };
    if config.expose.upstreams.iter().any(per_user) {
        own.push(gateway_tools::connections_tool(&settings.funnel_prefix));
    }
    let mut judged = crate::pins::judge(config, pairs);
    let held = judged.as_mut().map(|j| std::mem::take(&mut j.held));
    let judged_pairs = judged.as_ref().map(|j| j.pairs(pairs));
    let pairs = judged_pairs.as_deref().unwrap_or(pairs);
    let (mut catalog, warnings) = Catalog::build_deciding(
        version,
        pairs,
        &config.expose.expose,
        &config.expose.skills,
        own,
        funnel,
        config.expose.on_collision,
    );
    catalog.slots = slots.clone();
    if let Some(held) = held {
        catalog.hold(held, pairs, &config.expose.expose);
    }
    if let Some(ep) = endpoint {
        catalog.keep_only(&endpoints::Selected { ep, config, slots });
    }
    if search {
        // The search tool says what it searches: how many tools, from which servers.
        let reachable = catalog.reachable_tools();
        let mut servers: Vec<&str> = Vec::new();
        for t in &reachable {
            if !servers.contains(&t.server) {
                servers.push(t.server);
            }
        }
        let (tool, _) = gateway_tools::search_tool(prefix, reachable.len(), &servers);
        catalog.set_tool(tool);
    }
    if discovery {
        // Progressive discovery: the search and run tools (and the gateway's other own tools
        // that are on), never the upstreams' own.
        use crate::{
            catalog::Route,
            gateway_tools::GatewayTool::{ListTools, ToolInstructions},
        };
        catalog.list_only(
            |r| matches!(r, Route::Gateway(g) if !matches!(g, ListTools | ToolInstructions)),
        );
    }
    (catalog, warnings)
}

/// Which lists differ between two catalogs, as the notifications that say so.
fn changed_lists(old: &Catalog, new: &Catalog) -> Vec<&'static str> {
    let mut changed = Vec::new();
    for (kind, method) in [
        (ListKind::Tools, ALL_LISTS[0]),
        (ListKind::Prompts, ALL_LISTS[1]),
        (ListKind::Resources, ALL_LISTS[2]),
    ] {
        let a = old.page(kind, None, usize::MAX).ok();
        let b = new.page(kind, None, usize::MAX).ok();
        // Templates and skills are resources too: no notification of their own.
        let templates_changed = kind == ListKind::Resources
            && [ListKind::Templates, ListKind::Skills]
                .into_iter()
                .any(|k| old.page(k, None, usize::MAX).ok() != new.page(k, None, usize::MAX).ok());
        if a != b || templates_changed {
            changed.push(method);
        }
    }
    changed
}

/// The address the MCP listener is bound to (or configured with, before it binds).
fn listen_address(st: &State) -> String {
    st.rt
        .bound()
        .lock()
        .clone()
        .unwrap_or_else(|| st.snapshot().settings().listen.clone())
}

/// The MCP listener is bound to `addr` (the default resource URI, `http://<addr>/mcp`, names
/// the real port when the configuration said port 0).
pub(crate) fn set_bound_address(st: &State, addr: &str) {
    *st.rt.bound().lock() = Some(addr.to_string());
    let _swap = st.rt.swapping().lock();
    let now = st.snapshot();
    let auth = Authenticator::new(&now.config.auth, addr);
    st.store(now.with_auth(auth));
}

/// Can the running listener take this configuration? One bound to a non-loopback address must
/// keep authentication on.
pub(crate) fn acceptable(st: &State, new: &Config) -> Result<(), ConfigErrors> {
    let addr = listen_address(st);
    let exposed = addr
        .parse::<std::net::SocketAddr>()
        .is_ok_and(|a| !a.ip().is_loopback());
    if exposed && !new.auth.enabled && st.snapshot().auth.is_some() {
        return Err(ConfigErrors(vec![ConfigError::new(
            &new.home.join("auth").join("auth.config.json"),
            "enabled",
            format!(
                "the MCP listener is bound to the non-loopback address {addr}: authentication cannot be turned off while it runs"
            ),
        )]));
    }
    Ok(())
}

/// THE way an edit of the tree becomes live, for every face (the file watcher, which also
/// carries the CLI's edits; the admin API; the MCP management tools): load and validate the
/// tree, check that the running listener can take it ([`acceptable`]), apply it by diff, and
/// count the result in the reload statistics. An edit that fails any step changes nothing that
/// is running; its errors are logged and returned.
pub(crate) async fn apply_tree(st: &Arc<State>, by: Applier) -> Result<ReloadReport, ConfigErrors> {
    let home = st.snapshot().config.home.clone();
    let env = |n: &str| std::env::var(n).ok();
    let loaded = Config::load(&home, &env).and_then(|(config, warnings)| {
        acceptable(st, &config)?;
        Ok((config, warnings))
    });
    match loaded {
        Ok((config, warnings)) => {
            for w in warnings {
                tracing::warn!("{w}");
            }
            let report = reload(st, config).await;
            st.rt.reloads().ok.fetch_add(1, Ordering::Relaxed);
            *st.rt.reloads().last_error.lock() = None;
            Ok(report)
        }
        Err(errors) => {
            st.rt.reloads().failed.fetch_add(1, Ordering::Relaxed);
            *st.rt.reloads().last_error.lock() = Some(errors.to_string());
            tracing::error!(
                face = ?by,
                "the edited configuration cannot be applied; keeping the running one:\n{errors}"
            );
            Err(errors)
        }
    }
}

/// Apply a new configuration: rebuild only what changed, and swap it in whole. An upstream
/// whose spec is the same keeps its slot (its process and its sessions' connections); a changed
/// one is replaced; a removed one is stopped. Calls in flight finish on the snapshot they
/// started with. (Faces call [`apply_tree`], which validates first.)
pub(crate) async fn reload(st: &Arc<State>, mut new: Config) -> ReloadReport {
    let _guard = st.rt.reloading().lock().await;
    add_local_upstream(&mut new);
    let now = st.snapshot();
    let running: Vec<&UpstreamSpec> = now.slots.iter().map(|s| &s.spec).collect();
    let plan = ReloadPlan::new(&now.config, &running, new);
    apply_plan(st, &now, plan).await
}

/// Put a reload plan in force over `now`, the snapshot it was computed from: build what it
/// says changed, swap it all in at once, then stop what it stops and start what it starts.
async fn apply_plan(st: &State, now: &Snapshot, plan: ReloadPlan) -> ReloadReport {
    let report = plan.report();
    if !plan.restart_only.is_empty() {
        tracing::warn!(
            "sluice.json: {} apply at the next restart; every other setting applies now",
            plan.restart_only.join(", ")
        );
    }
    st.rt.timing().send_if_modified(|t| {
        let next = timing_of(&plan.config.settings);
        let changed = *t != next;
        *t = next;
        changed
    });
    let mut fresh: Vec<Arc<Slot>> = Vec::new();
    let slots: Arc<[Arc<Slot>]> = plan
        .next_slots()
        .map(|(spec, change)| {
            if let UpstreamChange::Keep { slot } = change {
                return now.slots[slot].clone();
            }
            let s = Arc::new(Slot::new(spec.clone(), st.rt.slot_env().clone()));
            // A replaced upstream (same id, changed spec) keeps its restart count.
            if let UpstreamChange::Replace { slot } = change {
                s.state.lock().restarts = now.slots[slot].state.lock().restarts;
            }
            fresh.push(s.clone());
            s
        })
        .collect();
    let gone: Vec<Arc<Slot>> = plan
        .stopping()
        .into_iter()
        .map(|(slot, _)| now.slots[slot].clone())
        .collect();
    let chain = if plan.hooks {
        Arc::new(build_chain(&plan.config, now.chain.tool_runner()))
    } else {
        now.chain.clone()
    };
    let audit = if plan.audit {
        Arc::new(build_audit(&plan.config))
    } else {
        now.audit.clone()
    };
    let (auth, policy) = if plan.auth {
        (
            Authenticator::new(&plan.config.auth, &listen_address(st)),
            Arc::new(Policy::new(&plan.config.auth.rules)),
        )
    } else {
        (now.auth.clone(), now.policy.clone())
    };
    let funnel_prefix = funnel_prefix_of(&plan.config);
    if plan.config.pins != now.config.pins {
        crate::pins::audit_approvals(&audit, &plan.config, &now.config.pins);
    }
    let config = Arc::new(plan.config);
    // One swap: every part of the new configuration comes into force together.
    let (before, after) = {
        let _swap = st.rt.swapping().lock();
        let catalog = build_catalog(st, &config, &slots, funnel_prefix.is_some());
        let before = st.snapshot();
        let root = Snapshot {
            config,
            slots,
            catalog: Arc::new(catalog),
            chain,
            policy,
            auth,
            audit,
            funnel_prefix,
            endpoint: None,
            endpoints: Arc::new([]),
        };
        let after = Arc::new(endpoints::attach(root, &before));
        st.store_arc(after.clone());
        (before, after)
    };
    // The chains no longer in force stop (the manifest's, and endpoints' of their own).
    let in_force: Vec<&Arc<Chain>> = std::iter::once(&after.chain)
        .chain(after.endpoints.iter().map(|e| &e.chain))
        .collect();
    let mut stopping: Vec<Arc<Chain>> = Vec::new();
    for old in std::iter::once(&now.chain).chain(now.endpoints.iter().map(|e| &e.chain)) {
        let kept = in_force.iter().any(|c| Arc::ptr_eq(c, old));
        if !kept && !stopping.iter().any(|c| Arc::ptr_eq(c, old)) {
            stopping.push(old.clone());
        }
    }
    for old_chain in stopping {
        tokio::spawn(async move { old_chain.shutdown().await });
    }
    for s in &gone {
        // Its supervisor ends, and every session's own connection to it closes.
        s.stop();
    }
    let catalog = &after.catalog;
    let per_endpoint = endpoints::changes(&before, &after, plan.rules);
    if plan.rules {
        // What each caller may see changed: every list may look different to someone.
        publish(st, catalog.version, ALL_LISTS.to_vec(), per_endpoint);
    } else {
        let lists = changed_lists(&before.catalog, catalog);
        publish(st, catalog.version, lists, per_endpoint);
    }
    endpoints::end_removed(st, &before, &after).await;
    start_slots(st, &fresh).await;
    // Started slots rebuild the catalog when they come up; this covers none starting.
    rebuild_catalog(st, None);
    tracing::info!(kept = ?report.kept, started = ?report.started, stopped = ?report.stopped, hooks = report.hooks, audit = report.audit, auth = report.auth, "configuration reloaded");
    report
}

/// Watch the tree's files and apply them on change (polling every `every`).
pub(crate) async fn watch(st: Arc<State>, every: Duration) {
    let home = st.snapshot().config.home.clone();
    let files = [
        "sluice.json",
        "mcp/expose.json",
        "hooks/hooks.manifest.json",
        "hooks/hooks.state.json",
        "logs/log.config.json",
        "tools/tools.register.json",
        "auth/auth.config.json",
        sluice_config::endpoints::FILE,
        "mcp/pins.json",
    ];
    let stamp = || -> Vec<Option<(std::time::SystemTime, u64)>> {
        files
            .iter()
            .map(|f| {
                std::fs::metadata(home.join(f))
                    .ok()
                    .and_then(|m| Some((m.modified().ok()?, m.len())))
            })
            .collect()
    };
    let mut last = stamp();
    loop {
        tokio::select! {
            _ = tokio::time::sleep(every) => {}
            _ = st.rt.shutdown().cancelled() => return,
        }
        let now = stamp();
        if now == last {
            continue;
        }
        last = now;
        let _ = apply_tree(&st, Applier::Watcher).await;
    }
}

/// End a session here: forget it and close its own upstream connections; `why` is what its
/// SessionEnd hooks are told. (In a cluster this ends this replica's part only; DELETE ends it
/// in the store first, for every replica.)
pub(crate) async fn end_session(st: &State, id: &str, why: sluice_hooks::EndReason) -> bool {
    let Some(session) = st.rt.sessions().remove(id) else {
        return false;
    };
    st.rt.scale().forget(&session);
    if !session.mark_closed() {
        return true;
    }
    if let Some(http) = session.http() {
        http.get.finish();
    }
    let snap = st.snapshot_for(&session);
    for slot in snap.slots.iter() {
        slot.close_session(id).await;
    }
    st.rt.calls().forget_session(&session);
    tracing::info!(session = %id, "session ended");
    if !snap.chain.is_empty() {
        let chain = snap.chain.clone();
        let sid = id.to_string();
        tokio::spawn(async move { chain.stop(&sid, why).await });
    }
    true
}

/// End sessions idle for longer than `session_idle_secs` (none with a call in flight).
async fn reap_idle_sessions(st: Arc<State>) {
    loop {
        let idle = st.snapshot().settings().session_idle_secs;
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_secs(30.min(idle.max(1)))) => {}
            _ = st.rt.shutdown().cancelled() => return,
        }
        let stale: Vec<String> = st
            .rt
            .sessions()
            .all()
            .iter()
            .filter(|s| s.idle_secs() >= idle && !st.rt.calls().has_session_calls(s))
            .map(|s| s.id.clone())
            .collect();
        for id in stale {
            tracing::info!(session = %id, "ending idle session");
            end_session(&st, &id, sluice_hooks::EndReason::Idle).await;
        }
    }
}

/// Shut down: supervisors stop, sessions end, connections close, hooks stop, spans flush.
pub(crate) async fn shutdown(st: &State) {
    st.rt.shutdown().cancel();
    for s in st.rt.sessions().all() {
        end_session(st, &s.id, sluice_hooks::EndReason::Shutdown).await;
    }
    let snap = st.snapshot();
    let controls: Vec<_> = snap
        .slots
        .iter()
        .filter_map(|s| {
            let mut st = s.state.lock();
            let control = st.control.take();
            s.publish(&st);
            control
        })
        .collect();
    for c in controls {
        c.shutdown().await;
    }
    snap.chain.shutdown().await;
    if let Some(t) = &st.rt.telemetry() {
        t.flush(Duration::from_secs(2)).await;
    }
}

/// Is the gateway shutting down?
pub(crate) fn is_shutting_down(st: &State) -> bool {
    st.rt.shutdown().is_cancelled()
}

/// The first-party register, when the tree has one, is the `local` upstream.
fn add_local_upstream(config: &mut Config) {
    if config.register.present {
        let mut local = UpstreamSpec::stdio("local", "", Vec::new());
        local.transport = Transport::Local;
        local.cwd = Some(config.home.clone());
        local.transparent = config.settings.list_register_tools;
        local.description = "First-party tools (tools/tools.register.json)".into();
        config.expose.upstreams.push(local);
    }
}

/// The funnel's meta-tool prefix when the funnel is on (`funnel` in sluice.json, else on when
/// the tree has a register or a `tools/` folder).
fn funnel_prefix_of(config: &Config) -> Option<String> {
    config
        .settings
        .funnel
        .unwrap_or(config.register.present || config.home.join("tools").is_dir())
        .then(|| config.settings.funnel_prefix.clone())
}

fn build_chain(config: &Config, tools: Option<Arc<dyn sluice_hooks::ToolRunner>>) -> Chain {
    let (chain, warnings) = Chain::build(&config.hooks.hooks, &config.home);
    let mut chain = chain.keeping_transcripts(config.settings.keep_transcripts);
    if let Some(tools) = tools {
        chain = chain.with_tool_runner(tools);
    }
    for w in warnings {
        tracing::warn!("{w}");
    }
    chain
}

fn build_audit(config: &Config) -> Audit {
    if config.logs.enabled {
        Audit::to_file(config.logs.path.clone())
    } else {
        Audit::off()
    }
}
