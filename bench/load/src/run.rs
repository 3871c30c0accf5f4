//! The measurements: `calls` (tools/call at concurrency C), `list` (a full tools/list, every
//! page), `sessions` (RSS cost of N idle sessions) and `startup` (spawn → accepting → first
//! tools/list answered, then idle RSS). Each returns a report that serialises to one JSON line.

use crate::http::{Conn, Target};
use crate::mcp::{self, Session};
use crate::procfs;
use crate::stats::{self, Latency};
use anyhow::{anyhow, bail, Context, Result};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The client name sent in `initialize`.
pub const CLIENT: &str = "sluice-bench-load";

/// A process to watch during a measurement.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Watch {
    /// What it is ("gateway", "upstream", …).
    pub label: String,
    /// Its PID.
    pub pid: u32,
}

impl Watch {
    /// Parse `LABEL=PID` or a bare `PID` (labelled "process").
    pub fn parse(s: &str) -> Result<Watch> {
        let (label, pid) = match s.split_once('=') {
            Some((l, p)) => (l.to_string(), p),
            None => ("process".to_string(), s),
        };
        Ok(Watch {
            label,
            pid: pid.parse().map_err(|_| anyhow!("not a PID: {pid:?}"))?,
        })
    }
}

/// What a watched process used during the measured phase.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ProcReport {
    /// Its label.
    pub label: String,
    /// Its PID.
    pub pid: u32,
    /// CPU seconds (user + system) during the measured phase.
    pub cpu_s: f64,
    /// CPU seconds per 1000 calls.
    pub cpu_s_per_1000: f64,
    /// CPU microseconds per call (the same figure, per call).
    pub cpu_us_per_call: f64,
    /// Microseconds per call its threads spent runnable but waiting for a CPU.
    #[serde(default)]
    pub wait_us_per_call: Option<f64>,
    /// VmRSS at the end, kB.
    pub rss_kb: u64,
    /// VmHWM (peak RSS over the process's life) at the end, kB.
    pub peak_rss_kb: u64,
}

struct ProcStart {
    watch: Watch,
    cpu: f64,
    threads: Option<std::collections::HashMap<u32, u64>>,
    waits: Option<std::collections::HashMap<u32, u64>>,
}

fn proc_start(watches: &[Watch]) -> Vec<ProcStart> {
    watches
        .iter()
        .map(|w| ProcStart {
            watch: w.clone(),
            cpu: procfs::cpu_seconds(w.pid).unwrap_or(f64::NAN),
            threads: procfs::cpu_ns_by_thread(w.pid),
            waits: procfs::wait_ns_by_thread(w.pid),
        })
        .collect()
}

/// `seconds` spread over `calls`, in µs per call (`None` without calls).
fn us_per_call(seconds: Option<f64>, calls: u64) -> Option<f64> {
    seconds
        .filter(|_| calls > 0)
        .map(|s| s * 1e6 / calls as f64)
}

fn proc_end(starts: &[ProcStart], calls: u64) -> Vec<ProcReport> {
    starts
        .iter()
        .map(|s| {
            let pid = s.watch.pid;
            // Nanoseconds per thread when every thread is still there, else clock ticks.
            let precise = s
                .threads
                .as_ref()
                .zip(procfs::cpu_ns_by_thread(pid))
                .and_then(|(a, b)| procfs::seconds_between(a, &b));
            let cpu =
                precise.unwrap_or_else(|| procfs::cpu_seconds(pid).unwrap_or(f64::NAN) - s.cpu);
            let per_call = if calls > 0 { cpu / calls as f64 } else { 0.0 };
            let wait_us_per_call = us_per_call(
                s.waits
                    .as_ref()
                    .zip(procfs::wait_ns_by_thread(pid))
                    .and_then(|(a, b)| procfs::seconds_between(a, &b)),
                calls,
            );
            ProcReport {
                label: s.watch.label.clone(),
                pid,
                cpu_s: cpu,
                cpu_s_per_1000: per_call * 1000.0,
                cpu_us_per_call: per_call * 1e6,
                wait_us_per_call,
                rss_kb: procfs::rss_kb(pid).unwrap_or(0),
                peak_rss_kb: procfs::peak_rss_kb(pid).unwrap_or(0),
            }
        })
        .collect()
}

