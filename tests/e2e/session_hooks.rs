//! Claude Code's session events through the real binary: SessionStart, Stop and SessionEnd
//! for both eras, SessionEnd's reasons, and what becomes of a session's transcript.

use crate::claude_hooks::{ask_client, fixture, serve, write_manifest};
use serde_json::{json, Value};
use sluice_e2e::mcp::Client;
use sluice_e2e::tree::Home;
use std::path::Path;
use std::time::Duration;

/// Writes one line per event it is shown to `events.jsonl` in the project folder.
const SESSION_PY: &str = r#"import json, os, sys
e = json.load(sys.stdin)
keep = {k: e.get(k) for k in ("hook_event_name", "session_id", "source", "reason", "sluice_reason", "stop_hook_active", "era")}
keep["protocol"] = (e.get("message") or {}).get("params", {}).get("protocolVersion")
with open(os.path.join(os.environ["CLAUDE_PROJECT_DIR"], "events.jsonl"), "a") as f:
    f.write(json.dumps(keep) + "\n")
if e["hook_event_name"] == "SessionStart" and e.get("era") == "modern" and os.path.exists(os.path.join(os.environ["CLAUDE_PROJECT_DIR"], "refuse")):
    print("sessions are closed", file=sys.stderr)
    sys.exit(2)
"#;

