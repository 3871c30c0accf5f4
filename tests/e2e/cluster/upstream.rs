//! A client session's Streamable HTTP upstream session is shared by the replicas: the fixture
//! over HTTP behind three replicas sees one upstream session per client session, whichever
//! replica serves a call; DELETE reaches it once; after the upstream restarts, the session is
//! re-opened once and every replica uses the new one.

use super::{Cluster, Scratch};
use serde_json::{json, Value};
use sluice_e2e::mcp::Client;
use sluice_e2e::tree::Home;
use sluice_e2e::{bin, free_port, wait_for_port, Proc};
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

/// The fixture over Streamable HTTP on a fixed port, its stderr (which logs every session it
/// creates and every DELETE it gets) in a file.
struct HttpFixture {
    port: u16,
    log: PathBuf,
    proc: Option<Proc>,
}

impl HttpFixture {
    fn start(log: PathBuf) -> HttpFixture {
        let mut f = HttpFixture {
            port: free_port(),
            log,
            proc: None,
        };
        f.restart();
        f
    }

    /// (Re)start it on its port, with a fresh log: every session it had is gone.
    fn restart(&mut self) {
        self.proc = None;
        let mut cmd = Command::new(bin("sluice-fixture"));
        cmd.arg("--http")
            .arg(format!("127.0.0.1:{}", self.port))
            .stderr(std::fs::File::create(&self.log).unwrap());
        self.proc = Some(Proc::spawn(cmd));
        wait_for_port(self.port, Duration::from_secs(20));
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.port)
    }

    fn lines(&self, pattern: &str) -> Vec<String> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .filter(|l| l.contains(pattern))
            .map(str::to_string)
            .collect()
    }
}

