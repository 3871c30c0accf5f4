//! A Claude Code plugin's hooks, gathered for `sluice import claude-hooks --plugin`: its
//! `hooks/hooks.json` (the standard place) and the `hooks` field of its
//! `.claude-plugin/plugin.json` — inline hooks, a path to another hooks file, or an array of
//! either — merged into one `{"hooks": {<event>: [group…]}}` block, in that order.

use serde_json::{json, Map, Value};
use std::path::{Component, Path};

/// Why a plugin's hooks could not be gathered: the file that is wrong and how, or that the
/// plugin has no hooks at all.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct PluginError(String);

/// The plugin at `root`'s hooks as one hooks block.
pub fn hooks_of(root: &Path) -> Result<Value, PluginError> {
    gather(root).map_err(PluginError)
}

fn gather(root: &Path) -> Result<Value, String> {
    let mut events: Map<String, Value> = Map::new();
    let mut found = false;
    let standard = root.join("hooks/hooks.json");
    if standard.exists() {
        merge(&mut events, &hooks_block(&read(&standard)?, &standard)?);
        found = true;
    }
    let manifest = root.join(".claude-plugin/plugin.json");
    if manifest.exists() {
        let doc = read(&manifest)?;
        let items = match doc.get("hooks") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(items)) => items.clone(),
            Some(one) => vec![one.clone()],
        };
        for (i, item) in items.iter().enumerate() {
            let at = format!("{} (hooks[{i}])", manifest.display());
            let block = match item {
                Value::String(rel) => {
                    let path = inside(root, rel).map_err(|e| format!("{at}: {e}"))?;
                    // The standard file is read once, even when the manifest names it too.
                    if path == standard {
                        continue;
                    }
                    hooks_block(&read(&path)?, &path)?
                }
                // Inline: a hooks file's content, or its `hooks` block alone.
                Value::Object(o) => match o.get("hooks") {
                    Some(Value::Object(h)) => h.clone(),
                    _ => o.clone(),
                },
                _ => return Err(format!("{at}: must be a path or an object of hooks")),
            };
            merge(&mut events, &block);
            found = true;
        }
    }
    if !found {
        return Err(format!(
            "{} has no hooks: neither hooks/hooks.json nor a `hooks` field in .claude-plugin/plugin.json",
            root.display()
        ));
    }
    Ok(json!({ "hooks": events }))
}

fn read(path: &Path) -> Result<Value, String> {
    std::fs::read_to_string(path)
        .map_err(|e| e.to_string())
        .and_then(|t| serde_json::from_str(&t).map_err(|e| e.to_string()))
        .map_err(|e| format!("cannot read {}: {e}", path.display()))
}

/// The `hooks` block of a hooks file.
fn hooks_block(doc: &Value, path: &Path) -> Result<Map<String, Value>, String> {
    match doc.get("hooks") {
        Some(Value::Object(h)) => Ok(h.clone()),
        Some(_) => Err(format!("{}: `hooks` is not an object", path.display())),
        None => Err(format!("{}: the file has no `hooks` block", path.display())),
    }
}

/// Append each event's groups of `block` to `events`.
fn merge(events: &mut Map<String, Value>, block: &Map<String, Value>) {
    for (event, groups) in block {
        let groups = match groups {
            Value::Array(g) => g.clone(),
            other => vec![other.clone()],
        };
        match events.get_mut(event) {
            Some(Value::Array(have)) => have.extend(groups),
            _ => {
                events.insert(event.clone(), Value::Array(groups));
            }
        }
    }
}

/// A path the manifest gives, inside the plugin folder (Claude Code's containment rule).
fn inside(root: &Path, rel: &str) -> Result<std::path::PathBuf, String> {
    let p = Path::new(rel);
    if p.is_absolute()
        || p.components()
            .any(|c| matches!(c, Component::ParentDir | Component::Prefix(_)))
    {
        return Err(format!("{rel:?} is not a path inside the plugin"));
    }
    Ok(root.join(p.strip_prefix("./").unwrap_or(p)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A plugin folder under the system's temp folder, removed when dropped.
    struct Dir(std::path::PathBuf);
    impl Dir {
        fn path(&self) -> &Path {
            &self.0
        }
    }
    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn plugin(files: &[(&str, Value)]) -> Dir {
        static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = Dir(
            std::env::temp_dir().join(format!("sluice-plugin-test-{}-{n}", std::process::id()))
        );
        for (rel, v) in files {
            let p = dir.path().join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, v.to_string()).unwrap();
        }
        dir
    }

    fn group(cmd: &str) -> Value {
        json!({"matcher": "Bash", "hooks": [{"type": "command", "command": cmd}]})
    }

    #[test]
    fn the_standard_file_inline_hooks_and_paths_are_merged() {
        let dir = plugin(&[
            (
                "hooks/hooks.json",
                json!({"hooks": {"PreToolUse": [group("a")]}}),
            ),
            (
                "extra/more.json",
                json!({"hooks": {"PreToolUse": [group("c")], "Stop": [group("d")]}}),
            ),
            (
                ".claude-plugin/plugin.json",
                json!({"name": "p", "hooks": [
                    {"PreToolUse": [group("b")]},
                    "./extra/more.json",
                    "./hooks/hooks.json"
                ]}),
            ),
        ]);
        let doc = hooks_of(dir.path()).unwrap();
        assert_eq!(
            doc,
            json!({"hooks": {"PreToolUse": [group("a"), group("b"), group("c")], "Stop": [group("d")]}})
        );
        // Inline alone (no hooks/hooks.json), in a hooks file's own shape.
        let dir = plugin(&[(
            ".claude-plugin/plugin.json",
            json!({"name": "p", "hooks": {"description": "x", "hooks": {"PostToolUse": [group("e")]}}}),
        )]);
        assert_eq!(
            hooks_of(dir.path()).unwrap(),
            json!({"hooks": {"PostToolUse": [group("e")]}})
        );
    }

    #[test]
    fn a_plugin_without_hooks_or_with_a_path_outside_is_an_error() {
        let dir = plugin(&[(".claude-plugin/plugin.json", json!({"name": "p"}))]);
        let e = hooks_of(dir.path()).unwrap_err().to_string();
        assert!(e.ends_with("has no hooks: neither hooks/hooks.json nor a `hooks` field in .claude-plugin/plugin.json"), "{e}");
        let dir = plugin(&[(
            ".claude-plugin/plugin.json",
            json!({"name": "p", "hooks": "../elsewhere.json"}),
        )]);
        let e = hooks_of(dir.path()).unwrap_err().to_string();
        assert!(
            e.ends_with("(hooks[0]): \"../elsewhere.json\" is not a path inside the plugin"),
            "{e}"
        );
        let dir = plugin(&[(
            ".claude-plugin/plugin.json",
            json!({"name": "p", "hooks": 3}),
        )]);
        assert!(hooks_of(dir.path())
            .unwrap_err()
            .to_string()
            .ends_with("(hooks[0]): must be a path or an object of hooks"));
    }
}
