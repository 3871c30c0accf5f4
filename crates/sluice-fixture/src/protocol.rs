//! JSON-RPC 2.0 helpers: classifying incoming messages, building outgoing ones, error codes,
//! MCP protocol-version negotiation (legacy `initialize`) and the modern era's per-request
//! `_meta` envelope (2026-07-28).

use serde_json::{json, Map, Value};

/// Invalid JSON was received.
pub(crate) const PARSE_ERROR: i64 = -32700;
/// The JSON sent is not a valid request object.
pub(crate) const INVALID_REQUEST: i64 = -32600;
/// The method does not exist.
pub(crate) const METHOD_NOT_FOUND: i64 = -32601;
/// Invalid method parameters (also: unknown tool, unknown prompt, bad cursor).
pub(crate) const INVALID_PARAMS: i64 = -32602;
/// MCP (legacy era): the requested resource does not exist (2026-07-28 uses `-32602`).
pub(crate) const RESOURCE_NOT_FOUND: i64 = -32002;
/// MCP 2026-07-28: HTTP headers do not match the body, or a required header is missing.
pub(crate) const HEADER_MISMATCH: i64 = -32020;
/// MCP 2026-07-28: the request needs a client capability it did not declare.
pub(crate) const MISSING_REQUIRED_CLIENT_CAPABILITY: i64 = -32021;
/// MCP 2026-07-28: the request's protocol version is not supported.
pub(crate) const UNSUPPORTED_PROTOCOL_VERSION: i64 = -32022;

/// Legacy (handshake-era) protocol versions this fixture speaks, oldest first.
pub(crate) const SUPPORTED_VERSIONS: [&str; 4] =
    ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"];
/// The version answered when the client asks for one this fixture does not know.
pub(crate) const LATEST_VERSION: &str = "2025-11-25";
/// The modern (per-request `_meta`, no handshake) protocol version this fixture speaks.
pub(crate) const MODERN_VERSION: &str = "2026-07-28";

/// `_meta` key: the request's protocol version (modern era).
pub(crate) const META_PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
/// `_meta` key: the client's capabilities for this request (modern era).
pub(crate) const META_CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
/// `_meta` key: the minimum log level for this request (modern era, optional).
pub(crate) const META_LOG_LEVEL: &str = "io.modelcontextprotocol/logLevel";
/// Result `_meta` key: the server's identity (modern era).
pub(crate) const META_SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";
/// Notification/result `_meta` key: the `subscriptions/listen` request a message belongs to.
pub(crate) const META_SUBSCRIPTION_ID: &str = "io.modelcontextprotocol/subscriptionId";

/// MCP log levels, least severe first.
pub(crate) const LOG_LEVELS: [&str; 8] = [
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
];

/// The version to answer an `initialize` asking for `requested`.
pub(crate) fn negotiate(requested: Option<&str>) -> &'static str {
    requested
        .and_then(|r| SUPPORTED_VERSIONS.iter().copied().find(|v| *v == r))
        .unwrap_or(LATEST_VERSION)
}

/// Whether `version` is one this fixture speaks.
pub(crate) fn is_supported(version: &str) -> bool {
    SUPPORTED_VERSIONS.contains(&version)
}

/// A JSON-RPC error object.
#[derive(Debug, Clone)]
pub(crate) struct RpcError {
    /// The error code.
    pub code: i64,
    /// The human-readable message.
    pub message: String,
    /// The optional `data` member.
    pub data: Option<Value>,
}

impl RpcError {
    /// An error with `code` and `message`.
    pub(crate) fn new(code: i64, message: impl Into<String>) -> Self {
        RpcError {
            code,
            message: message.into(),
            data: None,
        }
    }

    /// The same error with a `data` member.
    pub(crate) fn with_data(mut self, data: Value) -> Self {
        self.data = Some(data);
        self
    }

