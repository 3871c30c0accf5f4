//! `sluice import claude-hooks`: a Claude Code `settings.json` hooks block, or a plugin's
//! `hooks/hooks.json`, as manifest entries. Pure: the caller reads the file and writes the
//! manifest (validated, atomically, through [`crate::manage`]).
//!
//! Each `{"matcher", "hooks": [handler…]}` group of an event Sluice fires becomes one entry per
//! handler: `command` handlers keep their command (and `args`, the exec form), `http` handlers
//! become `http` hooks with `"protocol": "claude-code"` (with `headers` and `allowedEnvVars`),
//! `mcp_tool` handlers `mcp_tool` hooks (`server` names one of Sluice's upstreams); every
//! handler keeps `if`, `once`, `async` (`asyncRewake` too, without the rewake), `onFailure` and
//! `continueOnBlock` (as `if`, `once`, `async`, `on_failure`, `continue_on_block`); `statusMessage`
//! (a spinner in Claude Code's terminal) has nothing to show behind a gateway and is left out.
//! Ids follow the manifest's convention,
//! `<kebab-event>/<script-basename>` (a number is added when taken). Imported hooks are
//! enabled, carry `"tool_name": "mcp"` unless asked otherwise (Claude Code's names for MCP tools,
//! which their matchers and scripts expect), and, from a plugin, `plugin_root` (so
//! `${CLAUDE_PLUGIN_ROOT}` means the plugin's folder). Every event Sluice never fires, and every
//! handler type it cannot run (`prompt`, `agent`: they need Claude Code's model), is left out
//! with a warning that says why.

use serde_json::{json, Map, Value};
use std::collections::HashSet;
use std::path::Path;

/// The events an imported hook can be attached to (the ones a gateway sees).
const FIRED: &[&str] = &[
    "PreToolUse",
    "PostToolUse",
    "PostToolUseFailure",
    "Elicitation",
    "ElicitationResult",
    "SessionStart",
    "Stop",
    "SessionEnd",
];

/// What an import produced.
#[derive(Debug, Default, PartialEq)]
pub struct Translated {
    /// Manifest entries, in the file's order.
    pub entries: Vec<Value>,
    /// What was left out, and why.
    pub warnings: Vec<String>,
}

/// Why Sluice never fires `event` (Claude Code's events that do not cross the wire).
pub fn never_fired_because(event: &str) -> &'static str {
    match event {
        "UserPromptSubmit" | "UserPromptExpansion" => {
            "prompts stay inside the agent; a gateway never sees them"
        }
        "PreCompact" | "PostCompact" => "compaction happens inside the agent",
        "SubagentStart" | "SubagentStop" | "TeammateIdle" | "TaskCreated" | "TaskCompleted" => {
            "the agent's subagents and tasks never cross the wire"
        }
        "Notification" | "MessageDisplay" => {
            "the agent's messages to its user never cross the wire"
        }
        "PermissionRequest" | "PermissionDenied" => {
            "it is Claude Code's own permission dialog; behind Sluice a PreToolUse hook's `ask` reaches the person"
        }
        "PostToolBatch" => "Sluice sees tool calls one by one, not the agent's batches",
        "StopFailure" => "the agent's turn failing never crosses the wire",
        _ => "it happens inside Claude Code (its settings, files, worktrees, model or terminal) and never crosses the wire",
    }
}

