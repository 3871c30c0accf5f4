//! The merged catalog: the tools, prompts, resources and resource templates of every connected
//! upstream under the names clients see, where each name routes back to, and the gateway's own
//! pagination over the merged lists.

use crate::gateway_tools::GatewayTool;
use foldhash::HashMap;
use serde_json::{json, Value};
use sluice_config::collisions::{prompt_name, tool_names};
use sluice_config::{Collisions, ExposeEntry, OnCollision, UpstreamSpec};
use sluice_core::RpcError;
use sluice_upstream::{Slot, UpstreamLists};
use std::borrow::Cow;
use std::sync::Arc;
use templates::{literals, template_matches};

/// Where a client-facing name goes.
#[derive(Debug, Clone, PartialEq)]
pub enum Route {
    /// To an upstream.
    Upstream {
        /// Index of the upstream's slot in the snapshot.
        slot: usize,
        /// The name the upstream knows it by.
        name: String,
    },
    /// The gateway answers it itself.
    Gateway(GatewayTool),
}

impl Route {
    /// The slot index of an upstream route.
    pub fn slot(&self) -> Option<usize> {
        match self {
            Route::Upstream { slot, .. } => Some(*slot),
            Route::Gateway(_) => None,
        }
    }
}

/// An upstream route of a prompt.
#[derive(Debug, Clone, PartialEq)]
pub struct PromptRoute {
    /// Index of the upstream's slot in the snapshot.
    pub slot: usize,
    /// The name the upstream knows it by.
    pub name: String,
}

/// The four list kinds a client can page through.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ListKind {
    /// tools/list
    Tools,
    /// prompts/list
    Prompts,
    /// resources/list
    Resources,
    /// resources/templates/list
    Templates,
    /// skills/list (the Skills extension)
    Skills,
}

impl ListKind {
    /// The result key of this list.
    pub fn key(self) -> &'static str {
        match self {
            ListKind::Tools => "tools",
            ListKind::Prompts => "prompts",
            ListKind::Resources => "resources",
            ListKind::Templates => "resourceTemplates",
            ListKind::Skills => "skills",
        }
    }
}

/// The merged view, rebuilt whenever an upstream's lists change. Immutable once built.
#[derive(Debug, Default)]
pub struct Catalog {
    /// A number that changes with every rebuild (part of cursors).
    pub version: u64,
    tools: Vec<Value>,
    /// Where each tool is in `tools`, by name: built the first time a definition is asked for
    /// (the catalog does not change once built; adding a tool empties it).
    tool_index: std::sync::OnceLock<HashMap<String, usize>>,
    tool_routes: HashMap<String, Route>,
    prompts: Vec<Value>,
    prompt_routes: HashMap<String, PromptRoute>,
    resources: Vec<Value>,
    resource_routes: HashMap<String, usize>,
    templates: Vec<Value>,
    template_routes: Vec<(Vec<String>, usize)>,
    /// The skills of the upstreams that declare the extension, and where skill URIs go.
    pub skills: skills::Skills,
    /// Upstreams that are down, for naming them when a call targets one of their tools:
    /// curated names, `<id>_` prefixes, and transparent upstreams (any name).
    down_names: HashMap<String, (usize, String)>,
    down_prefixes: Vec<(String, usize)>,
    down_transparent: Option<usize>,
    funnel_routes: HashMap<String, Route>,
    funnel_tools: Vec<FunnelTool>,
    /// The slots the routes index into (the same snapshot the catalog was built from).
    pub slots: Arc<[Arc<Slot>]>,
    /// Pages of this catalog's lists, serialised once (see [`Catalog::cached_page`]).
    pages: PageCache,
    /// The upstreams' tool names, for `tool-scan` (built the first time it asks).
    scan_names: std::sync::OnceLock<sluice_hooks::builtin::tool_scan::ToolNames>,
    /// Each slot's upstream id, by slot index.
    upstream_ids: Vec<String>,
    /// What `tools/list` shows when it is not every tool (progressive discovery).
    listed: Option<Vec<Value>>,
    /// Names two upstreams produce, listed for neither (`"on_collision": "error"`).
    collided: Collisions,
    /// Tools and prompts their pins hold out, by the names a client would call them.
    held_tools: HashMap<String, crate::pins::Held>,
    held_prompts: HashMap<String, crate::pins::Held>,
    /// What is worked out from this catalog once, the first time it is asked (the tool search's
    /// index: see [`Catalog::derived`]).
    derived: std::sync::OnceLock<Arc<dyn std::any::Any + Send + Sync>>,
}

