//! Management operations on a tree — the one implementation behind the CLI (`sluice tool|hook|
//! upstream|log …`), the MCP management tools and the admin API. Each edits the file's JSON in
//! place (unknown fields and key order kept), validates the whole tree with the loader on a
//! staged copy, and only then writes atomically. A running gateway picks the change up live.

use crate::error::ConfigErrors;
use crate::store;
use crate::Config;
use serde_json::{json, Map, Value};
use std::path::{Path, PathBuf};

/// Why a management operation failed.
#[derive(Debug, thiserror::Error)]
pub enum ManageError {
    /// The change would make the tree invalid (nothing was written).
    #[error("the change was not written; the tree would be invalid:\n{0}")]
    Invalid(ConfigErrors),
    /// The request itself is wrong (unknown id, bad value).
    #[error("{0}")]
    Bad(String),
    /// Reading or writing failed.
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

/// The tree files management touches, relative to the home folder.
pub const FILES: &[&str] = &[
    "sluice.json",
    "mcp/expose.json",
    "tools/tools.register.json",
    "tools/tools.state.json",
    "hooks/hooks.manifest.json",
    "hooks/hooks.state.json",
    "logs/log.config.json",
    "auth/auth.config.json",
];

fn read(home: &Path, rel: &str, default: Value) -> Result<Value, ManageError> {
    match std::fs::read_to_string(home.join(rel)) {
        Ok(t) => serde_json::from_str(&t)
            .map_err(|e| ManageError::Bad(format!("{rel} is not valid JSON ({e}); fix it first"))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(default),
        Err(e) => Err(e.into()),
    }
}

/// Validate the tree as it would be with `rel` replaced by `value`, then write it atomically.
fn commit(home: &Path, rel: &str, value: &Value) -> Result<(), ManageError> {
    let stage = std::env::temp_dir().join(format!(
        "sluice-stage-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0)
    ));
    for f in FILES {
        let src = home.join(f);
        if src.exists() {
            let dst = stage.join(f);
            std::fs::create_dir_all(dst.parent().expect("has a folder"))?;
            std::fs::copy(&src, &dst)?;
        }
    }
    store::write_json(&stage.join(rel), value)?;
    let env = |n: &str| std::env::var(n).ok();
    let result = Config::load(&stage, &env);
    let _ = std::fs::remove_dir_all(&stage);
    if let Err(errors) = result {
        // Name the real files, not the staging copy.
        let stage_s = stage.display().to_string();
        let home_s = home.display().to_string();
        let errors = ConfigErrors(
            errors
                .0
                .into_iter()
                .map(|mut e| {
                    e.file = e.file.replace(&stage_s, &home_s);
                    e
                })
                .collect(),
        );
        return Err(ManageError::Invalid(errors));
    }
    store::write_json(&home.join(rel), value)?;
    Ok(())
}

fn array<'a>(v: &'a mut Value, key: &str) -> &'a mut Vec<Value> {
    let o = v.as_object_mut().expect("an object");
    let a = o.entry(key).or_insert_with(|| json!([]));
    if !a.is_array() {
        *a = json!([]);
    }
    a.as_array_mut().expect("array")
}

/// Add a register tool (`entry` is its JSON, e.g. `{"id","name","invoke":{…}}`).
pub fn tool_add(home: &Path, entry: Value) -> Result<(), ManageError> {
    let rel = "tools/tools.register.json";
    let mut reg = read(
        home,
        rel,
        json!({"version": 1, "description": "", "tools": []}),
    )?;
    array(&mut reg, "tools").push(entry);
    commit(home, rel, &reg)
}

