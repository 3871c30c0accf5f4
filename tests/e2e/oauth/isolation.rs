//! Per-user isolation on one gateway (`"oauth": {"mode": "per_user"}`): alice's grant never
//! serves bob, and the other way round, whichever road a call takes — a direct call, calls of
//! both at once, the funnel's `sluice_run_tool`, a call parked on a consent whose stream the
//! client dropped and resumed with `Last-Event-ID` — and a principal who has not connected is
//! never served with someone else's grant (asked to connect, -32042). The in-process OAuth
//! server says whose grant served each call (`sub=`). The hooks see who called (`principal`)
//! and which upstream identity served the call (`upstream_sub`), and never a token.
//!
//! Tasks too: with the in-process server running `whoami` as a 2025-11-25 task, a user's task
//! is created and collected with their own grant, and another user can neither read nor
//! collect it.
//!
//! The helpers (a browser that confirms a connect link, a raw client's consent round) are
//! shared with the cluster test (`cluster.rs`).

use super::server::OAuthServer;
use super::support::login;
use serde_json::{json, Value};
use sluice_e2e::mcp::{Client, SseReader};
use sluice_e2e::tree::Home;
use sluice_e2e::{free_port, Proc};
use std::time::{Duration, Instant};

const VAULT_KEY: &str = "q83vEjRWeJCrze8SNFZ4kKvN7xI0VniQq83vEjRWeJA=";

/// Open a connect link as `user`'s browser would: the confirmation page (its CSRF token in the
/// form and in its cookie), the form posted back, then every redirect — the authorization
/// server signs `user` in (`x-test-user`) and sends the browser to the callback. The final
/// page's status and text.
pub(super) async fn browse(link: &str, user: &str) -> (u16, String) {
    let mut h = reqwest::header::HeaderMap::new();
    h.insert("x-test-user", user.parse().unwrap());
    let browser = reqwest::Client::builder()
        .default_headers(h)
        .redirect(reqwest::redirect::Policy::limited(10))
        .build()
        .unwrap();
    let page = browser.get(link).send().await.unwrap();
    assert_eq!(page.status(), 200, "the confirmation page of {user}'s link");
    let cookie = page.headers()["set-cookie"]
        .to_str()
        .unwrap()
        .split(';')
        .next()
        .unwrap()
        .to_string();
    let text = page.text().await.unwrap();
    let csrf = text
        .split("name=csrf value=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .unwrap_or_else(|| panic!("no CSRF token in the page: {text}"))
        .to_string();
    let done = browser
        .post(link)
        .header("cookie", cookie)
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!("csrf={csrf}"))
        .send()
        .await
        .unwrap();
    let status = done.status().as_u16();
    (status, done.text().await.unwrap())
}

/// The texts of a tool result (`grant #n`, `sub=…`), or a panic naming the reply.
pub(super) fn texts(r: &Value) -> Vec<String> {
    r["result"]["content"]
        .as_array()
        .unwrap_or_else(|| panic!("not a tool result: {r}"))
        .iter()
        .map(|c| c["text"].as_str().unwrap().to_string())
        .collect()
}

/// Whose grant served the call: the `sub=` the server said.
pub(super) fn sub_of(r: &Value) -> String {
    texts(r)
        .into_iter()
        .find_map(|t| t.strip_prefix("sub=").map(str::to_string))
        .unwrap_or_else(|| panic!("no sub in {r}"))
}

