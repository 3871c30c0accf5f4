//! The skill tree of `--skills`, served through the Skills extension (SEP-2640,
//! `io.modelcontextprotocol/skills`): three fixed skills as `skill://` resources, their `Skill`
//! entries (verbatim frontmatter, a complete `{uri, digest, size}` manifest computed from the
//! exact bytes served), `SKILL.md` metadata for `resources/list`, file reads, and the direct
//! children of every directory (`resources/directory/read`). `--skills-tamper` makes the served
//! `SKILL.md` of `pdf-processing` disagree with its entry, for tests of verification on read.
//!
//! The tree (listing order; `pdf-processing` first, so a client that explores the first entry
//! finds nested directories):
//!
//! ```text
//! skill://pdf-processing/SKILL.md              (license, metadata.version)
//! skill://pdf-processing/references/FORMS.md
//! skill://pdf-processing/templates/invoice.md
//! skill://pdf-processing/templates/regional/eu-invoice.md   (non-ASCII: size counts bytes)
//! skill://git-workflow/SKILL.md
//! skill://acme/billing/refunds/SKILL.md         (prefix acme/billing, license)
//! skill://acme/billing/refunds/examples/email.md
//! ```

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{json, Map, Value};
use sha2::{Digest, Sha256};

use crate::protocol::RpcError;

/// The extension's id.
pub(crate) const EXTENSION: &str = "io.modelcontextprotocol/skills";
/// The extension's methods (served only with `--skills`).
pub(crate) const METHODS: [&str; 3] = ["skills/list", "skills/get", "resources/directory/read"];
/// The URI scheme of the tree.
pub(crate) const SCHEME: &str = "skill://";
/// The `mimeType` of a directory resource.
pub(crate) const DIRECTORY_MIME: &str = "inode/directory";
/// The skill whose `SKILL.md` `--skills-tamper` changes.
pub(crate) const TAMPERED_SKILL: &str = "pdf-processing";
/// The skill the `skills_edit` tool changes.
pub(crate) const EDITED_SKILL: &str = "git-workflow";

/// How `--skills-tamper` makes the served `SKILL.md` of [`TAMPERED_SKILL`] differ from its entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Tamper {
    /// Same length, different bytes (the digest no longer matches).
    Digest,
    /// One byte longer than the entry's `size`.
    Size,
    /// The entry's `frontmatter.description` differs from the file's (digest and size match).
    Frontmatter,
}

impl Tamper {
    /// Parse `digest`, `size` or `frontmatter`.
    pub(crate) fn parse(mode: &str) -> Result<Self, String> {
        match mode {
            "digest" => Ok(Tamper::Digest),
            "size" => Ok(Tamper::Size),
            "frontmatter" => Ok(Tamper::Frontmatter),
            other => Err(format!(
                "--skills-tamper: expected digest, size or frontmatter, got {other}"
            )),
        }
    }
}

/// The tool that changes the tree (listed with `--skills`): `git-workflow`'s `SKILL.md` gets a
/// new edition, and with `notify` the client is told `notifications/resources/list_changed`.
pub(crate) fn edit_tool() -> Value {
    json!({
        "name": "skills_edit",
        "description": "Changes the SKILL.md of git-workflow (a new edition: its entry and file change together); with notify, sends notifications/resources/list_changed",
        "inputSchema": {"type": "object", "properties": {"notify": {"type": "boolean"}}}
    })
}

/// The capability settings declared under `capabilities.extensions[EXTENSION]`.
pub(crate) fn capability() -> Value {
    json!({ "directoryRead": true })
}

/// One skill as written: its path, frontmatter, `SKILL.md` body and supporting files.
struct Def {
    path: &'static str,
    frontmatter: Value,
    body: &'static str,
    files: &'static [(&'static str, &'static str)],
}