/// Set a register tool's overlay flags (`enabled`, `hidden`), merging with what is there.
pub fn tool_set(
    home: &Path,
    id: &str,
    enabled: Option<bool>,
    hidden: Option<bool>,
) -> Result<(), ManageError> {
    let reg = read(home, "tools/tools.register.json", json!({"tools": []}))?;
    let known = reg["tools"]
        .as_array()
        .is_some_and(|t| t.iter().any(|e| e["id"] == id));
    if !known {
        return Err(ManageError::Bad(format!(
            "no register tool has the id {id:?}"
        )));
    }
    let rel = "tools/tools.state.json";
    let mut state = read(home, rel, json!({})).unwrap_or(json!({}));
    if !state.is_object() {
        state = json!({});
    }
    let entry = state
        .as_object_mut()
        .expect("object")
        .entry(id)
        .or_insert_with(|| json!({}));
    if !entry.is_object() {
        *entry = json!({});
    }
    if let Some(e) = enabled {
        entry["enabled"] = json!(e);
    }
    if let Some(h) = hidden {
        entry["hidden"] = json!(h);
    }
    commit(home, rel, &state)
}

/// Add a hook to the manifest.
pub fn hook_add(home: &Path, entry: Value) -> Result<(), ManageError> {
    let rel = "hooks/hooks.manifest.json";
    let mut m = read(home, rel, json!({"version": 1, "hooks": []}))?;
    array(&mut m, "hooks").push(entry);
    commit(home, rel, &m)
}

/// Turn a hook on or off: the overlay (authoritative) and, mirrored, the manifest's initial
/// `enabled` (toolfunnel's `setEnabled`).
pub fn hook_set(home: &Path, id: &str, enabled: bool) -> Result<(), ManageError> {
    let rel = "hooks/hooks.manifest.json";
    let mut m = read(home, rel, json!({"hooks": []}))?;
    let Some(entry) = array(&mut m, "hooks").iter_mut().find(|h| h["id"] == id) else {
        return Err(ManageError::Bad(format!("no hook has the id {id:?}")));
    };
    entry["enabled"] = json!(enabled);
    commit(home, rel, &m)?;
    let srel = "hooks/hooks.state.json";
    let mut state = read(home, srel, json!({})).unwrap_or(json!({}));
    // Keep the wrapped form when the file uses it.
    let map: &mut Map<String, Value> = match state.get("enabled").map(Value::is_object) {
        Some(true) => state["enabled"].as_object_mut().expect("object"),
        _ => {
            if !state.is_object() {
                state = json!({});
            }
            state.as_object_mut().expect("object")
        }
    };
    map.insert(id.to_string(), json!(enabled));
    commit(home, srel, &state)
}

/// Add an upstream (`entry` in expose.json's format).
pub fn upstream_add(home: &Path, entry: Value) -> Result<(), ManageError> {
    let rel = "mcp/expose.json";
    let mut e = read(
        home,
        rel,
        json!({"version": 1, "on_collision": "error", "upstreams": [], "expose": []}),
    )?;
    array(&mut e, "upstreams").push(entry);
    commit(home, rel, &e)
}

/// Set fields of an upstream (e.g. `enabled`, `expose_all`).
pub fn upstream_set(home: &Path, id: &str, fields: Map<String, Value>) -> Result<(), ManageError> {
    let rel = "mcp/expose.json";
    let mut e = read(home, rel, json!({"upstreams": []}))?;
    let Some(entry) = array(&mut e, "upstreams")
        .iter_mut()
        .find(|u| u["id"] == id)
    else {
        return Err(ManageError::Bad(format!("no upstream has the id {id:?}")));
    };
    for (k, v) in fields {
        entry[k] = v;
    }
    commit(home, rel, &e)
}

/// Add a static token (by its SHA-256) to `auth/auth.config.json`, turning authentication on.
pub fn token_add(
    home: &Path,
    name: &str,
    sha256: &str,
    scopes: &[String],
) -> Result<(), ManageError> {
    let rel = "auth/auth.config.json";
    let mut c = read(home, rel, json!({"enabled": true}))?;
    if !c.is_object() {
        return Err(ManageError::Bad(format!(
            "{rel} is not a JSON object; fix it first"
        )));
    }
    c["enabled"] = json!(true);
    let tokens = array(&mut c, "tokens");
    if tokens.iter().any(|t| t["name"] == name) {
        return Err(ManageError::Bad(format!(
            "a token named {name:?} exists already"
        )));
    }
    tokens.push(json!({"name": name, "sha256": sha256, "scopes": scopes}));
    commit(home, rel, &c)
}

