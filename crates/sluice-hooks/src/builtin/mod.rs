//! Builtin hooks: Rust, in process, no I/O on the call path.
//!
//! Request side (onion hooks at their place in the manifest): [`explain`] (Civic's explain hook),
//! [`deny`] (tool-name and argument patterns), [`rewrite`] (set, default or remove
//! arguments), [`validate`] (arguments against the tool's inputSchema), [`describe`] (override
//! what `tools/list` says), [`rate_limit`] (token buckets global, per principal and per tool, in
//! memory or in Redis), [`tool_scan`] (tool poisoning in lists and results). Response controls ([`Control`]: [`mask`], [`pii`], [`size_cap`])
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
pub mod tool_scan;
pub mod validate;

pub use deny::Deny;
pub use describe::Describe;
pub use explain::Explain;
pub use mask::Mask;
pub use pii::Pii;
pub use rate_limit::RateLimit;
pub use rewrite::Rewrite;
pub use size_cap::SizeCap;
pub use tool_scan::ToolScan;
pub use validate::Validate;

use crate::ctx::{Ctx, Trace};
use crate::decision::{Decision, HookFailure, Refusal};
use crate::event::{HookEvent, Phase};
use regex::Regex;
use serde_json::{json, Map, Value};
use sluice_config::builtin::is_regex_pattern;
use sluice_config::{BuiltinOptions, OptionError};
use sluice_core::Message;
use std::time::Duration;

/// A builtin, built from its options. Each says which phases it runs in and which messages it
/// sees, so the chain holds no builtin's policy.
#[derive(Debug)]
pub enum Builtin {
    /// [`explain`].
    Explain(Explain),
    /// [`deny`].
    Deny(Deny),
    /// [`rewrite`].
    Rewrite(Rewrite),
    /// [`validate`].
    Validate(Validate),
    /// [`describe`].
    Describe(Describe),
    /// [`rate_limit`] (its `methods`, default `tools/call`).
    RateLimit(RateLimit),
    /// A response control: run in the chain's controls stage, never as an onion hook.
    Control(Control),
    /// [`tool_scan`].
    ToolScan(ToolScan),
}

/// The phases a builtin runs in, whatever the hook's event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Phases {
    /// The request phase.
    pub request: bool,
    /// The response phase.
    pub response: bool,
}

/// Which messages a builtin sees (in a phase it runs in).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Selection {
    /// The hook's `methods` and `matcher` decide.
    Hook,
    /// The builtin decides the method; the hook's `matcher` narrows the tools.
    Method(bool),
    /// The builtin decides alone; the `matcher` does not apply.
    Fixed(bool),
}

impl Builtin {
    /// Build from its options (`timeout`: the hook's, which bounds the rate-limit builtin's
    /// Redis calls).
    pub fn build(options: &BuiltinOptions, timeout: Duration) -> Result<Builtin, OptionError> {
        Ok(match options {
            BuiltinOptions::Explain(o) => Builtin::Explain(Explain::from_options(o)),
            BuiltinOptions::Deny(o) => Builtin::Deny(Deny::from_options(o)?),
            BuiltinOptions::Rewrite(o) => Builtin::Rewrite(Rewrite::from_options(o)?),
            BuiltinOptions::Validate => Builtin::Validate(Validate::default()),
            BuiltinOptions::Describe(o) => Builtin::Describe(Describe::from_options(o)?),
            BuiltinOptions::RateLimit(o) => {
                Builtin::RateLimit(RateLimit::from_options(o, timeout)?)
            }
            BuiltinOptions::Mask(o) => Builtin::Control(Control::Mask(Mask::from_options(o)?)),
            BuiltinOptions::Pii(o) => Builtin::Control(Control::Pii(Pii::from_options(o)?)),
            BuiltinOptions::SizeCap(o) => {
                Builtin::Control(Control::SizeCap(SizeCap::from_options(o)?))
            }
            BuiltinOptions::ToolScan(o) => Builtin::ToolScan(ToolScan::from_options(o)?),
        })
    }

    /// The phases it runs in.
    pub fn phases(&self) -> Phases {
        let (request, response) = match self {
            Builtin::Explain(_) => (true, true),
            Builtin::Deny(_)
            | Builtin::Rewrite(_)
            | Builtin::Validate(_)
            | Builtin::RateLimit(_) => (true, false),
            Builtin::Describe(_) | Builtin::Control(_) => (false, true),
            Builtin::ToolScan(s) => (s.request_phase(), true),
        };
        Phases { request, response }
    }

    /// Which messages of `phase` with this `method` it sees.
    pub fn selects(&self, phase: Phase, method: &str) -> Selection {
        match self {
            Builtin::Explain(_) => Selection::Fixed(Explain::selects(phase, method)),
            // The tools/list reply (it has no tool name for a matcher).
            Builtin::Describe(_) => {
                Selection::Fixed(phase == Phase::Response && method == "tools/list")
            }
            // The request of tools/call; the matcher narrows the tools.
            Builtin::Deny(_) | Builtin::Rewrite(_) | Builtin::Validate(_) => {
                Selection::Method(phase == Phase::Request && method == "tools/call")
            }
            Builtin::RateLimit(_) | Builtin::Control(_) => Selection::Hook,
            // The four lists (no tool name) and the results it reads; the matcher narrows the
            // tools of tools/call.
            Builtin::ToolScan(s) => match s.selects(phase, method) {
                None => Selection::Fixed(false),
                Some(false) => Selection::Fixed(true),
                Some(true) => Selection::Method(true),
            },
        }
    }

