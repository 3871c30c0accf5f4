//! Shared helpers for the end-to-end tests: locate the workspace binaries, spawn them on free
//! loopback ports, wait for them to listen, and kill them when the test ends.

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The workspace root (the folder holding the top-level `Cargo.toml`).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ has a parent")
        .to_path_buf()
}

/// Path of a binary built by this workspace (`sluice`, `sluice-fixture`, …).
///
/// The test command builds the whole workspace before running the tests, so the binaries sit
/// beside the test executable's profile folder.
pub fn bin(name: &str) -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("target"));
    let profile = if cfg!(debug_assertions) { "debug" } else { "release" };
    let path = target.join(profile).join(name);
    assert!(
        path.exists(),
        "{} is missing: run `cargo build --workspace` before the tests",
        path.display()
    );
    path
}

/// A free TCP port on 127.0.0.1 (bound, read, released).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}

/// Wait until something accepts TCP connections on `port` (at most `timeout`).
pub fn wait_for_port(port: u16, timeout: Duration) {
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
            return;
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    panic!("nothing listened on 127.0.0.1:{port} within {timeout:?}");
}

/// A child process that is killed (and reaped) when dropped.
pub struct Proc {
    /// The running child.
    pub child: Child,
}

impl Proc {
    /// Spawn `cmd` with stdin null and stdout/stderr inherited (visible with `--nocapture`).
    pub fn spawn(mut cmd: Command) -> Proc {
        cmd.stdin(Stdio::null());
        let child = cmd.spawn().expect("spawn child process");
        Proc { child }
    }

    /// Spawn `cmd` with piped stdin/stdout (for stdio protocol tests).
    pub fn spawn_piped(mut cmd: Command) -> Proc {
        cmd.stdin(Stdio::piped()).stdout(Stdio::piped());
        let child = cmd.spawn().expect("spawn child process");
        Proc { child }
    }

    /// The OS process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Start the fixture MCP server over Streamable HTTP on a free port; returns it and its `/mcp` URL.
pub fn start_fixture_http(extra_args: &[&str]) -> (Proc, String) {
    let port = free_port();
    let mut cmd = Command::new(bin("sluice-fixture"));
    cmd.arg("--http").arg(format!("127.0.0.1:{port}")).args(extra_args);
    let proc = Proc::spawn(cmd);
    wait_for_port(port, Duration::from_secs(20));
    (proc, format!("http://127.0.0.1:{port}/mcp"))
}

/// Start `sluice serve` with the given arguments plus `--listen 127.0.0.1:<free>`; returns it and
/// its `/mcp` URL once it accepts connections.
pub fn start_sluice(args: &[&str]) -> (Proc, String) {
    let port = free_port();
    let mut cmd = Command::new(bin("sluice"));
    cmd.arg("serve")
        .arg("--listen")
        .arg(format!("127.0.0.1:{port}"))
        .args(args)
        .env("RUST_LOG", std::env::var("RUST_LOG").unwrap_or_else(|_| "info".into()));
    let proc = Proc::spawn(cmd);
    wait_for_port(port, Duration::from_secs(30));
    (proc, format!("http://127.0.0.1:{port}/mcp"))
}
