//! Endpoints (`mcp/endpoints.json`) through the real binary, in front of the fixture upstream
//! and the reference filesystem server (`@modelcontextprotocol/server-filesystem`, installed by
//! `scripts/test`): two endpoints beside `/mcp`, each serving what it selects in both eras (a
//! call outside it is an unknown tool), with its own access rules, rate limit, discovery,
//! instructions and serverInfo name; sessions bound to their endpoint; the audit line and
//! `/metrics` naming it; endpoints added, changed and removed by a live reload; and
//! `sluice serve --stdio --endpoint`.

use crate::interop::{node22, node_dir, node_module_file, ts_client};
use serde_json::{json, Value};
use sluice_e2e::mcp::{Client, SseReader};
use sluice_e2e::modern_client as modern;
use sluice_e2e::tree::Home;
use sluice_e2e::{bin, free_port, start_sluice, Proc};
use std::io::{BufRead, BufReader, Write};
use std::process::Command;
use std::time::{Duration, Instant};

const ADMIN_TOKEN: &str = "endpoints-admin-token-0123456789";

/// The filesystem server's tools, under the `fs_` prefix, in its order.
const FS_TOOLS: [&str; 14] = [
    "fs_read_file",
    "fs_read_text_file",
    "fs_read_media_file",
    "fs_read_multiple_files",
    "fs_write_file",
    "fs_edit_file",
    "fs_create_directory",
    "fs_list_directory",
    "fs_list_directory_with_sizes",
    "fs_directory_tree",
    "fs_move_file",
    "fs_search_files",
    "fs_get_file_info",
    "fs_list_allowed_directories",
];

/// A tree with the fixture (`fix`) and the filesystem server (`fs`, over `files/`), every tool
/// exposed, the audit log on, and `endpoints` as `mcp/endpoints.json`.
fn home(label: &str, endpoints: &Value, settings: Value) -> Home {
    home_with(label, endpoints, settings, None)
}

