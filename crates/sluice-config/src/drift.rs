//! Drift of curated tools (`mcp/drift.json`): for each `expose` entry Sluice records a
//! fingerprint of the upstream tool's description and input schema. When the upstream changes
//! them, the tool is flagged (the log, `sluice tool list`) until accepted (`sluice tool accept`).

use crate::store;
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The accepted and the current fingerprint of one curated tool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mark {
    /// What was accepted (first seen, or `sluice tool accept`).
    pub accepted: String,
    /// What the upstream offers now.
    pub current: String,
}

impl Mark {
    /// Has the tool changed since it was accepted?
    pub fn drifted(&self) -> bool {
        self.accepted != self.current
    }
}

/// `mcp/drift.json` under `home`.
pub fn path(home: &Path) -> PathBuf {
    home.join("mcp").join("drift.json")
}

/// The marks by client-facing tool name (a missing or malformed file: none).
pub fn load(home: &Path) -> BTreeMap<String, Mark> {
    let mut out = BTreeMap::new();
    let Ok(text) = std::fs::read_to_string(path(home)) else {
        return out;
    };
    let Ok(v) = serde_json::from_str::<Value>(&text) else {
        return out;
    };
    if let Some(tools) = v.get("tools").and_then(Value::as_object) {
        for (name, m) in tools {
            if let (Some(a), Some(c)) = (
                m.get("accepted").and_then(Value::as_str),
                m.get("current").and_then(Value::as_str),
            ) {
                out.insert(
                    name.clone(),
                    Mark {
                        accepted: a.into(),
                        current: c.into(),
                    },
                );
            }
        }
    }
    out
}

/// Write the marks atomically.
pub fn save(home: &Path, marks: &BTreeMap<String, Mark>) -> std::io::Result<()> {
    let mut tools = Map::new();
    for (name, m) in marks {
        tools.insert(
            name.clone(),
            json!({"accepted": m.accepted, "current": m.current}),
        );
    }
    store::write_json(&path(home), &json!({"version": 1, "tools": tools}))
}

/// The fingerprint of a tool definition: FNV-1a (64 bit) of its description and input schema.
pub fn fingerprint(tool: &Value) -> String {
    let basis = json!({
        "description": tool.get("description").cloned().unwrap_or(Value::Null),
        "inputSchema": tool.get("inputSchema").cloned().unwrap_or(Value::Null),
    })
    .to_string();
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in basis.as_bytes() {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("{h:016x}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fingerprints_follow_description_and_schema_only() {
        let a = json!({"name": "x", "description": "d", "inputSchema": {"type": "object"}});
        let b = json!({"name": "y", "description": "d", "inputSchema": {"type": "object"}, "title": "t"});
        let c = json!({"name": "x", "description": "changed", "inputSchema": {"type": "object"}});
        assert_eq!(fingerprint(&a), fingerprint(&b));
        assert_ne!(fingerprint(&a), fingerprint(&c));
        assert_eq!(fingerprint(&a).len(), 16);
    }
}
