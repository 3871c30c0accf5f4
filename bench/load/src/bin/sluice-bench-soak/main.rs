//! `sluice-bench-soak`: calls at concurrency C for D seconds through a gateway whose upstreams
//! are killed, whose tree is edited and which is sent slow connections on a schedule; every
//! call is classified and the run fails unless no answer was wrong, hung or lost.
//!
//! ```text
//! sluice-bench-soak [--sluice PATH] [--echo PATH] [-c 8] [--duration 60] [--kill-every 10]
//!                   [--edit-every 7] [--slow-every 5] [--slow 4] [--hang-after 15]
//! sluice-bench-soak --cluster [-c 32] [--replicas 3] [--replica-kill-every 60] [--rolling-at 30]
//!                   [--redis-restart-at S] [--calls-per-session 50] [--sample-every 60]
//!                   [--growth-from 120] [--duration …] [--kill-every …] [--edit-every …]
//! ```
//!
//! With `--cluster`, the soak across replicas ([`cluster`]): replicas behind nginx sharing one
//! Redis, replicas killed and rolled, Redis restarted.
//!
//! It starts `sluice-bench-echo --listen` (the HTTP upstream `h`) and `sluice serve --home` on
//! a fresh tree whose `mcp/expose.json` also has a stdio upstream `s` (`sluice-bench-echo
//! --stdio`), then calls `s_echo` and `h_echo` in turn from C sessions, each on its own
//! keep-alive connection. On its schedules it SIGKILLs the gateway's stdio child (found in
//! /proc) and, every other time, the HTTP upstream (started again a second later); rewrites
//! `mcp/expose.json` atomically with an extra tool added or removed; and opens slow
//! connections that send a request's headers one byte a second.
//!
//! Each call is one of: **ok** (the echo of its arguments), **clear error** (a JSON-RPC error
//! with code -32000 or -32001: the upstream is unavailable or timed out, as while it restarts),
//! **wrong** (any other reply), **hung** (no answer within `--hang-after` seconds) or **lost**
//! (the connection closed, or could not be opened, with no answer).

use anyhow::{anyhow, bail, Context, Result};
use serde_json::{json, Value};
use sluice_bench_load::http::{Conn, Target};
use sluice_bench_load::{mcp, procfs};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

mod cluster;

struct Options {
    cluster: bool,
    replicas: usize,
    replica_kill_every: Duration,
    rolling_at: Duration,
    redis_restart_at: Duration,
    calls_per_session: u64,
    sample_every: Duration,
    growth_from: Duration,
    sluice: PathBuf,
    echo: PathBuf,
    concurrency: usize,
    duration: Duration,
    kill_every: Duration,
    edit_every: Duration,
    slow_every: Duration,
    slow: usize,
    hang_after: Duration,
}

const USAGE: &str = "usage: sluice-bench-soak [--sluice PATH] [--echo PATH] [-c C] [--duration S] [--kill-every S] [--edit-every S] [--slow-every S] [--slow N] [--hang-after S]
       sluice-bench-soak --cluster [--replicas N] [--replica-kill-every S] [--rolling-at S] [--redis-restart-at S] [--calls-per-session N] [--sample-every S] [--growth-from S] [-c C] [--duration S] [--kill-every S] [--edit-every S] [--hang-after S]";

fn sibling(name: &str) -> PathBuf {
    std::env::current_exe()
        .ok()
        .and_then(|p| p.parent().map(|d| d.join(name)))
        .unwrap_or_else(|| PathBuf::from(name))
}

