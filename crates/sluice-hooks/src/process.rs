//! The `process` hook kind: one long-lived child speaking JSON lines, events and decisions
//! matched by id, started on first use and restarted when it dies.
//!
//! The child is `sh -c <command>`, run in the hook's folder in a process group of its own. For
//! each event Sluice writes one line to its stdin:
//!
//! ```json
//! {"id": 7, "event": { …HookEvent::to_json()… }}
//! ```
//!
//! and waits for the line on stdout with the same `id` (several events may be in flight; answers
//! may come in any order):
//!
//! ```json
//! {"id": 7, "decision": "pass"}
//! {"id": 7, "decision": "modify", "message": {…}}
//! {"id": 7, "decision": "answer", "message": {…}}
//! {"id": 7, "decision": "refuse", "reason": "…", "agent": true}
//! {"id": 7, "request": {…}}  /  {"id": 7, "response": {…}}   (the Zato-style hook services' shape, as for http)
//! ```
//!
//! A line with an `id` and none of these keys passes. `agent` (default `false`) says whether the
//! refusal reason is meant for the agent. `answer` in the response phase replaces the reply, as
//! `modify` does. A `message` must be a JSON-RPC message (`jsonrpc` and the event's `id` are
//! filled in when left out); see [`crate::http`].
//!
//! Failures (the chain applies `on_error`): no answer within the timeout (the child keeps
//! running; the time the child takes to start counts against the first event), the child exiting
//! while events wait, a decision that cannot be read. A stdout line that is not JSON, or has no
//! id Sluice is waiting for, is logged and ignored. stderr goes to the log (target
//! `sluice::hooks::stderr`).
//!
//! When the child dies (or closes its stdout) it is started again after a backoff that doubles
//! from 100 ms to 10 s with each death that comes before it answered anything; an answer resets
//! it. After five such deaths in a row the child is no longer restarted eagerly, only when the
//! next event comes (still after the backoff). [`ProcessHook::shutdown`] (and dropping the hook)
//! closes stdin, then sends the group SIGTERM, then SIGKILL.

use crate::decision::{Decision, HookFailure, Refusal};
use crate::event::{HookEvent, Phase};
use crate::wire::{native_decision, replace, to_message, truncate_chars};
use nix::sys::signal::Signal;
use parking_lot::Mutex;
use serde_json::{Map, Value};
use sluice_config::Sandbox;
use sluice_core::process::{self, Group};
use std::collections::HashMap;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::{mpsc, oneshot, watch};
use tokio::time::Instant;

/// The longest stdout line read from the child.
const MAX_LINE: usize = 16 * 1024 * 1024;
/// The longest stderr line logged.
const MAX_LOG_LINE: usize = 64 * 1024;
/// The first restart delay.
const BACKOFF_INITIAL: Duration = Duration::from_millis(100);
/// The longest restart delay.
const BACKOFF_MAX: Duration = Duration::from_secs(10);
/// Events written to the child's stdin but not yet taken by it, at most.
const MAX_QUEUED: usize = 1024;
/// Deaths in a row (without an answer) after which restarts wait for the next event.
const EAGER_RESTARTS: u32 = 5;

/// A hook backed by one long-lived child process.
pub struct ProcessHook {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for ProcessHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProcessHook")
            .field("id", &self.inner.id)
            .field("command", &self.inner.command)
            .field("pid", &self.pid())
            .finish()
    }
}

struct Inner {
    id: String,
    command: String,
    cwd: PathBuf,
    timeout: Duration,
    sandbox: Option<Sandbox>,
    next_id: AtomicU64,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    live: Option<Arc<Live>>,
    generation: u64,
    /// Deaths in a row before the child answered anything.
    failures: u32,
    /// No start before this (the backoff).
    not_before: Option<Instant>,
    shut_down: bool,
}

type Waiter = oneshot::Sender<Result<Map<String, Value>, String>>;

