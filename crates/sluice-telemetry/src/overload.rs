//! The overload actions the gateway takes (connections shed at the cap, timeouts shortened,
//! slow bodies cut, refusals per address, per principal and past the memory ceiling, replay
//! buffers dropped): one counter each, written only when an action is taken, and their
//! Prometheus text and JSON for `/metrics` and the admin page.

use serde_json::{json, Value};
use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};

/// One kind of overload action.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// At `max_connections`, the connection idle the longest was closed to let a new one in.
    ShedAtCap,
    /// A connection was closed by the header timeout shortened under overload.
    HeaderTimeoutShortened,
    /// A kept-alive connection was closed by the idle timeout shortened under overload.
    IdleTimeoutShortened,
    /// A POST body arriving slower than `min_body_bytes_per_sec` was cut (408).
    BodyTooSlow,
    /// A connection past `max_connections_per_ip` was closed at once.
    PerIpRefused,
    /// A request forwarded by a trusted proxy, past `max_connections_per_ip` for the address
    /// `X-Forwarded-For` names, was answered 429.
    PerIpForwardedRefused,
    /// A request past `max_inflight_per_principal` was answered -32029.
    InflightRefused,
    /// A new session past `max_memory_mb` was answered 503.
    MemoryRefused,
    /// A kept replay buffer was dropped past `max_memory_mb`.
    ReplayShed,
}

impl Action {
    /// Every action, in the order `/metrics` lists them.
    pub const ALL: [Action; 9] = [
        Action::ShedAtCap,
        Action::HeaderTimeoutShortened,
        Action::IdleTimeoutShortened,
        Action::BodyTooSlow,
        Action::PerIpRefused,
        Action::PerIpForwardedRefused,
        Action::InflightRefused,
        Action::MemoryRefused,
        Action::ReplayShed,
    ];

    /// The `action` label.
    pub fn name(self) -> &'static str {
        match self {
            Action::ShedAtCap => "shed_at_cap",
            Action::HeaderTimeoutShortened => "header_timeout_shortened",
            Action::IdleTimeoutShortened => "idle_timeout_shortened",
            Action::BodyTooSlow => "body_too_slow",
            Action::PerIpRefused => "per_ip_refused",
            Action::PerIpForwardedRefused => "per_ip_forwarded_refused",
            Action::InflightRefused => "inflight_refused",
            Action::MemoryRefused => "memory_refused",
            Action::ReplayShed => "replay_shed",
        }
    }
}

/// The counters of every action (a process has one, in the server's runtime).
#[derive(Debug, Default)]
pub struct OverloadActions {
    counts: [AtomicU64; 9],
}

impl OverloadActions {
    /// Count `n` of `action`.
    pub fn add(&self, action: Action, n: u64) {
        self.counts[action as usize].fetch_add(n, Ordering::Relaxed);
    }

    /// Count one `action`.
    pub fn count(&self, action: Action) {
        self.add(action, 1);
    }

    /// How many of `action` so far.
    pub fn get(&self, action: Action) -> u64 {
        self.counts[action as usize].load(Ordering::Relaxed)
    }

    /// The counts now.
    pub fn snapshot(&self) -> OverloadCounts {
        OverloadCounts {
            counts: Action::ALL.map(|a| self.get(a)),
            ..OverloadCounts::default()
        }
    }
}

/// The overload state at render time: the actions' counts, whether the listener is past its
/// overload threshold, and the resident memory last sampled.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct OverloadCounts {
    /// Each action's count, in [`Action::ALL`]'s order.
    pub counts: [u64; 9],
    /// Open connections on the MCP listener now.
    pub open_connections: u64,
    /// Are the open connections at or past the overload threshold?
    pub active: bool,
    /// Resident memory at the last sample, bytes (None: no ceiling, so not sampled).
    pub resident_bytes: Option<u64>,
    /// Is the resident memory past `max_memory_mb`?
    pub over_memory: bool,
}

impl OverloadCounts {
    /// The Prometheus text of these.
    pub fn render(&self, o: &mut String) {
        let _ = writeln!(
            o,
            "# HELP sluice_overload_actions_total Overload actions taken, by action."
        );
        let _ = writeln!(o, "# TYPE sluice_overload_actions_total counter");
        for (a, n) in Action::ALL.iter().zip(self.counts) {
            let _ = writeln!(
                o,
                "sluice_overload_actions_total{{action=\"{}\"}} {n}",
                a.name()
            );
        }
        let _ = writeln!(
            o,
            "# HELP sluice_connections_open Connections open on the MCP listener now."
        );
        let _ = writeln!(o, "# TYPE sluice_connections_open gauge");
        let _ = writeln!(o, "sluice_connections_open {}", self.open_connections);
        let _ = writeln!(
            o,
            "# HELP sluice_overload_active 1 while the open connections are at or past the overload threshold."
        );
        let _ = writeln!(o, "# TYPE sluice_overload_active gauge");
        let _ = writeln!(o, "sluice_overload_active {}", u8::from(self.active));
        if let Some(rss) = self.resident_bytes {
            let _ = writeln!(
                o,
                "# HELP sluice_memory_resident_bytes Resident memory at the last sample (max_memory_mb set)."
            );
            let _ = writeln!(o, "# TYPE sluice_memory_resident_bytes gauge");
            let _ = writeln!(o, "sluice_memory_resident_bytes {rss}");
            let _ = writeln!(
                o,
                "# HELP sluice_memory_over_ceiling 1 while the resident memory is past max_memory_mb."
            );
            let _ = writeln!(o, "# TYPE sluice_memory_over_ceiling gauge");
            let _ = writeln!(
                o,
                "sluice_memory_over_ceiling {}",
                u8::from(self.over_memory)
            );
        }
    }

    /// The JSON the admin page shows.
    pub fn to_json(&self) -> Value {
        let actions: serde_json::Map<String, Value> = Action::ALL
            .iter()
            .zip(self.counts)
            .map(|(a, n)| (a.name().to_string(), json!(n)))
            .collect();
        json!({
            "actions": actions,
            "open_connections": self.open_connections,
            "active": self.active,
            "resident_bytes": self.resident_bytes,
            "over_memory": self.over_memory,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_and_renders_every_action() {
        let a = OverloadActions::default();
        a.count(Action::ShedAtCap);
        a.add(Action::ReplayShed, 3);
        let mut c = a.snapshot();
        c.open_connections = 12;
        c.active = true;
        let mut o = String::new();
        c.render(&mut o);
        for want in [
            "# TYPE sluice_overload_actions_total counter",
            r#"sluice_overload_actions_total{action="shed_at_cap"} 1"#,
            r#"sluice_overload_actions_total{action="body_too_slow"} 0"#,
            r#"sluice_overload_actions_total{action="replay_shed"} 3"#,
            "sluice_connections_open 12",
            "sluice_overload_active 1",
        ] {
            assert!(o.lines().any(|l| l == want), "missing {want:?} in\n{o}");
        }
        assert!(!o.contains("sluice_memory_resident_bytes"));
        c.resident_bytes = Some(4096);
        let mut o = String::new();
        c.render(&mut o);
        assert!(o.contains("sluice_memory_resident_bytes 4096\n"));
        assert!(o.contains("sluice_memory_over_ceiling 0\n"));
        assert_eq!(c.to_json()["actions"]["replay_shed"], json!(3));
    }
}