/// Turn the audit log on or off.
pub fn log_set(home: &Path, enabled: bool) -> Result<PathBuf, ManageError> {
    let rel = "logs/log.config.json";
    let mut c = read(
        home,
        rel,
        json!({"enabled": false, "path": "logs/audit.jsonl"}),
    )?;
    if !c.is_object() {
        c = json!({});
    }
    c["enabled"] = json!(enabled);
    if c.get("path").is_none() {
        c["path"] = json!("logs/audit.jsonl");
    }
    commit(home, rel, &c)?;
    Ok(home.join(c["path"].as_str().unwrap_or("logs/audit.jsonl")))
}

/// Set fields of the curated entry for `(upstream, tool)` (`enabled`, `as`, `category`),
/// creating the entry when the tool is listed only through `expose_all`: disabling or renaming
/// an upstream tool.
pub fn expose_set(
    home: &Path,
    upstream: &str,
    tool: &str,
    fields: Map<String, Value>,
) -> Result<(), ManageError> {
    let rel = "mcp/expose.json";
    let mut e = read(home, rel, json!({"upstreams": [], "expose": []}))?;
    let known = e["upstreams"]
        .as_array()
        .is_some_and(|u| u.iter().any(|u| u["id"] == upstream));
    if !known {
        return Err(ManageError::Bad(format!(
            "no upstream has the id {upstream:?}"
        )));
    }
    for k in fields.keys() {
        if !["enabled", "as", "category"].contains(&k.as_str()) {
            return Err(ManageError::Bad(format!(
                "{k:?} cannot be set on a tool (enabled, as, category can)"
            )));
        }
    }
    let list = array(&mut e, "expose");
    let i = match list
        .iter()
        .position(|x| x["upstream"] == upstream && x["tool"] == tool)
    {
        Some(i) => i,
        None => {
            list.push(json!({"upstream": upstream, "tool": tool}));
            list.len() - 1
        }
    };
    for (k, v) in fields {
        list[i][k] = v;
    }
    commit(home, rel, &e)
}

/// Change settings of a hook in the manifest (any field but `id`; `null` removes one).
pub fn hook_update(home: &Path, id: &str, fields: Map<String, Value>) -> Result<(), ManageError> {
    if fields.contains_key("id") {
        return Err(ManageError::Bad("a hook's id cannot be changed".into()));
    }
    let rel = "hooks/hooks.manifest.json";
    let mut m = read(home, rel, json!({"hooks": []}))?;
    let Some(entry) = array(&mut m, "hooks").iter_mut().find(|h| h["id"] == id) else {
        return Err(ManageError::Bad(format!("no hook has the id {id:?}")));
    };
    let obj = entry
        .as_object_mut()
        .ok_or_else(|| ManageError::Bad(format!("hook {id:?} is not a JSON object")))?;
    for (k, v) in fields {
        if v.is_null() {
            obj.remove(&k);
        } else {
            obj.insert(k, v);
        }
    }
    commit(home, rel, &m)
}

/// Move a hook to position `to` (0 = the head of the chain; past the end = the tail).
pub fn hook_move(home: &Path, id: &str, to: usize) -> Result<(), ManageError> {
    let rel = "hooks/hooks.manifest.json";
    let mut m = read(home, rel, json!({"hooks": []}))?;
    let hooks = array(&mut m, "hooks");
    let Some(from) = hooks.iter().position(|h| h["id"] == id) else {
        return Err(ManageError::Bad(format!("no hook has the id {id:?}")));
    };
    let h = hooks.remove(from);
    let to = to.min(hooks.len());
    hooks.insert(to, h);
    commit(home, rel, &m)
}

