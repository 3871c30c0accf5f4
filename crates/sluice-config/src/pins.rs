//! Pinned definitions (`mcp/pins.json`): per upstream, the approved definition of each tool,
//! prompt and resource template with its digest, and what the upstream offers now where that
//! differs (`seen`, awaiting review); the judgement of a definition against its pin, the review
//! diff, and approval.

use crate::error::ConfigError;
use crate::store;
use serde_json::{json, Map, Value};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// What a pin policy does with a definition that differs from its pin (`"pin"` on an upstream).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PinMode {
    /// Not listed; a call to it is refused until the change is approved.
    Hold,
    /// Served and flagged (log, audit, admin page, `_meta`).
    Warn,
    /// Not pinned (curated tools are still tracked as with `warn`).
    #[default]
    Off,
}

/// What a pin policy does with a definition never seen before (`"new"` on an upstream).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum NewMode {
    /// Not listed until approved.
    Hold,
    /// Served, and pinned as first seen.
    #[default]
    Allow,
}

/// An upstream's pin policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PinPolicy {
    /// Changed definitions.
    pub pin: PinMode,
    /// New definitions.
    pub new: NewMode,
}

/// The three kinds of definition a pin covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    /// A tool, by name.
    Tool,
    /// A prompt, by name.
    Prompt,
    /// A resource template, by URI template.
    Template,
}

impl Kind {
    /// Every kind, in the file's order.
    pub const ALL: [Kind; 3] = [Kind::Tool, Kind::Prompt, Kind::Template];

    /// Its member in the file.
    pub fn key(self) -> &'static str {
        match self {
            Kind::Tool => "tools",
            Kind::Prompt => "prompts",
            Kind::Template => "templates",
        }
    }

    /// Its name in messages.
    pub fn noun(self) -> &'static str {
        match self {
            Kind::Tool => "tool",
            Kind::Prompt => "prompt",
            Kind::Template => "resource template",
        }
    }

    /// The fields of a definition that are pinned.
    fn fields(self) -> &'static [&'static str] {
        match self {
            Kind::Tool => &[
                "name",
                "title",
                "description",
                "inputSchema",
                "outputSchema",
                "annotations",
            ],
            Kind::Prompt => &["name", "title", "description", "arguments"],
            Kind::Template => &[
                "uriTemplate",
                "name",
                "title",
                "description",
                "mimeType",
                "annotations",
            ],
        }
    }

    /// What names an item of this kind: the name, or the URI template.
    pub fn item_key(self, item: &Value) -> Option<&str> {
        let field = match self {
            Kind::Template => "uriTemplate",
            _ => "name",
        };
        item.get(field)?.as_str()
    }
}

/// The pinned part of an item's definition (name, title, description, schemas, annotations).
pub fn definition(kind: Kind, item: &Value) -> Value {
    let mut out = Map::new();
    for f in kind.fields() {
        if let Some(v) = item.get(*f) {
            out.insert((*f).to_string(), v.clone());
        }
    }
    Value::Object(out)
}

/// `sha256:<hex>` of a definition's canonical JSON (`sluice_core::canonical`: members sorted
/// at every level), so the order an upstream writes its members in does not count as a change.
pub fn digest(definition: &Value) -> String {
    let mut text = Vec::with_capacity(512);
    sluice_core::canonical::write(definition, &mut text);
    let hash = Sha256::digest(&text);
    let mut hex = String::with_capacity(7 + 64);
    hex.push_str("sha256:");
    for b in hash {
        hex.push_str(&format!("{b:02x}"));
    }
    hex
}

/// A definition and its digest.
#[derive(Debug, Clone, PartialEq)]
pub struct Def {
    /// `sha256:<hex>`.
    pub digest: String,
    /// The pinned fields.
    pub definition: Value,
}

impl Def {
    /// The definition of `item`, with its digest.
    pub fn of(kind: Kind, item: &Value) -> Def {
        let definition = definition(kind, item);
        Def {
            digest: digest(&definition),
            definition,
        }
    }
}

