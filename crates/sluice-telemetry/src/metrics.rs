//! The metrics: counters and histograms fed by typed [`Exchange`]s, the Prometheus text of
//! `/metrics` (format 0.0.4), the recent-traffic ring and the per-second series the admin
//! page's Overview draws. The gauges only the server knows (sessions, upstreams, tools,
//! reloads) come in as a [`Gauges`] value at render time.
//!
//! The exposition is written by hand, not with `prometheus-client` (0.26, the newest, builds on
//! our rustc), because its text output cannot keep `/metrics` identical: (1) histogram `le`
//! labels are formatted like Go's `%g`, so the hook buckets `0.00001` and `0.00005` become
//! `le="1e-05"` and `le="5e-05"`; (2) float values go through `dtoa`, so a zero `_sum` reads
//! `0.0`, not `0`; (3) a `Family` keeps its series in a `HashMap`, so their order changes from
//! one scrape to the next instead of being sorted by label values; (4) a metric with no series
//! yet loses its `# HELP`/`# TYPE` lines. Its OpenMetrics encoder differs more (`# TYPE
//! sluice_calls counter` without `_total`, a closing `# EOF`). (1) and (2) happen inside its
//! `encode_histogram`, out of reach of a custom metric type.

use crate::exchange::Exchange;
use crate::exposition::{esc, hist, Hist};
use parking_lot::Mutex;
use serde_json::{json, Value};
use std::collections::{BTreeMap, VecDeque};
use std::fmt::Write;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

/// Upper bounds (seconds) of the call latency histogram.
pub const CALL_BUCKETS: &[f64] = &[
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
    60.0,
];
/// Upper bounds (seconds) of the hook duration histogram.
pub const HOOK_BUCKETS: &[f64] = &[
    0.00001, 0.00005, 0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0,
];
/// Events kept for the page's Live traffic view.
pub const RECENT: usize = 500;
/// Seconds of per-second series kept.
const SERIES_SECS: u64 = 120;

#[derive(Default)]
struct Store {
    /// (method, upstream, tool, outcome) → count.
    calls: BTreeMap<(String, String, String, String), u64>,
    /// Exchanges served on an endpoint of `mcp/endpoints.json`, by endpoint, method and
    /// outcome (none for `/mcp`'s).
    endpoint_calls: BTreeMap<(String, String, String), u64>,
    /// (upstream, tool) → latency.
    latency: BTreeMap<(String, String), Hist>,
    /// (hook, phase, decision) → count.
    hook_decisions: BTreeMap<(String, String, String), u64>,
    /// hook → duration.
    hook_latency: BTreeMap<String, Hist>,
    recent: VecDeque<Arc<Exchange>>,
    /// (unix second, calls, errors).
    series: VecDeque<(u64, u64, u64)>,
    /// (unix second, duration ms) of recent calls, for percentiles.
    durations: VecDeque<(u64, f64)>,
    /// Always 0 since exchanges are counted where they happen (no queue to fall behind);
    /// `sluice_traffic_events_dropped_total` stays for the dashboards that read it.
    dropped: u64,
}

/// The metrics of one gateway (fed by [`Metrics::observe`], exchange by exchange).
#[derive(Default)]
pub struct Metrics {
    store: Mutex<Store>,
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

fn label(v: Option<&str>) -> String {
    v.unwrap_or("").to_string()
}

/// What the server knows and the metrics show as gauges, read at render time.
#[derive(Debug, Clone, Default)]
pub struct Gauges {
    /// Client sessions open now.
    pub sessions_active: usize,
    /// Every configured upstream, in order.
    pub upstreams: Vec<UpstreamGauge>,
    /// Tools clients see in tools/list now.
    pub tools_listed: usize,
    /// Live reloads applied.
    pub reloads_ok: u64,
    /// Live reloads refused.
    pub reloads_failed: u64,
    /// The overload actions taken and the overload state now.
    pub overload: crate::overload::OverloadCounts,
}

/// One upstream's gauges.
#[derive(Debug, Clone)]
pub struct UpstreamGauge {
    /// The upstream id.
    pub id: String,
    /// Is it enabled (a disabled one has no `sluice_upstream_up`)?
    pub enabled: bool,
    /// Is it connected?
    pub up: bool,
    /// Restarts after a failure.
    pub restarts: u64,
}

impl Metrics {
    /// Count one exchange (called by the thread that served it).
    pub fn observe(&self, ev: Arc<Exchange>) {
        let upstream = label(ev.upstream.as_deref());
        let tool = label(ev.tool.as_deref());
        let outcome = ev.outcome.clone();
        let method = ev.method.clone();
        let ms = ev.duration_ms;
        let now = now_secs();
        let mut s = self.store.lock();
        if let Some(endpoint) = &ev.endpoint {
            *s.endpoint_calls
                .entry((endpoint.clone(), method.clone(), outcome.clone()))
                .or_default() += 1;
        }
        *s.calls
            .entry((method, upstream.clone(), tool.clone(), outcome.clone()))
            .or_default() += 1;
        s.latency
            .entry((upstream, tool))
            .or_default()
            .observe(CALL_BUCKETS, ms / 1000.0);
        for h in &ev.hooks {
            *s.hook_decisions
                .entry((h.id.clone(), h.phase.into(), h.decision.into()))
                .or_default() += 1;
            s.hook_latency
                .entry(h.id.clone())
                .or_default()
                .observe(HOOK_BUCKETS, h.us as f64 / 1e6);
        }
        let error = outcome != "ok";
        match s.series.back_mut() {
            Some(last) if last.0 == now => {
                last.1 += 1;
                last.2 += u64::from(error);
            }
            _ => s.series.push_back((now, 1, u64::from(error))),
        }
        while s.series.front().is_some_and(|f| f.0 + SERIES_SECS < now) {
            s.series.pop_front();
        }
        s.durations.push_back((now, ms));
        while s.durations.len() > 10_000 || s.durations.front().is_some_and(|f| f.0 + 60 < now) {
            s.durations.pop_front();
        }
        if s.recent.len() >= RECENT {
            s.recent.pop_front();
        }
        s.recent.push_back(ev);
    }