// --- calls ------------------------------------------------------------------------------------

/// Options of a `calls` measurement.
#[derive(Debug, Clone)]
pub struct CallsOptions {
    /// A label for the report.
    pub label: String,
    /// The MCP endpoint.
    pub url: String,
    /// The tool to call.
    pub tool: String,
    /// Calls in flight at once (one keep-alive connection each).
    pub concurrency: usize,
    /// Measured calls (an upper bound when `duration` is set).
    pub calls: u64,
    /// Stop the measured phase after this long.
    pub duration: Option<Duration>,
    /// Unmeasured calls first (connections opened, caches warm).
    pub warmup_calls: u64,
    /// Or an unmeasured warm-up of this long (whichever ends first).
    pub warmup: Option<Duration>,
    /// Extra bytes of text in each call's arguments.
    pub payload_bytes: usize,
    /// Processes whose CPU and RSS to report.
    pub watch: Vec<Watch>,
    /// Speak 2026-07-28 (no `initialize`; `_meta` and the mirrored headers on every call).
    pub modern: bool,
    /// `(name, value)` pairs sent on every request (e.g. `Authorization` for a protected
    /// upstream called directly).
    pub headers: Vec<(String, String)>,
}

/// The result of a `calls` measurement.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct CallsReport {
    /// Always "calls".
    pub kind: String,
    /// The label given.
    pub label: String,
    /// The endpoint.
    pub url: String,
    /// The tool called.
    pub tool: String,
    /// Concurrency.
    pub concurrency: usize,
    /// Calls measured (answered or failed).
    pub calls: u64,
    /// Calls whose reply failed the check (or that failed outright).
    pub errors: u64,
    /// The first failure, if any.
    pub first_error: Option<String>,
    /// Wall time of the measured phase.
    pub elapsed_s: f64,
    /// Calls per second.
    pub rps: f64,
    /// Latency of the successful calls.
    #[serde(flatten)]
    pub latency: Latency,
    /// Watched processes.
    pub procs: Vec<ProcReport>,
    /// Time the machine's CPUs spent idle during the measured phase, µs per call, all CPUs
    /// together: with every process's CPU per call it accounts for the whole machine (at
    /// saturation, a gateway that leaves CPUs idle loses throughput it did not spend).
    #[serde(default)]
    pub idle_us_per_call: Option<f64>,
    /// The load generator's own CPU during the measured phase, µs per call (its whole process:
    /// in the suite's in-process mode, the suite's).
    #[serde(default)]
    pub client_cpu_us_per_call: Option<f64>,
}

impl CallsReport {
    /// One human line.
    pub fn human(&self) -> String {
        let mut s = format!(
            "{:<28} c={:<3} {:>7} calls {:>9.0} req/s  p50 {:>7.0} µs  p90 {:>7.0} µs  p99 {:>7.0} µs  max {:>8.0} µs",
            self.label,
            self.concurrency,
            self.calls,
            self.rps,
            self.latency.p50_us,
            self.latency.p90_us,
            self.latency.p99_us,
            self.latency.max_us
        );
        for p in &self.procs {
            s.push_str(&format!(
                "  | {} {:.1} µs CPU/call, peak RSS {:.1} MB",
                p.label,
                p.cpu_us_per_call,
                p.peak_rss_kb as f64 / 1024.0
            ));
        }
        if self.errors > 0 {
            s.push_str(&format!(
                "  | {} ERRORS, first: {}",
                self.errors,
                self.first_error.as_deref().unwrap_or("?")
            ));
        }
        s
    }
}

