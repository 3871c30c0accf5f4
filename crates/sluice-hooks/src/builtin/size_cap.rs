//! The `size-cap` response control: the most bytes a result may carry. The size is the UTF-8
//! bytes of text (`content` text blocks, `contents[].text` of resources/read) plus the JSON
//! size of every other block and of `structuredContent`. Over the cap, `truncate` keeps blocks
//! in order while they fit, cuts the first text block that does not fit (with a visible
//! marker), drops what does not fit after that (with a closing notice block), and removes
//! `structuredContent` when it no longer fits; `refuse` answers -32031 with a reason for the
//! agent. Per-tool caps override the default.

use super::ToolPattern;
use crate::decision::Refusal;
use serde_json::{json, Map, Value};
use sluice_config::builtin::SizeCapOptions;
use sluice_config::OptionError;

/// What to do with a result over the cap: cut text blocks and drop blocks past the cap, or
/// refuse the reply (-32031).
pub use sluice_config::builtin::SizeCapMode as Mode;

/// The size-cap control.
#[derive(Debug, Clone)]
pub struct SizeCap {
    max_bytes: Option<u64>,
    mode: Mode,
    per_tool: Vec<(ToolPattern, u64)>,
}

/// What a cap did to one result.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Capped {
    /// Blocks cut or removed (`structuredContent` counts as one).
    pub blocks: u64,
    /// Bytes removed.
    pub bytes: u64,
}

fn json_len(v: &Value) -> u64 {
    serde_json::to_string(v).map_or(0, |s| s.len() as u64)
}

/// The text of a block, when it is a text block (`type: text`, or a resources/read content
/// with `text`).
fn text_of<'a>(block: &'a Value, list_key: &str) -> Option<&'a str> {
    let is_text = match list_key {
        "content" => block.get("type").and_then(Value::as_str) == Some("text"),
        _ => block.get("blob").is_none(),
    };
    is_text
        .then(|| block.get("text").and_then(Value::as_str))
        .flatten()
}

fn block_len(block: &Value, list_key: &str) -> u64 {
    match text_of(block, list_key) {
        Some(t) => t.len() as u64,
        None => json_len(block),
    }
}

