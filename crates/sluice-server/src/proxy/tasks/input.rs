//! A 2025-11-25 upstream's task that waits for input, for a 2026-07-28 client: such an
//! upstream asks its questions (`elicitation/create`, `sampling/createMessage`, …) on the stream
//! of a `tasks/result` request, which the modern client has no way to send. When the client's
//! `tasks/get` finds the task `input_required`, the gateway opens that `tasks/result` itself and
//! holds the questions the upstream sends on it; the client sees them as the extension's
//! `inputRequests` (keyed by the id the question carries) and answers with `tasks/update`'s
//! `inputResponses`, which go back to the upstream as the replies to its questions (through the
//! request hooks, like any client reply).

use crate::channel::Out;
use crate::session::Session;
use crate::state::State;
use crate::task_table::TaskRoute;
use serde_json::{json, Map, Value};
use sluice_core::{Kind, Message, RpcError};
use std::sync::Arc;
use std::time::Duration;

/// How long a `tasks/get` waits for the first question of a task that says it needs input.
const FIRST_QUESTION: Duration = Duration::from_secs(10);

/// The questions the upstream asked so far and not yet answered, as `inputRequests`; opens the
/// upstream's `tasks/result` on the first call for the task.
pub(super) async fn questions(
    st: &Arc<State>,
    session: &Arc<Session>,
    route: &Arc<TaskRoute>,
) -> Value {
    let (start, notified) = {
        let mut held = route.held.lock();
        let start = !held.reading;
        if start {
            held.reading = true;
            held.session = Some(session.clone());
        }
        (start, route.held_changed.clone())
    };
    if start {
        read_questions(st.clone(), session.clone(), route.clone());
    }
    // Wait (bounded) for the first question of a task that waits for input.
    let wait = notified.notified();
    tokio::pin!(wait);
    if route.held.lock().asked.is_empty() {
        let _ = tokio::time::timeout(FIRST_QUESTION, &mut wait).await;
    }
    Value::Object(route.held.lock().asked.clone())
}

/// Open `tasks/result` upstream and keep each question it carries, until the task ends.
fn read_questions(st: Arc<State>, session: Arc<Session>, route: Arc<TaskRoute>) {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Out>();
    let keeper = route.clone();
    tokio::spawn(async move {
        while let Some(out) = rx.recv().await {
            let Out::Msg(m) = out else { continue };
            if m.kind() != Kind::Request {
                continue;
            }
            let Some(id) = m.id().and_then(Value::as_str).map(str::to_string) else {
                continue;
            };
            let mut q = Map::new();
            q.insert("method".into(), json!(m.method().unwrap_or("")));
            if let Some(p) = m.params() {
                q.insert("params".into(), p.clone());
            }
            keeper.held.lock().asked.insert(id, Value::Object(q));
            keeper.held_changed.notify_waiters();
        }
    });
    tokio::spawn(async move {
        let mut params = Map::new();
        params.insert("taskId".into(), json!(route.upstream_id));
        let msg = Message::request(
            json!(format!("sluice-task-input-{}", route.seq)),
            "tasks/result",
            Some(Value::Object(params)),
        );
        let _ = crate::proxy::forward::call(&st, &session, &route.slot, msg, &tx).await;
        // The task ended (or the wait did): nothing is held any more.
        let mut held = route.held.lock();
        held.reading = false;
        held.asked.clear();
        held.session = None;
    });
}

/// `tasks/update` of a 2025-11-25 upstream's task: each answer goes back to the upstream as the
/// reply to the question it names. `Err` when nothing is held for the task, or an answer names
/// no question.
pub(super) async fn answer(
    st: &Arc<State>,
    route: &TaskRoute,
    responses: Option<&Value>,
) -> Result<Value, RpcError> {
    let cannot = || {
        RpcError::invalid_params(format!(
            "Task {} runs on a 2025-11-25 upstream and asks nothing now; tasks/update has nothing to answer",
            route.id
        ))
        .with_data(json!({"taskId": route.id, "upstream": route.slot.spec.id}))
    };
    let Some(responses) = responses.and_then(Value::as_object) else {
        return Err(RpcError::invalid_params(
            "tasks/update needs params.inputResponses",
        ));
    };
    let (session, replies) = {
        let mut held = route.held.lock();
        let Some(session) = held.session.clone() else {
            return Err(cannot());
        };
        if let Some(k) = responses.keys().find(|k| !held.asked.contains_key(*k)) {
            return Err(RpcError::invalid_params(format!(
                "Task {} asked nothing under the key {k:?}",
                route.id
            ))
            .with_data(json!({"taskId": route.id, "key": k})));
        }
        let replies: Vec<Message> = responses
            .iter()
            .map(|(k, v)| {
                held.asked.remove(k);
                Message::response(json!(k), v.clone())
            })
            .collect();
        (session, replies)
    };
    for reply in replies {
        crate::proxy::client_message(st, &session, reply).await;
    }
    Ok(json!({}))
}
