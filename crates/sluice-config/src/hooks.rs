//! `hooks/hooks.manifest.json` and its overlay `hooks/hooks.state.json` (toolfunnel's format),
//! plus Sluice's additions: the `Request` / `Response` events, `methods`, `on_error`, the
//! `process`, `http`, `builtin` and `civic` kinds, and the Claude Code settings of a hook
//! ([`ClaudeSettings`]: which tool name its payload carries, `permission_mode`, the plugin
//! root, what an `ask` becomes when no one can be asked).

use crate::builtin::{BuiltinOptions, BUILTINS};
use crate::error::ConfigError;
use crate::fields::{entry, read_json, read_object, Fields};
use serde_json::{Map, Value};
use std::collections::{BTreeMap, HashSet};
use std::path::{Component, Path, PathBuf};
use std::time::Duration;

/// The lifecycle event a hook is attached to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HookEventKind {
    /// A new session (legacy `initialize`).
    SessionStart,
    /// Happens inside the agent; never crosses the wire (accepted, never fired).
    UserPromptSubmit,
    /// Request phase of `tools/call`.
    PreToolUse,
    /// Response phase of `tools/call`.
    PostToolUse,
    /// The session ended.
    Stop,
    /// The session ended (Claude Code's name for the end of a session; fires beside `Stop`).
    SessionEnd,
    /// Response phase of a `tools/call` that failed (an error reply or `isError: true`).
    PostToolUseFailure,
    /// An upstream's `elicitation/create` on its way to the client (the matcher matches the
    /// upstream: Claude Code's `mcp_server_name`).
    Elicitation,
    /// The client's answer to an upstream's elicitation, on its way back.
    ElicitationResult,
    /// Happens inside the agent; never crosses the wire (accepted, never fired).
    PreCompact,
    /// Every message of the request phase (a Zato-style request hook).
    Request,
    /// Every message of the response phase (a Zato-style response hook).
    Response,
}

impl HookEventKind {
    /// Parse the manifest name.
    pub fn parse(s: &str) -> Option<HookEventKind> {
        Some(match s {
            "SessionStart" => HookEventKind::SessionStart,
            "UserPromptSubmit" => HookEventKind::UserPromptSubmit,
            "PreToolUse" => HookEventKind::PreToolUse,
            "PostToolUse" => HookEventKind::PostToolUse,
            "Stop" => HookEventKind::Stop,
            "SessionEnd" => HookEventKind::SessionEnd,
            "PostToolUseFailure" => HookEventKind::PostToolUseFailure,
            "Elicitation" => HookEventKind::Elicitation,
            "ElicitationResult" => HookEventKind::ElicitationResult,
            "PreCompact" => HookEventKind::PreCompact,
            "Request" => HookEventKind::Request,
            "Response" => HookEventKind::Response,
            _ => return None,
        })
    }

    /// The manifest name.
    pub fn name(self) -> &'static str {
        match self {
            HookEventKind::SessionStart => "SessionStart",
            HookEventKind::UserPromptSubmit => "UserPromptSubmit",
            HookEventKind::PreToolUse => "PreToolUse",
            HookEventKind::PostToolUse => "PostToolUse",
            HookEventKind::Stop => "Stop",
            HookEventKind::SessionEnd => "SessionEnd",
            HookEventKind::PostToolUseFailure => "PostToolUseFailure",
            HookEventKind::Elicitation => "Elicitation",
            HookEventKind::ElicitationResult => "ElicitationResult",
            HookEventKind::PreCompact => "PreCompact",
            HookEventKind::Request => "Request",
            HookEventKind::Response => "Response",
        }
    }

    /// The methods a hook on this event sees unless it says otherwise.
    pub fn default_methods(self) -> Vec<String> {
        match self {
            HookEventKind::PreToolUse
            | HookEventKind::PostToolUse
            | HookEventKind::PostToolUseFailure => vec!["tools/call".into()],
            HookEventKind::SessionStart => vec!["initialize".into()],
            HookEventKind::Elicitation => vec!["elicitation/create".into()],
            HookEventKind::ElicitationResult => vec!["(reply)".into()],
            _ => vec!["*".into()],
        }
    }
}

/// What to do when a hook fails (times out, crashes, answers something unreadable).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnError {
    /// Refuse the message (fail closed; the default).
    Refuse,
    /// Let the message pass (fail open).
    Pass,
}

/// Which name of an upstream tool a hook's payload carries in `tool_name`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ToolNameForm {
    /// The gateway's name (`<upstream>_<tool>`, or the `as` rename): what the client calls.
    #[default]
    Gateway,
    /// Claude Code's name for an MCP tool, `mcp__<upstream>__<tool>` (the upstream's own tool
    /// name), so scripts written for Claude Code see what they expect.
    Mcp,
}

