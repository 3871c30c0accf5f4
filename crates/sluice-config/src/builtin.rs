//! The builtins' options as typed structs, parsed once: serde reads their shape (with
//! `serde_path_to_error` keeping each field's path), then each type checks what serde cannot
//! see (regexes, paths, required and positive values). A parse reports every problem, each
//! with its field path (`options.tools[0]`), not just the first.

use schemars::{json_schema, JsonSchema, Schema, SchemaGenerator};
use serde::de::value::MapAccessDeserializer;
use serde::de::{DeserializeOwned, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use serde_json::{Map, Value};
use serde_path_to_error::Segment;
use std::borrow::Cow;
use std::collections::{BTreeMap, HashSet};
use std::fmt;
use std::marker::PhantomData;

/// One problem in a builtin's options: the field path (from `options`) and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OptionError {
    /// `options`, `options.tools[0]`, `options.per_tool.fx_*.burst`, …
    pub field: String,
    /// What is wrong.
    pub message: String,
}

impl OptionError {
    /// A problem at `field`.
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> OptionError {
        OptionError {
            field: field.into(),
            message: message.into(),
        }
    }
}

impl fmt::Display for OptionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.message)
    }
}

impl std::error::Error for OptionError {}

/// `"…" is not a valid regex: <the parser's last line>`.
pub fn regex_error(pattern: &str, e: &regex::Error) -> String {
    let text = e.to_string();
    let last = text.lines().last().unwrap_or("").trim();
    let last = last.strip_prefix("error: ").unwrap_or(last);
    format!("{pattern:?} is not a valid regex: {last}")
}

/// Does a tool-name pattern read as a regex (it has a metacharacter other than `*`)? If not, it
/// is a glob.
pub fn is_regex_pattern(pattern: &str) -> bool {
    pattern.contains([
        '\\', '^', '$', '.', '+', '?', '(', ')', '[', ']', '{', '}', '|',
    ])
}

/// The builtins this release knows.
pub const BUILTINS: &[&str] = &[
    "explain",
    "deny",
    "rewrite",
    "validate",
    "describe",
    "mask",
    "pii",
    "size-cap",
    "rate-limit",
    "tool-scan",
];

/// The options of one builtin.
#[derive(Debug, Clone, PartialEq)]
pub enum BuiltinOptions {
    /// `explain`.
    Explain(ExplainOptions),
    /// `deny`.
    Deny(DenyOptions),
    /// `rewrite`.
    Rewrite(RewriteOptions),
    /// `validate` (no options).
    Validate,
    /// `describe`.
    Describe(DescribeOptions),
    /// `mask`.
    Mask(MaskOptions),
    /// `pii`.
    Pii(PiiOptions),
    /// `size-cap`.
    SizeCap(SizeCapOptions),
    /// `rate-limit`.
    RateLimit(RateLimitOptions),
    /// `tool-scan`.
    ToolScan(ToolScanOptions),
}

impl BuiltinOptions {
    /// Parse the `options` of the builtin `name`; `None` when no builtin has that name.
    pub fn parse(name: &str, options: &Value) -> Option<Result<BuiltinOptions, Vec<OptionError>>> {
        Some(match name {
            "explain" => parse(options).map(BuiltinOptions::Explain),
            "deny" => parse(options).map(BuiltinOptions::Deny),
            "rewrite" => parse(options).map(BuiltinOptions::Rewrite),
            "validate" => parse::<NoOptions>(options).map(|_| BuiltinOptions::Validate),
            "describe" => parse(options).map(BuiltinOptions::Describe),
            "mask" => parse(options).map(BuiltinOptions::Mask),
            "pii" => parse(options).map(BuiltinOptions::Pii),
            "size-cap" => parse(options).map(BuiltinOptions::SizeCap),
            "rate-limit" => parse(options).map(BuiltinOptions::RateLimit),
            "tool-scan" => parse(options).map(BuiltinOptions::ToolScan),
            _ => return None,
        })
    }

    /// The builtin's name.
    pub fn name(&self) -> &'static str {
        match self {
            BuiltinOptions::Explain(_) => "explain",
            BuiltinOptions::Deny(_) => "deny",
            BuiltinOptions::Rewrite(_) => "rewrite",
            BuiltinOptions::Validate => "validate",
            BuiltinOptions::Describe(_) => "describe",
            BuiltinOptions::Mask(_) => "mask",
            BuiltinOptions::Pii(_) => "pii",
            BuiltinOptions::SizeCap(_) => "size-cap",
            BuiltinOptions::RateLimit(_) => "rate-limit",
            BuiltinOptions::ToolScan(_) => "tool-scan",
        }
    }

    /// The JSON Schema of the `options` of the builtin `name` (a `$ref` into `generator`'s
    /// definitions), from the same structs [`BuiltinOptions::parse`] reads; `None` when no
    /// builtin has that name.
    pub fn json_schema(name: &str, generator: &mut SchemaGenerator) -> Option<Schema> {
        Some(match name {
            "explain" => generator.subschema_for::<ExplainOptions>(),
            "validate" => generator.subschema_for::<NoOptions>(),
            "deny" => generator.subschema_for::<DenyOptions>(),
            "rewrite" => generator.subschema_for::<RewriteOptions>(),
            "describe" => generator.subschema_for::<DescribeOptions>(),
            "mask" => generator.subschema_for::<MaskOptions>(),
            "pii" => generator.subschema_for::<PiiOptions>(),
            "size-cap" => generator.subschema_for::<SizeCapOptions>(),
            "rate-limit" => generator.subschema_for::<RateLimitOptions>(),
            "tool-scan" => generator.subschema_for::<ToolScanOptions>(),
            _ => return None,
        })
    }
}

