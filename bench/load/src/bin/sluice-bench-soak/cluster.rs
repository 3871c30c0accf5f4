//! `sluice-bench-soak --cluster`: the soak across replicas. `--replicas` (3) `sluice serve`
//! replicas of one tree and one cluster key, one `redis-server` (no persistence) and `nginx` in
//! round-robin in front (no affinity: the configuration docs/deployment.md shows). C workers each
//! open a session through nginx, call on it (`s_echo` and `h_echo` in turn) until
//! `--calls-per-session` calls were answered right, end it with DELETE and open the next, for the
//! duration, while:
//!
//! - a replica is killed with SIGKILL every `--replica-kill-every` s (60) and started again at
//!   once, replicas 2, 3, 2, 3 … in turn (replica 1 is never killed after the rolling restart, so
//!   its RSS and descriptors from minute 2 to the end show growth in one long-lived process);
//! - every replica is restarted in turn (SIGTERM, drain, start) at `--rolling-at` s (30);
//! - Redis is killed and started again at `--redis-restart-at` s (half the duration): it keeps
//!   nothing, so the sessions that exist then are lost by design;
//! - every `--kill-every` s the replicas' stdio upstreams are SIGKILLed and, every other time,
//!   the HTTP upstream too (started again a second later); every `--edit-every` s the tree's
//!   `mcp/expose.json` is rewritten with a tool added or removed (as the single-gateway soak).
//!
//! A call is **ok** (the echo of its arguments), a **clear error** (JSON-RPC -32000 / -32001, or
//! HTTP 502 / 503 / 504: a replica went away under the call, or the store is restarting),
//! **wrong** (any other answer), **hung** (none within `--hang-after`), or **dropped** (nginx
//! closed the connection without an answer). A session answered 404 before its DELETE is
//! **lost**, unless it began before Redis came back from its restart and the 404 came after
//! Redis went down (**lost by design**). A DELETE answered 404 is counted apart: DELETE is
//! idempotent, so nginx sends it again to the next replica when the one that ended the session
//! was killed before it answered. Each replica's RSS and open descriptors are sampled at
//! the start, every `--sample-every` s (60) and at the end. It fails when any call was wrong,
//! hung or dropped, any session was lost, or (when the run is long enough to measure it) a
//! replica that lived from `--growth-from` s (120) to the end grew by more than 10%. Its folder is
//! kept then, with the replicas' logs and nginx's log of every request that took a second or more
//! (`nginx-slow.log`: which replica, status, time, session).

use super::{expose, free_port, sigkill, spawn_echo, stdio_children, write_atomic, Options};
use anyhow::{bail, Context, Result};
use serde_json::{json, Value};
use sluice_bench_load::http::{Conn, Target};
use sluice_bench_load::{mcp, procfs};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Growth allowed from `--growth-from` to the end, in RSS and in descriptors.
const MAX_GROWTH: f64 = 0.10;

/// What the workers count.
#[derive(Default)]
struct Counts {
    ok: AtomicU64,
    clear: AtomicU64,
    wrong: AtomicU64,
    hung: AtomicU64,
    dropped: AtomicU64,
    sessions: AtomicU64,
    deleted: AtomicU64,
    lost: AtomicU64,
    lost_by_design: AtomicU64,
    deleted_again: AtomicU64,
    /// The first failures (at most [`KEPT`]), each with when it was seen.
    bad: Mutex<Vec<(Instant, String)>>,
    first_clear: Mutex<Option<String>>,
}

/// How many failures are kept for the report.
const KEPT: usize = 20;

impl Counts {
    fn bad(&self, what: &AtomicU64, why: String) {
        what.fetch_add(1, Ordering::Relaxed);
        let mut bad = self.bad.lock().unwrap();
        if bad.len() < KEPT {
            bad.push((Instant::now(), why));
        }
    }

    fn clear(&self, why: String) {
        self.clear.fetch_add(1, Ordering::Relaxed);
        self.first_clear.lock().unwrap().get_or_insert(why);
    }
}

/// When Redis went down and came back (the restart), for telling lost sessions apart.
#[derive(Default)]
struct RedisRestart {
    down: Option<Instant>,
    back: Option<Instant>,
}

