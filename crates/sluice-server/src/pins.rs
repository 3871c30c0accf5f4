//! Pins in force: what each upstream offers judged against `mcp/pins.json` when its lists
//! change (held items left out of the catalog, flagged ones noted in their `_meta`), what is
//! seen recorded in the file, and each change seen and each approval logged and audited.
//! Nothing here runs per call: a call to a held item is refused from the catalog's note.

use serde_json::{json, Value};
use sluice_config::pins::{self, Action, Def, Kind, PinFile, PinMode, PinPolicy, Verdict};
use sluice_config::{Config, UpstreamSpec};
use sluice_telemetry::Audit;
use sluice_upstream::UpstreamLists;

/// The `_meta` key of the note on a flagged item.
pub(crate) const META_KEY: &str = "sluice/pin";

/// One item held out of the catalog.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Held {
    /// The slot of its upstream.
    pub(crate) slot: usize,
    /// Tool, prompt or template.
    pub(crate) kind: Kind,
    /// Its name (or URI template) at the upstream.
    pub(crate) key: String,
    /// New or changed.
    pub(crate) verdict: Verdict,
}

/// The upstreams' lists as the pins let them be listed.
pub(crate) struct Judged {
    /// Per slot: `Some` where the pins changed the upstream's lists.
    lists: Vec<Option<UpstreamLists>>,
    /// What was held out.
    pub(crate) held: Vec<Held>,
}

impl Judged {
    /// `pairs` with the judged lists in place of the upstreams' own.
    pub(crate) fn pairs<'a>(
        &'a self,
        pairs: &[(&'a UpstreamSpec, Option<&'a UpstreamLists>)],
    ) -> Vec<(&'a UpstreamSpec, Option<&'a UpstreamLists>)> {
        pairs
            .iter()
            .zip(&self.lists)
            .map(|((spec, lists), judged)| (*spec, judged.as_ref().or(*lists)))
            .collect()
    }
}

/// The policy of each of an upstream's items: `None` when nothing of it is pinned or tracked.
fn policy_of(config: &Config, spec: &UpstreamSpec) -> Option<PinPolicy> {
    let policy = config
        .expose
        .pins
        .get(&spec.id)
        .copied()
        .unwrap_or_default();
    let curated = config
        .expose
        .expose
        .iter()
        .any(|e| e.enabled && e.upstream == spec.id);
    (policy != PinPolicy::default() || curated).then_some(policy)
}

/// Is the upstream tool `tool` of `upstream` curated by an enabled `expose` entry?
fn curated(expose: &[sluice_config::ExposeEntry], upstream: &str, tool: &str) -> bool {
    expose
        .iter()
        .any(|e| e.enabled && e.upstream == upstream && e.tool == tool)
}

/// Is anything of this tree pinned or tracked? (Nothing to do otherwise.)
fn any(config: &Config) -> bool {
    !config.expose.pins.is_empty() || config.expose.expose.iter().any(|e| e.enabled)
}

/// Each item of `lists` with its kind, key and effective policy.
fn items<'a>(
    config: &'a Config,
    spec: &'a UpstreamSpec,
    policy: PinPolicy,
    lists: &'a UpstreamLists,
) -> impl Iterator<Item = (Kind, &'a str, &'a Value, PinPolicy)> + 'a {
    let of = move |kind: Kind, list: &'a [Value]| {
        list.iter().filter_map(move |item| {
            let key = kind.item_key(item)?;
            let curated = kind == Kind::Tool && curated(&config.expose.expose, &spec.id, key);
            Some((kind, key, item, policy.effective(curated)))
        })
    };
    of(Kind::Tool, &lists.tools)
        .chain(of(Kind::Prompt, &lists.prompts))
        .chain(of(Kind::Template, &lists.templates))
}

/// Judge every pinned upstream's lists against the tree's pins: `None` when nothing is pinned
/// or tracked (the catalog is built from the lists as they are).
pub(crate) fn judge(
    config: &Config,
    pairs: &[(&UpstreamSpec, Option<&UpstreamLists>)],
) -> Option<Judged> {
    if !any(config) {
        return None;
    }
    let mut out = Judged {
        lists: Vec::with_capacity(pairs.len()),
        held: Vec::new(),
    };
    for (slot, (spec, lists)) in pairs.iter().enumerate() {
        let (Some(lists), Some(policy)) = (lists, policy_of(config, spec)) else {
            out.lists.push(None);
            continue;
        };
        let mut kept = UpstreamLists {
            resources: lists.resources.clone(),
            skills: lists.skills.clone(),
            skill_settings: lists.skill_settings.clone(),
            ..UpstreamLists::default()
        };
        for (kind, key, item, policy) in items(config, spec, policy, lists) {
            // Not pinned (an unpinned upstream's tool that no `expose` entry curates): as it is.
            let verdict = if policy.pin == PinMode::Off {
                Verdict::Pinned
            } else {
                let def = Def::of(kind, item);
                config.pins.judge(&spec.id, kind, key, &def.digest)
            };
            let item = match policy.action(verdict) {
                Action::Serve | Action::Adopt => item.clone(),
                Action::Flag => {
                    let mut item = item.clone();
                    if let Some(m) = item.as_object_mut() {
                        let meta = m.entry("_meta").or_insert_with(|| json!({}));
                        if let Some(meta) = meta.as_object_mut() {
                            meta.insert(
                                META_KEY.into(),
                                json!({"state": verdict.name(), "review": format!("sluice pins diff {}/{key}", spec.id)}),
                            );
                        }
                    }
                    item
                }
                Action::Hold => {
                    out.held.push(Held {
                        slot,
                        kind,
                        key: key.to_string(),
                        verdict,
                    });
                    continue;
                }
            };
            match kind {
                Kind::Tool => kept.tools.push(item),
                Kind::Prompt => kept.prompts.push(item),
                Kind::Template => kept.templates.push(item),
            }
        }
        out.lists.push(Some(kept));
    }
    Some(out)
}