/// One running child.
struct Live {
    generation: u64,
    pid: Option<u32>,
    /// Lines for stdin; taken (closing stdin) to stop.
    tx: Mutex<Option<mpsc::Sender<String>>>,
    /// Events waiting for an answer; `None` once the child is gone.
    pending: Mutex<Option<HashMap<u64, Waiter>>>,
    answered: AtomicBool,
    stop: Mutex<Option<oneshot::Sender<()>>>,
    exited: watch::Receiver<bool>,
}

impl Live {
    fn stop(&self) {
        self.tx.lock().take();
        if let Some(s) = self.stop.lock().take() {
            let _ = s.send(());
        }
    }
}

enum Acquired {
    Live(Arc<Live>),
    WaitUntil(Instant),
}

impl ProcessHook {
    /// A hook `id` (for the log) running `command` with `sh -c` in `cwd`; each event waits at
    /// most `timeout` for its answer. Nothing starts until the first event.
    pub fn new(id: String, command: String, cwd: PathBuf, timeout: Duration) -> ProcessHook {
        ProcessHook::confined(id, command, cwd, timeout, None)
    }

    /// [`ProcessHook::new`], its child confined as `sandbox` says (started through
    /// `sluice sandbox-exec`).
    pub fn confined(
        id: String,
        command: String,
        cwd: PathBuf,
        timeout: Duration,
        sandbox: Option<Sandbox>,
    ) -> ProcessHook {
        ProcessHook {
            inner: Arc::new(Inner {
                id,
                command,
                cwd,
                timeout,
                sandbox,
                next_id: AtomicU64::new(1),
                state: Mutex::new(State::default()),
            }),
        }
    }

    /// The pid of the running child (its process group id too), if one runs.
    pub fn pid(&self) -> Option<u32> {
        self.inner.state.lock().live.as_ref().and_then(|l| l.pid)
    }

    /// Send the event to the child and wait for its decision.
    pub async fn decide(&self, ev: &HookEvent) -> Result<Decision, HookFailure> {
        let inner = &self.inner;
        let deadline = Instant::now() + inner.timeout;
        let line_of = |n: u64| format!(r#"{{"id":{n},"event":{}}}"#, ev.payload());
        let (live, n, rx) = loop {
            let live = match Inner::acquire(inner)? {
                Acquired::Live(l) => l,
                Acquired::WaitUntil(t) if t <= deadline => {
                    tokio::time::sleep_until(t).await;
                    continue;
                }
                Acquired::WaitUntil(t) => {
                    return Err(HookFailure(format!(
                        "the process hook is restarting (next start in {})",
                        crate::wire::fmt_duration(t.saturating_duration_since(Instant::now()))
                    )))
                }
            };
            let n = inner.next_id.fetch_add(1, Ordering::Relaxed);
            let (tx, rx) = oneshot::channel();
            match live.pending.lock().as_mut() {
                Some(p) => {
                    p.insert(n, tx);
                }
                // It died just now: get the next one.
                None => continue,
            }
            break (live, n, rx);
        };
        let _pending = PendingGuard(&live, n);
        let line = line_of(n);
        let sent = match live.tx.lock().as_ref() {
            Some(tx) => tx.try_send(line),
            None => Err(mpsc::error::TrySendError::Closed(String::new())),
        };
        match sent {
            Ok(()) => {}
            Err(mpsc::error::TrySendError::Full(_)) => {
                return Err(HookFailure(format!(
                    "the process hook is not reading its stdin ({MAX_QUEUED} events queued)"
                )))
            }
            Err(mpsc::error::TrySendError::Closed(_)) => {
                return Err(HookFailure("the process hook's stdin is closed".into()))
            }
        }
        match tokio::time::timeout_at(deadline, rx).await {
            Err(_) => Err(HookFailure(format!(
                "timed out after {}",
                crate::wire::fmt_duration(inner.timeout)
            ))),
            Ok(Err(_)) => Err(HookFailure(
                "the process hook exited before answering".into(),
            )),
            Ok(Ok(Err(why))) => Err(HookFailure(why)),
            Ok(Ok(Ok(answer))) => read_answer(ev, &answer),
        }
    }

    /// Stop the child (close stdin, SIGTERM, SIGKILL) and wait for it; later events fail.
    pub async fn shutdown(&self) {
        let live = {
            let mut st = self.inner.state.lock();
            st.shut_down = true;
            st.live.take()
        };
        if let Some(live) = live {
            live.stop();
            let mut exited = live.exited.clone();
            let _ = exited.wait_for(|e| *e).await;
        }
    }
}

impl Drop for ProcessHook {
    fn drop(&mut self) {
        let live = {
            let mut st = self.inner.state.lock();
            st.shut_down = true;
            st.live.take()
        };
        if let Some(live) = live {
            live.stop();
        }
    }
}

/// Removes an event from the waiting list when its decide ends (answered, timed out, dropped).
struct PendingGuard<'a>(&'a Live, u64);

