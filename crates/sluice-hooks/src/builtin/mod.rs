//! Builtin hooks: Rust, in process, no I/O on the call path.
//!
//! Request side (onion hooks at their place in the manifest): [`explain`] (seed 000),
//! [`deny`] (tool-name and argument patterns), [`rewrite`] (set, default or remove
//! arguments), [`validate`] (arguments against the tool's inputSchema), [`describe`] (override
//! what `tools/list` says), [`rate_limit`] (token buckets global, per principal and per tool, in
//! memory or in Redis). Response controls ([`Control`]: [`mask`], [`pii`], [`size_cap`])
//! run before every other response hook, so those see what the agent will see.

pub mod deny;
pub mod describe;
pub mod explain;
pub mod mask;
pub mod path;
pub mod pii;
pub mod rate_limit;
pub mod rewrite;
pub mod size_cap;
pub mod validate;

pub use deny::Deny;
pub use describe::Describe;
pub use explain::Explain;
pub use mask::Mask;
pub use pii::Pii;
pub use rate_limit::RateLimit;
pub use rewrite::Rewrite;
pub use size_cap::SizeCap;
pub use validate::Validate;

use crate::decision::Refusal;
use regex::Regex;
use serde_json::{json, Map, Value};
use sluice_config::builtin::is_regex_pattern;
#[cfg(test)]
use sluice_config::BuiltinOptions;
use sluice_config::OptionError;
use sluice_core::Message;

/// A tool-name pattern: a regex matched against the whole name, or a glob (`*` is the only
/// wildcard) when the text has no regex metacharacter but `*`.
#[derive(Debug, Clone)]
pub struct ToolPattern(Regex);

impl ToolPattern {
    /// A regex, full match (`^(?:…)$`).
    pub fn regex(pattern: &str) -> Result<ToolPattern, String> {
        Regex::new(&format!("^(?:{pattern})$"))
            .map(ToolPattern)
            .map_err(|e| regex_error(pattern, &e))
    }

    /// A glob when `pattern` has no regex metacharacter other than `*` (`fx_*`), else a regex.
    pub fn glob_or_regex(pattern: &str) -> Result<ToolPattern, String> {
        if is_regex_pattern(pattern) {
            ToolPattern::regex(pattern)
        } else {
            let re = pattern
                .split('*')
                .map(regex::escape)
                .collect::<Vec<_>>()
                .join(".*");
            ToolPattern::regex(&re)
        }
    }

    /// Does it match the whole name?
    pub fn is_match(&self, name: &str) -> bool {
        self.0.is_match(name)
    }
}

/// `"…" is not a valid regex: <the parser's last line>`.
pub use sluice_config::builtin::regex_error;

/// Regexes (full match) from the string list at `field` (`options.tools`).
pub(crate) fn tool_patterns(
    field: &str,
    patterns: &[String],
) -> Result<Vec<ToolPattern>, OptionError> {
    patterns
        .iter()
        .enumerate()
        .map(|(i, p)| {
            ToolPattern::regex(p).map_err(|e| OptionError::new(format!("{field}[{i}]"), e))
        })
        .collect()
}

/// The JSON paths at `field` (`options.paths`).
pub(crate) fn json_paths(
    field: &str,
    paths: &[String],
) -> Result<Vec<path::JsonPath>, OptionError> {
    paths
        .iter()
        .enumerate()
        .map(|(i, p)| {
            path::JsonPath::parse(p).map_err(|e| OptionError::new(format!("{field}[{i}]"), e))
        })
        .collect()
}

/// A response control: runs before every other response hook (seed 002).
#[derive(Debug, Clone)]
pub enum Control {
    /// Values at paths and under keys → `"***"`.
    Mask(Mask),
    /// Personal data and secrets → typed placeholders.
    Pii(Pii),
    /// The most bytes a result may carry.
    SizeCap(SizeCap),
}

