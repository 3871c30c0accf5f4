//! The call table: every call forwarded upstream, by (connection serial, the id it carries
//! upstream), so that what an upstream sends about a call (progress, logging, requests to the
//! client, its reply stream) finds the client that made it, and a client's cancellation (by
//! the id the client gave it) finds the call.

use crate::channel::Sink;
use crate::session::{id_key, Session};
use foldhash::HashMap;
use parking_lot::Mutex;
use serde_json::Value;
use sluice_core::worker::PerThread;
use sluice_upstream::Connection;
use std::sync::Arc;

/// A forwarded call, found again by the id it carries upstream.
pub(crate) struct CallRoute {
    /// The session that made it.
    pub session: Arc<Session>,
    /// The client's own progress token, if it asked for progress.
    pub progress_token: Option<Value>,
    /// Where related messages go.
    pub sink: Sink,
    /// The id the client gave it.
    pub client_id: Value,
    /// The connection it went to.
    pub conn: Connection,
}

impl CallRoute {
    /// Is this the call of `session` the client gave the id whose key is `client_key`?
    fn is(&self, session: &Session, client_key: &str) -> bool {
        std::ptr::eq(&*self.session, session) && id_key(&self.client_id) == client_key
    }
}

/// One serving thread's calls, by (connection serial, upstream id).
type Shard = Mutex<HashMap<(u64, u64), CallRoute>>;

/// Every call in flight upstream. A call is recorded in the shard of the serving thread that
/// forwards it, where it is forgotten again (a call never leaves its thread), so no call's
/// bookkeeping touches a lock or a table another thread writes; lookups by id (progress,
/// upstream requests, a cancel) look in their own thread's shard first, then in the others.
#[derive(Default)]
pub(crate) struct CallTable(PerThread<Shard>);

impl CallTable {
    /// This thread's shard first, then the others.
    fn shards(&self) -> impl Iterator<Item = &Shard> {
        self.0.mine_first()
    }

    /// Record a forwarded call.
    pub(crate) fn track(&self, conn: u64, upstream_id: u64, route: CallRoute) {
        self.0.mine().lock().insert((conn, upstream_id), route);
    }

    /// Forget a forwarded call; false if it was not recorded (any more).
    pub(crate) fn untrack(&self, conn: u64, upstream_id: u64) -> bool {
        self.shards()
            .any(|shard| shard.lock().remove(&(conn, upstream_id)).is_some())
    }

    /// Take out the call of `session` the client gave `client_id` (its cancellation): the id
    /// it carries upstream, and its route.
    pub(crate) fn take_by_client(
        &self,
        session: &Session,
        client_id: &Value,
    ) -> Option<(u64, CallRoute)> {
        let key = id_key(client_id);
        self.shards().find_map(|shard| {
            let mut calls = shard.lock();
            let found = *calls.iter().find(|(_, r)| r.is(session, &key))?.0;
            calls.remove(&found).map(|r| (found.1, r))
        })
    }

    /// Is a call of `session` with the client's `client_id` in flight?
    pub(crate) fn has_client_call(&self, session: &Session, client_id: &Value) -> bool {
        let key = id_key(client_id);
        self.any(|r| r.is(session, &key))
    }

    /// Has `session` a call in flight?
    pub(crate) fn has_session_calls(&self, session: &Session) -> bool {
        self.any(|r| std::ptr::eq(&*r.session, session))
    }

    /// Is any call in flight one that `f` picks?
    fn any(&self, f: impl Fn(&CallRoute) -> bool) -> bool {
        self.shards().any(|shard| shard.lock().values().any(&f))
    }

    /// Look a call up and take what `f` reads from it.
    fn find<T>(&self, conn: u64, upstream_id: u64, f: impl Fn(&CallRoute) -> T) -> Option<T> {
        self.shards()
            .find_map(|shard| shard.lock().get(&(conn, upstream_id)).map(&f))
    }

    /// The session, progress token and sink of a call.
    pub(crate) fn route(
        &self,
        conn: u64,
        upstream_id: u64,
    ) -> Option<(Arc<Session>, Option<Value>, Sink)> {
        self.find(conn, upstream_id, |r| {
            (r.session.clone(), r.progress_token.clone(), r.sink.clone())
        })
    }

    /// The sink of a call.
    pub(crate) fn sink(&self, conn: u64, upstream_id: u64) -> Option<Sink> {
        self.find(conn, upstream_id, |r| r.sink.clone())
    }

    /// The session and sink of the most recent call in flight on a connection (for messages a
    /// shared stdio upstream sends without saying which call they belong to).
    pub(crate) fn latest_on(&self, conn: u64) -> Option<(Arc<Session>, Sink)> {
        self.shards()
            .filter_map(|shard| {
                shard
                    .lock()
                    .iter()
                    .filter(|((serial, _), _)| *serial == conn)
                    .max_by_key(|((_, id), _)| *id)
                    .map(|((_, id), r)| (*id, r.session.clone(), r.sink.clone()))
            })
            .max_by_key(|(id, _, _)| *id)
            .map(|(_, session, sink)| (session, sink))
    }

