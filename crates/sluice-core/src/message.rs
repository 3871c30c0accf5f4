//! One JSON-RPC 2.0 message, kept as the JSON object it arrived as, and classified.

use crate::error::RpcError;
use crate::exact;
use crate::member;
use crate::raw::RawReply;
use crate::raw_request::RawRequest;
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
/// changes nothing the gateway did not mean to change. A plain request or notification read
/// with [`Message::parse`], and a plain reply read with [`Message::parse_reply`], are kept as
/// their text until something looks inside or changes more than their id (and, for a request,
/// a member of `params` it has).
#[derive(Debug, Clone)]
pub struct Message {
    body: Body,
    kind: Kind,
}

#[derive(Debug, Clone)]
enum Body {
    Obj(Map<String, Value>),
    Reply(Box<RawReply>),
    Request(Box<RawRequest>),
}

impl PartialEq for Message {
    fn eq(&self, other: &Message) -> bool {
        self.kind == other.kind && self.as_object() == other.as_object()
    }
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
    /// The error response to send back (write it with [`exact::to_string`]: the id may be an
    /// exact id).
    pub fn to_response(&self) -> Value {
        self.error.to_response(self.id.as_ref())
    }
}

fn valid_id(id: &Value) -> bool {
    matches!(id, Value::String(_) | Value::Number(_))
}

/// Replace a numeric `id` that would not write back as it arrived in `bytes` with an exact id.
fn keep_exact_id(id: Option<&mut Value>, bytes: &[u8]) {
    let Some(id) = id else { return };
    let Value::Number(n) = id else { return };
    if n.is_u64() || n.is_i64() {
        return;
    }
    if let Some(kept) = exact::raw_id(bytes).and_then(|raw| exact::keep(n, raw)) {
        *id = kept;
    }
}

impl Message {
    /// Parse one message from bytes. Invalid JSON is -32700; JSON that is not a JSON-RPC 2.0
    /// message (an array, a missing `jsonrpc`, a bad id …) is -32600. A numeric id is kept as
    /// sent, byte for byte (an [exact id](crate::exact) when `serde_json` would change it). A
    /// plain request or notification is kept as its text (written back as received, with only
    /// what was changed spliced in).
    pub fn parse(bytes: &[u8]) -> Result<Message, ParseError> {
        if let Some(r) = RawRequest::read(bytes) {
            return Ok(Message {
                kind: if r.is_request() {
                    Kind::Request
                } else {
                    Kind::Notification
                },
                body: Body::Request(Box::new(r)),
            });
        }
        Message::parse_tree(bytes)
    }

    /// [`Message::parse`] straight into a JSON tree, for a message that will be looked into
    /// anyway (request hooks read every request they are shown): reading its text first would
    /// only add that read to the parse.
    pub fn parse_tree(bytes: &[u8]) -> Result<Message, ParseError> {
        let value: Value = serde_json::from_slice(bytes).map_err(|e| ParseError {
            error: Box::new(RpcError::parse(e)),
            id: None,
        })?;
        match Message::classify(value, false) {
            Ok(mut m) => {
                keep_exact_id(member::get_mut(m.obj_mut(), "id"), bytes);
                Ok(m)
            }
            Err(mut e) => {
                keep_exact_id(e.id.as_mut(), bytes);
                Err(e)
            }
        }
    }

    /// [`Message::parse`], keeping a plain reply (`jsonrpc`, `id`, and `result` or `error`, on
    /// one line) as the text it arrived as: its id can be replaced and it is written back as
    /// received; anything that reads further parses it then, and anything that changes more
    /// than the id makes it an ordinary message. For what an upstream sends.
    pub fn parse_reply(bytes: &[u8]) -> Result<Message, ParseError> {
        match RawReply::read(bytes) {
            Some(r) => Ok(Message {
                kind: if r.is_error() {
                    Kind::Error
                } else {
                    Kind::Response
                },
                body: Body::Reply(Box::new(r)),
            }),
            None => Message::parse(bytes),
        }
    }

