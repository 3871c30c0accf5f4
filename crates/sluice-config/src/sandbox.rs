//! `sandbox` on a stdio upstream: what the kernel confines the server to (files, network,
//! memory, processes, CPU time), read and checked here, enforced by `sluice-sandbox`.
//!
//! Unknown keys are errors at every level: a misspelt restriction must never load as no
//! restriction. Paths are expanded (`${env:NAME}`, a leading `~/` from `HOME`) and made
//! absolute against the home folder when loaded, so the launcher gets them as they will be
//! enforced.

use crate::fields::{expand_env, Fields};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// What a sandboxed server may do. Each part left out is not restricted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct Sandbox {
    /// Files (Landlock): without it, files are not restricted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fs: Option<FsRules>,
    /// Network: without it, not restricted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<Network>,
    /// `RLIMIT_DATA` of each process, MiB.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_mb: Option<u64>,
    /// `RLIMIT_NPROC`: processes (and threads) alive at once in the sandbox.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub processes: Option<u64>,
    /// `RLIMIT_CPU` of each process, seconds of CPU time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_seconds: Option<u64>,
    /// Run the server as this user (a name, or a numeric uid); the gateway must run as root.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
}

/// The folders and files a sandboxed server may use; everything else is refused.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct FsRules {
    /// Read, list and execute beneath each.
    #[serde(default)]
    pub read: Vec<PathBuf>,
    /// All of that, and create, write, truncate, rename and remove beneath each.
    #[serde(default)]
    pub write: Vec<PathBuf>,
}

/// Where a sandboxed server may connect.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Network {
    /// A new network namespace with no interface up: nothing is reachable.
    None,
    /// A new network namespace whose loopback interface is up: the server reaches only itself.
    Loopback,
    /// TCP connect only to these ports (the host part is not enforced), no TCP bind.
    Connect(Vec<HostPort>),
}

/// One `host:port` of `network.connect`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostPort {
    /// As written (`*` for any); documentation only, Landlock filters by port.
    pub host: String,
    /// The TCP port.
    pub port: u16,
}

/// The keys of `sandbox`.
pub(crate) const SANDBOX_KNOWN: &[&str] = &[
    "fs",
    "network",
    "memory_mb",
    "processes",
    "cpu_seconds",
    "user",
];
/// The keys of `sandbox.fs`.
pub(crate) const FS_KNOWN: &[&str] = &["read", "write"];
/// The keys of `sandbox.network` in its object form.
pub(crate) const NETWORK_KNOWN: &[&str] = &["connect"];

/// Read `sandbox` from an upstream's (or hook's) fields; `None` when absent (errors recorded).
pub(crate) fn load(
    f: &mut Fields<'_>,
    home: &Path,
    env: &dyn Fn(&str) -> Option<String>,
) -> Option<Sandbox> {
    let obj = match f.obj.get("sandbox") {
        None | Some(Value::Null) => return None,
        Some(Value::Object(o)) => o,
        Some(_) => {
            f.err("sandbox", "must be an object");
            return None;
        }
    };
    let mut s = Fields {
        file: f.file,
        path: f.field_path("sandbox"),
        obj,
        errors: &mut *f.errors,
    };
    unknown_keys(&mut s, SANDBOX_KNOWN);
    let mut out = Sandbox {
        memory_mb: positive(&mut s, "memory_mb"),
        processes: positive(&mut s, "processes"),
        cpu_seconds: positive(&mut s, "cpu_seconds"),
        ..Sandbox::default()
    };
    out.user = match s.string("user") {
        Some(u) if u.trim().is_empty() => {
            s.err("user", "must be a non-empty string");
            None
        }
        other => other,
    };
    match s.obj.get("fs") {
        None | Some(Value::Null) => {}
        Some(Value::Object(o)) => {
            let mut fs = Fields {
                file: s.file,
                path: s.field_path("fs"),
                obj: o,
                errors: &mut *s.errors,
            };
            unknown_keys(&mut fs, FS_KNOWN);
            let read = paths(&mut fs, "read", home, env);
            let write = paths(&mut fs, "write", home, env);
            out.fs = Some(FsRules { read, write });
        }
        Some(_) => s.err("fs", "must be an object"),
    }
    out.network = match s.obj.get("network") {
        None | Some(Value::Null) => None,
        Some(Value::String(v)) if v == "none" => Some(Network::None),
        Some(Value::String(v)) if v == "loopback" => Some(Network::Loopback),
        Some(Value::Object(o)) => {
            let mut n = Fields {
                file: s.file,
                path: s.field_path("network"),
                obj: o,
                errors: &mut *s.errors,
            };
            unknown_keys(&mut n, NETWORK_KNOWN);
            if !matches!(n.obj.get("connect"), Some(Value::Array(_))) {
                n.err("connect", "must be an array of \"host:port\" strings");
            }
            let mut list = Vec::new();
            for (i, entry) in n.strings("connect").into_iter().enumerate() {
                match host_port(&entry) {
                    Some(hp) => list.push(hp),
                    None => n.err(
                        &format!("connect[{i}]"),
                        format!("{entry:?} is not host:port (a port from 1 to 65535)"),
                    ),
                }
            }
            Some(Network::Connect(list))
        }
        Some(_) => {
            s.err(
                "network",
                "must be \"none\", \"loopback\" or {\"connect\": [\"host:port\", …]}",
            );
            None
        }
    };
    Some(out)
}

