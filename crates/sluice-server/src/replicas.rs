//! Serving sessions across the replicas of a cluster: finding a session by its sealed id on any
//! replica (opened with the key, checked against the store, taken up here as a local session
//! when another replica began it), feeding a GET stream from the events in the store, sending a
//! client's reply to the replica that asked, and hearing the bus (new events, ended sessions,
//! replies for this replica).

use crate::cluster::{same_principal, Cluster, Sealed};
use crate::control;
use crate::modern::rounds::Rounds;
use crate::modern::{self, Admitted};
use crate::proxy;
use crate::session::{HttpStreams, Outbound, Session, Shared};
use crate::state::State;
use crate::stream::StreamBuf;
use serde_json::{json, Value};
use sluice_cluster::{Bus, BusMsg, StoreError};
use sluice_core::{codes, Kind, Message, Principal, RpcError};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

/// Why a session was not found.
#[derive(Debug)]
pub enum Miss {
    /// Unknown, ended, expired, forged, tampered, sealed under another key, or another
    /// principal's: all answered alike.
    NotFound,
    /// The store did not answer, and the session is not served here yet.
    Unavailable(String),
}

/// Is `session` `principal`'s to use? (Without authentication, anyone's.)
pub fn owned_by(session: &Session, principal: Option<&Principal>) -> bool {
    match (principal, session.principal()) {
        (None, _) => true,
        (Some(p), Some(owner)) => p.id == owner.id && p.kind == owner.kind,
        (Some(_), None) => false,
    }
}

