//! `hooks/hooks.manifest.json` and its overlay `hooks/hooks.state.json` (seed 003's format),
//! plus Sluice's additions: the `Request` / `Response` events, `methods`, `on_error`, and the
//! `process`, `http` and `builtin` kinds.

use crate::error::ConfigError;
use crate::fields::{read_json, Fields};
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
    /// Happens inside the agent; never crosses the wire (accepted, never fired).
    PreCompact,
    /// Every message of the request phase (seed 002's request hook).
    Request,
    /// Every message of the response phase (seed 002's response hook).
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
            HookEventKind::PreCompact => "PreCompact",
            HookEventKind::Request => "Request",
            HookEventKind::Response => "Response",
        }
    }

    /// The methods a hook on this event sees unless it says otherwise.
    pub fn default_methods(self) -> Vec<String> {
        match self {
            HookEventKind::PreToolUse | HookEventKind::PostToolUse => vec!["tools/call".into()],
            HookEventKind::SessionStart => vec!["initialize".into()],
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

/// How a hook runs.
#[derive(Debug, Clone, PartialEq)]
pub enum HookKindSpec {
    /// Spawned per event with the shell (seed 003).
    Command {
        /// The command line, `${HOOKS_DIR}` expanded.
        command: String,
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
    },
    /// Rust, in process.
    Builtin {
        /// Which builtin (`explain`, …).
        name: String,
        /// Its settings.
        options: Value,
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
}

/// The loaded manifest.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct HooksFile {
    /// The hooks folder (`${HOOKS_DIR}`).
    pub hooks_dir: PathBuf,
    /// Hooks in manifest order (the chain order).
    pub hooks: Vec<HookSpec>,
}

/// The builtins this release knows.
pub const BUILTINS: &[&str] = &["explain"];

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
    errors: &mut Vec<ConfigError>,
    warnings: &mut Vec<String>,
) -> HooksFile {
    let dir = home.join("hooks");
    let file = dir.join("hooks.manifest.json");
    let mut out = HooksFile {
        hooks_dir: dir.clone(),
        hooks: Vec::new(),
    };
    let Some(root) = read_json(&file, errors) else {
        return out;
    };
    let Some(root) = root.as_object() else {
        errors.push(ConfigError::new(&file, "", "must be a JSON object"));
        return out;
    };
    let mut top = Fields {
        file: &file,
        path: String::new(),
        obj: root,
        errors,
    };
    if let Some(d) = top.string("hooksDir") {
        out.hooks_dir = PathBuf::from(d);
    }
    let hooks_dir_str = out.hooks_dir.to_string_lossy().into_owned();
    let entries = match root.get("hooks") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(a)) => a.clone(),
        Some(_) => {
            top.err("hooks", "must be an array");
            Vec::new()
        }
    };
    let state = overlay(&dir.join("hooks.state.json"), warnings);
    let mut ids = HashSet::new();
    for (i, h) in entries.iter().enumerate() {
        let path = format!("hooks[{i}]");
        let Some(obj) = h.as_object() else {
            errors.push(ConfigError::new(&file, path, "must be an object"));
            continue;
        };
        let mut f = Fields {
            file: &file,
            path,
            obj,
            errors,
        };
        let id = f.required_string("id");
        if !id.is_empty() && !ids.insert(id.clone()) {
            f.err("id", format!("duplicate hook id {id:?}"));
        }
        let kind_name = f.string("type").unwrap_or_else(|| "command".into());
        let event = match f.string("event") {
            Some(e) => match HookEventKind::parse(&e) {
                Some(k) => Some(k),
                None => {
                    f.err("event", format!("unknown event {e:?} (SessionStart, UserPromptSubmit, PreToolUse, PostToolUse, Stop, PreCompact, Request, Response)"));
                    None
                }
            },
            // A builtin chooses its own selection; the others need an event.
            None if kind_name == "builtin" => Some(HookEventKind::Request),
            None => {
                f.err("event", "is required");
                None
            }
        };
        let matcher = f.string("matcher").unwrap_or_default();
        if !matcher.is_empty()
            && matcher != "*"
            && regex::Regex::new(&format!("^(?:{matcher})$")).is_err()
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
                let script = f.string("script");
                if let Some(s) = &script {
                    if !inside(&dir, s) {
                        f.err("script", format!("{s:?} escapes the hooks folder"));
                    }
                }
                Some(HookKindSpec::Command { command, script })
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
                Some(HookKindSpec::Http {
                    url,
                    headers: f.string_map("headers"),
                })
            }
            "builtin" => {
                let name = f.required_string("builtin");
                if !name.is_empty() && !BUILTINS.contains(&name.as_str()) {
                    f.err(
                        "builtin",
                        format!("unknown builtin {name:?} (known: {})", BUILTINS.join(", ")),
                    );
                }
                Some(HookKindSpec::Builtin {
                    name,
                    options: obj.get("options").cloned().unwrap_or(Value::Null),
                })
            }
            other => {
                f.err(
                    "type",
                    format!("unknown hook type {other:?} (command, process, http or builtin)"),
                );
                None
            }
        };
        let default_timeout = if kind_name == "command" { 60.0 } else { 10.0 };
        let timeout = match obj.get("timeout") {
            None | Some(Value::Null) => default_timeout,
            Some(v) => match v.as_f64() {
                Some(t) if t > 0.0 => t,
                // Seed 003: absent or non-positive → the default.
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
        // Seed 003: the manifest's `enabled` is normalised to a strict boolean (omitted = false);
        // the overlay wins.
        let seed_enabled = obj.get("enabled").and_then(Value::as_bool).unwrap_or(false);
        let enabled = state.get(&id).copied().unwrap_or(seed_enabled);
        let methods = match obj.get("methods") {
            Some(_) => f.strings("methods"),
            None => event
                .map(HookEventKind::default_methods)
                .unwrap_or_default(),
        };
        let description = f.string("description").unwrap_or_default();
        if let Some(ev @ (HookEventKind::UserPromptSubmit | HookEventKind::PreCompact)) = event {
            warnings.push(format!(
                "{}: hook {id:?}: {} happens inside the agent and never crosses the wire; Sluice accepts it and never fires it",
                file.display(),
                ev.name()
            ));
        }
        if let (Some(event), Some(kind)) = (event, kind) {
            out.hooks.push(HookSpec {
                id,
                event,
                matcher,
                methods,
                kind,
                timeout: Duration::from_secs_f64(timeout),
                on_error,
                enabled,
                description,
            });
        }
    }
    out
}