impl Control {
    /// The builtin's name (the key of its counts in the trace).
    pub fn name(&self) -> &'static str {
        match self {
            Control::Mask(_) => "mask",
            Control::Pii(_) => "pii",
            Control::SizeCap(_) => "size-cap",
        }
    }

    /// Apply to a message toward the client, in place: a reply's `result` (or `error`), or the
    /// `params` of a message an upstream starts. Adds what it changed to `counts` (the trace's
    /// `controls`); returns whether the message changed, or the refusal.
    pub fn apply(
        &self,
        tool: Option<&str>,
        msg: &mut Message,
        counts: &mut Map<String, Value>,
    ) -> Result<bool, Refusal> {
        let obj = msg.as_object_mut();
        match self {
            Control::Mask(m) => {
                let n = obj.get_mut("result").map_or(0, |r| m.apply(r));
                add_count(counts, "mask", n);
                Ok(n > 0)
            }
            Control::Pii(p) => {
                if tool.is_some_and(|t| p.allows(t)) {
                    return Ok(false);
                }
                let mut found = pii::Counts::new();
                for key in ["result", "error", "params"] {
                    if let Some(v) = obj.get_mut(key) {
                        p.scanner().redact_tree(v, &mut found);
                    }
                }
                let changed = !found.is_empty();
                if changed {
                    let entry = counts
                        .entry("pii")
                        .or_insert_with(|| Value::Object(Map::new()));
                    if let Some(m) = entry.as_object_mut() {
                        for (kind, n) in found {
                            add_count(m, kind, n);
                        }
                    }
                }
                Ok(changed)
            }
            Control::SizeCap(c) => {
                let Some(result) = obj.get_mut("result") else {
                    return Ok(false);
                };
                match c.apply(tool, result) {
                    Ok(None) => Ok(false),
                    Ok(Some(capped)) => {
                        let entry = counts
                            .entry("size-cap")
                            .or_insert_with(|| json!({"blocks": 0, "bytes": 0}));
                        add_count_in(entry, "blocks", capped.blocks);
                        add_count_in(entry, "bytes", capped.bytes);
                        Ok(true)
                    }
                    Err(r) => {
                        let entry = counts
                            .entry("size-cap")
                            .or_insert_with(|| json!({"blocks": 0, "bytes": 0}));
                        add_count_in(entry, "refused", 1);
                        Err(r)
                    }
                }
            }
        }
    }
}

/// The options of the builtin `name`, parsed as the configuration parses them (for tests).
#[cfg(test)]
pub(crate) fn parsed(name: &str, options: Value) -> BuiltinOptions {
    match BuiltinOptions::parse(name, &options) {
        Some(Ok(o)) => o,
        other => panic!("{name} {options}: {other:?}"),
    }
}

/// Does the configuration refuse these options of the builtin `name`? (For tests.)
#[cfg(test)]
pub(crate) fn rejected(name: &str, options: Value) -> bool {
    matches!(BuiltinOptions::parse(name, &options), Some(Err(_)))
}

fn add_count(m: &mut Map<String, Value>, key: &str, n: u64) {
    if n == 0 {
        return;
    }
    let old = m.get(key).and_then(Value::as_u64).unwrap_or(0);
    m.insert(key.to_string(), json!(old + n));
}

fn add_count_in(v: &mut Value, key: &str, n: u64) {
    if let Some(m) = v.as_object_mut() {
        add_count(m, key, n);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_patterns_are_globs_or_regexes() {
        let g = ToolPattern::glob_or_regex("fx_*").unwrap();
        assert!(g.is_match("fx_echo") && !g.is_match("xfx_echo"));
        let r = ToolPattern::glob_or_regex("crm\\.order\\..*").unwrap();
        assert!(r.is_match("crm.order.status") && !r.is_match("crm.orders"));
        let exact = ToolPattern::glob_or_regex("fx_echo").unwrap();
        assert!(exact.is_match("fx_echo") && !exact.is_match("fx_echo2"));
        assert_eq!(
            ToolPattern::regex("([").unwrap_err(),
            "\"([\" is not a valid regex: unclosed character class"
        );
    }

    fn control(name: &str, o: Value) -> Control {
        match parsed(name, o) {
            BuiltinOptions::Mask(o) => Control::Mask(Mask::from_options(&o).unwrap()),
            BuiltinOptions::Pii(o) => Control::Pii(Pii::from_options(&o).unwrap()),
            BuiltinOptions::SizeCap(o) => Control::SizeCap(SizeCap::from_options(&o).unwrap()),
            other => panic!("{other:?} is not a control"),
        }
    }

    #[test]
    fn controls_count_what_they_change() {
        let mut counts = Map::new();
        let mask = control("mask", json!({"keys": ["token"]}));
        let pii = control("pii", json!({}));
        let cap = control("size-cap", json!({"max_bytes": 10}));
        let mut msg = Message::response(
            json!(1),
            json!({"content": [{"type": "text", "text": "{\"token\":\"abc\",\"mail\":\"a@b.io\"}"}],
                   "structuredContent": {"token": "abc", "mail": "a@b.io"}}),
        );
        assert_eq!(mask.apply(None, &mut msg, &mut counts), Ok(true));
        assert_eq!(pii.apply(None, &mut msg, &mut counts), Ok(true));
        assert_eq!(cap.apply(None, &mut msg, &mut counts), Ok(true));
        assert_eq!(counts["mask"], json!(2));
        assert_eq!(counts["pii"], json!({"EMAIL": 2}));
        assert_eq!(counts["size-cap"]["blocks"], json!(2));
    }
}
