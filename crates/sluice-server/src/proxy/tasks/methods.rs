//! The `tasks/*` methods of a client, at the upstream that runs the task: `tasks/get`,
//! `tasks/result` (blocking; a 2026-07-28 upstream's task is polled, its input asked of the
//! client and answered with `tasks/update`), `tasks/cancel`, `tasks/update` and `tasks/list`
//! (the client's tasks on every upstream), each answered in the client's era. Task creation, the
//! shapes of each era and the guard of final results are in [`super`] (`mod.rs`).

use super::{
    declares_extension, error_of, guard, legacy_task, missing_extension, modern_task, runs_tasks,
    with_extension, RELATED_TASK,
};
use crate::channel::{Outcome, Sink};
use crate::proxy::forward;
use crate::session::Session;
use crate::state::{Snapshot, State};
use crate::task_table::TaskRoute;
use serde_json::{json, Map, Value};
use sluice_core::version::meta;
use sluice_core::{codes, Message, RpcError};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long a legacy client's `tasks/result` polls a modern upstream's task at most.
const MAX_WAIT: Duration = Duration::from_secs(3600);
/// How many input rounds a polled task may ask for.
const MAX_INPUT_ROUNDS: usize = 16;

/// The error for a task id this client cannot reach (unknown, expired, or another client's).
fn unknown(id: &str) -> RpcError {
    RpcError::invalid_params(format!("Task not found: {id}")).with_data(json!({"taskId": id}))
}

fn reply_of(id: Value, r: Result<Value, RpcError>) -> Outcome {
    Outcome::Reply(match r {
        Ok(v) => Message::response(id, v),
        Err(e) => Message::error(id, &e),
    })
}

/// One request to the task's upstream: its result, or its error.
async fn upstream(
    st: &Arc<State>,
    session: &Arc<Session>,
    route: &TaskRoute,
    id: Value,
    method: &str,
    mut params: Map<String, Value>,
    sink: &Sink,
) -> Result<Result<Value, RpcError>, Outcome> {
    params.insert("taskId".into(), json!(route.upstream_id));
    if route.upstream_modern && !session.is_modern() {
        let mut m = Map::new();
        m.insert(meta::CLIENT_CAPABILITIES.into(), with_extension(session));
        params.insert("_meta".into(), Value::Object(m));
    }
    let msg = Message::request(id, method, Some(Value::Object(params)));
    match forward::call(st, session, &route.slot, msg, sink).await {
        Outcome::Reply(r) => Ok(match (r.result(), r.error_obj()) {
            (Some(v), _) => Ok(v.clone()),
            (None, Some(e)) => Err(error_of(Some(e), codes::INTERNAL_ERROR)),
            _ => Err(RpcError::internal("an empty reply")),
        }),
        cancelled => Err(cancelled),
    }
}

/// `tasks/get`, `tasks/result`, `tasks/cancel`, `tasks/update`, `tasks/list` of a client.
pub(crate) async fn dispatch(
    st: &Arc<State>,
    snap: &Snapshot,
    session: &Arc<Session>,
    msg: Message,
    sink: &Sink,
) -> Outcome {
    let id = msg.id().cloned().unwrap_or(Value::Null);
    let method = msg.method().unwrap_or("").to_string();
    let modern = session.is_modern();
    if !runs_tasks(snap) {
        return reply_of(id, Err(RpcError::method_not_found(&method)));
    }
    if modern && !declares_extension(&session.init.capabilities) {
        return reply_of(id, Err(missing_extension()));
    }
    let removed = if modern {
        matches!(method.as_str(), "tasks/result" | "tasks/list")
    } else {
        method == "tasks/update"
    };
    if removed {
        return reply_of(id, Err(RpcError::method_not_found(&method)));
    }
    if method == "tasks/list" {
        return list(st, snap, session, id, &msg, sink).await;
    }
    let Some(task_id) = msg.param_str("taskId") else {
        return reply_of(
            id,
            Err(RpcError::invalid_params(format!(
                "{method} needs params.taskId"
            ))),
        );
    };
    let Some(route) = st.rt.tasks().get(task_id, session) else {
        return reply_of(id, Err(unknown(task_id)));
    };
    let mut params = msg
        .params()
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    params.remove("_meta");
    let r = match method.as_str() {
        "tasks/get" => get(st, snap, session, &route, id.clone(), sink).await,
        // A 2025-11-25 upstream's questions, held for this modern client (task_input.rs).
        "tasks/update" if !route.upstream_modern => {
            Ok(super::input::answer(st, &route, params.get("inputResponses")).await)
        }
        "tasks/result" => collect(st, snap, session, &route, id.clone(), sink).await,
        "tasks/cancel" => cancel(st, session, &route, id.clone(), sink).await,
        _ if !route.upstream_modern => Ok(Err(RpcError::invalid_params(format!(
            "Task {} runs on a 2025-11-25 upstream; tasks/update cannot reach it",
            route.id
        ))
        .with_data(json!({"taskId": route.id, "upstream": route.slot.spec.id})))),
        _ => upstream(
            st,
            session,
            &route,
            id.clone(),
            "tasks/update",
            params,
            sink,
        )
        .await
        .map(|r| r.map(|_| json!({}))),
    };
    match r {
        Ok(r) => reply_of(id, r),
        Err(cancelled) => cancelled,
    }
}

