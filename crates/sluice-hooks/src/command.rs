//! The `command` hook kind: a process per event (`sh -c`, or Claude Code's exec form with
//! `args`; event JSON on stdin), read with the Claude Code / toolfunnel exit-code and JSON
//! protocols, so existing hook scripts run unchanged.
//!
//! For each event the command runs with `sh -c <command>` (or, with `args`, the program
//! `command` with those arguments and no shell; `${CLAUDE_PROJECT_DIR}` and
//! `${CLAUDE_PLUGIN_ROOT}` in them are expanded) in the hook's folder, in a process group of its
//! own, with `CLAUDE_PROJECT_DIR` (the gateway's home) and, for a hook imported from a plugin,
//! `CLAUDE_PLUGIN_ROOT` in its environment, and [`HookEvent::to_json`] (and a newline) on
//! stdin, which is then closed.
//! stdout and stderr are captured (at most 1 MiB each; the rest is read and dropped). Past the
//! timeout the whole process group is killed and the hook fails (`timed out after 5s`); the
//! chain then applies the hook's `on_error`.
//!
//! How the result is read:
//!
//! - **death by a signal** (a crash: `kill -SEGV $$`, SIGKILL by the OOM killer) is a failure
//!   (`killed by signal SIGSEGV`), as a timeout is: the chain applies `on_error` (`refuse` by
//!   default), so a hook that crashes does not let the message through unless asked to. The
//!   command runs under `sh -c`, which outlives the program it starts and reports that
//!   program's death by signal N as exit 128 + N: an exit code of 129 to 159 (128 + a signal
//!   number) is read as that death too (`killed by signal SIGSEGV (exit code 139)`).
//! - **exit 2** blocks: refuse, with stderr (trimmed; `blocked by hook` when empty) as the reason.
//!   In this protocol stderr is feedback for the model, so the reason is meant for the agent.
//!   On PostToolUse and PostToolUseFailure the tool has already run, so exit 2 keeps the result
//!   and appends the reason to it as a text item (Claude Code feeds stderr to the model beside
//!   the result); the audit line records the hook's decision as `feedback` with the reason.
//! - **any other non-zero exit** is a non-blocking error, as in Claude Code: logged, pass. With
//!   `on_failure: "block"` (Claude Code's `onFailure`) it is a failure instead (`exited with code
//!   1: <stderr>`), and the chain refuses the message naming the hook.
//! - **exit 0** passes, unless stdout is a JSON object (the JSON protocol), read in this order:
//!   1. `hookSpecificOutput.permissionDecision`: `"deny"` refuses with
//!      `permissionDecisionReason`; `"ask"` asks a person (the chain collects it, a later
//!      refusal still wins, and the server asks the client with an elicitation); `"defer"` is
//!      collected like an ask (a later refusal wins; else the chain refuses the call, which no
//!      one can resume behind a gateway); `"allow"` goes on reading.
//!   2. `decision: "block"` refuses with `reason`.
//!   3. `continue: false` refuses with `stopReason` (`stopped by hook` when absent): behind a
//!      gateway stopping the agent means not making the call.
//!   4. The Zato-style hook services' shape, for hooks written for Sluice: `{"response": {…}}` answers (request
//!      phase) or replaces the reply (response phase); `{"request": {…}}` replaces the request.
//!      See [`crate::http`] for the details.
//!   5. `hookSpecificOutput.updatedInput` (an object) replaces `params.arguments` of a
//!      `tools/call` request (ignored, logged, anywhere else).
//!   6. `additionalContext` (in `hookSpecificOutput` or at the top level): in the response phase
//!      of `tools/call` a `{"type": "text", "text": …}` item is appended to `result.content`. In
//!      the request phase there is no model context to add it to (the agent's context is built
//!      by the agent, not the gateway), so it is logged and the hook passes.
//!
//!   Every refusal of the JSON protocol (read in `claude.rs`) is meant for the agent, as in
//!   Claude Code, where these reasons are shown to the model. stdout that is not JSON is
//!   advisory: pass.
//!
//!   On PostToolUse and PostToolUseFailure (the response phase of a call, which already ran)
//!   the output is read as Claude Code reads it there: `hookSpecificOutput.updatedMCPToolOutput`
//!   (or `updatedToolOutput`) replaces the result (an object is the new result, an array its
//!   `content`, a string one text item); then `decision: "block"` with `reason`, `continue:
//!   false` with `stopReason`, and `additionalContext` are appended as text items, in that
//!   order. A block or stop is recorded as `feedback` with its reason. `systemMessage` (shown to
//!   the user in Claude Code) is logged; `suppressOutput` (hides stdout from Claude Code's
//!   transcript view) has nothing to hide behind a gateway and is ignored.
//!
//!   On Elicitation (an upstream's `elicitation/create`) `hookSpecificOutput.action` (`accept`
//!   with `content`, `decline`, `cancel`) answers the upstream without asking the client, and
//!   exit 2 or `decision: "block"` declines; on ElicitationResult the same fields replace the
//!   client's answer.

