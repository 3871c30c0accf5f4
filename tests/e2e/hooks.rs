//! The hook pipeline through the real binary: every kind (command, process, http, builtin),
//! every decision (pass, modify, answer, refuse), failures (a crash or a timeout, fail-closed and
//! fail-open), response hooks (replace, refuse a gateway-made error), onion order, the explain
//! hook with a real SDK client, the audit log, and manifest validation.

use serde_json::{json, Value};
use sluice_e2e::mcp::Client;
use sluice_e2e::tree::Home;
use sluice_e2e::{bin, start_sluice};
use std::process::Command;

fn fixture() -> String {
    bin("sluice-fixture").to_string_lossy().into_owned()
}

/// A home with one stdio fixture upstream (`fx`, every tool listed) and the given manifest.
fn home_with(label: &str, hooks: Value) -> Home {
    let home = Home::new(label);
    home.expose(&json!({"upstreams": [
        {"id": "fx", "command": fixture(), "args": ["--stdio"], "expose_all": true}
    ]}));
    home.write(
        "hooks/hooks.manifest.json",
        &serde_json::to_string_pretty(&json!({"version": 1, "hooks": hooks})).unwrap(),
    );
    home
}

async fn client(home: &Home) -> (sluice_e2e::Proc, Client) {
    let (gw, url) = start_sluice(&["--home", &home.arg()]);
    let mut c = Client::new(&url);
    c.initialize(json!({})).await;
    (gw, c)
}

const DENY_DANGEROUS_SH: &str = r#"#!/usr/bin/env bash
# A Claude Code PreToolUse hook: block destructive commands (exit 2, stderr is the reason).
input=$(cat)
if printf '%s' "$input" | grep -q 'rm -rf'; then
  echo "Blocked: destructive command in tool input" >&2
  exit 2
fi
exit 0
"#;

