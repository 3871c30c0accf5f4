//! The reverse path: everything upstreams start, and every change of the lists, arrives here as
//! an event and is routed to the right client (or answered here): progress to the call it
//! belongs to under the client's token, logging and other notifications to the call's stream
//! or the owning session, sampling / elicitation / roots requests to the client whose call
//! caused them (their replies come back through [`relay_client_reply`]), resource updates to
//! subscribers, list changes to every session and listen stream. Every message toward a
//! client passes the response hooks on the way.

use super::client_out::to_client;
use super::client_out::{client_capability_for, deliver, try_deliver};
use crate::channel::{send_msg, Out};
use crate::control::{self, Inbound};
use crate::session::{PendingServerRequest, Session};
use crate::state::{Changed, State};
use serde_json::{json, Value};
use sluice_core::{codes, Kind, Message, RpcError};
use sluice_upstream::{Connection, Incoming, Slot, SlotEvent};
use std::borrow::Cow;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

/// Consume the slots' events and the catalog's changes until the gateway shuts down.
pub(crate) async fn run(st: Arc<State>, mut inbound: Inbound) {
    loop {
        tokio::select! {
            ev = inbound.slots.recv() => match ev {
                Some(ev) => on_slot_event(&st, ev),
                None => return,
            },
            changed = inbound.changes.recv() => match changed {
                Some(changed) => announce(&st, &changed),
                None => return,
            },
            _ = st.rt.shutdown().cancelled() => return,
        }
    }
}

fn on_slot_event(st: &Arc<State>, ev: SlotEvent) {
    match ev {
        SlotEvent::Message {
            slot,
            conn,
            owner,
            incoming,
            done,
        } => {
            // Handled beside (a response hook may take time); the connection's next events
            // wait for `done`, so its messages keep their order.
            let st = st.clone();
            tokio::spawn(async move {
                let owner = owner.and_then(|id| st.rt.sessions().get(&id));
                on_message(&st, &slot, &conn, owner, incoming).await;
                drop(done);
            });
        }
        SlotEvent::Stream {
            conn,
            related,
            paused,
            retry,
            done,
        } => {
            on_stream(st, &conn, related, paused, retry);
            drop(done);
        }
        SlotEvent::Lists { said, slot } => {
            if said.is_some() {
                st.rt.scale().lists_changed(&slot.spec.id, None);
            }
            control::rebuild_catalog(st, said);
        }
        SlotEvent::SessionLists {
            session,
            said,
            slot,
        } => {
            // A per-user upstream's connection of one principal: every session of theirs.
            if let Some(principal) = session.strip_prefix(sluice_upstream::slot::USER_KEY) {
                for s in st.rt.sessions().all() {
                    if s.principal_key() != Some(principal) {
                        continue;
                    }
                    let st = st.clone();
                    tokio::spawn(async move {
                        if let Ok(msg) =
                            to_client(&st, &s, Message::notification(said, None), None).await
                        {
                            s.send_unrelated(msg);
                        }
                    });
                }
                return;
            }
            // Only that session's lists changed (its view is rebuilt on its next request).
            if let Some(s) = st.rt.sessions().get(&session) {
                // The other replicas serving it re-read its own upstream sessions.
                st.rt.scale().lists_changed(&slot.spec.id, Some(&s));
                let st = st.clone();
                tokio::spawn(async move {
                    if let Ok(msg) =
                        to_client(&st, &s, Message::notification(said, None), None).await
                    {
                        s.send_unrelated(msg);
                    }
                });
            }
        }
    }
}

/// Tell every session and listen stream that these lists changed (not a session that began on
/// the changed catalog or a later one: it listed what is there now).
fn announce(st: &Arc<State>, changed: &Changed) {
    if changed.is_empty() {
        return;
    }
    for m in &changed.lists {
        st.rt.listeners().announce(m, changed.version, None);
    }
    for (endpoint, lists) in &changed.endpoints {
        for m in lists {
            st.rt
                .listeners()
                .announce(m, changed.version, Some(endpoint));
        }
    }
    let snap = st.snapshot();
    let hooked = !snap.chain.is_empty() || snap.endpoints.iter().any(|e| !e.chain.is_empty());
    for s in st.rt.sessions().all() {
        if s.live
            .catalog_seen
            .fetch_max(changed.version, Ordering::AcqRel)
            >= changed.version
        {
            continue;
        }
        // What changed for the session's own endpoint (`/mcp`'s lists, or its endpoint's).
        for m in changed.lists_for(s.init.endpoint.as_deref()) {
            let msg = Message::notification(m, None);
            if hooked {
                // Response hooks see gateway notifications too; run them beside.
                let st = st.clone();
                let s = s.clone();
                tokio::spawn(async move {
                    if let Ok(msg) = to_client(&st, &s, msg, None).await {
                        s.send_unrelated(msg);
                    }
                });
            } else {
                s.send_unrelated(msg);
            }
        }
    }
}

