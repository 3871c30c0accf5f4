//! What the OAuth tests share: a gateway on a tree, an operator's `sluice upstream login` with
//! its URL followed as a browser would, waiting until the gateway lists an upstream's tool, and
//! a user's Python SDK client that connects its own account (`connect_client.py`).

use serde_json::{json, Value};
use sluice_e2e::mcp::Client;
use sluice_e2e::tree::Home;
use sluice_e2e::{bin, wait_for_port, workspace_root, Proc};
use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// `sluice.json` of an OAuth test's tree: listening on `port`, the vault's key from
/// `SLUICE_E2E_VAULT_KEY`, quick restarts.
pub(super) fn settings(home: &Home, port: u16) {
    home.write(
        "sluice.json",
        &json!({
            "listen": format!("127.0.0.1:{port}"),
            "vault": {"key": "${env:SLUICE_E2E_VAULT_KEY}"},
            "restart_initial_ms": 100,
            "restart_max_ms": 300,
        })
        .to_string(),
    );
}

/// `sluice serve --home` (plus `args`) with `env`, listening on `port`; its log (stderr)
/// appended to `log` when given.
pub(super) fn serve(
    home: &Home,
    port: u16,
    args: &[&str],
    env: &[(&str, &str)],
    log: Option<&Path>,
) -> Proc {
    let mut cmd = Command::new(bin("sluice"));
    cmd.args(["serve", "--home", &home.arg()])
        .args(args)
        .envs(env.iter().copied())
        .stdout(Stdio::null());
    if let Some(log) = log {
        cmd.env("RUST_LOG", "debug").stderr(
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(log)
                .unwrap(),
        );
    }
    let p = Proc::spawn(cmd);
    wait_for_port(port, Duration::from_secs(30));
    p
}

/// `sluice upstream login ID`: the URL it prints first is followed (redirects and all) to the
/// gateway's callback, whose page must say it connected. Its whole stdout and its stderr.
pub(super) async fn login(home: &Home, id: &str, env: &[(&str, &str)]) -> (String, String) {
    let mut child = Command::new(bin("sluice"))
        .args([
            "upstream",
            "login",
            id,
            "--home",
            &home.arg(),
            "--timeout",
            "30",
        ])
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut url = String::new();
    out.read_line(&mut url).unwrap();
    assert!(
        url.contains("/authorize?"),
        "the first line is the URL: {url:?}"
    );
    let page = reqwest::get(url.trim()).await.unwrap();
    let status = page.status();
    let text = page.text().await.unwrap();
    assert_eq!(status, 200, "the callback page: {text}");
    assert!(
        text.contains(&format!("Sluice is connected to {id}")),
        "{text}"
    );
    let ok = child.wait().unwrap().success();
    let mut rest = String::new();
    out.read_to_string(&mut rest).unwrap();
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert!(ok, "login failed: {err}");
    (format!("{url}{rest}"), err)
}

/// A session on the gateway at `url` once it lists `tool` (bounded).
pub(super) async fn listed(url: &str, tool: &str) -> Client {
    let until = Instant::now() + Duration::from_secs(20);
    loop {
        let mut c = Client::new(url);
        c.initialize(json!({})).await;
        if c.tool_names().await.iter().any(|n| n == tool) {
            return c;
        }
        assert!(Instant::now() < until, "{tool} never listed at {url}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The text of a tool result.
pub(super) fn text_of(r: &Value) -> String {
    r["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("not a tool result: {r}"))
        .to_string()
}

/// The Python of tests/python/.venv (or `SLUICE_PYTHON`).
pub(super) fn python() -> std::path::PathBuf {
    std::env::var_os("SLUICE_PYTHON")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("tests/python/.venv/bin/python"))
}

/// `connect_client.py`: `tool` called twice with `args` as `user` with `token` (`mode`: `auto`,
/// `legacy` or `nocap`; `answer`: `browse` or `decline`); what it printed.
pub(super) async fn connect_client(
    mode: &str,
    url: &str,
    token: &str,
    tool: &str,
    args: &Value,
    user: &str,
    answer: &str,
) -> Value {
    let argv: Vec<String> = [mode, url, token, tool, user, answer, &args.to_string()]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let out = tokio::task::spawn_blocking(move || {
        Command::new(python())
            .arg(workspace_root().join("tests/python/connect_client.py"))
            .args(&argv)
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    assert!(
        out.status.success(),
        "connect_client.py: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {} / {}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}
