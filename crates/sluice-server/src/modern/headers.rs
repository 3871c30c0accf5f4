//! The 2026-07-28 header rules: the transport's `Mcp-*` headers must mirror the body.
//!
//! | header | must equal | when |
//! |---|---|---|
//! | `MCP-Protocol-Version` | `params._meta` `io.modelcontextprotocol/protocolVersion` | always |
//! | `Mcp-Method` | the method | always |
//! | `Mcp-Name` | `params.name` (`tools/call`, `prompts/get`), `params.uri` (`resources/read`) | those methods |
//! | `Mcp-Param-{x}` | argument `x` (strings as they are, booleans as `true`/`false`, numbers by value) | `tools/call` of a tool whose `inputSchema` marks `x` with `x-mcp-header` |
//!
//! `Mcp-Name` and `Mcp-Param-*` values may be sent as `=?base64?…?=` (UTF-8 inside). A missing,
//! unreadable or different header is -32020 (`Header mismatch: …`).
//!
//! The rules read headers through [`HeaderSource`], so this module knows no HTTP types.

use base64::Engine;
use serde_json::Value;
use sluice_core::{codes, Message, RpcError};

/// `MCP-Protocol-Version`.
const PROTOCOL: &str = sluice_core::headers::PROTOCOL_VERSION;

/// Where the rules read request headers from.
pub(crate) trait HeaderSource {
    /// The header `name`: `None` when absent, `Some(None)` when present but not visible ASCII,
    /// else its value.
    fn header(&self, name: &str) -> Option<Option<&str>>;

    /// The header's value when present and visible ASCII.
    fn header_str(&self, name: &str) -> Option<&str> {
        self.header(name).flatten()
    }
}

/// Decode the `=?base64?…?=` sentinel of `Mcp-Name` / `Mcp-Param-*` values.
fn decode_header_value(v: &str) -> Option<String> {
    match v
        .strip_prefix("=?base64?")
        .and_then(|r| r.strip_suffix("?="))
    {
        Some(b) => base64::engine::general_purpose::STANDARD
            .decode(b)
            .ok()
            .and_then(|bytes| String::from_utf8(bytes).ok()),
        None => Some(v.to_string()),
    }
}

