//! A reply kept as the text it arrived as: its id read at once, the rest parsed only when
//! something looks inside, and written back byte for byte with only the id spliced in. What an
//! upstream answers usually goes back to the client untouched; this spares it a parse into a
//! JSON tree and a serialisation of that tree.

use crate::exact;
use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde_json::value::RawValue;
use serde_json::{Map, Value};
use std::fmt;
use std::sync::{Arc, OnceLock};

/// A success or error response as received: `{"jsonrpc":"2.0","id":…,"result"|"error":…}` in
/// any key order, on one line, with nothing else at its top level.
#[derive(Debug, Clone)]
pub(crate) struct RawReply {
    /// The reply as received (outer whitespace trimmed).
    text: Arc<str>,
    /// Where the received id is in `text`.
    id_at: (usize, usize),
    /// The id now (the received one, or the one put in its place).
    id: Value,
    /// `error` rather than `result`.
    error: bool,
    /// Where the `result` (or `error`) is in `text`.
    member_at: (usize, usize),
    /// The whole object, parsed the first time something reads more than the id.
    obj: OnceLock<Map<String, Value>>,
}

/// The top level of a reply: each member's text, `None` when the text is not a plain reply.
#[derive(Default)]
struct Top<'a> {
    jsonrpc: Option<&'a RawValue>,
    id: Option<&'a RawValue>,
    result: Option<&'a RawValue>,
    error: Option<&'a RawValue>,
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
        f.write_str("a JSON-RPC reply")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Top<'de>, A::Error> {
        let mut top = Top::default();
        // A key with escapes cannot be borrowed: not a plain reply (parsed whole instead).
        while let Some(key) = map.next_key::<&'de str>()? {
            let slot = match key {
                "jsonrpc" => &mut top.jsonrpc,
                "id" => &mut top.id,
                "result" => &mut top.result,
                "error" => &mut top.error,
                _ => return Err(de::Error::custom("not a plain reply")),
            };
            if slot.replace(map.next_value()?).is_some() {
                return Err(de::Error::custom("a repeated key"));
            }
        }
        Ok(top)
    }
}

/// Is the JSON text `text` not one to keep as it is: on more than one line (a newline or carriage
/// return, which only whitespace can hold), or holding what its syntax allows but a parse into
/// values refuses: a number out of an f64's range (an exponent, or 300 digits and more),
/// nesting deeper than 100 (the parse stops at 128), or a `\u` escape (a lone surrogate)?
/// Strings are skipped but for their escapes; `true` and `false` are the only other words with
/// an `e`. One pass over the bytes, jumping through strings from escape to escape.
pub(crate) fn not_plain(text: &str) -> bool {
    let bytes = text.as_bytes();
    let mut depth = 0usize;
    let mut at = 0;
    while at < bytes.len() {
        let b = bytes[at];
        at += 1;
        match b {
            b'"' => {
                // Inside a string only its end and its escapes matter: jump from one to the next.
                loop {
                    let Some(off) = quote_or_escape(&bytes[at..]) else {
                        return false;
                    };
                    at += off + 1;
                    if bytes[at - 1] == b'"' {
                        break;
                    }
                    match bytes.get(at) {
                        Some(b'u') => return true,
                        Some(_) => at += 1,
                        None => return false,
                    }
                }
            }
            b'\n' | b'\r' => return true,
            b'[' | b'{' => {
                depth += 1;
                if depth > 100 {
                    return true;
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            b'0'..=b'9' => {
                // A number: its digits (a fraction's too) counted, and an exponent after them.
                let mut digits = 1;
                while let Some(&c) = bytes.get(at) {
                    match c {
                        b'0'..=b'9' => digits += 1,
                        b'.' => {}
                        b'e' | b'E' => return true,
                        _ => break,
                    }
                    at += 1;
                }
                if digits >= 300 {
                    return true;
                }
            }
            _ => {}
        }
    }
    false
}

/// Where the first `"` or `\` in `bytes` is. Most strings of a message are short (keys,
/// names): a byte loop finds their end for less than the vector search's setup costs, which
/// takes over past the first 32 bytes.
fn quote_or_escape(bytes: &[u8]) -> Option<usize> {
    const SHORT: usize = 32;
    let head = &bytes[..bytes.len().min(SHORT)];
    if let Some(at) = head.iter().position(|&c| c == b'"' || c == b'\\') {
        return Some(at);
    }
    if bytes.len() <= SHORT {
        return None;
    }
    memchr::memchr2(b'"', b'\\', &bytes[SHORT..]).map(|at| at + SHORT)
}

/// `key`'s boolean when it is the last member of the object `text` (where servers put
/// `isError`), read from the tail alone; `None` when the tail is not that. Sure because the
/// text is valid JSON: a quote after a comma or brace is not inside a string, so it opens a
/// key, and the brace that ends the text closes the outermost object.
fn last_member_bool(text: &str, key: &str) -> Option<bool> {
    let t = text.trim_end().strip_suffix('}')?.trim_end();
    let (t, value) = match t.strip_suffix("true") {
        Some(t) => (t, true),
        None => (t.strip_suffix("false")?, false),
    };
    let t = t.trim_end().strip_suffix(':')?.trim_end();
    let t = t.strip_suffix('"')?.strip_suffix(key)?.strip_suffix('"')?;
    matches!(t.trim_end().chars().last(), Some(',' | '{')).then_some(value)
}

/// Finds a boolean member of an object, skipping everything else (the last of repeated keys
/// wins, as in a parsed object).
struct FindBool<'k>(&'k str);

impl<'de> Visitor<'de> for FindBool<'_> {
    type Value = Option<bool>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Option<bool>, A::Error> {
        let mut found = None;
        while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            if key == self.0 {
                found = map.next_value::<Value>()?.as_bool();
            } else {
                map.next_value::<de::IgnoredAny>()?;
            }
        }
        Ok(found)
    }
}