/// `explain`: the description of the `reason` parameter it adds.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, expecting = "an object")]
pub struct ExplainOptions {
    /// The description of the added `reason` parameter (instead of the default text).
    pub description: Option<String>,
    /// A named description: `"civic"` for the text Civic's explain hook ships today (`GOAL: …
    /// JUSTIFICATION: … CHOICE: …`), `"readme"` for the text of its README (the default).
    pub preset: Option<String>,
}

/// The presets of the explain hook's `reason` description.
pub const EXPLAIN_PRESETS: &[&str] = &["readme", "civic"];

/// The options of a builtin that has none (`validate`).
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, expecting = "an object")]
struct NoOptions {}

/// `deny`: refuse by tool name or argument value.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, expecting = "an object")]
pub struct DenyOptions {
    /// Tool-name regexes (full match).
    #[serde(default, deserialize_with = "strings")]
    #[schemars(with = "Option<Vec<String>>")]
    pub tools: Vec<String>,
    /// Argument rules.
    #[serde(default, deserialize_with = "objects")]
    #[schemars(with = "Option<Vec<ArgumentRule>>")]
    pub arguments: Vec<ArgumentRule>,
    /// What the agent is told (a default names the tool or the argument).
    pub reason: Option<String>,
}

/// One `deny` argument rule.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, expecting = "an object")]
pub struct ArgumentRule {
    /// Where to look (a JSON pointer or a dotted path); every string when absent.
    pub path: Option<String>,
    /// The regex searched in the value (required: a parse never leaves it out).
    pub pattern: Option<String>,
    /// The tools it applies to (a regex, full match); every tool when absent.
    pub tool: Option<String>,
    /// What the agent is told.
    pub reason: Option<String>,
}

/// `rewrite`: set, default or remove arguments.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, expecting = "an object")]
pub struct RewriteOptions {
    /// The rules, in order (required, not empty).
    #[serde(default, deserialize_with = "rules")]
    pub rules: Option<Vec<RewriteRule>>,
}

/// One `rewrite` rule.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, expecting = "an object")]
pub struct RewriteRule {
    /// The tools it applies to (a regex, full match); every tool when absent.
    pub tool: Option<String>,
    /// `path → value` written over what the agent sent.
    #[serde(default, deserialize_with = "entries")]
    #[schemars(with = "Option<BTreeMap<String, Value>>")]
    pub set: Vec<(String, Value)>,
    /// `path → value` written where the agent sent nothing.
    #[serde(default, deserialize_with = "entries")]
    #[schemars(with = "Option<BTreeMap<String, Value>>")]
    pub default: Vec<(String, Value)>,
    /// Paths removed.
    #[serde(default, deserialize_with = "strings")]
    #[schemars(with = "Option<Vec<String>>")]
    pub remove: Vec<String>,
}

/// `describe`: override what `tools/list` says.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, expecting = "an object")]
pub struct DescribeOptions {
    /// Overrides by client-facing tool name (required).
    #[serde(default, deserialize_with = "object_entries")]
    #[schemars(with = "Option<BTreeMap<String, ToolDescription>>")]
    pub tools: Option<Vec<(String, ToolDescription)>>,
}

/// The `describe` overrides of one tool.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, expecting = "an object")]
pub struct ToolDescription {
    /// A new title.
    pub title: Option<String>,
    /// A new description.
    pub description: Option<String>,
    /// Parameter schemas, merged key by key.
    #[serde(default, deserialize_with = "entries")]
    #[schemars(with = "Option<BTreeMap<String, Map<String, Value>>>")]
    pub properties: Vec<(String, Map<String, Value>)>,
    /// Parameters hidden from the agent.
    #[serde(default, deserialize_with = "strings")]
    #[schemars(with = "Option<Vec<String>>")]
    pub hide: Vec<String>,
}

/// `mask`: values at paths and under keys are replaced.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, expecting = "an object")]
pub struct MaskOptions {
    /// JSON pointers or dotted paths.
    #[serde(default, deserialize_with = "strings")]
    #[schemars(with = "Option<Vec<String>>")]
    pub paths: Vec<String>,
    /// Key names matched anywhere, case-insensitively.
    #[serde(default, deserialize_with = "strings")]
    #[schemars(with = "Option<Vec<String>>")]
    pub keys: Vec<String>,
    /// What replaces a value (`"***"` when absent).
    pub replacement: Option<String>,
}

/// The kinds the `pii` builtin knows.
pub const PII_KINDS: &[&str] = &[
    "EMAIL",
    "PHONE",
    "CARD",
    "IBAN",
    "SSN",
    "IP",
    "JWT",
    "PRIVATE_KEY",
    "SECRET",
];

/// `pii`: personal data and secrets become typed placeholders.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, expecting = "an object")]
pub struct PiiOptions {
    /// A subset of [`PII_KINDS`], any case (every kind when empty).
    #[serde(default, deserialize_with = "strings")]
    #[schemars(with = "Option<Vec<String>>")]
    pub kinds: Vec<String>,
    /// Tools whose results are left alone (regexes, full match).
    #[serde(default, deserialize_with = "strings")]
    #[schemars(with = "Option<Vec<String>>")]
    pub allow_tools: Vec<String>,
}

/// What `size-cap` does with a result over the cap.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
pub enum SizeCapMode {
    /// Cut text blocks and drop blocks past the cap (the default).
    #[default]
    Truncate,
    /// Refuse the reply.
    Refuse,
}

