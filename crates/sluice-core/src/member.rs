//! Member lookups in small JSON objects without hashing the key: a message's top level and its
//! `params` have a handful of members, and comparing a few short keys costs less than the
//! SipHash a map lookup computes (serde_json's ordered map hashes every lookup). Also equality
//! of two values that compares objects' members in order before it looks any up.

use serde_json::{Map, Value};

/// Up to this many members, a lookup compares keys in order.
const SMALL: usize = 8;

/// `obj[key]`.
pub fn get<'a>(obj: &'a Map<String, Value>, key: &str) -> Option<&'a Value> {
    if obj.len() <= SMALL {
        obj.iter().find(|(k, _)| k.as_str() == key).map(|(_, v)| v)
    } else {
        obj.get(key)
    }
}

/// `obj[key]`, mutable.
pub fn get_mut<'a>(obj: &'a mut Map<String, Value>, key: &str) -> Option<&'a mut Value> {
    if obj.len() <= SMALL {
        obj.iter_mut()
            .find(|(k, _)| k.as_str() == key)
            .map(|(_, v)| v)
    } else {
        obj.get_mut(key)
    }
}

/// `a == b`. Two objects with the same members in the same order (a value compared with a copy
/// of itself, or with the same text parsed again) are found equal by walking both in order,
/// without the map's lookup of each key in the other; anything else is left to the map's own
/// comparison, for which member order does not matter.
pub fn equal(a: &Value, b: &Value) -> bool {
    in_order(a, b) || a == b
}

/// Equal, with every object's members in the same order.
fn in_order(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .zip(y.iter())
                    .all(|((ka, va), (kb, vb))| ka == kb && in_order(va, vb))
        }
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| in_order(p, q))
        }
        _ => a == b,
    }
}

/// `value[key]` when `value` is an object (as [`Value::get`] with a string key).
pub fn of<'a>(value: &'a Value, key: &str) -> Option<&'a Value> {
    get(value.as_object()?, key)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Small and large objects answer as the map does, present or absent.
    #[test]
    fn lookups_agree_with_the_map() {
        let small = json!({"a": 1, "b": {"c": 2}, "method": "x"});
        let large: Value = (0..20)
            .map(|i| (format!("k{i}"), json!(i)))
            .collect::<Map<_, _>>()
            .into();
        for (v, keys) in [
            (&small, &["a", "b", "method", "c", ""][..]),
            (&large, &["k0", "k19", "k7", "k20"][..]),
        ] {
            for k in keys {
                assert_eq!(of(v, k), v.get(k), "{k}");
            }
        }
        assert_eq!(of(&json!([1, 2]), "a"), None);
        let mut m = small.as_object().cloned().expect("an object");
        *get_mut(&mut m, "a").expect("present") = json!(3);
        assert_eq!(m["a"], json!(3));
        assert!(get_mut(&mut m, "z").is_none());
    }

    #[test]
    fn equality_agrees_with_the_map() {
        let a = json!({"type": "object", "properties": {"i": {"type": "integer"}, "text": {"type": "string"}}, "required": ["i"]});
        let reordered = json!({"required": ["i"], "properties": {"text": {"type": "string"}, "i": {"type": "integer"}}, "type": "object"});
        let other = json!({"type": "object", "properties": {"i": {"type": "number"}, "text": {"type": "string"}}, "required": ["i"]});
        let longer = json!({"type": "object", "properties": {"i": {"type": "integer"}, "text": {"type": "string"}}, "required": ["i", "text"]});
        for (x, y) in [
            (&a, &a),
            (&a, &reordered),
            (&a, &other),
            (&a, &longer),
            (&reordered, &other),
        ] {
            assert_eq!(equal(x, y), x == y, "{x} {y}");
            assert_eq!(equal(y, x), x == y, "{y} {x}");
        }
        assert!(in_order(&a, &a.clone()));
        assert!(
            !in_order(&a, &reordered),
            "a different order is left to the map"
        );
        assert!(equal(&a, &reordered));
        assert!(!equal(&a, &other));
        assert!(equal(&json!([1, "x", null]), &json!([1, "x", null])));
        assert!(!equal(&json!([1, 2]), &json!([2, 1])));
    }
}