/// What a hook's `ask` becomes for a client that cannot be asked (it declared no elicitation).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AskFallback {
    /// Refuse the call (-32030; the default).
    #[default]
    Deny,
    /// Let it go on.
    Allow,
}

/// How an `http` hook's answers are read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum HttpProtocol {
    /// The Zato-style hook service contract (`{"request": …}` / `{"response": …}`, non-2xx
    /// refuses; the default).
    #[default]
    Zato,
    /// Claude Code's http hook contract: a 2xx JSON body is read like a command hook's stdout,
    /// a non-2xx answer is a non-blocking error.
    ClaudeCode,
}

/// What a hook that cannot decide means (Claude Code's `onFailure`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OnFailure {
    /// As today: a non-blocking error (an unexpected exit code, a non-2xx answer) passes, and a
    /// timeout or a hook that cannot start is the hook's `on_error` (the default).
    #[default]
    Continue,
    /// Fail closed: a hook that cannot start, times out, crashes, exits with a code other than
    /// 0 or 2 (a command), or answers non-2xx or unreadable JSON (http), or whose tool fails
    /// (mcp_tool) refuses the message, with a reason naming the hook.
    Block,
}

/// The permission modes Claude Code names (`permission_mode` of the payload).
pub const PERMISSION_MODES: &[&str] = &[
    "default",
    "plan",
    "acceptEdits",
    "auto",
    "dontAsk",
    "bypassPermissions",
];

/// A hook's Claude Code settings.
#[derive(Debug, Clone, PartialEq)]
pub struct ClaudeSettings {
    /// Which name `tool_name` carries (`tool_name` in the manifest: `gateway` or `mcp`).
    pub tool_name: ToolNameForm,
    /// `permission_mode` of the payload (`default` unless configured).
    pub permission_mode: String,
    /// The plugin folder the hook came from (`CLAUDE_PLUGIN_ROOT`), set by `sluice import
    /// claude-hooks --plugin`.
    pub plugin_root: Option<PathBuf>,
    /// What an `ask` becomes for a client without elicitation.
    pub ask_fallback: AskFallback,
    /// Claude Code's `if`: one permission rule (`mcp__crm__*`, `Bash(git *)`); the hook runs
    /// only for the tool calls it matches (tool events only).
    pub if_rule: Option<String>,
    /// Claude Code's `once`: the hook runs once per session.
    pub once: bool,
    /// Claude Code's `async`: the hook runs in the background and never decides.
    pub run_async: bool,
    /// Claude Code's `onFailure`.
    pub on_failure: OnFailure,
    /// Claude Code's `continueOnBlock` (PostToolUse): a block replaces the result the agent
    /// gets with the reason, as a tool error, instead of appending the reason to it.
    pub continue_on_block: bool,
}

impl Default for ClaudeSettings {
    fn default() -> ClaudeSettings {
        ClaudeSettings {
            tool_name: ToolNameForm::Gateway,
            permission_mode: "default".into(),
            plugin_root: None,
            ask_fallback: AskFallback::Deny,
            if_rule: None,
            once: false,
            run_async: false,
            on_failure: OnFailure::Continue,
            continue_on_block: false,
        }
    }
}

/// How a hook runs.
#[derive(Debug, Clone, PartialEq)]
pub enum HookKindSpec {
    /// Spawned per event: with the shell (as toolfunnel does), or, with `args`, as a program
    /// and its arguments without a shell (Claude Code's exec form).
    Command {
        /// The command line (or, with `args`, the program), `${HOOKS_DIR}` expanded.
        command: String,
        /// The exec form's arguments (no shell).
        args: Option<Vec<String>>,
        /// The script file, relative to the hooks folder (for editing).
        script: Option<String>,
    },
    /// One long-lived child speaking JSON lines.
    Process {
        /// The command line, `${HOOKS_DIR}` expanded.
        command: String,
    },
    /// A hook service: the event is POSTed to `url`.
    Http {
        /// The service URL.
        url: String,
        /// Extra request headers.
        headers: BTreeMap<String, String>,
        /// Claude Code's `allowedEnvVars`: the environment variables a header value may name
        /// (`$NAME` / `${NAME}`). With it, or with the claude-code protocol, header values are
        /// expanded as Claude Code expands them (an unlisted name becomes the empty string).
        allowed_env_vars: Option<Vec<String>>,
        /// How its answers are read.
        protocol: HttpProtocol,
    },
    /// A hook server built on Civic's `@civic/hook-common` (its tRPC protocol), taking part in
    /// both phases as in Civic's passthrough.
    Civic {
        /// The server's URL (Civic's `HOOKS` URL).
        url: String,
    },
    /// Claude Code's `mcp_tool` handler: a tool of one of Sluice's own upstreams is called, and
    /// its result (the JSON text of its content) is the hook's answer.
    McpTool {
        /// The upstream's name.
        server: String,
        /// The upstream's own name of the tool.
        tool: String,
        /// The arguments; `${path}` in a string is a value of the hook input
        /// (`${tool_input.file_path}`).
        input: Value,
    },
    /// Rust, in process.
    Builtin {
        /// Which builtin (`explain`, …).
        name: String,
        /// Its settings, parsed.
        options: BuiltinOptions,
    },
}

