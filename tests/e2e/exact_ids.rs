//! Request ids come back byte for byte (issue 14, item 1): integers past `u64`/`i64`, fractions
//! and exponents in any spelling (`1.10`, `-2.50`, `1e2`, `-0`), plain integers and string ids,
//! over HTTP (handshake and 2026-07-28 eras, replies and errors) and `serve --stdio`, through one
//! hook of each kind (command, process, http, the `rewrite` builtin). Each hook sees the id as
//! sent in its payload; the ids in the messages the hooks hand back (rewritten by Python's and
//! serde_json's number handling) are the client's again in the reply. Raw text is compared, never
//! parsed values.

use serde_json::{json, Value};
use sluice_e2e::mcp::{finish, Client};
use sluice_e2e::tree::Home;
use sluice_e2e::{bin, start_sluice, Proc};
use std::io::{BufRead, BufReader, Write};
use std::process::Command;
use std::sync::{Arc, Mutex};

/// Ids as a client writes them. The first five are ones `serde_json` alone would rewrite.
const IDS: &[&str] = &[
    "123456789012345678901234567890",
    "98765432109876543210",
    "-123456789012345678901234567890",
    "1.10",
    "-2.50",
    "1e2",
    "-0",
    "0.5",
    "7",
    r#""1.10""#,
];

/// A command hook that logs its raw stdin and adds `by_command` to the arguments.
const COMMAND_PY: &str = r#"
import json, sys
raw = sys.stdin.read()
with open(sys.argv[1], "a") as log:
    log.write(raw.strip() + "\n")
args = dict(json.loads(raw)["tool_input"])
args["by_command"] = True
print(json.dumps({"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "allow", "updatedInput": args}}))
"#;

/// A process hook that logs its raw lines, answers `fx_whoami` (echoing the id as Python reads
/// it) and otherwise hands back the message with `by_process` added.
const PROCESS_PY: &str = r#"
import json, sys
log = open(sys.argv[1], "a")
for line in sys.stdin:
    log.write(line)
    log.flush()
    req = json.loads(line)
    ev = req["event"]
    msg = ev["message"]
    if ev.get("tool_name") == "fx_whoami":
        out = {"id": req["id"], "decision": "answer", "message": {"jsonrpc": "2.0", "id": msg["id"], "result": {"content": [{"type": "text", "text": "answered by the process hook"}]}}}
    else:
        msg["params"]["arguments"]["by_process"] = True
        out = {"id": req["id"], "decision": "modify", "message": msg}
    sys.stdout.write(json.dumps(out) + "\n")
    sys.stdout.flush()
"#;

/// An HTTP hook service that keeps the raw bodies it gets and adds `by_http` to tool calls.
async fn hook_service() -> (String, Arc<Mutex<Vec<String>>>) {
    use axum::extract::State;
    use axum::routing::post;
    use axum::Json;
    type Log = Arc<Mutex<Vec<String>>>;
    async fn hook(State(log): State<Log>, body: String) -> Json<Value> {
        log.lock().unwrap().push(body.clone());
        let payload: Value = serde_json::from_str(&body).unwrap();
        if payload["method"] != "tools/call" {
            return Json(json!({}));
        }
        let mut message = payload["request"].clone();
        message["params"]["arguments"]["by_http"] = json!(true);
        Json(json!({"request": message}))
    }
    let log: Log = Arc::default();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    let app = axum::Router::new()
        .route("/hook", post(hook))
        .with_state(log.clone());
    tokio::spawn(async move {
        axum::serve(listener, app).await.unwrap();
    });
    (url, log)
}

/// The fixture over stdio and one hook of each kind on its tool calls.
fn home(label: &str, hook_url: &str) -> Home {
    let home = Home::new(label);
    home.expose(&json!({"upstreams": [
        {"id": "fx", "command": bin("sluice-fixture").to_string_lossy(), "args": ["--stdio"],
         "expose_all": true, "era": "handshake"}
    ]}));
    home.write("hooks/scripts/command.py", COMMAND_PY);
    home.write("hooks/scripts/process.py", PROCESS_PY);
    home.write(
        "hooks/hooks.manifest.json",
        &json!({"version": 1, "hooks": [
            {"id": "command", "event": "PreToolUse", "matcher": "fx_echo", "type": "command",
             "command": "python3 \"${HOOKS_DIR}/scripts/command.py\" \"${HOOKS_DIR}/command.log\"",
             "timeout": 10, "enabled": true},
            {"id": "process", "event": "PreToolUse", "type": "process",
             "command": "python3 -u \"${HOOKS_DIR}/scripts/process.py\" \"${HOOKS_DIR}/process.log\"",
             "timeout": 10, "enabled": true},
            {"id": "http", "event": "Request", "type": "http", "url": hook_url, "timeout": 10,
             "enabled": true},
            {"id": "rewrite", "type": "builtin", "builtin": "rewrite", "enabled": true,
             "options": {"rules": [{"tool": "fx_echo", "set": {"by_builtin": true}}]}}
        ]})
        .to_string(),
    );
    home
}

fn ping(id: &str) -> String {
    format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"ping"}}"#)
}

fn call(id: &str, tool: &str, meta: &str) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"{tool}","arguments":{{"text":"hi"}}{meta}}}}}"#
    )
}

