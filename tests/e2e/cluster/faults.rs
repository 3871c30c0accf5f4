//! Faults: a replica killed (`kill -9`) under load, a rolling restart of every replica, a Redis
//! outage. Each run counts lost sessions and wrong answers, and both must be 0.

use super::{fixture_home, Cluster, Replica, NOT_FOUND};
use serde_json::{json, Value};
use sluice_e2e::mcp::Client;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How a call ended.
#[derive(Debug, Clone, PartialEq)]
enum Outcome {
    /// The right answer.
    Right,
    /// An answer, but not the one asked for (must never happen).
    Wrong(String),
    /// No answer: a dropped connection, a 502 from nginx, or a clear error.
    Failed(String),
}

/// Call `fx_echo` with a value only this call uses, and judge the answer.
async fn echo(c: &Client, tag: &str) -> Outcome {
    let id = c.id();
    let body = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": "fx_echo", "arguments": {"tag": tag}}});
    let resp = match c.builder().body(body.to_string()).send().await {
        Ok(r) => r,
        Err(e) => return Outcome::Failed(format!("transport: {e}")),
    };
    let status = resp.status().as_u16();
    let text = match resp.text().await {
        Ok(t) => t,
        Err(e) => return Outcome::Failed(format!("body: {e}")),
    };
    if status != 200 {
        return Outcome::Failed(format!("{status}: {text}"));
    }
    let reply: Value = match serde_json::from_str(&text) {
        Ok(v) => v,
        Err(_) => match sluice_e2e::mcp::parse_sse(&text).last() {
            Some((_, v)) => v.clone(),
            None => return Outcome::Failed(format!("unreadable: {text}")),
        },
    };
    if reply.get("error").is_some() {
        return Outcome::Failed(reply.to_string());
    }
    if reply["id"] == json!(id) && reply["result"]["structuredContent"] == json!({"tag": tag}) {
        Outcome::Right
    } else {
        Outcome::Wrong(reply.to_string())
    }
}

/// Clients that call in a loop until told to stop; what each call did.
struct Load {
    calls: Arc<AtomicU64>,
    stop: Arc<std::sync::atomic::AtomicBool>,
    tasks: Vec<tokio::task::JoinHandle<Vec<Outcome>>>,
}

impl Load {
    fn start(clients: Vec<Arc<Client>>) -> Load {
        let calls = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let tasks = clients
            .into_iter()
            .enumerate()
            .map(|(k, c)| {
                let (calls, stop) = (calls.clone(), stop.clone());
                tokio::spawn(async move {
                    let mut out = Vec::new();
                    let mut i = 0;
                    while !stop.load(Ordering::SeqCst) {
                        out.push(echo(&c, &format!("c{k}-{i}")).await);
                        calls.fetch_add(1, Ordering::SeqCst);
                        i += 1;
                    }
                    out
                })
            })
            .collect();
        Load { calls, stop, tasks }
    }

