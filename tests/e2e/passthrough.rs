//! `sluice serve --passthrough` is transparent, and lists are what a client's own upstream
//! session shows: started in a folder with a `tools/` subfolder it lists exactly the upstream's
//! tools (no funnel), every time, `simulate-research-query` included; names the gateway has not
//! listed are the upstream's to answer; the upstream's serverInfo and instructions reach clients
//! of both eras; a client whose upstream session registers tools for it (server-everything's
//! capability-dependent tools) sees and calls them, and a client without those capabilities
//! does not see them; the funnel and the `validate` hook use that client's view too.

use crate::interop::{node22, node_module_file, ts_client};
use serde_json::{json, Value};
use sluice_e2e::mcp::Client;
use sluice_e2e::tree::Home;
use sluice_e2e::{bin, free_port, start_fixture_http, start_sluice, wait_for_port, Proc};
use std::process::Command;
use std::time::Duration;

/// `server-everything` over Streamable HTTP on a free port; its `/mcp` URL.
pub(crate) fn start_everything_http() -> (Proc, String) {
    let port = free_port();
    let mut cmd = Command::new(node22());
    cmd.arg(node_module_file(
        "@modelcontextprotocol/server-everything/dist/index.js",
    ))
    .arg("streamableHttp")
    .env("PORT", port.to_string());
    let proc = Proc::spawn(cmd);
    wait_for_port(port, Duration::from_secs(30));
    (proc, format!("http://127.0.0.1:{port}/mcp"))
}

/// `sluice serve --passthrough URL` started in `cwd`.
fn start_passthrough_in(cwd: &std::path::Path, url: &str) -> (Proc, String) {
    let port = free_port();
    let mut cmd = Command::new(bin("sluice"));
    cmd.current_dir(cwd)
        .args(["serve", "--no-admin", "--listen"])
        .arg(format!("127.0.0.1:{port}"))
        .args(["--passthrough", url]);
    let proc = Proc::spawn(cmd);
    wait_for_port(port, Duration::from_secs(30));
    (proc, format!("http://127.0.0.1:{port}/mcp"))
}

