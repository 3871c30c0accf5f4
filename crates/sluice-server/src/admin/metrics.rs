//! The server's half of the metrics: the gauges only the running gateway knows (sessions,
//! upstreams, tools listed, reloads, the overload state and actions), read at scrape time for
//! [`sluice_telemetry::Metrics::render`], which counts the traffic and writes `/metrics`.

use crate::state::State;
use sluice_telemetry::{Gauges, UpstreamGauge};
use sluice_upstream::Status;
use std::sync::atomic::Ordering;

/// The gauges of `st` now.
pub(crate) fn gauges(st: &State) -> Gauges {
    let snap = st.snapshot();
    Gauges {
        sessions_active: st.rt.sessions().len(),
        upstreams: snap
            .slots
            .iter()
            .map(|slot| UpstreamGauge {
                id: slot.spec.id.clone(),
                enabled: slot.spec.enabled,
                up: slot.status() == Status::Up,
                restarts: slot.state.lock().restarts,
            })
            .collect(),
        tools_listed: snap.catalog.tools().len(),
        reloads_ok: st.rt.reloads().ok.load(Ordering::Relaxed),
        reloads_failed: st.rt.reloads().failed.load(Ordering::Relaxed),
        overload: st.rt.overload().counts(st.snapshot().settings()),
    }
}
