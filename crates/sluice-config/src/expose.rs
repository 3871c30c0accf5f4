//! `mcp/expose.json`: the upstream MCP servers and the curated tools drawn from them
//! (toolfunnel's format, plus the `http` and `sse` transports, `expose_all` and `isolation`).

use crate::error::ConfigError;
use crate::fields::{entry, expand_env, read_object, Fields};
use std::collections::{BTreeMap, HashSet};
use std::path::{Component, Path, PathBuf};

/// How Sluice reaches an upstream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// A child process speaking JSON lines on stdin/stdout.
    Stdio,
    /// Streamable HTTP.
    Http,
    /// The legacy HTTP+SSE transport (2024-11-05).
    Sse,
    /// In process: the first-party tool register of the home folder (`tools/`).
    Local,
}

/// How many processes a stdio upstream gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Isolation {
    /// One process shared by every client session (the default).
    Shared,
    /// One process per client session.
    Session,
}

/// The protocol era Sluice speaks to an upstream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Era {
    /// Probe with `server/discover`; fall back to the `initialize` handshake (default).
    Auto,
    /// Only the handshake era (2024-11-05 … 2025-11-25).
    Legacy,
    /// Only 2026-07-28 (fail when the upstream does not speak it).
    Modern,
}

/// One upstream MCP server.
#[derive(Debug, Clone, PartialEq)]
pub struct UpstreamSpec {
    /// Stable unique key; the prefix of its tools' names.
    pub id: String,
    /// How to reach it.
    pub transport: Transport,
    /// stdio: the program to spawn.
    pub command: String,
    /// stdio: its arguments.
    pub args: Vec<String>,
    /// stdio: extra environment (`${env:NAME}` expanded).
    pub env: BTreeMap<String, String>,
    /// stdio: working folder (`cwd` relative to the home folder; default the home folder, so
    /// relative script paths in `args` resolve against the tree as in toolfunnel).
    pub cwd: Option<PathBuf>,
    /// http/sse: the endpoint URL.
    pub url: String,
    /// http/sse: extra request headers (`${env:NAME}` expanded).
    pub headers: BTreeMap<String, String>,
    /// Connect at start-up.
    pub enabled: bool,
    /// Human-facing note.
    pub description: String,
    /// List every tool of this upstream (as `<id>_<tool>`), not only its `expose` entries.
    pub expose_all: bool,
    /// List tools under their own names (used by `--passthrough`).
    pub transparent: bool,
    /// stdio: one shared process or one per client session.
    pub isolation: Isolation,
    /// Per-request timeout override, in milliseconds.
    pub timeout_ms: Option<u64>,
    /// Which protocol era to speak to it: probe `server/discover` and fall back to `initialize`
    /// (`Auto`), or only one of them.
    pub era: Era,
    /// http/sse: send the client's own `Authorization` header with each request (off by
    /// default: a client's token is never passed upstream unless the upstream asks for it).
    pub forward_authorization: bool,
    /// http/sse: how Sluice signs in to it (OAuth 2.1), when it asks.
    pub oauth: Option<crate::oauth::UpstreamOAuth>,
    /// stdio: what the kernel confines the server to; `None`: spawned unconfined.
    pub sandbox: Option<crate::sandbox::Sandbox>,
    /// The first segment its `skill://` URIs are shown under (the Skills extension); `None`:
    /// its id; empty: its URIs unchanged.
    pub skill_prefix: Option<String>,
}

impl UpstreamSpec {
    /// The first segment its `skill://` URIs are shown under when it serves skills: its
    /// `skill_prefix`, else its id; none (URIs unchanged) for the one upstream of
    /// `--passthrough`, which stays invisible.
    pub fn shown_skill_prefix(&self) -> &str {
        if self.transparent {
            return "";
        }
        self.skill_prefix.as_deref().unwrap_or(&self.id)
    }

    /// A stdio upstream with defaults.
    pub fn stdio(id: &str, command: &str, args: Vec<String>) -> UpstreamSpec {
        UpstreamSpec {
            id: id.into(),
            transport: Transport::Stdio,
            command: command.into(),
            args,
            env: BTreeMap::new(),
            cwd: None,
            url: String::new(),
            headers: BTreeMap::new(),
            enabled: true,
            description: String::new(),
            expose_all: false,
            transparent: false,
            isolation: Isolation::Shared,
            timeout_ms: None,
            forward_authorization: false,
            era: Era::Auto,
            oauth: None,
            sandbox: None,
            skill_prefix: None,
        }
    }