/// The refusal of a call to a held item (`name`: the name the client used).
pub(crate) fn refusal(upstream: &str, held: &Held, name: &str) -> sluice_core::RpcError {
    let selector = format!("{upstream}/{}", held.key);
    let why = match held.verdict {
        Verdict::New => "it is new and has not been approved",
        _ => "its definition changed since it was approved",
    };
    let noun = held.kind.noun();
    let mut first = noun.chars();
    let noun = first
        .next()
        .map(|c| c.to_uppercase().collect::<String>() + first.as_str())
        .unwrap_or_default();
    sluice_core::RpcError::new(
        sluice_core::codes::HELD_BY_PIN,
        format!(
            "{noun} {name} is held by its pin: {why} (mcp/pins.json). Review it with `sluice pins diff {selector}` and approve it with `sluice pins approve {selector}`"
        ),
    )
    .with_data(json!({"pin": {"upstream": upstream, "name": held.key, "state": held.verdict.name()}}))
}

/// Record what the upstreams offer now in `mcp/pins.json` (read fresh from disk): first-seen
/// definitions adopted, changes kept as `seen` for review (each logged and audited once), items
/// back at their pin no longer pending. Writes only when something changed.
pub(crate) fn record(
    audit_log: &Audit,
    config: &Config,
    specs: &[&UpstreamSpec],
    lists: &[Option<UpstreamLists>],
) {
    if !any(config) || !config.home.join("mcp").is_dir() {
        return;
    }
    let mut file = match PinFile::load(&config.home) {
        Ok(f) => f,
        Err(e) => {
            tracing::warn!("pins are not recorded: {e}");
            return;
        }
    };
    let mut changed = false;
    for (spec, lists) in specs.iter().zip(lists) {
        let (Some(lists), Some(policy)) = (lists, policy_of(config, spec)) else {
            continue;
        };
        for (kind, key, item, policy) in items(config, spec, policy, lists) {
            if policy.pin == PinMode::Off {
                continue;
            }
            let def = Def::of(kind, item);
            let verdict = file.judge(&spec.id, kind, key, &def.digest);
            let action = policy.action(verdict);
            let approved = file
                .get(&spec.id, kind, key)
                .and_then(|p| p.approved.as_ref())
                .map(|a| a.digest.clone());
            let (wrote, report) = file.observe(&spec.id, kind, key, &def, action);
            changed |= wrote;
            if report {
                let outcome = if action == Action::Hold {
                    "held"
                } else {
                    "flagged"
                };
                let selector = format!("{}/{key}", spec.id);
                let detail = match &approved {
                    Some(a) => format!("{a} -> {}", def.digest),
                    None => format!("new {}", def.digest),
                };
                tracing::warn!(upstream = %spec.id, kind = kind.noun(), name = key, outcome, "pins: {} {selector} is {}; review it with `sluice pins diff {selector}`", kind.noun(), verdict.name());
                audit(audit_log, "pins/changed", &spec.id, key, outcome, detail);
            }
        }
    }
    if changed {
        if let Err(e) = file.save(&config.home) {
            tracing::warn!("cannot write {}: {e}", pins::path(&config.home).display());
        }
    }
}

/// Audit the approvals a new version of the pins brings (`config`'s, against `old`): an
/// approved definition that replaces another, or one that appears where the policy holds new
/// definitions (where it allows them, the gateway adopted it itself). Read from the two
/// versions, not from what was pending, so an approval is audited however quickly it follows
/// the change.
pub(crate) fn audit_approvals(audit_log: &Audit, config: &Config, old: &PinFile) {
    for (id, kinds) in &config.pins.upstreams {
        let policy = config.expose.pins.get(id).copied().unwrap_or_default();
        for (kind, items) in kinds {
            for (key, pin) in items {
                let Some(now) = &pin.approved else { continue };
                let before = old
                    .get(id, *kind, key)
                    .and_then(|p| p.approved.as_ref())
                    .map(|a| a.digest.as_str());
                let curated = *kind == Kind::Tool && curated(&config.expose.expose, id, key);
                let approval = match before {
                    Some(b) => b != now.digest,
                    None => policy.effective(curated).new == pins::NewMode::Hold,
                };
                if approval {
                    tracing::info!(upstream = %id, name = %key, "pins: {} {id}/{key} approved", kind.noun());
                    audit(
                        audit_log,
                        "pins/approved",
                        id,
                        key,
                        "ok",
                        now.digest.clone(),
                    );
                }
            }
        }
    }
}

/// One audit line about a pin.
fn audit(audit_log: &Audit, what: &str, upstream: &str, name: &str, outcome: &str, detail: String) {
    let line = sluice_telemetry::Exchange::new(
        sluice_telemetry::Caller {
            session: "",
            client: None,
            principal: None,
        },
        sluice_telemetry::Ended {
            method: what,
            tool: Some(name),
            upstream: Some(upstream),
            started: std::time::Instant::now(),
            outcome,
            error: Some(detail),
            trace: &sluice_hooks::Trace::default(),
        },
    );
    audit_log.write(&line);
}

#[cfg(test)]
mod tests;
