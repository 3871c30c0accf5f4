//! Messages that cross replicas: an upstream's notification reaches the GET stream wherever it
//! is held, `Last-Event-ID` resumes it on another replica, a client's replies to sampling and
//! elicitation requests reach the replica that asked, and the SDK clients through nginx.

use super::{fixture_home, Cluster};
use serde_json::{json, Value};
use sluice_e2e::mcp::{Client, SseReader};
use std::time::Duration;

fn on(url: &str, id: &str) -> Client {
    let mut c = Client::new(url);
    c.session = Some(id.to_string());
    c
}

/// The next message on a GET stream that is a notification (skipping nothing else: a GET
/// stream carries only what we caused).
async fn next_event(r: &mut SseReader) -> (String, Value) {
    let (id, msg) = r.next().await.expect("the GET stream stays open");
    (id.expect("GET-stream events carry ids"), msg)
}

#[tokio::test]
async fn a_resource_update_reaches_a_get_stream_on_another_replica_and_resumes_on_a_third() {
    let cl = Cluster::start("get", fixture_home("cluster-get"), json!({}));
    let [a, b, c] = [&cl.replicas[0], &cl.replicas[1], &cl.replicas[2]];
    let mut ca = Client::new(&a.url());
    ca.initialize(json!({})).await;
    let id = ca.session.clone().unwrap();
    let uri = "test://static-text";
    let r = ca.request("resources/subscribe", json!({"uri": uri})).await;
    assert_eq!(r["result"], json!({}), "{r}");

    // The GET stream is held by C; the upstream that sends the update is A's.
    let get = on(&c.url(), &id).open_get(None).await;
    assert_eq!(get.status(), 200);
    let mut stream = SseReader::new(get);
    let touch = |n: u64| {
        let ca = &ca;
        async move {
            let r = ca
                .call_tool("fx_touch_resource", json!({"uri": uri, "n": n}))
                .await;
            assert_eq!(r["result"]["content"][0]["text"], json!("ok"), "{r}");
        }
    };
    touch(1).await;
    let updated = |msg: &Value| {
        msg["method"] == json!("notifications/resources/updated")
            && msg["params"]["uri"] == json!(uri)
    };
    let (eid, msg) = next_event(&mut stream).await;
    assert_eq!(eid, "0-1", "{msg}");
    assert!(updated(&msg), "{msg}");
    drop(stream);

    // While no GET stream is open the next update waits in Redis; B resumes after 0-1.
    touch(2).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut resumed = SseReader::new(on(&b.url(), &id).open_get(Some("0-1")).await);
    let (eid, msg) = next_event(&mut resumed).await;
    assert_eq!(eid, "0-2", "{msg}");
    assert!(updated(&msg), "{msg}");
    drop(resumed);
    // A new GET stream (no Last-Event-ID) on A starts after what was delivered: the next
    // event it sees is the next update, not a replay.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut fresh = SseReader::new(ca.open_get(None).await);
    touch(3).await;
    let (eid, msg) = next_event(&mut fresh).await;
    assert_eq!(eid, "0-3", "{msg}");
    assert!(updated(&msg), "{msg}");
}

/// The tools that ask the client: the request comes on A's response stream, the client's
/// reply is posted to B, and the answer reaches the upstream call waiting on A.
#[tokio::test]
async fn replies_to_sampling_and_elicitation_reach_the_replica_that_asked() {
    let cl = Cluster::start("ask", fixture_home("cluster-ask"), json!({}));
    let [a, b] = [&cl.replicas[0], &cl.replicas[1]];
    let mut ca = Client::new(&a.url());
    ca.initialize(json!({"sampling": {}, "elicitation": {}}))
        .await;
    let id = ca.session.clone().unwrap();
    let cb = on(&b.url(), &id);
    let cases = [
        (
            "fx_test_sampling",
            json!({"prompt": "Capital of France?"}),
            "sampling/createMessage",
            json!({"role": "assistant", "content": {"type": "text", "text": "Paris"}, "model": "m", "stopReason": "endTurn"}),
            "LLM response: Paris",
        ),
        (
            "fx_test_elicitation",
            json!({"message": "Your name?"}),
            "elicitation/create",
            json!({"action": "accept", "content": {"response": "Ada"}}),
            "User response: action=accept, content={\"response\":\"Ada\"}",
        ),
    ];
    for (tool, args, method, answer, said) in cases {
        let call = ca
            .post_streaming(json!({"jsonrpc": "2.0", "id": 70, "method": "tools/call",
                "params": {"name": tool, "arguments": args}}))
            .await;
        let mut s = SseReader::new(call);
        let (_, asked) = s.next().await.unwrap();
        assert_eq!(asked["method"], json!(method), "{asked}");
        let rid = asked["id"].as_str().unwrap().to_string();
        assert!(
            rid.starts_with("sluice-") && rid.matches('-').count() == 2,
            "names the replica: {rid}"
        );
        let r = cb
            .post(json!({"jsonrpc": "2.0", "id": rid, "result": answer}))
            .await;
        assert_eq!(r.status, 202, "{}", r.body);
        let (_, reply) = s.next().await.unwrap();
        assert_eq!(reply["id"], json!(70), "{reply}");
        assert_eq!(
            reply["result"]["content"][0]["text"],
            json!(said),
            "{reply}"
        );
    }
    assert!(b
        .log_text()
        .contains("reply sent on to the replica that asked"));
}

