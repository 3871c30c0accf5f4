//! What the one seam between the faces and scale-out does ([`Scale`], declared in `scale.rs`
//! beside the runtime that holds it): alone, sessions are in this process's table and nothing is
//! handed over; as a replica of a cluster, sealed session ids, the store, the bus, and hand-overs
//! to the replica that holds a call or a stream. The HTTP face, the driver and the inbound driver
//! call these methods and never ask whether there is a cluster; only the composition
//! (`control.rs`, `lib.rs`) and the bus listener see the [`Cluster`] itself.

use super::{
    delivered, feed, find, forward_cancel, forward_reply, hand_retry, owned_by, replay_elsewhere,
};
use super::{record_ttl, shared, Miss};
use crate::channel::Sink;
use crate::cluster::Cluster;
use crate::modern::rounds::Rounds;
use crate::scale::Scale;
use crate::session::{Init, Session, Shared};
use crate::state::State;
use sluice_cluster::StoreError;
use sluice_core::{Message, Principal};
use sluice_upstream::Slot;
use std::sync::Arc;
use std::time::Duration;

/// A new session's identity, as [`Scale::new_session`] makes it.
pub(crate) struct NewSession {
    /// Its id (a sealed one in a cluster, which any replica can open).
    pub id: String,
    /// What the replicas share of it (in a cluster).
    pub shared: Option<Shared>,
    /// The first number of its streams (in a cluster, one that names this replica).
    pub stream_base: u64,
}

impl Scale {
    /// The session named `id`, when `principal` may use it: from this process's table, or in a
    /// cluster also taken up from the store (a store that does not answer stops only sessions
    /// this replica does not serve yet).
    pub(crate) async fn find(
        &self,
        st: &Arc<State>,
        id: &str,
        principal: Option<&Arc<Principal>>,
    ) -> Result<Arc<Session>, Miss> {
        match self {
            Scale::Alone => st
                .rt
                .sessions()
                .get(id)
                .filter(|s| owned_by(s, principal.map(|p| &**p)))
                .ok_or(Miss::NotFound),
            // Boxed: a session of a cluster may be fetched from the store.
            Scale::Cluster(c) => Box::pin(find(st, c, id, principal)).await,
        }
    }

    /// The identity of a session being initialised: a fresh id alone; in a cluster an id
    /// sealed with what the client said (any replica opens it), its shared part, and streams
    /// numbered for this replica. `ttl`: `session_idle_secs`.
    pub(crate) fn new_session(
        &self,
        init: &Init,
        principal: Option<&Principal>,
        ttl: Duration,
        replay_events: u64,
    ) -> NewSession {
        match self {
            Scale::Alone => NewSession {
                id: uuid::Uuid::new_v4().simple().to_string(),
                shared: None,
                stream_base: 0,
            },
            Scale::Cluster(c) => {
                let (id, handle) = c.seal(init, principal);
                NewSession {
                    id,
                    shared: Some(shared(c, handle, record_ttl(ttl), replay_events)),
                    stream_base: c.stream_base(),
                }
            }
        }
    }

    /// The session was initialised: in a cluster every replica learns of it through the store
    /// before the client has its id. `Err`: the store's reason (the session is not admitted).
    /// `ttl`: `session_idle_secs`.
    pub(crate) async fn admit(&self, session: &Session, ttl: Duration) -> Result<(), String> {
        let (Scale::Cluster(c), Some(sh)) = (self, &session.shared) else {
            return Ok(());
        };
        sh.store
            .create(&sh.handle, record_ttl(ttl))
            .await
            .map_err(|e| e.0.clone())?;
        c.remember(&sh.handle, &session.id);
        Ok(())
    }

    /// A client's message that another replica must see: a reply to a request that replica
    /// sent (handed to it: true, nothing more to do here), a cancellation of a call it runs
    /// (told to it, and handled here as well).
    pub(crate) async fn hand_message(&self, st: &State, session: &Session, msg: &Message) -> bool {
        let Scale::Cluster(c) = self else {
            return false;
        };
        if Box::pin(forward_reply(c, session, msg)).await {
            return true;
        }
        Box::pin(forward_cancel(st, c, session, msg)).await;
        false
    }

