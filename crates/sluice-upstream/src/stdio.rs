//! The stdio transport: a child process speaking one JSON message per line (bounded, see
//! [`framing`](crate::framing)); stderr goes to the log and to the connection's
//! [`StderrTail`](crate::StderrTail).
//!
//! A sandboxed child (`sandbox` in its spec) is started through `sluice sandbox-exec`, which
//! confines itself and then executes the server (`sluice-sandbox`); the rest is the same.
//!
//! The child runs in a process group of its own ([`sluice_core::process`]), so what it starts
//! (`sh -c 'sleep 97 & exec server'`, the children of `npx …`) is stopped with it. Shutdown
//! (a restart, a reload that removes the upstream, the gateway's shutdown, the process exiting)
//! closes stdin, waits 500 ms for the child to exit, then sends the group SIGTERM, waits up to
//! 1.5 s for every member to go, then sends the group SIGKILL. A wire dropped without a
//! shutdown kills the group.

use crate::core::Inner;
use crate::error::{ConnectError, UpstreamError};
use crate::framing::{self, Line, LineCodec, MAX_MESSAGE_LINE, MAX_STDERR_LINE};
use futures_util::StreamExt;
use sluice_config::UpstreamSpec;
use sluice_core::process::{self, Group};
use sluice_core::Message;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use tokio::process::{Child, Command};
use tokio::sync::mpsc;

/// How long a child has to exit on its own once its stdin is closed.
const EXIT_WAIT: Duration = Duration::from_millis(500);
/// How long its group has to go after SIGTERM, before SIGKILL.
const TERM_GRACE: Duration = Duration::from_millis(1500);

pub(crate) struct StdioWire {
    tx: parking_lot::Mutex<Option<mpsc::UnboundedSender<String>>>,
    /// The child and its group (killed if dropped armed), until the shutdown takes them.
    child: tokio::sync::Mutex<Option<(Child, Group)>>,
}

impl StdioWire {
    pub(crate) fn start(
        spec: &UpstreamSpec,
        inner: &Arc<Inner>,
    ) -> Result<StdioWire, UpstreamError> {
        // A sandboxed server is started by this binary's launcher, which confines itself and
        // then runs the server; an unsandboxed one is spawned directly.
        let mut cmd = match &spec.sandbox {
            None => {
                let mut cmd = Command::new(&spec.command);
                cmd.args(&spec.args);
                cmd
            }
            Some(sandbox) => {
                let (launcher, argv) =
                    sluice_sandbox::launcher_command(sandbox, &spec.command, &spec.args).map_err(
                        |e| ConnectError::Spawn {
                            command: spec.command.clone(),
                            source: e,
                        },
                    )?;
                let mut cmd = Command::new(launcher);
                cmd.args(argv);
                cmd
            }
        };
        cmd.envs(&spec.env)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if let Some(cwd) = &spec.cwd {
            cmd.current_dir(cwd);
        }
        let (mut child, group) = process::spawn(&mut cmd).map_err(|e| ConnectError::Spawn {
            command: spec.command.clone(),
            source: e,
        })?;
        let stdin = child.stdin.take().expect("piped stdin");
        let stdout = child.stdout.take().expect("piped stdout");
        let stderr = child.stderr.take().expect("piped stderr");
        let (tx, mut rx) = mpsc::unbounded_channel::<String>();

        // Writer: one line per message; ends (closing stdin) when the sender is dropped.
        let w_inner = inner.clone();
        tokio::spawn(async move {
            let mut stdin = stdin;
            while let Some(mut line) = rx.recv().await {
                line.push('\n');
                if let Err(e) = stdin.write_all(line.as_bytes()).await {
                    w_inner.close(format!("writing to the process failed: {e}"));
                    break;
                }
                if rx.is_empty() {
                    let _ = stdin.flush().await;
                }
            }
        });

        // A sandboxed child's launcher says on stderr why it did not run the server; the
        // stdout reader waits (briefly) for stderr to end, so that reason closes the connection.
        let (stderr_done, stderr_ended) = tokio::sync::oneshot::channel::<()>();
        let sandboxed = spec.sandbox.is_some();

        // Reader: every stdout line is one message.
        let r_inner = inner.clone();
        tokio::spawn(async move {
            let codec = LineCodec::new(MAX_MESSAGE_LINE).keep_head(LOG_HEAD);
            let mut lines = framing::read_lines(stdout, codec);
            loop {
                match lines.next().await {
                    Some(Ok(Line::Full(line))) => {
                        let line = line.trim_ascii();
                        if line.is_empty() {
                            continue;
                        }
                        // Not UTF-8 is a parse error like any other: logged, and reading goes on.
                        match Message::parse_reply(line) {
                            Ok(msg) => r_inner.dispatch(msg, None),
                            Err(e) => {
                                tracing::warn!(upstream = %r_inner.label, "ignored a stdout line that is not a JSON-RPC message ({}): {}", e.error.message, head(line))
                            }
                        }
                    }
                    Some(Ok(Line::TooLong(start))) => {
                        // Skipped unread, and reading goes on with the next line. Were it a
                        // reply, its call times out as any unanswered call does.
                        tracing::warn!(upstream = %r_inner.label, "ignored a stdout line longer than {MAX_MESSAGE_LINE} bytes: {}…", head(&start))
                    }
                    None => {
                        if sandboxed {
                            let _ = tokio::time::timeout(LAUNCHER_WORD, stderr_ended).await;
                        }
                        r_inner.close("the process closed its stdout (exited)".into());
                        break;
                    }
                    Some(Err(e)) => {
                        r_inner.close(format!("reading the process output failed: {e}"));
                        break;
                    }
                }
            }
        });

        // stderr → log. A line that is not UTF-8 is kept with U+FFFD in its place; one longer
        // than MAX_STDERR_LINE is cut there.
        let label = inner.label.clone();
        let tail = inner.stderr.clone();
        let e_inner = inner.clone();
        tokio::spawn(async move {
            let codec = LineCodec::new(MAX_STDERR_LINE).keep_head(MAX_STDERR_LINE);
            let mut lines = framing::read_lines(stderr, codec);
            while let Some(Ok(line)) = lines.next().await {
                let line = match line {
                    Line::Full(l) => String::from_utf8_lossy(&l).into_owned(),
                    Line::TooLong(start) => format!("{}…", String::from_utf8_lossy(&start)),
                };
                tracing::info!(target: "sluice::upstream::stderr", upstream = %label, "{line}");
                if sandboxed {
                    if let Some(why) = line.strip_prefix(LAUNCHER_PREFIX) {
                        e_inner.close(format!(
                            "the sandbox was not applied, the server not run: {why}"
                        ));
                    }
                }
                tail.push(line);
            }
            let _ = stderr_done.send(());
        });

        Ok(StdioWire {
            tx: parking_lot::Mutex::new(Some(tx)),
            child: tokio::sync::Mutex::new(Some((child, group))),
        })
    }

