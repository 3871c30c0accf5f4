//! Command hooks: real scripts, the Claude Code exit-code and JSON protocols.

use super::{alive, call, gone, kill, method_event, reply, TempDir};
use futures_util::future::join_all;
use serde_json::json;
use sluice_hooks::command::CommandHook;
use sluice_hooks::{Decision, Refusal};
use std::time::{Duration, Instant};

fn hook(dir: &TempDir, command: &str) -> CommandHook {
    CommandHook::new(
        command.to_string(),
        dir.path().to_path_buf(),
        Duration::from_secs(10),
    )
}

fn refused(reason: &str) -> Decision {
    Decision::Refuse(Refusal {
        reason: reason.into(),
        for_agent: true,
        error: None,
    })
}

/// A Claude Code PreToolUse script, unchanged: exit 2 with the reason on stderr.
const DENY_DANGEROUS: &str = r#"#!/usr/bin/env bash
# Blocks destructive shell commands (Claude Code exit-code protocol).
input=$(cat)
if printf '%s' "$input" | grep -q 'rm -rf'; then
  echo "Blocked: 'rm -rf' is not allowed. Delete files one by one." >&2
  exit 2
fi
exit 0
"#;

#[tokio::test]
async fn exit_2_blocks_with_stderr_as_the_reason_for_the_agent() {
    let dir = TempDir::new("deny");
    let script = dir.script("deny-dangerous.sh", DENY_DANGEROUS);
    let h = hook(&dir, &format!("bash \"{}\"", script.display()));
    let d = h
        .decide(&call("Bash", json!({"command": "rm -rf /var/data"})))
        .await
        .unwrap();
    assert_eq!(
        d,
        refused("Blocked: 'rm -rf' is not allowed. Delete files one by one.")
    );
    let d = h
        .decide(&call("Bash", json!({"command": "ls -la"})))
        .await
        .unwrap();
    assert_eq!(d, Decision::Pass);
}

#[tokio::test]
async fn death_by_a_signal_is_a_failure_so_on_error_applies() {
    let dir = TempDir::new("signal");
    for (cmd, want) in [
        ("cat >/dev/null; kill -SEGV $$", "killed by signal SIGSEGV"),
        ("echo crashing >&2; kill -9 $$", "killed by signal SIGKILL"),
        ("kill -TERM $$", "killed by signal SIGTERM"),
        // A program that `sh -c` started and that crashed: sh reports it as exit 128 + 11.
        (
            "cat >/dev/null; bash -c 'kill -SEGV $$'",
            "killed by signal SIGSEGV (exit code 139)",
        ),
        ("exit 137", "killed by signal SIGKILL (exit code 137)"),
    ] {
        let e = hook(&dir, cmd)
            .decide(&call("t", json!({})))
            .await
            .unwrap_err();
        assert_eq!(e.0, want, "{cmd}");
    }
    // Exit 2 still blocks, exit 1 still passes, next to it.
    let d = hook(&dir, "echo no >&2; exit 2")
        .decide(&call("t", json!({})))
        .await
        .unwrap();
    assert_eq!(d, refused("no"));
}

#[tokio::test]
async fn exit_2_without_stderr_blocks_with_a_default_reason() {
    let dir = TempDir::new("exit2");
    let d = hook(&dir, "cat >/dev/null; exit 2")
        .decide(&call("t", json!({})))
        .await
        .unwrap();
    assert_eq!(d, refused("blocked by hook"));
}

#[tokio::test]
async fn other_exit_codes_are_non_blocking() {
    let dir = TempDir::new("exit1");
    for cmd in ["echo oops >&2; exit 1", "exit 127", "exit 128", "exit 160"] {
        let d = hook(&dir, cmd).decide(&call("t", json!({}))).await.unwrap();
        assert_eq!(d, Decision::Pass, "{cmd}");
    }
    // A command that is not found is sh's exit 127: non-blocking too.
    let d = hook(&dir, "no-such-command-sluice")
        .decide(&call("t", json!({})))
        .await
        .unwrap();
    assert_eq!(d, Decision::Pass);
}

