//! The conformance suite's client scenarios other than `auth/*` (those are in
//! oauth/conformance.rs) with Sluice as the client, both ways it is one
//! (tests/node/conformance-client.mjs): `sluice client`, and the gateway's upstream side
//! (`sluice serve` with the scenario's URL as its upstream, driven by the TypeScript SDK client).
//!
//! The scenarios are the suite's own lists: those of 0.1.16 (the 2025-11-25 suite), those of
//! 0.2.0-alpha.12 tagged 2025-11-25 (run with `--spec-version 2025-11-25`), and those it tags
//! 2026-07-28, run as `--requirements 2026-07-28` runs each (`--spec-version 2026-07-28
//! --force`: that flag cannot be combined with `--scenario`), and the Skills extension's client
//! scenarios (`sep-2640-client-*`, tagged `extension`: off the spec timeline, so run with
//! `--force`) at 2025-11-25 and at 2026-07-28. Each runs in its own
//! `conformance client --scenario` process, whose verdict is strict: a failed or warning check,
//! a timeout or a non-zero exit fails it. A failed scenario is run once more before it counts.
//! No scenario is expected to fail ([`EXPECTED_FAILURES`] is empty). One test a suite run and
//! a client, so that each stays well inside the three minutes a test may take.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;
use std::time::Duration;

use serde_json::Value;
use sluice_e2e::{bin, free_port};

use crate::conformance::find_checks;
use crate::interop::{node22, node_dir, node_module_file, run_with_timeout, scratch_dir};

/// The suite's limit on one client run, and ours on a whole scenario.
const CLIENT_TIMEOUT_MS: &str = "60000";
const SCENARIO_TIMEOUT: Duration = Duration::from_secs(120);
const PARALLELISM: usize = 2;
/// Scenarios allowed to fail (`"{Run:?} {scenario}"`, e.g. `"NextAt2026 sse-retry"`), each
/// explained in docs/client.md: none.
const EXPECTED_FAILURES: [&str; 0] = [];

/// One way to run the suite.
#[derive(Clone, Copy, Debug)]
enum Run {
    /// 0.1.16 (its own revision, 2025-11-25).
    Stable,
    /// 0.2.0-alpha.12 at 2025-11-25.
    NextAt2025,
    /// 0.2.0-alpha.12 at 2026-07-28, as `--requirements 2026-07-28` runs a scenario.
    NextAt2026,
    /// 0.2.0-alpha.12's Skills extension scenarios at 2025-11-25 (the initialize handshake).
    SkillsAt2025,
    /// 0.2.0-alpha.12's Skills extension scenarios at 2026-07-28 (their default revision).
    SkillsAt2026,
}

impl Run {
    fn cli(self) -> PathBuf {
        node_module_file(match self {
            Run::Stable => "@modelcontextprotocol/conformance/dist/index.js",
            Run::NextAt2025 | Run::NextAt2026 | Run::SkillsAt2025 | Run::SkillsAt2026 => {
                "conformance-2026/dist/index.js"
            }
        })
    }

    fn flags(self) -> &'static [&'static str] {
        match self {
            Run::Stable => &[],
            Run::NextAt2025 => &["--spec-version", "2025-11-25"],
            Run::NextAt2026 | Run::SkillsAt2026 => &["--spec-version", "2026-07-28", "--force"],
            Run::SkillsAt2025 => &["--spec-version", "2025-11-25", "--force"],
        }
    }

    fn tag(self) -> &'static str {
        match self {
            Run::Stable | Run::NextAt2025 => "2025-11-25",
            Run::NextAt2026 => "2026-07-28",
            Run::SkillsAt2025 | Run::SkillsAt2026 => "extension",
        }
    }

    /// The scenarios the suite must list for this run: a shrunken (or grown) list is a changed
    /// suite, which this test must be updated for, not pass by running less.
    fn expected(self) -> Vec<String> {
        let names: &[&str] = match self {
            Run::Stable => &[
                "initialize",
                "tools_call",
                "elicitation-sep1034-client-defaults",
                "sse-retry",
            ],
            Run::NextAt2025 => &[
                "initialize",
                "tools_call",
                "elicitation-sep1034-client-defaults",
                "sse-retry",
                "json-schema-2020-12-preservation",
            ],
            Run::NextAt2026 => &[
                "tools_call",
                "request-metadata",
                "sep-2322-client-request-state",
                "http-standard-headers",
                "http-custom-headers",
                "http-invalid-tool-headers",
                "json-schema-ref-no-deref",
                "json-schema-2020-12-preservation",
            ],
            Run::SkillsAt2025 | Run::SkillsAt2026 => &[
                "sep-2640-client-no-prefetch",
                "sep-2640-client-verify-digest",
                "sep-2640-client-verify-size",
                "sep-2640-client-verify-frontmatter",
            ],
        };
        names.iter().map(|s| s.to_string()).collect()
    }

    /// The non-auth client scenarios the suite lists with this run's revision (or tag).
    fn scenarios(self) -> Vec<String> {
        let mut all = client_scenarios_tagged(&self.cli(), self.tag());
        all.retain(|s| !s.starts_with("auth/"));
        all
    }
}

