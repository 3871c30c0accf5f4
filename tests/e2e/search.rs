//! The tool search (`sluice_search_tools`) and progressive discovery (`"discovery": "search"`)
//! through the real binary, in front of the fixture upstream with 300 more tools: the official
//! Rust SDK client in a handshake session, and `sluice client` as a 2026-07-28 client (no
//! session: the index is built from the catalog alone). Search finds the right tool first,
//! honours the access rules, and with discovery `search` a client lists only the search and run
//! tools, searches, then runs what it found.

use serde_json::{json, Value};
use sluice_e2e::tree::Home;
use sluice_e2e::{bin, start_sluice};
use std::time::Duration;

/// The fixture upstream `fix` (its own tools and `bulk_0` … `bulk_299`), every tool exposed,
/// `fix_echo` denied by the access rules, and these settings.
fn home(label: &str, settings: Value) -> Home {
    let home = Home::new(label);
    home.expose(&json!({
        "version": 1,
        "upstreams": [{"id": "fix", "transport": "stdio", "command": bin("sluice-fixture").to_string_lossy(),
                       "args": ["--stdio", "--many-tools", "300"], "expose_all": true, "enabled": true}]
    }));
    home.write("sluice.json", &settings.to_string());
    home.write(
        "auth/auth.config.json",
        &json!({"enabled": false, "rules": [{"effect": "deny", "tools": ["fix_echo"]}]})
            .to_string(),
    );
    home
}

/// Run `sluice client --era modern URL ARGS… --output json` and read its JSON.
fn modern(url: &str, args: &[&str]) -> Value {
    let (code, json, stderr) = sluice_e2e::modern_client(url, args);
    assert_eq!(code, 0, "{stderr}");
    assert!(!json.is_null(), "JSON on stdout: {stderr}");
    json
}

