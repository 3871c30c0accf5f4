//! The MCP HTTP header names (Streamable HTTP, 2025-03-26 … 2026-07-28), shared by both
//! directions, and [`header_params`]: which `Mcp-Param-*` headers a tool call carries.
//!
//! The names are lower case, as HTTP/2 sends them and as `http::HeaderName::from_static`
//! wants them; HTTP/1 peers match them case-insensitively. Each constant's doc gives the
//! spelling of the specification.

use serde_json::Value;

/// `Mcp-Session-Id`: the session a Streamable HTTP server assigned at `initialize`.
pub const SESSION_ID: &str = "mcp-session-id";

/// `MCP-Protocol-Version`: the negotiated protocol version, on every request after
/// `initialize` (and on every 2026-07-28 request).
pub const PROTOCOL_VERSION: &str = "mcp-protocol-version";

/// `Mcp-Method` (2026-07-28): the JSON-RPC method of the request in the body.
pub const METHOD: &str = "mcp-method";

/// `Mcp-Name` (2026-07-28): the tool or prompt name, or the resource URI, of the request.
pub const NAME: &str = "mcp-name";

/// `Mcp-Param-` (2026-07-28): the prefix of the headers that mirror tool arguments whose
/// schema names a header (see [`header_params`] and [`param_header`]).
pub const PARAM_PREFIX: &str = "mcp-param-";

/// `Last-Event-ID`: the SSE event id a client resumes a stream after.
pub const LAST_EVENT_ID: &str = "last-event-id";

/// `x-mcp-header`: the key in a tool's input schema property that names the `Mcp-Param-*`
/// header the argument is mirrored in (a schema key, not a header).
pub const SCHEMA_HEADER_KEY: &str = "x-mcp-header";

/// The header name for the `x-mcp-header` name `name`: `mcp-param-{name}`, lower case.
pub fn param_header(name: &str) -> String {
    format!("{PARAM_PREFIX}{}", name.to_ascii_lowercase())
}

/// Append to `out` the `(x-mcp-header name, argument value)` pairs of a tool input schema
/// whose arguments `args` carry a non-null value, following `properties` chains only (the
/// specification's static reachability: no `$ref`, `allOf`, items, …).
pub fn header_params(schema: &Value, args: &Value, out: &mut Vec<(String, Value)>) {
    let Some(props) = schema.get("properties").and_then(Value::as_object) else {
        return;
    };
    for (key, prop) in props {
        let value = args.get(key);
        if let Some(h) = prop.get(SCHEMA_HEADER_KEY).and_then(Value::as_str) {
            if let Some(v) = value.filter(|v| !v.is_null()) {
                out.push((h.to_string(), v.clone()));
            }
        }
        if let Some(v) = value {
            header_params(prop, v, out);
        }
    }
}

/// Does a tool input schema name an `x-mcp-header` where [`header_params`] looks (along
/// `properties` chains)? When it does not, no arguments have header values, and they need not
/// be read for them.
pub fn declares_headers(schema: &Value) -> bool {
    schema
        .get("properties")
        .and_then(Value::as_object)
        .is_some_and(|props| {
            props.values().any(|p| {
                p.get(SCHEMA_HEADER_KEY).is_some_and(Value::is_string) || declares_headers(p)
            })
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_schema_declares_headers_where_header_params_finds_them() {
        let deep = json!({"properties": {"a": {"properties": {"b": {"x-mcp-header": "B"}}}}});
        let args = json!({"a": {"b": 1}});
        for (schema, declares) in [
            (
                json!({"type": "object", "additionalProperties": true}),
                false,
            ),
            (json!({"properties": {"text": {"type": "string"}}}), false),
            (json!({"properties": {"n": {"x-mcp-header": 5}}}), false),
            (
                json!({"properties": {"region": {"x-mcp-header": "Region"}}}),
                true,
            ),
            (deep, true),
        ] {
            assert_eq!(declares_headers(&schema), declares, "{schema}");
            // Where it declares none, no arguments give a header.
            if !declares {
                assert!(params(schema.clone(), args.clone()).is_empty());
                assert!(params(schema, json!({"n": 1, "region": "r", "text": "t"})).is_empty());
            }
        }
    }

    fn params(schema: Value, args: Value) -> Vec<(String, Value)> {
        let mut out = Vec::new();
        header_params(&schema, &args, &mut out);
        out
    }

    #[test]
    fn top_level_arguments_with_a_header_name_are_picked() {
        let schema = json!({"type": "object", "properties": {
            "region": {"type": "string", "x-mcp-header": "Region"},
            "count": {"type": "integer", "x-mcp-header": "Count"},
            "text": {"type": "string"},
        }});
        let got = params(
            schema,
            json!({"region": "us-west1", "count": 3, "text": "hi"}),
        );
        assert_eq!(
            got,
            vec![
                ("Region".to_string(), json!("us-west1")),
                ("Count".to_string(), json!(3)),
            ]
        );
    }

    #[test]
    fn null_and_missing_arguments_are_not_sent() {
        let schema = json!({"properties": {
            "a": {"x-mcp-header": "A"},
            "b": {"x-mcp-header": "B"},
        }});
        assert!(params(schema, json!({"a": null})).is_empty());
    }

    #[test]
    fn nested_properties_are_followed() {
        let schema = json!({"properties": {
            "target": {"type": "object", "x-mcp-header": "Target", "properties": {
                "zone": {"type": "string", "x-mcp-header": "Zone"},
            }},
        }});
        let got = params(schema, json!({"target": {"zone": "b"}}));
        assert_eq!(
            got,
            vec![
                ("Target".to_string(), json!({"zone": "b"})),
                ("Zone".to_string(), json!("b")),
            ]
        );
    }

    #[test]
    fn a_schema_without_properties_has_none() {
        assert!(params(json!({"type": "object"}), json!({"x": 1})).is_empty());
        assert!(params(json!(true), json!({"x": 1})).is_empty());
    }

    #[test]
    fn param_header_is_prefixed_and_lower_case() {
        assert_eq!(param_header("Region"), "mcp-param-region");
        assert!(param_header("x").starts_with(PARAM_PREFIX));
    }
}
