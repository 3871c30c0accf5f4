//! The static binary and the container image: `scripts/static-build` makes a static musl binary
//! that answers `--version`; `scripts/image` builds the `FROM scratch` image from it; where this
//! machine can run containers (podman), the image serves a mounted configuration tree (with
//! authentication, the demo upstream as a stdio upstream, as the non-root user) and answers one
//! MCP round trip. Where containers cannot run, the run part is skipped with podman's errors
//! printed.
//!
//! The test does not run cargo (a cargo started from inside a test run waited forever here):
//! scripts/test runs scripts/image first, which builds the static binary (a release build, about
//! 2.5 minutes from scratch on 2 cores); the test then uses that binary and builds the image from
//! it again (seconds). Run alone: `scripts/static-build` first.

use serde_json::json;
use sluice_e2e::tree::Home;
use sluice_e2e::{free_port, workspace_root};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

const TOKEN: &str = "image-test-token-0123456789abcdef";
const ADMIN_TOKEN: &str = "image-test-admin-token-0123456789";

/// The static binary scripts/static-build leaves in the target folder.
fn static_bin() -> String {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("target"));
    let path = target.join("x86_64-unknown-linux-musl/release/sluice");
    assert!(
        path.exists(),
        "{} is missing: run scripts/static-build (scripts/test does) before this test",
        path.display()
    );
    path.to_string_lossy().into_owned()
}

/// Run a script of scripts/ and return its stdout's last line (the scripts print their result
/// there; progress goes to stderr, which is inherited).
fn script(name: &str, bin: &str) -> String {
    let out = Command::new(workspace_root().join("scripts").join(name))
        .current_dir(workspace_root())
        .env("SLUICE_STATIC_BIN", bin)
        .stderr(std::process::Stdio::inherit())
        .output()
        .unwrap_or_else(|e| panic!("run scripts/{name}: {e}"));
    assert!(
        out.status.success(),
        "scripts/{name} failed: {:?}",
        out.status
    );
    String::from_utf8(out.stdout)
        .expect("UTF-8")
        .lines()
        .last()
        .unwrap_or_else(|| panic!("scripts/{name} printed nothing"))
        .to_string()
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
    .trim()
    .to_string()
}

fn podman(args: &[&str]) -> Output {
    Command::new("podman")
        .args(args)
        .output()
        .expect("run podman")
}

/// Removes the named container when dropped.
struct Container(String);

impl Drop for Container {
    fn drop(&mut self) {
        let _ = podman(&["rm", "--force", "--time", "2", &self.0]);
    }
}

/// The `podman run` options under which this machine runs the image, found by running
/// `IMAGE --version`: none first; then explicit open-files and process limits, for hosts where
/// the runtime may not raise them (no CAP_SYS_RESOURCE); then those with runc, for hosts whose
/// cgroup layout crun refuses. Err: every attempt's error, for the skip message.
fn runnable_options(image: &str, version_line: &str) -> Result<Vec<&'static str>, String> {
    let limits = [
        "--ulimit",
        "nofile=1024:1024",
        "--ulimit",
        "nproc=1024:1024",
    ];
    let mut attempts: Vec<Vec<&'static str>> = vec![vec![], limits.to_vec()];
    if Command::new("runc").arg("--version").output().is_ok() {
        let mut with_runc = vec!["--runtime", "runc"];
        with_runc.extend(limits);
        attempts.push(with_runc);
    }
    let mut errors = Vec::new();
    for opts in attempts {
        let mut args = vec!["run", "--rm"];
        args.extend(&opts);
        args.extend([image, "--version"]);
        let out = podman(&args);
        let said = text(&out);
        if out.status.success() && said == version_line {
            return Ok(opts);
        }
        errors.push(format!("`podman {}`: {said}", args.join(" ")));
    }
    Err(errors.join("\n  "))
}

