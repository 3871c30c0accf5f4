//! The local upstream: the first-party tool register of the home folder (`tools/`), served in
//! process. The register and its overlay are read fresh on every list and call (as toolfunnel
//! does), and a change on disk is announced with `notifications/tools/list_changed`. Script and
//! shell tools run as child processes in their own process group, with the arguments in
//! `SLUICE_TOOL_ARGS` and `TOOLFUNNEL_TOOL_ARGS`; reference tools run nothing.

use crate::core::Inner;
use serde_json::{json, Value};
use sluice_config::tools::{self, Invoke, Mode, RegisterTool};
use sluice_config::UpstreamSpec;
use sluice_core::{Kind, Message, RpcError};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Weak};
use std::time::{Duration, SystemTime};
use tokio::io::AsyncReadExt;

const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);
const MAX_OUTPUT: usize = 4 * 1024 * 1024;

pub(crate) struct LocalWire {
    home: PathBuf,
    watcher: tokio::task::JoinHandle<()>,
}

fn stamp(home: &Path) -> Vec<Option<SystemTime>> {
    ["tools.register.json", "tools.state.json"]
        .iter()
        .map(|f| {
            std::fs::metadata(home.join("tools").join(f))
                .and_then(|m| m.modified())
                .ok()
        })
        .collect()
}

impl LocalWire {
    pub(crate) fn start(spec: &UpstreamSpec, inner: &Arc<Inner>) -> LocalWire {
        let home = spec.cwd.clone().unwrap_or_default();
        // Poll the two files; a change means the list may have changed.
        let weak: Weak<Inner> = Arc::downgrade(inner);
        let h = home.clone();
        let watcher = tokio::spawn(async move {
            let mut last = stamp(&h);
            loop {
                tokio::time::sleep(Duration::from_millis(500)).await;
                let Some(inner) = weak.upgrade() else { return };
                if inner.is_closed() {
                    return;
                }
                let now = stamp(&h);
                if now != last {
                    last = now;
                    inner.dispatch(
                        Message::notification("notifications/tools/list_changed", None),
                        None,
                    );
                }
            }
        });
        LocalWire { home, watcher }
    }

    pub(crate) fn send(&self, inner: &Arc<Inner>, msg: &Message) {
        if msg.kind() != Kind::Request {
            return;
        }
        let inner = inner.clone();
        let home = self.home.clone();
        let msg = msg.clone();
        tokio::spawn(async move {
            let id = msg.id().cloned().unwrap_or(Value::Null);
            let reply = match handle(&home, &msg).await {
                Ok(result) => Message::response(id, result),
                Err(e) => Message::error(id, &e),
            };
            inner.dispatch(reply, None);
        });
    }

    pub(crate) fn shutdown(&self) {
        self.watcher.abort();
    }
}

/// A register tool as an MCP tool definition.
pub fn tool_definition(t: &RegisterTool) -> Value {
    let mut description = t.summary.clone();
    if !t.instructions.is_empty() {
        if !description.is_empty() {
            description.push_str("\n\n");
        }
        description.push_str(&t.instructions);
    }
    json!({
        "name": t.id,
        "title": t.name,
        "description": description,
        "inputSchema": {"type": "object", "additionalProperties": true},
        "_meta": {"sluice/category": t.category, "sluice/mode": match t.mode { Mode::Gateway => "gateway", Mode::Reference => "reference" }}
    })
}

async fn handle(home: &Path, msg: &Message) -> Result<Value, RpcError> {
    match msg.method().unwrap_or("") {
        "initialize" => Ok(json!({
            "protocolVersion": msg.params().and_then(|p| p.get("protocolVersion")).cloned().unwrap_or(json!("2025-11-25")),
            "capabilities": {"tools": {"listChanged": true}},
            "serverInfo": {"name": "sluice-local", "title": "Sluice first-party tools", "version": env!("CARGO_PKG_VERSION")},
        })),
        "ping" => Ok(json!({})),
        "tools/list" => {
            let register = read(home)?;
            let tools: Vec<Value> = register.enabled().map(tool_definition).collect();
            Ok(json!({"tools": tools}))
        }
        "tools/call" => {
            let name = msg.param_str("name").unwrap_or("");
            let register = read(home)?;
            let Some(tool) = register.find(name) else {
                return Err(RpcError::invalid_params(format!("Unknown tool: {name}")));
            };
            let args = msg
                .params()
                .and_then(|p| p.get("arguments"))
                .cloned()
                .unwrap_or(Value::Null);
            Ok(run(home, tool, &args).await)
        }
        other => Err(RpcError::method_not_found(other)),
    }
}