/// `tasks/get` in the client's era (a modern client gets the final result inlined, guarded,
/// and a 2025-11-25 upstream's questions as `inputRequests`).
async fn get(
    st: &Arc<State>,
    snap: &Snapshot,
    session: &Arc<Session>,
    route: &Arc<TaskRoute>,
    id: Value,
    sink: &Sink,
) -> Result<Result<Value, RpcError>, Outcome> {
    let got = match upstream(
        st,
        session,
        route,
        id.clone(),
        "tasks/get",
        Map::new(),
        sink,
    )
    .await?
    {
        Ok(Value::Object(t)) => t,
        Ok(_) => return Ok(Err(RpcError::internal("tasks/get: not an object"))),
        Err(e) => return Ok(Err(e)),
    };
    if !session.is_modern() {
        return Ok(Ok(Value::Object(legacy_task(&got, &route.id))));
    }
    let mut shown = modern_task(&got, &route.id, true);
    let status = got.get("status").and_then(Value::as_str);
    if !route.upstream_modern && status == Some("input_required") {
        let asked = super::input::questions(st, session, route).await;
        if asked.as_object().is_some_and(|a| !a.is_empty()) {
            shown.insert("inputRequests".into(), asked);
        }
    }
    if !route.upstream_modern && matches!(status, Some("completed" | "failed")) {
        // A 2025-11-25 upstream keeps the result behind tasks/result.
        match upstream(
            st,
            session,
            route,
            id.clone(),
            "tasks/result",
            Map::new(),
            sink,
        )
        .await?
        {
            Ok(mut r) => {
                strip_related(&mut r);
                shown.insert("result".into(), r);
            }
            Err(e) => {
                shown.insert("error".into(), e.to_value());
            }
        }
    }
    if let Some(result) = shown.remove("result") {
        match guard(st, snap, session, route, "tasks/get", result).await {
            Ok(r) => {
                shown.insert("result".into(), r);
            }
            Err(e) => return Ok(Err(e)),
        }
    }
    Ok(Ok(Value::Object(shown)))
}

fn strip_related(result: &mut Value) {
    if let Some(o) = result.as_object_mut() {
        let empty = o.get_mut("_meta").and_then(Value::as_object_mut).map(|m| {
            m.remove(RELATED_TASK);
            m.is_empty()
        });
        if empty == Some(true) {
            o.remove("_meta");
        }
    }
}