/// One hook of the manifest.
#[derive(Debug, Clone, PartialEq)]
pub struct HookSpec {
    /// Unique key (`<kebab-event>/<script-basename>` by convention).
    pub id: String,
    /// The lifecycle event.
    pub event: HookEventKind,
    /// Tool-name regex, full match (`""` / `"*"` = always).
    pub matcher: String,
    /// Method globs (`tools/*`, `*`).
    pub methods: Vec<String>,
    /// How it runs.
    pub kind: HookKindSpec,
    /// Per-event timeout.
    pub timeout: Duration,
    /// What a failure means.
    pub on_error: OnError,
    /// Live enabled state (the overlay wins over the manifest).
    pub enabled: bool,
    /// For people.
    pub description: String,
    /// Its Claude Code settings.
    pub claude: ClaudeSettings,
    /// command/process: what the kernel confines the hook's process to; `None`: unconfined.
    pub sandbox: Option<crate::sandbox::Sandbox>,
}

/// The loaded manifest.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct HooksFile {
    /// The hooks folder (`${HOOKS_DIR}`).
    pub hooks_dir: PathBuf,
    /// Hooks in manifest order (the chain order).
    pub hooks: Vec<HookSpec>,
}

/// The builtins that select `tools/call` unless `methods` says otherwise, whatever the event:
/// the response controls (they run before every other response hook) and `rate-limit`.
const TOOLS_CALL_BY_DEFAULT: &[&str] = &["mask", "pii", "size-cap", "rate-limit"];

/// The longest timeout, in seconds, a hook or a registered tool may have (a day).
pub(crate) const MAX_TIMEOUT_SECS: f64 = 86_400.0;

fn inside(base: &Path, rel: &str) -> bool {
    let p = Path::new(rel);
    if p.is_absolute() {
        return false;
    }
    let mut depth: i64 = 0;
    for c in p.components() {
        match c {
            Component::ParentDir => depth -= 1,
            Component::Normal(_) => depth += 1,
            _ => {}
        }
        if depth < 0 {
            return false;
        }
    }
    let _ = base;
    true
}

/// Read the overlay: a flat `{id: bool}` map or `{"version", "enabled": {id: bool}}`. Missing or
/// malformed → no overrides (with a warning when malformed).
fn overlay(file: &Path, warnings: &mut Vec<String>) -> BTreeMap<String, bool> {
    let mut scratch = Vec::new();
    let Some(v) = read_json(file, &mut scratch) else {
        for e in scratch {
            warnings.push(format!("{e} (ignored: no overrides)"));
        }
        return BTreeMap::new();
    };
    let map: Option<&Map<String, Value>> = match v.get("enabled") {
        Some(Value::Object(m)) => Some(m),
        _ => v.as_object(),
    };
    let mut out = BTreeMap::new();
    if let Some(m) = map {
        for (k, v) in m {
            if let Some(b) = v.as_bool() {
                out.insert(k.clone(), b);
            }
        }
    } else {
        warnings.push(format!(
            "{}: not a JSON object (ignored: no overrides)",
            file.display()
        ));
    }
    out
}

pub(crate) fn load(
    home: &Path,
    env: &dyn Fn(&str) -> Option<String>,
    errors: &mut Vec<ConfigError>,
    warnings: &mut Vec<String>,
) -> HooksFile {
    let dir = home.join("hooks");
    let file = dir.join("hooks.manifest.json");
    let mut out = HooksFile {
        hooks_dir: dir.clone(),
        hooks: Vec::new(),
    };
    let Some(root) = read_object(&file, errors) else {
        return out;
    };
    let root = &root;
    let mut top = Fields {
        file: &file,
        path: String::new(),
        obj: root,
        errors,
    };
    if let Some(d) = top.string("hooksDir") {
        out.hooks_dir = PathBuf::from(d);
    }
    let entries = top.array("hooks");
    let state = overlay(&dir.join("hooks.state.json"), warnings);
    let list = List {
        file: &file,
        field: "hooks",
        hooks_dir: &out.hooks_dir,
        overlay: &|id| state.get(id).copied(),
        on_by_default: false,
    };
    out.hooks = entries_of(
        home,
        &list,
        &entries,
        &mut HashSet::new(),
        env,
        errors,
        warnings,
    );
    order_warnings(&file, &out.hooks, warnings);
    out
}

