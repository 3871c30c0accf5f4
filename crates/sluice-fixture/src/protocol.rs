//! JSON-RPC 2.0 helpers: classifying incoming messages, building outgoing ones, error codes and
//! MCP protocol-version negotiation.

use serde_json::{json, Map, Value};

/// Invalid JSON was received.
pub const PARSE_ERROR: i64 = -32700;
/// The JSON sent is not a valid request object.
pub const INVALID_REQUEST: i64 = -32600;
/// The method does not exist.
pub const METHOD_NOT_FOUND: i64 = -32601;
/// Invalid method parameters (also: unknown tool, unknown prompt, bad cursor).
pub const INVALID_PARAMS: i64 = -32602;
/// MCP: the requested resource does not exist.
pub const RESOURCE_NOT_FOUND: i64 = -32002;

/// Protocol versions this fixture speaks, oldest first.
pub const SUPPORTED_VERSIONS: [&str; 4] = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"];
/// The version answered when the client asks for one this fixture does not know.
pub const LATEST_VERSION: &str = "2025-11-25";

/// The version to answer an `initialize` asking for `requested`.
pub fn negotiate(requested: Option<&str>) -> &'static str {
    requested
        .and_then(|r| SUPPORTED_VERSIONS.iter().copied().find(|v| *v == r))
        .unwrap_or(LATEST_VERSION)
}

/// Whether `version` is one this fixture speaks.
pub fn is_supported(version: &str) -> bool {
    SUPPORTED_VERSIONS.contains(&version)
}

/// A JSON-RPC error object.
#[derive(Debug, Clone)]
pub struct RpcError {
    /// The error code.
    pub code: i64,
    /// The human-readable message.
    pub message: String,
}

impl RpcError {
    /// An error with `code` and `message`.
    pub fn new(code: i64, message: impl Into<String>) -> Self {
        RpcError {
            code,
            message: message.into(),
        }
    }

    /// `-32602 Invalid params`.
    pub fn invalid_params(message: impl Into<String>) -> Self {
        Self::new(INVALID_PARAMS, message)
    }

    /// The JSON form (`{"code":…,"message":…}`).
    pub fn to_value(&self) -> Value {
        json!({ "code": self.code, "message": self.message })
    }
}

/// One classified incoming JSON-RPC message.
#[derive(Debug)]
pub enum Incoming {
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
pub fn parse(raw: &[u8]) -> Result<Incoming, Value> {
    let value: Value = serde_json::from_slice(raw).map_err(|e| {
        error_response(
            &Value::Null,
            &RpcError::new(PARSE_ERROR, format!("Parse error: {e}")),
        )
    })?;
    classify(value)
}

/// Classify an already-parsed JSON value as a JSON-RPC message.
pub fn classify(value: Value) -> Result<Incoming, Value> {
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
pub fn response(id: &Value, result: Value) -> Value {
    json!({ "jsonrpc": "2.0", "id": id, "result": result })
}

/// An error response.
pub fn error_response(id: &Value, error: &RpcError) -> Value {
    json!({ "jsonrpc": "2.0", "id": id, "error": error.to_value() })
}

/// A notification.
pub fn notification(method: &str, params: Value) -> Value {
    json!({ "jsonrpc": "2.0", "method": method, "params": params })
}

/// A request from this server to the client.
pub fn request(id: &Value, method: &str, params: Value) -> Value {
    json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params })
}

/// A map key for a request id (`1` and `"1"` stay distinct).
pub fn id_key(id: &Value) -> String {
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
    fn negotiates_versions() {
        assert_eq!(negotiate(Some("2025-03-26")), "2025-03-26");
        assert_eq!(negotiate(Some("2099-01-01")), LATEST_VERSION);
        assert_eq!(negotiate(None), LATEST_VERSION);
    }
}