impl JsonSchema for SizeCapMode {
    fn schema_name() -> Cow<'static, str> {
        "SizeCapMode".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "description": "Truncate (cut text blocks and drop blocks past the cap) or refuse the reply.",
            "type": "string",
            "enum": ["truncate", "refuse"],
            "default": "truncate"
        })
    }
}

impl TryFrom<String> for SizeCapMode {
    type Error = String;
    fn try_from(s: String) -> Result<SizeCapMode, String> {
        match s.as_str() {
            "truncate" => Ok(SizeCapMode::Truncate),
            "refuse" => Ok(SizeCapMode::Refuse),
            _ => Err(format!("unknown mode {s:?} (truncate or refuse)")),
        }
    }
}

/// `size-cap`: the most bytes a result may carry.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, expecting = "an object")]
pub struct SizeCapOptions {
    /// The default cap.
    pub max_bytes: Option<u64>,
    /// Truncate or refuse.
    #[serde(default, deserialize_with = "nullable")]
    #[schemars(with = "Option<SizeCapMode>")]
    pub mode: SizeCapMode,
    /// `tool glob or regex → max bytes`, in file order (the first match wins).
    #[serde(default, deserialize_with = "entries")]
    #[schemars(with = "Option<BTreeMap<String, u64>>")]
    pub per_tool: Vec<(String, u64)>,
}

/// The unit of a rate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
pub enum Per {
    /// Per second.
    Second,
    /// Per minute.
    Minute,
    /// Per hour.
    Hour,
}

impl Per {
    /// Its name in the options.
    pub fn name(self) -> &'static str {
        match self {
            Per::Second => "second",
            Per::Minute => "minute",
            Per::Hour => "hour",
        }
    }

    /// Its length in milliseconds.
    pub fn millis(self) -> f64 {
        match self {
            Per::Second => 1_000.0,
            Per::Minute => 60_000.0,
            Per::Hour => 3_600_000.0,
        }
    }
}

impl JsonSchema for Per {
    fn schema_name() -> Cow<'static, str> {
        "Per".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "description": "The unit of a rate.",
            "type": "string",
            "enum": ["second", "minute", "hour"]
        })
    }
}

impl TryFrom<String> for Per {
    type Error = String;
    fn try_from(s: String) -> Result<Per, String> {
        match s.as_str() {
            "second" => Ok(Per::Second),
            "minute" => Ok(Per::Minute),
            "hour" => Ok(Per::Hour),
            _ => Err(format!("unknown unit {s:?} (second, minute or hour)")),
        }
    }
}

/// One rate limit: `rate` per `per`, at most `burst` at once.
#[derive(Debug, Clone, Copy, Default, PartialEq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, expecting = "an object")]
pub struct LimitOptions {
    /// Tokens per `per` (required, positive).
    pub rate: Option<f64>,
    /// The unit (required).
    pub per: Option<Per>,
    /// The bucket size (`rate` rounded up when absent).
    pub burst: Option<u64>,
}

/// `rate-limit`: token buckets.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, expecting = "an object")]
pub struct RateLimitOptions {
    /// One bucket for every request.
    #[serde(default, deserialize_with = "object")]
    pub global: Option<LimitOptions>,
    /// One bucket per principal.
    #[serde(default, deserialize_with = "object")]
    pub per_principal: Option<LimitOptions>,
    /// `tool glob or regex → limit`, in file order (the first match wins).
    #[serde(default, deserialize_with = "object_entries")]
    #[schemars(with = "Option<BTreeMap<String, LimitOptions>>")]
    pub per_tool: Option<Vec<(String, LimitOptions)>>,
    /// `redis://…`: buckets shared by every replica.
    pub redis: Option<String>,
    /// The prefix of the bucket keys.
    pub key_prefix: Option<String>,
}

/// What `tool-scan` does with an item (a list entry, or a result) in which it found something.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
pub enum ScanAction {
    /// Remove the invisible characters, keep the item (`invisible` only).
    Strip,
    /// Keep the item, note the finding in its `_meta` and in the audit line.
    Flag,
    /// Drop the item from the list (a result is refused).
    Hide,
    /// Refuse the result with -32031 (a list item is dropped).
    Refuse,
}

impl ScanAction {
    /// Its name in the options.
    pub fn name(self) -> &'static str {
        match self {
            ScanAction::Strip => "strip",
            ScanAction::Flag => "flag",
            ScanAction::Hide => "hide",
            ScanAction::Refuse => "refuse",
        }
    }
}

impl JsonSchema for ScanAction {
    fn schema_name() -> Cow<'static, str> {
        "ScanAction".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "description": "strip (invisible characters only), flag, hide (lists) or refuse (results).",
            "type": "string",
            "enum": ["strip", "flag", "hide", "refuse"]
        })
    }
}

impl TryFrom<String> for ScanAction {
    type Error = String;
    fn try_from(s: String) -> Result<ScanAction, String> {
        match s.as_str() {
            "strip" => Ok(ScanAction::Strip),
            "flag" => Ok(ScanAction::Flag),
            "hide" => Ok(ScanAction::Hide),
            "refuse" => Ok(ScanAction::Refuse),
            _ => Err(format!(
                "unknown action {s:?} (strip, flag, hide or refuse)"
            )),
        }
    }
}

