//! Tests of the external hook kinds (command, process, http) against real processes and a real
//! HTTP hook service.

mod command;
mod http;
mod process;

use serde_json::{json, Value};
use sluice_core::Message;
use sluice_hooks::{HookEvent, Phase};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

/// A folder removed when dropped.
pub struct TempDir(PathBuf);

impl TempDir {
    /// A fresh folder under the system temp dir.
    pub fn new(label: &str) -> TempDir {
        static N: AtomicU32 = AtomicU32::new(0);
        let n = N.fetch_add(1, Ordering::Relaxed);
        let dir =
            std::env::temp_dir().join(format!("sluice-hooks-{label}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }

    /// The folder.
    pub fn path(&self) -> &Path {
        &self.0
    }

    /// Write an executable script into the folder; returns its path.
    pub fn script(&self, name: &str, body: &str) -> PathBuf {
        use std::os::unix::fs::PermissionsExt;
        let p = self.0.join(name);
        std::fs::write(&p, body).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        p
    }

    /// Read a pid a script wrote into the folder (waiting for it a little).
    pub fn read_pid(&self, name: &str) -> i32 {
        for _ in 0..100 {
            if let Ok(s) = std::fs::read_to_string(self.0.join(name)) {
                if let Ok(pid) = s.trim().parse() {
                    return pid;
                }
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!("no pid in {name}");
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A `tools/call` request as the PreToolUse event of `tool` with `arguments`.
pub fn call(tool: &str, arguments: Value) -> HookEvent {
    let message = Message::from_value(json!({
        "jsonrpc": "2.0", "id": 41, "method": "tools/call",
        "params": {"name": tool, "arguments": arguments}
    }))
    .unwrap();
    HookEvent {
        phase: Phase::Request,
        event_name: "PreToolUse",
        method: "tools/call".into(),
        session_id: "session-1".into(),
        tool_name: Some(tool.into()),
        upstream: Some("crm".into()),
        message,
        request: None,
        era: "legacy",
        cwd: PathBuf::from("/srv/sluice"),
        principal: None,
        upstream_sub: None,
        claude: Default::default(),
    }
}

/// The PostToolUse event of that call, replied with `result`.
pub fn reply(tool: &str, arguments: Value, result: Value) -> HookEvent {
    let request = call(tool, arguments).message;
    HookEvent {
        phase: Phase::Response,
        event_name: "PostToolUse",
        message: Message::from_value(json!({"jsonrpc": "2.0", "id": 41, "result": result}))
            .unwrap(),
        request: Some(request),
        ..call(tool, json!({}))
    }
}

/// A request-phase event for a method without a tool.
pub fn method_event(method: &str) -> HookEvent {
    HookEvent {
        event_name: "Request",
        method: method.into(),
        tool_name: None,
        upstream: None,
        message: Message::from_value(json!({"jsonrpc": "2.0", "id": 7, "method": method})).unwrap(),
        ..call("x", json!({}))
    }
}

/// Whether a process runs (a zombie waiting for its parent does not count).
pub fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state follows the parenthesised command name.
        Ok(stat) => match stat.rsplit_once(") ") {
            Some((_, rest)) => !rest.starts_with('Z') && !rest.starts_with('X'),
            None => true,
        },
        Err(_) => false,
    }
}

/// Wait until the process is gone; false when it still runs after `within`.
pub async fn gone(pid: i32, within: Duration) -> bool {
    let end = tokio::time::Instant::now() + within;
    while tokio::time::Instant::now() < end {
        if !alive(pid) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    !alive(pid)
}

/// Kill a process a test left behind on purpose.
pub fn kill(pid: i32) {
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGKILL,
    );
}
