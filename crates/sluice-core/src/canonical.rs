//! Canonical JSON text for digests: object members sorted by key at every level, each member
//! and each element followed by a comma (`{"a":1,"b":[1,2,],}`), other values as serde_json
//! writes them. The text a request state's and a pinned definition's digests are taken over: it
//! must not change from one build to the next.

use serde_json::Value;

fn scalar<T: serde::Serialize + ?Sized>(out: &mut Vec<u8>, v: &T) {
    serde_json::to_writer(out, v).expect("a JSON value always serialises");
}

/// Write `v` canonically into `out`.
pub fn write(v: &Value, out: &mut Vec<u8>) {
    match v {
        Value::Object(m) => write_object(m.iter().map(|(k, v)| (k.as_str(), v)), out),
        Value::Array(a) => {
            out.push(b'[');
            for i in a {
                write(i, out);
                out.push(b',');
            }
            out.push(b']');
        }
        other => scalar(out, other),
    }
}

/// Write an object of these members canonically into `out`.
pub fn write_object<'a>(entries: impl Iterator<Item = (&'a str, &'a Value)>, out: &mut Vec<u8>) {
    let mut entries: Vec<(&str, &Value)> = entries.collect();
    entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
    out.push(b'{');
    for (k, v) in entries {
        scalar(out, k);
        out.push(b':');
        write(v, out);
        out.push(b',');
    }
    out.push(b'}');
}
