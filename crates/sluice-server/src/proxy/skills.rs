//! Requests on skill URIs (the Skills extension) on their way to the upstream and back: the
//! request names the URI the upstream knows, the result's URIs are shown as clients see them,
//! and a skill file read is checked against the entry the gateway holds (its size, digest and,
//! for a `SKILL.md`, frontmatter) before it is passed on: content that does not match is
//! refused, never used.

use super::route::SkillTarget;
use crate::channel::Outcome;
use serde_json::{json, Value};
use sluice_core::{codes, Kind, Message, RpcError};
use sluice_skills::{entry, uri, verify, Entry, Mismatch};
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
    if let (Some(entry), Some(result)) = (skill.entry, reply.result()) {
        if let Err(m) = check(slot, entry, &skill.uri, result).await {
            tracing::warn!(upstream = %slot.spec.id, "a skill file failed its check: {m}");
            let id = reply.id().cloned().unwrap_or(Value::Null);
            let shown = uri::shown(skill.prefix, &skill.uri).into_owned();
            let e = RpcError::new(
                codes::RESPONSE_REJECTED,
                format!(
                    "{shown} does not match its skill's entry ({}): not passed on",
                    shown_mismatch(skill.prefix, &m)
                ),
            )
            .with_data(json!({"uri": shown, "skill": uri::shown(skill.prefix, &entry.uri)}));
            return Outcome::Reply(Message::error(id, &e));
        }
    }
    if !skill.prefix.is_empty() {
        if let Some(result) = reply.result_mut() {
            show(method, result, skill.prefix);
        }
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

/// A mismatch's text with the URIs in it as the client knows them.
fn shown_mismatch(prefix: &str, m: &Mismatch) -> String {
    let text = m.to_string();
    if prefix.is_empty() {
        return text;
    }
    text.replace(uri::SCHEME, &format!("{}{prefix}/", uri::SCHEME))
}

/// Show the URIs of a result as clients see them.
fn show(method: &str, result: &mut Value, prefix: &str) {
    let rename = |u: &str| Some(uri::shown(prefix, u).into_owned());
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
