//! Target resolution: what a client request is for, decided once, from the snapshot alone (no
//! I/O): answered here (ping, lists, a request that names nothing that exists), one upstream
//! (a tool, prompt, resource or completion), a tool the gateway answers itself, or a fan-out
//! to every upstream (`logging/setLevel`). Also the gateway's own `initialize` result.

use crate::catalog::{Catalog, ListKind, Route};
use crate::gateway_tools::GatewayTool;
use crate::state::Snapshot;
use serde_json::{json, Value};
use sluice_core::{codes, member, Message, Principal, RpcError};
use sluice_upstream::Slot;
use std::borrow::Cow;
use std::sync::Arc;

/// What a client request is for.
#[derive(Debug)]
pub(crate) enum Target<'c> {
    /// The gateway answers it with no upstream.
    Local(Result<Value, RpcError>),
    /// One upstream.
    Upstream(Upstream<'c>),
    /// A tool the gateway answers itself.
    Gateway(GatewayTool),
    /// `logging/setLevel` to every upstream with logging (and the session's own level).
    SetLevel(String),
    /// `tasks/*`: the task the gateway recorded, at the upstream that runs it (`proxy/tasks/table.rs`).
    Task,
}

/// A request for one upstream.
#[derive(Debug)]
pub(crate) struct Upstream<'c> {
    /// The upstream's slot (borrowed from the catalog: a call writes no count of the slot's,
    /// which every thread's calls would write).
    pub slot: &'c Arc<Slot>,
    /// The name the upstream knows the tool or prompt by (the request is renamed on dispatch;
    /// owned only for a down per-user upstream's tool, named from the request).
    pub name: Option<Cow<'c, str>>,
    /// Does a 2026-07-28 upstream's `input_required` answer run rounds (all but completions)?
    pub rounds: bool,
    /// `resources/subscribe` / `unsubscribe`: the subscription to record when it succeeds.
    pub subscription: Option<Subscription>,
    /// A request on a skill URI: the URI the upstream knows, and how its result is shown
    /// (boxed: every call's target carries the field, few calls a skill).
    pub skill: Option<Box<SkillTarget<'c>>>,
}

/// A request on a skill URI (the Skills extension).
#[derive(Debug)]
pub(crate) struct SkillTarget<'c> {
    /// The URI at the upstream (the request is rewritten to it on dispatch).
    pub uri: String,
    /// The upstream's slot, and the catalog's skills, which say how its URIs are shown.
    pub slot: usize,
    pub skills: &'c crate::catalog::skills::Skills,
    /// `resources/read` of a listed skill file: the entry its content is checked against.
    pub entry: Option<&'c Arc<sluice_skills::Entry>>,
}

/// A subscription a request asks for.
#[derive(Debug, Clone)]
pub(crate) struct Subscription {
    /// The resource URI.
    pub uri: String,
    /// Subscribe (true) or unsubscribe.
    pub on: bool,
    /// The upstream speaks 2026-07-28 (no resources/subscribe): the gateway watches the URI on
    /// a listen stream of its own and answers the client itself.
    pub local: bool,
}

/// What a request names, for telling whether a hook changed its target.
pub(crate) fn key(msg: &Message) -> (Option<&str>, Option<&Value>) {
    // Member by member: a request kept as text parses only the one it has.
    let named = msg
        .param("name")
        .or_else(|| msg.param("uri"))
        .or_else(|| msg.param("ref"));
    (msg.method(), named)
}

/// Resolve a request of an initialised session (or a modern client's request); the tests' shorthand
/// for [`resolve_in`] against the snapshot's catalog.
/// A name two upstreams produce, with `"on_collision": "error"`: served by neither, and the
/// caller told why (-32602, as for a name that is not listed, with the upstreams in `data`).
fn collision(kind: &str, name: &str, ids: Option<&[String]>) -> RpcError {
    let ids = ids.unwrap_or_default();
    let mut e = RpcError::invalid_params(format!(
        "{kind} {name} is offered by upstreams {} and on_collision is \"error\": neither serves it",
        ids.join(" and ")
    ));
    e.data = Some(json!({"collision": ids}));
    e
}

#[cfg(test)]
pub(crate) fn resolve<'s>(
    snap: &'s Snapshot,
    principal: Option<&Principal>,
    msg: &Message,
) -> Target<'s> {
    resolve_in(snap, &snap.catalog, principal, msg)
}