impl Drop for PendingGuard<'_> {
    fn drop(&mut self) {
        if let Some(p) = self.0.pending.lock().as_mut() {
            p.remove(&self.1);
        }
    }
}

impl Inner {
    /// The running child, started now if none runs and the backoff allows.
    fn acquire(this: &Arc<Inner>) -> Result<Acquired, HookFailure> {
        let mut st = this.state.lock();
        if st.shut_down {
            return Err(HookFailure("the process hook was shut down".into()));
        }
        if let Some(l) = &st.live {
            return Ok(Acquired::Live(l.clone()));
        }
        if let Some(t) = st.not_before {
            if t > Instant::now() {
                return Ok(Acquired::WaitUntil(t));
            }
        }
        match Inner::start(this, &mut st) {
            Ok(l) => Ok(Acquired::Live(l)),
            Err(e) => {
                st.failures += 1;
                st.not_before = Some(Instant::now() + backoff(st.failures));
                Err(e)
            }
        }
    }

    /// Spawn the child and its reader, writer, stderr and waiter tasks.
    fn start(this: &Arc<Inner>, st: &mut State) -> Result<Arc<Live>, HookFailure> {
        let shell = ["-c".to_string(), this.command.clone()];
        let mut cmd = match &this.sandbox {
            None => {
                let mut c = Command::new("sh");
                c.args(&shell);
                c
            }
            Some(sandbox) => {
                let (launcher, argv) = sluice_sandbox::launcher_command(sandbox, "sh", &shell)
                    .map_err(|e| HookFailure(format!("cannot find the sandbox launcher: {e}")))?;
                let mut c = Command::new(launcher);
                c.args(argv);
                c
            }
        };
        cmd.current_dir(&this.cwd)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let (mut child, group) = process::spawn(&mut cmd).map_err(|e| {
            HookFailure(format!(
                "cannot start the process hook {:?} in {}: {e}",
                this.command,
                this.cwd.display()
            ))
        })?;
        st.generation += 1;
        let pid = child.id();
        let stdin = child.stdin.take().expect("piped stdin");
        let stdout = child.stdout.take().expect("piped stdout");
        let stderr = child.stderr.take().expect("piped stderr");
        let (tx, rx) = mpsc::channel::<String>(MAX_QUEUED);
        let (stop_tx, stop_rx) = oneshot::channel();
        let (exited_tx, exited_rx) = watch::channel(false);
        let live = Arc::new(Live {
            generation: st.generation,
            pid,
            tx: Mutex::new(Some(tx)),
            pending: Mutex::new(Some(HashMap::new())),
            answered: AtomicBool::new(false),
            stop: Mutex::new(Some(stop_tx)),
            exited: exited_rx,
        });
        tracing::info!(hook = %this.id, pid = ?pid, "process hook started");

        tokio::spawn(write_lines(stdin, rx));
        let (eof_tx, eof_rx) = oneshot::channel();
        tokio::spawn(read_answers(stdout, live.clone(), this.id.clone(), eof_tx));
        tokio::spawn(log_stderr(stderr, this.id.clone()));
        tokio::spawn(watch_child(
            child,
            group,
            Arc::downgrade(this),
            live.clone(),
            stop_rx,
            eof_rx,
            exited_tx,
        ));
        st.live = Some(live.clone());
        Ok(live)
    }

