//! Tasks through the real binary. The 0.2.0-alpha conformance suite's ten `tasks-*` scenarios
//! against the tasks-capable fixture directly and through the gateway give the same verdicts; a
//! legacy client creates, polls, collects, lists and cancels tasks of a 2025-11-25 upstream and
//! of a 2026-07-28 one (the gateway bridges), their results pass `mask` / `pii` and the audit
//! line names the task; another client's task id answers exactly as an unknown one; a modern
//! client gets a 2025-11-25 upstream's task in its own era, and the one refused pairing answers
//! its documented error; server-everything's `simulate-research-query` runs as a task for the
//! TypeScript SDK client through the gateway.

use crate::interop::{node22, node_dir, node_module_file, run_with_timeout, ts_client};
use serde_json::{json, Value};
use sluice_e2e::mcp::Client;
use sluice_e2e::tree::Home;
use sluice_e2e::{bin, start_fixture_http, start_sluice};
use std::process::Command;
use std::time::Duration;

const TASK_SCENARIOS: [&str; 10] = [
    "tasks-lifecycle",
    "tasks-capability-negotiation",
    "tasks-wire-fields",
    "tasks-request-state-removal",
    "tasks-mrtr-input",
    "tasks-request-headers",
    "tasks-dispatch-and-envelope",
    "tasks-status-notifications",
    "tasks-required-task-error",
    "tasks-mrtr-composition",
];

/// The verdicts of one 2026 conformance scenario: each check as `id STATUS` (sorted), then the
/// summary line (`Passed: N/M, F failed, W warnings`).
fn verdicts(url: &str, scenario: &str) -> Vec<String> {
    let mut cmd = Command::new(node22());
    cmd.current_dir(node_dir())
        .arg(node_module_file("conformance-2026/dist/index.js"))
        .args(["server", "--url", url, "--scenario", scenario])
        .env("NO_COLOR", "1");
    let run = run_with_timeout(cmd, Duration::from_secs(180));
    let text = crate::conformance::strip_ansi(&run.stdout);
    let mut checks: Vec<String> = text
        .lines()
        .filter_map(|l| {
            let (_, rest) = l.split_once(" [")?;
            let (id, rest) = rest.split_once(']')?;
            let status = rest.split_whitespace().next()?;
            Some(format!("{} {status}", id.trim()))
        })
        .collect();
    checks.sort();
    let summary = text
        .lines()
        .find(|l| l.starts_with("Passed: "))
        .map(str::to_string)
        .unwrap_or_else(|| format!("no summary for {scenario}: {}\n{}", run.stdout, run.stderr));
    checks.push(summary);
    checks
}

#[test]
fn the_2026_tasks_scenarios_give_the_same_verdicts_through_the_gateway() {
    let (_fx, fx_url) = start_fixture_http(&["--tasks"]);
    let (_gw, url) = start_sluice(&["--passthrough", &fx_url, "--no-admin"]);
    for scenario in TASK_SCENARIOS {
        let direct = verdicts(&fx_url, scenario);
        let summary = direct.last().unwrap();
        // Each scenario runs checks (the status-notifications one is one SKIPPED check).
        assert!(direct.len() >= 2, "{scenario}: {direct:?}");
        assert!(
            summary.contains(", 0 failed, 0 warnings"),
            "the fixture must pass {scenario} directly: {direct:?}"
        );
        let through = verdicts(&url, scenario);
        assert_eq!(through, direct, "{scenario} through the gateway");
    }
}

fn fixture() -> String {
    bin("sluice-fixture").to_string_lossy().into_owned()
}

/// A PostToolUse hook that writes what it was shown (`tool_name`, `tool_response`) to
/// `seen.json` in the home folder.
const RECORD_PY: &str = r#"
import json, os, sys
event = json.load(sys.stdin)
with open(os.path.join(event["cwd"], "seen.json"), "w") as f:
    json.dump({"tool": event["tool_name"], "response": event["tool_response"]}, f)