/// Where a list of hook entries is (the manifest's `hooks`, or an endpoint's in
/// `mcp/endpoints.json`) and how its entries' `enabled` is decided.
pub(crate) struct List<'a> {
    /// The file the entries are in.
    pub file: &'a Path,
    /// The list's field path (`hooks`, `endpoints[0].hooks`).
    pub field: &'a str,
    /// `${HOOKS_DIR}`.
    pub hooks_dir: &'a Path,
    /// A hook's `enabled` by its id, when something other than its entry says (the
    /// manifest's overlay, which wins over the entry).
    pub overlay: &'a dyn Fn(&str) -> Option<bool>,
    /// `enabled` when neither says: off in the manifest (as toolfunnel does), on in an
    /// endpoint.
    pub on_by_default: bool,
}

/// The hooks of a list of manifest entries (`ids`: the ids taken so far; a duplicate is an
/// error).
pub(crate) fn entries_of(
    home: &Path,
    list: &List<'_>,
    entries: &[Value],
    ids: &mut HashSet<String>,
    env: &dyn Fn(&str) -> Option<String>,
    errors: &mut Vec<ConfigError>,
    warnings: &mut Vec<String>,
) -> Vec<HookSpec> {
    let file = list.file;
    let dir = home.join("hooks");
    let hooks_dir_str = list.hooks_dir.to_string_lossy().into_owned();
    let mut out = Vec::new();
    for (i, h) in entries.iter().enumerate() {
        let Some(mut f) = entry(file, list.field, i, h, errors) else {
            continue;
        };
        let obj = f.obj;
        let id = f.required_string("id");
        if !id.is_empty() && !ids.insert(id.clone()) {
            f.err("id", format!("duplicate hook id {id:?}"));
        }
        let kind_name = f.string("type").unwrap_or_else(|| "command".into());
        let event = match f.string("event") {
            Some(e) => match HookEventKind::parse(&e) {
                Some(k) => Some(k),
                None => {
                    f.err("event", format!("unknown event {e:?} (SessionStart, UserPromptSubmit, PreToolUse, PostToolUse, PostToolUseFailure, Elicitation, ElicitationResult, Stop, SessionEnd, PreCompact, Request, Response)"));
                    None
                }
            },
            // A builtin chooses its own selection, a Civic hook server takes part in both
            // phases; the others need an event.
            None if kind_name == "builtin" || kind_name == "civic" => Some(HookEventKind::Request),
            None => {
                f.err("event", "is required");
                None
            }
        };
        let matcher = f.string("matcher").unwrap_or_default();
        if !matcher.is_empty()
            && matcher != "*"
            && !is_name_list(&matcher)
            && regex::Regex::new(&matcher).is_err()
        {
            warnings.push(format!(
                "{}: {}.matcher: {matcher:?} is not a valid regex; the hook never matches",
                file.display(),
                f.path
            ));
        }
        let expand = |s: String| s.replace("${HOOKS_DIR}", &hooks_dir_str);
        let kind = match kind_name.as_str() {
            "command" => {
                let command = expand(f.required_string("command"));
                let args = obj
                    .get("args")
                    .is_some()
                    .then(|| f.strings("args").into_iter().map(expand).collect());
                let script = f.string("script");
                if let Some(s) = &script {
                    if !inside(&dir, s) {
                        f.err("script", format!("{s:?} escapes the hooks folder"));
                    }
                }
                Some(HookKindSpec::Command {
                    command,
                    args,
                    script,
                })
            }
            "process" => Some(HookKindSpec::Process {
                command: expand(f.required_string("command")),
            }),
            "http" => {
                let url = f.required_string("url");
                let http_url = url.starts_with("http://") || url.starts_with("https://");
                if !url.is_empty() && !http_url {
                    f.err("url", format!("{url:?} is not an http:// or https:// URL"));
                }
                let protocol = match f.string("protocol").as_deref() {
                    None | Some("zato") => HttpProtocol::Zato,
                    Some("claude-code") => HttpProtocol::ClaudeCode,
                    Some(other) => {
                        f.err(
                            "protocol",
                            format!("unknown protocol {other:?} (zato or claude-code)"),
                        );
                        HttpProtocol::Zato
                    }
                };
                let allowed_env_vars = f
                    .obj
                    .contains_key("allowed_env_vars")
                    .then(|| f.strings("allowed_env_vars"));
                Some(HookKindSpec::Http {
                    url,
                    headers: f.string_map("headers"),
                    allowed_env_vars,
                    protocol,
                })
            }
            "civic" => {
                let url = f.required_string("url");
                if !url.is_empty() && !url.starts_with("http://") && !url.starts_with("https://") {
                    f.err("url", format!("{url:?} is not an http:// or https:// URL"));
                }
                if let Some(e) = f.string("event") {
                    f.err(
                        "event",
                        format!(
                            "a civic hook takes part in both phases; leave out `event` (got {e:?})"
                        ),
                    );
                }
                Some(HookKindSpec::Civic { url })
            }
            "mcp_tool" => {
                let server = f.required_string("server");
                let tool = f.required_string("tool");
                let input = match obj.get("input") {
                    None | Some(Value::Null) => Value::Object(Map::new()),
                    Some(v @ Value::Object(_)) => v.clone(),
                    Some(_) => {
                        f.err("input", "must be an object (the tool's arguments)");
                        Value::Object(Map::new())
                    }
                };
                Some(HookKindSpec::McpTool {
                    server,
                    tool,
                    input,
                })
            }
            "builtin" => {
                let name = f.required_string("builtin");
                let options = obj.get("options").unwrap_or(&Value::Null);
                match BuiltinOptions::parse(&name, options) {
                    Some(Ok(options)) => Some(HookKindSpec::Builtin { name, options }),
                    Some(Err(problems)) => {
                        for p in problems {
                            f.err(&p.field, p.message);
                        }
                        None
                    }
                    None => {
                        if !name.is_empty() {
                            f.err(
                                "builtin",
                                format!(
                                    "unknown builtin {name:?} (known: {})",
                                    BUILTINS.join(", ")
                                ),
                            );
                        }
                        None
                    }
                }
            }
            other => {
                f.err(
                    "type",
                    format!(
                        "unknown hook type {other:?} (command, process, http, mcp_tool, builtin or civic)"
                    ),
                );
                None
            }
        };
        let sandbox = if matches!(kind_name.as_str(), "command" | "process") {
            crate::sandbox::load(&mut f, home, env)
        } else {
            if obj.get("sandbox").is_some_and(|v| !v.is_null()) {
                f.err(
                    "sandbox",
                    "only a command or process hook can be sandboxed (it is the one that runs a process)",
                );
            }
            None
        };
        let default_timeout = if kind_name == "command" || kind_name == "mcp_tool" {
            60.0
        } else {
            10.0
        };
        let timeout = match obj.get("timeout") {
            None | Some(Value::Null) => default_timeout,
            Some(v) => match v.as_f64() {
                Some(t) if t > MAX_TIMEOUT_SECS => {
                    f.err(
                        "timeout",
                        format!("must be at most {MAX_TIMEOUT_SECS} seconds (a day)"),
                    );
                    default_timeout
                }
                Some(t) if t > 0.0 => t,
                // As toolfunnel does: absent or non-positive → the default.
                Some(_) => default_timeout,
                None => {
                    f.err("timeout", "must be a number of seconds");
                    default_timeout
                }
            },
        };
        let on_error = match f.string("on_error").as_deref() {
            None | Some("refuse") => OnError::Refuse,
            Some("pass") => OnError::Pass,
            Some(other) => {
                f.err(
                    "on_error",
                    format!("unknown on_error {other:?} (refuse or pass)"),
                );
                OnError::Refuse
            }
        };
        // As toolfunnel does: the manifest's `enabled` is normalised to a strict boolean (omitted = false);
        // the overlay wins.
        let seed_enabled = obj.get("enabled").and_then(Value::as_bool);
        let enabled = (list.overlay)(&id)
            .or(seed_enabled)
            .unwrap_or(list.on_by_default);
        let methods = match obj.get("methods") {
            Some(_) => f.strings("methods"),
            // A response control sees tools/call replies, and rate-limit tools/call requests,
            // unless they say otherwise.
            None if matches!(&kind, Some(HookKindSpec::Builtin { name, .. }) if TOOLS_CALL_BY_DEFAULT.contains(&name.as_str())) =>
            {
                vec!["tools/call".into()]
            }
            None => event
                .map(HookEventKind::default_methods)
                .unwrap_or_default(),
        };
        let description = f.string("description").unwrap_or_default();
        let claude = claude_settings(&mut f);
        if claude.if_rule.is_some() {
            let tool_event = matches!(
                event,
                Some(
                    HookEventKind::PreToolUse
                        | HookEventKind::PostToolUse
                        | HookEventKind::PostToolUseFailure
                )
            );
            if !tool_event {
                warnings.push(format!(
                    "{}: hook {id:?}: `if` applies to tool events only (PreToolUse, PostToolUse, PostToolUseFailure); as in Claude Code, a hook with `if` on another event never runs",
                    file.display()
                ));
            }
        }
        if claude.continue_on_block && event != Some(HookEventKind::PostToolUse) {
            warnings.push(format!(
                "{}: hook {id:?}: `continue_on_block` applies to PostToolUse hooks only; ignored",
                file.display()
            ));
        }
        if let Some(ev @ (HookEventKind::UserPromptSubmit | HookEventKind::PreCompact)) = event {
            warnings.push(format!(
                "{}: hook {id:?}: {} happens inside the agent and never crosses the wire; Sluice accepts it and never fires it",
                file.display(),
                ev.name()
            ));
        }
        if let (Some(event), Some(kind)) = (event, kind) {
            out.push(HookSpec {
                id,
                event,
                matcher,
                methods,
                kind,
                timeout: Duration::from_secs_f64(timeout),
                on_error,
                enabled,
                description,
                claude,
                sandbox,
            });
        }
    }
    out
}