/// A session at `url` as the holder of `token`, once it lists `tool` (bounded), with the
/// client's `capabilities`.
pub(super) async fn session_listing(url: &str, token: &str, caps: Value, tool: &str) -> Client {
    let until = Instant::now() + Duration::from_secs(20);
    loop {
        let mut c = Client::with_bearer(url, token);
        c.initialize(caps.clone()).await;
        if c.tool_names().await.iter().any(|n| n == tool) {
            return c;
        }
        assert!(Instant::now() < until, "{tool} never listed at {url}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A client without URL elicitation connects `user`: its call is answered -32042 with the link,
/// the link is opened as `user`'s browser, and the next call is served with `user`'s own grant.
pub(super) async fn connect_by_link(c: &Client, tool: &str, user: &str) {
    let asked = c.call_tool(tool, json!({})).await;
    assert_eq!(asked["error"]["code"], -32042, "{asked}");
    let link = asked["error"]["data"]["elicitations"][0]["url"]
        .as_str()
        .unwrap_or_else(|| panic!("no link: {asked}"))
        .to_string();
    let (status, page) = browse(&link, user).await;
    assert_eq!(status, 200, "{page}");
    let served = c.call_tool(tool, json!({})).await;
    assert_eq!(sub_of(&served), user, "{served}");
}

/// A call parked on a consent, as a handshake client that answers URL elicitations sees it:
/// the POST's stream carries `elicitation/create` first; its event id, the request's id and
/// the link. The stream is dropped here (the client went away before it was answered).
pub(super) async fn parked_call(c: &Client, tool: &str, id: u64) -> (String, Value, String) {
    let resp = c
        .post_streaming(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": tool, "arguments": {}}}))
        .await;
    assert_eq!(resp.status(), 200);
    let mut stream = SseReader::new(resp);
    let (event, ask) = stream.next().await.expect("the elicitation on the stream");
    assert_eq!(ask["method"], "elicitation/create", "{ask}");
    assert_eq!(ask["params"]["mode"], "url", "{ask}");
    let link = ask["params"]["url"].as_str().unwrap().to_string();
    (
        event.expect("the elicitation's event id"),
        ask["id"].clone(),
        link,
    )
}

/// Answer the gateway's elicitation `id` with `accept` on the session of `c`.
pub(super) async fn accept(c: &Client, id: &Value) {
    let r = c
        .post(json!({"jsonrpc": "2.0", "id": id, "result": {"action": "accept"}}))
        .await;
    assert_eq!(r.status, 202, "{}", r.body);
}

/// The messages of a resumed stream up to the reply to `id` (bounded by the reader's 20 s).
pub(super) async fn resumed_until_reply(resp: reqwest::Response, id: u64) -> Vec<Value> {
    let mut stream = SseReader::new(resp);
    let mut seen = Vec::new();
    while let Some((_, m)) = stream.next().await {
        let done = m["id"] == json!(id) && m.get("method").is_none();
        seen.push(m);
        if done {
            return seen;
        }
    }
    panic!("the stream ended before the reply: {seen:?}");
}

const ENV: [(&str, &str); 1] = [("SLUICE_E2E_VAULT_KEY", VAULT_KEY)];

/// A tree whose upstream `remote` (the in-process server) acts as each user, the gateway on
/// `port`, with the funnel when `funnel`, and these people's bearer tokens (`<name>-token`).
fn per_user_tree(
    label: &str,
    server: &OAuthServer,
    port: u16,
    funnel: bool,
    people: &[&str],
) -> Home {
    let home = Home::new(label);
    home.write(
        "sluice.json",
        &json!({
            "listen": format!("127.0.0.1:{port}"),
            "vault": {"key": "${env:SLUICE_E2E_VAULT_KEY}"},
            "funnel": funnel,
            "restart_initial_ms": 100,
            "restart_max_ms": 300,
        })
        .to_string(),
    );
    home.expose(&json!({"version": 1, "upstreams": [
        {"id": "remote", "transport": "http", "url": server.mcp_url(), "era": "handshake",
         "expose_all": true, "oauth": {"mode": "per_user"}}
    ]}));
    let tokens: Vec<(&str, String)> = people.iter().map(|p| (*p, format!("{p}-token"))).collect();
    let tokens: Vec<(&str, &str)> = tokens.iter().map(|(p, t)| (*p, t.as_str())).collect();
    crate::auth::bearer_tokens(&home, &tokens);
    home
}

/// The gateway on `home`, signed in by the operator (whose login lists the tools for everyone
/// and never serves a user's call), with alice and bob each connected: the gateway, its MCP
/// URL and their sessions.
async fn alice_and_bob_connected(home: &Home, port: u16) -> (Proc, String, Client, Client) {
    let gw = super::support::serve(home, port, &["--no-admin"], &ENV, None);
    let url = format!("http://127.0.0.1:{port}/mcp");
    login(home, "remote", &ENV).await;
    let alice = session_listing(&url, "alice-token", json!({}), "remote_whoami").await;
    let bob = session_listing(&url, "bob-token", json!({}), "remote_whoami").await;
    connect_by_link(&alice, "remote_whoami", "alice").await;
    connect_by_link(&bob, "remote_whoami", "bob").await;
    (gw, url, alice, bob)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_users_grant_never_serves_another() {
    let server = OAuthServer::start(3600).await;
    let port = free_port();
    let people = ["alice", "bob", "carol", "erin"];
    let home = per_user_tree("oauth-isolation", &server, port, true, &people);
    home.write(
        "hooks/hooks.manifest.json",
        &json!({"version": 1, "hooks": [
            {"id": "keep-requests", "event": "PreToolUse", "type": "command",
             "command": "cat >> \"${HOOKS_DIR}/payloads.jsonl\"; echo >> \"${HOOKS_DIR}/payloads.jsonl\"", "enabled": true},
            {"id": "keep-responses", "event": "PostToolUse", "type": "command",
             "command": "cat >> \"${HOOKS_DIR}/payloads.jsonl\"; echo >> \"${HOOKS_DIR}/payloads.jsonl\"", "enabled": true}
        ]})
        .to_string(),
    );
    let (_gw, url, alice, bob) = alice_and_bob_connected(&home, port).await;

    // Calls of both at once, each served with its own grant.
    let calls: Vec<_> = (0..6)
        .map(|i| {
            let (c, who) = if i % 2 == 0 {
                (&alice, "alice")
            } else {
                (&bob, "bob")
            };
            async move { (who, c.call_tool("remote_whoami", json!({})).await) }
        })
        .collect();
    for (who, r) in futures_util::future::join_all(calls).await {
        assert_eq!(sub_of(&r), who, "{r}");
    }

    // Through the funnel's run tool: the real call is the caller's own.
    let run = json!({"name": "remote_whoami", "args": {}});
    let r = alice.call_tool("sluice_run_tool", run.clone()).await;
    assert_eq!(sub_of(&r), "alice", "{r}");
    let r = bob.call_tool("sluice_run_tool", run.clone()).await;
    assert_eq!(sub_of(&r), "bob", "{r}");
    // erin has not connected: through the funnel too she is asked, never served with a grant.
    let erin = session_listing(&url, "erin-token", json!({}), "remote_whoami").await;
    let r = erin.call_tool("sluice_run_tool", run.clone()).await;
    assert_eq!(r["error"]["code"], -32042, "{r}");
    let r = erin.call_tool("remote_whoami", json!({})).await;
    assert_eq!(r["error"]["code"], -32042, "{r}");

    // carol's call parks on her consent; her client drops the stream, connects, and resumes
    // it: the reply is served with her grant. bob cannot read her stream.
    let carol = session_listing(
        &url,
        "carol-token",
        json!({"elicitation": {"url": {}}}),
        "remote_whoami",
    )
    .await;
    let (event, ask_id, link) = parked_call(&carol, "remote_whoami", 77).await;
    let mut thief = Client::with_bearer(&url, "bob-token");
    thief.session = carol.session.clone();
    assert_eq!(
        thief.open_get(Some(&event)).await.status(),
        404,
        "another principal's token on carol's session"
    );
    let bobs_own = bob.open_get(Some(&event)).await.status();
    assert_eq!(bobs_own, 404, "carol's stream from bob's own session");
    accept(&carol, &ask_id).await;
    let (status, page) = browse(&link, "carol").await;
    assert_eq!(status, 200, "{page}");
    let resumed = carol.open_get(Some(&event)).await;
    assert_eq!(resumed.status(), 200);
    let seen = resumed_until_reply(resumed, 77).await;
    let reply = seen.last().unwrap();
    assert_eq!(sub_of(reply), "carol", "{seen:?}");
    assert_eq!(
        seen[0]["method"], "notifications/elicitation/complete",
        "{seen:?}"
    );

    // Still each their own, after all of that.
    let r = alice.call_tool("remote_whoami", json!({})).await;
    assert_eq!(sub_of(&r), "alice", "{r}");
    let r = bob.call_tool("remote_whoami", json!({})).await;
    assert_eq!(sub_of(&r), "bob", "{r}");

    // The hooks saw who called and whose upstream identity served it, never a token.
    let payloads = std::fs::read_to_string(home.path().join("hooks/payloads.jsonl")).unwrap();
    let events: Vec<Value> = payloads
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .filter(|e: &Value| e["tool_name"] == "remote_whoami")
        .collect();
    let served: Vec<&Value> = events
        .iter()
        .filter(|e| e["hook_event_name"] == "PostToolUse")
        .filter(|e| e["tool_response"]["content"][1]["text"].is_string())
        .collect();
    // alice and bob: connected (2), at once (6), through the funnel (2), again (2); carol's.
    assert_eq!(served.len(), 13, "{payloads}");
    for e in &served {
        let sub = e["tool_response"]["content"][1]["text"]
            .as_str()
            .unwrap()
            .trim_start_matches("sub=")
            .to_string();
        assert_eq!(e["principal"]["id"], json!(sub), "{e}");
        assert_eq!(e["principal"]["kind"], "token", "{e}");
        assert_eq!(e["upstream"], "remote", "{e}");
        assert_eq!(e["upstream_sub"], json!(sub), "{e}");
    }
    // erin holds no grant: no upstream identity is named for her calls.
    let erins: Vec<&Value> = events
        .iter()
        .filter(|e| e["principal"]["id"] == "erin")
        .collect();
    // PreToolUse of her two calls (through the funnel and direct); no hook takes failures.
    assert_eq!(erins.len(), 2, "{erins:#?}");
    for e in erins {
        assert_eq!(e["hook_event_name"], "PreToolUse", "{e}");
        assert_eq!(e.get("upstream_sub"), None, "{e}");
    }
    // Before a call of a connected principal, the hooks see the identity that will serve it.
    let before: Vec<&Value> = events
        .iter()
        .filter(|e| e["hook_event_name"] == "PreToolUse" && e["principal"]["id"] == "bob")
        .collect();
    // bob's calls: asked to connect, served, three at once, through the funnel, the last one.
    assert_eq!(before.len(), 7, "{before:#?}");
    assert_eq!(before[0].get("upstream_sub"), None, "not connected yet");
    for e in &before[1..] {
        assert_eq!(e["upstream_sub"], "bob", "{e}");
    }
    for secret in server.ledger.lock().unwrap().secrets() {
        assert!(
            !payloads.contains(&secret),
            "a token reached a hook payload"
        );
    }
    assert!(!payloads.contains("Bearer"), "a bearer reached a hook");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_users_task_is_created_and_collected_with_their_own_grant() {
    let server = OAuthServer::start(3600).await;
    server.behaviour.lock().unwrap().tasks = true;
    let port = free_port();
    let home = per_user_tree(
        "oauth-isolation-tasks",
        &server,
        port,
        false,
        &["alice", "bob"],
    );
    let (_gw, _url, alice, bob) = alice_and_bob_connected(&home, port).await;

    let task = json!({"name": "remote_whoami", "arguments": {}, "task": {"ttl": 60000}});
    let (a, b) = tokio::join!(
        alice.request("tools/call", task.clone()),
        bob.request("tools/call", task.clone())
    );
    let id_of = |r: &Value| {
        r["result"]["task"]["taskId"]
            .as_str()
            .unwrap_or_else(|| panic!("not a task: {r}"))
            .to_string()
    };
    let (a, b) = (id_of(&a), id_of(&b));
    assert!(
        a.starts_with("sluice-task-") && b.starts_with("sluice-task-"),
        "{a} {b}"
    );

    // Each collects their own, created and fetched with their own grant.
    for (c, id, who) in [(&alice, &a, "alice"), (&bob, &b, "bob")] {
        let got = c.request("tasks/get", json!({"taskId": id})).await;
        assert_eq!(got["result"]["status"], "completed", "{got}");
        let r = c.request("tasks/result", json!({"taskId": id})).await;
        assert_eq!(sub_of(&r), who, "{r}");
        assert_eq!(texts(&r)[2], format!("fetched_by={who}"), "{r}");
    }
    // bob cannot read or collect alice's task: as a task that does not exist.
    for method in ["tasks/get", "tasks/result"] {
        let r = bob.request(method, json!({"taskId": a})).await;
        let unknown = bob
            .request(method, json!({"taskId": "sluice-task-none"}))
            .await;
        assert_eq!(
            r["error"]["code"], unknown["error"]["code"],
            "{method}: {r}"
        );
        assert_eq!(r["error"]["code"], -32602, "{method}: {r}");
    }
    let listed = bob.request("tasks/list", json!({})).await;
    let ids: Vec<&str> = listed["result"]["tasks"]
        .as_array()
        .unwrap_or_else(|| panic!("{listed}"))
        .iter()
        .map(|t| t["taskId"].as_str().unwrap())
        .collect();
    assert_eq!(ids, [b.as_str()], "bob lists his own task only");
}
