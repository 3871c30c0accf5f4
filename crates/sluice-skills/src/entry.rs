//! A skill's entry (`skills/list`, `skills/get`): the URI of its `SKILL.md`, its frontmatter,
//! and the complete list of its files with their digests and sizes (or `"dynamic"`), read and
//! checked as a host must before it loads the skill; and renaming every URI of an entry.

use serde_json::{Map, Value};

/// The file every skill has at its root.
pub const SKILL_MD: &str = "SKILL.md";

/// Resources per skill every host must accept (`SKILL.md` included).
pub const MAX_FILES: usize = 512;

/// Total size per skill every host must accept, bytes.
pub const MAX_TOTAL_BYTES: u64 = 16 * 1024 * 1024;

/// One file of a skill, as its entry describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct File {
    /// The file's resource URI.
    pub uri: String,
    /// `sha256:` and 64 lowercase hex digits of its raw bytes.
    pub digest: String,
    /// Its length in bytes.
    pub size: u64,
}

/// A skill's files.
#[derive(Debug, Clone, PartialEq)]
pub enum Files {
    /// Every file, `SKILL.md` included, each once.
    Listed(Vec<File>),
    /// Generated content: no digests can be published.
    Dynamic,
}

/// A skill's entry.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// The URI of its `SKILL.md`.
    pub uri: String,
    /// Its `SKILL.md` frontmatter, as the entry renders it.
    pub frontmatter: Map<String, Value>,
    /// Its files.
    pub files: Files,
}

/// Why an entry cannot be loaded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EntryError {
    /// A member is missing or of the wrong type.
    #[error("the entry {0}")]
    Malformed(String),
    /// Past a limit every host must accept.
    #[error("{0}")]
    TooLarge(String),
}

fn malformed(what: impl Into<String>) -> EntryError {
    EntryError::Malformed(what.into())
}

impl Entry {
    /// Read an entry, refusing one a host must not load: no `uri`, no `frontmatter` object
    /// with a `name` and a `description`, `resources` neither an array nor `"dynamic"`, a file
    /// without a URI, a well-formed digest or a size, a URI whose last segment before
    /// `SKILL.md` is not the frontmatter's name, or files that do not include `SKILL.md`.
    pub fn parse(v: &Value) -> Result<Entry, EntryError> {
        let uri = v
            .get("uri")
            .and_then(Value::as_str)
            .ok_or_else(|| malformed("has no uri"))?;
        let frontmatter = v
            .get("frontmatter")
            .and_then(Value::as_object)
            .ok_or_else(|| malformed(format!("{uri} has no frontmatter object")))?;
        let name = frontmatter
            .get("name")
            .and_then(Value::as_str)
            .filter(|n| !n.is_empty())
            .ok_or_else(|| malformed(format!("{uri} has no frontmatter name")))?;
        let description = frontmatter.get("description").and_then(Value::as_str);
        if description.is_none_or(str::is_empty) {
            return Err(malformed(format!("{uri} has no frontmatter description")));
        }
        let root = uri
            .strip_suffix(&format!("/{}", SKILL_MD))
            .ok_or_else(|| malformed(format!("uri {uri} does not end in /SKILL.md")))?;
        if root.rsplit('/').next() != Some(name) {
            return Err(malformed(format!(
                "uri {uri} does not end in the skill's name {name:?}"
            )));
        }
        let files = match v.get("resources") {
            Some(Value::String(s)) if s == "dynamic" => Files::Dynamic,
            Some(Value::Array(items)) => {
                let mut files = Vec::with_capacity(items.len());
                for item in items {
                    files.push(file(uri, item)?);
                }
                if !files.iter().any(|f| f.uri == uri) {
                    return Err(malformed(format!("{uri} does not list its SKILL.md")));
                }
                // Each file once, and each within the skill's directory.
                let inside = format!("{root}/");
                let mut seen = std::collections::HashSet::with_capacity(files.len());
                for f in &files {
                    if !f.uri.starts_with(&inside) {
                        return Err(malformed(format!(
                            "{uri} lists {}, which is outside the skill's directory",
                            f.uri
                        )));
                    }
                    if !seen.insert(f.uri.as_str()) {
                        return Err(malformed(format!("{uri} lists {} twice", f.uri)));
                    }
                }
                Files::Listed(files)
            }
            Some(_) => {
                return Err(malformed(format!(
                    "{uri} has resources that are neither a list nor \"dynamic\""
                )))
            }
            None => return Err(malformed(format!("{uri} has no resources"))),
        };
        Ok(Entry {
            uri: uri.to_string(),
            frontmatter: frontmatter.clone(),
            files,
        })
    }

    /// The skill's name (its frontmatter's).
    pub fn name(&self) -> &str {
        self.frontmatter
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or("")
    }

    /// The skill's root: its `SKILL.md` URI without `/SKILL.md`.
    pub fn root(&self) -> &str {
        self.uri
            .strip_suffix(&format!("/{}", SKILL_MD))
            .unwrap_or(&self.uri)
    }

    /// The listed file at `uri`.
    pub fn file(&self, uri: &str) -> Option<&File> {
        match &self.files {
            Files::Listed(files) => files.iter().find(|f| f.uri == uri),
            Files::Dynamic => None,
        }
    }

    /// Refuse a skill past the limits every host must accept (checked from the entry alone,
    /// before any file is read).
    pub fn within_limits(&self) -> Result<(), EntryError> {
        let Files::Listed(files) = &self.files else {
            return Ok(());
        };
        if files.len() > MAX_FILES {
            return Err(EntryError::TooLarge(format!(
                "{} lists {} files, more than the {} a host must accept",
                self.uri,
                files.len(),
                MAX_FILES
            )));
        }
        let total: u64 = files.iter().map(|f| f.size).sum();
        if total > MAX_TOTAL_BYTES {
            return Err(EntryError::TooLarge(format!(
                "{}'s files add up to {total} bytes, more than the {} a host must accept",
                self.uri, MAX_TOTAL_BYTES
            )));
        }
        Ok(())
    }
}

fn file(skill: &str, item: &Value) -> Result<File, EntryError> {
    let uri = item
        .get("uri")
        .and_then(Value::as_str)
        .ok_or_else(|| malformed(format!("{skill} lists a file with no uri")))?;
    let digest = item
        .get("digest")
        .and_then(Value::as_str)
        .filter(|d| well_formed_digest(d))
        .ok_or_else(|| {
            malformed(format!(
                "{skill} lists {uri} without a digest of the form sha256:<64 lowercase hex digits>"
            ))
        })?;
    let size = item
        .get("size")
        .and_then(Value::as_u64)
        .ok_or_else(|| malformed(format!("{skill} lists {uri} without a size")))?;
    Ok(File {
        uri: uri.to_string(),
        digest: digest.to_string(),
        size,
    })
}

/// `sha256:` and 64 lowercase hex digits.
pub fn well_formed_digest(d: &str) -> bool {
    d.strip_prefix("sha256:").is_some_and(|hex| {
        hex.len() == 64
            && hex
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    })
}

/// Rewrite every URI of an entry (as JSON: `uri` and each file's `uri`) with `rename`.
pub fn rename_uris(entry: &mut Value, rename: impl Fn(&str) -> Option<String>) {
    if let Some(new) = entry.get("uri").and_then(Value::as_str).and_then(&rename) {
        entry["uri"] = Value::String(new);
    }
    if let Some(files) = entry.get_mut("resources").and_then(Value::as_array_mut) {
        for f in files {
            if let Some(new) = f.get("uri").and_then(Value::as_str).and_then(&rename) {
                f["uri"] = Value::String(new);
            }
        }
    }
}
