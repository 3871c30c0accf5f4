//! What a read returned, checked against the skill's entry as a host must before using it: the
//! bytes of the content (a text's UTF-8, a blob's decoded base64), their size and SHA-256
//! digest, and for a `SKILL.md` its YAML frontmatter compared field by field with the entry's.

use crate::entry::{Entry, File, Files};
use base64::Engine;
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};
use std::borrow::Cow;

/// Why content does not match its entry: it must not be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Mismatch {
    /// The read returned no content for the URI (or content that cannot be decoded).
    #[error("the read returned no usable content for {0}")]
    NoContent(String),
    /// A different length.
    #[error("{uri} is {got} bytes, its entry says {want}")]
    Size {
        /// The file.
        uri: String,
        /// Bytes read.
        got: u64,
        /// Bytes the entry says.
        want: u64,
    },
    /// A different digest.
    #[error("{uri} has the digest {got}, its entry says {want}")]
    Digest {
        /// The file.
        uri: String,
        /// The digest of what was read.
        got: String,
        /// The entry's.
        want: String,
    },
    /// A `SKILL.md` without a frontmatter block that parses.
    #[error("{uri} has no YAML frontmatter that parses: {why}")]
    NoFrontmatter {
        /// The file.
        uri: String,
        /// Why.
        why: String,
    },
    /// A `SKILL.md` whose frontmatter differs from the entry's.
    #[error("{uri}'s frontmatter differs from its entry's in {}", .fields.join(", "))]
    Frontmatter {
        /// The file.
        uri: String,
        /// The fields that differ, sorted.
        fields: Vec<String>,
    },
    /// A file the entry does not list (a skill's files are exactly its entry's).
    #[error("{0} is not one of the skill's listed files")]
    Unlisted(String),
}

/// `sha256:` and the lowercase hex SHA-256 of `bytes`.
pub fn digest(bytes: &[u8]) -> String {
    let sum = Sha256::digest(bytes);
    let mut out = String::with_capacity(7 + 64);
    out.push_str("sha256:");
    for b in sum.iter() {
        out.push_str(&format!("{b:02x}"));
    }
    out
}

/// The raw bytes a `resources/read` result holds for `uri`: the content of that URI (or the
/// only content), a text's UTF-8 bytes or a blob's decoded base64.
pub fn content_bytes<'r>(result: &'r Value, uri: &str) -> Result<Cow<'r, [u8]>, Mismatch> {
    let contents = result
        .get("contents")
        .and_then(Value::as_array)
        .ok_or_else(|| Mismatch::NoContent(uri.to_string()))?;
    let item = contents
        .iter()
        .find(|c| c.get("uri").and_then(Value::as_str) == Some(uri))
        .or(match contents.as_slice() {
            [one] => Some(one),
            _ => None,
        })
        .ok_or_else(|| Mismatch::NoContent(uri.to_string()))?;
    if let Some(text) = item.get("text").and_then(Value::as_str) {
        return Ok(Cow::Borrowed(text.as_bytes()));
    }
    let blob = item
        .get("blob")
        .and_then(Value::as_str)
        .ok_or_else(|| Mismatch::NoContent(uri.to_string()))?;
    base64::engine::general_purpose::STANDARD
        .decode(blob)
        .map(Cow::Owned)
        .map_err(|_| Mismatch::NoContent(uri.to_string()))
}

/// Check `bytes` against a listed file: its size, then its digest.
pub fn check_file(bytes: &[u8], file: &File) -> Result<(), Mismatch> {
    let got = bytes.len() as u64;
    if got != file.size {
        return Err(Mismatch::Size {
            uri: file.uri.clone(),
            got,
            want: file.size,
        });
    }
    let got = digest(bytes);
    if got != file.digest {
        return Err(Mismatch::Digest {
            uri: file.uri.clone(),
            got,
            want: file.digest.clone(),
        });
    }
    Ok(())
}

/// The YAML frontmatter at the start of a `SKILL.md` (between a first line `---` and the next
/// `---` line), as JSON.
pub fn frontmatter(uri: &str, text: &str) -> Result<Map<String, Value>, Mismatch> {
    let none = |why: &str| Mismatch::NoFrontmatter {
        uri: uri.to_string(),
        why: why.to_string(),
    };
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut lines = text.split_inclusive('\n');
    if lines.next().map(str::trim_end) != Some("---") {
        return Err(none("it does not begin with a --- line"));
    }
    let mut yaml = String::new();
    let mut closed = false;
    for line in lines {
        if line.trim_end() == "---" {
            closed = true;
            break;
        }
        yaml.push_str(line);
    }
    if !closed {
        return Err(none("no closing --- line"));
    }
    match serde_norway::from_str::<Value>(&yaml) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err(none("it is not a mapping")),
        Err(e) => Err(Mismatch::NoFrontmatter {
            uri: uri.to_string(),
            why: e.to_string(),
        }),
    }
}

/// The fields in which two frontmatters differ (a field absent from one counts), sorted.
pub fn differing_fields(a: &Map<String, Value>, b: &Map<String, Value>) -> Vec<String> {
    let mut keys: Vec<&String> = a.keys().chain(b.keys()).collect();
    keys.sort();
    keys.dedup();
    keys.into_iter()
        .filter(|k| a.get(k.as_str()) != b.get(k.as_str()))
        .cloned()
        .collect()
}

/// Check what a read of `uri` returned (`result`) against `entry`: the file must be listed
/// (unless the skill is dynamic), its size and digest must match, and a `SKILL.md`'s
/// frontmatter must equal the entry's. Returns the bytes checked (borrowed from a text).
pub fn check_read<'r>(
    entry: &Entry,
    uri: &str,
    result: &'r Value,
) -> Result<Cow<'r, [u8]>, Mismatch> {
    let bytes = content_bytes(result, uri)?;
    match entry.file(uri) {
        Some(file) => check_file(&bytes, file)?,
        None if matches!(entry.files, Files::Listed(_)) => {
            return Err(Mismatch::Unlisted(uri.to_string()))
        }
        None => {}
    }
    if uri == entry.uri {
        let text = std::str::from_utf8(&bytes).map_err(|_| Mismatch::NoFrontmatter {
            uri: uri.to_string(),
            why: "it is not UTF-8 text".into(),
        })?;
        let read = frontmatter(uri, text)?;
        let fields = differing_fields(&read, &entry.frontmatter);
        if !fields.is_empty() {
            return Err(Mismatch::Frontmatter {
                uri: uri.to_string(),
                fields,
            });
        }
    }
    Ok(bytes)
}
