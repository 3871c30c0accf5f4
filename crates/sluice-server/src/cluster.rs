//! This replica's part of a cluster (`cluster` in `sluice.json`): the keyring that seals and
//! opens session ids, the shared store, this replica's id, and which local sessions are whose
//! handle. A session id sealed here carries what the session fixed at `initialize` (its
//! [`Init`] and principal), so every replica with the key can open it.

use crate::channel::{is_reply, send_msg, Sink};
use crate::session::{Init, Session};
use parking_lot::Mutex;
use serde_json::{json, Value};
use sluice_cluster::{Keyring, Store, StoreError};
use sluice_config::ClusterSettings;
use sluice_core::{codes, Message, Principal, RpcError};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

/// Low bits of an SSE stream number that count a replica's streams.
const STREAM_BITS: u32 = 24;

/// How long a Redis call may take before it counts as failed.
pub(crate) const STORE_TIMEOUT: Duration = Duration::from_millis(1500);

/// This replica's cluster runtime.
pub(crate) struct Cluster {
    /// Seals and opens session ids.
    pub keys: Keyring,
    /// The store every replica shares.
    pub store: Arc<Store>,
    /// This replica's id (random per process): the bus channel it listens on, the prefix of
    /// the request ids it sends clients.
    pub replica: Arc<str>,
    /// Raw SSE of streams another replica replays for a `Last-Event-ID` that reached this
    /// one, by correlation id (`Err`: it has no such stream).
    pub replaying: Mutex<HashMap<String, tokio::sync::mpsc::UnboundedSender<Result<String, ()>>>>,
    /// Local sessions by handle: the session's id, and when this replica last renewed its
    /// record in the store (ms on [`Cluster::clock`]).
    by_handle: Mutex<HashMap<String, (String, u64)>>,
    /// The start of this replica's renewal clock.
    clock: std::time::Instant,
    /// Retries of 2026-07-28 calls handed to the replica holding them, by correlation id:
    /// where that replica's messages for the client go.
    pub handed: Mutex<HashMap<String, tokio::sync::mpsc::UnboundedSender<sluice_core::Message>>>,
}

/// What an opened session id says.
#[derive(Debug, Clone)]
pub(crate) struct Sealed {
    /// The session's handle in the store.
    pub handle: String,
    /// What it fixed at `initialize`.
    pub init: Init,
    /// The principal that began it (`[id, kind]`), when authentication was on.
    pub principal: Option<(String, String)>,
}

impl Cluster {
    /// The runtime of `settings` (nothing is connected yet).
    pub(crate) fn new(settings: &ClusterSettings) -> Result<Cluster, StoreError> {
        let shown = sluice_config::builtin::redis_url_shown(&settings.redis);
        let store = Store::new(&settings.redis, &shown, STORE_TIMEOUT)?;
        // 8 hex digits: also the high bits of this replica's SSE stream numbers, so an event
        // id names the replica whose stream it is.
        let replica = uuid::Uuid::new_v4().simple().to_string()[..8].to_string();
        Ok(Cluster {
            keys: Keyring::new(&settings.keys),
            store: Arc::new(store),
            replica: replica.into(),
            by_handle: Mutex::new(HashMap::new()),
            clock: std::time::Instant::now(),
            handed: Mutex::new(HashMap::new()),
            replaying: Mutex::new(HashMap::new()),
        })
    }

    /// The first SSE stream number of this replica's sessions (its id in the high bits).
    pub(crate) fn stream_base(&self) -> u64 {
        u64::from_str_radix(&self.replica, 16).unwrap_or(0) << STREAM_BITS
    }

    /// The replica whose stream `stream` is (None: a lone gateway's, or the GET stream).
    pub(crate) fn stream_owner(stream: u64) -> Option<String> {
        (stream >> STREAM_BITS != 0).then(|| format!("{:08x}", stream >> STREAM_BITS))
    }

    /// Seal a new session's id: `(id, handle)`.
    pub(crate) fn seal(&self, init: &Init, principal: Option<&Principal>) -> (String, String) {
        let mut doc = json!({
            "v": init.protocol_version,
            "c": *init.capabilities,
            "i": *init.client_info,
            "p": principal.map(|p| json!([p.id, p.kind])),
        });
        // The endpoint it began on (`mcp/endpoints.json`): any replica serves it there alone.
        if let Some(e) = &init.endpoint {
            doc["e"] = json!(**e);
        }
        self.keys.seal(doc.to_string().as_bytes())
    }