    /// An HTTP (or SSE) upstream with defaults.
    pub fn http(id: &str, url: &str, transport: Transport) -> UpstreamSpec {
        UpstreamSpec {
            transport,
            url: url.into(),
            ..UpstreamSpec::stdio(id, "", Vec::new())
        }
    }
}

/// One curated tool: an upstream tool listed under a chosen name.
#[derive(Debug, Clone, PartialEq)]
pub struct ExposeEntry {
    /// The upstream's id.
    pub upstream: String,
    /// The tool's name at the upstream.
    pub tool: String,
    /// The name clients see (default `<upstream>_<tool>`).
    pub name: String,
    /// Grouping label.
    pub category: String,
    /// Listed right now.
    pub enabled: bool,
}

/// The whole `mcp/expose.json`.
#[derive(Debug, Clone, PartialEq)]
pub struct ExposeFile {
    /// Schema version (1).
    pub version: u64,
    /// Upstreams, in file order.
    pub upstreams: Vec<UpstreamSpec>,
    /// Curated tools.
    pub expose: Vec<ExposeEntry>,
    /// What two upstreams producing one final name means.
    pub on_collision: OnCollision,
    /// Each upstream's pin policy (`"pin"` and `"new"`), by id; absent: unpinned.
    pub pins: BTreeMap<String, crate::pins::PinPolicy>,
    /// Skills served under another path, or not at all (`skills[]`).
    pub skills: Vec<crate::skill_paths::SkillEntry>,
}

/// What happens when two upstreams produce one final name (a tool, a prompt, a resource URI),
/// or an `as` takes a name another upstream produces.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OnCollision {
    /// The name is listed for neither, and a call to it is refused naming both (the default of
    /// the trees Sluice writes).
    Error,
    /// The first upstream in file order keeps it; the other's is not listed (a warning). The
    /// default of a file without the key, as before the setting existed.
    #[default]
    First,
}

fn valid_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 64
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.')
}

/// Is `name` a valid MCP tool name (1–128 of `[A-Za-z0-9_.-]`)?
pub(crate) fn valid_tool_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 128
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.')
}

/// A relative path argument that climbs out of `home` (toolfunnel's isolation guard).
fn escapes(arg: &str) -> bool {
    let p = Path::new(arg);
    if p.is_absolute() || !arg.contains('/') || arg.starts_with('-') {
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
            return true;
        }
    }
    false
}