struct PhaseResult {
    conns: Vec<Conn>,
    samples: Vec<u64>,
    calls: u64,
    errors: u64,
    first_error: Option<String>,
    elapsed: Duration,
}

async fn phase(
    conns: Vec<Conn>,
    session: Arc<Session>,
    tool: Arc<str>,
    filler: Arc<str>,
    limit: u64,
    duration: Option<Duration>,
    ids: Arc<AtomicU64>,
) -> PhaseResult {
    let next = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let deadline = duration.map(|d| start + d);
    let mut tasks = Vec::new();
    for mut conn in conns {
        let (session, tool, filler, next, ids) = (
            session.clone(),
            tool.clone(),
            filler.clone(),
            next.clone(),
            ids.clone(),
        );
        tasks.push(tokio::spawn(async move {
            let mut samples = Vec::with_capacity(4096);
            let mut calls = 0u64;
            let mut errors = 0u64;
            let mut first_error = None;
            loop {
                if next.fetch_add(1, Ordering::Relaxed) >= limit {
                    break;
                }
                if deadline.is_some_and(|d| Instant::now() >= d) {
                    break;
                }
                let id = ids.fetch_add(1, Ordering::Relaxed);
                let (body, args) = session.echo_call(id, &tool, &filler);
                let t = Instant::now();
                let outcome = session
                    .call(&mut conn, id, &tool, &body)
                    .await
                    .and_then(|reply| mcp::check_echo(&reply, &args));
                let us = t.elapsed().as_micros() as u64;
                calls += 1;
                match outcome {
                    Ok(()) => samples.push(us),
                    Err(e) => {
                        errors += 1;
                        if first_error.is_none() {
                            first_error = Some(format!("{e:#}"));
                        }
                        if errors > 100 {
                            break;
                        }
                    }
                }
            }
            (conn, samples, calls, errors, first_error)
        }));
    }
    let mut out = PhaseResult {
        conns: Vec::new(),
        samples: Vec::new(),
        calls: 0,
        errors: 0,
        first_error: None,
        elapsed: Duration::ZERO,
    };
    for t in tasks {
        let (conn, samples, calls, errors, first_error) = t.await.expect("worker");
        out.conns.push(conn);
        out.samples.extend(samples);
        out.calls += calls;
        out.errors += errors;
        if out.first_error.is_none() {
            out.first_error = first_error;
        }
    }
    out.elapsed = start.elapsed();
    out
}

/// Open a session, warm up, then send the measured calls.
pub async fn calls(opts: &CallsOptions) -> Result<CallsReport> {
    let target = Target::with_headers(&opts.url, &opts.headers)?;
    let c = opts.concurrency.max(1);
    let mut conns: Vec<Conn> = (0..c).map(|_| Conn::new(target.clone())).collect();
    let session = Arc::new(if opts.modern {
        mcp::Session::modern()
    } else {
        mcp::initialize(&mut conns[0], CLIENT)
            .await
            .with_context(|| format!("initialize at {}", opts.url))?
    });
    let tool: Arc<str> = opts.tool.as_str().into();
    let filler: Arc<str> = "x".repeat(opts.payload_bytes).into();
    let ids = Arc::new(AtomicU64::new(1));
    let warm = phase(
        conns,
        session.clone(),
        tool.clone(),
        filler.clone(),
        opts.warmup_calls.max(c as u64),
        opts.warmup,
        ids.clone(),
    )
    .await;
    if warm.errors > 0 && warm.samples.is_empty() {
        bail!(
            "every warm-up call failed: {}",
            warm.first_error.unwrap_or_default()
        );
    }
    let starts = proc_start(&opts.watch);
    let idle_start = procfs::idle_seconds();
    let client_start = procfs::cpu_ns_by_thread(std::process::id());
    let mut run = phase(
        warm.conns,
        session,
        tool,
        filler,
        opts.calls,
        opts.duration,
        ids,
    )
    .await;
    let secs = run.elapsed.as_secs_f64();
    let procs = proc_end(&starts, run.calls);
    let idle_us_per_call = us_per_call(
        idle_start.zip(procfs::idle_seconds()).map(|(a, b)| b - a),
        run.calls,
    );
    let client_cpu_us_per_call = us_per_call(
        client_start
            .zip(procfs::cpu_ns_by_thread(std::process::id()))
            .and_then(|(a, b)| procfs::seconds_between(&a, &b)),
        run.calls,
    );
    Ok(CallsReport {
        kind: "calls".into(),
        label: opts.label.clone(),
        url: opts.url.clone(),
        tool: opts.tool.clone(),
        concurrency: c,
        calls: run.calls,
        errors: run.errors,
        first_error: run.first_error,
        elapsed_s: secs,
        rps: if secs > 0.0 {
            run.calls as f64 / secs
        } else {
            0.0
        },
        latency: stats::summarise(&mut run.samples),
        procs,
        idle_us_per_call,
        client_cpu_us_per_call,
    })
}

