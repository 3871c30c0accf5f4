//! The audit log (`logs/log.config.json`, toolfunnel's format): one JSON line per tool call and per
//! refusal, written by a background task so it never blocks a call. An unwritable path is
//! reported in the log, never fatal.

use crate::session::Session;
use serde_json::{json, Value};
use sluice_hooks::Trace;
use std::io::Write;
use std::path::PathBuf;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use tokio::sync::mpsc;

/// The audit log handle (cheap to share; off = every call is a no-op).
pub struct Audit {
    tx: Option<mpsc::UnboundedSender<String>>,
}

/// `YYYY-MM-DDTHH:MM:SS.mmmZ` for a Unix time in milliseconds.
pub fn rfc3339(ms: u128) -> String {
    let secs = (ms / 1000) as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        ms % 1000
    )
}

impl Audit {
    /// No audit log.
    pub fn off() -> Audit {
        Audit { tx: None }
    }

    /// Append JSON lines to `path` (created with its folder when missing).
    pub fn to_file(path: PathBuf) -> Audit {
        let (tx, mut rx) = mpsc::unbounded_channel::<String>();
        std::thread::Builder::new()
            .name("sluice-audit".into())
            .spawn(move || {
                let open = || {
                    if let Some(dir) = path.parent() {
                        std::fs::create_dir_all(dir)?;
                    }
                    std::fs::OpenOptions::new()
                        .create(true)
                        .append(true)
                        .open(&path)
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
                while let Some(mut line) = rx.blocking_recv() {
                    line.push('\n');
                    if let Some(f) = file.as_mut() {
                        if let Err(e) = f.write_all(line.as_bytes()).and_then(|_| f.flush()) {
                            if !warned {
                                tracing::error!(
                                    "writing the audit log {} failed: {e}",
                                    path.display()
                                );
                                warned = true;
                            }
                        }
                    }
                }
            })
            .expect("audit thread");
        Audit { tx: Some(tx) }
    }

    /// Is the audit log on?
    pub fn enabled(&self) -> bool {
        self.tx.is_some()
    }

    /// Append one event line.
    pub fn write(&self, event: &Value) {
        if let Some(tx) = &self.tx {
            let _ = tx.send(event.to_string());
        }
    }
}

/// One exchange, as it is recorded (the audit line and the live traffic view).
pub struct Exchange<'a> {
    /// The method.
    pub method: &'a str,
    /// The client-facing tool name (tools/call).
    pub tool: Option<&'a str>,
    /// The upstream it went to.
    pub upstream: Option<&'a str>,
    /// When it started.
    pub started: Instant,
    /// `ok`, `error`, `refused` or `cancelled`.
    pub outcome: &'a str,
    /// The error or refusal reason.
    pub error: Option<String>,
    /// What the hooks decided.
    pub trace: &'a Trace,
}

/// One exchange as an event: the audit line, and what the live traffic view shows.
pub fn event(session: &Session, x: &Exchange<'_>) -> Value {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or(0);
    let hooks: Vec<Value> = x
        .trace
        .records
        .iter()
        .map(|r| {
            json!({"id": r.id, "phase": r.phase.as_str(), "decision": r.decision, "reason": r.reason, "us": r.micros})
        })
        .collect();
    json!({
        "time": rfc3339(now),
        "session": session.id,
        "client": session.init.client_info.get("name").cloned().unwrap_or(Value::Null),
        "principal": session.principal().map(|p| json!(p.id)).unwrap_or(Value::Null),
        "method": x.method,
        "tool": x.tool,
        "upstream": x.upstream,
        "duration_ms": x.started.elapsed().as_secs_f64() * 1000.0,
        "outcome": x.outcome,
        "error": x.error,
        "explain_reason": x.trace.explain_reason,
        "controls": x.trace.controls,
        "hooks": hooks,
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn formats_utc_times() {
        assert_eq!(super::rfc3339(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(
            super::rfc3339(1_796_000_000_123),
            "2026-11-30T00:53:20.123Z"
        );
        assert_eq!(super::rfc3339(951_782_400_000), "2000-02-29T00:00:00.000Z");
    }
}