    /// `-32602 Invalid params`.
    pub(crate) fn invalid_params(message: impl Into<String>) -> Self {
        Self::new(INVALID_PARAMS, message)
    }

    /// `-32601 Method not found`.
    pub(crate) fn method_not_found(method: &str) -> Self {
        Self::new(METHOD_NOT_FOUND, format!("Method not found: {method}"))
    }

    /// `-32020 HeaderMismatch`.
    pub(crate) fn header_mismatch(message: impl Into<String>) -> Self {
        Self::new(
            HEADER_MISMATCH,
            format!("Header mismatch: {}", message.into()),
        )
    }

    /// `-32021 MissingRequiredClientCapability` naming capability `name`.
    pub(crate) fn missing_capability(name: &str) -> Self {
        Self::new(
            MISSING_REQUIRED_CLIENT_CAPABILITY,
            format!("Missing required client capability: {name}"),
        )
        .with_data(json!({ "requiredCapabilities": { name: {} } }))
    }

    /// `-32022 UnsupportedProtocolVersion` for `requested`, listing `supported`.
    pub(crate) fn unsupported_version(requested: &str, supported: &[&str]) -> Self {
        Self::new(UNSUPPORTED_PROTOCOL_VERSION, "Unsupported protocol version")
            .with_data(json!({ "supported": supported, "requested": requested }))
    }

    /// The JSON form (`{"code":…,"message":…,"data"?:…}`).
    pub(crate) fn to_value(&self) -> Value {
        let mut v = json!({ "code": self.code, "message": self.message });
        if let Some(data) = &self.data {
            v["data"] = data.clone();
        }
        v
    }
}

/// The per-request envelope of a modern (2026-07-28) request, from `params._meta`.
#[derive(Debug, Clone)]
pub(crate) struct ModernMeta {
    /// `io.modelcontextprotocol/protocolVersion`.
    pub version: String,
    /// `io.modelcontextprotocol/clientCapabilities` (an object).
    pub client_capabilities: Value,
    /// `io.modelcontextprotocol/logLevel` as an index into [`LOG_LEVELS`] (`None`: no logs).
    pub log_level: Option<usize>,
}

/// Whether `params._meta` carries the modern protocol-version key (the era signal).
pub(crate) fn has_modern_envelope(params: &Value) -> bool {
    params
        .get("_meta")
        .and_then(Value::as_object)
        .is_some_and(|m| m.contains_key(META_PROTOCOL_VERSION))
}

/// Read and check the modern envelope: `-32602` when `_meta` or a required field is missing or
/// malformed (the version itself is checked separately, see [`check_modern_version`]).
pub(crate) fn parse_modern_meta(params: &Value) -> Result<ModernMeta, RpcError> {
    let Some(meta) = params.get("_meta").and_then(Value::as_object) else {
        return Err(RpcError::invalid_params(
            "Invalid params: missing _meta (io.modelcontextprotocol/protocolVersion and \
             io.modelcontextprotocol/clientCapabilities are required)",
        ));
    };
    let version = meta
        .get(META_PROTOCOL_VERSION)
        .and_then(Value::as_str)
        .ok_or_else(|| {
            RpcError::invalid_params(format!(
                "Invalid params: _meta is missing {META_PROTOCOL_VERSION}"
            ))
        })?;
    let client_capabilities = meta
        .get(META_CLIENT_CAPABILITIES)
        .filter(|c| c.is_object())
        .cloned()
        .ok_or_else(|| {
            RpcError::invalid_params(format!(
                "Invalid params: _meta is missing {META_CLIENT_CAPABILITIES}"
            ))
        })?;
    let log_level = match meta.get(META_LOG_LEVEL) {
        None | Some(Value::Null) => None,
        Some(level) => Some(
            level
                .as_str()
                .and_then(|l| LOG_LEVELS.iter().position(|x| *x == l))
                .ok_or_else(|| {
                    RpcError::invalid_params(format!("Invalid params: invalid log level {level}"))
                })?,
        ),
    };
    Ok(ModernMeta {
        version: version.to_string(),
        client_capabilities,
        log_level,
    })
}