/// A legacy client's `tasks/result`: the final result (blocking), guarded.
async fn collect(
    st: &Arc<State>,
    snap: &Snapshot,
    session: &Arc<Session>,
    route: &TaskRoute,
    id: Value,
    sink: &Sink,
) -> Result<Result<Value, RpcError>, Outcome> {
    let outcome = if route.upstream_modern {
        poll(st, session, route, id.clone(), sink).await?
    } else {
        // Wait with tasks/get (each call within the upstream's timeout, however long the task
        // works), then read tasks/result: at once when the task has ended, or to carry the
        // questions a task waiting for input sends on its stream.
        if let Err(e) = wait_legacy(st, session, route, id.clone(), sink).await? {
            return Ok(Err(e));
        }
        upstream(
            st,
            session,
            route,
            id.clone(),
            "tasks/result",
            Map::new(),
            sink,
        )
        .await?
    };
    let mut result = match outcome {
        Ok(r) => r,
        Err(e) => return Ok(Err(e)),
    };
    strip_related(&mut result);
    Ok(guard(st, snap, session, route, "tasks/result", result)
        .await
        .map(|mut r| {
            if let Some(o) = r.as_object_mut() {
                let m = o.entry("_meta").or_insert_with(|| json!({}));
                m[RELATED_TASK] = json!({"taskId": route.id});
            }
            r
        }))
}

/// Poll a 2025-11-25 upstream's task until it has ended or waits for input.
async fn wait_legacy(
    st: &Arc<State>,
    session: &Arc<Session>,
    route: &TaskRoute,
    id: Value,
    sink: &Sink,
) -> Result<Result<(), RpcError>, Outcome> {
    let started = Instant::now();
    while started.elapsed() < MAX_WAIT {
        let t = match upstream(
            st,
            session,
            route,
            id.clone(),
            "tasks/get",
            Map::new(),
            sink,
        )
        .await?
        {
            Ok(t) => t,
            Err(e) => return Ok(Err(e)),
        };
        if matches!(
            t.get("status").and_then(Value::as_str),
            Some("completed" | "failed" | "cancelled" | "input_required") | None
        ) {
            return Ok(Ok(()));
        }
        pause(&t, "pollInterval").await;
    }
    Ok(Err(outlasted(route)))
}

/// Follow a 2026-07-28 upstream's task to its end for a legacy client: poll `tasks/get`, ask
/// the client what the task asks for, and give back its result or error.
async fn poll(
    st: &Arc<State>,
    session: &Arc<Session>,
    route: &TaskRoute,
    id: Value,
    sink: &Sink,
) -> Result<Result<Value, RpcError>, Outcome> {
    let started = Instant::now();
    let mut rounds = 0;
    while started.elapsed() < MAX_WAIT {
        let t = match upstream(
            st,
            session,
            route,
            id.clone(),
            "tasks/get",
            Map::new(),
            sink,
        )
        .await?
        {
            Ok(t) => t,
            Err(e) => return Ok(Err(e)),
        };
        match t.get("status").and_then(Value::as_str) {
            Some("completed") => return Ok(Ok(t.get("result").cloned().unwrap_or(json!({})))),
            Some("failed") => {
                let e = t.get("error");
                return Ok(Err(error_of(e, codes::INTERNAL_ERROR)));
            }
            Some("cancelled") => {
                return Ok(Err(RpcError::invalid_params(format!(
                    "Task {} was cancelled",
                    route.id
                ))))
            }
            Some("input_required") if rounds < MAX_INPUT_ROUNDS => {
                rounds += 1;
                let mut answers = Map::new();
                for (key, request) in t
                    .get("inputRequests")
                    .and_then(Value::as_object)
                    .into_iter()
                    .flatten()
                {
                    let method = request.get("method").and_then(Value::as_str).unwrap_or("");
                    let params = request.get("params").cloned();
                    match crate::proxy::client_out::ask_client(
                        st,
                        session,
                        sink,
                        method,
                        params,
                        &route.slot.spec.id,
                    )
                    .await
                    {
                        Ok(a) => {
                            answers.insert(key.clone(), a);
                        }
                        Err(e) => return Ok(Err(e)),
                    }
                }
                let mut p = Map::new();
                p.insert("inputResponses".into(), Value::Object(answers));
                if let Err(e) =
                    upstream(st, session, route, id.clone(), "tasks/update", p, sink).await?
                {
                    return Ok(Err(e));
                }
                continue;
            }
            _ => {}
        }
        pause(&t, "pollIntervalMs").await;
    }
    Ok(Err(outlasted(route)))
}

/// Wait between two polls of a task: the upstream's interval (`field`, ms; 500 when absent),
/// kept within 50–2000 ms.
async fn pause(task: &Value, field: &str) {
    let ms = task
        .get(field)
        .and_then(Value::as_u64)
        .unwrap_or(500)
        .clamp(50, 2000);
    tokio::time::sleep(Duration::from_millis(ms)).await;
}

