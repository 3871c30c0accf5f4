//! The conformance suite's Skills extension (SEP-2640) server scenarios (0.2.0-alpha.12:
//! `sep-2640-skills-enumeration`, `sep-2640-skills-directory`, `sep-2640-skills-manifest`), run
//! against `sluice-fixture --skills --page-size 2` at 2025-11-25 (handshake) and 2026-07-28
//! (stateless), with a strict verdict: every check SUCCESS, none FAILURE, WARNING or INFO, and
//! a SKIPPED check only where it cannot apply (see [`skip_allowed`]).
//!
//! [`run_skill_scenarios`] takes any URL, so the same runner also drives the scenarios through
//! the gateway.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use serde_json::json;
use sluice_e2e::tree::Home;
use sluice_e2e::{bin, start_fixture_http, start_sluice};

use crate::conformance::take_checks;
use crate::interop::{node22, node_dir, node_module_file, run_with_timeout, scratch_dir};

/// The suite's Skills server scenarios; the test fails when the suite lists others.
pub(crate) const SKILL_SCENARIOS: [&str; 3] = [
    "sep-2640-skills-enumeration",
    "sep-2640-skills-directory",
    "sep-2640-skills-manifest",
];
/// The protocol versions the scenarios run at: the handshake era and the stateless one.
pub(crate) const SPEC_VERSIONS: [&str; 2] = ["2025-11-25", "2026-07-28"];
/// How long one scenario may take.
const SCENARIO_TIMEOUT: Duration = Duration::from_secs(120);

fn suite() -> PathBuf {
    node_module_file("conformance-2026/dist/index.js")
}

/// Whether check `id` may be SKIPPED at `spec_version`. Only the caching attributes of
/// `skills/list` and `skills/get` (`ttlMs`, `cacheScope`): they are defined from 2026-07-28
/// (SEP-2549), so before it the suite skips them ("not applicable on negotiated protocol") and
/// there is nothing to check. Every other SKIPPED means a check did not run and fails the run.
fn skip_allowed(spec_version: &str, id: &str) -> bool {
    spec_version < "2026-07-28"
        && matches!(
            id,
            "sep-2640-skills-list-cache-attributes" | "sep-2640-skills-get-cache-attributes"
        )
}

/// The server scenarios of the suite about Skills (`sep-2640-*`, or any naming skills), with
/// their tags, from `conformance list --server`.
fn listed_skill_scenarios() -> Vec<(String, String)> {
    let mut cmd = Command::new(node22());
    cmd.current_dir(node_dir())
        .arg(suite())
        .args(["list", "--server"])
        .env("NO_COLOR", "1");
    let listed = run_with_timeout(cmd, Duration::from_secs(60));
    assert!(
        listed.success(),
        "`conformance list --server` {}\n{}\n{}",
        listed.describe(),
        listed.stdout,
        listed.stderr
    );
    // Lines look like `  - sep-2640-skills-directory [extension]`.
    listed
        .stdout
        .lines()
        .filter_map(|line| line.trim_start().strip_prefix("- "))
        .filter_map(|rest| {
            let (name, tags) = rest.split_once(' ').unwrap_or((rest, ""));
            (name.starts_with("sep-2640") || name.contains("skill"))
                .then(|| (name.to_string(), tags.trim().to_string()))
        })
        .collect()
}

/// Run `scenario` against `url` at `spec_version`: `Ok(number of checks)` when the verdict is
/// strictly clean, else `Err(what went wrong)`.
fn run_skill_scenario(url: &str, scenario: &str, spec_version: &str) -> Result<usize, String> {
    let out_dir = scratch_dir("skills-conformance");
    let mut cmd = Command::new(node22());
    // `--force`: the suite calls extension scenarios "not on the spec timeline" and, given any
    // `--spec-version`, skips them unless forced; forced, they run at that version's wire.
    cmd.current_dir(node_dir())
        .arg(suite())
        .args(["server", "--url", url, "--scenario", scenario])
        .args(["--spec-version", spec_version, "--force", "--output-dir"])
        .arg(&out_dir)
        .env("NO_COLOR", "1");
    let finished = run_with_timeout(cmd, SCENARIO_TIMEOUT);
    let Some(checks) = take_checks(&out_dir).filter(|c| !c.is_empty()) else {
        return Err(format!(
            "no checks recorded ({})\nstdout: {}\nstderr: {}",
            finished.describe(),
            finished.stdout,
            finished.stderr
        ));
    };
    let bad: Vec<String> = checks
        .iter()
        .filter(|c| {
            let id = c["id"].as_str().unwrap_or("?");
            c["status"] != "SUCCESS"
                && !(c["status"] == "SKIPPED" && skip_allowed(spec_version, id))
        })
        .map(|c| {
            format!(
                "[{}] {}: {}",
                c["id"].as_str().unwrap_or("?"),
                c["status"].as_str().unwrap_or("?"),
                c["errorMessage"]
                    .as_str()
                    .or(c["description"].as_str())
                    .unwrap_or("")
            )
        })
        .collect();
    if !bad.is_empty() {
        return Err(bad.join("\n    "));
    }
    if !finished.success() {
        return Err(format!(
            "every check passed but the suite {}\nstdout: {}\nstderr: {}",
            finished.describe(),
            finished.stdout,
            finished.stderr
        ));
    }
    Ok(checks.len())
}

