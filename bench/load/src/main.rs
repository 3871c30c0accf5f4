//! `sluice-bench-load`: the benchmark suite's load generator. Prints one JSON line per
//! measurement on stdout and a human summary on stderr.
//!
//! ```text
//! sluice-bench-load calls    --url URL [-n N] [-c C] [--duration S] [--warmup-seconds S] [--pid LABEL=PID]… [--header "NAME: VALUE"]…
//! sluice-bench-load list     --url URL [-n N] [--expect TOOLS]
//! sluice-bench-load sessions --url URL --pid PID [--count 1000]
//! sluice-bench-load startup  --url URL [--settle-ms MS] -- CMD ARGS…
//! ```

use anyhow::Result;
use clap::{Parser, Subcommand};
use sluice_bench_load::run::{self, CallsOptions, Watch};
use std::process::ExitCode;
use std::time::Duration;

/// Load generator for MCP servers over Streamable HTTP (Sluice's benchmark suite).
#[derive(Parser)]
#[command(name = "sluice-bench-load", version, about)]
struct Cli {
    /// Client threads (1 = a current-thread runtime: the client uses at most one core).
    #[arg(long, global = true, default_value_t = 1)]
    threads: usize,
    /// Only the JSON lines (no human summary on stderr).
    #[arg(long, short, global = true)]
    quiet: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Initialise one session, then send tools/call at concurrency C and check every reply.
    Calls {
        /// The MCP endpoint (http://HOST:PORT/mcp).
        #[arg(long)]
        url: String,
        /// Measured calls (an upper bound with --duration).
        #[arg(short = 'n', long, default_value_t = 10_000)]
        calls: u64,
        /// Calls in flight at once (one keep-alive connection each).
        #[arg(short = 'c', long, default_value_t = 1)]
        concurrency: usize,
        /// Stop the measured phase after this many seconds.
        #[arg(long)]
        duration: Option<f64>,
        /// Unmeasured warm-up calls.
        #[arg(long, default_value_t = 200)]
        warmup: u64,
        /// End the warm-up after this many seconds, if its calls have not ended it first.
        #[arg(long)]
        warmup_seconds: Option<f64>,
        /// The tool to call (it must echo its arguments).
        #[arg(long, default_value = "echo")]
        tool: String,
        /// Extra text bytes in each call's arguments.
        #[arg(long, default_value_t = 0)]
        payload_bytes: usize,
        /// A process whose CPU per call and peak RSS to report: LABEL=PID or PID (repeatable).
        #[arg(long = "pid")]
        pids: Vec<String>,
        /// A label for the report.
        #[arg(long, default_value = "calls")]
        label: String,
        /// Speak 2026-07-28: no `initialize`, `_meta` and `Mcp-Method` / `Mcp-Name` on every call.
        #[arg(long)]
        modern: bool,
        /// A header sent on every request, `NAME: VALUE` (repeatable), e.g.
        /// `--header "Authorization: Bearer TOKEN"` for a protected server.
        #[arg(long = "header", value_name = "NAME: VALUE")]
        headers: Vec<String>,
    },
    /// List every tool (all pages) N times, one listing at a time.
    List {
        /// The MCP endpoint.
        #[arg(long)]
        url: String,
        /// Measured listings.
        #[arg(short = 'n', long, default_value_t = 200)]
        lists: u64,
        /// Unmeasured listings first.
        #[arg(long, default_value_t = 10)]
        warmup: u64,
        /// Fail a listing that does not hold this many tools.
        #[arg(long)]
        expect: Option<usize>,
        /// A process whose CPU to report: LABEL=PID or PID (repeatable).
        #[arg(long = "pid")]
        pids: Vec<String>,
        /// A label for the report.
        #[arg(long, default_value = "list")]
        label: String,
    },
    /// Open COUNT sessions, leave them open, report the RSS growth of PID per session.
    Sessions {
        /// The MCP endpoint.
        #[arg(long)]
        url: String,
        /// The server's PID.
        #[arg(long)]
        pid: u32,
        /// Sessions to open.
        #[arg(long, default_value_t = 1000)]
        count: u64,
        /// Connections used to open them.
        #[arg(short = 'c', long, default_value_t = 8)]
        concurrency: usize,
        /// A label for the report.
        #[arg(long, default_value = "sessions")]
        label: String,
    },
    /// Open COUNT sessions, then one idle `GET /mcp` event stream for each on a connection of its
    /// own; report the RSS growth of PID per stream (the sessions are open before the baseline).
    Streams {
        /// The MCP endpoint.
        #[arg(long)]
        url: String,
        /// The server's PID.
        #[arg(long)]
        pid: u32,
        /// Sessions, and streams, to open.
        #[arg(long, default_value_t = 1000)]
        count: u64,
        /// A label for the report.
        #[arg(long, default_value = "streams")]
        label: String,
    },
    /// Spawn CMD, time it to accepting and to its first tools/list, read its idle RSS, kill it.
    Startup {
        /// The endpoint CMD will serve.
        #[arg(long)]
        url: String,
        /// Idle this long after ready before reading RSS.
        #[arg(long, default_value_t = 1000)]
        settle_ms: u64,
        /// Give up after this many seconds.
        #[arg(long, default_value_t = 30.0)]
        timeout: f64,
        /// A label for the report.
        #[arg(long, default_value = "startup")]
        label: String,
        /// The command and its arguments.
        #[arg(last = true, required = true)]
        command: Vec<String>,
    },
}

