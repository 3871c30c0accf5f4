//! Serving sessions across the replicas of a cluster: finding a session by its sealed id on any
//! replica (opened with the key, checked against the store, taken up here as a local session
//! when another replica began it), feeding a GET stream from the events in the store, and
//! hearing the bus (new events, ended sessions, list changes, cancellations, messages for this
//! replica). What is handed to the replica that holds it is in [`handover`].

use crate::cluster::{same_principal, Cluster, Sealed};
use crate::control;
use crate::modern::rounds::Rounds;
use crate::proxy;
use crate::session::{HttpStreams, Outbound, Session, Shared};
use crate::state::State;
use crate::stream::StreamBuf;

mod handover;
mod scale;
use handover::{forward_cancel, forward_reply, hand_retry, replay_elsewhere};
use serde_json::{json, Value};
use sluice_cluster::{Bus, BusMsg, StoreError};
use sluice_core::{Message, Principal};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

/// Why a session was not found.
#[derive(Debug)]
pub(crate) enum Miss {
    /// Unknown, ended, expired, forged, tampered, sealed under another key, or another
    /// principal's: all answered alike.
    NotFound,
    /// The store did not answer, and the session is not served here yet.
    Unavailable(String),
}

/// Is `session` `principal`'s to use? (Without authentication, anyone's.)
pub(crate) fn owned_by(session: &Session, principal: Option<&Principal>) -> bool {
    match (principal, session.principal()) {
        (None, _) => true,
        (Some(p), Some(owner)) => p.id == owner.id && p.kind == owner.kind,
        (Some(_), None) => false,
    }
}

/// The session named `id`, on this replica or taken up from the store. A session this replica
/// holds costs no Redis command: its liveness is renewed in the background at most every
/// [`renew_every`] (not per request), its end and the changes of its state arrive on the bus.
/// A session taken up here is read from the store (and renewed); a store that does not answer
/// stops only those.
pub(crate) async fn find(
    st: &Arc<State>,
    c: &Arc<Cluster>,
    id: &str,
    principal: Option<&Arc<Principal>>,
) -> Result<Arc<Session>, Miss> {
    let idle = Duration::from_secs(st.snapshot().settings().session_idle_secs);
    if let Some(s) = st.rt.sessions().get(id) {
        if !owned_by(&s, principal.map(|p| &**p)) {
            return Err(Miss::NotFound);
        }
        if let Some(sh) = &s.shared {
            if c.renew_due(&sh.handle, renew_every(idle)) {
                renew(st, c, id, &sh.handle, record_ttl(idle));
            }
        }
        return Ok(s);
    }
    let sealed = c.open(id).ok_or(Miss::NotFound)?;
    if !same_principal(principal.map(|p| &**p), sealed.principal.as_ref()) {
        return Err(Miss::NotFound);
    }
    let ttl = record_ttl(idle);
    match c.store.touch(&sealed.handle, ttl).await {
        Ok(None) => Err(Miss::NotFound),
        Ok(Some(fields)) => {
            let (s, level) = take_up(st, c, id, sealed, &fields, ttl, principal);
            if let Some(level) = level {
                tell_level(st, &s, level).await;
            }
            Ok(s)
        }
        Err(e) => Err(Miss::Unavailable(e.0)),
    }
}

/// How often a replica renews the liveness of a session it serves, at most: a quarter of
/// `session_idle_secs`, and never more than every 5 s.
pub(crate) fn renew_every(idle: Duration) -> Duration {
    (idle / 4).min(Duration::from_secs(5))
}

/// How long a session's record lives in the store past its last renewal: `session_idle_secs`
/// plus [`renew_every`], so it outlives its last request by `session_idle_secs` at least (and
/// by one renewal interval more at most).
pub(crate) fn record_ttl(idle: Duration) -> Duration {
    idle + renew_every(idle)
}

/// Renew a session's record in the background; when the store says it is gone (expired, or
/// ended while this replica's bus was away), this replica ends its part too.
fn renew(st: &Arc<State>, c: &Arc<Cluster>, id: &str, handle: &str, ttl: Duration) {
    let (st, c, id, handle) = (st.clone(), c.clone(), id.to_string(), handle.to_string());
    tokio::spawn(async move {
        match c.store.renew(&handle, ttl).await {
            Ok(true) => {}
            Ok(false) => {
                tracing::info!(session = %id, "the session is gone from the cluster store: ended here");
                control::end_session(&st, &id, sluice_hooks::EndReason::Idle).await;
            }
            Err(e) => {
                // Tried again after the next interval (single-replica work goes on meanwhile).
                tracing::warn!(session = %id, "serving without the cluster store: {e}");
            }
        }
    });
}

