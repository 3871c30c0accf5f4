//! Making an edit of the tree live: the file watcher, the CLI, the admin API and the MCP
//! management tools refuse alike an edit the running listener cannot take (authentication turned
//! off while it is bound to a non-loopback address), count it as a failed reload and name the
//! error; each test runs inside a private network namespace (`unshare -n`), so nothing is exposed.
//!
//! Every test here is one face of the same scenario, [`refused_through`]:
//!
//! 1. The tree: `auth/auth.config.json` on with one static token, `sluice.json` with an admin
//!    token and the management tools listed, and the fixture as a stdio upstream. `sluice serve`
//!    listens on [`EXPOSED`] (a non-loopback address inside the namespace) and serves the admin
//!    API on 127.0.0.1.
//! 2. `auth/auth.config.json` is rewritten on disk with `"enabled": false`. The watcher refuses
//!    it: `reloads.failed` goes up by one, `reloads.last_error` names the file, the field
//!    `enabled` and the non-loopback address.
//! 3. The face's own edit, one that is valid by itself (the audit log switched on), made while
//!    the refused edit is still on disk (any apply path loads the whole tree from disk):
//!    - watcher: none (step 2 is its edit);
//!    - CLI: `sluice log on --home DIR` exits 0 (the tree alone is valid: the listener's address
//!      is given with `--listen`, so only the running gateway can refuse it), and the watcher
//!      refuses the tree it wrote: `reloads.failed` goes up again;
//!    - admin API: `POST /api/log/set {"enabled": true}` answers a 4xx (expected: 422, the answer
//!      of a change that cannot go live, `errors: [{file, field, message}]`) whose body names
//!      `auth/auth.config.json`, `enabled` and `non-loopback`; `reloads.failed` is up again when
//!      it answers;
//!    - MCP management tools: an authenticated `tools/call` of `sluice_log {"enabled": true}`
//!      answers a result with `isError: true` whose text names `auth/auth.config.json`, `enabled`
//!      and `non-loopback`; `reloads.failed` is up again when it answers.
//! 4. After each face, nothing of the refused tree is live: an unauthenticated `initialize` is
//!    answered 401, an authenticated one 200 and a tool call through it works, the audit log is
//!    still off, `reloads.ok` has not moved, `last_error` names `enabled` and the address, and
//!    `/metrics` (`sluice_reloads_total{result=…}`) agrees with the overview.
//!
//! The namespace: each test re-runs itself (`<test binary> --exact apply::<name>`) under
//! `unshare -n`, with [`NETNS_ENV`] naming a marker file. The inner run brings `lo` up, gives it
//! the extra address [`EXPOSED`] (not a loopback address, so the gateway treats its listener as
//! exposed; `lo` rather than a `dummy` link because not every kernel has the dummy driver), runs
//! the scenario and writes the marker. The outer run asserts that the inner one exited 0 and
//! wrote the marker (a filter that matched no test would exit 0 too). Without `unshare` or the
//! privilege to use it (root), the test fails saying so.

use crate::auth::sha256_hex;
use serde_json::{json, Value};
use sluice_e2e::mcp::Client;
use sluice_e2e::tree::Home;
use sluice_e2e::{bin, free_port, wait_for_addr, wait_for_port, Proc};
use std::net::{SocketAddr, TcpListener};
use std::process::Command;
use std::time::Duration;

/// Set (to the marker file's path) in the run inside the private network namespace.
const NETNS_ENV: &str = "SLUICE_E2E_APPLY_NETNS";
/// The non-loopback address the MCP listener binds inside the namespace.
const EXPOSED: &str = "10.213.0.1";
const ADMIN_TOKEN: &str = "e2e-apply-admin-token-0123456789";
/// The static token of the MCP listener (principal `ci-bot`).
const MCP_TOKEN: &str = "static-secret";

#[test]
fn an_edit_turning_authentication_off_on_an_exposed_listener_is_refused_by_the_watcher() {
    in_private_network(
        "an_edit_turning_authentication_off_on_an_exposed_listener_is_refused_by_the_watcher",
        Face::Watcher,
    );
}

#[test]
fn a_cli_edit_does_not_apply_an_authentication_off_edit_on_an_exposed_listener() {
    in_private_network(
        "a_cli_edit_does_not_apply_an_authentication_off_edit_on_an_exposed_listener",
        Face::Cli,
    );
}