    /// Classify a JSON value as a message (-32600 when it is not one). An [exact
    /// id](crate::exact) counts as a numeric id.
    pub fn from_value(value: Value) -> Result<Message, ParseError> {
        Message::classify(value, true)
    }

    fn classify(value: Value, exact_ok: bool) -> Result<Message, ParseError> {
        let valid_id = |id: &Value| valid_id(id) || (exact_ok && exact::is_exact(id));
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
        let id = member::get(&obj, "id").cloned();
        let fail = |why: &str| ParseError {
            error: Box::new(RpcError::invalid_request(why)),
            id: id.clone().filter(valid_id),
        };
        if member::get(&obj, "jsonrpc").and_then(Value::as_str) != Some("2.0") {
            return Err(fail("\"jsonrpc\" must be \"2.0\""));
        }
        let kind = match (member::get(&obj, "method"), member::get(&obj, "id")) {
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
        if let Some(p) = member::get(&obj, "params") {
            if !p.is_object() && !p.is_array() {
                return Err(fail("\"params\" must be an object or an array"));
            }
        }
        Ok(Message::of(obj, kind))
    }

    fn of(obj: Map<String, Value>, kind: Kind) -> Message {
        Message {
            body: Body::Obj(obj),
            kind,
        }
    }

    fn obj(&self) -> &Map<String, Value> {
        match &self.body {
            Body::Obj(m) => m,
            Body::Reply(r) => r.obj(),
            Body::Request(r) => r.obj(),
        }
    }

    fn obj_mut(&mut self) -> &mut Map<String, Value> {
        match std::mem::replace(&mut self.body, Body::Obj(Map::new())) {
            Body::Obj(m) => self.body = Body::Obj(m),
            Body::Reply(r) => self.body = Body::Obj(r.into_obj()),
            Body::Request(r) => self.body = Body::Obj(r.into_obj()),
        }
        match &mut self.body {
            Body::Obj(m) => m,
            _ => unreachable!("made an object above"),
        }
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
        Message::of(obj, Kind::Request)
    }

    /// A notification message.
    pub fn notification(method: &str, params: Option<Value>) -> Message {
        let mut obj = Map::new();
        obj.insert("jsonrpc".into(), json!("2.0"));
        obj.insert("method".into(), json!(method));
        if let Some(p) = params {
            obj.insert("params".into(), p);
        }
        Message::of(obj, Kind::Notification)
    }

    /// A success response.
    pub fn response(id: Value, result: Value) -> Message {
        let mut obj = Map::new();
        obj.insert("jsonrpc".into(), json!("2.0"));
        obj.insert("id".into(), id);
        obj.insert("result".into(), result);
        Message::of(obj, Kind::Response)
    }

    /// An error response.
    pub fn error(id: Value, error: &RpcError) -> Message {
        let mut obj = Map::new();
        obj.insert("jsonrpc".into(), json!("2.0"));
        obj.insert("id".into(), id);
        obj.insert("error".into(), error.to_value());
        Message::of(obj, Kind::Error)
    }

    /// The kind of message.
    pub fn kind(&self) -> Kind {
        self.kind
    }

    /// Move the message out, leaving an empty object of the same kind in its place (a hook
    /// that changes the message it was shown, without a copy).
    pub fn take(&mut self) -> Message {
        let kind = self.kind;
        std::mem::replace(
            self,
            Message {
                body: Body::Obj(Map::new()),
                kind,
            },
        )
    }

    /// `method`, for requests and notifications.
    pub fn method(&self) -> Option<&str> {
        match &self.body {
            Body::Obj(m) => member::get(m, "method").and_then(Value::as_str),
            Body::Reply(_) => None,
            Body::Request(r) => Some(r.method()),
        }
    }

    /// `id`, for requests and responses.
    pub fn id(&self) -> Option<&Value> {
        match &self.body {
            Body::Obj(m) => member::get(m, "id"),
            Body::Reply(r) => Some(r.id()),
            Body::Request(r) => r.id(),
        }
    }

    /// Replace the id (used for id remapping); returns the old one.
    pub fn set_id(&mut self, id: Value) -> Option<Value> {
        match &mut self.body {
            // Found by comparing keys; the map hashes only to add one.
            Body::Obj(m) => match member::get_mut(m, "id") {
                Some(now) => Some(std::mem::replace(now, id)),
                None => m.insert("id".into(), id),
            },
            Body::Reply(r) => Some(r.set_id(id)),
            Body::Request(r) => match r.set_id(id) {
                Ok(old) => Some(old),
                Err(id) => self.obj_mut().insert("id".into(), id),
            },
        }
    }

    /// `params`.
    pub fn params(&self) -> Option<&Value> {
        match &self.body {
            Body::Obj(m) => member::get(m, "params"),
            Body::Reply(_) => None,
            Body::Request(r) if !r.has_params() => None,
            Body::Request(r) => member::get(r.obj(), "params"),
        }
    }

    /// The member `key` of `params`. A request kept as text parses that member alone.
    pub fn param(&self, key: &str) -> Option<&Value> {
        match &self.body {
            Body::Request(r) => r.param(key),
            _ => member::of(self.params()?, key),
        }
    }

    /// The member `key` of `params`, to change in place. A request kept as text stays text
    /// (with that member written anew).
    pub fn param_mut(&mut self, key: &str) -> Option<&mut Value> {
        match &mut self.body {
            Body::Request(r) => r.param_mut(key),
            Body::Obj(m) => member::get_mut(member::get_mut(m, "params")?.as_object_mut()?, key),
            // A reply has no `params`.
            Body::Reply(_) => None,
        }
    }

    /// The members of `params` as they are now, in order (a repeated key once, with its last
    /// value); `None` without an object `params`. A request kept as text parses each member
    /// alone.
    pub fn param_entries(&self) -> Option<Vec<(&str, &Value)>> {
        match &self.body {
            Body::Request(r) => r.has_params().then(|| r.entries()),
            _ => Some(
                self.params()?
                    .as_object()?
                    .iter()
                    .map(|(k, v)| (k.as_str(), v))
                    .collect(),
            ),
        }
    }

    /// Does `params` have the member `key`?
    pub fn has_param(&self, key: &str) -> bool {
        match &self.body {
            Body::Request(r) => r.has_param(key),
            _ => self.param(key).is_some(),
        }
    }

    /// Set the member `key` of `params` (created as `{}` when absent). A request kept as text
    /// stays text when its `params` has a member already.
    pub fn set_param(&mut self, key: &str, value: Value) {
        let value = match &mut self.body {
            Body::Request(r) => match r.set_param(key, value) {
                Ok(()) => return,
                Err(value) => value,
            },
            _ => value,
        };
        let params = self.params_mut();
        match member::get_mut(params, key) {
            Some(now) => *now = value,
            None => {
                params.insert(key.into(), value);
            }
        }
    }

    /// Take the member `key` out of `params` (the others keep their order). A request kept as
    /// text stays text.
    pub fn remove_param(&mut self, key: &str) -> Option<Value> {
        match &mut self.body {
            Body::Request(r) => r.remove_param(key),
            Body::Obj(m) => member::get_mut(m, "params")?
                .as_object_mut()?
                .shift_remove(key),
            Body::Reply(_) => None,
        }
    }

    /// `params`, mutable, created as `{}` when absent.
    pub fn params_mut(&mut self) -> &mut Map<String, Value> {
        let obj = self.obj_mut();
        // Found by comparing keys ([`member`]); the map's own hashing only to add or replace.
        if !member::get(obj, "params").is_some_and(Value::is_object) {
            obj.insert("params".into(), Value::Object(Map::new()));
        }
        member::get_mut(obj, "params")
            .and_then(Value::as_object_mut)
            .expect("params is an object")
    }

    /// A string field of `params` (e.g. `name`, `uri`, `cursor`).
    pub fn param_str(&self, key: &str) -> Option<&str> {
        match &self.body {
            Body::Request(r) => r.param_str(key),
            _ => member::of(self.params()?, key)?.as_str(),
        }
    }

    /// `params._meta.progressToken`, if any.
    pub fn progress_token(&self) -> Option<&Value> {
        member::of(self.param("_meta")?, "progressToken")
    }

    /// `result`, for success responses.
    pub fn result(&self) -> Option<&Value> {
        match &self.body {
            Body::Reply(r) if r.is_error() => None,
            Body::Request(_) => None,
            _ => member::get(self.obj(), "result"),
        }
    }

    /// A boolean member of `result` (e.g. `isError`), read without parsing a reply kept as
    /// text when its text cannot hold it.
    pub fn result_bool(&self, key: &str) -> Option<bool> {
        match &self.body {
            Body::Reply(r) if r.is_error() => None,
            Body::Reply(r) => r.member_bool(key),
            Body::Request(_) => None,
            Body::Obj(_) => member::of(self.result()?, key)?.as_bool(),
        }
    }

    /// The `result` (or `error`) of a reply kept as text, as received (never with a `\u`
    /// escape: such a reply is parsed whole); `None` for any other message. For checks that can
    /// tell from the text that they have nothing to do.
    pub fn reply_member_text(&self) -> Option<&str> {
        match &self.body {
            Body::Reply(r) => Some(r.member_text()),
            _ => None,
        }
    }

    /// `result`, mutable.
    pub fn result_mut(&mut self) -> Option<&mut Value> {
        member::get_mut(self.obj_mut(), "result")
    }

    /// Add members to the `result` object of a success response: each of `absent` that it
    /// lacks (appended in order), then `meta` put into its `_meta` object (appended when
    /// absent; left alone when `_meta` is not an object). A reply kept as text stays text, the
    /// members spliced in; any other message is changed in its tree. Nothing happens to a
    /// message without an object `result`.
    pub fn extend_result(&mut self, absent: &[(&str, Value)], meta: (&str, Value)) {
        if self.kind != Kind::Response {
            return;
        }
        if let Body::Reply(r) = &mut self.body {
            if let Some(extended) = r.extended(absent, (meta.0, &meta.1)) {
                **r = extended;
                return;
            }
            // Not an object: nothing to add to (and no reason to parse the reply).
            if !r.member_text().starts_with('{') {
                return;
            }
        }
        let Some(result) = self.result_mut().and_then(Value::as_object_mut) else {
            return;
        };
        for (key, value) in absent {
            if member::get(result, key).is_none() {
                result.insert((*key).to_string(), value.clone());
            }
        }
        let m = match member::get_mut(result, "_meta") {
            Some(m) => m,
            None => {
                result.insert("_meta".into(), Value::Object(Map::new()));
                member::get_mut(result, "_meta").expect("inserted just now")
            }
        };
        if let Some(m) = m.as_object_mut() {
            m.insert(meta.0.to_string(), meta.1);
        }
    }

    /// `error`, for error responses.
    pub fn error_obj(&self) -> Option<&Value> {
        match &self.body {
            Body::Reply(r) if !r.is_error() => None,
            Body::Request(_) => None,
            _ => member::get(self.obj(), "error"),
        }
    }

    /// The code of an error message.
    pub fn error_code(&self) -> Option<i64> {
        member::of(self.error_obj()?, "code")?.as_i64()
    }

    /// The whole object.
    pub fn as_object(&self) -> &Map<String, Value> {
        self.obj()
    }

    /// The whole object, mutable.
    pub fn as_object_mut(&mut self) -> &mut Map<String, Value> {
        self.obj_mut()
    }

    /// The message as a JSON value.
    pub fn into_value(self) -> Value {
        Value::Object(match self.body {
            Body::Obj(m) => m,
            Body::Reply(r) => r.into_obj(),
            Body::Request(r) => r.into_obj(),
        })
    }

    /// The message as a JSON value (cloned).
    pub fn to_value(&self) -> Value {
        Value::Object(self.obj().clone())
    }

    /// A reply kept as the text it arrived as, in the pieces [`Message::to_json`] joins: the
    /// text (shared), where the received id is in it, and the id to write there (with
    /// [`exact::to_string`]). `None` for every other message. A writer can send the text around
    /// the id as it is, without copying a large reply into a new string.
    pub fn raw_pieces(&self) -> Option<(&std::sync::Arc<str>, (usize, usize), &Value)> {
        match &self.body {
            Body::Reply(r) => Some(r.pieces()),
            _ => None,
        }
    }

    /// The text a request kept as text came as (shared), whatever was changed in it since;
    /// `None` for every other message.
    pub fn received_text(&self) -> Option<std::sync::Arc<str>> {
        match &self.body {
            Body::Request(r) => Some(r.text()),
            _ => None,
        }
    }

    /// Serialise to compact JSON (no newlines, as stdio framing needs); an exact id is written
    /// as the number text it holds.
    pub fn to_json(&self) -> String {
        let obj = match &self.body {
            Body::Obj(m) => m,
            Body::Reply(r) => return r.to_json(),
            Body::Request(r) => return r.to_json(),
        };
        if exact::has_exact_id(obj) {
            return serde_json::to_string(&exact::ExactMap(obj))
                .expect("a JSON map always serialises");
        }
        serde_json::to_string(obj).expect("a JSON map always serialises")
    }
}

/// As [`Message::to_json`]: a message kept as its text is written as that text.
impl serde::Serialize for Message {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let obj = match &self.body {
            Body::Obj(m) => m,
            Body::Reply(_) | Body::Request(_) => {
                let raw = serde_json::value::RawValue::from_string(self.to_json())
                    .map_err(serde::ser::Error::custom)?;
                return raw.serialize(s);
            }
        };
        if exact::has_exact_id(obj) {
            return exact::ExactMap(obj).serialize(s);
        }
        obj.serialize(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codes;

    /// `extend_result` on a reply kept as text writes what it writes on the parsed reply, and
    /// the reply stays text; where the text cannot be followed it changes the tree instead.
    #[test]
    fn extend_result_splices_into_a_reply_kept_as_text_what_the_tree_gets() {
        let absent = [
            ("resultType", json!("complete")),
            ("ttlMs", json!(0)),
            ("cacheScope", json!("public")),
        ];
        let info = json!({"name": "up", "version": "1.0"});
        let extend = |m: &mut Message| m.extend_result(&absent, ("serverInfo", info.clone()));
        let cases = [
            (
                r#"{"jsonrpc":"2.0","id":1,"result":{"content":[],"isError":false}}"#,
                true,
            ),
            (r#"{"jsonrpc":"2.0","id":1,"result":{}}"#, true),
            (
                r#"{"result":{"resultType":"incomplete","x":"a\"b"},"id":"c-1","jsonrpc":"2.0"}"#,
                true,
            ),
            (
                r#"{"jsonrpc":"2.0","id":2,"result":{"_meta":{"a":1,"serverInfo":null},"x":2}}"#,
                true,
            ),
            (
                r#"{"jsonrpc":"2.0","id":2,"result":{"_meta":5,"ttlMs":7}}"#,
                true,
            ),
            (
                r#"{ "jsonrpc" : "2.0" , "id" : 3 , "result" : { "a" : 1 } }"#,
                true,
            ),
            (r#"{"jsonrpc":"2.0","id":4,"result":[1,2]}"#, true),
            (
                r#"{"jsonrpc":"2.0","id":5,"error":{"code":-32000,"message":"no"}}"#,
                true,
            ),
            // A key with an escape, a repeated key: the tree is changed instead.
            (r#"{"jsonrpc":"2.0","id":6,"result":{"a\"b":1}}"#, false),
            (
                r#"{"jsonrpc":"2.0","id":7,"result":{"resultType":"x","resultType":"y"}}"#,
                false,
            ),
        ];
        for (text, stays_text) in cases {
            let mut raw = Message::parse_reply(text.as_bytes()).unwrap();
            assert!(raw.raw_pieces().is_some(), "{text} is read as text");
            raw.set_id(json!(99));
            let mut tree = Message::parse(text.as_bytes()).unwrap();
            assert!(tree.raw_pieces().is_none());
            tree.set_id(json!(99));
            extend(&mut raw);
            extend(&mut tree);
            // The same members in the same order (the text keeps its own whitespace).
            let compact: Value = serde_json::from_str(&raw.to_json()).unwrap();
            assert_eq!(
                serde_json::to_string(&compact).unwrap(),
                tree.to_json(),
                "{text}"
            );
            assert_eq!(raw.raw_pieces().is_some(), stays_text, "{text}");
            // The reply kept as text knows where its parts are in the new text.
            if let (Some(member), Some(result)) = (raw.reply_member_text(), tree.result()) {
                assert_eq!(
                    &serde_json::from_str::<Value>(member).unwrap(),
                    result,
                    "{text}"
                );
            }
            raw.set_id(json!("a-longer-id"));
            tree.set_id(json!("a-longer-id"));
            let compact: Value = serde_json::from_str(&raw.to_json()).unwrap();
            assert_eq!(
                serde_json::to_string(&compact).unwrap(),
                tree.to_json(),
                "{text}"
            );
        }
        // What would not be plain text (a control character, written as a `\u` escape) makes
        // the tree change instead.
        let mut m = Message::parse_reply(br#"{"jsonrpc":"2.0","id":1,"result":{}}"#).unwrap();
        m.extend_result(&[], ("serverInfo", json!({"name": "a\u{1}b"})));
        assert!(m.raw_pieces().is_none());
        assert_eq!(
            m.result().unwrap()["_meta"]["serverInfo"]["name"],
            json!("a\u{1}b")
        );
        // What the gateway did not touch keeps its text.
        let mut m =
            Message::parse_reply(br#"{"jsonrpc":"2.0","id":1,"result":{"n":1.10}}"#).unwrap();
        extend(&mut m);
        assert_eq!(
            m.to_json(),
            r#"{"jsonrpc":"2.0","id":1,"result":{"n":1.10,"resultType":"complete","ttlMs":0,"cacheScope":"public","_meta":{"serverInfo":{"name":"up","version":"1.0"}}}}"#
        );
        assert_eq!(m.result().unwrap()["_meta"]["serverInfo"], info);
    }

    #[test]
    fn take_moves_the_message_out_and_leaves_an_empty_one_of_its_kind() {
        let mut m =
            Message::parse(br#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"a":1}}"#)
                .unwrap();
        let taken = m.take();
        assert_eq!(
            taken.to_value(),
            serde_json::json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"a": 1}})
        );
        assert_eq!(m.kind(), Kind::Request);
        assert_eq!(m.to_value(), serde_json::json!({}));
    }

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
    fn numeric_ids_come_back_byte_for_byte() {
        for id in [
            "123456789012345678901234567890",
            "98765432109876543210",
            "-123456789012345678901234567890",
            "1.10",
            "1.5",
            "-2.50",
            "1e2",
            "1E+2",
            "-0",
            "0.1000000000000000055511151231257827",
            "7",
            "-7",
            "18446744073709551615",
            "-9223372036854775808",
        ] {
            let text =
                format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"ping","params":{{"n":1.10}}}}"#);
            let m = Message::parse(text.as_bytes()).unwrap();
            assert_eq!(m.kind(), Kind::Request, "{id}");
            // The id as sent. A request kept as its text is written back as sent; one with an
            // exponent (which a parse into values may refuse) is parsed whole, and its other
            // numbers are written as serde_json writes them.
            let n = if id.contains(['e', 'E']) {
                "1.1"
            } else {
                "1.10"
            };
            let want =
                format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"ping","params":{{"n":{n}}}}}"#);
            assert_eq!(m.to_json(), want, "{id}");
            assert_eq!(serde_json::to_string(&m).unwrap(), want, "{id}");
            // Carried into a reply, an error, a copy through a Value: still as sent.
            let id_v = m.id().cloned().unwrap();
            let reply = Message::response(id_v.clone(), json!({}));
            assert_eq!(
                reply.to_json(),
                format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{}}}}"#)
            );
            let err = Message::error(id_v.clone(), &RpcError::invalid_request("x"));
            assert!(err.to_json().contains(&format!(r#""id":{id},"#)), "{id}");
            let again = Message::from_value(reply.to_value()).unwrap();
            assert_eq!(again.to_json(), reply.to_json());
            let mut other = Message::request(json!(5), "ping", None);
            other.set_id(id_v.clone());
            assert!(other.to_json().contains(&format!(r#""id":{id},"#)));
            let nested = json!({"event": {"message": m.to_value()}});
            assert!(crate::exact::to_string(&nested).contains(&format!(r#""id":{id},"#)));
            // Keys match what serde_json alone makes of the id (a requestId, as before).
            let lossy: Value = serde_json::from_str(id).unwrap();
            assert_eq!(crate::exact::key(&id_v), lossy.to_string(), "{id}");
        }
    }

    #[test]
    fn exact_ids_of_invalid_requests_and_responses() {
        let e = Message::parse(br#"{"jsonrpc":"1.0","id":1.10,"method":"x"}"#).unwrap_err();
        assert_eq!(
            crate::exact::to_string(&e.to_response()),
            r#"{"jsonrpc":"2.0","id":1.10,"error":{"code":-32600,"message":"Invalid Request: \"jsonrpc\" must be \"2.0\""}}"#
        );
        let r = Message::parse(br#"{"jsonrpc":"2.0","id":1e400,"result":{}}"#);
        assert!(r.is_err(), "out-of-range numbers stay a parse error");
        let r = Message::parse(br#"{"jsonrpc":"2.0","id":2.50,"result":{}}"#).unwrap();
        assert_eq!(r.to_json(), r#"{"jsonrpc":"2.0","id":2.50,"result":{}}"#);
    }

    #[test]
    fn a_client_cannot_send_an_exact_id() {
        let e = Message::parse(
            br#"{"jsonrpc":"2.0","id":{"$sluice::exact-number":"1"},"method":"ping"}"#,
        )
        .unwrap_err();
        assert_eq!(e.error.code, codes::INVALID_REQUEST);
        assert_eq!(e.id, None);
        let e = Message::from_value(
            json!({"jsonrpc":"2.0","id":{"$sluice::exact-number":"1}"},"method":"ping"}),
        )
        .unwrap_err();
        assert_eq!(e.error.code, codes::INVALID_REQUEST);
    }

    #[test]
    fn a_reply_kept_as_text_reads_and_changes_like_a_parsed_one() {
        let text = br#"{"jsonrpc":"2.0","id":3,"result":{"n":1.10,"content":[]}}"#;
        let (mut lazy, parsed) = (
            Message::parse_reply(text).unwrap(),
            Message::parse(text).unwrap(),
        );
        assert_eq!(lazy, parsed);
        assert_eq!((lazy.kind(), lazy.id()), (Kind::Response, Some(&json!(3))));
        assert_eq!(
            (lazy.method(), lazy.params(), lazy.error_obj()),
            (None, None, None)
        );
        // Untouched but for the id: written back as received.
        lazy.set_id(json!("c-9"));
        assert_eq!(
            lazy.to_json(),
            r#"{"jsonrpc":"2.0","id":"c-9","result":{"n":1.10,"content":[]}}"#
        );
        assert_eq!(lazy.result_bool("isError"), None);
        assert_eq!(lazy.reply_member_text(), Some(r#"{"n":1.10,"content":[]}"#));
        assert_eq!(parsed.reply_member_text(), None);
        assert_eq!(lazy.result(), Some(&json!({"n": 1.1, "content": []})));
        let failed = br#"{"jsonrpc":"2.0","id":3,"result":{"content":[],"isError":true}}"#;
        assert_eq!(
            Message::parse_reply(failed).unwrap().result_bool("isError"),
            Some(true)
        );
        let escaped = br#"{"jsonrpc":"2.0","id":3,"result":{"isError":true}}"#;
        assert_eq!(
            Message::parse_reply(escaped)
                .unwrap()
                .result_bool("isError"),
            Some(true)
        );
        assert_eq!(serde_json::to_value(&lazy).unwrap()["id"], json!("c-9"));
        // Changed: an ordinary message from then on.
        lazy.result_mut().unwrap()["n"] = json!(2);
        assert_eq!(
            lazy.to_json(),
            r#"{"jsonrpc":"2.0","id":"c-9","result":{"n":2,"content":[]}}"#
        );
        let err =
            Message::parse_reply(br#"{"jsonrpc":"2.0","id":1,"error":{"code":-1,"message":"x"}}"#)
                .unwrap();
        assert_eq!(
            (err.kind(), err.error_code(), err.result()),
            (Kind::Error, Some(-1), None)
        );
        // Not a plain reply: parsed as before, errors included.
        let req = Message::parse_reply(br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#).unwrap();
        assert_eq!(req.method(), Some("ping"));
        let bad = Message::parse_reply(b"{nope").unwrap_err();
        assert_eq!(bad.error.code, codes::PARSE_ERROR);
    }

    #[test]
    fn a_request_kept_as_text_reads_and_changes_like_a_parsed_one() {
        let text = br#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"a\"b","arguments":{"n":1.10},"_meta":{"progressToken":"p"}}}"#;
        let (mut lazy, parsed) = (
            Message::parse(text).unwrap(),
            Message::parse_tree(text).unwrap(),
        );
        assert_eq!(lazy, parsed);
        assert_eq!(
            (lazy.kind(), lazy.method()),
            (Kind::Request, Some("tools/call"))
        );
        assert_eq!(
            lazy.param_str("name"),
            Some("a\"b"),
            "an escaped name, from the parse"
        );
        assert_eq!(lazy.progress_token(), Some(&json!("p")));
        assert!(lazy.has_param("arguments") && !lazy.has_param("task"));
        assert_eq!(lazy.param("task"), None);
        assert_eq!((lazy.result(), lazy.error_obj()), (None, None));
        // Kept as text: only the changes are spliced in, a member it lacks added at the end of
        // `params`.
        lazy.set_id(json!(9));
        lazy.set_param("name", json!("c"));
        assert_eq!(
            lazy.to_json(),
            r#"{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"c","arguments":{"n":1.10},"_meta":{"progressToken":"p"}}}"#
        );
        lazy.set_param("task", json!({"ttl": 1}));
        assert_eq!(lazy.params().unwrap()["task"], json!({"ttl": 1}));
        assert_eq!(lazy.param_str("name"), Some("c"));
        assert!(lazy.to_json().ends_with(r#""task":{"ttl":1}}}"#));
        // A notification given an id becomes an ordinary message with one.
        let mut n = Message::parse(br#"{"jsonrpc":"2.0","method":"notifications/x"}"#).unwrap();
        assert_eq!(
            (n.kind(), n.id(), n.params()),
            (Kind::Notification, None, None)
        );
        assert_eq!(n.set_id(json!(1)), None);
        assert_eq!(
            n.to_json(),
            r#"{"jsonrpc":"2.0","method":"notifications/x","id":1}"#
        );
        // Written as its text by serde too.
        let ping = br#"{"jsonrpc":"2.0","id":1,"method":"ping","params":{"n":1.10}}"#;
        let m = Message::parse(ping).unwrap();
        assert_eq!(serde_json::to_string(&m).unwrap().as_bytes(), ping);
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
