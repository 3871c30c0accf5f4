//! `mcp/endpoints.json`: named endpoints the gateway serves at `/mcp/<name>` beside `/mcp`,
//! each a curated surface over the same upstreams: what it selects (tools by their final
//! names, prompts, resources and templates, by upstream and by category), the hooks and access
//! rules it adds, its funnel, search and discovery, and what its `initialize` says.
//!
//! A tree without the file has no endpoints, and `/mcp` is what it always was.

use crate::auth::{parse_rule, AccessRule};
use crate::error::ConfigError;
use crate::expose::ExposeFile;
use crate::fields::{entry, read_object, Fields};
use crate::hooks::{entries_of, HookSpec, HooksFile, List};
use crate::sandbox::unknown_keys;
use crate::settings::Discovery;
use serde_json::Value;
use std::collections::HashSet;
use std::path::Path;

/// The file's path in the tree.
pub const FILE: &str = "mcp/endpoints.json";

/// The keys of the file's top level (`$schema` first).
pub(crate) const KNOWN: &[&str] = &["$schema", "version", "endpoints"];

/// The keys of one endpoint.
pub(crate) const ENDPOINT_KEYS: &[&str] = &[
    "name",
    "description",
    "tools",
    "prompts",
    "resources",
    "upstreams",
    "categories",
    "hooks",
    "rules",
    "funnel",
    "tool_search",
    "discovery",
    "instructions",
    "server_name",
];

/// The pattern an endpoint's name matches: it is one URL path segment (`/mcp/<name>`), a
/// metric label and a log field.
pub const NAME_PATTERN: &str = r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$";

/// The loaded `mcp/endpoints.json` (empty: the file is absent).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct EndpointsFile {
    /// The endpoints, in file order.
    pub endpoints: Vec<Endpoint>,
}

impl EndpointsFile {
    /// The endpoint of this name.
    pub fn get(&self, name: &str) -> Option<&Endpoint> {
        self.endpoints.iter().find(|e| e.name == name)
    }
}

/// One endpoint, served at `/mcp/<name>`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Endpoint {
    /// Its name (the URL's last segment).
    pub name: String,
    /// For people (the admin page shows it).
    pub description: String,
    /// What it serves.
    pub select: Selection,
    /// Hooks run after the manifest's, for this endpoint's requests only.
    pub hooks: Vec<HookSpec>,
    /// Access rules applied with `auth/auth.config.json`'s, for this endpoint's requests only.
    pub rules: Vec<AccessRule>,
    /// The funnel's meta-tools (`None`: as `sluice.json` says).
    pub funnel: Option<bool>,
    /// The search tool (`None`: as `sluice.json` says).
    pub tool_search: Option<bool>,
    /// What its `tools/list` shows (`None`: as `sluice.json` says).
    pub discovery: Option<Discovery>,
    /// Its `initialize` result's `instructions` (`None`: the gateway's).
    pub instructions: Option<String>,
    /// Its `initialize` result's `serverInfo.name` (`None`: `sluice`).
    pub server_name: Option<String>,
}

/// What an endpoint selects. An item is served when its upstream is among `upstreams` (if
/// given), a tool's category among `categories` (if given), and its name matches one of its
/// kind's globs. A kind without globs is served whole when `upstreams` is given (tools: or
/// `categories`), and not at all otherwise.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Selection {
    /// Globs over the tools' final (client-facing) names.
    pub tools: Option<Vec<String>>,
    /// Globs over prompt names.
    pub prompts: Option<Vec<String>>,
    /// Globs over resource URIs and resource template URI templates.
    pub resources: Option<Vec<String>>,
    /// Upstream ids (`local` for the register's tools).
    pub upstreams: Option<Vec<String>>,
    /// Tool categories (an expose entry's or the register's `category`, else the upstream id).
    pub categories: Option<Vec<String>>,
}

impl Selection {
    /// Does it name nothing at all?
    pub fn is_empty(&self) -> bool {
        let empty = |l: &Option<Vec<String>>| l.as_ref().is_none_or(Vec::is_empty);
        [
            &self.tools,
            &self.prompts,
            &self.resources,
            &self.upstreams,
            &self.categories,
        ]
        .into_iter()
        .all(empty)
    }

