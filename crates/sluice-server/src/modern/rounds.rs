//! A modern call's rounds. A round follows the call until its reply or until the upstream asks
//! the client something (sampling, elicitation, roots); then the call is parked, and the round
//! ends with an `input_required` result whose signed `requestState` (see [`super::state`]) the
//! client's retry brings back with `inputResponses`. The retry resumes the parked call: the
//! answers go to the upstream and the next round follows the call on. A client that closes the
//! response stream (or a parked call that expires, or is pushed out of the bounded table)
//! cancels the call upstream.
//!
//! ```text
//! retry = the same request (method and params) + "requestState": "sluice1.…"
//!         + "inputResponses": {"<input request key>": <the client's result>, …}
//! ```
//!
//! Answers missing from a retry are asked for again, under a fresh state. Each answer goes
//! through the request hooks as a legacy client's reply would (`proxy::client_message`).

use super::state::{self, Claims, Signer};
use super::{decorate, log_rank, strip_meta, wanted_log_rank};
use crate::channel::{is_reply, Out};
use crate::proxy;
use crate::session::Session;
use crate::state::State;
use parking_lot::Mutex;
use serde_json::{json, Map, Value};
use sluice_core::{codes, Kind, Message, RpcError};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

/// How long a client has to answer an `input_required` result.
const STATE_TTL: Duration = Duration::from_secs(300);
/// Calls waiting for a client's input at once; the oldest is cancelled beyond this.
const MAX_PARKED: usize = 10_000;

/// What the modern era keeps between a call's rounds: the calls waiting for a client's input,
/// and the signer of their `requestState`. Built by the server, handed to the modern faces.
#[derive(Default)]
pub(crate) struct Rounds {
    signer: Signer,
    parked: Mutex<HashMap<String, Parked>>,
    /// In a cluster, this replica's id: parked calls are named `<replica>.<token>`, so a retry
    /// that reaches another replica is handed to this one.
    replica: Option<Arc<str>>,
}

impl Rounds {
    /// The rounds of a cluster replica: states every replica can check, naming this one.
    pub(crate) fn for_cluster(keys: &[[u8; 32]], replica: Arc<str>) -> Rounds {
        Rounds {
            signer: Signer::for_cluster(keys),
            parked: Mutex::default(),
            replica: Some(replica),
        }
    }

    /// The replica holding the call a retry continues, when it is another one (the state
    /// verifies, and names it).
    pub(crate) fn elsewhere(&self, msg: &Message, principal: Option<&str>) -> Option<String> {
        let me = self.replica.as_deref()?;
        let request_state = msg
            .param_str("requestState")
            .filter(|s| s.starts_with(state::PREFIX))?;
        let digest = state::digest_of(msg);
        let key = self
            .signer
            .open(request_state, &digest, principal, state::unix_now())
            .ok()?;
        let (replica, _) = key.split_once('.')?;
        (replica != me).then(|| replica.to_string())
    }
}

/// A call in flight upstream: the session it runs on, the channel it emits on, and the guard
/// that cancels it.
struct Call {
    session: Arc<Session>,
    rx: mpsc::UnboundedReceiver<Out>,
    guard: CancelGuard,
}

/// What identifies the client's request across its rounds: its id (every round's reply takes
/// it), its method, and its [`state::digest_of`].
struct Request {
    id: Value,
    method: String,
    digest: Digest,
}

/// A request's [`state::digest_of`], worked out when its call parks (most calls never do): until
/// then, the text the request came as (a request parsed into a tree has it worked out at once).
enum Digest {
    Ready(String),
    Later(Arc<str>),
}

impl Digest {
    fn of(msg: &Message) -> Digest {
        match msg.received_text() {
            Some(text) => Digest::Later(text),
            None => Digest::Ready(state::digest_of(msg)),
        }
    }

    fn get(self) -> String {
        match self {
            Digest::Ready(d) => d,
            Digest::Later(text) => {
                let msg = Message::parse(text.as_bytes()).expect("read as a request already");
                state::digest_of(&msg)
            }
        }
    }
}

/// A call waiting for the client's answers to its input requests.
struct Parked {
    call: Call,
    /// Input request key → the id Sluice gave the upstream's request, and the request itself.
    pending: Vec<(String, Value)>,
    expires: Instant,
}

/// Cancels the call (the upstream hears `notifications/cancelled`) when dropped armed: the
/// client closed the response stream, or a parked call expired.
struct CancelGuard {
    st: Arc<State>,
    session: Arc<Session>,
    id: Value,
    work: tokio::task::AbortHandle,
    armed: bool,
}

