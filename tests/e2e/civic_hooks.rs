//! Civic hook servers (built with `@civic/hook-common` from npm, pinned) through the real
//! binary: modify, refuse and answer on client requests and their results and errors, on an
//! upstream's request to the client and the client's reply; 2026-07-28 clients'
//! `server/discover`, `subscriptions/listen` and input rounds; and the explain hook's Civic
//! preset.

use crate::claude_hooks::{
    ask_client, fixture, manifest, node22, node_dir, serve, sluice, write_manifest,
};
use serde_json::{json, Value};
use sluice_e2e::mcp::{finish, Client, SseReader};
use sluice_e2e::tree::Home;
use sluice_e2e::{free_port, wait_for_port, Proc};
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

/// A hook server written with `@civic/hook-common` (npm, pinned), started on loopback in
/// `mode`, in a directory of its own under `home` (where it writes `calls.log`): the process,
/// its port and that directory.
fn civic_server(home: &Home, mode: &str) -> (Proc, u16, PathBuf) {
    civic_script(home, "civic-hook.mjs", mode)
}

/// [`civic_server`] running `script` (in tests/node/hooks).
fn civic_script(home: &Home, script: &str, mode: &str) -> (Proc, u16, PathBuf) {
    let dir = home.path().join(mode);
    std::fs::create_dir_all(&dir).unwrap();
    let port = free_port();
    let mut cmd = Command::new(node22());
    cmd.arg(node_dir().join("hooks").join(script))
        .arg(port.to_string())
        .arg(mode)
        .current_dir(&dir);
    let proc = Proc::spawn(cmd);
    wait_for_port(port, Duration::from_secs(20));
    (proc, port, dir)
}

