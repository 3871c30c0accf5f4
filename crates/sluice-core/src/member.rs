//! Member lookups in small JSON objects without hashing the key: a message's top level and its
//! `params` have a handful of members, and comparing a few short keys costs less than the
//! SipHash a map lookup computes (serde_json's ordered map hashes every lookup).

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
}
