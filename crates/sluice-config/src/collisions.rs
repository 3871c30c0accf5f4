//! Name collisions: the names each upstream's lists become (`tool_names`, `prompt_name`), the
//! names two upstreams both produce ([`ExposeFile::collisions`], over what they list), and the
//! collisions the tree alone shows ([`ExposeFile::collision_risks`]). What `on_collision`
//! decides is applied where the catalog is built.

use crate::expose::{ExposeEntry, ExposeFile, UpstreamSpec};
use std::collections::BTreeMap;

/// The client-facing names under which `spec` lists its tool `tool`: its `expose` entries'
/// names (the enabled ones), else the name itself (transparent) or `<id>_<tool>`
/// (`expose_all`), else none.
pub fn tool_names(spec: &UpstreamSpec, tool: &str, expose: &[ExposeEntry]) -> Vec<String> {
    let mut curated = expose
        .iter()
        .filter(|e| e.upstream == spec.id && e.tool == tool)
        .peekable();
    if curated.peek().is_some() {
        return curated
            .filter(|e| e.enabled)
            .map(|e| e.name.clone())
            .collect();
    }
    if spec.transparent {
        vec![tool.to_string()]
    } else if spec.expose_all {
        vec![format!("{}_{}", spec.id, tool)]
    } else {
        Vec::new()
    }
}

/// The client-facing name of `spec`'s prompt `prompt`.
pub fn prompt_name(spec: &UpstreamSpec, prompt: &str) -> String {
    if spec.transparent {
        prompt.to_string()
    } else {
        format!("{}_{}", spec.id, prompt)
    }
}

/// What one upstream lists, by name (as the upstream names them).
#[derive(Debug, Clone, Default)]
pub struct Listed<'a> {
    /// Its tools' names.
    pub tools: Vec<&'a str>,
    /// Its prompts' names.
    pub prompts: Vec<&'a str>,
    /// Its resources' URIs, as clients see them (a skill upstream's `skill://` URIs under its
    /// prefix).
    pub resources: Vec<std::borrow::Cow<'a, str>>,
}

/// Final names two or more upstreams produce, each with those upstreams' ids in file order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Collisions {
    /// Tool names.
    pub tools: BTreeMap<String, Vec<String>>,
    /// Prompt names.
    pub prompts: BTreeMap<String, Vec<String>>,
    /// Resource URIs.
    pub resources: BTreeMap<String, Vec<String>>,
}

impl Collisions {
    /// No name is produced twice.
    pub fn is_empty(&self) -> bool {
        self.tools.is_empty() && self.prompts.is_empty() && self.resources.is_empty()
    }

    /// One line per name: `tool name "x" is produced by upstreams a and b`.
    pub fn lines(&self) -> Vec<String> {
        let mut out = Vec::new();
        for (kind, map) in [
            ("tool name", &self.tools),
            ("prompt name", &self.prompts),
            ("resource", &self.resources),
        ] {
            for (name, ids) in map {
                out.push(format!(
                    "{kind} {name:?} is produced by upstreams {}",
                    ids.join(" and ")
                ));
            }
        }
        out
    }
}