/// A tool a caller can reach by name (listed, or through the funnel), once per upstream tool.
#[derive(Debug, Clone, Copy)]
pub struct Reachable<'a> {
    /// The name a call uses.
    pub name: &'a str,
    /// Its upstream's id (`local` for the register).
    pub server: &'a str,
    /// Its definition.
    pub tool: &'a Value,
    /// Where the definition is kept ([`Catalog::tool_at`]).
    pub at: ToolAt,
}

/// Where a reachable tool's definition is kept in its catalog.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolAt {
    /// The listed tools, at this index.
    Listed(usize),
    /// The funnel's tools, at this index.
    Funnel(usize),
}

/// Which serialised page: the list, where it starts, its size, and the list transform applied
/// (0 = none, else the identity of what transformed it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PageKey {
    /// The list.
    pub kind: ListKind,
    /// The offset of its first item.
    pub start: usize,
    /// The page size.
    pub size: usize,
    /// The transform's identity (0 = the page as the catalog has it).
    pub transform: usize,
}

/// A serialised page and what keeps its transform's identity from being reused.
type Cached = (Option<Arc<dyn std::any::Any + Send + Sync>>, bytes::Bytes);

#[derive(Default)]
struct PageCache(parking_lot::Mutex<HashMap<PageKey, Cached>>);

impl std::fmt::Debug for PageCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PageCache({} pages)", self.0.lock().len())
    }
}

/// A tool reachable through the funnel.
#[derive(Debug, Clone)]
pub struct FunnelTool {
    /// The name the funnel knows it by (`<upstream>_<tool>`, or a register id).
    pub name: String,
    /// Its upstream's id (`local` for the register).
    pub upstream: String,
    /// Grouping label (the expose entry's or register's category, else the upstream id).
    pub category: String,
    /// The upstream's definition.
    pub tool: Value,
}

fn with_name(item: &Value, key: &str, name: &str) -> Value {
    let mut item = item.clone();
    if let Some(o) = item.as_object_mut() {
        o.insert(key.into(), json!(name));
    }
    item
}

impl Catalog {
    /// Merge the lists of every connected upstream (`None` = down) in configuration order,
    /// after the tools the gateway answers itself. With `funnel` on, every upstream tool is
    /// also reachable through the funnel. Returns the catalog and warnings (name collisions).
    pub fn build(
        version: u64,
        upstreams: &[(&UpstreamSpec, Option<&UpstreamLists>)],
        expose: &[ExposeEntry],
        gateway_tools: Vec<(Value, GatewayTool)>,
        funnel: bool,
    ) -> (Catalog, Vec<String>) {
        let first = OnCollision::First;
        Catalog::build_deciding(
            version,
            upstreams,
            expose,
            &[],
            gateway_tools,
            funnel,
            first,
        )
    }

