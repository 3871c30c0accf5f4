//! The endpoints' snapshots (`mcp/endpoints.json`): each endpoint served at `/mcp/<name>` is a
//! snapshot of its own beside `/mcp`'s, sharing its slots, authenticator and audit log, with
//! its own configuration (the endpoint's funnel, search and discovery), catalog (what it
//! selects: `catalog/select.rs`), hook chain (the manifest's, then the endpoint's) and access
//! rules (the file's, then the endpoint's). They are built whenever `/mcp`'s snapshot is (a
//! reload, a catalog rebuild), so they follow every list change; a tree without endpoints
//! builds none, and its requests never look for one.

use super::{build_chain, changed_lists, end_session, funnel_prefix_of, ALL_LISTS};
use crate::catalog::Keeps;
use crate::state::{Snapshot, State};
use serde_json::Value;
use sluice_auth::Policy;
use sluice_config::{Config, Endpoint};
use sluice_core::glob::glob_match;
use sluice_upstream::Slot;
use std::sync::Arc;

/// `root` with its endpoints' snapshots, built over the slots' lists now. `before` is the
/// snapshot in force until now: an endpoint it has, unchanged, over the same hook chain, keeps
/// its own chain (its rate limits' buckets, its hook processes).
pub(super) fn attach(mut root: Snapshot, before: &Snapshot) -> Snapshot {
    if root.config.endpoints.endpoints.is_empty() {
        root.endpoints = Arc::new([]);
        return root;
    }
    let lists: Vec<_> = root
        .slots
        .iter()
        .map(|s| s.state.lock().lists.clone())
        .collect();
    let pairs: Vec<_> = root
        .slots
        .iter()
        .zip(lists.iter())
        .map(|(s, l)| (&s.spec, l.as_ref()))
        .collect();
    let endpoints = root
        .config
        .endpoints
        .endpoints
        .iter()
        .map(|ep| {
            let config = Arc::new(config_of(&root, ep));
            let old = before
                .endpoint(&ep.name)
                .filter(|o| o.endpoint.as_deref() == Some(ep));
            let chain = match old {
                Some(o) if Arc::ptr_eq(&before.chain, &root.chain) => o.chain.clone(),
                _ if ep.hooks.is_empty() => root.chain.clone(),
                _ => Arc::new(build_chain(&config, root.chain.tool_runner())),
            };
            let funnel_prefix = funnel_prefix_of(&config);
            let (catalog, _) = super::catalog_over(
                &config,
                &root.slots,
                &pairs,
                root.catalog.version,
                funnel_prefix.is_some(),
                Some(ep),
            );
            Arc::new(Snapshot {
                policy: Arc::new(Policy::new(&config.auth.rules)),
                config,
                slots: root.slots.clone(),
                catalog: Arc::new(catalog),
                chain,
                auth: root.auth.clone(),
                audit: root.audit.clone(),
                funnel_prefix,
                endpoint: Some(Arc::new(ep.clone())),
                endpoints: Arc::new([]),
            })
        })
        .collect();
    root.endpoints = endpoints;
    root
}

/// An endpoint's configuration: the tree's, with the endpoint's funnel, search, discovery,
/// hooks (after the manifest's) and access rules (after the file's).
fn config_of(root: &Snapshot, ep: &Endpoint) -> Config {
    let mut c = (*root.config).clone();
    c.settings.funnel = Some(ep.funnel.unwrap_or(root.funnel_prefix.is_some()));
    if let Some(on) = ep.tool_search {
        c.settings.tool_search = on;
    }
    if let Some(d) = ep.discovery {
        c.settings.discovery = d;
    }
    c.hooks.hooks.extend(ep.hooks.iter().cloned());
    c.auth.rules.extend(ep.rules.iter().cloned());
    c.endpoints = Default::default();
    c
}

/// What changed for each endpoint's sessions between two snapshots in force (`all`: every
/// list, for everyone: the access rules changed). An endpoint whose own rules changed gets
/// every list (what each caller may see changed); a new one has no sessions yet.
pub(super) fn changes(
    before: &Snapshot,
    after: &Snapshot,
    all: bool,
) -> Vec<(String, Vec<&'static str>)> {
    after
        .endpoints
        .iter()
        .filter_map(|e| {
            let name = e.endpoint_name()?;
            let old = before.endpoint(name)?;
            let rules = |s: &Snapshot| s.endpoint.as_ref().map(|e| e.rules.clone());
            let lists = if all || rules(old) != rules(e) {
                ALL_LISTS.to_vec()
            } else {
                changed_lists(&old.catalog, &e.catalog)
            };
            Some((name.to_string(), lists))
        })
        .collect()
}

