//! Process hooks: one python3 child speaking JSON lines, every decision kind, ids, deaths and
//! restarts.

use super::{call, gone, reply, TempDir};
use futures_util::future::join_all;
use serde_json::json;
use sluice_core::Message;
use sluice_hooks::process::ProcessHook;
use sluice_hooks::{Decision, Refusal};
use std::time::{Duration, Instant};

/// Decides by tool name.
const HOOK: &str = r#"import json, os, sys

held = None

def out(n, o):
    o["id"] = n
    sys.stdout.write(json.dumps(o) + "\n")
    sys.stdout.flush()

print("hook ready", file=sys.stderr, flush=True)
for line in sys.stdin:
    req = json.loads(line)
    n, ev = req["id"], req["event"]
    tool = ev.get("tool_name") or ""
    msg = ev["message"]
    if tool == "pass":
        out(n, {"decision": "pass"})
    elif tool == "modify":
        msg["params"]["arguments"]["region"] = "eu-central"
        out(n, {"decision": "modify", "message": msg})
    elif tool == "answer":
        out(n, {"decision": "answer", "message": {"jsonrpc": "2.0", "id": msg["id"],
            "result": {"content": [{"type": "text", "text": "answered by the hook"}]}}})
    elif tool == "refuse":
        out(n, {"decision": "refuse", "reason": "not today", "agent": True})
    elif tool == "refuse-quietly":
        out(n, {"decision": "refuse", "reason": "policy 7"})
    elif tool == "native":
        msg["params"]["arguments"]["via"] = "zato-style"
        out(n, {"request": msg})
    elif tool == "mask":
        if ev["phase"] == "response":
            msg["result"]["content"] = [{"type": "text", "text": "***"}]
            out(n, {"response": msg})
        else:
            out(n, {})
    elif tool == "garbage":
        print("this is not json", flush=True)
        out(n + 1000, {"decision": "pass"})
    elif tool == "silent":
        pass
    elif tool == "die":
        sys.exit(3)
    elif tool == "segv":
        os.kill(os.getpid(), 11)
    elif tool == "pid":
        out(n, {"decision": "refuse", "reason": str(os.getpid())})
    elif tool == "echo":
        out(n, {"decision": "refuse", "reason": str(ev["tool_input"]["n"])})
    elif tool == "hold":
        held = n
    elif tool == "release":
        out(n, {"decision": "refuse", "reason": "second"})
        out(held, {"decision": "refuse", "reason": "first"})
    else:
        out(n, {"decision": "pass"})
"#;

fn hook(dir: &TempDir, timeout: Duration) -> ProcessHook {
    let script = dir.script("hook.py", HOOK);
    ProcessHook::new(
        "process/test".into(),
        format!("python3 -u {}", script.display()),
        dir.path().to_path_buf(),
        timeout,
    )
}

fn refusal(reason: &str, for_agent: bool) -> Decision {
    Decision::Refuse(Refusal {
        reason: reason.into(),
        for_agent,
        error: None,
    })
}

/// The python process's own pid, as the hook reports it.
async fn python_pid(h: &ProcessHook) -> i32 {
    match h.decide(&call("pid", json!({}))).await.unwrap() {
        Decision::Refuse(r) => r.reason.parse().unwrap(),
        d => panic!("{d:?}"),
    }
}

