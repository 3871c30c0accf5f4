//! Scale-out end to end: three `sluice serve` replicas with one tree and one cluster key,
//! Debian's `redis-server`, and Debian's `nginx` in round-robin (no affinity) in front, all
//! started by the test on loopback (`redis-server` and `nginx` must be installed: the tests
//! fail, never skip, without them; `scripts/test` installs both as root).
//!
//! - `sessions`: any replica serves any session (raw client, the Python and TypeScript SDK
//!   clients through nginx); DELETE ends it everywhere; forged, tampered, truncated,
//!   foreign-key and cross-principal ids are 404 like unknown ones; config and `/readyz`.
//! - `messages`: notifications reach a GET stream held by another replica; `Last-Event-ID`
//!   resumes on another replica; a client's replies reach the replica that asked.
//! - `modern`: a 2026-07-28 client's `requestState` retried on another replica.
//! - `polling`: a paused POST stream resumed with `Last-Event-ID` on another replica.
//! - `isolation`: a session's own process serves it from every replica.
//! - `upstream`: one HTTP upstream session per client session, shared by the replicas.
//! - `faults`: `kill -9` of a replica under load, a rolling restart, a Redis outage.

mod faults;
mod isolation;
mod messages;
mod modern;
mod polling;
mod sessions;
mod upstream;

use serde_json::{json, Value};
use sluice_e2e::tree::Home;
use sluice_e2e::{bin, free_port, wait_for_port, Proc};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A program from Debian's packages, or a failure saying how to install it.
fn program(name: &str, package: &str) -> PathBuf {
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .chain([PathBuf::from("/usr/bin"), PathBuf::from("/usr/sbin")])
        .map(|d| d.join(name))
        .find(|p| p.is_file())
        .unwrap_or_else(|| {
            panic!(
                "{name} is not installed: the cluster tests need it. Install Debian's package \
                 (`apt-get install {package}`; scripts/test does so when run as root)"
            )
        })
}