/// Every key of `f`'s object that is not `known` is an error naming it.
pub(crate) fn unknown_keys(f: &mut Fields<'_>, known: &[&str]) {
    let unknown: Vec<String> = f
        .obj
        .keys()
        .filter(|k| !known.contains(&k.as_str()))
        .cloned()
        .collect();
    for k in unknown {
        f.err(&k, format!("unknown key (known: {})", known.join(", ")));
    }
}

fn positive(f: &mut Fields<'_>, key: &str) -> Option<u64> {
    match f.obj.get(key) {
        None | Some(Value::Null) => None,
        Some(v) => match v.as_u64() {
            Some(n) if n > 0 => Some(n),
            _ => {
                f.err(key, "must be an integer greater than 0");
                None
            }
        },
    }
}

fn paths(
    f: &mut Fields<'_>,
    key: &str,
    home: &Path,
    env: &dyn Fn(&str) -> Option<String>,
) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for (i, p) in f.strings(key).into_iter().enumerate() {
        let field = format!("{key}[{i}]");
        let expanded = match expand_env(&p, env) {
            Ok(v) => v,
            Err(e) => {
                f.err(&field, e);
                continue;
            }
        };
        let path = if let Some(rest) = expanded.strip_prefix("~/") {
            match env("HOME") {
                Some(h) => Path::new(&h).join(rest),
                None => {
                    f.err(&field, "`~/` needs HOME to be set");
                    continue;
                }
            }
        } else if expanded.trim().is_empty() {
            f.err(&field, "must be a non-empty path");
            continue;
        } else {
            home.join(expanded)
        };
        out.push(path);
    }
    out
}

/// `host:port` (`[v6]:port` too), the port from 1 to 65535.
fn host_port(s: &str) -> Option<HostPort> {
    let (host, port) = s.rsplit_once(':')?;
    let port: u16 = port.parse().ok().filter(|p| *p > 0)?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    if host.is_empty() || host.chars().any(char::is_whitespace) {
        return None;
    }
    Some(HostPort {
        host: host.to_string(),
        port,
    })
}

