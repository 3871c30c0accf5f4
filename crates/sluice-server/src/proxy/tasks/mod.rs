//! Tasks through the gateway, in both eras and across them. A task-augmented `tools/call`
//! goes to the tool's upstream like any call (the request hooks ran on it); the task it creates
//! is recorded under an id the gateway mints (`task_table.rs`) and handed to the client in the
//! client's era: `{task: {…}}` for a 2025-11-25 client, the flat `resultType: "task"` result for
//! a 2026-07-28 one. `tasks/get`, `tasks/result`, `tasks/cancel`, `tasks/update` and `tasks/list`
//! reach the upstream that owns the task, for the client that created it only; the final result,
//! however it is collected, passes the response hooks of the call that created it (`mask`, `pii`,
//! `size-cap`, PostToolUse, …) and is audited with the task id.
//!
//! Across eras: a 2026-07-28 upstream's task is polled with `tasks/get` for a legacy client's
//! blocking `tasks/result`, and its input requests are asked of the client as the elicitation /
//! sampling requests it knows (answered upstream with `tasks/update`); a 2025-11-25 upstream's
//! task shows a modern client the result inlined on `tasks/get` (read with `tasks/result`). One
//! pairing cannot work and is refused: `tasks/update` on a task of a 2025-11-25 upstream (which
//! takes input only on the `tasks/result` stream) answers -32602 "Task … runs on a 2025-11-25
//! upstream; tasks/update cannot reach it".
//!
//! This folder holds all of it but the task table: this file has creation, the capabilities and the shapes of each
//! era, the guard of final results, and what upstreams say about tasks; the `tasks/*` methods are
//! in [`methods`], a 2025-11-25 upstream's questions for a 2026-07-28 client in `input.rs`, and
//! the table of the tasks clients created (gateway ids, owners) in `task_table.rs`, a leaf below
//! `state.rs`, which holds it in the runtime beside the call table.

mod input;
pub(crate) mod methods;

use crate::channel::{Outcome, Sink};
use crate::proxy::call::{Call, End};
use crate::proxy::forward;
use crate::proxy::hooks::Facts;
use crate::session::Session;
use crate::state::{Snapshot, State};
use crate::task_table::TaskRoute;
use serde_json::{json, Map, Value};
use sluice_core::version::meta;
use sluice_core::{codes, Message, RpcError};
use sluice_upstream::Slot;
use std::sync::Arc;

/// The 2026-07-28 extension's id.
pub(crate) const EXTENSION: &str = "io.modelcontextprotocol/tasks";
/// The `_meta` key of a message related to a task (2025-11-25).
pub(crate) const RELATED_TASK: &str = "io.modelcontextprotocol/related-task";
/// The ttl asked of a 2025-11-25 upstream for a modern client's task.
const DEFAULT_TTL_MS: u64 = 300_000;

pub(super) fn declares_extension(caps: &Value) -> bool {
    caps.get("extensions")
        .and_then(|e| e.get(EXTENSION))
        .is_some_and(|v| !v.is_null())
}

/// Does the upstream run `tools/call` as 2025-11-25 tasks?
pub(super) fn legacy_tasks(caps: &Value) -> bool {
    caps.pointer("/tasks/requests/tools/call").is_some()
}