/// The members of an object: each key (without escapes) and its value's text.
pub(crate) struct Members<'a>(pub(crate) Vec<(&'a str, &'a RawValue)>);

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

/// Write the member `"key":value` (`value` as JSON text) at the end of `out`, after a comma when
/// `comma`.
pub(crate) fn push_member(out: &mut String, comma: bool, key: &str, value: &str) {
    if comma {
        out.push(',');
    }
    out.push_str(&serde_json::to_string(key).expect("a string always serialises"));
    out.push(':');
    out.push_str(value);
}

/// `text` with each span of `splices` (they do not overlap) replaced by its text.
pub(crate) fn splice(text: &str, mut splices: Vec<((usize, usize), String)>) -> String {
    splices.sort_unstable_by_key(|((s, _), _)| *s);
    let grow: usize = splices.iter().map(|(_, t)| t.len()).sum();
    let mut out = String::with_capacity(text.len() + grow);
    let mut from = 0;
    for ((s, e), t) in &splices {
        out.push_str(&text[from..*s]);
        out.push_str(t);
        from = *e;
    }
    out.push_str(&text[from..]);
    out
}

/// `bytes` as UTF-8 text without JSON's whitespace around it (`trim_ascii` would also take a
/// form feed, which JSON refuses), or `None`.
pub(crate) fn trimmed(bytes: &[u8]) -> Option<&str> {
    let json_space = |c: char| matches!(c, ' ' | '\t' | '\n' | '\r');
    Some(std::str::from_utf8(bytes).ok()?.trim_matches(json_space))
}

/// Where `part`, a slice of `text`, is in it.
pub(crate) fn span(text: &str, part: &str) -> (usize, usize) {
    let start = part.as_ptr() as usize - text.as_ptr() as usize;
    (start, start + part.len())
}

/// A received id as a value: a string, or a number (an [exact id](crate::exact) when
/// `serde_json` would write it back otherwise); `null` too when `null_ok`. `None` for anything
/// else.
pub(crate) fn id_of(raw: &RawValue, null_ok: bool) -> Option<Value> {
    match serde_json::from_str::<Value>(raw.get()).ok()? {
        Value::Number(n) if !(n.is_u64() || n.is_i64()) => exact::keep(&n, raw.get()),
        v @ (Value::Number(_) | Value::String(_)) => Some(v),
        Value::Null if null_ok => Some(Value::Null),
        _ => None,
    }
}