    /// The child `generation` is gone: forget it and schedule the restart.
    fn on_exit(this: &Arc<Inner>, live: &Live, how: &str) {
        let mut st = this.state.lock();
        if st.live.as_ref().map(|l| l.generation) == Some(live.generation) {
            st.live = None;
        }
        if st.shut_down {
            return;
        }
        if live.answered.load(Ordering::Relaxed) {
            st.failures = 0;
        }
        st.failures += 1;
        let delay = backoff(st.failures);
        st.not_before = Some(Instant::now() + delay);
        let eager = st.failures <= EAGER_RESTARTS;
        tracing::warn!(
            hook = %this.id,
            "the process hook {how}; {} in {}",
            if eager { "restarting" } else { "restarting on the next event, at the earliest" },
            crate::wire::fmt_duration(delay)
        );
        if eager {
            let weak = Arc::downgrade(this);
            tokio::spawn(async move {
                tokio::time::sleep(delay).await;
                if let Some(inner) = weak.upgrade() {
                    let mut st = inner.state.lock();
                    if st.shut_down || st.live.is_some() {
                        return;
                    }
                    if let Err(e) = Inner::start(&inner, &mut st) {
                        st.failures += 1;
                        st.not_before = Some(Instant::now() + backoff(st.failures));
                        tracing::warn!(hook = %inner.id, "{e}");
                    }
                }
            });
        }
    }
}

/// 100 ms, doubling per failure, at most 10 s.
fn backoff(failures: u32) -> Duration {
    let factor = 1u32 << failures.saturating_sub(1).min(16);
    (BACKOFF_INITIAL * factor).min(BACKOFF_MAX)
}

async fn write_lines(mut stdin: tokio::process::ChildStdin, mut rx: mpsc::Receiver<String>) {
    while let Some(mut line) = rx.recv().await {
        line.push('\n');
        if stdin.write_all(line.as_bytes()).await.is_err() {
            // The child is going away; the reader sees its stdout close.
            return;
        }
        if rx.is_empty() && stdin.flush().await.is_err() {
            return;
        }
    }
    // Every sender is gone (stop): closing stdin is the first request to exit.
    let _ = stdin.shutdown().await;
}

/// Match every stdout line to the event waiting for it; tell the waiter when stdout closes.
async fn read_answers(
    stdout: tokio::process::ChildStdout,
    live: Arc<Live>,
    id: String,
    eof: oneshot::Sender<()>,
) {
    let mut r = BufReader::new(stdout);
    let mut buf = Vec::new();
    loop {
        let too_long = match read_line(&mut r, &mut buf, MAX_LINE).await {
            Ok(Some(too_long)) => too_long,
            Ok(None) | Err(_) => break,
        };
        let text = String::from_utf8_lossy(&buf);
        let text = text.trim();
        if text.is_empty() {
            continue;
        }
        if too_long {
            tracing::warn!(hook = %id, "ignored a process hook stdout line longer than {MAX_LINE} bytes");
            continue;
        }
        let answer = match serde_json::from_str::<Value>(text) {
            Ok(Value::Object(o)) => o,
            _ => {
                tracing::warn!(hook = %id, line = %truncate_chars(text, 300), "ignored a process hook stdout line that is not a JSON object");
                continue;
            }
        };
        let Some(n) = answer.get("id").and_then(Value::as_u64) else {
            tracing::warn!(hook = %id, line = %truncate_chars(text, 300), "ignored a process hook answer without a numeric id");
            continue;
        };
        let waiter = live.pending.lock().as_mut().and_then(|p| p.remove(&n));
        match waiter {
            Some(w) => {
                live.answered.store(true, Ordering::Relaxed);
                let _ = w.send(Ok(answer));
            }
            None => {
                tracing::warn!(hook = %id, id = n, "ignored a process hook answer no event waits for (late, or a wrong id)")
            }
        }
    }
    let _ = eof.send(());
}

async fn log_stderr(stderr: tokio::process::ChildStderr, id: String) {
    let mut r = BufReader::new(stderr);
    let mut buf = Vec::new();
    while let Ok(Some(_)) = read_line(&mut r, &mut buf, MAX_LOG_LINE).await {
        let line = String::from_utf8_lossy(&buf);
        let line = line.trim_end();
        if !line.is_empty() {
            tracing::info!(target: "sluice::hooks::stderr", hook = %id, "{line}");
        }
    }
}