/// A reload removed endpoints (`before` has them, `after` does not): their sessions end (their
/// next request is answered 404, their GET streams end) and so do the 2026-07-28 listen
/// streams opened on them.
pub(super) async fn end_removed(st: &State, before: &Snapshot, after: &Snapshot) {
    let removed = removed(before, after);
    if removed.is_empty() {
        return;
    }
    for s in st.rt.sessions().all() {
        if s.init
            .endpoint
            .as_deref()
            .is_some_and(|e| removed.iter().any(|r| r == e))
        {
            end_session(st, &s.id, sluice_hooks::EndReason::Shutdown).await;
        }
    }
    st.rt.listeners().close_endpoints(&removed);
}

/// The endpoints `before` has and `after` does not.
pub(super) fn removed(before: &Snapshot, after: &Snapshot) -> Vec<String> {
    before
        .endpoints
        .iter()
        .filter_map(|e| e.endpoint_name())
        .filter(|name| after.endpoint(name).is_none())
        .map(str::to_string)
        .collect()
}

/// What one endpoint selects, asked by a catalog being built (`Catalog::keep_only`).
pub(super) struct Selected<'a> {
    pub ep: &'a Endpoint,
    pub config: &'a Config,
    pub slots: &'a [Arc<Slot>],
}

impl Selected<'_> {
    /// Is the upstream of this slot among the endpoint's `upstreams` (when it names some)?
    fn upstream(&self, slot: usize) -> bool {
        let Some(ids) = &self.ep.select.upstreams else {
            return true;
        };
        self.slots
            .get(slot)
            .is_some_and(|s| ids.iter().any(|id| *id == s.spec.id))
    }

    /// A tool's category: its expose entry's, else the one its definition carries, else its
    /// upstream's id (as the funnel groups it).
    fn category(&self, slot: usize, tool: &str, def: &Value) -> String {
        let Some(id) = self.slots.get(slot).map(|s| s.spec.id.as_str()) else {
            return String::new();
        };
        self.config
            .expose
            .expose
            .iter()
            .find(|e| e.upstream == id && e.tool == tool && !e.category.is_empty())
            .map(|e| e.category.clone())
            .or_else(|| {
                def.pointer("/_meta/sluice~1category")
                    .and_then(Value::as_str)
                    .map(str::to_string)
            })
            .unwrap_or_else(|| id.to_string())
    }
}

/// Does `name` match one of `globs`; without globs, is the kind served whole?
fn named(globs: &Option<Vec<String>>, whole: bool, name: &str) -> bool {
    match globs {
        Some(globs) => globs.iter().any(|g| glob_match(g, name)),
        None => whole,
    }
}

impl Keeps for Selected<'_> {
    fn tool(&self, name: &str, slot: usize, tool: &str, def: &Value) -> bool {
        let select = &self.ep.select;
        if !self.upstream(slot) {
            return false;
        }
        if let Some(categories) = &select.categories {
            let category = self.category(slot, tool, def);
            if !categories.contains(&category) {
                return false;
            }
        }
        named(&select.tools, select.whole_tools(), name)
    }

    fn prompt(&self, name: &str, slot: usize) -> bool {
        let select = &self.ep.select;
        self.upstream(slot) && named(&select.prompts, select.upstreams.is_some(), name)
    }

    fn resource(&self, uri: &str, slot: usize) -> bool {
        let select = &self.ep.select;
        self.upstream(slot) && named(&select.resources, select.upstreams.is_some(), uri)
    }

    fn every_tool_of(&self, slot: usize) -> bool {
        let select = &self.ep.select;
        self.upstream(slot)
            && select.upstreams.is_some()
            && select.tools.is_none()
            && select.categories.is_none()
    }
}

#[cfg(test)]
mod tests {
    use crate::catalog::{Catalog, ListKind};
    use crate::testing;
    use serde_json::{json, Value};
    use sluice_upstream::UpstreamLists;

    fn names(catalog: &Catalog, kind: ListKind) -> Vec<String> {
        let page = catalog.page(kind, None, usize::MAX).expect("a page");
        let key = match kind {
            ListKind::Resources => "uri",
            ListKind::Templates => "uriTemplate",
            _ => "name",
        };
        page[kind.key()]
            .as_array()
            .expect("a list")
            .iter()
            .map(|v| v[key].as_str().expect("a name").to_string())
            .collect()
    }