fn defs() -> Vec<Def> {
    vec![
        Def {
            path: "pdf-processing",
            frontmatter: json!({
                "name": "pdf-processing",
                "description": "Extract, fill, and assemble PDF documents",
                "license": "Apache-2.0",
                "metadata": { "version": "2.1.0", "author": "Sluice fixture" }
            }),
            body: "# PDF processing\n\n\
                   Choose the matching template from `templates/` (regional variants are in \
                   `templates/regional/`).\nThe form fields are described in \
                   [references/FORMS.md](references/FORMS.md).\n",
            files: &[
                (
                    "references/FORMS.md",
                    "# Form fields\n\n| Field | Meaning |\n| --- | --- |\n| `total` | Amount due |\n",
                ),
                (
                    "templates/invoice.md",
                    "# Invoice\n\nBill to: {{customer}}\nTotal: {{total}}\n",
                ),
                (
                    "templates/regional/eu-invoice.md",
                    "# EU invoice\n\nTotal: {{total}} \u{20ac} (VAT included)\n",
                ),
            ],
        },
        Def {
            path: "git-workflow",
            frontmatter: json!({
                "name": "git-workflow",
                "description": "Follow this team's Git conventions for branching and commits"
            }),
            body: "# Git workflow\n\nBranch from `main` as `topic/<name>`; one change per commit.\n",
            files: &[],
        },
        Def {
            path: "acme/billing/refunds",
            frontmatter: json!({
                "name": "refunds",
                "description": "Process customer refund requests per company policy",
                "license": "Apache-2.0"
            }),
            body: "# Refunds\n\nReply with the template in [examples/email.md](examples/email.md).\n",
            files: &[(
                "examples/email.md",
                "Subject: Your refund\n\nWe have refunded {{amount}} to your card.\n",
            )],
        },
    ]
}

/// `sha256:<64 lowercase hex>` of `bytes`.
pub(crate) fn digest(bytes: &[u8]) -> String {
    let hex: String = Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("sha256:{hex}")
}

/// Whether `s` can be written as a plain YAML scalar that reads back as the same string.
fn plain(s: &str) -> bool {
    s.starts_with(|c: char| c.is_ascii_alphabetic())
        && !s.ends_with(' ')
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || " ,.'()/_-".contains(c))
        && !["true", "false", "null", "yes", "no", "on", "off"]
            .contains(&s.to_ascii_lowercase().as_str())
}

/// `map` as block YAML (strings plain where safe, else JSON-quoted, which YAML reads alike).
fn yaml(map: &Map<String, Value>, indent: usize, out: &mut String) {
    let pad = " ".repeat(indent);
    for (key, value) in map {
        match value {
            Value::Object(inner) => {
                out.push_str(&format!("{pad}{key}:\n"));
                yaml(inner, indent + 2, out);
            }
            Value::String(s) if plain(s) => out.push_str(&format!("{pad}{key}: {s}\n")),
            other => out.push_str(&format!("{pad}{key}: {other}\n")),
        }
    }
}

/// The `mimeType` of a skill file.
fn mime_type(uri: &str) -> &'static str {
    if uri.ends_with(".md") {
        "text/markdown"
    } else {
        "text/plain"
    }
}

/// The last `/`-separated segment of `uri`.
fn last_segment(uri: &str) -> &str {
    uri.rsplit('/').next().unwrap_or(uri)
}

/// One served skill.
#[derive(Debug)]
struct Skill {
    /// `skill://<skill-path>/SKILL.md`.
    uri: String,
    /// The `Skill` entry of `skills/list` and `skills/get`.
    entry: Value,
    /// The `SKILL.md` resource metadata (`resources/list`, directory reads).
    resource: Value,
}

/// The served tree: skills, file contents and directories.
#[derive(Debug)]
pub(crate) struct Tree {
    skills: Vec<Skill>,
    /// Every file's URI and the text served for it.
    files: BTreeMap<String, String>,
    /// Every directory URI (no trailing slash).
    dirs: BTreeSet<String>,
}