/// A field of a session's state changed on some replica (heard on the bus): the same change
/// here. Returns the log level when it is new here.
fn apply_field(s: &Session, field: &str, value: Option<&str>) -> Option<String> {
    if let Some(uri) = field.strip_prefix("sub:") {
        let mut subs = s.live.subscriptions.lock();
        match value {
            Some(_) => subs.insert(uri.to_string()),
            None => subs.remove(uri),
        };
        return None;
    }
    match (field, value) {
        ("level", Some(level)) => {
            let mut l = s.live.log_level.lock();
            if l.as_deref() == Some(level) {
                return None;
            }
            *l = Some(level.to_string());
            Some(level.to_string())
        }
        ("gd", Some(d)) => {
            if let (Ok(d), Some(http)) = (d.parse(), s.http()) {
                http.get_delivered
                    .fetch_max(d, std::sync::atomic::Ordering::SeqCst);
            }
            None
        }
        _ => None,
    }
}

/// The bus was away (or is new): every session served here is checked against the store, its
/// state read again; those gone from it end here.
async fn resync(st: &Arc<State>, c: &Cluster) {
    let held: Vec<Arc<Session>> = st
        .rt
        .sessions()
        .all()
        .into_iter()
        .filter(|s| s.shared.is_some())
        .collect();
    for s in held {
        let Some(sh) = &s.shared else { continue };
        match c.store.state(&sh.handle).await {
            Ok(None) => {
                tracing::info!(session = %s.id, "the session ended while the cluster bus was away: ended here");
                control::end_session(st, &s.id, sluice_hooks::EndReason::Deleted).await;
            }
            Ok(Some(fields)) => {
                if let Some(level) = s.apply_shared(&fields) {
                    tell_level(st, &s, level).await;
                }
                if attached(&s) {
                    let _ = feed(c, &s).await;
                }
            }
            Err(e) => {
                tracing::warn!(session = %s.id, "not checked against the cluster store after the bus came back: {e}");
            }
        }
    }
}

/// The client set its log level on another replica: tell this replica's upstreams too.
async fn tell_level(st: &State, session: &Arc<Session>, level: String) {
    let msg = Message::request(json!(0), "logging/setLevel", Some(json!({"level": level})));
    proxy::forward::set_level(&st.snapshot(), session, &msg).await;
}

/// Serve here a session another replica began (and the log level it set elsewhere).
fn take_up(
    st: &State,
    c: &Cluster,
    id: &str,
    sealed: Sealed,
    fields: &HashMap<String, String>,
    ttl: Duration,
    principal: Option<&Arc<Principal>>,
) -> (Arc<Session>, Option<String>) {
    let snap = st.snapshot();
    let settings = snap.settings();
    let shared = shared(c, sealed.handle.clone(), ttl, settings.replay_events);
    let buf = StreamBuf::new(
        0,
        settings.replay_events as usize,
        settings.replay_bytes as usize,
    );
    let streams = HttpStreams::new(buf).numbered_from(c.stream_base());
    let session =
        Session::new(id.to_string(), sealed.init, Outbound::Http(streams)).with_shared(shared);
    session.set_principal(principal.cloned());
    let level = session.apply_shared(fields);
    // It has seen (or been told of) this replica's lists as they are now.
    session
        .live
        .catalog_seen
        .store(snap.catalog.version, std::sync::atomic::Ordering::Release);
    let session = st.rt.sessions().get_or_add(Arc::new(session));
    c.remember(&sealed.handle, id);
    tracing::info!(session = %id, "session taken up from the cluster");
    (session, level)
}

/// The shared part of a session served by this replica.
pub(crate) fn shared(c: &Cluster, handle: String, ttl: Duration, cap: u64) -> Shared {
    Shared::new(handle, c.store.clone(), c.replica.clone(), ttl, cap)
}

/// Bring the session's GET stream up to date with its events in the store.
pub(crate) async fn feed(c: &Cluster, session: &Session) -> Result<(), StoreError> {
    let (Some(sh), Some(http)) = (&session.shared, session.http()) else {
        return Ok(());
    };
    let last = http.get.last_seq();
    for (seq, json) in c.store.events_after(&sh.handle, last).await? {
        http.get.push_at(seq, json.into());
    }
    Ok(())
}

/// Read from the store what the session's GET streams delivered (the last may have been held
/// by another replica, which wrote it as it closed).
pub(crate) async fn delivered(c: &Cluster, session: &Session) -> Result<(), StoreError> {
    let Some(sh) = &session.shared else {
        return Ok(());
    };
    if let Some(fields) = c.store.state(&sh.handle).await? {
        apply_field(session, "gd", fields.get("gd").map(String::as_str));
    }
    Ok(())
}

/// Is the session's GET stream attached on this replica?
fn attached(session: &Session) -> bool {
    session.http().is_some_and(|h| h.get_attached())
}