/// A cluster key made by the binary, as a user would make it.
pub(crate) fn keygen() -> String {
    let out = Command::new(bin("sluice"))
        .args(["cluster", "keygen"])
        .output()
        .unwrap();
    assert!(out.status.success());
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// A scratch folder removed at drop.
pub(crate) struct Scratch(pub PathBuf);

impl Scratch {
    pub(crate) fn new(label: &str) -> Scratch {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos();
        let dir = std::env::temp_dir().join(format!(
            "sluice-cluster-{label}-{}-{nanos}",
            std::process::id()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `redis-server` on a free loopback port, without persistence.
pub(crate) struct Redis {
    pub(crate) proc: Option<Proc>,
    pub(crate) port: u16,
}

impl Redis {
    pub(crate) fn start() -> Redis {
        let port = free_port();
        let mut r = Redis { proc: None, port };
        r.restart();
        r
    }

    /// (Re)start it on its port.
    pub(crate) fn restart(&mut self) {
        let mut cmd = Command::new(program("redis-server", "redis-server"));
        cmd.args(["--port", &self.port.to_string()])
            .args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .stdout(Stdio::null());
        self.proc = Some(Proc::spawn(cmd));
        wait_for_port(self.port, Duration::from_secs(20));
    }

    /// Kill it (an outage).
    pub(crate) fn stop(&mut self) {
        self.proc = None;
    }

    pub(crate) fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/0", self.port)
    }

    /// One command over RESP; the raw answer.
    pub(crate) fn command(&self, args: &[&str]) -> String {
        use std::io::{Read, Write};
        let mut s = std::net::TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut cmd = format!("*{}\r\n", args.len());
        for a in args {
            cmd.push_str(&format!("${}\r\n{a}\r\n", a.len()));
        }
        s.write_all(cmd.as_bytes()).unwrap();
        let mut buf = vec![0u8; 65536];
        let n = s.read(&mut buf).unwrap();
        String::from_utf8_lossy(&buf[..n]).into_owned()
    }

    /// Redis's count of every command it ran since it started (`INFO commandstats`), by name
    /// (`pexpire`, `hgetall`, …).
    pub(crate) fn command_counts(&self) -> std::collections::HashMap<String, u64> {
        use std::io::{BufRead, BufReader, Read, Write};
        let mut s = std::net::TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        s.write_all(b"*2\r\n$4\r\nINFO\r\n$12\r\ncommandstats\r\n")
            .unwrap();
        let mut r = BufReader::new(s);
        let mut head = String::new();
        r.read_line(&mut head).unwrap();
        let len: usize = head.trim().trim_start_matches('$').parse().unwrap();
        let mut body = vec![0u8; len];
        r.read_exact(&mut body).unwrap();
        String::from_utf8_lossy(&body)
            .lines()
            .filter_map(|l| {
                let (name, rest) = l.strip_prefix("cmdstat_")?.split_once(':')?;
                let calls = rest
                    .strip_prefix("calls=")?
                    .split(',')
                    .next()?
                    .parse()
                    .ok()?;
                Some((name.to_string(), calls))
            })
            .collect()
    }

    /// The keys of every session's state.
    pub(crate) fn session_keys(&self) -> Vec<String> {
        self.command(&["KEYS", "sluice:c:s:*"])
            .lines()
            .filter(|l| l.starts_with("sluice:c:s:") && !l.contains(":ev") && !l.ends_with(":n"))
            .map(str::to_string)
            .collect()
    }
}

/// One `sluice serve` replica, its log in a file.
pub(crate) struct Replica {
    pub(crate) proc: Option<Proc>,
    pub(crate) port: u16,
    pub(crate) admin: u16,
    pub(crate) log: PathBuf,
    home: String,
    key: String,
}

impl Replica {
    pub(crate) fn start(home: &Home, key: &str, log: PathBuf) -> Replica {
        let mut r = Replica {
            proc: None,
            port: free_port(),
            admin: free_port(),
            log,
            home: home.arg(),
            key: key.to_string(),
        };
        r.restart();
        r
    }

    /// (Re)start it on its ports; its log is appended to.
    pub(crate) fn restart(&mut self) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .unwrap();
        let mut cmd = Command::new(bin("sluice"));
        cmd.arg("serve")
            .args(["--home", &self.home])
            .args(["--listen", &format!("127.0.0.1:{}", self.port)])
            .args(["--admin", &format!("127.0.0.1:{}", self.admin)])
            .env("SLUICE_CLUSTER_KEY", &self.key)
            .env("SLUICE_ADMIN_TOKEN", "cluster-admin-token-0123456789")
            .env("RUST_LOG", "info,sluice_server::replicas=debug")
            .stderr(log);
        self.proc = Some(Proc::spawn(cmd));
        wait_for_port(self.port, Duration::from_secs(30));
    }

    /// SIGKILL, no drain.
    pub(crate) fn kill9(&mut self) {
        if let Some(mut p) = self.proc.take() {
            let _ = p.child.kill();
            let _ = p.child.wait();
        }
    }

    /// SIGTERM, then wait for it to exit (bounded).
    pub(crate) fn stop(&mut self) {
        if let Some(mut p) = self.proc.take() {
            let _ = Command::new("kill")
                .args(["-TERM", &p.pid().to_string()])
                .status();
            let deadline = Instant::now() + Duration::from_secs(30);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = p.child.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            panic!("replica on {} did not exit after SIGTERM", self.port);
        }
    }

    pub(crate) fn url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.port)
    }

    /// `/readyz`: (status, body).
    pub(crate) async fn readyz(&self) -> (u16, Value) {
        let r = reqwest::get(format!("http://127.0.0.1:{}/readyz", self.admin))
            .await
            .unwrap();
        let status = r.status().as_u16();
        (status, r.json().await.unwrap())
    }

    /// Its log so far, once it has settled: the gateway writes a burst of lines in batches
    /// (up to 20 ms apart), so the file is read until two reads 60 ms apart agree (at most
    /// 3 s).
    pub(crate) fn log_text(&self) -> String {
        let read = || std::fs::read_to_string(&self.log).unwrap_or_default();
        let mut last = read();
        for _ in 0..50 {
            std::thread::sleep(std::time::Duration::from_millis(60));
            let now = read();
            if now == last {
                break;
            }
            last = now;
        }
        last
    }
}

/// nginx in round-robin over `ports`, no affinity: the configuration `docs/deployment.md`
/// shows, with the test's ports and paths.
pub(crate) fn nginx_config(dir: &Path, listen: u16, ports: &[u16]) -> String {
    let servers: String = ports
        .iter()
        .map(|p| format!("        server 127.0.0.1:{p} max_fails=0;\n"))
        .collect();
    let d = dir.display();
    format!(
        r#"worker_processes 1;
daemon off;
master_process off;
pid {d}/nginx.pid;
error_log {d}/error.log warn;
events {{ worker_connections 1024; }}
http {{
    access_log off;
    client_body_temp_path {d}/body;
    proxy_temp_path {d}/proxy;
    fastcgi_temp_path {d}/fastcgi;
    uwsgi_temp_path {d}/uwsgi;
    scgi_temp_path {d}/scgi;
    upstream sluice {{
        # Round-robin, no affinity: any replica serves any session. A replica that refuses
        # connections (restarting) is skipped per request, never marked down for a while.
{servers}    }}
    server {{
        listen 127.0.0.1:{listen};
        location /mcp {{
            proxy_pass http://sluice;
            # HTTP/1.1 for streamed (chunked) SSE; one connection per request (no upstream
            # keepalive), so a replica that drains refuses new requests instead of closing
            # an idle kept-alive connection under one, and the next replica takes them.
            proxy_http_version 1.1;
            proxy_set_header Host $host;
            # SSE: stream every event as it comes, keep GET streams open.
            proxy_buffering off;
            proxy_cache off;
            proxy_read_timeout 1h;
            # A replica that refuses the connection: the next one (a request is never
            # re-sent once a replica has it).
            proxy_next_upstream error timeout;
        }}
    }}
}}
"#
    )
}

/// `nginx` with [`nginx_config`], in the foreground.
pub(crate) struct Nginx {
    _proc: Proc,
    pub(crate) port: u16,
}

impl Nginx {
    pub(crate) fn start(dir: &Path, ports: &[u16]) -> Nginx {
        let port = free_port();
        let conf = dir.join("nginx.conf");
        std::fs::write(&conf, nginx_config(dir, port, ports)).unwrap();
        let mut cmd = Command::new(program("nginx", "nginx"));
        cmd.arg("-p")
            .arg(dir)
            .arg("-c")
            .arg(&conf)
            .arg("-e")
            .arg(dir.join("error.log"));
        let proc = Proc::spawn(cmd);
        wait_for_port(port, Duration::from_secs(20));
        Nginx { _proc: proc, port }
    }

    pub(crate) fn url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.port)
    }
}

