//! The `skills[]` of `mcp/expose.json`: a skill of an upstream (the Skills extension) served
//! under a path the tree chooses, or not served at all — the `expose` entries' rename, for
//! skills. The path's last segment stays the skill's name (it names the skill, and its
//! `SKILL.md` says it).

use crate::error::ConfigError;
use crate::fields::entry;
use serde_json::Value;
use std::collections::HashSet;
use std::path::Path;

/// One skill of an upstream, served under another path (or not at all).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkillEntry {
    /// An `upstreams[].id`.
    pub upstream: String,
    /// The skill's path at the upstream (its `SKILL.md` URI without `skill://` and
    /// `/SKILL.md`), e.g. `acme/billing/refunds`.
    pub skill: String,
    /// The path clients see it under (`skill://<path>/SKILL.md`); `None`: where it would be
    /// without the entry (under the upstream's prefix).
    pub path: Option<String>,
    /// Served at all.
    pub enabled: bool,
}

/// A skill path: segments of `A-Z a-z 0-9 - . _ ~` (not `.` or `..`), separated by `/` (at
/// most 256 characters).
pub fn valid_path(p: &str) -> bool {
    let segment = |s: &str| {
        !s.is_empty()
            && s != "."
            && s != ".."
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || "-._~".contains(c))
    };
    !p.is_empty() && p.len() <= 256 && p.split('/').all(segment)
}

/// Read `skills[]` (each upstream an id of `ids`).
pub(crate) fn load(
    file: &Path,
    items: &[Value],
    ids: &HashSet<String>,
    errors: &mut Vec<ConfigError>,
) -> Vec<SkillEntry> {
    let mut out = Vec::new();
    let mut keys = HashSet::new();
    let mut paths = HashSet::new();
    for (i, e) in items.iter().enumerate() {
        let Some(mut f) = entry(file, "skills", i, e, errors) else {
            continue;
        };
        let upstream = f.required_string("upstream");
        if !upstream.is_empty() && !ids.contains(&upstream) {
            f.err("upstream", format!("no upstream has the id {upstream:?}"));
        }
        let skill = f.required_string("skill");
        if !skill.is_empty() && !valid_path(&skill) {
            f.err(
                "skill",
                format!("{skill:?} is not a skill path (segments of A-Z a-z 0-9 - . _ ~, not . or .., separated by /)"),
            );
        }
        if !skill.is_empty() && !keys.insert((upstream.clone(), skill.clone())) {
            f.err(
                "skill",
                format!("duplicate skills entry for {upstream:?} / {skill:?}"),
            );
        }
        let path = f.string("as");
        let enabled = f.bool("enabled", true);
        if let Some(p) = &path {
            let name = skill.rsplit('/').next().unwrap_or("");
            if !valid_path(p) {
                f.err(
                    "as",
                    format!("{p:?} is not a skill path (segments of A-Z a-z 0-9 - . _ ~, not . or .., separated by /)"),
                );
            } else if p.rsplit('/').next() != Some(name) {
                f.err(
                    "as",
                    format!("{p:?} must end in the skill's name {name:?} (it names the skill, as its SKILL.md does)"),
                );
            } else if enabled && !paths.insert(p.clone()) {
                f.err("as", format!("two enabled skills entries both serve {p:?}"));
            }
        }
        out.push(SkillEntry {
            upstream,
            skill,
            path,
            enabled,
        });
    }
    out
}