/// Hear the bus until the gateway shuts down (nothing without a cluster).
pub(crate) async fn run(st: Arc<State>, rounds: Arc<Rounds>) {
    let Some(c) = st.rt.cluster().clone() else {
        return;
    };
    let mut rx = Bus::start(c.store.clone(), &c.replica);
    loop {
        let msg = tokio::select! {
            m = rx.recv() => match m {
                Some(m) => m,
                None => return,
            },
            () = st.rt.shutdown().cancelled() => return,
        };
        match msg {
            BusMsg::Event { handle, seq } => {
                let Some(s) = c.local(&handle).and_then(|id| st.rt.sessions().get(&id)) else {
                    continue;
                };
                let behind = s.http().is_some_and(|h| h.get.last_seq() < seq);
                if behind && attached(&s) {
                    let c = c.clone();
                    tokio::spawn(async move {
                        if let Err(e) = feed(&c, &s).await {
                            tracing::warn!(session = %s.id, "GET stream not fed: {e}");
                        }
                    });
                }
            }
            BusMsg::State {
                handle,
                field,
                value,
            } => {
                let Some(s) = c.local(&handle).and_then(|id| st.rt.sessions().get(&id)) else {
                    continue;
                };
                if let Some(level) = apply_field(&s, &field, value.as_deref()) {
                    let st = st.clone();
                    tokio::spawn(async move { tell_level(&st, &s, level).await });
                }
            }
            BusMsg::Ended(handle) => {
                if let Some(id) = c.local(&handle) {
                    let st = st.clone();
                    tokio::spawn(async move {
                        control::end_session(&st, &id, sluice_hooks::EndReason::Deleted).await;
                    });
                }
            }
            BusMsg::Lists {
                from,
                upstream,
                session,
            } if *from != *c.replica => {
                let slot = st.snapshot().slot(&upstream).cloned();
                match (slot, session) {
                    (Some(slot), None) => {
                        tokio::spawn(slot.relist());
                    }
                    (Some(slot), Some(id)) => {
                        // The client's own upstream session here re-reads its lists (opened
                        // now if it was not: its lists are what the client must see here).
                        if let Some(s) = st.rt.sessions().get(&id) {
                            tokio::spawn(async move {
                                if let Ok(conn) = slot.connection_for(s.upstream_ref()).await {
                                    slot.read_session_lists(&id, &conn).await;
                                }
                            });
                        }
                    }
                    (None, _) => {}
                }
            }
            BusMsg::Lists { .. } => {}
            BusMsg::Revoked {
                from,
                upstream,
                principal,
            } if *from != *c.replica => {
                let Some(slot) = st.snapshot().slot(&upstream).cloned() else {
                    continue;
                };
                if let Some(users) = slot.per_user() {
                    tracing::info!(%upstream, %principal, "a user's connection was revoked on another replica: forgotten here");
                    users.forget(&principal);
                    tokio::spawn(async move { slot.close_user(&principal).await });
                }
            }
            BusMsg::Revoked { .. } => {}
            BusMsg::Direct(payload) => {
                let Ok(v) = serde_json::from_str::<Value>(&payload) else {
                    tracing::warn!("a bus message that is not JSON: {payload}");
                    continue;
                };
                match v.get("t").and_then(Value::as_str) {
                    Some("reply") => handover::on_reply(&st, &v),
                    Some("retry") => {
                        if handover::continue_retry(&st, &rounds, &c, &v).is_none() {
                            tracing::warn!("a handed-over retry that is not one");
                        }
                    }
                    Some("call") => {
                        let (st, c) = (st.clone(), c.clone());
                        tokio::spawn(async move {
                            if handover::run_handed_call(&st, &c, &v).await.is_none() {
                                tracing::warn!("a handed-over call that is not one");
                            }
                        });
                    }
                    Some("out") => {
                        let corr = v.get("c").and_then(Value::as_str).unwrap_or("");
                        let m = v
                            .get("m")
                            .and_then(Value::as_str)
                            .and_then(|m| Message::parse(m.as_bytes()).ok());
                        let tx = c.handed.lock().get(corr).cloned();
                        if let (Some(tx), Some(m)) = (tx, m) {
                            let _ = tx.send(m);
                        }
                    }
                    Some("end") => {
                        let corr = v.get("c").and_then(Value::as_str).unwrap_or("");
                        c.handed.lock().remove(corr);
                        c.replaying.lock().remove(corr);
                    }
                    Some("replay") => {
                        let (st, c) = (st.clone(), c.clone());
                        tokio::spawn(async move {
                            let _ = handover::replay_for(&st, &c, &v).await;
                        });
                    }
                    Some("sse") | Some("missing") => {
                        let corr = v.get("c").and_then(Value::as_str).unwrap_or("");
                        let chunk = v
                            .get("b")
                            .and_then(Value::as_str)
                            .map(str::to_string)
                            .ok_or(());
                        let tx = c.replaying.lock().get(corr).cloned();
                        if let Some(tx) = tx {
                            let _ = tx.send(chunk);
                        }
                    }
                    _ => tracing::warn!("a bus message of no known type: {payload}"),
                }
            }
            BusMsg::Cancelled(payload) => handover::on_cancelled(&st, &c, &payload),
            BusMsg::Resync => {
                let (st, c) = (st.clone(), c.clone());
                tokio::spawn(async move { resync(&st, &c).await });
            }
        }
    }
}
