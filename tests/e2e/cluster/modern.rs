//! 2026-07-28 clients across replicas: a `requestState` Sluice minted for a legacy upstream's
//! input request works when the retry reaches another replica (it is handed to the replica that
//! holds the parked call, and judged there by the endpoint of its URL); when that replica is
//! gone the retry answers -32000 naming it.

use super::{fixture_home_era, Cluster};
use serde_json::{json, Value};
use sluice_e2e::mcp::finish;

const V: &str = "2026-07-28";

async fn modern_call(url: &str, id: u64, params: &Value) -> Value {
    let mut params = params.clone();
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": V,
        "io.modelcontextprotocol/clientInfo": {"name": "sluice-e2e", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}},
    });
    let body = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params});
    let r = reqwest::Client::new()
        .post(url)
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .header("mcp-protocol-version", V)
        .header("mcp-method", "tools/call")
        .header("mcp-name", params["name"].as_str().unwrap())
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    let r = finish(r).await;
    assert_eq!(r.status, 200, "{}", r.body);
    r.reply()
}

/// The first round: the input request's key and the state.
async fn first_round(url: &str, params: &Value) -> (String, String) {
    let first = modern_call(url, 1, params).await;
    let r = &first["result"];
    assert_eq!(r["resultType"], "input_required", "{first}");
    let key = r["inputRequests"]
        .as_object()
        .unwrap()
        .keys()
        .next()
        .unwrap()
        .clone();
    (key, r["requestState"].as_str().unwrap().to_string())
}

#[tokio::test]
async fn a_request_state_minted_on_one_replica_works_on_another() {
    let mut cl = Cluster::start(
        "modern",
        fixture_home_era("cluster-modern", "legacy"),
        json!({}),
    );
    let params = json!({"name": "fx_test_elicitation", "arguments": {"message": "Your name?"}});
    let (key, state) = first_round(&cl.replicas[0].url(), &params).await;
    let mut retry = params.clone();
    retry["inputResponses"] = json!({&key: {"action": "accept", "content": {"response": "Ada"}}});
    retry["requestState"] = json!(state);
    let done = modern_call(&cl.replicas[1].url(), 2, &retry).await;
    assert_eq!(done["id"], json!(2), "{done}");
    assert_eq!(
        done["result"]["content"][0]["text"],
        json!("User response: action=accept, content={\"response\":\"Ada\"}"),
        "{done}"
    );
    // Answered once: the same state again is a call that is gone.
    let again = modern_call(&cl.replicas[2].url(), 3, &retry).await;
    assert_eq!(again["error"]["code"], json!(-32602), "{again}");

    // A tampered state is refused by whichever replica gets it, as on one gateway.
    let (key, state) = first_round(&cl.replicas[0].url(), &params).await;
    let mut bad = params.clone();
    bad["inputResponses"] = json!({&key: {"action": "accept", "content": {"response": "Ada"}}});
    bad["requestState"] = json!(format!("{state}x"));
    let r = modern_call(&cl.replicas[2].url(), 4, &bad).await;
    assert_eq!(r["error"]["code"], json!(-32602), "{r}");
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("Invalid requestState: "),
        "{r}"
    );

    // The replica holding the call is gone: a clear -32000 naming it, from the others.
    cl.replicas[0].kill9();
    let mut retry = params.clone();
    retry["inputResponses"] = json!({&key: {"action": "accept", "content": {"response": "Ada"}}});
    retry["requestState"] = json!(state);
    let r = modern_call(&cl.replicas[1].url(), 5, &retry).await;
    assert_eq!(r["error"]["code"], json!(-32000), "{r}");
    let replica = r["error"]["data"]["replica"].as_str().unwrap().to_string();
    assert_eq!(
        r["error"]["message"],
        json!(format!("The replica holding this call ({replica}) is gone; send the request again without requestState"))
    );
}

/// A retry handed to the replica holding its call is judged there by the endpoint of the URL it
/// came to: at its call's endpoint it is answered with that endpoint's serverInfo (on `/mcp`,
/// the gateway's); at another URL it is refused, and the call waits on.
#[tokio::test]
async fn a_retry_handed_to_another_replica_stays_on_its_endpoint() {
    let home = fixture_home_era("cluster-modern-endpoint", "legacy");
    home.write(
        "mcp/endpoints.json",
        &json!({"version": 1, "endpoints": [{"name": "support", "tools": ["fx_test_elicitation"],
                 "server_name": "support-gw"}]})
        .to_string(),
    );
    let cl = Cluster::start("modern-endpoint", home, json!({}));
    let params = json!({"name": "fx_test_elicitation", "arguments": {"message": "Your name?"}});
    let server =
        |r: &Value| r["result"]["_meta"]["io.modelcontextprotocol/serverInfo"]["name"].clone();
    for (path, name) in [("/support", "support-gw"), ("", "sluice")] {
        let at = |i: usize| format!("{}{path}", cl.replicas[i].url());
        let (key, state) = first_round(&at(0), &params).await;
        let mut retry = params.clone();
        retry["inputResponses"] =
            json!({&key: {"action": "accept", "content": {"response": "Ada"}}});
        retry["requestState"] = json!(state);
        let done = modern_call(&at(1), 2, &retry).await;
        assert_eq!(
            done["result"]["content"][0]["text"],
            json!("User response: action=accept, content={\"response\":\"Ada\"}"),
            "{path}: {done}"
        );
        assert_eq!(server(&done), json!(name), "{path}: {done}");
    }
    // A retry at another URL than its call's is refused, on the replica holding the call and
    // on another alike, and the call waits on for a retry at its own.
    let (key, state) = first_round(&format!("{}/support", cl.replicas[0].url()), &params).await;
    let mut retry = params.clone();
    retry["inputResponses"] = json!({&key: {"action": "accept", "content": {"response": "Ada"}}});
    retry["requestState"] = json!(state);
    for (i, id) in [(0, 3), (1, 4)] {
        let r = modern_call(&cl.replicas[i].url(), id, &retry).await;
        assert_eq!(
            r["error"],
            json!({"code": -32602, "message": "Invalid requestState: the call it continues was begun at another endpoint"}),
            "replica {i}: {r}"
        );
    }
    let done = modern_call(&format!("{}/support", cl.replicas[2].url()), 5, &retry).await;
    assert_eq!(server(&done), json!("support-gw"), "{done}");
}