    /// [`Catalog::build`], with a name two upstreams produce decided by `on_collision`: the
    /// first keeps it, or (`Error`) neither lists it; and skills served under the paths
    /// `skill_entries` give (or not at all).
    pub fn build_deciding(
        version: u64,
        upstreams: &[(&UpstreamSpec, Option<&UpstreamLists>)],
        expose: &[ExposeEntry],
        skill_entries: &[sluice_config::SkillEntry],
        gateway_tools: Vec<(Value, GatewayTool)>,
        funnel: bool,
        on_collision: OnCollision,
    ) -> (Catalog, Vec<String>) {
        let mut c = Catalog {
            version,
            ..Catalog::default()
        };
        let mut warnings = Vec::new();
        if on_collision == OnCollision::Error {
            c.collided = collisions::find(upstreams, expose);
            warnings.extend(collisions::warnings(&c.collided));
        }
        c.upstream_ids = upstreams.iter().map(|(s, _)| s.id.clone()).collect();
        c.add_gateway_tools(gateway_tools);
        if funnel {
            // Every tool of every connected upstream is reachable through the funnel.
            for (slot, (spec, lists)) in upstreams.iter().enumerate() {
                let Some(lists) = lists else { continue };
                for tool in &lists.tools {
                    let Some(tname) = tool.get("name").and_then(Value::as_str) else {
                        continue;
                    };
                    let name =
                        if spec.transparent || spec.transport == sluice_config::Transport::Local {
                            tname.to_string()
                        } else {
                            format!("{}_{}", spec.id, tname)
                        };
                    let category = expose
                        .iter()
                        .find(|e| e.upstream == spec.id && e.tool == tname)
                        .map(|e| e.category.clone())
                        .filter(|c| !c.is_empty())
                        .or_else(|| {
                            tool.pointer("/_meta/sluice~1category")
                                .and_then(Value::as_str)
                                .map(str::to_string)
                        })
                        .unwrap_or_else(|| spec.id.clone());
                    if c.funnel_routes.contains_key(&name) {
                        continue;
                    }
                    c.funnel_routes.insert(
                        name.clone(),
                        Route::Upstream {
                            slot,
                            name: tname.to_string(),
                        },
                    );
                    c.funnel_tools.push(FunnelTool {
                        name,
                        upstream: spec.id.clone(),
                        category,
                        tool: tool.clone(),
                    });
                }
            }
        }
        for (slot, (spec, lists)) in upstreams.iter().enumerate() {
            let Some(lists) = lists else {
                if !spec.enabled {
                    continue;
                }
                for e in expose.iter().filter(|e| e.upstream == spec.id && e.enabled) {
                    c.down_names.insert(e.name.clone(), (slot, e.tool.clone()));
                }
                if spec.transparent {
                    c.down_transparent.get_or_insert(slot);
                } else if spec.expose_all {
                    c.down_prefixes.push((format!("{}_", spec.id), slot));
                }
                continue;
            };
            for tool in &lists.tools {
                let Some(tname) = tool.get("name").and_then(Value::as_str) else {
                    continue;
                };
                for name in tool_names(spec, tname, expose) {
                    if c.collided.tools.contains_key(&name) {
                        continue;
                    }
                    if c.tool_routes.contains_key(&name) {
                        warnings.push(format!(
                            "tool name {name:?} of upstream {:?} is already taken; this one is not listed",
                            spec.id
                        ));
                        continue;
                    }
                    c.tool_routes.insert(
                        name.clone(),
                        Route::Upstream {
                            slot,
                            name: tname.to_string(),
                        },
                    );
                    c.tools.push(with_name(tool, "name", &name));
                    c.tool_index.take();
                }
            }
            for prompt in &lists.prompts {
                let Some(pname) = prompt.get("name").and_then(Value::as_str) else {
                    continue;
                };
                let name = prompt_name(spec, pname);
                if c.collided.prompts.contains_key(&name) {
                    continue;
                }
                if c.prompt_routes.contains_key(&name) {
                    warnings.push(format!("prompt name {name:?} is already taken"));
                    continue;
                }
                c.prompt_routes.insert(
                    name.clone(),
                    PromptRoute {
                        slot,
                        name: pname.to_string(),
                    },
                );
                c.prompts.push(with_name(prompt, "name", &name));
            }
            c.skills
                .add(slot, spec, lists, skill_entries, &mut warnings);
            for res in &lists.resources {
                let Some(uri) = res.get("uri").and_then(Value::as_str) else {
                    continue;
                };
                if c.skills.not_served(slot, uri) {
                    continue;
                }
                let shown = c.skills.shown(slot, uri);
                let (uri, res) = match &shown {
                    Cow::Owned(u) => (u.as_str(), Cow::Owned(with_name(res, "uri", u))),
                    Cow::Borrowed(u) => (*u, Cow::Borrowed(res)),
                };
                if c.collided.resources.contains_key(uri) {
                    continue;
                }
                if c.resource_routes.contains_key(uri) {
                    warnings.push(format!("resource {uri:?} is offered by two upstreams"));
                    continue;
                }
                c.resource_routes.insert(uri.to_string(), slot);
                c.resources.push(res.into_owned());
            }
            for t in &lists.templates {
                let Some(ut) = t.get("uriTemplate").and_then(Value::as_str) else {
                    continue;
                };
                let shown = c.skills.shown(slot, ut);
                c.template_routes.push((literals(&shown), slot));
                c.templates.push(match shown {
                    Cow::Owned(u) => with_name(t, "uriTemplate", &u),
                    Cow::Borrowed(_) => t.clone(),
                });
            }
        }
        (c, warnings)
    }

