//! The access rules applied to a caller: which list items it sees, and which tools, prompts
//! and resources it may use. A target the caller may not use is answered exactly like one that
//! does not exist, so an agent never learns what it cannot call; the audit line says why.

use crate::catalog::ListKind;
use serde_json::{json, Value};
use sluice_auth::{Item, Policy};
use sluice_core::{codes, Message, Principal, RpcError};

/// The name the rules match for a list item: a tool's or prompt's `name`, a resource's `uri`,
/// a template's `uriTemplate`.
pub(crate) fn visible(
    policy: &Policy,
    principal: Option<&Principal>,
    kind: ListKind,
    item: &Value,
) -> bool {
    let (what, key) = match kind {
        ListKind::Tools => (Item::Tool, "name"),
        ListKind::Prompts => (Item::Prompt, "name"),
        ListKind::Resources => (Item::Resource, "uri"),
        ListKind::Templates => (Item::Resource, "uriTemplate"),
        // A skill is judged by the URI of its SKILL.md, as a read of it is.
        ListKind::Skills => (Item::Resource, "uri"),
    };
    let name = item.get(key).and_then(Value::as_str).unwrap_or("");
    policy.allows(what, name, principal)
}

/// What a request names: the tool, prompt or resource the rules judge and hooks select on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Named {
    /// Which kind of item.
    pub item: Item,
    /// Its client-facing name (a resource's URI).
    pub name: String,
    /// How an unknown one is answered (a skill and a directory are resources of their own
    /// kind to the client).
    pub unknown: Unknown,
}

/// What a request for something that does not exist is answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Unknown {
    /// As the item's kind says (unknown tool, prompt; resource not found).
    Item,
    /// `skills/get`: no skill is served at the URI.
    Skill,
    /// `resources/directory/read`: not a directory resource.
    Directory,
}

/// What a request names, decoded once per request: `tools/call`, `prompts/get`,
/// `resources/read`, `resources/subscribe`, `resources/directory/read`, `skills/get`, and
/// `completion/complete` on a prompt or resource.
pub(crate) fn named(msg: &Message) -> Option<Named> {
    let (item, name) = match msg.method()? {
        "tools/call" => (Item::Tool, msg.param_str("name")?.to_string()),
        "prompts/get" => (Item::Prompt, msg.param_str("name")?.to_string()),
        "resources/read" | "resources/subscribe" => {
            (Item::Resource, msg.param_str("uri")?.to_string())
        }
        method @ ("resources/directory/read" | "skills/get") => {
            let unknown = match method {
                "skills/get" => Unknown::Skill,
                _ => Unknown::Directory,
            };
            let name = msg.param_str("uri")?.to_string();
            return Some(Named {
                item: Item::Resource,
                name,
                unknown,
            });
        }
        "completion/complete" => {
            let r = msg.params()?.get("ref")?;
            match r.get("type").and_then(Value::as_str)? {
                "ref/prompt" => (Item::Prompt, r.get("name")?.as_str()?.to_string()),
                "ref/resource" => (Item::Resource, r.get("uri")?.as_str()?.to_string()),
                _ => return None,
            }
        }
        _ => return None,
    };
    Some(Named {
        item,
        name,
        unknown: Unknown::Item,
    })
}

/// Why a request was refused by the access rules.
pub(crate) struct Refused {
    /// What the client gets: exactly what an unknown target gets.
    pub error: RpcError,
    /// Why, for the log and the audit line.
    pub reason: String,
}

/// `Err` when the session may not use what a request names ([`named`]).
pub(crate) fn check(
    policy: &Policy,
    principal: Option<&Principal>,
    named: Option<&Named>,
) -> Result<(), Box<Refused>> {
    let Some(Named {
        item,
        name,
        unknown,
    }) = named
    else {
        return Ok(());
    };
    if policy.allows(*item, name, principal) {
        return Ok(());
    }
    let who = principal
        .as_ref()
        .map_or("an unauthenticated caller", |p| p.id.as_str());
    let (kind, error) = match item {
        Item::Tool => (
            "tool",
            RpcError::invalid_params(format!("Unknown tool: {name}")),
        ),
        Item::Prompt => (
            "prompt",
            RpcError::invalid_params(format!("Unknown prompt: {name}")),
        ),
        Item::Resource => (
            "resource",
            match unknown {
                Unknown::Item => {
                    RpcError::new(codes::INVALID_PARAMS, format!("Resource not found: {name}"))
                        .with_data(json!({"uri": name}))
                }
                Unknown::Skill => RpcError::invalid_params(format!("No skill is served at {name}")),
                Unknown::Directory => {
                    RpcError::invalid_params(format!("{name} is not a directory resource"))
                }
            },
        ),
    };
    Err(Box::new(Refused {
        error,
        reason: format!("access rules: {who} may not use the {kind} {name}"),
    }))
}