/// `body` holds a reply whose id is `id` exactly (the id follows `"jsonrpc":"2.0"` and is followed
/// by `result` or `error`).
fn assert_echoed(body: &str, id: &str, what: &str) {
    let found = [
        format!(r#""jsonrpc":"2.0","id":{id},"result""#),
        format!(r#""jsonrpc":"2.0","id":{id},"error""#),
    ]
    .iter()
    .any(|t| body.contains(t));
    assert!(
        found,
        "{what}: the id {id} did not come back as sent: {body}"
    );
}

/// The reply to a tool call went through all four hooks.
fn assert_all_hooks(body: &str, id: &str) {
    for mark in [
        r#""by_command":true"#,
        r#""by_process":true"#,
        r#""by_http":true"#,
        r#""by_builtin":true"#,
    ] {
        assert!(body.contains(mark), "id {id}: {mark} missing: {body}");
    }
}

/// Every hook saw each id as sent in its payload.
fn assert_payloads(home: &Home, http_log: &Mutex<Vec<String>>) {
    let read = |f: &str| std::fs::read_to_string(home.path().join("hooks").join(f)).unwrap();
    let command = read("command.log");
    let process = read("process.log");
    let http = http_log.lock().unwrap().join("\n");
    for id in IDS {
        let sent = format!(r#""jsonrpc":"2.0","id":{id},"method":"tools/call""#);
        assert!(command.contains(&sent), "command hook payload lacks {sent}");
        assert!(process.contains(&sent), "process hook payload lacks {sent}");
        assert!(http.contains(&sent), "http hook payload lacks {sent}");
        let ping = format!(r#""jsonrpc":"2.0","id":{id},"method":"ping""#);
        assert!(http.contains(&ping), "http hook payload lacks {ping}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ids_come_back_byte_for_byte_over_http_through_every_hook_kind() {
    let (hook_url, http_log) = hook_service().await;
    let home = home("exact-ids-http", &hook_url);
    let (_gw, url) = start_sluice(&["--home", &home.arg(), "--no-admin"]);
    let mut c = Client::new(&url);
    c.initialize(json!({})).await;
    let post = |body: String| {
        let rb = c.builder().body(body);
        async move { finish(rb.send().await.unwrap()).await }
    };
    for id in IDS {
        let r = post(ping(id)).await;
        assert_eq!(r.status, 200, "{}", r.body);
        assert_echoed(&r.body, id, "ping");
        let r = post(call(id, "fx_echo", "")).await;
        assert_eq!(r.status, 200, "{}", r.body);
        assert_echoed(&r.body, id, "tools/call through every hook");
        assert_all_hooks(&r.body, id);
        let r = post(call(id, "fx_whoami", "")).await;
        assert_echoed(&r.body, id, "a process hook's answer");
        assert!(
            r.body.contains("answered by the process hook"),
            "{}",
            r.body
        );
        // An error made by the gateway (an unknown tool) and an invalid request (400).
        let r = post(call(id, "fx_nope", "")).await;
        assert_echoed(&r.body, id, "an unknown tool");
        let r = post(format!(r#"{{"jsonrpc":"1.0","id":{id},"method":"ping"}}"#)).await;
        assert_eq!(r.status, 400, "{}", r.body);
        assert_echoed(&r.body, id, "an invalid request");
    }
    assert_payloads(&home, &http_log);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ids_come_back_byte_for_byte_in_the_2026_era() {
    let (hook_url, http_log) = hook_service().await;
    let home = home("exact-ids-modern", &hook_url);
    let (_gw, url) = start_sluice(&["--home", &home.arg(), "--no-admin"]);
    let http = reqwest::Client::new();
    let meta = r#","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"sluice-e2e","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}"#;
    let post = |body: String, name: &str| {
        let rb = http
            .post(&url)
            .header("accept", "application/json, text/event-stream")
            .header("content-type", "application/json")
            .header("mcp-protocol-version", "2026-07-28")
            .header("mcp-method", "tools/call")
            .header("mcp-name", name)
            .body(body);
        async move { finish(rb.send().await.unwrap()).await }
    };
    for id in IDS {
        let r = post(call(id, "fx_echo", meta), "fx_echo").await;
        assert_eq!(r.status, 200, "{}", r.body);
        assert_echoed(&r.body, id, "a 2026-07-28 tools/call");
        assert_all_hooks(&r.body, id);
        let r = post(call(id, "fx_whoami", meta), "fx_whoami").await;
        assert_echoed(&r.body, id, "a process hook's answer (2026-07-28)");
        // A header that disagrees with the body: 400, with the id as sent.
        let r = post(call(id, "fx_echo", meta), "fx_other").await;
        assert_eq!(r.status, 400, "{}", r.body);
        assert_echoed(&r.body, id, "a header mismatch");
    }
    let command = std::fs::read_to_string(home.path().join("hooks/command.log")).unwrap();
    let http = http_log.lock().unwrap().join("\n");
    for id in IDS {
        let sent = format!(r#""jsonrpc":"2.0","id":{id},"method":"tools/call""#);
        assert!(command.contains(&sent), "command hook payload lacks {sent}");
        assert!(http.contains(&sent), "http hook payload lacks {sent}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ids_come_back_byte_for_byte_over_stdio() {
    let (hook_url, http_log) = hook_service().await;
    let home = home("exact-ids-stdio", &hook_url);
    let mut cmd = Command::new(bin("sluice"));
    cmd.args(["serve", "--stdio", "--no-admin", "--home", &home.arg()]);
    let mut p = Proc::spawn_piped(cmd);
    let mut stdin = p.child.stdin.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    let out = p.child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines() {
            let Ok(line) = line else { return };
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    // The next reply line (notifications skipped), read off the async runtime's threads.
    let rx = Arc::new(Mutex::new(rx));
    let reply = |stdin: &mut std::process::ChildStdin, line: String| {
        writeln!(stdin, "{line}").unwrap();
        let rx = rx.clone();
        async move {
            tokio::task::spawn_blocking(move || loop {
                let line = rx
                    .lock()
                    .unwrap()
                    .recv_timeout(std::time::Duration::from_secs(20))
                    .expect("a reply line");
                let v: Value = serde_json::from_str(&line).unwrap();
                if v.get("method").is_none() {
                    return line;
                }
            })
            .await
            .unwrap()
        }
    };
    let init = reply(&mut stdin, json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}).to_string()).await;
    assert!(init.contains(r#""protocolVersion":"2025-11-25""#), "{init}");
    writeln!(
        stdin,
        "{}",
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"})
    )
    .unwrap();
    for id in IDS {
        let r = reply(&mut stdin, ping(id)).await;
        assert_echoed(&r, id, "stdio ping");
        let r = reply(&mut stdin, call(id, "fx_echo", "")).await;
        assert_echoed(&r, id, "stdio tools/call through every hook");
        assert_all_hooks(&r, id);
        let r = reply(&mut stdin, call(id, "fx_whoami", "")).await;
        assert_echoed(&r, id, "stdio: a process hook's answer");
        let r = reply(
            &mut stdin,
            format!(r#"{{"jsonrpc":"1.0","id":{id},"method":"ping"}}"#),
        )
        .await;
        assert_echoed(&r, id, "stdio: an invalid request");
    }
    assert_payloads(&home, &http_log);
}
