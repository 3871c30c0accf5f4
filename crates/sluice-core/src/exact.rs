//! Numeric request ids kept byte-for-byte.
//!
//! `serde_json` (without `arbitrary_precision`) reads a number that is not an `i64`/`u64` as an
//! `f64`, so `123456789012345678901234567890` would come back as `1.2345678901234568e29` and
//! `1.10` as `1.1`: the client could not match the reply. [`Message::parse`] keeps such an id
//! as an *exact id*, a one-key object `{"$sluice::exact-number": "<text as sent>"}` no client can
//! send (an object is not a valid id). Code that only passes ids along (copies, map keys,
//! `set_id`) carries it unchanged; [`Message::to_json`] and the writers here put the text back
//! in place of the object. Integer ids, string ids and numbers that already read back as sent
//! never take this form, so nothing changes for them.
//!
//! The gateway's own numbers (and every number outside an `id`) keep `serde_json`'s model:
//! turning on `arbitrary_precision` for the whole build would change how every number is read
//! by every crate (floats in untagged enums and `deserialize_any` visitors stop reading, as in
//! `jsonwebtoken`'s `exp`), and cost an allocation per number.
//!
//! [`Message::parse`]: crate::Message::parse
//! [`Message::to_json`]: crate::Message::to_json

use serde::ser::{SerializeMap, SerializeSeq};
use serde::{Serialize, Serializer};
use serde_json::value::RawValue;
use serde_json::{Map, Number, Value};

/// The key of an exact id's object.
const KEY: &str = "$sluice::exact-number";

/// Is `text` a JSON number (RFC 8259 grammar, nothing around it)?
fn is_number(text: &str) -> bool {
    let b = text.as_bytes();
    let mut i = usize::from(b.first() == Some(&b'-'));
    let digits = |i: &mut usize| {
        let start = *i;
        while b.get(*i).is_some_and(u8::is_ascii_digit) {
            *i += 1;
        }
        *i > start
    };
    match b.get(i) {
        Some(b'0') => i += 1,
        Some(b'1'..=b'9') => {
            digits(&mut i);
        }
        _ => return false,
    }
    if b.get(i) == Some(&b'.') {
        i += 1;
        if !digits(&mut i) {
            return false;
        }
    }
    if matches!(b.get(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(b.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        if !digits(&mut i) {
            return false;
        }
    }
    i == b.len()
}

/// The number text an exact id holds, if `v` is one.
pub fn text(v: &Value) -> Option<&str> {
    let Value::Object(m) = v else { return None };
    if m.len() != 1 {
        return None;
    }
    m.get(KEY)?.as_str().filter(|t| is_number(t))
}

/// Is `v` an exact id?
pub fn is_exact(v: &Value) -> bool {
    text(v).is_some()
}

/// The value to keep for a numeric id that arrived as `raw`: the parsed number when it writes
/// back as `raw`, else an exact id holding `raw`. `None` when `raw` is not a JSON number.
pub fn keep(parsed: &Number, raw: &str) -> Option<Value> {
    if !is_number(raw) {
        return None;
    }
    if parsed.is_u64() || parsed.is_i64() || parsed.to_string() == raw {
        return Some(Value::Number(parsed.clone()));
    }
    let mut m = Map::new();
    m.insert(KEY.into(), Value::String(raw.to_string()));
    Some(Value::Object(m))
}

/// The number `serde_json` alone would have made of `v` (`v` itself when it is not an exact id).
pub fn lossy(v: &Value) -> Value {
    text(v)
        .and_then(|t| serde_json::from_str::<Number>(t).ok())
        .map_or_else(|| v.clone(), Value::Number)
}

/// An id as a map key: its JSON text, where an exact id counts as the number `serde_json` would
/// have read (so `requestId`s and ids that meet elsewhere keep matching as before).
pub fn key(v: &Value) -> String {
    match text(v) {
        Some(_) => lossy(v).to_string(),
        None => v.to_string(),
    }
}

/// Compact JSON text of `v`, every exact id written as the number text it holds.
pub fn to_string(v: &Value) -> String {
    serde_json::to_string(&Exact(v)).expect("a JSON value always serialises")
}

/// [`to_string`], as bytes.
pub fn to_vec(v: &Value) -> Vec<u8> {
    serde_json::to_vec(&Exact(v)).expect("a JSON value always serialises")
}

/// Serialises the value it wraps, exact ids as the number text they hold.
pub struct Exact<'a>(pub &'a Value);

/// [`Exact`] for an object.
pub struct ExactMap<'a>(pub &'a Map<String, Value>);