/// Check the headers of `msg`, whose `_meta` names version `requested`. `input_schema` is the
/// called tool's, for `tools/call` of a tool the catalog knows.
pub(crate) fn check(
    headers: &dyn HeaderSource,
    msg: &Message,
    requested: &str,
    input_schema: Option<&Value>,
) -> Result<(), RpcError> {
    let method = msg.method().unwrap_or("");
    let mismatch =
        |m: String| RpcError::new(codes::HEADER_MISMATCH, format!("Header mismatch: {m}"));
    match headers.header(PROTOCOL) {
        None => {
            return Err(mismatch(
                "the MCP-Protocol-Version header is missing".into(),
            ))
        }
        Some(None) => {
            return Err(mismatch(
                "MCP-Protocol-Version has invalid characters".into(),
            ))
        }
        Some(Some(v)) if v != requested => {
            return Err(mismatch(format!(
                "MCP-Protocol-Version header value '{v}' does not match body value '{requested}'"
            )))
        }
        Some(Some(_)) => {}
    }
    match headers.header(sluice_core::headers::METHOD) {
        None => return Err(mismatch("the Mcp-Method header is missing".into())),
        Some(None) => return Err(mismatch("Mcp-Method has invalid characters".into())),
        Some(Some(v)) if v != method => {
            return Err(mismatch(format!(
                "Mcp-Method header value '{v}' does not match body value '{method}'"
            )))
        }
        Some(Some(_)) => {}
    }
    let name_key = match method {
        "tools/call" | "prompts/get" => Some("name"),
        "resources/read" => Some("uri"),
        // The tasks extension names the task (SEP-2663): checked when the header is sent.
        "tasks/get" | "tasks/update" | "tasks/cancel"
            if headers.header(sluice_core::headers::NAME).is_some() =>
        {
            Some("taskId")
        }
        _ => None,
    };
    if let Some(key) = name_key {
        let body = msg.param_str(key).unwrap_or("");
        let header = match headers.header(sluice_core::headers::NAME) {
            None => return Err(mismatch("the Mcp-Name header is missing".into())),
            Some(None) => return Err(mismatch("Mcp-Name has invalid characters".into())),
            Some(Some(v)) => decode_header_value(v)
                .ok_or_else(|| mismatch("Mcp-Name is not valid base64".into()))?,
        };
        if header != body {
            return Err(mismatch(format!(
                "Mcp-Name header value '{header}' does not match body value '{body}'"
            )));
        }
    }
    let Some(schema) = input_schema.filter(|_| method == "tools/call") else {
        return Ok(());
    };
    if !sluice_core::headers::declares_headers(schema) {
        return Ok(());
    }
    let args = msg.param("arguments").unwrap_or(&Value::Null);
    let mut wanted = Vec::new();
    sluice_core::headers::header_params(schema, args, &mut wanted);
    for (header, value) in wanted {
        let hname = sluice_core::headers::param_header(&header);
        let got = match headers.header(&hname) {
            None => {
                return Err(mismatch(format!(
                    "the Mcp-Param-{header} header is missing"
                )))
            }
            Some(None) => {
                return Err(mismatch(format!(
                    "Mcp-Param-{header} has invalid characters"
                )))
            }
            Some(Some(v)) => decode_header_value(v)
                .ok_or_else(|| mismatch(format!("Mcp-Param-{header} is not valid base64")))?,
        };
        let same = match &value {
            Value::String(s) => *s == got,
            Value::Bool(b) => got == b.to_string(),
            Value::Number(n) => got
                .parse::<f64>()
                .ok()
                .zip(n.as_f64())
                .is_some_and(|(a, b)| a == b),
            _ => false,
        };
        if !same {
            return Err(mismatch(format!(
                "Mcp-Param-{header} header value '{got}' does not match body value {value}"
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Headers as (lowercase name, value) pairs; a value `None` is present but unreadable.
    struct Headers(Vec<(&'static str, Option<&'static str>)>);

    impl HeaderSource for Headers {
        fn header(&self, name: &str) -> Option<Option<&str>> {
            self.0
                .iter()
                .find(|(n, _)| n.eq_ignore_ascii_case(name))
                .map(|(_, v)| *v)
        }
    }

    fn call(method: &str, params: Value) -> Message {
        Message::request(json!(1), method, Some(params))
    }

    fn err(r: Result<(), RpcError>) -> String {
        let e = r.expect_err("a mismatch");
        assert_eq!(e.code, codes::HEADER_MISMATCH);
        e.message
    }

    const V: &str = "2026-07-28";

    #[test]
    fn the_version_and_method_headers_must_mirror_the_body() {
        let msg = call("tools/list", json!({}));
        let ok = Headers(vec![
            ("mcp-protocol-version", Some(V)),
            ("mcp-method", Some("tools/list")),
        ]);
        assert!(check(&ok, &msg, V, None).is_ok());
        let no_version = Headers(vec![("mcp-method", Some("tools/list"))]);
        assert_eq!(
            err(check(&no_version, &msg, V, None)),
            "Header mismatch: the MCP-Protocol-Version header is missing"
        );
        let other_version = Headers(vec![
            ("mcp-protocol-version", Some("2025-11-25")),
            ("mcp-method", Some("tools/list")),
        ]);
        assert_eq!(
            err(check(&other_version, &msg, V, None)),
            "Header mismatch: MCP-Protocol-Version header value '2025-11-25' does not match body value '2026-07-28'"
        );
        let unreadable = Headers(vec![("mcp-protocol-version", None)]);
        assert_eq!(
            err(check(&unreadable, &msg, V, None)),
            "Header mismatch: MCP-Protocol-Version has invalid characters"
        );
        let no_method = Headers(vec![("mcp-protocol-version", Some(V))]);
        assert_eq!(
            err(check(&no_method, &msg, V, None)),
            "Header mismatch: the Mcp-Method header is missing"
        );
        let other_method = Headers(vec![
            ("mcp-protocol-version", Some(V)),
            ("mcp-method", Some("tools/call")),
        ]);
        assert_eq!(
            err(check(&other_method, &msg, V, None)),
            "Header mismatch: Mcp-Method header value 'tools/call' does not match body value 'tools/list'"
        );
    }

    #[test]
    fn mcp_name_mirrors_the_name_or_uri_plain_or_base64() {
        let base = |name: Option<&'static str>| {
            let mut h = vec![
                ("mcp-protocol-version", Some(V)),
                ("mcp-method", Some("tools/call")),
            ];
            if let Some(n) = name {
                h.push(("mcp-name", Some(n)));
            }
            Headers(h)
        };
        let msg = call("tools/call", json!({"name": "échos"}));
        assert_eq!(
            err(check(&base(None), &msg, V, None)),
            "Header mismatch: the Mcp-Name header is missing"
        );
        assert_eq!(
            err(check(&base(Some("echo")), &msg, V, None)),
            "Header mismatch: Mcp-Name header value 'echo' does not match body value 'échos'"
        );
        // "échos" in base64.
        assert!(check(&base(Some("=?base64?w6ljaG9z?=")), &msg, V, None).is_ok());
        assert_eq!(
            err(check(&base(Some("=?base64?!!?=")), &msg, V, None)),
            "Header mismatch: Mcp-Name is not valid base64"
        );
        let read = call("resources/read", json!({"uri": "file:///a"}));
        let h = Headers(vec![
            ("mcp-protocol-version", Some(V)),
            ("mcp-method", Some("resources/read")),
            ("mcp-name", Some("file:///b")),
        ]);
        assert_eq!(
            err(check(&h, &read, V, None)),
            "Header mismatch: Mcp-Name header value 'file:///b' does not match body value 'file:///a'"
        );
    }

    #[test]
    fn mcp_param_headers_mirror_the_marked_arguments() {
        let schema = json!({
            "type": "object",
            "properties": {"region": {"type": "string", "x-mcp-header": "Region"}}
        });
        let msg = call(
            "tools/call",
            json!({"name": "t", "arguments": {"region": "eu"}}),
        );
        let with = |v: Option<&'static str>| {
            let mut h = vec![
                ("mcp-protocol-version", Some(V)),
                ("mcp-method", Some("tools/call")),
                ("mcp-name", Some("t")),
            ];
            if let Some(v) = v {
                h.push(("mcp-param-region", Some(v)));
            }
            Headers(h)
        };
        assert!(check(&with(Some("eu")), &msg, V, Some(&schema)).is_ok());
        // No schema (the tool is unknown): nothing more to check.
        assert!(check(&with(None), &msg, V, None).is_ok());
        assert_eq!(
            err(check(&with(None), &msg, V, Some(&schema))),
            "Header mismatch: the Mcp-Param-Region header is missing"
        );
        assert_eq!(
            err(check(&with(Some("us")), &msg, V, Some(&schema))),
            "Header mismatch: Mcp-Param-Region header value 'us' does not match body value \"eu\""
        );
    }
}