    /// List tools the gateway answers itself.
    fn add_gateway_tools(&mut self, tools: Vec<(Value, GatewayTool)>) {
        for (t, what) in tools {
            let name = t["name"].as_str().unwrap_or("").to_string();
            self.tool_routes.insert(name, Route::Gateway(what));
            self.tools.push(t);
        }
        self.tool_index.take();
    }

    /// Where a client-facing tool name goes.
    pub fn tool(&self, name: &str) -> Option<&Route> {
        self.tool_routes
            .get(name)
            .or_else(|| self.funnel_routes.get(name))
    }

    /// Every upstream and register tool a caller can reach by name, once each: the listed
    /// ones under their listed names, then those only the funnel reaches (never the gateway's
    /// own tools).
    pub fn reachable_tools(&self) -> Vec<Reachable<'_>> {
        let mut seen = foldhash::HashSet::default();
        let mut out = Vec::new();
        let listed = self.tools.iter().enumerate().filter_map(|(i, t)| {
            let name = t.get("name")?.as_str()?;
            let server = self.upstream_ids.get(self.tool_routes.get(name)?.slot()?)?;
            Some((name, server.as_str(), t, ToolAt::Listed(i)))
        });
        let funnel = self.funnel_tools.iter().enumerate().map(|(i, f)| {
            let (name, server) = (f.name.as_str(), f.upstream.as_str());
            (name, server, &f.tool, ToolAt::Funnel(i))
        });
        for (name, server, tool, at) in listed.chain(funnel) {
            if let Some(Route::Upstream { slot, name: up }) = self.tool(name) {
                if seen.insert((*slot, up.as_str())) {
                    out.push(Reachable {
                        name,
                        server,
                        tool,
                        at,
                    });
                }
            }
        }
        out
    }

    /// The definition a [`Reachable`] of this catalog names.
    pub fn tool_at(&self, at: ToolAt) -> Option<&Value> {
        match at {
            ToolAt::Listed(i) => self.tools.get(i),
            ToolAt::Funnel(i) => self.funnel_tools.get(i).map(|f| &f.tool),
        }
    }

    /// `tools/list` shows only the tools whose route `keep` keeps (every tool still routes).
    pub fn list_only(&mut self, keep: impl Fn(&Route) -> bool) {
        let listed = self.tools.iter().filter(|t| {
            let name = t.get("name").and_then(Value::as_str).unwrap_or("");
            self.tool_routes.get(name).is_some_and(&keep)
        });
        self.listed = Some(listed.cloned().collect());
    }

    /// Replace the definition of the tool of the same name (a gateway tool whose description
    /// says what the catalog holds), before the catalog is shared.
    pub fn set_tool(&mut self, tool: Value) {
        let name = tool.get("name").cloned();
        for list in [Some(&mut self.tools), self.listed.as_mut()]
            .into_iter()
            .flatten()
        {
            if let Some(t) = list.iter_mut().find(|t| t.get("name") == name.as_ref()) {
                *t = tool.clone();
            }
        }
    }

    /// What `build` works out from this catalog, built once the first time it is asked and
    /// kept for the catalog's life (one kind of value: another kind is built afresh each time).
    pub fn derived<T: std::any::Any + Send + Sync>(
        &self,
        build: impl FnOnce(&Catalog) -> T,
    ) -> Arc<T> {
        let mut build = Some(build);
        let kept = self.derived.get_or_init(|| {
            let build = build.take().expect("get_or_init runs its closure once");
            Arc::new(build(self))
        });
        if let Ok(v) = kept.clone().downcast::<T>() {
            return v;
        }
        let build = build.expect("another kind is kept: this build has not run");
        Arc::new(build(self))
    }

    /// Every tool reachable through the funnel.
    pub fn funnel_tools(&self) -> &[FunnelTool] {
        &self.funnel_tools
    }

    /// The upstreams that all produce the tool name `name`, when `on_collision` is `error`.
    pub fn collided_tool(&self, name: &str) -> Option<&[String]> {
        self.collided.tools.get(name).map(Vec::as_slice)
    }

    /// The upstreams that all produce the prompt name `name`, when `on_collision` is `error`.
    pub fn collided_prompt(&self, name: &str) -> Option<&[String]> {
        self.collided.prompts.get(name).map(Vec::as_slice)
    }

    /// The upstream that would own `name` were it up (to name it in the error).
    pub fn down_owner(&self, name: &str) -> Option<usize> {
        self.down_tool(name).map(|(slot, _)| slot)
    }

    /// A tool `name` no live upstream lists: the down upstream that would serve it, and the name
    /// that upstream would know it by (an exposed tool's own name, the name without the
    /// upstream's prefix, or the name itself for a transparent upstream).
    pub fn down_tool<'a>(&'a self, name: &'a str) -> Option<(usize, &'a str)> {
        if let Some((s, tool)) = self.down_names.get(name) {
            return Some((*s, tool.as_str()));
        }
        self.down_prefixes
            .iter()
            .find_map(|(p, s)| Some((*s, name.strip_prefix(p.as_str())?)))
            .or(self.down_transparent.map(|s| (s, name)))
    }

    /// Where a client-facing prompt name goes.
    pub fn prompt(&self, name: &str) -> Option<&PromptRoute> {
        self.prompt_routes.get(name)
    }

    /// Which upstream serves a resource URI: a listed resource, else the first template that
    /// matches it (a template's own text also matches, for `completion/complete`).
    pub fn resource(&self, uri: &str) -> Option<usize> {
        if let Some(s) = self.resource_routes.get(uri) {
            return Some(*s);
        }
        for (i, (lits, slot)) in self.template_routes.iter().enumerate() {
            if template_matches(lits, uri)
                || self.templates[i].get("uriTemplate").and_then(Value::as_str) == Some(uri)
            {
                return Some(*slot);
            }
        }
        None
    }

    /// The merged tools (for tests and the funnel).
    pub fn tools(&self) -> &[Value] {
        &self.tools
    }

    /// The listed definition of a client-facing tool name (for the `validate` hook).
    pub fn tool_definition(&self, name: &str) -> Option<&Value> {
        let index = self.tool_index.get_or_init(|| {
            let mut index = HashMap::default();
            for (i, t) in self.tools.iter().enumerate() {
                if let Some(n) = t.get("name").and_then(Value::as_str) {
                    // The first of a name, as a scan from the start finds.
                    index.entry(n.to_string()).or_insert(i);
                }
            }
            index
        });
        self.tools.get(*index.get(name)?)
    }

    /// One page of a list result: `{<key>: [...], nextCursor?}`. A cursor this gateway did not
    /// mint is -32602.
    pub fn page(
        &self,
        kind: ListKind,
        cursor: Option<&str>,
        page_size: usize,
    ) -> Result<Value, RpcError> {
        self.page_of(kind, cursor, page_size, None)
    }

    /// One page of the items `keep` lets through (the access rules of a caller); offsets in
    /// cursors count kept items only.
    pub fn page_of(
        &self,
        kind: ListKind,
        cursor: Option<&str>,
        page_size: usize,
        keep: Option<&dyn Fn(&Value) -> bool>,
    ) -> Result<Value, RpcError> {
        let all = self.items(kind);
        let kept: Vec<Value>;
        let items: &[Value] = match keep {
            None => all,
            Some(keep) => {
                kept = all.iter().filter(|v| keep(v)).cloned().collect();
                &kept
            }
        };
        let start = match cursor {
            None => 0,
            Some(c) => parse_cursor(c)
                .filter(|o| *o <= items.len())
                .ok_or_else(|| RpcError::invalid_params(format!("Invalid cursor: {c:?}")))?,
        };
        let end = (start + page_size.max(1)).min(items.len());
        let mut result = serde_json::Map::new();
        result.insert(kind.key().into(), Value::Array(items[start..end].to_vec()));
        if end < items.len() {
            result.insert(
                "nextCursor".into(),
                json!(format!("sluice-{}-{end}", self.version)),
            );
        }
        Ok(Value::Object(result))
    }
}

