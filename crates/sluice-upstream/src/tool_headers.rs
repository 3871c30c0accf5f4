//! Tools' `x-mcp-header` parameters on the 2026-07-28 Streamable HTTP transport, the client's
//! side: which tool definitions a client must reject ([`invalid_declaration`],
//! [`retain_valid_tools`]) and the `Mcp-Param-*` headers a `tools/call` carries
//! ([`param_headers`]).
//!
//! The constraints (2026-07-28 transports, "Custom Headers from Tool Parameters"): a header name
//! is an HTTP token (RFC 9110: visible ASCII without delimiters, so no space, colon or control
//! character) and not empty; it sits on a parameter of a primitive type (`string`, `integer` or
//! `boolean`) reached from the schema's root through `properties` alone (not under `items`,
//! `allOf`, `$defs`, …); no two names of one tool are equal, case aside. "Clients using the
//! Streamable HTTP transport MUST reject tool definitions where any `x-mcp-header` value violates
//! these constraints": such a tool is left out of the list, with a warning.

use crate::core::ExtraHeaders;
use serde_json::Value;
use sluice_core::headers::{header_params, param_header, SCHEMA_HEADER_KEY};

/// The types an `x-mcp-header` parameter may have.
const PRIMITIVE: [&str; 3] = ["string", "integer", "boolean"];

/// Keys whose values are data, not schemas: an `x-mcp-header` key inside them declares nothing.
const DATA_KEYS: [&str; 4] = ["default", "const", "enum", "examples"];

/// Is `c` an RFC 9110 `tchar`?
fn is_tchar(c: char) -> bool {
    c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c)
}

/// Why the tool's `inputSchema` declares its `x-mcp-header` parameters wrongly; `None` when it
/// declares none or every one is valid.
pub fn invalid_declaration(schema: &Value) -> Option<String> {
    let mut names: Vec<String> = Vec::new();
    if let Some(why) = reachable(schema, "", &mut names) {
        return Some(why);
    }
    let total = count_declarations(schema);
    if total > names.len() {
        return Some(format!(
            "{} x-mcp-header annotation(s) not reached from the schema's root through \"properties\" alone",
            total - names.len()
        ));
    }
    for (i, a) in names.iter().enumerate() {
        if let Some(b) = names[..i].iter().find(|b| b.eq_ignore_ascii_case(a)) {
            return Some(format!("x-mcp-header {a:?} repeats {b:?} (case aside)"));
        }
    }
    None
}

/// Check the declarations along `properties` chains under `schema` (at `path`), collecting
/// their names.
fn reachable(schema: &Value, path: &str, names: &mut Vec<String>) -> Option<String> {
    let props = schema.get("properties").and_then(Value::as_object)?;
    for (key, prop) in props {
        let here = format!("{path}/{key}");
        if let Some(h) = prop.get(SCHEMA_HEADER_KEY) {
            let Some(name) = h.as_str() else {
                return Some(format!("x-mcp-header of {here} is not a string"));
            };
            if name.is_empty() {
                return Some(format!("x-mcp-header of {here} is empty"));
            }
            if !name.chars().all(is_tchar) {
                return Some(format!(
                    "x-mcp-header {name:?} of {here} is not an HTTP token (no spaces, colons, control or non-ASCII characters)"
                ));
            }
            let ty = prop.get("type").and_then(Value::as_str);
            if !ty.is_some_and(|t| PRIMITIVE.contains(&t)) {
                return Some(format!(
                    "x-mcp-header {name:?} of {here} is on a parameter of type {}, not string, integer or boolean",
                    prop.get("type").map_or("(none)".into(), Value::to_string)
                ));
            }
            names.push(name.to_string());
        }
        if let Some(why) = reachable(prop, &here, names) {
            return Some(why);
        }
    }
    None
}

/// How many `x-mcp-header` keys the schema has anywhere (data values aside).
fn count_declarations(v: &Value) -> usize {
    match v {
        Value::Object(m) => m
            .iter()
            .map(|(k, v)| {
                if k == SCHEMA_HEADER_KEY {
                    1
                } else if DATA_KEYS.contains(&k.as_str()) {
                    0
                } else {
                    count_declarations(v)
                }
            })
            .sum(),
        Value::Array(a) => a.iter().map(count_declarations).sum(),
        _ => 0,
    }
}

/// Leave out of `tools` every tool whose `x-mcp-header` declarations are invalid; returns each
/// one's name and why.
pub fn retain_valid_tools(tools: &mut Vec<Value>) -> Vec<(String, String)> {
    let mut dropped = Vec::new();
    tools.retain(|t| {
        let Some(why) = t.get("inputSchema").and_then(invalid_declaration) else {
            return true;
        };
        let name = t.get("name").and_then(Value::as_str).unwrap_or("?");
        dropped.push((name.to_string(), why));
        false
    });
    dropped
}

