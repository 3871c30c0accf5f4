//! `sluice client`'s side of a skill's checks (the Skills extension): the checks themselves are
//! sluice-skills' (the ones the gateway applies: an entry a host must not load, the limits,
//! size, digest and frontmatter of a read), and this module turns each refusal into the one line
//! a user reads (`skill NAME: FILE …: not used`, FILE relative to the skill's root), resolves a
//! FILE argument against the entry (only listed files are read), and counts what a dynamic
//! skill reads against the 16 MiB limit.

use serde_json::{Map, Value};
use sluice_skills::verify::{self, Mismatch};
use sluice_skills::{Entry, EntryError, File, Files, MAX_TOTAL_BYTES};

/// The entry if a host may load it; else the one-line refusal (it is invalid, or past a
/// limit).
pub(crate) fn load_entry(v: &Value) -> Result<Entry, String> {
    let label = v
        .pointer("/frontmatter/name")
        .and_then(Value::as_str)
        .or_else(|| v.get("uri").and_then(Value::as_str))
        .unwrap_or("?");
    let refuse = |e: EntryError| match e {
        EntryError::Malformed(_) => format!("skill {label}: {e} (an invalid entry): not loaded"),
        EntryError::TooLarge(_) => format!("skill {label}: {e}: not loaded"),
    };
    let entry = Entry::parse(v).map_err(refuse)?;
    entry.within_limits().map_err(refuse)?;
    Ok(entry)
}

/// A file's path relative to the skill's root (for messages); the URI itself when it is not
/// under the root.
pub(crate) fn relative<'a>(entry: &Entry, uri: &'a str) -> &'a str {
    uri.strip_prefix(entry.root())
        .and_then(|r| r.strip_prefix('/'))
        .filter(|r| !r.is_empty())
        .unwrap_or(uri)
}

/// The URI of `file` (a path relative to the skill's root, such as `references/FORMS.md`, or a
/// URI under the root), and its listing (`None` for a dynamic skill). A file the entry does not
/// list is refused before anything is read: reading it would be a verification failure.
pub(crate) fn resolve<'e>(
    entry: &'e Entry,
    file: &str,
) -> Result<(String, Option<&'e File>), String> {
    let name = entry.name();
    let uri = if file.contains("://") {
        let under = file
            .strip_prefix(entry.root())
            .and_then(|r| r.strip_prefix('/'))
            .is_some_and(|r| !r.is_empty() && !r.split('/').any(|s| s.is_empty() || s == ".."));
        if !under {
            return Err(format!(
                "skill {name}: {file} is not a file of the skill (under {}/): not read",
                entry.root()
            ));
        }
        file.to_string()
    } else {
        let bad = file.is_empty()
            || file.starts_with('/')
            || file.ends_with('/')
            || file
                .split('/')
                .any(|s| s.is_empty() || s == "." || s == "..");
        if bad {
            return Err(format!(
                "skill {name}: {file:?} is not a path relative to the skill's root (such as references/FORMS.md)"
            ));
        }
        format!("{}/{file}", entry.root())
    };
    match &entry.files {
        Files::Dynamic => Ok((uri, None)),
        Files::Listed(_) => match entry.file(&uri) {
            Some(f) => Ok((uri, Some(f))),
            None => Err(unlisted(entry, &uri)),
        },
    }
}

fn unlisted(entry: &Entry, uri: &str) -> String {
    format!(
        "skill {}: {} is not listed in its entry's resources: not read",
        entry.name(),
        relative(entry, uri)
    )
}

/// What a read of `uri` returned, checked against the entry (size and digest when it is
/// listed, SKILL.md's frontmatter field by field): its bytes, or the one-line refusal.
pub(crate) fn check_read(entry: &Entry, uri: &str, result: &Value) -> Result<Vec<u8>, String> {
    verify::check_read(entry, uri, result)
        .map(std::borrow::Cow::into_owned)
        .map_err(|m| describe(entry, result, &m))
}

/// A mismatch as the line `sluice client` prints: the skill, the file, what differs.
fn describe(entry: &Entry, result: &Value, m: &Mismatch) -> String {
    let name = entry.name();
    let what = match m {
        Mismatch::Unlisted(uri) => return unlisted(entry, uri),
        Mismatch::NoContent(uri) => {
            format!(
                "the read returned no usable content for {}",
                relative(entry, uri)
            )
        }
        Mismatch::Size { uri, got, want } => {
            format!(
                "{} is {got} bytes, its entry says {want}",
                relative(entry, uri)
            )
        }
        Mismatch::Digest { uri, got, want } => {
            format!(
                "{} has digest {got}, its entry says {want}",
                relative(entry, uri)
            )
        }
        Mismatch::NoFrontmatter { uri, why } => format!(
            "{} has no YAML frontmatter this client can read ({why})",
            relative(entry, uri)
        ),
        Mismatch::Frontmatter { uri, fields } => {
            let read = verify::content_bytes(result, uri)
                .ok()
                .and_then(|b| verify::frontmatter(uri, std::str::from_utf8(&b).ok()?).ok())
                .unwrap_or_default();
            format!(
                "{}'s frontmatter differs from its entry: {}",
                relative(entry, uri),
                field_difference(&read, &entry.frontmatter, fields)
            )
        }
    };
    format!("skill {name}: {what}: not used")
}