#[test]
fn an_admin_api_edit_does_not_apply_an_authentication_off_edit_on_an_exposed_listener() {
    in_private_network(
        "an_admin_api_edit_does_not_apply_an_authentication_off_edit_on_an_exposed_listener",
        Face::Admin,
    );
}

#[test]
fn a_management_tool_edit_does_not_apply_an_authentication_off_edit_on_an_exposed_listener() {
    in_private_network(
        "a_management_tool_edit_does_not_apply_an_authentication_off_edit_on_an_exposed_listener",
        Face::Management,
    );
}

/// The ways an edit is made live.
#[derive(Debug, Clone, Copy)]
enum Face {
    Watcher,
    Cli,
    Admin,
    Management,
}

/// Run the scenario of `face` inside a private network namespace (see the module comment).
/// `name` is the calling test's function name.
fn in_private_network(name: &str, face: Face) {
    if let Some(marker) = std::env::var_os(NETNS_ENV) {
        private_interfaces();
        tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .expect("a tokio runtime")
            .block_on(refused_through(face));
        std::fs::write(marker, name).expect("write the marker file");
        return;
    }
    let marker = std::env::temp_dir().join(format!(
        "sluice-e2e-apply-{}-{face:?}.done",
        std::process::id()
    ));
    let _ = std::fs::remove_file(&marker);
    let exe = std::env::current_exe().expect("the test binary's path");
    let status = Command::new("unshare")
        .arg("--net")
        .arg(&exe)
        .args(["--exact", &format!("apply::{name}"), "--nocapture"])
        .env(NETNS_ENV, &marker)
        .status()
        .unwrap_or_else(|e| {
            panic!(
                "cannot run `unshare` ({e}): this test needs util-linux's unshare, run as root, to \
                 put the exposed listener in a private network namespace"
            )
        });
    assert!(
        status.success(),
        "the run inside the private network namespace failed ({status}); its output is above. \
         If unshare said \"Operation not permitted\", this test needs root (CAP_SYS_ADMIN)"
    );
    let ran = std::fs::read_to_string(&marker);
    let _ = std::fs::remove_file(&marker);
    assert_eq!(
        ran.ok().as_deref(),
        Some(name),
        "the run inside the namespace exited 0 without running apply::{name}"
    );
}