/// One pinned item: what was approved, and what the upstream offers now if that differs.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Pin {
    /// The approved definition (`None`: never approved, a new item held for review).
    pub approved: Option<Def>,
    /// What the upstream offers now, when it is not the approved definition.
    pub seen: Option<Def>,
}

/// How a definition stands against its pin.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// It is the approved definition.
    Pinned,
    /// Never approved.
    New,
    /// Differs from the approved definition.
    Changed,
}

impl Verdict {
    /// Its name in the admin page, audit lines and `_meta`.
    pub fn name(self) -> &'static str {
        match self {
            Verdict::Pinned => "pinned",
            Verdict::New => "new",
            Verdict::Changed => "changed",
        }
    }
}

/// What the policy makes of a verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Served as it is.
    Serve,
    /// Served and flagged.
    Flag,
    /// Served, and pinned as first seen.
    Adopt,
    /// Neither listed nor served.
    Hold,
}

impl PinPolicy {
    /// The effective policy for an item (`curated`: an `expose` entry names it): curated tools
    /// of an unpinned upstream are tracked as with `warn`.
    pub fn effective(self, curated: bool) -> PinPolicy {
        if self.pin == PinMode::Off && curated {
            PinPolicy {
                pin: PinMode::Warn,
                new: NewMode::Allow,
            }
        } else {
            self
        }
    }

    /// What to do with an item judged `verdict`.
    pub fn action(self, verdict: Verdict) -> Action {
        match (self.pin, verdict) {
            (PinMode::Off, _) | (_, Verdict::Pinned) => Action::Serve,
            (_, Verdict::New) if self.new == NewMode::Allow => Action::Adopt,
            (_, Verdict::New) | (PinMode::Hold, Verdict::Changed) => Action::Hold,
            (PinMode::Warn, Verdict::Changed) => Action::Flag,
        }
    }
}

/// The lock file: pins by upstream id, then kind, then item key.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PinFile {
    /// upstream id → kind → key → pin.
    pub upstreams: BTreeMap<String, BTreeMap<Kind, BTreeMap<String, Pin>>>,
}

/// One item awaiting review: seen, and either never approved or approved differently.
#[derive(Debug, Clone, PartialEq)]
pub struct Pending<'a> {
    /// The upstream's id.
    pub upstream: &'a str,
    /// The kind of item.
    pub kind: Kind,
    /// Its name (or URI template) at the upstream.
    pub key: &'a str,
    /// What was approved, if anything.
    pub approved: Option<&'a Def>,
    /// What the upstream offers now.
    pub seen: &'a Def,
}

impl Pending<'_> {
    /// `new` or `changed`.
    pub fn verdict(&self) -> Verdict {
        if self.approved.is_some() {
            Verdict::Changed
        } else {
            Verdict::New
        }
    }

    /// `upstream/key`, as `sluice pins` takes it.
    pub fn selector(&self) -> String {
        format!("{}/{}", self.upstream, self.key)
    }

    /// A unified diff of the approved definition (pretty JSON) against what is seen now.
    pub fn diff(&self) -> String {
        let pretty =
            |v: &Value| serde_json::to_string_pretty(&sorted(v)).unwrap_or_default() + "\n";
        let old = self
            .approved
            .map(|d| pretty(&d.definition))
            .unwrap_or_default();
        let new = pretty(&self.seen.definition);
        similar::TextDiff::from_lines(&old, &new)
            .unified_diff()
            .context_radius(3)
            .header("approved", "now")
            .to_string()
    }
}

/// `v` with object members sorted at every level (for a stable, readable diff).
fn sorted(v: &Value) -> Value {
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            Value::Object(
                keys.into_iter()
                    .map(|k| (k.clone(), sorted(&m[k])))
                    .collect(),
            )
        }
        Value::Array(a) => Value::Array(a.iter().map(sorted).collect()),
        other => other.clone(),
    }
}

/// Which pending items an approval takes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Selector {
    /// Every pending item of every upstream.
    All,
    /// Every pending item of one upstream.
    Upstream(String),
    /// The items of one upstream with this key (a tool, prompt or template of that name).
    Item(String, String),
}