// --- list -------------------------------------------------------------------------------------

/// The result of a `list` measurement.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ListReport {
    /// Always "list".
    pub kind: String,
    /// The label given.
    pub label: String,
    /// The endpoint.
    pub url: String,
    /// Full listings measured.
    pub lists: u64,
    /// Tools in one full listing.
    pub tools: usize,
    /// Pages in one full listing.
    pub pages: usize,
    /// Listings that failed (or had the wrong count).
    pub errors: u64,
    /// The first failure.
    pub first_error: Option<String>,
    /// Latency of one full listing (every page, cursor to cursor).
    #[serde(flatten)]
    pub latency: Latency,
    /// Of that, the median time this client spent parsing the pages' JSON (the part of a
    /// listing no server or gateway can take away).
    #[serde(default)]
    pub client_parse_p50_us: f64,
    /// Watched processes (CPU per listing).
    pub procs: Vec<ProcReport>,
}

/// One full listing: the tools and pages it had, and the time spent parsing the replies.
async fn full_list(
    session: &Session,
    conn: &mut Conn,
    ids: &mut u64,
) -> Result<(usize, usize, Duration)> {
    let mut cursor: Option<String> = None;
    let (mut tools, mut pages) = (0, 0);
    let mut parsing = Duration::ZERO;
    loop {
        *ids += 1;
        let id = *ids;
        let params = match &cursor {
            Some(c) => json!({"cursor": c}),
            None => json!({}),
        };
        let body = json!({"jsonrpc": "2.0", "id": id, "method": "tools/list", "params": params})
            .to_string();
        let resp = session.post(conn, body.as_bytes()).await?;
        let parse = Instant::now();
        let (count, next) = mcp::list_page_of(&resp, id)?;
        parsing += parse.elapsed();
        tools += count;
        pages += 1;
        match next {
            Some(c) if pages < 10_000 => cursor = Some(c),
            _ => return Ok((tools, pages, parsing)),
        }
    }
}

/// List every tool (all pages) `n` times, one listing at a time, after `warmup` listings.
pub async fn list(
    label: &str,
    url: &str,
    n: u64,
    warmup: u64,
    expect: Option<usize>,
    watch: &[Watch],
) -> Result<ListReport> {
    let target = Target::parse(url)?;
    let mut conn = Conn::new(target);
    let session = mcp::initialize(&mut conn, CLIENT).await?;
    let mut ids = 0u64;
    let mut report = ListReport {
        kind: "list".into(),
        label: label.into(),
        url: url.into(),
        ..Default::default()
    };
    for _ in 0..warmup {
        full_list(&session, &mut conn, &mut ids).await?;
    }
    let starts = proc_start(watch);
    let mut samples = Vec::with_capacity(n as usize);
    let mut parsing = Vec::with_capacity(n as usize);
    for _ in 0..n {
        let t = Instant::now();
        let r = full_list(&session, &mut conn, &mut ids).await;
        let us = t.elapsed().as_micros() as u64;
        report.lists += 1;
        match r {
            Ok((tools, pages, parse)) if expect.is_none_or(|e| e == tools) => {
                report.tools = tools;
                report.pages = pages;
                samples.push(us);
                parsing.push(parse.as_micros() as u64);
            }
            Ok((tools, _, _)) => {
                report.errors += 1;
                report
                    .first_error
                    .get_or_insert_with(|| format!("listed {tools} tools, expected {expect:?}"));
            }
            Err(e) => {
                report.errors += 1;
                report.first_error.get_or_insert_with(|| format!("{e:#}"));
            }
        }
    }
    report.procs = proc_end(&starts, n);
    report.latency = stats::summarise(&mut samples);
    report.client_parse_p50_us = stats::summarise(&mut parsing).p50_us;
    Ok(report)
}