/// [`home`], with `more` as a third upstream after the two.
fn home_with(label: &str, endpoints: &Value, settings: Value, more: Option<Value>) -> Home {
    let home = Home::new(label);
    home.write("files/readme.txt", "hello\n");
    let files = home.path().join("files").to_string_lossy().into_owned();
    let server = node_dir()
        .join("node_modules/@modelcontextprotocol/server-filesystem/dist/index.js")
        .to_string_lossy()
        .into_owned();
    let mut upstreams = vec![
        json!({"id": "fix", "command": bin("sluice-fixture").to_string_lossy(), "args": ["--stdio"], "expose_all": true}),
        json!({"id": "fs", "command": node22().to_string_lossy(), "args": [server, files], "expose_all": true}),
    ];
    upstreams.extend(more);
    home.expose(&json!({"version": 1, "upstreams": upstreams}));
    home.write("mcp/endpoints.json", &endpoints.to_string());
    home.write("logs/log.config.json", r#"{"enabled": true}"#);
    home.write("sluice.json", &settings.to_string());
    home
}

/// `support`: three tools by name, one of them denied by its own rule, a rate limit of its own,
/// its own instructions and serverInfo name. `coding`: the filesystem server, whole.
fn two_endpoints() -> Value {
    json!({"version": 1, "endpoints": [
        {"name": "support", "tools": ["fix_add", "fix_echo", "fs_list_allowed_directories"],
         "rules": [{"effect": "deny", "tools": ["fix_echo"]}],
         "hooks": [{"id": "support-limit", "type": "builtin", "builtin": "rate-limit",
                    "options": {"per_tool": {"fix_add": {"rate": 3, "per": "minute", "burst": 3}}}}],
         "instructions": "Help customers.", "server_name": "support-gw"},
        {"name": "coding", "upstreams": ["fs"]}
    ]})
}

fn names(list: &Value) -> Vec<String> {
    names_of(list, "tools")
}

async fn session(url: &str) -> Client {
    let mut c = Client::new(url);
    c.initialize(json!({})).await;
    c
}

/// Wait (at most 20 s) until `f` says so.
async fn until<F: std::future::Future<Output = bool>>(what: &str, mut f: impl FnMut() -> F) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !f().await {
        assert!(Instant::now() < deadline, "not within 20 s: {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A 2026-07-28 `subscriptions/listen` stream for tools/list_changed at `url`, past its
/// acknowledgement.
async fn listen(url: &str) -> SseReader {
    let body = json!({"jsonrpc": "2.0", "id": 42, "method": "subscriptions/listen", "params": {
        "notifications": {"toolsListChanged": true},
        "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                  "io.modelcontextprotocol/clientInfo": {"name": "sluice-e2e", "version": "1"},
                  "io.modelcontextprotocol/clientCapabilities": {}}}});
    let resp = reqwest::Client::new()
        .post(url)
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "subscriptions/listen")
        .body(body.to_string())
        .send()
        .await
        .expect("POST subscriptions/listen");
    assert_eq!(resp.status(), 200);
    let mut events = SseReader::new(resp);
    let (_, ack) = events.next().await.expect("the acknowledgement");
    assert_eq!(
        ack["method"], "notifications/subscriptions/acknowledged",
        "{ack}"
    );
    events
}

/// GET `path` on the admin listener at `admin`, with the token: the body.
async fn admin_get(admin: &str, path: &str) -> String {
    let r = reqwest::Client::new()
        .get(format!("http://{admin}{path}"))
        .bearer_auth(ADMIN_TOKEN)
        .send()
        .await
        .expect("GET on the admin listener");
    assert_eq!(r.status(), 200, "GET {path}");
    r.text().await.expect("a body")
}

/// The audit log's lines so far.
fn audit(home: &Home) -> Vec<Value> {
    std::fs::read_to_string(home.path().join("logs/audit.jsonl"))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn endpoints_serve_only_what_they_select_in_both_eras() {
    let admin = format!("127.0.0.1:{}", free_port());
    let home = home(
        "endpoints-isolation",
        &two_endpoints(),
        json!({"admin_token": ADMIN_TOKEN}),
    );
    let (_gw, url) = start_sluice(&["--home", &home.arg(), "--admin", &admin]);
    let (support, coding) = (format!("{url}/support"), format!("{url}/coding"));

    // A handshake session on each: each lists what it selects, /mcp lists everything.
    let mut s = Client::new(&support);
    let init = s.initialize(json!({})).await;
    assert_eq!(init["serverInfo"]["name"], "support-gw");
    assert_eq!(init["instructions"], "Help customers.");
    assert_eq!(
        s.tool_names().await,
        ["fix_add", "fs_list_allowed_directories"]
    );
    let c = session(&coding).await;
    assert_eq!(c.tool_names().await, FS_TOOLS);
    let root = session(&url).await;
    let all = root.tool_names().await;
    for t in ["fix_add", "fix_echo", "fs_read_text_file"] {
        assert!(all.contains(&t.to_string()), "{t} on /mcp: {all:?}");
    }
    let init = Client::new(&url).initialize(json!({})).await;
    assert_eq!(init["serverInfo"]["name"], "sluice");

    // A call outside the endpoint, or denied by its own rule, is an unknown tool; inside, it runs.
    let unknown = |name: &str| json!({"code": -32602, "message": format!("Unknown tool: {name}")});
    assert_eq!(
        s.call_tool("fix_echo", json!({"message": "hi"})).await["error"],
        unknown("fix_echo")
    );
    assert_eq!(
        s.call_tool("fs_read_text_file", json!({"path": "x"})).await["error"],
        unknown("fs_read_text_file")
    );
    assert_eq!(
        c.call_tool("fix_add", json!({"a": 1, "b": 2})).await["error"],
        unknown("fix_add")
    );
    let r = s.call_tool("fix_add", json!({"a": 1, "b": 2})).await;
    assert_eq!(r["result"]["structuredContent"], json!({"sum": 3}), "{r}");
    let r = c.call_tool("fs_list_allowed_directories", json!({})).await;
    assert!(r["result"]["content"][0]["text"]
        .as_str()
        .is_some_and(|t| t.contains("files")));
    // /mcp is not bound by an endpoint's rules.
    let r = root.call_tool("fix_echo", json!({"message": "hi"})).await;
    assert_eq!(
        r["result"]["structuredContent"],
        json!({"message": "hi"}),
        "{r}"
    );

    // A session belongs to its endpoint: on another URL it is unknown (404).
    let elsewhere = |client: &Client, to: &str| {
        let mut other = Client::new(to);
        other.session = client.session.clone();
        other
    };
    let list = json!({"jsonrpc": "2.0", "id": 9, "method": "tools/list"});
    assert_eq!(elsewhere(&s, &url).post(list.clone()).await.status, 404);
    assert_eq!(elsewhere(&s, &coding).post(list.clone()).await.status, 404);
    assert_eq!(
        elsewhere(&root, &support).post(list.clone()).await.status,
        404
    );
    let nope = Client::new(&format!("{url}/nope"))
        .post(json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}))
        .await;
    assert_eq!(nope.status, 404, "{}", nope.body);

    // The admin page's overview lists the endpoints and their live sessions.
    let overview: Value =
        serde_json::from_str(&admin_get(&admin, "/api/overview").await).expect("JSON");
    assert_eq!(overview["endpoints"][0]["path"], "/mcp/support");
    assert_eq!(
        overview["endpoints"][0]["tools_listed"], 3,
        "selected (one hidden by its rule)"
    );
    assert_eq!(overview["endpoints"][0]["sessions"], 1);
    assert_eq!(overview["endpoints"][1]["sessions"], 1);
    assert_eq!(overview["endpoints"][1]["tools_listed"], FS_TOOLS.len());

    // The 2026-07-28 era: each request judged by the endpoint in its URL.
    let (code, info, err) = modern(&support, &["info"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(info["protocolVersion"], "2026-07-28", "{info}");
    assert_eq!(
        info["serverInfo"]["name"], "support-gw",
        "server/discover: {info}"
    );
    assert_eq!(info["instructions"], "Help customers.");
    let (code, list, err) = modern(&support, &["tools"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(names(&list), ["fix_add", "fs_list_allowed_directories"]);
    let (code, _, err) = modern(&support, &["call", "fix_echo", "message=hi"]);
    assert_eq!(code, 1);
    assert!(
        err.contains("error -32602: Unknown tool: fix_echo"),
        "{err}"
    );
    let (code, _, err) = modern(&coding, &["call", "fix_add", "a=1", "b=2"]);
    assert_eq!(code, 1);
    assert!(err.contains("error -32602: Unknown tool: fix_add"), "{err}");
    let (code, r, err) = modern(&support, &["call", "fix_add", "a=2", "b=3"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(r["structuredContent"], json!({"sum": 5}));
    assert_eq!(
        r["_meta"]["io.modelcontextprotocol/serverInfo"]["name"], "support-gw",
        "{r}"
    );
    let (code, list, err) = modern(&url, &["tools"]);
    assert_eq!(code, 0, "{err}");
    assert!(names(&list).contains(&"fix_echo".to_string()));

    // support's own rate limit: fix_add three times a minute there (two calls so far), and
    // /mcp is not limited by it.
    let r = s.call_tool("fix_add", json!({"a": 1, "b": 1})).await;
    assert_eq!(r["result"]["structuredContent"], json!({"sum": 2}), "{r}");
    let r = s.call_tool("fix_add", json!({"a": 1, "b": 1})).await;
    assert_eq!(r["error"]["code"], -32029, "{r}");
    for _ in 0..4 {
        let r = root.call_tool("fix_add", json!({"a": 1, "b": 1})).await;
        assert_eq!(r["result"]["structuredContent"], json!({"sum": 2}), "{r}");
    }

    // The audit line names the endpoint (and /mcp's names none). Every fix_add line is waited
    // for (coding's two unknown, support's three ok and one refused, /mcp's four): the audit
    // log is written behind the replies.
    until("the audit lines", || async {
        audit(&home)
            .iter()
            .filter(|l| l["tool"] == "fix_add")
            .count()
            >= 10
    })
    .await;
    let lines = audit(&home);
    let on = |e: Option<&str>, outcome: &str| {
        lines
            .iter()
            .filter(|l| {
                l["tool"] == "fix_add"
                    && l["outcome"] == outcome
                    && l.get("endpoint").and_then(Value::as_str) == e
            })
            .count()
    };
    assert_eq!(on(Some("support"), "ok"), 3, "{lines:#?}");
    assert_eq!(on(Some("support"), "refused"), 1, "{lines:#?}");
    assert_eq!(on(None, "ok"), 4, "{lines:#?}");
    assert!(lines.iter().any(|l| l["tool"] == "fix_echo"
        && l["endpoint"] == "support"
        && l["outcome"] == "refused"));

    // /metrics counts each endpoint's exchanges.
    let metrics = admin_get(&admin, "/metrics").await;
    assert!(
        metrics.contains(
            "sluice_endpoint_calls_total{endpoint=\"support\",method=\"tools/call\",outcome=\"ok\"} 3"
        ),
        "{metrics}"
    );
    assert!(metrics.contains(
        "sluice_endpoint_calls_total{endpoint=\"support\",method=\"tools/call\",outcome=\"refused\"} "
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn search_discovery_on_an_endpoint_finds_only_its_tools() {
    let endpoints = json!({"version": 1, "endpoints": [
        {"name": "coding", "upstreams": ["fs"], "discovery": "search"}
    ]});
    let home = home("endpoints-search", &endpoints, json!({"tool_search": true}));
    let (_gw, url) = start_sluice(&["--home", &home.arg(), "--no-admin"]);
    let coding = format!("{url}/coding");
    let c = session(&coding).await;
    let list = c.request("tools/list", json!({})).await;
    let tools = list["result"]["tools"].as_array().unwrap();
    let listed: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(listed, ["sluice_run_tool", "sluice_search_tools"]);
    // Its description counts the endpoint's tools and servers, not the gateway's.
    let search = &tools[1]["description"];
    assert!(
        search.as_str().unwrap().starts_with(&format!(
            "Search the {} tools this gateway reaches, from 1 server (fs),",
            FS_TOOLS.len()
        )),
        "{search}"
    );
    // The fixture's fix_add is the best match on /mcp; on the endpoint it is never found.
    let root = session(&url).await;
    let query = |q: &str, limit: u64| json!({"query": q, "limit": limit});
    let r = root
        .call_tool("sluice_search_tools", query("add two numbers", 1))
        .await;
    assert_eq!(names(&r["result"]["structuredContent"]), ["fix_add"], "{r}");
    let r = c
        .call_tool("sluice_search_tools", query("add two numbers", 50))
        .await;
    assert_eq!(
        names(&r["result"]["structuredContent"]),
        Vec::<String>::new(),
        "{r}"
    );
    let r = c
        .call_tool("sluice_search_tools", query("directory", 50))
        .await;
    let found = names(&r["result"]["structuredContent"]);
    assert!(
        found.len() >= 4 && found.iter().all(|n| n.starts_with("fs_")),
        "only the endpoint's tools: {found:?}"
    );
    let r = c
        .call_tool("sluice_search_tools", query("list allowed directories", 1))
        .await;
    assert_eq!(
        names(&r["result"]["structuredContent"]),
        ["fs_list_allowed_directories"]
    );
    // Search, then run: the endpoint's tool runs, another's is unknown.
    let run = |name: &str, args: Value| json!({"name": name, "args": args});
    let r = c
        .call_tool(
            "sluice_run_tool",
            run("fs_list_allowed_directories", json!({})),
        )
        .await;
    let text = r["result"]["content"][0]["text"].as_str().unwrap_or("");
    assert!(text.contains("files"), "{r}");
    let r = c
        .call_tool("sluice_run_tool", run("fix_add", json!({"a": 1, "b": 2})))
        .await;
    assert_eq!(r["error"]["message"], "Unknown tool: fix_add", "{r}");
    // The same for a 2026-07-28 client.
    let call = |url: &str, q: &str, limit: &str| {
        let (code, r, err) = modern(
            url,
            &[
                "call",
                "sluice_search_tools",
                &format!("query={q}"),
                &format!("limit={limit}"),
            ],
        );
        assert_eq!(code, 0, "{err}");
        names(&r["structuredContent"])
    };
    assert_eq!(call(&coding, "add two numbers", "50"), Vec::<String>::new());
    let found = call(&coding, "directory", "50");
    assert!(
        found.len() >= 4 && found.iter().all(|n| n.starts_with("fs_")),
        "{found:?}"
    );
    assert_eq!(call(&url, "add two numbers", "1"), ["fix_add"]);
    // /mcp keeps every tool in its list.
    let listed = root.tool_names().await;
    assert!(
        listed.contains(&"fix_add".to_string()) && listed.contains(&"fs_read_file".to_string())
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_reload_adds_changes_and_removes_endpoints() {
    let first = json!({"version": 1, "endpoints": [{"name": "support", "tools": ["fix_add"]}]});
    let home = home("endpoints-reload", &first, json!({}));
    let (_gw, url) = start_sluice(&["--home", &home.arg(), "--no-admin"]);
    let (support, coding) = (format!("{url}/support"), format!("{url}/coding"));
    let s = session(&support).await;
    assert_eq!(s.tool_names().await, ["fix_add"]);
    let mut get = SseReader::new(s.open_get(None).await);
    let mut support_listen = listen(&support).await;
    let mut root_listen = listen(&url).await;
    // coding does not exist yet.
    let probe = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}});
    assert_eq!(Client::new(&coding).post(probe.clone()).await.status, 404);

    // Add coding, and give support one more tool.
    home.write(
        "mcp/endpoints.json",
        &json!({"version": 1, "endpoints": [
            {"name": "support", "tools": ["fix_add", "fix_echo"]},
            {"name": "coding", "upstreams": ["fs"]}
        ]})
        .to_string(),
    );
    until("coding is served", || {
        let (coding, probe) = (coding.clone(), probe.clone());
        async move { Client::new(&coding).post(probe).await.status == 200 }
    })
    .await;
    // support's session hears that its tools changed (only they), and lists the new one.
    let (_, note) = get.next().await.expect("an event");
    assert_eq!(note["method"], "notifications/tools/list_changed", "{note}");
    // So does a 2026-07-28 listen stream opened on support, and not one opened on /mcp, whose
    // lists did not change (both are told at once: one is told nothing).
    let (_, note) = support_listen.next().await.expect("an event");
    assert_eq!(note["method"], "notifications/tools/list_changed", "{note}");
    let nothing = tokio::time::timeout(Duration::from_millis(500), root_listen.next()).await;
    assert!(nothing.is_err(), "/mcp's listen stream heard {nothing:?}");
    assert_eq!(s.tool_names().await, ["fix_echo", "fix_add"]);
    let c = session(&coding).await;
    assert_eq!(c.tool_names().await, FS_TOOLS);

    // Remove support: its session ends (its next request is 404, its GET stream ends), so do
    // the listen streams opened on it, and it cannot be begun again; coding goes on.
    home.write(
        "mcp/endpoints.json",
        &json!({"version": 1, "endpoints": [{"name": "coding", "upstreams": ["fs"]}]}).to_string(),
    );
    let list = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/list"});
    until("support's session ends", || {
        let (s, list) = (&s, list.clone());
        async move { s.post(list).await.status == 404 }
    })
    .await;
    let next = get.next().await;
    assert!(next.is_none(), "the GET stream ended, not {next:?}");
    // So does the 2026-07-28 listen stream opened on support, with nothing more on it; /mcp's
    // stays open.
    let next = support_listen.next().await;
    assert!(
        next.is_none(),
        "support's listen stream ended, not {next:?}"
    );
    let open = tokio::time::timeout(Duration::from_millis(500), root_listen.next()).await;
    assert!(
        open.is_err(),
        "/mcp's listen stream is open and silent: {open:?}"
    );
    assert_eq!(Client::new(&support).post(probe).await.status, 404);
    assert_eq!(c.tool_names().await, FS_TOOLS);

    // An invalid file is refused whole, naming the file and the field (sluice check says the
    // same), and what runs stays: coding keeps its session and its tools.
    home.write(
        "mcp/endpoints.json",
        &json!({"version": 1, "endpoints": [
            {"name": "coding", "upstreams": ["fs"]}, {"name": "coding", "tools": ["x"]}
        ]})
        .to_string(),
    );
    let out = Command::new(bin("sluice"))
        .args(["check", "--home", &home.arg()])
        .output()
        .expect("run sluice check");
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    let file = home.path().join("mcp/endpoints.json");
    assert!(
        text.contains(&format!(
            "error: {}: endpoints[1].name: duplicate endpoint name \"coding\"",
            file.display()
        )),
        "{text}"
    );
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(c.tool_names().await, FS_TOOLS);
    let mut again = Client::new(&coding);
    again.initialize(json!({})).await;
    // A valid file again: sluice check names the endpoints it serves.
    home.write(
        "mcp/endpoints.json",
        &json!({"version": 1, "endpoints": [{"name": "coding", "upstreams": ["fs"]}]}).to_string(),
    );
    let out = Command::new(bin("sluice"))
        .args(["check", "--home", &home.arg()])
        .output()
        .expect("run sluice check");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("endpoint coding: served at /mcp/coding\n"),
        "{text}"
    );
}

#[test]
fn serve_stdio_serves_one_endpoint() {
    let home = home("endpoints-stdio", &two_endpoints(), json!({}));
    let mut cmd = Command::new(bin("sluice"));
    cmd.args([
        "serve",
        "--stdio",
        "--home",
        &home.arg(),
        "--endpoint",
        "support",
    ]);
    let mut p = Proc::spawn_piped(cmd);
    let mut stdin = p.child.stdin.take().unwrap();
    let mut out = BufReader::new(p.child.stdout.take().unwrap());
    let mut ask = |msg: Value| -> Value {
        writeln!(stdin, "{msg}").unwrap();
        let mut line = String::new();
        out.read_line(&mut line).expect("a line");
        serde_json::from_str(&line).expect("JSON")
    };
    let init = ask(
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}),
    );
    assert_eq!(init["result"]["serverInfo"]["name"], "support-gw", "{init}");
    let list = ask(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}));
    assert_eq!(
        names(&list["result"]),
        ["fix_add", "fs_list_allowed_directories"]
    );
    let r = ask(json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                       "params": {"name": "fs_read_text_file", "arguments": {"path": "x"}}}));
    assert_eq!(
        r["error"]["message"], "Unknown tool: fs_read_text_file",
        "{r}"
    );
    let r = ask(json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call",
                       "params": {"name": "fix_add", "arguments": {"a": 20, "b": 22}}}));
    assert_eq!(r["result"]["structuredContent"], json!({"sum": 42}), "{r}");
    drop(p);

    // An endpoint the file does not have: nothing is served, and the error names it.
    let out = Command::new(bin("sluice"))
        .args([
            "serve",
            "--stdio",
            "--home",
            &home.arg(),
            "--endpoint",
            "nope",
        ])
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run sluice");
    assert_ne!(out.status.code(), Some(0));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--endpoint \"nope\": mcp/endpoints.json has no endpoint of that name"),
        "{err}"
    );
    assert!(out.stdout.is_empty());
}

