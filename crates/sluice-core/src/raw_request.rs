//! A request or notification kept as the text it arrived as: its method, id and the top level
//! of its `params` located at once, the rest parsed only when something looks inside, and
//! written back byte for byte with only what the gateway changed (the id, a member of `params`
//! such as the tool's name upstream) spliced in. A client's call that no hook or rule reads
//! goes upstream without being parsed into a JSON tree and serialised from it.

use crate::exact;
use crate::raw::{id_of, not_plain, span, trimmed};
use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde_json::value::RawValue;
use serde_json::{Map, Value};
use std::fmt;
use std::sync::{Arc, OnceLock};

/// `{"jsonrpc":"2.0","method":…}` with an `id` (a request) or without (a notification), and
/// `params` as an object when present, in any key order, on one line, with nothing else at its
/// top level, no escape in a key or the method, and none of what [`not_plain`] finds.
#[derive(Debug, Clone)]
pub(crate) struct RawRequest {
    /// The message as received (outer whitespace trimmed).
    text: Arc<str>,
    /// Where the method's characters (inside its quotes) are in `text`.
    method_at: (usize, usize),
    /// The id now, and where the received one is in `text`; `None` for a notification.
    id: Option<(Value, (usize, usize))>,
    /// `params` is there (an object).
    has_params: bool,
    /// The members of `params`, in order: where each key's characters and each value are.
    members: Vec<((usize, usize), (usize, usize))>,
    /// Members of `params` given a new value: which (an index into `members`), and the value.
    edits: Vec<(usize, Value)>,
    /// The whole object, parsed the first time something reads more than the above.
    obj: OnceLock<Map<String, Value>>,
}

/// The top level of a request: each member's text.
#[derive(Default)]
struct Top<'a> {
    jsonrpc: Option<&'a RawValue>,
    id: Option<&'a RawValue>,
    method: Option<&'a RawValue>,
    params: Option<Members<'a>>,
}

/// The members of an object: each key (without escapes) and its value's text.
struct Members<'a>(Vec<(&'a str, &'a RawValue)>);

impl<'de> serde::Deserialize<'de> for Top<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(TopVisitor)
    }
}

struct TopVisitor;

impl<'de> Visitor<'de> for TopVisitor {
    type Value = Top<'de>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON-RPC request")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Top<'de>, A::Error> {
        let mut top = Top::default();
        let repeated = || de::Error::custom("a repeated key");
        // A key with escapes cannot be borrowed: not a plain request (parsed whole instead).
        while let Some(key) = map.next_key::<&'de str>()? {
            let slot = match key {
                "jsonrpc" => &mut top.jsonrpc,
                "id" => &mut top.id,
                "method" => &mut top.method,
                // Anything but an object (an array, `null`) is left to the full parse.
                "params" => {
                    if top.params.replace(map.next_value()?).is_some() {
                        return Err(repeated());
                    }
                    continue;
                }
                _ => return Err(de::Error::custom("not a plain request")),
            };
            if slot.replace(map.next_value()?).is_some() {
                return Err(repeated());
            }
        }
        Ok(top)
    }
}

impl<'de> serde::Deserialize<'de> for Members<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(MembersVisitor)
    }
}

struct MembersVisitor;

impl<'de> Visitor<'de> for MembersVisitor {
    type Value = Members<'de>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Members<'de>, A::Error> {
        let mut members = Vec::with_capacity(map.size_hint().unwrap_or(4));
        while let Some(key) = map.next_key::<&'de str>()? {
            members.push((key, map.next_value()?));
        }
        Ok(Members(members))
    }
}

/// The characters of `text`, a JSON value's text, when it is a string without escapes: what is
/// between its quotes (the text is valid JSON, so nothing there needs checking).
fn plain_str(text: &str) -> Option<&str> {
    let inner = text.strip_prefix('"')?.strip_suffix('"')?;
    (!inner.contains('\\')).then_some(inner)
}

