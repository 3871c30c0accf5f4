//! The stdio transport: a child process speaking one JSON message per line; stderr goes to the
//! log and to the connection's [`StderrTail`](crate::connection::StderrTail); shutdown closes
//! stdin, then sends SIGTERM, then SIGKILL.

use crate::connection::Inner;
use crate::error::UpstreamError;
use sluice_config::UpstreamSpec;
use sluice_core::Message;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::mpsc;

pub(crate) struct StdioWire {
    tx: parking_lot::Mutex<Option<mpsc::UnboundedSender<String>>>,
    child: tokio::sync::Mutex<Option<Child>>,
    pid: Option<u32>,
}

impl StdioWire {
    pub fn start(spec: &UpstreamSpec, inner: &Arc<Inner>) -> Result<StdioWire, UpstreamError> {
        let mut cmd = Command::new(&spec.command);
        cmd.args(&spec.args)
            .envs(&spec.env)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        if let Some(cwd) = &spec.cwd {
            cmd.current_dir(cwd);
        }
        let mut child = cmd
            .spawn()
            .map_err(|e| UpstreamError::Connect(format!("cannot start {:?}: {e}", spec.command)))?;
        let pid = child.id();
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

        // Reader: every stdout line is one message.
        let r_inner = inner.clone();
        tokio::spawn(async move {
            let mut lines = BufReader::new(stdout).lines();
            loop {
                match lines.next_line().await {
                    Ok(Some(line)) => {
                        let line = line.trim();
                        if line.is_empty() {
                            continue;
                        }
                        match Message::parse(line.as_bytes()) {
                            Ok(msg) => r_inner.dispatch(msg, None),
                            Err(e) => {
                                tracing::warn!(upstream = %r_inner.label, "ignored a stdout line that is not a JSON-RPC message ({}): {}", e.error.message, truncate(line, 200))
                            }
                        }
                    }
                    Ok(None) => {
                        r_inner.close("the process closed its stdout (exited)".into());
                        break;
                    }
                    Err(e) => {
                        r_inner.close(format!("reading the process output failed: {e}"));
                        break;
                    }
                }
            }
        });

        // stderr → log.
        let label = inner.label.clone();
        let tail = inner.stderr.clone();
        tokio::spawn(async move {
            let mut lines = BufReader::new(stderr).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                tracing::info!(target: "sluice::upstream::stderr", upstream = %label, "{line}");
                tail.push(line);
            }
        });

        Ok(StdioWire {
            tx: parking_lot::Mutex::new(Some(tx)),
            child: tokio::sync::Mutex::new(Some(child)),
            pid,
        })
    }

    pub fn send(&self, msg: &Message) -> Result<(), UpstreamError> {
        match &*self.tx.lock() {
            Some(tx) => tx
                .send(msg.to_json())
                .map_err(|_| UpstreamError::Closed("the process stdin is closed".into())),
            None => Err(UpstreamError::Closed("the process stdin is closed".into())),
        }
    }

    /// Close stdin, wait a little, SIGTERM, wait, SIGKILL.
    pub async fn shutdown(&self) {
        self.tx.lock().take();
        let Some(mut child) = self.child.lock().await.take() else {
            return;
        };
        if tokio::time::timeout(Duration::from_millis(500), child.wait())
            .await
            .is_ok()
        {
            return;
        }
        if let Some(pid) = self.pid {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid as i32),
                nix::sys::signal::Signal::SIGTERM,
            );
        }
        if tokio::time::timeout(Duration::from_millis(1500), child.wait())
            .await
            .is_ok()
        {
            return;
        }
        let _ = child.kill().await;
    }
}

fn truncate(s: &str, n: usize) -> &str {
    match s.char_indices().nth(n) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}