impl Tree {
    /// The fixed tree, with the `SKILL.md` of [`TAMPERED_SKILL`] changed as `tamper` says, and
    /// (edition `n` > 0, after `n` calls of the `skills_edit` tool) `git-workflow`'s `SKILL.md`
    /// ending in `Edition n.`: its entry and its file change together.
    pub(crate) fn new(tamper: Option<Tamper>, edition: u64) -> Tree {
        let mut tree = Tree {
            skills: Vec::new(),
            files: BTreeMap::new(),
            dirs: BTreeSet::new(),
        };
        for def in defs() {
            let root = format!("{SCHEME}{}", def.path);
            let Value::Object(frontmatter) = def.frontmatter else {
                unreachable!("frontmatter is an object")
            };
            let mut skill_md = String::from("---\n");
            yaml(&frontmatter, 0, &mut skill_md);
            skill_md.push_str("---\n\n");
            skill_md.push_str(def.body);
            if edition > 0 && def.path == EDITED_SKILL {
                skill_md.push_str(&format!("\nEdition {edition}.\n"));
            }
            let files: Vec<(String, String)> = std::iter::once(("SKILL.md", skill_md.as_str()))
                .chain(def.files.iter().copied())
                .map(|(rel, text)| (format!("{root}/{rel}"), text.to_string()))
                .collect();
            let manifest: Vec<Value> = files
                .iter()
                .map(|(uri, text)| json!({ "uri": uri, "digest": digest(text.as_bytes()), "size": text.len() }))
                .collect();
            let tamper = tamper.filter(|_| def.path == TAMPERED_SKILL);
            let mut entry_frontmatter = frontmatter.clone();
            if tamper == Some(Tamper::Frontmatter) {
                entry_frontmatter.insert(
                    "description".into(),
                    json!("Extract, fill, sign and assemble PDF documents"),
                );
            }
            let uri = format!("{root}/SKILL.md");
            for (file_uri, mut text) in files {
                if file_uri == uri {
                    match tamper {
                        Some(Tamper::Digest) => text = text.replacen("Choose", "CHOOSE", 1),
                        Some(Tamper::Size) => text.push('\n'),
                        _ => {}
                    }
                }
                let mut dir = file_uri.as_str();
                while let Some((parent, _)) = dir.rsplit_once('/') {
                    if parent.len() <= SCHEME.len() {
                        break;
                    }
                    tree.dirs.insert(parent.to_string());
                    dir = parent;
                }
                tree.files.insert(file_uri, text);
            }
            let resource = json!({
                "uri": uri,
                "name": frontmatter["name"],
                "description": frontmatter["description"],
                "mimeType": "text/markdown",
                "size": tree.files[&uri].len()
            });
            let entry = json!({
                "uri": uri,
                "frontmatter": entry_frontmatter,
                "resources": manifest
            });
            tree.skills.push(Skill {
                uri,
                entry,
                resource,
            });
        }
        tree
    }

    /// Every `Skill` entry, in listing order.
    pub(crate) fn entries(&self) -> Vec<Value> {
        self.skills.iter().map(|s| s.entry.clone()).collect()
    }

    /// The entry of the skill whose `SKILL.md` is `uri` (`-32602` otherwise).
    pub(crate) fn get(&self, uri: &str) -> Result<Value, RpcError> {
        match self.skills.iter().find(|s| s.uri == uri) {
            Some(skill) => Ok(skill.entry.clone()),
            None if self.files.contains_key(uri) || self.dirs.contains(uri) => {
                Err(RpcError::invalid_params(format!(
                    "No skill is served at {uri}: skills/get takes the URI of a skill's SKILL.md"
                ))
                .with_data(json!({ "uri": uri })))
            }
            None => Err(
                RpcError::invalid_params(format!("No skill is served at {uri}"))
                    .with_data(json!({ "uri": uri })),
            ),
        }
    }

    /// The `SKILL.md` resources, for `resources/list`.
    pub(crate) fn resources(&self) -> Vec<Value> {
        self.skills.iter().map(|s| s.resource.clone()).collect()
    }