/// Resolve a request against one session's view of the catalog (`views.rs`: what its own upstream
/// sessions list), which shares the snapshot's slots.
pub(crate) fn resolve_in<'c>(
    snap: &Snapshot,
    catalog: &'c Catalog,
    principal: Option<&Principal>,
    msg: &Message,
) -> Target<'c> {
    let method = msg.method().unwrap_or("");
    let list = |kind: ListKind| {
        let cursor = msg.param_str("cursor");
        let page_size = snap.settings().page_size as usize;
        // Access rules are looked up only for a list (not on every call).
        if snap.policy.is_open() {
            return Target::Local(catalog.page_of(kind, cursor, page_size, None));
        }
        let filter = |item: &Value| crate::access::visible(&snap.policy, principal, kind, item);
        Target::Local(catalog.page_of(kind, cursor, page_size, Some(&filter)))
    };
    let local = |e: RpcError| Target::Local(Err(e));
    match method {
        "ping" => Target::Local(Ok(json!({}))),
        "initialize" => local(RpcError::invalid_request(
            "the session is already initialised",
        )),
        "tools/list" => list(ListKind::Tools),
        "prompts/list" => list(ListKind::Prompts),
        "resources/list" => list(ListKind::Resources),
        "resources/templates/list" => list(ListKind::Templates),
        "tools/call" => {
            let Some(name) = msg.param_str("name") else {
                return local(RpcError::invalid_params("tools/call needs params.name"));
            };
            match catalog.tool(name) {
                Some(Route::Gateway(tool)) => Target::Gateway(*tool),
                Some(Route::Upstream { slot, name }) => Target::Upstream(Upstream {
                    slot: &catalog.slots[*slot],
                    name: Some(Cow::Borrowed(name)),
                    rounds: true,
                    subscription: None,
                    skill: None,
                }),
                None if catalog.collided_tool(name).is_some() => {
                    local(collision("Tool", name, catalog.collided_tool(name)))
                }
                None => match (catalog.down_tool(name), passthrough(catalog)) {
                    // A per-user upstream with nothing to list its tools with yet (no shared
                    // login, no user connected): the call asks its caller to connect, and
                    // goes through the caller's own connection.
                    (Some((slot, tool)), _) if catalog.slots[slot].per_user().is_some() => {
                        Target::Upstream(Upstream {
                            slot: &catalog.slots[slot],
                            name: Some(Cow::Owned(tool.to_string())),
                            rounds: true,
                            subscription: None,
                            skill: None,
                        })
                    }
                    (Some((slot, _)), _) => local(catalog.slots[slot].unavailable()),
                    // `--passthrough`: a name the gateway has not listed is the upstream's to
                    // answer (it may register tools per session, or answer with isError).
                    (None, Some(slot)) => Target::Upstream(Upstream {
                        slot,
                        name: None,
                        rounds: true,
                        subscription: None,
                        skill: None,
                    }),
                    (None, None) => local(catalog.held_tool(name).unwrap_or_else(|| {
                        RpcError::invalid_params(format!("Unknown tool: {name}"))
                    })),
                },
            }
        }
        "prompts/get" => {
            let Some(name) = msg.param_str("name") else {
                return local(RpcError::invalid_params("prompts/get needs params.name"));
            };
            if let Some(ids) = catalog.collided_prompt(name) {
                return local(collision("Prompt", name, Some(ids)));
            }
            if let Some(refusal) = catalog.held_prompt(name) {
                return local(refusal);
            }
            match (catalog.prompt(name), passthrough(catalog)) {
                (Some(r), _) => Target::Upstream(Upstream {
                    slot: &catalog.slots[r.slot],
                    name: Some(Cow::Borrowed(&r.name)),
                    rounds: true,
                    subscription: None,
                    skill: None,
                }),
                (None, Some(slot)) => Target::Upstream(Upstream {
                    slot,
                    name: None,
                    rounds: true,
                    subscription: None,
                    skill: None,
                }),
                (None, None) => local(RpcError::invalid_params(format!("Unknown prompt: {name}"))),
            }
        }
        "resources/read" | "resources/subscribe" | "resources/unsubscribe" => {
            let Some(uri) = msg.param_str("uri") else {
                return local(RpcError::invalid_params(format!(
                    "{method} needs params.uri"
                )));
            };
            if let Some(r) = catalog.skills.route(uri) {
                let slot = &catalog.slots[r.slot];
                let read = method == "resources/read";
                return Target::Upstream(Upstream {
                    slot,
                    name: None,
                    rounds: true,
                    subscription: (!read).then(|| Subscription {
                        uri: uri.to_string(),
                        on: method == "resources/subscribe",
                        local: slot.is_modern(),
                    }),
                    skill: Some(Box::new(SkillTarget {
                        uri: r.uri.into_owned(),
                        slot: r.slot,
                        skills: &catalog.skills,
                        entry: read.then(|| catalog.skills.entry_of(uri)).flatten(),
                    })),
                });
            }
            let Some(slot) = resource_slot(catalog, uri) else {
                return local(not_found(uri));
            };
            let subscription = (method != "resources/read").then(|| Subscription {
                uri: uri.to_string(),
                on: method == "resources/subscribe",
                local: slot.is_modern(),
            });
            Target::Upstream(Upstream {
                slot,
                name: None,
                rounds: true,
                subscription,
                skill: None,
            })
        }
        "completion/complete" => {
            let reference = msg.params().and_then(|p| p.get("ref"));
            let field = |k: &str| reference.and_then(|r| r.get(k)).and_then(Value::as_str);
            match field("type") {
                Some("ref/prompt") => {
                    let name = field("name").unwrap_or("");
                    match (catalog.prompt(name), passthrough(catalog)) {
                        (Some(r), _) => Target::Upstream(Upstream {
                            slot: &catalog.slots[r.slot],
                            name: Some(Cow::Borrowed(&r.name)),
                            rounds: false,
                            subscription: None,
                            skill: None,
                        }),
                        (None, Some(slot)) => Target::Upstream(Upstream {
                            slot,
                            name: None,
                            rounds: false,
                            subscription: None,
                            skill: None,
                        }),
                        (None, None) => {
                            local(RpcError::invalid_params(format!("Unknown prompt: {name}")))
                        }
                    }
                }
                Some("ref/resource") => {
                    let uri = field("uri").unwrap_or("");
                    match resource_slot(catalog, uri) {
                        Some(slot) => Target::Upstream(Upstream {
                            slot,
                            name: None,
                            rounds: false,
                            subscription: None,
                            skill: None,
                        }),
                        None => local(RpcError::invalid_params(format!(
                            "Resource not found: {uri}"
                        ))),
                    }
                }
                _ => local(RpcError::invalid_params(
                    "completion/complete needs params.ref of type ref/prompt or ref/resource",
                )),
            }
        }
        "skills/list" if catalog.skills.any() => list(ListKind::Skills),
        "skills/get" | "resources/directory/read" if catalog.skills.any() => {
            skill_request(catalog, msg, method)
        }
        "tasks/get" | "tasks/result" | "tasks/cancel" | "tasks/list" | "tasks/update" => {
            Target::Task
        }
        "logging/setLevel" => match msg.param_str("level") {
            Some(level) => Target::SetLevel(level.to_string()),
            None => local(RpcError::invalid_params(
                "logging/setLevel needs params.level",
            )),
        },
        _ => local(RpcError::method_not_found(method)),
    }
}

