//! The skills part of the catalog (the Skills extension): every upstream that declares it gets
//! a prefix (its `skill_prefix`, else its id; none for `--passthrough`) under which its
//! `skill://` URIs are shown — in its skill entries, its resources and templates, and every
//! result of a request routed back to it — and the entries the gateway holds to check each skill
//! file it passes on.

use foldhash::HashMap;
use serde_json::Value;
use sluice_config::UpstreamSpec;
use sluice_skills::{entry, uri, Entry};
use sluice_upstream::UpstreamLists;
use std::borrow::Cow;
use std::sync::Arc;

/// The skills every upstream that declares the extension lists, and where their URIs go.
#[derive(Debug, Default)]
pub struct Skills {
    /// The entries, as clients see them (`skills/list`).
    pub(super) entries: Vec<Value>,
    /// The slot of each entry.
    entry_slots: Vec<usize>,
    /// Each declaring upstream's prefix, by slot (empty: URIs unchanged).
    prefixes: Vec<(String, usize)>,
    /// Does the upstream at a slot implement `resources/directory/read`?
    directory: Vec<usize>,
    /// The entry (as its upstream lists it) of each listed skill file, by the URI clients see.
    files: HashMap<String, Arc<Entry>>,
}

/// Where a skill URI goes.
#[derive(Debug, Clone)]
pub struct SkillRoute<'c, 'u> {
    /// The upstream's slot.
    pub slot: usize,
    /// The URI there.
    pub uri: Cow<'u, str>,
    /// The prefix its URIs are shown under (empty: unchanged).
    pub prefix: &'c str,
}

impl Skills {
    /// Take in one upstream's skills, when it declares the extension. Entries a host must not
    /// load are left out (a warning says why), as are skills of a prefix already taken.
    pub(super) fn add(
        &mut self,
        slot: usize,
        spec: &UpstreamSpec,
        lists: &UpstreamLists,
        warnings: &mut Vec<String>,
    ) {
        let Some(settings) = &lists.skill_settings else {
            return;
        };
        let prefix = spec.shown_skill_prefix().to_string();
        if let Some((_, other)) = self.prefixes.iter().find(|(p, _)| *p == prefix) {
            warnings.push(format!(
                "skill prefix {prefix:?} of upstream {:?} is taken by the upstream at slot {other}: its skills are not served",
                spec.id
            ));
            return;
        }
        if settings.get("directoryRead").and_then(Value::as_bool) == Some(true) {
            self.directory.push(slot);
        }
        for item in &lists.skills {
            let parsed = match Entry::parse(item) {
                Ok(e) => Arc::new(e),
                Err(e) => {
                    warnings.push(format!("upstream {:?}: skill left out: {e}", spec.id));
                    continue;
                }
            };
            let mut shown = item.clone();
            entry::rename_uris(&mut shown, |u| Some(uri::shown(&prefix, u).into_owned()));
            if let sluice_skills::Files::Listed(files) = &parsed.files {
                for f in files {
                    self.files
                        .insert(uri::shown(&prefix, &f.uri).into_owned(), parsed.clone());
                }
            }
            self.entries.push(shown);
            self.entry_slots.push(slot);
        }
        self.prefixes.push((prefix, slot));
    }

    /// How an upstream's URI is shown (unchanged unless the upstream declares the extension).
    pub fn shown<'u>(&self, slot: usize, uri: &'u str) -> Cow<'u, str> {
        match self.prefix_of(slot) {
            Some(p) => uri::shown(p, uri),
            None => Cow::Borrowed(uri),
        }
    }

    /// The prefix of the upstream at `slot`, when it declares the extension.
    pub fn prefix_of(&self, slot: usize) -> Option<&str> {
        self.prefixes
            .iter()
            .find(|(_, s)| *s == slot)
            .map(|(p, _)| p.as_str())
    }

    /// Where a client's `skill://` URI goes: the upstream whose prefix it is under.
    pub fn route<'c, 'u>(&'c self, client_uri: &'u str) -> Option<SkillRoute<'c, 'u>> {
        self.prefixes.iter().find_map(|(prefix, slot)| {
            Some(SkillRoute {
                slot: *slot,
                uri: uri::upstream_uri(prefix, client_uri)?,
                prefix,
            })
        })
    }

    /// [`Skills::route`] for `skills/get` and `resources/directory/read`, where a URI of
    /// another scheme (a server may serve skills under its own) goes to the one upstream that
    /// declares the extension, unchanged; with several, nowhere.
    pub fn route_any<'c, 'u>(&'c self, client_uri: &'u str) -> Option<SkillRoute<'c, 'u>> {
        if client_uri.starts_with(uri::SCHEME) {
            return self.route(client_uri);
        }
        match self.prefixes.as_slice() {
            [(prefix, slot)] => Some(SkillRoute {
                slot: *slot,
                uri: Cow::Borrowed(client_uri),
                prefix,
            }),
            _ => None,
        }
    }

    /// Does any upstream declare the extension?
    pub fn any(&self) -> bool {
        !self.prefixes.is_empty()
    }

    /// Does any upstream implement `resources/directory/read`?
    pub fn any_directory_read(&self) -> bool {
        !self.directory.is_empty()
    }

    /// Does the upstream at `slot` implement `resources/directory/read`?
    pub fn directory_read(&self, slot: usize) -> bool {
        self.directory.contains(&slot)
    }

    /// Keep only the skills `keep` keeps (by the URI clients see of their `SKILL.md`, and
    /// slot): an endpoint's selection. (The entries held to check reads stay: checking a read
    /// never widens what is served.)
    pub(super) fn retain(&mut self, keep: impl Fn(&str, usize) -> bool) {
        let entries = std::mem::take(&mut self.entries);
        let slots = std::mem::take(&mut self.entry_slots);
        for (e, slot) in entries.into_iter().zip(slots) {
            if keep(e.get("uri").and_then(Value::as_str).unwrap_or(""), slot) {
                self.entries.push(e);
                self.entry_slots.push(slot);
            }
        }
    }

    /// The entry a file clients see as `uri` belongs to (as its upstream lists it).
    pub fn entry_of(&self, client_uri: &str) -> Option<&Arc<Entry>> {
        self.files.get(client_uri)
    }
}