#[tokio::test]
async fn the_script_reads_claude_code_fields_on_stdin_and_runs_in_the_hook_folder() {
    let dir = TempDir::new("payload");
    let script = dir.script(
        "show.py",
        r#"import json, os, sys
e = json.load(sys.stdin)
print("|".join([e["hook_event_name"], e["tool_name"], e["tool_input"]["command"],
                e["session_id"], e["phase"], e["method"], e["upstream"], e["cwd"],
                e["message"]["method"], str(e["request"]["id"]), os.getcwd()]), file=sys.stderr)
sys.exit(2)
"#,
    );
    let d = hook(&dir, &format!("python3 {}", script.display()))
        .decide(&call("Bash", json!({"command": "make test"})))
        .await
        .unwrap();
    let cwd = std::fs::canonicalize(dir.path()).unwrap();
    assert_eq!(
        d,
        refused(&format!(
            "PreToolUse|Bash|make test|session-1|request|tools/call|crm|/srv/sluice|tools/call|41|{}",
            cwd.display()
        ))
    );

    // PostToolUse carries tool_response.
    let script = dir.script(
        "post.py",
        r#"import json, sys
e = json.load(sys.stdin)
print(e["hook_event_name"], e["tool_response"]["content"][0]["text"], e["tool_input"]["q"], file=sys.stderr)
sys.exit(2)
"#,
    );
    let d = hook(&dir, &format!("python3 {}", script.display()))
        .decide(&reply(
            "search",
            json!({"q": "cats"}),
            json!({"content": [{"type": "text", "text": "found"}]}),
        ))
        .await
        .unwrap();
    // The call ran: exit 2 keeps its result and appends the reason for the agent.
    let kept = sluice_core::Message::from_value(
        json!({"jsonrpc": "2.0", "id": 41, "result": {"content": [
        {"type": "text", "text": "found"}, {"type": "text", "text": "PostToolUse found cats"}]}}),
    )
    .unwrap();
    assert_eq!(d, Decision::Feedback(kept, "PostToolUse found cats".into()));
}

/// The JSON protocol: permissionDecision deny with a reason.
#[tokio::test]
async fn permission_decision_deny_refuses_with_its_reason() {
    let dir = TempDir::new("pdeny");
    let script = dir.script(
        "deny.sh",
        r#"#!/usr/bin/env bash
input=$(cat)
if printf '%s' "$input" | grep -q 'rm -rf'; then
  cat <<'JSON'
{"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny",
 "permissionDecisionReason": "Destructive command blocked by policy"}}
JSON
else
  echo '{"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "allow"}}'
fi
exit 0
"#,
    );
    let h = hook(&dir, &format!("bash {}", script.display()));
    assert_eq!(
        h.decide(&call("Bash", json!({"command": "rm -rf ~"})))
            .await
            .unwrap(),
        refused("Destructive command blocked by policy")
    );
    assert_eq!(
        h.decide(&call("Bash", json!({"command": "echo hi"})))
            .await
            .unwrap(),
        Decision::Pass
    );
    // "ask" asks a person (the server does), with the hook's reason.
    let d = hook(
        &dir,
        r#"echo '{"hookSpecificOutput":{"permissionDecision":"ask","permissionDecisionReason":"sure?"}}'"#,
    )
    .decide(&call("Bash", json!({})))
    .await
    .unwrap();
    assert_eq!(d, Decision::Ask("sure?".into(), None));
}