pub(crate) fn load(
    home: &Path,
    env: &dyn Fn(&str) -> Option<String>,
    errors: &mut Vec<ConfigError>,
    warnings: &mut Vec<String>,
) -> ExposeFile {
    let file = home.join("mcp").join("expose.json");
    let mut out = ExposeFile {
        version: 1,
        upstreams: Vec::new(),
        expose: Vec::new(),
        on_collision: OnCollision::First,
        pins: BTreeMap::new(),
        skills: Vec::new(),
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
    out.version = top.u64("version").unwrap_or(1);
    out.on_collision = match top.string("on_collision").as_deref() {
        None | Some("first") => OnCollision::First,
        Some("error") => OnCollision::Error,
        Some(other) => {
            top.err(
                "on_collision",
                format!("unknown on_collision {other:?} (error or first)"),
            );
            OnCollision::First
        }
    };
    let upstreams = top.array("upstreams");
    let expose = top.array("expose");
    let skills = top.array("skills");
    let mut ids = HashSet::new();
    for (i, u) in upstreams.iter().enumerate() {
        let Some(mut f) = entry(&file, "upstreams", i, u, errors) else {
            continue;
        };
        let id = f.required_string("id");
        if !id.is_empty() && !valid_id(&id) {
            f.err(
                "id",
                format!("{id:?} may hold only letters, digits, '-', '_' and '.' (at most 64)"),
            );
        }
        if !id.is_empty() && !ids.insert(id.clone()) {
            f.err("id", format!("duplicate upstream id {id:?}"));
        }
        let transport = match f.string("transport").as_deref() {
            None | Some("stdio") => Transport::Stdio,
            Some("http") | Some("streamable-http") | Some("streamableHttp") => Transport::Http,
            Some("sse") => Transport::Sse,
            Some(other) => {
                f.err(
                    "transport",
                    format!("unknown transport {other:?} (stdio, http or sse)"),
                );
                Transport::Stdio
            }
        };
        let mut spec = UpstreamSpec::stdio(&id, "", Vec::new());
        spec.transport = transport;
        spec.enabled = f.bool("enabled", true);
        spec.description = f.string("description").unwrap_or_default();
        spec.expose_all = f.bool("expose_all", false);
        spec.timeout_ms = f.u64("timeout_ms");
        spec.era = match f.string("era").as_deref() {
            None | Some("auto") => Era::Auto,
            Some("handshake") => Era::Legacy,
            Some("stateless") => Era::Modern,
            // The names of earlier releases: still read, with a warning.
            Some(old @ ("legacy" | "modern")) => {
                let new = if old == "legacy" {
                    "handshake"
                } else {
                    "stateless"
                };
                warnings.push(format!(
                    "{}: upstreams[{i}].era: {old:?} is deprecated, use {new:?} (the same era)",
                    file.display()
                ));
                if old == "legacy" {
                    Era::Legacy
                } else {
                    Era::Modern
                }
            }
            Some(other) => {
                f.err(
                    "era",
                    format!("unknown era {other:?} (auto, handshake or stateless)"),
                );
                Era::Auto
            }
        };
        if spec.era == Era::Modern && transport == Transport::Sse {
            f.err(
                "era",
                "the legacy HTTP+SSE transport cannot speak 2026-07-28 (use transport \"http\")",
            );
        }
        spec.skill_prefix = f.string("skill_prefix");
        if let Some(p) = &spec.skill_prefix {
            let allowed = |c: char| c.is_ascii_alphanumeric() || "-._~".contains(c);
            if p.len() > 64 || !p.chars().all(allowed) {
                f.err(
                    "skill_prefix",
                    format!("{p:?} is not a URI authority of letters, digits, `-`, `.`, `_`, `~` (at most 64)"),
                );
            }
        }
        let pin = match f.string("pin").as_deref() {
            None | Some("off") => crate::pins::PinMode::Off,
            Some("hold") => crate::pins::PinMode::Hold,
            Some("warn") => crate::pins::PinMode::Warn,
            Some(other) => {
                f.err("pin", format!("unknown pin {other:?} (hold, warn or off)"));
                crate::pins::PinMode::Off
            }
        };
        let new = match f.string("new").as_deref() {
            None | Some("allow") => crate::pins::NewMode::Allow,
            Some("hold") => crate::pins::NewMode::Hold,
            Some(other) => {
                f.err("new", format!("unknown new {other:?} (hold or allow)"));
                crate::pins::NewMode::Allow
            }
        };
        if pin != crate::pins::PinMode::Off || new != crate::pins::NewMode::Allow {
            out.pins
                .insert(id.clone(), crate::pins::PinPolicy { pin, new });
        }
        spec.isolation = match f.string("isolation").as_deref() {
            None | Some("shared") => Isolation::Shared,
            Some("session") => Isolation::Session,
            Some(other) => {
                f.err(
                    "isolation",
                    format!("unknown isolation {other:?} (shared or session)"),
                );
                Isolation::Shared
            }
        };
        match transport {
            Transport::Stdio => {
                spec.command = f.required_string("command");
                spec.args = f.strings("args");
                for (j, a) in spec.args.iter().enumerate() {
                    if escapes(a) {
                        f.err(
                            &format!("args[{j}]"),
                            format!("path {a:?} escapes the home folder"),
                        );
                    }
                }
                spec.cwd = Some(home.join(f.string("cwd").unwrap_or_default()));
                for (k, v) in f.string_map("env") {
                    match expand_env(&v, env) {
                        Ok(v) => {
                            spec.env.insert(k, v);
                        }
                        Err(e) => f.err(&format!("env.{k}"), e),
                    }
                }
                spec.sandbox = crate::sandbox::load(&mut f, home, env);
            }
            // Never read from the file: the local upstream is made from `tools/`.
            Transport::Local => {}
            Transport::Http | Transport::Sse => {
                spec.url = f.required_string("url");
                let http_url = spec.url.starts_with("http://") || spec.url.starts_with("https://");
                if !spec.url.is_empty() && !http_url {
                    f.err(
                        "url",
                        format!("{:?} is not an http:// or https:// URL", spec.url),
                    );
                }
                spec.forward_authorization = f.bool("forward_authorization", false);
                if f.obj.get("sandbox").is_some_and(|v| !v.is_null()) {
                    f.err(
                        "sandbox",
                        "only a stdio upstream can be sandboxed (an http or sse server runs elsewhere)",
                    );
                }
                match f.obj.get("oauth") {
                    None | Some(serde_json::Value::Null) => {}
                    Some(serde_json::Value::Object(o)) => {
                        let mut of = Fields {
                            file: &file,
                            path: f.field_path("oauth"),
                            obj: o,
                            errors: &mut *f.errors,
                        };
                        spec.oauth = crate::oauth::load_upstream(&mut of, home, env);
                    }
                    Some(_) => f.err("oauth", "must be an object"),
                }
                if spec.oauth.is_some() && spec.forward_authorization {
                    f.err(
                        "forward_authorization",
                        "cannot be on with oauth (the upstream gets Sluice's own token)",
                    );
                }
                for (k, v) in f.string_map("headers") {
                    match expand_env(&v, env) {
                        Ok(v) => {
                            spec.headers.insert(k, v);
                        }
                        Err(e) => f.err(&format!("headers.{k}"), e),
                    }
                }
                if spec.isolation == Isolation::Session {
                    warnings.push(format!(
                        "{}: upstreams[{i}].isolation: HTTP upstreams always get one session per client; the setting is ignored",
                        file.display()
                    ));
                }
            }
        }
        out.upstreams.push(spec);
    }
    let mut keys = HashSet::new();
    let mut names = HashSet::new();
    for (i, e) in expose.iter().enumerate() {
        let Some(mut f) = entry(&file, "expose", i, e, errors) else {
            continue;
        };
        let upstream = f.required_string("upstream");
        let tool = f.required_string("tool");
        if !upstream.is_empty() && !ids.contains(&upstream) {
            f.err("upstream", format!("no upstream has the id {upstream:?}"));
        }
        if !upstream.is_empty()
            && !tool.is_empty()
            && !keys.insert((upstream.clone(), tool.clone()))
        {
            f.err(
                "tool",
                format!("duplicate expose entry for {upstream:?} / {tool:?}"),
            );
        }
        let name = f
            .string("as")
            .unwrap_or_else(|| format!("{upstream}_{tool}"));
        if !valid_tool_name(&name) {
            f.err(
                "as",
                format!("{name:?} is not a valid tool name (1–128 of A-Z a-z 0-9 _ . -)"),
            );
        }
        let enabled = f.bool("enabled", true);
        if enabled && !names.insert(name.clone()) {
            f.err(
                "as",
                format!("two enabled expose entries are both named {name:?}"),
            );
        }
        out.expose.push(ExposeEntry {
            upstream,
            tool,
            name,
            category: f.string("category").unwrap_or_default(),
            enabled,
        });
    }
    out.skills = crate::skill_paths::load(&file, &skills, &ids, errors);
    out
}

#[cfg(test)]
mod tests {
    use super::Era;
    use crate::Config;

    /// The era names say what an era is; the names of earlier releases still load, with a
    /// warning naming the new one.
    #[test]
    fn eras_are_handshake_and_stateless_and_the_old_names_warn() {
        let home = std::env::temp_dir().join(format!("sluice-era-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&home);
        std::fs::create_dir_all(home.join("mcp")).unwrap();
        let expose = serde_json::json!({"version": 1, "upstreams": [
            {"id": "a", "command": "x", "era": "handshake"},
            {"id": "b", "transport": "http", "url": "http://h/mcp", "era": "stateless"},
            {"id": "c", "command": "x", "era": "legacy"},
            {"id": "d", "transport": "http", "url": "http://h/mcp", "era": "modern"},
            {"id": "e", "command": "x"}
        ]});
        std::fs::write(home.join("mcp/expose.json"), expose.to_string()).unwrap();
        let (config, warnings) = Config::load(&home, &|_| None).unwrap();
        let eras: Vec<Era> = config.expose.upstreams.iter().map(|u| u.era).collect();
        assert_eq!(
            eras,
            [
                Era::Legacy,
                Era::Modern,
                Era::Legacy,
                Era::Modern,
                Era::Auto
            ]
        );
        let file = home.join("mcp/expose.json");
        assert_eq!(
            warnings,
            [
                format!(
                    "{}: upstreams[2].era: \"legacy\" is deprecated, use \"handshake\" (the same era)",
                    file.display()
                ),
                format!(
                    "{}: upstreams[3].era: \"modern\" is deprecated, use \"stateless\" (the same era)",
                    file.display()
                ),
            ]
        );
        std::fs::write(
            home.join("mcp/expose.json"),
            r#"{"upstreams": [{"id": "a", "command": "x", "era": "new"}]}"#,
        )
        .unwrap();
        let errors = Config::load(&home, &|_| None).unwrap_err();
        assert_eq!(
            errors.0[0].to_string(),
            format!(
                "{}: upstreams[0].era: unknown era \"new\" (auto, handshake or stateless)",
                file.display()
            )
        );
        let _ = std::fs::remove_dir_all(&home);
    }

    /// A skill prefix is a URI authority (or empty: URIs unchanged); the id by default.
    #[test]
    fn a_skill_prefix_is_a_uri_authority() {
        let home = std::env::temp_dir().join(format!("sluice-skill-prefix-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&home);
        std::fs::create_dir_all(home.join("mcp")).unwrap();
        let expose = serde_json::json!({"version": 1, "upstreams": [
            {"id": "a", "command": "x", "skill_prefix": "team.b"},
            {"id": "b", "command": "x", "skill_prefix": ""},
            {"id": "c", "command": "x"}
        ]});
        std::fs::write(home.join("mcp/expose.json"), expose.to_string()).unwrap();
        let (config, _) = Config::load(&home, &|_| None).unwrap();
        let shown: Vec<&str> = config
            .expose
            .upstreams
            .iter()
            .map(|u| u.shown_skill_prefix())
            .collect();
        assert_eq!(shown, ["team.b", "", "c"]);
        std::fs::write(
            home.join("mcp/expose.json"),
            r#"{"upstreams": [{"id": "a", "command": "x", "skill_prefix": "a/b"}]}"#,
        )
        .unwrap();
        let errors = Config::load(&home, &|_| None).unwrap_err();
        assert_eq!(
            errors.0[0].to_string(),
            format!(
                "{}: upstreams[0].skill_prefix: \"a/b\" is not a URI authority of letters, digits, `-`, `.`, `_`, `~` (at most 64)",
                home.join("mcp/expose.json").display()
            )
        );
        let _ = std::fs::remove_dir_all(&home);
    }

    /// `skills[]`: a skill served under another path ending in its name, or not at all; each
    /// mistake named.
    #[test]
    fn skills_entries_rename_skills_to_paths_ending_in_their_names() {
        let home =
            std::env::temp_dir().join(format!("sluice-skills-entries-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&home);
        std::fs::create_dir_all(home.join("mcp")).unwrap();
        let file = home.join("mcp/expose.json");
        let expose = serde_json::json!({"version": 1, "upstreams": [{"id": "a", "command": "x"}],
        "skills": [
            {"upstream": "a", "skill": "acme/billing/refunds", "as": "finance/refunds"},
            {"upstream": "a", "skill": "git-workflow", "enabled": false}
        ]});
        std::fs::write(&file, expose.to_string()).unwrap();
        let (config, _) = Config::load(&home, &|_| None).unwrap();
        assert_eq!(
            config.expose.skills,
            [
                crate::SkillEntry {
                    upstream: "a".into(),
                    skill: "acme/billing/refunds".into(),
                    path: Some("finance/refunds".into()),
                    enabled: true
                },
                crate::SkillEntry {
                    upstream: "a".into(),
                    skill: "git-workflow".into(),
                    path: None,
                    enabled: false
                }
            ]
        );
        let bad = serde_json::json!({"version": 1, "upstreams": [{"id": "a", "command": "x"}],
        "skills": [
            {"upstream": "a", "skill": "acme/refunds", "as": "finance/payback"},
            {"upstream": "b", "skill": "x/../y"},
            {"upstream": "a", "skill": "one", "as": "p/one"},
            {"upstream": "a", "skill": "q/one", "as": "p/one"}
        ]});
        std::fs::write(&file, bad.to_string()).unwrap();
        let errors: Vec<String> = Config::load(&home, &|_| None)
            .unwrap_err()
            .0
            .iter()
            .map(|e| e.to_string())
            .collect();
        let f = file.display();
        assert_eq!(
            errors,
            [
                format!("{f}: skills[0].as: \"finance/payback\" must end in the skill's name \"refunds\" (it names the skill, as its SKILL.md does)"),
                format!("{f}: skills[1].upstream: no upstream has the id \"b\""),
                format!("{f}: skills[1].skill: \"x/../y\" is not a skill path (segments of A-Z a-z 0-9 - . _ ~, not . or .., separated by /)"),
                format!("{f}: skills[3].as: two enabled skills entries both serve \"p/one\""),
            ]
        );
        let _ = std::fs::remove_dir_all(&home);
    }
}
