//! What a cluster replica hands to the one that holds it, and what it does for another: a
//! client's reply to the replica that asked, a cancellation to the replica that runs the call,
//! a 2026-07-28 retry to the replica holding the parked call, a call to the replica running a
//! session's own isolated process, a `Last-Event-ID` to the replica whose POST stream it names.
//! Each goes over the bus (Redis pub/sub) and its answers come back the same way, under a
//! correlation id.

use crate::cluster::Cluster;
use crate::modern::rounds::Rounds;
use crate::modern::{self, Admitted};
use crate::proxy;
use crate::session::Session;
use crate::state::State;
use crate::stream::StreamBuf;
use serde_json::{json, Value};
use sluice_core::{codes, Kind, Message, Principal, RpcError};
use std::sync::Arc;
use std::time::Duration;

/// A client's reply to a request another replica sent it goes to that replica (the request
/// id names it). True when it was sent on (or could not be: logged).
pub(crate) async fn forward_reply(c: &Cluster, session: &Session, msg: &Message) -> bool {
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
/// client arrives on the receiver; `endpoint` is the one of the URL it came to (`None`:
/// `/mcp`), which judges it there as here. A replica that is gone, or stops answering, is a -32000
/// naming it.
pub(crate) async fn hand_retry(
    st: &State,
    c: &Arc<Cluster>,
    owner: &str,
    msg: &Message,
    principal: Option<&Principal>,
    authorization: Option<&str>,
    endpoint: Option<&str>,
) -> tokio::sync::mpsc::UnboundedReceiver<Message> {
    let (tx, mut from_owner) = tokio::sync::mpsc::unbounded_channel();
    let (out, rx) = tokio::sync::mpsc::unbounded_channel();
    let corr = uuid::Uuid::new_v4().simple().to_string();
    c.handed.lock().insert(corr.clone(), tx);
    // "e": the endpoint of the URL the retry came to (none for /mcp), which judges it there too.
    let payload = json!({
        "t": "retry", "c": corr, "f": &*c.replica, "m": msg.to_json(),
        "p": principal.map(Principal::to_json), "a": authorization, "e": endpoint,
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
pub(super) async fn run_handed_call(st: &Arc<State>, c: &Arc<Cluster>, v: &Value) -> Option<()> {
    let corr = v.get("c")?.as_str()?.to_string();
    let from = v.get("f")?.as_str()?.to_string();
    let id = v.get("s")?.as_str()?;
    let upstream = v.get("u")?.as_str()?;
    let msg = Message::parse(v.get("m")?.as_str()?.as_bytes()).ok()?;
    let back = |m: &Message| json!({"t": "out", "c": corr, "m": m.to_json()}).to_string();
    let reply_id = msg.id().cloned().unwrap_or(Value::Null);
    let slot = st.snapshot().slot(upstream).cloned();
    let session = super::find(st, c, id, None).await.ok();
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
pub(super) fn continue_retry(
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
    let endpoint = v.get("e").and_then(Value::as_str);
    let session =
        modern::ephemeral_session_on(st, authorization, &msg, &requested, principal, endpoint);
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
pub(crate) async fn forward_cancel(st: &State, c: &Cluster, session: &Session, msg: &Message) {
    if msg.method() != Some("notifications/cancelled") {
        return;
    }
    let Some(request) = msg.params().and_then(|p| p.get("requestId")) else {
        return;
    };
    if st.rt.calls().has_client_call(session, request) {
        return;
    }
    let payload = json!({"f": &*c.replica, "s": session.id, "m": msg.to_json()}).to_string();
    if let Err(e) = c.store.cancelled(&payload).await {
        tracing::warn!(session = %session.id, "a cancellation did not reach the other replicas: {e}");
    }
}

/// Another replica heard a cancellation: stop the call here if it runs here.
pub(super) fn on_cancelled(st: &State, c: &Cluster, payload: &str) {
    let Ok(v) = serde_json::from_str::<Value>(payload) else {
        return;
    };
    if v.get("f").and_then(Value::as_str) == Some(&*c.replica) {
        return;
    }
    let Some(session) = v
        .get("s")
        .and_then(Value::as_str)
        .and_then(|id| st.rt.sessions().get(id))
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
pub(crate) async fn replay_elsewhere(
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
pub(super) async fn replay_for(st: &Arc<State>, c: &Arc<Cluster>, v: &Value) -> Option<()> {
    use futures_util::StreamExt;
    let corr = v.get("c")?.as_str()?.to_string();
    let from = v.get("f")?.as_str()?.to_string();
    let id = v.get("s")?.as_str()?;
    let (stream, seq) = StreamBuf::parse_event_id(v.get("e")?.as_str()?)?;
    let buf = st.rt.sessions().get(id).and_then(|s| {
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

/// A client's reply another replica received for a request this one sent.
pub(super) fn on_reply(st: &Arc<State>, v: &Value) {
    let parsed = (|| {
        let id = v.get("s")?.as_str()?.to_string();
        let m = Message::parse(v.get("m")?.as_str()?.as_bytes()).ok()?;
        Some((id, m))
    })();
    let Some((id, m)) = parsed else {
        tracing::warn!("a relayed reply that is not one");
        return;
    };
    match st.rt.sessions().get(&id) {
        Some(s) => {
            let st = st.clone();
            tokio::spawn(async move { proxy::client_message(&st, &s, m).await });
        }
        None => tracing::warn!("a reply for a session not served here"),
    }
}