#[tokio::test]
async fn every_decision_kind() {
    let dir = TempDir::new("proc-kinds");
    let h = hook(&dir, Duration::from_secs(10));
    assert_eq!(h.pid(), None, "started before the first event");

    assert_eq!(
        h.decide(&call("pass", json!({}))).await.unwrap(),
        Decision::Pass
    );
    assert!(h.pid().is_some());

    let Decision::Modify(m) = h
        .decide(&call("modify", json!({"order": 7})))
        .await
        .unwrap()
    else {
        panic!()
    };
    assert_eq!(
        m.to_value(),
        json!({"jsonrpc": "2.0", "id": 41, "method": "tools/call",
            "params": {"name": "modify", "arguments": {"order": 7, "region": "eu-central"}}})
    );

    assert_eq!(
        h.decide(&call("answer", json!({}))).await.unwrap(),
        Decision::Answer(
            Message::from_value(json!({"jsonrpc": "2.0", "id": 41,
            "result": {"content": [{"type": "text", "text": "answered by the hook"}]}}))
            .unwrap()
        )
    );
    assert_eq!(
        h.decide(&call("refuse", json!({}))).await.unwrap(),
        refusal("not today", true)
    );
    assert_eq!(
        h.decide(&call("refuse-quietly", json!({}))).await.unwrap(),
        refusal("policy 7", false)
    );

    // The Zato-style hook services' shape.
    let Decision::Modify(m) = h.decide(&call("native", json!({}))).await.unwrap() else {
        panic!()
    };
    assert_eq!(m.params().unwrap()["arguments"]["via"], "zato-style");
    let ev = reply(
        "mask",
        json!({}),
        json!({"content": [{"type": "text", "text": "card 4111 1111 1111 1111"}]}),
    );
    let Decision::Modify(m) = h.decide(&ev).await.unwrap() else {
        panic!()
    };
    assert_eq!(
        m.to_value(),
        json!({"jsonrpc": "2.0", "id": 41, "result": {"content": [{"type": "text", "text": "***"}]}})
    );
    // `{}`: no keys, pass.
    assert_eq!(
        h.decide(&call("mask", json!({}))).await.unwrap(),
        Decision::Pass
    );
    h.shutdown().await;
}

#[tokio::test]
async fn answers_are_matched_by_id_not_by_order() {
    let dir = TempDir::new("proc-order");
    let h = hook(&dir, Duration::from_secs(10));
    let hold = call("hold", json!({}));
    let (first, second) = tokio::join!(h.decide(&hold), async {
        tokio::time::sleep(Duration::from_millis(300)).await;
        h.decide(&call("release", json!({}))).await
    });
    assert_eq!(first.unwrap(), refusal("first", false));
    assert_eq!(second.unwrap(), refusal("second", false));

    let events: Vec<_> = (0..50).map(|n| call("echo", json!({"n": n}))).collect();
    let ds = join_all(events.iter().map(|e| h.decide(e))).await;
    for (n, d) in ds.into_iter().enumerate() {
        assert_eq!(d.unwrap(), refusal(&n.to_string(), false));
    }
    h.shutdown().await;
}

#[tokio::test]
async fn an_unreadable_line_is_ignored_and_the_event_times_out_but_the_child_keeps_running() {
    let dir = TempDir::new("proc-garbage");
    let h = hook(&dir, Duration::from_millis(500));
    // Python may take longer than 500 ms to start on a loaded machine: the first events may time
    // out before the child is up (which, as this test shows, keeps it running), so ask until it
    // answers (bounded).
    let mut before = None;
    for _ in 0..20 {
        match h.decide(&call("pid", json!({}))).await {
            Ok(Decision::Refuse(r)) => {
                before = Some(r.reason.parse::<i32>().unwrap());
                break;
            }
            Ok(d) => panic!("{d:?}"),
            Err(e) => assert_eq!(e.0, "timed out after 500ms"),
        }
    }
    let before = before.expect("the child never answered in 20 tries of 500 ms");
    let e = h.decide(&call("garbage", json!({}))).await.unwrap_err();
    assert_eq!(e.0, "timed out after 500ms");
    let e = h.decide(&call("silent", json!({}))).await.unwrap_err();
    assert_eq!(e.0, "timed out after 500ms");
    assert_eq!(python_pid(&h).await, before, "the child was restarted");
    h.shutdown().await;
}

