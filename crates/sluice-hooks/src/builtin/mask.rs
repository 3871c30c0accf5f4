//! The `mask` response control: values at configured JSON paths, and under configured key
//! names anywhere, become `"***"` — in `structuredContent`, and in text content (tool result
//! text blocks, embedded resources, `resources/read` contents) whose text is JSON, which is
//! re-serialised.

use super::path::JsonPath;
use serde_json::{Map, Value};
use sluice_config::builtin::MaskOptions;
use sluice_config::OptionError;

/// The mask control.
#[derive(Debug, Clone)]
pub struct Mask {
    paths: Vec<JsonPath>,
    /// Lower-cased key names.
    keys: Vec<String>,
    replacement: Value,
}

impl Mask {
    /// Build from the hook's `options`: `paths` (JSON pointers or dotted paths into the
    /// structured content / the JSON text), `keys` (names matched anywhere, case-insensitively),
    /// `replacement` (default `"***"`).
    pub fn from_options(options: &MaskOptions) -> Result<Mask, OptionError> {
        let paths = super::json_paths("options.paths", &options.paths)?;
        let keys: Vec<String> = options.keys.iter().map(|k| k.to_lowercase()).collect();
        if paths.is_empty() && keys.is_empty() {
            return Err(OptionError::new("options", "mask needs `paths` or `keys`"));
        }
        let replacement = Value::String(options.replacement.as_deref().unwrap_or("***").into());
        Ok(Mask {
            paths,
            keys,
            replacement,
        })
    }

    /// Mask one JSON document in place; returns how many values were masked.
    pub fn mask_value(&self, v: &mut Value) -> u64 {
        let mut n = 0;
        for p in &self.paths {
            p.for_each_mut(v, &mut |slot| {
                if *slot != self.replacement {
                    *slot = self.replacement.clone();
                    n += 1;
                }
            });
        }
        if !self.keys.is_empty() {
            n += self.mask_keys(v);
        }
        n
    }

    fn mask_keys(&self, v: &mut Value) -> u64 {
        match v {
            Value::Object(m) => {
                let mut n = 0;
                for (k, item) in m.iter_mut() {
                    if self.keys.iter().any(|key| key.eq_ignore_ascii_case(k)) {
                        if *item != self.replacement {
                            *item = self.replacement.clone();
                            n += 1;
                        }
                    } else {
                        n += self.mask_keys(item);
                    }
                }
                n
            }
            Value::Array(a) => a.iter_mut().map(|item| self.mask_keys(item)).sum(),
            _ => 0,
        }
    }

    /// Mask a text that is JSON (an object or an array); returns the new text and the count,
    /// or `None` when it is not JSON or nothing was masked.
    pub fn mask_text(&self, text: &str) -> Option<(String, u64)> {
        let t = text.trim_start();
        if !(t.starts_with('{') || t.starts_with('[')) {
            return None;
        }
        let mut v: Value = serde_json::from_str(text).ok()?;
        let n = self.mask_value(&mut v);
        if n == 0 {
            return None;
        }
        let out = if text.contains('\n') {
            serde_json::to_string_pretty(&v)
        } else {
            serde_json::to_string(&v)
        }
        .ok()?;
        Some((out, n))
    }

    fn mask_text_field(&self, obj: &mut Map<String, Value>) -> u64 {
        let Some(Value::String(text)) = obj.get("text") else {
            return 0;
        };
        match self.mask_text(text) {
            Some((out, n)) => {
                obj.insert("text".into(), Value::String(out));
                n
            }
            None => 0,
        }
    }

    /// Mask a reply's `result`: `structuredContent`, text blocks and embedded resources of
    /// `content`, and `contents` (resources/read). Returns how many values were masked.
    pub fn apply(&self, result: &mut Value) -> u64 {
        let Some(result) = result.as_object_mut() else {
            return 0;
        };
        let mut n = 0;
        if let Some(sc) = result.get_mut("structuredContent") {
            n += self.mask_value(sc);
        }
        if let Some(Value::Array(blocks)) = result.get_mut("content") {
            for b in blocks.iter_mut().filter_map(Value::as_object_mut) {
                match b.get("type").and_then(Value::as_str) {
                    Some("text") => n += self.mask_text_field(b),
                    Some("resource") => {
                        if let Some(r) = b.get_mut("resource").and_then(Value::as_object_mut) {
                            n += self.mask_text_field(r);
                        }
                    }
                    _ => {}
                }
            }
        }
        if let Some(Value::Array(contents)) = result.get_mut("contents") {
            for c in contents.iter_mut().filter_map(Value::as_object_mut) {
                n += self.mask_text_field(c);
            }
        }
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn mask(options: Value) -> Mask {
        let sluice_config::BuiltinOptions::Mask(o) = crate::builtin::parsed("mask", options) else {
            unreachable!("mask options")
        };
        Mask::from_options(&o).unwrap()
    }

    #[test]
    fn masks_paths_and_keys_in_structured_and_json_text() {
        let m = mask(json!({"paths": ["/account/number", "cards.*.cvv"], "keys": ["Password"]}));
        let data = json!({"account": {"number": "123", "owner": "ann"}, "cards": [{"cvv": 1}, {"cvv": 2}], "auth": {"password": "x"}});
        let mut result = json!({
            "content": [
                {"type": "text", "text": data.to_string()},
                {"type": "text", "text": "not json {password: x}"},
                {"type": "image", "data": "AAAA", "mimeType": "image/png"}
            ],
            "structuredContent": data
        });
        assert_eq!(m.apply(&mut result), 8);
        let masked = json!({"account": {"number": "***", "owner": "ann"}, "cards": [{"cvv": "***"}, {"cvv": "***"}], "auth": {"password": "***"}});
        assert_eq!(result["structuredContent"], masked);
        assert_eq!(result["content"][0]["text"], json!(masked.to_string()));
        assert_eq!(
            result["content"][1]["text"],
            json!("not json {password: x}")
        );
        // Already masked: nothing more to count.
        assert_eq!(m.apply(&mut result), 0);
    }

    #[test]
    fn pretty_json_stays_pretty_and_options_are_checked() {
        let m = mask(json!({"keys": ["ssn"], "replacement": "[hidden]"}));
        let (out, n) = m.mask_text("{\n  \"ssn\": \"1\"\n}").unwrap();
        assert_eq!((out.as_str(), n), ("{\n  \"ssn\": \"[hidden]\"\n}", 1));
        assert!(crate::builtin::rejected("mask", json!({})));
        assert!(crate::builtin::rejected("mask", json!({"paths": ["a..b"]})));
        let unchecked = MaskOptions {
            paths: vec!["a..b".into()],
            ..MaskOptions::default()
        };
        assert_eq!(
            Mask::from_options(&unchecked).unwrap_err().field,
            "options.paths[0]"
        );
    }
}
