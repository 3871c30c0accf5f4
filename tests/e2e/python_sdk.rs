//! The official MCP Python SDK client (PyPI `mcp` 2.x, installed by `scripts/test` into
//! `tests/python/.venv`) against the real binary, in both of its modes: `auto` probes
//! `server/discover` and speaks 2026-07-28 (the upstream's elicitation and sampling requests
//! arrive as `input_required` rounds), `legacy` runs the initialize handshake.

use serde_json::{json, Value};
use sluice_e2e::tree::Home;
use sluice_e2e::{bin, start_sluice, workspace_root};
use std::process::Command;

fn python() -> std::path::PathBuf {
    let p = std::env::var_os("SLUICE_PYTHON")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("tests/python/.venv/bin/python"));
    assert!(
        p.exists(),
        "{} is missing: run scripts/test (it creates tests/python/.venv with the MCP Python SDK)",
        p.display()
    );
    p
}

fn run(mode: &str, url: &str) -> Value {
    let out = Command::new(python())
        .arg(workspace_root().join("tests/python/client.py"))
        .args([mode, url])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "client.py {mode}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn the_python_sdk_client_in_auto_and_legacy_modes() {
    let home = Home::new("python-sdk");
    home.expose(&json!({"upstreams": [
        {"id": "fx", "command": bin("sluice-fixture").to_string_lossy(), "args": ["--stdio"], "expose_all": true}
    ]}));
    let (_gw, url) = start_sluice(&["--home", &home.arg(), "--no-admin"]);
    for (mode, version) in [("auto", "2026-07-28"), ("legacy", "2025-11-25")] {
        let r = run(mode, &url);
        assert_eq!(r["protocol_version"], version, "{mode}: {r}");
        assert!(
            r["tools"].as_array().unwrap().contains(&json!("fx_echo")),
            "{mode}: {r}"
        );
        assert_eq!(r["echo"], json!({"said": "hello"}), "{mode}");
        assert_eq!(
            r["elicitation"],
            json!(["User response: action=accept, content={\"response\":\"Ada\"}"]),
            "{mode}"
        );
        assert_eq!(r["sampling"], json!(["LLM response: Paris"]), "{mode}");
    }
}