impl Serialize for Exact<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self.0 {
            Value::Object(m) => match text(self.0) {
                Some(t) => {
                    let raw: &RawValue =
                        serde_json::from_str(t).map_err(serde::ser::Error::custom)?;
                    raw.serialize(s)
                }
                None => ExactMap(m).serialize(s),
            },
            Value::Array(a) => {
                let mut seq = s.serialize_seq(Some(a.len()))?;
                for v in a {
                    seq.serialize_element(&Exact(v))?;
                }
                seq.end()
            }
            v => v.serialize(s),
        }
    }
}

impl Serialize for ExactMap<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in self.0 {
            map.serialize_entry(k, &Exact(v))?;
        }
        map.end()
    }
}

/// Does `m` hold an exact id anywhere a [`Message`](crate::Message) can put one (its `id`)?
pub(crate) fn has_exact_id(m: &Map<String, Value>) -> bool {
    crate::member::get(m, "id").is_some_and(is_exact)
}

/// The text of the top-level `"id"` member of the JSON object in `bytes`, as sent.
pub(crate) fn raw_id(bytes: &[u8]) -> Option<&str> {
    #[derive(serde::Deserialize)]
    struct Id<'a> {
        #[serde(borrow)]
        id: Option<&'a RawValue>,
    }
    let id: Id<'_> = serde_json::from_slice(bytes).ok()?;
    id.id.map(RawValue::get)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn number_grammar() {
        for ok in [
            "0",
            "-0",
            "1",
            "1.10",
            "-2.5e+10",
            "1E3",
            "123456789012345678901234567890",
        ] {
            assert!(is_number(ok), "{ok}");
        }
        for bad in [
            "", "-", "01", "1.", ".5", "1e", "+1", " 1", "1 ", "1}", "\"1\"", "NaN",
        ] {
            assert!(!is_number(bad), "{bad}");
        }
    }

    #[test]
    fn only_numbers_that_would_change_become_exact() {
        let n = |t: &str| serde_json::from_str::<Number>(t).unwrap();
        assert_eq!(keep(&n("7"), "7"), Some(json!(7)));
        assert_eq!(keep(&n("-7"), "-7"), Some(json!(-7)));
        assert_eq!(keep(&n("1.5"), "1.5"), Some(json!(1.5)));
        for t in [
            "1.10",
            "1e2",
            "-0",
            "123456789012345678901234567890",
            "1.0e0",
        ] {
            let v = keep(&n(t), t).unwrap();
            assert_eq!(text(&v), Some(t));
            assert_eq!(
                to_string(&json!({"id": v, "x": [v]})),
                format!(r#"{{"id":{t},"x":[{t}]}}"#)
            );
        }
        assert_eq!(keep(&n("1"), "1}"), None);
    }

    #[test]
    fn forged_or_other_objects_are_not_exact() {
        assert!(!is_exact(&json!({KEY: "1}, \"x\": {"})));
        assert!(!is_exact(&json!({KEY: 1})));
        assert!(!is_exact(&json!({KEY: "1", "y": 2})));
        let forged = json!({KEY: "\"s\""});
        assert_eq!(to_string(&forged), forged.to_string());
    }

    #[test]
    fn keys_are_what_serde_json_alone_would_make() {
        let v = keep(&serde_json::from_str("1.10").unwrap(), "1.10").unwrap();
        assert_eq!(key(&v), "1.1");
        assert_eq!(key(&json!(1.1)), "1.1");
        assert_eq!(key(&json!("1.10")), "\"1.10\"");
        assert_eq!(lossy(&v), json!(1.1));
    }

    #[test]
    fn raw_id_reads_the_text_as_sent() {
        assert_eq!(
            raw_id(br#"{"jsonrpc":"2.0", "id" : 1.10 ,"method":"ping"}"#),
            Some("1.10")
        );
        assert_eq!(raw_id(br#"{"jsonrpc":"2.0","method":"ping"}"#), None);
        assert_eq!(raw_id(br#"{"id":1,"id":2}"#), None);
    }
}