    pub(crate) fn send(&self, msg: &Message) -> Result<(), UpstreamError> {
        match &*self.tx.lock() {
            Some(tx) => tx
                .send(msg.to_json())
                .map_err(|_| UpstreamError::Closed("the process stdin is closed".into())),
            None => Err(UpstreamError::Closed("the process stdin is closed".into())),
        }
    }

    /// Close stdin, wait a little, SIGTERM to the group, wait, SIGKILL to the group (see the
    /// module docs). A second call waits for the first one's stop to end.
    pub(crate) async fn shutdown(&self) {
        self.tx.lock().take();
        let mut held = self.child.lock().await;
        let Some((child, group)) = held.as_mut() else {
            return;
        };
        let how = group.stop(child, EXIT_WAIT, TERM_GRACE).await;
        tracing::debug!(pid = ?group.id(), "stdio upstream stopped: {how:?}");
        *held = None;
    }
}

/// How a sandbox launcher's own error line starts (`sluice_sandbox::exec`).
const LAUNCHER_PREFIX: &str = "sluice sandbox-exec: ";
/// How long a sandboxed child's stdout end waits for its stderr to end (for the launcher's
/// reason), at most.
const LAUNCHER_WORD: Duration = Duration::from_millis(500);

/// Characters of an ignored stdout line that go to the log.
const LOG_HEAD: usize = 200;

/// The first [`LOG_HEAD`] characters of a line, for the log (U+FFFD for bytes that are not
/// UTF-8).
fn head(line: &[u8]) -> String {
    // A character is at most 4 bytes: this many bytes hold LOG_HEAD characters.
    let bytes = &line[..line.len().min(LOG_HEAD * 4)];
    String::from_utf8_lossy(bytes)
        .chars()
        .take(LOG_HEAD)
        .collect()
}

#[cfg(test)]
mod tests {
    use crate::{Connection, OpenOptions, StderrTail};
    use serde_json::json;
    use sluice_config::{Era, UpstreamSpec};
    use std::time::Duration;

    /// A child that answers `initialize` and one `ping`, writing before its first reply a line
    /// that is not UTF-8 and one over the stdout limit, and on stderr a line that is not UTF-8
    /// and one over the stderr limit.
    const CHILD: &str = r#"read -r init
printf '\377\376\n'
head -c 17000000 /dev/zero | tr '\0' x; echo
printf 'bad \377 stderr\n' >&2
head -c 20000 /dev/zero | tr '\0' e >&2; echo >&2
echo '{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-06-18","capabilities":{},"serverInfo":{"name":"t","version":"1"}}}'
read -r initialized
read -r ping
echo '{"jsonrpc":"2.0","id":2,"result":{}}'
cat >/dev/null
"#;

    #[tokio::test]
    async fn bad_lines_are_skipped_and_the_replies_after_them_arrive() {
        let mut spec = UpstreamSpec::stdio("t", "sh", vec!["-c".into(), CHILD.into()]);
        spec.era = Era::Legacy;
        let stderr = StderrTail::default();
        let (tx, _rx) = tokio::sync::mpsc::unbounded_channel();
        let opts = OpenOptions {
            client_info: json!({"name": "test", "version": "0"}),
            capabilities: json!({}),
            protocol_version: "2025-06-18".into(),
            connect_timeout: Duration::from_secs(20),
            label: "t".into(),
            stderr: stderr.clone(),
            identity: None,
            bearer: None,
        };
        let conn = Connection::open(&spec, opts, tx).await.expect("opens");
        let reply = conn
            .call("ping", None, Duration::from_secs(10))
            .await
            .expect("ping answered");
        assert_eq!(reply.result(), Some(&json!({})));
        assert!(!conn.is_closed());

        let want_cut = format!("{}…", "e".repeat(super::MAX_STDERR_LINE));
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        loop {
            let lines = stderr.lines();
            if lines.iter().any(|l| l == "bad \u{fffd} stderr") && lines.contains(&want_cut) {
                break;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "stderr tail: {:?}",
                lines
                    .iter()
                    .map(|l| &l[..l.len().min(40)])
                    .collect::<Vec<_>>()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        conn.shutdown().await;
    }
}
