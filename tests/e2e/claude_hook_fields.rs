//! Claude Code's newer hook fields through the real binary, imported unchanged from a
//! `settings.json` with `sluice import claude-hooks`: the exec form `args` with an `if` rule
//! (`Bash(git push *)`), `onFailure: "block"` (command and http), an `mcp_tool` hook that calls
//! a tool of one of Sluice's own upstreams (with `${tool_input.x}`) and takes its answer (deny,
//! allow, defer), `once`, `async`, PostToolUse `continueOnBlock` and `updatedToolOutput` on a
//! tool that is not named `mcp__…`, and the input fields a gateway cannot know (`null`).

use crate::claude_hooks::{fixture, import_settings, manifest, read_json, serve};
use serde_json::{json, Value};
use sluice_e2e::mcp::Client;
use sluice_e2e::tree::Home;
use std::time::{Duration, Instant};

/// Writes the hook input it is shown to `once-<n>.json` (n: how many it wrote before).
const RECORD_ONCE_PY: &str = r#"import json, os, sys
e = json.load(sys.stdin)
d = os.environ["CLAUDE_PROJECT_DIR"]
n = len([f for f in os.listdir(d) if f.startswith("once-")])
with open(os.path.join(d, "once-%d.json" % n), "w") as f:
    json.dump(e, f)
"#;