fn kebab(event: &str) -> String {
    let mut out = String::new();
    for (i, c) in event.chars().enumerate() {
        if c.is_ascii_uppercase() {
            if i > 0 {
                out.push('-');
            }
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

/// The script a command runs, for the id: the module of `-m MODULE`, else the last word that
/// looks like a file (has a `/` or a `.`), else the program; its file name without extension.
fn script_basename(command: &str, args: Option<&[String]>) -> String {
    let mut words: Vec<String> = command
        .split_whitespace()
        .map(|w| w.trim_matches(|c| c == '"' || c == '\'').to_string())
        .collect();
    if let Some(a) = args {
        words.extend(a.iter().cloned());
    }
    let pick = words
        .iter()
        .position(|w| w == "-m")
        .and_then(|i| words.get(i + 1))
        .or_else(|| {
            words
                .iter()
                .skip(1)
                .rev()
                .find(|w| !w.starts_with('-') && (w.contains('/') || w.contains('.')))
        })
        .or(words.first());
    let name = pick.map(String::as_str).unwrap_or("hook");
    let file = name.rsplit('/').next().unwrap_or(name);
    let stem = match file.rsplit_once('.') {
        Some((s, _)) if !s.is_empty() => s,
        _ => file,
    };
    let clean: String = stem
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '-'
            }
        })
        .collect();
    if clean.is_empty() {
        "hook".into()
    } else {
        clean
    }
}