impl Drop for CancelGuard {
    fn drop(&mut self) {
        if self.armed {
            tracing::debug!(session = %self.session.id, "modern request cancelled: its response stream closed");
            crate::proxy::forward::cancel(
                &self.st,
                &self.session,
                &self.id,
                Some(&json!("the client closed the response stream")),
            );
            self.work.abort();
        }
    }
}

/// Run a modern request (a first attempt, or a retry bringing `requestState`) and emit its
/// notifications and its final message on `out`; dropping the receiver of `out` cancels it.
pub(crate) async fn start(
    st: Arc<State>,
    rounds: Arc<Rounds>,
    session: Arc<Session>,
    msg: Message,
    out: mpsc::UnboundedSender<Message>,
) {
    let id = msg.id().cloned().unwrap_or(Value::Null);
    let method = msg.method().unwrap_or("").to_string();
    if let Some(request_state) = msg
        .param_str("requestState")
        .filter(|s| s.starts_with(state::PREFIX))
        .map(str::to_string)
    {
        return resume(st, rounds, session, msg, &request_state, out).await;
    }
    let digest = Digest::of(&msg);
    let log = wanted_log_rank(&msg);
    let msg = strip_meta(msg);
    let (tx, rx) = mpsc::unbounded_channel::<Out>();
    let work = {
        let st = st.clone();
        let session = session.clone();
        tokio::spawn(async move {
            let snap = st.snapshot_for(&session);
            let outcome = proxy::modern_request(&st, &snap, &session, msg, &tx).await;
            let _ = tx.send(Out::Msg(outcome.into_reply()));
        })
    };
    let guard = CancelGuard {
        st: st.clone(),
        session: session.clone(),
        id: id.clone(),
        work: work.abort_handle(),
        armed: true,
    };
    let call = Call { session, rx, guard };
    let request = Request { id, method, digest };
    round(st, rounds, call, request, log, out).await
}

/// Follow a call until its reply or its first request for input, emitting its notifications
/// on `out`. A request the upstream sends the client ends the round with an `input_required`
/// result and parks the call. When the receiver of `out` goes away (the client closed the
/// stream) the guard cancels the call.
async fn round(
    st: Arc<State>,
    rounds: Arc<Rounds>,
    mut call: Call,
    request: Request,
    log: Option<u8>,
    out: mpsc::UnboundedSender<Message>,
) {
    loop {
        let item = tokio::select! {
            i = call.rx.recv() => i,
            () = out.closed() => return,
        };
        let Some(item) = item else {
            call.guard.armed = false;
            let err = RpcError::internal("the call ended without a reply");
            let _ = out.send(Message::error(request.id, &err));
            return;
        };
        let Out::Msg(m) = item else { continue };
        if is_reply(&m) {
            // The call needs a capability the client lacks: it fails, and stops upstream
            // (the guard stays armed).
            call.guard.armed = m.error_code() == Some(codes::MISSING_REQUIRED_CLIENT_CAPABILITY);
            let mut m = m;
            m.set_id(request.id);
            let _ = out.send(decorate(&st, &call.session, &request.method, m));
            return;
        }
        if m.kind() == Kind::Request {
            let method = request.method.clone();
            let session = call.session.clone();
            let parked = park(&rounds, call, m, request);
            let reply = decorate(&st, &session, &method, parked);
            let _ = out.send(reply);
            return;
        }
        if m.method() == Some("notifications/message") {
            // Log messages only for a request that opted in, at or above its level.
            let level = m.param_str("level").and_then(log_rank).unwrap_or(0);
            if log.is_none_or(|min| level < min) {
                continue;
            }
        }
        if out.send(m).is_err() {
            return;
        }
    }
}

/// Park a call that needs the client's input; answer `input_required` with every input request
/// that is already waiting (one round gathers what the upstream asked for at once).
fn park(rounds: &Rounds, mut call: Call, first: Message, request: Request) -> Message {
    let mut requests = vec![first];
    while let Ok(Out::Msg(m)) = call.rx.try_recv() {
        if m.kind() == Kind::Request {
            requests.push(m);
        }
        // Anything else arriving in the same instant is dropped: the round is over.
    }
    let pending: Vec<(String, Value)> = requests
        .iter()
        .filter_map(|r| {
            let key = r.id()?.as_str()?.to_string();
            let mut req = Map::new();
            req.insert("method".into(), json!(r.method().unwrap_or("")));
            if let Some(p) = r.params() {
                req.insert("params".into(), p.clone());
            }
            Some((key, Value::Object(req)))
        })
        .collect();
    let token = match &rounds.replica {
        Some(r) => format!("{r}.{}", uuid::Uuid::new_v4().simple()),
        None => uuid::Uuid::new_v4().simple().to_string(),
    };
    let principal = call.session.principal().map(|p| p.id.clone());
    let state = rounds.signer.sign(&Claims {
        token: token.clone(),
        principal,
        digest: request.digest.get(),
        expires: state::unix_now() + STATE_TTL.as_secs(),
    });
    let input_requests: Map<String, Value> = pending.iter().cloned().collect();
    {
        let mut parked = rounds.parked.lock();
        let now = Instant::now();
        // Expired calls are cancelled (their guards drop armed); the table stays bounded.
        parked.retain(|_, p| p.expires > now);
        if parked.len() >= MAX_PARKED {
            if let Some(oldest) = parked
                .iter()
                .min_by_key(|(_, p)| p.expires)
                .map(|(k, _)| k.clone())
            {
                parked.remove(&oldest);
            }
        }
        parked.insert(
            token,
            Parked {
                call,
                pending,
                expires: now + STATE_TTL,
            },
        );
    }
    tracing::debug!(
        method = request.method,
        "modern call waits for the client's input"
    );
    Message::response(
        request.id,
        json!({
            "resultType": "input_required",
            "inputRequests": input_requests,
            "requestState": state,
        }),
    )
}