#[tokio::test]
async fn current_claude_code_hook_fields_run_behind_the_gateway_after_an_import() {
    let home = Home::new("cc-fields");
    home.expose(&json!({
        "upstreams": [
            {"id": "fx", "command": fixture(), "args": ["--stdio"], "expose_all": true},
            {"id": "shell", "command": fixture(), "args": ["--stdio"]},
            // The mcp_tool hook's server: its echo answers with its arguments' JSON.
            {"id": "policy", "command": fixture(), "args": ["--stdio"]}
        ],
        "expose": [{"upstream": "shell", "tool": "echo", "as": "Bash"}]
    }));
    home.write("hooks/record_once.py", RECORD_ONCE_PY);
    // An http hook service that is down: 503 passes in Claude Code, unless onFailure is block.
    let app = axum::Router::new().route(
        "/busy",
        axum::routing::post(|| async { (axum::http::StatusCode::SERVICE_UNAVAILABLE, "busy") }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let busy = format!("http://{}/busy", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let decision = json!({"hookSpecificOutput": {"hookEventName": "PreToolUse",
        "permissionDecision": "${tool_input.decision}",
        "permissionDecisionReason": "policy says ${tool_input.decision} for ${tool_name}"}});
    let settings = json!({"hooks": {
        "PreToolUse": [
            {"matcher": "Bash", "hooks": [
                // The exec form, only for `git push …` (its `if`).
                {"type": "command", "command": "sh", "args": ["-c", "echo no pushes >&2; exit 2"],
                 "if": "Bash(git push *)", "statusMessage": "checking"}
            ]},
            {"matcher": "mcp__fx__slow", "hooks": [
                // A broken guard: exit 1 passes in Claude Code, unless onFailure is block.
                {"type": "command", "command": "echo guard crashed >&2; exit 1", "onFailure": "block"}
            ]},
            {"matcher": "mcp__fx__whoami", "hooks": [
                {"type": "http", "url": busy, "timeout": 5, "onFailure": "block"}
            ]},
            {"matcher": "mcp__fx__echo", "hooks": [
                {"type": "mcp_tool", "server": "policy", "tool": "echo", "input": decision},
                {"type": "command", "command": "python3 \"$CLAUDE_PROJECT_DIR/hooks/record_once.py\"", "once": true},
                // It would block, after 2 s: async, it neither decides nor delays the call.
                {"type": "command", "command": "sleep 2; echo late >&2; exit 2", "async": true}
            ]}
        ],
        "PostToolUse": [
            {"matcher": "mcp__fx__add", "hooks": [
                {"type": "command", "continueOnBlock": true,
                 "command": "echo '{\"decision\": \"block\", \"reason\": \"sums above 10 are refused\"}'"}
            ]},
            {"matcher": "Bash", "hooks": [
                {"type": "command",
                 "command": "echo '{\"hookSpecificOutput\": {\"hookEventName\": \"PostToolUse\", \"updatedToolOutput\": \"[output hidden]\"}}'"}
            ]}
        ]
    }});
    home.write(".claude/settings.json", &settings.to_string());
    let (ok, stdout, stderr) = import_settings(&home);
    assert!(ok, "{stderr}");
    assert_eq!(
        stdout.trim(),
        "imported 8 hook(s): pre-tool-use/sh, pre-tool-use/echo, pre-tool-use/busy, pre-tool-use/echo-2, pre-tool-use/record_once, pre-tool-use/sleep, post-tool-use/echo, post-tool-use/echo-2"
    );
    assert!(!stderr.contains("left out"), "{stderr}");
    let hooks = manifest(&home)["hooks"].clone();
    assert_eq!(hooks[0]["if"], "Bash(git push *)");
    assert_eq!(
        hooks[0]["args"],
        json!(["-c", "echo no pushes >&2; exit 2"])
    );
    assert_eq!(hooks[1]["on_failure"], "block");
    assert_eq!(
        (&hooks[2]["protocol"], &hooks[2]["on_failure"]),
        (&json!("claude-code"), &json!("block"))
    );
    assert_eq!(
        (&hooks[3]["type"], &hooks[3]["server"], &hooks[3]["tool"]),
        (&json!("mcp_tool"), &json!("policy"), &json!("echo"))
    );
    assert_eq!(hooks[3]["input"], decision);
    assert_eq!(
        (&hooks[4]["once"], &hooks[5]["async"]),
        (&json!(true), &json!(true))
    );
    assert_eq!(hooks[6]["continue_on_block"], json!(true));
    // The imported hooks see the gateway's names for Bash (the tool exposed as Bash).
    let mut m = manifest(&home);
    for h in m["hooks"].as_array_mut().unwrap() {
        if h["matcher"] == "Bash" {
            h["tool_name"] = json!("gateway");
        }
    }
    crate::claude_hooks::write_manifest(&home, &m["hooks"]);

    let (_gw, url) = serve(&home, &[]);
    let mut c = Client::new(&url);
    c.initialize(json!({})).await;

    // `if`: only `git push …` reaches the exec-form guard.
    let r = c.call_tool("Bash", json!({"command": "git status"})).await;
    assert_eq!(
        r["result"]["content"],
        json!([{"type": "text", "text": "[output hidden]"}]),
        "updatedToolOutput replaced the result: {r}"
    );
    let r = c
        .call_tool("Bash", json!({"command": "git push --force origin main"}))
        .await;
    assert_eq!(
        r["error"],
        json!({"code": -32030, "message": "Request rejected", "data": {"reason": "no pushes"}})
    );

    // onFailure: block: the crashed guard refuses, naming itself.
    let r = c.call_tool("fx_slow", json!({"ms": 0})).await;
    assert_eq!(
        r["error"],
        json!({"code": -32030, "message": "Request rejected", "data": {"reason": "hook pre-tool-use/echo failed (on_failure: block): exited with code 1: guard crashed"}})
    );

    let r = c.call_tool("fx_whoami", json!({})).await;
    assert_eq!(
        r["error"]["data"]["reason"],
        "hook pre-tool-use/busy failed (on_failure: block): the hook service answered HTTP 503 Service Unavailable: busy",
        "{r}"
    );

    // mcp_tool: the policy upstream's answer decides; `${tool_input.decision}` and
    // `${tool_name}` are filled in.
    let r = c
        .call_tool("fx_echo", json!({"decision": "deny", "text": "x"}))
        .await;
    assert_eq!(
        r["error"],
        json!({"code": -32030, "message": "Request rejected", "data": {"reason": "policy says deny for mcp__fx__echo"}})
    );
    let started = Instant::now();
    let r = c
        .call_tool("fx_echo", json!({"decision": "allow", "text": "x"}))
        .await;
    assert_eq!(
        r["result"]["structuredContent"],
        json!({"decision": "allow", "text": "x"}),
        "{r}"
    );
    assert!(
        started.elapsed() < Duration::from_millis(1500),
        "the async hook did not delay the call: {:?}",
        started.elapsed()
    );
    // defer: no one can resume a deferred call behind the gateway.
    let r = c
        .call_tool("fx_echo", json!({"decision": "defer", "text": "x"}))
        .await;
    assert_eq!(r["error"]["code"], -32030, "{r}");
    assert_eq!(r["error"]["data"]["deferred"], json!(true), "{r}");
    assert_eq!(
        r["error"]["data"]["reason"],
        "hook pre-tool-use/echo-2 deferred the call: policy says defer for mcp__fx__echo (a deferred call waits for its caller to decide and resume it; behind the gateway no one can, so it is not run)"
    );

    // once: one record for this session (the allowed call and the deferred one reached it),
    // and its input's fields.
    let home_dir = std::fs::canonicalize(home.path()).unwrap();
    let recorded = |n: usize| home_dir.join(format!("once-{n}.json"));
    assert!(recorded(0).exists() && !recorded(1).exists());
    let seen = read_json(&recorded(0));
    assert_eq!(seen["tool_name"], "mcp__fx__echo");
    for k in ["prompt_id", "scratchpad_dir", "effort"] {
        assert_eq!(seen.get(k), Some(&Value::Null), "{k}: {seen}");
    }
    // A second session runs it again.
    let mut other = Client::new(&url);
    other.initialize(json!({})).await;
    other
        .call_tool("fx_echo", json!({"decision": "allow"}))
        .await;
    assert!(recorded(1).exists());

    // continueOnBlock: the PostToolUse block is the result, as a tool error (the add ran).
    let r = c.call_tool("fx_add", json!({"a": 7, "b": 8})).await;
    assert_eq!(
        r["result"],
        json!({"content": [{"type": "text", "text": "sums above 10 are refused"}], "isError": true}),
        "{r}"
    );
}
