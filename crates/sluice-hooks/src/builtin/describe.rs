//! The `describe` builtin: overrides what `tools/list` says about a tool — its `title`, its
//! `description`, the schemas of its parameters (merged key by key) — and hides parameters
//! (removed from `properties` and `required`; pair it with `rewrite` to fill them in).

use crate::decision::Decision;
use crate::event::HookEvent;
use serde_json::{Map, Value};
use sluice_config::builtin::DescribeOptions;
use sluice_config::OptionError;
use std::collections::HashMap;

/// The overrides for one tool.
#[derive(Debug, Clone, Default)]
struct ToolOverride {
    title: Option<String>,
    description: Option<String>,
    properties: Map<String, Value>,
    hide: Vec<String>,
}

/// The describe builtin.
#[derive(Debug, Clone)]
pub struct Describe {
    tools: HashMap<String, ToolOverride>,
}

impl Describe {
    /// Build from the hook's `options`: `tools` (`{"<client-facing name>": {"title"?,
    /// "description"?, "properties"?: {"<param>": {…}}, "hide"?: ["<param>", …]}}`).
    pub fn from_options(options: &DescribeOptions) -> Result<Describe, OptionError> {
        let Some(tools) = &options.tools else {
            return Err(OptionError::new(
                "options.tools",
                "is required (an object of tool names)",
            ));
        };
        let tools = tools
            .iter()
            .map(|(name, o)| {
                let properties = o
                    .properties
                    .iter()
                    .map(|(k, v)| (k.clone(), Value::Object(v.clone())))
                    .collect();
                let o = ToolOverride {
                    title: o.title.clone(),
                    description: o.description.clone(),
                    properties,
                    hide: o.hide.clone(),
                };
                (name.clone(), o)
            })
            .collect();
        Ok(Describe { tools })
    }

    /// Decide on a `tools/list` reply: modify it when an override applies.
    pub fn decide(&self, ev: &HookEvent) -> Decision {
        let mut msg = ev.message.clone();
        match msg.result_mut().map(|r| self.apply(r)) {
            Some(true) => Decision::Modify(msg),
            _ => Decision::Pass,
        }
    }

    /// Apply to one tool definition; returns whether it changed.
    fn apply_tool(&self, tool: &mut Value) -> bool {
        let Some(name) = tool.get("name").and_then(Value::as_str) else {
            return false;
        };
        let Some(o) = self.tools.get(name) else {
            return false;
        };
        let Some(tool) = tool.as_object_mut() else {
            return false;
        };
        if let Some(t) = &o.title {
            tool.insert("title".into(), Value::String(t.clone()));
        }
        if let Some(d) = &o.description {
            tool.insert("description".into(), Value::String(d.clone()));
        }
        if o.properties.is_empty() && o.hide.is_empty() {
            return true;
        }
        let schema = tool
            .entry("inputSchema")
            .or_insert_with(|| serde_json::json!({"type": "object"}));
        let Some(schema) = schema.as_object_mut() else {
            return true;
        };
        if !o.properties.is_empty() {
            let props = schema
                .entry("properties")
                .or_insert_with(|| Value::Object(Map::new()));
            if let Some(props) = props.as_object_mut() {
                for (k, over) in &o.properties {
                    let slot = props
                        .entry(k.clone())
                        .or_insert_with(|| Value::Object(Map::new()));
                    match (slot.as_object_mut(), over.as_object()) {
                        (Some(slot), Some(over)) => {
                            for (ok, ov) in over {
                                slot.insert(ok.clone(), ov.clone());
                            }
                        }
                        _ => *slot = over.clone(),
                    }
                }
            }
        }
        for h in &o.hide {
            if let Some(props) = schema.get_mut("properties").and_then(Value::as_object_mut) {
                props.shift_remove(h);
            }
            if let Some(req) = schema.get_mut("required").and_then(Value::as_array_mut) {
                req.retain(|r| r.as_str() != Some(h));
            }
        }
        true
    }

    /// Apply to a `tools/list` result; returns whether anything changed.
    pub fn apply(&self, result: &mut Value) -> bool {
        let Some(tools) = result.get_mut("tools").and_then(Value::as_array_mut) else {
            return false;
        };
        let mut changed = false;
        for t in tools.iter_mut() {
            changed |= self.apply_tool(t);
        }
        changed
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn overrides_and_hides() {
        let sluice_config::BuiltinOptions::Describe(o) = crate::builtin::parsed(
            "describe",
            json!({"tools": {
                "crm.order.status": {
                    "title": "Order status",
                    "description": "Looks up an order.",
                    "properties": {"order": {"description": "The order number, e.g. A-1", "pattern": "^A-"}},
                    "hide": ["region"]
                }
            }}),
        ) else {
            unreachable!("describe options")
        };
        let d = Describe::from_options(&o).unwrap();
        let mut result = json!({"tools": [
            {"name": "crm.order.status", "description": "echo", "inputSchema": {
                "type": "object",
                "properties": {"order": {"type": "string"}, "region": {"type": "string"}},
                "required": ["order", "region"]
            }},
            {"name": "other", "description": "unchanged"}
        ]});
        assert!(d.apply(&mut result));
        assert_eq!(
            result,
            json!({"tools": [
                {"name": "crm.order.status", "description": "Looks up an order.", "inputSchema": {
                    "type": "object",
                    "properties": {"order": {"type": "string", "description": "The order number, e.g. A-1", "pattern": "^A-"}},
                    "required": ["order"]
                }, "title": "Order status"},
                {"name": "other", "description": "unchanged"}
            ]})
        );
        use crate::builtin::rejected;
        assert!(rejected("describe", json!({})));
        assert!(rejected("describe", json!({"tools": {"x": {"hide": "a"}}})));
        assert!(rejected(
            "describe",
            json!({"tools": {"x": {"properties": {"a": 1}}}})
        ));
        assert!(Describe::from_options(&DescribeOptions::default()).is_err());
    }
}