/// The action of each kind of `tool-scan` finding (absent: invisible `strip`, the rest `flag`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, expecting = "an object")]
pub struct ScanActions {
    /// Invisible and format characters (tag characters, zero-width, bidi controls).
    pub invisible: Option<ScanAction>,
    /// Instructions aimed at the model (`<IMPORTANT>`, "ignore previous instructions", …).
    pub instruction: Option<ScanAction>,
    /// A mention of another upstream's tool.
    pub shadowing: Option<ScanAction>,
    /// Exfiltration hints (URLs, "send the contents of", credential paths, AWS keys).
    pub exfiltration: Option<ScanAction>,
    /// Over-long descriptions (longer than `max_description` characters).
    pub long: Option<ScanAction>,
}

/// The result methods `tool-scan` can scan.
pub const SCAN_RESULTS: &[&str] = &["tools/call", "prompts/get", "resources/read"];

/// `tool-scan`: finds tool poisoning in lists (and results, when asked).
#[derive(Debug, Clone, Default, PartialEq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, expecting = "an object")]
pub struct ToolScanOptions {
    /// Scan the four lists (default `true`).
    pub lists: Option<bool>,
    /// The results scanned too: `tools/call`, `prompts/get`, `resources/read` (default none).
    #[serde(default, deserialize_with = "strings")]
    #[schemars(with = "Option<Vec<String>>")]
    pub results: Vec<String>,
    /// The action per kind of finding.
    #[serde(default, deserialize_with = "object")]
    pub actions: Option<ScanActions>,
    /// More instruction patterns: regexes searched case-insensitively.
    #[serde(default, deserialize_with = "strings")]
    #[schemars(with = "Option<Vec<String>>")]
    pub patterns: Vec<String>,
    /// More exfiltration patterns: regexes searched case-insensitively.
    #[serde(default, deserialize_with = "strings")]
    #[schemars(with = "Option<Vec<String>>")]
    pub exfiltration_patterns: Vec<String>,
    /// Hosts whose URLs are not findings (`example.com` also allows its subdomains).
    #[serde(default, deserialize_with = "strings")]
    #[schemars(with = "Option<Vec<String>>")]
    pub allow_hosts: Vec<String>,
    /// The most characters a `description` of a listed item may have before it is a `long`
    /// finding (default 8192).
    pub max_description: Option<u64>,
    /// Items left alone: names (tools, prompts) or URIs (resources, templates), regexes (full
    /// match), and tools whose results are left alone.
    #[serde(default, deserialize_with = "strings")]
    #[schemars(with = "Option<Vec<String>>")]
    pub allow: Vec<String>,
}

// --- parsing ---------------------------------------------------------------------------------

/// The checks serde cannot make, run on the parsed value.
trait Checked: DeserializeOwned {
    /// Push a problem for each bad value; `raw` is the options as written.
    fn check(&self, raw: &Map<String, Value>, c: &mut Check);
}

/// Collects the checks' problems, leaving out fields whose shape was already wrong.
struct Check<'a> {
    errors: &'a mut Vec<OptionError>,
    reported: &'a HashSet<String>,
}

impl Check<'_> {
    fn err(&mut self, field: &str, message: impl Into<String>) {
        if !self.reported.contains(field) {
            self.errors.push(OptionError::new(field, message));
        }
    }

    fn regex(&mut self, field: &str, pattern: &str, full: bool) {
        let compiled = if full {
            regex::Regex::new(&format!("^(?:{pattern})$"))
        } else {
            regex::Regex::new(pattern)
        };
        if let Err(e) = compiled {
            self.err(field, regex_error(pattern, &e));
        }
    }

    /// Regexes (full match) in a string list.
    fn regexes(&mut self, field: &str, patterns: &[String]) {
        for (i, p) in patterns.iter().enumerate() {
            self.regex(&format!("{field}[{i}]"), p, true);
        }
    }

    /// A tool glob or regex (a map key).
    fn tool_key(&mut self, field: &str, pattern: &str) {
        if is_regex_pattern(pattern) {
            self.regex(field, pattern, true);
        }
    }

    /// A JSON pointer (`/a/b`) or a dotted path (`a.b`) without empty segments.
    fn path(&mut self, field: &str, path: &str) {
        if path.is_empty() {
            self.err(field, "must not be empty");
        } else if !path.starts_with('/') && path.split('.').any(str::is_empty) {
            self.err(
                field,
                format!("{path:?} has an empty segment (write a JSON pointer such as \"/a/b\" for keys with dots)"),
            );
        }
    }

    fn paths(&mut self, field: &str, paths: &[String]) {
        for (i, p) in paths.iter().enumerate() {
            self.path(&format!("{field}[{i}]"), p);
        }
    }

    fn positive(&mut self, field: &str, n: Option<u64>) {
        if n == Some(0) {
            self.err(field, "must be a positive integer");
        }
    }

    fn limit(&mut self, field: &str, l: &LimitOptions) {
        match l.rate {
            None => self.err(&format!("{field}.rate"), "is required"),
            Some(r) if r > 0.0 && r.is_finite() => {}
            Some(_) => self.err(&format!("{field}.rate"), "must be a positive number"),
        }
        if l.per.is_none() {
            self.err(
                &format!("{field}.per"),
                "is required (second, minute or hour)",
            );
        }
        self.positive(&format!("{field}.burst"), l.burst);
    }
}

/// Is `raw[key]` given (not absent or null)?
fn given(raw: &Map<String, Value>, key: &str) -> bool {
    raw.get(key).is_some_and(|v| !v.is_null())
}

/// Is `raw[key]` a non-empty array?
fn listed(raw: &Map<String, Value>, key: &str) -> bool {
    raw.get(key)
        .and_then(Value::as_array)
        .is_some_and(|a| !a.is_empty())
}

