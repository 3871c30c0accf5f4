//! Paths into JSON values, as the builtins' options write them: a JSON pointer (`/a/b/0`,
//! `~1` for `/` and `~0` for `~`) or a dotted path (`a.b.0`); in both, a `*` segment matches
//! every key of an object and every element of an array.

use serde_json::{Map, Value};

/// One segment of a path.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Seg {
    /// A key (or, on an array, an index).
    Key(String),
    /// `*`: every key or index.
    Any,
}

/// A parsed path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JsonPath {
    text: String,
    segs: Vec<Seg>,
}

impl std::fmt::Display for JsonPath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

fn child<'a>(v: &'a Value, key: &str) -> Option<&'a Value> {
    match v {
        Value::Object(m) => sluice_core::member::get(m, key),
        Value::Array(a) => key.parse::<usize>().ok().and_then(|i| a.get(i)),
        _ => None,
    }
}

fn child_mut<'a>(v: &'a mut Value, key: &str) -> Option<&'a mut Value> {
    match v {
        Value::Object(m) => sluice_core::member::get_mut(m, key),
        Value::Array(a) => key.parse::<usize>().ok().and_then(|i| a.get_mut(i)),
        _ => None,
    }
}

impl JsonPath {
    /// Parse a JSON pointer (starts with `/`) or a dotted path. Empty paths and empty dotted
    /// segments are errors.
    pub fn parse(text: &str) -> Result<JsonPath, String> {
        let raw: Vec<String> = if let Some(rest) = text.strip_prefix('/') {
            rest.split('/')
                .map(|s| s.replace("~1", "/").replace("~0", "~"))
                .collect()
        } else if text.is_empty() {
            return Err("an empty path".into());
        } else {
            let parts: Vec<String> = text.split('.').map(str::to_string).collect();
            if parts.iter().any(String::is_empty) {
                return Err(format!(
                    "{text:?} has an empty segment (write a JSON pointer such as \"/a/b\" for keys with dots)"
                ));
            }
            parts
        };
        let segs = raw
            .into_iter()
            .map(|s| if s == "*" { Seg::Any } else { Seg::Key(s) })
            .collect();
        Ok(JsonPath {
            text: text.to_string(),
            segs,
        })
    }

