//! Live reload: edits to the tree apply without a restart, rebuilding only what changed (an
//! unchanged stdio upstream keeps its process), an invalid edit keeps the running configuration,
//! and clients are told when the tools they can see change.

use serde_json::{json, Value};
use sluice_e2e::mcp::{Client, SseReader};
use sluice_e2e::tree::Home;
use sluice_e2e::{bin, eventually, start_sluice};
use std::time::Duration;

fn fixture() -> String {
    bin("sluice-fixture").to_string_lossy().into_owned()
}

fn pid_of(r: &Value) -> String {
    let t = r["result"]["content"][0]["text"].as_str().unwrap_or("");
    t.rsplit("pid=")
        .next()
        .unwrap_or("")
        .split_whitespace()
        .next()
        .unwrap_or("")
        .to_string()
}

#[tokio::test]
async fn edits_apply_live_and_unchanged_upstreams_keep_their_process() {
    let home = Home::new("reload");
    let a = json!({"id": "a", "command": fixture(), "args": ["--stdio", "--name", "a"], "expose_all": true});
    home.expose(&json!({"upstreams": [a.clone()]}));
    let (_gw, url) = start_sluice(&["--home", &home.arg()]);
    let mut c = Client::new(&url);
    c.initialize(json!({})).await;
    let mut events = SseReader::new(c.open_get(None).await);
    let pid_a = pid_of(&c.call_tool("a_whoami", json!({})).await);
    assert!(!pid_a.is_empty());

    // Add an upstream: its tools appear, clients are told, `a` keeps its process.
    let b = json!({"id": "b", "command": fixture(), "args": ["--stdio", "--name", "b"], "expose_all": true});
    home.expose(&json!({"upstreams": [a.clone(), b]}));
    let (_, m) = events.next().await.expect("list_changed after adding b");
    assert_eq!(m["method"], json!("notifications/tools/list_changed"));
    eventually("b's tools listed", || async {
        c.tool_names().await.contains(&"b_whoami".to_string())
    })
    .await;
    assert_eq!(
        pid_of(&c.call_tool("a_whoami", json!({})).await),
        pid_a,
        "a kept its process"
    );

    // A broken edit keeps everything running.
    home.write("mcp/expose.json", "{ \"upstreams\": [ broken");
    tokio::time::sleep(Duration::from_millis(1200)).await;
    assert_eq!(pid_of(&c.call_tool("a_whoami", json!({})).await), pid_a);
    assert!(c.call_tool("b_whoami", json!({})).await["result"].is_object());
    let check = std::process::Command::new(bin("sluice"))
        .args(["check", "--home", &home.arg()])
        .output()
        .unwrap();
    assert_eq!(check.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&check.stdout).contains("malformed JSON at line 1"));

    // The fixed edit: remove b, change a's name (so a restarts), curate one tool of a.
    let a2 = json!({"id": "a", "command": fixture(), "args": ["--stdio", "--name", "a2"]});
    home.expose(
        &json!({"upstreams": [a2], "expose": [{"upstream": "a", "tool": "whoami", "as": "who"}]}),
    );
    eventually("the new tree applied", || async {
        c.tool_names().await == ["who"]
    })
    .await;
    let r = c.call_tool("who", json!({})).await;
    assert!(
        r["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .starts_with("a2 pid="),
        "{r}"
    );
    assert_ne!(pid_of(&r), pid_a, "a changed, so it was restarted");
    let r = c.call_tool("b_whoami", json!({})).await;
    assert_eq!(r["error"]["code"], json!(-32602));
}

const DENY_ALL_SH: &str = "#!/usr/bin/env bash\necho 'closed for maintenance' >&2\nexit 2\n";

#[tokio::test]
async fn hook_edits_apply_live() {
    let home = Home::new("reload-hooks");
    home.expose(&json!({"upstreams": [
        {"id": "fx", "command": fixture(), "args": ["--stdio"], "expose_all": true}
    ]}));
    home.write("hooks/scripts/deny.sh", DENY_ALL_SH);
    let manifest = |enabled: bool| {
        json!({"hooks": [{"id": "pre-tool-use/deny", "event": "PreToolUse", "type": "command",
                           "command": "bash \"${HOOKS_DIR}/scripts/deny.sh\"", "enabled": enabled}]})
        .to_string()
    };
    home.write("hooks/hooks.manifest.json", &manifest(false));
    let (_gw, url) = start_sluice(&["--home", &home.arg()]);
    let mut c = Client::new(&url);
    c.initialize(json!({})).await;
    let pid = pid_of(&c.call_tool("fx_whoami", json!({})).await);
    // The overlay turns the hook on.
    home.write("hooks/hooks.state.json", r#"{"pre-tool-use/deny": true}"#);
    eventually("the hook is on", || async {
        c.call_tool("fx_echo", json!({})).await["error"]["data"]["reason"]
            == json!("closed for maintenance")
    })
    .await;
    // And off again.
    home.write("hooks/hooks.state.json", r#"{"pre-tool-use/deny": false}"#);
    eventually("the hook is off", || async {
        c.call_tool("fx_echo", json!({})).await["result"].is_object()
    })
    .await;
    // The upstream was never touched.
    home.write("hooks/hooks.state.json", "{}");
    let pid_after = {
        let mut p = String::new();
        for _ in 0..20 {
            let r = c.call_tool("fx_whoami", json!({})).await;
            if r["result"].is_object() {
                p = pid_of(&r);
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        p
    };
    assert_eq!(pid_after, pid);
}

#[tokio::test]
async fn server_settings_apply_live_except_the_listener() {
    let home = Home::new("reload-settings");
    let a = json!({"id": "a", "command": fixture(), "args": ["--stdio"], "expose_all": true});
    home.expose(&json!({"upstreams": [a]}));
    home.write("sluice.json", r#"{"page_size": 500}"#);
    let (_gw, url) = start_sluice(&["--home", &home.arg(), "--no-admin"]);
    let mut c = Client::new(&url);
    c.initialize(json!({})).await;
    let first = c.request("tools/list", json!({})).await;
    let all = first["result"]["tools"].as_array().unwrap().len();
    assert!(all > 3, "{first}");
    assert!(first["result"].get("nextCursor").is_none());

    // A smaller page and a smaller body limit, live; a new listen address waits for a restart.
    home.write(
        "sluice.json",
        r#"{"page_size": 2, "max_body_bytes": 2048, "listen": "127.0.0.1:1"}"#,
    );
    eventually("the page size applies", || async {
        let r = c.request("tools/list", json!({})).await;
        r["result"]["tools"].as_array().unwrap().len() == 2
    })
    .await;
    let page = c.request("tools/list", json!({})).await;
    assert!(page["result"]["nextCursor"].is_string(), "{page}");
    assert_eq!(c.tool_names().await.len(), all, "every page together");
    let big = c
        .post(json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                     "params": {"name": "a_echo", "arguments": {"pad": "x".repeat(4096)}}}))
        .await;
    assert_eq!(big.status, 413, "{}", big.body);
    // Still serving on the address it started with.
    let small = c.call_tool("a_echo", json!({"ok": true})).await;
    assert_eq!(small["result"]["structuredContent"], json!({"ok": true}));
}