/// Calls keep running on an endpoint while reloads change it (its instructions, its tools, a hook
/// of its own): none is lost or fails, in either era.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_on_an_endpoint_go_on_through_reloads() {
    let version = |n: u32, extra: Value| {
        let mut e = json!({"name": "support", "tools": ["fix_add"], "instructions": format!("version {n}")});
        e.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        json!({"version": 1, "endpoints": [e]})
    };
    let home = home("endpoints-under-load", &version(0, json!({})), json!({}));
    let (_gw, url) = start_sluice(&["--home", &home.arg(), "--no-admin"]);
    let support = format!("{url}/support");
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut callers = Vec::new();
    for n in 0..3u64 {
        let (support, stop) = (support.clone(), stop.clone());
        callers.push(tokio::spawn(async move {
            let c = session(&support).await;
            let mut done = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let r = c.call_tool("fix_add", json!({"a": n, "b": done})).await;
                assert_eq!(
                    r["result"]["structuredContent"],
                    json!({"sum": n + done}),
                    "{r}"
                );
                done += 1;
            }
            done
        }));
    }
    let modern_caller = {
        let (support, stop) = (support.clone(), stop.clone());
        tokio::task::spawn_blocking(move || {
            let mut done = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let (code, r, err) =
                    modern(&support, &["call", "fix_add", "a=1", &format!("b={done}")]);
                assert_eq!(code, 0, "{err}");
                assert_eq!(r["structuredContent"], json!({"sum": 1 + done}), "{r}");
                done += 1;
            }
            done
        })
    };
    let changes = [
        version(1, json!({})),
        version(2, json!({"tools": ["fix_add", "fix_echo"]})),
        version(
            3,
            json!({"hooks": [{"id": "support-pii", "type": "builtin", "builtin": "pii"}]}),
        ),
        version(
            4,
            json!({"rules": [{"effect": "deny", "tools": ["fix_echo"]}]}),
        ),
    ];
    for (n, change) in changes.iter().enumerate() {
        tokio::time::sleep(Duration::from_millis(600)).await;
        home.write("mcp/endpoints.json", &change.to_string());
        let want = format!("version {}", n + 1);
        until("the reload is in force", || {
            let (support, want) = (support.clone(), want.clone());
            async move { Client::new(&support).initialize(json!({})).await["instructions"] == want }
        })
        .await;
    }
    tokio::time::sleep(Duration::from_millis(600)).await;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let mut calls = 0;
    for c in callers {
        calls += c.await.expect("a caller");
    }
    let modern_calls = modern_caller.await.expect("the modern caller");
    assert!(calls > 0 && modern_calls > 0, "{calls} / {modern_calls}");
    println!(
        "{calls} handshake-era and {modern_calls} 2026-07-28 calls through 4 reloads, none lost"
    );
}