/// `skills/get` or `resources/directory/read`: to the upstream whose prefix the URI is under.
/// A URI under none is -32602, as the extension says for a skill or directory not served.
fn skill_request<'c>(catalog: &'c Catalog, msg: &Message, method: &str) -> Target<'c> {
    let Some(uri) = msg.param_str("uri") else {
        return Target::Local(Err(RpcError::invalid_params(format!(
            "{method} needs params.uri"
        ))));
    };
    let directory = method == "resources/directory/read";
    let route = catalog.skills.route_any(uri);
    let refusal = match &route {
        None if directory => Some(format!("{uri} is not a directory resource")),
        None => Some(format!("No skill is served at {uri}")),
        Some(r) if directory && !catalog.skills.directory_read(r.slot) => Some(format!(
            "{uri} is not a directory resource: upstream {} does not read directories",
            catalog.slots[r.slot].spec.id
        )),
        Some(_) => None,
    };
    match (route, refusal) {
        (Some(r), None) => Target::Upstream(Upstream {
            slot: &catalog.slots[r.slot],
            name: None,
            rounds: true,
            subscription: None,
            skill: Some(Box::new(SkillTarget {
                uri: r.uri.into_owned(),
                slot: r.slot,
                skills: &catalog.skills,
                entry: None,
            })),
        }),
        (_, refusal) => Target::Local(Err(RpcError::invalid_params(refusal.unwrap_or_default()))),
    }
}

fn not_found(uri: &str) -> RpcError {
    RpcError::new(codes::INVALID_PARAMS, format!("Resource not found: {uri}"))
        .with_data(json!({"uri": uri}))
}