fn python() -> std::path::PathBuf {
    std::env::var_os("SLUICE_PYTHON")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| sluice_e2e::workspace_root().join("tests/python/.venv/bin/python"))
}

/// The Python SDK client (legacy mode) through nginx: each request on the next replica, the
/// GET stream on one of them, its replies to sampling and elicitation on others.
#[tokio::test]
async fn the_python_sdk_client_through_round_robin_nginx() {
    let cl = Cluster::start("python", fixture_home("cluster-python"), json!({}));
    let url = cl.nginx.url();
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new(python())
            .arg(sluice_e2e::workspace_root().join("tests/python/client.py"))
            .args(["legacy", &url])
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    assert!(
        out.status.success(),
        "client.py: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r["protocol_version"], "2025-11-25", "{r}");
    assert!(
        r["tools"].as_array().unwrap().contains(&json!("fx_echo")),
        "{r}"
    );
    assert_eq!(r["echo"], json!({"said": "hello"}));
    assert_eq!(
        r["elicitation"],
        json!(["User response: action=accept, content={\"response\":\"Ada\"}"])
    );
    assert_eq!(r["sampling"], json!(["LLM response: Paris"]));
    // The session was served by all three replicas, and some reply crossed replicas.
    let taken: usize = cl
        .replicas
        .iter()
        .filter(|r| r.log_text().contains("session taken up from the cluster"))
        .count();
    assert_eq!(taken, 2);
    assert!(cl.replicas.iter().any(|r| r
        .log_text()
        .contains("reply sent on to the replica that asked")));
}

/// The TypeScript SDK client through nginx: lists, a tool, a prompt, a resource, a
/// subscription, the log level, and the end of the session (DELETE), each on the next replica.
#[tokio::test]
async fn the_typescript_sdk_client_through_round_robin_nginx() {
    let cl = Cluster::start("ts", fixture_home("cluster-ts"), json!({}));
    let script = json!({"steps": [
        {"op": "listTools"},
        {"op": "callTool", "name": "fx_echo", "arguments": {"n": 1}},
        {"op": "callTool", "name": "fx_echo", "arguments": {"n": 2}},
        {"op": "getPrompt", "name": "fx_test_simple_prompt"},
        {"op": "readResource", "uri": "test://static-text"},
        {"op": "subscribeResource", "uri": "test://static-text"},
        {"op": "setLoggingLevel", "level": "error"},
        {"op": "callTool", "name": "fx_test_logging_tool", "arguments": {}},
        {"op": "callTool", "name": "fx_echo", "arguments": {"n": 3}},
        {"op": "terminateSession"}
    ]});
    let mut cmd = std::process::Command::new(crate::interop::node22());
    cmd.arg(crate::interop::node_dir().join("ts-client.mjs"))
        .arg(cl.nginx.url())
        .arg(script.to_string());
    let done = tokio::task::spawn_blocking(move || {
        crate::interop::run_with_timeout(cmd, Duration::from_secs(120))
    })
    .await
    .unwrap();
    assert!(
        done.success(),
        "ts-client {}: {} {}",
        done.describe(),
        done.stdout,
        done.stderr
    );
    let r: Value = serde_json::from_str(done.stdout.trim()).unwrap();
    let id = r["sessionId"].as_str().unwrap().to_string();
    assert!(id.starts_with("s1"), "{r}");
    let results = &r["results"];
    assert!(results[0]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .any(|t| t["name"] == "fx_echo"));
    assert_eq!(results[1]["structuredContent"], json!({"n": 1}));
    assert_eq!(results[2]["structuredContent"], json!({"n": 2}));
    assert_eq!(
        results[3]["messages"][0]["content"]["text"],
        json!("This is a simple prompt for testing.")
    );
    assert_eq!(
        results[4]["contents"][0]["uri"],
        json!("test://static-text")
    );
    assert_eq!(results[7]["content"][0]["text"], json!("Logging evaluated"));
    assert_eq!(results[8]["structuredContent"], json!({"n": 3}));
    // The level set on one replica silenced the info log on whichever ran the tool.
    let logs: Vec<&Value> = r["notifications"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|n| n["method"] == "notifications/message")
        .collect();
    assert!(logs.is_empty(), "{logs:?}");
    assert_eq!(cl.taken_up_by(&id), 2);
    // terminateSession (DELETE) ended it on every replica.
    for rep in &cl.replicas {
        let resp = on(&rep.url(), &id)
            .post(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}))
            .await;
        assert_eq!(resp.status, 404);
    }
}

