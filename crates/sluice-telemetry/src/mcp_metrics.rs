//! The MCP duration histograms of OpenTelemetry's semantic conventions
//! (`mcp.server.operation.duration`, `mcp.client.operation.duration`, unit `s`), in their
//! Prometheus form beside Sluice's own names on `/metrics`.
//!
//! The Prometheus names follow OpenTelemetry's Prometheus compatibility rules: dots become
//! underscores and the unit `s` becomes the suffix `_seconds` (`mcp_server_operation_duration_seconds`);
//! attribute keys become label names the same way (`mcp.method.name` → `mcp_method_name`).
//! Buckets are the spec's advisory `ExplicitBucketBoundaries` ([`OPERATION_BUCKETS`]).
//!
//! The gateway records into one process-wide registry ([`global`]), as an OpenTelemetry SDK
//! records into its global meter provider: requests are handled far from where `/metrics` is
//! rendered. That registry records only once something can read it
//! ([`McpMetrics::set_recording`]: the admin listener, which serves `/metrics`); without it a
//! call measures nothing. A family appears once it has a series.

use crate::exposition::{esc, hist, Hist};
use parking_lot::Mutex;
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

/// The advisory bucket boundaries (seconds) of both operation-duration histograms.
pub const OPERATION_BUCKETS: &[f64] = &[
    0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0,
];

/// Which side of an operation the gateway measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// A request a client sent the gateway (`mcp.server.operation.duration`).
    Server,
    /// A request the gateway sent an upstream (`mcp.client.operation.duration`).
    Client,
}