#[tokio::test]
async fn civic_hook_servers_modify_abort_and_answer() {
    let home = Home::new("cc-civic");
    home.expose(&json!({"upstreams": [
        {"id": "fx", "command": fixture(), "args": ["--stdio"], "expose_all": true}
    ]}));
    let (_m, mport, modify_dir) = civic_server(&home, "modify");
    let (_a, aport, abort_dir) = civic_server(&home, "abort");
    write_manifest(
        &home,
        &json!([
            {"id": "civic-modify", "type": "civic", "url": format!("http://127.0.0.1:{mport}"), "enabled": true},
            {"id": "civic-abort", "type": "civic", "url": format!("http://127.0.0.1:{aport}/"), "enabled": true}
        ]),
    );
    let (_gw, url) = serve(&home, &[]);
    let mut c = Client::new(&url);
    // initialize (request and result) and the client's notification go through both.
    let init = c.initialize(json!({})).await;
    assert_eq!(init["instructions"], "civic was here", "{init}");
    let list = c.request("tools/list", json!({})).await;
    let tools = list["result"]["tools"].as_array().unwrap();
    let echo = tools.iter().find(|t| t["name"] == "fx_echo").unwrap();
    assert!(
        echo["description"]
            .as_str()
            .unwrap()
            .starts_with("[civic] "),
        "{echo}"
    );
    assert!(tools
        .iter()
        .all(|t| t["description"].as_str().unwrap().starts_with("[civic] ")));
    // The call, modified by the first server, passes the second.
    let r = c.call_tool("fx_echo", json!({"x": 1})).await;
    assert_eq!(
        r["result"]["structuredContent"],
        json!({"x": 1, "civic": true}),
        "{r}"
    );
    // The second refuses by throwing an McpError: the client gets its code and message.
    let r = c.call_tool("fx_add", json!({"a": 1, "b": 2})).await;
    assert_eq!(
        r["error"],
        json!({"code": -32600, "message": "Civic says no to fx_add"})
    );
    // A result the second refuses in the response phase: -32031 with its reason.
    let r = c.call_tool("fx_echo", json!({"note": "a secret"})).await;
    assert_eq!(
        r["error"],
        json!({"code": -32031, "message": "Response rejected", "data": {"reason": "the result holds a secret"}})
    );
    // The error procedure: an unknown tool's error (the gateway's -32602) replaced by a result.
    let r = c.call_tool("fx_missing", json!({})).await;
    assert_eq!(
        r["result"],
        json!({"content": [{"type": "text", "text": "civic replaced error -32602"}]}),
        "{r}"
    );
    // Server→client traffic: an upstream's elicitation, changed on its way to the client.
    let r = ask_client(
        "legacy",
        &url,
        "fx_test_elicitation",
        json!({"message": "Your name?"}),
        "allow",
    );
    assert_eq!(r["asked"][0]["message"], "[civic] Your name?", "{r}");
    let calls = std::fs::read_to_string(modify_dir.join("calls.log")).unwrap();
    assert!(
        calls
            .lines()
            .any(|l| l == "processTargetRequest elicitation/create"),
        "{calls}"
    );
    // What the raw client's session caused, up to the SDK client's initialize.
    let calls: Vec<&str> = calls.lines().collect();
    let sdk = calls
        .iter()
        .skip(1)
        .position(|l| l.starts_with("processInitializeResult "))
        .map_or(calls.len(), |p| p + 1);
    let calls = &calls[..sdk];
    assert_eq!(
        calls,
        [
            "processInitializeResult sluice-e2e",
            "processNotification notifications/initialized",
            "processListToolsResult tools/list",
            "processCallToolRequest fx_echo session",
            "processCallToolResult fx_echo",
            "processCallToolRequest fx_add session",
            // The abort's error travels back through the hooks the request reached.
            "processCallToolError fx_add -32600",
            // (The response-phase refusal stops the phase: this server never sees that reply.)
            "processCallToolRequest fx_echo session",
            "processCallToolRequest fx_missing session",
            // Tail → head: the second server replaced the error, so this one sees a result.
            "processCallToolResult fx_missing",
        ]
    );
    let aborts = std::fs::read_to_string(abort_dir.join("calls.log")).unwrap();
    assert!(
        aborts
            .lines()
            .any(|l| l == "processCallToolError fx_missing -32602"),
        "{aborts}"
    );

    // A server that answers: the upstream is not called.
    let home2 = Home::new("cc-civic-respond");
    home2.expose(&json!({"upstreams": [
        {"id": "fx", "command": fixture(), "args": ["--stdio"], "expose_all": true}
    ]}));
    let (_r, rport, _) = civic_server(&home2, "respond");
    // Added with the CLI (a civic hook has no event).
    let civic_url = format!("http://127.0.0.1:{rport}");
    let (ok, stdout, stderr) = sluice(&[
        "hook",
        "add",
        "--home",
        &home2.arg(),
        "--id",
        "civic-respond",
        "--type",
        "civic",
        "--url",
        &civic_url,
        "--enabled",
    ]);
    assert!(ok, "{stderr}");
    assert_eq!(stdout, "added hook civic-respond\n");
    assert_eq!(
        manifest(&home2)["hooks"],
        json!([{"id": "civic-respond", "matcher": "", "type": "civic", "url": civic_url, "enabled": true}])
    );
    let (_gw2, url2) = serve(&home2, &[]);
    let mut c2 = Client::new(&url2);
    c2.initialize(json!({})).await;
    let r = c2.call_tool("fx_echo", json!({"x": 1})).await;
    assert_eq!(
        r["result"],
        json!({"content": [{"type": "text", "text": "answered by civic for fx_echo"}]}),
        "{r}"
    );
}