/// The client scenarios the suite at `cli` lists (`conformance list`) with `tag` (a revision
/// such as `2025-11-25`, or `extension`), in its order.
pub(crate) fn client_scenarios_tagged(cli: &Path, tag: &str) -> Vec<String> {
    let mut cmd = Command::new(node22());
    cmd.current_dir(node_dir())
        .arg(cli)
        .args(["list", "--client"]);
    let listed = run_with_timeout(cmd, Duration::from_secs(60));
    assert!(listed.success(), "`conformance list`: {}", listed.stderr);
    listed
        .stdout
        .lines()
        .filter_map(|l| l.trim_start().strip_prefix("- "))
        .filter_map(|rest| {
            let (name, tags) = rest.split_once(' ')?;
            let tagged = tags
                .trim_matches(|c| c == '[' || c == ']')
                .split(',')
                .any(|t| t.trim() == tag);
            tagged.then(|| name.to_string())
        })
        .collect()
}

/// How one attempt went.
struct Attempt {
    passed: bool,
    /// `N ok, N failed, N warnings`, and each failed or warning check.
    summary: String,
}

/// One scenario once, with `mode` (`client` or `gateway`) as the client.
fn run_once(run: Run, mode: &str, scenario: &str) -> Attempt {
    let out_dir = scratch_dir("conformance-client");
    let driver = node_dir().join("conformance-client.mjs");
    let mut cmd = Command::new(node22());
    cmd.current_dir(node_dir())
        .arg(run.cli())
        .arg("client")
        .arg("--command")
        .arg(format!(
            "{} {} {mode}",
            node22().display(),
            driver.display()
        ))
        .args(["--scenario", scenario])
        .args(run.flags())
        .args(["--timeout", CLIENT_TIMEOUT_MS, "--output-dir"])
        .arg(&out_dir)
        .env("NO_COLOR", "1")
        .env("SLUICE_BIN", bin("sluice"))
        .env(
            "SLUICE_GATEWAY_PORTS",
            format!("{},{}", free_port(), free_port()),
        );
    let done = run_with_timeout(cmd, SCENARIO_TIMEOUT);
    let checks: Option<Vec<Value>> = find_checks(&out_dir)
        .and_then(|p| std::fs::read(p).ok())
        .and_then(|b| serde_json::from_slice(&b).ok());
    let driver_err = read_driver_stderr(&out_dir);
    let _ = std::fs::remove_dir_all(&out_dir);
    let count = |status: &str| {
        checks
            .iter()
            .flatten()
            .filter(|c| c["status"] == status)
            .count()
    };
    let (ok, failed, warned) = (count("SUCCESS"), count("FAILURE"), count("WARNING"));
    // The suite exits 0 exactly when no check failed or warned and the client exited 0 (or the
    // scenario allows it an error) within its time.
    let passed = done.success() && checks.is_some() && failed == 0 && warned == 0;
    let mut summary = format!("{ok} ok, {failed} failed, {warned} warnings");
    for c in checks.iter().flatten() {
        if c["status"] == "FAILURE" || c["status"] == "WARNING" {
            let message = c["errorMessage"]
                .as_str()
                .or(c["description"].as_str())
                .unwrap_or("");
            summary.push_str(&format!(
                "\n      {} [{}] {message}",
                c["status"].as_str().unwrap_or("?"),
                c["id"].as_str().unwrap_or("?")
            ));
        }
    }
    if !passed {
        summary.push_str(&format!("\n      the suite: {}", done.describe()));
        let tail: Vec<&str> = driver_err.lines().rev().take(20).collect();
        for line in tail.into_iter().rev() {
            summary.push_str(&format!("\n      | {line}"));
        }
    }
    Attempt { passed, summary }
}