/// Across replicas: three replicas of one tree and one cluster key, Redis between them. A
/// session begun on `/mcp/support` at one replica is served at another as support's (its
/// sealed id carries the endpoint): the same list, a tool outside it unknown, and on `/mcp`
/// 404.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn any_replica_serves_a_session_on_its_endpoint() {
    let home = crate::cluster::fixture_home("endpoints-cluster");
    home.write(
        "mcp/endpoints.json",
        &json!({"version": 1, "endpoints": [{"name": "support", "tools": ["fx_add"]}]}).to_string(),
    );
    let cluster = crate::cluster::Cluster::start("endpoints-cluster", home, json!({}));
    let at = |i: usize, path: &str| format!("{}{path}", cluster.replicas[i].url());
    let mut first = Client::new(&at(0, "/support"));
    first.initialize(json!({})).await;
    assert_eq!(first.tool_names().await, ["fx_add"]);
    let id = first.session.clone().expect("a session id");
    let on = |url: String| {
        let mut c = Client::new(&url);
        c.session = Some(id.clone());
        c
    };
    for i in [1, 2] {
        let c = on(at(i, "/support"));
        assert_eq!(c.tool_names().await, ["fx_add"], "replica {i}");
        let r = c.call_tool("fx_echo", json!({"message": "hi"})).await;
        assert_eq!(
            r["error"]["message"], "Unknown tool: fx_echo",
            "replica {i}: {r}"
        );
        let r = c.call_tool("fx_add", json!({"a": 1, "b": 2})).await;
        assert_eq!(
            r["result"]["structuredContent"],
            json!({"sum": 3}),
            "replica {i}: {r}"
        );
        let list = json!({"jsonrpc": "2.0", "id": 5, "method": "tools/list"});
        let r = on(at(i, "")).post(list).await;
        assert_eq!(
            (r.status, r.body.as_str()),
            (404, crate::cluster::NOT_FOUND),
            "replica {i}"
        );
    }
    assert_eq!(cluster.taken_up_by(&id), 2);
}