/// The longest prefix of `s` of at most `max` bytes that ends on a character boundary.
fn prefix(s: &str, max: usize) -> &str {
    let mut end = max.min(s.len());
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// The marker appended to a cut text block.
pub fn cut_marker(removed: u64) -> String {
    format!("…[truncated by Sluice: {removed} bytes removed]")
}

/// The notice block added when whole blocks were dropped.
pub fn dropped_notice(blocks: u64, bytes: u64) -> String {
    let s = if blocks == 1 { "" } else { "s" };
    format!("[truncated by Sluice: {blocks} more content block{s} ({bytes} bytes) removed]")
}

impl SizeCap {
    /// Build from the hook's `options`: `max_bytes`, `mode` (`truncate` | `refuse`), `per_tool`
    /// (`{"tool glob or regex": max_bytes}`, first match in file order wins).
    pub fn from_options(options: &SizeCapOptions) -> Result<SizeCap, OptionError> {
        let positive = |field: String, n: u64| {
            if n == 0 {
                Err(OptionError::new(field, "must be a positive integer"))
            } else {
                Ok(n)
            }
        };
        let max_bytes = options
            .max_bytes
            .map(|n| positive("options.max_bytes".into(), n))
            .transpose()?;
        let mut per_tool = Vec::new();
        for (k, n) in &options.per_tool {
            let field = format!("options.per_tool.{k}");
            let pattern =
                ToolPattern::glob_or_regex(k).map_err(|e| OptionError::new(field.clone(), e))?;
            per_tool.push((pattern, positive(field, *n)?));
        }
        if max_bytes.is_none() && per_tool.is_empty() {
            return Err(OptionError::new(
                "options",
                "size-cap needs `max_bytes` or `per_tool`",
            ));
        }
        Ok(SizeCap {
            max_bytes,
            mode: options.mode,
            per_tool,
        })
    }

    /// The cap for a tool (or for a message without one).
    pub fn cap_for(&self, tool: Option<&str>) -> Option<u64> {
        tool.and_then(|t| {
            self.per_tool
                .iter()
                .find(|(p, _)| p.is_match(t))
                .map(|(_, n)| *n)
        })
        .or(self.max_bytes)
    }

    /// The size of a result, as the cap counts it.
    pub fn size(result: &Map<String, Value>) -> u64 {
        let mut n = 0;
        for key in ["content", "contents"] {
            if let Some(Value::Array(blocks)) = result.get(key) {
                n += blocks.iter().map(|b| block_len(b, key)).sum::<u64>();
            }
        }
        n + result.get("structuredContent").map_or(0, json_len)
    }

    /// Cap one result. `Ok(None)`: within the cap; `Ok(Some(_))`: truncated (what was
    /// removed); `Err`: refused.
    pub fn apply(&self, tool: Option<&str>, result: &mut Value) -> Result<Option<Capped>, Refusal> {
        let Some(cap) = self.cap_for(tool) else {
            return Ok(None);
        };
        let Some(result) = result.as_object_mut() else {
            return Ok(None);
        };
        let size = SizeCap::size(result);
        if size <= cap {
            return Ok(None);
        }
        if self.mode == Mode::Refuse {
            let what = match tool {
                Some(t) => format!("the result of tool {t:?}"),
                None => "the result".to_string(),
            };
            return Err(Refusal::for_agent(format!(
                "Response too large: {what} is {size} bytes, over the {cap}-byte cap of this gateway. Ask for less (a narrower query, a page, a range) and try again."
            )));
        }
        let mut remaining = cap;
        let mut capped = Capped::default();
        let (mut dropped, mut dropped_bytes) = (0u64, 0u64);
        for key in ["content", "contents"] {
            let Some(Value::Array(blocks)) = result.get_mut(key) else {
                continue;
            };
            let mut kept = Vec::with_capacity(blocks.len());
            for mut block in std::mem::take(blocks) {
                let len = block_len(&block, key);
                if len <= remaining {
                    remaining -= len;
                    kept.push(block);
                    continue;
                }
                match text_of(&block, key) {
                    Some(text) if remaining > 0 => {
                        let cut = prefix(text, remaining as usize);
                        let removed = len - cut.len() as u64;
                        let new_text = format!("{cut}{}", cut_marker(removed));
                        block["text"] = Value::String(new_text);
                        remaining = 0;
                        capped.blocks += 1;
                        capped.bytes += removed;
                        kept.push(block);
                    }
                    _ => {
                        dropped += 1;
                        dropped_bytes += len;
                    }
                }
            }
            *blocks = kept;
        }
        if let Some(sc) = result.get("structuredContent") {
            let len = json_len(sc);
            if len > remaining {
                result.shift_remove("structuredContent");
                capped.blocks += 1;
                capped.bytes += len;
            }
        }
        if dropped > 0 {
            capped.blocks += dropped;
            capped.bytes += dropped_bytes;
            let notice = dropped_notice(dropped, dropped_bytes);
            if let Some(Value::Array(blocks)) = result.get_mut("content") {
                blocks.push(json!({"type": "text", "text": notice}));
            } else if let Some(Value::Array(contents)) = result.get_mut("contents") {
                contents.push(
                    json!({"uri": "sluice:truncated", "mimeType": "text/plain", "text": notice}),
                );
            }
        }
        Ok(Some(capped))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cap(options: Value) -> SizeCap {
        let sluice_config::BuiltinOptions::SizeCap(o) = crate::builtin::parsed("size-cap", options)
        else {
            unreachable!("size-cap options")
        };
        SizeCap::from_options(&o).unwrap()
    }

    #[test]
    fn within_the_cap_nothing_changes() {
        let c = cap(json!({"max_bytes": 5}));
        let mut r = json!({"content": [{"type": "text", "text": "hello"}]});
        assert_eq!(c.apply(Some("t"), &mut r), Ok(None));
        assert_eq!(r, json!({"content": [{"type": "text", "text": "hello"}]}));
    }

    #[test]
    fn truncates_text_and_drops_blocks_past_the_cap() {
        let c = cap(json!({"max_bytes": 12}));
        let image =
            json!({"type": "image", "data": "AAAAAAAAAAAAAAAAAAAA", "mimeType": "image/png"});
        let mut r = json!({"content": [
            {"type": "text", "text": "12345"},
            image.clone(),
            {"type": "text", "text": "abcdefghij"},
            {"type": "text", "text": "zzz"}
        ], "structuredContent": {"k": 1}});
        let image_len = json_len(&image);
        let got = c.apply(Some("t"), &mut r).unwrap().unwrap();
        assert_eq!(
            r,
            json!({"content": [
                {"type": "text", "text": "12345"},
                {"type": "text", "text": format!("abcdefg{}", cut_marker(3))},
                {"type": "text", "text": dropped_notice(2, image_len + 3)}
            ]})
        );
        assert_eq!(
            got,
            Capped {
                blocks: 4,
                bytes: 3 + image_len + 3 + 7
            }
        );
    }

    #[test]
    fn cuts_on_character_boundaries() {
        let c = cap(json!({"max_bytes": 4}));
        let mut r = json!({"content": [{"type": "text", "text": "ééé"}]});
        c.apply(None, &mut r).unwrap();
        assert_eq!(
            r["content"][0]["text"],
            json!(format!("éé{}", cut_marker(2)))
        );
    }

    #[test]
    fn refuses_and_per_tool_overrides() {
        let c = cap(
            json!({"max_bytes": 3, "mode": "refuse", "per_tool": {"big_*": 100, "huge\\..*": 1000}}),
        );
        let mut r = json!({"content": [{"type": "text", "text": "hello"}]});
        let err = c.apply(Some("fx_echo"), &mut r).unwrap_err();
        assert!(err.for_agent);
        assert!(err
            .reason
            .contains("\"fx_echo\" is 5 bytes, over the 3-byte cap"));
        assert_eq!(c.apply(Some("big_one"), &mut r), Ok(None));
        assert_eq!(c.cap_for(Some("huge.x")), Some(1000));
        assert_eq!(c.cap_for(Some("bigone")), Some(3));
        use crate::builtin::rejected;
        assert!(rejected("size-cap", json!({"mode": "refuse"})));
        assert!(rejected("size-cap", json!({"max_bytes": 0})));
        assert!(rejected(
            "size-cap",
            json!({"max_bytes": 1, "mode": "snip"})
        ));
        let zero = SizeCapOptions {
            max_bytes: Some(0),
            ..SizeCapOptions::default()
        };
        assert!(SizeCap::from_options(&zero).is_err());
    }
}