/// Run `ip ARGS` (inside the namespace); panics with its stderr when it fails.
fn ip(args: &[&str]) -> String {
    let out = Command::new("ip")
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run `ip` ({e}): this test needs iproute2"));
    assert!(
        out.status.success(),
        "ip {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// In a fresh network namespace: `lo` up, and [`EXPOSED`] on it.
fn private_interfaces() {
    let before = ip(&["-o", "addr", "show"]);
    assert!(
        !before.contains("inet"),
        "not a fresh network namespace (addresses already assigned): {before}"
    );
    ip(&["link", "set", "lo", "up"]);
    ip(&["addr", "add", &format!("{EXPOSED}/32"), "dev", "lo"]);
}

/// A free port on `ip`.
fn free_port_on(ip: &str) -> u16 {
    TcpListener::bind((ip, 0))
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap_or_else(|e| panic!("a free port on {ip}: {e}"))
}

fn auth_config(enabled: bool) -> String {
    json!({"enabled": enabled, "tokens": [{"name": "ci-bot", "sha256": sha256_hex(MCP_TOKEN)}]})
        .to_string()
}

/// The tree of the scenario (authentication on, management tools, the fixture upstream).
fn tree() -> Home {
    let home = Home::new("apply");
    home.expose(&json!({"upstreams": [
        {"id": "fx", "command": bin("sluice-fixture").to_string_lossy(), "args": ["--stdio"], "expose_all": true}
    ]}));
    home.write(
        "sluice.json",
        &json!({"admin_token": ADMIN_TOKEN, "management_tools": true, "funnel": false}).to_string(),
    );
    home.write("auth/auth.config.json", &auth_config(true));
    home.write(
        "logs/log.config.json",
        r#"{"enabled": false, "path": "logs/audit.jsonl"}"#,
    );
    home
}

/// The running gateway: MCP on [`EXPOSED`], admin on loopback.
struct Gateway {
    _proc: Proc,
    listen: String,
    mcp: String,
    admin: String,
    http: reqwest::Client,
}

/// `reloads` of the admin overview.
#[derive(Debug, Clone, PartialEq)]
struct Reloads {
    ok: u64,
    failed: u64,
    last_error: Option<String>,
}

impl Gateway {
    fn start(home: &Home) -> Gateway {
        let listen = format!("{EXPOSED}:{}", free_port_on(EXPOSED));
        let admin_port = free_port();
        let mut cmd = Command::new(bin("sluice"));
        cmd.args(["serve", "--home", &home.arg(), "--listen", &listen])
            .arg("--admin")
            .arg(format!("127.0.0.1:{admin_port}"))
            .env(
                "RUST_LOG",
                std::env::var("RUST_LOG").unwrap_or_else(|_| "info".into()),
            );
        let proc = Proc::spawn(cmd);
        let addr: SocketAddr = listen.parse().unwrap();
        wait_for_addr(addr, Duration::from_secs(30));
        wait_for_port(admin_port, Duration::from_secs(20));
        Gateway {
            _proc: proc,
            mcp: format!("http://{listen}/mcp"),
            listen,
            admin: format!("http://127.0.0.1:{admin_port}"),
            http: reqwest::Client::new(),
        }
    }

    /// GET an admin path with the admin token: (status, body).
    async fn admin_get(&self, path: &str) -> (u16, String) {
        let r = self
            .http
            .get(format!("{}{path}", self.admin))
            .bearer_auth(ADMIN_TOKEN)
            .send()
            .await
            .expect("GET the admin API");
        (r.status().as_u16(), r.text().await.unwrap_or_default())
    }

    async fn overview(&self) -> Value {
        let (status, body) = self.admin_get("/api/overview").await;
        assert_eq!(status, 200, "GET /api/overview: {body}");
        serde_json::from_str(&body).expect("the overview is JSON")
    }

    async fn reloads(&self) -> Reloads {
        let r = &self.overview().await["reloads"];
        Reloads {
            ok: r["ok"].as_u64().expect("reloads.ok"),
            failed: r["failed"].as_u64().expect("reloads.failed"),
            last_error: r["last_error"].as_str().map(str::to_string),
        }
    }

    /// Poll (bounded, 10 s) until `reloads.failed` reaches `n`.
    async fn failed_reaches(&self, n: u64, what: &str) -> Reloads {
        let mut r = self.reloads().await;
        for _ in 0..100 {
            if r.failed >= n {
                return r;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
            r = self.reloads().await;
        }
        panic!("{what}: reloads.failed did not reach {n} within 10 s: {r:?}");
    }

    /// POST an admin management operation with the admin token: (status, body text).
    async fn admin_post(&self, path: &str, body: Value) -> (u16, String) {
        let r = self
            .http
            .post(format!("{}{path}", self.admin))
            .bearer_auth(ADMIN_TOKEN)
            .json(&body)
            .send()
            .await
            .expect("POST the admin API");
        (r.status().as_u16(), r.text().await.unwrap_or_default())
    }

    /// The status of an `initialize` without credentials.
    async fn unauthenticated_initialize(&self) -> u16 {
        let c = Client::new(&self.mcp);
        let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "sluice-e2e", "version": "1"}}});
        c.builder()
            .body(init.to_string())
            .send()
            .await
            .expect("POST initialize")
            .status()
            .as_u16()
    }

    /// A session with the static token (initialize answered 200).
    async fn authenticated(&self) -> Client {
        let mut c = Client::with_bearer(&self.mcp, MCP_TOKEN);
        c.initialize(json!({})).await;
        c
    }

    /// What must hold while the refused tree is on disk (step 4 of the module comment).
    async fn still_protected(&self, face: Face, ok_before: u64) {
        assert_eq!(
            self.unauthenticated_initialize().await,
            401,
            "{face:?}: an initialize without credentials must still be refused: authentication \
             was turned off on the exposed listener {}",
            self.listen
        );
        let c = self.authenticated().await;
        let r = c.call_tool("fx_echo", json!({"still": "on"})).await;
        assert_eq!(
            r["result"]["structuredContent"],
            json!({"still": "on"}),
            "{face:?}: {r}"
        );
        let overview = self.overview().await;
        assert_eq!(
            overview["audit_log"]["enabled"],
            json!(false),
            "{face:?}: nothing of the refused tree is live (the audit log is still off)"
        );
        let reloads = self.reloads().await;
        assert_eq!(
            reloads.ok, ok_before,
            "{face:?}: a refused edit is not counted as applied: {reloads:?}"
        );
        let last = reloads.last_error.clone().unwrap_or_default();
        assert_refusal(
            &last,
            &format!("{face:?}: reloads.last_error"),
            Some(&self.listen),
        );
        let (status, metrics) = self.admin_get("/metrics").await;
        assert_eq!(status, 200, "{metrics}");
        let line = |result: &str| {
            let key = format!("sluice_reloads_total{{result=\"{result}\"}} ");
            metrics
                .lines()
                .find_map(|l| l.strip_prefix(key.as_str()))
                .and_then(|v| v.trim().parse::<u64>().ok())
                .unwrap_or_else(|| panic!("/metrics has no {key}: {metrics}"))
        };
        let now = self.reloads().await;
        assert_eq!(
            (line("ok"), line("failed")),
            (now.ok, now.failed),
            "{face:?}: /metrics counts reloads as the overview does"
        );
    }
}

