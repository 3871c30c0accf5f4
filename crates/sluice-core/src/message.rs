//! One JSON-RPC 2.0 message, kept as the JSON object it arrived as, and classified.

use crate::error::RpcError;
use serde_json::{json, Map, Value};

/// What a JSON-RPC message is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Has `method` and `id`: expects a reply.
    Request,
    /// Has `method`, no `id`.
    Notification,
    /// Has `id` and `result`.
    Response,
    /// Has `id` (maybe null) and `error`.
    Error,
}

/// A JSON-RPC message. The object is kept whole (unknown fields, key order), so forwarding it
/// changes nothing the gateway did not mean to change.
#[derive(Debug, Clone, PartialEq)]
pub struct Message {
    obj: Map<String, Value>,
    kind: Kind,
}

/// Why bytes could not become a [`Message`]: the error to answer with, and the request id if one
/// could be read.
#[derive(Debug, Clone, PartialEq)]
pub struct ParseError {
    /// The JSON-RPC error (-32700 or -32600).
    pub error: Box<RpcError>,
    /// The id of the offending message, when it had a readable one.
    pub id: Option<Value>,
}

impl ParseError {
    /// The error response to send back.
    pub fn to_response(&self) -> Value {
        self.error.to_response(self.id.as_ref())
    }
}

fn valid_id(id: &Value) -> bool {
    matches!(id, Value::String(_) | Value::Number(_))
}

impl Message {
    /// Parse one message from bytes. Invalid JSON is -32700; JSON that is not a JSON-RPC 2.0
    /// message (an array, a missing `jsonrpc`, a bad id …) is -32600.
    pub fn parse(bytes: &[u8]) -> Result<Message, ParseError> {
        let value: Value = serde_json::from_slice(bytes).map_err(|e| ParseError {
            error: Box::new(RpcError::parse(e)),
            id: None,
        })?;
        Message::from_value(value)
    }

    /// Classify a JSON value as a message (-32600 when it is not one).
    pub fn from_value(value: Value) -> Result<Message, ParseError> {
        let obj = match value {
            Value::Object(obj) => obj,
            Value::Array(_) => {
                return Err(ParseError {
                    error: Box::new(RpcError::invalid_request(
                        "batches (JSON arrays) are not supported; send one message per request",
                    )),
                    id: None,
                })
            }
            _ => {
                return Err(ParseError {
                    error: Box::new(RpcError::invalid_request("a message must be a JSON object")),
                    id: None,
                })
            }
        };
        let id = obj.get("id").cloned();
        let fail = |why: &str| ParseError {
            error: Box::new(RpcError::invalid_request(why)),
            id: id.clone().filter(valid_id),
        };
        if obj.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
            return Err(fail("\"jsonrpc\" must be \"2.0\""));
        }
        let kind = match (obj.get("method"), obj.get("id")) {
            (Some(Value::String(_)), None) => Kind::Notification,
            (Some(Value::String(_)), Some(id)) if valid_id(id) => Kind::Request,
            (Some(Value::String(_)), Some(_)) => {
                return Err(fail("\"id\" must be a string or a number"))
            }
            (Some(_), _) => return Err(fail("\"method\" must be a string")),
            (None, Some(_)) if obj.contains_key("result") => Kind::Response,
            (None, Some(_)) if obj.contains_key("error") => Kind::Error,
            (None, _) => return Err(fail("no \"method\", \"result\" or \"error\"")),
        };
        if let Some(p) = obj.get("params") {
            if !p.is_object() && !p.is_array() {
                return Err(fail("\"params\" must be an object or an array"));
            }
        }
        Ok(Message { obj, kind })
    }

    /// A request message.
    pub fn request(id: Value, method: &str, params: Option<Value>) -> Message {
        let mut obj = Map::new();
        obj.insert("jsonrpc".into(), json!("2.0"));
        obj.insert("id".into(), id);
        obj.insert("method".into(), json!(method));
        if let Some(p) = params {
            obj.insert("params".into(), p);
        }
        Message {
            obj,
            kind: Kind::Request,
        }
    }

    /// A notification message.
    pub fn notification(method: &str, params: Option<Value>) -> Message {
        let mut obj = Map::new();
        obj.insert("jsonrpc".into(), json!("2.0"));
        obj.insert("method".into(), json!(method));
        if let Some(p) = params {
            obj.insert("params".into(), p);
        }
        Message {
            obj,
            kind: Kind::Notification,
        }
    }

    /// A success response.
    pub fn response(id: Value, result: Value) -> Message {
        let mut obj = Map::new();
        obj.insert("jsonrpc".into(), json!("2.0"));
        obj.insert("id".into(), id);
        obj.insert("result".into(), result);
        Message {
            obj,
            kind: Kind::Response,
        }
    }

    /// An error response.
    pub fn error(id: Value, error: &RpcError) -> Message {
        let mut obj = Map::new();
        obj.insert("jsonrpc".into(), json!("2.0"));
        obj.insert("id".into(), id);
        obj.insert("error".into(), error.to_value());
        Message {
            obj,
            kind: Kind::Error,
        }
    }

    /// The kind of message.
    pub fn kind(&self) -> Kind {
        self.kind
    }

    /// `method`, for requests and notifications.
    pub fn method(&self) -> Option<&str> {
        self.obj.get("method").and_then(Value::as_str)
    }

    /// `id`, for requests and responses.
    pub fn id(&self) -> Option<&Value> {
        self.obj.get("id")
    }

    /// Replace the id (used for id remapping); returns the old one.
    pub fn set_id(&mut self, id: Value) -> Option<Value> {
        self.obj.insert("id".into(), id)
    }

    /// `params`.
    pub fn params(&self) -> Option<&Value> {
        self.obj.get("params")
    }

    /// `params`, mutable, created as `{}` when absent.
    pub fn params_mut(&mut self) -> &mut Map<String, Value> {
        let p = self
            .obj
            .entry("params")
            .or_insert_with(|| Value::Object(Map::new()));
        if !p.is_object() {
            *p = Value::Object(Map::new());
        }
        p.as_object_mut().expect("params is an object")
    }

    /// A string field of `params` (e.g. `name`, `uri`, `cursor`).
    pub fn param_str(&self, key: &str) -> Option<&str> {
        self.params()?.get(key)?.as_str()
    }

    /// `params._meta.progressToken`, if any.
    pub fn progress_token(&self) -> Option<&Value> {
        self.params()?.get("_meta")?.get("progressToken")
    }

    /// `result`, for success responses.
    pub fn result(&self) -> Option<&Value> {
        self.obj.get("result")
    }

    /// `result`, mutable.
    pub fn result_mut(&mut self) -> Option<&mut Value> {
        self.obj.get_mut("result")
    }

    /// `error`, for error responses.
    pub fn error_obj(&self) -> Option<&Value> {
        self.obj.get("error")
    }

    /// The code of an error message.
    pub fn error_code(&self) -> Option<i64> {
        self.error_obj()?.get("code")?.as_i64()
    }

    /// The whole object.
    pub fn as_object(&self) -> &Map<String, Value> {
        &self.obj
    }

    /// The whole object, mutable.
    pub fn as_object_mut(&mut self) -> &mut Map<String, Value> {
        &mut self.obj
    }

    /// The message as a JSON value.
    pub fn into_value(self) -> Value {
        Value::Object(self.obj)
    }

    /// The message as a JSON value (cloned).
    pub fn to_value(&self) -> Value {
        Value::Object(self.obj.clone())
    }

    /// Serialise to compact JSON (no newlines, as stdio framing needs).
    pub fn to_json(&self) -> String {
        serde_json::to_string(&self.obj).expect("a JSON map always serialises")
    }
}