    /// The `resources/read` result for skill file `uri` (`-32602` when none is served there).
    pub(crate) fn read(&self, uri: &str) -> Result<Value, RpcError> {
        match self.files.get(uri) {
            Some(text) => Ok(json!({
                "contents": [{ "uri": uri, "mimeType": mime_type(uri), "text": text }]
            })),
            None => {
                let why = if self.dirs.contains(uri) {
                    format!("{uri} is a directory resource: list it with resources/directory/read")
                } else {
                    format!("No skill file is served at {uri}")
                };
                Err(RpcError::invalid_params(why).with_data(json!({ "uri": uri })))
            }
        }
    }

    /// The resource metadata of file `uri`.
    fn file_resource(&self, uri: &str, text: &str) -> Value {
        if let Some(skill) = self.skills.iter().find(|s| s.uri == uri) {
            return skill.resource.clone();
        }
        json!({
            "uri": uri,
            "name": last_segment(uri),
            "mimeType": mime_type(uri),
            "size": text.len()
        })
    }

    /// The direct children of directory `uri` (files, then directories as `inode/directory`
    /// resources, each sorted by URI); `-32602` when `uri` is not a directory.
    pub(crate) fn directory(&self, uri: &str) -> Result<Vec<Value>, RpcError> {
        if !self.dirs.contains(uri) {
            let why = if self.files.contains_key(uri) {
                format!("{uri} is not a directory resource")
            } else if uri.ends_with('/') && self.dirs.contains(uri.trim_end_matches('/')) {
                format!(
                    "No directory resource at {uri}: directory URIs are written without a \
                     trailing slash"
                )
            } else {
                format!("No directory resource at {uri}")
            };
            return Err(RpcError::invalid_params(why).with_data(json!({ "uri": uri })));
        }
        let is_child = |child: &str| {
            child
                .strip_prefix(uri)
                .and_then(|rest| rest.strip_prefix('/'))
                .is_some_and(|name| !name.is_empty() && !name.contains('/'))
        };
        let files = self
            .files
            .iter()
            .filter(|(child, _)| is_child(child))
            .map(|(child, text)| self.file_resource(child, text));
        let dirs = self
            .dirs
            .iter()
            .filter(|d| is_child(d))
            .map(|d| json!({ "uri": d, "name": last_segment(d), "mimeType": DIRECTORY_MIME }));
        Ok(files.chain(dirs).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::paginate;

    /// Read back the frontmatter this module writes (block maps of plain or JSON-quoted
    /// scalars): enough to check that the file and the entry agree.
    fn parse_frontmatter(text: &str) -> Value {
        let block = text
            .strip_prefix("---\n")
            .and_then(|t| t.split_once("\n---\n"))
            .map(|(block, _)| block)
            .expect("SKILL.md starts with a --- block");
        let mut root = Map::new();
        let mut nested: Option<(String, Map<String, Value>)> = None;
        for line in block.lines() {
            let indented = line.starts_with("  ");
            let (key, value) = line.trim_start().split_once(':').expect("key: value");
            let value = value.trim_start();
            let value = if value.starts_with('"') {
                serde_json::from_str(value).expect("a JSON-quoted scalar")
            } else {
                json!(value)
            };
            match (&mut nested, indented) {
                (Some((_, map)), true) => {
                    map.insert(key.into(), value);
                }
                _ => {
                    if let Some((k, map)) = nested.take() {
                        root.insert(k, Value::Object(map));
                    }
                    if value == "" {
                        nested = Some((key.into(), Map::new()));
                    } else {
                        root.insert(key.into(), value);
                    }
                }
            }
        }
        if let Some((k, map)) = nested {
            root.insert(k, Value::Object(map));
        }
        Value::Object(root)
    }

    fn text(tree: &Tree, uri: &str) -> String {
        tree.read(uri).unwrap()["contents"][0]["text"]
            .as_str()
            .unwrap()
            .to_string()
    }

    #[test]
    fn entries_are_complete_manifests_of_the_bytes_served() {
        let tree = Tree::new(None, 0);
        let entries = tree.entries();
        let uris: Vec<&str> = entries.iter().map(|e| e["uri"].as_str().unwrap()).collect();
        assert_eq!(
            uris,
            [
                "skill://pdf-processing/SKILL.md",
                "skill://git-workflow/SKILL.md",
                "skill://acme/billing/refunds/SKILL.md"
            ]
        );
        let mut listed = BTreeSet::new();
        for entry in &entries {
            let uri = entry["uri"].as_str().unwrap();
            let root = uri.strip_suffix("/SKILL.md").unwrap();
            // The final skill-path segment is the name.
            assert_eq!(entry["frontmatter"]["name"], last_segment(root));
            // The frontmatter is the file's, verbatim.
            assert_eq!(parse_frontmatter(&text(&tree, uri)), entry["frontmatter"]);
            let resources = entry["resources"].as_array().unwrap();
            assert!(
                resources.iter().any(|r| r["uri"] == uri),
                "{uri} lists itself"
            );
            for r in resources {
                let file = r["uri"].as_str().unwrap();
                assert!(
                    file.starts_with(&format!("{root}/")),
                    "{file} within {root}"
                );
                assert!(listed.insert(file.to_string()), "{file} listed once");
                let digest = r["digest"].as_str().unwrap();
                let hex = digest.strip_prefix("sha256:").unwrap();
                assert_eq!(hex.len(), 64);
                assert!(hex.chars().all(|c| matches!(c, '0'..='9' | 'a'..='f')));
                let served = text(&tree, file);
                assert_eq!(r["size"], served.len());
                assert_eq!(digest, super::digest(served.as_bytes()));
            }
        }
        // Complete: every served file belongs to exactly one entry.
        assert_eq!(listed, tree.files.keys().cloned().collect());
        // The pdf-processing extras pass through.
        assert_eq!(entries[0]["frontmatter"]["metadata"]["version"], "2.1.0");
        assert_eq!(entries[0]["frontmatter"]["license"], "Apache-2.0");
        // Sizes count bytes: the EU invoice has a euro sign.
        let eu = "skill://pdf-processing/templates/regional/eu-invoice.md";
        assert_eq!(text(&tree, eu).len(), text(&tree, eu).chars().count() + 2);
        // A known digest (sha256 of the empty string) pins the format.
        assert_eq!(
            digest(b""),
            "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }

    #[test]
    fn listing_pages_keep_entries_whole() {
        let tree = Tree::new(None, 0);
        let (first, next) = paginate(tree.entries(), None, Some(2)).unwrap();
        assert_eq!(first.len(), 2);
        let (second, last) =
            paginate(tree.entries(), Some(&json!(next.unwrap())), Some(2)).unwrap();
        assert!(last.is_none());
        assert_eq!(second, vec![tree.entries()[2].clone()]);
        assert_eq!(first[0], tree.entries()[0], "an entry crosses pages whole");
    }

    #[test]
    fn gets_and_lists_resources() {
        let tree = Tree::new(None, 0);
        let uri = "skill://acme/billing/refunds/SKILL.md";
        assert_eq!(tree.get(uri).unwrap(), tree.entries()[2]);
        for bad in [
            "skill://nope/SKILL.md",
            "skill://pdf-processing/references/FORMS.md",
            "skill://pdf-processing",
        ] {
            let e = tree.get(bad).unwrap_err();
            assert_eq!(e.code, -32602, "{bad}");
            assert!(e.message.contains(bad), "{}", e.message);
        }
        let resources = tree.resources();
        assert_eq!(resources.len(), 3);
        assert_eq!(resources[2]["name"], "refunds");
        assert_eq!(
            resources[2]["description"],
            "Process customer refund requests per company policy"
        );
        assert_eq!(resources[2]["mimeType"], "text/markdown");
        let read = tree.read(uri).unwrap();
        assert_eq!(read["contents"][0]["mimeType"], "text/markdown");
        assert_eq!(tree.read("skill://nope/x.md").unwrap_err().code, -32602);
        assert!(tree
            .read("skill://pdf-processing/templates")
            .unwrap_err()
            .message
            .contains("is a directory resource"));
    }

    #[test]
    fn directories_list_their_direct_children() {
        let tree = Tree::new(None, 0);
        let children = |uri: &str| -> Vec<(String, String)> {
            tree.directory(uri)
                .unwrap()
                .iter()
                .map(|r| {
                    (
                        r["uri"].as_str().unwrap().to_string(),
                        r["mimeType"].as_str().unwrap().to_string(),
                    )
                })
                .collect()
        };
        let pair = |u: &str, m: &str| (u.to_string(), m.to_string());
        assert_eq!(
            children("skill://pdf-processing"),
            [
                pair("skill://pdf-processing/SKILL.md", "text/markdown"),
                pair("skill://pdf-processing/references", DIRECTORY_MIME),
                pair("skill://pdf-processing/templates", DIRECTORY_MIME),
            ]
        );
        assert_eq!(
            children("skill://pdf-processing/templates"),
            [
                pair(
                    "skill://pdf-processing/templates/invoice.md",
                    "text/markdown"
                ),
                pair("skill://pdf-processing/templates/regional", DIRECTORY_MIME),
            ]
        );
        assert_eq!(
            children("skill://acme"),
            [pair("skill://acme/billing", DIRECTORY_MIME)]
        );
        // SKILL.md children carry the skill's metadata; other files their file name.
        let root = tree.directory("skill://pdf-processing").unwrap();
        assert_eq!(root[0]["name"], "pdf-processing");
        assert_eq!(root[1]["name"], "references");
        let email = tree
            .directory("skill://acme/billing/refunds/examples")
            .unwrap();
        assert_eq!(email[0]["name"], "email.md");
        for (bad, why) in [
            (
                "skill://pdf-processing/SKILL.md",
                "is not a directory resource",
            ),
            ("skill://pdf-processing/", "without a trailing slash"),
            (
                "skill://nowhere",
                "No directory resource at skill://nowhere",
            ),
        ] {
            let e = tree.directory(bad).unwrap_err();
            assert_eq!(e.code, -32602);
            assert!(e.message.contains(why), "{bad}: {}", e.message);
        }
    }

    #[test]
    fn tampering_makes_the_served_skill_md_disagree_with_its_entry() {
        let clean = Tree::new(None, 0);
        let uri = "skill://pdf-processing/SKILL.md";
        let original = text(&clean, uri);
        let manifest = |tree: &Tree| tree.entries()[0]["resources"][0].clone();
        // digest: same length, other bytes; the entry describes the original.
        let t = Tree::new(Some(Tamper::Digest), 0);
        let served = text(&t, uri);
        assert_eq!(served.len(), original.len());
        assert_ne!(served, original);
        assert_eq!(manifest(&t), manifest(&clean));
        assert_eq!(parse_frontmatter(&served), t.entries()[0]["frontmatter"]);
        // size: one byte longer.
        let t = Tree::new(Some(Tamper::Size), 0);
        assert_eq!(text(&t, uri).len(), original.len() + 1);
        assert_eq!(manifest(&t), manifest(&clean));
        // frontmatter: the file is the original and matches its manifest; the entry's
        // description does not match the file's.
        let t = Tree::new(Some(Tamper::Frontmatter), 0);
        assert_eq!(text(&t, uri), original);
        assert_eq!(manifest(&t), manifest(&clean));
        let entry = &t.entries()[0]["frontmatter"];
        let file = parse_frontmatter(&original);
        assert_ne!(entry["description"], file["description"]);
        assert_eq!(entry["name"], file["name"]);
        // Only pdf-processing is touched.
        for tree in [
            Tree::new(Some(Tamper::Digest), 0),
            Tree::new(Some(Tamper::Size), 0),
        ] {
            assert_eq!(tree.entries()[1..], clean.entries()[1..]);
            assert_eq!(
                text(&tree, "skill://git-workflow/SKILL.md"),
                text(&clean, "skill://git-workflow/SKILL.md")
            );
        }
        assert!(Tamper::parse("bytes").is_err());
    }
}