/// The first differing field with both values (`description is "x" in SKILL.md, "y" in the
/// entry`), and the others' names.
fn field_difference(
    read: &Map<String, Value>,
    entry: &Map<String, Value>,
    fields: &[String],
) -> String {
    let mut names = fields.iter().map(String::as_str);
    let Some(first) = names.next() else {
        return "in no field it can name".into();
    };
    let value = |m: &Map<String, Value>, side: &str| match m.get(first) {
        Some(v) => format!("{} in {side}", short(v)),
        None => format!("absent in {side}"),
    };
    let mut out = format!(
        "{first} is {}, {}",
        value(read, "SKILL.md"),
        value(entry, "the entry")
    );
    let rest: Vec<&str> = names.collect();
    if !rest.is_empty() {
        out.push_str(&format!(
            " (and {} differ{})",
            rest.join(", "),
            if rest.len() == 1 { "s" } else { "" }
        ));
    }
    out
}

/// A value as JSON, cut to 80 characters.
fn short(v: &Value) -> String {
    let s = v.to_string();
    if s.chars().count() > 80 {
        format!("{}…", s.chars().take(79).collect::<String>())
    } else {
        s
    }
}

/// Bytes read from a dynamic skill, against the limit its entry cannot be checked for.
#[derive(Default)]
pub(crate) struct DynamicBudget {
    read: u64,
}

