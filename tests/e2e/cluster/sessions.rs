//! Any replica serves any legacy session; DELETE ends it everywhere; ids that were not sealed
//! by this cluster for this principal are 404 like unknown ones.

use super::{fixture_home, keygen, Cluster, Replica, NOT_FOUND};
use serde_json::{json, Value};
use sluice_e2e::mcp::Client;
use std::time::{Duration, Instant};

/// The staleness bound docs/deployment.md gives: within this time of a DELETE's answer every
/// other replica answers 404 (the end travels on the bus).
const END_BOUND: Duration = Duration::from_secs(1);

/// How often a replica renews a session it serves, with the default `session_idle_secs`
/// (3600): every 5 s at most, and the record lives that much longer than the idle timeout.
const RENEW: Duration = Duration::from_secs(5);

/// Ask `url` for the session `id` until it answers 404, at most `END_BOUND` after `since`;
/// when it did.
async fn not_found_within_bound(url: &str, id: &str, since: Instant) -> Duration {
    let c = on(url, id, None);
    loop {
        let (status, body) = status_and_body(&c, "tools/list").await;
        let at = since.elapsed();
        if status == 404 {
            assert_eq!(body, NOT_FOUND);
            return at;
        }
        assert_eq!(status, 200, "{body}");
        assert!(
            at <= END_BOUND,
            "{url} still serves the ended session {at:?} after the DELETE"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// DELETE the session `id` on `url`.
async fn delete(url: &str, id: &str) -> u16 {
    let c = on(url, id, None);
    let req = c
        .builder()
        .build()
        .map(|mut req| {
            *req.method_mut() = reqwest::Method::DELETE;
            req
        })
        .unwrap();
    c.http.execute(req).await.unwrap().status().as_u16()
}

/// A raw client on `url` that uses the session `id`.
fn on(url: &str, id: &str, token: Option<&str>) -> Client {
    let mut c = match token {
        Some(t) => Client::with_bearer(url, t),
        None => Client::new(url),
    };
    c.session = Some(id.to_string());
    c
}

async fn status_and_body(c: &Client, method: &str) -> (u16, String) {
    let r = c
        .post(json!({"jsonrpc": "2.0", "id": 9, "method": method, "params": {}}))
        .await;
    (r.status, r.body)
}

#[tokio::test]
async fn any_replica_serves_any_legacy_session_behind_round_robin_nginx() {
    let cl = Cluster::start("any", fixture_home("cluster-any"), json!({}));
    let mut c = Client::new(&cl.nginx.url());
    c.initialize(json!({"sampling": {}})).await;
    let id = c.session.clone().unwrap();
    assert!(id.starts_with("s1"), "a sealed id: {id}");

    // Lists, tools, prompts, resources: each request on the next replica.
    assert!(c.tool_names().await.contains(&"fx_echo".to_string()));
    for n in 0..6 {
        let r = c.call_tool("fx_echo", json!({"n": n})).await;
        assert_eq!(r["result"]["structuredContent"], json!({"n": n}), "{r}");
    }
    let r = c
        .request("prompts/get", json!({"name": "fx_test_simple_prompt"}))
        .await;
    assert_eq!(
        r["result"]["messages"][0]["content"]["text"],
        json!("This is a simple prompt for testing."),
        "{r}"
    );
    let r = c
        .request("resources/read", json!({"uri": "test://static-text"}))
        .await;
    assert_eq!(
        r["result"]["contents"][0]["uri"],
        json!("test://static-text"),
        "{r}"
    );
    // The two other replicas took the session up (round-robin reached both).
    assert_eq!(cl.taken_up_by(&id), 2);

    // What changes lives in Redis: the log level and the subscriptions, written before the
    // answer, so the next request (another replica) sees them.
    let r = c
        .request("logging/setLevel", json!({"level": "error"}))
        .await;
    assert_eq!(r["result"], json!({}), "{r}");
    let r = c
        .request("resources/subscribe", json!({"uri": "test://static-text"}))
        .await;
    assert_eq!(r["result"], json!({}), "{r}");
    let keys = cl.redis.session_keys();
    assert_eq!(keys.len(), 1, "{keys:?}");
    assert!(cl
        .redis
        .command(&["HGET", &keys[0], "level"])
        .contains("error"));
    assert_eq!(
        cl.redis
            .command(&["HEXISTS", &keys[0], "sub:test://static-text"]),
        ":1\r\n"
    );
    let ttl = cl.redis.command(&["PTTL", &keys[0]]);
    let ttl: i64 = ttl.trim().trim_start_matches(':').parse().unwrap();
    assert!(
        ttl > 3_500_000 && ttl <= 3_600_000 + RENEW.as_millis() as i64,
        "expires with session_idle_secs and one renewal interval: {ttl}"
    );

    // The level reaches every replica's upstream: the fixture logs at info, which "error"
    // silences, whichever replica the call lands on (each has its own fixture process).
    for r in &cl.replicas {
        let direct = on(&r.url(), &id, None);
        let resp = direct
            .post(json!({"jsonrpc": "2.0", "id": 50, "method": "tools/call",
                "params": {"name": "fx_test_logging_tool", "arguments": {}}}))
            .await;
        assert_eq!(resp.status, 200, "{}", resp.body);
        let messages = resp.messages();
        assert_eq!(
            messages.len(),
            1,
            "only the reply, no info log: {messages:?}"
        );
        assert_eq!(
            messages[0]["result"]["content"][0]["text"],
            json!("Logging evaluated")
        );
    }

    // DELETE on one replica ends it on all: Redis forgets it at once, every other replica
    // answers 404 within the bound (it hears the end on the bus).
    let deleted = Instant::now();
    assert_eq!(delete(&cl.nginx.url(), &id).await, 200);
    for r in &cl.replicas {
        not_found_within_bound(&r.url(), &id, deleted).await;
    }
    assert!(cl.redis.session_keys().is_empty());
    // Every replica ended its part (and closed its upstream connections for it).
    for r in &cl.replicas {
        let ended = format!("session ended session={id}");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !r.log_text().contains(&ended) && std::time::Instant::now() < deadline {
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        assert!(
            r.log_text().contains(&ended),
            "replica {} did not end it",
            r.port
        );
    }
}

#[tokio::test]
async fn forged_tampered_truncated_foreign_and_cross_principal_ids_are_404_like_unknown() {
    let home = fixture_home("cluster-ids");
    crate::auth::bearer_tokens(
        &home,
        &[("alice", "alice-secret-0001"), ("bob", "bob-secret-00002")],
    );
    let cl = Cluster::start("ids", home, json!({}));
    let [a, b, c] = [&cl.replicas[0], &cl.replicas[1], &cl.replicas[2]];
    let mut alice = Client::with_bearer(&a.url(), "alice-secret-0001");
    alice.initialize(json!({})).await;
    let id = alice.session.clone().unwrap();
    // Alice's session works on another replica with her token.
    let r = on(&b.url(), &id, Some("alice-secret-0001"))
        .call_tool("fx_echo", json!({"n": 1}))
        .await;
    assert_eq!(r["result"]["structuredContent"], json!({"n": 1}), "{r}");

    let not_found = |replica: &Replica, sid: String, token: &'static str| {
        let url = replica.url();
        async move {
            let (status, body) = status_and_body(&on(&url, &sid, Some(token)), "tools/list").await;
            assert_eq!((status, body.as_str()), (404, NOT_FOUND), "id {sid}");
        }
    };
    // Bob cannot use it: not where it is served already (b), nor where it is opened (c).
    not_found(b, id.clone(), "bob-secret-00002").await;
    not_found(c, id.clone(), "bob-secret-00002").await;
    // A tampered byte, a truncated id, a forged one, a lone gateway's plain id.
    let mut tampered: Vec<char> = id.chars().collect();
    let mid = tampered.len() / 2;
    tampered[mid] = if tampered[mid] == 'A' { 'B' } else { 'A' };
    let tampered: String = tampered.into_iter().collect();
    for replica in [a, b, c] {
        not_found(replica, tampered.clone(), "alice-secret-0001").await;
        not_found(replica, id[..id.len() - 4].to_string(), "alice-secret-0001").await;
        not_found(
            replica,
            format!("s1{}", "Q".repeat(id.len() - 2)),
            "alice-secret-0001",
        )
        .await;
        not_found(
            replica,
            "0123456789abcdef0123456789abcdef".into(),
            "alice-secret-0001",
        )
        .await;
    }
    // A replica of another cluster (another key, same Redis and tree): its ids open nowhere
    // here, and ours not there.
    let mut foreign = Replica::start(&cl.home, &keygen(), cl.dir.0.join("foreign.log"));
    let mut f = Client::with_bearer(&foreign.url(), "alice-secret-0001");
    f.initialize(json!({})).await;
    let fid = f.session.clone().unwrap();
    for replica in [a, b, c] {
        not_found(replica, fid.clone(), "alice-secret-0001").await;
    }
    not_found(&foreign, id.clone(), "alice-secret-0001").await;
    foreign.kill9();
    // Alice still has her session everywhere.
    let r = on(&c.url(), &id, Some("alice-secret-0001"))
        .call_tool("fx_echo", json!({"n": 2}))
        .await;
    assert_eq!(r["result"]["structuredContent"], json!({"n": 2}), "{r}");
}

#[tokio::test]
async fn check_names_a_bad_cluster_key_and_keygen_prints_one() {
    let home = fixture_home("cluster-check");
    let check = |key: &str| {
        std::process::Command::new(sluice_e2e::bin("sluice"))
            .args(["check", "--home", &home.arg()])
            .env("SLUICE_CLUSTER_KEY", key)
            .output()
            .unwrap()
    };
    home.write(
        "sluice.json",
        &json!({"cluster": {"key": "${env:SLUICE_CLUSTER_KEY}", "redis": "redis://127.0.0.1:6379/0"}})
            .to_string(),
    );
    let good = check(&keygen());
    assert!(
        good.status.success(),
        "{} {}",
        String::from_utf8_lossy(&good.stdout),
        String::from_utf8_lossy(&good.stderr)
    );
    let bad = check("c2hvcnQ=");
    assert_eq!(bad.status.code(), Some(1));
    let err =
        String::from_utf8_lossy(&bad.stdout).into_owned() + &String::from_utf8_lossy(&bad.stderr);
    assert!(
        err.contains("sluice.json: cluster.key: decodes to 5 bytes, not 32"),
        "{err}"
    );
    assert!(!err.contains("c2hvcnQ"), "the key is never shown: {err}");
    // A rotation list: the first seals, all open; a bad entry is named by its index.
    home.write(
        "sluice.json",
        &json!({"cluster": {"key": [keygen(), "not a key"], "redis": "redis://127.0.0.1:6379/0"}})
            .to_string(),
    );
    let bad = check("");
    assert_eq!(bad.status.code(), Some(1));
    let err =
        String::from_utf8_lossy(&bad.stdout).into_owned() + &String::from_utf8_lossy(&bad.stderr);
    assert!(err.contains("cluster.key[1]: is not base64"), "{err}");
}

/// Keys rotate: replicas that open with the old key and seal with the new one keep serving
/// sessions sealed under the old key.
#[tokio::test]
async fn a_rotated_key_still_opens_sessions_sealed_under_the_old_one() {
    let cl = Cluster::start("rotate", fixture_home("cluster-rotate"), json!({}));
    let mut c = Client::new(&cl.replicas[0].url());
    c.initialize(json!({})).await;
    let id = c.session.clone().unwrap();
    let new_key = keygen();
    let old_key = cl.key.clone();
    let mut home_json: Value =
        serde_json::from_str(&std::fs::read_to_string(cl.home.path().join("sluice.json")).unwrap())
            .unwrap();
    home_json["cluster"]["key"] = json!([new_key, "${env:SLUICE_CLUSTER_KEY}"]);
    let rotated = sluice_e2e::tree::Home::new("cluster-rotated");
    rotated.write("sluice.json", &home_json.to_string());
    rotated.write(
        "mcp/expose.json",
        &std::fs::read_to_string(cl.home.path().join("mcp/expose.json")).unwrap(),
    );
    let mut r = Replica::start(&rotated, &old_key, cl.dir.0.join("rotated.log"));
    let reply = on(&r.url(), &id, None)
        .call_tool("fx_echo", json!({"n": 7}))
        .await;
    assert_eq!(
        reply["result"]["structuredContent"],
        json!({"n": 7}),
        "{reply}"
    );
    // A session it begins is sealed under the new key: the old replicas cannot open it.
    let mut n = Client::new(&r.url());
    n.initialize(json!({})).await;
    let nid = n.session.clone().unwrap();
    let (status, _) = status_and_body(&on(&cl.replicas[1].url(), &nid, None), "tools/list").await;
    assert_eq!(status, 404);
    r.kill9();
}

/// A session a replica holds costs it no Redis command per request (its record renewed at most
/// every 5 s, not per call); a DELETE on one replica is 404 on every other within a second.
#[tokio::test]
async fn held_sessions_cost_no_redis_command_per_request_and_a_delete_is_404_everywhere_within_a_second(
) {
    let cl = Cluster::start("held", fixture_home("cluster-held"), json!({}));
    let urls: Vec<String> = cl.replicas.iter().map(Replica::url).collect();
    // Five sessions, each begun on one replica and taken up by the two others.
    let mut ids = Vec::new();
    for i in 0..5 {
        let mut c = Client::new(&urls[i % 3]);
        c.initialize(json!({})).await;
        ids.push(c.session.clone().unwrap());
    }
    let held = Instant::now();
    for id in &ids {
        for url in &urls {
            let r = on(url, id, None)
                .call_tool("fx_echo", json!({"n": 0}))
                .await;
            assert_eq!(r["result"]["structuredContent"], json!({"n": 0}), "{r}");
        }
        assert_eq!(cl.taken_up_by(id), 2);
    }

    // Steady state: 150 calls (10 per session on every replica).
    let before = cl.redis.command_counts();
    let mut calls = 0;
    for n in 1..=10 {
        for id in &ids {
            for url in &urls {
                let r = on(url, id, None)
                    .call_tool("fx_echo", json!({"n": n}))
                    .await;
                assert_eq!(r["result"]["structuredContent"], json!({"n": n}), "{r}");
                calls += 1;
            }
        }
    }
    let after = cl.redis.command_counts();
    let ran =
        |name: &str| after.get(name).copied().unwrap_or(0) - before.get(name).copied().unwrap_or(0);
    // Nothing is read or written for a call; the only commands are the replicas' health
    // checks (`ping`, once a second each), the count itself (`info`) and renewals: at most
    // 3 PEXPIREs per session and replica per interval since the sessions were taken up.
    let intervals = held.elapsed().as_millis().div_ceil(RENEW.as_millis()) as u64;
    let renewals = ran("pexpire");
    assert!(
        renewals <= 3 * 15 * intervals,
        "{renewals} PEXPIREs over {intervals} renewal intervals for {calls} calls"
    );
    let others: Vec<(String, u64)> = after
        .keys()
        .filter(|k| !["ping", "info", "pexpire"].contains(&k.as_str()))
        .map(|k| (k.clone(), ran(k)))
        .filter(|(_, n)| *n > 0)
        .collect();
    assert_eq!(
        others,
        Vec::<(String, u64)>::new(),
        "Redis commands for {calls} calls"
    );

    // A DELETE on the replica that began each session: every other one says 404 within the
    // bound, and the store forgets it.
    let mut slowest = Duration::ZERO;
    for (i, id) in ids.iter().enumerate() {
        let deleted = Instant::now();
        assert_eq!(delete(&urls[i % 3], id).await, 200);
        for (j, url) in urls.iter().enumerate() {
            if j != i % 3 {
                slowest = slowest.max(not_found_within_bound(url, id, deleted).await);
            }
        }
        let (status, _) = status_and_body(&on(&urls[i % 3], id, None), "tools/list").await;
        assert_eq!(status, 404);
    }
    assert!(cl.redis.session_keys().is_empty());
    eprintln!("the slowest replica said 404 {slowest:?} after a DELETE elsewhere");
}
