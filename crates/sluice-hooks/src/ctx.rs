//! What hooks are shown of where an event comes from ([`Ctx`]) and what they did to one exchange
//! ([`Trace`], [`HookRecord`]), with the catalog's names the `tool-scan` builtin reads
//! ([`CatalogNames`], [`ToolNames`]): the values the chain and the builtins share, below both.

use crate::event::Phase;
use aho_corasick::{AhoCorasick, AhoCorasickKind, MatchKind};
use serde_json::{Map, Value};
use sluice_core::{Message, Principal};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

/// The key of `tool-scan`'s findings in the trace's `controls`.
pub const TRACE_KEY: &str = "tool-scan";

/// What one hook did with one message (for the log and the audit line).
#[derive(Debug, Clone, PartialEq)]
pub struct HookRecord {
    /// The hook id.
    pub id: std::sync::Arc<str>,
    /// The phase.
    pub phase: Phase,
    /// `pass`, `modify`, `answer`, `refuse`, or `error` (then `on_error` decided).
    pub decision: &'static str,
    /// The refusal reason, or the failure.
    pub reason: Option<String>,
    /// How long it took, µs.
    pub micros: u64,
    /// When it started (places it on a trace's timeline).
    pub started: Instant,
}

/// What the hooks did to one exchange.
#[derive(Debug, Default, Clone)]
pub struct Trace {
    /// Each hook's decision, in the order they ran.
    pub records: Vec<HookRecord>,
    /// The reason the explain hook recorded.
    pub explain_reason: Option<String>,
    /// What the response controls changed, by builtin: `{"mask": 2, "pii": {"EMAIL": 1,
    /// "CARD": 1}, "size-cap": {"blocks": 1, "bytes": 1234}}` (a refused reply counts
    /// `"size-cap": {"refused": 1}`). Empty when they changed nothing.
    pub controls: Map<String, Value>,
    /// When the request phase let the request go on (a call's `duration_ms` runs from here).
    pub dispatched: Option<Instant>,
}

impl Trace {
    /// Did `tool-scan` find something (then even a list exchange is worth an audit line)?
    pub fn has_findings(&self) -> bool {
        self.controls.contains_key(TRACE_KEY)
    }
}

/// Where an event comes from: the facts hooks select on and are shown.
#[derive(Debug, Clone)]
pub struct Ctx<'a> {
    /// The client session id.
    pub session_id: &'a str,
    /// The method (for a reply: its request's method).
    pub method: &'a str,
    /// The client-facing tool name (tools/call).
    pub tool_name: Option<&'a str>,
    /// The upstream involved, when known.
    pub upstream: Option<&'a str>,
    /// `"legacy"` or `"modern"`.
    pub era: &'static str,
    /// The tool's definition from the catalog (tools/call), when the chain asks for it
    /// ([`Chain::wants_tool_definitions`]; the `validate` builtin checks arguments against its
    /// `inputSchema`).
    pub tool: Option<&'a Value>,
    /// Who is calling, when the listener authenticates.
    pub principal: Option<Arc<Principal>>,
    /// The name the upstream knows the tool by (tools/call to an upstream): with `upstream`
    /// it makes Claude Code's `mcp__<upstream>__<tool>`.
    pub upstream_tool: Option<&'a str>,
    /// The call's id shown to hooks as `tool_use_id` (tools/call).
    pub tool_use_id: Option<&'a str>,
    /// For a client's reply to an upstream's request: that request, as the upstream sent it
    /// (a Civic hook's `processTargetResult` is shown it as `originalRequest`).
    pub answers: Option<&'a Message>,
    /// The `sub` of the upstream identity whose token serves the call (an OAuth upstream's
    /// grant, when its access token names one), never the token.
    pub upstream_sub: Option<&'a str>,
    /// The catalog's names, when the chain asks for them ([`Chain::wants_catalog_names`]:
    /// `tool-scan` reads whose each listed item is and the other upstreams' tool names).
    pub catalog: Option<&'a dyn CatalogNames>,
}

impl Ctx<'_> {
    /// Claude Code's name of the tool, `mcp__<upstream>__<tool>`, for an upstream's tool.
    pub fn mcp_tool_name(&self) -> Option<String> {
        Some(format!("mcp__{}__{}", self.upstream?, self.upstream_tool?))
    }
}

/// Each upstream tool's names (the client-facing one, and the upstream's own when it is
/// distinctive) and their upstreams: what a description may not mention. Built once per catalog.
#[derive(Debug, Default)]
pub struct ToolNames {
    upstreams: HashMap<String, Vec<String>>,
    re: Option<AhoCorasick>,
}

/// Is a tool name distinctive enough that a mention of it is one (`send_email`, `fx_echo`,
/// `getUser`, not `echo` or `add`)?
fn distinctive(name: &str) -> bool {
    name.chars().count() >= 4
        && (name.contains(['_', '-', '.'])
            || name.chars().any(|c| c.is_ascii_digit())
            || name
                .as_bytes()
                .windows(2)
                .any(|w| w[0].is_ascii_lowercase() && w[1].is_ascii_uppercase()))
}

impl ToolNames {
    /// From `(upstream id, client-facing name, the upstream's own name)` for every tool.
    pub fn new<'a>(tools: impl IntoIterator<Item = (&'a str, &'a str, &'a str)>) -> ToolNames {
        let mut upstreams: HashMap<String, Vec<String>> = HashMap::new();
        for (upstream, name, own) in tools {
            for n in [name, own] {
                if !distinctive(n) {
                    continue;
                }
                let ups = upstreams.entry(n.to_string()).or_default();
                if !ups.iter().any(|u| u == upstream) {
                    ups.push(upstream.to_string());
                }
            }
        }
        // Leftmost-longest: at one place `fx_echo_all` is found rather than `fx_echo`.
        let re = (!upstreams.is_empty())
            .then(|| {
                AhoCorasick::builder()
                    .match_kind(MatchKind::LeftmostLongest)
                    .kind(Some(AhoCorasickKind::DFA))
                    .build(upstreams.keys())
                    .ok()
            })
            .flatten();
        ToolNames { upstreams, re }
    }

    /// The tools of upstreams other than `owner` named in `text`: `(byte start, byte end)`.
    pub(crate) fn mentions<'t>(
        &'t self,
        text: &'t str,
        owner: &'t str,
    ) -> impl Iterator<Item = (usize, usize)> + 't {
        let word = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
        self.re
            .iter()
            .flat_map(move |re| re.find_iter(text))
            .filter(move |m| {
                !word(text[..m.start()].chars().next_back())
                    && !word(text[m.end()..].chars().next())
                    && self
                        .upstreams
                        .get(&text[m.start()..m.end()])
                        .is_some_and(|ups| !ups.iter().any(|u| u == owner) && !ups.is_empty())
            })
            .map(|m| (m.start(), m.end()))
    }
}

/// What tool-scan reads of the catalog: whose each listed item is, and the upstreams' tool
/// names (the server's catalog implements it; [`Ctx::catalog`]).
pub trait CatalogNames: Sync + std::fmt::Debug {
    /// The upstream that offers the item `key` (a tool or prompt name, a resource URI, a
    /// template) of the list `list` (`tools`, `prompts`, `resources`, `resourceTemplates`);
    /// `None` for the gateway's own.
    fn owner(&self, list: &str, key: &str) -> Option<&str>;
    /// The upstreams' tool names.
    fn tool_names(&self) -> &ToolNames;
}