    /// The response control it is, if it is one.
    pub fn control(&self) -> Option<&Control> {
        match self {
            Builtin::Control(c) => Some(c),
            _ => None,
        }
    }

    /// Does it change a list reply from its options alone (nothing of the session, the caller
    /// or the time), so the result can be reused for the same list? (`tool-scan` reads the
    /// catalog's tool names too, and the cached page is the catalog's own.)
    pub fn is_pure_list_transform(&self) -> bool {
        matches!(
            self,
            Builtin::Explain(_) | Builtin::Describe(_) | Builtin::ToolScan(_)
        )
    }

    /// Does it decide without I/O (everything but `rate-limit`, which may ask Redis)?
    pub fn is_immediate(&self) -> bool {
        !matches!(self, Builtin::RateLimit(_))
    }

    /// Does it need the tool's definition (`validate` checks arguments against it; a
    /// `tool-scan` that hides refuses calls to the tools it would hide)?
    pub fn wants_tool_definition(&self) -> bool {
        match self {
            Builtin::Validate(_) => true,
            Builtin::ToolScan(s) => s.hides(),
            _ => false,
        }
    }

    /// Does it read the catalog's names ([`Ctx::catalog`]: `tool-scan`)?
    pub fn wants_catalog_names(&self) -> bool {
        matches!(self, Builtin::ToolScan(_))
    }

    /// Decide on an event. `ctx.tool` is the tool's definition when known; `trace` receives
    /// the reason the explain builtin records and what tool-scan found. A builtin that changes
    /// the message changes the event's own and moves it into `Modify` (the event's is left
    /// empty): no copy per hook.
    pub async fn decide(
        &self,
        ev: &mut HookEvent,
        ctx: &Ctx<'_>,
        trace: &mut Trace,
    ) -> Result<Decision, HookFailure> {
        match self {
            Builtin::Explain(e) => Ok(e.decide(ev, &mut trace.explain_reason)),
            Builtin::Deny(d) => Ok(d.decide(ev)),
            Builtin::Rewrite(r) => Ok(r.decide(ev)),
            Builtin::Validate(v) => Ok(v.decide(ev, ctx.tool)),
            Builtin::ToolScan(s) => Ok(s.decide(ev, ctx, trace)),
            Builtin::Describe(d) => Ok(d.decide(ev)),
            Builtin::RateLimit(r) => r.decide(ev).await,
            // Run in the controls stage, never as an onion hook.
            Builtin::Control(_) => Ok(Decision::Pass),
        }
    }
}

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

/// A response control: runs before every other response hook (as Zato-style hook services expect).
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
        match self {
            Control::Mask(m) => {
                let n = msg
                    .as_object_mut()
                    .get_mut("result")
                    .map_or(0, |r| m.apply(r));
                add_count(counts, "mask", n);
                Ok(n > 0)
            }
            Control::Pii(p) => {
                if tool.is_some_and(|t| p.allows(t)) {
                    return Ok(false);
                }
                // A reply kept as text that surely holds nothing to replace is not parsed.
                if msg
                    .reply_member_text()
                    .is_some_and(|t| p.scanner().surely_clean(t))
                {
                    return Ok(false);
                }
                let obj = msg.as_object_mut();
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
                let Some(result) = msg.as_object_mut().get_mut("result") else {
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
        match Builtin::build(&parsed(name, o), Duration::from_secs(1)).unwrap() {
            Builtin::Control(c) => c,
            other => panic!("{other:?} is not a control"),
        }
    }

    #[test]
    fn each_builtin_places_itself() {
        let b = |name: &str, o: Value| {
            Builtin::build(&parsed(name, o), Duration::from_secs(1)).unwrap()
        };
        let both = Phases {
            request: true,
            response: true,
        };
        let request = Phases {
            request: true,
            response: false,
        };
        let response = Phases {
            request: false,
            response: true,
        };
        let explain = b("explain", Value::Null);
        assert_eq!(explain.phases(), both);
        assert_eq!(
            explain.selects(Phase::Request, "tools/call"),
            Selection::Fixed(true)
        );
        assert_eq!(
            explain.selects(Phase::Response, "tools/list"),
            Selection::Fixed(true)
        );
        assert_eq!(
            explain.selects(Phase::Request, "tools/list"),
            Selection::Fixed(false)
        );
        let deny = b("deny", json!({"tools": ["x"]}));
        assert_eq!(deny.phases(), request);
        assert_eq!(
            deny.selects(Phase::Request, "tools/call"),
            Selection::Method(true)
        );
        assert_eq!(
            deny.selects(Phase::Request, "prompts/get"),
            Selection::Method(false)
        );
        let describe = b("describe", json!({"tools": {}}));
        assert_eq!(describe.phases(), response);
        assert_eq!(
            describe.selects(Phase::Response, "tools/list"),
            Selection::Fixed(true)
        );
        let mask = b("mask", json!({"keys": ["k"]}));
        assert!(mask.control().is_some() && deny.control().is_none());
        assert_eq!(mask.phases(), response);
        assert_eq!(mask.selects(Phase::Response, "tools/call"), Selection::Hook);
        assert!(b("validate", Value::Null).wants_tool_definition());
        assert!(!deny.wants_tool_definition());
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