/// What the client command wrote on stderr (the suite keeps it beside `checks.json`).
fn read_driver_stderr(dir: &Path) -> String {
    find_checks(dir)
        .and_then(|p| std::fs::read_to_string(p.with_file_name("stderr.txt")).ok())
        .unwrap_or_default()
}

/// Run every scenario of `run` with `mode` as the client, [`PARALLELISM`] at a time, each
/// failure tried once more; prints each verdict and panics naming the scenarios that failed
/// twice.
fn run_all(mode: &str, run: Run) {
    let scenarios = run.scenarios();
    assert_eq!(
        scenarios,
        run.expected(),
        "the {run:?} scenario list changed: update this test for the new suite"
    );
    let queue = Mutex::new(scenarios.into_iter().collect::<VecDeque<_>>());
    let results = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..PARALLELISM {
            s.spawn(|| loop {
                let Some(scenario) = queue.lock().unwrap().pop_front() else {
                    return;
                };
                let mut attempts = vec![run_once(run, mode, &scenario)];
                if !attempts[0].passed {
                    attempts.push(run_once(run, mode, &scenario));
                }
                results.lock().unwrap().push((scenario, attempts));
            });
        }
    });
    let mut results = results.into_inner().unwrap();
    results.sort_by(|a, b| a.0.cmp(&b.0));
    let mut failed = Vec::new();
    println!("== conformance client scenarios ({run:?}) with `{mode}` as the client");
    for (scenario, attempts) in &results {
        let last = attempts.last().unwrap();
        let verdict = if last.passed { "passed" } else { "FAILED" };
        let mut line = format!("  {run:?} {scenario}: {verdict}");
        for (i, a) in attempts.iter().enumerate() {
            line.push_str(&format!("\n    attempt {}: {}", i + 1, a.summary));
        }
        println!("{line}");
        let key = format!("{run:?} {scenario}");
        if !last.passed && !EXPECTED_FAILURES.contains(&key.as_str()) {
            failed.push(line);
        }
    }
    assert!(
        failed.is_empty(),
        "{} scenario(s) failed twice with `{mode}` as the client:\n{}",
        failed.len(),
        failed.join("\n")
    );
}

#[test]
fn sluice_client_passes_the_0_1_16_client_scenarios() {
    run_all("client", Run::Stable);
}

#[test]
fn sluice_client_passes_the_0_2_client_scenarios_at_2025_11_25() {
    run_all("client", Run::NextAt2025);
}

#[test]
fn sluice_client_passes_the_0_2_client_scenarios_at_2026_07_28() {
    run_all("client", Run::NextAt2026);
}

#[test]
fn the_gateway_passes_the_0_1_16_client_scenarios() {
    run_all("gateway", Run::Stable);
}

#[test]
fn the_gateway_passes_the_0_2_client_scenarios_at_2025_11_25() {
    run_all("gateway", Run::NextAt2025);
}

#[test]
fn the_gateway_passes_the_0_2_client_scenarios_at_2026_07_28() {
    run_all("gateway", Run::NextAt2026);
}

#[test]
fn sluice_client_passes_the_skills_client_scenarios_at_2025_11_25() {
    run_all("client", Run::SkillsAt2025);
}

#[test]
fn sluice_client_passes_the_skills_client_scenarios_at_2026_07_28() {
    run_all("client", Run::SkillsAt2026);
}

// The gateway's upstream side as the verifying client: it must list the upstream's skills
// without reading a file, and refuse (a JSON-RPC error) a read of a SKILL.md that fails its
// check, so that the driver, which checks nothing itself, never goes on to the skill's files.
#[test]
fn the_gateway_passes_the_skills_client_scenarios_at_2025_11_25() {
    run_all("gateway", Run::SkillsAt2025);
}

#[test]
fn the_gateway_passes_the_skills_client_scenarios_at_2026_07_28() {
    run_all("gateway", Run::SkillsAt2026);
}