fn names(structured: &Value) -> Vec<&str> {
    structured["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .map(|t| t["name"].as_str().expect("a name"))
        .collect()
}

/// The official Rust SDK's client in a 2025-11-25 session.
async fn sdk_client(
    url: &str,
) -> rmcp::service::RunningService<rmcp::RoleClient, rmcp::model::ClientConfig> {
    use rmcp::model::{ClientCapabilities, ClientConfig, Implementation, ProtocolVersion};
    use rmcp::transport::StreamableHttpClientTransport;
    use rmcp::ServiceExt;
    let config = ClientConfig::new(
        ClientCapabilities::default(),
        Implementation::new("sluice-e2e-search", "1.0.0"),
    )
    .with_protocol_version(ProtocolVersion::V_2025_11_25);
    let serve = config.serve(StreamableHttpClientTransport::from_uri(url));
    tokio::time::timeout(Duration::from_secs(30), serve)
        .await
        .expect("initialize in time")
        .expect("initialize")
}

async fn sdk_call(
    client: &rmcp::service::RunningService<rmcp::RoleClient, rmcp::model::ClientConfig>,
    name: &'static str,
    args: Value,
) -> Value {
    let call = rmcp::model::CallToolRequestParams::new(name)
        .with_arguments(args.as_object().expect("an object").clone());
    let result = client.call_tool(call).await.expect("tools/call");
    serde_json::to_value(result).expect("a result")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn search_ranks_the_callers_tools_in_both_eras() {
    let home = home("search-both-eras", json!({"tool_search": true}));
    let (_gw, url) = start_sluice(&["--home", &home.arg(), "--no-admin"]);
    let client = sdk_client(&url).await;
    let tools = client.list_all_tools().await.expect("tools/list");
    // Every tool the caller may use is listed (discovery "all"), the search tool among them,
    // saying what it searches: every fixture tool (the numbers are the gateway's, before access
    // rules: the denied fix_echo counts, though this caller's list leaves it out).
    let upstream = tools.iter().filter(|t| t.name.starts_with("fix_")).count();
    assert!(upstream > 300, "{upstream}");
    let search = tools
        .iter()
        .find(|t| t.name == "sluice_search_tools")
        .expect("the search tool is listed");
    assert_eq!(
        search.description.as_deref(),
        Some(format!("Search the {} tools this gateway reaches, from 1 server (fix), by what they do: give a few words (a task, a noun, a parameter name) and get the best matching tools, best first, with their one-line descriptions (and their input schemas with schemas: true). Then call one by name with sluice_run_tool.", upstream + 1).as_str())
    );
    // The right tool first among 300 look-alikes, with its schema on request.
    let r = sdk_call(
        &client,
        "sluice_search_tools",
        json!({"query": "add two numbers", "limit": 3, "schemas": true}),
    )
    .await;
    let found = &r["structuredContent"];
    assert_eq!(found["tools"][0]["name"], "fix_add", "{r}");
    assert_eq!(found["tools"][0]["server"], "fix");
    assert_eq!(found["tools"][0]["description"], "Adds two numbers");
    assert_eq!(
        found["tools"][0]["inputSchema"],
        json!({"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}, "required": ["a", "b"]})
    );
    // A parameter name finds its tool; a tool the access rules deny is never found.
    // (`fix_test_sampling`'s name and description never say "prompt": its parameter does.)
    let r = sdk_call(&client, "sluice_search_tools", json!({"query": "prompt"})).await;
    assert_eq!(
        names(&r["structuredContent"]),
        ["fix_test_trigger_prompt_change", "fix_test_sampling"],
        "{r}"
    );
    let r = sdk_call(
        &client,
        "sluice_search_tools",
        json!({"query": "echo", "limit": 50}),
    )
    .await;
    let echoes = names(&r["structuredContent"]);
    assert!(!echoes.is_empty() && !echoes.contains(&"fix_echo"), "{r}");
    client.cancel().await.expect("close the client");

    // The same for a 2026-07-28 client, which has no session.
    let listed = modern(&url, &["tools"]);
    let listed = names(&listed);
    assert!(listed.contains(&"sluice_search_tools"), "{listed:?}");
    let r = modern(
        &url,
        &[
            "call",
            "sluice_search_tools",
            "query=add two numbers",
            "limit=1",
        ],
    );
    assert_eq!(
        r["structuredContent"],
        json!({"query": "add two numbers", "tools": [{"name": "fix_add", "server": "fix", "description": "Adds two numbers"}]}),
        "{r}"
    );
    // (A 2026-07-28 result: the era's own marks.)
    assert_eq!(r["resultType"], "complete", "{r}");
    let r = modern(
        &url,
        &["call", "sluice_search_tools", "query=echo", "limit=50"],
    );
    assert!(!names(&r["structuredContent"]).contains(&"fix_echo"), "{r}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progressive_discovery_lists_two_tools_then_searches_and_runs() {
    let home = home("search-discovery", json!({"discovery": "search"}));
    let (_gw, url) = start_sluice(&["--home", &home.arg(), "--no-admin"]);
    let client = sdk_client(&url).await;
    let tools = client.list_all_tools().await.expect("tools/list");
    let listed: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    assert_eq!(listed, ["sluice_run_tool", "sluice_search_tools"]);
    // Search, then run what was found through the run tool.
    let r = sdk_call(
        &client,
        "sluice_search_tools",
        json!({"query": "add two numbers"}),
    )
    .await;
    let first = names(&r["structuredContent"])[0].to_string();
    assert_eq!(first, "fix_add", "{r}");
    let r = sdk_call(
        &client,
        "sluice_run_tool",
        json!({"name": first, "args": {"a": 2, "b": 40}}),
    )
    .await;
    assert_eq!(r["structuredContent"], json!({"sum": 42}), "{r}");
    // The run tool refuses what the access rules deny, as an unknown tool.
    let call = rmcp::model::CallToolRequestParams::new("sluice_run_tool").with_arguments(
        json!({"name": "fix_echo", "args": {}})
            .as_object()
            .unwrap()
            .clone(),
    );
    let e = client.call_tool(call).await.expect_err("denied");
    assert!(e.to_string().contains("Unknown tool: fix_echo"), "{e}");
    client.cancel().await.expect("close the client");

    // A 2026-07-28 client: the same two tools, the same round trip.
    let listed = modern(&url, &["tools"]);
    let listed = names(&listed);
    assert_eq!(listed, ["sluice_run_tool", "sluice_search_tools"]);
    let r = modern(
        &url,
        &["call", "sluice_search_tools", "query=sleeps milliseconds"],
    );
    assert_eq!(names(&r["structuredContent"])[0], "fix_slow", "{r}");
    let r = modern(
        &url,
        &[
            "call",
            "sluice_run_tool",
            "name=fix_add",
            r#"args={"a": 1, "b": 2}"#,
        ],
    );
    assert_eq!(r["structuredContent"], json!({"sum": 3}), "{r}");
}
