//! Management through the CLI: each command validates like the loader, writes atomically (an
//! invalid change writes nothing), and a running gateway applies the change live.

use serde_json::json;
use sluice_e2e::mcp::Client;
use sluice_e2e::tree::Home;
use sluice_e2e::{bin, start_sluice};
use std::process::Command;
use std::time::Duration;

fn sluice(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(bin("sluice")).args(args).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test]
async fn the_cli_manages_a_running_tree() {
    let home = Home::new("manage");
    let h = home.arg();
    home.write("tools/scripts/hello.sh", "echo '{\"hello\": \"world\"}'\n");
    let (_gw, url) = start_sluice(&["--home", &h]);
    let mut c = Client::new(&url);
    c.initialize(json!({})).await;
    assert_eq!(
        c.tool_names().await,
        [
            "sluice_list_tools",
            "sluice_tool_instructions",
            "sluice_run_tool"
        ]
    );

    // Tools.
    let (code, out, err) = sluice(&[
        "tool",
        "add",
        "--home",
        &h,
        "--id",
        "hello",
        "--summary",
        "Says hello",
        "--category",
        "demo",
        "--script",
        "scripts/hello.sh",
    ]);
    assert_eq!((code, out.as_str()), (0, "added tool hello\n"), "{err}");
    let (code, _, err) = sluice(&[
        "tool", "add", "--home", &h, "--id", "hello", "--shell", "true",
    ]);
    assert_eq!(code, 1);
    assert!(
        err.contains("the change was not written") && err.contains("duplicate tool id \"hello\""),
        "{err}"
    );
    let before = std::fs::read_to_string(home.path().join("tools/tools.register.json")).unwrap();
    assert_eq!(
        before.matches("\"id\": \"hello\"").count(),
        1,
        "the invalid change wrote nothing"
    );
    let mut ok = false;
    for _ in 0..50 {
        let r = c
            .call_tool("sluice_run_tool", json!({"name": "hello", "args": {}}))
            .await;
        if r["result"]["structuredContent"] == json!({"hello": "world"}) {
            ok = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(ok, "the running gateway runs the new tool");
    let (code, out, _) = sluice(&["tool", "set", "--home", &h, "hello", "--hidden", "true"]);
    assert_eq!((code, out.as_str()), (0, "updated tool hello\n"));
    assert_eq!(sluice(&["tool", "list", "--home", &h]).1, "");
    assert_eq!(
        sluice(&["tool", "list", "--home", &h, "--all"]).1,
        "hello\thello\tdemo\tenabled,hidden\tSays hello\n"
    );
    let (code, _, err) = sluice(&["tool", "set", "--home", &h, "nope", "--enabled", "false"]);
    assert_eq!(
        (code, err.trim()),
        (1, "sluice: no register tool has the id \"nope\"")
    );

    // Upstreams: added live.
    let fixture = bin("sluice-fixture").to_string_lossy().into_owned();
    let (code, out, err) = sluice(&[
        "upstream",
        "add",
        "--home",
        &h,
        "--id",
        "fx",
        "--expose-all",
        "--",
        &fixture,
        "--stdio",
    ]);
    assert_eq!((code, out.as_str()), (0, "added upstream fx\n"), "{err}");
    let mut listed = false;
    for _ in 0..50 {
        if c.tool_names().await.contains(&"fx_echo".to_string()) {
            listed = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(listed, "the new upstream's tools are listed");
    assert_eq!(
        sluice(&["upstream", "list", "--home", &h]).1,
        format!("fx\tStdio\tenabled\t{fixture} --stdio\n")
    );
    let (code, _, err) = sluice(&[
        "upstream", "add", "--home", &h, "--id", "bad", "--url", "ftp://x",
    ]);
    assert_eq!(code, 1);
    assert!(
        err.contains("upstreams[1].url: \"ftp://x\" is not an http:// or https:// URL"),
        "{err}"
    );

    // Hooks.
    let (code, _, err) = sluice(&[
        "hook",
        "add",
        "--home",
        &h,
        "--id",
        "pre-tool-use/no",
        "--event",
        "PreToolUse",
        "--matcher",
        "fx_echo",
        "--command",
        "echo no >&2; exit 2",
    ]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        sluice(&["hook", "list", "--home", &h]).1,
        "pre-tool-use/no\tPreToolUse\tdisabled\t\n"
    );
    let (code, out, _) = sluice(&[
        "hook",
        "set",
        "--home",
        &h,
        "pre-tool-use/no",
        "--enabled",
        "true",
    ]);
    assert_eq!((code, out.as_str()), (0, "hook pre-tool-use/no enabled\n"));
    assert_eq!(
        std::fs::read_to_string(home.path().join("hooks/hooks.state.json")).unwrap(),
        "{\n  \"pre-tool-use/no\": true\n}\n"
    );
    let mut refused = false;
    for _ in 0..50 {
        if c.call_tool("fx_echo", json!({})).await["error"]["code"] == json!(-32030) {
            refused = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(refused, "the enabled hook applies live");

    // The audit log.
    let (code, out, _) = sluice(&["log", "on", "--home", &h]);
    assert_eq!(code, 0);
    assert!(out.starts_with("audit log on: ") && out.trim_end().ends_with("logs/audit.jsonl"));
    let mut tail = String::new();
    for _ in 0..50 {
        let _ = c.call_tool("fx_add", json!({"a": 1, "b": 1})).await;
        tail = sluice(&["log", "tail", "--home", &h, "-n", "1"]).1;
        if !tail.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let line: serde_json::Value = serde_json::from_str(tail.trim()).expect("one audit line");
    assert_eq!(line["tool"], json!("fx_add"));
    assert_eq!(sluice(&["log", "off", "--home", &h]).1, "audit log off\n");
}

#[tokio::test]
async fn the_mcp_management_tools_manage_the_tree_they_run_on() {
    let home = Home::new("manage-mcp");
    home.write(
        "sluice.json",
        r#"{"management_tools": true, "funnel": false}"#,
    );
    let fixture = bin("sluice-fixture").to_string_lossy().into_owned();
    let (_gw, url) = start_sluice(&["--home", &home.arg()]);
    let mut c = Client::new(&url);
    c.initialize(json!({})).await;
    let names = c.tool_names().await;
    assert_eq!(
        names,
        [
            "sluice_list",
            "sluice_tool_add",
            "sluice_tool_set",
            "sluice_hook_add",
            "sluice_hook_set",
            "sluice_upstream_add",
            "sluice_upstream_set",
            "sluice_log"
        ]
    );
    // Adding an upstream: live when the call returns.
    let r = c
        .call_tool(
            "sluice_upstream_add",
            json!({"entry": {"id": "fx", "command": fixture, "args": ["--stdio"], "expose_all": true}}),
        )
        .await;
    assert_eq!(r["result"]["content"][0]["text"], json!("upstream added"));
    let mut listed = false;
    for _ in 0..50 {
        if c.tool_names().await.contains(&"fx_add".to_string()) {
            listed = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(listed);
    // A change the loader refuses: an isError result naming file and field; nothing written.
    let r = c
        .call_tool(
            "sluice_tool_add",
            json!({"entry": {"id": "x", "invoke": {"type": "shell", "command": "true"}}}),
        )
        .await;
    assert_eq!(r["result"]["isError"], json!(true));
    let text = r["result"]["content"][0]["text"].as_str().unwrap();
    assert!(
        text.contains("the change was not written") && text.contains("tools[0].name: is required"),
        "{text}"
    );
    assert!(!home.path().join("tools/tools.register.json").exists());
    // A hook added and switched on applies to the next call.
    let r = c
        .call_tool(
            "sluice_hook_add",
            json!({"entry": {"id": "no-add", "event": "PreToolUse", "matcher": "fx_add", "command": "echo no adding >&2; exit 2"}}),
        )
        .await;
    assert_eq!(r["result"]["content"][0]["text"], json!("hook added"));
    let r = c
        .call_tool("sluice_hook_set", json!({"id": "no-add", "enabled": true}))
        .await;
    assert_eq!(r["result"]["content"][0]["text"], json!("hook updated"));
    let r = c.call_tool("fx_add", json!({"a": 1, "b": 2})).await;
    assert_eq!(r["error"]["data"]["reason"], json!("no adding"));
    // The listing.
    let r = c.call_tool("sluice_list", json!({"kind": "hooks"})).await;
    assert_eq!(
        r["result"]["structuredContent"],
        json!({"hooks": [{"id": "no-add", "event": "PreToolUse", "enabled": true, "description": ""}]})
    );
}

#[test]
fn mcp_servers_files_import_as_upstreams() {
    let home = Home::new("import");
    let file = home.path().join("claude_desktop_config.json");
    std::fs::write(
        &file,
        json!({"mcpServers": {
            "everything": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-everything"], "env": {"K": "v"}},
            "remote api": {"url": "https://mcp.example.com/mcp", "headers": {"Authorization": "Bearer x"}},
            "legacy": {"type": "sse", "url": "http://127.0.0.1:9/sse", "disabled": true}
        }})
        .to_string(),
    )
    .unwrap();
    let (code, out, err) = sluice(&[
        "import",
        "mcp-servers",
        "--home",
        &home.arg(),
        &file.to_string_lossy(),
    ]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        out,
        "imported 3 upstream(s): everything, remote-api, legacy\n"
    );
    let expose: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(home.path().join("mcp/expose.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(
        expose["upstreams"],
        json!([
            {"id": "everything", "transport": "stdio", "command": "npx", "args": ["-y", "@modelcontextprotocol/server-everything"], "env": {"K": "v"}, "enabled": true, "expose_all": true},
            {"id": "remote-api", "transport": "http", "url": "https://mcp.example.com/mcp", "headers": {"Authorization": "Bearer x"}, "enabled": true, "expose_all": true},
            {"id": "legacy", "transport": "sse", "url": "http://127.0.0.1:9/sse", "enabled": false, "expose_all": true}
        ])
    );
    // Importing again would duplicate the ids: refused, nothing written.
    let (code, _, err) = sluice(&[
        "import",
        "mcp-servers",
        "--home",
        &home.arg(),
        &file.to_string_lossy(),
    ]);
    assert_eq!(code, 1);
    assert!(
        err.contains("duplicate upstream id \"everything\""),
        "{err}"
    );
    let (code, _, err) = sluice(&[
        "import",
        "mcp-servers",
        "--home",
        &home.arg(),
        "/nonexistent.json",
    ]);
    assert_eq!(code, 1);
    assert!(
        err.starts_with("sluice: cannot read /nonexistent.json"),
        "{err}"
    );
}

#[tokio::test]
async fn drift_of_curated_tools_is_flagged_until_accepted() {
    let home = Home::new("drift");
    let h = home.arg();
    let fixture = bin("sluice-fixture").to_string_lossy().into_owned();
    let tree = |args: serde_json::Value| {
        json!({"upstreams": [{"id": "fx", "command": fixture, "args": args}],
               "expose": [{"upstream": "fx", "tool": "echo", "as": "shout"}]})
    };
    home.expose(&tree(json!(["--stdio"])));
    home.write(
        "sluice.json",
        r#"{"admin_token": "drift-token-0123456789"}"#,
    );
    let admin_port = sluice_e2e::free_port();
    let admin = format!("127.0.0.1:{admin_port}");
    let (_gw, url) = start_sluice(&["--home", &h, "--admin", &admin]);
    sluice_e2e::wait_for_port(admin_port, Duration::from_secs(10));
    let mut c = Client::new(&url);
    c.initialize(json!({})).await;
    assert_eq!(c.tool_names().await, ["shout"]);
    let pins = || -> serde_json::Value {
        std::fs::read_to_string(home.path().join("mcp/pins.json"))
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok())
            .unwrap_or(json!(null))
    };
    // The curated tool is pinned as first seen (its upstream is not pinned otherwise).
    let mut first = pins();
    for _ in 0..100 {
        if first["upstreams"]["fx"]["tools"]["echo"]["digest"].is_string() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        first = pins();
    }
    let echo = &first["upstreams"]["fx"]["tools"]["echo"];
    let accepted = echo["digest"].as_str().expect("a digest").to_string();
    assert!(accepted.starts_with("sha256:"), "{first}");
    assert_eq!(echo["definition"]["name"], json!("echo"));
    assert_eq!(echo.get("seen"), None, "{first}");
    assert_eq!(
        first["upstreams"].as_object().unwrap().len(),
        1,
        "only the curated tool's upstream: {first}"
    );
    assert_eq!(
        first["upstreams"]["fx"]["tools"].as_object().unwrap().len(),
        1,
        "only the curated tool: {first}"
    );
    assert_eq!(sluice(&["tool", "list", "--home", &h]).1, "");

    // The upstream changes the tool's description: flagged (and still served).
    home.expose(&tree(json!([
        "--stdio",
        "--describe",
        "echo=Echo, now with a different contract"
    ])));
    let mut drifted = false;
    for _ in 0..100 {
        let m = pins();
        if m["upstreams"]["fx"]["tools"]["echo"]["seen"]["definition"]["description"]
            == json!("Echo, now with a different contract")
        {
            assert_eq!(
                m["upstreams"]["fx"]["tools"]["echo"]["digest"],
                json!(accepted)
            );
            drifted = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(drifted, "the changed description was noticed");
    assert_eq!(
        sluice(&["tool", "list", "--home", &h]).1,
        "shout\t(curated)\t\tdrifted\tthe upstream changed it; `sluice tool accept shout`\n"
    );
    // The admin API flags it too, and accepts it.
    let http = reqwest::Client::new();
    let api = format!("http://127.0.0.1:{admin_port}/api");
    let tools: serde_json::Value = http
        .get(format!("{api}/tools"))
        .bearer_auth("drift-token-0123456789")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let row = tools["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "shout")
        .unwrap()
        .clone();
    assert_eq!(row["drifted"], json!(true));
    assert_eq!(row["pin"], json!("changed"));
    assert_eq!(row["review"], json!("fx/echo"));
    let r = http
        .post(format!("{api}/tools/accept"))
        .bearer_auth("drift-token-0123456789")
        .json(&json!({"name": "shout"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    // Accepted: no longer flagged; accepting again is harmless.
    assert_eq!(sluice(&["tool", "list", "--home", &h]).1, "");
    assert_eq!(
        sluice(&["tool", "accept", "--home", &h, "shout"]).1,
        "accepted shout\n"
    );
    let (code, _, err) = sluice(&["tool", "accept", "--home", &h, "nope"]);
    assert_eq!((code, err.trim()), (1, "sluice: no curated tool \"nope\""));
}