impl RawReply {
    /// Read `bytes` as a plain reply, or `None` (the caller parses it whole, which also finds
    /// what is wrong with it, if anything).
    pub(crate) fn read(bytes: &[u8]) -> Option<RawReply> {
        let text = trimmed(bytes)?;
        // A reply on more than one line (it is written back as it is, into SSE events and stdio
        // lines), or with what the syntax check below lets through but the parse of the whole
        // reply refuses (a number too large for an f64, nesting past its depth limit, a lone
        // surrogate escape), is left to that parse, which gives its error.
        if not_plain(text) {
            return None;
        }
        let top: Top = serde_json::from_str(text).ok()?;
        if top.jsonrpc?.get() != r#""2.0""# {
            return None;
        }
        let (error, member) = match (top.result, top.error) {
            (Some(r), None) => (false, r),
            (None, Some(e)) => (true, e),
            _ => return None,
        };
        let raw_id = top.id?;
        let id = id_of(raw_id, true)?;
        Some(RawReply {
            id_at: span(text, raw_id.get()),
            member_at: span(text, member.get()),
            text: Arc::from(text),
            id,
            error,
            obj: OnceLock::new(),
        })
    }

    /// An error response (else a success).
    pub(crate) fn is_error(&self) -> bool {
        self.error
    }

    /// The boolean member `key` of the `result` (or `error`) object, read from the text without
    /// building it (and without reading at all when the name is nowhere in it and no escape
    /// could spell it). `None` when it is absent or not a boolean.
    pub(crate) fn member_bool(&self, key: &str) -> Option<bool> {
        let member = self.member_text();
        // No `\u` escape could spell it: a reply kept as text has none.
        if !member.contains(key) {
            return None;
        }
        if let Some(last) = last_member_bool(member, key) {
            return Some(last);
        }
        let mut de = serde_json::Deserializer::from_str(member);
        de.deserialize_any(FindBool(key)).ok().flatten()
    }

    /// The `result` (or `error`) as received (it has no `\u` escape: [`RawReply::read`] leaves
    /// such a reply to the full parse).
    pub(crate) fn member_text(&self) -> &str {
        &self.text[self.member_at.0..self.member_at.1]
    }

    /// The id.
    pub(crate) fn id(&self) -> &Value {
        &self.id
    }

    /// Put `id` in the received one's place; returns the one it replaces.
    pub(crate) fn set_id(&mut self, id: Value) -> Value {
        if let Some(obj) = self.obj.get_mut() {
            obj.insert("id".into(), id.clone());
        }
        std::mem::replace(&mut self.id, id)
    }

    /// The whole object (parsed on first use).
    pub(crate) fn obj(&self) -> &Map<String, Value> {
        self.obj.get_or_init(|| {
            let mut obj: Map<String, Value> =
                serde_json::from_str(&self.text).expect("read as a JSON object already");
            obj.insert("id".into(), self.id.clone());
            obj
        })
    }

    /// The whole object, owned.
    pub(crate) fn into_obj(self) -> Map<String, Value> {
        self.obj();
        self.obj.into_inner().expect("parsed just now")
    }

    /// The text, where the received id is in it, and the id to write there (what
    /// [`RawReply::to_json`] joins).
    pub(crate) fn pieces(&self) -> (&Arc<str>, (usize, usize), &Value) {
        (&self.text, self.id_at, &self.id)
    }

    /// This success reply with members added to its `result` object, still as text: each of
    /// `absent` that `result` lacks, at its end in order, then `meta` put into its `_meta`
    /// object (which is added last when absent, and left alone when it is not an object). The
    /// same members, in the same places, as the change made to a parsed reply
    /// ([`crate::Message::extend_result`]); the rest of the text stays as received. `None` when
    /// the reply is an error, its `result` is not an object, or a key that matters here comes
    /// with an escape or twice (the caller changes the parsed reply instead).
    pub(crate) fn extended(
        &self,
        absent: &[(&str, Value)],
        meta: (&str, &Value),
    ) -> Option<RawReply> {
        if self.error {
            return None;
        }
        let (start, end) = self.member_at;
        let result = &self.text[start..end];
        if !result.starts_with('{') {
            return None;
        }
        let Members(members) = serde_json::from_str(result).ok()?;
        let count = |key: &str| members.iter().filter(|(k, _)| *k == key).count();
        if count("_meta") > 1 || absent.iter().any(|(k, _)| count(k) > 1) {
            return None;
        }
        let id = exact::to_string(&self.id);
        let id_len = id.len();
        let mut splices: Vec<((usize, usize), String)> = Vec::with_capacity(3);
        splices.push((self.id_at, id));
        let mut tail = String::new();
        let mut first = members.is_empty();
        let mut push = |tail: &mut String, key: &str, value: &str| {
            push_member(tail, !first, key, value);
            first = false;
        };
        for (key, value) in absent {
            if count(key) == 0 {
                push(&mut tail, key, &exact::to_string(value));
            }
        }
        let existing = members
            .iter()
            .find(|(k, _)| *k == "_meta")
            .map(|(_, raw)| raw.get());
        // A `_meta` that is not an object is left alone.
        if existing.is_none_or(|raw| raw.starts_with('{')) {
            let mut m: Map<String, Value> = match existing {
                Some(raw) => serde_json::from_str(raw).ok()?,
                None => Map::new(),
            };
            m.insert(meta.0.to_string(), meta.1.clone());
            let m = serde_json::to_string(&m).expect("a JSON map always serialises");
            match existing {
                Some(raw) => splices.push((span(&self.text, raw), m)),
                None => push(&mut tail, "_meta", &m),
            }
        }
        // After the last member only whitespace comes before the object's closing brace, the
        // result's last character.
        if !tail.is_empty() {
            splices.push(((end - 1, end - 1), tail));
        }
        // What is written in must keep the text plain (serde_json writes a control character
        // as a `\u` escape, which a reply kept as text never holds).
        if splices.iter().any(|(_, t)| not_plain(t)) {
            return None;
        }
        // Where a place of the old text is in the new one: moved by every splice before it (in
        // any order; `splice` sorts them).
        let moved = |at: usize| -> usize {
            splices
                .iter()
                .filter(|((_, e), _)| *e <= at)
                .fold(at, |p, ((s, e), t)| p + t.len() - (e - s))
        };
        let id_start = moved(self.id_at.0);
        let member_at = (moved(start), moved(end));
        let text = splice(&self.text, splices);
        Some(RawReply {
            text: Arc::from(text),
            id_at: (id_start, id_start + id_len),
            id: self.id.clone(),
            error: false,
            member_at,
            obj: OnceLock::new(),
        })
    }

    /// The reply's text: as received, the id as it is now.
    pub(crate) fn to_json(&self) -> String {
        let (start, end) = self.id_at;
        let id = exact::to_string(&self.id);
        let mut out = String::with_capacity(self.text.len() - (end - start) + id.len());
        out.push_str(&self.text[..start]);
        out.push_str(&id);
        out.push_str(&self.text[end..]);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn plain_replies_are_read_and_written_back_as_received() {
        let text = r#" {"result":{"n":1.10,"s":"a\"b"},"id":7,"jsonrpc":"2.0"} "#;
        let mut r = RawReply::read(text.as_bytes()).unwrap();
        assert!(!r.is_error());
        assert_eq!(r.id(), &json!(7));
        assert_eq!(
            r.to_json(),
            r#"{"result":{"n":1.10,"s":"a\"b"},"id":7,"jsonrpc":"2.0"}"#
        );
        assert_eq!(r.set_id(json!("client-1")), json!(7));
        assert_eq!(
            r.to_json(),
            r#"{"result":{"n":1.10,"s":"a\"b"},"id":"client-1","jsonrpc":"2.0"}"#
        );
        assert_eq!(r.obj().get("id"), Some(&json!("client-1")));
        assert_eq!(r.member_bool("isError"), None);
        assert_eq!(r.member_text(), r#"{"n":1.10,"s":"a\"b"}"#);
        assert_eq!(r.obj().get("result"), Some(&json!({"n": 1.1, "s": "a\"b"})));
        // Set after the parse: both the text and the object follow.
        r.set_id(json!(8));
        assert_eq!(r.obj().get("id"), Some(&json!(8)));
        assert!(r.to_json().contains(r#""id":8,"#));
        for (result, want) in [
            (
                r#"{"isError":true,"content":[{"isError":false}]}"#,
                Some(true),
            ),
            (
                r#"{"content":[{"isError":true}],"isError":false}"#,
                Some(false),
            ),
            (r#"{"content":[{"isError":true}]}"#, None),
            (r#"{"isError":"yes"}"#, None),
            (r#"{"isError":false,"isError":true}"#, Some(true)),
            (r#"{"isError":true,"isError":false}"#, Some(false)),
            (r#"{ "content" : [] , "isError" : true }"#, Some(true)),
            (r#"{"content":[{"isError":true}]}"#, None),
            (r#"{"content":{"isError":true}}"#, None),
            (r#"{"text":"x\",\"isError\":true}"}"#, None),
            (r#"{"text":"x\"", "isError":false}"#, Some(false)),
            (r#"{"notisError":true}"#, None),
            (r#"["isError"]"#, None),
        ] {
            let text = format!(r#"{{"jsonrpc":"2.0","id":1,"result":{result}}}"#);
            let r = RawReply::read(text.as_bytes()).unwrap();
            assert_eq!(r.member_bool("isError"), want, "{result}");
        }
        let e = RawReply::read(br#"{"jsonrpc":"2.0","id":null,"error":{"code":1}}"#).unwrap();
        assert!(e.is_error());
        assert_eq!(e.id(), &Value::Null);
    }

    #[test]
    fn an_exact_id_is_kept_and_written_as_received() {
        let r = RawReply::read(br#"{"jsonrpc":"2.0","id":1.50,"result":{}}"#).unwrap();
        assert!(exact::is_exact(r.id()));
        assert_eq!(r.to_json(), r#"{"jsonrpc":"2.0","id":1.50,"result":{}}"#);
    }

    #[test]
    fn anything_else_is_left_to_the_full_parse() {
        for text in [
            r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#,
            r#"{"jsonrpc":"2.0","method":"notifications/x"}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":{},"extra":true}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":{},"error":{}}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":{},"result":{}}"#,
            r#"{"jsonrpc":"2.0","id":1}"#,
            r#"{"jsonrpc":"1.0","id":1,"result":{}}"#,
            r#"{"id":1,"result":{}}"#,
            r#"{"jsonrpc":"2.0","id":{"a":1},"result":{}}"#,
            r#"{"jsonrpc":"2.0","id":[1],"result":{}}"#,
            "{\"jsonrpc\":\"2.0\",\n\"id\":1,\"result\":{}}",
            r#"{"jsonrpc":"2.0","id":1,"result":{}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":{}} trailing"#,
            r#"{"jsonr\u0070c":"2.0","id":1,"result":{}}"#,
            r#"[{"jsonrpc":"2.0","id":1,"result":{}}]"#,
            r#"{"jsonrpc":"2.0","id":1,"result":{"n":1e400}}"#,
            "\u{c}{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}",
            r#"{"jsonrpc":"2.0","id":1,"result":{"\u0069sError":true}}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":{"n":-2.5E+3}}"#,
            "",
        ] {
            assert!(RawReply::read(text.as_bytes()).is_none(), "{text}");
        }
        assert!(RawReply::read(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":\"\xff\"}").is_none());
    }
}

#[cfg(test)]
mod syntax_tests {
    use super::not_plain;

    #[test]
    fn lines_and_what_a_parse_into_values_may_refuse_are_found() {
        assert!(not_plain(r#"{"n":1e400}"#));
        assert!(not_plain(r#"[1.5E3]"#));
        assert!(not_plain(&format!("[{}]", "9".repeat(310))));
        assert!(not_plain(&format!(
            "{}{}",
            "[".repeat(101),
            "]".repeat(101)
        )));
        assert!(not_plain(r#"{"s":"\ud800"}"#));
        assert!(not_plain("{\"a\":1,\n\"b\":2}"));
        assert!(not_plain("{\"a\":1,\r\"b\":2}"));
        assert!(!not_plain(&format!(
            "{}{}",
            "[{\"a\":".repeat(50),
            "1}]".repeat(50)
        )));
        assert!(!not_plain(
            r#"{"text":"1e400 \" 2E9 [[[[","ok":true,"no":false,"n":12.5}"#
        ));
        assert!(!not_plain(&format!(r#"{{"s":"{}"}}"#, "9".repeat(310))));
        assert!(!not_plain(r#"{"a":"\\","e":null,"b":"\\u"}"#));
        // Long strings: an escape far inside is still seen, and what a string holds is skipped.
        let long = "x".repeat(5000);
        assert!(not_plain(&format!(r#"{{"s":"{long}\u0041{long}"}}"#)));
        assert!(!not_plain(&format!(
            r#"{{"s":"{long}\n\"1e9[[[{long}","n":1}}"#
        )));
        assert!(not_plain(&format!(r#"{{"s":"{long}","n":1e9}}"#)));
        // Around the end of the byte loop (32 bytes) and the start of the vector search.
        for n in 28..38 {
            let x = "x".repeat(n);
            assert!(not_plain(&format!(r#"{{"s":"{x}\u0041"}}"#)), "{n}");
            assert!(not_plain(&format!(r#"{{"s":"{x}","n":1e9}}"#)), "{n}");
            assert!(!not_plain(&format!(r#"{{"s":"{x}\"1e9","n":1}}"#)), "{n}");
            assert!(!not_plain(&format!(r#"{{"s":"{x}"}}"#)), "{n}");
        }
    }
}