    fn lists(tools: &[&str], prompt: &str, uri: &str) -> UpstreamLists {
        UpstreamLists {
            prompts: vec![json!({"name": prompt})],
            resources: vec![json!({"uri": uri, "name": uri})],
            templates: vec![json!({"uriTemplate": format!("{uri}/{{id}}"), "name": "t"})],
            ..testing::tools(tools)
        }
    }

    fn tree(endpoints: Value) -> Vec<(&'static str, Value)> {
        vec![
            (
                "mcp/expose.json",
                json!({"version": 1, "upstreams": [
                    {"id": "crm", "command": "/nonexistent", "expose_all": true},
                    {"id": "kb", "command": "/nonexistent", "expose_all": true},
                    {"id": "down", "command": "/nonexistent", "expose_all": true}
                ], "expose": [{"upstream": "kb", "tool": "search", "as": "kb_find", "category": "billing"}]}),
            ),
            ("mcp/endpoints.json", endpoints),
        ]
    }

    /// Each endpoint's catalog holds what it selects: by final name (a curated `as` name too),
    /// by upstream (every kind whole), by category; `/mcp` keeps everything, and a name an
    /// endpoint does not keep resolves to nothing there.
    #[test]
    fn each_endpoint_serves_what_it_selects() {
        let st = testing::state(
            &tree(json!({"version": 1, "endpoints": [
                {"name": "globs", "tools": ["crm_get*", "kb_find"], "prompts": ["crm_*"]},
                {"name": "whole", "upstreams": ["kb"]},
                {"name": "billing", "categories": ["billing"]},
                {"name": "down", "upstreams": ["down"]}
            ]})),
            &[
                (
                    "crm",
                    lists(&["get_customer", "get_order", "delete"], "greet", "crm://a"),
                    json!({"tools": {}}),
                ),
                (
                    "kb",
                    lists(&["search", "add"], "cite", "kb://b"),
                    json!({"tools": {}}),
                ),
            ],
        );
        let root = st.snapshot();
        let ep = |n: &str| root.endpoint(n).expect("an endpoint").clone();
        assert!(names(&root.catalog, ListKind::Tools).contains(&"crm_delete".to_string()));
        let globs = ep("globs");
        assert_eq!(
            names(&globs.catalog, ListKind::Tools),
            ["crm_get_customer", "crm_get_order", "kb_find"]
        );
        assert!(globs.catalog.tool("crm_delete").is_none(), "unknown there");
        assert!(
            globs.catalog.tool("kb_search").is_none(),
            "the prefixed name is not kept"
        );
        assert_eq!(names(&globs.catalog, ListKind::Prompts), ["crm_greet"]);
        assert!(names(&globs.catalog, ListKind::Resources).is_empty());
        assert!(names(&globs.catalog, ListKind::Templates).is_empty());
        let whole = ep("whole");
        assert_eq!(
            names(&whole.catalog, ListKind::Tools),
            ["kb_find", "kb_add"]
        );
        assert_eq!(names(&whole.catalog, ListKind::Prompts), ["kb_cite"]);
        assert_eq!(names(&whole.catalog, ListKind::Resources), ["kb://b"]);
        assert_eq!(names(&whole.catalog, ListKind::Templates), ["kb://b/{id}"]);
        assert_eq!(whole.catalog.resource("crm://a"), None);
        // A category: the curated tool's, never its upstream's other tools.
        let billing = ep("billing");
        assert_eq!(names(&billing.catalog, ListKind::Tools), ["kb_find"]);
        assert!(names(&billing.catalog, ListKind::Prompts).is_empty());
        // A down upstream is named as down where it is selected, and nowhere else.
        assert!(ep("down").catalog.down_tool("down_x").is_some());
        assert!(globs.catalog.down_tool("down_x").is_none());
        assert!(root.catalog.down_tool("down_x").is_some());
        // Each endpoint says its own name; `/mcp` says none.
        assert_eq!(globs.endpoint_name(), Some("globs"));
        assert_eq!(root.endpoint_name(), None);
        assert_eq!(globs.catalog.version, root.catalog.version);
    }