// --- sessions ---------------------------------------------------------------------------------

/// The result of a `sessions` measurement.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct SessionsReport {
    /// Always "sessions".
    pub kind: String,
    /// The label given.
    pub label: String,
    /// The endpoint.
    pub url: String,
    /// Sessions opened (and left open).
    pub sessions: u64,
    /// Sessions whose initialize failed.
    pub errors: u64,
    /// The first failure.
    pub first_error: Option<String>,
    /// The watched process's VmRSS before, kB.
    pub rss_before_kb: u64,
    /// … and after, kB.
    pub rss_after_kb: u64,
    /// (after − before) / sessions.
    pub kb_per_session: f64,
    /// Time to open them all.
    pub elapsed_s: f64,
}

/// Open `count` sessions (initialize + initialized) over `concurrency` connections and leave
/// them open; report how much the watched process's RSS grew per session.
pub async fn sessions(
    label: &str,
    url: &str,
    count: u64,
    concurrency: usize,
    pid: u32,
) -> Result<SessionsReport> {
    let target = Target::parse(url)?;
    let c = concurrency.max(1);
    // Open every connection first (one throwaway request each), so the baseline already holds
    // the connections' buffers and only the sessions are counted.
    let mut conns = Vec::new();
    for _ in 0..c {
        let mut conn = Conn::new(target.clone());
        conn.request(
            "POST",
            &[
                ("Accept", "application/json, text/event-stream"),
                ("Content-Type", "application/json"),
            ],
            br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#,
        )
        .await
        .context("opening connections")?;
        conns.push(conn);
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let before = procfs::rss_kb(pid).ok_or_else(|| anyhow!("no process {pid}"))?;
    let next = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let mut tasks = Vec::new();
    for mut conn in conns {
        let next = next.clone();
        tasks.push(tokio::spawn(async move {
            let (mut errors, mut first) = (0u64, None);
            while next.fetch_add(1, Ordering::Relaxed) < count {
                if let Err(e) = mcp::initialize(&mut conn, CLIENT).await {
                    errors += 1;
                    first.get_or_insert_with(|| format!("{e:#}"));
                }
            }
            (conn, errors, first)
        }));
    }
    let mut report = SessionsReport {
        kind: "sessions".into(),
        label: label.into(),
        url: url.into(),
        sessions: count,
        ..Default::default()
    };
    let mut keep = Vec::new();
    for t in tasks {
        let (conn, errors, first) = t.await.expect("worker");
        keep.push(conn);
        report.errors += errors;
        if report.first_error.is_none() {
            report.first_error = first;
        }
    }
    report.elapsed_s = start.elapsed().as_secs_f64();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let after = procfs::rss_kb(pid).unwrap_or(0);
    report.rss_before_kb = before;
    report.rss_after_kb = after;
    report.kb_per_session = (after as f64 - before as f64) / count.max(1) as f64;
    drop(keep);
    Ok(report)
}

// --- startup ----------------------------------------------------------------------------------

/// The result of a `startup` measurement.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct StartupReport {
    /// Always "startup".
    pub kind: String,
    /// The label given.
    pub label: String,
    /// The endpoint.
    pub url: String,
    /// Spawn → the port accepts a TCP connection, ms.
    pub accept_ms: f64,
    /// Spawn → the first tools/list answered (with at least one tool), ms.
    pub ready_ms: f64,
    /// Tools in that first listing.
    pub tools: usize,
    /// VmRSS of the process `settle_ms` after it was ready (one session open), kB; for a
    /// process tree (a gateway with stdio children) only the spawned process.
    pub idle_rss_kb: u64,
    /// VmRSS of every process of its tree together, kB.
    pub idle_rss_tree_kb: u64,
    /// How long it idled before the RSS was read.
    pub settle_ms: u64,
}