    async fn wait_for(&self, n: u64) {
        let deadline = Instant::now() + Duration::from_secs(60);
        while self.calls.load(Ordering::SeqCst) < n {
            assert!(Instant::now() < deadline, "the load stalled");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    async fn finish(self) -> Vec<Outcome> {
        self.stop.store(true, Ordering::SeqCst);
        let mut all = Vec::new();
        for t in self.tasks {
            all.extend(t.await.unwrap());
        }
        all
    }
}

async fn sessions(url: &str, n: usize) -> Vec<Arc<Client>> {
    let mut out = Vec::new();
    for _ in 0..n {
        let mut c = Client::new(url);
        c.initialize(json!({})).await;
        out.push(Arc::new(c));
    }
    out
}

/// Sessions that are gone: a call answers 404 (or a wrong answer), or never answers right
/// within a bounded number of tries (the proxy in front may need a moment to see a replica
/// back). Each session must then answer right three times in a row, through nginx.
async fn lost_sessions(clients: &[Arc<Client>]) -> usize {
    let mut lost = 0;
    for c in clients {
        let mut right = 0;
        for attempt in 0..60 {
            match echo(c, &format!("after-{attempt}")).await {
                Outcome::Right => right += 1,
                Outcome::Failed(e) if !e.starts_with("404") => {
                    right = 0;
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                other => {
                    eprintln!("lost: {other:?}");
                    break;
                }
            }
            if right == 3 {
                break;
            }
        }
        if right < 3 {
            lost += 1;
        }
    }
    lost
}

fn wrong(outcomes: &[Outcome]) -> Vec<&Outcome> {
    outcomes
        .iter()
        .filter(|o| matches!(o, Outcome::Wrong(_)))
        .collect()
}

fn failed(outcomes: &[Outcome]) -> Vec<&Outcome> {
    outcomes
        .iter()
        .filter(|o| matches!(o, Outcome::Failed(_)))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_of_one_replica_under_load_loses_no_session_and_no_answer_is_wrong() {
    let mut cl = Cluster::start("kill9", fixture_home("cluster-kill9"), json!({}));
    const CLIENTS: usize = 8;
    let clients = sessions(&cl.nginx.url(), CLIENTS).await;
    let load = Load::start(clients.clone());
    load.wait_for(100).await;
    cl.replicas[1].kill9();
    let at_kill = load.calls.load(Ordering::SeqCst);
    load.wait_for(at_kill + 200).await;
    let outcomes = load.finish().await;
    assert!(outcomes.len() >= 300, "{}", outcomes.len());
    assert_eq!(wrong(&outcomes), Vec::<&Outcome>::new(), "wrong answers");
    // Only calls in flight on the killed replica fail: at most one per client.
    let f = failed(&outcomes);
    assert!(f.len() <= CLIENTS, "{} failed calls: {f:?}", f.len());
    assert_eq!(lost_sessions(&clients).await, 0, "lost sessions");
    eprintln!(
        "kill -9 under load: {} calls, {} failed (in flight on the killed replica), 0 wrong, 0 lost sessions",
        outcomes.len(),
        f.len()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rolling_restart_of_every_replica_loses_no_session() {
    let mut cl = Cluster::start(
        "rolling",
        fixture_home("cluster-rolling"),
        json!({"drain_ms": 2000}),
    );
    const CLIENTS: usize = 6;
    let clients = sessions(&cl.nginx.url(), CLIENTS).await;
    let load = Load::start(clients.clone());
    load.wait_for(60).await;
    for i in 0..cl.replicas.len() {
        cl.replicas[i].stop();
        cl.replicas[i].restart();
        let n = load.calls.load(Ordering::SeqCst);
        load.wait_for(n + 60).await;
    }
    let outcomes = load.finish().await;
    assert_eq!(wrong(&outcomes), Vec::<&Outcome>::new(), "wrong answers");
    assert_eq!(lost_sessions(&clients).await, 0, "lost sessions");
    // A replica that drains refuses new connections and nginx takes them to the next one;
    // a call can fail only in the instant a listener closes (at most one per client each).
    let f = failed(&outcomes);
    assert!(f.len() <= CLIENTS * 3, "{} failed calls: {f:?}", f.len());
    eprintln!(
        "rolling restart: {} calls, {} failed, 0 wrong, 0 lost sessions",
        outcomes.len(),
        f.len()
    );
}

async fn wait_ready(r: &Replica, ready: bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (status, body) = r.readyz().await;
        if (status == 200) == ready {
            return body;
        }
        assert!(Instant::now() < deadline, "readyz stayed {status}: {body}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn post(c: &Client, msg: Value) -> (u16, Value) {
    let r = c.post(msg).await;
    (
        r.status,
        serde_json::from_str(&r.body).unwrap_or(Value::Null),
    )
}

#[tokio::test]
async fn a_redis_outage_answers_clearly_readyz_says_why_and_local_work_goes_on() {
    let mut cl = Cluster::start("outage", fixture_home("cluster-outage"), json!({}));
    let redis_url = cl.redis.url();
    for r in &cl.replicas {
        wait_ready(r, true).await;
    }
    let mut a = Client::new(&cl.replicas[0].url());
    a.initialize(json!({})).await;
    let id = a.session.clone().unwrap();

    cl.redis.stop();
    let body = wait_ready(&cl.replicas[2], false).await;
    let entry = &body["not_ready"][0];
    assert_eq!(
        body["not_ready"].as_array().unwrap().len(),
        1,
        "only Redis: {body}"
    );
    assert_eq!(entry["cluster"], json!("redis"), "{body}");
    assert_eq!(entry["redis"], json!(redis_url), "{body}");
    assert_eq!(entry["status"], json!("down"), "{body}");
    let reason = entry["reason"].as_str().unwrap();
    assert!(
        reason.starts_with(&format!("redis {redis_url}: ")),
        "{reason}"
    );

    // The replica that serves the session goes on (nothing shared is needed for a call).
    assert_eq!(echo(&a, "during-outage").await, Outcome::Right);
    // Another replica cannot check the session: a clear error, not a hang.
    let mut b = Client::new(&cl.replicas[2].url());
    b.session = Some(id.clone());
    let (status, reply) = post(
        &b,
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
    )
    .await;
    assert_eq!(status, 503, "{reply}");
    assert_eq!(reply["error"]["code"], json!(-32000), "{reply}");
    let msg = reply["error"]["message"].as_str().unwrap();
    assert!(
        msg.starts_with(&format!("Cluster store unavailable: redis {redis_url}: ")),
        "{msg}"
    );
    // No new session can be shared either.
    let fresh = Client::new(&cl.replicas[1].url());
    let (status, reply) = post(&fresh, json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "x", "version": "1"}}})).await;
    assert_eq!(status, 503, "{reply}");
    assert_eq!(reply["error"]["code"], json!(-32000), "{reply}");
    // A replica started during the outage starts, logs the address, and is not ready.
    let mut late = Replica::start(&cl.home, &cl.key, cl.dir.0.join("late.log"));
    let body = wait_ready(&late, false).await;
    let entry = body["not_ready"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["cluster"] == "redis")
        .cloned()
        .unwrap_or_else(|| panic!("{body}"));
    assert_eq!(entry["redis"], json!(redis_url), "{body}");
    let deadline = Instant::now() + Duration::from_secs(10);
    while !late.log_text().contains("cluster store unavailable") && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let log = late.log_text();
    assert!(
        log.contains("ERROR") && log.contains(&format!("redis={redis_url}")),
        "{log}"
    );

    // Redis back: every replica is ready again, sessions begin again. (This Redis keeps
    // nothing on disk, so the sessions it held are gone: 404, like any ended session.)
    cl.redis.restart();
    for r in cl.replicas.iter().chain([&late]) {
        wait_ready(r, true).await;
    }
    let (status, reply) = post(
        &b,
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
    )
    .await;
    assert_eq!((status, reply.to_string()), (404, NOT_FOUND.to_string()));
    let mut again = Client::new(&cl.replicas[1].url());
    again.initialize(json!({})).await;
    assert_eq!(echo(&again, "after-outage").await, Outcome::Right);
    // The bus is back too: an update heard on replica 1 reaches the GET stream on replica 0.
    let uri = "test://static-text";
    again
        .request("resources/subscribe", json!({"uri": uri}))
        .await;
    let mut held = Client::new(&cl.replicas[0].url());
    held.session = again.session.clone();
    let mut stream = sluice_e2e::mcp::SseReader::new(held.open_get(None).await);
    again
        .call_tool("fx_touch_resource", json!({"uri": uri}))
        .await;
    let (_, msg) = stream.next().await.expect("the GET stream stays open");
    assert_eq!(
        msg["method"],
        json!("notifications/resources/updated"),
        "{msg}"
    );
    late.kill9();
}
