//! A complete toolfunnel tree runs unchanged: the tool register (Node script tools reading
//! `TOOLFUNNEL_TOOL_ARGS`, a shell tool, a reference tool), the state overlay, the expose store
//! with a stdio upstream and an `as` rename, a deny hook — reached through the funnel's
//! meta-tools, with the overlay applied live.

use serde_json::{json, Value};
use sluice_e2e::mcp::Client;
use sluice_e2e::tree::Home;
use sluice_e2e::{bin, start_sluice};

const ECHO_JS: &str = r#"
// toolfunnel's demo echo: the arguments arrive in TOOLFUNNEL_TOOL_ARGS; one JSON line out.
const args = JSON.parse(process.env.TOOLFUNNEL_TOOL_ARGS || 'null');
process.stdout.write(JSON.stringify({ echoed: args, same: process.env.SLUICE_TOOL_ARGS === process.env.TOOLFUNNEL_TOOL_ARGS }) + '\n');
"#;

const FAIL_JS: &str = r#"
process.stderr.write('the tool broke on purpose');
process.exit(4);
"#;

const DENY_SH: &str = r#"#!/usr/bin/env bash
input=$(cat)
if printf '%s' "$input" | grep -q 'DROP TABLE'; then
  echo "Blocked: SQL destruction" >&2
  exit 2
fi
exit 0
"#;

fn toolfunnel_tree() -> Home {
    let home = Home::new("toolfunnel-tree");
    home.write("tools/scripts/echo.js", ECHO_JS);
    home.write("tools/scripts/fail.js", FAIL_JS);
    home.write(
        "tools/tools.register.json",
        &json!({
            "version": 1,
            "description": "Tool register for the gateway — test tools.",
            "tools": [
                {"id": "echo", "name": "Echo", "summary": "Return the provided arguments back unchanged.", "category": "demo",
                 "instructions": "Echoes its structured args back in the result.", "invoke": {"type": "script", "path": "scripts/echo.js"}},
                {"id": "where", "name": "Where", "summary": "Say where the tool runs.", "category": "demo",
                 "invoke": {"type": "shell", "command": "printf '{\"cwd\":\"%s\"}\\n' \"$(pwd)\""}},
                {"id": "fail", "name": "Fail", "summary": "Always fails.", "category": "test", "invoke": {"type": "script", "path": "scripts/fail.js"}},
                {"id": "deploy-guide", "name": "Deploy guide", "summary": "How to deploy.", "category": "docs", "mode": "reference",
                 "instructions": "Run `make deploy` in your own shell, then check the dashboard."},
                {"id": "danger", "name": "Danger", "summary": "Disabled by the overlay.", "category": "demo", "invoke": {"type": "script", "path": "scripts/echo.js"}}
            ]
        })
        .to_string(),
    );
    home.write(
        "tools/tools.state.json",
        r#"{"danger": {"enabled": false}, "where": {"hidden": true}}"#,
    );
    home.expose(&json!({
        "version": 1,
        "upstreams": [{"id": "mock", "transport": "stdio", "command": bin("sluice-fixture").to_string_lossy(), "args": ["--stdio"], "env": {}, "enabled": true, "description": "fixture"}],
        "expose": [{"upstream": "mock", "tool": "add", "as": "mock_sum", "category": "math", "enabled": true}]
    }));
    home.write("hooks/scripts/deny.sh", DENY_SH);
    home.write(
        "hooks/hooks.manifest.json",
        &json!({"version": 1, "hooks": [
            {"id": "pre-tool-use/deny", "event": "PreToolUse", "matcher": "echo|mock_echo", "type": "command",
             "command": "bash \"${HOOKS_DIR}/scripts/deny.sh\"", "script": "scripts/deny.sh", "timeout": 5, "enabled": true}
        ]})
        .to_string(),
    );
    home
}

fn structured(r: &Value) -> Value {
    r["result"]["structuredContent"].clone()
}

async fn run(c: &Client, name: &str, args: Value) -> Value {
    c.call_tool("sluice_run_tool", json!({"name": name, "args": args}))
        .await
}

