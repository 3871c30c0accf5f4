//! Requests on skill URIs (the Skills extension) on their way to the upstream and back: the
//! request names the URI the upstream knows, the result's URIs are shown as clients see them,
//! and a skill file read is checked against the entry the gateway holds (its size, digest and,
//! for a `SKILL.md`, frontmatter) before it is passed on: content that does not match is
//! refused, never used.

use super::route::SkillTarget;
use crate::channel::Outcome;
use serde_json::{json, Value};
use sluice_core::{codes, Kind, Message, RpcError};
use sluice_skills::{entry, verify, Entry, Mismatch};
use sluice_upstream::Slot;
use std::sync::Arc;

/// Name the URI the upstream knows.
pub(super) fn to_upstream(msg: &mut Message, skill: &SkillTarget<'_>) {
    if msg.param_str("uri") != Some(skill.uri.as_str()) {
        msg.set_param("uri", json!(skill.uri));
    }
}

/// The upstream's answer as the client gets it: checked, then with its URIs shown.
pub(super) async fn from_upstream(
    slot: &Arc<Slot>,
    skill: &SkillTarget<'_>,
    method: &str,
    outcome: Outcome,
) -> Outcome {
    let Outcome::Reply(mut reply) = outcome else {
        return outcome;
    };
    if reply.kind() != Kind::Response {
        return Outcome::Reply(reply);
    }
    let shown = |u: &str| skill.skills.shown(skill.slot, u).into_owned();
    if let (Some(entry), Some(result)) = (skill.entry, reply.result()) {
        if let Err(m) = check(slot, entry, &skill.uri, result).await {
            tracing::warn!(upstream = %slot.spec.id, "a skill file failed its check: {m}");
            let id = reply.id().cloned().unwrap_or(Value::Null);
            let uri = shown(&skill.uri);
            let e = RpcError::new(
                codes::RESPONSE_REJECTED,
                format!(
                    "{uri} does not match its skill's entry ({}): not passed on",
                    shown_mismatch(m, shown)
                ),
            )
            .with_data(json!({"uri": uri, "skill": shown(&entry.uri)}));
            return Outcome::Reply(Message::error(id, &e));
        }
    }
    if let Some(result) = reply.result_mut() {
        if method == "resources/directory/read" {
            // A skill the tree does not serve is no child of any directory.
            let served = |item: &Value| {
                let uri = item.get("uri").and_then(Value::as_str).unwrap_or("");
                !skill.skills.not_served(skill.slot, uri)
            };
            if let Some(items) = result.get_mut("resources").and_then(Value::as_array_mut) {
                items.retain(served);
            }
        }
        show(method, result, shown);
    }
    Outcome::Reply(reply)
}

/// Check a read against the entry; when it does not match, against the skill's entry now
/// (`skills/get`: the skill may have changed since the gateway listed it), once.
async fn check(slot: &Arc<Slot>, held: &Entry, uri: &str, result: &Value) -> Result<(), Mismatch> {
    let Err(first) = verify::check_read(held, uri, result) else {
        return Ok(());
    };
    let Some(conn) = slot.control() else {
        return Err(first);
    };
    let now = conn
        .call("skills/get", Some(json!({"uri": held.uri})), slot.timeout())
        .await
        .ok()
        .and_then(|r| Entry::parse(r.result()?.get("skill")?).ok());
    match now {
        Some(now) if now != *held => verify::check_read(&now, uri, result)
            .map(drop)
            .map_err(|_| first),
        _ => Err(first),
    }
}

/// A mismatch's text with its URI as the client knows it.
fn shown_mismatch(mut m: Mismatch, shown: impl Fn(&str) -> String) -> String {
    match &mut m {
        Mismatch::NoContent(uri) | Mismatch::Unlisted(uri) => *uri = shown(uri),
        Mismatch::Size { uri, .. }
        | Mismatch::Digest { uri, .. }
        | Mismatch::NoFrontmatter { uri, .. }
        | Mismatch::Frontmatter { uri, .. } => *uri = shown(uri),
    }
    m.to_string()
}

/// Show the URIs of a result as clients see them.
fn show(method: &str, result: &mut Value, shown: impl Fn(&str) -> String) {
    let rename = |u: &str| Some(shown(u));
    match method {
        "skills/get" => {
            if let Some(skill) = result.get_mut("skill") {
                entry::rename_uris(skill, rename);
            }
        }
        "resources/read" | "resources/directory/read" => {
            let key = if method == "resources/read" {
                "contents"
            } else {
                "resources"
            };
            for item in result
                .get_mut(key)
                .and_then(Value::as_array_mut)
                .into_iter()
                .flatten()
            {
                if let Some(new) = item.get("uri").and_then(Value::as_str).and_then(rename) {
                    item["uri"] = Value::String(new);
                }
            }
        }
        _ => {}
    }
}