impl Checked for NoOptions {
    fn check(&self, _: &Map<String, Value>, _: &mut Check) {}
}

impl Checked for ExplainOptions {
    fn check(&self, _: &Map<String, Value>, c: &mut Check) {
        if let Some(p) = &self.preset {
            if !EXPLAIN_PRESETS.contains(&p.as_str()) {
                c.err(
                    "options.preset",
                    format!(
                        "unknown preset {p:?} (known: {})",
                        EXPLAIN_PRESETS.join(", ")
                    ),
                );
            }
        }
        if let Some(d) = &self.description {
            if d.trim().is_empty() {
                c.err("options.description", "must not be empty");
            }
            if self.preset.is_some() {
                c.err(
                    "options.description",
                    "give either `description` or `preset`, not both",
                );
            }
        }
    }
}

impl Checked for DenyOptions {
    fn check(&self, raw: &Map<String, Value>, c: &mut Check) {
        c.regexes("options.tools", &self.tools);
        for (i, r) in self.arguments.iter().enumerate() {
            let at = format!("options.arguments[{i}]");
            match &r.pattern {
                Some(p) => c.regex(&format!("{at}.pattern"), p, false),
                None => c.err(&format!("{at}.pattern"), "is required"),
            }
            if let Some(p) = &r.path {
                c.path(&format!("{at}.path"), p);
            }
            if let Some(t) = &r.tool {
                c.regex(&format!("{at}.tool"), t, true);
            }
        }
        if !listed(raw, "tools") && !listed(raw, "arguments") {
            c.err("options", "deny needs `tools` or `arguments`");
        }
    }
}

impl Checked for RewriteOptions {
    fn check(&self, _: &Map<String, Value>, c: &mut Check) {
        let rules = match &self.rules {
            None => return c.err("options.rules", "is required (an array of rules)"),
            Some(r) if r.is_empty() => return c.err("options.rules", "must not be empty"),
            Some(r) => r,
        };
        for (i, r) in rules.iter().enumerate() {
            let at = format!("options.rules[{i}]");
            if let Some(t) = &r.tool {
                c.regex(&format!("{at}.tool"), t, true);
            }
            for (key, list) in [("set", &r.set), ("default", &r.default)] {
                for (path, _) in list {
                    c.path(&format!("{at}.{key}.{path}"), path);
                }
            }
            c.paths(&format!("{at}.remove"), &r.remove);
            if r.set.is_empty() && r.default.is_empty() && r.remove.is_empty() {
                c.err(&at, "needs `set`, `default` or `remove`");
            }
        }
    }
}

impl Checked for DescribeOptions {
    fn check(&self, _: &Map<String, Value>, c: &mut Check) {
        if self.tools.is_none() {
            c.err("options.tools", "is required (an object of tool names)");
        }
    }
}

impl Checked for MaskOptions {
    fn check(&self, raw: &Map<String, Value>, c: &mut Check) {
        c.paths("options.paths", &self.paths);
        if !listed(raw, "paths") && !listed(raw, "keys") {
            c.err("options", "mask needs `paths` or `keys`");
        }
    }
}

impl Checked for PiiOptions {
    fn check(&self, _: &Map<String, Value>, c: &mut Check) {
        for (i, k) in self.kinds.iter().enumerate() {
            if !PII_KINDS.iter().any(|known| known.eq_ignore_ascii_case(k)) {
                c.err(
                    &format!("options.kinds[{i}]"),
                    format!("unknown kind {k:?} (known: {})", PII_KINDS.join(", ")),
                );
            }
        }
        c.regexes("options.allow_tools", &self.allow_tools);
    }
}

impl Checked for SizeCapOptions {
    fn check(&self, raw: &Map<String, Value>, c: &mut Check) {
        c.positive("options.max_bytes", self.max_bytes);
        for (k, n) in &self.per_tool {
            let field = format!("options.per_tool.{k}");
            c.tool_key(&field, k);
            c.positive(&field, Some(*n));
        }
        let per_tool = raw
            .get("per_tool")
            .and_then(Value::as_object)
            .is_some_and(|m| !m.is_empty());
        if !given(raw, "max_bytes") && !per_tool {
            c.err("options", "size-cap needs `max_bytes` or `per_tool`");
        }
    }
}

impl Checked for RateLimitOptions {
    fn check(&self, raw: &Map<String, Value>, c: &mut Check) {
        if let Some(l) = &self.global {
            c.limit("options.global", l);
        }
        if let Some(l) = &self.per_principal {
            c.limit("options.per_principal", l);
        }
        for (k, l) in self.per_tool.iter().flatten() {
            let field = format!("options.per_tool.{k}");
            c.tool_key(&field, k);
            c.limit(&field, l);
        }
        let empty_per_tool = raw
            .get("per_tool")
            .and_then(Value::as_object)
            .is_some_and(Map::is_empty);
        if !given(raw, "global")
            && !given(raw, "per_principal")
            && (!given(raw, "per_tool") || empty_per_tool)
        {
            c.err(
                "options",
                "rate-limit needs `global`, `per_principal` or `per_tool`",
            );
        }
        if let Some(problem) = self.redis.as_deref().and_then(redis_url_problem) {
            c.err("options.redis", problem);
        }
        if self.key_prefix.as_deref() == Some("") {
            c.err("options.key_prefix", "must not be empty");
        }
    }
}