/// `text` is the refusal: it names the file, the field `enabled`, the non-loopback listener (and
/// its address when given).
fn assert_refusal(text: &str, what: &str, address: Option<&str>) {
    for needle in ["auth/auth.config.json", "enabled", "non-loopback"]
        .into_iter()
        .chain(address)
    {
        assert!(
            text.contains(needle),
            "{what} must name {needle:?} (the refused authentication-off edit): {text:?}"
        );
    }
}

/// What the face's own edit answered (the CLI's exit and output are checked where it runs).
enum Answer {
    /// The admin API: status and body.
    Http(u16, String),
    /// The management tool: the JSON-RPC reply.
    Rpc(Value),
}

/// The scenario of the module comment, through `face`.
async fn refused_through(face: Face) {
    let home = tree();
    let gw = Gateway::start(&home);
    assert_eq!(
        gw.unauthenticated_initialize().await,
        401,
        "authentication is on"
    );
    let manager = gw.authenticated().await;
    let start = gw.reloads().await;

    // The on-disk edit: authentication off. The watcher refuses it.
    home.write("auth/auth.config.json", &auth_config(false));
    let refused = gw
        .failed_reaches(start.failed + 1, "the watcher refusing auth off")
        .await;
    assert_refusal(
        refused.last_error.as_deref().unwrap_or_default(),
        "reloads.last_error after the on-disk edit",
        Some(&gw.listen),
    );
    gw.still_protected(Face::Watcher, start.ok).await;

    // The face's own edit, valid by itself, while the refused edit is on disk. What it answered
    // is checked after what matters most: that authentication is still on.
    let answer = match face {
        Face::Watcher => None,
        Face::Cli => {
            let out = Command::new(bin("sluice"))
                .args(["log", "on", "--home", &home.arg()])
                .output()
                .expect("run sluice log on");
            let stdout = String::from_utf8_lossy(&out.stdout);
            assert_eq!(
                out.status.code(),
                Some(0),
                "the tree alone is valid, so the CLI writes it: {stdout}{}",
                String::from_utf8_lossy(&out.stderr)
            );
            assert!(stdout.starts_with("audit log on: "), "{stdout}");
            gw.failed_reaches(
                refused.failed + 1,
                "the watcher refusing the tree the CLI wrote",
            )
            .await;
            None
        }
        Face::Admin => {
            let (status, body) = gw
                .admin_post("/api/log/set", json!({"enabled": true}))
                .await;
            Some(Answer::Http(status, body))
        }
        Face::Management => Some(Answer::Rpc(
            manager
                .call_tool("sluice_log", json!({"enabled": true}))
                .await,
        )),
    };
    let counted = gw.reloads().await;
    gw.still_protected(face, start.ok).await;
    match answer {
        Some(Answer::Http(status, body)) => {
            assert!(
                (400..500).contains(&status),
                "the admin API must refuse an edit that would make the refused tree live \
                 (expected 422 naming auth/auth.config.json `enabled`), got {status}: {body}"
            );
            assert_refusal(&body, "the admin API's answer", None);
        }
        Some(Answer::Rpc(r)) => {
            assert_eq!(
                r["result"]["isError"],
                json!(true),
                "the management tool must refuse an edit that would make the refused tree \
                 live (an isError result naming auth/auth.config.json `enabled`): {r}"
            );
            let text = r["result"]["content"][0]["text"].as_str().unwrap_or("");
            assert_refusal(text, "the management tool's answer", None);
        }
        None => return,
    }
    assert!(
        counted.failed > refused.failed,
        "{face:?}: the refusal is counted in the reload statistics by the time it answers: \
         {counted:?}"
    );
}