#[tokio::test]
async fn decision_block_and_continue_false_refuse() {
    let dir = TempDir::new("block");
    let d = hook(
        &dir,
        r#"echo '{"decision": "block", "reason": "Tests must pass first"}'"#,
    )
    .decide(&call("t", json!({})))
    .await
    .unwrap();
    assert_eq!(d, refused("Tests must pass first"));
    let d = hook(
        &dir,
        r#"echo '{"continue": false, "stopReason": "Budget exhausted"}'"#,
    )
    .decide(&call("t", json!({})))
    .await
    .unwrap();
    assert_eq!(d, refused("Budget exhausted"));
    let d = hook(&dir, r#"echo '{"continue": false}'"#)
        .decide(&call("t", json!({})))
        .await
        .unwrap();
    assert_eq!(d, refused("stopped by hook"));
}

#[tokio::test]
async fn updated_input_rewrites_the_tool_arguments() {
    let dir = TempDir::new("updated");
    let script = dir.script(
        "sandbox.py",
        r#"import json, sys
e = json.load(sys.stdin)
args = dict(e["tool_input"])
args["path"] = "/sandbox" + args["path"]
print(json.dumps({"hookSpecificOutput": {"hookEventName": "PreToolUse",
    "permissionDecision": "allow", "updatedInput": args}}))
"#,
    );
    let ev = call("fs_write", json!({"path": "/etc/motd", "text": "hi"}));
    let d = hook(&dir, &format!("python3 {}", script.display()))
        .decide(&ev)
        .await
        .unwrap();
    let Decision::Modify(m) = d else {
        panic!("{d:?}")
    };
    assert_eq!(
        m.to_value(),
        json!({"jsonrpc": "2.0", "id": 41, "method": "tools/call",
            "params": {"name": "fs_write", "arguments": {"path": "/sandbox/etc/motd", "text": "hi"}}})
    );
}

#[tokio::test]
async fn additional_context_is_appended_to_a_tool_result() {
    let dir = TempDir::new("context");
    let h = hook(
        &dir,
        r#"cat >/dev/null; echo '{"hookSpecificOutput":{"hookEventName":"PostToolUse","additionalContext":"Reminder: results are cached for 5 minutes."}}'"#,
    );
    let ev = reply(
        "search",
        json!({}),
        json!({"content": [{"type": "text", "text": "3 rows"}], "isError": false}),
    );
    let Decision::Modify(m) = h.decide(&ev).await.unwrap() else {
        panic!()
    };
    assert_eq!(
        m.to_value(),
        json!({"jsonrpc": "2.0", "id": 41, "result": {"content": [
            {"type": "text", "text": "3 rows"},
            {"type": "text", "text": "Reminder: results are cached for 5 minutes."}], "isError": false}})
    );
    // In the request phase there is nothing to add it to: pass.
    assert_eq!(
        h.decide(&call("search", json!({}))).await.unwrap(),
        Decision::Pass
    );
}

#[tokio::test]
async fn plain_stdout_on_exit_0_is_advisory() {
    let dir = TempDir::new("plain");
    let d = hook(&dir, "echo 'all good'; echo 'not json' >&2")
        .decide(&method_event("ping"))
        .await
        .unwrap();
    assert_eq!(d, Decision::Pass);
}

#[tokio::test]
async fn the_native_shape_answers_or_replaces() {
    let dir = TempDir::new("native");
    let d = hook(
        &dir,
        r#"echo '{"response": {"result": {"content": [{"type": "text", "text": "cached"}]}}}'"#,
    )
    .decide(&call("t", json!({})))
    .await
    .unwrap();
    assert_eq!(
        d,
        Decision::Answer(
            sluice_core::Message::from_value(
                json!({"result": {"content": [{"type": "text", "text": "cached"}]},
                "jsonrpc": "2.0", "id": 41})
            )
            .unwrap()
        )
    );
    let d = hook(
        &dir,
        r#"echo '{"request": {"jsonrpc": "2.0", "id": 41, "method": "tools/call", "params": {"name": "u"}}}'"#,
    )
    .decide(&call("t", json!({})))
    .await
    .unwrap();
    assert!(matches!(d, Decision::Modify(m) if m.param_str("name") == Some("u")));
    // Not a JSON-RPC message: unreadable, a failure.
    let e = hook(&dir, r#"echo '{"request": {"nothing": 1}}'"#)
        .decide(&call("t", json!({})))
        .await
        .unwrap_err();
    assert!(e.0.contains("unreadable"), "{e}");
}

#[tokio::test]
async fn a_hanging_hook_times_out_and_its_process_group_is_killed() {
    let dir = TempDir::new("hang");
    let script = dir.script(
        "hang.sh",
        r#"#!/usr/bin/env bash
echo $$ > "$PWD/hook.pid"
sleep 30 &
echo $! > "$PWD/sleep.pid"
wait
"#,
    );
    let h = CommandHook::new(
        format!("bash {}", script.display()),
        dir.path().to_path_buf(),
        Duration::from_secs(1),
    );
    let started = Instant::now();
    let e = h.decide(&call("t", json!({}))).await.unwrap_err();
    assert_eq!(e.0, "timed out after 1s");
    assert!(started.elapsed() < Duration::from_secs(5));
    let (hook_pid, sleep_pid) = (dir.read_pid("hook.pid"), dir.read_pid("sleep.pid"));
    assert!(
        gone(hook_pid, Duration::from_secs(3)).await,
        "hook still runs"
    );
    assert!(
        gone(sleep_pid, Duration::from_secs(3)).await,
        "its child still runs"
    );
}

#[tokio::test]
async fn a_background_process_holding_stdout_does_not_hold_the_decision() {
    let dir = TempDir::new("bg");
    let h = hook(
        &dir,
        r#"sleep 30 & echo $! > "$PWD/bg.pid"; echo "held" >&2; exit 2"#,
    );
    let started = Instant::now();
    let d = h.decide(&call("t", json!({}))).await.unwrap();
    assert_eq!(d, refused("held"));
    assert!(started.elapsed() < Duration::from_secs(5));
    let pid = dir.read_pid("bg.pid");
    assert!(alive(pid));
    kill(pid);
}

#[tokio::test]
async fn a_hook_that_cannot_start_fails() {
    let dir = TempDir::new("nostart");
    let h = CommandHook::new(
        "true".into(),
        dir.path().join("missing"),
        Duration::from_secs(5),
    );
    let e = h.decide(&call("t", json!({}))).await.unwrap_err();
    assert!(e.0.contains("cannot start the hook command"), "{e}");
}

#[tokio::test]
async fn big_payloads_and_outputs_are_bounded() {
    let dir = TempDir::new("big");
    let big = "x".repeat(4 * 1024 * 1024);
    // A hook that never reads its 4 MiB stdin.
    let d = hook(&dir, "exit 0")
        .decide(&call("t", json!({"blob": big})))
        .await
        .unwrap();
    assert_eq!(d, Decision::Pass);
    // 3 MB of stdout: read, cut, advisory.
    let d = hook(&dir, "head -c 3000000 /dev/zero | tr '\\0' a")
        .decide(&call("t", json!({})))
        .await
        .unwrap();
    assert_eq!(d, Decision::Pass);
    // 3 MB of stderr on exit 2: the reason is cut at 1 MiB.
    let d = hook(&dir, "head -c 3000000 /dev/zero | tr '\\0' a >&2; exit 2")
        .decide(&call("t", json!({})))
        .await
        .unwrap();
    let Decision::Refuse(r) = d else { panic!() };
    assert_eq!(r.reason.len(), 1024 * 1024);
}

#[tokio::test]
async fn many_events_at_once() {
    let dir = TempDir::new("many");
    let h = hook(
        &dir,
        r#"python3 -c 'import json,sys; print(json.load(sys.stdin)["tool_input"]["n"], file=sys.stderr); sys.exit(2)'"#,
    );
    let events: Vec<_> = (0..20).map(|n| call("t", json!({"n": n}))).collect();
    let ds = join_all(events.iter().map(|e| h.decide(e))).await;
    for (n, d) in ds.into_iter().enumerate() {
        assert_eq!(d.unwrap(), refused(&n.to_string()));
    }
}