/// The `Mcp-Param-{Name}` headers of a call with `args` to a tool whose input schema is
/// `schema`: each declared parameter with a non-null value, strings as they are, booleans as
/// `true`/`false`, numbers by value; a value that is not plain visible ASCII as
/// `=?base64?…?=`.
pub fn param_headers(schema: &Value, args: &Value) -> ExtraHeaders {
    let mut wanted = Vec::new();
    header_params(schema, args, &mut wanted);
    let mut extra = ExtraHeaders::default();
    for (name, value) in wanted {
        let text = match &value {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        extra.push(param_header(&name), crate::http::header_value(&text));
    }
    extra
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn one(prop: Value) -> Value {
        json!({"type": "object", "properties": {"p": prop}})
    }

    /// The definitions the conformance suite's `http-invalid-tool-headers` serves, each
    /// rejected, and its valid one kept.
    #[test]
    fn the_constraints_of_the_specification() {
        let valid = one(json!({"type": "string", "x-mcp-header": "Region"}));
        assert_eq!(invalid_declaration(&valid), None);
        for bad in [
            one(json!({"type": "string", "x-mcp-header": ""})),
            one(json!({"type": "object", "x-mcp-header": "Data"})),
            one(json!({"type": "array", "items": {"type": "string"}, "x-mcp-header": "Items"})),
            one(json!({"type": "null", "x-mcp-header": "Nil"})),
            one(json!({"type": "number", "x-mcp-header": "Score"})),
            one(json!({"x-mcp-header": "Untyped"})),
            one(json!({"type": "string", "x-mcp-header": "My Region"})),
            one(json!({"type": "string", "x-mcp-header": "Region:Primary"})),
            one(json!({"type": "string", "x-mcp-header": "Région"})),
            one(json!({"type": "string", "x-mcp-header": "Region\t1"})),
            one(json!({"type": "string", "x-mcp-header": 5})),
            json!({"properties": {
                "a": {"type": "string", "x-mcp-header": "Region"},
                "b": {"type": "string", "x-mcp-header": "Region"}}}),
            json!({"properties": {
                "a": {"type": "string", "x-mcp-header": "MyField"},
                "b": {"type": "string", "x-mcp-header": "myfield"}}}),
            // Not reached through `properties` alone.
            one(json!({"type": "array", "items": {"type": "string", "x-mcp-header": "I"}})),
            json!({"allOf": [{"properties": {"a": {"type": "string", "x-mcp-header": "A"}}}]}),
            json!({"$defs": {"x": {"type": "string", "x-mcp-header": "X"}}}),
        ] {
            assert!(invalid_declaration(&bad).is_some(), "accepted {bad}");
        }
    }

    #[test]
    fn nested_properties_and_data_values_are_fine() {
        let nested = json!({"properties": {"target": {"type": "object", "properties": {
            "zone": {"type": "string", "x-mcp-header": "Zone"}}}}});
        assert_eq!(invalid_declaration(&nested), None);
        let data = one(json!({"type": "object", "default": {"x-mcp-header": "not a declaration"}}));
        assert_eq!(invalid_declaration(&data), None);
        assert_eq!(invalid_declaration(&json!({})), None);
    }

    #[test]
    fn invalid_tools_are_left_out_by_name() {
        let mut tools = vec![
            json!({"name": "ok", "inputSchema": one(json!({"type": "string", "x-mcp-header": "R"}))}),
            json!({"name": "bad", "inputSchema": one(json!({"type": "object", "x-mcp-header": "D"}))}),
            json!({"name": "plain", "inputSchema": {"type": "object"}}),
        ];
        let dropped = retain_valid_tools(&mut tools);
        let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
        assert_eq!(names, ["ok", "plain"]);
        assert_eq!(dropped.len(), 1);
        assert_eq!(dropped[0].0, "bad");
    }

    #[test]
    fn headers_mirror_the_declared_values() {
        let schema = json!({"properties": {
            "region": {"type": "string", "x-mcp-header": "Region"},
            "n": {"type": "integer", "x-mcp-header": "N"},
            "flag": {"type": "boolean", "x-mcp-header": "Flag"},
            "gone": {"type": "boolean", "x-mcp-header": "Gone"},
            "query": {"type": "string"}}});
        let extra = param_headers(
            &schema,
            &json!({"region": "Hello, 世界", "n": 42, "flag": false, "gone": null, "query": "q"}),
        );
        let mut got = extra.0.clone();
        got.sort();
        assert_eq!(
            got,
            [
                ("mcp-param-flag".to_string(), "false".to_string()),
                ("mcp-param-n".to_string(), "42".to_string()),
                (
                    "mcp-param-region".to_string(),
                    "=?base64?SGVsbG8sIOS4lueVjA==?=".to_string()
                ),
            ]
        );
    }
}