    /// Are the tools served whole when `tools` has no globs (`upstreams` or `categories` is
    /// given)? Prompts and resources are, when `upstreams` is.
    pub fn whole_tools(&self) -> bool {
        self.upstreams.is_some() || self.categories.is_some()
    }
}

/// Load `mcp/endpoints.json` under `home` (absent: no endpoints). `expose` and `hooks` are the
/// tree's, already loaded: an endpoint names their upstreams, and its hook ids must not be the
/// manifest's.
pub(crate) fn load(
    home: &Path,
    expose: &ExposeFile,
    hooks: &HooksFile,
    env: &dyn Fn(&str) -> Option<String>,
    errors: &mut Vec<ConfigError>,
    warnings: &mut Vec<String>,
) -> EndpointsFile {
    let file = home.join(FILE);
    let mut out = EndpointsFile::default();
    if !file.exists() {
        return out;
    }
    let Some(root) = read_object(&file, errors) else {
        return out;
    };
    let mut top = Fields {
        file: &file,
        path: String::new(),
        obj: &root,
        errors,
    };
    unknown_keys(&mut top, KNOWN);
    match root.get("version") {
        None | Some(Value::Null) => top.err("version", "is required (1)"),
        Some(v) if v.as_u64() == Some(1) => {}
        Some(v) => top.err("version", format!("must be 1, not {v}")),
    }
    let list = match root.get("endpoints") {
        None | Some(Value::Null) => {
            top.err("endpoints", "is required (an array of endpoints)");
            return out;
        }
        Some(Value::Array(a)) => a,
        Some(_) => {
            top.err("endpoints", "must be an array of endpoints");
            return out;
        }
    };
    let mut names = HashSet::new();
    let mut upstream_ids: Vec<&str> = expose.upstreams.iter().map(|u| u.id.as_str()).collect();
    upstream_ids.push("local");
    let manifest_ids: HashSet<String> = hooks.hooks.iter().map(|h| h.id.clone()).collect();
    let name_pattern = regex::Regex::new(NAME_PATTERN).expect("a valid pattern");
    for (i, v) in list.iter().enumerate() {
        let Some(mut f) = entry(&file, "endpoints", i, v, errors) else {
            continue;
        };
        unknown_keys(&mut f, ENDPOINT_KEYS);
        let name = f.required_string("name");
        if !name.is_empty() {
            if !name_pattern.is_match(&name) {
                f.err(
                    "name",
                    format!("{name:?} is not a name for /mcp/<name>: 1 to 64 ASCII letters, digits, '-' and '_', starting with a letter or digit"),
                );
            } else if !names.insert(name.clone()) {
                f.err("name", format!("duplicate endpoint name {name:?}"));
            }
        }
        let description = f.string("description").unwrap_or_default();
        let globs = |f: &mut Fields<'_>, key: &str| {
            f.obj
                .get(key)
                .is_some_and(|v| !v.is_null())
                .then(|| f.strings(key))
        };
        let select = Selection {
            tools: globs(&mut f, "tools"),
            prompts: globs(&mut f, "prompts"),
            resources: globs(&mut f, "resources"),
            upstreams: globs(&mut f, "upstreams"),
            categories: globs(&mut f, "categories"),
        };
        for (j, id) in select.upstreams.iter().flatten().enumerate() {
            if !upstream_ids.contains(&id.as_str()) {
                f.err(
                    &format!("upstreams[{j}]"),
                    format!(
                        "no upstream {id:?} in mcp/expose.json (known: {})",
                        upstream_ids.join(", ")
                    ),
                );
            }
        }
        if select.is_empty() {
            warnings.push(format!(
                "{}: endpoints[{i}] ({name:?}) selects nothing: /mcp/{name} serves no tool, prompt or resource (give tools, prompts, resources, upstreams or categories)",
                file.display()
            ));
        }
        let discovery = match f.string("discovery").as_deref() {
            None => None,
            Some("all") => Some(Discovery::All),
            Some("search") => Some(Discovery::Search),
            Some(other) => {
                f.err(
                    "discovery",
                    format!("{other:?} is not \"all\" or \"search\""),
                );
                None
            }
        };
        let optional_bool = |f: &mut Fields<'_>, key: &str| {
            f.obj
                .get(key)
                .is_some_and(|v| !v.is_null())
                .then(|| f.bool(key, false))
        };
        let funnel = optional_bool(&mut f, "funnel");
        let tool_search = optional_bool(&mut f, "tool_search");
        let instructions = f.string("instructions");
        let server_name = f.string("server_name");
        if server_name.as_deref().is_some_and(|s| s.trim().is_empty()) {
            f.err("server_name", "must be a non-empty string");
        }
        let path = f.path.clone();
        let hook_values = f.array("hooks");
        let rule_values = f.array("rules");
        let hooks_field = format!("{path}.hooks");
        let hooks_list = List {
            file: &file,
            field: &hooks_field,
            hooks_dir: &hooks.hooks_dir,
            overlay: &|_| None,
            on_by_default: true,
        };
        let mut ids = manifest_ids.clone();
        let endpoint_hooks = entries_of(
            home,
            &hooks_list,
            &hook_values,
            &mut ids,
            env,
            errors,
            warnings,
        );
        let rules_field = format!("{path}.rules");
        let rules = rule_values
            .iter()
            .enumerate()
            .filter_map(|(j, v)| entry(&file, &rules_field, j, v, errors).and_then(parse_rule))
            .collect();
        out.endpoints.push(Endpoint {
            name,
            description,
            select,
            hooks: endpoint_hooks,
            rules,
            funnel,
            tool_search,
            discovery,
            instructions,
            server_name,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use crate::Config;
    use serde_json::{json, Value};
    use std::path::PathBuf;

    fn home(label: &str, endpoints: &Value) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("sluice-endpoints-{label}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("mcp")).unwrap();
        std::fs::write(
            dir.join("mcp/expose.json"),
            json!({"upstreams": [{"id": "crm", "command": "x"}, {"id": "kb", "command": "y"}]})
                .to_string(),
        )
        .unwrap();
        std::fs::write(dir.join(super::FILE), endpoints.to_string()).unwrap();
        dir
    }

    fn load(label: &str, endpoints: Value) -> Result<(Config, Vec<String>), Vec<String>> {
        let dir = home(label, &endpoints);
        let r = Config::load(&dir, &|_| Some("x".into()))
            .map_err(|e| e.0.iter().map(ToString::to_string).collect());
        let _ = std::fs::remove_dir_all(&dir);
        r
    }

    /// Without the file there are no endpoints; with it, each endpoint as written.
    #[test]
    fn an_endpoint_is_read_whole() {
        let dir =
            std::env::temp_dir().join(format!("sluice-endpoints-none-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let (c, _) = Config::load(&dir, &|_| None).unwrap();
        assert!(c.endpoints.endpoints.is_empty());
        let _ = std::fs::remove_dir_all(&dir);
        let (c, warnings) = load(
            "whole",
            json!({"version": 1, "endpoints": [{
                "name": "support",
                "description": "the support agent",
                "tools": ["crm_*", "kb_search"],
                "upstreams": ["crm", "kb"],
                "hooks": [{"id": "support-limit", "type": "builtin", "builtin": "rate-limit", "options": {"per_principal": {"rate": 5, "per": "minute"}}}],
                "rules": [{"effect": "deny", "tools": ["crm_delete*"]}],
                "funnel": false,
                "tool_search": true,
                "discovery": "search",
                "instructions": "Help customers.",
                "server_name": "support-gateway"
            }]}),
        )
        .unwrap();
        assert_eq!(warnings, Vec::<String>::new());
        let e = c.endpoints.get("support").unwrap();
        assert_eq!(e.description, "the support agent");
        assert_eq!(
            e.select.tools.as_deref(),
            Some(&["crm_*".to_string(), "kb_search".to_string()][..])
        );
        assert_eq!(e.select.prompts, None);
        assert!(e.select.whole_tools());
        assert_eq!(e.hooks.len(), 1);
        assert_eq!(e.hooks[0].id, "support-limit");
        assert!(
            e.hooks[0].enabled,
            "an endpoint's hook is on unless it says otherwise"
        );
        assert_eq!(e.hooks[0].methods, ["tools/call"]);
        assert_eq!(e.rules.len(), 1);
        assert_eq!((e.funnel, e.tool_search), (Some(false), Some(true)));
        assert_eq!(e.discovery, Some(crate::Discovery::Search));
        assert_eq!(e.instructions.as_deref(), Some("Help customers."));
        assert_eq!(e.server_name.as_deref(), Some("support-gateway"));
    }

    /// Each mistake is an error naming the file and the field.
    #[test]
    fn mistakes_name_the_file_and_field() {
        let errors = load(
            "bad",
            json!({"version": 2, "extra": 1, "endpoints": [
                {"name": "sup port", "tools": ["x"]},
                {"name": "a", "tools": ["x"]},
                {"name": "a", "tools": "x", "upstreams": ["nope"], "discovery": "some", "colour": "red"},
                {"tools": ["x"], "funnel": "yes", "hooks": [{"id": "h", "type": "builtin", "builtin": "no-such"}],
                 "rules": [{"effect": "maybe", "tools": ["x"]}]},
                5
            ]}),
        )
        .unwrap_err();
        let file = |rest: &str| format!("{}: {rest}", super::FILE);
        let ends = |want: &str| {
            assert!(
                errors
                    .iter()
                    .any(|e| e.contains(super::FILE) && e.ends_with(want)),
                "no error ending {want:?} in {errors:#?}"
            )
        };
        let _ = file;
        ends("version: must be 1, not 2");
        ends("extra: unknown key (known: $schema, version, endpoints)");
        ends("endpoints[0].name: \"sup port\" is not a name for /mcp/<name>: 1 to 64 ASCII letters, digits, '-' and '_', starting with a letter or digit");
        ends("endpoints[2].name: duplicate endpoint name \"a\"");
        ends("endpoints[2].tools: must be an array of strings");
        ends("endpoints[2].upstreams[0]: no upstream \"nope\" in mcp/expose.json (known: crm, kb, local)");
        ends("endpoints[2].discovery: \"some\" is not \"all\" or \"search\"");
        assert!(errors
            .iter()
            .any(|e| e.contains("endpoints[2].colour: unknown key")));
        ends("endpoints[3].name: is required");
        ends("endpoints[3].funnel: must be true or false");
        assert!(
            errors
                .iter()
                .any(|e| e.contains("endpoints[3].hooks[0].builtin: unknown builtin \"no-such\"")),
            "{errors:#?}"
        );
        ends("endpoints[3].rules[0].effect: must be \"allow\" or \"deny\", not \"maybe\"");
        ends("endpoints[4]: must be an object");
    }

    /// A hook id the manifest already has is refused; an endpoint that selects nothing warns.
    #[test]
    fn a_manifest_hook_id_is_taken_and_an_empty_endpoint_warns() {
        let dir = home(
            "ids",
            &json!({"version": 1, "endpoints": [
                {"name": "a", "tools": ["x"], "hooks": [{"id": "shared", "type": "builtin", "builtin": "pii"}]},
                {"name": "empty"}
            ]}),
        );
        std::fs::create_dir_all(dir.join("hooks")).unwrap();
        std::fs::write(
            dir.join("hooks/hooks.manifest.json"),
            json!({"hooks": [{"id": "shared", "type": "builtin", "builtin": "pii"}]}).to_string(),
        )
        .unwrap();
        let errors = Config::load(&dir, &|_| None).unwrap_err();
        assert!(
            errors
                .0
                .iter()
                .any(|e| e.field == "endpoints[0].hooks[0].id"
                    && e.message == "duplicate hook id \"shared\""),
            "{errors}"
        );
        std::fs::remove_file(dir.join("hooks/hooks.manifest.json")).unwrap();
        let (_, warnings) = Config::load(&dir, &|_| None).unwrap();
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(warnings[0].ends_with("endpoints[1] (\"empty\") selects nothing: /mcp/empty serves no tool, prompt or resource (give tools, prompts, resources, upstreams or categories)"), "{warnings:?}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