/// A session that answered 404 before its DELETE: lost by design when it began before Redis
/// came back and the 404 came after Redis went down.
fn session_gone(counts: &Counts, restart: &Mutex<RedisRestart>, began: Instant, what: String) {
    let r = restart.lock().unwrap();
    let by_design = match (r.down, r.back) {
        (Some(down), back) => back.is_none_or(|b| began < b) && Instant::now() > down,
        (None, _) => false,
    };
    drop(r);
    if by_design {
        counts.lost_by_design.fetch_add(1, Ordering::Relaxed);
    } else {
        counts.bad(&counts.lost, what);
    }
}

async fn wait_port(port: u16, within: Duration) -> Result<()> {
    let until = Instant::now() + within;
    while tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .is_err()
    {
        if Instant::now() > until {
            bail!("nothing listens on {port} after {within:?}");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok(())
}

/// One replica: its port, its process, its log (appended to across restarts).
struct Replica {
    port: u16,
    child: Option<Child>,
    log: PathBuf,
}

impl Replica {
    async fn start(&mut self, o: &Options, home: &Path, key: &str) -> Result<()> {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)?;
        let child = Command::new(&o.sluice)
            .arg("serve")
            .arg("--home")
            .arg(home)
            .args([
                "--listen",
                &format!("127.0.0.1:{}", self.port),
                "--no-admin",
            ])
            .env("SLUICE_CLUSTER_KEY", key)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .with_context(|| format!("starting {}", o.sluice.display()))?;
        self.child = Some(child);
        wait_port(self.port, Duration::from_secs(60)).await
    }

    fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// SIGTERM, then wait for it to drain and exit (SIGKILL after 30 s).
    async fn stop(&mut self) {
        let Some(mut c) = self.child.take() else {
            return;
        };
        let _ = Command::new("kill")
            .args(["-TERM", &c.id().to_string()])
            .status();
        let until = Instant::now() + Duration::from_secs(30);
        while Instant::now() < until {
            if let Ok(Some(_)) = c.try_wait() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        eprintln!(
            "replica on {} did not exit 30 s after SIGTERM: killed",
            self.port
        );
        let _ = c.kill();
        let _ = c.wait();
    }
}

fn redis(port: u16) -> Result<Child> {
    Command::new("redis-server")
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
        .args(["--save", "", "--appendonly", "no"])
        .stdout(Stdio::null())
        .spawn()
        .context("starting redis-server (Debian's package redis-server)")
}

fn nginx(dir: &Path, listen: u16, ports: &[u16]) -> Result<Child> {
    let servers: String = ports
        .iter()
        .map(|p| format!("        server 127.0.0.1:{p} max_fails=0;\n"))
        .collect();
    let d = dir.display();
    let conf = format!(
        r#"worker_processes 1;
daemon off;
master_process off;
pid {d}/nginx.pid;
error_log {d}/nginx-error.log warn;
events {{ worker_connections 4096; }}
http {{
    # Only requests that took a second or more are logged (which replica, how long, the
    # session): what a hung call leaves behind.
    map $request_time $slow {{ "~^[1-9]" 1; default 0; }}
    log_format slow '$time_iso8601 $upstream_addr $status $request_time $upstream_response_time $http_mcp_session_id';
    access_log {d}/nginx-slow.log slow if=$slow;
    client_body_temp_path {d}/body;
    proxy_temp_path {d}/proxy;
    fastcgi_temp_path {d}/fastcgi;
    uwsgi_temp_path {d}/uwsgi;
    scgi_temp_path {d}/scgi;
    upstream sluice {{
{servers}    }}
    server {{
        listen 127.0.0.1:{listen};
        location /mcp {{
            proxy_pass http://sluice;
            proxy_http_version 1.1;
            proxy_set_header Host $host;
            proxy_buffering off;
            proxy_cache off;
            proxy_read_timeout 1h;
            proxy_next_upstream error timeout;
        }}
    }}
}}
"#
    );
    let path = dir.join("nginx.conf");
    std::fs::write(&path, conf)?;
    Command::new("nginx")
        .arg("-p")
        .arg(dir)
        .arg("-c")
        .arg(&path)
        .arg("-e")
        .arg(dir.join("nginx-error.log"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .context("starting nginx (Debian's package nginx)")
}

/// Open descriptors of a process.
fn fds(pid: u32) -> u64 {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count() as u64)
}

/// One sample of every replica: `{t, replica, pid, rss_kb, fds}`.
fn sample(replicas: &[Replica], t: f64) -> Vec<Value> {
    replicas
        .iter()
        .enumerate()
        .filter_map(|(i, r)| {
            let pid = r.pid()?;
            Some(json!({"t": t.round(), "replica": i + 1, "pid": pid,
                "rss_kb": procfs::rss_kb(pid).unwrap_or(0), "fds": fds(pid)}))
        })
        .collect()
}

struct Worker {
    n: usize,
    /// When the soak began (what times in messages count from).
    began: Instant,
    target: Arc<Target>,
    deadline: Instant,
    hang_after: Duration,
    per_session: u64,
    counts: Arc<Counts>,
    restart: Arc<Mutex<RedisRestart>>,
}

async fn delete(conn: &mut Conn, s: &mcp::Session) -> Result<u16> {
    let id = s.id.clone().unwrap_or_default();
    let headers = [
        ("Mcp-Session-Id", id.as_str()),
        ("MCP-Protocol-Version", s.version.as_str()),
    ];
    Ok(conn.request("DELETE", &headers, b"").await?.status)
}

impl Worker {
    async fn run(self) {
        let c = &self.counts;
        let mut conn = Conn::new(self.target.clone());
        let mut session: Option<(mcp::Session, Instant, u64)> = None;
        let mut id = (self.n as u64) * 1_000_000_000;
        while Instant::now() < self.deadline {
            let Some((s, began, calls)) = &mut session else {
                let began = Instant::now();
                let open = mcp::initialize(&mut conn, "sluice-bench-soak");
                match tokio::time::timeout(self.hang_after, open).await {
                    Ok(Ok(s)) => {
                        c.sessions.fetch_add(1, Ordering::Relaxed);
                        session = Some((s, began, 0));
                    }
                    Ok(Err(e)) => {
                        let text = format!("initialize: {e:#}");
                        if ["HTTP 502", "HTTP 503", "HTTP 504"]
                            .iter()
                            .any(|h| text.contains(h))
                        {
                            c.clear(text);
                        } else if text.contains("closed the connection") {
                            c.bad(&c.dropped, text);
                        } else {
                            c.bad(&c.wrong, text);
                        }
                        conn = Conn::new(self.target.clone());
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                    Err(_) => {
                        c.bad(&c.hung, "initialize: no answer".into());
                        conn = Conn::new(self.target.clone());
                    }
                }
                continue;
            };
            id += 1;
            let (tool, body, args) = super::echo_call(s, id);
            let sid = s.id.clone().unwrap_or_default();
            let sent = Instant::now();
            match tokio::time::timeout(self.hang_after, s.post(&mut conn, &body)).await {
                Err(_) => {
                    c.bad(
                        &c.hung,
                        format!(
                            "{tool} #{id} (session {sid}, sent at {:.1} s): no answer in {:?}",
                            sent.duration_since(self.began).as_secs_f64(),
                            self.hang_after
                        ),
                    );
                    conn = Conn::new(self.target.clone());
                }
                Ok(Err(e)) => {
                    c.bad(&c.dropped, format!("{tool} #{id}: {e:#}"));
                    conn = Conn::new(self.target.clone());
                }
                Ok(Ok(resp)) if resp.status == 404 => {
                    session_gone(
                        c,
                        &self.restart,
                        *began,
                        format!("{tool} #{id}: session {sid} answered 404"),
                    );
                    session = None;
                    continue;
                }
                Ok(Ok(resp)) if [502, 503, 504].contains(&resp.status) => c.clear(format!(
                    "{tool} #{id}: HTTP {}: {}",
                    resp.status,
                    String::from_utf8_lossy(&resp.body[..resp.body.len().min(200)])
                )),
                Ok(Ok(resp)) => match mcp::reply_of(&resp, id) {
                    Ok(reply) if mcp::check_echo(&reply, &args).is_ok() => {
                        c.ok.fetch_add(1, Ordering::Relaxed);
                        *calls += 1;
                    }
                    Ok(reply)
                        if matches!(
                            reply.pointer("/error/code").and_then(Value::as_i64),
                            Some(-32000 | -32001)
                        ) =>
                    {
                        c.clear(format!("{tool} #{id}: {reply}"));
                    }
                    Ok(reply) => c.bad(&c.wrong, format!("{tool} #{id}: {reply}")),
                    Err(e) => c.bad(&c.wrong, format!("{tool} #{id}: {e:#}")),
                },
            }
            // Only answered calls count: a session outlives an outage (Redis restarting, an
            // upstream down) and meets what comes after it.
            if *calls >= self.per_session {
                let (s, _, _) = session.take().expect("a session");
                match tokio::time::timeout(self.hang_after, delete(&mut conn, &s)).await {
                    Ok(Ok(200)) => {
                        c.deleted.fetch_add(1, Ordering::Relaxed);
                    }
                    // Ended already: DELETE is idempotent, so nginx sends it to the next
                    // replica when the one that ended the session was killed before it
                    // answered. (A session lost before its DELETE shows on its calls.)
                    Ok(Ok(404)) => {
                        c.deleted_again.fetch_add(1, Ordering::Relaxed);
                    }
                    Ok(Ok(status @ (502..=504))) => c.clear(format!("DELETE: HTTP {status}")),
                    Ok(Ok(status)) => c.bad(&c.wrong, format!("DELETE: HTTP {status}")),
                    Ok(Err(e)) => {
                        c.bad(&c.dropped, format!("DELETE: {e:#}"));
                        conn = Conn::new(self.target.clone());
                    }
                    Err(_) => {
                        c.bad(&c.hung, "DELETE: no answer".into());
                        conn = Conn::new(self.target.clone());
                    }
                }
            }
        }
    }
}

/// Everything the soak started, stopped at drop.
struct Procs {
    replicas: Vec<Replica>,
    redis: Option<Child>,
    nginx: Option<Child>,
    echo: Option<Child>,
}

impl Drop for Procs {
    fn drop(&mut self) {
        for r in &mut self.replicas {
            r.kill9();
        }
        for c in [&mut self.redis, &mut self.nginx, &mut self.echo]
            .into_iter()
            .flatten()
        {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// The soak across replicas; Ok(true) when it met its targets.
pub(crate) fn run(o: &Options) -> Result<bool> {
    let dir = std::env::temp_dir().join(format!("sluice-soak-cluster-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let home = dir.join("home");
    std::fs::create_dir_all(home.join("mcp"))?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let result = rt.block_on(soak(o, &dir, &home));
    match &result {
        Ok(true) => {
            let _ = std::fs::remove_dir_all(&dir);
        }
        _ => eprintln!("the replicas' logs: {}", dir.display()),
    }
    result
}

async fn soak(o: &Options, dir: &Path, home: &Path) -> Result<bool> {
    let key = String::from_utf8(
        Command::new(&o.sluice)
            .args(["cluster", "keygen"])
            .output()
            .context("sluice cluster keygen")?
            .stdout,
    )?
    .trim()
    .to_string();
    let (redis_port, http_port, front) = (free_port()?, free_port()?, free_port()?);
    let http_url = format!("http://127.0.0.1:{http_port}/mcp");
    let expose_path = home.join("mcp/expose.json");
    write_atomic(&expose_path, &expose(&o.echo, &http_url, false))?;
    std::fs::write(
        home.join("sluice.json"),
        json!({"cluster": {"key": "${env:SLUICE_CLUSTER_KEY}",
            "redis": format!("redis://127.0.0.1:{redis_port}/0")}})
        .to_string(),
    )?;
    let mut p = Procs {
        replicas: Vec::new(),
        redis: Some(redis(redis_port)?),
        nginx: None,
        echo: Some(spawn_echo(&o.echo, http_port)?),
    };
    wait_port(redis_port, Duration::from_secs(20)).await?;
    for i in 0..o.replicas {
        let mut r = Replica {
            port: free_port()?,
            child: None,
            log: dir.join(format!("replica-{}.log", i + 1)),
        };
        r.start(o, home, &key).await?;
        p.replicas.push(r);
    }
    let ports: Vec<u16> = p.replicas.iter().map(|r| r.port).collect();
    p.nginx = Some(nginx(dir, front, &ports)?);
    wait_port(front, Duration::from_secs(20)).await?;
    let target = Target::parse(&format!("http://127.0.0.1:{front}/mcp"))?;
    super::ready(&target).await?;

    let counts = Arc::new(Counts::default());
    let restart = Arc::new(Mutex::new(RedisRestart::default()));
    let start = Instant::now();
    let deadline = start + o.duration;
    let mut samples = sample(&p.replicas, 0.0);
    let workers: Vec<_> = (0..o.concurrency)
        .map(|n| {
            tokio::spawn(
                Worker {
                    n,
                    began: start,
                    target: target.clone(),
                    deadline,
                    hang_after: o.hang_after,
                    per_session: o.calls_per_session,
                    counts: counts.clone(),
                    restart: restart.clone(),
                }
                .run(),
            )
        })
        .collect();

    let at = |s: Duration| start + s;
    let (mut next_kill, mut next_edit, mut next_sample, mut next_replica_kill) = (
        at(o.kill_every),
        at(o.edit_every),
        at(o.sample_every),
        at(o.replica_kill_every),
    );
    let (mut rolled, mut redis_restarted) = (false, false);
    let (mut kills, mut http_kills, mut edits, mut replica_kills) = (0u64, 0u64, 0u64, 0u64);
    let (mut extra, mut upstream_rounds) = (false, 0u64);
    while Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let now = Instant::now();
        let t = (now - start).as_secs_f64();
        if now >= next_sample {
            next_sample += o.sample_every;
            samples.extend(sample(&p.replicas, t));
        }
        if !rolled && now >= at(o.rolling_at) {
            rolled = true;
            eprintln!("{t:.0}s: rolling restart");
            for r in &mut p.replicas {
                r.stop().await;
                r.start(o, home, &key).await?;
            }
        }
        if !redis_restarted && now >= at(o.redis_restart_at) {
            redis_restarted = true;
            eprintln!("{t:.0}s: Redis restarted (it keeps nothing: the sessions it held are lost)");
            restart.lock().unwrap().down = Some(Instant::now());
            if let Some(mut r) = p.redis.take() {
                let _ = r.kill();
                let _ = r.wait();
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
            p.redis = Some(redis(redis_port)?);
            wait_port(redis_port, Duration::from_secs(20)).await?;
            restart.lock().unwrap().back = Some(Instant::now());
        }
        let quiet = now + Duration::from_secs(2) >= deadline;
        if now >= next_replica_kill && p.replicas.len() > 1 && !quiet {
            next_replica_kill += o.replica_kill_every;
            let i = 1 + (replica_kills as usize) % (p.replicas.len() - 1);
            replica_kills += 1;
            eprintln!("{t:.0}s: kill -9 of replica {}, started again", i + 1);
            p.replicas[i].kill9();
            p.replicas[i].start(o, home, &key).await?;
        }
        if now >= next_kill {
            next_kill += o.kill_every;
            for r in &p.replicas {
                for pid in r.pid().map(stdio_children).unwrap_or_default() {
                    sigkill(pid);
                    kills += 1;
                }
            }
            upstream_rounds += 1;
            if upstream_rounds.is_multiple_of(2) {
                if let Some(mut e) = p.echo.take() {
                    let _ = e.kill();
                    let _ = e.wait();
                }
                http_kills += 1;
                tokio::time::sleep(Duration::from_secs(1)).await;
                p.echo = Some(spawn_echo(&o.echo, http_port)?);
            }
        }
        if now >= next_edit {
            next_edit += o.edit_every;
            extra = !extra;
            write_atomic(&expose_path, &expose(&o.echo, &http_url, extra))?;
            edits += 1;
        }
    }
    for w in workers {
        w.await?;
    }
    let elapsed = start.elapsed().as_secs_f64();
    samples.extend(sample(&p.replicas, elapsed));
    drop(p);

    // Growth of each replica that lived from `growth_from` to the end (the same process).
    let from = o.growth_from.as_secs_f64();
    let mut growth = Vec::new();
    for i in 1..=o.replicas {
        let mine: Vec<&Value> = samples.iter().filter(|s| s["replica"] == i).collect();
        let (Some(first), Some(last)) = (
            mine.iter().find(|s| s["t"].as_f64() >= Some(from)),
            mine.last(),
        ) else {
            continue;
        };
        if first["pid"] != last["pid"] || last["t"].as_f64() < Some(from + 30.0) {
            continue;
        }
        let ratio = |k: &str| {
            last[k].as_f64().unwrap_or(0.0) / first[k].as_f64().unwrap_or(1.0).max(1.0) - 1.0
        };
        growth.push(
            json!({"replica": i, "from_s": first["t"], "to_s": last["t"],
            "rss_growth": ratio("rss_kb"), "fds_growth": ratio("fds")}),
        );
    }
    let grew = growth.iter().any(|g| {
        g["rss_growth"].as_f64().unwrap_or(0.0) > MAX_GROWTH
            || g["fds_growth"].as_f64().unwrap_or(0.0) > MAX_GROWTH
    });
    let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
    let report = json!({
        "kind": "soak-cluster", "replicas": o.replicas, "concurrency": o.concurrency,
        "elapsed_s": elapsed, "ok": get(&counts.ok), "clear_errors": get(&counts.clear),
        "wrong": get(&counts.wrong), "hung": get(&counts.hung), "dropped": get(&counts.dropped),
        "sessions": get(&counts.sessions), "deleted": get(&counts.deleted),
        "lost_sessions": get(&counts.lost), "lost_by_redis_restart": get(&counts.lost_by_design),
        "replica_kills": replica_kills, "rolling_restart": rolled, "redis_restarts": u64::from(redis_restarted),
        "stdio_kills": kills, "http_kills": http_kills, "tree_edits": edits,
        "deletes_answered_404": get(&counts.deleted_again),
        "failures": counts.bad.lock().unwrap().iter()
            .map(|(at, why)| format!("{:.1} s: {why}", at.duration_since(start).as_secs_f64()))
            .collect::<Vec<_>>(),
        "first_clear_error": *counts.first_clear.lock().unwrap(),
        "samples": samples, "growth": growth,
    });
    println!("{report}");
    eprintln!(
        "soak --cluster {elapsed:.0}s, {} replicas, c={}: {} ok, {} clear errors, {} wrong, {} hung, {} dropped \
         | {} sessions ({} ended by DELETE, {} more DELETEs answered 404), {} lost, {} lost by the Redis restart (by design) \
         | {replica_kills} replica kills, rolling restart {}, Redis restarts {}, {kills} stdio kills, {http_kills} http kills, {edits} tree edits",
        o.replicas,
        o.concurrency,
        get(&counts.ok),
        get(&counts.clear),
        get(&counts.wrong),
        get(&counts.hung),
        get(&counts.dropped),
        get(&counts.sessions),
        get(&counts.deleted),
        get(&counts.deleted_again),
        get(&counts.lost),
        get(&counts.lost_by_design),
        if rolled { "done" } else { "not reached" },
        u64::from(redis_restarted),
    );
    for s in report["samples"].as_array().into_iter().flatten() {
        eprintln!(
            "  t={:>4}s replica {} pid {:>7}: RSS {:>6.1} MB, {:>4} descriptors",
            s["t"],
            s["replica"],
            s["pid"],
            s["rss_kb"].as_f64().unwrap_or(0.0) / 1024.0,
            s["fds"]
        );
    }
    for g in &growth {
        eprintln!(
            "  replica {} from {}s to {}s: RSS {:+.1}%, descriptors {:+.1}%",
            g["replica"],
            g["from_s"],
            g["to_s"],
            g["rss_growth"].as_f64().unwrap_or(0.0) * 100.0,
            g["fds_growth"].as_f64().unwrap_or(0.0) * 100.0
        );
    }
    for f in report["failures"].as_array().into_iter().flatten() {
        eprintln!("failure at {}", f.as_str().unwrap_or(""));
    }
    Ok(get(&counts.wrong) == 0
        && get(&counts.hung) == 0
        && get(&counts.dropped) == 0
        && get(&counts.lost) == 0
        && !grew)
}