/// Three replicas of one tree, their Redis, nginx in front.
pub(crate) struct Cluster {
    pub(crate) replicas: Vec<Replica>,
    pub(crate) redis: Redis,
    pub(crate) nginx: Nginx,
    pub(crate) home: Home,
    pub(crate) key: String,
    pub(crate) dir: Scratch,
}

impl Cluster {
    /// The cluster over `home` (its `sluice.json` is written here, with `settings` added).
    pub(crate) fn start(label: &str, home: Home, settings: Value) -> Cluster {
        let dir = Scratch::new(label);
        let redis = Redis::start();
        let key = keygen();
        let mut s = json!({"cluster": {"key": "${env:SLUICE_CLUSTER_KEY}", "redis": redis.url()}});
        for (k, v) in settings.as_object().into_iter().flatten() {
            s[k] = v.clone();
        }
        home.write("sluice.json", &s.to_string());
        let replicas: Vec<Replica> = (0..3)
            .map(|i| Replica::start(&home, &key, dir.0.join(format!("replica-{i}.log"))))
            .collect();
        let ports: Vec<u16> = replicas.iter().map(|r| r.port).collect();
        let nginx = Nginx::start(&dir.0, &ports);
        Cluster {
            replicas,
            redis,
            nginx,
            home,
            key,
            dir,
        }
    }

    /// How many replicas took up (served) the session `id` besides the one that began it.
    pub(crate) fn taken_up_by(&self, id: &str) -> usize {
        let line = format!("session taken up from the cluster session={id}");
        self.replicas
            .iter()
            .filter(|r| r.log_text().contains(&line))
            .count()
    }
}

/// A home with one stdio fixture upstream `fx` (tools `fx_<tool>`, prompts, resources).
pub(crate) fn fixture_home(label: &str) -> Home {
    let home = Home::new(label);
    home.expose(&json!({"upstreams": [
        {"id": "fx", "command": bin("sluice-fixture").to_string_lossy(), "args": ["--stdio"], "expose_all": true}
    ]}));
    home
}

/// [`fixture_home`] with the upstream pinned to an era (`legacy`: its sampling and elicitation
/// requests become `input_required` rounds for 2026-07-28 clients).
pub(crate) fn fixture_home_era(label: &str, era: &str) -> Home {
    let home = Home::new(label);
    home.expose(&json!({"upstreams": [
        {"id": "fx", "command": bin("sluice-fixture").to_string_lossy(), "args": ["--stdio"],
         "expose_all": true, "era": era}
    ]}));
    home
}

/// The 404 every unknown, ended, forged or foreign session id gets.
pub(crate) const NOT_FOUND: &str = r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32001,"message":"Session not found: it ended or never existed; initialize a new one"}}"#;