    /// The most recent exchanges, oldest first.
    pub fn recent(&self) -> Vec<Arc<Exchange>> {
        self.store.lock().recent.iter().cloned().collect()
    }

    /// Totals, rates and the last minute per second (for the Overview page).
    pub fn summary(&self) -> Value {
        let now = now_secs();
        let s = self.store.lock();
        let total: u64 = s.calls.values().sum();
        let errors: u64 = s
            .calls
            .iter()
            .filter(|(k, _)| k.3 != "ok")
            .map(|(_, v)| v)
            .sum();
        let mut calls = vec![0u64; 60];
        let mut errs = vec![0u64; 60];
        for (sec, c, e) in &s.series {
            if *sec + 60 > now && *sec <= now {
                let i = (59 - (now - sec)) as usize;
                calls[i] = *c;
                errs[i] = *e;
            }
        }
        let last_min: u64 = calls.iter().sum();
        let last_min_err: u64 = errs.iter().sum();
        let mut d: Vec<f64> = s
            .durations
            .iter()
            .filter(|(t, _)| t + 60 > now)
            .map(|(_, v)| *v)
            .collect();
        d.sort_by(|a, b| a.total_cmp(b));
        let pct = |p: f64| -> Value {
            if d.is_empty() {
                return Value::Null;
            }
            let i = ((p * d.len() as f64).ceil() as usize).clamp(1, d.len()) - 1;
            json!(d[i])
        };
        json!({
            "calls_total": total,
            "errors_total": errors,
            "calls_per_second": last_min as f64 / 60.0,
            "error_rate": if last_min == 0 { 0.0 } else { last_min_err as f64 / last_min as f64 },
            "p50_ms": pct(0.5),
            "p99_ms": pct(0.99),
            "series": {"calls": calls, "errors": errs},
            "dropped_events": s.dropped,
        })
    }

