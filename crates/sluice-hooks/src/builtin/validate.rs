//! The `validate` builtin: the arguments of a `tools/call` are checked against the tool's
//! `inputSchema` (as the upstream published it, from the catalog) with a JSON Schema validator
//! (2020-12 unless the schema's `$schema` names another draft) before the call goes on. Every
//! violation is listed in a -32602 error: in its message and in `error.data.violations`.
//!
//! Compiled validators are cached per tool and rebuilt when the tool's schema changes. Remote
//! `$ref`s are never fetched (no I/O on the call path): a schema that needs one is not checked
//! (warning in the log).

use crate::decision::{Decision, Refusal};
use crate::event::HookEvent;
use parking_lot::Mutex;
use serde_json::{json, Map, Value};
use sluice_core::{codes, RpcError};
use std::collections::HashMap;
use std::sync::Arc;

/// Cached validators, by tool name: the schema they were built from, and the validator (`None`:
/// the schema does not compile, calls are not checked).
type Cache = HashMap<String, (Value, Option<Arc<jsonschema::Validator>>)>;

/// At most this many tools are cached (more: the cache starts over).
const CACHE_MAX: usize = 4096;

/// The validate builtin.
#[derive(Default)]
pub struct Validate {
    cache: Mutex<Cache>,
}

impl std::fmt::Debug for Validate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Validate").finish_non_exhaustive()
    }
}

/// One violation, as listed in `error.data.violations`.
fn violation(e: &jsonschema::ValidationError<'_>) -> Value {
    json!({
        "path": e.instance_path().as_str(),
        "keyword": e.kind().keyword(),
        "message": e.to_string(),
    })
}

impl Validate {
    fn validator(&self, tool: &str, schema: &Value) -> Option<Arc<jsonschema::Validator>> {
        if let Some((cached, v)) = self.cache.lock().get(tool) {
            if sluice_core::member::equal(cached, schema) {
                return v.clone();
            }
        }
        let built = match jsonschema::options().offline().build(schema) {
            Ok(v) => Some(Arc::new(v)),
            Err(e) => {
                tracing::warn!(tool, "validate: the inputSchema of {tool:?} does not compile ({e}); its calls are not checked");
                None
            }
        };
        let mut cache = self.cache.lock();
        if cache.len() >= CACHE_MAX {
            cache.clear();
        }
        cache.insert(tool.to_string(), (schema.clone(), built.clone()));
        built
    }

    /// Decide on the request phase of a `tools/call`; `tool` is the tool's definition from the
    /// catalog (`None`: an unknown tool, left to the router's -32602).
    pub fn decide(&self, ev: &HookEvent, tool: Option<&Value>) -> Decision {
        let name = ev.tool_name.as_deref().unwrap_or("");
        let Some(schema) = tool
            .and_then(|t| t.get("inputSchema"))
            .filter(|s| s.is_object())
        else {
            return Decision::Pass;
        };
        let Some(validator) = self.validator(name, schema) else {
            return Decision::Pass;
        };
        let empty = Value::Object(Map::new());
        let args = ev.tool_input().unwrap_or(&empty);
        let errors: Vec<_> = validator.iter_errors(args).collect();
        if errors.is_empty() {
            return Decision::Pass;
        }
        let listed: Vec<String> = errors
            .iter()
            .map(|e| match e.instance_path().as_str() {
                "" => e.to_string(),
                path => format!("{path}: {e}"),
            })
            .collect();
        let message = format!("Invalid arguments for tool {name:?}: {}", listed.join("; "));
        let violations: Vec<Value> = errors.iter().map(violation).collect();
        let error = RpcError::new(codes::INVALID_PARAMS, message.clone())
            .with_data(json!({"tool": name, "violations": violations}));
        Decision::Refuse(Refusal {
            reason: message,
            for_agent: true,
            error: Some(Box::new(error)),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builtin::deny::tests::call;

    fn add_tool() -> Value {
        json!({"name": "fx_add", "inputSchema": {
            "type": "object",
            "properties": {"a": {"type": "number"}, "b": {"type": "number"}, "mode": {"enum": ["fast", "exact"]}},
            "required": ["a", "b"],
            "additionalProperties": false
        }})
    }

    #[test]
    fn lists_every_violation() {
        let v = Validate::default();
        let tool = add_tool();
        let d = v.decide(
            &call("fx_add", json!({"a": "x", "mode": "slow", "c": 1})),
            Some(&tool),
        );
        let Decision::Refuse(r) = d else {
            panic!("{d:?}")
        };
        let err = r.error.unwrap();
        assert_eq!(err.code, -32602);
        let data = err.data.unwrap();
        let paths: Vec<&str> = data["violations"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v["path"].as_str().unwrap())
            .collect();
        assert_eq!(data["violations"].as_array().unwrap().len(), 4, "{data}");
        assert!(paths.contains(&"/a") && paths.contains(&"/mode") && paths.contains(&""));
        assert!(err
            .message
            .starts_with("Invalid arguments for tool \"fx_add\": "));
        assert!(
            err.message.contains("/a: \"x\" is not of type \"number\""),
            "{}",
            err.message
        );
        assert!(
            err.message.contains("\"b\" is a required property"),
            "{}",
            err.message
        );
    }

    #[test]
    fn passes_valid_calls_unknown_tools_and_caches() {
        let v = Validate::default();
        let tool = add_tool();
        assert_eq!(
            v.decide(&call("fx_add", json!({"a": 1, "b": 2})), Some(&tool)),
            Decision::Pass
        );
        assert_eq!(
            v.decide(&call("nope", json!({"a": "x"})), None),
            Decision::Pass
        );
        assert_eq!(v.cache.lock().len(), 1);
        // A changed schema is rebuilt.
        let mut loose = tool.clone();
        loose["inputSchema"]["required"] = json!([]);
        assert_eq!(
            v.decide(&call("fx_add", json!({"a": 1})), Some(&loose)),
            Decision::Pass
        );
        // A remote $ref is not fetched: not checked.
        let remote = json!({"name": "r", "inputSchema": {"$ref": "https://example.com/s.json"}});
        assert_eq!(
            v.decide(&call("r", json!({"a": 1})), Some(&remote)),
            Decision::Pass
        );
        assert!(crate::builtin::rejected("validate", json!({"x": 1})));
    }
}
