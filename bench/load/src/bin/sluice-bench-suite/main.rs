//! `sluice-bench-suite`: the benchmark run behind `bench/run`. Measures Sluice against a direct
//! call to the same upstream, interleaved (direct, configuration, direct, configuration, … for
//! several rounds, so drift cancels), for each configuration in [`plan`], at concurrency 1 and
//! 16, against the Rust echo and the TypeScript SDK echo; then start-up, idle RSS, RSS per idle
//! session and tools/list with 1,000 tools. Writes `bench/results/latest.md` (tables),
//! `latest.svg` (a chart of the same numbers) and `latest.json` (every raw report).
//!
//! Never asserts a timing: it exits non-zero only when a configuration that should work fails
//! its replies' checks (so `--quick` doubles as a smoke test).

mod plan;
mod report;
mod runner;

use anyhow::Result;
use clap::Parser;
use std::path::PathBuf;
use std::process::ExitCode;

/// Sluice's benchmark suite (run it through `bench/run`).
#[derive(Parser, Debug, Clone)]
#[command(name = "sluice-bench-suite", version, about)]
pub struct Args {
    /// Smoke mode: every configuration, tiny N, one round; finishes in seconds.
    #[arg(long)]
    pub quick: bool,
    /// Also measure peer gateways (installed under bench/.peers/ on first use).
    #[arg(long)]
    pub peers: bool,
    /// Rounds of interleaved direct/configuration pairs (default 5; 1 with --quick).
    #[arg(long)]
    pub rounds: Option<usize>,
    /// Seconds per measured run (default 2; 0.2 with --quick).
    #[arg(long)]
    pub seconds: Option<f64>,
    /// Skip the TypeScript SDK upstream.
    #[arg(long)]
    pub no_ts: bool,
    /// The workspace root (default: the current directory).
    #[arg(long, default_value = ".")]
    pub root: PathBuf,
    /// The `sluice` binary (default: $SLUICE_BIN, else target/release/sluice under the root).
    #[arg(long)]
    pub sluice: Option<PathBuf>,
    /// Where to write latest.md / latest.svg / latest.json (default: bench/results).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Also run every Sluice row on this other build of `sluice`, in the same interleaved
    /// rounds (rows labelled "[baseline]"): an A/B comparison on a noisy machine.
    #[arg(long, value_name = "SLUICE")]
    pub baseline: Option<PathBuf>,
    /// Only the rows whose label contains one of these words (comma-separated; the floor is
    /// always kept), e.g. `--only "no hooks,explain"`.
    #[arg(long, value_delimiter = ',')]
    pub only: Vec<String>,
    /// Run each tools/call measurement's client in this process, on one thread that lives
    /// through every run, instead of a `sluice-bench-load calls` process of its own per run.
    #[arg(long)]
    pub in_process_client: bool,
    /// Measure nothing: rewrite latest.md and latest.svg from this latest.json.
    #[arg(long, value_name = "JSON")]
    pub from: Option<PathBuf>,
}

fn main() -> ExitCode {
    let args = Args::parse();
    match run(args) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => {
            eprintln!("sluice-bench-suite: some configuration failed its checks (see the table)");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("sluice-bench-suite: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn run(args: Args) -> Result<bool> {
    let ctx = runner::Ctx::new(&args)?;
    let results: runner::Results = match &args.from {
        Some(path) => serde_json::from_slice(&std::fs::read(path)?)?,
        None => runner::run_all(&ctx)?,
    };
    let md = report::markdown(&ctx, &results);
    let svg = report::svg(&results);
    std::fs::create_dir_all(&ctx.out)?;
    std::fs::write(ctx.out.join("latest.md"), &md)?;
    std::fs::write(ctx.out.join("latest.svg"), &svg)?;
    std::fs::write(
        ctx.out.join("latest.json"),
        serde_json::to_string_pretty(&results)?,
    )?;
    println!("{md}");
    eprintln!(
        "wrote {}, latest.svg and latest.json",
        ctx.out.join("latest.md").display()
    );
    Ok(results.failures.is_empty())
}