fn parse_args() -> Result<Options> {
    let mut o = Options {
        cluster: false,
        replicas: 3,
        replica_kill_every: Duration::from_secs(60),
        rolling_at: Duration::from_secs(30),
        redis_restart_at: Duration::ZERO,
        calls_per_session: 50,
        sample_every: Duration::from_secs(60),
        growth_from: Duration::from_secs(120),
        sluice: std::env::var_os("SLUICE_BIN")
            .map(PathBuf::from)
            .unwrap_or_else(|| sibling("sluice")),
        echo: sibling("sluice-bench-echo"),
        concurrency: 8,
        duration: Duration::from_secs(60),
        kill_every: Duration::from_secs(10),
        edit_every: Duration::from_secs(7),
        slow_every: Duration::from_secs(5),
        slow: 4,
        hang_after: Duration::from_secs(15),
    };
    let mut it = std::env::args().skip(1);
    let (mut concurrency, mut redis_at) = (None, None);
    while let Some(a) = it.next() {
        let mut val = || {
            it.next()
                .ok_or_else(|| anyhow!("{a} needs a value\n{USAGE}"))
        };
        let secs = |v: String| -> Result<Duration> {
            Ok(Duration::from_secs_f64(v.parse().context("seconds")?))
        };
        match a.as_str() {
            "--sluice" => o.sluice = val()?.into(),
            "--echo" => o.echo = val()?.into(),
            "-c" | "--concurrency" => concurrency = Some(val()?.parse()?),
            "--cluster" => o.cluster = true,
            "--replicas" => o.replicas = val()?.parse()?,
            "--replica-kill-every" => o.replica_kill_every = secs(val()?)?,
            "--rolling-at" => o.rolling_at = secs(val()?)?,
            "--redis-restart-at" => redis_at = Some(secs(val()?)?),
            "--calls-per-session" => o.calls_per_session = val()?.parse::<u64>()?.max(1),
            "--sample-every" => o.sample_every = secs(val()?)?,
            "--growth-from" => o.growth_from = secs(val()?)?,
            "--duration" => o.duration = secs(val()?)?,
            "--kill-every" => o.kill_every = secs(val()?)?,
            "--edit-every" => o.edit_every = secs(val()?)?,
            "--slow-every" => o.slow_every = secs(val()?)?,
            "--slow" => o.slow = val()?.parse()?,
            "--hang-after" => o.hang_after = secs(val()?)?,
            _ => bail!("unknown argument {a}\n{USAGE}"),
        }
    }
    o.concurrency = concurrency.unwrap_or(if o.cluster { 32 } else { 8 });
    o.redis_restart_at = redis_at.unwrap_or(o.duration / 2);
    if o.cluster && o.replicas == 0 {
        bail!("--replicas must be at least 1");
    }
    Ok(o)
}

#[derive(Default)]
struct Counts {
    ok: AtomicU64,
    clear: AtomicU64,
    wrong: AtomicU64,
    hung: AtomicU64,
    lost: AtomicU64,
    first_bad: Mutex<Option<String>>,
}

impl Counts {
    fn bad(&self, what: &AtomicU64, why: String) {
        what.fetch_add(1, Ordering::Relaxed);
        let mut f = self.first_bad.lock().unwrap();
        if f.is_none() {
            *f = Some(why);
        }
    }
}

fn free_port() -> Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

fn write_atomic(path: &Path, value: &Value) -> Result<()> {
    let tmp = path.with_extension("json.soak-tmp");
    std::fs::write(&tmp, serde_json::to_string_pretty(value)?)?;
    std::fs::rename(&tmp, path)?;
    Ok(())
}

fn expose(echo: &Path, http_url: &str, extra: bool) -> Value {
    let mut tools = vec![
        json!({"upstream": "s", "tool": "echo", "as": "s_echo"}),
        json!({"upstream": "h", "tool": "echo", "as": "h_echo"}),
    ];
    if extra {
        // Another of the stdio echo's tools (one upstream tool is exposed once).
        tools.push(json!({"upstream": "s", "tool": "echo_0001", "as": "s_echo_extra"}));
    }
    json!({
        "version": 1,
        "upstreams": [
            {"id": "s", "transport": "stdio", "command": echo.display().to_string(), "args": ["--stdio", "--tools", "2"]},
            {"id": "h", "transport": "http", "url": http_url},
        ],
        "expose": tools,
    })
}

fn spawn_echo(echo: &Path, port: u16) -> Result<Child> {
    Command::new(echo)
        .args(["--listen", &format!("127.0.0.1:{port}")])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .with_context(|| format!("starting {}", echo.display()))
}

fn sigkill(pid: u32) {
    let _ = Command::new("kill")
        .args(["-KILL", &pid.to_string()])
        .status();
}

/// The gateway's children whose command line has `--stdio` (the stdio upstream).
fn stdio_children(gateway: u32) -> Vec<u32> {
    procfs::children(gateway)
        .into_iter()
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .map(|c| c.split(|b| *b == 0).any(|a| a == b"--stdio"))
                .unwrap_or(false)
        })
        .collect()
}

/// The call numbered `id` of a session: `s_echo` and `h_echo` in turn (the tool, the body, the
/// arguments the reply must echo).
fn echo_call(s: &mcp::Session, id: u64) -> (&'static str, Vec<u8>, Value) {
    let tool = if id.is_multiple_of(2) {
        "s_echo"
    } else {
        "h_echo"
    };
    let (body, args) = s.echo_call(id, tool, "soak");
    (tool, body, args)
}