    /// Every value the path reaches in `root`.
    pub fn find<'a>(&self, root: &'a Value) -> Vec<&'a Value> {
        let mut cur = vec![root];
        for seg in &self.segs {
            let mut next = Vec::new();
            for v in cur {
                match seg {
                    Seg::Key(k) => next.extend(child(v, k)),
                    Seg::Any => match v {
                        Value::Object(m) => next.extend(m.values()),
                        Value::Array(a) => next.extend(a.iter()),
                        _ => {}
                    },
                }
            }
            cur = next;
        }
        cur
    }

    /// The one value a path without `*` reaches in `root`, found without collecting (`None`:
    /// it reaches none, or the path has a `*`: use [`JsonPath::find`]).
    pub fn get<'a>(&self, root: &'a Value) -> Option<&'a Value> {
        self.segs.iter().try_fold(root, |v, seg| match seg {
            Seg::Key(k) => child(v, k),
            Seg::Any => None,
        })
    }

    /// Has it a `*` segment?
    pub fn has_any(&self) -> bool {
        self.segs.contains(&Seg::Any)
    }

    /// Call `f` on every value the path reaches in `root`.
    pub fn for_each_mut(&self, root: &mut Value, f: &mut dyn FnMut(&mut Value)) {
        fn walk(v: &mut Value, segs: &[Seg], f: &mut dyn FnMut(&mut Value)) {
            let Some((seg, rest)) = segs.split_first() else {
                f(v);
                return;
            };
            match seg {
                Seg::Key(k) => {
                    if let Some(c) = child_mut(v, k) {
                        walk(c, rest, f);
                    }
                }
                Seg::Any => match v {
                    Value::Object(m) => m.values_mut().for_each(|c| walk(c, rest, f)),
                    Value::Array(a) => a.iter_mut().for_each(|c| walk(c, rest, f)),
                    _ => {}
                },
            }
        }
        walk(root, &self.segs, f);
    }

    /// Set the value at the path: missing objects on the way are created (an existing value
    /// that is neither object nor array stops it); `*` segments visit what exists. With
    /// `only_if_absent`, an existing key is left alone. Returns how many values were written.
    pub fn set(&self, root: &mut Value, value: &Value, only_if_absent: bool) -> usize {
        fn walk(v: &mut Value, segs: &[Seg], value: &Value, only_if_absent: bool) -> usize {
            let Some((seg, rest)) = segs.split_first() else {
                return 0;
            };
            match (seg, rest.is_empty()) {
                (Seg::Key(k), true) => match v {
                    Value::Object(m) => {
                        if only_if_absent && m.contains_key(k) {
                            return 0;
                        }
                        if sluice_core::member::get(m, k) == Some(value) {
                            return 0;
                        }
                        m.insert(k.clone(), value.clone());
                        1
                    }
                    Value::Array(a) => match k.parse::<usize>().ok().and_then(|i| a.get_mut(i)) {
                        Some(slot) if !only_if_absent && slot != value => {
                            *slot = value.clone();
                            1
                        }
                        _ => 0,
                    },
                    _ => 0,
                },
                (Seg::Key(k), false) => {
                    if let Value::Object(m) = v {
                        if !m.contains_key(k) {
                            m.insert(k.clone(), Value::Object(Map::new()));
                        }
                    }
                    match child_mut(v, k) {
                        Some(c) => walk(c, rest, value, only_if_absent),
                        None => 0,
                    }
                }
                (Seg::Any, _) => {
                    let children: Vec<&mut Value> = match v {
                        Value::Object(m) => m.values_mut().collect(),
                        Value::Array(a) => a.iter_mut().collect(),
                        _ => Vec::new(),
                    };
                    children
                        .into_iter()
                        .map(|c| {
                            if rest.is_empty() {
                                if only_if_absent || c == value {
                                    0
                                } else {
                                    *c = value.clone();
                                    1
                                }
                            } else {
                                walk(c, rest, value, only_if_absent)
                            }
                        })
                        .sum()
                }
            }
        }
        walk(root, &self.segs, value, only_if_absent)
    }

    /// Remove what the path reaches (object keys; array elements are left in place). Returns
    /// how many were removed.
    pub fn remove(&self, root: &mut Value) -> usize {
        let Some((last, parent)) = self.segs.split_last() else {
            return 0;
        };
        let parent = JsonPath {
            text: String::new(),
            segs: parent.to_vec(),
        };
        let mut n = 0;
        parent.for_each_mut(root, &mut |v| {
            if let Value::Object(m) = v {
                match last {
                    Seg::Key(k) => n += usize::from(m.shift_remove(k).is_some()),
                    Seg::Any => {
                        n += m.len();
                        m.clear();
                    }
                }
            }
        });
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn pointers_and_dotted_paths() {
        let v = json!({"a": {"b/c": 1, "d": [10, 20]}, "e": [{"s": 1}, {"s": 2}]});
        assert_eq!(JsonPath::parse("/a/b~1c").unwrap().find(&v), [&json!(1)]);
        assert_eq!(JsonPath::parse("a.d.1").unwrap().find(&v), [&json!(20)]);
        assert_eq!(
            JsonPath::parse("e.*.s").unwrap().find(&v),
            [&json!(1), &json!(2)]
        );
        assert!(JsonPath::parse("a..b").is_err());
        assert!(JsonPath::parse("").is_err());
        assert!(JsonPath::parse("/x").unwrap().find(&v).is_empty());
    }

    #[test]
    fn get_reaches_what_find_reaches_without_a_star() {
        let v = json!({"a": {"b/c": 1, "d": [10, 20]}, "e": [{"s": 1}, {"s": 2}]});
        for path in ["/a/b~1c", "a.d.1", "a.d.2", "a.d", "/x", "a.b/c.z"] {
            let p = JsonPath::parse(path).unwrap();
            assert_eq!(
                p.get(&v).into_iter().collect::<Vec<_>>(),
                p.find(&v),
                "{path}"
            );
        }
        assert_eq!(JsonPath::parse("a.d.0").unwrap().get(&v), Some(&json!(10)));
        assert_eq!(JsonPath::parse("e.*.s").unwrap().get(&v), None);
    }

    #[test]
    fn set_default_and_remove() {
        let mut v = json!({"a": 1});
        let p = JsonPath::parse("region").unwrap();
        assert_eq!(p.set(&mut v, &json!("eu"), false), 1);
        assert_eq!(p.set(&mut v, &json!("us"), true), 0);
        assert_eq!(
            JsonPath::parse("/opts/x")
                .unwrap()
                .set(&mut v, &json!(true), false),
            1
        );
        assert_eq!(v, json!({"a": 1, "region": "eu", "opts": {"x": true}}));
        assert_eq!(JsonPath::parse("opts.x").unwrap().remove(&mut v), 1);
        assert_eq!(JsonPath::parse("a").unwrap().remove(&mut v), 1);
        assert_eq!(v, json!({"region": "eu", "opts": {}}));
    }
}
