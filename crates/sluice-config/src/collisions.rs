//! Name collisions the tree alone shows: an `as` that takes a name another upstream may list a
//! tool under, and upstream ids whose prefixes overlap. What the upstreams really list is known
//! only when they run; there, `on_collision` decides (the catalog).

use crate::expose::{ExposeFile, UpstreamSpec};

impl ExposeFile {
    /// One line per name two upstreams may both produce, as `sluice check` prints them.
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
    use crate::expose::{ExposeEntry, ExposeFile, OnCollision, UpstreamSpec};

    #[test]
    fn an_as_in_anothers_names_and_overlapping_prefixes_are_risks() {
        let mut a = UpstreamSpec::stdio("a", "x", vec![]);
        a.expose_all = true;
        let mut a_b = UpstreamSpec::stdio("a_b", "x", vec![]);
        a_b.expose_all = true;
        let c = UpstreamSpec::stdio("c", "x", vec![]);
        let entry = |upstream: &str, tool: &str, name: &str| ExposeEntry {
            upstream: upstream.into(),
            tool: tool.into(),
            name: name.into(),
            category: String::new(),
            enabled: true,
        };
        let file = ExposeFile {
            version: 1,
            upstreams: vec![a, a_b, c],
            expose: vec![entry("c", "t", "a_search"), entry("c", "u", "c_u")],
            on_collision: OnCollision::Error,
        };
        assert_eq!(
            file.collision_risks(),
            [
                "`as` \"a_search\" of c/t is the name upstream a lists its tool \"search\" under, if it has one",
                "upstreams a and a_b may produce the same tool and prompt names: a's `b_x` and a_b's `x` are both `a_b_x`",
            ]
        );
    }
}