/// A hook's Claude Code settings: `tool_name`, `permission_mode`, `plugin_root`, `ask_fallback`.
fn claude_settings(f: &mut Fields) -> ClaudeSettings {
    let mut c = ClaudeSettings::default();
    match f.string("tool_name").as_deref() {
        None | Some("gateway") => {}
        Some("mcp") => c.tool_name = ToolNameForm::Mcp,
        Some(other) => f.err(
            "tool_name",
            format!("unknown tool name form {other:?} (gateway or mcp)"),
        ),
    }
    if let Some(mode) = f.string("permission_mode") {
        if PERMISSION_MODES.contains(&mode.as_str()) {
            c.permission_mode = mode;
        } else {
            f.err(
                "permission_mode",
                format!(
                    "unknown permission mode {mode:?} ({})",
                    PERMISSION_MODES.join(", ")
                ),
            );
        }
    }
    c.plugin_root = f.string("plugin_root").map(PathBuf::from);
    match f.string("ask_fallback").as_deref() {
        None | Some("deny") => {}
        Some("allow") => c.ask_fallback = AskFallback::Allow,
        Some(other) => f.err(
            "ask_fallback",
            format!("unknown ask_fallback {other:?} (deny or allow)"),
        ),
    }
    c.if_rule = f.string("if").filter(|r| !r.trim().is_empty());
    c.once = f.bool("once", false);
    c.run_async = f.bool("async", false);
    match f.string("on_failure").as_deref() {
        None | Some("continue") => {}
        Some("block") => c.on_failure = OnFailure::Block,
        Some(other) => f.err(
            "on_failure",
            format!("unknown on_failure {other:?} (continue or block)"),
        ),
    }
    c.continue_on_block = f.bool("continue_on_block", false);
    c
}