fn sorted_names(list: &Value) -> Vec<String> {
    let mut names: Vec<String> = list["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("no tools in {list}"))
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect();
    names.sort();
    names
}

#[test]
fn passthrough_in_a_folder_with_tools_lists_exactly_the_upstreams_tools_every_time() {
    let (_everything, everything_url) = start_everything_http();
    // A folder that would give an aggregating gateway a funnel and register tools.
    let folder = Home::new("passthrough-cwd");
    folder.write("tools/hello.sh", "#!/bin/sh\necho hi\n");
    folder.write(
        "tools/tools.register.json",
        r#"{"version": 1, "tools": []}"#,
    );
    for round in 0..3 {
        let (_gw, url) = start_passthrough_in(folder.path(), &everything_url);
        let direct = ts_client(&everything_url, &json!([{"op": "listTools"}]));
        let through = ts_client(&url, &json!([{"op": "listTools"}]));
        let (direct, through) = (
            sorted_names(&direct["results"][0]),
            sorted_names(&through["results"][0]),
        );
        assert!(
            through.iter().any(|t| t == "simulate-research-query"),
            "round {round}: {through:?}"
        );
        assert_eq!(through, direct, "round {round}");
    }
}

#[test]
fn a_clients_own_upstream_session_lists_and_calls_what_it_registers_for_that_client() {
    let (_everything, everything_url) = start_everything_http();
    let (_gw, url) = start_sluice(&["--passthrough", &everything_url, "--no-admin"]);
    let sampling = json!({"role": "assistant", "content": {"type": "text", "text": "Paris"},
                          "model": "m", "stopReason": "endTurn"});
    let capable = |target: &str| {
        ts_client(
            target,
            &json!({
                "sampling": sampling,
                "roots": [{"uri": "file:///tmp", "name": "tmp"}],
                "steps": [
                    {"op": "listTools"},
                    {"op": "callTool", "name": "trigger-sampling-request",
                     "arguments": {"prompt": "Capital of France?", "maxTokens": 10}},
                ],
            }),
        )
    };
    let direct = capable(&everything_url);
    let through = capable(&url);
    let names = sorted_names(&through["results"][0]);
    for t in ["trigger-sampling-request", "get-roots-list"] {
        assert!(names.iter().any(|n| n == t), "{t} missing: {names:?}");
    }
    assert_eq!(names, sorted_names(&direct["results"][0]));
    let text = |r: &Value| r["results"][1]["content"][0]["text"].clone();
    assert_eq!(text(&through), text(&direct), "{through}");
    assert!(
        text(&through).as_str().unwrap().contains("Paris"),
        "{through}"
    );
    // A client without those capabilities is not offered them.
    let plain = ts_client(&url, &json!([{"op": "listTools"}]));
    let plain = sorted_names(&plain["results"][0]);
    assert!(
        !plain.iter().any(|n| n == "trigger-sampling-request"),
        "{plain:?}"
    );
    let plain_direct = ts_client(&everything_url, &json!([{"op": "listTools"}]));
    assert_eq!(plain, sorted_names(&plain_direct["results"][0]));
}

#[tokio::test]
async fn names_the_gateway_has_not_listed_are_the_upstreams_to_answer() {
    let node = node22().to_string_lossy().into_owned();
    let everything = node_module_file("@modelcontextprotocol/server-everything/dist/index.js")
        .to_string_lossy()
        .into_owned();
    let (_gw, url) = start_sluice(&[
        "--passthrough",
        "--no-admin",
        "--",
        &node,
        &everything,
        "stdio",
    ]);
    let mut c = Client::new(&url);
    c.initialize(json!({})).await;
    // server-everything answers an unknown tool with an isError result of its own.
    let r = c.call_tool("no-such-tool", json!({})).await;
    assert_eq!(r["result"]["isError"], json!(true), "{r}");
    assert_eq!(
        r["result"]["content"][0]["text"],
        json!("MCP error -32602: Tool no-such-tool not found"),
        "{r}"
    );
    // With aggregation, an unknown name stays the gateway's -32602.
    let home = Home::new("aggregated-unknown");
    home.expose(&json!({"upstreams": [
        {"id": "ev", "command": node, "args": [everything, "stdio"], "expose_all": true}
    ]}));
    let (_agg, agg_url) = start_sluice(&["--home", &home.arg(), "--no-admin"]);
    let mut c = Client::new(&agg_url);
    c.initialize(json!({})).await;
    let r = c.call_tool("no-such-tool", json!({})).await;
    assert_eq!(r["error"]["code"], json!(-32602), "{r}");
    assert_eq!(r["error"]["message"], json!("Unknown tool: no-such-tool"));
}

#[tokio::test]
async fn the_upstreams_server_info_and_instructions_reach_clients_of_both_eras() {
    let (_fx, fx_url) = start_fixture_http(&["--name", "fixture-behind-sluice"]);
    let (_gw, url) = start_sluice(&["--passthrough", &fx_url, "--no-admin"]);
    // Legacy: the initialize result is the upstream's.
    let mut c = Client::new(&url);
    let init = c.initialize(json!({})).await;
    assert_eq!(
        init["serverInfo"]["name"],
        json!("fixture-behind-sluice"),
        "{init}"
    );
    // (The fixture gives instructions in its server/discover result, which the gateway read.)
    const INSTRUCTIONS: &str = "Sluice's fixture MCP server: conformance test tools, prompts and \
                                resources, plus echo, add, slow and friends for gateway tests.";
    assert_eq!(init["instructions"], json!(INSTRUCTIONS), "{init}");
    // This fixture runs no tasks: the gateway declares none (in either era).
    assert_eq!(init["capabilities"].get("tasks"), None, "{init}");
    // Modern: the serverInfo stamp in `_meta` is the upstream's, on discover and on results.
    let modern = reqwest::Client::new();
    let meta = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                      "io.modelcontextprotocol/clientCapabilities": {}});
    for (method, params) in [
        ("server/discover", json!({"_meta": meta})),
        ("tools/list", json!({"_meta": meta})),
    ] {
        let resp = modern
            .post(&url)
            .header("accept", "application/json, text/event-stream")
            .header("content-type", "application/json")
            .header("mcp-protocol-version", "2026-07-28")
            .header("mcp-method", method)
            .body(
                json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).to_string(),
            )
            .send()
            .await
            .unwrap();
        let body: Value = sluice_e2e::mcp::finish(resp).await.reply();
        assert_eq!(
            body["result"]["_meta"]["io.modelcontextprotocol/serverInfo"]["name"],
            json!("fixture-behind-sluice"),
            "{method}: {body}"
        );
        if method == "server/discover" {
            assert_eq!(body["result"]["instructions"], json!(INSTRUCTIONS));
            let caps = &body["result"]["capabilities"];
            assert_eq!(caps.get("tasks"), None, "{body}");
            assert_eq!(
                caps.pointer("/extensions/io.modelcontextprotocol~1tasks"),
                None
            );
        }
    }
}