impl Checked for ToolScanOptions {
    fn check(&self, _: &Map<String, Value>, c: &mut Check) {
        for (i, m) in self.results.iter().enumerate() {
            if !SCAN_RESULTS.contains(&m.as_str()) {
                c.err(
                    &format!("options.results[{i}]"),
                    format!(
                        "{m:?} is not a result tool-scan reads (known: {})",
                        SCAN_RESULTS.join(", ")
                    ),
                );
            }
        }
        if let Some(a) = &self.actions {
            for (kind, action) in [
                ("instruction", a.instruction),
                ("shadowing", a.shadowing),
                ("exfiltration", a.exfiltration),
                ("long", a.long),
            ] {
                if action == Some(ScanAction::Strip) {
                    c.err(
                        &format!("options.actions.{kind}"),
                        "strip removes invisible characters only (flag, hide or refuse)",
                    );
                }
            }
        }
        for (field, list) in [
            ("options.patterns", &self.patterns),
            ("options.exfiltration_patterns", &self.exfiltration_patterns),
        ] {
            for (i, p) in list.iter().enumerate() {
                c.regex(&format!("{field}[{i}]"), p, false);
            }
        }
        c.regexes("options.allow", &self.allow);
        if self.max_description == Some(0) {
            c.err("options.max_description", "must be at least 1");
        }
        if self.lists == Some(false) && self.results.is_empty() {
            c.err("options", "tool-scan with `lists: false` needs `results`");
        }
    }
}

/// A Redis URL without its credentials (`redis://***@host/0`), for logs and errors.
pub fn redis_url_shown(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(s), Some(at)) if at > s => format!("{}***{}", &url[..s + 3], &url[at..]),
        _ => url.to_string(),
    }
}

/// What is wrong with a rate-limit `redis` URL (`redis://[user[:password]@]host[:port][/db]`),
/// credentials left out of the message.
pub(crate) fn redis_url_problem(url: &str) -> Option<String> {
    let Some(rest) = url.strip_prefix("redis://") else {
        return Some(format!("{url:?} is not a redis:// URL"));
    };
    let rest = rest.split(['?', '#']).next().unwrap_or("");
    let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let shown = match authority.rsplit_once('@') {
        Some((_, h)) => format!("redis://***@{h}"),
        None => format!("redis://{authority}"),
    };
    let (host, port) = if let Some(v6) = host_port.strip_prefix('[') {
        match v6.split_once(']') {
            Some((h, "")) => (h, None),
            Some((h, p)) => (h, Some(p.strip_prefix(':').unwrap_or(p))),
            None => ("", None),
        }
    } else {
        match host_port.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (host_port, None),
        }
    };
    if host.is_empty() {
        return Some(format!("{shown:?} names no host"));
    }
    if port.is_some_and(|p| p.parse::<u16>().is_err()) {
        return Some(format!("{shown:?} has an invalid port"));
    }
    if !path.is_empty() && path.parse::<u32>().is_err() {
        return Some(format!(
            "the database {path:?} is not a number (redis://host:port/0)"
        ));
    }
    None
}

/// Parse options of type `T`: every shape problem (serde stops at the first, so the bad value is
/// taken out and the parse runs again), then the checks on what is left.
fn parse<T: Checked>(options: &Value) -> Result<T, Vec<OptionError>> {
    let raw = match options {
        Value::Null => Map::new(),
        Value::Object(m) => m.clone(),
        _ => return Err(vec![OptionError::new("options", "must be an object")]),
    };
    let mut rest = Value::Object(raw.clone());
    let mut errors = Vec::new();
    let mut reported = HashSet::new();
    let parsed = loop {
        match serde_path_to_error::deserialize::<_, T>(&rest) {
            Ok(t) => break Some(t),
            Err(e) => {
                let segments: Vec<Segment> = e.path().iter().cloned().collect();
                let error = describe(&segments, &e.into_inner().to_string());
                reported.insert(error.field.clone());
                errors.push(error);
                match take_out(&mut rest, &segments) {
                    Some(field) => reported.insert(field),
                    None => break None,
                };
            }
        }
    };
    if let Some(t) = &parsed {
        t.check(
            &raw,
            &mut Check {
                errors: &mut errors,
                reported: &reported,
            },
        );
    }
    match parsed {
        Some(t) if errors.is_empty() => Ok(t),
        _ => Err(errors),
    }
}

/// `options.a[0].b` for a serde path.
fn field_of(segments: &[Segment]) -> String {
    let mut field = String::from("options");
    for s in segments {
        match s {
            Segment::Seq { index } => field.push_str(&format!("[{index}]")),
            Segment::Map { key } => {
                field.push('.');
                field.push_str(key);
            }
            Segment::Enum { .. } | Segment::Unknown => {}
        }
    }
    field
}

/// A serde error in Sluice's words: `unknown option (known: …)`, `must be …`, or the message a
/// type gave (`unknown mode "snip" (truncate or refuse)`).
fn describe(segments: &[Segment], message: &str) -> OptionError {
    let field = field_of(segments);
    if let Some(rest) = message.strip_prefix("unknown field `") {
        let known: Vec<&str> = rest
            .split_once(',')
            .map_or("", |(_, expected)| expected)
            .split('`')
            .skip(1)
            .step_by(2)
            .collect();
        let known = if known.is_empty() {
            "none".to_string()
        } else {
            known.join(", ")
        };
        return OptionError::new(field, format!("unknown option (known: {known})"));
    }
    let expected = ["invalid type: ", "invalid value: "]
        .iter()
        .find_map(|p| message.strip_prefix(p))
        .and_then(|rest| rest.rsplit_once(", expected "))
        .map(|(_, expected)| expected);
    match expected {
        Some(expected) => {
            let what = match expected {
                "u64" => "a positive integer",
                "f64" => "a positive number",
                "a map" => "an object",
                "a sequence" => "an array",
                other => other,
            };
            OptionError::new(field, format!("must be {what}"))
        }
        None => OptionError::new(field, message),
    }
}