async fn wait_ready(admin: &str, container: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok(r) = reqwest::get(format!("{admin}/readyz")).await {
            if r.status() == 200 {
                return;
            }
        }
        if Instant::now() > deadline {
            let logs = podman(&["logs", container]);
            panic!(
                "the container was not ready within 30 s; its log:\n{}",
                text(&logs)
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn static_binary_and_image_serve_a_mounted_tree() {
    let version_line = format!("sluice {}", env!("CARGO_PKG_VERSION"));

    // The static binary is static and answers --version.
    let bin = static_bin();
    let file = Command::new("file").args(["-b", &bin]).output();
    if let Ok(file) = file {
        let said = text(&file);
        assert!(
            said.contains("statically linked") || said.contains("static-pie linked"),
            "{said}"
        );
    }
    let out = Command::new(&bin)
        .arg("--version")
        .output()
        .expect("run the static binary");
    assert!(out.status.success(), "{bin} --version: {}", text(&out));
    assert_eq!(text(&out), version_line);

    // The image builds (FROM scratch: nothing is pulled) with its documented configuration.
    let image = script("image", &bin);
    if let Err(e) = Command::new("podman").arg("--version").output() {
        eprintln!("SKIPPED inspecting and running the image: cannot run podman: {e}");
        return;
    }
    let inspect = podman(&[
        "image",
        "inspect",
        &image,
        "--format",
        "{{.Config.User}}|{{.Config.WorkingDir}}|{{json .Config.Entrypoint}}|{{json .Config.Cmd}}|{{index .Config.Labels \"org.opencontainers.image.version\"}}",
    ]);
    assert!(inspect.status.success(), "inspect: {}", text(&inspect));
    assert_eq!(
        text(&inspect),
        format!(
            r#"65532:65532|/config|["/sluice"]|["serve","--home","/config","--listen","0.0.0.0:8750","--admin","0.0.0.0:8751"]|{}"#,
            env!("CARGO_PKG_VERSION")
        )
    );

    // Can this machine run containers at all?
    let opts = match runnable_options(&image, &version_line) {
        Ok(opts) => opts,
        Err(why) => {
            eprintln!("SKIPPED the container run: podman cannot run a container here:\n  {why}");
            return;
        }
    };
    if !opts.is_empty() {
        eprintln!(
            "note: containers run here only with `podman run {}`",
            opts.join(" ")
        );
    }

    // A tree with authentication on (the default command listens on all interfaces) and the
    // binary's own demo upstream as a stdio upstream (the image has no other program).
    let home = Home::new("image");
    home.expose(&json!({"version": 1, "upstreams": [
        {"id": "demo", "transport": "stdio", "command": "/sluice", "args": ["demo-upstream"], "expose_all": true}
    ]}));
    let hash = Command::new(&bin)
        .args(["auth", "hash", TOKEN])
        .output()
        .expect("sluice auth hash");
    let hash = String::from_utf8(hash.stdout).unwrap().trim().to_string();
    home.write(
        "auth/auth.config.json",
        &json!({"enabled": true, "tokens": [{"name": "image-test", "sha256": hash, "scopes": ["mcp"]}]})
            .to_string(),
    );

    let (mcp_port, admin_port) = (free_port(), free_port());
    let name = format!("sluice-e2e-image-{}", std::process::id());
    let mount = format!("{}:/config:ro", home.arg());
    let (p1, p2) = (
        format!("127.0.0.1:{mcp_port}:8750"),
        format!("127.0.0.1:{admin_port}:8751"),
    );
    let env = format!("SLUICE_ADMIN_TOKEN={ADMIN_TOKEN}");
    let mut args = vec!["run", "--detach", "--name", &name];
    args.extend(&opts);
    args.extend(["-p", &p1, "-p", &p2, "-v", &mount, "-e", &env, &image]);
    let out = podman(&args);
    assert!(
        out.status.success(),
        "podman {}: {}",
        args.join(" "),
        text(&out)
    );
    let _container = Container(name.clone());

    let admin = format!("http://127.0.0.1:{admin_port}");
    wait_ready(&admin, &name).await;
    let health = reqwest::get(format!("{admin}/healthz")).await.unwrap();
    assert_eq!(health.status(), 200);

    // Runs as the image's user, not root; the demo upstream is its child.
    let top = podman(&["top", &name, "user", "args"]);
    let top = text(&top);
    assert!(
        top.lines()
            .skip(1)
            .all(|l| l.starts_with("sluice ") || l.starts_with("65532 ")),
        "{top}"
    );
    assert!(top.contains("/sluice demo-upstream"), "{top}");

    // One MCP round trip through the published port with the binary's own client: refused
    // without the token, the demo tools listed and one called with it.
    let url = format!("http://127.0.0.1:{mcp_port}/mcp");
    let anonymous = Command::new(&bin)
        .args(["client", &url, "tools"])
        .output()
        .unwrap();
    assert_eq!(anonymous.status.code(), Some(2), "{}", text(&anonymous));
    assert!(
        String::from_utf8_lossy(&anonymous.stderr).contains("401"),
        "{}",
        text(&anonymous)
    );
    let listed = Command::new(&bin)
        .args([
            "client", "--token", TOKEN, "--output", "json", &url, "tools",
        ])
        .output()
        .unwrap();
    assert!(listed.status.success(), "{}", text(&listed));
    let listed: serde_json::Value = serde_json::from_slice(&listed.stdout).unwrap();
    let mut names: Vec<&str> = listed["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, ["demo_add", "demo_echo", "demo_word_count"]);
    let called = Command::new(&bin)
        .args([
            "client",
            "--token",
            TOKEN,
            &url,
            "call",
            "demo_echo",
            "text=from the container",
        ])
        .output()
        .unwrap();
    assert!(called.status.success(), "{}", text(&called));
    // The text content, then the structured content pretty-printed.
    assert_eq!(
        String::from_utf8_lossy(&called.stdout).trim(),
        "from the container\n{\n  \"text\": \"from the container\"\n}"
    );
}