#[tokio::test]
async fn the_explain_hook_with_civics_preset_and_a_reason_that_is_not_text() {
    let home = Home::new("cc-explain");
    home.expose(&json!({"upstreams": [
        {"id": "fx", "command": fixture(), "args": ["--stdio"], "expose_all": true}
    ]}));
    write_manifest(
        &home,
        &json!([{"id": "explain", "type": "builtin", "builtin": "explain", "options": {"preset": "civic"}, "enabled": true}]),
    );
    let (_gw, url) = serve(&home, &[]);
    let mut c = Client::new(&url);
    c.initialize(json!({})).await;
    let list = c.request("tools/list", json!({})).await;
    for t in list["result"]["tools"].as_array().unwrap() {
        assert_eq!(
            t["inputSchema"]["properties"]["reason"]["description"],
            "A justification for using this tool, explaining how it helps achieve your goal. Should contain the following: GOAL: <Your current goal>, JUSTIFICATION: <how this tool helps achieve the goal>, CHOICE: <why you chose to use this tool over other available tools>."
        );
    }
    let r = c.call_tool("fx_echo", json!({"x": 1, "reason": 42})).await;
    assert_eq!(r["error"]["code"], -32030);
    assert_eq!(
        r["error"]["data"]["reason"],
        "The 'reason' parameter must be a string, not a number: give a concise justification for using this tool, explaining how it helps achieve your goal, as text, and call it again."
    );
    let r = c
        .call_tool("fx_echo", json!({"x": 1, "reason": "GOAL: test"}))
        .await;
    assert_eq!(r["result"]["structuredContent"], json!({"x": 1}), "{r}");
    // A bad option is an error naming the field.
    write_manifest(
        &home,
        &json!([{"id": "explain", "type": "builtin", "builtin": "explain", "options": {"preset": "zato"}, "enabled": true}]),
    );
    let (ok, stdout, _) = sluice(&["check", "--home", &home.arg()]);
    assert!(!ok);
    assert!(
        stdout.contains("hooks[0].options.preset: unknown preset \"zato\" (known: readme, civic)"),
        "{stdout}"
    );
}

/// Civic hook servers on an upstream's request to the client and the client's reply to it, as
/// Civic's passthrough runs them: `processTargetRequest` may change the request, refuse it (the
/// upstream hears why) or answer it (`respond`: the upstream gets that answer and the client is
/// not asked); `processTargetResult` sees the client's answer with the request it answers, and
/// may change it or refuse it (the upstream hears why).
#[tokio::test]
async fn civic_hook_servers_answer_change_or_refuse_an_upstreams_request_and_the_clients_reply() {
    let home = Home::new("cc-civic-target");
    // Pinned to 2025-11-25: its elicitation is a request of its own to the client.
    home.expose(&json!({"upstreams": [
        {"id": "fxl", "command": fixture(), "args": ["--stdio"], "expose_all": true, "era": "handshake"}
    ]}));
    let (_m, mport, modify_dir) = civic_server(&home, "modify");
    let (_a, aport, _) = civic_server(&home, "abort");
    write_manifest(
        &home,
        &json!([
            {"id": "civic-modify", "type": "civic", "url": format!("http://127.0.0.1:{mport}"), "enabled": true},
            {"id": "civic-abort", "type": "civic", "url": format!("http://127.0.0.1:{aport}"), "enabled": true}
        ]),
    );
    let (_gw, url) = serve(&home, &[]);
    // The request is changed on its way to the client, the answer on its way back.
    let r = ask_client(
        "legacy",
        &url,
        "fxl_test_elicitation",
        json!({"message": "Your name?"}),
        "allow",
    );
    assert_eq!(r["asked"][0]["message"], "[civic] Your name?", "{r}");
    assert_eq!(
        r["result"]["text"],
        json!(["User response: action=accept, content={\"allow\":true,\"civic\":true}"]),
        "{r}"
    );
    let calls = std::fs::read_to_string(modify_dir.join("calls.log")).unwrap();
    let target: Vec<&str> = calls
        .lines()
        .filter(|l| l.starts_with("processTarget"))
        .collect();
    assert_eq!(target.len(), 2, "{calls}");
    assert_eq!(target[0], "processTargetRequest elicitation/create");
    // The reply's hook is shown the request it answers, and the id the client saw.
    let rest = target[1]
        .strip_prefix("processTargetResult elicitation/create accept ")
        .unwrap_or_else(|| panic!("{calls}"));
    assert!(!rest.is_empty() && rest != "undefined", "{calls}");
    // The client's answer refused on its way back: the upstream hears why.
    let r = ask_client(
        "legacy",
        &url,
        "fxl_test_elicitation",
        json!({"message": "Your secret?"}),
        "allow",
    );
    assert_eq!(r["asked"][0]["message"], "[civic] Your secret?", "{r}");
    assert_eq!(
        r["result"]["text"],
        json!(["Elicitation not supported or error: MCP error -32031: Response rejected"]),
        "{r}"
    );
    // The request refused on its way to the client (an McpError): the client is not asked,
    // the upstream gets the hook's error.
    let r = ask_client(
        "legacy",
        &url,
        "fxl_test_elicitation",
        json!({"message": "Something forbidden?"}),
        "allow",
    );
    assert_eq!(r["asked"], json!([]), "{r}");
    assert_eq!(
        r["result"]["text"],
        json!(["Elicitation not supported or error: MCP error -32600: Civic will not ask that"]),
        "{r}"
    );

    // A server that answers the upstream's request: the client is never asked.
    let home2 = Home::new("cc-civic-target-respond");
    home2.expose(&json!({"upstreams": [
        {"id": "fxl", "command": fixture(), "args": ["--stdio"], "expose_all": true, "era": "handshake"}
    ]}));
    let (_r, rport, _) = civic_server(&home2, "respond");
    write_manifest(
        &home2,
        &json!([{"id": "civic-respond", "type": "civic", "url": format!("http://127.0.0.1:{rport}"), "enabled": true}]),
    );
    let (_gw2, url2) = serve(&home2, &[]);
    let r = ask_client(
        "legacy",
        &url2,
        "fxl_test_elicitation",
        json!({"message": "Your name?"}),
        "decline",
    );
    assert_eq!(r["asked"], json!([]), "{r}");
    let text = r["result"]["text"][0]
        .as_str()
        .unwrap_or_else(|| panic!("{r}"));
    assert!(
        text.starts_with("User response: action=accept, content={\"response\":\"civic answered "),
        "{r}"
    );
}