    /// Forget every call of a session (it ended).
    pub(crate) fn forget_session(&self, session: &Arc<Session>) {
        for shard in self.shards() {
            shard
                .lock()
                .retain(|_, r| !Arc::ptr_eq(&r.session, session));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::channel::Out;
    use crate::testing;
    use tokio::sync::mpsc;

    fn route(session: &Arc<Session>, token: i64) -> (CallRoute, mpsc::UnboundedReceiver<Out>) {
        let (sink, rx) = mpsc::unbounded_channel();
        let route = CallRoute {
            session: session.clone(),
            progress_token: Some(Value::from(token)),
            sink,
            client_id: Value::from(token),
            conn: testing::connection(),
        };
        (route, rx)
    }

    /// Calls recorded on different serving threads are found, and forgotten, from any thread.
    #[test]
    fn calls_on_several_threads_are_found_and_forgotten_from_any() {
        let table = Arc::new(CallTable::default());
        let (session, _out) = testing::session();
        let mut sinks = Vec::new();
        for (thread, id) in [(1u32, 10u64), (2, 20), (17, 30)] {
            let (r, rx) = route(&session, id as i64);
            sinks.push(rx);
            let table = table.clone();
            std::thread::spawn(move || {
                sluice_core::worker::mark(thread);
                table.track(7, id, r);
            })
            .join()
            .unwrap();
        }
        // From this (unmarked) thread: each is found with its own token.
        for id in [10, 20, 30] {
            let (_, token, _) = table.route(7, id).expect("found");
            assert_eq!(token, Some(Value::from(id as i64)));
            assert!(table.sink(7, id).is_some());
        }
        assert!(table.route(8, 10).is_none(), "another connection's id");
        let (latest, _) = table.latest_on(7).expect("a call on connection 7");
        assert!(Arc::ptr_eq(&latest, &session));
        // Forgotten from another thread than the one that recorded it.
        let t = table.clone();
        std::thread::spawn(move || {
            sluice_core::worker::mark(1);
            t.untrack(7, 20);
        })
        .join()
        .unwrap();
        assert!(table.route(7, 20).is_none());
        assert!(table.route(7, 10).is_some() && table.route(7, 30).is_some());
        table.forget_session(&session);
        for id in [10, 30] {
            assert!(table.route(7, id).is_none());
        }
        assert!(table.latest_on(7).is_none());
    }

    /// A client's cancellation finds its call by the client's id, in its own session only
    /// (`1` is not `"1"`), on whichever thread recorded it; once taken it is gone.
    #[test]
    fn a_call_is_found_by_its_session_and_the_client_id() {
        let table = Arc::new(CallTable::default());
        let (a, _out_a) = testing::session();
        let (b, _out_b) = testing::session();
        let t = table.clone();
        let (r, _rx1) = route(&a, 1);
        std::thread::spawn(move || {
            sluice_core::worker::mark(2);
            t.track(3, 40, r);
        })
        .join()
        .unwrap();
        let (r, _rx2) = route(&b, 1);
        table.track(3, 41, r);
        assert!(table.has_client_call(&a, &Value::from(1)));
        assert!(!table.has_client_call(&a, &Value::from("1")));
        assert!(table.take_by_client(&a, &Value::from("1")).is_none());
        let (up, route) = table.take_by_client(&a, &Value::from(1)).expect("a's call");
        assert_eq!(up, 40);
        assert!(Arc::ptr_eq(&route.session, &a));
        assert!(!table.has_client_call(&a, &Value::from(1)));
        assert!(!table.has_session_calls(&a));
        assert!(!table.untrack(3, 40), "taken already");
        assert!(table.has_session_calls(&b));
        assert!(table.untrack(3, 41));
        assert!(!table.has_session_calls(&b));
    }

    /// The most recent call on a connection is the one with the highest upstream id, whichever
    /// shard holds it.
    #[test]
    fn the_latest_call_is_found_across_shards() {
        let table = Arc::new(CallTable::default());
        let (a, _out_a) = testing::session();
        let (b, _out_b) = testing::session();
        let (r, _rx1) = route(&a, 1);
        table.track(3, 5, r);
        let t = table.clone();
        let (r, _rx2) = route(&b, 2);
        std::thread::spawn(move || {
            sluice_core::worker::mark(4);
            t.track(3, 9, r);
        })
        .join()
        .unwrap();
        let (latest, _) = table.latest_on(3).unwrap();
        assert!(Arc::ptr_eq(&latest, &b));
        table.untrack(3, 9);
        let (latest, _) = table.latest_on(3).unwrap();
        assert!(Arc::ptr_eq(&latest, &a));
    }
}
