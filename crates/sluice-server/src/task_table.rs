//! The gateway's task table: every task a client created through it, under an id the gateway
//! minted (`sluice-task-<uuid>`, opaque: it says nothing of the upstream or of its id there),
//! with its owner, the upstream that runs it and its id there, and the call that created it
//! (for the hooks that guard its result). Ids are looked up with their owner, so another
//! client's id answers exactly as an unknown one. Process-local; bounded; entries expire with
//! the task's own `ttl` (at most a day).

use crate::session::Session;
use parking_lot::Mutex;
use serde_json::Value;
use sluice_upstream::Slot;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How many tasks the table holds (the oldest expire first past it).
const MAX_TASKS: usize = 10_000;
/// The longest a task is kept.
const MAX_TTL: Duration = Duration::from_secs(86_400);

/// One task created through the gateway.
#[derive(Debug)]
pub(crate) struct TaskRoute {
    /// The gateway's id (what the client sees).
    pub id: String,
    /// Who may reach it ([`owner_of`]).
    pub owner: String,
    /// The session that created it (status notifications go there).
    pub session: String,
    /// The upstream that runs it.
    pub slot: Arc<Slot>,
    /// Its id at the upstream.
    pub upstream_id: String,
    /// The upstream speaks 2026-07-28 (the extension) rather than 2025-11-25.
    pub upstream_modern: bool,
    /// The client-facing name of the tool that created it.
    pub tool: String,
    /// The call's arguments (the request the result hooks see).
    pub arguments: Value,
    /// When it expires here.
    pub expires: Instant,
    /// Its place in the order tasks were created here (`tasks/list` pages by it).
    pub seq: u64,
    /// A 2025-11-25 upstream's questions held for a 2026-07-28 client
    /// (`input.rs`).
    pub held: Mutex<HeldInput>,
    /// Told when a question is held.
    pub held_changed: Arc<tokio::sync::Notify>,
}

/// The questions a 2025-11-25 upstream's task asks on the `tasks/result` stream the gateway
/// opened for a 2026-07-28 client.
#[derive(Default)]
pub(crate) struct HeldInput {
    /// That stream is open.
    pub reading: bool,
    /// The session the questions went through (their answers go back through it).
    pub session: Option<Arc<Session>>,
    /// The questions not answered yet, by the id each carries: `{method, params}`.
    pub asked: serde_json::Map<String, Value>,
}

impl std::fmt::Debug for HeldInput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HeldInput")
            .field("reading", &self.reading)
            .field("asked", &self.asked)
            .finish_non_exhaustive()
    }
}

/// Who a session's tasks belong to: a legacy session's own (its upstream sessions hold them),
/// or for a 2026-07-28 client, which has no session, its principal (else every anonymous
/// modern client).
pub(crate) fn owner_of(session: &Session) -> String {
    let principal = session.principal();
    match (session.is_modern(), principal) {
        (false, _) => format!("session:{}", session.id),
        (true, Some(p)) => format!("principal:{}", p.id),
        (true, None) => "anonymous".into(),
    }
}

/// The task table.
#[derive(Default)]
pub(crate) struct Tasks {
    by_id: Mutex<HashMap<String, Arc<TaskRoute>>>,
    /// (slot serial, upstream id) → gateway id, for what the upstream says about a task.
    by_upstream: Mutex<HashMap<(u64, String), String>>,
    /// The last `seq` given.
    last_seq: std::sync::atomic::AtomicU64,
}