/// A tree with the fixture pinned to 2025-11-25 (its elicitation becomes an input round for a
/// modern client) and the hook server of civic-modern.mjs: the tree, the server, its folder.
fn modern_tree(label: &str) -> (Home, Proc, PathBuf) {
    let home = Home::new(label);
    home.expose(&json!({"upstreams": [
        {"id": "fxl", "command": fixture(), "args": ["--stdio"], "expose_all": true, "era": "handshake"}
    ]}));
    let (server, port, dir) = civic_script(&home, "civic-modern.mjs", "modern");
    write_manifest(
        &home,
        &json!([{"id": "civic-modern", "type": "civic", "url": format!("http://127.0.0.1:{port}"), "enabled": true}]),
    );
    (home, server, dir)
}

/// A 2026-07-28 request to `url` (its `_meta` envelope and mirrored headers; the client can
/// answer elicitations): the HTTP response.
async fn modern(url: &str, id: u64, method: &str, mut params: Value) -> reqwest::Response {
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "sluice-e2e", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}},
    });
    let mut rb = reqwest::Client::new()
        .post(url)
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", method);
    if let Some(name) = params["name"].as_str() {
        rb = rb.header("mcp-name", name);
    }
    let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
    rb.body(body.to_string()).send().await.unwrap()
}

/// [`modern`]'s whole answer, a single JSON reply (HTTP 200).
async fn modern_reply(url: &str, id: u64, method: &str, params: Value) -> Value {
    let r = finish(modern(url, id, method, params).await).await;
    assert_eq!(r.status, 200, "{method}: {}", r.body);
    r.reply()
}

/// A call of the fixture's elicitation tool by a 2026-07-28 client: its first round, which must
/// ask for input (the question asked), and the retry answering `answer` (its reply).
async fn modern_elicitation(url: &str, id: u64, message: &str, answer: Value) -> (Value, Value) {
    let params = json!({"name": "fxl_test_elicitation", "arguments": {"message": message}});
    let first = modern_reply(url, id, "tools/call", params.clone()).await;
    assert_eq!(first["result"]["resultType"], "input_required", "{first}");
    let asked = first["result"]["inputRequests"]["sluice-1"].clone();
    let mut retry = params;
    retry["requestState"] = first["result"]["requestState"].clone();
    retry["inputResponses"] = json!({"sluice-1": answer});
    (asked, modern_reply(url, id + 1, "tools/call", retry).await)
}

