//! Aggregation: tools, prompts, resources and templates of several upstreams under stable
//! names, curated `expose` entries with `as` renames, pagination across upstreams, and resource
//! URIs routed back to their upstream.

use serde_json::{json, Value};
use sluice_e2e::mcp::Client;
use sluice_e2e::tree::Home;
use sluice_e2e::{bin, start_fixture_http, start_sluice};

fn fixture() -> String {
    bin("sluice-fixture").to_string_lossy().into_owned()
}

#[tokio::test]
async fn two_upstreams_stable_names_and_curated_renames() {
    let (_web, web_url) = start_fixture_http(&["--name", "web"]);
    let home = Home::new("agg");
    home.expose(&json!({
        "version": 1,
        "upstreams": [
            {"id": "fx", "transport": "stdio", "command": fixture(), "args": ["--stdio", "--name", "fx"], "expose_all": true},
            {"id": "web", "transport": "http", "url": web_url}
        ],
        "expose": [
            {"upstream": "web", "tool": "echo", "as": "shout", "category": "demo"},
            {"upstream": "web", "tool": "add"},
            {"upstream": "web", "tool": "whoami", "enabled": false}
        ]
    }));
    let (_gw, url) = start_sluice(&["--home", &home.arg()]);
    let mut c = Client::new(&url);
    c.initialize(json!({})).await;
    let names = c.tool_names().await;
    // Every fixture tool of `fx` under fx_<tool>, then web's two curated tools.
    assert!(
        names.iter().take_while(|n| n.starts_with("fx_")).count() >= 20,
        "{names:?}"
    );
    assert!(names.contains(&"fx_test_simple_text".to_string()));
    assert_eq!(&names[names.len() - 2..], ["shout", "web_add"]);
    assert!(!names.iter().any(|n| n == "web_whoami" || n == "web_echo"));

    // Calls route to the right upstream, with the upstream's own tool name.
    let r = c.call_tool("fx_whoami", json!({})).await;
    assert!(r["result"]["content"][0]["text"]
        .as_str()
        .unwrap()
        .starts_with("fx pid="));
    let r = c
        .call_tool(
            "shout",
            json!({"text": "hi", "z": [1, {"deep": true}], "a": null}),
        )
        .await;
    // Arguments reach the upstream unchanged (key order and unknown fields kept).
    assert_eq!(
        r["result"]["content"][0]["text"],
        json!(r#"{"text":"hi","z":[1,{"deep":true}],"a":null}"#)
    );
    let r = c.call_tool("web_add", json!({"a": 1, "b": 2})).await;
    assert_eq!(r["result"]["structuredContent"], json!({"sum": 3}));

    // Tool definitions are forwarded whole, only renamed.
    let list = c.request("tools/list", json!({})).await;
    let shout = list["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "shout")
        .unwrap()
        .clone();
    assert_eq!(shout["inputSchema"]["type"], json!("object"));

    // Prompts are prefixed with the upstream id; prompts/get routes back.
    let prompts = c.request("prompts/list", json!({})).await;
    let pnames: Vec<&str> = prompts["result"]["prompts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert!(
        pnames.contains(&"fx_test_simple_prompt") && pnames.contains(&"web_test_simple_prompt"),
        "{pnames:?}"
    );
    let p = c.request("prompts/get", json!({"name": "web_test_prompt_with_arguments", "arguments": {"arg1": "A", "arg2": "B"}})).await;
    assert_eq!(
        p["result"]["messages"][0]["content"]["text"],
        json!("Prompt with arguments: arg1='A', arg2='B'")
    );
    let r = c.request("prompts/get", json!({"name": "nope"})).await;
    assert_eq!(r["error"]["code"], json!(-32602));

    // Resources: URIs are unchanged; reads route to the upstream that listed them (the first
    // upstream wins a URI both offer), templates too.
    let res = c.request("resources/list", json!({})).await;
    let uris: Vec<&str> = res["result"]["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["uri"].as_str().unwrap())
        .collect();
    assert!(uris.contains(&"test://static-text"), "{uris:?}");
    let r = c
        .request("resources/read", json!({"uri": "test://static-text"}))
        .await;
    assert_eq!(
        r["result"]["contents"][0]["uri"],
        json!("test://static-text")
    );
    let r = c
        .request("resources/read", json!({"uri": "test://template/42/data"}))
        .await;
    assert_eq!(
        r["result"]["contents"][0]["uri"],
        json!("test://template/42/data")
    );
    let t = c.request("resources/templates/list", json!({})).await;
    assert_eq!(
        t["result"]["resourceTemplates"][0]["uriTemplate"],
        json!("test://template/{id}/data")
    );
    let r = c
        .request("resources/read", json!({"uri": "nowhere://x"}))
        .await;
    assert_eq!(r["error"]["code"], json!(-32602));
    assert_eq!(
        r["error"]["message"],
        json!("Resource not found: nowhere://x")
    );

    // completion/complete follows the prompt's route.
    let r = c.request("completion/complete", json!({"ref": {"type": "ref/prompt", "name": "fx_test_prompt_with_arguments"}, "argument": {"name": "arg1", "value": "x"}})).await;
    assert!(r["result"]["completion"]["values"].is_array(), "{r}");

    // logging/setLevel fans out and answers {}.
    let r = c
        .request("logging/setLevel", json!({"level": "debug"}))
        .await;
    assert_eq!(r["result"], json!({}));
    // ping is answered by the gateway.
    assert_eq!(c.request("ping", json!({})).await["result"], json!({}));
}

#[tokio::test]
async fn pagination_spans_upstreams() {
    let home = Home::new("pages");
    home.write("sluice.json", r#"{"page_size": 7}"#);
    home.expose(&json!({"upstreams": [
        {"id": "a", "command": fixture(), "args": ["--stdio", "--many-tools", "5", "--page-size", "4"], "expose_all": true},
        {"id": "b", "command": fixture(), "args": ["--stdio", "--many-tools", "5", "--page-size", "3"], "expose_all": true}
    ]}));
    let (_gw, url) = start_sluice(&["--home", &home.arg()]);
    let mut c = Client::new(&url);
    c.initialize(json!({})).await;
    // Walk the pages by hand: each is at most 7 long, and together they are every tool once.
    let mut all: Vec<String> = Vec::new();
    let mut cursor: Option<String> = None;
    let mut pages = 0;
    loop {
        let params = cursor
            .as_ref()
            .map(|c| json!({"cursor": c}))
            .unwrap_or(json!({}));
        let r = c.request("tools/list", params).await;
        let tools = r["result"]["tools"].as_array().unwrap();
        assert!(tools.len() <= 7);
        all.extend(
            tools
                .iter()
                .map(|t| t["name"].as_str().unwrap().to_string()),
        );
        pages += 1;
        match r["result"]["nextCursor"].as_str() {
            Some(n) => cursor = Some(n.to_string()),
            None => break,
        }
    }
    let a: Vec<_> = all.iter().filter(|n| n.starts_with("a_")).collect();
    let b: Vec<_> = all.iter().filter(|n| n.starts_with("b_")).collect();
    assert_eq!(a.len(), b.len());
    assert!(a.iter().any(|n| *n == "a_bulk_4") && b.iter().any(|n| *n == "b_bulk_4"));
    assert_eq!(all.len(), a.len() + b.len());
    assert_eq!(pages, all.len().div_ceil(7));
    let unique: std::collections::HashSet<_> = all.iter().collect();
    assert_eq!(unique.len(), all.len());
}

#[tokio::test]
async fn ids_from_different_clients_never_collide_upstream() {
    let home = Home::new("ids");
    home.expose(&json!({"upstreams": [
        {"id": "fx", "command": fixture(), "args": ["--stdio"], "expose_all": true}
    ]}));
    let (_gw, url) = start_sluice(&["--home", &home.arg()]);
    let mut c1 = Client::new(&url);
    let mut c2 = Client::new(&url);
    c1.initialize(json!({})).await;
    c2.initialize(json!({})).await;
    // The same id, at the same time, from two sessions, to one shared stdio process.
    let f1 = c1.post(json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "fx_echo", "arguments": {"who": "one"}}}));
    let f2 = c2.post(json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "fx_echo", "arguments": {"who": "two"}}}));
    let (r1, r2) = tokio::join!(f1, f2);
    let (r1, r2): (Value, Value) = (r1.reply(), r2.reply());
    assert_eq!(r1["id"], json!(7));
    assert_eq!(r2["id"], json!(7));
    assert_eq!(r1["result"]["structuredContent"], json!({"who": "one"}));
    assert_eq!(r2["result"]["structuredContent"], json!({"who": "two"}));
    // String ids come back as strings.
    let r = c1.post(json!({"jsonrpc": "2.0", "id": "abc", "method": "tools/call", "params": {"name": "fx_echo", "arguments": {}}})).await;
    assert_eq!(r.reply()["id"], json!("abc"));
}