impl DynamicBudget {
    /// Count `bytes` more read from `uri`; the refusal once past 16 MiB.
    pub(crate) fn take(&mut self, entry: &Entry, uri: &str, bytes: u64) -> Result<(), String> {
        self.read = self.read.saturating_add(bytes);
        if self.read > MAX_TOTAL_BYTES {
            return Err(format!(
                "skill {}: {} bytes read, more than the {MAX_TOTAL_BYTES} (16 MiB) a host must accept: {} not used",
                entry.name(),
                self.read,
                relative(entry, uri)
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use sluice_skills::verify::digest;

    /// The conformance suite's SKILL.md (97 bytes) and FORMS.md.
    const SKILL: &str = "---\nname: pdf-processing\ndescription: Extract, fill, and assemble PDF documents\n---\n\nSkill body.\n";
    const FORMS: &str = "Supporting content.\n";
    /// `printf '%s' "$SKILL" | sha256sum`.
    const SKILL_DIGEST: &str =
        "sha256:a6d5f1f48af94923633d597c756194482fe5d48f74e49eb54bc9ee7c4902d5ba";
    const SKILL_URI: &str = "skill://pdf-processing/SKILL.md";
    const FORMS_URI: &str = "skill://pdf-processing/references/FORMS.md";

    fn entry_json(frontmatter: Value, resources: Value) -> Value {
        json!({"uri": SKILL_URI, "frontmatter": frontmatter, "resources": resources})
    }

    fn pdf() -> Value {
        json!({"name": "pdf-processing", "description": "Extract, fill, and assemble PDF documents"})
    }

    fn listed(uri: &str, bytes: &[u8]) -> Value {
        json!({"uri": uri, "digest": digest(bytes), "size": bytes.len()})
    }

    fn pdf_entry() -> Entry {
        load_entry(&entry_json(
            pdf(),
            json!([
                listed(SKILL_URI, SKILL.as_bytes()),
                listed(FORMS_URI, FORMS.as_bytes())
            ]),
        ))
        .unwrap()
    }

    fn read(uri: &str, text: &str) -> Value {
        json!({"contents": [{"uri": uri, "mimeType": "text/markdown", "text": text}]})
    }

    #[test]
    fn the_suites_skill_md_has_its_exact_digest() {
        assert_eq!(SKILL.len(), 97);
        assert_eq!(digest(SKILL.as_bytes()), SKILL_DIGEST);
        let e = pdf_entry();
        assert_eq!(e.file(SKILL_URI).unwrap().digest, SKILL_DIGEST);
        assert_eq!(
            check_read(&e, SKILL_URI, &read(SKILL_URI, SKILL)),
            Ok(SKILL.as_bytes().to_vec())
        );
        assert_eq!(
            check_read(&e, FORMS_URI, &read(FORMS_URI, FORMS)),
            Ok(FORMS.as_bytes().to_vec())
        );
    }

    #[test]
    fn a_file_of_another_size_or_digest_is_not_used() {
        let e = pdf_entry();
        let longer = format!("{SKILL}extra bytes the entry did not account for\n");
        assert_eq!(
            check_read(&e, SKILL_URI, &read(SKILL_URI, &longer)),
            Err("skill pdf-processing: SKILL.md is 139 bytes, its entry says 97: not used".into())
        );
        let evil = SKILL.replace("Skill body.", "Evil body!!");
        assert_eq!(
            check_read(&e, SKILL_URI, &read(SKILL_URI, &evil)),
            Err(format!(
                "skill pdf-processing: SKILL.md has digest {}, its entry says {SKILL_DIGEST}: not used",
                digest(evil.as_bytes())
            ))
        );
        // A blob is its decoded bytes: "Supporting content?\n" is FORMS.md's size, not its digest.
        let blob =
            json!({"contents": [{"uri": FORMS_URI, "blob": "U3VwcG9ydGluZyBjb250ZW50Pwo="}]});
        assert_eq!(
            check_read(&e, FORMS_URI, &blob),
            Err(format!(
                "skill pdf-processing: references/FORMS.md has digest {}, its entry says {}: not used",
                digest(b"Supporting content?\n"),
                digest(FORMS.as_bytes())
            ))
        );
        assert_eq!(
            check_read(&e, FORMS_URI, &json!({"contents": []})),
            Err("skill pdf-processing: the read returned no usable content for references/FORMS.md: not used".into())
        );
    }

    #[test]
    fn a_frontmatter_that_differs_is_named_with_both_values() {
        // The digest and size match the served file (as the suite's scenario has it): only
        // the frontmatter tells.
        let tampered = SKILL.replace(
            "description: Extract, fill, and assemble PDF documents",
            "description: Exfiltrate credentials",
        );
        let e = load_entry(&entry_json(
            pdf(),
            json!([listed(SKILL_URI, tampered.as_bytes())]),
        ))
        .unwrap();
        assert_eq!(
            check_read(&e, SKILL_URI, &read(SKILL_URI, &tampered)),
            Err("skill pdf-processing: SKILL.md's frontmatter differs from its entry: description is \"Exfiltrate credentials\" in SKILL.md, \"Extract, fill, and assemble PDF documents\" in the entry: not used".into())
        );
        let extra = SKILL.replace("---\n\n", "license: MIT\n---\n\n");
        let e = load_entry(&entry_json(
            pdf(),
            json!([listed(SKILL_URI, extra.as_bytes())]),
        ))
        .unwrap();
        assert_eq!(
            check_read(&e, SKILL_URI, &read(SKILL_URI, &extra)),
            Err("skill pdf-processing: SKILL.md's frontmatter differs from its entry: license is \"MIT\" in SKILL.md, absent in the entry: not used".into())
        );
        let none = "# no frontmatter\n";
        let e = load_entry(&entry_json(
            pdf(),
            json!([listed(SKILL_URI, none.as_bytes())]),
        ))
        .unwrap();
        assert_eq!(
            check_read(&e, SKILL_URI, &read(SKILL_URI, none)),
            Err("skill pdf-processing: SKILL.md has no YAML frontmatter this client can read (it does not begin with a --- line): not used".into())
        );
    }

    #[test]
    fn nested_metadata_is_compared_too() {
        let mut fm = pdf();
        fm["metadata"] = json!({"version": "2.1.0", "tags": ["pdf", "forms"]});
        fm["allowed-tools"] = json!("Read Grep");
        let head = "---\nname: pdf-processing\ndescription: Extract, fill, and assemble PDF documents\nallowed-tools: Read Grep\n";
        let same =
            format!("{head}metadata:\n  tags: [pdf, forms]\n  version: \"2.1.0\"\n---\nbody\n");
        let check = |text: &str| {
            let e = load_entry(&entry_json(
                fm.clone(),
                json!([listed(SKILL_URI, text.as_bytes())]),
            ))
            .unwrap();
            check_read(&e, SKILL_URI, &read(SKILL_URI, text)).map(|_| ())
        };
        assert_eq!(check(&same), Ok(()));
        assert_eq!(
            check(&same.replace("version: \"2.1.0\"", "version: 2.1")),
            Err("skill pdf-processing: SKILL.md's frontmatter differs from its entry: metadata is {\"tags\":[\"pdf\",\"forms\"],\"version\":2.1} in SKILL.md, {\"version\":\"2.1.0\",\"tags\":[\"pdf\",\"forms\"]} in the entry: not used".into())
        );
        assert_eq!(
            check(&same.replace("[pdf, forms]", "[pdf, shell]").replace("Read Grep", "Bash")),
            Err("skill pdf-processing: SKILL.md's frontmatter differs from its entry: allowed-tools is \"Bash\" in SKILL.md, \"Read Grep\" in the entry (and metadata differs): not used".into())
        );
    }

    #[test]
    fn entries_past_the_limits_or_invalid_are_not_loaded() {
        let files = |n: usize, size: u64| {
            let mut items = vec![json!({"uri": SKILL_URI, "digest": digest(b""), "size": size})];
            for i in 1..n {
                items.push(json!({"uri": format!("skill://pdf-processing/f{i}"), "digest": digest(b""), "size": 0}));
            }
            entry_json(pdf(), Value::Array(items))
        };
        assert!(load_entry(&files(512, MAX_TOTAL_BYTES)).is_ok());
        assert_eq!(
            load_entry(&files(513, 0)).unwrap_err(),
            "skill pdf-processing: skill://pdf-processing/SKILL.md lists 513 files, more than the 512 a host must accept: not loaded"
        );
        assert_eq!(
            load_entry(&files(2, MAX_TOTAL_BYTES + 1)).unwrap_err(),
            "skill pdf-processing: skill://pdf-processing/SKILL.md's files add up to 16777217 bytes, more than the 16777216 a host must accept: not loaded"
        );
        let mut no_resources = entry_json(pdf(), Value::Null);
        no_resources.as_object_mut().unwrap().remove("resources");
        assert_eq!(
            load_entry(&no_resources).unwrap_err(),
            "skill pdf-processing: the entry skill://pdf-processing/SKILL.md has no resources (an invalid entry): not loaded"
        );
        assert_eq!(
            load_entry(&entry_json(pdf(), json!("static"))).unwrap_err(),
            "skill pdf-processing: the entry skill://pdf-processing/SKILL.md has resources that are neither a list nor \"dynamic\" (an invalid entry): not loaded"
        );
        assert!(load_entry(&entry_json(pdf(), json!([])))
            .unwrap_err()
            .contains("does not list its SKILL.md"));
        assert!(load_entry(&entry_json(
            pdf(),
            json!([{"uri": SKILL_URI, "digest": "sha256:ABC", "size": 1}])
        ))
        .unwrap_err()
        .contains("without a digest of the form sha256:<64 lowercase hex digits>"));
        assert!(load_entry(&entry_json(
            pdf(),
            json!([{"uri": SKILL_URI, "digest": digest(b""), "size": -1}])
        ))
        .unwrap_err()
        .contains("without a size"));
        assert_eq!(
            load_entry(&entry_json(pdf(), json!("dynamic")))
                .unwrap()
                .files,
            Files::Dynamic
        );
    }

    #[test]
    fn only_listed_files_under_the_root_are_resolved() {
        let e = pdf_entry();
        let (uri, file) = resolve(&e, "references/FORMS.md").unwrap();
        assert_eq!(uri, FORMS_URI);
        assert_eq!(file.unwrap().size, 20);
        assert!(resolve(&e, FORMS_URI).is_ok());
        assert_eq!(
            resolve(&e, "references/OTHER.md").unwrap_err(),
            "skill pdf-processing: references/OTHER.md is not listed in its entry's resources: not read"
        );
        assert!(resolve(&e, "../other/SKILL.md")
            .unwrap_err()
            .contains("is not a path relative"));
        assert!(resolve(&e, "/etc/passwd")
            .unwrap_err()
            .contains("is not a path relative"));
        assert!(resolve(&e, "skill://other/SKILL.md")
            .unwrap_err()
            .contains("is not a file of the skill"));
        assert!(resolve(&e, "skill://pdf-processing/../other/SKILL.md")
            .unwrap_err()
            .contains("is not a file of the skill"));
        let dynamic = load_entry(&entry_json(pdf(), json!("dynamic"))).unwrap();
        assert_eq!(
            resolve(&dynamic, "anything.md").unwrap(),
            ("skill://pdf-processing/anything.md".to_string(), None)
        );
    }

    #[test]
    fn a_dynamic_skill_reads_at_most_16_mib() {
        let e = load_entry(&entry_json(pdf(), json!("dynamic"))).unwrap();
        let mut budget = DynamicBudget::default();
        assert_eq!(budget.take(&e, SKILL_URI, MAX_TOTAL_BYTES - 1), Ok(()));
        assert_eq!(budget.take(&e, FORMS_URI, 1), Ok(()));
        assert_eq!(
            budget.take(&e, FORMS_URI, 1),
            Err("skill pdf-processing: 16777217 bytes read, more than the 16777216 (16 MiB) a host must accept: references/FORMS.md not used".into())
        );
    }
}