/// Turn an `mcpServers` JSON (Claude Desktop, Cursor, VS Code, Claude Code configs) into
/// upstream entries: `{"command", "args", "env", "cwd"}` become stdio upstreams, `{"url"}` (with
/// `"type": "sse"` for the legacy transport) HTTP ones. VS Code's `"servers"` key is read too.
/// Ids are the server names, made safe; every tool is listed (`expose_all`).
pub fn entries_from_mcp_servers(doc: &Value) -> Result<Vec<Value>, ManageError> {
    let servers = doc
        .get("mcpServers")
        .or_else(|| doc.get("servers"))
        .and_then(Value::as_object)
        .ok_or_else(|| {
            ManageError::Bad("no \"mcpServers\" (or \"servers\") object in the file".into())
        })?;
    let mut out = Vec::new();
    for (name, s) in servers {
        let id: String = name
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.' {
                    c
                } else {
                    '-'
                }
            })
            .collect();
        let mut e = Map::new();
        e.insert("id".into(), json!(id));
        if let Some(url) = s
            .get("url")
            .or_else(|| s.get("serverUrl"))
            .and_then(Value::as_str)
        {
            let sse = s.get("type").and_then(Value::as_str) == Some("sse")
                || s.get("transport").and_then(Value::as_str) == Some("sse");
            e.insert("transport".into(), json!(if sse { "sse" } else { "http" }));
            e.insert("url".into(), json!(url));
            if let Some(h) = s.get("headers").filter(|h| h.is_object()) {
                e.insert("headers".into(), h.clone());
            }
        } else if let Some(cmd) = s.get("command").and_then(Value::as_str) {
            e.insert("transport".into(), json!("stdio"));
            e.insert("command".into(), json!(cmd));
            e.insert("args".into(), s.get("args").cloned().unwrap_or(json!([])));
            if let Some(env) = s.get("env").filter(|v| v.is_object()) {
                e.insert("env".into(), env.clone());
            }
            if let Some(cwd) = s.get("cwd").and_then(Value::as_str) {
                e.insert("cwd".into(), json!(cwd));
            }
        } else {
            return Err(ManageError::Bad(format!(
                "server {name:?} has neither \"command\" nor \"url\""
            )));
        }
        e.insert(
            "enabled".into(),
            json!(!s.get("disabled").and_then(Value::as_bool).unwrap_or(false)),
        );
        e.insert("expose_all".into(), json!(true));
        out.push(Value::Object(e));
    }
    Ok(out)
}

/// Add every server of an `mcpServers` file as an upstream, in one validated, atomic write.
/// Returns the ids added.
pub fn import_mcp_servers(home: &Path, doc: &Value) -> Result<Vec<String>, ManageError> {
    let entries = entries_from_mcp_servers(doc)?;
    let rel = "mcp/expose.json";
    let mut e = read(
        home,
        rel,
        json!({"version": 1, "on_collision": "error", "upstreams": [], "expose": []}),
    )?;
    let ids: Vec<String> = entries
        .iter()
        .map(|x| x["id"].as_str().unwrap_or("").to_string())
        .collect();
    array(&mut e, "upstreams").extend(entries);
    commit(home, rel, &e)?;
    Ok(ids)
}

/// `sluice import claude-hooks`: append the hooks of a Claude Code settings file or plugin
/// `hooks.json` (`doc`) to the manifest (see [`crate::claude_import`]), validated and atomic.
/// Returns the new ids and the warnings.
pub fn import_claude_hooks(
    home: &Path,
    doc: &Value,
    plugin_root: Option<&Path>,
    tool_name: &str,
) -> Result<(Vec<String>, Vec<String>), ManageError> {
    let rel = "hooks/hooks.manifest.json";
    let mut m = read(home, rel, json!({"version": 1, "hooks": []}))?;
    let taken = array(&mut m, "hooks")
        .iter()
        .filter_map(|h| h.get("id").and_then(Value::as_str).map(str::to_string))
        .collect();
    let t = crate::claude_import::translate(doc, &taken, plugin_root, tool_name)
        .map_err(ManageError::Bad)?;
    let ids = t
        .entries
        .iter()
        .map(|e| e["id"].as_str().unwrap_or("").to_string())
        .collect();
    array(&mut m, "hooks").extend(t.entries);
    commit(home, rel, &m)?;
    Ok((ids, t.warnings))
}