/// A zero-dependency stdio MCP server in the shape of toolfunnel's bundled mock upstream
/// (`ping`, `add`, `echo`).
const MOCK_UPSTREAM_JS: &str = r#"
const readline = require('readline');
const rl = readline.createInterface({ input: process.stdin });
const tools = [
  { name: 'ping', description: 'Replies pong', inputSchema: { type: 'object', properties: {} } },
  { name: 'add', description: 'Adds a and b', inputSchema: { type: 'object', properties: { a: { type: 'number' }, b: { type: 'number' } } } },
  { name: 'echo', description: 'Echoes text', inputSchema: { type: 'object', properties: { text: { type: 'string' } } } },
];
const send = (m) => process.stdout.write(JSON.stringify(m) + '\n');
rl.on('line', (line) => {
  const msg = JSON.parse(line);
  if (msg.id === undefined) return;
  const ok = (result) => send({ jsonrpc: '2.0', id: msg.id, result });
  if (msg.method === 'initialize') return ok({ protocolVersion: msg.params.protocolVersion, capabilities: { tools: {} }, serverInfo: { name: 'mock-upstream', version: '0.0.1' } });
  if (msg.method === 'tools/list') return ok({ tools });
  if (msg.method === 'tools/call') {
    const a = msg.params.arguments || {};
    if (msg.params.name === 'ping') return ok({ content: [{ type: 'text', text: 'pong' }] });
    if (msg.params.name === 'add') return ok({ content: [{ type: 'text', text: String(a.a + a.b) }] });
    if (msg.params.name === 'echo') return ok({ content: [{ type: 'text', text: a.text }] });
  }
  send({ jsonrpc: '2.0', id: msg.id, error: { code: -32601, message: 'no' } });
});
"#;