/// Wait for the child to exit, to be stopped, or to close its stdout; then fail the events
/// still waiting and schedule the restart.
async fn watch_child(
    mut child: Child,
    mut group: Group,
    inner: Weak<Inner>,
    live: Arc<Live>,
    stop: oneshot::Receiver<()>,
    eof: oneshot::Receiver<()>,
    exited: watch::Sender<bool>,
) {
    let (mut stop, mut eof) = (stop, eof);
    let mut eof_seen = false;
    let how = tokio::select! {
        status = child.wait() => match status {
            Ok(s) => format!("exited ({s})"),
            Err(e) => format!("could not be waited for ({e})"),
        },
        _ = &mut stop => {
            live.tx.lock().take();
            group.stop(&mut child, Duration::from_millis(500), Duration::from_millis(1500)).await;
            "was stopped".to_string()
        }
        _ = &mut eof => {
            eof_seen = true;
            match tokio::time::timeout(Duration::from_millis(200), child.wait()).await {
                Ok(Ok(s)) => format!("exited ({s})"),
                _ => {
                    group.signal(Signal::SIGKILL);
                    let _ = child.wait().await;
                    "closed its stdout, so it was killed".to_string()
                }
            }
        }
    };
    // Stragglers left in its group would hold the pipes open.
    group.kill();
    // Answers it wrote just before exiting are still in the pipe: let the reader match them.
    if !eof_seen {
        let _ = tokio::time::timeout(Duration::from_millis(500), eof).await;
    }
    live.tx.lock().take();
    if let Some(inner) = inner.upgrade() {
        Inner::on_exit(&inner, &live, &how);
    }
    let waiting = live.pending.lock().take().unwrap_or_default();
    for (_, w) in waiting {
        let _ = w.send(Err(format!("the process hook {how} before answering")));
    }
    let _ = exited.send(true);
}

/// One line into `buf` (without the newline). `None` at the end of the stream; `Some(true)`
/// when the line was longer than `max` (the rest is skipped).
pub(crate) async fn read_line<R: AsyncBufRead + Unpin>(
    r: &mut R,
    buf: &mut Vec<u8>,
    max: usize,
) -> std::io::Result<Option<bool>> {
    buf.clear();
    let mut too_long = false;
    let mut any = false;
    loop {
        let avail = r.fill_buf().await?;
        if avail.is_empty() {
            return Ok(any.then_some(too_long));
        }
        any = true;
        let (part, used, done) = match avail.iter().position(|b| *b == b'\n') {
            Some(i) => (&avail[..i], i + 1, true),
            None => (avail, avail.len(), false),
        };
        let room = max.saturating_sub(buf.len());
        if part.len() > room {
            too_long = true;
        }
        buf.extend_from_slice(&part[..part.len().min(room)]);
        r.consume(used);
        if done {
            return Ok(Some(too_long));
        }
    }
}