impl ExposeFile {
    /// The final names two or more of `listed` (upstreams and what each lists) produce.
    pub fn collisions(
        listed: &[(&UpstreamSpec, Listed<'_>)],
        expose: &[ExposeEntry],
    ) -> Collisions {
        let mut all = Collisions::default();
        let add = |map: &mut BTreeMap<String, Vec<String>>, name: String, id: &str| {
            let ids = map.entry(name).or_default();
            if !ids.iter().any(|i| i == id) {
                ids.push(id.to_string());
            }
        };
        for (spec, l) in listed {
            for t in &l.tools {
                for name in tool_names(spec, t, expose) {
                    add(&mut all.tools, name, &spec.id);
                }
            }
            for p in &l.prompts {
                add(&mut all.prompts, prompt_name(spec, p), &spec.id);
            }
            for r in &l.resources {
                add(&mut all.resources, r.to_string(), &spec.id);
            }
        }
        for map in [&mut all.tools, &mut all.prompts, &mut all.resources] {
            map.retain(|_, ids| ids.len() > 1);
        }
        all
    }

    /// One line per name two upstreams may both produce, as far as the tree alone shows (what
    /// the upstreams list is known only when they run), as `sluice check` prints them.
    pub fn collision_risks(&self) -> Vec<String> {
        let live: Vec<&UpstreamSpec> = self.upstreams.iter().filter(|u| u.enabled).collect();
        let mut out = Vec::new();
        for e in self.expose.iter().filter(|e| e.enabled) {
            for v in live.iter().filter(|v| v.expose_all) {
                let Some(tool) = e.name.strip_prefix(&format!("{}_", v.id)) else {
                    continue;
                };
                if v.id == e.upstream && tool == e.tool {
                    continue;
                }
                out.push(format!(
                    "`as` {:?} of {}/{} is the name upstream {} lists its tool {tool:?} under, if it has one",
                    e.name, e.upstream, e.tool, v.id
                ));
            }
        }
        for a in &live {
            for b in &live {
                let Some(rest) = b.id.strip_prefix(&format!("{}_", a.id)) else {
                    continue;
                };
                let what = if a.expose_all && b.expose_all {
                    "tool and prompt names"
                } else {
                    "prompt names"
                };
                out.push(format!(
                    "upstreams {} and {} may produce the same {what}: {}'s `{rest}_x` and {}'s `x` are both `{}_x`",
                    a.id, b.id, a.id, b.id, b.id
                ));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::expose::OnCollision;

    fn entry(upstream: &str, tool: &str, name: &str) -> ExposeEntry {
        ExposeEntry {
            upstream: upstream.into(),
            tool: tool.into(),
            name: name.into(),
            category: String::new(),
            enabled: true,
        }
    }

    #[test]
    fn an_as_in_anothers_names_and_overlapping_prefixes_are_risks() {
        let mut a = UpstreamSpec::stdio("a", "x", vec![]);
        a.expose_all = true;
        let mut a_b = UpstreamSpec::stdio("a_b", "x", vec![]);
        a_b.expose_all = true;
        let c = UpstreamSpec::stdio("c", "x", vec![]);
        let file = ExposeFile {
            version: 1,
            upstreams: vec![a, a_b, c],
            expose: vec![entry("c", "t", "a_search"), entry("c", "u", "c_u")],
            on_collision: OnCollision::Error,
            pins: Default::default(),
            skills: Vec::new(),
        };
        assert_eq!(
            file.collision_risks(),
            [
                "`as` \"a_search\" of c/t is the name upstream a lists its tool \"search\" under, if it has one",
                "upstreams a and a_b may produce the same tool and prompt names: a's `b_x` and a_b's `x` are both `a_b_x`",
            ]
        );
    }

    #[test]
    fn names_two_upstreams_list_are_collisions() {
        let mut a = UpstreamSpec::stdio("a", "x", vec![]);
        a.expose_all = true;
        let b = UpstreamSpec::stdio("b", "x", vec![]);
        let expose = [entry("b", "ping", "a_echo")];
        let listed = [
            (
                &a,
                Listed {
                    tools: vec!["echo", "add"],
                    prompts: vec!["p"],
                    resources: vec!["u:1".into()],
                },
            ),
            (
                &b,
                Listed {
                    tools: vec!["ping", "other"],
                    prompts: vec![],
                    resources: vec!["u:1".into(), "u:2".into()],
                },
            ),
        ];
        let c = ExposeFile::collisions(&listed, &expose);
        assert_eq!(
            c.lines(),
            [
                "tool name \"a_echo\" is produced by upstreams a and b",
                "resource \"u:1\" is produced by upstreams a and b",
            ]
        );
    }
}
