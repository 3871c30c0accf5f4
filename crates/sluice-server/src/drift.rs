//! Drift of curated tools: the fingerprint (description and schema) of every tool an `expose`
//! entry curates is kept in `mcp/drift.json`; when an upstream changes one after it was
//! accepted, the log says so and `sluice tool list` flags it until `sluice tool accept`.

use serde_json::Value;
use sluice_config::Config;
use sluice_upstream::{Slot, UpstreamLists};
use std::sync::Arc;

/// Record the fingerprints of curated tools and flag the ones whose upstream changed them
/// since they were accepted (`mcp/drift.json`). Writes only when something changed.
pub(crate) fn check(config: &Config, slots: &[Arc<Slot>], lists: &[Option<UpstreamLists>]) {
    if config.expose.expose.is_empty() || !config.home.join("mcp").is_dir() {
        return;
    }
    let mut marks = sluice_config::drift::load(&config.home);
    let mut changed = false;
    for e in config.expose.expose.iter().filter(|e| e.enabled) {
        let Some(pos) = slots.iter().position(|s| s.spec.id == e.upstream) else {
            continue;
        };
        let Some(tool) = lists[pos].as_ref().and_then(|l| {
            l.tools
                .iter()
                .find(|t| t.get("name").and_then(Value::as_str) == Some(e.tool.as_str()))
        }) else {
            continue;
        };
        let now = sluice_config::drift::fingerprint(tool);
        match marks.get_mut(&e.name) {
            None => {
                marks.insert(
                    e.name.clone(),
                    sluice_config::drift::Mark {
                        accepted: now.clone(),
                        current: now,
                    },
                );
                changed = true;
            }
            Some(m) if m.current != now => {
                m.current = now;
                changed = true;
                if m.drifted() {
                    tracing::warn!(tool = %e.name, upstream = %e.upstream, "drift: the upstream changed this curated tool's description or schema; review it and run `sluice tool accept {}`", e.name);
                }
            }
            Some(_) => {}
        }
    }
    if changed {
        if let Err(err) = sluice_config::drift::save(&config.home, &marks) {
            tracing::warn!(
                "cannot write {}: {err}",
                sluice_config::drift::path(&config.home).display()
            );
        }
    }
}