/// An upstream reply stream opened or paused: tell the client's side of that call.
fn on_stream(
    st: &Arc<State>,
    conn: &Connection,
    related: u64,
    paused: bool,
    retry: Option<Duration>,
) {
    if let Some(sink) = st.rt.calls().sink(conn.serial(), related) {
        let ms = retry.map(|r| r.as_millis() as u64);
        let _ = sink.send(if paused {
            Out::Pause(ms)
        } else {
            Out::Open(ms)
        });
    }
}

/// Route a message an upstream started to the right client (or answer it here).
async fn on_message(
    st: &Arc<State>,
    slot: &Arc<Slot>,
    conn: &Connection,
    owner: Option<Arc<Session>>,
    inc: Incoming,
) {
    let Incoming { mut msg, related } = inc;
    let method = msg.method().unwrap_or("").to_string();
    let up = slot.spec.id.as_str();
    // Tasks: their status goes to the client that created them, and whatever names a task
    // names it by the gateway's id.
    if method == "notifications/tasks/status" {
        if let Some((session, msg)) = super::tasks::status_for_client(st, slot, &msg) {
            deliver(st, &session, None, msg, up).await;
        }
        return;
    }
    super::tasks::map_related(st, slot, &mut msg);
    // The call this message belongs to: the request whose stream carried it, or for progress
    // its token (which is the upstream id Sluice gave the call).
    let route_key = match (related, method.as_str()) {
        (_, "notifications/progress") => msg
            .params()
            .and_then(|p| p.get("progressToken"))
            .and_then(Value::as_u64)
            .or(related),
        (Some(r), _) => Some(r),
        _ => None,
    };
    let route = route_key.and_then(|k| st.rt.calls().route(conn.serial(), k));

    if msg.kind() == Kind::Notification {
        match method.as_str() {
            "notifications/progress" => {
                let Some((session, token, sink)) = route else {
                    tracing::debug!(upstream = %up, "progress for no known call");
                    return;
                };
                let Some(token) = token else { return };
                msg.params_mut().insert("progressToken".into(), token);
                deliver(st, &session, Some(&sink), msg, up).await;
                return;
            }
            "notifications/cancelled" => {
                // The upstream withdrew a request it sent to a client.
                let up_id = msg.params().and_then(|p| p.get("requestId")).cloned();
                for s in st.rt.sessions().all() {
                    let found = s
                        .routes
                        .server_requests
                        .lock()
                        .iter()
                        .find(|(_, p)| {
                            p.conn.serial() == conn.serial()
                                && Some(&p.upstream_id) == up_id.as_ref()
                        })
                        .map(|(k, _)| k.clone());
                    if let Some(k) = found {
                        s.routes.server_requests.lock().remove(&k);
                        msg.params_mut().insert("requestId".into(), json!(k));
                        deliver(st, &s, None, msg.clone(), up).await;
                    }
                }
                return;
            }
            "notifications/resources/updated" => {
                // A skill file's URI as clients know it.
                let snap = st.snapshot();
                if let Some(i) = snap.slots.iter().position(|s| Arc::ptr_eq(s, slot)) {
                    let now = msg.param_str("uri").unwrap_or("");
                    if let Cow::Owned(shown) = snap.catalog.skills.shown(i, now) {
                        msg.set_param("uri", json!(shown));
                    }
                }
                let uri = msg.param_str("uri").unwrap_or("").to_string();
                st.rt.listeners().resource_updated(&uri);
                let targets: Vec<_> = match &owner {
                    Some(s) => vec![s.clone()],
                    None => st.rt.sessions().all(),
                };
                for s in targets {
                    let subscribed = s.live.subscriptions.lock().contains(&uri);
                    if subscribed {
                        deliver(st, &s, None, msg.clone(), up).await;
                    }
                }
                return;
            }
            _ => {}
        }
        // Logging and any other notification: to the call it belongs to, else the owning
        // session, else (a shared process) the latest call in flight on the connection, else
        // every session (a shared upstream speaks to all).
        let route = route.or_else(|| {
            owner
                .is_none()
                .then(|| st.rt.calls().latest_on(conn.serial()))
                .flatten()
                .map(|(s, sink)| (s, None, sink))
        });
        if let Some((session, _, sink)) = route {
            deliver(st, &session, Some(&sink), msg, up).await;
        } else if let Some(s) = owner {
            deliver(st, &s, None, msg, up).await;
        } else {
            for s in st.rt.sessions().all() {
                deliver(st, &s, None, msg.clone(), up).await;
            }
        }
        return;
    }

    // A request from the upstream.
    let up_id = msg.id().cloned().unwrap_or(Value::Null);
    if method == "ping" {
        let _ = conn.send(&Message::response(up_id, json!({})));
        return;
    }
    // Which client: the one whose call caused it, else the session owning the connection, else
    // (a shared process) the client with the most recent call in flight on it.
    let target = route
        .as_ref()
        .map(|(s, _, sink)| (s.clone(), Some(sink.clone())))
        .or_else(|| owner.clone().map(|s| (s, None)))
        .or_else(|| {
            st.rt
                .calls()
                .latest_on(conn.serial())
                .map(|(s, sink)| (s, Some(sink)))
        });
    let Some((session, sink)) = target else {
        let err = RpcError::new(
            codes::METHOD_NOT_FOUND,
            format!("Sluice has no client session to forward {method} to"),
        );
        let _ = conn.send(&Message::error(up_id, &err));
        return;
    };
    if let Some(cap) = client_capability_for(&method) {
        if !session.has_capability(cap) {
            let err = RpcError::new(
                codes::METHOD_NOT_FOUND,
                format!(
                    "The client did not declare the {cap} capability; {method} is not available"
                ),
            );
            let _ = conn.send(&Message::error(up_id, &err));
            // A modern client's call fails with MissingRequiredClientCapability (-32021); its
            // round cancels the call upstream.
            if let (true, Some(sink)) = (session.is_modern(), sink.as_ref()) {
                let missing = RpcError::new(
                    codes::MISSING_REQUIRED_CLIENT_CAPABILITY,
                    format!("Missing required client capability: {cap} (the upstream asked for {method})"),
                )
                .with_data(json!({"requiredCapabilities": {cap: {}}}));
                let _ = send_msg(sink, Message::error(Value::Null, &missing));
            }
            return;
        }
    }
    let client_id = session.mint_request_id();
    // With hooks, the request is kept: the client's reply passes the request hooks beside it.
    let request = (!st.snapshot().chain.is_empty()).then(|| {
        let mut m = msg.clone();
        m.set_id(json!(client_id.clone()));
        m
    });
    session.routes.server_requests.lock().insert(
        client_id.clone(),
        PendingServerRequest {
            conn: conn.clone(),
            upstream_id: up_id.clone(),
            request,
        },
    );
    msg.set_id(json!(client_id.clone()));
    if let Err(refusal) = try_deliver(st, &session, sink.as_ref(), msg, up).await {
        // A response hook refused the request on its way to the client: the upstream hears why
        // (-32031, with the reason when it is meant to be shown).
        session.routes.server_requests.lock().remove(&client_id);
        let _ = conn.send(&refusal.to_error(sluice_hooks::Phase::Response, up_id));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing;

    #[tokio::test]
    async fn a_change_is_announced_once_and_never_to_a_session_that_began_after_it() {
        let st = testing::state(&[testing::expose(&["fx"])], &[]);
        let (session, mut out) = testing::session();
        session.live.catalog_seen.store(5, Ordering::Release);
        st.rt.sessions().add(session.clone());
        let tools = vec!["notifications/tools/list_changed"];
        // A change the session's own catalog already holds: nothing to say.
        announce(
            &st,
            &Changed {
                endpoints: Vec::new(),
                version: 5,
                lists: tools.clone(),
            },
        );
        assert!(out.try_recv().is_err());
        // A later one: said once, even if published twice.
        announce(
            &st,
            &Changed {
                endpoints: Vec::new(),
                version: 6,
                lists: tools.clone(),
            },
        );
        announce(
            &st,
            &Changed {
                endpoints: Vec::new(),
                version: 6,
                lists: tools,
            },
        );
        match out.try_recv() {
            Ok(Out::Msg(m)) => assert_eq!(m.method(), Some("notifications/tools/list_changed")),
            other => panic!("expected the notification, got {other:?}"),
        }
        assert!(out.try_recv().is_err());
    }
}
