//! JSON-RPC error objects and the error codes Sluice answers with, and the text of a Rust error
//! with its causes.

use serde_json::{json, Map, Value};

/// The error codes Sluice uses, with where each one comes from.
pub mod codes {
    /// Invalid JSON was received (JSON-RPC 2.0).
    pub const PARSE_ERROR: i64 = -32700;
    /// The JSON is not a valid JSON-RPC message (JSON-RPC 2.0).
    pub const INVALID_REQUEST: i64 = -32600;
    /// The method does not exist or is not available (JSON-RPC 2.0).
    pub const METHOD_NOT_FOUND: i64 = -32601;
    /// Invalid method parameters: unknown tool, bad cursor, unknown resource (JSON-RPC 2.0, MCP).
    pub const INVALID_PARAMS: i64 = -32602;
    /// Internal gateway error (JSON-RPC 2.0).
    pub const INTERNAL_ERROR: i64 = -32603;
    /// The upstream that owns the target is not connected, or its connection closed
    /// (the TypeScript SDK's `ConnectionClosed`).
    pub const UPSTREAM_UNAVAILABLE: i64 = -32000;
    /// A tool or prompt its pin holds: its definition changed since it was approved, or it is
    /// new and not yet approved (`mcp/pins.json`).
    pub const HELD_BY_PIN: i64 = -32000;
    /// The upstream did not answer within the configured timeout
    /// (the TypeScript SDK's `RequestTimeout`).
    pub const REQUEST_TIMEOUT: i64 = -32001;
    /// The HTTP headers do not match the body, or a required one is missing (2026-07-28
    /// `HeaderMismatch`; HTTP 400).
    pub const HEADER_MISMATCH: i64 = -32020;
    /// The request needs a client capability the client did not declare (2026-07-28).
    pub const MISSING_REQUIRED_CLIENT_CAPABILITY: i64 = -32021;
    /// The requested protocol version is not supported; `data.supported` lists the ones that
    /// are (2026-07-28; HTTP 400).
    pub const UNSUPPORTED_PROTOCOL_VERSION: i64 = -32022;
    /// A rate limit (the `rate-limit` builtin) refused the request; `data.retryAfterMs` says
    /// when a retry can succeed.
    pub const RATE_LIMITED: i64 = -32029;
    /// A request hook refused the message ("Request rejected", as Zato-style hook services say).
    pub const REQUEST_REJECTED: i64 = -32030;
    /// A response hook refused the reply ("Response rejected", as Zato-style hook services say).
    pub const RESPONSE_REJECTED: i64 = -32031;
}

/// A JSON-RPC error object: `code`, `message`, optional `data`.
#[derive(Debug, Clone, PartialEq)]
pub struct RpcError {
    /// The JSON-RPC error code (see [`codes`]).
    pub code: i64,
    /// A short human-readable message.
    pub message: String,
    /// Optional structured detail.
    pub data: Option<Value>,
}

impl RpcError {
    /// An error with a code and a message.
    pub fn new(code: i64, message: impl Into<String>) -> RpcError {
        RpcError {
            code,
            message: message.into(),
            data: None,
        }
    }

    /// Attach `data`.
    pub fn with_data(mut self, data: Value) -> RpcError {
        self.data = Some(data);
        self
    }

    /// -32700 Parse error.
    pub fn parse(detail: impl std::fmt::Display) -> RpcError {
        RpcError::new(codes::PARSE_ERROR, format!("Parse error: {detail}"))
    }

    /// -32600 Invalid Request.
    pub fn invalid_request(detail: impl std::fmt::Display) -> RpcError {
        RpcError::new(codes::INVALID_REQUEST, format!("Invalid Request: {detail}"))
    }

    /// -32601 Method not found.
    pub fn method_not_found(method: &str) -> RpcError {
        RpcError::new(
            codes::METHOD_NOT_FOUND,
            format!("Method not found: {method}"),
        )
    }

    /// -32602 Invalid params.
    pub fn invalid_params(detail: impl std::fmt::Display) -> RpcError {
        RpcError::new(codes::INVALID_PARAMS, detail.to_string())
    }

    /// -32603 Internal error.
    pub fn internal(detail: impl std::fmt::Display) -> RpcError {
        RpcError::new(codes::INTERNAL_ERROR, format!("Internal error: {detail}"))
    }

    /// The error object as JSON.
    pub fn to_value(&self) -> Value {
        let mut obj = Map::new();
        obj.insert("code".into(), json!(self.code));
        obj.insert("message".into(), json!(self.message));
        if let Some(data) = &self.data {
            obj.insert("data".into(), data.clone());
        }
        Value::Object(obj)
    }

    /// A full JSON-RPC error response carrying this error for `id` (`null` when unknown).
    pub fn to_response(&self, id: Option<&Value>) -> Value {
        json!({
            "jsonrpc": "2.0",
            "id": id.cloned().unwrap_or(Value::Null),
            "error": self.to_value(),
        })
    }
}

impl std::fmt::Display for RpcError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.message, self.code)
    }
}

impl std::error::Error for RpcError {}

/// `e`'s text followed by each of its sources' (skipping one its parent already says): the
/// top-level message of an HTTP client's error alone hides "connection refused".
pub fn with_causes(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(src) = cur {
        let m = src.to_string();
        if !s.contains(&m) {
            s.push_str(": ");
            s.push_str(&m);
        }
        cur = src.source();
    }
    s
}