/// One worker: a session on its own connection, calls until the deadline.
async fn worker(
    n: usize,
    target: Arc<Target>,
    deadline: Instant,
    hang_after: Duration,
    counts: Arc<Counts>,
) {
    let mut conn = Conn::new(target.clone());
    let mut session = None;
    let mut id = (n as u64) * 1_000_000_000;
    while Instant::now() < deadline {
        if session.is_none() {
            match tokio::time::timeout(hang_after, mcp::initialize(&mut conn, "sluice-bench-soak"))
                .await
            {
                Ok(Ok(s)) => session = Some(s),
                Ok(Err(e)) => {
                    counts.bad(&counts.lost, format!("initialize: {e:#}"));
                    conn = Conn::new(target.clone());
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
                Err(_) => {
                    counts.bad(&counts.hung, "initialize: no answer".into());
                    conn = Conn::new(target.clone());
                    continue;
                }
            }
        }
        let s = session.as_ref().expect("a session");
        id += 1;
        let (tool, body, args) = echo_call(s, id);
        match tokio::time::timeout(hang_after, s.call(&mut conn, id, tool, &body)).await {
            Err(_) => {
                counts.bad(
                    &counts.hung,
                    format!("{tool} #{id}: no answer in {hang_after:?}"),
                );
                conn = Conn::new(target.clone());
            }
            Ok(Err(e)) => {
                let text = format!("{e:#}");
                if text.contains("closed the connection")
                    || text.contains("connecting to")
                    || text.contains("reset")
                    || text.contains("broken pipe")
                {
                    counts.bad(&counts.lost, format!("{tool} #{id}: {text}"));
                } else {
                    counts.bad(&counts.wrong, format!("{tool} #{id}: {text}"));
                }
                conn = Conn::new(target.clone());
            }
            Ok(Ok(reply)) => {
                if mcp::check_echo(&reply, &args).is_ok() {
                    counts.ok.fetch_add(1, Ordering::Relaxed);
                } else {
                    match reply.pointer("/error/code").and_then(Value::as_i64) {
                        Some(-32000 | -32001) => {
                            counts.clear.fetch_add(1, Ordering::Relaxed);
                        }
                        _ => counts.bad(&counts.wrong, format!("{tool} #{id}: {reply}")),
                    }
                }
            }
        }
    }
}

/// A slow connection: a request's headers, one byte a second, until `stop` or the server
/// closes it. True when the server closed it.
async fn slow_conn(addr: String, stop: Arc<AtomicBool>) -> bool {
    let Ok(mut s) = tokio::net::TcpStream::connect(&addr).await else {
        return true;
    };
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nX-Slow: {}\r\n",
        "a".repeat(4096)
    );
    let mut buf = [0u8; 512];
    for b in head.bytes() {
        if stop.load(Ordering::Relaxed) {
            return false;
        }
        if s.write_all(&[b]).await.is_err() {
            return true;
        }
        match tokio::time::timeout(Duration::from_secs(1), s.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => return true,
            Ok(Ok(_)) => return true, // an answer (408, 400 …) and then a close
            Err(_) => {}
        }
    }
    false
}