use crate::claude::{after_the_call, elicitation_answer, feedback, read_json_protocol};
use crate::decision::{Decision, HookFailure, Refusal};
use crate::event::HookEvent;
use crate::wire::{fmt_duration, truncate_chars};
use nix::sys::signal::Signal;
use parking_lot::Mutex;
use sluice_config::Sandbox;
use sluice_core::process;
use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::process::Command;

/// The most of stderr a failure's reason carries.
const MAX_REASON_CHARS: usize = 500;
/// The most of stdout and of stderr kept from one run.
const MAX_CAPTURE: usize = 1024 * 1024;
/// How long, after the command exits, to wait for its stdout and stderr to close (a background
/// process it left behind may hold them open).
const DRAIN_GRACE: Duration = Duration::from_millis(200);

/// A hook that runs a command for every event.
#[derive(Debug, Clone)]
pub struct CommandHook {
    command: String,
    args: Option<Vec<String>>,
    cwd: PathBuf,
    timeout: Duration,
    plugin_root: Option<PathBuf>,
    fail_closed: bool,
    sandbox: Option<Sandbox>,
}

/// What one run produced.
struct Output {
    status: ExitStatus,
    stdout: Vec<u8>,
    stderr: Vec<u8>,
    truncated: bool,
}

impl CommandHook {
    /// A hook running `command` with `sh -c` in `cwd`, killed after `timeout`.
    pub fn new(command: String, cwd: PathBuf, timeout: Duration) -> CommandHook {
        CommandHook {
            command,
            args: None,
            cwd,
            timeout,
            plugin_root: None,
            fail_closed: false,
            sandbox: None,
        }
    }

    /// Confine each run as `sandbox` says (started through `sluice sandbox-exec`).
    pub fn sandboxed(mut self, sandbox: Option<Sandbox>) -> CommandHook {
        self.sandbox = sandbox;
        self
    }

    /// `on_failure: "block"`: an exit code other than 0 and 2 is a failure, not a pass.
    pub fn failing_closed(mut self, yes: bool) -> CommandHook {
        self.fail_closed = yes;
        self
    }

    /// Run `command` as a program with these arguments, without a shell (Claude Code's exec
    /// form), when `args` is given.
    pub fn with_args(mut self, args: Option<Vec<String>>) -> CommandHook {
        self.args = args;
        self
    }

    /// The plugin folder the hook came from (`CLAUDE_PLUGIN_ROOT`).
    pub fn with_plugin_root(mut self, root: Option<PathBuf>) -> CommandHook {
        self.plugin_root = root;
        self
    }

    /// `${CLAUDE_PROJECT_DIR}` and `${CLAUDE_PLUGIN_ROOT}` expanded (the exec form has no shell
    /// to do it).
    fn expand(&self, s: &str) -> String {
        let mut s = s.replace("${CLAUDE_PROJECT_DIR}", &self.cwd.to_string_lossy());
        if let Some(root) = &self.plugin_root {
            s = s.replace("${CLAUDE_PLUGIN_ROOT}", &root.to_string_lossy());
        }
        s
    }

    /// The command line.
    pub fn command(&self) -> &str {
        &self.command
    }