/// Translate the `hooks` block of `doc` (a `settings.json` or a plugin's `hooks.json`).
/// `taken`: ids already in the manifest. `plugin_root`: the plugin folder, for a plugin.
/// `tool_name`: `"mcp"` or `"gateway"`.
pub fn translate(
    doc: &Value,
    taken: &HashSet<String>,
    plugin_root: Option<&Path>,
    tool_name: &str,
) -> Result<Translated, String> {
    let hooks = match doc.get("hooks") {
        Some(Value::Object(h)) => h,
        Some(_) => return Err("`hooks` is not an object".into()),
        None => return Err("the file has no `hooks` block".into()),
    };
    let mut out = Translated::default();
    let mut ids: HashSet<String> = taken.clone();
    for (event, groups) in hooks {
        if !FIRED.contains(&event.as_str()) {
            out.warnings.push(format!(
                "{event}: left out: Sluice never fires it ({})",
                never_fired_because(event)
            ));
            continue;
        }
        let Some(groups) = groups.as_array() else {
            out.warnings
                .push(format!("{event}: left out: not an array of matcher groups"));
            continue;
        };
        for (gi, group) in groups.iter().enumerate() {
            let matcher = group.get("matcher").and_then(Value::as_str).unwrap_or("");
            let handlers = group
                .get("hooks")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            for (hi, h) in handlers.iter().enumerate() {
                let at = format!("{event}[{gi}].hooks[{hi}]");
                let kind = h.get("type").and_then(Value::as_str).unwrap_or("command");
                let mut e = Map::new();
                let base = match kind {
                    "command" => {
                        let Some(command) = h.get("command").and_then(Value::as_str) else {
                            out.warnings
                                .push(format!("{at}: left out: a command hook without `command`"));
                            continue;
                        };
                        let args: Option<Vec<String>> =
                            h.get("args").and_then(Value::as_array).map(|a| {
                                a.iter()
                                    .map(|x| {
                                        x.as_str()
                                            .map(str::to_string)
                                            .unwrap_or_else(|| x.to_string())
                                    })
                                    .collect()
                            });
                        e.insert("type".into(), json!("command"));
                        e.insert("command".into(), json!(command));
                        if let Some(a) = &args {
                            e.insert("args".into(), json!(a));
                        }
                        if h.get("shell").and_then(Value::as_str) == Some("powershell") {
                            out.warnings.push(format!(
                                "{at}: `shell: powershell`: Sluice runs the command with sh"
                            ));
                        }
                        script_basename(command, args.as_deref())
                    }
                    "http" => {
                        let Some(url) = h.get("url").and_then(Value::as_str) else {
                            out.warnings
                                .push(format!("{at}: left out: an http hook without `url`"));
                            continue;
                        };
                        e.insert("type".into(), json!("http"));
                        e.insert("url".into(), json!(url));
                        e.insert("protocol".into(), json!("claude-code"));
                        if let Some(hd) = h.get("headers").and_then(Value::as_object) {
                            e.insert("headers".into(), Value::Object(hd.clone()));
                        }
                        // Header values name environment variables as in Claude Code: only
                        // those `allowedEnvVars` lists are filled in (when the gateway runs).
                        if let Some(allowed) = h.get("allowedEnvVars").and_then(Value::as_array) {
                            let names: Vec<&str> =
                                allowed.iter().filter_map(Value::as_str).collect();
                            e.insert("allowed_env_vars".into(), json!(names));
                        }
                        url.trim_end_matches('/')
                            .rsplit('/')
                            .next()
                            .filter(|s| !s.is_empty() && !s.contains(':'))
                            .unwrap_or("http")
                            .to_string()
                    }
                    "mcp_tool" => {
                        let (Some(server), Some(tool)) = (
                            h.get("server").and_then(Value::as_str),
                            h.get("tool").and_then(Value::as_str),
                        ) else {
                            out.warnings.push(format!(
                                "{at}: left out: an mcp_tool hook without `server` and `tool`"
                            ));
                            continue;
                        };
                        e.insert("type".into(), json!("mcp_tool"));
                        e.insert("server".into(), json!(server));
                        e.insert("tool".into(), json!(tool));
                        if let Some(input) = h.get("input").filter(|i| i.is_object()) {
                            e.insert("input".into(), input.clone());
                        }
                        tool.to_string()
                    }
                    other => {
                        out.warnings.push(format!(
                            "{at}: left out: Sluice cannot run `{other}` hooks (prompt and agent hooks need Claude Code's model)"
                        ));
                        continue;
                    }
                };
                if let Some(rule) = h.get("if").and_then(Value::as_str) {
                    e.insert("if".into(), json!(rule));
                }
                if h.get("once") == Some(&Value::Bool(true)) {
                    e.insert("once".into(), json!(true));
                }
                let rewake = h.get("asyncRewake") == Some(&Value::Bool(true));
                if h.get("async") == Some(&Value::Bool(true)) || rewake {
                    e.insert("async".into(), json!(true));
                }
                if rewake {
                    out.warnings.push(format!("{at}: `asyncRewake`: runs in the background as `async`; there is no model to wake behind a gateway"));
                }
                match h.get("onFailure").and_then(Value::as_str) {
                    Some(f @ ("block" | "continue")) => {
                        e.insert("on_failure".into(), json!(f));
                    }
                    Some(other) => out.warnings.push(format!(
                        "{at}: `onFailure: {other:?}` is not block or continue; left as continue"
                    )),
                    None => {}
                }
                if h.get("continueOnBlock") == Some(&Value::Bool(true)) {
                    e.insert("continue_on_block".into(), json!(true));
                }
                let stem = format!("{}/{base}", kebab(event));
                let mut id = stem.clone();
                let mut n = 2;
                while ids.contains(&id) {
                    id = format!("{stem}-{n}");
                    n += 1;
                }
                ids.insert(id.clone());
                let mut entry = Map::new();
                entry.insert("id".into(), json!(id));
                entry.insert("event".into(), json!(event));
                entry.insert("matcher".into(), json!(matcher));
                for (k, v) in e {
                    entry.insert(k, v);
                }
                if let Some(t) = h
                    .get("timeout")
                    .and_then(Value::as_f64)
                    .filter(|t| *t > 0.0)
                {
                    entry.insert("timeout".into(), json!(t));
                }
                entry.insert("tool_name".into(), json!(tool_name));
                if let Some(root) = plugin_root {
                    entry.insert("plugin_root".into(), json!(root.to_string_lossy()));
                }
                entry.insert("enabled".into(), json!(true));
                entry.insert(
                    "description".into(),
                    json!(match plugin_root {
                        Some(r) => format!("Imported from the Claude Code plugin {}", r.display()),
                        None => "Imported from Claude Code settings".to_string(),
                    }),
                );
                out.entries.push(Value::Object(entry));
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_become_entries_and_the_rest_warnings() {
        let doc = json!({"hooks": {
            "PreToolUse": [{"matcher": "Bash|mcp__.*", "hooks": [
                {"type": "command", "command": "python3 -m azet_guard hook"},
                {"type": "command", "command": "node", "args": ["${CLAUDE_PLUGIN_ROOT}/hooks/check.js"], "timeout": 5},
                {"type": "http", "url": "http://127.0.0.1:9/hooks/pre"},
                {"type": "prompt", "prompt": "is this safe?"}
            ]}],
            "PostToolUse": [{"matcher": "mcp__fs__.*", "hooks": [
                {"type": "mcp_tool", "server": "policy", "tool": "scan_file", "input": {"path": "${tool_input.file_path}"},
                 "if": "mcp__fs__write", "once": true, "onFailure": "block", "continueOnBlock": true, "statusMessage": "scanning"},
                {"type": "command", "command": "log.sh", "asyncRewake": true},
                {"type": "mcp_tool", "server": "policy"}
            ]}],
            "UserPromptSubmit": [{"hooks": [{"type": "command", "command": "x"}]}],
            "PreCompact": [{"hooks": [{"type": "command", "command": "y"}]}]
        }});
        let taken: HashSet<String> = ["pre-tool-use/azet_guard".to_string()].into();
        let t = translate(&doc, &taken, Some(Path::new("/p")), "mcp").unwrap();
        let ids: Vec<&str> = t
            .entries
            .iter()
            .map(|e| e["id"].as_str().unwrap())
            .collect();
        assert_eq!(
            ids,
            [
                "pre-tool-use/azet_guard-2",
                "pre-tool-use/check",
                "pre-tool-use/pre",
                "post-tool-use/scan_file",
                "post-tool-use/log"
            ]
        );
        assert_eq!(
            t.entries[3],
            json!({"id": "post-tool-use/scan_file", "event": "PostToolUse", "matcher": "mcp__fs__.*",
                "type": "mcp_tool", "server": "policy", "tool": "scan_file", "input": {"path": "${tool_input.file_path}"},
                "if": "mcp__fs__write", "once": true, "on_failure": "block", "continue_on_block": true,
                "tool_name": "mcp", "plugin_root": "/p", "enabled": true,
                "description": "Imported from the Claude Code plugin /p"})
        );
        assert_eq!(t.entries[4]["async"], json!(true));
        assert_eq!(
            t.entries[1]["args"],
            json!(["${CLAUDE_PLUGIN_ROOT}/hooks/check.js"])
        );
        assert_eq!(t.entries[1]["timeout"], json!(5.0));
        assert_eq!(t.entries[2]["protocol"], "claude-code");
        assert_eq!(t.entries[0]["plugin_root"], "/p");
        assert_eq!(t.entries[0]["tool_name"], "mcp");
        assert_eq!(t.warnings.len(), 5, "{:?}", t.warnings);
        assert!(t.warnings[0]
            .starts_with("PreToolUse[0].hooks[3]: left out: Sluice cannot run `prompt` hooks"));
        assert!(t
            .warnings
            .iter()
            .any(|w| w.starts_with("PostToolUse[0].hooks[1]: `asyncRewake`")));
        assert!(t.warnings.iter().any(|w| w
            == "PostToolUse[0].hooks[2]: left out: an mcp_tool hook without `server` and `tool`"));
        assert!(t.warnings.iter().any(|w| w == "UserPromptSubmit: left out: Sluice never fires it (prompts stay inside the agent; a gateway never sees them)"));
        assert!(translate(&json!({}), &taken, None, "mcp").is_err());
        assert_eq!(
            script_basename("bash \"${HOOKS_DIR}/scripts/deny.sh\"", None),
            "deny"
        );
        assert_eq!(
            script_basename("claude-compress hook", None),
            "claude-compress"
        );
        assert_eq!(kebab("PostToolUseFailure"), "post-tool-use-failure");
    }
}
