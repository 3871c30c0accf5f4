//! `subscriptions/listen`: register a 2026-07-28 client's notification stream and acknowledge
//! what Sluice will send on it.
//!
//! Wire format. The request (its id names the stream):
//!
//! ```json
//! {"jsonrpc": "2.0", "id": 5, "method": "subscriptions/listen", "params": {
//!   "_meta": {…the request envelope…},
//!   "notifications": {"toolsListChanged": true, "promptsListChanged": true,
//!                     "resourcesListChanged": true, "resourceSubscriptions": ["file:///a"]}}}
//! ```
//!
//! The stream's first message is the acknowledgement, listing only what Sluice honours (the
//! flags set to `true`, and the URIs some upstream serves, sorted; Sluice subscribes upstream
//! once per URI):
//!
//! ```json
//! {"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged", "params": {
//!   "notifications": {"toolsListChanged": true, "resourceSubscriptions": ["file:///a"]},
//!   "_meta": {"io.modelcontextprotocol/subscriptionId": 5}}}
//! ```
//!
//! Then `notifications/{tools,prompts,resources}/list_changed` and
//! `notifications/resources/updated` (`{"uri": …}`), each with the same `_meta`
//! `subscriptionId`, until the client closes the stream (HTTP) or cancels the request (stdio).
//! The registry that sends them is `crate::listeners`.

use crate::listeners::Listener;
use crate::state::State;
use serde_json::{json, Map, Value};
use sluice_core::version::meta;
use sluice_core::Message;
use tokio::sync::mpsc;

/// Register a listen stream: its acknowledgement (the notification types Sluice honours of
/// those asked for), and the receiver of its notifications.
pub(crate) fn subscribe(
    st: &State,
    id: Value,
    msg: &Message,
    endpoint: Option<&str>,
) -> (Message, mpsc::UnboundedReceiver<Message>) {
    let filter = msg
        .params()
        .and_then(|p| p.get("notifications"))
        .cloned()
        .unwrap_or(json!({}));
    let want = |k: &str| filter.get(k).and_then(Value::as_bool).unwrap_or(false);
    let (tools, prompts, resources) = (
        want("toolsListChanged"),
        want("promptsListChanged"),
        want("resourcesListChanged"),
    );
    let mut honoured = Map::new();
    for (k, on) in [
        ("toolsListChanged", tools),
        ("promptsListChanged", prompts),
        ("resourcesListChanged", resources),
    ] {
        if on {
            honoured.insert(k.into(), json!(true));
        }
    }
    // Resource updates: for the URIs an upstream serves, Sluice subscribes upstream (once per
    // URI) and relays the updates; URIs nobody serves are left out of the acknowledgement.
    let root = st.snapshot();
    let catalog = match endpoint {
        None => root.catalog.clone(),
        Some(name) => root
            .endpoint(name)
            .map_or_else(Default::default, |e| e.catalog.clone()),
    };
    let mut uris = std::collections::HashSet::new();
    for uri in filter
        .get("resourceSubscriptions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
    {
        if let Some(slot) = crate::proxy::route::resource_slot(&catalog, uri) {
            slot.watch_resource(uri);
            uris.insert(uri.to_string());
        }
    }
    if !uris.is_empty() {
        let mut list: Vec<&String> = uris.iter().collect();
        list.sort();
        honoured.insert("resourceSubscriptions".into(), json!(list));
    }
    let (tx, rx) = mpsc::unbounded_channel::<Message>();
    let ack = Message::notification(
        "notifications/subscriptions/acknowledged",
        Some(json!({"notifications": honoured, "_meta": {meta::SUBSCRIPTION_ID: id}})),
    );
    st.rt.listeners().add(Listener {
        id,
        tools,
        prompts,
        resources,
        uris,
        since: catalog.version,
        tx,
        endpoint: endpoint.map(Into::into),
    });
    (ack, rx)
}
