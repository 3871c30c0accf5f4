//! A request or notification kept as the text it arrived as: its method, id and the top level
//! of its `params` located at once, the rest parsed only when something looks inside, and
//! written back byte for byte with only what the gateway changed (the id, a member of `params`
//! such as the tool's name upstream) spliced in. A client's call that no hook or rule reads
//! goes upstream without being parsed into a JSON tree and serialised from it.

use crate::exact;
use crate::raw::{id_of, not_plain, push_member, span, splice, trimmed, Members};
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
    /// Where the `}` closing `params` is, when it has a member (members are added before it).
    params_close: Option<usize>,
    /// The members of `params`, in order.
    members: Vec<Member>,
    /// Members added to `params` (after the received ones), in the order they were added.
    added: Vec<(String, Value)>,
    /// The whole object, parsed the first time something reads more than the above; once
    /// parsed, a change made with a new value (the id, a member set, added or taken out) is
    /// made in it too, and a change made in place ([`RawRequest::param_mut`]) drops it.
    obj: OnceLock<Map<String, Value>>,
}

/// One received member of `params`.
#[derive(Debug, Clone)]
struct Member {
    /// Where its key's characters are in the text.
    key: (usize, usize),
    /// Where its value is in the text.
    value: (usize, usize),
    /// Its value, parsed the first time it is read (alone: the rest of the message stays
    /// text), or given anew.
    parsed: OnceLock<Value>,
    /// `parsed` was changed or replaced: the text has it in place of the received value.
    edited: bool,
    /// Taken out of `params` (with every other member of its key): the text leaves it out.
    removed: bool,
}