impl Sandbox {
    /// One line per restriction, as `sluice check` prints them.
    pub fn describe(&self) -> Vec<String> {
        let mut out = Vec::new();
        if let Some(fs) = &self.fs {
            let list = |v: &[PathBuf]| {
                if v.is_empty() {
                    "nothing".to_string()
                } else {
                    v.iter()
                        .map(|p| p.display().to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                }
            };
            out.push(format!("files: read {}", list(&fs.read)));
            out.push(format!("files: write {}", list(&fs.write)));
            out.push(
                "files: Unix sockets by path not confined (Landlock governs them from ABI 9)"
                    .into(),
            );
        }
        match &self.network {
            None => {}
            Some(Network::None) => out.push("network: none (a new network namespace)".into()),
            Some(Network::Loopback) => out.push(
                "network: its own loopback only (a new network namespace, lo up; not the host's)"
                    .into(),
            ),
            Some(Network::Connect(list)) => {
                let mut ports: Vec<u16> = list.iter().map(|h| h.port).collect();
                ports.sort_unstable();
                ports.dedup();
                let ports: Vec<String> = ports.iter().map(u16::to_string).collect();
                out.push(format!(
                    "network: TCP connect to ports {} on any host (Landlock filters by port), no TCP bind; UDP not restricted",
                    if ports.is_empty() { "none".to_string() } else { ports.join(", ") }
                ));
            }
        }
        if let Some(m) = self.memory_mb {
            out.push(format!("memory: {m} MiB of data per process (RLIMIT_DATA)"));
        }
        if let Some(p) = self.processes {
            out.push(format!("processes: {p} at once (RLIMIT_NPROC)"));
        }
        if let Some(c) = self.cpu_seconds {
            out.push(format!("cpu: {c} s per process (RLIMIT_CPU)"));
        }
        if let Some(u) = &self.user {
            out.push(format!("user: {u}"));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Config;

    fn load_upstream(sandbox: Value) -> Result<Sandbox, Vec<String>> {
        let home = std::env::temp_dir().join(format!(
            "sluice-sandbox-{}-{}",
            std::process::id(),
            sandbox.to_string().len()
        ));
        let _ = std::fs::remove_dir_all(&home);
        std::fs::create_dir_all(home.join("mcp")).unwrap();
        let expose =
            serde_json::json!({"upstreams": [{"id": "a", "command": "x", "sandbox": sandbox}]});
        std::fs::write(home.join("mcp/expose.json"), expose.to_string()).unwrap();
        let env = |n: &str| (n == "HOME").then(|| "/home/u".to_string());
        let out = Config::load(&home, &env)
            .map(|(c, _)| c.expose.upstreams[0].sandbox.clone().unwrap())
            .map_err(|e| e.0.iter().map(|e| e.to_string()).collect());
        let _ = std::fs::remove_dir_all(&home);
        out
    }

    #[test]
    fn a_sandbox_loads_with_its_paths_made_absolute() {
        let s = load_upstream(serde_json::json!({
            "fs": {"read": ["/usr", "~/.npm", "data"], "write": ["/tmp/x"]},
            "network": {"connect": ["*:443", "[::1]:5432"]},
            "memory_mb": 256, "processes": 32, "cpu_seconds": 10, "user": "nobody"
        }))
        .unwrap();
        let fs = s.fs.as_ref().unwrap();
        assert_eq!(fs.read[0], PathBuf::from("/usr"));
        assert_eq!(fs.read[1], PathBuf::from("/home/u/.npm"));
        assert!(fs.read[2].is_absolute() && fs.read[2].ends_with("data"));
        assert_eq!(
            s.network,
            Some(Network::Connect(vec![
                HostPort {
                    host: "*".into(),
                    port: 443
                },
                HostPort {
                    host: "::1".into(),
                    port: 5432
                }
            ]))
        );
        assert_eq!(
            (s.memory_mb, s.processes, s.cpu_seconds),
            (Some(256), Some(32), Some(10))
        );
        // It travels to the launcher as JSON and back unchanged.
        let text = serde_json::to_string(&s).unwrap();
        assert_eq!(serde_json::from_str::<Sandbox>(&text).unwrap(), s);
    }

    #[test]
    fn a_misspelt_or_bad_restriction_is_an_error() {
        let e = load_upstream(serde_json::json!({"netwrok": "none"})).unwrap_err();
        assert!(e[0].ends_with("upstreams[0].sandbox.netwrok: unknown key (known: fs, network, memory_mb, processes, cpu_seconds, user)"), "{e:?}");
        let e = load_upstream(serde_json::json!({"network": "off"})).unwrap_err();
        assert!(e[0].ends_with("upstreams[0].sandbox.network: must be \"none\", \"loopback\" or {\"connect\": [\"host:port\", …]}"), "{e:?}");
        let e = load_upstream(serde_json::json!({"network": {"connect": ["example.com"]}}))
            .unwrap_err();
        assert!(e[0].ends_with("upstreams[0].sandbox.network.connect[0]: \"example.com\" is not host:port (a port from 1 to 65535)"), "{e:?}");
        let e = load_upstream(serde_json::json!({"memory_mb": 0})).unwrap_err();
        assert!(
            e[0].ends_with("upstreams[0].sandbox.memory_mb: must be an integer greater than 0"),
            "{e:?}"
        );
        let e = load_upstream(serde_json::json!({"fs": {"raed": []}})).unwrap_err();
        assert!(
            e[0].ends_with("upstreams[0].sandbox.fs.raed: unknown key (known: read, write)"),
            "{e:?}"
        );
    }
}
