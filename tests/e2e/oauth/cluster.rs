//! OAuth upstreams across the replicas of a cluster, whose vault is the cluster's Redis.
//!
//! - A shared identity across two replicas: the grant one replica's callback stored serves
//!   both, and when the upstream stops taking the token, both replicas' calls go through after
//!   one refresh, not two (the vault's lock).
//! - Per-user connections across three replicas behind the tests' nginx (`public_url` is
//!   nginx's address; its `/oauth/` goes to the two replicas other than the one where the
//!   calls are parked): a consent started on one replica is completed on another, and the call
//!   parked on the first goes on with the user's own grant; a 2026-07-28 client's retry on
//!   another replica is served with its own grant (another principal's retry with its state is
//!   refused); a parked call's stream is resumed on another replica; each user's grant is
//!   refreshed once across the replicas; a connection revoked on one replica is forgotten by
//!   the others (told through the bus), so no replica serves the user with the revoked grant.

use super::isolation::{accept, browse, parked_call, resumed_until_reply, session_listing, sub_of};
use super::server::OAuthServer;
use super::support::{listed, login, text_of};
use crate::cluster::{keygen, nginx_config, Redis, Replica, Scratch};
use serde_json::{json, Value};
use sluice_e2e::mcp::{finish, Client, SseReader};
use sluice_e2e::tree::Home;
use sluice_e2e::{free_port, wait_for_port, Proc};
use std::process::Command;
use std::time::Duration;

const VAULT_KEY: &str = "q83vEjRWeJCrze8SNFZ4kKvN7xI0VniQq83vEjRWeJA=";

fn replica(home: &Home, port: u16) -> Proc {
    let listen = format!("127.0.0.1:{port}");
    super::support::serve(home, port, &["--no-admin", "--listen", &listen], &[], None)
}