/// One fixture over HTTP shared by every replica: a list change one replica hears reaches
/// every replica's lists (they re-read them), and the session's GET stream on another replica
/// hears it once.
#[tokio::test]
async fn a_list_change_reaches_every_replica_and_the_get_stream_once() {
    let (_fx, fx_url) = sluice_e2e::start_fixture_http(&[]);
    let home = sluice_e2e::tree::Home::new("cluster-lists");
    home.expose(&json!({"upstreams": [
        {"id": "fx", "transport": "http", "url": fx_url, "expose_all": true, "era": "handshake"}
    ]}));
    // Legacy era: only the upstream session of the client that changed the list hears it (no
    // listen streams), so the other replicas serving that client learn it from the one that
    // heard it, and re-read the client's own upstream sessions.
    let cl = Cluster::start("lists", home, json!({}));
    let [a, c] = [&cl.replicas[0], &cl.replicas[2]];
    let mut ca = Client::new(&a.url());
    ca.initialize(json!({})).await;
    let id = ca.session.clone().unwrap();
    let uri = "test://static-text";
    ca.request("resources/subscribe", json!({"uri": uri})).await;
    for r in &cl.replicas {
        assert!(!on(&r.url(), &id)
            .tool_names()
            .await
            .contains(&"fx_dynamic_0".to_string()));
    }
    let mut stream = SseReader::new(on(&c.url(), &id).open_get(None).await);
    let r = ca.call_tool("fx_trigger_list_changed", json!({})).await;
    assert_eq!(r["result"]["content"][0]["text"], json!("ok"), "{r}");
    let (_, msg) = next_event(&mut stream).await;
    assert_eq!(
        msg["method"],
        json!("notifications/tools/list_changed"),
        "{msg}"
    );
    // Every replica lists the new tool (bounded wait: they re-read the upstream's lists).
    for r in &cl.replicas {
        let c = on(&r.url(), &id);
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while !c.tool_names().await.contains(&"fx_dynamic_0".to_string()) {
            assert!(
                std::time::Instant::now() < deadline,
                "replica {} never listed it",
                r.port
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    // The next event is the next thing that happened, not the same change told again by the
    // other replicas.
    ca.call_tool("fx_touch_resource", json!({"uri": uri})).await;
    let (_, msg) = next_event(&mut stream).await;
    assert_eq!(
        msg["method"],
        json!("notifications/resources/updated"),
        "{msg}"
    );
}

/// A client's cancellation that lands on another replica than its call stops the call there.
#[tokio::test]
async fn a_cancellation_sent_to_another_replica_stops_the_call() {
    let cl = Cluster::start("cancel", fixture_home("cluster-cancel"), json!({}));
    let mut ca = Client::new(&cl.replicas[0].url());
    ca.initialize(json!({})).await;
    let id = ca.session.clone().unwrap();
    let cb = on(&cl.replicas[1].url(), &id);
    let slow = ca.post(
        json!({"jsonrpc": "2.0", "id": "slow-1", "method": "tools/call",
        "params": {"name": "fx_slow", "arguments": {"ms": 20000}}}),
    );
    let cancel = async {
        tokio::time::sleep(Duration::from_millis(300)).await;
        let r = cb
            .post(
                json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                "params": {"requestId": "slow-1", "reason": "changed my mind"}}),
            )
            .await;
        assert_eq!(r.status, 202);
    };
    let (resp, ()) = tokio::join!(slow, cancel);
    assert_eq!(
        resp.reply()["error"]["message"],
        json!("Request cancelled by the client"),
        "{}",
        resp.body
    );
}
