//! Sandboxed stdio servers: real servers confined by the kernel through `sluice sandbox-exec`
//! (Landlock, user and network namespaces, rlimits), with the gateway serving everyone else
//! while one of them misbehaves; `sluice check`'s report and the refusal of a sandbox the
//! kernel cannot enforce.
//!
//! The servers: `@modelcontextprotocol/server-filesystem` (installed by `scripts/test` into
//! `tests/node`) and `tests/node/sandbox-probe.mjs`, a small server whose tools try what a
//! sandbox refuses (connect, allocate, fork).

use crate::interop::{node22, node_dir};
use serde_json::{json, Value};
use sluice_e2e::mcp::Client;
use sluice_e2e::tree::Home;
use sluice_e2e::{bin, start_sluice};
use std::net::TcpListener;
use std::process::Command;
use std::time::{Duration, Instant};

/// What a Node.js server needs to read: the system's programs, libraries and configuration,
/// and the tests' Node.js folder (the pinned node binary, the packages, the probe).
fn node_reads() -> Vec<String> {
    let mut v: Vec<String> = ["/usr", "/lib", "/lib64", "/etc"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    v.push(node_dir().to_string_lossy().into_owned());
    v
}

fn node() -> String {
    node22().to_string_lossy().into_owned()
}

fn probe() -> String {
    node_dir()
        .join("sandbox-probe.mjs")
        .to_string_lossy()
        .into_owned()
}

/// The probe as an upstream named `id`, confined by `sandbox` (none: unconfined).
fn probe_upstream(id: &str, sandbox: Option<Value>) -> Value {
    let mut u = json!({"id": id, "command": node(), "args": [probe()], "expose_all": true});
    if let Some(s) = sandbox {
        u["sandbox"] = s;
    }
    u
}

/// A client once every tool of `names` is listed (the upstreams started), within 60 s.
async fn client_with(url: &str, names: &[&str]) -> Client {
    let mut c = Client::new(url);
    c.initialize(json!({})).await;
    let end = Instant::now() + Duration::from_secs(60);
    loop {
        let listed = c.tool_names().await;
        if names.iter().all(|n| listed.iter().any(|l| l == n)) {
            return c;
        }
        assert!(
            Instant::now() < end,
            "tools {names:?} not listed: {listed:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// A tool's text and whether it is an error.
async fn call(c: &Client, name: &str, args: Value) -> (String, bool) {
    let r = c.call_tool(name, args).await;
    let result = &r["result"];
    assert!(result.is_object(), "{name}: {r}");
    (
        result["content"][0]["text"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
        result["isError"].as_bool().unwrap_or(false),
    )
}

/// Run `sluice ARGS`: its exit code, stdout and stderr.
pub(crate) fn sluice_out(args: &[&str]) -> (Option<i32>, String, String) {
    let out = Command::new(bin("sluice")).args(args).output().unwrap();
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (out.status.code(), text(&out.stdout), text(&out.stderr))
}

fn is_root() -> bool {
    let out = Command::new("id").arg("-u").output().unwrap();
    String::from_utf8_lossy(&out.stdout).trim() == "0"
}

/// The filesystem server is allowed two folders by its own arguments; the sandbox lets it read
/// one. A file in the other is refused by the kernel (EACCES), while the same server unconfined
/// reads it.
#[tokio::test]
async fn sandbox_the_filesystem_server_reads_only_the_folder_its_sandbox_allows() {
    let home = Home::new("sandbox-fs");
    home.write("a/inside.txt", "alpha\n")
        .write("b/outside.txt", "beta\n");
    let a = home.path().join("a").to_string_lossy().into_owned();
    let b = home.path().join("b").to_string_lossy().into_owned();
    let server = node_dir()
        .join("node_modules/@modelcontextprotocol/server-filesystem/dist/index.js")
        .to_string_lossy()
        .into_owned();
    let mut reads = node_reads();
    reads.push(a.clone());
    home.expose(&json!({"version": 1, "upstreams": [
        {"id": "boxed", "command": node(), "args": [server, a, b], "expose_all": true,
         "sandbox": {"fs": {"read": reads, "write": ["/dev/null"]}}},
        {"id": "open", "command": node(), "args": [server, a, b], "expose_all": true}
    ]}));
    let (_gw, url) = start_sluice(&["--home", &home.arg(), "--no-admin"]);
    let c = client_with(&url, &["boxed_read_text_file", "open_read_text_file"]).await;
    let inside = format!("{a}/inside.txt");
    let outside = format!("{b}/outside.txt");

    let (text, err) = call(&c, "boxed_read_text_file", json!({"path": inside})).await;
    assert_eq!((text.as_str(), err), ("alpha\n", false));
    let (text, err) = call(&c, "boxed_read_text_file", json!({"path": outside})).await;
    assert!(err, "{text}");
    assert!(text.contains("EACCES"), "{text}");
    // Its listing of the other folder is refused too.
    let (text, err) = call(&c, "boxed_list_directory", json!({"path": b})).await;
    assert!(err && text.contains("EACCES"), "{text}");

    // The same server, unconfined, reads it: the refusal is the sandbox's.
    let (text, err) = call(&c, "open_read_text_file", json!({"path": outside})).await;
    assert_eq!((text.as_str(), err), ("beta\n", false));
}

/// `"none"`: nothing is reachable (a new network namespace); `"loopback"`: only the server's
/// own loopback, not the host's; `{"connect": […]}`: TCP connect to the listed ports only. And
/// with any sandbox, the server cannot signal a process outside it (the gateway).
#[tokio::test]
async fn sandbox_network_none_loopback_and_a_connect_list() {
    let allowed = TcpListener::bind("127.0.0.1:0").unwrap();
    let other = TcpListener::bind("127.0.0.1:0").unwrap();
    let (p1, p2) = (
        allowed.local_addr().unwrap().port(),
        other.local_addr().unwrap().port(),
    );
    let home = Home::new("sandbox-net");
    home.expose(&json!({"version": 1, "upstreams": [
        probe_upstream("open", None),
        probe_upstream("none", Some(json!({"network": "none"}))),
        probe_upstream("lo", Some(json!({"network": "loopback"}))),
        probe_upstream("ports", Some(json!({"network": {"connect": [format!("127.0.0.1:{p1}")]}}))),
    ]}));
    let (gw, url) = start_sluice(&["--home", &home.arg(), "--no-admin"]);
    let c = client_with(
        &url,
        &[
            "open_connect",
            "none_connect",
            "lo_connect",
            "ports_connect",
        ],
    )
    .await;
    let to = |port: u16| json!({"host": "127.0.0.1", "port": port});

    assert_eq!(
        call(&c, "open_connect", to(p1)).await,
        ("connected".into(), false)
    );
    assert_eq!(
        call(&c, "open_connect", to(p2)).await,
        ("connected".into(), false)
    );
    // A new namespace with no interface up: even loopback is unreachable.
    assert_eq!(
        call(&c, "none_connect", to(p1)).await,
        ("ENETUNREACH".into(), true)
    );
    // Its own loopback is up: it reaches itself; but the host's listener is not there.
    assert_eq!(
        call(&c, "lo_self_connect", json!({})).await,
        ("connected".into(), false)
    );
    // Under "none" not even itself (its lo is down).
    assert_eq!(
        call(&c, "none_self_connect", json!({})).await,
        ("ENETUNREACH".into(), true)
    );
    assert_eq!(
        call(&c, "lo_connect", to(p1)).await,
        ("ECONNREFUSED".into(), true)
    );
    // Landlock: the listed port connects, any other is refused.
    assert_eq!(
        call(&c, "ports_connect", to(p1)).await,
        ("connected".into(), false)
    );
    // Landlock's signal scope: the gateway is out of reach of a sandboxed server.
    let gateway = json!({"pid": gw.pid()});
    assert_eq!(
        call(&c, "open_signal", gateway.clone()).await,
        ("sent".into(), false)
    );
    assert_eq!(
        call(&c, "none_signal", gateway).await,
        ("EPERM".into(), true)
    );
    assert_eq!(
        call(&c, "ports_connect", to(p2)).await,
        ("EACCES".into(), true)
    );
}

/// A CPU spinner is killed at `cpu_seconds`, a memory hog stops at `memory_mb` and a fork bomb
/// at `processes`, while another upstream answers during the bomb and the sandboxed servers keep
/// serving afterwards.
#[tokio::test]
async fn sandbox_cpu_memory_and_fork_bombs_stop_at_their_caps_while_others_are_served() {
    let home = Home::new("sandbox-caps");
    let mut reads = node_reads();
    reads.push("/proc".into());
    // RLIMIT_NPROC does not apply to uid 0: a gateway running as root runs the bomb as nobody,
    // who may not be able to reach this checkout (under /root, say): the probe is copied into
    // the home folder (in the temporary folder), and the system's Node.js runs it when there is
    // one.
    let mut bomb = probe_upstream("bomb", None);
    let mut sandbox = json!({"processes": 48});
    if is_root() {
        let copy = home.path().join("sandbox-probe.mjs");
        std::fs::copy(probe(), &copy).unwrap();
        bomb["args"] = json!([copy]);
        if std::path::Path::new("/usr/bin/node").exists() {
            bomb["command"] = json!("/usr/bin/node");
        }
        reads.push(home.arg());
        sandbox["user"] = json!("nobody");
    }
    sandbox["fs"] = json!({"read": reads, "write": ["/dev/null"]});
    bomb["sandbox"] = sandbox;
    home.expose(&json!({"version": 1, "upstreams": [
        probe_upstream("hog", Some(json!({"memory_mb": 256}))),
        probe_upstream("spin", Some(json!({"cpu_seconds": 1}))),
        bomb,
        {"id": "other", "command": bin("sluice-fixture").to_string_lossy(), "args": ["--stdio", "--name", "other"], "expose_all": true}
    ]}));
    let (_gw, url) = start_sluice(&["--home", &home.arg(), "--no-admin"]);
    let c = client_with(
        &url,
        &["hog_hog", "bomb_fork_bomb", "spin_spin", "other_whoami"],
    )
    .await;

    // A second of CPU, then SIGXCPU: the call fails as for any server that exits, and the
    // upstream is started again.
    let r = c.call_tool("spin_spin", json!({"seconds": 5})).await;
    assert_eq!(r["error"]["code"], json!(-32000), "{r}");
    let end = Instant::now() + Duration::from_secs(30);
    loop {
        let r = c.call_tool("spin_whoami", json!({})).await;
        if r["result"]["content"][0]["text"]
            .as_str()
            .is_some_and(|t| t.contains(r#""Max cpu time":"1""#))
        {
            break;
        }
        assert!(Instant::now() < end, "spin did not come back: {r}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }

    let (text, err) = call(&c, "hog_hog", json!({"mb": 4096})).await;
    assert!(err, "{text}");
    let got: Value = serde_json::from_str(&text).unwrap();
    let mb = got["allocated_mb"].as_u64().unwrap();
    assert!(mb < 256, "allocated {mb} MiB under a 256 MiB cap: {text}");
    assert!(
        got["error"].as_str().unwrap().contains("allocation failed"),
        "{text}"
    );

    let (limits, _) = call(&c, "bomb_whoami", json!({})).await;
    assert!(limits.contains(r#""Max processes":"48""#), "{limits}");
    let bomb = c.call_tool("bomb_fork_bomb", json!({"seconds": 3}));
    let others = async {
        // Everyone else is served while the bomb runs.
        let mut answered = 0;
        for _ in 0..5 {
            tokio::time::sleep(Duration::from_millis(400)).await;
            let (text, err) = call(&c, "other_whoami", json!({})).await;
            assert!(!err && text.starts_with("other pid="), "{text}");
            answered += 1;
        }
        answered
    };
    let (r, answered) = tokio::join!(bomb, others);
    assert_eq!(answered, 5);
    let text = r["result"]["content"][0]["text"].as_str().unwrap();
    let seen: Value = serde_json::from_str(text).unwrap_or_else(|_| panic!("{r}"));
    let max = seen["max_processes"].as_u64().unwrap();
    // The bomb's processes and the server's own threads share the cap.
    assert!(
        max > 5 && max < 48,
        "the bomb reached {max} processes: {text}"
    );
    assert_eq!(seen["left"], json!(0), "{text}");

    // Both sandboxed servers still answer.
    assert!(!call(&c, "hog_whoami", json!({})).await.1);
    assert!(!call(&c, "bomb_whoami", json!({})).await.1);
}

/// `sluice check` prints what the kernel supports and what each sandbox enforces; a sandbox the
/// kernel cannot enforce (here `processes` for a root gateway without `user`) fails `check` and
/// `serve` alike, naming the upstream.
#[tokio::test]
async fn sandbox_check_reports_support_and_serve_refuses_what_cannot_be_enforced() {
    let home = Home::new("sandbox-check");
    home.expose(&json!({"version": 1, "upstreams": [
        probe_upstream("boxed", Some(json!({"network": "none", "memory_mb": 64, "fs": {"read": ["/usr"], "write": []}}))),
        probe_upstream("open", None)
    ]}));
    let (code, text, _) = sluice_out(&["check", "--home", &home.arg()]);
    assert_eq!(code, Some(0), "{text}");
    assert!(
        text.contains("sandbox support of this kernel:\n  Landlock ABI "),
        "{text}"
    );
    assert!(
        text.contains("user namespaces: yes; network namespaces: yes"),
        "{text}"
    );
    assert!(
        text.contains("upstream boxed: sandboxed\n  files: read /usr\n  files: write nothing\n  files: Unix sockets by path not confined (Landlock governs them from ABI 9)\n  network: none (a new network namespace)\n  memory: 64 MiB of data per process (RLIMIT_DATA)\n"),
        "{text}"
    );
    assert!(!text.contains("upstream open"), "{text}");

    if !is_root() {
        return;
    }
    home.expose(&json!({"version": 1, "upstreams": [
        probe_upstream("bomb", Some(json!({"processes": 10})))
    ]}));
    let (code, text, _) = sluice_out(&["check", "--home", &home.arg()]);
    assert_eq!(code, Some(1), "{text}");
    assert!(text.contains("error: upstream bomb: sandbox: sandbox.processes cannot be enforced for root: the kernel does not apply RLIMIT_NPROC to uid 0"), "{text}");
    let serve = ["serve", "--no-admin", "--listen", "127.0.0.1:0", "--home"];
    let (code, _, err) = sluice_out(&[&serve[..], &[&home.arg()]].concat());
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("upstream bomb: sandbox: sandbox.processes cannot be enforced for root"),
        "{err}"
    );
}

/// A process hook (JSON lines with ids) that refuses every event, saying whether it could read
/// `secret.txt`.
const PROCESS_HOOK: &str = r#"while IFS= read -r line; do
  id=$(printf '%s' "$line" | sed 's/^{"id":\([0-9]*\),.*/\1/')
  if cat secret.txt >/dev/null 2>&1; then why="read it"; else why="refused"; fi
  printf '{"id":%s,"decision":"refuse","reason":"%s","agent":true}\n' "$id" "$why"
done"#;

/// A command hook and a process hook are confined as an upstream is: under its sandbox each
/// cannot read a file of the tree that the same command hook, unconfined, reads.
#[tokio::test]
async fn sandbox_command_and_process_hooks_cannot_read_outside_their_sandbox() {
    let home = Home::new("sandbox-hook");
    home.write("secret.txt", "top secret\n");
    let script =
        "cat secret.txt >/dev/null 2>&1 && echo 'read it' >&2 || echo 'refused' >&2; exit 2";
    home.write(
        "hooks/hooks.manifest.json",
        &json!({"version": 1, "hooks": [
            {"id": "boxed", "event": "PreToolUse", "matcher": "fx_echo", "type": "command",
             "command": script, "enabled": true,
             "sandbox": {"fs": {"read": ["/usr", "/lib", "/lib64", "/etc"], "write": ["/dev/null"]}, "network": "none"}},
            {"id": "open", "event": "PreToolUse", "matcher": "fx_add", "type": "command",
             "command": script, "enabled": true},
            {"id": "long-lived", "event": "PreToolUse", "matcher": "fx_whoami", "type": "process",
             "command": PROCESS_HOOK, "enabled": true,
             "sandbox": {"fs": {"read": ["/usr", "/lib", "/lib64", "/etc"], "write": ["/dev/null"]}}}
        ]})
        .to_string(),
    );
    home.expose(&json!({"version": 1, "upstreams": [
        {"id": "fx", "command": bin("sluice-fixture").to_string_lossy(), "args": ["--stdio", "--name", "fx"], "expose_all": true}
    ]}));
    let (_gw, url) = start_sluice(&["--home", &home.arg(), "--no-admin"]);
    let c = client_with(&url, &["fx_echo", "fx_add"]).await;
    let r = c.call_tool("fx_echo", json!({"text": "hi"})).await;
    assert_eq!(r["error"]["data"]["reason"], json!("refused"), "{r}");
    let r = c.call_tool("fx_add", json!({"a": 1, "b": 2})).await;
    assert_eq!(r["error"]["data"]["reason"], json!("read it"), "{r}");
    let r = c.call_tool("fx_whoami", json!({})).await;
    assert_eq!(r["error"]["data"]["reason"], json!("refused"), "{r}");
}

/// A reload that brings a sandbox the kernel cannot enforce does not run the server unconfined:
/// the launcher refuses, and the upstream is down with the launcher's reason.
#[tokio::test]
async fn sandbox_a_reload_to_an_unenforceable_sandbox_leaves_the_upstream_down_saying_why() {
    let home = Home::new("sandbox-reload");
    home.expose(&json!({"version": 1, "upstreams": [
        probe_upstream("p", Some(json!({"memory_mb": 512})))
    ]}));
    let (_gw, url) = start_sluice(&["--home", &home.arg(), "--no-admin"]);
    let c = client_with(&url, &["p_whoami"]).await;
    assert!(!call(&c, "p_whoami", json!({})).await.1);

    // As root, `processes` without `user`; as anyone else, `user` (only root switches users).
    let (bad, why) = if is_root() {
        (
            json!({"processes": 10}),
            "sandbox.processes cannot be enforced for root",
        )
    } else {
        (
            json!({"user": "nobody"}),
            "only a gateway running as root can run a server as another user",
        )
    };
    home.expose(&json!({"version": 1, "upstreams": [probe_upstream("p", Some(bad))]}));
    let end = Instant::now() + Duration::from_secs(30);
    loop {
        let r = c.call_tool("p_whoami", json!({})).await;
        let message = r["error"]["message"].as_str().unwrap_or_default();
        if message.contains(why) {
            assert_eq!(r["error"]["code"], json!(-32000), "{r}");
            assert!(
                message.contains("Upstream 'p' is unavailable: ")
                    && message.contains("the sandbox was not applied, the server not run: "),
                "{r}"
            );
            break;
        }
        assert!(Instant::now() < end, "never refused: {r}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