/// Spawn `cmd`, time it to accepting and to its first tools/list, read its idle RSS after
/// `settle`, then kill it (and its children).
pub async fn startup(
    label: &str,
    url: &str,
    cmd: &mut std::process::Command,
    settle: Duration,
    timeout: Duration,
) -> Result<StartupReport> {
    let target = Target::parse(url)?;
    let t0 = Instant::now();
    let mut child = cmd.spawn().context("spawning")?;
    let pid = child.id();
    let result = async {
        // Accepting.
        loop {
            if tokio::net::TcpStream::connect(&target.addr).await.is_ok() {
                break;
            }
            if let Ok(Some(status)) = child.try_wait() {
                bail!("exited before accepting: {status}");
            }
            if t0.elapsed() > timeout {
                bail!("not accepting after {timeout:?}");
            }
            tokio::time::sleep(Duration::from_micros(500)).await;
        }
        let accept = t0.elapsed();
        // Answering tools/list with tools in it.
        let mut conn = Conn::new(target.clone());
        let tools = loop {
            let attempt = async {
                let session = mcp::initialize(&mut conn, CLIENT).await?;
                let body = br#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}"#;
                let reply = session.request(&mut conn, 1, body).await?;
                let n = reply
                    .pointer("/result/tools")
                    .and_then(Value::as_array)
                    .map_or(0, Vec::len);
                Ok::<usize, anyhow::Error>(n)
            }
            .await;
            let last_err = match attempt {
                Ok(n) if n > 0 => break n,
                Ok(_) => "tools/list was empty".to_string(),
                Err(e) => format!("{e:#}"),
            };
            if t0.elapsed() > timeout {
                bail!("not ready after {timeout:?}: {last_err}");
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        };
        let ready = t0.elapsed();
        tokio::time::sleep(settle).await;
        let tree = procfs::tree(pid);
        Ok(StartupReport {
            kind: "startup".into(),
            label: label.into(),
            url: url.into(),
            accept_ms: accept.as_secs_f64() * 1e3,
            ready_ms: ready.as_secs_f64() * 1e3,
            tools,
            idle_rss_kb: procfs::rss_kb(pid).unwrap_or(0),
            idle_rss_tree_kb: tree.iter().filter_map(|p| procfs::rss_kb(*p)).sum(),
            settle_ms: settle.as_millis() as u64,
        })
    }
    .await;
    kill_tree(pid);
    let _ = child.kill();
    let _ = child.wait();
    result
}

/// SIGKILL a process and everything below it (children first).
pub fn kill_tree(pid: u32) {
    let mut all = procfs::tree(pid);
    all.reverse();
    for p in all {
        let _ = std::process::Command::new("kill")
            .args(["-KILL", &p.to_string()])
            .stderr(std::process::Stdio::null())
            .status();
    }
}

/// A runtime for one measurement: current-thread for `threads <= 1` (the client then uses at
/// most one core, leaving the rest to what is measured), else multi-thread.
pub fn runtime(threads: usize) -> tokio::runtime::Runtime {
    if threads <= 1 {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("tokio runtime")
    } else {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(threads)
            .enable_all()
            .build()
            .expect("tokio runtime")
    }
}