/// The error for a task that did not end within [`MAX_WAIT`].
fn outlasted(route: &TaskRoute) -> RpcError {
    RpcError::new(
        codes::REQUEST_TIMEOUT,
        format!(
            "Task {} did not end within {} s",
            route.id,
            MAX_WAIT.as_secs()
        ),
    )
}

/// `tasks/cancel` in the client's era: a legacy client gets the task back, a modern one the
/// empty ack (also for a task that had ended, as the extension says).
async fn cancel(
    st: &Arc<State>,
    session: &Arc<Session>,
    route: &TaskRoute,
    id: Value,
    sink: &Sink,
) -> Result<Result<Value, RpcError>, Outcome> {
    let r = upstream(
        st,
        session,
        route,
        id.clone(),
        "tasks/cancel",
        Map::new(),
        sink,
    )
    .await?;
    if session.is_modern() {
        return Ok(match r {
            Ok(_) => Ok(json!({})),
            // A 2025-11-25 upstream refuses to cancel an ended task: the extension acks it.
            Err(e) if !route.upstream_modern && e.code == codes::INVALID_PARAMS => Ok(json!({})),
            Err(e) => Err(e),
        });
    }
    match r {
        Ok(Value::Object(t)) if !route.upstream_modern => {
            Ok(Ok(Value::Object(legacy_task(&t, &route.id))))
        }
        Ok(_) => match upstream(st, session, route, id, "tasks/get", Map::new(), sink).await? {
            Ok(Value::Object(t)) => Ok(Ok(Value::Object(legacy_task(&t, &route.id)))),
            Ok(_) => Ok(Err(RpcError::internal("tasks/get: not an object"))),
            Err(e) => Ok(Err(e)),
        },
        Err(e) => Ok(Err(e)),
    }
}

/// `tasks/list` (legacy): this client's tasks on every upstream, in the order they were
/// created, as each upstream sees them now; `page_size` a page, with a `nextCursor`
/// (`sluice-tasks-<seq>`: the tasks created after that one) while more follow. A cursor the
/// gateway did not mint is -32602.
async fn list(
    st: &Arc<State>,
    snap: &Snapshot,
    session: &Arc<Session>,
    id: Value,
    msg: &Message,
    sink: &Sink,
) -> Outcome {
    let cursor = msg.params().and_then(|p| p.get("cursor"));
    let after = match cursor {
        None | Some(Value::Null) => 0,
        Some(c) => match c
            .as_str()
            .and_then(|s| s.strip_prefix(TASKS_CURSOR))
            .and_then(|n| n.parse::<u64>().ok())
        {
            Some(n) => n,
            None => {
                let shown = c
                    .as_str()
                    .map_or_else(|| c.to_string(), |s| format!("{s:?}"));
                return reply_of(
                    id,
                    Err(RpcError::invalid_params(format!("Invalid cursor: {shown}"))),
                );
            }
        },
    };
    let page_size = (snap.settings().page_size as usize).max(1);
    let mut mine: Vec<_> = st
        .rt
        .tasks()
        .of(session)
        .into_iter()
        .filter(|t| t.seq > after)
        .collect();
    let more = mine.len() > page_size;
    mine.truncate(page_size);
    let next = more
        .then(|| mine.last().map(|t| format!("{TASKS_CURSOR}{}", t.seq)))
        .flatten();
    let mut tasks = Vec::new();
    for (n, route) in mine.iter().enumerate() {
        let aux = json!(format!("sluice-tasks-list-{n}"));
        match get(st, snap, session, route, aux, sink).await {
            Ok(Ok(t)) => tasks.push(t),
            Ok(Err(e)) => {
                tracing::debug!(task = %route.id, "tasks/list: the upstream no longer has it: {}", e.message)
            }
            Err(cancelled) => return cancelled,
        }
    }
    let mut result = json!({"tasks": tasks});
    if let Some(next) = next {
        result["nextCursor"] = json!(next);
    }
    reply_of(id, Ok(result))
}

/// What a `tasks/list` cursor starts with.
const TASKS_CURSOR: &str = "sluice-tasks-";
