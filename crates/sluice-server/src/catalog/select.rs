//! An endpoint's part of a catalog (`mcp/endpoints.json`): the catalog keeps only the tools,
//! prompts, resources and templates the endpoint selects, so everything that reads it — the
//! lists and their cached pages, resolution (a name it does not keep is an unknown one), the
//! funnel, the tool search — serves the endpoint alone. The gateway's own tools stay: which of
//! them exist is the endpoint's settings' choice, made when the catalog is built.

use super::{Catalog, Route};
use serde_json::Value;

/// What an endpoint keeps, asked item by item with the item's upstream (its slot index).
pub trait Keeps {
    /// A tool under its client-facing `name`; `def` is its definition (`Null` when its
    /// upstream is down), `tool` the name its upstream knows it by.
    fn tool(&self, name: &str, slot: usize, tool: &str, def: &Value) -> bool;
    /// A prompt under its client-facing name.
    fn prompt(&self, name: &str, slot: usize) -> bool;
    /// A resource by its URI, or a template by its URI template.
    fn resource(&self, uri: &str, slot: usize) -> bool;
    /// Every tool of this upstream, whatever its name (a down upstream's tools are named by
    /// prefix or transparently, and answered "down" only when all of them are kept).
    fn every_tool_of(&self, slot: usize) -> bool;
}

impl Catalog {
    /// Keep only what `keep` keeps (and the gateway's own tools). Called on a catalog being
    /// built, before it is shared (nothing is cached in it yet).
    pub fn keep_only(&mut self, keep: &dyn Keeps) {
        let kept_tool = |name: &str, route: Option<&Route>, def: &Value| match route {
            Some(Route::Upstream { slot, name: up }) => keep.tool(name, *slot, up, def),
            Some(Route::Gateway(_)) => true,
            None => false,
        };
        let routes = &self.tool_routes;
        self.tools.retain(|t| {
            let name = t.get("name").and_then(Value::as_str).unwrap_or("");
            kept_tool(name, routes.get(name), t)
        });
        let listed: foldhash::HashSet<&str> = self
            .tools
            .iter()
            .filter_map(|t| t.get("name").and_then(Value::as_str))
            .collect();
        self.tool_routes
            .retain(|name, _| listed.contains(name.as_str()));
        self.tool_index.take();
        // The funnel reaches what the endpoint keeps: a tool kept under any of its names.
        let kept_upstream: foldhash::HashSet<(usize, &str)> = self
            .tool_routes
            .values()
            .filter_map(|r| match r {
                Route::Upstream { slot, name } => Some((*slot, name.as_str())),
                Route::Gateway(_) => None,
            })
            .collect();
        let funnel_routes = &self.funnel_routes;
        let keep_funnel = |name: &str, def: &Value| match funnel_routes.get(name) {
            Some(Route::Upstream { slot, name: up }) => {
                kept_upstream.contains(&(*slot, up.as_str())) || keep.tool(name, *slot, up, def)
            }
            _ => false,
        };
        let funnel: Vec<_> = std::mem::take(&mut self.funnel_tools)
            .into_iter()
            .filter(|f| keep_funnel(&f.name, &f.tool))
            .collect();
        self.funnel_routes
            .retain(|name, _| funnel.iter().any(|f| &f.name == name));
        self.funnel_tools = funnel;
        let prompt_routes = &self.prompt_routes;
        self.prompts.retain(|p| {
            let name = p.get("name").and_then(Value::as_str).unwrap_or("");
            prompt_routes
                .get(name)
                .is_some_and(|r| keep.prompt(name, r.slot))
        });
        self.prompt_routes
            .retain(|name, r| keep.prompt(name, r.slot));
        let resource_routes = &self.resource_routes;
        self.resources.retain(|r| {
            let uri = r.get("uri").and_then(Value::as_str).unwrap_or("");
            resource_routes
                .get(uri)
                .is_some_and(|slot| keep.resource(uri, *slot))
        });
        self.resource_routes
            .retain(|uri, slot| keep.resource(uri, *slot));
        self.skills.retain(|uri, slot| keep.resource(uri, slot));
        let templates = std::mem::take(&mut self.templates);
        let routes = std::mem::take(&mut self.template_routes);
        for (t, route) in templates.into_iter().zip(routes) {
            let ut = t.get("uriTemplate").and_then(Value::as_str).unwrap_or("");
            if keep.resource(ut, route.1) {
                self.templates.push(t);
                self.template_routes.push(route);
            }
        }
        // A down upstream's names: answered "down" only where the endpoint keeps them; any
        // other name is unknown, as it would be were the upstream up.
        self.down_names
            .retain(|name, (slot, tool)| keep.tool(name, *slot, tool, &Value::Null));
        self.down_prefixes
            .retain(|(_, slot)| keep.every_tool_of(*slot));
        if self
            .down_transparent
            .is_some_and(|slot| !keep.every_tool_of(slot))
        {
            self.down_transparent = None;
        }
    }
}
