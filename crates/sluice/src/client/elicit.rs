//! How `sluice client` answers a server's elicitation (`--elicit`): refused (the default: a
//! command-line client has no user to ask), declined, or accepted with the requested schema's
//! own defaults (SEP-1034), the answer a user who changes nothing gives.

use clap::ValueEnum;
use serde_json::{json, Map, Value};

/// `--elicit`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum Elicit {
    /// Answer with a JSON-RPC error, and declare no elicitation capability.
    Refuse,
    /// Answer `{"action": "decline"}`.
    Decline,
    /// Accept a form with each field's `default`; decline a form with a required field that
    /// has none, and a URL elicitation.
    Defaults,
}

impl Elicit {
    /// The client capabilities to declare.
    pub(crate) fn capabilities(self) -> Value {
        match self {
            Elicit::Refuse => json!({}),
            Elicit::Decline | Elicit::Defaults => json!({"elicitation": {"form": {}}}),
        }
    }

    /// The result for an `elicitation/create` request with `params`; `Err` (why) when it is
    /// refused.
    pub(crate) fn answer(self, params: &Value) -> Result<Value, String> {
        match self {
            Elicit::Refuse => Err("a command-line client has no user to ask (see --elicit)".into()),
            Elicit::Decline => Ok(json!({"action": "decline"})),
            Elicit::Defaults => Ok(defaults(params)),
        }
    }
}

/// Accept with the requested schema's defaults, or decline (and say why on stderr).
fn defaults(params: &Value) -> Value {
    if params.get("mode").and_then(Value::as_str) == Some("url") {
        eprintln!("sluice client: declined a URL elicitation (--elicit defaults answers forms)");
        return json!({"action": "decline"});
    }
    let schema = params.get("requestedSchema").unwrap_or(&Value::Null);
    let mut content = Map::new();
    if let Some(props) = schema.get("properties").and_then(Value::as_object) {
        for (name, prop) in props {
            if let Some(d) = prop.get("default") {
                content.insert(name.clone(), d.clone());
            }
        }
    }
    let missing: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .filter(|r| !content.contains_key(*r))
        .collect();
    if !missing.is_empty() {
        eprintln!(
            "sluice client: declined an elicitation: required field(s) without a default: {}",
            missing.join(", ")
        );
        return json!({"action": "decline"});
    }
    json!({"action": "accept", "content": content})
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The form of the conformance suite's `elicitation-sep1034-client-defaults`.
    #[test]
    fn a_form_is_accepted_with_its_defaults() {
        let params = json!({"message": "m", "requestedSchema": {"type": "object", "properties": {
            "name": {"type": "string", "default": "John Doe"},
            "age": {"type": "integer", "default": 30},
            "score": {"type": "number", "default": 95.5},
            "status": {"type": "string", "enum": ["active", "inactive"], "default": "active"},
            "verified": {"type": "boolean", "default": true},
            "note": {"type": "string"}}}});
        assert_eq!(
            Elicit::Defaults.answer(&params).unwrap(),
            json!({"action": "accept", "content": {"name": "John Doe", "age": 30, "score": 95.5,
                "status": "active", "verified": true}})
        );
    }

    #[test]
    fn what_cannot_be_filled_is_declined_and_refuse_refuses() {
        let required = json!({"requestedSchema": {"properties": {"x": {"type": "string"}},
            "required": ["x"]}});
        assert_eq!(
            Elicit::Defaults.answer(&required).unwrap(),
            json!({"action": "decline"})
        );
        let url = json!({"mode": "url", "url": "https://example.com", "message": "m"});
        assert_eq!(
            Elicit::Defaults.answer(&url).unwrap(),
            json!({"action": "decline"})
        );
        assert_eq!(
            Elicit::Decline.answer(&required).unwrap(),
            json!({"action": "decline"})
        );
        assert!(Elicit::Refuse.answer(&required).is_err());
        assert_eq!(Elicit::Refuse.capabilities(), json!({}));
    }
}
