//! `sluice client URL skill NAME|URI [FILE]`: load a skill of the Skills extension as a host
//! does. Its entry comes from `skills/list` (by frontmatter name: two entries of that name are
//! refused, naming both) or `skills/get` (by its SKILL.md URI); the entry is checked
//! (valid, within the limits: sluice-skills' checks, worded by `verify.rs`), then SKILL.md is
//! read with `resources/read` and verified (size, digest, frontmatter) before anything is
//! printed, and only then FILE, when the entry lists it, verified the same way. The first failure ends the run (exit 1) with no
//! further read. Nothing is read before the skill is loaded: `skills` lists without reading.

use super::verify::{self, DynamicBudget};
use super::{list_all, pretty, request, request_with_input, Failure, ListKind};
use crate::client::elicit::Elicit;
use serde_json::{json, Map, Value};
use sluice_skills::{Entry, Files, EXTENSION};
use sluice_upstream::{Connection, ExtraHeaders};
use std::io::Write;
use std::time::Duration;

/// Does the server declare the Skills extension? Else the refusal to use it.
pub(super) fn declared(conn: &Connection) -> Result<(), Failure> {
    let caps = conn
        .init_result()
        .get("capabilities")
        .unwrap_or(&Value::Null);
    if sluice_skills::declared(caps).is_some_and(Value::is_object) {
        return Ok(());
    }
    Err(Failure::Result(format!(
        "the server does not declare the Skills extension (capabilities.extensions[\"{EXTENSION}\"]): it serves no skills/list or skills/get"
    )))
}

/// What the run asked for.
pub(super) struct Load<'a> {
    /// A skill's frontmatter name, or the URI of its SKILL.md.
    pub skill: &'a str,
    /// A file of the skill to print instead of SKILL.md (a path relative to its root).
    pub file: Option<&'a str>,
    pub timeout: Duration,
    pub readable: bool,
    pub elicit: Elicit,
}

/// Load the skill, verify what is read, print SKILL.md or FILE.
pub(super) async fn load(conn: &Connection, load: Load<'_>) -> Result<(), Failure> {
    declared(conn)?;
    let raw = entry(conn, load.skill, load.timeout).await?;
    let entry = verify::load_entry(&raw).map_err(Failure::Result)?;
    let name = entry.name();
    // A file that is not listed is refused before anything is read.
    let wanted = load
        .file
        .map(|f| verify::resolve(&entry, f).map(|(uri, _)| uri))
        .transpose()
        .map_err(Failure::Result)?;
    if entry.files == Files::Dynamic {
        eprintln!(
            "sluice client: skill {name}: its resources are \"dynamic\": no digests, so its files are not verified (only SKILL.md's frontmatter is; at most 16 MiB is read)"
        );
    }
    let mut reader = Reader {
        conn,
        entry: &entry,
        load: &load,
        budget: DynamicBudget::default(),
    };
    let (mut uri, mut result, mut bytes) = (entry.uri.clone(), Value::Null, Vec::new());
    for next in std::iter::once(entry.uri.clone()).chain(wanted.filter(|w| *w != entry.uri)) {
        (result, bytes) = reader.read(&next).await?;
        uri = next;
    }
    if load.readable {
        let mut out = std::io::stdout().lock();
        let ends = bytes.last().is_none_or(|b| *b == b'\n');
        let written = out
            .write_all(&bytes)
            .and_then(|()| if ends { Ok(()) } else { out.write_all(b"\n") })
            .and_then(|()| out.flush());
        if let Err(e) = written {
            return Err(Failure::Connect(format!("cannot write the output: {e}")));
        }
    } else {
        println!(
            "{}",
            pretty(&json!({
                "skill": raw,
                "uri": uri,
                "verified": entry.files != Files::Dynamic,
                "read": result,
            }))
        );
    }
    Ok(())
}

