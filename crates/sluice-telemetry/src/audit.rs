//! The audit log (`logs/log.config.json`, toolfunnel's format): one JSON line per recorded
//! [`Exchange`], appended by a writer thread.
//!
//! Bounded like the trace exporter: a call serializes its line and offers it to a queue of
//! [`QUEUE`] lines; a full queue (a slow or stuck disk) drops the line and counts it, never
//! blocks the call. The writer logs dropped lines once per burst, with their count, and a failed
//! write once. An unwritable path is reported in the log, never fatal.

use crate::exchange::Exchange;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TrySendError};
use std::sync::Arc;

/// Lines waiting for the writer; past this, new lines are dropped (and counted).
pub const QUEUE: usize = 4096;

/// The audit log handle (cheap to share; off = every call is a no-op).
pub struct Audit {
    tx: Option<SyncSender<String>>,
    dropped: Arc<AtomicU64>,
}

impl Audit {
    /// No audit log.
    pub fn off() -> Audit {
        Audit {
            tx: None,
            dropped: Arc::default(),
        }
    }

    /// Append JSON lines to `path` (created with its folder when missing).
    pub fn to_file(path: PathBuf) -> Audit {
        let (tx, rx) = sync_channel::<String>(QUEUE);
        let dropped = Arc::new(AtomicU64::new(0));
        let seen = dropped.clone();
        let spawned = std::thread::Builder::new()
            .name("sluice-audit".into())
            .spawn(move || write_loop(&path, &rx, &seen));
        if let Err(e) = spawned {
            tracing::error!("the audit log writer cannot start: {e}; audit lines are dropped");
            return Audit::off();
        }
        Audit {
            tx: Some(tx),
            dropped,
        }
    }

    /// Is the audit log on?
    pub fn enabled(&self) -> bool {
        self.tx.is_some()
    }

    /// Append one exchange's line (never waits: a full queue drops it).
    pub fn write(&self, exchange: &Exchange) {
        let Some(tx) = &self.tx else { return };
        match tx.try_send(exchange.to_line()) {
            Ok(()) | Err(TrySendError::Disconnected(_)) => {}
            Err(TrySendError::Full(_)) => {
                self.dropped.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Lines dropped because the queue was full.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }
}

/// The writer thread: open (or report), then append each line until every handle is gone.
fn write_loop(path: &Path, rx: &Receiver<String>, dropped: &AtomicU64) {
    let open = || {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
    };
    let mut file = match open() {
        Ok(f) => Some(f),
        Err(e) => {
            tracing::error!(
                "audit log {} cannot be opened: {e}; audit lines are dropped",
                path.display()
            );
            None
        }
    };
    let mut warned = false;
    let mut dropped_seen = 0;
    let mut dropping = false;
    while let Ok(mut line) = rx.recv() {
        let now = dropped.load(Ordering::Relaxed);
        if now > dropped_seen && !dropping {
            tracing::warn!(
                "{} audit lines dropped: the audit queue ({QUEUE}) was full (logged again after it drains)",
                now - dropped_seen
            );
        }
        dropping = now > dropped_seen;
        dropped_seen = now;
        line.push('\n');
        if let Some(f) = file.as_mut() {
            if let Err(e) = f.write_all(line.as_bytes()).and_then(|_| f.flush()) {
                if !warned {
                    tracing::error!("writing the audit log {} failed: {e}", path.display());
                    warned = true;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exchange::{Caller, Ended};
    use sluice_hooks::Trace;
    use std::time::{Duration, Instant};

    fn exchange(tool: &str) -> Exchange {
        Exchange::new(
            Caller {
                session: "s",
                client: None,
                principal: Some("alice"),
            },
            Ended {
                method: "tools/call",
                tool: Some(tool),
                upstream: Some("fx"),
                started: Instant::now(),
                outcome: "ok",
                error: None,
                trace: &Trace::default(),
            },
        )
    }

    fn dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("sluice-audit-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    fn wait_for(path: &Path, lines: usize) -> String {
        for _ in 0..200 {
            let text = std::fs::read_to_string(path).unwrap_or_default();
            if text.lines().count() >= lines {
                return text;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        panic!("{} never had {lines} lines", path.display());
    }

    #[test]
    fn lines_are_appended_in_order() {
        let d = dir("order");
        let path = d.join("logs/log.config.json");
        let audit = Audit::to_file(path.clone());
        assert!(audit.enabled() && !Audit::off().enabled());
        let (a, b) = (exchange("a"), exchange("b"));
        audit.write(&a);
        audit.write(&b);
        let text = wait_for(&path, 2);
        assert_eq!(text, format!("{}\n{}\n", a.to_line(), b.to_line()));
        assert_eq!(audit.dropped(), 0);
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn an_unwritable_path_is_not_fatal() {
        let d = dir("unwritable");
        std::fs::create_dir_all(&d).unwrap();
        // A file where the folder should be: the log cannot be opened.
        std::fs::write(d.join("logs"), "").unwrap();
        let audit = Audit::to_file(d.join("logs/log.config.json"));
        assert!(audit.enabled());
        audit.write(&exchange("a"));
        drop(audit);
        Audit::off().write(&exchange("off"));
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn a_full_queue_drops_and_counts_without_waiting() {
        // A writer that never reads: the queue fills at 2.
        let (tx, _rx) = sync_channel(2);
        let audit = Audit {
            tx: Some(tx),
            dropped: Arc::default(),
        };
        for i in 0..5 {
            audit.write(&exchange(&i.to_string()));
        }
        assert_eq!(audit.dropped(), 3);
    }
}