    /// Open a session id sealed by any of our keys (None: forged, tampered, truncated, or
    /// sealed under a key we do not hold).
    pub(crate) fn open(&self, id: &str) -> Option<Sealed> {
        let opened = self.keys.open(id)?;
        let doc: Value = serde_json::from_slice(&opened.payload).ok()?;
        let principal = match doc.get("p") {
            Some(Value::Array(a)) => {
                Some((a.first()?.as_str()?.into(), a.get(1)?.as_str()?.into()))
            }
            _ => None,
        };
        Some(Sealed {
            handle: opened.handle,
            init: Init::new(
                doc.get("v")?.as_str()?,
                doc.get("c").cloned().unwrap_or_else(|| json!({})),
                doc.get("i").cloned().unwrap_or(Value::Null),
            )
            .on_endpoint(doc.get("e").and_then(Value::as_str)),
            principal,
        })
    }

    fn now_ms(&self) -> u64 {
        u64::try_from(self.clock.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// A local session now serves `handle` (its record was just written or renewed).
    pub(crate) fn remember(&self, handle: &str, id: &str) {
        let now = self.now_ms();
        self.by_handle
            .lock()
            .insert(handle.to_string(), (id.to_string(), now));
    }

    /// The local session serving `handle`.
    pub(crate) fn local(&self, handle: &str) -> Option<String> {
        self.by_handle.lock().get(handle).map(|(id, _)| id.clone())
    }

    /// Is the local session of `handle` due to renew its record (last renewed `every` ago or
    /// more)? When it is, it counts as renewed now: one renewal per interval, however many
    /// requests arrive meanwhile.
    pub(crate) fn renew_due(&self, handle: &str, every: Duration) -> bool {
        let now = self.now_ms();
        let every = u64::try_from(every.as_millis()).unwrap_or(u64::MAX);
        match self.by_handle.lock().get_mut(handle) {
            Some((_, last)) if now.saturating_sub(*last) >= every => {
                *last = now;
                true
            }
            _ => false,
        }
    }

    /// An upstream said its lists changed (on the upstream session of client session
    /// `session`, when given): every other replica re-reads them.
    pub(crate) fn user_revoked(&self, upstream: &str, principal: &str) {
        let (store, me, up, who) = (
            self.store.clone(),
            self.replica.clone(),
            upstream.to_string(),
            principal.to_string(),
        );
        tokio::spawn(async move {
            if let Err(e) = store.user_revoked(&me, &up, &who).await {
                tracing::warn!(upstream = %up, principal = %who, "other replicas not told of a revoked connection: {e}");
            }
        });
    }

    pub(crate) fn lists_changed(&self, upstream: &str, session: Option<&str>) {
        let session = session.map(str::to_string);
        let (store, me, up) = (
            self.store.clone(),
            self.replica.clone(),
            upstream.to_string(),
        );
        tokio::spawn(async move {
            if let Err(e) = store.lists_changed(&me, &up, session.as_deref()).await {
                tracing::warn!(upstream = %up, "other replicas not told of a list change: {e}");
            }
        });
    }

    /// A call to an `"isolation": "session"` upstream: the session's own process runs on the
    /// first replica that started one (claimed in the store). When that is another replica,
    /// hand the call (already renamed for the upstream) to it and relay what comes back: its
    /// related messages to `sink`, and the reply. None: run it here.
    pub(crate) async fn hand_isolated(
        self: &Arc<Self>,
        session: &Session,
        upstream: &str,
        msg: &Message,
        sink: &Sink,
        timeout: Duration,
    ) -> Option<Message> {
        let sh = session.shared.as_ref()?;
        let field = format!("iso:{upstream}");
        let owner = match self.store.claim(&sh.handle, &field, &self.replica).await {
            Ok(Some(owner)) => owner,
            Ok(None) => return None,
            Err(e) => {
                tracing::warn!(session = %session.id, upstream, "the session's own process runs here: {e}");
                return None;
            }
        };
        if *owner == *self.replica {
            return None;
        }
        let id = msg.id().cloned().unwrap_or(Value::Null);
        let unavailable = |why: String| {
            Message::error(
                id.clone(),
                &RpcError::new(
                    codes::UPSTREAM_UNAVAILABLE,
                    format!("Upstream '{upstream}' is unavailable: this session's own process runs on replica {owner}, which {why}"),
                )
                .with_data(json!({"upstream": upstream, "replica": owner})),
            )
        };
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let corr = uuid::Uuid::new_v4().simple().to_string();
        self.handed.lock().insert(corr.clone(), tx);
        let payload = json!({"t": "call", "c": corr, "f": &*self.replica, "s": session.id,
            "u": upstream, "m": msg.to_json()});
        let sent = self.store.send_to(&owner, &payload.to_string()).await;
        let reply = match sent {
            Ok(0) => {
                // Its process went with it: this call fails, the next starts one here.
                let _ = self.store.unset_if(&sh.handle, &field, &owner).await;
                unavailable("is gone (the process and its state went with it; the next call starts a new one)".into())
            }
            Err(e) => unavailable(format!("cannot be reached: {e}")),
            Ok(_) => loop {
                match tokio::time::timeout(timeout, rx.recv()).await {
                    Ok(Some(m)) if is_reply(&m) => break m,
                    Ok(Some(m)) => {
                        let _ = send_msg(sink, m);
                    }
                    Ok(None) => break unavailable("ended the call without a reply".into()),
                    Err(_) => {
                        break unavailable(format!(
                            "did not answer within {} ms",
                            timeout.as_millis()
                        ))
                    }
                }
            },
        };
        self.handed.lock().remove(&corr);
        Some(reply)
    }

    /// The local session serving `handle` is gone.
    pub(crate) fn forget(&self, handle: &str) {
        self.by_handle.lock().remove(handle);
    }
}

/// Does the principal of a request match the one sealed into a session? Without
/// authentication (`None`) any caller may use any session, as without a cluster.
pub(crate) fn same_principal(
    request: Option<&Principal>,
    sealed: Option<&(String, String)>,
) -> bool {
    match (request, sealed) {
        (None, _) => true,
        (Some(p), Some((id, kind))) => p.id == *id && p.kind == kind,
        (Some(_), None) => false,
    }
}

/// What a sealed session id costs a replica (`bench/cluster` prints it): its length, and the mean
/// µs of sealing one (at `initialize`) and of opening it (a request of a session this replica has
/// not served yet) over `n` of each, with a typical client's capabilities and info and an
/// authenticated principal.
pub fn sealed_id_cost(n: u32) -> (usize, f64, f64) {
    let c = Cluster::new(&ClusterSettings {
        keys: vec![[7; 32], [8; 32]],
        redis: "redis://127.0.0.1:6379/0".into(),
    })
    .expect("a cluster over fixed keys");
    let init = Init::new(
        "2025-11-25",
        json!({"sampling": {}, "elicitation": {}, "roots": {"listChanged": true}}),
        json!({"name": "claude-code", "version": "2.1.0"}),
    );
    let p = Principal {
        id: "ci-bot".into(),
        kind: "token",
        scopes: vec!["mcp".into()],
        claims: Default::default(),
    };
    let t = std::time::Instant::now();
    let mut id = String::new();
    for _ in 0..n {
        id = c.seal(&init, Some(&p)).0;
    }
    let seal = t.elapsed().as_secs_f64() * 1e6 / f64::from(n);
    let t = std::time::Instant::now();
    let mut opened = 0u32;
    for _ in 0..n {
        opened += u32::from(c.open(std::hint::black_box(&id)).is_some());
    }
    let open = t.elapsed().as_secs_f64() * 1e6 / f64::from(n);
    assert_eq!(opened, n, "every sealed id opens");
    (id.len(), seal, open)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cluster(key: u8) -> Cluster {
        Cluster::new(&ClusterSettings {
            keys: vec![[key; 32]],
            redis: "redis://127.0.0.1:1/0".into(),
        })
        .unwrap()
    }

    #[test]
    fn what_initialize_fixed_travels_sealed_in_the_id() {
        let c = cluster(7);
        let init = Init::new(
            "2025-06-18",
            json!({"sampling": {}, "roots": {"listChanged": true}}),
            json!({"name": "x", "version": "1"}),
        );
        let p = Principal {
            id: "alice".into(),
            kind: "token",
            scopes: vec![],
            claims: Default::default(),
        };
        let (id, handle) = c.seal(&init, Some(&p));
        let s = c.open(&id).unwrap();
        assert_eq!(s.handle, handle);
        assert_eq!(s.init.protocol_version, "2025-06-18");
        assert_eq!(s.init.capabilities, init.capabilities);
        assert_eq!(s.init.client_info, init.client_info);
        assert_eq!(s.principal, Some(("alice".into(), "token".into())));
        assert!(same_principal(Some(&p), s.principal.as_ref()));
        let bob = Principal {
            id: "bob".into(),
            ..p.clone()
        };
        assert!(!same_principal(Some(&bob), s.principal.as_ref()));
        let jwt = Principal {
            kind: "jwt",
            ..p.clone()
        };
        assert!(!same_principal(Some(&jwt), s.principal.as_ref()));
        assert!(!same_principal(Some(&p), None));
        assert!(same_principal(None, s.principal.as_ref()));
        // Another cluster's key opens nothing; neither does the plain id of a lone gateway.
        assert!(cluster(8).open(&id).is_none());
        assert!(c.open("0123456789abcdef0123456789abcdef").is_none());
        // The endpoint a session began on travels too; `/mcp`'s says none.
        assert_eq!(s.init.endpoint, None);
        let (id, _) = c.seal(&init.clone().on_endpoint(Some("support")), None);
        assert_eq!(
            c.open(&id).unwrap().init.endpoint.as_deref(),
            Some("support")
        );
    }
}