/// The skill's entry: by URI from `skills/get`, by name from `skills/list`.
async fn entry(conn: &Connection, skill: &str, timeout: Duration) -> Result<Value, Failure> {
    if skill.contains("://") {
        if !skill.ends_with("/SKILL.md") {
            return Err(Failure::Usage(format!(
                "{skill} is not a skill's URI: that is the URI of its SKILL.md (…/SKILL.md)"
            )));
        }
        let result = request(conn, "skills/get", Some(json!({"uri": skill})), timeout).await?;
        let Some(got) = result.get("skill").filter(|s| s.is_object()) else {
            return Err(Failure::Result(format!(
                "skills/get {skill} answered with no skill entry: not loaded"
            )));
        };
        match got.get("uri").and_then(Value::as_str) {
            Some(uri) if uri == skill => return Ok(got.clone()),
            uri => {
                return Err(Failure::Result(format!(
                    "skills/get {skill} answered with the entry of {}: not loaded",
                    uri.unwrap_or("(no uri)")
                )))
            }
        }
    }
    let listed = list_all(conn, ListKind::Skills, timeout).await?;
    by_name(&listed, skill).map_err(Failure::Result)
}

/// The one entry of `listed` whose frontmatter name is `name`: none, or two (names are not
/// unique: both URIs are named, and neither is preferred), is a refusal.
fn by_name(listed: &[Value], name: &str) -> Result<Value, String> {
    let named: Vec<&Value> = listed
        .iter()
        .filter(|s| s.pointer("/frontmatter/name").and_then(Value::as_str) == Some(name))
        .collect();
    match named.as_slice() {
        [one] => Ok((*one).clone()),
        [] => Err(format!(
            "no skill named {name} in skills/list ({} listed); a skill the list leaves out is loaded by its URI (…/SKILL.md)",
            listed.len()
        )),
        many => Err(format!(
            "{} skills are named {name}: {}; name one by its URI",
            many.len(),
            many.iter()
                .map(|s| s.get("uri").and_then(Value::as_str).unwrap_or("(no uri)"))
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}

/// Reads the skill's files, verifying each against the entry and counting what a dynamic
/// skill reads against the 16 MiB limit.
struct Reader<'a> {
    conn: &'a Connection,
    entry: &'a Entry,
    load: &'a Load<'a>,
    budget: DynamicBudget,
}

impl Reader<'_> {
    /// Read `uri` (SKILL.md or a file the entry lists) and verify it: the result and its
    /// bytes.
    async fn read(&mut self, uri: &str) -> Result<(Value, Vec<u8>), Failure> {
        let mut params = Map::new();
        params.insert("uri".into(), json!(uri));
        let result = request_with_input(
            self.conn,
            "resources/read",
            params,
            &ExtraHeaders::NONE,
            self.load.timeout,
            self.load.elicit,
        )
        .await?;
        let bytes = verify::check_read(self.entry, uri, &result).map_err(Failure::Result)?;
        if self.entry.files == Files::Dynamic {
            self.budget
                .take(self.entry, uri, bytes.len() as u64)
                .map_err(Failure::Result)?;
        }
        Ok((result, bytes))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_two_skills_share_is_refused_naming_both() {
        let listed = [
            json!({"uri": "skill://acme/billing/refunds/SKILL.md", "frontmatter": {"name": "refunds"}}),
            json!({"uri": "skill://git-workflow/SKILL.md", "frontmatter": {"name": "git-workflow"}}),
            json!({"uri": "skill://acme/support/refunds/SKILL.md", "frontmatter": {"name": "refunds"}}),
        ];
        assert_eq!(by_name(&listed, "git-workflow"), Ok(listed[1].clone()));
        assert_eq!(
            by_name(&listed, "refunds"),
            Err("2 skills are named refunds: skill://acme/billing/refunds/SKILL.md, skill://acme/support/refunds/SKILL.md; name one by its URI".into())
        );
        assert_eq!(
            by_name(&listed, "pdf"),
            Err("no skill named pdf in skills/list (3 listed); a skill the list leaves out is loaded by its URI (…/SKILL.md)".into())
        );
    }
}