/// Run the three Skills scenarios against `url` at `spec_version` (`2025-11-25` or
/// `2026-07-28`); returns `(scenario, what failed)` for each scenario that is not strictly clean,
/// so an empty list means all passed.
pub(crate) fn run_skill_scenarios(url: &str, spec_version: &str) -> Vec<(String, String)> {
    SKILL_SCENARIOS
        .iter()
        .filter_map(|scenario| {
            let verdict = run_skill_scenario(url, scenario, spec_version);
            println!("{spec_version} {scenario}: {verdict:?}");
            verdict.err().map(|why| (scenario.to_string(), why))
        })
        .collect()
}

#[test]
fn the_suite_lists_exactly_the_three_skills_server_scenarios() {
    let listed = listed_skill_scenarios();
    let expected: Vec<(String, String)> = SKILL_SCENARIOS
        .iter()
        .map(|s| (s.to_string(), "[extension]".to_string()))
        .collect();
    let mut sorted = listed.clone();
    sorted.sort();
    let mut expected_sorted = expected.clone();
    expected_sorted.sort();
    assert_eq!(
        sorted, expected_sorted,
        "the suite's Skills server scenarios changed: run the new ones here"
    );
}

#[test]
fn the_skills_fixture_passes_every_skills_scenario_in_both_eras() {
    let (_fx, url) = start_fixture_http(&["--skills", "--page-size", "2"]);
    let failures: Vec<String> = SPEC_VERSIONS
        .iter()
        .flat_map(|v| {
            run_skill_scenarios(&url, v)
                .into_iter()
                .map(move |(s, why)| format!("{v} {s}:\n    {why}"))
        })
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The verdict is not vacuous: a server without the extension (every check SKIPPED) fails each
/// scenario, and an entry whose frontmatter differs from its file fails enumeration.
#[test]
fn the_strict_verdict_fails_a_server_without_skills_or_with_a_wrong_entry() {
    let (_plain, url) = start_fixture_http(&["--page-size", "2"]);
    let failed = run_skill_scenarios(&url, "2026-07-28");
    assert_eq!(
        failed.iter().map(|(s, _)| s.as_str()).collect::<Vec<_>>(),
        SKILL_SCENARIOS,
        "{failed:?}"
    );
    assert!(
        failed.iter().all(|(_, why)| why.contains("SKIPPED")),
        "{failed:?}"
    );

    let (_tampered, url) = start_fixture_http(&["--skills", "--skills-tamper", "frontmatter"]);
    let verdict = run_skill_scenario(&url, "sep-2640-skills-enumeration", "2026-07-28");
    let why = verdict.expect_err("a tampered entry must fail enumeration");
    assert!(
        why.contains("[sep-2640-entry-frontmatter-identical] FAILURE"),
        "{why}"
    );
}

/// A gateway in front of the skills fixture over HTTP (its URIs under its id, `docs`) and
/// another fixture without skills over stdio. (Two upstreams serving the same skills would
/// list each name twice, under two prefixes, which the suite rightly warns of; tests/e2e/skills.rs
/// shows two skill upstreams side by side.)
fn gateway_with_a_skill_upstream(fixture_url: &str) -> (sluice_e2e::Proc, String, Home) {
    let home = Home::new("skills-conformance");
    home.expose(&json!({
        "version": 1,
        "on_collision": "first",
        "upstreams": [
            {"id": "docs", "transport": "http", "url": fixture_url, "expose_all": true},
            {"id": "more", "transport": "stdio", "command": bin("sluice-fixture").to_string_lossy(),
             "args": ["--stdio", "--page-size", "2"], "expose_all": true}
        ],
        "expose": []
    }));
    let (gw, url) = start_sluice(&["--home", &home.arg(), "--no-admin"]);
    (gw, url, home)
}

/// Through the gateway (the skills under their upstream's prefix) and through
/// `--passthrough` (one upstream, its URIs unchanged), every scenario passes as it does
/// directly, at both versions.
#[test]
fn through_the_gateway_every_skills_scenario_passes_in_both_eras() {
    let (_fx, fixture_url) = start_fixture_http(&["--skills", "--page-size", "2"]);
    let (_gw, gateway_url, _home) = gateway_with_a_skill_upstream(&fixture_url);
    let (_pt, passthrough_url) = start_sluice(&["--passthrough", &fixture_url, "--no-admin"]);
    let mut failures = Vec::new();
    for (how, url) in [("gateway", &gateway_url), ("passthrough", &passthrough_url)] {
        for v in SPEC_VERSIONS {
            for (s, why) in run_skill_scenarios(url, v) {
                failures.push(format!("{how} {v} {s}:\n    {why}"));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