/// The capabilities the gateway declares for tasks, from what its upstreams can run: the
/// 2025-11-25 `tasks` for legacy clients, the extension for modern ones. `None`: no upstream
/// runs tasks.
pub(crate) fn capability(caps: &[Value], modern_client: bool) -> Option<(&'static str, Value)> {
    let any = caps
        .iter()
        .any(|c| legacy_tasks(c) || declares_extension(c));
    match (any, modern_client) {
        (false, _) => None,
        (true, false) => Some((
            "tasks",
            json!({"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}),
        )),
        (true, true) => Some(("extensions", json!({EXTENSION: {}}))),
    }
}

/// Does any upstream of the snapshot that is up run tasks? (Without one the gateway has no
/// `tasks/*` methods: -32601, as before.)
pub(crate) fn runs_tasks(snap: &Snapshot) -> bool {
    let caps: Vec<Value> = snap.slots.iter().filter_map(|s| s.capabilities()).collect();
    capability(&caps, false).is_some()
}

/// Fit an upstream's capabilities for a client of the other era (a transparent upstream's
/// capabilities are shown as they are, but tasks are declared the client's way).
pub(crate) fn fit_capabilities(caps: &mut Value, modern_client: bool) {
    let Some(c) = caps.as_object_mut() else {
        return;
    };
    let runs = c
        .get("tasks")
        .is_some_and(|t| legacy_tasks(&json!({"tasks": t})))
        || declares_extension(&Value::Object(c.clone()));
    if modern_client {
        c.remove("tasks");
        if runs {
            let ext = c.entry("extensions").or_insert_with(|| json!({}));
            ext[EXTENSION] = json!({});
        }
    } else {
        let empty = c
            .get_mut("extensions")
            .and_then(Value::as_object_mut)
            .map(|e| {
                e.remove(EXTENSION);
                e.is_empty()
            });
        if empty == Some(true) {
            c.remove("extensions");
        }
        if runs {
            c.insert(
                "tasks".into(),
                json!({"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}),
            );
        }
    }
}

/// Does this `tools/call` involve a task: a legacy client asking for one, a modern client that
/// can take one, or a modern client that cannot, calling a 2025-11-25 upstream that runs tasks
/// (whose tool may require one: -32021 then, as a 2026-07-28 upstream would answer)?
pub(crate) fn involved(session: &Session, slot: &Slot, msg: &Message) -> bool {
    if !session.is_modern() {
        return msg.has_param("task");
    }
    declares_extension(&session.init.capabilities)
        || (!slot.is_modern() && slot.capabilities().is_some_and(|c| legacy_tasks(&c)))
}

/// -32021: the client must declare the extension.
pub(super) fn missing_extension() -> RpcError {
    RpcError::new(
        codes::MISSING_REQUIRED_CLIENT_CAPABILITY,
        format!("Missing required client capability: extensions[\"{EXTENSION}\"]"),
    )
    .with_data(json!({"requiredCapabilities": {"extensions": {EXTENSION: {}}}}))
}

/// The gateway task id a reply created, for the audit line.
pub(crate) fn created_id(reply: &Message) -> Option<&str> {
    // A reply kept as text (which has no `\u` escape to spell it otherwise) is not parsed for
    // this when the prefix is not in it.
    if reply
        .reply_member_text()
        .is_some_and(|t| !t.contains("sluice-task-"))
    {
        return None;
    }
    let r = reply.result()?;
    r.pointer("/task/taskId")
        .or_else(|| (r.get("resultType") == Some(&json!("task"))).then(|| r.get("taskId"))?)
        .and_then(Value::as_str)
        .filter(|id| id.starts_with("sluice-task-"))
}

/// How the upstream declares `tool` (its own name) may run: `optional`, `required`, …
fn tool_support(slot: &Slot, tool: &str) -> Option<String> {
    let st = slot.state.lock();
    st.lists.as_ref()?.tools.iter().find_map(|t| {
        (t.get("name").and_then(Value::as_str) == Some(tool)).then(|| {
            t.pointer("/execution/taskSupport")?
                .as_str()
                .map(str::to_string)
        })?
    })
}

/// A task-augmented `tools/call` (`msg` renamed for the upstream; `tool` is the client's name).
pub(crate) async fn call_tool(
    st: &Arc<State>,
    session: &Arc<Session>,
    slot: &Arc<Slot>,
    tool: String,
    mut msg: Message,
    sink: &Sink,
) -> Outcome {
    let args = msg
        .params()
        .and_then(|p| p.get("arguments"))
        .cloned()
        .unwrap_or(json!({}));
    let caps = slot.capabilities().unwrap_or_default();
    let upstream_modern = slot.is_modern();
    let upstream_name = msg.param_str("name").unwrap_or("").to_string();
    let runs = if upstream_modern {
        declares_extension(&caps)
    } else {
        legacy_tasks(&caps)
    };
    if runs {
        let params = msg.params_mut();
        match (session.is_modern(), upstream_modern) {
            // A modern client on a legacy upstream: ask for a task where the tool can be one
            // and the client can take it; a tool that must be one needs the extension.
            (true, false) => {
                let support = tool_support(slot, &upstream_name);
                let can_take = declares_extension(&session.init.capabilities);
                match support.as_deref() {
                    Some("required") if !can_take => {
                        let id = msg.id().cloned().unwrap_or(Value::Null);
                        return Outcome::Reply(Message::error(id, &missing_extension()));
                    }
                    Some("optional" | "required") if can_take => {
                        params.insert("task".into(), json!({"ttl": DEFAULT_TTL_MS}));
                    }
                    _ => {}
                }
            }
            // A legacy client on a modern upstream: the upstream decides; tell it this client
            // takes tasks (its own capabilities plus the extension).
            (false, true) => {
                params.remove("task");
                let m = params.entry("_meta").or_insert_with(|| json!({}));
                m[meta::CLIENT_CAPABILITIES] = with_extension(session);
            }
            _ => {}
        }
    }
    let outcome = forward::call_with_rounds(st, session, slot, msg, sink).await;
    let Outcome::Reply(mut reply) = outcome else {
        return outcome;
    };
    if runs {
        adopt(st, session, slot, &tool, args, &mut reply);
    }
    Outcome::Reply(reply)
}

/// The client's capabilities plus the extension: what a legacy client's task requests tell a
/// 2026-07-28 upstream (the gateway takes the task on the client's behalf).
pub(super) fn with_extension(session: &Session) -> Value {
    let mut caps = (*session.init.capabilities).clone();
    if let Some(c) = caps.as_object_mut() {
        let ext = c.entry("extensions").or_insert_with(|| json!({}));
        ext[EXTENSION] = json!({});
    }
    caps
}

/// A reply that created a task upstream: record it and show it in the client's era.
fn adopt(
    st: &Arc<State>,
    session: &Session,
    slot: &Arc<Slot>,
    tool: &str,
    args: Value,
    reply: &mut Message,
) {
    let Some(r) = reply.result_mut().and_then(Value::as_object_mut) else {
        return;
    };
    let upstream_task = match r.get("task").and_then(Value::as_object) {
        Some(t) => t.clone(),
        None if r.contains_key("taskId") && r.contains_key("status") => r.clone(),
        None => return,
    };
    let Some(upstream_id) = upstream_task.get("taskId").and_then(Value::as_str) else {
        return;
    };
    let ttl = upstream_task
        .get("ttl")
        .or_else(|| upstream_task.get("ttlMs"))
        .and_then(Value::as_u64);
    let route = st.rt.tasks().insert(
        session,
        slot,
        upstream_id,
        slot.is_modern(),
        tool,
        args,
        ttl,
    );
    let meta = r.remove("_meta");
    let mut shown = if session.is_modern() {
        let mut t = modern_task(&upstream_task, &route.id, false);
        t.insert("resultType".into(), json!("task"));
        t
    } else {
        let mut m = Map::new();
        m.insert(
            "task".into(),
            Value::Object(legacy_task(&upstream_task, &route.id)),
        );
        m
    };
    if let Some(Value::Object(m)) = meta {
        let m: Map<String, Value> = m
            .into_iter()
            .filter(|(k, _)| k != RELATED_TASK && k != meta::SERVER_INFO)
            .collect();
        if !m.is_empty() {
            shown.insert("_meta".into(), Value::Object(m));
        }
    }
    *r = shown;
}

/// A task as a 2025-11-25 `Task` under the gateway's id: the upstream's fields (unknown ones
/// kept), the 2026-07-28 names renamed, and nothing of the modern detailed envelope.
pub(super) fn legacy_task(t: &Map<String, Value>, id: &str) -> Map<String, Value> {
    let mut out = t.clone();
    out.insert("taskId".into(), json!(id));
    for (legacy, modern) in [("ttl", "ttlMs"), ("pollInterval", "pollIntervalMs")] {
        if let Some(v) = out.remove(modern) {
            out.entry(legacy).or_insert(v);
        }
    }
    for k in [
        "resultType",
        "result",
        "error",
        "inputRequests",
        "requestState",
    ] {
        out.remove(k);
    }
    without_server_info(&mut out);
    out
}

/// A task as the 2026-07-28 flat envelope under the gateway's id (unknown fields kept, the
/// 2025-11-25 names renamed); with `detailed`, what `tasks/get` inlines (result, error, input
/// requests) as the upstream gave them.
pub(super) fn modern_task(t: &Map<String, Value>, id: &str, detailed: bool) -> Map<String, Value> {
    let mut out = t.clone();
    out.insert("taskId".into(), json!(id));
    for (modern, legacy) in [("ttlMs", "ttl"), ("pollIntervalMs", "pollInterval")] {
        if let Some(v) = out.remove(legacy) {
            out.entry(modern).or_insert(v);
        }
    }
    out.remove("resultType");
    out.remove("requestState");
    if !detailed {
        for k in ["result", "error", "inputRequests"] {
            out.remove(k);
        }
    }
    without_server_info(&mut out);
    out
}

/// Drop the upstream's serverInfo stamp (the modern face adds the gateway's own).
fn without_server_info(t: &mut Map<String, Value>) {
    let empty = t.get_mut("_meta").and_then(Value::as_object_mut).map(|m| {
        m.remove(meta::SERVER_INFO);
        m.is_empty()
    });
    if empty == Some(true) {
        t.remove("_meta");
    }
}

/// A task's final result as the client will see it: the response phase of the call that
/// created it (response controls first, then PostToolUse and the other response hooks), and
/// the audit line with the task id and the outcome.
pub(super) async fn guard(
    st: &Arc<State>,
    snap: &Snapshot,
    session: &Arc<Session>,
    route: &TaskRoute,
    method: &str,
    result: Value,
) -> Result<Value, RpcError> {
    let request = Message::request(
        json!(0),
        "tools/call",
        Some(json!({"name": route.tool, "arguments": route.arguments})),
    );
    let catalog = crate::views::catalog_for(snap, session);
    let upstream_name = match catalog.tool(&route.tool) {
        Some(crate::catalog::Route::Upstream { name, .. }) => Some(name.as_str()),
        _ => None,
    };
    let facts = Facts::of_request(
        snap,
        &catalog,
        "tools/call",
        Some(&route.tool),
        Some(&route.slot.spec.id),
        upstream_name,
        super::hooks::serving_identity(&route.slot, session),
    );
    let mut call = Call::plain(st, snap, session, facts);
    call.set_task(Some(route.id.clone()));
    let reply = Message::response(json!(0), result);
    let reply = match snap.chain.is_empty() {
        true => Ok(reply),
        false => call.response_hooks(reply, Some(&request), usize::MAX).await,
    };
    let (reply, refused) = match reply {
        Ok(m) => (m, None),
        // The refusal the client gets is the one a direct result gets (-32031, the reason in
        // `data`).
        Err(refusal) => {
            let reason = refusal.reason.clone();
            (
                refusal.to_error(sluice_hooks::Phase::Response, json!(0)),
                Some(reason),
            )
        }
    };
    call.finish(End::ToolResult {
        reply: &reply,
        refused: refused.clone(),
        method,
    });
    match (reply.result().cloned(), reply.error_obj()) {
        (Some(v), _) => Ok(v),
        (None, e) if refused.is_some() => Err(error_of(e, codes::RESPONSE_REJECTED)),
        (None, e) => Err(error_of(e, codes::INTERNAL_ERROR)),
    }
}

/// A JSON-RPC error object as an [`RpcError`] (`code` when it has none).
pub(super) fn error_of(e: Option<&Value>, code: i64) -> RpcError {
    RpcError {
        code: e
            .and_then(|e| e.get("code"))
            .and_then(Value::as_i64)
            .unwrap_or(code),
        message: e
            .and_then(|e| e.get("message"))
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string(),
        data: e.and_then(|e| e.get("data")).cloned(),
    }
}

/// `notifications/tasks/status` from an upstream: to the client that created the task, under
/// the gateway's id. `None` when no client's task is meant (dropped).
pub(crate) fn status_for_client(
    st: &Arc<State>,
    slot: &Slot,
    msg: &Message,
) -> Option<(Arc<Session>, Message)> {
    let params = msg.params()?.as_object()?;
    let upstream_id = params.get("taskId")?.as_str()?;
    let route = st.rt.tasks().by_upstream(slot, upstream_id)?;
    let session = st.rt.sessions().get(&route.session)?;
    let shown = legacy_task(params, &route.id);
    Some((
        session,
        Message::notification("notifications/tasks/status", Some(Value::Object(shown))),
    ))
}

/// A message an upstream sends about one of its tasks (`_meta` related-task): the gateway's
/// task id in place of the upstream's.
pub(crate) fn map_related(st: &Arc<State>, slot: &Slot, msg: &mut Message) {
    let upstream_id = msg
        .params()
        .and_then(|p| p.get("_meta"))
        .and_then(|m| m.get(RELATED_TASK))
        .and_then(|r| r.get("taskId"))
        .and_then(Value::as_str)
        .map(str::to_string);
    let Some(upstream_id) = upstream_id else {
        return;
    };
    if let Some(route) = st.rt.tasks().by_upstream(slot, &upstream_id) {
        if let Some(m) = msg.params_mut().get_mut("_meta") {
            m[RELATED_TASK] = json!({"taskId": route.id});
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tasks_are_declared_in_the_clients_era() {
        let legacy_up = json!({"tools": {}, "tasks": {"list": {}, "cancel": {},
                               "requests": {"tools": {"call": {}}}}});
        let modern_up = json!({"tools": {}, "extensions": {EXTENSION: {}, "other/x": {}}});
        let mut c = legacy_up.clone();
        fit_capabilities(&mut c, true);
        assert_eq!(c, json!({"tools": {}, "extensions": {EXTENSION: {}}}));
        let mut c = modern_up.clone();
        fit_capabilities(&mut c, false);
        assert_eq!(
            c,
            json!({"tools": {}, "extensions": {"other/x": {}},
                   "tasks": {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}})
        );
        let mut plain = json!({"tools": {}});
        fit_capabilities(&mut plain, false);
        assert_eq!(plain, json!({"tools": {}}));
        assert_eq!(capability(&[json!({"tools": {}})], false), None);
        assert_eq!(
            capability(&[json!({}), modern_up], true),
            Some(("extensions", json!({EXTENSION: {}})))
        );
    }

    #[test]
    fn tasks_are_shown_in_each_era_under_the_gateways_id() {
        let up = json!({"taskId": "up", "status": "working", "createdAt": "t", "ttlMs": 5,
                        "pollIntervalMs": 7, "result": {"content": []}, "x-kept": 1});
        let up = up.as_object().unwrap();
        assert_eq!(
            Value::Object(legacy_task(up, "sluice-task-1")),
            json!({"taskId": "sluice-task-1", "status": "working", "createdAt": "t",
                   "ttl": 5, "pollInterval": 7, "x-kept": 1})
        );
        let legacy = json!({"taskId": "up", "status": "completed", "ttl": 5});
        assert_eq!(
            Value::Object(modern_task(
                legacy.as_object().unwrap(),
                "sluice-task-1",
                true
            )),
            json!({"taskId": "sluice-task-1", "status": "completed", "ttlMs": 5})
        );
        let reply = Message::response(json!(1), json!({"task": {"taskId": "sluice-task-9"}}));
        assert_eq!(created_id(&reply), Some("sluice-task-9"));
        let upstream_id = Message::response(json!(1), json!({"task": {"taskId": "raw"}}));
        assert_eq!(created_id(&upstream_id), None);
        // Kept as text: read from the text, with or without the prefix in it.
        for (text, want) in [
            (
                r#"{"jsonrpc":"2.0","id":1,"result":{"task":{"taskId":"sluice-task-3"}}}"#,
                Some("sluice-task-3"),
            ),
            (
                r#"{"jsonrpc":"2.0","id":1,"result":{"resultType":"task","taskId":"sluice-task-4"}}"#,
                Some("sluice-task-4"),
            ),
            (
                r#"{"jsonrpc":"2.0","id":1,"result":{"task":{"taskId":"\u0073luice-task-5"}}}"#,
                Some("sluice-task-5"),
            ),
            (
                r#"{"jsonrpc":"2.0","id":1,"result":{"task":{"taskId":"t-6"}}}"#,
                None,
            ),
            (r#"{"jsonrpc":"2.0","id":1,"result":{"content":[]}}"#, None),
        ] {
            let reply = Message::parse_reply(text.as_bytes()).unwrap();
            assert_eq!(created_id(&reply), want, "{text}");
        }
    }
}
