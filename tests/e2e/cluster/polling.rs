//! SSE polling across replicas: an upstream that pauses its reply stream makes the client's
//! stream pause too; the client resumes it with `Last-Event-ID` on whichever replica the proxy
//! picks, and the replica that runs the call replays it there.

use super::Cluster;
use serde_json::json;
use sluice_e2e::mcp::{Client, SseReader};
use sluice_e2e::tree::Home;

#[tokio::test]
async fn a_paused_reply_stream_resumes_on_another_replica() {
    let (_fx, fx_url) = sluice_e2e::start_fixture_http(&["--era", "legacy"]);
    let home = Home::new("cluster-polling");
    home.expose(&json!({"upstreams": [
        {"id": "web", "transport": "http", "url": fx_url, "expose_all": true}
    ]}));
    let cl = Cluster::start("polling", home, json!({}));
    let mut a = Client::new(&cl.replicas[0].url());
    a.initialize(json!({})).await;
    let resp = a
        .post_streaming(json!({"jsonrpc": "2.0", "id": 21, "method": "tools/call",
            "params": {"name": "web_test_reconnection", "arguments": {}}}))
        .await;
    assert_eq!(resp.status(), 200);
    let first = sluice_e2e::mcp::finish(resp).await;
    let id_line = first.body.lines().next().unwrap().to_string();
    assert!(
        id_line.starts_with("id: ") && id_line.ends_with("-0"),
        "{:?}",
        first.body
    );
    assert!(
        first.messages().is_empty(),
        "no reply before the pause: {:?}",
        first.body
    );
    let last_id = id_line.trim_start_matches("id: ");

    // Resumed on B, which never ran the call.
    let mut b = Client::new(&cl.replicas[1].url());
    b.session = a.session.clone();
    let get = b.open_get(Some(last_id)).await;
    assert_eq!(get.status(), 200);
    let mut resumed = SseReader::new(get);
    let (eid, reply) = resumed.next().await.expect("the reply after resuming");
    assert_eq!(reply["id"], json!(21), "{reply}");
    assert_eq!(
        reply["result"]["content"][0]["text"],
        json!("Reconnection test completed successfully. If you received this, the client properly reconnected after stream closure.")
    );
    // The event id is the stream's own (the replica that runs it, then the sequence).
    let stream = last_id.split('-').next().unwrap();
    assert!(eid.unwrap().starts_with(&format!("{stream}-")));
    // A stream that does not exist there: 404, as on one gateway.
    let gone = b.open_get(Some(&format!("{stream}9-1"))).await;
    assert_eq!(gone.status(), 404);
}