    /// Run the command on the event and read its decision.
    pub async fn decide(&self, ev: &HookEvent) -> Result<Decision, HookFailure> {
        let out = self.run(ev).await?;
        if out.truncated {
            tracing::warn!(
                command = %short(&self.command),
                "hook output longer than {MAX_CAPTURE} bytes was cut"
            );
        }
        let stderr = String::from_utf8_lossy(&out.stderr);
        let stderr = stderr.trim();
        match out.status.code() {
            Some(0) => {
                if !stderr.is_empty() {
                    tracing::debug!(command = %short(&self.command), stderr = %stderr, "hook stderr");
                }
                read_json_protocol(&self.command, ev, &out.stdout)
            }
            Some(2) => {
                let reason = if stderr.is_empty() {
                    "blocked by hook".to_string()
                } else {
                    stderr.to_string()
                };
                if after_the_call(ev) {
                    return Ok(feedback(ev, &ev.message, reason));
                }
                if let Some(d) = elicitation_answer(ev, "decline", None) {
                    return Ok(d);
                }
                Ok(Decision::Refuse(Refusal {
                    reason,
                    for_agent: true,
                    error: None,
                }))
            }
            Some(code) if shell_reported_signal(code).is_some() => {
                let sig = shell_reported_signal(code).expect("a signal");
                if !stderr.is_empty() {
                    tracing::info!(command = %short(&self.command), stderr = %stderr, "stderr of the hook that was killed");
                }
                Err(HookFailure(format!(
                    "killed by signal {sig} (exit code {code})"
                )))
            }
            Some(code) if self.fail_closed => Err(HookFailure(if stderr.is_empty() {
                format!("exited with code {code}")
            } else {
                format!(
                    "exited with code {code}: {}",
                    truncate_chars(stderr, MAX_REASON_CHARS)
                )
            })),
            Some(code) => {
                tracing::warn!(
                    command = %short(&self.command),
                    event = ev.event_name,
                    method = %ev.method,
                    stderr = %stderr,
                    "hook failed with exit code {code} (a non-blocking error: the message passes)"
                );
                Ok(Decision::Pass)
            }
            None => {
                if !stderr.is_empty() {
                    tracing::info!(command = %short(&self.command), stderr = %stderr, "stderr of the hook that was killed");
                }
                Err(HookFailure(format!(
                    "killed by {}",
                    describe_signal(&out.status)
                )))
            }
        }
    }

    /// Spawn, feed stdin, capture, wait (killing the group past the timeout).
    async fn run(&self, ev: &HookEvent) -> Result<Output, HookFailure> {
        let mut input = ev.payload().into_bytes();
        input.push(b'\n');

        let (program, argv) = match &self.args {
            Some(args) => (
                self.expand(&self.command),
                args.iter().map(|a| self.expand(a)).collect(),
            ),
            None => (
                "sh".to_string(),
                vec!["-c".to_string(), self.command.clone()],
            ),
        };
        let mut cmd = match &self.sandbox {
            None => {
                let mut c = Command::new(program);
                c.args(argv);
                c
            }
            Some(sandbox) => {
                let (launcher, argv) = sluice_sandbox::launcher_command(sandbox, &program, &argv)
                    .map_err(|e| {
                    HookFailure(format!("cannot find the sandbox launcher: {e}"))
                })?;
                let mut c = Command::new(launcher);
                c.args(argv);
                c
            }
        };
        if let Some(root) = &self.plugin_root {
            cmd.env("CLAUDE_PLUGIN_ROOT", root);
        }
        cmd.current_dir(&self.cwd)
            // Claude Code hook scripts find their project through this.
            .env("CLAUDE_PROJECT_DIR", &self.cwd)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        // A cancelled decide drops `group` armed, which kills the group while the leader is
        // not yet reaped (its pid cannot have been reused).
        let (mut child, mut group) = process::spawn(&mut cmd).map_err(|e| {
            HookFailure(format!(
                "cannot start the hook command {:?} in {}: {e}",
                short(&self.command),
                self.cwd.display()
            ))
        })?;

        let mut stdin = child.stdin.take().expect("piped stdin");
        let writer = tokio::spawn(async move {
            // A hook that does not read its stdin closes the pipe: not an error.
            let _ = stdin.write_all(&input).await;
            let _ = stdin.shutdown().await;
        });
        let stdout = Capture::start(child.stdout.take().expect("piped stdout"));
        let stderr = Capture::start(child.stderr.take().expect("piped stderr"));

        let waited = tokio::time::timeout(self.timeout, child.wait()).await;
        let status = match waited {
            Ok(Ok(status)) => {
                group.disarm();
                status
            }
            Ok(Err(e)) => {
                group.kill();
                writer.abort();
                return Err(HookFailure(format!(
                    "waiting for the hook command failed: {e}"
                )));
            }
            Err(_) => {
                group.kill();
                let _ = child.start_kill();
                writer.abort();
                // Reap the leader (SIGKILL cannot be ignored).
                let _ = tokio::time::timeout(Duration::from_secs(5), child.wait()).await;
                return Err(HookFailure(format!(
                    "timed out after {}",
                    fmt_duration(self.timeout)
                )));
            }
        };
        writer.abort();
        let ((stdout, t1), (stderr, t2)) =
            tokio::join!(stdout.finish(DRAIN_GRACE), stderr.finish(DRAIN_GRACE));
        Ok(Output {
            status,
            stdout,
            stderr,
            truncated: t1 || t2,
        })
    }
}