/// Take the value a shape error is about out of `v`, so the next parse goes past it: a map entry
/// goes, and an array item takes its whole array with it (the other items' indexes would shift).
/// Returns the field taken out, or `None` when nothing could be.
fn take_out(v: &mut Value, segments: &[Segment]) -> Option<String> {
    let mut segments = segments;
    if let [before @ .., Segment::Seq { .. }] = segments {
        segments = before;
    }
    let ([parents @ .., Segment::Map { key }], mut cur) = (segments, &mut *v) else {
        return None;
    };
    for s in parents {
        cur = match s {
            Segment::Map { key } => cur.get_mut(key.as_str())?,
            Segment::Seq { index } => cur.get_mut(*index)?,
            Segment::Enum { .. } | Segment::Unknown => return None,
        };
    }
    cur.as_object_mut()?.remove(key)?;
    Some(field_of(segments))
}

// --- shapes serde does not give directly -------------------------------------------------------

/// A sequence of `T` (null = empty), `what` naming it in errors.
struct Items<S> {
    what: &'static str,
    item: S,
}

impl<'de, S: DeserializeSeed<'de> + Clone> Visitor<'de> for Items<S> {
    type Value = Vec<S::Value>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(self.what)
    }

    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(Vec::new())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut out = Vec::new();
        while let Some(v) = seq.next_element_seed(self.item.clone())? {
            out.push(v);
        }
        Ok(out)
    }
}

/// The entries of an object in file order (null = none).
struct Entries<S>(S);

impl<'de, S: DeserializeSeed<'de> + Clone> Visitor<'de> for Entries<S> {
    type Value = Vec<(String, S::Value)>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an object")
    }

    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(Vec::new())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut out = Vec::new();
        while let Some(k) = map.next_key::<String>()? {
            out.push((k, map.next_value_seed(self.0.clone())?));
        }
        Ok(out)
    }
}

/// Any `T`, as a seed.
struct Plain<T>(PhantomData<T>);

impl<T> Clone for Plain<T> {
    fn clone(&self) -> Self {
        Plain(PhantomData)
    }
}

impl<'de, T: Deserialize<'de>> DeserializeSeed<'de> for Plain<T> {
    type Value = T;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<T, D::Error> {
        T::deserialize(d)
    }
}

/// A struct `T` from an object only (a derived struct also takes an array, by position).
struct ObjectOnly<T>(PhantomData<T>);

impl<T> Clone for ObjectOnly<T> {
    fn clone(&self) -> Self {
        ObjectOnly(PhantomData)
    }
}

impl<'de, T: Deserialize<'de>> DeserializeSeed<'de> for ObjectOnly<T> {
    type Value = T;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<T, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de, T: Deserialize<'de>> Visitor<'de> for ObjectOnly<T> {
    type Value = T;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an object")
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<T, A::Error> {
        T::deserialize(MapAccessDeserializer::new(map))
    }
}

/// `Some` of what the inner visitor reads, `None` for null.
struct Maybe<V>(V);

impl<'de, V: Visitor<'de>> Visitor<'de> for Maybe<V> {
    type Value = Option<V::Value>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        self.0.expecting(f)
    }

    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
        self.0.visit_seq(seq).map(Some)
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        self.0.visit_map(map).map(Some)
    }
}

fn strings<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    d.deserialize_any(Items {
        what: "an array of strings",
        item: Plain(PhantomData),
    })
}

fn objects<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Vec<T>, D::Error> {
    d.deserialize_any(Items {
        what: "an array",
        item: ObjectOnly(PhantomData),
    })
}

/// An optional array of rules: `None` when absent or null, so the check can require it.
fn rules<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Option<Vec<T>>, D::Error> {
    d.deserialize_any(Maybe(Items {
        what: "an array of rules",
        item: ObjectOnly(PhantomData),
    }))
}

fn entries<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
    d: D,
) -> Result<Vec<(String, T)>, D::Error> {
    d.deserialize_any(Entries(Plain(PhantomData)))
}

/// An optional object of object-only structs: `None` when absent or null.
fn object_entries<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
    d: D,
) -> Result<Option<Vec<(String, T)>>, D::Error> {
    d.deserialize_any(Maybe(Entries(ObjectOnly(PhantomData))))
}

/// An optional object-only struct: `None` when absent or null.
fn object<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Option<T>, D::Error> {
    d.deserialize_any(Maybe(ObjectOnly(PhantomData)))
}