/// `NAME: VALUE` as a pair.
fn header(text: &str) -> Result<(String, String)> {
    match text.split_once(':') {
        Some((name, value)) if !name.trim().is_empty() => {
            Ok((name.trim().to_string(), value.trim().to_string()))
        }
        _ => anyhow::bail!("--header wants NAME: VALUE, not {text:?}"),
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match execute(&cli) {
        Ok(ok) => {
            if ok {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            }
        }
        Err(e) => {
            eprintln!("sluice-bench-load: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn watches(pids: &[String]) -> Result<Vec<Watch>> {
    pids.iter().map(|p| Watch::parse(p)).collect()
}

/// Run the command; Ok(false) when some replies failed their check.
fn execute(cli: &Cli) -> Result<bool> {
    let rt = run::runtime(cli.threads);
    let (json, human, ok) = match &cli.command {
        Command::Calls {
            url,
            calls,
            concurrency,
            duration,
            warmup,
            warmup_seconds,
            tool,
            payload_bytes,
            pids,
            label,
            modern,
            headers,
        } => {
            let opts = CallsOptions {
                label: label.clone(),
                url: url.clone(),
                tool: tool.clone(),
                concurrency: *concurrency,
                calls: *calls,
                duration: duration.map(Duration::from_secs_f64),
                warmup_calls: *warmup,
                warmup: warmup_seconds.map(Duration::from_secs_f64),
                payload_bytes: *payload_bytes,
                watch: watches(pids)?,
                modern: *modern,
                headers: headers.iter().map(|h| header(h)).collect::<Result<_>>()?,
            };
            let r = rt.block_on(run::calls(&opts))?;
            (serde_json::to_string(&r)?, r.human(), r.errors == 0)
        }
        Command::List {
            url,
            lists,
            warmup,
            expect,
            pids,
            label,
        } => {
            let w = watches(pids)?;
            let r = rt.block_on(run::list(label, url, *lists, *warmup, *expect, &w))?;
            let human = format!(
                "{label}: {} tools in {} page(s); full listing p50 {:.0} µs, p90 {:.0} µs, p99 {:.0} µs, max {:.0} µs{}",
                r.tools,
                r.pages,
                r.latency.p50_us,
                r.latency.p90_us,
                r.latency.p99_us,
                r.latency.max_us,
                r.first_error
                    .as_ref()
                    .map(|e| format!("; {} ERRORS, first: {e}", r.errors))
                    .unwrap_or_default()
            );
            (serde_json::to_string(&r)?, human, r.errors == 0)
        }
        Command::Sessions {
            url,
            pid,
            count,
            concurrency,
            label,
        } => {
            let r = rt.block_on(run::sessions(label, url, *count, *concurrency, *pid))?;
            let human = format!(
                "{label}: {} sessions in {:.2} s; RSS {:.1} → {:.1} MB: {:.2} KB per session{}",
                r.sessions,
                r.elapsed_s,
                r.rss_before_kb as f64 / 1024.0,
                r.rss_after_kb as f64 / 1024.0,
                r.kb_per_session,
                r.first_error
                    .as_ref()
                    .map(|e| format!("; {} ERRORS, first: {e}", r.errors))
                    .unwrap_or_default()
            );
            (serde_json::to_string(&r)?, human, r.errors == 0)
        }
        Command::Streams {
            url,
            pid,
            count,
            label,
        } => {
            let r = rt.block_on(sluice_bench_load::streams::get_streams(
                label, url, *count, *pid,
            ))?;
            let human = format!(
                "{label}: {} GET streams; RSS {:.1} → {:.1} MB: {:.2} KB per stream",
                r.streams,
                r.rss_before_kb as f64 / 1024.0,
                r.rss_after_kb as f64 / 1024.0,
                r.kb_per_stream
            );
            (serde_json::to_string(&r)?, human, true)
        }
        Command::Startup {
            url,
            settle_ms,
            timeout,
            label,
            command,
        } => {
            let mut cmd = std::process::Command::new(&command[0]);
            cmd.args(&command[1..])
                .stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::null());
            let r = rt.block_on(run::startup(
                label,
                url,
                &mut cmd,
                Duration::from_millis(*settle_ms),
                Duration::from_secs_f64(*timeout),
            ))?;
            let human = format!(
                "{label}: accepting after {:.1} ms, first tools/list ({} tools) after {:.1} ms; idle RSS {:.1} MB ({:.1} MB with its children)",
                r.accept_ms,
                r.tools,
                r.ready_ms,
                r.idle_rss_kb as f64 / 1024.0,
                r.idle_rss_tree_kb as f64 / 1024.0
            );
            (serde_json::to_string(&r)?, human, true)
        }
    };
    println!("{json}");
    if !cli.quiet {
        eprintln!("{human}");
    }
    Ok(ok)
}