fn read(home: &Path) -> Result<tools::Register, RpcError> {
    let mut errors = Vec::new();
    let register = tools::load(home, &mut errors);
    if let Some(e) = errors.first() {
        return Err(RpcError::internal(format!(
            "the tool register is invalid: {e}"
        )));
    }
    Ok(register)
}

fn text_result(text: String, is_error: bool) -> Value {
    let mut r = json!({"content": [{"type": "text", "text": text}]});
    if is_error {
        r["isError"] = json!(true);
    }
    r
}

/// Run one register tool and shape its output as a tools/call result.
pub async fn run(home: &Path, tool: &RegisterTool, args: &Value) -> Value {
    let invoke = match (&tool.mode, &tool.invoke) {
        (Mode::Reference, _) | (_, None) => {
            // Runs nothing: the agent performs it, following the instructions.
            return json!({
                "content": [{"type": "text", "text": tool.instructions}],
                "structuredContent": {"mode": "reference", "tool": tool.id, "instructions": tool.instructions}
            });
        }
        (Mode::Gateway, Some(i)) => i,
    };
    let args_json = serde_json::to_string(args).unwrap_or_else(|_| "null".into());
    let mut cmd = match invoke {
        Invoke::Script { path, interpreter } => {
            let scripts = home.join("tools").join("scripts");
            if !path.starts_with(&scripts) || !path.is_file() {
                return text_result(
                    format!(
                        "script {} is missing or outside tools/scripts",
                        path.display()
                    ),
                    true,
                );
            }
            match interpreter {
                Some(i) => {
                    let mut c = tokio::process::Command::new(i);
                    c.arg(path);
                    c
                }
                None => tokio::process::Command::new(path),
            }
        }
        Invoke::Shell { command } => {
            let mut c = tokio::process::Command::new("sh");
            c.arg("-c").arg(command);
            c
        }
    };
    cmd.current_dir(home)
        .env("SLUICE_TOOL_ARGS", &args_json)
        .env("TOOLFUNNEL_TOOL_ARGS", &args_json)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let (mut child, mut group) = match sluice_core::process::spawn(&mut cmd) {
        Ok(c) => c,
        Err(e) => return text_result(format!("cannot start tool {}: {e}", tool.id), true),
    };
    let mut stdout = child.stdout.take().expect("piped");
    let mut stderr = child.stderr.take().expect("piped");
    let timeout = tool
        .timeout_secs
        .map(Duration::from_secs_f64)
        .unwrap_or(DEFAULT_TIMEOUT);
    let work = async {
        let mut out = Vec::new();
        let mut err = Vec::new();
        let mut out_r = (&mut stdout).take(MAX_OUTPUT as u64);
        let mut err_r = (&mut stderr).take(MAX_OUTPUT as u64);
        let (a, b, status) = tokio::join!(
            out_r.read_to_end(&mut out),
            err_r.read_to_end(&mut err),
            child.wait()
        );
        let _ = (a, b);
        (out, err, status)
    };
    let (out, err, status) = match tokio::time::timeout(timeout, work).await {
        Ok(r) => {
            // It exited (and was reaped): what it left running in its group is its own.
            group.disarm();
            r
        }
        Err(_) => {
            group.kill();
            return text_result(
                format!(
                    "tool {} timed out after {:.0} s and was stopped",
                    tool.id,
                    timeout.as_secs_f64()
                ),
                true,
            );
        }
    };
    let out = String::from_utf8_lossy(&out).into_owned();
    let err = String::from_utf8_lossy(&err).into_owned();
    match status {
        Ok(s) if s.success() => {
            // One JSON line on stdout is the result.
            let line = out
                .lines()
                .rev()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("");
            match serde_json::from_str::<Value>(line.trim()) {
                Ok(v) => {
                    let structured = if v.is_object() {
                        v
                    } else {
                        json!({"result": v})
                    };
                    json!({"content": [{"type": "text", "text": line.trim()}], "structuredContent": structured})
                }
                Err(_) => text_result(out.trim_end().to_string(), false),
            }
        }
        Ok(s) => {
            let code = s
                .code()
                .map(|c| format!("exit code {c}"))
                .unwrap_or_else(|| "a signal".into());
            let detail = if err.trim().is_empty() {
                out.trim()
            } else {
                err.trim()
            };
            text_result(format!("tool {} failed ({code}): {detail}", tool.id), true)
        }
        Err(e) => text_result(format!("tool {} failed: {e}", tool.id), true),
    }
}