"#;

/// A tree with the tasks fixture over stdio in `era`, the `pii` control on, an audit log.
fn tasks_home(label: &str, era: &str) -> Home {
    let home = Home::new(label);
    home.expose(&json!({"upstreams": [{"id": "fx", "command": fixture(),
        "args": ["--stdio", "--tasks", "--era", era], "expose_all": true}]}));
    home.write(
        "hooks/hooks.manifest.json",
        &json!({"version": 1, "hooks": [
            {"id": "pii", "type": "builtin", "builtin": "pii", "options": {}, "enabled": true},
            {"id": "no-failing", "type": "builtin", "builtin": "deny",
             "options": {"tools": ["fx_failing_job"]}, "enabled": true},
            {"id": "post-tool-use/record", "event": "PostToolUse", "type": "command",
             "command": "python3 \"${HOOKS_DIR}/scripts/record.py\"", "timeout": 10,
             "enabled": true}
        ]})
        .to_string(),
    );
    home.write("hooks/scripts/record.py", RECORD_PY);
    home.write("logs/log.config.json", r#"{"enabled": true}"#);
    home
}

/// `tools/call` of `tool` as a task (2025-11-25): the created task.
async fn create(c: &Client, tool: &str, args: Value) -> Value {
    let r = c
        .request(
            "tools/call",
            json!({"name": tool, "arguments": args, "task": {"ttl": 60000}}),
        )
        .await;
    let task = r["result"]["task"].clone();
    assert!(
        task["taskId"]
            .as_str()
            .is_some_and(|id| id.starts_with("sluice-task-")),
        "{r}"
    );
    task
}

async fn status_of(c: &Client, id: &str) -> Value {
    c.request("tasks/get", json!({"taskId": id})).await
}

async fn legacy_client_tasks(era: &str) {
    let home = tasks_home(&format!("tasks-legacy-{era}"), era);
    let (_gw, url) = start_sluice(&["--home", &home.arg(), "--no-admin"]);
    let mut c = Client::new(&url);
    let init = c.initialize(json!({"elicitation": {}})).await;
    assert_eq!(
        init["capabilities"]["tasks"],
        json!({"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}),
        "{init}"
    );

    // The request hooks run when a task is created: a refused call creates none.
    let refused = c
        .request(
            "tools/call",
            json!({"name": "fx_failing_job", "arguments": {}, "task": {"ttl": 60000}}),
        )
        .await;
    assert_eq!(refused["error"]["code"], json!(-32030), "{refused}");

    // A task whose result carries a card number: collected with tasks/result, masked.
    let mut get = sluice_e2e::mcp::SseReader::new(c.open_get(None).await);
    let task = create(&c, "fx_card_report", json!({})).await;
    let id = task["taskId"].as_str().unwrap().to_string();
    assert_eq!(task["status"], json!("working"), "{task}");
    assert!(
        !id.contains("fixture"),
        "the upstream's id must not show: {id}"
    );
    let got = status_of(&c, &id).await;
    assert_eq!(got["result"]["taskId"], json!(id), "{got}");
    let result = c.request("tasks/result", json!({"taskId": id})).await;
    assert_eq!(
        result["result"]["content"],
        json!([{"type": "text", "text": "Card on file: [CARD], expires 12/30"}]),
        "{result}"
    );
    assert_eq!(
        result["result"]["_meta"]["io.modelcontextprotocol/related-task"],
        json!({"taskId": id})
    );
    // The PostToolUse hook saw the final result of the tool, masked as the client got it.
    let seen: Value =
        serde_json::from_str(&std::fs::read_to_string(home.path().join("seen.json")).unwrap())
            .unwrap();
    assert_eq!(seen["tool"], json!("fx_card_report"), "{seen}");
    assert_eq!(
        seen["response"]["content"], result["result"]["content"],
        "{seen}"
    );
    let done = status_of(&c, &id).await;
    assert_eq!(done["result"]["status"], json!("completed"), "{done}");
    if era == "legacy" {
        // The upstream's status notification reaches this client, under the gateway's id.
        let (_, said) = tokio::time::timeout(Duration::from_secs(10), get.next())
            .await
            .expect("a status notification in time")
            .expect("a status notification");
        assert_eq!(
            said["method"],
            json!("notifications/tasks/status"),
            "{said}"
        );
        assert_eq!(said["params"]["taskId"], json!(id), "{said}");
        assert_eq!(said["params"]["status"], json!("completed"), "{said}");
    }

    // A cancelled task.
    let slow = create(&c, "fx_slow_compute", json!({"seconds": 60, "label": "x"})).await;
    let slow_id = slow["taskId"].as_str().unwrap().to_string();
    let cancelled = c.request("tasks/cancel", json!({"taskId": slow_id})).await;
    assert_eq!(cancelled["result"]["taskId"], json!(slow_id), "{cancelled}");
    assert_eq!(
        cancelled["result"]["status"],
        json!("cancelled"),
        "{cancelled}"
    );
    assert_eq!(
        status_of(&c, &slow_id).await["result"]["status"],
        json!("cancelled")
    );

    // tasks/list: this client's tasks, under the gateway's ids.
    let list = c.request("tasks/list", json!({})).await;
    let mut ids: Vec<&str> = list["result"]["tasks"]
        .as_array()
        .unwrap_or_else(|| panic!("{list}"))
        .iter()
        .map(|t| t["taskId"].as_str().unwrap())
        .collect();
    ids.sort();
    let mut want = vec![id.as_str(), slow_id.as_str()];
    want.sort();
    assert_eq!(ids, want);

    // Another client: the first one's task id is as unknown as a made-up one.
    let mut other = Client::new(&url);
    other.initialize(json!({})).await;
    for method in ["tasks/get", "tasks/result", "tasks/cancel"] {
        let foreign = other.request(method, json!({"taskId": id})).await;
        assert_eq!(
            foreign["error"],
            json!({"code": -32602, "message": format!("Task not found: {id}"), "data": {"taskId": id}}),
            "{method}: {foreign}"
        );
    }
    let unknown = other
        .request("tasks/get", json!({"taskId": "sluice-task-nope"}))
        .await;
    assert_eq!(unknown["error"]["code"], json!(-32602));
    assert_eq!(
        unknown["error"]["message"],
        json!("Task not found: sluice-task-nope")
    );
    let other_list = other.request("tasks/list", json!({})).await;
    assert_eq!(other_list["result"], json!({"tasks": []}));

    // The audit line records the task id and the outcome: created, then collected (masked).
    let lines = home.audit_lines(3).await;
    let created = lines
        .iter()
        .find(|l| l["method"] == "tools/call" && l["tool"] == "fx_card_report")
        .unwrap_or_else(|| panic!("{lines:?}"));
    assert_eq!(
        (&created["task"], &created["outcome"]),
        (&json!(id), &json!("ok"))
    );
    let collected = lines
        .iter()
        .find(|l| l["method"] == "tasks/result" && l["task"] == json!(id))
        .unwrap_or_else(|| panic!("{lines:?}"));
    assert_eq!(collected["tool"], json!("fx_card_report"));
    assert_eq!(collected["outcome"], json!("ok"));
    assert_eq!(collected["controls"], json!({"pii": {"CARD": 1}}));
}

#[tokio::test]
async fn a_legacy_client_runs_tasks_of_a_2025_11_25_upstream() {
    legacy_client_tasks("legacy").await;
}

#[tokio::test]
async fn a_legacy_client_runs_tasks_of_a_2026_07_28_upstream() {
    legacy_client_tasks("modern").await;
}

/// A modern (2026-07-28) request to `url`.
async fn modern(url: &str, method: &str, mut params: Value, caps: Value) -> Value {
    params["_meta"] = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                             "io.modelcontextprotocol/clientCapabilities": caps});
    let mut req = reqwest::Client::new()
        .post(url)
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", method);
    if let Some(name) = params.get("name").and_then(Value::as_str) {
        req = req.header("mcp-name", name);
    }
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
    let resp = req.body(body.to_string()).send().await.unwrap();
    sluice_e2e::mcp::finish(resp).await.reply()
}

#[tokio::test]
async fn a_modern_client_gets_a_2025_11_25_upstreams_tasks_in_its_own_era() {
    let home = tasks_home("tasks-modern-client", "legacy");
    let (_gw, url) = start_sluice(&["--home", &home.arg(), "--no-admin"]);
    let ext = json!({"extensions": {"io.modelcontextprotocol/tasks": {}}});
    let discover = modern(&url, "server/discover", json!({}), json!({})).await;
    assert_eq!(
        discover["result"]["capabilities"]["extensions"],
        json!({"io.modelcontextprotocol/tasks": {}}),
        "{discover}"
    );
    assert_eq!(discover["result"]["capabilities"].get("tasks"), None);
    let created = modern(
        &url,
        "tools/call",
        json!({"name": "fx_card_report", "arguments": {}}),
        ext.clone(),
    )
    .await;
    assert_eq!(created["result"]["resultType"], json!("task"), "{created}");
    let id = created["result"]["taskId"].as_str().unwrap().to_string();
    assert!(id.starts_with("sluice-task-"), "{created}");
    assert!(created["result"]["ttlMs"].is_u64(), "{created}");
    let mut got = Value::Null;
    for _ in 0..100 {
        got = modern(&url, "tasks/get", json!({"taskId": id}), ext.clone()).await;
        if got["result"]["status"] == "completed" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(got["result"]["status"], json!("completed"), "{got}");
    assert_eq!(
        got["result"]["result"]["content"],
        json!([{"type": "text", "text": "Card on file: [CARD], expires 12/30"}]),
        "{got}"
    );
    // Input for a 2025-11-25 upstream's task that asks nothing.
    let update = modern(
        &url,
        "tasks/update",
        json!({"taskId": id, "inputResponses": {}}),
        ext.clone(),
    )
    .await;
    assert_eq!(
        update["error"],
        json!({"code": -32602,
               "message": format!("Task {id} runs on a 2025-11-25 upstream and asks nothing now; tasks/update has nothing to answer"),
               "data": {"taskId": id, "upstream": "fx"}}),
        "{update}"
    );
    // Without the extension: -32021, naming it, for the tasks methods and for a tool that must
    // run as a task; a tool that may is run at once.
    let gated = modern(&url, "tasks/get", json!({"taskId": id}), json!({})).await;
    assert_eq!(gated["error"]["code"], json!(-32021), "{gated}");
    let required = modern(
        &url,
        "tools/call",
        json!({"name": "fx_test_tool_with_task", "arguments": {}}),
        json!({}),
    )
    .await;
    assert_eq!(
        required["error"],
        json!({"code": -32021,
               "message": "Missing required client capability: extensions[\"io.modelcontextprotocol/tasks\"]",
               "data": {"requiredCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}}}}),
        "{required}"
    );
    let at_once = modern(
        &url,
        "tools/call",
        json!({"name": "fx_slow_compute", "arguments": {"seconds": 0, "label": "now"}}),
        json!({}),
    )
    .await;
    assert_eq!(
        at_once["result"]["resultType"],
        json!("complete"),
        "{at_once}"
    );
    assert_eq!(
        at_once["result"]["content"],
        json!([{"type": "text", "text": "Computed now in 0 s"}]),
        "{at_once}"
    );
    // Cancelling an ended task is the extension's empty ack.
    let ack = modern(&url, "tasks/cancel", json!({"taskId": id}), ext).await;
    assert_eq!(ack["result"]["resultType"], json!("complete"), "{ack}");
    assert_eq!(ack["result"].get("taskId"), None, "{ack}");
}

#[test]
fn server_everything_runs_a_research_task_for_the_ts_sdk_client_through_the_gateway() {
    let (_everything, everything_url) = crate::passthrough::start_everything_http();
    let (_gw, url) = start_sluice(&["--passthrough", &everything_url, "--no-admin"]);
    let report = ts_client(
        &url,
        &json!({"steps": [
            {"op": "request", "method": "tools/call",
             "params": {"name": "simulate-research-query", "arguments": {"topic": "rivers"},
                        "task": {"ttl": 60000}}},
            {"op": "request", "method": "tasks/get", "taskFrom": 0},
            {"op": "request", "method": "tasks/result", "taskFrom": 0},
            {"op": "request", "method": "tasks/get", "taskFrom": 0},
            {"op": "request", "method": "tasks/list"},
        ], "timeoutMs": 60000}),
    );
    assert!(
        report["serverCapabilities"]["tasks"]["requests"]["tools"]["call"].is_object(),
        "{report}"
    );
    let id = report["results"][0]["task"]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("{report}"))
        .to_string();
    assert!(id.starts_with("sluice-task-"), "{report}");
    assert_eq!(report["results"][1]["taskId"], json!(id), "{report}");
    let text = report["results"][2]["content"][0]["text"]
        .as_str()
        .unwrap_or("");
    assert!(text.starts_with("# Research Report: rivers"), "{report}");
    assert_eq!(
        report["results"][2]["_meta"]["io.modelcontextprotocol/related-task"],
        json!({"taskId": id})
    );
    assert_eq!(
        report["results"][3]["status"],
        json!("completed"),
        "{report}"
    );
    assert_eq!(
        report["results"][4]["tasks"][0]["taskId"],
        json!(id),
        "{report}"
    );
    // Another client session: the id is unknown to it.
    let other = ts_client(
        &url,
        &json!([{"op": "request", "method": "tasks/get", "params": {"taskId": id}, "allowError": true}]),
    );
    assert_eq!(
        other["results"][0]["error"]["code"],
        json!(-32602),
        "{other}"
    );
}

#[tokio::test]
async fn a_2026_07_28_upstreams_task_asks_a_legacy_client_for_input_while_it_collects_it() {
    let home = tasks_home("tasks-input-bridge", "modern");
    let (_gw, url) = start_sluice(&["--home", &home.arg(), "--no-admin"]);
    let mut c = Client::new(&url);
    c.initialize(json!({"elicitation": {}})).await;
    let task = create(&c, "fx_confirm_delete", json!({"filename": "notes.txt"})).await;
    let id = task["taskId"].as_str().unwrap().to_string();
    // tasks/result blocks; the task's question reaches the client on its stream.
    let collect = json!({"jsonrpc": "2.0", "id": 41, "method": "tasks/result",
                         "params": {"taskId": id}});
    let mut events = sluice_e2e::mcp::SseReader::new(c.post_streaming(collect).await);
    let (_, asked) = tokio::time::timeout(Duration::from_secs(10), events.next())
        .await
        .expect("the question in time")
        .expect("the question");
    assert_eq!(asked["method"], json!("elicitation/create"), "{asked}");
    assert_eq!(
        asked["params"]["message"],
        json!("Delete notes.txt?"),
        "{asked}"
    );
    let answered = c
        .post(json!({"jsonrpc": "2.0", "id": asked["id"],
                     "result": {"action": "accept", "content": {"confirm": true}}}))
        .await;
    assert_eq!(answered.status, 202);
    let (_, done) = tokio::time::timeout(Duration::from_secs(10), events.next())
        .await
        .expect("the result in time")
        .expect("the result");
    assert_eq!(done["id"], json!(41), "{done}");
    assert_eq!(
        done["result"]["content"][0]["text"],
        json!("Deleted notes.txt: {\"confirm\":{\"action\":\"accept\",\"content\":{\"confirm\":true}}}"),
        "{done}"
    );
    assert_eq!(
        done["result"]["_meta"]["io.modelcontextprotocol/related-task"],
        json!({"taskId": id})
    );
}

#[tokio::test]
async fn tasks_result_waits_for_a_task_longer_than_the_upstreams_request_timeout() {
    let home = Home::new("tasks-long");
    home.expose(
        &json!({"upstreams": [{"id": "fx", "command": fixture(), "timeout_ms": 1000,
        "args": ["--stdio", "--tasks", "--era", "legacy"], "expose_all": true}]}),
    );
    let (_gw, url) = start_sluice(&["--home", &home.arg(), "--no-admin"]);
    let mut c = Client::new(&url);
    c.initialize(json!({})).await;
    let task = create(
        &c,
        "fx_slow_compute",
        json!({"seconds": 2, "label": "long"}),
    )
    .await;
    let r = c
        .request("tasks/result", json!({"taskId": task["taskId"]}))
        .await;
    assert_eq!(
        r["result"]["content"],
        json!([{"type": "text", "text": "Computed long in 2 s"}]),
        "{r}"
    );
}

#[tokio::test]
async fn a_task_result_over_the_size_cap_is_refused_as_a_direct_one_is() {
    let home = Home::new("tasks-size-cap");
    home.expose(&json!({"upstreams": [{"id": "fx", "command": fixture(),
        "args": ["--stdio", "--tasks", "--era", "legacy"], "expose_all": true}]}));
    home.write(
        "hooks/hooks.manifest.json",
        &json!({"version": 1, "hooks": [{"id": "cap", "type": "builtin", "builtin": "size-cap",
            "options": {"mode": "refuse", "per_tool": {"fx_card_report": 10}}, "enabled": true}]})
        .to_string(),
    );
    home.write("logs/log.config.json", r#"{"enabled": true}"#);
    let (_gw, url) = start_sluice(&["--home", &home.arg(), "--no-admin"]);
    let mut c = Client::new(&url);
    c.initialize(json!({})).await;
    let task = create(&c, "fx_card_report", json!({})).await;
    let id = task["taskId"].as_str().unwrap().to_string();
    let r = c.request("tasks/result", json!({"taskId": id})).await;
    assert_eq!(
        r["error"],
        json!({"code": -32031, "message": "Response rejected", "data": {"reason":
            "Response too large: the result of tool \"fx_card_report\" is 48 bytes, over the 10-byte cap of this gateway. Ask for less (a narrower query, a page, a range) and try again."}}),
        "{r}"
    );
    let lines = home.audit_lines(2).await;
    let collected = lines
        .iter()
        .find(|l| l["method"] == "tasks/result")
        .unwrap_or_else(|| panic!("{lines:?}"));
    assert_eq!(
        (&collected["task"], &collected["outcome"]),
        (&json!(id), &json!("refused")),
        "{collected}"
    );
}

/// `tasks/list` pages with a cursor like the other lists (`page_size` a page, in the order the
/// tasks were created); the pages together hold every task once; a cursor the gateway did not
/// mint is -32602.
#[tokio::test]
async fn tasks_list_pages_with_a_cursor() {
    let home = tasks_home("tasks-list-pages", "legacy");
    home.write("sluice.json", &json!({"page_size": 2}).to_string());
    let (_gw, url) = start_sluice(&["--home", &home.arg(), "--no-admin"]);
    let mut c = Client::new(&url);
    c.initialize(json!({})).await;
    let mut created = Vec::new();
    for _ in 0..5 {
        let task = create(&c, "fx_card_report", json!({})).await;
        created.push(task["taskId"].as_str().unwrap().to_string());
    }
    let mut pages = Vec::new();
    let mut cursor: Option<String> = None;
    for _ in 0..10 {
        let params = match &cursor {
            Some(c) => json!({"cursor": c}),
            None => json!({}),
        };
        let r = c.request("tasks/list", params).await;
        let ids: Vec<String> = r["result"]["tasks"]
            .as_array()
            .unwrap_or_else(|| panic!("{r}"))
            .iter()
            .map(|t| t["taskId"].as_str().unwrap().to_string())
            .collect();
        pages.push(ids);
        match r["result"].get("nextCursor") {
            Some(next) => cursor = Some(next.as_str().unwrap().to_string()),
            None => break,
        }
    }
    assert_eq!(
        pages,
        vec![
            created[0..2].to_vec(),
            created[2..4].to_vec(),
            created[4..5].to_vec()
        ]
    );
    for bad in [json!("nope"), json!("sluice-tasks-x"), json!(7)] {
        let r = c.request("tasks/list", json!({"cursor": bad})).await;
        let shown = match &bad {
            Value::String(s) => format!("{s:?}"),
            other => other.to_string(),
        };
        assert_eq!(
            r["error"],
            json!({"code": -32602, "message": format!("Invalid cursor: {shown}")}),
            "{r}"
        );
    }
}

/// A 2025-11-25 upstream's task that waits for input, for a 2026-07-28 client: `tasks/get`
/// shows its question as `inputRequests` (the gateway collects it from the upstream's
/// `tasks/result` stream), `tasks/update` answers it, and the task completes with the answer.
#[tokio::test]
async fn a_modern_client_answers_a_2025_11_25_upstreams_task_question() {
    let home = tasks_home("tasks-modern-input", "legacy");
    let (_gw, url) = start_sluice(&["--home", &home.arg(), "--no-admin"]);
    let caps = json!({"elicitation": {}, "extensions": {"io.modelcontextprotocol/tasks": {}}});
    let created = modern(
        &url,
        "tools/call",
        json!({"name": "fx_confirm_delete", "arguments": {"filename": "notes.txt"}}),
        caps.clone(),
    )
    .await;
    assert_eq!(created["result"]["resultType"], json!("task"), "{created}");
    let id = created["result"]["taskId"].as_str().unwrap().to_string();
    let mut got = Value::Null;
    for _ in 0..100 {
        got = modern(&url, "tasks/get", json!({"taskId": id}), caps.clone()).await;
        if got["result"].get("inputRequests").is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(got["result"]["status"], json!("input_required"), "{got}");
    let asked = got["result"]["inputRequests"].as_object().unwrap().clone();
    assert_eq!(asked.len(), 1, "{got}");
    let (key, question) = asked.iter().next().unwrap();
    assert_eq!(question["method"], json!("elicitation/create"), "{got}");
    assert_eq!(
        question["params"]["message"],
        json!("Delete notes.txt?"),
        "{got}"
    );
    // An answer to a question never asked is refused; the real one goes through.
    let wrong = modern(
        &url,
        "tasks/update",
        json!({"taskId": id, "inputResponses": {"nope": {"action": "decline"}}}),
        caps.clone(),
    )
    .await;
    assert_eq!(
        wrong["error"],
        json!({"code": -32602, "message": format!("Task {id} asked nothing under the key \"nope\""),
               "data": {"taskId": id, "key": "nope"}}),
        "{wrong}"
    );
    let update = modern(
        &url,
        "tasks/update",
        json!({"taskId": id, "inputResponses": {key.clone(): {"action": "accept", "content": {"confirm": true}}}}),
        caps.clone(),
    )
    .await;
    assert!(update.get("error").is_none(), "{update}");
    for _ in 0..100 {
        got = modern(&url, "tasks/get", json!({"taskId": id}), caps.clone()).await;
        if got["result"]["status"] == "completed" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(got["result"]["status"], json!("completed"), "{got}");
    assert_eq!(
        got["result"]["result"]["content"][0]["text"],
        json!("Deleted notes.txt: {\"confirm\":{\"action\":\"accept\",\"content\":{\"confirm\":true}}}"),
        "{got}"
    );
}