/// Rename a request for its upstream: the tool's or prompt's name there.
pub(crate) fn rename(msg: &mut Message, name: &str) {
    // Already the upstream's name (a tool exposed under its own): nothing to change.
    let current = match msg.param("ref").filter(|r| r.is_object()) {
        Some(r) => member::of(r, "name").and_then(Value::as_str),
        None => msg.param_str("name"),
    };
    if current == Some(name) {
        return;
    }
    if msg.has_param("ref") {
        if let Some(r) = msg
            .params_mut()
            .get_mut("ref")
            .and_then(Value::as_object_mut)
        {
            r.insert("name".into(), json!(name));
            return;
        }
    }
    // A request kept as its text keeps it: only the name is spliced in.
    msg.set_param("name", json!(name));
}

/// The one upstream of `sluice serve --passthrough` (a single transparent upstream that is
/// not the first-party register): names the gateway has not listed go to it unchanged.
pub(crate) fn passthrough(catalog: &Catalog) -> Option<&Arc<Slot>> {
    match &*catalog.slots {
        [one] if one.spec.transparent && one.spec.transport != sluice_config::Transport::Local => {
            Some(one)
        }
        _ => None,
    }
}

/// The slot serving a resource URI; with a single upstream offering resources (or the one
/// upstream of `--passthrough`), that one.
pub(crate) fn resource_slot<'c>(catalog: &'c Catalog, uri: &str) -> Option<&'c Arc<Slot>> {
    if let Some(s) = catalog.resource(uri) {
        return Some(&catalog.slots[s]);
    }
    if let Some(one) = passthrough(catalog) {
        return Some(one);
    }
    let with_resources: Vec<&Arc<Slot>> = catalog
        .slots
        .iter()
        .filter(|s| {
            s.capabilities()
                .is_some_and(|c| c.get("resources").is_some())
        })
        .collect();
    match with_resources.as_slice() {
        [one] => Some(*one),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing;
    use serde_json::json;
    use sluice_upstream::UpstreamLists;

    fn req(method: &str, params: Value) -> Message {
        Message::request(json!(1), method, Some(params))
    }

    fn snap_of(files: &[(&str, Value)]) -> Arc<Snapshot> {
        let st = testing::state(
            files,
            &[
                ("fx", testing::tools(&["echo", "add"]), json!({"tools": {}})),
                (
                    "docs",
                    UpstreamLists {
                        prompts: vec![json!({"name": "greet"})],
                        resources: vec![json!({"uri": "doc://a"})],
                        ..Default::default()
                    },
                    json!({"prompts": {}, "resources": {}}),
                ),
            ],
        );
        st.snapshot()
    }

    fn error_of(t: Target) -> RpcError {
        match t {
            Target::Local(Err(e)) => e,
            other => panic!("expected a local error, got {other:?}"),
        }
    }

    #[test]
    fn a_tool_resolves_once_to_its_upstream_and_its_name_there() {
        let snap = snap_of(&[testing::expose(&["fx", "docs", "gone"])]);
        match resolve(&snap, None, &req("tools/call", json!({"name": "fx_add"}))) {
            Target::Upstream(u) => {
                assert_eq!(u.slot.spec.id, "fx");
                assert_eq!(u.name.as_deref(), Some("add"));
                assert!(u.rounds);
                assert!(u.subscription.is_none());
            }
            other => panic!("expected an upstream, got {other:?}"),
        }
    }

    #[test]
    fn unknown_and_down_tools_are_answered_locally_with_their_exact_errors() {
        let snap = snap_of(&[testing::expose(&["fx", "docs", "gone"])]);
        let e = error_of(resolve(
            &snap,
            None,
            &req("tools/call", json!({"name": "nope"})),
        ));
        assert_eq!((e.code, e.message.as_str()), (-32602, "Unknown tool: nope"));
        // A tool of an upstream that is down names the upstream and why.
        let e = error_of(resolve(
            &snap,
            None,
            &req("tools/call", json!({"name": "gone_x"})),
        ));
        assert_eq!(e.code, -32000);
        assert_eq!(e.message, "Upstream 'gone' is unavailable: it crashed");
        let e = error_of(resolve(&snap, None, &req("tools/call", json!({}))));
        assert_eq!(e.message, "tools/call needs params.name");
    }

    #[test]
    fn gateway_tools_resolve_to_what_they_do() {
        let snap = snap_of(&[
            testing::expose(&["fx"]),
            (
                "sluice.json",
                json!({"funnel": true, "management_tools": true}),
            ),
        ]);
        let t = |name: &str| resolve(&snap, None, &req("tools/call", json!({"name": name})));
        assert!(matches!(
            t("sluice_run_tool"),
            Target::Gateway(GatewayTool::RunTool)
        ));
        assert!(matches!(
            t("sluice_list_tools"),
            Target::Gateway(GatewayTool::ListTools)
        ));
        assert!(matches!(
            t("sluice_hook_set"),
            Target::Gateway(GatewayTool::Manage(crate::gateway_tools::ManageOp::HookSet))
        ));
    }

    #[test]
    fn prompts_resources_and_completions_go_to_their_upstream() {
        let snap = snap_of(&[testing::expose(&["fx", "docs"])]);
        fn upstream(t: Target<'_>) -> Upstream<'_> {
            match t {
                Target::Upstream(u) => u,
                other => panic!("expected an upstream, got {other:?}"),
            }
        }
        let u = upstream(resolve(
            &snap,
            None,
            &req("prompts/get", json!({"name": "docs_greet"})),
        ));
        assert_eq!(
            (u.slot.spec.id.as_str(), u.name.as_deref()),
            ("docs", Some("greet"))
        );
        let u = upstream(resolve(
            &snap,
            None,
            &req("resources/subscribe", json!({"uri": "doc://a"})),
        ));
        let sub = u.subscription.expect("a subscription");
        assert_eq!(
            (sub.uri.as_str(), sub.on, sub.local),
            ("doc://a", true, false)
        );
        // A URI nobody lists goes to the one upstream with resources.
        let u = upstream(resolve(
            &snap,
            None,
            &req("resources/read", json!({"uri": "doc://other"})),
        ));
        assert_eq!(u.slot.spec.id, "docs");
        let c = req(
            "completion/complete",
            json!({"ref": {"type": "ref/prompt", "name": "docs_greet"}}),
        );
        let u = upstream(resolve(&snap, None, &c));
        assert_eq!(u.name.as_deref(), Some("greet"));
        assert!(!u.rounds);
        let mut renamed = c.clone();
        rename(&mut renamed, "greet");
        assert_eq!(renamed.params().unwrap()["ref"]["name"], json!("greet"));
    }

    #[test]
    fn a_request_kept_as_text_is_renamed_without_rewriting_the_rest() {
        let text = br#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"fx_echo","arguments":{"n":1.10,"s":"\n"}}}"#;
        let mut call = Message::parse(text).unwrap();
        rename(&mut call, "echo");
        assert_eq!(call.param_str("name"), Some("echo"));
        assert_eq!(
            call.to_json(),
            r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{"n":1.10,"s":"\n"}}}"#
        );
        // Already the upstream's name: nothing changes.
        let mut same = Message::parse(text).unwrap();
        rename(&mut same, "fx_echo");
        assert_eq!(same.to_json().as_bytes(), text);
        // A prompt's completion renames its ref (parsed then: the name is inside it).
        let text = br#"{"jsonrpc":"2.0","id":4,"method":"completion/complete","params":{"ref":{"type":"ref/prompt","name":"docs_greet"},"argument":{"name":"n","value":"x"}}}"#;
        let mut c = Message::parse(text).unwrap();
        rename(&mut c, "greet");
        assert_eq!(
            c.to_json(),
            r#"{"jsonrpc":"2.0","id":4,"method":"completion/complete","params":{"ref":{"type":"ref/prompt","name":"greet"},"argument":{"name":"n","value":"x"}}}"#
        );
    }

    #[test]
    fn lists_pings_and_unknown_methods_are_local() {
        let snap = snap_of(&[
            testing::expose(&["fx", "docs"]),
            ("sluice.json", json!({"page_size": 1})),
        ]);
        match resolve(&snap, None, &req("tools/list", json!({}))) {
            Target::Local(Ok(page)) => {
                assert_eq!(page["tools"][0]["name"], json!("fx_echo"));
                assert!(page["nextCursor"].is_string());
            }
            other => panic!("expected a page, got {other:?}"),
        }
        assert!(
            matches!(resolve(&snap, None, &req("ping", json!({}))), Target::Local(Ok(v)) if v == json!({}))
        );
        assert_eq!(
            error_of(resolve(&snap, None, &req("nope/nope", json!({})))).code,
            -32601
        );
        assert!(matches!(
            resolve(&snap, None, &req("logging/setLevel", json!({"level": "info"}))),
            Target::SetLevel(l) if l == "info"
        ));
    }

    #[test]
    fn lists_leave_out_what_the_caller_may_not_use() {
        let rules = json!({"enabled": false, "rules": [{"effect": "deny", "tools": ["fx_add"]}]});
        let snap = snap_of(&[testing::expose(&["fx"]), ("auth/auth.config.json", rules)]);
        let Target::Local(Ok(page)) = resolve(&snap, None, &req("tools/list", json!({}))) else {
            panic!("expected a page")
        };
        let names: Vec<&str> = page["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["fx_echo"]);
    }
}