#[tokio::test]
async fn a_toolfunnel_tree_works_through_the_funnel() {
    let home = toolfunnel_tree();
    let (_gw, url) = start_sluice(&["--home", &home.arg()]);
    let mut c = Client::new(&url);
    c.initialize(json!({})).await;

    // tools/list: the three meta-tools, then the curated tool.
    assert_eq!(
        c.tool_names().await,
        [
            "sluice_list_tools",
            "sluice_tool_instructions",
            "sluice_run_tool",
            "mock_sum"
        ]
    );

    // Briefs: enabled register tools (the overlay's `danger` is gone; `hidden` does not hide
    // from clients) and every tool of every upstream.
    let briefs = structured(&c.call_tool("sluice_list_tools", json!({})).await);
    let names: Vec<&str> = briefs["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["name"].as_str().unwrap())
        .collect();
    for n in [
        "echo",
        "where",
        "fail",
        "deploy-guide",
        "mock_echo",
        "mock_add",
        "mock_test_simple_text",
    ] {
        assert!(names.contains(&n), "{n} missing from {names:?}");
    }
    assert!(!names.contains(&"danger"));
    let echo = briefs["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["name"] == "echo")
        .unwrap();
    assert_eq!(
        echo,
        &json!({"name": "echo", "summary": "Return the provided arguments back unchanged.", "category": "demo", "source": "local"})
    );
    // Category filter (exact match); an upstream tool takes its expose entry's category.
    let demo = structured(
        &c.call_tool("sluice_list_tools", json!({"category": "math"}))
            .await,
    );
    assert_eq!(
        demo["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| b["name"].as_str().unwrap())
            .collect::<Vec<_>>(),
        ["mock_add"]
    );

    // Instructions.
    let r = c
        .call_tool("sluice_tool_instructions", json!({"name": "echo"}))
        .await;
    assert!(r["result"]["content"][0]["text"]
        .as_str()
        .unwrap()
        .contains("Echoes its structured args back in the result."));

    // Script tool: the args arrive in TOOLFUNNEL_TOOL_ARGS (and SLUICE_TOOL_ARGS); one JSON line out.
    let r = run(&c, "echo", json!({"x": 1, "s": "ü"})).await;
    assert_eq!(
        structured(&r),
        json!({"echoed": {"x": 1, "s": "ü"}, "same": true})
    );
    // By display name too.
    assert_eq!(
        structured(&run(&c, "Echo", json!({"y": 2})).await)["echoed"],
        json!({"y": 2})
    );
    // Shell tool: runs verbatim with the cwd at the tree root.
    let r = run(&c, "where", json!({})).await;
    assert_eq!(
        structured(&r)["cwd"],
        json!(home.path().canonicalize().unwrap().to_string_lossy())
    );
    // A failing tool: an isError result carrying stderr.
    let r = run(&c, "fail", json!({})).await;
    assert_eq!(r["result"]["isError"], json!(true));
    assert_eq!(
        r["result"]["content"][0]["text"],
        json!("tool fail failed (exit code 4): the tool broke on purpose")
    );
    // A reference tool runs nothing and returns its instructions.
    let r = run(&c, "deploy-guide", json!({})).await;
    assert_eq!(
        r["result"]["content"][0]["text"],
        json!("Run `make deploy` in your own shell, then check the dashboard.")
    );
    // An upstream tool through the funnel.
    let r = run(&c, "mock_add", json!({"a": 20, "b": 22})).await;
    assert_eq!(structured(&r), json!({"sum": 42}));
    // A disabled tool is unknown.
    let r = run(&c, "danger", json!({})).await;
    assert_eq!(
        r["error"],
        json!({"code": -32602, "message": "Unknown tool: danger"})
    );

    // The run goes through the same hooks as a direct call, with the real tool name.
    let r = run(&c, "echo", json!({"q": "DROP TABLE users"})).await;
    assert_eq!(
        r["error"],
        json!({"code": -32030, "message": "Request rejected", "data": {"reason": "Blocked: SQL destruction"}})
    );
    let r = run(&c, "mock_echo", json!({"q": "DROP TABLE users"})).await;
    assert_eq!(r["error"]["code"], json!(-32030));

    // The overlay applies live: disable `echo`, enable `danger`.
    home.write("tools/tools.state.json", r#"{"echo": {"enabled": false}}"#);
    let mut changed = false;
    for _ in 0..60 {
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        let briefs = structured(&c.call_tool("sluice_list_tools", json!({})).await);
        let names: Vec<String> = briefs["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| b["name"].as_str().unwrap().to_string())
            .collect();
        if !names.contains(&"echo".to_string()) && names.contains(&"danger".to_string()) {
            changed = true;
            break;
        }
    }
    assert!(changed, "the overlay edit was picked up without a restart");
    let r = run(&c, "echo", json!({})).await;
    assert_eq!(r["error"]["code"], json!(-32602));
}

#[test]
fn the_register_is_validated_with_file_and_field() {
    let home = Home::new("register-check");
    home.write(
        "tools/tools.register.json",
        &json!({"tools": [
            {"id": "a", "name": "A", "invoke": {"type": "script", "path": "scripts/a.js"}},
            {"id": "a", "name": "A again", "invoke": {"type": "shell", "command": "true"}},
            {"id": "b", "name": ""},
            {"id": "c", "name": "C", "mode": "sometimes", "invoke": {"type": "shell", "command": "x"}},
            {"id": "d", "name": "D", "invoke": {"type": "carrier"}},
            {"id": "e", "name": "E", "invoke": {"type": "shell", "command": ""}},
            {"id": "f", "name": "F", "mode": "reference"}
        ]})
        .to_string(),
    );
    home.write("tools/tools.state.json", "{ broken");
    let out = std::process::Command::new(bin("sluice"))
        .args(["check", "--home", &home.arg()])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert_eq!(out.status.code(), Some(1), "{text}");
    let f = home
        .path()
        .join("tools/tools.register.json")
        .display()
        .to_string();
    for e in [
        format!("error: {f}: tools[1].id: duplicate tool id \"a\""),
        format!("error: {f}: tools[2].name: must be a non-empty string"),
        format!("error: {f}: tools[2].invoke: is required (unless mode is \"reference\")"),
        format!("error: {f}: tools[3].mode: \"sometimes\" is not gateway or reference"),
        format!("error: {f}: tools[4].invoke.type: \"carrier\" is not script or shell"),
        format!("error: {f}: tools[5].invoke.command: must be a non-empty string"),
    ] {
        assert!(text.lines().any(|l| l == e), "missing {e:?} in:\n{text}");
    }
    // Exactly those six: the reference tool without invoke and the malformed overlay are fine.
    assert_eq!(
        text.lines().filter(|l| l.starts_with("error: ")).count(),
        6,
        "{text}"
    );
}