impl RawRequest {
    /// Read `bytes` as a plain request or notification, or `None` (the caller parses it whole,
    /// which also finds what is wrong with it, if anything).
    pub(crate) fn read(bytes: &[u8]) -> Option<RawRequest> {
        let text = trimmed(bytes)?;
        // As for replies: more than one line, or what a parse into values refuses, is left to
        // that parse.
        if not_plain(text) {
            return None;
        }
        let top: Top = serde_json::from_str(text).ok()?;
        if top.jsonrpc?.get() != r#""2.0""# {
            return None;
        }
        // A method with an escape (or not a string) is left to the full parse.
        let method = plain_str(top.method?.get())?;
        let id = match top.id {
            Some(raw) => Some((id_of(raw, false)?, span(text, raw.get()))),
            None => None,
        };
        let has_params = top.params.is_some();
        let members = top
            .params
            .map(|Members(m)| {
                m.into_iter()
                    .map(|(k, v)| (span(text, k), span(text, v.get())))
                    .collect()
            })
            .unwrap_or_default();
        Some(RawRequest {
            method_at: span(text, method),
            text: Arc::from(text),
            id,
            has_params,
            members,
            edits: Vec::new(),
            obj: OnceLock::new(),
        })
    }

    /// A request (else a notification).
    pub(crate) fn is_request(&self) -> bool {
        self.id.is_some()
    }

    /// The method.
    pub(crate) fn method(&self) -> &str {
        &self.text[self.method_at.0..self.method_at.1]
    }

    /// The id (`None` for a notification).
    pub(crate) fn id(&self) -> Option<&Value> {
        self.id.as_ref().map(|(id, _)| id)
    }

    /// Put `id` in the received one's place; returns the one it replaces. `Err` with `id`
    /// for a notification (it has no place for one: the caller makes it an ordinary message).
    pub(crate) fn set_id(&mut self, id: Value) -> Result<Value, Value> {
        let Some((now, _)) = &mut self.id else {
            return Err(id);
        };
        if let Some(obj) = self.obj.get_mut() {
            obj.insert("id".into(), id.clone());
        }
        Ok(std::mem::replace(now, id))
    }

    /// The index of the member `key` of `params` (the last, when repeated: as in a parsed
    /// object).
    fn member(&self, key: &str) -> Option<usize> {
        self.members
            .iter()
            .rposition(|((s, e), _)| &self.text[*s..*e] == key)
    }

    /// Does `params` have the member `key`?
    pub(crate) fn has_param(&self, key: &str) -> bool {
        self.member(key).is_some()
    }

    /// The member `key` of `params` when it is a string, read from the text when it has no
    /// escape (else from the parsed object).
    pub(crate) fn param_str(&self, key: &str) -> Option<&str> {
        let at = self.member(key)?;
        if let Some((_, v)) = self.edits.iter().find(|(i, _)| *i == at) {
            return v.as_str();
        }
        let (s, e) = self.members[at].1;
        let text = &self.text[s..e];
        if !text.starts_with('"') {
            return None;
        }
        match plain_str(text) {
            Some(s) => Some(s),
            // A string with an escape is read from the parsed object.
            None => crate::member::of(crate::member::get(self.obj(), "params")?, key)?.as_str(),
        }
    }

    /// Give the member `key` of `params` a new value. `Err` with `value` when `params` has no
    /// such member (the caller makes it an ordinary message to add one).
    pub(crate) fn set_param(&mut self, key: &str, value: Value) -> Result<(), Value> {
        let Some(at) = self.member(key) else {
            return Err(value);
        };
        if let Some(params) = self
            .obj
            .get_mut()
            .and_then(|o| crate::member::get_mut(o, "params"))
            .and_then(Value::as_object_mut)
        {
            params.insert(key.into(), value.clone());
        }
        match self.edits.iter_mut().find(|(i, _)| *i == at) {
            Some((_, v)) => *v = value,
            None => self.edits.push((at, value)),
        }
        Ok(())
    }

    /// `params` is there.
    pub(crate) fn has_params(&self) -> bool {
        self.has_params
    }

    /// The whole object (parsed on first use), with what was changed.
    pub(crate) fn obj(&self) -> &Map<String, Value> {
        self.obj.get_or_init(|| {
            let mut obj: Map<String, Value> =
                serde_json::from_str(&self.text).expect("read as a JSON object already");
            if let Some((id, _)) = &self.id {
                obj.insert("id".into(), id.clone());
            }
            if let Some(params) = obj.get_mut("params").and_then(Value::as_object_mut) {
                for (at, v) in &self.edits {
                    let (s, e) = self.members[*at].0;
                    params.insert(self.text[s..e].to_string(), v.clone());
                }
            }
            obj
        })
    }

    /// The whole object, owned.
    pub(crate) fn into_obj(self) -> Map<String, Value> {
        self.obj();
        self.obj.into_inner().expect("parsed just now")
    }

    /// The message's text: as received, with the id and the changed members as they are now.
    pub(crate) fn to_json(&self) -> String {
        let mut splices: Vec<((usize, usize), String)> = Vec::with_capacity(1 + self.edits.len());
        if let Some((id, at)) = &self.id {
            splices.push((*at, exact::to_string(id)));
        }
        for (at, v) in &self.edits {
            splices.push((self.members[*at].1, exact::to_string(v)));
        }
        splices.sort_unstable_by_key(|((s, _), _)| *s);
        let grow: usize = splices.iter().map(|(_, t)| t.len()).sum();
        let mut out = String::with_capacity(self.text.len() + grow);
        let mut from = 0;
        for ((s, e), t) in &splices {
            out.push_str(&self.text[from..*s]);
            out.push_str(t);
            from = *e;
        }
        out.push_str(&self.text[from..]);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn plain_requests_are_read_and_written_back_with_only_their_changes() {
        let text = r#" {"params":{"name":"echo__echo","arguments":{"n":1.10,"s":"a\"b"}},"id":7,"method":"tools/call","jsonrpc":"2.0"} "#;
        let mut r = RawRequest::read(text.as_bytes()).unwrap();
        assert!(r.is_request() && r.has_params());
        assert_eq!((r.method(), r.id()), ("tools/call", Some(&json!(7))));
        assert_eq!(r.param_str("name"), Some("echo__echo"));
        assert_eq!(r.param_str("arguments"), None);
        assert!(r.has_param("arguments") && !r.has_param("_meta"));
        assert_eq!(r.to_json(), text.trim());
        assert_eq!(r.set_id(json!(41)), Ok(json!(7)));
        r.set_param("name", json!("echo")).unwrap();
        assert_eq!(r.param_str("name"), Some("echo"));
        assert_eq!(
            r.set_param("_meta", json!({})),
            Err(json!({})),
            "no such member"
        );
        assert_eq!(
            r.to_json(),
            r#"{"params":{"name":"echo","arguments":{"n":1.10,"s":"a\"b"}},"id":41,"method":"tools/call","jsonrpc":"2.0"}"#
        );
        let obj = r.obj();
        assert_eq!(obj["id"], json!(41));
        assert_eq!(obj["params"]["name"], json!("echo"));
        assert_eq!(obj["params"]["arguments"]["s"], json!("a\"b"));
        // Changed after the parse: both the text and the object follow.
        r.set_param("name", json!("other")).unwrap();
        r.set_id(json!("s-1")).unwrap();
        assert_eq!(r.obj()["params"]["name"], json!("other"));
        assert_eq!(r.obj()["id"], json!("s-1"));
        assert!(r
            .to_json()
            .starts_with(r#"{"params":{"name":"other","arguments""#));
        assert!(r.to_json().contains(r#""id":"s-1","#));
    }

    #[test]
    fn notifications_repeated_members_and_escaped_names() {
        let mut n =
            RawRequest::read(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#).unwrap();
        assert!(!n.is_request() && !n.has_params());
        assert_eq!(n.id(), None);
        assert_eq!(n.set_id(json!(1)), Err(json!(1)));
        let r = RawRequest::read(
            br#"{"jsonrpc":"2.0","id":"x","method":"tools/call","params":{"name":"a","name":"b\"c"}}"#,
        )
        .unwrap();
        assert_eq!(r.param_str("name"), Some("b\"c"), "the last one, unescaped");
        let exact = RawRequest::read(br#"{"jsonrpc":"2.0","id":1.50,"method":"ping"}"#).unwrap();
        assert!(exact::is_exact(exact.id().unwrap()));
        assert_eq!(
            exact.to_json(),
            r#"{"jsonrpc":"2.0","id":1.50,"method":"ping"}"#
        );
    }

    #[test]
    fn anything_else_is_left_to_the_full_parse() {
        for text in [
            r#"{"jsonrpc":"2.0","id":1,"result":{}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"ping","extra":true}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"ping","method":"ping"}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"ping","params":{},"params":{}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"ping","params":[1]}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"ping","params":null}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"ping","params":1}"#,
            r#"{"jsonrpc":"2.0","id":null,"method":"ping"}"#,
            r#"{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":7}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"p\u0069ng"}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"a\/b"}"#,
            r#"{"jsonrpc":"1.0","id":1,"method":"ping"}"#,
            r#"{"id":1,"method":"ping"}"#,
            "{\"jsonrpc\":\"2.0\",\n\"id\":1,\"method\":\"ping\"}",
            r#"{"jsonrpc":"2.0","id":1,"method":"ping","params":{"n":1e400}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"ping","params":{"k\"":1}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"ping"} trailing"#,
            r#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#,
            "",
        ] {
            assert!(RawRequest::read(text.as_bytes()).is_none(), "{text}");
        }
    }
}