fn events(home: &Path, n: usize) -> Vec<Value> {
    let path = home.join("events.jsonl");
    // Bounded: up to 20 s (a loaded machine), returning as soon as they are there.
    for _ in 0..400 {
        let lines: Vec<Value> = std::fs::read_to_string(&path)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        if lines.len() >= n {
            return lines;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("fewer than {n} events in {}", path.display());
}

/// SessionStart, Stop and SessionEnd: at initialize and at the session's end for a legacy
/// client; around each request for a 2026-07-28 client, whose every request is a session of
/// its own.
#[tokio::test]
async fn session_events_fire_for_both_eras() {
    let home = Home::new("cc-session");
    home.expose(&json!({"upstreams": [
        {"id": "fx", "command": fixture(), "args": ["--stdio"], "expose_all": true}
    ]}));
    home.write("hooks/session.py", SESSION_PY);
    let script = json!(["${CLAUDE_PROJECT_DIR}/hooks/session.py"]);
    let hook = |id: &str, event: &str| json!({"id": id, "event": event, "type": "command", "command": "python3", "args": script, "enabled": true});
    write_manifest(
        &home,
        &json!([
            hook("session-start/s", "SessionStart"),
            hook("stop/s", "Stop"),
            hook("session-end/s", "SessionEnd")
        ]),
    );
    let (_gw, url) = serve(&home, &[]);
    let dir = std::fs::canonicalize(home.path()).unwrap();
    // Legacy: initialize starts it, DELETE ends it.
    let mut c = Client::new(&url);
    c.initialize(json!({})).await;
    let sid = c.session.clone().unwrap();
    let del = c
        .http
        .delete(&url)
        .header("mcp-session-id", &sid)
        .send()
        .await
        .unwrap();
    assert!(del.status().is_success(), "{}", del.status());
    let legacy = events(&dir, 3);
    assert_eq!(
        legacy,
        [
            json!({"hook_event_name": "SessionStart", "session_id": sid, "source": "startup", "reason": null, "sluice_reason": null, "stop_hook_active": null, "era": "legacy", "protocol": "2025-11-25"}),
            json!({"hook_event_name": "Stop", "session_id": sid, "source": null, "reason": null, "sluice_reason": null, "stop_hook_active": false, "era": "legacy", "protocol": null}),
            // The client ended it: Claude Code's `logout`.
            json!({"hook_event_name": "SessionEnd", "session_id": sid, "source": null, "reason": "logout", "sluice_reason": "client_delete", "stop_hook_active": null, "era": "legacy", "protocol": null}),
        ]
    );
    // Its transcript is removed once its end hooks ran (keep_transcripts is off).
    let transcript = dir.join(format!("transcripts/{sid}.jsonl"));
    for _ in 0..100 {
        if !transcript.exists() {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        !transcript.exists(),
        "{} is still there",
        transcript.display()
    );
    // 2026-07-28: one request, one session.
    let r = ask_client("auto", &url, "fx_echo", json!({"x": 1}), "allow");
    assert_eq!(r["result"]["structured"], json!({"x": 1}), "{r}");
    // (The SDK client sends more than the call: each request is a session, with its three
    // events in order.)
    // The end events follow the reply: wait until every session that started has ended.
    let mut all = events(&dir, 6);
    for _ in 0..100 {
        let ended = |s: &Value| {
            all.iter()
                .any(|e| e["hook_event_name"] == "SessionEnd" && e["session_id"] == s["session_id"])
        };
        if all
            .iter()
            .filter(|e| e["hook_event_name"] == "SessionStart")
            .all(ended)
        {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
        all = events(&dir, 6);
    }
    let modern = &all[3..];
    let sessions: std::collections::BTreeSet<&str> = modern
        .iter()
        .map(|e| e["session_id"].as_str().unwrap())
        .collect();
    assert_eq!(modern.len(), 3 * sessions.len(), "{all:?}");
    for s in sessions {
        assert!(s.starts_with("modern-"), "{s}");
        let of: Vec<&Value> = modern.iter().filter(|e| e["session_id"] == s).collect();
        let names: Vec<&str> = of
            .iter()
            .map(|e| e["hook_event_name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["SessionStart", "Stop", "SessionEnd"], "{all:?}");
        assert!(of.iter().all(|e| e["era"] == "modern"), "{all:?}");
        assert_eq!(
            (&of[2]["reason"], &of[2]["sluice_reason"]),
            (&json!("other"), &json!("request_done"))
        );
        assert_eq!(of[0]["protocol"], "2026-07-28");
    }
    // A SessionStart hook that refuses refuses the request.
    home.write("refuse", "");
    let r = ask_client("auto", &url, "fx_echo", json!({"x": 1}), "allow");
    assert_eq!(r["error"]["code"], -32030, "{r}");
    assert_eq!(r["error"]["data"]["reason"], "sessions are closed");
}

/// A session ended by the idle timeout: SessionEnd says so (`other`, `idle_timeout`), and with
/// `keep_transcripts` its transcript stays.
#[tokio::test]
async fn an_idle_session_ends_with_its_reason_and_keep_transcripts_keeps_its_file() {
    let home = Home::new("cc-session-idle");
    home.expose(&json!({"upstreams": [
        {"id": "fx", "command": fixture(), "args": ["--stdio"], "expose_all": true}
    ]}));
    home.write(
        "sluice.json",
        &json!({"session_idle_secs": 1, "keep_transcripts": true}).to_string(),
    );
    home.write("hooks/session.py", SESSION_PY);
    write_manifest(
        &home,
        &json!([{"id": "session-end/s", "event": "SessionEnd", "type": "command", "command": "python3",
                 "args": ["${CLAUDE_PROJECT_DIR}/hooks/session.py"], "enabled": true}]),
    );
    let (_gw, url) = serve(&home, &[]);
    let dir = std::fs::canonicalize(home.path()).unwrap();
    let mut c = Client::new(&url);
    c.initialize(json!({})).await;
    let sid = c.session.clone().unwrap();
    let r = c.call_tool("fx_echo", json!({"text": "hi"})).await;
    assert_eq!(
        r["result"]["structuredContent"],
        json!({"text": "hi"}),
        "{r}"
    );
    // The reaper looks every second; the events helper waits (bounded) for the event.
    let ended = events(&dir, 1);
    assert_eq!(
        ended,
        [
            json!({"hook_event_name": "SessionEnd", "session_id": sid, "source": null, "reason": "other", "sluice_reason": "idle_timeout", "stop_hook_active": null, "era": "legacy", "protocol": null})
        ]
    );
    let transcript = dir.join(format!("transcripts/{sid}.jsonl"));
    let lines = std::fs::read_to_string(&transcript).unwrap();
    assert_eq!(lines.lines().count(), 2, "{lines}");
}
