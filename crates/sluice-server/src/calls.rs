//! The call table: every call forwarded upstream, by (connection serial, the id it carries
//! upstream), so that what an upstream sends about a call (progress, logging, requests to the
//! client, its reply stream) finds the client that made it.

use crate::channel::Sink;
use crate::session::Session;
use foldhash::HashMap;
use parking_lot::Mutex;
use serde_json::Value;
use std::sync::Arc;

/// A forwarded call, found again by the id it carries upstream.
pub struct CallRoute {
    /// The session that made it.
    pub session: Arc<Session>,
    /// The client's own progress token, if it asked for progress.
    pub progress_token: Option<Value>,
    /// Where related messages go.
    pub sink: Sink,
}

/// Every call in flight upstream.
#[derive(Default)]
pub struct CallTable(Mutex<HashMap<(u64, u64), CallRoute>>);

impl CallTable {
    /// Record a forwarded call.
    pub fn track(&self, conn: u64, upstream_id: u64, route: CallRoute) {
        self.0.lock().insert((conn, upstream_id), route);
    }

    /// Forget a forwarded call.
    pub fn untrack(&self, conn: u64, upstream_id: u64) {
        self.0.lock().remove(&(conn, upstream_id));
    }

    /// The session, progress token and sink of a call.
    pub fn route(
        &self,
        conn: u64,
        upstream_id: u64,
    ) -> Option<(Arc<Session>, Option<Value>, Sink)> {
        self.0
            .lock()
            .get(&(conn, upstream_id))
            .map(|r| (r.session.clone(), r.progress_token.clone(), r.sink.clone()))
    }

    /// The sink of a call.
    pub fn sink(&self, conn: u64, upstream_id: u64) -> Option<Sink> {
        self.0
            .lock()
            .get(&(conn, upstream_id))
            .map(|r| r.sink.clone())
    }

    /// The session and sink of the most recent call in flight on a connection (for messages a
    /// shared stdio upstream sends without saying which call they belong to).
    pub fn latest_on(&self, conn: u64) -> Option<(Arc<Session>, Sink)> {
        self.0
            .lock()
            .iter()
            .filter(|((serial, _), _)| *serial == conn)
            .max_by_key(|((_, id), _)| *id)
            .map(|(_, r)| (r.session.clone(), r.sink.clone()))
    }

    /// Forget every call of a session (it ended).
    pub fn forget_session(&self, session: &Arc<Session>) {
        self.0
            .lock()
            .retain(|_, r| !Arc::ptr_eq(&r.session, session));
    }
}
