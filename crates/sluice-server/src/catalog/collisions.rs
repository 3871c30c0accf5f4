//! Names two upstreams both produce (a tool, a prompt, a resource URI), found before a catalog
//! is built, for `"on_collision": "error"`: such a name is listed for neither.

use foldhash::HashMap;
use serde_json::Value;
use sluice_config::{ExposeEntry, UpstreamSpec};
use sluice_upstream::UpstreamLists;

/// The client-facing names under which `spec` lists its tool `tname`: its enabled `expose`
/// entries' names, else the name itself (transparent) or `<id>_<tool>` (`expose_all`).
pub(super) fn tool_names(spec: &UpstreamSpec, tname: &str, expose: &[ExposeEntry]) -> Vec<String> {
    let mut curated = expose
        .iter()
        .filter(|e| e.upstream == spec.id && e.tool == tname)
        .peekable();
    if curated.peek().is_some() {
        return curated
            .filter(|e| e.enabled)
            .map(|e| e.name.clone())
            .collect();
    }
    if spec.transparent {
        vec![tname.to_string()]
    } else if spec.expose_all {
        vec![format!("{}_{}", spec.id, tname)]
    } else {
        Vec::new()
    }
}

/// The name a prompt of `spec` is listed under.
pub(super) fn prompt_name(spec: &UpstreamSpec, pname: &str) -> String {
    if spec.transparent {
        pname.to_string()
    } else {
        format!("{}_{}", spec.id, pname)
    }
}

/// Names produced by two or more live upstreams, each with the ids of those upstreams (file
/// order).
#[derive(Debug, Default)]
pub(super) struct Collided {
    pub(super) tools: HashMap<String, Vec<String>>,
    pub(super) prompts: HashMap<String, Vec<String>>,
    pub(super) resources: HashMap<String, Vec<String>>,
}

impl Collided {
    /// Every name of the live upstreams' lists that more than one of them produces.
    pub(super) fn find(
        upstreams: &[(&UpstreamSpec, Option<&UpstreamLists>)],
        expose: &[ExposeEntry],
    ) -> Collided {
        let mut tools: HashMap<String, Vec<String>> = HashMap::default();
        let mut prompts: HashMap<String, Vec<String>> = HashMap::default();
        let mut resources: HashMap<String, Vec<String>> = HashMap::default();
        let add = |map: &mut HashMap<String, Vec<String>>, name: String, id: &str| {
            let ids = map.entry(name).or_default();
            if !ids.iter().any(|i| i == id) {
                ids.push(id.to_string());
            }
        };
        for (spec, lists) in upstreams {
            let Some(lists) = lists else { continue };
            let name_of =
                |v: &Value, key: &str| v.get(key).and_then(Value::as_str).map(str::to_string);
            for t in &lists.tools {
                let Some(tname) = name_of(t, "name") else {
                    continue;
                };
                for name in tool_names(spec, &tname, expose) {
                    add(&mut tools, name, &spec.id);
                }
            }
            for p in &lists.prompts {
                let Some(pname) = name_of(p, "name") else {
                    continue;
                };
                add(&mut prompts, prompt_name(spec, &pname), &spec.id);
            }
            for r in &lists.resources {
                let Some(uri) = name_of(r, "uri") else {
                    continue;
                };
                add(&mut resources, uri, &spec.id);
            }
        }
        let shared = |m: HashMap<String, Vec<String>>| -> HashMap<String, Vec<String>> {
            m.into_iter().filter(|(_, ids)| ids.len() > 1).collect()
        };
        Collided {
            tools: shared(tools),
            prompts: shared(prompts),
            resources: shared(resources),
        }
    }

    /// The warnings for the log, one per name, in a stable order.
    pub(super) fn warnings(&self) -> Vec<String> {
        let mut out = Vec::new();
        for (kind, map) in [
            ("tool name", &self.tools),
            ("prompt name", &self.prompts),
            ("resource", &self.resources),
        ] {
            let mut names: Vec<(&String, &Vec<String>)> = map.iter().collect();
            names.sort();
            for (name, ids) in names {
                out.push(format!(
                    "{kind} {name:?} is produced by upstreams {}; with on_collision \"error\" it is listed for none of them (rename one with `as`)",
                    ids.join(" and ")
                ));
            }
        }
        out
    }
}