/// Send `tool` (which makes the child die), check the event failed at once (not at the
/// timeout) and the child was restarted; returns the failure.
async fn dies_and_is_restarted(label: &str, tool: &str) -> String {
    let dir = TempDir::new(label);
    let h = hook(&dir, Duration::from_secs(10));
    let first = python_pid(&h).await;
    let started = Instant::now();
    let e = h.decide(&call(tool, json!({}))).await.unwrap_err();
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "waited for the timeout"
    );
    assert!(gone(first, Duration::from_secs(3)).await);
    let second = python_pid(&h).await;
    assert_ne!(first, second);
    assert_eq!(
        h.decide(&call("pass", json!({}))).await.unwrap(),
        Decision::Pass
    );
    h.shutdown().await;
    e.0
}

#[tokio::test]
async fn a_child_that_dies_fails_the_event_and_is_restarted() {
    let e = dies_and_is_restarted("proc-die", "die").await;
    assert!(e.contains("exited"), "{e}");
    assert!(e.contains("3"), "no exit status in {e}");
}

#[tokio::test]
async fn a_child_killed_by_a_signal_fails_the_pending_event_and_is_restarted() {
    let e = dies_and_is_restarted("proc-segv", "segv").await;
    assert!(e.starts_with("the process hook exited ("), "{e}");
    // `sh -c` reports its child's death by SIGSEGV as 139 (or dies of it, having exec'd it).
    assert!(
        e.contains("SIGSEGV") || e.contains("exit status: 139"),
        "no signal in {e}"
    );
    assert!(e.ends_with("before answering"), "{e}");
}

#[tokio::test]
async fn a_child_that_never_starts_properly_fails_fast() {
    let dir = TempDir::new("proc-exit");
    let h = ProcessHook::new(
        "process/broken".into(),
        "echo broken >&2; exit 7".into(),
        dir.path().to_path_buf(),
        Duration::from_secs(10),
    );
    for _ in 0..3 {
        let started = Instant::now();
        let e = h.decide(&call("t", json!({}))).await.unwrap_err();
        assert!(started.elapsed() < Duration::from_secs(5), "{e}");
        assert!(
            e.0.contains("exited") || e.0.contains("restarting") || e.0.contains("stdin"),
            "{e}"
        );
    }
    h.shutdown().await;
}

#[tokio::test]
async fn a_child_that_cannot_start_fails() {
    let dir = TempDir::new("proc-nostart");
    let h = ProcessHook::new(
        "process/nostart".into(),
        "true".into(),
        dir.path().join("missing"),
        Duration::from_secs(5),
    );
    let e = h.decide(&call("t", json!({}))).await.unwrap_err();
    assert!(e.0.contains("cannot start the process hook"), "{e}");
}

#[tokio::test]
async fn shutdown_stops_the_child() {
    let dir = TempDir::new("proc-shutdown");
    let h = hook(&dir, Duration::from_secs(10));
    let pid = python_pid(&h).await;
    h.shutdown().await;
    assert!(gone(pid, Duration::from_secs(3)).await);
    assert_eq!(h.pid(), None);
    let e = h.decide(&call("pass", json!({}))).await.unwrap_err();
    assert!(e.0.contains("shut down"), "{e}");
}

#[tokio::test]
async fn dropping_the_hook_stops_the_child() {
    let dir = TempDir::new("proc-drop");
    let h = hook(&dir, Duration::from_secs(10));
    let pid = python_pid(&h).await;
    drop(h);
    assert!(gone(pid, Duration::from_secs(5)).await);
}

#[tokio::test]
async fn a_child_that_ignores_stdin_closing_is_killed_at_shutdown() {
    let dir = TempDir::new("proc-stubborn");
    let script = dir.script(
        "stubborn.sh",
        r#"trap '' TERM
echo $$ > "$PWD/stubborn.pid"
while true; do sleep 0.1; done
"#,
    );
    let h = ProcessHook::new(
        "process/stubborn".into(),
        format!("bash {}", script.display()),
        dir.path().to_path_buf(),
        Duration::from_millis(300),
    );
    let e = h.decide(&call("t", json!({}))).await.unwrap_err();
    assert!(e.0.contains("timed out"), "{e}");
    let pid = dir.read_pid("stubborn.pid");
    h.shutdown().await;
    assert!(gone(pid, Duration::from_secs(3)).await);
}