/// Is a matcher a list of exact names (only letters, digits, `_`, `-`, spaces, `,` and `|`,
/// as Claude Code reads it: `Bash`, `Edit|Write`, `mcp__crm__find, mcp__crm__get`)? Any other
/// matcher is a regex.
pub fn is_name_list(matcher: &str) -> bool {
    matcher
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | ' ' | ',' | '|' | '-'))
}

/// `validate` checks the arguments as they are when it runs: an `explain` after it still has the
/// agent's `reason` in them, and a `rewrite` after it changes them unchecked.
fn order_warnings(file: &Path, hooks: &[HookSpec], warnings: &mut Vec<String>) {
    fn builtin(h: &HookSpec) -> Option<&str> {
        match &h.kind {
            HookKindSpec::Builtin { name, .. } if h.enabled => Some(name.as_str()),
            _ => None,
        }
    }
    for (i, v) in hooks.iter().enumerate() {
        if builtin(v) != Some("validate") {
            continue;
        }
        for later in &hooks[i + 1..] {
            let why = match builtin(later) {
                Some("explain") => "the agent's `reason` is still in the arguments it checks",
                Some("rewrite") => "the arguments that rewrite changes are not checked",
                _ => continue,
            };
            warnings.push(format!(
                "{}: hook {:?} (validate) comes before hook {:?}: {why}; put validate after it",
                file.display(),
                v.id,
                later.id
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builtin::redis_url_problem;
    use serde_json::json;

    /// Load a manifest with these hooks; returns the hooks, the errors and the warnings (as
    /// text, the file name left out).
    fn load_hooks(label: &str, hooks: Value) -> (Vec<HookSpec>, Vec<String>, Vec<String>) {
        let home = std::env::temp_dir().join(format!(
            "sluice-config-hooks-{label}-{}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&home);
        std::fs::create_dir_all(home.join("hooks")).unwrap();
        let file = home.join("hooks/hooks.manifest.json");
        std::fs::write(&file, json!({"hooks": hooks}).to_string()).unwrap();
        let (mut errors, mut warnings) = (Vec::new(), Vec::new());
        let out = load(&home, &|_| None, &mut errors, &mut warnings);
        let _ = std::fs::remove_dir_all(&home);
        let strip = |s: String| s.replace(&format!("{}: ", file.display()), "");
        (
            out.hooks,
            errors.into_iter().map(|e| strip(e.to_string())).collect(),
            warnings.into_iter().map(strip).collect(),
        )
    }

    fn builtin(id: &str, name: &str, options: Value) -> Value {
        json!({"id": id, "type": "builtin", "builtin": name, "options": options, "enabled": true})
    }

    #[test]
    fn a_timeout_past_a_day_is_an_error_naming_the_field() {
        let mut hook = builtin("explain", "explain", Value::Null);
        hook["event"] = json!("PreToolUse");
        hook["timeout"] = json!(5.5e25);
        let (hooks, errors, _) = load_hooks("timeout", json!([hook]));
        assert_eq!(
            errors,
            ["hooks[0].timeout: must be at most 86400 seconds (a day)"]
        );
        // The entry stays, with the default timeout (10 s for a builtin).
        assert_eq!(hooks.len(), 1);
        assert_eq!(hooks[0].timeout, Duration::from_secs(10));
    }

    #[test]
    fn good_builtin_options_load() {
        let (hooks, errors, warnings) = load_hooks(
            "good",
            json!([
                builtin("explain", "explain", Value::Null),
                builtin("deny", "deny", json!({"tools": ["crm\\.order\\.cancel"], "arguments": [{"path": "command", "pattern": "rm\\s+-rf", "reason": "no"}]})),
                builtin("rewrite", "rewrite", json!({"rules": [{"tool": "crm\\.order\\.status", "set": {"region": "eu-central"}}]})),
                builtin("validate", "validate", json!({})),
                builtin("describe", "describe", json!({"tools": {"crm.order.status": {"title": "T", "properties": {"order": {"description": "d"}}, "hide": ["region"]}}})),
                builtin("mask", "mask", json!({"paths": ["/a/b", "c.*.d"], "keys": ["password"]})),
                builtin("pii", "pii", json!({"kinds": ["email", "CARD"], "allow_tools": ["fx_.*"]})),
                builtin("size-cap", "size-cap", json!({"max_bytes": 1000, "mode": "refuse", "per_tool": {"fx_*": 10, "big\\..*": 100}})),
                {"id": "mask-all", "type": "builtin", "builtin": "mask", "methods": ["*"], "options": {"keys": ["k"]}}
            ]),
        );
        assert_eq!(errors, Vec::<String>::new());
        assert_eq!(warnings, Vec::<String>::new());
        assert_eq!(hooks.len(), 9);
        // Controls see tools/call replies unless they say otherwise.
        assert_eq!(hooks[5].methods, ["tools/call"]);
        assert_eq!(hooks[8].methods, ["*"]);
    }

    #[test]
    fn bad_builtin_options_name_file_and_field() {
        let (_, errors, _) = load_hooks(
            "bad",
            json!([
                builtin(
                    "d",
                    "deny",
                    json!({"tools": ["(["], "arguments": [{"path": "a..b"}], "colour": 1})
                ),
                builtin(
                    "r",
                    "rewrite",
                    json!({"rules": [{"tool": "x"}, {"set": {"": 1}}]})
                ),
                builtin("m", "mask", json!({})),
                builtin("p", "pii", json!({"kinds": ["EMAIL", "SHOE_SIZE"]})),
                builtin(
                    "s",
                    "size-cap",
                    json!({"max_bytes": 0, "mode": "snip", "per_tool": {"a(": 5}})
                ),
                builtin("v", "validate", json!({"strict": true})),
                builtin(
                    "ds",
                    "describe",
                    json!({"tools": {"t": {"hide": "region", "properties": {"a": 1}}}})
                ),
                builtin("e", "explain", json!([])),
                builtin("r2", "rewrite", Value::Null)
            ]),
        );
        let expected = [
            "hooks[0].options.colour: unknown option (known: tools, arguments, reason)",
            "hooks[0].options.tools[0]: \"([\" is not a valid regex: unclosed character class",
            "hooks[0].options.arguments[0].pattern: is required",
            "hooks[0].options.arguments[0].path: \"a..b\" has an empty segment (write a JSON pointer such as \"/a/b\" for keys with dots)",
            "hooks[1].options.rules[0]: needs `set`, `default` or `remove`",
            "hooks[1].options.rules[1].set.: must not be empty",
            "hooks[2].options: mask needs `paths` or `keys`",
            "hooks[3].options.kinds[1]: unknown kind \"SHOE_SIZE\" (known: EMAIL, PHONE, CARD, IBAN, SSN, IP, JWT, PRIVATE_KEY, SECRET)",
            "hooks[4].options.max_bytes: must be a positive integer",
            "hooks[4].options.mode: unknown mode \"snip\" (truncate or refuse)",
            "hooks[4].options.per_tool.a(: \"a(\" is not a valid regex: unclosed group",
            "hooks[5].options.strict: unknown option (known: none)",
            "hooks[6].options.tools.t.properties.a: must be an object",
            "hooks[6].options.tools.t.hide: must be an array of strings",
            "hooks[7].options: must be an object",
            "hooks[8].options.rules: is required (an array of rules)",
        ];
        for e in expected {
            assert!(
                errors.iter().any(|x| x == e),
                "missing {e:?} in {errors:#?}"
            );
        }
        assert_eq!(errors.len(), expected.len(), "{errors:#?}");
    }

    #[test]
    fn rate_limit_options_are_checked() {
        let (hooks, errors, warnings) = load_hooks(
            "rl-good",
            json!([
                builtin("rl", "rate-limit", json!({
                    "global": {"rate": 100, "per": "second", "burst": 200},
                    "per_principal": {"rate": 0.5, "per": "minute"},
                    "per_tool": {"*": {"rate": 5, "per": "second"}, "fx_slow": {"rate": 1, "per": "hour", "burst": 1}, "crm\\..*": {"rate": 2, "per": "second"}},
                    "redis": "redis://:secret@127.0.0.1:6379/0",
                    "key_prefix": "sluice:rl:"
                })),
                {"id": "rl-all", "type": "builtin", "builtin": "rate-limit", "methods": ["*"], "timeout": 0.5, "on_error": "pass",
                 "options": {"per_principal": {"rate": 1, "per": "second"}}}
            ]),
        );
        assert_eq!(errors, Vec::<String>::new());
        assert_eq!(warnings, Vec::<String>::new());
        // tools/call unless it says otherwise.
        assert_eq!(hooks[0].methods, ["tools/call"]);
        assert_eq!(hooks[1].methods, ["*"]);
        assert_eq!(hooks[1].on_error, OnError::Pass);

        let (_, errors, _) = load_hooks(
            "rl-bad",
            json!([
                builtin("a", "rate-limit", json!({})),
                builtin(
                    "b",
                    "rate-limit",
                    json!({
                        "global": {"rate": 0, "per": "day", "burst": 0, "every": 1},
                        "per_principal": {"per": 1},
                        "per_tool": {"a(": {"rate": 1, "per": "second"}, "fx_*": 3},
                        "redis": "http://x",
                        "key_prefix": "",
                        "shards": 2
                    })
                ),
                builtin(
                    "c",
                    "rate-limit",
                    json!({"per_tool": {}, "redis": "redis://u:pw@:6379/x"})
                ),
                builtin(
                    "d",
                    "rate-limit",
                    json!({"global": {"rate": 1, "per": "second"}, "redis": "redis://h:99999"})
                )
            ]),
        );
        let expected = [
            "hooks[0].options: rate-limit needs `global`, `per_principal` or `per_tool`",
            "hooks[1].options.shards: unknown option (known: global, per_principal, per_tool, redis, key_prefix)",
            "hooks[1].options.global.every: unknown option (known: rate, per, burst)",
            "hooks[1].options.global.rate: must be a positive number",
            "hooks[1].options.global.per: unknown unit \"day\" (second, minute or hour)",
            "hooks[1].options.global.burst: must be a positive integer",
            "hooks[1].options.per_principal.rate: is required",
            "hooks[1].options.per_principal.per: must be a string",
            "hooks[1].options.per_tool.a(: \"a(\" is not a valid regex: unclosed group",
            "hooks[1].options.per_tool.fx_*: must be an object",
            "hooks[1].options.redis: \"http://x\" is not a redis:// URL",
            "hooks[1].options.key_prefix: must not be empty",
            "hooks[2].options: rate-limit needs `global`, `per_principal` or `per_tool`",
            "hooks[2].options.redis: \"redis://***@:6379\" names no host",
            "hooks[3].options.redis: \"redis://h:99999\" has an invalid port",
        ];
        for e in expected {
            assert!(
                errors.iter().any(|x| x == e),
                "missing {e:?} in {errors:#?}"
            );
        }
        assert_eq!(errors.len(), expected.len(), "{errors:#?}");
        assert_eq!(
            redis_url_problem("redis://h/x").as_deref(),
            Some("the database \"x\" is not a number (redis://host:port/0)")
        );
        assert_eq!(redis_url_problem("redis://[::1]:6379/1"), None);
        assert_eq!(redis_url_problem("redis://[::1]"), None);
        assert_eq!(redis_url_problem("redis://localhost"), None);
    }

    #[test]
    fn validate_before_explain_or_rewrite_is_a_warning() {
        let (_, errors, warnings) = load_hooks(
            "order",
            json!([
                builtin("v", "validate", Value::Null),
                builtin("x", "explain", Value::Null),
                builtin("r", "rewrite", json!({"rules": [{"set": {"a": 1}}]}))
            ]),
        );
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(
            warnings,
            [
                "hook \"v\" (validate) comes before hook \"x\": the agent's `reason` is still in the arguments it checks; put validate after it",
                "hook \"v\" (validate) comes before hook \"r\": the arguments that rewrite changes are not checked; put validate after it"
            ]
        );
    }
}
