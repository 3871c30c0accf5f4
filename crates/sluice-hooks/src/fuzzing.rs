//! Entry points for the fuzz targets in `fuzz/` (hidden; not part of the supported API): the
//! readers of what a hook sends back, each called exactly as the hook kind calls it, without a
//! process or a socket around it.

use crate::decision::{Decision, HookFailure};
use crate::event::HookEvent;
use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

/// A command hook's stdout after exit 0, read as [`crate::command::CommandHook`] reads it.
pub fn command_stdout(ev: &HookEvent, stdout: &[u8]) -> Result<Decision, HookFailure> {
    crate::claude::read_json_protocol("fuzz", ev, stdout)
}

/// A process hook's stdout stream, cut into lines as the hook's reader cuts them (through a
/// buffer of `chunk` bytes, lines longer than `max_line` skipped), each line that is a JSON
/// object with a numeric `id` read as a decision on `ev`.
pub fn process_stdout(
    ev: &HookEvent,
    stdout: &[u8],
    chunk: usize,
    max_line: usize,
) -> Vec<Result<Decision, HookFailure>> {
    let mut r = tokio::io::BufReader::with_capacity(chunk.max(1), stdout);
    let mut buf = Vec::new();
    let mut decisions = Vec::new();
    while let Ok(Some(too_long)) = ready(crate::process::read_line(&mut r, &mut buf, max_line)) {
        assert!(
            buf.len() <= max_line,
            "a line longer than the bound was kept"
        );
        let text = String::from_utf8_lossy(&buf);
        let text = text.trim();
        if text.is_empty() || too_long {
            continue;
        }
        let Ok(serde_json::Value::Object(answer)) = serde_json::from_str(text) else {
            continue;
        };
        if answer
            .get("id")
            .and_then(serde_json::Value::as_u64)
            .is_none()
        {
            continue;
        }
        decisions.push(crate::process::read_answer(ev, &answer));
    }
    decisions
}

/// An http hook service's answer (`status`, `body`), read as [`crate::http::HttpHook`] reads
/// it. `None` for a status that HTTP cannot carry.
pub fn http_reply(
    ev: &HookEvent,
    status: u16,
    body: &[u8],
) -> Option<Result<Decision, HookFailure>> {
    let status = reqwest::StatusCode::from_u16(status).ok()?;
    Some(crate::http::read_reply(ev, status, body))
}

/// Run a future that never waits (a reader over bytes in memory) to its end.
fn ready<F: Future>(f: F) -> F::Output {
    let mut f = pin!(f);
    let mut cx = Context::from_waker(Waker::noop());
    loop {
        if let Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return v;
        }
    }
}