/// The fixture session a `fx_whoami` answer names (`… session=<id>`).
fn fixture_session(reply: &Value) -> String {
    let text = reply["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("not a whoami answer: {reply}"));
    text.split(" session=")
        .nth(1)
        .unwrap_or_else(|| panic!("no session in {text:?}"))
        .to_string()
}

#[tokio::test]
async fn replicas_share_one_upstream_session_per_client_session_and_end_it_once() {
    let dir = Scratch::new("fixture-http");
    let mut fx = HttpFixture::start(dir.0.join("fixture.log"));
    let home = Home::new("cluster-upstream");
    home.expose(&json!({"upstreams": [
        {"id": "fx", "transport": "http", "url": fx.url(), "expose_all": true, "era": "handshake"}
    ]}));
    let cl = Cluster::start("upstream", home, json!({}));
    // Each replica's control connection (lists) is a session of its own.
    let deadline = Instant::now() + Duration::from_secs(20);
    while fx.lines(" created").len() < 3 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let controls = fx.lines(" created").len();
    assert_eq!(controls, 3, "{:?}", fx.lines("session"));

    let mut a = Client::new(&cl.nginx.url());
    a.initialize(json!({})).await;
    let mut b = Client::new(&cl.nginx.url());
    b.initialize(json!({})).await;
    let (ida, idb) = (a.session.clone().unwrap(), b.session.clone().unwrap());

    // Calls alternate between the two clients, round-robin over the three replicas: each
    // client's calls reach every replica, and every one names the same fixture session.
    let (mut seen_a, mut seen_b) = (Vec::new(), Vec::new());
    for _ in 0..6 {
        let r = a.call_tool("fx_whoami", json!({})).await;
        seen_a.push(fixture_session(&r));
        let r = b.call_tool("fx_whoami", json!({})).await;
        seen_b.push(fixture_session(&r));
    }
    assert_eq!(cl.taken_up_by(&ida), 2);
    assert_eq!(cl.taken_up_by(&idb), 2);
    assert!(seen_a.iter().all(|s| *s == seen_a[0]), "{seen_a:?}");
    assert!(seen_b.iter().all(|s| *s == seen_b[0]), "{seen_b:?}");
    assert_ne!(seen_a[0], seen_b[0]);
    // The fixture saw exactly one session per client session (besides the controls).
    let created = fx.lines(" created");
    assert_eq!(created.len(), controls + 2, "{created:?}");
    for s in [&seen_a[0], &seen_b[0]] {
        let line = format!("sluice-fixture: session {s} created");
        assert_eq!(created.iter().filter(|l| **l == line).count(), 1);
    }

    // A third client's first calls reach the three replicas at once: one of them opens the
    // upstream session, the others wait for it (the claim in Redis), all use the same one.
    let mut d = Client::new(&cl.nginx.url());
    d.initialize(json!({})).await;
    let idd = d.session.clone().unwrap();
    let direct: Vec<Client> = cl
        .replicas
        .iter()
        .flat_map(|r| [r.url(), r.url()])
        .map(|url| {
            let mut c = Client::new(&url);
            c.session = Some(idd.clone());
            c
        })
        .collect();
    let replies =
        futures_util::future::join_all(direct.iter().map(|c| c.call_tool("fx_whoami", json!({}))))
            .await;
    let seen_d: Vec<String> = replies.iter().map(fixture_session).collect();
    assert!(seen_d.iter().all(|s| *s == seen_d[0]), "{seen_d:?}");
    assert!(![&seen_a[0], &seen_b[0]].contains(&&seen_d[0]));
    assert_eq!(fx.lines(" created").len(), controls + 3);

    // DELETE of `a` on one replica: the fixture gets exactly one DELETE, for `a`'s session.
    let req = a
        .builder()
        .build()
        .map(|mut req| {
            *req.method_mut() = reqwest::Method::DELETE;
            req
        })
        .unwrap();
    assert_eq!(a.http.execute(req).await.unwrap().status(), 200);
    // Every replica ends its part (their logs say so) before the fixture log is read.
    for r in &cl.replicas {
        let ended = format!("session ended session={ida}");
        let deadline = Instant::now() + Duration::from_secs(10);
        while !r.log_text().contains(&ended) && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert!(
            r.log_text().contains(&ended),
            "replica {} did not end it",
            r.port
        );
    }
    assert_eq!(
        fx.lines("deleted"),
        vec![format!("sluice-fixture: session {} deleted", seen_a[0])]
    );
    assert!(
        fx.lines("DELETE of an unknown").is_empty(),
        "{:?}",
        fx.lines("DELETE")
    );
    // `b` goes on with its own upstream session on every replica.
    for _ in 0..3 {
        let r = b.call_tool("fx_whoami", json!({})).await;
        assert_eq!(fixture_session(&r), seen_b[0]);
    }

    // The upstream restarts: its sessions are gone. Each replica's next call of `b` meets the
    // 404 and goes again: one replica opens a new upstream session, and every replica uses
    // that one (no call fails).
    fx.restart();
    let mut again = Vec::new();
    for _ in 0..6 {
        let r = b.call_tool("fx_whoami", json!({})).await;
        again.push(fixture_session(&r));
    }
    assert!(again.iter().all(|s| *s == again[0]), "{again:?}");
    assert_ne!(again[0], seen_b[0]);
    let line = format!("sluice-fixture: session {} created", again[0]);
    assert_eq!(fx.lines(&line).len(), 1);
    // Opened again once, by one replica; the other two found its record.
    let reopened = cl
        .replicas
        .iter()
        .filter(|r| {
            r.log_text()
                .lines()
                .any(|l| l.contains("upstream session opened and shared") && l.contains(&again[0]))
        })
        .count();
    assert_eq!(reopened, 1);
    // It is the one recorded in `b`'s state (`b` and `d` live on; `a` ended).
    let keys = cl.redis.session_keys();
    assert_eq!(keys.len(), 2, "{keys:?}");
    let recorded: Vec<String> = keys
        .iter()
        .map(|k| cl.redis.command(&["HGET", k, "up:fx"]))
        .collect();
    let want = [again[0].clone(), seen_d[0].clone()];
    for id in &want {
        let holding = recorded
            .iter()
            .filter(|r| r.contains(&format!("\"id\":\"{id}\"")))
            .count();
        assert_eq!(holding, 1, "{recorded:?}");
    }
}

/// A replica killed while it opened a client session's upstream session leaves its claim in
/// Redis (`pending:<replica>:<lease end>`). Another replica that finds the claimant gone from
/// the bus takes the claim over at once instead of waiting for the lease (a minute here: the call
/// would fail when it ran out).
#[tokio::test]
async fn a_claim_left_by_a_gone_replica_is_taken_over_without_waiting_for_its_lease() {
    let dir = Scratch::new("fixture-http-claim");
    let fx = HttpFixture::start(dir.0.join("fixture.log"));
    let home = Home::new("cluster-claim");
    home.expose(&json!({"upstreams": [
        {"id": "fx", "transport": "http", "url": fx.url(), "expose_all": true, "era": "handshake"}
    ]}));
    let cl = Cluster::start("claim", home, json!({}));
    let mut c = Client::new(&cl.replicas[0].url());
    c.initialize(json!({})).await;
    let keys = cl.redis.session_keys();
    assert_eq!(keys.len(), 1, "{keys:?}");
    // What a replica killed during the upstream handshake leaves behind.
    let until = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis()
        + 60_000;
    let claim = format!("pending:0badcafe:{until}");
    cl.redis.command(&["HSET", &keys[0], "up:fx", &claim]);
    assert!(cl
        .redis
        .command(&["HGET", &keys[0], "up:fx"])
        .contains(&claim));
    // A replica that has not served the session claims its upstream session: the claimant is
    // gone, so it opens one itself, records it, and the call is answered.
    let mut other = Client::new(&cl.replicas[1].url());
    other.session = c.session.clone();
    let r = other.call_tool("fx_whoami", json!({})).await;
    let opened = fixture_session(&r);
    let record = cl.redis.command(&["HGET", &keys[0], "up:fx"]);
    assert!(record.contains(&format!("\"id\":\"{opened}\"")), "{record}");
    assert!(cl.replicas[1]
        .log_text()
        .contains("the replica opening the shared upstream session is gone: taken over"));
}
