//! The requests of `--tasks` in each era: `tools/call` of a task tool (a task, or the tool run
//! at once), and the `tasks/*` methods. [`handle`] answers `None` for anything else.

use std::sync::Arc;

use serde_json::{json, Map, Value};

use crate::mrtr::AskError;
use crate::protocol::RpcError;
use crate::session::Ctx;
use crate::tasks::{self, Task, EXTENSION, LEGACY_METHODS, MODERN_METHODS, RELATED_TASK};

/// The legacy capability.
pub(crate) fn legacy_capability() -> Value {
    json!({"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}})
}

fn task_id(params: &Value) -> Result<&str, RpcError> {
    params
        .get("taskId")
        .and_then(Value::as_str)
        .ok_or_else(|| RpcError::invalid_params("Missing or invalid string param: taskId"))
}

/// Did this modern request's client declare the extension?
fn declares_extension(ctx: &Ctx) -> bool {
    ctx.modern().is_some_and(|m| {
        m.meta
            .client_capabilities
            .get("extensions")
            .and_then(|e| e.get(EXTENSION))
            .is_some_and(|v| !v.is_null())
    })
}

fn missing_extension() -> RpcError {
    RpcError::new(
        -32021,
        format!("Missing required client capability: extensions[\"{EXTENSION}\"]"),
    )
    .with_data(json!({"requiredCapabilities": {"extensions": {EXTENSION: {}}}}))
}

/// Who a task of this request belongs to: the legacy session, or every modern client.
fn owner(ctx: &Ctx) -> Option<String> {
    (!ctx.is_modern()).then(|| ctx.session.id.clone().unwrap_or_else(|| "stdio".into()))
}

/// Start `name` as a task of this request's client.
fn start(ctx: &Ctx, name: &str, args: Map<String, Value>) -> Arc<Task> {
    let notify: Option<Arc<dyn Fn(Value) + Send + Sync>> = (!ctx.is_modern()).then(|| {
        let session = Arc::downgrade(&ctx.session);
        Arc::new(move |msg: Value| {
            if let Some(s) = session.upgrade() {
                let _ = s.send_unrelated(msg);
            }
        }) as Arc<dyn Fn(Value) + Send + Sync>
    });
    let task = ctx.session.fixture.tasks.create(owner(ctx), notify);
    tokio::spawn(tasks::run(task.clone(), name.to_string(), args));
    task
}

/// Run a task tool at once (no task): its result, or its protocol error.
async fn run_now(name: &str, args: Map<String, Value>) -> Result<Value, RpcError> {
    if matches!(name, "confirm_delete" | "multi_input") {
        return Ok(json!({"content": [{"type": "text",
            "text": format!("{name} asks for input through a task; call it as one")}], "isError": true}));
    }
    let task = tasks::Store::default().create(None, None);
    tasks::run(task.clone(), name.to_string(), args).await;
    match task.state().outcome {
        Some(o) => o,
        None => Err(RpcError::new(-32603, "the task ended without an outcome")),
    }
}

/// Handle `method` if it is one of `--tasks`.
pub(crate) async fn handle(
    ctx: &Ctx,
    method: &str,
    params: &Value,
) -> Option<Result<Value, RpcError>> {
    if !ctx.session.fixture.config.tasks {
        return None;
    }
    if method == "tools/call" {
        let name = params.get("name").and_then(Value::as_str)?;
        let support = tasks::support(name)?;
        let args = params
            .get("arguments")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        return Some(if ctx.is_modern() {
            modern_call(ctx, name, support, args).await
        } else {
            legacy_call(ctx, name, support, params, args).await
        });
    }
    if ctx.is_modern() {
        if !MODERN_METHODS.contains(&method) {
            return None;
        }
        if !declares_extension(ctx) {
            return Some(Err(missing_extension()));
        }
        return Some(modern_method(ctx, method, params));
    }
    if !LEGACY_METHODS.contains(&method) {
        return None;
    }
    Some(legacy_method(ctx, method, params).await)
}

async fn legacy_call(
    ctx: &Ctx,
    name: &str,
    support: &str,
    params: &Value,
    args: Map<String, Value>,
) -> Result<Value, RpcError> {
    if name == "greet" {
        let who = args.get("name").and_then(Value::as_str).unwrap_or("you");
        return Ok(json!({"content": [{"type": "text", "text": format!("Hello, {who}!")}]}));
    }
    match (params.get("task").is_some(), support) {
        (true, _) => Ok(json!({"task": start(ctx, name, args).legacy()})),
        (false, "required") => Err(RpcError::new(
            -32601,
            format!("Tool {name} must be called as a task (params.task)"),
        )),
        (false, _) => run_now(name, args).await,
    }
}

async fn legacy_method(ctx: &Ctx, method: &str, params: &Value) -> Result<Value, RpcError> {
    let store = &ctx.session.fixture.tasks;
    let owner = owner(ctx);
    if method == "tasks/list" {
        let tasks: Vec<Value> = store
            .list(owner.as_deref())
            .iter()
            .map(|t| t.legacy())
            .collect();
        return Ok(json!({"tasks": tasks}));
    }
    let task = store.get(task_id(params)?, owner.as_deref())?;
    match method {
        "tasks/get" => Ok(task.legacy()),
        "tasks/cancel" => {
            if matches!(task.state().status, "completed" | "failed" | "cancelled") {
                return Err(RpcError::invalid_params(format!(
                    "Cannot cancel task {}: it has already ended",
                    task.id
                )));
            }
            task.cancel();
            Ok(task.legacy())
        }
        _ => {
            // tasks/result: wait for the end, asking the client on this stream what the task
            // waits for (its input requests, answered into the task), then the tool's own
            // result.
            let mut changes = task.changes();
            loop {
                let st = task.state();
                if matches!(st.status, "completed" | "failed" | "cancelled") {
                    break;
                }
                if st.status == "input_required" && !st.input_requests.is_empty() {
                    let mut answers = Map::new();
                    for (key, req) in &st.input_requests {
                        let method = match req.get("method").and_then(Value::as_str) {
                            Some("sampling/createMessage") => "sampling/createMessage",
                            Some("roots/list") => "roots/list",
                            _ => "elicitation/create",
                        };
                        let params = req.get("params").cloned().unwrap_or(json!({}));
                        match ctx.ask_one(key, method, params).await {
                            Ok(a) => {
                                answers.insert(key.clone(), a);
                            }
                            Err(AskError::Rpc(e)) => return Err(e),
                            Err(_) => {
                                return Err(RpcError::new(-32603, "the client did not answer"))
                            }
                        }
                    }
                    task.answer(&answers);
                    continue;
                }
                if changes.changed().await.is_err() {
                    break;
                }
            }
            let st = task.state();
            match (st.status, st.outcome) {
                ("completed", Some(Ok(mut r))) => {
                    if let Some(o) = r.as_object_mut() {
                        let meta = o.entry("_meta").or_insert_with(|| json!({}));
                        meta[RELATED_TASK] = json!({"taskId": task.id});
                    }
                    Ok(r)
                }
                (_, Some(Err(e))) => Err(e),
                _ => Err(RpcError::new(
                    -32603,
                    format!("Task {} was cancelled", task.id),
                )),
            }
        }
    }
}

async fn modern_call(
    ctx: &Ctx,
    name: &str,
    support: &str,
    mut args: Map<String, Value>,
) -> Result<Value, RpcError> {
    if name == "greet" {
        let who = args.get("name").and_then(Value::as_str).unwrap_or("you");
        return Ok(json!({"content": [{"type": "text", "text": format!("Hello, {who}!")}]}));
    }
    if !declares_extension(ctx) {
        if support == "required" {
            return Err(missing_extension());
        }
        return run_now(name, args).await;
    }
    if name == "test_tool_with_task" {
        // One input round (MRTR) before the task: who is asking?
        let ask = json!({"message": "What is your name?", "requestedSchema": {
            "type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}});
        let answer = match ctx.ask_one("user_name", "elicitation/create", ask).await {
            Ok(a) => a,
            Err(AskError::InputRequired(r)) => return Ok(r),
            Err(AskError::Rpc(e)) => return Err(e),
            Err(AskError::Failed(e)) => return Err(RpcError::new(-32603, e)),
        };
        let user = answer
            .pointer("/content/name")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        args.insert("user_name".into(), json!(user));
    }
    let mut created = start(ctx, name, args).modern(false);
    created["resultType"] = json!("task");
    Ok(created)
}

fn modern_method(ctx: &Ctx, method: &str, params: &Value) -> Result<Value, RpcError> {
    let task = ctx.session.fixture.tasks.get(task_id(params)?, None)?;
    match method {
        "tasks/get" => Ok(task.modern(true)),
        "tasks/update" => {
            let responses = params
                .get("inputResponses")
                .and_then(Value::as_object)
                .ok_or_else(|| RpcError::invalid_params("tasks/update needs inputResponses"))?;
            task.answer(responses);
            Ok(json!({}))
        }
        _ => {
            task.cancel();
            Ok(json!({}))
        }
    }
}