/// One captured stream: read to the end in a task, keeping the first [`MAX_CAPTURE`] bytes.
struct Capture {
    buf: Arc<Mutex<(Vec<u8>, bool)>>,
    task: tokio::task::JoinHandle<()>,
}

impl Capture {
    fn start<R: AsyncRead + Unpin + Send + 'static>(mut r: R) -> Capture {
        let buf = Arc::new(Mutex::new((Vec::new(), false)));
        let b = buf.clone();
        let task = tokio::spawn(async move {
            let mut chunk = vec![0u8; 16 * 1024];
            loop {
                match r.read(&mut chunk).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        let mut g = b.lock();
                        let room = MAX_CAPTURE.saturating_sub(g.0.len());
                        if n > room {
                            g.1 = true;
                        }
                        let keep = n.min(room);
                        g.0.extend_from_slice(&chunk[..keep]);
                    }
                }
            }
        });
        Capture { buf, task }
    }

    /// What was read, waiting at most `grace` for the end of the stream; and whether it was cut.
    async fn finish(mut self, grace: Duration) -> (Vec<u8>, bool) {
        if tokio::time::timeout(grace, &mut self.task).await.is_err() {
            self.task.abort();
        }
        std::mem::take(&mut *self.buf.lock())
    }
}

impl Drop for Capture {
    /// A stream held open by a process that escaped the group is not read forever.
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The signal a shell means by exit code `code` (128 + the signal's number), if any.
fn shell_reported_signal(code: i32) -> Option<Signal> {
    code.checked_sub(128)
        .filter(|n| *n > 0)
        .and_then(|n| Signal::try_from(n).ok())
}

fn describe_signal(status: &ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match status.signal() {
        Some(s) => match Signal::try_from(s) {
            Ok(sig) => format!("signal {sig}"),
            Err(_) => format!("signal {s}"),
        },
        None => format!("status {status}"),
    }
}

/// The command line for logs.
fn short(command: &str) -> &str {
    truncate_chars(command, 200)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_exec_form_expands_the_project_and_plugin_folders() {
        let h = CommandHook::new(
            "node".into(),
            PathBuf::from("/home/p"),
            Duration::from_secs(1),
        )
        .with_plugin_root(Some(PathBuf::from("/plugins/x")));
        assert_eq!(
            h.expand("${CLAUDE_PLUGIN_ROOT}/hooks/a.js ${CLAUDE_PROJECT_DIR}/b"),
            "/plugins/x/hooks/a.js /home/p/b"
        );
        let bare = CommandHook::new(
            "node".into(),
            PathBuf::from("/home/p"),
            Duration::from_secs(1),
        );
        assert_eq!(
            bare.expand("${CLAUDE_PLUGIN_ROOT}/a"),
            "${CLAUDE_PLUGIN_ROOT}/a"
        );
    }

    #[test]
    fn exit_codes_129_to_159_are_a_death_by_signal_as_a_shell_reports_it() {
        assert_eq!(shell_reported_signal(139), Some(Signal::SIGSEGV));
        assert_eq!(shell_reported_signal(137), Some(Signal::SIGKILL));
        assert_eq!(shell_reported_signal(129), Some(Signal::SIGHUP));
        assert_eq!(shell_reported_signal(159), Some(Signal::SIGSYS));
        for code in [0, 1, 2, 127, 128, 160, 255] {
            assert_eq!(shell_reported_signal(code), None, "{code}");
        }
    }
}
