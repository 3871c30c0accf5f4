//! The conformance suite's client authorization scenarios with Sluice as the client, both ways it
//! is one: `sluice client` (tests/conformance/auth-client.sh) and the gateway signing in to its
//! upstream (tests/conformance/auth-gateway.sh: `sluice serve` with the scenario's URL as an
//! OAuth upstream, `sluice upstream login`, then the MCP Python SDK client through the gateway).
//!
//! The scenarios are the suite's own lists: every `auth/*` scenario of 0.1.16 tagged 2025-11-25
//! (its `--suite auth`), every `auth/*` scenario of 0.2.0-alpha.12 tagged 2026-07-28 (run at
//! that revision, as `--requirements 2026-07-28` runs them), the client credentials
//! extension's two, and enterprise-managed authorization's (ID-JAG: `--identity-assertion-file`
//! for `sluice client`, `"mode": "enterprise"` for the gateway). Each runs in its own `conformance client --scenario` process, whose verdict
//! is strict: any failed or warning check, a timeout, or an unexpected non-zero exit fails it.
//! A failed scenario is run once more before it counts (the suite's servers share two cores
//! with the other tests).

use std::collections::VecDeque;
use std::path::PathBuf;
use std::process::Command;
use std::sync::Mutex;
use std::time::Duration;

use sluice_e2e::{bin, workspace_root};

use crate::interop::{node22, node_dir, node_module_file, run_with_timeout};

/// The suite's own limit on a client run (its default, 30 s, is short for the gateway's
/// three logins on two loaded cores), and ours on a whole scenario.
const CLIENT_TIMEOUT_MS: &str = "90000";
const SCENARIO_TIMEOUT: Duration = Duration::from_secs(180);
const PARALLELISM: usize = 3;

/// The Python of tests/python/.venv (the gateway driver uses its MCP SDK; both scripts read
/// the suite's context with it).
fn python() -> PathBuf {
    let p = std::env::var_os("SLUICE_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("tests/python/.venv/bin/python"));
    assert!(
        p.exists(),
        "{} is missing: run scripts/test (it creates tests/python/.venv)",
        p.display()
    );
    p
}

/// Which suite.
#[derive(Clone, Copy)]
enum Suite {
    /// 0.1.16, the 2025-11-25 revision.
    Stable,
    /// 0.2.0-alpha.12 at 2026-07-28.
    Next,
}

impl Suite {
    fn cli(self) -> PathBuf {
        node_module_file(match self {
            Suite::Stable => "@modelcontextprotocol/conformance/dist/index.js",
            Suite::Next => "conformance-2026/dist/index.js",
        })
    }

    /// The `auth/*` scenarios listed with `tag` (`2025-11-25`, `2026-07-28`, `extension`).
    fn scenarios(self, tag: &str) -> Vec<String> {
        let mut all = crate::conformance_client::client_scenarios_tagged(&self.cli(), tag);
        all.retain(|s| s.starts_with("auth/"));
        all
    }
}

/// One scenario with `script` as the client; its verdict and the tail of its output.
fn run_scenario(
    suite: Suite,
    script: &str,
    scenario: &str,
    version: Option<&str>,
) -> (bool, String) {
    let mut cmd = Command::new(node22());
    cmd.current_dir(node_dir())
        .arg(suite.cli())
        .args(["client", "--command"])
        .arg(workspace_root().join("tests/conformance").join(script))
        .args(["--scenario", scenario])
        .args(["--timeout", CLIENT_TIMEOUT_MS])
        .env("SLUICE_BIN", bin("sluice"))
        .env("SLUICE_PYTHON", python());
    if let Some(v) = version {
        cmd.args(["--spec-version", v]);
    }
    let done = run_with_timeout(cmd, SCENARIO_TIMEOUT);
    // The suite prints its verdict on stderr (the checks too); its exit status agrees.
    let verdict = done.success()
        && (done.stderr.contains("OVERALL: PASSED") || done.stdout.contains("OVERALL: PASSED"));
    let failed: Vec<&str> = done
        .stdout
        .lines()
        .chain(done.stderr.lines())
        .filter(|l| l.contains("FAILURE") || l.contains("WARNING") || l.starts_with("sluice"))
        .collect();
    let tail: Vec<&str> = done.stderr.lines().rev().take(25).collect();
    let tail: Vec<&str> = tail.into_iter().rev().collect();
    (
        verdict,
        format!(
            "{scenario}: {}\n  {}\n  stderr tail:\n    {}",
            done.describe(),
            failed.join("\n  "),
            tail.join("\n    ")
        ),
    )
}

/// Run `scenarios` (at `version`) with `script`, `PARALLELISM` at a time, each failure retried
/// once; panics naming every scenario that failed twice.
fn run_all(suite: Suite, script: &str, scenarios: Vec<String>, version: Option<&str>) {
    let queue = Mutex::new(scenarios.into_iter().collect::<VecDeque<_>>());
    let failed = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..PARALLELISM {
            s.spawn(|| loop {
                let Some(scenario) = queue.lock().unwrap().pop_front() else {
                    return;
                };
                let (ok, report) = run_scenario(suite, script, &scenario, version);
                if ok {
                    continue;
                }
                eprintln!("retrying after a failure:\n{report}");
                let (ok, report) = run_scenario(suite, script, &scenario, version);
                if !ok {
                    failed.lock().unwrap().push(report);
                }
            });
        }
    });
    let failed = failed.into_inner().unwrap();
    assert!(
        failed.is_empty(),
        "{} scenario(s) failed twice with {script}:\n{}",
        failed.len(),
        failed.join("\n\n")
    );
}