impl Selector {
    /// `UPSTREAM` or `UPSTREAM/NAME` (the name may itself hold `/`).
    pub fn parse(text: &str) -> Selector {
        match text.split_once('/') {
            Some((u, k)) if !k.is_empty() => Selector::Item(u.to_string(), k.to_string()),
            Some((u, _)) => Selector::Upstream(u.to_string()),
            None => Selector::Upstream(text.to_string()),
        }
    }

    /// Does it take the item `key` of `upstream`?
    pub fn takes(&self, upstream: &str, key: &str) -> bool {
        match self {
            Selector::All => true,
            Selector::Upstream(u) => u == upstream,
            Selector::Item(u, k) => u == upstream && k == key,
        }
    }
}

/// `mcp/pins.json` under `home`.
pub fn path(home: &Path) -> PathBuf {
    home.join("mcp").join("pins.json")
}

impl PinFile {
    /// Read `mcp/pins.json` (absent: empty). A malformed file is an error naming the file and
    /// the member.
    pub fn load(home: &Path) -> Result<PinFile, ConfigError> {
        let file = path(home);
        let text = match std::fs::read_to_string(&file) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(PinFile::default()),
            Err(e) => return Err(ConfigError::new(&file, "", format!("cannot read it: {e}"))),
        };
        let v: Value = serde_json::from_str(&text)
            .map_err(|e| ConfigError::new(&file, "", format!("not valid JSON: {e}")))?;
        PinFile::from_value(&v).map_err(|(at, msg)| ConfigError::new(&file, &at, msg))
    }

    /// The file's JSON value read (errors: the member's path and what is wrong).
    pub fn from_value(v: &Value) -> Result<PinFile, (String, String)> {
        let Some(top) = v.as_object() else {
            return Err((String::new(), "must be an object".into()));
        };
        match top.get("version") {
            Some(n) if n.as_u64() == Some(1) => {}
            _ => return Err(("version".into(), "must be 1".into())),
        }
        let mut out = PinFile::default();
        let Some(ups) = top.get("upstreams") else {
            return Ok(out);
        };
        let Some(ups) = ups.as_object() else {
            return Err(("upstreams".into(), "must be an object".into()));
        };
        for (id, kinds) in ups {
            let Some(kinds) = kinds.as_object() else {
                return Err((format!("upstreams.{id}"), "must be an object".into()));
            };
            let mut by_kind = BTreeMap::new();
            for kind in Kind::ALL {
                let Some(items) = kinds.get(kind.key()) else {
                    continue;
                };
                let at = format!("upstreams.{id}.{}", kind.key());
                let Some(items) = items.as_object() else {
                    return Err((at, "must be an object".into()));
                };
                let mut pins = BTreeMap::new();
                for (key, p) in items {
                    let at = format!("{at}.{key}");
                    let pin = Pin {
                        approved: def_in(p, &at)?,
                        seen: match p.get("seen") {
                            None => None,
                            Some(s) => def_in(s, &format!("{at}.seen"))?,
                        },
                    };
                    if pin.approved.is_none() && pin.seen.is_none() {
                        return Err((at, "needs digest and definition, or seen".into()));
                    }
                    pins.insert(key.clone(), pin);
                }
                by_kind.insert(kind, pins);
            }
            out.upstreams.insert(id.clone(), by_kind);
        }
        Ok(out)
    }

    /// The file's JSON value.
    pub fn to_value(&self) -> Value {
        let mut ups = Map::new();
        for (id, kinds) in &self.upstreams {
            let mut k = Map::new();
            for (kind, pins) in kinds {
                let mut items = Map::new();
                for (key, pin) in pins {
                    let mut p = Map::new();
                    if let Some(a) = &pin.approved {
                        p.insert("digest".into(), json!(a.digest));
                        p.insert("definition".into(), a.definition.clone());
                    }
                    if let Some(s) = &pin.seen {
                        p.insert(
                            "seen".into(),
                            json!({"digest": s.digest, "definition": s.definition}),
                        );
                    }
                    items.insert(key.clone(), Value::Object(p));
                }
                k.insert(kind.key().into(), Value::Object(items));
            }
            ups.insert(id.clone(), Value::Object(k));
        }
        json!({"version": 1, "upstreams": ups})
    }

    /// Write it atomically to `mcp/pins.json`.
    pub fn save(&self, home: &Path) -> std::io::Result<()> {
        store::write_json(&path(home), &self.to_value())
    }

    /// The pin of one item.
    pub fn get(&self, upstream: &str, kind: Kind, key: &str) -> Option<&Pin> {
        self.upstreams.get(upstream)?.get(&kind)?.get(key)
    }

    /// How `digest` stands against the pin of (upstream, kind, key).
    pub fn judge(&self, upstream: &str, kind: Kind, key: &str, digest: &str) -> Verdict {
        match self
            .get(upstream, kind, key)
            .and_then(|p| p.approved.as_ref())
        {
            None => Verdict::New,
            Some(a) if a.digest == digest => Verdict::Pinned,
            Some(_) => Verdict::Changed,
        }
    }

    /// Record what the upstream offers now for one item under `action`: adopted as first seen,
    /// kept as `seen` for review, or (back at its pin) no longer pending. Returns whether the
    /// file changed, and whether this is a change not recorded before (to be reported once).
    pub fn observe(
        &mut self,
        upstream: &str,
        kind: Kind,
        key: &str,
        now: &Def,
        action: Action,
    ) -> (bool, bool) {
        let pin = self
            .upstreams
            .entry(upstream.to_string())
            .or_default()
            .entry(kind)
            .or_default()
            .entry(key.to_string())
            .or_default();
        let before = pin.clone();
        match action {
            Action::Adopt => {
                pin.approved = Some(now.clone());
                pin.seen = None;
            }
            Action::Serve => {
                if pin
                    .approved
                    .as_ref()
                    .is_some_and(|a| a.digest == now.digest)
                {
                    pin.seen = None;
                }
            }
            Action::Flag | Action::Hold => {
                pin.seen = Some(now.clone());
            }
        }
        let first_report = matches!(action, Action::Flag | Action::Hold)
            && before.seen.as_ref().map(|s| &s.digest) != Some(&now.digest);
        let changed = *pin != before;
        if pin.approved.is_none() && pin.seen.is_none() {
            self.upstreams
                .get_mut(upstream)
                .and_then(|k| k.get_mut(&kind))
                .map(|m| m.remove(key));
        }
        (changed, first_report)
    }

    /// Every item awaiting review, by upstream, kind and key.
    pub fn pending(&self) -> Vec<Pending<'_>> {
        let mut out = Vec::new();
        for (id, kinds) in &self.upstreams {
            for (kind, pins) in kinds {
                for (key, pin) in pins {
                    if let Some(seen) = &pin.seen {
                        out.push(Pending {
                            upstream: id,
                            kind: *kind,
                            key,
                            approved: pin.approved.as_ref(),
                            seen,
                        });
                    }
                }
            }
        }
        out
    }

    /// Approve the pending items `which` selects: what was seen becomes the pin. Returns what
    /// was approved as (upstream, kind, key, digest).
    pub fn approve(&mut self, which: &Selector) -> Vec<(String, Kind, String, String)> {
        let mut done = Vec::new();
        for (id, kinds) in self.upstreams.iter_mut() {
            for (kind, pins) in kinds.iter_mut() {
                for (key, pin) in pins.iter_mut() {
                    if !which.takes(id, key) {
                        continue;
                    }
                    if let Some(seen) = pin.seen.take() {
                        done.push((id.clone(), *kind, key.clone(), seen.digest.clone()));
                        pin.approved = Some(seen);
                    }
                }
            }
        }
        done
    }
}

/// `{"digest", "definition"}` in `p` (both or neither).
fn def_in(p: &Value, at: &str) -> Result<Option<Def>, (String, String)> {
    match (p.get("digest"), p.get("definition")) {
        (None, None) => Ok(None),
        (Some(Value::String(d)), Some(def)) if d.starts_with("sha256:") => Ok(Some(Def {
            digest: d.clone(),
            definition: def.clone(),
        })),
        _ => Err((
            at.to_string(),
            "digest (\"sha256:…\") and definition go together".into(),
        )),
    }
}

#[cfg(test)]
mod tests;