/// `-32022` unless `version` is the modern version this fixture speaks.
pub(crate) fn check_modern_version(version: &str, supported: &[&str]) -> Result<(), RpcError> {
    if version == MODERN_VERSION {
        Ok(())
    } else {
        Err(RpcError::unsupported_version(version, supported))
    }
}

/// The methods a modern (2026-07-28) request may name; anything else is `-32601`.
pub(crate) const MODERN_METHODS: [&str; 10] = [
    "server/discover",
    "tools/list",
    "tools/call",
    "prompts/list",
    "prompts/get",
    "resources/list",
    "resources/templates/list",
    "resources/read",
    "completion/complete",
    "subscriptions/listen",
];

/// Whether `method` exists in the modern era.
pub(crate) fn is_modern_method(method: &str) -> bool {
    MODERN_METHODS.contains(&method)
}

/// One classified incoming JSON-RPC message.
#[derive(Debug)]
pub(crate) enum Incoming {
    /// A request (has `method` and `id`).
    Request {
        /// The request id (string or number).
        id: Value,
        /// The method name.
        method: String,
        /// The params (`{}` when absent).
        params: Value,
    },
    /// A notification (has `method`, no `id`).
    Notification {
        /// The method name.
        method: String,
        /// The params (`{}` when absent).
        params: Value,
    },
    /// A response to a request this server sent.
    Response {
        /// The id of the request answered.
        id: Value,
        /// `Ok(result)` or `Err(error object)`.
        outcome: Result<Value, Value>,
    },
}

/// Parse one raw message. On failure returns the error response to send back
/// (`-32700` for bad JSON, `-32600` for a non-message).
pub(crate) fn parse(raw: &[u8]) -> Result<Incoming, Value> {
    let value: Value = serde_json::from_slice(raw).map_err(|e| {
        error_response(
            &Value::Null,
            &RpcError::new(PARSE_ERROR, format!("Parse error: {e}")),
        )
    })?;
    classify(value)
}

/// Classify an already-parsed JSON value as a JSON-RPC message.
pub(crate) fn classify(value: Value) -> Result<Incoming, Value> {
    let Value::Object(mut obj) = value else {
        let msg = "Invalid Request: expected a JSON-RPC message object (batches are not supported)";
        return Err(error_response(
            &Value::Null,
            &RpcError::new(INVALID_REQUEST, msg),
        ));
    };
    let id = obj.remove("id");
    let invalid = |id: &Option<Value>, why: &str| {
        error_response(
            id.as_ref().unwrap_or(&Value::Null),
            &RpcError::new(INVALID_REQUEST, format!("Invalid Request: {why}")),
        )
    };
    if obj.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Err(invalid(&id, "jsonrpc must be \"2.0\""));
    }
    if let Some(id) = &id {
        if !(id.is_string() || id.is_number() || id.is_null()) {
            return Err(invalid(&None, "id must be a string or a number"));
        }
    }
    match obj.remove("method") {
        Some(Value::String(method)) => {
            let params = match obj.remove("params") {
                None | Some(Value::Null) => Value::Object(Map::new()),
                Some(p @ Value::Object(_)) => p,
                Some(_) => return Err(invalid(&id, "params must be an object")),
            };
            Ok(match id {
                Some(id) if !id.is_null() => Incoming::Request { id, method, params },
                Some(_) => return Err(invalid(&None, "id must not be null")),
                None => Incoming::Notification { method, params },
            })
        }
        Some(_) => Err(invalid(&id, "method must be a string")),
        None => {
            let Some(id) = id else {
                return Err(invalid(&None, "neither a request nor a response"));
            };
            if let Some(result) = obj.remove("result") {
                Ok(Incoming::Response {
                    id,
                    outcome: Ok(result),
                })
            } else if let Some(error) = obj.remove("error") {
                Ok(Incoming::Response {
                    id,
                    outcome: Err(error),
                })
            } else {
                Err(invalid(&Some(id), "missing method, result or error"))
            }
        }
    }
}