fn nullable<'de, D: Deserializer<'de>, T: Deserialize<'de> + Default>(d: D) -> Result<T, D::Error> {
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn problems(name: &str, options: Value) -> Vec<String> {
        match BuiltinOptions::parse(name, &options) {
            Some(Err(e)) => e.iter().map(ToString::to_string).collect(),
            other => panic!("{name} {options}: expected problems, got {other:?}"),
        }
    }

    fn parsed(name: &str, options: Value) -> BuiltinOptions {
        match BuiltinOptions::parse(name, &options) {
            Some(Ok(o)) => o,
            other => panic!("{name} {options}: {other:?}"),
        }
    }

    #[test]
    fn tool_scan_options_are_checked() {
        assert_eq!(
            problems(
                "tool-scan",
                json!({"results": ["tools/list"], "actions": {"shadowing": "strip", "long": "strip"}, "patterns": ["(["], "max_description": 0})
            ),
            [
                "options.results[0]: \"tools/list\" is not a result tool-scan reads (known: tools/call, prompts/get, resources/read)",
                "options.actions.shadowing: strip removes invisible characters only (flag, hide or refuse)",
                "options.actions.long: strip removes invisible characters only (flag, hide or refuse)",
                "options.patterns[0]: \"([\" is not a valid regex: unclosed character class",
                "options.max_description: must be at least 1",
            ]
        );
        assert_eq!(
            problems("tool-scan", json!({"actions": {"invisible": "drop"}})),
            ["options.actions.invisible: unknown action \"drop\" (strip, flag, hide or refuse)"]
        );
        let BuiltinOptions::ToolScan(o) = parsed("tool-scan", Value::Null) else {
            unreachable!("tool-scan options")
        };
        assert_eq!(o, ToolScanOptions::default());
    }

    #[test]
    fn unknown_fields_are_named_with_the_known_ones() {
        assert_eq!(
            problems("mask", json!({"keys": ["k"], "colour": 1})),
            ["options.colour: unknown option (known: paths, keys, replacement)"]
        );
        assert_eq!(
            problems("validate", json!({"x": 1})),
            ["options.x: unknown option (known: none)"]
        );
        assert_eq!(
            problems("explain", json!({"x": 1})),
            ["options.x: unknown option (known: description, preset)"]
        );
        assert_eq!(
            problems("explain", json!({"preset": "zato", "description": " "})),
            [
                "options.preset: unknown preset \"zato\" (known: readme, civic)",
                "options.description: must not be empty",
                "options.description: give either `description` or `preset`, not both"
            ]
        );
        assert_eq!(
            problems(
                "deny",
                json!({"arguments": [{"pattern": "x", "where": "y"}]})
            ),
            ["options.arguments[0].where: unknown option (known: path, pattern, tool, reason)"]
        );
        assert_eq!(
            problems(
                "rate-limit",
                json!({"global": {"rate": 1, "per": "second", "burst": 1, "b": 2}})
            ),
            ["options.global.b: unknown option (known: rate, per, burst)"]
        );
    }

    #[test]
    fn wrong_types_are_named_with_their_path() {
        assert_eq!(
            problems("mask", json!({"keys": ["k", 7], "replacement": false})),
            // The bad list is taken out to read on, but `keys` was written: no "needs" error.
            [
                "options.keys[1]: must be a string",
                "options.replacement: must be a string"
            ]
        );
        assert_eq!(
            problems(
                "size-cap",
                json!({"max_bytes": 1.5, "per_tool": {"a": "x"}})
            ),
            [
                "options.max_bytes: must be a positive integer",
                "options.per_tool.a: must be a positive integer"
            ]
        );
        assert_eq!(
            problems("rate-limit", json!({"global": {"rate": "fast", "per": 1}})),
            [
                "options.global.rate: must be a positive number",
                "options.global.per: must be a string"
            ]
        );
        assert_eq!(
            problems("describe", json!({"tools": {"t": {"properties": []}}})),
            ["options.tools.t.properties: must be an object"]
        );
        assert_eq!(
            problems("rewrite", json!({"rules": {}})),
            ["options.rules: must be an array of rules"]
        );
        assert_eq!(
            problems("pii", json!("all")),
            ["options: must be an object"]
        );
        // A struct is read from an object only, never from an array by position.
        assert_eq!(
            problems("rate-limit", json!({"global": [1, "second"]})),
            ["options.global: must be an object"]
        );
        assert_eq!(
            problems("deny", json!({"arguments": [["x"]]})),
            ["options.arguments[0]: must be an object"]
        );
    }

    #[test]
    fn defaults_and_order_are_kept() {
        assert_eq!(
            parsed("explain", Value::Null),
            BuiltinOptions::Explain(ExplainOptions::default())
        );
        assert_eq!(parsed("validate", json!({})), BuiltinOptions::Validate);
        let BuiltinOptions::SizeCap(cap) = parsed(
            "size-cap",
            json!({"per_tool": {"z*": 1, "a*": 2}, "mode": null}),
        ) else {
            panic!("not size-cap");
        };
        assert_eq!(cap.mode, SizeCapMode::Truncate);
        assert_eq!(cap.max_bytes, None);
        assert_eq!(cap.per_tool, [("z*".to_string(), 1), ("a*".to_string(), 2)]);
        let BuiltinOptions::Mask(mask) = parsed("mask", json!({"keys": ["k"], "paths": null}))
        else {
            panic!("not mask");
        };
        assert_eq!(mask.paths, Vec::<String>::new());
        assert_eq!(mask.replacement, None);
        let BuiltinOptions::RateLimit(rl) = parsed(
            "rate-limit",
            json!({"per_principal": {"rate": 0.5, "per": "minute"}, "global": null}),
        ) else {
            panic!("not rate-limit");
        };
        assert_eq!(rl.global, None);
        assert_eq!(
            rl.per_principal,
            Some(LimitOptions {
                rate: Some(0.5),
                per: Some(Per::Minute),
                burst: None
            })
        );
        assert_eq!(
            parsed("rate-limit", json!({"global": {"rate": 1, "per": "hour"}})).name(),
            "rate-limit"
        );
        assert!(BuiltinOptions::parse("nope", &Value::Null).is_none());
        for name in BUILTINS {
            let parsed = BuiltinOptions::parse(name, &Value::Null).expect("a known builtin");
            assert!(parsed.map_or(true, |o| o.name() == *name));
        }
    }
}