fn main() -> ExitCode {
    match run() {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("sluice-bench-soak: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn run() -> Result<bool> {
    let o = parse_args()?;
    for (what, p) in [("sluice", &o.sluice), ("sluice-bench-echo", &o.echo)] {
        if !p.is_file() {
            bail!(
                "{what} not found at {} (build it with cargo build --release)",
                p.display()
            );
        }
    }
    if o.cluster {
        return cluster::run(&o);
    }
    let home = std::env::temp_dir().join(format!("sluice-soak-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&home);
    std::fs::create_dir_all(home.join("mcp"))?;
    let http_port = free_port()?;
    let gw_port = free_port()?;
    let http_url = format!("http://127.0.0.1:{http_port}/mcp");
    let expose_path = home.join("mcp/expose.json");
    write_atomic(&expose_path, &expose(&o.echo, &http_url, false))?;
    let mut echo = spawn_echo(&o.echo, http_port)?;
    let log = std::fs::File::create(home.join("sluice.log"))?;
    let mut gateway = Command::new(&o.sluice)
        .arg("serve")
        .arg("--home")
        .arg(&home)
        .args(["--listen", &format!("127.0.0.1:{gw_port}"), "--no-admin"])
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .with_context(|| format!("starting {}", o.sluice.display()))?;
    let gw_pid = gateway.id();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let result = rt.block_on(soak(
        &o,
        gw_pid,
        gw_port,
        http_port,
        &expose_path,
        &http_url,
        &mut echo,
    ));
    let _ = gateway.kill();
    let _ = gateway.wait();
    let _ = echo.kill();
    let _ = echo.wait();
    match &result {
        Ok(true) => {
            let _ = std::fs::remove_dir_all(&home);
        }
        _ => eprintln!("the gateway's log: {}", home.join("sluice.log").display()),
    }
    result
}

/// Wait until the gateway is ready: a session opens and both tools answer (30 s at most).
async fn ready(target: &Arc<Target>) -> Result<()> {
    let ready_by = Instant::now() + Duration::from_secs(30);
    loop {
        let mut c = Conn::new(target.clone());
        let ok = async {
            let s = mcp::initialize(&mut c, "sluice-bench-soak").await?;
            for (i, tool) in [(1, "s_echo"), (2, "h_echo")] {
                let (body, args) = s.echo_call(i, tool, "ready");
                mcp::check_echo(&s.call(&mut c, i, tool, &body).await?, &args)?;
            }
            anyhow::Ok(())
        }
        .await;
        match ok {
            Ok(()) => return Ok(()),
            Err(e) if Instant::now() > ready_by => bail!("the gateway is not ready: {e:#}"),
            Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
}

async fn soak(
    o: &Options,
    gw_pid: u32,
    gw_port: u16,
    http_port: u16,
    expose_path: &Path,
    http_url: &str,
    echo: &mut Child,
) -> Result<bool> {
    let url = format!("http://127.0.0.1:{gw_port}/mcp");
    let target = Target::parse(&url)?;
    ready(&target).await?;
    let rss_start = procfs::rss_kb(gw_pid).unwrap_or(0);
    let counts = Arc::new(Counts::default());
    let start = Instant::now();
    let deadline = start + o.duration;
    let workers: Vec<_> = (0..o.concurrency)
        .map(|n| {
            tokio::spawn(worker(
                n,
                target.clone(),
                deadline,
                o.hang_after,
                counts.clone(),
            ))
        })
        .collect();

    let (mut kills, mut http_kills, mut edits, mut slow_opened) = (0u64, 0u64, 0u64, 0u64);
    let stop = Arc::new(AtomicBool::new(false));
    let mut slow_tasks = Vec::new();
    let (mut next_kill, mut next_edit, mut next_slow) = (
        start + o.kill_every,
        start + o.edit_every,
        start + o.slow_every,
    );
    let mut extra = false;
    while Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let now = Instant::now();
        if now >= next_kill {
            next_kill += o.kill_every;
            for pid in stdio_children(gw_pid) {
                sigkill(pid);
                kills += 1;
            }
            if kills.is_multiple_of(2) {
                let _ = echo.kill();
                let _ = echo.wait();
                http_kills += 1;
                tokio::time::sleep(Duration::from_secs(1)).await;
                *echo = spawn_echo(&o.echo, http_port)?;
            }
        }
        if now >= next_edit {
            next_edit += o.edit_every;
            extra = !extra;
            write_atomic(expose_path, &expose(&o.echo, http_url, extra))?;
            edits += 1;
        }
        if now >= next_slow && o.slow > 0 {
            next_slow += o.slow_every;
            for _ in 0..o.slow {
                slow_tasks.push(tokio::spawn(slow_conn(
                    format!("127.0.0.1:{gw_port}"),
                    stop.clone(),
                )));
                slow_opened += 1;
            }
        }
    }
    for w in workers {
        w.await?;
    }
    stop.store(true, Ordering::Relaxed);
    let mut slow_closed = 0u64;
    for t in slow_tasks {
        if t.await? {
            slow_closed += 1;
        }
    }
    let rss_end = procfs::rss_kb(gw_pid).unwrap_or(0);
    let elapsed = start.elapsed().as_secs_f64();
    let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
    let (ok, clear, wrong, hung, lost) = (
        get(&counts.ok),
        get(&counts.clear),
        get(&counts.wrong),
        get(&counts.hung),
        get(&counts.lost),
    );
    let first_bad = counts.first_bad.lock().unwrap().clone();
    let report = json!({
        "kind": "soak", "concurrency": o.concurrency, "elapsed_s": elapsed,
        "ok": ok, "clear_errors": clear, "wrong": wrong, "hung": hung, "lost": lost,
        "stdio_kills": kills, "http_kills": http_kills, "tree_edits": edits,
        "slow_connections": slow_opened, "slow_closed_by_gateway": slow_closed,
        "rss_start_kb": rss_start, "rss_end_kb": rss_end, "first_bad": first_bad,
    });
    println!("{report}");
    eprintln!(
        "soak {elapsed:.0}s c={}: {ok} ok, {clear} clear errors, {wrong} wrong, {hung} hung, {lost} lost \
         | {kills} stdio kills, {http_kills} http kills, {edits} tree edits, {slow_opened} slow connections \
         ({slow_closed} closed by the gateway) | RSS {:.1} MB -> {:.1} MB",
        o.concurrency,
        rss_start as f64 / 1024.0,
        rss_end as f64 / 1024.0
    );
    if let Some(b) = &first_bad {
        eprintln!("first failure: {b}");
    }
    Ok(wrong == 0 && hung == 0 && lost == 0)
}
