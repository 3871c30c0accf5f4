//! Tasks (`--tasks`): long tool calls a client collects later, in both eras. The 2025-11-25
//! experimental tasks (`params.task` on `tools/call` → `CreateTaskResult {task}`, `tasks/get`,
//! `tasks/result`, `tasks/list`, `tasks/cancel`, `notifications/tasks/status`) and the
//! 2026-07-28 extension `io.modelcontextprotocol/tasks` (the server decides; a flat
//! `resultType: "task"` result, `tasks/get` with the result inlined, `tasks/update` with
//! `inputResponses`, `tasks/cancel` answered with an empty ack). One store serves both; each
//! task belongs to the session (legacy) or to every modern client.
//!
//! The task tools: `greet` (never a task), `slow_compute` (optional, `seconds`-second sleep),
//! `card_report` (optional, a result with a card number), `failing_job` (required, a tool
//! error), `protocol_error_job` (optional, a protocol error), `confirm_delete` and
//! `multi_input` (modern, one and two elicitations through `tasks/update`), and
//! `test_tool_with_task` (modern, required: one input round, then a task).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{json, Map, Value};
use tokio::sync::watch;

use crate::protocol::RpcError;
use crate::sync::lock;

/// The extension's id (2026-07-28).
pub(crate) const EXTENSION: &str = "io.modelcontextprotocol/tasks";
/// The `_meta` key of a message related to a task (2025-11-25).
pub(crate) const RELATED_TASK: &str = "io.modelcontextprotocol/related-task";
/// The legacy methods of `--tasks`.
pub(crate) const LEGACY_METHODS: [&str; 4] =
    ["tasks/get", "tasks/result", "tasks/list", "tasks/cancel"];
/// The 2026-07-28 methods of the extension.
pub(crate) const MODERN_METHODS: [&str; 3] = ["tasks/get", "tasks/update", "tasks/cancel"];
/// How long a task is kept, and the poll interval suggested.
const TTL_MS: u64 = 300_000;
const POLL_MS: u64 = 200;

/// The tools `--tasks` adds, with their task support.
pub(crate) fn tools() -> Vec<Value> {
    let t = |name: &str, description: &str, support: Option<&str>, props: Value| {
        let mut tool = json!({
            "name": name,
            "description": description,
            "inputSchema": {"type": "object", "properties": props},
        });
        if let Some(s) = support {
            tool["execution"] = json!({"taskSupport": s});
        }
        tool
    };
    vec![
        t(
            "greet",
            "Says hello (never a task)",
            None,
            json!({"name": {"type": "string"}}),
        ),
        t(
            "slow_compute",
            "Sleeps `seconds` seconds, then answers (a task when the client can take one)",
            Some("optional"),
            json!({"seconds": {"type": "number"}, "label": {"type": "string"}}),
        ),
        t(
            "card_report",
            "Reports the card on file (a task when the client can take one)",
            Some("optional"),
            json!({}),
        ),
        t(
            "failing_job",
            "Fails as a tool after a second",
            Some("required"),
            json!({}),
        ),
        t(
            "protocol_error_job",
            "Crashes into a protocol error",
            Some("optional"),
            json!({}),
        ),
        t(
            "confirm_delete",
            "Asks to confirm, then deletes (2026-07-28 tasks)",
            Some("optional"),
            json!({"filename": {"type": "string"}}),
        ),
        t(
            "multi_input",
            "Asks two questions at once",
            Some("optional"),
            json!({}),
        ),
        t(
            "test_tool_with_task",
            "One input round, then a task whose result names the user",
            Some("required"),
            json!({}),
        ),
    ]
}

/// Is `name` a tool of `--tasks`, and may it run as a task?
pub(crate) fn support(name: &str) -> Option<&'static str> {
    match name {
        "greet" => Some("forbidden"),
        "slow_compute" | "card_report" | "protocol_error_job" | "confirm_delete"
        | "multi_input" => Some("optional"),
        "failing_job" | "test_tool_with_task" => Some("required"),
        _ => None,
    }
}

/// The `YYYY-MM-DDTHH:MM:SS.mmmZ` form of now.
fn now_iso() -> String {
    let ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0);
    let (days, rest) = (ms.div_euclid(86_400_000), ms.rem_euclid(86_400_000));
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:03}Z",
        rest / 3_600_000,
        rest / 60_000 % 60,
        rest / 1000 % 60,
        rest % 1000
    )
}

/// Where a task stands.
#[derive(Debug, Clone)]
pub(crate) struct TaskState {
    /// `working`, `input_required`, `completed`, `failed` or `cancelled`.
    pub status: &'static str,
    /// A human-readable note.
    pub message: Option<String>,
    /// When it was created and last changed.
    pub created_at: String,
    pub updated_at: String,
    /// The tool's result (completed) or the protocol error (failed).
    pub outcome: Option<Result<Value, RpcError>>,
    /// Input requests still unanswered (modern), by key.
    pub input_requests: Map<String, Value>,
    /// Answers given so far.
    pub answers: Map<String, Value>,
}