/// `remote_whoami` called once listed: the session and the reply.
async fn call_when_listed(url: &str) -> (Client, Value) {
    let c = listed(url, "remote_whoami").await;
    let r = c.call_tool("remote_whoami", json!({})).await;
    (c, r)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_share_one_grant_and_refresh_it_once() {
    let redis = Redis::start();
    let server = OAuthServer::start(3600).await;
    let (a, b) = (free_port(), free_port());
    let home = Home::new("oauth-cluster");
    home.write(
        "sluice.json",
        &json!({
            "public_url": format!("http://127.0.0.1:{a}"),
            "vault": {"key": VAULT_KEY},
            "cluster": {"key": keygen(), "redis": redis.url()},
            "restart_initial_ms": 100,
            "restart_max_ms": 300,
        })
        .to_string(),
    );
    home.expose(&json!({"version": 1, "upstreams": [
        {"id": "remote", "transport": "http", "url": server.mcp_url(), "era": "handshake",
         "expose_all": true, "oauth": {"mode": "shared"}}
    ]}));
    let _ra = replica(&home, a);
    let _rb = replica(&home, b);

    // Signed in once, through replica A's callback.
    login(&home, "remote", &[]).await;

    // Both replicas serve with it.
    let (ca, r) = call_when_listed(&format!("http://127.0.0.1:{a}/mcp")).await;
    assert_eq!(text_of(&r), "grant #1");
    let (cb, r) = call_when_listed(&format!("http://127.0.0.1:{b}/mcp")).await;
    assert_eq!(text_of(&r), "grant #1");
    assert_eq!(server.ledger.lock().unwrap().grants, ["authorization_code"]);

    // The grant is in Redis, sealed.
    let token = server.ledger.lock().unwrap().access[0].0.clone();
    let stored = redis.command(&["GET", "sluice:vault:oauth.grants:upstream:remote"]);
    assert!(stored.len() > 100, "the sealed grant: {stored:?}");
    assert!(
        !stored.contains(&token),
        "the vault in Redis holds the token in clear"
    );

    // The upstream stops taking the token: both replicas call at once; one refresh serves both.
    server.expire_access();
    let (ra, rb) = tokio::join!(
        ca.call_tool("remote_whoami", json!({})),
        cb.call_tool("remote_whoami", json!({}))
    );
    assert_eq!(text_of(&ra), "grant #2", "{ra}");
    assert_eq!(text_of(&rb), "grant #2", "{rb}");
    assert_eq!(
        server.ledger.lock().unwrap().grants,
        ["authorization_code", "refresh_token"]
    );
}

/// nginx on `port` as the cluster tests run it (`/mcp` round-robin over `mcp`), plus
/// `location /oauth/` over `oauth` only, as docs/deployment.md routes it.
fn nginx(dir: &std::path::Path, port: u16, mcp: &[u16], oauth: &[u16]) -> Proc {
    let servers: String = oauth
        .iter()
        .map(|p| format!("        server 127.0.0.1:{p} max_fails=0;\n"))
        .collect();
    let conf = nginx_config(dir, port, mcp)
        .replacen(
            "    server {\n",
            &format!("    upstream sluice_oauth {{\n{servers}    }}\n    server {{\n"),
            1,
        )
        .replacen(
            "        location /mcp {",
            "        location /oauth/ {\n            proxy_pass http://sluice_oauth;\n            proxy_set_header Host $host;\n        }\n        location /mcp {",
            1,
        );
    assert!(conf.contains("location /oauth/"), "{conf}");
    let path = dir.join("nginx.conf");
    std::fs::write(&path, conf).unwrap();
    let program = ["/usr/sbin/nginx", "/usr/bin/nginx"]
        .into_iter()
        .find(|p| std::path::Path::new(p).is_file())
        .expect("nginx is installed (apt-get install nginx)");
    let mut cmd = Command::new(program);
    cmd.arg("-p")
        .arg(dir)
        .arg("-c")
        .arg(&path)
        .arg("-e")
        .arg(dir.join("error.log"));
    let p = Proc::spawn(cmd);
    wait_for_port(port, Duration::from_secs(20));
    p
}

const MODERN: &str = "2026-07-28";

/// One 2026-07-28 `tools/call` of `tool` with `token` at `url` (`extra` merged into its params).
async fn modern_call(url: &str, token: &str, id: u64, tool: &str, extra: Value) -> Value {
    let mut params = json!({"name": tool, "arguments": {}, "_meta": {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientInfo": {"name": "sluice-e2e", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"url": {}}},
    }});
    for (k, v) in extra.as_object().into_iter().flatten() {
        params[k] = v.clone();
    }
    let body = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params});
    let r = reqwest::Client::new()
        .post(url)
        .bearer_auth(token)
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .header("mcp-protocol-version", MODERN)
        .header("mcp-method", "tools/call")
        .header("mcp-name", tool)
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    let r = finish(r).await;
    assert_eq!(r.status, 200, "{}", r.body);
    r.reply()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consent_started_on_one_replica_is_completed_on_another() {
    let redis = Redis::start();
    let server = OAuthServer::start(3600).await;
    let dir = Scratch::new("oauth-per-user");
    let edge = free_port();
    let public = format!("http://127.0.0.1:{edge}");
    let home = Home::new("oauth-cluster-per-user");
    home.write(
        "sluice.json",
        &json!({
            "public_url": public,
            "vault": {"key": VAULT_KEY},
            "cluster": {"key": "${env:SLUICE_CLUSTER_KEY}", "redis": redis.url()},
            "restart_initial_ms": 100,
            "restart_max_ms": 300,
        })
        .to_string(),
    );
    home.expose(&json!({"version": 1, "upstreams": [
        {"id": "remote", "transport": "http", "url": server.mcp_url(), "era": "handshake",
         "expose_all": true, "oauth": {"mode": "per_user"}}
    ]}));
    crate::auth::bearer_tokens(
        &home,
        &[
            ("alice", "alice-token"),
            ("bob", "bob-token"),
            ("carol", "carol-token"),
        ],
    );
    let key = keygen();
    let cluster_key = key.clone();
    let replicas: Vec<Replica> = (0..3)
        .map(|i| Replica::start(&home, &key, dir.0.join(format!("replica-{i}.log"))))
        .collect();
    let ports: Vec<u16> = replicas.iter().map(|r| r.port).collect();
    // Calls are parked on replica 0; browsers reach only 1 and 2.
    let _nginx = nginx(&dir.0, edge, &ports, &ports[1..]);
    let (a, b, c) = (replicas[0].url(), replicas[1].url(), replicas[2].url());
    let through = format!("{public}/mcp");

    // The operator's login (its callback through nginx) lists the tools for everyone.
    login(&home, "remote", &[("SLUICE_CLUSTER_KEY", &key)]).await;

    // alice's call is parked on replica 0 until she connects; she answers the question through
    // nginx, and her browser's callback lands on replica 1 or 2: the call goes on, as her.
    let caps = json!({"elicitation": {"url": {}}});
    let alice = session_listing(&a, "alice-token", caps.clone(), "remote_whoami").await;
    let resp = alice
        .post_streaming(json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call",
            "params": {"name": "remote_whoami", "arguments": {}}}))
        .await;
    assert_eq!(resp.status(), 200);
    let mut stream = SseReader::new(resp);
    let (_, ask) = stream.next().await.expect("the question");
    assert_eq!(ask["method"], "elicitation/create", "{ask}");
    let link = ask["params"]["url"].as_str().unwrap().to_string();
    assert!(
        link.starts_with(&format!("{public}/oauth/connect/")),
        "{link}"
    );
    let mut edge_client = Client::with_bearer(&through, "alice-token");
    edge_client.session = alice.session.clone();
    accept(&edge_client, &ask["id"]).await;
    let (status, page) = browse(&link, "alice").await;
    assert_eq!(status, 200, "{page}");
    let (_, done) = stream.next().await.expect("the consent's end");
    assert_eq!(
        done["method"], "notifications/elicitation/complete",
        "{done}"
    );
    assert_eq!(
        done["params"]["elicitationId"], ask["params"]["elicitationId"],
        "{done}"
    );
    let (_, reply) = stream.next().await.expect("the parked call's reply");
    assert_eq!(reply["id"], 5, "{reply}");
    assert_eq!(sub_of(&reply), "alice", "{reply}");
    let served_on = |line: &str| {
        replicas
            .iter()
            .filter(|r| r.log_text().contains(line))
            .count()
    };
    assert_eq!(
        served_on("a user connected their account; the call goes on"),
        1
    );
    assert!(replicas[0]
        .log_text()
        .contains("a user connected their account; the call goes on"));
    assert!(
        !replicas[0]
            .log_text()
            .contains("a user confirmed a connect link"),
        "the link was confirmed on another replica"
    );

    // bob, 2026-07-28: asked on replica 0, connects, retries on replica 2: served as himself.
    let first = modern_call(&a, "bob-token", 1, "remote_whoami", json!({})).await;
    let r = &first["result"];
    assert_eq!(r["resultType"], "input_required", "{first}");
    let (key, question) = r["inputRequests"]
        .as_object()
        .unwrap()
        .iter()
        .next()
        .map(|(k, v)| (k.clone(), v.clone()))
        .unwrap();
    assert_eq!(question["params"]["mode"], "url", "{first}");
    let state = r["requestState"].as_str().unwrap().to_string();
    let retry = json!({"inputResponses": {&key: {"action": "accept"}}, "requestState": state});
    // carol replays bob's retry with her own token: refused, never served with his grant.
    let stolen = modern_call(&b, "carol-token", 2, "remote_whoami", retry.clone()).await;
    assert_eq!(stolen["error"]["code"], -32602, "{stolen}");
    assert_eq!(
        stolen["error"]["message"], "Invalid requestState: it was issued to another principal",
        "{stolen}"
    );
    let (status, page) = browse(question["params"]["url"].as_str().unwrap(), "bob").await;
    assert_eq!(status, 200, "{page}");
    let served = modern_call(&c, "bob-token", 3, "remote_whoami", retry).await;
    assert_eq!(sub_of(&served), "bob", "{served}");

    // carol's parked call's stream, dropped on replica 0, is resumed on replica 1.
    let carol = session_listing(&a, "carol-token", caps, "remote_whoami").await;
    let (event, ask_id, link) = parked_call(&carol, "remote_whoami", 9).await;
    accept(&carol, &ask_id).await;
    let (status, page) = browse(&link, "carol").await;
    assert_eq!(status, 200, "{page}");
    let mut elsewhere = Client::with_bearer(&b, "carol-token");
    elsewhere.session = carol.session.clone();
    let resumed = elsewhere.open_get(Some(&event)).await;
    assert_eq!(resumed.status(), 200);
    let seen = resumed_until_reply(resumed, 9).await;
    assert_eq!(sub_of(seen.last().unwrap()), "carol", "{seen:?}");

    // Each grant is refreshed once across the replicas: everyone calls on two at once.
    let alice_b = session_listing(&b, "alice-token", json!({}), "remote_whoami").await;
    let carol_c = session_listing(&c, "carol-token", json!({}), "remote_whoami").await;
    let refreshes = || {
        server
            .ledger
            .lock()
            .unwrap()
            .grants
            .iter()
            .filter(|g| *g == "refresh_token")
            .count()
    };
    assert_eq!(refreshes(), 0);
    server.expire_access();
    let (r1, r2, r3, r4, r5, r6) = tokio::join!(
        alice.call_tool("remote_whoami", json!({})),
        alice_b.call_tool("remote_whoami", json!({})),
        modern_call(&a, "bob-token", 4, "remote_whoami", json!({})),
        modern_call(&b, "bob-token", 5, "remote_whoami", json!({})),
        carol.call_tool("remote_whoami", json!({})),
        carol_c.call_tool("remote_whoami", json!({})),
    );
    for (r, who) in [
        (r1, "alice"),
        (r2, "alice"),
        (r3, "bob"),
        (r4, "bob"),
        (r5, "carol"),
        (r6, "carol"),
    ] {
        assert_eq!(sub_of(&r), who, "{r}");
    }
    assert_eq!(refreshes(), 3, "one refresh per user's grant");

    // alice disconnects on replica 0 (the connections tool). The test server has no revocation
    // endpoint, so her token would still work upstream: replica 1, which holds it in memory,
    // is told through the bus, forgets it and closes her connection, and her next call there is
    // asked to connect again, never served with it.
    let gone = alice
        .call_tool(
            "sluice_connections",
            json!({"action": "disconnect", "upstream": "remote"}),
        )
        .await;
    assert_eq!(
        gone["result"]["structuredContent"]["disconnected"], true,
        "{gone}"
    );
    let until = std::time::Instant::now() + Duration::from_secs(10);
    let asked = loop {
        let r = alice_b.call_tool("remote_whoami", json!({})).await;
        if r["error"]["code"] == -32042 {
            break r;
        }
        assert_eq!(sub_of(&r), "alice", "{r}");
        assert!(
            std::time::Instant::now() < until,
            "replica 1 still serves alice with her revoked grant"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(
        asked["error"]["data"]["elicitations"][0]["url"]
            .as_str()
            .unwrap()
            .starts_with(&format!("{public}/oauth/connect/")),
        "{asked}"
    );
    assert!(replicas[1]
        .log_text()
        .contains("a user's connection was revoked on another replica"));

    // `sluice connections revoke` (another process) tells the running replicas through the bus
    // too: bob's next call on replica 1 is asked again.
    let out = Command::new(sluice_e2e::bin("sluice"))
        .args(["connections", "revoke", "--home", &home.arg()])
        .args(["--principal", "token:bob", "--upstream", "remote"])
        .env("SLUICE_CLUSTER_KEY", &cluster_key)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        String::from_utf8_lossy(&out.stdout).starts_with("revoked remote\ttoken:bob"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let until = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let r = modern_call(&b, "bob-token", 6, "remote_whoami", json!({})).await;
        if r["result"]["resultType"] == "input_required" {
            break;
        }
        assert_eq!(sub_of(&r), "bob", "{r}");
        assert!(
            std::time::Instant::now() < until,
            "replica 1 still serves bob with his revoked grant"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