    /// A GET stream opens: bring it up to date with the events other replicas added, after
    /// what the session's last GET stream delivered (read from the store, not only heard).
    pub(crate) async fn feed(&self, session: &Session) -> Result<(), StoreError> {
        match self {
            Scale::Alone => Ok(()),
            Scale::Cluster(c) => {
                delivered(c, session).await?;
                feed(c, session).await
            }
        }
    }

    /// Resume, from another replica, a POST stream this one does not have (`stream`, after
    /// `last_event_id`): the replica that ran the request replays it. None: nothing to hand.
    pub(crate) async fn replay_elsewhere(
        &self,
        session: &Session,
        stream: u64,
        last_event_id: &str,
    ) -> Option<axum::response::Response> {
        let Scale::Cluster(c) = self else {
            return None;
        };
        let owner = Cluster::stream_owner(stream).filter(|o| **o != *c.replica)?;
        replay_elsewhere(c, session, &owner, last_event_id).await
    }

    /// A 2026-07-28 retry whose call waits on another replica: that replica continues it, and
    /// what it emits comes back here. None: the call is not waiting elsewhere.
    pub(crate) async fn hand_retry(
        &self,
        st: &State,
        rounds: &Rounds,
        msg: &Message,
        principal: Option<&Principal>,
        authorization: Option<&str>,
        endpoint: Option<&str>,
    ) -> Option<tokio::sync::mpsc::UnboundedReceiver<Message>> {
        let Scale::Cluster(c) = self else {
            return None;
        };
        let owner = rounds.elsewhere(msg, principal.map(|p| p.id.as_str()))?;
        Some(hand_retry(st, c, &owner, msg, principal, authorization, endpoint).await)
    }

    /// A call to an upstream isolated per session (its own stdio process) from a session whose
    /// process may run on another replica: that replica runs it. None: it runs here.
    pub(crate) async fn hand_isolated(
        &self,
        session: &Session,
        slot: &Slot,
        msg: &Message,
        sink: &Sink,
    ) -> Option<Message> {
        match self {
            Scale::Cluster(c) if slot.isolated_stdio() => {
                Box::pin(c.hand_isolated(session, &slot.spec.id, msg, sink, slot.timeout())).await
            }
            _ => None,
        }
    }

    /// A session ended here: this replica stops serving it (the store's record is ended by
    /// whoever ended the session for every replica).
    pub(crate) fn forget(&self, session: &Session) {
        if let (Scale::Cluster(c), Some(sh)) = (self, &session.shared) {
            c.forget(&sh.handle);
        }
    }

    /// Why the cluster's store is down, with the store's name, when it is (for readiness).
    pub(crate) fn store_down(&self) -> Option<(String, String)> {
        match self {
            Scale::Cluster(c) => c.store.down().map(|why| (c.store.shown().to_string(), why)),
            Scale::Alone => None,
        }
    }

    /// `principal`'s connection to the per-user upstream `upstream` was revoked here: the other
    /// replicas forget the grant they hold in memory and close that principal's connection.
    pub(crate) fn user_revoked(&self, upstream: &str, principal: &str) {
        if let Scale::Cluster(c) = self {
            c.user_revoked(upstream, principal);
        }
    }

    /// An upstream's lists changed (`session`: only that session's own upstream session's):
    /// the other replicas re-read them.
    pub(crate) fn lists_changed(&self, upstream: &str, session: Option<&Session>) {
        let Scale::Cluster(c) = self else {
            return;
        };
        match session {
            Some(s) if s.shared.is_some() => c.lists_changed(upstream, Some(&s.id)),
            Some(_) => {}
            None => c.lists_changed(upstream, None),
        }
    }
}