impl TaskState {
    fn terminal(&self) -> bool {
        matches!(self.status, "completed" | "failed" | "cancelled")
    }
}

/// One task.
pub(crate) struct Task {
    /// Its id.
    pub id: String,
    /// The legacy session it belongs to (`None`: modern, anyone's).
    pub owner: Option<String>,
    state: Mutex<TaskState>,
    changed: watch::Sender<u64>,
    /// Where status notifications go (a legacy session's unrelated stream).
    notify: Option<Arc<dyn Fn(Value) + Send + Sync>>,
}

impl Task {
    /// Its state now.
    pub(crate) fn state(&self) -> TaskState {
        lock(&self.state).clone()
    }

    fn update(&self, f: impl FnOnce(&mut TaskState)) {
        let task = {
            let mut st = lock(&self.state);
            if st.terminal() {
                return;
            }
            f(&mut st);
            st.updated_at = now_iso();
            self.legacy_view(&st)
        };
        self.changed.send_modify(|n| *n += 1);
        if let Some(n) = &self.notify {
            n(json!({"jsonrpc": "2.0", "method": "notifications/tasks/status", "params": task}));
        }
    }

    /// Finish with the tool's result, or a protocol error.
    pub(crate) fn finish(&self, outcome: Result<Value, RpcError>) {
        self.update(|st| {
            st.status = if outcome.is_ok() {
                "completed"
            } else {
                "failed"
            };
            st.message = None;
            st.outcome = Some(outcome);
        });
    }

    /// Cancel it (a no-op when it has ended).
    pub(crate) fn cancel(&self) {
        self.update(|st| {
            st.status = "cancelled";
            st.message = Some("Cancelled by the client".into());
        });
    }

    /// A receiver told of each change of its state.
    pub(crate) fn changes(&self) -> watch::Receiver<u64> {
        self.changed.subscribe()
    }

    /// Resolves when it has ended.
    pub(crate) async fn ended(&self) {
        let mut rx = self.changed.subscribe();
        while !lock(&self.state).terminal() {
            if rx.changed().await.is_err() {
                return;
            }
        }
    }

    /// Ask the client (modern): park the task on `requests` until every one is answered
    /// through `tasks/update`; the answers, or `None` when the task ended meanwhile.
    pub(crate) async fn ask(&self, requests: Map<String, Value>) -> Option<Map<String, Value>> {
        let keys: Vec<String> = requests.keys().cloned().collect();
        self.update(|st| {
            st.status = "input_required";
            st.input_requests = requests;
        });
        let mut rx = self.changed.subscribe();
        loop {
            {
                let st = lock(&self.state);
                if st.terminal() {
                    return None;
                }
                if st.input_requests.is_empty() {
                    let answers = keys
                        .iter()
                        .filter_map(|k| st.answers.get(k).map(|v| (k.clone(), v.clone())))
                        .collect();
                    return Some(answers);
                }
            }
            if rx.changed().await.is_err() {
                return None;
            }
        }
    }

    /// `tasks/update`: take the answers to pending requests (others are ignored).
    pub(crate) fn answer(&self, responses: &Map<String, Value>) {
        self.update(|st| {
            for (k, v) in responses {
                if st.input_requests.remove(k).is_some() {
                    st.answers.insert(k.clone(), v.clone());
                }
            }
            if st.input_requests.is_empty() && st.status == "input_required" {
                st.status = "working";
            }
        });
    }

    /// The 2025-11-25 `Task` object.
    pub(crate) fn legacy(&self) -> Value {
        self.legacy_view(&lock(&self.state))
    }

    fn legacy_view(&self, st: &TaskState) -> Value {
        let mut t = json!({
            "taskId": self.id,
            "status": st.status,
            "createdAt": st.created_at,
            "lastUpdatedAt": st.updated_at,
            "ttl": TTL_MS,
            "pollInterval": POLL_MS,
        });
        if let Some(m) = &st.message {
            t["statusMessage"] = json!(m);
        }
        t
    }

    /// The 2026-07-28 task envelope (flat), with the result, error or input requests inlined
    /// when `detailed` (`tasks/get`).
    pub(crate) fn modern(&self, detailed: bool) -> Value {
        let st = lock(&self.state);
        let mut t = json!({
            "taskId": self.id,
            "status": st.status,
            "createdAt": st.created_at,
            "lastUpdatedAt": st.updated_at,
            "ttlMs": TTL_MS,
            "pollIntervalMs": POLL_MS,
        });
        if let Some(m) = &st.message {
            t["statusMessage"] = json!(m);
        }
        if detailed {
            match &st.outcome {
                Some(Ok(r)) => t["result"] = r.clone(),
                Some(Err(e)) => t["error"] = e.to_value(),
                None => {}
            }
            if st.status == "input_required" {
                t["inputRequests"] = Value::Object(st.input_requests.clone());
            }
        }
        t
    }
}