/// The scenarios each suite must have (the lists come from the suite; these guard against an
/// empty or shrunken list making the test vacuous).
fn check_counts(stable: &[String], next: &[String], ext: &[String]) {
    assert_eq!(stable.len(), 14, "0.1.16 auth scenarios: {stable:?}");
    assert_eq!(next.len(), 25, "2026-07-28 auth scenarios: {next:?}");
    for s in [
        "auth/client-credentials-basic",
        "auth/client-credentials-jwt",
        "auth/enterprise-managed-authorization",
    ] {
        assert!(ext.iter().any(|e| e == s), "{s} missing from {ext:?}");
    }
}

fn lists() -> (Vec<String>, Vec<String>, Vec<String>) {
    let stable = Suite::Stable.scenarios("2025-11-25");
    let next = Suite::Next.scenarios("2026-07-28");
    let ext: Vec<String> = Suite::Next
        .scenarios("extension")
        .into_iter()
        .filter(|s| {
            s.starts_with("auth/client-credentials-")
                || s == "auth/enterprise-managed-authorization"
        })
        .collect();
    check_counts(&stable, &next, &ext);
    (stable, next, ext)
}

#[test]
fn sluice_client_passes_every_client_authorization_scenario() {
    let (stable, next, ext) = lists();
    run_all(Suite::Stable, "auth-client.sh", stable, None);
    run_all(Suite::Next, "auth-client.sh", next, Some("2026-07-28"));
    run_all(Suite::Next, "auth-client.sh", ext, None);
}

#[test]
fn the_gateway_passes_every_client_authorization_scenario() {
    let (stable, next, ext) = lists();
    run_all(Suite::Stable, "auth-gateway.sh", stable, None);
    run_all(Suite::Next, "auth-gateway.sh", next, Some("2026-07-28"));
    run_all(Suite::Next, "auth-gateway.sh", ext, None);
}

/// The same scenarios with the scenario's server a per-user upstream of the gateway
/// (tests/conformance/auth-gateway-per-user.sh): no operator signs in; the MCP Python SDK client
/// behind the gateway is a principal (a static token) whose call is answered with a URL
/// elicitation (2025-11-25 scenarios: a handshake-era client; 2026-07-28 ones: a 2026-07-28
/// client, an `input_required` round), and it follows the link as a browser would: Sluice's
/// confirmation page, then the scenario's authorization server, which approves at once, then
/// Sluice's callback. Every `auth/*` scenario of both lists runs; the client credentials
/// extension's two (`auth/client-credentials-basic`, `auth/client-credentials-jwt`) and
/// `auth/enterprise-managed-authorization` do not
/// apply: they sign in as the gateway itself, with no person to connect an account (that is
/// `"mode": "client_credentials"` and `"enterprise"`, run above). In
/// `auth/authorization-server-migration` the user's connection, refused after the server moved
/// to another authorization server, asks the user to connect again, and the new sign-in
/// registers at the new one.
#[test]
fn the_gateway_passes_every_client_authorization_scenario_per_user() {
    let (stable, next, _) = lists();
    assert_eq!(next.len(), 25, "{next:?}");
    run_all(Suite::Stable, "auth-gateway-per-user.sh", stable, None);
    run_all(
        Suite::Next,
        "auth-gateway-per-user.sh",
        next,
        Some("2026-07-28"),
    );
}