/// Civic hook servers with 2026-07-28 clients, as with a legacy session: `server/discover` and
/// `subscriptions/listen` reach `processOtherRequest` (and discover's answer
/// `processOtherResult`), an input round's question `processTargetRequest` and the retry's
/// answer `processTargetResult`; a thrown McpError refuses with its code and message. A legacy
/// session's `subscriptions/listen` and `server/discover` reach the same procedures.
#[tokio::test]
async fn civic_hook_servers_see_modern_discovery_listening_and_input_rounds() {
    let (home, _h, dir) = modern_tree("cc-civic-modern");
    let (_gw, url) = serve(&home, &[]);

    // server/discover: the result as the hook changed it.
    let r = modern_reply(&url, 1, "server/discover", json!({})).await;
    assert_eq!(r["result"]["instructions"], "civic saw discover", "{r}");
    assert_eq!(r["result"]["resultType"], "complete");
    assert_eq!(r["result"]["supportedVersions"][0], "2026-07-28");

    // subscriptions/listen let through: the stream opens with its acknowledgement.
    let resp = modern(
        &url,
        2,
        "subscriptions/listen",
        json!({"notifications": {"toolsListChanged": true}}),
    )
    .await;
    assert_eq!(resp.status(), 200);
    let mut events = SseReader::new(resp);
    let (_, ack) = events.next().await.expect("the acknowledgement");
    assert_eq!(
        ack,
        json!({"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged",
               "params": {"notifications": {"toolsListChanged": true},
                          "_meta": {"io.modelcontextprotocol/subscriptionId": 2}}})
    );
    drop(events);
    // Refused by a thrown McpError: its code and message, and no stream.
    let r = modern_reply(
        &url,
        3,
        "subscriptions/listen",
        json!({"notifications": {"promptsListChanged": true}}),
    )
    .await;
    assert_eq!(
        r,
        json!({"jsonrpc": "2.0", "id": 3, "error": {"code": -32042, "message": "no prompt news"}})
    );

    // An input round: the question changed on its way out, the answer on its way back.
    let answer = json!({"action": "accept", "content": {"response": "Ada"}});
    let (asked, done) = modern_elicitation(&url, 10, "Your name?", answer.clone()).await;
    assert_eq!(asked["params"]["message"], "[civic] Your name?", "{asked}");
    assert_eq!(
        done["result"]["content"],
        json!([{"type": "text", "text": "User response: action=accept, content={\"response\":\"Ada\",\"civic\":true}"}]),
        "{done}"
    );
    // The answer refused by an McpError: the upstream gets the hook's error.
    let (_, done) = modern_elicitation(&url, 20, "Your secret?", answer).await;
    assert_eq!(
        done["result"]["content"],
        json!([{"type": "text", "text": "Elicitation not supported or error: MCP error -32044: Civic keeps that answer"}]),
        "{done}"
    );
    // The question refused: no input round, the upstream gets the hook's error.
    let params =
        json!({"name": "fxl_test_elicitation", "arguments": {"message": "Something forbidden?"}});
    let r = modern_reply(&url, 30, "tools/call", params).await;
    assert_eq!(
        r["result"]["content"],
        json!([{"type": "text", "text": "Elicitation not supported or error: MCP error -32043: Civic will not ask that"}]),
        "{r}"
    );

    // A legacy session: the same procedures, the same error.
    let mut c = Client::new(&url);
    c.initialize(json!({})).await;
    let r = c
        .request(
            "subscriptions/listen",
            json!({"notifications": {"promptsListChanged": true}}),
        )
        .await;
    assert_eq!(
        r["error"],
        json!({"code": -32042, "message": "no prompt news"}),
        "{r}"
    );
    let r = c.request("server/discover", json!({})).await;
    assert_eq!(
        r["error"],
        json!({"code": -32601, "message": "Method not found: server/discover"}),
        "{r}"
    );

    let calls = std::fs::read_to_string(dir.join("calls.log")).unwrap();
    let calls: Vec<&str> = calls.lines().collect();
    assert_eq!(
        calls,
        [
            // The hook sees the request without the era's _meta, under the client's id.
            "processOtherRequest server/discover {} 1",
            "processOtherResult server/discover 1",
            r#"processOtherRequest subscriptions/listen {"notifications":{"toolsListChanged":true}} 2"#,
            r#"processOtherRequest subscriptions/listen {"notifications":{"promptsListChanged":true}} 3"#,
            // The refusal's error travels back through the hook, as in a legacy session.
            "processOtherError subscriptions/listen -32042",
            // The input request and the answer, under the input request's key; the call's
            // result once, when it completes (an input_required round is not its result).
            "processCallToolRequest fxl_test_elicitation 10",
            "processTargetRequest elicitation/create Your name? sluice-1",
            "processTargetResult elicitation/create accept sluice-1",
            "processCallToolResult fxl_test_elicitation -",
            "processCallToolRequest fxl_test_elicitation 20",
            "processTargetRequest elicitation/create Your secret? sluice-1",
            "processTargetResult elicitation/create accept sluice-1",
            "processCallToolResult fxl_test_elicitation -",
            "processCallToolRequest fxl_test_elicitation 30",
            "processTargetRequest elicitation/create Something forbidden? sluice-1",
            "processCallToolResult fxl_test_elicitation -",
            // The legacy session.
            r#"processOtherRequest subscriptions/listen {"notifications":{"promptsListChanged":true}} 1"#,
            "processOtherError subscriptions/listen -32042",
            "processOtherRequest server/discover {} 2",
            "processOtherError server/discover -32601",
        ],
        "{calls:#?}"
    );
}