const UPPERCASE_PY: &str = r#"
import json, sys
event = json.load(sys.stdin)
args = dict(event["tool_input"])
args["text"] = args.get("text", "").upper()
print(json.dumps({"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "allow", "updatedInput": args}}))
"#;

#[tokio::test]
async fn claude_code_command_hooks_deny_and_rewrite() {
    let home = home_with(
        "hooks-command",
        json!([
            {"id": "pre-tool-use/deny-dangerous", "event": "PreToolUse", "matcher": "fx_echo|fx_add", "type": "command",
             "command": "bash \"${HOOKS_DIR}/scripts/deny-dangerous.sh\"", "script": "scripts/deny-dangerous.sh", "timeout": 5, "enabled": true},
            {"id": "pre-tool-use/uppercase", "event": "PreToolUse", "matcher": "fx_echo", "type": "command",
             "command": "python3 \"${HOOKS_DIR}/scripts/uppercase.py\"", "timeout": 5, "enabled": true},
            {"id": "pre-tool-use/off", "event": "PreToolUse", "type": "command", "command": "exit 2", "enabled": false}
        ]),
    );
    home.write("hooks/scripts/deny-dangerous.sh", DENY_DANGEROUS_SH);
    home.write("hooks/scripts/uppercase.py", UPPERCASE_PY);
    let (_gw, c) = client(&home).await;
    // Exit 2: refused, and the reason (stderr) is meant for the agent.
    let r = c
        .call_tool("fx_echo", json!({"text": "please rm -rf /"}))
        .await;
    assert_eq!(
        r["error"],
        json!({"code": -32030, "message": "Request rejected", "data": {"reason": "Blocked: destructive command in tool input"}})
    );
    // updatedInput replaces the arguments the upstream sees.
    let r = c
        .call_tool("fx_echo", json!({"text": "hello", "n": 1}))
        .await;
    assert_eq!(
        r["result"]["structuredContent"],
        json!({"text": "HELLO", "n": 1})
    );
    // The matcher is a full match: fx_echo_x would not match, fx_add matches only the deny hook.
    let r = c.call_tool("fx_add", json!({"a": 1, "b": 2})).await;
    assert_eq!(r["result"]["structuredContent"], json!({"sum": 3}));
}

const PROCESS_HOOK_PY: &str = r#"
import json, sys
for line in sys.stdin:
    req = json.loads(line)
    ev = req["event"]
    if ev.get("tool_name") == "fx_add":
        out = {"id": req["id"], "decision": "refuse", "reason": "adding is closed today", "agent": True}
    elif ev.get("tool_name") == "fx_test_simple_text":
        # Sent to another tool: the gateway routes the call again.
        msg = ev["message"]
        msg["params"]["name"] = "fx_echo"
        out = {"id": req["id"], "decision": "modify", "message": msg}
    elif ev.get("tool_name") == "fx_whoami":
        msg = ev["message"]
        out = {"id": req["id"], "decision": "answer", "message": {"jsonrpc": "2.0", "id": msg["id"], "result": {"content": [{"type": "text", "text": "answered by the process hook"}]}}}
    else:
        out = {"id": req["id"], "decision": "pass"}
    sys.stdout.write(json.dumps(out) + "\n")
    sys.stdout.flush()
"#;

#[tokio::test]
async fn a_process_hook_refuses_answers_and_passes() {
    let home = home_with(
        "hooks-process",
        json!([{"id": "gate", "event": "PreToolUse", "type": "process",
                "command": "python3 -u \"${HOOKS_DIR}/scripts/gate.py\"", "timeout": 5, "enabled": true}]),
    );
    home.write("hooks/scripts/gate.py", PROCESS_HOOK_PY);
    let (_gw, c) = client(&home).await;
    let r = c.call_tool("fx_add", json!({"a": 1, "b": 2})).await;
    assert_eq!(
        r["error"],
        json!({"code": -32030, "message": "Request rejected", "data": {"reason": "adding is closed today"}})
    );
    let r = c.call_tool("fx_whoami", json!({})).await;
    assert_eq!(
        r["result"]["content"][0]["text"],
        json!("answered by the process hook")
    );
    for i in 0..5 {
        let r = c.call_tool("fx_echo", json!({"i": i})).await;
        assert_eq!(r["result"]["structuredContent"], json!({"i": i}));
    }
}

#[tokio::test]
async fn a_hook_that_names_another_tool_sends_the_call_there() {
    // The explain builtin before it changes the arguments, never the target; the process
    // hook after it renames the call, and the gateway routes it again.
    let home = home_with(
        "hooks-rename",
        json!([
            {"id": "explain", "type": "builtin", "builtin": "explain", "enabled": true},
            {"id": "gate", "event": "PreToolUse", "type": "process",
             "command": "python3 -u \"${HOOKS_DIR}/scripts/gate.py\"", "timeout": 5, "enabled": true}
        ]),
    );
    home.write("hooks/scripts/gate.py", PROCESS_HOOK_PY);
    let (_gw, c) = client(&home).await;
    let r = c
        .call_tool(
            "fx_test_simple_text",
            json!({"a": 1, "b": 2, "reason": "to see"}),
        )
        .await;
    assert_eq!(r["result"]["structuredContent"], json!({"a": 1, "b": 2}));
    let r = c
        .call_tool("fx_echo", json!({"n": 7, "reason": "to see"}))
        .await;
    assert_eq!(r["result"]["structuredContent"], json!({"n": 7}));
}

/// The Zato-style example hook service: set `region` on `crm.order.status`, refuse `crm.order.cancel`.
async fn hook_service() -> (String, tokio::task::JoinHandle<()>) {
    use axum::http::StatusCode;
    use axum::routing::post;
    use axum::Json;
    async fn hook(Json(payload): Json<Value>) -> (StatusCode, Json<Value>) {
        if payload["method"] != "tools/call" {
            return (StatusCode::OK, Json(json!({})));
        }
        let mut message = payload["request"].clone();
        let tool = message["params"]["name"].as_str().unwrap_or("").to_string();
        if tool == "crm.order.cancel" {
            return (
                StatusCode::INTERNAL_SERVER_ERROR,
                Json(
                    json!({"reason": "Order cancellations are not permitted through this gateway"}),
                ),
            );
        }
        if tool == "crm.order.status" {
            message["params"]["arguments"]["region"] = json!("eu-central");
            return (StatusCode::OK, Json(json!({"request": message})));
        }
        (StatusCode::OK, Json(json!({})))
    }
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    let app = axum::Router::new().route("/hook", post(hook));
    let task = tokio::spawn(async move {
        axum::serve(listener, app).await.unwrap();
    });
    (url, task)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http_hook_service_rewrites_and_refuses_as_the_zato_style_example_does() {
    let (url, _service) = hook_service().await;
    let home = Home::new("hooks-http");
    home.expose(&json!({
        "upstreams": [{"id": "crm", "command": fixture(), "args": ["--stdio"]}],
        "expose": [
            {"upstream": "crm", "tool": "echo", "as": "crm.order.status"},
            {"upstream": "crm", "tool": "add", "as": "crm.order.cancel"}
        ]
    }));
    home.write(
        "hooks/hooks.manifest.json",
        &json!({"hooks": [{"id": "request-hook", "event": "Request", "type": "http", "url": url, "timeout": 5, "enabled": true}]}).to_string(),
    );
    home.write(
        "logs/log.config.json",
        r#"{"enabled": true, "path": "logs/audit.jsonl"}"#,
    );
    let (_gw, c) = client(&home).await;
    let r = c
        .call_tool(
            "crm.order.status",
            json!({"order": "A-1", "region": "us-east"}),
        )
        .await;
    assert_eq!(
        r["result"]["structuredContent"],
        json!({"order": "A-1", "region": "eu-central"})
    );
    // Refused: -32030, and the reason stays in the log and the audit log (not for the agent).
    let r = c
        .call_tool("crm.order.cancel", json!({"a": 1, "b": 2}))
        .await;
    assert_eq!(
        r["error"],
        json!({"code": -32030, "message": "Request rejected"})
    );
    // Every other method passes the hook untouched.
    assert_eq!(c.request("ping", json!({})).await["result"], json!({}));
    // The audit log has one line per tool call, the refusal with its reason.
    let lines = home.audit_lines(2).await;
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert_eq!(lines[0]["tool"], json!("crm.order.status"));
    assert_eq!(lines[0]["upstream"], json!("crm"));
    assert_eq!(lines[0]["outcome"], json!("ok"));
    assert_eq!(lines[0]["hooks"][0]["decision"], json!("modify"));
    assert_eq!(lines[1]["tool"], json!("crm.order.cancel"));
    assert_eq!(lines[1]["outcome"], json!("refused"));
    assert_eq!(
        lines[1]["error"],
        json!("Order cancellations are not permitted through this gateway")
    );
    assert_eq!(
        lines[1]["hooks"][0],
        json!({"id": "request-hook", "phase": "request", "decision": "refuse", "reason": "Order cancellations are not permitted through this gateway", "us": lines[1]["hooks"][0]["us"].clone()})
    );
    assert_eq!(lines[1]["session"], json!(c.session.clone().unwrap()));
    assert_eq!(lines[1]["client"], json!("sluice-e2e"));
}

#[tokio::test]
async fn a_hung_hook_fails_closed_or_open_as_configured() {
    let home = home_with(
        "hooks-hang",
        json!([
            {"id": "hang-closed", "event": "PreToolUse", "matcher": "fx_echo", "type": "command", "command": "sleep 30", "timeout": 1, "enabled": true},
            {"id": "hang-open", "event": "PreToolUse", "matcher": "fx_add", "type": "command", "command": "sleep 30", "timeout": 1, "on_error": "pass", "enabled": true}
        ]),
    );
    let (_gw, c) = client(&home).await;
    let mut other = Client::new(&c.url);
    other.initialize(json!({})).await;
    let (closed, bystander) = tokio::join!(
        c.call_tool("fx_echo", json!({"x": 1})),
        other.call_tool("fx_whoami", json!({}))
    );
    // Fail closed: refused, the failure is not shown to the agent.
    assert_eq!(
        closed["error"],
        json!({"code": -32030, "message": "Request rejected"})
    );
    // Nobody else waited for the hung hook.
    assert!(bystander["result"]["content"][0]["text"]
        .as_str()
        .unwrap()
        .starts_with("sluice-fixture pid="));
    // Fail open: the call goes on after the timeout.
    let open = c.call_tool("fx_add", json!({"a": 2, "b": 2})).await;
    assert_eq!(open["result"]["structuredContent"], json!({"sum": 4}));
}

/// A hook script that crashes: it reads its event, then dies of SIGSEGV.
const CRASH_SH: &str = r#"#!/usr/bin/env bash
cat >/dev/null
echo "about to crash" >&2
kill -SEGV $$
"#;

#[tokio::test]
async fn a_crashing_or_hung_hook_follows_on_error() {
    let home = home_with(
        "hooks-crash",
        json!([
            {"id": "crash-closed", "event": "PreToolUse", "matcher": "fx_echo", "type": "command",
             "command": "bash \"${HOOKS_DIR}/scripts/crash.sh\"", "script": "scripts/crash.sh", "timeout": 5, "enabled": true},
            {"id": "crash-open", "event": "PreToolUse", "matcher": "fx_add", "type": "command",
             "command": "bash \"${HOOKS_DIR}/scripts/crash.sh\"", "script": "scripts/crash.sh", "timeout": 5, "on_error": "pass", "enabled": true},
            {"id": "hang-closed", "event": "PreToolUse", "matcher": "fx_whoami", "type": "command",
             "command": "sleep 30", "timeout": 1, "enabled": true}
        ]),
    );
    home.write("hooks/scripts/crash.sh", CRASH_SH);
    home.write(
        "logs/log.config.json",
        r#"{"enabled": true, "path": "logs/audit.jsonl"}"#,
    );
    let (_gw, c) = client(&home).await;
    // on_error refuse (the default): every call is refused, the failure is not shown to the agent.
    for i in 0..5 {
        let r = c.call_tool("fx_echo", json!({"i": i})).await;
        assert_eq!(
            r["error"],
            json!({"code": -32030, "message": "Request rejected"}),
            "call {i}: {r}"
        );
    }
    // on_error pass: every call goes through.
    for i in 0..5 {
        let r = c.call_tool("fx_add", json!({"a": i, "b": 1})).await;
        assert_eq!(
            r["result"]["structuredContent"],
            json!({"sum": i + 1}),
            "call {i}: {r}"
        );
    }
    // A timeout follows on_error the same way.
    let r = c.call_tool("fx_whoami", json!({})).await;
    assert_eq!(
        r["error"],
        json!({"code": -32030, "message": "Request rejected"})
    );

    let lines = home.audit_lines(11).await;
    assert_eq!(lines.len(), 11, "{lines:?}");
    // `sh -c` runs `bash crash.sh` and reports its death by SIGSEGV as exit 139 (a shell that
    // execs its last command dies of the signal itself).
    let crashed = |reason: &Value| {
        let r = reason.as_str().unwrap_or("");
        assert!(
            r == "killed by signal SIGSEGV (exit code 139)" || r == "killed by signal SIGSEGV",
            "{reason}"
        );
    };
    for line in &lines[..5] {
        assert_eq!(line["tool"], json!("fx_echo"));
        assert_eq!(line["outcome"], json!("refused"), "{line}");
        let hook = &line["hooks"][0];
        assert_eq!(
            (&hook["id"], &hook["phase"], &hook["decision"]),
            (&json!("crash-closed"), &json!("request"), &json!("error"))
        );
        crashed(&hook["reason"]);
        assert_eq!(
            line["error"],
            json!(format!(
                "hook crash-closed failed: {}",
                hook["reason"].as_str().unwrap()
            ))
        );
    }
    for line in &lines[5..10] {
        assert_eq!(line["tool"], json!("fx_add"));
        assert_eq!(line["outcome"], json!("ok"), "{line}");
        assert_eq!(line["hooks"][0]["id"], json!("crash-open"));
        assert_eq!(line["hooks"][0]["decision"], json!("error"));
        crashed(&line["hooks"][0]["reason"]);
    }
    assert_eq!(lines[10]["tool"], json!("fx_whoami"));
    assert_eq!(lines[10]["outcome"], json!("refused"));
    assert_eq!(
        lines[10]["error"],
        json!("hook hang-closed failed: timed out after 1s")
    );
    assert_eq!(lines[10]["hooks"][0]["decision"], json!("error"));
}

const REFUSE_ERRORS_PY: &str = r#"
import json, sys
event = json.load(sys.stdin)
if "error" in event["message"]:
    sys.stderr.write("errors are not shown to this agent")
    sys.exit(2)
"#;

const MASK_PY: &str = r#"
import json, sys
event = json.load(sys.stdin)
msg = event["message"]
if event["method"] == "tools/call" and "result" in msg:
    for block in msg["result"].get("content", []):
        if block.get("type") == "text":
            block["text"] = block["text"].replace("secret", "******")
    msg["result"].pop("structuredContent", None)
    print(json.dumps({"response": msg}))
"#;

#[tokio::test]
async fn response_hooks_replace_results_and_refuse_gateway_errors() {
    let home = home_with(
        "hooks-response",
        json!([
            {"id": "response/refuse-errors", "event": "Response", "type": "command", "command": "python3 \"${HOOKS_DIR}/scripts/refuse_errors.py\"", "enabled": true},
            {"id": "post-tool-use/mask", "event": "PostToolUse", "type": "command", "command": "python3 \"${HOOKS_DIR}/scripts/mask.py\"", "enabled": true}
        ]),
    );
    home.write("hooks/scripts/refuse_errors.py", REFUSE_ERRORS_PY);
    home.write("hooks/scripts/mask.py", MASK_PY);
    let (_gw, c) = client(&home).await;
    let r = c
        .call_tool("fx_echo", json!({"note": "the secret is 42"}))
        .await;
    assert_eq!(
        r["result"],
        json!({"content": [{"type": "text", "text": "{\"note\":\"the ****** is 42\"}"}]})
    );
    // A gateway-made error (unknown tool) goes through the response hooks too, and is refused.
    let r = c.call_tool("no_such_tool", json!({})).await;
    assert_eq!(
        r["error"],
        json!({"code": -32031, "message": "Response rejected", "data": {"reason": "errors are not shown to this agent"}})
    );
}

const MARK_PY: &str = r#"
import json, sys
letter = sys.argv[1]
event = json.load(sys.stdin)
msg = event["message"]
if event["phase"] == "request":
    if letter == "B" and msg["params"]["arguments"].get("answer_at_b"):
        print(json.dumps({"response": {"jsonrpc": "2.0", "id": msg["id"], "result": {"content": [{"type": "text", "text": "answered by B"}]}}}))
        sys.exit(0)
    args = msg["params"]["arguments"]
    args["trail"] = args.get("trail", "") + letter
    print(json.dumps({"request": msg}))
else:
    msg["result"]["content"].append({"type": "text", "text": letter})
    print(json.dumps({"response": msg}))
"#;

#[tokio::test]
async fn hooks_form_an_onion() {
    let hook = |id: &str, event: &str, letter: &str| {
        json!({"id": id, "event": event, "methods": ["tools/call"], "type": "command",
               "command": format!("python3 \"${{HOOKS_DIR}}/scripts/mark.py\" {letter}"), "enabled": true})
    };
    // Each hook is a response entry and a request entry; the request phase runs A, B, C and the
    // reply returns C, B, A.
    let home = home_with(
        "hooks-onion",
        json!([
            hook("a-out", "Response", "A"),
            hook("a-in", "Request", "A"),
            hook("b-out", "Response", "B"),
            hook("b-in", "Request", "B"),
            hook("c-out", "Response", "C"),
            hook("c-in", "Request", "C")
        ]),
    );
    home.write("hooks/scripts/mark.py", MARK_PY);
    let (_gw, c) = client(&home).await;
    let r = c.call_tool("fx_echo", json!({})).await;
    assert_eq!(r["result"]["structuredContent"], json!({"trail": "ABC"}));
    let texts: Vec<&str> = r["result"]["content"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["text"].as_str().unwrap())
        .collect();
    assert_eq!(texts, ["{\"trail\":\"ABC\"}", "C", "B", "A"]);
    // B answers: C and the upstream are skipped, and the reply returns through B and A only.
    let r = c.call_tool("fx_echo", json!({"answer_at_b": true})).await;
    let texts: Vec<&str> = r["result"]["content"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["text"].as_str().unwrap())
        .collect();
    assert_eq!(texts, ["answered by B", "B", "A"]);
}

#[tokio::test]
async fn the_explain_hook_with_the_typescript_sdk_client() {
    let home = home_with(
        "hooks-explain",
        json!([{"id": "explain", "type": "builtin", "builtin": "explain", "enabled": true}]),
    );
    home.write("logs/log.config.json", r#"{"enabled": true}"#);
    let (_gw, url) = start_sluice(&["--home", &home.arg()]);
    let out = crate::interop::ts_client(
        &url,
        &json!({"steps": [
            {"op": "listTools"},
            {"op": "callTool", "name": "fx_echo", "arguments": {"text": "hi"}, "allowError": true},
            {"op": "callTool", "name": "fx_echo", "arguments": {"text": "hi", "reason": "to greet the user"}}
        ]}),
    );
    let tools = out["results"][0]["tools"].as_array().unwrap();
    let echo = tools.iter().find(|t| t["name"] == "fx_echo").unwrap();
    assert_eq!(
        echo["inputSchema"]["properties"]["reason"],
        json!({"type": "string", "description": "A concise justification for using this tool, explaining how it helps achieve your goal"})
    );
    assert!(tools.iter().all(|t| t["inputSchema"]["required"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| *r == "reason")
        .count()
        == 1));
    assert_eq!(out["results"][1]["error"]["code"], json!(-32030));
    assert!(out["results"][1]["error"]["data"]["reason"]
        .as_str()
        .unwrap()
        .contains("reason"));
    // With a reason: the upstream sees the arguments without it.
    assert_eq!(
        out["results"][2]["structuredContent"],
        json!({"text": "hi"})
    );
    // The reason is audited with the tool and the session.
    let path = home.path().join("logs/audit.jsonl");
    let mut found = None;
    for _ in 0..50 {
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        found = text
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap())
            .find(|l| l["outcome"] == "ok");
        if found.is_some() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let line = found.expect("an audit line for the call");
    assert_eq!(line["explain_reason"], json!("to greet the user"));
    assert_eq!(line["tool"], json!("fx_echo"));
    assert_eq!(line["session"], json!(out["sessionId"]));
}

#[test]
fn the_manifest_is_validated_with_file_and_field() {
    let home = Home::new("hooks-check");
    home.write(
        "hooks/hooks.manifest.json",
        &json!({"hooks": [
            {"id": "a", "event": "PreToolUse", "command": "true", "enabled": true},
            {"id": "a", "event": "PreToolUse", "command": "true"},
            {"id": "b", "event": "Sometime", "command": "true"},
            {"id": "c", "event": "PreToolUse", "type": "carrier-pigeon"},
            {"id": "d", "event": "Request", "type": "builtin", "builtin": "telepathy"},
            {"id": "e", "event": "PreToolUse", "matcher": "([", "command": "true"},
            {"id": "f", "event": "UserPromptSubmit", "command": "true"},
            {"id": "g", "event": "PreToolUse", "command": "true", "script": "../../etc/passwd"}
        ]})
        .to_string(),
    );
    home.write("hooks/hooks.state.json", "{ not json");
    let out = Command::new(bin("sluice"))
        .args(["check", "--home", &home.arg()])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert_eq!(out.status.code(), Some(1), "{text}");
    let m = home
        .path()
        .join("hooks/hooks.manifest.json")
        .display()
        .to_string();
    for e in [
        format!("error: {m}: hooks[1].id: duplicate hook id \"a\""),
        format!("error: {m}: hooks[2].event: unknown event \"Sometime\""),
        format!("error: {m}: hooks[3].type: unknown hook type \"carrier-pigeon\""),
        format!("error: {m}: hooks[4].builtin: unknown builtin \"telepathy\" (known: explain, deny, rewrite, validate, describe, mask, pii, size-cap, rate-limit, tool-scan)"),
        format!("error: {m}: hooks[7].script: \"../../etc/passwd\" escapes the hooks folder"),
    ] {
        assert!(
            text.lines().any(|l| l.starts_with(&e)),
            "missing {e:?} in:\n{text}"
        );
    }
    // Warnings are not errors; `check` prints them only for a tree that loads, so load a tree
    // with just the warned-about hooks.
    let ok = Home::new("hooks-warn");
    ok.write(
        "hooks/hooks.manifest.json",
        &json!({"hooks": [
            {"id": "e", "event": "PreToolUse", "matcher": "([", "command": "true"},
            {"id": "f", "event": "UserPromptSubmit", "command": "true"}
        ]})
        .to_string(),
    );
    ok.write("hooks/hooks.state.json", "{ not json");
    let out = Command::new(bin("sluice"))
        .args(["check", "--home", &ok.arg()])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(
        text.contains("hooks[0].matcher: \"([\" is not a valid regex; the hook never matches"),
        "{text}"
    );
    assert!(text.contains("hook \"f\": UserPromptSubmit happens inside the agent and never crosses the wire; Sluice accepts it and never fires it"), "{text}");
    assert!(
        text.contains("hooks.state.json: malformed JSON at line 1, column 3"),
        "{text}"
    );
    assert!(text.contains("(ignored: no overrides)"), "{text}");
}