/// Accept the change of a curated tool (by its `as` name): what its upstream offers now
/// becomes its pin (`mcp/pins.json`), as `sluice pins approve UPSTREAM/TOOL` does.
pub fn tool_accept(home: &Path, name: &str) -> Result<(), ManageError> {
    let env = |n: &str| std::env::var(n).ok();
    let expose = crate::expose::load(home, &env, &mut Vec::new(), &mut Vec::new());
    let Some(e) = expose.expose.iter().find(|e| e.name == name) else {
        return Err(ManageError::Bad(format!("no curated tool {name:?}")));
    };
    let which = crate::pins::Selector::Item(e.upstream.clone(), e.tool.clone());
    pins_approve(home, &which)?;
    Ok(())
}

/// Approve the pending definitions `which` selects: what each upstream offers now becomes its
/// pin. Writes `mcp/pins.json` atomically (a running gateway applies it live). Returns what was
/// approved as `upstream/name` (nothing pending is not an error: approving twice is harmless).
pub fn pins_approve(
    home: &Path,
    which: &crate::pins::Selector,
) -> Result<Vec<String>, ManageError> {
    let mut file = crate::pins::PinFile::load(home)
        .map_err(|e| ManageError::Invalid(ConfigErrors(vec![e])))?;
    let done = file.approve(which);
    if !done.is_empty() {
        file.save(home)?;
    }
    Ok(done
        .into_iter()
        .map(|(u, _, key, _)| format!("{u}/{key}"))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn home(label: &str) -> PathBuf {
        let p = std::env::temp_dir().join(format!("sluice-manage-{label}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(p.join("mcp")).unwrap();
        std::fs::create_dir_all(p.join("hooks")).unwrap();
        p
    }

    #[test]
    fn expose_set_creates_then_updates_an_entry() {
        let h = home("expose");
        std::fs::write(
            h.join("mcp/expose.json"),
            r#"{"version": 1, "upstreams": [{"id": "fx", "command": "x", "expose_all": true}]}"#,
        )
        .unwrap();
        let mut f = Map::new();
        f.insert("enabled".into(), json!(false));
        expose_set(&h, "fx", "echo", f).unwrap();
        let mut f = Map::new();
        f.insert("as".into(), json!("shout"));
        expose_set(&h, "fx", "echo", f).unwrap();
        let v: Value =
            serde_json::from_str(&std::fs::read_to_string(h.join("mcp/expose.json")).unwrap())
                .unwrap();
        assert_eq!(
            v["expose"],
            json!([{"upstream": "fx", "tool": "echo", "enabled": false, "as": "shout"}])
        );
        let mut f = Map::new();
        f.insert("as".into(), json!("bad name!"));
        assert!(matches!(
            expose_set(&h, "fx", "echo", f),
            Err(ManageError::Invalid(_))
        ));
        assert!(matches!(
            expose_set(&h, "nope", "echo", Map::new()),
            Err(ManageError::Bad(_))
        ));
        let _ = std::fs::remove_dir_all(h);
    }

    #[test]
    fn hooks_are_updated_and_moved() {
        let h = home("hooks");
        std::fs::write(
            h.join("hooks/hooks.manifest.json"),
            r#"{"version": 1, "hooks": [
                {"id": "a", "event": "PreToolUse", "command": "true"},
                {"id": "b", "event": "PreToolUse", "command": "true", "timeout": 5}]}"#,
        )
        .unwrap();
        let mut f = Map::new();
        f.insert("matcher".into(), json!("fx_.*"));
        f.insert("timeout".into(), Value::Null);
        hook_update(&h, "b", f).unwrap();
        hook_move(&h, "b", 0).unwrap();
        let v: Value = serde_json::from_str(
            &std::fs::read_to_string(h.join("hooks/hooks.manifest.json")).unwrap(),
        )
        .unwrap();
        assert_eq!(
            v["hooks"][0],
            json!({"id": "b", "event": "PreToolUse", "command": "true", "matcher": "fx_.*"})
        );
        assert_eq!(v["hooks"][1]["id"], json!("a"));
        let mut f = Map::new();
        f.insert("on_error".into(), json!("sometimes"));
        assert!(matches!(
            hook_update(&h, "a", f),
            Err(ManageError::Invalid(_))
        ));
        let mut f = Map::new();
        f.insert("id".into(), json!("c"));
        assert!(matches!(hook_update(&h, "a", f), Err(ManageError::Bad(_))));
        let _ = std::fs::remove_dir_all(h);
    }
}