/// The session named `id`, on this replica or taken up from the store; its live state renewed
/// and read from the store. A store that does not answer does not stop a session this replica
/// serves already (single-replica work goes on).
pub async fn find(
    st: &Arc<State>,
    c: &Cluster,
    id: &str,
    principal: Option<&Arc<Principal>>,
) -> Result<Arc<Session>, Miss> {
    let ttl = Duration::from_secs(st.snapshot().settings().session_idle_secs);
    let local = st.rt.sessions.get(id);
    let (handle, sealed) = match &local {
        Some(s) => {
            if !owned_by(s, principal.map(|p| &**p)) {
                return Err(Miss::NotFound);
            }
            match &s.shared {
                Some(sh) => (sh.handle.clone(), None),
                None => return Ok(s.clone()),
            }
        }
        None => {
            let sealed = c.open(id).ok_or(Miss::NotFound)?;
            if !same_principal(principal.map(|p| &**p), sealed.principal.as_ref()) {
                return Err(Miss::NotFound);
            }
            (sealed.handle.clone(), Some(sealed))
        }
    };
    match (c.store.touch(&handle, ttl).await, local, sealed) {
        (Ok(None), local, _) => {
            if local.is_some() {
                control::end_session(st, id).await;
            }
            Err(Miss::NotFound)
        }
        (Ok(Some(fields)), Some(s), _) => {
            if let Some(level) = s.apply_shared(&fields) {
                tell_level(st, &s, level).await;
            }
            Ok(s)
        }
        (Ok(Some(fields)), None, Some(sealed)) => {
            let (s, level) = take_up(st, c, id, sealed, &fields, ttl, principal);
            if let Some(level) = level {
                tell_level(st, &s, level).await;
            }
            Ok(s)
        }
        (Err(e), Some(s), _) => {
            tracing::warn!(session = %id, "serving without the cluster store: {e}");
            Ok(s)
        }
        (Err(e), None, _) => Err(Miss::Unavailable(e.0)),
        (Ok(Some(_)), None, None) => Err(Miss::NotFound),
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
    let session = st.rt.sessions.get_or_add(Arc::new(session));
    c.remember(&sealed.handle, id);
    tracing::info!(session = %id, "session taken up from the cluster");
    (session, level)
}

/// The shared part of a session served by this replica.
pub fn shared(c: &Cluster, handle: String, ttl: Duration, cap: u64) -> Shared {
    Shared::new(handle, c.store.clone(), c.replica.clone(), ttl, cap)
}

/// Bring the session's GET stream up to date with its events in the store.
pub async fn feed(c: &Cluster, session: &Session) -> Result<(), StoreError> {
    let (Some(sh), Some(http)) = (&session.shared, session.http()) else {
        return Ok(());
    };
    let last = http.get.last_seq();
    for (seq, json) in c.store.events_after(&sh.handle, last).await? {
        http.get.push_at(seq, json.into());
    }
    Ok(())
}

/// A client's reply to a request another replica sent it goes to that replica (the request
/// id names it). True when it was sent on (or could not be: logged).
pub async fn forward_reply(c: &Cluster, session: &Session, msg: &Message) -> bool {
    if !matches!(msg.kind(), Kind::Response | Kind::Error) {
        return false;
    }
    let Some(to) = msg
        .id()
        .and_then(Value::as_str)
        .and_then(|id| id.strip_prefix("sluice-"))
        .and_then(|rest| rest.rsplit_once('-'))
        .map(|(replica, _)| replica.to_string())
    else {
        return false;
    };
    if *to == *c.replica {
        return false;
    }
    let payload = json!({"t": "reply", "s": session.id, "m": msg.to_json()}).to_string();
    match c.store.send_to(&to, &payload).await {
        Ok(0) => {
            tracing::warn!(session = %session.id, replica = %to, "the replica that asked is gone; the reply is dropped")
        }
        Ok(_) => {
            tracing::debug!(session = %session.id, replica = %to, "reply sent on to the replica that asked")
        }
        Err(e) => {
            tracing::warn!(session = %session.id, replica = %to, "a reply could not reach the replica that asked: {e}")
        }
    }
    true
}

/// Hand a 2026-07-28 retry to the replica `owner` holding its call; what it emits for the
/// client arrives on the receiver. A replica that is gone, or stops answering, is a -32000
/// naming it.
pub async fn hand_retry(
    st: &State,
    c: &Arc<Cluster>,
    owner: &str,
    msg: &Message,
    principal: Option<&Principal>,
    authorization: Option<&str>,
) -> tokio::sync::mpsc::UnboundedReceiver<Message> {
    let (tx, mut from_owner) = tokio::sync::mpsc::unbounded_channel();
    let (out, rx) = tokio::sync::mpsc::unbounded_channel();
    let corr = uuid::Uuid::new_v4().simple().to_string();
    c.handed.lock().insert(corr.clone(), tx);
    let payload = json!({
        "t": "retry", "c": corr, "f": &*c.replica, "m": msg.to_json(),
        "p": principal.map(Principal::to_json), "a": authorization,
    });
    let id = msg.id().cloned().unwrap_or(Value::Null);
    let who = owner.to_string();
    let fail = move |why: String| {
        Message::error(
            id.clone(),
            &RpcError::new(
                codes::UPSTREAM_UNAVAILABLE,
                format!("The replica holding this call ({who}) {why}; send the request again without requestState"),
            )
            .with_data(json!({"replica": who})),
        )
    };
    match c.store.send_to(owner, &payload.to_string()).await {
        Ok(0) => {
            c.handed.lock().remove(&corr);
            let _ = out.send(fail("is gone".into()));
            return rx;
        }
        Ok(_) => {}
        Err(e) => {
            c.handed.lock().remove(&corr);
            let _ = out.send(fail(format!("could not be reached: {e}")));
            return rx;
        }
    }
    // Relay until the owner's end (its sender dropped), bounded by the request timeout per
    // message so a replica that dies mid-call does not leave the client hanging.
    let wait = Duration::from_millis(st.snapshot().settings().request_timeout_ms);
    let c = c.clone();
    tokio::spawn(async move {
        loop {
            match tokio::time::timeout(wait, from_owner.recv()).await {
                Ok(Some(m)) => {
                    let done = crate::channel::is_reply(&m);
                    if out.send(m).is_err() || done {
                        break;
                    }
                }
                Ok(None) => break,
                Err(_) => {
                    let _ = out.send(fail(format!(
                        "did not answer within {} ms",
                        wait.as_millis()
                    )));
                    break;
                }
            }
        }
        c.handed.lock().remove(&corr);
    });
    rx
}

/// Run here a call another replica handed over (this replica runs the session's own process
/// of that upstream), sending its related messages and reply back there.
async fn run_handed_call(st: &Arc<State>, c: &Arc<Cluster>, v: &Value) -> Option<()> {
    let corr = v.get("c")?.as_str()?.to_string();
    let from = v.get("f")?.as_str()?.to_string();
    let id = v.get("s")?.as_str()?;
    let upstream = v.get("u")?.as_str()?;
    let msg = Message::parse(v.get("m")?.as_str()?.as_bytes()).ok()?;
    let back = |m: &Message| json!({"t": "out", "c": corr, "m": m.to_json()}).to_string();
    let reply_id = msg.id().cloned().unwrap_or(Value::Null);
    let slot = st
        .snapshot()
        .slots
        .iter()
        .find(|s| s.spec.id == upstream)
        .cloned();
    let session = find(st, c, id, None).await.ok();
    if let Some(s) = &session {
        // In use through another replica: not idle here either.
        s.touch();
    }
    let (Some(slot), Some(session)) = (slot, session) else {
        let err = RpcError::new(codes::UPSTREAM_UNAVAILABLE, format!("Upstream '{upstream}' is unavailable: the session or the upstream is gone on the replica that ran its process"))
            .with_data(json!({"upstream": upstream}));
        let _ = c
            .store
            .send_to(&from, &back(&Message::error(reply_id, &err)))
            .await;
        return Some(());
    };
    let (sink, mut related) = tokio::sync::mpsc::unbounded_channel();
    let relay = {
        let (c, from, corr) = (c.clone(), from.clone(), corr.clone());
        tokio::spawn(async move {
            while let Some(out) = related.recv().await {
                if let crate::channel::Out::Msg(m) = out {
                    let p = json!({"t": "out", "c": corr, "m": m.to_json()}).to_string();
                    let _ = c.store.send_to(&from, &p).await;
                }
            }
        })
    };
    let outcome = proxy::forward::call(st, &session, &slot, msg, &sink).await;
    drop(sink);
    let _ = relay.await;
    let _ = c.store.send_to(&from, &back(&outcome.into_reply())).await;
    Some(())
}

/// Continue here a retry another replica handed over, sending what it emits back there.
fn continue_retry(
    st: &Arc<State>,
    rounds: &Arc<Rounds>,
    c: &Arc<Cluster>,
    v: &Value,
) -> Option<()> {
    let corr = v.get("c")?.as_str()?.to_string();
    let from = v.get("f")?.as_str()?.to_string();
    let msg = Message::parse(v.get("m")?.as_str()?.as_bytes()).ok()?;
    let principal = v.get("p").filter(|p| !p.is_null()).map(|p| {
        let kind = match p.get("kind").and_then(Value::as_str) {
            Some("token") => "token",
            Some("jwt") => "jwt",
            _ => "local",
        };
        Arc::new(Principal {
            id: p
                .get("id")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string(),
            kind,
            scopes: serde_json::from_value(p.get("scopes").cloned().unwrap_or(json!([])))
                .unwrap_or_default(),
            claims: p
                .get("claims")
                .and_then(Value::as_object)
                .cloned()
                .unwrap_or_default(),
        })
    });
    let Ok(Admitted::Call { requested }) = modern::admit(st, &msg, None) else {
        return None;
    };
    let authorization = v.get("a").and_then(Value::as_str);
    let session = modern::ephemeral_session(st, authorization, &msg, &requested, principal);
    let (out, mut out_rx) = tokio::sync::mpsc::unbounded_channel::<Message>();
    tokio::spawn(modern::rounds::start(
        st.clone(),
        rounds.clone(),
        session,
        msg,
        out,
    ));
    let c = c.clone();
    tokio::spawn(async move {
        while let Some(m) = out_rx.recv().await {
            let back = json!({"t": "out", "c": corr, "m": m.to_json()}).to_string();
            if let Err(e) = c.store.send_to(&from, &back).await {
                tracing::warn!(replica = %from, "a handed-over call's answer did not reach the replica that asked: {e}");
                return;
            }
        }
        let _ = c
            .store
            .send_to(&from, &json!({"t": "end", "c": corr}).to_string())
            .await;
    });
    Some(())
}

/// A client cancelled a request this replica is not running: every replica hears it, and the
/// one running it stops it (a call runs where its POST landed).
pub async fn forward_cancel(c: &Cluster, session: &Session, msg: &Message) {
    if msg.method() != Some("notifications/cancelled") {
        return;
    }
    let Some(request) = msg.params().and_then(|p| p.get("requestId")) else {
        return;
    };
    if session
        .routes
        .inflight
        .lock()
        .contains_key(&crate::session::id_key(request))
    {
        return;
    }
    let payload = json!({"f": &*c.replica, "s": session.id, "m": msg.to_json()}).to_string();
    if let Err(e) = c.store.cancelled(&payload).await {
        tracing::warn!(session = %session.id, "a cancellation did not reach the other replicas: {e}");
    }
}

/// Another replica heard a cancellation: stop the call here if it runs here.
fn on_cancelled(st: &State, c: &Cluster, payload: &str) {
    let Ok(v) = serde_json::from_str::<Value>(payload) else {
        return;
    };
    if v.get("f").and_then(Value::as_str) == Some(&*c.replica) {
        return;
    }
    let Some(session) = v
        .get("s")
        .and_then(Value::as_str)
        .and_then(|id| st.rt.sessions.get(id))
    else {
        return;
    };
    let Some(msg) = v
        .get("m")
        .and_then(Value::as_str)
        .and_then(|m| Message::parse(m.as_bytes()).ok())
    else {
        return;
    };
    if let Some(request) = msg.params().and_then(|p| p.get("requestId")) {
        proxy::forward::cancel(
            st,
            &session,
            request,
            msg.params().and_then(|p| p.get("reason")),
        );
    }
}

/// A `Last-Event-ID` naming a POST stream of another replica: that replica replays it (and
/// goes on with it) over the bus. None when it is gone or has no such stream (the caller
/// answers 404 as for any stream it cannot resume).
pub async fn replay_elsewhere(
    c: &Arc<Cluster>,
    session: &Session,
    owner: &str,
    last_event_id: &str,
) -> Option<axum::response::Response> {
    use axum::response::IntoResponse;
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let corr = uuid::Uuid::new_v4().simple().to_string();
    c.replaying.lock().insert(corr.clone(), tx);
    let payload = json!({"t": "replay", "c": corr, "f": &*c.replica, "s": session.id,
        "e": last_event_id});
    let forget = |c: &Cluster| {
        c.replaying.lock().remove(&corr);
    };
    if !matches!(c.store.send_to(owner, &payload.to_string()).await, Ok(n) if n > 0) {
        forget(c);
        return None;
    }
    let first = match tokio::time::timeout(c.store.timeout(), rx.recv()).await {
        Ok(Some(Ok(chunk))) => chunk,
        _ => {
            forget(c);
            return None;
        }
    };
    let c = c.clone();
    let body = futures_util::stream::unfold(
        (Some(first), rx, Some((c, corr))),
        |(first, mut rx, mut guard)| async move {
            let chunk = match first {
                Some(f) => Some(f),
                None => rx.recv().await.and_then(Result::ok),
            };
            match chunk {
                Some(b) => Some((
                    Ok::<_, std::convert::Infallible>(bytes::Bytes::from(b)),
                    (None, rx, guard),
                )),
                None => {
                    if let Some((c, corr)) = guard.take() {
                        c.replaying.lock().remove(&corr);
                    }
                    None
                }
            }
        },
    );
    Some(crate::http_parts::sse_headers(
        axum::body::Body::from_stream(body).into_response(),
    ))
}

/// Replay here one of this replica's POST streams for another replica, raw SSE over the bus.
async fn replay_for(st: &Arc<State>, c: &Arc<Cluster>, v: &Value) -> Option<()> {
    use futures_util::StreamExt;
    let corr = v.get("c")?.as_str()?.to_string();
    let from = v.get("f")?.as_str()?.to_string();
    let id = v.get("s")?.as_str()?;
    let (stream, seq) = StreamBuf::parse_event_id(v.get("e")?.as_str()?)?;
    let buf = st.rt.sessions.get(id).and_then(|s| {
        s.http()
            .and_then(|h| h.streams.lock().get(&stream).cloned())
    });
    let Some(buf) = buf else {
        let _ = c
            .store
            .send_to(&from, &json!({"t": "missing", "c": corr}).to_string())
            .await;
        return Some(());
    };
    let mut reader = Box::pin(buf.reader(seq, false, crate::http_parts::KEEPALIVE, None));
    while let Some(Ok(chunk)) = reader.next().await {
        let text = String::from_utf8_lossy(&chunk).into_owned();
        let p = json!({"t": "sse", "c": corr, "b": text}).to_string();
        if !matches!(c.store.send_to(&from, &p).await, Ok(n) if n > 0) {
            return Some(());
        }
    }
    let _ = c
        .store
        .send_to(&from, &json!({"t": "end", "c": corr}).to_string())
        .await;
    Some(())
}

/// Is the session's GET stream attached on this replica?
fn attached(session: &Session) -> bool {
    session.http().is_some_and(|h| *h.get_owner.borrow() != 0)
}

/// A client's reply another replica received for a request this one sent.
fn on_reply(st: &Arc<State>, v: &Value) {
    let parsed = (|| {
        let id = v.get("s")?.as_str()?.to_string();
        let m = Message::parse(v.get("m")?.as_str()?.as_bytes()).ok()?;
        Some((id, m))
    })();
    let Some((id, m)) = parsed else {
        tracing::warn!("a relayed reply that is not one");
        return;
    };
    match st.rt.sessions.get(&id) {
        Some(s) => {
            let st = st.clone();
            tokio::spawn(async move { proxy::client_message(&st, &s, m).await });
        }
        None => tracing::warn!("a reply for a session not served here"),
    }
}

/// Hear the bus until the gateway shuts down (nothing without a cluster).
pub async fn run(st: Arc<State>, rounds: Arc<Rounds>) {
    let Some(c) = st.rt.cluster.clone() else {
        return;
    };
    let mut rx = Bus::start(c.store.clone(), &c.replica);
    loop {
        let msg = tokio::select! {
            m = rx.recv() => match m {
                Some(m) => m,
                None => return,
            },
            () = st.rt.shutdown.cancelled() => return,
        };
        match msg {
            BusMsg::Event { handle, seq } => {
                let Some(s) = c.local(&handle).and_then(|id| st.rt.sessions.get(&id)) else {
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
            BusMsg::Ended(handle) => {
                if let Some(id) = c.local(&handle) {
                    let st = st.clone();
                    tokio::spawn(async move {
                        control::end_session(&st, &id).await;
                    });
                }
            }
            BusMsg::Lists {
                from,
                upstream,
                session,
            } if *from != *c.replica => {
                let slot = st
                    .snapshot()
                    .slots
                    .iter()
                    .find(|s| s.spec.id == upstream)
                    .cloned();
                match (slot, session) {
                    (Some(slot), None) => {
                        tokio::spawn(slot.relist());
                    }
                    (Some(slot), Some(id)) => {
                        // The client's own upstream session here re-reads its lists (opened
                        // now if it was not: its lists are what the client must see here).
                        if let Some(s) = st.rt.sessions.get(&id) {
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
            BusMsg::Direct(payload) => {
                let Ok(v) = serde_json::from_str::<Value>(&payload) else {
                    tracing::warn!("a bus message that is not JSON: {payload}");
                    continue;
                };
                match v.get("t").and_then(Value::as_str) {
                    Some("reply") => on_reply(&st, &v),
                    Some("retry") => {
                        if continue_retry(&st, &rounds, &c, &v).is_none() {
                            tracing::warn!("a handed-over retry that is not one");
                        }
                    }
                    Some("call") => {
                        let (st, c) = (st.clone(), c.clone());
                        tokio::spawn(async move {
                            if run_handed_call(&st, &c, &v).await.is_none() {
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
                            let _ = replay_for(&st, &c, &v).await;
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
            BusMsg::Cancelled(payload) => on_cancelled(&st, &c, &payload),
            BusMsg::Resync => {
                for s in st.rt.sessions.all() {
                    if s.shared.is_some() && attached(&s) {
                        let c = c.clone();
                        tokio::spawn(async move {
                            let _ = feed(&c, &s).await;
                        });
                    }
                }
            }
        }
    }
}