impl Catalog {
    /// Where the page `cursor` names starts, when it is one this catalog's pagination mints
    /// (the first page, or a cursor on a page boundary within the list): only those pages are
    /// cached, so the cache holds at most one entry per page and transform.
    pub fn page_start(&self, kind: ListKind, cursor: Option<&str>, size: usize) -> Option<usize> {
        let len = self.items(kind).len();
        match cursor {
            None => Some(0),
            Some(c) => parse_cursor(c).filter(|o| *o < len && o % size.max(1) == 0),
        }
    }

    /// A page serialised before, if any.
    pub fn cached_page(&self, key: &PageKey) -> Option<bytes::Bytes> {
        self.pages.0.lock().get(key).map(|(_, json)| json.clone())
    }

    /// Keep a serialised page; `keep` holds what `key.transform` identifies (so that identity
    /// is not reused while the entry lives).
    pub fn keep_page(
        &self,
        key: PageKey,
        keep: Option<Arc<dyn std::any::Any + Send + Sync>>,
        json: bytes::Bytes,
    ) {
        self.pages.0.lock().insert(key, (keep, json));
    }

    fn items(&self, kind: ListKind) -> &[Value] {
        match kind {
            ListKind::Tools => self.listed.as_deref().unwrap_or(&self.tools),
            ListKind::Prompts => &self.prompts,
            ListKind::Resources => &self.resources,
            ListKind::Templates => &self.templates,
            ListKind::Skills => &self.skills.entries,
        }
    }
}