/// The same on the 2026-07-28 era over stdio (`sluice serve --stdio`): `server/discover` as the
/// hook changed it, `subscriptions/listen` let through (its acknowledgement) and refused (the
/// McpError's code and message).
#[test]
fn civic_hook_servers_see_modern_discovery_and_listening_on_stdio() {
    use std::io::{BufRead, Write};
    let (home, _h, dir) = modern_tree("cc-civic-modern-stdio");
    let mut cmd = Command::new(sluice_e2e::bin("sluice"));
    cmd.args(["serve", "--stdio", "--no-admin", "--home", &home.arg()]);
    let mut gw = Proc::spawn_piped(cmd);
    let mut stdin = gw.child.stdin.take().unwrap();
    let mut lines = std::io::BufReader::new(gw.child.stdout.take().unwrap()).lines();
    let meta = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    });
    let mut ask = |id: u64, method: &str, mut params: Value| -> Value {
        params["_meta"] = meta.clone();
        let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        writeln!(stdin, "{body}").unwrap();
        stdin.flush().unwrap();
        // The first line about this request (its reply, or a listen stream's first message).
        loop {
            let line = lines.next().expect("a line").unwrap();
            let v: Value = serde_json::from_str(&line).unwrap();
            let about = v["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"].clone();
            if v["id"] == json!(id) || about == json!(id) {
                return v;
            }
        }
    };
    let d = ask(1, "server/discover", json!({}));
    assert_eq!(d["result"]["instructions"], "civic saw discover", "{d}");
    let ack = ask(
        2,
        "subscriptions/listen",
        json!({"notifications": {"toolsListChanged": true}}),
    );
    assert_eq!(
        ack,
        json!({"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged",
               "params": {"notifications": {"toolsListChanged": true},
                          "_meta": {"io.modelcontextprotocol/subscriptionId": 2}}})
    );
    let r = ask(
        3,
        "subscriptions/listen",
        json!({"notifications": {"promptsListChanged": true}}),
    );
    assert_eq!(
        r,
        json!({"jsonrpc": "2.0", "id": 3, "error": {"code": -32042, "message": "no prompt news"}})
    );
    let calls = std::fs::read_to_string(dir.join("calls.log")).unwrap();
    assert_eq!(
        calls.lines().collect::<Vec<_>>(),
        [
            "processOtherRequest server/discover {} 1",
            "processOtherResult server/discover 1",
            r#"processOtherRequest subscriptions/listen {"notifications":{"toolsListChanged":true}} 2"#,
            r#"processOtherRequest subscriptions/listen {"notifications":{"promptsListChanged":true}} 3"#,
            "processOtherError subscriptions/listen -32042",
        ]
    );
}