    /// An endpoint's funnel and search reach its own tools only: its funnel lists them, its
    /// search tool's description counts them, and its discovery lists the search and run tools
    /// alone; `/mcp` keeps its own settings.
    #[test]
    fn the_funnel_and_search_of_an_endpoint_are_its_own() {
        let st = testing::state(
            &tree(json!({"version": 1, "endpoints": [
                {"name": "crm", "tools": ["crm_get*"], "funnel": true, "discovery": "search"}
            ]})),
            &[
                (
                    "crm",
                    lists(&["get_customer", "get_order", "delete"], "p", "crm://a"),
                    json!({"tools": {}}),
                ),
                (
                    "kb",
                    lists(&["search", "add"], "q", "kb://b"),
                    json!({"tools": {}}),
                ),
            ],
        );
        let root = st.snapshot();
        let crm = root.endpoint("crm").unwrap();
        let funnel: Vec<&str> = crm
            .catalog
            .funnel_tools()
            .iter()
            .map(|f| f.name.as_str())
            .collect();
        assert_eq!(funnel, ["crm_get_customer", "crm_get_order"]);
        assert!(crm.catalog.tool("crm_delete").is_none() && crm.catalog.tool("kb_add").is_none());
        assert_eq!(
            names(&crm.catalog, ListKind::Tools),
            ["sluice_run_tool", "sluice_search_tools"]
        );
        let search = crm
            .catalog
            .tools()
            .iter()
            .find(|t| t["name"] == "sluice_search_tools")
            .unwrap();
        let description = search["description"].as_str().unwrap();
        assert!(
            description
                .starts_with("Search the 2 tools this gateway reaches, from 1 server (crm),"),
            "{description}"
        );
        assert!(
            root.catalog.funnel_tools().is_empty(),
            "/mcp's funnel is off"
        );
        assert!(root.catalog.tool("sluice_search_tools").is_none());
    }

    /// A list change reaches only the endpoints whose lists it changes; an endpoint's access
    /// rules and hooks are the file's and the manifest's, then its own.
    #[test]
    fn a_list_change_is_announced_per_endpoint_and_rules_and_hooks_add_up() {
        let st = testing::state(
            &[
                tree(json!({"version": 1, "endpoints": [
                    {"name": "crm", "upstreams": ["crm"],
                     "rules": [{"effect": "deny", "tools": ["crm_delete"]}],
                     "hooks": [{"id": "crm-limit", "type": "builtin", "builtin": "rate-limit",
                                "options": {"per_tool": {"*": {"rate": 1, "per": "minute"}}}}]},
                    {"name": "kb", "upstreams": ["kb"]}
                ]})),
                vec![(
                    "auth/auth.config.json",
                    json!({"rules": [{"effect": "deny", "tools": ["kb_add"]}]}),
                )],
            ]
            .concat(),
            &[
                (
                    "crm",
                    lists(&["get", "delete"], "p", "crm://a"),
                    json!({"tools": {}}),
                ),
                (
                    "kb",
                    lists(&["search", "add"], "q", "kb://b"),
                    json!({"tools": {}}),
                ),
            ],
        );
        let before = st.snapshot();
        let crm = before.endpoint("crm").unwrap();
        use sluice_auth::Item;
        assert!(!crm.policy.allows(Item::Tool, "crm_delete", None));
        assert!(
            !crm.policy.allows(Item::Tool, "kb_add", None),
            "the file's rules too"
        );
        assert!(
            before.policy.allows(Item::Tool, "crm_delete", None),
            "not /mcp's"
        );
        assert!(!crm.chain.is_empty() && before.chain.is_empty());
        let kb = before.endpoint("kb").unwrap();
        assert!(
            std::sync::Arc::ptr_eq(&kb.chain, &before.chain),
            "no hooks: the manifest's chain"
        );
        // kb's upstream lists one more tool.
        let slot = before.slot("kb").unwrap().clone();
        {
            let mut s = slot.state.lock();
            s.lists = Some(lists(&["search", "add", "more"], "q", "kb://b"));
            slot.publish(&s);
        }
        crate::control::rebuild_catalog(&st, None);
        let after = st.snapshot();
        let changes = super::changes(&before, &after, false);
        let of = |n: &str| changes.iter().find(|(e, _)| e == n).map(|(_, l)| l.clone());
        assert_eq!(of("kb"), Some(vec!["notifications/tools/list_changed"]));
        assert_eq!(of("crm"), Some(vec![]));
        assert!(
            std::sync::Arc::ptr_eq(&after.endpoint("crm").unwrap().chain, &crm.chain),
            "a rebuild keeps the endpoint's chain (its buckets)"
        );
        assert!(super::removed(&before, &after).is_empty());
    }
}