/// Every task of the fixture.
#[derive(Default)]
pub(crate) struct Store {
    tasks: Mutex<HashMap<String, Arc<Task>>>,
    next: AtomicU64,
}

impl Store {
    /// A new working task.
    pub(crate) fn create(
        &self,
        owner: Option<String>,
        notify: Option<Arc<dyn Fn(Value) + Send + Sync>>,
    ) -> Arc<Task> {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let now = now_iso();
        let task = Arc::new(Task {
            id: format!("fixture-task-{n}-{}", uuid::Uuid::new_v4().simple()),
            owner,
            state: Mutex::new(TaskState {
                status: "working",
                message: None,
                created_at: now.clone(),
                updated_at: now,
                outcome: None,
                input_requests: Map::new(),
                answers: Map::new(),
            }),
            changed: watch::channel(0).0,
            notify,
        });
        lock(&self.tasks).insert(task.id.clone(), task.clone());
        task
    }

    /// The task `id` as `owner` may see it (a legacy session sees its own; modern: any
    /// modern task); -32602 otherwise.
    pub(crate) fn get(&self, id: &str, owner: Option<&str>) -> Result<Arc<Task>, RpcError> {
        lock(&self.tasks)
            .get(id)
            .filter(|t| t.owner.as_deref() == owner)
            .cloned()
            .ok_or_else(|| RpcError::invalid_params(format!("Task not found: {id}")))
    }

    /// The tasks of `owner`, oldest first.
    pub(crate) fn list(&self, owner: Option<&str>) -> Vec<Arc<Task>> {
        let mut v: Vec<Arc<Task>> = lock(&self.tasks)
            .values()
            .filter(|t| t.owner.as_deref() == owner)
            .cloned()
            .collect();
        v.sort_by(|a, b| a.state().created_at.cmp(&b.state().created_at));
        v
    }
}

fn text(s: impl Into<String>) -> Value {
    json!({"content": [{"type": "text", "text": s.into()}]})
}

/// The elicitation a task asks for.
fn confirm_request(message: &str, field: &str) -> Value {
    json!({"method": "elicitation/create", "params": {
        "message": message,
        "requestedSchema": {"type": "object", "properties": {field: {"type": "boolean"}}},
    }})
}

/// Run tool `name` with `args` as `task`'s work, until it finishes or is cancelled.
pub(crate) async fn run(task: Arc<Task>, name: String, args: Map<String, Value>) {
    let work = async {
        Some(match name.as_str() {
            "slow_compute" => {
                let secs = args.get("seconds").and_then(Value::as_f64).unwrap_or(1.0);
                tokio::time::sleep(Duration::from_secs_f64(secs.clamp(0.0, 600.0))).await;
                let label = args.get("label").and_then(Value::as_str).unwrap_or("");
                Ok(text(format!("Computed {label} in {secs} s")))
            }
            "card_report" => {
                tokio::time::sleep(Duration::from_millis(200)).await;
                Ok(text("Card on file: 4111 1111 1111 1111, expires 12/30"))
            }
            "failing_job" => {
                tokio::time::sleep(Duration::from_millis(1000)).await;
                Ok(
                    json!({"content": [{"type": "text", "text": "The job failed"}], "isError": true}),
                )
            }
            "protocol_error_job" => {
                tokio::time::sleep(Duration::from_millis(200)).await;
                Err(RpcError::new(-32603, "The job crashed"))
            }
            "confirm_delete" => {
                let file = args.get("filename").and_then(Value::as_str).unwrap_or("?");
                let mut ask = Map::new();
                ask.insert(
                    "confirm".into(),
                    confirm_request(&format!("Delete {file}?"), "confirm"),
                );
                match task.ask(ask).await {
                    Some(a) => Ok(text(format!("Deleted {file}: {}", Value::Object(a)))),
                    None => return None,
                }
            }
            "multi_input" => {
                let mut ask = Map::new();
                ask.insert(
                    "first".into(),
                    confirm_request("First question?", "confirm"),
                );
                ask.insert(
                    "second".into(),
                    confirm_request("Second question?", "confirm"),
                );
                match task.ask(ask).await {
                    Some(a) => Ok(text(format!("Answers: {}", Value::Object(a)))),
                    None => return None,
                }
            }
            "test_tool_with_task" => {
                let name = args.get("user_name").and_then(Value::as_str).unwrap_or("");
                tokio::time::sleep(Duration::from_millis(200)).await;
                Ok(text(format!("Hello, {name}! (from a task)")))
            }
            other => Err(RpcError::invalid_params(format!("Unknown tool: {other}"))),
        })
    };
    tokio::select! {
        outcome = work => if let Some(outcome) = outcome { task.finish(outcome) },
        () = task.ended() => {}
    }
}
