//! Items their pins hold out of the catalog: noted under the names a client would call them
//! by, so a call to one is refused saying why (not as an unknown name).

use super::Catalog;
use sluice_config::collisions::{prompt_name, tool_names};
use sluice_config::{ExposeEntry, UpstreamSpec};
use sluice_core::RpcError;
use sluice_upstream::UpstreamLists;

impl Catalog {
    /// Note the items the pins hold out, under every name a client would call them by.
    pub(crate) fn hold(
        &mut self,
        held: Vec<crate::pins::Held>,
        upstreams: &[(&UpstreamSpec, Option<&UpstreamLists>)],
        expose: &[ExposeEntry],
    ) {
        for h in held {
            let Some((spec, _)) = upstreams.get(h.slot) else {
                continue;
            };
            match h.kind {
                sluice_config::pins::Kind::Tool => {
                    for name in tool_names(spec, &h.key, expose) {
                        if !self.tool_routes.contains_key(&name) {
                            self.held_tools.insert(name, h.clone());
                        }
                    }
                }
                sluice_config::pins::Kind::Prompt => {
                    let name = prompt_name(spec, &h.key);
                    if !self.prompt_routes.contains_key(&name) {
                        self.held_prompts.insert(name, h);
                    }
                }
                sluice_config::pins::Kind::Template => {}
            }
        }
    }

    /// The refusal of a call to a tool its pin holds out (`None`: not held).
    pub(crate) fn held_tool(&self, name: &str) -> Option<RpcError> {
        let h = self.held_tools.get(name)?;
        Some(crate::pins::refusal(
            self.upstream_ids.get(h.slot)?,
            h,
            name,
        ))
    }

    /// The refusal of a `prompts/get` of a prompt its pin holds out.
    pub(crate) fn held_prompt(&self, name: &str) -> Option<RpcError> {
        let h = self.held_prompts.get(name)?;
        Some(crate::pins::refusal(
            self.upstream_ids.get(h.slot)?,
            h,
            name,
        ))
    }
}