/// One series' labels: OpenTelemetry attribute keys and values, in the order they are written.
pub type Labels = Vec<(&'static str, String)>;

/// The series of one histogram, found by a hash of their labels: an observation borrows its
/// labels and copies them only for a new series.
type Family = BTreeMap<u64, Vec<(Labels, Hist)>>;

/// One thread's series of both histograms.
#[derive(Default)]
struct Shard {
    server: Mutex<Family>,
    client: Mutex<Family>,
}

impl Shard {
    fn family(&self, side: Side) -> &Mutex<Family> {
        match side {
            Side::Server => &self.server,
            Side::Client => &self.client,
        }
    }
}

/// The MCP operation-duration histograms. Each thread records into a shard of its own (its
/// lock is never contended, and its lines stay in that CPU's cache: every call records one
/// observation, from every serving thread); `/metrics` adds the shards up.
pub struct McpMetrics {
    /// Which registry a thread's shard belongs to (tests make registries of their own).
    id: u64,
    /// Every thread's shard; a thread that ended leaves its counts here.
    shards: Mutex<Vec<Arc<Shard>>>,
    /// For a thread whose thread-locals are already gone (recording while it ends).
    late: Shard,
    /// Observations are kept (else dropped unseen: nothing renders them).
    recording: AtomicBool,
}

impl Default for McpMetrics {
    fn default() -> McpMetrics {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        McpMetrics {
            id: NEXT.fetch_add(1, Ordering::Relaxed),
            shards: Mutex::default(),
            late: Shard::default(),
            recording: AtomicBool::new(true),
        }
    }
}

thread_local! {
    /// This thread's shard of each registry it recorded into, by the registry's id.
    static SHARDS: RefCell<Vec<(u64, Arc<Shard>)>> = const { RefCell::new(Vec::new()) };
}

/// The hash a series is found by: foldhash over the label text, with a fixed seed (a few short
/// strings; SipHash's or a byte-at-a-time hash's cost would be most of an observation). Series
/// with equal hashes are told apart by their labels.
fn hash_of(labels: &[(&'static str, &str)]) -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = foldhash::fast::FixedState::with_seed(0x5eed).build_hasher();
    for (k, v) in labels {
        h.write(k.as_bytes());
        h.write_u8(0xfe);
        h.write(v.as_bytes());
        h.write_u8(0xff);
    }
    h.finish()
}

/// The process-wide registry the gateway records into and `/metrics` renders. It records
/// nothing until [`McpMetrics::set_recording`] turns it on.
pub fn global() -> &'static McpMetrics {
    static GLOBAL: OnceLock<McpMetrics> = OnceLock::new();
    GLOBAL.get_or_init(|| {
        let m = McpMetrics::default();
        m.set_recording(false);
        m
    })
}

/// An OpenTelemetry attribute key as a Prometheus label name.
fn label_name(key: &str) -> String {
    key.chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect()
}

impl McpMetrics {
    /// Keep observations from now on (`true`), or drop them (`false`). A registry of its own
    /// records from the start; [`global`] from when the admin listener starts.
    pub fn set_recording(&self, on: bool) {
        self.recording.store(on, Ordering::Relaxed);
    }

    /// Are observations kept? A call measures nothing when they are not.
    pub fn is_recording(&self) -> bool {
        self.recording.load(Ordering::Relaxed)
    }

    /// Record one operation of `secs` seconds (dropped when not recording).
    pub fn observe(&self, side: Side, labels: &[(&'static str, &str)], secs: f64) {
        if !self.is_recording() {
            return;
        }
        let recorded = SHARDS.try_with(|mine| {
            if let Some((_, shard)) = mine.borrow().iter().find(|(id, _)| *id == self.id) {
                return Self::record(shard.family(side), labels, secs);
            }
            let shard = Arc::new(Shard::default());
            self.shards.lock().push(shard.clone());
            Self::record(shard.family(side), labels, secs);
            mine.borrow_mut().push((self.id, shard));
        });
        if recorded.is_err() {
            Self::record(self.late.family(side), labels, secs);
        }
    }

    fn record(map: &Mutex<Family>, labels: &[(&'static str, &str)], secs: f64) {
        let key = hash_of(labels);
        let same = |l: &Labels| {
            l.len() == labels.len() && l.iter().zip(labels).all(|(a, b)| a.0 == b.0 && a.1 == b.1)
        };
        let mut map = map.lock();
        let series = map.entry(key).or_default();
        let at = match series.iter().position(|(l, _)| same(l)) {
            Some(at) => at,
            None => {
                let owned = labels.iter().map(|(k, v)| (*k, v.to_string())).collect();
                series.push((owned, Hist::default()));
                series.len() - 1
            }
        };
        series[at].1.observe(OPERATION_BUCKETS, secs);
    }

    /// Append the Prometheus text of each family that has a series.
    pub fn render(&self, o: &mut String) {
        for (side, name, help) in [
            (
                Side::Server,
                "mcp_server_operation_duration_seconds",
                "MCP request or notification duration as observed on the receiver from the time it was received until the result or ack is sent (OpenTelemetry mcp.server.operation.duration).",
            ),
            (
                Side::Client,
                "mcp_client_operation_duration_seconds",
                "The duration of the MCP request or notification as observed on the sender from the time it was sent until the response or ack is received (OpenTelemetry mcp.client.operation.duration).",
            ),
        ] {
            // Every thread's series added up, in label order (whatever their hashes).
            let mut all: BTreeMap<Labels, Hist> = BTreeMap::new();
            let shards = self.shards.lock().clone();
            for shard in shards.iter().map(|s| &**s).chain([&self.late]) {
                for (labels, h) in shard.family(side).lock().values().flatten() {
                    all.entry(labels.clone()).or_default().add(h);
                }
            }
            if all.is_empty() {
                continue;
            }
            let _ = writeln!(o, "# HELP {name} {help}");
            let _ = writeln!(o, "# TYPE {name} histogram");
            for (labels, h) in &all {
                let l = labels
                    .iter()
                    .map(|(k, v)| format!("{}=\"{}\"", label_name(k), esc(v)))
                    .collect::<Vec<_>>()
                    .join(",");
                hist(o, name, &l, OPERATION_BUCKETS, h);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every line of `want` is a whole line of the rendered text `o`.
    fn assert_lines(o: &str, want: &[String]) {
        for w in want {
            assert!(o.lines().any(|l| l == w), "missing {w:?} in\n{o}");
        }
    }

    #[test]
    fn renders_the_otel_histograms_in_their_prometheus_form() {
        let m = McpMetrics::default();
        let mut o = String::new();
        m.render(&mut o);
        assert_eq!(o, "", "no series, no family");
        let call = [
            ("mcp.method.name", "tools/call"),
            ("gen_ai.operation.name", "execute_tool"),
            ("gen_ai.tool.name", "fx_echo"),
            ("network.transport", "tcp"),
        ];
        m.observe(Side::Server, &call, 0.015);
        m.observe(Side::Server, &call, 0.5);
        let failed = [
            ("mcp.method.name", "tools/call"),
            ("error.type", "-32602"),
            ("rpc.response.status_code", "-32602"),
        ];
        m.observe(Side::Server, &failed, 0.001);
        m.observe(
            Side::Client,
            &[
                ("mcp.method.name", "initialize"),
                ("server.address", "127.0.0.1"),
                ("server.port", "8080"),
            ],
            400.0,
        );
        m.render(&mut o);
        let l = r#"mcp_method_name="tools/call",gen_ai_operation_name="execute_tool",gen_ai_tool_name="fx_echo",network_transport="tcp""#;
        assert_lines(&o, &[
            "# TYPE mcp_server_operation_duration_seconds histogram".to_string(),
            format!(r#"mcp_server_operation_duration_seconds_bucket{{{l},le="0.01"}} 0"#),
            format!(r#"mcp_server_operation_duration_seconds_bucket{{{l},le="0.02"}} 1"#),
            format!(r#"mcp_server_operation_duration_seconds_bucket{{{l},le="0.5"}} 2"#),
            format!(r#"mcp_server_operation_duration_seconds_bucket{{{l},le="300"}} 2"#),
            format!(r#"mcp_server_operation_duration_seconds_bucket{{{l},le="+Inf"}} 2"#),
            format!(r#"mcp_server_operation_duration_seconds_sum{{{l}}} 0.515"#),
            format!(r#"mcp_server_operation_duration_seconds_count{{{l}}} 2"#),
            r#"mcp_server_operation_duration_seconds_count{mcp_method_name="tools/call",error_type="-32602",rpc_response_status_code="-32602"} 1"#.to_string(),
            "# TYPE mcp_client_operation_duration_seconds histogram".to_string(),
            r#"mcp_client_operation_duration_seconds_bucket{mcp_method_name="initialize",server_address="127.0.0.1",server_port="8080",le="300"} 0"#.to_string(),
            r#"mcp_client_operation_duration_seconds_bucket{mcp_method_name="initialize",server_address="127.0.0.1",server_port="8080",le="+Inf"} 1"#.to_string(),
        ]);
        assert_eq!(o.lines().filter(|l| l.starts_with("# HELP")).count(), 2);
    }

    #[test]
    fn observations_are_kept_only_while_recording() {
        let m = McpMetrics::default();
        assert!(
            m.is_recording(),
            "a registry of its own records from the start"
        );
        let call = [("mcp.method.name", "tools/call")];
        m.set_recording(false);
        m.observe(Side::Client, &call, 0.5);
        let mut o = String::new();
        m.render(&mut o);
        assert_eq!(o, "", "dropped while not recording");
        m.set_recording(true);
        m.observe(Side::Client, &call, 0.25);
        m.render(&mut o);
        assert_lines(
            &o,
            &[
                r#"mcp_client_operation_duration_seconds_count{mcp_method_name="tools/call"} 1"#
                    .to_string(),
                r#"mcp_client_operation_duration_seconds_sum{mcp_method_name="tools/call"} 0.25"#
                    .to_string(),
            ],
        );
        assert!(
            !global().is_recording(),
            "the global registry waits to be turned on"
        );
    }

    #[test]
    fn each_thread_records_apart_and_the_render_adds_them_up() {
        let m = McpMetrics::default();
        let call = [("mcp.method.name", "tools/call")];
        m.observe(Side::Server, &call, 0.015);
        std::thread::scope(|s| {
            for secs in [0.03, 7.0] {
                let m = &m;
                s.spawn(move || m.observe(Side::Server, &call, secs));
            }
        });
        assert_eq!(m.shards.lock().len(), 3, "a shard per thread that recorded");
        // Another registry on the same thread keeps its own counts.
        let other = McpMetrics::default();
        other.observe(Side::Server, &call, 100.0);
        let mut o = String::new();
        m.render(&mut o);
        let n = "mcp_server_operation_duration_seconds";
        let l = r#"mcp_method_name="tools/call""#;
        assert_lines(
            &o,
            &[
                format!(r#"{n}_bucket{{{l},le="0.02"}} 1"#),
                format!(r#"{n}_bucket{{{l},le="0.05"}} 2"#),
                format!(r#"{n}_bucket{{{l},le="5"}} 2"#),
                format!(r#"{n}_bucket{{{l},le="10"}} 3"#),
                format!(r#"{n}_bucket{{{l},le="+Inf"}} 3"#),
                format!(r#"{n}_count{{{l}}} 3"#),
                format!(r#"{n}_sum{{{l}}} 7.045"#),
            ],
        );
        assert_eq!(
            o.matches(&format!("{n}_count")).count(),
            1,
            "one series:\n{o}"
        );
    }

    #[test]
    fn an_observation_made_while_a_thread_ends_is_kept() {
        static M: OnceLock<McpMetrics> = OnceLock::new();
        let m = M.get_or_init(McpMetrics::default);
        // Records from a thread-local's destructor, when the thread's own shard list may be
        // gone already (then it goes to the registry's late shard).
        struct AtExit;
        impl Drop for AtExit {
            fn drop(&mut self) {
                let m = M.get().expect("made before the thread");
                m.observe(Side::Client, &[("mcp.method.name", "ping")], 0.001);
            }
        }
        thread_local! { static AT_EXIT: AtExit = const { AtExit }; }
        std::thread::spawn(|| {
            AT_EXIT.with(|_| ());
            m.observe(Side::Client, &[("mcp.method.name", "ping")], 0.001);
        })
        .join()
        .unwrap();
        let mut o = String::new();
        m.render(&mut o);
        let n = "mcp_client_operation_duration_seconds";
        assert_lines(&o, &[format!(r#"{n}_count{{mcp_method_name="ping"}} 2"#)]);
    }
}