/// Traces say which endpoint: a request's span carries `sluice.endpoint` on `/mcp/<name>` and
/// none on `/mcp` (a local OTLP/HTTP receiver collects what the gateway exports).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spans_name_the_endpoint() {
    type Bodies = std::sync::Arc<std::sync::Mutex<Vec<Value>>>;
    let bodies: Bodies = Default::default();
    let app = {
        let bodies = bodies.clone();
        axum::Router::new().route(
            "/v1/traces",
            axum::routing::post(move |body: axum::body::Bytes| {
                let bodies = bodies.clone();
                async move {
                    let v: Value = serde_json::from_slice(&body).expect("OTLP JSON");
                    bodies.lock().unwrap().push(v);
                    axum::Json(json!({}))
                }
            }),
        )
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let receiver = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let endpoints = json!({"version": 1, "endpoints": [{"name": "support", "tools": ["fix_add"]}]});
    let home = home(
        "endpoints-spans",
        &endpoints,
        json!({"telemetry": {"otlp_endpoint": receiver, "service_name": "sluice-e2e"}}),
    );
    let (_gw, url) = start_sluice(&["--home", &home.arg(), "--no-admin"]);
    let support = session(&format!("{url}/support")).await;
    support.call_tool("fix_add", json!({"a": 1, "b": 2})).await;
    let root = session(&url).await;
    root.call_tool("fix_add", json!({"a": 3, "b": 4})).await;
    // The tools/call SERVER spans, by the `sluice.endpoint` attribute each carries (if any).
    let endpoint_of = |span: &Value| {
        span["attributes"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|a| a["key"] == "sluice.endpoint")
            .map(|a| a["value"]["stringValue"].as_str().unwrap_or("").to_string())
    };
    let collected = |bodies: &Bodies| -> Vec<Option<String>> {
        bodies
            .lock()
            .unwrap()
            .iter()
            .flat_map(|b| b["resourceSpans"].as_array().cloned().unwrap_or_default())
            .flat_map(|rs| rs["scopeSpans"].as_array().cloned().unwrap_or_default())
            .flat_map(|ss| ss["spans"].as_array().cloned().unwrap_or_default())
            // SERVER spans (kind 2): the upstream calls' CLIENT spans have the same name.
            .filter(|s| s["kind"] == 2)
            .filter(|s| {
                s["name"]
                    .as_str()
                    .is_some_and(|n| n.starts_with("tools/call"))
            })
            .map(|s| endpoint_of(&s))
            .collect()
    };
    until("both calls' spans", || {
        let n = collected(&bodies).len();
        async move { n >= 2 }
    })
    .await;
    let mut seen = collected(&bodies);
    seen.sort();
    assert_eq!(seen, [None, Some("support".to_string())]);
}