/// Read a decision line (see the module docs).
pub(crate) fn read_answer(
    ev: &HookEvent,
    answer: &Map<String, Value>,
) -> Result<Decision, HookFailure> {
    let decision = match answer.get("decision") {
        None | Some(Value::Null) => {
            return Ok(native_decision(ev, answer)?.unwrap_or(Decision::Pass))
        }
        Some(Value::String(d)) => d.as_str(),
        Some(other) => {
            return Err(HookFailure(format!(
                "unreadable answer from the process hook: \"decision\" is {other}"
            )))
        }
    };
    let message = || {
        match answer.get("message") {
        Some(Value::Object(o)) => to_message(ev, o, "message"),
        _ => Err(HookFailure(format!(
            "unreadable answer from the process hook: \"decision\": \"{decision}\" needs an object under \"message\""
        ))),
    }
    };
    match decision {
        "pass" => Ok(Decision::Pass),
        "modify" => Ok(replace(ev, message()?)),
        "answer" => match ev.phase {
            Phase::Request => Ok(Decision::Answer(message()?)),
            Phase::Response => Ok(replace(ev, message()?)),
        },
        "refuse" => Ok(Decision::Refuse(Refusal {
            reason: answer
                .get("reason")
                .and_then(Value::as_str)
                .map(str::trim)
                .filter(|r| !r.is_empty())
                .unwrap_or("refused by hook")
                .to_string(),
            for_agent: answer.get("agent").and_then(Value::as_bool).unwrap_or(false),
            error: None,
        })),
        other => Err(HookFailure(format!(
            "unreadable answer from the process hook: unknown decision {other:?} (pass, modify, answer or refuse)"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use sluice_core::Message;

    fn ev(phase: Phase) -> HookEvent {
        HookEvent {
            phase,
            event_name: "Request",
            method: "ping".into(),
            session_id: "s".into(),
            tool_name: None,
            upstream: None,
            message: Message::from_value(json!({"jsonrpc":"2.0","id":1,"method":"ping"})).unwrap(),
            request: None,
            era: "modern",
            cwd: PathBuf::from("/"),
            principal: None,
            upstream_sub: None,
            claude: Default::default(),
        }
    }

    fn ans(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn answers() {
        let e = ev(Phase::Request);
        assert_eq!(
            read_answer(&e, &ans(json!({"id":1}))).unwrap(),
            Decision::Pass
        );
        assert_eq!(
            read_answer(&e, &ans(json!({"id":1,"decision":"pass"}))).unwrap(),
            Decision::Pass
        );
        assert_eq!(
            read_answer(&e, &ans(json!({"id":1,"decision":"refuse"}))).unwrap(),
            Decision::Refuse(Refusal {
                reason: "refused by hook".into(),
                for_agent: false,
                error: None,
            })
        );
        assert_eq!(
            read_answer(
                &e,
                &ans(json!({"id":1,"decision":"refuse","reason":"r","agent":true}))
            )
            .unwrap(),
            Decision::Refuse(Refusal {
                reason: "r".into(),
                for_agent: true,
                error: None,
            })
        );
        let a = read_answer(
            &e,
            &ans(json!({"id":1,"decision":"answer","message":{"result":{}}})),
        )
        .unwrap();
        assert_eq!(
            a,
            Decision::Answer(
                Message::from_value(json!({"jsonrpc":"2.0","id":1,"result":{}})).unwrap()
            )
        );
        // Answer in the response phase replaces the reply.
        let a = read_answer(
            &ev(Phase::Response),
            &ans(json!({"id":1,"decision":"answer","message":{"result":{}}})),
        )
        .unwrap();
        assert!(matches!(a, Decision::Modify(_)));
        for bad in [
            json!({"id":1,"decision":"modify"}),
            json!({"id":1,"decision":"modify","message":{"x":1}}),
            json!({"id":1,"decision":"maybe"}),
            json!({"id":1,"decision":3}),
        ] {
            assert!(read_answer(&e, &ans(bad)).is_err());
        }
    }

    #[test]
    fn backoff_doubles_to_a_cap() {
        assert_eq!(backoff(1), Duration::from_millis(100));
        assert_eq!(backoff(2), Duration::from_millis(200));
        assert_eq!(backoff(4), Duration::from_millis(800));
        assert_eq!(backoff(10), Duration::from_secs(10));
        assert_eq!(backoff(u32::MAX), Duration::from_secs(10));
    }

    #[tokio::test]
    async fn lines_are_bounded() {
        let data: &[u8] = b"short\nabcdefghij\nlast";
        let mut r = BufReader::new(data);
        let mut buf = Vec::new();
        assert_eq!(read_line(&mut r, &mut buf, 8).await.unwrap(), Some(false));
        assert_eq!(buf, b"short");
        assert_eq!(read_line(&mut r, &mut buf, 8).await.unwrap(), Some(true));
        assert_eq!(buf, b"abcdefgh");
        assert_eq!(read_line(&mut r, &mut buf, 8).await.unwrap(), Some(false));
        assert_eq!(buf, b"last");
        assert_eq!(read_line(&mut r, &mut buf, 8).await.unwrap(), None);
    }
}