impl Tasks {
    /// Record a task and mint its id. `ttl_ms` is the upstream's (None: the longest).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn insert(
        &self,
        session: &Session,
        slot: &Arc<Slot>,
        upstream_id: &str,
        upstream_modern: bool,
        tool: &str,
        arguments: Value,
        ttl_ms: Option<u64>,
    ) -> Arc<TaskRoute> {
        let now = Instant::now();
        let ttl = ttl_ms.map_or(MAX_TTL, |ms| Duration::from_millis(ms).min(MAX_TTL));
        let route = Arc::new(TaskRoute {
            id: format!("sluice-task-{}", uuid::Uuid::new_v4().simple()),
            owner: owner_of(session),
            session: session.id.clone(),
            slot: slot.clone(),
            upstream_id: upstream_id.to_string(),
            upstream_modern,
            tool: tool.to_string(),
            arguments,
            expires: now + ttl,
            seq: self
                .last_seq
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
                + 1,
            held: Mutex::new(HeldInput::default()),
            held_changed: Arc::new(tokio::sync::Notify::new()),
        });
        let mut by_id = self.by_id.lock();
        let mut by_upstream = self.by_upstream.lock();
        if by_id.len() >= MAX_TASKS {
            by_id.retain(|_, t| t.expires > now);
            if by_id.len() >= MAX_TASKS {
                if let Some(oldest) = by_id
                    .values()
                    .min_by_key(|t| t.expires)
                    .map(|t| t.id.clone())
                {
                    by_id.remove(&oldest);
                }
            }
            by_upstream.retain(|_, id| by_id.contains_key(id));
        }
        by_id.insert(route.id.clone(), route.clone());
        by_upstream.insert((slot.serial, upstream_id.to_string()), route.id.clone());
        route
    }

    /// The task `id` if `session`'s owner may reach it.
    pub(crate) fn get(&self, id: &str, session: &Session) -> Option<Arc<TaskRoute>> {
        let owner = owner_of(session);
        self.by_id
            .lock()
            .get(id)
            .filter(|t| t.owner == owner && t.expires > Instant::now())
            .cloned()
    }

    /// Every live task of `session`'s owner, in the order they were created.
    pub(crate) fn of(&self, session: &Session) -> Vec<Arc<TaskRoute>> {
        let owner = owner_of(session);
        let now = Instant::now();
        let mut v: Vec<_> = self
            .by_id
            .lock()
            .values()
            .filter(|t| t.owner == owner && t.expires > now)
            .cloned()
            .collect();
        v.sort_by_key(|t| t.seq);
        v
    }

    /// The task an upstream calls `upstream_id`.
    pub(crate) fn by_upstream(&self, slot: &Slot, upstream_id: &str) -> Option<Arc<TaskRoute>> {
        let id = self
            .by_upstream
            .lock()
            .get(&(slot.serial, upstream_id.to_string()))
            .cloned()?;
        self.by_id.lock().get(&id).cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::{Init, Outbound};
    use crate::testing;
    use serde_json::json;

    fn session(id: &str, version: &str) -> Arc<Session> {
        let (tx, _rx) = tokio::sync::mpsc::unbounded_channel();
        let init = Init::new(version, json!({}), json!({"name": "unit"}));
        Arc::new(Session::new(id.into(), init, Outbound::Stdio(tx)))
    }

    #[test]
    fn a_task_is_reachable_by_its_owner_only_under_an_opaque_id() {
        let st = testing::state(
            &[testing::expose(&["fx"])],
            &[("fx", testing::tools(&["echo"]), json!({"tools": {}}))],
        );
        let slot = st.snapshot().slots[0].clone();
        let tasks = Tasks::default();
        let (a, b) = (session("a", "2025-11-25"), session("b", "2025-11-25"));
        let t = tasks.insert(&a, &slot, "up-1", false, "fx_echo", json!({}), Some(60_000));
        assert!(t.id.starts_with("sluice-task-") && !t.id.contains("up-1"));
        assert!(tasks.get(&t.id, &a).is_some());
        assert!(
            tasks.get(&t.id, &b).is_none(),
            "another session's task is unknown"
        );
        assert_eq!(tasks.of(&a).len(), 1);
        assert!(tasks.of(&b).is_empty());
        assert_eq!(
            tasks.by_upstream(&slot, "up-1").map(|r| r.id.clone()),
            Some(t.id.clone())
        );
        // Modern clients without a principal share the anonymous owner; a legacy session is
        // never one of them.
        let (m1, m2) = (session("m1", "2026-07-28"), session("m2", "2026-07-28"));
        let mt = tasks.insert(&m1, &slot, "up-2", true, "fx_echo", json!({}), None);
        assert!(tasks.get(&mt.id, &m2).is_some());
        assert!(tasks.get(&mt.id, &a).is_none());
        // An expired task is gone.
        let gone = tasks.insert(&a, &slot, "up-3", false, "fx_echo", json!({}), Some(0));
        assert!(tasks.get(&gone.id, &a).is_none());
    }
}