/// Three real servers behind endpoints: the fixture, the reference filesystem server and the
/// reference `everything` server (`@modelcontextprotocol/server-everything` over stdio), driven
/// by the official TypeScript SDK client (and `sluice client` for the 2026-07-28 era). Each of
/// two endpoints lists exactly what it selects from the three, and a tool of the other endpoint
/// is an unknown tool there while it runs on its own; a third, with search discovery and a rule
/// of its own, is searched then run through, never finding or running the denied tool.
#[test]
fn three_real_servers_behind_three_endpoints_with_the_typescript_sdk() {
    let everything = node_module_file("@modelcontextprotocol/server-everything/dist/index.js");
    let ev = json!({"id": "ev", "command": node22().to_string_lossy(),
                    "args": [everything.to_string_lossy(), "stdio"], "expose_all": true});
    let endpoints = json!({"version": 1, "endpoints": [
        {"name": "support", "tools": ["fix_add", "ev_echo", "ev_get-sum"], "server_name": "support-gw",
         "tool_search": true},
        {"name": "coding", "upstreams": ["fs", "ev"], "tools": ["fs_*", "ev_get-tiny-image"]},
        {"name": "agent", "upstreams": ["fs", "ev"], "discovery": "search",
         "rules": [{"effect": "deny", "tools": ["ev_get-sum"]}]}
    ]});
    let home = home_with("endpoints-three", &endpoints, json!({}), Some(ev));
    let (_gw, url) = start_sluice(&["--home", &home.arg(), "--no-admin"]);
    let (support, coding) = (format!("{url}/support"), format!("{url}/coding"));
    let sorted = |list: &Value| {
        let mut n = names(list);
        n.sort();
        n
    };
    let unknown = |name: &str| json!({"code": -32602, "message": format!("MCP error -32602: Unknown tool: {name}")});

    // /mcp has all three servers; each endpoint exactly its selection.
    let all = ts_client(&url, &json!([{"op": "listTools"}, {"op": "listPrompts"}]));
    let listed = sorted(&all["results"][0]);
    for t in [
        "fix_add",
        "fix_echo",
        "ev_echo",
        "ev_get-sum",
        "ev_get-tiny-image",
        "fs_read_file",
    ] {
        assert!(listed.contains(&t.to_string()), "{t} on /mcp: {listed:?}");
    }
    let ev_prompts: Vec<String> = names_of(&all["results"][1], "prompts")
        .into_iter()
        .filter(|p| p.starts_with("ev_"))
        .collect();
    assert!(
        !ev_prompts.is_empty(),
        "everything's prompts on /mcp: {all}"
    );

    let search = |q: &str, limit: u64| json!({"op": "callTool", "name": "sluice_search_tools", "arguments": {"query": q, "limit": limit}});
    let s = ts_client(
        &support,
        &json!([
            {"op": "listTools"},
            {"op": "callTool", "name": "ev_get-sum", "arguments": {"a": 19, "b": 23}},
            {"op": "callTool", "name": "ev_echo", "arguments": {"message": "support ✓"}},
            {"op": "callTool", "name": "fix_add", "arguments": {"a": 1, "b": 2}},
            {"op": "callTool", "name": "ev_get-tiny-image", "arguments": {}, "allowError": true},
            {"op": "callTool", "name": "fs_list_allowed_directories", "arguments": {}, "allowError": true},
            {"op": "callTool", "name": "fix_echo", "arguments": {"message": "hi"}, "allowError": true},
            search("sum of two numbers", 50),
        ]),
    );
    assert_eq!(s["serverInfo"]["name"], "support-gw", "{s}");
    assert_eq!(
        sorted(&s["results"][0]),
        ["ev_echo", "ev_get-sum", "fix_add", "sluice_search_tools"]
    );
    let r = &s["results"];
    assert_eq!(
        r[1]["content"][0]["text"], "The sum of 19 and 23 is 42.",
        "{s}"
    );
    assert_eq!(
        r[2],
        json!({"content": [{"type": "text", "text": "Echo: support ✓"}]})
    );
    assert_eq!(r[3]["structuredContent"], json!({"sum": 3}), "{s}");
    assert_eq!(r[4]["error"], unknown("ev_get-tiny-image"));
    assert_eq!(r[5]["error"], unknown("fs_list_allowed_directories"));
    assert_eq!(r[6]["error"], unknown("fix_echo"));
    // Its search finds its own tools only: the two that add numbers, of two servers.
    assert_eq!(
        names(&r[7]["structuredContent"]),
        ["ev_get-sum", "fix_add"],
        "{s}"
    );

    let c = ts_client(
        &coding,
        &json!([
            {"op": "listTools"},
            {"op": "listPrompts"},
            {"op": "callTool", "name": "ev_get-tiny-image", "arguments": {}},
            {"op": "callTool", "name": "fs_list_allowed_directories", "arguments": {}},
            {"op": "callTool", "name": "ev_get-sum", "arguments": {"a": 1, "b": 2}, "allowError": true},
            {"op": "callTool", "name": "fix_add", "arguments": {"a": 1, "b": 2}, "allowError": true},
        ]),
    );
    assert_eq!(c["serverInfo"]["name"], "sluice", "{c}");
    let mut want: Vec<String> = FS_TOOLS.iter().map(|t| t.to_string()).collect();
    want.push("ev_get-tiny-image".into());
    want.sort();
    assert_eq!(sorted(&c["results"][0]), want);
    // No tool glob limits prompts: everything's prompts, whole.
    assert_eq!(names_of(&c["results"][1], "prompts"), ev_prompts);
    let r = &c["results"];
    let image = r[2]["content"]
        .as_array()
        .expect("content")
        .iter()
        .find(|b| b["type"] == "image")
        .unwrap_or_else(|| panic!("an image block: {c}"));
    assert_eq!(image["mimeType"], "image/png", "{c}");
    let dirs = r[3]["content"][0]["text"].as_str().expect("text");
    assert!(
        dirs.contains(&home.path().join("files").display().to_string()),
        "{dirs}"
    );
    assert_eq!(r[4]["error"], unknown("ev_get-sum"));
    assert_eq!(r[5]["error"], unknown("fix_add"));

    // The 2026-07-28 era, each request judged by its URL.
    let (code, list, err) = modern(&coding, &["tools"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(sorted(&list), want);
    let (code, r, err) = modern(&support, &["call", "ev_get-sum", "a=2", "b=3"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(r["content"][0]["text"], "The sum of 2 and 3 is 5.", "{r}");
    let (code, _, err) = modern(&coding, &["call", "ev_get-sum", "a=2", "b=3"]);
    assert_eq!(code, 1);
    assert!(
        err.contains("error -32602: Unknown tool: ev_get-sum"),
        "{err}"
    );

    // Progressive discovery on a third endpoint over the two npm servers, its own rule denying
    // ev_get-sum: the SDK client lists the two tools, searches, then runs what it found; the
    // denied tool is never found (the query that finds it on support finds nothing here), and
    // neither it nor a tool outside the endpoint runs.
    let run = |name: &str, args: Value| json!({"op": "callTool", "name": "sluice_run_tool", "arguments": {"name": name, "args": args}, "allowError": true});
    let a = ts_client(
        &format!("{url}/agent"),
        &json!([
            {"op": "listTools"},
            search("tiny image", 1),
            search("sum of two numbers", 50),
            run("ev_get-tiny-image", json!({})),
            run("ev_get-sum", json!({"a": 1, "b": 2})),
            run("fix_add", json!({"a": 1, "b": 2})),
        ]),
    );
    let r = &a["results"];
    assert_eq!(sorted(&r[0]), ["sluice_run_tool", "sluice_search_tools"]);
    assert_eq!(
        names(&r[1]["structuredContent"]),
        ["ev_get-tiny-image"],
        "{a}"
    );
    assert_eq!(
        names(&r[2]["structuredContent"]),
        Vec::<String>::new(),
        "{a}"
    );
    assert!(
        r[3]["content"]
            .as_array()
            .is_some_and(|c| c.iter().any(|b| b["type"] == "image")),
        "{a}"
    );
    assert_eq!(r[4]["error"], unknown("ev_get-sum"), "{a}");
    assert_eq!(r[5]["error"], unknown("fix_add"), "{a}");
}

/// The `name`s of a list result's `key` entries, in order.
fn names_of(list: &Value, key: &str) -> Vec<String> {
    list[key]
        .as_array()
        .unwrap_or_else(|| panic!("no {key} in {list}"))
        .iter()
        .map(|p| p["name"].as_str().expect("a name").to_string())
        .collect()
}