/// A retry carrying `requestState`: verify it, hand the client's answers to the waiting
/// upstream requests, and follow the call on.
async fn resume(
    st: Arc<State>,
    rounds: Arc<Rounds>,
    session: Arc<Session>,
    msg: Message,
    request_state: &str,
    out: mpsc::UnboundedSender<Message>,
) {
    let id = msg.id().cloned().unwrap_or(Value::Null);
    let method = msg.method().unwrap_or("").to_string();
    let invalid = |why: &str| {
        let _ = out.send(Message::error(
            id.clone(),
            &RpcError::invalid_params(format!("Invalid requestState: {why}")),
        ));
    };
    let digest = state::digest_of(&msg);
    let principal = session.principal().map(|p| p.id.clone());
    let key = match rounds.signer.open(
        request_state,
        &digest,
        principal.as_deref(),
        state::unix_now(),
    ) {
        Ok(key) => key,
        Err(why) => return invalid(why),
    };
    let parked = {
        let mut calls = rounds.parked.lock();
        // The URL judges a 2026-07-28 request: a retry continues only a call begun on its own
        // endpoint (the call stays parked for the right one).
        let here = |p: &Parked| p.call.session.init.endpoint == session.init.endpoint;
        if calls.get(&key).is_some_and(|p| !here(p)) {
            drop(calls);
            return invalid("the call it continues was begun at another endpoint");
        }
        calls.remove(&key)
    };
    let Some(parked) = parked else {
        return invalid("the call it continues is gone (answered already, expired, or on another gateway instance)");
    };
    let responses = msg
        .params()
        .and_then(|p| p.get("inputResponses"))
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let Parked {
        mut call, pending, ..
    } = parked;
    let mut missing = Vec::new();
    for (key, request) in pending {
        match responses.get(&key) {
            // Through the request hooks, as a legacy client's reply to the upstream's request
            // (a refusal answers the upstream with the hook's error).
            Some(answer) => {
                let reply = Message::response(json!(key), answer.clone());
                crate::proxy::client_message(&st, &call.session, reply).await;
            }
            None => missing.push((key, request)),
        }
    }
    if !missing.is_empty() {
        // Ask again for what is still missing (the spec's advice), under a fresh state.
        let first = {
            let (key, req) = &missing[0];
            Message::request(
                json!(key),
                req["method"].as_str().unwrap_or(""),
                req.get("params").cloned(),
            )
        };
        let (tx, rx2) = mpsc::unbounded_channel::<Out>();
        for (key, req) in missing.iter().skip(1) {
            let _ = tx.send(Out::Msg(Message::request(
                json!(key),
                req["method"].as_str().unwrap_or(""),
                req.get("params").cloned(),
            )));
        }
        drop(tx);
        // Re-park with the original receiver; the extra requests ride in front of it.
        call.rx = merge(rx2, call.rx);
        let digest = Digest::Ready(digest);
        let _ = out.send(park(&rounds, call, first, Request { id, method, digest }));
        return;
    }
    let log = wanted_log_rank(&msg);
    let digest = Digest::Ready(digest);
    round(st, rounds, call, Request { id, method, digest }, log, out).await
}

/// One receiver that yields everything of `a`, then everything of `b`.
fn merge(
    mut a: mpsc::UnboundedReceiver<Out>,
    mut b: mpsc::UnboundedReceiver<Out>,
) -> mpsc::UnboundedReceiver<Out> {
    let (tx, rx) = mpsc::unbounded_channel();
    while let Ok(m) = a.try_recv() {
        let _ = tx.send(m);
    }
    tokio::spawn(async move {
        while let Some(m) = b.recv().await {
            if tx.send(m).is_err() {
                return;
            }
        }
    });
    rx
}