/// The top level of a request: each member's text.
#[derive(Default)]
struct Top<'a> {
    jsonrpc: Option<&'a RawValue>,
    id: Option<&'a RawValue>,
    method: Option<&'a RawValue>,
    params: Option<Members<'a>>,
}

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
        let members: Vec<Member> = top
            .params
            .map(|Members(m)| {
                m.into_iter()
                    .map(|(k, v)| Member {
                        key: span(text, k),
                        value: span(text, v.get()),
                        parsed: OnceLock::new(),
                        edited: false,
                        removed: false,
                    })
                    .collect()
            })
            .unwrap_or_default();
        // After the last member's value only whitespace comes before the object's end.
        let params_close = members
            .last()
            .and_then(|m| Some(m.value.1 + text[m.value.1..].find('}')?));
        Some(RawRequest {
            method_at: span(text, method),
            text: Arc::from(text),
            id,
            has_params,
            params_close,
            members,
            added: Vec::new(),
            obj: OnceLock::new(),
        })
    }

    /// The text it came as (shared).
    pub(crate) fn text(&self) -> Arc<str> {
        Arc::clone(&self.text)
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
    /// object), unless it was taken out.
    fn member(&self, key: &str) -> Option<usize> {
        self.members
            .iter()
            .rposition(|m| !m.removed && self.key(m) == key)
    }

    /// A received member's key.
    fn key(&self, m: &Member) -> &str {
        &self.text[m.key.0..m.key.1]
    }

    /// The members of `params` as they are now, in order: the received ones left in (a
    /// repeated key once, with its last value, where a parsed object has it: at its first
    /// place), then the added ones. Each received value parsed alone, on first use.
    pub(crate) fn entries(&self) -> Vec<(&str, &Value)> {
        let mut out: Vec<(&str, &Value)> =
            Vec::with_capacity(self.members.len() + self.added.len());
        for m in self.members.iter().filter(|m| !m.removed) {
            let key = self.key(m);
            if out.iter().any(|(k, _)| *k == key) {
                continue;
            }
            let at = self.member(key).expect("a member left in");
            out.push((key, self.value(at)));
        }
        out.extend(self.added.iter().map(|(k, v)| (k.as_str(), v)));
        out
    }

    /// The index of the added member `key`.
    fn added(&self, key: &str) -> Option<usize> {
        self.added.iter().position(|(k, _)| k == key)
    }

    /// Does `params` have the member `key`?
    pub(crate) fn has_param(&self, key: &str) -> bool {
        self.member(key).is_some() || self.added(key).is_some()
    }

    /// The value of the received member `at`, parsed (alone) on first use.
    fn value(&self, at: usize) -> &Value {
        let m = &self.members[at];
        m.parsed.get_or_init(|| {
            serde_json::from_str(&self.text[m.value.0..m.value.1])
                .expect("read as a JSON value already")
        })
    }

    /// The member `key` of `params`, parsed alone (the rest of the message stays text).
    pub(crate) fn param(&self, key: &str) -> Option<&Value> {
        if let Some(at) = self.member(key) {
            return Some(self.value(at));
        }
        self.added(key).map(|i| &self.added[i].1)
    }

    /// The member `key` of `params`, to change in place (the text then has its new value; a
    /// whole object parsed already is dropped, to be parsed again when next read, as the
    /// change comes after this returns).
    pub(crate) fn param_mut(&mut self, key: &str) -> Option<&mut Value> {
        if let Some(at) = self.member(key) {
            self.obj.take();
            self.value(at);
            let m = &mut self.members[at];
            m.edited = true;
            return m.parsed.get_mut();
        }
        let i = self.added(key)?;
        self.obj.take();
        Some(&mut self.added[i].1)
    }

    /// The member `key` of `params` when it is a string, read from the text when it has no
    /// escape (else parsed alone).
    pub(crate) fn param_str(&self, key: &str) -> Option<&str> {
        let Some(at) = self.member(key) else {
            return self.param(key)?.as_str();
        };
        let m = &self.members[at];
        if let Some(v) = m.parsed.get() {
            return v.as_str();
        }
        let text = &self.text[m.value.0..m.value.1];
        if !text.starts_with('"') {
            return None;
        }
        plain_str(text).or_else(|| self.value(at).as_str())
    }

    /// Give the member `key` of `params` a new value, adding it after the others when there is
    /// none. `Err` with `value` when it cannot be written into the text (`params` absent or
    /// empty: the caller makes it an ordinary message).
    pub(crate) fn set_param(&mut self, key: &str, value: Value) -> Result<(), Value> {
        if let Some(params) = self.parsed_params() {
            params.insert(key.into(), value.clone());
        }
        if let Some(at) = self.member(key) {
            let m = &mut self.members[at];
            m.parsed = OnceLock::from(value);
            m.edited = true;
        } else if let Some(i) = self.added(key) {
            self.added[i].1 = value;
        } else if self.params_close.is_some() {
            self.added.push((key.to_string(), value));
        } else {
            return Err(value);
        }
        Ok(())
    }

    /// Take the member `key` out of `params` (the others keep their order); `None` when there
    /// is none. A received member stays in the text but is left out of what is written.
    pub(crate) fn remove_param(&mut self, key: &str) -> Option<Value> {
        if let Some(params) = self.parsed_params() {
            params.shift_remove(key);
        }
        if let Some(at) = self.member(key) {
            let value = self.value(at).clone();
            let text = Arc::clone(&self.text);
            for m in &mut self.members {
                if &text[m.key.0..m.key.1] == key {
                    m.removed = true;
                }
            }
            return Some(value);
        }
        let i = self.added(key)?;
        Some(self.added.remove(i).1)
    }

    /// `params` of the whole object, when that is parsed already (a change made with a new
    /// value is made there too, so it stays the message as it is now).
    fn parsed_params(&mut self) -> Option<&mut Map<String, Value>> {
        crate::member::get_mut(self.obj.get_mut()?, "params")?.as_object_mut()
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
                for m in self.members.iter().filter(|m| m.edited && !m.removed) {
                    let value = m.parsed.get().expect("an edited member has its value");
                    params.insert(self.key(m).to_string(), value.clone());
                }
                for m in self.members.iter().filter(|m| m.removed) {
                    params.shift_remove(self.key(m));
                }
                for (k, v) in &self.added {
                    params.insert(k.clone(), v.clone());
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

    /// The message's text: as received, with the id and the changed members as they are now,
    /// and the added members before the end of `params`.
    pub(crate) fn to_json(&self) -> String {
        let mut splices: Vec<((usize, usize), String)> = Vec::with_capacity(2);
        if let Some((id, at)) = &self.id {
            splices.push((*at, exact::to_string(id)));
        }
        if let (Some(close), true) = (self.params_close, self.members.iter().any(|m| m.removed)) {
            // A member taken out: the inside of `params` is written anew, member by member
            // (each received one left in as its text, or its new value).
            let first_key = self.members[0].key.0 - 1;
            let open = self.text[..first_key]
                .rfind('{')
                .expect("params is an object")
                + 1;
            let mut inside = String::new();
            for m in self.members.iter().filter(|m| !m.removed) {
                if !inside.is_empty() {
                    inside.push(',');
                }
                inside.push_str(&self.text[m.key.0 - 1..m.key.1 + 1]);
                inside.push(':');
                match m.parsed.get().filter(|_| m.edited) {
                    Some(value) => inside.push_str(&exact::to_string(value)),
                    None => inside.push_str(&self.text[m.value.0..m.value.1]),
                }
            }
            for (k, v) in &self.added {
                let comma = !inside.is_empty();
                push_member(&mut inside, comma, k, &exact::to_string(v));
            }
            splices.push(((open, close), inside));
            return splice(&self.text, splices);
        }
        for m in self.members.iter().filter(|m| m.edited) {
            let value = m.parsed.get().expect("an edited member has its value");
            splices.push((m.value, exact::to_string(value)));
        }
        if let (Some(close), false) = (self.params_close, self.added.is_empty()) {
            let mut tail = String::new();
            for (k, v) in &self.added {
                push_member(&mut tail, true, k, &exact::to_string(v));
            }
            splices.push(((close, close), tail));
        }
        splice(&self.text, splices)
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
        assert_eq!(r.set_param("_meta", json!({})), Ok(()), "added");
        assert_eq!(
            r.to_json(),
            r#"{"params":{"name":"echo","arguments":{"n":1.10,"s":"a\"b"},"_meta":{}},"id":41,"method":"tools/call","jsonrpc":"2.0"}"#
        );
        assert_eq!(r.remove_param("_meta"), Some(json!({})));
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
    fn members_are_parsed_alone_changed_added_and_taken_out_in_the_text() {
        let text = r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{"reason":"why","n":1.10},"_meta":{"progressToken":1.50} }}"#;
        let mut r = RawRequest::read(text.as_bytes()).unwrap();
        assert_eq!(
            r.param("arguments"),
            Some(&json!({"reason": "why", "n": 1.1}))
        );
        assert_eq!(r.param("nothing"), None);
        assert!(r.obj.get().is_none(), "one member parsed, not the message");
        assert_eq!(r.to_json(), text, "read, not changed");
        // Changed in place: that member is written anew, nothing else.
        r.param_mut("arguments")
            .and_then(Value::as_object_mut)
            .unwrap()
            .shift_remove("reason");
        assert_eq!(
            r.to_json(),
            r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{"n":1.1},"_meta":{"progressToken":1.50} }}"#
        );
        // Added before the end of `params`, in order; set again in its place.
        r.set_param("x-a", json!({"k": "v"})).unwrap();
        r.set_param("x-b", json!(2)).unwrap();
        r.set_param("x-a", json!("again")).unwrap();
        assert!(r.has_param("x-a") && r.has_param("x-b"));
        assert_eq!(r.param_str("x-a"), Some("again"));
        let added = r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{"n":1.1},"_meta":{"progressToken":1.50} ,"x-a":"again","x-b":2}}"#;
        assert_eq!(r.to_json(), added);
        let parsed: Value = serde_json::from_str(added).unwrap();
        assert_eq!(Value::Object(r.clone().into_obj()), parsed);
        // An added member leaves the text as it came.
        assert_eq!(r.remove_param("x-a"), Some(json!("again")));
        assert_eq!(r.remove_param("x-a"), None);
        assert!(!r.has_param("x-a"));
        assert!(r
            .to_json()
            .ends_with(r#"{"progressToken":1.50} ,"x-b":2}}"#));
        // Once parsed whole, the object follows every change.
        assert_eq!(r.obj()["params"]["x-b"], json!(2));
        r.set_param("x-c", json!(true)).unwrap();
        assert_eq!(r.obj()["params"]["x-c"], json!(true));
        assert_eq!(r.remove_param("x-b"), Some(json!(2)));
        assert!(r.obj()["params"].get("x-b").is_none());
        *r.param_mut("name").unwrap() = json!("renamed");
        assert_eq!(r.obj()["params"]["name"], json!("renamed"));
        // So does taking out a received member (the object was parsed before).
        assert_eq!(r.remove_param("_meta"), Some(json!({"progressToken": 1.5})));
        assert!(r.obj()["params"].get("_meta").is_none());
        let again: Value = serde_json::from_str(&r.to_json()).unwrap();
        assert_eq!(Value::Object(r.obj().clone()), again);
        assert_eq!(
            r.to_json(),
            r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"renamed","arguments":{"n":1.1},"x-c":true}}"#
        );
    }

    /// A received member taken out is left out of the text (each of a repeated key, as a
    /// parsed object has one), whichever its place; the others keep their text, and what is
    /// written is what the parsed object holds.
    #[test]
    fn received_members_are_taken_out_of_the_text() {
        let text = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params": { "a" : 1.10 , "b":{"x":[1]}, "a":2.50,"c":"z" } }"#;
        let cases: [(&[&str], &str); 6] = [
            (
                &["a"],
                r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params": {"b":{"x":[1]},"c":"z"} }"#,
            ),
            (
                &["b"],
                r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params": {"a":1.10,"a":2.50,"c":"z"} }"#,
            ),
            (
                &["c"],
                r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params": {"a":1.10,"b":{"x":[1]},"a":2.50} }"#,
            ),
            (
                &["a", "c"],
                r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params": {"b":{"x":[1]}} }"#,
            ),
            (
                &["a", "b", "c"],
                r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params": {} }"#,
            ),
            (&["nothing"], text),
        ];
        for (keys, want) in cases {
            let mut r = RawRequest::read(text.as_bytes()).unwrap();
            let mut parsed: Map<String, Value> = serde_json::from_str(text).unwrap();
            for key in keys {
                let from_tree = parsed["params"].as_object_mut().unwrap().shift_remove(*key);
                assert_eq!(r.remove_param(key), from_tree, "{key}");
                assert!(!r.has_param(key) && r.param(key).is_none());
            }
            assert_eq!(r.to_json(), want, "{keys:?}");
            let written: Value = serde_json::from_str(&r.to_json()).unwrap();
            assert_eq!(written, Value::Object(parsed.clone()), "{keys:?}");
            assert_eq!(
                Value::Object(r.obj().clone()),
                Value::Object(parsed),
                "{keys:?}"
            );
        }
        // Taken out, then set again: it comes back after the others, as in a parsed object;
        // an edit to another member is written in its place.
        let mut r = RawRequest::read(text.as_bytes()).unwrap();
        r.remove_param("a");
        *r.param_mut("c").unwrap() = json!("y");
        r.set_param("a", json!(3)).unwrap();
        assert_eq!(
            r.to_json(),
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params": {"b":{"x":[1]},"c":"y","a":3} }"#
        );
        assert_eq!(r.param("a"), Some(&json!(3)));
        let entries: Vec<(&str, &Value)> = r.entries();
        assert_eq!(
            entries,
            vec![
                ("b", &json!({"x": [1]})),
                ("c", &json!("y")),
                ("a", &json!(3))
            ]
        );
        // Entries of a repeated key: once, with the last value.
        let r = RawRequest::read(text.as_bytes()).unwrap();
        let keys: Vec<(&str, &Value)> = r.entries();
        assert_eq!(
            keys,
            vec![
                ("a", &json!(2.5)),
                ("b", &json!({"x": [1]})),
                ("c", &json!("z"))
            ]
        );
    }

    #[test]
    fn a_member_cannot_be_added_to_params_without_one() {
        for text in [
            r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"ping","params":{ }}"#,
        ] {
            let mut r = RawRequest::read(text.as_bytes()).unwrap();
            assert_eq!(r.set_param("k", json!(1)), Err(json!(1)), "{text}");
            assert_eq!(r.param_mut("k"), None);
            assert_eq!(r.to_json(), text);
        }
        // A string member with an escape is parsed alone to be read.
        let r = RawRequest::read(br#"{"jsonrpc":"2.0","id":1,"method":"m","params":{"s":"a\nb"}}"#)
            .unwrap();
        assert_eq!(r.param_str("s"), Some("a\nb"));
        assert!(r.obj.get().is_none());
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