/// What `tool-scan` reads: whose each listed item is, and every upstream tool's names.
impl sluice_hooks::builtin::tool_scan::CatalogNames for Catalog {
    fn owner(&self, list: &str, key: &str) -> Option<&str> {
        let slot = match list {
            "tools" => self.tool(key)?.slot()?,
            "prompts" => self.prompt(key)?.slot,
            _ => self.resource(key)?,
        };
        Some(self.slots.get(slot)?.spec.id.as_str())
    }

    fn tool_names(&self) -> &sluice_hooks::builtin::tool_scan::ToolNames {
        self.scan_names.get_or_init(|| {
            let routes = self.tool_routes.iter().chain(&self.funnel_routes);
            sluice_hooks::builtin::tool_scan::ToolNames::new(routes.filter_map(|(name, route)| {
                match route {
                    Route::Upstream { slot, name: own } => Some((
                        self.slots.get(*slot)?.spec.id.as_str(),
                        name.as_str(),
                        own.as_str(),
                    )),
                    Route::Gateway(_) => None,
                }
            }))
        })
    }
}

fn parse_cursor(c: &str) -> Option<usize> {
    let rest = c.strip_prefix("sluice-")?;
    let (_version, offset) = rest.split_once('-')?;
    offset.parse().ok()
}

mod collisions;
mod held;
mod select;
pub(crate) mod skills;
mod templates;
#[cfg(test)]
mod tests;

pub(crate) use select::Keeps;
