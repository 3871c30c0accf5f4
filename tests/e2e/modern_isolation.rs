//! `"isolation": "session"` for 2026-07-28 clients, which have no session: each principal gets
//! its own upstream process (two principals never share one, one principal keeps its own).

use serde_json::{json, Value};
use sluice_e2e::mcp::finish;
use sluice_e2e::tree::Home;
use sluice_e2e::{bin, start_sluice};

const V: &str = "2026-07-28";

/// `whoami` of the isolated upstream, as a 2026-07-28 client with `token`.
async fn whoami(url: &str, token: &str) -> String {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "own_whoami", "arguments": {},
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": V,
            "io.modelcontextprotocol/clientInfo": {"name": "sluice-e2e", "version": "1"},
            "io.modelcontextprotocol/clientCapabilities": {}
        }
    }});
    let r = reqwest::Client::new()
        .post(url)
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .header("mcp-protocol-version", V)
        .header("mcp-method", "tools/call")
        .header("mcp-name", "own_whoami")
        .header("authorization", format!("Bearer {token}"))
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    let r = finish(r).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let reply: Value = r.reply();
    let text = reply["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("{reply}"));
    // "<name> pid=<pid>": the process, whatever session id it was given.
    text.split(" session=").next().unwrap().to_string()
}

#[tokio::test]
async fn isolated_stdio_upstreams_give_each_modern_principal_its_own_process() {
    let home = Home::new("modern-isolation");
    home.expose(&json!({"upstreams": [
        {"id": "own", "command": bin("sluice-fixture").to_string_lossy(), "args": ["--stdio"],
         "expose_all": true, "isolation": "session"}
    ]}));
    crate::auth::bearer_tokens(
        &home,
        &[("alice", "alice-secret-0001"), ("bob", "bob-secret-00002")],
    );
    let (_gw, url) = start_sluice(&["--home", &home.arg(), "--no-admin"]);
    let alice = whoami(&url, "alice-secret-0001").await;
    let bob = whoami(&url, "bob-secret-00002").await;
    assert_ne!(alice, bob, "two principals never share a process");
    assert_eq!(
        alice,
        whoami(&url, "alice-secret-0001").await,
        "and each keeps its own"
    );
    assert_eq!(bob, whoami(&url, "bob-secret-00002").await);
}