#[tokio::test]
async fn a_toolfunnel_expose_tree_runs_unchanged() {
    // toolfunnel's own example, byte for byte in shape: a relative script path resolved inside the
    // tree, one curated tool renamed with `as`.
    let home = Home::new("toolfunnel");
    home.write("mcp/servers/mock-upstream/server.js", MOCK_UPSTREAM_JS);
    home.write(
        "mcp/expose.json",
        r#"{
  "version": 1,
  "upstreams": [
    {
      "id": "mock",
      "transport": "stdio",
      "command": "node",
      "args": ["mcp/servers/mock-upstream/server.js"],
      "env": {},
      "enabled": true,
      "description": "Bundled demo upstream MCP (zero-dependency stdio): ping, add, echo."
    }
  ],
  "expose": [
    {
      "upstream": "mock",
      "tool": "ping",
      "as": "mock_ping",
      "category": "demo",
      "enabled": true
    }
  ]
}"#,
    );
    // Run from somewhere else: the path must still resolve against the tree.
    let (_gw, url) = start_sluice(&["--home", &home.arg()]);
    let mut c = Client::new(&url);
    c.initialize(json!({})).await;
    assert_eq!(c.tool_names().await, ["mock_ping"]);
    let r = c.call_tool("mock_ping", json!({})).await;
    assert_eq!(r["result"]["content"][0]["text"], json!("pong"));
    // Tools not curated are not listed and not callable by their upstream name.
    assert_eq!(
        c.call_tool("mock_add", json!({"a": 1, "b": 2})).await["error"]["code"],
        json!(-32602)
    );
}