    /// The Prometheus text exposition of every metric, with the server's `gauges`.
    pub fn render(&self, gauges: &Gauges) -> String {
        let mut o = String::new();
        let s = self.store.lock();
        let _ = writeln!(o, "# HELP sluice_build_info The running Sluice version.");
        let _ = writeln!(o, "# TYPE sluice_build_info gauge");
        let _ = writeln!(
            o,
            "sluice_build_info{{version=\"{}\"}} 1",
            env!("CARGO_PKG_VERSION")
        );

        let _ = writeln!(
            o,
            "# HELP sluice_calls_total Recorded exchanges (tool calls and refusals) by method, upstream, tool and outcome."
        );
        let _ = writeln!(o, "# TYPE sluice_calls_total counter");
        for ((m, u, t, out), v) in &s.calls {
            let _ = writeln!(
                o,
                "sluice_calls_total{{method=\"{}\",upstream=\"{}\",tool=\"{}\",outcome=\"{}\"}} {v}",
                esc(m),
                esc(u),
                esc(t),
                esc(out)
            );
        }
        if !s.endpoint_calls.is_empty() {
            let _ = writeln!(
                o,
                "# HELP sluice_endpoint_calls_total Recorded exchanges served on an endpoint of mcp/endpoints.json (/mcp/<name>), by endpoint, method and outcome."
            );
            let _ = writeln!(o, "# TYPE sluice_endpoint_calls_total counter");
            for ((e, m, out), v) in &s.endpoint_calls {
                let _ = writeln!(
                    o,
                    "sluice_endpoint_calls_total{{endpoint=\"{}\",method=\"{}\",outcome=\"{}\"}} {v}",
                    esc(e),
                    esc(m),
                    esc(out)
                );
            }
        }
        let mut errors: BTreeMap<(&str, &str), u64> = BTreeMap::new();
        for ((_, u, t, out), v) in &s.calls {
            if out != "ok" {
                *errors.entry((u, t)).or_default() += v;
            }
        }
        let _ = writeln!(
            o,
            "# HELP sluice_call_errors_total Exchanges whose outcome was not ok (error, refused, cancelled), by upstream and tool."
        );
        let _ = writeln!(o, "# TYPE sluice_call_errors_total counter");
        for ((u, t), v) in &errors {
            let _ = writeln!(
                o,
                "sluice_call_errors_total{{upstream=\"{}\",tool=\"{}\"}} {v}",
                esc(u),
                esc(t)
            );
        }

        let _ = writeln!(
            o,
            "# HELP sluice_call_duration_seconds Time from a request's arrival to its reply, by upstream and tool."
        );
        let _ = writeln!(o, "# TYPE sluice_call_duration_seconds histogram");
        for ((u, t), h) in &s.latency {
            let l = format!("upstream=\"{}\",tool=\"{}\"", esc(u), esc(t));
            hist(&mut o, "sluice_call_duration_seconds", &l, CALL_BUCKETS, h);
        }

        let _ = writeln!(
            o,
            "# HELP sluice_hook_decisions_total Hook decisions by hook id, phase and decision."
        );
        let _ = writeln!(o, "# TYPE sluice_hook_decisions_total counter");
        for ((id, p, d), v) in &s.hook_decisions {
            let _ = writeln!(
                o,
                "sluice_hook_decisions_total{{hook=\"{}\",phase=\"{}\",decision=\"{}\"}} {v}",
                esc(id),
                esc(p),
                esc(d)
            );
        }
        let _ = writeln!(
            o,
            "# HELP sluice_hook_duration_seconds How long each hook took per event, by hook id."
        );
        let _ = writeln!(o, "# TYPE sluice_hook_duration_seconds histogram");
        for (id, h) in &s.hook_latency {
            let l = format!("hook=\"{}\"", esc(id));
            hist(&mut o, "sluice_hook_duration_seconds", &l, HOOK_BUCKETS, h);
        }
        let _ = writeln!(
            o,
            "# HELP sluice_traffic_events_dropped_total Events the metrics missed because they fell behind."
        );
        let _ = writeln!(o, "# TYPE sluice_traffic_events_dropped_total counter");
        let _ = writeln!(o, "sluice_traffic_events_dropped_total {}", s.dropped);
        drop(s);

        let _ = writeln!(o, "# HELP sluice_sessions_active Client sessions open now.");
        let _ = writeln!(o, "# TYPE sluice_sessions_active gauge");
        let _ = writeln!(o, "sluice_sessions_active {}", gauges.sessions_active);

        let _ = writeln!(
            o,
            "# HELP sluice_upstream_up 1 when the upstream is connected, 0 otherwise (disabled ones are not listed)."
        );
        let _ = writeln!(o, "# TYPE sluice_upstream_up gauge");
        for u in gauges.upstreams.iter().filter(|u| u.enabled) {
            let up = u8::from(u.up);
            let _ = writeln!(o, "sluice_upstream_up{{upstream=\"{}\"}} {up}", esc(&u.id));
        }
        let _ = writeln!(
            o,
            "# HELP sluice_upstream_restarts_total Restarts of each upstream after a failure."
        );
        let _ = writeln!(o, "# TYPE sluice_upstream_restarts_total counter");
        for u in &gauges.upstreams {
            let _ = writeln!(
                o,
                "sluice_upstream_restarts_total{{upstream=\"{}\"}} {}",
                esc(&u.id),
                u.restarts
            );
        }
        let _ = writeln!(
            o,
            "# HELP sluice_tools_listed Tools clients see in tools/list now."
        );
        let _ = writeln!(o, "# TYPE sluice_tools_listed gauge");
        let _ = writeln!(o, "sluice_tools_listed {}", gauges.tools_listed);
        let _ = writeln!(
            o,
            "# HELP sluice_reloads_total Live reloads of the configuration tree by result."
        );
        let _ = writeln!(o, "# TYPE sluice_reloads_total counter");
        let _ = writeln!(
            o,
            "sluice_reloads_total{{result=\"ok\"}} {}",
            gauges.reloads_ok
        );
        let _ = writeln!(
            o,
            "sluice_reloads_total{{result=\"failed\"}} {}",
            gauges.reloads_failed
        );
        gauges.overload.render(&mut o);
        crate::mcp_metrics::global().render(&mut o);
        o
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exchange::HookLine;

    fn exchange(outcome: &str, hook: &str, us: u64) -> Arc<Exchange> {
        Arc::new(Exchange {
            time: String::new(),
            session: "s".into(),
            client: None,
            principal: None,
            method: "tools/call".into(),
            tool: Some("fx_echo".into()),
            upstream: Some("fx".into()),
            duration_ms: 2.0,
            outcome: outcome.into(),
            error: None,
            explain_reason: None,
            controls: Default::default(),
            endpoint: None,
            hooks: vec![HookLine {
                id: hook.into(),
                phase: "request",
                decision: "pass",
                reason: None,
                us,
            }],
            task: None,
        })
    }

    #[test]
    fn counts_events_and_hook_decisions() {
        let m = Metrics::default();
        for outcome in ["ok", "ok", "refused"] {
            m.observe(exchange(outcome, "h\"1", 20));
        }
        let s = m.store.lock();
        assert_eq!(
            s.calls[&(
                "tools/call".into(),
                "fx".into(),
                "fx_echo".into(),
                "ok".into()
            )],
            2
        );
        assert_eq!(s.hook_decisions.values().sum::<u64>(), 3);
        let h = &s.latency[&("fx".into(), "fx_echo".into())];
        assert_eq!((h.count, h.counts[2], h.counts[1]), (3, 3, 0));
        drop(s);
        let sum = m.summary();
        assert_eq!(sum["calls_total"], json!(3));
        assert_eq!(sum["errors_total"], json!(1));
        assert_eq!(sum["p50_ms"], json!(2.0));
        assert_eq!(esc("a\"b\\c"), "a\\\"b\\\\c");
        assert_eq!(m.recent().len(), 3);
    }

    /// The exposition, line for line (the e2e tests and scrapers read these exact lines).
    #[test]
    fn renders_the_prometheus_text() {
        let m = Metrics::default();
        m.observe(exchange("ok", "watch", 0));
        m.observe(exchange("refused", "watch", 20));
        let text = m.render(&Gauges {
            sessions_active: 1,
            upstreams: vec![
                UpstreamGauge {
                    id: "fx".into(),
                    enabled: true,
                    up: true,
                    restarts: 2,
                },
                UpstreamGauge {
                    id: "off".into(),
                    enabled: false,
                    up: false,
                    restarts: 0,
                },
            ],
            tools_listed: 4,
            reloads_ok: 3,
            reloads_failed: 1,
            overload: Default::default(),
        });
        let lines: Vec<&str> = text.lines().collect();
        for want in [
            "# HELP sluice_build_info The running Sluice version.",
            "# TYPE sluice_build_info gauge",
            "# TYPE sluice_calls_total counter",
            r#"sluice_calls_total{method="tools/call",upstream="fx",tool="fx_echo",outcome="ok"} 1"#,
            r#"sluice_calls_total{method="tools/call",upstream="fx",tool="fx_echo",outcome="refused"} 1"#,
            r#"sluice_call_errors_total{upstream="fx",tool="fx_echo"} 1"#,
            "# TYPE sluice_call_duration_seconds histogram",
            r#"sluice_call_duration_seconds_bucket{upstream="fx",tool="fx_echo",le="0.0005"} 0"#,
            r#"sluice_call_duration_seconds_bucket{upstream="fx",tool="fx_echo",le="1"} 2"#,
            r#"sluice_call_duration_seconds_bucket{upstream="fx",tool="fx_echo",le="+Inf"} 2"#,
            r#"sluice_call_duration_seconds_sum{upstream="fx",tool="fx_echo"} 0.004"#,
            r#"sluice_call_duration_seconds_count{upstream="fx",tool="fx_echo"} 2"#,
            r#"sluice_hook_decisions_total{hook="watch",phase="request",decision="pass"} 2"#,
            r#"sluice_hook_duration_seconds_bucket{hook="watch",le="0.00001"} 1"#,
            r#"sluice_hook_duration_seconds_bucket{hook="watch",le="0.00005"} 2"#,
            r#"sluice_hook_duration_seconds_sum{hook="watch"} 0.00002"#,
            "sluice_traffic_events_dropped_total 0",
            "sluice_sessions_active 1",
            r#"sluice_upstream_up{upstream="fx"} 1"#,
            r#"sluice_upstream_restarts_total{upstream="fx"} 2"#,
            r#"sluice_upstream_restarts_total{upstream="off"} 0"#,
            "sluice_tools_listed 4",
            r#"sluice_reloads_total{result="ok"} 3"#,
            r#"sluice_reloads_total{result="failed"} 1"#,
        ] {
            assert!(lines.contains(&want), "missing {want:?} in\n{text}");
        }
        assert!(!text.contains(r#"sluice_upstream_up{upstream="off"}"#));
        assert_eq!(text.lines().filter(|l| l.starts_with("# HELP")).count(), 15);
        assert!(text.ends_with("sluice_overload_active 0\n"));
    }
}
