//! The 2026-07-28 era on stdio: requests carry `_meta` and need no `initialize`; each is
//! admitted (`modern::admit`, without the header rules: stdio has no headers), runs on its own
//! session and writes its messages to stdout; `notifications/cancelled` cancels one (and ends a
//! `subscriptions/listen` stream).

use crate::channel::Out;
use crate::modern::rounds::{start, Rounds};
use crate::modern::{self, hooked, listen, Admitted};
use crate::state::State;
use parking_lot::Mutex;
use serde_json::Value;
use sluice_core::{Kind, Message, Principal};
use std::collections::HashMap;
use std::sync::Arc;
use tokio::sync::mpsc;

/// The modern requests running on one stdio connection, by request id.
#[derive(Default)]
pub(crate) struct Stdio {
    running: Arc<Mutex<HashMap<String, tokio::task::AbortHandle>>>,
    /// The endpoint served (`None`: `/mcp`'s).
    endpoint: Option<Arc<str>>,
}

impl Stdio {
    /// Serving `endpoint` (`None`: what `/mcp` serves).
    pub(crate) fn on(endpoint: Option<Arc<str>>) -> Stdio {
        Stdio {
            endpoint,
            ..Stdio::default()
        }
    }

    /// Is this message for the modern side: a request naming a modern version in `_meta` (or
    /// `server/discover`), or the cancellation of one?
    pub(crate) fn wants(&self, msg: &Message) -> bool {
        modern::detect_line(msg)
    }

    /// Serve one modern message; everything it produces goes to `out`.
    pub(crate) fn handle(
        &self,
        st: &Arc<State>,
        rounds: &Arc<Rounds>,
        msg: Message,
        out: &mpsc::UnboundedSender<Out>,
    ) {
        let send = |m: Message| {
            let _ = out.send(Out::Msg(m));
        };
        if msg.kind() == Kind::Notification {
            let key = msg
                .params()
                .and_then(|p| p.get("requestId"))
                .map(crate::session::id_key);
            if let Some(task) = key.and_then(|k| self.running.lock().remove(&k)) {
                task.abort();
            }
            return;
        }
        let id = msg.id().cloned().unwrap_or(Value::Null);
        let key = crate::session::id_key(&id);
        let (msg_out, mut msg_rx) = mpsc::unbounded_channel::<Message>();
        match modern::admit(st, &msg, None) {
            Err(refusal) => return send(Message::error(id, &refusal.error)),
            Ok(Admitted::Discover(reply)) => {
                let own = self.endpoint.as_deref();
                let reply = own
                    .and_then(|e| modern::discover_on(st, e, id.clone()))
                    .unwrap_or(reply);
                let (st, endpoint) = (st.clone(), self.endpoint.clone());
                tokio::spawn(async move {
                    let principal = Some(Arc::new(Principal::stdio()));
                    let endpoint = endpoint.as_deref();
                    let reply = hooked::discover(&st, msg, None, principal, endpoint, reply).await;
                    let _ = msg_out.send(reply);
                });
            }
            Ok(Admitted::Listen) => {
                // Through the hooks, then the stream (until the request is cancelled).
                let (st, endpoint) = (st.clone(), self.endpoint.clone());
                tokio::spawn(async move {
                    let principal = Some(Arc::new(Principal::stdio()));
                    let endpoint = endpoint.as_deref();
                    let msg = match hooked::listen(&st, msg, None, principal, endpoint).await {
                        Ok(msg) => msg,
                        Err(reply) => return drop(msg_out.send(reply)),
                    };
                    let (ack, mut rx) = listen::subscribe(&st, id, &msg, endpoint);
                    let _ = msg_out.send(ack);
                    loop {
                        let m = tokio::select! {
                            m = rx.recv() => m,
                            () = msg_out.closed() => None,
                        };
                        if m.is_none_or(|m| msg_out.send(m).is_err()) {
                            return;
                        }
                    }
                });
            }
            Ok(Admitted::Call { requested }) => {
                let principal = Some(Arc::new(Principal::stdio()));
                let endpoint = self.endpoint.as_deref();
                let session =
                    modern::ephemeral_session_on(st, None, &msg, &requested, principal, endpoint);
                tokio::spawn(start(st.clone(), rounds.clone(), session, msg, msg_out));
            }
        }
        // Aborting the forwarder drops the receiver, which cancels the round's call.
        let out = out.clone();
        let running = self.running.clone();
        let done_key = key.clone();
        let forward = tokio::spawn(async move {
            while let Some(m) = msg_rx.recv().await {
                if out.send(Out::Msg(m)).is_err() {
                    break;
                }
            }
            running.lock().remove(&done_key);
        });
        self.running.lock().insert(key, forward.abort_handle());
    }
}
