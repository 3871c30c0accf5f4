//! Lists as one client's own upstream session shows them. An upstream with a connection per
//! client session (HTTP, or stdio isolated per session) may list other things there than on
//! the slot's control connection: tools it registers per session after `initialize`, or
//! announces with `list_changed` on that session only. The slot reads a session's lists when
//! its connection opens and again after every `list_changed` on it, and keeps them only while
//! they differ from the control connection's (most upstreams list the same everywhere).

use crate::lists::{fetch_lists, UpstreamLists};
use crate::slot::{Slot, SlotEvent};
use crate::Connection;
use serde_json::Value;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Generation numbers of session lists, unique in the process.
static GENERATION: AtomicU64 = AtomicU64::new(1);

impl Slot {
    /// What the session's own connection lists, when it differs from the control
    /// connection's: a generation number (it changes with every re-listing) and the lists.
    pub fn session_lists(&self, session_id: &str) -> Option<(u64, Arc<UpstreamLists>)> {
        self.session_lists
            .of(session_id)
            .lock()
            .get(session_id)
            .cloned()
    }

    /// Read the lists on a session's own connection and keep them when they differ from the
    /// control connection's. True when what is kept changed.
    pub async fn read_session_lists(&self, session_id: &str, conn: &Connection) -> bool {
        let caps = conn
            .init_result()
            .get("capabilities")
            .cloned()
            .unwrap_or(Value::Null);
        let lists = match fetch_lists(conn, &caps, self.timeout()).await {
            Ok(l) => l,
            Err(e) => {
                tracing::warn!(upstream = %self.spec.id, "listing on a session's connection failed: {e}");
                return false;
            }
        };
        let same = self.state.lock().lists.as_ref() == Some(&lists);
        let mut kept = self.session_lists.of(session_id).lock();
        if same {
            return kept.remove(session_id).is_some();
        }
        if kept.get(session_id).is_some_and(|(_, l)| **l == lists) {
            return false;
        }
        let generation = GENERATION.fetch_add(1, Ordering::Relaxed);
        kept.insert(Arc::from(session_id), (generation, Arc::new(lists)));
        true
    }

    /// The upstream said a list changed on a session's own connection: read it again there,
    /// and tell the gateway (which tells that session).
    pub(crate) async fn refresh_session_lists(
        self: Arc<Slot>,
        session: Arc<str>,
        conn: Connection,
        said: &'static str,
    ) {
        self.read_session_lists(&session, &conn).await;
        // Announced even when the kept view did not change: the upstream said so, and the
        // control connection may not have (the client re-lists what is there now).
        let _ = self.env_events().send(SlotEvent::SessionLists {
            slot: self.clone(),
            session,
            said,
        });
    }
}
