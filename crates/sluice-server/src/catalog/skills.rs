//! The skills part of the catalog (the Skills extension): every upstream that declares it gets
//! a prefix (its `skill_prefix`, else its id; none for `--passthrough`) under which its
//! `skill://` URIs are shown — in its skill entries, its resources and templates, and every
//! result of a request routed back to it —, a skill of it may be served under a path of the
//! tree's choosing or not at all (`skills[]` of `mcp/expose.json`), and the gateway holds the
//! entries it checks each skill file against before passing it on.

use foldhash::HashMap;
use serde_json::Value;
use sluice_config::{SkillEntry, UpstreamSpec};
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
    /// Skills served under a path of the tree's choosing: (root clients see, root at the
    /// upstream, slot), roots as `skill://<path>`.
    renamed: Vec<(String, String, usize)>,
    /// Skill roots at an upstream not reached under its prefix (renamed or not served): (root,
    /// slot).
    withheld: Vec<(String, usize)>,
    /// Does the upstream at a slot implement `resources/directory/read`?
    directory: Vec<usize>,
    /// The entry (as its upstream lists it) of each listed skill file, by the URI clients see.
    files: HashMap<String, Arc<Entry>>,
}

/// Where a skill URI goes.
#[derive(Debug, Clone)]
pub struct SkillRoute<'u> {
    /// The upstream's slot.
    pub slot: usize,
    /// The URI there.
    pub uri: Cow<'u, str>,
}

/// `uri` is `root` or under it: what follows the root (`""` or `/…`).
fn under<'a>(uri: &'a str, root: &str) -> Option<&'a str> {
    let rest = uri.strip_prefix(root)?;
    (rest.is_empty() || rest.starts_with('/')).then_some(rest)
}

impl Skills {
    /// Take in one upstream's skills, when it declares the extension, with the `skills[]`
    /// entries of the tree. Entries a host must not load are left out (a warning says why), as
    /// are skills of a prefix already taken and skills the tree does not serve.
    pub(super) fn add(
        &mut self,
        slot: usize,
        spec: &UpstreamSpec,
        lists: &UpstreamLists,
        renames: &[SkillEntry],
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
        self.prefixes.push((prefix, slot));
        for r in renames.iter().filter(|r| r.upstream == spec.id) {
            let root = format!("{}{}", uri::SCHEME, r.skill);
            match (&r.path, r.enabled) {
                (Some(path), true) => {
                    let shown = format!("{}{path}", uri::SCHEME);
                    self.renamed.push((shown, root.clone(), slot));
                    self.withheld.push((root, slot));
                }
                (None, true) => {}
                (_, false) => self.withheld.push((root, slot)),
            }
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
            if self.not_served(slot, &parsed.uri) {
                continue;
            }
            let mut shown = item.clone();
            entry::rename_uris(&mut shown, |u| Some(self.shown(slot, u).into_owned()));
            if let sluice_skills::Files::Listed(files) = &parsed.files {
                for f in files {
                    let at = self.shown(slot, &f.uri).into_owned();
                    self.files.insert(at, parsed.clone());
                }
            }
            self.entries.push(shown);
            self.entry_slots.push(slot);
        }
    }

    /// Is this URI of the upstream at `slot` under a skill the tree does not serve?
    pub fn not_served(&self, slot: usize, upstream_uri: &str) -> bool {
        self.withheld
            .iter()
            .any(|(root, s)| *s == slot && under(upstream_uri, root).is_some())
            && !self
                .renamed
                .iter()
                .any(|(_, root, s)| *s == slot && under(upstream_uri, root).is_some())
    }

    /// How an upstream's URI is shown (unchanged unless the upstream declares the extension):
    /// under the path the tree gives its skill, else under the upstream's prefix.
    pub fn shown<'u>(&self, slot: usize, upstream_uri: &'u str) -> Cow<'u, str> {
        for (shown, root, s) in &self.renamed {
            if *s == slot {
                if let Some(rest) = under(upstream_uri, root) {
                    return Cow::Owned(format!("{shown}{rest}"));
                }
            }
        }
        match self.prefix_of(slot) {
            Some(p) => uri::shown(p, upstream_uri),
            None => Cow::Borrowed(upstream_uri),
        }
    }

    /// The prefix of the upstream at `slot`, when it declares the extension.
    pub fn prefix_of(&self, slot: usize) -> Option<&str> {
        self.prefixes
            .iter()
            .find(|(_, s)| *s == slot)
            .map(|(p, _)| p.as_str())
    }

    /// Where a client's `skill://` URI goes: the skill the tree serves at that path, else the
    /// upstream whose prefix it is under (never to a skill the tree renamed or does not serve).
    pub fn route<'u>(&self, client_uri: &'u str) -> Option<SkillRoute<'u>> {
        for (shown, root, slot) in &self.renamed {
            if let Some(rest) = under(client_uri, shown) {
                return Some(SkillRoute {
                    slot: *slot,
                    uri: Cow::Owned(format!("{root}{rest}")),
                });
            }
        }
        self.prefixes.iter().find_map(|(prefix, slot)| {
            let at = uri::upstream_uri(prefix, client_uri)?;
            let withheld = self
                .withheld
                .iter()
                .any(|(root, s)| s == slot && under(&at, root).is_some());
            (!withheld).then_some(SkillRoute {
                slot: *slot,
                uri: at,
            })
        })
    }

    /// [`Skills::route`] for `skills/get` and `resources/directory/read`, where a URI of
    /// another scheme (a server may serve skills under its own) goes to the one upstream that
    /// declares the extension, unchanged; with several, nowhere.
    pub fn route_any<'u>(&self, client_uri: &'u str) -> Option<SkillRoute<'u>> {
        if client_uri.starts_with(uri::SCHEME) {
            return self.route(client_uri);
        }
        match self.prefixes.as_slice() {
            [(_, slot)] => Some(SkillRoute {
                slot: *slot,
                uri: Cow::Borrowed(client_uri),
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