/// A success response.
pub(crate) fn response(id: &Value, result: Value) -> Value {
    json!({ "jsonrpc": "2.0", "id": id, "result": result })
}

/// An error response.
pub(crate) fn error_response(id: &Value, error: &RpcError) -> Value {
    json!({ "jsonrpc": "2.0", "id": id, "error": error.to_value() })
}

/// A notification.
pub(crate) fn notification(method: &str, params: Value) -> Value {
    json!({ "jsonrpc": "2.0", "method": method, "params": params })
}

/// A request from this server to the client.
pub(crate) fn request(id: &Value, method: &str, params: Value) -> Value {
    json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params })
}

/// A map key for a request id (`1` and `"1"` stay distinct).
pub(crate) fn id_key(id: &Value) -> String {
    id.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_messages() {
        assert!(matches!(
            parse(br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#),
            Ok(Incoming::Request { .. })
        ));
        assert!(matches!(
            parse(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#),
            Ok(Incoming::Notification { .. })
        ));
        assert!(matches!(
            parse(br#"{"jsonrpc":"2.0","id":"s1","result":{}}"#),
            Ok(Incoming::Response { outcome: Ok(_), .. })
        ));
        let err = parse(b"{not json").unwrap_err();
        assert_eq!(err["error"]["code"], PARSE_ERROR);
        assert_eq!(err["id"], Value::Null);
        let err = parse(br#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#).unwrap_err();
        assert_eq!(err["error"]["code"], INVALID_REQUEST);
    }

    #[test]
    fn parses_the_modern_envelope() {
        let ok = json!({"_meta": {
            META_PROTOCOL_VERSION: "2026-07-28",
            META_CLIENT_CAPABILITIES: {"sampling": {}},
            META_LOG_LEVEL: "warning"
        }});
        assert!(has_modern_envelope(&ok));
        let meta = parse_modern_meta(&ok).unwrap();
        assert_eq!(meta.version, "2026-07-28");
        assert_eq!(meta.log_level, Some(3));
        assert!(meta.client_capabilities["sampling"].is_object());
        for bad in [
            json!({}),
            json!({"_meta": {META_PROTOCOL_VERSION: "2026-07-28"}}),
            json!({"_meta": {META_CLIENT_CAPABILITIES: {}}}),
            json!({"_meta": {META_PROTOCOL_VERSION: "2026-07-28",
                             META_CLIENT_CAPABILITIES: {}, META_LOG_LEVEL: "loud"}}),
        ] {
            assert_eq!(
                parse_modern_meta(&bad).unwrap_err().code,
                INVALID_PARAMS,
                "{bad}"
            );
        }
        assert!(!has_modern_envelope(
            &json!({"_meta": {"progressToken": 1}})
        ));
        let e = check_modern_version("1900-01-01", &["2026-07-28", "2025-11-25"]).unwrap_err();
        assert_eq!(e.code, UNSUPPORTED_PROTOCOL_VERSION);
        assert_eq!(
            e.to_value()["data"],
            json!({"supported": ["2026-07-28", "2025-11-25"], "requested": "1900-01-01"})
        );
        assert!(check_modern_version("2026-07-28", &[]).is_ok());
        assert_eq!(
            RpcError::missing_capability("roots").to_value()["data"],
            json!({"requiredCapabilities": {"roots": {}}})
        );
    }

    #[test]
    fn negotiates_versions() {
        assert_eq!(negotiate(Some("2025-03-26")), "2025-03-26");
        assert_eq!(negotiate(Some("2099-01-01")), LATEST_VERSION);
        assert_eq!(negotiate(None), LATEST_VERSION);
    }
}
