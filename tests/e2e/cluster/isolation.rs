//! `"isolation": "session"` across replicas: the session's own process lives on the replica
//! that started it, and calls that land elsewhere are handed to it; when it is gone, calls to
//! that upstream answer -32000 naming it and why, and the session's other upstreams work on.

use super::Cluster;
use serde_json::{json, Value};
use sluice_e2e::bin;
use sluice_e2e::mcp::Client;
use sluice_e2e::tree::Home;

fn on(url: &str, id: &str) -> Client {
    let mut c = Client::new(url);
    c.session = Some(id.to_string());
    c
}

fn text(r: &Value) -> String {
    r["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("{r}"))
        .to_string()
}

#[tokio::test]
async fn a_sessions_own_process_serves_it_from_every_replica_until_its_replica_goes() {
    let home = Home::new("cluster-isolation");
    let fixture = bin("sluice-fixture").to_string_lossy().into_owned();
    home.expose(&json!({"upstreams": [
        {"id": "fx", "command": fixture, "args": ["--stdio"], "expose_all": true},
        {"id": "own", "command": fixture, "args": ["--stdio"], "expose_all": true, "isolation": "session"}
    ]}));
    let mut cl = Cluster::start("isolation", home, json!({}));
    let mut a = Client::new(&cl.replicas[0].url());
    a.initialize(json!({})).await;
    let id = a.session.clone().unwrap();
    let mine = text(&a.call_tool("own_whoami", json!({})).await);
    let (b, c) = (
        on(&cl.replicas[1].url(), &id),
        on(&cl.replicas[2].url(), &id),
    );
    // The same process answers, wherever the call lands.
    assert_eq!(text(&b.call_tool("own_whoami", json!({})).await), mine);
    assert_eq!(text(&c.call_tool("own_whoami", json!({})).await), mine);
    // Another session has its own.
    let mut other = Client::new(&cl.replicas[1].url());
    other.initialize(json!({})).await;
    assert_ne!(text(&other.call_tool("own_whoami", json!({})).await), mine);

    cl.replicas[0].kill9();
    let r = b.call_tool("own_whoami", json!({})).await;
    assert_eq!(r["error"]["code"], json!(-32000), "{r}");
    assert_eq!(r["error"]["data"]["upstream"], json!("own"), "{r}");
    let replica = r["error"]["data"]["replica"].as_str().unwrap();
    assert_eq!(
        r["error"]["message"],
        json!(format!("Upstream 'own' is unavailable: this session's own process runs on replica {replica}, which is gone (the process and its state went with it; the next call starts a new one)"))
    );
    // The session's other upstreams keep working, and the next call gets a new process.
    let r = b.call_tool("fx_echo", json!({"n": 1})).await;
    assert_eq!(r["result"]["structuredContent"], json!({"n": 1}), "{r}");
    let fresh = text(&b.call_tool("own_whoami", json!({})).await);
    assert_ne!(fresh, mine);
    assert_eq!(text(&c.call_tool("own_whoami", json!({})).await), fresh);
}
