//! `tools/tools.register.json` (first-party tools) and its overlay `tools/tools.state.json`
//! (toolfunnel's format). The loader validates like toolfunnel's `registry.js` and is also used at
//! run time, where the files are read fresh on every list and call.

use crate::error::ConfigError;
use crate::fields::{entry, read_json, read_object, Fields};
use serde_json::Value;
use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};

/// Who runs a tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Sluice runs the `invoke`.
    Gateway,
    /// Sluice runs nothing; the run returns the instructions for the agent.
    Reference,
}

/// How a gateway tool runs.
#[derive(Debug, Clone, PartialEq)]
pub enum Invoke {
    /// A script under `tools/scripts/` (the basename of `path`, path-guarded).
    Script {
        /// The resolved script file.
        path: PathBuf,
        /// The interpreter: explicit, else by extension (`.js` node, `.py` python3, `.sh`
        /// bash), else the script is executed itself.
        interpreter: Option<String>,
    },
    /// A command run verbatim by the shell with the cwd at the tree root.
    Shell {
        /// The command line.
        command: String,
    },
}

/// One register entry.
#[derive(Debug, Clone, PartialEq)]
pub struct RegisterTool {
    /// Stable unique key.
    pub id: String,
    /// Display name.
    pub name: String,
    /// One line.
    pub summary: String,
    /// Grouping label.
    pub category: String,
    /// The full usage doc.
    pub instructions: String,
    /// Who runs it.
    pub mode: Mode,
    /// How (gateway mode).
    pub invoke: Option<Invoke>,
    /// Timeout override, seconds.
    pub timeout_secs: Option<f64>,
}

/// The overlay of one tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ToolState {
    /// `enabled: false` hides it from clients.
    pub disabled: bool,
    /// `hidden: true` hides it from the manager listing only.
    pub hidden: bool,
}

/// The register with its overlay.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Register {
    /// Does `tools/tools.register.json` exist?
    pub present: bool,
    /// Schema version.
    pub version: u64,
    /// Free text.
    pub description: String,
    /// Entries in file order.
    pub tools: Vec<RegisterTool>,
    /// The overlay by id.
    pub state: BTreeMap<String, ToolState>,
}

impl Register {
    /// Tools a client may see (the overlay's `enabled` axis).
    pub fn enabled(&self) -> impl Iterator<Item = &RegisterTool> {
        self.tools
            .iter()
            .filter(|t| !self.state.get(&t.id).is_some_and(|s| s.disabled))
    }

    /// Find an enabled tool by id or display name.
    pub fn find(&self, name: &str) -> Option<&RegisterTool> {
        self.enabled()
            .find(|t| t.id == name)
            .or_else(|| self.enabled().find(|t| t.name == name))
    }
}

fn interpreter_for(path: &Path) -> Option<String> {
    match path.extension().and_then(|e| e.to_str()) {
        Some("js") | Some("mjs") | Some("cjs") => Some("node".into()),
        Some("py") => Some("python3".into()),
        Some("sh") => Some("bash".into()),
        _ => None,
    }
}

/// Read the overlay: missing or malformed → no overrides.
pub fn load_state(home: &Path) -> BTreeMap<String, ToolState> {
    let file = home.join("tools").join("tools.state.json");
    let mut scratch = Vec::new();
    let mut out = BTreeMap::new();
    if let Some(Value::Object(m)) = read_json(&file, &mut scratch) {
        for (id, v) in m {
            out.insert(
                id,
                ToolState {
                    disabled: v.get("enabled").and_then(Value::as_bool) == Some(false),
                    hidden: v.get("hidden").and_then(Value::as_bool) == Some(true),
                },
            );
        }
    }
    out
}

/// Load the register (errors collected) and its overlay.
pub fn load(home: &Path, errors: &mut Vec<ConfigError>) -> Register {
    let dir = home.join("tools");
    let file = dir.join("tools.register.json");
    let scripts = dir.join("scripts");
    let mut out = Register {
        version: 1,
        ..Register::default()
    };
    if !file.exists() {
        return out;
    }
    out.present = true;
    out.state = load_state(home);
    let Some(obj) = read_object(&file, errors) else {
        return out;
    };
    let obj = &obj;
    let mut top = Fields {
        file: &file,
        path: String::new(),
        obj,
        errors,
    };
    out.version = top.u64("version").unwrap_or(1);
    out.description = top.string("description").unwrap_or_default();
    let entries = top.array("tools");
    let mut ids = HashSet::new();
    for (i, e) in entries.iter().enumerate() {
        let Some(mut f) = entry(&file, "tools", i, e, errors) else {
            continue;
        };
        let obj = f.obj;
        let id = f.required_string("id");
        if !id.is_empty() && !ids.insert(id.clone()) {
            f.err("id", format!("duplicate tool id {id:?}"));
        }
        let name = f.required_string("name");
        let explicit_mode = match f.string("mode").as_deref() {
            None => None,
            Some("gateway") => Some(Mode::Gateway),
            Some("reference") => Some(Mode::Reference),
            Some(other) => {
                f.err("mode", format!("{other:?} is not gateway or reference"));
                None
            }
        };
        let invoke = match obj.get("invoke") {
            None | Some(Value::Null) => {
                if explicit_mode != Some(Mode::Reference) {
                    f.err("invoke", "is required (unless mode is \"reference\")");
                }
                None
            }
            Some(Value::Object(inv)) => {
                let mut g = Fields {
                    file: f.file,
                    path: f.field_path("invoke"),
                    obj: inv,
                    errors: f.errors,
                };
                match g.string("type").as_deref() {
                    Some("script") => {
                        let p = g.required_string("path");
                        // The runner takes the basename and resolves it under tools/scripts.
                        let base = Path::new(&p).file_name().map(PathBuf::from);
                        match base {
                            Some(b) if !p.is_empty() => {
                                let resolved = scripts.join(&b);
                                if !resolved.starts_with(&scripts) {
                                    g.err("path", format!("{p:?} escapes tools/scripts"));
                                }
                                let interpreter = g
                                    .string("interpreter")
                                    .or_else(|| interpreter_for(&resolved));
                                Some(Invoke::Script {
                                    path: resolved,
                                    interpreter,
                                })
                            }
                            _ => {
                                if !p.is_empty() {
                                    g.err("path", format!("{p:?} names no file"));
                                }
                                None
                            }
                        }
                    }
                    Some("shell") => {
                        let command = g.required_string("command");
                        Some(Invoke::Shell { command })
                    }
                    Some(other) => {
                        g.err("type", format!("{other:?} is not script or shell"));
                        None
                    }
                    None => {
                        g.err("type", "is required (script or shell)");
                        None
                    }
                }
            }
            Some(_) => {
                f.err("invoke", "must be an object");
                None
            }
        };
        // Mode inference (registry.js::resolveMode): a script/shell invoke ⇒ gateway.
        let mode = explicit_mode.unwrap_or(if invoke.is_some() {
            Mode::Gateway
        } else {
            Mode::Reference
        });
        let timeout_secs = obj
            .get("timeout")
            .and_then(Value::as_f64)
            .filter(|t| *t > 0.0)
            // A registry is read leniently: past a day, a day.
            .map(|t| t.min(crate::hooks::MAX_TIMEOUT_SECS));
        out.tools.push(RegisterTool {
            summary: f.string("summary").unwrap_or_default(),
            category: f.string("category").unwrap_or_default(),
            instructions: f.string("instructions").unwrap_or_default(),
            id,
            name,
            mode,
            invoke,
            timeout_secs,
        });
    }
    out
}
