//! Typed reads of JSON fields that record an error (with its field path) instead of stopping.

use crate::error::ConfigError;
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::path::Path;

/// Reads fields of one JSON object, pushing a [`ConfigError`] for each bad one.
pub(crate) struct Fields<'a> {
    pub file: &'a Path,
    pub path: String,
    pub obj: &'a Map<String, Value>,
    pub errors: &'a mut Vec<ConfigError>,
}

impl<'a> Fields<'a> {
    pub(crate) fn field_path(&self, key: &str) -> String {
        if self.path.is_empty() {
            key.to_string()
        } else {
            format!("{}.{key}", self.path)
        }
    }

    pub(crate) fn err(&mut self, key: &str, msg: impl Into<String>) {
        let field = self.field_path(key);
        self.errors.push(ConfigError::new(self.file, field, msg));
    }

    pub(crate) fn string(&mut self, key: &str) -> Option<String> {
        match self.obj.get(key) {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => Some(s.clone()),
            Some(_) => {
                self.err(key, "must be a string");
                None
            }
        }
    }

    /// A string with `${env:NAME}` expanded (a secret, typically); an expansion that fails is
    /// an error naming the field, and None.
    pub(crate) fn expanded(
        &mut self,
        key: &str,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Option<String> {
        let raw = self.string(key)?;
        match expand_env(&raw, env) {
            Ok(v) => Some(v),
            Err(e) => {
                self.err(key, e);
                None
            }
        }
    }

    pub(crate) fn required_string(&mut self, key: &str) -> String {
        match self.string(key) {
            Some(s) if !s.trim().is_empty() => s,
            Some(_) => {
                self.err(key, "must be a non-empty string");
                String::new()
            }
            None if self.obj.get(key).is_none_or(Value::is_null) => {
                self.err(key, "is required");
                String::new()
            }
            None => String::new(),
        }
    }

    /// An array field (absent or null: empty; anything else: an error and empty).
    pub(crate) fn array(&mut self, key: &str) -> Vec<Value> {
        match self.obj.get(key) {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(a)) => a.clone(),
            Some(_) => {
                self.err(key, "must be an array");
                Vec::new()
            }
        }
    }

    pub(crate) fn bool(&mut self, key: &str, default: bool) -> bool {
        match self.obj.get(key) {
            None | Some(Value::Null) => default,
            Some(Value::Bool(b)) => *b,
            Some(_) => {
                self.err(key, "must be true or false");
                default
            }
        }
    }

    pub(crate) fn u64(&mut self, key: &str) -> Option<u64> {
        match self.obj.get(key) {
            None | Some(Value::Null) => None,
            Some(v) => match v.as_u64() {
                Some(n) => Some(n),
                None => {
                    self.err(key, "must be a non-negative integer");
                    None
                }
            },
        }
    }

    pub(crate) fn strings(&mut self, key: &str) -> Vec<String> {
        match self.obj.get(key) {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(items)) => {
                let mut out = Vec::new();
                for (i, item) in items.iter().enumerate() {
                    match item {
                        Value::String(s) => out.push(s.clone()),
                        _ => self.err(&format!("{key}[{i}]"), "must be a string"),
                    }
                }
                out
            }
            Some(_) => {
                self.err(key, "must be an array of strings");
                Vec::new()
            }
        }
    }

    pub(crate) fn string_map(&mut self, key: &str) -> BTreeMap<String, String> {
        match self.obj.get(key) {
            None | Some(Value::Null) => BTreeMap::new(),
            Some(Value::Object(m)) => {
                let mut out = BTreeMap::new();
                for (k, v) in m {
                    match v {
                        Value::String(s) => {
                            out.insert(k.clone(), s.clone());
                        }
                        Value::Number(n) => {
                            out.insert(k.clone(), n.to_string());
                        }
                        Value::Bool(b) => {
                            out.insert(k.clone(), b.to_string());
                        }
                        _ => self.err(&format!("{key}.{k}"), "must be a string"),
                    }
                }
                out
            }
            Some(_) => {
                self.err(key, "must be an object of strings");
                BTreeMap::new()
            }
        }
    }
}

/// Read and parse a JSON file. `Ok(None)` when it does not exist; a parse failure is an error
/// naming line and column.
pub(crate) fn read_json(file: &Path, errors: &mut Vec<ConfigError>) -> Option<Value> {
    let text = match std::fs::read_to_string(file) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
        Err(e) => {
            errors.push(ConfigError::new(file, "", format!("cannot read: {e}")));
            return None;
        }
    };
    match serde_json::from_str::<Value>(&text) {
        Ok(v) => Some(v),
        Err(e) => {
            errors.push(ConfigError::new(
                file,
                "",
                format!(
                    "malformed JSON at line {}, column {}: {}",
                    e.line(),
                    e.column(),
                    e
                ),
            ));
            None
        }
    }
}

/// The fields of entry `i` of the array `list`, or `None` (with the error recorded) when the
/// entry is not an object.
pub(crate) fn entry<'a>(
    file: &'a Path,
    list: &str,
    i: usize,
    value: &'a Value,
    errors: &'a mut Vec<ConfigError>,
) -> Option<Fields<'a>> {
    let path = format!("{list}[{i}]");
    let Some(obj) = value.as_object() else {
        errors.push(ConfigError::new(file, path, "must be an object"));
        return None;
    };
    Some(Fields {
        file,
        path,
        obj,
        errors,
    })
}

/// Read a JSON file that must hold an object. `None` when it does not exist or is not usable
/// (the error is recorded).
pub(crate) fn read_object(
    file: &Path,
    errors: &mut Vec<ConfigError>,
) -> Option<Map<String, Value>> {
    match read_json(file, errors)? {
        Value::Object(o) => Some(o),
        _ => {
            errors.push(ConfigError::new(file, "", "must be a JSON object"));
            None
        }
    }
}

/// Expand `${env:NAME}` references in `input`; a missing variable is an error naming it.
pub(crate) fn expand_env(
    input: &str,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<String, String> {
    let mut out = String::with_capacity(input.len());
    let mut rest = input;
    while let Some(start) = rest.find("${env:") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 6..];
        let Some(end) = after.find('}') else {
            return Err(format!("unterminated ${{env:…}} in {input:?}"));
        };
        let name = &after[..end];
        match env(name) {
            Some(v) => out.push_str(&v),
            None => return Err(format!("environment variable {name} is not set")),
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_expansion() {
        let env = |n: &str| (n == "TOKEN").then(|| "s3cret".to_string());
        assert_eq!(
            expand_env("Bearer ${env:TOKEN}!", &env).unwrap(),
            "Bearer s3cret!"
        );
        assert_eq!(expand_env("plain", &env).unwrap(), "plain");
        assert_eq!(
            expand_env("${env:NOPE}", &env).unwrap_err(),
            "environment variable NOPE is not set"
        );
    }
}