impl serde::Serialize for Message {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.obj.serialize(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codes;

    #[test]
    fn classifies_and_keeps_unknown_fields_in_order() {
        let m = Message::parse(br#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"z":1,"a":2},"x-extra":true}"#).unwrap();
        assert_eq!(m.kind(), Kind::Request);
        assert_eq!(
            m.to_json(),
            r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"z":1,"a":2},"x-extra":true}"#
        );
    }

    #[test]
    fn bad_json_is_parse_error() {
        let e = Message::parse(b"{not json").unwrap_err();
        assert_eq!(e.error.code, codes::PARSE_ERROR);
        assert_eq!(e.id, None);
    }

    #[test]
    fn invalid_requests_keep_their_id() {
        let e = Message::parse(br#"{"jsonrpc":"1.0","id":"a","method":"x"}"#).unwrap_err();
        assert_eq!(e.error.code, codes::INVALID_REQUEST);
        assert_eq!(e.id, Some(json!("a")));
        let e = Message::parse(br#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#).unwrap_err();
        assert_eq!(e.error.code, codes::INVALID_REQUEST);
        let e = Message::parse(br#"{"jsonrpc":"2.0","id":{"o":1},"method":"ping"}"#).unwrap_err();
        assert_eq!(e.error.code, codes::INVALID_REQUEST);
        assert_eq!(e.id, None);
    }

    #[test]
    fn kinds() {
        let n =
            Message::parse(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#).unwrap();
        assert_eq!(n.kind(), Kind::Notification);
        let r = Message::parse(br#"{"jsonrpc":"2.0","id":1,"result":{}}"#).unwrap();
        assert_eq!(r.kind(), Kind::Response);
        let e = Message::parse(br#"{"jsonrpc":"2.0","id":null,"error":{"code":1,"message":"x"}}"#)
            .unwrap();
        assert_eq!(e.kind(), Kind::Error);
    }
}