#[tokio::test]
async fn a_list_changed_on_a_clients_own_upstream_session_reaches_that_client_and_its_calls() {
    // The fixture adds a tool and says so only on the session that asked (its own HTTP
    // session upstream): the gateway's control connection is never told.
    let (_fx, fx_url) = start_fixture_http(&["--era", "legacy"]);
    let home = Home::new("session-list-changed");
    home.expose(&json!({"upstreams": [
        {"id": "fx", "transport": "http", "url": fx_url, "expose_all": true}
    ]}));
    let (_gw, url) = start_sluice(&["--home", &home.arg(), "--no-admin"]);
    let mut c = Client::new(&url);
    c.initialize(json!({})).await;
    let mut get = sluice_e2e::mcp::SseReader::new(c.open_get(None).await);
    assert!(!c.tool_names().await.iter().any(|n| n == "fx_dynamic_0"));
    let r = c.call_tool("fx_trigger_list_changed", json!({})).await;
    assert_eq!(r["result"]["content"][0]["text"], json!("ok"), "{r}");
    let (_, said) = tokio::time::timeout(Duration::from_secs(10), get.next())
        .await
        .expect("a notification in time")
        .expect("a notification");
    assert_eq!(
        said["method"],
        json!("notifications/tools/list_changed"),
        "{said}"
    );
    let names = c.tool_names().await;
    assert!(names.iter().any(|n| n == "fx_dynamic_0"), "{names:?}");
    let r = c.call_tool("fx_dynamic_0", json!({"k": 1})).await;
    assert_eq!(r["result"]["structuredContent"], json!({"k": 1}), "{r}");
}

/// The funnel and the `validate` hook read the catalog the client sees: server-everything
/// registers `get-roots-list` and `trigger-sampling-request` only on sessions of clients that
/// declare roots and sampling, so they are in that client's view (its own upstream session) and
/// not in the gateway's catalog; `sluice_list_tools` lists them, `sluice_run_tool` runs them,
/// and their calls are checked against their own `inputSchema`.
#[tokio::test]
async fn the_funnel_and_the_validate_hook_use_the_clients_own_view() {
    let (_ev, ev_url) = start_everything_http();
    let home = Home::new("view-funnel-validate");
    home.expose(&json!({"upstreams": [
        {"id": "ev", "transport": "http", "url": ev_url, "expose_all": true}
    ]}));
    home.write(
        "tools/tools.register.json",
        &json!({"version": 1, "description": "Tools.", "tools": [
            {"id": "guide", "name": "Guide", "summary": "How to.", "category": "docs", "mode": "reference",
             "instructions": "Read the docs."}
        ]})
        .to_string(),
    );
    home.write(
        "hooks/hooks.manifest.json",
        &json!({"version": 1, "hooks": [
            {"id": "validate", "event": "PreToolUse", "type": "builtin", "builtin": "validate", "enabled": true}
        ]})
        .to_string(),
    );
    let (_gw, url) = start_sluice(&["--home", &home.arg(), "--no-admin"]);
    let mut c = Client::new(&url);
    c.initialize(json!({"roots": {}, "sampling": {}})).await;
    // A plain tools/list (answered from cached pages when nothing hooks it) shows the view too.
    let names = c.tool_names().await;
    for t in ["ev_get-roots-list", "ev_trigger-sampling-request"] {
        assert!(names.iter().any(|n| n == t), "{t} missing: {names:?}");
    }
    let r = c.call_tool("sluice_list_tools", json!({})).await;
    let listed: Vec<String> = r["result"]["structuredContent"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("{r}"))
        .iter()
        .map(|b| b["name"].as_str().unwrap().to_string())
        .collect();
    for t in ["ev_get-roots-list", "ev_trigger-sampling-request"] {
        assert!(listed.iter().any(|n| n == t), "{t} missing: {listed:?}");
    }
    // validate checks the session's own tool against its own schema (`prompt` is a string),
    // directly and through the funnel.
    let want = json!({"code": -32602,
        "message": "Invalid arguments for tool \"ev_trigger-sampling-request\": /prompt: 5 is not of type \"string\""});
    let r = c
        .call_tool("ev_trigger-sampling-request", json!({"prompt": 5}))
        .await;
    assert_eq!(r["error"]["code"], want["code"], "{r}");
    assert_eq!(r["error"]["message"], want["message"], "{r}");
    let r = c
        .call_tool(
            "sluice_run_tool",
            json!({"name": "ev_trigger-sampling-request", "args": {"prompt": 5}}),
        )
        .await;
    assert_eq!(r["error"]["message"], want["message"], "{r}");
}
